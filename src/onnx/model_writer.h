// Writing ONNX protos without libprotobuf: ModelProto from an ir::Model, TensorProto from a Tensor.
//
// Used by tests (building models, malformed variants) and by tools. Tensors are written with
// raw_data (strings with string_data); sparse-tensor attributes are written as SparseTensorProto with
// linear indices over every element.
#pragma once
#include <string>

#include "ir/graph.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"
#include "onnx/wire.h"

namespace nxrt::onnx {

std::string serialize_model(const ir::Model& model);
Status write_model_file(const std::string& path, const ir::Model& model);

// A TensorProto (raw_data / string_data, name set when not empty).
std::string serialize_tensor_proto(const Tensor& t, const std::string& name = "");
// Pieces, for tests that assemble protos by hand.
void write_tensor_proto(wire::Writer& w, const Tensor& t, const std::string& name);
void write_type_proto(wire::Writer& w, const ir::TypeInfo& t);
void write_graph_proto(wire::Writer& w, const ir::Graph& g);
void write_node_proto(wire::Writer& w, const ir::Node& n);
void write_attribute_proto(wire::Writer& w, const ir::Attribute& a);

Status write_file(const std::string& path, const std::string& bytes);

}  // namespace nxrt::onnx
