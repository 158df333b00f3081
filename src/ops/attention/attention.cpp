// Attention family (ai.onnx): Attention (23, 24), RotaryEmbedding (23), TensorScatter (24), SwiGLU.
// LinearAttention, CausalConvWithState and FlexAttention live in attention/linear_flex_attention.cpp.
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
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
//
// A call is planned from its inputs' dtypes and shapes (AttnPlan: once per shape set at specialize, or
// per call without a variant): the validated dimensions, the mask's broadcast strides, which inputs are
// read in place, the step scratch layout (converted Q/K/V, present, mask values, lengths, the output in
// the compute type, the fast core's score blocks) and the fast core's work split. compute reads the
// values (mask, nonpad_kv_seqlen) and runs the plan.
struct AttnShapes {
  bool is3d = false;
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, Skv = 0, P = 0, D = 0, Dv = 0;
};

// The dtypes and shapes the plan reads (kUndefined: absent or not a tensor).
struct AttnInputFacts {
  static constexpr size_t kInputs = 7;
  DataType dt[kInputs] = {};
  const Dims* dims[kInputs] = {};
  bool has(size_t i) const { return dt[i] != DataType::kUndefined; }
};

struct AttnPlan {
  AttnShapes sh;
  DataType dt = DataType::kFloat;
  int64_t T = 0;  // P + Skv
  bool mask = false;
  int64_t mask_numel = 0, mask_len = 0, mask_si = 0, mask_sh = 0, mask_sb = 0;
  bool nonpad = false;  // opset 24 nonpad_kv_seqlen given
  bool want_qk = false;
  int qk_mode = 0;
  bool q_direct = false, kv_direct = false, y_direct = false;  // read / written in place
  bool fast = false;  // float compute type, not the reference: attention_fast on fp's split
  AttnFastPlan fp;
  ScratchLayout lay;
  size_t q_off = 0, k_off = 0, v_off = 0, kn_off = 0, vn_off = 0, mask_off = 0, nonpad_off = 0, offsets_off = 0,
         y_off = 0, qk_off = 0, fast_off = 0;
};

struct AttnVariant final : ep::KernelVariant {
  AttnPlan plan;
  size_t workspace_bytes() const override { return plan.lay.bytes(); }
};

// The plan for these input dtypes and shapes; an error for inputs the op rejects whatever their values.
Status plan_attention(const ep::KernelInfo& info, const AttnInputFacts& in, bool want_qk, bool reference, int threads,
                      AttnPlan* out) {
  AttnPlan& pl = *out;
  if (!in.has(0) || !in.has(1) || !in.has(2)) return invalid_argument("Q, K and V are required");
  const Dims& Q = *in.dims[0];
  const Dims& K = *in.dims[1];
  const Dims& V = *in.dims[2];
  const DataType dt = pl.dt = in.dt[0];
  if (in.dt[1] != dt || in.dt[2] != dt) return invalid_argument("Q, K, V must share one dtype");
  AttnShapes& sh = pl.sh;
  if (Q.size() != K.size() || Q.size() != V.size() || (Q.size() != 3 && Q.size() != 4)) {
    return invalid_argument("Q, K, V must all be 3-D or all 4-D");
  }
  sh.is3d = Q.size() == 3;
  sh.B = Q[0];
  if (K[0] != sh.B || V[0] != sh.B) return invalid_argument("Q, K, V batch sizes differ");
  if (sh.is3d) {
    sh.Hq = info.attr_int("q_num_heads", 0);
    sh.Hkv = info.attr_int("kv_num_heads", 0);
    if (sh.Hq <= 0 || sh.Hkv <= 0) return info.error("3-D Q/K/V need positive q_num_heads and kv_num_heads attributes");
    if (Q[2] % sh.Hq != 0 || K[2] % sh.Hkv != 0 || V[2] % sh.Hkv != 0) {
      return invalid_argument("hidden sizes must divide by the head counts (q_num_heads " + std::to_string(sh.Hq) +
                              ", kv_num_heads " + std::to_string(sh.Hkv) + ")");
    }
    sh.Sq = Q[1]; sh.Skv = K[1];
    sh.D = Q[2] / sh.Hq;
    if (K[2] / sh.Hkv != sh.D) return invalid_argument("Q and K head sizes differ");
    sh.Dv = V[2] / sh.Hkv;
    if (V[1] != sh.Skv) return invalid_argument("K and V sequence lengths differ");
  } else {
    sh.Hq = Q[1]; sh.Hkv = K[1];
    sh.Sq = Q[2]; sh.Skv = K[2];
    sh.D = Q[3];
    if (K[3] != sh.D) return invalid_argument("Q and K head sizes differ");
    if (V[1] != sh.Hkv || V[2] != sh.Skv) return invalid_argument("K and V must agree on heads and sequence length");
    sh.Dv = V[3];
  }
  if (sh.Hkv <= 0 || sh.Hq % sh.Hkv != 0) {
    return invalid_argument("q_num_heads (" + std::to_string(sh.Hq) + ") must be a multiple of kv_num_heads (" + std::to_string(sh.Hkv) + ")");
  }
  const bool hp = in.has(4), hv = in.has(5);
  if (hp != hv) return invalid_argument("past_key and past_value must be given together");
  if (hp) {
    const Dims& pk = *in.dims[4];
    const Dims& pv = *in.dims[5];
    if (in.dt[4] != dt || in.dt[5] != dt) return invalid_argument("past_key/past_value dtype must match Q");
    if (pk.size() != 4 || pv.size() != 4 || pk[0] != sh.B || pk[1] != sh.Hkv || pk[3] != sh.D ||
        pv[0] != sh.B || pv[1] != sh.Hkv || pv[2] != pk[2] || pv[3] != sh.Dv) {
      return invalid_argument("past_key must be (batch, kv_heads, past_len, head_size) and past_value (batch, kv_heads, past_len, v_head_size)");
    }
    sh.P = pk[2];
  }
  if (dt != DataType::kFloat && dt != DataType::kDouble && dt != DataType::kFloat16 && dt != DataType::kBFloat16)
    return invalid_argument("Attention supports float, double, float16, bfloat16");
  const int64_t B = sh.B, Hq = sh.Hq, Hkv = sh.Hkv, Sq = sh.Sq, D = sh.D, Dv = sh.Dv;
  const int64_t Tt = pl.T = sh.P + sh.Skv;

  // attn_mask: broadcast strides into (B, Hq, Sq, T); its values (bool: 0 / -inf) are read at compute.
  pl.mask = in.has(3);
  if (pl.mask) {
    const Dims& md = *in.dims[3];
    if (md.empty() || md.size() > 4) return invalid_argument("attn_mask must have rank 1..4, got " + shape_to_string(md));
    Dims m4(4, 1);
    for (size_t i = 0; i < md.size(); ++i) m4[4 - md.size() + i] = md[i];
    const int64_t want[3] = {B, Hq, Sq};
    for (int i = 0; i < 3; ++i) {
      if (m4[i] != 1 && m4[i] != want[i]) {
        return invalid_argument("attn_mask shape " + shape_to_string(md) + " does not broadcast to (batch, q_heads, q_seq, total_seq) = (" +
                                std::to_string(B) + "," + std::to_string(Hq) + "," + std::to_string(Sq) + "," + std::to_string(Tt) + ")");
      }
    }
    if (m4[3] > Tt) return invalid_argument("attn_mask last dim " + std::to_string(m4[3]) + " exceeds total sequence length " + std::to_string(Tt));
    const DataType mdt = in.dt[3];
    if (mdt != DataType::kBool && mdt != DataType::kFloat && mdt != DataType::kDouble && mdt != DataType::kFloat16 &&
        mdt != DataType::kBFloat16)
      return invalid_argument("attn_mask must be bool or a float type, got " + std::string(dtype_name(mdt)));
    pl.mask_numel = shape_numel(md);
    pl.mask_len = m4[3];
    pl.mask_si = m4[2] == 1 ? 0 : m4[3];
    pl.mask_sh = m4[1] == 1 ? 0 : m4[2] * m4[3];
    pl.mask_sb = m4[0] == 1 ? 0 : m4[1] * m4[2] * m4[3];
  }
  pl.nonpad = info.opset() >= 24 && in.has(6);
  if (pl.nonpad && (shape_numel(*in.dims[6]) != B || (in.dt[6] != DataType::kInt64 && in.dt[6] != DataType::kInt32))) {
    const std::string got = std::string(dtype_name(in.dt[6])) + shape_to_string(*in.dims[6]);
    return invalid_argument("nonpad_kv_seqlen must be int64 with batch_size (" + std::to_string(B) + ") values, got " + got);
  }
  pl.want_qk = want_qk;
  if (want_qk) {
    const int64_t mode = info.attr_int("qk_matmul_output_mode", 0);
    if (mode < 0 || mode > 3) return info.error("qk_matmul_output_mode must be 0..3, got " + std::to_string(mode));
    pl.qk_mode = static_cast<int>(mode);
  }

  // 4-D inputs already in the compute type are used in place; everything else is copied into
  // [B, H, S, D] compute-type buffers (present = concat(past, new) along the sequence axis). Every
  // buffer a step needs is in one step workspace (nothing allocated per decode step).
  const bool same_type = dt == DataType::kFloat || dt == DataType::kDouble;  // compute type == dtype
  const bool c_double = dt == DataType::kDouble;
  pl.q_direct = same_type && !sh.is3d;
  pl.kv_direct = pl.q_direct && sh.P == 0;
  pl.y_direct = pl.q_direct;
  ScratchLayout& lay = pl.lay;
  auto add_c = [&](int64_t n) { return c_double ? lay.add<double>(n) : lay.add<float>(n); };
  pl.q_off = pl.q_direct ? 0 : add_c(B * Hq * Sq * D);
  if (!pl.kv_direct) {
    pl.k_off = add_c(B * Hkv * Tt * D);
    pl.v_off = add_c(B * Hkv * Tt * Dv);
    pl.kn_off = add_c(B * Hkv * sh.Skv * D);
    pl.vn_off = add_c(B * Hkv * sh.Skv * Dv);
  }
  pl.mask_off = pl.mask ? add_c(pl.mask_numel) : 0;
  pl.nonpad_off = lay.add<int64_t>(B);
  pl.offsets_off = lay.add<int64_t>(B);
  pl.y_off = pl.y_direct ? 0 : add_c(B * Hq * Sq * Dv);
  pl.qk_off = (want_qk && !same_type) ? add_c(B * Hq * Sq * Tt) : 0;
  pl.fast = !reference && !c_double;
  if (pl.fast) {
    pl.fp = attention_fast_plan(B, Hq, Sq, Tt, D, Dv, threads);
    pl.fast_off = lay.add<float>(static_cast<int64_t>(pl.fp.bytes() / sizeof(float)));
  }
  return Status::Ok();
}

template <typename T>
Status attention_typed(ep::KernelContext& ctx, const AttnPlan& pl, const ScratchLayout& lay) {
  using C = compute_t<T>;
  const auto& info = ctx.info();
  const AttnShapes& sh = pl.sh;
  const Tensor& Q = ctx.input(0);
  const Tensor& K = ctx.input(1);
  const Tensor& V = ctx.input(2);
  const Tensor* past_k = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  const Tensor* past_v = past_k ? &ctx.input(5) : nullptr;
  const int64_t B = sh.B, Hq = sh.Hq, Hkv = sh.Hkv, Sq = sh.Sq, P = sh.P, D = sh.D, Dv = sh.Dv;
  const int64_t Tt = pl.T;

  constexpr bool kSameType = std::is_same_v<T, C>;
  const C* qp = nullptr;
  const C* kp = nullptr;
  const C* vp = nullptr;
  if constexpr (kSameType) {
    if (pl.q_direct) qp = Q.data<T>();
    if (pl.kv_direct) { kp = K.data<T>(); vp = V.data<T>(); }
  }
  if (!qp) {
    C* q = lay.at<C>(pl.q_off);
    load_bhsd(Q.data<T>(), sh.is3d, B, Hq, Sq, D, q);
    qp = q;
  }
  if (!kp) {
    C* k = lay.at<C>(pl.k_off);
    C* v = lay.at<C>(pl.v_off);
    C* kn = lay.at<C>(pl.kn_off);
    C* vn = lay.at<C>(pl.vn_off);
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

  if (pl.mask) {
    const Tensor& mask = ctx.input(3);
    C* maskv = lay.at<C>(pl.mask_off);
    if (mask.dtype() == DataType::kBool) {
      const bool* mb = mask.data<bool>();
      for (int64_t x = 0; x < pl.mask_numel; ++x) maskv[x] = mb[x] ? C(0) : -std::numeric_limits<C>::infinity();
    } else {
      NXRT_RETURN_IF_ERROR(load_floats(mask.dtype(), mask.raw_data(), pl.mask_numel, maskv));
    }
    p.mask = maskv;
    p.mask_len = pl.mask_len;
    p.mask_si = pl.mask_si;
    p.mask_sh = pl.mask_sh;
    p.mask_sb = pl.mask_sb;
  }
  // nonpad_kv_seqlen (opset 24) per batch; with is_causal, each batch's causal offset (the past
  // length, else nonpad - Sq, else 0).
  int64_t* nonpad = lay.at<int64_t>(pl.nonpad_off);
  if (pl.nonpad) {
    const Tensor& t = ctx.input(6);
    for (int64_t b = 0; b < B; ++b) nonpad[b] = t.dtype() == DataType::kInt64 ? t.data<int64_t>()[b] : t.data<int32_t>()[b];
    p.nonpad = nonpad;
  }
  if (p.causal) {
    int64_t* offsets = lay.at<int64_t>(pl.offsets_off);
    for (int64_t b = 0; b < B; ++b) offsets[b] = past_k ? P : pl.nonpad ? nonpad[b] - Sq : 0;
    p.causal_offset = offsets;
  }

  // Outputs.
  Dims yshape = sh.is3d ? Dims{B, Sq, Hq * Dv} : Dims{B, Hq, Sq, Dv};
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, dtype_of<T>(), yshape));
  C* y = nullptr;
  C* qk = nullptr;
  Tensor* QK = nullptr;
  if (pl.want_qk) {
    NXRT_ASSIGN_OR_RETURN(QK, ctx.allocate_output(3, dtype_of<T>(), Dims{B, Hq, Sq, Tt}));
    p.qk_mode = pl.qk_mode;
    if constexpr (kSameType) p.qk_out = QK->data<T>();
    if (!p.qk_out) {
      qk = lay.at<C>(pl.qk_off);
      p.qk_out = qk;
    }
  }
  if constexpr (kSameType) {
    if (pl.y_direct) p.y = Y->data<T>();
  }
  if (!p.y) {
    y = lay.at<C>(pl.y_off);
    p.y = y;
  }
  if constexpr (std::is_same_v<C, float>) {
    if (pl.fast) {
      attention_fast(p, pl.fp, &ctx.pool(), lay.at<float>(pl.fast_off));
    } else {
      attention_reference(p);
    }
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

class AttentionKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    reference_ = info.overrides().reference();
    return Status::Ok();
  }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    AttnInputFacts in;
    for (size_t i = 0; i < AttnInputFacts::kInputs; ++i) {
      in.dt[i] = sc.has_input(i) ? sc.dtype(i) : DataType::kUndefined;
      in.dims[i] = &sc.shape(i);
    }
    auto v = std::make_unique<AttnVariant>();
    NXRT_RETURN_IF_ERROR(plan_attention(sc.info(), in, sc.info().output_present(3), reference_, sc.num_threads(), &v->plan));
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    // Without a variant (a context without a kernel cache) the same plan is made for this call.
    const auto* var = dynamic_cast<const AttnVariant*>(ctx.variant());
    AttnVariant local;
    if (!var) {
      static const Dims kNoDims;
      AttnInputFacts in;
      for (size_t i = 0; i < AttnInputFacts::kInputs; ++i) {
        const Value* v = ctx.input_value(i);
        const bool t = v && v->is_tensor();
        in.dt[i] = t ? v->tensor().dtype() : DataType::kUndefined;
        in.dims[i] = t ? &v->tensor().shape() : &kNoDims;
      }
      const Status s = plan_attention(ctx.info(), in, ctx.output_requested(3), reference_, ctx.pool().num_threads(), &local.plan);
      if (!s.ok()) return plan_error(ctx, s);
      var = &local;
    }
    const AttnPlan& pl = var->plan;
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *var));
    ScratchLayout lay = pl.lay;
    lay.bind(ws);
    return dispatch_float(pl.dt, [&](auto tag) -> Status { return attention_typed<decltype(tag)>(ctx, pl, lay); },
                          [&] { return ctx.error("Attention supports float, double, float16, bfloat16", StatusCode::kInvalidArgument); });
  }

 private:
  bool reference_ = false;
};

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
  r.add_class<AttentionKernel>("", "Attention", 23);
  r.add_fn("", "RotaryEmbedding", 23, INT64_MAX, &rotary_embedding);
  r.add_fn("", "TensorScatter", 24, INT64_MAX, &tensor_scatter);
  r.add_fn("", "SwiGLU", 1, INT64_MAX, &swiglu);
  register_attention_extra_ops(r);
}

}  // namespace nxrt::ops
