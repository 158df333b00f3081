// Shape rules and op schemas: elementwise math and logic, Where, Cast, quantization.
#include <algorithm>
#include <cmath>
#include <functional>

#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

// Elementwise on small int value vectors (with scalar broadcast).
std::optional<std::vector<SymDim>> values_binary(NodeContext& c, const ValueFacts& a, const ValueFacts& b,
                                                 const std::function<std::optional<SymDim>(SymDim, SymDim)>& f) {
  if (!a.has_values || !b.has_values) return std::nullopt;
  size_t n = std::max(a.values.size(), b.values.size());
  if ((a.values.size() != n && a.values.size() != 1) || (b.values.size() != n && b.values.size() != 1)) {
    return std::nullopt;
  }
  std::vector<SymDim> r;
  for (size_t i = 0; i < n; ++i) {
    auto v = f(a.values[a.values.size() == 1 ? 0 : i], b.values[b.values.size() == 1 ? 0 : i]);
    if (!v) return std::nullopt;
    r.push_back(*v);
  }
  return r;
}

// Neg/Abs keep the values of tracked small int tensors (constants only).
Status op_int_unary(NodeContext& c) {
  ValueFacts v = c.input(0);
  if (v.kind == Kind::kUnknown) v.kind = Kind::kTensor;
  bool ok = v.has_values;
  for (auto& x : v.values) {
    if (!x.is_const()) {
      ok = false;
      break;
    }
    x.value = c.n->op_type == "Neg" ? -x.value : std::abs(x.value);
  }
  if (!ok) v = strip_values(std::move(v));
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_qlinear_binary(NodeContext& c) {
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {c.has(0) ? c.in[0] : nullptr, c.has(3) ? c.in[3] : nullptr}, &known, &dims));
  c.set(0, known ? tensor(c.input(0).dtype, dims) : tensor_unknown_rank(c.input(0).dtype));
  return Status::Ok();
}

Status op_binary(NodeContext& c) {
  bool known;
  std::vector<SymDim> dims;
  std::vector<const ValueFacts*> ins;
  for (size_t i = 0; i < c.nin(); ++i) ins.push_back(c.has(i) ? c.in[i] : nullptr);
  const std::string& op = c.n->op_type;
  // Before opset 7 these ops broadcast B onto A (attrs broadcast/axis), or B is a per-channel slope
  // (PRelu): the output has A's shape.
  bool legacy = c.opset < 7 && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" ||
                                op == "And" || op == "Or" || op == "Xor" || op == "Equal" || op == "Greater" ||
                                op == "Less" || op == "PRelu");
  if (legacy) {
    known = c.input(0).has_shape;
    dims = c.input(0).dims;
  } else {
    NXRT_RETURN_IF_ERROR(broadcast(c, ins, &known, &dims));
  }
  DataType dt = c.input(0).dtype;
  static const char* kBool[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"};
  for (const char* b : kBool) {
    if (op == b) dt = DataType::kBool;
  }
  if (dt == DataType::kUndefined) {
    for (const auto* x : ins) {
      if (x && x->dtype != DataType::kUndefined && op != "Pow" && op != "BitShift") dt = x->dtype;
    }
  }
  ValueFacts v = known ? tensor(dt, dims) : tensor_unknown_rank(dt);
  if (c.nin() == 2 && known && dims.size() <= 1) {
    const ValueFacts &a = c.input(0), &b = c.input(1);
    SymbolTable& S = c.S;
    std::optional<std::vector<SymDim>> vals;
    if (op == "Add") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> { return add(S, {x, y}); });
    } else if (op == "Sub") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> { return sub(S, x, y); });
    } else if (op == "Mul") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> { return mul(S, {x, y}); });
    } else if (op == "Div" && is_int_dtype(dt)) {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> {
        if (y.is_const() && y.value == 0) return std::nullopt;
        if (x.is_const() && y.is_const()) return SymDim::c(x.value / y.value);  // C truncation, as the kernel
        return floordiv(S, x, y);
      });
    } else if (op == "Equal") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> {
        if (S.same(x, y)) return SymDim::c(1);
        if (x.is_const() && y.is_const()) return SymDim::c(0);
        // A symbol from a tracked shape is a dim (>= 0): never equal to a negative constant.
        if ((x.is_const() && x.value < 0) || (y.is_const() && y.value < 0)) return SymDim::c(0);
        return std::nullopt;
      });
    } else if (op == "Max" || op == "Min") {
      bool mx = op == "Max";
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> {
        if (x.is_const() && y.is_const()) return SymDim::c(mx ? std::max(x.value, y.value) : std::min(x.value, y.value));
        if (S.same(x, y)) return x;
        return fn(S, mx ? "max" : "min", {x, y});
      });
    }
    if (vals && is_int_dtype(dt)) {
      v.has_values = true;
      v.values = std::move(*vals);
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_bool_unary(NodeContext& c) {
  ValueFacts v = tensor_like(c.input(0));
  v.dtype = DataType::kBool;
  c.set(0, v);
  return Status::Ok();
}

Status op_where(NodeContext& c) {
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {c.has(0) ? c.in[0] : nullptr, c.has(1) ? c.in[1] : nullptr, c.has(2) ? c.in[2] : nullptr},
                                 &known, &dims));
  DataType dt = c.input(1).dtype != DataType::kUndefined ? c.input(1).dtype : c.input(2).dtype;
  ValueFacts v = known ? tensor(dt, dims) : tensor_unknown_rank(dt);
  const ValueFacts &cond = c.input(0), &x = c.input(1), &y = c.input(2);
  if (known && dims.size() <= 1 && cond.has_values && x.has_values && y.has_values) {
    size_t n = dims.empty() ? 1 : (dims[0].is_const() ? static_cast<size_t>(dims[0].value) : 0);
    bool ok = n > 0;
    for (const auto* s : {&cond, &x, &y}) ok = ok && (s->values.size() == n || s->values.size() == 1);
    if (ok) {
      for (size_t i = 0; i < n && ok; ++i) {
        SymDim cv = cond.values[cond.values.size() == 1 ? 0 : i];
        if (!cv.is_const()) {
          ok = false;
          break;
        }
        const ValueFacts& src = cv.value ? x : y;
        v.values.push_back(src.values[src.values.size() == 1 ? 0 : i]);
      }
      v.has_values = ok;
      if (!ok) v.values.clear();
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_cast(NodeContext& c) {
  ValueFacts v = c.input(0);
  v.kind = Kind::kTensor;
  v.dtype = c.n->op_type == "CastLike" ? c.input(1).dtype : static_cast<DataType>(c.ai("to", 0));
  if (!is_int_dtype(v.dtype) || v.dtype == DataType::kBool) v = strip_values(std::move(v));
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_quantize(NodeContext& c) {
  ValueFacts v = tensor_like(c.input(0));
  if (c.n->op_type == "QuantizeLinear") {
    v.dtype = c.has(2) ? c.input(2).dtype : DataType::kUInt8;
  } else {
    v.dtype = c.input(1).dtype;
  }
  if (c.attr("output_dtype") && c.ai("output_dtype", 0) != 0) v.dtype = static_cast<DataType>(c.ai("output_dtype", 0));
  c.set(0, v);
  return Status::Ok();
}

Status op_dyn_quant(NodeContext& c) {
  ValueFacts v = c.input(0);
  v.kind = Kind::kTensor;
  v.dtype = DataType::kUInt8;
  c.set(0, v);
  c.set(1, tensor(DataType::kFloat, {}));
  c.set(2, tensor(DataType::kUInt8, {}));
  return Status::Ok();
}

}  // namespace

void add_elementwise_schemas(SchemaList& s) {
  // Unary math and activations. Their kernels read element i before they write element i, so output 0
  // may reuse input 0's buffer.
  for (const char* op : {"Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Relu"}) {
    s.add(op, &same_as_input0).inplace(0).rank(kSameAsInput0).differentiable();
  }
  for (const char* op : {"Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan",
                         "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf", "HardSigmoid", "HardSwish", "LeakyRelu",
                         "Elu", "Selu", "Celu", "Gelu", "Mish", "Softplus", "Softsign", "ThresholdedRelu", "Clip",
                         "Shrink", "BitwiseNot", "Swish"}) {
    s.add(op, &same_as_input0).inplace(0).rank(kSameAsInput0);
  }
  s.add("Abs", &op_int_unary).inplace(0).rank(kSameAsInput0);
  s.add("Neg", &op_int_unary).inplace(0).rank(kSameAsInput0).differentiable();
  s.add("Not", &op_bool_unary).inplace(0).rank(kSameAsInput0);
  s.add("IsNaN", &op_bool_unary).rank(kSameAsInput0);
  s.add("IsInf", &op_bool_unary).rank(kSameAsInput0);
  // Experimental ops of old opsets (no CPU kernel).
  for (const char* op : {"Affine", "ScaledTanh", "ImageScaler", "ParametricSoftplus"}) {
    s.add(op, &same_as_input0).rank(kSameAsInput0);
  }

  // Broadcasting binary and variadic ops; the arithmetic ones may write over input 0.
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) s.add(op, &op_binary).inplace(0).rank(kBroadcast).differentiable();
  for (const char* op : {"Pow", "Max", "Min", "Sum", "Mean"}) s.add(op, &op_binary).inplace(0).rank(kBroadcast);
  s.add("PRelu", &op_binary).inplace(0).rank(kSameAsInput0);  // the slope broadcasts onto X
  for (const char* op : {"Mod", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Equal", "Less", "Greater",
                         "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}) {
    s.add(op, &op_binary).rank(kBroadcast);
  }
  s.add("Where", &op_where).rank(kBroadcast);

  s.add("Cast", &op_cast).rank(kSameAsInput0);
  s.add("CastLike", &op_cast).rank(kSameAsInput0);
  s.add("QuantizeLinear", &op_quantize).rank(kSameAsInput0);
  s.add("DequantizeLinear", &op_quantize).rank(kSameAsInput0);
  s.add("DynamicQuantizeLinear", &op_dyn_quant).rank(kSameAsInput0);

  for (const char* op : {"Gelu", "FastGelu", "BiasGelu", "QuickGelu", "QLinearSigmoid", "QLinearLeakyRelu",
                         "QLinearSoftmax"}) {
    s.add("com.microsoft", op, &same_as_input0).rank(kSameAsInput0);
  }
  // com.microsoft QLinearAdd / QLinearMul (A, A_scale, A_zp, B, ...): A and B broadcast; A's type. In
  // place on A: the rows read each element of A before they write it (a residual add then writes into
  // lines it has just read instead of a buffer that memory must supply first).
  s.add("com.microsoft", "QLinearAdd", &op_qlinear_binary).inplace(0);
  s.add("com.microsoft", "QLinearMul", &op_qlinear_binary).inplace(0);
  // The optimizer's fused activations (src/ops/fused/ copies the ai.onnx kernels). Not marked in place:
  // the hand list this replaced reached only the ai.onnx defs, and whether these gain from it is unmeasured.
  for (const char* op : {"Swish", "HardSwish", "Gelu"}) s.add(ir::kNxrtDomain, op, &same_as_input0).rank(kSameAsInput0);
  s.add(ir::kNxrtDomain, "SiluMul", &op_binary).rank(kBroadcast);  // Swish(x) * u, broadcasting as Mul
}

}  // namespace nxrt::shape
