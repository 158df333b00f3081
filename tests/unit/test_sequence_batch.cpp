// SequenceBatch (independent rows of one KV cache, `nxrt serve`'s continuous batching) and TokenPicker:
// rows prefilled alone or in chunks, decoded together at different lengths, freed and reused from a
// kept prefix, give the tokens a Generator gives each prompt alone (greedy), on both tiny styles.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "nxrt/genai.h"

using namespace nxrt;
using namespace nxrt::genai;

namespace {

// Greedy continuation of `prompt` by `steps` tokens through a batch-1 Generator.
std::vector<int64_t> alone(const Model& model, const std::vector<int64_t>& prompt, int steps) {
  GeneratorParams params(model);
  params.search.max_length = 64;
  auto gen = Generator::create(model, params);
  EXPECT_TRUE(gen.ok());
  EXPECT_TRUE((*gen)->append_tokens(prompt).ok());
  std::vector<int64_t> out;
  for (int i = 0; i < steps; ++i) {
    EXPECT_TRUE((*gen)->generate_next_token().ok());
    out.push_back((*gen)->next_token());
  }
  return out;
}

int64_t greedy(SequenceBatch& sb, size_t feed) {
  std::vector<float> logits;
  EXPECT_TRUE(sb.logits(feed, &logits).ok());
  TokenPicker picker(SearchOptions{});
  return picker.pick(&logits, {});
}

}  // namespace

TEST(SequenceBatch, RowsAtDifferentLengthsMatchEachPromptAlone) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset (ctest sets it after writing the tiny models)";
  for (const char* style : {"genai", "onnx"}) {
    SCOPED_TRACE(style);
    auto model = Model::create(std::string(root) + "/" + style);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const std::vector<int64_t> a = {5, 17, 3, 99, 42, 8, 1}, b = {7, 8, 9};
    const int steps = 6;
    const std::vector<int64_t> want_a = alone(**model, a, steps), want_b = alone(**model, b, steps);

    auto sbr = SequenceBatch::create(**model, 3, 64);
    ASSERT_TRUE(sbr.ok()) << sbr.status().to_string();
    SequenceBatch& sb = **sbr;
    // Row 2: the whole prompt as batch 1; row 0: its prompt in two chunks.
    ASSERT_TRUE(sb.run({{2, a}}).ok());
    std::vector<int64_t> got_a = {greedy(sb, 0)};
    ASSERT_TRUE(sb.run({{0, {b[0], b[1]}}}).ok());
    ASSERT_TRUE(sb.run({{0, {b[2]}}}).ok());
    std::vector<int64_t> got_b = {greedy(sb, 0)};
    // Decode both together (row 1 idle between them).
    for (int i = 1; i < steps; ++i) {
      Status s = sb.run({{0, {got_b.back()}}, {2, {got_a.back()}}});
      ASSERT_TRUE(s.ok()) << s.to_string();
      got_b.push_back(greedy(sb, 0));
      got_a.push_back(greedy(sb, 1));
    }
    EXPECT_EQ(got_a, want_a);
    EXPECT_EQ(got_b, want_b);
    EXPECT_EQ(sb.row_tokens(2).size(), a.size() + steps - 1);
    EXPECT_TRUE(sb.row_tokens(1).empty());

    // Reuse row 2's prompt prefix for b's... a's prompt again: keep 4 tokens, feed the rest.
    ASSERT_TRUE(sb.truncate_row(2, 4).ok());
    ASSERT_TRUE(sb.run({{2, std::vector<int64_t>(a.begin() + 4, a.end())}}).ok());
    EXPECT_EQ(greedy(sb, 0), want_a[0]);
    // Row 1 reused after row 0 is freed: a fresh sequence.
    ASSERT_TRUE(sb.truncate_row(0, 0).ok());
    ASSERT_TRUE(sb.run({{1, a}, {0, b}}).ok());
    EXPECT_EQ(greedy(sb, 0), want_a[0]);
    EXPECT_EQ(greedy(sb, 1), want_b[0]);
  }
}

// Prompts prefilled together in a range of rows that does not start at 0, then decoded with a row
// before them and an empty row between: every row gives its prompt's tokens alone.
TEST(SequenceBatch, RowRangesPrefillTogether) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset";
  auto model = Model::create(std::string(root) + "/genai");
  ASSERT_TRUE(model.ok());
  const std::vector<int64_t> a = {5, 17, 3, 99, 42, 8, 1}, b = {7, 8, 9}, c = {30, 31, 32, 33};
  const int steps = 5;
  const std::vector<std::vector<int64_t>> want = {alone(**model, c, steps), alone(**model, a, steps), alone(**model, b, steps)};
  auto sbr = SequenceBatch::create(**model, 4, 32);
  ASSERT_TRUE(sbr.ok());
  SequenceBatch& sb = **sbr;
  ASSERT_TRUE(sb.run({{0, c}}).ok());
  std::vector<std::vector<int64_t>> got(3);
  got[0].push_back(greedy(sb, 0));
  ASSERT_TRUE(sb.run({{2, a}, {3, b}}).ok());  // rows [2, 3]: row 0 untouched
  got[1].push_back(greedy(sb, 0));
  got[2].push_back(greedy(sb, 1));
  EXPECT_EQ(sb.row_tokens(0), c);
  for (int i = 1; i < steps; ++i) {
    ASSERT_TRUE(sb.run({{0, {got[0].back()}}, {2, {got[1].back()}}, {3, {got[2].back()}}}).ok());
    for (size_t k = 0; k < 3; ++k) got[k].push_back(greedy(sb, k));
  }
  EXPECT_EQ(got, want);
  EXPECT_TRUE(sb.row_tokens(1).empty());
}

TEST(SequenceBatch, ErrorsNameTheRowAndLimits) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset";
  auto model = Model::create(std::string(root) + "/genai");
  ASSERT_TRUE(model.ok());
  auto sb = SequenceBatch::create(**model, 2, 8);
  ASSERT_TRUE(sb.ok());
  EXPECT_NE((*sb)->run({{2, {1}}}).to_string().find("row 2"), std::string::npos);
  EXPECT_NE((*sb)->run({{0, {1}}, {0, {2}}}).to_string().find("fed twice"), std::string::npos);
  EXPECT_NE((*sb)->run({{0, std::vector<int64_t>(9, 1)}}).to_string().find("max_length 8"), std::string::npos);
  EXPECT_NE((*sb)->run({{0, {-1}}}).to_string().find("vocabulary"), std::string::npos);
  EXPECT_TRUE((*sb)->row_tokens(0).empty());  // failed runs change nothing
  EXPECT_FALSE((*sb)->truncate_row(0, 1).ok());
  EXPECT_FALSE(SequenceBatch::create(**model, 0, 8).ok());
}

TEST(TokenPicker, GreedyPenaltyAndSeededSampling) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  TokenPicker greedy(SearchOptions{});
  EXPECT_EQ(greedy.pick(&logits, {}), 1);
  SearchOptions pen;
  pen.repetition_penalty = 2.0;
  TokenPicker penalized(pen);
  std::vector<float> l2 = {1.0f, 3.0f, 2.0f};
  EXPECT_EQ(penalized.pick(&l2, {1}), 2);  // 3 / 2 = 1.5 < 2
  SearchOptions s;
  s.do_sample = true;
  s.random_seed = 7;
  TokenPicker p1(s), p2(s);
  std::vector<int64_t> d1, d2;
  for (int i = 0; i < 20; ++i) {
    std::vector<float> x = {0.0f, 0.1f, 0.2f, 0.3f}, y = x;
    d1.push_back(p1.pick(&x, {}));
    d2.push_back(p2.pick(&y, {}));
  }
  EXPECT_EQ(d1, d2);
}
