// genai runtime: genai_config parsing, the seeded prompt, search, and the Generator end to end on a
// toy decoder whose next token is (sum of all tokens so far) mod 16, read back from its KV cache, so
// cache handling (shared fixed-capacity buffer and growing past), rewind and overflow are checked.
#include <gtest/gtest.h>

#include "alloc_counter.h"
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <set>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "genai/genai_config.h"
#include "genai/search.h"
#include "nxrt/float_types.h"
#include "ir/graph.h"
#include "nxrt/genai.h"
#include "onnx/model_writer.h"

using namespace nxrt;
using namespace nxrt::genai;

namespace {

constexpr int64_t kVocab = 16;

ir::Node node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
              std::vector<ir::Attribute> attrs = {}) {
  ir::Node n;
  n.name = out[0] + "_node";
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

ir::Attribute int_attr(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kInt;
  a.i = v;
  return a;
}

ir::ValueInfo tensor_vi(const std::string& name, DataType t, std::vector<ir::Dim> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = t;
  v.type.has_shape = true;
  v.type.dims = std::move(dims);
  return v;
}

// Toy decoder, one layer, kv_heads 1, head_size 1: the cache rows hold the token ids (as float).
// Per batch row: logits[b, .., j] = -|j - (sum of the row's valid cache rows mod 16)|, valid rows being
// j < ReduceSum(mask) with a static cache (share_buffer: TensorScatter at ReduceSum(mask) - S) and the
// mask itself with a growing one (Concat). with_pos: int32 input_ids and an int32 position_ids input;
// the target adds the row's last position.
ir::Model toy_decoder(bool share_buffer, bool with_pos = false) {
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 24});
  ir::Graph& g = m.graph;
  using D = ir::Dim;
  const DataType ids_t = with_pos ? DataType::kInt32 : DataType::kInt64;
  g.inputs = {tensor_vi("input_ids", ids_t, {D::named("B"), D::named("S")}),
              tensor_vi("attention_mask", DataType::kInt64, {D::named("B"), D::named("T")}),
              tensor_vi("past_key_values.0.key", DataType::kFloat, {D::named("B"), D::fixed(1), D::named("P"), D::fixed(1)}),
              tensor_vi("past_key_values.0.value", DataType::kFloat, {D::named("B"), D::fixed(1), D::named("P"), D::fixed(1)})};
  g.outputs = {tensor_vi("logits", DataType::kFloat, {D::named("B"), D::named("S"), D::fixed(kVocab)}),
               tensor_vi("present.0.key", DataType::kFloat, {D::named("B"), D::fixed(1), D::named("P2"), D::fixed(1)}),
               tensor_vi("present.0.value", DataType::kFloat, {D::named("B"), D::fixed(1), D::named("P2"), D::fixed(1)})};
  auto i64 = [](std::vector<int64_t> v) {
    return Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
  };
  g.initializers["axes1"] = i64({1});
  g.initializers["axes2"] = i64({2});
  g.initializers["axes123"] = i64({1, 2, 3});
  g.initializers["one"] = Tensor::scalar_int64(1);
  g.initializers["zero"] = Tensor::scalar_int64(0);
  g.initializers["two"] = Tensor::scalar_int64(2);
  g.initializers["rows_shape"] = i64({0, 1, -1, 1});
  g.initializers["vocab"] = Tensor::scalar_float(static_cast<float>(kVocab));
  g.initializers["fzero"] = Tensor::scalar_float(0.f);
  g.initializers["fone"] = Tensor::scalar_float(1.f);
  g.initializers["fvocab_n"] = Tensor::scalar_float(static_cast<float>(kVocab));
  auto& n = g.nodes;
  n.push_back(node("ReduceSum", {"attention_mask", "axes1"}, {"total"}, {int_attr("keepdims", 0)}));  // [B]
  n.push_back(node("Shape", {"input_ids"}, {"ids_shape"}));
  n.push_back(node("Gather", {"ids_shape", "one"}, {"S"}, {int_attr("axis", 0)}));
  n.push_back(node("Sub", {"total", "S"}, {"write_idx"}));
  n.push_back(node("Cast", {"input_ids"}, {"ids_f"}, {int_attr("to", 1)}));
  n.push_back(node("Reshape", {"ids_f", "rows_shape"}, {"rows"}));  // [B, 1, S, 1]
  if (share_buffer) {
    n.push_back(node("TensorScatter", {"past_key_values.0.key", "rows", "write_idx"}, {"present.0.key"},
                     {int_attr("axis", 2)}));
    n.push_back(node("TensorScatter", {"past_key_values.0.value", "rows", "write_idx"}, {"present.0.value"},
                     {int_attr("axis", 2)}));
  } else {
    n.push_back(node("Concat", {"past_key_values.0.key", "rows"}, {"present.0.key"}, {int_attr("axis", 2)}));
    n.push_back(node("Concat", {"past_key_values.0.value", "rows"}, {"present.0.value"}, {int_attr("axis", 2)}));
  }
  if (share_buffer) {
    n.push_back(node("Shape", {"present.0.key"}, {"pk_shape"}));
    n.push_back(node("Gather", {"pk_shape", "two"}, {"cap"}, {int_attr("axis", 0)}));
    n.push_back(node("Range", {"zero", "cap", "one"}, {"jrow"}));             // [cap]
    n.push_back(node("Unsqueeze", {"total", "axes1"}, {"total2"}));           // [B, 1]
    n.push_back(node("Less", {"jrow", "total2"}, {"valid_b"}));               // [B, cap]
    n.push_back(node("Cast", {"valid_b"}, {"valid"}, {int_attr("to", 1)}));
  } else {
    n.push_back(node("Cast", {"attention_mask"}, {"valid"}, {int_attr("to", 1)}));  // [B, T]
  }
  n.push_back(node("Reshape", {"valid", "rows_shape"}, {"valid4"}));
  n.push_back(node("Mul", {"present.0.key", "valid4"}, {"kept"}));
  n.push_back(node("ReduceSum", {"kept", "axes123"}, {"ksum"}, {int_attr("keepdims", 0)}));  // [B]
  if (with_pos) {
    g.inputs.push_back(tensor_vi("position_ids", DataType::kInt32, {D::named("B"), D::named("S")}));
    n.push_back(node("ReduceMax", {"position_ids", "axes1"}, {"last_pos"}, {int_attr("keepdims", 0)}));
    n.push_back(node("Cast", {"last_pos"}, {"last_pos_f"}, {int_attr("to", 1)}));
    n.push_back(node("Add", {"ksum", "last_pos_f"}, {"ksum_pos"}));
    n.push_back(node("Mod", {"ksum_pos", "vocab"}, {"target"}, {int_attr("fmod", 1)}));
  } else {
    n.push_back(node("Mod", {"ksum", "vocab"}, {"target"}, {int_attr("fmod", 1)}));
  }
  n.push_back(node("Unsqueeze", {"target", "axes1"}, {"target2"}));  // [B, 1]
  n.push_back(node("Range", {"fzero", "fvocab_n", "fone"}, {"jv"}));  // [V]
  n.push_back(node("Sub", {"jv", "target2"}, {"diff"}));             // [B, V]
  n.push_back(node("Abs", {"diff"}, {"adiff"}));
  n.push_back(node("Neg", {"adiff"}, {"row"}));
  n.push_back(node("Unsqueeze", {"row", "axes1"}, {"row3"}));         // [B, 1, V]
  // logits [B, S, V]: the row broadcast over the S positions (ids_f * 0 + row)
  n.push_back(node("Unsqueeze", {"ids_f", "axes2"}, {"ids3"}));      // [B, S, 1]
  n.push_back(node("Mul", {"ids3", "fzero"}, {"zeros3"}));
  n.push_back(node("Add", {"zeros3", "row3"}, {"logits"}));
  return m;
}

std::string make_dir(const std::string& tag) {
  std::string d = testing::TempDir() + "nxrt_genai_" + tag + "_" + std::to_string(getpid());
  mkdir(d.c_str(), 0755);
  return d;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

std::string config_json(bool share, int64_t context = 64, const std::string& extra_input = "") {
  return std::string(R"({"model": {"bos_token_id": 1, "context_length": )") + std::to_string(context) +
         R"(, "decoder": {"filename": "model.onnx", "head_size": 1, "hidden_size": 1,
      "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask",
                 "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value")" +
         extra_input + R"(},
      "outputs": {"logits": "logits", "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"},
      "num_attention_heads": 1, "num_hidden_layers": 1, "num_key_value_heads": 1},
    "eos_token_id": [2, 9], "pad_token_id": 0, "type": "toy", "vocab_size": 16},
  "search": {"do_sample": false, "max_length": 32, "past_present_share_buffer": )" +
         (share ? "true" : "false") + R"(, "top_k": 1, "top_p": 1.0, "temperature": 1.0}})";
}

// Removes a test folder's files when the test ends (also on an early ASSERT return).
struct FolderGuard {
  std::string dir;
  ~FolderGuard() {
    for (const char* f : {"/model.onnx", "/genai_config.json"}) std::remove((dir + f).c_str());
    rmdir(dir.c_str());
  }
};

std::string toy_folder(bool share, const std::string& tag) {
  std::string d = make_dir(tag);
  EXPECT_TRUE(onnx::write_model_file(d + "/model.onnx", toy_decoder(share)).ok());
  write_text(d + "/genai_config.json", config_json(share));
  return d;
}

// Expected greedy continuation: next = sum(sequence) mod 16.
std::vector<int64_t> expected_tokens(std::vector<int64_t> seq, int n) {
  std::vector<int64_t> out;
  for (int i = 0; i < n; ++i) {
    int64_t s = 0;
    for (int64_t t : seq) s += t;
    out.push_back(s % kVocab);
    seq.push_back(s % kVocab);
  }
  return out;
}

// Heap allocations made by `steps` generate_next_token calls (each must succeed).
uint64_t allocations_over_decode_steps(Generator& g, int steps) {
  uint64_t allocs = 0;
  for (int i = 0; i < steps; ++i) {
    nxrt::test::AllocCounter::arm();
    Status st = g.generate_next_token();
    nxrt::test::AllocCounter::disarm();
    allocs += nxrt::test::AllocCounter::count();
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (!st.ok()) break;
  }
  return allocs;
}

}  // namespace

TEST(GenaiConfig, ParsesNamesSizesAndSearchDefaults) {
  auto c = parse_config_text(config_json(true, 128), "/models/x/genai_config.json");
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->decoder_path, "/models/x/model.onnx");
  EXPECT_EQ(c->past_key_names, "past_key_values.%d.key");
  EXPECT_EQ(c->position_ids, "position_ids");  // default for an absent name
  EXPECT_EQ(c->context_length, 128);
  EXPECT_EQ(c->vocab_size, 16);
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{2, 9}));
  EXPECT_TRUE(c->past_present_share_buffer);
  EXPECT_EQ(c->max_length, 32);
  EXPECT_EQ(layer_name(c->present_value_names, 7), "present.7.value");
}

TEST(GenaiConfig, ErrorsNameTheProblem) {
  auto bad = parse_config_text(R"({"model": {"decoder": {"num_hidden_layers": 2}}})", "cfg.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("filename"), std::string::npos);
  auto typ = parse_config_text(R"({"model": {"decoder": {"filename": "m.onnx", "num_hidden_layers": "2"}}})", "cfg.json");
  ASSERT_FALSE(typ.ok());
  EXPECT_NE(typ.status().message().find("num_hidden_layers"), std::string::npos);
  auto syn = parse_config_text("{\"model\": [1,}", "cfg.json");
  ASSERT_FALSE(syn.ok());
  EXPECT_NE(syn.status().message().find("line 1"), std::string::npos);
  auto missing = read_config("/nonexistent/dir/genai_config.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
}

TEST(GenaiPrompt, MatchesOrtGenerateSeededIds) {
  // ort generate --prompt-len 16 on a 512-token and on a 151936-token vocabulary
  EXPECT_EQ(seeded_prompt(16, 512),
            (std::vector<int64_t>{37, 360, 462, 496, 20, 60, 82, 411, 204, 65, 278, 163, 509, 278, 135, 212}));
  EXPECT_EQ(seeded_prompt(4, 151936), (std::vector<int64_t>{11136, 106873, 137176, 147461}));
}

// argmax_first's vector passes against the one-pass rule (the first index of the largest non-NaN value,
// 0 when all are NaN) on random rows: lengths around the 16-float blocks, ties, NaN, +-inf.
TEST(GenaiSearch, ArgmaxFirstMatchesTheScalarRule) {
  std::mt19937 rng(5);
  auto scalar = [](const std::vector<float>& x) {
    int64_t best = -1;
    float bv = 0;
    for (size_t j = 0; j < x.size(); ++j) {
      if (std::isnan(x[j])) continue;
      if (best < 0 || x[j] > bv) best = static_cast<int64_t>(j), bv = x[j];
    }
    return best < 0 ? int64_t{0} : best;
  };
  const float inf = std::numeric_limits<float>::infinity();
  for (int it = 0; it < 400; ++it) {
    const size_t n = 1 + static_cast<size_t>(rng() % 70);
    std::vector<float> x(n);
    const int kind = it % 5;  // 0 plain, 1 small ints (ties), 2 NaN-heavy, 3 all -inf / NaN, 4 +inf present
    for (auto& v : x) {
      const unsigned r = rng() % 8;
      v = kind == 1 ? static_cast<float>(rng() % 4) : static_cast<float>(static_cast<int>(rng() % 2001) - 1000) / 7.f;
      if (kind == 2 && r < 4) v = NAN;
      if (kind == 3) v = r < 3 ? NAN : -inf;
      if (kind == 4 && r == 0) v = inf;
    }
    EXPECT_EQ(argmax_first(x.data(), static_cast<int64_t>(n)), scalar(x)) << "it " << it << " n " << n;
  }
  std::vector<float> all_nan(37, NAN);
  EXPECT_EQ(argmax_first(all_nan.data(), 37), 0);
}

TEST(GenaiSearch, GreedyTiesGoToLowestIdAndPenaltyApplies) {
  std::vector<float> x = {1.f, 3.f, 3.f, NAN, 2.f};
  EXPECT_EQ(argmax_first(x.data(), 5), 1);
  std::vector<float> p = {2.f, -2.f, 1.f};
  apply_repetition_penalty(p.data(), 3, {0, 1, 1}, 2.0);
  EXPECT_FLOAT_EQ(p[0], 1.f);
  EXPECT_FLOAT_EQ(p[1], -4.f);
  EXPECT_FLOAT_EQ(p[2], 1.f);
  SearchOptions o;
  Sampler s(o);
  std::vector<float> l = {0.f, 3.f, 2.f};
  std::vector<uint8_t> seen;
  const std::vector<int64_t> seq = {1};
  LogitsRow row{l.data(), DataType::kFloat, 3};
  apply_repetition_penalty(row, seq.data(), 1, 4.0, &seen);
  EXPECT_EQ(s.next(row), 2);  // 3 / 4 < 2
  // float16 rows are read and edited in place.
  std::vector<uint16_t> h = {float_to_half(1.f), float_to_half(-2.f), float_to_half(2.5f), float_to_half(2.5f)};
  LogitsRow hrow{h.data(), DataType::kFloat16, 4};
  EXPECT_EQ(argmax_first(hrow), 2);
  suppress_tokens(hrow, {2});
  EXPECT_EQ(argmax_first(hrow), 3);
  const std::vector<int64_t> hs = {1, 0};
  apply_repetition_penalty(hrow, hs.data(), 2, 2.0, &seen);
  EXPECT_FLOAT_EQ(half_to_float(h[0]), 0.5f);
  EXPECT_FLOAT_EQ(half_to_float(h[1]), -4.f);
}

TEST(GenaiSearch, NoRepeatNgramBansTheCompletingToken) {
  std::vector<float> l(8, 1.f);
  LogitsRow row{l.data(), DataType::kFloat, 8};
  // 3-grams of [1 2 3 1 2]: the prefix (1, 2) was followed by 3, so 3 is banned; nothing else.
  const std::vector<int64_t> seq = {1, 2, 3, 1, 2};
  ban_repeated_ngrams(row, seq.data(), 5, 3);
  for (int64_t j = 0; j < 8; ++j) EXPECT_EQ(l[j] < -1e30f, j == 3) << j;
  std::vector<float> l2(8, 1.f);
  ban_repeated_ngrams(LogitsRow{l2.data(), DataType::kFloat, 8}, seq.data(), 5, 6);  // longer than the row
  for (float v : l2) EXPECT_EQ(v, 1.f);
}

TEST(GenaiSearch, SamplingIsSeededAndFiltersApply) {
  SearchOptions o;
  o.do_sample = true;
  o.random_seed = 42;
  std::vector<float> base = {0.f, 0.5f, 1.f, 1.5f, 2.f, 0.2f};
  auto draw = [&](SearchOptions so, int n) {
    Sampler s(so);
    std::vector<int64_t> out;
    for (int i = 0; i < n; ++i) {
      std::vector<float> l = base;
      out.push_back(s.next(LogitsRow{l.data(), DataType::kFloat, static_cast<int64_t>(l.size())}));
    }
    return out;
  };
  auto a = draw(o, 64), b = draw(o, 64);
  EXPECT_EQ(a, b);
  std::set<int64_t> seen(a.begin(), a.end());
  EXPECT_GT(seen.size(), 2u);
  SearchOptions k2 = o;
  k2.top_k = 2;
  for (int64_t t : draw(k2, 64)) EXPECT_TRUE(t == 4 || t == 3);
  SearchOptions p = o;
  p.top_p = 1e-6;
  for (int64_t t : draw(p, 16)) EXPECT_EQ(t, 4);
  SearchOptions mp = o;
  mp.min_p = 0.5;  // keeps p >= p_max / 2: ids 4 (e^2) and 3 (e^1.5)
  for (int64_t t : draw(mp, 64)) EXPECT_TRUE(t == 4 || t == 3);
}

TEST(GenaiGenerator, SharedBufferGreedyFollowsTheCache) {
  std::string d = toy_folder(true, "share");
  FolderGuard guard{d};
  auto model = Model::create(d);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->vocab_size(), kVocab);
  GeneratorParams params(**model);
  params.search.max_length = 12;
  auto gen = Generator::create(**model, params);
  ASSERT_TRUE(gen.ok()) << gen.status().to_string();
  Generator& g = **gen;
  ASSERT_TRUE(g.append_tokens({1, 2, 3}).ok());
  auto lg = g.get_logits();
  ASSERT_TRUE(lg.ok());
  EXPECT_EQ(argmax_first(lg->data(), kVocab), 6);
  std::vector<int64_t> got;
  while (!g.is_done()) {
    ASSERT_TRUE(g.generate_next_token().ok());
    got.push_back(g.next_token());
  }
  EXPECT_EQ(got, expected_tokens({1, 2, 3}, 9));
  EXPECT_EQ(g.sequence().size(), 12u);
  // Full: one more is a clear error, appending too.
  EXPECT_FALSE(g.generate_next_token().ok());
  Status over = g.append_tokens({1});
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.message().find("context overflow"), std::string::npos);
  // Rewind to the prompt + 1 and continue: stale cache rows must not count.
  ASSERT_TRUE(g.rewind_to(4).ok());
  ASSERT_TRUE(g.append_tokens({5}).ok());
  ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.next_token(), (1 + 2 + 3 + 6 + 5) % kVocab);
  EXPECT_STREQ(g.kv_update(), "in-place");
}

// A decode step over a shared-buffer KV cache allocates nothing once warm: the cache is bound in place,
// inputs are rewritten, logits land in a pooled buffer that keeps its address.
TEST(GenaiGenerator, DecodeStepAllocatesNothing) {
  std::string d = toy_folder(true, "noalloc");
  FolderGuard guard{d};
  auto model = Model::create(d);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  GeneratorParams params(**model);
  params.search.max_length = 40;
  auto gen = Generator::create(**model, params);
  ASSERT_TRUE(gen.ok());
  Generator& g = **gen;
  ASSERT_TRUE(g.append_tokens({1, 2, 3}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(g.generate_next_token().ok());  // warm-up (prefill, first steps)
  ASSERT_TRUE(g.get_logits().ok());
  EXPECT_EQ(allocations_over_decode_steps(g, 20), 0u) << "heap allocations over 20 decode steps";
}

// The same on real decoder graphs: tiny folders of both styles written by tools/make_genai_model.py
// (ctest's genai_tiny_models fixture sets NXRT_TEST_GENAI_DIR): GroupQueryAttention, MatMulNBits at
// accuracy_level 4, SkipSimplifiedLayerNormalization; and Attention + TensorScatter + int4
// DequantizeLinear.
TEST(GenaiGenerator, RealTinyDecodersDecodeWithoutAllocating) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset (ctest sets it after writing the tiny models)";
  for (const char* style : {"genai", "onnx"}) {
    auto model = Model::create(std::string(root) + "/" + style);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    const int64_t pad = (*model)->config().pad_token_id;
    // Batch 1, and batch 4 with left-padded prompts of different lengths (rows at different cache
    // lengths: every row's own seqlens / write index).
    for (int64_t batch : {1, 4}) {
      SCOPED_TRACE(std::string(style) + " batch " + std::to_string(batch));
      GeneratorParams params(**model);
      params.search.max_length = 64;
      params.search.batch_size = batch;
      auto gen = Generator::create(**model, params);
      ASSERT_TRUE(gen.ok()) << gen.status().to_string();
      Generator& g = **gen;
      std::vector<int64_t> ids = {5, 17, 3, 99, 42};
      if (batch == 4) {
        ids = {5, 17, 3, 99, 42,  pad, pad, 7, 8, 9,  pad, 11, 12, 13, 14,  pad, pad, pad, pad, 21};
      }
      ASSERT_TRUE(g.append_tokens(ids).ok());
      // Warm: the kernel cache fills its variants per node (default 4) while the mask grows, then
      // reuses them in place.
      for (int i = 0; i < 6; ++i) ASSERT_TRUE(g.generate_next_token().ok());
      EXPECT_EQ(allocations_over_decode_steps(g, 16), 0u)
          << "heap allocations over 16 decode steps (NXRT_ALLOC_TRACE=1 prints where)";
      EXPECT_STREQ(g.kv_update(), "in-place");
    }
  }
}

// The thread count changes no result: the tiny real decoders (both styles), a batch of 4 left-padded
// prompts, 12 greedy steps at 1, 2, 3 and 4 threads (pool=exact: 3 and 4 even on a 2-CPU machine, so
// the one-counter chunks and plans for more threads run) give the same tokens and the same logits bit
// for bit: every kernel on this path splits work, never a sum, between threads.
TEST(GenaiGenerator, ThreadCountsGiveTheSameTokensAndLogits) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset (ctest sets it after writing the tiny models)";
  for (const char* style : {"genai", "onnx"}) {
    std::vector<int64_t> one_thread_tokens;
    std::vector<float> one_thread_logits;
    for (int threads : {1, 2, 3, 4}) {
      SCOPED_TRACE(std::string(style) + " threads " + std::to_string(threads));
      ModelOptions mo;
      mo.session.threads = threads;
      mo.session.kernel_overrides = {{"pool", "exact"}};
      auto model = Model::create(std::string(root) + "/" + style, mo);
      ASSERT_TRUE(model.ok()) << model.status().to_string();
      const int64_t pad = (*model)->config().pad_token_id;
      GeneratorParams params(**model);
      params.search.max_length = 40;
      params.search.batch_size = 4;
      auto gen = Generator::create(**model, params);
      ASSERT_TRUE(gen.ok()) << gen.status().to_string();
      Generator& g = **gen;
      ASSERT_TRUE(g.append_tokens({5, 17, 3, 99, 42, pad, pad, 7, 8, 9, pad, 11, 12, 13, 14, pad, pad, pad, pad, 21}).ok());
      std::vector<int64_t> tokens;
      std::vector<float> logits;
      for (int i = 0; i < 12; ++i) {
        auto l = g.get_logits();
        ASSERT_TRUE(l.ok()) << l.status().to_string();
        logits.insert(logits.end(), l->begin(), l->end());
        ASSERT_TRUE(g.generate_next_token().ok());
        for (int64_t t : g.get_next_tokens()) tokens.push_back(t);
      }
      if (threads == 1) {
        one_thread_tokens = std::move(tokens);
        one_thread_logits = std::move(logits);
        continue;
      }
      EXPECT_EQ(tokens, one_thread_tokens);
      ASSERT_EQ(logits.size(), one_thread_logits.size());
      for (size_t i = 0; i < logits.size(); ++i)
        ASSERT_EQ(float_bits(logits[i]), float_bits(one_thread_logits[i])) << "logit " << i << ": " << logits[i] << " vs " << one_thread_logits[i];
    }
  }
}

// SessionOptions::kv_cache_dtype = float16 on a tiny float32 GroupQueryAttention folder: the past
// inputs and present outputs become float16 (the generator allocates its cache from them), logits stay
// within float16 rounding of the float32 cache's while the two greedy paths agree, a decode step still
// allocates nothing and updates the cache in place. A folder without GroupQueryAttention (Attention +
// TensorScatter) keeps its float32 cache.
TEST(GenaiGenerator, Float16KvCacheOnARealTinyDecoder) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset (ctest sets it after writing the tiny models)";
  ModelOptions f16;
  f16.session.kv_cache_dtype = DataType::kFloat16;
  // accuracy_level 0: int8 activations (level 4) would turn the cache's rounding into whole
  // quantization steps, hiding what this compares.
  auto plain = Model::create(std::string(root) + "/genai-acc0");
  auto half = Model::create(std::string(root) + "/genai-acc0", f16);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  ASSERT_TRUE(half.ok()) << half.status().to_string();
  EXPECT_EQ((*plain)->kv_dtype(), DataType::kFloat);
  EXPECT_EQ((*half)->kv_dtype(), DataType::kFloat16);
  const int64_t layers = (*half)->config().num_hidden_layers;
  EXPECT_EQ((*half)->session().kv_cache_retyped().size(), static_cast<size_t>(4 * layers)) << "2 pasts + 2 presents per layer";
  for (const auto& v : (*half)->session().inputs()) {
    if (v.name.find("past_key_values") == 0) {
      EXPECT_EQ(v.dtype, DataType::kFloat16) << v.name;
    }
  }
  for (const auto& v : (*half)->session().outputs()) {
    if (v.name.find("present") == 0) {
      EXPECT_EQ(v.dtype, DataType::kFloat16) << v.name;
    }
  }

  GeneratorParams pp(**plain), hp(**half);
  pp.search.max_length = hp.search.max_length = 48;
  auto gp = Generator::create(**plain, pp);
  auto gh = Generator::create(**half, hp);
  ASSERT_TRUE(gp.ok() && gh.ok());
  const std::vector<int64_t> prompt = {5, 17, 3, 99, 42, 7, 8};
  ASSERT_TRUE((*gp)->append_tokens(prompt).ok());
  ASSERT_TRUE((*gh)->append_tokens(prompt).ok());
  int compared = 0;
  for (int step = 0; step < 12; ++step) {
    auto lp = (*gp)->get_logits();
    auto lh = (*gh)->get_logits();
    ASSERT_TRUE(lp.ok() && lh.ok());
    ASSERT_EQ(lp->size(), lh->size());
    double worst = 0, scale = 0;
    for (size_t i = 0; i < lp->size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::abs((*lp)[i] - (*lh)[i])));
      scale = std::max(scale, static_cast<double>(std::abs((*lp)[i])));
    }
    EXPECT_LT(worst, 2e-3 * (1 + scale)) << "step " << step;  // measured: ~3e-3 at scale ~7
    ++compared;
    ASSERT_TRUE((*gp)->generate_next_token().ok());
    ASSERT_TRUE((*gh)->generate_next_token().ok());
    if ((*gp)->get_sequence(0) != (*gh)->get_sequence(0)) break;  // a near tie split the paths
  }
  EXPECT_GE(compared, 2);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE((*gh)->generate_next_token().ok());
  EXPECT_EQ(allocations_over_decode_steps(**gh, 12), 0u) << "heap allocations over 12 float16-cache decode steps";
  EXPECT_STREQ((*gh)->kv_update(), "in-place");

  // Only float16 can be asked for: anything else fails creation, naming the option.
  ModelOptions bad;
  bad.session.kv_cache_dtype = DataType::kInt8;
  auto refused = Model::create(std::string(root) + "/genai-acc0", bad);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("kv_cache_dtype"), std::string::npos) << refused.status().to_string();

  auto other = Model::create(std::string(root) + "/onnx", f16);
  ASSERT_TRUE(other.ok()) << other.status().to_string();
  EXPECT_TRUE((*other)->session().kv_cache_retyped().empty());
  EXPECT_EQ((*other)->kv_dtype(), DataType::kFloat);
}

TEST(GenaiGenerator, GrowingPastAndStopAtEos) {
  std::string d = toy_folder(false, "concat");
  FolderGuard guard{d};
  auto model = Model::create(d);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  GeneratorParams params(**model);
  params.search.max_length = 20;
  auto gen = Generator::create(**model, params);
  ASSERT_TRUE(gen.ok());
  Generator& g = **gen;
  ASSERT_TRUE(g.append_tokens({4, 5}).ok());
  std::vector<int64_t> got;
  for (int i = 0; i < 6; ++i) {
    ASSERT_TRUE(g.generate_next_token().ok());
    got.push_back(g.next_token());
  }
  EXPECT_EQ(got, expected_tokens({4, 5}, 6));
  EXPECT_STREQ(g.kv_update(), "concat");
  ASSERT_TRUE(g.rewind_to(3).ok());
  ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.next_token(), (4 + 5 + 9) % kVocab);

  // Prompt [1, 1] -> 2, an eos id: stops.
  params.search.stop_at_eos = true;
  auto g2 = Generator::create(**model, params);
  ASSERT_TRUE(g2.ok());
  ASSERT_TRUE((*g2)->append_tokens({1, 1}).ok());
  ASSERT_TRUE((*g2)->generate_next_token().ok());
  EXPECT_EQ((*g2)->next_token(), 2);
  EXPECT_TRUE((*g2)->is_done());
}

TEST(GenaiGenerator, ClearErrors) {
  std::string d = toy_folder(true, "errors");
  FolderGuard guard{d};
  // Unknown IO name in the config.
  write_text(d + "/genai_config.json", config_json(true, 64, R"(, "position_ids": "pos")"));
  {
    auto m = Model::create(d);
    ASSERT_TRUE(m.ok());  // position_ids is optional: absent from the graph is fine
  }
  std::string cfg = config_json(true);
  cfg.replace(cfg.find("present.%d.key"), 14, "presents.%d.k");
  write_text(d + "/genai_config.json", cfg);
  auto m2 = Model::create(d);
  ASSERT_FALSE(m2.ok());
  EXPECT_NE(m2.status().message().find("presents.0.k"), std::string::npos);
  // Missing decoder file.
  std::string cfg3 = config_json(true);
  cfg3.replace(cfg3.find("model.onnx"), 10, "gone.onnx");
  write_text(d + "/genai_config.json", cfg3);
  auto m3 = Model::create(d);
  ASSERT_FALSE(m3.ok());
  EXPECT_NE(m3.status().message().find("gone.onnx"), std::string::npos);
  // max_length beyond context_length; token outside the vocabulary.
  write_text(d + "/genai_config.json", config_json(true, 8));
  auto m4 = Model::create(d);
  ASSERT_TRUE(m4.ok());
  GeneratorParams p(**m4);
  p.search.max_length = 9;
  EXPECT_FALSE(Generator::create(**m4, p).ok());
  p.search.max_length = 8;
  auto g = Generator::create(**m4, p);
  ASSERT_TRUE(g.ok());
  EXPECT_FALSE((*g)->append_tokens({16}).ok());
  EXPECT_FALSE((*g)->append_tokens({1, 2, 3, 4, 5, 6, 7, 8, 9}).ok());
  EXPECT_FALSE((*g)->generate_next_token().ok());  // nothing appended yet
}

TEST(GenaiGenerator, FeedsInt32IdsAndPositionIds) {
  std::string d = make_dir("pos");
  FolderGuard guard{d};
  ASSERT_TRUE(onnx::write_model_file(d + "/model.onnx", toy_decoder(true, true)).ok());
  write_text(d + "/genai_config.json", config_json(true));
  auto model = Model::create(d);
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  GeneratorParams params(**model);
  params.search.max_length = 10;
  auto gen = Generator::create(**model, params);
  ASSERT_TRUE(gen.ok());
  Generator& g = **gen;
  ASSERT_TRUE(g.append_tokens({3, 4}).ok());
  std::vector<int64_t> seq = {3, 4};
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(g.generate_next_token().ok());
    int64_t s = static_cast<int64_t>(seq.size()) - 1;  // last position
    for (int64_t t : seq) s += t;
    EXPECT_EQ(g.next_token(), s % kVocab) << "step " << i;
    seq.push_back(s % kVocab);
  }
}

// onnxruntime-genai's own tiny test folders (../shared/models/genai-og) with the results its tests
// (test/model_tests.cpp, test/c_api_tests.cpp) expect.
namespace {
std::string og_folder(const std::string& name) {
  return std::string(NXRT_SOURCE_DIR) + "/../shared/models/genai-og/" + name;
}
bool have_og(const std::string& name) {
  struct stat st {};
  return stat((og_folder(name) + "/genai_config.json").c_str(), &st) == 0;
}
std::vector<int64_t> run_to_end(const Model& model, GeneratorParams params, const std::vector<int64_t>& ids) {
  auto gen = Generator::create(model, params);
  EXPECT_TRUE(gen.ok()) << gen.status().to_string();
  if (!gen.ok()) return {};
  Generator& g = **gen;
  Status st = g.append_tokens(ids);
  EXPECT_TRUE(st.ok()) << st.to_string();
  while (st.ok() && !g.is_done()) {
    st = g.generate_next_token();
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  std::vector<int64_t> all;
  for (size_t i = 0; i < g.num_sequences(); ++i) {
    auto s = g.get_sequence(i);
    all.insert(all.end(), s.begin(), s.end());
  }
  return all;
}
}  // namespace

TEST(GenaiOgFolders, Gpt2GreedyBatchAndBeamSearchMatchOnnxruntimeGenai) {
  if (!have_og("tiny-random-gpt2-fp32")) GTEST_SKIP() << "../shared/models/genai-og not found";
  auto model = Model::create(og_folder("tiny-random-gpt2-fp32"));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  GeneratorParams greedy(**model);
  greedy.search.max_length = 10;
  greedy.search.batch_size = 2;
  greedy.search.stop_at_eos = true;
  EXPECT_EQ(run_to_end(**model, greedy, {0, 0, 0, 52, 0, 0, 195, 731}),
            (std::vector<int64_t>{0, 0, 0, 52, 204, 204, 204, 204, 204, 204,  //
                                  0, 0, 195, 731, 731, 114, 114, 114, 114, 114}));
  GeneratorParams beam(**model);
  beam.search.max_length = 20;
  beam.search.batch_size = 3;
  beam.search.num_beams = 4;
  beam.search.length_penalty = 1.0;
  EXPECT_EQ(run_to_end(**model, beam,
                       {0, 0, 0, 0, 0, 52, 195, 731, 321, 301, 734, 620,  //
                        41, 554, 74, 622, 206, 222, 75, 223, 221, 198, 224, 572,  //
                        0, 0, 0, 52, 328, 219, 328, 206, 288, 227, 896, 328}),
            (std::vector<int64_t>{0, 0, 0, 0, 0, 52, 195, 731, 321, 301, 734, 620, 131, 131, 131, 181, 638, 638, 638, 638,
                                  41, 554, 74, 622, 206, 222, 75, 223, 221, 198, 224, 572, 292, 292, 292, 292, 292, 292, 292, 292,
                                  0, 0, 0, 52, 328, 219, 328, 206, 288, 227, 896, 328, 328, 669, 669, 669, 669, 669, 669, 669}));
}

TEST(GenaiOgFolders, Gpt2RewindAndContinueMatchOnnxruntimeGenai) {
  if (!have_og("tiny-random-gpt2-fp32")) GTEST_SKIP() << "../shared/models/genai-og not found";
  auto model = Model::create(og_folder("tiny-random-gpt2-fp32"));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  // c_api_tests.cpp RewindGptFp32CAPI: rewind to 5 and regenerate; rewind to 3, append 731 731.
  GeneratorParams params(**model);
  params.search.max_length = 10;
  auto gen = Generator::create(**model, params);
  ASSERT_TRUE(gen.ok());
  Generator& g = **gen;
  const std::vector<int64_t> expected = {0, 0, 195, 731, 731, 114, 114, 114, 114, 114};
  ASSERT_TRUE(g.append_tokens({0, 0, 195, 731}).ok());
  while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.get_sequence(0), expected);
  ASSERT_TRUE(g.rewind_to(5).ok());
  while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.get_sequence(0), expected);
  ASSERT_TRUE(g.rewind_to(3).ok());
  ASSERT_TRUE(g.append_tokens({731, 731}).ok());
  while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.get_sequence(0), expected);
  // BatchedRewindGptFp32CAPI: batch 2, rewind to 0 and the same prompt gives the same rows.
  GeneratorParams bp(**model);
  bp.search.max_length = 10;
  bp.search.batch_size = 2;
  auto bg = Generator::create(**model, bp);
  ASSERT_TRUE(bg.ok());
  const std::vector<int64_t> ids = {0, 0, 0, 52, 0, 0, 195, 731};
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE((*bg)->append_tokens(ids).ok());
    while (!(*bg)->is_done()) ASSERT_TRUE((*bg)->generate_next_token().ok());
    EXPECT_EQ((*bg)->get_sequence(0), (std::vector<int64_t>{0, 0, 0, 52, 204, 204, 204, 204, 204, 204}));
    EXPECT_EQ((*bg)->get_sequence(1), (std::vector<int64_t>{0, 0, 195, 731, 731, 114, 114, 114, 114, 114}));
    ASSERT_TRUE((*bg)->rewind_to(0).ok());
    EXPECT_EQ((*bg)->token_count(), 0u);
  }
}

TEST(GenaiOgFolders, Qwen35GqaFloat16ContinuousDecoding) {
  if (!have_og("tiny-qwen35-cuda")) GTEST_SKIP() << "../shared/models/genai-og not found";
  auto model = Model::create(og_folder("tiny-qwen35-cuda"));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_EQ((*model)->kv_dtype(), DataType::kFloat16);
  // model_tests.cpp ContinuousDecodingCudaGraphCapture: rewind to 3, re-append the 4th token: same tokens.
  GeneratorParams params(**model);
  params.search.max_length = 10;
  auto gen = Generator::create(**model, params);
  ASSERT_TRUE(gen.ok());
  Generator& g = **gen;
  ASSERT_TRUE(g.append_tokens({10, 20, 30, 40}).ok());
  while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
  const std::vector<int64_t> first = g.get_sequence(0);
  EXPECT_EQ(first.size(), 10u);
  EXPECT_STREQ(g.kv_update(), "in-place");
  ASSERT_TRUE(g.rewind_to(3).ok());
  ASSERT_TRUE(g.append_tokens({40}).ok());
  while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.get_sequence(0), first);
  // The same rows in a left-padded batch of 2 (rows at their own cache lengths).
  GeneratorParams bp(**model);
  bp.search.max_length = 12;
  bp.search.batch_size = 2;
  const int64_t pad = (*model)->config().pad_token_id;
  std::vector<int64_t> got = run_to_end(**model, bp, {pad, pad, 10, 20, 30, 40, 7, 8, 9, 10, 11, 12});
  ASSERT_EQ(got.size(), 24u);
  EXPECT_EQ(std::vector<int64_t>(got.begin() + 2, got.begin() + 12), first);
}

TEST(GenaiOgFolders, Lfm2HybridCarriesConvStates) {
  if (!have_og("tiny-random-lfm2-fp32")) GTEST_SKIP() << "../shared/models/genai-og not found";
  auto model = Model::create(og_folder("tiny-random-lfm2-fp32"));
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  EXPECT_NE((*model)->cache_layout().find("states"), std::string::npos) << (*model)->cache_layout();
  // c_api_tests.cpp GreedySearchLfm2Fp32CAPI / RewindLfm2Fp32ThrowsCAPI.
  GeneratorParams params(**model);
  params.search.max_length = 10;
  auto gen = Generator::create(**model, params);
  ASSERT_TRUE(gen.ok());
  Generator& g = **gen;
  ASSERT_TRUE(g.append_tokens({0, 0, 195, 731}).ok());
  ASSERT_TRUE(g.generate_next_token().ok());
  Status st = g.rewind_to(2);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("past_conv"), std::string::npos) << st.to_string();
  while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
  const std::vector<int64_t> first = g.get_sequence(0);
  EXPECT_EQ(first.size(), 10u);
  ASSERT_TRUE(g.rewind_to(0).ok());  // the states start over
  ASSERT_TRUE(g.append_tokens({0, 0, 195, 731}).ok());
  while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.get_sequence(0), first);
  // Batch 2 with beams: the states follow their beams.
  GeneratorParams bp(**model);
  bp.search.max_length = 10;
  bp.search.batch_size = 2;
  bp.search.num_beams = 3;
  bp.search.num_return_sequences = 2;
  EXPECT_EQ(run_to_end(**model, bp, {0, 0, 195, 731, 5, 6, 7, 8}).size(), 40u);
}

// ModelOptions::last_position_logits (on by default): the LM head runs over each row's last position
// only. Against the same folder with logits at every position: the same next-token logits after a
// prefill of rows of different lengths (rows at their own lengths with GroupQueryAttention, aligned
// with pads otherwise), and the same tokens to the end.
TEST(GenaiOgFolders, LastPositionLogitsEqualEveryPositionLogits) {
  int checked = 0;
  for (const char* name : {"tiny-random-gpt2-fp32", "tiny-qwen35-cuda", "tiny-random-lfm2-fp32"}) {
    SCOPED_TRACE(name);
    if (!have_og(name)) continue;
    auto last = Model::create(og_folder(name));
    ASSERT_TRUE(last.ok()) << last.status().to_string();
    ModelOptions every_opts;
    every_opts.last_position_logits = false;
    auto every = Model::create(og_folder(name), every_opts);
    ASSERT_TRUE(every.ok()) << every.status().to_string();
    EXPECT_FALSE((*every)->last_position_logits());
    // Listing the logits in the session's options instead comes to the same.
    ModelOptions listed_opts;
    listed_opts.last_position_logits = false;
    listed_opts.session.position_selected_outputs = {(*last)->config().logits};
    auto listed = Model::create(og_folder(name), listed_opts);
    ASSERT_TRUE(listed.ok()) << listed.status().to_string();
    EXPECT_EQ((*listed)->last_position_logits(), (*last)->last_position_logits());
    std::printf("  %s: last_position_logits %s\n", name, (*last)->last_position_logits() ? "on" : "off (fallback)");
    if (!(*last)->last_position_logits()) continue;  // logits that are not a plain projection: nothing to compare
    ++checked;
    const int64_t pad = (*last)->config().pad_token_id >= 0 ? (*last)->config().pad_token_id : 0;
    const std::vector<int64_t> prompt = {pad, pad, 10, 20, 30, 40, 7, 8, 9, 10, 11, 12};
    std::vector<std::vector<float>> logits;
    std::vector<std::vector<int64_t>> tokens;
    for (Model* m : {last->get(), every->get()}) {
      GeneratorParams p(*m);
      p.search.max_length = 12;
      p.search.batch_size = 2;
      auto gen = Generator::create(*m, p);
      ASSERT_TRUE(gen.ok()) << gen.status().to_string();
      ASSERT_TRUE((*gen)->append_tokens(prompt).ok());
      auto l = (*gen)->get_logits();
      ASSERT_TRUE(l.ok()) << l.status().to_string();
      logits.push_back(*l);
      while (!(*gen)->is_done()) ASSERT_TRUE((*gen)->generate_next_token().ok());
      std::vector<int64_t> all = (*gen)->get_sequence(0), row1 = (*gen)->get_sequence(1);
      all.insert(all.end(), row1.begin(), row1.end());
      tokens.push_back(all);
    }
    ASSERT_EQ(logits[0].size(), logits[1].size());
    for (size_t i = 0; i < logits[0].size(); ++i) {
      ASSERT_NEAR(logits[0][i], logits[1][i], 1e-3 * (1 + std::fabs(logits[1][i]))) << "entry " << i;
    }
    EXPECT_EQ(tokens[0], tokens[1]);
  }
  if (checked == 0) GTEST_SKIP() << "no genai-og folder with a projected LM head found";
}

// A toy folder, its model and a generator of `batch` rows (max_length 12); `tune` adjusts the options.
// Members are destroyed generator first, folder last.
struct ToyRun {
  FolderGuard guard;
  std::unique_ptr<Model> model;
  std::unique_ptr<Generator> gen;
};
ToyRun toy_run(bool share, const std::string& tag, int64_t batch,
               const std::function<void(SearchOptions&)>& tune = {}) {
  std::string d = toy_folder(share, tag);
  auto model = Model::create(d);
  EXPECT_TRUE(model.ok()) << model.status().to_string();
  std::unique_ptr<Generator> gen;
  if (model.ok()) {
    GeneratorParams p(**model);
    p.search.max_length = 12;
    p.search.batch_size = batch;
    if (tune) tune(p.search);
    auto g = Generator::create(**model, p);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    if (g.ok()) gen = std::move(g).value();
  }
  return ToyRun{FolderGuard{d}, model.ok() ? std::move(model).value() : nullptr, std::move(gen)};
}

TEST(GenaiGenerator, BatchRowsFollowTheirOwnTokens) {
  for (bool share : {true, false}) {
    SCOPED_TRACE(share ? "shared buffer (rows at their own lengths)" : "growing past (aligned, pads masked)");
    ToyRun t = toy_run(share, share ? "batch_s" : "batch_c", 3);
    ASSERT_TRUE(t.gen);
    Generator& g = *t.gen;
    // pad_token_id 0: left padding
    ASSERT_TRUE(g.append_tokens({1, 2, 3, 0, 4, 5, 0, 0, 7}).ok());
    for (int i = 0; i < 6; ++i) ASSERT_TRUE(g.generate_next_token().ok());
    const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4, 5}, {7}};
    std::vector<std::vector<int64_t>> first(3);
    for (int r = 0; r < 3; ++r) {
      std::vector<int64_t> want = {1, 2, 3, 0, 4, 5, 0, 0, 7};
      want.erase(want.begin(), want.begin() + 3 * r);
      want.resize(3);
      for (int64_t t : expected_tokens(prompts[static_cast<size_t>(r)], 6)) want.push_back(t);
      first[static_cast<size_t>(r)] = g.get_sequence(static_cast<size_t>(r));
      EXPECT_EQ(first[static_cast<size_t>(r)], want) << "row " << r;
    }
    EXPECT_EQ(g.token_count(), 9u);
    EXPECT_EQ(g.get_next_tokens(), (std::vector<int64_t>{first[0][8], first[1][8], first[2][8]}));
    // Rewind every row and regenerate: the same tokens.
    ASSERT_TRUE(g.rewind_to(5).ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(g.generate_next_token().ok());
    for (int r = 0; r < 3; ++r) EXPECT_EQ(g.get_sequence(static_cast<size_t>(r)), first[static_cast<size_t>(r)]);
    // Continue after rewinding: one more token per row.
    ASSERT_TRUE(g.rewind_to(3).ok());
    ASSERT_TRUE(g.append_tokens({1, 1, 1}).ok());
    ASSERT_TRUE(g.generate_next_token().ok());
    EXPECT_EQ(g.get_next_tokens(), (std::vector<int64_t>{(6 + 1) % kVocab, (9 + 1) % kVocab, (7 + 1) % kVocab}));
  }
}

TEST(GenaiGenerator, RowsStopAtEosAndResumeOnAppend) {
  for (bool share : {true, false}) {
    SCOPED_TRACE(share ? "shared buffer" : "growing past");
    ToyRun t = toy_run(share, share ? "eos_s" : "eos_c", 2, [](SearchOptions& o) { o.stop_at_eos = true; });  // eos 2, 9
    ASSERT_TRUE(t.gen);
    Generator& g = *t.gen;
    ASSERT_TRUE(g.append_tokens({1, 1, 3, 4}).ok());
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(g.generate_next_token().ok());
    // Row 0: 1+1 = 2 is EOS, then pad_token_id; row 1 goes on.
    EXPECT_EQ(g.get_sequence(0), (std::vector<int64_t>{1, 1, 2, 0, 0, 0}));
    EXPECT_EQ(g.get_sequence(1), (std::vector<int64_t>{3, 4, 7, 14, 12, 8}));
    EXPECT_TRUE(g.row_done(0));
    EXPECT_FALSE(g.row_done(1));
    EXPECT_FALSE(g.is_done());
    // Appending resumes the finished row; its padding is not part of its context.
    ASSERT_TRUE(g.append_tokens({5, 6}).ok());
    EXPECT_FALSE(g.row_done(0));
    ASSERT_TRUE(g.generate_next_token().ok());
    EXPECT_EQ(g.get_next_tokens(), (std::vector<int64_t>{(1 + 1 + 2 + 5) % kVocab, (3 + 4 + 7 + 14 + 12 + 8 + 6) % kVocab}));
    EXPECT_TRUE(g.row_done(0));  // 9 is an EOS id too
  }
}

TEST(GenaiGenerator, SetLogitsStandsInForTheModel) {
  ToyRun t = toy_run(true, "setlogits", 2);
  ASSERT_TRUE(t.gen);
  Generator& g = *t.gen;
  ASSERT_TRUE(g.append_tokens({1, 2, 0, 3}).ok());
  auto lg = g.get_logits();
  ASSERT_TRUE(lg.ok());
  ASSERT_EQ(lg->size(), 2u * kVocab);
  EXPECT_EQ(argmax_first(lg->data(), kVocab), 3);
  EXPECT_EQ(argmax_first(lg->data() + kVocab, kVocab), 3);
  std::vector<float> edited(2 * kVocab, -1.f);
  edited[5] = 1.f;
  edited[kVocab + 11] = 1.f;
  ASSERT_TRUE(g.set_logits(edited).ok());
  ASSERT_TRUE(g.generate_next_token().ok());
  EXPECT_EQ(g.get_next_tokens(), (std::vector<int64_t>{5, 11}));
  ASSERT_TRUE(g.generate_next_token().ok());  // the model sees the chosen tokens
  EXPECT_EQ(g.get_next_tokens(), (std::vector<int64_t>{(1 + 2 + 5) % kVocab, (3 + 11) % kVocab}));
  EXPECT_FALSE(g.set_logits(std::vector<float>(3, 0.f)).ok());
}

TEST(GenaiGenerator, BeamSearchCachesFollowTheirBeams) {
  // The same beam search over a shared buffer (rows copied in place) and a growing past.
  std::vector<std::vector<int64_t>> results;
  for (bool share : {true, false}) {
    ToyRun t = toy_run(share, share ? "beam_s" : "beam_c", 2, [](SearchOptions& o) {
      o.max_length = 10;
      o.num_beams = 3;
      o.num_return_sequences = 2;
      o.early_stopping = false;
    });
    ASSERT_TRUE(t.gen);
    Generator& g = *t.gen;
    ASSERT_TRUE(g.append_tokens({1, 3, 0, 4}).ok());
    EXPECT_EQ(g.get_next_tokens().size(), 6u);  // batch_size * num_beams rows
    while (!g.is_done()) ASSERT_TRUE(g.generate_next_token().ok());
    EXPECT_GT(g.stats().rows_reordered, 0);
    ASSERT_EQ(g.num_sequences(), 4u);
    std::vector<int64_t> all;
    for (size_t i = 0; i < 4; ++i) {
      auto s = g.get_sequence(i);
      EXPECT_FALSE(s.empty());
      all.insert(all.end(), s.begin(), s.end());
    }
    results.push_back(all);
    EXPECT_FALSE(g.rewind_to(2).ok());
    ASSERT_TRUE(g.rewind_to(0).ok());
    EXPECT_FALSE(g.append_tokens({1, 3}).ok() && g.append_tokens({1, 3}).ok());  // one append per search
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(GenaiGenerator, BatchErrorsNameTheProblem) {
  ToyRun t = toy_run(false, "batcherr", 2);
  ASSERT_TRUE(t.gen);
  const Model& model = *t.model;
  Status odd = t.gen->append_tokens({1, 2, 3});
  ASSERT_FALSE(odd.ok());
  EXPECT_NE(odd.message().find("batch_size 2"), std::string::npos) << odd.to_string();
  Status pads = t.gen->append_tokens({1, 2, 0, 0});
  ASSERT_FALSE(pads.ok());
  EXPECT_NE(pads.message().find("row 1"), std::string::npos) << pads.to_string();
  // A growing-past graph cannot share its buffer.
  GeneratorParams shared(model);
  shared.search.past_present_share_buffer = true;
  auto bad = Generator::create(model, shared);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("past_present_share_buffer"), std::string::npos);
  GeneratorParams beams(model);
  beams.search.num_beams = 2;
  beams.search.num_return_sequences = 3;
  EXPECT_FALSE(Generator::create(model, beams).ok());
  beams.search.num_return_sequences = 1;
  beams.search.do_sample = true;
  EXPECT_FALSE(Generator::create(model, beams).ok());
  GeneratorParams named(model);
  EXPECT_TRUE(named.set_search_option("num_beams", 4).ok());
  EXPECT_EQ(named.search.num_beams, 4);
  EXPECT_FALSE(named.set_search_option("num_beams", 1.5).ok());
  EXPECT_FALSE(named.set_search_option("top_q", 1).ok());
  EXPECT_FALSE(named.set_search_option("do_sample", 1).ok());
  EXPECT_TRUE(named.set_search_option_bool("early_stopping", false).ok());
  EXPECT_FALSE(named.search.early_stopping);
}

TEST(GenaiGenerator, MinLengthAndNoRepeatNgramPerRow) {
  ToyRun t = toy_run(true, "procs", 2, [](SearchOptions& o) {
    o.stop_at_eos = true;
    o.min_length = 5;            // no EOS (2, 9) before 5 tokens
    o.no_repeat_ngram_size = 2;  // row 0: 1 1 may not be followed by 1 again
  });
  ASSERT_TRUE(t.gen);
  Generator& g = *t.gen;
  ASSERT_TRUE(g.append_tokens({1, 1, 3, 4}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(g.generate_next_token().ok());
  // Row 0 wants 2 (EOS, suppressed), then the nearest ids 1 (banned: "1 1" exists) and 3.
  EXPECT_EQ(g.get_sequence(0), (std::vector<int64_t>{1, 1, 3, 5, 10}));
  EXPECT_EQ(g.get_sequence(1), (std::vector<int64_t>{3, 4, 7, 14, 12}));
  EXPECT_EQ(g.search_options().min_length, 5);
}
