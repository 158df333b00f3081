#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nxrt/float_types.h"
#include "kernel_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Tensor F(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }
Tensor I64(Dims shape, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(DataType::kInt64, shape, v); }

std::vector<float> fvals(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }

Tensor run1(KernelRun r) {
  auto out = run_kernel(r);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return Tensor();
  return out.value()[0].tensor();
}

}  // namespace

TEST(OpsReduction, SumAxesInputKeepdims) {
  Tensor x = F({2, 3, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  Tensor y = run1({"ReduceSum", "", 13, {attr_int("keepdims", 1)}, {x, I64({1}, {1})}});
  EXPECT_EQ(y.shape(), (Dims{2, 1, 2}));
  EXPECT_EQ(fvals(y), (std::vector<float>{9, 12, 27, 30}));
  // Old opset: axes attribute; scattered axes (0 and 2), no keepdims.
  y = run1({"ReduceSum", "", 11, {attr_ints("axes", {0, -1}), attr_int("keepdims", 0)}, {x}});
  EXPECT_EQ(y.shape(), (Dims{3}));
  EXPECT_EQ(fvals(y), (std::vector<float>{1 + 2 + 7 + 8, 3 + 4 + 9 + 10, 5 + 6 + 11 + 12}));
}

TEST(OpsReduction, EmptyAxesReduceAllOrNoop) {
  Tensor x = F({2, 2}, {1, -2, 3, -4});
  Tensor y = run1({"ReduceSum", "", 13, {attr_int("keepdims", 0)}, {x, I64({0}, {})}});
  EXPECT_EQ(y.shape(), (Dims{}));
  EXPECT_EQ(fvals(y), (std::vector<float>{-2}));
  y = run1({"ReduceSum", "", 13, {attr_int("noop_with_empty_axes", 1)}, {x, I64({0}, {})}});
  EXPECT_EQ(y.shape(), (Dims{2, 2}));
  EXPECT_EQ(fvals(y), (std::vector<float>{1, -2, 3, -4}));
  // Missing axes input at opset 18 with noop: identity of the element map (|x| for L1).
  y = run1({"ReduceL1", "", 18, {attr_int("noop_with_empty_axes", 1)}, {x}});
  EXPECT_EQ(fvals(y), (std::vector<float>{1, 2, 3, 4}));
  y = run1({"ReduceMax", "", 18, {attr_int("keepdims", 1)}, {x}});
  EXPECT_EQ(y.shape(), (Dims{1, 1}));
  EXPECT_EQ(fvals(y), (std::vector<float>{3}));
}

TEST(OpsReduction, ZeroSizeReducedAxisGivesIdentity) {
  Tensor x(DataType::kFloat, {2, 0, 4});
  auto ident = [&](const char* op) {
    Tensor y = run1({op, "", 18, {attr_int("keepdims", 1)}, {x, I64({1}, {1})}});
    EXPECT_EQ(y.shape(), (Dims{2, 1, 4})) << op;
    return fvals(y)[0];
  };
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(ident("ReduceSum"), 0.f);
  EXPECT_EQ(ident("ReduceProd"), 1.f);
  EXPECT_EQ(ident("ReduceMax"), -inf);
  EXPECT_EQ(ident("ReduceMin"), inf);
  EXPECT_EQ(ident("ReduceL1"), 0.f);
  EXPECT_EQ(ident("ReduceL2"), 0.f);
  EXPECT_EQ(ident("ReduceSumSquare"), 0.f);
  EXPECT_EQ(ident("ReduceLogSum"), -inf);
  EXPECT_EQ(ident("ReduceLogSumExp"), -inf);
  // Reducing a non-zero axis of a zero-size tensor gives an empty output.
  Tensor y = run1({"ReduceSum", "", 13, {attr_int("keepdims", 1)}, {x, I64({1}, {2})}});
  EXPECT_EQ(y.shape(), (Dims{2, 0, 1}));
}

TEST(OpsReduction, KindsAndDtypes) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  auto red = [&](const char* op) { return fvals(run1({op, "", 13, {attr_ints("axes", {1}), attr_int("keepdims", 0)}, {x}})); };
  EXPECT_EQ(red("ReduceMean"), (std::vector<float>{2, 5}));
  EXPECT_EQ(red("ReduceProd"), (std::vector<float>{6, 120}));
  EXPECT_EQ(red("ReduceMin"), (std::vector<float>{1, 4}));
  EXPECT_EQ(red("ReduceSumSquare"), (std::vector<float>{14, 77}));
  auto l2 = red("ReduceL2");
  EXPECT_NEAR(l2[1], std::sqrt(77.f), 1e-5);
  auto lse = red("ReduceLogSumExp");
  EXPECT_NEAR(lse[0], std::log(std::exp(1.f) + std::exp(2.f) + std::exp(3.f)), 1e-5);
  // Large values stay finite.
  Tensor big = F({2}, {1000, 1000});
  EXPECT_NEAR(fvals(run1({"ReduceLogSumExp", "", 13, {attr_int("keepdims", 0)}, {big}}))[0], 1000 + std::log(2.f), 1e-3);
  // int32 sum and bool max/min.
  Tensor xi = Tensor::from_vector<int32_t>(DataType::kInt32, {3}, {5, -7, 9});
  Tensor yi = run1({"ReduceSum", "", 13, {attr_int("keepdims", 0)}, {xi}});
  EXPECT_EQ(yi.dtype(), DataType::kInt32);
  EXPECT_EQ(yi.data<int32_t>()[0], 7);
  Tensor xb = Tensor::from_vector<uint8_t>(DataType::kBool, {2, 2}, {1, 0, 0, 0});
  Tensor yb = run1({"ReduceMax", "", 20, {attr_int("keepdims", 0)}, {xb, I64({1}, {1})}});
  EXPECT_EQ(yb.dtype(), DataType::kBool);
  EXPECT_EQ(yb.data<uint8_t>()[0], 1);
  EXPECT_EQ(yb.data<uint8_t>()[1], 0);
  // float16 mean computes in float.
  Tensor xh(DataType::kFloat16, {4});
  for (int i = 0; i < 4; ++i) xh.data<Float16>()[i] = Float16(static_cast<float>(i + 1));
  Tensor yh = run1({"ReduceMean", "", 13, {attr_int("keepdims", 0)}, {xh}});
  EXPECT_EQ(static_cast<float>(yh.data<Float16>()[0]), 2.5f);
}

TEST(OpsReduction, BadAxisIsAnError) {
  Tensor x = F({2, 3}, {1, 2, 3, 4, 5, 6});
  auto out = run_kernel({"ReduceSum", "", 13, {}, {x, I64({1}, {5})}});
  EXPECT_FALSE(out.ok());
}

TEST(OpsReduction, ArgMaxSelectLastIndex) {
  Tensor x = F({2, 3}, {1, 3, 3, 7, 7, 2});
  Tensor y = run1({"ArgMax", "", 13, {attr_int("axis", 1)}, {x}});
  EXPECT_EQ(y.shape(), (Dims{2, 1}));
  EXPECT_EQ(y.data<int64_t>()[0], 1);
  EXPECT_EQ(y.data<int64_t>()[1], 0);
  y = run1({"ArgMax", "", 13, {attr_int("axis", 1), attr_int("select_last_index", 1), attr_int("keepdims", 0)}, {x}});
  EXPECT_EQ(y.shape(), (Dims{2}));
  EXPECT_EQ(y.data<int64_t>()[0], 2);
  EXPECT_EQ(y.data<int64_t>()[1], 1);
  y = run1({"ArgMin", "", 13, {attr_int("axis", 0)}, {x}});
  EXPECT_EQ(std::vector<int64_t>(y.data<int64_t>(), y.data<int64_t>() + 3), (std::vector<int64_t>{0, 0, 1}));
}

TEST(OpsReduction, SoftmaxOldVsNewSemantics) {
  // [2, 2]: old opset axis=0 coerces to a single row of 4; new opset normalizes each column.
  Tensor x = F({2, 2}, {0, 1, 2, 3});
  Tensor y_old = run1({"Softmax", "", 11, {attr_int("axis", 0)}, {x}});
  Tensor y_new = run1({"Softmax", "", 13, {attr_int("axis", 0)}, {x}});
  float s = 0;
  for (float v : fvals(y_old)) s += v;
  EXPECT_NEAR(s, 1.f, 1e-6);
  auto n = fvals(y_new);
  EXPECT_NEAR(n[0] + n[2], 1.f, 1e-6);
  EXPECT_NEAR(n[1] + n[3], 1.f, 1e-6);
  // Default axis: 1 (old, rows of 3*4) vs -1 (new, rows of 4) on [2,3,4].
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i) v[i] = static_cast<float>(i % 5);
  Tensor x3 = F({2, 3, 4}, v);
  auto o = fvals(run1({"Softmax", "", 1, {}, {x3}}));
  auto w = fvals(run1({"Softmax", "", 13, {}, {x3}}));
  float so = 0, sw = 0;
  for (int i = 0; i < 12; ++i) so += o[i];
  for (int i = 0; i < 4; ++i) sw += w[i];
  EXPECT_NEAR(so, 1.f, 1e-5);
  EXPECT_NEAR(sw, 1.f, 1e-5);
  // Stability and LogSoftmax.
  Tensor big = F({1, 2}, {10000, 10000});
  EXPECT_NEAR(fvals(run1({"Softmax", "", 13, {}, {big}}))[0], 0.5f, 1e-6);
  EXPECT_NEAR(fvals(run1({"LogSoftmax", "", 13, {}, {big}}))[0], -std::log(2.f), 1e-6);
  // Hardmax picks the first maximum.
  Tensor h = F({1, 4}, {1, 5, 5, 0});
  EXPECT_EQ(fvals(run1({"Hardmax", "", 13, {}, {h}})), (std::vector<float>{0, 1, 0, 0}));
}

TEST(OpsReduction, CumSumAndCumProd) {
  Tensor x = F({3}, {1, 2, 3});
  Tensor ax = I64({}, {0});
  EXPECT_EQ(fvals(run1({"CumSum", "", 14, {}, {x, ax}})), (std::vector<float>{1, 3, 6}));
  EXPECT_EQ(fvals(run1({"CumSum", "", 14, {attr_int("exclusive", 1)}, {x, ax}})), (std::vector<float>{0, 1, 3}));
  EXPECT_EQ(fvals(run1({"CumSum", "", 14, {attr_int("reverse", 1)}, {x, ax}})), (std::vector<float>{6, 5, 3}));
  EXPECT_EQ(fvals(run1({"CumSum", "", 14, {attr_int("reverse", 1), attr_int("exclusive", 1)}, {x, ax}})),
            (std::vector<float>{5, 3, 0}));
  EXPECT_EQ(fvals(run1({"CumProd", "", 26, {attr_int("reverse", 1), attr_int("exclusive", 1)}, {x, ax}})),
            (std::vector<float>{6, 3, 1}));
  Tensor x2 = F({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor ax1 = Tensor::from_vector<int32_t>(DataType::kInt32, {}, {-1});
  EXPECT_EQ(fvals(run1({"CumSum", "", 14, {}, {x2, ax1}})), (std::vector<float>{1, 3, 6, 4, 9, 15}));
}

TEST(OpsReduction, OldSoftmaxNegativeAxis) {
  // Opset 6, axis -1 on [2, 3]: rows of 3.
  Tensor x = F({2, 3}, {1, 2, 3, 1, 2, 3});
  auto y = fvals(run1({"LogSoftmax", "", 6, {attr_int("axis", -1)}, {x}}));
  const float l = std::log(std::exp(1.f) + std::exp(2.f) + std::exp(3.f));
  EXPECT_NEAR(y[0], 1.f - l, 1e-5);
  EXPECT_NEAR(y[5], 3.f - l, 1e-5);
}

TEST(OpsReduction, FullReductionSplitAcrossThreads) {
  std::vector<float> v(200003);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 7) - 3.f;
  v[123456] = 100.f;
  Tensor x = F({static_cast<int64_t>(v.size())}, v);
  KernelRun r{"ReduceMax", "", 13, {attr_int("keepdims", 0)}, {x}};
  r.threads = 4;
  EXPECT_EQ(fvals(run1(r))[0], 100.f);
  KernelRun s{"ReduceSum", "", 13, {attr_int("keepdims", 0)}, {x}};
  s.threads = 4;
  double want = 0;
  for (float f : v) want += f;
  EXPECT_NEAR(fvals(run1(s))[0], want, 1e-2);
}
