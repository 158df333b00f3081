#include "onnx/model_reader.h"

#include <cstdio>
#include <memory>
#include <new>

#include "onnx/function_expand.h"
#include "onnx/mapped_file.h"
#include "onnx/model_writer.h"
#include "onnx/parser.h"

namespace nxrt::onnx {

namespace {

std::string dirname_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Runs fn; an allocation that fails inside (a model as large as the memory left) is an error value.
template <typename Fn>
auto without_throwing(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc& e) {
    return runtime_error(std::string("out of memory while ") + what + ": " + e.what());
  }
}

Result<std::unique_ptr<ir::Model>> load_impl(const uint8_t* data, size_t size, std::shared_ptr<void> keepalive,
                                             const std::string& base_dir, const LoadOptions& opts) {
  ParseOptions po;
  po.keepalive = keepalive;
  po.base_dir = base_dir;
  po.max_densify_bytes = opts.max_densify_bytes;
  po.limits = opts.limits;
  auto model = std::make_unique<ir::Model>();
  Parser parser(data, size, po);
  NXRT_RETURN_IF_ERROR(parser.parse_model(model.get()));
  if (opts.expand_functions) NXRT_RETURN_IF_ERROR(expand_functions(*model, opts.limits));
  model->backing = std::move(keepalive);
  return model;
}

}  // namespace

Result<std::unique_ptr<ir::Model>> load_model_file(const std::string& path, const LoadOptions& opts) {
  NXRT_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  auto r = without_throwing("reading the model",
                            [&] { return load_impl(file->data(), file->size(), file, dirname_of(path), opts); });
  if (!r.ok()) return r.status().with_context(path + ": ");
  return r;
}

Result<std::unique_ptr<ir::Model>> load_model_bytes(const void* data, size_t size, std::shared_ptr<void> keepalive,
                                                    const std::string& base_dir, const LoadOptions& opts) {
  return without_throwing("reading the model", [&] {
    return load_impl(static_cast<const uint8_t*>(data), size, std::move(keepalive), base_dir, opts);
  });
}

Result<Value> read_value_pb(const std::string& path, const ir::TypeInfo* expected, std::string* name) {
  NXRT_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::open(path));
  ParseOptions po;
  po.keepalive = file;
  return without_throwing("reading a value", [&]() -> Result<Value> {
    Parser parser(file->data(), file->size(), po);
    Value v;
    Status s = parser.parse_value(expected, &v, name);
    if (!s.ok()) return s.with_context(path + ": ");
    return v;
  });
}

Result<Value> parse_value_pb(const void* data, size_t size, const ir::TypeInfo* expected, std::string* name,
                             size_t max_densify_bytes) {
  ParseOptions po;
  po.borrow_raw = false;  // the caller's buffer may not outlive the value
  po.max_densify_bytes = max_densify_bytes;
  return without_throwing("reading a value", [&]() -> Result<Value> {
    Parser parser(static_cast<const uint8_t*>(data), size, po);
    Value v;
    NXRT_RETURN_IF_ERROR(parser.parse_value(expected, &v, name));
    return v;
  });
}

Status write_value_pb(const std::string& path, const Value& value, const std::string& name) {
  return write_file(path, serialize_value_pb(value, name));
}

}  // namespace nxrt::onnx
