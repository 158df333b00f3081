#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "ep/cpu_features.h"
#include "ir/float8_types.h"
#include "ops/cast/dynamic_quantize.h"
#include "nxrt/float_types.h"
#include "kernel_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_int;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Result<std::vector<Value>> run(const std::string& op, std::vector<Value> inputs, std::vector<ir::Attribute> attrs,
                               int64_t opset = 25, size_t num_outputs = 1) {
  KernelRun r;
  r.op_type = op;
  r.opset = opset;
  r.inputs = std::move(inputs);
  r.attributes = std::move(attrs);
  r.num_outputs = num_outputs;
  return run_kernel(r);
}

Tensor ftensor(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, std::move(shape), v); }

std::vector<uint8_t> bytes(const Value& v) {
  const Tensor& t = v.tensor();
  const uint8_t* p = t.data<uint8_t>();
  return std::vector<uint8_t>(p, p + t.nbytes());
}

uint8_t f8(float x, MiniFloat f, bool sat = true) { return static_cast<uint8_t>(encode_minifloat(x, f, sat)); }

}  // namespace

TEST(OpsCast, Float8EncodeTable) {
  // e4m3fn: max 448 = 0x7E, NaN = 0x7F, min subnormal 2^-9 = 0x01, no inf.
  EXPECT_EQ(f8(448.0f, MiniFloat::kE4M3FN), 0x7E);
  EXPECT_EQ(f8(1.0f, MiniFloat::kE4M3FN), 0x38);
  EXPECT_EQ(f8(-2.0f, MiniFloat::kE4M3FN), 0xC0);
  EXPECT_EQ(f8(0.001953125f, MiniFloat::kE4M3FN), 0x01);
  EXPECT_EQ(f8(-0.0f, MiniFloat::kE4M3FN), 0x80);
  EXPECT_EQ(f8(480.0f, MiniFloat::kE4M3FN, true), 0x7E);   // saturates
  EXPECT_EQ(f8(480.0f, MiniFloat::kE4M3FN, false), 0x7F);  // overflow -> NaN
  EXPECT_EQ(f8(INFINITY, MiniFloat::kE4M3FN, true), 0x7E);
  EXPECT_EQ(f8(-INFINITY, MiniFloat::kE4M3FN, false), 0xFF);
  EXPECT_EQ(f8(NAN, MiniFloat::kE4M3FN), 0x7F);
  EXPECT_EQ(f8(1.0625f, MiniFloat::kE4M3FN), 0x38);  // tie (1 + 2^-4) -> even mantissa
  EXPECT_EQ(f8(1.1875f, MiniFloat::kE4M3FN), 0x3A);  // tie (1 + 3*2^-4) -> even mantissa (up)
  // e4m3fnuz: max 240 = 0x7F, NaN = 0x80, -0 -> 0
  EXPECT_EQ(f8(240.0f, MiniFloat::kE4M3FNUZ), 0x7F);
  EXPECT_EQ(f8(-0.0f, MiniFloat::kE4M3FNUZ), 0x00);
  EXPECT_EQ(f8(NAN, MiniFloat::kE4M3FNUZ), 0x80);
  EXPECT_EQ(f8(1000.0f, MiniFloat::kE4M3FNUZ, false), 0x80);
  EXPECT_EQ(f8(1.0f, MiniFloat::kE4M3FNUZ), 0x40);
  // e5m2: inf 0x7C, max 57344 = 0x7B
  EXPECT_EQ(f8(57344.0f, MiniFloat::kE5M2), 0x7B);
  EXPECT_EQ(f8(INFINITY, MiniFloat::kE5M2, false), 0x7C);
  EXPECT_EQ(f8(1e6f, MiniFloat::kE5M2, true), 0x7B);
  EXPECT_EQ(f8(-1e6f, MiniFloat::kE5M2, false), 0xFC);
  EXPECT_EQ(f8(1.0f, MiniFloat::kE5M2), 0x3C);
  // e5m2fnuz
  EXPECT_EQ(f8(1.0f, MiniFloat::kE5M2FNUZ), 0x40);
  EXPECT_EQ(f8(INFINITY, MiniFloat::kE5M2FNUZ, false), 0x80);
  // float4 e2m1: {0, .5, 1, 1.5, 2, 3, 4, 6}
  EXPECT_EQ(f8(0.25f, MiniFloat::kE2M1), 0x0);   // tie -> even (0)
  EXPECT_EQ(f8(-3.5f, MiniFloat::kE2M1), 0xE);   // tie -> 4
  EXPECT_EQ(f8(100.0f, MiniFloat::kE2M1), 0x7);  // saturates to 6
}

TEST(OpsCast, Float8DecodeTable) {
  EXPECT_EQ(decode_minifloat(0x7E, MiniFloat::kE4M3FN), 448.0f);
  EXPECT_TRUE(std::isnan(decode_minifloat(0xFF, MiniFloat::kE4M3FN)));
  EXPECT_EQ(decode_minifloat(0x01, MiniFloat::kE4M3FN), 0.001953125f);
  EXPECT_TRUE(std::isnan(decode_minifloat(0x80, MiniFloat::kE4M3FNUZ)));
  EXPECT_EQ(decode_minifloat(0x7F, MiniFloat::kE4M3FNUZ), 240.0f);
  EXPECT_TRUE(std::isinf(decode_minifloat(0xFC, MiniFloat::kE5M2)));
  EXPECT_EQ(decode_minifloat(0x7B, MiniFloat::kE5M2), 57344.0f);
  EXPECT_EQ(decode_minifloat(0x01, MiniFloat::kE5M2FNUZ), std::ldexp(1.0f, -17));
  // Every finite e4m3fn / e5m2 value round-trips.
  for (uint32_t b = 0; b < 256; ++b) {
    for (MiniFloat f : {MiniFloat::kE4M3FN, MiniFloat::kE4M3FNUZ, MiniFloat::kE5M2, MiniFloat::kE5M2FNUZ}) {
      float v = decode_minifloat(b, f);
      if (std::isnan(v) || std::isinf(v)) continue;
      if (v == 0.0f && (f == MiniFloat::kE4M3FNUZ || f == MiniFloat::kE5M2FNUZ)) continue;
      EXPECT_EQ(encode_minifloat(v, f, false), b) << "format " << static_cast<int>(f) << " bits " << b;
    }
  }
}

TEST(OpsCast, Float16FromDoubleRoundsOnce) {
  Tensor d = Tensor::from_vector<double>(DataType::kDouble, {3}, {1.0 + std::ldexp(1.0, -11), 1.0 + 3 * std::ldexp(1.0, -11),
                                                                  1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)});
  auto r = run("Cast", {d}, {attr_int("to", static_cast<int64_t>(DataType::kFloat16))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const uint16_t* h = r.value()[0].tensor().data<uint16_t>();
  EXPECT_EQ(h[0], 0x3c00);  // tie -> even
  EXPECT_EQ(h[1], 0x3c02);  // tie -> even (up)
  EXPECT_EQ(h[2], 0x3c01);  // just above the tie: up (double rounding through float would give 0x3c00)
}

TEST(OpsCast, SaturateAttribute) {
  Tensor x = ftensor({3}, {1000.0f, -INFINITY, NAN});
  auto r = run("Cast", {x}, {attr_int("to", static_cast<int64_t>(DataType::kFloat8E4M3FN))}, 19);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{0x7E, 0xFE, 0x7F}));
  r = run("Cast", {x}, {attr_int("to", static_cast<int64_t>(DataType::kFloat8E4M3FN)), attr_int("saturate", 0)}, 19);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{0x7F, 0xFF, 0x7F}));
  r = run("Cast", {ftensor({3}, {1e5f, -INFINITY, NAN})},
          {attr_int("to", static_cast<int64_t>(DataType::kFloat8E5M2)), attr_int("saturate", 0)}, 19);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes(r.value()[0])[0], 0x7C);
  EXPECT_EQ(bytes(r.value()[0])[1], 0xFC);
}

TEST(OpsCast, Int4WrapsAndSignExtends) {
  auto r = run("Cast", {ftensor({4}, {-9, -8, 7, 8})}, {attr_int("to", static_cast<int64_t>(DataType::kInt4))});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{0x87, 0x87}));
  Tensor i4(DataType::kInt4, {3});
  i4.data<uint8_t>()[0] = 0xF7;  // 7, -1
  i4.data<uint8_t>()[1] = 0x08;  // -8
  r = run("Cast", {i4}, {attr_int("to", static_cast<int64_t>(DataType::kInt8))});
  ASSERT_TRUE(r.ok());
  const int8_t* p = r.value()[0].tensor().data<int8_t>();
  EXPECT_EQ(p[0], 7);
  EXPECT_EQ(p[1], -1);
  EXPECT_EQ(p[2], -8);
  Tensor u2(DataType::kUInt2, {5});
  u2.data<uint8_t>()[0] = 0xE4;  // 0,1,2,3
  u2.data<uint8_t>()[1] = 0x03;  // 3
  r = run("Cast", {u2}, {attr_int("to", static_cast<int64_t>(DataType::kFloat))});
  ASSERT_TRUE(r.ok());
  const float* f = r.value()[0].tensor().data<float>();
  EXPECT_EQ(std::vector<float>(f, f + 5), (std::vector<float>{0, 1, 2, 3, 3}));
}

TEST(OpsCast, Strings) {
  Tensor s(DataType::kString, {6});
  const char* in[] = {"3.5", "NaN", "-inf", "+INF", "1e-5", " 100 "};
  for (int i = 0; i < 6; ++i) s.string_data()[i] = in[i];
  auto r = run("Cast", {s}, {attr_int("to", static_cast<int64_t>(DataType::kFloat))}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const float* f = r.value()[0].tensor().data<float>();
  EXPECT_EQ(f[0], 3.5f);
  EXPECT_TRUE(std::isnan(f[1]));
  EXPECT_EQ(f[2], -INFINITY);
  EXPECT_EQ(f[3], INFINITY);
  EXPECT_FLOAT_EQ(f[4], 1e-5f);
  EXPECT_EQ(f[5], 100.0f);
  Tensor big(DataType::kString, {1});
  big.string_data()[0] = "9007199254740993";  // 2^53 + 1: exact through the integer path
  r = run("Cast", {big}, {attr_int("to", static_cast<int64_t>(DataType::kInt64))}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()[0].tensor().data<int64_t>()[0], 9007199254740993LL);
  r = run("Cast", {ftensor({7}, {NAN, -INFINITY, 0.5f, 314.25f, 100.0f, 1e20f, 1.5e-5f})},
          {attr_int("to", static_cast<int64_t>(DataType::kString))}, 13);
  ASSERT_TRUE(r.ok());
  const std::string* o = r.value()[0].tensor().string_data();
  EXPECT_EQ(o[0], "NaN");
  EXPECT_EQ(o[1], "-INF");
  EXPECT_EQ(o[2], "0.5");
  EXPECT_EQ(o[3], "314.25");
  EXPECT_EQ(o[4], "100.0");
  EXPECT_EQ(o[5], "1e+20");
  EXPECT_EQ(o[6], "1.5e-05");
  r = run("Cast", {ftensor({1}, {0.1f})}, {attr_int("to", static_cast<int64_t>(DataType::kString))}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()[0].tensor().string_data()[0], "0.1");  // shortest float digits, not the double's
}

TEST(OpsCast, Opset1StringTo) {
  auto r = run("Cast", {ftensor({2}, {1.9f, -1.9f})}, {attr_string("to", "INT32")}, 1);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].tensor().dtype(), DataType::kInt32);
  EXPECT_EQ(r.value()[0].tensor().data<int32_t>()[0], 1);
  EXPECT_EQ(r.value()[0].tensor().data<int32_t>()[1], -1);
  r = run("Cast", {ftensor({1}, {1})}, {attr_string("to", "NOPE")}, 1);
  EXPECT_FALSE(r.ok());
}

TEST(OpsCast, E8M0RoundModes) {
  EXPECT_EQ(encode_e8m0(1.5f, true, E8M0Round::kUp), 128);
  EXPECT_EQ(encode_e8m0(1.5f, true, E8M0Round::kDown), 127);
  EXPECT_EQ(encode_e8m0(1.5f, true, E8M0Round::kNearest), 128);
  EXPECT_EQ(encode_e8m0(1.4f, true, E8M0Round::kNearest), 127);
  EXPECT_EQ(encode_e8m0(1.0f, true, E8M0Round::kUp), 127);
  EXPECT_EQ(encode_e8m0(INFINITY, true, E8M0Round::kUp), 0xFE);
  EXPECT_EQ(encode_e8m0(INFINITY, false, E8M0Round::kUp), 0xFF);
  EXPECT_EQ(encode_e8m0(NAN, true, E8M0Round::kUp), 0xFF);
  auto r = run("Cast", {ftensor({2}, {3.0f, 0.3f})},
               {attr_int("to", static_cast<int64_t>(DataType::kFloat8E8M0)), attr_string("round_mode", "down")});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{128, 125}));
}

TEST(OpsCast, QuantizePerAxisBlockedAndSaturation) {
  // per-axis: axis 1 of [2,2]
  auto r = run("QuantizeLinear",
               {ftensor({2, 2}, {1.0f, 2.0f, 3.0f, 1000.0f}), ftensor({2}, {1.0f, 2.0f}),
                Tensor::from_vector<int8_t>(DataType::kInt8, {2}, {0, 1})},
               {}, 13);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const int8_t* q = r.value()[0].tensor().data<int8_t>();
  EXPECT_EQ(q[0], 1);
  EXPECT_EQ(q[1], 2);   // 2/2 + 1
  EXPECT_EQ(q[2], 3);
  EXPECT_EQ(q[3], 127); // saturates
  // Round half to even: 2.5 -> 2, 3.5 -> 4 (uint8 default without zero point)
  r = run("QuantizeLinear", {ftensor({2}, {2.5f, 3.5f}), ftensor({}, {1.0f})}, {}, 10);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{2, 4}));
  // Blocked: [1,4] with block 2 on axis 1, scales [1,2]
  r = run("QuantizeLinear", {ftensor({1, 4}, {2, 4, 30, 60}), ftensor({1, 2}, {2.0f, 10.0f})},
          {attr_int("axis", 1), attr_int("block_size", 2), attr_int("output_dtype", static_cast<int64_t>(DataType::kInt4))}, 21);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r.value()[0].tensor().dtype(), DataType::kInt4);
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{0x21, 0x63}));  // 1,2,3,6
  // Wrong scale shape is an error, not a crash.
  r = run("QuantizeLinear", {ftensor({2, 3}, std::vector<float>(6, 1.0f)), ftensor({2}, {1, 1})}, {}, 13);
  EXPECT_FALSE(r.ok());
}

TEST(OpsCast, DequantizeInt4AndDynamicQuantize) {
  Tensor x(DataType::kInt4, {3});
  x.data<uint8_t>()[0] = 0x8F;  // -1, -8
  x.data<uint8_t>()[1] = 0x07;  // 7
  auto r = run("DequantizeLinear", {x, ftensor({}, {2.0f}), [] {
                 Tensor z(DataType::kInt4, {});
                 z.data<uint8_t>()[0] = 0x01;
                 return z;
               }()},
               {}, 21);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const float* y = r.value()[0].tensor().data<float>();
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[1], -18.0f);
  EXPECT_EQ(y[2], 12.0f);
  r = run("DynamicQuantizeLinear", {ftensor({6}, {0, 2, -3, -2.5f, 1.34f, 0.5f})}, {}, 11, 3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{153, 255, 0, 26, 221, 179}));
  EXPECT_NEAR(r.value()[1].tensor().data<float>()[0], 0.019607844f, 1e-9);
  EXPECT_EQ(r.value()[2].tensor().data<uint8_t>()[0], 153);
}

// DynamicQuantizeLinear's range and quantization loops at every tier this CPU runs, against the scalar
// loops (the reference): random values of several lengths (vector bodies and tails), with NaN, +-inf,
// -0, quotients exactly halfway between integers (round half to even) and values past the uint8 range.
TEST(OpsCast, DynamicQuantizeEveryTierMatchesTheScalarLoops) {
  std::vector<ep::IsaTier> tiers;
  for (ep::IsaTier t : {ep::IsaTier::kAvx2, ep::IsaTier::kAvx512}) {
    if (ep::cpu_isa_tier() >= t) tiers.push_back(t);
    else std::printf("[ SKIPPED  ] tier %s: this CPU's best tier is %s\n", ep::isa_tier_name(t), ep::isa_tier_name(ep::cpu_isa_tier()));
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-3.f, 5.f);
  for (int64_t n : {1, 7, 15, 16, 17, 31, 32, 33, 63, 100, 1000, 4099}) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> x(static_cast<size_t>(n));
      for (float& v : x) v = d(rng);
      const float scale = variant == 3 ? 0.5f : 8.f / 255.f;
      if (variant >= 1) {  // special values at random places
        const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 0.0f, 1e30f, -1e30f, 2.5f * scale, 3.5f * scale,
                                  -0.5f * scale, 127.5f * scale, -128.5f * scale};
        for (float sp : specials) x[rng() % static_cast<uint32_t>(n)] = sp;
      }
      if (variant == 2) std::fill(x.begin(), x.end(), NAN);
      float mn0, mx0;
      ops::dql_range(x.data(), n, &mn0, &mx0, ep::IsaTier::kScalar);
      std::vector<uint8_t> want(static_cast<size_t>(n)), got(want.size());
      ops::dql_quantize(x.data(), n, scale, 77.f, want.data(), ep::IsaTier::kScalar);
      for (ep::IsaTier t : tiers) {
        float mn, mx;
        ops::dql_range(x.data(), n, &mn, &mx, t);
        EXPECT_EQ(std::signbit(mn), std::signbit(mn0)) << ep::isa_tier_name(t) << " n " << n;
        EXPECT_EQ(mn, mn0) << ep::isa_tier_name(t) << " n " << n << " variant " << variant;
        EXPECT_EQ(mx, mx0) << ep::isa_tier_name(t) << " n " << n << " variant " << variant;
        std::fill(got.begin(), got.end(), 0xAB);
        ops::dql_quantize(x.data(), n, scale, 77.f, got.data(), t);
        EXPECT_EQ(got, want) << ep::isa_tier_name(t) << " n " << n << " variant " << variant;
      }
    }
  }
}

// The kernel over more than one chunk, at 1 and 2 threads and every tier: the bytes, scale and zero
// point of a plain loop written from the spec here.
TEST(OpsCast, DynamicQuantizeLinearLargeInputsAnyThreadsAndTier) {
  const int64_t n = 3 * 16384 + 123;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> d(-1.7f, 3.1f);
  std::vector<float> xv(static_cast<size_t>(n));
  for (float& v : xv) v = d(rng);
  xv[40000] = NAN;
  float mn = 0.f, mx = 0.f;
  for (float v : xv) {
    if (v < mn) mn = v;
    if (v > mx) mx = v;
  }
  const float scale = (mx - mn) / 255.f;
  const uint8_t zp = static_cast<uint8_t>(std::nearbyint(-mn / scale));
  std::vector<uint8_t> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    const float q = std::nearbyint(xv[i] / scale) + zp;
    want[i] = std::isnan(q) ? 0 : static_cast<uint8_t>(std::min(255.f, std::max(0.f, q)));
  }
  for (const char* isa : {"scalar", "avx2", "avx512"}) {
    for (int threads : {1, 2}) {
      KernelRun r;
      r.op_type = "DynamicQuantizeLinear";
      r.opset = 11;
      r.inputs = {ftensor({n}, xv)};
      r.num_outputs = 3;
      r.threads = threads;
      r.overrides = {{"isa", isa}};
      auto out = run_kernel(r);
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      EXPECT_EQ(bytes(out.value()[0]), want) << isa << " threads " << threads;
      EXPECT_EQ(out.value()[1].tensor().data<float>()[0], scale);
      EXPECT_EQ(out.value()[2].tensor().data<uint8_t>()[0], zp);
    }
  }
}

// QuantizeLinear / DequantizeLinear with one scale over more than one chunk, int8 and uint8, at every tier
// and 1 and 2 threads: the bytes / floats of plain loops written from the spec here (round half to
// even, saturation, a NaN to 0), special values included.
TEST(OpsCast, PerTensorQuantizeDequantizeLinearAnyThreadsAndTier) {
  const int64_t n = 2 * 16384 + 77;
  const float scale = 0.037f;
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> d(-6.f, 6.f);
  std::vector<float> xv(static_cast<size_t>(n));
  for (float& v : xv) v = d(rng);
  const float specials[] = {NAN, INFINITY, -INFINITY, -0.0f, 1e30f, -1e30f, 2.5f * scale, 3.5f * scale, -0.5f * scale,
                            -1.5f * scale, 127.5f * scale, -128.5f * scale, 300.f * scale};
  for (size_t k = 0; k < std::size(specials); ++k) xv[k * 2503 % static_cast<size_t>(n)] = specials[k];
  for (bool s8 : {false, true}) {
    const int zp = s8 ? -3 : 121;
    const float lo = s8 ? -128.f : 0.f, hi = s8 ? 127.f : 255.f;
    std::vector<uint8_t> want(xv.size());
    for (size_t i = 0; i < xv.size(); ++i) {
      float q = std::nearbyint(xv[i] / scale) + static_cast<float>(zp);
      q = std::isnan(q) ? 0.f : std::min(hi, std::max(lo, q));
      want[i] = static_cast<uint8_t>(static_cast<int32_t>(q));
    }
    const DataType qt = s8 ? DataType::kInt8 : DataType::kUInt8;
    Tensor z = s8 ? Tensor::from_vector<int8_t>(qt, {}, {static_cast<int8_t>(zp)})
                  : Tensor::from_vector<uint8_t>(qt, {}, {static_cast<uint8_t>(zp)});
    std::vector<float> want_f(want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const float code = s8 ? static_cast<float>(static_cast<int8_t>(want[i])) : static_cast<float>(want[i]);
      want_f[i] = (code - static_cast<float>(zp)) * scale;
    }
    for (const char* isa : {"scalar", "avx2", "avx512"}) {
      for (int threads : {1, 2}) {
        KernelRun q;
        q.op_type = "QuantizeLinear";
        q.opset = 13;
        q.inputs = {ftensor({n}, xv), Value(Tensor::scalar_float(scale)), Value(z)};
        q.threads = threads;
        q.overrides = {{"isa", isa}};
        auto out = run_kernel(q);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        EXPECT_EQ(bytes(out.value()[0]), want) << isa << " threads " << threads << (s8 ? " int8" : " uint8");
        KernelRun dq = q;
        dq.op_type = "DequantizeLinear";
        dq.inputs[0] = out.value()[0];
        auto back = run_kernel(dq);
        ASSERT_TRUE(back.ok()) << back.status().to_string();
        const Tensor& f = back.value()[0].tensor();
        ASSERT_EQ(f.numel(), n);
        EXPECT_EQ(std::memcmp(f.data<float>(), want_f.data(), want_f.size() * sizeof(float)), 0)
            << isa << " threads " << threads << (s8 ? " int8" : " uint8");
      }
    }
  }
}

TEST(OpsCast, FloatToIntOutOfRangeIsDefined) {
  auto r = run("Cast", {ftensor({4}, {NAN, 3e9f, -2.7f, 300.0f})}, {attr_int("to", static_cast<int64_t>(DataType::kInt32))}, 13);
  ASSERT_TRUE(r.ok());
  const int32_t* p = r.value()[0].tensor().data<int32_t>();
  EXPECT_EQ(p[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(p[1], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(p[2], -2);
  r = run("Cast", {ftensor({2}, {300.0f, -1.0f})}, {attr_int("to", static_cast<int64_t>(DataType::kUInt8))}, 13);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes(r.value()[0]), (std::vector<uint8_t>{44, 255}));  // low bits, as numpy on x86
}

// The float32 -> uint8 fast path agrees with the generic path (uint16 output) where values fit.
TEST(OpsCast, QuantizeFastPathMatchesGeneric) {
  std::vector<float> xs;
  for (int i = 0; i < 60; ++i) xs.push_back(static_cast<float>((i * 37) % 101) * 0.73f - 3.0f);
  Tensor x = ftensor({3, 4, 5}, xs);
  Tensor scale = ftensor({4}, {0.5f, 0.25f, 1.0f, 0.3f});
  for (int axis : {1, -2}) {
    auto fast = run("QuantizeLinear", {x, scale, Tensor::from_vector<uint8_t>(DataType::kUInt8, {4}, {10, 20, 30, 40})},
                    {attr_int("axis", axis)}, 21);
    auto slow = run("QuantizeLinear", {x, scale, Tensor::from_vector<uint16_t>(DataType::kUInt16, {4}, {10, 20, 30, 40})},
                    {attr_int("axis", axis)}, 21);
    ASSERT_TRUE(fast.ok() && slow.ok());
    for (int i = 0; i < 60; ++i) {
      uint16_t s = slow.value()[0].tensor().data<uint16_t>()[i];
      EXPECT_EQ(fast.value()[0].tensor().data<uint8_t>()[i], std::min<uint16_t>(s, 255)) << i;
    }
    auto dq_fast = run("DequantizeLinear", {fast.value()[0], scale, Tensor::from_vector<uint8_t>(DataType::kUInt8, {4}, {10, 20, 30, 40})},
                       {attr_int("axis", axis)}, 21);
    auto dq_slow = run("DequantizeLinear", {slow.value()[0], scale, Tensor::from_vector<uint16_t>(DataType::kUInt16, {4}, {10, 20, 30, 40})},
                       {attr_int("axis", axis)}, 21);
    ASSERT_TRUE(dq_fast.ok() && dq_slow.ok());
    for (int i = 0; i < 60; ++i) {
      if (slow.value()[0].tensor().data<uint16_t>()[i] > 255) continue;
      EXPECT_EQ(dq_fast.value()[0].tensor().data<float>()[i], dq_slow.value()[0].tensor().data<float>()[i]) << i;
    }
  }
}

// Float <-> float16 (the F16C loops where the CPU has them) bit for bit the scalar conversions: every
// float16 value to float, and to float16 every float16 value, the midpoints between neighbours (ties
// to even), a float either side of each, the overflow edge, subnormals and NaNs with payloads; odd
// lengths for the tails.
TEST(OpsCast, Float16ConversionsMatchTheScalarBits) {
  std::vector<uint16_t> halves(65536 + 3);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  Tensor h = Tensor::from_vector<uint16_t>(DataType::kFloat16, {static_cast<int64_t>(halves.size())}, halves);
  auto r = run("Cast", {h}, {attr_int("to", static_cast<int64_t>(DataType::kFloat))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const float* f = r.value()[0].tensor().data<float>();
  for (size_t i = 0; i < halves.size(); ++i)
    ASSERT_EQ(float_bits(f[i]), float_bits(half_to_float(halves[i]))) << "half 0x" << std::hex << halves[i];

  std::vector<float> floats = {65504.f, 65519.99f, 65520.f, 1e9f, std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::denorm_min(), 1e-40f, -1e-40f, bits_float(0x7fa00001u),
                               bits_float(0xffc12345u), bits_float(0x7f800001u)};
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const float v = half_to_float(static_cast<uint16_t>(b)), next = half_to_float(static_cast<uint16_t>(b + 1));
    const float mid = static_cast<float>((double(v) + double(next)) / 2);
    for (float x : {v, mid, std::nextafter(mid, 0.f), std::nextafter(mid, 1e9f)}) {
      floats.push_back(x);
      floats.push_back(-x);
    }
  }
  floats.push_back(0.5f);  // an odd length
  Tensor x = ftensor({static_cast<int64_t>(floats.size())}, floats);
  r = run("Cast", {x}, {attr_int("to", static_cast<int64_t>(DataType::kFloat16))});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const uint16_t* hh = r.value()[0].tensor().data<uint16_t>();
  for (size_t i = 0; i < floats.size(); ++i)
    ASSERT_EQ(hh[i], float_to_half(floats[i])) << "float " << floats[i] << " (0x" << std::hex << float_bits(floats[i]) << ")";
}
