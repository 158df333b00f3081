// vec_math.h's maps on AVX2 + FMA (8 lanes, masked tails). This file is compiled with -mavx2 -mfma
// (CMakeLists.txt) and includes nothing but the intrinsics and vec_math_impl.h: see there.
#include "ops/elementwise/vec_math_impl.h"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace nxrt::ops::vecmath {
namespace {

struct Avx2 {
  using V = __m256;
  using M = __m256;  // all-ones lanes
  static constexpr int kLanes = 8;
  static __m256i first(int n) { return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_n(const float* p, int n) { return _mm256_maskload_ps(p, first(n)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, V v, int n) { _mm256_maskstore_ps(p, first(n), v); }
  static V set1(float f) { return _mm256_set1_ps(f); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }    // a b + c
  static V fnmadd(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
  static V fmsub(V a, V b, V c) { return _mm256_fmsub_ps(a, b, c); }    // a b - c
  static V min(V a, V b) { return _mm256_min_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V abs(V a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.f), a); }
  static V copysign(V mag, V sign) {
    const V s = _mm256_set1_ps(-0.f);
    return _mm256_or_ps(_mm256_andnot_ps(s, mag), _mm256_and_ps(s, sign));
  }
  static V sqrt(V a) { return _mm256_sqrt_ps(a); }
  static V round(V a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static M lt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_LT_OQ); }
  static M gt(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_GT_OQ); }
  static M isnan(V a) { return _mm256_cmp_ps(a, a, _CMP_UNORD_Q); }
  static M eq(V a, V b) { return _mm256_cmp_ps(a, b, _CMP_EQ_OQ); }
  // The unbiased exponent of a normal x as a float, and its significand with the exponent of 1 ([1, 2)).
  static V exponent(V x) {
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(_mm256_castps_si256(x), 23), _mm256_set1_epi32(127)));
  }
  static V mantissa(V x) {
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffff)), _mm256_set1_epi32(0x3f800000)));
  }
  static V select(M m, V if_true, V if_false) { return _mm256_blendv_ps(if_false, if_true, m); }
  static V load_n_fill(const float* p, int n, float fill) {
    const __m256i m = first(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static M no_lanes() { return _mm256_setzero_ps(); }
  static M lanes_or(M a, M b) { return _mm256_or_ps(a, b); }
  static bool any(M m) { return _mm256_movemask_ps(m) != 0; }
  static float hmax(V v) {
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  }
  static float hadd(V v) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  }
  // p 2^k for an integral k in [-127, 128], as two factors (see vec_math_avx512.cpp).
  static V scale_pow2(V p, V k) {
    const __m256i ki = _mm256_cvtps_epi32(k);
    const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
    const __m256i bias = _mm256_set1_epi32(127);
    const V s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    const V s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
  }
};

}  // namespace

void map_avx2(Fn fn, const float* x, const float* bias, float* y, int64_t n) { map_any<Avx2>(fn, x, bias, y, n); }
void softmax_row_avx2(const float* x, float* y, int64_t n, bool log_softmax) { softmax_row<Avx2>(x, y, n, log_softmax); }

}  // namespace nxrt::ops::vecmath

#else
namespace nxrt::ops::vecmath {
void map_avx2(Fn, const float*, const float*, float*, int64_t) {}  // never called: no such CPU (see vec_math.h)
void softmax_row_avx2(const float*, float*, int64_t, bool) {}
}  // namespace nxrt::ops::vecmath
#endif
