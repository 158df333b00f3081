// Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv.
#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "ep/input_facts.h"
#include "ir/byte_transpose.h"
#include "ops/cast/dynamic_quantize.h"
#include "ops/conv/conv_engine.h"
#include "ops/linalg/qgemm_u8s8.h"

namespace nxrt::ops {

namespace {

using ep::InputFacts;
using ep::variant_error;
using ep::variant_or_make;

// The thread slots a conv plan runs on (none when it needs none).
Result<ep::SlotMemory> plan_slots(ep::KernelContext& ctx, const ConvPlan& plan) {
  if (plan.slot_bytes == 0) return ep::SlotMemory{};
  return ctx.thread_slots(plan.slot_bytes);
}

template <typename T>
using ct_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Any numeric tensor's values as CT.
template <typename CT>
Result<std::vector<CT>> tensor_values(const Tensor& t) {
  std::vector<CT> out(static_cast<size_t>(t.numel()));
  Status st = dispatch_numeric(
      t.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        convert_buffer<T, CT>(t.data<T>(), out.data(), t.numel());
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("unsupported dtype ") + dtype_name(t.dtype())); });
  if (!st.ok()) return st;
  return out;
}

// A constant float-typed W (float32, float16, bfloat16) prepared into w: float32 packed straight from
// the initializer, the others converted first. Returns whether it was prepared.
bool prepare_float_weights(ConvWeights<float>& w, const Tensor& W, int64_t group, bool winograd) {
  if (W.dtype() == DataType::kFloat && W.is_contiguous()) {
    w.prepare(W.shape(), group, W.data<float>(), winograd);
    return true;
  }
  auto v = tensor_values<float>(W);
  if (!v.ok()) return false;
  w.prepare(W.shape(), group, std::move(v.value()), winograd);
  return true;
}

Dims spatial_of(const Dims& shape) { return Dims(shape.begin() + 2, shape.end()); }

// Checks X/W of a forward conv and fills the shape; `err` makes the error from its message.
template <typename Err>
Status conv_shape_checked(const WindowAttrs& attrs, int64_t group, const Dims& x, const Dims& w, ConvShape* s,
                          Err err) {
  if (x.size() < 3) return err("input X must have rank >= 3 (N, C, spatial...), got " + shape_to_string(x));
  if (w.size() != x.size()) {
    return err("W " + shape_to_string(w) + " must have the same rank as X " + shape_to_string(x));
  }
  if (group < 1) return err("group must be >= 1, got " + std::to_string(group));
  if (w[1] * group != x[1]) {
    return err("X has " + std::to_string(x[1]) + " channels but W " + shape_to_string(w) + " with group " +
                     std::to_string(group) + " expects " + std::to_string(w[1] * group));
  }
  if (w[0] % group != 0) {
    return err("W's output channels " + std::to_string(w[0]) + " are not divisible by group " +
                     std::to_string(group));
  }
  Dims kernel = spatial_of(w);
  if (!attrs.kernel_shape.empty() && attrs.kernel_shape != kernel) {
    return err("kernel_shape " + shape_to_string(attrs.kernel_shape) + " does not match W " +
                     shape_to_string(w));
  }
  s->N = x[0];
  s->C = x[1];
  s->M = w[0];
  s->group = group;
  Status st = forward_geometry(attrs, spatial_of(x), kernel, &s->g);
  if (!st.ok()) return err(st.message(), st.code());
  return Status::Ok();
}

Status conv_shape(const ep::KernelContext& ctx, const WindowAttrs& attrs, int64_t group, const Dims& x,
                  const Dims& w, ConvShape* s) {
  return conv_shape_checked(attrs, group, x, w, s, [&](const std::string& m, StatusCode c = StatusCode::kRuntimeError) {
    return ctx.error(m, c);
  });
}

std::atomic<int64_t> g_conv_variants_live{0};

// A Conv node's state at one input shape: the engine's plan (path, padded-input layout, offsets, the
// path's extra weights) and the workspace it declares. Made by specialize, shared by concurrent runs.
struct ConvVariant final : ep::KernelVariant {
  ConvVariant() { g_conv_variants_live.fetch_add(1, std::memory_order_relaxed); }
  ~ConvVariant() override { g_conv_variants_live.fetch_sub(1, std::memory_order_relaxed); }
  size_t workspace_bytes() const override { return plan.workspace_bytes; }
  ConvPlan plan;
};

// ------------------------------------------------------------------------------------------------
// Conv

class ConvKernel final : public ep::Kernel, public ConvWithPost {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, false));
    group_ = info.attr_int("group", 1);
    if (group_ < 1) return info.error("group must be >= 1, got " + std::to_string(group_));
    cfg_ = conv_config(info);
    if (const Tensor* w = info.const_input(1)) {
      if (w->rank() >= 3 && w->dim(0) % group_ == 0) {
        if (w->dtype() == DataType::kDouble) {
          auto v = tensor_values<double>(*w);
          if (v.ok()) {
            wd_.prepare(w->shape(), group_, std::move(v.value()));
            have_wd_ = true;
          }
        } else if (dtype_is_float(w->dtype())) {
          have_wf_ = prepare_float_weights(wf_, *w, group_, unit_stride_dilation());
        }
      }
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    return dispatch_float(
        X.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx, nullptr, nullptr, nullptr);
        },
        [&] { return ctx.error(std::string("Conv does not support dtype ") + dtype_name(X.dtype())); });
  }

  Result<bool> compute_with_post(ep::KernelContext& ctx, const ConvPost& post, const Dims* residual_shape) const override {
    const Tensor& X = ctx.input(0);
    bool applied = false;
    NXRT_RETURN_IF_ERROR(dispatch_float(
        X.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx, &post, residual_shape, &applied);
        },
        [&] { return ctx.error(std::string("Conv does not support dtype ") + dtype_name(X.dtype())); }));
    return applied;
  }
  // Prepared constant weights are all run() uses (W's dtype must equal X's, its shape is fixed).
  bool reads_const_input_data(size_t i) const override { return !(i == 1 && (have_wf_ || have_wd_)); }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    return specialize_with_post(sc, false);
  }

  // A plan for the prepared weights at these shapes. None (compute plans per call or reports the
  // problem) when W is not a prepared constant or the shapes are wrong.
  Result<std::unique_ptr<ep::KernelVariant>> specialize_with_post(const ep::SpecializeContext& sc,
                                                                  bool pre_activation) const override {
    std::unique_ptr<ep::KernelVariant> none;
    if (!sc.has_input(0) || !sc.has_input(1) || sc.dtype(1) != sc.dtype(0)) return none;
    const DataType dt = sc.dtype(0);
    ConvShape s;
    auto err = [](const std::string& m, StatusCode c = StatusCode::kRuntimeError) { return Status(c, m); };
    if (!conv_shape_checked(attrs_, group_, sc.shape(0), sc.shape(1), &s, err).ok()) return none;
    if (s.N * s.M * s.g.out_size() == 0) return none;
    auto v = std::make_unique<ConvVariant>();
    if (dt == DataType::kDouble) {
      if (!have_wd_ || wd_.shape != sc.shape(1)) return none;
      v->plan = conv_plan<double>(s, wd_, cfg_, sc.num_threads(), false);
    } else if (dtype_is_float(dt)) {
      if (!have_wf_ || wf_.shape != sc.shape(1)) return none;
      // Only float X carries a post into the engine (run()).
      v->plan = conv_plan<float>(s, wf_, cfg_, sc.num_threads(), pre_activation && dt == DataType::kFloat);
    } else {
      return none;
    }
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

 private:
  // `post` (FusedConv) is passed on to the engine for float when the residual has Y's shape and is not
  // Y's buffer; *applied says whether it was applied.
  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx, const ConvPost* post, const Dims* residual_shape, bool* applied) const {
    const Tensor& X = ctx.input(0);
    if (!ctx.has_input(1)) return ctx.error("missing input W");
    const Tensor& W = ctx.input(1);
    if (W.dtype() != X.dtype()) {
      return ctx.error(std::string("W dtype ") + dtype_name(W.dtype()) + " differs from X dtype " +
                       dtype_name(X.dtype()));
    }
    ConvShape s;
    NXRT_RETURN_IF_ERROR(conv_shape(ctx, attrs_, group_, X.shape(), W.shape(), &s));
    const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (B && (B->dtype() != X.dtype() || B->numel() != s.M)) {
      return ctx.error("bias " + B->describe() + " must be " + dtype_name(X.dtype()) + " with " +
                       std::to_string(s.M) + " values");
    }
    if (post && post->input_shuffle > 1 && (!std::is_same_v<T, float> || s.C % post->input_shuffle != 0)) {
      return ctx.error("input shuffle of " + std::to_string(post->input_shuffle) +
                       " groups needs float X with a multiple of it as channels, got " + X.describe());
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), geom_output_shape(s.N, s.M, s.g)));
    if (Y->numel() == 0) return Status::Ok();

    const ConvWeights<CT>* wp = nullptr;
    ConvWeights<CT> local;
    // The variant's plan serves when it was made for these weights (the prepared ones) and this call.
    const auto* variant = dynamic_cast<const ConvVariant*>(ctx.variant());
    if constexpr (std::is_same_v<CT, double>) {
      if (have_wd_ && wd_.shape == W.shape()) wp = &wd_;
    } else {
      if (have_wf_ && wf_.shape == W.shape()) wp = &wf_;
    }
    if (!wp) {
      NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
      local.prepare(W.shape(), group_, std::move(wv), unit_stride_dilation());
      wp = &local;
    }
    std::vector<CT> bias;
    if (B) {
      NXRT_ASSIGN_OR_RETURN(bias, tensor_values<CT>(*B));
    }
    const CT* xp;
    std::vector<CT> xbuf;
    if constexpr (std::is_same_v<T, CT>) {
      xp = X.data<CT>();
    } else {
      xbuf.resize(static_cast<size_t>(X.numel()));
      convert_buffer<T, CT>(X.data<T>(), xbuf.data(), X.numel());
      xp = xbuf.data();
    }
    if constexpr (std::is_same_v<T, CT>) {
      const ConvPost* fused = nullptr;
      ConvPost shuffle_only;  // a post the residual keeps out: its input shuffle still applies
      if constexpr (std::is_same_v<T, float>) {
        if (post && (!post->residual || (residual_shape && *residual_shape == Y->shape() &&
                                         post->residual != Y->data<float>()))) {
          fused = post;
        } else if (post && post->input_shuffle > 1) {
          shuffle_only.input_shuffle = post->input_shuffle;
          fused = &shuffle_only;
        }
      }
      bool done;
      if (variant && wp != &local && conv_plan_fits(variant->plan, s, &ctx.pool(), fused)) {
        NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *variant));
        NXRT_ASSIGN_OR_RETURN(const ep::SlotMemory slots, plan_slots(ctx, variant->plan));
        done = conv_forward_planned<CT>(variant->plan, xp, *wp, B ? bias.data() : nullptr, Y->data<CT>(),
                                        &ctx.pool(), cfg_, fused, ws, slots);
      } else {
        done = conv_forward<CT>(s, xp, *wp, B ? bias.data() : nullptr, Y->data<CT>(), &ctx.pool(), cfg_, fused);
      }
      if (applied) *applied = fused && fused == post && done;
    } else {
      std::vector<CT> ybuf(static_cast<size_t>(Y->numel()));
      if (variant && wp != &local && conv_plan_fits(variant->plan, s, &ctx.pool(), nullptr)) {
        NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *variant));
        NXRT_ASSIGN_OR_RETURN(const ep::SlotMemory slots, plan_slots(ctx, variant->plan));
        conv_forward_planned<CT>(variant->plan, xp, *wp, B ? bias.data() : nullptr, ybuf.data(), &ctx.pool(), cfg_,
                                 nullptr, ws, slots);
      } else {
        conv_forward<CT>(s, xp, *wp, B ? bias.data() : nullptr, ybuf.data(), &ctx.pool(), cfg_);
      }
      T* yo = Y->data<T>();
      for (int64_t i = 0; i < Y->numel(); ++i) yo[i] = from_ct<T>(ybuf[i]);
    }
    return Status::Ok();
  }

  // Stride 1 and dilation 1 on every axis: the Winograd path may apply (ConvWeights::prepare).
  bool unit_stride_dilation() const {
    for (int64_t v : attrs_.strides)
      if (v != 1) return false;
    for (int64_t v : attrs_.dilations)
      if (v != 1) return false;
    return true;
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  ConvConfig cfg_;  // the path / tier overrides, read at creation
  ConvWeights<float> wf_;
  ConvWeights<double> wd_;
  bool have_wf_ = false, have_wd_ = false;
};

// ------------------------------------------------------------------------------------------------
// ConvInteger and QLinearConv: exact integer sums, computed in double (exact below 2^53).

bool is_8bit(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// One output of QLinearConv's requantization as the spec's reference computes it: the exact sum plus
// the bias, times the scale, rounded half to even, plus y_zero_point, saturated to [lo, hi]; the byte of
// that uint8 or int8 value. The vector loops below do the same operations lane by lane (and call this
// for their tails).
inline uint8_t requantize_sum(double sum, double bias, double scale, double yzp, double lo, double hi) {
  const double q = std::min(hi, std::max(lo, round_half_even((sum + bias) * scale) + yzp));
  return static_cast<uint8_t>(static_cast<int32_t>(q));
}

#if defined(__x86_64__) || defined(__i386__)
// out[o] = the byte of min(hi, max(lo, nearbyint((sums[o] + bias[o]) * scale[o]) + yzp)) for o < n, four
// doubles at a time (vroundpd to nearest-even is nearbyint under the default mode; the same operations
// in the same order as the scalar loop, so the same results). QLinearConv's integer GEMM path, which
// runs only on AVX2 CPUs.
__attribute__((target("avx2,fma"))) void quantize_sums_avx2(const int32_t* sums, const double* bias, const double* scale,
                                                           int64_t n, double yzp, double lo, double hi, uint8_t* out) {
  const __m256d vz = _mm256_set1_pd(yzp), vlo = _mm256_set1_pd(lo), vhi = _mm256_set1_pd(hi);
  int64_t o = 0;
  for (; o + 4 <= n; o += 4) {
    const __m256d v = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtepi32_pd(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sums + o))),
                                                  _mm256_loadu_pd(bias + o)),
                                    _mm256_loadu_pd(scale + o));
    const __m256d r = _mm256_add_pd(_mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    // max(r, lo) gives lo for a NaN r, as std::max(lo, r) does; then min with hi.
    const __m128i q = _mm256_cvttpd_epi32(_mm256_min_pd(_mm256_max_pd(r, vlo), vhi));
    alignas(16) int32_t t[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(t), q);
    for (int i = 0; i < 4; ++i) out[o + i] = static_cast<uint8_t>(t[i]);
  }
  for (; o < n; ++o) out[o] = requantize_sum(static_cast<double>(sums[o]), bias[o], scale[o], yzp, lo, hi);
}

// quantize_sums_avx2 on AVX-512, 16 outputs a step (two halves of 8 doubles, the same operations in the
// same order, so the same bytes), narrowed to bytes with vpmovdb (the values are clamped to [lo, hi]
// first, so truncating to a byte keeps them); a masked tail.
#define NXRT_QSUMS_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")))
NXRT_QSUMS_AVX512 inline __m256i quantize_sums8_avx512(__m256i s32, const double* b, const double* sc, __mmask8 k,
                                                       __m512d vz, __m512d vlo, __m512d vhi) {
  const __m512d v = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtepi32_pd(s32), _mm512_maskz_loadu_pd(k, b)), _mm512_maskz_loadu_pd(k, sc));
  const __m512d r = _mm512_add_pd(_mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
  return _mm512_cvttpd_epi32(_mm512_min_pd(_mm512_max_pd(r, vlo), vhi));
}
NXRT_QSUMS_AVX512 void quantize_sums_avx512(const int32_t* sums, const double* bias, const double* scale, int64_t n,
                                            double yzp, double lo, double hi, uint8_t* out) {
  const __m512d vz = _mm512_set1_pd(yzp), vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
  int64_t o = 0;
  for (; o + 16 <= n; o += 16) {
    const __m512i s = _mm512_loadu_si512(sums + o);
    const __m256i a = quantize_sums8_avx512(_mm512_castsi512_si256(s), bias + o, scale + o, 0xFF, vz, vlo, vhi);
    const __m256i b = quantize_sums8_avx512(_mm512_extracti64x4_epi64(s, 1), bias + o + 8, scale + o + 8, 0xFF, vz, vlo, vhi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + o), _mm512_cvtepi32_epi8(_mm512_inserti64x4(_mm512_castsi256_si512(a), b, 1)));
  }
  for (; o < n; o += 8) {
    const int64_t r = std::min<int64_t>(8, n - o);
    const __mmask8 k = static_cast<__mmask8>((1u << r) - 1);
    const __m256i a = quantize_sums8_avx512(_mm256_maskz_loadu_epi32(k, sums + o), bias + o, scale + o, k, vz, vlo, vhi);
    _mm_mask_storeu_epi8(out + o, static_cast<__mmask16>(k), _mm256_cvtepi32_epi8(a));
  }
}

// The float-exact path's requantization of one output plane (its sums exact integers held as floats, one
// bias and scale): out[i] = the byte of min(hi, max(lo, nearbyint((sums[i] + bias) * scale) + yzp)), in
// double as quantize_sums_avx2, so the same bytes as the double engine's.
__attribute__((target("avx2,fma"))) void quantize_plane_avx2(const float* sums, int64_t n, double bias, double scale,
                                                            double yzp, double lo, double hi, uint8_t* out) {
  const __m256d vb = _mm256_set1_pd(bias), vs = _mm256_set1_pd(scale), vz = _mm256_set1_pd(yzp),
                vlo = _mm256_set1_pd(lo), vhi = _mm256_set1_pd(hi);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d v = _mm256_mul_pd(_mm256_add_pd(_mm256_cvtps_pd(_mm_loadu_ps(sums + i)), vb), vs);
    const __m256d r = _mm256_add_pd(_mm256_round_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    const __m128i q = _mm256_cvttpd_epi32(_mm256_min_pd(_mm256_max_pd(r, vlo), vhi));
    // int32 -> int16 -> bytes with saturation: exact, every value already in the output type's range.
    const __m128i w = _mm_packs_epi32(q, q);
    const int32_t four = _mm_cvtsi128_si32(lo < 0 ? _mm_packs_epi16(w, w) : _mm_packus_epi16(w, w));
    std::memcpy(out + i, &four, 4);
  }
  for (; i < n; ++i) out[i] = requantize_sum(static_cast<double>(sums[i]), bias, scale, yzp, lo, hi);
}
NXRT_QSUMS_AVX512 void quantize_plane_avx512(const float* sums, int64_t n, double bias, double scale, double yzp,
                                             double lo, double hi, uint8_t* out) {
  const __m512d vb = _mm512_set1_pd(bias), vs = _mm512_set1_pd(scale), vz = _mm512_set1_pd(yzp),
                vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m512d v = _mm512_mul_pd(_mm512_add_pd(_mm512_cvtps_pd(_mm256_loadu_ps(sums + i)), vb), vs);
    const __m512d r = _mm512_add_pd(_mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), vz);
    const __m256i q = _mm512_cvttpd_epi32(_mm512_min_pd(_mm512_max_pd(r, vlo), vhi));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm256_cvtepi32_epi8(q));
  }
  for (; i < n; ++i) out[i] = requantize_sum(static_cast<double>(sums[i]), bias, scale, yzp, lo, hi);
}
#endif


// Element i of a numeric tensor (a zero point, a scale, a bias value) as double, read in place.
Result<double> element_as_double(const Tensor& t, int64_t i) {
  double v = 0;
  NXRT_RETURN_IF_ERROR(dispatch_numeric(
      t.dtype(),
      [&](auto tag) {
        using E = decltype(tag);
        v = to_ct<double>(t.data<E>()[i]);
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("unsupported dtype ") + dtype_name(t.dtype())); }));
  return v;
}

// Every element of a numeric tensor as double into out[0, numel) (one dtype dispatch for all of them:
// per element, the lookups were ~1% of a QDQ ResNet-50 run, on the caller's serial path).
Status values_as_double(const Tensor& t, double* out) {
  return dispatch_numeric(
      t.dtype(),
      [&](auto tag) {
        using E = decltype(tag);
        const E* p = t.data<E>();
        for (int64_t i = 0; i < t.numel(); ++i) out[i] = to_ct<double>(p[i]);
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("unsupported dtype ") + dtype_name(t.dtype())); });
}

// A zero point (or scale) input at make time: absent, a scalar or `n` values.
Status check_per_channel(const InputFacts& in, size_t idx, int64_t n, const char* what) {
  if (!in.has(idx)) return Status::Ok();
  const int64_t count = shape_numel(in.shape(idx));
  if (count != 1 && count != n) {
    return variant_error(std::string(what) + " " + in.describe(idx) + " must be a scalar or have " +
                         std::to_string(n) + " values");
  }
  return Status::Ok();
}

// w - w_zero_point (scalar or per output channel) in double.
Result<std::vector<double>> centered_weights(const Tensor& W, const std::vector<double>& wzp) {
  NXRT_ASSIGN_OR_RETURN(std::vector<double> wv, tensor_values<double>(W));
  const int64_t M = W.rank() > 0 ? W.dim(0) : 0;
  const int64_t per_m = M > 0 ? W.numel() / M : 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < per_m; ++i) wv[m * per_m + i] -= wzp[wzp.size() == 1 ? 0 : m];
  return wv;
}

// Reductions short enough that float arithmetic gives the exact integer sums: every product of 8-bit
// values minus their zero points is at most 255 * 255 in magnitude, so any partial sum of up to
// kFloatExactTaps of them stays below 2^24, where float holds every integer (258 * 65025 < 2^24),
// whatever the order of the additions. Depthwise and small-group convs then take the float engine's
// kernels (its depthwise paths) instead of the double engine's: the same sums (a QDQ PP-OCRv4 det, whose
// depthwise convs took the double engine: 277 -> 79 ms a run, Zen 5, 1 thread).
constexpr int64_t kFloatExactTaps = 258;

// Weights prepared at creation when w (and its zero point, if given) are constants: float when the
// conv's reductions (C/group * kernel taps) stay float-exact, else double.
struct IntWeights {
  bool ready = false;
  bool in_float = false;  // wf holds them (else w)
  ConvWeights<double> w;
  ConvWeights<float> wf;
  // allow_float: false keeps the double engine (reference=1: its direct definition checks the others).
  void init(const ep::KernelInfo& info, size_t w_idx, size_t wzp_idx, int64_t group, bool allow_float) {
    const Tensor* W = info.const_input(w_idx);
    if (!W || W->rank() < 3 || group < 1 || W->dim(0) % group != 0 || !is_8bit(W->dtype())) return;
    std::vector<double> wzp{0.0};
    if (info.input_present(wzp_idx)) {
      const Tensor* z = info.const_input(wzp_idx);
      if (!z) return;
      auto v = read_double_values(*z);
      if (!v.ok() || (v->size() != 1 && static_cast<int64_t>(v->size()) != W->dim(0))) return;
      wzp = v.value();
    }
    auto wv = centered_weights(*W, wzp);
    if (!wv.ok()) return;
    const int64_t M = W->dim(0), taps = M > 0 ? W->numel() / M : 0;  // C/group * kernel volume
    if (allow_float && taps <= kFloatExactTaps) {
      // Centered 8-bit weights are integers in [-255, 255]: exact in float. No Winograd weights (its
      // transforms would not keep the sums exact).
      wf.prepare(W->shape(), group, std::vector<float>(wv.value().begin(), wv.value().end()));
      in_float = true;
    } else {
      w.prepare(W->shape(), group, std::move(wv.value()));
    }
    ready = true;
  }
};

// The sum of n bytes (psadbw, 16 at a time: a byte loop was a fifth of a 64-channel 3x3 QLinearConv).
inline uint32_t byte_sum(const uint8_t* p, int64_t n) {
  int64_t i = 0;
  uint64_t sum = 0;
#if defined(__x86_64__)
  __m128i acc = _mm_setzero_si128();
  for (; i + 16 <= n; i += 16) acc = _mm_add_epi64(acc, _mm_sad_epu8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i)), _mm_setzero_si128()));
  sum = static_cast<uint64_t>(_mm_cvtsi128_si64(acc)) + static_cast<uint64_t>(_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc)));
#endif
  for (; i < n; ++i) sum += p[i];
  return static_cast<uint32_t>(sum);
}

// dst[0, n) = src[0, n) inline (a patch row's runs are 3-256 bytes, where a memcpy call per run costs
// more than the copy): 16-byte vectors, the last one overlapping the one before; shorter runs as two
// overlapping 8- or 4-byte moves.
inline void copy_bytes(uint8_t* dst, const uint8_t* src, int64_t n) {
#if defined(__x86_64__)
  if (n >= 16) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    if (i < n)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + n - 16), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + n - 16)));
    return;
  }
#endif
  if (n >= 8) {
    uint64_t a, b;
    std::memcpy(&a, src, 8);
    std::memcpy(&b, src + n - 8, 8);
    std::memcpy(dst, &a, 8);
    std::memcpy(dst + n - 8, &b, 8);
  } else if (n >= 4) {
    uint32_t a, b;
    std::memcpy(&a, src, 4);
    std::memcpy(&b, src + n - 4, 4);
    std::memcpy(dst, &a, 4);
    std::memcpy(dst + n - 4, &b, 4);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i];
  }
}

// dst[i] = src[i] ^ 0x80 for i < n (int8 bytes as unsigned ones: value + 128), 16 at a time.
inline void flip_bytes(const uint8_t* src, int64_t n, uint8_t* dst) {
  int64_t i = 0;
#if defined(__x86_64__)
  const __m128i f = _mm_set1_epi8(static_cast<char>(0x80));
  for (; i + 16 <= n; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)), f));
#endif
  for (; i < n; ++i) dst[i] = static_cast<uint8_t>(src[i] ^ 0x80);
}


// W's zero points per output channel (M values) when w_zero_point is absent (zeros) or a constant of W's
// type holding 1 or M values; false otherwise (the weights are then not prepared at creation).
bool constant_weight_zero_points(const ep::KernelInfo& info, size_t wzp_idx, const Tensor& W, int64_t M, std::vector<int32_t>* zb) {
  zb->assign(static_cast<size_t>(M), 0);
  if (!info.input_present(wzp_idx)) return true;
  const Tensor* z = info.const_input(wzp_idx);
  if (!z || z->dtype() != W.dtype() || (z->numel() != 1 && z->numel() != M)) return false;
  for (int64_t m = 0; m < M; ++m) {
    auto v = element_as_double(*z, z->numel() == 1 ? 0 : m);
    if (!v.ok()) return false;
    (*zb)[static_cast<size_t>(m)] = static_cast<int32_t>(v.value());
  }
  return true;
}

// What gathering one patch row of K bytes for the 8-bit GEMM costs, in cycles (the address arithmetic,
// the copies): the estimate the implicit paths (implicit_gemm_rows, space_to_depth_rows) weigh their
// extra products against, each product costing 1/128 cycle (two 64-lane vpdpbusd a cycle).
inline double gathered_row_cycles(int64_t K) { return 64.0 + static_cast<double>(K) / 16.0; }

// Constant 8-bit weights packed at creation for the integer GEMM (ops/linalg/qgemm_u8s8.h), per group:
// B_g[k][o] = W[g * Mg + o] at k = tap * Cg + c (the taps outer, channels inner: a patch row is the
// input's channels at each tap, contiguous in the channels-last copy of x the conv gathers from).
struct IntQGemmWeights {
  ops::QGemmKernel kernel = ops::QGemmKernel::kNone;
  Dims shape;  // W's
  std::vector<ops::QGemmPackedB> groups;
  std::vector<int32_t> zb;  // w_zero_point per output channel
  // Whether the GEMM needs the patch rows' byte sums: their term is beta * SA with beta = zb - ob per
  // column (qgemm_u8s8.h), zero for every column of symmetric int8 weights (onnxruntime's quantize_static
  // default), and then the sums are neither gathered nor used.
  bool needs_row_sums = true;
  bool ready() const { return !groups.empty(); }
  void init(const ep::KernelInfo& info, size_t w_idx, size_t wzp_idx, int64_t group) {
    const Tensor* W = info.const_input(w_idx);
    if (!W || W->rank() < 3 || W->rank() > 5 || group < 1 || W->dim(0) % group != 0 || !is_8bit(W->dtype())) return;
    const int64_t M = W->dim(0), Mg = M / group, per_m = M > 0 ? W->numel() / M : 0;
    const int64_t Cg = W->dim(1), kvol = Cg > 0 ? per_m / Cg : 0;
    // Groups of fewer than kMinGroupOutputs outputs (depthwise) would fill a 16-column panel with one
    // column each: the double engine's depthwise path is faster there (a 64-channel 3x3 depthwise conv
    // on 56x56, Zen 5: 1.5 ms on it, 9.1 ms through the GEMM).
    constexpr int64_t kMinGroupOutputs = 8;
    if (M <= 0 || per_m <= 0 || Cg <= 0 || Mg < kMinGroupOutputs) return;
    std::vector<int32_t> zb;
    if (!constant_weight_zero_points(info, wzp_idx, *W, M, &zb)) return;
    kernel = ops::choose_qgemm_kernel(info.isa());
    if (kernel == ops::QGemmKernel::kNone) return;
    const uint8_t* w = static_cast<const uint8_t*>(W->raw_data());
    std::vector<uint8_t> bg(static_cast<size_t>(per_m * Mg));
    for (int64_t g = 0; g < group; ++g) {
      for (int64_t o = 0; o < Mg; ++o)
        for (int64_t c = 0; c < Cg; ++c)
          for (int64_t t = 0; t < kvol; ++t)
            bg[static_cast<size_t>((t * Cg + c) * Mg + o)] = w[(g * Mg + o) * per_m + c * kvol + t];
      groups.push_back(ops::qgemm_pack_b(bg.data(), W->dtype() == DataType::kInt8, per_m, Mg));
    }
    needs_row_sums = std::any_of(zb.begin(), zb.end(), [&](int32_t z) { return z != groups.front().ob; });
    this->zb = std::move(zb);
    shape = W->shape();
  }

  // The weights of a 2-D, one-group conv of stride s in both axes (s >= 2) with symmetric weights,
  // rewritten as a stride-1 conv over x's s x s space-to-depth image (each of its pixels the s x s
  // block of padded x's pixels, C' = s * s * C channels, c' = (sy * s + sx) * C + c): tap (T1, T2) of
  // the rewritten kernel, ceil(k / s) taps an axis, at sub-position (sy, sx) is the original tap
  // (T1 * s + sy, T2 * s + sx), and past the original kernel a zero weight (the zero point's byte). The
  // conv then runs as an implicit GEMM (no patch gathered), at the price of the zero taps' products: a
  // stem of few channels (7x7 stride 2 over 3 channels: 192 products a row for 147), whose patch rows
  // are short and costly to gather.
  ops::QGemmPackedB s2d;
  int64_t s2d_stride = 0, s2d_k1 = 0, s2d_k2 = 0;
  void init_space_to_depth(const ep::KernelInfo& info, size_t w_idx, int64_t group, const WindowAttrs& attrs) {
    const Tensor* W = info.const_input(w_idx);
    if (!ready() || needs_row_sums || group != 1 || !W || W->rank() != 4 || attrs.strides.size() != 2) return;
    const int64_t st = attrs.strides[0];
    if (st < 2 || attrs.strides[1] != st) return;
    for (int64_t d : attrs.dilations)
      if (d != 1) return;
    const int64_t M = W->dim(0), C = W->dim(1), k1 = W->dim(2), k2 = W->dim(3);
    const int64_t t1 = (k1 + st - 1) / st, t2 = (k2 + st - 1) / st, Cs = st * st * C;
    const int64_t K = C * k1 * k2, Ks = t1 * t2 * Cs;
    // Packed where space_to_depth_rows' estimate (the zero taps' products against gathering a patch row)
    // can favour it; a wider image only adds to the products.
    if (K <= 0 || t2 * Cs % 4 != 0 ||
        static_cast<double>(Ks - K) * static_cast<double>(M) / 128.0 >= gathered_row_cycles(K))
      return;
    const uint8_t* w = static_cast<const uint8_t*>(W->raw_data());
    std::vector<uint8_t> b(static_cast<size_t>(Ks * M));
    for (int64_t o = 0; o < M; ++o)
      for (int64_t a = 0; a < t1; ++a)
        for (int64_t e = 0; e < t2; ++e)
          for (int64_t sy = 0; sy < st; ++sy)
            for (int64_t sx = 0; sx < st; ++sx)
              for (int64_t c = 0; c < C; ++c) {
                const int64_t i = a * st + sy, j = e * st + sx;
                const int64_t k = ((a * t2 + e) * st * st + sy * st + sx) * C + c;
                b[static_cast<size_t>(k * M + o)] = i < k1 && j < k2 ? w[((o * C + c) * k1 + i) * k2 + j]
                                                                     : static_cast<uint8_t>(zb[static_cast<size_t>(o)]);
              }
    s2d = ops::qgemm_pack_b(b.data(), W->dtype() == DataType::kInt8, Ks, M);
    s2d_stride = st, s2d_k1 = t1, s2d_k2 = t2;
  }
};

// Constant 8-bit depthwise weights (group = C = M, one input channel per group, 2-D) for the
// channels-last depthwise path: per tap, each channel's w - w_zero_point as int32 (in [-255, 255]), so
// a tap's row of weights is contiguous like a channels-last pixel.
struct IntDepthwiseWeights {
  Dims shape;  // W's
  int64_t C = 0, taps = 0;
  std::vector<int32_t> w;    // [taps][C]
  std::vector<int16_t> w16;  // the same values as int16, for the vpmaddwd loops
  bool ready() const { return !w.empty(); }
  void init(const ep::KernelInfo& info, size_t w_idx, size_t wzp_idx, int64_t group) {
    const Tensor* W = info.const_input(w_idx);
    if (!W || W->rank() != 4 || !is_8bit(W->dtype()) || W->dim(1) != 1 || W->dim(0) != group || group < 1) return;
    std::vector<int32_t> zb;
    if (!constant_weight_zero_points(info, wzp_idx, *W, group, &zb)) return;
    C = group;
    taps = W->dim(2) * W->dim(3);
    w.assign(static_cast<size_t>(taps * C), 0);
    const uint8_t* raw = static_cast<const uint8_t*>(W->raw_data());
    const bool s8 = W->dtype() == DataType::kInt8;
    for (int64_t c = 0; c < C; ++c)
      for (int64_t t = 0; t < taps; ++t) {
        const int32_t v = s8 ? static_cast<int8_t>(raw[c * taps + t]) : raw[c * taps + t];
        w[static_cast<size_t>(t * C + c)] = v - zb[static_cast<size_t>(c)];
      }
    w16.assign(w.begin(), w.end());  // (each in [-255, 255])
    shape = W->shape();
  }
};

constexpr int64_t kDwPixels = 16;   // pixels of a depthwise conv's row per hand-off to the sink
constexpr int64_t kDwMaxTaps = 64;  // taps the depthwise path takes (8 x 8)

// Pixels of a channels-last depthwise conv: out[i * C + c] = sum over the `taps` taps of (x_t[c] - xzp)
// * w_t[c] for c < C, pixel i's tap t row of C codes at x[t] + i * step and w[t] its row of C weights.
// Exact in int32 (|x - xzp| and |w| <= 255, at most kDwMaxTaps taps). The vector forms below take 32
// (16) channels at a time with the taps' weights loaded once for all the pixels.
template <typename T>
void dw_pixels_plain(const T* const* x, int64_t step, const int32_t* const* w, int taps, int64_t C, int32_t xzp, int64_t np,
                     int32_t* out) {
  for (int64_t i = 0; i < np; ++i)
    for (int64_t c = 0; c < C; ++c) {
      int32_t acc = 0;
      for (int t = 0; t < taps; ++t) acc += (static_cast<int32_t>(x[t][i * step + c]) - xzp) * w[t][c];
      out[i * C + c] = acc;
    }
}
#if defined(__x86_64__) || defined(__i386__)
// dw_pixels with tap pairs through vpmaddwd: per pair, both taps' (x - xzp) as int16 interleaved
// channel by channel against the pair's interleaved int16 weights, one vpmaddwd adding both products
// of a channel into its int32 sum (exact: each product at most 255 * 255 in magnitude, the pair's sum
// within int32). The interleave works within 128-bit lanes, so the sums come out in two vectors of
// channel quarters, put back in order at the store. Half the multiply instructions and no int32
// widening of x (the vpmulld form: ~11% of a PP-OCRv4 det QDQ run). w16: the taps' int16 weight rows.
// 16 codes as int16 (a lambda would not get the function's target under GCC 12).
template <typename T>
__attribute__((target("avx2,fma"), always_inline)) inline __m256i codes16_avx2(const T* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return std::is_same_v<T, uint8_t> ? _mm256_cvtepu8_epi16(b) : _mm256_cvtepi8_epi16(b);
}
template <typename T>
__attribute__((target("avx2,fma"))) void dw_pixels_madd_avx2(const T* const* x, int64_t step, const int16_t* const* w16,
                                                             int taps, int64_t C, int32_t xzp, int64_t np, int32_t* out) {
  const __m256i z = _mm256_set1_epi16(static_cast<int16_t>(xzp));
  const int pairs = (taps + 1) / 2;
  int64_t c = 0;
  for (; c + 16 <= C; c += 16) {
    __m256i wlo[kDwMaxTaps / 2], whi[kDwMaxTaps / 2];
    for (int p = 0; p < pairs; ++p) {
      const __m256i wa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w16[2 * p] + c));
      const __m256i wb = 2 * p + 1 < taps ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w16[2 * p + 1] + c)) : _mm256_setzero_si256();
      wlo[p] = _mm256_unpacklo_epi16(wa, wb);
      whi[p] = _mm256_unpackhi_epi16(wa, wb);
    }
    for (int64_t i = 0; i < np; ++i) {
      __m256i alo = _mm256_setzero_si256(), ahi = alo;
      for (int p = 0; p < pairs; ++p) {
        const __m256i xa = _mm256_sub_epi16(codes16_avx2(x[2 * p] + i * step + c), z);
        // (an odd last tap pairs with a zero weight: its own row stands in for the missing one)
        const __m256i xb = _mm256_sub_epi16(codes16_avx2(x[2 * p + 1 < taps ? 2 * p + 1 : 2 * p] + i * step + c), z);
        alo = _mm256_add_epi32(alo, _mm256_madd_epi16(_mm256_unpacklo_epi16(xa, xb), wlo[p]));
        ahi = _mm256_add_epi32(ahi, _mm256_madd_epi16(_mm256_unpackhi_epi16(xa, xb), whi[p]));
      }
      // alo: channels 0-3 | 8-11, ahi: 4-7 | 12-15 (per 128-bit lane)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * C + c), _mm256_permute2x128_si256(alo, ahi, 0x20));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i * C + c + 8), _mm256_permute2x128_si256(alo, ahi, 0x31));
    }
  }
  for (; c < C; ++c)
    for (int64_t i = 0; i < np; ++i) {
      int32_t acc = 0;
      for (int t = 0; t < taps; ++t) acc += (static_cast<int32_t>(x[t][i * step + c]) - xzp) * w16[t][c];
      out[i * C + c] = acc;
    }
}
// The same on AVX-512, 32 channels a step (a masked last step).
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))) void dw_pixels_madd_avx512(
    const T* const* x, int64_t step, const int16_t* const* w16, int taps, int64_t C, int32_t xzp, int64_t np, int32_t* out) {
  const __m512i z = _mm512_set1_epi16(static_cast<int16_t>(xzp));
  const int pairs = (taps + 1) / 2;
  // alo: channels 0-3, 8-11, 16-19, 24-27 of the step; ahi: 4-7, 12-15, 20-23, 28-31.
  const __m512i first = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second = _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int64_t c = 0; c < C; c += 32) {
    const int64_t left = C - c;
    const __mmask32 k = left >= 32 ? __mmask32(0xffffffffu) : static_cast<__mmask32>((1u << left) - 1);
    const __mmask16 k0 = static_cast<__mmask16>(k), k1 = static_cast<__mmask16>(k >> 16);
    __m512i wlo[kDwMaxTaps / 2], whi[kDwMaxTaps / 2];
    for (int p = 0; p < pairs; ++p) {
      const __m512i wa = _mm512_maskz_loadu_epi16(k, w16[2 * p] + c);
      const __m512i wb = 2 * p + 1 < taps ? _mm512_maskz_loadu_epi16(k, w16[2 * p + 1] + c) : _mm512_setzero_si512();
      wlo[p] = _mm512_unpacklo_epi16(wa, wb);
      whi[p] = _mm512_unpackhi_epi16(wa, wb);
    }
    for (int64_t i = 0; i < np; ++i) {
      __m512i alo = _mm512_setzero_si512(), ahi = alo;
      for (int p = 0; p < pairs; ++p) {
        const __m256i ba = _mm256_maskz_loadu_epi8(k, x[2 * p] + i * step + c);
        const __m256i bb = _mm256_maskz_loadu_epi8(k, x[2 * p + 1 < taps ? 2 * p + 1 : 2 * p] + i * step + c);
        const __m512i xa = _mm512_sub_epi16(std::is_same_v<T, uint8_t> ? _mm512_cvtepu8_epi16(ba) : _mm512_cvtepi8_epi16(ba), z);
        const __m512i xb = _mm512_sub_epi16(std::is_same_v<T, uint8_t> ? _mm512_cvtepu8_epi16(bb) : _mm512_cvtepi8_epi16(bb), z);
        alo = _mm512_add_epi32(alo, _mm512_madd_epi16(_mm512_unpacklo_epi16(xa, xb), wlo[p]));
        ahi = _mm512_add_epi32(ahi, _mm512_madd_epi16(_mm512_unpackhi_epi16(xa, xb), whi[p]));
      }
      _mm512_mask_storeu_epi32(out + i * C + c, k0, _mm512_permutex2var_epi32(alo, first, ahi));
      if (k1) _mm512_mask_storeu_epi32(out + i * C + c + 16, k1, _mm512_permutex2var_epi32(alo, second, ahi));
    }
  }
}
#endif


// A ConvInteger / QLinearConv node's state at one set of input dtypes and shapes: the checked shapes,
// the double engine's plan when the weights prepared at creation serve them, and the workspace: x
// minus its zero point and the exact sums (both in double), then the plan's own scratch.
struct IntegerConvVariant final : ep::KernelVariant {
  size_t workspace_bytes() const override { return scratch.bytes(); }
  InputFacts in;  // what it was made for
  ConvShape s;
  Dims y_shape;
  DataType y_dtype = DataType::kUndefined;  // QLinearConv's output dtype
  bool planned = false;
  ConvPlan plan;
  ScratchLayout scratch;
  size_t x_centered = 0, sums = 0, plan_ws = 0;
  // The integer GEMM path (IntQGemmWeights serve this W): x channels-last, the GEMM's workspace and one
  // group's int32 products [pixels, Mg]; x_centered and sums are then not laid out.
  bool qgemm = false;
  size_t q_xt = 0, q_psum = 0, q_ws = 0, q_y = 0;  // q_psum: each pixel's byte sum per group, int32
  // The implicit GEMM (implicit_gemm_rows): x copied once into a padded channels-last image (q_xpad), the
  // GEMM's rows read from it in place, q_rows of them (one per pixel of the padded width, the last
  // k - 1 of each output row computed and dropped); 0: patches gathered.
  size_t q_xpad = 0;
  int64_t q_rows = 0;
  // ... over the space-to-depth image of a strided conv (IntQGemmWeights::s2d; q_xpad holds that image).
  bool q_s2d = false;
  // The channels-last depthwise path (IntDepthwiseWeights): per output pixel, int32 sums of the taps
  // inside X, kDwPixels pixels at a time in a block of dw_acc owned by their output row.
  bool dw = false;
  size_t dw_acc = 0;  // (int32 [N * out rows, kDwPixels, C])
  // The float-exact path (IntWeights::in_float serve this W): x_centered and sums hold floats, and plan
  // is a float plan.
  bool in_float = false;
};

// What ConvInteger and QLinearConv share: attributes, weights prepared at creation, the path overrides,
// and the integer conv itself.
struct IntegerConv {
  WindowAttrs attrs;
  int64_t group = 1;
  IntWeights pre;
  IntQGemmWeights q;
  IntDepthwiseWeights dw;
  ConvConfig cfg;
  size_t w_idx = 1, xzp_idx = 2, wzp_idx = 3;
  // com.microsoft QLinearConv's channels_last: X [N, spatial..., C] and Y [N, spatial..., M] (W stays
  // [M, C/group, k...]); only on the integer GEMM path, whose patches come from a channels-last copy
  // anyway (onnxruntime's NHWC transformer writes it; so does nxrt's qlinear_channels_last pass).
  bool channels_last = false;
  Status init(const ep::KernelInfo& info, size_t w, size_t xzp, size_t wzp) {
    NXRT_RETURN_IF_ERROR(attrs.parse(info, false));
    group = info.attr_int("group", 1);
    channels_last = info.attr_int("channels_last", 0) != 0;
    w_idx = w, xzp_idx = xzp, wzp_idx = wzp;
    // The integer GEMM's packed weights when the tier has a kernel for them, else the double engine's
    // (8 bytes a weight: not both).
    cfg = conv_config(info);
    q.init(info, w_idx, wzp_idx, group);
    q.init_space_to_depth(info, w_idx, group, attrs);
    isa = info.isa();
    // Channels-last depthwise convs take their own path (the GEMM's needs 8 outputs a group).
    if (!q.ready() && channels_last) dw.init(info, w_idx, wzp_idx, group);
    if (!q.ready() && !dw.ready()) pre.init(info, w_idx, wzp_idx, group, cfg.path != ConvPath::kReference);
    return Status::Ok();
  }
  ep::IsaTier isa = ep::IsaTier::kScalar;

  // x_zero_point's value (0 when absent), which every path reads at each run.
  Result<double> x_zero_point(ep::KernelContext& ctx) const {
    if (!ctx.has_input(xzp_idx)) return 0.0;
    return element_as_double(ctx.input(xzp_idx), 0);
  }

  // The checks and buffers of the conv part (x at 0, w at w_idx, their zero points).
  Result<std::unique_ptr<IntegerConvVariant>> make_variant(const InputFacts& in, int threads) const {
    if (!in.has(0)) return variant_error("missing input x");
    if (!in.has(w_idx)) return variant_error("missing input w");
    if (!is_8bit(in.dtype(0)) || !is_8bit(in.dtype(w_idx))) {
      return variant_error(std::string("x and w must be uint8 or int8, got ") + dtype_name(in.dtype(0)) + " and " +
                           dtype_name(in.dtype(w_idx)));
    }
    auto v = std::make_unique<IntegerConvVariant>();
    v->in = in;
    ConvShape& s = v->s;
    // Channels-last X: its NCHW shape for the geometry (the channels moved to axis 1).
    Dims x_shape = in.shape(0);
    if (channels_last) {
      if (x_shape.size() < 3) return variant_error("channels_last X " + in.describe(0) + " must have rank >= 3");
      x_shape.insert(x_shape.begin() + 1, x_shape.back());
      x_shape.pop_back();
    }
    NXRT_RETURN_IF_ERROR(conv_shape_checked(attrs, group, x_shape, in.shape(w_idx), &s,
                                            [](const std::string& m, StatusCode c = StatusCode::kRuntimeError) {
                                              return variant_error(m, c);
                                            }));
    NXRT_RETURN_IF_ERROR(check_per_channel(in, xzp_idx, 1, "x_zero_point"));
    NXRT_RETURN_IF_ERROR(check_per_channel(in, wzp_idx, s.M, "w_zero_point"));
    v->y_shape = geom_output_shape(s.N, s.M, s.g);
    if (channels_last) {
      v->y_shape.erase(v->y_shape.begin() + 1);
      v->y_shape.push_back(s.M);
      if (dw.ready() && dw.shape == in.shape(w_idx) && s.g.in[0] == 1 && s.g.k[0] == 1 && s.M == s.C &&
          s.g.kvol() <= kDwMaxTaps) {
        v->dw = true;
        v->dw_acc = v->scratch.add<int32_t>(s.N * s.g.out[1] * kDwPixels * s.C);
        return v;
      }
      if (!(q.ready() && q.shape == in.shape(w_idx))) {
        return variant_error("channels_last is supported on the 8-bit GEMM path (constant 8-bit W with at least 8 "
                             "outputs per group, on an AVX2 or better tier) and for 2-D depthwise convs with constant W only",
                             StatusCode::kNotImplemented);
      }
    }
    if (q.ready() && q.shape == in.shape(w_idx) && s.N * s.M * s.g.out_size() > 0) {
      const int64_t P = s.g.out_size(), Mg = s.M / group;
      v->q_rows = implicit_gemm_rows(s);
      if (v->q_rows == 0) {
        v->q_rows = space_to_depth_rows(s);
        v->q_s2d = v->q_rows > 0;
      }
      const int64_t rows = v->q_rows > 0 ? v->q_rows : P;
      size_t ws = 0;
      for (const ops::QGemmPackedB& b : q.groups) ws = std::max(ws, ops::qgemm_workspace_bytes(b, rows, v->q_rows > 0));
      if (v->q_s2d) ws = std::max(ws, ops::qgemm_workspace_bytes(q.s2d, rows, true));
      // The channels-last copy of x: none for channels-last x that run_qgemm reads in place (uint8, or
      // copied straight into the padded image).
      const bool x_in_place = channels_last && (in.dtype(0) == DataType::kUInt8 || v->q_rows > 0);
      v->q_xt = v->scratch.add<uint8_t>(x_in_place ? 0 : s.g.in_size() * s.C);
      v->q_psum = v->scratch.add<int32_t>(q.needs_row_sums ? s.g.in_size() * group : 0);
      v->q_ws = v->scratch.add<unsigned char>(static_cast<int64_t>(ws));
      v->q_y = v->scratch.add<int32_t>(rows * Mg);
      if (v->q_s2d) {
        const Geom3& g3 = s.g;
        const int64_t st = q.s2d_stride;
        v->q_xpad = v->scratch.add<uint8_t>((g3.out[1] - 1 + q.s2d_k1) * (g3.out[2] - 1 + q.s2d_k2) * st * st * s.C);
      } else if (v->q_rows > 0) {
        const Geom3& g3 = s.g;
        v->q_xpad = v->scratch.add<uint8_t>((g3.in[1] + g3.pb[1] + g3.pe[1]) * (g3.in[2] + g3.pb[2] + g3.pe[2]) * s.C);
      }
      v->qgemm = true;
      return v;
    }
    if (pre.ready && pre.in_float && pre.wf.shape == in.shape(w_idx) && s.N * s.M * s.g.out_size() > 0) {
      const ConvConfig fcfg = float_cfg();
      v->x_centered = v->scratch.add<float>(s.N * s.C * s.g.in_size());
      v->sums = v->scratch.add<float>(s.N * s.M * s.g.out_size());
      v->plan = conv_plan<float>(s, pre.wf, fcfg, threads, false);
      v->planned = true;
      v->in_float = true;
      v->plan_ws = v->scratch.add<unsigned char>(static_cast<int64_t>(v->plan.workspace_bytes));
      return v;
    }
    // The double engine's centered x and sums (not needed on the integer GEMM path above).
    v->x_centered = v->scratch.add<double>(s.N * s.C * s.g.in_size());
    v->sums = v->scratch.add<double>(s.N * s.M * s.g.out_size());
    if (pre.ready && !pre.in_float && pre.w.shape == in.shape(w_idx) && s.N * s.M * s.g.out_size() > 0) {
      v->plan = conv_plan<double>(s, pre.w, cfg, threads, false);
      v->planned = true;
      v->plan_ws = v->scratch.add<unsigned char>(static_cast<int64_t>(v->plan.workspace_bytes));
    }
    return v;
  }

  // The GEMM rows of the implicit path for this conv, or 0 where patches are gathered instead. A
  // stride-1, undilated 2-D conv of one group (with symmetric weights: the patch rows' byte sums are not
  // needed) reads its patch rows straight from a padded channels-last copy of x: with the padded width
  // Wp, output pixel (o1, o2) is GEMM row o1 * Wp + o2, whose row of taps t1 is the k2 * C contiguous
  // bytes at padded pixel (o1 + t1, o2), and consecutive rows are one pixel apart (QGemmARows, one run
  // per row of taps). The rows o2 >= out2 of each output row are computed and dropped: (k2 - 1) / Wp of
  // the products. Taken where that waste costs less than gathering the patches, estimated per row
  // (gathered_row_cycles; the products K * Mg / 128).
  int64_t implicit_gemm_rows(const ConvShape& s) const {
    const Geom3& g3 = s.g;
    if (group != 1 || q.needs_row_sums || g3.in[0] != 1 || g3.k[0] != 1 || g3.kvol() == 1) return 0;
    for (int j = 0; j < 3; ++j)
      if (g3.s[j] != 1 || g3.d[j] != 1) return 0;
    if (g3.k[2] * s.C % 4 != 0) return 0;
    const int64_t Wp = g3.in[2] + g3.pb[2] + g3.pe[2], K = g3.kvol() * s.C;
    const double waste = static_cast<double>(g3.k[2] - 1) / static_cast<double>(Wp) * static_cast<double>(K * s.M) / 128.0;
    if (waste >= gathered_row_cycles(K)) return 0;
    return (g3.out[1] - 1) * Wp + g3.out[2];
  }

  // The GEMM rows of the space-to-depth implicit path (IntQGemmWeights::s2d) for this conv, or 0 where
  // patches are gathered instead: with the image's width Ws = out2 - 1 + ceil(k2 / s), output pixel (o1,
  // o2) is GEMM row o1 * Ws + o2. Taken where the zero taps' products and the dropped rows cost less than
  // gathering, by implicit_gemm_rows' estimate.
  int64_t space_to_depth_rows(const ConvShape& s) const {
    const Geom3& g3 = s.g;
    if (q.s2d.empty() || q.s2d.K <= 0 || g3.in[0] != 1 || g3.k[0] != 1 || g3.s[1] != q.s2d_stride ||
        g3.s[2] != q.s2d_stride || g3.d[1] != 1 || g3.d[2] != 1)
      return 0;
    const int64_t Ws = g3.out[2] - 1 + q.s2d_k2, K = g3.kvol() * s.C, Ks = q.s2d.K;
    const double extra = (static_cast<double>(Ks - K) + static_cast<double>(q.s2d_k2 - 1) / static_cast<double>(Ws) *
                                                            static_cast<double>(Ks)) * static_cast<double>(s.M) / 128.0;
    if (extra >= gathered_row_cycles(K)) return 0;
    return (g3.out[1] - 1) * Ws + g3.out[2];
  }

  // The exact sums through the integer GEMM: per image x goes channels-last (as unsigned bytes: int8
  // values + 128), then per group each block of output pixels gathers its patch rows (the channels at
  // each tap, x_zero_point where a tap falls in the padding, which centers to 0) inside the parallel
  // loop and multiplies them by the packed weights; the int32 sums go to y as doubles, in NCHW.
  // What the integer GEMM path hands its caller per image n, group g and block of output pixels
  // [p0, p1), as soon as the block is done, on the thread that computed it: the block's int32 sums as
  // [p1 - p0, Mg] rows (pixel p, the group's output channel o at (p - p0) * Mg + o). The channels-last
  // depthwise path hands whole pixels (g = 0, Mg = M: every channel).
  using GroupSums = ep::FunctionRef<void(int64_t n, int64_t g, int64_t p0, int64_t p1, const int32_t* sums)>;
  // QLinearConv's requantization for the GEMM tiles to do themselves, channels-last Y only: an
  // ops::QGemmRequant over the whole conv (M columns: per output channel the int32 bias and the scales;
  // y at Y's first byte, ldy M). `sink` is not called then. group_requant: image n, group g's part (GEMM
  // row m: output pixel m, the group's columns).
  ops::QGemmRequant group_requant(const ops::QGemmRequant& conv, const IntegerConvVariant& v, int64_t n, int64_t g) const {
    const int64_t Mg = v.s.M / group;
    ops::QGemmRequant rq = conv;
    rq.bias += g * Mg;
    rq.scale += g * Mg;
    rq.scale_d += g * Mg;
    rq.y += n * v.s.g.out_size() * conv.ldy + g * Mg;
    return rq;
  }
  Status run_qgemm(ep::KernelContext& ctx, const IntegerConvVariant& v, ScratchLayout& scratch, GroupSums sink,
                   const ops::QGemmRequant* tile_requant = nullptr) const {
    const ConvShape& s = v.s;
    const Geom3& g3 = s.g;
    const Tensor& X = ctx.input(0);
    const bool x_signed = X.dtype() == DataType::kInt8;
    const uint8_t flip = x_signed ? 0x80 : 0;
    NXRT_ASSIGN_OR_RETURN(const double xz, x_zero_point(ctx));
    const int32_t xzp = static_cast<int32_t>(xz);
    const uint8_t pad = static_cast<uint8_t>(static_cast<uint8_t>(xzp) ^ flip);
    const int32_t alpha = xzp + (x_signed ? 128 : 0);
    const int64_t C = s.C, Cg = C / group, Mg = s.M / group, P = g3.out_size(), plane = g3.in_size();
    const int64_t kvol = g3.kvol(), K = kvol * Cg;
    uint8_t* xt = scratch.at<uint8_t>(v.q_xt);
    int32_t* psum = scratch.at<int32_t>(v.q_psum);
    void* ws = scratch.at<unsigned char>(v.q_ws);
    int32_t* yq = scratch.at<int32_t>(v.q_y);
    const uint8_t* xb = static_cast<const uint8_t*>(X.raw_data());
    // A 1x1 conv without stride or pads over whole quads of channels multiplies the channels-last rows
    // where they are (patch row m is pixel m's channels); only the row sums are filled.
    const bool pointwise = group == 1 && kvol == 1 && C % 4 == 0 && P == plane && g3.s[0] == 1 && g3.s[1] == 1 &&
                           g3.s[2] == 1 && g3.pb[0] == 0 && g3.pb[1] == 0 && g3.pb[2] == 0;
    // Patch rows take their byte sums from per-pixel sums (psum) when taps are wide; with few channels a
    // group (a 3-channel stem) summing each gathered row costs less than a pass over every pixel.
    const bool use_psum = q.needs_row_sums && (pointwise || Cg >= 16);
    for (int64_t n = 0; n < s.N; ++n) {
      const uint8_t* xn = xb + n * C * plane;
      if (channels_last) {
        // X is channels-last already: read in place (uint8) or as a sign-flipped copy (int8), with the
        // pixels' byte sums per group.
        if (x_signed && v.q_rows == 0) xt = scratch.at<uint8_t>(v.q_xt);
        else xt = const_cast<uint8_t*>(xn);  // read only (the implicit path flips while padding)
        if ((x_signed && v.q_rows == 0) || use_psum)
        ctx.pool().parallel_for((plane + 15) / 16, 16, [&](int64_t b0, int64_t b1) {
          for (int64_t i = b0 * 16; i < std::min(plane, b1 * 16); ++i) {
            if (x_signed)
              for (int64_t c = 0; c < C; ++c) xt[i * C + c] = static_cast<uint8_t>(xn[i * C + c] ^ flip);
            if (use_psum)
              for (int64_t g = 0; g < group; ++g) psum[i * group + g] = static_cast<int32_t>(byte_sum(xt + i * C + g * Cg, Cg));
          }
        });
      } else
      // Channels-last in blocks of 16 pixels, so each block's rows (16 x C bytes) stay in L1 while every
      // channel plane contributes its 16 contiguous bytes.
      // Each pixel's byte sum per group (psum) with it: a patch row's sum is then the sum of its taps'.
      ctx.pool().parallel_for((plane + 15) / 16, 16, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t p0 = b * 16, np = std::min<int64_t>(16, plane - p0);
          int64_t c = 0;
#if defined(__x86_64__)
          // Whole 16 x 16 blocks (16 channels of 16 pixels) transposed in registers.
          if (np == 16)
            for (; c + 16 <= C; c += 16) ir::transpose_bytes_16x16(xn + c * plane + p0, plane, flip, xt + p0 * C + c, C);
#endif
          for (; c < C; ++c) {
            const uint8_t* src = xn + c * plane + p0;
            for (int64_t i = 0; i < np; ++i) xt[(p0 + i) * C + c] = static_cast<uint8_t>(src[i] ^ flip);
          }
          if (use_psum)
            for (int64_t i = p0; i < p0 + np; ++i)
              for (int64_t g = 0; g < group; ++g) psum[i * group + g] = static_cast<int32_t>(byte_sum(xt + i * C + g * Cg, Cg));
        }
      });
      if (v.q_rows > 0) {
        run_implicit(ctx, v, scratch, n, xt, channels_last ? flip : uint8_t{0}, pad, alpha, sink, tile_requant);
        continue;
      }
      for (int64_t g = 0; g < group; ++g) {
        const ops::QGemmPackedB& B = q.groups[static_cast<size_t>(g)];
        const int64_t kp = B.quads * 4;
        auto fill = [&](int64_t m0, int64_t m1, uint8_t* au, int32_t* sa) {
          const int32_t pad_sum = static_cast<int32_t>(pad) * static_cast<int32_t>(Cg);
          const bool span = group == 1 && g3.d[2] == 1;
          for (int64_t m = m0; m < m1; ++m) {
            const int64_t o2 = m % g3.out[2], o1 = (m / g3.out[2]) % g3.out[1], o0 = m / (g3.out[2] * g3.out[1]);
            uint8_t* dst = au + (m - m0) * kp;
            int64_t k = 0;
            int32_t sum = 0;
            for (int64_t t0 = 0; t0 < g3.k[0]; ++t0) {
              const int64_t i0 = o0 * g3.s[0] - g3.pb[0] + t0 * g3.d[0];
              for (int64_t t1 = 0; t1 < g3.k[1]; ++t1) {
                const int64_t i1 = o1 * g3.s[1] - g3.pb[1] + t1 * g3.d[1];
                const int64_t first = o2 * g3.s[2] - g3.pb[2];
                if (span && i0 >= 0 && i0 < g3.in[0] && i1 >= 0 && i1 < g3.in[1] && first >= 0 &&
                    first + g3.k[2] <= g3.in[2]) {
                  // A whole row of taps inside the image, one group spanning every channel: the taps'
                  // pixels are consecutive, so their channels are one run of k[2] * C bytes.
                  const int64_t pix = (i0 * g3.in[1] + i1) * g3.in[2] + first;
                  copy_bytes(dst + k, xt + pix * C, g3.k[2] * C);
                  if (use_psum)
                    for (int64_t t2 = 0; t2 < g3.k[2]; ++t2) sum += psum[pix + t2];
                  k += g3.k[2] * Cg;
                  continue;
                }
                for (int64_t t2 = 0; t2 < g3.k[2]; ++t2, k += Cg) {
                  const int64_t i2 = o2 * g3.s[2] - g3.pb[2] + t2 * g3.d[2];
                  if (i0 < 0 || i0 >= g3.in[0] || i1 < 0 || i1 >= g3.in[1] || i2 < 0 || i2 >= g3.in[2]) {
                    std::memset(dst + k, pad, static_cast<size_t>(Cg));
                    sum += pad_sum;
                  } else {
                    const int64_t pix = (i0 * g3.in[1] + i1) * g3.in[2] + i2;
                    copy_bytes(dst + k, xt + pix * C + g * Cg, Cg);
                    if (use_psum) sum += psum[pix * group + g];
                  }
                }
              }
            }
            std::memset(dst + K, 0, static_cast<size_t>(kp - K));
            sa[m - m0] = !q.needs_row_sums ? 0 : use_psum ? sum : static_cast<int32_t>(byte_sum(dst, K));
          }
        };
        auto block_done = [&](int64_t p0, int64_t p1) { sink(n, g, p0, p1, yq + p0 * Mg); };
        const ops::QGemmRowsDone done_sink(block_done);
        const ops::QGemmRowsDone* done = tile_requant ? nullptr : &done_sink;
        ops::QGemmRequant rq;
        if (tile_requant) rq = group_requant(*tile_requant, v, n, g);
        const ops::QGemmRequant* requant = tile_requant ? &rq : nullptr;
        if (pointwise) {  // (C == kp: C is a multiple of 4)
          auto sums_only = [&](int64_t m0, int64_t m1, uint8_t*, int32_t* sa) {
            if (q.needs_row_sums) std::memcpy(sa, psum + m0, static_cast<size_t>(m1 - m0) * sizeof(int32_t));
            else std::memset(sa, 0, static_cast<size_t>(m1 - m0) * sizeof(int32_t));
          };
          const ops::QGemmARows pixels{xt, kp};
          ops::qgemm_u8s8_rows(q.kernel, P, sums_only, alpha, B, q.zb.data(), yq, Mg, &ctx.pool(), ws, done, &pixels,
                               requant);
          continue;
        }
        ops::qgemm_u8s8_rows(q.kernel, P, fill, alpha, B, q.zb.data() + g * Mg, yq, Mg, &ctx.pool(), ws, done, nullptr,
                             requant);
      }
    }
    return Status::Ok();
  }

  // Image n through the implicit GEMM (implicit_gemm_rows): xt (channels-last, its bytes ^ flip unsigned)
  // into the padded image, the pad byte around it, then the GEMM over the padded width's rows, each
  // finished block's real pixels handed to `sink` (an output row's pixels o2 < out2 are GEMM rows
  // o1 * Wp + o2: each row's run of them handed on from its first GEMM row).
  void run_implicit(ep::KernelContext& ctx, const IntegerConvVariant& v, ScratchLayout& scratch, int64_t n,
                    const uint8_t* xt, uint8_t flip, uint8_t pad, int32_t alpha, GroupSums sink,
                    const ops::QGemmRequant* tile_requant) const {
    const Geom3& g3 = v.s.g;
    const int64_t C = v.s.C, Mg = v.s.M, H = g3.in[1], W = g3.in[2];
    int64_t Hp = H + g3.pb[1] + g3.pe[1], Wp = W + g3.pb[2] + g3.pe[2], out2 = g3.out[2];
    uint8_t* xpad = scratch.at<uint8_t>(v.q_xpad);
    int32_t* yq = scratch.at<int32_t>(v.q_y);
    // The image's pixels: C bytes, or s * s * C for the space-to-depth image; taps per row of the kernel.
    int64_t Cs = C, taps1 = g3.k[1];
    if (v.q_s2d) {
      // Pixel (Y, X) of the space-to-depth image holds padded x's pixels (Y * s + sy, X * s + sx) at
      // channels (sy * s + sx) * C; padded x's pixel (i, j) is x's (i - pb1, j - pb2), or pad bytes.
      const int64_t st = q.s2d_stride;
      Hp = g3.out[1] - 1 + q.s2d_k1, Wp = out2 - 1 + q.s2d_k2, Cs = st * st * C, taps1 = q.s2d_k1;
      const int64_t run = st * C;  // the bytes of one sy's part of a pixel: s pixels of x
      // Pixels [X0, X1) of row r, sy's part: padded pixels X * s .. X * s + s - 1 of row r * s + sy, s * C
      // contiguous bytes of x where they all lie inside it (one copy), else pixel by pixel.
      auto fill_part = [&](int64_t r, int64_t sy, int64_t X0, int64_t X1) {
        const int64_t i1 = r * st + sy - g3.pb[1];
        uint8_t* row = xpad + r * Wp * Cs + sy * run;
        if (i1 < 0 || i1 >= H) {
          for (int64_t X = X0; X < X1; ++X) std::memset(row + X * Cs, pad, static_cast<size_t>(run));
          return;
        }
        const uint8_t* src = xt + i1 * W * C;
        for (int64_t X = X0; X < X1; ++X) {
          uint8_t* d = row + X * Cs;
          const int64_t i2 = X * st - g3.pb[2];
          if (i2 >= 0 && i2 + st <= W && !flip) {
            std::memcpy(d, src + i2 * C, static_cast<size_t>(run));
            continue;
          }
          for (int64_t sx = 0; sx < st; ++sx)
            for (int64_t c = 0; c < C; ++c)
              d[sx * C + c] = i2 + sx < 0 || i2 + sx >= W ? pad : static_cast<uint8_t>(src[(i2 + sx) * C + c] ^ flip);
        }
      };
      // A 3-channel stride-2 stem (12-byte pixels, 6 bytes from each of two rows): inside the image, two
      // overlapping 8-byte copies a pixel, each one's 2 extra bytes overwritten by the next copy (the
      // last pixel of the run, whose extra bytes would land past it, is left to fill_part).
      const bool stem3 = st == 2 && C == 3 && !flip && W >= 3;
      const int64_t x_first = std::min(Wp, (g3.pb[2] + 1) / 2);  // the first X with X * 2 - pb2 >= 0
      // X * 2 - pb2 + 3 <= W keeps both 8-byte reads inside the row; X < Wp - 1 the writes.
      const int64_t x_end = std::max(x_first, std::min(Wp - 1, (W - 3 + g3.pb[2]) / 2 + 1));
      ctx.pool().parallel_for(Hp, 1, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t i1 = r * 2 - g3.pb[1];
          if (stem3 && i1 >= 0 && i1 + 1 < H && x_end > x_first) {
            const uint8_t* s0 = xt + i1 * W * C;
            const uint8_t* s1 = s0 + W * C;
            uint8_t* row = xpad + r * Wp * Cs;
            for (int64_t X = x_first; X < x_end; ++X) {
              const int64_t i2 = X * 2 - g3.pb[2];
              std::memcpy(row + X * 12, s0 + i2 * 3, 8);
              std::memcpy(row + X * 12 + 6, s1 + i2 * 3, 8);
            }
            for (int64_t sy = 0; sy < 2; ++sy) {
              fill_part(r, sy, 0, x_first);
              fill_part(r, sy, x_end, Wp);
            }
            continue;
          }
          for (int64_t sy = 0; sy < st; ++sy) fill_part(r, sy, 0, Wp);
        }
      });
    } else
    ctx.pool().parallel_for(Hp, std::max<int64_t>(1, 16384 / (Wp * C)), [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        uint8_t* dst = xpad + r * Wp * C;
        const int64_t i1 = r - g3.pb[1];
        if (i1 < 0 || i1 >= H) {
          std::memset(dst, pad, static_cast<size_t>(Wp * C));
          continue;
        }
        std::memset(dst, pad, static_cast<size_t>(g3.pb[2] * C));
        uint8_t* row = dst + g3.pb[2] * C;
        const uint8_t* src = xt + i1 * W * C;
        if (flip) flip_bytes(src, W * C, row);
        else std::memcpy(row, src, static_cast<size_t>(W * C));
        std::memset(row + W * C, pad, static_cast<size_t>(g3.pe[2] * C));
      }
    });
    const ops::QGemmPackedB& B = v.q_s2d ? q.s2d : q.groups.front();
    const ops::QGemmARows rows{xpad, Cs, taps1, Wp * Cs};
    auto no_sums = [&](int64_t m0, int64_t m1, uint8_t*, int32_t* sa) {
      std::memset(sa, 0, static_cast<size_t>(m1 - m0) * sizeof(int32_t));
    };
    auto block_done = [&](int64_t m0, int64_t m1) {
      for (int64_t o1 = m0 / Wp; o1 * Wp < m1; ++o1) {
        const int64_t a = std::max<int64_t>(0, m0 - o1 * Wp), b = std::min(out2, m1 - o1 * Wp);
        if (a < b) sink(n, 0, o1 * out2 + a, o1 * out2 + b, yq + (o1 * Wp + a) * Mg);
      }
    };
    const ops::QGemmRowsDone done(block_done);
    ops::QGemmRequant rq;
    if (tile_requant) {
      // GEMM row o1 * Wp + o2 is output pixel o1 * out2 + o2 (o2 < out2; the rest dropped).
      rq = group_requant(*tile_requant, v, n, 0);
      rq.row_period = Wp;
      rq.row_keep = out2;
    }
    ops::qgemm_u8s8_rows(q.kernel, v.q_rows, no_sums, alpha, B, q.zb.data(), yq, Mg, &ctx.pool(),
                         scratch.at<unsigned char>(v.q_ws), tile_requant ? nullptr : &done, &rows,
                         tile_requant ? &rq : nullptr);
  }

  // A channels-last 2-D depthwise conv (IntDepthwiseWeights): per output row of each image, per pixel,
  // the int32 sums over its taps inside X of (x - x_zero_point) * (w - w_zero_point), every channel at
  // once (a tap's channels are contiguous in X and in the weights), handed to `sink` kDwPixels pixels at
  // a time (g = 0, all M channels). Exact: at most 255 * 255 a product.
  Status run_depthwise(ep::KernelContext& ctx, const IntegerConvVariant& v, ScratchLayout& scratch, GroupSums sink) const {
    const ConvShape& s = v.s;
    const Geom3& g3 = s.g;
    const Tensor& X = ctx.input(0);
    NXRT_ASSIGN_OR_RETURN(const double xz, x_zero_point(ctx));
    const int32_t xzp = static_cast<int32_t>(xz);
    const int64_t C = s.C, H = g3.in[1], W = g3.in[2], out1 = g3.out[1], out2 = g3.out[2], k1 = g3.k[1], k2 = g3.k[2];
    if (k1 * k2 > kDwMaxTaps) return ctx.error("depthwise kernel of more than " + std::to_string(kDwMaxTaps) + " taps");
    int32_t* acc_rows = scratch.at<int32_t>(v.dw_acc);
    // Output columns whose taps all lie inside a row of X: [in_lo, in_hi).
    const int64_t s2 = g3.s[2], d2 = g3.d[2], pb2 = g3.pb[2];
    const int64_t in_lo = std::min(out2, (pb2 + s2 - 1) / s2);
    const int64_t last = W - 1 + pb2 - (k2 - 1) * d2;  // the largest o2 * s2 with every tap inside
    const int64_t in_hi = std::max(in_lo, std::min(out2, last < 0 ? int64_t{0} : last / s2 + 1));
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const T* x = static_cast<const T*>(X.raw_data());
      auto pixels = &dw_pixels_plain<T>;
      // (the vector forms take the int16 weight rows)
      void (*madd)(const T* const*, int64_t, const int16_t* const*, int, int64_t, int32_t, int64_t, int32_t*) = nullptr;
#if defined(__x86_64__) || defined(__i386__)
      if (isa >= ep::IsaTier::kAvx512) madd = &dw_pixels_madd_avx512<T>;
      else if (isa >= ep::IsaTier::kAvx2) madd = &dw_pixels_madd_avx2<T>;
#endif
      ctx.pool().parallel_for(s.N * out1, 1, [&](int64_t r0, int64_t r1) {
        const T* xs[kDwMaxTaps];
        const int32_t* ws[kDwMaxTaps];
        const int16_t* ws16[kDwMaxTaps];
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t n = r / out1, o1 = r % out1;
          int32_t* acc = acc_rows + r * kDwPixels * C;
          // The taps of output pixel o2 inside X (all of a row's valid rows of taps in the interior).
          auto gather = [&](int64_t o2, bool interior) {
            int taps = 0;
            for (int64_t t1 = 0; t1 < k1; ++t1) {
              const int64_t i1 = o1 * g3.s[1] - g3.pb[1] + t1 * g3.d[1];
              if (i1 < 0 || i1 >= H) continue;
              for (int64_t t2 = 0; t2 < k2; ++t2) {
                const int64_t i2 = o2 * s2 - pb2 + t2 * d2;
                if (!interior && (i2 < 0 || i2 >= W)) continue;
                xs[taps] = x + ((n * H + i1) * W + i2) * C;
                ws[taps] = dw.w.data() + (t1 * k2 + t2) * C;
                ws16[taps] = dw.w16.data() + (t1 * k2 + t2) * C;
                ++taps;
              }
            }
            return taps;
          };
          for (int64_t p0 = 0; p0 < out2; p0 += kDwPixels) {
            const int64_t p1 = std::min(out2, p0 + kDwPixels);
            for (int64_t o2 = p0; o2 < p1;) {
              if (o2 >= in_lo && o2 < in_hi) {  // a run of interior pixels: the taps one step apart
                const int64_t end = std::min(p1, in_hi);
                const int taps = gather(o2, true);
                if (madd) madd(xs, s2 * C, ws16, taps, C, xzp, end - o2, acc + (o2 - p0) * C);
                else pixels(xs, s2 * C, ws, taps, C, xzp, end - o2, acc + (o2 - p0) * C);
                o2 = end;
                continue;
              }
              const int taps = gather(o2, false);
              if (madd) madd(xs, 0, ws16, taps, C, xzp, 1, acc + (o2 - p0) * C);
              else pixels(xs, 0, ws, taps, C, xzp, 1, acc + (o2 - p0) * C);
              ++o2;
            }
            sink(n, 0, o1 * out2 + p0, o1 * out2 + p1, acc);
          }
        }
      });
    };
    if (X.dtype() == DataType::kUInt8) run(uint8_t{});
    else run(int8_t{});
    return Status::Ok();
  }

  // The float engine's settings for the float-exact path: never Winograd (its transforms round).
  ConvConfig float_cfg() const {
    ConvConfig f = cfg;
    f.auto_skips |= 1u << static_cast<int>(ConvPath::kWinograd);
    return f;
  }

  // The float-exact path: x - x_zero_point as floats (exact), the float engine's planned conv with the
  // centered float weights, the exact sums as floats in NCHW (*fsums).
  Status run_float(ep::KernelContext& ctx, const IntegerConvVariant& v, ScratchLayout& scratch, const float** fsums) const {
    const ConvShape& s = v.s;
    const Tensor& X = ctx.input(0);
    NXRT_ASSIGN_OR_RETURN(const double xz, x_zero_point(ctx));
    const float xzp = static_cast<float>(xz);
    float* xv = scratch.at<float>(v.x_centered);
    float* y = scratch.at<float>(v.sums);
    const int64_t n = X.numel();
    // The widening as DequantizeLinear's with scale 1 (ops/cast/dynamic_quantize.h), over the pool.
    constexpr int64_t kChunk = 16384;
    const bool x_signed = X.dtype() == DataType::kInt8;
    const uint8_t* xb = static_cast<const uint8_t*>(X.raw_data());
    ctx.pool().parallel_for((n + kChunk - 1) / kChunk, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c)
        dequantize_8bit(xb + c * kChunk, std::min(kChunk, n - c * kChunk), x_signed, 1.0f, xzp, xv + c * kChunk, cfg.isa);
    });
    if (conv_plan_fits(v.plan, s, &ctx.pool(), nullptr)) {
      NXRT_ASSIGN_OR_RETURN(const ep::SlotMemory slots, plan_slots(ctx, v.plan));
      conv_forward_planned<float>(v.plan, xv, pre.wf, nullptr, y, &ctx.pool(), float_cfg(), nullptr,
                                  scratch.at<unsigned char>(v.plan_ws), slots);
    } else {  // a variant made for another thread count: planned now
      conv_forward<float>(s, xv, pre.wf, nullptr, y, &ctx.pool(), float_cfg());
    }
    if (fsums) {
      *fsums = y;
      return Status::Ok();
    }
    return ctx.error("internal: the integer conv's float sums have no reader");
  }

  // The exact sums conv(x - x_zero_point, w - w_zero_point): through the integer GEMM when the variant
  // takes it (each group's int32 sums handed to `sink`, *sums left null), else as doubles in the
  // variant's workspace (*sums).
  Status run(ep::KernelContext& ctx, const IntegerConvVariant& v, const double** sums, GroupSums sink,
             const float** fsums = nullptr, const ops::QGemmRequant* tile_requant = nullptr) const {
    const ConvShape& s = v.s;
    const Tensor& X = ctx.input(0);
    const Tensor& W = ctx.input(w_idx);
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, v));
    ScratchLayout scratch = v.scratch;
    scratch.bind(ws);
    *sums = nullptr;
    if (fsums) *fsums = nullptr;
    const int64_t y_count = s.N * s.M * s.g.out_size();
    if (y_count == 0) return Status::Ok();
    // A variant is made for its inputs' shapes, so its qgemm means this W is the packed one.
    if (v.qgemm) return run_qgemm(ctx, v, scratch, sink, tile_requant);
    if (v.dw) return run_depthwise(ctx, v, scratch, sink);
    if (v.in_float) return run_float(ctx, v, scratch, fsums);
    double* y = scratch.at<double>(v.sums);
    *sums = y;
    NXRT_ASSIGN_OR_RETURN(const double xzp, x_zero_point(ctx));
    double* xv = scratch.at<double>(v.x_centered);
    if (X.dtype() == DataType::kUInt8) {
      const uint8_t* x = X.data<uint8_t>();
      for (int64_t i = 0; i < X.numel(); ++i) xv[i] = static_cast<double>(x[i]) - xzp;
    } else {
      const int8_t* x = X.data<int8_t>();
      for (int64_t i = 0; i < X.numel(); ++i) xv[i] = static_cast<double>(x[i]) - xzp;
    }
    // Weights prepared at creation serve when they are this W; others are centered now (they are data).
    ConvWeights<double> local;
    const ConvWeights<double>* w = &pre.w;
    if (!pre.ready || pre.w.shape != W.shape()) {
      std::vector<double> wzp{0.0};
      if (ctx.has_input(wzp_idx)) {
        NXRT_ASSIGN_OR_RETURN(wzp, read_double_values(ctx.input(wzp_idx)));
      }
      NXRT_ASSIGN_OR_RETURN(std::vector<double> wv, centered_weights(W, wzp));
      local.prepare(W.shape(), group, std::move(wv));
      w = &local;
    }
    std::fill(y, y + y_count, 0.0);
    if (v.planned && w == &pre.w && conv_plan_fits(v.plan, s, &ctx.pool(), nullptr)) {
      NXRT_ASSIGN_OR_RETURN(const ep::SlotMemory slots, plan_slots(ctx, v.plan));
      conv_forward_planned<double>(v.plan, xv, *w, nullptr, y, &ctx.pool(), cfg, nullptr,
                                   scratch.at<unsigned char>(v.plan_ws), slots);
    } else {
      conv_forward<double>(s, xv, *w, nullptr, y, &ctx.pool(), cfg);
    }
    return Status::Ok();
  }
};

class ConvIntegerKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) { return conv_.init(info, 1, 2, 3); }
  // Packed for the integer GEMM, W is read only through the packed copy (run checks just its shape).
  bool reads_const_input_data(size_t i) const override { return !(i == conv_.w_idx && conv_.q.ready()); }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    NXRT_ASSIGN_OR_RETURN(std::unique_ptr<IntegerConvVariant> v, conv_.make_variant(InputFacts::of(sc), sc.num_threads()));
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    std::unique_ptr<IntegerConvVariant> own;
    NXRT_ASSIGN_OR_RETURN(const IntegerConvVariant* v,
                          variant_or_make<IntegerConvVariant>(ctx, &own, [&](const InputFacts& in, int threads) {
                            return conv_.make_variant(in, threads);
                          }));
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, DataType::kInt32, v->y_shape));
    const double* y = nullptr;
    int32_t* yo = Y->data<int32_t>();
    const int64_t P = v->s.g.out_size(), M = v->s.M, Mg = M / conv_.group;
    // The GEMM path's [pixels, Mg] sums into Y's NCHW planes, block by block.
    auto sink = [&](int64_t n, int64_t g, int64_t p0, int64_t p1, const int32_t* sums) {
      for (int64_t o = 0; o < Mg; ++o) {
        int32_t* dst = yo + (n * M + g * Mg + o) * P;
        for (int64_t p = p0; p < p1; ++p) dst[p] = sums[(p - p0) * Mg + o];
      }
    };
    const float* fy = nullptr;
    NXRT_RETURN_IF_ERROR(conv_.run(ctx, *v, &y, sink, &fy));
    if (fy) {
      for (int64_t i = 0; i < Y->numel(); ++i) yo[i] = static_cast<int32_t>(fy[i]);  // exact integers
      return Status::Ok();
    }
    if (!y) return Status::Ok();
    for (int64_t i = 0; i < Y->numel(); ++i) yo[i] = static_cast<int32_t>(std::llround(y[i]));
    return Status::Ok();
  }

 private:
  IntegerConv conv_;
};

class QLinearConvKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    isa_ = info.isa();
    return conv_.init(info, 3, 2, 5);
  }
  // As ConvIntegerKernel's.
  bool reads_const_input_data(size_t i) const override { return !(i == conv_.w_idx && conv_.q.ready()); }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    NXRT_ASSIGN_OR_RETURN(std::unique_ptr<IntegerConvVariant> v, make_variant(InputFacts::of(sc), sc.num_threads()));
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    std::unique_ptr<IntegerConvVariant> own;
    NXRT_ASSIGN_OR_RETURN(const IntegerConvVariant* v,
                          variant_or_make<IntegerConvVariant>(ctx, &own, [&](const InputFacts& in, int threads) {
                            return make_variant(in, threads);
                          }));
    const ConvShape& s = v->s;
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, v->y_dtype, v->y_shape));
    if (Y->numel() == 0) {
      const double* none = nullptr;
      return conv_.run(ctx, *v, &none, [](int64_t, int64_t, int64_t, int64_t, const int32_t*) {});
    }
    // Per output channel: scale = x_scale * w_scale / y_scale and the bias, read once a call.
    const Tensor& w_scale = ctx.input(4);
    NXRT_ASSIGN_OR_RETURN(const double xs, element_as_double(ctx.input(1), 0));
    NXRT_ASSIGN_OR_RETURN(const double ys, element_as_double(ctx.input(6), 0));
    double yzp = 0;
    if (ctx.has_input(7)) {
      NXRT_ASSIGN_OR_RETURN(yzp, element_as_double(ctx.input(7), 0));
    }
    NXRT_ASSIGN_OR_RETURN(void* terms_ws, ctx.workspace(static_cast<size_t>(s.M) * (2 * sizeof(double) + sizeof(float) +
                                                                                      sizeof(int32_t))));
    double* scale = static_cast<double*>(terms_ws);
    double* bias = scale + s.M;
    // (w_scale holds 1 or M values and B M, as the variant checked.)
    NXRT_RETURN_IF_ERROR(values_as_double(w_scale, scale));
    if (w_scale.numel() == 1) std::fill(scale + 1, scale + s.M, scale[0]);
    for (int64_t m = 0; m < s.M; ++m) scale[m] = xs * scale[m] / ys;
    if (ctx.has_input(8)) NXRT_RETURN_IF_ERROR(values_as_double(ctx.input(8), bias));
    else std::fill(bias, bias + s.M, 0.0);
    const bool u8 = v->y_dtype == DataType::kUInt8;
    const double lo = u8 ? 0.0 : -128.0, hi = u8 ? 255.0 : 127.0;
    const int64_t plane = s.g.out_size();
    uint8_t* out = static_cast<uint8_t*>(Y->raw_data());
    // Channels-last Y on the GEMM path: the tiles requantize in registers (ops::QGemmRequant: the same
    // bytes, no int32 sums stored and read back) where the bias is int32 and S + bias cannot wrap.
    ops::QGemmRequant tile_requant;
    bool requant_in_tiles = false;
    if (conv_.channels_last && v->qgemm && conv_.q.kernel != ops::QGemmKernel::kNone &&
        (!ctx.has_input(8) || ctx.input(8).dtype() == DataType::kInt32)) {
      float* scale_f = reinterpret_cast<float*>(bias + s.M);
      int32_t* bias_i = reinterpret_cast<int32_t*>(scale_f + s.M);
      if (ctx.has_input(8)) std::memcpy(bias_i, ctx.input(8).data<int32_t>(), static_cast<size_t>(s.M) * sizeof(int32_t));
      else std::fill(bias_i, bias_i + s.M, 0);
      if (ops::qgemm_requant_exact(s.g.kvol() * (s.C / conv_.group), bias_i, scale, s.M)) {
        ops::qgemm_requant_scales(scale, s.M, scale_f);
        tile_requant.bias = bias_i;
        tile_requant.scale = scale_f;
        tile_requant.scale_d = scale;
        tile_requant.zero_point = static_cast<int32_t>(yzp);
        tile_requant.out_signed = !u8;
        tile_requant.y = out;
        tile_requant.ldy = s.M;
        requant_in_tiles = true;
      }
    }
    // Output channel m's byte from its exact sum (requantize_sum).
    auto quantize = [&](double sum, int64_t m) { return requantize_sum(sum, bias[m], scale[m], yzp, lo, hi); };
    // (the depthwise path hands every channel of a pixel at once)
    const int64_t Mg = v->dw ? s.M : s.M / conv_.group;
    // Blocks of kPixels pixels: each pixel's row of sums (contiguous over the channels) quantized into a
    // small tile, then written out channel by channel (kPixels contiguous bytes of each NCHW plane).
    // Whole 16 x 16 blocks of the tile (16 pixels of 16 channels) go to the planes through a byte
    // transpose; edges byte by byte.
    constexpr int64_t kPixels = 16, kChannels = 256;
    const bool avx512 = isa_ >= ep::IsaTier::kAvx512;
    auto sink = [&](int64_t n, int64_t g, int64_t q0, int64_t q1, const int32_t* sums) {
      if (conv_.channels_last) {
        // Y channels-last: each pixel's row of sums requantized straight into its row of Y.
        const double* sc = scale + g * Mg;
        const double* bi = bias + g * Mg;
        for (int64_t p = q0; p < q1; ++p) {
          uint8_t* dst = out + (n * plane + p) * s.M + g * Mg;
#if defined(__x86_64__) || defined(__i386__)
          if (avx512) quantize_sums_avx512(sums + (p - q0) * Mg, bi, sc, Mg, yzp, lo, hi, dst);
          else quantize_sums_avx2(sums + (p - q0) * Mg, bi, sc, Mg, yzp, lo, hi, dst);
#else
          for (int64_t o = 0; o < Mg; ++o) dst[o] = quantize(static_cast<double>(sums[(p - q0) * Mg + o]), g * Mg + o);
#endif
        }
        return;
      }
      uint8_t tile[kPixels][kChannels];
      for (int64_t p0 = q0; p0 < q1; p0 += kPixels) {
        const int64_t np = std::min(kPixels, q1 - p0);
          for (int64_t c0 = 0; c0 < Mg; c0 += kChannels) {
            const int64_t nc = std::min(kChannels, Mg - c0);
            const double* sc = scale + g * Mg + c0;
            const double* bi = bias + g * Mg + c0;
            for (int64_t i = 0; i < np; ++i) {
              const int32_t* row = sums + (p0 - q0 + i) * Mg + c0;
#if defined(__x86_64__) || defined(__i386__)
              // The GEMM path implies AVX2.
              if (avx512) quantize_sums_avx512(row, bi, sc, nc, yzp, lo, hi, tile[i]);
              else quantize_sums_avx2(row, bi, sc, nc, yzp, lo, hi, tile[i]);
#else
              for (int64_t o = 0; o < nc; ++o) tile[i][o] = quantize(static_cast<double>(row[o]), g * Mg + c0 + o);
#endif
            }
            uint8_t* base = out + (n * s.M + g * Mg + c0) * plane + p0;
            int64_t o = 0;
#if defined(__x86_64__)
            if (np == kPixels)
              for (; o + 16 <= nc; o += 16) ir::transpose_bytes_16x16(&tile[0][o], kChannels, 0, base + o * plane, plane);
#endif
            for (; o < nc; ++o)
              for (int64_t i = 0; i < np; ++i) base[o * plane + i] = tile[i][o];
          }
      }
    };
    const double* y = nullptr;
    const float* fy = nullptr;
    NXRT_RETURN_IF_ERROR(conv_.run(ctx, *v, &y, sink, &fy, requant_in_tiles ? &tile_requant : nullptr));
    if (fy) {
      ctx.pool().parallel_for(s.N * s.M, 4, [&](int64_t q0, int64_t q1) {
        for (int64_t q = q0; q < q1; ++q) {
          const int64_t m = q % s.M;
          const float* src = fy + q * plane;
          uint8_t* dst = out + q * plane;
#if defined(__x86_64__) || defined(__i386__)
          if (avx512) {
            quantize_plane_avx512(src, plane, bias[m], scale[m], yzp, lo, hi, dst);
            continue;
          }
          if (isa_ >= ep::IsaTier::kAvx2) {
            quantize_plane_avx2(src, plane, bias[m], scale[m], yzp, lo, hi, dst);
            continue;
          }
#endif
          for (int64_t i = 0; i < plane; ++i) dst[i] = quantize(static_cast<double>(src[i]), m);
        }
      });
      return Status::Ok();
    }
    if (!y) return Status::Ok();
    for (int64_t m = 0; m < s.M; ++m)
      for (int64_t n = 0; n < s.N; ++n) {
        const size_t base = static_cast<size_t>((n * s.M + m) * plane);
        for (int64_t i = 0; i < plane; ++i) out[base + i] = quantize(y[base + i], m);
      }
    return Status::Ok();
  }

 private:
  // The conv part's variant with QLinearConv's own checks: the scales, y_zero_point and the bias.
  Result<std::unique_ptr<IntegerConvVariant>> make_variant(const InputFacts& in, int threads) const {
    for (size_t i : {1, 4, 6}) {
      if (!in.has(i)) return variant_error("missing scale input " + std::to_string(i));
    }
    NXRT_ASSIGN_OR_RETURN(std::unique_ptr<IntegerConvVariant> v, conv_.make_variant(in, threads));
    const int64_t M = v->s.M;
    if (shape_numel(in.shape(1)) != 1 || shape_numel(in.shape(6)) != 1) {
      return variant_error("x_scale and y_scale must be scalars");
    }
    const int64_t w_scales = shape_numel(in.shape(4));
    if (w_scales != 1 && w_scales != M) {
      return variant_error("w_scale must be a scalar or have " + std::to_string(M) + " values");
    }
    NXRT_RETURN_IF_ERROR(check_per_channel(in, 7, 1, "y_zero_point"));
    v->y_dtype = in.has(7) ? in.dtype(7) : in.dtype(0);
    if (!is_8bit(v->y_dtype)) {
      return variant_error(std::string("y_zero_point must be uint8 or int8, got ") + dtype_name(v->y_dtype));
    }
    if (in.has(8) && shape_numel(in.shape(8)) != M) {
      return variant_error("B " + in.describe(8) + " must have " + std::to_string(M) + " values");
    }
    return v;
  }

  IntegerConv conv_;
  ep::IsaTier isa_ = ep::IsaTier::kScalar;  // the session's tier (info.isa()): the requantization's vectors
};
// ------------------------------------------------------------------------------------------------
// ConvTranspose: col = W_g^T * X_g (GEMM), then col2im scatter-adds into Y.

// One kernel tap of a ConvTranspose on the three normalized axes: input position i lands on output
// i * s + o0, and inputs [lo, hi) are those whose output lies inside Y (none: the tap adds nothing).
struct TransposedTap {
  int64_t o0[3];
  int64_t lo[3], hi[3];
  bool reaches_output = false;
};

// A ConvTranspose node's state at one set of input dtypes and shapes: the checked geometry, each tap's
// input ranges (the col2im loop bounds) and the workspace compute takes its buffers from.
struct ConvTransposeVariant final : ep::KernelVariant {
  size_t workspace_bytes() const override { return scratch.bytes(); }
  InputFacts in;  // what it was made for
  int64_t N = 0, C = 0, Cg = 0, M = 0, Mg = 0;
  Geom3 g;
  Dims y_shape;
  std::vector<TransposedTap> taps;  // kvol, in W's (kd, kh, kw) order
  // Workspace arrays (offsets into `scratch`): one group's column matrix (Mg * kvol rows of in_size);
  // for float16/bfloat16 X, one group's input converted, one image's output before conversion and,
  // like a bias of another dtype than the compute type, the bias converted; the float GEMM's packing
  // scratch, one slot per thread.
  ScratchLayout scratch;
  size_t col = 0, x_conv = 0, y_conv = 0, bias_conv = 0;
  bool converts_x = false, converts_bias = false;
  GemmSlots gemm;
  // The float path's per-group GEMM col = W_g^T (packed) * X_g, planned once for these shapes.
  GemmPlan gemm_plan;
};

class ConvTransposeKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, false));
    group_ = info.attr_int("group", 1);
    if (group_ < 1) return info.error("group must be >= 1, got " + std::to_string(group_));
    output_padding_ = info.attr_ints("output_padding");
    output_shape_ = info.attr_ints("output_shape");
    isa_ = info.isa();
    if (const Tensor* w = info.const_input(1)) {
      if (w->rank() >= 3 && w->dim(0) % group_ == 0) {
        if (w->dtype() == DataType::kDouble) {
          auto v = tensor_values<double>(*w);
          if (v.ok()) pack_transposed(w->shape(), v.value(), &packed_d_);
        } else if (dtype_is_float(w->dtype())) {
          auto v = tensor_values<float>(*w);
          if (v.ok()) pack_transposed(w->shape(), v.value(), &packed_f_);
        }
        packed_shape_ = w->shape();
      }
    }
    return Status::Ok();
  }
  // A constant W packed above is read only through the packed copy (compute checks just its shape).
  bool reads_const_input_data(size_t i) const override {
    return !(i == 1 && (!packed_f_.empty() || !packed_d_.empty()));
  }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    NXRT_ASSIGN_OR_RETURN(std::unique_ptr<ConvTransposeVariant> v, make_variant(InputFacts::of(sc), sc.num_threads()));
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    std::unique_ptr<ConvTransposeVariant> own;
    NXRT_ASSIGN_OR_RETURN(const ConvTransposeVariant* v,
                          variant_or_make<ConvTransposeVariant>(
                              ctx, &own, [&](const InputFacts& in, int threads) { return make_variant(in, threads); }));
    return dispatch_float(
        v->in.dtype(0),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx, *v);
        },
        [&] { return ctx.error(std::string("ConvTranspose does not support dtype ") + dtype_name(v->in.dtype(0))); });
  }

 private:
  Status geometry(const Dims& x, const Dims& w, Geom3* g) const {
    const size_t n = x.size() - 2;
    if (n < 1 || n > 3) return variant_error("only 1 to 3 spatial axes are supported, X is " + shape_to_string(x),
                                             StatusCode::kNotImplemented);
    Dims kernel(w.begin() + 2, w.end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return variant_error("kernel_shape " + shape_to_string(attrs_.kernel_shape) + " does not match W " +
                           shape_to_string(w));
    }
    auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* what) -> Status {
      if (!v.empty() && v.size() != want) {
        return variant_error(std::string(what) + " " + shape_to_string(v) + " must have " + std::to_string(want) +
                             " values");
      }
      return Status::Ok();
    };
    NXRT_RETURN_IF_ERROR(check_len(attrs_.strides, n, "strides"));
    NXRT_RETURN_IF_ERROR(check_len(attrs_.dilations, n, "dilations"));
    NXRT_RETURN_IF_ERROR(check_len(output_padding_, n, "output_padding"));
    if (attrs_.auto_pad == AutoPad::kNotSet && output_shape_.empty()) {
      NXRT_RETURN_IF_ERROR(check_len(attrs_.pads, 2 * n, "pads"));
    }
    if (!output_shape_.empty() && output_shape_.size() != n && output_shape_.size() != n + 2) {
      return variant_error("output_shape " + shape_to_string(output_shape_) + " must have " + std::to_string(n) +
                           " values");
    }
    *g = Geom3();
    g->nsp = static_cast<int>(n);
    const size_t off = 3 - n;
    for (size_t i = 0; i < n; ++i) {
      const size_t j = off + i;
      const int64_t in = x[2 + i], k = kernel[i];
      const int64_t s = attrs_.strides.empty() ? 1 : attrs_.strides[i];
      const int64_t d = attrs_.dilations.empty() ? 1 : attrs_.dilations[i];
      const int64_t op = output_padding_.empty() ? 0 : output_padding_[i];
      const int64_t dk = (k - 1) * d + 1;
      const int64_t full = s * (in - 1) + op + dk;
      int64_t pb = 0, pe = 0, out = 0;
      const bool same = attrs_.auto_pad == AutoPad::kSameUpper || attrs_.auto_pad == AutoPad::kSameLower;
      if (!output_shape_.empty() || same) {
        out = !output_shape_.empty() ? output_shape_[output_shape_.size() - n + i] : in * s;
        const int64_t total = full - out;  // negative: the output extends past the full result (zeros/bias)
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division
        if (attrs_.auto_pad == AutoPad::kSameUpper) {
          pb = half;
          pe = total - pb;
        } else {
          pe = half;
          pb = total - pe;
        }
      } else if (attrs_.auto_pad == AutoPad::kValid) {
        out = full;
      } else {
        if (!attrs_.pads.empty()) {
          pb = attrs_.pads[i];
          pe = attrs_.pads[i + n];
        }
        out = full - pb - pe;
      }
      if (out < 0) return variant_error("computed output size " + std::to_string(out) + " is negative");
      g->set_axis(j, in, out, k, s, d, pb, pe);
    }
    return Status::Ok();
  }

  // Everything compute needs that follows from the inputs' dtypes and shapes; the errors a wrong shape
  // gets (they name no node: the executor, or compute through ctx.error, adds it).
  Result<std::unique_ptr<ConvTransposeVariant>> make_variant(const InputFacts& in, int threads) const {
    if (!in.has(0)) return variant_error("missing input X");
    if (!in.has(1)) return variant_error("missing input W");
    const DataType dt = in.dtype(0);
    if (dt != DataType::kFloat && dt != DataType::kDouble && dt != DataType::kFloat16 && dt != DataType::kBFloat16) {
      return variant_error(std::string("ConvTranspose does not support dtype ") + dtype_name(dt));
    }
    if (in.dtype(1) != dt) {
      return variant_error(std::string("W dtype ") + dtype_name(in.dtype(1)) + " differs from X dtype " +
                           dtype_name(dt));
    }
    const Dims& xs = in.shape(0);
    const Dims& ws = in.shape(1);
    if (xs.size() < 3 || ws.size() != xs.size()) {
      return variant_error("X " + shape_to_string(xs) + " and W " + shape_to_string(ws) +
                           " must have the same rank >= 3");
    }
    auto v = std::make_unique<ConvTransposeVariant>();
    v->in = in;
    v->N = xs[0];
    v->C = xs[1];
    if (ws[0] != v->C || v->C % group_ != 0) {
      return variant_error("W " + shape_to_string(ws) + " must have X's " + std::to_string(v->C) +
                           " channels first, divisible by group " + std::to_string(group_));
    }
    v->Cg = v->C / group_;
    v->Mg = ws[1];
    v->M = v->Mg * group_;
    NXRT_RETURN_IF_ERROR(geometry(xs, ws, &v->g));
    if (in.has(2) && (in.dtype(2) != dt || shape_numel(in.shape(2)) != v->M)) {
      return variant_error("bias " + in.describe(2) + " must be " + dtype_name(dt) + " with " + std::to_string(v->M) +
                           " values");
    }
    v->y_shape = geom_output_shape(v->N, v->M, v->g);
    const Geom3& g = v->g;
    v->taps.resize(static_cast<size_t>(g.kvol()));
    for (int64_t kidx = 0; kidx < g.kvol(); ++kidx) {
      const int64_t kpos[3] = {kidx / (g.k[1] * g.k[2]), (kidx / g.k[2]) % g.k[1], kidx % g.k[2]};
      TransposedTap& t = v->taps[static_cast<size_t>(kidx)];
      t.reaches_output = true;
      for (int a = 0; a < 3; ++a) {
        t.o0[a] = kpos[a] * g.d[a] - g.pb[a];
        // inputs i with 0 <= i * s + o0 < out
        const int64_t lo = t.o0[a] >= 0 ? 0 : (-t.o0[a] + g.s[a] - 1) / g.s[a];
        const int64_t hi = (g.out[a] - 1 - t.o0[a]) < 0 ? 0 : (g.out[a] - 1 - t.o0[a]) / g.s[a] + 1;
        t.lo[a] = std::min(lo, g.in[a]);
        t.hi[a] = std::min(hi, g.in[a]);
        if (t.hi[a] <= t.lo[a]) t.reaches_output = false;
      }
    }
    const bool dbl = dt == DataType::kDouble;
    const size_t ct_bytes = dbl ? sizeof(double) : sizeof(float);
    const int64_t in_size = g.in_size(), out_size = g.out_size(), rows = v->Mg * g.kvol();
    auto add_ct = [&](int64_t n) { return v->scratch.add<unsigned char>(n * static_cast<int64_t>(ct_bytes)); };
    v->col = add_ct(rows * in_size);
    v->converts_x = dt == DataType::kFloat16 || dt == DataType::kBFloat16;
    if (v->converts_x) {
      v->x_conv = add_ct(v->Cg * in_size);
      v->y_conv = add_ct(v->M * out_size);
    }
    v->converts_bias = in.has(2) && v->converts_x;
    if (v->converts_bias) v->bias_conv = add_ct(v->M);
    if (!dbl) {
      v->gemm_plan = gemm_f32_plan(rows, in_size, v->Cg, GemmA::kPacked, GemmB::kRaw, false, false,
                                   std::max(1, threads), isa_);
      v->gemm.reserve(v->scratch, v->gemm_plan.scratch_floats, threads);
    }
    return v;
  }

  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx, const ConvTransposeVariant& v) const {
    const Tensor& X = ctx.input(0);
    const Tensor& W = ctx.input(1);
    const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), v.y_shape));
    if (Y->numel() == 0) return Status::Ok();
    const Geom3& g = v.g;
    const int64_t N = v.N, C = v.C, Cg = v.Cg, M = v.M, Mg = v.Mg;
    const int64_t kvol = g.kvol(), in_size = g.in_size(), out_size = g.out_size();
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, v));
    ScratchLayout scratch = v.scratch;
    scratch.bind(ws);
    // Constant weights were packed at creation; others are packed now (they are data).
    std::vector<PackedA<CT>> local;
    const std::vector<PackedA<CT>>* pk;
    if constexpr (std::is_same_v<CT, double>) {
      pk = &packed_d_;
    } else {
      pk = &packed_f_;
    }
    if (pk->empty() || packed_shape_ != W.shape()) {
      NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
      pack_transposed(W.shape(), wv, &local);
      pk = &local;
    }
    const std::vector<PackedA<CT>>& packed = *pk;
    const CT* bias = nullptr;
    if (B) {
      if constexpr (std::is_same_v<T, CT>) {
        bias = B->data<CT>();
      } else {
        CT* b = scratch.at<CT>(v.bias_conv);
        convert_buffer<T, CT>(B->data<T>(), b, M);
        bias = b;
      }
    }
    const GemmScratch gs = v.gemm.scratch(scratch);
    CT* col = scratch.at<CT>(v.col);
    const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2];
    for (int64_t n = 0; n < N; ++n) {
      // T == CT: X and Y are read and written in place; otherwise through the converted buffers.
      CT* y_image;
      if constexpr (std::is_same_v<T, CT>) {
        y_image = Y->data<CT>() + n * M * out_size;
      } else {
        y_image = scratch.at<CT>(v.y_conv);
      }
      for (int64_t gi = 0; gi < group_; ++gi) {
        const CT* xg;
        if constexpr (std::is_same_v<T, CT>) {
          xg = X.data<CT>() + (n * C + gi * Cg) * in_size;
        } else {
          CT* xc = scratch.at<CT>(v.x_conv);
          convert_buffer<T, CT>(X.data<T>() + (n * C + gi * Cg) * in_size, xc, Cg * in_size);
          xg = xc;
        }
        if constexpr (std::is_same_v<CT, float>) {
          gemm_f32_packed_a(v.gemm_plan, 1.f, packed[gi].data.data(), xg, in_size, 0.f, col, in_size, &ctx.pool(),
                            nullptr, &gs);
        } else {
          gemm_packed_a<CT>(packed[gi], in_size, false, xg, in_size, CT(0), col, in_size, &ctx.pool(), isa_, &gs);
        }
        auto body = [&](int64_t m0, int64_t m1) {
          for (int64_t m = m0; m < m1; ++m) {
            CT* yp = y_image + (gi * Mg + m) * out_size;
            std::fill(yp, yp + out_size, bias ? bias[gi * Mg + m] : CT(0));
            for (int64_t kidx = 0; kidx < kvol; ++kidx) {
              const TransposedTap& t = v.taps[static_cast<size_t>(kidx)];
              if (!t.reaches_output) continue;
              const CT* crow = col + (m * kvol + kidx) * in_size;
              const int64_t sw = g.s[2], ow0 = t.o0[2], lo = t.lo[2], hi = t.hi[2];
              for (int64_t id = t.lo[0]; id < t.hi[0]; ++id) {
                const int64_t od = id * g.s[0] + t.o0[0];
                for (int64_t ih = t.lo[1]; ih < t.hi[1]; ++ih) {
                  const int64_t oh = ih * g.s[1] + t.o0[1];
                  CT* yrow = yp + (od * OH + oh) * OW;
                  const CT* c = crow + (id * IH + ih) * IW;
                  for (int64_t iw = lo; iw < hi; ++iw) yrow[iw * sw + ow0] += c[iw];
                }
              }
            }
          }
        };
        ctx.pool().parallel_for(Mg, 1, body);
      }
      if constexpr (!std::is_same_v<T, CT>) {
        T* yo = Y->data<T>() + n * M * out_size;
        for (int64_t i = 0; i < M * out_size; ++i) yo[i] = from_ct<T>(y_image[i]);
      }
    }
    return Status::Ok();
  }

  // Per group, the GEMM operand W_g^T: (M/group * kvol) x (C/group).
  template <typename CT>
  void pack_transposed(const Dims& w_shape, const std::vector<CT>& wv, std::vector<PackedA<CT>>* out) const {
    const int64_t Cg = w_shape[0] / group_;
    const int64_t rows = shape_numel(w_shape) / std::max<int64_t>(1, w_shape[0]);
    out->clear();
    for (int64_t gi = 0; gi < group_; ++gi) out->push_back(pack_a<CT>(true, rows, Cg, wv.data() + gi * Cg * rows, rows));
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  std::vector<int64_t> output_padding_, output_shape_;
  Dims packed_shape_;
  std::vector<PackedA<float>> packed_f_;
  std::vector<PackedA<double>> packed_d_;
  ep::IsaTier isa_ = ep::cpu_isa_tier();
};
// ------------------------------------------------------------------------------------------------
// DeformConv (2-D): bilinear sampling at offset positions (times the mask) into columns, then GEMM.

// A DeformConv node's state at one set of input dtypes and shapes: the checked geometry and the
// workspace compute takes its buffers from.
struct DeformConvVariant final : ep::KernelVariant {
  size_t workspace_bytes() const override { return scratch.bytes(); }
  InputFacts in;  // what it was made for
  ConvShape s;
  Dims y_shape;
  int64_t K = 0;  // rows of one group's column matrix: C/group * kvol
  // Workspace arrays (offsets into `scratch`): one group's column matrix (K rows of out_size); for
  // float16/bfloat16 X, one image's input, offsets, mask and output converted to float; a bias of
  // another dtype than the compute type, converted; the float GEMM's packing scratch.
  ScratchLayout scratch;
  size_t col = 0, x_conv = 0, off_conv = 0, mask_conv = 0, y_conv = 0, bias_conv = 0;
  bool converts = false, converts_bias = false;
  GemmSlots gemm;
  // The float path's per-group GEMM Y_g += W_g (packed) * col, planned once for these shapes.
  GemmPlan gemm_plan;
};

class DeformConvKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, false));
    attrs_.auto_pad = AutoPad::kNotSet;
    group_ = info.attr_int("group", 1);
    offset_group_ = info.attr_int("offset_group", 1);
    isa_ = info.isa();
    if (group_ < 1 || offset_group_ < 1) return info.error("group and offset_group must be >= 1");
    // Constant weights are prepared (converted and packed per group) once.
    if (const Tensor* w = info.const_input(1)) {
      if (w->rank() == 4 && w->dim(0) % group_ == 0) {
        if (w->dtype() == DataType::kDouble) {
          auto v = tensor_values<double>(*w);
          if (v.ok()) wd_.prepare(w->shape(), group_, std::move(v.value()));
        } else if (dtype_is_float(w->dtype())) {
          prepare_float_weights(wf_, *w, group_, false);
        }
      }
    }
    return Status::Ok();
  }
  // A constant W prepared above is read only through its copy (compute checks just its shape).
  bool reads_const_input_data(size_t i) const override {
    return !(i == 1 && (!wf_.packed.empty() || !wd_.packed.empty()));
  }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    NXRT_ASSIGN_OR_RETURN(std::unique_ptr<DeformConvVariant> v, make_variant(InputFacts::of(sc), sc.num_threads()));
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    std::unique_ptr<DeformConvVariant> own;
    NXRT_ASSIGN_OR_RETURN(const DeformConvVariant* v,
                          variant_or_make<DeformConvVariant>(
                              ctx, &own, [&](const InputFacts& in, int threads) { return make_variant(in, threads); }));
    return dispatch_float(
        v->in.dtype(0),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx, *v);
        },
        [&] { return ctx.error(std::string("DeformConv does not support dtype ") + dtype_name(v->in.dtype(0))); });
  }

 private:
  Result<std::unique_ptr<DeformConvVariant>> make_variant(const InputFacts& in, int threads) const {
    if (!in.has(0)) return variant_error("missing input X");
    if (!in.has(1) || !in.has(2)) return variant_error("missing input W or offset");
    const DataType dt = in.dtype(0);
    if (dt != DataType::kFloat && dt != DataType::kDouble && dt != DataType::kFloat16 && dt != DataType::kBFloat16) {
      return variant_error(std::string("DeformConv does not support dtype ") + dtype_name(dt));
    }
    if (in.shape(0).size() != 4) {
      return variant_error("DeformConv supports 2-D inputs (N, C, H, W), got " + in.describe(0),
                           StatusCode::kNotImplemented);
    }
    if (in.dtype(1) != dt || in.dtype(2) != dt) return variant_error("W and offset must have X's dtype");
    auto v = std::make_unique<DeformConvVariant>();
    v->in = in;
    ConvShape& s = v->s;
    NXRT_RETURN_IF_ERROR(conv_shape_checked(attrs_, group_, in.shape(0), in.shape(1), &s,
                                            [](const std::string& m, StatusCode c = StatusCode::kRuntimeError) {
                                              return variant_error(m, c);
                                            }));
    const Geom3& g = s.g;
    const int64_t kvol = g.k[1] * g.k[2], OH = g.out[1], OW = g.out[2], out_size = OH * OW;
    if (s.C % offset_group_ != 0) return variant_error("channels are not divisible by offset_group");
    const Dims want_off{s.N, offset_group_ * kvol * 2, OH, OW};
    if (in.shape(2) != want_off) {
      return variant_error("offset " + in.describe(2) + " must have shape " + shape_to_string(want_off));
    }
    if (in.has(3) && shape_numel(in.shape(3)) != s.M) {
      return variant_error("B " + in.describe(3) + " must have " + std::to_string(s.M) + " values");
    }
    const Dims want_mask{s.N, offset_group_ * kvol, OH, OW};
    if (in.has(4) && in.shape(4) != want_mask) {
      return variant_error("mask " + in.describe(4) + " must have shape " + shape_to_string(want_mask));
    }
    if (in.has(4) && in.dtype(4) != dt) return variant_error("mask must have X's dtype");
    v->y_shape = geom_output_shape(s.N, s.M, g);
    v->K = s.C / group_ * kvol;
    const bool dbl = dt == DataType::kDouble;
    const size_t ct_bytes = dbl ? sizeof(double) : sizeof(float);
    auto add_ct = [&](int64_t n) { return v->scratch.add<unsigned char>(n * static_cast<int64_t>(ct_bytes)); };
    v->col = add_ct(v->K * out_size);
    v->converts = dt == DataType::kFloat16 || dt == DataType::kBFloat16;
    if (v->converts) {
      v->x_conv = add_ct(s.C * g.in_size());
      v->off_conv = add_ct(shape_numel(want_off) / std::max<int64_t>(1, s.N));
      if (in.has(4)) v->mask_conv = add_ct(shape_numel(want_mask) / std::max<int64_t>(1, s.N));
      v->y_conv = add_ct(s.M * out_size);
    }
    v->converts_bias = in.has(3) && in.dtype(3) != (dbl ? DataType::kDouble : DataType::kFloat);
    if (v->converts_bias) v->bias_conv = add_ct(s.M);
    if (!dbl) {
      v->gemm_plan = gemm_f32_plan(s.M / group_, out_size, v->K, GemmA::kPacked, GemmB::kRaw, false, false,
                                   std::max(1, threads), isa_);
      v->gemm.reserve(v->scratch, v->gemm_plan.scratch_floats, threads);
    }
    return v;
  }

  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx, const DeformConvVariant& v) const {
    const Tensor& X = ctx.input(0);
    const Tensor& W = ctx.input(1);
    const Tensor& O = ctx.input(2);
    const Tensor* B = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const Tensor* Mk = ctx.has_input(4) ? &ctx.input(4) : nullptr;
    const ConvShape& s = v.s;
    const Geom3& g = s.g;
    const int64_t KH = g.k[1], KW = g.k[2], kvol = KH * KW, OH = g.out[1], OW = g.out[2];
    const int64_t out_size = OH * OW, IH = g.in[1], IW = g.in[2];
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), v.y_shape));
    if (Y->numel() == 0) return Status::Ok();
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, v));
    ScratchLayout scratch = v.scratch;
    scratch.bind(ws);
    // Constant weights were prepared at creation; others are prepared now (they are data).
    const ConvWeights<CT>* w = nullptr;
    if constexpr (std::is_same_v<CT, double>) {
      if (!wd_.packed.empty() && wd_.shape == W.shape()) w = &wd_;
    } else {
      if (!wf_.packed.empty() && wf_.shape == W.shape()) w = &wf_;
    }
    ConvWeights<CT> local;
    if (!w) {
      NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
      local.prepare(W.shape(), group_, std::move(wv));
      w = &local;
    }
    const CT* bias = nullptr;
    if (B) {
      if (v.converts_bias) {
        CT* b = scratch.at<CT>(v.bias_conv);
        NXRT_RETURN_IF_ERROR(dispatch_numeric(
            B->dtype(),
            [&](auto tag) {
              using BT = decltype(tag);
              convert_buffer<BT, CT>(B->data<BT>(), b, s.M);
              return Status::Ok();
            },
            [&] { return ctx.error(std::string("unsupported bias dtype ") + dtype_name(B->dtype())); }));
        bias = b;
      } else {
        bias = B->data<CT>();
      }
    }
    const GemmScratch gs = v.gemm.scratch(scratch);
    CT* col = scratch.at<CT>(v.col);
    const int64_t G = group_, Cg = s.C / G, Mg = s.M / G, K = v.K;
    const int64_t ch_per_og = s.C / offset_group_;
    const int64_t x_image = s.C * IH * IW, off_image = offset_group_ * kvol * 2 * out_size;
    const int64_t mask_image = offset_group_ * kvol * out_size;
    for (int64_t n = 0; n < s.N; ++n) {
      // T == CT: the inputs are read and Y written in place; otherwise through one image converted.
      const CT *x_n, *off_n, *mask_n = nullptr;
      CT* y_n;
      if constexpr (std::is_same_v<T, CT>) {
        x_n = X.data<CT>() + n * x_image;
        off_n = O.data<CT>() + n * off_image;
        if (Mk) mask_n = Mk->data<CT>() + n * mask_image;
        y_n = Y->data<CT>() + n * s.M * out_size;
      } else {
        CT* xc = scratch.at<CT>(v.x_conv);
        CT* oc = scratch.at<CT>(v.off_conv);
        convert_buffer<T, CT>(X.data<T>() + n * x_image, xc, x_image);
        convert_buffer<T, CT>(O.data<T>() + n * off_image, oc, off_image);
        x_n = xc;
        off_n = oc;
        if (Mk) {
          CT* mc = scratch.at<CT>(v.mask_conv);
          convert_buffer<T, CT>(Mk->data<T>() + n * mask_image, mc, mask_image);
          mask_n = mc;
        }
        y_n = scratch.at<CT>(v.y_conv);
      }
      for (int64_t gi = 0; gi < G; ++gi) {
        auto body = [&](int64_t r0, int64_t r1) {
          for (int64_t row = r0; row < r1; ++row) {
            const int64_t c = gi * Cg + row / kvol, kidx = row % kvol;
            const int64_t kh = kidx / KW, kw = kidx % KW;
            const int64_t og = c / ch_per_og;
            const CT* xc = x_n + c * IH * IW;
            const CT* offy = off_n + (og * kvol * 2 + 2 * kidx) * out_size;
            const CT* offx = offy + out_size;
            const CT* mk = mask_n ? mask_n + (og * kvol + kidx) * out_size : nullptr;
            CT* dst = col + row * out_size;
            for (int64_t oh = 0; oh < OH; ++oh) {
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t p = oh * OW + ow;
                const CT h = static_cast<CT>(oh * g.s[1] - g.pb[1] + kh * g.d[1]) + offy[p];
                const CT wq = static_cast<CT>(ow * g.s[2] - g.pb[2] + kw * g.d[2]) + offx[p];
                CT val = 0;
                if (h > CT(-1) && h < CT(IH) && wq > CT(-1) && wq < CT(IW)) {
                  const CT hf = std::floor(h), wf = std::floor(wq);
                  const int64_t h0 = static_cast<int64_t>(hf), w0 = static_cast<int64_t>(wf);
                  const CT lh = h - hf, lw = wq - wf;
                  auto at = [&](int64_t yy, int64_t xx) -> CT {
                    return (yy >= 0 && yy < IH && xx >= 0 && xx < IW) ? xc[yy * IW + xx] : CT(0);
                  };
                  val = (1 - lh) * (1 - lw) * at(h0, w0) + (1 - lh) * lw * at(h0, w0 + 1) +
                        lh * (1 - lw) * at(h0 + 1, w0) + lh * lw * at(h0 + 1, w0 + 1);
                }
                dst[p] = mk ? val * mk[p] : val;
              }
            }
          }
        };
        ctx.pool().parallel_for(K, 1, body);
        CT* yg = y_n + gi * Mg * out_size;
        for (int64_t m = 0; m < Mg; ++m)
          std::fill(yg + m * out_size, yg + (m + 1) * out_size, bias ? bias[gi * Mg + m] : CT(0));
        if constexpr (std::is_same_v<CT, float>) {
          gemm_f32_packed_a(v.gemm_plan, 1.f, w->packed[gi].data.data(), col, out_size, 1.f, yg, out_size, &ctx.pool(),
                            nullptr, &gs);
        } else {
          gemm_packed_a<CT>(w->packed[gi], out_size, false, col, out_size, CT(1), yg, out_size, &ctx.pool(), isa_, &gs);
        }
      }
      if constexpr (!std::is_same_v<T, CT>) {
        T* yo = Y->data<T>() + n * s.M * out_size;
        for (int64_t i = 0; i < s.M * out_size; ++i) yo[i] = from_ct<T>(y_n[i]);
      }
    }
    return Status::Ok();
  }

  ep::IsaTier isa_ = ep::cpu_isa_tier();
  WindowAttrs attrs_;
  int64_t group_ = 1, offset_group_ = 1;
  ConvWeights<float> wf_;  // constant W prepared at creation (float, float16, bfloat16 W)
  ConvWeights<double> wd_;
};
// ------------------------------------------------------------------------------------------------
// CausalConvWithState (27): depthwise causal 1-D conv over [past_state | input], optional SiLU, and
// the last k-1 positions of that sequence as present_state.

Status causal_conv_with_state(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!ctx.has_input(1)) return ctx.error("missing input weight");
  const Tensor& W = ctx.input(1);
  const std::string act = ctx.info().attr_string("activation", "none");
  const bool silu = act == "silu" || act == "swish";
  if (!silu && act != "none") return ctx.error("activation must be 'silu', 'swish' or 'none', got '" + act + "'");
  if (X.rank() != 3) return ctx.error("input must be (batch, channels, length), got " + X.describe());
  const int64_t B = X.dim(0), C = X.dim(1), L = X.dim(2);
  if (W.rank() != 3 || W.dim(0) != C || W.dim(1) != 1 || W.dim(2) < 1 || W.dtype() != X.dtype()) {
    return ctx.error("weight " + W.describe() + " must be (" + std::to_string(C) + ", 1, k) of the input's dtype");
  }
  const int64_t K = W.dim(2), P = K - 1;
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* past = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (bias && (bias->numel() != C || bias->dtype() != X.dtype())) {
    return ctx.error("bias " + bias->describe() + " must have " + std::to_string(C) + " values");
  }
  const Dims state_shape{B, C, P};
  if (past && (past->shape() != state_shape || past->dtype() != X.dtype())) {
    return ctx.error("past_state " + past->describe() + " must have shape " + shape_to_string(state_shape));
  }
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using CT = ct_of<T>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        Tensor* S = nullptr;
        if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
          NXRT_ASSIGN_OR_RETURN(S, ctx.allocate_output(1, X.dtype(), state_shape));
        }
        NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
        std::vector<CT> bv;
        if (bias) {
          NXRT_ASSIGN_OR_RETURN(bv, tensor_values<CT>(*bias));
        }
        const T* x = X.data<T>();
        const T* ps = past ? past->data<T>() : nullptr;
        T* y = Y->data<T>();
        T* st = S ? S->data<T>() : nullptr;
        ctx.pool().parallel_for(B * C, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, L * K)), [&](int64_t p0, int64_t p1) {
          std::vector<CT> seq(static_cast<size_t>(P + L));
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t c = p % C;
            for (int64_t i = 0; i < P; ++i) seq[i] = ps ? to_ct<CT>(ps[p * P + i]) : CT(0);
            for (int64_t i = 0; i < L; ++i) seq[P + i] = to_ct<CT>(x[p * L + i]);
            const CT* w = wv.data() + c * K;
            const CT b0 = bias ? bv[c] : CT(0);
            for (int64_t t = 0; t < L; ++t) {
              CT acc = b0;
              for (int64_t k = 0; k < K; ++k) acc += w[k] * seq[t + k];
              if (silu) acc = acc / (CT(1) + std::exp(-acc));
              y[p * L + t] = from_ct<T>(acc);
            }
            if (st) {
              for (int64_t i = 0; i < P; ++i) st[p * P + i] = from_ct<T>(seq[L + i]);
            }
          }
        });
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("CausalConvWithState does not support dtype ") + dtype_name(X.dtype())); });
}

}  // namespace

int64_t conv_variants_live() { return g_conv_variants_live.load(std::memory_order_relaxed); }

void register_conv_max_pool(ep::KernelRegistry& r);  // conv_max_pool.cpp

void register_conv_kernels(ep::KernelRegistry& r) {
  register_conv_max_pool(r);
  r.add_class<ConvKernel>("", "Conv", 1);
  r.add_class<ConvTransposeKernel>("", "ConvTranspose", 1);
  r.add_class<ConvIntegerKernel>("", "ConvInteger", 10);
  r.add_class<QLinearConvKernel>("", "QLinearConv", 10);
  // onnxruntime's contrib QLinearConv: the same inputs, plus channels_last.
  r.add_class<QLinearConvKernel>("com.microsoft", "QLinearConv", 1);
  r.add_class<DeformConvKernel>("", "DeformConv", 19);
  r.add_fn("", "CausalConvWithState", 27, INT64_MAX, &causal_conv_with_state);
}

}  // namespace nxrt::ops
