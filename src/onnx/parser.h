// The ONNX message parser (internal): ModelProto and the test-data protos into ir:: / Value.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"
#include "onnx/limits.h"
#include "onnx/mapped_file.h"
#include "onnx/wire.h"

namespace nxrt::onnx {

struct ParseOptions {
  std::shared_ptr<void> keepalive;  // holds the parsed bytes alive for zero-copy tensors
  bool borrow_raw = true;           // raw_data aligned to its element size is borrowed, not copied
  std::string base_dir;             // external data folder ("" = external data is an error)
  size_t max_densify_bytes = size_t{1} << 30;  // all sparse tensors together, when dense: more is an error
  ReaderLimits limits;
};

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, ParseOptions opts);

  Status parse_model(ir::Model* model);
  Status parse_value(const ir::TypeInfo* expected, Value* out, std::string* name);

 private:
  struct TensorFields;

  Status parse_graph(const wire::Field& msg, ir::Graph* g, int graph_depth);
  Status parse_node(const wire::Field& msg, ir::Node* n, int graph_depth);
  Status parse_attribute(const wire::Field& msg, ir::Attribute* a, int graph_depth);
  Status parse_tensor(const wire::Field& msg, Tensor* t, std::string* name);
  Status parse_sparse_tensor(const wire::Field& msg, Tensor* t, std::string* name);
  Status parse_value_info(const wire::Field& msg, ir::ValueInfo* v);
  Status parse_type(const wire::Field& msg, ir::TypeInfo* t);
  Status parse_tensor_type(const wire::Field& msg, ir::TypeInfo* t);
  Status parse_shape(const wire::Field& msg, ir::TypeInfo* t);
  Status parse_opset(const wire::Field& msg, ir::OpsetImport* o);
  Status parse_string_pair(const wire::Field& msg, std::pair<std::string, std::string>* kv);
  Status parse_function(const wire::Field& msg, ir::Function* fn);
  Status parse_dtype(const wire::Field& f, const char* name, DataType* out, bool allow_undefined);
  // A string field, bounded by limits.max_string_bytes (data: doc strings, string attributes and
  // tensors, metadata) or limits.max_name_bytes (every other string).
  Status read_str(const wire::Field& f, const char* field, std::string* out);
  // Counts one more repeated entry (field[index]) of a kind against its limit.
  Status count_entry(size_t* counter, size_t limit, const wire::Field& f, const char* field, int64_t index,
                     const char* what);
  Status check_rank(size_t rank, size_t offset, const std::string& what);

  Status build_tensor(TensorFields& tf, Tensor* out);
  Status load_external(TensorFields& tf, DataType dt, const Dims& dims, int64_t numel, Tensor* out);
  Status densify(const Tensor& values, const Tensor& indices, const Dims& dims, size_t offset,
                 const std::string& name, Tensor* out);

  Status parse_sequence(const wire::Field& msg, const ir::TypeInfo* expected, Value* out, std::string* name);
  Status parse_element(const wire::Field& f, const ir::TypeInfo* inner, const char* const* names, int64_t index,
                       Value* out);
  Status parse_optional(const wire::Field& msg, const ir::TypeInfo* expected, Value* out, std::string* name);
  Status parse_map(const wire::Field& msg, const ir::TypeInfo* expected, Value* out, std::string* name);

  // Enters a sub-message (wire type, path and depth checked) and runs fn on it.
  template <typename Fn>
  Status sub(const wire::Field& f, const char* name, int64_t index, Fn&& fn);

  wire::Context ctx_;
  const uint8_t* data_;
  size_t size_;
  ParseOptions opts_;
  std::map<std::string, std::shared_ptr<MappedFile>> external_files_;
  // Entries parsed so far, against opts_.limits, and bytes densified against max_densify_bytes.
  size_t nodes_ = 0, attributes_ = 0, initializers_ = 0, value_infos_ = 0;
  size_t densified_bytes_ = 0;
};

// Runs `fn` inside the length-delimited field `f`, named `name` (index `index`, -1 for a singular
// field) in error paths, refusing nesting deeper than wire::kMaxMessageDepth. Defined here because the
// model readers (parser.cpp) and the value readers (parser_values.cpp) both use it.
template <typename Fn>
Status Parser::sub(const wire::Field& f, const char* name, int64_t index, Fn&& fn) {
  NXRT_RETURN_IF_ERROR(wire::expect_type(ctx_, f, wire::kLen, name));
  wire::Scope scope(ctx_, name, index);
  if (ctx_.depth > wire::kMaxMessageDepth) {
    return ctx_.error(f.offset, "messages nested deeper than " + std::to_string(wire::kMaxMessageDepth));
  }
  return fn();
}

}  // namespace nxrt::onnx
