#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "ops/gemm.h"

using namespace nxrt;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

void check_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, ep::ThreadPool* pool,
                std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  // Leading dimensions larger than needed, to exercise ld handling.
  int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  std::vector<float> A((ta ? K : M) * lda + 1), B((tb ? N : K) * ldb + 1), C(M * ldc + 1), R;
  for (auto& x : A) x = d(rng);
  for (auto& x : B) x = d(rng);
  for (auto& x : C) x = d(rng);
  if (beta == 0.f) {
    for (auto& x : C) x = std::nanf("");  // must not be read
  }
  R = C;
  ops::gemm_f32(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, pool);
  ops::gemm_f32_reference(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, R.data(), ldc);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float want = R[i * ldc + j], got = C[i * ldc + j];
      ASSERT_NEAR(got, want, 1e-4f * (1 + std::sqrt(static_cast<float>(K))))
          << "ta=" << ta << " tb=" << tb << " M=" << M << " N=" << N << " K=" << K << " at " << i << "," << j;
    }
  }
}

}  // namespace

TEST(OpsLinalgGemm, BlockedMatchesReferenceOnRandomShapes) {
  std::mt19937 rng(42);
  ep::ThreadPool pool1(1), pool3(3);
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 33, 65, 100, 257, 300};
  std::uniform_int_distribution<int> pick(0, sizeof(sizes) / sizeof(sizes[0]) - 1);
  for (int it = 0; it < 60; ++it) {
    int64_t M = sizes[pick(rng)], N = sizes[pick(rng)], K = sizes[pick(rng)];
    if (M * N * K > 4000000) continue;
    bool ta = it & 1, tb = (it >> 1) & 1;
    float alpha = (it % 3 == 0) ? 1.f : 0.75f;
    float beta = (it % 4 == 0) ? 0.f : (it % 4 == 1 ? 1.f : -0.5f);
    check_gemm(ta, tb, M, N, K, alpha, beta, (it & 4) ? &pool3 : &pool1, rng);
  }
}

TEST(OpsLinalgGemm, EdgeShapes) {
  std::mt19937 rng(7);
  ep::ThreadPool pool(2);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm(ta, tb, 1, 1, 1, 1.f, 0.f, &pool, rng);
      check_gemm(ta, tb, 1, 1000, 37, 1.f, 0.f, &pool, rng);   // GEMV (M=1)
      check_gemm(ta, tb, 1000, 1, 37, 2.f, 1.f, &pool, rng);   // N=1
      check_gemm(ta, tb, 19, 23, 1, 1.f, 0.5f, &pool, rng);    // K=1
      check_gemm(ta, tb, 70, 530, 260, 1.f, 0.f, &pool, rng);  // crosses every block boundary
    }
  // K=0: C = beta*C.
  std::vector<float> C = {1, 2, 3, 4};
  ops::gemm_f32(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 2.f, C.data(), 2, nullptr);
  EXPECT_EQ(C, (std::vector<float>{2, 4, 6, 8}));
}
