// Newer attention-family ops: LinearAttention and CausalConvWithState (ai.onnx, opset 27) and
// FlexAttention (ai.onnx.preview, with score_mod / mask_mod / prob_mod subgraphs).
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/attention/attention_util.h"
#include "ops/common.h"

namespace nxrt::ops {
namespace {

// ---------------------------------------------------------------------------------------------
// LinearAttention: recurrent state S[b, hkv] (d_k x d_v) updated per step by the update rule
// (linear / gated / delta / gated_delta), read by every query head of the group.
Status linear_attention(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const std::string rule = info.attr_string("update_rule", "gated_delta");
  if (rule != "linear" && rule != "gated" && rule != "delta" && rule != "gated_delta") return info.error("unknown update_rule '" + rule + "'");
  const bool gating = rule == "gated" || rule == "gated_delta";
  const bool delta = rule == "delta" || rule == "gated_delta";
  const int64_t Hq = info.attr_int("q_num_heads", 0), Hkv = info.attr_int("kv_num_heads", 0);
  if (Hq <= 0 || Hkv <= 0 || Hq % Hkv != 0) return info.error("q_num_heads must be a positive multiple of kv_num_heads");
  const Tensor& Q = ctx.input(0);
  const Tensor& K = ctx.input(1);
  const Tensor& V = ctx.input(2);
  const Tensor* past = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const Tensor* decay = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  const Tensor* beta = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const Tensor* erase = ctx.has_input(6) ? &ctx.input(6) : nullptr;
  if (gating != (decay != nullptr)) return ctx.error("update_rule '" + rule + (gating ? "' requires" : "' forbids") + " the decay input", StatusCode::kInvalidArgument);
  if (delta != (beta != nullptr)) return ctx.error("update_rule '" + rule + (delta ? "' requires" : "' forbids") + " the beta input", StatusCode::kInvalidArgument);
  if (erase && !delta) return ctx.error("erase_gate needs a delta update rule", StatusCode::kInvalidArgument);
  if (Q.rank() != 3 || K.rank() != 3 || V.rank() != 3) return ctx.error("query, key, value must be (B, T, H*D)", StatusCode::kInvalidArgument);
  const int64_t B = Q.dim(0), T = Q.dim(1);
  if (Q.dim(2) % Hq != 0 || V.dim(2) % Hkv != 0) return ctx.error("hidden sizes must divide by the head counts", StatusCode::kInvalidArgument);
  const int64_t dk = Q.dim(2) / Hq, dv = V.dim(2) / Hkv, G = Hq / Hkv;
  if (K.shape() != Dims{B, T, Hkv * dk} || V.dim(0) != B || V.dim(1) != T) return ctx.error("key must be (B, T, kv_heads*d_k) and value (B, T, kv_heads*d_v)", StatusCode::kInvalidArgument);
  int64_t decay_w = 0, beta_w = 0;
  if (decay) {
    if (decay->rank() != 3 || decay->dim(0) != B || decay->dim(1) != T || (decay->dim(2) != Hkv && decay->dim(2) != Hkv * dk)) return ctx.error("decay must be (B, T, kv_heads) or (B, T, kv_heads*d_k)", StatusCode::kInvalidArgument);
    decay_w = decay->dim(2) == Hkv ? 1 : dk;
  }
  if (beta) {
    if (beta->rank() != 3 || beta->dim(0) != B || beta->dim(1) != T || (beta->dim(2) != Hkv && beta->dim(2) != 1)) return ctx.error("beta must be (B, T, kv_heads) or (B, T, 1)", StatusCode::kInvalidArgument);
    beta_w = beta->dim(2);
  }
  if (erase && erase->shape() != Dims{B, T, Hkv * dk}) return ctx.error("erase_gate must be (B, T, kv_heads*d_k)", StatusCode::kInvalidArgument);
  if (past && past->shape() != Dims{B, Hkv, dk, dv}) return ctx.error("past_state must be (B, kv_heads, d_k, d_v)", StatusCode::kInvalidArgument);
  const float scale_attr = info.attr_float("scale", 0.f);
  const double scale = scale_attr == 0.f ? 1.0 / std::sqrt(static_cast<double>(dk)) : scale_attr;

  using C = float;
  NXRT_ASSIGN_OR_RETURN(auto q, read_float_input<C>(ctx, Q, "query"));
  NXRT_ASSIGN_OR_RETURN(auto kk, read_float_input<C>(ctx, K, "key"));
  NXRT_ASSIGN_OR_RETURN(auto vv, read_float_input<C>(ctx, V, "value"));
  std::vector<C> dc, bt, eg, state(static_cast<size_t>(B * Hkv * dk * dv), 0.f);
  if (decay) { NXRT_ASSIGN_OR_RETURN(dc, read_float_input<C>(ctx, *decay, "decay")); }
  if (beta) { NXRT_ASSIGN_OR_RETURN(bt, read_float_input<C>(ctx, *beta, "beta")); }
  if (erase) { NXRT_ASSIGN_OR_RETURN(eg, read_float_input<C>(ctx, *erase, "erase_gate")); }
  if (past) { NXRT_ASSIGN_OR_RETURN(state, read_float_input<C>(ctx, *past, "past_state")); }
  std::vector<C> out(static_cast<size_t>(B * T * Hq * dv));
  std::vector<C> vt(static_cast<size_t>(dv)), ke(static_cast<size_t>(dk));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < Hkv; ++h) {
        C* S = state.data() + (b * Hkv + h) * dk * dv;
        const C* kt = kk.data() + ((b * T + t) * Hkv + h) * dk;
        const C* vin = vv.data() + ((b * T + t) * Hkv + h) * dv;
        if (gating) {
          const C* g = dc.data() + (b * T + t) * decay->dim(2) + h * decay_w;
          for (int64_t d = 0; d < dk; ++d) {
            const C f = std::exp(g[decay_w == 1 ? 0 : d]);
            for (int64_t m = 0; m < dv; ++m) S[d * dv + m] *= f;
          }
        }
        for (int64_t m = 0; m < dv; ++m) vt[m] = vin[m];
        if (delta) {
          for (int64_t d = 0; d < dk; ++d) ke[d] = erase ? eg[((b * T + t) * Hkv + h) * dk + d] * kt[d] : kt[d];
          const C bv = bt[(b * T + t) * beta_w + (beta_w == 1 ? 0 : h)];
          for (int64_t m = 0; m < dv; ++m) {
            C r = 0;
            for (int64_t d = 0; d < dk; ++d) r += S[d * dv + m] * ke[d];
            vt[m] = bv * (vt[m] - r);
          }
        }
        for (int64_t d = 0; d < dk; ++d)
          for (int64_t m = 0; m < dv; ++m) S[d * dv + m] += kt[d] * vt[m];
        for (int64_t g = 0; g < G; ++g) {
          const int64_t hq = h * G + g;
          const C* qt = q.data() + ((b * T + t) * Hq + hq) * dk;
          C* o = out.data() + ((b * T + t) * Hq + hq) * dv;
          for (int64_t m = 0; m < dv; ++m) o[m] = 0;
          for (int64_t d = 0; d < dk; ++d)
            for (int64_t m = 0; m < dv; ++m) o[m] += qt[d] * S[d * dv + m];
          for (int64_t m = 0; m < dv; ++m) o[m] = static_cast<C>(o[m] * scale);
        }
      }
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, Q.dtype(), Dims{B, T, Hq * dv}));
  auto write = [&](Tensor* dst, const std::vector<C>& src) -> Status {
    return dispatch_float(dst->dtype(), [&](auto tag) -> Status {
      using TT = decltype(tag);
      TT* p = dst->data<TT>();
      for (size_t i = 0; i < src.size(); ++i) p[i] = from_compute<TT>(static_cast<compute_t<TT>>(src[i]));
      return Status::Ok();
    }, [&] { return ctx.error("LinearAttention supports float, double, float16, bfloat16", StatusCode::kInvalidArgument); });
  };
  NXRT_RETURN_IF_ERROR(write(Y, out));
  if (ctx.output_requested(1)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * P, ctx.allocate_output(1, past ? past->dtype() : Q.dtype(), Dims{B, Hkv, dk, dv}));
    NXRT_RETURN_IF_ERROR(write(P, state));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// FlexAttention (ai.onnx.preview): scores = scale * Q K^T (kv heads shared by query-head groups),
// then score_mod(scores), mask_mod (bool mask -> -inf where false, or replacement scores),
// softmax over keys, prob_mod(probs), probs @ V. The mods take and return the whole
// (B, H, L, S) tensor in Q's dtype.
Status flex_attention(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& Q = ctx.input(0);
  const Tensor& K = ctx.input(1);
  const Tensor& V = ctx.input(2);
  if (Q.rank() != 4 || K.rank() != 4 || V.rank() != 4) return ctx.error("Q, K, V must be 4-D (B, H, S, D)", StatusCode::kInvalidArgument);
  if (K.dtype() != Q.dtype() || V.dtype() != Q.dtype()) return ctx.error("Q, K, V must share a dtype", StatusCode::kInvalidArgument);
  const int64_t B = Q.dim(0), Hq = Q.dim(1), L = Q.dim(2), D = Q.dim(3);
  const int64_t Hkv = K.dim(1), S = K.dim(2), Dv = V.dim(3);
  if (K.dim(0) != B || V.dim(0) != B || K.dim(3) != D || V.dim(1) != Hkv || V.dim(2) != S) return ctx.error("Q, K, V shapes disagree", StatusCode::kInvalidArgument);
  if (Hkv <= 0 || Hq % Hkv != 0) return ctx.error("query heads must be a multiple of key/value heads", StatusCode::kInvalidArgument);
  const int64_t G = Hq / Hkv;
  const double scale = info.has_attr("scale") ? info.attr_float("scale", 1.f) : 1.0 / std::sqrt(static_cast<double>(D));

  return dispatch_float(Q.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* q = Q.data<T>();
    const T* k = K.data<T>();
    const T* v = V.data<T>();
    Tensor scores(Q.dtype(), Dims{B, Hq, L, S});
    T* sc = scores.data<T>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        const T* kb = k + (b * Hkv + h / G) * S * D;
        for (int64_t i = 0; i < L; ++i) {
          const T* qi = q + ((b * Hq + h) * L + i) * D;
          for (int64_t j = 0; j < S; ++j) {
            C acc = 0;
            for (int64_t d = 0; d < D; ++d) acc += static_cast<C>(qi[d]) * static_cast<C>(kb[j * D + d]);
            sc[((b * Hq + h) * L + i) * S + j] = from_compute<T>(static_cast<C>(acc * scale));
          }
        }
      }
    auto run_mod = [&](const char* name, Tensor& t) -> Status {
      ep::SubgraphRunner* g = info.subgraph(name);
      if (!g) return Status::Ok();
      NXRT_ASSIGN_OR_RETURN(auto outs, g->run(ctx, {Value(t)}));
      if (outs.size() != 1 || !outs[0].is_tensor()) return ctx.error(std::string(name) + " must return one tensor");
      Tensor r = outs[0].tensor().contiguous();
      if (r.shape() != t.shape()) return ctx.error(std::string(name) + " returned shape " + shape_to_string(r.shape()) + ", expected " + shape_to_string(t.shape()));
      if (r.dtype() == DataType::kBool && std::string(name) == "mask_mod") {
        const bool* m = r.data<bool>();
        T* d = t.data<T>();
        for (int64_t x = 0; x < t.numel(); ++x)
          if (!m[x]) d[x] = from_compute<T>(-std::numeric_limits<C>::infinity());
        return Status::Ok();
      }
      if (r.dtype() != t.dtype()) return ctx.error(std::string(name) + " returned " + r.describe() + ", expected dtype of Q");
      t = r.clone();
      return Status::Ok();
    };
    NXRT_RETURN_IF_ERROR(run_mod("score_mod", scores));
    NXRT_RETURN_IF_ERROR(run_mod("mask_mod", scores));
    sc = scores.data<T>();
    // Softmax per row (in C).
    for (int64_t r = 0; r < B * Hq * L; ++r) {
      T* row = sc + r * S;
      C mx = -std::numeric_limits<C>::infinity();
      for (int64_t j = 0; j < S; ++j) mx = std::max(mx, static_cast<C>(row[j]));
      C sum = 0;
      std::vector<C> e(static_cast<size_t>(S));
      for (int64_t j = 0; j < S; ++j) { e[j] = std::exp(static_cast<C>(row[j]) - mx); sum += e[j]; }
      for (int64_t j = 0; j < S; ++j) row[j] = from_compute<T>(e[j] / sum);
    }
    NXRT_RETURN_IF_ERROR(run_mod("prob_mod", scores));
    sc = scores.data<T>();
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, Q.dtype(), Dims{B, Hq, L, Dv}));
    T* y = Y->data<T>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h) {
        const T* vb = v + (b * Hkv + h / G) * S * Dv;
        for (int64_t i = 0; i < L; ++i) {
          const T* p = sc + ((b * Hq + h) * L + i) * S;
          for (int64_t e = 0; e < Dv; ++e) {
            C acc = 0;
            for (int64_t j = 0; j < S; ++j) acc += static_cast<C>(p[j]) * static_cast<C>(vb[j * Dv + e]);
            y[((b * Hq + h) * L + i) * Dv + e] = from_compute<T>(acc);
          }
        }
      }
    return Status::Ok();
  }, [&] { return ctx.error("FlexAttention supports float, double, float16, bfloat16", StatusCode::kInvalidArgument); });
}

}  // namespace

void register_attention_extra_ops(ep::KernelRegistry& r) {
  r.add_fn("", "LinearAttention", 1, INT64_MAX, &linear_attention);
  r.add_fn("ai.onnx.preview", "FlexAttention", 1, INT64_MAX, &flex_attention);
}

}  // namespace nxrt::ops
