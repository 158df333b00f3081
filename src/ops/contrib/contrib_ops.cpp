// com.microsoft contrib ops used by LLM and BERT exports (semantics: onnxruntime docs/ContribOperators.md):
// SkipLayerNormalization, SkipSimplifiedLayerNormalization, SimplifiedLayerNormalization, Gelu,
// FastGelu, BiasGelu, QuickGelu, RotaryEmbedding, FusedMatMul, GatherBlockQuantized (the QLinear* ops:
// qlinear_ops.cpp).
// MatMulNBits lives in contrib/matmul_nbits.cpp, the attention ops in attention/ms_attention.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "ep/slot_scratch.h"
#include "ops/common.h"
#include "ops/contrib/contrib_util.h"
#include "ops/elementwise/vec_math.h"
#include "ops/contrib/gather_block_quantized_rows.h"
#include "ops/contrib/skip_norm_rows.h"
#include "ops/gemm/gemm.h"

namespace nxrt::ops::contrib {

void register_contrib_matmulnbits(ep::KernelRegistry& r);
void register_contrib_attention(ep::KernelRegistry& r);
void register_contrib_embed_layer_norm(ep::KernelRegistry& r);  // embed_layer_norm.cpp
void register_contrib_qlinear(ep::KernelRegistry& r);          // qlinear_ops.cpp

namespace {

const char* kMs = "com.microsoft";

// ---------------------------------------------------------------------------------------------
// Normalizations. Rows of length H = last dim (or the product of dims from `axis`).
//   sum = input + skip + bias (skip broadcast over leading dims), y = norm(sum) * gamma (+ beta).
template <typename T>
Status skip_norm_typed(ep::KernelContext& ctx, bool simplified, bool has_skip, int64_t axis_from, float eps) {
  using C = compute_t<T>;
  const Tensor& X = ctx.input(0);
  const int gamma_idx = has_skip ? 2 : 1;
  const Tensor& G = ctx.input(gamma_idx);
  const Tensor* Bt = nullptr;   // beta
  const Tensor* Bias = nullptr;
  if (has_skip) {
    if (!simplified && ctx.has_input(3)) Bt = &ctx.input(3);
    const size_t bias_idx = simplified ? 3 : 4;
    if (ctx.has_input(bias_idx)) Bias = &ctx.input(bias_idx);
  }
  int64_t H = 1;
  for (int64_t d = axis_from; d < X.rank(); ++d) H *= X.dim(d);
  const int64_t rows = H == 0 ? 0 : X.numel() / H;
  auto check_vec = [&](const Tensor* t, const char* name) -> Status {
    if (!t) return Status::Ok();
    const DataType d = t->dtype();
    if ((d != DataType::kFloat && d != DataType::kFloat16 && d != DataType::kBFloat16 && d != DataType::kDouble) || t->numel() != H)
      return ctx.error(std::string(name) + " must be a float tensor with " + std::to_string(H) +
                       " elements, got " + t->describe(), StatusCode::kInvalidArgument);
    return Status::Ok();
  };
  NXRT_RETURN_IF_ERROR(check_vec(&G, "gamma"));
  NXRT_RETURN_IF_ERROR(check_vec(Bt, "beta"));
  NXRT_RETURN_IF_ERROR(check_vec(Bias, "bias"));
  const T* skip = nullptr;
  int64_t skip_rows = 0;
  if (has_skip) {
    const Tensor& S = ctx.input(1);
    if (S.dtype() != X.dtype() || S.rank() < 1 || S.dim(-1) != H || S.numel() == 0 || rows % (S.numel() / H) != 0)
      return ctx.error("skip must be " + std::string(dtype_name(X.dtype())) + " shaped like input or its trailing dims, got " +
                       S.describe() + " for input " + X.describe(), StatusCode::kInvalidArgument);
    // Allowed: same shape, (1, S, H), (S, H): skip repeats every skip_rows rows.
    skip = S.data<T>();
    skip_rows = S.numel() / H;
  }
  // SimplifiedLayerNormalization's Y takes the scale's dtype (ORT: type V); the Skip variants keep T.
  const DataType ydt = has_skip ? X.dtype() : G.dtype();
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, ydt, X.shape()));
  Dims stat_shape = X.shape();
  for (int64_t d = axis_from; d < X.rank(); ++d) stat_shape[static_cast<size_t>(d)] = 1;
  float* mean_out = nullptr;
  float* inv_out = nullptr;
  T* sum_out = nullptr;
  const size_t mean_idx = has_skip ? 1 : 99, inv_idx = has_skip ? 2 : 1, sum_idx = has_skip ? 3 : 99;
  if (mean_idx != 99 && ctx.output_requested(mean_idx)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(mean_idx, DataType::kFloat, stat_shape));
    mean_out = t->data<float>();
  }
  if (ctx.output_requested(inv_idx)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(inv_idx, DataType::kFloat, stat_shape));
    inv_out = t->data<float>();
  }
  if (sum_idx != 99 && ctx.output_requested(sum_idx)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(sum_idx, X.dtype(), X.shape()));
    sum_out = t->data<T>();
  }
  const T* x = X.data<T>();
  void* yraw = Y->raw_data();
  // gamma/beta/bias may have another float dtype than the input (ORT's mixed-precision exports): those
  // are converted into step scratch; ones already in the compute type are read in place.
  NXRT_ASSIGN_OR_RETURN(void* scratch, ctx.workspace(static_cast<size_t>(3 * H) * sizeof(C)));
  auto load_vec = [&](const Tensor* t, C* slot) -> Result<const C*> {
    if (!t) return static_cast<const C*>(nullptr);
    if (t->dtype() == dtype_of<C>()) return t->data<C>();
    NXRT_RETURN_IF_ERROR(load_floats(t->dtype(), t->raw_data(), H, slot));
    return static_cast<const C*>(slot);
  };
  C* slots = static_cast<C*>(scratch);
  NXRT_ASSIGN_OR_RETURN(const C* gamma, load_vec(&G, slots));
  NXRT_ASSIGN_OR_RETURN(const C* beta, load_vec(Bt, slots + H));
  NXRT_ASSIGN_OR_RETURN(const C* bias, load_vec(Bias, slots + 2 * H));
  // No per-row scratch: the pre-norm value (input + skip + bias) is cheap to recompute on each pass.
  // A Y of another dtype is converted a row at a time, through the thread's slot.
  ep::SlotScratch row_slots;
  if (ydt != X.dtype()) {
    NXRT_ASSIGN_OR_RETURN(row_slots, ep::SlotScratch::take(ctx, static_cast<size_t>(H) * sizeof(C)));
  }
  // float rows whose Y is float: the AVX2 / AVX-512 bodies of skip_norm_rows.h (the same per-element
  // arithmetic, the double sums in vector lanes).
  if constexpr (std::is_same_v<T, float>) {
    const ep::IsaTier isa = ctx.info().isa();
    if (ydt == X.dtype() && H > 0 && skip_norm_row_vectorized(isa)) {
      ctx.pool().parallel_for(rows, std::max<int64_t>(1, 16384 / H), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          SkipNormRow row;
          row.x = x + r * H;
          row.skip = skip ? skip + (r % skip_rows) * H : nullptr;
          row.bias = bias;
          row.gamma = gamma;
          row.beta = beta;
          row.y = static_cast<float*>(yraw) + r * H;
          row.sum_out = sum_out ? sum_out + r * H : nullptr;
          row.H = H;
          row.simplified = simplified;
          row.eps = static_cast<double>(eps);
          double mean = 0, inv = 0;
          skip_norm_row_f32(isa, row, &mean, &inv);
          if (mean_out) mean_out[r] = static_cast<float>(mean);
          if (inv_out) inv_out[r] = static_cast<float>(inv);
        }
      });
      return Status::Ok();
    }
  }
  auto work = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * H;
      const T* sr = skip ? skip + (r % skip_rows) * H : nullptr;
      auto val = [&](int64_t i) {
        C v = static_cast<C>(static_cast<float>(xr[i]));
        if (sr) v += static_cast<C>(static_cast<float>(sr[i]));
        if (bias) v += bias[i];
        return v;
      };
      double sum = 0, sq = 0;
      for (int64_t i = 0; i < H; ++i) {
        const C v = val(i);
        sum += v;
        sq += static_cast<double>(v) * v;
      }
      if (sum_out)
        for (int64_t i = 0; i < H; ++i) {
          if constexpr (std::is_same_v<T, C>) sum_out[r * H + i] = val(i);
          else sum_out[r * H + i] = T(static_cast<float>(val(i)));
        }
      double mean = simplified ? 0.0 : sum / static_cast<double>(H);
      double var = 0;
      if (simplified) {
        var = sq / static_cast<double>(H);
      } else {
        for (int64_t i = 0; i < H; ++i) {
          const double d = val(i) - mean;
          var += d * d;
        }
        var /= static_cast<double>(H);
      }
      const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
      if (mean_out) mean_out[r] = static_cast<float>(mean);
      if (inv_out) inv_out[r] = static_cast<float>(inv);
      auto normed = [&](int64_t i) {
        const C v = static_cast<C>((val(i) - mean) * inv) * gamma[i];
        return beta ? v + beta[i] : v;
      };
      if (ydt == X.dtype()) {
        T* yr = static_cast<T*>(yraw) + r * H;
        for (int64_t i = 0; i < H; ++i) {
          if constexpr (std::is_same_v<T, C>) yr[i] = normed(i);
          else yr[i] = T(static_cast<float>(normed(i)));
        }
      } else {
        // Y of the scale's dtype (checked to be a float dtype): converted a row at a time.
        C* row = row_slots.mine<C>();
        for (int64_t i = 0; i < H; ++i) row[i] = normed(i);
        (void)store_floats(row, H, ydt, static_cast<uint8_t*>(yraw) + r * H * (dtype_bits(ydt) / 8));
      }
    }
  };
  ctx.pool().parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H)), work);
  return Status::Ok();
}

Status skip_norm_dispatch(ep::KernelContext& ctx, bool simplified, bool has_skip, int64_t axis_from, float eps) {
  return dispatch_float(ctx.input(0).dtype(), [&](auto tag) -> Status {
    return skip_norm_typed<decltype(tag)>(ctx, simplified, has_skip, axis_from, eps);
  }, [&] { return ctx.error(std::string("input must be float32/float16/bfloat16/double, got ") + dtype_name(ctx.input(0).dtype()),
               StatusCode::kInvalidArgument); });
}

Status check_rank(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (X.rank() < 1) return ctx.error("input must have rank >= 1, got " + X.describe(), StatusCode::kInvalidArgument);
  return Status::Ok();
}

Status skip_layer_norm(ep::KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(check_rank(ctx));
  return skip_norm_dispatch(ctx, false, true, ctx.input(0).rank() - 1, ctx.info().attr_float("epsilon", 1e-12f));
}
Status skip_simplified_layer_norm(ep::KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(check_rank(ctx));
  return skip_norm_dispatch(ctx, true, true, ctx.input(0).rank() - 1, ctx.info().attr_float("epsilon", 1e-12f));
}

Status simplified_layer_norm(ep::KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(check_rank(ctx));
  int64_t axis = ctx.info().attr_int("axis", -1);
  if (!normalize_axis(&axis, ctx.input(0).rank()))
    return ctx.error("axis " + std::to_string(ctx.info().attr_int("axis", -1)) + " out of range for " + ctx.input(0).describe(), StatusCode::kInvalidArgument);
  return skip_norm_dispatch(ctx, true, false, axis, ctx.info().attr_float("epsilon", 1e-5f));
}

// ---------------------------------------------------------------------------------------------
// Gelu family. kind: 0 Gelu (erf), 1 FastGelu (tanh, optional bias), 2 BiasGelu (erf, bias), 3 QuickGelu.
template <int kind>
Status gelu_family(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const Tensor* bias = (kind == 1 || kind == 2) && ctx.has_input(1) ? &ctx.input(1) : nullptr;
  if (kind == 2 && !bias) return ctx.error("BiasGelu needs input B", StatusCode::kInvalidArgument);
  int64_t blen = 0;
  if (bias) {
    blen = bias->numel();
    if (bias->dtype() != X.dtype() || X.rank() < 1 || blen != X.dim(-1))
      return ctx.error("bias must be " + std::string(dtype_name(X.dtype())) + " with last-dim length, got " + bias->describe() +
                       " for " + X.describe(), StatusCode::kInvalidArgument);
  }
  const float alpha = kind == 3 ? ctx.info().attr_float("alpha", 1.702f) : 0.f;
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
  return dispatch_float(X.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = X.data<T>();
    const T* b = bias ? bias->data<T>() : nullptr;
    T* y = Y->data<T>();
    const int64_t n = X.numel();
    if constexpr (std::is_same_v<T, float>) {
      // The vector GELUs of the kernel's tier (ops/elementwise/vec_math.h); the loop below is their
      // reference. With a bias, whole rows (the bias is one row).
      const vecmath::MapFn map = kind == 3 ? nullptr : vecmath::map_for_tier(ctx.info().isa());
      if (map) {
        const vecmath::Fn fn = kind == 1 ? vecmath::Fn::kGeluTanh : vecmath::Fn::kGeluErf;
        if (!b) {
          ctx.pool().parallel_for(n, 16384, [&](int64_t i0, int64_t i1) { map(fn, x + i0, nullptr, y + i0, i1 - i0); });
        } else if (n > 0) {
          ctx.pool().parallel_for(n / blen, std::max<int64_t>(1, 16384 / blen), [&](int64_t r0, int64_t r1) {
            for (int64_t r = r0; r < r1; ++r) map(fn, x + r * blen, b, y + r * blen, blen);
          });
        }
        return Status::Ok();
      }
    }
    auto work = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        C v = static_cast<C>(static_cast<float>(x[i]));
        if (b) v += static_cast<C>(static_cast<float>(b[i % blen]));
        C r;
        if constexpr (kind == 1) {
          r = C(0.5) * v * (C(1) + std::tanh(C(0.7978845608028654) * (v + C(0.044715) * v * v * v)));
        } else if constexpr (kind == 3) {
          r = v / (C(1) + std::exp(-static_cast<C>(alpha) * v));
        } else {
          r = C(0.5) * v * (C(1) + std::erf(v * C(0.7071067811865476)));
        }
        if constexpr (std::is_same_v<T, C>) y[i] = r;
        else y[i] = T(static_cast<float>(r));
      }
    };
    ctx.pool().parallel_for(n, 16384, work);
    return Status::Ok();
  }, [&] { return ctx.error(std::string("input must be float32/float16/bfloat16/double, got ") + dtype_name(X.dtype()), StatusCode::kInvalidArgument); });
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding (com.microsoft): inputs (input, position_ids, cos_cache, sin_cache).
Status ms_rotary(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& X = ctx.input(0);
  const Tensor& P = ctx.input(1);
  const Tensor& Cc = ctx.input(2);
  const Tensor& Sc = ctx.input(3);
  RotaryParams rp;
  rp.interleaved = info.attr_int("interleaved", 0) != 0;
  if (info.attr_int("is_packed_batching", 0) != 0)
    return ctx.error("is_packed_batching=1 is not supported", StatusCode::kNotImplemented);
  int64_t rot = info.attr_int("rotary_embedding_dim", 0);
  int64_t num_heads = info.attr_int("num_heads", 0);
  if (X.rank() != 3 && X.rank() != 4) return ctx.error("input must be 3-D or 4-D, got " + X.describe(), StatusCode::kInvalidArgument);
  if (Cc.rank() != 2 || Sc.shape() != Cc.shape() || Cc.dtype() != X.dtype() || Sc.dtype() != X.dtype())
    return ctx.error("cos_cache/sin_cache must be 2-D of one shape and the input's dtype, got " + Cc.describe() + ", " + Sc.describe(), StatusCode::kInvalidArgument);
  if (P.dtype() != DataType::kInt64) return ctx.error("position_ids must be int64, got " + P.describe(), StatusCode::kInvalidArgument);
  const int64_t B = X.dim(0);
  int64_t S, H, D;
  bool bsnh;
  if (X.rank() == 3) {
    S = X.dim(1);
    const int64_t hidden = X.dim(2);
    if (rot > 0 && num_heads <= 0) return info.error("rotary_embedding_dim needs num_heads");
    if (num_heads > 0) {
      if (hidden % num_heads) return ctx.error("hidden size not divisible by num_heads", StatusCode::kInvalidArgument);
      D = hidden / num_heads;
    } else {
      D = Cc.dim(1) * 2;
      if (D == 0 || hidden % D) return ctx.error("hidden size " + std::to_string(hidden) + " not divisible by head size " + std::to_string(D) + " (2 * cos_cache dim 1)", StatusCode::kInvalidArgument);
    }
    H = hidden / D;
    bsnh = true;
  } else {
    H = X.dim(1);
    S = X.dim(2);
    D = X.dim(3);
    bsnh = false;
  }
  if (rot == 0) rot = D;
  if (rot % 2 || rot > D || Cc.dim(1) * 2 < rot)
    return ctx.error("rotary_embedding_dim " + std::to_string(rot) + " must be even, <= head_size " + std::to_string(D) +
                     " and <= 2 * cos_cache dim 1", StatusCode::kInvalidArgument);
  std::vector<int64_t> pos(static_cast<size_t>(B * S));
  const int64_t* p = P.data<int64_t>();
  if (P.numel() == 1) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) pos[static_cast<size_t>(b * S + s)] = p[0] + s;
  } else if (P.rank() == 2 && P.dim(0) == B && P.dim(1) == S) {
    std::copy(p, p + B * S, pos.begin());
  } else {
    return ctx.error("position_ids must be shape (1) or (batch, seq), got " + P.describe(), StatusCode::kInvalidArgument);
  }
  for (int64_t v : pos)
    if (v < 0 || v >= Cc.dim(0)) return ctx.error("position id " + std::to_string(v) + " out of range [0, " + std::to_string(Cc.dim(0)) + ")", StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
  rp.rot = rot;
  rp.cache_width = Cc.dim(1);
  return dispatch_float(X.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* x = X.data<T>();
    T* y = Y->data<T>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t ps = pos[static_cast<size_t>(b * S + s)];
        for (int64_t h = 0; h < H; ++h) {
          const int64_t off = bsnh ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
          rotate_head(x + off, y + off, D, Cc.data<T>() + ps * rp.cache_width, Sc.data<T>() + ps * rp.cache_width, rp);
        }
      }
    return Status::Ok();
  }, [&] { return ctx.error(std::string("input must be float32/float16/bfloat16, got ") + dtype_name(X.dtype()), StatusCode::kInvalidArgument); });
}

// ---------------------------------------------------------------------------------------------
// FusedMatMul: alpha * op(A) @ op(B) with numpy broadcasting over batch dims. transBatchA moves A's
// dim 0 to just before the last dim (perm [1..r-2, 0, r-1]) before transA; likewise B.
template <typename T>
std::vector<double> load_permuted(const Tensor& t, bool trans_batch, Dims* shape) {
  const T* d = t.data<T>();
  const int64_t n = t.numel();
  std::vector<double> out(static_cast<size_t>(n));
  *shape = t.shape();
  if (!trans_batch || t.rank() < 3) {
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<double>(static_cast<float>(d[i]));
    if constexpr (std::is_same_v<T, double>) for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = d[i];
    return out;
  }
  const int64_t r = t.rank();
  const int64_t d0 = t.dim(0), last = t.dim(-1);
  int64_t mid = 1;
  for (int64_t i = 1; i < r - 1; ++i) mid *= t.dim(i);
  // in: [d0, mid, last] -> out: [mid, d0, last]
  for (int64_t a = 0; a < d0; ++a)
    for (int64_t m = 0; m < mid; ++m)
      for (int64_t l = 0; l < last; ++l) {
        double v;
        if constexpr (std::is_same_v<T, double>) v = d[(a * mid + m) * last + l];
        else v = static_cast<double>(static_cast<float>(d[(a * mid + m) * last + l]));
        out[static_cast<size_t>((m * d0 + a) * last + l)] = v;
      }
  Dims s;
  for (int64_t i = 1; i < r - 1; ++i) s.push_back(t.dim(i));
  s.push_back(d0);
  s.push_back(last);
  *shape = s;
  return out;
}

Status fused_matmul(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& A = ctx.input(0);
  const Tensor& B = ctx.input(1);
  if (A.dtype() != B.dtype()) return ctx.error("A and B dtypes differ", StatusCode::kInvalidArgument);
  const bool ta = info.attr_int("transA", 0) != 0, tb = info.attr_int("transB", 0) != 0;
  const bool tba = info.attr_int("transBatchA", 0) != 0, tbb = info.attr_int("transBatchB", 0) != 0;
  const double alpha = info.attr_float("alpha", 1.f);
  return dispatch_float(A.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    Dims sa, sb;
    std::vector<double> a = load_permuted<T>(A, tba, &sa);
    std::vector<double> b = load_permuted<T>(B, tbb, &sb);
    // 1-D operands as in numpy.matmul.
    const bool a1 = sa.size() == 1, b1 = sb.size() == 1;
    if (a1) sa.insert(sa.begin(), 1);
    if (b1) sb.push_back(1);
    const int64_t ra = static_cast<int64_t>(sa.size()), rb = static_cast<int64_t>(sb.size());
    const int64_t M = ta && !a1 ? sa[ra - 1] : sa[ra - 2];
    const int64_t K = ta && !a1 ? sa[ra - 2] : sa[ra - 1];
    const int64_t K2 = tb && !b1 ? sb[rb - 1] : sb[rb - 2];
    const int64_t N = tb && !b1 ? sb[rb - 2] : sb[rb - 1];
    if (K != K2) return ctx.error("inner dims differ: " + A.describe() + " x " + B.describe(), StatusCode::kInvalidArgument);
    Dims ba(sa.begin(), sa.end() - 2), bb(sb.begin(), sb.end() - 2), bo;
    if (!broadcast_shapes(ba, bb, &bo)) return ctx.error("batch dims do not broadcast", StatusCode::kInvalidArgument);
    Dims out = bo;
    if (!a1) out.push_back(M);
    if (!b1) out.push_back(N);
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, A.dtype(), out));
    const int64_t nb = shape_numel(bo);
    const Dims sta = broadcast_strides(ba, bo), stb = broadcast_strides(bb, bo);
    T* y = Y->data<T>();
    std::vector<float> fa, fb, fc(static_cast<size_t>(M * N));
    auto batch = strided_cursor(bo, bo.size(), sta, stb);
    for (int64_t bi = 0; bi < nb; ++bi, batch.next()) {
      const int64_t oa = batch.offset(0), ob = batch.offset(1);
      const double* pa = a.data() + oa * M * K;
      const double* pb = b.data() + ob * K * N;
      T* py = y + bi * M * N;
      if constexpr (std::is_same_v<T, double>) {
        gemm_f64(ta && !a1, tb && !b1, M, N, K, alpha, pa, ta && !a1 ? M : K, pb, tb && !b1 ? K : N, 0.0, py, N, &ctx.pool());
      } else {
        fa.assign(pa, pa + M * K);
        fb.assign(pb, pb + K * N);
        gemm_f32(ta && !a1, tb && !b1, M, N, K, static_cast<float>(alpha), fa.data(), ta && !a1 ? M : K, fb.data(),
                 tb && !b1 ? K : N, 0.f, fc.data(), N, &ctx.pool());
        for (int64_t i = 0; i < M * N; ++i) {
          if constexpr (std::is_same_v<T, float>) py[i] = fc[static_cast<size_t>(i)];
          else py[i] = T(fc[static_cast<size_t>(i)]);
        }
      }
    }
    return Status::Ok();
  }, [&] { return ctx.error(std::string("A must be float32/float16/bfloat16/double, got ") + dtype_name(A.dtype()), StatusCode::kInvalidArgument); });
}

// ---------------------------------------------------------------------------------------------
// GatherBlockQuantized: Gather on block-quantized data, then dequantize with the gathered blocks'
// scales and zero points. data: int4/uint4 (elements), or uint8 holding 8/bits elements per byte
// along the last dim (low bits first). Out-of-range indices give zero slices.
struct QData {
  DataType dt;
  int64_t bits;
  const uint8_t* p;
  // Element e (flat logical index) as an integer.
  int get(int64_t e) const {
    if (dt == DataType::kUInt8 && bits == 8) return p[e];
    const int64_t per = 8 / bits;
    const int v = (p[e / per] >> ((e % per) * bits)) & ((1 << bits) - 1);
    if (dt == DataType::kInt4) return v >= 8 ? v - 16 : v;
    return v;
  }
};

Status gather_block_quantized(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& data = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  const Tensor& scales = ctx.input(2);
  const Tensor* zp = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const DataType dt = data.dtype();
  int64_t bits = info.attr_int("bits", 4);
  const int64_t block = info.attr_int("block_size", 128);
  if (dt == DataType::kInt4 || dt == DataType::kUInt4) {
    bits = 4;
  } else if (dt == DataType::kUInt8) {
    if (bits != 2 && bits != 4 && bits != 8) return info.error("bits must be 2, 4 or 8 for uint8 data, got " + std::to_string(bits));
  } else {
    return ctx.error(std::string("data must be int4/uint4/uint8, got ") + dtype_name(dt), StatusCode::kNotImplemented);
  }
  if (block < 16 || (block & (block - 1))) return info.error("block_size must be a power of 2 >= 16, got " + std::to_string(block));
  if (idx.dtype() != DataType::kInt32 && idx.dtype() != DataType::kInt64)
    return ctx.error("indices must be int32/int64", StatusCode::kInvalidArgument);
  const int64_t r = data.rank();
  if (r < 1) return ctx.error("data must have rank >= 1", StatusCode::kInvalidArgument);
  Dims ds = data.shape();
  if (dt == DataType::kUInt8) ds.back() *= 8 / bits;
  int64_t gax = info.attr_int("gather_axis", 0), qax = info.attr_int("quantize_axis", 1);
  if (!normalize_axis(&gax, r) || !normalize_axis(&qax, r)) return info.error("gather_axis/quantize_axis out of range for rank " + std::to_string(r));
  if (dt == DataType::kUInt8 && gax != 0) return info.error("uint8 data needs gather_axis 0");
  Dims ss = ds;
  ss[static_cast<size_t>(qax)] = (ds[static_cast<size_t>(qax)] + block - 1) / block;
  if (scales.shape() != ss)
    return ctx.error("scales must have shape " + shape_to_string(ss) + ", got " + scales.describe(), StatusCode::kInvalidArgument);
  if (zp && zp->dtype() != dt) return ctx.error("zero_points must have data's dtype", StatusCode::kInvalidArgument);
  if (zp) {
    Dims zs = ss;
    if (dt == DataType::kUInt8) {
      const int64_t per = 8 / bits;
      zs.back() = (zs.back() + per - 1) / per;
    }
    if (zp->shape() != zs) return ctx.error("zero_points must have shape " + shape_to_string(zs) + ", got " + zp->describe(), StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> ind, read_int_values(idx));
  Dims out;
  for (int64_t i = 0; i < gax; ++i) out.push_back(ds[static_cast<size_t>(i)]);
  for (int64_t d : idx.shape()) out.push_back(d);
  for (int64_t i = gax + 1; i < r; ++i) out.push_back(ds[static_cast<size_t>(i)]);
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, scales.dtype(), out));
  const int64_t G = ds[static_cast<size_t>(gax)];
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < gax; ++i) outer *= ds[static_cast<size_t>(i)];
  for (int64_t i = gax + 1; i < r; ++i) inner *= ds[static_cast<size_t>(i)];
  const Dims dstr = contiguous_strides(ds), sstr = contiguous_strides(ss);
  const int64_t qstride = dstr[static_cast<size_t>(qax)], qdim = ds[static_cast<size_t>(qax)];
  const int64_t nidx = static_cast<int64_t>(ind.size());
  if (gather_block_quantized_rows_apply(dt, r, gax, qax, bits))  // an embedding table: row by row
    return gather_block_quantized_rows(ctx, data, ind, scales, zp, bits, block, ds[1], Y);
  QData qd{dt, bits, static_cast<const uint8_t*>(data.raw_data())};
  QData qz{dt, bits, zp ? static_cast<const uint8_t*>(zp->raw_data()) : nullptr};
  const int dflt_zp = dt == DataType::kUInt8 ? (1 << (bits - 1)) : 0;
  // uint8 zero points pack each row of the scale grid's last dim on its own (ceil(last * bits / 8) bytes,
  // as MatMulNBits and ORT do); int4/uint4 tensors pack all elements consecutively.
  const int64_t zlast = ss.back(), zper = 8 / bits, zrow = (zlast + zper - 1) / zper;
  auto zero_point = [&](int64_t se) {
    if (dt != DataType::kUInt8 || bits == 8) return qz.get(se);
    const int64_t row = se / zlast, c = se % zlast;
    return (qz.p[row * zrow + c / zper] >> ((c % zper) * bits)) & ((1 << bits) - 1);
  };
  return dispatch_gbq_scale_type(ctx, scales.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* sc = scales.data<T>();
    T* y = Y->data<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < nidx; ++i) {
        int64_t g = ind[static_cast<size_t>(i)];
        if (g < 0) g += G;
        T* yo = y + (o * nidx + i) * inner;
        if (g < 0 || g >= G) {
          for (int64_t t = 0; t < inner; ++t) yo[t] = T(0.f);
          continue;
        }
        const int64_t base = (o * G + g) * inner;
        for (int64_t t = 0; t < inner; ++t) {
          const int64_t e = base + t;
          // Scale index: same coordinates with the quantize-axis coordinate divided by block.
          const int64_t qc = (e / qstride) % qdim;
          int64_t se = 0, rem = e;
          for (size_t d = 0; d < ds.size(); ++d) {
            int64_t c = rem / dstr[d];
            rem -= c * dstr[d];
            if (static_cast<int64_t>(d) == qax) c = qc / block;
            se += c * sstr[d];
          }
          const int z = zp ? zero_point(se) : dflt_zp;
          y[(o * nidx + i) * inner + t] = T(static_cast<float>(qd.get(e) - z) * static_cast<float>(sc[se]));
        }
      }
    return Status::Ok();
  });
}

}  // namespace

void register_contrib_ops_all(ep::KernelRegistry& r) {
  r.add_fn(kMs, "SkipLayerNormalization", 1, INT64_MAX, &skip_layer_norm);
  r.add_fn(kMs, "SkipSimplifiedLayerNormalization", 1, INT64_MAX, &skip_simplified_layer_norm);
  // ORT registers SimplifiedLayerNormalization in the ai.onnx domain (opset 1); exports use both.
  r.add_fn("", "SimplifiedLayerNormalization", 1, INT64_MAX, &simplified_layer_norm);
  r.add_fn(kMs, "SimplifiedLayerNormalization", 1, INT64_MAX, &simplified_layer_norm);
  r.add_fn(kMs, "Gelu", 1, INT64_MAX, &gelu_family<0>);
  r.add_fn(kMs, "FastGelu", 1, INT64_MAX, &gelu_family<1>);
  r.add_fn(kMs, "BiasGelu", 1, INT64_MAX, &gelu_family<2>);
  r.add_fn(kMs, "QuickGelu", 1, INT64_MAX, &gelu_family<3>);
  r.add_fn(kMs, "RotaryEmbedding", 1, INT64_MAX, &ms_rotary);
  r.add_fn(kMs, "FusedMatMul", 1, INT64_MAX, &fused_matmul);
  r.add_fn(kMs, "GatherBlockQuantized", 1, INT64_MAX, &gather_block_quantized);
  register_contrib_matmulnbits(r);
  register_contrib_attention(r);
  register_contrib_embed_layer_norm(r);
  register_contrib_qlinear(r);
}

}  // namespace nxrt::ops::contrib

namespace nxrt::ops {
void register_contrib_ops(ep::KernelRegistry& r) { contrib::register_contrib_ops_all(r); }
}  // namespace nxrt::ops
