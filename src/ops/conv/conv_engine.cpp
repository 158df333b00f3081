#include "ops/conv/conv_engine.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <optional>
#include <span>
#include <type_traits>

#include "ep/slot_scratch.h"
#include "ops/conv/depthwise.h"
#include "ops/gemm/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nxrt::ops {

namespace {

// Output positions ow in [lo, hi) read input columns iw = ow*s + base inside [0, in).
inline void valid_range(int64_t base, int64_t s, int64_t in, int64_t out, int64_t* lo, int64_t* hi) {
  // ow*s + base >= 0  ->  ow >= ceil(-base / s)
  int64_t l = base >= 0 ? 0 : (-base + s - 1) / s;
  // ow*s + base <= in - 1  ->  ow <= floor((in - 1 - base) / s)
  int64_t h = (in - 1 - base) < 0 ? 0 : (in - 1 - base) / s + 1;
  l = std::min(l, out);
  h = std::min(h, out);
  if (h < l) h = l;
  *lo = l;
  *hi = h;
}

#if defined(__x86_64__) || defined(__i386__)
// out[i] = src[2 i] for i < n, 8 at a time with AVX2 while the 16 floats read stay below src + limit.
__attribute__((target("avx2"))) int64_t gather_even_avx2(const float* src, int64_t n, int64_t limit, float* out) {
  int64_t i = 0;
  for (; i + 8 <= n && 2 * i + 16 <= limit; i += 8) {
    const __m256 a = _mm256_loadu_ps(src + 2 * i), b = _mm256_loadu_ps(src + 2 * i + 8);
    // [a0 a2 b0 b2 | a4 a6 b4 b6] -> [a0 a2 a4 a6 b0 b2 b4 b6]
    const __m256 e = _mm256_shuffle_ps(a, b, 0x88);
    _mm256_storeu_ps(out + i, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(e), 0xD8)));
  }
  return i;
}
#endif

// col[(c, kd, kh, kw), r*OW + ow] for output rows r in [r0, r1) (a row is one (od, oh) pair). avx2: float
// rows at stride 2 through gather_even_avx2. (For a 1x1 kernel without pads this is the input subsampled
// at the strides: kPointwise's copy, ConvPlan::subsample.)
template <typename CT>
void im2col(const Geom3& g, int64_t channels, const CT* x, int64_t r0, int64_t r1, CT* col, ep::ThreadPool* pool,
            bool avx2) {
  const int64_t KD = g.k[0], KH = g.k[1], KW = g.k[2];
  const int64_t OH = g.out[1], OW = g.out[2];
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2];
  const int64_t kvol = KD * KH * KW;
  const int64_t rows = channels * kvol;
  const int64_t cols = (r1 - r0) * OW;
  auto body = [&](int64_t k0, int64_t k1) {
    for (int64_t row = k0; row < k1; ++row) {
      const int64_t c = row / kvol;
      int64_t rem = row % kvol;
      const int64_t kd = rem / (KH * KW);
      rem %= KH * KW;
      const int64_t kh = rem / KW, kw = rem % KW;
      CT* dst = col + row * cols;
      const CT* xc = x + c * ID * IH * IW;
      const int64_t wbase = kw * g.d[2] - g.pb[2];
      int64_t lo, hi;
      valid_range(wbase, g.s[2], IW, OW, &lo, &hi);
      for (int64_t r = r0; r < r1; ++r, dst += OW) {
        const int64_t od = r / OH, oh = r % OH;
        const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
        const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
        if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
          std::fill(dst, dst + OW, CT(0));
          continue;
        }
        const CT* src = xc + (id * IH + ih) * IW;
        for (int64_t ow = 0; ow < lo; ++ow) dst[ow] = CT(0);
        if (g.s[2] == 1) {
          if (hi > lo) std::memcpy(dst + lo, src + lo + wbase, sizeof(CT) * (hi - lo));
        } else {
          const int64_t sw = g.s[2];
          int64_t ow = lo;
#if defined(__x86_64__) || defined(__i386__)
          if constexpr (std::is_same_v<CT, float>) {
            // src + lo * 2 + wbase .. must stay inside the input row.
            if (sw == 2 && avx2 && hi > lo)
              ow += gather_even_avx2(src + lo * 2 + wbase, hi - lo, IW - (lo * 2 + wbase), dst + lo);
          }
#endif
          (void)avx2;
          for (; ow < hi; ++ow) dst[ow] = src[ow * sw + wbase];
        }
        for (int64_t ow = hi; ow < OW; ++ow) dst[ow] = CT(0);
      }
    }
  };
  if (pool && rows * cols > 32768) {
    pool->parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)), body);
  } else {
    body(0, rows);
  }
}


// The packers' common frame: for each of the kc rows of a block, `gather(k, row)` writes that row's nc
// values contiguously into `row` (an L1-resident buffer of the calling thread, zero past nc up to the
// panel width), and the row is then dealt into the engine's 16-column panels (panel q at q * 16 * kc).
template <typename Gather>
void pack_rows_into_panels(int64_t kc, int64_t nc, float* dst, Gather gather) {
  constexpr int64_t NR = kGemmNR;
  const int64_t panels = (nc + NR - 1) / NR;
  // One row of the block on the packing thread's stack: at most kGemmMaxBlockCols floats (4 KB)
  // whatever the conv.
  alignas(64) float row[(kGemmMaxBlockCols + NR - 1) / NR * NR];
  assert(panels * NR <= static_cast<int64_t>(sizeof(row) / sizeof(float)));
  std::fill(row + nc, row + panels * NR, 0.f);
  for (int64_t k = 0; k < kc; ++k) {
    gather(k, row);
    float* d = dst + k * NR;
    for (int64_t q = 0; q < panels; ++q) std::memcpy(d + q * NR * kc, row + q * NR, sizeof(float) * NR);
  }
}

// The implicit-GEMM B operand of a float conv: im2col rows [p0, p0+kc) x output positions [j0, j0+nc)
// of one group's input, written straight into the GEMM engine's 16-column panels (GemmBPacker), so no
// column matrix is materialised and each block is packed by the thread that multiplies it, in cache.
struct Im2colPanels {
  const Geom3& g;
  const float* x;  // the group's first input channel
  bool avx2;

  void operator()(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
    const int64_t KH = g.k[1], KW = g.k[2], khw = KH * KW, kvol = g.k[0] * khw;
    const int64_t OH = g.out[1], OW = g.out[2];
    const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2];
    const int64_t sw = g.s[2];
    // The block's output positions as runs along output rows (od, oh), found once per block.
    struct Run {
      int64_t od, oh, ow0, ow1, off;
    };
    // Per block, on the packing thread's stack: one run per output row the block touches, at most
    // nc <= kGemmMaxBlockCols of them (1-pixel rows).
    Run runs_buf[kGemmMaxBlockCols];
    int64_t nruns = 0;
    for (int64_t j = j0; j < j0 + nc;) {
      const int64_t r = j / OW, ow0 = j % OW, ow1 = std::min(OW, ow0 + (j0 + nc - j));
      runs_buf[nruns++] = {r / OH, r % OH, ow0, ow1, j - j0};
      j += ow1 - ow0;
    }
    const std::span<const Run> runs(runs_buf, static_cast<size_t>(nruns));
    pack_rows_into_panels(kc, nc, dst, [&](int64_t k, float* row) {
      const int64_t kr = p0 + k;
      const int64_t c = kr / kvol, rem = kr % kvol;
      const int64_t kd = rem / khw, kh = (rem % khw) / KW, kw = rem % KW;
      const float* xc = x + c * ID * IH * IW;
      const int64_t wbase = kw * g.d[2] - g.pb[2];
      int64_t lo, hi;
      valid_range(wbase, sw, IW, OW, &lo, &hi);
      for (const Run& run : runs) {
        float* out = row + run.off - run.ow0;  // out[ow] for ow in [ow0, ow1)
        const int64_t id = run.od * g.s[0] - g.pb[0] + kd * g.d[0];
        const int64_t ih = run.oh * g.s[1] - g.pb[1] + kh * g.d[1];
        if (id < 0 || id >= ID || ih < 0 || ih >= IH) {
          std::fill(out + run.ow0, out + run.ow1, 0.f);
          continue;
        }
        const float* src = xc + (id * IH + ih) * IW + wbase;  // src[ow * sw] for ow in [lo, hi)
        const int64_t a = std::clamp(lo, run.ow0, run.ow1), b = std::clamp(hi, a, run.ow1);
        for (int64_t ow = run.ow0; ow < a; ++ow) out[ow] = 0.f;
        if (sw == 1) {
          if (b > a) std::memcpy(out + a, src + a, sizeof(float) * (b - a));
        } else {
          int64_t ow = a;
#if defined(__x86_64__) || defined(__i386__)
          // src + a * 2 .. must stay inside the input row: limit = IW - (a * 2 + wbase).
          if (sw == 2 && avx2) ow += gather_even_avx2(src + a * 2, b - a, IW - (a * 2 + wbase), out + a);
#endif
          for (; ow < b; ++ow) out[ow] = src[ow * sw];
        }
        for (int64_t ow = b; ow < run.ow1; ++ow) out[ow] = 0.f;
      }
    });
  }
};

// kPaddedRowsGemm: a float 2-D conv with a short reduction (16 <= C/group * kh * kw <= 256, kernel > 1x1) and
// rows of >= 12 outputs, horizontal stride 1 or 2 (the stems of CNNs: 3 input channels, 3x3 or 7x7,
// stride 2). The group's input is copied once into zero-padded planes (stride 2: each padded row split
// into its even and odd columns), so the im2col row of tap (c, kh, kw) for 16 consecutive outputs of one
// output row is 16 contiguous floats at a fixed offset: gemm_f32_strips reads them in place, with no
// panel packing (which cost as much as the product when only 24-64 output channels share each column).
// Each task is one output row, walked panel by panel of 6 output channels so the stores stream along 6
// output rows (walking all channels of one 16-wide strip first stored down 64 planes at once and made
// SqueezeNet's stem 2x slower). Measured at one thread, in-model: the 7x7/2 3->64 stems of ResNet-50,
// DenseNet-121 and Inception-v2 2.84 -> 2.40-2.47 ms, ShuffleNet's 3x3/2 3->24 0.35 -> 0.28 ms,
// SqueezeNet's 3x3/2 3->64 0.66 -> 0.675 (even). AVX-512 strips take the engine's 6 x 64 tile: a 12 x 32
// tile over two A panels (its 12 broadcasts per 24 FMAs) measured 5-9% slower on all three stems (Zen 5,
// 1 thread, BM_ConvStem: SqueezeNet 0.347 -> 0.322 ms, ResNet-50 1.38 -> 1.32, ShuffleNet 0.147 -> 0.134).
// The kernel override conv.skip=padded-rows-gemm keeps these convs on the implicit GEMM (A/B measurements).

// 2-D geometry (no depth axis) with horizontal stride 1 or 2: what plan_padded_input can lay out.
bool strided_2d(const ConvShape& s) {
  const Geom3& g = s.g;
  return g.in[0] == 1 && g.out[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 && (g.s[2] == 1 || g.s[2] == 2);
}

bool padded_rows_apply(const ConvShape& s) {
  const Geom3& g = s.g;
  if (!strided_2d(s)) return false;
  const int64_t kvol = g.k[1] * g.k[2];
  const int64_t K = (s.C / s.group) * kvol;
  return kvol > 1 && K >= 16 && K <= kGemmKC && g.out[2] >= 12 && (g.s[2] == 1 || g.s[2] == 2);
}

// The padded layout of s (ConvPlan's Hp, Wrow, half, plane and per-tap offsets boff), decided once per
// shape by conv_plan; the copy itself (Cg * plane floats) lives in the plan's workspace.
void plan_padded_input(const ConvShape& s, ConvPlan* p) {
  const Geom3& g = s.g;
  const int64_t Cg = s.C / s.group, KH = g.k[1], KW = g.k[2], dh = g.d[1], dw = g.d[2];
  const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2];
  const int64_t ow_round = (OW + 15) / 16 * 16;
  p->padded = true;
  p->Hp = std::max(g.pb[1] + IH, (OH - 1) * g.s[1] + (KH - 1) * dh + 1);
  if (g.s[2] == 1) {
    p->Wrow = std::max(g.pb[2] + IW, ow_round + (KW - 1) * dw);
  } else {
    p->half = std::max((g.pb[2] + IW + 1) / 2, ow_round + (KW - 1) * dw / 2);
    p->Wrow = 2 * p->half;
  }
  p->plane = p->Hp * p->Wrow;
  p->boff.resize(static_cast<size_t>(Cg * KH * KW));
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t col = kw * dw;
        const int64_t in_row = g.s[2] == 1 ? col : (col % 2) * p->half + col / 2;
        p->boff[(c * KH + kh) * KW + kw] = c * p->plane + kh * dh * p->Wrow + in_row;
      }
}

// The group's input (Cg planes of IH x IW) into xp, the zero-padded layout of `p`.
void fill_padded_input(const ConvShape& s, const ConvPlan& p, float* xp, const float* x, bool avx2,
                       ep::ThreadPool* pool) {
  const Geom3& g = s.g;
  const int64_t Cg = s.C / s.group, IH = g.in[1], IW = g.in[2], pt = g.pb[1], pl = g.pb[2];
  // Tasks of up to 16 padded rows of one channel: each zeroes its rows, then copies the input rows
  // that land in them (split over the threads: at 2 threads the copy was serial time before every
  // strided conv).
  constexpr int64_t kRows = 16;
  const int64_t blocks = (p.Hp + kRows - 1) / kRows;
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c = t / blocks, r0 = (t % blocks) * kRows, r1 = std::min(p.Hp, r0 + kRows);
      float* plane = xp + c * p.plane;
      std::fill(plane + r0 * p.Wrow, plane + r1 * p.Wrow, 0.f);
      for (int64_t ih = std::max<int64_t>(0, r0 - pt); ih < std::min(IH, r1 - pt); ++ih) {
        const float* src = x + (c * IH + ih) * IW;
        float* row = plane + (ih + pt) * p.Wrow;
        if (g.s[2] == 1) {
          std::memcpy(row + pl, src, sizeof(float) * IW);
          continue;
        }
        // Padded column iw + pl goes to phase (iw + pl) % 2 at index (iw + pl) / 2.
        for (int64_t q = 0; q < 2; ++q) {
          const int64_t iw0 = ((q - pl) % 2 + 2) % 2;
          if (iw0 >= IW) continue;
          const int64_t count = (IW - iw0 + 1) / 2;
          float* dst = row + q * p.half + (iw0 + pl) / 2;
          int64_t i = 0;
#if defined(__x86_64__) || defined(__i386__)
          if (avx2) i = gather_even_avx2(src + iw0, count, IW - iw0, dst);
#endif
          for (; i < count; ++i) dst[i] = src[iw0 + 2 * i];
        }
      }
    }
  };
  const int64_t tasks = Cg * blocks;
  if (pool && Cg * p.plane >= (int64_t(1) << 16)) {
    pool->parallel_for(tasks, 1, body);
  } else {
    body(0, tasks);
  }
}

// Im2colPanels over the zero-padded (stride 2: phase-split) input copy of fill_padded_input: every run of
// outputs along a row is one contiguous copy at offset boff[k] (no bounds tests, zero fills or strided
// gathers), which halved the packing cost of ResNet-50's stride-2 3x3 convs.
struct PaddedIm2colPanels {
  const Geom3& g;
  const ConvPlan& sp;
  const float* xpad;  // filled for the current image and group

  void operator()(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
    const int64_t OW = g.out[2];
    struct Run {
      int64_t src, len, off;
    };
    Run runs_buf[kGemmMaxBlockCols];  // as in Im2colPanels: per block, on the stack
    int64_t nruns = 0;
    for (int64_t j = j0; j < j0 + nc;) {
      const int64_t oh = j / OW, ow0 = j % OW, len = std::min(OW - ow0, j0 + nc - j);
      runs_buf[nruns++] = {oh * g.s[1] * sp.Wrow + ow0, len, j - j0};
      j += len;
    }
    const std::span<const Run> runs(runs_buf, static_cast<size_t>(nruns));
    pack_rows_into_panels(kc, nc, dst, [&](int64_t k, float* row) {
      const float* base = xpad + sp.boff[p0 + k];
      for (const Run& r : runs) std::memcpy(row + r.off, base + r.src, sizeof(float) * r.len);
    });
  }
};

// B panels of a 1x1 conv with a pre-activation: x'(k, j) = max(x[k * ld + j] * scale[k] + shift[k], 0)
// (a NaN comes out 0, as in BatchNormRelu).
#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("avx2,fma"))) void preact_row_avx2(const float* x, int64_t n, float a, float b, float* dst16,
                                                          int64_t stride) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b), zero = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16, dst16 += stride) {
    _mm256_storeu_ps(dst16, _mm256_max_ps(_mm256_fmadd_ps(_mm256_loadu_ps(x + j), va, vb), zero));
    _mm256_storeu_ps(dst16 + 8, _mm256_max_ps(_mm256_fmadd_ps(_mm256_loadu_ps(x + j + 8), va, vb), zero));
  }
  if (j < n) {
    for (int64_t i = 0; i < 16; ++i) {
      const float v = j + i < n ? x[j + i] * a + b : 0.f;
      dst16[i] = j + i < n ? (v > 0.f ? v : 0.f) : 0.f;
    }
  }
}
#endif

struct PreactPanels {
  const float* x;  // the image's first input channel
  int64_t ld;      // floats per input channel (the plane)
  const float* scale;
  const float* shift;
  bool avx2;

  void operator()(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
    constexpr int64_t NR = kGemmNR;
    for (int64_t k = 0; k < kc; ++k) {
      const float* row = x + (p0 + k) * ld + j0;
      const float a = scale[p0 + k], b = shift[p0 + k];
      float* d = dst + k * NR;  // panel q at d + q * NR * kc
#if defined(__x86_64__) || defined(__i386__)
      if (avx2) {
        preact_row_avx2(row, nc, a, b, d, NR * kc);
        continue;
      }
#endif
      const int64_t panels = (nc + NR - 1) / NR;
      for (int64_t q = 0; q < panels; ++q) {
        for (int64_t i = 0; i < NR; ++i) {
          const int64_t j = q * NR + i;
          const float v = j < nc ? row[j] * a + b : 0.f;
          d[q * NR * kc + i] = j < nc ? (v > 0.f ? v : 0.f) : 0.f;
        }
      }
    }
  }
};

template <typename CT>
void fill_bias(CT* y, int64_t rows, int64_t cols, const CT* bias) {
  for (int64_t m = 0; m < rows; ++m) std::fill(y + m * cols, y + (m + 1) * cols, bias ? bias[m] : CT(0));
}

// One channel of a depthwise conv: y (already holding the bias) += conv(x, w).
template <typename CT>
void depthwise_plane(const Geom3& g, const CT* x, const CT* w, CT* y) {
  const int64_t KH = g.k[1], KW = g.k[2];
  const int64_t OD = g.out[0], OH = g.out[1], OW = g.out[2];
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2];
  const int64_t sw = g.s[2];
  std::vector<int64_t> lo(static_cast<size_t>(KW)), hi(static_cast<size_t>(KW));
  for (int64_t kw = 0; kw < KW; ++kw) valid_range(kw * g.d[2] - g.pb[2], sw, IW, OW, &lo[kw], &hi[kw]);
  for (int64_t od = 0; od < OD; ++od) {
    for (int64_t kd = 0; kd < g.k[0]; ++kd) {
      const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
      if (id < 0 || id >= ID) continue;
      for (int64_t oh = 0; oh < OH; ++oh) {
        CT* yrow = y + (od * OH + oh) * OW;
        for (int64_t kh = 0; kh < KH; ++kh) {
          const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
          if (ih < 0 || ih >= IH) continue;
          const CT* xrow = x + (id * IH + ih) * IW;
          const CT* wk = w + (kd * KH + kh) * KW;
          for (int64_t kw = 0; kw < KW; ++kw) {
            const int64_t base = kw * g.d[2] - g.pb[2];
            const int64_t l = lo[kw], h = hi[kw];
            const CT wv = wk[kw];
            if (sw == 1) {
              if (h > l) {
                const CT* xs = xrow + (l + base);
                CT* ys = yrow + l;
                const int64_t len = h - l;
                for (int64_t i = 0; i < len; ++i) ys[i] += wv * xs[i];
              }
            } else {
              for (int64_t ow = l; ow < h; ++ow) yrow[ow] += wv * xrow[ow * sw + base];
            }
          }
        }
      }
    }
  }
}

}  // namespace

template <typename CT>
bool ConvWeights<CT>::prepare_packed(const Dims& w_shape, int64_t group_count, const CT* w, bool winograd) {
  shape = w_shape;
  group = group_count;
  const int64_t M = w_shape[0];
  const int64_t Mg = M / group;
  const int64_t K = shape_numel(w_shape) / std::max<int64_t>(1, M);
  packed.clear();
  packed.reserve(static_cast<size_t>(group));
  for (int64_t gi = 0; gi < group; ++gi) packed.push_back(pack_a<CT>(false, Mg, K, w + gi * Mg * K, K));
  wino.reset();
  small.reset();
  strided.reset();
  if constexpr (std::is_same_v<CT, float>) {
    if (winograd && winograd_weights_apply(w_shape, group)) wino = std::make_shared<WinogradCache>();
    if (small_spatial_weights_apply(w_shape, group)) small = std::make_shared<SmallSpatialCache>();
    if (w_shape.size() == 4 && group == 1) strided = std::make_shared<StridedDirectCache>();
  }
  // The depthwise path (one input channel per group) reads the raw weights, and so does the pointwise
  // path for a single output position (squeeze-excitation FCs written as 1x1 convs), when small.
  const bool small_pointwise = w_shape.size() >= 2 && K == w_shape[1] && M * K <= (int64_t{1} << 16);
  return (w_shape.size() >= 2 && w_shape[1] == 1) || small_pointwise;
}

template <typename CT>
void ConvWeights<CT>::prepare(const Dims& w_shape, int64_t group_count, std::vector<CT> w, bool winograd) {
  const bool keep_raw = prepare_packed(w_shape, group_count, w.data(), winograd);
  raw = keep_raw ? std::move(w) : std::vector<CT>();
}

template <typename CT>
void ConvWeights<CT>::prepare(const Dims& w_shape, int64_t group_count, const CT* w, bool winograd) {
  const bool keep_raw = prepare_packed(w_shape, group_count, w, winograd);
  raw = keep_raw ? std::vector<CT>(w, w + shape_numel(w_shape)) : std::vector<CT>();
}

namespace {

constexpr uint32_t path_bit(ConvPath p) { return 1u << static_cast<int>(p); }

// The most output channels and input channels (per group) a 1x1 conv runs on its unpacked input with
// (pointwise_unpacked). Deeper reductions lose: each tile then walks hundreds of input rows apart.
constexpr int64_t kPointwiseUnpackedMaxRows = 64, kPointwiseUnpackedMaxK = 128;

struct ConvPathName {
  ConvPath path;
  const char* name;
};
constexpr ConvPathName kConvPathNames[] = {
    {ConvPath::kAuto, "auto"},
    {ConvPath::kReference, "reference"},
    {ConvPath::kIm2col, "im2col"},
    {ConvPath::kImplicitGemm, "implicit-gemm"},
    {ConvPath::kPaddedRowsGemm, "padded-rows-gemm"},
    {ConvPath::kPointwise, "pointwise"},
    {ConvPath::kDepthwiseWindow, "depthwise-window"},
    {ConvPath::kDepthwiseScalar, "depthwise-scalar"},
    {ConvPath::kWinograd, "winograd"},
    {ConvPath::kSmallSpatialDirect, "small-spatial-direct"},
    {ConvPath::kSmallSpatialTransposed, "small-spatial-transposed"},
    {ConvPath::kStridedDirect, "strided-direct"},
};

// A 1x1 kernel without pads, at any stride: kPointwise's convs (strides over 1, ResNet's projection
// shortcuts, on the subsampled input: see ConvPlan::subsample).
bool is_unpadded_1x1(const Geom3& g) {
  for (int i = 0; i < 3; ++i) {
    if (g.k[i] != 1 || g.pb[i] != 0 || g.pe[i] != 0) return false;
  }
  return true;
}

// ... at stride 1: the GEMM straight on the input.
bool is_pointwise(const Geom3& g) {
  return is_unpadded_1x1(g) && g.s[0] == 1 && g.s[1] == 1 && g.s[2] == 1;
}

// The 1x1 stride-1 geometry over the subsampled input: its input is the strided conv's output grid.
Geom3 subsampled_geometry(const Geom3& g) {
  Geom3 u = g;
  for (int i = 0; i < 3; ++i) {
    u.in[i] = g.out[i];
    u.s[i] = 1;
    u.d[i] = 1;
  }
  return u;
}

// What one conv_forward call hands its path.
template <typename CT>
struct ConvCall {
  const ConvShape& s;
  const CT* x;
  const ConvWeights<CT>& w;
  const CT* bias;
  CT* y;
  ep::ThreadPool* pool;
  const ConvConfig& cfg;
  const ConvPost* post;
  const ConvPlan& plan;
  void* ws;                 // plan.workspace_bytes
  ep::SlotMemory slots;     // plan.slot_bytes for each thread of the pool

  int64_t Cg() const { return s.C / s.group; }
  int64_t Mg() const { return s.M / s.group; }
  // The GEMM engine's packing scratch in the workspace (none: the engine allocates per call).
  GemmScratch gemm_scratch() const {
    if (!slots.base || plan.gemm_slot_floats == 0) return {};
    return {reinterpret_cast<float*>(slots.base), slots.stride / sizeof(float), slots.slots};
  }
  const CT* x_group(int64_t n, int64_t gi) const { return x + (n * s.C + gi * Cg()) * s.g.in_size(); }
  CT* y_group(int64_t n, int64_t gi) const { return y + (n * s.M + gi * Mg()) * s.g.out_size(); }

  // The GEMM store's epilogue for group gi of image n: bias, then post (float).
  GemmEpilogue epilogue(int64_t n, int64_t gi) const {
    GemmEpilogue ep;
    if constexpr (std::is_same_v<CT, float>) {
      if (bias) {
        ep.bias_kind = GemmBias::kPerRow;
        ep.bias = bias + gi * Mg();
      }
      if (post) {
        if (post->residual) {
          ep.residual = post->residual + (n * s.M + gi * Mg()) * s.g.out_size();
          ep.ldr = s.g.out_size();
        }
        ep.act = post->act;
        ep.act_a = post->act_a;
        ep.act_b = post->act_b;
        ep.isa = cfg.isa;
      }
    }
    return ep;
  }
};

// Whether the prepared weights (and `post`) let a path that applies to the shape run.
template <typename CT>
bool weights_serve(const ConvShape& s, const ConvWeights<CT>& w, const ConvPost* post, ConvPath path) {
  switch (path) {
    case ConvPath::kWinograd:
      return w.wino && w.shape.size() == 4 && w.shape[0] == s.M && w.shape[1] == s.C;
    case ConvPath::kSmallSpatialDirect:
    case ConvPath::kSmallSpatialTransposed: {
      if (!w.small || static_cast<int64_t>(w.packed.size()) != s.group) return false;
      if (post && !conv_post_activation(post->act)) return false;
      return w.packed[0].M == s.M / s.group && w.packed[0].K == s.C / s.group * s.g.kvol();
    }
    case ConvPath::kDepthwiseWindow:
    case ConvPath::kDepthwiseScalar:
      return !w.raw.empty();
    case ConvPath::kStridedDirect:
      return w.strided && w.packed.size() == 1 && w.packed[0].M == s.M && w.packed[0].K == s.C * s.g.kvol();
    default:
      return true;
  }
}

// The kAuto rule: the small-spatial paths where their share of the vector lanes wins
// (small_spatial_choice, which leaves planes over 8x8 to Winograd where it is preferred), Winograd where
// preferred, then 1x1 GEMM, depthwise, and the general GEMM paths. Small-spatial comes first so a 3x3
// conv on a 7x7 plane, where Winograd's 4x4 tiles cover 64 outputs for 49, takes the transposed path.
template <typename CT>
ConvPath auto_path(const ConvShape& s, const ConvWeights<CT>& w, const ConvConfig& cfg, const ConvPost* post,
                   int threads) {
  constexpr bool kFloat = std::is_same_v<CT, float>;
  if (kFloat) {
    // Strided convs the small-spatial paths would also take (planes of 256 outputs or fewer) run faster
    // on the strided direct path where its output runs are 7+ pixels: Zen 5, in-process paired runs,
    // strided direct / small-spatial time, 1 and 2 threads: ResNet-50's 3x3/2 256->256 @28x28 0.92 /
    // 0.74, 512->512 @14x14 0.97 / 0.87; Inception-v2's 128->160 @28x28 0.87 / 0.72, 96->96 0.86 / 0.65,
    // 128->192 @14x14 0.91 / 0.73, 256->256 0.97 / 0.83 alone; in-model per-node trace, 1 thread, those
    // four of Inception-v2 1.50-1.58 -> 1.24-1.36 ms; whole models (in-process paired, 1 / 2 threads):
    // Inception-v2 0.982 / 0.976, ResNet-50 0.987-0.991 / 0.997. (Narrower outputs are not measured.)
    if (!cfg.skipped(ConvPath::kStridedDirect) && s.g.out[2] >= 7 && strided_direct_preferred(s, cfg.isa, threads) &&
        weights_serve(s, w, post, ConvPath::kStridedDirect))
      return ConvPath::kStridedDirect;
    if (!cfg.skipped(ConvPath::kSmallSpatialDirect) && weights_serve(s, w, post, ConvPath::kSmallSpatialDirect)) {
      switch (small_spatial_choice(s, threads, cfg.isa)) {
        case SmallSpatialChoice::kNone: break;
        case SmallSpatialChoice::kDirect: return ConvPath::kSmallSpatialDirect;
        case SmallSpatialChoice::kTransposed: return ConvPath::kSmallSpatialTransposed;
      }
    }
    if (!cfg.skipped(ConvPath::kWinograd) && winograd_preferred(s) && weights_serve(s, w, post, ConvPath::kWinograd))
      return ConvPath::kWinograd;
    if (!cfg.skipped(ConvPath::kStridedDirect) && strided_direct_preferred(s, cfg.isa, threads) &&
        weights_serve(s, w, post, ConvPath::kStridedDirect))
      return ConvPath::kStridedDirect;
  }
  if (is_unpadded_1x1(s.g)) return ConvPath::kPointwise;
  if (conv_path_applies(s, ConvPath::kDepthwiseScalar, kFloat, cfg.isa)) {
    return conv_path_applies(s, ConvPath::kDepthwiseWindow, kFloat, cfg.isa) ? ConvPath::kDepthwiseWindow
                                                                             : ConvPath::kDepthwiseScalar;
  }
  if (!kFloat) return ConvPath::kIm2col;
  if (!cfg.skipped(ConvPath::kPaddedRowsGemm) && padded_rows_apply(s)) return ConvPath::kPaddedRowsGemm;
  return ConvPath::kImplicitGemm;
}

// Depthwise paths, which read the input plane by plane: a channel shuffle of the input (ConvPost::
// input_shuffle) is a different plane per channel.
template <typename CT>
void run_depthwise(const ConvCall<CT>& c, bool window) {
  const ConvShape& s = c.s;
  const Geom3& g = s.g;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), kvol = g.kvol();
  const CT* w = c.w.raw.data();
  const int64_t shuffle = c.post && c.post->input_shuffle > 1 ? c.post->input_shuffle : 0;
  auto body = [&](int64_t p0, int64_t p1) {
    if constexpr (std::is_same_v<CT, float>) {
      // A chunk of planes on the window engine (the next plane's input copied in while one computes),
      // on this thread's slot of the plan's scratch.
      if (window) {
        const ConvPlan& pl = c.plan;
        float* slot = static_cast<float*>(c.slots.slot(c.pool ? c.pool->slot() : 0));
        return dwconv::planes_f32(pl.dw_plan.get(), slot, g, s.C, s.M, c.x, w, c.bias, c.y, p0, p1, shuffle);
      }
    }
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t n = p / s.M, m = p % s.M;
      const int64_t ch = shuffle ? shuffled_channel(m / c.Mg(), s.C, shuffle) : m / c.Mg();
      CT* yp = c.y + p * out_size;
      std::fill(yp, yp + out_size, c.bias ? c.bias[m] : CT(0));
      depthwise_plane(g, c.x + (n * s.C + ch) * in_size, w + m * kvol, yp);
    }
  };
  const int64_t planes = s.N * s.M;
  if (c.pool) {
    c.pool->parallel_for(planes, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, out_size * kvol)), body);
  } else {
    body(0, planes);
  }
}

// Returns whether the GEMM store applied bias and post (float); for double only the bias.
// Few output channels: packing the input into B panels costs about what the product does, since every
// packed column serves at most 64 rows. Where the GEMM reads B rows exactly (gemm_f32_strips_exact:
// AVX-512 masked loads) the strips run on the input itself. Measured on a Sapphire Rapids, 1 thread,
// best of 40 (SqueezeNet's shapes): 64->16 at 55x55 0.082 -> 0.058 ms, 128->16 0.167 -> 0.12-0.13,
// 16->64 0.074 -> 0.065; 256->32 at 27x27 0.100 -> 0.118 and 512->64 at 13x13 0.078 -> 0.085-0.096
// (hence the K limit).
bool pointwise_unpacked(ep::IsaTier isa, int64_t Mg, int64_t Cg, int64_t out_size) {
  return Mg <= kPointwiseUnpackedMaxRows && Cg >= 16 && Cg <= kPointwiseUnpackedMaxK && out_size >= 32 &&
         gemm_f32_strips_exact(isa);
}

// One group of a 1x1 conv on the strips: B(k, j) = x[k * in_size + j], column chunks over the threads.
void run_pointwise_unpacked(const ConvCall<float>& c, int64_t n, int64_t gi, const GemmEpilogue& ep,
                            ep::ThreadPool* pool) {
  const int64_t Mg = c.Mg(), Cg = c.Cg(), out_size = c.s.g.out_size();
  const int64_t* offs = c.plan.row_offsets.data();  // k * in_size
  // Chunks of whole 64-column tiles (the AVX-512 tile) whose B block (Cg rows) stays within ~96 KiB (L2), at
  // least 64 columns; with a pool, at least 4 a thread, so the pool balances them: SqueezeNet's 16->64
  // @55x55 took 2 chunks of ~1500 columns, one a thread, and the caller waited 26-28 us of its 58 for the
  // other when the vCPUs ran at different speeds. Zen 5, 2 threads, in-process paired runs: SqueezeNet
  // 0.982 and 0.994 of the time; Inception-v1 / v2, DenseNet-121 within 1%.
  int64_t chunk = std::max<int64_t>(64, (int64_t(24) << 10) / Cg / 64 * 64);
  if (pool && pool->num_threads() > 1) {
    const int64_t parts = 4 * static_cast<int64_t>(pool->num_threads());
    chunk = std::min(chunk, std::max<int64_t>(64, (out_size + 64 * parts - 1) / (64 * parts) * 64));
  }
  const int64_t chunks = (out_size + chunk - 1) / chunk;
  const float* xg = c.x_group(n, gi);
  float* yg = c.y_group(n, gi);
  const float* a = c.w.packed[gi].data.data();
  auto body = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t j0 = t * chunk, nc = std::min(chunk, out_size - j0);
      gemm_f32_strips(Mg, Cg, a, xg + j0, offs, nc, yg, out_size, j0, &ep, c.cfg.isa);
    }
  };
  if (pool && pool->num_threads() > 1 && chunks > 1 && Mg * Cg * out_size >= (int64_t(1) << 18)) {
    pool->parallel_for(chunks, 1, body);
  } else {
    body(0, chunks);
  }
}

template <typename CT>
bool run_pointwise(const ConvCall<CT>& c) {
  const ConvShape& s = c.s;
  const int64_t G = s.group, Cg = c.Cg(), Mg = c.Mg();
  const int64_t in_size = s.g.in_size(), out_size = s.g.out_size();
  if (out_size == 1 && !c.w.raw.empty()) {
    // One output position: y[n, m] = bias[m] + W[m, :] . x[n, group(m) channels], a small GEMV.
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t m = 0; m < s.M; ++m) {
        const CT* wr = c.w.raw.data() + m * Cg;
        const CT* xg = c.x_group(n, m / Mg);
        CT acc[4] = {CT(0), CT(0), CT(0), CT(0)};
        int64_t k = 0;
        for (; k + 4 <= Cg; k += 4)
          for (int j = 0; j < 4; ++j) acc[j] += wr[k + j] * xg[k + j];
        CT r = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        for (; k < Cg; ++k) r += wr[k] * xg[k];
        c.y[n * s.M + m] = (c.bias ? c.bias[m] : CT(0)) + r;
      }
    return false;
  }
  const GemmScratch gs_all = c.gemm_scratch();
  // gemm_pool null: a group inside a parallel_for chunk, whose GEMM runs on this thread's slot alone.
  auto one_group = [&](int64_t n, int64_t gi, ep::ThreadPool* gemm_pool) {
    CT* yg = c.y_group(n, gi);
    const GemmScratch gs = !gemm_pool && c.pool ? gs_all.only_slot(c.pool->slot()) : gs_all;
    if constexpr (std::is_same_v<CT, float>) {
      // Bias and post are applied in the GEMM's store (one pass over y instead of fill + accumulate).
      const GemmEpilogue ep = c.epilogue(n, gi);
      if (c.plan.pointwise_unpacked) {
        run_pointwise_unpacked(c, n, gi, ep, gemm_pool);
        return;
      }
      gemm_f32_packed_a(c.plan.gemm, 1.f, c.w.packed[gi].data.data(), c.x_group(n, gi), in_size, 0.f, yg, out_size,
                        gemm_pool, &ep, &gs);
      return;
    }
    fill_bias(yg, Mg, out_size, c.bias ? c.bias + gi * Mg : nullptr);
    gemm_packed_a<CT>(c.w.packed[gi], out_size, false, c.x_group(n, gi), in_size, CT(1), yg, out_size, gemm_pool,
                      c.cfg.isa, &gs);
  };
  // Grouped 1x1 convs (ShuffleNet) have groups too small for the GEMM to split: split the groups
  // (plan_conv decides, and plans the float GEMM for it).
  const bool by_group = c.plan.pointwise_by_group && c.pool;
  for (int64_t n = 0; n < s.N; ++n) {
    if (by_group) {
      c.pool->parallel_for(G, 1, [&](int64_t g0, int64_t g1) {
        for (int64_t gi = g0; gi < g1; ++gi) one_group(n, gi, nullptr);
      });
    } else {
      for (int64_t gi = 0; gi < G; ++gi) one_group(n, gi, c.pool);
    }
  }
  return std::is_same_v<CT, float>;
}

// kPointwise with FusedConv's pre-activation packed into the B panels (PreactPanels).
bool run_pointwise_preact(const ConvCall<float>& c) {
  const ConvShape& s = c.s;
  const int64_t in_size = s.g.in_size(), out_size = s.g.out_size();
  const GemmScratch gs = c.gemm_scratch();
  for (int64_t n = 0; n < s.N; ++n) {
    const PreactPanels panels{c.x + n * s.C * in_size, in_size, c.post->pre_scale, c.post->pre_shift,
                              gemm_vector_kernels(c.cfg.isa)};
    const GemmEpilogue ep = c.epilogue(n, 0);
    gemm_f32_packed_a_gen_b(c.plan.gemm, 1.f, c.w.packed[0].data.data(), panels, 0.f, c.y + n * s.M * out_size,
                            out_size, c.pool, &ep, &gs);
  }
  return true;
}

void run_padded_rows_gemm(const ConvCall<float>& c) {
  const ConvShape& s = c.s;
  const Geom3& g = s.g;
  const int64_t Mg = c.Mg(), K = c.Cg() * g.kvol(), out_size = g.out_size();
  const int64_t OH = g.out[1], OW = g.out[2];
  const ConvPlan& sp = c.plan;
  float* const xpad = static_cast<float*>(c.ws);
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      fill_padded_input(s, sp, xpad, c.x_group(n, gi), gemm_vector_kernels(c.cfg.isa), c.pool);
      float* yg = c.y_group(n, gi);
      const GemmEpilogue ep = c.epilogue(n, gi);
      const float* a = c.w.packed[gi].data.data();
      // One task per output row: all Mg channels of its OW outputs.
      auto body = [&](int64_t r0, int64_t r1) {
        for (int64_t oh = r0; oh < r1; ++oh) {
          gemm_f32_strips(Mg, K, a, xpad + oh * g.s[1] * sp.Wrow, sp.boff.data(), OW, yg, out_size,
                          oh * OW, &ep, c.cfg.isa, /*prefetch_c=*/true);
        }
      };
      // ~Mg * K * OW multiply-adds a row: keep chunks above ~100k of them.
      const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 17) / std::max<int64_t>(1, Mg * K * OW));
      if (c.pool && OH > grain) {
        c.pool->parallel_for(OH, grain, body);
      } else {
        body(0, OH);
      }
    }
  }
}

// y_g = W_g * im2col(x_g) with the im2col panels packed per task, the bias added in the GEMM's store.
// 2-D convs with stride_w 1 or 2 and a kernel wider than 1x1 pack from the padded copy.
void run_implicit_gemm(const ConvCall<float>& c) {
  const ConvShape& s = c.s;
  const Geom3& g = s.g;
  const int64_t out_size = g.out_size();
  const bool vec = gemm_vector_kernels(c.cfg.isa);
  const ConvPlan* sp = c.plan.padded ? &c.plan : nullptr;
  float* const xpad = static_cast<float*>(c.ws);
  const GemmScratch gs = c.gemm_scratch();
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      float* yg = c.y_group(n, gi);
      const GemmEpilogue ep = c.epilogue(n, gi);
      const float* a = c.w.packed[gi].data.data();
      if (sp) {
        fill_padded_input(s, *sp, xpad, c.x_group(n, gi), vec, c.pool);
        const PaddedIm2colPanels panels{g, *sp, xpad};
        gemm_f32_packed_a_gen_b(c.plan.gemm, 1.f, a, panels, 0.f, yg, out_size, c.pool, &ep, &gs);
        continue;
      }
      const Im2colPanels panels{g, c.x_group(n, gi), vec};
      gemm_f32_packed_a_gen_b(c.plan.gemm, 1.f, a, panels, 0.f, yg, out_size, c.pool, &ep, &gs);
    }
  }
}

// im2col + GEMM, over chunks of output rows so the column buffer stays bounded. Adds the bias only.
template <typename CT>
void run_im2col(const ConvCall<CT>& c) {
  const ConvShape& s = c.s;
  const Geom3& g = s.g;
  const int64_t Mg = c.Mg(), out_size = g.out_size();
  const int64_t OW = g.out[2];
  const int64_t total_rows = g.out[0] * g.out[1];
  const int64_t rows_per_chunk = c.plan.im2col_rows;
  CT* const col = static_cast<CT*>(c.ws);  // K x rows_per_chunk * OW
  const GemmScratch gs = c.gemm_scratch();
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < s.group; ++gi) {
      CT* yg = c.y_group(n, gi);
      fill_bias(yg, Mg, out_size, c.bias ? c.bias + gi * Mg : nullptr);
      for (int64_t r0 = 0; r0 < total_rows; r0 += rows_per_chunk) {
        const int64_t r1 = std::min(total_rows, r0 + rows_per_chunk);
        const int64_t cols = (r1 - r0) * OW;
        im2col(g, c.Cg(), c.x_group(n, gi), r0, r1, col, c.pool, gemm_vector_kernels(c.cfg.isa));
        if constexpr (std::is_same_v<CT, float>) {  // on the plan for a full chunk or the last one
          const GemmPlan& gp = cols == c.plan.gemm.N ? c.plan.gemm : c.plan.gemm_last;
          gemm_f32_packed_a(gp, 1.f, c.w.packed[gi].data.data(), col, cols, 1.f, yg + r0 * OW, out_size, c.pool,
                            nullptr, &gs);
        } else {
          gemm_packed_a<CT>(c.w.packed[gi], cols, false, col, cols, CT(1), yg + r0 * OW, out_size, c.pool,
                            c.cfg.isa, &gs);
        }
      }
    }
  }
}

// The direct definition with the weights read through `w_at(m, k)` (k over C/group x kernel).
template <typename CT, typename WeightAt>
void conv_direct(const ConvShape& s, const CT* x, WeightAt w_at, const CT* bias, CT* y) {
  const Geom3& g = s.g;
  const int64_t Cg = s.C / s.group, Mg = s.M / s.group;
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t m = 0; m < s.M; ++m) {
      const int64_t gi = m / Mg;
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow) {
            double acc = bias ? static_cast<double>(bias[m]) : 0.0;
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t kd = 0; kd < g.k[0]; ++kd)
                for (int64_t kh = 0; kh < g.k[1]; ++kh)
                  for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                    const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
                    const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
                    const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                    if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
                    const CT xv = x[(((n * s.C + gi * Cg + c) * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw];
                    const CT wv = w_at(m, ((c * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw);
                    acc += static_cast<double>(xv) * static_cast<double>(wv);
                  }
            y[(((n * s.M + m) * g.out[0] + od) * g.out[1] + oh) * g.out[2] + ow] = static_cast<CT>(acc);
          }
    }
}

// kReference on prepared weights: element (m, k) read back from the group's packed operand.
template <typename CT>
void run_reference(const ConvCall<CT>& c) {
  constexpr int64_t R = kGemmPanelRows<CT>;
  const int64_t Mg = c.Mg();
  auto w_at = [&](int64_t m, int64_t k) {
    const PackedA<CT>& pa = c.w.packed[m / Mg];
    const int64_t i = m % Mg, k0 = k / kGemmKC * kGemmKC, kc = std::min(kGemmKC, pa.K - k0);
    return pa.data[k0 * pa.m_padded + (i / R) * R * kc + (k - k0) * R + i % R];
  };
  conv_direct(c.s, c.x, w_at, c.bias, c.y);
}

}  // namespace

const char* conv_path_name(ConvPath p) {
  for (const ConvPathName& e : kConvPathNames) {
    if (e.path == p) return e.name;
  }
  return "?";
}

std::optional<ConvPath> parse_conv_path(std::string_view name) {
  for (const ConvPathName& e : kConvPathNames) {
    if (name == e.name) return e.path;
  }
  return std::nullopt;
}

ConvConfig conv_config(const ep::KernelInfo& info) {
  const ep::KernelOverrides& o = info.overrides();
  ConvConfig cfg(ConvPath::kAuto, info.isa());
  if (o.reference()) {
    cfg.path = ConvPath::kReference;
  } else if (auto p = parse_conv_path(o.get("conv.path"))) {
    cfg.path = *p;
  }
  const std::string_view skip = o.get("conv.skip");
  if (skip == "winograd") cfg.auto_skips |= path_bit(ConvPath::kWinograd);
  if (skip == "padded-rows-gemm") cfg.auto_skips |= path_bit(ConvPath::kPaddedRowsGemm);
  if (skip == "strided-direct") cfg.auto_skips |= path_bit(ConvPath::kStridedDirect);
  if (skip == "stem-lanes") cfg.skip_stem_lanes = true;
  if (skip == "small-spatial") {
    cfg.auto_skips |= path_bit(ConvPath::kSmallSpatialDirect) | path_bit(ConvPath::kSmallSpatialTransposed);
  }
  return cfg;
}

bool conv_path_applies(const ConvShape& s, ConvPath path, bool is_float, ep::IsaTier isa) {
  const bool depthwise = s.group > 1 && s.C == s.group;
  switch (path) {
    case ConvPath::kAuto:
    case ConvPath::kReference:
    case ConvPath::kIm2col:
      return true;
    case ConvPath::kImplicitGemm:
      return is_float;
    case ConvPath::kPaddedRowsGemm:
      return is_float && padded_rows_apply(s);
    case ConvPath::kPointwise:
      return is_unpadded_1x1(s.g);
    case ConvPath::kDepthwiseScalar:
      return depthwise;
    case ConvPath::kDepthwiseWindow:
      return is_float && depthwise && dwconv::applies(s.g);
    case ConvPath::kWinograd:
      return is_float && winograd_applies(s);
    case ConvPath::kSmallSpatialDirect:
    case ConvPath::kSmallSpatialTransposed:
      return is_float && small_spatial_applies(s, isa);
    case ConvPath::kStridedDirect:
      return is_float && strided_direct_applies(s, isa);
  }
  return false;
}

template <typename CT>
ConvPath conv_chosen_path(const ConvShape& s, const ConvWeights<CT>& w, const ConvConfig& cfg, const ConvPost* post,
                          int threads) {
  constexpr bool kFloat = std::is_same_v<CT, float>;
  if (cfg.path != ConvPath::kAuto && conv_path_applies(s, cfg.path, kFloat, cfg.isa) &&
      weights_serve(s, w, post, cfg.path)) {
    return cfg.path;
  }
  return auto_path(s, w, cfg, post, threads);
}

bool operator==(const ConvShape& a, const ConvShape& b) {
  const Geom3 &x = a.g, &y = b.g;
  if (a.N != b.N || a.C != b.C || a.M != b.M || a.group != b.group || x.nsp != y.nsp) return false;
  for (int i = 0; i < 3; ++i) {
    if (x.in[i] != y.in[i] || x.out[i] != y.out[i] || x.k[i] != y.k[i] || x.s[i] != y.s[i] || x.d[i] != y.d[i] ||
        x.pb[i] != y.pb[i] || x.pe[i] != y.pe[i]) {
      return false;
    }
  }
  return true;
}

namespace {

// The GEMM engine's packing scratch, `floats` per thread, as p's per-thread slots.
void add_gemm_slots(ConvPlan* p, size_t floats) {
  if (floats == 0) return;
  p->gemm_slot_floats = floats;
  p->slot_bytes = floats * sizeof(float);
}

// conv_plan for a call with `post` (null, or one whose activation the paths may not apply: then the
// small-spatial paths are not chosen, as weights_serve says).
template <typename CT>
ConvPlan plan_conv(const ConvShape& s, const ConvWeights<CT>& w, const ConvConfig& cfg, int threads, bool pre,
                   const ConvPost* post) {
  ConvPlan p;
  p.s = s;
  p.threads = threads;
  p.pre = pre;
  if (pre) {
    if constexpr (std::is_same_v<CT, float>) {
      // The pre-activated input goes into the 1x1 GEMM's B panels; nothing else takes it. Where the direct
      // small-spatial path's lane share wins (AVX-512, planes of 16q + 1 pixels: 7x7) it takes it too (a
      // pre-activated copy of x, then rows read in place). Its 2-thread rule is not used here: the copy's
      // cost there is unmeasured. Zen 5, DenseNet-121's 16 bottlenecks at 7x7 (per-node trace, 1 thread):
      // 1.34 -> 1.17 ms. Planes over 256 pixels keep the GEMM here: the direct rule for them was measured
      // without the copy. A forced kSmallSpatialDirect takes it wherever the path applies (tests).
      if (s.group == 1 && is_pointwise(s.g)) {
        const bool forced = cfg.path == ConvPath::kSmallSpatialDirect &&
                            conv_path_applies(s, ConvPath::kSmallSpatialDirect, true, cfg.isa);
        const bool chosen = cfg.path == ConvPath::kAuto && !cfg.skipped(ConvPath::kSmallSpatialDirect) &&
                            s.g.out_size() <= 256 && small_spatial_choice(s, 1, cfg.isa) == SmallSpatialChoice::kDirect;
        p.pre_direct = (forced || chosen) && weights_serve(s, w, post, ConvPath::kSmallSpatialDirect);
        if (p.pre_direct) p.workspace_bytes = small_spatial_direct_workspace_bytes(s, true);
        // The 1x1 GEMM on pre-activated panels (also when the direct path declines).
        p.gemm = gemm_f32_plan(s.M, s.g.out_size(), s.C, GemmA::kPacked, GemmB::kGenerated, false, false, threads,
                               cfg.isa);
        add_gemm_slots(&p, p.gemm.scratch_floats);
      }
    }
    return p;
  }
  p.path = conv_chosen_path(s, w, cfg, post, threads);
  const Geom3& g = s.g;
  const int64_t Cg = s.C / s.group;
  const int64_t Mg = s.M / s.group;
  constexpr bool f32 = std::is_same_v<CT, float>;
  switch (p.path) {
    case ConvPath::kDepthwiseWindow:
      if constexpr (std::is_same_v<CT, float>) {
        // The window engine's plan, and a slot of padded planes per pool thread in the workspace.
        p.dw_plan = dwconv::plan_f32(g, cfg.isa);
        p.dw_slot_floats = (dwconv::scratch_floats(p.dw_plan.get()) + 15) / 16 * 16;
        p.slot_bytes = static_cast<size_t>(p.dw_slot_floats) * sizeof(float);
      }
      break;
    case ConvPath::kPointwise:
      if (!is_pointwise(g)) {
        // The subsampled input (all images) at offset 0; the GEMM below sees in = out (see ConvPlan).
        p.subsample = true;
        p.sub = s;
        p.sub.g = subsampled_geometry(g);
        p.workspace_bytes = static_cast<size_t>(s.N * s.C * g.out_size()) * sizeof(CT);
      }
      p.row_offsets.resize(static_cast<size_t>(Cg));
      for (int64_t k = 0; k < Cg; ++k) p.row_offsets[k] = k * (p.subsample ? g.out_size() : g.in_size());
      // Grouped 1x1 convs (ShuffleNet) have groups too small for the GEMM to split: the groups split
      // over the threads instead, each group's GEMM single-threaded.
      p.pointwise_by_group = threads > 1 && s.group > 1 && Mg * Cg * g.out_size() < (int64_t{1} << 20);
      p.pointwise_unpacked = f32 && pointwise_unpacked(cfg.isa, Mg, Cg, g.out_size());
      if (f32 && !p.pointwise_unpacked) {
        p.gemm = gemm_f32_plan(Mg, g.out_size(), Cg, GemmA::kPacked, GemmB::kRaw, false, false,
                               p.pointwise_by_group ? 1 : threads, cfg.isa);
        add_gemm_slots(&p, p.gemm.scratch_floats);
      }
      break;
    case ConvPath::kIm2col: {
      // The column matrix in chunks of output rows, so it stays bounded.
      constexpr int64_t kColBudget = int64_t(1) << 22;  // elements
      const int64_t K = Cg * g.kvol(), OW = g.out[2], total_rows = g.out[0] * g.out[1];
      p.im2col_rows = std::min(total_rows, std::max<int64_t>(1, kColBudget / std::max<int64_t>(1, K * OW)));
      p.workspace_bytes = static_cast<size_t>(K * p.im2col_rows * OW) * sizeof(CT);
      if (f32 && total_rows > 0) {  // chunks of im2col_rows rows and the last one (the engine's blocks are not monotone in N)
        const int64_t last = total_rows - (total_rows - 1) / p.im2col_rows * p.im2col_rows;
        p.gemm = gemm_f32_plan(Mg, p.im2col_rows * OW, K, GemmA::kPacked, GemmB::kRaw, false, false, threads, cfg.isa);
        p.gemm_last = gemm_f32_plan(Mg, last * OW, K, GemmA::kPacked, GemmB::kRaw, false, false, threads, cfg.isa);
        add_gemm_slots(&p, std::max(p.gemm.scratch_floats, p.gemm_last.scratch_floats));
      }
      break;
    }
    case ConvPath::kWinograd:
      if constexpr (std::is_same_v<CT, float>) {
        p.wino = w.wino->acquire(w.packed[0], s.M, s.C);
        p.wino_plan = winograd_plan(s, threads, cfg.isa);
        p.slot_bytes = p.wino_plan.slot_bytes();
      }
      break;
    case ConvPath::kSmallSpatialTransposed:
      if constexpr (std::is_same_v<CT, float>) {
        p.small = w.small->acquire(w.packed);
        p.workspace_bytes = small_spatial_workspace_bytes(s, threads);
      }
      break;
    case ConvPath::kSmallSpatialDirect:
      if constexpr (std::is_same_v<CT, float>) p.workspace_bytes = small_spatial_direct_workspace_bytes(s, false);
      break;
    case ConvPath::kStridedDirect:
      if constexpr (std::is_same_v<CT, float>) {
        p.strided = w.strided->acquire(w.packed[0], s.C, g.k[1], g.k[2]);
        p.sd_plan = strided_direct_plan(s);
        p.workspace_bytes = strided_direct_workspace_bytes(s);
      }
      break;
    case ConvPath::kPaddedRowsGemm:
    case ConvPath::kImplicitGemm:
      // 2-D convs with stride_w 1 or 2 and a kernel wider than 1x1 pack from the padded copy.
      if (std::is_same_v<CT, float> && (p.path == ConvPath::kPaddedRowsGemm || (strided_2d(s) && g.kvol() > 1))) {
        plan_padded_input(s, &p);
        p.workspace_bytes = static_cast<size_t>(Cg * p.plane) * sizeof(float);
      }
      if (f32 && p.path == ConvPath::kImplicitGemm) {  // (kPaddedRowsGemm's strips pack nothing)
        p.gemm = gemm_f32_plan(Mg, g.out_size(), Cg * g.kvol(), GemmA::kPacked, GemmB::kGenerated, false, false,
                               threads, cfg.isa);
        add_gemm_slots(&p, p.gemm.scratch_floats);
      }
      break;
    default:
      break;
  }
  return p;
}

}  // namespace

template <typename CT>
ConvPlan conv_plan(const ConvShape& s, const ConvWeights<CT>& w, const ConvConfig& cfg, int threads, bool pre) {
  return plan_conv(s, w, cfg, threads, pre, nullptr);
}

bool conv_plan_fits(const ConvPlan& plan, const ConvShape& s, ep::ThreadPool* pool, const ConvPost* post) {
  const bool pre = post && post->pre_scale;
  return plan.s == s && plan.threads == (pool ? pool->num_threads() : 1) && plan.pre == pre &&
         (!post || conv_post_activation(post->act));
}

template <typename CT>
bool conv_forward_planned(const ConvPlan& plan, const CT* x, const ConvWeights<CT>& w, const CT* bias, CT* y,
                          ep::ThreadPool* pool, const ConvConfig& cfg, const ConvPost* post, void* workspace,
                          const ep::SlotMemory& slots) {
  const int threads = pool ? pool->num_threads() : 1;
  if (plan.slot_bytes > 0 && (!slots.base || slots.slots < threads || slots.stride < plan.slot_bytes)) {
    const ep::HeapSlots own(plan.slot_bytes, threads);
    return conv_forward_planned(plan, x, w, bias, y, pool, cfg, post, workspace, own.memory());
  }
  const ConvShape& s = plan.s;
  const ConvPath path = plan.path;
  if (post && post->input_shuffle > 1 &&
      (plan.pre || (path != ConvPath::kDepthwiseWindow && path != ConvPath::kDepthwiseScalar))) {
    // A path that reads X in its own channel order: the shuffled copy, then the call without the shuffle.
    const size_t plane_bytes = static_cast<size_t>(s.g.in_size()) * sizeof(CT);
    const ep::HeapScratch shuffled(static_cast<size_t>(s.N * s.C) * plane_bytes);
    channel_shuffle_copy(x, shuffled.get(), s.N, post->input_shuffle, s.C / post->input_shuffle, plane_bytes);
    ConvPost rest = *post;
    rest.input_shuffle = 0;
    return conv_forward_planned(plan, static_cast<const CT*>(shuffled.get()), w, bias, y, pool, cfg, &rest, workspace,
                                slots);
  }
  const ConvCall<CT> c{s, x, w, bias, y, pool, cfg, post, plan, workspace, slots};
  if constexpr (std::is_same_v<CT, float>) {
    if (post && post->pre_scale) {
      // (plan_conv says which path takes it; the caller must not use the output when this is false.)
      if (s.group != 1 || !is_pointwise(s.g) || !post->pre_shift) return false;
      if (plan.pre_direct && small_spatial_direct_conv(s, x, w.packed, bias, y, pool, post, workspace)) return true;
      return run_pointwise_preact(c);
    }
  }
  switch (path) {
    case ConvPath::kReference:
      run_reference(c);
      return false;
    case ConvPath::kDepthwiseWindow:
    case ConvPath::kDepthwiseScalar:
      run_depthwise(c, path == ConvPath::kDepthwiseWindow);
      return false;
    case ConvPath::kPointwise: {
      if (!plan.subsample) return run_pointwise(c);
      // Every kept input position copied once (the 1x1 kernel's im2col, image by image), then the
      // stride-1 GEMM on the copy.
      CT* xs = static_cast<CT*>(workspace);
      const int64_t rows = s.g.out[0] * s.g.out[1];
      for (int64_t n = 0; n < s.N; ++n) {
        im2col(s.g, s.C, x + n * s.C * s.g.in_size(), 0, rows, xs + n * s.C * s.g.out_size(), pool,
               gemm_vector_kernels(cfg.isa));
      }
      return run_pointwise(ConvCall<CT>{plan.sub, xs, w, bias, y, pool, cfg, post, plan, workspace, slots});
    }
    case ConvPath::kAuto:  // never chosen
    case ConvPath::kIm2col:
      run_im2col(c);
      return false;
    default:
      break;
  }
  if constexpr (std::is_same_v<CT, float>) {
    switch (path) {
      case ConvPath::kWinograd: {
        // The post (residual, activation) in the output transform, as the GEMM paths take it in their store.
        if (post && !winograd_post_applies(post->act)) {
          winograd_conv(plan.wino_plan, x, *plan.wino, bias, y, pool, slots);
          return false;
        }
        WinogradPost wp;
        if (post) {
          wp.residual = post->residual;
          wp.act = post->act;
          wp.act_a = post->act_a;
          wp.act_b = post->act_b;
        }
        winograd_conv(plan.wino_plan, x, *plan.wino, bias, y, pool, slots, post ? &wp : nullptr);
        return true;
      }
      case ConvPath::kSmallSpatialTransposed:
        small_spatial_conv(s, x, *plan.small, bias, y, pool, post, workspace, plan.threads);
        return true;
      case ConvPath::kSmallSpatialDirect: {
        if (small_spatial_direct_conv(s, x, w.packed, bias, y, pool, post, workspace)) return true;
        ConvConfig rest = cfg;  // it declined this shape (a build without it): the kAuto choice without it
        rest.path = ConvPath::kAuto;
        rest.auto_skips |= path_bit(ConvPath::kSmallSpatialDirect) | path_bit(ConvPath::kSmallSpatialTransposed);
        return conv_forward(s, x, w, bias, y, pool, rest, post);
      }
      case ConvPath::kPaddedRowsGemm:
        run_padded_rows_gemm(c);
        return true;
      case ConvPath::kStridedDirect:
        // Bias, residual and activation in the store, for the activations conv_post_activation names.
        if (post && !conv_post_activation(post->act)) {
          strided_direct_conv(plan.sd_plan, s, x, *plan.strided, bias, y, pool, nullptr, workspace);
          return false;
        }
        strided_direct_conv(plan.sd_plan, s, x, *plan.strided, bias, y, pool, post, workspace);
        return true;
      default:
        run_implicit_gemm(c);
        return true;
    }
  }
  return false;
}

template <typename CT>
bool conv_forward(const ConvShape& s, const CT* x, const ConvWeights<CT>& w, const CT* bias, CT* y,
                  ep::ThreadPool* pool, const ConvConfig& cfg, const ConvPost* post) {
  const bool pre = post && post->pre_scale;
  const ConvPost* plan_post = post && !conv_post_activation(post->act) ? post : nullptr;
  const ConvPlan plan = plan_conv(s, w, cfg, pool ? pool->num_threads() : 1, pre, plan_post);
  // Uninitialized: the paths write their scratch before reading it.
  const std::optional<ep::HeapScratch> ws =
      plan.workspace_bytes > 0 ? std::optional<ep::HeapScratch>(std::in_place, plan.workspace_bytes) : std::nullopt;
  return conv_forward_planned(plan, x, w, bias, y, pool, cfg, post, ws ? ws->get() : nullptr);
}

void channel_shuffle_copy(const void* x, void* y, int64_t outer, int64_t groups, int64_t per_group,
                          size_t plane_bytes) {
  const auto* src = static_cast<const unsigned char*>(x);
  auto* dst = static_cast<unsigned char*>(y);
  for (int64_t o = 0; o < outer; ++o) {
    const unsigned char* so = src + static_cast<size_t>(o * groups * per_group) * plane_bytes;
    unsigned char* d = dst + static_cast<size_t>(o * groups * per_group) * plane_bytes;
    for (int64_t k = 0; k < per_group; ++k)
      for (int64_t g = 0; g < groups; ++g, d += plane_bytes)
        std::memcpy(d, so + static_cast<size_t>(g * per_group + k) * plane_bytes, plane_bytes);
  }
}

template <typename CT>
void conv_naive(const ConvShape& s, const CT* x, const CT* w, const CT* bias, CT* y) {
  const int64_t K = s.C / s.group * s.g.kvol();
  conv_direct(s, x, [&](int64_t m, int64_t k) { return w[m * K + k]; }, bias, y);
}

template struct ConvWeights<float>;
template struct ConvWeights<double>;
template bool conv_forward<float>(const ConvShape&, const float*, const ConvWeights<float>&, const float*, float*,
                                  ep::ThreadPool*, const ConvConfig&, const ConvPost*);
template bool conv_forward<double>(const ConvShape&, const double*, const ConvWeights<double>&, const double*,
                                   double*, ep::ThreadPool*, const ConvConfig&, const ConvPost*);
template bool conv_forward_planned<float>(const ConvPlan&, const float*, const ConvWeights<float>&, const float*,
                                          float*, ep::ThreadPool*, const ConvConfig&, const ConvPost*, void*,
                                          const ep::SlotMemory&);
template bool conv_forward_planned<double>(const ConvPlan&, const double*, const ConvWeights<double>&,
                                           const double*, double*, ep::ThreadPool*, const ConvConfig&,
                                           const ConvPost*, void*, const ep::SlotMemory&);
template ConvPlan conv_plan<float>(const ConvShape&, const ConvWeights<float>&, const ConvConfig&, int, bool);
template ConvPlan conv_plan<double>(const ConvShape&, const ConvWeights<double>&, const ConvConfig&, int, bool);
template ConvPath conv_chosen_path<float>(const ConvShape&, const ConvWeights<float>&, const ConvConfig&,
                                          const ConvPost*, int);
template ConvPath conv_chosen_path<double>(const ConvShape&, const ConvWeights<double>&, const ConvConfig&,
                                           const ConvPost*, int);
template void conv_naive<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void conv_naive<double>(const ConvShape&, const double*, const double*, const double*, double*);

}  // namespace nxrt::ops
