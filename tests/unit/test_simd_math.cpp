// ops/simd_math.h: the vector exponentials give the scalar definition's bits lane for lane, every tier
// the CPU has (exp8_avx2 against exp_fast's range reduction; exp16_avx512 against exp8_avx2).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/simd_math.h"

namespace {

using namespace nxrt;

#if defined(__x86_64__) || defined(__i386__)
std::vector<float> exp_inputs() {
  std::vector<float> v = {0.f, -0.f, 1.f, -1.f, 88.72283f, 88.7229f, -87.33654f, -87.34f, -103.f, 200.f, -200.f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN(), 1e-30f, -1e-30f};
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> wide(-100.f, 100.f), narrow(-3.f, 3.f);
  for (int i = 0; i < 4000; ++i) v.push_back(i % 2 ? wide(rng) : narrow(rng));
  while (v.size() % 16) v.push_back(0.5f);
  return v;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

__attribute__((target("avx2,fma"))) void exp_avx2_all(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; i += 8) _mm256_storeu_ps(y + i, ops::exp8_avx2(_mm256_loadu_ps(x + i)));
}
__attribute__((target("avx512f,avx512dq,avx2,fma"))) void exp_avx512_all(const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; i += 16) _mm512_storeu_ps(y + i, ops::exp16_avx512(_mm512_loadu_ps(x + i)));
}

TEST(SimdMath, Exp16Avx512HasExp8Avx2Bits) {
  if (ep::cpu_isa_tier() < ep::IsaTier::kAvx512) {
    std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
    GTEST_SKIP();
  }
  const std::vector<float> x = exp_inputs();
  std::vector<float> a(x.size()), b(x.size());
  exp_avx2_all(x.data(), a.data(), x.size());
  exp_avx512_all(x.data(), b.data(), x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(a[i])) {
      EXPECT_TRUE(std::isnan(b[i])) << "x = " << x[i];
      continue;
    }
    ASSERT_EQ(bits(a[i]), bits(b[i])) << "x = " << x[i] << ": avx2 " << a[i] << ", avx512 " << b[i];
    if (std::isfinite(x[i]) && x[i] > -80.f && x[i] < 80.f) {  // and both are exp(x), not just equal
      EXPECT_NEAR(b[i] / std::exp(static_cast<double>(x[i])), 1.0, 2e-6) << "x = " << x[i];
    }
  }
  EXPECT_EQ(b[11], std::numeric_limits<float>::infinity());
  EXPECT_EQ(b[12], 0.f);
}

TEST(SimdMath, SigmoidLikeAvx512HasAvx2Bits) {
  if (ep::cpu_isa_tier() < ep::IsaTier::kAvx512) {
    std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
    GTEST_SKIP();
  }
  const std::vector<float> x = exp_inputs();
  for (bool swish : {true, false})
    for (float alpha : {1.f, 1.702f})
      for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(15), size_t(16), size_t(17), size_t(40), x.size()}) {
        std::vector<float> a(n, -1.f), b(n + 16, -7.f);
        ops::sigmoid_like_avx2(x.data(), a.data(), static_cast<int64_t>(n), alpha, swish);
        ops::sigmoid_like_avx512(x.data(), b.data(), static_cast<int64_t>(n), alpha, swish);
        for (size_t i = 0; i < n; ++i) {
          if (std::isnan(a[i])) {
            EXPECT_TRUE(std::isnan(b[i]));
            continue;
          }
          ASSERT_EQ(bits(a[i]), bits(b[i])) << "swish " << swish << " n " << n << " x = " << x[i];
        }
        for (size_t i = n; i < n + 16; ++i) ASSERT_EQ(b[i], -7.f) << "wrote past n = " << n;  // masked tail
        // And it is the function: sigmoid(x) or x * sigmoid(alpha x).
        for (size_t i = 0; i < n; ++i) {
          const double xi = x[i];
          if (!std::isfinite(xi) || std::fabs(xi) > 50) continue;
          const double sg = 1.0 / (1.0 + std::exp(-(swish ? alpha : 1.f) * xi)), want = swish ? xi * sg : sg;
          EXPECT_NEAR(b[i], want, 1e-5 * std::max(1.0, std::fabs(want))) << "x = " << xi;
        }
      }
}
#endif

}  // namespace
