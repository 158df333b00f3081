// Vectorizable float math for softmax-like kernels: loops over these compile to SIMD with plain -O3.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace nxrt::ops {

// exp(x) for float: Cody-Waite range reduction to r in [-ln2/2, ln2/2], a degree-6 minimax polynomial
// (max relative error ~2 ulp), scale by 2^k through the exponent bits. exp(x) = 0 below -87.3 (no
// denormals), +inf above 88.7; NaN stays NaN. Selects only: loops calling it vectorize when compiled
// with no-trapping-math (see the pragma in reduction/softmax.cpp).
inline float exp_fast(float x) {
  const float hi = 88.72283f, lo = -87.33654f;
  float xc = x >= lo ? x : lo;  // NaN takes lo here (an int conversion of NaN is UB); restored below
  xc = xc > hi ? hi : xc;
  const float t = xc * 1.44269504088896341f;
  const float k = (t + 12582912.0f) - 12582912.0f;  // round to nearest integer
  float r = xc - k * 0.693359375f;
  r = r - k * -2.12194440e-4f;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  p = p * r * r + r + 1.0f;
  // 2^k as two normal factors (k spans [-126, 128]).
  const int32_t ki = static_cast<int32_t>(k);
  const int32_t k1 = ki >> 1, k2 = ki - k1;
  const uint32_t b1 = static_cast<uint32_t>(k1 + 127) << 23, b2 = static_cast<uint32_t>(k2 + 127) << 23;
  float s1, s2;
  std::memcpy(&s1, &b1, sizeof(s1));
  std::memcpy(&s2, &b2, sizeof(s2));
  float v = p * s1 * s2;
  v = x < lo ? 0.0f : v;
  v = x > hi ? std::numeric_limits<float>::infinity() : v;
  v = x != x ? x : v;
  return v;
}

inline double exp_fast(double x) { return std::exp(x); }

// max over n values with 8 independent lanes (vectorizes); NaN anywhere gives NaN.
template <typename C>
inline C row_max(const C* x, int64_t n) {
  C m[8];
  bool nan = false;
  for (int j = 0; j < 8; ++j) m[j] = -std::numeric_limits<C>::infinity();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) {
      const C v = x[i + j];
      m[j] = v > m[j] ? v : m[j];
      nan |= v != v;
    }
  }
  for (; i < n; ++i) {
    m[0] = x[i] > m[0] ? x[i] : m[0];
    nan |= x[i] != x[i];
  }
  C r = m[0];
  for (int j = 1; j < 8; ++j) r = m[j] > r ? m[j] : r;
  return nan ? std::numeric_limits<C>::quiet_NaN() : r;
}

// sum over n values with 8 independent lanes.
template <typename C>
inline C row_sum(const C* x, int64_t n) {
  C s[8] = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) s[j] += x[i + j];
  for (; i < n; ++i) s[0] += x[i];
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

}  // namespace nxrt::ops
