// Reading ONNX files: a hand-written protobuf wire-format reader over an mmapped file (no libprotobuf).
//
// Tensors keep pointing into the mapped bytes (raw_data aligned to its element size; misaligned
// raw_data is copied); typed repeated fields are decoded into new storage. Every tensor is a plain
// contiguous Tensor of its declared dtype (sub-byte types packed low bits first, strings as
// std::string). Sparse initializers/attributes are densified. Errors are Status(kInvalidModel) naming
// the field path and byte offset ("ModelProto.graph.node[3].attribute[0].t: ... at byte 1234");
// kIoError for files that cannot be opened.
//
// At load: nodes of every graph are checked for values produced twice and for cycles (subgraph
// outer-scope reads count as edges) and put in topological order; model-local functions are expanded
// (LoadOptions::expand_functions). Undefined node inputs are left for the session to report.
// Implementation: wire.h (decoder), parser.cpp, function_expand.cpp, graph_check.cpp; the writer
// (model_writer.h) serializes ir::Model / Tensor / Value back to protobuf bytes.
#pragma once
#include <memory>
#include <string>

#include "ir/graph.h"
#include "onnx/limits.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"

namespace nxrt::onnx {

struct LoadOptions {
  // Expand model-local functions (FunctionProto) into their call sites.
  bool expand_functions = true;
  // Sparse tensors (initializers, attributes) are densified at load; a dense size above this, all of
  // them together, is an error rather than an allocation the file cannot justify.
  size_t max_densify_bytes = size_t{1} << 30;
  // Bounds on nesting, counts, ranks and string sizes (onnx/limits.h).
  ReaderLimits limits;
};

// mmaps `path`; external data is resolved relative to the model's folder.
Result<std::unique_ptr<ir::Model>> load_model_file(const std::string& path, const LoadOptions& opts = {});
// Parses bytes the caller keeps alive through `keepalive` (may be null when the bytes outlive the
// model). `base_dir` resolves external data ("" = external data is an error).
Result<std::unique_ptr<ir::Model>> load_model_bytes(const void* data, size_t size, std::shared_ptr<void> keepalive,
                                                    const std::string& base_dir = "", const LoadOptions& opts = {});

// Test-data files (.pb): a TensorProto, SequenceProto, OptionalProto or MapProto, chosen by `expected`
// (the graph input/output type); with expected == nullptr or kind unknown a TensorProto is assumed.
// `name` receives the proto's name field when not null. A sparse tensor is densified up to
// `max_densify_bytes` (as LoadOptions::max_densify_bytes; the fuzz target lowers it to its memory limit).
Result<Value> read_value_pb(const std::string& path, const ir::TypeInfo* expected, std::string* name = nullptr);
Result<Value> parse_value_pb(const void* data, size_t size, const ir::TypeInfo* expected, std::string* name = nullptr,
                             size_t max_densify_bytes = size_t{1} << 30);
// Writes a value in the matching proto (tensors use raw_data, strings use string_data).
Status write_value_pb(const std::string& path, const Value& value, const std::string& name);
std::string serialize_value_pb(const Value& value, const std::string& name);

}  // namespace nxrt::onnx
