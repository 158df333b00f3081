#include "ops/pool_fast.h"

#include <algorithm>
#include <limits>
#include <vector>

namespace nxrt::ops::poolfast {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
#define NXRT_POOL_AVX2 __attribute__((target("avx2,fma")))
#else
bool has_avx2() { return false; }
#define NXRT_POOL_AVX2
#endif

// Count of taps start + t*d (t in [0, k)) inside [lo, hi).
inline int64_t taps_inside(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t p = start + t * d;
    n += (p >= lo && p < hi) ? 1 : 0;
  }
  return n;
}

// Row-wise pooling of planes [p0, p1). kMax: max with NaN skipped (v > best ? v : best from -inf, as
// the reference); else sums divided by the valid (or padded) tap count.
template <bool kMax>
__attribute__((always_inline)) inline void pool_rows(const Geom3& g, const float* x, float* y, bool cip,
                                                     int64_t p0, int64_t p1) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.k[1], KW = g.k[2], sh = g.s[1], sw = g.s[2], dh = g.d[1], dw = g.d[2];
  const int64_t pbh = g.pb[1], pbw = g.pb[2], peh = g.pe[1], pew = g.pe[2];
  const float pad = kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  const int64_t tlen = std::max(pbw + IW, (OW - 1) * sw + (KW - 1) * dw + 1);
  std::vector<float> tmp(static_cast<size_t>(tlen), pad);
  float* t = tmp.data();
  // Per output column: valid and padded tap counts (average only).
  std::vector<float> wv, wp, den;
  if (!kMax) {
    wv.resize(static_cast<size_t>(OW));
    wp.resize(static_cast<size_t>(OW));
    den.resize(static_cast<size_t>(OW));
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t start = ow * sw - pbw;
      wv[ow] = static_cast<float>(taps_inside(start, KW, dw, 0, IW));
      wp[ow] = static_cast<float>(taps_inside(start, KW, dw, -pbw, IW + pew));
    }
  }
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * IH * IW;
    float* yp = y + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t hstart = oh * sh - pbh;
      // Vertical pass: the valid rows of the window into t[pbw, pbw + IW).
      float* tv = t + pbw;
      for (int64_t i = 0; i < IW; ++i) tv[i] = pad;
      int64_t hv = 0;
      for (int64_t kh = 0; kh < KH; ++kh) {
        const int64_t ih = hstart + kh * dh;
        if (ih < 0 || ih >= IH) continue;
        ++hv;
        const float* xr = xp + ih * IW;
        if (kMax) {
          for (int64_t i = 0; i < IW; ++i) tv[i] = xr[i] > tv[i] ? xr[i] : tv[i];
        } else {
          for (int64_t i = 0; i < IW; ++i) tv[i] += xr[i];
        }
      }
      // Horizontal pass.
      float* yr = yp + oh * OW;
      for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = pad;
      for (int64_t kw = 0; kw < KW; ++kw) {
        const float* tk = t + kw * dw;
        if (sw == 1) {
          if (kMax) {
            for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = tk[ow] > yr[ow] ? tk[ow] : yr[ow];
          } else {
            for (int64_t ow = 0; ow < OW; ++ow) yr[ow] += tk[ow];
          }
        } else {
          if (kMax) {
            for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = tk[ow * sw] > yr[ow] ? tk[ow * sw] : yr[ow];
          } else {
            for (int64_t ow = 0; ow < OW; ++ow) yr[ow] += tk[ow * sw];
          }
        }
      }
      if (!kMax) {
        const float hf = static_cast<float>(cip ? taps_inside(hstart, KH, dh, -pbh, IH + peh) : hv);
        const float* wc = cip ? wp.data() : wv.data();
        float* dn = den.data();
        for (int64_t ow = 0; ow < OW; ++ow) dn[ow] = hf * wc[ow];
        for (int64_t ow = 0; ow < OW; ++ow) yr[ow] = dn[ow] > 0.f ? yr[ow] / dn[ow] : 0.f;
      }
    }
  }
}

template <bool kMax>
NXRT_POOL_AVX2 void pool_rows_avx2(const Geom3& g, const float* x, float* y, bool cip, int64_t p0, int64_t p1) {
  pool_rows<kMax>(g, x, y, cip, p0, p1);
}
template <bool kMax>
void pool_rows_plain(const Geom3& g, const float* x, float* y, bool cip, int64_t p0, int64_t p1) {
  pool_rows<kMax>(g, x, y, cip, p0, p1);
}

__attribute__((always_inline)) inline void global_avg_body(const float* x, float* y, int64_t plane, int64_t q0,
                                                           int64_t q1) {
  for (int64_t q = q0; q < q1; ++q) {
    const float* xp = x + q * plane;
    float acc[16] = {};
    int64_t i = 0;
    for (; i + 16 <= plane; i += 16)
      for (int j = 0; j < 16; ++j) acc[j] += xp[i + j];
    float s = 0;
    for (; i < plane; ++i) s += xp[i];
    for (int j = 0; j < 16; ++j) s += acc[j];
    y[q] = plane > 0 ? s / static_cast<float>(plane) : 0.f;
  }
}
NXRT_POOL_AVX2 void global_avg_avx2(const float* x, float* y, int64_t plane, int64_t q0, int64_t q1) {
  global_avg_body(x, y, plane, q0, q1);
}
void global_avg_plain(const float* x, float* y, int64_t plane, int64_t q0, int64_t q1) {
  global_avg_body(x, y, plane, q0, q1);
}

}  // namespace

bool applies(const Geom3& g) {
  return g.in[0] == 1 && g.out[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 && g.pe[0] == 0 && g.out[2] > 0 &&
         g.out[1] > 0;
}

void max_pool_2d(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1) {
  if (has_avx2()) {
    pool_rows_avx2<true>(g, x, y, false, p0, p1);
  } else {
    pool_rows_plain<true>(g, x, y, false, p0, p1);
  }
}

void avg_pool_2d(const Geom3& g, const float* x, float* y, bool count_include_pad, int64_t p0, int64_t p1) {
  // A window covering the whole unpadded plane (a GlobalAveragePool written as AveragePool).
  if (g.out[1] == 1 && g.out[2] == 1 && g.k[1] == g.in[1] && g.k[2] == g.in[2] && g.d[1] == 1 && g.d[2] == 1 &&
      g.pb[1] == 0 && g.pb[2] == 0 && g.pe[1] == 0 && g.pe[2] == 0) {
    global_avg(x + p0 * g.in_size(), y + p0, g.in_size(), 0, p1 - p0);
    return;
  }
  if (has_avx2()) {
    pool_rows_avx2<false>(g, x, y, count_include_pad, p0, p1);
  } else {
    pool_rows_plain<false>(g, x, y, count_include_pad, p0, p1);
  }
}

void global_avg(const float* x, float* y, int64_t plane, int64_t q0, int64_t q1) {
  if (has_avx2()) {
    global_avg_avx2(x, y, plane, q0, q1);
  } else {
    global_avg_plain(x, y, plane, q0, q1);
  }
}

}  // namespace nxrt::ops::poolfast
