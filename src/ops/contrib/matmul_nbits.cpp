// com.microsoft MatMulNBits: reference kernel, packed fast kernels (AVX2 with runtime dispatch and a
// scalar fallback), and the op kernel. See contrib/matmul_nbits.h for the layouts.
#include "ops/contrib/matmul_nbits.h"

#include "ep/cpu_features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "ops/common.h"
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_MNB_X86 1
#endif

namespace nxrt::ops::contrib {

namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

}  // namespace

bool matmulnbits_has_avx2() { return ep::cpu_has_avx2_fma(); }

QuantWeights pack_quant_weights(const uint8_t* B, const float* scales, const float* zps, int64_t K, int64_t N,
                                int64_t bits, int64_t block) {
  QuantWeights W;
  W.K = K;
  W.N = N;
  W.bits = bits;
  W.block = block;
  W.kblocks = (K + block - 1) / block;
  W.kpad = round_up(W.kblocks * block, 32);
  W.kb = W.kpad / block;
  const bool eight = bits == 8;
  W.row_bytes = eight ? W.kpad : W.kpad / 2;
  const int64_t blob = block * bits / 8;
  const float offset = eight ? 128.f : 0.f;
  W.data.assign(static_cast<size_t>(N * W.row_bytes), 0);
  W.scale.assign(static_cast<size_t>(N * W.kb), 0.f);
  W.zterm.assign(static_cast<size_t>(N * W.kb), 0.f);
  std::vector<uint8_t> vals(static_cast<size_t>(W.kpad));
  for (int64_t n = 0; n < N; ++n) {
    std::fill(vals.begin(), vals.end(), static_cast<uint8_t>(eight ? 128 : 0));
    for (int64_t j = 0; j < W.kblocks; ++j) {
      const uint8_t* bl = B + (n * W.kblocks + j) * blob;
      for (int64_t kk = 0; kk < block; ++kk) {
        const int64_t k = j * block + kk;
        if (k >= K) break;
        vals[static_cast<size_t>(k)] = static_cast<uint8_t>(raw_code(bl, kk, bits));
      }
      const float s = scales[n * W.kblocks + j];
      W.scale[static_cast<size_t>(n * W.kb + j)] = s;
      W.zterm[static_cast<size_t>(n * W.kb + j)] = (zps[n * W.kblocks + j] - offset) * s;
    }
    uint8_t* dst = W.data.data() + n * W.row_bytes;
    if (eight) {
      for (int64_t k = 0; k < W.kpad; ++k) dst[k] = static_cast<uint8_t>(vals[static_cast<size_t>(k)] - 128);
    } else {
      for (int64_t c = 0; c < W.kpad / 32; ++c)
        for (int j = 0; j < 16; ++j)
          dst[c * 16 + j] = static_cast<uint8_t>((vals[static_cast<size_t>(c * 32 + j)] & 15) |
                                                 ((vals[static_cast<size_t>(c * 32 + 16 + j)] & 15) << 4));
    }
  }
  return W;
}

#ifdef NXRT_MNB_X86
namespace {
// One whole block (block % 16 == 0, all of it inside K): the scalar loop's exact arithmetic, 8 lanes at
// a time. a * inv is one rounded multiply either way, cvtps rounds to nearest even as nearbyint does
// in the default rounding mode, and the saturating packs are the clamp to [-128, 127].
__attribute__((target("avx2,fma"))) void quantize_block_avx2(const float* a, int64_t block, int8_t* out, float* sa,
                                                              float* sq) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 mx = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
  for (int64_t k = 0; k < block; k += 8) {
    const __m256 x = _mm256_loadu_ps(a + k);
    mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, x));
    nan = _mm256_or_ps(nan, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  }
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
  // A NaN anywhere: the plain loop's NaN block (maxps keeps or drops a NaN by operand order).
  const float amax = _mm256_movemask_ps(nan) ? std::numeric_limits<float>::quiet_NaN() : _mm_cvtss_f32(m4);
  const float inv = amax != 0.f ? 127.f / amax : 0.f;
  const __m256 vinv = _mm256_set1_ps(inv);
  __m256i sum = _mm256_setzero_si256();
  for (int64_t k = 0; k < block; k += 16) {
    const __m256i q0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(a + k), vinv));
    const __m256i q1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(a + k + 8), vinv));
    const __m256i w16 = _mm256_packs_epi32(q0, q1);                 // lanes interleaved by 128-bit half
    const __m128i b8 = _mm_packs_epi16(_mm256_castsi256_si128(w16), _mm256_extracti128_si256(w16, 1));
    // packs interleaves halves: reorder [q0lo q1lo q0hi q1hi] back to k order.
    const __m128i ordered = _mm_shuffle_epi32(b8, _MM_SHUFFLE(3, 1, 2, 0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + k), ordered);
    sum = _mm256_add_epi32(sum, _mm256_cvtepi8_epi32(ordered));
    sum = _mm256_add_epi32(sum, _mm256_cvtepi8_epi32(_mm_srli_si128(ordered, 8)));
  }
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(1, 0, 3, 2)));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, _MM_SHUFFLE(2, 3, 0, 1)));
  const float scale = amax / 127.f;
  *sa = scale;
  *sq = scale * static_cast<float>(_mm_cvtsi128_si32(s4));
}

#define NXRT_MNB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
// GCC 12 reports its own headers' _mm512_undefined_ps() (the pass-through of unmasked AVX-512 ops) as
// uninitialized once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"

// Lane b of the result: the max (Max) or the int32 sum (else) of v[b]'s 16 lanes, for 16 vectors at
// once: four rounds of shuffles, each combining pairs of vectors and halving the lanes each vector's
// partial results take (45 shuffles and ops for 16 reductions, against 4-5 dependent steps for each
// alone). Max and integer sums give the same result in any order.
// (A helper, not a lambda: GCC 12 does not give a lambda its enclosing function's target.)
template <bool Max>
NXRT_MNB_AVX512 inline __m512 reduce_op(__m512 a, __m512 b) {
  if constexpr (Max) return _mm512_max_ps(a, b);
  else return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
template <bool Max>
NXRT_MNB_AVX512 inline __m512 reduce16x16(__m512 (&v)[16]) {
  const auto op = reduce_op<Max>;
  __m512 r[8], s[4], t[2];
  // r[i]: lanes 0-7 partials of v[2i], 8-15 of v[2i + 1].
  for (int i = 0; i < 8; ++i)
    r[i] = op(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x44), _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xee));
  // s[k]: 128-bit quarter q holds 4 partials of v[4k + q].
  for (int k = 0; k < 4; ++k)
    s[k] = op(_mm512_shuffle_f32x4(r[2 * k], r[2 * k + 1], 0x88), _mm512_shuffle_f32x4(r[2 * k], r[2 * k + 1], 0xdd));
  // t[m], quarter q: elements 0-1 partials of v[8m + q], 2-3 of v[8m + 4 + q].
  for (int m = 0; m < 2; ++m) {
    const __m512d a = _mm512_castps_pd(s[2 * m]), b = _mm512_castps_pd(s[2 * m + 1]);
    t[m] = op(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // Quarter q, element e: v[4e + q] whole; lane 4q + e to lane 4e + q (a 4 x 4 transpose).
  const __m512 u = op(_mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i to_block = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(to_block, u);
}

// nb (<= 16) whole blocks of `block` (% 16 == 0) values at a: quantize_block_avx2's arithmetic (the
// plain loop's), with the blocks' maxima, scales and sums reduced 16 at a time (reduce16x16) instead of
// one horizontal reduction and two divisions per block. Decode's A rows (K 896, 4864) are 28 and 152
// blocks of 32.
NXRT_MNB_AVX512 void quantize_blocks16_avx512(const float* a, int64_t block, int64_t nb, int8_t* out, float* sa,
                                              float* sq) {
  const int64_t vecs = block / 16;
  __m512 m[16];
  __mmask16 nan_blocks = 0;
  for (int64_t b = 0; b < 16; ++b) {
    m[b] = _mm512_setzero_ps();
    __mmask16 nan = 0;
    if (b < nb)
      for (int64_t i = 0; i < vecs; ++i) {
        const __m512 x = _mm512_loadu_ps(a + b * block + 16 * i);
        m[b] = _mm512_max_ps(m[b], _mm512_abs_ps(x));
        nan |= _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
      }
    if (nan) nan_blocks |= static_cast<__mmask16>(1u << b);
  }
  // Blocks holding a NaN: the plain loop's NaN maximum (maxps keeps or drops a NaN by operand order).
  const __m512 amax = _mm512_mask_mov_ps(reduce16x16<true>(m), nan_blocks, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
  const __m512 c127 = _mm512_set1_ps(127.f);
  // amax != 0, true for NaN as in the plain loop.
  const __mmask16 nonzero = _mm512_cmp_ps_mask(amax, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  alignas(64) float inv[16];
  _mm512_store_ps(inv, _mm512_maskz_div_ps(nonzero, c127, amax));
  const __m512i lo = _mm512_set1_epi32(-128), hi = _mm512_set1_epi32(127);
  __m512 sums[16];
  for (int64_t b = 0; b < 16; ++b) {
    __m512i acc = _mm512_setzero_si512();
    if (b < nb) {
      const __m512 vinv = _mm512_set1_ps(inv[b]);
      for (int64_t i = 0; i < vecs; ++i) {
        const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(a + b * block + 16 * i), vinv)), lo), hi);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + b * block + 16 * i), _mm512_cvtepi32_epi8(q));
        acc = _mm512_add_epi32(acc, q);
      }
    }
    sums[b] = _mm512_castsi512_ps(acc);
  }
  const __m512 sum = _mm512_cvtepi32_ps(_mm512_castps_si512(reduce16x16<false>(sums)));
  const __m512 scale = _mm512_div_ps(amax, c127);
  const __mmask16 keep = nb >= 16 ? __mmask16(0xffff) : __mmask16((1u << nb) - 1);
  _mm512_mask_storeu_ps(sa, keep, scale);
  _mm512_mask_storeu_ps(sq, keep, _mm512_mul_ps(scale, sum));
}
#pragma GCC diagnostic pop
}  // namespace
#endif

void quantize_a_row(const float* a, int64_t K, int64_t block, int64_t kpad, int8_t* out, float* sa, float* sq,
                    ep::IsaTier isa) {
#ifdef NXRT_MNB_X86
  if (block % 16 == 0 && isa >= ep::IsaTier::kAvx512 && ep::cpu_isa_tier() >= ep::IsaTier::kAvx512) {
    const int64_t full = K / block;  // blocks entirely inside K
    for (int64_t j = 0; j < full; j += 16)
      quantize_blocks16_avx512(a + j * block, block, std::min<int64_t>(16, full - j), out + j * block, sa + j, sq + j);
    quantize_a_row_tail(a, K, block, kpad, out, sa, sq, full);
    return;
  }
  if (block % 16 == 0 && isa >= ep::IsaTier::kAvx2 && matmulnbits_has_avx2()) {
    const int64_t full = K / block;  // blocks entirely inside K
    // (An AVX-512 body per block measured slower: a block of 32 is two 16-lane vectors, and the
    // reductions cost more; the AVX-512 body above reduces 16 blocks together instead.)
    for (int64_t j = 0; j < full; ++j) quantize_block_avx2(a + j * block, block, out + j * block, sa + j, sq + j);
    quantize_a_row_tail(a, K, block, kpad, out, sa, sq, full);
    return;
  }
#else
  (void)isa;
#endif
  quantize_a_row_tail(a, K, block, kpad, out, sa, sq, 0);
}

void quantize_a_row_tail(const float* a, int64_t K, int64_t block, int64_t kpad, int8_t* out, float* sa, float* sq,
                         int64_t first_block) {
  const int64_t kb = kpad / block;
  for (int64_t j = first_block; j < kb; ++j) {
    const int64_t k0 = j * block, k1 = std::min(K, k0 + block);
    float amax = 0.f;
    bool nan = false;
    for (int64_t k = k0; k < k1; ++k) {
      amax = std::max(amax, std::fabs(a[k]));
      nan |= std::isnan(a[k]);
    }
    // A block holding a NaN gets a NaN scale (its row's products come out NaN, as a float product
    // would), and its values -128 as the vector bodies' saturating converts give them.
    if (nan) amax = std::numeric_limits<float>::quiet_NaN();
    const float scale = amax / 127.f;
    const float inv = amax != 0.f ? 127.f / amax : 0.f;
    int32_t sum = 0;
    for (int64_t k = k0; k < k0 + block; ++k) {
      int8_t q = 0;
      if (k < k1) {
        // NaN (a NaN block, or +-inf times an infinite block's 0 inverse): -128.
        const float v = std::nearbyint(a[k] * inv);
        q = std::isnan(v) ? int8_t{-128} : static_cast<int8_t>(std::clamp(v, -128.f, 127.f));
      }
      out[k] = q;
      sum += q;
    }
    sa[j] = scale;
    sq[j] = scale * static_cast<float>(sum);
  }
}

void matmulnbits_reference(const float* A, int64_t M, const uint8_t* B, const float* scales, const float* zps,
                           const int32_t* g_idx, int64_t K, int64_t N, int64_t bits, int64_t block, int accuracy_level,
                           const float* bias, float* Y) {
  const int64_t kblocks = (K + block - 1) / block;
  const int64_t blob = block * bits / 8;
  const int64_t kpad = round_up(kblocks * block, 32);
  std::vector<int8_t> aq(static_cast<size_t>(kpad));
  std::vector<float> sa(static_cast<size_t>(kpad / block)), sq(sa.size());
  for (int64_t m = 0; m < M; ++m) {
    const float* a = A + m * K;
    if (accuracy_level == 4) quantize_a_row(a, K, block, kpad, aq.data(), sa.data(), sq.data());
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t j = k / block;
        const int q = raw_code(B + (n * kblocks + j) * blob, k % block, bits);
        const int64_t g = g_idx ? g_idx[k] : j;
        const double s = scales[n * kblocks + g], z = zps[n * kblocks + g];
        const double av = accuracy_level == 4 ? static_cast<double>(aq[static_cast<size_t>(k)]) * sa[static_cast<size_t>(j)]
                                              : static_cast<double>(a[k]);
        acc += av * ((q - z) * s);
      }
      if (bias) acc += bias[n];
      Y[m * N + n] = static_cast<float>(acc);
    }
  }
}

namespace {

// Per-call prepared A: float rows padded to kpad with per-block float sums, or int8 rows.
// Arrays point into one scratch buffer (the step workspace, so a decode step allocates nothing).
struct PreparedA {
  int64_t M = 0, kpad = 0, kb = 0;
  float* af = nullptr;    // M * kpad (float path)
  float* asum = nullptr;  // M * kb: sum of a over the block (float path) or sa * sum(q) (int8 path)
  int8_t* aq = nullptr;   // M * kpad (int8 path)
  float* sa = nullptr;    // M * kb (int8 path)
};

size_t prepared_a_bytes(int64_t M, int64_t kpad, int64_t kb, bool int8) {
  auto up = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t rows = int8 ? up(static_cast<size_t>(M * kpad)) : up(static_cast<size_t>(M * kpad) * sizeof(float));
  return rows + 2 * up(static_cast<size_t>(M * kb) * sizeof(float));
}

// ---- scalar kernels over the packed layout ----------------------------------------------------

// Unpacks packed chunk c of row `w` into 32 ints (stored value, before offset/zero point).
inline void unpack_chunk(const QuantWeights& W, const uint8_t* w, int64_t c, int32_t* out) {
  if (W.bits == 8) {
    const int8_t* p = reinterpret_cast<const int8_t*>(w) + c * 32;
    for (int j = 0; j < 32; ++j) out[j] = p[j];
  } else {
    const uint8_t* p = w + c * 16;
    for (int j = 0; j < 16; ++j) {
      out[j] = p[j] & 15;
      out[j + 16] = p[j] >> 4;
    }
  }
}

void rows_scalar(const PreparedA& P, int64_t m0, int64_t m1, const QuantWeights& W, bool int8, int64_t n0, int64_t n1,
                 float* Y, int64_t ldy) {
  int32_t wv[32];
  const int64_t chunks = W.kpad / 32;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* w = W.data.data() + n * W.row_bytes;
    const float* sc = W.scale.data() + n * W.kb;
    const float* zt = W.zterm.data() + n * W.kb;
    for (int64_t m = m0; m < m1; ++m) {
      float acc = 0.f;
      for (int64_t c = 0; c < chunks; ++c) {
        unpack_chunk(W, w, c, wv);
        for (int half = 0; half < 2; ++half) {
          const int64_t k0 = c * 32 + half * 16;
          const int64_t j = k0 / W.block;
          if (int8) {
            const int8_t* a = P.aq + m * P.kpad + k0;
            int32_t d = 0;
            for (int t = 0; t < 16; ++t) d += wv[half * 16 + t] * a[t];
            acc += static_cast<float>(d) * (sc[j] * P.sa[m * P.kb + j]);
          } else {
            const float* a = P.af + m * P.kpad + k0;
            float d = 0.f;
            for (int t = 0; t < 16; ++t) d += static_cast<float>(wv[half * 16 + t]) * a[t];
            acc += d * sc[j];
          }
        }
      }
      float z = 0.f;
      for (int64_t j = 0; j < W.kb; ++j) z += zt[j] * P.asum[m * P.kb + j];
      Y[m * ldy + n] = acc - z;
    }
  }
}

#ifdef NXRT_MNB_X86
__attribute__((target("avx2,fma"))) inline float hsum256(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum_j a[j] * b[j] over n floats.
__attribute__((target("avx2,fma"), always_inline)) inline float dot_f32(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  float z = hsum256(acc);
  for (; j < n; ++j) z += a[j] * b[j];
  return z;
}

// One 32-element chunk c of a packed weight row against MR int8 A rows: 8 int32 partial dots each.
template <int MR>
__attribute__((target("avx2,fma"), always_inline)) inline void chunk_dot_i8(const uint8_t* w, int64_t c, bool eight,
                                                                            const int8_t* const* arow, __m256i* d) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i wv;
  if (eight) {
    wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c * 32));
  } else {
    // Both 128-bit lanes get the 16 bytes; the high lane shifts by 4: low nibbles | high nibbles.
    const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c * 16)));
    wv = _mm256_and_si256(_mm256_srlv_epi64(both, _mm256_set_epi64x(4, 4, 0, 0)), _mm256_set1_epi8(0x0f));
  }
  const __m256i wabs = eight ? _mm256_sign_epi8(wv, wv) : wv;
  for (int r = 0; r < MR; ++r) {
    __m256i av = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(arow[r] + c * 32));
    if (eight) av = _mm256_sign_epi8(av, wv);
    d[r] = _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, av), ones);
  }
}

// One chunk against MR float A rows: d0 accumulates elements 0..15, d1 elements 16..31.
template <int MR>
__attribute__((target("avx2,fma"), always_inline)) inline void chunk_f32(const uint8_t* w, int64_t c, bool eight,
                                                                         const float* const* arow, __m256* d0, __m256* d1) {
  const __m128i m0f = _mm_set1_epi8(0x0f);
  __m256 wf[4];
  if (eight) {
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c * 32));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c * 32 + 16));
    wf[0] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo));
    wf[1] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8)));
    wf[2] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi));
    wf[3] = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8)));
  } else {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + c * 16));
    const __m128i lo = _mm_and_si128(raw, m0f);
    const __m128i hi = _mm_and_si128(_mm_srli_epi16(raw, 4), m0f);
    wf[0] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(lo));
    wf[1] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(lo, 8)));
    wf[2] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(hi));
    wf[3] = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(hi, 8)));
  }
  for (int r = 0; r < MR; ++r) {
    const float* a = arow[r] + c * 32;
    d0[r] = _mm256_fmadd_ps(wf[1], _mm256_loadu_ps(a + 8), _mm256_fmadd_ps(wf[0], _mm256_loadu_ps(a), d0[r]));
    d1[r] = _mm256_fmadd_ps(wf[3], _mm256_loadu_ps(a + 24), _mm256_fmadd_ps(wf[2], _mm256_loadu_ps(a + 16), d1[r]));
  }
}

// Up to MR rows of A against rows [n0, n1) of W, integer dot products. ssbuf: MR * W.kb floats of the
// calling thread's scratch (the products of weight and A block scales).
template <int MR>
__attribute__((target("avx2,fma"))) void rows_int8_avx2(const PreparedA& P, int64_t m0, const QuantWeights& W,
                                                        int64_t n0, int64_t n1, float* Y, int64_t ldy,
                                                        float* ssbuf) {
  const int64_t chunks = W.kpad / 32;
  const bool eight = W.bits == 8;
  const int64_t block = W.block;
  const int64_t cpb = block >= 32 ? block / 32 : 1;  // chunks per block (block >= 32)
  const int8_t* arow[MR];
  const float* sarow[MR];
  const float* asrow[MR];
  for (int r = 0; r < MR; ++r) {
    arow[r] = P.aq + (m0 + r) * P.kpad;
    sarow[r] = P.sa + (m0 + r) * P.kb;
    asrow[r] = P.asum + (m0 + r) * P.kb;
  }
  float* ss[MR];
  for (int r = 0; r < MR; ++r) ss[r] = ssbuf + r * W.kb;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* w = W.data.data() + n * W.row_bytes;
    const float* sc = W.scale.data() + n * W.kb;
    const float* zt = W.zterm.data() + n * W.kb;
    __m256 acc[MR];
    __m256i isum[MR];
    for (int r = 0; r < MR; ++r) {
      acc[r] = _mm256_setzero_ps();
      isum[r] = _mm256_setzero_si256();
    }
    __m256i d[MR];
    if (block == 16) {
      for (int64_t c = 0; c < chunks; ++c) {
        chunk_dot_i8<MR>(w, c, eight, arow, d);
        const int64_t j = 2 * c;
        for (int r = 0; r < MR; ++r) {
          const __m256 s = _mm256_set_m128(_mm_set1_ps(sc[j + 1] * sarow[r][j + 1]), _mm_set1_ps(sc[j] * sarow[r][j]));
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d[r]), s, acc[r]);
        }
      }
    } else {
      for (int r = 0; r < MR; ++r) {
        int64_t j = 0;
        for (; j + 8 <= W.kb; j += 8)
          _mm256_storeu_ps(ss[r] + j, _mm256_mul_ps(_mm256_loadu_ps(sc + j), _mm256_loadu_ps(sarow[r] + j)));
        for (; j < W.kb; ++j) ss[r][j] = sc[j] * sarow[r][j];
      }
      // Two accumulators (even/odd blocks) halve the FMA dependency chain.
      __m256 acc2[MR];
      for (int r = 0; r < MR; ++r) acc2[r] = _mm256_setzero_ps();
      int64_t j = 0;
      if (cpb == 1) {
        __m256i d2[MR];
        for (; j + 2 <= W.kb; j += 2) {
          chunk_dot_i8<MR>(w, j, eight, arow, isum);
          chunk_dot_i8<MR>(w, j + 1, eight, arow, d2);
          for (int r = 0; r < MR; ++r) {
            acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_broadcast_ss(ss[r] + j), acc[r]);
            acc2[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d2[r]), _mm256_broadcast_ss(ss[r] + j + 1), acc2[r]);
          }
        }
      }
      for (int r = 0; r < MR; ++r) acc[r] = _mm256_add_ps(acc[r], acc2[r]);
      for (; j < W.kb; ++j) {
        if (cpb == 1) {
          chunk_dot_i8<MR>(w, j, eight, arow, isum);
        } else {
          for (int r = 0; r < MR; ++r) isum[r] = _mm256_setzero_si256();
          for (int64_t c = j * cpb; c < (j + 1) * cpb; ++c) {
            chunk_dot_i8<MR>(w, c, eight, arow, d);
            for (int r = 0; r < MR; ++r) isum[r] = _mm256_add_epi32(isum[r], d[r]);
          }
        }
        for (int r = 0; r < MR; ++r)
          acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r]), _mm256_broadcast_ss(ss[r] + j), acc[r]);
      }
    }
    for (int r = 0; r < MR; ++r) Y[(m0 + r) * ldy + n] = hsum256(acc[r]) - dot_f32(zt, asrow[r], W.kb);
  }
}

// Up to MR rows of A against rows [n0, n1) of W, float FMA on dequantized chunks.
template <int MR>
__attribute__((target("avx2,fma"))) void rows_f32_avx2(const PreparedA& P, int64_t m0, const QuantWeights& W,
                                                       int64_t n0, int64_t n1, float* Y, int64_t ldy) {
  const int64_t chunks = W.kpad / 32;
  const bool eight = W.bits == 8;
  const int64_t block = W.block;
  const int64_t cpb = block >= 32 ? block / 32 : 1;
  const float* arow[MR];
  const float* asrow[MR];
  for (int r = 0; r < MR; ++r) {
    arow[r] = P.af + (m0 + r) * P.kpad;
    asrow[r] = P.asum + (m0 + r) * P.kb;
  }
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* w = W.data.data() + n * W.row_bytes;
    const float* sc = W.scale.data() + n * W.kb;
    const float* zt = W.zterm.data() + n * W.kb;
    __m256 acc[MR];
    for (int r = 0; r < MR; ++r) acc[r] = _mm256_setzero_ps();
    __m256 d0[MR], d1[MR];
    if (block == 16) {
      for (int64_t c = 0; c < chunks; ++c) {
        for (int r = 0; r < MR; ++r) d0[r] = d1[r] = _mm256_setzero_ps();
        chunk_f32<MR>(w, c, eight, arow, d0, d1);
        const __m256 s0 = _mm256_set1_ps(sc[2 * c]), s1 = _mm256_set1_ps(sc[2 * c + 1]);
        for (int r = 0; r < MR; ++r) acc[r] = _mm256_fmadd_ps(d1[r], s1, _mm256_fmadd_ps(d0[r], s0, acc[r]));
      }
    } else {
      int64_t j = 0;
      if (cpb == 1) {
        // Pairs of blocks into two accumulators: shorter FMA dependency chains.
        __m256 acc2[MR], e0[MR], e1[MR];
        for (int r = 0; r < MR; ++r) acc2[r] = _mm256_setzero_ps();
        for (; j + 2 <= W.kb; j += 2) {
          for (int r = 0; r < MR; ++r) d0[r] = d1[r] = e0[r] = e1[r] = _mm256_setzero_ps();
          chunk_f32<MR>(w, j, eight, arow, d0, d1);
          chunk_f32<MR>(w, j + 1, eight, arow, e0, e1);
          const __m256 s = _mm256_broadcast_ss(sc + j), s2 = _mm256_broadcast_ss(sc + j + 1);
          for (int r = 0; r < MR; ++r) {
            acc[r] = _mm256_fmadd_ps(_mm256_add_ps(d0[r], d1[r]), s, acc[r]);
            acc2[r] = _mm256_fmadd_ps(_mm256_add_ps(e0[r], e1[r]), s2, acc2[r]);
          }
        }
        for (int r = 0; r < MR; ++r) acc[r] = _mm256_add_ps(acc[r], acc2[r]);
      }
      for (; j < W.kb; ++j) {
        for (int r = 0; r < MR; ++r) d0[r] = d1[r] = _mm256_setzero_ps();
        for (int64_t c = j * cpb; c < (j + 1) * cpb; ++c) chunk_f32<MR>(w, c, eight, arow, d0, d1);
        const __m256 s = _mm256_set1_ps(sc[j]);
        for (int r = 0; r < MR; ++r) acc[r] = _mm256_fmadd_ps(_mm256_add_ps(d0[r], d1[r]), s, acc[r]);
      }
    }
    for (int r = 0; r < MR; ++r) Y[(m0 + r) * ldy + n] = hsum256(acc[r]) - dot_f32(zt, asrow[r], W.kb);
  }
}
#endif

// ss: the calling thread's scratch of kRowsMR * W.kb floats (the int8 AVX2 rows).
constexpr int64_t kRowsMR = 4;
void rows_dispatch(const PreparedA& P, const QuantWeights& W, bool int8, int64_t n0, int64_t n1, float* Y, int64_t ldy,
                   bool use_avx2, float* ss) {
  int64_t m = 0;
#ifdef NXRT_MNB_X86
  if (use_avx2) {
    for (; m + kRowsMR <= P.M; m += kRowsMR) {
      if (int8) rows_int8_avx2<kRowsMR>(P, m, W, n0, n1, Y, ldy, ss); else rows_f32_avx2<kRowsMR>(P, m, W, n0, n1, Y, ldy);
    }
    for (; m < P.M; ++m) {
      if (int8) rows_int8_avx2<1>(P, m, W, n0, n1, Y, ldy, ss); else rows_f32_avx2<1>(P, m, W, n0, n1, Y, ldy);
    }
    return;
  }
#else
  (void)use_avx2;
  (void)ss;
#endif
  rows_scalar(P, m, P.M, W, int8, n0, n1, Y, ldy);
}

// Dequantizes packed rows [n0, n1) into float [n1-n0, K].
void dequant_rows(const QuantWeights& W, int64_t n0, int64_t n1, float* out) {
  int32_t wv[32];
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* w = W.data.data() + n * W.row_bytes;
    const float* sc = W.scale.data() + n * W.kb;
    const float* zt = W.zterm.data() + n * W.kb;
    float* o = out + (n - n0) * W.K;
    for (int64_t c = 0; c < W.kpad / 32; ++c) {
      unpack_chunk(W, w, c, wv);
      for (int half = 0; half < 2; ++half) {
        const int64_t k0 = c * 32 + half * 16;
        const int64_t j = k0 / W.block;
        const float s = sc[j], z = zt[j];
        const int64_t cnt = std::min<int64_t>(16, W.K - k0);
        // value = (q - zp) * s with q = stored + offset; zterm = (zp - offset) * s.
        for (int64_t t = 0; t < cnt; ++t) o[k0 + t] = static_cast<float>(wv[half * 16 + t]) * s - z;
      }
    }
  }
}

}  // namespace

NBitsFastPlan matmulnbits_fast_plan(int64_t M, const QuantWeights& W, int accuracy_level, ep::IsaTier isa,
                                    int threads) {
  NBitsFastPlan p;
  p.M = M;
  p.int8 = accuracy_level == 4;
  p.use_avx2 = isa >= ep::IsaTier::kAvx2 && matmulnbits_has_avx2();
  p.isa = isa;
  p.slots = std::max(1, threads);
  if (!p.int8 && M > 8) {
    // Prefill: dequantize panels of N and run the float GEMM on each, a panel per task.
    p.prefill = true;
    p.panels = (W.N + p.panel_cols - 1) / p.panel_cols;
    p.grain = 1;
    p.slot_bytes = static_cast<size_t>(p.panel_cols * W.K) * sizeof(float);
  } else {
    p.prepared_bytes = prepared_a_bytes(M, W.kpad, W.kb, p.int8);
    // Thread over N in chunks sized so each task streams a few hundred KB of weights.
    p.grain = std::max<int64_t>(8, (64 * 1024) / std::max<int64_t>(1, W.row_bytes));
    if (p.int8 && p.use_avx2) p.slot_bytes = static_cast<size_t>(kRowsMR * W.kb) * sizeof(float);
  }
  return p;
}

size_t NBitsFastPlan::workspace_bytes() const { return prepared_bytes + ep::SlotScratch::bytes(slot_bytes, slots); }

void matmulnbits_fast(const float* A, int64_t M, const QuantWeights& W, int accuracy_level, const float* bias, float* Y,
                      ep::ThreadPool* pool, ep::IsaTier isa, void* workspace) {
  const NBitsFastPlan plan = matmulnbits_fast_plan(M, W, accuracy_level, isa, pool ? pool->num_threads() : 1);
  matmulnbits_fast_run(plan, A, W, bias, Y, pool, workspace);
}

namespace {
void fast_run_on(const NBitsFastPlan& plan, const float* A, const QuantWeights& W, const float* bias, float* Y,
                 ep::ThreadPool* pool, void* workspace);
}  // namespace

void matmulnbits_fast_run(const NBitsFastPlan& plan, const float* A, const QuantWeights& W, const float* bias,
                          float* Y, ep::ThreadPool* pool, void* workspace) {
  if (plan.M == 0 || W.N == 0) return;
  ep::run_on_plan_workspace(plan, pool, workspace, [&](const NBitsFastPlan& p, void* ws) {
    fast_run_on(p, A, W, bias, Y, pool, ws);
  });
}

namespace {
// matmulnbits_fast_run on a workspace that serves the plan (its slots cover the pool's threads).
void fast_run_on(const NBitsFastPlan& plan, const float* A, const QuantWeights& W, const float* bias, float* Y,
                 ep::ThreadPool* pool, void* workspace) {
  const int64_t N = W.N, K = W.K, M = plan.M;
  // The calling thread's slot of the per-thread scratch after the prepared A.
  uint8_t* slot0 = static_cast<uint8_t*>(workspace) + plan.prepared_bytes;
  const size_t stride = ep::SlotScratch::stride(plan.slot_bytes);
  auto my_slot = [&] { return reinterpret_cast<float*>(slot0 + static_cast<size_t>(pool ? pool->slot() : 0) * stride); };
  const bool int8 = plan.int8;
  if (plan.prefill) {
    const int64_t NP = plan.panel_cols;
    auto work = [&](int64_t p0, int64_t p1) {
      float* buf = my_slot();
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n0 = p * NP, n1 = std::min(N, n0 + NP);
        dequant_rows(W, n0, n1, buf);
        gemm_f32(false, true, M, n1 - n0, K, 1.f, A, K, buf, K, 0.f, Y + n0, N, nullptr);
      }
    };
    if (pool && plan.panels > 1) pool->parallel_for(plan.panels, plan.grain, work); else work(0, plan.panels);
  } else {
    PreparedA P;
    P.M = M;
    P.kpad = W.kpad;
    P.kb = W.kb;
    {
      auto up = [](size_t b) { return (b + 63) / 64 * 64; };
      uint8_t* cur = static_cast<uint8_t*>(workspace);
      if (int8) {
        P.aq = reinterpret_cast<int8_t*>(cur);
        cur += up(static_cast<size_t>(M * W.kpad));
      } else {
        P.af = reinterpret_cast<float*>(cur);
        cur += up(static_cast<size_t>(M * W.kpad) * sizeof(float));
      }
      P.asum = reinterpret_cast<float*>(cur);
      cur += up(static_cast<size_t>(M * W.kb) * sizeof(float));
      P.sa = reinterpret_cast<float*>(cur);
    }
    if (int8) {
      for (int64_t m = 0; m < M; ++m)
        quantize_a_row(A + m * K, K, W.block, W.kpad, P.aq + m * W.kpad, P.sa + m * W.kb,
                       P.asum + m * W.kb, plan.isa);
    } else {
      for (int64_t m = 0; m < M; ++m) {
        std::memcpy(P.af + m * W.kpad, A + m * K, static_cast<size_t>(K) * sizeof(float));
        std::fill(P.af + m * W.kpad + K, P.af + (m + 1) * W.kpad, 0.f);  // the padded tail reads as 0
        for (int64_t j = 0; j < W.kb; ++j) {
          float s = 0.f;
          const float* a = P.af + m * W.kpad + j * W.block;
          for (int64_t t = 0; t < W.block; ++t) s += a[t];
          P.asum[static_cast<size_t>(m * W.kb + j)] = s;
        }
      }
    }
    auto work = [&](int64_t n0, int64_t n1) { rows_dispatch(P, W, int8, n0, n1, Y, N, plan.use_avx2, my_slot()); };
    if (pool && N > plan.grain) pool->parallel_for(N, plan.grain, work); else work(0, N);
  }
  if (bias) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) Y[m * N + n] += bias[n];
  }
}
}  // namespace

// ---------------------------------------------------------------------------------------------
// The kernel.
namespace {

Result<std::vector<float>> read_floats(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  if (out.empty()) return out;
  switch (t.dtype()) {
    case DataType::kFloat: std::memcpy(out.data(), t.data<float>(), out.size() * 4); break;
    case DataType::kFloat16: for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t.data<Float16>()[i]); break;
    case DataType::kBFloat16: for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(t.data<BFloat16>()[i]); break;
    default: return invalid_argument(std::string("expected float32/float16/bfloat16, got ") + dtype_name(t.dtype()));
  }
  return out;
}

// How much of the weights a decode GEMV's worker reads first that it may fetch while idle before the
// node runs (KernelVariant::worker_prefetch): within its L2 with room to spare. Zen 5, Qwen2.5-0.5B-
// shape decode at 2 threads, steps alternating in one process: 1.9% faster with it than without (6 of
// 6 processes); 512 KB no faster than 192.
constexpr size_t kWorkerPrefetchBytes = 192 * 1024;

// The tiling for one M (rows of A) on the packed weights, and the scratch it runs on: the panel path's
// or the row path's plan, each with num_threads slots of per-thread scratch. Made by specialize.
struct NBitsVariant final : ep::KernelVariant {
  bool use_panels = false;
  NBitsFastPlan fast;
  NBitsPanelsPlan panels;
  ep::WorkerPrefetch head;  // a one-row panel plan on two threads: the head of the worker's first claim
  size_t workspace_bytes() const override { return use_panels ? panels.workspace_bytes() : fast.workspace_bytes(); }
  ep::WorkerPrefetch worker_prefetch() const override { return head; }
};

class MatMulNBits final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    K_ = info.attr_int("K", -1);
    N_ = info.attr_int("N", -1);
    bits_ = info.attr_int("bits", 4);
    block_ = info.attr_int("block_size", -1);
    acc_ = static_cast<int>(info.attr_int("accuracy_level", 0));
    // The tier is decided here, once: NXRT_ISA / isa=... cap it for tests and diagnosis.
    isa_ = info.isa();
    panel_kernel_ = choose_panel_kernel(isa_);
    if (K_ <= 0 || N_ <= 0) return info.error("attributes K and N are required and must be positive (K=" + std::to_string(K_) + ", N=" + std::to_string(N_) + ")");
    if (bits_ != 2 && bits_ != 4 && bits_ != 8) return info.error("bits must be 2, 4 or 8, got " + std::to_string(bits_));
    if (block_ < 16 || (block_ & (block_ - 1)) != 0) return info.error("block_size must be a power of 2 >= 16, got " + std::to_string(block_));
    if (info.op_type() == "MatMulNBitsSplit") return init_split(info);
    if (info.op_type() == "MatMulNBitsSiluMul") return init_silu_mul(info);
    if (info.input_present(4)) {
      if (info.const_input(4)) {
        const Tensor& g = *info.const_input(4);
        NXRT_RETURN_IF_ERROR(check_gidx(g, &info, nullptr));
      }
    }
    const Tensor* B = info.const_input(1);
    const Tensor* S = info.const_input(2);
    const bool zp_const = !info.input_present(3) || info.const_input(3);
    const bool g_const = !info.input_present(4) || info.const_input(4);
    if (B && S && zp_const && g_const) {
      Status st = prepare(*B, *S, info.input_present(3) ? info.const_input(3) : nullptr,
                          info.input_present(4) ? info.const_input(4) : nullptr, &W_, &P_, &dense_, &float_zp_);
      if (!st.ok()) return info.error(st.message());
      packed_ = true;
    }
    return Status::Ok();
  }

  // Packed weights, scales, zero points and g_idx are all compute() uses once prepared.
  bool reads_const_input_data(size_t i) const override {
    return !(packed_ && i >= 1 && (i <= 4 || !split_first_.empty() || silu_mul_));
  }

  // The tiling and scratch for A's rows on the packed weights (none for weights given at run time or
  // the dense g_idx path).
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    std::unique_ptr<ep::KernelVariant> none;
    const DataType dt = sc.dtype(0);
    const Dims& a = sc.shape(0);
    if (!packed_ || !dense_.empty() || a.empty() || a.back() != K_) return none;
    if (dt != DataType::kFloat && dt != DataType::kFloat16 && dt != DataType::kBFloat16) return none;
    int64_t numel = 1;
    for (int64_t d : a) numel *= d;
    auto v = std::make_unique<NBitsVariant>();
    if (!P_.empty()) {
      v->use_panels = true;
      v->panels = matmulnbits_panels_plan(numel / K_, P_, panel_kernel_, sc.num_threads(), silu_mul_);
      v->head = matmulnbits_panels_worker_head(v->panels, P_, kWorkerPrefetchBytes);
    } else {
      v->fast = matmulnbits_fast_plan(numel / K_, W_, fast_level(), isa_, sc.num_threads());
    }
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }
  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& A = ctx.input(0);
    if (A.dtype() != DataType::kFloat && A.dtype() != DataType::kFloat16 && A.dtype() != DataType::kBFloat16)
      return ctx.error(std::string("A must be float32/float16/bfloat16, got ") + dtype_name(A.dtype()), StatusCode::kInvalidArgument);
    if (A.rank() < 1 || A.dim(-1) != K_)
      return ctx.error("A's last dim must equal K=" + std::to_string(K_) + ", A is " + A.describe(), StatusCode::kInvalidArgument);
    QuantWeights local;
    QuantPanels local_panels;
    std::vector<float> local_dense;
    const QuantWeights* W = &W_;
    const QuantPanels* panels = &P_;
    const std::vector<float>* dense = &dense_;
    bool float_zp = float_zp_;
    if (!packed_) {
      // Weights given at run time are prepared per call into locals: concurrent runs share the kernel.
      Status st = prepare(ctx.input(1), ctx.input(2), ctx.has_input(3) ? &ctx.input(3) : nullptr,
                          ctx.has_input(4) ? &ctx.input(4) : nullptr, &local, &local_panels, &local_dense, &float_zp);
      if (!st.ok()) return ctx.error(st.message(), StatusCode::kInvalidArgument);
      W = &local;
      panels = &local_panels;
      dense = &local_dense;
    }
    std::vector<float> bias;  // a float16/bfloat16 bias converted; a float one is read in place
    const float* bias_in = nullptr;
    if (!split_bias_.empty()) bias_in = split_bias_.data();
    if (silu_mul_) return compute_silu_mul(ctx, A);
    if (split_first_.empty() && ctx.has_input(5)) {  // (MatMulNBitsSplit's input 5 is a weight)
      const Tensor& bt = ctx.input(5);
      if (bt.numel() != N_) return ctx.error("bias must have N=" + std::to_string(N_) + " elements, got " + bt.describe(), StatusCode::kInvalidArgument);
      if (bt.dtype() == DataType::kFloat) {
        bias_in = bt.data<float>();
      } else {
        NXRT_ASSIGN_OR_RETURN(bias, read_floats(bt));
        bias_in = bias.data();
      }
    }
    const int64_t M = A.numel() / K_;
    // One output, or (MatMulNBitsSplit) one per column range split_first_ gives.
    const bool split = !split_first_.empty();
    const size_t n_out = split ? split_first_.size() - 1 : 1;
    std::array<Tensor*, kMaxSplitOutputs> outs{};
    for (size_t i = 0; i < n_out; ++i) {
      Dims shape = A.shape();
      shape.back() = split ? split_first_[i + 1] - split_first_[i] : N_;
      NXRT_ASSIGN_OR_RETURN(outs[i], ctx.allocate_output(i, A.dtype(), shape));
    }
    const float* a = nullptr;
    std::vector<float> af;
    if (A.dtype() == DataType::kFloat) {
      a = A.data<float>();
    } else {
      NXRT_ASSIGN_OR_RETURN(af, read_floats(A));
      a = af.data();
    }
    const bool f32 = A.dtype() == DataType::kFloat;
    // y: the [M, N] product. A float32 single output is computed in place; otherwise into yf, then
    // converted or split into the outputs below, unless the panel path writes the outputs directly.
    float* y = nullptr;
    std::vector<float> yf;
    auto product_buffer = [&]() {
      if (f32 && !split) return outs[0]->data<float>();
      yf.resize(static_cast<size_t>(M * N_));
      return yf.data();
    };
    const float* bp = bias_in;
    if (!dense->empty()) {
      // g_idx with a non-trivial group map: dense float weights [N, K].
      if (acc_ == 4) {
        return ctx.error("accuracy_level 4 with a non-trivial g_idx is not supported", StatusCode::kNotImplemented);
      }
      y = product_buffer();
      gemm_f32(false, true, M, N_, K_, 1.f, a, K_, dense->data(), K_, 0.f, y, N_, &ctx.pool());
      if (bp)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t n = 0; n < N_; ++n) y[m * N_ + n] += bp[n];
    } else {
      // The variant's plan when it was made for these rows of the packed weights and this many threads;
      // else one made now (weights given at run time, no kernel cache), on step scratch.
      const int threads = ctx.pool().num_threads();
      const auto* v = packed_ ? dynamic_cast<const NBitsVariant*>(ctx.variant()) : nullptr;
      const bool use_panels = !panels->empty();
      if (v && (v->use_panels != use_panels || (use_panels ? v->panels.M != M || v->panels.slots < threads
                                                              : v->fast.M != M || v->fast.slots < threads))) {
        v = nullptr;
      }
      void* ws = nullptr;
      if (use_panels) {
        const NBitsPanelsPlan plan = v ? v->panels : matmulnbits_panels_plan(M, *panels, panel_kernel_, threads);
        if (v) {
          NXRT_ASSIGN_OR_RETURN(ws, ep::variant_workspace(ctx, *v));
        } else {
          NXRT_ASSIGN_OR_RETURN(ws, ctx.workspace(plan.workspace_bytes()));
        }
        if (f32 && split_on_panels_) {  // each panel's columns go straight to their output
          std::array<float*, kMaxSplitOutputs> out_data{};
          for (size_t i = 0; i < n_out; ++i) out_data[i] = outs[i]->data<float>();
          const NBitsColumnSplit cs{split_first_.data(), out_data.data(), static_cast<int>(n_out)};
          matmulnbits_panels_run(plan, a, *panels, bp, nullptr, &ctx.pool(), ws, &cs);
          return Status::Ok();
        }
        y = product_buffer();
        matmulnbits_panels_run(plan, a, *panels, bp, y, &ctx.pool(), ws);
      } else {
        const int level = packed_ ? fast_level() : fast_level(float_zp);
        const NBitsFastPlan plan = v ? v->fast : matmulnbits_fast_plan(M, *W, level, isa_, threads);
        if (v) {
          NXRT_ASSIGN_OR_RETURN(ws, ep::variant_workspace(ctx, *v));
        } else {
          NXRT_ASSIGN_OR_RETURN(ws, ctx.workspace(plan.workspace_bytes()));
        }
        y = product_buffer();
        matmulnbits_fast_run(plan, a, *W, bp, y, &ctx.pool(), ws);
      }
    }
    if (f32 && !split) return Status::Ok();
    // Columns [c0, c0 + w) of y into each output, in its dtype.
    for (size_t i = 0; i < n_out; ++i) {
      const int64_t c0 = split ? split_first_[i] : 0, w = split ? split_first_[i + 1] - c0 : N_;
      for (int64_t m = 0; m < M; ++m) {
        const float* src = y + m * N_ + c0;
        switch (A.dtype()) {
          case DataType::kFloat: std::memcpy(outs[i]->data<float>() + m * w, src, static_cast<size_t>(w) * sizeof(float)); break;
          case DataType::kFloat16: {
            Float16* o = outs[i]->data<Float16>() + m * w;
            for (int64_t n = 0; n < w; ++n) o[n] = Float16(src[n]);
            break;
          }
          default: {
            BFloat16* o = outs[i]->data<BFloat16>() + m * w;
            for (int64_t n = 0; n < w; ++n) o[n] = BFloat16(src[n]);
            break;
          }
        }
      }
    }
    return Status::Ok();
  }

 private:
  // MatMulNBitsSiluMul's call: float32 A (the fusion takes float32 products only), the panel path on
  // the variant's plan (or one made now).
  Status compute_silu_mul(ep::KernelContext& ctx, const Tensor& A) const {
    if (A.dtype() != DataType::kFloat)
      return ctx.error(std::string("A must be float32, got ") + dtype_name(A.dtype()), StatusCode::kInvalidArgument);
    const int64_t M = A.numel() / K_;
    Dims shape = A.shape();
    shape.back() = N_ / 2;
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, DataType::kFloat, shape));
    const int threads = ctx.pool().num_threads();
    const auto* v = dynamic_cast<const NBitsVariant*>(ctx.variant());
    if (v && (!v->use_panels || v->panels.M != M || v->panels.slots < threads || !v->panels.silu_mul)) v = nullptr;
    const NBitsPanelsPlan plan = v ? v->panels : matmulnbits_panels_plan(M, P_, panel_kernel_, threads, true);
    void* ws = nullptr;
    if (v) {
      NXRT_ASSIGN_OR_RETURN(ws, ep::variant_workspace(ctx, *v));
    } else {
      NXRT_ASSIGN_OR_RETURN(ws, ctx.workspace(plan.workspace_bytes()));
    }
    matmulnbits_panels_silu_mul_run(plan, A.data<float>(), P_, split_bias_.empty() ? nullptr : split_bias_.data(),
                                    Y->data<float>(), &ctx.pool(), ws, isa_ >= ep::IsaTier::kAvx512);
    return Status::Ok();
  }

  // nxrt::MatMulNBitsSplit (the optimizer's stacked sibling MatMulNBits): inputs A, then per output i
  // B_i, scales_i, zero_points_i (or none), then per output i an optional float32 bias_i [splits[i]],
  // all constants; output i is columns [sum of splits before i, + splits[i]) of the product over the
  // weights stacked along N (pack_stacked), plus bias_i.
  Status init_split(const ep::KernelInfo& info) {
    const std::vector<int64_t> sizes = info.attr_ints("splits");
    const size_t n = sizes.size();
    if (n == 0 || n > kMaxSplitOutputs || n != info.num_outputs())
      return info.error("splits must give one size per output (at most " + std::to_string(kMaxSplitOutputs) + "), got " +
                        std::to_string(n) + " sizes for " + std::to_string(info.num_outputs()) + " outputs");
    split_first_.push_back(0);
    for (int64_t w : sizes) {
      if (w <= 0) return info.error("splits must be positive, got " + std::to_string(w));
      split_first_.push_back(split_first_.back() + w);
    }
    if (split_first_.back() != N_)
      return info.error("splits sum to " + std::to_string(split_first_.back()) + ", not N=" + std::to_string(N_));
    std::vector<StackedPart> parts;
    NXRT_RETURN_IF_ERROR(stacked_parts(info, sizes, &parts));
    // Output i's columns, whole, after output i - 1's.
    std::vector<StackedRun> runs;
    for (size_t i = 0; i < n; ++i) runs.push_back({i, 0, sizes[i]});
    return pack_stacked(info, parts, runs);
  }

  // nxrt::MatMulNBitsSiluMul (optimizer/fusions/fuse_matmulnbits_silu_mul.cpp): inputs A, then the gate's
  // B, scales, zero points (or none), the up's, then optional float32 biases for gate and up; N is each
  // one's width. Y = Swish(A * gate + bias_g) * (A * up + bias_u). The two are stacked panel by panel
  // (matmulnbits_panels_silu_mul_run), so N must be a multiple of the panel width.
  Status init_silu_mul(const ep::KernelInfo& info) {
    const int64_t n = N_;
    if (info.num_outputs() != 1) return info.error("has one output, got " + std::to_string(info.num_outputs()));
    if (acc_ != 4 || bits_ != 4) return info.error("takes accuracy_level 4 with 4-bit weights, got accuracy_level " + std::to_string(acc_) + ", bits " + std::to_string(bits_));
    const int64_t cols = panel_kernel_info(panel_kernel_).cols;
    if (n % cols != 0) return info.error("N=" + std::to_string(n) + " must be a multiple of the panel width " + std::to_string(cols));
    N_ = 2 * n;
    std::vector<StackedPart> parts;
    NXRT_RETURN_IF_ERROR(stacked_parts(info, {n, n}, &parts));
    if (parts[0].z && parts[0].z->dtype() != DataType::kUInt8) return info.error("zero points must be uint8, got " + parts[0].z->describe());
    // Panel 2q: the gate's columns [q * cols, (q + 1) * cols); panel 2q + 1: the up's.
    std::vector<StackedRun> runs;
    for (int64_t c = 0; c < n; c += cols) {
      runs.push_back({0, c, cols});
      runs.push_back({1, c, cols});
    }
    NXRT_RETURN_IF_ERROR(pack_stacked(info, parts, runs));
    if (P_.empty() || P_.cols != cols) return info.error("the weights did not pack into column panels");
    silu_mul_ = true;
    return Status::Ok();
  }

  // One stacked output's constants (inputs 1 + 3i, 2 + 3i, 3 + 3i) and its optional bias (input
  // 1 + 3n + i), checked against the first output's dtypes and its own width.
  struct StackedPart {
    const Tensor* b = nullptr;
    const Tensor* s = nullptr;
    const Tensor* z = nullptr;
    const Tensor* bias = nullptr;
    int64_t width = 0;
  };
  // Columns [first, first + count) of part `part`, in the stacked order.
  struct StackedRun {
    size_t part = 0;
    int64_t first = 0, count = 0;
  };
  Status stacked_parts(const ep::KernelInfo& info, const std::vector<int64_t>& sizes, std::vector<StackedPart>* out) const {
    const size_t n = sizes.size();
    const int64_t kb = (K_ + block_ - 1) / block_, blob = block_ * bits_ / 8;
    const Tensor* s0 = info.const_input(2);
    const Tensor* z0 = info.input_present(3) ? info.const_input(3) : nullptr;
    if (!info.const_input(1) || !s0 || (info.input_present(3) && !z0))
      return info.error("weights, scales and zero points must be constants (initializers)");
    const int64_t zrow = z0 && z0->dtype() == DataType::kUInt8 ? (kb * bits_ + 7) / 8 : kb;
    if (info.num_inputs() > 1 + 3 * n + n)
      return info.error("takes at most " + std::to_string(1 + 4 * n) + " inputs (A, 3 weights per output, a bias per output), got " +
                        std::to_string(info.num_inputs()));
    for (size_t i = 0; i < n; ++i) {
      const size_t at = 1 + 3 * i;
      StackedPart p;
      p.width = sizes[i];
      p.b = info.const_input(at);
      p.s = info.const_input(at + 1);
      p.z = info.input_present(at + 2) ? info.const_input(at + 2) : nullptr;
      const std::string which = "output " + std::to_string(i) + "'s ";
      if (!p.b || !p.s || (info.input_present(at + 2) && !p.z))
        return info.error(which + "weights, scales and zero points must be constants (initializers)");
      if (p.b->dtype() != DataType::kUInt8 || p.b->numel() != sizes[i] * kb * blob || !p.b->is_contiguous())
        return info.error(which + "B must be uint8 [" + std::to_string(sizes[i]) + ", " + std::to_string(kb) + ", " +
                          std::to_string(blob) + "], got " + p.b->describe());
      if (p.s->dtype() != s0->dtype() || p.s->numel() != sizes[i] * kb || !p.s->is_contiguous())
        return info.error(which + "scales must be " + dtype_name(s0->dtype()) + " with " + std::to_string(sizes[i] * kb) +
                          " elements, got " + p.s->describe());
      if ((p.z != nullptr) != (z0 != nullptr) || (p.z && (p.z->dtype() != z0->dtype() || p.z->numel() != sizes[i] * zrow || !p.z->is_contiguous())))
        return info.error(which + "zero points must be given for every output or none, " + std::to_string(sizes[i] * zrow) +
                          " of one dtype" + (p.z ? ", got " + p.z->describe() : std::string()));
      const size_t bat = 1 + 3 * n + i;
      if (bat < info.num_inputs() && info.input_present(bat)) {
        p.bias = info.const_input(bat);
        if (!p.bias || p.bias->dtype() != DataType::kFloat || p.bias->numel() != sizes[i] || !p.bias->is_contiguous())
          return info.error("output " + std::to_string(i) + "'s bias must be a float32 constant with " + std::to_string(sizes[i]) +
                            " elements" + (p.bias ? ", got " + p.bias->describe() : std::string()));
      }
      out->push_back(p);
    }
    return Status::Ok();
  }

  // Stacks the parts' columns in the order of `runs` (every column once) into one B, scales, zero
  // points and bias (of the parts without one: zeros), then packs them. The stacked copy lives only
  // while this packs it: the model keeps the parts' own initializers (mapped from the file), which the
  // session drops once packed, so stacking adds no weight bytes to the peak.
  Status pack_stacked(const ep::KernelInfo& info, const std::vector<StackedPart>& parts, const std::vector<StackedRun>& runs) {
    const int64_t kb = (K_ + block_ - 1) / block_, blob = block_ * bits_ / 8;
    const StackedPart& p0 = parts[0];
    const size_t col_b = static_cast<size_t>(kb * blob), col_s = static_cast<size_t>(kb) * dtype_bits(p0.s->dtype()) / 8;
    const size_t col_z = p0.z ? p0.z->nbytes() / static_cast<size_t>(p0.width) : 0;
    Tensor B(DataType::kUInt8, {N_, kb, blob});
    Tensor S(p0.s->dtype(), {N_ * kb});
    Tensor Z(p0.z ? p0.z->dtype() : DataType::kUInt8, {p0.z ? N_ * static_cast<int64_t>(col_z / (dtype_bits(p0.z->dtype()) / 8)) : 0});
    const bool any_bias = std::any_of(parts.begin(), parts.end(), [](const StackedPart& p) { return p.bias != nullptr; });
    if (any_bias) split_bias_.assign(static_cast<size_t>(N_), 0.f);
    int64_t col = 0;
    for (const StackedRun& r : runs) {
      const StackedPart& p = parts[r.part];
      const size_t c0 = static_cast<size_t>(r.first), cn = static_cast<size_t>(r.count), at = static_cast<size_t>(col);
      std::memcpy(B.data<uint8_t>() + at * col_b, p.b->data<uint8_t>() + c0 * col_b, cn * col_b);
      std::memcpy(static_cast<uint8_t*>(S.raw_data()) + at * col_s, static_cast<const uint8_t*>(p.s->raw_data()) + c0 * col_s, cn * col_s);
      if (p.z) std::memcpy(static_cast<uint8_t*>(Z.raw_data()) + at * col_z, static_cast<const uint8_t*>(p.z->raw_data()) + c0 * col_z, cn * col_z);
      if (p.bias) std::copy(p.bias->data<float>() + c0, p.bias->data<float>() + c0 + cn, split_bias_.begin() + col);
      col += r.count;
    }
    if (col != N_) return info.error("stacked " + std::to_string(col) + " columns, not N=" + std::to_string(N_));
    Status st = prepare(B, S, p0.z ? &Z : nullptr, nullptr, &W_, &P_, &dense_, &float_zp_);
    if (!st.ok()) return info.error(st.message());
    packed_ = true;
    // Every split on a panel boundary of the packed weights: the panel path writes the outputs directly.
    if (!split_first_.empty())
      split_on_panels_ = !P_.empty() && NBitsColumnSplit{split_first_.data(), nullptr, static_cast<int>(parts.size())}.fits(P_);
    return Status::Ok();
  }

  // ORT's int8 path (accuracy_level 4) covers 4- and 8-bit weights with uint8 (or no) zero points;
  // float zero points and 2-bit weights compute in float, as there.
  int fast_level(bool float_zp) const { return acc_ == 4 && (float_zp || bits_ == 2) ? 0 : acc_; }
  int fast_level() const { return fast_level(float_zp_); }

  Status check_gidx(const Tensor& g, const ep::KernelInfo*, bool* trivial) const {
    if (g.dtype() != DataType::kInt32 || g.numel() != K_)
      return invalid_argument("g_idx must be int32 with K=" + std::to_string(K_) + " elements, got " + g.describe());
    const int64_t kblocks = (K_ + block_ - 1) / block_;
    bool triv = true;
    for (int64_t k = 0; k < K_; ++k) {
      const int32_t v = g.data<int32_t>()[k];
      if (v < 0 || v >= kblocks) return invalid_argument("g_idx value " + std::to_string(v) + " out of range [0, " + std::to_string(kblocks) + ")");
      if (v != k / block_) triv = false;
    }
    if (trivial) *trivial = triv;
    return Status::Ok();
  }

  // Decodes scales/zero points and packs B (or builds dense weights when g_idx is non-trivial).
  // `float_zp`: set when the zero points are floats.
  Status prepare(const Tensor& B, const Tensor& S, const Tensor* Z, const Tensor* G, QuantWeights* W,
                 QuantPanels* panels, std::vector<float>* dense, bool* float_zp) const {
    const int64_t kblocks = (K_ + block_ - 1) / block_;
    const int64_t blob = block_ * bits_ / 8;
    if (B.dtype() != DataType::kUInt8 || B.numel() != N_ * kblocks * blob)
      return invalid_argument("B must be uint8 [N=" + std::to_string(N_) + ", k_blocks=" + std::to_string(kblocks) +
                              ", blob=" + std::to_string(blob) + "], got " + B.describe());
    if (S.numel() != N_ * kblocks)
      return invalid_argument("scales must have N*k_blocks=" + std::to_string(N_ * kblocks) + " elements, got " + S.describe());
    NXRT_ASSIGN_OR_RETURN(std::vector<float> scales, read_floats(S));
    std::vector<float> zps(static_cast<size_t>(N_ * kblocks), static_cast<float>(1 << (bits_ - 1)));
    if (Z) {
      if (Z->dtype() == DataType::kUInt8) {
        const int64_t row = (kblocks * bits_ + 7) / 8;
        if (Z->numel() != N_ * row)
          return invalid_argument("packed uint8 zero_points must have N*ceil(k_blocks*bits/8)=" + std::to_string(N_ * row) + " elements, got " + Z->describe());
        const uint8_t* z = Z->data<uint8_t>();
        for (int64_t n = 0; n < N_; ++n)
          for (int64_t j = 0; j < kblocks; ++j)
            zps[static_cast<size_t>(n * kblocks + j)] = static_cast<float>(raw_code(z + n * row, j, bits_));
      } else {
        *float_zp = true;
        if (Z->numel() != N_ * kblocks)
          return invalid_argument("float zero_points must have N*k_blocks=" + std::to_string(N_ * kblocks) + " elements, got " + Z->describe());
        NXRT_ASSIGN_OR_RETURN(zps, read_floats(*Z));
      }
    }
    bool trivial = true;
    if (G) NXRT_RETURN_IF_ERROR(check_gidx(*G, nullptr, &trivial));
    if (!trivial) {
      dense->assign(static_cast<size_t>(N_ * K_), 0.f);
      const uint8_t* b = B.data<uint8_t>();
      const int32_t* g = G->data<int32_t>();
      for (int64_t n = 0; n < N_; ++n)
        for (int64_t k = 0; k < K_; ++k) {
          const int q = raw_code(b + (n * kblocks + k / block_) * blob, k % block_, bits_);
          const int64_t gi = n * kblocks + g[k];
          (*dense)[static_cast<size_t>(n * K_ + k)] = (static_cast<float>(q) - zps[static_cast<size_t>(gi)]) * scales[static_cast<size_t>(gi)];
        }
      return Status::Ok();
    }
    if (acc_ == 4 && bits_ == 4 && !*float_zp) {
      // int8 activations x 4-bit codes: the column-panel kernel serves decode and prefill alike.
      *panels = pack_quant_panels(B.data<uint8_t>(), scales.data(), zps.data(), K_, N_, bits_, block_,
                                  panel_kernel_info(panel_kernel_).cols);
      return Status::Ok();
    }
    *W = pack_quant_weights(B.data<uint8_t>(), scales.data(), zps.data(), K_, N_, bits_, block_);
    return Status::Ok();
  }

  static constexpr size_t kMaxSplitOutputs = 8;
  int64_t K_ = 0, N_ = 0, bits_ = 4, block_ = 32;
  std::vector<int64_t> split_first_;  // MatMulNBitsSplit: outputs + 1 column offsets (empty: one output)
  bool split_on_panels_ = false;      // ... each offset a panel boundary of P_ (decided at creation)
  bool silu_mul_ = false;             // MatMulNBitsSiluMul: P_ holds gate/up panel pairs, one output of N_ / 2
  std::vector<float> split_bias_;     // MatMulNBitsSplit with biases: N stacked bias values (else empty)
  int acc_ = 0;
  ep::IsaTier isa_ = ep::IsaTier::kScalar;
  PanelKernel panel_kernel_ = PanelKernel::kScalar;
  bool packed_ = false;
  bool float_zp_ = false;  // the packed weights' zero points are floats
  QuantWeights W_;
  QuantPanels P_;  // instead of W_ for accuracy_level 4 with 4-bit codes and integer zero points
  std::vector<float> dense_;
};

}  // namespace

void register_contrib_matmulnbits(ep::KernelRegistry& r) {
  r.add_class<MatMulNBits>("com.microsoft", "MatMulNBits", 1);
  // The optimizer's stacked sibling MatMulNBits (fuse_sibling_matmulnbits): one output per split.
  r.add_class<MatMulNBits>(ir::kNxrtDomain, "MatMulNBitsSplit");
  // A gate/up pair and the SwiGLU product after it (fuse_matmulnbits_silu_mul): Swish(gate) * up.
  r.add_class<MatMulNBits>(ir::kNxrtDomain, "MatMulNBitsSiluMul");
}

}  // namespace nxrt::ops::contrib
