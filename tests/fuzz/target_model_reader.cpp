// Fuzz body: the ONNX model reader on arbitrary bytes. Any input must give a model or an error Status
// with a message: no crash, no sanitizer report, no runaway memory. A model that loads goes through
// load-time shape inference (src/shape: symbolic dims, constant values, shape arithmetic on whatever
// dims and attributes the file holds), which must succeed or say why. It is also written back
// (onnx/model_writer.h); those bytes must load again and write the same bytes (the writer emits only
// what the reader accepts, and nothing is lost between the two).
#include <string>

#include "fuzz_targets.h"
#include "onnx/model_reader.h"
#include "onnx/model_writer.h"
#include "shape/shape_inference.h"

namespace nxrt::fuzz {

bool model_reader(const uint8_t* data, size_t size) {
  onnx::LoadOptions opts;
  opts.max_densify_bytes = size_t{16} << 20;  // keep the fuzzer within its memory limit
  {
    auto r = onnx::load_model_bytes(data, size, nullptr, "", opts);
    if (!r.ok()) {
      if (r.status().message().empty()) return false;
    } else {
      Status s = shape::infer_shapes(**r);
      if (!s.ok() && s.message().empty()) return false;
    }
  }
  opts.expand_functions = false;
  auto r = onnx::load_model_bytes(data, size, nullptr, "", opts);
  if (!r.ok()) return !r.status().message().empty();
  const std::string written = onnx::serialize_model(**r);
  auto again = onnx::load_model_bytes(written.data(), written.size(), nullptr, "", opts);
  if (!again.ok()) return false;
  return onnx::serialize_model(**again) == written;
}

}  // namespace nxrt::fuzz
