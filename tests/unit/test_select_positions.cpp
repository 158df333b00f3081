// SessionOptions::position_selected_outputs and the nxrt::SelectPositions kernel it inserts: the kernel
// against GatherND(batch_dims=1) on random shapes, the rewritten session against the full output at each
// optimization level, and the refusals, each naming where the walk back from the output stopped.
#include <gtest/gtest.h>

#include <random>

#include "kernel_test_util.h"
#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;

namespace {

Tensor I64(Dims shape, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(DataType::kInt64, std::move(shape), v); }

Result<std::vector<Value>> run_op(const std::string& op, const std::string& domain, std::vector<Value> inputs,
                                  std::vector<ir::Attribute> attrs = {}) {
  nxrt::testing::KernelRun r;
  r.op_type = op;
  r.domain = domain;
  r.opset = domain.empty() ? 21 : 1;
  r.inputs = std::move(inputs);
  r.attributes = std::move(attrs);
  return nxrt::testing::run_kernel(r);
}

}  // namespace

TEST(SelectPositions, KernelEqualsGatherNDWithBatchDimsOnRandomShapes) {
  std::mt19937 rng(7);
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    const int64_t batch = pick(1, 3), seq = pick(1, 9), k = pick(1, 4);
    Dims xs{batch, seq};
    for (int extra = pick(0, 2); extra > 0; --extra) xs.push_back(pick(1, 7));
    Tensor x = random_tensor(xs, static_cast<uint32_t>(trial));
    std::vector<int64_t> pos(static_cast<size_t>(batch * k));
    for (auto& p : pos) p = pick(static_cast<int>(-seq), static_cast<int>(seq - 1));
    auto got = run_op("SelectPositions", "nxrt", {Value(x), Value(I64({batch, k}, pos))});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto want = run_op("GatherND", "", {Value(x), Value(I64({batch, k, 1}, pos))}, {nxrt::testing::attr_int("batch_dims", 1)});
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const Tensor& g = got.value()[0].tensor();
    const Tensor& w = want.value()[0].tensor();
    ASSERT_EQ(g.shape(), w.shape()) << "trial " << trial;
    for (int64_t i = 0; i < w.numel(); ++i) ASSERT_EQ(g.data<float>()[i], w.data<float>()[i]) << "trial " << trial;
  }
}

TEST(SelectPositions, KernelErrorsNameThePosition) {
  Tensor x = random_tensor({2, 3, 4}, 1);
  auto out_of_range = run_op("SelectPositions", "nxrt", {Value(x), Value(I64({2, 2}, {0, 1, 2, 3}))});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.status().message().find("positions[1, 1] = 3"), std::string::npos) << out_of_range.status().message();
  auto batch = run_op("SelectPositions", "nxrt", {Value(x), Value(I64({1, 1}, {0}))});
  ASSERT_FALSE(batch.ok());
  EXPECT_NE(batch.status().message().find("batch 2"), std::string::npos) << batch.status().message();
  auto rank1 = run_op("SelectPositions", "nxrt", {Value(random_tensor({5}, 2)), Value(I64({1, 1}, {0}))});
  ASSERT_FALSE(rank1.ok());
  EXPECT_NE(rank1.status().message().find("rank >= 2"), std::string::npos) << rank1.status().message();
}

namespace {

constexpr int64_t kHidden = 8, kVocab = 12;

// hidden = x * 0.5 -> logits = Tanh(MatMul(hidden, W) + bias) * 3 (a soft-capped LM head).
ModelBuilder lm_head_model() {
  ModelBuilder b(17);
  ir::ValueInfo x = ModelBuilder::vi("x", {});
  x.type.dims = {ir::Dim::named("batch"), ir::Dim::named("seq"), ir::Dim::fixed(kHidden)};
  b.m.graph.inputs.push_back(x);
  b.init("half", scalar_f(0.5f));
  b.init("W", random_tensor({kHidden, kVocab}, 3));
  b.init("bias", random_tensor({kVocab}, 4));
  b.init("cap", scalar_f(3.f));
  b.node("Mul", {"x", "half"}, {"hidden"});
  b.node("MatMul", {"hidden", "W"}, {"mm"});
  b.node("Add", {"mm", "bias"}, {"biased"});
  b.node("Tanh", {"biased"}, {"capped"});
  b.node("Mul", {"capped", "cap"}, {"logits"});
  ir::ValueInfo out = ModelBuilder::vi("logits", {});
  out.type.dims = {ir::Dim::named("batch"), ir::Dim::named("seq"), ir::Dim::fixed(kVocab)};
  b.m.graph.outputs.push_back(out);
  return b;
}

Result<std::unique_ptr<Session>> session_of(const ir::Model& m, OptLevel level, std::vector<std::string> selected,
                                            bool optional = false) {
  const std::string bytes = onnx::serialize_model(m);
  SessionOptions so;
  so.opt_level = level;
  so.position_selected_outputs = std::move(selected);
  so.position_selection_optional = optional;
  return Session::create_from_bytes(bytes.data(), bytes.size(), so);
}

}  // namespace

TEST(SelectPositions, SessionOutputsTheAskedPositionsOfTheFullOutput) {
  const ir::Model m = lm_head_model().m;
  const int64_t batch = 2, seq = 5;
  Tensor x = random_tensor({batch, seq, kHidden}, 9);
  auto full_session = session_of(m, OptLevel::kDisabled, {});
  ASSERT_TRUE(full_session.ok()) << full_session.status().to_string();
  auto full = (*full_session)->run({{"x", Value(x)}});
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  const Tensor& f = (*full)[0].tensor();
  for (OptLevel level : {OptLevel::kDisabled, OptLevel::kBasic, OptLevel::kAll}) {
    SCOPED_TRACE(static_cast<int>(level));
    auto s = session_of(m, level, {"logits"});
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ((*s)->position_selected_outputs(), std::vector<std::string>{"logits"});
    // The new input, declared int64 [batch, logits_positions].
    const ValueMeta* in = nullptr;
    for (const auto& v : (*s)->inputs()) in = v.name == "logits_positions" ? &v : in;
    ASSERT_NE(in, nullptr);
    EXPECT_EQ(in->dtype, DataType::kInt64);
    EXPECT_EQ(in->shape.size(), 2u);
    // Row 0 asks for its last and first positions, row 1 for positions 2 and -2 (= 3).
    const std::vector<int64_t> pos = {-1, 0, 2, -2};
    auto out = (*s)->run({{"x", Value(x)}, {"logits_positions", Value(I64({batch, 2}, pos))}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& o = (*out)[0].tensor();
    ASSERT_EQ(o.shape(), (Dims{batch, 2, kVocab}));
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t j = 0; j < 2; ++j) {
        int64_t p = pos[static_cast<size_t>(b * 2 + j)];
        if (p < 0) p += seq;
        for (int64_t v = 0; v < kVocab; ++v) {
          const float want = f.data<float>()[(b * seq + p) * kVocab + v];
          EXPECT_NEAR(o.data<float>()[(b * 2 + j) * kVocab + v], want, 1e-5f * (1 + std::fabs(want)))
              << "row " << b << " position " << p << " entry " << v;
        }
      }
    }
    // A position outside the sequence is an error naming it, not a read past the hidden state.
    auto bad = (*s)->run({{"x", Value(x)}, {"logits_positions", Value(I64({batch, 1}, {0, seq}))}});
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("positions[1, 0] = 5"), std::string::npos) << bad.status().message();
  }
}

TEST(SelectPositions, RefusesOutputsThatAreNotPerPositionProjections) {
  auto refused = [](const ir::Model& m, const std::vector<std::string>& names, StatusCode code, const std::string& says) {
    auto s = session_of(m, OptLevel::kAll, names);
    ASSERT_FALSE(s.ok()) << says;
    EXPECT_EQ(s.status().code(), code) << s.status().to_string();
    EXPECT_NE(s.status().message().find(says), std::string::npos) << s.status().message();
    EXPECT_NE(s.status().message().find("position_selected_outputs"), std::string::npos) << s.status().message();
    // Optional (what genai asks for): the session is made with the output at every position, and says
    // it rewrote nothing.
    auto kept = session_of(m, OptLevel::kAll, names, true);
    ASSERT_TRUE(kept.ok()) << says << ": " << kept.status().to_string();
    EXPECT_TRUE((*kept)->position_selected_outputs().empty()) << says;
    size_t position_inputs = 0;
    for (const auto& v : (*kept)->inputs()) position_inputs += v.name == "logits_positions";
    size_t model_position_inputs = 0;
    for (const auto& v : m.graph.inputs) model_position_inputs += v.name == "logits_positions";
    EXPECT_EQ(position_inputs, model_position_inputs) << says;
  };
  refused(lm_head_model().m, {"nope"}, StatusCode::kInvalidArgument, "no such output");
  {
    // Softmax over the sequence axis mixes positions.
    ModelBuilder b = lm_head_model();
    b.m.graph.nodes.back().outputs = {"pre"};
    b.node("Softmax", {"pre"}, {"logits"}, {A_i("axis", 1)});
    refused(b.m, {"logits"}, StatusCode::kNotImplemented, "Softmax");
  }
  {
    // Another output is computed from it: that one would change shape too.
    ModelBuilder b = lm_head_model();
    b.node("Softmax", {"logits"}, {"probs"}, {A_i("axis", -1)});
    b.output("probs");
    refused(b.m, {"logits"}, StatusCode::kNotImplemented, "nodes of the graph read it too");
  }
  {
    // The matmul's output is an output too: its positions cannot be dropped.
    ModelBuilder b = lm_head_model();
    b.output("mm");
    refused(b.m, {"logits"}, StatusCode::kNotImplemented, "'mm' is read elsewhere");
  }
  {
    // A bias that varies along the sequence (a graph input) is not a constant.
    ModelBuilder b = lm_head_model();
    b.m.graph.initializers.erase("bias");
    ir::ValueInfo bias = ModelBuilder::vi("bias", {});
    bias.type.dims = {ir::Dim::named("batch"), ir::Dim::named("seq"), ir::Dim::fixed(kVocab)};
    b.m.graph.inputs.push_back(bias);
    refused(b.m, {"logits"}, StatusCode::kNotImplemented, "vary along the sequence");
  }
  {
    // A constant with a sequence axis of its own.
    ModelBuilder b = lm_head_model();
    b.init("bias", random_tensor({1, 5, kVocab}, 4));
    refused(b.m, {"logits"}, StatusCode::kNotImplemented, "vary along the sequence");
  }
  {
    // The name of the new input is taken.
    ModelBuilder b = lm_head_model();
    b.input("logits_positions", {1});
    refused(b.m, {"logits"}, StatusCode::kInvalidArgument, "already has a value named 'logits_positions'");
  }
}
