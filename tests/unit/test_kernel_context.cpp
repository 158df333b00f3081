// The kernel-context pieces every kernel leans on: StandaloneContext (ep/standalone_context.h), the
// one context for running a kernel outside the executor, and KernelContext::required_tensor.
#include <gtest/gtest.h>

#include "ep/standalone_context.h"
#include "ep/thread_pool.h"
#include "ops/cpu_provider.h"

namespace nxrt {
namespace {

ir::Node make_node(const std::string& name, const std::string& op, size_t n_in, size_t n_out) {
  ir::Node n;
  n.name = name;
  n.op_type = op;
  for (size_t i = 0; i < n_in; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < n_out; ++i) n.outputs.push_back("out" + std::to_string(i));
  return n;
}

Tensor floats(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }

TEST(StandaloneContext, RunsAKernelAndOwnsItsOutputs) {
  ir::Node node = make_node("add", "Add", 2, 1);
  ep::KernelInfo info(node, 14);
  auto kernel = ops::cpu_provider_registry()->find("", "Add", 14)->factory(info);
  ASSERT_TRUE(kernel.ok());
  ep::ThreadPool pool(1);
  ep::StandaloneContext ctx(info, {floats({3}, {1, 2, 3}), floats({1}, {10})}, pool);
  ASSERT_TRUE(kernel.value()->compute(ctx).ok());
  ASSERT_EQ(ctx.outputs().size(), 1u);
  const Tensor& y = ctx.output(0).tensor();
  ASSERT_EQ(y.shape(), Dims{3});
  EXPECT_EQ(y.data<float>()[0], 11.f);
  EXPECT_EQ(y.data<float>()[2], 13.f);
}

TEST(StandaloneContext, OutputsFollowTheNodeAndBoundBuffersAreReused) {
  ir::Node node = make_node("n", "Op", 0, 3);
  node.outputs[1].clear();  // output 1 not used by the graph
  ep::KernelInfo info(node, 1);
  ep::ThreadPool pool(1);
  ep::StandaloneContext ctx(info, {}, pool);
  EXPECT_TRUE(ctx.output_requested(0));
  EXPECT_FALSE(ctx.output_requested(1));
  EXPECT_TRUE(ctx.output_requested(2));
  EXPECT_FALSE(ctx.output_requested(3));
  Tensor buffer(DataType::kFloat, {2, 4});
  ctx.bind_output(2, Value(buffer));
  auto same = ctx.allocate_output(2, DataType::kFloat, {2, 4});
  ASSERT_TRUE(same.ok());
  EXPECT_EQ((*same)->raw_data(), buffer.raw_data());
  auto other = ctx.allocate_output(2, DataType::kFloat, {2, 5});  // another shape: a new tensor
  ASSERT_TRUE(other.ok());
  EXPECT_NE((*other)->raw_data(), buffer.raw_data());
  EXPECT_EQ((*other)->shape(), (Dims{2, 5}));
  // Outputs beyond the node's are errors naming the node.
  auto bad = ctx.allocate_output(3, DataType::kFloat, {1});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("node 'n'"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ctx.set_output(3, Value()).ok());
}

TEST(StandaloneContext, NestedContextUsesTheOuterPoolWorkspacesAndErrors) {
  ir::Node outer_node = make_node("fused", "Outer", 1, 1);
  ir::Node inner_node = make_node("fused/inner", "Inner", 1, 1);
  ep::KernelInfo outer_info(outer_node, 1), inner_info(inner_node, 1);
  ep::ThreadPool pool(2);
  ep::StandaloneContext outer(outer_info, {floats({1}, {1})}, pool);
  ep::StandaloneContext inner(inner_info, {floats({2}, {1, 2})}, outer);
  EXPECT_EQ(&inner.pool(), &pool);
  auto ws = inner.workspace(256);
  ASSERT_TRUE(ws.ok());
  EXPECT_NE(ws.value(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ws.value()) % 64, 0u);
  const Status e = inner.error("boom", StatusCode::kInvalidArgument);
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(e.message().find("node 'fused'"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("boom"), std::string::npos);
  ASSERT_TRUE(inner.has_input(0));
  EXPECT_EQ(inner.input(0).numel(), 2);
}

TEST(KernelContext, RequiredTensorNamesAMissingOrNonTensorInput) {
  ir::Node node = make_node("g", "Gather", 3, 1);
  ep::KernelInfo info(node, 13);
  ep::ThreadPool pool(1);
  ep::StandaloneContext ctx(info, {floats({2}, {1, 2}), Value(), Value::sequence({})}, pool);
  auto ok = ctx.required_tensor(0, "data");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(&ok.value().get(), &ctx.input(0));
  auto missing = ctx.required_tensor(1, "indices");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(missing.status().message().find("input 'indices' (#1) is missing"), std::string::npos)
      << missing.status().message();
  EXPECT_NE(missing.status().message().find("node 'g'"), std::string::npos);
  auto seq = ctx.required_tensor(2, nullptr);
  ASSERT_FALSE(seq.ok());
  EXPECT_EQ(seq.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(seq.status().message().find("input #2 must be a tensor"), std::string::npos) << seq.status().message();
  EXPECT_FALSE(ctx.required_tensor(7, "beyond").ok());
}

// A kernel reading its inputs through required_tensor reports a missing input as an error, not a crash.
TEST(KernelContext, KernelsReportMissingRequiredInputs) {
  ir::Node node = make_node("gather", "Gather", 2, 1);
  node.inputs[1].clear();
  ep::KernelInfo info(node, 13);
  auto kernel = ops::cpu_provider_registry()->find("", "Gather", 13)->factory(info);
  ASSERT_TRUE(kernel.ok());
  ep::ThreadPool pool(1);
  ep::StandaloneContext ctx(info, {floats({2}, {1, 2}), Value()}, pool);
  const Status s = kernel.value()->compute(ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'indices'"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace nxrt
