// The float32 GEMM engine behind gemm/gemm.h (and convgemm's float path).
//
// Blocking (Zen 4 / Haswell-class core: 32 KiB L1d, 1 MiB L2):
//   KC = 256   a 6 x KC A micro-panel (6 KiB) and a KC x 16 B micro-panel (16 KiB) fit L1 together
//   MC = 144   an MC x KC block of packed A (144 KiB), walked one 6-row micro-panel (L1) at a time
//   NC <= 1024 a KC x NC block of packed B (<= 1 MiB, L2/L3) streamed under each A micro-panel
// Loop order per task (one NC column block x a range of MC row blocks):
//   for each KC block: pack B (or point into PackedB); for each MC block: pack A (or point into
//   PackedAF32); for each 6-row micro-panel of A: for each 16-column micro-panel of B: micro-kernel.
// The epilogue runs on each 6x16 tile of C right after its last K block.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>


#include "ep/cpu_features.h"
#include "ep/thread_pool.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/mapped_scratch.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_GEMM_X86 1
#endif

namespace nxrt::ops {

namespace {

constexpr int MR = kGemmMR, NR = kGemmNR;
constexpr int64_t KC = kGemmKC;
constexpr int64_t MC = 144;
constexpr int64_t NC = 1024;
// Below this many multiply-adds a GEMM stays on the calling thread (waking workers costs more).
constexpr int64_t kParallelMacs = int64_t(1) << 20;

// ---------------------------------------------------------------------------------------------
// Kernel selection.

bool g_allow_avx2 = true;

inline bool use_avx2() { return g_allow_avx2 && ep::cpu_has_avx2_fma(); }

// ---------------------------------------------------------------------------------------------
// Aligned scratch buffers, one set per thread.

// ---------------------------------------------------------------------------------------------
// Micro-kernels: C[mr x nr] = alpha * (A panel x B panel) + beta * C  (beta == 0: C not read).
// a: kc x MR (row index fastest), b: kc x NR (column index fastest).

using MicroKernel = void (*)(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                             float alpha, float beta);

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

// Portable kernel: a flat accumulator and constant trip counts, which the compiler keeps in vector
// registers with baseline (SSE2) code. `b_row(p)` is B's row p (NR floats): a packed panel, or a row read
// in place (gemm_f32_strips).
template <typename BRow>
inline void micro_generic_rows(int64_t kc, const float* __restrict a, BRow b_row, float* c, int64_t ldc, int mr,
                               int nr, float alpha, float beta) {
  float acc[MR * NR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b_row(p);
    const float* ap = a + p * MR;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i * NR + j] += ap[i] * bp[j];
    }
  }
  store_edge(acc, c, ldc, mr, nr, alpha, beta);
}

void micro_generic(int64_t kc, const float* __restrict a, const float* __restrict b, float* c, int64_t ldc, int mr,
                   int nr, float alpha, float beta) {
  micro_generic_rows(kc, a, [b](int64_t p) { return b + p * NR; }, c, ldc, mr, nr, alpha, beta);
}

#ifdef NXRT_GEMM_X86
// One k step of the 6x16 AVX2 tile: B's row (16 floats at `bp`) times A's 6 values at `ak`, into the
// accumulators c00..c51 of the enclosing kernel (micro_avx2_6x16 on packed panels, micro_rows_avx2 on
// rows read in place).
#define NXRT_FMA_6x16(bp, ak)                                                   \
  {                                                                             \
    const float* bp_ = (bp);                                                    \
    const float* ak_ = (ak);                                                    \
    const __m256 b0 = _mm256_loadu_ps(bp_), b1 = _mm256_loadu_ps(bp_ + 8);       \
    __m256 av = _mm256_broadcast_ss(ak_ + 0);                                   \
    c00 = _mm256_fmadd_ps(av, b0, c00);                                         \
    c01 = _mm256_fmadd_ps(av, b1, c01);                                         \
    av = _mm256_broadcast_ss(ak_ + 1);                                          \
    c10 = _mm256_fmadd_ps(av, b0, c10);                                         \
    c11 = _mm256_fmadd_ps(av, b1, c11);                                         \
    av = _mm256_broadcast_ss(ak_ + 2);                                          \
    c20 = _mm256_fmadd_ps(av, b0, c20);                                         \
    c21 = _mm256_fmadd_ps(av, b1, c21);                                         \
    av = _mm256_broadcast_ss(ak_ + 3);                                          \
    c30 = _mm256_fmadd_ps(av, b0, c30);                                         \
    c31 = _mm256_fmadd_ps(av, b1, c31);                                         \
    av = _mm256_broadcast_ss(ak_ + 4);                                          \
    c40 = _mm256_fmadd_ps(av, b0, c40);                                         \
    c41 = _mm256_fmadd_ps(av, b1, c41);                                         \
    av = _mm256_broadcast_ss(ak_ + 5);                                          \
    c50 = _mm256_fmadd_ps(av, b0, c50);                                         \
    c51 = _mm256_fmadd_ps(av, b1, c51);                                         \
  }

// Bias (per row, or per column), residual and Relu/Clip on one 16-column row (v0, v1) of C at (i, j0).
// Relu as max(0, v) and Clip as min(hi, max(lo, v)) take v as the second operand, which the
// instructions return when it is NaN: NaN passes, as in the scalar epilogue.
__attribute__((target("avx2,fma"), always_inline)) inline void epilogue_row_avx2(const GemmEpilogue& ep, int64_t i,
                                                                                 int64_t j0, __m256& v0, __m256& v1) {
  if (ep.bias != nullptr && ep.bias_kind == GemmBias::kPerColumn) {
    v0 = _mm256_add_ps(v0, _mm256_loadu_ps(ep.bias + j0));
    v1 = _mm256_add_ps(v1, _mm256_loadu_ps(ep.bias + j0 + 8));
  } else if (ep.bias != nullptr && ep.bias_kind == GemmBias::kPerRow) {
    const __m256 b = _mm256_broadcast_ss(ep.bias + i);
    v0 = _mm256_add_ps(v0, b);
    v1 = _mm256_add_ps(v1, b);
  }
  if (ep.residual) {
    const float* res = ep.residual + i * ep.ldr + j0;
    v0 = _mm256_add_ps(v0, _mm256_loadu_ps(res));
    v1 = _mm256_add_ps(v1, _mm256_loadu_ps(res + 8));
  }
  if (ep.act == GemmActivation::kRelu) {
    const __m256 zero = _mm256_setzero_ps();
    v0 = _mm256_max_ps(zero, v0);
    v1 = _mm256_max_ps(zero, v1);
  } else if (ep.act == GemmActivation::kClip) {
    const __m256 lo = _mm256_set1_ps(ep.clip_min), hi = _mm256_set1_ps(ep.clip_max);
    v0 = _mm256_min_ps(hi, _mm256_max_ps(lo, v0));
    v1 = _mm256_min_ps(hi, _mm256_max_ps(lo, v1));
  }
}
#endif

#ifdef NXRT_GEMM_X86
__attribute__((target("avx2,fma"))) void micro_avx2_6x16(int64_t kc, const float* a, const float* b, float* c,
                                                          int64_t ldc, int mr, int nr, float alpha, float beta) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
  for (int r = 0; r < mr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 15), _MM_HINT_T0);
  }
#define NXRT_GEMM_STEP(off) NXRT_FMA_6x16(b + (off) * 16, a + (off) * 6)
  // One k step per iteration: with 12 accumulators, 2 B vectors and a broadcast the kernel uses all 16
  // ymm registers; unrolling by hand lets the compiler hoist loads of later steps and spill.
#pragma GCC unroll 1
  for (int64_t k = 0; k < kc; ++k) {
    NXRT_GEMM_STEP(0)
    a += 6;
    b += 16;
  }
#undef NXRT_GEMM_STEP
  const __m256 va = _mm256_set1_ps(alpha);
  if (mr == MR && nr == NR) {
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
    return;
  }
  alignas(32) float tmp[MR * NR];
  _mm256_store_ps(tmp + 0, c00); _mm256_store_ps(tmp + 8, c01);
  _mm256_store_ps(tmp + 16, c10); _mm256_store_ps(tmp + 24, c11);
  _mm256_store_ps(tmp + 32, c20); _mm256_store_ps(tmp + 40, c21);
  _mm256_store_ps(tmp + 48, c30); _mm256_store_ps(tmp + 56, c31);
  _mm256_store_ps(tmp + 64, c40); _mm256_store_ps(tmp + 72, c41);
  _mm256_store_ps(tmp + 80, c50); _mm256_store_ps(tmp + 88, c51);
  store_edge(tmp, c, ldc, mr, nr, alpha, beta);
}
#endif

// Row-addressed variants for gemm_f32_strip: B row k is the 16 floats at brow + boff[k] (read in place
// from a conv's padded input, no packing).
void micro_rows_generic(int64_t kc, const float* __restrict a, const float* brow, const int64_t* boff, float* c,
                        int64_t ldc, int mr, int nr, float alpha, float beta) {
  micro_generic_rows(kc, a, [brow, boff](int64_t p) { return brow + boff[p]; }, c, ldc, mr, nr, alpha, beta);
}

#ifdef NXRT_GEMM_X86
// With `ep` (single K block, beta 0, full tile, epilogue_in_registers(ep)), the bias (per row), residual
// and Relu/Clip are applied to the accumulators before the one store: returns true when it did.
inline bool epilogue_in_registers(const GemmEpilogue* ep) {
  return ep && (ep->bias_kind != GemmBias::kPerColumn || ep->bias == nullptr) &&
         (ep->act == GemmActivation::kNone || ep->act == GemmActivation::kRelu || ep->act == GemmActivation::kClip);
}

__attribute__((target("avx2,fma"))) bool micro_rows_avx2(int64_t kc, const float* a, const float* brow,
                                                          const int64_t* boff, float* c, int64_t ldc, int mr, int nr,
                                                          float alpha, float beta, const GemmEpilogue* ep,
                                                          int64_t i0, int64_t j0) {
  __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
  __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
  __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
  __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
  __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
  __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
#pragma GCC unroll 1
  for (int64_t k = 0; k < kc; ++k) {
    NXRT_FMA_6x16(brow + boff[k], a)
    a += 6;
  }
  if (mr == MR && nr == NR && beta == 0.f && alpha == 1.f && (!ep || epilogue_in_registers(ep))) {
    __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    for (int r = 0; r < MR; ++r) {
      __m256 v0 = acc[r][0], v1 = acc[r][1];
      if (ep) epilogue_row_avx2(*ep, i0 + r, j0, v0, v1);
      _mm256_storeu_ps(c + r * ldc, v0);
      _mm256_storeu_ps(c + r * ldc + 8, v1);
    }
    return ep != nullptr;
  }
  alignas(32) float tmp[MR * NR];
  _mm256_store_ps(tmp + 0, c00); _mm256_store_ps(tmp + 8, c01);
  _mm256_store_ps(tmp + 16, c10); _mm256_store_ps(tmp + 24, c11);
  _mm256_store_ps(tmp + 32, c20); _mm256_store_ps(tmp + 40, c21);
  _mm256_store_ps(tmp + 48, c30); _mm256_store_ps(tmp + 56, c31);
  _mm256_store_ps(tmp + 64, c40); _mm256_store_ps(tmp + 72, c41);
  _mm256_store_ps(tmp + 80, c50); _mm256_store_ps(tmp + 88, c51);
  store_edge(tmp, c, ldc, mr, nr, alpha, beta);
  return false;
}
#endif

MicroKernel pick_kernel() {
#ifdef NXRT_GEMM_X86
  if (use_avx2()) return &micro_avx2_6x16;
#endif
  return &micro_generic;
}

// ---------------------------------------------------------------------------------------------
// Packing.

// op(A)[i0:i0+mc, p0:p0+kc] as ceil(mc/MR) panels of kc x MR (row index fastest), zero-padded; scaled.
void pack_a_block(const float* A, int64_t lda, bool transA, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                  float* out, float scale) {
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - ir);
    float* dst = out + ir * kc;
    if (!transA) {
      const float* src[MR];
      for (int64_t i = 0; i < MR; ++i) src[i] = A + (i0 + ir + std::min<int64_t>(i, rows - 1)) * lda + p0;
      if (rows == MR && scale == 1.f) {
        for (int64_t p = 0; p < kc; ++p) {
          float* d = dst + p * MR;
          d[0] = src[0][p]; d[1] = src[1][p]; d[2] = src[2][p];
          d[3] = src[3][p]; d[4] = src[4][p]; d[5] = src[5][p];
        }
      } else {
        for (int64_t p = 0; p < kc; ++p) {
          float* d = dst + p * MR;
          for (int64_t i = 0; i < MR; ++i) d[i] = i < rows ? scale * src[i][p] : 0.f;
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = A + (p0 + p) * lda + i0 + ir;
        float* d = dst + p * MR;
        int64_t i = 0;
        for (; i < rows; ++i) d[i] = scale * src[i];
        for (; i < MR; ++i) d[i] = 0.f;
      }
    }
  }
}

#ifdef NXRT_GEMM_X86
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
#endif

// op(B)[p0:p0+kc, j0:j0+nc] as ceil(nc/NR) panels of kc x NR (column index fastest), zero-padded.
void pack_b_block(const float* B, int64_t ldb, bool transB, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                  float* out) {
  if (!transB) {
    const int64_t full = nc / NR;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = B + (p0 + p) * ldb + j0;
      float* dst = out + p * NR;
      for (int64_t q = 0; q < full; ++q) std::memcpy(dst + q * NR * kc, src + q * NR, sizeof(float) * NR);
    }
  }
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - jr);
    float* dst = out + jr * kc;
    if (!transB) {
      const float* src = B + p0 * ldb + j0 + jr;
      if (cols == NR) {
        // Whole panels: rows outer so B is read sequentially (handled below for all full panels at once).
        continue;
      } else {
        for (int64_t p = 0; p < kc; ++p) {
          float* d = dst + p * NR;
          const float* s = src + p * ldb;
          int64_t j = 0;
          for (; j < cols; ++j) d[j] = s[j];
          for (; j < NR; ++j) d[j] = 0.f;
        }
      }
    } else {
      // B stored N x K: column j of op(B) is row j of B (contiguous in p).
#ifdef NXRT_GEMM_X86
      if (cols == NR && use_avx2()) {
        pack_b_trans_panel_avx2(B + (j0 + jr) * ldb + p0, ldb, kc, dst);
        continue;
      }
#endif
      for (int64_t j = 0; j < NR; ++j) {
        if (j < cols) {
          const float* s = B + (j0 + jr + j) * ldb + p0;
          for (int64_t p = 0; p < kc; ++p) dst[p * NR + j] = s[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) dst[p * NR + j] = 0.f;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Epilogue.

inline float act_scalar(GemmActivation act, float v, float lo, float hi) {
  switch (act) {
    case GemmActivation::kNone: return v;
    case GemmActivation::kRelu: return v < 0.f ? 0.f : v;
    case GemmActivation::kClip: return std::min(std::max(v, lo), hi);
    case GemmActivation::kSigmoid: return 1.f / (1.f + std::exp(-v));
    case GemmActivation::kTanh: return std::tanh(v);
    case GemmActivation::kGelu: return 0.5f * v * (1.f + std::erf(v * 0.70710678118654752f));
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// GEMV paths (M == 1).

// y[j0:j1] = alpha * a . op(B)[:, j] + beta * y, B raw.
template <bool kAvx>
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
  (void)kAvx;
}

void gemv_raw_generic(bool transB, int64_t j0, int64_t j1, int64_t K, float alpha, const float* a, const float* B,
                      int64_t ldb, float beta, float* y) {
  gemv_raw_cols<false>(transB, j0, j1, K, alpha, a, B, ldb, beta, y);
}

// y over panels [q0, q1) of a PackedB: K blocks outer so each block's slice of panels is one sequential stream.
void gemv_packed_generic(int64_t q0, int64_t q1, int64_t N, int64_t K, float alpha, const float* a,
                         const float* packed, int64_t n_padded, float beta, float* y) {
  constexpr int64_t kSub = 64;  // panels per pass: 1024 accumulators
  alignas(64) float acc[kSub * NR];
  for (int64_t s0 = q0; s0 < q1; s0 += kSub) {
    const int64_t s1 = std::min(q1, s0 + kSub);
    std::fill(acc, acc + (s1 - s0) * NR, 0.f);
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
      const int64_t kc = std::min(KC, K - p0);
      const float* ap = a + p0;
      for (int64_t q = s0; q < s1; ++q) {
        const float* bp = packed + p0 * n_padded + q * NR * kc;
        float* ac = acc + (q - s0) * NR;
        for (int64_t p = 0; p < kc; ++p) {
          const float av = ap[p];
#pragma GCC unroll 16
          for (int j = 0; j < NR; ++j) ac[j] += av * bp[p * NR + j];
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

#ifdef NXRT_GEMM_X86
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
    if (j < j1) gemv_raw_cols<true>(true, j, j1, K, alpha, a, B, ldb, beta, y);
    return;
  }
  gemv_raw_cols<true>(false, j0, j1, K, alpha, a, B, ldb, beta, y);
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
      for (int64_t q = s0; q < s1; ++q) {
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
#endif

int threads_for(ep::ThreadPool* pool, int64_t macs) {
  if (!pool || pool->num_threads() <= 1 || ep::ThreadPool::in_parallel_region() || macs < kParallelMacs) return 1;
  return pool->num_threads();
}

void run_tasks(ep::ThreadPool* pool, int threads, int64_t n, ep::FunctionRef<void(int64_t, int64_t)> fn) {
  if (threads > 1 && n > 1) {
    pool->parallel_for(n, 1, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

// y[1, N] = alpha * a[K] * op(B) + beta * y; B raw or packed.
void gemv(int64_t N, int64_t K, float alpha, const float* a, bool transB, const float* B, int64_t ldb,
          const PackedB* packed, float beta, float* y, ep::ThreadPool* pool) {
  const int threads = threads_for(pool, N * K * 4);  // memory-bound: worth threads at smaller sizes
  const bool avx = use_avx2();
  if (packed) {
    const int64_t panels = packed->n_padded / NR;
    const int64_t per = std::max<int64_t>(1, (panels + threads * 4 - 1) / (threads * 4));
    run_tasks(pool, threads, (panels + per - 1) / per, [&](int64_t t0, int64_t t1) {
      const int64_t q0 = t0 * per, q1 = std::min(panels, t1 * per);
#ifdef NXRT_GEMM_X86
      if (avx) return gemv_packed_avx2(q0, q1, N, K, alpha, a, packed->data.data(), packed->n_padded, beta, y);
#endif
      gemv_packed_generic(q0, q1, N, K, alpha, a, packed->data.data(), packed->n_padded, beta, y);
    });
    return;
  }
  const int64_t per = std::max<int64_t>(transB ? 4 : 64, (N + threads * 4 - 1) / (threads * 4) / 16 * 16);
  run_tasks(pool, threads, (N + per - 1) / per, [&](int64_t t0, int64_t t1) {
    const int64_t j0 = t0 * per, j1 = std::min(N, t1 * per);
#ifdef NXRT_GEMM_X86
    if (avx) return gemv_raw_avx2(transB, j0, j1, K, alpha, a, B, ldb, beta, y);
#endif
    gemv_raw_generic(transB, j0, j1, K, alpha, a, B, ldb, beta, y);
  });
}

// ---------------------------------------------------------------------------------------------
// The blocked engine.

struct ASrc {
  const float* A = nullptr;
  int64_t lda = 0;
  bool trans = false;
  const float* packed = nullptr;  // PackedAF32 layout
  int64_t m_padded = 0;
};

struct BSrc {
  const float* B = nullptr;
  int64_t ldb = 0;
  bool trans = false;
  const PackedB* packed = nullptr;
  const GemmBPacker* gen = nullptr;  // B produced per block by the caller
};

void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.f) {
      std::fill(c, c + N, 0.f);
    } else if (beta != 1.f) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

#ifdef NXRT_GEMM_X86
bool epilogue_tile_avx2(const GemmEpilogue& ep, int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* c,
                        int64_t ldc);
#endif

void engine(int64_t M, int64_t N, int64_t K, float alpha, const ASrc& as, const BSrc& bs, float beta, float* C,
            int64_t ldc, const GemmEpilogue* ep, ep::ThreadPool* pool) {
  if (M <= 0 || N <= 0) return;
  if (ep && ep->empty()) ep = nullptr;
  if (K <= 0 || alpha == 0.f) {
    scale_c(M, N, beta, C, ldc);
    if (ep) gemm_apply_epilogue(*ep, 0, 0, M, N, C, ldc);
    return;
  }
  // GEMV: one row of op(A) (not prepacked).
  if (M == 1 && !as.packed) {
    std::vector<float> tmp;
    const float* a = as.A;
    if (as.trans && as.lda != 1) {
      tmp.resize(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) tmp[k] = as.A[k * as.lda];
      a = tmp.data();
    }
    gemv(N, K, alpha, a, bs.trans, bs.B, bs.ldb, bs.packed, beta, C, pool);
    if (ep) gemm_apply_epilogue(*ep, 0, 0, 1, N, C, ldc);
    return;
  }
  // N == 1 with raw operands: y[1, M] = b^T op(A)^T.
  if (N == 1 && !as.packed && !bs.packed) {
    std::vector<float> b(static_cast<size_t>(K)), y(static_cast<size_t>(M));
    for (int64_t k = 0; k < K; ++k) b[k] = bs.trans ? bs.B[k] : bs.B[k * bs.ldb];
    if (beta != 0.f)
      for (int64_t i = 0; i < M; ++i) y[i] = C[i * ldc];
    gemv(M, K, alpha, b.data(), !as.trans, as.A, as.lda, nullptr, beta, y.data(), pool);
    for (int64_t i = 0; i < M; ++i) C[i * ldc] = y[i];
    if (ep) gemm_apply_epilogue(*ep, 0, 0, M, 1, C, ldc);
    return;
  }

  const MicroKernel kern = pick_kernel();
  [[maybe_unused]] const bool avx_epilogue = ep && use_avx2();
  const int threads = threads_for(pool, M * N * K);
  // Column blocks of at most NC, evened out to whole panels (block jb covers panels
  // [jb * panels / n_blocks, (jb + 1) * panels / n_blocks)); row chunks so every thread has work.
  const int64_t panels = (N + NR - 1) / NR;
  int64_t n_blocks = (N + NC - 1) / NC;
  // With A prepacked (conv weights) and B packed per task (a raw image for 1x1 convs, im2col panels
  // for the implicit GEMM), row chunks would each pack the same B block again, and B's packing costs
  // about as much per column as a 16-row slice of the product. Under 512 rows, split the columns over
  // the threads instead (one or two blocks each, equal to a panel). With more rows the duplicate
  // packing is cheap next to the product. Measured at 2 threads: ResNet-50's stride-2 3x3 convs (128,
  // 256 rows) 1.4 ms split on N vs 2.1 / 1.8 on rows, 1024 rows 1.24 ms on rows vs 1.3-1.5 on N;
  // DenseNet's 1x1 convs (128 rows, 784 columns, K 352-480) took 4 row chunks that each packed all of B
  // and split 72 / 56 rows between the threads.
  // Also when all of A is at most 1 MB (one L2): every column block then reads it from cache anyway.
  // ResNet-50's 1x1/2 256->512 at 2 threads: 1.32 -> 1.07-1.12 ms on columns.
  const bool split_n = threads > 1 && as.packed && !bs.packed && (M < 512 || M * K <= (int64_t(1) << 18)) &&
                       panels >= 2 * threads;
  if (split_n) {
    const int64_t per_thread = (panels + threads - 1) / threads;
    const int64_t sub = (per_thread * NR + NC - 1) / NC;  // blocks per thread, each <= NC columns
    n_blocks = std::min<int64_t>(panels, static_cast<int64_t>(threads) * sub);
  } else {
    n_blocks = std::min<int64_t>(panels, n_blocks);
  }
  const int64_t nc_blk = (panels + n_blocks - 1) / n_blocks * NR;  // the widest block
  auto block_cols = [&](int64_t jb, int64_t* j0, int64_t* nc) {
    *j0 = jb * panels / n_blocks * NR;
    *nc = std::min(N, (jb + 1) * panels / n_blocks * NR) - *j0;
  };
  const int64_t m_panels = (M + MR - 1) / MR;
  int64_t m_chunks = 1;
  if (threads > 1 && !split_n) {
    const int64_t want = 2 * threads;
    m_chunks = std::min(m_panels, (want + n_blocks - 1) / n_blocks);
    // Large M: chunks of whole MC blocks keep the A-block reuse.
    m_chunks = std::max<int64_t>(m_chunks, 1);
  }
  const int64_t chunk_rows = ((m_panels + m_chunks - 1) / m_chunks) * MR;
  m_chunks = (M + chunk_rows - 1) / chunk_rows;
  const int64_t tasks = n_blocks * m_chunks;
  const int64_t a_stride_k = as.packed ? as.m_padded : 0;
  const float* bpacked = bs.packed ? bs.packed->data.data() : nullptr;
  const int64_t n_padded = bs.packed ? bs.packed->n_padded : 0;

  auto task = [&](int64_t t0, int64_t t1) {
    thread_local MappedScratch a_scr, b_scr;
    float* abuf = as.packed ? nullptr : a_scr.get(static_cast<size_t>(MC * KC));
    float* bbuf = bpacked ? nullptr : b_scr.get(static_cast<size_t>(nc_blk * KC));
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t jb = t / m_chunks, mb = t % m_chunks;
      int64_t j0, nc;
      block_cols(jb, &j0, &nc);
      const int64_t r0 = mb * chunk_rows, r1 = std::min(M, r0 + chunk_rows);
      for (int64_t p0 = 0; p0 < K; p0 += KC) {
        const int64_t kc = std::min(KC, K - p0);
        const bool last_k = p0 + kc >= K;
        const float beta_k = p0 == 0 ? beta : 1.f;
        const float* bblk;
        if (bpacked) {
          bblk = bpacked + p0 * n_padded + j0 * kc;
        } else if (bs.gen) {
          (*bs.gen)(p0, kc, j0, nc, bbuf);
          bblk = bbuf;
        } else {
          pack_b_block(bs.B, bs.ldb, bs.trans, p0, kc, j0, nc, bbuf);
          bblk = bbuf;
        }
        for (int64_t i0 = r0; i0 < r1; i0 += MC) {
          const int64_t mc = std::min(MC, r1 - i0);
          const float* ablk;
          if (as.packed) {
            ablk = as.packed + p0 * a_stride_k + i0 * kc;
          } else {
            pack_a_block(as.A, as.lda, as.trans, i0, mc, p0, kc, abuf, 1.f);
            ablk = abuf;
          }
          // A micro-panel (L1) outer, B micro-panels (the L2-resident block) inner: C is walked along
          // its rows, which keeps small-K problems (1x1 convs) from being bound by C traffic.
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
            const float* ap = ablk + ir * kc;
            float* crow = C + (i0 + ir) * ldc + j0;
            for (int64_t jr = 0; jr < nc; jr += NR) {
              const int nr = static_cast<int>(std::min<int64_t>(NR, nc - jr));
              kern(kc, ap, bblk + jr * kc, crow + jr, ldc, mr, nr, alpha, beta_k);
              if (last_k && ep) {
#ifdef NXRT_GEMM_X86
                if (avx_epilogue && epilogue_tile_avx2(*ep, i0 + ir, j0 + jr, mr, nr, crow + jr, ldc)) continue;
#endif
                gemm_apply_epilogue(*ep, i0 + ir, j0 + jr, mr, nr, crow + jr, ldc);
              }
            }
          }
        }
      }
    }
  };
  run_tasks(pool, threads, tasks, task);
}

#ifdef NXRT_GEMM_X86
// The epilogue on one full-width tile (16 columns) with AVX2: bias, residual and Relu/Clip/none in
// registers, one pass over the tile while it is in L1. Other activations and edge tiles take the
// portable loop.
__attribute__((target("avx2,fma"))) bool epilogue_tile_avx2(const GemmEpilogue& ep, int64_t i0, int64_t j0,
                                                            int64_t rows, int64_t cols, float* c, int64_t ldc) {
  if (cols != NR || !(ep.act == GemmActivation::kNone || ep.act == GemmActivation::kRelu ||
                      ep.act == GemmActivation::kClip)) {
    return false;
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    __m256 v0 = _mm256_loadu_ps(cr), v1 = _mm256_loadu_ps(cr + 8);
    epilogue_row_avx2(ep, i0 + r, j0, v0, v1);
    _mm256_storeu_ps(cr, v0);
    _mm256_storeu_ps(cr + 8, v1);
  }
  return true;
}
#endif

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points.

void gemm_apply_epilogue(const GemmEpilogue& ep, int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* c,
                         int64_t ldc) {
  const bool has_bias = ep.bias != nullptr && ep.bias_kind != GemmBias::kNone;
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    if (has_bias) {
      if (ep.bias_kind == GemmBias::kPerColumn) {
        const float* b = ep.bias + j0;
        for (int64_t j = 0; j < cols; ++j) cr[j] += b[j];
      } else {
        const float b = ep.bias[i0 + r];
        for (int64_t j = 0; j < cols; ++j) cr[j] += b;
      }
    }
    if (ep.residual) {
      const float* res = ep.residual + (i0 + r) * ep.ldr + j0;
      for (int64_t j = 0; j < cols; ++j) cr[j] += res[j];
    }
    switch (ep.act) {
      case GemmActivation::kNone:
        break;
      case GemmActivation::kRelu:
        for (int64_t j = 0; j < cols; ++j) cr[j] = cr[j] < 0.f ? 0.f : cr[j];  // NaN passes, as in Relu
        break;
      case GemmActivation::kClip: {
        const float lo = ep.clip_min, hi = ep.clip_max;
        for (int64_t j = 0; j < cols; ++j) cr[j] = std::min(std::max(cr[j], lo), hi);
        break;
      }
      default:
        for (int64_t j = 0; j < cols; ++j) cr[j] = act_scalar(ep.act, cr[j], ep.clip_min, ep.clip_max);
        break;
    }
  }
}

bool gemm_using_avx2() { return use_avx2(); }
void gemm_set_allow_avx2(bool allow) { g_allow_avx2 = allow; }

PackedB pack_b_f32(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb) {
  PackedB pb;
  pb.K = K;
  pb.N = N;
  pb.n_padded = (N + NR - 1) / NR * NR;
  pb.data.assign(static_cast<size_t>(std::max<int64_t>(1, pb.n_padded * K)), 0.f);
  for (int64_t p0 = 0; p0 < K; p0 += KC) {
    const int64_t kc = std::min(KC, K - p0);
    pack_b_block(B, ldb, transB, p0, kc, 0, N, pb.data.data() + p0 * pb.n_padded);
  }
  return pb;
}

PackedAF32 pack_a_f32(bool transA, int64_t M, int64_t K, const float* A, int64_t lda, float scale) {
  PackedAF32 pa;
  pa.M = M;
  pa.K = K;
  pa.m_padded = (M + MR - 1) / MR * MR;
  pa.data.assign(static_cast<size_t>(std::max<int64_t>(1, pa.m_padded * K)), 0.f);
  for (int64_t p0 = 0; p0 < K; p0 += KC) {
    const int64_t kc = std::min(KC, K - p0);
    if (M > 0) pack_a_block(A, lda, transA, 0, M, p0, kc, pa.data.data() + p0 * pa.m_padded, scale);
  }
  return pa;
}

void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
              const GemmEpilogue* epilogue) {
  ASrc as;
  as.A = A;
  as.lda = lda;
  as.trans = transA;
  BSrc bs;
  bs.B = B;
  bs.ldb = ldb;
  bs.trans = transB;
  engine(M, N, K, alpha, as, bs, beta, C, ldc, epilogue, pool);
}

void gemm_f32_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                     float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue) {
  ASrc as;
  as.A = A;
  as.lda = lda;
  as.trans = transA;
  BSrc bs;
  bs.packed = &B;
  engine(M, B.N, B.K, alpha, as, bs, beta, C, ldc, epilogue, pool);
}

void gemm_f32_packed_a(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, bool transB,
                       const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
                       const GemmEpilogue* epilogue) {
  ASrc as;
  as.packed = a_packed;
  as.m_padded = (M + MR - 1) / MR * MR;
  BSrc bs;
  bs.B = B;
  bs.ldb = ldb;
  bs.trans = transB;
  engine(M, N, K, alpha, as, bs, beta, C, ldc, epilogue, pool);
}

void gemm_f32_packed_a_gen_b(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, GemmBPacker pack_b,
                             float beta, float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue) {
  ASrc as;
  as.packed = a_packed;
  as.m_padded = (M + MR - 1) / MR * MR;
  BSrc bs;
  bs.gen = &pack_b;
  engine(M, N, K, alpha, as, bs, beta, C, ldc, epilogue, pool);
}

void gemm_f32_strips(int64_t M, int64_t K, const float* a_packed, const float* brow, const int64_t* boff,
                     int64_t ncols, float* C, int64_t ldc, int64_t j0, const GemmEpilogue* ep) {
  if (M <= 0 || ncols <= 0) return;
  if (ep && ep->empty()) ep = nullptr;
  const int64_t m_padded = (M + MR - 1) / MR * MR;
#ifdef NXRT_GEMM_X86
  const bool avx = use_avx2();
#endif
  // A panel outer, strips inner: the stores run along the panel's 6 output rows (prefetchable streams)
  // rather than down all M rows of one strip.
  for (int64_t i0 = 0; i0 < M; i0 += MR) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, M - i0));
    for (int64_t js = 0; js < ncols; js += NR) {
      const int nrr = static_cast<int>(std::min<int64_t>(NR, ncols - js));
      float* c = C + i0 * ldc + j0 + js;
      bool ep_done = false;
      for (int64_t p0 = 0; p0 < K; p0 += KC) {
        const int64_t kc = std::min(KC, K - p0);
        const float* ap = a_packed + p0 * m_padded + i0 * kc;
        const float beta = p0 == 0 ? 0.f : 1.f;
#ifdef NXRT_GEMM_X86
        if (avx) {
          // The epilogue rides on the store when this is the only K block.
          ep_done = micro_rows_avx2(kc, ap, brow + js, boff + p0, c, ldc, mr, nrr, 1.f, beta,
                                    K <= KC ? ep : nullptr, i0, j0 + js);
          continue;
        }
#endif
        micro_rows_generic(kc, ap, brow + js, boff + p0, c, ldc, mr, nrr, 1.f, beta);
      }
      if (ep && !ep_done) {
#ifdef NXRT_GEMM_X86
        if (avx && epilogue_tile_avx2(*ep, i0, j0 + js, mr, nrr, c, ldc)) continue;
#endif
        gemm_apply_epilogue(*ep, i0, j0 + js, mr, nrr, c, ldc);
      }
    }
  }
}

void gemm_f32_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                        const GemmEpilogue* epilogue) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const float a = transA ? A[k * lda + i] : A[i * lda + k];
        const float b = transB ? B[j * ldb + k] : B[k * ldb + j];
        s += static_cast<double>(a) * static_cast<double>(b);
      }
      float v = static_cast<float>(alpha * s);
      C[i * ldc + j] = beta == 0.0f ? v : v + beta * C[i * ldc + j];
    }
  }
  if (epilogue && !epilogue->empty()) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        float& v = C[i * ldc + j];
        if (epilogue->bias && epilogue->bias_kind == GemmBias::kPerColumn) v += epilogue->bias[j];
        if (epilogue->bias && epilogue->bias_kind == GemmBias::kPerRow) v += epilogue->bias[i];
        if (epilogue->residual) v += epilogue->residual[i * epilogue->ldr + j];
        v = act_scalar(epilogue->act, v, epilogue->clip_min, epilogue->clip_max);
      }
    }
  }
}

}  // namespace nxrt::ops
