// com.microsoft MatMulIntegerToFloat and DynamicQuantizeMatMul (ops/linalg/integer_matmul.cpp), and the
// fusion that writes the first from ORT's quantize_dynamic pattern
// (optimizer/fusions/fuse_matmul_integer_to_float.cpp). The kernels' outputs are held to the unfused
// graph's float operations written here from the spec: float(int32 sum) * (a_scale * b_scale) + bias,
// bit for bit, with B packed (a constant) and generic, every tier, 1 and 2 threads; the fusion's
// outputs to the unfused graph's, byte for byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernel_test_util.h"
#include "optimizer_test_util.h"
#include "shape/shape_inference.h"

namespace nxrt {
namespace {

using testing::KernelRun;
using testing::random_bytes;
int32_t as_int(uint8_t b, bool is_signed) { return is_signed ? static_cast<int32_t>(static_cast<int8_t>(b)) : b; }

// The unfused graph's result: float(sum_k (a - za)(b - zb[n])) * (a_scale * b_scale[n]) (+ bias[n]).
std::vector<float> expected(const std::vector<uint8_t>& a, bool as, int32_t za, const std::vector<uint8_t>& b, bool bs,
                            const std::vector<int32_t>& zb, int64_t rows, int64_t K, int64_t N, float a_scale,
                            const std::vector<float>& b_scale, const std::vector<float>& bias) {
  std::vector<float> y(static_cast<size_t>(rows * N));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t n = 0; n < N; ++n) {
      int32_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (as_int(a[r * K + k], as) - za) * (as_int(b[k * N + n], bs) - zb[static_cast<size_t>(n)]);
      const float s = a_scale * b_scale[b_scale.size() == 1 ? 0 : static_cast<size_t>(n)];
      float v = static_cast<float>(acc) * s;
      if (!bias.empty()) v = v + bias[static_cast<size_t>(n)];
      y[static_cast<size_t>(r * N + n)] = v;
    }
  return y;
}

TEST(OpsMatMulIntegerToFloat, MatchesTheUnfusedArithmeticEveryTierAndForm) {
  std::mt19937 rng(41);
  int checked = 0;
  for (int form = 0; form < 4; ++form)  // bit 0: per-column b_scale and b_zero_point; bit 1: bias
    for (bool a_signed : {false, true})
      for (bool b_signed : {false, true}) {
        const int64_t batches = 2, M = 9, K = 45, N = 37;
        const DataType adt = a_signed ? DataType::kInt8 : DataType::kUInt8, bdt = b_signed ? DataType::kInt8 : DataType::kUInt8;
        const auto av = random_bytes(rng, static_cast<size_t>(batches * M * K)), bv = random_bytes(rng, static_cast<size_t>(K * N));
        const uint8_t zab = static_cast<uint8_t>(rng() & 0xff);
        const bool per_col = form & 1;
        const auto zbb = random_bytes(rng, per_col ? static_cast<size_t>(N) : 1);
        std::vector<int32_t> zb(static_cast<size_t>(N));
        for (int64_t n = 0; n < N; ++n) zb[static_cast<size_t>(n)] = as_int(zbb[per_col ? static_cast<size_t>(n) : 0], b_signed);
        std::uniform_real_distribution<float> sd(1e-4f, 3e-2f), bd(-2.f, 2.f);
        const float a_scale = sd(rng);
        std::vector<float> b_scale(per_col ? static_cast<size_t>(N) : 1), bias;
        for (float& v : b_scale) v = sd(rng);
        if (form & 2) {
          bias.resize(static_cast<size_t>(N));
          for (float& v : bias) v = bd(rng);
        }
        const auto want = expected(av, a_signed, as_int(zab, a_signed), bv, b_signed, zb, batches * M, K, N, a_scale, b_scale, bias);
        std::vector<Value> in = {Value(Tensor::from_vector<uint8_t>(adt, {batches, M, K}, av)),
                                 Value(Tensor::from_vector<uint8_t>(bdt, {K, N}, bv)),
                                 Value(Tensor::from_vector<float>(DataType::kFloat, {}, {a_scale})),
                                 Value(Tensor::from_vector<float>(DataType::kFloat, per_col ? Dims{N} : Dims{}, b_scale)),
                                 Value(Tensor::from_vector<uint8_t>(adt, {}, {zab})),
                                 Value(Tensor::from_vector<uint8_t>(bdt, per_col ? Dims{N} : Dims{}, zbb))};
        if (!bias.empty()) in.push_back(Value(Tensor::from_vector<float>(DataType::kFloat, {N}, bias)));
        for (bool packed : {false, true})
          for (const char* tier : {"", "avx2", "scalar"})
            for (int threads : {1, 2}) {
              KernelRun r{"MatMulIntegerToFloat", "com.microsoft", 1, {}, in};
              if (packed) r.const_inputs = {1, 5};
              r.threads = threads;
              if (*tier) r.overrides = {{"isa", tier}};
              auto got = testing::run_kernel(r);
              ASSERT_TRUE(got.ok()) << got.status().to_string();
              const Tensor& g = (*got)[0].tensor();
              ASSERT_EQ(g.shape(), (Dims{batches, M, N}));
              ASSERT_EQ(std::memcmp(g.data<float>(), want.data(), want.size() * sizeof(float)), 0)
                  << "form " << form << (a_signed ? " s8" : " u8") << " x " << (b_signed ? "s8" : "u8") << " packed " << packed
                  << " tier '" << tier << "' threads " << threads;
              ++checked;
            }
      }
  EXPECT_EQ(checked, 4 * 2 * 2 * 2 * 3 * 2);
}

TEST(OpsMatMulIntegerToFloat, DynamicQuantizeMatMulQuantizesAAsDynamicQuantizeLinear) {
  std::mt19937 rng(43);
  const int64_t M = 70, K = 50, N = 33;
  std::uniform_real_distribution<float> xd(-1.5f, 2.5f), sd(1e-3f, 2e-2f);
  std::vector<float> x(static_cast<size_t>(M * K));
  for (float& v : x) v = xd(rng);
  const auto bv = random_bytes(rng, static_cast<size_t>(K * N));
  std::vector<float> b_scale(static_cast<size_t>(N)), bias(static_cast<size_t>(N));
  for (float& v : b_scale) v = sd(rng);
  for (float& v : bias) v = xd(rng);
  // A quantized by the DynamicQuantizeLinear kernel, then the arithmetic above.
  KernelRun q{"DynamicQuantizeLinear", "", 11, {}, {Value(Tensor::from_vector<float>(DataType::kFloat, {M, K}, x))}, 3};
  auto qa = testing::run_kernel(q);
  ASSERT_TRUE(qa.ok());
  const Tensor& aq = (*qa)[0].tensor();
  const std::vector<uint8_t> av(aq.data<uint8_t>(), aq.data<uint8_t>() + aq.numel());
  const float a_scale = (*qa)[1].tensor().data<float>()[0];
  const int32_t za = (*qa)[2].tensor().data<uint8_t>()[0];
  const auto want = expected(av, false, za, bv, true, std::vector<int32_t>(static_cast<size_t>(N), 0), M, K, N, a_scale, b_scale, bias);
  for (bool packed : {false, true})
    for (int threads : {1, 2}) {
      KernelRun r{"DynamicQuantizeMatMul", "com.microsoft", 1, {},
                  {Value(Tensor::from_vector<float>(DataType::kFloat, {M, K}, x)), Value(Tensor::from_vector<uint8_t>(DataType::kInt8, {K, N}, bv)),
                   Value(Tensor::from_vector<float>(DataType::kFloat, {N}, b_scale)), Value(),
                   Value(Tensor::from_vector<float>(DataType::kFloat, {N}, bias))}};
      if (packed) r.const_inputs = {1};
      r.threads = threads;
      auto got = testing::run_kernel(r);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      const Tensor& g = (*got)[0].tensor();
      ASSERT_EQ(std::memcmp(g.data<float>(), want.data(), want.size() * sizeof(float)), 0) << "packed " << packed << " threads " << threads;
    }
}

TEST(OpsMatMulIntegerToFloat, BadScalesAreErrors) {
  const int64_t K = 4, N = 3;
  std::vector<Value> in = {Value(Tensor::from_vector<uint8_t>(DataType::kUInt8, {2, K}, std::vector<uint8_t>(8, 1))),
                           Value(Tensor::from_vector<uint8_t>(DataType::kInt8, {K, N}, std::vector<uint8_t>(12, 1))),
                           Value(Tensor::from_vector<float>(DataType::kFloat, {}, {0.5f})),
                           Value(Tensor::from_vector<float>(DataType::kFloat, {2}, {1.f, 2.f}))};  // neither 1 nor N
  auto r = testing::run_kernel(KernelRun{"MatMulIntegerToFloat", "com.microsoft", 1, {}, in});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("b_scale"), std::string::npos) << r.status().message();
  in[3] = Value(Tensor::from_vector<float>(DataType::kFloat, {}, {1.f}));
  in[2] = Value(Tensor::from_vector<float>(DataType::kFloat, {2}, {1.f, 1.f}));  // a_scale per column: not supported
  r = testing::run_kernel(KernelRun{"MatMulIntegerToFloat", "com.microsoft", 1, {}, in});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("a_scale"), std::string::npos) << r.status().message();
}

// ORT's quantize_dynamic pattern for x [2, 5, 24] @ W [24, 16] (+ bias): fused into one
// MatMulIntegerToFloat, outputs byte-identical to the unfused graph's.
optest::ModelBuilder dynamic_model(bool per_column, bool bias, bool cast_read_twice) {
  using namespace optest;
  std::mt19937 rng(47);
  const int64_t K = 24, N = 16;
  ModelBuilder b(13);
  b.input("x", {2, 5, K});
  b.init("Wq", Tensor::from_vector<uint8_t>(DataType::kInt8, {K, N}, random_bytes(rng, static_cast<size_t>(K * N))));
  b.init("Wz", Tensor::from_vector<uint8_t>(DataType::kInt8, {}, {0}));
  b.init("Ws", per_column ? random_tensor({N}, 3, 1e-3f, 1e-2f) : Tensor::from_vector<float>(DataType::kFloat, {}, {0.0071f}));
  b.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  b.node("MatMulInteger", {"xq", "Wq", "xz", "Wz"}, {"i32"});
  b.node("Cast", {"i32"}, {"f"}, {A_i("to", 1)});
  b.node("Mul", {"xs", "Ws"}, {"s"});
  b.node("Mul", {"f", "s"}, {"m"});
  if (bias) {
    b.init("bias", random_tensor({N}, 5));
    b.node("Add", {"m", "bias"}, {"y"});
  } else {
    b.node("Identity", {"m"}, {"y"});
  }
  b.output("y");
  if (cast_read_twice) {
    b.node("Neg", {"f"}, {"nf"});
    b.output("nf");
  }
  return b;
}

TEST(OptimizerMatMulIntegerToFloat, FusesQuantizeDynamicsPatternWithTheSameBytes) {
  using namespace optest;
  for (bool per_column : {false, true})
    for (bool bias : {false, true}) {
      ModelBuilder b = dynamic_model(per_column, bias, false);
      ir::Model copy = b.m;
      ASSERT_TRUE(shape::infer_shapes(copy).ok());
      optimizer::Stats st;
      ir::Model o = optimized(copy, OptLevel::kAll, &st);
      EXPECT_EQ(st.counts["fused_matmul_integer_to_float"], 1) << per_column << bias;
      EXPECT_EQ(count_op(o, "MatMulIntegerToFloat"), 1);
      EXPECT_EQ(count_op(o, "MatMulInteger") + count_op(o, "Cast") + count_op(o, "Add"), 0);
      const Tensor x = random_tensor({2, 5, 24}, 9, -3.f, 2.f);
      for (int threads : {1, 2}) {
        auto fused = run_at(b.m, OptLevel::kAll, {{"x", Value(x)}}, threads);
        auto plain = run_at(b.m, OptLevel::kDisabled, {{"x", Value(x)}}, threads);
        ASSERT_EQ(fused.size(), 1u);
        ASSERT_EQ(plain.size(), 1u);
        ASSERT_EQ(fused[0].shape(), plain[0].shape());
        EXPECT_EQ(std::memcmp(fused[0].data<float>(), plain[0].data<float>(), plain[0].nbytes()), 0)
            << "per_column " << per_column << " bias " << bias << " threads " << threads;
      }
    }
}

TEST(OptimizerMatMulIntegerToFloat, RefusesWhenTheCastIsReadElsewhere) {
  using namespace optest;
  ir::Model copy = dynamic_model(false, true, true).m;
  ASSERT_TRUE(shape::infer_shapes(copy).ok());
  ir::Model o = optimized(copy, OptLevel::kAll);
  EXPECT_EQ(count_op(o, "MatMulIntegerToFloat"), 0);
  EXPECT_EQ(count_op(o, "MatMulInteger"), 1);
}

}  // namespace
}  // namespace nxrt
