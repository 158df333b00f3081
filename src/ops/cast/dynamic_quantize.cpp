// DynamicQuantizeLinear's range and quantization loops (dynamic_quantize.h): scalar (the reference),
// AVX2 and AVX-512. The vector loops keep the scalar ones' operations: min/max with x as the first
// operand (x86 min/max return the second operand for a NaN or for two zeros, so a NaN x is skipped and
// -0 never replaces the starting +0, as `x < mn` does), x / scale as a float division, rounding to
// nearest even, + zp, then max(q, 0) with q first (a NaN quotient gives 0) and min(q, 255).
#include "ops/cast/dynamic_quantize.h"

#include "ep/thread_pool.h"
#include "ops/common.h"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nxrt::ops {

namespace {

void range_scalar(const float* x, int64_t n, float* mn, float* mx) {
  float lo = 0.0f, hi = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] < lo) lo = x[i];
    if (x[i] > hi) hi = x[i];
  }
  *mn = lo;
  *mx = hi;
}

void quantize_scalar(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    float q = static_cast<float>(round_half_even(static_cast<double>(x[i] / scale)));  // exact: an integer
    q += zp;
    if (std::isnan(q)) q = 0.0f;
    y[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, q)));
  }
}

// QuantizeLinear to int8: as quantize_scalar on [-128, 127], a NaN to 0.
void quantize_s8_scalar(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  for (int64_t i = 0; i < n; ++i) {
    float q = static_cast<float>(round_half_even(static_cast<double>(x[i] / scale))) + zp;
    if (std::isnan(q)) q = 0.0f;
    y[i] = static_cast<uint8_t>(static_cast<int8_t>(std::min(127.0f, std::max(-128.0f, q))));
  }
}
template <typename Q>
void dequantize_scalar(const Q* x, int64_t n, float scale, float zp, float* y) {
  for (int64_t i = 0; i < n; ++i) y[i] = (static_cast<float>(x[i]) - zp) * scale;
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float hmin8(__m256 v) {
  __m128 m = _mm_min_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_min_ps(m, _mm_movehl_ps(m, m));
  m = _mm_min_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
__attribute__((target("avx2,fma"))) float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

__attribute__((target("avx2,fma"))) void range_avx2(const float* x, int64_t n, float* mn, float* mx) {
  __m256 lo0 = _mm256_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    lo0 = _mm256_min_ps(a, lo0);
    hi0 = _mm256_max_ps(a, hi0);
    lo1 = _mm256_min_ps(b, lo1);
    hi1 = _mm256_max_ps(b, hi1);
  }
  float lo = hmin8(_mm256_min_ps(lo0, lo1)), hi = hmax8(_mm256_max_ps(hi0, hi1));
  float tlo, thi;
  range_scalar(x + i, n - i, &tlo, &thi);
  *mn = std::min(lo, tlo);
  *mx = std::max(hi, thi);
}

__attribute__((target("avx2,fma"))) void quantize_avx2(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp), zero = _mm256_setzero_ps(),
               top = _mm256_set1_ps(255.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), s);
      v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
      v = _mm256_min_ps(_mm256_max_ps(v, zero), top);
      q[k] = _mm256_cvttps_epi32(v);
    }
    // int32 -> uint16 -> uint8 (every value is in [0, 255], so the saturating packs are exact); the
    // packs work per 128-bit lane, the permute puts the four-byte groups back in order.
    const __m256i w = _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permutevar8x32_epi32(w, order));
  }
  quantize_scalar(x + i, n - i, scale, zp, y + i);
}

// GCC 12's AVX-512 intrinsics (the reductions, cvttps_epi32, roundscale) start from an undefined vector,
// which -Wuninitialized reports inside the header.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void range_avx512(const float* x, int64_t n, float* mn,
                                                                              float* mx) {
  __m512 lo0 = _mm512_setzero_ps(), hi0 = lo0, lo1 = lo0, hi1 = lo0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    lo0 = _mm512_min_ps(a, lo0);
    hi0 = _mm512_max_ps(a, hi0);
    lo1 = _mm512_min_ps(b, lo1);
    hi1 = _mm512_max_ps(b, hi1);
  }
  float lo = _mm512_reduce_min_ps(_mm512_min_ps(lo0, lo1)), hi = _mm512_reduce_max_ps(_mm512_max_ps(hi0, hi1));
  float tlo, thi;
  range_scalar(x + i, n - i, &tlo, &thi);
  *mn = std::min(lo, tlo);
  *mx = std::max(hi, thi);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void quantize_avx512(const float* x, int64_t n,
                                                                                 float scale, float zp, uint8_t* y) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zp), zero = _mm512_setzero_ps(),
               top = _mm512_set1_ps(255.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), s);
    v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    v = _mm512_min_ps(_mm512_max_ps(v, zero), top);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
  }
  quantize_scalar(x + i, n - i, scale, zp, y + i);
}
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void quantize_s8_avx512(const float* x, int64_t n,
                                                                                    float scale, float zp, uint8_t* y) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zp), lo = _mm512_set1_ps(-128.0f),
               hi = _mm512_set1_ps(127.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + i), s);
    v = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
    v = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), v);  // NaN -> 0
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(v)));
  }
  quantize_s8_scalar(x + i, n - i, scale, zp, y + i);
}
template <bool kSigned>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void dequantize_avx512(const uint8_t* x, int64_t n,
                                                                                   float scale, float zp, float* y) {
  const __m512 s = _mm512_set1_ps(scale), z = _mm512_set1_ps(zp);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    const __m512i w = kSigned ? _mm512_cvtepi8_epi32(b) : _mm512_cvtepu8_epi32(b);
    _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_sub_ps(_mm512_cvtepi32_ps(w), z), s));
  }
  if constexpr (kSigned) dequantize_scalar(reinterpret_cast<const int8_t*>(x) + i, n - i, scale, zp, y + i);
  else dequantize_scalar(x + i, n - i, scale, zp, y + i);
}
#pragma GCC diagnostic pop
__attribute__((target("avx2,fma"))) void quantize_s8_avx2(const float* x, int64_t n, float scale, float zp, uint8_t* y) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp), lo = _mm256_set1_ps(-128.0f),
               hi = _mm256_set1_ps(127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i q[4];
    for (int k = 0; k < 4; ++k) {
      __m256 v = _mm256_div_ps(_mm256_loadu_ps(x + i + 8 * k), s);
      v = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), z);
      v = _mm256_and_ps(v, _mm256_cmp_ps(v, v, _CMP_ORD_Q));  // NaN -> 0
      q[k] = _mm256_cvttps_epi32(_mm256_min_ps(_mm256_max_ps(v, lo), hi));
    }
    // int32 -> int16 -> int8 with signed saturation (exact: every value is in [-128, 127]).
    const __m256i w = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permutevar8x32_epi32(w, order));
  }
  quantize_s8_scalar(x + i, n - i, scale, zp, y + i);
}
template <bool kSigned>
__attribute__((target("avx2,fma"))) void dequantize_avx2(const uint8_t* x, int64_t n, float scale, float zp, float* y) {
  const __m256 s = _mm256_set1_ps(scale), z = _mm256_set1_ps(zp);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + i));
    const __m256i w = kSigned ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(_mm256_cvtepi32_ps(w), z), s));
  }
  if constexpr (kSigned) dequantize_scalar(reinterpret_cast<const int8_t*>(x) + i, n - i, scale, zp, y + i);
  else dequantize_scalar(x + i, n - i, scale, zp, y + i);
}
#endif

}  // namespace

void dql_range(const float* x, int64_t n, float* mn, float* mx, ep::IsaTier tier) {
#if defined(__x86_64__)
  if (tier >= ep::IsaTier::kAvx512) return range_avx512(x, n, mn, mx);
  if (tier >= ep::IsaTier::kAvx2) return range_avx2(x, n, mn, mx);
#endif
  (void)tier;
  range_scalar(x, n, mn, mx);
}

void dql_quantize(const float* x, int64_t n, float scale, float zp, uint8_t* y, ep::IsaTier tier) {
#if defined(__x86_64__)
  if (tier >= ep::IsaTier::kAvx512) return quantize_avx512(x, n, scale, zp, y);
  if (tier >= ep::IsaTier::kAvx2) return quantize_avx2(x, n, scale, zp, y);
#endif
  (void)tier;
  quantize_scalar(x, n, scale, zp, y);
}

void dynamic_quantize_u8(ep::ThreadPool& pool, const float* x, int64_t n, ep::IsaTier tier, uint8_t* q, float* scale,
                         uint8_t* zp) {
  constexpr int64_t kChunk = 16384;
  // The range in at most kParts fixed parts (min and max do not depend on how the parts fall).
  constexpr int64_t kParts = 64;
  const int64_t parts = std::min<int64_t>(kParts, std::max<int64_t>(1, (n + kChunk - 1) / kChunk));
  float mn = 0.0f, mx = 0.0f;
  if (parts == 1) {
    dql_range(x, n, &mn, &mx, tier);
  } else {
    float part[2 * kParts];
    pool.parallel_for(parts, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const int64_t b = n * c / parts, e = n * (c + 1) / parts;
        dql_range(x + b, e - b, &part[2 * c], &part[2 * c + 1], tier);
      }
    });
    for (int64_t c = 0; c < parts; ++c) {
      mn = std::min(mn, part[2 * c]);
      mx = std::max(mx, part[2 * c + 1]);
    }
  }
  const float s = (mx - mn) / 255.0f;
  float zpf = s == 0.0f ? 0.0f : static_cast<float>(round_half_even(static_cast<double>(0.0f - mn / s)));
  zpf = std::min(255.0f, std::max(0.0f, zpf));
  *scale = s;
  *zp = static_cast<uint8_t>(zpf);
  if (s == 0.0f) {
    // Every element 0 (or NaN): q = 0 + zp, and zp is 0 here.
    std::fill(q, q + n, *zp);
    return;
  }
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t b = c * kChunk;
      dql_quantize(x + b, std::min(kChunk, n - b), s, zpf, q + b, tier);
    }
  });
}

void quantize_8bit(const float* x, int64_t n, float scale, float zp, bool is_signed, uint8_t* y, ep::IsaTier tier) {
  if (!is_signed) return dql_quantize(x, n, scale, zp, y, tier);
#if defined(__x86_64__)
  if (tier >= ep::IsaTier::kAvx512) return quantize_s8_avx512(x, n, scale, zp, y);
  if (tier >= ep::IsaTier::kAvx2) return quantize_s8_avx2(x, n, scale, zp, y);
#endif
  quantize_s8_scalar(x, n, scale, zp, y);
}

void dequantize_8bit(const uint8_t* x, int64_t n, bool is_signed, float scale, float zp, float* y, ep::IsaTier tier) {
#if defined(__x86_64__)
  if (tier >= ep::IsaTier::kAvx512) {
    return is_signed ? dequantize_avx512<true>(x, n, scale, zp, y) : dequantize_avx512<false>(x, n, scale, zp, y);
  }
  if (tier >= ep::IsaTier::kAvx2) {
    return is_signed ? dequantize_avx2<true>(x, n, scale, zp, y) : dequantize_avx2<false>(x, n, scale, zp, y);
  }
#endif
  (void)tier;
  if (is_signed) dequantize_scalar(reinterpret_cast<const int8_t*>(x), n, scale, zp, y);
  else dequantize_scalar(x, n, scale, zp, y);
}

}  // namespace nxrt::ops
