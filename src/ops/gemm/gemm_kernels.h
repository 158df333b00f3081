// The float32 GEMM engine's instruction-set-specific pieces (internal to ops/gemm and its tests).
//
// A variant is a set of functions for one tier, named <type>_<op>_<tile>__<isa> ("f32_gemm_6x16__avx2",
// "f32_gemm_6x64__avx512"):
// the register-blocked tile over packed panels, the same tile reading B rows in place, the epilogue on
// one tile, one transposed-B panel's packing and the two GEMV loops. The engine (gemm_f32.cpp) owns
// blocking, packing layout and threading, and calls the variant f32_gemm_kernels(isa) picks: the best
// one whose tier is at or below `isa` and that this CPU runs. A new tier (AVX-512, AMX) adds a
// variant in its own gemm_kernels_<isa>.cpp (compiled with target attributes, never -march), lists it
// in f32_gemm_kernel_variants(), and the generic tester (tests/unit/test_gemm_kernels.cpp) checks it
// against the reference on random shapes on every machine that has the tier.
//
// The packed layouts are fixed (gemm.h): A panels of 6 rows, B panels of 16 columns per K block of
// kGemmKC. A variant with a wider register tile covers several adjacent panels per call.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/gemm/gemm.h"

namespace nxrt::ops {

struct F32GemmKernels {
  const char* name;
  ep::IsaTier tier;  // what the CPU must support
  // B panels (16 columns each) one tile call covers: nr <= 16 * n_panels. Panel q of a call follows the
  // first at b + q * 16 * kc (packed), or at brow + boff[k] + q * 16 (rows read in place).
  int n_panels;
  // tile_rows reads exactly the nr columns of each B row (masked loads): rows need no readable slack.
  bool rows_exact;
  // C[mr x nr] = alpha * (A panel . B panels) + beta * C (beta == 0: C not read); a: kc x 6 (row index
  // fastest), b: kc x 16 per panel (column index fastest); mr <= 6, nr <= 16 * n_panels (edge tiles). A
  // panel past the first is read only when nr reaches into it.
  void (*tile)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, float alpha,
               float beta);
  // The tile with B's row k read in place at brow + boff[k] (nr rounded up to 16 readable floats). With `ep` set (the
  // only K block, beta 0, alpha 1) it may apply the epilogue for C(i0, j0) in its store: returns whether
  // it did.
  bool (*tile_rows)(int64_t kc, const float* a, const float* brow, const int64_t* boff, float* c, int64_t ldc,
                    int mr, int nr, float alpha, float beta, const GemmEpilogue* ep, int64_t i0, int64_t j0);
  // The tile with the epilogue for C(i0, j0) applied in its store (the last K block, alpha 1, beta 0):
  // returns whether it did (false: C holds the plain product). Null: tile, then epilogue_tile.
  bool (*tile_epilogue)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                        const GemmEpilogue& ep, int64_t i0, int64_t j0);
  // The epilogue on one tile of C at (i0, j0); false when it does not handle this one (the engine then
  // runs gemm_apply_epilogue). Null: always the portable one.
  bool (*epilogue_tile)(const GemmEpilogue& ep, int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* c,
                        int64_t ldc);
  // One full panel of a transposed B: 16 rows of B (each contiguous in p, row stride ldb) into kc x 16.
  // Null: the portable loop.
  void (*pack_b_trans_panel)(const float* B, int64_t ldb, int64_t kc, float* dst);
  // y[j0:j1] = alpha * a . op(B)[:, j] + beta * y (beta == 0: y not read), B raw.
  void (*gemv_raw)(bool transB, int64_t j0, int64_t j1, int64_t K, float alpha, const float* a, const float* B,
                   int64_t ldb, float beta, float* y);
  // The same over panels [q0, q1) of a PackedB (n_padded columns, N valid).
  void (*gemv_packed)(int64_t q0, int64_t q1, int64_t N, int64_t K, float alpha, const float* a,
                      const float* packed, int64_t n_padded, float beta, float* y);
  // tile and tile_epilogue that also prefetch the next A micro-panel (a + 6 * kc, the next one in packed
  // A) over their k loop; the engine calls them for the first tile of each micro-panel, so conv weights
  // streamed from memory arrive one panel ahead. Null: tile / tile_epilogue.
  void (*tile_prefetch_a)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                          float alpha, float beta);
  bool (*tile_epilogue_prefetch_a)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                                   const GemmEpilogue& ep, int64_t i0, int64_t j0);
  // The tile with A's rows read in place instead of a packed micro-panel: row r (r < mr) of the tile at
  // a + r * lda, its kc values contiguous (a raw, non-transposed A). With `ep` set (the last K block,
  // alpha 1, beta 0) it may apply the epilogue in its store: returns whether it did. The same products in
  // the same order as `tile` on the packed panel, so the same bits. Null: the engine packs A.
  // pf_b (may be null): the tile also prefetches into L2 one 64-byte line from pf_b on per 4 k steps
  // (ceil(kc / 4) lines), spread over its k loop: the engine's next packed-B block.
  bool (*tile_a_rows)(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc, int mr, int nr,
                      float alpha, float beta, const GemmEpilogue* ep, int64_t i0, int64_t j0, const float* pf_b);
};

// Every variant compiled into this build, portable first.
const std::vector<const F32GemmKernels*>& f32_gemm_kernel_variants();
// Whether this CPU runs the variant.
bool f32_gemm_kernels_supported(const F32GemmKernels& k);
// The best supported variant whose tier is at or below `isa`.
const F32GemmKernels& f32_gemm_kernels(ep::IsaTier isa);

// The variants (defined in gemm_kernels_<isa>.cpp; a build for another architecture has only the first).
extern const F32GemmKernels kF32Gemm6x16Scalar;
#if defined(__x86_64__) || defined(__i386__)
extern const F32GemmKernels kF32Gemm6x16Avx2;
extern const F32GemmKernels kF32Gemm6x64Avx512;
#endif

namespace gemm_detail {

#if defined(__x86_64__) || defined(__i386__)
// The AVX2 variant's transposed-B panel packing (8x8 register transposes), shared by the AVX-512 one.
__attribute__((target("avx2,fma"))) void pack_b_trans_panel_avx2(const float* B, int64_t ldb, int64_t kc, float* dst);
#endif

constexpr int MR = kGemmMR, NR = kGemmNR;
constexpr int64_t KC = kGemmKC;

// Writes an mr x nr corner of a 6x16 accumulator tile (row stride NR) to C.
inline void store_edge(const float* acc, float* c, int64_t ldc, int mr, int nr, float alpha, float beta) {
  for (int r = 0; r < mr; ++r) {
    float* cr = c + r * ldc;
    const float* ar = acc + r * NR;
    if (beta == 0.f) {
      for (int j = 0; j < nr; ++j) cr[j] = alpha * ar[j];
    } else {
      for (int j = 0; j < nr; ++j) cr[j] = alpha * ar[j] + beta * cr[j];
    }
  }
}

// y[j0:j1] = alpha * a . op(B)[:, j] + beta * y, B raw: the loop both variants build on (the AVX2 one
// inlines it into its own target for the column-major case and the tails).
inline __attribute__((always_inline)) void gemv_raw_cols(bool transB, int64_t j0, int64_t j1, int64_t K, float alpha,
                                                         const float* a, const float* B, int64_t ldb, float beta,
                                                         float* y) {
  if (transB) {
    // y[j] = a . B[j, :]
    for (int64_t j = j0; j < j1; ++j) {
      const float* b = B + j * ldb;
      float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f, s4 = 0.f, s5 = 0.f, s6 = 0.f, s7 = 0.f;
      int64_t k = 0;
      for (; k + 8 <= K; k += 8) {
        s0 += a[k] * b[k]; s1 += a[k + 1] * b[k + 1]; s2 += a[k + 2] * b[k + 2]; s3 += a[k + 3] * b[k + 3];
        s4 += a[k + 4] * b[k + 4]; s5 += a[k + 5] * b[k + 5]; s6 += a[k + 6] * b[k + 6]; s7 += a[k + 7] * b[k + 7];
      }
      for (; k < K; ++k) s0 += a[k] * b[k];
      const float s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));
      y[j] = beta == 0.f ? alpha * s : alpha * s + beta * y[j];
    }
    return;
  }
  // B stored K x N: stream 4 rows at a time over a column block held in a local accumulator.
  constexpr int64_t kBlk = 512;
  alignas(64) float acc[kBlk];
  for (int64_t c0 = j0; c0 < j1; c0 += kBlk) {
    const int64_t n = std::min(kBlk, j1 - c0);
    for (int64_t j = 0; j < n; ++j) acc[j] = 0.f;
    int64_t k = 0;
    for (; k + 4 <= K; k += 4) {
      const float a0 = a[k], a1 = a[k + 1], a2 = a[k + 2], a3 = a[k + 3];
      const float* __restrict b0 = B + k * ldb + c0;
      const float* __restrict b1 = b0 + ldb;
      const float* __restrict b2 = b1 + ldb;
      const float* __restrict b3 = b2 + ldb;
      for (int64_t j = 0; j < n; ++j) acc[j] += (a0 * b0[j] + a1 * b1[j]) + (a2 * b2[j] + a3 * b3[j]);
    }
    for (; k < K; ++k) {
      const float a0 = a[k];
      const float* __restrict b0 = B + k * ldb + c0;
      for (int64_t j = 0; j < n; ++j) acc[j] += a0 * b0[j];
    }
    float* yc = y + c0;
    if (beta == 0.f) {
      for (int64_t j = 0; j < n; ++j) yc[j] = alpha * acc[j];
    } else {
      for (int64_t j = 0; j < n; ++j) yc[j] = alpha * acc[j] + beta * yc[j];
    }
  }
}

}  // namespace gemm_detail

}  // namespace nxrt::ops
