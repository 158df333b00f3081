#include "ops/conv_depthwise.h"

#include <algorithm>

namespace nxrt::ops::dwconv {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has_avx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
#define NXRT_DW_AVX2 __attribute__((target("avx2,fma")))
#else
bool has_avx2() { return false; }
#define NXRT_DW_AVX2
#endif

constexpr int64_t kMaxK = 7;
// Rows outside the input read zeros from here (interior columns index [0, IW)); planes wider than
// this take the border loop for rows outside the input.
constexpr int64_t kZeroLen = 4096;
alignas(64) const float kZeros[kZeroLen] = {};

// One output plane. Rows: the K input rows of the window (a zero row where outside the input) feed the
// interior columns [L, H) with no checks; the other columns check each tap.
template <int K, int S>
__attribute__((always_inline)) inline void plane(const Geom3& g, const float* x, const float* w, float bias,
                                                 float* y) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t pt = g.pb[1], pl = g.pb[2];
  // Interior columns: ow*S - pl >= 0 and ow*S - pl + K - 1 <= IW - 1.
  int64_t L = (pl + S - 1) / S;
  int64_t H = IW - K + pl >= 0 ? (IW - K + pl) / S + 1 : 0;
  L = std::min(L, OW);
  H = std::clamp(H, L, OW);
  float wk[K * K];
  for (int i = 0; i < K * K; ++i) wk[i] = w[i];
  for (int64_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = oh * S - pt;
    const float* r[K];
    bool all_rows = true;
    for (int kh = 0; kh < K; ++kh) {
      const int64_t ih = h0 + kh;
      const bool in = ih >= 0 && ih < IH;
      all_rows = all_rows && in;
      r[kh] = in ? x + ih * IW : kZeros;
    }
    float* yr = y + oh * OW;
    int64_t lo = L, hi = H;
    if (!all_rows && IW > kZeroLen) lo = hi = L;  // the zero row is too short: all columns checked
    // Border columns (and everything when the zero row cannot stand in).
    auto checked = [&](int64_t ow) {
      float acc = bias;
      const int64_t c0 = ow * S - pl;
      for (int kh = 0; kh < K; ++kh) {
        const int64_t ih = h0 + kh;
        if (ih < 0 || ih >= IH) continue;
        const float* xr = x + ih * IW;
        for (int kw = 0; kw < K; ++kw) {
          const int64_t iw = c0 + kw;
          if (iw >= 0 && iw < IW) acc += wk[kh * K + kw] * xr[iw];
        }
      }
      yr[ow] = acc;
    };
    for (int64_t ow = 0; ow < lo; ++ow) checked(ow);
    for (int64_t ow = lo; ow < hi; ++ow) {
      const int64_t c0 = ow * S - pl;
      float acc = bias;
      for (int kh = 0; kh < K; ++kh)
        for (int kw = 0; kw < K; ++kw) acc += wk[kh * K + kw] * r[kh][c0 + kw];
      yr[ow] = acc;
    }
    for (int64_t ow = hi; ow < OW; ++ow) checked(ow);
  }
}

template <int K, int S>
NXRT_DW_AVX2 void plane_avx2(const Geom3& g, const float* x, const float* w, float bias, float* y) {
  plane<K, S>(g, x, w, bias, y);
}
template <int K, int S>
void plane_plain(const Geom3& g, const float* x, const float* w, float bias, float* y) {
  plane<K, S>(g, x, w, bias, y);
}

using PlaneFn = void (*)(const Geom3&, const float*, const float*, float, float*);

template <int K>
PlaneFn pick_k(int64_t s, bool avx2) {
  if (s == 1) return avx2 ? &plane_avx2<K, 1> : &plane_plain<K, 1>;
  return avx2 ? &plane_avx2<K, 2> : &plane_plain<K, 2>;
}

}  // namespace

bool applies(const Geom3& g) {
  if (g.in[0] != 1 || g.out[0] != 1 || g.k[0] != 1 || g.pb[0] != 0) return false;
  if (g.k[1] != g.k[2] || (g.k[1] != 3 && g.k[1] != 5 && g.k[1] != 7)) return false;
  if (g.s[1] != g.s[2] || (g.s[1] != 1 && g.s[1] != 2)) return false;
  if (g.d[1] != 1 || g.d[2] != 1) return false;
  return g.k[1] <= kMaxK;
}

void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y) {
  const bool avx2 = has_avx2();
  PlaneFn fn = nullptr;
  switch (g.k[1]) {
    case 3: fn = pick_k<3>(g.s[1], avx2); break;
    case 5: fn = pick_k<5>(g.s[1], avx2); break;
    default: fn = pick_k<7>(g.s[1], avx2); break;
  }
  fn(g, x, w, bias, y);
}

}  // namespace nxrt::ops::dwconv
