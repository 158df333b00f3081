// The sibling MatMulNBits pass (src/optimizer/fusions/fuse_sibling_matmulnbits.cpp): MatMulNBits nodes
// reading one A become one nxrt::MatMulNBitsSplit whose outputs are theirs, with the same values as the
// unfused graph (level disabled), and the groups it must not stack are left alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;

namespace {

constexpr int64_t kK = 96, kBlock = 32, kKb = kK / kBlock;

struct Sibling {
  std::string name;
  int64_t N = 32;
  int64_t accuracy = 4;
  bool zero_points = false;
  bool bias = false;
  int64_t block = kBlock;
};

// a [2, 3, K] -> Relu -> r; each sibling MatMulNBits(r, ...) -> <name>, every one a graph output.
ModelBuilder build(const std::vector<Sibling>& sibs, uint32_t seed = 5) {
  ModelBuilder b(21);
  b.m.opset_imports.push_back({"com.microsoft", 1});
  b.input("a", {2, 3, kK});
  b.node("Relu", {"a"}, {"r"});
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const Sibling& s : sibs) {
    const int64_t kb = (kK + s.block - 1) / s.block;
    Tensor B(DataType::kUInt8, {s.N, kb, s.block / 2});
    for (int64_t i = 0; i < B.numel(); ++i) B.data<uint8_t>()[i] = static_cast<uint8_t>(byte(rng));
    b.init(s.name + "_B", B);
    b.init(s.name + "_S", random_tensor({s.N * kb}, seed + 1, 0.01f, 0.1f));
    std::vector<std::string> in = {"r", s.name + "_B", s.name + "_S"};
    if (s.zero_points || s.bias) {
      if (s.zero_points) {
        Tensor Z(DataType::kUInt8, {s.N * ((kb * 4 + 7) / 8)});
        for (int64_t i = 0; i < Z.numel(); ++i) Z.data<uint8_t>()[i] = static_cast<uint8_t>(byte(rng));
        b.init(s.name + "_Z", Z);
        in.push_back(s.name + "_Z");
      } else {
        in.push_back("");
      }
    }
    if (s.bias) {
      in.push_back("");
      b.init(s.name + "_bias", random_tensor({s.N}, seed + 2));
      in.push_back(s.name + "_bias");
    }
    ir::Node& n = b.node("MatMulNBits", in, {s.name},
                         {A_i("K", kK), A_i("N", s.N), A_i("bits", 4), A_i("block_size", s.block),
                          A_i("accuracy_level", s.accuracy)});
    n.domain = "com.microsoft";
    b.output(s.name);
    ++seed;
  }
  return b;
}

int stacked_groups(const ir::Model& m) {
  optimizer::Stats st;
  optimized(m, OptLevel::kAll, &st);
  return st.counts.count("fused_sibling_matmulnbits") ? st.counts.at("fused_sibling_matmulnbits") : 0;
}

// The optimized model's outputs equal the unfused ones exactly: each column comes from the same
// packed weights, the same quantized A and the same tile.
void expect_same_outputs(const ir::Model& m) {
  const Tensor a = random_tensor({2, 3, kK}, 17);
  auto ref = run_at(m, OptLevel::kDisabled, {{"a", Value(a)}});
  auto got = run_at(m, OptLevel::kAll, {{"a", Value(a)}});
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].shape(), got[k].shape()) << "output " << k;
    for (int64_t i = 0; i < ref[k].numel(); ++i)
      ASSERT_EQ(ref[k].data<float>()[i], got[k].data<float>()[i]) << "output " << k << " element " << i;
  }
}

}  // namespace

TEST(SiblingMatMulNBitsFusion, QkvBecomesOneSplitNode) {
  const ModelBuilder b = build({{"q", 64}, {"k", 32}, {"v", 40}});
  EXPECT_EQ(stacked_groups(b.m), 1);
  const ir::Model o = optimized(b.m, OptLevel::kAll);
  ASSERT_EQ(count_op(o, "MatMulNBitsSplit"), 1);
  EXPECT_EQ(count_op(o, "MatMulNBits"), 0);
  for (const auto& n : o.graph.nodes) {
    if (n.op_type != "MatMulNBitsSplit") continue;
    EXPECT_EQ(n.outputs, (std::vector<std::string>{"q", "k", "v"}));
    EXPECT_EQ(n.find_attribute("N")->i, 136);
    EXPECT_EQ(n.find_attribute("splits")->ints, (std::vector<int64_t>{64, 32, 40}));
  }
  expect_same_outputs(b.m);
}

// q/k/v biases (Qwen): a float32 [N] Add that alone reads a sibling's product goes into the stacked
// node, which then writes the Add's output; the sums are the unfused graph's, bit for bit.
TEST(SiblingMatMulNBitsFusion, BiasAddsAreTakenIn) {
  ModelBuilder b = build({{"q", 64}, {"k", 32}, {"v", 40}});
  // q and v get a bias Add (v with the bias first); k's product is read by its own Add and by a Relu.
  for (const char* y : {"q", "k", "v"}) {
    b.m.graph.outputs.erase(std::remove_if(b.m.graph.outputs.begin(), b.m.graph.outputs.end(),
                                           [&](const ir::ValueInfo& v) { return v.name == y; }),
                            b.m.graph.outputs.end());
  }
  b.init("bq", random_tensor({64}, 31));
  b.init("bk", random_tensor({32}, 32));
  b.init("bv", random_tensor({40}, 33));
  b.node("Add", {"q", "bq"}, {"q_sum"});
  b.node("Add", {"k", "bk"}, {"k_sum"});
  b.node("Relu", {"k"}, {"k_relu"});
  b.node("Add", {"bv", "v"}, {"v_sum"});
  for (const char* y : {"q_sum", "k_sum", "k_relu", "v_sum"}) b.output(y);
  EXPECT_EQ(stacked_groups(b.m), 1);
  const ir::Model o = optimized(b.m, OptLevel::kAll);
  EXPECT_EQ(count_op(o, "Add"), 1);  // k's
  for (const auto& n : o.graph.nodes) {
    if (n.op_type != "MatMulNBitsSplit") continue;
    EXPECT_EQ(n.outputs, (std::vector<std::string>{"q_sum", "k", "v_sum"}));
    ASSERT_EQ(n.inputs.size(), 1u + 3 * 3 + 3);
    EXPECT_EQ(std::vector<std::string>(n.inputs.end() - 3, n.inputs.end()), (std::vector<std::string>{"bq", "", "bv"}));
  }
  expect_same_outputs(b.m);
  // A bias of another shape ([1, 64]) is left to its Add.
  ModelBuilder c = build({{"q", 64}, {"k", 32}});
  c.m.graph.outputs.erase(c.m.graph.outputs.begin());
  c.init("bq", random_tensor({1, 64}, 34));
  c.node("Add", {"q", "bq"}, {"q_sum"});
  c.output("q_sum");
  EXPECT_EQ(count_op(optimized(c.m, OptLevel::kAll), "Add"), 1);
  expect_same_outputs(c.m);
}

TEST(SiblingMatMulNBitsFusion, ZeroPointsAreStackedToo) {
  const ModelBuilder b = build({{"gate", 96, 4, true}, {"up", 64, 4, true}});
  EXPECT_EQ(stacked_groups(b.m), 1);
  expect_same_outputs(b.m);
}

TEST(SiblingMatMulNBitsFusion, LeavesWhatItCannotStack) {
  // Another accuracy level (the float path), a bias, another block size, zero points on one only:
  // each stays a MatMulNBits of its own; the two compatible ones are stacked.
  ModelBuilder b = build({{"a4", 32}, {"a0", 32, 0}, {"biased", 32, 4, false, true}, {"b64", 32, 4, false, false, 64},
                          {"zp", 32, 4, true}, {"b4", 64}});
  EXPECT_EQ(stacked_groups(b.m), 1);
  const ir::Model o = optimized(b.m, OptLevel::kAll);
  EXPECT_EQ(count_op(o, "MatMulNBitsSplit"), 1);
  EXPECT_EQ(count_op(o, "MatMulNBits"), 4);
  expect_same_outputs(b.m);
  // An output off the 32-column grid ends a group: nothing follows it.
  EXPECT_EQ(stacked_groups(build({{"x", 40}, {"y", 32}}).m), 0);
  EXPECT_EQ(stacked_groups(build({{"x", 64}, {"y", 40}, {"z", 32}}).m), 1);
  // Weights given at run time (a graph input) are not constants.
  ModelBuilder g = build({{"x", 32}, {"y", 32}});
  g.m.graph.initializers.erase("y_B");
  ir::ValueInfo w = ModelBuilder::vi("y_B", {32, kKb, 16});
  w.type.elem_type = DataType::kUInt8;
  g.m.graph.inputs.push_back(w);
  EXPECT_EQ(stacked_groups(g.m), 0);
}

TEST(SiblingMatMulNBitsFusion, AtMostEightOutputsAGroup) {
  std::vector<Sibling> sibs;
  for (int i = 0; i < 10; ++i) sibs.push_back({"s" + std::to_string(i), 32});
  const ModelBuilder b = build(sibs);
  const ir::Model o = optimized(b.m, OptLevel::kAll);
  EXPECT_EQ(count_op(o, "MatMulNBitsSplit"), 2);  // 8 + 2
  EXPECT_EQ(count_op(o, "MatMulNBits"), 0);
  expect_same_outputs(b.m);
}
