// Reading ONNX files: a hand-written protobuf wire-format reader over an mmapped file (no libprotobuf).
//
// Tensors keep pointing into the mapped bytes (raw_data); typed repeated fields are decoded into new
// storage. Errors name the field path and byte offset ("ModelProto.graph.node[3].attribute[0]: ...
// at byte 1234").
#pragma once
#include <memory>
#include <string>

#include "ir/graph.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"

namespace nxrt::onnx {

struct LoadOptions {
  // Expand model-local functions (FunctionProto) into their call sites.
  bool expand_functions = true;
  // Sparse tensors (initializers, attributes) are densified at load; a dense size above this is an
  // error rather than an allocation the file cannot justify.
  size_t max_densify_bytes = size_t{1} << 32;
};

// mmaps `path`; external data is resolved relative to the model's folder.
Result<std::unique_ptr<ir::Model>> load_model_file(const std::string& path, const LoadOptions& opts = {});
// Parses bytes the caller keeps alive through `keepalive` (may be null when the bytes outlive the
// model). `base_dir` resolves external data ("" = external data is an error).
Result<std::unique_ptr<ir::Model>> load_model_bytes(const void* data, size_t size, std::shared_ptr<void> keepalive,
                                                    const std::string& base_dir = "", const LoadOptions& opts = {});

// Test-data files (.pb): a TensorProto, SequenceProto, OptionalProto or MapProto, chosen by `expected`
// (the graph input/output type); with expected == nullptr or kind unknown a TensorProto is assumed.
// `name` receives the proto's name field when not null.
Result<Value> read_value_pb(const std::string& path, const ir::TypeInfo* expected, std::string* name = nullptr);
Result<Value> parse_value_pb(const void* data, size_t size, const ir::TypeInfo* expected, std::string* name = nullptr);
// Writes a value in the matching proto (tensors use raw_data, strings use string_data).
Status write_value_pb(const std::string& path, const Value& value, const std::string& name);
std::string serialize_value_pb(const Value& value, const std::string& name);

}  // namespace nxrt::onnx
