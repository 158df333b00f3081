// The sibling pointwise-conv pass (src/optimizer/fusions/fuse_sibling_pointwise_conv.cpp): 1x1 convs
// reading one X become one conv over stacked weights and a Split, with the unfused graph's outputs
// (level disabled), at Split's attribute (opset < 13) and input (13+) forms; the convs it must not
// stack are left alone.
#include <gtest/gtest.h>

#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;

namespace {

struct ConvSpec {
  std::string name;
  int64_t M = 8;
  int64_t k = 1;        // kernel size
  int64_t stride = 1;
  bool bias = true;
  std::string act;  // "" or an activation op after the conv (fused into nxrt::FusedConv at level all)
};

// x [1, 6, 5, 7] (or batch 2) -> Relu -> r; each conv reads r, writes <name> (a graph output), and a
// Concat of all of them is an output too (so a stacked output also feeds a Concat).
ModelBuilder build(int64_t opset, const std::vector<ConvSpec>& convs, int64_t batch = 1) {
  ModelBuilder b(opset);
  b.input("x", {batch, 6, 5, 7});
  b.node("Relu", {"x"}, {"r"});
  uint32_t seed = 3;
  std::vector<std::string> outs;
  for (const ConvSpec& c : convs) {
    b.init(c.name + "_W", random_tensor({c.M, 6, c.k, c.k}, seed++));
    std::vector<std::string> in = {"r", c.name + "_W"};
    if (c.bias) {
      b.init(c.name + "_B", random_tensor({c.M}, seed++));
      in.push_back(c.name + "_B");
    }
    std::vector<ir::Attribute> attrs = {A_is("strides", {c.stride, c.stride})};
    if (c.k > 1) attrs.push_back(A_is("pads", {c.k / 2, c.k / 2, c.k / 2, c.k / 2}));
    if (c.act.empty()) {
      b.node("Conv", in, {c.name}, attrs);
    } else {
      b.node("Conv", in, {c.name + "_pre"}, attrs);
      b.node(c.act, {c.name + "_pre"}, {c.name});
    }
    b.output(c.name);
    if (c.stride == 1) outs.push_back(c.name);
  }
  b.node("Concat", outs, {"cat"}, {A_i("axis", 1)});
  b.output("cat");
  return b;
}

int stacked(const ir::Model& m) {
  optimizer::Stats st;
  optimized(m, OptLevel::kAll, &st);
  return st.counts.count("fused_sibling_pointwise_conv") ? st.counts.at("fused_sibling_pointwise_conv") : 0;
}

}  // namespace

TEST(SiblingPointwiseConvFusion, StackedAtEitherSplitForm) {
  for (int64_t opset : {9, 13, 18}) {
    SCOPED_TRACE("opset " + std::to_string(opset));
    const ModelBuilder b = build(opset, {{"a", 8}, {"b", 5, 1, 1, false}, {"c", 16}});
    EXPECT_EQ(stacked(b.m), 1);
    const ir::Model o = optimized(b.m, OptLevel::kAll);
    EXPECT_EQ(count_op(o, "Split"), 1);
    int convs = 0;
    for (const auto& n : o.graph.nodes) convs += n.op_type == "Conv" || n.op_type == "FusedConv";
    EXPECT_EQ(convs, 1);
    expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 6, 5, 7}, 41))}});
  }
  // Batch 2: the Split copies instead of handing out views; the same values.
  const ModelBuilder b2 = build(13, {{"a", 8}, {"b", 5}}, 2);
  EXPECT_EQ(stacked(b2.m), 1);
  expect_same_numerics(b2.m, {{"x", Value(random_tensor({2, 6, 5, 7}, 43))}});
}

TEST(SiblingPointwiseConvFusion, LeavesOtherConvsAlone) {
  // A 3x3 sibling and a stride-2 1x1 stay as they are; the two plain 1x1 convs are stacked.
  const ModelBuilder b = build(13, {{"p", 8}, {"k3", 8, 3}, {"s2", 8, 1, 2}, {"q", 4}});
  EXPECT_EQ(stacked(b.m), 1);
  const ir::Model o = optimized(b.m, OptLevel::kAll);
  int convs = 0;
  for (const auto& n : o.graph.nodes) convs += n.op_type == "Conv" || n.op_type == "FusedConv";
  EXPECT_EQ(convs, 3);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 6, 5, 7}, 47))}});
  // FusedConv siblings stack when their activations agree: the two Relu ones here, not the Sigmoid one.
  const ModelBuilder f = build(13, {{"r1", 8, 1, 1, true, "Relu"}, {"sg", 8, 1, 1, true, "Sigmoid"}, {"r2", 4, 1, 1, true, "Relu"}});
  EXPECT_EQ(stacked(f.m), 1);
  EXPECT_EQ(count_op(optimized(f.m, OptLevel::kAll), "FusedConv"), 2);
  expect_same_numerics(f.m, {{"x", Value(random_tensor({1, 6, 5, 7}, 53))}});
  // One 1x1 conv alone: nothing to stack.
  EXPECT_EQ(stacked(build(13, {{"p", 8}, {"k3", 8, 3}}).m), 0);
}
