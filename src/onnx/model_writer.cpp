#include "onnx/model_writer.h"

#include <cstdio>
#include <cstring>

#include "onnx/model_reader.h"

namespace nxrt::onnx {

namespace {

void write_string_pair(wire::Writer& w, uint32_t field, const std::string& k, const std::string& v) {
  wire::Writer e;
  e.bytes(1, k);
  e.bytes(2, v);
  w.message(field, e);
}

void write_opset(wire::Writer& w, uint32_t field, const ir::OpsetImport& o) {
  wire::Writer e;
  if (!o.domain.empty()) e.bytes(1, o.domain);
  e.int64(2, o.version);
  w.message(field, e);
}

void write_value_info(wire::Writer& w, uint32_t field, const ir::ValueInfo& v) {
  wire::Writer e;
  e.bytes(1, v.name);
  if (v.type.kind != ir::TypeInfo::Kind::kUnknown) {
    wire::Writer t;
    write_type_proto(t, v.type);
    e.message(2, t);
  }
  if (!v.doc.empty()) e.bytes(3, v.doc);
  w.message(field, e);
}

void write_tensor_shape_type(wire::Writer& w, const ir::TypeInfo& t) {
  if (t.elem_type != DataType::kUndefined) w.int64(1, static_cast<int64_t>(t.elem_type));
  if (t.has_shape) {
    wire::Writer shape;
    for (const auto& d : t.dims) {
      wire::Writer dim;
      if (d.is_fixed()) {
        dim.int64(1, d.value);
      } else if (!d.symbol.empty()) {
        dim.bytes(2, d.symbol);
      }
      shape.message(1, dim);
    }
    w.message(2, shape);
  }
}

// A SparseTensorProto holding every element of a dense tensor (linear indices).
void write_sparse_tensor_proto(wire::Writer& w, const Tensor& dense) {
  Tensor flat = dense.contiguous().reshaped({dense.numel()});
  std::vector<int64_t> idx(static_cast<size_t>(dense.numel()));
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
  wire::Writer values, indices;
  write_tensor_proto(values, flat, "");
  write_tensor_proto(indices, Tensor::from_vector<int64_t>(DataType::kInt64, {dense.numel()}, idx), "");
  w.message(1, values);
  w.message(2, indices);
  w.packed_int64(3, dense.shape());
}

void write_function(wire::Writer& w, const ir::Function& f) {
  w.bytes(1, f.name);
  for (const auto& s : f.inputs) w.bytes(4, s);
  for (const auto& s : f.outputs) w.bytes(5, s);
  for (const auto& s : f.attribute_names) w.bytes(6, s);
  for (const auto& n : f.nodes) {
    wire::Writer e;
    write_node_proto(e, n);
    w.message(7, e);
  }
  for (const auto& o : f.opset_imports) write_opset(w, 9, o);
  if (!f.domain.empty()) w.bytes(10, f.domain);
  for (const auto& a : f.attribute_defaults) {
    wire::Writer e;
    write_attribute_proto(e, a);
    w.message(11, e);
  }
  if (!f.overload.empty()) w.bytes(13, f.overload);
}

// SequenceProto/OptionalProto elem_type values.
int32_t value_kind_code(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kTensor: return 1;
    case Value::Kind::kSequence: return 3;
    case Value::Kind::kMap: return 4;
    case Value::Kind::kOptional: return 5;
    case Value::Kind::kNone: return 0;
  }
  return 0;
}

void write_value(wire::Writer& w, const Value& v, const std::string& name);

void write_value_field(wire::Writer& w, uint32_t tensor_field, const Value& v) {
  wire::Writer e;
  write_value(e, v, "");
  switch (v.kind()) {
    case Value::Kind::kTensor: w.message(tensor_field, e); break;
    case Value::Kind::kSequence: w.message(tensor_field + 2, e); break;
    case Value::Kind::kMap: w.message(tensor_field + 3, e); break;
    case Value::Kind::kOptional: w.message(tensor_field + 4, e); break;
    case Value::Kind::kNone: break;
  }
}

void write_value(wire::Writer& w, const Value& v, const std::string& name) {
  switch (v.kind()) {
    case Value::Kind::kNone:
    case Value::Kind::kTensor: write_tensor_proto(w, v.tensor(), name); return;
    case Value::Kind::kSequence: {
      if (!name.empty()) w.bytes(1, name);
      int32_t code = v.items().empty() ? 1 : value_kind_code(v.items().front());
      w.int64(2, code);
      for (const Value& item : v.items()) write_value_field(w, 3, item);
      return;
    }
    case Value::Kind::kOptional: {
      if (!name.empty()) w.bytes(1, name);
      w.int64(2, v.has_element() ? value_kind_code(v.element()) : 0);
      if (v.has_element()) write_value_field(w, 3, v.element());
      return;
    }
    case Value::Kind::kMap: {
      const MapValue& m = v.map_value();
      if (!name.empty()) w.bytes(1, name);
      w.int64(2, static_cast<int64_t>(m.key_type));
      if (m.key_type == DataType::kString) {
        for (const auto& k : m.string_keys) w.bytes(4, k);
      } else {
        w.packed_int64(3, m.int_keys);
      }
      wire::Writer seq;
      seq.int64(2, 1);
      Tensor vals = m.values.contiguous();
      const int64_t n = vals.numel();
      for (int64_t i = 0; i < n; ++i) {
        Tensor one(vals.dtype(), {});
        if (vals.dtype() == DataType::kString) {
          one.string_data()[0] = vals.string_data()[i];
        } else {
          const size_t eb = static_cast<size_t>(dtype_bits(vals.dtype()) / 8);
          std::memcpy(one.raw_data(), static_cast<const uint8_t*>(vals.raw_data()) + i * eb, eb);
        }
        wire::Writer t;
        write_tensor_proto(t, one, "");
        seq.message(3, t);
      }
      w.message(5, seq);
      return;
    }
  }
}

}  // namespace

void write_tensor_proto(wire::Writer& w, const Tensor& t_in, const std::string& name) {
  if (!t_in.defined() || !t_in.storage()) {  // an undefined tensor: data_type UNDEFINED
    w.int64(2, 0);
    if (!name.empty()) w.bytes(8, name);
    return;
  }
  Tensor t = t_in.contiguous();
  w.packed_int64(1, t.shape());
  w.int64(2, static_cast<int64_t>(t.dtype()));
  if (!name.empty()) w.bytes(8, name);
  if (t.dtype() == DataType::kString) {
    const std::string* s = t.string_data();
    for (int64_t i = 0; i < t.numel(); ++i) w.bytes(6, s[i]);
  } else {
    w.bytes(9, t.raw_data(), t.nbytes());
  }
}

void write_type_proto(wire::Writer& w, const ir::TypeInfo& t) {
  using K = ir::TypeInfo::Kind;
  switch (t.kind) {
    case K::kUnknown: return;
    case K::kTensor:
    case K::kSparseTensor: {
      wire::Writer e;
      write_tensor_shape_type(e, t);
      w.message(t.kind == K::kTensor ? 1 : 8, e);
      return;
    }
    case K::kSequence:
    case K::kOptional: {
      wire::Writer e;
      if (t.inner) {
        wire::Writer inner;
        write_type_proto(inner, *t.inner);
        e.message(1, inner);
      }
      w.message(t.kind == K::kSequence ? 4 : 9, e);
      return;
    }
    case K::kMap: {
      wire::Writer e;
      e.int64(1, static_cast<int64_t>(t.elem_type));
      if (t.inner) {
        wire::Writer inner;
        write_type_proto(inner, *t.inner);
        e.message(2, inner);
      }
      w.message(5, e);
      return;
    }
  }
}

void write_attribute_proto(wire::Writer& w, const ir::Attribute& a) {
  using T = ir::Attribute::Type;
  w.bytes(1, a.name);
  if (!a.ref_attr_name.empty()) w.bytes(21, a.ref_attr_name);
  w.int64(20, static_cast<int64_t>(a.type));
  if (!a.ref_attr_name.empty()) return;
  switch (a.type) {
    case T::kUndefined: break;
    case T::kFloat: w.float32(2, a.f); break;
    case T::kInt: w.int64(3, a.i); break;
    case T::kString: w.bytes(4, a.s); break;
    case T::kTensor: {
      wire::Writer e;
      write_tensor_proto(e, a.t, "");
      w.message(5, e);
      break;
    }
    case T::kGraph: {
      wire::Writer e;
      if (a.g) write_graph_proto(e, *a.g);
      w.message(6, e);
      break;
    }
    case T::kSparseTensor: {
      wire::Writer e;
      write_sparse_tensor_proto(e, a.t);
      w.message(22, e);
      break;
    }
    case T::kTypeProto: {
      wire::Writer e;
      write_type_proto(e, a.tp);
      w.message(14, e);
      break;
    }
    case T::kFloats: w.packed_float(7, a.floats); break;
    case T::kInts: w.packed_int64(8, a.ints); break;
    case T::kStrings:
      for (const auto& s : a.strings) w.bytes(9, s);
      break;
    case T::kTensors:
      for (const auto& t : a.tensors) {
        wire::Writer e;
        write_tensor_proto(e, t, "");
        w.message(10, e);
      }
      break;
    case T::kGraphs:
      for (const auto& g : a.graphs) {
        wire::Writer e;
        if (g) write_graph_proto(e, *g);
        w.message(11, e);
      }
      break;
    case T::kSparseTensors:
      for (const auto& t : a.tensors) {
        wire::Writer e;
        write_sparse_tensor_proto(e, t);
        w.message(23, e);
      }
      break;
    case T::kTypeProtos:
      for (const auto& tp : a.type_protos) {
        wire::Writer e;
        write_type_proto(e, tp);
        w.message(15, e);
      }
      break;
  }
}

void write_node_proto(wire::Writer& w, const ir::Node& n) {
  for (const auto& s : n.inputs) w.bytes(1, s);
  for (const auto& s : n.outputs) w.bytes(2, s);
  if (!n.name.empty()) w.bytes(3, n.name);
  w.bytes(4, n.op_type);
  for (const auto& a : n.attributes) {
    wire::Writer e;
    write_attribute_proto(e, a);
    w.message(5, e);
  }
  if (!n.doc.empty()) w.bytes(6, n.doc);
  if (!n.domain.empty()) w.bytes(7, n.domain);
  if (!n.overload.empty()) w.bytes(8, n.overload);
}

void write_graph_proto(wire::Writer& w, const ir::Graph& g) {
  for (const auto& n : g.nodes) {
    wire::Writer e;
    write_node_proto(e, n);
    w.message(1, e);
  }
  if (!g.name.empty()) w.bytes(2, g.name);
  for (const auto& [name, t] : g.initializers) {
    wire::Writer e;
    write_tensor_proto(e, t, name);
    w.message(5, e);
  }
  if (!g.doc.empty()) w.bytes(10, g.doc);
  for (const auto& v : g.inputs) write_value_info(w, 11, v);
  for (const auto& v : g.outputs) write_value_info(w, 12, v);
  for (const auto& v : g.value_info) write_value_info(w, 13, v);
}

std::string serialize_model(const ir::Model& m) {
  wire::Writer w;
  w.int64(1, m.ir_version);
  if (!m.producer_name.empty()) w.bytes(2, m.producer_name);
  if (!m.producer_version.empty()) w.bytes(3, m.producer_version);
  if (!m.domain.empty()) w.bytes(4, m.domain);
  if (m.model_version) w.int64(5, m.model_version);
  if (!m.doc.empty()) w.bytes(6, m.doc);
  {
    wire::Writer g;
    write_graph_proto(g, m.graph);
    w.message(7, g);
  }
  for (const auto& o : m.opset_imports) write_opset(w, 8, o);
  for (const auto& [k, v] : m.metadata_props) write_string_pair(w, 14, k, v);
  for (const auto& f : m.functions) {
    wire::Writer e;
    write_function(e, f);
    w.message(25, e);
  }
  return w.take();
}

std::string serialize_tensor_proto(const Tensor& t, const std::string& name) {
  wire::Writer w;
  write_tensor_proto(w, t, name);
  return w.take();
}

Status write_file(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return io_error("cannot create '" + path + "'");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  const bool closed = std::fclose(f) == 0;
  if (!ok || !closed) return io_error("cannot write '" + path + "'");
  return Status::Ok();
}

Status write_model_file(const std::string& path, const ir::Model& model) {
  return write_file(path, serialize_model(model));
}

std::string serialize_value_pb(const Value& value, const std::string& name) {
  wire::Writer w;
  write_value(w, value, name);
  return w.take();
}

}  // namespace nxrt::onnx
