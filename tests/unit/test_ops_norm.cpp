// Normalization ops against straightforward references.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Tensor ft(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }
std::vector<float> rnd(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<float> vals(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}
Result<std::vector<Value>> run_op(const std::string& op, int64_t opset, std::vector<ir::Attribute> attrs,
                                  std::vector<Value> inputs, size_t outs = 1) {
  KernelRun run;
  run.op_type = op;
  run.opset = opset;
  run.attributes = std::move(attrs);
  run.inputs = std::move(inputs);
  run.num_outputs = outs;
  run.threads = 2;
  return run_kernel(run);
}
void near_all(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
}

}  // namespace

TEST(OpsNorm, BatchNormInferenceAndTraining) {
  std::mt19937 rng(1);
  const int64_t N = 2, C = 3, P = 5;
  auto x = rnd(rng, N * C * P), s = rnd(rng, C), b = rnd(rng, C), m = rnd(rng, C), v = rnd(rng, C);
  for (auto& e : v) e = std::fabs(e) + 0.1f;
  auto inf = run_op("BatchNormalization", 15, {attr_float("epsilon", 1e-3f)},
                    {ft({N, C, P}, x), ft({C}, s), ft({C}, b), ft({C}, m), ft({C}, v)});
  ASSERT_TRUE(inf.ok()) << inf.status().to_string();
  std::vector<float> want(x.size());
  for (int64_t i = 0; i < N * C * P; ++i) {
    const int64_t c = (i / P) % C;
    want[i] = (x[i] - m[c]) / std::sqrt(v[c] + 1e-3f) * s[c] + b[c];
  }
  near_all(vals(inf.value()[0]), want, 1e-5f);

  auto tr = run_op("BatchNormalization", 15, {attr_int("training_mode", 1)},
                   {ft({N, C, P}, x), ft({C}, s), ft({C}, b), ft({C}, m), ft({C}, v)}, 3);
  ASSERT_TRUE(tr.ok()) << tr.status().to_string();
  std::vector<float> rm(C), rv(C);
  for (int64_t c = 0; c < C; ++c) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p) sum += x[(n * C + c) * P + p];
    const double mean = sum / (N * P);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p) sq += std::pow(x[(n * C + c) * P + p] - mean, 2);
    const double var = sq / (N * P);
    rm[c] = float(m[c] * 0.9 + mean * 0.1);
    rv[c] = float(v[c] * 0.9 + var * 0.1);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < P; ++p) {
        const int64_t i = (n * C + c) * P + p;
        want[i] = float((x[i] - mean) / std::sqrt(var + 1e-5) * s[c] + b[c]);
      }
  }
  near_all(vals(tr.value()[0]), want, 1e-5f);
  near_all(vals(tr.value()[1]), rm, 1e-6f);
  near_all(vals(tr.value()[2]), rv, 1e-6f);
}

TEST(OpsNorm, BatchNormOpset6NonSpatial) {
  // spatial=0: statistics per (channel, position): scale etc. have shape (C, P).
  std::vector<float> x = {1, 2, 3, 4};  // N=1, C=2, P=2 as 1x2x2
  auto out = run_op("BatchNormalization", 6, {attr_int("spatial", 0), attr_int("is_test", 1), attr_float("epsilon", 0.f)},
                    {ft({1, 2, 2}, x), ft({2, 2}, {1, 2, 3, 4}), ft({2, 2}, {0, 0, 0, 1}), ft({2, 2}, {1, 1, 1, 1}),
                     ft({2, 2}, {1, 1, 1, 4})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  near_all(vals(out.value()[0]), {0, 2, 6, 7}, 1e-6f);
}

TEST(OpsNorm, LayerNormAxisAndStatOutputs) {
  std::mt19937 rng(2);
  auto x = rnd(rng, 2 * 3 * 4), s = rnd(rng, 3 * 4), b = rnd(rng, 4);
  auto out = run_op("LayerNormalization", 17, {attr_int("axis", 1)},
                    {ft({2, 3, 4}, x), ft({3, 4}, s), ft({4}, b)}, 3);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  std::vector<float> want(x.size()), means, invs;
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int i = 0; i < 12; ++i) m += x[r * 12 + i];
    m /= 12;
    for (int i = 0; i < 12; ++i) v += std::pow(x[r * 12 + i] - m, 2);
    v /= 12;
    const double inv = 1 / std::sqrt(v + 1e-5);
    means.push_back(float(m));
    invs.push_back(float(inv));
    for (int i = 0; i < 12; ++i) want[r * 12 + i] = float((x[r * 12 + i] - m) * inv * s[i] + b[i % 4]);
  }
  near_all(vals(out.value()[0]), want, 1e-5f);
  EXPECT_EQ(out.value()[1].tensor().shape(), (Dims{2, 1, 1}));
  near_all(vals(out.value()[1]), means, 1e-6f);
  near_all(vals(out.value()[2]), invs, 1e-5f);
}

TEST(OpsNorm, GroupNormOpset18PerGroupVs21PerChannel) {
  std::mt19937 rng(3);
  const int64_t C = 4, P = 3, G = 2;
  auto x = rnd(rng, C * P);
  auto ref = [&](const std::vector<float>& sc, const std::vector<float>& bi, bool per_group) {
    std::vector<float> y(x.size());
    for (int64_t g = 0; g < G; ++g) {
      double m = 0, v = 0;
      for (int64_t i = 0; i < 2 * P; ++i) m += x[g * 2 * P + i];
      m /= 2 * P;
      for (int64_t i = 0; i < 2 * P; ++i) v += std::pow(x[g * 2 * P + i] - m, 2);
      v /= 2 * P;
      for (int64_t i = 0; i < 2 * P; ++i) {
        const int64_t ch = g * 2 + i / P;
        const float s = per_group ? sc[g] : sc[ch], b = per_group ? bi[g] : bi[ch];
        y[g * 2 * P + i] = float((x[g * 2 * P + i] - m) / std::sqrt(v + 1e-5) * s + b);
      }
    }
    return y;
  };
  auto o18 = run_op("GroupNormalization", 18, {attr_int("num_groups", G)}, {ft({1, C, P}, x), ft({2}, {2, 3}), ft({2}, {1, -1})});
  ASSERT_TRUE(o18.ok()) << o18.status().to_string();
  near_all(vals(o18.value()[0]), ref({2, 3}, {1, -1}, true), 1e-5f);
  auto o21 = run_op("GroupNormalization", 21, {attr_int("num_groups", G)},
                    {ft({1, C, P}, x), ft({4}, {1, 2, 3, 4}), ft({4}, {0, 1, 0, 1})});
  ASSERT_TRUE(o21.ok()) << o21.status().to_string();
  near_all(vals(o21.value()[0]), ref({1, 2, 3, 4}, {0, 1, 0, 1}, false), 1e-5f);
  auto bad = run_op("GroupNormalization", 21, {attr_int("num_groups", 3)}, {ft({1, C, P}, x), ft({4}, {}), ft({4}, {})});
  EXPECT_FALSE(bad.ok());
}

TEST(OpsNorm, InstanceRmsLpMvn) {
  auto inst = run_op("InstanceNormalization", 6, {attr_float("epsilon", 0.f)}, {ft({1, 1, 2}, {1, 3}), ft({1}, {2}), ft({1}, {1})});
  ASSERT_TRUE(inst.ok());
  near_all(vals(inst.value()[0]), {-1, 3}, 1e-6f);
  auto rms = run_op("RMSNormalization", 23, {attr_float("epsilon", 0.f)}, {ft({1, 2}, {3, 4}), ft({2}, {1, 2})});
  ASSERT_TRUE(rms.ok()) << rms.status().to_string();
  const float r = std::sqrt(12.5f);
  near_all(vals(rms.value()[0]), {3 / r, 8 / r}, 1e-6f);
  auto lp = run_op("LpNormalization", 1, {attr_int("axis", 1), attr_int("p", 1)}, {ft({2, 2}, {1, 3, 0, 0})});
  ASSERT_TRUE(lp.ok());
  near_all(vals(lp.value()[0]), {0.25f, 0.75f, 0, 0}, 1e-6f);
  auto mvn = run_op("MeanVarianceNormalization", 13, {attr_ints("axes", {1})}, {ft({2, 2}, {1, 3, 5, 5})});
  ASSERT_TRUE(mvn.ok());
  near_all(vals(mvn.value()[0]), {-1, 1, 0, 0}, 1e-6f);
}
