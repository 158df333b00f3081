// See skip_norm_rows.h. Two bodies, f32_skip_norm_row__avx512 (16 floats a step, 8 doubles a register)
// and f32_skip_norm_row__avx2 (8 floats, 4 doubles); the tails run the plain loop's scalar arithmetic.
// The plain loop itself is contrib_ops.cpp's (every dtype), which rows take below AVX2.
#include "ops/contrib/skip_norm_rows.h"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nxrt::ops::contrib {

namespace {

// input + skip + bias of element i, added in the plain loop's order.
inline float pre(const SkipNormRow& r, int64_t i) {
  float v = r.x[i];
  if (r.skip) v += r.skip[i];
  if (r.bias) v += r.bias[i];
  return v;
}

inline float normed(const SkipNormRow& r, int64_t i, double mean, double inv) {
  const float v = static_cast<float>((static_cast<double>(pre(r, i)) - mean) * inv) * r.gamma[i];
  return r.beta ? v + r.beta[i] : v;
}

#if defined(__x86_64__)
#define NXRT_SKIPNORM_AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))
#define NXRT_SKIPNORM_AVX2 __attribute__((target("avx2,fma")))

NXRT_SKIPNORM_AVX512 inline __m512 pre16(const SkipNormRow& r, int64_t i) {
  __m512 v = _mm512_loadu_ps(r.x + i);
  if (r.skip) v = _mm512_add_ps(v, _mm512_loadu_ps(r.skip + i));
  if (r.bias) v = _mm512_add_ps(v, _mm512_loadu_ps(r.bias + i));
  return v;
}

NXRT_SKIPNORM_AVX512 inline double hsum8d(__m512d v) {
  alignas(64) double t[8];
  _mm512_store_pd(t, v);
  return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

NXRT_SKIPNORM_AVX512 void row_avx512(const SkipNormRow& r, double* mean_out, double* inv_out) {
  const int64_t H = r.H, body = H / 16 * 16;
  // Sums as the plain loop forms each term: a double product, then an add (no fused multiply-add).
  __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(), q0 = _mm512_setzero_pd(), q1 = _mm512_setzero_pd();
  for (int64_t i = 0; i < body; i += 16) {
    const __m512 v = pre16(r, i);
    if (r.sum_out) _mm512_storeu_ps(r.sum_out + i, v);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    s0 = _mm512_add_pd(s0, lo);
    s1 = _mm512_add_pd(s1, hi);
    q0 = _mm512_add_pd(q0, _mm512_mul_pd(lo, lo));
    q1 = _mm512_add_pd(q1, _mm512_mul_pd(hi, hi));
  }
  double sum = hsum8d(_mm512_add_pd(s0, s1)), sq = hsum8d(_mm512_add_pd(q0, q1));
  for (int64_t i = body; i < H; ++i) {
    const float v = pre(r, i);
    if (r.sum_out) r.sum_out[i] = v;
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double mean = r.simplified ? 0.0 : sum / static_cast<double>(H);
  double var;
  if (r.simplified) {
    var = sq / static_cast<double>(H);
  } else {
    const __m512d vm = _mm512_set1_pd(mean);
    __m512d d0 = _mm512_setzero_pd(), d1 = _mm512_setzero_pd();
    for (int64_t i = 0; i < body; i += 16) {
      const __m512 v = pre16(r, i);
      const __m512d lo = _mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), vm);
      const __m512d hi = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), vm);
      d0 = _mm512_add_pd(d0, _mm512_mul_pd(lo, lo));
      d1 = _mm512_add_pd(d1, _mm512_mul_pd(hi, hi));
    }
    var = hsum8d(_mm512_add_pd(d0, d1));
    for (int64_t i = body; i < H; ++i) {
      const double d = pre(r, i) - mean;
      var += d * d;
    }
    var /= static_cast<double>(H);
  }
  const double inv = 1.0 / std::sqrt(var + r.eps);
  const __m512d vm = _mm512_set1_pd(mean), vi = _mm512_set1_pd(inv);
  for (int64_t i = 0; i < body; i += 16) {
    const __m512 v = pre16(r, i);
    const __m256 lo = _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_sub_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(v)), vm), vi));
    const __m256 hi = _mm512_cvtpd_ps(_mm512_mul_pd(
        _mm512_sub_pd(_mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))), vm), vi));
    __m512 y = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(lo)), _mm256_castps_pd(hi), 1));
    y = _mm512_mul_ps(y, _mm512_loadu_ps(r.gamma + i));
    if (r.beta) y = _mm512_add_ps(y, _mm512_loadu_ps(r.beta + i));
    _mm512_storeu_ps(r.y + i, y);
  }
  for (int64_t i = body; i < H; ++i) r.y[i] = normed(r, i, mean, inv);
  *mean_out = mean;
  *inv_out = inv;
}

NXRT_SKIPNORM_AVX2 inline __m256 pre8(const SkipNormRow& r, int64_t i) {
  __m256 v = _mm256_loadu_ps(r.x + i);
  if (r.skip) v = _mm256_add_ps(v, _mm256_loadu_ps(r.skip + i));
  if (r.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(r.bias + i));
  return v;
}

NXRT_SKIPNORM_AVX2 inline double hsum4d(__m256d v) {
  alignas(32) double t[4];
  _mm256_store_pd(t, v);
  return (t[0] + t[1]) + (t[2] + t[3]);
}

NXRT_SKIPNORM_AVX2 void row_avx2(const SkipNormRow& r, double* mean_out, double* inv_out) {
  const int64_t H = r.H, body = H / 8 * 8;
  __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd(), q0 = _mm256_setzero_pd(), q1 = _mm256_setzero_pd();
  for (int64_t i = 0; i < body; i += 8) {
    const __m256 v = pre8(r, i);
    if (r.sum_out) _mm256_storeu_ps(r.sum_out + i, v);
    const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v)), hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
    s0 = _mm256_add_pd(s0, lo);
    s1 = _mm256_add_pd(s1, hi);
    q0 = _mm256_add_pd(q0, _mm256_mul_pd(lo, lo));
    q1 = _mm256_add_pd(q1, _mm256_mul_pd(hi, hi));
  }
  double sum = hsum4d(_mm256_add_pd(s0, s1)), sq = hsum4d(_mm256_add_pd(q0, q1));
  for (int64_t i = body; i < H; ++i) {
    const float v = pre(r, i);
    if (r.sum_out) r.sum_out[i] = v;
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double mean = r.simplified ? 0.0 : sum / static_cast<double>(H);
  double var;
  if (r.simplified) {
    var = sq / static_cast<double>(H);
  } else {
    const __m256d vm = _mm256_set1_pd(mean);
    __m256d d0 = _mm256_setzero_pd(), d1 = _mm256_setzero_pd();
    for (int64_t i = 0; i < body; i += 8) {
      const __m256 v = pre8(r, i);
      const __m256d lo = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vm);
      const __m256d hi = _mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vm);
      d0 = _mm256_add_pd(d0, _mm256_mul_pd(lo, lo));
      d1 = _mm256_add_pd(d1, _mm256_mul_pd(hi, hi));
    }
    var = hsum4d(_mm256_add_pd(d0, d1));
    for (int64_t i = body; i < H; ++i) {
      const double d = pre(r, i) - mean;
      var += d * d;
    }
    var /= static_cast<double>(H);
  }
  const double inv = 1.0 / std::sqrt(var + r.eps);
  const __m256d vm = _mm256_set1_pd(mean), vi = _mm256_set1_pd(inv);
  for (int64_t i = 0; i < body; i += 8) {
    const __m256 v = pre8(r, i);
    const __m128 lo = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(v)), vm), vi));
    const __m128 hi = _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_sub_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)), vm), vi));
    __m256 y = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    y = _mm256_mul_ps(y, _mm256_loadu_ps(r.gamma + i));
    if (r.beta) y = _mm256_add_ps(y, _mm256_loadu_ps(r.beta + i));
    _mm256_storeu_ps(r.y + i, y);
  }
  for (int64_t i = body; i < H; ++i) r.y[i] = normed(r, i, mean, inv);
  *mean_out = mean;
  *inv_out = inv;
}
#endif

}  // namespace

bool skip_norm_row_vectorized(ep::IsaTier isa) {
#if defined(__x86_64__)
  return isa >= ep::IsaTier::kAvx2;
#else
  (void)isa;
  return false;
#endif
}

void skip_norm_row_f32(ep::IsaTier isa, const SkipNormRow& r, double* mean, double* inv) {
#if defined(__x86_64__)
  // isa is the kernel's tier, already capped by the CPU.
  if (isa >= ep::IsaTier::kAvx512) return row_avx512(r, mean, inv);
  row_avx2(r, mean, inv);
#else
  (void)isa, (void)r, (void)mean, (void)inv;
#endif
}

}  // namespace nxrt::ops::contrib
