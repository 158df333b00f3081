// com.microsoft QLinear* ops of QOperator-quantized models (onnxruntime's quantize_static in QOperator
// form, the ONNX model zoo's -int8 CNNs): QLinearAdd, QLinearMul, QLinearSigmoid, QLinearLeakyRelu,
// QLinearGlobalAveragePool, QLinearConcat. Each dequantizes its 8-bit inputs (x_scale * (x - x_zp)),
// computes in float and quantizes the result (round half to even of value / y_scale, + y_zp,
// saturated to the output's range), as the ONNX QuantizeLinear formula that ORT's kernels follow.
// ORT's vector kernels take some of these in fixed point, so its bytes and these can differ by one at
// a rounding tie (scripts/check_contrib_ort.sh compares within one step).
//   QLinearAdd / QLinearMul (A, A_scale, A_zero_point?, B, B_scale, B_zero_point?, C_scale, C_zero_point?)
//     with numpy broadcasting of A and B; C has A's type.
//   QLinearSigmoid / QLinearLeakyRelu(alpha) (X, X_scale, X_zero_point?, Y_scale, Y_zero_point?): one
//     256-entry table a call (every input byte's output).
//   QLinearGlobalAveragePool(X, x_scale, x_zero_point, y_scale, y_zero_point; channels_last): the mean
//     over the spatial dims, from exact integer sums.
//   QLinearConcat(Y_scale, Y_zero_point, X0, X0_scale, X0_zero_point, X1, ...; axis): each input
//     requantized to Y's scale and zero point (copied when they match).
//   QLinearSoftmax: the float Softmax kernel between the two.
// (QLinearAveragePool, an 8-bit pool on exact integer sums, lives with the pools: ops/pool/pool_ops.cpp.)
// QGemm, an 8-bit GEMM, lives with the other integer matmuls (ops/linalg/integer_matmul.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "ep/cpu_features.h"
#include "ep/standalone_context.h"
#include "ops/cast/dynamic_quantize.h"
#include "ops/common.h"
#include "ops/elementwise/byte_lookup.h"
#include "ops/elementwise/elementwise_util.h"

namespace nxrt::ops::contrib {
namespace {

bool is_q8(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// One (scale, zero point) pair: scale a float32 scalar, zero point absent (0) or one value of `dt`.
struct QParams {
  float scale = 1.f;
  int32_t zp = 0;
};

Result<QParams> qparams(ep::KernelContext& ctx, size_t scale_idx, size_t zp_idx, DataType dt, const char* what) {
  QParams q;
  NXRT_ASSIGN_OR_RETURN(const Tensor& s, ctx.required_tensor(scale_idx, what));
  if (s.dtype() != DataType::kFloat || s.numel() != 1) {
    return ctx.error(std::string(what) + " must be one float32 value, got " + s.describe(), StatusCode::kInvalidArgument);
  }
  q.scale = s.data<float>()[0];
  if (ctx.has_input(zp_idx)) {
    const Tensor& z = ctx.input(zp_idx);
    if (z.dtype() != dt || z.numel() != 1) {
      return ctx.error(std::string(what) + "'s zero point must be one " + dtype_name(dt) + " value, got " + z.describe(),
                       StatusCode::kInvalidArgument);
    }
    q.zp = dt == DataType::kUInt8 ? static_cast<int32_t>(z.data<uint8_t>()[0]) : static_cast<int32_t>(z.data<int8_t>()[0]);
  }
  return q;
}

// value / scale rounded half to even, + zp, saturated to [lo, hi] (ops/cast/dynamic_quantize.h).
inline int32_t quantize(float value, const QParams& q, int32_t lo, int32_t hi) {
  return quantize_saturated(value, q.scale, q.zp, lo, hi);
}

template <typename T>
inline float dequant(T v, const QParams& q) {
  return q.scale * static_cast<float>(static_cast<int32_t>(v) - q.zp);
}

template <typename T>
constexpr int32_t lo_of() {
  return std::numeric_limits<T>::min();
}
template <typename T>
constexpr int32_t hi_of() {
  return std::numeric_limits<T>::max();
}

#if defined(__x86_64__)
// 8 bytes as int32 (step 0: one byte repeated).
template <typename T>
__attribute__((target("avx2,fma"))) inline __m256i load8(const T* p, int64_t step) {
  if (step == 0) return _mm256_set1_epi32(static_cast<int32_t>(*p));
  const __m128i v = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return std::is_same_v<T, uint8_t> ? _mm256_cvtepu8_epi32(v) : _mm256_cvtepi8_epi32(v);
}

// The elementwise rows of QLinearAdd / QLinearMul on AVX2, 8 at a time: the scalar loop's float
// operations lane by lane (dequantize, add or multiply, divide by C's scale, round half to even, + zp,
// clamp), so the same bytes. a_step / b_step: 1, or 0 for an operand broadcast along the row.
// kNanFree: as binary_row_avx512's (the scales make a NaN quotient impossible, finite_quotients): clamp,
// then round and convert in one cvtps2dq.
template <typename T, bool kMul, bool kNanFree>
__attribute__((target("avx2,fma"))) void binary_row_avx2(const T* a, int64_t a_step, const T* b, int64_t b_step, T* y,
                                                          int64_t n, const QParams& qa, const QParams& qb, const QParams& qc) {
  const __m256 sa = _mm256_set1_ps(qa.scale), sb = _mm256_set1_ps(qb.scale), sc = _mm256_set1_ps(qc.scale);
  const __m256i za = _mm256_set1_epi32(qa.zp), zb = _mm256_set1_epi32(qb.zp);
  const __m256 lo = _mm256_set1_ps(static_cast<float>(lo_of<T>() - qc.zp)), hi = _mm256_set1_ps(static_cast<float>(hi_of<T>() - qc.zp));
  const __m256i zc = _mm256_set1_epi32(qc.zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 va = _mm256_mul_ps(sa, _mm256_cvtepi32_ps(_mm256_sub_epi32(load8<T>(a + i * a_step, a_step), za)));
    __m256 vb = _mm256_mul_ps(sb, _mm256_cvtepi32_ps(_mm256_sub_epi32(load8<T>(b + i * b_step, b_step), zb)));
    // The products rounded before the sum, as the formula (and the scalar loop) round them: without the
    // empty asm GCC fuses a product and the sum into one rounding (vfmadd), another byte on ~6% of codes.
    __asm__("" : "+x"(va), "+x"(vb));
    const __m256 v = kMul ? _mm256_mul_ps(va, vb) : _mm256_add_ps(va, vb);
    __m256i q;
    if constexpr (kNanFree) {
      q = _mm256_add_epi32(_mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(_mm256_div_ps(v, sc), lo), hi)), zc);
    } else {
      __m256 r = _mm256_round_ps(_mm256_div_ps(v, sc), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm256_andnot_ps(_mm256_cmp_ps(r, r, _CMP_UNORD_Q), r);  // a NaN to 0, as quantize() does
      r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
      q = _mm256_add_epi32(_mm256_cvttps_epi32(r), zc);
    }
    // int32 -> 8 bytes (every value is in T's range, so the saturating packs are exact).
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i bytes = std::is_same_v<T, uint8_t> ? _mm_packus_epi16(w, w) : _mm_packs_epi16(w, w);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(y + i), bytes);
  }
  for (; i < n; ++i) {
    float va = dequant(a[i * a_step], qa), vb = dequant(b[i * b_step], qb);
    __asm__("" : "+x"(va), "+x"(vb));  // (no fused multiply-add here either)
    y[i] = static_cast<T>(quantize(kMul ? va * vb : va + vb, qc, lo_of<T>(), hi_of<T>()));
  }
}
#endif

// binary_row_avx2 on AVX-512, 16 at a time (the same lane operations, so the same bytes); the AVX2 loop
// takes the tail.
template <typename T>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))) inline __m512i load16(const T* p, int64_t step) {
  if (step == 0) return _mm512_set1_epi32(static_cast<int32_t>(*p));
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return std::is_same_v<T, uint8_t> ? _mm512_cvtepu8_epi32(v) : _mm512_cvtepi8_epi32(v);
}
// kNanFree: the scales make a NaN quotient impossible (finite_quotients): the clamp to C's integer
// range then goes before the rounding, which cvtps2dq does (round half to even, the default mode) as it
// converts, with no NaN lanes to zero: round(clamp(x)) = clamp(round(x)) for integer bounds.
template <typename T, bool kMul, bool kNanFree>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma"))) void binary_row_avx512(
    const T* a, int64_t a_step, const T* b, int64_t b_step, T* y, int64_t n, const QParams& qa, const QParams& qb,
    const QParams& qc) {
  const __m512 sa = _mm512_set1_ps(qa.scale), sb = _mm512_set1_ps(qb.scale), sc = _mm512_set1_ps(qc.scale);
  const __m512i za = _mm512_set1_epi32(qa.zp), zb = _mm512_set1_epi32(qb.zp), zc = _mm512_set1_epi32(qc.zp);
  const __m512 lo = _mm512_set1_ps(static_cast<float>(lo_of<T>() - qc.zp)), hi = _mm512_set1_ps(static_cast<float>(hi_of<T>() - qc.zp));
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 va = _mm512_mul_ps(sa, _mm512_cvtepi32_ps(_mm512_sub_epi32(load16<T>(a + i * a_step, a_step), za)));
    __m512 vb = _mm512_mul_ps(sb, _mm512_cvtepi32_ps(_mm512_sub_epi32(load16<T>(b + i * b_step, b_step), zb)));
    __asm__("" : "+v"(va), "+v"(vb));  // (as in binary_row_avx2: no fused multiply-add)
    const __m512 v = kMul ? _mm512_mul_ps(va, vb) : _mm512_add_ps(va, vb);
    __m512i q;
    if constexpr (kNanFree) {
      q = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(_mm512_div_ps(v, sc), lo), hi)), zc);
    } else {
      __m512 r = _mm512_roundscale_ps(_mm512_div_ps(v, sc), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      r = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(r, r, _CMP_ORD_Q), r);  // a NaN to 0, as quantize() does
      r = _mm512_min_ps(_mm512_max_ps(r, lo), hi);
      q = _mm512_add_epi32(_mm512_cvttps_epi32(r), zc);  // in T's range: truncating keeps it
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtepi32_epi8(q));
  }
  binary_row_avx2<T, kMul, kNanFree>(a + i * a_step, a_step, b + i * b_step, b_step, y + i, n - i, qa, qb, qc);
}

// Whether no quotient (qa.scale * (a - za) op qb.scale * (b - zb)) / qc.scale can be NaN: every
// dequantized value finite (|a - za| <= 255), so their sum or product is a number or an infinity, and
// C's scale finite and nonzero.
bool finite_quotients(const QParams& qa, const QParams& qb, const QParams& qc) {
  return std::isfinite(255.0f * qa.scale) && std::isfinite(255.0f * qb.scale) && std::isfinite(qc.scale) && qc.scale != 0.f;
}

template <bool kMul>
Status qlinear_binary(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& a, ctx.required_tensor(0, "A"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& b, ctx.required_tensor(3, "B"));
  if (!is_q8(a.dtype()) || b.dtype() != a.dtype()) {
    return ctx.error("A and B must both be uint8 or int8, got " + a.describe() + " and " + b.describe(), StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(const QParams qa, qparams(ctx, 1, 2, a.dtype(), "A_scale"));
  NXRT_ASSIGN_OR_RETURN(const QParams qb, qparams(ctx, 4, 5, a.dtype(), "B_scale"));
  NXRT_ASSIGN_OR_RETURN(const QParams qc, qparams(ctx, 6, 7, a.dtype(), "C_scale"));
  Dims out;
  if (!broadcast_shapes(a.shape(), b.shape(), &out)) {
    return ctx.error("A and B do not broadcast: " + a.describe() + " and " + b.describe(), StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), out));
  const ew::BcastPlan plan = ew::make_plan(out, {&a.shape(), &b.shape()});
  const bool avx2 = ctx.info().isa() >= ep::IsaTier::kAvx2, avx512 = ctx.info().isa() >= ep::IsaTier::kAvx512;
  const bool nan_free = finite_quotients(qa, qb, qc);
  auto run = [&](auto tag) {
    using T = decltype(tag);
#if defined(__x86_64__)
    if (avx2) {
      const T* ap = a.data<T>();
      const T* bp = b.data<T>();
      T* yp = y->data<T>();
      const int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1);
      // The row loop for this call's tier and scales, chosen once.
      const auto row = avx512 ? (nan_free ? &binary_row_avx512<T, kMul, true> : &binary_row_avx512<T, kMul, false>)
                              : (nan_free ? &binary_row_avx2<T, kMul, true> : &binary_row_avx2<T, kMul, false>);
      ew::run_plan<2>(ctx.pool(), plan, 16384, [&](int64_t oo, const int64_t* offs, int64_t len) {
        row(ap + offs[0], sa, bp + offs[1], sb, yp + oo, len, qa, qb, qc);
      });
      return;
    }
#endif
    ew::apply_binary(ctx.pool(), plan, a.data<T>(), b.data<T>(), y->data<T>(), [&](T x, T z) {
      const float va = dequant(x, qa), vb = dequant(z, qb);
      return static_cast<T>(quantize(kMul ? va * vb : va + vb, qc, lo_of<T>(), hi_of<T>()));
    });
  };
  if (a.dtype() == DataType::kUInt8) run(uint8_t{});
  else run(int8_t{});
  return Status::Ok();
}

// The table kernels' choice: AVX-512 VBMI at the avx512 tier and up on a CPU with it.
bool use_vbmi(const ep::KernelContext& ctx) { return byte_lookup_vbmi(ctx.info().isa()); }

// kind 0: Sigmoid, 1: LeakyRelu.
template <int kind>
Status qlinear_unary(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  if (!is_q8(x.dtype())) return ctx.error("X must be uint8 or int8, got " + x.describe(), StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(const QParams qx, qparams(ctx, 1, 2, x.dtype(), "X_scale"));
  NXRT_ASSIGN_OR_RETURN(const QParams qy, qparams(ctx, 3, 4, x.dtype(), "Y_scale"));
  const float alpha = ctx.info().attr_float("alpha", 0.01f);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
  auto run = [&](auto tag) {
    using T = decltype(tag);
    uint8_t table[256];
    for (int v = lo_of<T>(); v <= hi_of<T>(); ++v) {
      const float f = dequant(static_cast<T>(v), qx);
      const float r = kind == 0 ? 1.f / (1.f + std::exp(-f)) : (f >= 0.f ? f : alpha * f);
      table[static_cast<uint8_t>(static_cast<T>(v))] = static_cast<uint8_t>(static_cast<T>(quantize(r, qy, lo_of<T>(), hi_of<T>())));
    }
    const uint8_t* in = static_cast<const uint8_t*>(x.raw_data());
    uint8_t* o = static_cast<uint8_t*>(y->raw_data());
    const bool vbmi = use_vbmi(ctx);
    ew::run_flat(ctx.pool(), x.numel(), 65536, [&](int64_t b, int64_t e) { lookup_bytes(in + b, e - b, table, o + b, vbmi); });
  };
  if (x.dtype() == DataType::kUInt8) run(uint8_t{});
  else run(int8_t{});
  return Status::Ok();
}

Status qlinear_global_average_pool(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  if (!is_q8(x.dtype()) || x.rank() < 3) {
    return ctx.error("X must be uint8 or int8 of rank >= 3, got " + x.describe(), StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(const QParams qx, qparams(ctx, 1, 2, x.dtype(), "x_scale"));
  NXRT_ASSIGN_OR_RETURN(const QParams qy, qparams(ctx, 3, 4, x.dtype(), "y_scale"));
  const bool channels_last = ctx.info().attr_int("channels_last", 0) != 0;
  const int64_t N = x.dim(0), C = channels_last ? x.dim(-1) : x.dim(1);
  int64_t HW = 1;
  Dims out = x.shape();
  for (int64_t d = 1; d < x.rank(); ++d) {
    const bool spatial = channels_last ? d < x.rank() - 1 : d > 1;
    if (spatial) {
      HW *= x.dim(d);
      out[static_cast<size_t>(d)] = 1;
    }
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out));
  if (HW == 0) return ctx.error("X has no spatial elements: " + x.describe(), StatusCode::kInvalidArgument);
  // mean of x_scale * (x - x_zp) = x_scale * (sum - HW * x_zp) / HW.
  const float mult = qx.scale / static_cast<float>(HW);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const T* in = x.data<T>();
    T* o = y->data<T>();
    auto put = [&](int64_t p, int64_t sum) {
      const float v = static_cast<float>(sum - HW * qx.zp) * mult;
      o[p] = static_cast<T>(quantize(v, qy, lo_of<T>(), hi_of<T>()));
    };
    // Channels-last: per image, blocks of 64 channels summed pixel by pixel (each pixel's 64 codes
    // contiguous: the loop vectorizes), in int32 while HW * 255 fits it. (A channel at a time walked the
    // whole image once per channel: 0.28 ms a call on PP-OCRv4 det's 8-bit SE pools.)
    constexpr int64_t kBlock = 64;
    if (channels_last && HW < (int64_t{1} << 23)) {
      const int64_t blocks = (C + kBlock - 1) / kBlock;
      ctx.pool().parallel_for(N * blocks, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t n = b / blocks, c0 = (b % blocks) * kBlock, nc = std::min(kBlock, C - c0);
          int32_t acc[kBlock] = {};
          for (int64_t i = 0; i < HW; ++i) {
            const T* px = in + (n * HW + i) * C + c0;
            for (int64_t j = 0; j < nc; ++j) acc[j] += px[j];
          }
          for (int64_t j = 0; j < nc; ++j) put(n * C + c0 + j, acc[j]);
        }
      });
      return;
    }
    ctx.pool().parallel_for(N * C, std::max<int64_t>(1, 16384 / HW), [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n = p / C, c = p % C;
        int64_t sum = 0;
        if (channels_last) {
          for (int64_t i = 0; i < HW; ++i) sum += in[(n * HW + i) * C + c];
        } else {
          const T* row = in + p * HW;
          for (int64_t i = 0; i < HW; ++i) sum += row[i];
        }
        put(p, sum);
      }
    });
  };
  if (x.dtype() == DataType::kUInt8) run(uint8_t{});
  else run(int8_t{});
  return Status::Ok();
}

Status qlinear_concat(ep::KernelContext& ctx) {
  const size_t n_in = ctx.num_inputs();
  if (n_in < 5 || (n_in - 2) % 3 != 0) {
    return ctx.error("QLinearConcat takes Y_scale, Y_zero_point and (X, X_scale, X_zero_point) triples, got " +
                         std::to_string(n_in) + " inputs",
                     StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(const Tensor& x0, ctx.required_tensor(2, "X0"));
  const DataType dt = x0.dtype();
  if (!is_q8(dt)) return ctx.error("inputs must be uint8 or int8, got " + x0.describe(), StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(const QParams qy, qparams(ctx, 0, 1, dt, "Y_scale"));
  const int64_t rank = x0.rank();
  int64_t axis = ctx.info().attr_int("axis", 0);
  if (!normalize_axis(&axis, rank)) return ctx.error("axis out of range for " + x0.describe(), StatusCode::kInvalidArgument);
  const size_t k = (n_in - 2) / 3;
  std::vector<const Tensor*> xs(k);
  std::vector<QParams> qs(k);
  Dims out = x0.shape();
  out[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < k; ++i) {
    const std::string name = "X" + std::to_string(i);
    NXRT_ASSIGN_OR_RETURN(const Tensor& xi, ctx.required_tensor(2 + 3 * i, name.c_str()));
    if (xi.dtype() != dt || xi.rank() != rank) {
      return ctx.error(name + " must be " + dtype_name(dt) + " of rank " + std::to_string(rank) + ", got " + xi.describe(),
                       StatusCode::kInvalidArgument);
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && xi.dim(d) != x0.dim(d)) {
        return ctx.error(name + " " + xi.describe() + " differs from X0 " + x0.describe() + " off the axis", StatusCode::kInvalidArgument);
      }
    }
    NXRT_ASSIGN_OR_RETURN(qs[i], qparams(ctx, 3 + 3 * i, 4 + 3 * i, dt, (name + "_scale").c_str()));
    xs[i] = &xi;
    out[static_cast<size_t>(axis)] += xi.dim(axis);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, out));
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= out[static_cast<size_t>(d)];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= out[static_cast<size_t>(d)];
  const int64_t row = out[static_cast<size_t>(axis)] * inner;
  // Each input's table (the identity's bytes are copied instead), then rows of the output over the pool:
  // a row holds each input's run in turn (with axis = the channels of a channels-last tensor, every
  // pixel is a row).
  std::vector<std::array<uint8_t, 256>> tables(k);
  std::vector<bool> same(k);
  std::vector<int64_t> lens(k);
  for (size_t i = 0; i < k; ++i) {
    lens[i] = xs[i]->dim(axis) * inner;
    same[i] = qs[i].scale == qy.scale && qs[i].zp == qy.zp;
    if (same[i]) continue;
    auto fill = [&](auto tag) {
      using T = decltype(tag);
      for (int v = lo_of<T>(); v <= hi_of<T>(); ++v)
        tables[i][static_cast<uint8_t>(static_cast<T>(v))] =
            static_cast<uint8_t>(static_cast<T>(quantize(dequant(static_cast<T>(v), qs[i]), qy, lo_of<T>(), hi_of<T>())));
    };
    if (dt == DataType::kUInt8) fill(uint8_t{});
    else fill(int8_t{});
  }
  uint8_t* o = static_cast<uint8_t*>(y->raw_data());
  const bool vbmi = use_vbmi(ctx);
  ctx.pool().parallel_for(outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, row)), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      int64_t off = 0;
      for (size_t i = 0; i < k; ++i) {
        const uint8_t* src = static_cast<const uint8_t*>(xs[i]->raw_data()) + r * lens[i];
        uint8_t* dst = o + r * row + off;
        if (same[i]) std::memcpy(dst, src, static_cast<size_t>(lens[i]));
        else lookup_bytes(src, lens[i], tables[i].data(), dst, vbmi);
        off += lens[i];
      }
    }
  });
  return Status::Ok();
}

// QLinearSoftmax (X, X_scale, X_zero_point?, Y_scale, Y_zero_point?): the float Softmax kernel at the
// node's `opset` (whose axis rule changed at 13) between a dequantization of X and a quantization of its
// output, so every axis case is the float op's.
class QLinearViaFloat final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    const ir::Node& n = info.node();
    inner_node_.name = n.name;
    inner_node_.op_type = "Softmax";
    inner_node_.inputs = {n.inputs.empty() ? std::string("x") : n.inputs[0]};
    inner_node_.outputs = {n.outputs.empty() ? std::string("y") : n.outputs[0]};
    for (const auto& a : n.attributes)
      if (a.name != "channels_last" && a.name != "opset") inner_node_.attributes.push_back(a);
    const int64_t opset = info.attr_int("opset", 13);
    inner_info_ = std::make_unique<ep::KernelInfo>(inner_node_, opset);
    inner_info_->graph_ = info.graph();
    inner_info_->registry_ = info.registry();
    inner_info_->overrides_ = &info.overrides();
    if (!info.registry()) return info.error("created without a kernel registry: cannot make its " + inner_node_.op_type);
    const ep::KernelDef* def = info.registry()->find("", inner_node_.op_type, opset);
    if (!def) return info.error("no CPU kernel for " + inner_node_.op_type + " at opset " + std::to_string(opset));
    NXRT_ASSIGN_OR_RETURN(inner_, def->factory(*inner_info_));
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
    if (!is_q8(x.dtype())) return ctx.error("X must be uint8 or int8, got " + x.describe(), StatusCode::kInvalidArgument);
    NXRT_ASSIGN_OR_RETURN(const QParams qx, qparams(ctx, 1, 2, x.dtype(), "X_scale"));
    NXRT_ASSIGN_OR_RETURN(const QParams qy, qparams(ctx, 3, 4, x.dtype(), "Y_scale"));
    Tensor xf(DataType::kFloat, x.shape());
    float table[256];
    const bool u8 = x.dtype() == DataType::kUInt8;
    for (int v = 0; v < 256; ++v)
      table[v] = u8 ? dequant(static_cast<uint8_t>(v), qx) : dequant(static_cast<int8_t>(static_cast<uint8_t>(v)), qx);
    const uint8_t* in = static_cast<const uint8_t*>(x.raw_data());
    float* xd = xf.data<float>();
    ew::run_flat(ctx.pool(), x.numel(), 65536, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) xd[i] = table[in[i]];
    });
    ep::StandaloneContext inner(*inner_info_, {Value(std::move(xf))}, ctx);
    NXRT_RETURN_IF_ERROR(inner_->compute(inner));
    const Value& out = inner.output(0);
    if (!out.is_tensor()) return ctx.error(inner_node_.op_type + " produced no tensor");
    const Tensor yf = out.tensor().contiguous();
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), yf.shape()));
    const float* yd = yf.data<float>();
    uint8_t* o = static_cast<uint8_t*>(y->raw_data());
    // QuantizeLinear's vector loops: the same bytes as quantize() on the finite values a softmax of
    // dequantized codes gives (they differ only on NaN, which quantize() sends to the zero
    // point).
    ew::run_flat(ctx.pool(), yf.numel(), 65536, [&](int64_t b, int64_t e) {
      quantize_8bit(yd + b, e - b, qy.scale, static_cast<float>(qy.zp), !u8, o + b, ctx.info().isa());
    });
    return Status::Ok();
  }

 private:
  ir::Node inner_node_;
  std::unique_ptr<ep::KernelInfo> inner_info_;
  std::unique_ptr<ep::Kernel> inner_;
};

}  // namespace

void register_contrib_qlinear(ep::KernelRegistry& r) {
  const std::string ms = "com.microsoft";
  r.add_fn(ms, "QLinearAdd", 1, INT64_MAX, &qlinear_binary<false>);
  r.add_fn(ms, "QLinearMul", 1, INT64_MAX, &qlinear_binary<true>);
  r.add_fn(ms, "QLinearSigmoid", 1, INT64_MAX, &qlinear_unary<0>);
  r.add_fn(ms, "QLinearLeakyRelu", 1, INT64_MAX, &qlinear_unary<1>);
  r.add_fn(ms, "QLinearGlobalAveragePool", 1, INT64_MAX, &qlinear_global_average_pool);
  r.add_fn(ms, "QLinearConcat", 1, INT64_MAX, &qlinear_concat);
  r.add_class<QLinearViaFloat>(ms, "QLinearSoftmax", 1);
}

}  // namespace nxrt::ops::contrib
