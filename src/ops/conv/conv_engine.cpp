#include "ops/conv/conv_engine.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

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

// col[(c, kd, kh, kw), r*OW + ow] for output rows r in [r0, r1) (a row is one (od, oh) pair).
template <typename CT>
void im2col(const Geom3& g, int64_t channels, const CT* x, int64_t r0, int64_t r1, CT* col, ep::ThreadPool* pool) {
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
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = src[ow * sw + wbase];
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

// The packers' common frame: for each of the kc rows of a block, `gather(k, row)` writes that row's nc
// values contiguously into `row` (an L1-resident buffer of the calling thread, zero past nc up to the
// panel width), and the row is then dealt into the engine's 16-column panels (panel q at q * 16 * kc).
template <typename Gather>
void pack_rows_into_panels(int64_t kc, int64_t nc, float* dst, Gather gather) {
  constexpr int64_t NR = kGemmNR;
  const int64_t panels = (nc + NR - 1) / NR;
  thread_local std::vector<float> row_buf;
  if (row_buf.size() < static_cast<size_t>(panels * NR)) row_buf.resize(static_cast<size_t>(panels * NR));
  float* row = row_buf.data();
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
    thread_local std::vector<Run> runs;
    runs.clear();
    for (int64_t j = j0; j < j0 + nc;) {
      const int64_t r = j / OW, ow0 = j % OW, ow1 = std::min(OW, ow0 + (j0 + nc - j));
      runs.push_back({r / OH, r % OH, ow0, ow1, j - j0});
      j += ow1 - ow0;
    }
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

// Direct strips: a float 2-D conv with a short reduction (16 <= C/group * kh * kw <= 256, kernel > 1x1) and
// rows of >= 12 outputs, horizontal stride 1 or 2 (the stems of CNNs: 3 input channels, 3x3 or 7x7,
// stride 2). The group's input is copied once into zero-padded planes (stride 2: each padded row split
// into its even and odd columns), so the im2col row of tap (c, kh, kw) for 16 consecutive outputs of one
// output row is 16 contiguous floats at a fixed offset: gemm_f32_strips reads them in place, with no
// panel packing (which cost as much as the product when only 24-64 output channels share each column).
// Each task is one output row, walked panel by panel of 6 output channels so the stores stream along 6
// output rows (walking all channels of one 16-wide strip first stored down 64 planes at once and made
// SqueezeNet's stem 2x slower). Measured at one thread, in-model: the 7x7/2 3->64 stems of ResNet-50,
// DenseNet-121 and Inception-v2 2.84 -> 2.40-2.47 ms, ShuffleNet's 3x3/2 3->24 0.35 -> 0.28 ms,
// SqueezeNet's 3x3/2 3->64 0.66 -> 0.675 (even).
// NXRT_CONV_STRIPS=0 in the environment keeps these convs on the packed implicit GEMM (A/B measurements).
bool direct_strips_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("NXRT_CONV_STRIPS");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

// 2-D geometry (no depth axis) with horizontal stride 1 or 2: what plan_strips can lay out.
bool strided_2d(const ConvShape& s) {
  const Geom3& g = s.g;
  return g.in[0] == 1 && g.out[0] == 1 && g.k[0] == 1 && g.pb[0] == 0 && (g.s[2] == 1 || g.s[2] == 2);
}

bool direct_strips_apply(const ConvShape& s) {
  const Geom3& g = s.g;
  if (!strided_2d(s)) return false;
  const int64_t kvol = g.k[1] * g.k[2];
  const int64_t K = (s.C / s.group) * kvol;
  return kvol > 1 && K >= 16 && K <= kGemmKC && g.out[2] >= 12 && (g.s[2] == 1 || g.s[2] == 2);
}

struct StripPlan {
  int64_t Hp = 0, Wrow = 0;  // padded rows; floats per padded row (stride 2: both phases, 2 * half)
  int64_t half = 0;          // stride 2: floats per phase row
  int64_t plane = 0;         // floats per channel
  std::vector<int64_t> boff;  // per tap (c, kh, kw)
  std::vector<float> xpad;    // the group's padded input (fill_strip_input), Cg * plane floats
};

// The calling thread's plan, rebuilt for `s` (its buffers are reused, so a run allocates nothing once
// they have grown). Valid until the next call on this thread; the GEMM's workers read it through the
// returned reference (a thread_local named inside their lambdas would be their own, empty copy).
StripPlan& plan_strips(const ConvShape& s) {
  const Geom3& g = s.g;
  const int64_t Cg = s.C / s.group, KH = g.k[1], KW = g.k[2], dh = g.d[1], dw = g.d[2];
  const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2];
  const int64_t ow_round = (OW + 15) / 16 * 16;
  thread_local StripPlan p;
  p.Hp = std::max(g.pb[1] + IH, (OH - 1) * g.s[1] + (KH - 1) * dh + 1);
  if (g.s[2] == 1) {
    p.Wrow = std::max(g.pb[2] + IW, ow_round + (KW - 1) * dw);
  } else {
    p.half = std::max((g.pb[2] + IW + 1) / 2, ow_round + (KW - 1) * dw / 2);
    p.Wrow = 2 * p.half;
  }
  p.plane = p.Hp * p.Wrow;
  p.xpad.resize(static_cast<size_t>(Cg * p.plane));
  p.boff.resize(static_cast<size_t>(Cg * KH * KW));
  for (int64_t c = 0; c < Cg; ++c)
    for (int64_t kh = 0; kh < KH; ++kh)
      for (int64_t kw = 0; kw < KW; ++kw) {
        const int64_t col = kw * dw;
        const int64_t in_row = g.s[2] == 1 ? col : (col % 2) * p.half + col / 2;
        p.boff[(c * KH + kh) * KW + kw] = c * p.plane + kh * dh * p.Wrow + in_row;
      }
  return p;
}

// The group's input (Cg planes of IH x IW) into p.xpad, the zero-padded layout of `p`.
void fill_strip_input(const ConvShape& s, StripPlan& p, const float* x, bool avx2, ep::ThreadPool* pool) {
  float* const xp = p.xpad.data();
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

// Im2colPanels over the zero-padded (stride 2: phase-split) input copy of plan_strips: every run of
// outputs along a row is one contiguous copy at offset boff[k] (no bounds tests, zero fills or strided
// gathers), which halved the packing cost of ResNet-50's stride-2 3x3 convs.
struct PaddedIm2colPanels {
  const Geom3& g;
  const StripPlan& sp;  // its xpad filled for the current image and group

  void operator()(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) const {
    const int64_t OW = g.out[2];
    struct Run {
      int64_t src, len, off;
    };
    thread_local std::vector<Run> runs;
    runs.clear();
    for (int64_t j = j0; j < j0 + nc;) {
      const int64_t oh = j / OW, ow0 = j % OW, len = std::min(OW - ow0, j0 + nc - j);
      runs.push_back({oh * g.s[1] * sp.Wrow + ow0, len, j - j0});
      j += len;
    }
    pack_rows_into_panels(kc, nc, dst, [&](int64_t k, float* row) {
      const float* base = sp.xpad.data() + sp.boff[p0 + k];
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
void ConvWeights<CT>::prepare(const Dims& w_shape, int64_t group_count, std::vector<CT> w, bool winograd) {
  shape = w_shape;
  group = group_count;
  raw = std::move(w);
  const int64_t M = w_shape[0];
  const int64_t Mg = M / group;
  const int64_t K = shape_numel(w_shape) / std::max<int64_t>(1, M);
  packed.assign(static_cast<size_t>(group), {});
  for (int64_t gi = 0; gi < group; ++gi) {
    convgemm::pack_a<CT>(false, Mg, K, raw.data() + gi * Mg * K, K, CT(1), &packed[gi]);
  }
  wino.reset();
  small.reset();
  if constexpr (std::is_same_v<CT, float>) {
    if (winograd && winograd_weights_apply(w_shape, group)) wino = std::make_shared<WinogradCache>();
    if (small_spatial_weights_apply(w_shape, group)) small = std::make_shared<SmallSpatialCache>();
  }
  // The depthwise path (one input channel per group) reads the raw weights, and so does the pointwise
  // path for a single output position (squeeze-excitation FCs written as 1x1 convs), when small.
  const bool small_pointwise = w_shape.size() >= 2 && K == w_shape[1] && M * K <= (int64_t{1} << 16);
  if ((w_shape.size() < 2 || w_shape[1] != 1) && !small_pointwise) {
    raw.clear();
    raw.shrink_to_fit();
  }
}

bool conv_path_applies(const ConvShape& s, ConvPath path) {
  const Geom3& g = s.g;
  switch (path) {
    case ConvPath::kAuto:
    case ConvPath::kIm2col:
      return true;
    case ConvPath::kPointwise:
      for (int i = 0; i < 3; ++i) {
        if (g.k[i] != 1 || g.s[i] != 1 || g.pb[i] != 0 || g.pe[i] != 0) return false;
      }
      return true;
    case ConvPath::kDepthwise:
      return s.group > 1 && s.C == s.group;
    case ConvPath::kWinograd:
      return winograd_applies(s);
  }
  return false;
}

template <typename CT>
bool conv_forward(const ConvShape& s, const CT* x, const ConvWeights<CT>& w, const CT* bias, CT* y,
                  ep::ThreadPool* pool, ConvPath path, const ConvPost* post) {
  // The GEMM store's epilogue for group gi of image n: bias, then post (float).
  auto gemm_epilogue = [&](int64_t n, int64_t gi, const CT* b) {
    GemmEpilogue ep;
    if constexpr (std::is_same_v<CT, float>) {
      if (b) {
        ep.bias_kind = GemmBias::kPerRow;
        ep.bias = b + gi * (s.M / s.group);
      }
      if (post) {
        if (post->residual) {
          ep.residual = post->residual + (n * s.M + gi * (s.M / s.group)) * s.g.out_size();
          ep.ldr = s.g.out_size();
        }
        ep.act = post->act;
        ep.clip_min = post->clip_min;
        ep.clip_max = post->clip_max;
      }
    }
    return ep;
  };
  const Geom3& g = s.g;
  const int64_t G = s.group;
  const int64_t Cg = s.C / G, Mg = s.M / G;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), kvol = g.kvol();
  if constexpr (std::is_same_v<CT, float>) {
    if (post && post->pre_scale) {
      // The pre-activated input goes into the 1x1 GEMM's B panels (PreactPanels); nothing else takes it.
      if (G != 1 || !conv_path_applies(s, ConvPath::kPointwise) || !post->pre_shift) return false;
      for (int64_t n = 0; n < s.N; ++n) {
        const PreactPanels panels{x + n * s.C * in_size, in_size, post->pre_scale, post->pre_shift,
                                  gemm_using_avx2()};
        const GemmEpilogue ep = gemm_epilogue(n, 0, bias);
        gemm_f32_packed_a_gen_b(s.M, out_size, s.C, 1.f, w.packed[0].data.data(), panels, 0.f,
                                y + n * s.M * out_size, out_size, pool, &ep);
      }
      return true;
    }
    // Winograd when the weights were transformed for this shape and, under kAuto, the shape is big
    // enough to win (winograd_preferred).
    if ((path == ConvPath::kWinograd || (path == ConvPath::kAuto && winograd_preferred(s))) && w.wino &&
        w.shape.size() == 4 && w.shape[0] == s.M && w.shape[1] == s.C && winograd_applies(s)) {
      winograd_conv(s, x, w.wino->get(w.packed[0], s.M, s.C), bias, y, pool);
      return false;
    }
    if (path == ConvPath::kAuto && small_spatial_try(s, x, w.small.get(), w.packed, bias, y, pool, post)) return true;
  }
  if (path == ConvPath::kWinograd) path = ConvPath::kIm2col;
  if (path == ConvPath::kAuto) {
    if (conv_path_applies(s, ConvPath::kPointwise)) {
      path = ConvPath::kPointwise;
    } else if (conv_path_applies(s, ConvPath::kDepthwise)) {
      path = ConvPath::kDepthwise;
    } else {
      path = ConvPath::kIm2col;
    }
  } else if (!conv_path_applies(s, path)) {
    path = ConvPath::kIm2col;
  }

  if (path == ConvPath::kDepthwise) {
    const bool vec = std::is_same_v<CT, float> && dwconv::applies(g);
    auto body = [&](int64_t p0, int64_t p1) {
      if constexpr (std::is_same_v<CT, float>) {
        // A chunk of planes on the window engine (the next plane's input copied in while one computes).
        if (vec) return dwconv::planes_f32(g, s.C, s.M, x, w.raw.data(), bias, y, p0, p1);
      }
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t n = p / s.M, m = p % s.M;
        const int64_t c = m / Mg;
        CT* yp = y + p * out_size;
        if constexpr (std::is_same_v<CT, float>) {
          if (vec) {
            dwconv::plane_f32(g, x + (n * s.C + c) * in_size, w.raw.data() + m * kvol, bias ? bias[m] : 0.f, yp);
            continue;
          }
        }
        std::fill(yp, yp + out_size, bias ? bias[m] : CT(0));
        depthwise_plane(g, x + (n * s.C + c) * in_size, w.raw.data() + m * kvol, yp);
      }
    };
    const int64_t planes = s.N * s.M;
    if (pool) {
      pool->parallel_for(planes, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, out_size * kvol)), body);
    } else {
      body(0, planes);
    }
    return false;
  }

  if (path == ConvPath::kPointwise && out_size == 1 && !w.raw.empty()) {
    // One output position: y[n, m] = bias[m] + W[m, :] . x[n, group(m) channels], a small GEMV.
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t m = 0; m < s.M; ++m) {
        const CT* wr = w.raw.data() + m * Cg;
        const CT* xg = x + (n * s.C + (m / Mg) * Cg) * in_size;
        CT acc[4] = {CT(0), CT(0), CT(0), CT(0)};
        int64_t k = 0;
        for (; k + 4 <= Cg; k += 4)
          for (int j = 0; j < 4; ++j) acc[j] += wr[k + j] * xg[k + j];
        CT r = (acc[0] + acc[1]) + (acc[2] + acc[3]);
        for (; k < Cg; ++k) r += wr[k] * xg[k];
        y[n * s.M + m] = (bias ? bias[m] : CT(0)) + r;
      }
    return false;
  }

  if (path == ConvPath::kPointwise) {
    auto one_group = [&](int64_t n, int64_t gi, ep::ThreadPool* gemm_pool) {
      CT* yg = y + (n * s.M + gi * Mg) * out_size;
      const CT* xg = x + (n * s.C + gi * Cg) * in_size;
      if constexpr (std::is_same_v<CT, float>) {
        // Bias and post are applied in the GEMM's store (one pass over y instead of fill + accumulate).
        const GemmEpilogue ep = gemm_epilogue(n, gi, bias);
        gemm_f32_packed_a(Mg, out_size, Cg, 1.f, w.packed[gi].data.data(), false, xg, in_size, 0.f, yg, out_size,
                          gemm_pool, &ep);
        return;
      }
      fill_bias(yg, Mg, out_size, bias ? bias + gi * Mg : nullptr);
      convgemm::gemm_packed<CT>(w.packed[gi], out_size, false, xg, in_size, yg, out_size, true, gemm_pool);
    };
    // Grouped 1x1 convs (ShuffleNet) have groups too small for the GEMM to split: split the groups.
    const bool by_group = pool && pool->num_threads() > 1 && G > 1 && Mg * Cg * out_size < (int64_t{1} << 20);
    for (int64_t n = 0; n < s.N; ++n) {
      if (by_group) {
        pool->parallel_for(G, 1, [&](int64_t g0, int64_t g1) {
          for (int64_t gi = g0; gi < g1; ++gi) one_group(n, gi, nullptr);
        });
      } else {
        for (int64_t gi = 0; gi < G; ++gi) one_group(n, gi, pool);
      }
    }
    return std::is_same_v<CT, float>;
  }

  const int64_t K = Cg * kvol;
  if constexpr (std::is_same_v<CT, float>) {
    if (direct_strips_enabled() && direct_strips_apply(s)) {
      StripPlan& sp = plan_strips(s);
      const int64_t OH = g.out[1], OW = g.out[2];
      for (int64_t n = 0; n < s.N; ++n) {
        for (int64_t gi = 0; gi < G; ++gi) {
          fill_strip_input(s, sp, x + (n * s.C + gi * Cg) * in_size, gemm_using_avx2(), pool);
          float* yg = y + (n * s.M + gi * Mg) * out_size;
          const GemmEpilogue ep = gemm_epilogue(n, gi, bias);
          const float* a = w.packed[gi].data.data();
          // One task per output row: all Mg channels of its OW outputs.
          auto body = [&](int64_t r0, int64_t r1) {
            for (int64_t oh = r0; oh < r1; ++oh) {
              gemm_f32_strips(Mg, K, a, sp.xpad.data() + oh * g.s[1] * sp.Wrow, sp.boff.data(), OW, yg,
                              out_size, oh * OW, &ep);
            }
          };
          // ~Mg * K * OW multiply-adds a row: keep chunks above ~100k of them.
          const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 17) / std::max<int64_t>(1, Mg * K * OW));
          if (pool && OH > grain) {
            pool->parallel_for(OH, grain, body);
          } else {
            body(0, OH);
          }
        }
      }
      return true;
    }
    // Implicit GEMM: y_g = W_g * im2col(x_g) with the im2col panels packed per task (Im2colPanels), the
    // bias added in the GEMM's store.
    // 2-D convs with stride_w 1 or 2 and a kernel wider than 1x1 pack from the padded copy.
    StripPlan* sp = strided_2d(s) && kvol > 1 ? &plan_strips(s) : nullptr;
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t gi = 0; gi < G; ++gi) {
        float* yg = y + (n * s.M + gi * Mg) * out_size;
        const GemmEpilogue ep = gemm_epilogue(n, gi, bias);
        if (sp) {
          fill_strip_input(s, *sp, x + (n * s.C + gi * Cg) * in_size, gemm_using_avx2(), pool);
          const PaddedIm2colPanels panels{g, *sp};
          gemm_f32_packed_a_gen_b(Mg, out_size, K, 1.f, w.packed[gi].data.data(), panels, 0.f, yg, out_size, pool,
                                  &ep);
          continue;
        }
        const Im2colPanels panels{g, x + (n * s.C + gi * Cg) * in_size, gemm_using_avx2()};
        gemm_f32_packed_a_gen_b(Mg, out_size, K, 1.f, w.packed[gi].data.data(), panels, 0.f, yg, out_size, pool,
                                &ep);
      }
    }
    return true;
  }
  // im2col + GEMM, over chunks of output rows so the column buffer stays bounded.
  const int64_t OW = g.out[2];
  const int64_t total_rows = g.out[0] * g.out[1];
  constexpr int64_t kColBudget = int64_t(1) << 22;  // elements
  int64_t rows_per_chunk = std::max<int64_t>(1, kColBudget / std::max<int64_t>(1, K * OW));
  rows_per_chunk = std::min(rows_per_chunk, total_rows);
  std::vector<CT> col(static_cast<size_t>(K * rows_per_chunk * OW));
  for (int64_t n = 0; n < s.N; ++n) {
    for (int64_t gi = 0; gi < G; ++gi) {
      CT* yg = y + (n * s.M + gi * Mg) * out_size;
      fill_bias(yg, Mg, out_size, bias ? bias + gi * Mg : nullptr);
      const CT* xg = x + (n * s.C + gi * Cg) * in_size;
      for (int64_t r0 = 0; r0 < total_rows; r0 += rows_per_chunk) {
        const int64_t r1 = std::min(total_rows, r0 + rows_per_chunk);
        const int64_t cols = (r1 - r0) * OW;
        im2col(g, Cg, xg, r0, r1, col.data(), pool);
        convgemm::gemm_packed<CT>(w.packed[gi], cols, false, col.data(), cols, yg + r0 * OW, out_size, true, pool);
      }
    }
  }
  return false;
}

template <typename CT>
void conv_naive(const ConvShape& s, const CT* x, const CT* w, const CT* bias, CT* y) {
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
                    const CT wv = w[(((m * Cg + c) * g.k[0] + kd) * g.k[1] + kh) * g.k[2] + kw];
                    acc += static_cast<double>(xv) * static_cast<double>(wv);
                  }
            y[(((n * s.M + m) * g.out[0] + od) * g.out[1] + oh) * g.out[2] + ow] = static_cast<CT>(acc);
          }
    }
}

template struct ConvWeights<float>;
template struct ConvWeights<double>;
template bool conv_forward<float>(const ConvShape&, const float*, const ConvWeights<float>&, const float*, float*,
                                  ep::ThreadPool*, ConvPath, const ConvPost*);
template bool conv_forward<double>(const ConvShape&, const double*, const ConvWeights<double>&, const double*,
                                   double*, ep::ThreadPool*, ConvPath, const ConvPost*);
template void conv_naive<float>(const ConvShape&, const float*, const float*, const float*, float*);
template void conv_naive<double>(const ConvShape&, const double*, const double*, const double*, double*);

}  // namespace nxrt::ops
