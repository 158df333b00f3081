// AVX2 versions of reduction/reduction_math.h's vectorizable float math, for kernels that dispatch to AVX2 at
// run time (callers must check simd_has_avx2() first; these functions carry the target attribute).
#pragma once
#include <cstdint>
#include <limits>

#include "ep/cpu_features.h"
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_SIMD_X86 1
#endif

namespace nxrt::ops {

inline bool simd_has_avx2() { return ep::cpu_has_avx2_fma(); }  // AVX2 and FMA

#ifdef NXRT_SIMD_X86
// exp_fast on 8 lanes: the same range reduction, polynomial and 2^k scaling; 0 below -87.3, +inf above
// 88.7, NaN stays NaN.
__attribute__((target("avx2,fma"))) inline __m256 exp8_avx2(__m256 x) {
  const __m256 hi = _mm256_set1_ps(88.72283f), lo = _mm256_set1_ps(-87.33654f);
  const __m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 t = _mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f));
  const __m256 k = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), xc);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), _mm256_set1_ps(1.0f));
  const __m256i ki = _mm256_cvtps_epi32(k);
  const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
  __m256 v = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  v = _mm256_blendv_ps(v, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
  v = _mm256_blendv_ps(v, _mm256_set1_ps(std::numeric_limits<float>::infinity()), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
  return _mm256_blendv_ps(v, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));  // NaN stays NaN
}

// exp8_avx2 on 16 lanes, lane for lane the same operations (so the same bits per element).
__attribute__((target("avx512f,avx512dq,avx2,fma"))) inline __m512 exp16_avx512(__m512 x) {
  const __m512 hi = _mm512_set1_ps(88.72283f), lo = _mm512_set1_ps(-87.33654f);
  const __m512 xc = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
  const __m512 t = _mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f));
  const __m512 k = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), _mm512_set1_ps(1.0f));
  const __m512i ki = _mm512_cvtps_epi32(k);
  const __m512i k1 = _mm512_srai_epi32(ki, 1), k2 = _mm512_sub_epi32(ki, k1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
  __m512 v = _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
  v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), v, _mm512_setzero_ps());
  v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), v, _mm512_set1_ps(std::numeric_limits<float>::infinity()));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), v, x);  // NaN stays NaN
}

// y = x * sigmoid(alpha * x) (swish = true) or sigmoid(x) (alpha unused), n floats.
__attribute__((target("avx2,fma"))) inline void sigmoid_like_avx2(const float* x, float* y, int64_t n, float alpha,
                                                                    bool swish) {
  const __m256 one = _mm256_set1_ps(1.f), na = _mm256_set1_ps(-alpha), m1 = _mm256_set1_ps(-1.f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 e = exp8_avx2(_mm256_mul_ps(v, swish ? na : m1));
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    _mm256_storeu_ps(y + i, swish ? _mm256_mul_ps(v, s) : s);
  }
  for (; i < n; ++i) {
    alignas(32) float t[8] = {x[i]};
    const __m256 v = _mm256_load_ps(t);
    const __m256 e = exp8_avx2(_mm256_mul_ps(v, swish ? na : m1));
    const __m256 s = _mm256_div_ps(one, _mm256_add_ps(one, e));
    _mm256_store_ps(t, swish ? _mm256_mul_ps(v, s) : s);
    y[i] = t[0];
  }
}

// sigmoid_like_avx2 on 16 lanes (masked tail): lane for lane the same operations, so the same bits.
__attribute__((target("avx512f,avx512dq,avx2,fma"))) inline void sigmoid_like_avx512(const float* x, float* y, int64_t n,
                                                                                      float alpha, bool swish) {
  const __m512 one = _mm512_set1_ps(1.f), neg = _mm512_set1_ps(swish ? -alpha : -1.f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 k = n - i >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - i)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(k, x + i);
    const __m512 s = _mm512_div_ps(one, _mm512_add_ps(one, exp16_avx512(_mm512_mul_ps(v, neg))));
    _mm512_mask_storeu_ps(y + i, k, swish ? _mm512_mul_ps(v, s) : s);
  }
}
#endif

}  // namespace nxrt::ops
