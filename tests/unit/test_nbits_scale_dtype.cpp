// SessionOptions::matmulnbits_scale_dtype = float16 on small MatMulNBits graphs: a session with the
// option gives the bits of the same model whose scales were rounded to float16 beforehand (also when
// the optimizer stacks two siblings into nxrt::MatMulNBitsSplit: the rounding comes before the
// fusions), and differs from the unrounded model; scales float16 cannot hold as normal numbers, and
// scales another node also reads, are kept; any type but float16 is refused, naming the option.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "nxrt/float_types.h"
#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;

namespace {

constexpr int64_t kM = 3, kK = 64, kBlock = 32, kKb = kK / kBlock;

std::vector<float> random_scales(int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(0.001f, 0.02f);
  std::vector<float> s(static_cast<size_t>(count));
  for (float& v : s) v = d(rng);
  return s;
}

std::vector<float> rounded(std::vector<float> s) {
  for (float& v : s) v = half_to_float(float_to_half(v));
  return s;
}

// y_i = MatMulNBits(a, B_i, S_i) for each scales vector (N_i = size / kKb columns), accuracy_level 4:
// siblings on one A, which opt level all stacks. `identity_reads_s0`: an Identity also reads S_0.
ir::Model nbits_model(const std::vector<std::vector<float>>& scales, bool identity_reads_s0 = false) {
  ModelBuilder b(17);
  b.m.opset_imports.push_back({"com.microsoft", 1});
  b.input("a", {kM, kK});
  std::mt19937 rng(3);
  for (size_t i = 0; i < scales.size(); ++i) {
    const int64_t n = static_cast<int64_t>(scales[i].size()) / kKb;
    const std::string id = std::to_string(i);
    std::vector<uint8_t> codes(static_cast<size_t>(n * kKb * kBlock / 2));
    for (uint8_t& c : codes) c = static_cast<uint8_t>(rng());
    b.init("B" + id, Tensor::from_vector<uint8_t>(DataType::kUInt8, {n, kKb, kBlock / 2}, codes));
    b.init("S" + id, Tensor::from_vector<float>(DataType::kFloat, {n * kKb}, scales[i]));
    ir::Node& node = b.node("MatMulNBits", {"a", "B" + id, "S" + id}, {"y" + id},
                            {nxrt::testing::attr_int("K", kK), nxrt::testing::attr_int("N", n),
                             nxrt::testing::attr_int("bits", 4), nxrt::testing::attr_int("block_size", kBlock),
                             nxrt::testing::attr_int("accuracy_level", 4)});
    node.domain = "com.microsoft";
    b.output("y" + id);
  }
  if (identity_reads_s0) {
    b.node("Identity", {"S0"}, {"s_copy"});
    b.output("s_copy");
  }
  return b.m;
}

Result<std::unique_ptr<Session>> session_of(const ir::Model& m, DataType scales, OptLevel level = OptLevel::kAll) {
  const std::string bytes = onnx::serialize_model(m);
  SessionOptions so;
  so.opt_level = level;
  so.matmulnbits_scale_dtype = scales;
  return Session::create_from_bytes(bytes.data(), bytes.size(), so);
}

// The y outputs of a run on a fixed A.
std::vector<Tensor> run(const ir::Model& m, DataType scales, OptLevel level = OptLevel::kAll) {
  auto s = session_of(m, scales, level);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  auto r = (*s)->run({{"a", Value(random_tensor({kM, kK}, 7))}});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {};
  std::vector<Tensor> out;
  for (const Value& v : *r) out.push_back(v.tensor());
  return out;
}

bool same_bits(const Tensor& x, const Tensor& y) {
  return x.dtype() == y.dtype() && x.shape() == y.shape() && std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

}  // namespace

TEST(MatMulNBitsScaleDtype, GivesTheBitsOfTheRoundedModel) {
  // Two siblings (64 + 48 columns): stacked at level all, separate at level disabled.
  const std::vector<std::vector<float>> s = {random_scales(64 * kKb, 1), random_scales(48 * kKb, 2)};
  const ir::Model model = nbits_model(s);
  const ir::Model model_rounded = nbits_model({rounded(s[0]), rounded(s[1])});
  for (OptLevel level : {OptLevel::kAll, OptLevel::kDisabled}) {
    const std::vector<Tensor> with = run(model, DataType::kFloat16, level);
    const std::vector<Tensor> want = run(model_rounded, DataType::kUndefined, level);
    const std::vector<Tensor> plain = run(model, DataType::kUndefined, level);
    ASSERT_EQ(with.size(), 2u);
    ASSERT_EQ(want.size(), 2u);
    ASSERT_EQ(plain.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(same_bits(with[i], want[i])) << "output " << i << " level " << static_cast<int>(level);
      // The scales did change: some output moves (by about the rounding).
      EXPECT_FALSE(same_bits(with[i], plain[i])) << "output " << i;
      for (int64_t k = 0; k < with[i].numel(); ++k) {
        const float a = with[i].data<float>()[k], p = plain[i].data<float>()[k];
        EXPECT_NEAR(a, p, 2e-3f * (1.f + std::fabs(p))) << k;
      }
    }
  }
}

TEST(MatMulNBitsScaleDtype, KeepsScalesFloat16CannotHold) {
  std::vector<float> s = random_scales(64 * kKb, 4);
  s[5] = 1e-9f;  // a float16 subnormal: rounding would keep few of its bits
  const ir::Model model = nbits_model({s});
  const std::vector<Tensor> with = run(model, DataType::kFloat16);
  const std::vector<Tensor> plain = run(model, DataType::kUndefined);
  ASSERT_EQ(with.size(), 1u);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_TRUE(same_bits(with[0], plain[0]));
}

TEST(MatMulNBitsScaleDtype, KeepsScalesAnotherNodeReads) {
  const ir::Model model = nbits_model({random_scales(64 * kKb, 5)}, /*identity_reads_s0=*/true);
  const std::vector<Tensor> with = run(model, DataType::kFloat16);
  const std::vector<Tensor> plain = run(model, DataType::kUndefined);
  ASSERT_EQ(with.size(), 2u);
  ASSERT_EQ(plain.size(), 2u);
  for (size_t i = 0; i < 2; ++i) EXPECT_TRUE(same_bits(with[i], plain[i])) << "output " << i;
}

TEST(MatMulNBitsScaleDtype, RefusesOtherTypes) {
  auto s = session_of(nbits_model({random_scales(64 * kKb, 6)}), DataType::kInt8);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("matmulnbits_scale_dtype"), std::string::npos) << s.status().to_string();
}
