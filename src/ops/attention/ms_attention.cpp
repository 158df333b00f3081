// com.microsoft attention ops: GroupQueryAttention (LLM decoders), MultiHeadAttention and Attention
// (BERT/GPT-2 exports). Each op prepares float Q/K/V in [B, heads, seq, head_size] plus an additive
// bias, then runs the shared scaled-dot-product core (ops/attention/attention_util.h): attention_fast (GEMM,
// threads over batch x heads) or, with the kernel override reference=1, attention_reference (plain
// loops, double accumulation).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/stream_prefetch.h"
#include "ops/attention/attention_util.h"
#include "ops/common.h"
#include "ops/contrib/contrib_util.h"
#include "ops/gemm/gemm.h"
#include "ops/reduction/reduction_math.h"
#include "ops/simd_math.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nxrt::ops::contrib {

namespace {

const char* kMs = "com.microsoft";
constexpr float kInf = std::numeric_limits<float>::infinity();

bool is_attn_float(DataType t) { return t == DataType::kFloat || t == DataType::kFloat16 || t == DataType::kBFloat16; }

// Element i of a contiguous tensor, as a byte pointer (for the float conversions).
uint8_t* elem_at(Tensor& t, int64_t i) { return static_cast<uint8_t*>(t.raw_data()) + i * (dtype_bits(t.dtype()) / 8); }

// How far ahead of the rows in use the decode loops prefetch the cache rows: they come from memory
// (one pass per step), and the G heads' work on a block of 4 rows is short next to a memory round
// trip. In whole 4-row blocks, about 4 KB (4 blocks at D 64, 2 at D 128). Zen 5, Qwen2.5-0.5B shape
// at ~540 cached tokens, traced GroupQueryAttention time per step over alternated processes (AVX-512
// loops): 2 blocks ahead (the earlier figure) 0.96-1.14 ms, 4 KB 0.80-0.99, 4 KB with the value rows
// fetched during the score pass 0.74-0.97; 8 and 16 KB no better. Both loops also start each page of
// the key and value rows kPageAheadBytes early (prefetch_pages_ahead): decode steps alternating with
// and without in one process, 2 threads, +0.6% per step at prompt 512 and +1.5-1.9% at 2048.
constexpr int64_t kGqaPrefetchBytes = 4096;
constexpr int64_t gqa_prefetch_rows(int64_t D) { return (kGqaPrefetchBytes / (D * 4) + 3) / 4 * 4; }
template <int64_t D>
constexpr int64_t kGqaPrefetchRows = gqa_prefetch_rows(D);
// Cache elements per 64-byte line (float32 or float16 rows): the stride of the loops' line prefetches.
template <typename KV>
constexpr int64_t kKvLine = 64 / static_cast<int64_t>(sizeof(KV));

// Vector helpers for the single-token decode loops: AVX2 with runtime dispatch, scalar otherwise.
#if defined(__x86_64__) || defined(__i386__)
// Eight cache elements as floats: float32 rows as they are, float16 rows (a float16 KV cache) widened
// by vcvtph2ps (exact: every float16 is a float).
__attribute__((target("avx2,fma,f16c"))) inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
__attribute__((target("avx2,fma,f16c"))) inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline float widen(float x) { return x; }
inline float widen(uint16_t h) { return half_to_float(h); }
// a . b over n elements; b: float, or float16 bits (a float16 cache's row).
template <typename B>
__attribute__((target("avx2,fma,f16c"))) float dot_avx2(const float* a, const B* b, int64_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), load8(b + i + 8), s1);
  }
  for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), load8(b + i), s0);
  s0 = _mm256_add_ps(s0, s1);
  __m128 t = _mm_add_ps(_mm256_castps256_ps128(s0), _mm256_extractf128_ps(s0, 1));
  t = _mm_add_ps(t, _mm_movehl_ps(t, t));
  t = _mm_add_ss(t, _mm_movehdup_ps(t));
  float r = _mm_cvtss_f32(t);
  for (; i < n; ++i) r += a[i] * widen(b[i]);
  return r;
}
__attribute__((target("avx2,fma"))) void axpy_avx2(float alpha, const float* x, float* y, int64_t n) {
  const __m256 a = _mm256_set1_ps(alpha);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}
// Horizontal sums of a0..a3 (one dot product each), times scale, into out[0, 4).
__attribute__((target("avx2,fma"))) inline void store_dots4(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m128 scale,
                                                           float* out) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  const __m128 r = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  _mm_storeu_ps(out, _mm_mul_ps(r, scale));
}

// out[g * n + j] = scale * q_g . k_j for G query rows (stride D) against n key rows (stride D); D % 8 == 0.
// Blocks of 4 key rows outer and the G heads inner, as the AVX-512 loop: each block is read from
// memory once and from L1 by the other heads (head by head, all n rows were read G times). Heads go in
// pairs: one head's four sums wait on the FMA latency at each step of 8 columns (4 cycles for 4 FMAs,
// half the FMA ports' rate); a pair's eight fill it and share the key loads. Each head's sums take
// the same steps in the same order as a head alone, so the bits do not depend on the pairing.
// v (may be null): the value rows of the same keys, fetched block by block for the PV pass that follows.
// KV: float, or uint16_t for a float16 cache (its rows are half the bytes: the prefetch distance stays
// in rows, the lines per row halve).
template <typename KV>
__attribute__((target("avx2,fma,f16c"))) void scores_avx2(const float* q, int64_t G, const KV* k, int64_t n, int64_t D,
                                                          float scale, float* out, const KV* v) {
  const int64_t ahead = gqa_prefetch_rows(D) * D;
  const __m128 vs = _mm_set1_ps(scale);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const KV* k0 = k + j * D;
    for (int64_t off = ahead; off < ahead + 4 * D; off += kKvLine<KV>)
      _mm_prefetch(reinterpret_cast<const char*>(k0 + off), _MM_HINT_T0);
    if (v)
      for (int64_t off = 0; off < 4 * D; off += kKvLine<KV>)
        _mm_prefetch(reinterpret_cast<const char*>(v + j * D + off), _MM_HINT_T0);
    prefetch_pages_ahead(k0, 4 * D * static_cast<int64_t>(sizeof(KV)));
    if (v) prefetch_pages_ahead(v + j * D, 4 * D * static_cast<int64_t>(sizeof(KV)));
    int64_t g = 0;
    for (; g + 2 <= G; g += 2) {
      const float* qa = q + g * D;
      const float* qb = qa + D;
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
      for (int64_t d = 0; d < D; d += 8) {
        const __m256 qva = _mm256_loadu_ps(qa + d), qvb = _mm256_loadu_ps(qb + d);
        const __m256 k0v = load8(k0 + d), k1v = load8(k0 + D + d);
        const __m256 k2v = load8(k0 + 2 * D + d), k3v = load8(k0 + 3 * D + d);
        a0 = _mm256_fmadd_ps(qva, k0v, a0);
        b0 = _mm256_fmadd_ps(qvb, k0v, b0);
        a1 = _mm256_fmadd_ps(qva, k1v, a1);
        b1 = _mm256_fmadd_ps(qvb, k1v, b1);
        a2 = _mm256_fmadd_ps(qva, k2v, a2);
        b2 = _mm256_fmadd_ps(qvb, k2v, b2);
        a3 = _mm256_fmadd_ps(qva, k3v, a3);
        b3 = _mm256_fmadd_ps(qvb, k3v, b3);
      }
      store_dots4(a0, a1, a2, a3, vs, out + g * n + j);
      store_dots4(b0, b1, b2, b3, vs, out + (g + 1) * n + j);
    }
    if (g < G) {
      const float* qg = q + g * D;
      __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
      for (int64_t d = 0; d < D; d += 8) {
        const __m256 qv = _mm256_loadu_ps(qg + d);
        a0 = _mm256_fmadd_ps(qv, load8(k0 + d), a0);
        a1 = _mm256_fmadd_ps(qv, load8(k0 + D + d), a1);
        a2 = _mm256_fmadd_ps(qv, load8(k0 + 2 * D + d), a2);
        a3 = _mm256_fmadd_ps(qv, load8(k0 + 3 * D + d), a3);
      }
      store_dots4(a0, a1, a2, a3, vs, out + g * n + j);
    }
  }
  for (; j < n; ++j)
    for (int64_t g = 0; g < G; ++g) out[g * n + j] = dot_avx2(q + g * D, k + j * D, D) * scale;
}

// y[0, 8 * CW) = sum_j p[j] v_j[0, 8 * CW) (rows D apart), the CW output vectors held in registers
// over the pass (axpy through memory made a store-to-load chain per row). Each row's product is added
// as axpy_avx2 adds it, in the same order, so the bits are the same; rows with p[j] == 0 are skipped as
// before (a zero-weight row's non-finite values add nothing). `resume`: the sums so far are in y (an
// earlier block of rows; a float stored and reloaded is the same float, so the bits do not change).
// No prefetch here: scores_avx2 fetched these value rows (capped at avx2, traced GQA per step was the
// same with a prefetch of one line or of every line 4 KB ahead, and without).
template <int CW, typename KV>
__attribute__((target("avx2,fma,f16c"))) void pv_chunk_avx2(const float* p, int64_t n, const KV* v, int64_t D, float* y,
                                                            bool resume) {
  __m256 acc[CW];
#pragma GCC unroll 8
  for (int c = 0; c < CW; ++c) acc[c] = resume ? _mm256_loadu_ps(y + 8 * c) : _mm256_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const KV* vj = v + j * D;
    if (p[j] == 0.f) continue;
    const __m256 pj = _mm256_set1_ps(p[j]);
#pragma GCC unroll 8
    for (int c = 0; c < CW; ++c) acc[c] = _mm256_fmadd_ps(pj, load8(vj + 8 * c), acc[c]);
  }
#pragma GCC unroll 8
  for (int c = 0; c < CW; ++c) _mm256_storeu_ps(y + 8 * c, acc[c]);
}

// Value rows per block of pv_avx2: 16 KB, so a block read from L2 once stays in L1 for the group's
// heads. Head by head over all n rows, each head read every row from L2 again (7 heads of Qwen2.5:
// 256 bytes a row at L2's 32 bytes a cycle, twice the row's 8 FMAs).
constexpr int64_t kPvBlockBytes = 16 * 1024;  // of float rows (a float16 cache's block has as many rows)

// y_g = sum_j p[g * stride + j] v_j for the G heads (D % 8 == 0), added to what y holds when
// `accumulate`: rows in blocks of kPvBlockBytes, per block each head in passes of up to 8 vectors of
// columns (16 ymm registers: 8 sums, the weight, the loads), each pass resuming the head's sums of the
// blocks before.
template <typename KV>
__attribute__((target("avx2,fma,f16c"))) void pv_avx2(const float* p, int64_t G, int64_t stride, int64_t n, const KV* v,
                                                      int64_t D, float* y, bool accumulate) {
  const int64_t rows = std::max<int64_t>(4, kPvBlockBytes / (D * static_cast<int64_t>(sizeof(float))));
  int64_t j0 = 0;
  do {  // at least once: n == 0 writes zero sums
    const int64_t nb = std::min(rows, n - j0);
    for (int64_t g = 0; g < G; ++g) {
      for (int64_t c0 = 0; c0 < D / 8; c0 += 8) {
        const float* pg = p + g * stride + j0;
        const KV* vc = v + j0 * D + 8 * c0;
        float* yc = y + g * D + 8 * c0;
        const bool resume = accumulate || j0 > 0;
        switch (std::min<int64_t>(8, D / 8 - c0)) {
          case 1: pv_chunk_avx2<1>(pg, nb, vc, D, yc, resume); break;
          case 2: pv_chunk_avx2<2>(pg, nb, vc, D, yc, resume); break;
          case 3: pv_chunk_avx2<3>(pg, nb, vc, D, yc, resume); break;
          case 4: pv_chunk_avx2<4>(pg, nb, vc, D, yc, resume); break;
          case 5: pv_chunk_avx2<5>(pg, nb, vc, D, yc, resume); break;
          case 6: pv_chunk_avx2<6>(pg, nb, vc, D, yc, resume); break;
          case 7: pv_chunk_avx2<7>(pg, nb, vc, D, yc, resume); break;
          default: pv_chunk_avx2<8>(pg, nb, vc, D, yc, resume); break;
        }
      }
    }
    j0 += nb;
  } while (j0 < n);
}
// The largest of r[0, n) (-inf when n is 0 or every element is -inf).
__attribute__((target("avx2,fma"))) float row_max_avx2(const float* r, int64_t n) {
  __m256 mv = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(r + j));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  float mx = _mm_cvtss_f32(m4);
  for (; j < n; ++j) mx = std::max(mx, r[j]);
  return mx;
}
// r[j] = exp(r[j] - mx) over [0, n); returns their sum.
__attribute__((target("avx2,fma"))) float exp_row_avx2(float* r, int64_t n, float mx) {
  const __m256 vm = _mm256_set1_ps(mx);
  __m256 sv = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp8_avx2(_mm256_sub_ps(_mm256_loadu_ps(r + j), vm));
    _mm256_storeu_ps(r + j, e);
    sv = _mm256_add_ps(sv, e);
  }
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(sv), _mm256_extractf128_ps(sv, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  float sum = _mm_cvtss_f32(s4);
  for (; j < n; ++j) {
    r[j] = exp_fast(r[j] - mx);
    sum += r[j];
  }
  return sum;
}
// r[0, n) *= f.
__attribute__((target("avx2,fma"))) void scale_row_avx2(float* r, int64_t n, float f) {
  const __m256 vi = _mm256_set1_ps(f);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(r + j, _mm256_mul_ps(_mm256_loadu_ps(r + j), vi));
  for (; j < n; ++j) r[j] *= f;
}
// In place over r[0, n): the row's max m, r = exp(r - m) normalized to sum 1 (all zero when every
// score is -inf). The softmax of one attention row.
__attribute__((target("avx2,fma"))) void softmax_row_avx2(float* r, int64_t n) {
  const float mx = row_max_avx2(r, n);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(r, r + n, 0.f);
    return;
  }
  const float sum = exp_row_avx2(r, n, mx);
  scale_row_avx2(r, n, sum > 0.f ? 1.f / sum : 0.f);
}
bool has_avx2() { return ep::cpu_has_avx2_fma(); }

// The single-token decode step on AVX-512 for head sizes 16 * DV (f32_gqa_decode_*__avx512). Per KV
// head, G query heads attend to the same n cached rows.
#define NXRT_GQA_AVX512 __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma")))

NXRT_GQA_AVX512 inline __m256 half_sum(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
}

// Sixteen cache elements as floats: float32 rows as they are, float16 rows widened (exact), so a
// float16 cache takes the float32 loops' arithmetic on the values it holds.
NXRT_GQA_AVX512 inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
NXRT_GQA_AVX512 inline __m512 load16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The scaled sums of a head's KB dot products (a[b]: row b's lane-wise products) to dst[0, KB). Four
// rows: the accumulators interleaved in pairs and added within each 128-bit lane, then the pairs' 64-bit
// halves, leaving lane k of every 128-bit quarter a partial sum of a[k], the quarters added last (8
// shuffles for the 4 sums; the hadd tree took 11: qwen2.5-0.5b's step, DISABLED_GqaDecodeStepBench
// with the two trees alternated in one process, 0.86-0.90 of the time). Two rows keep halves-added and
// the hadd tree (the interleaved form measured 1.06x there).
template <int KB>
NXRT_GQA_AVX512 __attribute__((always_inline)) inline void store_head_sums(const __m512 (&a)[KB], __m128 vs, float* dst) {
  if constexpr (KB == 4) {
    const __m512 t01 = _mm512_add_ps(_mm512_unpacklo_ps(a[0], a[1]), _mm512_unpackhi_ps(a[0], a[1]));
    const __m512 t23 = _mm512_add_ps(_mm512_unpacklo_ps(a[2], a[3]), _mm512_unpackhi_ps(a[2], a[3]));
    const __m512 u = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t01), _mm512_castps_pd(t23))),
                                   _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t01), _mm512_castps_pd(t23))));
    const __m256 h = half_sum(u);
    _mm_storeu_ps(dst, _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), vs));
  } else {
    static_assert(KB == 2);
    const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(half_sum(a[0]), half_sum(a[1])), _mm256_setzero_ps());
    _mm_storel_pi(reinterpret_cast<__m64*>(dst),
                  _mm_mul_ps(_mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1)), vs));
  }
}

// NH heads' dot products with KB key rows held in kr: out[h * n + b] = scale * q_h . k_b. Each head's
// sums are one chain of multiply-adds over D per row (the bits of a head scored alone), the heads'
// chains interleaved. DISABLED_GqaDecodeStepBench with one head at a time alternated in one process
// (Zen 5, 1 thread): 0.95-0.97 of the time for the Qwen2.5-0.5B shape (2 heads at once; 3 measured
// 0.99-1.01), 0.94-0.97 for Llama-3-8B's (4 heads, head size 128).
template <int DV, int KB, int NH>
NXRT_GQA_AVX512 __attribute__((always_inline)) inline void score_heads(const float* q, const __m512 (&kr)[KB][DV], __m128 vs,
                                                                     float* out, int64_t n) {
  constexpr int64_t D = 16 * DV;
  __m512 a[NH][KB];
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h)
#pragma GCC unroll 4
    for (int b = 0; b < KB; ++b) a[h][b] = _mm512_setzero_ps();
#pragma GCC unroll 8
  for (int c = 0; c < DV; ++c) {
#pragma GCC unroll 4
    for (int h = 0; h < NH; ++h) {
      const __m512 qv = _mm512_loadu_ps(q + h * D + 16 * c);
#pragma GCC unroll 4
      for (int b = 0; b < KB; ++b) a[h][b] = _mm512_fmadd_ps(qv, kr[b][c], a[h][b]);
    }
  }
#pragma GCC unroll 4
  for (int h = 0; h < NH; ++h) store_head_sums<KB>(a[h], vs, out + h * n);
}

// Query heads scored together (score_heads): KB * NH = 8 chains, within the 32 registers beside the
// rows (KB * DV) and a query vector.
template <int DV>
constexpr int kGqaScoreHeads = DV <= 4 ? 2 : 4;

// out[g * n + j] = scale * q_g . k_j. Blocks of 4 key rows outer and the G heads inner, so each block
// (4 x D floats) is read from memory once; its rows are held in registers while every head of the
// group takes its 4 dot products (KB = 2 rows at a time for D 96 and 128, whose 4 rows would not fit), so
// a head reloads only its own D floats of q. (The rows reloaded from L1 for each head made the loop
// bound by its loads: 140 loads a block of 4 keys for 7 heads against 44 now, for 112 multiply-adds.)
// The heads go kGqaScoreHeads at a time (score_heads).
// v (may be null): the value rows of the same keys, which the PV pass reads next; each block's are
// fetched as its keys are scored, so that pass finds them in L2. Each key's sum is one chain of
// multiply-adds over D, then a reduction tree fixed by the head size (KB follows D), the same for every
// key of a block and every call, however the heads are grouped.
// KV: float, or uint16_t for a float16 cache (rows of half the bytes: the prefetch distances stay in
// rows, the lines per row halve).
template <int DV, typename KV>
NXRT_GQA_AVX512 void gqa_scores_avx512(const float* q, int64_t G, const KV* k, int64_t n, float scale, float* out,
                                       const KV* v) {
  constexpr int64_t D = 16 * DV;
  constexpr int64_t kRowBytes = D * static_cast<int64_t>(sizeof(KV));
  constexpr int KB = DV <= 4 ? 4 : 2;  // key rows held in registers: KB * DV <= 16 zmm
  constexpr int NH = kGqaScoreHeads<DV>;
  const __m128 vs = _mm_set1_ps(scale);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const KV* k0 = k + j * D;
    // Every other block, for the pair of blocks: the key rows ahead and the value rows of these keys.
    // (Per block, as the AVX2 loop does, was slower here: traced GQA per step 0.90-0.96 ms against
    // 0.74-0.86, 4 rounds of alternated processes.)
    if (j % 8 == 0) {
      for (int64_t off = kGqaPrefetchRows<D> * D; off < (kGqaPrefetchRows<D> + 8) * D; off += kKvLine<KV>)
        _mm_prefetch(reinterpret_cast<const char*>(k0 + off), _MM_HINT_T0);
      if (v)
        for (int64_t off = 0; off < 8 * D; off += kKvLine<KV>)
          _mm_prefetch(reinterpret_cast<const char*>(v + j * D + off), _MM_HINT_T0);
      prefetch_pages_ahead(k0, 8 * kRowBytes);
      if (v) prefetch_pages_ahead(v + j * D, 8 * kRowBytes);
    }
    for (int64_t jb = 0; jb < 4; jb += KB) {
      __m512 kr[KB][DV];
#pragma GCC unroll 4
      for (int b = 0; b < KB; ++b)
#pragma GCC unroll 8
        for (int c = 0; c < DV; ++c) kr[b][c] = load16(k0 + (jb + b) * D + 16 * c);
      float* ob = out + j + jb;
      int64_t g = 0;
      for (; g + NH <= G; g += NH) score_heads<DV, KB, NH>(q + g * D, kr, vs, ob + g * n, n);
      for (; g < G; ++g) score_heads<DV, KB, 1>(q + g * D, kr, vs, ob + g * n, n);
    }
  }
  for (; j < n; ++j) {
    const KV* kj = k + j * D;
    for (int64_t g = 0; g < G; ++g) {
      __m512 a = _mm512_setzero_ps();
#pragma GCC unroll 8
      for (int c = 0; c < DV; ++c) a = _mm512_fmadd_ps(_mm512_loadu_ps(q + g * D + 16 * c), load16(kj + 16 * c), a);
      out[g * n + j] = _mm512_reduce_add_ps(a) * scale;
    }
  }
}

// y_h = sum_{j < n} p[h * stride + j] v_j for HC heads, added to what y holds when `accumulate`; the
// outputs held in HC x DV registers for the pass over the value rows (the AVX2 loop added each row into
// y through memory, a store-to-load chain).
template <int DV, int HC, typename KV>
NXRT_GQA_AVX512 void gqa_pv_avx512(const float* p, int64_t stride, int64_t n, const KV* v, float* y, bool accumulate) {
  constexpr int64_t D = 16 * DV;
  __m512 acc[HC][DV];
#pragma GCC unroll 8
  for (int h = 0; h < HC; ++h)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) acc[h][c] = accumulate ? _mm512_loadu_ps(y + h * D + 16 * c) : _mm512_setzero_ps();
  for (int64_t j = 0; j < n; ++j) {
    const KV* vj = v + j * D;
    if (j % 4 == 0)
      for (int64_t off = kGqaPrefetchRows<D> * D; off < (kGqaPrefetchRows<D> + 4) * D; off += kKvLine<KV>)
        _mm_prefetch(reinterpret_cast<const char*>(vj + off), _MM_HINT_T0);
    // The chunked decode step fetches the value rows here, not in its key pass (GqaAvx512Loops): start
    // each page of them ahead as the key loop does (rows already in cache make this one cheap
    // instruction per 8 rows).
    if (j % 8 == 0) prefetch_pages_ahead(vj, 8 * D * static_cast<int64_t>(sizeof(KV)));
    __m512 vv[DV];
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) vv[c] = load16(vj + 16 * c);
#pragma GCC unroll 8
    for (int h = 0; h < HC; ++h) {
      const __m512 ph = _mm512_set1_ps(p[h * stride + j]);
#pragma GCC unroll 8
      for (int c = 0; c < DV; ++c) acc[h][c] = _mm512_fmadd_ps(ph, vv[c], acc[h][c]);
    }
  }
#pragma GCC unroll 8
  for (int h = 0; h < HC; ++h)
#pragma GCC unroll 8
    for (int c = 0; c < DV; ++c) _mm512_storeu_ps(y + h * D + 16 * c, acc[h][c]);
}

// Heads per pass: at most 24 accumulators (DV each), so the pass keeps them, DV value registers and a
// broadcast within the 32 zmm registers.
template <int DV>
constexpr int kGqaMaxHeadsPerPass = 24 / DV;

template <int DV, typename KV>
NXRT_GQA_AVX512 void gqa_pv_heads_avx512(const float* p, int64_t G, int64_t stride, int64_t n, const KV* v, float* y,
                                         bool accumulate) {
  constexpr int64_t D = 16 * DV;
  constexpr int kMax = kGqaMaxHeadsPerPass<DV>;
  // Passes of near-equal size (7 heads at D 64: 4 + 3 rather than 6 + 1).
  const int64_t passes = (G + kMax - 1) / kMax;
  int64_t g = 0;
  for (int64_t ps = 0; ps < passes; ++ps) {
    const int64_t hc = (G - g + (passes - ps) - 1) / (passes - ps);
    const float* pg = p + g * stride;
    float* yg = y + g * D;
    switch (hc) {
      case 1: gqa_pv_avx512<DV, 1, KV>(pg, stride, n, v, yg, accumulate); break;
      case 2: if constexpr (kMax >= 2) gqa_pv_avx512<DV, 2, KV>(pg, stride, n, v, yg, accumulate); break;
      case 3: if constexpr (kMax >= 3) gqa_pv_avx512<DV, 3, KV>(pg, stride, n, v, yg, accumulate); break;
      case 4: if constexpr (kMax >= 4) gqa_pv_avx512<DV, 4, KV>(pg, stride, n, v, yg, accumulate); break;
      case 5: if constexpr (kMax >= 5) gqa_pv_avx512<DV, 5, KV>(pg, stride, n, v, yg, accumulate); break;
      default: if constexpr (kMax >= 6) gqa_pv_avx512<DV, 6, KV>(pg, stride, n, v, yg, accumulate); break;
    }
    g += hc;
  }
}

// softmax_row_avx2 on 16 lanes (two running maxima and sums, a masked tail): the score rows of the
// decode step and of the multi-row path. The exponentials have softmax_row_avx2's bits; the sums add in another order.
// GCC 12 reports its own headers' _mm512_undefined_ps() (the pass-through of unmasked AVX-512 ops) as
// uninitialized once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
// The largest of r[0, n) (-inf when n is 0 or every element is -inf).
NXRT_GQA_AVX512 float row_max_avx512(const float* r, int64_t n) {
  const __m512 ninf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 m0 = ninf, m1 = ninf;
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(r + j));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(r + j + 16));
  }
  for (; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    m0 = _mm512_max_ps(m0, _mm512_mask_loadu_ps(ninf, k, r + j));
  }
  const __m512 m = _mm512_max_ps(m0, m1);
  const __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(m), _mm512_extractf32x8_ps(m, 1));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  return _mm_cvtss_f32(m4);
}

// r[j] = exp(r[j] - mx) over [0, n); returns their sum.
NXRT_GQA_AVX512 float exp_row_avx512(float* r, int64_t n, float mx) {
  const __m512 vm = _mm512_set1_ps(mx);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    const __m512 e0 = exp16_avx512(_mm512_sub_ps(_mm512_loadu_ps(r + j), vm));
    const __m512 e1 = exp16_avx512(_mm512_sub_ps(_mm512_loadu_ps(r + j + 16), vm));
    _mm512_storeu_ps(r + j, e0);
    _mm512_storeu_ps(r + j + 16, e1);
    s0 = _mm512_add_ps(s0, e0);
    s1 = _mm512_add_ps(s1, e1);
  }
  for (; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    const __m512 e = exp16_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, r + j), vm));
    _mm512_mask_storeu_ps(r + j, k, e);
    s0 = _mm512_add_ps(s0, _mm512_maskz_mov_ps(k, e));
  }
  const __m256 s8 = half_sum(_mm512_add_ps(s0, s1));
  __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
  return _mm_cvtss_f32(s4);
}

// r[0, n) *= f.
NXRT_GQA_AVX512 void scale_row_avx512(float* r, int64_t n, float f) {
  const __m512 vf = _mm512_set1_ps(f);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 k = n - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - j)) - 1);
    _mm512_mask_storeu_ps(r + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, r + j), vf));
  }
}

NXRT_GQA_AVX512 void softmax_row_avx512(float* r, int64_t n) {
  const float mx = row_max_avx512(r, n);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(r, r + n, 0.f);
    return;
  }
  const float sum = exp_row_avx512(r, n, mx);
  scale_row_avx512(r, n, sum > 0.f ? 1.f / sum : 0.f);
}
#pragma GCC diagnostic pop

// The head sizes the AVX-512 decode step takes: 64 (Qwen2.5-0.5B, Llama-3.2-1B's 64), 96 (Phi-3) and
// 128 (most 1-8B decoders).
bool gqa_decode_avx512_head_size(int64_t D) { return D == 64 || D == 96 || D == 128; }

template <typename KV>
void gqa_scores_avx512_any(const float* q, int64_t G, const KV* k, int64_t n, int64_t D, float scale, float* out,
                           const KV* v) {
  switch (D) {
    case 64: return gqa_scores_avx512<4>(q, G, k, n, scale, out, v);
    case 96: return gqa_scores_avx512<6>(q, G, k, n, scale, out, v);
    default: return gqa_scores_avx512<8>(q, G, k, n, scale, out, v);
  }
}
template <typename KV>
void gqa_pv_avx512_any(const float* p, int64_t G, int64_t stride, int64_t n, const KV* v, int64_t D, float* y,
                       bool accumulate) {
  switch (D) {
    case 64: return gqa_pv_heads_avx512<4>(p, G, stride, n, v, y, accumulate);
    case 96: return gqa_pv_heads_avx512<6>(p, G, stride, n, v, y, accumulate);
    default: return gqa_pv_heads_avx512<8>(p, G, stride, n, v, y, accumulate);
  }
}

// The decode step of one (batch, KV head): its G query heads over n cached rows, in chunks of
// gqa_chunk_rows(D) keys. Each chunk is scored (with the AVX2 loops its value rows are fetched meanwhile;
// see GqaAvx512Loops::kValuesInKeyPass), its scores become
// exponentials against the running maximum, and its value rows are added into y while they are still
// in L2 (online softmax: when a chunk raises a head's maximum, that head's sum and outputs so far are
// scaled by exp(old - new); y is divided by the sum at the end). Before, the step scored all n keys,
// ran a softmax over each whole row, then took the products: past ~1000 tokens the value rows fetched
// during the key pass had left L2 by the time the products read them, and each score row was read
// three more times. Zen 5, Qwen2.5-0.5B shape, steps alternating in one process, the step's attention
// at 3000 / 1500 cached tokens: AVX-512 loops 3.45 -> 3.02 and 1.51 -> 1.37 ms at 1 thread, 2.36 -> 2.11
// and 1.20 -> 1.11 at 2; AVX2 loops (NXRT_ISA=avx2) 4.73 -> 4.25 and 2.49 -> 2.27 at 1 thread, 2.77 ->
// 2.47 and 1.34 -> 1.26 at 2; at 512 tokens either within 1%. Chunks of 128 KB of value rows measured
// best (8-16 KB were slower than one pass: each chunk costs a max and a sum per head); the rows come
// from the float32 size for either cache dtype, so a float16 cache cuts chunks where a float32 one does
// and keeps its bits.
// Loops: the tier's score, row and value loops (GqaAvx512Loops, GqaAvx2Loops). s: G * min(n,
// gqa_chunk_rows(D)) floats of scratch; adjust(s, j0, len) applies softcap and bias to the chunk's score
// rows (stride len) of keys [j0, j0 + len). G at most kGqaMaxChunkedGroup (the stack holds each head's
// maximum and sum); larger groups take the whole-row passes.
constexpr int64_t kGqaMaxChunkedGroup = 64;
constexpr int64_t kGqaChunkValueBytes = int64_t{128} << 10;
inline int64_t gqa_chunk_rows(int64_t D) {
  return std::max<int64_t>(4, kGqaChunkValueBytes / (D * static_cast<int64_t>(sizeof(float))));
}
// With m_out (and l_out): the step over a segment of a longer row (gqa_merge_segments): y keeps the
// unnormalized sums, m_out[g] / l_out[g] each head's maximum and sum.
template <typename Loops, typename KV, typename Adjust>
void gqa_decode_chunked(const float* q, int64_t G, const KV* k, const KV* v, int64_t n, int64_t D, float scale, float* s,
                        float* y, Adjust&& adjust, float* m_out = nullptr, float* l_out = nullptr) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (n == 0) {  // no key in reach: zero outputs, as the whole-row passes wrote
    std::fill(y, y + G * D, 0.f);
    if (m_out) {
      std::fill(m_out, m_out + G, kNegInf);
      std::fill(l_out, l_out + G, 0.f);
    }
    return;
  }
  const int64_t chunk = gqa_chunk_rows(D);
  float mx[kGqaMaxChunkedGroup], sum[kGqaMaxChunkedGroup];
  std::fill(mx, mx + G, kNegInf);
  std::fill(sum, sum + G, 0.f);
  for (int64_t j0 = 0; j0 < n; j0 += chunk) {
    const int64_t len = std::min(chunk, n - j0);
    if constexpr (Loops::kValuesInKeyPass) {
      Loops::scores(q, G, k + j0 * D, len, D, scale, s, v + j0 * D);
    } else {
      Loops::scores(q, G, k + j0 * D, len, D, scale, s, static_cast<const KV*>(nullptr));
      prefetch_first_pages(v + j0 * D, len * D * static_cast<int64_t>(sizeof(KV)));
    }
    adjust(s, j0, len);
    for (int64_t g = 0; g < G; ++g) {
      float* r = s + g * len;
      const float m = std::max(mx[g], Loops::row_max(r, len));
      if (m == kNegInf) {  // no key of this head scored above -inf yet: nothing to add
        std::fill(r, r + len, 0.f);
        continue;
      }
      if (m != mx[g] && j0 > 0) {
        const float shrink = mx[g] == kNegInf ? 0.f : std::exp(mx[g] - m);
        sum[g] *= shrink;
        Loops::scale_row(y + g * D, D, shrink);
      }
      mx[g] = m;
      sum[g] += Loops::exp_row(r, len, m);
    }
    Loops::pv(s, G, len, len, v + j0 * D, D, y, /*accumulate=*/j0 > 0);
  }
  if (m_out) {
    std::copy(mx, mx + G, m_out);
    std::copy(sum, sum + G, l_out);
    return;
  }
  for (int64_t g = 0; g < G; ++g) Loops::scale_row(y + g * D, D, sum[g] > 0.f ? 1.f / sum[g] : 0.f);
}

// A long row's keys go in segments of about kGqaSegmentChunks chunks, each its own work item, so more
// threads than (batch, KV head) items share the cache reads (Qwen2.5's 2 KV heads a token, one in a
// multi-query model); the segments' sums merge in order. DISABLED_GqaDecodeStepBench, segments against
// one item per KV head alternated in one process, 2 threads (Zen 5): one KV head of 8 query heads at
// head size 128, 0.62 / 0.58 of the time at 1024 / 2000 cached tokens.
constexpr int64_t kGqaSegmentChunks = 4;
inline int64_t gqa_segment_rows(int64_t D) { return kGqaSegmentChunks * gqa_chunk_rows(D); }
// Segments of a row of n keys: one per seg_rows keys, but no more than bring the row's KV heads to
// kGqaSegmentItems items (a model with 8 KV heads has enough items already: Llama-3-8B's shape in 16
// segments ran 1.02-1.04x the time of 8 whole rows at 2 threads, each segment one more stream to
// start). A function of n and the model's KV heads alone: a row's result depends on neither the batch
// it is in nor the thread count.
constexpr int64_t kGqaSegmentItems = 8;
inline int64_t gqa_row_segments(int64_t n, int64_t seg_rows, int64_t kv_heads) {
  const int64_t most = std::max<int64_t>(1, (kGqaSegmentItems + kv_heads - 1) / kv_heads);
  return std::clamp<int64_t>((n + seg_rows - 1) / seg_rows, 1, most);
}
// y[g] = sum_p exp(m_p - M) y_p[g] / sum_p exp(m_p - M) l_p[g] over the segs segments' parts (part p at
// parts + p * part_floats: G * D sums, then G maxima, then G sums), M the heads' largest maximum.
inline void gqa_merge_segments(const float* parts, size_t part_floats, int64_t segs, int64_t G, int64_t D, float* y) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t g = 0; g < G; ++g) {
    float M = kNegInf;
    for (int64_t sg = 0; sg < segs; ++sg) M = std::max(M, parts[sg * part_floats + G * D + g]);
    float* yg = y + g * D;
    std::fill(yg, yg + D, 0.f);
    if (M == kNegInf) continue;
    float l = 0.f;
    for (int64_t sg = 0; sg < segs; ++sg) {
      const float* part = parts + sg * part_floats;
      const float m = part[G * D + g];
      if (m == kNegInf) continue;
      const float w = std::exp(m - M);
      l += w * part[G * D + G + g];
      for (int64_t d = 0; d < D; ++d) yg[d] += w * part[g * D + d];
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    for (int64_t d = 0; d < D; ++d) yg[d] *= inv;
  }
}
struct GqaAvx512Loops {
  // The key pass reads only the keys and the value pass fetches its own rows (gqa_pv_avx512), so the
  // value stream runs while the softmax and the products compute instead of doubling the key pass's
  // reads while its products wait. DISABLED_GqaDecodeColdBench (Qwen2.5-0.5B shape, the two alternated
  // round by round in one process, Zen 5): 0.91-0.94 of the time at 1 thread and 0.89-0.94 at 2 for 528
  // cached tokens, 0.91-0.92 at 2000, 0.996-1.04 at 128; a 2-thread prompt-512 decoder step +0.8%
  // (steps alternated in one process, 4 processes, -1.0 to +1.6%), 1 thread +0.2%.
  static constexpr bool kValuesInKeyPass = false;
  template <typename KV>
  static void scores(const float* q, int64_t G, const KV* k, int64_t n, int64_t D, float scale, float* out, const KV* v) {
    gqa_scores_avx512_any(q, G, k, n, D, scale, out, v);
  }
  static float row_max(const float* r, int64_t n) { return row_max_avx512(r, n); }
  static float exp_row(float* r, int64_t n, float m) { return exp_row_avx512(r, n, m); }
  static void scale_row(float* r, int64_t n, float f) { scale_row_avx512(r, n, f); }
  template <typename KV>
  static void pv(const float* p, int64_t G, int64_t stride, int64_t n, const KV* v, int64_t D, float* y, bool accumulate) {
    gqa_pv_avx512_any(p, G, stride, n, v, D, y, accumulate);
  }
};
struct GqaAvx2Loops {
  // pv_avx2 reads the rows in blocks per head and column group, without prefetches of its own.
  static constexpr bool kValuesInKeyPass = true;
  template <typename KV>
  static void scores(const float* q, int64_t G, const KV* k, int64_t n, int64_t D, float scale, float* out, const KV* v) {
    scores_avx2(q, G, k, n, D, scale, out, v);
  }
  static float row_max(const float* r, int64_t n) { return row_max_avx2(r, n); }
  static float exp_row(float* r, int64_t n, float m) { return exp_row_avx2(r, n, m); }
  static void scale_row(float* r, int64_t n, float f) { scale_row_avx2(r, n, f); }
  template <typename KV>
  static void pv(const float* p, int64_t G, int64_t stride, int64_t n, const KV* v, int64_t D, float* y, bool accumulate) {
    pv_avx2(p, G, stride, n, v, D, y, accumulate);
  }
};
#endif
void softmax_row(float* r, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (has_avx2()) return softmax_row_avx2(r, n);
#endif
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) mx = std::max(mx, r[j]);
  if (mx == -std::numeric_limits<float>::infinity()) {
    std::fill(r, r + n, 0.f);
    return;
  }
  float sum = 0.f;
  for (int64_t j = 0; j < n; ++j) {
    r[j] = exp_fast(r[j] - mx);
    sum += r[j];
  }
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (int64_t j = 0; j < n; ++j) r[j] *= inv;
}
float dotf(const float* a, const float* b, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (has_avx2()) return dot_avx2(a, b, n);
#endif
  float r = 0.f;
  for (int64_t i = 0; i < n; ++i) r += a[i] * b[i];
  return r;
}
void axpyf(float alpha, const float* x, float* y, int64_t n) {
#if defined(__x86_64__) || defined(__i386__)
  if (has_avx2()) return axpy_avx2(alpha, x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

// Runs the core and writes y [B, Hq, S, Dv] into the output [B, S, Hq * Dv] of dtype dt. The fast core
// runs on `planned` and its scratch when the caller planned it (for a key bound >= p.T), else on a
// split planned here with scratch from ctx.workspace.
Status run_core(ep::KernelContext& ctx, AttnProblem<float>& p, Tensor* out, bool reference,
                const AttnFastPlan* planned = nullptr, float* planned_scratch = nullptr) {
  std::vector<float> y(static_cast<size_t>(p.B * p.Hq * p.Sq * p.Dv));
  p.y = y.data();
  if (reference) {
    attention_reference(p);
  } else if (planned) {
    attention_fast(p, *planned, &ctx.pool(), planned_scratch);
  } else {
    const AttnFastPlan fp = attention_fast_plan(p, ctx.pool().num_threads());
    NXRT_ASSIGN_OR_RETURN(void* scratch, ctx.workspace(fp.bytes()));
    attention_fast(p, fp, &ctx.pool(), static_cast<float*>(scratch));
  }
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.Hq; ++h)
      for (int64_t s = 0; s < p.Sq; ++s)
        NXRT_RETURN_IF_ERROR(store_floats(y.data() + ((b * p.Hq + h) * p.Sq + s) * p.Dv, p.Dv, out->dtype(),
                                          elem_at(*out, (b * p.Sq + s) * p.Hq * p.Dv + h * p.Dv)));
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// GroupQueryAttention
//   query (B, S, H*D) or packed (B, S, (H + 2*kvH) * D) when key/value are absent; past_key/value
//   (B, kvH, cap, D); seqlens_k (B) int32 = total length - 1 per batch; total_sequence_length scalar
//   int32 (batch max). First prompt when S == total_sequence_length: past length 0; otherwise batch b
//   has past length seqlens_k[b] + 1 - S. present = past rows [0, past_b) then the S new rows, length
//   max(total_sequence_length, cap). When present_key is the same memory as past_key (shared buffer),
//   only the new rows are written. Query row s attends to keys [0, past_b + s] (causal), limited to
//   the last local_window_size of them when local_window_size > 0.
//
// A call is planned from its inputs' dtypes and shapes (GqaPlan: once per shape set at specialize, or
// per call without a variant), then compute runs five steps: read lengths (per-batch past and total
// lengths from seqlens_k, rotary positions), rotate (Q and the new K rows rotated, V copied, all as
// float in step scratch), append (the new rows into present) and attend (the plan's path).

// The path a call takes: decided by dtype, the number of new rows and which outputs are requested.
enum class GqaPath {
  kDecode,     // float32, one new row, presents requested: per (batch, KV head) over the present buffers
  kRows,       // float32, several new rows, presents requested: query blocks over the present buffers
  kReference,  // reference=1, float16/bfloat16, or presents not requested: the attention core on copies
};

// The decode path's score and value loops.
enum class GqaDecodeKernel {
  kAvx512,  // gqa_*_avx512 (the kernel's tier allows AVX-512, head size 64/96/128)
  kAvx2,    // scores_avx2 and pv_avx2 (head size a multiple of 8)
  kPlain,   // dotf / axpyf (AVX2 loops with remainders where the CPU has AVX2)
};

// Rows of a query block on the multi-row path: the block's score rows stay in cache.
constexpr int64_t kGqaRowBlock = 64;

// Everything a GroupQueryAttention call decides from its inputs' dtypes and shapes: the validated
// dimensions, the path and decode kernel, the multi-row work split and the step scratch layout. Each
// batch row's valid KV length is a value (seqlens_k), so every buffer is sized for the most keys a query
// row can see, kv_bound = cap + S (read_lengths rejects a past longer than cap), and the lengths are
// read at compute: the plan is right for every run at its shapes.
struct GqaPlan {
  DataType dt = DataType::kFloat;
  // The cache's element type (past and present, T_CACHE): dt, or float16 beside a float32 query (a
  // float16 KV cache: half the bytes a decode step reads; new rows are rounded to float16 once, when
  // appended, and every path reads them widened to float).
  DataType kv_dt = DataType::kFloat;
  int64_t B = 0, S = 0, D = 0;
  int64_t cap = 0;       // rows of the past buffers (0 without a past)
  int64_t kv_bound = 0;  // cap + S
  bool packed = false;   // query holds Q, K and V
  bool past = false;     // past_key/past_value given
  RotaryParams rp;            // with do_rotary
  int64_t rotary_rows = 0;    // rows of cos_cache/sin_cache
  bool position_ids = false;  // with do_rotary: input 9 given
  bool bias = false;          // attention_bias (input 10) given
  int64_t ab_b = 0, ab_h = 0, ab_t = 0, ab_len = 0;  // its strides (b, h, s) and its last dim
  GqaPath path = GqaPath::kReference;
  GqaDecodeKernel decode_kernel = GqaDecodeKernel::kPlain;
  // kRows: (batch, head) pairs in row_workers fixed ranges; worker w's scratch (worker_floats at
  // rows_off + w * worker_floats) is a score block of row_block x kv_bound, an output block of
  // row_block x D and the GEMM's packing slot (gemm_floats).
  int64_t row_block = 0, row_workers = 1;
  size_t worker_floats = 0, out_block_off = 0, gemm_off = 0, gemm_floats = 0;
  // kRows over a float16 cache: each worker's float copy of one (batch, KV head)'s key and value rows
  // (2 x kv_bound x D floats at kv_copy_off in its block), made once per KV head its ranges reach.
  size_t kv_copy_off = 0;
  // kReference without reference=1 (float16/bfloat16, presents not requested): the fast core's split
  // for the key bound (every run's keys, max past + S, are at most kv_bound).
  bool core_fast = false;
  AttnFastPlan core;
  // Step scratch: lengths and positions (int64 [2B + B*S]), rotated Q and new K/V rows, the decode
  // scores ([B * kvH] items of group * kv_bound), the multi-row workers' blocks, the fast core's
  // blocks, and float copies of float16/bfloat16 inputs (Q, K, V, cos, sin, bias).
  ScratchLayout lay;
  size_t meta_off = 0, q_off = 0, k_off = 0, v_off = 0, scores_off = 0, rows_off = 0, core_off = 0;
  size_t in_off[6] = {};
  // kDecode through gqa_decode_chunked: keys per segment (gqa_segment_rows; 0: the whole-row loops),
  // segments the key bound can need, and their parts ([B * kvH * max_segs] of part_floats at parts_off)
  // when it can need more than one.
  int64_t seg_rows = 0, max_segs = 1;
  size_t part_floats = 0, parts_off = 0;
};

struct GqaVariant final : ep::KernelVariant {
  GqaPlan plan;
  size_t workspace_bytes() const override { return plan.lay.bytes(); }
};

// The dtypes and shapes plan() reads, from a SpecializeContext or from a call's inputs (kUndefined:
// absent or not a tensor).
struct GqaInputFacts {
  static constexpr size_t kInputs = 11;
  DataType dt[kInputs] = {};
  const Dims* dims[kInputs] = {};
  bool has(size_t i) const { return dt[i] != DataType::kUndefined; }
  std::string describe(size_t i) const {
    return has(i) ? std::string(dtype_name(dt[i])) + shape_to_string(*dims[i]) : std::string("none");
  }
};

// What the steps of one GroupQueryAttention call share: the plan, the inputs, and the values read at
// compute. Per-batch lengths and rotary positions live in the plan's step scratch.
struct GqaCall {
  const GqaPlan* plan = nullptr;
  int64_t total = 0;        // total_sequence_length
  int64_t present_len = 0;  // max(total, cap)
  bool first_prompt = false;
  const Tensor* Q = nullptr;
  const Tensor* K = nullptr;  // nullptr when packed
  const Tensor* V = nullptr;
  const Tensor* PK = nullptr;  // past key/value, or nullptr
  const Tensor* PV = nullptr;
  const Tensor* cos = nullptr;  // rotary caches, or nullptr
  const Tensor* sin = nullptr;
  const Tensor* AB = nullptr;  // attention_bias, or nullptr
  int64_t* past = nullptr;  // [B] past length
  int64_t* tot = nullptr;   // [B] total length (seqlens_k + 1)
  int64_t* pos = nullptr;   // [B * S] rotary position of each new row
};

// The float arrays of one call, in the plan's step scratch: float inputs are read in place,
// float16/bfloat16 ones converted.
struct GqaFloats {
  float* q = nullptr;           // rotated Q [B, H, S, D]
  float* kn = nullptr;          // new K rows, rotated [B, kvH, S, D]
  float* vn = nullptr;          // new V rows [B, kvH, S, D]
  float* dec_scores = nullptr;  // decode path: item w's scores at w * group * kv_bound
  float* dec_parts = nullptr;   // decode path in segments: their parts (GqaPlan::parts_off)
  float* rows = nullptr;        // multi-row path: the workers' blocks
  float* core = nullptr;        // reference path on the fast core: its planned scratch
  const float* qin = nullptr;   // query input [B, S, qkv_row]
  const float* kin = nullptr;   // key/value inputs [B, S, kvH * D] (not packed)
  const float* vin = nullptr;
  const float* cosv = nullptr;  // rotary caches
  const float* sinv = nullptr;
  const float* abias = nullptr;  // attention bias, element (b, h, s, t) at b*ab_b + h*ab_h + s*ab_t + t
  int64_t ab_b = 0, ab_h = 0, ab_t = 0;
};

class GroupQueryAttention final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    H_ = info.attr_int("num_heads", 0);
    kvH_ = info.attr_int("kv_num_heads", 0);
    if (H_ <= 0 || kvH_ <= 0 || H_ % kvH_ != 0)
      return info.error("num_heads (" + std::to_string(H_) + ") and kv_num_heads (" + std::to_string(kvH_) +
                        ") must be positive with num_heads a multiple of kv_num_heads");
    scale_ = info.attr_float("scale", 0.f);
    softcap_ = info.attr_float("softcap", 0.f);
    window_ = info.attr_int("local_window_size", -1);
    rotary_ = info.attr_int("do_rotary", 0) != 0;
    interleaved_ = info.attr_int("rotary_interleaved", 0) != 0;
    causal_ = info.attr_int("causal", 1) != 0;
    reference_ = info.overrides().reference();
    decode_avx512_ = info.overrides().isa() >= ep::IsaTier::kAvx512;
    if (info.attr_int("smooth_softmax", 0) != 0) return info.error("smooth_softmax is not supported", StatusCode::kNotImplemented);
    if (info.attr_int("qk_output", 0) != 0) return info.error("qk_output is not supported", StatusCode::kNotImplemented);
    if (info.attr_int("sliding_window_cache", 0) != 0) return info.error("sliding_window_cache is not supported", StatusCode::kNotImplemented);
    if (info.input_present(11)) return info.error("head_sink is not supported", StatusCode::kNotImplemented);
    if (info.input_present(12) || info.input_present(13)) return info.error("quantized KV cache (k_scale/v_scale) is not supported", StatusCode::kNotImplemented);
    if (info.input_present(14) || info.input_present(15)) return info.error("q_norm_weight/k_norm_weight are not supported", StatusCode::kNotImplemented);
    return Status::Ok();
  }

  // Cheap enough to run every decode step of a growing KV cache (new shapes each step): a few integer
  // decisions and one small object, no buffers.
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    GqaInputFacts in;
    for (size_t i = 0; i < GqaInputFacts::kInputs; ++i) {
      in.dt[i] = sc.has_input(i) ? sc.dtype(i) : DataType::kUndefined;
      in.dims[i] = &sc.shape(i);
    }
    const ep::KernelInfo& info = sc.info();
    auto v = std::make_unique<GqaVariant>();
    NXRT_RETURN_IF_ERROR(plan(in, info.output_present(1), info.output_present(2), info.output_present(3),
                              sc.num_threads(), &v->plan));
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    // Without a variant (a context without a kernel cache) the same plan is made for this call.
    const auto* var = dynamic_cast<const GqaVariant*>(ctx.variant());
    GqaVariant local;
    if (!var) {
      static const Dims kNoDims;
      GqaInputFacts in;
      for (size_t i = 0; i < GqaInputFacts::kInputs; ++i) {
        const Value* v = ctx.input_value(i);
        const bool t = v && v->is_tensor();
        in.dt[i] = t ? v->tensor().dtype() : DataType::kUndefined;
        in.dims[i] = t ? &v->tensor().shape() : &kNoDims;
      }
      const Status s = plan(in, ctx.output_requested(1), ctx.output_requested(2), ctx.output_requested(3),
                            ctx.pool().num_threads(), &local.plan);
      if (!s.ok()) return plan_error(ctx, s);
      var = &local;
    }
    const GqaPlan& p = var->plan;
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *var));
    ScratchLayout lay = p.lay;
    lay.bind(ws);
    GqaCall c;
    c.plan = &p;
    c.Q = &ctx.input(0);
    if (!p.packed) {
      c.K = &ctx.input(1);
      c.V = &ctx.input(2);
    }
    if (p.past) {
      c.PK = &ctx.input(3);
      c.PV = &ctx.input(4);
    }
    if (rotary_) {
      c.cos = &ctx.input(7);
      c.sin = &ctx.input(8);
    }
    if (p.bias) c.AB = &ctx.input(10);
    c.past = lay.at<int64_t>(p.meta_off);
    c.tot = c.past + p.B;
    c.pos = c.tot + p.B;
    NXRT_RETURN_IF_ERROR(read_lengths(ctx, &c));
    NXRT_RETURN_IF_ERROR(rotary_positions(ctx, &c));
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, p.dt, Dims{p.B, p.S, H_ * p.D}));
    const Dims pshape{p.B, kvH_, c.present_len, p.D};
    Tensor* presK = nullptr;
    Tensor* presV = nullptr;
    if (ctx.output_requested(1)) { NXRT_ASSIGN_OR_RETURN(presK, ctx.allocate_output(1, p.kv_dt, pshape)); }
    if (ctx.output_requested(2)) { NXRT_ASSIGN_OR_RETURN(presV, ctx.allocate_output(2, p.kv_dt, pshape)); }
    GqaFloats f;
    NXRT_RETURN_IF_ERROR(float_inputs(c, lay, &f));
    rotate(c, f);
    append(c, presK, c.PK, f.kn);
    append(c, presV, c.PV, f.vn);
    switch (p.path) {
      case GqaPath::kDecode: attend_decode(ctx, c, f, *presK, *presV, Y); return Status::Ok();
      case GqaPath::kRows: attend_rows(ctx, c, f, *presK, *presV, Y); return Status::Ok();
      case GqaPath::kReference: break;
    }
    return attend_reference(ctx, c, f, Y);
  }

 private:
  // The plan for these input dtypes and shapes (see GqaPlan); an error for inputs the op rejects
  // whatever their values. `threads`: the pool compute runs on.
  Status plan(const GqaInputFacts& in, bool present_k, bool present_v, bool output_qk, int threads,
              GqaPlan* out) const {
    GqaPlan& p = *out;
    const DataType dt = p.dt = in.dt[0];
    if (!in.has(0)) return invalid_argument("query is required");
    if (!is_attn_float(dt)) return invalid_argument(std::string("query must be float32/float16/bfloat16, got ") + dtype_name(dt));
    const Dims& Q = *in.dims[0];
    if (Q.size() != 3) return invalid_argument("query must be 3-D (batch, seq, hidden), got " + in.describe(0));
    p.packed = !in.has(1);
    if (p.packed != !in.has(2)) return invalid_argument("key and value must both be given or both be absent (packed QKV)");
    const int64_t B = p.B = Q[0], S = p.S = Q[1];
    int64_t D;
    if (p.packed) {
      if (Q[2] % (H_ + 2 * kvH_)) return invalid_argument("packed QKV hidden " + std::to_string(Q[2]) + " not divisible by num_heads + 2 * kv_num_heads");
      D = Q[2] / (H_ + 2 * kvH_);
    } else {
      if (Q[2] % H_) return invalid_argument("query hidden not divisible by num_heads");
      D = Q[2] / H_;
      const Dims want{B, S, kvH_ * D};
      if (in.dt[1] != dt || in.dt[2] != dt || *in.dims[1] != want || *in.dims[2] != want)
        return invalid_argument("key/value must be " + std::string(dtype_name(dt)) + shape_to_string(want) + ", got " + in.describe(1) + ", " + in.describe(2));
    }
    p.D = D;
    p.past = in.has(3);
    if (p.past != in.has(4)) return invalid_argument("past_key and past_value must be given together");
    p.kv_dt = dt;
    if (p.past) {
      const Dims& PK = *in.dims[3];
      // The cache is the query's type, or float16 beside a float32 query.
      const bool f16_cache = dt == DataType::kFloat && in.dt[3] == DataType::kFloat16;
      const DataType kv = f16_cache ? DataType::kFloat16 : dt;
      if (in.dt[3] != kv || PK.size() != 4 || PK[0] != B || PK[1] != kvH_ || PK[3] != D || *in.dims[4] != PK || in.dt[4] != kv)
        return invalid_argument("past_key/past_value must be " + std::string(dtype_name(dt)) +
                                (dt == DataType::kFloat ? " or float16" : "") + " (batch, kv_num_heads, cap, head_size) = (" +
                                std::to_string(B) + ", " + std::to_string(kvH_) + ", cap, " + std::to_string(D) + "), both of one type, got " + in.describe(3) + ", " + in.describe(4));
      p.kv_dt = kv;
      p.cap = PK[2];
    }
    p.kv_bound = p.cap + S;
    if (!in.has(5) || !in.has(6)) return invalid_argument("seqlens_k and total_sequence_length are required");
    if (in.dt[5] != DataType::kInt32 || shape_numel(*in.dims[5]) != B) return invalid_argument("seqlens_k must be int32 (batch), got " + in.describe(5));
    if (in.dt[6] != DataType::kInt32 || shape_numel(*in.dims[6]) != 1) return invalid_argument("total_sequence_length must be an int32 scalar, got " + in.describe(6));
    if (rotary_) {
      if (!in.has(7) || !in.has(8)) return invalid_argument("do_rotary needs cos_cache and sin_cache");
      const Dims& Cc = *in.dims[7];
      if (Cc.size() != 2 || *in.dims[8] != Cc || Cc[1] * 2 > D || in.dt[7] != dt || in.dt[8] != dt)
        return invalid_argument("cos_cache/sin_cache must be " + std::string(dtype_name(dt)) + " (max_seq, rotary_dim/2) with rotary_dim <= head_size " + std::to_string(D) + ", got " + in.describe(7) + ", " + in.describe(8));
      p.rp.rot = Cc[1] * 2;
      p.rp.cache_width = Cc[1];
      p.rp.interleaved = interleaved_;
      p.rotary_rows = Cc[0];
      p.position_ids = in.has(9);
      if (p.position_ids && (shape_numel(*in.dims[9]) != B * S || (in.dt[9] != DataType::kInt64 && in.dt[9] != DataType::kInt32)))
        return invalid_argument("position_ids must be int64/int32 (batch, seq), got " + in.describe(9));
    }
    if (output_qk) return not_implemented("output_qk is not supported");
    p.bias = in.has(10);
    if (p.bias) {
      // Its last dim must also cover the longest past + S: checked in read_lengths.
      const Dims& ab = *in.dims[10];
      if (ab.size() != 4 || (ab[0] != B && ab[0] != 1) || (ab[1] != H_ && ab[1] != 1) || ab[2] != S)
        return invalid_argument("attention_bias must be (batch or 1, num_heads or 1, " + std::to_string(S) + ", total_sequence_length), got " + in.describe(10));
      p.ab_len = ab[3];
      p.ab_b = ab[0] == 1 ? 0 : ab[1] * S * ab[3];
      p.ab_h = ab[1] == 1 ? 0 : S * ab[3];
      p.ab_t = ab[3];
    }

    const bool fast = !reference_ && dt == DataType::kFloat && present_k && present_v;
    p.path = !fast ? GqaPath::kReference : S == 1 ? GqaPath::kDecode : GqaPath::kRows;
    p.decode_kernel = GqaDecodeKernel::kPlain;
#if defined(__x86_64__) || defined(__i386__)
    // A float16 cache takes the same loops, whose loads widen it (AVX-512: vcvtph2ps is AVX512F; AVX2:
    // with F16C).
    const bool f16_cache = p.kv_dt == DataType::kFloat16;
    if (decode_avx512_ && gqa_decode_avx512_head_size(D)) p.decode_kernel = GqaDecodeKernel::kAvx512;
    else if (has_avx2() && D % 8 == 0 && (!f16_cache || ep::cpu_has_f16c())) p.decode_kernel = GqaDecodeKernel::kAvx2;
    if (p.path == GqaPath::kDecode && p.decode_kernel != GqaDecodeKernel::kPlain && H_ / kvH_ <= kGqaMaxChunkedGroup) {
      p.seg_rows = gqa_segment_rows(D);
      p.max_segs = gqa_row_segments(p.kv_bound, p.seg_rows, kvH_);
      p.part_floats = static_cast<size_t>((H_ / kvH_) * (D + 2));
    }
#endif
    const int64_t group = H_ / kvH_;
    if (p.path == GqaPath::kRows) {
      p.row_block = std::min<int64_t>(S, kGqaRowBlock);
      p.row_workers = std::max<int64_t>(1, std::min<int64_t>(B * H_, threads));
      const auto round16 = [](size_t n) { return (n + 15) / 16 * 16; };  // 64-byte aligned blocks
      const int64_t rb = p.row_block;
      p.out_block_off = round16(static_cast<size_t>(rb * p.kv_bound));
      p.gemm_off = p.out_block_off + round16(static_cast<size_t>(rb * D));
      // Scores: rows x kend x D (kend <= kv_bound); outputs: rows x D x kend.
      p.gemm_floats = std::max(gemm_scratch_floats_bound(rb, p.kv_bound, D), gemm_scratch_floats_bound(rb, D, p.kv_bound));
      p.worker_floats = p.gemm_off + p.gemm_floats;
      if (p.kv_dt != DataType::kFloat) {
        p.kv_copy_off = round16(p.worker_floats);
        p.worker_floats = p.kv_copy_off + 2 * static_cast<size_t>(p.kv_bound * D);
      }
    }
    ScratchLayout& lay = p.lay;
    p.meta_off = lay.add<int64_t>(2 * B + B * S);
    p.q_off = lay.add<float>(B * H_ * S * D);
    p.k_off = lay.add<float>(B * kvH_ * S * D);
    p.v_off = lay.add<float>(B * kvH_ * S * D);
    if (p.path == GqaPath::kDecode) p.scores_off = lay.add<float>(B * kvH_ * group * p.kv_bound);
    if (p.max_segs > 1) p.parts_off = lay.add<float>(B * kvH_ * p.max_segs * static_cast<int64_t>(p.part_floats));
    if (p.path == GqaPath::kRows) p.rows_off = lay.add<float>(p.row_workers * static_cast<int64_t>(p.worker_floats));
    p.core_fast = p.path == GqaPath::kReference && !reference_;
    if (p.core_fast) {
      p.core = attention_fast_plan(B, H_, S, p.kv_bound, D, D, threads);
      p.core_off = lay.add<float>(static_cast<int64_t>(p.core.bytes() / sizeof(float)));
    }
    if (dt != DataType::kFloat) {
      const size_t inputs[6] = {0, 1, 2, 7, 8, 10};
      for (int i = 0; i < 6; ++i) {
        const size_t k = inputs[i];
        const bool used = in.has(k) && (k != 7 && k != 8 ? true : rotary_);
        if (used) p.in_off[i] = lay.add<float>(shape_numel(*in.dims[k]));
      }
    }
    return Status::Ok();
  }

  // The per-batch past and total lengths from seqlens_k and total_sequence_length (values: checked
  // against the plan's shapes here, every call).
  Status read_lengths(ep::KernelContext& ctx, GqaCall* c) const {
    const GqaPlan& p = *c->plan;
    const int64_t B = p.B, S = p.S;
    const int64_t total = c->total = ctx.input(6).data<int32_t>()[0];
    const int32_t* seqlens = ctx.input(5).data<int32_t>();
    c->first_prompt = S == total;
    c->present_len = std::max(total, p.cap);
    int64_t need_len = 0;
    for (int64_t b = 0; b < B; ++b) {
      const int64_t t = static_cast<int64_t>(seqlens[b]) + 1;
      c->tot[b] = t;
      const int64_t pb = c->first_prompt ? 0 : t - S;
      if (t < 1 || t > total || pb < 0 || pb > p.cap || pb + S > c->present_len)
        return ctx.error("seqlens_k[" + std::to_string(b) + "] = " + std::to_string(seqlens[b]) + " inconsistent with sequence length " +
                         std::to_string(S) + ", total_sequence_length " + std::to_string(total) + " and past length " + std::to_string(p.cap), StatusCode::kInvalidArgument);
      c->past[b] = pb;
      need_len = std::max(need_len, pb + S);
    }
    if (p.bias && p.ab_len < need_len)
      return ctx.error("attention_bias must be (batch or 1, num_heads or 1, " + std::to_string(S) + ", total_sequence_length), got " + c->AB->describe(), StatusCode::kInvalidArgument);
    return Status::Ok();
  }

  // With do_rotary: each new row's position (position_ids, or past + s).
  Status rotary_positions(ep::KernelContext& ctx, GqaCall* c) const {
    if (!rotary_) return Status::Ok();
    const GqaPlan& p = *c->plan;
    const int64_t B = p.B, S = p.S;
    int64_t* pos = c->pos;
    if (p.position_ids) {
      const Tensor& P = ctx.input(9);
      auto pv = [&P](int64_t i) -> int64_t { return P.dtype() == DataType::kInt64 ? P.data<int64_t>()[i] : P.data<int32_t>()[i]; };
      // As documented (and as ORT's CPU kernel does): the first prompt uses only the first element.
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) pos[b * S + s] = c->first_prompt ? pv(0) + s : pv(b * S + s);
    } else {
      for (int64_t b = 0; b < B; ++b)
        for (int64_t s = 0; s < S; ++s) pos[b * S + s] = c->past[b] + s;
    }
    for (int64_t i = 0; i < B * S; ++i)
      if (const int64_t v = pos[i]; v < 0 || v >= p.rotary_rows) return ctx.error("rotary position " + std::to_string(v) + " out of range of cos_cache rows " + std::to_string(p.rotary_rows), StatusCode::kInvalidArgument);
    return Status::Ok();
  }

  // The float arrays (GqaFloats) in the plan's step scratch; float inputs are read in place.
  Status float_inputs(const GqaCall& c, const ScratchLayout& lay, GqaFloats* f) const {
    const GqaPlan& p = *c.plan;
    const bool conv = p.dt != DataType::kFloat;
    f->q = lay.at<float>(p.q_off);
    f->kn = lay.at<float>(p.k_off);
    f->vn = lay.at<float>(p.v_off);
    f->dec_scores = p.path == GqaPath::kDecode ? lay.at<float>(p.scores_off) : nullptr;
    f->dec_parts = p.max_segs > 1 ? lay.at<float>(p.parts_off) : nullptr;
    f->rows = p.path == GqaPath::kRows ? lay.at<float>(p.rows_off) : nullptr;
    f->core = p.core_fast ? lay.at<float>(p.core_off) : nullptr;
    const Tensor* ins[6] = {c.Q, c.K, c.V, c.cos, c.sin, c.AB};
    const float* as_float[6] = {};
    for (int i = 0; i < 6; ++i) {
      if (!ins[i]) continue;
      if (!conv) {
        as_float[i] = ins[i]->data<float>();
        continue;
      }
      float* d = lay.at<float>(p.in_off[i]);
      NXRT_RETURN_IF_ERROR(load_floats(p.dt, ins[i]->raw_data(), ins[i]->numel(), d));
      as_float[i] = d;
    }
    f->qin = as_float[0];
    f->kin = as_float[1];
    f->vin = as_float[2];
    f->cosv = as_float[3];
    f->sinv = as_float[4];
    f->abias = as_float[5];
    f->ab_b = p.ab_b;
    f->ab_h = p.ab_h;
    f->ab_t = p.ab_t;
    return Status::Ok();
  }

  // Q (rotated) into q [B, H, S, D]; the new K rows (rotated) and V rows into kn / vn [B, kvH, S, D].
  void rotate(const GqaCall& c, const GqaFloats& f) const {
    const GqaPlan& p = *c.plan;
    const int64_t S = p.S, D = p.D;
    const int64_t qkv_row = p.packed ? (H_ + 2 * kvH_) * D : H_ * D;
    const RotaryParams& rp = p.rp;
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t s = 0; s < S; ++s) {
        const float* row = f.qin + (b * S + s) * qkv_row;
        const float* krow = p.packed ? row + H_ * D : f.kin + (b * S + s) * kvH_ * D;
        const float* vrow = p.packed ? row + (H_ + kvH_) * D : f.vin + (b * S + s) * kvH_ * D;
        const int64_t ps = rotary_ ? c.pos[b * S + s] : 0;
        for (int64_t h = 0; h < H_; ++h) {
          float* dst = f.q + ((b * H_ + h) * S + s) * D;
          if (rotary_) rotate_head(row + h * D, dst, D, f.cosv + ps * rp.cache_width, f.sinv + ps * rp.cache_width, rp);
          else std::copy(row + h * D, row + (h + 1) * D, dst);
        }
        for (int64_t h = 0; h < kvH_; ++h) {
          float* kd = f.kn + ((b * kvH_ + h) * S + s) * D;
          if (rotary_) rotate_head(krow + h * D, kd, D, f.cosv + ps * rp.cache_width, f.sinv + ps * rp.cache_width, rp);
          else std::copy(krow + h * D, krow + (h + 1) * D, kd);
          std::copy(vrow + h * D, vrow + (h + 1) * D, f.vn + ((b * kvH_ + h) * S + s) * D);
        }
      }
  }

  // present = the past rows (unless present shares the past's buffer) then the new rows; rows past
  // each batch's end zeroed.
  void append(const GqaCall& c, Tensor* pres, const Tensor* pst, const float* rows) const {
    if (!pres) return;
    const GqaPlan& p = *c.plan;
    const int64_t S = p.S, D = p.D, len = c.present_len;
    const size_t es = static_cast<size_t>(dtype_bits(p.kv_dt) / 8);
    const bool shared = pst && pres->raw_data() == pst->raw_data();
    uint8_t* base = static_cast<uint8_t*>(pres->raw_data());
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t h = 0; h < kvH_; ++h) {
        const int64_t pb = c.past[b];
        const int64_t head_off = (b * kvH_ + h) * len * D;
        if (!shared) {
          if (pb > 0) std::memcpy(base + head_off * es, static_cast<const uint8_t*>(pst->raw_data()) + (b * kvH_ + h) * p.cap * D * es, static_cast<size_t>(pb * D) * es);
          std::memset(base + (head_off + (pb + S) * D) * es, 0, static_cast<size_t>((len - pb - S) * D) * es);
        }
        if (S * D > 0) (void)store_floats(rows + (b * kvH_ + h) * S * D, S * D, p.kv_dt, base + (head_off + pb * D) * es);
      }
  }

  float scale(int64_t D) const { return scale_ != 0.f ? scale_ : 1.f / std::sqrt(static_cast<float>(D)); }

  // Softcap and bias of the decode scores of keys [start, start + n) of KV head hk's group (rows of n at
  // sc).
  void adjust_decode_scores(const GqaFloats& f, int64_t b, int64_t hk, int64_t group, int64_t start, int64_t n,
                            float* sc) const {
    if (softcap_ <= 0.f && !f.abias) return;
    for (int64_t g = 0; g < group; ++g) {
      float* r = sc + g * n;
      const int64_t h = hk * group + g;
      if (softcap_ > 0.f)
        for (int64_t j = 0; j < n; ++j) r[j] = softcap_ * std::tanh(r[j] / softcap_);
      if (f.abias) {
        const float* a = f.abias + b * f.ab_b + h * f.ab_h + start;
        for (int64_t j = 0; j < n; ++j) r[j] += a[j];
      }
    }
  }

  // Softcap, bias and softmax of the decode scores of KV head hk's group (rows of n at sc).
  void finish_decode_scores(const GqaFloats& f, int64_t b, int64_t hk, int64_t group, int64_t start, int64_t n,
                            float* sc, GqaDecodeKernel kernel) const {
    adjust_decode_scores(f, b, hk, group, start, n, sc);
    for (int64_t g = 0; g < group; ++g) {
      float* r = sc + g * n;
#if defined(__x86_64__) || defined(__i386__)
      if (kernel == GqaDecodeKernel::kAvx512) {
        softmax_row_avx512(r, n);
        continue;
      }
#endif
      softmax_row(r, n);
    }
  }

  // Single-token decode over the float present buffers: per (batch, KV head), each cached K/V row is
  // read once for the whole group of query heads sharing it. Threads over (batch, KV head), each item
  // with its own score rows (group * kv_bound floats), so the split does not change results. The plan
  // chose the loops: on AVX-512 (the kernel's tier, chosen at creation) head sizes 64/96/128 take
  // gqa_*_avx512, elsewhere AVX2 takes head sizes divisible by 8; both go through gqa_decode_chunked
  // (groups up to kGqaMaxChunkedGroup heads), the plain loops and larger groups through whole rows.
  // A float16 cache (KV = uint16_t) takes the same loops, widening each element as it loads it.
  void attend_decode(ep::KernelContext& ctx, const GqaCall& c, const GqaFloats& f, const Tensor& presK,
                     const Tensor& presV, Tensor* Y) const {
    if (c.plan->kv_dt == DataType::kFloat16) return attend_decode_t<uint16_t>(ctx, c, f, presK, presV, Y);
    attend_decode_t<float>(ctx, c, f, presK, presV, Y);
  }
  template <typename KV>
  void attend_decode_t(ep::KernelContext& ctx, const GqaCall& c, const GqaFloats& f, const Tensor& presK,
                       const Tensor& presV, Tensor* Y) const {
    const GqaPlan& p = *c.plan;
    const int64_t D = p.D, present_len = c.present_len;
    const KV* kbase = static_cast<const KV*>(presK.raw_data());
    const KV* vbase = static_cast<const KV*>(presV.raw_data());
    float* ybase = Y->data<float>();
    const float sc_mul = scale(D);
    const int64_t group = H_ / kvH_;
    const GqaDecodeKernel kernel = p.decode_kernel;
#if defined(__x86_64__) || defined(__i386__)
    if (p.seg_rows > 0) return attend_decode_segments<KV>(ctx, c, f, kbase, vbase, ybase);
#endif
    auto work = [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        const int64_t b = w / kvH_, hk = w % kvH_;
        int64_t start, n;
        decode_keys(c, b, &start, &n);
        const KV* kh = kbase + (b * kvH_ + hk) * present_len * D;
        const KV* vh = vbase + (b * kvH_ + hk) * present_len * D;
        float* sc = f.dec_scores + w * group * p.kv_bound;
        const float* q0 = f.q + (b * H_ + hk * group) * D;  // S == 1: heads are consecutive rows
        float* yo = ybase + b * H_ * D + hk * group * D;    // the group's output rows, consecutive
#if defined(__x86_64__) || defined(__i386__)
        if (kernel == GqaDecodeKernel::kAvx512) {
          gqa_scores_avx512_any(q0, group, kh + start * D, n, D, sc_mul, sc, vh + start * D);
          finish_decode_scores(f, b, hk, group, start, n, sc, kernel);
          gqa_pv_avx512_any(sc, group, n, n, vh + start * D, D, yo, false);
          continue;
        }
        if (kernel == GqaDecodeKernel::kAvx2) {
          scores_avx2(q0, group, kh + start * D, n, D, sc_mul, sc, vh + start * D);
          finish_decode_scores(f, b, hk, group, start, n, sc, kernel);
          pv_avx2(sc, group, n, n, vh + start * D, D, yo, false);
          continue;
        }
#endif
        if constexpr (std::is_same_v<KV, float>) {
          for (int64_t g = 0; g < group; ++g)
            for (int64_t j = 0; j < n; ++j) sc[g * n + j] = dotf(q0 + g * D, kh + (start + j) * D, D) * sc_mul;
        } else {
          for (int64_t g = 0; g < group; ++g)
            for (int64_t j = 0; j < n; ++j) {
              const KV* kr = kh + (start + j) * D;
              float acc = 0.f;
              for (int64_t d = 0; d < D; ++d) acc += q0[g * D + d] * half_to_float(kr[d]);
              sc[g * n + j] = acc * sc_mul;
            }
        }
        finish_decode_scores(f, b, hk, group, start, n, sc, kernel);
        std::fill(yo, yo + group * D, 0.f);
        for (int64_t g = 0; g < group; ++g)
          for (int64_t j = 0; j < n; ++j) {
            const float pj = sc[g * n + j];
            if (pj == 0.f) continue;
            if constexpr (std::is_same_v<KV, float>) {
              axpyf(pj, vh + (start + j) * D, yo + g * D, D);
            } else {
              const KV* vr = vh + (start + j) * D;
              for (int64_t d = 0; d < D; ++d) yo[g * D + d] += pj * half_to_float(vr[d]);
            }
          }
      }
    };
    ctx.pool().parallel_for(p.B * kvH_, 1, work);
  }

#if defined(__x86_64__) || defined(__i386__)
  // The decode step through gqa_decode_chunked (the plan set seg_rows): work items are (batch, KV head,
  // segment; gqa_row_segments equal parts of the row); a row in one segment is written straight to the
  // output, a longer one's segments leave parts that gqa_merge_segments combines in order after the
  // loop. Each item's scores go in its own group * min(chunk, kv_bound) floats of dec_scores (items *
  // that <= the group * kv_bound per (batch, KV head) the plan laid out: segments come only past 4
  // chunks).
  template <typename KV>
  void attend_decode_segments(ep::KernelContext& ctx, const GqaCall& c, const GqaFloats& f, const KV* kbase,
                              const KV* vbase, float* ybase) const {
    const GqaPlan& p = *c.plan;
    const int64_t D = p.D, present_len = c.present_len, group = H_ / kvH_;
    const float sc_mul = scale(D);
    const int64_t chunk_floats = group * std::min(gqa_chunk_rows(D), p.kv_bound);
    auto segments_of = [&](int64_t n) { return gqa_row_segments(n, p.seg_rows, kvH_); };
    int64_t segs = 1;  // this call's most segments of a row (<= max_segs)
    for (int64_t b = 0; b < p.B; ++b) {
      int64_t start, n;
      decode_keys(c, b, &start, &n);
      segs = std::max(segs, segments_of(n));
    }
    auto work = [&](int64_t i0, int64_t i1) {
      for (int64_t it = i0; it < i1; ++it) {
        const int64_t w = it / segs, sg = it % segs;
        const int64_t b = w / kvH_, hk = w % kvH_;
        int64_t start, n;
        decode_keys(c, b, &start, &n);
        const int64_t own = segments_of(n);
        if (sg >= own) continue;
        // Segments of equal size (a multiple of 4 keys), so a row just past a segment splits in halves
        // rather than leaving one item a few keys: a function of n alone.
        const int64_t per = own == 1 ? n : ((n + own - 1) / own + 3) / 4 * 4;
        const int64_t j0 = sg * per, len = std::max<int64_t>(0, std::min(per, n - j0));
        const KV* kh = kbase + (b * kvH_ + hk) * present_len * D + (start + j0) * D;
        const KV* vh = vbase + (b * kvH_ + hk) * present_len * D + (start + j0) * D;
        float* sc = f.dec_scores + it * chunk_floats;
        const float* q0 = f.q + (b * H_ + hk * group) * D;  // S == 1: heads are consecutive rows
        auto adjust = [&](float* s, int64_t k0, int64_t klen) {
          adjust_decode_scores(f, b, hk, group, start + j0 + k0, klen, s);
        };
        float* yo = ybase + b * H_ * D + hk * group * D;  // the group's output rows, consecutive
        float* part = own == 1 ? nullptr : f.dec_parts + it * p.part_floats;
        float* y = part ? part : yo;
        float* m_out = part ? part + group * D : nullptr;
        float* l_out = part ? m_out + group : nullptr;
        if (p.decode_kernel == GqaDecodeKernel::kAvx512)
          gqa_decode_chunked<GqaAvx512Loops>(q0, group, kh, vh, len, D, sc_mul, sc, y, adjust, m_out, l_out);
        else
          gqa_decode_chunked<GqaAvx2Loops>(q0, group, kh, vh, len, D, sc_mul, sc, y, adjust, m_out, l_out);
      }
    };
    ctx.pool().parallel_for(p.B * kvH_ * segs, 1, work);
    if (segs == 1) return;
    for (int64_t w = 0; w < p.B * kvH_; ++w) {
      const int64_t b = w / kvH_, hk = w % kvH_;
      int64_t start, n;
      decode_keys(c, b, &start, &n);
      const int64_t own = segments_of(n);
      if (own > 1)
        gqa_merge_segments(f.dec_parts + w * segs * p.part_floats, p.part_floats, own, group, D,
                           ybase + b * H_ * D + hk * group * D);
    }
  }
#endif

  // The keys batch row b's decode query (S == 1) sees: [*start, *start + *n) of its cache, the causal or
  // total-length limit and the local window applied (n <= past + 1 <= kv_bound).
  void decode_keys(const GqaCall& c, int64_t b, int64_t* start, int64_t* n) const {
    const int64_t L = c.past[b] + 1;
    const int64_t lim = causal_ ? L : std::min(L, c.tot[b]);
    *start = window_ > 0 && L > window_ ? L - window_ : 0;
    *n = std::max<int64_t>(0, lim - *start);
  }

  // The softcap, bias, window/causal limits and softmax of score row i (query row i of the block
  // starting at i0) over keys [0, kend).
  void finish_score_row(const GqaCall& c, const GqaFloats& f, int64_t b, int64_t h, int64_t i, int64_t kend,
                        float* r) const {
    const int64_t pb = c.past[b], Lb = pb + c.plan->S;
    const int64_t L = pb + i + 1;
    const int64_t lim = std::min(kend, causal_ ? L : std::min(Lb, c.tot[b]));
    const int64_t start = window_ > 0 && L > window_ ? L - window_ : 0;
    if (softcap_ > 0.f)
      for (int64_t j = start; j < lim; ++j) r[j] = softcap_ * std::tanh(r[j] / softcap_);
    if (f.abias) {
      const float* a = f.abias + b * f.ab_b + h * f.ab_h + i * f.ab_t;
      for (int64_t j = start; j < lim; ++j) r[j] += a[j];
    }
    std::fill(r, r + std::min(start, kend), 0.f);
    if (lim > start) {
#if defined(__x86_64__) || defined(__i386__)
      if (decode_avx512_) softmax_row_avx512(r + start, lim - start);
      else
#endif
        softmax_row(r + start, lim - start);
    }
    if (lim < kend) std::fill(r + std::max(lim, start), r + kend, 0.f);
  }

  // Multi-row steps (prefill, chunks) straight over the float present buffers (no copy of the cache).
  // Query rows go in blocks whose scores cover only the keys the block's rows can see (causal: past +
  // last row of the block), so about half of a prompt's score matrix is never computed, and the score
  // block stays in cache. (batch, head) pairs go in the plan's fixed ranges, one per worker, each with
  // its own blocks and GEMM packing slot; a pair's arithmetic does not depend on the split.
  void attend_rows(ep::KernelContext& ctx, const GqaCall& c, const GqaFloats& f, const Tensor& presK,
                   const Tensor& presV, Tensor* Y) const {
    const GqaPlan& p = *c.plan;
    const int64_t S = p.S, D = p.D, present_len = c.present_len;
    const bool f16_cache = p.kv_dt == DataType::kFloat16;
    const float* kbase = f16_cache ? nullptr : presK.data<float>();
    const float* vbase = f16_cache ? nullptr : presV.data<float>();
    const uint16_t* kbase16 = f16_cache ? static_cast<const uint16_t*>(presK.raw_data()) : nullptr;
    const uint16_t* vbase16 = f16_cache ? static_cast<const uint16_t*>(presV.raw_data()) : nullptr;
    float* ybase = Y->data<float>();
    const float sc_mul = scale(D);
    const int64_t group = H_ / kvH_;
    const int64_t rb = p.row_block;
    const int64_t n = p.B * H_;
    const int64_t workers = p.row_workers;
    auto work = [&](int64_t k0, int64_t k1) {
      for (int64_t wk = k0; wk < k1; ++wk) {
        float* sc_buf = f.rows + static_cast<size_t>(wk) * p.worker_floats;
        float* o_buf = sc_buf + p.out_block_off;
        const GemmScratch gemm_slot{sc_buf + p.gemm_off, p.gemm_floats, 1};
        int64_t copied = -1;  // the (batch, KV head) whose float16 rows this worker widened last
        for (int64_t w = wk * n / workers; w < (wk + 1) * n / workers; ++w) {
          const int64_t b = w / H_, h = w % H_, hk = h / group;
          const int64_t pb = c.past[b];
          const int64_t Lb = pb + S;  // <= kv_bound
          const float* kh;
          const float* vh;
          if (f16_cache) {
            // A KV head's query heads are consecutive items: widen its rows once per worker.
            float* kc = sc_buf + p.kv_copy_off;
            float* vc = kc + p.kv_bound * D;
            if (copied != b * kvH_ + hk) {
              const size_t off = static_cast<size_t>((b * kvH_ + hk) * present_len * D);
              (void)load_floats(DataType::kFloat16, kbase16 + off, Lb * D, kc);
              (void)load_floats(DataType::kFloat16, vbase16 + off, Lb * D, vc);
              copied = b * kvH_ + hk;
            }
            kh = kc;
            vh = vc;
          } else {
            kh = kbase + (b * kvH_ + hk) * present_len * D;
            vh = vbase + (b * kvH_ + hk) * present_len * D;
          }
          const float* qh = f.q + (b * H_ + h) * S * D;
          for (int64_t i0 = 0; i0 < S; i0 += rb) {
            const int64_t i1 = std::min(S, i0 + rb), rows = i1 - i0;
            const int64_t kend = causal_ ? std::min(Lb, pb + i1) : Lb;
            float* sc = sc_buf;
            gemm_f32(false, true, rows, kend, D, sc_mul, qh + i0 * D, D, kh, D, 0.f, sc, kend, nullptr, nullptr,
                     ep::cpu_isa_tier(), &gemm_slot);
            for (int64_t i = i0; i < i1; ++i) finish_score_row(c, f, b, h, i, kend, sc + (i - i0) * kend);
            float* out = o_buf;
            gemm_f32(false, false, rows, D, kend, 1.f, sc, kend, vh, D, 0.f, out, D, nullptr, nullptr, ep::cpu_isa_tier(),
                     &gemm_slot);
            for (int64_t i = i0; i < i1; ++i)
              std::copy(out + (i - i0) * D, out + (i - i0 + 1) * D, ybase + (b * S + i) * H_ * D + h * D);
          }
        }
      }
    };
    if (workers > 1) {
      ctx.pool().parallel_for(workers, 1, work);
    } else {
      work(0, 1);
    }
  }

  // The reference core (any float dtype; reference=1; present not requested): float K/V over the keys
  // the problem reads, [B, kvH, Tm, D] with Tm = max over batches of past + S, and masks for the
  // window and the bias.
  Status attend_reference(ep::KernelContext& ctx, const GqaCall& c, const GqaFloats& f, Tensor* Y) const {
    const GqaPlan& pl = *c.plan;
    const int64_t B = pl.B, S = pl.S, D = pl.D;
    int64_t Tm = 0;
    for (int64_t b = 0; b < B; ++b) Tm = std::max(Tm, c.past[b] + S);
    std::vector<float> kf(static_cast<size_t>(B * kvH_ * Tm * D), 0.f), vf(kf.size(), 0.f);
    const size_t es = static_cast<size_t>(dtype_bits(pl.kv_dt) / 8);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < kvH_; ++h) {
        const int64_t pb = c.past[b];
        float* kd = kf.data() + (b * kvH_ + h) * Tm * D;
        float* vd = vf.data() + (b * kvH_ + h) * Tm * D;
        if (pb > 0) {
          const size_t src = static_cast<size_t>((b * kvH_ + h) * pl.cap * D) * es;
          NXRT_RETURN_IF_ERROR(load_floats(pl.kv_dt, static_cast<const uint8_t*>(c.PK->raw_data()) + src, pb * D, kd));
          NXRT_RETURN_IF_ERROR(load_floats(pl.kv_dt, static_cast<const uint8_t*>(c.PV->raw_data()) + src, pb * D, vd));
        }
        std::copy(f.kn + (b * kvH_ + h) * S * D, f.kn + (b * kvH_ + h + 1) * S * D, kd + pb * D);
        std::copy(f.vn + (b * kvH_ + h) * S * D, f.vn + (b * kvH_ + h + 1) * S * D, vd + pb * D);
        if (pl.kv_dt == DataType::kFloat16) {
          // The new rows as a float16 cache holds them (what the other paths read back from present).
          for (int64_t i = pb * D; i < (pb + S) * D; ++i) {
            kd[i] = half_to_float(float_to_half(kd[i]));
            vd[i] = half_to_float(float_to_half(vd[i]));
          }
        }
      }
    AttnProblem<float> p;
    p.B = B; p.Hq = H_; p.Hkv = kvH_; p.Sq = S; p.T = Tm; p.D = D; p.Dv = D;
    p.scale = scale(D);
    p.softcap = softcap_;
    p.q = f.q; p.k = kf.data(); p.v = vf.data();
    std::vector<int64_t> offs(c.past, c.past + B), nonpad(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) nonpad[static_cast<size_t>(b)] = std::min(Tm, c.past[b] + S);
    if (causal_) {
      p.causal = true;
      p.causal_offset = offs.data();
    } else {
      for (int64_t b = 0; b < B; ++b) nonpad[static_cast<size_t>(b)] = std::min(nonpad[static_cast<size_t>(b)], c.tot[b]);
    }
    p.nonpad = nonpad.data();
    std::vector<float> mask;
    if (window_ > 0 || f.abias) {
      const int64_t Hb = f.abias ? H_ : 1;
      mask.assign(static_cast<size_t>(B * Hb * S * Tm), 0.f);
      if (f.abias) {
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H_; ++h)
            for (int64_t s = 0; s < S; ++s)
              for (int64_t j = 0; j < Tm; ++j)
                mask[static_cast<size_t>(((b * H_ + h) * S + s) * Tm + j)] = f.abias[static_cast<size_t>(b * f.ab_b + h * f.ab_h + s * f.ab_t + j)];
      }
      if (window_ > 0) {
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < Hb; ++h)
            for (int64_t s = 0; s < S; ++s) {
              const int64_t L = c.past[b] + s + 1;
              const int64_t start = L > window_ ? L - window_ : 0;  // the last local_window_size keys (as ORT's CPU kernel)
              float* m = mask.data() + ((b * Hb + h) * S + s) * Tm;
              for (int64_t j = 0; j < std::min(start, Tm); ++j) m[j] = -kInf;
            }
      }
      p.mask = mask.data();
      p.mask_sb = Hb * S * Tm;
      p.mask_sh = Hb == 1 ? 0 : S * Tm;
      p.mask_si = Tm;
      p.mask_len = Tm;
    }
    return run_core(ctx, p, Y, reference_, pl.core_fast ? &pl.core : nullptr, f.core);
  }

  int64_t H_ = 0, kvH_ = 0, window_ = -1;
  float scale_ = 0.f, softcap_ = 0.f;
  bool rotary_ = false, interleaved_ = false, causal_ = true, reference_ = false;
  bool decode_avx512_ = false;  // the tier (overrides().isa(), at creation) allows the AVX-512 decode step and softmax rows
};

// ---------------------------------------------------------------------------------------------
// MultiHeadAttention and com.microsoft Attention (ORT's BERT/GPT-2 attention). A call is planned from
// its inputs' dtypes and shapes (OrtAttnPlan: once per shape set at specialize, or per call without a
// variant: one code path), then compute fills Q and the past + new K/V rows head-major, the additive
// mask, and runs the core, every buffer in the plan's step scratch. Mask contents and padding lengths
// are values, read at compute.

// ORT's mask index (Attention's mask_index, MultiHeadAttention's key_padding_mask): int32, one of these.
enum class OrtMaskKind {
  kNone,
  kEnd,       // (B): keys [end_b, T) masked (right padding)
  kStartEnd,  // (2B): keys [end_b, T) and [0, start_b) masked
  kKeys,      // (B, T): key t of batch b masked where m[b, t] <= 0
  kFull,      // (B, S, T): per query row
};

// How MultiHeadAttention's key and value arrive.
enum class MhaKv {
  kPackedQkv,  // query (B, S, N, 3, H) holds all three
  kPackedKv,   // key (B, L, N, 2, H) holds both
  kBnsh,       // key/value already (B, N, L, H / Hv): cross attention reusing a cache, no bias on them
  kSeparate,   // key (B, L, N * H), value (B, L, N * Hv)
};

// The dtypes and shapes a plan reads, from a SpecializeContext or from a call's inputs (kUndefined:
// absent or not a tensor).
struct OrtInputFacts {
  static constexpr size_t kInputs = 10;
  DataType dt[kInputs] = {};
  const Dims* dims[kInputs] = {};
  bool has(size_t i) const { return i < kInputs && dt[i] != DataType::kUndefined; }
  const Dims& shape(size_t i) const { return *dims[i]; }
  size_t rank(size_t i) const { return dims[i]->size(); }
  int64_t dim(size_t i, size_t d) const { return (*dims[i])[d]; }
  int64_t numel(size_t i) const { return shape_numel(*dims[i]); }
  std::string describe(size_t i) const {
    return has(i) ? std::string(dtype_name(dt[i])) + shape_to_string(*dims[i]) : std::string("none");
  }
  static OrtInputFacts of(const ep::SpecializeContext& sc) {
    OrtInputFacts in;
    for (size_t i = 0; i < kInputs; ++i) {
      in.dt[i] = sc.has_input(i) ? sc.dtype(i) : DataType::kUndefined;
      in.dims[i] = &sc.shape(i);
    }
    return in;
  }
  static OrtInputFacts of(const ep::KernelContext& ctx) {
    static const Dims kNoDims;
    OrtInputFacts in;
    for (size_t i = 0; i < kInputs; ++i) {
      const Value* v = ctx.input_value(i);
      const bool t = v && v->is_tensor();
      in.dt[i] = t ? v->tensor().dtype() : DataType::kUndefined;
      in.dims[i] = t ? &v->tensor().shape() : &kNoDims;
    }
    return in;
  }
};

// Everything a MultiHeadAttention or com.microsoft Attention call decides from its inputs' dtypes and
// shapes: the validated dimensions and layouts, the mask kind and attention_bias broadcast, the core's
// work split, and one scratch layout for every per-call buffer.
struct OrtAttnPlan {
  DataType dt = DataType::kFloat;
  int64_t B = 0, N = 0, S = 0, L = 0, P = 0, T = 0, H = 0, Hv = 0;  // T = P + L keys
  OrtMaskKind mask = OrtMaskKind::kNone;
  bool causal = false;
  bool ab = false;               // attention_bias (input 5) given
  int64_t ab_sb = 0, ab_sh = 0;  // its batch and head strides (0: broadcast)
  bool masked() const { return mask != OrtMaskKind::kNone || causal || ab; }
  // The mask buffer: [B, S, T], or [B, N, S, T] with attention_bias.
  int64_t mask_heads() const { return ab ? N : 1; }
  bool fast = false;  // the fast core (not reference=1) on `core`
  AttnFastPlan core;
  // MultiHeadAttention: the K/V layout and whether a bias (input 3) and past (6, 7) are given.
  MhaKv kv = MhaKv::kSeparate;
  bool bias = false;
  // com.microsoft Attention: the projection [B * S, Din] x [Din, Dt] and q/k hidden size; its GEMM
  // packing slots (one per thread).
  int64_t Din = 0, Dt = 0, qk_hidden = 0;
  GemmSlots gemm;
  // Step scratch: q [B, N, S, H], k [B, N, T, H], v [B, N, T, Hv] (past rows first), the mask, the
  // core's output y [B, N, S, Hv], the fast core's blocks, Attention's projection and GEMM slots, and
  // float copies of inputs of another float dtype (conv[i]; float inputs are read in place).
  ScratchLayout lay;
  size_t q_off = 0, k_off = 0, v_off = 0, mask_off = 0, y_off = 0, core_off = 0, proj_off = 0;
  bool conv[OrtInputFacts::kInputs] = {};
  size_t conv_off[OrtInputFacts::kInputs] = {};
};

struct OrtAttnVariant final : ep::KernelVariant {
  OrtAttnPlan plan;
  size_t workspace_bytes() const override { return plan.lay.bytes(); }
};

// Input i is read as floats: in place when float32, else through a float copy in the step scratch.
Status plan_float_input(const OrtInputFacts& in, size_t i, const char* name, OrtAttnPlan* p) {
  const DataType t = in.dt[i];
  if (t != DataType::kFloat && t != DataType::kFloat16 && t != DataType::kBFloat16 && t != DataType::kDouble)
    return invalid_argument(std::string(name) + " must be a float tensor, got " + in.describe(i));
  if (t != DataType::kFloat) {
    p->conv[i] = true;
    p->conv_off[i] = p->lay.add<float>(in.numel(i));
  }
  return Status::Ok();
}

Result<const float*> input_floats(const OrtAttnPlan& p, const ScratchLayout& lay, const Tensor& t, size_t i) {
  if (!p.conv[i]) return t.data<float>();
  float* d = lay.at<float>(p.conv_off[i]);
  NXRT_RETURN_IF_ERROR(load_floats(t.dtype(), t.raw_data(), t.numel(), d));
  return static_cast<const float*>(d);
}

// The mask index (input mi) and attention_bias (input 5) against the plan's B, N, S, T; then the shared
// buffers: q, k, v, mask, y and the fast core's blocks (planned for `threads`).
Status plan_mask_and_core(const OrtInputFacts& in, size_t mi, bool reference, int threads, OrtAttnPlan* out) {
  OrtAttnPlan& p = *out;
  const int64_t B = p.B, S = p.S, T = p.T, N = p.N;
  if (in.has(mi)) {
    if (in.dt[mi] != DataType::kInt32) return invalid_argument("mask must be int32, got " + in.describe(mi));
    const Dims& m = in.shape(mi);
    if (m.size() == 3) {
      if (m != Dims{B, S, T})
        return invalid_argument("3-D mask must be (batch, seq, total_seq) = " + shape_to_string(Dims{B, S, T}) + ", got " + in.describe(mi));
      p.mask = OrtMaskKind::kFull;
    } else if (m.size() == 2) {
      if (m != Dims{B, T})
        return invalid_argument("2-D mask must be (batch, total_seq) = " + shape_to_string(Dims{B, T}) + ", got " + in.describe(mi));
      p.mask = OrtMaskKind::kKeys;
    } else if (m.size() == 1 && (m[0] == B || m[0] == 2 * B)) {
      p.mask = m[0] == 2 * B ? OrtMaskKind::kStartEnd : OrtMaskKind::kEnd;
    } else {
      return not_implemented("unsupported mask shape " + in.describe(mi) + " (supported: (B), (2B), (B, T), (B, S, T))");
    }
  }
  if (in.has(5)) {
    const Dims& a = in.shape(5);
    if (a.size() != 4 || (a[0] != B && a[0] != 1) || (a[1] != N && a[1] != 1) || a[2] != S || a[3] != T)
      return invalid_argument("attention_bias must be (batch or 1, heads or 1, " + std::to_string(S) + ", " +
                              std::to_string(T) + "), got " + in.describe(5));
    NXRT_RETURN_IF_ERROR(plan_float_input(in, 5, "attention_bias", &p));
    p.ab = true;
    p.ab_sb = a[0] == 1 ? 0 : a[1] * S * T;
    p.ab_sh = a[1] == 1 ? 0 : S * T;
  }
  ScratchLayout& lay = p.lay;
  p.q_off = lay.add<float>(B * N * S * p.H);
  p.k_off = lay.add<float>(B * N * T * p.H);
  p.v_off = lay.add<float>(B * N * T * p.Hv);
  if (p.masked()) p.mask_off = lay.add<float>(B * p.mask_heads() * S * T);
  p.y_off = lay.add<float>(B * N * S * p.Hv);
  p.fast = !reference;
  if (p.fast) {
    p.core = attention_fast_plan(B, N, S, T, p.H, p.Hv, threads);
    p.core_off = lay.add<float>(static_cast<int64_t>(p.core.bytes() / sizeof(float)));
  }
  return Status::Ok();
}

// Rows [0, rows) of src (row r of batch b at (b * rows + r) * row_stride + col0, head h at
// h * head_stride) into dst [B, N, dst_rows, hs] from row row0, plus bias[h * hs + d] when given.
void split_heads(const float* src, int64_t B, int64_t N, int64_t rows, int64_t row_stride, int64_t col0,
                 int64_t head_stride, int64_t hs, const float* bias, float* dst, int64_t dst_rows, int64_t row0) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < N; ++h) {
        const float* s = src + (b * rows + r) * row_stride + col0 + h * head_stride;
        float* d = dst + ((b * N + h) * dst_rows + row0 + r) * hs;
        if (bias) {
          const float* bh = bias + h * hs;
          for (int64_t e = 0; e < hs; ++e) d[e] = s[e] + bh[e];
        } else {
          std::copy(s, s + hs, d);
        }
      }
}

// [B * N] blocks of rows x hs from src into dst [B, N, dst_rows, hs] from row row0.
void copy_head_rows(const float* src, int64_t BN, int64_t rows, int64_t hs, float* dst, int64_t dst_rows, int64_t row0) {
  for (int64_t bh = 0; bh < BN; ++bh)
    std::copy(src + bh * rows * hs, src + (bh + 1) * rows * hs, dst + (bh * dst_rows + row0) * hs);
}

// The additive mask: mask_filter_value where the mask index masks a key or (unidirectional) a key lies
// after past + i, plus attention_bias.
void fill_ort_mask(const OrtAttnPlan& p, float filter, const int32_t* m, const float* ab, float* out) {
  const int64_t B = p.B, S = p.S, T = p.T, Hm = p.mask_heads();
  for (int64_t b = 0; b < B; ++b) {
    int64_t end = T, st = 0;
    if (p.mask == OrtMaskKind::kEnd || p.mask == OrtMaskKind::kStartEnd) end = std::clamp<int64_t>(m[b], 0, T);
    if (p.mask == OrtMaskKind::kStartEnd) st = std::clamp<int64_t>(m[b + B], 0, T);
    for (int64_t h = 0; h < Hm; ++h)
      for (int64_t s = 0; s < S; ++s) {
        float* r = out + ((b * Hm + h) * S + s) * T;
        switch (p.mask) {
          case OrtMaskKind::kFull:
            for (int64_t t = 0; t < T; ++t) r[t] = m[(b * S + s) * T + t] > 0 ? 0.f : filter;
            break;
          case OrtMaskKind::kKeys:
            for (int64_t t = 0; t < T; ++t) r[t] = m[b * T + t] > 0 ? 0.f : filter;
            break;
          default:
            for (int64_t t = 0; t < T; ++t) r[t] = t < st || t >= end ? filter : 0.f;
            break;
        }
        if (p.causal)
          for (int64_t t = p.P + s + 1; t < T; ++t) r[t] = filter;
        if (ab) {
          const float* a = ab + b * p.ab_sb + h * p.ab_sh + s * T;
          for (int64_t t = 0; t < T; ++t) r[t] += a[t];
        }
      }
  }
}

// The shared tail: the mask from the mask index (input mi) and attention_bias, the core over the plan's
// q/k/v, y into Y [B, S, N * Hv].
Status ort_attend(ep::KernelContext& ctx, const OrtAttnPlan& p, const ScratchLayout& lay, float scale_attr,
                  float filter, size_t mi, Tensor* Y) {
  AttnProblem<float> pr;
  pr.B = p.B; pr.Hq = p.N; pr.Hkv = p.N; pr.Sq = p.S; pr.T = p.T; pr.D = p.H; pr.Dv = p.Hv;
  pr.scale = scale_attr != 0.f ? scale_attr : 1.f / std::sqrt(static_cast<float>(p.H));
  pr.q = lay.at<float>(p.q_off);
  pr.k = lay.at<float>(p.k_off);
  pr.v = lay.at<float>(p.v_off);
  if (p.masked()) {
    const float* ab = nullptr;
    if (p.ab) { NXRT_ASSIGN_OR_RETURN(ab, input_floats(p, lay, ctx.input(5), 5)); }
    const int32_t* m = p.mask != OrtMaskKind::kNone ? ctx.input(mi).data<int32_t>() : nullptr;
    float* mask = lay.at<float>(p.mask_off);
    fill_ort_mask(p, filter, m, ab, mask);
    pr.mask = mask;
    pr.mask_sb = p.mask_heads() * p.S * p.T;
    pr.mask_sh = p.ab ? p.S * p.T : 0;
    pr.mask_si = p.T;
    pr.mask_len = p.T;
  }
  float* y = lay.at<float>(p.y_off);
  pr.y = y;
  if (p.fast) {
    attention_fast(pr, p.core, &ctx.pool(), lay.at<float>(p.core_off));
  } else {
    attention_reference(pr);
  }
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.N; ++h)
      for (int64_t s = 0; s < p.S; ++s)
        NXRT_RETURN_IF_ERROR(store_floats(y + ((b * p.N + h) * p.S + s) * p.Hv, p.Hv, Y->dtype(),
                                          elem_at(*Y, (b * p.S + s) * p.N * p.Hv + h * p.Hv)));
  return Status::Ok();
}

// The plan of a call without a variant, or the context's variant.
template <typename OrtKernel>
Result<const OrtAttnVariant*> ort_variant(const OrtKernel& k, ep::KernelContext& ctx, OrtAttnVariant* local) {
  if (const auto* var = dynamic_cast<const OrtAttnVariant*>(ctx.variant())) return var;
  bool outs[4] = {};
  for (size_t i = 0; i < 4; ++i) outs[i] = ctx.output_requested(i);
  const Status s = k.plan(OrtInputFacts::of(ctx), outs, ctx.pool().num_threads(), &local->plan);
  if (!s.ok()) return plan_error(ctx, s);
  return static_cast<const OrtAttnVariant*>(local);
}

// The variant specialize makes: the kernel's plan at the inputs' dtypes and shapes and the outputs the
// node has.
template <typename OrtKernel>
Result<std::unique_ptr<ep::KernelVariant>> ort_specialize(const OrtKernel& k, const ep::SpecializeContext& sc) {
  bool outs[4] = {};
  for (size_t i = 0; i < 4; ++i) outs[i] = sc.info().output_present(i);
  auto v = std::make_unique<OrtAttnVariant>();
  NXRT_RETURN_IF_ERROR(k.plan(OrtInputFacts::of(sc), outs, sc.num_threads(), &v->plan));
  return std::unique_ptr<ep::KernelVariant>(std::move(v));
}

// ---------------------------------------------------------------------------------------------
// MultiHeadAttention (inputs: query, key, value, bias, key_padding_mask, attention_bias, past_key,
// past_value, past_sequence_length, cache_indirection; outputs: output, present_key, present_value, qk).
class MultiHeadAttention final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    N_ = info.attr_int("num_heads", 0);
    if (N_ <= 0) return info.error("num_heads must be positive");
    filter_ = info.attr_float("mask_filter_value", -10000.f);
    causal_ = info.attr_int("unidirectional", 0) != 0;
    scale_ = info.attr_float("scale", 0.f);
    reference_ = info.overrides().reference();
    return Status::Ok();
  }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    return ort_specialize(*this, sc);
  }

  Status compute(ep::KernelContext& ctx) const override {
    OrtAttnVariant local;
    NXRT_ASSIGN_OR_RETURN(const OrtAttnVariant* var, ort_variant(*this, ctx, &local));
    const OrtAttnPlan& p = var->plan;
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *var));
    ScratchLayout lay = p.lay;
    lay.bind(ws);
    const int64_t B = p.B, N = p.N, S = p.S, L = p.L, P = p.P, T = p.T, H = p.H, Hv = p.Hv;
    float* q = lay.at<float>(p.q_off);
    float* k = lay.at<float>(p.k_off);
    float* v = lay.at<float>(p.v_off);
    NXRT_ASSIGN_OR_RETURN(const float* qin, input_floats(p, lay, ctx.input(0), 0));
    const float* bias = nullptr;
    if (p.bias) { NXRT_ASSIGN_OR_RETURN(bias, input_floats(p, lay, ctx.input(3), 3)); }
    const int64_t hidden = N * H;
    if (p.kv == MhaKv::kPackedQkv) {
      split_heads(qin, B, N, S, N * 3 * H, 0, 3 * H, H, nullptr, q, S, 0);
      split_heads(qin, B, N, S, N * 3 * H, H, 3 * H, H, nullptr, k, T, P);
      split_heads(qin, B, N, S, N * 3 * H, 2 * H, 3 * H, H, nullptr, v, T, P);
    } else {
      split_heads(qin, B, N, S, hidden, 0, H, H, bias, q, S, 0);
      NXRT_ASSIGN_OR_RETURN(const float* kin, input_floats(p, lay, ctx.input(1), 1));
      if (p.kv == MhaKv::kPackedKv) {
        split_heads(kin, B, N, L, N * 2 * H, 0, 2 * H, H, nullptr, k, T, P);
        split_heads(kin, B, N, L, N * 2 * H, H, 2 * H, H, nullptr, v, T, P);
      } else {
        NXRT_ASSIGN_OR_RETURN(const float* vin, input_floats(p, lay, ctx.input(2), 2));
        if (p.kv == MhaKv::kBnsh) {
          copy_head_rows(kin, B * N, L, H, k, T, P);
          copy_head_rows(vin, B * N, L, Hv, v, T, P);
        } else {
          split_heads(kin, B, N, L, hidden, 0, H, H, bias ? bias + hidden : nullptr, k, T, P);
          split_heads(vin, B, N, L, N * Hv, 0, Hv, Hv, bias ? bias + 2 * hidden : nullptr, v, T, P);
        }
      }
    }
    if (P > 0) {
      NXRT_ASSIGN_OR_RETURN(const float* pk, input_floats(p, lay, ctx.input(6), 6));
      NXRT_ASSIGN_OR_RETURN(const float* pv, input_floats(p, lay, ctx.input(7), 7));
      copy_head_rows(pk, B * N, P, H, k, T, 0);
      copy_head_rows(pv, B * N, P, Hv, v, T, 0);
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, p.dt, Dims{B, S, N * Hv}));
    if (ctx.output_requested(1)) {
      NXRT_ASSIGN_OR_RETURN(Tensor * pk, ctx.allocate_output(1, p.dt, Dims{B, N, T, H}));
      NXRT_RETURN_IF_ERROR(store_floats(k, B * N * T * H, p.dt, pk->raw_data()));
    }
    if (ctx.output_requested(2)) {
      NXRT_ASSIGN_OR_RETURN(Tensor * pv, ctx.allocate_output(2, p.dt, Dims{B, N, T, Hv}));
      NXRT_RETURN_IF_ERROR(store_floats(v, B * N * T * Hv, p.dt, pv->raw_data()));
    }
    return ort_attend(ctx, p, lay, scale_, filter_, 4, Y);
  }

  // The plan for these input dtypes and shapes (see OrtAttnPlan); an error for inputs the op rejects
  // whatever their values. outs: which outputs are requested; threads: the pool compute runs on.
  Status plan(const OrtInputFacts& in, const bool outs[4], int threads, OrtAttnPlan* out) const {
    OrtAttnPlan& p = *out;
    const int64_t N = p.N = N_;
    p.causal = causal_;
    if (!in.has(0)) return invalid_argument("query is required");
    const DataType dt = p.dt = in.dt[0];
    if (!is_attn_float(dt)) return invalid_argument(std::string("query must be float32/float16/bfloat16, got ") + dtype_name(dt));
    if (in.has(8) || in.has(9)) return not_implemented("past_sequence_length/cache_indirection are not supported");
    if (outs[3]) return not_implemented("qk output is not supported");
    if (in.rank(0) < 2) return invalid_argument("query must be (batch, seq, num_heads * head_size), got " + in.describe(0));
    const int64_t B = p.B = in.dim(0, 0), S = p.S = in.dim(0, 1);
    NXRT_RETURN_IF_ERROR(plan_float_input(in, 0, "query", &p));
    const bool has_k = in.has(1), has_v = in.has(2);
    if (in.rank(0) == 5) {
      if (has_k || has_v || in.dim(0, 2) != N || in.dim(0, 3) != 3)
        return invalid_argument("packed QKV must be (batch, seq, num_heads, 3, head_size) without key/value, got " + in.describe(0));
      p.kv = MhaKv::kPackedQkv;
      p.H = p.Hv = in.dim(0, 4);
      p.L = S;
    } else {
      if (in.rank(0) != 3 || in.dim(0, 2) % N)
        return invalid_argument("query must be (batch, seq, num_heads * head_size), got " + in.describe(0));
      const int64_t H = p.H = in.dim(0, 2) / N, hidden = N * H;
      if (in.has(3)) {
        NXRT_RETURN_IF_ERROR(plan_float_input(in, 3, "bias", &p));
        if (in.numel(3) < 2 * hidden) return invalid_argument("bias too short: " + in.describe(3));
        p.bias = true;
      }
      if (!has_k) return invalid_argument("key is required unless query is packed QKV");
      NXRT_RETURN_IF_ERROR(plan_float_input(in, 1, "key", &p));
      if (in.rank(1) == 5) {
        if (has_v || in.dim(1, 0) != B || in.dim(1, 2) != N || in.dim(1, 3) != 2 || in.dim(1, 4) != H)
          return invalid_argument("packed KV must be (batch, kv_seq, num_heads, 2, head_size) without value, got " + in.describe(1));
        p.kv = MhaKv::kPackedKv;
        p.L = in.dim(1, 1);
        p.Hv = H;
      } else if (in.rank(1) == 4) {
        if (!has_v || in.rank(2) != 4 || in.dim(1, 0) != B || in.dim(1, 1) != N || in.dim(1, 3) != H ||
            in.dim(2, 0) != B || in.dim(2, 1) != N || in.dim(2, 2) != in.dim(1, 2))
          return invalid_argument("4-D key/value must be (batch, num_heads, kv_seq, head_size), got " + in.describe(1) + ", " + in.describe(2));
        p.kv = MhaKv::kBnsh;
        p.L = in.dim(1, 2);
        p.Hv = in.dim(2, 3);
      } else {
        if (!has_v || in.rank(1) != 3 || in.rank(2) != 3 || in.dim(1, 0) != B || in.dim(2, 0) != B ||
            in.dim(1, 2) != hidden || in.dim(2, 1) != in.dim(1, 1) || in.dim(2, 2) % N)
          return invalid_argument("key/value must be (batch, kv_seq, hidden), got " + in.describe(1) + ", " + in.describe(2));
        p.kv = MhaKv::kSeparate;
        p.L = in.dim(1, 1);
        p.Hv = in.dim(2, 2) / N;
        if (p.bias && in.numel(3) != 2 * hidden + N * p.Hv)
          return invalid_argument("bias must have 2 * hidden + v_hidden elements, got " + in.describe(3));
      }
      if (has_v) NXRT_RETURN_IF_ERROR(plan_float_input(in, 2, "value", &p));
    }
    if (in.has(6) || in.has(7)) {
      const bool ok = in.has(6) && in.has(7) && p.kv != MhaKv::kBnsh && in.rank(6) == 4 && in.rank(7) == 4 &&
                      in.dim(6, 0) == B && in.dim(6, 1) == N && in.dim(6, 3) == p.H && in.dim(7, 0) == B &&
                      in.dim(7, 1) == N && in.dim(7, 2) == in.dim(6, 2) && in.dim(7, 3) == p.Hv;
      if (!ok)
        return invalid_argument("past_key/past_value must be (batch, num_heads, past, head_size) together, got " +
                                in.describe(6) + ", " + in.describe(7));
      p.P = in.dim(6, 2);
      NXRT_RETURN_IF_ERROR(plan_float_input(in, 6, "past_key", &p));
      NXRT_RETURN_IF_ERROR(plan_float_input(in, 7, "past_value", &p));
    }
    p.T = p.P + p.L;
    return plan_mask_and_core(in, 4, reference_, threads, &p);
  }

 private:
  int64_t N_ = 0;
  float filter_ = -10000.f;
  bool causal_ = false;
  float scale_ = 0.f;
  bool reference_ = false;
};

// ---------------------------------------------------------------------------------------------
// Attention (BERT/GPT-2): input (B, S, Din) x weights (Din, Dq + Dk + Dv) + bias; mask_index;
// past (2, B, N, P, H) -> present (2, B, N, P + S, H). Constant weights (and bias) are converted to
// float once at creation, the weights packed for the GEMM engine (pack_b_f32).
class MsAttention final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    N_ = info.attr_int("num_heads", 0);
    if (N_ <= 0) return info.error("num_heads must be positive");
    if (info.attr_int("do_rotary", 0) != 0) return info.error("do_rotary is not supported", StatusCode::kNotImplemented);
    if (info.attr_int("past_present_share_buffer", 0) != 0) return info.error("past_present_share_buffer is not supported", StatusCode::kNotImplemented);
    filter_ = info.attr_float("mask_filter_value", -10000.f);
    causal_ = info.attr_int("unidirectional", 0) != 0;
    scale_ = info.attr_float("scale", 0.f);
    qkv_ = info.attr_ints("qkv_hidden_sizes", {});
    reference_ = info.overrides().reference();
    isa_ = info.isa();
    if (const Tensor* w = info.const_input(1); w && w->rank() == 2 && is_attn_float(w->dtype()) && w->numel() > 0) {
      auto wf = read_floats_as<float>(*w);
      if (wf.ok()) w_packed_ = pack_b_f32(false, w->dim(0), w->dim(1), wf.value().data(), w->dim(1), isa_);
    }
    if (const Tensor* b = info.const_input(2); b && is_attn_float(b->dtype())) {
      auto bf = read_floats_as<float>(*b);
      if (bf.ok()) {
        bias_f_ = std::move(bf).value();
        have_bias_ = true;
      }
    }
    return Status::Ok();
  }
  // Prepared constants are read only through their copies (compute checks just dtypes and shapes).
  bool reads_const_input_data(size_t i) const override {
    return !((i == 1 && !w_packed_.empty()) || (i == 2 && have_bias_));
  }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    return ort_specialize(*this, sc);
  }

  Status compute(ep::KernelContext& ctx) const override {
    OrtAttnVariant local;
    NXRT_ASSIGN_OR_RETURN(const OrtAttnVariant* var, ort_variant(*this, ctx, &local));
    const OrtAttnPlan& p = var->plan;
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *var));
    ScratchLayout lay = p.lay;
    lay.bind(ws);
    const int64_t B = p.B, N = p.N, S = p.S, P = p.P, T = p.T, H = p.H, Hv = p.Hv, Din = p.Din, Dt = p.Dt;
    // Projection: [B*S, Din] x [Din, Dt] (+ bias).
    NXRT_ASSIGN_OR_RETURN(const float* x, input_floats(p, lay, ctx.input(0), 0));
    float* proj = lay.at<float>(p.proj_off);
    const GemmScratch gs = p.gemm.scratch(lay);
    if (!w_packed_.empty()) {
      gemm_f32_packed(false, B * S, 1.f, x, Din, w_packed_, 0.f, proj, Dt, &ctx.pool(), nullptr, isa_, &gs);
    } else {
      NXRT_ASSIGN_OR_RETURN(const float* w, input_floats(p, lay, ctx.input(1), 1));
      gemm_f32(false, false, B * S, Dt, Din, 1.f, x, Din, w, Dt, 0.f, proj, Dt, &ctx.pool(), nullptr, isa_, &gs);
    }
    if (p.bias) {
      const float* bv = bias_f_.data();
      if (!have_bias_) { NXRT_ASSIGN_OR_RETURN(bv, input_floats(p, lay, ctx.input(2), 2)); }
      for (int64_t r = 0; r < B * S; ++r)
        for (int64_t c = 0; c < Dt; ++c) proj[r * Dt + c] += bv[c];
    }
    float* q = lay.at<float>(p.q_off);
    float* k = lay.at<float>(p.k_off);
    float* v = lay.at<float>(p.v_off);
    const int64_t qk = p.qk_hidden;
    split_heads(proj, B, N, S, Dt, 0, H, H, nullptr, q, S, 0);
    split_heads(proj, B, N, S, Dt, qk, H, H, nullptr, k, T, P);
    split_heads(proj, B, N, S, Dt, 2 * qk, Hv, Hv, nullptr, v, T, P);
    if (P > 0) {
      NXRT_ASSIGN_OR_RETURN(const float* pst, input_floats(p, lay, ctx.input(4), 4));
      copy_head_rows(pst, B * N, P, H, k, T, 0);
      copy_head_rows(pst + B * N * P * H, B * N, P, Hv, v, T, 0);
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, p.dt, Dims{B, S, N * Hv}));
    if (ctx.output_requested(1)) {
      NXRT_ASSIGN_OR_RETURN(Tensor * pr, ctx.allocate_output(1, p.dt, Dims{2, B, N, T, H}));
      const int64_t kn = B * N * T * H;
      NXRT_RETURN_IF_ERROR(store_floats(k, kn, p.dt, pr->raw_data()));
      NXRT_RETURN_IF_ERROR(store_floats(v, B * N * T * Hv, p.dt, elem_at(*pr, kn)));
    }
    return ort_attend(ctx, p, lay, scale_, filter_, 3, Y);
  }

  // The plan for these input dtypes and shapes (see OrtAttnPlan); an error for inputs the op rejects
  // whatever their values.
  Status plan(const OrtInputFacts& in, const bool outs[4], int threads, OrtAttnPlan* out) const {
    OrtAttnPlan& p = *out;
    const int64_t N = p.N = N_;
    p.causal = causal_;
    if (!in.has(0) || !in.has(1)) return invalid_argument("input and weights are required");
    const DataType dt = p.dt = in.dt[0];
    if (!is_attn_float(dt) || in.dt[1] != dt) return invalid_argument("input/weights must share a float32/float16/bfloat16 dtype, got " + in.describe(0) + ", " + in.describe(1));
    if (in.rank(0) != 3 || in.rank(1) != 2 || in.dim(1, 0) != in.dim(0, 2))
      return invalid_argument("input must be (batch, seq, in_hidden) and weights (in_hidden, qkv_hidden), got " + in.describe(0) + ", " + in.describe(1));
    const int64_t B = p.B = in.dim(0, 0), S = p.S = in.dim(0, 1), Din = p.Din = in.dim(0, 2), Dt = p.Dt = in.dim(1, 1);
    std::vector<int64_t> qkv = qkv_;
    if (qkv.empty()) {
      if (Dt % 3) return invalid_argument("weights dim 1 must be 3 * hidden without qkv_hidden_sizes, got " + in.describe(1));
      qkv = {Dt / 3, Dt / 3, Dt / 3};
    }
    if (qkv.size() != 3 || qkv[0] != qkv[1] || qkv[0] % N || qkv[2] % N || qkv[0] + qkv[1] + qkv[2] != Dt)
      return invalid_model("qkv_hidden_sizes must be 3 values (q == k) divisible by num_heads summing to weights dim 1");
    p.qk_hidden = qkv[0];
    const int64_t H = p.H = qkv[0] / N, Hv = p.Hv = qkv[2] / N;
    p.L = S;
    if (in.has(2)) {
      if (in.numel(2) != Dt) return invalid_argument("bias must have " + std::to_string(Dt) + " elements, got " + in.describe(2));
      if (!have_bias_) NXRT_RETURN_IF_ERROR(plan_float_input(in, 2, "bias", &p));
      p.bias = true;
    }
    if (in.has(4)) {
      if (in.rank(4) != 5 || in.dim(4, 0) != 2 || in.dim(4, 1) != B || in.dim(4, 2) != N || in.dim(4, 4) != H || H != Hv)
        return invalid_argument("past must be (2, batch, num_heads, past, head_size), got " + in.describe(4));
      p.P = in.dim(4, 3);
      NXRT_RETURN_IF_ERROR(plan_float_input(in, 4, "past", &p));
    }
    if (in.has(6)) return not_implemented("past_sequence_length is not supported");
    // present (2, B, N, T, H) holds K and V rows alike.
    if (outs[1] && H != Hv)
      return invalid_argument("present needs equal q/k and v head sizes, got " + std::to_string(H) + " and " + std::to_string(Hv));
    p.T = p.P + S;
    NXRT_RETURN_IF_ERROR(plan_float_input(in, 0, "input", &p));
    const bool packed = !w_packed_.empty();
    if (packed && (in.dim(1, 0) != w_packed_.K || Dt != w_packed_.N))
      return invalid_argument("weights " + in.describe(1) + " differ from the constant prepared at creation");
    if (!packed) NXRT_RETURN_IF_ERROR(plan_float_input(in, 1, "weights", &p));
    p.proj_off = p.lay.add<float>(B * S * Dt);
    p.gemm.reserve(p.lay, gemm_f32_scratch_floats(B * S, Dt, Din, false, packed), threads);
    return plan_mask_and_core(in, 3, reference_, threads, &p);
  }

 private:
  int64_t N_ = 0;
  float filter_ = -10000.f;
  bool causal_ = false;
  float scale_ = 0.f;
  std::vector<int64_t> qkv_;
  bool reference_ = false;
  ep::IsaTier isa_ = ep::IsaTier::kScalar;
  PackedB w_packed_;           // constant weights, packed at creation (empty: read per call)
  std::vector<float> bias_f_;  // constant bias as float
  bool have_bias_ = false;
};

}  // namespace

void register_contrib_attention(ep::KernelRegistry& r) {
  r.add_class<GroupQueryAttention>(kMs, "GroupQueryAttention", 1);
  r.add_class<MultiHeadAttention>(kMs, "MultiHeadAttention", 1);
  r.add_class<MsAttention>(kMs, "Attention", 1);
}

}  // namespace nxrt::ops::contrib
