// String ops: hand-computed cases, Unicode case mapping without locales, malformed attributes.
#include <gtest/gtest.h>

#include <chrono>

#include "kernel_test_util.h"
#include "ops/strings/strings_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_floats;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::attr_strings;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {
Tensor S(Dims shape, std::vector<std::string> v) {
  Tensor t(DataType::kString, shape);
  for (size_t i = 0; i < v.size(); ++i) t.string_data()[i] = v[i];
  return t;
}
Tensor I64(Dims shape, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(DataType::kInt64, shape, v); }
std::vector<std::string> svals(const Tensor& t) { return std::vector<std::string>(t.string_data(), t.string_data() + t.numel()); }
std::vector<float> fvals(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }
std::vector<Value> run(const KernelRun& r) {
  auto out = run_kernel(r);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? out.value() : std::vector<Value>(r.num_outputs, Value(Tensor(DataType::kFloat, {0})));
}
Tensor run1(const KernelRun& r) { return run(r)[0].tensor(); }
std::string err(const KernelRun& r) {
  auto out = run_kernel(r);
  EXPECT_FALSE(out.ok());
  return out.ok() ? std::string() : out.status().message();
}
}  // namespace

TEST(OpsStrings, ConcatBroadcast) {
  Tensor y = run1({"StringConcat", "", 20, {}, {S({2, 1}, {"a", "b"}), S({3}, {"x", "y", "z"})}});
  EXPECT_EQ(y.shape(), (Dims{2, 3}));
  EXPECT_EQ(svals(y), (std::vector<std::string>{"ax", "ay", "az", "bx", "by", "bz"}));
  Tensor s = run1({"StringConcat", "", 20, {}, {S({}, {"ca"}), S({2}, {"t", "r"})}});
  EXPECT_EQ(svals(s), (std::vector<std::string>{"cat", "car"}));
  EXPECT_NE(err({"StringConcat", "", 20, {}, {S({2}, {"a", "b"}), S({3}, {"x", "y", "z"})}}).find("broadcast"), std::string::npos);
  EXPECT_FALSE(run_kernel({"StringConcat", "", 20, {}, {S({1}, {"a"}), I64({1}, {1})}}).ok());
}

TEST(OpsStrings, UnicodeCaseMappingWithoutLocale) {
  using nxrt::ops::utf8_to_lower;
  using nxrt::ops::utf8_to_upper;
  EXPECT_EQ(utf8_to_lower("ÀÉÎÕÜ ÆØÞ Ÿ"), "àéîõü æøþ ÿ");
  EXPECT_EQ(utf8_to_upper("àéîõü æøþ ÿ"), "ÀÉÎÕÜ ÆØÞ Ÿ");
  EXPECT_EQ(utf8_to_upper("straße"), "STRAßE");  // no 1:n expansion
  EXPECT_EQ(utf8_to_lower("ŁĄĆĘŃŚŹŻ ČŘŠŽ Ő"), "łąćęńśźż čřšž ő");
  EXPECT_EQ(utf8_to_upper("łąćęńśźż čřšž ő"), "ŁĄĆĘŃŚŹŻ ČŘŠŽ Ő");
  EXPECT_EQ(utf8_to_lower("ΑΒΓΔ ΣΟΦΊΑ Ώ"), "αβγδ σοφία ώ");
  EXPECT_EQ(utf8_to_upper("σοφίας"), "ΣΟΦΊΑΣ");  // final sigma -> Σ
  EXPECT_EQ(utf8_to_lower("ПРИВЕТ ЁЖ Ї"), "привет ёж ї");
  EXPECT_EQ(utf8_to_upper("привет ёж ї"), "ПРИВЕТ ЁЖ Ї");
  EXPECT_EQ(utf8_to_upper("ǆ ǅ"), "Ǆ Ǆ");
  EXPECT_EQ(utf8_to_lower("İ"), "i");
  EXPECT_EQ(utf8_to_upper("ı"), "I");
  EXPECT_EQ(utf8_to_upper("中文 ok"), "中文 OK");
  // Invalid UTF-8 bytes pass through unchanged.
  EXPECT_EQ(utf8_to_upper(std::string("a\xff" "b\xc3", 4)), std::string("A\xff" "B\xc3", 4));
}

TEST(OpsStrings, Normalizer) {
  Tensor x = S({5}, {"Monday", "ÉTÉ", "monday", "Straße", "Ärger"});
  Tensor y = run1({"StringNormalizer", "", 10,
                   {attr_string("case_change_action", "LOWER"), attr_strings("stopwords", {"MONDAY", "ärger"})}, {x}});
  EXPECT_EQ(svals(y), (std::vector<std::string>{"été", "straße"}));
  Tensor cs = run1({"StringNormalizer", "", 10,
                    {attr_string("case_change_action", "UPPER"), attr_int("is_case_sensitive", 1),
                     attr_strings("stopwords", {"monday"}), attr_string("locale", "tr_TR")},
                    {x}});
  EXPECT_EQ(svals(cs), (std::vector<std::string>{"MONDAY", "ÉTÉ", "STRAßE", "ÄRGER"}));
  // All dropped: [C] -> [1] with "", [1, C] -> [1, 1].
  Tensor e1 = run1({"StringNormalizer", "", 10, {attr_strings("stopwords", {"a"})}, {S({2}, {"a", "A"})}});
  EXPECT_EQ(e1.shape(), (Dims{1}));
  EXPECT_EQ(e1.string_data()[0], "");
  Tensor e2 = run1({"StringNormalizer", "", 10, {attr_strings("stopwords", {"a"})}, {S({1, 2}, {"a", "A"})}});
  EXPECT_EQ(e2.shape(), (Dims{1, 1}));
  EXPECT_NE(err({"StringNormalizer", "", 10, {attr_string("case_change_action", "TITLE")}, {S({1}, {"a"})}}).find("TITLE"),
            std::string::npos);
  EXPECT_FALSE(run_kernel({"StringNormalizer", "", 10, {}, {S({2, 2}, {"a", "b", "c", "d"})}}).ok());
}

TEST(OpsStrings, Split) {
  auto out = run({"StringSplit", "", 20, {attr_int("maxsplit", 1)}, {S({3}, {"  a b  c  ", "", "x\u3000y"})}, 2});
  const Tensor& y = out[0].tensor();
  EXPECT_EQ(y.shape(), (Dims{3, 2}));
  EXPECT_EQ(svals(y), (std::vector<std::string>{"a", "b  c  ", "", "", "x", "y"}));
  const Tensor& n = out[1].tensor();
  EXPECT_EQ(std::vector<int64_t>(n.data<int64_t>(), n.data<int64_t>() + 3), (std::vector<int64_t>{2, 0, 2}));
  auto d = run({"StringSplit", "", 20, {attr_string("delimiter", "::")}, {S({2}, {"a::b::::c", ""})}, 2});
  EXPECT_EQ(d[0].tensor().shape(), (Dims{2, 4}));
  EXPECT_EQ(svals(d[0].tensor()), (std::vector<std::string>{"a", "b", "", "c", "", "", "", ""}));
  EXPECT_EQ(d[1].tensor().data<int64_t>()[1], 1);
  auto e = run({"StringSplit", "", 20, {}, {S({2}, {"", "  "})}, 2});
  EXPECT_EQ(e[0].tensor().shape(), (Dims{2, 0}));
}

TEST(OpsStrings, RegexFullMatch) {
  Tensor y = run1({"RegexFullMatch", "", 20, {attr_string("pattern", "[a-z]+\\d?")},
                   {S({2, 2}, {"abc1", "abc12", "", "Zz"})}});
  EXPECT_EQ(y.dtype(), DataType::kBool);
  EXPECT_EQ(std::vector<bool>(y.data<bool>(), y.data<bool>() + 4), (std::vector<bool>{true, false, false, false}));
  std::string m = err({"RegexFullMatch", "", 20, {attr_string("pattern", "(ab")}, {S({1}, {"ab"})}});
  EXPECT_NE(m.find("(ab"), std::string::npos) << m;
  EXPECT_NE(m.find("invalid regular expression"), std::string::npos) << m;
  // A pattern that makes backtracking engines exponential runs in linear time with RE2.
  std::string hostile(20000, 'a');
  hostile += "!";
  auto t0 = std::chrono::steady_clock::now();
  Tensor h = run1({"RegexFullMatch", "", 20, {attr_string("pattern", "(a+)+$")}, {S({1}, {hostile})}});
  EXPECT_FALSE(h.data<bool>()[0]);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
}

TEST(OpsStrings, TfIdfModes) {
  // Pool: unigrams {2, 3, 5, 4}, bigrams {(5,6), (7,8), (6,7)}.
  std::vector<nxrt::ir::Attribute> base = {attr_int("min_gram_length", 1), attr_int("max_gram_length", 2),
                                           attr_int("max_skip_count", 5), attr_ints("ngram_counts", {0, 4}),
                                           attr_ints("ngram_indexes", {0, 1, 2, 3, 4, 5, 6}),
                                           attr_ints("pool_int64s", {2, 3, 5, 4, 5, 6, 7, 8, 6, 7})};
  Tensor x = Tensor::from_vector<int32_t>(DataType::kInt32, {12}, {1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8});
  auto a = base;
  a.push_back(attr_string("mode", "TF"));
  EXPECT_EQ(fvals(run1({"TfIdfVectorizer", "", 9, a, {x}})), (std::vector<float>{0, 3, 1, 0, 1, 3, 1}));
  a.back() = attr_string("mode", "IDF");
  EXPECT_EQ(fvals(run1({"TfIdfVectorizer", "", 9, a, {x}})), (std::vector<float>{0, 1, 1, 0, 1, 1, 1}));
  a.back() = attr_string("mode", "TFIDF");
  a.push_back(attr_floats("weights", {1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(fvals(run1({"TfIdfVectorizer", "", 9, a, {x}})), (std::vector<float>{0, 6, 3, 0, 5, 18, 7}));
  // 2-D batch with string pool.
  Tensor xs = S({2, 3}, {"a", "b", "a", "b", "b", "c"});
  Tensor ys = run1({"TfIdfVectorizer", "", 9,
                    {attr_int("min_gram_length", 1), attr_int("max_gram_length", 2), attr_int("max_skip_count", 0),
                     attr_ints("ngram_counts", {0, 2}), attr_ints("ngram_indexes", {1, 0, 2}),
                     attr_strings("pool_strings", {"a", "b", "b", "c"}), attr_string("mode", "TF")},
                    {xs}});
  EXPECT_EQ(ys.shape(), (Dims{2, 3}));
  EXPECT_EQ(fvals(ys), (std::vector<float>{1, 2, 0, 2, 0, 1}));
}

TEST(OpsStrings, TfIdfMalformed) {
  auto mk = [](std::vector<int64_t> counts, std::vector<int64_t> idx, std::vector<int64_t> pool) {
    return KernelRun{"TfIdfVectorizer", "", 9,
                     {attr_int("min_gram_length", 1), attr_int("max_gram_length", 2), attr_int("max_skip_count", 0),
                      attr_ints("ngram_counts", counts), attr_ints("ngram_indexes", idx), attr_ints("pool_int64s", pool),
                      attr_string("mode", "TF")},
                     {I64({2}, {1, 2})}};
  };
  EXPECT_NE(err(mk({0, 9}, {0, 1}, {1, 2})).find("outside a pool"), std::string::npos);
  EXPECT_NE(err(mk({0, 1}, {0, 1}, {1, 2, 3, 4})).find("not a multiple"), std::string::npos);
  EXPECT_NE(err(mk({0}, {0}, {1, 2})).find("more n-grams"), std::string::npos);
  EXPECT_NE(err(mk({0}, {}, {1})).find("ngram_indexes"), std::string::npos);
  EXPECT_NE(err(mk({0}, {-1}, {1})).find("non-negative"), std::string::npos);
  // A string input against an int pool is a clear error.
  auto r = mk({0}, {0, 1}, {1, 2});
  r.inputs = {S({1}, {"a"})};
  EXPECT_NE(err(r).find("int32 or int64"), std::string::npos);
}
