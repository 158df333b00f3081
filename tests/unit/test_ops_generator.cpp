#include <gtest/gtest.h>

#include <cmath>

#include "nxrt/float_types.h"
#include "kernel_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_floats;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::attr_tensor;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {
Tensor F(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }
std::vector<float> fvals(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }
std::vector<Value> run(const KernelRun& r) {
  auto out = run_kernel(r);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? out.value() : std::vector<Value>(r.num_outputs);
}
Tensor run1(const KernelRun& r) { return run(r)[0].tensor(); }
}  // namespace

TEST(OpsGenerator, ConstantVariants) {
  EXPECT_EQ(fvals(run1({"Constant", "", 13, {attr_tensor("value", F({2}, {1, 2}))}, {}})), (std::vector<float>{1, 2}));
  Tensor f = run1({"Constant", "", 13, {attr_float("value_float", 2.5f)}, {}});
  EXPECT_EQ(f.shape(), (Dims{}));
  EXPECT_EQ(f.data<float>()[0], 2.5f);
  Tensor is = run1({"Constant", "", 13, {attr_ints("value_ints", {4, 5, 6})}, {}});
  EXPECT_EQ(is.dtype(), DataType::kInt64);
  EXPECT_EQ(is.shape(), (Dims{3}));
  Tensor s = run1({"Constant", "", 13, {attr_string("value_string", "hi")}, {}});
  EXPECT_EQ(s.dtype(), DataType::kString);
  EXPECT_EQ(s.string_data()[0], "hi");
  EXPECT_FALSE(run_kernel({"Constant", "", 13, {}, {}}).ok());
}

TEST(OpsGenerator, ConstantOfShapeRangeEyeLike) {
  Tensor shape = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {2, 3});
  Tensor v = Tensor::from_vector<int32_t>(DataType::kInt32, {1}, {7});
  Tensor y = run1({"ConstantOfShape", "", 9, {attr_tensor("value", v)}, {shape}});
  EXPECT_EQ(y.dtype(), DataType::kInt32);
  EXPECT_EQ(y.shape(), (Dims{2, 3}));
  EXPECT_EQ(y.data<int32_t>()[5], 7);
  Tensor empty = run1({"ConstantOfShape", "", 9, {}, {Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {0})}});
  EXPECT_EQ(empty.shape(), (Dims{0}));
  EXPECT_EQ(empty.dtype(), DataType::kFloat);

  auto i32 = [](int32_t x) { return Tensor::from_vector<int32_t>(DataType::kInt32, {}, {x}); };
  Tensor r = run1({"Range", "", 11, {}, {i32(10), i32(4), i32(-3)}});
  EXPECT_EQ(std::vector<int32_t>(r.data<int32_t>(), r.data<int32_t>() + r.numel()), (std::vector<int32_t>{10, 7}));
  Tensor rf = run1({"Range", "", 11, {}, {F({}, {1}), F({}, {2}), F({}, {0.25f})}});
  EXPECT_EQ(fvals(rf), (std::vector<float>{1, 1.25f, 1.5f, 1.75f}));
  EXPECT_EQ(run1({"Range", "", 11, {}, {i32(5), i32(1), i32(1)}}).shape(), (Dims{0}));

  Tensor e = run1({"EyeLike", "", 9, {attr_int("k", 1), attr_int("dtype", 11)}, {F({3, 3}, std::vector<float>(9))}});
  EXPECT_EQ(e.dtype(), DataType::kDouble);
  std::vector<double> ev(e.data<double>(), e.data<double>() + 9);
  EXPECT_EQ(ev, (std::vector<double>{0, 1, 0, 0, 0, 1, 0, 0, 0}));
}

TEST(OpsGenerator, DropoutInferenceAndTraining) {
  Tensor x = F({4}, {1, 2, 3, 4});
  auto out = run({"Dropout", "", 13, {}, {x}, 2});
  EXPECT_EQ(fvals(out[0].tensor()), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(out[1].tensor().dtype(), DataType::kBool);
  EXPECT_EQ(out[1].tensor().data<uint8_t>()[3], 1);
  // Opset 7 mask has the input's dtype.
  auto old = run({"Dropout", "", 7, {attr_float("ratio", 0.3f)}, {x}, 2});
  EXPECT_EQ(old[1].tensor().dtype(), DataType::kFloat);
  // Training mode with a seed: deterministic, kept elements scaled by 1/(1-ratio).
  std::vector<float> big(1000, 1.f);
  Tensor xb = F({1000}, big);
  Tensor ratio = F({}, {0.25f});
  Tensor train = Tensor::from_vector<uint8_t>(DataType::kBool, {}, {1});
  auto a = run({"Dropout", "", 13, {attr_int("seed", 3)}, {xb, ratio, train}, 2});
  auto b = run({"Dropout", "", 13, {attr_int("seed", 3)}, {xb, ratio, train}, 2});
  int kept = 0;
  for (int i = 0; i < 1000; ++i) {
    float v = a[0].tensor().data<float>()[i];
    EXPECT_EQ(v, b[0].tensor().data<float>()[i]);
    EXPECT_TRUE(v == 0.f || std::abs(v - 1.f / 0.75f) < 1e-6);
    EXPECT_EQ(v != 0.f, a[1].tensor().data<uint8_t>()[i] != 0);
    kept += v != 0.f;
  }
  EXPECT_GT(kept, 650);
  EXPECT_LT(kept, 850);
}

TEST(OpsGenerator, RandomOpsShapeDtypeRangeSeed) {
  KernelRun u{"RandomUniform", "", 1, {attr_ints("shape", {3, 50}), attr_float("low", 2.f), attr_float("high", 3.f), attr_float("seed", 1.f)}, {}};
  Tensor a = run1(u), b = run1(u);
  EXPECT_EQ(a.shape(), (Dims{3, 50}));
  EXPECT_EQ(a.dtype(), DataType::kFloat);
  for (int64_t i = 0; i < a.numel(); ++i) {
    EXPECT_GE(a.data<float>()[i], 2.f);
    EXPECT_LT(a.data<float>()[i], 3.f);
    EXPECT_EQ(a.data<float>()[i], b.data<float>()[i]);
  }
  KernelRun u2 = u;
  u2.attributes.back() = attr_float("seed", 2.f);
  EXPECT_NE(fvals(run1(u2)), fvals(a));

  Tensor n = run1({"RandomNormalLike", "", 1, {attr_int("dtype", 11), attr_float("mean", 5.f), attr_float("seed", 0.f)}, {F({2000}, std::vector<float>(2000))}});
  EXPECT_EQ(n.dtype(), DataType::kDouble);
  double mean = 0;
  for (int64_t i = 0; i < n.numel(); ++i) mean += n.data<double>()[i];
  EXPECT_NEAR(mean / 2000, 5.0, 0.1);

  Tensor p = F({4}, {0, 1, 0, 1});
  Tensor bern = run1({"Bernoulli", "", 15, {attr_int("dtype", 9), attr_float("seed", 0.f)}, {p}});
  EXPECT_EQ(bern.dtype(), DataType::kBool);
  EXPECT_EQ(std::vector<uint8_t>(bern.data<uint8_t>(), bern.data<uint8_t>() + 4), (std::vector<uint8_t>{0, 1, 0, 1}));

  // Multinomial: all mass on class 2.
  Tensor lp = F({2, 3}, {-1e9f, -1e9f, 0, 0, -1e9f, -1e9f});
  Tensor m = run1({"Multinomial", "", 7, {attr_int("sample_size", 5), attr_float("seed", 0.f)}, {lp}});
  EXPECT_EQ(m.dtype(), DataType::kInt32);
  EXPECT_EQ(m.shape(), (Dims{2, 5}));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(m.data<int32_t>()[i], 2);
    EXPECT_EQ(m.data<int32_t>()[5 + i], 0);
  }
}

TEST(OpsGenerator, LossesReductionIgnoreIndexWeights) {
  // logp [2, 3], targets [1, 2], weights [1, 2, 3].
  Tensor x = F({2, 3}, {-1, -2, -3, -4, -5, -6});
  Tensor t = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 2});
  Tensor w = F({3}, {1, 2, 3});
  Tensor none = run1({"NegativeLogLikelihoodLoss", "", 13, {attr_string("reduction", "none")}, {x, t, w}});
  EXPECT_EQ(fvals(none), (std::vector<float>{4, 18}));
  Tensor mean = run1({"NegativeLogLikelihoodLoss", "", 13, {}, {x, t, w}});
  EXPECT_NEAR(mean.data<float>()[0], 22.f / 5.f, 1e-6);
  Tensor ign = run1({"NegativeLogLikelihoodLoss", "", 13, {attr_int("ignore_index", 2), attr_string("reduction", "sum")}, {x, t, w}});
  EXPECT_EQ(ign.data<float>()[0], 4.f);
  // SCE: loss equals NLL of log_softmax; log_prob output.
  auto sce = run({"SoftmaxCrossEntropyLoss", "", 13, {attr_string("reduction", "sum")}, {x, t}, 2});
  const Tensor& lp = sce[1].tensor();
  EXPECT_EQ(lp.shape(), (Dims{2, 3}));
  float expect = -(lp.data<float>()[1] + lp.data<float>()[5]);
  EXPECT_NEAR(sce[0].tensor().data<float>()[0], expect, 1e-5);
  // Out-of-range target is an error.
  Tensor bad = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 3});
  EXPECT_FALSE(run_kernel({"NegativeLogLikelihoodLoss", "", 13, {}, {x, bad}}).ok());
}

TEST(OpsGenerator, ConstantOfShapeSubByte) {
  Tensor v = Tensor::from_vector<uint8_t>(DataType::kInt4, {1}, {0x0D});  // int4 -3
  Tensor y = run1({"ConstantOfShape", "", 25, {attr_tensor("value", v)}, {Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {3})}});
  ASSERT_EQ(y.dtype(), DataType::kInt4);
  EXPECT_EQ(y.data<uint8_t>()[0], 0xDD);
  EXPECT_EQ(y.data<uint8_t>()[1], 0x0D);
}
