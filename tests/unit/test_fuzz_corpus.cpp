// Replays every file of tests/fuzz/corpus/<target>/ (the seeds, and the inputs of the fuzzing
// campaign's findings, each kept as a regression test) through that target's body
// (tests/fuzz/fuzz_targets.h): each must meet the body's contract, without libFuzzer and under the
// unit tests' sanitizers.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "fuzz_targets.h"

namespace fs = std::filesystem;

namespace {

using Body = bool (*)(const uint8_t*, size_t);

// Runs `body` over every file in the target's corpus folder; returns how many it read.
int replay(const std::string& target, Body body) {
  const fs::path dir = fs::path(NXRT_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / target;
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(body(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) << e.path();
    ++files;
  }
  return files;
}

}  // namespace

TEST(FuzzCorpus, ModelReader) { EXPECT_GE(replay("model_reader", nxrt::fuzz::model_reader), 20); }
TEST(FuzzCorpus, ValuePb) { EXPECT_GE(replay("value_pb", nxrt::fuzz::value_pb), 5); }
TEST(FuzzCorpus, Templates) { EXPECT_GE(replay("templates", nxrt::fuzz::templates), 5); }
TEST(FuzzCorpus, Tokenizer) { EXPECT_GE(replay("tokenizer", nxrt::fuzz::tokenizer), 3); }
TEST(FuzzCorpus, GenaiConfig) { EXPECT_GE(replay("genai_config", nxrt::fuzz::genai_config), 3); }
