// The 8-bit integer GEMM (ops/linalg/qgemm_u8s8.h) and MatMulInteger's packed-B path: every kernel
// this CPU runs against exact sums on random shapes and operand kinds, and the op's packed path against
// its generic loop at each tier.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "ops/linalg/qgemm_u8s8.h"

namespace nxrt {
namespace {

using ops::QGemmKernel;
using testing::KernelRun;

std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& x : v) x = static_cast<uint8_t>(d(rng));
  return v;
}

int32_t value_of(uint8_t raw, bool is_signed) { return is_signed ? static_cast<int8_t>(raw) : raw; }

// The vector kernels this CPU runs; each one it cannot run is named as skipped.
std::vector<ops::QGemmKernelInfo> runnable_kernels() {
  std::vector<ops::QGemmKernelInfo> out;
  for (const ops::QGemmKernelInfo& k : ops::qgemm_kernels()) {
    if (ops::qgemm_kernel_supported(k.kernel)) out.push_back(k);
    else std::printf("[ SKIPPED  ] %s: this CPU cannot run it (best tier %s)\n", k.name, ep::isa_tier_name(ep::cpu_isa_tier()));
  }
  return out;
}

// Every vector kernel against sum_k (A - za)(B - zb) in 64-bit (wrapped to int32 as the op defines),
// over signed and unsigned A and B, per-row and per-column zero points across the whole byte range,
// K off whole quads, N off whole panels, row counts across the 4-row tile's tails, 1 and 2 threads.
TEST(QGemmU8S8, EveryKernelMatchesExactSums) {
  std::mt19937 rng(7);
  ep::ThreadPool pool(2);
  const std::vector<ops::QGemmKernelInfo> kernels = runnable_kernels();
  ASSERT_FALSE(kernels.empty()) << "no vector kernel runs on this CPU";
  for (const ops::QGemmKernelInfo& k : kernels) {
    int cases = 0;
    for (int64_t M : {1, 2, 3, 4, 5, 7, 8, 12, 15, 17, 70})  // the 8-row tile, then 4 rows, then the rest
      for (bool a_signed : {false, true})
        for (bool b_signed : {false, true}) {
          std::uniform_int_distribution<int64_t> kd(1, 300), nd(1, 50);
          const int64_t K = kd(rng), N = nd(rng);
          const auto A = random_bytes(rng, static_cast<size_t>(M * K)), B = random_bytes(rng, static_cast<size_t>(K * N));
          const auto zab = random_bytes(rng, static_cast<size_t>(M)), zbb = random_bytes(rng, static_cast<size_t>(N));
          std::vector<int32_t> za(static_cast<size_t>(M)), zb(static_cast<size_t>(N));
          for (int64_t m = 0; m < M; ++m) za[static_cast<size_t>(m)] = value_of(zab[static_cast<size_t>(m)], a_signed);
          for (int64_t n = 0; n < N; ++n) zb[static_cast<size_t>(n)] = value_of(zbb[static_cast<size_t>(n)], b_signed);
          const ops::QGemmPackedB P = ops::qgemm_pack_b(B.data(), b_signed, K, N);
          std::vector<uint8_t> ws(ops::qgemm_workspace_bytes(P, M));
          std::vector<int32_t> y(static_cast<size_t>(M * N), -7);
          ops::qgemm_u8s8(k.kernel, A.data(), a_signed, M, K, za.data(), P, zb.data(), y.data(), N,
                          cases % 2 ? &pool : nullptr, ws.data());
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
              int64_t want = 0;
              for (int64_t kk = 0; kk < K; ++kk)
                want += (value_of(A[static_cast<size_t>(m * K + kk)], a_signed) - za[static_cast<size_t>(m)]) *
                        static_cast<int64_t>(value_of(B[static_cast<size_t>(kk * N + n)], b_signed) - zb[static_cast<size_t>(n)]);
              ASSERT_EQ(y[static_cast<size_t>(m * N + n)], static_cast<int32_t>(want))
                  << k.name << " M,K,N " << M << "," << K << "," << N << (a_signed ? " s8" : " u8") << " x "
                  << (b_signed ? "s8" : "u8") << " at " << m << "," << n;
            }
          ++cases;
        }
  }
}

// Every kernel reading A's rows in place (QGemmARows, the implicit conv's form): a row's quads in 1-3
// runs, rows closer together than a run (overlapping, as a conv's neighbouring pixels are), the runs
// apart by another stride, row counts across the tiles' tails, per-column zero points (so the row sums
// `fill` supplies count), 1 and 2 threads, each output against the exact sum over the same bytes. N up
// to 200 (13 panels: with 2 threads and few row blocks the panels split into groups too), weights of
// 1 MB and more (one block of all rows, split by panels), and each block handed to `done` once,
// complete: its rows as `done` saw them are the final ones.
TEST(QGemmU8S8, EveryKernelReadsSegmentedRowsInPlace) {
  std::mt19937 rng(23);
  ep::ThreadPool pool(2);
  const std::vector<ops::QGemmKernelInfo> kernels = runnable_kernels();
  ASSERT_FALSE(kernels.empty()) << "no vector kernel runs on this CPU";
  for (const ops::QGemmKernelInfo& k : kernels) {
    int cases = 0;
    for (int64_t M : {1, 3, 4, 8, 13, 21, 70, 49})
      for (int64_t segs : {1, 2, 3}) {
        if (M == 49 && segs != 2) continue;
        std::uniform_int_distribution<int64_t> qd(1, 12), nd(1, 200), sd(1, 24);
        // M = 49: weights of 1 MB or more (N 512, K 1536-3072), which 2 threads split by panels only.
        const int64_t seg_quads = M == 49 ? 1024 / segs : qd(rng), K = segs * seg_quads * 4, N = M == 49 ? 512 : nd(rng);
        const int64_t row_stride = 4 * sd(rng), seg_stride = seg_quads * 4 + 4 * sd(rng);
        const int64_t bytes = (M - 1) * row_stride + (segs - 1) * seg_stride + seg_quads * 4;
        const auto A = random_bytes(rng, static_cast<size_t>(bytes)), B = random_bytes(rng, static_cast<size_t>(K * N));
        const auto zbb = random_bytes(rng, static_cast<size_t>(N));
        const bool b_signed = cases % 2 == 1;
        std::vector<int32_t> zb(static_cast<size_t>(N));
        for (int64_t n = 0; n < N; ++n) zb[static_cast<size_t>(n)] = value_of(zbb[static_cast<size_t>(n)], b_signed);
        const int32_t za = static_cast<int32_t>(rng() % 256);
        // Byte kk of row m.
        auto a_at = [&](int64_t m, int64_t kk) {
          const int64_t j = kk / (seg_quads * 4), i = kk % (seg_quads * 4);
          return static_cast<int64_t>(A[static_cast<size_t>(m * row_stride + j * seg_stride + i)]);
        };
        auto row_sums = [&](int64_t m0, int64_t m1, uint8_t* au, int32_t* sa) {
          ASSERT_EQ(au, nullptr);
          for (int64_t m = m0; m < m1; ++m) {
            int64_t sum = 0;
            for (int64_t kk = 0; kk < K; ++kk) sum += a_at(m, kk);
            sa[m - m0] = static_cast<int32_t>(sum);
          }
        };
        const ops::QGemmPackedB P = ops::qgemm_pack_b(B.data(), b_signed, K, N);
        std::vector<uint8_t> ws(ops::qgemm_workspace_bytes(P, M, true));
        std::vector<int32_t> y(static_cast<size_t>(M * N), -7);
        const ops::QGemmARows rows{A.data(), row_stride, segs, seg_stride};
        std::vector<int32_t> seen(static_cast<size_t>(M * N), -9);
        std::vector<int> done_count(static_cast<size_t>(M), 0);
        auto block_done = [&](int64_t m0, int64_t m1) {
          for (int64_t m = m0; m < m1; ++m) {
            ++done_count[static_cast<size_t>(m)];
            std::copy(y.begin() + m * N, y.begin() + (m + 1) * N, seen.begin() + m * N);
          }
        };
        const ops::QGemmRowsDone done(block_done);
        ops::qgemm_u8s8_rows(k.kernel, M, row_sums, za, P, zb.data(), y.data(), N, cases % 3 || M == 49 ? &pool : nullptr,
                             ws.data(), &done, &rows);
        EXPECT_EQ(done_count, std::vector<int>(static_cast<size_t>(M), 1)) << k.name << " M,N " << M << "," << N;
        EXPECT_EQ(seen, y) << k.name << " M,N " << M << "," << N << ": a block handed on before it was complete";
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N; ++n) {
            int64_t want = 0;
            for (int64_t kk = 0; kk < K; ++kk)
              want += (a_at(m, kk) - za) * static_cast<int64_t>(value_of(B[static_cast<size_t>(kk * N + n)], b_signed) - zb[static_cast<size_t>(n)]);
            ASSERT_EQ(y[static_cast<size_t>(m * N + n)], static_cast<int32_t>(want))
                << k.name << " M,N " << M << "," << N << " segments " << segs << " x " << seg_quads << " quads, row stride "
                << row_stride << ", segment stride " << seg_stride << " at " << m << "," << n;
          }
        ++cases;
      }
  }
}

// Every kernel with the requantization in the tiles (QGemmRequant) against the reference formula on the
// exact sums in double: min(hi, max(lo, nearbyint((S + bias) * scale) + zp)), uint8 and int8 outputs
// (products beyond the int32 range both ways included),
// symmetric int8 weights (no beta term) and asymmetric ones, rows written in order or through an
// implicit GEMM's row mapping (dropped rows left untouched), rows filled or read in place. Scales: random
// ones, exact halves (ties to even), and for some columns one chosen so that row 0's product lies 2^-30
// above a half-integer, where a float product rounds the other way: those lanes must take the double
// fallback.
TEST(QGemmU8S8, EveryKernelRequantizesInTilesAsTheReference) {
  std::mt19937 rng(41);
  ep::ThreadPool pool(2);
  const std::vector<ops::QGemmKernelInfo> kernels = runnable_kernels();
  ASSERT_FALSE(kernels.empty()) << "no vector kernel runs on this CPU";
  for (const ops::QGemmKernelInfo& k : kernels) {
    int cases = 0;
    for (int64_t M : {1, 5, 8, 13, 40, 70})
      for (int variant = 0; variant < 4; ++variant) {
        const bool out_signed = variant % 2 == 1, symmetric = variant < 2;
        std::uniform_int_distribution<int64_t> kd(1, 200), nd(1, 70);
        const int64_t K = kd(rng), N = nd(rng), kp = (K + 3) / 4 * 4;
        const auto A = random_bytes(rng, static_cast<size_t>(M * K)), B = random_bytes(rng, static_cast<size_t>(K * N));
        const auto zbb = random_bytes(rng, static_cast<size_t>(N));
        // int8 weights: symmetric ones have w_zero_point 0 (every beta 0).
        std::vector<int32_t> zb(static_cast<size_t>(N), 0);
        if (!symmetric)
          for (int64_t n = 0; n < N; ++n) zb[static_cast<size_t>(n)] = value_of(zbb[static_cast<size_t>(n)], true);
        const int32_t za = static_cast<int32_t>(rng() % 256);
        auto exact = [&](int64_t m, int64_t n) {
          int64_t s = 0;
          for (int64_t kk = 0; kk < K; ++kk)
            s += (static_cast<int64_t>(A[static_cast<size_t>(m * K + kk)]) - za) *
                 (value_of(B[static_cast<size_t>(kk * N + n)], true) - zb[static_cast<size_t>(n)]);
          return s;
        };
        std::vector<int32_t> bias(static_cast<size_t>(N));
        std::vector<double> scale_d(static_cast<size_t>(N));
        std::uniform_int_distribution<int32_t> bd(-20000, 20000);
        std::uniform_real_distribution<double> sd(1e-5, 4e-3);
        for (int64_t n = 0; n < N; ++n) {
          bias[static_cast<size_t>(n)] = bd(rng);
          const int64_t x0 = exact(0, n) + bias[static_cast<size_t>(n)];
          if (n % 7 == 6) scale_d[static_cast<size_t>(n)] = 3e5;  // products past int32 both ways: saturated
          else if (n % 3 == 1) scale_d[static_cast<size_t>(n)] = 0.5;  // exact halves: ties
          else if (n % 3 == 2 && x0 != 0) {
            // Row 0 lands 2^-30 above the half-integer h + 0.5 (|h| small).
            const double h = static_cast<double>(rng() % 200) - 100.0;
            scale_d[static_cast<size_t>(n)] = (h + 0.5 + 0x1p-30) / static_cast<double>(x0);
          } else scale_d[static_cast<size_t>(n)] = sd(rng);
        }
        ASSERT_TRUE(ops::qgemm_requant_exact(K, bias.data(), scale_d.data(), N));
        std::vector<float> scale(static_cast<size_t>(N));
        ops::qgemm_requant_scales(scale_d.data(), N, scale.data());
        const int32_t zp = out_signed ? static_cast<int32_t>(rng() % 256) - 128 : static_cast<int32_t>(rng() % 256);
        // Rows through an implicit GEMM's mapping in half the cases: runs of `period`, the first `keep` kept.
        const int64_t period = cases % 2 ? 1 + static_cast<int64_t>(rng() % 7) : 0;
        const int64_t keep = period ? 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(period)) : 0;
        const int64_t out_rows = period ? (M / period) * keep + std::min(M % period, keep) : M;
        const int64_t ldy = N + static_cast<int64_t>(rng() % 5);
        std::vector<uint8_t> y(static_cast<size_t>(out_rows * ldy), 0xA5);
        ops::QGemmRequant rq;
        rq.bias = bias.data();
        rq.scale = scale.data();
        rq.scale_d = scale_d.data();
        rq.zero_point = zp;
        rq.out_signed = out_signed;
        rq.y = y.data();
        rq.ldy = ldy;
        rq.row_period = period;
        rq.row_keep = keep;
        const ops::QGemmPackedB P = ops::qgemm_pack_b(B.data(), true, K, N);
        const bool in_place = cases % 3 == 0 && K % 4 == 0;
        std::vector<uint8_t> ws(ops::qgemm_workspace_bytes(P, M, in_place));
        auto fill = [&](int64_t m0, int64_t m1, uint8_t* au, int32_t* sa) {
          for (int64_t m = m0; m < m1; ++m) {
            int32_t sum = 0;
            for (int64_t kk = 0; kk < K; ++kk) sum += A[static_cast<size_t>(m * K + kk)];
            sa[m - m0] = sum;
            if (!au) continue;
            std::copy(A.begin() + m * K, A.begin() + (m + 1) * K, au + (m - m0) * kp);
            std::fill(au + (m - m0) * kp + K, au + (m - m0 + 1) * kp, uint8_t{0});
          }
        };
        const ops::QGemmARows rows{A.data(), K};
        ops::qgemm_u8s8_rows(k.kernel, M, fill, za, P, zb.data(), nullptr, 0, cases % 2 ? &pool : nullptr, ws.data(),
                             nullptr, in_place ? &rows : nullptr, &rq);
        const double lo = out_signed ? -128 : 0, hi = out_signed ? 127 : 255;
        std::vector<uint8_t> want(y.size(), 0xA5);
        for (int64_t m = 0; m < M; ++m) {
          if (period && m % period >= keep) continue;
          const int64_t r = period ? (m / period) * keep + m % period : m;
          for (int64_t n = 0; n < N; ++n) {
            const double v = static_cast<double>(exact(m, n) + bias[static_cast<size_t>(n)]) * scale_d[static_cast<size_t>(n)];
            const double q = std::min(hi, std::max(lo, std::nearbyint(v) + zp));
            want[static_cast<size_t>(r * ldy + n)] = static_cast<uint8_t>(static_cast<int32_t>(q));
          }
        }
        for (size_t i = 0; i < y.size(); ++i)
          ASSERT_EQ(y[i], want[i]) << k.name << " M,K,N " << M << "," << K << "," << N << (out_signed ? " int8" : " uint8")
                                   << (symmetric ? " symmetric" : " asymmetric") << " period " << period << " keep " << keep
                                   << (in_place ? " in place" : " filled") << " at output row " << i / ldy << ", column "
                                   << i % ldy;
        ++cases;
      }
  }
}

// MatMulInteger with B (and b_zero_point) constant, packed at creation, against the same node with B
// given at run time (the generic loop): the same int32 outputs at every tier this CPU has (isa=avx2
// forces the AVX2-tier kernel on an AVX-512 machine; isa=scalar keeps the generic loop), for batched
// A, each form of a_zero_point (absent, scalar, per row, per batch-row) and per-column b_zero_point.
TEST(OpsLinalgQuant, MatMulIntegerPackedBMatchesGeneric) {
  std::mt19937 rng(19);
  const std::vector<std::string> tiers = {"", "avx2", "scalar"};
  int checked = 0;
  for (int form = 0; form < 4; ++form)
    for (bool a_signed : {false, true})
      for (bool b_signed : {false, true}) {
        const int64_t batches = 2, M = 3, K = 37, N = 21;
        const DataType adt = a_signed ? DataType::kInt8 : DataType::kUInt8, bdt = b_signed ? DataType::kInt8 : DataType::kUInt8;
        Tensor a = Tensor::from_vector<uint8_t>(adt, {batches, M, K}, random_bytes(rng, static_cast<size_t>(batches * M * K)));
        Tensor b = Tensor::from_vector<uint8_t>(bdt, {K, N}, random_bytes(rng, static_cast<size_t>(K * N)));
        Tensor zb = Tensor::from_vector<uint8_t>(bdt, {N}, random_bytes(rng, static_cast<size_t>(N)));
        Value za;  // form 0: absent
        if (form == 1) za = Tensor::from_vector<uint8_t>(adt, {}, random_bytes(rng, 1));
        if (form == 2) za = Tensor::from_vector<uint8_t>(adt, {M}, random_bytes(rng, static_cast<size_t>(M)));
        if (form == 3) za = Tensor::from_vector<uint8_t>(adt, {batches * M}, random_bytes(rng, static_cast<size_t>(batches * M)));
        KernelRun generic{"MatMulInteger", "", 10, {}, {Value(a), Value(b), za, Value(zb)}};
        auto want = testing::run_kernel(generic);
        ASSERT_TRUE(want.ok()) << want.status().to_string();
        const Tensor& w = (*want)[0].tensor();
        for (const std::string& tier : tiers)
          for (int threads : {1, 2}) {
            KernelRun packed = generic;
            packed.const_inputs = {1, 3};
            packed.threads = threads;
            if (!tier.empty()) packed.overrides = {{"isa", tier}};
            auto got = testing::run_kernel(packed);
            ASSERT_TRUE(got.ok()) << got.status().to_string();
            const Tensor& g = (*got)[0].tensor();
            ASSERT_EQ(g.shape(), w.shape());
            for (int64_t i = 0; i < w.numel(); ++i)
              ASSERT_EQ(g.data<int32_t>()[i], w.data<int32_t>()[i])
                  << "form " << form << (a_signed ? " s8" : " u8") << " x " << (b_signed ? "s8" : "u8") << " tier '" << tier
                  << "' threads " << threads << " element " << i;
            ++checked;
          }
      }
  EXPECT_EQ(checked, 4 * 2 * 2 * 3 * 2);
  std::printf("[ INFO     ] MatMulInteger's packed B here runs %s\n",
              ops::qgemm_kernel_name(ops::choose_qgemm_kernel(ep::cpu_isa_tier())));
}

}  // namespace
}  // namespace nxrt

namespace nxrt {
namespace {
// Every kernel this CPU runs at a BERT-base FFN shape (M 128, K 768, N 3072) and a one-row one, 1 and 2
// threads: median of 15 calls. Run with --gtest_also_run_disabled_tests.
TEST(QGemmU8S8, DISABLED_KernelBench) {
  std::mt19937 rng(3);
  struct Shape { int64_t M, K, N; };
  for (const Shape s : {Shape{128, 768, 3072}, Shape{1, 4096, 4096}})
    for (int threads : {1, 2}) {
      ep::ThreadPool pool(threads);
      const auto A = random_bytes(rng, static_cast<size_t>(s.M * s.K)), B = random_bytes(rng, static_cast<size_t>(s.K * s.N));
      std::vector<int32_t> za(static_cast<size_t>(s.M), 3), zb(static_cast<size_t>(s.N), 0);
      const ops::QGemmPackedB P = ops::qgemm_pack_b(B.data(), true, s.K, s.N);
      std::vector<uint8_t> ws(ops::qgemm_workspace_bytes(P, s.M));
      std::vector<int32_t> y(static_cast<size_t>(s.M * s.N));
      for (const ops::QGemmKernelInfo& k : ops::qgemm_kernels()) {
        if (!ops::qgemm_kernel_supported(k.kernel)) continue;
        std::vector<double> t;
        for (int r = 0; r < 16; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          ops::qgemm_u8s8(k.kernel, A.data(), false, s.M, s.K, za.data(), P, zb.data(), y.data(), s.N, &pool, ws.data());
          if (r > 0) t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(t.begin(), t.end());
        std::printf("M %4ld K %4ld N %4ld threads %d %-34s %8.3f ms %7.1f GOP/s\n", static_cast<long>(s.M), static_cast<long>(s.K),
                    static_cast<long>(s.N), threads, k.name, t[t.size() / 2], 2.0 * s.M * s.K * s.N / t[t.size() / 2] / 1e6);
      }
    }
}
}  // namespace
}  // namespace nxrt

namespace nxrt {
namespace {
// ConvInteger and QLinearConv with constant weights take the integer GEMM (channels-last patches, the
// packed weights), or for groups of fewer than 8 outputs the float engine where its sums are exact (up to
// 258 taps) and the double engine past that; the same nodes at isa=scalar with reference=1 take the
// double engine's direct definition. All must write the same
// outputs over 1-D, 2-D and 3-D convs, strides, dilations, asymmetric pads, groups (depthwise
// included), per-channel weight zero points and scales, every signedness of x and w, symmetric int8
// weights (every zero point 0: the GEMM path then skips the patch rows' byte sums), batches of 2 and a
// bias, at 1 and 2 threads.
TEST(OpsConvQuant, IntegerGemmPathMatchesDoublePath) {
  std::mt19937 rng(29);
  struct Case {
    Dims x, w;
    std::vector<int64_t> strides, dilations, pads;
    int64_t group;
  };
  const std::vector<Case> cases = {
      {{2, 8, 9, 11}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1},
      {{1, 6, 13, 10}, {20, 3, 3, 2}, {2, 1}, {1, 2}, {0, 1, 2, 0}, 2},
      {{2, 8, 7, 7}, {8, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 8},  // depthwise
      {{1, 5, 12}, {7, 5, 4}, {3}, {2}, {2, 1}, 1},                   // 1-D
      {{1, 4, 5, 6, 4}, {6, 4, 2, 3, 2}, {1, 2, 1}, {1, 1, 1}, {1, 0, 1, 0, 1, 0}, 1},  // 3-D
      {{1, 64, 8, 8}, {33, 64, 1, 1}, {1, 1}, {1, 1}, {0, 0, 0, 0}, 1},  // 1x1, N off a panel
      // 20 channels (a 16 x 16 transposed block and 4 more) over 35 pixels (two 16-pixel blocks and 3)
      {{1, 20, 5, 7}, {16, 20, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 1},
      // Stride 1, one group: with symmetric weights the implicit GEMM over a padded copy (a row of taps
      // with pads on one side, a column of taps).
      {{1, 12, 6, 9}, {16, 12, 1, 3}, {1, 1}, {1, 1}, {0, 2, 0, 1}, 1},
      {{2, 4, 7, 5}, {8, 4, 3, 1}, {1, 1}, {1, 1}, {1, 0, 2, 0}, 1},
      // Groups of fewer than 8 outputs: the float-exact path (8 * 9 taps) and, past 258 taps, the double one.
      {{1, 24, 9, 9}, {12, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}, 3},
      {{1, 64, 6, 6}, {4, 32, 3, 3}, {2, 2}, {1, 1}, {0, 1, 1, 0}, 2},
      {{1, 32, 19, 23}, {32, 1, 5, 5}, {2, 1}, {1, 1}, {2, 2, 2, 2}, 32},  // depthwise 5x5
      // Strided stems with symmetric weights: the implicit GEMM over the space-to-depth image (7x7
      // stride 2 over 3 channels with uneven pads, 3x3 stride 2, stride 3 over 4 channels, one channel
      // with a 4x4 kernel, ...).
      {{1, 3, 23, 21}, {16, 3, 7, 7}, {2, 2}, {1, 1}, {3, 3, 2, 3}, 1},
      {{2, 3, 17, 19}, {24, 3, 3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1}, 1},
      {{1, 4, 14, 13}, {8, 4, 3, 3}, {3, 3}, {1, 1}, {1, 0, 2, 1}, 1},
      {{1, 1, 16, 15}, {16, 1, 4, 4}, {2, 2}, {1, 1}, {0, 1, 1, 0}, 1},
      // ... a 1x1 stride-2 conv (one tap of four nonzero), pads as wide as the stride.
      {{1, 4, 9, 10}, {16, 4, 1, 1}, {2, 2}, {1, 1}, {0, 0, 0, 0}, 1},
      {{1, 2, 11, 9}, {8, 2, 3, 3}, {2, 2}, {1, 1}, {2, 2, 2, 2}, 1},
  };
  int checked = 0;
  for (size_t ci = 0; ci < cases.size(); ++ci)
    for (bool x_signed : {false, true})
      for (int w_kind : {0, 1, 2})  // uint8, int8, int8 with every zero point 0
        for (bool qlinear : {false, true}) {
          const bool w_signed = w_kind > 0;
          const Case& c = cases[ci];
          const DataType xdt = x_signed ? DataType::kInt8 : DataType::kUInt8, wdt = w_signed ? DataType::kInt8 : DataType::kUInt8;
          const int64_t M = c.w[0];
          Tensor x = Tensor::from_vector<uint8_t>(xdt, c.x, random_bytes(rng, static_cast<size_t>(shape_numel(c.x))));
          Tensor w = Tensor::from_vector<uint8_t>(wdt, c.w, random_bytes(rng, static_cast<size_t>(shape_numel(c.w))));
          Tensor xz = Tensor::from_vector<uint8_t>(xdt, {}, random_bytes(rng, 1));
          Tensor wz = Tensor::from_vector<uint8_t>(wdt, {M}, w_kind == 2 ? std::vector<uint8_t>(static_cast<size_t>(M), 0)
                                                                          : random_bytes(rng, static_cast<size_t>(M)));
          std::vector<ir::Attribute> attrs = {testing::attr_ints("strides", c.strides), testing::attr_ints("dilations", c.dilations),
                                              testing::attr_ints("pads", c.pads), testing::attr_int("group", c.group)};
          KernelRun run;
          run.opset = 10;
          run.attributes = attrs;
          if (!qlinear) {
            run.op_type = "ConvInteger";
            run.inputs = {Value(x), Value(w), Value(xz), Value(wz)};
            run.const_inputs = {1, 3};
          } else {
            std::uniform_real_distribution<float> sd(0.001f, 0.05f);
            std::vector<float> ws(static_cast<size_t>(M));
            for (float& v : ws) v = sd(rng);
            std::uniform_int_distribution<int32_t> bd(-20000, 20000);
            std::vector<int32_t> bias(static_cast<size_t>(M));
            for (int32_t& v : bias) v = bd(rng);
            const DataType ydt = (ci % 2) ? DataType::kInt8 : DataType::kUInt8;
            run.op_type = "QLinearConv";
            run.inputs = {Value(x), Value(Tensor::scalar_float(0.02f)), Value(xz), Value(w),
                          Value(Tensor::from_vector<float>(DataType::kFloat, {M}, ws)), Value(wz), Value(Tensor::scalar_float(0.7f)),
                          Value(Tensor::from_vector<uint8_t>(ydt, {}, random_bytes(rng, 1))),
                          Value(Tensor::from_vector<int32_t>(DataType::kInt32, {M}, bias))};
            run.const_inputs = {3, 4, 5, 8};
          }
          KernelRun ref = run;
          ref.overrides = {{"isa", "scalar"}, {"reference", "1"}};  // the double engine's direct definition
          auto want = testing::run_kernel(ref);
          ASSERT_TRUE(want.ok()) << want.status().to_string();
          // The machine's tier and the AVX2 one (each has its own requantization loop), 1 and 2 threads.
          for (int tries = 0; tries < 4; ++tries) {
            const int threads = 1 + tries % 2;
            run.threads = threads;
            run.overrides = {};
            if (tries >= 2) run.overrides = {{"isa", "avx2"}};
            auto got = testing::run_kernel(run);
            ASSERT_TRUE(got.ok()) << got.status().to_string();
            const Tensor& g = (*got)[0].tensor();
            const Tensor& wt = (*want)[0].tensor();
            ASSERT_EQ(g.shape(), wt.shape());
            ASSERT_EQ(g.nbytes(), wt.nbytes());
            const uint8_t* gb = static_cast<const uint8_t*>(g.raw_data());
            const uint8_t* wb = static_cast<const uint8_t*>(wt.raw_data());
            for (size_t i = 0; i < g.nbytes(); ++i)
              ASSERT_EQ(gb[i], wb[i]) << run.op_type << " case " << ci << (x_signed ? " x s8" : " x u8") << (w_kind == 2 ? " w s8 symmetric" : w_signed ? " w s8" : " w u8")
                                      << " threads " << threads << (tries >= 2 ? " avx2" : "") << " byte " << i;
            ++checked;
          }
        }
  EXPECT_EQ(checked, static_cast<int>(cases.size()) * 2 * 3 * 2 * 4);
}
}  // namespace
}  // namespace nxrt

namespace nxrt {
namespace {
// QLinearMatMul with B (and b_zero_point) constant takes the packed 8-bit GEMM for its sums; the same
// node with B given at run time keeps the generic loop. The same output bytes for batched A, scalar and
// per-row a_scale and a_zero_point, per-column b_scale and b_zero_point, every signedness of A, B and Y,
// at each tier this CPU has and 1 and 2 threads.
TEST(OpsLinalgQuant, QLinearMatMulPackedBMatchesGeneric) {
  std::mt19937 rng(37);
  std::uniform_real_distribution<float> sd(0.002f, 0.05f);
  int checked = 0;
  for (bool per_row : {false, true})
    for (bool a_signed : {false, true})
      for (bool b_signed : {false, true})
        for (bool y_signed : {false, true}) {
          const int64_t batches = 2, M = 3, K = 45, N = 37;
          const DataType adt = a_signed ? DataType::kInt8 : DataType::kUInt8, bdt = b_signed ? DataType::kInt8 : DataType::kUInt8;
          const DataType ydt = y_signed ? DataType::kInt8 : DataType::kUInt8;
          auto floats = [&](int64_t n) {
            std::vector<float> v(static_cast<size_t>(n));
            for (float& x : v) x = sd(rng);
            return v;
          };
          const int64_t na = per_row ? M : 1;
          const Dims as_shape = per_row ? Dims{M} : Dims{};
          Tensor a = Tensor::from_vector<uint8_t>(adt, {batches, M, K}, random_bytes(rng, static_cast<size_t>(batches * M * K)));
          Tensor b = Tensor::from_vector<uint8_t>(bdt, {K, N}, random_bytes(rng, static_cast<size_t>(K * N)));
          KernelRun generic{"QLinearMatMul", "", 10, {},
                            {Value(a), Value(Tensor::from_vector<float>(DataType::kFloat, as_shape, floats(na))),
                             Value(Tensor::from_vector<uint8_t>(adt, as_shape, random_bytes(rng, static_cast<size_t>(na)))), Value(b),
                             Value(Tensor::from_vector<float>(DataType::kFloat, {N}, floats(N))),
                             Value(Tensor::from_vector<uint8_t>(bdt, {N}, random_bytes(rng, static_cast<size_t>(N)))),
                             Value(Tensor::scalar_float(0.3f)), Value(Tensor::from_vector<uint8_t>(ydt, {}, random_bytes(rng, 1)))}};
          auto want = testing::run_kernel(generic);
          ASSERT_TRUE(want.ok()) << want.status().to_string();
          const Tensor& w = (*want)[0].tensor();
          for (const char* tier : {"", "avx2"})
            for (int threads : {1, 2}) {
              KernelRun packed = generic;
              packed.const_inputs = {3, 4, 5};
              packed.threads = threads;
              if (*tier) packed.overrides = {{"isa", tier}};
              auto got = testing::run_kernel(packed);
              ASSERT_TRUE(got.ok()) << got.status().to_string();
              const Tensor& g = (*got)[0].tensor();
              ASSERT_EQ(g.shape(), w.shape());
              const uint8_t* gb = static_cast<const uint8_t*>(g.raw_data());
              const uint8_t* wb = static_cast<const uint8_t*>(w.raw_data());
              for (size_t i = 0; i < g.nbytes(); ++i)
                ASSERT_EQ(gb[i], wb[i]) << (per_row ? "per-row" : "scalar") << " a " << (a_signed ? "s8" : "u8") << " b "
                                        << (b_signed ? "s8" : "u8") << " y " << (y_signed ? "s8" : "u8") << " tier '" << tier
                                        << "' threads " << threads << " byte " << i;
              ++checked;
            }
        }
  EXPECT_EQ(checked, 2 * 2 * 2 * 2 * 2 * 2);
}
}  // namespace
}  // namespace nxrt
