#include "ops/pool/row_pool.h"

#include "ep/cpu_features.h"

#include "ops/pool/sep_max.h"
#include "ops/window/window_simd.h"
#include "ops/window/window_engine.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

namespace nxrt::ops::rowpool {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has_avx2() { return ep::cpu_has_avx2_fma(); }
#define NXRT_POOL_AVX2 __attribute__((target("avx2,fma")))
#else
bool has_avx2() { return false; }
#define NXRT_POOL_AVX2
#endif

// Row-wise pooling of planes [p0, p1). Each plane is first copied into a padded scratch plane (pad =
// -inf for max, 0 for average), so the window loops need no bounds checks; each output row is then one
// vertical pass (the window's rows reduced column by column) and one horizontal pass (KW taps of that
// row). kMax: max with NaN skipped (v > best ? v : best from -inf, as the reference); else sums divided
// by the valid (or, count_include_pad, padded) tap count. K / S > 0: kernel size and stride fixed at
// compile time (dilation 1); 0: read from g. scratch: rows_scratch_floats(g) floats.
template <bool kMax, int K, int S>
__attribute__((always_inline)) inline void pool_rows(const Geom3& g, const float* x, float* y, bool cip,
                                                     int64_t p0, int64_t p1, float* scratch) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = K ? K : g.k[1], KW = K ? K : g.k[2];
  const int64_t sh = S ? S : g.s[1], sw = S ? S : g.s[2];
  const int64_t dh = K ? 1 : g.d[1], dw = K ? 1 : g.d[2];
  const int64_t pbh = g.pb[1], pbw = g.pb[2], peh = g.pe[1], pew = g.pe[2];
  const float pad = kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  const int64_t Hp = std::max(pbh + IH, (OH - 1) * sh + (KH - 1) * dh + 1);
  const int64_t Wp = std::max(pbw + IW, (OW - 1) * sw + (KW - 1) * dw + 1);
  float* __restrict buf = scratch;
  float* __restrict tv = buf + Hp * Wp;
  float* __restrict wc = tv + Wp;  // per output column: tap count (average)
  float* __restrict hc = wc + OW;  // per output row
  if (!kMax) {
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t st = ow * sw - pbw;
      wc[ow] = static_cast<float>(cip ? taps_inside(st, KW, dw, -pbw, IW + pew) : taps_inside(st, KW, dw, 0, IW));
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t st = oh * sh - pbh;
      hc[oh] = static_cast<float>(cip ? taps_inside(st, KH, dh, -pbh, IH + peh) : taps_inside(st, KH, dh, 0, IH));
    }
  }
  for (int64_t p = p0; p < p1; ++p) {
    const float* __restrict xp = x + p * IH * IW;
    float* __restrict yp = y + p * OH * OW;
    window::pad_plane(xp, IH, IW, pbh, pbw, Hp, Wp, pad, /*split=*/false, buf, nullptr);
    for (int64_t oh = 0; oh < OH; ++oh) {
      const float* __restrict b0 = buf + oh * sh * Wp;
      // Vertical pass.
      for (int64_t i = 0; i < Wp; ++i) {
        float v = pad;
        for (int64_t kh = 0; kh < KH; ++kh) {
          const float xv = b0[kh * dh * Wp + i];
          if (kMax) {
            v = xv > v ? xv : v;
          } else {
            v += xv;
          }
        }
        tv[i] = v;
      }
      // Horizontal pass.
      float* __restrict yr = yp + oh * OW;
      if (kMax) {
        for (int64_t ow = 0; ow < OW; ++ow) {
          float v = pad;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const float t = tv[ow * sw + kw * dw];
            v = t > v ? t : v;
          }
          yr[ow] = v;
        }
      } else {
        const float h = hc[oh];
        for (int64_t ow = 0; ow < OW; ++ow) {
          float v = 0.f;
          for (int64_t kw = 0; kw < KW; ++kw) v += tv[ow * sw + kw * dw];
          const float dn = h * wc[ow];
          yr[ow] = dn > 0.f ? v / dn : 0.f;
        }
      }
    }
  }
}

template <bool kMax>
NXRT_POOL_AVX2 void pool_rows_avx2(const Geom3& g, const float* x, float* y, bool cip, int64_t p0, int64_t p1,
                                   float* scratch) {
  pool_rows<kMax, 0, 0>(g, x, y, cip, p0, p1, scratch);
}
template <bool kMax>
void pool_rows_plain(const Geom3& g, const float* x, float* y, bool cip, int64_t p0, int64_t p1, float* scratch) {
  pool_rows<kMax, 0, 0>(g, x, y, cip, p0, p1, scratch);
}

int64_t rows_scratch_floats(const Geom3& g) {
  const int64_t Hp = std::max(g.pb[1] + g.in[1], (g.out[1] - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1);
  const int64_t Wp = std::max(g.pb[2] + g.in[2], (g.out[2] - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1);
  return Hp * Wp + Wp + 2 * g.out[2] + g.out[1];
}

// The padded-plane path for horizontal stride 1 or 2 without horizontal dilation (every CNN pool):
// per output row one vertical tap pass over the window's rows and one horizontal tap pass (AVX2 when
// available). Stride-2 rows are stored even columns first (window::pad_plane), so both passes read
// contiguous runs. scratch: taps_scratch_floats(g) floats.
template <bool kMax>
void pool_taps(const Geom3& g, const float* x, float* y, bool cip, int64_t p0, int64_t p1, bool avx2,
               float* scratch) {
  using window::TapOp;
  constexpr TapOp op = kMax ? TapOp::kMax : TapOp::kSum;
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.k[1], KW = g.k[2], sh = g.s[1], sw = g.s[2], dh = g.d[1];
  const int64_t pbh = g.pb[1], pbw = g.pb[2], peh = g.pe[1], pew = g.pe[2];
  const float pad = kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  const int64_t Hp = std::max(pbh + IH, (OH - 1) * sh + (KH - 1) * dh + 1);
  const int64_t Wp = std::max(pbw + IW, (OW - 1) * sw + KW);
  const bool split = sw == 2;
  const int64_t ne = window::even_len(Wp);
  float* buf = scratch;
  float* row_tmp = buf + Hp * Wp;
  float* tv = row_tmp + Wp;
  float* wc = tv + Wp;
  float* hc = wc + OW;
  const float* src[64];  // KH, KW <= 64 on this path
  if (!kMax) {
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t st = ow * sw - pbw;
      wc[ow] = static_cast<float>(cip ? taps_inside(st, KW, 1, -pbw, IW + pew) : taps_inside(st, KW, 1, 0, IW));
    }
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t st = oh * sh - pbh;
      hc[oh] = static_cast<float>(cip ? taps_inside(st, KH, dh, -pbh, IH + peh) : taps_inside(st, KH, dh, 0, IH));
    }
  }
  for (int64_t p = p0; p < p1; ++p) {
    window::pad_plane(x + p * IH * IW, IH, IW, pbh, pbw, Hp, Wp, pad, split, buf, row_tmp);
    float* yp = y + p * OH * OW;
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t kh = 0; kh < KH; ++kh) src[kh] = buf + (oh * sh + kh * dh) * Wp;
      window::taps<op>(avx2, src, nullptr, static_cast<int>(KH), pad, tv, Wp);
      for (int64_t kw = 0; kw < KW; ++kw) src[kw] = split ? tv + (kw % 2 ? ne : 0) + kw / 2 : tv + kw;
      float* yr = yp + oh * OW;
      window::taps<op>(avx2, src, nullptr, static_cast<int>(KW), pad, yr, OW);
      if (!kMax) {
        const float h = hc[oh];
        for (int64_t ow = 0; ow < OW; ++ow) {
          const float dn = h * wc[ow];
          yr[ow] = dn > 0.f ? yr[ow] / dn : 0.f;
        }
      }
    }
  }
}

int64_t taps_scratch_floats(const Geom3& g) {
  const int64_t Hp = std::max(g.pb[1] + g.in[1], (g.out[1] - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1);
  const int64_t Wp = std::max(g.pb[2] + g.in[2], (g.out[2] - 1) * g.s[2] + g.k[2]);
  return Hp * Wp + 2 * Wp + g.out[2] + g.out[1];
}

// One window covering the whole plane: a GlobalAveragePool written as AveragePool. Either exactly the
// plane (no pads), or, when padded cells are not counted, any single window that reaches past it (pads at
// the end, as Inception-v1's 7x7 pool over a 6x6 plane with pads 0,0,1,1): the mean of the plane either
// way. (Counting padded cells would divide by the window's size: those stay on the window paths.)
bool is_global_avg(const Geom3& g, bool count_include_pad) {
  if (g.out[1] != 1 || g.out[2] != 1 || g.d[1] != 1 || g.d[2] != 1) return false;
  if (g.k[1] == g.in[1] && g.k[2] == g.in[2] && g.pb[1] == 0 && g.pb[2] == 0 && g.pe[1] == 0 && g.pe[2] == 0) {
    return true;
  }
  return !count_include_pad && g.k[1] - g.pb[1] >= g.in[1] && g.k[2] - g.pb[2] >= g.in[2];
}

template <bool kMax>
void run_path(const Plan& p, const float* x, float* y, int64_t p0, int64_t p1, float* scratch) {
  const Geom3& g = p.g;
  switch (p.path) {
    case Plan::Path::kGlobalAvg: global_avg(x + p0 * g.in_size(), y + p0, g.in_size(), 0, p1 - p0); return;
    case Plan::Path::kSepMax: return sepmax::run(p.isa, g, x, y, p0, p1, scratch);
    case Plan::Path::kFlat: return flatpool::run(p.flat, x, y, p0, p1, scratch);
    case Plan::Path::kEngine:
      p.engine.run_planes_in(scratch, x + p0 * g.in_size(), g.in_size(), nullptr, 0, nullptr, false,
                             y + p0 * g.out_size(), p1 - p0, p.avx2);
      return;
    case Plan::Path::kTaps: return pool_taps<kMax>(g, x, y, p.cip, p0, p1, p.avx2, scratch);
    case Plan::Path::kRows:
      if (p.avx2) return pool_rows_avx2<kMax>(g, x, y, p.cip, p0, p1, scratch);
      return pool_rows_plain<kMax>(g, x, y, p.cip, p0, p1, scratch);
    case Plan::Path::kNone: return;
  }
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

bool make_plan(const Geom3& g, bool max, bool count_include_pad, Plan* p, ep::IsaTier isa) {
  *p = Plan();
  if (!applies(g)) return false;
  p->g = g;
  p->max = max;
  p->cip = !max && count_include_pad;
  p->isa = sepmax::body_tier(isa);
  p->avx2 = p->isa >= ep::IsaTier::kAvx2 && has_avx2();
  int64_t floats = 0;
  const window::PlaneOp op = max ? window::PlaneOp::kMax : window::PlaneOp::kAvg;
  if (!max && is_global_avg(g, count_include_pad)) {
    p->path = Plan::Path::kGlobalAvg;
  } else if (max && p->isa >= ep::IsaTier::kAvx512 && sepmax::narrow_applies(g)) {
    // 3x3 stride-2 max pools on rows of up to 63 outputs (SqueezeNet's, Inception-v1's and -v2's,
    // ZFNet's, the stems' 112x112 -> 56x56): each row's maxima in registers, no scratch. Zen 5, 1
    // thread, us, input in cache: 128x55x55 74.6 -> 33.0 against the ring path below, 64x112x112 116 ->
    // 66, 96x109x109 238 -> 115; against the flat path 256x27x27 35.7 -> 15.6, 480x27x27 68.0 -> 33.8,
    // 832x13x13 39.3 -> 24.5, 320x28x28 (end pad 1) 47.0 -> 21.8, 576x14x14 27.2 -> 18.0. Input out of
    // cache (16 copies in turn): 96x109x109 264 -> 140, 64x112x112 215 -> 110.
    p->path = Plan::Path::kSepMax;
  } else if (flatpool::applies(g, max, isa)) {
    // "Same" stride-1 windows on planes of up to 4096 floats (Inception's pool branches): each plane as
    // one flat run of vectors. Zen 5, in-process paired runs against the paths below: Inception-v2 0.973
    // of the time at 1 thread, 0.968 at 2; Inception-v1 0.997 / 0.969. Alone, 1 thread, us per call:
    // average 576x14x14 58 -> 34, 256x28x28 88 -> 51; max 1024x7x7 47 -> 17, 576x14x14 59 -> 30.
    // Stride-2 max pools with rows too narrow for the separable path (SqueezeNet's 256x27x27 -> 13x13,
    // Inception-v2's 320x28x28 and 576x14x14): 43 -> 37, 53 -> 45 and 39 -> 29 us against the window
    // engine. Not where the separable path runs (192x56x56: 101 vs 98, 128x55x55: 69 vs 72) nor for
    // average 2x2/2 (36 vs 42): it reduces every input column first, four times the outputs.
    p->path = Plan::Path::kFlat;
    p->flat = flatpool::make_plan(g, max, p->cip);
    floats = p->flat.scratch_floats();
  } else if (max && sepmax::applies(g) &&
             (p->isa == ep::IsaTier::kScalar || g.out[2] >= (g.s[2] == 2 ? sepmax::kMinWidthS2 : sepmax::kMinWidthS1) ||
              !window::TapPlan::supports(g))) {
    // CNN max pools with wide rows: one horizontal pass per input row straight from the input, then a
    // vertical one. Narrower rows stay on the engine, whose 8 accumulator chains per plane beat per-row
    // passes there. Zen 5, 1 thread, warm, us (separable vs engine): stride 2: 64x111x111 112 vs 197,
    // 128x55x55 77 vs 97, 64x56x56 2x2 35 vs 50, 256x27x27 50 vs 43; stride 1 (no split copy for the
    // engine to pay): 32x112x112 110 vs 180, 64x56x56 105 vs 92, 192x28x28 80 vs 78, 480x14x14 73 vs 52.
    // The plain loops (scalar tier, non-x86) take it at every width: 480x14x14 131 vs 250+ us.
    p->path = Plan::Path::kSepMax;
    floats = sepmax::scratch_floats(g);
  } else if (p->engine.prepare(g, op, p->cip, /*own_buffers=*/false, p->isa)) {
    // Windows of up to 64 taps: the shared window engine (window/window_engine.h), every stride and dilation.
    p->path = Plan::Path::kEngine;
    floats = p->engine.scratch_floats();
  } else if ((g.s[2] == 1 || g.s[2] == 2) && g.d[2] == 1 && g.k[1] <= 64 && g.k[2] <= 64) {
    p->path = Plan::Path::kTaps;
    floats = taps_scratch_floats(g);
  } else {
    p->path = Plan::Path::kRows;
    floats = rows_scratch_floats(g);
  }
  p->scratch_bytes = static_cast<size_t>(floats) * sizeof(float);
  return true;
}

bool Plan::fits(const Geom3& h) const {
  if (path == Path::kNone) return false;
  for (int a = 0; a < 3; ++a) {
    if (g.in[a] != h.in[a] || g.out[a] != h.out[a] || g.k[a] != h.k[a] || g.s[a] != h.s[a] || g.d[a] != h.d[a] ||
        g.pb[a] != h.pb[a] || g.pe[a] != h.pe[a]) {
      return false;
    }
  }
  return true;
}

void run(const Plan& p, const float* x, float* y, int64_t p0, int64_t p1, void* scratch) {
  if (p.max) {
    run_path<true>(p, x, y, p0, p1, static_cast<float*>(scratch));
  } else {
    run_path<false>(p, x, y, p0, p1, static_cast<float*>(scratch));
  }
}

void max_pool_2d(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1, ep::IsaTier isa) {
  Plan p;
  if (!make_plan(g, true, false, &p, isa)) return;
  std::vector<float> scratch(p.scratch_bytes / sizeof(float));
  run(p, x, y, p0, p1, scratch.data());
}

void avg_pool_2d(const Geom3& g, const float* x, float* y, bool count_include_pad, int64_t p0, int64_t p1) {
  Plan p;
  if (!make_plan(g, false, count_include_pad, &p)) return;
  std::vector<float> scratch(p.scratch_bytes / sizeof(float));
  run(p, x, y, p0, p1, scratch.data());
}

void global_avg(const float* x, float* y, int64_t plane, int64_t q0, int64_t q1) {
  if (has_avx2()) {
    global_avg_avx2(x, y, plane, q0, q1);
  } else {
    global_avg_plain(x, y, plane, q0, q1);
  }
}

}  // namespace nxrt::ops::rowpool
