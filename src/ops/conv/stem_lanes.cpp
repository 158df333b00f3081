// ConvMaxPool's lanes path (see stem_lanes.h). Microkernels: f32_conv_row_cl__avx512 (a conv output
// row channels-last), f32_maxpool_across_cl__avx512 / f32_maxpool_down_store__avx512 (the pool's two
// passes on channels-last rows, the second turning each pooled row into the output planes through
// transpose16x16_avx512).
#include "ops/conv/stem_lanes.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>

#include "ops/conv/transpose16.h"
#endif

namespace nxrt::ops {

namespace {

constexpr size_t align64(size_t b) { return (b + 63) / 64 * 64; }

// Output channel vectors the lanes path takes (M <= 64).
constexpr int64_t kMaxVectors = 4;

}  // namespace

bool stem_lanes_plan(const ConvShape& s, const Geom3& pg, const float* w, ep::IsaTier isa, StemLanesPlan* p) {
#if defined(__x86_64__)
  const Geom3& g = s.g;
  if (isa < ep::IsaTier::kAvx512 || !w) return false;
  if (g.in[0] != 1 || g.out[0] != 1 || g.k[0] != 1 || s.group != 1 || s.N < 1 || s.M < 1) return false;
  // Whole 16-channel vectors only: with a partial one the lanes left empty cost what they would compute
  // (ShuffleNet's 3 -> 24 3x3/2 pad 1 stem, 2 vectors for 24 channels: Zen 5, in-model per-node trace,
  // 1 thread 193-207 us on the bands, 237-244 here).
  if (s.M % 16 != 0 || s.M > 16 * kMaxVectors || s.C * g.k[1] * g.k[2] > kStemLanesMaxTaps) return false;
  if (pg.d[1] != 1 || pg.d[2] != 1 || pg.out[1] < 1 || pg.out[2] < 1 || g.out[1] < 1 || g.out[2] < 1) return false;
  // Every pool window meets the conv output (ceil mode's last window starts inside it): a window with no
  // tap has no first value to start the max from.
  if ((pg.out[1] - 1) * pg.s[1] - pg.pb[1] >= g.out[1] || (pg.out[2] - 1) * pg.s[2] - pg.pb[2] >= g.out[2]) {
    return false;
  }
  if (pg.k[1] <= pg.pb[1] || pg.k[2] <= pg.pb[2] || pg.k[1] > kStemLanesMaxPoolRows) return false;
  StemLanesPlan q;
  q.s = s;
  q.pg = pg;
  q.mv = s.M / 16;
  q.taps = s.C * g.k[1] * g.k[2];
  const int64_t OW = g.out[2], PW = pg.out[2];
  q.wp = (OW - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1;
  q.direct_rows = g.pb[2] == 0 && q.wp <= g.in[2];
  q.w.resize(static_cast<size_t>(q.taps * s.M));
  for (int64_t m = 0; m < s.M; ++m)
    for (int64_t t = 0; t < q.taps; ++t) q.w[static_cast<size_t>(t * s.M + m)] = w[m * q.taps + t];
  const int64_t in_rows = s.C * g.k[1] + 1;  // the kH input rows of each channel, and a zero row
  q.xr_off = 0;
  q.row_off = align64(static_cast<size_t>(in_rows * q.wp) * sizeof(float));
  q.ring_off = q.row_off + align64(static_cast<size_t>(OW * s.M) * sizeof(float));
  q.slot_bytes = q.ring_off + align64(static_cast<size_t>(pg.k[1] * ((PW + 15) / 16 * 16) * s.M) * sizeof(float));
  *p = std::move(q);
  return true;
#else
  (void)s, (void)pg, (void)w, (void)isa, (void)p;
  return false;
#endif
}

#if defined(__x86_64__)
// GCC 12 reports its own headers' _mm512_undefined_ps() (the pass-through of unmasked AVX-512 ops) as
// uninitialized once inlined here: a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
namespace {

#define NXRT_STEM_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl,avx2,fma")))

struct ActArgs {
  Activation act = Activation::kNone;
  float a = 0.f, b = 0.f;
};

// activation_of's results on a vector: Relu and Clip keep NaN (the max / min take v where the compare
// fails), LeakyRelu is max(v, 0) + a min(v, 0).
template <Activation A>
NXRT_STEM_AVX512 inline __m512 activate(__m512 v, const ActArgs& a) {
  const __m512 zero = _mm512_setzero_ps();
  if constexpr (A == Activation::kRelu) return _mm512_max_ps(zero, v);
  if constexpr (A == Activation::kClip) {
    return _mm512_min_ps(_mm512_set1_ps(a.b), _mm512_max_ps(_mm512_set1_ps(a.a), v));
  }
  if constexpr (A == Activation::kLeakyRelu)
    return _mm512_fmadd_ps(_mm512_set1_ps(a.a), _mm512_min_ps(zero, v), _mm512_max_ps(zero, v));
  return v;
}

// NP output pixels from ow0 of one conv row, MV vectors of channels each: acc = bias + sum over taps t of
// x(t, pixel) * w[t], x(t, pixel) = tap[t][pixel * sw]. Channels-last into row (16 MV floats a pixel).
template <int MV, int NP, Activation A>
NXRT_STEM_AVX512 void f32_conv_row_cl__avx512(const float* const* tap, int64_t taps, int64_t sw, const float* w,
                                              const float* bias, int64_t ow0, float* row, const ActArgs& a) {
  __m512 acc[NP][MV];
  for (int v = 0; v < MV; ++v) {
    const __m512 b = _mm512_loadu_ps(bias + 16 * v);
    for (int p = 0; p < NP; ++p) acc[p][v] = b;
  }
  const int64_t x0 = ow0 * sw;
  for (int64_t t = 0; t < taps; ++t) {
    const float* xt = tap[t] + x0;
    const float* wt = w + t * 16 * MV;
    __m512 wv[MV];
    for (int v = 0; v < MV; ++v) wv[v] = _mm512_loadu_ps(wt + 16 * v);
    for (int p = 0; p < NP; ++p) {
      const __m512 xv = _mm512_set1_ps(xt[p * sw]);
      for (int v = 0; v < MV; ++v) acc[p][v] = _mm512_fmadd_ps(xv, wv[v], acc[p][v]);
    }
  }
  float* out = row + ow0 * 16 * MV;
  for (int p = 0; p < NP; ++p)
    for (int v = 0; v < MV; ++v) _mm512_storeu_ps(out + (p * MV + v) * 16, activate<A>(acc[p][v], a));
}

// Pixels a pass: 24 accumulators (with MV weight vectors and a broadcast, within the 32 registers).
template <int MV>
constexpr int kPixelsPerPass = 24 / MV;

template <int MV, Activation A>
NXRT_STEM_AVX512 void conv_row_act(const float* const* tap, int64_t taps, int64_t sw, const float* w, const float* bias,
                                   int64_t OW, float* row, const ActArgs& a) {
  constexpr int NP = kPixelsPerPass<MV>;
  int64_t ow0 = 0;
  for (; ow0 + NP <= OW; ow0 += NP) f32_conv_row_cl__avx512<MV, NP, A>(tap, taps, sw, w, bias, ow0, row, a);
  if (ow0 == OW) return;
  // The tail: one more full pass ending at OW where the row has room (its first pixels again, the same
  // values), else pixel by pixel.
  if (OW >= NP) {
    f32_conv_row_cl__avx512<MV, NP, A>(tap, taps, sw, w, bias, OW - NP, row, a);
  } else {
    for (; ow0 < OW; ++ow0) f32_conv_row_cl__avx512<MV, 1, A>(tap, taps, sw, w, bias, ow0, row, a);
  }
}

template <int MV>
NXRT_STEM_AVX512 void conv_row(const float* const* tap, int64_t taps, int64_t sw, const float* w, const float* bias,
                               int64_t OW, float* row, const ActArgs& a) {
  switch (a.act) {
    case Activation::kRelu: return conv_row_act<MV, Activation::kRelu>(tap, taps, sw, w, bias, OW, row, a);
    case Activation::kClip: return conv_row_act<MV, Activation::kClip>(tap, taps, sw, w, bias, OW, row, a);
    case Activation::kLeakyRelu: return conv_row_act<MV, Activation::kLeakyRelu>(tap, taps, sw, w, bias, OW, row, a);
    default: return conv_row_act<MV, Activation::kNone>(tap, taps, sw, w, bias, OW, row, a);
  }
}

// Across: out[q] = max over the window columns of pooled column q (clipped to [0, OW)), taps in order,
// the first of equal values kept (max(new, cur) keeps cur unless new > cur).
template <int MV>
NXRT_STEM_AVX512 void f32_maxpool_across_cl__avx512(const float* row, int64_t OW, const Geom3& pg, float* out) {
  const int64_t PW = pg.out[2], k = pg.k[2], st = pg.s[2], pad = pg.pb[2];
  for (int64_t q = 0; q < PW; ++q) {
    const int64_t c0 = std::max<int64_t>(0, q * st - pad), c1 = std::min(OW, q * st - pad + k);
    __m512 cur[MV];
    for (int v = 0; v < MV; ++v) cur[v] = _mm512_loadu_ps(row + c0 * 16 * MV + 16 * v);
    for (int64_t c = c0 + 1; c < c1; ++c)
      for (int v = 0; v < MV; ++v) cur[v] = _mm512_max_ps(_mm512_loadu_ps(row + c * 16 * MV + 16 * v), cur[v]);
    for (int v = 0; v < MV; ++v) _mm512_storeu_ps(out + q * 16 * MV + 16 * v, cur[v]);
  }
}

// Pooled row p: the max down its window's rows (wrows, in order; each PW pooled-across pixels, channels-
// last, readable to a whole 16-pixel block), transposed 16 x 16 into plane row p of each channel's output:
// y_m[p * PW + q] = max_r wrows[r][q][m].
template <int MV>
NXRT_STEM_AVX512 void f32_maxpool_down_store__avx512(const float* const* wrows, int64_t nrows, int64_t PW,
                                                     float* y_img, int64_t plane, int64_t p) {
  for (int64_t q0 = 0; q0 < PW; q0 += 16) {
    const __mmask16 keep = PW - q0 >= 16 ? __mmask16(0xffff) : __mmask16((1u << (PW - q0)) - 1);
    for (int v = 0; v < MV; ++v) {
      __m512 r[16];
      const int64_t off = q0 * 16 * MV + 16 * v;
      for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_ps(wrows[0] + off + i * 16 * MV);
      for (int64_t k = 1; k < nrows; ++k)
        for (int i = 0; i < 16; ++i) r[i] = _mm512_max_ps(_mm512_loadu_ps(wrows[k] + off + i * 16 * MV), r[i]);
      transpose16x16_avx512(r);
      float* dst = y_img + 16 * v * plane + p * PW + q0;
      for (int j = 0; j < 16; ++j) _mm512_mask_storeu_ps(dst + j * plane, keep, r[j]);
    }
  }
}

template <int MV>
NXRT_STEM_AVX512 void run_rows(const StemLanesPlan& plan, const float* x, const float* bias, const ActArgs& a,
                               float* y, int64_t r0, int64_t r1, char* slot) {
  const ConvShape& s = plan.s;
  const Geom3& g = s.g;
  const Geom3& pg = plan.pg;
  const int64_t C = s.C, M = s.M, IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.k[1], KW = g.k[2], sh = g.s[1], sw = g.s[2], dh = g.d[1], dw = g.d[2];
  const int64_t pad_top = g.pb[1], pad_left = g.pb[2];
  const int64_t PH = pg.out[1], PW = pg.out[2], pk = pg.k[1], ps = pg.s[1], ppt = pg.pb[1];
  const int64_t wp = plan.wp, m16 = 16 * MV;
  float* xr = reinterpret_cast<float*>(slot + plan.xr_off);
  float* zero_row = xr + C * KH * wp;
  float* row = reinterpret_cast<float*>(slot + plan.row_off);
  float* ring = reinterpret_cast<float*>(slot + plan.ring_off);
  std::memset(zero_row, 0, static_cast<size_t>(wp) * sizeof(float));
  // The transpose reads whole 16-pixel blocks: each ring row's pixels past PW hold zeros (never stored).
  const int64_t ring_stride = (PW + 15) / 16 * 16 * m16;
  for (int64_t i = 0; i < pk; ++i)
    std::memset(ring + i * ring_stride + PW * m16, 0, static_cast<size_t>(ring_stride - PW * m16) * sizeof(float));
  const float* wrows[kStemLanesMaxPoolRows];
  const float* rows_of[kStemLanesMaxTaps];  // per (c, kh): the input row the conv row's taps read
  const float* tap[kStemLanesMaxTaps];
  const int64_t plane = PH * PW;
  for (int64_t r = r0; r < r1;) {
    const int64_t n = r / PH, p0 = r % PH, p1 = std::min(PH, p0 + (r1 - r));
    const float* xn = x + n * C * IH * IW;
    float* yn = y + n * M * plane;
    // Conv rows the pooled rows [p0, p1) read; each computed once, its pooled-across row kept in the ring
    // (pk rows) until the last window reading it is done.
    const int64_t c0 = std::max<int64_t>(0, p0 * ps - ppt), c1 = std::min(OH, (p1 - 1) * ps - ppt + pk);
    int64_t next = p0;  // the next pooled row to finish
    for (int64_t oh = c0; oh < c1; ++oh) {
      for (int64_t c = 0; c < C; ++c)
        for (int64_t kh = 0; kh < KH; ++kh) {
          const int64_t ih = oh * sh - pad_top + kh * dh;
          const int64_t i = c * KH + kh;
          if (ih < 0 || ih >= IH) {
            rows_of[i] = zero_row;
          } else if (plan.direct_rows) {
            rows_of[i] = xn + (c * IH + ih) * IW;
          } else {
            float* d = xr + i * wp;
            std::memset(d, 0, static_cast<size_t>(wp) * sizeof(float));
            const int64_t nc = std::min(IW, wp - pad_left);
            if (nc > 0) std::memcpy(d + pad_left, xn + (c * IH + ih) * IW, static_cast<size_t>(nc) * sizeof(float));
            rows_of[i] = d;
          }
        }
      for (int64_t c = 0, t = 0; c < C; ++c)
        for (int64_t kh = 0; kh < KH; ++kh)
          for (int64_t kw = 0; kw < KW; ++kw, ++t) tap[t] = rows_of[c * KH + kh] + kw * dw;
      conv_row<MV>(tap, plan.taps, sw, plan.w.data(), bias, OW, row, a);
      f32_maxpool_across_cl__avx512<MV>(row, OW, pg, ring + (oh % pk) * ring_stride);
      // Pooled rows whose windows end here (or at the conv's last row).
      while (next < p1) {
        const int64_t w0 = std::max<int64_t>(0, next * ps - ppt), w1 = std::min(OH, next * ps - ppt + pk);
        if (w1 - 1 > oh) break;
        for (int64_t k = w0; k < w1; ++k) wrows[k - w0] = ring + (k % pk) * ring_stride;
        f32_maxpool_down_store__avx512<MV>(wrows, w1 - w0, PW, yn, plane, next);
        ++next;
      }
    }
    r += p1 - p0;
  }
}

}  // namespace
#pragma GCC diagnostic pop
#endif

void stem_lanes_run(const StemLanesPlan& p, const float* x, const float* bias, const ConvPost& post, float* y,
                    int64_t r0, int64_t r1, char* slot) {
#if defined(__x86_64__)
  ActArgs a;
  a.act = post.act;
  a.a = post.act_a;
  a.b = post.act_b;
  switch (p.mv) {
    case 1: return run_rows<1>(p, x, bias, a, y, r0, r1, slot);
    case 2: return run_rows<2>(p, x, bias, a, y, r0, r1, slot);
    case 3: return run_rows<3>(p, x, bias, a, y, r0, r1, slot);
    default: return run_rows<4>(p, x, bias, a, y, r0, r1, slot);
  }
#else
  (void)p, (void)x, (void)bias, (void)post, (void)y, (void)r0, (void)r1, (void)slot;
#endif
}

}  // namespace nxrt::ops
