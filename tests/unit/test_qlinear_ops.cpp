// com.microsoft QLinearAdd / QLinearMul / QLinearSigmoid / QLinearLeakyRelu / QLinearGlobalAveragePool /
// QLinearConcat (ops/contrib/qlinear_ops.cpp) against the quantization formula written out here:
// dequantize (scale * (q - zp)), compute in float, quantize (round half to even of v / scale, + zp,
// saturate). scripts/check_contrib_ort.sh holds the same ops to ONNX Runtime.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "ep/cpu_features.h"
#include "kernel_test_util.h"

namespace nxrt {
namespace {

using testing::KernelRun;

template <typename T>
int32_t q(float v, float scale, int32_t zp) {
  float r = std::nearbyint(v / scale) + static_cast<float>(zp);
  r = std::min<float>(std::numeric_limits<T>::max(), std::max<float>(std::numeric_limits<T>::min(), r));
  return static_cast<int32_t>(r);
}
Value scal(float v) { return Value(Tensor::from_vector<float>(DataType::kFloat, {}, {v})); }
template <typename T>
Value zp(T v, DataType dt) { return Value(Tensor::from_vector<T>(dt, {}, {v})); }
template <typename T>
Tensor random_q(DataType dt, Dims shape, std::mt19937& rng) {
  Tensor t(dt, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<T>()[i] = static_cast<T>(static_cast<int>(rng() % 256) + std::numeric_limits<T>::min());
  return t;
}
template <typename T>
int32_t at(const Tensor& t, int64_t i) { return static_cast<int32_t>(t.data<T>()[i]); }

// Every pair of uint8 codes through QLinearAdd / QLinearMul at scales whose quotients land on or next to
// half-integers (C's scale 0.1, 0.3 or 1/3: its float inverse is inexact), at the machine's vector rows,
// the AVX2 ones and the scalar loop, against the formula's division of separately rounded terms (the
// vector rows had fused a product into the sum, one rounding fewer: another byte on ~6% of the codes).
TEST(OpsQLinear, AddAndMulQuotientsNearHalfIntegers) {
  // 65533 of the 65536 pairs: the rows end in a tail of 13 (8 vector lanes, 5 scalar).
  const int64_t n = 65533;
  Tensor a(DataType::kUInt8, {n}), b(DataType::kUInt8, {n});
  for (int64_t k = 0; k < n; ++k) {
    a.data<uint8_t>()[k] = static_cast<uint8_t>(k / 256);
    b.data<uint8_t>()[k] = static_cast<uint8_t>(k % 256);
  }
  struct Scales { float sa, sb, sc; };
  for (const Scales& sc : {Scales{0.05f, 0.05f, 0.1f}, Scales{0.15f, 0.05f, 0.3f}, Scales{0.1f, 0.2f, 1.0f / 3.0f},
                           Scales{0.01f, 0.03f, 0.1f}})
    for (bool mul : {false, true})
      for (const char* isa : {"", "avx2", "scalar"}) {
        const float sc_c = mul ? sc.sc * 0.02f : sc.sc;
        KernelRun r{mul ? "QLinearMul" : "QLinearAdd", "com.microsoft", 1, {},
                    {Value(a), scal(sc.sa), zp<uint8_t>(128, DataType::kUInt8), Value(b), scal(sc.sb),
                     zp<uint8_t>(100, DataType::kUInt8), scal(sc_c), zp<uint8_t>(128, DataType::kUInt8)}};
        if (*isa) r.overrides = {{"isa", isa}};
        auto got = testing::run_kernel(r);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        const Tensor& y = (*got)[0].tensor();
        int differ = 0, halves = 0;
        for (int64_t i = 0; i < y.numel(); ++i) {
          const float va = sc.sa * static_cast<float>(at<uint8_t>(a, i) - 128), vb = sc.sb * static_cast<float>(at<uint8_t>(b, i) - 100);
          const float v = mul ? va * vb : va + vb;
          const float quotient = v / sc_c;
          halves += std::fabs(quotient - std::trunc(quotient)) == 0.5f;
          differ += at<uint8_t>(y, i) != q<uint8_t>(v, sc_c, 128);
        }
        EXPECT_EQ(differ, 0) << (mul ? "mul" : "add") << " scales " << sc.sa << " " << sc.sb << " " << sc_c << " isa '" << isa << "'";
        if (!mul && sc.sc == 0.1f && sc.sa == 0.05f) {
          EXPECT_GT(halves, 1000);  // the ties this case is for
        }
      }
}

// Scales under which a quotient can be NaN or infinite (A's scale NaN, or so large that 255 of it
// overflows; C's scale 0) take the vector rows' guarded form, with NaN quotients quantized to the zero
// point as the scalar loop does; ordinary scales take the form that clamps before it rounds. Every tier
// gives the scalar loop's bytes over every pair of codes, int8 and uint8.
TEST(OpsQLinear, AddAndMulNonFiniteQuotientsMatchTheScalarLoop) {
  const int64_t n = 65536;
  Tensor a(DataType::kUInt8, {n}), b(DataType::kUInt8, {n}), ai(DataType::kInt8, {n}), bi(DataType::kInt8, {n});
  for (int64_t k = 0; k < n; ++k) {
    a.data<uint8_t>()[k] = static_cast<uint8_t>(k / 256);
    b.data<uint8_t>()[k] = static_cast<uint8_t>(k % 256);
    ai.data<int8_t>()[k] = static_cast<int8_t>(k / 256 - 128);
    bi.data<int8_t>()[k] = static_cast<int8_t>(k % 256 - 128);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  struct Scales { float sa, sb, sc; };
  for (const Scales& sc : {Scales{nan, 0.05f, 0.1f}, Scales{0.05f, 0.05f, 0.f}, Scales{1e38f, 0.05f, 0.1f},
                           Scales{0.05f, 3e38f, 0.1f}, Scales{0.02f, 0.05f, 0.1f}})
    for (bool mul : {false, true})
      for (bool u8 : {true, false}) {
        const DataType dt = u8 ? DataType::kUInt8 : DataType::kInt8;
        auto zpv = [&](int v) { return u8 ? zp<uint8_t>(static_cast<uint8_t>(v), dt) : zp<int8_t>(static_cast<int8_t>(v - 128), dt); };
        std::vector<Tensor> outs;
        for (const char* isa : {"scalar", "avx2", ""}) {
          KernelRun r{mul ? "QLinearMul" : "QLinearAdd", "com.microsoft", 1, {},
                      {Value(u8 ? a : ai), scal(sc.sa), zpv(128), Value(u8 ? b : bi), scal(sc.sb), zpv(100), scal(sc.sc), zpv(128)}};
          if (*isa) r.overrides = {{"isa", isa}};
          auto got = testing::run_kernel(r);
          ASSERT_TRUE(got.ok()) << got.status().to_string();
          outs.push_back((*got)[0].tensor());
        }
        for (size_t i = 1; i < outs.size(); ++i)
          EXPECT_EQ(std::memcmp(outs[i].raw_data(), outs[0].raw_data(), static_cast<size_t>(n)), 0)
              << (mul ? "mul" : "add") << (u8 ? " uint8" : " int8") << " scales " << sc.sa << " " << sc.sb << " " << sc.sc
              << (i == 1 ? " avx2" : " own tier") << " differs from the scalar loop";
      }
}

TEST(OpsQLinear, AddAndMulBroadcastAndSaturate) {
  std::mt19937 rng(3);
  struct Shapes { Dims a, b; };
  // b per last axis (rows of 4: the scalar tails), same shape (rows past the 8-wide vector body),
  // and a scalar b (broadcast along the rows).
  for (const Shapes& sh : {Shapes{{2, 3, 4}, {4}}, Shapes{{3, 50}, {3, 50}}, Shapes{{2, 37}, {}}, Shapes{{2, 77}, {2, 1}}})
    for (bool mul : {false, true}) {
      const Tensor a = random_q<uint8_t>(DataType::kUInt8, sh.a, rng), b = random_q<uint8_t>(DataType::kUInt8, sh.b, rng);
      const float sa = 0.03f, sb = 0.02f, sc = mul ? 0.004f : 0.05f;
      const uint8_t za = 120, zb = 131, zc = 125;
      for (int threads : {1, 2})
        for (const char* isa : {"", "avx2", "scalar"}) {  // the machine's vector rows, the AVX2 ones, the scalar loop
          KernelRun r{mul ? "QLinearMul" : "QLinearAdd", "com.microsoft", 1, {},
                      {Value(a), scal(sa), zp<uint8_t>(za, DataType::kUInt8), Value(b), scal(sb), zp<uint8_t>(zb, DataType::kUInt8),
                       scal(sc), zp<uint8_t>(zc, DataType::kUInt8)}};
          r.threads = threads;
          if (*isa) r.overrides = {{"isa", isa}};
          auto got = testing::run_kernel(r);
          ASSERT_TRUE(got.ok()) << got.status().to_string();
          const Tensor& y = (*got)[0].tensor();
          ASSERT_EQ(y.shape(), sh.a);
          int saturated = 0;
          for (int64_t i = 0; i < y.numel(); ++i) {
            const int64_t bi = b.numel() == 1 ? 0 : sh.b == Dims{2, 1} ? i / sh.a[1] : i % b.numel();
            const float va = sa * static_cast<float>(at<uint8_t>(a, i) - za), vb = sb * static_cast<float>(at<uint8_t>(b, bi) - zb);
            const int32_t want = q<uint8_t>(mul ? va * vb : va + vb, sc, zc);
            saturated += want == 0 || want == 255;
            EXPECT_EQ(at<uint8_t>(y, i), want) << (mul ? "mul " : "add ") << i << " isa '" << isa << "'";
          }
          if (mul) {
            EXPECT_GT(saturated, 0);  // the small product scale pushes some past the range
          }
        }
    }
  // Mismatched operand types are an error naming both.
  KernelRun bad{"QLinearAdd", "com.microsoft", 1, {},
                {Value(Tensor(DataType::kUInt8, {2})), scal(1.f), Value(), Value(Tensor(DataType::kInt8, {2})), scal(1.f), Value(), scal(1.f)}};
  auto r = testing::run_kernel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("int8"), std::string::npos);
}

TEST(OpsQLinear, SigmoidAndLeakyReluTables) {
  std::mt19937 rng(5);
  const Tensor x = random_q<int8_t>(DataType::kInt8, {5, 51}, rng);
  for (bool leaky : {false, true}) {
    const float sx = 0.06f, sy = leaky ? 0.03f : 1.f / 256;
    const int8_t zx = -9, zy = leaky ? 4 : -128;
    KernelRun r{leaky ? "QLinearLeakyRelu" : "QLinearSigmoid", "com.microsoft", 1, {},
                {Value(x), scal(sx), zp<int8_t>(zx, DataType::kInt8), scal(sy), zp<int8_t>(zy, DataType::kInt8)}};
    if (leaky) r.attributes = {testing::attr_float("alpha", 0.15f)};
    auto got = testing::run_kernel(r);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float f = sx * static_cast<float>(at<int8_t>(x, i) - zx);
      const float v = leaky ? (f >= 0.f ? f : 0.15f * f) : 1.f / (1.f + std::exp(-f));
      EXPECT_EQ(at<int8_t>((*got)[0].tensor(), i), q<int8_t>(v, sy, zy)) << i;
    }
  }
}

TEST(OpsQLinear, GlobalAveragePoolNchwAndNhwc) {
  std::mt19937 rng(7);
  // (N, C, HW as two dims): channels-last blocks of 64 channels: one partial, and two whole plus one partial.
  struct Case { int64_t n, c, h, w; };
  for (const Case cs : {Case{2, 6, 5, 3}, Case{2, 150, 3, 4}})
    for (bool last : {false, true}) {
      const Dims shape = last ? Dims{cs.n, cs.h, cs.w, cs.c} : Dims{cs.n, cs.c, cs.h, cs.w};
      const Tensor x = random_q<uint8_t>(DataType::kUInt8, shape, rng);
      const float sx = 0.04f, sy = 0.013f;
      const uint8_t zx = 128, zy = 100;
      KernelRun r{"QLinearGlobalAveragePool", "com.microsoft", 1, {},
                  {Value(x), scal(sx), zp<uint8_t>(zx, DataType::kUInt8), scal(sy), zp<uint8_t>(zy, DataType::kUInt8)}};
      r.attributes = {testing::attr_int("channels_last", last ? 1 : 0)};
      r.threads = 2;
      auto got = testing::run_kernel(r);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      const Tensor& y = (*got)[0].tensor();
      EXPECT_EQ(y.shape(), last ? (Dims{cs.n, 1, 1, cs.c}) : (Dims{cs.n, cs.c, 1, 1}));
      const int64_t HW = cs.h * cs.w, C = cs.c;
      for (int64_t n = 0; n < cs.n; ++n)
        for (int64_t c = 0; c < C; ++c) {
          int64_t sum = 0;
          for (int64_t i = 0; i < HW; ++i) sum += at<uint8_t>(x, last ? (n * HW + i) * C + c : (n * C + c) * HW + i);
          const float v = static_cast<float>(sum - HW * zx) * (sx / static_cast<float>(HW));
          EXPECT_EQ(at<uint8_t>(y, n * C + c), q<uint8_t>(v, sy, zy)) << n << "," << c << (last ? " channels-last" : "");
        }
    }
}

TEST(OpsQLinear, ConcatRequantizesEachInput) {
  std::mt19937 rng(11);
  const Tensor x0 = random_q<uint8_t>(DataType::kUInt8, {2, 3, 2}, rng), x1 = random_q<uint8_t>(DataType::kUInt8, {2, 1, 2}, rng);
  const float sy = 0.05f, s0 = 0.05f, s1 = 0.02f;
  const uint8_t zy = 128, z0 = 128, z1 = 90;  // x0 has Y's parameters (copied), x1 is requantized
  KernelRun r{"QLinearConcat", "com.microsoft", 1, {},
              {scal(sy), zp<uint8_t>(zy, DataType::kUInt8), Value(x0), scal(s0), zp<uint8_t>(z0, DataType::kUInt8), Value(x1), scal(s1),
               zp<uint8_t>(z1, DataType::kUInt8)}};
  r.attributes = {testing::attr_int("axis", 1)};
  auto got = testing::run_kernel(r);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const Tensor& y = (*got)[0].tensor();
  ASSERT_EQ(y.shape(), (Dims{2, 4, 2}));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t w = 0; w < 2; ++w) {
        const int32_t want = c < 3 ? at<uint8_t>(x0, (n * 3 + c) * 2 + w)
                                   : q<uint8_t>(s1 * static_cast<float>(at<uint8_t>(x1, n * 2 + w) - z1), sy, zy);
        EXPECT_EQ(at<uint8_t>(y, (n * 4 + c) * 2 + w), want) << n << c << w;
      }
  r.inputs.pop_back();  // a triple cut short
  EXPECT_FALSE(testing::run_kernel(r).ok());
}

// The table lookups (QLinearSigmoid's, QLinearConcat's requantization) at every tier the machine has:
// runs long enough for whole 64-byte vector steps and a masked tail, int8 and uint8, a channels-last
// concat (axis = the last dim: every pixel a row of each input's run), 1 and 2 threads, each byte
// against the formula.
TEST(OpsQLinear, TableLookupsAtEveryTier) {
  std::mt19937 rng(17);
  for (const char* tier : {"scalar", "avx2", "avx512"}) {
    if (ep::cpu_isa_tier() < ep::parse_isa_tier(tier).value()) {
      std::printf("tier %s: not on this CPU, skipped\n", tier);
      continue;
    }
    if (std::string(tier) == "avx512" && !ep::cpu_has_avx512_vbmi()) std::printf("avx512 tier without VBMI: the byte loop\n");
    for (int threads : {1, 2}) {
      const Tensor x = random_q<int8_t>(DataType::kInt8, {3, 333}, rng);
      KernelRun r{"QLinearSigmoid", "com.microsoft", 1, {},
                  {Value(x), scal(0.07f), zp<int8_t>(3, DataType::kInt8), scal(1.f / 256), zp<int8_t>(-128, DataType::kInt8)}};
      r.overrides = {{"isa", tier}};
      r.threads = threads;
      auto got = testing::run_kernel(r);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      for (int64_t i = 0; i < x.numel(); ++i) {
        const float f = 0.07f * static_cast<float>(at<int8_t>(x, i) - 3);
        ASSERT_EQ(at<int8_t>((*got)[0].tensor(), i), q<int8_t>(1.f / (1.f + std::exp(-f)), 1.f / 256, -128)) << tier << " " << i;
      }
      const Tensor a = random_q<uint8_t>(DataType::kUInt8, {2, 5, 7, 40}, rng), b = random_q<uint8_t>(DataType::kUInt8, {2, 5, 7, 72}, rng),
                   c = random_q<uint8_t>(DataType::kUInt8, {2, 5, 7, 3}, rng);
      const float sy = 0.05f, sa = 0.03f, sb = 0.05f, sc = 0.11f;
      const uint8_t zy = 120, za = 77, zb = 120, zc = 201;  // b has Y's parameters (copied)
      KernelRun cat{"QLinearConcat", "com.microsoft", 1, {},
                    {scal(sy), zp<uint8_t>(zy, DataType::kUInt8), Value(a), scal(sa), zp<uint8_t>(za, DataType::kUInt8), Value(b), scal(sb),
                     zp<uint8_t>(zb, DataType::kUInt8), Value(c), scal(sc), zp<uint8_t>(zc, DataType::kUInt8)}};
      cat.attributes = {testing::attr_int("axis", -1)};
      cat.overrides = {{"isa", tier}};
      cat.threads = threads;
      auto y = testing::run_kernel(cat);
      ASSERT_TRUE(y.ok()) << y.status().to_string();
      ASSERT_EQ((*y)[0].tensor().shape(), (Dims{2, 5, 7, 115}));
      for (int64_t p = 0; p < 70; ++p)
        for (int64_t ch = 0; ch < 115; ++ch) {
          const int32_t want = ch < 40    ? q<uint8_t>(sa * static_cast<float>(at<uint8_t>(a, p * 40 + ch) - za), sy, zy)
                               : ch < 112 ? at<uint8_t>(b, p * 72 + ch - 40)
                                          : q<uint8_t>(sc * static_cast<float>(at<uint8_t>(c, p * 3 + ch - 112) - zc), sy, zy);
          ASSERT_EQ(at<uint8_t>((*y)[0].tensor(), p * 115 + ch), want) << tier << " pixel " << p << " channel " << ch;
        }
    }
  }
}

// nxrt::ByteTable (fuse_qdq_table's op): Y[i] = Table[byte of X[i]] at every tier the machine has, int8 X
// into a uint8 table and uint8 into int8, sizes with whole 64-byte steps and a tail, 1 and 2 threads;
// a table of other than 256 values and a float X are errors that name them.
TEST(OpsQLinear, ByteTableAtEveryTier) {
  std::mt19937 rng(43);
  for (const char* tier : {"scalar", "avx2", "avx512"}) {
    if (ep::cpu_isa_tier() < ep::parse_isa_tier(tier).value()) {
      std::printf("tier %s: not on this CPU, skipped\n", tier);
      continue;
    }
    for (bool s8 : {false, true})
      for (int threads : {1, 2}) {
        const DataType xdt = s8 ? DataType::kInt8 : DataType::kUInt8, tdt = s8 ? DataType::kUInt8 : DataType::kInt8;
        const Tensor x = s8 ? random_q<int8_t>(xdt, {3, 7, 61}, rng) : random_q<uint8_t>(xdt, {3, 7, 61}, rng);
        const Tensor table = s8 ? random_q<uint8_t>(tdt, {256}, rng) : random_q<int8_t>(tdt, {256}, rng);
        KernelRun r{"ByteTable", "nxrt", 1, {}, {Value(x), Value(table)}};
        r.overrides = {{"isa", tier}};
        r.threads = threads;
        auto got = testing::run_kernel(r);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        const Tensor& y = (*got)[0].tensor();
        ASSERT_EQ(y.shape(), x.shape());
        ASSERT_EQ(y.dtype(), tdt);
        const uint8_t* xb = static_cast<const uint8_t*>(x.raw_data());
        const uint8_t* tb = static_cast<const uint8_t*>(table.raw_data());
        const uint8_t* yb = static_cast<const uint8_t*>(y.raw_data());
        for (int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(yb[i], tb[xb[i]]) << tier << " at " << i;
      }
  }
  KernelRun bad{"ByteTable", "nxrt", 1, {}, {Value(Tensor(DataType::kUInt8, {4})), Value(Tensor(DataType::kUInt8, {255}))}};
  auto e1 = testing::run_kernel(bad);
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("Table"), std::string::npos) << e1.status().message();
  bad.inputs = {Value(Tensor(DataType::kFloat, {4})), Value(Tensor(DataType::kUInt8, {256}))};
  auto e2 = testing::run_kernel(bad);
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("X must be"), std::string::npos) << e2.status().message();
}

// QGemm: (alpha * a_scale * b_scale[n]) * float(sum (A - za)(B - zb[n]) + C[n]), float or requantized, B
// packed (constant) or not, transA / transB, against that formula.
TEST(OpsQLinear, QGemmFloatAndQuantizedOutputs) {
  std::mt19937 rng(13);
  const int64_t M = 6, K = 37, N = 19;
  for (bool trans_b : {false, true})
    for (bool quant : {false, true})
      for (bool packed : {false, true}) {
        const Tensor a = random_q<uint8_t>(DataType::kUInt8, {K, M}, rng);  // transA = 1
        const Tensor b = random_q<int8_t>(DataType::kInt8, trans_b ? Dims{N, K} : Dims{K, N}, rng);
        std::vector<float> bs(static_cast<size_t>(N));
        std::vector<int32_t> c(static_cast<size_t>(N));
        for (int64_t n = 0; n < N; ++n) {
          bs[static_cast<size_t>(n)] = 0.002f + 0.001f * static_cast<float>(n);
          c[static_cast<size_t>(n)] = static_cast<int32_t>(rng() % 4001) - 2000;
        }
        const float sa = 0.021f, alpha = 0.75f, ys = 0.04f;
        const uint8_t za = 118, yz = 130;
        KernelRun r{"QGemm", "com.microsoft", 1, {},
                    {Value(a), scal(sa), zp<uint8_t>(za, DataType::kUInt8), Value(b),
                     Value(Tensor::from_vector<float>(DataType::kFloat, {N}, bs)), zp<int8_t>(0, DataType::kInt8),
                     Value(Tensor::from_vector<int32_t>(DataType::kInt32, {N}, c))}};
        if (quant) {
          r.inputs.push_back(scal(ys));
          r.inputs.push_back(zp<uint8_t>(yz, DataType::kUInt8));
        }
        r.attributes = {testing::attr_int("transA", 1), testing::attr_int("transB", trans_b ? 1 : 0), testing::attr_float("alpha", alpha)};
        if (packed) r.const_inputs = {3, 5};
        r.threads = 2;
        auto got = testing::run_kernel(r);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        const Tensor& y = (*got)[0].tensor();
        ASSERT_EQ(y.shape(), (Dims{M, N}));
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            int32_t acc = 0;
            for (int64_t k = 0; k < K; ++k)
              acc += (at<uint8_t>(a, k * M + m) - za) * at<int8_t>(b, trans_b ? n * K + k : k * N + n);
            const float f = static_cast<float>(acc + c[static_cast<size_t>(n)]) * (alpha * sa * bs[static_cast<size_t>(n)]);
            if (quant) {
              EXPECT_EQ(at<uint8_t>(y, m * N + n), q<uint8_t>(f, ys, yz)) << m << "," << n;
            } else {
              EXPECT_EQ(y.data<float>()[m * N + n], f) << m << "," << n;
            }
          }
      }
}

// QLinearAveragePool (3x3, pad 1, padding not counted) and QLinearSoftmax (last axis) run the float
// kernels between a dequantization and a quantization: against those steps written out here.
// QLinearAveragePool against its definition written out here: per window, the exact sum of x - x_zp
// over the taps inside X, times x_scale / (divisor * y_scale) in double, rounded half to even, + y_zp,
// saturated; the divisor the taps inside X, or (count_include_pad) inside the padded input (a window
// that ceil_mode runs past the pads counts only those). 1-D, 2-D and 3-D, strides, asymmetric pads,
// ceil_mode, int8 and uint8, 1 and 2 threads; with channels_last = 1 the same bytes on transposed data.
TEST(OpsQLinear, AveragePoolExactSums) {
  std::mt19937 rng(41);
  struct Case {
    Dims x;  // [N, C, spatial...]
    std::vector<int64_t> k, s, pads;
    bool ceil, cip;
  };
  const Case cases[] = {
      {{2, 3, 9, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, false},
      {{1, 5, 7, 6}, {3, 3}, {1, 1}, {1, 1, 1, 1}, false, true},
      {{1, 4, 7, 6}, {3, 2}, {2, 2}, {1, 0, 2, 1}, true, false},
      {{1, 2, 8, 7}, {3, 3}, {2, 2}, {1, 1, 1, 1}, true, true},
      {{2, 3, 11}, {4}, {3}, {2, 1}, true, true},
      {{1, 2, 4, 5, 3}, {2, 3, 2}, {1, 2, 1}, {0, 1, 1, 1, 0, 0}, false, true},
      {{1, 300, 4, 4}, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, false},  // channels past one 256 block
  };
  for (const Case& c : cases)
    for (bool s8 : {false, true}) {
      const DataType dt = s8 ? DataType::kInt8 : DataType::kUInt8;
      const Tensor x = s8 ? random_q<int8_t>(dt, c.x, rng) : random_q<uint8_t>(dt, c.x, rng);
      const float sx = 0.031f, sy = 0.017f;
      const int32_t zx = s8 ? -7 : 131, zy = s8 ? 5 : 97;
      auto zpv = [&](int32_t v) { return s8 ? zp<int8_t>(static_cast<int8_t>(v), dt) : zp<uint8_t>(static_cast<uint8_t>(v), dt); };
      const size_t nsp = c.x.size() - 2;
      std::vector<ir::Attribute> attrs = {testing::attr_ints("kernel_shape", c.k), testing::attr_ints("strides", c.s),
                                          testing::attr_ints("pads", c.pads), testing::attr_int("ceil_mode", c.ceil),
                                          testing::attr_int("count_include_pad", c.cip)};
      KernelRun r{"QLinearAveragePool", "com.microsoft", 1, attrs, {Value(x), scal(sx), zpv(zx), scal(sy), zpv(zy)}};
      auto got = testing::run_kernel(r);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      const Tensor& y = (*got)[0].tensor();
      // The expected output, axis by axis.
      std::vector<int64_t> in(3, 1), out(3, 1), k(3, 1), st(3, 1), pb(3, 0), pe(3, 0);
      for (size_t j = 0; j < nsp; ++j) {
        const size_t a = 3 - nsp + j;
        in[a] = c.x[2 + j], k[a] = c.k[j], st[a] = c.s[j], pb[a] = c.pads[j], pe[a] = c.pads[nsp + j];
        const int64_t span = in[a] + pb[a] + pe[a] - k[a];
        out[a] = (c.ceil ? (span + st[a] - 1) / st[a] : span / st[a]) + 1;
        if (c.ceil && (out[a] - 1) * st[a] >= in[a] + pb[a]) --out[a];  // a last window must start inside
      }
      Dims want_shape = {c.x[0], c.x[1]};
      for (size_t j = 0; j < nsp; ++j) want_shape.push_back(out[3 - nsp + j]);
      ASSERT_EQ(y.shape(), want_shape);
      const int64_t C = c.x[1], insz = in[0] * in[1] * in[2], outsz = out[0] * out[1] * out[2];
      std::vector<int32_t> want(static_cast<size_t>(y.numel()));
      for (int64_t p = 0; p < c.x[0] * C; ++p)
        for (int64_t o0 = 0; o0 < out[0]; ++o0)
          for (int64_t o1 = 0; o1 < out[1]; ++o1)
            for (int64_t o2 = 0; o2 < out[2]; ++o2) {
              int64_t sum = 0, taps = 0, padded = 0;
              const int64_t o[3] = {o0, o1, o2};
              for (int64_t t0 = 0; t0 < k[0]; ++t0)
                for (int64_t t1 = 0; t1 < k[1]; ++t1)
                  for (int64_t t2 = 0; t2 < k[2]; ++t2) {
                    const int64_t t[3] = {t0, t1, t2};
                    bool inside = true, in_pads = true;
                    int64_t i[3];
                    for (int a = 0; a < 3; ++a) {
                      i[a] = o[a] * st[a] - pb[a] + t[a];
                      inside = inside && i[a] >= 0 && i[a] < in[a];
                      in_pads = in_pads && i[a] >= -pb[a] && i[a] < in[a] + pe[a];
                    }
                    padded += in_pads;
                    if (!inside) continue;
                    const int64_t at_i = p * insz + (i[0] * in[1] + i[1]) * in[2] + i[2];
                    sum += (s8 ? at<int8_t>(x, at_i) : at<uint8_t>(x, at_i)) - zx;
                    ++taps;
                  }
              const int64_t divisor = std::max<int64_t>(1, c.cip ? padded : taps);
              double v = std::nearbyint(static_cast<double>(sum) * (static_cast<double>(sx) / static_cast<double>(sy)) /
                                        static_cast<double>(divisor)) + zy;
              v = std::min(s8 ? 127.0 : 255.0, std::max(s8 ? -128.0 : 0.0, v));
              want[static_cast<size_t>(p * outsz + (o0 * out[1] + o1) * out[2] + o2)] = static_cast<int32_t>(v);
            }
      for (int64_t i = 0; i < y.numel(); ++i)
        ASSERT_EQ(s8 ? at<int8_t>(y, i) : at<uint8_t>(y, i), want[static_cast<size_t>(i)])
            << shape_to_string(c.x) << (s8 ? " int8" : " uint8") << " at " << i;
      // Channels-last: X and Y with the channels moved last, 1 and 2 threads.
      Dims xl = {c.x[0]};
      for (size_t j = 0; j < nsp; ++j) xl.push_back(c.x[2 + j]);
      xl.push_back(C);
      Tensor xt(dt, xl);
      for (int64_t n = 0; n < c.x[0]; ++n)
        for (int64_t ch = 0; ch < C; ++ch)
          for (int64_t e = 0; e < insz; ++e)
            static_cast<uint8_t*>(xt.raw_data())[(n * insz + e) * C + ch] = static_cast<const uint8_t*>(x.raw_data())[(n * C + ch) * insz + e];
      for (int threads : {1, 2}) {
        KernelRun rl = r;
        rl.inputs[0] = Value(xt);
        rl.attributes.push_back(testing::attr_int("channels_last", 1));
        rl.threads = threads;
        auto gl = testing::run_kernel(rl);
        ASSERT_TRUE(gl.ok()) << gl.status().to_string();
        const uint8_t* yl = static_cast<const uint8_t*>((*gl)[0].tensor().raw_data());
        const uint8_t* yn = static_cast<const uint8_t*>(y.raw_data());
        for (int64_t n = 0; n < c.x[0]; ++n)
          for (int64_t ch = 0; ch < C; ++ch)
            for (int64_t e = 0; e < outsz; ++e)
              ASSERT_EQ(yl[(n * outsz + e) * C + ch], yn[(n * C + ch) * outsz + e])
                  << shape_to_string(c.x) << " channels_last, threads " << threads << " image " << n << " channel " << ch << " at " << e;
      }
    }
  // Bad scales and zero points are named.
  KernelRun bad{"QLinearAveragePool", "com.microsoft", 1, {testing::attr_ints("kernel_shape", {2, 2})},
                {Value(Tensor(DataType::kUInt8, {1, 1, 4, 4})), scal(-1.f), zp<uint8_t>(0, DataType::kUInt8), scal(1.f),
                 zp<uint8_t>(0, DataType::kUInt8)}};
  auto e1 = testing::run_kernel(bad);
  ASSERT_FALSE(e1.ok());
  EXPECT_NE(e1.status().message().find("x_scale"), std::string::npos) << e1.status().message();
  bad.inputs[1] = scal(1.f);
  bad.inputs[4] = zp<int8_t>(0, DataType::kInt8);
  auto e2 = testing::run_kernel(bad);
  ASSERT_FALSE(e2.ok());
  EXPECT_NE(e2.status().message().find("y_zero_point"), std::string::npos) << e2.status().message();
}

TEST(OpsQLinear, AveragePoolNearTheFloatOpsAndSoftmaxThroughThem) {
  std::mt19937 rng(17);
  const Tensor x = random_q<uint8_t>(DataType::kUInt8, {1, 2, 5, 6}, rng);
  const float sx = 0.03f, sy = 0.02f;
  const uint8_t zx = 120, zy = 110;
  KernelRun r{"QLinearAveragePool", "com.microsoft", 1, {},
              {Value(x), scal(sx), zp<uint8_t>(zx, DataType::kUInt8), scal(sy), zp<uint8_t>(zy, DataType::kUInt8)}};
  r.attributes = {testing::attr_ints("kernel_shape", {3, 3}), testing::attr_ints("pads", {1, 1, 1, 1})};
  auto got = testing::run_kernel(r);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ((*got)[0].tensor().shape(), (Dims{1, 2, 5, 6}));
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        float sum = 0.f;
        int cnt = 0;
        for (int64_t di = -1; di <= 1; ++di)
          for (int64_t dj = -1; dj <= 1; ++dj) {
            const int64_t ii = i + di, jj = j + dj;
            if (ii < 0 || ii >= 5 || jj < 0 || jj >= 6) continue;
            sum += sx * static_cast<float>(at<uint8_t>(x, (c * 5 + ii) * 6 + jj) - zx);
            ++cnt;
          }
        // Exact sums rounded once (AveragePoolExactSums): within one step of the float route here.
        EXPECT_NEAR(at<uint8_t>((*got)[0].tensor(), (c * 5 + i) * 6 + j), q<uint8_t>(sum / static_cast<float>(cnt), sy, zy), 1)
            << c << i << j;
      }
  const Tensor s = random_q<int8_t>(DataType::kInt8, {3, 16}, rng);
  KernelRun sm{"QLinearSoftmax", "com.microsoft", 1, {},
               {Value(s), scal(0.08f), zp<int8_t>(0, DataType::kInt8), scal(1.f / 256), zp<int8_t>(-128, DataType::kInt8)}};
  sm.attributes = {testing::attr_int("axis", -1), testing::attr_int("opset", 13)};
  auto sg = testing::run_kernel(sm);
  ASSERT_TRUE(sg.ok()) << sg.status().to_string();
  for (int64_t row = 0; row < 3; ++row) {
    float mx = -1e30f, den = 0.f;
    for (int64_t j = 0; j < 16; ++j) mx = std::max(mx, 0.08f * static_cast<float>(at<int8_t>(s, row * 16 + j)));
    for (int64_t j = 0; j < 16; ++j) den += std::exp(0.08f * static_cast<float>(at<int8_t>(s, row * 16 + j)) - mx);
    for (int64_t j = 0; j < 16; ++j) {
      const float p = std::exp(0.08f * static_cast<float>(at<int8_t>(s, row * 16 + j)) - mx) / den;
      EXPECT_NEAR(at<int8_t>((*sg)[0].tensor(), row * 16 + j), q<int8_t>(p, 1.f / 256, -128), 1) << row << "," << j;
    }
  }
}

}  // namespace
}  // namespace nxrt
