// f32_gemm_6x16__avx2: the float engine's kernels (gemm_kernels.h) for AVX2 + FMA, built with target
// attributes so the portable build runs them only where the CPU has them (f32_gemm_kernels).
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>

#include "ops/gemm/gemm_kernels.h"
#include "ops/stream_prefetch.h"

namespace nxrt::ops {

using namespace gemm_detail;

namespace {

// One k step of the 6x16 AVX2 tile: B's row (16 floats at `bp`) times A's 6 values at `ak`, into the
// accumulators c00..c51 of the enclosing kernel (micro_avx2_6x16 on packed panels, micro_rows_avx2 on
// rows read in place).
#define NXRT_FMA_ROW(r, x0, x1)          \
  av = _mm256_broadcast_ss(ak_ + (r)); \
  x0 = _mm256_fmadd_ps(av, b0, x0);    \
  x1 = _mm256_fmadd_ps(av, b1, x1);
// The first `rows` rows (2, 4 or 6) of that k step: B's two vectors, then each row's broadcast and FMAs.
#define NXRT_FMA_ROWS_16(bp, ak, rows)                                    \
  {                                                                       \
    const float* bp_ = (bp);                                              \
    const float* ak_ = (ak);                                              \
    const __m256 b0 = _mm256_loadu_ps(bp_), b1 = _mm256_loadu_ps(bp_ + 8); \
    __m256 av;                                                            \
    NXRT_FMA_ROW(0, c00, c01)                                             \
    NXRT_FMA_ROW(1, c10, c11)                                             \
    if constexpr ((rows) > 2) {                                           \
      NXRT_FMA_ROW(2, c20, c21)                                           \
      NXRT_FMA_ROW(3, c30, c31)                                           \
    }                                                                     \
    if constexpr ((rows) > 4) {                                           \
      NXRT_FMA_ROW(4, c40, c41)                                           \
      NXRT_FMA_ROW(5, c50, c51)                                           \
    }                                                                     \
  }
#define NXRT_FMA_6x16(bp, ak) NXRT_FMA_ROWS_16(bp, ak, 6)

// One k step of the tile's first 4 or 2 rows: the edge tiles of a matrix whose row count leaves 4 or 2
// rows (M = 16, 64, 256, 1000: 4; M = 32, 128, 512: 2) in its last 6-row panel, whose other rows would
// be computed and dropped. 8 or 4 FMAs a step instead of 12, each kept row's in the full tile's order
// (the same bits); the 4 chains of the 2-row step wait on the FMA latency, so both take ~4 cycles a step
// against 6.
#define NXRT_FMA_4x16(bp, ak) NXRT_FMA_ROWS_16(bp, ak, 4)
#define NXRT_FMA_2x16(bp, ak) NXRT_FMA_ROWS_16(bp, ak, 2)

// One k step of the left half (8 columns) of the tile: the edge tiles with at most 8 columns, whose right
// half would be computed and dropped. Each kept column takes the same FMAs in the same order as in the
// full tile, so the bits are the same.
#define NXRT_FMA_6x8(bp, ak)                                 \
  {                                                          \
    const __m256 b0 = _mm256_loadu_ps(bp);                   \
    const float* ak_ = (ak);                                 \
    c00 = _mm256_fmadd_ps(_mm256_broadcast_ss(ak_ + 0), b0, c00); \
    c10 = _mm256_fmadd_ps(_mm256_broadcast_ss(ak_ + 1), b0, c10); \
    c20 = _mm256_fmadd_ps(_mm256_broadcast_ss(ak_ + 2), b0, c20); \
    c30 = _mm256_fmadd_ps(_mm256_broadcast_ss(ak_ + 3), b0, c30); \
    c40 = _mm256_fmadd_ps(_mm256_broadcast_ss(ak_ + 4), b0, c40); \
    c50 = _mm256_fmadd_ps(_mm256_broadcast_ss(ak_ + 5), b0, c50); \
  }

// The 12 accumulators c00..c51 of a 6x16 tile, zeroed.
#define NXRT_ZERO_6x16                                                     \
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();             \
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();             \
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();             \
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();             \
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();             \
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();

// An edge tile: the 12 accumulators through a stack tile into C's mr x nr corner.
#define NXRT_STORE_EDGE_6x16(c, ldc, mr, nr, alpha, beta)                               \
  {                                                                                    \
    alignas(32) float tmp[MR * NR];                                                    \
    _mm256_store_ps(tmp + 0, c00);                                                     \
    _mm256_store_ps(tmp + 8, c01);                                                     \
    _mm256_store_ps(tmp + 16, c10);                                                    \
    _mm256_store_ps(tmp + 24, c11);                                                    \
    _mm256_store_ps(tmp + 32, c20);                                                    \
    _mm256_store_ps(tmp + 40, c21);                                                    \
    _mm256_store_ps(tmp + 48, c30);                                                    \
    _mm256_store_ps(tmp + 56, c31);                                                    \
    _mm256_store_ps(tmp + 64, c40);                                                    \
    _mm256_store_ps(tmp + 72, c41);                                                    \
    _mm256_store_ps(tmp + 80, c50);                                                    \
    _mm256_store_ps(tmp + 88, c51);                                                    \
    store_edge(tmp, c, ldc, mr, nr, alpha, beta);                                      \
  }

// A full tile: the 12 accumulators into C's 6 x 16 rows, each row through epilogue_row_avx2 first when
// `ep` (a const GemmEpilogue*) is set.
#define NXRT_STORE_FULL_6x16(c, ldc, ep, i0, j0)                                                \
  {                                                                                             \
    const __m256 acc_[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}}; \
    const GemmEpilogue* ep_ = (ep);                                                             \
    for (int r = 0; r < MR; ++r) {                                                              \
      __m256 v0 = acc_[r][0], v1 = acc_[r][1];                                                  \
      if (ep_) epilogue_row_avx2(*ep_, (i0) + r, (j0), v0, v1);                                 \
      _mm256_storeu_ps((c) + r * (ldc), v0);                                                    \
      _mm256_storeu_ps((c) + r * (ldc) + 8, v1);                                                \
    }                                                                                           \
  }

// 8 floats at p, or only the lanes `m` sets (the rest 0, nothing read there) when m is given.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 load_lanes(const float* p, const __m256i* m) {
  return m ? _mm256_maskload_ps(p, *m) : _mm256_loadu_ps(p);
}

// Bias (per row, or per column), residual and Relu/Clip on one 16-column row (v0, v1) of C at (i, j0).
// With lane masks (m0, m1: the row's first 8 and last 8 columns; edge tiles) the per-column bias and the
// residual are read only where the mask is set, so a row narrower than 16 reads nothing past its end.
// Relu as max(0, v) and Clip as min(hi, max(lo, v)) take v as the second operand, which the
// instructions return when it is NaN: NaN passes, as in the scalar epilogue.
__attribute__((target("avx2,fma"), always_inline)) inline void epilogue_row_avx2(const GemmEpilogue& ep, int64_t i,
                                                                                 int64_t j0, __m256& v0, __m256& v1,
                                                                                 const __m256i* m0 = nullptr,
                                                                                 const __m256i* m1 = nullptr) {
  if (ep.bias != nullptr && ep.bias_kind == GemmBias::kPerColumn) {
    v0 = _mm256_add_ps(v0, load_lanes(ep.bias + j0, m0));
    v1 = _mm256_add_ps(v1, load_lanes(ep.bias + j0 + 8, m1));
  } else if (ep.bias != nullptr && ep.bias_kind == GemmBias::kPerRow) {
    const __m256 b = _mm256_broadcast_ss(ep.bias + i);
    v0 = _mm256_add_ps(v0, b);
    v1 = _mm256_add_ps(v1, b);
  }
  if (ep.residual) {
    const float* res = ep.residual + i * ep.ldr + j0;
    v0 = _mm256_add_ps(v0, load_lanes(res, m0));
    v1 = _mm256_add_ps(v1, load_lanes(res + 8, m1));
  }
  if (ep.act == Activation::kRelu) {
    const __m256 zero = _mm256_setzero_ps();
    v0 = _mm256_max_ps(zero, v0);
    v1 = _mm256_max_ps(zero, v1);
  } else if (ep.act == Activation::kClip) {
    const __m256 lo = _mm256_set1_ps(ep.act_a), hi = _mm256_set1_ps(ep.act_b);
    v0 = _mm256_min_ps(hi, _mm256_max_ps(lo, v0));
    v1 = _mm256_min_ps(hi, _mm256_max_ps(lo, v1));
  } else if (ep.act == Activation::kLeakyRelu) {
    // v >= 0 ? v : a * v; a NaN fails the (ordered) compare and takes a * NaN = NaN.
    const __m256 zero = _mm256_setzero_ps(), slope = _mm256_set1_ps(ep.act_a);
    v0 = _mm256_blendv_ps(_mm256_mul_ps(slope, v0), v0, _mm256_cmp_ps(v0, zero, _CMP_GE_OQ));
    v1 = _mm256_blendv_ps(_mm256_mul_ps(slope, v1), v1, _mm256_cmp_ps(v1, zero, _CMP_GE_OQ));
  }
}

// The activations epilogue_row_avx2 applies.
inline bool act_in_registers(Activation a) {
  return a == Activation::kNone || a == Activation::kRelu || a == Activation::kClip || a == Activation::kLeakyRelu;
}

// The product of a 6x16 tile on packed panels into c00..c51 (declared here), C's rows prefetched first.
// One k step per iteration: with 12 accumulators, 2 B vectors and a broadcast the kernel uses all 16 ymm
// registers; unrolling by hand lets the compiler hoist loads of later steps and spill.
#define NXRT_PRODUCT_6x16(kc, a, b, c, ldc, mr)                               \
  NXRT_ZERO_6x16                                                              \
  for (int r = 0; r < (mr); ++r) {                                            \
    _mm_prefetch(reinterpret_cast<const char*>((c) + r * (ldc)), _MM_HINT_T0); \
    _mm_prefetch(reinterpret_cast<const char*>((c) + r * (ldc) + 15), _MM_HINT_T0); \
  }                                                                           \
  _Pragma("GCC unroll 1") for (int64_t k = 0; k < (kc); ++k) {                \
    if (PF) _mm_prefetch(reinterpret_cast<const char*>(a + MR * (kc)), _MM_HINT_T0); \
    NXRT_FMA_6x16(b, a)                                                       \
    a += 6;                                                                   \
    b += 16;                                                                  \
  }

// With `ep` (single K block, beta 0, full tile, epilogue_in_registers(ep)), the bias (per row), residual
// and Relu/Clip are applied to the accumulators before the one store: returns true when it did.
inline bool epilogue_in_registers(const GemmEpilogue* ep) {
  return ep && (ep->bias_kind != GemmBias::kPerColumn || ep->bias == nullptr) && act_in_registers(ep->act);
}

// Columns [0, nr) of a 16-column row (v0: columns 0-7, v1: 8-15) into dst, 0 < nr <= 16, with plain
// stores: a masked store (vmaskmovps) takes ~11 cycles on a Zen 3 against ~1 for a plain one, and an
// edge tile with its epilogue made 12 of them (5% of SqueezeNet's first conv in perf samples). Past 8
// columns the last 8 are stored again from nr - 8 on, their lanes gathered from v0 and v1 in registers.
__attribute__((target("avx2,fma"), always_inline)) inline void store_row_cols(float* dst, __m256 v0, __m256 v1,
                                                                               int nr) {
  if (nr < 8) {
    alignas(32) float t[8];
    _mm256_store_ps(t, v0);
    for (int j = 0; j < nr; ++j) dst[j] = t[j];
    return;
  }
  _mm256_storeu_ps(dst, v0);
  if (nr == 16) {
    _mm256_storeu_ps(dst + 8, v1);
  } else if (nr > 8) {
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i at = _mm256_add_epi32(lane, _mm256_set1_epi32(nr - 8));  // column of lane i: nr - 8 + i
    const __m256i idx = _mm256_and_si256(at, _mm256_set1_epi32(7));
    const __m256 from_v1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(at, _mm256_set1_epi32(7)));
    _mm256_storeu_ps(dst + nr - 8, _mm256_blendv_ps(_mm256_permutevar8x32_ps(v0, idx),
                                                    _mm256_permutevar8x32_ps(v1, idx), from_v1));
  }
}

// Lane masks of a row's first n columns (0 < n <= 16): m0 over columns 0-7, m1 over 8-15.
__attribute__((target("avx2,fma"), always_inline)) inline void column_masks(int n, __m256i& m0, __m256i& m1) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  m0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane);
  m1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(n - 8), lane);
}

// B's rows for edge_tile_avx2: 16 floats a k step in a packed panel, or rows read in place.
struct PackedPanelRows {
  const float* b;
  const float* at(int64_t k) const { return b + k * NR; }
};
struct InPlaceRows {
  const float* brow;
  const int64_t* boff;
  const float* at(int64_t k) const { return brow + boff[k]; }
};

// An edge tile (mr < 6 or nr < 16) on the FMAs of its rows and columns only: <= 8 columns on the left
// half, else <= 2 or <= 4 rows on those rows (each kept element's FMAs in the full tile's order, so the
// bits are the same). With `ep` (alpha 1, beta 0, epilogue_in_registers) the epilogue is applied to the
// accumulators and its columns stored with plain stores (store_row_cols; returns true); else the plain
// product goes through the stack tile (returns false).
template <class Rows>
__attribute__((target("avx2,fma"), always_inline)) inline bool edge_tile_avx2(int64_t kc, const float* a, Rows rows,
                                                                               float* c, int64_t ldc, int mr, int nr,
                                                                               float alpha, float beta,
                                                                               const GemmEpilogue* ep, int64_t i0,
                                                                               int64_t j0) {
  NXRT_ZERO_6x16
  if (nr <= 8) {
#pragma GCC unroll 1
    for (int64_t k = 0; k < kc; ++k) {
      NXRT_FMA_6x8(rows.at(k), a)
      a += 6;
    }
  } else if (mr <= 2) {
#pragma GCC unroll 1
    for (int64_t k = 0; k < kc; ++k) {
      NXRT_FMA_2x16(rows.at(k), a)
      a += 6;
    }
  } else if (mr <= 4) {
#pragma GCC unroll 1
    for (int64_t k = 0; k < kc; ++k) {
      NXRT_FMA_4x16(rows.at(k), a)
      a += 6;
    }
  } else {
#pragma GCC unroll 1
    for (int64_t k = 0; k < kc; ++k) {
      NXRT_FMA_6x16(rows.at(k), a)
      a += 6;
    }
  }
  if (ep && alpha == 1.f && beta == 0.f && epilogue_in_registers(ep)) {
    __m256i m0, m1;
    column_masks(nr, m0, m1);
    const __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < mr; ++r) {
      __m256 v0 = acc[r][0], v1 = acc[r][1];
      epilogue_row_avx2(*ep, i0 + r, j0, v0, v1, &m0, &m1);
      store_row_cols(c + r * ldc, v0, v1, nr);
    }
    return true;
  }
  NXRT_STORE_EDGE_6x16(c, ldc, mr, nr, alpha, beta)
  return false;
}

// PF: also prefetch the next A micro-panel (a + MR * kc) over the k loop (tile_prefetch_a; the engine
// asks for it on the first tile of each micro-panel): conv weights packed at creation come from DRAM
// on every run. Zen 3, alternated processes, 1 thread: ResNet-50 0.974 of the time (7 of 7 rounds
// faster), Inception-v2 0.985, SqueezeNet 0.985, DenseNet-121 0.996; 2 threads ResNet-50 0.989.
template <bool PF>
__attribute__((target("avx2,fma"))) void micro_avx2_6x16(int64_t kc, const float* a, const float* b, float* c,
                                                          int64_t ldc, int mr, int nr, float alpha, float beta) {
  if (mr < MR || nr < NR) {
    edge_tile_avx2(kc, a, PackedPanelRows{b}, c, ldc, mr, nr, alpha, beta, nullptr, 0, 0);
    return;
  }
  NXRT_PRODUCT_6x16(kc, a, b, c, ldc, mr)
  // A full tile (edge tiles returned above).
  const __m256 va = _mm256_set1_ps(alpha);
  if (beta == 0.f) {
#define NXRT_ROW(r, x0, x1)                                   \
  _mm256_storeu_ps(c + (r)*ldc, _mm256_mul_ps(x0, va));       \
  _mm256_storeu_ps(c + (r)*ldc + 8, _mm256_mul_ps(x1, va));
    NXRT_ROW(0, c00, c01) NXRT_ROW(1, c10, c11) NXRT_ROW(2, c20, c21)
    NXRT_ROW(3, c30, c31) NXRT_ROW(4, c40, c41) NXRT_ROW(5, c50, c51)
#undef NXRT_ROW
  } else if (beta == 1.f) {
#define NXRT_ROW(r, x0, x1)                                                                   \
  _mm256_storeu_ps(c + (r)*ldc, _mm256_fmadd_ps(x0, va, _mm256_loadu_ps(c + (r)*ldc)));       \
  _mm256_storeu_ps(c + (r)*ldc + 8, _mm256_fmadd_ps(x1, va, _mm256_loadu_ps(c + (r)*ldc + 8)));
    NXRT_ROW(0, c00, c01) NXRT_ROW(1, c10, c11) NXRT_ROW(2, c20, c21)
    NXRT_ROW(3, c30, c31) NXRT_ROW(4, c40, c41) NXRT_ROW(5, c50, c51)
#undef NXRT_ROW
  } else {
    const __m256 vb = _mm256_set1_ps(beta);
#define NXRT_ROW(r, x0, x1)                                                                                    \
  _mm256_storeu_ps(c + (r)*ldc, _mm256_fmadd_ps(x0, va, _mm256_mul_ps(vb, _mm256_loadu_ps(c + (r)*ldc))));     \
  _mm256_storeu_ps(c + (r)*ldc + 8, _mm256_fmadd_ps(x1, va, _mm256_mul_ps(vb, _mm256_loadu_ps(c + (r)*ldc + 8))));
    NXRT_ROW(0, c00, c01) NXRT_ROW(1, c10, c11) NXRT_ROW(2, c20, c21)
    NXRT_ROW(3, c30, c31) NXRT_ROW(4, c40, c41) NXRT_ROW(5, c50, c51)
#undef NXRT_ROW
  }
}


// The last (and only) K block of a full tile with the epilogue applied to the accumulators before the one
// store, which saves epilogue_tile's pass over the stored tile (reloading it from L1): 6% of ShuffleNet's
// run time and 3% of ResNet-50's at 1 thread on a Zen 3. Edge tiles take edge_tile_avx2 (the epilogue in
// registers too); other activations store the plain product and return false (the engine's epilogue
// follows).
template <bool PF>
__attribute__((target("avx2,fma"))) bool tile_epilogue_avx2(int64_t kc, const float* a, const float* b, float* c,
                                                             int64_t ldc, int mr, int nr, const GemmEpilogue& ep,
                                                             int64_t i0, int64_t j0) {
  if (!act_in_registers(ep.act)) {
    micro_avx2_6x16<PF>(kc, a, b, c, ldc, mr, nr, 1.f, 0.f);
    return false;
  }
  if (mr != MR || nr != NR) return edge_tile_avx2(kc, a, PackedPanelRows{b}, c, ldc, mr, nr, 1.f, 0.f, &ep, i0, j0);
  if (ep.residual) {
    for (int r = 0; r < MR; ++r) {
      const float* res = ep.residual + (i0 + r) * ep.ldr + j0;
      _mm_prefetch(reinterpret_cast<const char*>(res), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(res + 15), _MM_HINT_T0);
    }
  }
  NXRT_PRODUCT_6x16(kc, a, b, c, ldc, mr)
  NXRT_STORE_FULL_6x16(c, ldc, &ep, i0, j0)
  return true;
}

__attribute__((target("avx2,fma"))) bool micro_rows_avx2(int64_t kc, const float* a, const float* brow,
                                                          const int64_t* boff, float* c, int64_t ldc, int mr, int nr,
                                                          float alpha, float beta, const GemmEpilogue* ep,
                                                          int64_t i0, int64_t j0) {
  if (mr < MR || nr < NR) return edge_tile_avx2(kc, a, InPlaceRows{brow, boff}, c, ldc, mr, nr, alpha, beta, ep, i0, j0);
  NXRT_ZERO_6x16
#pragma GCC unroll 1
  for (int64_t k = 0; k < kc; ++k) {
    NXRT_FMA_6x16(brow + boff[k], a)
    a += 6;
  }
  if (beta == 0.f && alpha == 1.f && (!ep || epilogue_in_registers(ep))) {
    NXRT_STORE_FULL_6x16(c, ldc, ep, i0, j0)
    return ep != nullptr;
  }
  NXRT_STORE_EDGE_6x16(c, ldc, mr, nr, alpha, beta)
  return false;
}

__attribute__((target("avx2,fma"))) inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

__attribute__((target("avx2,fma"))) void gemv_raw_avx2(bool transB, int64_t j0, int64_t j1, int64_t K, float alpha,
                                                        const float* a, const float* B, int64_t ldb, float beta,
                                                        float* y) {
  if (transB) {
    int64_t j = j0;
    for (; j + 4 <= j1; j += 4) {
      const float* b0 = B + j * ldb;
      const float* b1 = b0 + ldb;
      const float* b2 = b1 + ldb;
      const float* b3 = b2 + ldb;
      __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        const __m256 av = _mm256_loadu_ps(a + k);
        s0 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b0 + k), s0);
        s1 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b1 + k), s1);
        s2 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b2 + k), s2);
        s3 = _mm256_fmadd_ps(av, _mm256_loadu_ps(b3 + k), s3);
      }
      float r[4] = {hsum256(s0), hsum256(s1), hsum256(s2), hsum256(s3)};
      for (; k < K; ++k) {
        r[0] += a[k] * b0[k];
        r[1] += a[k] * b1[k];
        r[2] += a[k] * b2[k];
        r[3] += a[k] * b3[k];
      }
      for (int t = 0; t < 4; ++t) y[j + t] = beta == 0.f ? alpha * r[t] : alpha * r[t] + beta * y[j + t];
    }
    if (j < j1) gemv_raw_cols(true, j, j1, K, alpha, a, B, ldb, beta, y);
    return;
  }
  gemv_raw_cols(false, j0, j1, K, alpha, a, B, ldb, beta, y);
}

__attribute__((target("avx2,fma"))) void gemv_packed_avx2(int64_t q0, int64_t q1, int64_t N, int64_t K, float alpha,
                                                           const float* a, const float* packed, int64_t n_padded,
                                                           float beta, float* y) {
  constexpr int64_t kSub = 64;
  alignas(64) float acc[kSub * NR];
  for (int64_t s0 = q0; s0 < q1; s0 += kSub) {
    const int64_t s1 = std::min(q1, s0 + kSub);
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
      const int64_t kc = std::min(KC, K - p0);
      const float* ap = a + p0;
      const float* bp = packed + p0 * n_padded + s0 * NR * kc;
      // One contiguous run of packed B per (column block, K block): start its first pages now, and
      // each later page kPageAheadBytes early (ops/stream_prefetch.h).
      prefetch_first_pages(bp, (s1 - s0) * NR * kc * 4);
      for (int64_t q = s0; q < s1; ++q) {
        prefetch_pages_ahead(bp, NR * kc * 4);
        float* ac = acc + (q - s0) * NR;
        __m256 x0 = _mm256_setzero_ps(), x1 = _mm256_setzero_ps();
        __m256 y0 = _mm256_setzero_ps(), y1 = _mm256_setzero_ps();
        int64_t p = 0;
        for (; p + 2 <= kc; p += 2) {
          const __m256 a0 = _mm256_broadcast_ss(ap + p), a1 = _mm256_broadcast_ss(ap + p + 1);
          x0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(bp), x0);
          x1 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(bp + 8), x1);
          y0 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(bp + 16), y0);
          y1 = _mm256_fmadd_ps(a1, _mm256_loadu_ps(bp + 24), y1);
          bp += 32;
        }
        if (p < kc) {
          const __m256 a0 = _mm256_broadcast_ss(ap + p);
          x0 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(bp), x0);
          x1 = _mm256_fmadd_ps(a0, _mm256_loadu_ps(bp + 8), x1);
          bp += 16;
        }
        x0 = _mm256_add_ps(x0, y0);
        x1 = _mm256_add_ps(x1, y1);
        if (p0 == 0) {
          _mm256_store_ps(ac, x0);
          _mm256_store_ps(ac + 8, x1);
        } else {
          _mm256_store_ps(ac, _mm256_add_ps(_mm256_load_ps(ac), x0));
          _mm256_store_ps(ac + 8, _mm256_add_ps(_mm256_load_ps(ac + 8), x1));
        }
      }
    }
    for (int64_t q = s0; q < s1; ++q) {
      const int64_t jb = q * NR, cols = std::min<int64_t>(NR, N - jb);
      for (int64_t j = 0; j < cols; ++j) {
        const float v = alpha * acc[(q - s0) * NR + j];
        y[jb + j] = beta == 0.f ? v : v + beta * y[jb + j];
      }
    }
  }
}

// The epilogue on one full-width tile (16 columns) with AVX2: bias, residual and Relu/Clip/LeakyRelu/none in
// registers, one pass over the tile while it is in L1. Other activations and edge tiles take the
// portable loop.
__attribute__((target("avx2,fma"))) bool epilogue_tile_avx2(const GemmEpilogue& ep, int64_t i0, int64_t j0,
                                                            int64_t rows, int64_t cols, float* c, int64_t ldc) {
  if (cols > NR || cols <= 0 || !act_in_registers(ep.act)) return false;
  if (cols == NR) {
    for (int64_t r = 0; r < rows; ++r) {
      float* cr = c + r * ldc;
      __m256 v0 = _mm256_loadu_ps(cr), v1 = _mm256_loadu_ps(cr + 8);
      epilogue_row_avx2(ep, i0 + r, j0, v0, v1);
      _mm256_storeu_ps(cr, v0);
      _mm256_storeu_ps(cr + 8, v1);
    }
    return true;
  }
  // An edge tile (a 111-wide output row's last 15 columns): masked loads, plain stores of its columns
  // (store_row_cols), where the portable epilogue's scalar loop took 13% of a 3->64 3x3 stride-2 conv.
  __m256i m0, m1;
  column_masks(static_cast<int>(cols), m0, m1);
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    __m256 v0 = _mm256_maskload_ps(cr, m0), v1 = _mm256_maskload_ps(cr + 8, m1);
    epilogue_row_avx2(ep, i0 + r, j0, v0, v1, &m0, &m1);
    store_row_cols(cr, v0, v1, static_cast<int>(cols));
  }
  return true;
}

}  // namespace

namespace gemm_detail {

// One full panel of a transposed B (16 rows of B, each contiguous in p) into kc x 16, through 8x8
// register transposes: the scalar loop's strided stores made packing FC weights (transB Gemm, the bulk
// of session creation for AlexNet / VGG) slower than the whole first run.
__attribute__((target("avx2,fma"))) void pack_b_trans_panel_avx2(const float* B, int64_t ldb, int64_t kc,
                                                                float* dst) {
  static_assert(NR == 16, "two 8-lane halves per panel row");
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) {
    for (int h = 0; h < 2; ++h) {
      const float* s = B + (h * 8) * ldb + p;
      __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ldb), r2 = _mm256_loadu_ps(s + 2 * ldb),
             r3 = _mm256_loadu_ps(s + 3 * ldb), r4 = _mm256_loadu_ps(s + 4 * ldb), r5 = _mm256_loadu_ps(s + 5 * ldb),
             r6 = _mm256_loadu_ps(s + 6 * ldb), r7 = _mm256_loadu_ps(s + 7 * ldb);
      const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
      const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
      const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
      const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
      const __m256 u0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 u1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 u2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 u3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 u4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 u5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
      const __m256 u6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
      const __m256 u7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
      float* d = dst + p * NR + h * 8;
      _mm256_storeu_ps(d + 0 * NR, _mm256_permute2f128_ps(u0, u4, 0x20));
      _mm256_storeu_ps(d + 1 * NR, _mm256_permute2f128_ps(u1, u5, 0x20));
      _mm256_storeu_ps(d + 2 * NR, _mm256_permute2f128_ps(u2, u6, 0x20));
      _mm256_storeu_ps(d + 3 * NR, _mm256_permute2f128_ps(u3, u7, 0x20));
      _mm256_storeu_ps(d + 4 * NR, _mm256_permute2f128_ps(u0, u4, 0x31));
      _mm256_storeu_ps(d + 5 * NR, _mm256_permute2f128_ps(u1, u5, 0x31));
      _mm256_storeu_ps(d + 6 * NR, _mm256_permute2f128_ps(u2, u6, 0x31));
      _mm256_storeu_ps(d + 7 * NR, _mm256_permute2f128_ps(u3, u7, 0x31));
    }
  }
  for (; p < kc; ++p)
    for (int64_t j = 0; j < NR; ++j) dst[p * NR + j] = B[j * ldb + p];
}

}  // namespace gemm_detail

const F32GemmKernels kF32Gemm6x16Avx2 = {
    "f32_gemm_6x16__avx2",     ep::IsaTier::kAvx2, 1, false, &micro_avx2_6x16<false>, &micro_rows_avx2, &tile_epilogue_avx2<false>, &epilogue_tile_avx2,
    &pack_b_trans_panel_avx2, &gemv_raw_avx2,      &gemv_packed_avx2,
    &micro_avx2_6x16<true>,    &tile_epilogue_avx2<true>,
};

}  // namespace nxrt::ops
#endif
