#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "nxrt/float_types.h"
#include "kernel_test_util.h"
#include "ops/common.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_int;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

template <typename T>
std::vector<T> values(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<T>(t.data<T>(), t.data<T>() + t.numel());
}

template <typename T>
Tensor make(DataType dt, Dims shape, std::vector<T> v) {
  return Tensor::from_vector<T>(dt, std::move(shape), v);
}

Tensor ftensor(Dims shape, std::vector<float> v) { return make<float>(DataType::kFloat, std::move(shape), std::move(v)); }

Result<std::vector<Value>> run(const std::string& op, std::vector<Value> inputs, std::vector<ir::Attribute> attrs = {},
                               int64_t opset = 21, int threads = 1) {
  KernelRun r;
  r.op_type = op;
  r.opset = opset;
  r.inputs = std::move(inputs);
  r.attributes = std::move(attrs);
  r.threads = threads;
  return run_kernel(r);
}

}  // namespace

TEST(OpsElementwise, AddSameShapeAndScalar) {
  auto r = run("Add", {ftensor({2, 2}, {1, 2, 3, 4}), ftensor({2, 2}, {10, 20, 30, 40})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{11, 22, 33, 44}));
  r = run("Mul", {ftensor({}, {2}), ftensor({3}, {1, 2, 3})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(r.value()[0].tensor().shape(), (Dims{3}));
}

TEST(OpsElementwise, BroadcastMiddleAxis) {
  // [2,1,3] - [4,1] -> [2,4,3]
  std::vector<float> a{0, 1, 2, 10, 11, 12}, b{100, 200, 300, 400};
  auto r = run("Sub", {ftensor({2, 1, 3}, a), ftensor({4, 1}, b)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& y = r.value()[0].tensor();
  ASSERT_EQ(y.shape(), (Dims{2, 4, 3}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) EXPECT_EQ(y.data<float>()[(i * 4 + j) * 3 + k], a[i * 3 + k] - b[j]);
}

TEST(OpsElementwise, NonBroadcastableShapesNameBoth) {
  auto r = run("Add", {ftensor({2, 3}, std::vector<float>(6)), ftensor({4}, std::vector<float>(4))});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("[2,3]"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("[4]"), std::string::npos) << r.status().message();
}

TEST(OpsElementwise, LegacyBroadcastAxis) {
  // Opset 6: A [2,3,2], B [3] with broadcast=1, axis=1 -> B applies along dim 1.
  std::vector<float> a(12, 0.0f);
  auto r = run("Add", {ftensor({2, 3, 2}, a), ftensor({3}, {1, 2, 3})}, {attr_int("broadcast", 1), attr_int("axis", 1)}, 6);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  // Without axis the suffix aligns: B [2] along the last dim.
  r = run("Mul", {ftensor({2, 3, 2}, std::vector<float>(12, 1.0f)), ftensor({2}, {5, 7})}, {attr_int("broadcast", 1)}, 6);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<float>(r.value()[0])[1], 7.0f);
  // broadcast=0 with different shapes is an error.
  r = run("Add", {ftensor({2, 3, 2}, a), ftensor({3}, {1, 2, 3})}, {}, 6);
  EXPECT_FALSE(r.ok());
  // Opset 7+: numpy rules ([3] aligns with the last dim 2 -> error).
  r = run("Add", {ftensor({2, 3, 2}, a), ftensor({3}, {1, 2, 3})}, {}, 7);
  EXPECT_FALSE(r.ok());
}

TEST(OpsElementwise, IntegerDivisionTruncatesAndZeroIsAnError) {
  auto r = run("Div", {make<int32_t>(DataType::kInt32, {4}, {-7, 7, 7, std::numeric_limits<int32_t>::min()}),
                       make<int32_t>(DataType::kInt32, {4}, {2, -2, 2, -1})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<int32_t>(r.value()[0]), (std::vector<int32_t>{-3, -3, 3, std::numeric_limits<int32_t>::min()}));
  r = run("Div", {make<int64_t>(DataType::kInt64, {2}, {1, 2}), make<int64_t>(DataType::kInt64, {2}, {1, 0})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("division by zero"), std::string::npos);
  r = run("Mod", {make<int64_t>(DataType::kInt64, {1}, {1}), make<int64_t>(DataType::kInt64, {1}, {0})});
  EXPECT_FALSE(r.ok());
}

TEST(OpsElementwise, ModSignRules) {
  Tensor a = make<int32_t>(DataType::kInt32, {4}, {-4, 7, 5, -3});
  Tensor b = make<int32_t>(DataType::kInt32, {4}, {3, -3, 2, -2});
  auto r = run("Mod", {a, b});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<int32_t>(r.value()[0]), (std::vector<int32_t>{2, -2, 1, -1}));  // sign of divisor
  r = run("Mod", {a, b}, {attr_int("fmod", 1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<int32_t>(r.value()[0]), (std::vector<int32_t>{-1, 1, 1, -1}));  // sign of dividend
  r = run("Mod", {ftensor({2}, {-4.5f, 4.5f}), ftensor({2}, {2.0f, -2.0f})}, {attr_int("fmod", 1)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{-0.5f, 0.5f}));
}

TEST(OpsElementwise, PowMixedTypes) {
  auto r = run("Pow", {make<int64_t>(DataType::kInt64, {3}, {2, 3, 2}), make<int64_t>(DataType::kInt64, {3}, {10, 3, -1})});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<int64_t>(r.value()[0]), (std::vector<int64_t>{1024, 27, 0}));
  r = run("Pow", {ftensor({2}, {2, 4}), make<int32_t>(DataType::kInt32, {}, {2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{4, 16}));
  r = run("Pow", {make<int32_t>(DataType::kInt32, {2}, {2, 3}), ftensor({2}, {0.5f, 2.0f})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<int32_t>(r.value()[0]), (std::vector<int32_t>{1, 9}));
}

TEST(OpsElementwise, Float16RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between 1 and the next half (1 + 2^-10): ties to even -> 1.
  Tensor a(DataType::kFloat16, {2});
  Tensor b(DataType::kFloat16, {2});
  a.data<uint16_t>()[0] = float_to_half(1.0f);
  b.data<uint16_t>()[0] = float_to_half(0.00048828125f);  // 2^-11
  a.data<uint16_t>()[1] = 0x3c01;                          // 1 + 2^-10
  b.data<uint16_t>()[1] = float_to_half(0.00048828125f);
  auto r = run("Add", {a, b});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()[0].tensor().data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(r.value()[0].tensor().data<uint16_t>()[1], 0x3c02);
}

TEST(OpsElementwise, ComparisonsAndStrings) {
  Tensor s1(DataType::kString, {2});
  s1.string_data()[0] = "a";
  s1.string_data()[1] = "b";
  Tensor s2(DataType::kString, {});
  s2.string_data()[0] = "b";
  auto r = run("Equal", {s1, s2}, {}, 19);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].tensor().dtype(), DataType::kBool);
  EXPECT_EQ(values<uint8_t>(r.value()[0]), (std::vector<uint8_t>{0, 1}));
  r = run("GreaterOrEqual", {ftensor({3}, {1, 2, NAN}), ftensor({}, {2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<uint8_t>(r.value()[0]), (std::vector<uint8_t>{0, 1, 0}));
}

TEST(OpsElementwise, ClipVersions) {
  auto r = run("Clip", {ftensor({3}, {-5, 0, 5})}, {attr_float("min", -1), attr_float("max", 1)}, 6);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{-1, 0, 1}));
  r = run("Clip", {ftensor({3}, {-5, 0, 5}), Value(), ftensor({}, {2})}, {}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{-5, 0, 2}));
  // min > max: everything becomes max.
  r = run("Clip", {make<int8_t>(DataType::kInt8, {3}, {-5, 0, 5}), make<int8_t>(DataType::kInt8, {}, {3}),
                   make<int8_t>(DataType::kInt8, {}, {1})},
          {}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<int8_t>(r.value()[0]), (std::vector<int8_t>{1, 1, 1}));
}

TEST(OpsElementwise, PReluLegacyChannelSlope) {
  // opset 6: slope [2] applies per channel of X [1,2,2]
  auto r = run("PRelu", {ftensor({1, 2, 2}, {-1, -1, -1, 1}), ftensor({2}, {0.5f, 2.0f})}, {}, 6);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{-0.5f, -0.5f, -2.0f, 1.0f}));
  // opset 9: numpy broadcast, slope [2] along the last dim
  r = run("PRelu", {ftensor({1, 2, 2}, {-1, -1, -1, 1}), ftensor({2}, {0.5f, 2.0f})}, {}, 9);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{-0.5f, -2.0f, -0.5f, 1.0f}));
}

TEST(OpsElementwise, BitShiftWideShiftIsZero) {
  auto r = run("BitShift", {make<uint8_t>(DataType::kUInt8, {3}, {1, 255, 16}), make<uint8_t>(DataType::kUInt8, {3}, {3, 8, 2})},
               {attr_string("direction", "LEFT")}, 11);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<uint8_t>(r.value()[0]), (std::vector<uint8_t>{8, 0, 64}));
}

TEST(OpsElementwise, UnaryCorners) {
  auto r = run("Round", {ftensor({5}, {0.5f, 1.5f, 2.5f, -2.5f, 2.3f})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{0, 2, 2, -2, 2}));
  r = run("IsInf", {ftensor({3}, {INFINITY, -INFINITY, 1})}, {attr_int("detect_positive", 0)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<uint8_t>(r.value()[0]), (std::vector<uint8_t>{0, 1, 0}));
  r = run("Abs", {make<int8_t>(DataType::kInt8, {2}, {-128, -3})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<int8_t>(r.value()[0]), (std::vector<int8_t>{-128, 3}));
  r = run("Relu", {make<int32_t>(DataType::kInt32, {2}, {-3, 3})}, {}, 14);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<int32_t>(r.value()[0]), (std::vector<int32_t>{0, 3}));
  r = run("Gelu", {ftensor({1}, {1.0f})}, {attr_string("approximate", "tanh")}, 20);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(values<float>(r.value()[0])[0], 0.841192f, 1e-5);
  r = run("Sqrt", {make<int32_t>(DataType::kInt32, {1}, {4})});
  EXPECT_FALSE(r.ok());  // dtype not allowed
}

TEST(OpsElementwise, VariadicBroadcast) {
  auto r = run("Max", {ftensor({2, 1}, {1, 5}), ftensor({3}, {2, 3, 4}), ftensor({}, {3.5f})}, {}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{3.5f, 3.5f, 4, 5, 5, 5}));
  r = run("Mean", {ftensor({2}, {1, 2}), ftensor({2}, {3, 4})}, {}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<float>(r.value()[0]), (std::vector<float>{2, 3}));
}

TEST(OpsElementwise, WhereStrings) {
  Tensor c = make<uint8_t>(DataType::kBool, {2, 1}, {1, 0});
  Tensor x(DataType::kString, {2});
  x.string_data()[0] = "x0";
  x.string_data()[1] = "x1";
  Tensor y(DataType::kString, {});
  y.string_data()[0] = "y";
  auto r = run("Where", {c, x, y}, {}, 16);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& o = r.value()[0].tensor();
  ASSERT_EQ(o.shape(), (Dims{2, 2}));
  EXPECT_EQ(o.string_data()[0], "x0");
  EXPECT_EQ(o.string_data()[1], "x1");
  EXPECT_EQ(o.string_data()[2], "y");
  EXPECT_EQ(o.string_data()[3], "y");
}

// The collapsed-row broadcast iteration against straightforward per-element index math, on random
// shapes, single- and multi-threaded.
TEST(OpsElementwise, BroadcastMatchesReferenceOnRandomShapes) {
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 200; ++iter) {
    const int rank = 1 + static_cast<int>(rng() % 5);
    Dims out(rank);
    for (auto& d : out) d = 1 + static_cast<int64_t>(rng() % 5);
    if (iter % 10 == 0) out.back() = 3000;  // large enough for the threaded split
    std::vector<Dims> ins(3);
    for (auto& s : ins) {
      const int r = 1 + static_cast<int>(rng() % rank);
      s.assign(out.end() - r, out.end());
      for (auto& d : s)
        if (rng() % 3 == 0) d = 1;
    }
    std::vector<Tensor> ts;
    for (const auto& s : ins) {
      Tensor t(DataType::kFloat, s);
      for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(rng() % 1000) - 500.0f;
      ts.push_back(t);
    }
    // Inputs may all be 1 along some dim: the real output is their broadcast.
    out = ops::broadcast_all(ins).value();
    const int orank = static_cast<int>(out.size());
    Tensor cond(DataType::kBool, ins[0]);
    for (int64_t i = 0; i < cond.numel(); ++i) cond.data<uint8_t>()[i] = rng() % 2;
    auto expect_at = [&](const Dims& s, const Dims& idx) {
      int64_t off = 0, stride = 1;
      for (int d = static_cast<int>(s.size()) - 1, o = orank - 1; d >= 0; --d, --o) {
        off += (s[d] == 1 ? 0 : idx[o]) * stride;
        stride *= s[d];
      }
      return off;
    };
    for (int threads : {1, 3}) {
      auto sub = run("Sub", {ts[1], ts[2]}, {}, 14, threads);
      ASSERT_TRUE(sub.ok()) << sub.status().to_string();
      auto wh = run("Where", {cond, ts[1], ts[2]}, {}, 16, threads);
      ASSERT_TRUE(wh.ok()) << wh.status().to_string();
      Dims sub_shape;
      ASSERT_TRUE(ops::broadcast_shapes(ins[1], ins[2], &sub_shape));
      ASSERT_EQ(sub.value()[0].tensor().shape(), sub_shape);
      ASSERT_EQ(wh.value()[0].tensor().shape(), out);
      const float* ws = wh.value()[0].tensor().data<float>();
      const float* ss = sub.value()[0].tensor().data<float>();
      Dims idx(orank, 0);
      for (int64_t flat = 0; flat < shape_numel(out); ++flat) {
        int64_t rem = flat;
        for (int d = orank - 1; d >= 0; --d) {
          idx[d] = rem % out[d];
          rem /= out[d];
        }
        const float x = ts[1].data<float>()[expect_at(ins[1], idx)];
        const float y = ts[2].data<float>()[expect_at(ins[2], idx)];
        const bool c = cond.data<uint8_t>()[expect_at(ins[0], idx)] != 0;
        ASSERT_EQ(ws[flat], c ? x : y) << "iter " << iter << " flat " << flat;
        if (sub_shape == out) {
          ASSERT_EQ(ss[flat], x - y) << "iter " << iter << " flat " << flat;
        }
      }
    }
  }
}

TEST(OpsElementwise, OldClipWithoutAttrsAndUnsignedPRelu) {
  auto r = run("Clip", {Tensor::from_vector<double>(DataType::kDouble, {2}, {-1e300, 1e300})}, {}, 6);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(values<double>(r.value()[0]), (std::vector<double>{-1e300, 1e300}));
  r = run("PRelu", {make<uint32_t>(DataType::kUInt32, {2}, {3, 4}), make<uint32_t>(DataType::kUInt32, {}, {2})}, {}, 16);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(values<uint32_t>(r.value()[0]), (std::vector<uint32_t>{3, 4}));
}

TEST(OpsElementwise, MissingInputIsAnErrorNotACrash) {
  auto r = run("Add", {ftensor({1}, {1})});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("missing"), std::string::npos);
  r = run("Where", {Value(), ftensor({1}, {1}), ftensor({1}, {1})});
  EXPECT_FALSE(r.ok());
  r = run("Add", {Value::sequence({}), ftensor({1}, {1})});
  EXPECT_FALSE(r.ok());
}

// Sigmoid and Swish take an 8-lane exp_fast path on AVX2 machines: within 2e-6 relative of the
// double-precision definition over the whole range (tails flush to 0 below 1e-30, lengths not a multiple of
// 8), NaN kept.
TEST(OpsElementwise, SigmoidAndSwishVectorPathMatchDefinition) {
  std::vector<float> xs;
  for (float v = -100.f; v <= 100.f; v += 0.37f) xs.push_back(v);
  xs.push_back(0.f);
  xs.push_back(-0.f);
  xs.push_back(std::numeric_limits<float>::infinity());
  xs.push_back(-std::numeric_limits<float>::infinity());
  xs.push_back(std::numeric_limits<float>::quiet_NaN());
  const Dims shape{static_cast<int64_t>(xs.size())};
  for (float alpha : {1.f, 0.5f}) {
    auto s = run("Sigmoid", {ftensor(shape, xs)});
    auto w = run("Swish", {ftensor(shape, xs)}, {attr_float("alpha", alpha)}, 24, 2);
    ASSERT_TRUE(s.ok() && w.ok());
    const auto sv = values<float>(s.value()[0]), wv = values<float>(w.value()[0]);
    for (size_t i = 0; i < xs.size(); ++i) {
      const double x = xs[i];
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(sv[i]) && std::isnan(wv[i]));
        continue;
      }
      const double sig = 1.0 / (1.0 + std::exp(-x)), sw = std::isinf(x) ? (x > 0 ? x : 0.0) : x / (1.0 + std::exp(-alpha * x));
      EXPECT_NEAR(sv[i], sig, 2e-6 * sig + 1e-30) << "sigmoid(" << x << ")";
      if (!std::isinf(x)) {
        EXPECT_NEAR(wv[i], sw, 2e-6 * std::fabs(sw) + 1e-30) << "swish(" << x << ")";
      }
    }
  }
}

// nxrt::SiluMul(x, u) = Swish(x) * u (the optimizer's SwiGLU fusion): same-shape float32 inputs give the
// bits of nxrt::Swish then Mul at every tier the machine has (lengths across the kernel's 512-float
// blocks and the vector tails), other shapes broadcast as Mul does, other float types compute in float.
TEST(OpsElementwise, SiluMulIsSwishThenMul) {
  std::vector<ir::Attribute> none;
  auto run_nxrt = [](const std::string& op, std::vector<Value> in, const std::string& isa, int threads) {
    KernelRun r;
    r.op_type = op;
    r.domain = "nxrt";
    r.opset = 1;
    r.inputs = std::move(in);
    r.threads = threads;
    if (!isa.empty()) r.overrides["isa"] = isa;
    return run_kernel(r);
  };
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-12.f, 12.f);
  for (const char* isa : {"scalar", "avx2", ""}) {
    for (int64_t n : {1, 15, 16, 17, 511, 512, 513, 1100, 40000}) {
      std::vector<float> x(static_cast<size_t>(n)), u(static_cast<size_t>(n));
      for (auto& v : x) v = dist(rng);
      for (auto& v : u) v = dist(rng);
      const Dims shape{1, n};
      auto fused = run_nxrt("SiluMul", {ftensor(shape, x), ftensor(shape, u)}, isa, 2);
      auto sw = run_nxrt("Swish", {ftensor(shape, x)}, isa, 2);
      ASSERT_TRUE(fused.ok() && sw.ok()) << fused.status().to_string();
      auto prod = run("Mul", {sw.value()[0], ftensor(shape, u)});
      ASSERT_TRUE(prod.ok());
      const auto got = values<float>(fused.value()[0]), want = values<float>(prod.value()[0]);
      ASSERT_EQ(fused.value()[0].tensor().shape(), shape);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], want[i]) << "isa '" << isa << "' n " << n << " element " << i;
    }
  }
  // Broadcast: u [3] across x [2, 3].
  const std::vector<float> x{-2.f, 0.f, 1.f, 3.f, -0.5f, 8.f}, u{1.f, 2.f, -1.f};
  auto b = run_nxrt("SiluMul", {ftensor({2, 3}, x), ftensor({3}, u)}, "", 1);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  ASSERT_EQ(b.value()[0].tensor().shape(), (Dims{2, 3}));
  const auto bv = values<float>(b.value()[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = x[i] / (1.0 + std::exp(-double(x[i]))) * u[i % 3];
    EXPECT_NEAR(bv[i], want, 1e-5 * (1 + std::fabs(want))) << i;
  }
  // Bad input: dtypes that differ, shapes that do not broadcast.
  auto bad = run_nxrt("SiluMul", {ftensor({2}, {1, 2}), make<double>(DataType::kDouble, {2}, {1, 2})}, "", 1);
  EXPECT_FALSE(bad.ok());
  bad = run_nxrt("SiluMul", {ftensor({2}, {1, 2}), ftensor({3}, {1, 2, 3})}, "", 1);
  EXPECT_FALSE(bad.ok());
}

// Float Pow by a one-element exponent takes the multiply / sqrt forms (pow_float_by_constant): the
// results against std::pow, special values included (pow's +0 at -0 and +inf at -inf for 0.5), and an
// exponent without a form still goes through pow.
TEST(OpsElementwise, PowByConstantExponentMatchesPow) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.f, -0.f, 1.f, -1.f, 2.5f, -2.5f, 1e-20f, 1e20f, -1e20f, inf, -inf,
                          std::numeric_limits<float>::quiet_NaN(), 3e-39f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-50.f, 50.f);
  for (int i = 0; i < 5000; ++i) x.push_back(d(rng));
  for (float e : {2.f, 3.f, 0.5f, -1.f, 1.f, 2.5f}) {
    auto r = run("Pow", {ftensor({static_cast<int64_t>(x.size())}, x), ftensor({1}, {e})}, {}, 15, 2);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::vector<float> y = values<float>(r.value()[0]);
    for (size_t i = 0; i < x.size(); ++i) {
      // The correctly rounded power (double, then float: exact for 2 and 0.5), or powf itself where
      // the general loop runs (2.5).
      const float want = e == 2.5f ? std::pow(x[i], e) : static_cast<float>(std::pow(double(x[i]), double(e)));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(y[i])) << x[i] << " ** " << e;
      } else if (e == 3.f && std::isfinite(want)) {  // two roundings: within an ulp
        EXPECT_LE(std::fabs(y[i] - want), std::fabs(want) * 1.2e-7f) << x[i] << " ** " << e;
      } else {
        EXPECT_EQ(y[i], want) << x[i] << " ** " << e;
        EXPECT_EQ(std::signbit(y[i]), std::signbit(want)) << x[i] << " ** " << e;
      }
    }
  }
}

// Where's branch-free select (every fixed-size width) against the definition, contiguous and
// broadcast (a [rows, 1] condition, a scalar Y), on a random condition.
TEST(OpsElementwise, WhereRandomConditionEveryWidth) {
  std::mt19937 rng(3);
  const int64_t rows = 37, cols = 129;
  std::vector<uint8_t> c(rows * cols), crow(rows);
  for (auto& v : c) v = rng() % 2;
  for (auto& v : crow) v = rng() % 2;
  auto check = [&](DataType dt, auto tag) {
    using T = decltype(tag);
    std::vector<T> x(rows * cols), y(rows * cols);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(rng()), y[i] = static_cast<T>(rng());
    auto r = run("Where", {make<uint8_t>(DataType::kBool, {rows, cols}, c), make<T>(dt, {rows, cols}, x),
                           make<T>(dt, {rows, cols}, y)}, {}, 16, 2);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::vector<T> o = values<T>(r.value()[0]);
    for (size_t i = 0; i < o.size(); ++i) ASSERT_EQ(o[i], c[i] ? x[i] : y[i]) << dtype_name(dt) << " at " << i;
    r = run("Where", {make<uint8_t>(DataType::kBool, {rows, 1}, crow), make<T>(dt, {rows, cols}, x),
                      make<T>(dt, {}, {y[0]})}, {}, 16, 2);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const std::vector<T> ob = values<T>(r.value()[0]);
    for (size_t i = 0; i < ob.size(); ++i)
      ASSERT_EQ(ob[i], crow[i / cols] ? x[i] : y[0]) << dtype_name(dt) << " broadcast at " << i;
  };
  check(DataType::kUInt8, uint8_t{});
  check(DataType::kInt16, int16_t{});
  check(DataType::kInt32, int32_t{});
  check(DataType::kInt64, int64_t{});
}
