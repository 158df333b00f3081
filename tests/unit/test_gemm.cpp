// The float GEMM engine (ops/gemm/gemm.h) against the naive reference: random shapes (1s, odd sizes, edges of
// every block size), transposes, alpha/beta, every epilogue, raw / packed-B / packed-A operands, 1 and 2
// threads, and the portable kernels forced on.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ep/thread_pool.h"
#include "ops/gemm/conv_gemm.h"
#include "ops/gemm/gemm.h"

namespace nxrt {
namespace {

using ops::GemmActivation;
using ops::GemmBias;
using ops::GemmEpilogue;

enum class Operand { kRaw, kPackedB, kPackedA };

struct Case {
  bool ta = false, tb = false;
  int64_t M = 1, N = 1, K = 1;
  float alpha = 1.f, beta = 0.f;
  GemmEpilogue ep;
  Operand op = Operand::kRaw;
};

std::vector<float> rand_vec(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void run_case(const Case& c, ep::ThreadPool* pool, std::mt19937& rng) {
  const int64_t M = c.M, N = c.N, K = c.K;
  const int64_t lda = (c.ta ? M : K) + 3, ldb = (c.tb ? K : N) + 1, ldc = N + 2;
  std::vector<float> A = rand_vec(rng, static_cast<size_t>((c.ta ? K : M) * lda));
  std::vector<float> B = rand_vec(rng, static_cast<size_t>((c.tb ? N : K) * ldb));
  std::vector<float> C0 = rand_vec(rng, static_cast<size_t>(M * ldc));
  if (c.beta == 0.f) std::fill(C0.begin(), C0.end(), std::nanf(""));  // beta == 0 must not read C
  std::vector<float> bias_col = rand_vec(rng, static_cast<size_t>(N)), bias_row = rand_vec(rng, static_cast<size_t>(M));
  std::vector<float> res = rand_vec(rng, static_cast<size_t>(M * N));
  GemmEpilogue ep = c.ep;
  if (ep.bias_kind == GemmBias::kPerColumn) ep.bias = bias_col.data();
  if (ep.bias_kind == GemmBias::kPerRow) ep.bias = bias_row.data();
  if (ep.residual) {
    ep.residual = res.data();
    ep.ldr = N;
  }
  std::vector<float> C = C0, R = C0;
  if (c.beta == 0.f) std::fill(R.begin(), R.end(), 0.f);
  ops::gemm_f32_reference(c.ta, c.tb, M, N, K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, R.data(), ldc, &ep);
  switch (c.op) {
    case Operand::kRaw:
      ops::gemm_f32(c.ta, c.tb, M, N, K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc, pool, &ep);
      break;
    case Operand::kPackedB: {
      ops::PackedB pb = ops::pack_b_f32(c.tb, K, N, B.data(), ldb);
      ops::gemm_f32_packed(c.ta, M, c.alpha, A.data(), lda, pb, c.beta, C.data(), ldc, pool, &ep);
      break;
    }
    case Operand::kPackedA: {
      ops::PackedAF32 pa = ops::pack_a_f32(c.ta, M, K, A.data(), lda);
      ops::gemm_f32_packed_a(M, N, K, c.alpha, pa.data.data(), c.tb, B.data(), ldb, c.beta, C.data(), ldc, pool, &ep);
      break;
    }
  }
  const float tol = 1e-4f * static_cast<float>(K) + 1e-5f;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      const float r = R[i * ldc + j], v = C[i * ldc + j];
      ASSERT_NEAR(v, r, tol * (1.f + std::fabs(r)))
          << "M=" << M << " N=" << N << " K=" << K << " ta=" << c.ta << " tb=" << c.tb << " alpha=" << c.alpha
          << " beta=" << c.beta << " op=" << int(c.op) << " act=" << int(ep.act) << " bias=" << int(ep.bias_kind)
          << " at " << i << "," << j;
    }
    // Padding columns of C are untouched.
    for (int64_t j = N; j < ldc; ++j) {
      const float a = C[i * ldc + j], b = C0[i * ldc + j];
      ASSERT_TRUE((std::isnan(a) && std::isnan(b)) || a == b);
    }
  }
}

Case random_case(std::mt19937& rng, int it) {
  static const int64_t dims[] = {1, 2, 3, 5, 6, 7, 13, 16, 17, 31, 33, 64, 97, 121, 130, 257, 300};
  auto pick = [&] { return dims[rng() % (sizeof(dims) / sizeof(dims[0]))]; };
  Case c;
  c.M = pick();
  c.N = pick();
  c.K = pick();
  c.ta = rng() & 1;
  c.tb = rng() & 1;
  static const float alphas[] = {1.f, 0.5f, -2.f, 0.f};
  static const float betas[] = {0.f, 1.f, 0.25f};
  c.alpha = alphas[rng() % 4];
  c.beta = betas[rng() % 3];
  c.ep.act = static_cast<GemmActivation>(it % 6);
  c.ep.clip_min = -0.3f;
  c.ep.clip_max = 0.4f;
  c.ep.bias_kind = static_cast<GemmBias>(rng() % 3);
  c.ep.residual = (rng() & 1) ? reinterpret_cast<const float*>(1) : nullptr;  // filled in run_case
  c.op = static_cast<Operand>(rng() % 3);
  return c;
}

TEST(Gemm, RandomShapesAgainstReference) {
  std::mt19937 rng(1234);
  ep::ThreadPool pool1(1), pool2(2);
  for (int it = 0; it < 240; ++it) {
    Case c = random_case(rng, it);
    run_case(c, (it & 1) ? &pool2 : &pool1, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Gemm, PortableKernelsAgainstReference) {
  std::mt19937 rng(99);
  ep::ThreadPool pool(2);
  ops::gemm_set_allow_avx2(false);
  EXPECT_FALSE(ops::gemm_using_avx2());
  for (int it = 0; it < 120; ++it) {
    Case c = random_case(rng, it);
    run_case(c, (it & 1) ? &pool : nullptr, rng);
    if (::testing::Test::HasFatalFailure()) break;
  }
  ops::gemm_set_allow_avx2(true);
}

TEST(Gemm, LargerThanBlocksAndThreaded) {
  std::mt19937 rng(7);
  ep::ThreadPool pool(2);
  // K over two K blocks, N over one NC block, M over one MC block; GEMV with packed weights.
  const Case cases[] = {
      {false, false, 250, 530, 600, 1.f, 0.f, {}, Operand::kRaw},
      {true, true, 131, 515, 513, 0.5f, 1.f, {}, Operand::kPackedB},
      {false, true, 127, 1029, 259, 1.f, 0.f, {}, Operand::kPackedA},
      {false, false, 1, 1100, 1030, 1.f, 0.f, {}, Operand::kPackedB},
      {false, true, 1, 1100, 1030, 1.f, 0.5f, {}, Operand::kRaw},
      {false, false, 1, 1100, 1030, 2.f, 0.f, {}, Operand::kRaw},
      {true, false, 700, 1, 300, 1.f, 1.f, {}, Operand::kRaw},
  };
  for (const Case& c : cases) {
    run_case(c, &pool, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(Gemm, ConvGemmFloatUsesEngine) {
  std::mt19937 rng(3);
  ep::ThreadPool pool(2);
  const int64_t M = 37, N = 301, K = 290;
  std::vector<float> A = rand_vec(rng, M * K), B = rand_vec(rng, K * N), C(M * N, 0.5f), R(M * N, 0.5f);
  ops::convgemm::PackedA<float> pa;
  ops::convgemm::pack_a<float>(false, M, K, A.data(), K, 1.f, &pa);
  ops::convgemm::gemm_packed<float>(pa, N, false, B.data(), N, C.data(), N, /*accumulate=*/true, &pool);
  ops::gemm_f32_reference(false, false, M, N, K, 1.f, A.data(), K, B.data(), N, 1.f, R.data(), N);
  for (int64_t i = 0; i < M * N; ++i) ASSERT_NEAR(C[i], R[i], 1e-3f) << i;
}

}  // namespace
}  // namespace nxrt
