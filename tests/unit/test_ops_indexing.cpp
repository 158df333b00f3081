// Unit tests for the indexing ops: negative / out-of-range indices, reductions, data-dependent outputs.
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "nxrt/tensor.h"

using namespace nxrt;
using nxrt::testing::attr_int;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Tensor F(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, std::move(shape), v); }
Tensor I64(Dims shape, std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(DataType::kInt64, std::move(shape), v);
}
Tensor I64v(std::vector<int64_t> v) {
  Dims s{static_cast<int64_t>(v.size())};
  return I64(s, v);
}
Tensor B(std::vector<uint8_t> v) {
  return Tensor::from_vector<uint8_t>(DataType::kBool, {static_cast<int64_t>(v.size())}, v);
}
std::vector<float> fv(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}
std::vector<int64_t> iv(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel());
}

Result<std::vector<Value>> run(const std::string& op, std::vector<Value> inputs, std::vector<ir::Attribute> attrs = {},
                               int64_t opset = 21, size_t n_out = 1) {
  KernelRun r;
  r.op_type = op;
  r.opset = opset;
  r.inputs = std::move(inputs);
  r.attributes = std::move(attrs);
  r.num_outputs = n_out;
  return run_kernel(r);
}

}  // namespace

TEST(OpsIndexing, GatherNegativeAndOutOfRange) {
  Tensor x = F({3, 2}, {0, 1, 2, 3, 4, 5});
  auto a = run("Gather", {x, I64v({-1, 0})});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a.value()[0].tensor().shape(), (Dims{2, 2}));
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{4, 5, 0, 1}));
  auto b = run("Gather", {x, I64v({3})});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("index 3"), std::string::npos) << b.status().message();
  EXPECT_FALSE(run("Gather", {x, I64v({-4})}).ok());
  EXPECT_FALSE(run("Gather", {x, I64v({0})}, {attr_int("axis", 2)}).ok());
  EXPECT_FALSE(run("Gather", {x, F({1}, {0})}).ok());  // float indices
  auto s = run("Gather", {I64({}, {}), I64v({})});
  EXPECT_FALSE(s.ok());  // axis 0 of a scalar
}

TEST(OpsIndexing, GatherElementsAndND) {
  Tensor x = F({2, 2}, {1, 2, 3, 4});
  auto a = run("GatherElements", {x, I64({2, 2}, {0, 0, 1, 0})}, {attr_int("axis", 1)});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{1, 1, 4, 3}));
  EXPECT_FALSE(run("GatherElements", {x, I64({2, 2}, {0, 2, 1, 0})}, {attr_int("axis", 1)}).ok());
  EXPECT_FALSE(run("GatherElements", {x, I64({3, 1}, {0, 0, 0})}, {attr_int("axis", 1)}).ok());
  auto n = run("GatherND", {x, I64({2, 2}, {0, 1, 1, -1})});
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(fv(n.value()[0]), (std::vector<float>{2, 4}));
  auto bd = run("GatherND", {x, I64({2, 1}, {1, 0})}, {attr_int("batch_dims", 1)});
  ASSERT_TRUE(bd.ok()) << bd.status().to_string();
  EXPECT_EQ(fv(bd.value()[0]), (std::vector<float>{2, 3}));
  EXPECT_FALSE(run("GatherND", {x, I64({1, 2}, {2, 0})}).ok());
  EXPECT_FALSE(run("GatherND", {x, I64({1, 3}, {0, 0, 0})}).ok());
}

TEST(OpsIndexing, ScatterReductionsAndErrors) {
  Tensor x = F({1, 5}, {1, 2, 3, 4, 5});
  auto a = run("ScatterElements", {x, I64({1, 2}, {1, 1}), F({1, 2}, {1.5f, 2})},
               {attr_int("axis", 1), attr_string("reduction", "add")}, 18);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{1, 5.5f, 3, 4, 5}));
  auto m = run("ScatterElements", {x, I64({1, 2}, {-1, 0}), F({1, 2}, {0, 9})},
               {attr_int("axis", 1), attr_string("reduction", "max")}, 18);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(fv(m.value()[0]), (std::vector<float>{9, 2, 3, 4, 5}));
  EXPECT_FALSE(run("ScatterElements", {x, I64({1, 1}, {5}), F({1, 1}, {0})}, {attr_int("axis", 1)}).ok());
  EXPECT_FALSE(run("ScatterElements", {x, I64({1, 1}, {0}), F({1, 2}, {0, 0})}, {attr_int("axis", 1)}).ok());
  // max is not a reduction at opset 16
  EXPECT_FALSE(run("ScatterElements", {x, I64({1, 1}, {0}), F({1, 1}, {0})}, {attr_string("reduction", "max")}, 16).ok());
  auto old = run("Scatter", {x, I64({1, 1}, {4}), F({1, 1}, {0})}, {attr_int("axis", 1)}, 9);
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(fv(old.value()[0]), (std::vector<float>{1, 2, 3, 4, 0}));
  Tensor y = F({2, 2}, {1, 2, 3, 4});
  auto nd = run("ScatterND", {y, I64({1, 1}, {1}), F({1, 2}, {7, 8})}, {attr_string("reduction", "mul")}, 18);
  ASSERT_TRUE(nd.ok()) << nd.status().to_string();
  EXPECT_EQ(fv(nd.value()[0]), (std::vector<float>{1, 2, 21, 32}));
  EXPECT_FALSE(run("ScatterND", {y, I64({1, 1}, {2}), F({1, 2}, {7, 8})}).ok());
  EXPECT_FALSE(run("ScatterND", {y, I64({1, 1}, {1}), F({1, 3}, {7, 8, 9})}).ok());
}

TEST(OpsIndexing, CompressNonZero) {
  Tensor x = F({3, 2}, {1, 2, 3, 4, 5, 6});
  auto a = run("Compress", {x, B({0, 1})}, {attr_int("axis", 0)});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a.value()[0].tensor().shape(), (Dims{1, 2}));
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{3, 4}));
  auto f = run("Compress", {x, B({0, 1, 0, 0, 1})});
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(fv(f.value()[0]), (std::vector<float>{2, 5}));
  EXPECT_FALSE(run("Compress", {x, B({0, 0, 0, 1})}, {attr_int("axis", 0)}).ok());
  auto nz = run("NonZero", {F({2, 2}, {0, 1, 2, 0})});
  ASSERT_TRUE(nz.ok());
  EXPECT_EQ(nz.value()[0].tensor().shape(), (Dims{2, 2}));
  EXPECT_EQ(iv(nz.value()[0]), (std::vector<int64_t>{0, 1, 1, 0}));
  auto none = run("NonZero", {F({3}, {0, 0, 0})});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none.value()[0].tensor().shape(), (Dims{1, 0}));
}

TEST(OpsIndexing, UniqueSortedAndUnsorted) {
  Tensor x = F({6}, {2, 1, 1, 3, 4, 3});
  auto s = run("Unique", {x}, {}, 11, 4);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(fv(s.value()[0]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(iv(s.value()[1]), (std::vector<int64_t>{1, 0, 3, 4}));
  EXPECT_EQ(iv(s.value()[2]), (std::vector<int64_t>{1, 0, 0, 2, 3, 2}));
  EXPECT_EQ(iv(s.value()[3]), (std::vector<int64_t>{2, 1, 2, 1}));
  auto u = run("Unique", {x}, {attr_int("sorted", 0)}, 11, 4);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(fv(u.value()[0]), (std::vector<float>{2, 1, 3, 4}));
  EXPECT_EQ(iv(u.value()[1]), (std::vector<int64_t>{0, 1, 3, 4}));
  EXPECT_EQ(iv(u.value()[2]), (std::vector<int64_t>{0, 1, 1, 2, 3, 2}));
  auto ax = run("Unique", {F({3, 2}, {1, 0, 0, 1, 1, 0})}, {attr_int("axis", 0)}, 11, 4);
  ASSERT_TRUE(ax.ok());
  EXPECT_EQ(fv(ax.value()[0]), (std::vector<float>{0, 1, 1, 0}));
  EXPECT_EQ(iv(ax.value()[3]), (std::vector<int64_t>{1, 2}));
}

TEST(OpsIndexing, TopKTiesAndVersions) {
  Tensor x = F({1, 5}, {3, 1, 3, 2, 1});
  auto a = run("TopK", {x, I64v({3})}, {}, 11, 2);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{3, 3, 2}));
  EXPECT_EQ(iv(a.value()[1]), (std::vector<int64_t>{0, 2, 3}));
  auto s = run("TopK", {x, I64v({2})}, {attr_int("largest", 0)}, 11, 2);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(iv(s.value()[1]), (std::vector<int64_t>{1, 4}));
  auto o1 = run("TopK", {x}, {attr_int("k", 1)}, 1, 2);
  ASSERT_TRUE(o1.ok()) << o1.status().to_string();
  EXPECT_EQ(iv(o1.value()[1]), (std::vector<int64_t>{0}));
  EXPECT_FALSE(run("TopK", {x, I64v({6})}, {}, 11, 2).ok());
  EXPECT_FALSE(run("TopK", {x, I64v({-1})}, {}, 11, 2).ok());
}

TEST(OpsIndexing, GatherThreadedMatchesNaive) {
  Tensor x(DataType::kFloat, {1000, 70});
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i);
  std::vector<int64_t> idx(1500);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 7919) % 1000) - (i % 2 ? 1000 : 0);
  KernelRun r;
  r.op_type = "Gather";
  r.inputs = {x, I64v(idx)};
  r.threads = 4;
  auto out = run_kernel(r);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = out.value()[0].tensor();
  ASSERT_EQ(y.shape(), (Dims{1500, 70}));
  bool same = true;
  for (size_t i = 0; i < idx.size() && same; ++i) {
    const int64_t row = idx[i] < 0 ? idx[i] + 1000 : idx[i];
    for (int64_t c = 0; c < 70; ++c) same = same && y.data<float>()[i * 70 + c] == x.data<float>()[row * 70 + c];
  }
  EXPECT_TRUE(same);
}
