// The float GEMM engine (ops/gemm/gemm.h) against the naive reference: random shapes (1s, odd sizes, edges of
// every block size), transposes, alpha/beta, every epilogue, raw / packed-B / packed-A operands, 1 and 2
// threads, every kernel variant this CPU runs (by tier), and the typed front doors over float and double.
// The variants' kernels themselves are checked one by one in test_gemm_kernels.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>
#include <vector>

#include "ep/thread_pool.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_kernels.h"

namespace nxrt {
namespace {

using ops::Activation;
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

void run_case(const Case& c, ep::ThreadPool* pool, std::mt19937& rng, ep::IsaTier isa = ep::cpu_isa_tier()) {
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
  ops::gemm_reference<float>(c.ta, c.tb, M, N, K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, R.data(), ldc, &ep);
  switch (c.op) {
    case Operand::kRaw:
      ops::gemm_f32(c.ta, c.tb, M, N, K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc, pool, &ep,
                    isa);
      break;
    case Operand::kPackedB: {
      ops::PackedB pb = ops::pack_b_f32(c.tb, K, N, B.data(), ldb, isa);
      ops::gemm_f32_packed(c.ta, M, c.alpha, A.data(), lda, pb, c.beta, C.data(), ldc, pool, &ep, isa);
      break;
    }
    case Operand::kPackedA: {
      ops::PackedA<float> pa = ops::pack_a<float>(c.ta, M, K, A.data(), lda);
      ops::gemm_f32_packed_a(M, N, K, c.alpha, pa.data.data(), c.tb, B.data(), ldb, c.beta, C.data(), ldc, pool, &ep,
                             isa);
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
  c.ep.act = static_cast<Activation>(it % 9);  // every activation
  c.ep.act_a = -0.3f;
  c.ep.act_b = 0.4f;
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

// The whole engine at each tier this CPU has (the tier picks the kernel variant: scalar, AVX2, ...).
TEST(Gemm, EveryTierAgainstReference) {
  ep::ThreadPool pool(2);
  for (int t = 0; t <= static_cast<int>(ep::cpu_isa_tier()); ++t) {
    const auto tier = static_cast<ep::IsaTier>(t);
    SCOPED_TRACE(ops::f32_gemm_kernels(tier).name);
    EXPECT_EQ(ops::gemm_vector_kernels(tier), ops::f32_gemm_kernels(tier).tier >= ep::IsaTier::kAvx2);
    std::mt19937 rng(99 + t);
    for (int it = 0; it < 90; ++it) {
      Case c = random_case(rng, it);
      run_case(c, (it & 1) ? &pool : nullptr, rng, tier);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  EXPECT_STREQ(ops::f32_gemm_kernels(ep::IsaTier::kScalar).name, "f32_gemm_6x16__scalar");
}

// Column counts whose last 64-column tile would hold a lone 16-column panel (65-80 past a multiple of 64:
// 196 is a 14x14 plane) end in a 48-column tile and a 17-32-column one at the AVX-512 tile; every tier,
// every operand form, 1 and 2 threads, with an epilogue, against the reference.
TEST(Gemm, LonePanelTailsAtEveryTier) {
  ep::ThreadPool pool(2);
  std::mt19937 rng(4242);
  for (int t = 0; t <= static_cast<int>(ep::cpu_isa_tier()); ++t) {
    const auto tier = static_cast<ep::IsaTier>(t);
    SCOPED_TRACE(ops::f32_gemm_kernels(tier).name);
    for (const int64_t N : {65, 72, 80, 129, 196, 208}) {
      for (const Operand op : {Operand::kRaw, Operand::kPackedB, Operand::kPackedA}) {
        Case c;
        c.M = N == 196 ? 40 : 13;
        c.N = N;
        c.K = N == 196 ? 300 : 37;
        c.op = op;
        c.ep.act = Activation::kRelu;
        c.ep.bias_kind = GemmBias::kPerRow;
        run_case(c, N % 2 ? &pool : nullptr, rng, tier);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  }
}

// A raw, non-transposed A is read in place by the tiers with tile_a_rows (no packing); a transposed
// copy of it is packed. Both multiply the same values in the same order: the same bits, at every tier,
// for raw and packed B, 1 and 2 threads, over several K blocks, row edges and an epilogue in the store.
TEST(Gemm, InPlaceAMatchesPackedABitForBit) {
  ep::ThreadPool pool(2);
  std::mt19937 rng(515);
  for (int t = 0; t <= static_cast<int>(ep::cpu_isa_tier()); ++t) {
    const auto tier = static_cast<ep::IsaTier>(t);
    SCOPED_TRACE(ops::f32_gemm_kernels(tier).name);
    for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{128, 200, 600}, {13, 64, 37}, {7, 1000, 300},
                                  {200, 33, 257}}) {
      const int64_t lda = K + 3, ldt = M + 1;
      const std::vector<float> A = rand_vec(rng, static_cast<size_t>(M * lda));
      const std::vector<float> B = rand_vec(rng, static_cast<size_t>(K * N));
      const std::vector<float> bias = rand_vec(rng, static_cast<size_t>(N));
      std::vector<float> At(static_cast<size_t>(K * ldt));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t k = 0; k < K; ++k) At[k * ldt + i] = A[i * lda + k];
      GemmEpilogue ep;
      ep.bias_kind = GemmBias::kPerColumn;
      ep.bias = bias.data();
      ep.act = Activation::kRelu;
      const ops::PackedB pb = ops::pack_b_f32(false, K, N, B.data(), N, tier);
      for (ep::ThreadPool* p : {static_cast<ep::ThreadPool*>(nullptr), &pool}) {
        std::vector<float> in_place(static_cast<size_t>(M * N)), packed(in_place.size());
        ops::gemm_f32_packed(false, M, 1.f, A.data(), lda, pb, 0.f, in_place.data(), N, p, &ep, tier);
        ops::gemm_f32_packed(true, M, 1.f, At.data(), ldt, pb, 0.f, packed.data(), N, p, &ep, tier);
        ASSERT_TRUE(in_place == packed) << "PackedB M=" << M << " N=" << N << " K=" << K;
        ops::gemm_f32(false, false, M, N, K, 0.5f, A.data(), lda, B.data(), N, 0.f, in_place.data(), N, p, nullptr,
                      tier);
        ops::gemm_f32(true, false, M, N, K, 0.5f, At.data(), ldt, B.data(), N, 0.f, packed.data(), N, p, nullptr, tier);
        ASSERT_TRUE(in_place == packed) << "raw B M=" << M << " N=" << N << " K=" << K;
      }
    }
  }
}

// gemm_f32_strips (B rows read in place) over the same tails, against the reference, at the tiers that
// read the rows exactly and the others (rows with 16 floats of readable slack).
TEST(Gemm, StripsLonePanelTails) {
  std::mt19937 rng(77);
  for (int t = 0; t <= static_cast<int>(ep::cpu_isa_tier()); ++t) {
    const auto tier = static_cast<ep::IsaTier>(t);
    SCOPED_TRACE(ops::f32_gemm_kernels(tier).name);
    for (const int64_t N : {65, 80, 196}) {
      const int64_t M = 11, K = 29, ldb = N + 16, ldc = N + 3;
      const std::vector<float> A = rand_vec(rng, static_cast<size_t>(M * K));
      const std::vector<float> B = rand_vec(rng, static_cast<size_t>(K * ldb));
      std::vector<int64_t> boff(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) boff[static_cast<size_t>(k)] = k * ldb;
      const ops::PackedA<float> pa = ops::pack_a<float>(false, M, K, A.data(), K);
      std::vector<float> C(static_cast<size_t>(M * ldc), 7.f), R = C;
      ops::gemm_reference<float>(false, false, M, N, K, 1.f, A.data(), K, B.data(), ldb, 0.f, R.data(), ldc);
      ops::gemm_f32_strips(M, K, pa.data.data(), B.data(), boff.data(), N, C.data(), ldc, 0, nullptr, tier);
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < ldc; ++j) {
          const size_t at = static_cast<size_t>(i * ldc + j);
          ASSERT_NEAR(C[at], R[at], 1e-4f * K) << "N=" << N << " at (" << i << ", " << j << ")";
        }
    }
  }
}

TEST(Gemm, LargerThanBlocksAndThreaded) {
  std::mt19937 rng(7);
  ep::ThreadPool pool(2);
  // K over two K blocks, N over one NC block, M over one MC block; GEMV with packed weights.
  const Case cases[] = {
      {false, false, 250, 530, 600, 1.f, 0.f, {}, Operand::kRaw},
      {true, true, 131, 515, 513, 0.5f, 1.f, {}, Operand::kPackedB},
      {false, true, 127, 1029, 259, 1.f, 0.f, {}, Operand::kPackedA},
      // K 200: column blocks narrowed to 640 (half an L2 of packed B), three of them.
      {false, false, 64, 1300, 200, 1.f, 0.f, {}, Operand::kPackedA},
      // At most 6 row panels (M <= 36) against a raw B: 64-column blocks, here 48 of them and a partial
      // one, over two K blocks; M 37 keeps the wide blocks.
      {false, false, 16, 3025, 300, 1.f, 0.f, {}, Operand::kPackedA},
      {false, true, 36, 1041, 128, 1.f, 1.f, {}, Operand::kPackedA},
      {false, false, 37, 1041, 128, 1.f, 0.f, {}, Operand::kPackedA},
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

// The typed front doors: gemm<T> and gemm_packed_a<T> (float: the engine; double: gemm_f64, with A
// prepacked or not) against the reference, with beta 0 and 1.
template <typename T>
void check_typed_front_doors(std::mt19937& rng, ep::ThreadPool* pool, T tol) {
  std::uniform_real_distribution<T> d(-1, 1);
  for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{37, 301, 290}, {150, 40, 600}, {1, 17, 5}, {9, 1, 300}, {5, 3, 0}}) {
    for (const bool ta : {false, true}) {
      for (const T beta : {T(0), T(1)}) {
        std::vector<T> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N)), C(static_cast<size_t>(M * N));
        for (T& v : A) v = d(rng);
        for (T& v : B) v = d(rng);
        for (T& v : C) v = d(rng);
        std::vector<T> R = C, C2 = C;
        const int64_t lda = ta ? M : K;
        ops::gemm_reference<T>(ta, false, M, N, K, T(1), A.data(), lda, B.data(), N, beta, R.data(), N);
        ops::gemm<T>(ta, false, M, N, K, T(1), A.data(), lda, B.data(), N, beta, C.data(), N, pool);
        const ops::PackedA<T> pa = ops::pack_a<T>(ta, M, K, A.data(), lda);
        EXPECT_EQ(pa.m_padded % ops::kGemmPanelRows<T>, 0);
        ops::gemm_packed_a<T>(pa, N, false, B.data(), N, beta, C2.data(), N, pool);
        for (size_t i = 0; i < R.size(); ++i) {
          ASSERT_NEAR(C[i], R[i], tol) << "gemm M=" << M << " N=" << N << " K=" << K << " at " << i;
          ASSERT_NEAR(C2[i], R[i], tol) << "gemm_packed_a M=" << M << " N=" << N << " K=" << K << " at " << i;
        }
      }
    }
  }
}

TEST(Gemm, TypedFrontDoorsFloatAndDouble) {
  std::mt19937 rng(3);
  ep::ThreadPool pool(2);
  check_typed_front_doors<float>(rng, &pool, 1e-3f);
  check_typed_front_doors<double>(rng, &pool, 1e-10);
  check_typed_front_doors<double>(rng, nullptr, 1e-10);
}

}  // namespace
}  // namespace nxrt
