// vec_math.h's maps on AVX-512 (16 lanes, masked tails). This file is compiled with -mavx512f/dq/bw/vl
// (CMakeLists.txt) and includes nothing but the intrinsics and vec_math_impl.h: see there.
#include "ops/elementwise/vec_math_impl.h"

#if defined(__x86_64__) && defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>

namespace nxrt::ops::vecmath {
namespace {

struct Avx512 {
  using V = __m512;
  using M = __mmask16;
  static constexpr int kLanes = 16;
  static M first(int n) { return static_cast<M>((1u << n) - 1); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(first(n), p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, V v, int n) { _mm512_mask_storeu_ps(p, first(n), v); }
  static V set1(float f) { return _mm512_set1_ps(f); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }    // a b + c
  static V fnmadd(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
  static V fmsub(V a, V b, V c) { return _mm512_fmsub_ps(a, b, c); }    // a b - c
  static V min(V a, V b) { return _mm512_min_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V abs(V a) { return _mm512_andnot_ps(_mm512_set1_ps(-0.f), a); }
  static V copysign(V mag, V sign) {
    const V s = _mm512_set1_ps(-0.f);
    return _mm512_or_ps(_mm512_andnot_ps(s, mag), _mm512_and_ps(s, sign));
  }
  static V sqrt(V a) { return _mm512_sqrt_ps(a); }
  static V round(V a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static M lt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_LT_OQ); }
  static M gt(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static M isnan(V a) { return _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q); }
  static M eq(V a, V b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  // The unbiased exponent of a normal x as a float, and its significand with the exponent of 1 ([1, 2)).
  static V exponent(V x) {
    return _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(_mm512_castps_si512(x), 23), _mm512_set1_epi32(127)));
  }
  static V mantissa(V x) {
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffff)), _mm512_set1_epi32(0x3f800000)));
  }
  static V select(M m, V if_true, V if_false) { return _mm512_mask_blend_ps(m, if_false, if_true); }
  static V load_n_fill(const float* p, int n, float fill) { return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), first(n), p); }
  static M no_lanes() { return 0; }
  static M lanes_or(M a, M b) { return static_cast<M>(a | b); }
  static bool any(M m) { return m != 0; }
  // (Not _mm512_reduce_*_ps or _mm512_castps512_ps256: in a file built with -mavx512f GCC 12 warns
  // inside them, -Werror=uninitialized.)
  static float hmax(V v) {
    const __m256 h8 = _mm256_max_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  }
  static float hadd(V v) {
    const __m256 h8 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 0), _mm512_extractf32x8_ps(v, 1));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
  }
  // p 2^k for an integral k in [-127, 128], as two factors 2^(k/2) 2^(k - k/2) (one would overflow
  // the exponent field at the ends).
  static V scale_pow2(V p, V k) {
    const __m512i ki = _mm512_cvtps_epi32(k);
    const __m512i k1 = _mm512_srai_epi32(ki, 1), k2 = _mm512_sub_epi32(ki, k1);
    const __m512i bias = _mm512_set1_epi32(127);
    const V s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
    const V s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
    return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
  }
};

}  // namespace

void map_avx512(Fn fn, const float* x, const float* bias, float* y, int64_t n) { map_any<Avx512>(fn, x, bias, y, n); }
void softmax_row_avx512(const float* x, float* y, int64_t n, bool log_softmax) {
  softmax_row<Avx512>(x, y, n, log_softmax);
}

}  // namespace nxrt::ops::vecmath

#else
namespace nxrt::ops::vecmath {
void map_avx512(Fn, const float*, const float*, float*, int64_t) {}  // never called: no such CPU (see vec_math.h)
void softmax_row_avx512(const float*, float*, int64_t, bool) {}
}  // namespace nxrt::ops::vecmath
#endif
