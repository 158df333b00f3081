// com.microsoft norms, Gelu family, RotaryEmbedding, FusedMatMul, GatherBlockQuantized: hand-computed
// values, float16, optional outputs, error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "ep/cpu_features.h"
#include "nxrt/float_types.h"
#include "kernel_test_util.h"
#include "variant_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_int;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Tensor ft(Dims s, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, s, v); }
Result<std::vector<Value>> run(const std::string& op, std::vector<ir::Attribute> attrs, std::vector<Value> in, size_t outs = 1,
                               const std::string& domain = "com.microsoft") {
  KernelRun r;
  r.op_type = op;
  r.domain = domain;
  r.opset = 1;
  r.attributes = std::move(attrs);
  r.inputs = std::move(in);
  r.num_outputs = outs;
  r.threads = 2;
  return run_kernel(r);
}
float at(const Value& v, int64_t i) { return v.tensor().data<float>()[i]; }

}  // namespace

TEST(ContribOps, SkipLayerNormOutputsAndBroadcastSkip) {
  // Rows of 4: x + skip(2-D, broadcast over batch) + bias, then LayerNorm * gamma + beta.
  Tensor x = ft({2, 1, 4}, {1, 2, 3, 4, 0, 0, 0, 4});
  Tensor skip = ft({1, 4}, {1, 0, -1, 0});
  Tensor gamma = ft({4}, {1, 1, 1, 2});
  Tensor beta = ft({4}, {0, 0, 0, 1});
  Tensor bias = ft({4}, {0, 0, 1, 0});
  auto out = run("SkipLayerNormalization", {attr_float("epsilon", 0.f)}, {x, skip, gamma, beta, bias}, 4);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // Row 0 sum = [2,2,3,4], mean 2.75, var = (0.5625*2 + 0.0625 + 1.5625)/4 = 0.6875
  const float inv = 1.f / std::sqrt(0.6875f);
  EXPECT_NEAR(at((*out)[0], 0), (2 - 2.75f) * inv, 1e-5);
  EXPECT_NEAR(at((*out)[0], 3), (4 - 2.75f) * inv * 2 + 1, 1e-5);
  EXPECT_NEAR(at((*out)[3], 2), 3.f, 0);   // input_skip_bias_sum
  EXPECT_NEAR(at((*out)[3], 6), 0.f, 0);   // row 1: 0 + -1 + 1
  EXPECT_NEAR(at((*out)[1], 0), 2.75f, 1e-6);  // mean
  EXPECT_NEAR(at((*out)[2], 0), inv, 1e-4);    // inv_std_var
}

TEST(ContribOps, SkipSimplifiedAndSimplifiedLayerNorm) {
  Tensor x = ft({1, 2}, {3, 4});
  Tensor skip = ft({1, 2}, {0, 0});
  Tensor gamma = ft({2}, {1, 2});
  auto out = run("SkipSimplifiedLayerNormalization", {attr_float("epsilon", 0.f)}, {x, skip, gamma}, 4);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const float rms = std::sqrt(12.5f);
  EXPECT_NEAR(at((*out)[0], 0), 3 / rms, 1e-6);
  EXPECT_NEAR(at((*out)[0], 1), 8 / rms, 1e-6);
  auto s = run("SimplifiedLayerNormalization", {attr_float("epsilon", 0.f)}, {x, gamma}, 2, "");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_NEAR(at((*s)[0], 1), 8 / rms, 1e-6);
  EXPECT_NEAR(at((*s)[1], 0), 1 / rms, 1e-6);
  // Wrong gamma length names the shapes.
  auto bad = run("SkipSimplifiedLayerNormalization", {}, {x, skip, ft({3}, {1, 1, 1})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("gamma"), std::string::npos);
}

TEST(ContribOps, GeluFamily) {
  Tensor x = ft({3}, {-1.f, 0.5f, 2.f});
  auto g = run("Gelu", {}, {x});
  auto fg = run("FastGelu", {}, {x, ft({3}, {0.f, 0.f, 1.f})});
  auto bg = run("BiasGelu", {}, {x, ft({3}, {0.f, 0.f, 1.f})});
  auto qg = run("QuickGelu", {attr_float("alpha", 2.f)}, {x});
  ASSERT_TRUE(g.ok() && fg.ok() && bg.ok() && qg.ok());
  auto gelu = [](float v) { return 0.5f * v * (1 + std::erf(v / std::sqrt(2.f))); };
  auto tgelu = [](float v) { return 0.5f * v * (1 + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v))); };
  for (int i = 0; i < 3; ++i) {
    const float xv = x.data<float>()[i], b = i == 2 ? 1.f : 0.f;
    EXPECT_NEAR(at((*g)[0], i), gelu(xv), 1e-6);
    EXPECT_NEAR(at((*fg)[0], i), tgelu(xv + b), 1e-6);
    EXPECT_NEAR(at((*bg)[0], i), gelu(xv + b), 1e-6);
    EXPECT_NEAR(at((*qg)[0], i), xv / (1 + std::exp(-2 * xv)), 1e-6);
  }
  // float16 in, float16 out.
  Tensor h = Tensor::from_vector(DataType::kFloat16, {2}, std::vector<Float16>{Float16(1.f), Float16(-2.f)});
  auto gh = run("Gelu", {}, {h});
  ASSERT_TRUE(gh.ok());
  EXPECT_NEAR(static_cast<float>((*gh)[0].tensor().data<Float16>()[0]), gelu(1.f), 1e-3);
}

TEST(ContribOps, RotaryEmbeddingHalvesAndInterleaved) {
  // One head of 4, position 1: angle table cos/sin rows [pos][2].
  Tensor x = ft({1, 1, 4}, {1, 2, 3, 4});
  Tensor pos = Tensor::from_vector<int64_t>(DataType::kInt64, {1, 1}, {1});
  Tensor c = ft({2, 2}, {1, 1, 0.f, 0.5f});
  Tensor s = ft({2, 2}, {0, 0, 1.f, 0.25f});
  auto y = run("RotaryEmbedding", {}, {x, pos, c, s});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  // Non-interleaved pairs (0,2), (1,3): y0 = 1*0 - 3*1, y2 = 3*0 + 1*1, y1 = 2*.5 - 4*.25, y3 = 4*.5 + 2*.25
  EXPECT_FLOAT_EQ(at((*y)[0], 0), -3.f);
  EXPECT_FLOAT_EQ(at((*y)[0], 2), 1.f);
  EXPECT_FLOAT_EQ(at((*y)[0], 1), 0.f);
  EXPECT_FLOAT_EQ(at((*y)[0], 3), 2.5f);
  auto yi = run("RotaryEmbedding", {attr_int("interleaved", 1)}, {x, pos, c, s});
  ASSERT_TRUE(yi.ok());
  // Interleaved pairs (0,1), (2,3).
  EXPECT_FLOAT_EQ(at((*yi)[0], 0), -2.f);
  EXPECT_FLOAT_EQ(at((*yi)[0], 1), 1.f);
  EXPECT_FLOAT_EQ(at((*yi)[0], 2), 3 * 0.5f - 4 * 0.25f);
  EXPECT_FLOAT_EQ(at((*yi)[0], 3), 4 * 0.5f + 3 * 0.25f);
  Tensor far = Tensor::from_vector<int64_t>(DataType::kInt64, {1, 1}, {5});
  auto bad = run("RotaryEmbedding", {}, {x, far, c, s});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("out of range"), std::string::npos);
}

TEST(ContribOps, FusedMatMulTransposesAndAlpha) {
  std::mt19937 rng(2);
  std::normal_distribution<float> d;
  // A [3,2,4] with transBatchA -> [2,3,4]; B [2,5,4] with transB -> [2,4,5].
  std::vector<float> a(24), b(40);
  for (auto& v : a) v = d(rng);
  for (auto& v : b) v = d(rng);
  auto y = run("FusedMatMul", {attr_int("transBatchA", 1), attr_int("transB", 1), attr_float("alpha", 0.5f)},
               {ft({3, 2, 4}, a), ft({2, 5, 4}, b)});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ((*y)[0].tensor().shape(), (Dims{2, 3, 5}));
  for (int bt = 0; bt < 2; ++bt)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 5; ++j) {
        double acc = 0;
        for (int k = 0; k < 4; ++k) acc += a[(i * 2 + bt) * 4 + k] * b[(bt * 5 + j) * 4 + k];
        EXPECT_NEAR(at((*y)[0], (bt * 3 + i) * 5 + j), 0.5 * acc, 1e-5);
      }
}

TEST(ContribOps, GatherBlockQuantizedUint8FourBit) {
  // 2 rows x 32 columns of 4-bit codes (16 bytes per row), block 16: 2 scales per row.
  std::vector<uint8_t> data(32);
  for (int i = 0; i < 32; ++i) data[i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  Tensor dt = Tensor::from_vector(DataType::kUInt8, {2, 16}, data);
  Tensor idx = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, -2});
  Tensor sc = ft({2, 2}, {1.f, 2.f, 0.5f, 0.25f});
  auto y = run("GatherBlockQuantized", {attr_int("block_size", 16), attr_int("bits", 4)}, {dt, idx, sc});
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  ASSERT_EQ((*y)[0].tensor().shape(), (Dims{2, 32}));
  // Row 1, element 0: byte 16 = code 0 (low), default zero point 8: (0 - 8) * 0.5; element 1: (15 - 8) * 0.5.
  EXPECT_FLOAT_EQ(at((*y)[0], 0), -4.f);
  EXPECT_FLOAT_EQ(at((*y)[0], 1), 3.5f);
  // Element 17 (second block, scale 0.25): byte 24 -> high nibble of byte 8 of the row: 15 - 8 = 7.
  EXPECT_FLOAT_EQ(at((*y)[0], 17), (15 - 8 - 8) * 0.25f);
  // Index -2 is row 0: element 2 = code 1 -> (1 - 8) * 1.
  EXPECT_FLOAT_EQ(at((*y)[0], 32 + 2), -7.f);
}

TEST(ContribOps, EmbedLayerNormSumsEmbeddingsAndNormalizes) {
  // 2 rows of 2 tokens, hidden 2: word[id] + position[pos] (+ segment[seg]), LayerNorm * gamma + beta.
  Tensor ids = Tensor::from_vector<int32_t>(DataType::kInt32, {2, 2}, {1, 0, 2, 2});
  Tensor word = ft({3, 2}, {0, 0, 1, 3, -2, 2});
  Tensor pos = ft({3, 2}, {0, 1, 10, 10, 5, -5});
  Tensor gamma = ft({2}, {1, 2});
  Tensor beta = ft({2}, {0, 1});
  Tensor mask = Tensor::from_vector<int32_t>(DataType::kInt32, {2, 2}, {1, 1, 0, 1});
  Tensor pos_ids = Tensor::from_vector<int32_t>(DataType::kInt32, {2, 2}, {2, 0, 0, 1});
  auto out = run("EmbedLayerNormalization", {attr_float("epsilon", 0.f)},
                 {ids, Value(), word, pos, Value(), gamma, beta, mask, pos_ids}, 3);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // embedding_sum: [1,3]+[5,-5], [0,0]+[0,1], [-2,2]+[0,1], [-2,2]+[10,10]
  const std::vector<float> sum = {6, -2, 0, 1, -2, 3, 8, 12};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(at((*out)[2], i), sum[static_cast<size_t>(i)]) << i;
  // Two-element LayerNorm of (a, b) with a < b gives (-1, 1): output (-1 * 1 + 0, 1 * 2 + 1) when a < b.
  EXPECT_NEAR(at((*out)[0], 0), 1.f, 1e-5);   // row [6, -2]: (+1, -1) -> (1, -2 + 1)
  EXPECT_NEAR(at((*out)[0], 1), -1.f, 1e-5);
  EXPECT_NEAR(at((*out)[0], 2), -1.f, 1e-5);  // [0, 1] -> (-1, 1) -> (-1, 3)
  EXPECT_NEAR(at((*out)[0], 3), 3.f, 1e-5);
  EXPECT_EQ((*out)[1].tensor().data<int32_t>()[0], 2);  // mask_index: real tokens per row
  EXPECT_EQ((*out)[1].tensor().data<int32_t>()[1], 1);
  // Without position_ids the positions are 0..S-1; an id outside the table names it.
  auto plain = run("EmbedLayerNormalization", {}, {ids, Value(), word, pos, Value(), gamma, beta}, 1);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  Tensor bad_ids = Tensor::from_vector<int32_t>(DataType::kInt32, {1, 2}, {1, 7});
  auto bad = run("EmbedLayerNormalization", {}, {bad_ids, Value(), word, pos, Value(), gamma, beta}, 1);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("input_ids[0, 1] = 7"), std::string::npos) << bad.status().to_string();
}


TEST(ContribOps, EmbedLayerNormRowScratchIsAThreadSlot) {
  const int64_t B = 4, S = 40, H = 48, V = 50, P = 64;
  std::mt19937 rng(7);
  std::vector<int32_t> ids(static_cast<size_t>(B * S));
  for (auto& v : ids) v = static_cast<int32_t>(rng() % V);
  KernelRun r;
  r.op_type = "EmbedLayerNormalization";
  r.domain = "com.microsoft";
  r.opset = 1;
  r.inputs = {Tensor::from_vector<int32_t>(DataType::kInt32, {B, S}, ids), Value(), nxrt::testing::random_tensor({V, H}, 1),
              nxrt::testing::random_tensor({P, H}, 2), Value(), nxrt::testing::random_tensor({H}, 3),
              nxrt::testing::random_tensor({H}, 4)};
  r.num_outputs = 3;
  nxrt::testing::expect_variant_paths_equal(r, true);
}

TEST(ContribOps, SimplifiedLayerNormConvertedRowsAreThreadSlots) {
  // Y takes gamma's dtype (float16), converted a row at a time through the thread's slot.
  const int64_t rows = 1024, H = 64;
  Tensor x = nxrt::testing::random_tensor({4, rows / 4, H}, 5);
  Tensor g32 = nxrt::testing::random_tensor({H}, 6);
  std::vector<Float16> g16;
  for (int64_t i = 0; i < H; ++i) g16.push_back(Float16(g32.data<float>()[i]));
  KernelRun r;
  r.op_type = "SimplifiedLayerNormalization";
  r.domain = "";
  r.opset = 1;
  r.inputs = {x, Tensor::from_vector<Float16>(DataType::kFloat16, {H}, g16)};
  r.num_outputs = 2;
  nxrt::testing::expect_variant_paths_equal(r, true);
  // Same dtypes: no conversion, no scratch.
  r.inputs = {x, g32};
  nxrt::testing::expect_variant_paths_equal(r, false);
}

namespace {
Result<std::vector<Value>> run_isa(const std::string& op, std::vector<ir::Attribute> attrs, std::vector<Value> in,
                                   size_t outs, const char* isa) {
  KernelRun r;
  r.op_type = op;
  r.domain = "com.microsoft";
  r.opset = 1;
  r.attributes = std::move(attrs);
  r.inputs = std::move(in);
  r.num_outputs = outs;
  r.threads = 2;
  r.overrides = {{"isa", isa}};
  return run_kernel(r);
}
Tensor rand_t(std::mt19937& rng, Dims s, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(shape_numel(s)));
  for (auto& x : v) x = d(rng);
  return ft(s, v);
}
}  // namespace

// The AVX2 and AVX-512 row bodies (skip_norm_rows.h) against the plain loop (isa=scalar) on random
// shapes, row lengths with and without vector tails, every optional input and output: the same
// per-element arithmetic, the double sums in another order, so equal to within an ulp or two.
TEST(ContribOps, SkipNormVectorRowsMatchPlainLoop) {
  std::mt19937 rng(17);
  const bool avx512 = ep::cpu_isa_tier() >= ep::IsaTier::kAvx512, avx2 = ep::cpu_has_avx2_fma();
  if (!avx512) std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
  if (!avx2) std::printf("[ SKIPPED  ] tier avx2: this CPU has no AVX2+FMA\n");
  int compared = 0, identical = 0, total = 0;
  for (int it = 0; it < 36; ++it) {
    const int64_t H = std::vector<int64_t>{1, 7, 8, 15, 16, 17, 31, 33, 64, 100, 896, 1031}[it % 12];
    const int64_t rows = 1 + (it * 7) % 5;
    const int kind = it % 3;  // 0 SkipLayerNormalization, 1 SkipSimplified, 2 Simplified (no skip)
    const bool skip_rows_broadcast = it % 4 == 1;
    Tensor x = rand_t(rng, {rows, H}, -3.f, 3.f);
    Tensor skip = rand_t(rng, {skip_rows_broadcast ? 1 : rows, H}, -2.f, 2.f);
    Tensor gamma = rand_t(rng, {H}, 0.5f, 1.5f), beta = rand_t(rng, {H}, -1.f, 1.f), bias = rand_t(rng, {H}, -0.5f, 0.5f);
    std::string op;
    std::vector<Value> in;
    size_t outs = 1;
    if (kind == 0) {
      op = "SkipLayerNormalization";
      in = {x, skip, gamma, beta};
      if (it % 2) in.push_back(bias);
      outs = 4;
    } else if (kind == 1) {
      op = "SkipSimplifiedLayerNormalization";
      in = {x, skip, gamma};
      if (it % 2) in.push_back(bias);
      outs = 4;
    } else {
      op = "SimplifiedLayerNormalization";
      in = {x, gamma};
      outs = 2;
    }
    const std::vector<ir::Attribute> attrs = {attr_float("epsilon", 1e-5f)};
    auto ref = run_isa(op, attrs, in, outs, "scalar");
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (const char* isa : {"avx512", "avx2"}) {
      if ((std::string(isa) == "avx512" && !avx512) || (std::string(isa) == "avx2" && !avx2)) continue;
      auto got = run_isa(op, attrs, in, outs, isa);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      for (size_t o = 0; o < outs; ++o) {
        const Value& a = (*got)[o];
        const Value& b = (*ref)[o];
        if (!a.is_tensor() || !b.is_tensor()) continue;
        ASSERT_EQ(a.tensor().shape(), b.tensor().shape()) << op << " out " << o;
        for (int64_t i = 0; i < a.tensor().numel(); ++i) {
          const float u = a.tensor().data<float>()[i], v = b.tensor().data<float>()[i];
          ASSERT_NEAR(u, v, 2e-6f * std::max(1.f, std::fabs(v))) << op << " " << isa << " H " << H << " out " << o << " at " << i;
          identical += std::memcmp(&u, &v, 4) == 0;
          ++total;
        }
      }
      ++compared;
    }
  }
  EXPECT_GE(compared, avx2 ? 36 : 0);
  // The statistics' sums add in another order, which moves the last bit of an output now and then.
  std::printf("vector rows: %d of %d outputs bit-identical to the plain loop\n", identical, total);
  if (total > 0) {
    EXPECT_GT(identical, total * 9 / 10) << identical << " of " << total << " bit-identical";
  }
}
