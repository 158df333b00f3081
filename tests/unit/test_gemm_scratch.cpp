// The float GEMM engine's packing scratch handed in by the caller (GemmScratch, gemm_f32_scratch_floats):
// on given slots at 1 and 2 threads, on too-small or too-few slots (the engine's per-call fallback), and
// without any, over shapes with several K, N and M blocks, raw / packed-A / packed-B / generated-B
// operands. At a thread count all results are bit-identical (and at 1 thread to the pool-less call),
// all close to gemm_reference; given scratch is written, refused scratch is not.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "ops/gemm/gemm.h"

namespace nxrt {
namespace {

using ops::GemmScratch;

enum class Op { kRaw, kPackedA, kPackedB, kGenB };

// 64-byte-aligned floats filled with a sentinel, so a test sees whether the engine wrote them.
struct Buf {
  explicit Buf(size_t n) : n(n), mem(std::make_unique<float[]>(n + 16)) {
    p = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(mem.get()) + 63) & ~uintptr_t(63));
    for (size_t i = 0; i < n; ++i) p[i] = kSentinel;
  }
  bool touched() const {
    for (size_t i = 0; i < n; ++i)
      if (std::memcmp(&p[i], &kSentinel, sizeof(float)) != 0) return true;
    return false;
  }
  static constexpr float kSentinel = -12345.5f;
  size_t n;
  std::unique_ptr<float[]> mem;
  float* p = nullptr;
};

struct Problem {
  int64_t M, N, K;
  bool ta, tb;
  std::vector<float> A, B;
  ops::PackedA<float> pa;
  ops::PackedB pb;
};

std::vector<float> run(const Problem& pr, Op op, ep::ThreadPool* pool, const GemmScratch* gs) {
  const int64_t M = pr.M, N = pr.N, K = pr.K;
  std::vector<float> C(static_cast<size_t>(M * N), 7.f);
  ops::GemmEpilogue ep;
  ep.act = ops::Activation::kRelu;
  switch (op) {
    case Op::kRaw:
      ops::gemm_f32(pr.ta, pr.tb, M, N, K, 1.f, pr.A.data(), pr.ta ? M : K, pr.B.data(), pr.tb ? K : N, 0.f,
                    C.data(), N, pool, &ep, ep::cpu_isa_tier(), gs);
      break;
    case Op::kPackedA:
      ops::gemm_f32_packed_a(M, N, K, 1.f, pr.pa.data.data(), pr.tb, pr.B.data(), pr.tb ? K : N, 0.f, C.data(), N,
                             pool, &ep, ep::cpu_isa_tier(), gs);
      break;
    case Op::kPackedB:
      ops::gemm_f32_packed(pr.ta, M, 1.f, pr.A.data(), pr.ta ? M : K, pr.pb, 0.f, C.data(), N, pool, &ep,
                           ep::cpu_isa_tier(), gs);
      break;
    case Op::kGenB: {
      // op(B) block by block in the engine's panel layout.
      auto gen = [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
        constexpr int64_t NR = ops::kGemmNR;
        for (int64_t q = 0; q * NR < nc; ++q)
          for (int64_t k = 0; k < kc; ++k)
            for (int64_t j = 0; j < NR; ++j) {
              const int64_t col = j0 + q * NR + j, row = p0 + k;
              float v = 0.f;
              if (q * NR + j < nc) v = pr.tb ? pr.B[col * K + row] : pr.B[row * N + col];
              dst[q * NR * kc + k * NR + j] = v;
            }
      };
      ops::gemm_f32_packed_a_gen_b(M, N, K, 1.f, pr.pa.data.data(), gen, 0.f, C.data(), N, pool, &ep,
                                   ep::cpu_isa_tier(), gs);
      break;
    }
  }
  return C;
}

TEST(GemmScratch, GivenFallbackAndNoneAreBitIdentical) {
  std::mt19937 rng(1234);
  ep::ThreadPool pool1(1), pool2(2);
  struct Shape {
    int64_t M, N, K;
  };
  // Several K blocks (256), N blocks (512-1024 columns), M blocks (144 rows); odd edges; a few random ones.
  std::vector<Shape> shapes = {{150, 1100, 600}, {13, 2100, 300}, {300, 70, 513}, {7, 33, 5}, {2, 1500, 260}};
  std::uniform_int_distribution<int64_t> dm(2, 200), dn(2, 1300), dk(1, 700);
  for (int i = 0; i < 3; ++i) shapes.push_back({dm(rng), dn(rng), dk(rng)});
  int given_used = 0;
  for (const Shape& sh : shapes) {
    for (Op op : {Op::kRaw, Op::kPackedA, Op::kPackedB, Op::kGenB}) {
      Problem pr{sh.M, sh.N, sh.K, static_cast<bool>(rng() & 1), static_cast<bool>(rng() & 1), {}, {}, {}, {}};
      if (op == Op::kPackedA || op == Op::kGenB) pr.ta = false;
      pr.A = nxrt::testing::random_floats(rng, sh.M * sh.K);
      pr.B = nxrt::testing::random_floats(rng, sh.K * sh.N);
      pr.pa = ops::pack_a<float>(pr.ta, sh.M, sh.K, pr.A.data(), pr.ta ? sh.M : sh.K);
      pr.pb = ops::pack_b_f32(pr.tb, sh.K, sh.N, pr.B.data(), pr.tb ? sh.K : sh.N);
      SCOPED_TRACE(::testing::Message() << "M " << sh.M << " N " << sh.N << " K " << sh.K << " ta " << pr.ta << " tb "
                                      << pr.tb << " op " << static_cast<int>(op));
      const bool a_packed = op == Op::kPackedA || op == Op::kGenB, b_packed = op == Op::kPackedB;
      const size_t floats = ops::gemm_f32_scratch_floats(sh.M, sh.N, sh.K, a_packed, b_packed);
      ASSERT_EQ(floats % 16, 0u);

      std::vector<float> ref(static_cast<size_t>(sh.M * sh.N), 7.f);
      ops::GemmEpilogue ep;
      ep.act = ops::Activation::kRelu;
      ops::gemm_reference<float>(pr.ta, pr.tb, sh.M, sh.N, sh.K, 1.f, pr.A.data(), pr.ta ? sh.M : sh.K, pr.B.data(),
                                 pr.tb ? sh.K : sh.N, 0.f, ref.data(), sh.N, &ep);
      const std::vector<float> base = run(pr, op, nullptr, nullptr);
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(base[i], ref[i], 1e-4f * static_cast<float>(sh.K) + 1e-4f) << "at " << i;

      for (ep::ThreadPool* pool : {&pool1, &pool2}) {
        const int t = pool->num_threads();
        SCOPED_TRACE(::testing::Message() << t << " threads");
        // Threads may split the columns into narrower blocks (another tiling of the edges: last bits
        // may differ from one thread's); at a thread count, scratch or not changes nothing.
        const std::vector<float> plain = run(pr, op, pool, nullptr);
        if (t == 1) {
          EXPECT_EQ(plain, base) << "1 thread vs no pool";
        }
        for (size_t i = 0; i < ref.size(); ++i)
          ASSERT_NEAR(plain[i], ref[i], 1e-4f * static_cast<float>(sh.K) + 1e-4f) << "at " << i;
        EXPECT_EQ(run(pr, op, pool, nullptr), plain) << "no scratch, again";
        // What this call packs (a raw, non-transposed A is read in place where the tier has tile_a_rows:
        // then only a B block, or nothing), which the bound covers.
        const size_t used = ops::gemm_f32_plan(sh.M, sh.N, sh.K, a_packed ? ops::GemmA::kPacked : ops::GemmA::kRaw,
                                               b_packed           ? ops::GemmB::kPacked
                                               : op == Op::kGenB  ? ops::GemmB::kGenerated
                                                                  : ops::GemmB::kRaw,
                                               pr.ta, pr.tb, t)
                                .scratch_floats;
        EXPECT_LE(used, floats);
        {  // the bound, one slot per thread
          Buf b(floats * static_cast<size_t>(t));
          const GemmScratch gs{b.p, floats, t};
          EXPECT_EQ(run(pr, op, pool, &gs), plain) << "given";
          if (used > 0) {
            EXPECT_TRUE(b.touched()) << "given scratch unused";
            ++given_used;
          }
        }
        if (used > 16) {  // slots too small: the fallback, the given memory untouched
          Buf b((used - 16) * static_cast<size_t>(t));
          const GemmScratch gs{b.p, used - 16, t};
          EXPECT_EQ(run(pr, op, pool, &gs), plain) << "too small";
          EXPECT_FALSE(b.touched()) << "too-small scratch written";
        }
        if (t > 1 && used > 0) {  // fewer slots than threads
          Buf b(used);
          const GemmScratch gs{b.p, used, 1};
          EXPECT_EQ(run(pr, op, pool, &gs), plain) << "too few slots";
          EXPECT_FALSE(b.touched()) << "too-few-slot scratch written";
        }
      }
    }
  }
  EXPECT_GT(given_used, 0);
}

// The per-slot size is independent of the threads and covers every block the engine packs: a GEMM
// nested in a pool's chunks on one slot each (Winograd's products) gets the same bits.
TEST(GemmScratch, NestedInChunksUsesTheChunkThreadsSlot) {
  std::mt19937 rng(99);
  ep::ThreadPool pool(2);
  const int t = pool.num_threads();
  const int64_t M = 40, N = 700, K = 300, batches = 8;
  const auto A = nxrt::testing::random_floats(rng, batches * M * K);
  const auto B = nxrt::testing::random_floats(rng, K * N);
  const size_t floats = ops::gemm_f32_scratch_floats(M, N, K, false, false);
  std::vector<float> want(static_cast<size_t>(batches * M * N)), got(want.size());
  for (int64_t b = 0; b < batches; ++b)
    ops::gemm_f32(false, false, M, N, K, 1.f, A.data() + b * M * K, K, B.data(), N, 0.f, want.data() + b * M * N, N,
                  nullptr);
  Buf scr(floats * static_cast<size_t>(t));
  const GemmScratch gs{scr.p, floats, t};
  pool.parallel_for(batches, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      ops::gemm_f32(false, false, M, N, K, 1.f, A.data() + b * M * K, K, B.data(), N, 0.f, got.data() + b * M * N, N,
                    &pool, nullptr, ep::cpu_isa_tier(), &gs);
  });
  EXPECT_EQ(got, want);
  EXPECT_TRUE(scr.touched());
}

}  // namespace
}  // namespace nxrt
