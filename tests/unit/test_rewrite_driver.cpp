// The optimizer's rewrite driver (src/optimizer/rewrite.h): a toy fusion run on it directly (anchor,
// taken nodes, the checks on swallowed values, opset gate, domain import, fused names), value renames
// in any node order, and for every pattern pass: whichever intermediate of its pattern a graph output or
// a subgraph also reads, the optimized model still computes every output as the unoptimized one does.
#include <gtest/gtest.h>

#include <functional>
#include <memory>

#include "optimizer/passes.h"
#include "optimizer/rewrite.h"
#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;

namespace {

// The toy fusion: Neg(Neg(x)) -> test.domain::NegNeg(x), written at the second Neg.
struct NegPair : optimizer::Match {
  int first = -1, second = -1;
};

bool match_neg_pair(optimizer::Rewriter& rw, int anchor, NegPair& m) {
  const ir::Node& a = rw.node(anchor);
  if (!optimizer::single_output(a) || !rw.sole_reader(a.outputs[0], "Neg", &m.second)) return false;
  m.first = anchor;
  m.nodes = {anchor, m.second};
  return true;
}

bool build_neg_pair(optimizer::Rewriter& rw, const NegPair& m, optimizer::Rewrite& r) {
  const ir::Node& a = rw.node(m.first);
  r.replace(m.second, optimizer::make_node(rw.fused_name(a, "NegNeg", "_negneg"), "test.domain", "NegNeg",
                                           {a.inputs[0]}, {rw.node(m.second).outputs[0]}));
  return true;
}

const optimizer::Fusion<NegPair> kNegPair{.stat = "neg_pairs",
                                          .anchor = {{"Neg"}},
                                          .min_opset = 7,
                                          .match = match_neg_pair,
                                          .build = build_neg_pair,
                                          .domain = "test.domain",
                                          .domain_version = 3};

// Runs one pass (`run`) over the main graph of `m`; returns its result.
int run_one(ir::Model& m, const std::function<int(optimizer::PassContext&, optimizer::GraphInfo&)>& run,
            optimizer::Stats* stats = nullptr) {
  optimizer::Options o;
  optimizer::PassContext pc;
  pc.model = &m;
  pc.options = &o;
  pc.stats = stats;
  optimizer::GraphInfo gi(m.graph, true, m.ir_version);
  return run(pc, gi);
}

int run_neg_pairs(ir::Model& m, optimizer::Stats* stats = nullptr) {
  return run_one(m, [](auto& pc, auto& gi) { return optimizer::run_fusion(pc, gi, kNegPair); }, stats);
}

std::vector<std::string> ops_and_inputs(const ir::Model& m) {
  std::vector<std::string> r;
  for (const auto& n : m.graph.nodes) {
    std::string s = (n.domain.empty() ? "" : n.domain + "::") + n.op_type + "(";
    for (size_t i = 0; i < n.inputs.size(); ++i) s += (i ? "," : "") + n.inputs[i];
    r.push_back(s + ")->" + n.outputs[0]);
  }
  return r;
}

ModelBuilder neg_chain(int length, int64_t opset = 13) {
  ModelBuilder b(opset);
  b.input("x", {3});
  std::string cur = "x";
  for (int i = 0; i < length; ++i) {
    const std::string next = i + 1 == length ? "y" : "n" + std::to_string(i);
    b.node("Neg", {cur}, {next});
    cur = next;
  }
  b.output("y");
  return b;
}

// An If whose branches both return `value`, read from the outer scope.
ir::Node& add_capturing_if(ModelBuilder& b, const std::string& value, const std::string& out) {
  auto branch = [&](const std::string& name) {
    auto g = std::make_shared<ir::Graph>();
    g->name = name;
    ir::Node n;
    n.op_type = "Identity";
    n.inputs = {value};
    n.outputs = {name + "_out"};
    g->nodes = {n};
    g->outputs = {ModelBuilder::vi(name + "_out", {})};
    g->outputs[0].type.has_shape = false;
    return g;
  };
  if (!b.m.graph.initializers.count("if_cond")) {
    Tensor cond(DataType::kBool, {});
    cond.data<bool>()[0] = true;
    b.init("if_cond", cond);
  }
  return b.node("If", {"if_cond"}, {out}, {A_g("then_branch", branch("then")), A_g("else_branch", branch("else"))});
}

}  // namespace

TEST(RewriteDriver, ReplacesThePatternAtItsLastNodeCountsAndImportsTheDomain) {
  ModelBuilder b = neg_chain(2);
  optimizer::Stats st;
  EXPECT_EQ(run_neg_pairs(b.m, &st), 1);
  EXPECT_EQ(ops_and_inputs(b.m), (std::vector<std::string>{"test.domain::NegNeg(x)->y"}));
  EXPECT_EQ(b.m.graph.nodes[0].name, "Neg_0_negneg");
  EXPECT_EQ(st.counts["neg_pairs"], 1);
  EXPECT_EQ(b.m.opset_for("test.domain"), 3);
  // An unnamed anchor: the kind and the count of rewrites before it in the pass.
  ModelBuilder u = neg_chain(4);
  for (auto& n : u.m.graph.nodes) n.name.clear();
  EXPECT_EQ(run_neg_pairs(u.m), 2);
  ASSERT_EQ(u.m.graph.nodes.size(), 2u);
  EXPECT_EQ(u.m.graph.nodes[0].name, "NegNeg_0");
  EXPECT_EQ(u.m.graph.nodes[1].name, "NegNeg_1");
}

TEST(RewriteDriver, ANodeTakenByOneRewriteStartsOrJoinsNoOther) {
  ModelBuilder b = neg_chain(3);  // Neg0 takes Neg1; Neg1 is no anchor any more; Neg2's output is the graph's
  EXPECT_EQ(run_neg_pairs(b.m), 1);
  EXPECT_EQ(ops_and_inputs(b.m), (std::vector<std::string>{"test.domain::NegNeg(x)->n1", "Neg(n1)->y"}));
}

TEST(RewriteDriver, RefusesAValueThatAGraphOutputASecondReaderOrASubgraphAlsoReads) {
  ModelBuilder out = neg_chain(2);
  out.output("n0");
  ModelBuilder two = neg_chain(2);
  two.node("Abs", {"n0"}, {"z"});
  two.output("z");
  ModelBuilder captured = neg_chain(2);
  add_capturing_if(captured, "n0", "z");
  captured.output("z");
  for (ModelBuilder* b : {&out, &two, &captured}) {
    const size_t nodes = b->m.graph.nodes.size();
    EXPECT_EQ(run_neg_pairs(b->m), 0);
    EXPECT_EQ(b->m.graph.nodes.size(), nodes);
    EXPECT_EQ(b->m.opset_for("test.domain"), 0);  // imported only when something was rewritten
  }
}

TEST(RewriteDriver, DoesNothingBelowItsOpset) {
  ModelBuilder b = neg_chain(2, 6);
  EXPECT_EQ(run_neg_pairs(b.m), 0);
  EXPECT_EQ(b.m.graph.nodes.size(), 2u);
}

// Identity removal renames readers; a chain resolves to its first value in any node order.
TEST(RewriteDriver, RenamesFollowChainsInAnyNodeOrder) {
  ModelBuilder b(13);
  b.input("x", {3});
  b.node("Neg", {"i2"}, {"y"});
  b.node("Identity", {"i1"}, {"i2"});
  b.node("Identity", {"r"}, {"i1"});
  b.node("Relu", {"x"}, {"r"});
  b.output("y");
  optimizer::Stats st;
  EXPECT_EQ(run_one(b.m, optimizer::eliminate_identities, &st), 2);
  EXPECT_EQ(ops_and_inputs(b.m), (std::vector<std::string>{"Neg(r)->y", "Relu(x)->r"}));
  EXPECT_EQ(st.counts["identity_removed"], 2);
}

namespace {

// One pattern pass's model: `build` adds nodes reading graph input "x" (of shape `x_shape`) and writing
// graph output "y"; `stat` is what level all counts for it.
struct PatternCase {
  const char* name;
  std::vector<int64_t> x_shape;
  std::function<void(ModelBuilder&)> build;
  const char* stat;
};

std::vector<PatternCase> pattern_cases() {
  std::vector<PatternCase> cases;
  cases.push_back({"layer_norm", {2, 3, 8}, [](ModelBuilder& b) {
                     b.init("gamma", random_tensor({8}, 1));
                     b.init("beta", random_tensor({8}, 2));
                     add_layer_norm(b, {-1}, "gamma");
                   }, "fused_layer_norm"});
  cases.push_back({"rms_norm", {3, 8}, [](ModelBuilder& b) { add_rms_norm(b, 8, true); }, "fused_rms_norm"});
  cases.push_back({"gelu_tanh", {4, 7}, [](ModelBuilder& b) { add_gelu(b, true, 1); }, "fused_gelu"});
  cases.push_back({"gelu_erf", {4, 7}, [](ModelBuilder& b) { add_gelu(b, false, 2); }, "fused_gelu"});
  cases.push_back({"attention", {2, 2, 4, 8}, [](ModelBuilder& b) {
                     b.init("kt", random_tensor({2, 2, 8, 4}, 4));
                     b.init("v", random_tensor({2, 2, 4, 8}, 5));
                     b.init("mask", random_tensor({1, 1, 4, 4}, 6));
                     b.init("scale", scalar_f(0.35f));
                     b.node("MatMul", {"x", "kt"}, {"qk"});
                     b.node("Mul", {"qk", "scale"}, {"qs"});
                     b.node("Add", {"mask", "qs"}, {"qm"});
                     b.node("Softmax", {"qm"}, {"p"}, {A_i("axis", -1)});
                     b.node("MatMul", {"p", "v"}, {"y"});
                   }, "fused_attention"});
  cases.push_back({"hard_swish", {2, 16}, [](ModelBuilder& b) {
                     b.init("three", scalar_f(3.f));
                     b.init("zero", scalar_f(0.f));
                     b.init("six", scalar_f(6.f));
                     b.node("Add", {"x", "three"}, {"a"});
                     b.node("Clip", {"a", "zero", "six"}, {"c"});
                     b.node("Mul", {"x", "c"}, {"m"});
                     b.node("Div", {"m", "six"}, {"y"});
                   }, "fused_hard_swish"});
  cases.push_back({"silu", {4, 8}, [](ModelBuilder& b) {
                     b.node("Sigmoid", {"x"}, {"s"});
                     b.node("Mul", {"s", "x"}, {"y"});
                   }, "fused_silu"});
  cases.push_back({"conv_bn_relu", {1, 3, 6, 6}, [](ModelBuilder& b) {
                     b.init("w", random_tensor({4, 3, 3, 3}, 7));
                     b.init("scale", random_tensor({4}, 8, 0.5f, 1.5f));
                     b.init("bias", random_tensor({4}, 9));
                     b.init("mean", random_tensor({4}, 10));
                     b.init("var", random_tensor({4}, 11, 0.2f, 2.f));
                     b.node("Conv", {"x", "w"}, {"c"}, {A_is("pads", {1, 1, 1, 1})});
                     b.node("BatchNormalization", {"c", "scale", "bias", "mean", "var"}, {"n"});
                     b.node("Relu", {"n"}, {"y"});
                   }, "conv_bn_folded"});
  cases.push_back({"conv_affine_residual", {1, 3, 5, 5}, [](ModelBuilder& b) {
                     b.init("w", random_tensor({4, 3, 3, 3}, 12));
                     b.init("s", random_tensor({1, 4, 1, 1}, 13));
                     b.init("t", random_tensor({4, 1, 1}, 14));
                     b.node("Conv", {"x", "w"}, {"c"}, {A_is("pads", {1, 1, 1, 1})});
                     b.node("Mul", {"c", "s"}, {"m"});
                     b.node("Add", {"t", "m"}, {"a"});
                     b.node("Neg", {"a"}, {"z"});
                     b.node("Add", {"a", "z"}, {"r"});  // a read twice: stays; the Mul/Add fold
                     b.node("LeakyRelu", {"r"}, {"y"}, {A_f("alpha", 0.2f)});
                   }, "conv_affine_folded"});
  cases.push_back({"bn_affine_relu_preact", {2, 4, 5, 5}, [](ModelBuilder& b) {
                     b.init("scale", random_tensor({4}, 15, 0.5f, 1.5f));
                     b.init("bias", random_tensor({4}, 16));
                     b.init("mean", random_tensor({4}, 17));
                     b.init("var", random_tensor({4}, 18, 0.2f, 2.f));
                     b.init("s", random_tensor({4, 1, 1}, 19));
                     b.init("w", random_tensor({6, 4, 1, 1}, 20));
                     b.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"n"});
                     b.node("Mul", {"n", "s"}, {"ns"});
                     b.node("Relu", {"ns"}, {"r"});
                     b.node("Conv", {"r", "w"}, {"y"});
                   }, "fused_preact_conv"});
  cases.push_back({"scalar_affine_pointwise", {1, 3, 4, 4}, [](ModelBuilder& b) {
                     b.init("a", scalar_f(0.7f));
                     b.init("t", scalar_f(0.2f));
                     b.init("w", random_tensor({5, 3, 1, 1}, 21));
                     b.init("wb", random_tensor({5}, 22));
                     b.node("Relu", {"x"}, {"r"});
                     b.node("Mul", {"r", "a"}, {"m"});
                     b.node("Add", {"t", "m"}, {"q"});
                     b.node("Conv", {"q", "w", "wb"}, {"y"});
                   }, "affine_folded_into_pointwise_conv"});
  cases.push_back({"matmul_bias_relu", {3, 8}, [](ModelBuilder& b) {
                     b.init("w", random_tensor({8, 6}, 23));
                     b.init("bias", random_tensor({6}, 24));
                     b.node("MatMul", {"x", "w"}, {"mm"});
                     b.node("Add", {"mm", "bias"}, {"a"});
                     b.node("Relu", {"a"}, {"y"});
                   }, "fused_matmul"});
  cases.push_back({"gemm_add_clip", {3, 8}, [](ModelBuilder& b) {
                     b.init("w", random_tensor({8, 6}, 25));
                     b.init("bias", random_tensor({6}, 26));
                     b.init("lo", scalar_f(-0.3f));
                     b.init("hi", scalar_f(0.4f));
                     b.node("Gemm", {"x", "w"}, {"g"}, {A_f("alpha", 0.5f), A_f("beta", 0.25f)});
                     b.node("Add", {"bias", "g"}, {"a"});
                     b.node("Clip", {"a", "lo", "hi"}, {"y"});
                   }, "fused_gemm"});
  return cases;
}

ModelBuilder pattern_model(const PatternCase& c) {
  ModelBuilder b(13);
  b.input("x", c.x_shape);
  c.build(b);
  b.output("y");
  return b;
}

// The node outputs of the pattern that the graph does not output.
std::vector<std::string> intermediates(const ModelBuilder& b) {
  std::vector<std::string> r;
  for (const auto& n : b.m.graph.nodes) {
    if (n.outputs[0] != "y") r.push_back(n.outputs[0]);
  }
  return r;
}

}  // namespace

TEST(RewriteDriver, EveryPatternPassFiresOnItsModel) {
  for (const PatternCase& c : pattern_cases()) {
    optimizer::Stats st;
    optimized(pattern_model(c).m, OptLevel::kAll, &st);
    EXPECT_GE(st.counts[c.stat], 1) << c.name << ": " << st.summary();
  }
}

namespace {

// For every pattern case and each of its intermediates v, `expose(b, v)` makes v read beyond the
// pattern; the outputs at levels basic and all must equal those at level disabled.
void check_each_intermediate_exposed(const char* how, uint32_t seed,
                                     const std::function<void(ModelBuilder&, const std::string&)>& expose) {
  for (const PatternCase& c : pattern_cases()) {
    const ModelBuilder base = pattern_model(c);
    const Tensor x = random_tensor(c.x_shape, seed, -2.f, 2.f);
    for (const std::string& v : intermediates(base)) {
      SCOPED_TRACE(std::string(c.name) + ", " + how + " " + v);
      ModelBuilder b = base;
      expose(b, v);
      expect_same_numerics(b.m, {{"x", Value(x)}}, 1e-4);
    }
  }
}

}  // namespace

TEST(RewriteDriver, AnIntermediateAGraphOutputReadsStaysComputed) {
  check_each_intermediate_exposed("graph output", 30, [](ModelBuilder& b, const std::string& v) { b.output(v); });
}

TEST(RewriteDriver, AnIntermediateASubgraphReadsStaysComputed) {
  check_each_intermediate_exposed("captured", 31, [](ModelBuilder& b, const std::string& v) {
    add_capturing_if(b, v, "captured");
    b.output("captured");
  });
}
