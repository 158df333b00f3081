// The generic tester of the float GEMM engine's kernel variants (ops/gemm/gemm_kernels.h): every variant
// this CPU runs (f32_gemm_6x16__scalar, f32_gemm_6x16__avx2, f32_gemm_6x64__avx512, any tier added later) has each of its
// kernels checked on its own against a plain double-accumulating loop, on random panel depths, edge
// tiles, alpha/beta values, epilogues and GEMV widths. A new variant listed in f32_gemm_kernel_variants()
// is covered here without a new test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_kernels.h"

namespace nxrt {
namespace {

using ops::F32GemmKernels;
using ops::kGemmKC;
constexpr int MR = ops::kGemmMR, NR = ops::kGemmNR;

std::vector<float> rand_vec(std::mt19937& rng, size_t n) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

std::vector<const F32GemmKernels*> supported_variants() {
  std::vector<const F32GemmKernels*> out;
  for (const F32GemmKernels* k : ops::f32_gemm_kernel_variants()) {
    if (ops::f32_gemm_kernels_supported(*k)) out.push_back(k);
  }
  return out;
}

float tol_for(int64_t kc, float ref) { return (2e-6f * static_cast<float>(kc) + 1e-6f) * (1.f + std::fabs(ref)); }

// B(p, j) of `panels` packed panels (kc x 16 each, panel q at q * 16 * kc).
float packed_at(const std::vector<float>& b, int64_t kc, int64_t p, int j) {
  return b[static_cast<size_t>((j / NR) * NR * kc + p * NR + j % NR)];
}

// The same B rows scattered in memory for tile_rows: row p (16 * panels floats) at brow + boff[p].
void scatter_rows(const std::vector<float>& b, int64_t kc, int panels, std::vector<float>& brow,
                  std::vector<int64_t>& boff) {
  const int64_t width = NR * panels, stride = width + 3;
  brow.assign(static_cast<size_t>(kc * stride), 0.f);
  boff.assign(static_cast<size_t>(kc), 0);
  for (int64_t p = 0; p < kc; ++p) {
    boff[p] = (kc - 1 - p) * stride;
    for (int j = 0; j < width; ++j) brow[boff[p] + j] = packed_at(b, kc, p, j);
  }
}

// A packed 6-row panel's first `mr` rows as a raw row-major A for tile_a_rows (row r at r * lda, lda >
// kc); the buffer ends right after row mr - 1's last value, so a read of a row past mr, or past kc, is
// out of bounds (ASan). Returns lda.
int64_t raw_rows(const std::vector<float>& a, int64_t kc, int mr, std::vector<float>& rows) {
  const int64_t lda = kc + 5;
  rows.assign(static_cast<size_t>((mr - 1) * lda + kc), 0.f);
  for (int r = 0; r < mr; ++r)
    for (int64_t p = 0; p < kc; ++p) rows[r * lda + p] = a[p * MR + r];
  return lda;
}

// A tile width for this variant: mostly edges, both sides of every panel boundary, and full tiles.
int random_nr(const F32GemmKernels& k, std::mt19937& rng) {
  const int width = NR * k.n_panels;
  return (rng() % 4 == 0) ? width : 1 + static_cast<int>(rng() % width);
}

// tile and tile_rows: C[mr x nr] = alpha * A.B + beta * C on random depths (over one K block too) and edges.
void check_tiles(const F32GemmKernels& k, std::mt19937& rng) {
  static const int64_t depths[] = {1, 2, 7, 16, 63, 256, 300};
  static const float alphas[] = {1.f, -0.5f, 2.f};
  static const float betas[] = {0.f, 1.f, 0.3f};
  for (int it = 0; it < 120; ++it) {
    const int64_t kc = depths[rng() % 7];
    const int mr = 1 + static_cast<int>(rng() % MR), nr = random_nr(k, rng);
    const float alpha = alphas[rng() % 3], beta = betas[rng() % 3];
    const int64_t ldc = NR * k.n_panels + 5;
    // Only the panels nr reaches exist (the engine pads B to whole panels, not to whole tiles).
    const int panels = (nr + NR - 1) / NR;
    const std::vector<float> a = rand_vec(rng, static_cast<size_t>(kc * MR)),
                             b = rand_vec(rng, static_cast<size_t>(kc * NR * panels));
    std::vector<float> c0 = rand_vec(rng, static_cast<size_t>(MR * ldc));
    if (beta == 0.f) std::fill(c0.begin(), c0.end(), std::nanf(""));  // beta 0 must not read C
    std::vector<float> c = c0, c_rows = c0;
    k.tile(kc, a.data(), b.data(), c.data(), ldc, mr, nr, alpha, beta);
    if (k.tile_prefetch_a) {  // the same product, bit for bit (it only adds prefetches)
      std::vector<float> c_pf = c0;
      k.tile_prefetch_a(kc, a.data(), b.data(), c_pf.data(), ldc, mr, nr, alpha, beta);
      for (size_t i = 0; i < c.size(); ++i)
        ASSERT_TRUE((std::isnan(c[i]) && std::isnan(c_pf[i])) || c[i] == c_pf[i]) << k.name << " tile_prefetch_a";
    }
    if (k.tile_a_rows) {  // A's rows in place: the same product as the packed panel, bit for bit
      std::vector<float> arows;
      const int64_t lda = raw_rows(a, kc, mr, arows);
      std::vector<float> c_ar = c0;
      ASSERT_FALSE(k.tile_a_rows(kc, arows.data(), lda, b.data(), c_ar.data(), ldc, mr, nr, alpha, beta, nullptr, 0, 0,
                                 (it & 1) ? b.data() : nullptr));
      for (size_t i = 0; i < c.size(); ++i)
        ASSERT_TRUE((std::isnan(c[i]) && std::isnan(c_ar[i])) || c[i] == c_ar[i])
            << k.name << " tile_a_rows kc=" << kc << " mr=" << mr << " nr=" << nr << " at " << i;
    }
    std::vector<float> brow;
    std::vector<int64_t> boff;
    scatter_rows(b, kc, panels, brow, boff);
    k.tile_rows(kc, a.data(), brow.data(), boff.data(), c_rows.data(), ldc, mr, nr, alpha, beta, nullptr, 0, 0);
    {
      // A column's bits do not depend on how wide its tile is (the AVX2 tile runs edges of <= 8 columns
      // on half the FMAs): the same panels as a full-width tile give the same first nr columns.
      std::vector<float> bw = b;
      bw.resize(static_cast<size_t>(kc * NR * k.n_panels), 0.5f);
      std::vector<float> c_full = c0;
      k.tile(kc, a.data(), bw.data(), c_full.data(), ldc, mr, NR * k.n_panels, alpha, beta);
      const int full_panels = k.n_panels;
      if (panels == full_panels) {
        for (int r = 0; r < mr; ++r)
          for (int j = 0; j < nr; ++j) {
            const size_t at = static_cast<size_t>(r * ldc + j);
            ASSERT_TRUE((std::isnan(c[at]) && std::isnan(c_full[at])) || c[at] == c_full[at])
                << k.name << " nr=" << nr << " differs from the full tile at " << r << "," << j;
          }
      }
    }
    {
      // Nor on how many rows its tile has (the AVX2 tile runs edges of <= 4 and <= 2 rows on their rows'
      // FMAs only): a 6-row tile on the same A panel gives the same first mr rows, in tile and tile_rows.
      std::vector<float> c_six = c0, c_six_rows = c0;
      k.tile(kc, a.data(), b.data(), c_six.data(), ldc, MR, nr, alpha, beta);
      k.tile_rows(kc, a.data(), brow.data(), boff.data(), c_six_rows.data(), ldc, MR, nr, alpha, beta, nullptr, 0, 0);
      for (int r = 0; r < mr; ++r)
        for (int j = 0; j < nr; ++j) {
          const size_t at = static_cast<size_t>(r * ldc + j);
          ASSERT_TRUE((std::isnan(c[at]) && std::isnan(c_six[at])) || c[at] == c_six[at])
              << k.name << " mr=" << mr << " differs from the 6-row tile at " << r << "," << j;
          ASSERT_TRUE((std::isnan(c_rows[at]) && std::isnan(c_six_rows[at])) || c_rows[at] == c_six_rows[at])
              << k.name << " tile_rows mr=" << mr << " differs from the 6-row tile at " << r << "," << j;
        }
    }
    for (int r = 0; r < MR; ++r) {
      for (int j = 0; j < ldc; ++j) {
        const size_t at = static_cast<size_t>(r * ldc + j);
        if (r >= mr || j >= nr) {  // outside the tile: untouched
          ASSERT_TRUE((std::isnan(c[at]) && std::isnan(c0[at])) || c[at] == c0[at]) << k.name << " tile wrote outside";
          ASSERT_TRUE((std::isnan(c_rows[at]) && std::isnan(c0[at])) || c_rows[at] == c0[at]);
          continue;
        }
        double acc = 0;
        for (int64_t p = 0; p < kc; ++p) acc += double(a[p * MR + r]) * double(packed_at(b, kc, p, j));
        const float ref = static_cast<float>(alpha * acc) + (beta == 0.f ? 0.f : beta * c0[at]);
        ASSERT_NEAR(c[at], ref, tol_for(kc, ref)) << k.name << " tile kc=" << kc << " mr=" << mr << " nr=" << nr;
        ASSERT_NEAR(c_rows[at], ref, tol_for(kc, ref)) << k.name << " tile_rows kc=" << kc;
      }
    }
  }
}

// tile_rows and tile_epilogue with the epilogue in their store, and epilogue_tile: all must equal
// gemm_apply_epilogue.
void check_epilogues(const F32GemmKernels& k, std::mt19937& rng) {
  for (int it = 0; it < 120; ++it) {
    const int64_t kc = 1 + static_cast<int64_t>(rng() % 64);
    const int mr = (it & 1) ? MR : 1 + static_cast<int>(rng() % MR);
    const int nr = (it & 2) ? NR * k.n_panels : random_nr(k, rng);
    const int panels = (nr + NR - 1) / NR;
    const int64_t i0 = 6, j0 = 16, ldc = NR * k.n_panels;
    // The bias and residual rows are `width` apart; the buffers end right after the tile's last column
    // (j0 + nr, last row i0 + mr - 1), so a read past an edge tile's columns is out of bounds (ASan).
    const int64_t width = j0 + NR * k.n_panels;
    const std::vector<float> bias = rand_vec(rng, static_cast<size_t>(j0 + nr)),
                             res = rand_vec(rng, static_cast<size_t>((i0 + mr - 1) * width + j0 + nr));
    ops::GemmEpilogue ep;
    ep.bias_kind = static_cast<ops::GemmBias>(rng() % 3);
    ep.bias = bias.data();
    ep.residual = (rng() & 1) ? res.data() : nullptr;
    ep.ldr = width;
    ep.act = static_cast<ops::Activation>(rng() % 9);
    ep.act_a = -0.2f;
    ep.act_b = 0.3f;
    const std::vector<float> a = rand_vec(rng, static_cast<size_t>(kc * MR)),
                             b = rand_vec(rng, static_cast<size_t>(kc * NR * panels));
    std::vector<float> ref(static_cast<size_t>(MR * ldc), 0.f);
    k.tile(kc, a.data(), b.data(), ref.data(), ldc, mr, nr, 1.f, 0.f);
    std::vector<float> tiled = ref;
    ops::gemm_apply_epilogue(ep, i0, j0, mr, nr, ref.data(), ldc);
    if (!k.epilogue_tile || !k.epilogue_tile(ep, i0, j0, mr, nr, tiled.data(), ldc)) {
      ops::gemm_apply_epilogue(ep, i0, j0, mr, nr, tiled.data(), ldc);
    }
    std::vector<float> in_store(static_cast<size_t>(MR * ldc), 0.f);
    if (k.tile_epilogue) {
      if (!k.tile_epilogue(kc, a.data(), b.data(), in_store.data(), ldc, mr, nr, ep, i0, j0)) {
        ops::gemm_apply_epilogue(ep, i0, j0, mr, nr, in_store.data(), ldc);
      }
    }
    if (k.tile_epilogue_prefetch_a) {  // the same as tile_epilogue, bit for bit
      std::vector<float> pf(static_cast<size_t>(MR * ldc), 0.f);
      ASSERT_TRUE(k.tile_epilogue);
      const bool fused = k.tile_epilogue_prefetch_a(kc, a.data(), b.data(), pf.data(), ldc, mr, nr, ep, i0, j0);
      if (!fused) ops::gemm_apply_epilogue(ep, i0, j0, mr, nr, pf.data(), ldc);
      ASSERT_TRUE(pf == in_store) << k.name << " tile_epilogue_prefetch_a act=" << int(ep.act);
    }
    std::vector<float> brow;
    std::vector<int64_t> boff;
    scatter_rows(b, kc, panels, brow, boff);
    std::vector<float> rows(static_cast<size_t>(MR * ldc), 0.f);
    if (!k.tile_rows(kc, a.data(), brow.data(), boff.data(), rows.data(), ldc, mr, nr, 1.f, 0.f, &ep, i0, j0)) {
      ops::gemm_apply_epilogue(ep, i0, j0, mr, nr, rows.data(), ldc);
    }
    std::vector<float> a_rows_out(static_cast<size_t>(MR * ldc), 0.f);
    if (k.tile_a_rows) {
      std::vector<float> arows;
      const int64_t lda = raw_rows(a, kc, mr, arows);
      if (!k.tile_a_rows(kc, arows.data(), lda, b.data(), a_rows_out.data(), ldc, mr, nr, 1.f, 0.f, &ep, i0, j0,
                         nullptr)) {
        ops::gemm_apply_epilogue(ep, i0, j0, mr, nr, a_rows_out.data(), ldc);
      }
      if (k.tile_epilogue) {
        ASSERT_TRUE(a_rows_out == in_store) << k.name << " tile_a_rows+epilogue act=" << int(ep.act);
      }
    }
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < ldc; ++j)
        if (r >= mr || j >= nr) {
          ASSERT_EQ(a_rows_out[r * ldc + j], 0.f) << k.name << " tile_a_rows+epilogue wrote outside";
          ASSERT_EQ(tiled[r * ldc + j], ref[r * ldc + j]) << k.name << " epilogue_tile wrote outside";
          ASSERT_EQ(rows[r * ldc + j], 0.f) << k.name << " tile_rows+epilogue wrote outside";
          if (k.tile_epilogue) {
            ASSERT_EQ(in_store[r * ldc + j], 0.f) << k.name << " tile_epilogue wrote outside";
          }
        }
    for (int r = 0; r < mr; ++r) {
      for (int j = 0; j < nr; ++j) {
        const float want = ref[r * ldc + j];
        ASSERT_NEAR(tiled[r * ldc + j], want, 1e-5f * (1.f + std::fabs(want))) << k.name << " epilogue_tile act="
                                                                                << int(ep.act);
        ASSERT_NEAR(rows[r * ldc + j], want, tol_for(kc, want)) << k.name << " tile_rows+epilogue act=" << int(ep.act);
        if (k.tile_a_rows) {
          ASSERT_NEAR(a_rows_out[r * ldc + j], want, tol_for(kc, want)) << k.name << " tile_a_rows+epilogue act="
                                                                       << int(ep.act);
        }
        if (k.tile_epilogue) {
          ASSERT_NEAR(in_store[r * ldc + j], want, tol_for(kc, want)) << k.name << " tile_epilogue act=" << int(ep.act);
        }
      }
    }
  }
}

// pack_b_trans_panel: 16 rows of B (contiguous in k) into the kc x 16 panel.
void check_pack(const F32GemmKernels& k, std::mt19937& rng) {
  if (!k.pack_b_trans_panel) return;
  for (int64_t kc : {1, 7, 8, 9, 64, 255, 256}) {
    const int64_t ldb = kc + 3;
    const std::vector<float> B = rand_vec(rng, static_cast<size_t>(NR * ldb));
    std::vector<float> dst(static_cast<size_t>(kc * NR), -7.f);
    k.pack_b_trans_panel(B.data(), ldb, kc, dst.data());
    for (int64_t p = 0; p < kc; ++p)
      for (int j = 0; j < NR; ++j) ASSERT_EQ(dst[p * NR + j], B[j * ldb + p]) << k.name << " kc=" << kc;
  }
}

// gemv_raw (both B layouts) and gemv_packed over a PackedB.
void check_gemv(const F32GemmKernels& k, std::mt19937& rng) {
  for (int it = 0; it < 24; ++it) {
    const int64_t N = 1 + static_cast<int64_t>(rng() % 700), K = 1 + static_cast<int64_t>(rng() % 600);
    const bool transB = rng() & 1;
    const float alpha = (it & 1) ? 1.f : -0.75f, beta = (it & 2) ? 0.f : 0.5f;
    const int64_t ldb = (transB ? K : N) + 2;
    const std::vector<float> a = rand_vec(rng, static_cast<size_t>(K));
    const std::vector<float> B = rand_vec(rng, static_cast<size_t>((transB ? N : K) * ldb));
    std::vector<float> y0 = rand_vec(rng, static_cast<size_t>(N));
    if (beta == 0.f) std::fill(y0.begin(), y0.end(), std::nanf(""));
    std::vector<float> y = y0, yp = y0, ref(static_cast<size_t>(N));
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t p = 0; p < K; ++p) s += double(a[p]) * double(transB ? B[j * ldb + p] : B[p * ldb + j]);
      ref[j] = static_cast<float>(alpha * s) + (beta == 0.f ? 0.f : beta * y0[j]);
    }
    const int64_t j0 = N / 3;  // a sub-range, as the threaded callers pass
    k.gemv_raw(transB, 0, j0, K, alpha, a.data(), B.data(), ldb, beta, y.data());
    k.gemv_raw(transB, j0, N, K, alpha, a.data(), B.data(), ldb, beta, y.data());
    const ops::PackedB pb = ops::pack_b_f32(transB, K, N, B.data(), ldb, ep::IsaTier::kScalar);
    const int64_t panels = pb.n_padded / NR;
    k.gemv_packed(0, panels / 2, N, K, alpha, a.data(), pb.data.data(), pb.n_padded, beta, yp.data());
    k.gemv_packed(panels / 2, panels, N, K, alpha, a.data(), pb.data.data(), pb.n_padded, beta, yp.data());
    for (int64_t j = 0; j < N; ++j) {
      ASSERT_NEAR(y[j], ref[j], tol_for(K, ref[j])) << k.name << " gemv_raw N=" << N << " K=" << K << " tb=" << transB;
      ASSERT_NEAR(yp[j], ref[j], tol_for(K, ref[j])) << k.name << " gemv_packed N=" << N << " K=" << K;
    }
  }
}

// rows_exact variants: tile_rows must not read past the nr columns of a B row. Each row ends right before
// an inaccessible page (a read past it faults), on every edge width.
void check_rows_exact(const F32GemmKernels& k, std::mt19937& rng) {
  if (!k.rows_exact) return;
  const long page = sysconf(_SC_PAGESIZE);
  void* mem = mmap(nullptr, static_cast<size_t>(2 * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mem) + page, static_cast<size_t>(page), PROT_NONE), 0);
  float* end = reinterpret_cast<float*>(static_cast<char*>(mem) + page);
  for (int nr = 1; nr <= NR * k.n_panels; ++nr) {
    const int64_t kc = 3;
    const int panels = (nr + NR - 1) / NR;
    const std::vector<float> a = rand_vec(rng, static_cast<size_t>(kc * MR)),
                             b = rand_vec(rng, static_cast<size_t>(kc * NR * panels));
    // Row p ends p rows of nr before the guard page: row 0 touches it.
    std::vector<int64_t> boff(static_cast<size_t>(kc));
    float* base = end - kc * nr;
    for (int64_t p = 0; p < kc; ++p) {
      boff[p] = (kc - 1 - p) * nr;
      for (int j = 0; j < nr; ++j) base[boff[p] + j] = packed_at(b, kc, p, j);
    }
    std::vector<float> c(static_cast<size_t>(MR * NR * k.n_panels), 0.f);
    k.tile_rows(kc, a.data(), base, boff.data(), c.data(), NR * k.n_panels, MR, nr, 1.f, 0.f, nullptr, 0, 0);
    for (int r = 0; r < MR; ++r)
      for (int j = 0; j < nr; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < kc; ++p) acc += double(a[p * MR + r]) * double(packed_at(b, kc, p, j));
        ASSERT_NEAR(c[r * NR * k.n_panels + j], acc, tol_for(kc, static_cast<float>(acc))) << k.name << " nr=" << nr;
      }
  }
  munmap(mem, static_cast<size_t>(2 * page));
}

TEST(GemmKernels, EverySupportedVariantAgainstReference) {
  const auto variants = supported_variants();
  ASSERT_FALSE(variants.empty());
  // Say which variants this machine cannot check (their tier is above the CPU's).
  for (const F32GemmKernels* k : ops::f32_gemm_kernel_variants()) {
    if (!ops::f32_gemm_kernels_supported(*k)) {
      std::printf("[ SKIPPED  ] %s: this CPU lacks tier %s, variant not checked\n", k->name,
                  ep::isa_tier_name(k->tier));
    }
  }
  EXPECT_EQ(variants.front(), &ops::kF32Gemm6x16Scalar);  // the portable variant runs everywhere
  for (const F32GemmKernels* k : variants) {
    SCOPED_TRACE(k->name);
    ASSERT_NE(k->tile, nullptr);
    ASSERT_NE(k->tile_rows, nullptr);
    ASSERT_NE(k->gemv_raw, nullptr);
    ASSERT_NE(k->gemv_packed, nullptr);
    ASSERT_GE(k->n_panels, 1);
    std::printf("[ CHECKED  ] %s\n", k->name);
    std::mt19937 rng(17);
    check_tiles(*k, rng);
    check_epilogues(*k, rng);
    check_pack(*k, rng);
    check_rows_exact(*k, rng);
    check_gemv(*k, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The tier picks the best supported variant at or below it, and never one above it.
TEST(GemmKernels, TierPicksBestVariantAtOrBelow) {
  for (int t = 0; t <= static_cast<int>(ep::IsaTier::kAmx); ++t) {
    const auto tier = static_cast<ep::IsaTier>(t);
    const F32GemmKernels& k = ops::f32_gemm_kernels(tier);
    EXPECT_LE(static_cast<int>(k.tier), t) << k.name;
    EXPECT_TRUE(ops::f32_gemm_kernels_supported(k)) << k.name;
    for (const F32GemmKernels* v : supported_variants()) {
      if (static_cast<int>(v->tier) <= t) {
        EXPECT_GE(k.tier, v->tier) << k.name << " passed over " << v->name;
      }
    }
  }
}

}  // namespace
}  // namespace nxrt
