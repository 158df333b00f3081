// ai.onnx.preview.training optimizers against hand-written update rules.
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {
Tensor ft(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }
Result<std::vector<Value>> run_train(const std::string& op, std::vector<ir::Attribute> attrs, std::vector<Value> in, size_t outs) {
  KernelRun run;
  run.op_type = op;
  run.domain = "ai.onnx.preview.training";
  run.opset = 1;
  run.attributes = std::move(attrs);
  run.inputs = std::move(in);
  run.num_outputs = outs;
  return run_kernel(run);
}
}  // namespace

TEST(OpsTraining, MomentumStandardAndNesterov) {
  const float r = 0.1f, a = 0.9f, b = 0.5f, n = 0.01f, x = 1.f, g = 2.f, v = 3.f;
  for (const char* mode : {"standard", "nesterov"}) {
    auto res = run_train("Momentum", {attr_float("alpha", a), attr_float("beta", b), attr_string("mode", mode), attr_float("norm_coefficient", n)},
                         {Tensor::scalar_float(r), Tensor::scalar_int64(3), ft({1}, {x}), ft({1}, {g}), ft({1}, {v})}, 2);
    ASSERT_TRUE(res.ok()) << res.status().to_string();
    const double gr = n * x + g, vn = a * v + b * gr;
    const double xn = std::string(mode) == "standard" ? x - r * vn : x - r * (gr + a * vn);
    EXPECT_NEAR(res.value()[0].tensor().data<float>()[0], xn, 1e-5);
    EXPECT_NEAR(res.value()[1].tensor().data<float>()[0], vn, 1e-5);
  }
}

TEST(OpsTraining, AdagradTwoTensors) {
  auto res = run_train("Adagrad", {attr_float("decay_factor", 0.1f), attr_float("epsilon", 1e-5f), attr_float("norm_coefficient", 0.f)},
                       {Tensor::scalar_float(0.5f), Tensor::scalar_int64(2), ft({1}, {1.f}), ft({2}, {2.f, 3.f}),
                        ft({1}, {0.5f}), ft({2}, {1.f, -1.f}), ft({1}, {0.f}), ft({2}, {1.f, 2.f})}, 4);
  ASSERT_TRUE(res.ok()) << res.status().to_string();
  const double rr = 0.5 / (1 + 2 * 0.1);
  EXPECT_NEAR(res.value()[0].tensor().data<float>()[0], 1 - rr * 0.5 / (std::sqrt(0.25) + 1e-5), 1e-5);
  EXPECT_NEAR(res.value()[1].tensor().data<float>()[1], 3 + rr * 1 / (std::sqrt(3.0) + 1e-5), 1e-5);
  EXPECT_NEAR(res.value()[3].tensor().data<float>()[0], 2.0, 1e-6);
}

// The inputs of ONNX's test_adam_multiple (tensor 1). ONNX 1.12's copy of that test omits the epsilon
// attribute (spec default 1e-6) yet its reference output was computed with epsilon = 0.01; the spec's
// formula with epsilon = 1e-6 gives 0.7559593, with 0.01 gives 0.7591362 (the 1.23 model sets 0.01).
TEST(OpsTraining, AdamEpsilonDefault) {
  auto scalar = [](float v) { return Value(Tensor::from_vector<float>(DataType::kFloat, {}, {v})); };
  std::vector<Value> in = {scalar(0.1f), Value(Tensor::scalar_int64(0)), Value(ft({1}, {1.f})), Value(ft({1}, {-1.f})),
                           Value(ft({1}, {2.f})), Value(ft({1}, {0.5f}))};
  std::vector<ir::Attribute> attrs = {attr_float("alpha", 0.95f), attr_float("beta", 0.85f), attr_float("norm_coefficient", 0.001f)};
  auto r = run_train("Adam", attrs, in, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NEAR((*r)[0].tensor().data<float>()[0], 0.7559593f, 1e-7);
  EXPECT_NEAR((*r)[1].tensor().data<float>()[0], 1.85005f, 1e-6);
  EXPECT_NEAR((*r)[2].tensor().data<float>()[0], 0.5747002f, 1e-6);
  attrs.push_back(attr_float("epsilon", 0.01f));
  r = run_train("Adam", attrs, in, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_NEAR((*r)[0].tensor().data<float>()[0], 0.7591362f, 1e-7);
}
