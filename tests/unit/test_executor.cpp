// The planned executor on hand-built graphs with test-only kernels (no reader, no CPU ops needed).
#include <gtest/gtest.h>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "session/executor.h"
#include <map>
#include <memory>

using namespace nxrt;

namespace {

Status add_f32(ep::KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.shape() != b.shape()) return ctx.error("shapes differ");
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DataType::kFloat, a.shape()));
  for (int64_t i = 0; i < a.numel(); ++i) out->data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  return Status::Ok();
}

// Runs its "body" subgraph with no inputs and forwards the first output.
Status call_body(ep::KernelContext& ctx) {
  ep::SubgraphRunner* body = ctx.info().subgraph("body");
  if (!body) return ctx.error("no body");
  NXRT_ASSIGN_OR_RETURN(auto outs, body->run(ctx, {}));
  return ctx.set_output(0, outs.at(0));
}

// An elementwise add that records, per node name, whether its output landed on input 0's buffer.
std::map<std::string, bool> g_in_place;
Status add_recording(ep::KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DataType::kFloat, a.shape()));
  g_in_place[ctx.info().node().name] = out->raw_data() == a.raw_data();
  for (int64_t i = 0; i < a.numel(); ++i) out->data<float>()[i] = a.data<float>()[i] + b.data<float>()[i];
  return Status::Ok();
}

Status huge_output(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DataType::kFloat, {int64_t{1} << 31, int64_t{1} << 31}));
  (void)out;
  return Status::Ok();
}

const ep::KernelRegistry& test_registry() {
  static ep::KernelRegistry* r = [] {
    auto* reg = new ep::KernelRegistry();
    reg->add_fn("", "TAdd", 1, 100, &add_f32);
    reg->add_fn("", "TCall", 1, 100, &call_body);
    reg->add_fn("", "TAddIP", 1, 100, &add_recording);
    reg->add_fn("", "THuge", 1, 100, &huge_output);
    reg->allow_inplace("", "TAddIP", 0);
    return reg;
  }();
  return *r;
}

ir::Node node(const std::string& name, const std::string& op, std::vector<std::string> in,
              std::vector<std::string> out) {
  ir::Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

ir::ValueInfo vi(const std::string& name) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = DataType::kFloat;
  return v;
}

struct Fixture {
  ir::Model model;
  session::PlanEnv env;
  Fixture() {
    model.opset_imports.push_back({"", 13});
    env.model = &model;
    env.registry = &test_registry();
  }
};

Tensor vec(std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, {static_cast<int64_t>(v.size())}, v); }

}  // namespace

TEST(Executor, RunsNodesInDependencyOrderAndReleasesDeadValues) {
  Fixture f;
  ir::Graph& g = f.model.graph;
  g.inputs = {vi("x")};
  g.outputs = {vi("z")};
  // Listed out of order on purpose: z needs y.
  g.nodes.push_back(node("second", "TAdd", {"y", "x"}, {"z"}));
  g.nodes.push_back(node("first", "TAdd", {"x", "x"}, {"y"}));
  auto plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  session::Frame frame;
  frame.plan = plan->get();
  frame.slots.assign((*plan)->num_slots(), Value());
  frame.slots[(*plan)->slot("x")] = Value(vec({1, 2}));
  ASSERT_TRUE((*plan)->prepare_frame(frame).ok());
  ASSERT_TRUE((*plan)->execute(frame, *std::make_unique<ep::ThreadPool>(1)).ok());
  const Tensor& z = frame.slots[(*plan)->slot("z")].tensor();
  EXPECT_EQ(z.data<float>()[0], 3.f);
  EXPECT_EQ(z.data<float>()[1], 6.f);
  // y and x had their last use in "second": released.
  EXPECT_TRUE(frame.slots[(*plan)->slot("y")].is_none());
  EXPECT_TRUE(frame.slots[(*plan)->slot("x")].is_none());
}

TEST(Executor, RejectsCycles) {
  Fixture f;
  ir::Graph& g = f.model.graph;
  g.inputs = {vi("x")};
  g.outputs = {vi("b")};
  g.nodes.push_back(node("n1", "TAdd", {"x", "b"}, {"a"}));
  g.nodes.push_back(node("n2", "TAdd", {"a", "x"}, {"b"}));
  auto plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("cycle"), std::string::npos) << plan.status().message();
}

TEST(Executor, NamesTheNodeForAMissingInputAndAnUnsupportedOp) {
  Fixture f;
  ir::Graph& g = f.model.graph;
  g.inputs = {vi("x")};
  g.outputs = {vi("y")};
  g.nodes.push_back(node("adder", "TAdd", {"x", "nowhere"}, {"y"}));
  auto plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(plan.status().message().find("adder"), std::string::npos);
  EXPECT_NE(plan.status().message().find("nowhere"), std::string::npos);

  g.nodes[0] = node("mystery", "Frobnicate", {"x"}, {"y"});
  g.nodes[0].domain = "com.example";
  f.model.opset_imports.push_back({"com.example", 3});
  plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_FALSE(plan.ok());
  const std::string& m = plan.status().message();
  EXPECT_EQ(plan.status().code(), StatusCode::kNotImplemented);
  EXPECT_NE(m.find("mystery"), std::string::npos) << m;
  EXPECT_NE(m.find("com.example::Frobnicate"), std::string::npos) << m;
  EXPECT_NE(m.find("opset 3"), std::string::npos) << m;
}

TEST(Executor, KernelErrorsCarryNodeAndInputShapes) {
  Fixture f;
  ir::Graph& g = f.model.graph;
  g.inputs = {vi("x"), vi("w")};
  g.outputs = {vi("y")};
  g.nodes.push_back(node("bad_add", "TAdd", {"x", "w"}, {"y"}));
  auto plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_TRUE(plan.ok());
  session::Frame frame;
  frame.plan = plan->get();
  frame.slots.assign((*plan)->num_slots(), Value());
  frame.slots[(*plan)->slot("x")] = Value(vec({1, 2}));
  frame.slots[(*plan)->slot("w")] = Value(vec({1, 2, 3}));
  ep::ThreadPool pool(1);
  Status s = (*plan)->execute(frame, pool);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("bad_add"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("float32[2]"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("float32[3]"), std::string::npos) << s.message();
}

TEST(Executor, SubgraphReadsOuterScopeAndKeepsItAlive) {
  Fixture f;
  ir::Graph& g = f.model.graph;
  g.inputs = {vi("x")};
  g.outputs = {vi("out")};
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  body->outputs = {vi("b_out")};
  body->nodes.push_back(node("inner", "TAdd", {"y", "x"}, {"b_out"}));  // y and x from outer scope
  g.nodes.push_back(node("call", "TCall", {}, {"out"}));
  ir::Attribute a;
  a.name = "body";
  a.type = ir::Attribute::Type::kGraph;
  a.g = body;
  g.nodes[0].attributes.push_back(a);
  g.nodes.push_back(node("make_y", "TAdd", {"x", "x"}, {"y"}));  // after the call in file order
  auto plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  session::Frame frame;
  frame.plan = plan->get();
  frame.slots.assign((*plan)->num_slots(), Value());
  frame.slots[(*plan)->slot("x")] = Value(vec({1, 2}));
  ASSERT_TRUE((*plan)->prepare_frame(frame).ok());
  ep::ThreadPool pool(1);
  Status s = (*plan)->execute(frame, pool);
  ASSERT_TRUE(s.ok()) << s.to_string();
  const Tensor& out = frame.slots[(*plan)->slot("out")].tensor();
  EXPECT_EQ(out.data<float>()[0], 3.f);
  EXPECT_EQ(out.data<float>()[1], 6.f);
}

TEST(Executor, InPlaceOnlyOverDyingUnsharedBuffers) {
  Fixture f;
  ir::Graph& g = f.model.graph;
  g.inputs = {vi("x")};
  g.outputs = {vi("z"), vi("w")};
  g.nodes.push_back(node("on_feed", "TAddIP", {"x", "x"}, {"y"}));     // x is the caller's: never overwritten
  g.nodes.push_back(node("y_dies", "TAddIP", {"y", "x"}, {"t"}));      // y dies here: reused
  g.nodes.push_back(node("t_lives", "TAddIP", {"t", "x"}, {"z"}));     // t still read below: not reused
  g.nodes.push_back(node("t_last", "TAddIP", {"t", "z"}, {"w"}));      // t dies here: reused
  auto plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  session::Frame frame;
  frame.plan = plan->get();
  frame.slots.assign((*plan)->num_slots(), Value());
  Value feed(vec({1, 2}));
  frame.slots[(*plan)->slot("x")] = feed;
  ASSERT_TRUE((*plan)->prepare_frame(frame).ok());
  ep::ThreadPool pool(1);
  ASSERT_TRUE((*plan)->execute(frame, pool).ok());
  EXPECT_FALSE(g_in_place["on_feed"]);
  EXPECT_TRUE(g_in_place["y_dies"]);
  EXPECT_FALSE(g_in_place["t_lives"]);
  EXPECT_TRUE(g_in_place["t_last"]);
  EXPECT_EQ(feed.tensor().data<float>()[1], 2.f);  // the caller's buffer is untouched
  // y = 2x = [2,4]; t = y + x = [3,6]; z = t + x = [4,8]; w = t + z = [7,14]
  EXPECT_EQ(frame.slots[(*plan)->slot("z")].tensor().data<float>()[1], 8.f);
  EXPECT_EQ(frame.slots[(*plan)->slot("w")].tensor().data<float>()[1], 14.f);
}

TEST(Executor, AbsurdOutputSizeIsAnErrorNamingTheNode) {
  Fixture f;
  ir::Graph& g = f.model.graph;
  g.inputs = {vi("x")};
  g.outputs = {vi("y")};
  g.nodes.push_back(node("big", "THuge", {"x"}, {"y"}));
  auto plan = session::GraphPlan::build(g, f.env, {});
  ASSERT_TRUE(plan.ok());
  session::Frame frame;
  frame.plan = plan->get();
  frame.slots.assign((*plan)->num_slots(), Value());
  frame.slots[(*plan)->slot("x")] = Value(vec({1}));
  ep::ThreadPool pool(1);
  Status s = (*plan)->execute(frame, pool);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("big"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
}
