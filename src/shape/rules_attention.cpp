// Shape rules and op schemas: ONNX Attention, com.microsoft GroupQueryAttention and Attention, rotary
// embeddings, TensorScatter.
#include <algorithm>

#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

// ONNX Attention (opset 23): Q/K/V 4-D (B, heads, S, head) or 3-D (B, S, hidden).
Status op_attention(NodeContext& c) {
  const ValueFacts &q = c.input(0), &k = c.input(1), &v = c.input(2);
  DataType dt = q.dtype;
  if (!q.has_shape || !k.has_shape || !v.has_shape || q.dims.size() != k.dims.size() || q.dims.size() != v.dims.size() ||
      (q.dims.size() != 3 && q.dims.size() != 4)) {
    for (size_t i = 0; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(i == 0 ? dt : dt));
    return Status::Ok();
  }
  SymDim b;
  NXRT_RETURN_IF_ERROR(c.unify(q.dims[0], k.dims[0], "batch of Q " + c.shape_str(q) + " and K " + c.shape_str(k) + " differ", &b));
  SymDim qs, kvs, qh, kvh, v_head, k_head;
  if (q.dims.size() == 4) {
    qh = q.dims[1];
    qs = q.dims[2];
    kvh = k.dims[1];
    kvs = k.dims[2];
    k_head = k.dims[3];
    v_head = v.dims[3];
  } else {
    qh = SymDim::c(c.ai("q_num_heads", 1));
    kvh = SymDim::c(c.ai("kv_num_heads", 1));
    qs = q.dims[1];
    kvs = k.dims[1];
    k_head = floordiv(c.S, k.dims[2], kvh);
    v_head = floordiv(c.S, v.dims[2], kvh);
  }
  SymDim total = kvs;
  if (c.has(4) && c.input(4).has_shape && c.input(4).dims.size() == 4) total = add(c.S, {c.input(4).dims[2], kvs});
  if (q.dims.size() == 4) {
    c.set(0, tensor(dt, {b, qh, qs, v_head}));
  } else {
    c.set(0, tensor(dt, {b, qs, mul(c.S, {qh, v_head})}));
  }
  if (c.nout() > 1) c.set(1, tensor(dt, {b, kvh, total, k_head}));
  if (c.nout() > 2) c.set(2, tensor(dt, {b, kvh, total, v_head}));
  if (c.nout() > 3) c.set(3, tensor(dt, {b, qh, qs, total}));
  return Status::Ok();
}

// com.microsoft GroupQueryAttention: query (B, S, hidden) or packed QKV; past_key (B, kv_heads, P, head).
Status op_gqa(NodeContext& c) {
  const ValueFacts& q = c.input(0);
  DataType dt = q.dtype;
  int64_t nh = c.ai("num_heads", 0), kvh = c.ai("kv_num_heads", 0);
  if (!q.has_shape || q.dims.size() != 3 || nh <= 0 || kvh <= 0) {
    for (size_t i = 0; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  bool packed = !c.has(1) || (c.input(1).has_shape && c.input(1).dims.empty());
  SymDim hidden = q.dims[2];
  SymDim head = packed ? floordiv(c.S, hidden, SymDim::c(nh + 2 * kvh)) : floordiv(c.S, hidden, SymDim::c(nh));
  c.set(0, tensor(dt, {q.dims[0], q.dims[1], mul(c.S, {SymDim::c(nh), head})}));
  // present_* : (B, kv_heads, present_seq, head); with a past buffer its seq dim (shared buffer) or
  // past + new tokens; we take the past's when static (shared-buffer layout), else mint.
  SymDim present_seq = SymDim::s(c.S.mint());
  const ValueFacts& pk = c.input(3);
  if (pk.has_shape && pk.dims.size() == 4) {
    SymDim h;
    NXRT_RETURN_IF_ERROR(c.unify(pk.dims[3], head, "past_key " + c.shape_str(pk) + " head size differs from query " + c.shape_str(q), &h));
    head = h;
  }
  // present_* have the cache's type (T_CACHE): the past's when given (a float16 cache beside a float32
  // query), else the query's.
  const DataType cache_dt = c.has(3) && pk.dtype != DataType::kUndefined ? pk.dtype : dt;
  for (size_t i = 1; i < std::min<size_t>(c.nout(), 3); ++i) {
    c.set(i, tensor(cache_dt, {q.dims[0], SymDim::c(kvh), present_seq, head}));
  }
  return Status::Ok();
}

// com.microsoft Attention (packed QKV weights): output (B, S, v_hidden).
Status op_ms_attention(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  const ValueFacts& w = c.input(1);
  if (!x.has_shape || x.dims.size() != 3) return same_as_input0(c);
  SymDim hidden = x.dims[2];
  if (auto hs = c.aints("qkv_hidden_sizes"); hs && hs->size() == 3) {
    hidden = SymDim::c((*hs)[2]);
  } else if (w.has_shape && w.dims.size() == 2) {
    hidden = floordiv(c.S, w.dims[1], SymDim::c(3));
  }
  c.set(0, tensor(x.dtype, {x.dims[0], x.dims[1], hidden}));
  for (size_t i = 1; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(x.dtype));
  return Status::Ok();
}

}  // namespace

void add_attention_schemas(SchemaList& s) {
  s.add("Attention", &op_attention);
  s.add("com.microsoft", "GroupQueryAttention", &op_gqa);
  s.add("com.microsoft", "Attention", &op_ms_attention);
  s.add("RotaryEmbedding", &same_as_input0).rank(kSameAsInput0);
  s.add("com.microsoft", "RotaryEmbedding", &same_as_input0).rank(kSameAsInput0);
  s.add("TensorScatter", &same_as_input0).rank(kSameAsInput0);
}

}  // namespace nxrt::shape
