#include "ir/half_convert.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "nxrt/float_types.h"

namespace nxrt::ir {

namespace {

// F16C, 8 elements at a time: vcvtps2ph rounds to nearest even as float_to_half does and vcvtph2ps is
// exact; NaNs, where the instructions differ (vcvtps2ph keeps a truncated payload, vcvtph2ps quiets a
// signaling NaN), take the scalar conversions' bits.
#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void floats_to_halves_f16c(const float* x, uint16_t* y, int64_t n) {
  const __m128i sign = _mm_set1_epi16(static_cast<short>(0x8000)), qnan = _mm_set1_epi16(0x7e00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i nan32 = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(nan32), _mm256_extracti128_si256(nan32, 1));
    h = _mm_blendv_epi8(h, _mm_or_si128(_mm_and_si128(h, sign), qnan), nan16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), h);
  }
  for (; i < n; ++i) y[i] = float_to_half(x[i]);
}
__attribute__((target("avx2,f16c"))) void halves_to_floats_f16c(const uint16_t* x, float* y, int64_t n) {
  const __m256i exp_mask = _mm256_set1_epi32(0x7c00), mant_mask = _mm256_set1_epi32(0x3ff);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i));
    const __m256 f = _mm256_cvtph_ps(h);
    const __m256i w = _mm256_cvtepu16_epi32(h);
    const __m256i mant = _mm256_and_si256(w, mant_mask);
    const __m256i nan = _mm256_andnot_si256(_mm256_cmpeq_epi32(mant, _mm256_setzero_si256()),
                                            _mm256_cmpeq_epi32(_mm256_and_si256(w, exp_mask), exp_mask));
    // sign | 0x7f800000 | mant << 13: half_to_float's NaN, payload as it is
    const __m256i bits = _mm256_or_si256(_mm256_or_si256(_mm256_slli_epi32(_mm256_srli_epi32(w, 15), 31),
                                                         _mm256_set1_epi32(0x7f800000)),
                                         _mm256_slli_epi32(mant, 13));
    _mm256_storeu_ps(y + i, _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(nan)));
  }
  for (; i < n; ++i) y[i] = half_to_float(x[i]);
}
#endif

}  // namespace

bool half_conversion_vectorized() {
#if defined(__x86_64__)
  // F16C by CPUID (clang's __builtin_cpu_supports does not know "f16c"), AVX2 as ep/cpu_features does.
  static const bool yes = [] {
    __builtin_cpu_init();
    unsigned a = 0, b = 0, c = 0, d = 0;
    const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);  // CPUID.1:ECX.F16C[bit 29]
    return f16c && __builtin_cpu_supports("avx2");
  }();
  return yes;
#else
  return false;
#endif
}

void halves_to_floats(const uint16_t* in, float* out, int64_t n) {
#if defined(__x86_64__)
  if (half_conversion_vectorized()) return halves_to_floats_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = half_to_float(in[i]);
}

void floats_to_halves(const float* in, uint16_t* out, int64_t n) {
#if defined(__x86_64__)
  if (half_conversion_vectorized()) return floats_to_halves_f16c(in, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_half(in[i]);
}

}  // namespace nxrt::ir
