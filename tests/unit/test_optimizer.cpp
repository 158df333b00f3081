// The graph optimizer: each pass on a small model (pattern rewritten, pattern refused when a
// precondition fails) and the optimized model's outputs against the unoptimized ones on random data.
#include <gtest/gtest.h>

#include <cmath>

#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;


TEST(Optimizer, DisabledLeavesTheGraphAlone) {
  ModelBuilder b(17);
  b.input("x", {2, 3});
  b.node("Identity", {"x"}, {"i"});
  b.node("Relu", {"i"}, {"y"});
  b.output("y");
  EXPECT_EQ(ops_of(optimized(b.m, OptLevel::kDisabled)), (std::vector<std::string>{"Identity", "Relu"}));
}

TEST(OptimizerConstFold, FoldsConstantOfShapeWeightsAndConstants) {
  ModelBuilder b(17);
  b.input("x", {2, 3});
  b.init("shape", ints({3}));
  b.node("ConstantOfShape", {"shape"}, {"w"}, {A_t("value", Tensor::from_vector<float>(DataType::kFloat, {1}, {0.5f}))});
  b.node("Constant", {}, {"c"}, {A_t("value", Tensor::from_vector<float>(DataType::kFloat, {3}, {1, 2, 3}))});
  b.node("Mul", {"w", "c"}, {"wc"});
  b.node("Add", {"x", "wc"}, {"y"});
  b.output("y");
  optimizer::Stats st;
  ir::Model o = optimized(b.m, OptLevel::kBasic, &st);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Add"}));
  ASSERT_TRUE(o.graph.initializers.count("wc"));
  EXPECT_FLOAT_EQ(o.graph.initializers.at("wc").data<float>()[2], 1.5f);
  EXPECT_FALSE(o.graph.initializers.count("shape"));  // no longer read
  EXPECT_EQ(st.counts["constant_to_initializer"], 1);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 3}, 1))}});
}

TEST(OptimizerConstFold, RefusesRandomOpsOverridableInitializersAndGraphOutputs) {
  ModelBuilder b(17);
  b.input("x", {2, 3});
  b.input("k", {3});  // an input with an initializer default: the caller may override it
  b.init("k", Tensor::from_vector<float>(DataType::kFloat, {3}, {1, 1, 1}));
  b.node("RandomNormal", {}, {"r"}, {A_is("shape", {3})});
  b.node("Neg", {"k"}, {"nk"});
  b.node("Add", {"x", "nk"}, {"s"});
  b.node("Add", {"s", "r"}, {"y"});
  b.init("c", Tensor::from_vector<float>(DataType::kFloat, {1}, {2}));
  b.node("Neg", {"c"}, {"y2"});  // produces a graph output: stays a node
  b.output("y");
  b.output("y2");
  ir::Model o = optimized(b.m, OptLevel::kAll);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"RandomNormal", "Neg", "Add", "Add", "Neg"}));
}

TEST(OptimizerConstFold, RespectsTheSizeBound) {
  ModelBuilder b(17);
  b.input("x", {1});
  b.init("shape", ints({4, 1024}));
  b.node("ConstantOfShape", {"shape"}, {"w"});
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y");
  ir::Model copy = b.m;
  optimizer::Options o;
  o.registry = ops::cpu_provider_registry().get();
  o.level = OptLevel::kBasic;
  o.max_constant_of_shape_bytes = 1024;
  ASSERT_TRUE(optimizer::optimize(copy, o).ok());
  EXPECT_EQ(ops_of(copy), (std::vector<std::string>{"ConstantOfShape", "Add"}));
  o.max_constant_of_shape_bytes = 1 << 20;
  ASSERT_TRUE(optimizer::optimize(copy, o).ok());
  EXPECT_EQ(ops_of(copy), (std::vector<std::string>{"Add"}));
}

TEST(OptimizerIdentity, RemovesIdentityAndInferenceDropoutButNotGraphOutputs) {
  ModelBuilder b(13);
  b.input("x", {2, 3});
  b.node("Identity", {"x"}, {"a"});
  b.node("Dropout", {"a"}, {"d"});
  b.node("Relu", {"d"}, {"r"});
  b.node("Identity", {"r"}, {"y"});  // graph output: kept
  b.node("Dropout", {"r"}, {"y2", "mask"});  // mask is a graph output: kept
  b.output("y");
  b.output("y2");
  b.output("mask");
  ir::Model o = optimized(b.m, OptLevel::kBasic);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Relu", "Identity", "Dropout"}));
  EXPECT_EQ(o.graph.nodes[0].inputs[0], "x");
}

TEST(OptimizerShape, FoldsShapeOfStaticValuesOnly) {
  ModelBuilder b(17);
  b.input("x", {2, 3, 4});
  b.input("v", {-1, 3});
  b.node("Shape", {"x"}, {"sx"}, {A_i("start", 1)});
  b.node("Shape", {"v"}, {"sv"});
  b.node("Size", {"x"}, {"nx"});
  b.node("Concat", {"sx", "sv"}, {"cat"}, {A_i("axis", 0)});
  b.node("Cast", {"cat"}, {"y"}, {A_i("to", 1)});
  b.node("Cast", {"nx"}, {"y2"}, {A_i("to", 1)});
  b.output("y");
  b.output("y2");
  ir::Model o = optimized(b.m, OptLevel::kBasic);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Shape", "Concat", "Cast", "Cast"}));
  ASSERT_TRUE(o.graph.initializers.count("sx"));
  const Tensor& sx = o.graph.initializers.at("sx");
  EXPECT_EQ(std::vector<int64_t>(sx.data<int64_t>(), sx.data<int64_t>() + sx.numel()), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(o.graph.initializers.at("nx").data<int64_t>()[0], 24);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 3, 4}, 2))}, {"v", Value(random_tensor({5, 3}, 3))}});
}

TEST(OptimizerDeadCode, RemovesUnreadNodesKeepsSubgraphCaptures) {
  ModelBuilder b(17);
  b.input("x", {2});
  b.input("cond", {});
  b.m.graph.inputs.back().type.elem_type = DataType::kBool;
  b.node("Neg", {"x"}, {"unused"});
  b.node("Abs", {"x"}, {"captured"});
  b.node("Identity", {"x"}, {"renamed_in_branch"});
  // If whose branches read 'captured' and 'renamed_in_branch' from the outer scope.
  auto branch = [&](const std::string& src) {
    auto g = std::make_shared<ir::Graph>();
    g->name = "branch";
    ir::Node n;
    n.op_type = "Identity";
    n.inputs = {src};
    n.outputs = {"bo"};
    ir::Node dead_in_branch;
    dead_in_branch.op_type = "Neg";
    dead_in_branch.inputs = {src};
    dead_in_branch.outputs = {"bunused"};
    g->nodes = {n, dead_in_branch};
    ir::ValueInfo o;
    o.name = "bo";
    o.type.kind = ir::TypeInfo::Kind::kTensor;
    o.type.elem_type = DataType::kFloat;
    g->outputs = {o};
    return g;
  };
  b.node("If", {"cond"}, {"y"},
         {A_g("then_branch", branch("captured")), A_g("else_branch", branch("renamed_in_branch"))});
  b.output("y");
  ir::Model o = optimized(b.m, OptLevel::kAll);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Abs", "Identity", "If"}));
  const ir::Graph& then_g = *o.graph.nodes[2].attributes[0].g;
  EXPECT_EQ(then_g.nodes.size(), 1u);  // the branch's dead Neg is gone, its output Identity stays
  Tensor cond(DataType::kBool, {});
  cond.data<bool>()[0] = false;
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2}, 4))}, {"cond", Value(cond)}});
}

TEST(OptimizerConvBn, FoldsBatchNormAndFusesRelu) {
  ModelBuilder b(13);
  b.input("x", {1, 3, 6, 6});
  b.init("w", random_tensor({4, 3, 3, 3}, 5));
  b.init("bconv", random_tensor({4}, 6));
  b.init("scale", random_tensor({4}, 7, 0.5f, 1.5f));
  b.init("bias", random_tensor({4}, 8));
  b.init("mean", random_tensor({4}, 9));
  b.init("var", random_tensor({4}, 10, 0.2f, 2.f));
  b.node("Conv", {"x", "w", "bconv"}, {"c"}, {A_is("pads", {1, 1, 1, 1})});
  b.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"bn"}, {A_f("epsilon", 1e-3f)});
  b.node("Relu", {"bn"}, {"y"});
  b.output("y");
  optimizer::Stats st;
  ir::Model o = optimized(b.m, OptLevel::kAll, &st);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedConv"}));
  EXPECT_EQ(st.counts["conv_bn_folded"], 1);
  EXPECT_EQ(ops_of(optimized(b.m, OptLevel::kBasic)), (std::vector<std::string>{"Conv", "BatchNormalization", "Relu"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 3, 6, 6}, 11))}}, 1e-4);
}

// BN-ReLU before a 1x1 conv (DenseNet): the folded scale/shift and the Relu move into the conv's input
// packing (FusedConv inputs 4, 5). Checked on the fast path (Relu after the conv), the general path
// (LeakyRelu after it: the kernel pre-activates X itself), and the shapes that must not fuse (3x3,
// stride 2, a second reader of the BN-ReLU output).
TEST(OptimizerPreactConv, BatchNormReluMovesIntoOneByOneConv) {
  struct Case {
    int64_t k, stride;
    const char* act;
    bool second_reader, fuses;
  };
  const Case cases[] = {{1, 1, "Relu", false, true},   {1, 1, "LeakyRelu", false, true},
                        {1, 1, "", false, true},       {3, 1, "Relu", false, false},
                        {1, 2, "Relu", false, false},  {1, 1, "Relu", true, false}};
  int seed = 80;
  for (const Case& cs : cases) {
    ModelBuilder b(13);
    b.input("x", {2, 6, 7, 9});
    b.init("scale", random_tensor({6}, seed++, 0.5f, 1.5f));
    b.init("bias", random_tensor({6}, seed++));
    b.init("mean", random_tensor({6}, seed++));
    b.init("var", random_tensor({6}, seed++, 0.2f, 2.f));
    b.init("w", random_tensor({5, 6, cs.k, cs.k}, seed++));
    b.init("wb", random_tensor({5}, seed++));
    b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"bn"}, {A_f("epsilon", 1e-3f)});
    b.node("Relu", {"bn"}, {"r"});
    const int64_t pad = cs.k / 2;
    b.node("Conv", {"r", "w", "wb"}, {"c"}, {A_is("strides", {cs.stride, cs.stride}), A_is("pads", {pad, pad, pad, pad})});
    std::string out = "c";
    if (std::string(cs.act) == "Relu") {
      b.node("Relu", {"c"}, {"y"});
      out = "y";
    } else if (std::string(cs.act) == "LeakyRelu") {
      b.node("LeakyRelu", {"c"}, {"y"}, {A_f("alpha", 0.2f)});
      out = "y";
    }
    b.output(out);
    if (cs.second_reader) b.output("r");
    optimizer::Stats st;
    ir::Model o = optimized(b.m, OptLevel::kAll, &st);
    EXPECT_EQ(st.counts["fused_preact_conv"], cs.fuses ? 1 : 0) << "k " << cs.k << " stride " << cs.stride;
    if (cs.fuses) {
      EXPECT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedConv"}));
    }
    Tensor x = random_tensor({2, 6, 7, 9}, seed++, -2.f, 2.f);
    expect_same_numerics(b.m, {{"x", Value(x)}}, 1e-5);
  }
}

// ShuffleNet's channel shuffle (Reshape [N, G, K, H, W], Transpose axes 1 and 2, Reshape [N, G * K, H, W])
// read only by a depthwise conv: the conv reads through the shuffle (FusedConv input_shuffle_shape).
// Checked with a Relu and with a residual after the conv (fast path), and on what must not fuse: a
// group-1 conv, another perm, a -1 in a shape, a second reader of the Transpose.
TEST(OptimizerChannelShuffle, ReshapeTransposeReshapeMovesIntoDepthwiseConv) {
  struct Case {
    const char* what;
    int64_t group;
    std::vector<int64_t> perm;
    bool minus_one, second_reader, relu, residual, fuses;
  };
  const Case cases[] = {
      {"plain", 12, {0, 2, 1, 3, 4}, false, false, false, false, true},
      {"relu", 12, {0, 2, 1, 3, 4}, false, false, true, false, true},
      {"residual", 12, {0, 2, 1, 3, 4}, false, false, false, true, true},
      {"group 1", 1, {0, 2, 1, 3, 4}, false, false, false, false, false},
      {"other perm", 12, {0, 1, 2, 4, 3}, false, false, false, false, false},
      {"minus one", 12, {0, 2, 1, 3, 4}, true, false, false, false, false},
      {"second reader", 12, {0, 2, 1, 3, 4}, false, true, false, false, false},
  };
  int seed = 300;
  for (const Case& cs : cases) {
    ModelBuilder b(13);
    b.input("x", {2, 12, 7, 9});
    b.init("s1", ints({2, 3, 4, 7, 9}));
    b.init("s2", ints({2, 12, cs.minus_one ? -1 : 7, 9}));
    b.init("w", random_tensor({12, 12 / cs.group, 3, 3}, seed++));
    b.init("wb", random_tensor({12}, seed++));
    b.node("Reshape", {"x", "s1"}, {"r"});
    b.node("Transpose", {"r"}, {"t"}, {A_is("perm", cs.perm)});
    b.node("Reshape", {"t", "s2"}, {"u"});
    b.node("Conv", {"u", "w", "wb"}, {"c"}, {A_i("group", cs.group), A_is("pads", {1, 1, 1, 1})});
    std::vector<std::pair<std::string, Value>> feeds{{"x", Value(random_tensor({2, 12, 7, 9}, seed++, -2.f, 2.f))}};
    std::string out = "c";
    if (cs.relu) {
      b.node("Relu", {"c"}, {"y"});
      out = "y";
    } else if (cs.residual) {
      b.input("z", {2, 12, 7, 9});
      b.node("Add", {"c", "z"}, {"y"});
      out = "y";
      feeds.push_back({"z", Value(random_tensor({2, 12, 7, 9}, seed++))});
    }
    b.output(out);
    if (cs.second_reader) b.output("t");
    optimizer::Stats st;
    ir::Model o = optimized(b.m, OptLevel::kAll, &st);
    EXPECT_EQ(st.counts["fused_channel_shuffle"], cs.fuses ? 1 : 0) << cs.what;
    if (cs.fuses) {
      EXPECT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedConv"})) << cs.what;
    }
    expect_same_numerics(b.m, feeds, 1e-5);
  }
}

// The fused kernel on an X the shuffle's first Reshape accepts but that is not [A, G * K, d...] (the
// same count, other spatial sizes): it makes the shuffled copy itself, so the result is the unfused
// graph's; an X of another size is a clear error naming the attribute.
TEST(OptimizerChannelShuffle, FusedConvShufflesAnyInputTheReshapeTakes) {
  auto model = [](bool fused) {
    ModelBuilder b(13);
    b.input("x", {1, 6, -1, 8});
    b.init("s1", ints({1, 2, 3, 4, 4}));
    b.init("s2", ints({1, 6, 4, 4}));
    b.init("w", random_tensor({6, 1, 3, 3}, 41));
    if (fused) {
      ir::Node& n = b.node("FusedConv", {"x", "w"}, {"y"},
                           {A_i("group", 6), A_is("pads", {1, 1, 1, 1}), A_is("input_shuffle_shape", {1, 2, 3, 4, 4})});
      n.domain = "nxrt";
      b.m.opset_imports.push_back({"nxrt", 1});
    } else {
      b.node("Reshape", {"x", "s1"}, {"r"});
      b.node("Transpose", {"r"}, {"t"}, {A_is("perm", {0, 2, 1, 3, 4})});
      b.node("Reshape", {"t", "s2"}, {"u"});
      b.node("Conv", {"u", "w"}, {"y"}, {A_i("group", 6), A_is("pads", {1, 1, 1, 1})});
    }
    b.output("y");
    return b.m;
  };
  const Tensor x = random_tensor({1, 6, 2, 8}, 42);
  const auto ref = run_at(model(false), OptLevel::kDisabled, {{"x", Value(x)}});
  const auto got = run_at(model(true), OptLevel::kDisabled, {{"x", Value(x)}});
  ASSERT_EQ(ref.size(), 1u);
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].shape(), (Dims{1, 6, 4, 4}));
  for (int64_t i = 0; i < ref[0].numel(); ++i) ASSERT_NEAR(got[0].data<float>()[i], ref[0].data<float>()[i], 1e-5f);

  const std::string bytes = onnx::serialize_model(model(true));
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto bad = (*s)->run({{"x", Value(random_tensor({1, 6, 3, 8}, 43))}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().to_string().find("input_shuffle_shape"), std::string::npos) << bad.status().to_string();

  // An attribute that is not a shape (a zero, sizes whose product overflows) is an error naming it.
  for (std::vector<int64_t> split : {std::vector<int64_t>{1, 0, 3, 4}, std::vector<int64_t>{1, int64_t(1) << 40, int64_t(1) << 40, 4}}) {
    ir::Model m = model(true);
    for (ir::Attribute& a : m.graph.nodes[0].attributes)
      if (a.name == "input_shuffle_shape") a.ints = split;
    const std::string mb = onnx::serialize_model(m);
    auto made = Session::create_from_bytes(mb.data(), mb.size(), SessionOptions{});
    Status st = made.ok() ? (*made)->run({{"x", Value(x)}}).status() : made.status();
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.to_string().find("input_shuffle_shape"), std::string::npos) << st.to_string();
  }
}

TEST(OptimizerConvBn, RefusesWhenConvOutputHasAnotherReader) {
  ModelBuilder b(13);
  b.input("x", {1, 2, 4, 4});
  b.init("w", random_tensor({2, 2, 1, 1}, 5));
  for (const char* n : {"scale", "bias", "mean"}) b.init(n, random_tensor({2}, 6));
  b.init("var", random_tensor({2}, 10, 0.2f, 2.f));
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"y"});
  b.output("y");
  b.output("c");  // the conv output is also a graph output
  ir::Model o = optimized(b.m, OptLevel::kAll);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Conv", "BatchNormalization"}));
}

TEST(OptimizerFusedConv, ResidualAddAndActivation) {
  ModelBuilder b(13);
  b.input("x", {2, 4, 5, 5});
  b.input("z", {2, 4, 5, 5});
  b.init("w", random_tensor({4, 4, 3, 3}, 12));
  b.init("bc", random_tensor({4}, 13));
  b.init("lo", scalar_f(-0.2f));
  b.init("hi", scalar_f(0.3f));
  b.node("Conv", {"x", "w", "bc"}, {"c"}, {A_is("pads", {1, 1, 1, 1})});
  b.node("Add", {"z", "c"}, {"s"});
  b.node("Clip", {"s", "lo", "hi"}, {"y"});
  b.output("y");
  ir::Model o = optimized(b.m, OptLevel::kAll);
  ASSERT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedConv"}));
  EXPECT_EQ(o.graph.nodes[0].inputs, (std::vector<std::string>{"x", "w", "bc", "z"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 4, 5, 5}, 14))}, {"z", Value(random_tensor({2, 4, 5, 5}, 15))}});
}

// FusedConv hands its residual and Relu to the conv's GEMM store where the path allows (1x1, grouped
// 1x1, implicit-GEMM im2col) and applies them itself after the others (Winograd, depthwise, one output
// position): every path must give the unfused numbers.
TEST(OptimizerFusedConv, ResidualAndReluOnEveryConvPath) {
  struct Case {
    int64_t c, m, hw, k, group, stride;
  };
  const Case cases[] = {{8, 20, 9, 1, 1, 1},   {8, 12, 9, 1, 2, 1},  {5, 7, 11, 3, 1, 2}, {6, 9, 10, 7, 1, 1},
                        {16, 16, 12, 3, 1, 1}, {6, 6, 9, 3, 6, 1},   {12, 30, 1, 1, 1, 1}};
  int seed = 40;
  for (const Case& cs : cases) {
    const int64_t pad = cs.k / 2;
    const int64_t out = (cs.hw + 2 * pad - cs.k) / cs.stride + 1;
    ModelBuilder b(13);
    b.input("x", {2, cs.c, cs.hw, cs.hw});
    b.input("z", {2, cs.m, out, out});
    b.init("w", random_tensor({cs.m, cs.c / cs.group, cs.k, cs.k}, seed++));
    b.init("bc", random_tensor({cs.m}, seed++));
    b.node("Conv", {"x", "w", "bc"}, {"c"},
           {A_is("pads", {pad, pad, pad, pad}), A_is("strides", {cs.stride, cs.stride}), A_i("group", cs.group)});
    b.node("Add", {"c", "z"}, {"s"});
    b.node("Relu", {"s"}, {"y"});
    b.output("y");
    ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"nxrt::FusedConv"}));
    expect_same_numerics(b.m, {{"x", Value(random_tensor({2, cs.c, cs.hw, cs.hw}, seed++))},
                               {"z", Value(random_tensor({2, cs.m, out, out}, seed++))}},
                         1e-4);
  }
}

TEST(OptimizerFusedConv, BroadcastResidualTakesTheGeneralPath) {
  ModelBuilder b(13);
  b.input("x", {1, 2, 3, 3});
  b.input("z", {2, 1, 1, 1});  // widens the output: [2,2,3,3]
  b.init("w", random_tensor({2, 2, 1, 1}, 16));
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Add", {"c", "z"}, {"s"});
  b.node("LeakyRelu", {"s"}, {"y"}, {A_f("alpha", 0.3f)});
  b.output("y");
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"nxrt::FusedConv"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 2, 3, 3}, 17))}, {"z", Value(random_tensor({2, 1, 1, 1}, 18))}});
}

TEST(OptimizerFusedMatMul, BiasAndActivationAnyRank) {
  ModelBuilder b(13);
  b.input("x", {2, 3, 8});
  b.init("w", random_tensor({8, 5}, 19));
  b.init("bias", random_tensor({5}, 20));
  b.node("MatMul", {"x", "w"}, {"m"});
  b.node("Add", {"m", "bias"}, {"a"});
  b.node("HardSigmoid", {"a"}, {"y"}, {A_f("alpha", 0.3f), A_f("beta", 0.4f)});
  b.output("y");
  ir::Model o = optimized(b.m, OptLevel::kAll);
  ASSERT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedMatMul"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 3, 8}, 21))}});
}

TEST(OptimizerFusedMatMul, RefusesRank2BiasAndIntegerMatMul) {
  ModelBuilder b(13);
  b.input("x", {3, 8});
  b.init("w", random_tensor({8, 5}, 19));
  b.init("bias", random_tensor({1, 5}, 20));  // rank 2: could widen a 1-D MatMul result
  b.node("MatMul", {"x", "w"}, {"m"});
  b.node("Add", {"m", "bias"}, {"y"});
  b.output("y");
  EXPECT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"MatMul", "Add"}));
  ModelBuilder bi(13);
  bi.input("x", {3, 2});
  bi.input("w", {2, 2});
  bi.node("MatMul", {"x", "w"}, {"m"});
  bi.node("Relu", {"m"}, {"y"});
  bi.output("y");
  EXPECT_EQ(ops_of(optimized(bi.m, OptLevel::kAll)), (std::vector<std::string>{"MatMul", "Relu"}));
}

TEST(OptimizerFusedGemm, GemmSigmoid) {
  ModelBuilder b(13);
  b.input("x", {4, 6});
  b.init("w", random_tensor({3, 6}, 22));
  b.init("c", random_tensor({3}, 23));
  b.node("Gemm", {"x", "w", "c"}, {"g"}, {A_i("transB", 1), A_f("alpha", 0.5f)});
  b.node("Sigmoid", {"g"}, {"y"});
  b.output("y");
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"nxrt::FusedGemm"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({4, 6}, 24))}});
}

TEST(OptimizerLayerNorm, FusesThePattern) {
  ModelBuilder b(13);
  b.input("x", {2, 3, 16});
  b.init("gamma", random_tensor({16}, 25));
  b.init("beta", random_tensor({1, 16}, 26));
  add_layer_norm(b, {-1}, "gamma");
  b.output("y");
  optimizer::Stats st;
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll, &st)), (std::vector<std::string>{"nxrt::LayerNormalization"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 3, 16}, 27, -3, 5))}}, 1e-4);
}

TEST(OptimizerLayerNorm, RefusesPositiveAxesAndWideScale) {
  ModelBuilder b(13);
  b.input("x", {2, 3, 16});
  b.init("gamma", random_tensor({16}, 25));
  b.init("beta", random_tensor({16}, 26));
  add_layer_norm(b, {2}, "gamma");
  b.output("y");
  EXPECT_EQ(count_op(optimized(b.m, OptLevel::kAll), "LayerNormalization"), 0);
  ModelBuilder w(13);
  w.input("x", {2, 3, 16});
  w.init("gamma", random_tensor({3, 16}, 25));  // rank 2 over a 1-axis normalization
  w.init("beta", random_tensor({16}, 26));
  add_layer_norm(w, {-1}, "gamma");
  w.output("y");
  EXPECT_EQ(count_op(optimized(w.m, OptLevel::kAll), "LayerNormalization"), 0);
  expect_same_numerics(w.m, {{"x", Value(random_tensor({2, 3, 16}, 28))}}, 1e-4);
}

TEST(OptimizerRmsNorm, FusesDivAndReciprocalForms) {
  for (bool recip : {false, true}) {
    ModelBuilder b(13);
    b.input("x", {3, 8});
    add_rms_norm(b, 8, recip);
    b.output("y");
    ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"nxrt::RMSNormalization"}));
    expect_same_numerics(b.m, {{"x", Value(random_tensor({3, 8}, 30, -2, 2))}}, 1e-4);
  }
}

TEST(OptimizerGelu, FusesErfAndTanhForms) {
  uint32_t seed = 31;
  for (bool tanh : {false, true}) {
    for (int tail = 0; tail < 3; ++tail) {
      ModelBuilder b(13);
      b.input("x", {4, 7});
      add_gelu(b, tanh, tail);
      b.output("y");
      ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"nxrt::Gelu"}))
          << (tanh ? "tanh" : "erf") << " tail " << tail;
      expect_same_numerics(b.m, {{"x", Value(random_tensor({4, 7}, seed++, -4, 4))}}, 1e-5);
    }
  }
}

// The erf Gelu after a MatMul + bias becomes FusedMatMul's activation: the pattern fuse_gelu makes one
// nxrt Gelu of, and ai.onnx Gelu (opset 20). Gelu's tanh approximation has no fused activation and
// stays a node after the FusedMatMul.
TEST(OptimizerGelu, ErfFormFusesIntoTheMatMulBefore) {
  auto has_gelu_activation = [](const ir::Model& o) {
    for (const auto& a : o.graph.nodes[0].attributes)
      if (a.name == "activation" && a.s == "Gelu") return true;
    return false;
  };
  for (int form = 0; form < 3; ++form) {  // 0: the written-out erf pattern; 1, 2: Gelu-20 none / tanh
    ModelBuilder b(form == 0 ? 13 : 20);
    b.input("in", {2, 5, 8});
    b.init("w", random_tensor({8, 6}, 51));
    b.init("bias", random_tensor({6}, 52));
    b.node("MatMul", {"in", "w"}, {"mm"});
    b.node("Add", {"mm", "bias"}, {"x"});
    if (form == 0) {
      add_gelu(b, false, 0);
    } else {
      ir::Attribute approx;
      approx.name = "approximate";
      approx.type = ir::Attribute::Type::kString;
      approx.s = form == 1 ? "none" : "tanh";
      b.node("Gelu", {"x"}, {"y"}, {approx});
    }
    b.output("y");
    const ir::Model o = optimized(b.m, OptLevel::kAll);
    if (form == 2) {
      ASSERT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedMatMul", "Gelu"}));
      EXPECT_FALSE(has_gelu_activation(o));
    } else {
      ASSERT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedMatMul"})) << "form " << form;
      EXPECT_TRUE(has_gelu_activation(o));
    }
    expect_same_numerics(b.m, {{"in", Value(random_tensor({2, 5, 8}, 53, -2, 2))}}, 1e-5);
  }
}

TEST(OptimizerGelu, RefusesWrongConstantsAndSharedIntermediates) {
  ModelBuilder b(13);
  b.input("x", {4, 7});
  add_gelu(b, false, 0, 1.5f);  // not sqrt(2)
  b.output("y");
  EXPECT_EQ(count_op(optimized(b.m, OptLevel::kAll), "Gelu"), 0);
  b.m.graph.initializers["sqrt2"] = scalar_f(1.4142135f);
  b.output("a");  // an intermediate is a graph output
  EXPECT_EQ(count_op(optimized(b.m, OptLevel::kAll), "Gelu"), 0);
}

TEST(OptimizerConvAffine, FoldsPerChannelMulAddIntoConv) {
  ModelBuilder b(9);
  b.input("x", {1, 3, 5, 5});
  b.init("w", random_tensor({4, 3, 3, 3}, 40));
  b.init("s", random_tensor({4, 1, 1}, 41));
  b.init("t", random_tensor({1, 4, 1, 1}, 42));
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Mul", {"c", "s"}, {"m"});
  b.node("Add", {"t", "m"}, {"a"});
  b.node("Relu", {"a"}, {"y"});
  b.output("y");
  optimizer::Stats st;
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll, &st)), (std::vector<std::string>{"nxrt::FusedConv"}));
  EXPECT_EQ(st.counts["conv_affine_folded"], 2);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 3, 5, 5}, 43))}}, 1e-4);
}

TEST(OptimizerConvAffine, RefusesConstantsThatAreNotPerChannel) {
  ModelBuilder b(9);
  b.input("x", {1, 3, 5, 5});
  b.init("w", random_tensor({4, 3, 1, 1}, 44));
  b.init("s", random_tensor({5}, 45));  // along the last axis
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Mul", {"c", "s"}, {"y"});
  b.output("y");
  EXPECT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"Conv", "Mul"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 3, 5, 5}, 46))}}, 1e-4);
}

namespace {
// Y = Softmax(Q * Transpose(K) / 8 + mask) * V; with `out_perm` (rank 4), Y then goes through
// Transpose(perm = out_perm) and a Reshape that merges the last two axes (the heads merged back).
ModelBuilder attention_model(const std::vector<int64_t>& q_shape, const std::vector<int64_t>& k_shape,
                             const std::vector<int64_t>& v_shape, const std::vector<int64_t>& mask_shape,
                             int64_t softmax_axis = -1, const std::vector<int64_t>& out_perm = {}) {
  ModelBuilder b(13);
  b.input("q", q_shape);
  b.input("k", k_shape);
  b.input("v", v_shape);
  b.input("mask", mask_shape);
  b.init("scale", scalar_f(8.f));
  const int64_t r = static_cast<int64_t>(k_shape.size());
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < r; ++i) perm.push_back(i);
  std::swap(perm[static_cast<size_t>(r - 1)], perm[static_cast<size_t>(r - 2)]);
  b.node("Transpose", {"k"}, {"kt"}, {A_is("perm", perm)});
  b.node("MatMul", {"q", "kt"}, {"s"});
  b.node("Div", {"s", "scale"}, {"ss"});
  b.node("Add", {"mask", "ss"}, {"sm_in"});
  b.node("Softmax", {"sm_in"}, {"p"}, {A_i("axis", softmax_axis)});
  if (out_perm.empty()) {
    b.node("MatMul", {"p", "v"}, {"y"});
  } else {
    b.node("MatMul", {"p", "v"}, {"heads"});
    b.node("Transpose", {"heads"}, {"merged"}, {A_is("perm", out_perm)});
    b.init("merged_shape", Tensor::from_vector<int64_t>(DataType::kInt64, {3}, {0, 0, -1}));
    b.node("Reshape", {"merged", "merged_shape"}, {"y"});
  }
  b.output("y");
  return b;
}

// The attribute `name` of the first node of type `op` in m's main graph (nullptr: none).
const ir::Attribute* attr_of(const ir::Model& m, const std::string& op, const std::string& name) {
  for (const ir::Node& n : m.graph.nodes)
    if (n.op_type == op) return n.find_attribute(name);
  return nullptr;
}
}  // namespace

TEST(OptimizerAttention, FusesAndMatchesOnTheFastPath) {
  ModelBuilder b = attention_model({2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 4}, {1, 1, 5, 7});
  optimizer::Stats st;
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll, &st)),
            (std::vector<std::string>{"Transpose", "nxrt::FusedAttention"}));
  expect_same_numerics(b.m, {{"q", Value(random_tensor({2, 3, 5, 8}, 50, -2, 2))},
                             {"k", Value(random_tensor({2, 3, 7, 8}, 51, -2, 2))},
                             {"v", Value(random_tensor({2, 3, 7, 4}, 52))},
                             {"mask", Value(random_tensor({1, 1, 5, 7}, 53, -5, 0))}},
                       1e-5);
}

TEST(OptimizerAttention, BroadcastBatchAndWideMaskTakeTheExactFallback) {
  // K and V shared across heads (batch dims broadcast) and a mask that widens the batch.
  ModelBuilder b = attention_model({1, 3, 5, 8}, {1, 1, 7, 8}, {1, 1, 7, 4}, {2, 1, 5, 7});
  ASSERT_EQ(count_op(optimized(b.m, OptLevel::kAll), "FusedAttention"), 1);
  expect_same_numerics(b.m, {{"q", Value(random_tensor({1, 3, 5, 8}, 54, -2, 2))},
                             {"k", Value(random_tensor({1, 1, 7, 8}, 55, -2, 2))},
                             {"v", Value(random_tensor({1, 1, 7, 4}, 56))},
                             {"mask", Value(random_tensor({2, 1, 5, 7}, 57, -5, 0))}},
                       1e-5);
}

TEST(OptimizerAttention, SoftmaxOverAnotherAxisRunsTheFallback) {
  // Softmax over axis 1 (not the last): fused, but computed by the original ops.
  ModelBuilder b = attention_model({2, 5, 8}, {2, 7, 8}, {2, 7, 4}, {5, 7}, /*softmax_axis=*/1);
  EXPECT_EQ(count_op(optimized(b.m, OptLevel::kAll), "FusedAttention"), 1);
  expect_same_numerics(b.m, {{"q", Value(random_tensor({2, 5, 8}, 58))},
                             {"k", Value(random_tensor({2, 7, 8}, 59))},
                             {"v", Value(random_tensor({2, 7, 4}, 60))},
                             {"mask", Value(random_tensor({5, 7}, 61))}});
  // Positive last axis: the fast path.
  ModelBuilder c = attention_model({2, 5, 8}, {2, 7, 8}, {2, 7, 4}, {5, 7}, /*softmax_axis=*/2);
  EXPECT_EQ(count_op(optimized(c.m, OptLevel::kAll), "FusedAttention"), 1);
  expect_same_numerics(c.m, {{"q", Value(random_tensor({2, 5, 8}, 62))},
                             {"k", Value(random_tensor({2, 7, 8}, 63))},
                             {"v", Value(random_tensor({2, 7, 4}, 64))},
                             {"mask", Value(random_tensor({5, 7}, 65))}});
}

TEST(OptimizerAttention, TakesTheTransposeThatMergesHeads) {
  // [B, H, S, Dv] -> Transpose(0, 2, 1, 3) -> Reshape [B, S, H * Dv]: the Transpose goes into the fused
  // node (transpose_output), on the fast path and on the exact fallback (batch dims broadcast).
  const std::vector<int64_t> merge = {0, 2, 1, 3};
  for (bool fallback : {false, true}) {
    SCOPED_TRACE(fallback ? "fallback" : "fast path");
    const std::vector<int64_t> kv_batch = fallback ? std::vector<int64_t>{2, 1} : std::vector<int64_t>{2, 3};
    ModelBuilder b = attention_model({2, 3, 5, 8}, {kv_batch[0], kv_batch[1], 7, 8}, {kv_batch[0], kv_batch[1], 7, 4},
                                     {1, 1, 5, 7}, -1, merge);
    const ir::Model opt = optimized(b.m, OptLevel::kAll);
    ASSERT_EQ(ops_of(opt), (std::vector<std::string>{"Transpose", "nxrt::FusedAttention", "Reshape"}));
    const ir::Attribute* t = attr_of(opt, "FusedAttention", "transpose_output");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->i, 1);
    for (int threads : {1, 2}) {
      expect_same_numerics(b.m, {{"q", Value(random_tensor({2, 3, 5, 8}, 66, -2, 2))},
                                 {"k", Value(random_tensor({kv_batch[0], kv_batch[1], 7, 8}, 67, -2, 2))},
                                 {"v", Value(random_tensor({kv_batch[0], kv_batch[1], 7, 4}, 68))},
                                 {"mask", Value(random_tensor({1, 1, 5, 7}, 69, -5, 0))}},
                           1e-5, threads);
    }
  }
  // Any other permutation stays a Transpose of its own.
  ModelBuilder c = attention_model({2, 3, 5, 8}, {2, 3, 7, 8}, {2, 3, 7, 4}, {1, 1, 5, 7}, -1, {0, 1, 3, 2});
  EXPECT_EQ(ops_of(optimized(c.m, OptLevel::kAll)),
            (std::vector<std::string>{"Transpose", "nxrt::FusedAttention", "Transpose", "Reshape"}));
}

TEST(OptimizerAttention, RefusesWhenScoresAreReadElsewhere) {
  ModelBuilder b = attention_model({2, 5, 8}, {2, 7, 8}, {2, 7, 4}, {5, 7});
  b.output("p");  // the attention probabilities are a graph output
  EXPECT_EQ(count_op(optimized(b.m, OptLevel::kAll), "FusedAttention"), 0);
}

TEST(OptimizerHardSwish, FusesThePatternThenIntoTheConv) {
  ModelBuilder b(13);
  b.input("x", {1, 2, 4, 4});
  b.init("w", random_tensor({3, 2, 1, 1}, 70, -3, 3));
  b.init("three", scalar_f(3.f));
  b.init("zero", scalar_f(0.f));
  b.init("six", scalar_f(6.f));
  b.node("Conv", {"x", "w"}, {"c"});
  b.node("Add", {"c", "three"}, {"a"});
  b.node("Clip", {"a", "zero", "six"}, {"cl"});
  b.node("Mul", {"c", "cl"}, {"m"});
  b.node("Div", {"m", "six"}, {"y"});
  b.output("y");
  optimizer::Stats st;
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll, &st)), (std::vector<std::string>{"nxrt::FusedConv"}));
  EXPECT_EQ(st.counts["fused_hard_swish"], 1);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 2, 4, 4}, 71, -2, 2))}});
  // Clip to 5 is not HardSwish.
  b.m.graph.initializers["six"] = scalar_f(5.f);
  EXPECT_EQ(count_op(optimized(b.m, OptLevel::kAll), "HardSwish"), 0);
}

TEST(OptimizerHardSwish, ClipWithAttributesBeforeOpset11) {
  ModelBuilder b(9);
  b.input("x", {2, 5});
  b.init("three", scalar_f(3.f));
  b.init("sixth", scalar_f(1.f / 6.f));
  b.node("Add", {"three", "x"}, {"a"});
  b.node("Clip", {"a"}, {"cl"}, {A_f("min", 0.f), A_f("max", 6.f)});
  b.node("Mul", {"cl", "x"}, {"m"});
  b.node("Mul", {"m", "sixth"}, {"y"});
  b.output("y");
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"nxrt::HardSwish"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 5}, 72, -5, 5))}});
}

TEST(OptimizerSilu, SigmoidTimesItsInputBecomesSwish) {
  ModelBuilder b(14);
  b.input("x", {2, 7});
  b.input("u", {2, 7});
  b.node("Sigmoid", {"x"}, {"s"});
  b.node("Mul", {"s", "x"}, {"g"});  // either operand order
  b.node("Mul", {"g", "u"}, {"y"});
  b.output("y");
  optimizer::Stats st;
  // The SwiGLU product takes the Mul of the SiLU and u in too.
  ASSERT_EQ(ops_of(optimized(b.m, OptLevel::kAll, &st)), (std::vector<std::string>{"nxrt::SiluMul"}));
  EXPECT_EQ(st.counts["fused_silu_mul"], 1);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 7}, 90, -8, 8))}, {"u", Value(random_tensor({2, 7}, 91))}});
  // The SiLU read elsewhere too: Swish, then the Mul.
  {
    ModelBuilder c = b;
    c.output("g");
    optimizer::Stats sc;
    ASSERT_EQ(ops_of(optimized(c.m, OptLevel::kAll, &sc)), (std::vector<std::string>{"nxrt::Swish", "Mul"}));
    EXPECT_EQ(sc.counts["fused_silu"], 1);
    expect_same_numerics(c.m, {{"x", Value(random_tensor({2, 7}, 92, -8, 8))}, {"u", Value(random_tensor({2, 7}, 93))}});
  }
  // u broadcast ([7] onto [2, 7]): SiluMul broadcasts as Mul does.
  {
    ModelBuilder c(14);
    c.input("x", {2, 7});
    c.input("u", {7});
    c.node("Sigmoid", {"x"}, {"s"});
    c.node("Mul", {"x", "s"}, {"g"});
    c.node("Mul", {"u", "g"}, {"y"});
    c.output("y");
    ASSERT_EQ(ops_of(optimized(c.m, OptLevel::kAll)), (std::vector<std::string>{"nxrt::SiluMul"}));
    expect_same_numerics(c.m, {{"x", Value(random_tensor({2, 7}, 94, -8, 8))}, {"u", Value(random_tensor({7}, 95))}});
  }
  // The sigmoid read elsewhere, or multiplied by another tensor: left alone.
  b.output("s");
  EXPECT_EQ(count_op(optimized(b.m, OptLevel::kAll), "Swish"), 0);
}

TEST(OptimizerBnAffine, FoldsPerChannelMulAddIntoBatchNormWhenTheRankIsKnown) {
  ModelBuilder b(9);
  b.input("x", {2, 4, 3, 3});
  for (const char* n : {"scale", "bias", "mean"}) b.init(n, random_tensor({4}, 80));
  b.init("var", random_tensor({4}, 81, 0.5f, 2.f));
  b.init("s", random_tensor({4, 1, 1}, 82));
  b.init("t", random_tensor({4, 1, 1}, 83));
  b.node("Relu", {"x"}, {"r"});
  b.node("BatchNormalization", {"r", "scale", "bias", "mean", "var"}, {"bn"});
  b.node("Mul", {"bn", "s"}, {"m"});
  b.node("Add", {"m", "t"}, {"y"});
  b.output("y");
  optimizer::Stats st;
  EXPECT_EQ(ops_of(optimized(b.m, OptLevel::kAll, &st)), (std::vector<std::string>{"Relu", "BatchNormalization"}));
  EXPECT_EQ(st.counts["bn_affine_folded"], 2);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 4, 3, 3}, 84))}}, 1e-4);
  // Rank 3 input: [4,1,1] would not align with the channel axis.
  ModelBuilder r3(9);
  r3.input("x", {4, 4, 3});
  for (const char* n : {"scale", "bias", "mean"}) r3.init(n, random_tensor({4}, 80));
  r3.init("var", random_tensor({4}, 81, 0.5f, 2.f));
  r3.init("s", random_tensor({4, 1, 1}, 82));
  r3.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"bn"});
  r3.node("Mul", {"bn", "s"}, {"y"});
  r3.output("y");
  EXPECT_EQ(ops_of(optimized(r3.m, OptLevel::kAll)), (std::vector<std::string>{"BatchNormalization", "Mul"}));
}

TEST(OptimizerFusedGemm, GemmWithoutCTakesAConstantAddAsC) {
  ModelBuilder b(13);
  b.input("x", {4, 6});
  b.init("w", random_tensor({6, 3}, 90));
  b.init("bias", random_tensor({3}, 91));
  b.node("Gemm", {"x", "w"}, {"g"}, {A_f("beta", 0.25f)});  // beta is unused without C
  b.node("Add", {"g", "bias"}, {"a"});
  b.node("Tanh", {"a"}, {"y"});
  b.output("y");
  ir::Model o = optimized(b.m, OptLevel::kAll);
  ASSERT_EQ(ops_of(o), (std::vector<std::string>{"nxrt::FusedGemm"}));
  EXPECT_EQ(o.graph.nodes[0].inputs, (std::vector<std::string>{"x", "w", "bias"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({4, 6}, 92))}});
}

TEST(OptimizerFusedMatMul, RefusesABiasThatCouldWidenAScalarResult) {
  // x and w both 1-D of unknown rank to the optimizer... here w is 1-D constant: x . w is a scalar
  // and Add(scalar, bias[1]) is [1]; fusing would lose that axis.
  ModelBuilder b(13);
  b.input("x", {4});
  b.m.graph.inputs.back().type.has_shape = false;
  b.init("w", random_tensor({4}, 93));
  b.init("bias", random_tensor({1}, 94));
  b.node("MatMul", {"x", "w"}, {"m"});
  b.node("Add", {"m", "bias"}, {"y"});
  b.output("y");
  EXPECT_EQ(ops_of(optimized(b.m, OptLevel::kAll)), (std::vector<std::string>{"MatMul", "Add"}));
  expect_same_numerics(b.m, {{"x", Value(random_tensor({4}, 95))}});
}

// fusions/fuse_bn_relu.cpp: BatchNormalization (constant statistics) + Relu -> nxrt::BatchNormRelu.
TEST(OptimizerBnRelu, FusesStandaloneBatchNormAndRelu) {
  ModelBuilder b(15);
  b.input("x", {1, 4, 5, 5});
  b.init("scale", random_tensor({4}, 7, 0.5f, 1.5f));
  b.init("bias", random_tensor({4}, 8));
  b.init("mean", random_tensor({4}, 9));
  b.init("var", random_tensor({4}, 10, 0.2f, 2.f));
  b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"bn"}, {A_f("epsilon", 1e-3f)});
  b.node("Relu", {"bn"}, {"y"});
  b.output("y");
  optimizer::Stats st;
  EXPECT_EQ(ops_of(optimized(b.m, OptLevel::kAll, &st)), (std::vector<std::string>{"nxrt::BatchNormRelu"}));
  EXPECT_EQ(st.counts["fused_bn_relu"], 1);
  expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 4, 5, 5}, 11, -3.f, 3.f))}}, 1e-5);
}

// fusions/fold_affine_pointwise.cpp: Mul(scalar) -> Add(scalar) -> 1x1 Conv (groups, stride 2) folds into W, B;
// a padded 1x1 Conv does not.
TEST(OptimizerAffinePointwise, FoldsScalarAffineIntoUnpaddedOneByOneConv) {
  for (int padded = 0; padded < 2; ++padded) {
    ModelBuilder b(13);
    b.input("x", {1, 4, 5, 5});
    b.init("s", Tensor::from_vector<float>(DataType::kFloat, {1}, {0.75f}));
    b.init("t", Tensor::from_vector<float>(DataType::kFloat, {1}, {-0.4f}));
    b.init("w", random_tensor({6, 2, 1, 1}, 5));
    b.init("bc", random_tensor({6}, 6));
    b.node("Relu", {"x"}, {"r"});
    b.node("Mul", {"s", "r"}, {"m"});
    b.node("Add", {"m", "t"}, {"a"});
    std::vector<ir::Attribute> attrs = {A_i("group", 2), A_is("strides", {2, 2})};
    if (padded) attrs.push_back(A_is("pads", {1, 1, 1, 1}));
    b.node("Conv", {"a", "w", "bc"}, {"y"}, attrs);
    b.output("y");
    optimizer::Stats st;
    ir::Model o = optimized(b.m, OptLevel::kAll, &st);
    EXPECT_EQ(count_op(o, "Mul") + count_op(o, "Add"), padded ? 2 : 0);
    EXPECT_EQ(st.counts["affine_folded_into_pointwise_conv"], padded ? 0 : 1);
    expect_same_numerics(b.m, {{"x", Value(random_tensor({1, 4, 5, 5}, 11, -2.f, 2.f))}}, 1e-5);
  }
}
