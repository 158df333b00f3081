#include "session/type_meta.h"

namespace nxrt::session {

namespace {
ValueMeta::Kind to_kind(ir::TypeInfo::Kind k) {
  switch (k) {
    case ir::TypeInfo::Kind::kTensor: return ValueMeta::Kind::kTensor;
    case ir::TypeInfo::Kind::kSparseTensor: return ValueMeta::Kind::kSparseTensor;
    case ir::TypeInfo::Kind::kSequence: return ValueMeta::Kind::kSequence;
    case ir::TypeInfo::Kind::kOptional: return ValueMeta::Kind::kOptional;
    case ir::TypeInfo::Kind::kMap: return ValueMeta::Kind::kMap;
    case ir::TypeInfo::Kind::kUnknown: break;
  }
  return ValueMeta::Kind::kUnknown;
}
ir::TypeInfo::Kind from_kind(ValueMeta::Kind k) {
  switch (k) {
    case ValueMeta::Kind::kTensor: return ir::TypeInfo::Kind::kTensor;
    case ValueMeta::Kind::kSparseTensor: return ir::TypeInfo::Kind::kSparseTensor;
    case ValueMeta::Kind::kSequence: return ir::TypeInfo::Kind::kSequence;
    case ValueMeta::Kind::kOptional: return ir::TypeInfo::Kind::kOptional;
    case ValueMeta::Kind::kMap: return ir::TypeInfo::Kind::kMap;
    case ValueMeta::Kind::kUnknown: break;
  }
  return ir::TypeInfo::Kind::kUnknown;
}
}  // namespace

ValueMeta to_value_meta(const std::string& name, const ir::TypeInfo& t) {
  ValueMeta m;
  m.name = name;
  m.kind = to_kind(t.kind);
  m.dtype = t.elem_type;
  m.has_shape = t.has_shape;
  for (const auto& d : t.dims) {
    m.shape.push_back(d.is_fixed() ? d.value : -1);
    m.dim_names.push_back(d.symbol);
  }
  if (t.inner) m.inner = std::make_shared<ValueMeta>(to_value_meta("", *t.inner));
  return m;
}

ir::TypeInfo to_type_info(const ValueMeta& m) {
  ir::TypeInfo t;
  t.kind = from_kind(m.kind);
  t.elem_type = m.dtype;
  t.has_shape = m.has_shape;
  for (size_t i = 0; i < m.shape.size(); ++i) {
    ir::Dim d;
    d.value = m.shape[i];
    if (i < m.dim_names.size()) d.symbol = m.dim_names[i];
    t.dims.push_back(d);
  }
  if (m.inner) t.inner = std::make_shared<ir::TypeInfo>(to_type_info(*m.inner));
  return t;
}

Status check_feed(const ValueMeta& meta, const Value& v) {
  auto bad = [&](const std::string& why) {
    return invalid_argument("input '" + meta.name + "' expects " + meta.describe() + " but was fed " + v.describe() +
                            ": " + why);
  };
  switch (meta.kind) {
    case ValueMeta::Kind::kTensor: {
      if (!v.is_tensor()) return bad("not a tensor");
      const Tensor& t = v.tensor();
      if (meta.dtype != DataType::kUndefined && t.dtype() != meta.dtype) return bad("dtype differs");
      if (meta.has_shape) {
        if (static_cast<size_t>(t.rank()) != meta.shape.size()) return bad("rank differs");
        for (size_t i = 0; i < meta.shape.size(); ++i) {
          if (meta.shape[i] >= 0 && meta.shape[i] != t.shape()[i]) {
            return bad("dimension " + std::to_string(i) + " must be " + std::to_string(meta.shape[i]));
          }
        }
      }
      return Status::Ok();
    }
    case ValueMeta::Kind::kSequence:
      if (!v.is_sequence()) return bad("not a sequence");
      return Status::Ok();
    case ValueMeta::Kind::kOptional:
      if (!v.is_optional()) return bad("not an optional");
      return Status::Ok();
    case ValueMeta::Kind::kMap:
      if (!v.is_map()) return bad("not a map");
      return Status::Ok();
    default: return Status::Ok();
  }
}

}  // namespace nxrt::session
