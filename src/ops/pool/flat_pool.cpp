#include "ops/pool/flat_pool.h"

#include <algorithm>
#include <limits>

#include "ops/pool/sep_max.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_FP_X86 1
#define NXRT_FP_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
#endif

namespace nxrt::ops::flatpool {

namespace {

constexpr int64_t kLanes = 16;

#ifdef NXRT_FP_X86
// kK > 0: a kK x kK window, its tap loops unrolled (3x3, the usual one); 0: the plan's.
template <bool kMax, int kK>
NXRT_FP_AVX512 __attribute__((flatten)) void run_planes(const Plan& p, const float* x, float* y, int64_t p0,
                                                        int64_t p1, float* h) {
  const Geom3& g = p.g;
  const int64_t KH = kK ? kK : g.k[1], KW = kK ? kK : g.k[2], pt = g.pb[1], pl = g.pb[2], W = p.W;
  const int64_t plane = p.plane, nvec = p.nvec;
  const __m512 ident = _mm512_set1_ps(kMax ? -std::numeric_limits<float>::infinity() : 0.f);
  const uint16_t* hm = p.hmask.data();
  const uint16_t* vm = p.vmask.data();
  const __mmask16 last = plane % kLanes ? static_cast<__mmask16>((1u << (plane % kLanes)) - 1u) : __mmask16(0xffff);
  const int64_t hstride = nvec * kLanes;
  for (int64_t q0 = p0; q0 < p1; q0 += p.batch) {
    const int64_t q1 = std::min(p1, q0 + p.batch);
    // h[p] = reduce over kw of x[p + kw - pl] (taps whose column leaves the row masked off), for a
    // batch of planes first: the vertical pass's loads straddle two of these stores, and reading them
    // while they are still in the store buffer (a small plane's pass right after its own) stalls.
    for (int64_t q = q0; q < q1; ++q) {
      const float* xq = x + q * plane;
      float* hq = h + (q - q0) * hstride;
      for (int64_t v = 0; v < nvec; ++v) {
        const float* xv = xq + v * kLanes - pl;
        // Vectors [h_lo, h_hi) read inside the plane at every tap: plain loads, the mask applied in the
        // max / add (acc where a tap leaves the row); the others load masked too.
        const bool inside = v >= p.h_lo && v < p.h_hi;
        __m512 acc = ident;
#pragma GCC unroll 4
        for (int64_t kw = 0; kw < KW; ++kw) {
          const __mmask16 m = hm[v * KW + kw];
          const __m512 t = inside ? _mm512_loadu_ps(xv + kw) : _mm512_maskz_loadu_ps(m, xv + kw);
          acc = kMax ? _mm512_mask_max_ps(acc, m, t, acc) : _mm512_mask_add_ps(acc, m, acc, t);
        }
        _mm512_storeu_ps(hq + v * kLanes, acc);
      }
    }
    if (kMax && p.stride2) {  // (applies: max pools only)
      // Output row i: rows 2 i - pt + kh of h (those inside the plane), every column from 0 on, then the
      // even columns: output j is h's column 2 j (its window starts at input column 2 j - pl).
      const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1];
      for (int64_t q = q0; q < q1; ++q) {
        const float* hq = h + (q - q0) * hstride;
        float* yq = y + q * OH * OW;
        for (int64_t i = 0; i < OH; ++i) {
          const int64_t r0 = std::max<int64_t>(0, 2 * i - pt), r1 = std::min<int64_t>(IH, 2 * i - pt + KH);
          for (int64_t j0 = 0; j0 < OW; j0 += kLanes) {
            __m512 lo = ident, hi = ident;
            const float* hr = hq + r0 * W + 2 * j0;
            for (int64_t r = r0; r < r1; ++r, hr += W) {
              const __m512 a = _mm512_loadu_ps(hr), b = _mm512_loadu_ps(hr + kLanes);
              lo = _mm512_max_ps(a, lo);
              hi = _mm512_max_ps(b, hi);
            }
            const __m512 acc = _mm512_permutex2var_ps(lo, even, hi);
            const int64_t n = std::min<int64_t>(kLanes, OW - j0);
            const __mmask16 k = n == kLanes ? __mmask16(0xffff) : static_cast<__mmask16>((1u << n) - 1u);
            _mm512_mask_storeu_ps(yq + i * OW + j0, k, acc);
          }
        }
      }
      continue;
    }
    // y[p] = reduce over kh of h[p + (kh - pt) * W] (rows outside the plane masked off).
    for (int64_t q = q0; q < q1; ++q) {
      float* yq = y + q * plane;
      const float* hq = h + (q - q0) * hstride;
      for (int64_t v = 0; v < nvec; ++v) {
        const float* hv = hq + v * kLanes - pt * W;
        __m512 acc = ident;
        if (v >= p.v_lo && v < p.v_hi) {  // every lane's window rows inside the plane: no masks
#pragma GCC unroll 4
          for (int64_t kh = 0; kh < KH; ++kh) {
            const __m512 t = _mm512_loadu_ps(hv + kh * W);
            acc = kMax ? _mm512_max_ps(t, acc) : _mm512_add_ps(acc, t);
          }
        } else {
#pragma GCC unroll 4
          for (int64_t kh = 0; kh < KH; ++kh) {
            const __mmask16 m = vm[v * KH + kh];
            const __m512 t = _mm512_maskz_loadu_ps(m, hv + kh * W);
            acc = kMax ? _mm512_mask_max_ps(acc, m, t, acc) : _mm512_mask_add_ps(acc, m, acc, t);
          }
        }
        if constexpr (!kMax) acc = _mm512_div_ps(acc, _mm512_loadu_ps(p.count.data() + v * kLanes));
        if (v + 1 < nvec) {
          _mm512_storeu_ps(yq + v * kLanes, acc);
        } else {
          _mm512_mask_storeu_ps(yq + v * kLanes, last, acc);
        }
      }
    }
  }
}

// The 3x3 "same" windows (pads 1 all round) on rows of up to 64 floats: each row's horizontal
// reductions are NV (1-4) vectors kept in registers and the vertical pass takes three of them, row by
// row; no scratch and no flat-plane masks. The same taps in the same order as run_planes (columns c - 1,
// c, c + 1 from the identity, taps outside the row masked off; then rows i - 1, i, i + 1, rows outside
// the plane skipped; the average divided by the plan's count), so the same bits. Masked loads only
// where a vector leaves the row.
template <bool kMax>
NXRT_FP_AVX512 inline __m512 rows3_op(__m512 acc, __m512 t) {
  return kMax ? _mm512_max_ps(t, acc) : _mm512_add_ps(acc, t);
}
// kPlain: the vector may be read whole (it lies inside the planes of this call), the lanes outside the
// row then drop out in the masked op; else a masked load. (Masked loads that miss the cache are slow on
// Zen 5: with 14-float rows every tap was one, and 576x14x14 took 73 us against 43 on an input out of
// cache.)
template <bool kMax, bool kPlain>
NXRT_FP_AVX512 inline __m512 rows3_tap(__m512 acc, const float* s, __mmask16 m) {
  if (m == 0xffff) return rows3_op<kMax>(acc, _mm512_loadu_ps(s));
  const __m512 t = kPlain ? _mm512_loadu_ps(s) : _mm512_maskz_loadu_ps(m, s);
  return kMax ? _mm512_mask_max_ps(acc, m, t, acc) : _mm512_mask_add_ps(acc, m, acc, t);
}

// Row s's horizontal reductions into h[0, NV), with the loads kPlain picks.
template <bool kMax, int NV, bool kPlain>
NXRT_FP_AVX512 inline void rows3_row_taps(const float* s, const __mmask16* ml, const __mmask16* mc, const __mmask16* mr,
                                          __m512 ident, __m512* h) {
  for (int v = 0; v < NV; ++v) {
    __m512 acc = rows3_tap<kMax, kPlain>(ident, s + v * kLanes - 1, ml[v]);
    acc = rows3_tap<kMax, kPlain>(acc, s + v * kLanes, mc[v]);
    h[v] = rows3_tap<kMax, kPlain>(acc, s + v * kLanes + 1, mr[v]);
  }
}

// Row s's horizontal reductions into h[0, NV); [lo, hi): the floats this call may read.
template <bool kMax, int NV>
NXRT_FP_AVX512 inline void rows3_row(const float* s, const float* lo, const float* hi, const __mmask16* ml,
                                     const __mmask16* mc, const __mmask16* mr, __m512 ident, __m512* h) {
  if (s - 1 >= lo && s + NV * kLanes + 1 <= hi) {
    rows3_row_taps<kMax, NV, true>(s, ml, mc, mr, ident, h);
  } else {
    rows3_row_taps<kMax, NV, false>(s, ml, mc, mr, ident, h);
  }
}

template <bool kMax, int NV>
NXRT_FP_AVX512 void rows3_planes(const Plan& p, const float* x, float* y, int64_t p0, int64_t p1) {
  const int64_t H = p.g.in[1], W = p.W, plane = p.plane;
  const __m512 ident = _mm512_set1_ps(kMax ? -std::numeric_limits<float>::infinity() : 0.f);
  __mmask16 ml[NV], mc[NV], mr[NV];  // lanes whose column c - 1 / c / c + 1 lies in the row (c < W)
  for (int v = 0; v < NV; ++v) {
    uint32_t l = 0, c = 0, r = 0;
    for (int k = 0; k < kLanes; ++k) {
      const int64_t col = v * kLanes + k;
      if (col >= W) break;
      c |= 1u << k;
      if (col >= 1) l |= 1u << k;
      if (col + 1 < W) r |= 1u << k;
    }
    ml[v] = static_cast<__mmask16>(l);
    mc[v] = static_cast<__mmask16>(c);
    mr[v] = static_cast<__mmask16>(r);
  }
  const float* lo = x + p0 * plane;
  const float* hi = x + p1 * plane;
  for (int64_t q = p0; q < p1; ++q) {
    const float* xq = x + q * plane;
    float* yq = y + q * plane;
    __m512 prev[NV], cur[NV], next[NV];
    for (int v = 0; v < NV; ++v) prev[v] = next[v] = ident;
    rows3_row<kMax, NV>(xq, lo, hi, ml, mc, mr, ident, cur);
    if (H > 1) rows3_row<kMax, NV>(xq + W, lo, hi, ml, mc, mr, ident, next);
    for (int64_t i = 0; i < H; ++i) {
      for (int v = 0; v < NV; ++v) {
        __m512 acc = ident;
        if (i > 0) acc = rows3_op<kMax>(acc, prev[v]);
        acc = rows3_op<kMax>(acc, cur[v]);
        if (i + 1 < H) acc = rows3_op<kMax>(acc, next[v]);
        if constexpr (!kMax) acc = _mm512_div_ps(acc, _mm512_loadu_ps(p.count.data() + i * W + v * kLanes));
        float* d = yq + i * W + v * kLanes;
        if (mc[v] == 0xffff) {
          _mm512_storeu_ps(d, acc);
        } else {
          _mm512_mask_storeu_ps(d, mc[v], acc);
        }
        prev[v] = cur[v];
        cur[v] = next[v];
      }
      if (i + 2 < H) rows3_row<kMax, NV>(xq + (i + 2) * W, lo, hi, ml, mc, mr, ident, next);
    }
  }
}

template <bool kMax>
NXRT_FP_AVX512 void run_rows3(const Plan& p, const float* x, float* y, int64_t p0, int64_t p1) {
  switch (p.rows3_vectors) {
    case 1: return rows3_planes<kMax, 1>(p, x, y, p0, p1);
    case 2: return rows3_planes<kMax, 2>(p, x, y, p0, p1);
    case 3: return rows3_planes<kMax, 3>(p, x, y, p0, p1);
    default: return rows3_planes<kMax, 4>(p, x, y, p0, p1);
  }
}
#endif

}  // namespace

bool applies(const Geom3& g, bool max, ep::IsaTier isa) {
#ifdef NXRT_FP_X86
  if (isa < ep::IsaTier::kAvx512 || ep::cpu_isa_tier() < ep::IsaTier::kAvx512) return false;
  if (g.in[0] != 1 || g.out[0] != 1 || g.k[0] != 1 || g.pb[0] != 0 || g.pe[0] != 0) return false;
  const int64_t s = g.s[1];
  if ((s != 1 && s != 2) || g.s[2] != s) return false;
  if (s == 2 && (!max || g.out[2] >= sepmax::kMinWidthS2)) return false;
  for (int a = 1; a < 3; ++a) {
    if (g.d[a] != 1 || g.in[a] < 1 || g.out[a] < 1 || g.k[a] < 1 || g.k[a] > 16) return false;
    if (g.pb[a] < 0 || g.pe[a] < 0 || g.pb[a] >= g.k[a] || g.pe[a] >= g.k[a]) return false;
    // Stride 1: the output keeps the input's size. Stride 2: every output's window starts at a column
    // (row) 2 j - pb whose anchor 2 j lies inside the input.
    if (s == 1 ? g.out[a] != g.in[a] : 2 * (g.out[a] - 1) >= g.in[a]) return false;
  }
  return g.in[1] * g.in[2] <= kFlatPoolMaxPlane;
#else
  (void)g;
  (void)max;
  (void)isa;
  return false;
#endif
}

Plan make_plan(const Geom3& g, bool max, bool count_include_pad) {
  Plan p;
  p.g = g;
  p.max = max;
  const int64_t H = g.in[1], W = g.in[2], KH = g.k[1], KW = g.k[2], pt = g.pb[1], pl = g.pb[2];
  p.W = W;
  p.plane = H * W;
  p.stride2 = g.s[1] == 2;
  p.nvec = (p.plane + kLanes - 1) / kLanes;
  p.batch = std::clamp<int64_t>(256 / p.nvec, 1, 32);
  p.hmask.assign(static_cast<size_t>(p.nvec * KW), 0);
  // (Stride 2 reads whole rows of h in its vertical pass: no row masks.)
  if (!p.stride2) p.vmask.assign(static_cast<size_t>(p.nvec * KH), 0);
  for (int64_t v = 0; v < p.nvec; ++v) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const int64_t pos = v * kLanes + l;
      if (pos >= p.plane) break;
      const int64_t i = pos / W, j = pos % W;
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t c = j + kw - pl;
        if (c >= 0 && c < W) p.hmask[static_cast<size_t>(v * KW + kw)] |= static_cast<uint16_t>(1u << l);
      }
      for (int64_t kh = 0; kh < KH && !p.stride2; ++kh) {
        const int64_t r = i + kh - pt;
        if (r >= 0 && r < H) p.vmask[static_cast<size_t>(v * KH + kh)] |= static_cast<uint16_t>(1u << l);
      }
    }
  }
  // Plain loads: horizontal vectors whose taps read [16 v - pl, 16 v + 15 + KW - 1 - pl] inside the
  // plane; vertical vectors whose lanes (all inside the plane) see every window row inside it.
  // (Last vector index v with 16 v + 15 + reach <= limit - 1: floor((limit - reach - 16) / 16); none when
  // that is negative.)
  auto last_vector = [](int64_t room) { return room < 0 ? int64_t{-1} : room / kLanes; };
  p.h_lo = (pl + kLanes - 1) / kLanes;
  p.h_hi = std::max(p.h_lo, last_vector(p.plane - (KW - 1 - pl) - kLanes) + 1);
  p.v_lo = (pt * W + kLanes - 1) / kLanes;
  p.v_hi = std::max(p.v_lo, std::min(last_vector((H - (KH - 1 - pt)) * W - kLanes) + 1, p.plane / kLanes));
  if (!p.stride2 && KH == 3 && KW == 3 && pt == 1 && pl == 1 && W >= kRows3MinWidth && W <= kRows3MaxWidth) {
    p.rows3_vectors = static_cast<int>((W + kLanes - 1) / kLanes);
  }
  if (!max) {
    // Every window of a "same" stride-1 pool lies inside the padded plane, so counting pads counts KH x KW.
    // (Lanes past the plane divide by 1: never stored. The register rows read a row's counts in whole
    // vectors from i * W: up to 64 past the plane.)
    p.count.assign(static_cast<size_t>(p.nvec * kLanes + 64), 1.f);
    for (int64_t pos = 0; pos < p.plane; ++pos) {
      const int64_t i = pos / W, j = pos % W;
      const int64_t n =
          count_include_pad ? KH * KW : taps_inside(i - pt, KH, 1, 0, H) * taps_inside(j - pl, KW, 1, 0, W);
      p.count[static_cast<size_t>(pos)] = static_cast<float>(n);
    }
  }
  return p;
}

void run(const Plan& p, const float* x, float* y, int64_t p0, int64_t p1, float* scratch) {
#ifdef NXRT_FP_X86
  if (p.rows3_vectors > 0) {
    p.max ? run_rows3<true>(p, x, y, p0, p1) : run_rows3<false>(p, x, y, p0, p1);
    return;
  }
  const bool k3 = p.g.k[1] == 3 && p.g.k[2] == 3;
  if (p.max) {
    k3 ? run_planes<true, 3>(p, x, y, p0, p1, scratch) : run_planes<true, 0>(p, x, y, p0, p1, scratch);
  } else {
    k3 ? run_planes<false, 3>(p, x, y, p0, p1, scratch) : run_planes<false, 0>(p, x, y, p0, p1, scratch);
  }
#else
  (void)p, (void)x, (void)y, (void)p0, (void)p1, (void)scratch;
#endif
}

}  // namespace nxrt::ops::flatpool
