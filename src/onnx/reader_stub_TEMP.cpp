// TEMPORARY stub so main links before the real reader (branch `reader`) lands. Delete this file when
// src/onnx has the real implementation (a duplicate-symbol link error means: delete me).
#include "onnx/model_reader.h"
namespace nxrt::onnx {
Result<std::unique_ptr<ir::Model>> load_model_file(const std::string&, const LoadOptions&) { return not_implemented("reader"); }
Result<std::unique_ptr<ir::Model>> load_model_bytes(const void*, size_t, std::shared_ptr<void>, const std::string&, const LoadOptions&) { return not_implemented("reader"); }
Result<Value> read_value_pb(const std::string&, const ir::TypeInfo*, std::string*) { return not_implemented("reader"); }
Status write_value_pb(const std::string&, const Value&, const std::string&) { return not_implemented("reader"); }
}
