#include "ops/conv/strided_direct.h"

#include <algorithm>
#include <cstring>

#include "ep/thread_pool.h"
#include "ops/conv/conv_engine.h"
#include "ops/conv/transpose16.h"
#include "ops/gemm/activation.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_SD_X86 1
#define NXRT_SD_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
#endif

namespace nxrt::ops {

namespace {

constexpr int kLanes = 16;  // output channels a block
constexpr int kMaxTilePixels = 14;  // 2 blocks x 14 pixels: 28 accumulators, 2 weights, 1 broadcast

// The padded input planes of one image: the rows and columns the windows read, zeros where they read
// padding. Along an axis whose kernel is 1 (ResNet's 1x1/2), only every stride-th input row / column is
// read, so only those are kept (sub = the stride) and the tiles step by 1 there.
struct PaddedGeom {
  int64_t Hp = 0, Wp = 0;
  int64_t sub_h = 1, sub_w = 1;  // padded row r holds input row r * sub_h - pad_top (columns alike)
  int64_t sh = 1, sw = 1;        // the tiles' strides in padded rows / columns
};
PaddedGeom padded_geom(const ConvShape& s) {
  const Geom3& g = s.g;
  PaddedGeom p;
  p.sub_h = g.k[1] == 1 ? g.s[1] : 1;
  p.sub_w = g.k[2] == 1 ? g.s[2] : 1;
  p.sh = g.s[1] / p.sub_h;
  p.sw = g.s[2] / p.sub_w;
  p.Hp = (g.out[1] - 1) * p.sh + (g.k[1] - 1) * g.d[1] + 1;
  p.Wp = (g.out[2] - 1) * p.sw + (g.k[2] - 1) * g.d[2] + 1;
  return p;
}

// Input channels a block of the padded input holds: 16, or all of them when there are fewer (a stem's
// 3 color planes: [Hp][Wp][3], no lanes of zeros to multiply).
int64_t input_block(int64_t C) { return C < kLanes ? C : kLanes; }

// The packed GEMM weights (M x K, K = C * kH * kW in (c, kh, kw) order) repacked as [blocks][k'][16] with
// k' = ((c / cb * kH + kh) * kW + kw) * cb + c % cb over C rounded up to cb (cb = input_block(C); zeros
// past C and M): the order the tiles walk the channel-blocked input in.
std::shared_ptr<StridedDirectWeights> make_weights(const PackedA<float>& a, int64_t C, int64_t KH, int64_t KW) {
  auto w = std::make_shared<StridedDirectWeights>();
  const int64_t cb = input_block(C), cpad = (C + cb - 1) / cb * cb;
  w->M = a.M;
  w->K = cpad * KH * KW;
  w->C = C;
  w->cb = cb;
  w->blocks = (a.M + kLanes - 1) / kLanes;
  w->w.assign(static_cast<size_t>(w->blocks * w->K * kLanes), 0.f);
  // PackedA: per K block of kGemmKC starting at k0 (offset k0 * m_padded), panels of kc x R (R =
  // kGemmMR rows; panel p at p * R * kc, element (r, k) at k * R + r).
  constexpr int64_t R = kGemmMR;
  for (int64_t k = 0; k < a.K; ++k) {
    const int64_t k0 = k / kGemmKC * kGemmKC, kc = std::min<int64_t>(kGemmKC, a.K - k0);
    const int64_t c = k / (KH * KW), kh = k / KW % KH, kw = k % KW;
    const int64_t kd = ((c / cb * KH + kh) * KW + kw) * cb + c % cb;
    for (int64_t m = 0; m < a.M; ++m) {
      const float v = a.data[static_cast<size_t>(k0 * a.m_padded + (m / R) * R * kc + (k - k0) * R + m % R)];
      w->w[static_cast<size_t>(((m / kLanes) * w->K + kd) * kLanes + m % kLanes)] = v;
    }
  }
  return w;
}

#ifdef NXRT_SD_X86
// One image's input into channel-blocked zero-padded planes xp[C / 16][Hp][Wp][16] (channels past C
// zero): each pixel's 16 channels of a block in one cache line, so a tile's broadcasts over a block's
// channels reuse the same lines (one a pixel). 16 channels x 16 columns at a time, transposed in registers (every
// sub_w-th input column: stride 2 takes the even lanes of two loads).
// Rows [i0, i1) of the planes taken as one sequence over (block, padded row).
NXRT_SD_AVX512 void pad_blocks(const ConvShape& s, const PaddedGeom& pg, const float* x, float* xp, int64_t i0,
                               int64_t i1) {
  const Geom3& g = s.g;
  const int64_t IH = g.in[1], IW = g.in[2], pt = g.pb[1], pl = g.pb[2], plane = IH * IW;
  // Padded columns [q0, q1) hold input columns q * sub_w - pl inside [0, IW).
  const int64_t q0 = std::min(pg.Wp, (pl + pg.sub_w - 1) / pg.sub_w);
  const int64_t q1 = std::max(q0, std::min(pg.Wp, (IW - 1 + pl) / pg.sub_w + 1));
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const int64_t width = input_block(s.C);  // floats a pixel of a block
  const __mmask16 wm = static_cast<__mmask16>((1u << width) - 1u);
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t cb = i / pg.Hp, r = i % pg.Hp;
    const int64_t nc = std::min<int64_t>(width, s.C - cb * width);
    const float* src = x + cb * width * plane;
    float* row = xp + (cb * pg.Hp + r) * pg.Wp * width;
    const int64_t ir = r * pg.sub_h - pt;
    if (ir < 0 || ir >= IH) {
      std::memset(row, 0, static_cast<size_t>(pg.Wp * width) * sizeof(float));
      continue;
    }
    std::memset(row, 0, static_cast<size_t>(q0 * width) * sizeof(float));
    std::memset(row + q1 * width, 0, static_cast<size_t>((pg.Wp - q1) * width) * sizeof(float));
    for (int64_t qb = q0; qb < q1; qb += kLanes) {
      const int64_t nq = std::min<int64_t>(kLanes, q1 - qb);
      const int64_t iw0 = qb * pg.sub_w - pl;  // input column of padded column qb
      __m512 v[kLanes];
      for (int64_t c = 0; c < kLanes; ++c) {
        if (c >= nc) {
          v[c] = _mm512_setzero_ps();
          continue;
        }
        const float* sr = src + c * plane + ir * IW + iw0;
        if (pg.sub_w == 1) {
          v[c] = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << nq) - 1u), sr);
        } else if (pg.sub_w == 2) {
          const int64_t avail = std::min<int64_t>(2 * kLanes, IW - iw0);  // input columns from iw0
          const auto mask = [](int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); };
          const __m512 lo = _mm512_maskz_loadu_ps(mask(std::min<int64_t>(16, avail)), sr);
          const __m512 hi = avail > 16 ? _mm512_maskz_loadu_ps(mask(avail - 16), sr + 16) : _mm512_setzero_ps();
          v[c] = _mm512_permutex2var_ps(lo, even, hi);
        } else {
          alignas(64) float tmp[kLanes] = {};
          for (int64_t q = 0; q < nq; ++q) tmp[q] = sr[q * pg.sub_w];
          v[c] = _mm512_load_ps(tmp);
        }
      }
      transpose16x16_avx512(v);
      if (width == kLanes) {
        for (int64_t q = 0; q < nq; ++q) _mm512_storeu_ps(row + (qb + q) * kLanes, v[q]);
      } else {
        for (int64_t q = 0; q < nq; ++q) _mm512_mask_storeu_ps(row + (qb + q) * width, wm, v[q]);
      }
    }
  }
}
#endif

struct TileArgs {
  const float* xp;    // channel-blocked padded planes
  int64_t plane;      // Hp * Wp * cb: one block of channels
  int64_t cb;         // channels a block (16, or C when C < 16)
  int64_t Wp;
  int64_t cblocks, KH, KW, dh, dw, sw;
  const float* w[3];  // [K][16] of each of the tile's blocks
  int64_t row0;       // padded row of tap (0, 0) for the tile's output row
  int64_t col0;       // padded column of tap (0, 0) for the tile's first pixel
};

#ifdef NXRT_SD_X86
// acc[j][p] += w_j(c, kh, kw) * x(c, row0 + kh * dh, col0 + p * sw + kw * dw) over all c, kh, kw; out[j][p][16].
// kFull: blocks of 16 channels (the loop over a block's channels unrolled); else blocks of t.cb < 16.
template <int P, int MB, bool kFull>
NXRT_SD_AVX512 void tile_avx512(const TileArgs& t, float* out) {
  static_assert(MB * P <= 28, "accumulators past the register file");
  __m512 acc[MB][P];
  for (int j = 0; j < MB; ++j)
    for (int p = 0; p < P; ++p) acc[j][p] = _mm512_setzero_ps();
  const float* wb[MB];
  for (int j = 0; j < MB; ++j) wb[j] = t.w[j];
  const int64_t width = kFull ? kLanes : t.cb;
  const int64_t pstep = t.sw * width;  // floats from one pixel of the tile to the next
  for (int64_t cb = 0; cb < t.cblocks; ++cb) {
    const float* xc = t.xp + cb * t.plane + (t.row0 * t.Wp + t.col0) * width;
    for (int64_t kh = 0; kh < t.KH; ++kh) {
      const float* xr = xc + kh * t.dh * t.Wp * width;
      for (int64_t kw = 0; kw < t.KW; ++kw) {
        const float* xk = xr + kw * t.dw * width;
        for (int64_t ci = 0; ci < width; ++ci) {
          __m512 a[MB];
          for (int j = 0; j < MB; ++j) {
            a[j] = _mm512_loadu_ps(wb[j]);
            wb[j] += kLanes;
          }
          for (int p = 0; p < P; ++p) {
            const __m512 v = _mm512_set1_ps(xk[p * pstep + ci]);
            for (int j = 0; j < MB; ++j) acc[j][p] = _mm512_fmadd_ps(a[j], v, acc[j][p]);
          }
        }
      }
    }
  }
  for (int j = 0; j < MB; ++j)
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(out + (j * kMaxTilePixels + p) * kLanes, acc[j][p]);
}

template <int MB, bool kFull>
void tile_pixels(int p, const TileArgs& t, float* out) {
  switch (p) {
    case 1: return tile_avx512<1, MB, kFull>(t, out);
    case 2: return tile_avx512<2, MB, kFull>(t, out);
    case 3: return tile_avx512<3, MB, kFull>(t, out);
    case 4: return tile_avx512<4, MB, kFull>(t, out);
    case 5: return tile_avx512<5, MB, kFull>(t, out);
    case 6: return tile_avx512<6, MB, kFull>(t, out);
    case 7: return tile_avx512<7, MB, kFull>(t, out);
    case 8: return tile_avx512<8, MB, kFull>(t, out);
    case 9: return tile_avx512<9, MB, kFull>(t, out);
    case 10:
      if constexpr (MB <= 2) return tile_avx512<10, MB, kFull>(t, out);
      break;
    case 11:
      if constexpr (MB <= 2) return tile_avx512<11, MB, kFull>(t, out);
      break;
    case 12:
      if constexpr (MB <= 2) return tile_avx512<12, MB, kFull>(t, out);
      break;
    case 13:
      if constexpr (MB <= 2) return tile_avx512<13, MB, kFull>(t, out);
      break;
    default:
      if constexpr (MB <= 2) return tile_avx512<14, MB, kFull>(t, out);
      break;
  }
}
// A tile's accumulators out[j][p][16] (block j, pixel p) into Y: each block's 16 x p values transposed so
// each output channel's p pixels are one vector, then (v + bias) + residual and the activation, as
// ConvPost orders them (the activations conv_post_activation names), stored masked.
NXRT_SD_AVX512 void store_tile(const float* out, int mb, int p, int64_t b0, int64_t M, const float* bias, float* y,
                               const float* res, int64_t plane, Activation act, float act_a, float act_b) {
  const __mmask16 pm = static_cast<__mmask16>((1u << p) - 1u);
  const __m512 zero = _mm512_setzero_ps(), va = _mm512_set1_ps(act_a), vb = _mm512_set1_ps(act_b);
  for (int j = 0; j < mb; ++j) {
    __m512 r[kLanes];
    for (int q = 0; q < kLanes; ++q) r[q] = q < p ? _mm512_load_ps(out + (j * kMaxTilePixels + q) * kLanes) : zero;
    transpose16x16_avx512(r);
    const int64_t mbase = (b0 + j) * kLanes;
    const int lanes = static_cast<int>(std::min<int64_t>(kLanes, M - mbase));
    for (int l = 0; l < lanes; ++l) {
      const int64_t m = mbase + l;
      __m512 v = r[l];
      if (bias) v = _mm512_add_ps(v, _mm512_set1_ps(bias[m]));
      if (res) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(pm, res + m * plane));
      switch (act) {
        case Activation::kRelu:
          v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, zero);
          break;
        case Activation::kClip: {  // v < a ? a : (v > b ? b : v), both tests on v
          const __mmask16 below = _mm512_cmp_ps_mask(v, va, _CMP_LT_OQ);
          v = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, vb, _CMP_GT_OQ), v, vb);
          v = _mm512_mask_blend_ps(below, v, va);
          break;
        }
        case Activation::kLeakyRelu: {
          const __m512 hi = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, zero, _CMP_LT_OQ), v, zero);
          const __m512 lo = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(zero, v, _CMP_LT_OQ), v, zero);
          v = _mm512_add_ps(hi, _mm512_mul_ps(va, lo));
          break;
        }
        default:
          break;
      }
      _mm512_mask_storeu_ps(y + m * plane, pm, v);
    }
  }
}
#endif

}  // namespace

std::shared_ptr<const StridedDirectWeights> StridedDirectCache::acquire(const PackedA<float>& packed, int64_t C,
                                                                        int64_t KH, int64_t KW) const {
  return lazy_.acquire([&] { return make_weights(packed, C, KH, KW); });
}

bool strided_direct_applies(const ConvShape& s, ep::IsaTier isa) {
#ifdef NXRT_SD_X86
  if (isa < ep::IsaTier::kAvx512 || ep::cpu_isa_tier() < ep::IsaTier::kAvx512) return false;
  const Geom3& g = s.g;
  if (g.nsp != 2 || s.group != 1 || s.N < 1 || s.C < 1 || s.M < 1 || g.out_size() <= 0) return false;
  for (int i = 1; i < 3; ++i) {
    if (g.s[i] < 1 || g.pb[i] < 0 || g.pe[i] < 0 || g.d[i] < 1 || g.k[i] < 1) return false;
  }
  return true;
#else
  (void)s;
  (void)isa;
  return false;
#endif
}

bool strided_direct_preferred(const ConvShape& s, ep::IsaTier isa, int threads) {
  if (!strided_direct_applies(s, isa) || s.M < 16 || s.g.kvol() <= 1) return false;
  if (s.g.s[1] == 1 && s.g.s[2] == 1) {
    // Stride 1: 3x3 convs on planes of 8x8 or less at 2+ threads, where the small-spatial transposed
    // path (the one that takes them otherwise) has every thread pad and pack its own im2col copy of the
    // whole input and the group-major order here has the threads split the output channels of one
    // channel-blocked copy. Zen 5, in-model per-node trace, 2 threads: ResNet-50's 512->512 @7x7
    // 0.72-1.02 -> 0.72-0.76 ms; in-process paired runs of the models, 2 threads (with the group-major
    // order below): ResNet-50 0.979, Inception-v2 0.974, DenseNet-121 0.995. At 1 thread this path was
    // no faster (512->512 @7x7 in-model 1.34-1.46 ms, 1.23-1.42 on the small-spatial one): left there.
    return threads >= 2 && s.g.k[1] == 3 && s.g.k[2] == 3 && s.g.d[1] == 1 && s.g.d[2] == 1 && s.C >= 16 &&
           std::max(s.g.out[1], s.g.out[2]) <= 8;
  }
  if (std::min(s.g.s[1], s.g.s[2]) < 2) return false;
  // Under 16 input channels (a stem's color planes) the tiles' stores (a 16 x 16 transpose a block) weigh
  // more against few multiply-adds a pixel, and the GEMM paths win at stride 2 (Zen 5, 1 thread, alone:
  // 3->64 3x3/2 @224 0.44 ms against 0.33, 7x7/2 1.41 against 1.36, 3->96 7x7/2 2.1-2.3 against 1.9-2.0);
  // at stride 4 they gather every fourth pixel, and AlexNet's 3->96 11x11/4 @227 takes 1.15-1.22 ms here
  // against 1.66-1.89.
  return s.C >= 16 || std::min(s.g.s[1], s.g.s[2]) >= 4;
}

size_t strided_direct_workspace_bytes(const ConvShape& s) {
  const PaddedGeom pg = padded_geom(s);
  const int64_t cb = input_block(s.C), cpad = (s.C + cb - 1) / cb * cb;
  return static_cast<size_t>(cpad * pg.Hp * pg.Wp) * sizeof(float);
}

StridedDirectPlan strided_direct_plan(const ConvShape& s) {
  StridedDirectPlan p;
  const int64_t OW = s.g.out[2];
  // Tiles: the output row cut into equal runs of at most 14 pixels (28 -> 14 + 14, 14, 7), and the
  // output channel blocks into groups of 2 (3 where the runs are 9 pixels or fewer), so each tile keeps
  // 14-28 accumulators busy.
  const int64_t runs = std::max<int64_t>(1, (OW + kMaxTilePixels - 1) / kMaxTilePixels);
  p.run_px = (OW + runs - 1) / runs;
  p.group = p.run_px <= 9 ? 3 : 2;
  // Group-major where the repacked weights are 4x the padded input or more: row-major, every output row
  // streams all the weights again, from L3 or memory once they outgrow L2 (ResNet-50's 512->512 3x3/2
  // @14x14: 9.4 MB against 0.46 MB of input). Zen 5, channel-path alone with the caches flushed between
  // calls, row-major -> group-major, 1 / 2 threads: that conv 2.04 -> 1.79 / 1.08 -> 0.78 ms, 256->256
  // 3x3/2 @14x14 0.49 -> 0.35 / 0.30 -> 0.25; where the input is the larger (3x3/2 128->128 @56x56, 0.4x)
  // it read all of the input on each thread instead of its rows' part: 0.90 -> 0.92 at 2 threads. ZFNet's
  // 96->256 5x5/2 @54x54 (2.3x) even alone, 1.007 / 1.015 over the model in-process paired: left row-major.
  const int64_t cb = input_block(s.C), cpad = (s.C + cb - 1) / cb * cb;
  const int64_t weight_floats = (s.M + kLanes - 1) / kLanes * kLanes * cpad * s.g.k[1] * s.g.k[2];
  const int64_t input_floats = static_cast<int64_t>(strided_direct_workspace_bytes(s) / sizeof(float));
  p.group_major = weight_floats >= 4 * input_floats;
  return p;
}

void strided_direct_conv(const StridedDirectPlan& plan, const ConvShape& s, const float* x,
                         const StridedDirectWeights& w, const float* bias, float* y, ep::ThreadPool* pool,
                         const ConvPost* post, void* workspace) {
#ifdef NXRT_SD_X86
  const Geom3& g = s.g;
  const PaddedGeom pg = padded_geom(s);
  const int64_t OH = g.out[1], OW = g.out[2], plane_out = OH * OW, in_image = s.C * g.in_size();
  const int64_t run_px = plan.run_px, group = plan.group;
  const bool group_major = plan.group_major;
  const int64_t K = w.K, groups = (w.blocks + group - 1) / group, items = OH * groups;
  float* xp = static_cast<float*>(workspace);
  const Activation act = post ? post->act : Activation::kNone;
  const float act_a = post ? post->act_a : 0.f, act_b = post ? post->act_b : 0.f;
  for (int64_t n = 0; n < s.N; ++n) {
    const float* xn = x + n * in_image;
    float* yn = y + n * s.M * plane_out;
    const float* rn = post && post->residual ? post->residual + n * s.M * plane_out : nullptr;
    const int64_t cblocks = (s.C + w.cb - 1) / w.cb;
    auto pad = [&](int64_t c0, int64_t c1) { pad_blocks(s, pg, xn, xp, c0, c1); };
    if (pool && pool->num_threads() > 1) {
      // Rows of the padded planes, 8 at least a chunk (a row is a few KB).
    pool->parallel_for(cblocks * pg.Hp, 8, pad);
    } else {
      pad(0, cblocks * pg.Hp);
    }
    // Items row-major over (output row, group of channel blocks).
    auto body = [&](int64_t i0, int64_t i1) {
      alignas(64) float out[3 * kMaxTilePixels * kLanes];
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t oh = group_major ? i % OH : i / groups, b0 = (group_major ? i / OH : i % groups) * group;
        const int mb = static_cast<int>(std::min<int64_t>(group, w.blocks - b0));
        TileArgs t;
        t.xp = xp;
        t.plane = pg.Hp * pg.Wp * w.cb;
        t.cb = w.cb;
        t.Wp = pg.Wp;
        t.cblocks = cblocks;
        t.KH = g.k[1];
        t.KW = g.k[2];
        t.dh = g.d[1];
        t.dw = g.d[2];
        t.sw = pg.sw;
        for (int j = 0; j < 3; ++j) t.w[j] = w.w.data() + (b0 + std::min(j, mb - 1)) * K * kLanes;
        t.row0 = oh * pg.sh;
        for (int64_t ow0 = 0; ow0 < OW; ow0 += run_px) {
          const int p = static_cast<int>(std::min<int64_t>(run_px, OW - ow0));
          t.col0 = ow0 * pg.sw;
          const bool full = w.cb == kLanes;
          if (mb == 3) {
            full ? tile_pixels<3, true>(p, t, out) : tile_pixels<3, false>(p, t, out);
          } else if (mb == 2) {
            full ? tile_pixels<2, true>(p, t, out) : tile_pixels<2, false>(p, t, out);
          } else {
            full ? tile_pixels<1, true>(p, t, out) : tile_pixels<1, false>(p, t, out);
          }
          store_tile(out, mb, p, b0, s.M, bias, yn + oh * OW + ow0, rn ? rn + oh * OW + ow0 : nullptr, plane_out, act,
                     act_a, act_b);
        }
      }
    };
    if (pool && pool->num_threads() > 1) {
      pool->parallel_for(items, 1, body);
    } else {
      body(0, items);
    }
  }
#else
  (void)plan, (void)s, (void)x, (void)w, (void)bias, (void)y, (void)pool, (void)post, (void)workspace;
#endif
}

}  // namespace nxrt::ops
