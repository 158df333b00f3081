// libFuzzer target: the ONNX model reader and the test-data value parser on arbitrary bytes.
// Any input must give a model or an error Status: no crash, no sanitizer report, no runaway memory.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "onnx/model_reader.h"

using namespace nxrt;

namespace {

ir::TypeInfo tensor_type(DataType dt) {
  ir::TypeInfo t;
  t.kind = ir::TypeInfo::Kind::kTensor;
  t.elem_type = dt;
  return t;
}

ir::TypeInfo wrap(ir::TypeInfo::Kind kind, const ir::TypeInfo& inner) {
  ir::TypeInfo t;
  t.kind = kind;
  t.inner = std::make_shared<ir::TypeInfo>(inner);
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnx::LoadOptions opts;
  opts.max_densify_bytes = size_t{16} << 20;  // keep the fuzzer within its memory limit
  {
    auto r = onnx::load_model_bytes(data, size, nullptr, "", opts);
    (void)r;
  }
  {
    opts.expand_functions = false;
    auto r = onnx::load_model_bytes(data, size, nullptr, "", opts);
    (void)r;
  }
  static const ir::TypeInfo kTensor = tensor_type(DataType::kFloat);
  static const ir::TypeInfo kSeq = wrap(ir::TypeInfo::Kind::kSequence, kTensor);
  static const ir::TypeInfo kOpt = wrap(ir::TypeInfo::Kind::kOptional, kSeq);
  static const ir::TypeInfo kMap = [] {
    ir::TypeInfo t = wrap(ir::TypeInfo::Kind::kMap, tensor_type(DataType::kFloat));
    t.elem_type = DataType::kInt64;
    return t;
  }();
  for (const ir::TypeInfo* t : {static_cast<const ir::TypeInfo*>(nullptr), &kSeq, &kOpt, &kMap}) {
    std::string name;
    auto v = onnx::parse_value_pb(data, size, t, &name);
    (void)v;
  }
  return 0;
}
