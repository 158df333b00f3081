// ops/elementwise/vec_math.h: each map at every tier the CPU has against the double-precision definition
// (within the accuracy vec_math.h states), special values, tails of every length, the bias form, the
// two tiers' bits against each other; and the ops that use them (Exp, Tanh, Erf, Sqrt, Gelu, com.microsoft
// Gelu / FastGelu / BiasGelu) at each tier against their scalar reference loops (isa=scalar).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu_features.h"
#include "kernel_test_util.h"
#include "ops/elementwise/vec_math.h"

namespace {

using namespace nxrt;
using ops::vecmath::Fn;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

struct Tier {
  const char* name;
  ep::IsaTier tier;
};
// The vector tiers this CPU has; prints the ones it cannot test.
std::vector<Tier> vector_tiers() {
  std::vector<Tier> out;
  for (Tier t : {Tier{"avx2", ep::IsaTier::kAvx2}, Tier{"avx512", ep::IsaTier::kAvx512}}) {
    if (ep::cpu_isa_tier() >= t.tier) out.push_back(t);
    else std::printf("[ SKIPPED  ] tier %s: this CPU's best tier is %s\n", t.name, ep::isa_tier_name(ep::cpu_isa_tier()));
  }
  return out;
}

const char* fn_name(Fn f) {
  switch (f) {
    case Fn::kExp: return "exp";
    case Fn::kTanh: return "tanh";
    case Fn::kErf: return "erf";
    case Fn::kGeluErf: return "gelu(erf)";
    case Fn::kGeluTanh: return "gelu(tanh)";
    case Fn::kSqrt: return "sqrt";
    case Fn::kSigmoid: return "sigmoid";
    case Fn::kLog: return "log";
  }
  return "?";
}

double exact(Fn f, double x) {
  switch (f) {
    case Fn::kExp: return std::exp(x);
    case Fn::kTanh: return std::tanh(x);
    case Fn::kErf: return std::erf(x);
    case Fn::kGeluErf: return x < 0 ? 0.5 * x * std::erfc(-x / std::sqrt(2.0)) : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
    case Fn::kGeluTanh: {
      const double u = std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x);
      return x / (1 + std::exp(-2 * u));  // = x/2 (1 + tanh u), without the cancellation
    }
    case Fn::kSqrt: return std::sqrt(x);
    case Fn::kSigmoid: return 1 / (1 + std::exp(-x));
    case Fn::kLog: return std::log(x);
  }
  return 0;
}

// Whether got (float) is within the stated accuracy of the exact value at x.
bool close_enough(Fn f, float x, float got, double want) {
  const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(want), 1.1754943508222875e-38)) - 23);
  const double err = std::fabs(double(got) - want);
  switch (f) {
    case Fn::kExp:
      if (x < -87.33654f) return got == 0.f;  // flushed below FLT_MIN
      if (want > std::numeric_limits<float>::max()) return got == kInf;
      return err <= 2 * ulp;
    case Fn::kTanh: return err <= 2 * ulp;
    case Fn::kErf: return err <= 3 * ulp || err <= 1e-7;
    case Fn::kGeluErf:
    case Fn::kGeluTanh: {
      if (std::fabs(want) < 1e-30) return std::fabs(got) < 1e-29;
      // Past |x| ~ 3 the exponent's argument (x^2 / 2, or 2u) carries its own float rounding, which
      // e^arg turns into a relative error of about arg * 2^-23.
      const double arg = f == Fn::kGeluErf ? 0.5 * double(x) * x
                                           : std::fabs(2 * std::sqrt(2 / M_PI) * (x + 0.044715 * double(x) * x * x));
      return err <= (1e-6 + 2.4e-7 * arg) * std::fabs(want) + 1e-37;
    }
    case Fn::kSqrt: return got == std::sqrt(x);
    case Fn::kSigmoid:
      if (x > 87.33654f) return std::fabs(got - want) <= 2 * ulp;  // e^-x flushed to 0: exactly 1
      if (want < 1.1754943508222875e-38)  // a subnormal result, or 0 where e^-x = inf
        return got == 0.f || std::fabs(got - want) <= 4 * 1.401298464324817e-45;
      return err <= 3 * ulp;
    case Fn::kLog:
      if (x == 0.f) return got == -kInf;
      return err <= 2 * ulp;
  }
  return false;
}

std::vector<float> inputs(Fn f) {
  std::vector<float> v = {0.f, -0.f, 1e-30f, -1e-30f, 1e-8f, -1e-8f, 0.5f, -0.5f, 0.62499994f, 0.625f, -0.625f,
                          0.9999999f, 1.f, -1.f, 1.0000001f, 2.f, -2.f, 3.9f, -3.9f, 9.f, -9.f, 13.f, -13.f, 20.f,
                          -20.f, 88.7f, -87.3f, -87.34f, -100.f, 100.f};
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> unit(-1.f, 1.f), mid(-6.f, 6.f), wide(-90.f, 90.f);
  for (int i = 0; i < 60000; ++i) v.push_back(i % 3 == 0 ? unit(rng) : i % 3 == 1 ? mid(rng) : wide(rng));
  for (int e = -40; e <= 6; ++e) v.push_back(std::ldexp(1.3f, e)), v.push_back(-std::ldexp(1.3f, e));
  if (f == Fn::kSqrt || f == Fn::kLog)
    for (float& x : v) x = std::fabs(x);
  if (f == Fn::kLog)  // subnormals, the edges of the mantissa split, huge values
    for (float x : {1e-40f, 3e-44f, 1.17549435e-38f, 1.41421354f, 1.41421366f, 0.70710677f, 1.0000001f, 0.99999994f,
                    3.4e38f})
      v.push_back(x);
  return v;
}

std::vector<float> run_map(ep::IsaTier tier, Fn f, const std::vector<float>& x, const float* bias = nullptr) {
  std::vector<float> y(x.size(), 123.f);
  ops::vecmath::map_for_tier(tier)(f, x.data(), bias, y.data(), static_cast<int64_t>(x.size()));
  return y;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Runs `run` on 2 threads at tier `isa`: output 0 as floats (empty, with a failure recorded, on an error).
std::vector<float> run_at_tier(nxrt::testing::KernelRun run, const char* isa) {
  run.threads = 2;
  run.overrides = {{"isa", isa}};
  auto out = nxrt::testing::run_kernel(run);
  EXPECT_TRUE(out.ok()) << run.domain << " " << run.op_type << " at " << isa << ": " << out.status().message();
  if (!out.ok()) return {};
  const Tensor& y = out.value()[0].tensor();
  return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
}

Value ftensor(const Dims& shape, const std::vector<float>& v) {
  return Value(Tensor::from_vector(DataType::kFloat, shape, v));
}

const Fn kAll[] = {Fn::kExp, Fn::kTanh, Fn::kErf, Fn::kGeluErf, Fn::kGeluTanh, Fn::kSqrt, Fn::kSigmoid, Fn::kLog};

}  // namespace

TEST(VecMath, MapsMatchTheDefinitionAtEveryTier) {
  for (const Tier& t : vector_tiers()) {
    for (Fn f : kAll) {
      const std::vector<float> x = inputs(f);
      const std::vector<float> y = run_map(t.tier, f, x);
      int bad = 0;
      for (size_t i = 0; i < x.size() && bad < 5; ++i) {
        const double want = exact(f, x[i]);
        if (!close_enough(f, x[i], y[i], want)) {
          ++bad;
          ADD_FAILURE() << t.name << " " << fn_name(f) << "(" << x[i] << ") = " << y[i] << ", want " << want;
        }
      }
    }
  }
}

TEST(VecMath, SpecialValues) {
  struct Case {
    Fn f;
    float x, want;  // want NaN: any NaN
  };
  const Case cases[] = {
      {Fn::kExp, kInf, kInf},          {Fn::kExp, -kInf, 0.f},          {Fn::kExp, kNaN, kNaN},
      {Fn::kTanh, kInf, 1.f},          {Fn::kTanh, -kInf, -1.f},        {Fn::kTanh, kNaN, kNaN},
      {Fn::kTanh, -0.f, -0.f},         {Fn::kErf, kInf, 1.f},           {Fn::kErf, -kInf, -1.f},
      {Fn::kErf, kNaN, kNaN},          {Fn::kErf, -0.f, -0.f},          {Fn::kGeluErf, kInf, kInf},
      {Fn::kGeluErf, -kInf, kNaN},     {Fn::kGeluErf, kNaN, kNaN},      {Fn::kGeluErf, -30.f, -0.f},
      {Fn::kGeluTanh, kInf, kInf},     {Fn::kGeluTanh, -kInf, kNaN},    {Fn::kGeluTanh, kNaN, kNaN},
      {Fn::kGeluTanh, -30.f, -0.f},    {Fn::kSqrt, -0.f, -0.f},         {Fn::kSqrt, kInf, kInf},
      {Fn::kSqrt, -1.f, kNaN},         {Fn::kSqrt, kNaN, kNaN},         {Fn::kSigmoid, kInf, 1.f},
      {Fn::kSigmoid, -kInf, 0.f},      {Fn::kSigmoid, kNaN, kNaN},      {Fn::kLog, 0.f, -kInf},
      {Fn::kLog, -0.f, -kInf},         {Fn::kLog, -1.f, kNaN},          {Fn::kLog, kInf, kInf},
      {Fn::kLog, -kInf, kNaN},         {Fn::kLog, kNaN, kNaN},          {Fn::kLog, 1.f, 0.f},
  };
  for (const Tier& t : vector_tiers()) {
    for (const Case& c : cases) {
      const float got = run_map(t.tier, c.f, {c.x})[0];
      const std::string what = std::string(t.name) + " " + fn_name(c.f) + "(" + std::to_string(c.x) + ") = " + std::to_string(got);
      if (std::isnan(c.want)) EXPECT_TRUE(std::isnan(got)) << what;
      else EXPECT_EQ(bits(got), bits(c.want)) << what;  // signs of zero included
    }
  }
}

// Every tail length of either width, the lanes past n untouched; the bias form equal to adding first.
TEST(VecMath, TailsAndBias) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> d(-4.f, 4.f);
  for (const Tier& t : vector_tiers()) {
    for (Fn f : kAll) {
      for (int64_t n = 0; n <= 40; ++n) {
        std::vector<float> x(static_cast<size_t>(n) + 3), b(x.size()), xb(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          x[i] = d(rng), b[i] = d(rng);
          if (f == Fn::kSqrt || f == Fn::kLog) x[i] = std::fabs(x[i]) + 5.f;
          xb[i] = x[i] + b[i];
        }
        std::vector<float> y(x.size(), 7.f), yb(x.size(), 7.f), ysum(x.size(), 7.f);
        const auto map = ops::vecmath::map_for_tier(t.tier);
        map(f, x.data(), nullptr, y.data(), n);
        map(f, x.data(), b.data(), yb.data(), n);
        map(f, xb.data(), nullptr, ysum.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_TRUE(close_enough(f, x[i], y[i], exact(f, x[i]))) << t.name << " " << fn_name(f) << " n " << n << " at " << i;
          EXPECT_EQ(bits(yb[i]), bits(ysum[i])) << t.name << " " << fn_name(f) << " bias, n " << n << " at " << i;
        }
        for (size_t i = static_cast<size_t>(n); i < x.size(); ++i) {
          EXPECT_EQ(y[i], 7.f) << t.name << " " << fn_name(f) << " wrote past n " << n;
          EXPECT_EQ(yb[i], 7.f) << t.name << " " << fn_name(f) << " wrote past n " << n;
        }
      }
    }
  }
}

TEST(VecMath, Avx512HasAvx2Bits) {
  if (ep::cpu_isa_tier() < ep::IsaTier::kAvx512) {
    std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
    GTEST_SKIP();
  }
  for (Fn f : kAll) {
    const std::vector<float> x = inputs(f);
    const std::vector<float> a = run_map(ep::IsaTier::kAvx2, f, x), b = run_map(ep::IsaTier::kAvx512, f, x);
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(a[i]) && std::isnan(b[i])) continue;
      ASSERT_EQ(bits(a[i]), bits(b[i])) << fn_name(f) << "(" << x[i] << "): avx2 " << a[i] << ", avx512 " << b[i];
    }
  }
}

// The ops at each vector tier against their own scalar loops (isa=scalar: libm), on random shapes and 2
// threads (the maps run per chunk).
TEST(VecMath, OpsMatchTheirScalarReference) {
  struct OpCase {
    const char* op;
    const char* domain;
    int64_t opset;
    std::vector<ir::Attribute> attrs;
    bool bias;
    double rtol, atol;
  };
  const OpCase ops_[] = {
      {"Exp", "", 21, {}, false, 3e-7, 0},
      {"Tanh", "", 21, {}, false, 3e-7, 0},
      {"Erf", "", 21, {}, false, 4e-7, 1e-7},
      {"Sqrt", "", 21, {}, false, 0, 0},
      {"Log", "", 21, {}, false, 3e-7, 1e-7},
      {"Gelu", "", 20, {}, false, 1e-6, 2e-7},
      {"Gelu", "", 20, {nxrt::testing::attr_string("approximate", "tanh")}, false, 1e-6, 2e-7},
      {"Gelu", "com.microsoft", 1, {}, false, 1e-6, 2e-7},
      {"FastGelu", "com.microsoft", 1, {}, true, 1e-6, 2e-7},
      {"FastGelu", "com.microsoft", 1, {}, false, 1e-6, 2e-7},
      {"BiasGelu", "com.microsoft", 1, {}, true, 1e-6, 2e-7},
  };
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> d(-7.f, 7.f);
  for (const Tier& t : vector_tiers()) {
    for (const OpCase& c : ops_) {
      for (int it = 0; it < 4; ++it) {
        const int64_t rows = 1 + static_cast<int64_t>(rng() % 300), cols = 1 + static_cast<int64_t>(rng() % 130);
        std::vector<float> x(static_cast<size_t>(rows * cols)), b(static_cast<size_t>(cols));
        const bool positive = std::string(c.op) == "Sqrt" || std::string(c.op) == "Log";
        for (float& v : x) v = positive ? std::fabs(d(rng)) : d(rng);
        for (float& v : b) v = d(rng) * 0.2f;
        nxrt::testing::KernelRun run;
        run.op_type = c.op;
        run.domain = c.domain;
        run.opset = c.opset;
        run.attributes = c.attrs;
        run.inputs.push_back(ftensor(Dims{rows, cols}, x));
        if (c.bias) run.inputs.push_back(ftensor(Dims{cols}, b));
        const std::vector<float> ref = run_at_tier(run, "scalar"), got = run_at_tier(run, t.name);
        ASSERT_EQ(ref.size(), got.size());
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(got[i], ref[i], c.rtol * std::fabs(ref[i]) + c.atol)
              << t.name << " " << c.domain << " " << c.op << " [" << rows << ", " << cols << "] at " << i << ", x "
              << x[i];
      }
    }
  }
}

// Softmax / LogSoftmax over the last axis (vec_math.h's row bodies) and down the columns (its exp map), LayerNormalization /
// RMSNormalization (contrib/skip_norm_rows.h's) at each vector tier against their scalar loops, on
// random shapes at 2 threads; rows holding -inf (masked scores) and a NaN row for Softmax.
TEST(VecMath, SoftmaxAndNormsMatchTheirScalarReference) {
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> d(-9.f, 9.f);
  struct OpCase {
    const char* op;
    int64_t opset;
    int extra;  // 0: none; 1: Scale; 2: Scale and B
    double rtol, atol;
    int64_t axis = -1;  // 0: Softmax down the columns (the strided path)
  };
  const OpCase cases[] = {{"Softmax", 13, 0, 2e-6, 1e-9},         {"LogSoftmax", 13, 0, 2e-6, 2e-6},
                          {"Softmax", 13, 0, 2e-6, 1e-9, 0},      {"LayerNormalization", 17, 2, 2e-6, 2e-6},
                          {"LayerNormalization", 17, 1, 2e-6, 2e-6}, {"RMSNormalization", 23, 1, 2e-6, 2e-6}};
  for (const Tier& t : vector_tiers()) {
    for (const OpCase& c : cases) {
      for (int it = 0; it < 4; ++it) {
        const int64_t rows = 1 + static_cast<int64_t>(rng() % 100), cols = 1 + static_cast<int64_t>(rng() % 300);
        std::vector<float> x(static_cast<size_t>(rows * cols)), sc(static_cast<size_t>(cols)), b(sc.size());
        for (float& v : x) v = d(rng);
        for (float& v : sc) v = d(rng) * 0.3f;
        for (float& v : b) v = d(rng) * 0.3f;
        const bool softmax = c.extra == 0;
        if (softmax) {
          x[static_cast<size_t>(rng() % x.size())] = -kInf;
          if (rows > 2) x[static_cast<size_t>(cols + rng() % cols)] = kNaN;  // all of row 1 NaN
        }
        nxrt::testing::KernelRun run;
        run.op_type = c.op;
        run.opset = c.opset;
        if (c.axis != -1) run.attributes = {nxrt::testing::attr_int("axis", c.axis)};
        run.inputs.push_back(ftensor(Dims{rows, cols}, x));
        if (c.extra >= 1) run.inputs.push_back(ftensor(Dims{cols}, sc));
        if (c.extra >= 2) run.inputs.push_back(ftensor(Dims{cols}, b));
        const std::vector<float> ref = run_at_tier(run, "scalar"), got = run_at_tier(run, t.name);
        ASSERT_EQ(ref.size(), got.size());
        for (size_t i = 0; i < ref.size(); ++i) {
          if (std::isnan(ref[i]) || std::isinf(ref[i])) {
            ASSERT_EQ(bits(got[i]) == bits(ref[i]) || (std::isnan(got[i]) && std::isnan(ref[i])), true)
                << t.name << " " << c.op << " at " << i << ": " << got[i] << " vs " << ref[i];
            continue;
          }
          ASSERT_NEAR(got[i], ref[i], c.rtol * std::fabs(ref[i]) + c.atol)
              << t.name << " " << c.op << " [" << rows << ", " << cols << "] at " << i;
        }
      }
    }
  }
}

// nxrt::FusedMatMul against a constant B (packed at creation: the bias, residual and in-register
// activations ride on the GEMM's store, MatMulWithPost; Sigmoid / Tanh / Gelu one pass after it) and
// against the same B as a plain input (the fused kernel's own passes), every activation the optimizer
// fuses, with and without bias and residual, K over one K block, 2 threads, at every tier: both against
// act(x.w + b + z) in double.
TEST(VecMath, FusedMatMulEpilogueInTheStoreMatchesTheDefinition) {
  std::mt19937 rng(43);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  auto floats = [&](size_t n) {
    std::vector<float> v(n);
    for (float& x : v) x = d(rng);
    return v;
  };
  std::vector<Tier> tiers = vector_tiers();
  tiers.insert(tiers.begin(), Tier{"scalar", ep::IsaTier::kScalar});
  struct Act {
    const char* name;
    std::vector<float> params;
  };
  const Act acts[] = {{"", {}},          {"Relu", {}},    {"LeakyRelu", {0.1f}}, {"Clip", {-0.5f, 0.7f}},
                      {"HardSigmoid", {0.2f, 0.5f}}, {"HardSwish", {}}, {"Sigmoid", {}},  {"Tanh", {}},
                      {"Gelu", {}}};
  auto act_ref = [](const Act& a, double v) {
    const std::string n = a.name;
    if (n == "Relu") return std::max(0.0, v);
    if (n == "LeakyRelu") return v >= 0 ? v : a.params[0] * v;
    if (n == "Clip") return std::min<double>(a.params[1], std::max<double>(a.params[0], v));
    if (n == "HardSigmoid") return std::max(0.0, std::min(1.0, a.params[0] * v + a.params[1]));
    if (n == "HardSwish") return v * std::max(0.0, std::min(1.0, v / 6 + 0.5));
    if (n == "Sigmoid") return 1 / (1 + std::exp(-v));
    if (n == "Tanh") return std::tanh(v);
    if (n == "Gelu") return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    return v;
  };
  for (const Tier& t : tiers) {
    for (const Act& act : acts) {
      for (int it = 0; it < 4; ++it) {
        const bool bias = it != 1, residual = it >= 2;
        const int64_t H = 1 + static_cast<int64_t>(rng() % 40), C = 1 + static_cast<int64_t>(rng() % 300);
        const int64_t M = 1 + static_cast<int64_t>(rng() % 100);
        const std::vector<float> x = floats(static_cast<size_t>(H * C)), w = floats(static_cast<size_t>(C * M));
        const std::vector<float> b = floats(static_cast<size_t>(M)), z = floats(static_cast<size_t>(H * M));
        std::vector<double> want(static_cast<size_t>(H * M));
        for (int64_t i = 0; i < H; ++i)
          for (int64_t j = 0; j < M; ++j) {
            double s = 0;
            for (int64_t k = 0; k < C; ++k) s += double(x[i * C + k]) * w[k * M + j];
            if (bias) s += b[j];
            if (residual) s += z[i * M + j];
            want[i * M + j] = act_ref(act, s);
          }
        for (bool constant_b : {true, false}) {
          nxrt::testing::KernelRun run;
          run.op_type = "FusedMatMul";
          run.domain = "nxrt";
          run.opset = 1;
          run.threads = 2;
          if (*act.name) run.attributes.push_back(nxrt::testing::attr_string("activation", act.name));
          if (!act.params.empty())
            run.attributes.push_back(nxrt::testing::attr_floats("activation_params", act.params));
          run.inputs = {ftensor(Dims{H, C}, x), ftensor(Dims{C, M}, w), bias ? ftensor(Dims{M}, b) : Value()};
          if (residual) run.inputs.push_back(ftensor(Dims{H, M}, z));
          if (constant_b) run.const_inputs = {1};
          const std::vector<float> got = run_at_tier(run, t.name);
          ASSERT_EQ(got.size(), want.size());
          for (size_t i = 0; i < got.size(); ++i) {
            ASSERT_NEAR(got[i], want[i], 2e-6 * (std::sqrt(double(C)) + 1) * (1 + std::fabs(want[i])))
                << t.name << " " << (*act.name ? act.name : "none") << (bias ? " + bias" : "")
                << (residual ? " + Z" : "") << (constant_b ? " constant B" : " B input") << " [" << H << ", " << C
                << "] x [" << C << ", " << M << "] at " << i;
          }
        }
      }
    }
  }
}

// nxrt::FusedConv / FusedMatMul with a Sigmoid, Tanh or Gelu epilogue (and a residual Z) at every tier: the
// GEMM store's epilogue or the fused kernel's epilogue pass applies the vector bodies at the vector
// tiers and libm at the scalar one. Each against the same node without the activation at the same
// tier (the conv paths differ between tiers in their sums' rounding) and the double-precision
// function. Random shapes, 2 threads.
TEST(VecMath, FusedActivationEpiloguesApplyTheActivation) {
  std::mt19937 rng(41);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  auto floats = [&](size_t n, float scale) {
    std::vector<float> v(n);
    for (float& x : v) x = d(rng) * scale;
    return v;
  };
  std::vector<Tier> tiers = vector_tiers();
  tiers.insert(tiers.begin(), Tier{"scalar", ep::IsaTier::kScalar});
  for (const Tier& t : tiers) {
    for (const char* act : {"Sigmoid", "Tanh", "Gelu"}) {
      for (int it = 0; it < 6; ++it) {
        const bool conv = it % 2 == 0, residual = it % 3 == 0;
        const int64_t C = 1 + static_cast<int64_t>(rng() % 24), M = 1 + static_cast<int64_t>(rng() % 20);
        const int64_t H = 3 + static_cast<int64_t>(rng() % 30), W = 3 + static_cast<int64_t>(rng() % 40);
        const int64_t k = it % 4 < 2 ? 3 : 1;
        const Dims xs = conv ? Dims{1, C, H, W} : Dims{H, C}, ws = conv ? Dims{M, C, k, k} : Dims{C, M};
        const Dims ys = conv ? Dims{1, M, H, W} : Dims{H, M};
        const std::vector<float> x = floats(static_cast<size_t>(shape_numel(xs)), 2.f);
        const std::vector<float> w = floats(static_cast<size_t>(shape_numel(ws)), 1.f);
        const std::vector<float> b = floats(static_cast<size_t>(M), 1.f);
        const std::vector<float> z = floats(static_cast<size_t>(shape_numel(ys)), 1.f);
        auto run_with = [&](const std::string& activation) {
          nxrt::testing::KernelRun run;
          run.op_type = conv ? "FusedConv" : "FusedMatMul";
          run.domain = "nxrt";
          run.opset = 1;
          if (!activation.empty()) run.attributes = {nxrt::testing::attr_string("activation", activation)};
          if (conv) run.attributes.push_back(nxrt::testing::attr_ints("pads", {k / 2, k / 2, k / 2, k / 2}));
          run.inputs = {ftensor(xs, x), ftensor(ws, w), ftensor(Dims{M}, b)};
          if (residual) run.inputs.push_back(ftensor(ys, z));
          return run_at_tier(run, t.name);
        };
        const std::vector<float> pre = run_with(""), got = run_with(act);
        ASSERT_EQ(pre.size(), got.size());
        ASSERT_EQ(got.size(), static_cast<size_t>(shape_numel(ys)));
        const bool tanh = std::string(act) == "Tanh", gelu = std::string(act) == "Gelu";
        for (size_t i = 0; i < got.size(); ++i) {
          const double v = pre[i];
          const double want = tanh   ? std::tanh(v)
                              : gelu ? 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)))
                                     : 1 / (1 + std::exp(-v));
          // Gelu's 1 + erf(x) cancels for negative x: float's erf carries ~6e-8 there, times |x| / 2.
          ASSERT_NEAR(got[i], want, 4e-7 * std::fabs(want) + (gelu ? 1e-7 * (1 + std::fabs(v)) : 1e-9))
              << t.name << " " << (conv ? "FusedConv " : "FusedMatMul ") << act << (residual ? " + Z" : "") << " at "
              << i << " of " << pre[i];
        }
      }
    }
  }
}
