// f32_gemm_6x64__avx512: the float engine's kernels (gemm_kernels.h) for AVX-512 (F/VL/BW/DQ), built with
// target attributes so the portable build runs them only where the CPU has them (f32_gemm_kernels).
//
// The packed layouts stay the engine's (A panels of 6 rows, B panels of 16 columns): one zmm register is
// one B panel row, and a tile covers up to four adjacent panels (6 x 64, 24 accumulators). Six
// accumulators (one panel) would leave the two FMA ports waiting on the 4-cycle FMA latency; 24 keep
// them busy with 4 B loads and 6 broadcasts per 24 FMAs (a 6 x 32 tile needed 8 loads per 12). Zen 5,
// 1 thread, old and new binaries alternated (median new/old): a 1024^3 GEMM 0.985, ResNet-50's 1x1
// 64->256 @56x56 0.926, the stems 0.92-0.96 (against a 12 x 32 two-panel tile). Edge tiles use masked
// loads and stores, so the fused epilogue (bias, residual, Relu/Clip/LeakyRelu/HardSigmoid/HardSwish) runs
// in registers on every tile. tile_a_rows reads a raw A's 6 rows in place (ARows) instead of a packed
// panel (APanel): the same k loop, so the same bits, without the engine's A packing.
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include <algorithm>
#include <type_traits>

#include "ops/gemm/gemm_kernels.h"
#include "ops/stream_prefetch.h"

namespace nxrt::ops {

using namespace gemm_detail;

#define NXRT_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))

namespace {

constexpr int kPanels = 4;  // B panels per tile

// Columns [16 * q, 16 * q + 16) of an nr-wide row that exist.
inline __mmask16 col_mask(int64_t nr, int q) {
  const int64_t n = std::clamp<int64_t>(nr - 16 * q, 0, 16);
  return static_cast<__mmask16>((1u << n) - 1u);
}

// The activations applied in registers; the others (Sigmoid, Tanh, Gelu) go to the portable loop.
inline bool act_in_registers(Activation a) {
  return a == Activation::kNone || a == Activation::kRelu || a == Activation::kClip ||
         a == Activation::kLeakyRelu || a == Activation::kHardSigmoid || a == Activation::kHardSwish;
}

inline bool epilogue_in_registers(const GemmEpilogue& ep) { return act_in_registers(ep.act); }

// act(v) as activation_of<> defines it, NaN included: max/min return their second operand when either
// is NaN, so Relu and Clip pass a NaN v, and HardSigmoid's min(x, 1) turns a NaN into 1 as std::min(1, x).
NXRT_AVX512 inline __m512 activate(const GemmEpilogue& ep, __m512 v) {
  const __m512 zero = _mm512_setzero_ps();
  switch (ep.act) {
    case Activation::kRelu:
      return _mm512_max_ps(zero, v);
    case Activation::kClip:
      return _mm512_min_ps(_mm512_set1_ps(ep.act_b), _mm512_max_ps(_mm512_set1_ps(ep.act_a), v));
    case Activation::kLeakyRelu: {
      const __mmask16 neg = _mm512_cmp_ps_mask(v, zero, _CMP_NGE_UQ);  // !(v >= 0): negative or NaN
      return _mm512_mask_mul_ps(v, neg, v, _mm512_set1_ps(ep.act_a));
    }
    case Activation::kHardSigmoid: {
      const __m512 x = _mm512_add_ps(_mm512_mul_ps(_mm512_set1_ps(ep.act_a), v), _mm512_set1_ps(ep.act_b));
      return _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(1.f)), zero);
    }
    case Activation::kHardSwish: {
      const __m512 x = _mm512_add_ps(_mm512_div_ps(v, _mm512_set1_ps(6.f)), _mm512_set1_ps(0.5f));
      return _mm512_mul_ps(v, _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(1.f)), zero));
    }
    default:
      return v;
  }
}

// Bias, residual and activation on 16 columns (mask m) of row i of C starting at column j.
NXRT_AVX512 inline __m512 epilogue_vec(const GemmEpilogue& ep, int64_t i, int64_t j, __mmask16 m, __m512 v) {
  if (ep.bias != nullptr && ep.bias_kind == GemmBias::kPerColumn) {
    v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, ep.bias + j));
  } else if (ep.bias != nullptr && ep.bias_kind == GemmBias::kPerRow) {
    v = _mm512_add_ps(v, _mm512_set1_ps(ep.bias[i]));
  }
  if (ep.residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, ep.residual + i * ep.ldr + j));
  return activate(ep, v);
}

// Where a tile reads A: a packed 6-row micro-panel (kc x 6, row index fastest), or A's rows in place.
// at(r) is row r's value at the current k, at_next(r) the one at k + 1; next2() / next() step k by 2 / 1.
struct APanel {
  const float* a;
  float at(int r) const { return a[r]; }
  float at_next(int r) const { return a[MR + r]; }
  void next() { a += MR; }
  void next2() { a += 2 * MR; }
  const float* prefetch_base() const { return a; }
};
// Rows read in place (row r at row[r], k along it): a raw, non-transposed A needs no packing.
struct ARows {
  const float* row[MR];
  int64_t k = 0;
  float at(int r) const { return row[r][k]; }
  float at_next(int r) const { return row[r][k + 1]; }
  void next() { ++k; }
  void next2() { k += 2; }
  const float* prefetch_base() const { return nullptr; }
};

// Every 4th k step of a tile prefetches the next 64-byte line of `at` into L2 (the engine's next packed-B
// block: tile_a_rows' pf_b): spread over the k loop, a line every ~50 cycles, so the misses to memory
// never queue up in front of the FMAs, which a burst of them at the tile's start did.
struct LineStream {
  const char* at;
  void maybe(int64_t k) {
    if ((k & 3) == 0) {
      _mm_prefetch(at, _MM_HINT_T1);
      at += 64;
    }
  }
};
struct NoStream {
  void maybe(int64_t) {}
};

// The accumulators of rows [0, R) of an MR x (16 * NP) tile (R < MR: the others are left unset). `b_row(k)`
// is B's row k (16 * NP floats, panel q at b_row(k) + q * pstride), of which lanes outside bm[q] are not
// read (zero).
// With pf > 0 each k step also prefetches A at a + pf (floats, packed A only); tile_np's pf = MR * kc is
// the same k of the next 6-row micro-panel.
template <int NP, int R = MR, typename ASrc, typename BRow, typename Stream = NoStream>
NXRT_AVX512 inline __attribute__((always_inline)) void accumulate(int64_t kc, ASrc a, BRow b_row,
                                                                  int64_t pstride, const __mmask16 (&bm)[NP],
                                                                  __m512 (&acc)[MR][NP], int64_t pf = 0,
                                                                  Stream stream = {}) {
  if constexpr (NP == 1) {
    // One panel: 6 accumulators are too few chains for two FMA ports at 4 cycles latency (Winograd's
    // products on 13x13 planes are all one-panel tiles). Even and odd k go to separate sets, added last.
    __m512 even[R], odd[R];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) even[r] = odd[r] = _mm512_setzero_ps();
    int64_t k = 0;
#pragma GCC unroll 1
    for (; k + 2 <= kc; k += 2) {
      if (pf) _mm_prefetch(reinterpret_cast<const char*>(a.prefetch_base() + pf), _MM_HINT_T0);
      const __m512 b0 = _mm512_maskz_loadu_ps(bm[0], b_row(k)), b1 = _mm512_maskz_loadu_ps(bm[0], b_row(k + 1));
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        even[r] = _mm512_fmadd_ps(_mm512_set1_ps(a.at(r)), b0, even[r]);
        odd[r] = _mm512_fmadd_ps(_mm512_set1_ps(a.at_next(r)), b1, odd[r]);
      }
      a.next2();
    }
    if (k < kc) {
      const __m512 b0 = _mm512_maskz_loadu_ps(bm[0], b_row(k));
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) even[r] = _mm512_fmadd_ps(_mm512_set1_ps(a.at(r)), b0, even[r]);
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) acc[r][0] = _mm512_add_ps(even[r], odd[r]);
    return;
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_setzero_ps();
#pragma GCC unroll 1
  for (int64_t k = 0; k < kc; ++k) {
    if (pf) _mm_prefetch(reinterpret_cast<const char*>(a.prefetch_base() + pf), _MM_HINT_T0);
    stream.maybe(k);
    const float* bp = b_row(k);
    __m512 b[NP];
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) b[q] = _mm512_maskz_loadu_ps(bm[q], bp + q * pstride);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a.at(r));
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_fmadd_ps(av, b[q], acc[r][q]);
    }
    a.next();
  }
}

// accumulate for the rows an mr-row tile stores: mr rounded up to 2, 4 or 6. Rows past mr (a packed
// panel's zero padding, ARows' repeats of the last row) are never stored, so the last panel of an M that
// is not a multiple of 6 does a third or two thirds of a full tile's multiply-adds (M = 128: 21 panels of
// 6 and one of 2; Zen 5, 1 thread, BM_GemmTransformer 128 x 768 x 768 0.97 of the time, the BERT-shaped
// encoder 0.984, alternated processes).
template <int NP, typename ASrc, typename BRow, typename Stream = NoStream>
NXRT_AVX512 inline __attribute__((always_inline)) void accumulate_rows(int mr, int64_t kc, ASrc a, BRow b_row,
                                                                       int64_t pstride, const __mmask16 (&bm)[NP],
                                                                       __m512 (&acc)[MR][NP], int64_t pf = 0,
                                                                       Stream stream = {}) {
  if (mr <= 2) return accumulate<NP, 2>(kc, a, b_row, pstride, bm, acc, pf, stream);
  if (mr <= 4) return accumulate<NP, 4>(kc, a, b_row, pstride, bm, acc, pf, stream);
  accumulate<NP, MR>(kc, a, b_row, pstride, bm, acc, pf, stream);
}

// C[mr x nr] = alpha * acc + beta * C (beta 0: C not read), or with `ep` (alpha 1, beta 0) the epilogue
// for C(i0, j0) applied before the store.
template <int NP>
NXRT_AVX512 inline __attribute__((always_inline)) void store_tile(__m512 (&acc)[MR][NP], float* c, int64_t ldc,
                                                                  int mr, int nr, float alpha, float beta,
                                                                  const GemmEpilogue* ep, int64_t i0, int64_t j0) {
  __mmask16 m[NP];
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) m[q] = col_mask(nr, q);
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    if (r >= mr) break;
    float* cr = c + r * ldc;
#pragma GCC unroll 4
    for (int q = 0; q < NP; ++q) {
      __m512 v = acc[r][q];
      if (ep) {
        v = epilogue_vec(*ep, i0 + r, j0 + 16 * q, m[q], v);
      } else if (beta == 0.f) {
        v = _mm512_mul_ps(v, va);
      } else if (beta == 1.f) {
        v = _mm512_fmadd_ps(v, va, _mm512_maskz_loadu_ps(m[q], cr + 16 * q));
      } else {
        v = _mm512_fmadd_ps(v, va, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m[q], cr + 16 * q)));
      }
      _mm512_mask_storeu_ps(cr + 16 * q, m[q], v);
    }
  }
}

// The residual rows the epilogue of an mr x (16 * NP) tile at C(i0, j0) will read: a 1x1 conv's
// residual was written several convs earlier and is no longer in L1/L2, and the epilogue's loads come
// after the k loop, where nothing else hides their latency (ResNet-50's expand convs, K 64-512).
template <int NP>
inline void prefetch_residual(const GemmEpilogue& ep, int mr, int64_t i0, int64_t j0) {
  for (int r = 0; r < mr; ++r) {
    const float* row = ep.residual + (i0 + r) * ep.ldr + j0;
    _mm_prefetch(reinterpret_cast<const char*>(row), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(row + 16 * NP - 1), _MM_HINT_T0);
  }
}

// PF: also prefetch the next A micro-panel (a + MR * kc) over the k loop (tile_prefetch_a).
// A: a packed panel (APanel) or rows in place (ARows); `stream`: what else the k loop prefetches.
template <int NP, bool PF = false, typename ASrc = APanel, typename Stream = NoStream>
NXRT_AVX512 void tile_np(int64_t kc, ASrc a, const float* b, float* c, int64_t ldc, int mr, int nr, float alpha,
                         float beta, const GemmEpilogue* ep = nullptr, int64_t i0 = 0, int64_t j0 = 0,
                         Stream stream = {}) {
  for (int r = 0; r < mr; ++r) {
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(c + r * ldc + 16 * NP - 1), _MM_HINT_T0);
  }
  if (ep && ep->residual) prefetch_residual<NP>(*ep, mr, i0, j0);
  __m512 acc[MR][NP];
  __mmask16 all[NP];  // packed panels are padded: whole rows
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) all[q] = 0xFFFF;
  accumulate_rows<NP>(mr, kc, a, [b](int64_t k) { return b + k * NR; }, NR * kc, all, acc, PF ? MR * kc : 0, stream);
  store_tile<NP>(acc, c, ldc, mr, nr, alpha, beta, ep, i0, j0);
}

// f(std::integral_constant<int, NP>{}) for the NP = 1..4 16-column panels an nr-wide tile covers
// (nr <= 64): panel q exists only when nr > 16 * q. The one place the tile width becomes a template.
template <typename F>
NXRT_AVX512 inline __attribute__((always_inline)) decltype(auto) with_panels(int nr, F&& f) {
  if (nr > 3 * NR) return f(std::integral_constant<int, 4>{});
  if (nr > 2 * NR) return f(std::integral_constant<int, 3>{});
  if (nr > NR) return f(std::integral_constant<int, 2>{});
  return f(std::integral_constant<int, 1>{});
}

template <bool PF>
NXRT_AVX512 void tile_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                             float alpha, float beta) {
  with_panels(nr, [&](auto np) { tile_np<decltype(np)::value, PF>(kc, APanel{a}, b, c, ldc, mr, nr, alpha, beta); });
}

// The epilogue in the store saves the pass epilogue_tile makes over the tile afterwards.
template <bool PF>
NXRT_AVX512 bool tile_epilogue_avx512(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr,
                                      int nr, const GemmEpilogue& ep, int64_t i0, int64_t j0) {
  const GemmEpilogue* fused = epilogue_in_registers(ep) ? &ep : nullptr;
  with_panels(nr, [&](auto np) {
    tile_np<decltype(np)::value, PF>(kc, APanel{a}, b, c, ldc, mr, nr, 1.f, 0.f, fused, i0, j0);
  });
  return fused != nullptr;
}

template <int NP>
NXRT_AVX512 bool tile_rows_np(int64_t kc, const float* a, const float* brow, const int64_t* boff, float* c,
                              int64_t ldc, int mr, int nr, float alpha, float beta, const GemmEpilogue* ep, int64_t i0,
                              int64_t j0) {
  __m512 acc[MR][NP];
  __mmask16 bm[NP];  // rows read in place: only their nr columns
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) bm[q] = col_mask(nr, q);
  const bool fuse = ep && beta == 0.f && alpha == 1.f && epilogue_in_registers(*ep);
  if (fuse && ep->residual) prefetch_residual<NP>(*ep, mr, i0, j0);
  accumulate_rows<NP>(mr, kc, APanel{a}, [brow, boff](int64_t k) { return brow + boff[k]; }, NR, bm, acc);
  store_tile<NP>(acc, c, ldc, mr, nr, alpha, beta, fuse ? ep : nullptr, i0, j0);
  return fuse;
}

// B rows read in place: only the nr columns of each row are read (rows_exact).
NXRT_AVX512 bool tile_rows_avx512(int64_t kc, const float* a, const float* brow, const int64_t* boff, float* c,
                                  int64_t ldc, int mr, int nr, float alpha, float beta, const GemmEpilogue* ep,
                                  int64_t i0, int64_t j0) {
  return with_panels(nr, [&](auto np) {
    return tile_rows_np<decltype(np)::value>(kc, a, brow, boff, c, ldc, mr, nr, alpha, beta, ep, i0, j0);
  });
}

// The tile over packed B panels with A's rows read in place (tile_a_rows); rows past mr repeat the
// last one (their accumulators are not stored).
template <int NP>
NXRT_AVX512 bool tile_a_rows_np(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                                int mr, int nr, float alpha, float beta, const GemmEpilogue* ep, int64_t i0,
                                int64_t j0, const float* pf_b) {
  const GemmEpilogue* fused = ep && beta == 0.f && alpha == 1.f && epilogue_in_registers(*ep) ? ep : nullptr;
  ARows rows;
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) rows.row[r] = a + std::min(r, mr - 1) * lda;
  if (pf_b && NP > 1) {
    const LineStream next_b{reinterpret_cast<const char*>(pf_b)};
    tile_np<NP>(kc, rows, b, c, ldc, mr, nr, alpha, beta, fused, i0, j0, next_b);
  } else {
    tile_np<NP>(kc, rows, b, c, ldc, mr, nr, alpha, beta, fused, i0, j0);
  }
  return fused != nullptr;
}

NXRT_AVX512 bool tile_a_rows_avx512(int64_t kc, const float* a, int64_t lda, const float* b, float* c, int64_t ldc,
                                    int mr, int nr, float alpha, float beta, const GemmEpilogue* ep, int64_t i0,
                                    int64_t j0, const float* pf_b) {
  return with_panels(nr, [&](auto np) {
    return tile_a_rows_np<decltype(np)::value>(kc, a, lda, b, c, ldc, mr, nr, alpha, beta, ep, i0, j0, pf_b);
  });
}

// The epilogue on any tile (masked edges) for the activations act_in_registers takes.
NXRT_AVX512 bool epilogue_tile_avx512(const GemmEpilogue& ep, int64_t i0, int64_t j0, int64_t rows, int64_t cols,
                                      float* c, int64_t ldc) {
  if (!epilogue_in_registers(ep)) return false;
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    for (int64_t j = 0; j < cols; j += 16) {
      const __mmask16 m = col_mask(cols - j, 0);
      const __m512 v = epilogue_vec(ep, i0 + r, j0 + j, m, _mm512_maskz_loadu_ps(m, cr + j));
      _mm512_mask_storeu_ps(cr + j, m, v);
    }
  }
  return true;
}

NXRT_AVX512 void gemv_raw_avx512(bool transB, int64_t j0, int64_t j1, int64_t K, float alpha, const float* a,
                                 const float* B, int64_t ldb, float beta, float* y) {
  if (!transB) {
    gemv_raw_cols(false, j0, j1, K, alpha, a, B, ldb, beta, y);
    return;
  }
  // y[j] = a . B[j, :], four rows of B at a time; the K tail through a masked load.
  const int64_t k16 = K / 16 * 16;
  const __mmask16 tail = col_mask(K - k16, 0);
  int64_t j = j0;
  for (; j + 4 <= j1; j += 4) {
    const float* b0 = B + j * ldb;
    const float* b1 = b0 + ldb;
    const float* b2 = b1 + ldb;
    const float* b3 = b2 + ldb;
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (int64_t k = 0; k < k16; k += 16) {
      const __m512 av = _mm512_loadu_ps(a + k);
      s0 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b0 + k), s0);
      s1 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b1 + k), s1);
      s2 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b2 + k), s2);
      s3 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b3 + k), s3);
    }
    if (tail) {
      const __m512 av = _mm512_maskz_loadu_ps(tail, a + k16);
      s0 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b0 + k16), s0);
      s1 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b1 + k16), s1);
      s2 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b2 + k16), s2);
      s3 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b3 + k16), s3);
    }
    const float r[4] = {_mm512_reduce_add_ps(s0), _mm512_reduce_add_ps(s1), _mm512_reduce_add_ps(s2),
                        _mm512_reduce_add_ps(s3)};
    for (int t = 0; t < 4; ++t) y[j + t] = beta == 0.f ? alpha * r[t] : alpha * r[t] + beta * y[j + t];
  }
  if (j < j1) gemv_raw_cols(true, j, j1, K, alpha, a, B, ldb, beta, y);
}

// Panels [q0, q1) of a PackedB: one zmm per panel row; two accumulators per panel (even and odd k).
NXRT_AVX512 void gemv_packed_avx512(int64_t q0, int64_t q1, int64_t N, int64_t K, float alpha, const float* a,
                                    const float* packed, int64_t n_padded, float beta, float* y) {
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
        __m512 x0 = _mm512_setzero_ps(), x1 = _mm512_setzero_ps();
        int64_t p = 0;
        for (; p + 2 <= kc; p += 2) {
          x0 = _mm512_fmadd_ps(_mm512_set1_ps(ap[p]), _mm512_loadu_ps(bp), x0);
          x1 = _mm512_fmadd_ps(_mm512_set1_ps(ap[p + 1]), _mm512_loadu_ps(bp + NR), x1);
          bp += 2 * NR;
        }
        if (p < kc) {
          x0 = _mm512_fmadd_ps(_mm512_set1_ps(ap[p]), _mm512_loadu_ps(bp), x0);
          bp += NR;
        }
        float* ac = acc + (q - s0) * NR;
        const __m512 x = _mm512_add_ps(x0, x1);
        _mm512_store_ps(ac, p0 == 0 ? x : _mm512_add_ps(_mm512_load_ps(ac), x));
      }
    }
    const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
    for (int64_t q = s0; q < s1; ++q) {
      const int64_t jb = q * NR;
      const __mmask16 m = col_mask(N - jb, 0);
      __m512 v = _mm512_mul_ps(va, _mm512_load_ps(acc + (q - s0) * NR));
      if (beta != 0.f) v = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m, y + jb), v);
      _mm512_mask_storeu_ps(y + jb, m, v);
    }
  }
}

}  // namespace

const F32GemmKernels kF32Gemm6x64Avx512 = {
    "f32_gemm_6x64__avx512", ep::IsaTier::kAvx512, kPanels, true,    &tile_avx512<false>,       &tile_rows_avx512,
    &tile_epilogue_avx512<false>,
    &epilogue_tile_avx512,  &pack_b_trans_panel_avx2, &gemv_raw_avx512, &gemv_packed_avx512,
    &tile_avx512<true>,     &tile_epilogue_avx512<true>, &tile_a_rows_avx512,
};

}  // namespace nxrt::ops
#endif
