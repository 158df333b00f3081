// NodeContext, the facts helpers and the rules the families share; see node_context.h.
#include "shape/node_context.h"

#include <algorithm>

#include "nxrt/float_types.h"

namespace nxrt::shape {

std::optional<std::vector<int64_t>> NodeContext::const_ints(size_t i) const {
  if (!has(i) || !input(i).has_values) return std::nullopt;
  std::vector<int64_t> r;
  for (const auto& v : input(i).values) {
    if (!v.is_const()) return std::nullopt;
    r.push_back(v.value);
  }
  return r;
}

std::optional<int64_t> NodeContext::const_scalar(size_t i) const {
  auto v = const_ints(i);
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

std::optional<SymDim> NodeContext::sym_scalar(size_t i) const {
  if (!has(i) || !input(i).has_values || input(i).values.size() != 1) return std::nullopt;
  return input(i).values[0];
}

Status NodeContext::error(const std::string& msg) const {
  return invalid_model("shape inference: node '" + n->name + "' (#" + std::to_string(index) + ", " +
                       (n->domain.empty() ? std::string("ai.onnx") : n->domain) + "::" + n->op_type + ", opset " +
                       std::to_string(opset) + "): " + msg);
}

Status NodeContext::unify(SymDim a, SymDim b, const std::string& what, SymDim* result) {
  if (a.is_const() && b.is_const()) {
    if (a.value != b.value) return error(what);
    *result = a;
  } else if (a.is_const()) {
    *result = a;
  } else if (b.is_const()) {
    *result = b;
  } else {
    S.unite(a.sym, b.sym);
    *result = a;
  }
  return Status::Ok();
}

ValueFacts tensor(DataType dt, std::vector<SymDim> dims) {
  ValueFacts v;
  v.kind = Kind::kTensor;
  v.dtype = dt;
  v.has_shape = true;
  v.dims = std::move(dims);
  return v;
}

ValueFacts tensor_unknown_rank(DataType dt) {
  ValueFacts v;
  v.kind = Kind::kTensor;
  v.dtype = dt;
  return v;
}

bool is_int_dtype(DataType dt) {
  return dt == DataType::kInt64 || dt == DataType::kInt32 || dt == DataType::kInt16 || dt == DataType::kInt8 ||
         dt == DataType::kUInt8 || dt == DataType::kUInt16 || dt == DataType::kUInt32 || dt == DataType::kUInt64 ||
         dt == DataType::kBool;
}

std::optional<int64_t> tensor_int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kInt64: return t.data<int64_t>()[i];
    case DataType::kInt32: return t.data<int32_t>()[i];
    case DataType::kInt16: return t.data<int16_t>()[i];
    case DataType::kInt8: return t.data<int8_t>()[i];
    case DataType::kUInt8: return t.data<uint8_t>()[i];
    case DataType::kUInt16: return t.data<uint16_t>()[i];
    case DataType::kUInt32: return t.data<uint32_t>()[i];
    case DataType::kUInt64: return static_cast<int64_t>(t.data<uint64_t>()[i]);
    case DataType::kBool: return t.data<uint8_t>()[i] ? 1 : 0;
    default: return std::nullopt;
  }
}

ValueFacts from_tensor(const Tensor& t) {
  std::vector<SymDim> dims;
  for (int64_t d : t.shape()) dims.push_back(SymDim::c(d));
  ValueFacts v = tensor(t.dtype(), std::move(dims));
  DataType dt = t.dtype();
  if ((dt == DataType::kFloat || dt == DataType::kDouble || dt == DataType::kFloat16 || dt == DataType::kBFloat16) &&
      t.rank() <= 1 && t.numel() <= static_cast<int64_t>(kMaxValues) && t.is_contiguous() && t.storage()) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = dt == DataType::kFloat    ? t.data<float>()[i]
                 : dt == DataType::kDouble ? t.data<double>()[i]
                 : dt == DataType::kFloat16 ? static_cast<double>(static_cast<float>(t.data<Float16>()[i]))
                                            : static_cast<double>(static_cast<float>(t.data<BFloat16>()[i]));
      v.float_values.push_back(x);
    }
  }
  if (is_int_dtype(t.dtype()) && t.rank() <= 1 && t.numel() <= static_cast<int64_t>(kMaxValues) &&
      t.is_contiguous() && t.storage()) {
    Tensor c = t;
    v.has_values = true;
    for (int64_t i = 0; i < t.numel(); ++i) {
      auto x = tensor_int_at(c, i);
      if (!x) {
        v.has_values = false;
        v.values.clear();
        break;
      }
      v.values.push_back(SymDim::c(*x));
    }
  }
  return v;
}

ValueFacts from_type(SymbolTable& S, const ir::TypeInfo& t) {
  ValueFacts v;
  v.kind = t.kind;
  v.dtype = t.elem_type;
  if (t.kind == Kind::kTensor || t.kind == Kind::kSparseTensor) {
    v.has_shape = t.has_shape;
    for (const auto& d : t.dims) {
      if (d.is_fixed()) {
        v.dims.push_back(SymDim::c(d.value));
      } else if (!d.symbol.empty()) {
        v.dims.push_back(SymDim::s(S.named(d.symbol)));
      } else {
        v.dims.push_back(SymDim::s(S.mint()));
      }
    }
  } else if ((t.kind == Kind::kSequence || t.kind == Kind::kOptional) && t.inner) {
    v.inner = std::make_shared<ValueFacts>(from_type(S, *t.inner));
  }
  return v;
}

bool norm_axis(int64_t& a, int64_t rank) {
  if (a < -rank || a >= rank) return false;
  if (a < 0) a += rank;
  return true;
}

Status broadcast(NodeContext& c, const std::vector<const ValueFacts*>& ins, bool* known, std::vector<SymDim>* dims) {
  size_t r = 0;
  *known = false;
  for (const auto* x : ins) {
    if (!x) continue;
    if (!x->has_shape) return Status::Ok();
    r = std::max(r, x->dims.size());
  }
  dims->assign(r, SymDim::c(1));
  for (const auto* x : ins) {
    if (!x) continue;
    size_t off = r - x->dims.size();
    for (size_t i = 0; i < x->dims.size(); ++i) {
      SymDim d = x->dims[i];
      SymDim& o = (*dims)[off + i];
      if (d.is_const() && d.value == 1) continue;
      if (o.is_const() && o.value == 1) {
        o = d;
      } else if (o.is_const() && d.is_const()) {
        if (o.value != d.value) {
          std::string shapes;
          for (const auto* y : ins) {
            if (y) shapes += (shapes.empty() ? "" : " and ") + c.shape_str(*y);
          }
          return c.error("cannot broadcast " + shapes + " (dim " + std::to_string(o.value) + " vs " +
                         std::to_string(d.value) + ")");
        }
      } else if (o.is_const()) {
        // d must be 1 or o.
      } else if (d.is_const()) {
        o = d;
      } else {
        c.S.unite(o.sym, d.sym);
      }
    }
  }
  *known = true;
  return Status::Ok();
}

ValueFacts strip_values(ValueFacts v) {
  v.has_values = false;
  v.values.clear();
  return v;
}

ValueFacts tensor_like(ValueFacts v) {
  v.kind = Kind::kTensor;
  return strip_values(std::move(v));
}

Status same_as_input0(NodeContext& c) {
  ValueFacts v = strip_values(c.input(0));
  if (v.kind == Kind::kUnknown) v.kind = Kind::kTensor;
  for (size_t i = 0; i < c.nout(); ++i) c.set(i, i == 0 ? v : ValueFacts{});
  return Status::Ok();
}

std::optional<std::vector<SymDim>> shape_from_input(NodeContext& c, size_t i) {
  const ValueFacts& s = c.input(i);
  if (s.has_values) return s.values;
  if (s.has_shape && s.dims.size() == 1 && s.dims[0].is_const()) {
    std::vector<SymDim> d;
    for (int64_t j = 0; j < s.dims[0].value; ++j) d.push_back(SymDim::s(c.S.mint()));
    return d;
  }
  return std::nullopt;
}

std::optional<std::vector<int64_t>> axes_of(NodeContext& c, size_t input_index, int64_t input_since) {
  if (c.opset >= input_since) {
    if (!c.has(input_index)) return std::vector<int64_t>{};
    return c.const_ints(input_index);
  }
  return c.aints("axes").value_or(std::vector<int64_t>{});
}

SchemaList::Entry SchemaList::add(const std::string& domain, const std::string& op_type, ShapeFn fn) {
  OpSchema s;
  s.domain = ir::canonical_domain(domain);
  s.op_type = op_type;
  s.shape_fn = fn;
  out_->push_back(std::move(s));
  return Entry(out_, out_->size() - 1);
}

}  // namespace nxrt::shape
