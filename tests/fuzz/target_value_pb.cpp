// Fuzz body: the .pb test-data reader (onnx::parse_value_pb) on arbitrary bytes, read as a tensor, a
// sparse tensor, sequences, optionals and maps. Any input must give a value or an error Status with a
// message. A value that reads is written back (serialize_value_pb); those bytes must read again, as
// the same expected type (a dense tensor for a sparse one), and write the same bytes.
#include <memory>
#include <string>
#include <vector>

#include "fuzz_targets.h"
#include "onnx/model_reader.h"

namespace nxrt::fuzz {

namespace {

using Kind = ir::TypeInfo::Kind;

ir::TypeInfo tensor_type(DataType dt, Kind kind = Kind::kTensor) {
  ir::TypeInfo t;
  t.kind = kind;
  t.elem_type = dt;
  return t;
}

ir::TypeInfo wrap(Kind kind, const ir::TypeInfo& inner, DataType key = DataType::kUndefined) {
  ir::TypeInfo t;
  t.kind = kind;
  t.elem_type = key;
  t.inner = std::make_shared<ir::TypeInfo>(inner);
  return t;
}

// The expected types every input is read as (nullptr: "a TensorProto", as for an untyped input).
const std::vector<const ir::TypeInfo*>& expected_types() {
  static const std::vector<ir::TypeInfo> types = [] {
    const ir::TypeInfo f32 = tensor_type(DataType::kFloat);
    const ir::TypeInfo seq = wrap(Kind::kSequence, f32);
    return std::vector<ir::TypeInfo>{
        tensor_type(DataType::kFloat, Kind::kSparseTensor),
        seq,
        wrap(Kind::kSequence, seq),
        wrap(Kind::kOptional, f32),
        wrap(Kind::kOptional, seq),
        wrap(Kind::kMap, f32, DataType::kInt64),
        wrap(Kind::kMap, tensor_type(DataType::kString), DataType::kString),
        wrap(Kind::kSequence, wrap(Kind::kMap, f32, DataType::kString)),
    };
  }();
  static const std::vector<const ir::TypeInfo*> ptrs = [] {
    std::vector<const ir::TypeInfo*> p{nullptr};
    for (const auto& t : types) p.push_back(&t);
    return p;
  }();
  return ptrs;
}

}  // namespace

bool value_pb(const uint8_t* data, size_t size) {
  for (const ir::TypeInfo* t : expected_types()) {
    std::string name;
    // A 20-byte sparse proto may stand for a 1 GiB dense tensor (the reader's default limit); held and
    // written back, that is more than the fuzzer's 2 GB memory limit, so densify at most 16 MB here (as
    // the model_reader target does): the limit's own check is what runs either way.
    auto v = onnx::parse_value_pb(data, size, t, &name, size_t{16} << 20);
    if (!v.ok()) {
      if (v.status().message().empty()) return false;
      continue;
    }
    const std::string written = onnx::serialize_value_pb(*v, name);
    // A sparse tensor is read into a dense one, which is written as a TensorProto.
    const ir::TypeInfo* written_type = t && t->kind == Kind::kSparseTensor ? nullptr : t;
    std::string name2;
    auto again = onnx::parse_value_pb(written.data(), written.size(), written_type, &name2);
    if (!again.ok() || name2 != name) return false;
    if (onnx::serialize_value_pb(*again, name2) != written) return false;
  }
  return true;
}

}  // namespace nxrt::fuzz
