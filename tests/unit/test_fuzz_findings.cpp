// Inputs the fuzz campaign found (docs/RELIABILITY.md), each kept in tests/fuzz/corpus/<target>/ as
// finding_*.* so FuzzCorpus.* replays it through the fuzz body, and checked here for the exact error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "onnx/model_reader.h"

using namespace nxrt;

namespace {

std::string corpus_file(const std::string& target, const std::string& name) {
  std::ifstream f(std::filesystem::path(NXRT_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / target / name,
                  std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

// model_reader, campaign of issue 22: a Constant inside an If branch whose `value` attribute declares
// type TENSOR but carries no `t` (a bit flip turned the field into doc_string). It read as an empty
// tensor of dtype UNDEFINED, which the writer then wrote and the reader refused on the way back. Now a
// tensor, sparse tensor or graph attribute without its value is a load error (function attributes that
// refer to the caller's, ref_attr_name, carry none and still load).
TEST(FuzzFindings, TensorAttributeWithoutItsValue) {
  const std::string bytes = corpus_file("model_reader", "finding_tensor_attribute_without_t.onnx");
  ASSERT_FALSE(bytes.empty());
  for (bool expand : {true, false}) {
    onnx::LoadOptions opts;
    opts.expand_functions = expand;
    auto r = onnx::load_model_bytes(bytes.data(), bytes.size(), nullptr, "", opts);
    ASSERT_FALSE(r.ok());
    EXPECT_HAS(r.status().message(), "ModelProto.graph.node[0].attribute[0].g.node[0].attribute[0]: attribute "
                                     "'value' has type TENSOR but no t field at byte");
  }
}
