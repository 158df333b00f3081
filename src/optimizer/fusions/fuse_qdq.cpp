// Level-all pass: the node groups of a QDQ model (onnxruntime's quantize_static QuantFormat.QDQ, and other
// quantizers that write the same form) rewritten into the 8-bit ops they stand for, as onnxruntime's QDQ
// transformer does on its CPU provider. In a QDQ model every quantized activation is written as
// QuantizeLinear -> DequantizeLinear and the op between runs in float; the group
//
//   Y = QuantizeLinear(Op(DequantizeLinear(x_q, xs, xz), [DequantizeLinear(w_q, ws, wz)], ...), ys, yz)
//
// becomes one node over the 8-bit values:
//   Conv                          -> QLinearConv (weights int8/uint8 per tensor or per output channel,
//                                    bias int32 with scale xs * ws)
//   MatMul                        -> QLinearMatMul (b per tensor or, when constant, per column)
//   Gemm                          -> com.microsoft QGemm (alpha, transA, transB; bias int32 [N], beta 1)
//   Add, Mul                      -> com.microsoft QLinearAdd, QLinearMul
//   GlobalAveragePool, AveragePool-> com.microsoft QLinearGlobalAveragePool, QLinearAveragePool
//   Concat                        -> com.microsoft QLinearConcat
//   Sigmoid, LeakyRelu, Softmax   -> com.microsoft QLinearSigmoid, QLinearLeakyRelu, QLinearSoftmax
//   MaxPool, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, when the QuantizeLinear has the
//   DequantizeLinear's scale and zero point: the op itself on the 8-bit values (it only moves or selects
//   them, and quantizing a dequantized code with the same parameters gives the code back).
// A Relu between the op and the QuantizeLinear is dropped when the zero point is the type's lowest code:
// the quantization clamps negative values to that code already, so the two agree exactly.
//
// Results: the 8-bit ops compute the exact integer sums and round once, where the float graph rounds
// each dequantized product and sum in float32 before quantizing, so an output code can differ by one
// where the float result lies within float32 rounding of a halfway point (what onnxruntime's fused
// kernels give too). The pass runs only at level all, before constant folding (which would turn the
// weights' DequantizeLinear into float initializers).
//
// Conditions, each checked: activation scales and zero points are constants of one value (per tensor);
// weights and biases constants; every 8-bit operand of a com.microsoft op of one type, as those ops
// require; the float value between the op and the QuantizeLinear has no other reader. The
// DequantizeLinear nodes stay for their other readers; dead-code removal drops those left unread.
#include <cmath>
#include <cstring>

#include "ir/symbols.h"
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

constexpr const char* kMs = "com.microsoft";

bool is_8bit(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// The dtype of `name` as load-time shape inference gives it (kUndefined when unknown).
DataType value_dtype(Rewriter& rw, const std::string& name) {
  if (const Tensor* c = rw.constant(name)) return c->dtype();
  const ir::ValueFacts* f = rw.g.shape_facts ? rw.g.shape_facts->find(name) : nullptr;
  return f ? f->dtype : DataType::kUndefined;
}

// A per-tensor quantization: the 8-bit value, its scale and its zero point (empty: none given, the
// build writes a zero of `type`).
struct Quant {
  std::string q, scale, zp;
  DataType type = DataType::kUndefined;
  float s = 0;
  int64_t z = 0;
};

// The scale and zero point inputs (1, 2) of a QuantizeLinear / DequantizeLinear when they hold one value
// each: a float32 constant scale and an 8-bit constant zero point (or none: `dflt`). Fills s, z, type.
bool per_tensor_params(Rewriter& rw, const ir::Node& n, DataType dflt, Quant* out) {
  const Tensor *s = nullptr, *z = nullptr;
  if (!qdq_per_tensor(rw, n, &s, &z)) return false;
  out->scale = n.inputs[1];
  out->s = s->data<float>()[0];
  if (z) {
    out->zp = n.inputs[2];
    out->type = z->dtype();
    out->z = z->dtype() == DataType::kUInt8 ? z->data<uint8_t>()[0] : z->data<int8_t>()[0];
  } else {
    out->type = dflt;
    out->z = 0;
  }
  return is_8bit(out->type);
}

// The live DequantizeLinear that writes `name` (it may have other readers: it is not taken), or nullptr.
const ir::Node* dequantize_of(Rewriter& rw, const std::string& name) {
  auto it = rw.gi.producer.find(name);
  if (name.empty() || it == rw.gi.producer.end() || !rw.live(it->second)) return nullptr;
  const ir::Node& n = rw.node(it->second);
  return is_onnx(&n, "DequantizeLinear") ? &n : nullptr;
}

// `name` is DequantizeLinear(q, scale, zp) of an 8-bit activation quantized per tensor.
bool dq_activation(Rewriter& rw, const std::string& name, Quant* out) {
  const ir::Node* d = dequantize_of(rw, name);
  if (!d || d->inputs.empty() || d->inputs[0].empty()) return false;
  const ir::Node& dq = *d;
  out->q = dq.inputs[0];
  const DataType vt = value_dtype(rw, out->q);
  if (!per_tensor_params(rw, dq, vt, out)) return false;
  return vt == out->type || (vt == DataType::kUndefined && !out->zp.empty());
}

// A constant 8-bit weight behind its DequantizeLinear: per tensor, or per slice along `axis` (its
// scale and zero point then 1-D with one value per slice).
struct Weight {
  std::string q, scale, zp;  // zp empty: none given (zeros)
  const Tensor* w = nullptr;
  const Tensor* s = nullptr;
  bool per_axis = false;
};

bool dq_weight(Rewriter& rw, const std::string& name, int64_t axis, Weight* out) {
  const ir::Node* d = dequantize_of(rw, name);
  if (!d || d->inputs.size() < 2 || attr_i(*d, "block_size", 0) != 0) return false;
  const ir::Node& dq = *d;
  const Tensor* w = rw.constant(dq.inputs[0]);
  const Tensor* s = rw.constant(dq.inputs[1]);
  if (!w || !is_8bit(w->dtype()) || !s || s->dtype() != DataType::kFloat) return false;
  const int64_t r = w->rank();
  if (s->numel() != 1) {
    int64_t a = attr_i(dq, "axis", 1);
    if (a < 0) a += r;
    if (a != axis || s->rank() != 1 || s->numel() != w->dim(axis)) return false;
    out->per_axis = true;
  }
  for (int64_t i = 0; i < s->numel(); ++i)
    if (!(s->data<float>()[i] > 0) || !std::isfinite(s->data<float>()[i])) return false;
  if (dq.inputs.size() > 2 && !dq.inputs[2].empty()) {
    const Tensor* z = rw.constant(dq.inputs[2]);
    if (!z || z->dtype() != w->dtype() || z->numel() != s->numel() || z->rank() != s->rank()) return false;
    out->zp = dq.inputs[2];
  }
  out->q = dq.inputs[0];
  out->scale = dq.inputs[1];
  out->w = w;
  out->s = s;
  return true;
}

// `name` is DequantizeLinear(b: int32 constant [n], scale, zero point 0) with scale x_scale * w_scale (one
// value, or one per output channel when the weight has them): the int32 bias the 8-bit ops add to their
// sums before rounding. The scale is compared with the float32 product the quantizer writes (a relative
// difference up to 2^-20, below float32 rounding of the dequantized bias, is accepted).
bool dq_bias(Rewriter& rw, const std::string& name, float xs, const Weight& w, int64_t n, std::string* out) {
  const ir::Node* d = dequantize_of(rw, name);
  if (!d || d->inputs.size() < 2 || attr_i(*d, "block_size", 0) != 0) return false;
  const ir::Node& dq = *d;
  const Tensor* b = rw.constant(dq.inputs[0]);
  const Tensor* s = rw.constant(dq.inputs[1]);
  if (!b || b->dtype() != DataType::kInt32 || b->rank() != 1 || b->numel() != n) return false;
  if (!s || s->dtype() != DataType::kFloat || (s->numel() != 1 && !(s->rank() == 1 && s->numel() == n))) return false;
  if (s->numel() != 1 && attr_i(dq, "axis", 1) != 0 && attr_i(dq, "axis", 1) != -1) return false;
  if (dq.inputs.size() > 2 && !dq.inputs[2].empty()) {
    const Tensor* z = rw.constant(dq.inputs[2]);
    if (!z || z->dtype() != DataType::kInt32) return false;
    for (int64_t i = 0; i < z->numel(); ++i)
      if (z->data<int32_t>()[i] != 0) return false;
  }
  for (int64_t i = 0; i < n; ++i) {
    const float ws = w.s->data<float>()[w.per_axis ? i : 0];
    const float want = xs * ws;
    const float got = s->data<float>()[s->numel() == 1 ? 0 : i];
    if (std::fabs(static_cast<double>(got) - want) > std::ldexp(std::fabs(static_cast<double>(want)), -20)) return false;
  }
  *out = dq.inputs[0];
  return true;
}

enum class Kind { kConv, kMatMul, kGemm, kBinary, kUnary, kConcat, kShared };

struct QdqGroup : Match {
  Kind kind = Kind::kUnary;
  int op = -1;           // the float op
  Quant y;               // the QuantizeLinear's parameters
  std::string out;       // its output
  std::vector<Quant> x;  // the activations read (Concat: each input)
  Weight w;
  std::string bias;      // int32 constant ("" none)
  bool b_const = false;  // MatMul: b is a weight (w), else x[1]
};

const char* const kShared[] = {"MaxPool", "Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze"};

bool shared_op(const ir::Node& n) {
  for (const char* op : kShared)
    if (is_onnx(&n, op)) return true;
  return false;
}

bool same_params(const Quant& a, const Quant& b) { return a.type == b.type && a.s == b.s && a.z == b.z; }

// The float op's rank-2 weight / activation checks and the group it makes.
bool match_op(Rewriter& rw, const ir::Node& op, QdqGroup& m) {
  const auto in = [&](size_t i) { return i < op.inputs.size() ? op.inputs[i] : std::string(); };
  if (!single_output(op)) return false;
  if (is_onnx(&op, "Conv")) {
    Quant x;
    if (op.inputs.size() < 2 || op.inputs.size() > 3 || !dq_activation(rw, in(0), &x)) return false;
    if (!dq_weight(rw, in(1), 0, &m.w) || m.w.w->rank() < 3) return false;
    if (!in(2).empty() && !dq_bias(rw, in(2), x.s, m.w, m.w.w->dim(0), &m.bias)) return false;
    m.kind = Kind::kConv;
    m.x = {x};
    return true;
  }
  if (is_onnx(&op, "MatMul")) {
    Quant a, b;
    if (op.inputs.size() != 2 || !dq_activation(rw, in(0), &a)) return false;
    m.x = {a};
    if (dq_weight(rw, in(1), 1, &m.w) && m.w.w->rank() == 2) {
      m.b_const = true;
    } else if (dq_activation(rw, in(1), &b)) {
      m.x.push_back(b);
    } else {
      return false;
    }
    m.kind = Kind::kMatMul;
    return true;
  }
  if (is_onnx(&op, "Gemm")) {
    Quant a;
    const bool trans_b = attr_i(op, "transB", 0) != 0;
    if (op.inputs.size() < 2 || !dq_activation(rw, in(0), &a)) return false;
    if (!dq_weight(rw, in(1), trans_b ? 0 : 1, &m.w) || m.w.w->rank() != 2) return false;
    if (!in(2).empty()) {
      if (attr_f(op, "beta", 1.f) != 1.f) return false;
      if (!dq_bias(rw, in(2), a.s, m.w, m.w.w->dim(trans_b ? 0 : 1), &m.bias)) return false;
    }
    // QGemm's bias is int32 in the product's units, so a scaled product (alpha) must leave it out.
    if (!m.bias.empty() && attr_f(op, "alpha", 1.f) != 1.f) return false;
    m.kind = Kind::kGemm;
    m.x = {a};
    return true;
  }
  if (is_onnx(&op, "Add") || is_onnx(&op, "Mul")) {
    Quant a, b;
    if (op.inputs.size() != 2 || !dq_activation(rw, in(0), &a) || !dq_activation(rw, in(1), &b)) return false;
    m.kind = Kind::kBinary;
    m.x = {a, b};
    return true;
  }
  if (is_onnx(&op, "GlobalAveragePool") || is_onnx(&op, "Sigmoid") || is_onnx(&op, "LeakyRelu") ||
      is_onnx(&op, "Softmax") || is_onnx(&op, "AveragePool")) {
    Quant a;
    if (op.inputs.size() != 1 || !dq_activation(rw, in(0), &a)) return false;
    if (is_onnx(&op, "AveragePool"))
      for (int64_t d : attr_ints(op, "dilations"))
        if (d != 1) return false;  // QLinearAveragePool has no dilations
    m.kind = Kind::kUnary;
    m.x = {a};
    return true;
  }
  if (is_onnx(&op, "Concat")) {
    if (op.inputs.empty()) return false;
    for (const std::string& i : op.inputs) {
      Quant a;
      if (!dq_activation(rw, i, &a)) return false;
      m.x.push_back(a);
    }
    m.kind = Kind::kConcat;
    return true;
  }
  if (shared_op(op)) {
    Quant a;
    if (!dq_activation(rw, in(0), &a)) return false;
    if (is_onnx(&op, "MaxPool") && (op.outputs.size() > 1 || attr_i(op, "storage_order", 0) != 0)) return false;
    m.kind = Kind::kShared;
    m.x = {a};
    return true;
  }
  return false;
}

bool match(Rewriter& rw, int anchor, QdqGroup& m) {
  const ir::Node& q = rw.node(anchor);
  if (!single_output(q) || q.inputs.empty() || q.inputs[0].empty()) return false;
  // Q's type: its zero point's, else output_dtype (opset 21), else uint8.
  const int64_t out_dt = attr_i(q, "output_dtype", 0);
  const DataType dflt = out_dt != 0 ? static_cast<DataType>(out_dt) : DataType::kUInt8;
  if (!per_tensor_params(rw, q, dflt, &m.y)) return false;
  if (!m.y.zp.empty() && out_dt != 0 && static_cast<DataType>(out_dt) != m.y.type) return false;
  int pi = -1;
  ir::Node* p = rw.sole_producer(q.inputs[0], &pi);
  if (!p) return false;
  m.take(pi);
  // A Relu the quantization makes redundant: its zero point the type's lowest code.
  if (is_onnx(p, "Relu") && p->inputs.size() == 1) {
    const int64_t lowest = m.y.type == DataType::kUInt8 ? 0 : -128;
    if (m.y.z != lowest) return false;
    int oi = -1;
    ir::Node* op = rw.sole_producer(p->inputs[0], &oi);
    if (!op || !(is_onnx(op, "Conv") || is_onnx(op, "MatMul") || is_onnx(op, "Gemm") || is_onnx(op, "Add"))) return false;
    m.take(oi);
    p = op;
    pi = oi;
  }
  m.op = pi;
  if (!match_op(rw, *p, m)) return false;
  switch (m.kind) {
    case Kind::kBinary:
    case Kind::kUnary:
    case Kind::kConcat:
      // The com.microsoft ops take one 8-bit type for every operand.
      for (const Quant& x : m.x)
        if (x.type != m.y.type) return false;
      break;
    case Kind::kShared:
      if (!same_params(m.x[0], m.y) || m.nodes.size() != 1) return false;  // no Relu hop
      break;
    default:
      break;
  }
  m.take(anchor);
  m.out = q.outputs[0];
  return true;
}

// A zero point input for `quant` (its own, or a new zero of its type).
std::string zero_point(Rewriter& rw, const Quant& quant) {
  if (!quant.zp.empty()) return quant.zp;
  Tensor z(quant.type, Dims{});
  std::memset(z.raw_data(), 0, z.nbytes());
  return rw.add_initializer("qdq_zero_point", std::move(z));
}

std::string weight_zero_point(Rewriter& rw, const Weight& w) {
  if (!w.zp.empty()) return w.zp;
  Tensor z(w.w->dtype(), w.s->shape());
  std::memset(z.raw_data(), 0, z.nbytes());
  return rw.add_initializer("qdq_weight_zero_point", std::move(z));
}

bool build(Rewriter& rw, const QdqGroup& m, Rewrite& r) {
  const ir::Node& op = rw.node(m.op);
  const int last = m.nodes.back();
  const std::string name = rw.fused_name(op, "qdq", "_quant");
  const Quant& x = m.x[0];
  const std::string ys = m.y.scale, yz = zero_point(rw, m.y);
  std::vector<std::string> inputs;
  switch (m.kind) {
    case Kind::kConv:
      inputs = {x.q, x.scale, zero_point(rw, x), m.w.q, m.w.scale, weight_zero_point(rw, m.w), ys, yz};
      if (!m.bias.empty()) inputs.push_back(m.bias);
      r.replace(last, make_node(name, "", "QLinearConv", std::move(inputs), {m.out}, op.attributes));
      return true;
    case Kind::kMatMul:
      inputs = {x.q, x.scale, zero_point(rw, x)};
      if (m.b_const) {
        inputs.insert(inputs.end(), {m.w.q, m.w.scale, weight_zero_point(rw, m.w)});
      } else {
        inputs.insert(inputs.end(), {m.x[1].q, m.x[1].scale, zero_point(rw, m.x[1])});
      }
      inputs.insert(inputs.end(), {ys, yz});
      r.replace(last, make_node(name, "", "QLinearMatMul", std::move(inputs), {m.out}));
      return true;
    case Kind::kGemm: {
      inputs = {x.q, x.scale, zero_point(rw, x), m.w.q, m.w.scale, weight_zero_point(rw, m.w), m.bias, ys, yz};
      std::vector<ir::Attribute> attrs;
      for (const ir::Attribute& a : op.attributes)
        if (a.name == "alpha" || a.name == "transA" || a.name == "transB") attrs.push_back(a);
      r.replace(last, make_node(name, kMs, "QGemm", std::move(inputs), {m.out}, std::move(attrs)));
      return true;
    }
    case Kind::kBinary:
      inputs = {x.q, x.scale, zero_point(rw, x), m.x[1].q, m.x[1].scale, zero_point(rw, m.x[1]), ys, yz};
      r.replace(last, make_node(name, kMs, is_onnx(&op, "Add") ? "QLinearAdd" : "QLinearMul", std::move(inputs), {m.out}));
      return true;
    case Kind::kUnary: {
      inputs = {x.q, x.scale, zero_point(rw, x), ys, yz};
      std::vector<ir::Attribute> attrs = op.attributes;
      const char* qop = "QLinearSigmoid";
      if (is_onnx(&op, "GlobalAveragePool")) qop = "QLinearGlobalAveragePool";
      if (is_onnx(&op, "AveragePool")) qop = "QLinearAveragePool";
      if (is_onnx(&op, "LeakyRelu")) qop = "QLinearLeakyRelu";
      if (is_onnx(&op, "Softmax")) {
        qop = "QLinearSoftmax";
        attrs.push_back(make_attr_i("opset", rw.opset()));  // the axis semantics of this model's Softmax
      }
      r.replace(last, make_node(name, kMs, qop, std::move(inputs), {m.out}, std::move(attrs)));
      return true;
    }
    case Kind::kConcat:
      inputs = {ys, yz};
      for (const Quant& xi : m.x) inputs.insert(inputs.end(), {xi.q, xi.scale, zero_point(rw, xi)});
      r.replace(last, make_node(name, kMs, "QLinearConcat", std::move(inputs), {m.out}, op.attributes));
      return true;
    case Kind::kShared: {
      ir::Node n = op;
      n.name = name;
      n.inputs[0] = x.q;
      n.outputs = {m.out};
      r.replace(last, std::move(n));
      return true;
    }
  }
  return false;
}

const Fusion<QdqGroup> kQdq{.stat = "fused_qdq",
                            .anchor = {{"QuantizeLinear"}},
                            .min_opset = 10,
                            .match = match,
                            .build = build,
                            .domain = kMs,
                            .domain_version = 1};

}  // namespace

int fuse_qdq(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kQdq); }

}  // namespace nxrt::optimizer
