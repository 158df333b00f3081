// Attention family (ai.onnx): Attention (23, 24), RotaryEmbedding (23), TensorScatter (24), SwiGLU.
// LinearAttention, CausalConvWithState and FlexAttention live in attention/linear_flex_attention.cpp.
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/attention/attention_util.h"
#include "ops/common.h"

namespace nxrt::ops {
void register_attention_extra_ops(ep::KernelRegistry& r);

namespace {

std::string dims_str(const Dims& d) { return shape_to_string(d); }

// Copies a Q/K/V-like tensor into [B, H, S, D] layout in compute type C. 3-D inputs are
// [B, S, H*D] (reshape to [B, S, H, D], then heads first).
template <typename T, typename C>
void load_bhsd(const T* src, bool is3d, int64_t B, int64_t H, int64_t S, int64_t D, C* dst) {
  if (!is3d) {
    const int64_t n = B * H * S * D;
    for (int64_t x = 0; x < n; ++x) dst[x] = static_cast<C>(src[x]);
    return;
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h) {
        const T* in = src + ((b * S + s) * H + h) * D;
        C* out = dst + ((b * H + h) * S + s) * D;
        for (int64_t d = 0; d < D; ++d) out[d] = static_cast<C>(in[d]);
      }
}

// ---------------------------------------------------------------------------------------------
// Attention
struct AttnShapes {
  bool is3d = false;
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, P = 0, D = 0, Dv = 0;
};

// attn_mask as additive values in C over its own shape (bool: 0 / -inf), with broadcast strides into
// (B, Hq, Sq, T) set on p.
template <typename C>
Status attention_mask(ep::KernelContext& ctx, const Tensor& mask, C* maskv, AttnProblem<C>* p) {
  const int64_t B = p->B, Hq = p->Hq, Sq = p->Sq, Tt = p->T;
  const Dims& md = mask.shape();
  if (md.empty() || md.size() > 4) return ctx.error("attn_mask must have rank 1..4, got " + dims_str(md));
  Dims m4(4, 1);
  for (size_t i = 0; i < md.size(); ++i) m4[4 - md.size() + i] = md[i];
  const int64_t want[3] = {B, Hq, Sq};
  for (int i = 0; i < 3; ++i) {
    if (m4[i] != 1 && m4[i] != want[i]) {
      return ctx.error("attn_mask shape " + dims_str(md) + " does not broadcast to (batch, q_heads, q_seq, total_seq) = (" +
                       std::to_string(B) + "," + std::to_string(Hq) + "," + std::to_string(Sq) + "," + std::to_string(Tt) + ")",
                       StatusCode::kInvalidArgument);
    }
  }
  if (m4[3] > Tt) return ctx.error("attn_mask last dim " + std::to_string(m4[3]) + " exceeds total sequence length " + std::to_string(Tt), StatusCode::kInvalidArgument);
  const int64_t n = mask.numel();
  if (mask.dtype() == DataType::kBool) {
    const bool* mb = mask.data<bool>();
    for (int64_t x = 0; x < n; ++x) maskv[x] = mb[x] ? C(0) : -std::numeric_limits<C>::infinity();
  } else if (!load_floats(mask.dtype(), mask.raw_data(), n, maskv).ok()) {
    return ctx.error("attn_mask must be bool or a float type, got " + std::string(dtype_name(mask.dtype())), StatusCode::kInvalidArgument);
  }
  p->mask = maskv;
  p->mask_len = m4[3];
  p->mask_si = m4[2] == 1 ? 0 : m4[3];
  p->mask_sh = m4[1] == 1 ? 0 : m4[2] * m4[3];
  p->mask_sb = m4[0] == 1 ? 0 : m4[1] * m4[2] * m4[3];
  return Status::Ok();
}

// nonpad_kv_seqlen (opset 24, int64/int32 [B]) into nonpad; with is_causal, each batch's causal offset
// (the past length, else nonpad - Sq, else 0) into offsets.
template <typename C>
Status attention_lengths(ep::KernelContext& ctx, const Tensor* nonpad_t, bool has_past, int64_t P, int64_t* nonpad,
                         int64_t* offsets, AttnProblem<C>* p) {
  const int64_t B = p->B, Sq = p->Sq;
  if (nonpad_t) {
    if (nonpad_t->numel() != B || (nonpad_t->dtype() != DataType::kInt64 && nonpad_t->dtype() != DataType::kInt32)) {
      return ctx.error("nonpad_kv_seqlen must be int64 with batch_size (" + std::to_string(B) + ") values, got " + nonpad_t->describe(), StatusCode::kInvalidArgument);
    }
    for (int64_t b = 0; b < B; ++b)
      nonpad[b] = nonpad_t->dtype() == DataType::kInt64 ? nonpad_t->data<int64_t>()[b] : nonpad_t->data<int32_t>()[b];
    p->nonpad = nonpad;
  }
  if (p->causal) {
    for (int64_t b = 0; b < B; ++b) {
      offsets[b] = 0;
      if (has_past) offsets[b] = P;
      else if (nonpad_t) offsets[b] = nonpad[b] - Sq;
    }
    p->causal_offset = offsets;
  }
  return Status::Ok();
}

template <typename T>
Status attention_typed(ep::KernelContext& ctx, const AttnShapes& sh, bool reference) {
  using C = compute_t<T>;
  const auto& info = ctx.info();
  const Tensor& Q = ctx.input(0);
  const Tensor& K = ctx.input(1);
  const Tensor& V = ctx.input(2);
  const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  const Tensor* past_k = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  const Tensor* past_v = ctx.has_input(5) ? &ctx.input(5) : nullptr;
  const Tensor* nonpad_t = (info.opset() >= 24 && ctx.has_input(6)) ? &ctx.input(6) : nullptr;
  const int64_t B = sh.B, Hq = sh.Hq, Hkv = sh.Hkv, Sq = sh.Sq, P = sh.P, D = sh.D, Dv = sh.Dv;
  const int64_t Tt = P + sh.Skv;

  // 4-D inputs already in the compute type are used in place; everything else is copied into
  // [B, H, S, D] compute-type buffers (present = concat(past, new) along the sequence axis).
  constexpr bool kSameType = std::is_same_v<T, C>;
  const bool direct = kSameType && !sh.is3d;
  const C* qp = nullptr;
  const C* kp = nullptr;
  const C* vp = nullptr;
  if constexpr (kSameType) {
    if (direct) qp = Q.data<T>();
    if (direct && P == 0) { kp = K.data<T>(); vp = V.data<T>(); }
  }
  // Every buffer this step needs comes from one step workspace (nothing allocated per decode step).
  const bool want_qk = ctx.output_requested(3);
  ScratchLayout lay;
  const size_t q_off = qp ? 0 : lay.add<C>(B * Hq * Sq * D);
  const size_t k_off = kp ? 0 : lay.add<C>(B * Hkv * Tt * D);
  const size_t v_off = kp ? 0 : lay.add<C>(B * Hkv * Tt * Dv);
  const size_t kn_off = kp ? 0 : lay.add<C>(B * Hkv * sh.Skv * D);
  const size_t vn_off = kp ? 0 : lay.add<C>(B * Hkv * sh.Skv * Dv);
  const size_t mask_off = mask ? lay.add<C>(mask->numel()) : 0;
  const size_t nonpad_off = lay.add<int64_t>(B);
  const size_t offsets_off = lay.add<int64_t>(B);
  const size_t y_off = direct ? 0 : lay.add<C>(B * Hq * Sq * Dv);
  const size_t qk_off = (want_qk && !kSameType) ? lay.add<C>(B * Hq * Sq * Tt) : 0;
  NXRT_RETURN_IF_ERROR(lay.allocate(ctx));
  if (!qp) {
    C* q = lay.at<C>(q_off);
    load_bhsd(Q.data<T>(), sh.is3d, B, Hq, Sq, D, q);
    qp = q;
  }
  if (!kp) {
    C* k = lay.at<C>(k_off);
    C* v = lay.at<C>(v_off);
    C* kn = lay.at<C>(kn_off);
    C* vn = lay.at<C>(vn_off);
    load_bhsd(K.data<T>(), sh.is3d, B, Hkv, sh.Skv, D, kn);
    load_bhsd(V.data<T>(), sh.is3d, B, Hkv, sh.Skv, Dv, vn);
    const T* pk = past_k ? past_k->data<T>() : nullptr;
    const T* pv = past_v ? past_v->data<T>() : nullptr;
    for (int64_t bh = 0; bh < B * Hkv; ++bh) {
      C* kd = k + bh * Tt * D;
      C* vd = v + bh * Tt * Dv;
      for (int64_t x = 0; x < P * D; ++x) kd[x] = static_cast<C>(pk[bh * P * D + x]);
      for (int64_t x = 0; x < P * Dv; ++x) vd[x] = static_cast<C>(pv[bh * P * Dv + x]);
      std::copy(kn + bh * sh.Skv * D, kn + (bh + 1) * sh.Skv * D, kd + P * D);
      std::copy(vn + bh * sh.Skv * Dv, vn + (bh + 1) * sh.Skv * Dv, vd + P * Dv);
    }
    kp = k;
    vp = v;
  }

  AttnProblem<C> p;
  p.B = B; p.Hq = Hq; p.Hkv = Hkv; p.Sq = Sq; p.T = Tt; p.D = D; p.Dv = Dv;
  p.q = qp; p.k = kp; p.v = vp;
  const float scale_attr = info.attr_float("scale", 0.f);
  p.scale = info.has_attr("scale") ? static_cast<C>(scale_attr)
                                   : static_cast<C>(1.0 / std::sqrt(static_cast<double>(D)));
  p.softcap = static_cast<C>(info.attr_float("softcap", 0.f));
  p.causal = info.attr_int("is_causal", 0) != 0;

  if (mask) NXRT_RETURN_IF_ERROR(attention_mask(ctx, *mask, lay.at<C>(mask_off), &p));
  NXRT_RETURN_IF_ERROR(attention_lengths(ctx, nonpad_t, past_k != nullptr, P, lay.at<int64_t>(nonpad_off),
                                         lay.at<int64_t>(offsets_off), &p));

  // Outputs.
  Dims yshape = sh.is3d ? Dims{B, Sq, Hq * Dv} : Dims{B, Hq, Sq, Dv};
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, dtype_of<T>(), yshape));
  C* y = nullptr;
  C* qk = nullptr;
  Tensor* QK = nullptr;
  const int64_t mode = info.attr_int("qk_matmul_output_mode", 0);
  if (want_qk) {
    if (mode < 0 || mode > 3) return info.error("qk_matmul_output_mode must be 0..3, got " + std::to_string(mode));
    NXRT_ASSIGN_OR_RETURN(QK, ctx.allocate_output(3, dtype_of<T>(), Dims{B, Hq, Sq, Tt}));
    p.qk_mode = static_cast<int>(mode);
    if constexpr (kSameType) p.qk_out = QK->data<T>();
    if (!p.qk_out) {
      qk = lay.at<C>(qk_off);
      p.qk_out = qk;
    }
  }
  if constexpr (kSameType) {
    if (direct) p.y = Y->data<T>();
  }
  if (!p.y) {
    y = lay.at<C>(y_off);
    p.y = y;
  }
  if constexpr (std::is_same_v<C, float>) {
    if (reference) attention_reference(p);
    else attention_fast(p, &ctx.pool());
  } else {
    attention_reference(p);
  }

  T* yo = Y->data<T>();
  if (y && !sh.is3d) {
    for (int64_t x = 0; x < B * Hq * Sq * Dv; ++x) yo[x] = from_compute<T>(y[x]);
  } else if (y) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < Hq; ++h)
        for (int64_t s = 0; s < Sq; ++s) {
          const C* in = y + ((b * Hq + h) * Sq + s) * Dv;
          T* out = yo + ((b * Sq + s) * Hq + h) * Dv;
          for (int64_t e = 0; e < Dv; ++e) out[e] = from_compute<T>(in[e]);
        }
  }
  if (ctx.output_requested(1)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * pk, ctx.allocate_output(1, dtype_of<T>(), Dims{B, Hkv, Tt, D}));
    T* o = pk->data<T>();
    for (int64_t x = 0; x < B * Hkv * Tt * D; ++x) o[x] = from_compute<T>(kp[x]);
  }
  if (ctx.output_requested(2)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * pv, ctx.allocate_output(2, dtype_of<T>(), Dims{B, Hkv, Tt, Dv}));
    T* o = pv->data<T>();
    for (int64_t x = 0; x < B * Hkv * Tt * Dv; ++x) o[x] = from_compute<T>(vp[x]);
  }
  if (QK && qk) {
    T* o = QK->data<T>();
    for (int64_t x = 0; x < B * Hq * Sq * Tt; ++x) o[x] = from_compute<T>(qk[x]);
  }
  return Status::Ok();
}

Status attention(ep::KernelContext& ctx, bool reference) {
  const auto& info = ctx.info();
  if (!ctx.has_input(0) || !ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("Q, K and V are required", StatusCode::kInvalidArgument);
  const Tensor& Q = ctx.input(0);
  const Tensor& K = ctx.input(1);
  const Tensor& V = ctx.input(2);
  if (K.dtype() != Q.dtype() || V.dtype() != Q.dtype()) return ctx.error("Q, K, V must share one dtype", StatusCode::kInvalidArgument);
  AttnShapes sh;
  if (Q.rank() != K.rank() || Q.rank() != V.rank() || (Q.rank() != 3 && Q.rank() != 4)) {
    return ctx.error("Q, K, V must all be 3-D or all 4-D", StatusCode::kInvalidArgument);
  }
  sh.is3d = Q.rank() == 3;
  sh.B = Q.dim(0);
  if (K.dim(0) != sh.B || V.dim(0) != sh.B) return ctx.error("Q, K, V batch sizes differ", StatusCode::kInvalidArgument);
  if (sh.is3d) {
    sh.Hq = info.attr_int("q_num_heads", 0);
    sh.Hkv = info.attr_int("kv_num_heads", 0);
    if (sh.Hq <= 0 || sh.Hkv <= 0) return info.error("3-D Q/K/V need positive q_num_heads and kv_num_heads attributes");
    if (Q.dim(2) % sh.Hq != 0 || K.dim(2) % sh.Hkv != 0 || V.dim(2) % sh.Hkv != 0) {
      return ctx.error("hidden sizes must divide by the head counts (q_num_heads " + std::to_string(sh.Hq) +
                       ", kv_num_heads " + std::to_string(sh.Hkv) + ")", StatusCode::kInvalidArgument);
    }
    sh.Sq = Q.dim(1); sh.Skv = K.dim(1);
    sh.D = Q.dim(2) / sh.Hq;
    if (K.dim(2) / sh.Hkv != sh.D) return ctx.error("Q and K head sizes differ", StatusCode::kInvalidArgument);
    sh.Dv = V.dim(2) / sh.Hkv;
    if (V.dim(1) != sh.Skv) return ctx.error("K and V sequence lengths differ", StatusCode::kInvalidArgument);
  } else {
    sh.Hq = Q.dim(1); sh.Hkv = K.dim(1);
    sh.Sq = Q.dim(2); sh.Skv = K.dim(2);
    sh.D = Q.dim(3);
    if (K.dim(3) != sh.D) return ctx.error("Q and K head sizes differ", StatusCode::kInvalidArgument);
    if (V.dim(1) != sh.Hkv || V.dim(2) != sh.Skv) return ctx.error("K and V must agree on heads and sequence length", StatusCode::kInvalidArgument);
    sh.Dv = V.dim(3);
  }
  if (sh.Hkv <= 0 || sh.Hq % sh.Hkv != 0) {
    return ctx.error("q_num_heads (" + std::to_string(sh.Hq) + ") must be a multiple of kv_num_heads (" + std::to_string(sh.Hkv) + ")", StatusCode::kInvalidArgument);
  }
  const bool hp = ctx.has_input(4), hv = ctx.has_input(5);
  if (hp != hv) return ctx.error("past_key and past_value must be given together", StatusCode::kInvalidArgument);
  if (hp) {
    const Tensor& pk = ctx.input(4);
    const Tensor& pv = ctx.input(5);
    if (pk.dtype() != Q.dtype() || pv.dtype() != Q.dtype()) return ctx.error("past_key/past_value dtype must match Q", StatusCode::kInvalidArgument);
    if (pk.rank() != 4 || pv.rank() != 4 || pk.dim(0) != sh.B || pk.dim(1) != sh.Hkv || pk.dim(3) != sh.D ||
        pv.dim(0) != sh.B || pv.dim(1) != sh.Hkv || pv.dim(2) != pk.dim(2) || pv.dim(3) != sh.Dv) {
      return ctx.error("past_key must be (batch, kv_heads, past_len, head_size) and past_value (batch, kv_heads, past_len, v_head_size)", StatusCode::kInvalidArgument);
    }
    sh.P = pk.dim(2);
  }
  return dispatch_float(Q.dtype(), [&](auto tag) -> Status { return attention_typed<decltype(tag)>(ctx, sh, reference); },
                        [&] { return ctx.error("Attention supports float, double, float16, bfloat16", StatusCode::kInvalidArgument); });
}

// ---------------------------------------------------------------------------------------------
// RotaryEmbedding (opset 23)
Status rotary_embedding(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& X = ctx.input(0);
  const Tensor& cosc = ctx.input(1);
  const Tensor& sinc = ctx.input(2);
  const bool has_pos = ctx.has_input(3);
  const bool interleaved = info.attr_int("interleaved", 0) != 0;
  int64_t rot = info.attr_int("rotary_embedding_dim", 0);
  const int64_t num_heads = info.attr_int("num_heads", 0);
  if (X.rank() != 3 && X.rank() != 4) return ctx.error("input must be 3-D or 4-D", StatusCode::kInvalidArgument);
  if (cosc.dtype() != X.dtype() || sinc.dtype() != X.dtype()) return ctx.error("cos_cache/sin_cache dtype must match input", StatusCode::kInvalidArgument);
  const bool is3d = X.rank() == 3;
  const int64_t B = X.dim(0);
  int64_t H, S, D;
  if (is3d) {
    if (num_heads <= 0) return info.error("3-D input needs a positive num_heads attribute");
    S = X.dim(1);
    if (X.dim(2) % num_heads != 0) return ctx.error("hidden size must divide by num_heads", StatusCode::kInvalidArgument);
    H = num_heads;
    D = X.dim(2) / num_heads;
  } else {
    H = X.dim(1); S = X.dim(2); D = X.dim(3);
  }
  if (rot == 0) rot = D;
  if (rot < 0 || rot > D || rot % 2 != 0) return info.error("rotary_embedding_dim must be even and <= head_size " + std::to_string(D));
  const int64_t half = rot / 2;
  if (cosc.shape() != sinc.shape() || cosc.rank() < 2 || cosc.dim(-1) != half) {
    return ctx.error("cos_cache and sin_cache must share a shape whose last dim is rotary_dim/2 = " + std::to_string(half), StatusCode::kInvalidArgument);
  }
  // position_ids are read in place (int64 or int32): a decode step through here must not allocate.
  const Tensor* pt = has_pos ? &ctx.input(3) : nullptr;
  if (pt && pt->dtype() != DataType::kInt64 && pt->dtype() != DataType::kInt32)
    return ctx.error(std::string("position_ids must be int64 or int32, got ") + dtype_name(pt->dtype()), StatusCode::kInvalidArgument);
  auto pos_at = [pt](int64_t i) -> int64_t {
    return pt->dtype() == DataType::kInt64 ? pt->data<int64_t>()[i] : pt->data<int32_t>()[i];
  };
  int64_t max_pos = 0;
  if (has_pos) {
    if (pt->shape() != Dims{B, S}) return ctx.error("position_ids must be (batch, seq)", StatusCode::kInvalidArgument);
    if (cosc.rank() != 2) return ctx.error("with position_ids, cos_cache must be 2-D (max_position, rotary_dim/2)", StatusCode::kInvalidArgument);
    max_pos = cosc.dim(0);
    for (int64_t i = 0; i < B * S; ++i) {
      const int64_t p = pos_at(i);
      if (p < 0 || p >= max_pos) return ctx.error("position id " + std::to_string(p) + " out of range [0, " + std::to_string(max_pos) + ")", StatusCode::kInvalidArgument);
    }
  } else if (cosc.shape() != Dims{B, S, half}) {
    return ctx.error("without position_ids, cos_cache must be (batch, seq, rotary_dim/2)", StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
  return dispatch_float(X.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* x = X.data<T>();
    const T* cc = cosc.data<T>();
    const T* ss = sinc.data<T>();
    T* y = Y->data<T>();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t row = has_pos ? pos_at(b * S + s) : b * S + s;
        const T* cbuf = cc + row * half;
        const T* sbuf = ss + row * half;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t off = is3d ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D;
          const T* xi = x + off;
          T* yi = y + off;
          for (int64_t k = 0; k < half; ++k) {
            const int64_t i1 = interleaved ? 2 * k : k;
            const int64_t i2 = interleaved ? 2 * k + 1 : k + half;
            const C x1 = static_cast<C>(xi[i1]), x2 = static_cast<C>(xi[i2]);
            const C ck = static_cast<C>(cbuf[k]), sk = static_cast<C>(sbuf[k]);
            yi[i1] = from_compute<T>(ck * x1 - sk * x2);
            yi[i2] = from_compute<T>(sk * x1 + ck * x2);
          }
          for (int64_t d = rot; d < D; ++d) yi[d] = xi[d];
        }
      }
    return Status::Ok();
  }, [&] { return ctx.error("RotaryEmbedding supports float, double, float16, bfloat16", StatusCode::kInvalidArgument); });
}

// ---------------------------------------------------------------------------------------------
// TensorScatter (opset 24): writes `update` into a copy of `past_cache` along `axis` at
// write_indices[batch] (+ sequence offset, modulo the axis length in circular mode).
Status tensor_scatter(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& past = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  const std::string mode = info.attr_string("mode", "linear");
  if (mode != "linear" && mode != "circular") return info.error("mode must be 'linear' or 'circular', got '" + mode + "'");
  const bool circular = mode == "circular";
  int64_t axis = info.attr_int("axis", -2);
  const int64_t r = past.rank();
  if (!normalize_axis(&axis, r) || axis == 0) return info.error("axis " + std::to_string(info.attr_int("axis", -2)) + " out of range (must not be the batch axis) for rank " + std::to_string(r));
  if (upd.dtype() != past.dtype() || upd.rank() != r) return ctx.error("update must match past_cache in dtype and rank", StatusCode::kInvalidArgument);
  for (int64_t i = 0; i < r; ++i) {
    if (i == axis ? upd.dim(i) > past.dim(i) : upd.dim(i) != past.dim(i)) {
      return ctx.error("update shape " + dims_str(upd.shape()) + " incompatible with past_cache " + dims_str(past.shape()), StatusCode::kInvalidArgument);
    }
  }
  const int64_t B = past.dim(0);
  // Read in place (no vector): a decode step through here must not allocate.
  const Tensor* wi = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (wi) {
    if (wi->dtype() != DataType::kInt64 && wi->dtype() != DataType::kInt32) {
      return ctx.error("write_indices must be int64 or int32", StatusCode::kInvalidArgument);
    }
    if (wi->numel() != B) return ctx.error("write_indices must have batch_size values", StatusCode::kInvalidArgument);
  }
  auto write_index = [&](int64_t b) -> int64_t {
    if (!wi) return 0;
    return wi->dtype() == DataType::kInt64 ? wi->data<int64_t>()[b] : wi->data<int32_t>()[b];
  };
  const int64_t L = past.dim(axis), S = upd.dim(axis);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 1; i < axis; ++i) outer *= past.dim(i);
  for (int64_t i = axis + 1; i < r; ++i) inner *= past.dim(i);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t ib = write_index(b);
    if (ib < 0 || (!circular && ib + S > L) || (circular && L == 0 && S > 0)) {
      return ctx.error("write index " + std::to_string(ib) + " with update length " + std::to_string(S) +
                       " out of range for axis length " + std::to_string(L), StatusCode::kInvalidArgument);
    }
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, past.dtype(), past.shape()));
  const size_t esz = dtype_storage_bytes(past.dtype(), 1);
  if (dtype_bits(past.dtype()) % 8 != 0 || past.dtype() == DataType::kString) return ctx.error("TensorScatter does not support this dtype", StatusCode::kInvalidArgument);
  const auto* src = static_cast<const uint8_t*>(past.raw_data());
  const auto* u = static_cast<const uint8_t*>(upd.raw_data());
  auto* dst = static_cast<uint8_t*>(Y->raw_data());
  // When the output is bound to the cache's own buffer (past and present sharing one fixed-capacity
  // buffer), only the new rows are written.
  if (past.nbytes() > 0 && dst != src) std::memcpy(dst, src, past.nbytes());
  const size_t row = static_cast<size_t>(inner) * esz;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t s = 0; s < S; ++s) {
        int64_t t = write_index(b) + s;
        if (circular) t %= L;
        const int64_t po = ((b * outer + o) * L + t);
        const int64_t uo = ((b * outer + o) * S + s);
        std::memcpy(dst + static_cast<size_t>(po) * row, u + static_cast<size_t>(uo) * row, row);
      }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// SwiGLU: y = a * sigmoid(alpha * a) * b (a, b broadcast).
Status swiglu(ep::KernelContext& ctx) {
  const Tensor& A = ctx.input(0);
  const Tensor& Bt = ctx.input(1);
  if (A.dtype() != Bt.dtype()) return ctx.error("a and b must share a dtype", StatusCode::kInvalidArgument);
  const double alpha = ctx.info().attr_float("alpha", 1.f);
  Dims out;
  if (!broadcast_shapes(A.shape(), Bt.shape(), &out)) return ctx.error("a and b do not broadcast", StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, A.dtype(), out));
  return dispatch_float(A.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* a = A.data<T>();
    const T* b = Bt.data<T>();
    T* y = Y->data<T>();
    const C al = static_cast<C>(alpha);
    auto f = [&](C av, C bv) -> C { return av / (C(1) + std::exp(-al * av)) * bv; };
    const int64_t n = shape_numel(out);
    if (A.shape() == out && Bt.shape() == out) {
      for (int64_t i = 0; i < n; ++i) y[i] = from_compute<T>(f(static_cast<C>(a[i]), static_cast<C>(b[i])));
      return Status::Ok();
    }
    const Dims sa = broadcast_strides(A.shape(), out), sb = broadcast_strides(Bt.shape(), out);
    auto cur = strided_cursor(out, out.size(), sa, sb);
    for (int64_t i = 0; i < n; ++i, cur.next())
      y[i] = from_compute<T>(f(static_cast<C>(a[cur.offset(0)]), static_cast<C>(b[cur.offset(1)])));
    return Status::Ok();
  }, [&] { return ctx.error("SwiGLU supports float, double, float16, bfloat16", StatusCode::kInvalidArgument); });
}

}  // namespace

void register_attention_ops(ep::KernelRegistry& r) {
  r.add_class<ReferenceSwitchKernel<&attention>>("", "Attention", 23);
  r.add_fn("", "RotaryEmbedding", 23, INT64_MAX, &rotary_embedding);
  r.add_fn("", "TensorScatter", 24, INT64_MAX, &tensor_scatter);
  r.add_fn("", "SwiGLU", 1, INT64_MAX, &swiglu);
  register_attention_extra_ops(r);
}

}  // namespace nxrt::ops
