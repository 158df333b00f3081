// The .pb value readers of Parser: TensorProto, SequenceProto, OptionalProto and MapProto files (the
// ONNX backend-test layout's inputs and outputs), typed by what the graph expects. The model
// readers are in parser.cpp.
#include "onnx/parser.h"

#include <cstring>

namespace nxrt::onnx {

using wire::Field;

Status Parser::parse_value(const ir::TypeInfo* expected, Value* out, std::string* name) {
  using K = ir::TypeInfo::Kind;
  const K kind = expected ? expected->kind : K::kUnknown;
  Field whole;
  whole.type = wire::kLen;
  whole.data = data_;
  whole.size = size_;
  whole.offset = 0;
  switch (kind) {
    case K::kSequence: {
      wire::Scope root(ctx_, "SequenceProto");
      return parse_sequence(whole, expected, out, name);
    }
    case K::kOptional: {
      wire::Scope root(ctx_, "OptionalProto");
      return parse_optional(whole, expected, out, name);
    }
    case K::kMap: {
      wire::Scope root(ctx_, "MapProto");
      return parse_map(whole, expected, out, name);
    }
    case K::kSparseTensor: {
      wire::Scope root(ctx_, "SparseTensorProto");
      Tensor t;
      NXRT_RETURN_IF_ERROR(parse_sparse_tensor(whole, &t, name));
      *out = Value(std::move(t));
      return Status::Ok();
    }
    default: {
      wire::Scope root(ctx_, "TensorProto");
      Tensor t;
      NXRT_RETURN_IF_ERROR(parse_tensor(whole, &t, name));
      *out = Value(std::move(t));
      return Status::Ok();
    }
  }
}

namespace {
// The element fields SequenceProto (repeated) and OptionalProto (singular) share, numbers 3 to 7.
constexpr const char* kSequenceFields[5] = {"tensor_values", "sparse_tensor_values", "sequence_values",
                                            "map_values", "optional_values"};
constexpr const char* kOptionalFields[5] = {"tensor_value", "sparse_tensor_value", "sequence_value", "map_value",
                                            "optional_value"};
}  // namespace

// One element of a sequence or optional: field f (number 3 to 7) named names[f.number - 3] in errors,
// at `index` (-1 for a singular field).
Status Parser::parse_element(const Field& f, const ir::TypeInfo* inner, const char* const* names, int64_t index,
                             Value* out) {
  const char* field = names[f.number - 3];
  switch (f.number) {
    case 3:
    case 4: {
      Tensor t;
      const bool sparse = f.number == 4;
      NXRT_RETURN_IF_ERROR(sub(f, field, index, [&] {
        return sparse ? parse_sparse_tensor(f, &t, nullptr) : parse_tensor(f, &t, nullptr);
      }));
      *out = Value(std::move(t));
      return Status::Ok();
    }
    case 5: return sub(f, field, index, [&] { return parse_sequence(f, inner, out, nullptr); });
    case 6: return sub(f, field, index, [&] { return parse_map(f, inner, out, nullptr); });
    default: return sub(f, field, index, [&] { return parse_optional(f, inner, out, nullptr); });
  }
}

Status Parser::parse_sequence(const Field& msg, const ir::TypeInfo* expected, Value* out, std::string* name) {
  const ir::TypeInfo* inner = expected ? expected->inner.get() : nullptr;
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  std::vector<Value> items;
  int64_t idx[8] = {0};
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: {
        std::string nm;
        NXRT_RETURN_IF_ERROR(read_str(f, "name", &nm));
        if (name) *name = nm;
        break;
      }
      case 2: {
        int32_t et = 0;
        NXRT_RETURN_IF_ERROR(wire::read_int32(ctx_, f, "elem_type", &et));
        break;
      }
      case 3:
      case 4:
      case 5:
      case 6:
      case 7:
        items.emplace_back();
        NXRT_RETURN_IF_ERROR(parse_element(f, inner, kSequenceFields, idx[f.number]++, &items.back()));
        break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  DataType et = DataType::kUndefined;
  if (inner && (inner->kind == ir::TypeInfo::Kind::kTensor || inner->kind == ir::TypeInfo::Kind::kSparseTensor)) {
    et = inner->elem_type;
  }
  if (et == DataType::kUndefined && !items.empty() && items.front().is_tensor()) et = items.front().tensor().dtype();
  *out = Value::sequence(std::move(items), et);
  return Status::Ok();
}

Status Parser::parse_optional(const Field& msg, const ir::TypeInfo* expected, Value* out, std::string* name) {
  const ir::TypeInfo* inner = expected ? expected->inner.get() : nullptr;
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  bool has = false;
  Value v;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: {
        std::string nm;
        NXRT_RETURN_IF_ERROR(read_str(f, "name", &nm));
        if (name) *name = nm;
        break;
      }
      case 2: {
        int32_t et = 0;
        NXRT_RETURN_IF_ERROR(wire::read_int32(ctx_, f, "elem_type", &et));
        break;
      }
      case 3:
      case 4:
      case 5:
      case 6:
      case 7:
        NXRT_RETURN_IF_ERROR(parse_element(f, inner, kOptionalFields, -1, &v));
        has = true;
        break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  *out = has ? Value::optional_of(std::move(v)) : Value::optional_empty();
  return Status::Ok();
}

Status Parser::parse_map(const Field& msg, const ir::TypeInfo* expected, Value* out, std::string* name) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  MapValue m;
  Value values;
  bool has_values = false;
  size_t values_offset = msg.offset;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: {
        std::string nm;
        NXRT_RETURN_IF_ERROR(read_str(f, "name", &nm));
        if (name) *name = nm;
        break;
      }
      case 2: NXRT_RETURN_IF_ERROR(parse_dtype(f, "key_type", &m.key_type, false)); break;
      case 3: NXRT_RETURN_IF_ERROR(wire::append_varints(ctx_, f, "keys", &m.int_keys)); break;
      case 4:
        m.string_keys.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "string_keys", &m.string_keys.back()));
        break;
      case 5:
        values_offset = f.offset;
        NXRT_RETURN_IF_ERROR(sub(f, "values", -1, [&] { return parse_sequence(f, nullptr, &values, nullptr); }));
        has_values = true;
        break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  if (m.key_type == DataType::kUndefined) {
    // key_type absent: the expected map type's, else the map cannot be told apart from garbage.
    if (!expected || expected->elem_type == DataType::kUndefined) return ctx_.error(msg.offset, "map has no key_type");
    m.key_type = expected->elem_type;
  }
  if (m.key_type != DataType::kString && (!dtype_is_integer(m.key_type) || dtype_bits(m.key_type) < 8)) {
    return ctx_.error(msg.offset, std::string("map key_type ") + dtype_name(m.key_type) +
                                      " is not an integer or string type");
  }
  const size_t nkeys = m.key_type == DataType::kString ? m.string_keys.size() : m.int_keys.size();
  const size_t nvals = has_values ? values.items().size() : 0;
  if (nkeys != nvals) {
    return ctx_.error(values_offset, "map has " + std::to_string(nkeys) + " keys but " + std::to_string(nvals) +
                                         " values");
  }
  // Values: one scalar (or one-element) tensor per key, gathered into a 1-D tensor.
  DataType vt = DataType::kUndefined;
  if (expected && expected->inner && expected->inner->kind == ir::TypeInfo::Kind::kTensor) {
    vt = expected->inner->elem_type;
  }
  for (const Value& v : values.items()) {
    if (!v.is_tensor() || v.tensor().numel() != 1) {
      return ctx_.error(values_offset, "map values must be one-element tensors, got " + v.describe());
    }
    if (vt == DataType::kUndefined) vt = v.tensor().dtype();
    if (v.tensor().dtype() != vt || dtype_bits(vt) < 8) {
      return ctx_.error(values_offset, std::string("map value dtype ") + dtype_name(v.tensor().dtype()) +
                                           " does not match " + dtype_name(vt));
    }
  }
  if (vt == DataType::kUndefined) vt = DataType::kFloat;
  m.value_type = vt;
  m.values = Tensor(vt, {static_cast<int64_t>(nvals)});
  for (size_t i = 0; i < nvals; ++i) {
    const Tensor& t = values.items()[i].tensor();
    if (vt == DataType::kString) {
      m.values.string_data()[i] = t.string_data()[0];
    } else {
      const size_t eb = static_cast<size_t>(dtype_bits(vt) / 8);
      std::memcpy(static_cast<uint8_t*>(m.values.raw_data()) + i * eb, t.raw_data(), eb);
    }
  }
  *out = Value::map(std::move(m));
  return Status::Ok();
}


}  // namespace nxrt::onnx
