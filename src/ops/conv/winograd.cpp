#include "ops/conv/winograd.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "ops/conv/conv_engine.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_WINO_X86 1
#endif

namespace nxrt::ops {

namespace {

constexpr int kPts = 36;  // 6x6 transform domain

// The vector transforms go with the engine's vector GEMM kernels (the tier the conv kernel chose), AVX-512
// where that tier and the CPU have it.
WinogradPlan::Transforms transforms_for(ep::IsaTier isa) {
#ifdef NXRT_WINO_X86
  if (!gemm_vector_kernels(isa)) return WinogradPlan::Transforms::kScalar;
  if (std::min(isa, ep::cpu_isa_tier()) >= ep::IsaTier::kAvx512) return WinogradPlan::Transforms::kAvx512;
  return WinogradPlan::Transforms::kAvx2;
#else
  (void)isa;
  return WinogradPlan::Transforms::kScalar;
#endif
}

// ---- 1-D transforms (points 0, +-1, +-2, inf), written once for scalars --------------------------
// Input: o = B^T d (6 -> 6).
//   B^T = [4 0 -5 0 1 0; 0 -4 -4 1 1 0; 0 4 -4 -1 1 0; 0 -2 -1 2 1 0; 0 2 -1 -2 1 0; 0 4 0 -5 0 1]
inline void bt_1d(const float* d, int64_t sd, float* o, int64_t so) {
  const float d0 = d[0], d1 = d[sd], d2 = d[2 * sd], d3 = d[3 * sd], d4 = d[4 * sd], d5 = d[5 * sd];
  o[0] = 4.f * (d0 - d2) + (d4 - d2);
  o[so] = (d3 + d4) - 4.f * (d1 + d2);
  o[2 * so] = (d4 - d3) + 4.f * (d1 - d2);
  o[3 * so] = (d4 - d2) + 2.f * (d3 - d1);
  o[4 * so] = (d4 - d2) - 2.f * (d3 - d1);
  o[5 * so] = 4.f * (d1 - d3) + (d5 - d3);
}
// Output: y = A^T m (6 -> 4).  A^T = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
inline void at_1d(const float* m, int64_t sm, float* y, int64_t sy) {
  const float a = m[sm] + m[2 * sm], b = m[sm] - m[2 * sm];
  const float c = m[3 * sm] + m[4 * sm], e = m[3 * sm] - m[4 * sm];
  y[0] = m[0] + a + c;
  y[sy] = b + 2.f * e;
  y[2 * sy] = a + 4.f * c;
  y[3 * sy] = b + 8.f * e + m[5 * sm];
}

// Geometry of one call.
using Plan = WinogradPlan;

// The post of n outputs just stored at y (residual r at the same offsets, may be null): the scalar
// definition, used by the scalar transforms on each stored row piece (still in L1). Not inlined, so the
// compiler cannot contract LeakyRelu's multiply-add into the transform's arithmetic.
__attribute__((noinline)) void post_scalar(float* y, const float* r, int64_t n, const WinogradPost& post) {
  const float a = post.act_a, b = post.act_b;
  for (int64_t i = 0; i < n; ++i) {
    float v = y[i];
    if (r) v += r[i];
    switch (post.act) {
      case Activation::kRelu: v = activation_of<Activation::kRelu>(v, a, b); break;
      case Activation::kClip: v = activation_of<Activation::kClip>(v, a, b); break;
      case Activation::kLeakyRelu: v = activation_of<Activation::kLeakyRelu>(v, a, b); break;
      default: break;
    }
    y[i] = v;
  }
}
// Whether `post` changes anything.
inline bool post_active(const WinogradPost* post) {
  return post && (post->residual || post->act != Activation::kNone);
}

// Calls f(std::integral_constant<Activation, A>) for post's activation A (none without a post): the vector
// output transforms are compiled once per activation WinogradPost takes.
template <typename F>
void with_post_activation(const WinogradPost* post, F&& f) {
  switch (post ? post->act : Activation::kNone) {
    case Activation::kRelu: return f(std::integral_constant<Activation, Activation::kRelu>{});
    case Activation::kClip: return f(std::integral_constant<Activation, Activation::kClip>{});
    case Activation::kLeakyRelu: return f(std::integral_constant<Activation, Activation::kLeakyRelu>{});
    default: return f(std::integral_constant<Activation, Activation::kNone>{});
  }
}

// ---- Input transform: V[xi][c][j] for the tile rows [R0, R1) of a block (j = (R - R0) * TW + tw) ----

void input_scalar(const Plan& p, const float* x, int64_t R0, int64_t R1, int64_t c0, int64_t c1, float* V,
                  int64_t ld, int64_t cstride) {
  float d[36], t[36], o[36];
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t R = R0; R < R1; ++R) {
      const int64_t n = R / p.TH, th = R % p.TH;
      const float* xc = x + (n * p.C + c) * p.IH * p.IW;
      for (int64_t tw = 0; tw < p.TW; ++tw) {
        for (int i = 0; i < 6; ++i) {
          const int64_t iy = th * 4 - p.pt + i;
          for (int jj = 0; jj < 6; ++jj) {
            const int64_t ix = tw * 4 - p.pl + jj;
            d[i * 6 + jj] = (iy >= 0 && iy < p.IH && ix >= 0 && ix < p.IW) ? xc[iy * p.IW + ix] : 0.f;
          }
        }
        for (int jj = 0; jj < 6; ++jj) bt_1d(d + jj, 6, t + jj, 6);  // columns
        for (int k = 0; k < 6; ++k) bt_1d(t + k * 6, 1, o + k * 6, 1);  // rows
        const int64_t j = (R - R0) * p.TW + tw;
        for (int xi = 0; xi < kPts; ++xi) V[xi * cstride + c * ld + j] = o[xi];
      }
    }
  }
}

// ---- Output transform: y tiles from Mx[xi][m][j] -------------------------------------------------------

void output_scalar(const Plan& p, const float* Mx, int64_t R0, int64_t R1, int64_t m0, int64_t m1, const float* bias,
                   float* y, int64_t ld, int64_t mstride, const WinogradPost* post) {
  const bool with_post = post_active(post);
  float mm[36], t[24], o[16];
  for (int64_t m = m0; m < m1; ++m) {
    const float b = bias ? bias[m] : 0.f;
    for (int64_t R = R0; R < R1; ++R) {
      const int64_t n = R / p.TH, th = R % p.TH;
      float* ym = y + (n * p.M + m) * p.OH * p.OW;
      for (int64_t tw = 0; tw < p.TW; ++tw) {
        const int64_t j = (R - R0) * p.TW + tw;
        for (int xi = 0; xi < kPts; ++xi) mm[xi] = Mx[xi * mstride + m * ld + j];
        for (int l = 0; l < 6; ++l) at_1d(mm + l, 6, t + l, 6);   // columns: t[r][l], r < 4
        for (int r = 0; r < 4; ++r) at_1d(t + r * 6, 1, o + r * 4, 1);  // rows
        for (int r = 0; r < 4; ++r) {
          const int64_t oy = th * 4 + r;
          if (oy >= p.OH) break;
          for (int q = 0; q < 4; ++q) {
            const int64_t ox = tw * 4 + q;
            if (ox < p.OW) ym[oy * p.OW + ox] = o[r * 4 + q] + b;
          }
          if (with_post) {
            const int64_t at = (ym - y) + oy * p.OW + tw * 4;
            post_scalar(y + at, post->residual ? post->residual + at : nullptr, std::min<int64_t>(4, p.OW - tw * 4),
                        *post);
          }
        }
      }
    }
  }
}

#ifdef NXRT_WINO_X86

#define WINO_AVX2 __attribute__((target("avx2,fma")))

struct V6 {
  __m256 v[6];
};

WINO_AVX2 inline void bt_vec(const __m256* d, __m256* o) {
  const __m256 four = _mm256_set1_ps(4.f), two = _mm256_set1_ps(2.f);
  const __m256 d42 = _mm256_sub_ps(d[4], d[2]);
  const __m256 d31 = _mm256_sub_ps(d[3], d[1]);
  o[0] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[0], d[2]), d42);
  o[1] = _mm256_fnmadd_ps(four, _mm256_add_ps(d[1], d[2]), _mm256_add_ps(d[3], d[4]));
  o[2] = _mm256_fmadd_ps(four, _mm256_sub_ps(d[1], d[2]), _mm256_sub_ps(d[4], d[3]));
  o[3] = _mm256_fmadd_ps(two, d31, d42);
  o[4] = _mm256_fnmadd_ps(two, d31, d42);
  o[5] = _mm256_fnmadd_ps(four, d31, _mm256_sub_ps(d[5], d[3]));
}

WINO_AVX2 inline void at_vec(const __m256* m, __m256* y) {
  const __m256 a = _mm256_add_ps(m[1], m[2]), b = _mm256_sub_ps(m[1], m[2]);
  const __m256 c = _mm256_add_ps(m[3], m[4]), e = _mm256_sub_ps(m[3], m[4]);
  y[0] = _mm256_add_ps(_mm256_add_ps(m[0], a), c);
  y[1] = _mm256_fmadd_ps(_mm256_set1_ps(2.f), e, b);
  y[2] = _mm256_fmadd_ps(_mm256_set1_ps(4.f), c, a);
  y[3] = _mm256_add_ps(_mm256_fmadd_ps(_mm256_set1_ps(8.f), e, b), m[5]);
}

// Deinterleaves 8 tiles: out[j][t] = a[4t + j] for j < 4 and out[4 + j][t] = b[4t + j] for j < 2, t < 8
// (reads a[0, 32) and b[0, 32)).
WINO_AVX2 inline void gather_tiles(const float* a, const float* b, __m256* out) {
  {
    const __m256 r0 = _mm256_loadu_ps(a), r1 = _mm256_loadu_ps(a + 8);
    const __m256 r2 = _mm256_loadu_ps(a + 16), r3 = _mm256_loadu_ps(a + 24);
    const __m256 t04 = _mm256_permute2f128_ps(r0, r2, 0x20);  // t0 | t4
    const __m256 t15 = _mm256_permute2f128_ps(r0, r2, 0x31);  // t1 | t5
    const __m256 t26 = _mm256_permute2f128_ps(r1, r3, 0x20);  // t2 | t6
    const __m256 t37 = _mm256_permute2f128_ps(r1, r3, 0x31);  // t3 | t7
    const __m256 l01 = _mm256_unpacklo_ps(t04, t15), l23 = _mm256_unpacklo_ps(t26, t37);
    const __m256 h01 = _mm256_unpackhi_ps(t04, t15), h23 = _mm256_unpackhi_ps(t26, t37);
    out[0] = _mm256_shuffle_ps(l01, l23, 0x44);
    out[1] = _mm256_shuffle_ps(l01, l23, 0xEE);
    out[2] = _mm256_shuffle_ps(h01, h23, 0x44);
    out[3] = _mm256_shuffle_ps(h01, h23, 0xEE);
  }
  {
    const __m256 r0 = _mm256_loadu_ps(b), r1 = _mm256_loadu_ps(b + 8);
    const __m256 r2 = _mm256_loadu_ps(b + 16), r3 = _mm256_loadu_ps(b + 24);
    const __m256 t04 = _mm256_permute2f128_ps(r0, r2, 0x20);
    const __m256 t15 = _mm256_permute2f128_ps(r0, r2, 0x31);
    const __m256 t26 = _mm256_permute2f128_ps(r1, r3, 0x20);
    const __m256 t37 = _mm256_permute2f128_ps(r1, r3, 0x31);
    const __m256 l01 = _mm256_unpacklo_ps(t04, t15), l23 = _mm256_unpacklo_ps(t26, t37);
    out[4] = _mm256_shuffle_ps(l01, l23, 0x44);
    out[5] = _mm256_shuffle_ps(l01, l23, 0xEE);
  }
}

// Interleaves 8 tiles back: out[i] holds dst[8i, 8i + 8) of dst[4t + q] = v[q][t] for q < 4, t < 8.
WINO_AVX2 inline void interleave_tiles(const __m256* v, __m256* out) {
  const __m256 l01 = _mm256_unpacklo_ps(v[0], v[1]), h01 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 l23 = _mm256_unpacklo_ps(v[2], v[3]), h23 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t04 = _mm256_shuffle_ps(l01, l23, 0x44);  // t0 | t4
  const __m256 t15 = _mm256_shuffle_ps(l01, l23, 0xEE);  // t1 | t5
  const __m256 t26 = _mm256_shuffle_ps(h01, h23, 0x44);  // t2 | t6
  const __m256 t37 = _mm256_shuffle_ps(h01, h23, 0xEE);  // t3 | t7
  out[0] = _mm256_permute2f128_ps(t04, t15, 0x20);
  out[1] = _mm256_permute2f128_ps(t26, t37, 0x20);
  out[2] = _mm256_permute2f128_ps(t04, t15, 0x31);
  out[3] = _mm256_permute2f128_ps(t26, t37, 0x31);
}

// The same stored: writes dst[0, 32).
WINO_AVX2 inline void scatter_tiles(const __m256* v, float* dst) {
  __m256 out[4];
  interleave_tiles(v, out);
  for (int i = 0; i < 4; ++i) _mm256_storeu_ps(dst + 8 * i, out[i]);
}

// Floats of input-transform scratch for a block of `tiles` tiles: two planes of 6 x input_plane(tiles).
// (64 spare floats: the AVX-512 horizontal pass reads 64 floats from the last group's first tile on.)
inline int64_t input_plane(int64_t tiles) { return 4 * tiles + 64; }

// The tiles of the block are taken as one flat sequence j = (R - R0) * TW + tw, 8 at a time (a group may
// span tile rows, so narrow images waste no lanes). Per channel, a vertical pass (B^T along the rows, on
// contiguous input columns) fills plane A with, for every tile j, its 4 leading columns at 4j (tile rows
// laid end to end) and plane B with its columns 4..7 at 4j (the 2 trailing columns of the 6-wide tile);
// the horizontal pass deinterleaves 8 tiles from A and B (gather_tiles), applies B^T along the columns and
// stores 8 tiles of each of the 36 points. Lanes past the block's last tile store into the 8 spare columns
// of ld. `scratch`: 2 * 6 * input_plane(tiles) floats, per thread.
WINO_AVX2 void input_avx2(const Plan& p, const float* x, int64_t R0, int64_t R1, int64_t c0, int64_t c1, float* V,
                          int64_t ld, int64_t cstride, float* scratch) {
  const int64_t tiles = (R1 - R0) * p.TW;
  const int64_t plane = input_plane(tiles);
  float* A = scratch;
  float* B = scratch + 6 * plane;
  const int64_t row_w = 4 * p.TW;                  // columns of one tile row in A and B
  const int64_t vcols = (row_w + 4 + 7) / 8 * 8;   // vertical-pass columns per tile row (>= row_w + 4)
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256 zero = _mm256_setzero_ps();
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t R = R0; R < R1; ++R) {
      const int64_t n = R / p.TH, th = R % p.TH;
      const float* xc = x + (n * p.C + c) * p.IH * p.IW;
      const float* xr[6];  // input rows of the tile row (null: padding)
      for (int i = 0; i < 6; ++i) {
        const int64_t iy = th * 4 - p.pt + i;
        xr[i] = iy >= 0 && iy < p.IH ? xc + iy * p.IW : nullptr;
      }
      // Vertical pass, straight from the input rows into A at this row's offset (the columns past row_w
      // spill into the next row's slots, rewritten when that row is done; B takes them first):
      // A[k][off + col] = sum_i B^T[k][i] x[iy_i][col - pl], zero outside the image (masked loads).
      const int64_t off = (R - R0) * row_w;
      for (int64_t col = 0; col < vcols; col += 8) {
        const int64_t ix0 = col - p.pl;
        const int64_t lo = std::max<int64_t>(0, -ix0), hi = std::min<int64_t>(8, p.IW - ix0);
        __m256 d[6], o[6];
        if (lo >= hi) {
          for (int k = 0; k < 6; ++k) _mm256_storeu_ps(A + k * plane + off + col, zero);
          continue;
        }
        if (lo == 0 && hi == 8) {
          for (int i = 0; i < 6; ++i) d[i] = xr[i] ? _mm256_loadu_ps(xr[i] + ix0) : zero;
        } else {
          const __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(hi)), idx),
                                             _mm256_cmpgt_epi32(idx, _mm256_set1_epi32(static_cast<int>(lo - 1))));
          // Lanes outside [lo, hi) are masked off and not read.
          for (int i = 0; i < 6; ++i) d[i] = xr[i] ? _mm256_maskload_ps(xr[i] + ix0, m) : zero;
        }
        bt_vec(d, o);
        for (int k = 0; k < 6; ++k) _mm256_storeu_ps(A + k * plane + off + col, o[k]);
      }
      for (int k = 0; k < 6; ++k) {
        const float* src = A + k * plane + off + 4;
        float* dst = B + k * plane + off;
        for (int64_t col = 0; col < row_w; col += 8) _mm256_storeu_ps(dst + col, _mm256_loadu_ps(src + col));
      }
    }
    // Horizontal pass, 8 tiles at a time. (Full-width stores: masked stores are microcoded on AMD cores.)
    float* vc = V + c * ld;
    for (int64_t j0 = 0; j0 < tiles; j0 += 8) {
      for (int k = 0; k < 6; ++k) {
        __m256 d[6], o[6];
        gather_tiles(A + k * plane + 4 * j0, B + k * plane + 4 * j0, d);
        bt_vec(d, o);
        float* dst = vc + (k * 6) * cstride + j0;
        for (int l = 0; l < 6; ++l) _mm256_storeu_ps(dst + l * cstride, o[l]);
      }
    }
  }
}

// The post on 8 values about to be stored (the residual at the same offsets already added): activation_of's
// operations per element in post16's operand order (max/min keep NaN and -0 as activation_of does).
template <Activation A>
WINO_AVX2 inline __m256 act8(__m256 v, __m256 a, __m256 b) {
  const __m256 zero = _mm256_setzero_ps();
  if constexpr (A == Activation::kRelu) return _mm256_max_ps(zero, v);
  if constexpr (A == Activation::kClip) return _mm256_max_ps(a, _mm256_min_ps(b, v));
  if constexpr (A == Activation::kLeakyRelu) {
    return _mm256_add_ps(_mm256_max_ps(zero, v), _mm256_mul_ps(a, _mm256_min_ps(zero, v)));
  }
  return v;
}

// n (<= 32) outputs from src to dst with the post (residual at dst's offsets from `res`, may be null).
template <Activation A>
WINO_AVX2 inline void store_post(float* dst, const float* src, int64_t n, const float* res, __m256 a, __m256 b) {
  alignas(32) static const int32_t kTail[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(src + i);
    if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + i));
    _mm256_storeu_ps(dst + i, act8<A>(v, a, b));
  }
  if (i < n && n >= 8) {
    // The last 8 columns again, overlapping ones already stored with the same values: plain stores,
    // as a masked one (vmaskmovps) takes ~11 cycles on a Zen 3 and every row piece of a tile run ends
    // in one (6% of SqueezeNet's 32->128 @27x27 conv).
    __m256 v = _mm256_loadu_ps(src + n - 8);
    if (res) v = _mm256_add_ps(v, _mm256_loadu_ps(res + n - 8));
    _mm256_storeu_ps(dst + n - 8, act8<A>(v, a, b));
  } else if (i < n) {
    const __m256i mask = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTail + 8 - (n - i)));
    __m256 v = _mm256_maskload_ps(src + i, mask);
    if (res) v = _mm256_add_ps(v, _mm256_maskload_ps(res + i, mask));
    alignas(32) float t[8];
    _mm256_store_ps(t, act8<A>(v, a, b));
    for (int64_t j = i; j < n; ++j) dst[j] = t[j - i];
  }
}

// Same flat tile order as input_avx2; reads Mx up to 8 floats past the block's last tile (spare columns).
// The post (A: its activation; the residual when post has one) goes in before each store, on values still
// in registers (a scalar pass over the stored rows took half of SqueezeNet's 16->64 @55x55 conv: Zen 3).
template <Activation A>
WINO_AVX2 void output_avx2_act(const Plan& p, const float* Mx, int64_t R0, int64_t R1, int64_t m0, int64_t m1,
                               const float* bias, float* y, int64_t ld, int64_t mstride, const WinogradPost* post) {
  const float* residual = post ? post->residual : nullptr;
  const bool with_post = A != Activation::kNone || residual;
  const __m256 act_a = _mm256_set1_ps(post ? post->act_a : 0.f), act_b = _mm256_set1_ps(post ? post->act_b : 0.f);
  alignas(32) float tmp[4][32];
  const int64_t tiles = (R1 - R0) * p.TW;
  for (int64_t m = m0; m < m1; ++m) {
    const __m256 b = _mm256_set1_ps(bias ? bias[m] : 0.f);
    const float* src = Mx + m * ld;
    for (int64_t j0 = 0; j0 < tiles; j0 += 8) {
      // t[r][l] = sum_k A^T[r][k] M[k][l]
      __m256 t[4][6];
      for (int l = 0; l < 6; ++l) {
        __m256 mk[6], yr[4];
        for (int k = 0; k < 6; ++k) mk[k] = _mm256_loadu_ps(src + (k * 6 + l) * mstride + j0);
        at_vec(mk, yr);
        for (int r = 0; r < 4; ++r) t[r][l] = yr[r];
      }
      const int64_t R = R0 + j0 / p.TW, tw0 = j0 % p.TW;
      if (tw0 + 8 <= p.TW && 4 * (tw0 + 8) <= p.OW) {
        // All 8 tiles in one tile row and inside the image: straight to y.
        const int64_t n = R / p.TH, th = R % p.TH;
        float* ym = y + ((n * p.M + m) * p.OH + th * 4) * p.OW + 4 * tw0;
        for (int r = 0; r < 4 && th * 4 + r < p.OH; ++r) {
          __m256 o[4];
          at_vec(t[r], o);
          for (int q = 0; q < 4; ++q) o[q] = _mm256_add_ps(o[q], b);
          if (!with_post) {
            scatter_tiles(o, ym + r * p.OW);
            continue;
          }
          __m256 v[4];
          interleave_tiles(o, v);
          float* dst = ym + r * p.OW;
          const float* res = residual ? residual + (dst - y) : nullptr;
          for (int q = 0; q < 4; ++q) {
            if (res) v[q] = _mm256_add_ps(v[q], _mm256_loadu_ps(res + 8 * q));
            _mm256_storeu_ps(dst + 8 * q, act8<A>(v[q], act_a, act_b));
          }
        }
        continue;
      }
      for (int r = 0; r < 4; ++r) {
        __m256 o[4];
        at_vec(t[r], o);
        for (int q = 0; q < 4; ++q) o[q] = _mm256_add_ps(o[q], b);
        scatter_tiles(o, tmp[r]);
      }
      // Runs of tiles within one tile row, clipped to the image.
      const int64_t jend = std::min(tiles, j0 + 8);
      for (int64_t j = j0; j < jend;) {
        const int64_t Rj = R0 + j / p.TW, tw = j % p.TW;
        const int64_t len = std::min(jend - j, p.TW - tw);
        const int64_t n = Rj / p.TH, th = Rj % p.TH;
        const int64_t ncols = std::min(4 * len, p.OW - 4 * tw);
        float* ym = y + ((n * p.M + m) * p.OH + th * 4) * p.OW + 4 * tw;
        for (int r = 0; r < 4 && th * 4 + r < p.OH; ++r) {
          float* dst = ym + r * p.OW;
          if (with_post) {
            store_post<A>(dst, tmp[r] + 4 * (j - j0), ncols, residual ? residual + (dst - y) : nullptr, act_a, act_b);
          } else {
            std::memcpy(dst, tmp[r] + 4 * (j - j0), sizeof(float) * ncols);
          }
        }
        j += len;
      }
    }
  }
}

void output_avx2(const Plan& p, const float* Mx, int64_t R0, int64_t R1, int64_t m0, int64_t m1, const float* bias,
                 float* y, int64_t ld, int64_t mstride, const WinogradPost* post) {
  with_post_activation(post, [&](auto act) {
    output_avx2_act<decltype(act)::value>(p, Mx, R0, R1, m0, m1, bias, y, ld, mstride, post);
  });
}


// ---- AVX-512: the AVX2 code's operations per element on 16 tiles a vector ------------------------------

#define WINO_AVX512 __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma")))

WINO_AVX512 inline void bt_vec16(const __m512* d, __m512* o) {
  const __m512 four = _mm512_set1_ps(4.f), two = _mm512_set1_ps(2.f);
  const __m512 d42 = _mm512_sub_ps(d[4], d[2]);
  const __m512 d31 = _mm512_sub_ps(d[3], d[1]);
  o[0] = _mm512_fmadd_ps(four, _mm512_sub_ps(d[0], d[2]), d42);
  o[1] = _mm512_fnmadd_ps(four, _mm512_add_ps(d[1], d[2]), _mm512_add_ps(d[3], d[4]));
  o[2] = _mm512_fmadd_ps(four, _mm512_sub_ps(d[1], d[2]), _mm512_sub_ps(d[4], d[3]));
  o[3] = _mm512_fmadd_ps(two, d31, d42);
  o[4] = _mm512_fnmadd_ps(two, d31, d42);
  o[5] = _mm512_fnmadd_ps(four, d31, _mm512_sub_ps(d[5], d[3]));
}

WINO_AVX512 inline void at_vec16(const __m512* m, __m512* y) {
  const __m512 a = _mm512_add_ps(m[1], m[2]), b = _mm512_sub_ps(m[1], m[2]);
  const __m512 c = _mm512_add_ps(m[3], m[4]), e = _mm512_sub_ps(m[3], m[4]);
  y[0] = _mm512_add_ps(_mm512_add_ps(m[0], a), c);
  y[1] = _mm512_fmadd_ps(_mm512_set1_ps(2.f), e, b);
  y[2] = _mm512_fmadd_ps(_mm512_set1_ps(4.f), c, a);
  y[3] = _mm512_add_ps(_mm512_fmadd_ps(_mm512_set1_ps(8.f), e, b), m[5]);
}

// The low n lanes (n >= 16: all).
inline __mmask16 lanes16(int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << std::max<int64_t>(n, 0)) - 1);
}

// 16 tiles of 4 floats (tile t at p[4t, 4t + 4), four vectors of 4 tiles) -> out[j][t] = value j of tile t,
// for the first `nout` values (2 or 4).
WINO_AVX512 inline void gather16(const float* src, __m512* out, int nout) {
  const __m512 r0 = _mm512_loadu_ps(src), r1 = _mm512_loadu_ps(src + 16);
  const __m512 r2 = _mm512_loadu_ps(src + 32), r3 = _mm512_loadu_ps(src + 48);
  // 128-bit lanes: tiles (0 2 4 6), (1 3 5 7), (8 10 12 14), (9 11 13 15), then lane L of ta..td holds
  // tiles 4L, 4L + 1, 4L + 2, 4L + 3.
  const __m512 s0 = _mm512_shuffle_f32x4(r0, r1, 0x88), s1 = _mm512_shuffle_f32x4(r0, r1, 0xDD);
  const __m512 s2 = _mm512_shuffle_f32x4(r2, r3, 0x88), s3 = _mm512_shuffle_f32x4(r2, r3, 0xDD);
  const __m512 ta = _mm512_shuffle_f32x4(s0, s2, 0x88), tb = _mm512_shuffle_f32x4(s1, s3, 0x88);
  const __m512 tc = _mm512_shuffle_f32x4(s0, s2, 0xDD), td = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  // 4x4 transposes within the lanes.
  const __m512 l01 = _mm512_unpacklo_ps(ta, tb), l23 = _mm512_unpacklo_ps(tc, td);
  out[0] = _mm512_shuffle_ps(l01, l23, 0x44);
  out[1] = _mm512_shuffle_ps(l01, l23, 0xEE);
  if (nout > 2) {
    const __m512 h01 = _mm512_unpackhi_ps(ta, tb), h23 = _mm512_unpackhi_ps(tc, td);
    out[2] = _mm512_shuffle_ps(h01, h23, 0x44);
    out[3] = _mm512_shuffle_ps(h01, h23, 0xEE);
  }
}

// The inverse for 4 values: out[k] = tiles 4k .. 4k + 3 interleaved (value q of tile 4k + i at lane 4i + q).
WINO_AVX512 inline void interleave16(const __m512* v, __m512* out) {
  const __m512 l01 = _mm512_unpacklo_ps(v[0], v[1]), h01 = _mm512_unpackhi_ps(v[0], v[1]);
  const __m512 l23 = _mm512_unpacklo_ps(v[2], v[3]), h23 = _mm512_unpackhi_ps(v[2], v[3]);
  // Lane L of ta..td: tile 4L, 4L + 1, 4L + 2, 4L + 3.
  const __m512 ta = _mm512_shuffle_ps(l01, l23, 0x44), tb = _mm512_shuffle_ps(l01, l23, 0xEE);
  const __m512 tc = _mm512_shuffle_ps(h01, h23, 0x44), td = _mm512_shuffle_ps(h01, h23, 0xEE);
  const __m512 s0 = _mm512_shuffle_f32x4(ta, tb, 0x44), s1 = _mm512_shuffle_f32x4(tc, td, 0x44);
  const __m512 s2 = _mm512_shuffle_f32x4(ta, tb, 0xEE), s3 = _mm512_shuffle_f32x4(tc, td, 0xEE);
  out[0] = _mm512_shuffle_f32x4(s0, s1, 0x88);
  out[1] = _mm512_shuffle_f32x4(s0, s1, 0xDD);
  out[2] = _mm512_shuffle_f32x4(s2, s3, 0x88);
  out[3] = _mm512_shuffle_f32x4(s2, s3, 0xDD);
}

// input_avx2's passes 16 columns / tiles at a time: masked loads at the image's edges, masked stores for
// the block's last tiles (so V's spare columns are not written).
WINO_AVX512 void input_avx512(const Plan& p, const float* x, int64_t R0, int64_t R1, int64_t c0, int64_t c1,
                              float* V, int64_t ld, int64_t cstride, float* scratch) {
  const int64_t tiles = (R1 - R0) * p.TW;
  const int64_t plane = input_plane(tiles);
  float* A = scratch;
  float* B = scratch + 6 * plane;
  const int64_t row_w = 4 * p.TW;
  const int64_t vcols = (row_w + 4 + 15) / 16 * 16;  // >= row_w + 4; spills stay within the plane
  const __m512 zero = _mm512_setzero_ps();
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t R = R0; R < R1; ++R) {
      const int64_t n = R / p.TH, th = R % p.TH;
      const float* xc = x + (n * p.C + c) * p.IH * p.IW;
      const float* xr[6];
      for (int i = 0; i < 6; ++i) {
        const int64_t iy = th * 4 - p.pt + i;
        xr[i] = iy >= 0 && iy < p.IH ? xc + iy * p.IW : nullptr;
      }
      const int64_t off = (R - R0) * row_w;
      for (int64_t col = 0; col < vcols; col += 16) {
        const int64_t ix0 = col - p.pl;
        const int64_t lo = std::max<int64_t>(0, -ix0), hi = std::min<int64_t>(16, p.IW - ix0);
        __m512 d[6], o[6];
        if (lo >= hi) {
          for (int k = 0; k < 6; ++k) _mm512_storeu_ps(A + k * plane + off + col, zero);
          continue;
        }
        if (lo == 0 && hi == 16) {
          for (int i = 0; i < 6; ++i) d[i] = xr[i] ? _mm512_loadu_ps(xr[i] + ix0) : zero;
        } else {
          // Lanes outside [lo, hi) are masked off and not read.
          const __mmask16 m = static_cast<__mmask16>(lanes16(hi) & ~lanes16(lo));
          for (int i = 0; i < 6; ++i) d[i] = xr[i] ? _mm512_maskz_loadu_ps(m, xr[i] + ix0) : zero;
        }
        bt_vec16(d, o);
        for (int k = 0; k < 6; ++k) _mm512_storeu_ps(A + k * plane + off + col, o[k]);
      }
      for (int k = 0; k < 6; ++k) {
        const float* src = A + k * plane + off + 4;
        float* dst = B + k * plane + off;
        for (int64_t col = 0; col < row_w; col += 16) _mm512_storeu_ps(dst + col, _mm512_loadu_ps(src + col));
      }
    }
    float* vc = V + c * ld;
    for (int64_t j0 = 0; j0 < tiles; j0 += 16) {
      const __mmask16 keep = lanes16(tiles - j0);
      for (int k = 0; k < 6; ++k) {
        __m512 d[6], o[6];
        gather16(A + k * plane + 4 * j0, d, 4);
        gather16(B + k * plane + 4 * j0, d + 4, 2);
        bt_vec16(d, o);
        float* dst = vc + (k * 6) * cstride + j0;
        if (keep == 0xFFFF) {
          for (int l = 0; l < 6; ++l) _mm512_storeu_ps(dst + l * cstride, o[l]);
        } else {
          for (int l = 0; l < 6; ++l) _mm512_mask_storeu_ps(dst + l * cstride, keep, o[l]);
        }
      }
    }
  }
}

// One masked store of output_avx512: the tiles of a group that lie in one tile row and in one 4-tile
// vector `q` of interleave16's output, from its tile `shift` (0..3) on; the outputs in `mask`'s lanes
// (clipped to the image's width) from y offset `off` (output channel 0) in each of `rows` output rows.
struct OutSeg {
  int64_t off;
  __mmask16 mask;
  uint8_t q, shift, rows;
};

// The post on 16 values about to be stored at y offset `off` (lanes `mask`): the operations of
// activation_of per element (max/min in the operand order that keeps NaN and -0 as it does; LeakyRelu's
// multiply and add separate).
template <Activation A>
WINO_AVX512 inline __m512 post16(__m512 v, const float* residual, int64_t off, __mmask16 mask, __m512 a, __m512 b) {
  if (residual) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask, residual + off));
  const __m512 zero = _mm512_setzero_ps();
  if constexpr (A == Activation::kRelu) return _mm512_max_ps(zero, v);                    // v < 0 ? 0 : v
  if constexpr (A == Activation::kClip) return _mm512_max_ps(a, _mm512_min_ps(b, v));     // v < a ? a : min
  if constexpr (A == Activation::kLeakyRelu) {
    return _mm512_add_ps(_mm512_max_ps(zero, v), _mm512_mul_ps(a, _mm512_min_ps(zero, v)));
  }
  return v;
}

// Same flat tile order as input_avx512. The stores of each group of 16 tiles (one masked store per run of
// tiles within one tile row and one 4-tile vector, clipped to the image) are worked out once per batch
// of groups and serve every output channel; the post (A: its activation) goes in before each store.
template <Activation A>
WINO_AVX512 void output_avx512_act(const Plan& p, const float* Mx, int64_t R0, int64_t R1, int64_t m0, int64_t m1,
                                   const float* bias, float* y, int64_t ld, int64_t mstride, const WinogradPost* post) {
  const float* residual = post ? post->residual : nullptr;
  const __m512 act_a = _mm512_set1_ps(post ? post->act_a : 0.f), act_b = _mm512_set1_ps(post ? post->act_b : 0.f);
  constexpr int kGroups = 8;  // groups per batch
  OutSeg segs[kGroups * 16];  // at most a store per tile
  int seg_end[kGroups];
  const int64_t tiles = (R1 - R0) * p.TW;
  const int64_t plane_out = p.OH * p.OW;
  // permutexvar indices that move tile `shift` of a 4-tile vector to lanes 0..3.
  const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int64_t g0 = 0; g0 < tiles; g0 += 16 * kGroups) {
    const int64_t g1 = std::min(tiles, g0 + 16 * kGroups);
    int ns = 0;
    int ngroups = 0;
    for (int64_t j0 = g0; j0 < g1; j0 += 16, ++ngroups) {
      const int64_t nv = std::min<int64_t>(16, tiles - j0);
      for (int64_t i = 0; i < nv;) {
        const int64_t j = j0 + i, Rj = R0 + j / p.TW, tw = j % p.TW;
        const int64_t len = std::min({4 - i % 4, p.TW - tw, nv - i});
        const int64_t n = Rj / p.TH, th = Rj % p.TH;
        OutSeg& s = segs[ns++];
        s.off = ((n * p.M) * p.OH + th * 4) * p.OW + 4 * tw;
        s.mask = lanes16(std::min(4 * len, p.OW - 4 * tw));
        s.q = static_cast<uint8_t>(i / 4);
        s.shift = static_cast<uint8_t>(i % 4);
        s.rows = static_cast<uint8_t>(std::min<int64_t>(4, p.OH - th * 4));
        i += len;
      }
      seg_end[ngroups] = ns;
    }
    for (int64_t m = m0; m < m1; ++m) {
      const __m512 b = _mm512_set1_ps(bias ? bias[m] : 0.f);
      const float* src = Mx + m * ld;
      int s0 = 0;
      for (int gi = 0; gi < ngroups; ++gi) {
        const int64_t j0 = g0 + 16 * gi;
        const __mmask16 valid = lanes16(tiles - j0);
        // t[r][l] = sum_k A^T[r][k] M[k][l]
        __m512 t[4][6];
        for (int l = 0; l < 6; ++l) {
          __m512 mk[6], yr[4];
          if (valid == 0xFFFF) {
            for (int k = 0; k < 6; ++k) mk[k] = _mm512_loadu_ps(src + (k * 6 + l) * mstride + j0);
          } else {
            for (int k = 0; k < 6; ++k) mk[k] = _mm512_maskz_loadu_ps(valid, src + (k * 6 + l) * mstride + j0);
          }
          at_vec16(mk, yr);
          for (int r = 0; r < 4; ++r) t[r][l] = yr[r];
        }
        const int s1 = seg_end[gi];
        int rows = 0;
        for (int s = s0; s < s1; ++s) rows = std::max<int>(rows, segs[s].rows);
        for (int r = 0; r < rows; ++r) {
          __m512 o[4], v[4];
          at_vec16(t[r], o);
          for (int q = 0; q < 4; ++q) o[q] = _mm512_add_ps(o[q], b);
          interleave16(o, v);
          for (int s = s0; s < s1; ++s) {
            const OutSeg& sg = segs[s];
            if (r >= sg.rows) continue;
            __m512 val = v[sg.q];
            if (sg.shift) {
              val = _mm512_permutexvar_ps(_mm512_add_epi32(iota, _mm512_set1_epi32(4 * sg.shift)), val);
            }
            const int64_t at = m * plane_out + sg.off + r * p.OW;
            if (A != Activation::kNone || residual) val = post16<A>(val, residual, at, sg.mask, act_a, act_b);
            _mm512_mask_storeu_ps(y + at, sg.mask, val);
          }
        }
        s0 = s1;
      }
    }
  }
}

void output_avx512(const Plan& p, const float* Mx, int64_t R0, int64_t R1, int64_t m0, int64_t m1, const float* bias,
                   float* y, int64_t ld, int64_t mstride, const WinogradPost* post) {
  with_post_activation(post, [&](auto act) {
    output_avx512_act<decltype(act)::value>(p, Mx, R0, R1, m0, m1, bias, y, ld, mstride, post);
  });
}

#endif  // NXRT_WINO_X86

// G g G^T for one 3x3 filter, in double. G = [1/4 0 0; -1/6 -1/6 -1/6; -1/6 1/6 -1/6; 1/24 1/12 1/6;
// 1/24 -1/12 1/6; 0 0 1].
void filter_transform(const float* g, double* u) {
  static const double G[6][3] = {{1.0 / 4, 0, 0},
                                 {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                 {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                 {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                 {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                 {0, 0, 1}};
  double t[6][3];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 3; ++j) t[i][j] = G[i][0] * g[0 * 3 + j] + G[i][1] * g[1 * 3 + j] + G[i][2] * g[2 * 3 + j];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) u[i * 6 + j] = t[i][0] * G[j][0] + t[i][1] * G[j][1] + t[i][2] * G[j][2];
}

}  // namespace

bool winograd_weights_apply(const Dims& w_shape, int64_t group) {
  return group == 1 && w_shape.size() == 4 && w_shape[2] == 3 && w_shape[3] == 3 && w_shape[0] > 0 && w_shape[1] > 0;
}

namespace {

// Transforms the M x C filters, filter (m, c)'s 9 taps coming from fetch(m, c, g). Written straight in
// the PackedA<float> layout (gemm/gemm.h; what pack_a<float> would produce from the M x C matrix of each
// point): per K block of kGemmKC channels starting at k0 (offset k0 * m_padded), panels of kGemmMR rows,
// element (m, c) at (m / MR) * MR * kc + (c - k0) * MR + m % MR; rows past M stay zero.
//
// A filter's 36 values go to 36 matrices, which (each m_padded * C floats, handed out back to back)
// often lie a power of two apart: 512 x 512 channels put them exactly 1 MB apart, so writing each value
// where it belongs mapped all 36 streams onto the same L1 and L2 sets, and every store missed (145 ms
// for those weights on a Zen 5 core). So a panel's filters are transformed kChunk channels at a time
// into a small buffer, one contiguous run per point, and each run is copied out whole.
template <typename Fetch>
void prepare_transformed(int64_t M, int64_t C, Fetch fetch, WinogradWeights* out) {
  out->M = M;
  out->C = C;
  const int64_t m_padded = (M + kGemmMR - 1) / kGemmMR * kGemmMR;
  out->u.clear();
  out->u.resize(kPts);
  for (PackedA<float>& pk : out->u) {
    pk.M = M;
    pk.K = C;
    pk.m_padded = m_padded;
    pk.data = PackedArray<float>(static_cast<size_t>(m_padded * C));
  }
  constexpr int64_t kChunk = 16;  // channels per run: 36 runs of 16 x MR floats, 13.5 KB in all
  float runs[kPts][kChunk * kGemmMR];
  double ut[36];
  float g[9];
  for (int64_t k0 = 0; k0 < C; k0 += kGemmKC) {
    const int64_t kc = std::min(kGemmKC, C - k0);
    for (int64_t m0 = 0; m0 < M; m0 += kGemmMR) {
      const int64_t rows = std::min<int64_t>(kGemmMR, M - m0);
      const int64_t panel = k0 * m_padded + m0 * kc;  // this panel's run of kc x MR values
      for (int64_t c0 = k0; c0 < k0 + kc; c0 += kChunk) {
        const int64_t cn = std::min(kChunk, k0 + kc - c0);
        if (rows < kGemmMR) std::memset(runs, 0, sizeof(runs));  // padding rows stay zero
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = c0; c < c0 + cn; ++c) {
            fetch(m0 + r, c, g);
            filter_transform(g, ut);
            const int64_t at = (c - c0) * kGemmMR + r;
            for (int xi = 0; xi < kPts; ++xi) runs[xi][at] = static_cast<float>(ut[xi]);
          }
        }
        const int64_t dst = panel + (c0 - k0) * kGemmMR;
        for (int xi = 0; xi < kPts; ++xi)
          std::memcpy(out->u[xi].data.data() + dst, runs[xi], static_cast<size_t>(cn * kGemmMR) * sizeof(float));
      }
    }
  }
}

}  // namespace

void winograd_prepare(int64_t M, int64_t C, const float* w, WinogradWeights* out) {
  prepare_transformed(
      M, C, [w, C](int64_t m, int64_t c, float* g) { std::memcpy(g, w + (m * C + c) * 9, 9 * sizeof(float)); }, out);
}

namespace {
std::atomic<int64_t> g_winograd_live{0};
// WinogradWeights that count themselves live (winograd_weights_live).
struct CountedWinogradWeights final : WinogradWeights {
  CountedWinogradWeights() { g_winograd_live.fetch_add(1, std::memory_order_relaxed); }
  ~CountedWinogradWeights() { g_winograd_live.fetch_sub(1, std::memory_order_relaxed); }
};
}  // namespace

int64_t winograd_weights_live() { return g_winograd_live.load(std::memory_order_relaxed); }

static std::shared_ptr<WinogradWeights> make_winograd_weights(const PackedA<float>& packed, int64_t M, int64_t C) {
  auto out = std::make_shared<CountedWinogradWeights>();
  // The taps read from the PackedA<float> layout (gemm/gemm.h) of the M x (C * 9) weights: per K block of
  // kGemmKC starting at k0 (offset k0 * m_padded), MR-row panels of kc x MR values, element (i, k) at
  // panel i / MR, k * MR + i % MR. A filter's 9 taps may straddle two K blocks.
  const int64_t K = C * 9;
  const int64_t m_padded = (M + kGemmMR - 1) / kGemmMR * kGemmMR;
  const float* base = packed.data.data();
  prepare_transformed(
      M, C,
      [=](int64_t m, int64_t c, float* g) {
        for (int t = 0; t < 9; ++t) {
          const int64_t k = c * 9 + t;
          const int64_t k0 = k / kGemmKC * kGemmKC;
          const int64_t kc = std::min(kGemmKC, K - k0);
          g[t] = base[k0 * m_padded + (m / kGemmMR) * kGemmMR * kc + (k - k0) * kGemmMR + m % kGemmMR];
        }
      },
      out.get());
  return out;
}

std::shared_ptr<const WinogradWeights> WinogradCache::acquire(const PackedA<float>& packed, int64_t M,
                                                              int64_t C) const {
  return lazy_.acquire([&] { return make_winograd_weights(packed, M, C); });
}

bool winograd_applies(const ConvShape& s) {
  const Geom3& g = s.g;
  if (s.group != 1 || g.nsp != 2) return false;
  if (g.k[0] != 1 || g.k[1] != 3 || g.k[2] != 3) return false;
  for (int i = 0; i < 3; ++i) {
    if (g.s[i] != 1 || g.d[i] != 1) return false;
  }
  return g.pb[0] == 0 && g.pe[0] == 0 && g.in[0] == 1 && g.out[0] == 1 && g.out[1] > 0 && g.out[2] > 0;
}

// Measured at one thread against im2col + GEMM (AMD EPYC, AVX2 kernels; ms im2col -> Winograd):
//   64->64 @56x56 3.1 -> 1.0, 128->32 @56x56 4.9 -> 1.24, 128->128 @28x28 2.6 -> 0.85,
//   256->256 @14x14 2.6 -> 0.90, 128->32 @14x14 0.30 -> 0.10, 64->64 @224x224 134 -> 28,
//   16->16 @8x8 0.012 -> 0.009, 64->64 @8x8 0.076 -> 0.065, 64->64 @7x7 0.076 -> 0.065,
//   128->32 @7x7 0.110 -> 0.083, 128->128 @7x7 0.231 -> 0.219, 512->512 @7x7 batch 2 9.9 -> 5.0;
// losses: 256->256 @7x7 0.80 -> 0.81 and 512->512 @7x7 3.5 -> 4.6 at batch 1 (4 tiles: the transformed
// weights, 4x the raw ones, are streamed for very few tiles), outputs under 7x7 (128->128 @5x5
// 0.135 -> 0.220, 64->64 @4x4 0.030 -> 0.062: 4x4 tiles cover them poorly), and few channels
// (3->64 @224x224 2.6 -> 7.9: the transforms dominate).
// Few output channels (a network's last conv to an image's 3 channels or to 1-7 maps) with 32+ input
// channels: the GEMM paths then pack 9 C im2col values per pixel for at most 7 products each, while
// Winograd's input transform is done once per tile for all M. Zen 5, 1 / 2 threads, ms auto (implicit
// GEMM) -> Winograd: 32->3 @512x512 27.2 -> 6.7 / 20.2 -> 4.9, 64->3 @256x256 14.5 -> 4.3 / 11.0 -> 2.6,
// 64->1 @128x128 3.2 -> 0.88, 32->4 @128x128 1.49 -> 0.29, 128->7 @56x56 1.32 -> 0.46, 64->3 @32x32
// 0.20 -> 0.06, 256->1 @64x64 3.2 -> 1.5 / 1.48 -> 1.23; at the AVX2 cap 32->3 @512x512 28.7 -> 9.9,
// 256->1 @64x64 3.4 -> 2.5 at 1 thread but 1.53 -> 1.59 at 2. With 8-16 input channels (K of 72-144: the
// padded-rows GEMM) the two tie or Winograd loses at 2 threads (16->3 @256x256 at the AVX2 cap 0.60 ->
// 0.63), so those keep the GEMM.
// Rule: >= 8 input channels and >= 8 output channels (or >= 32 input channels), outputs >= 7x7, and >= 8
// tiles in the batch or C * M <= 128 * 128. The kernel override conv.skip=winograd takes it out of the
// kAuto choice (A/B measurements).
bool winograd_preferred(const ConvShape& s) {
  if (!winograd_applies(s)) return false;
  if (s.C < 8 || (s.M < 8 && s.C < 32) || std::min(s.g.out[1], s.g.out[2]) < 7) return false;
  const int64_t tiles = s.N * ((s.g.out[1] + 3) / 4) * ((s.g.out[2] + 3) / 4);
  return tiles >= 8 || s.C * s.M <= 128 * 128;
}

// The most output channels whose products read V in place (winograd_conv's `strips`).
constexpr int64_t kWinogradStripsMaxM = 128;

WinogradPlan winograd_plan(const ConvShape& s, int pool_threads, ep::IsaTier isa, int64_t block_tiles) {
  WinogradPlan p;
  p.N = s.N;
  p.C = s.C;
  p.M = s.M;
  p.IH = s.g.in[1];
  p.IW = s.g.in[2];
  p.OH = s.g.out[1];
  p.OW = s.g.out[2];
  p.pt = s.g.pb[1];
  p.pl = s.g.pb[2];
  p.TH = (p.OH + 3) / 4;
  p.TW = (p.OW + 3) / 4;
  p.isa = isa;
  p.transforms = transforms_for(isa);
  p.total_rows = p.N * p.TH;
  if (p.total_rows == 0 || p.M == 0) return p;  // nblocks 0: nothing to compute
  const int64_t total_rows = p.total_rows;

  // Tiles per block: the block's transformed input (36 x C) and products (36 x M) take 144 * (C + M)
  // bytes per tile, and every block streams all 36 transformed weight matrices (144 * C * M bytes).
  // Aim at ~512 KiB of buffers (half the L2: the transforms are bound by their stores once the buffers
  // spill), but at least C M / (C + M) tiles so that weight traffic does not dominate with many
  // channels, at most ~8 MiB of buffers, and at least 24 tiles so the GEMMs keep the 16-column micro-kernel
  // busy. Measured (ms at 28 / 56 tiles): 64->64 @56x56 0.94 / 1.20, 128->32 @56x56 1.21 / 1.45,
  // 128->128 @28x28 0.94 / 0.85.
  int64_t want = block_tiles;
  if (want <= 0) {
    const int64_t per_tile = 144 * (p.C + p.M);
    want = std::max<int64_t>((int64_t(512) << 10) / per_tile, p.C * p.M / (p.C + p.M));
    want = std::clamp<int64_t>(std::min<int64_t>(want, (int64_t(8) << 20) / per_tile), 24, 512);
  }
  int64_t rows_per_block = std::clamp<int64_t>((want + p.TW / 2) / p.TW, 1, total_rows);
  // Small problems (under ~50 us) stay on the calling thread: each parallel_for waits for every worker
  // to wake, which costs more than it saves. The work counts the GEMMs' multiply-adds, with the tiles
  // rounded up to whole 16-column panels (however few tiles there are, the products stream all 36
  // transformed weight matrices), and the transforms (~100 operations per tile and channel, in and
  // out), which dominate with few channels: SqueezeNet's 16->64 @55x55 (7.2M multiply-adds, 0.45 ms)
  // ran on one thread under a GEMM-only count. About 1M of these take 50-65 us on one Zen 3 thread
  // (16->64 @55x55: 8.8M, 0.45 ms; DenseNet's 128->32 @14x14: 2.6M, 0.17 ms, and @7x7: 2.4M, 0.18 ms).
  // Those two DenseNet convs stayed on one thread under a 4M gate and took 13% of its 2-thread run;
  // split over 2 threads they take 0.09 and 0.10 ms. In-process paired runs at 2 threads, Zen 3:
  // DenseNet-121 0.84-0.92 of the time, the keyword-spotting CNN 0.93, SqueezeNet, Inception-v2, PP-OCR
  // rec and mobile cls, ResNet-50 within 1.5% either way.
  // The gate is that time, so it moves with the tier: an AVX-512 thread does the work in about half the
  // time (16-lane products and transforms), and there 1-2M of it (~25-45 us) ran no faster split. Zen 5
  // (vCPUs ~420 ns apart), 2 threads, in-process paired runs: the keyword-spotting CNN 0.83-0.89 of the
  // time with its 16->16 @76x32 and 24->24 @38x16 convs (2.0M and 1.2M) on one thread; they are the only
  // Winograd convs of `make perf`'s models between the two gates.
  const int64_t tiles = total_rows * p.TW, panel_tiles = (tiles + 15) / 16 * 16;
  const int64_t macs = kPts * p.M * p.C * panel_tiles + 100 * (p.C + p.M) * tiles;
  const int64_t gate = isa >= ep::IsaTier::kAvx512 ? int64_t(2) << 20 : int64_t(1) << 20;
  const int threads = pool_threads > 1 && macs >= gate ? pool_threads : 1;
  // Prefer whole blocks per thread (one wake-up per call): smaller blocks when that gives every thread
  // a few of them and keeps >= 24 tiles per GEMM.
  if (threads > 1 && block_tiles <= 0) {
    const int64_t rows_for_split = (total_rows + 4 * threads - 1) / (4 * threads);  // ~4 blocks a thread
    if (rows_for_split < rows_per_block && rows_for_split * p.TW >= 24) rows_per_block = rows_for_split;
  }
  int64_t nblocks = (total_rows + rows_per_block - 1) / rows_per_block;
  // Blocks split over the threads: a multiple of the threads, the rows spread evenly over them (block b
  // covers rows [b * total_rows / nblocks, (b + 1) * total_rows / nblocks): two sizes at most), so each
  // thread gets an equal share where the rows allow. ResNet-50's 64->64 @56x56 (14 tile rows) took 7
  // blocks of 2 rows, 4 : 3 over 2 threads; 8 blocks of 1-2 rows give 7 : 7. Zen 5, 2 threads, paired
  // runs in both orders: Inception-v2 -1.5%, ResNet-50 -0.6%, SqueezeNet even.
  if (threads > 1 && block_tiles <= 0 && nblocks >= threads)
    nblocks = std::min(total_rows, (nblocks + threads - 1) / threads * threads);
  rows_per_block = (total_rows + nblocks - 1) / nblocks;  // the larger block size
  // A block for every thread, taken whole with >= 80% balance: split blocks (one wake-up per call,
  // buffers per thread); else (one block) split each block's three phases over the threads. Splitting
  // phases shares V and the products between the threads and waits on them three times a block: in-model
  // on Zen 5 at 2 threads, SqueezeNet's 32->128 @27x27 (two blocks, 4 + 3 tile rows) took 245 us with
  // split phases, more than its 175 us on one thread, and 135 us with a block per thread.
  const int64_t rounds = (nblocks + threads - 1) / threads;
  p.threads = threads;
  p.rows_per_block = rows_per_block;
  p.nblocks = nblocks;
  p.split_blocks = threads > 1 && nblocks >= threads && 5 * nblocks >= 4 * rounds * threads;
  p.ld = rows_per_block * p.TW + 8;  // 8 spare columns: see input_avx2
  p.cstride = p.C * p.ld;
  p.mstride = p.M * p.ld;
  p.v_floats = static_cast<size_t>(kPts * p.cstride + 16);
  p.m_floats = static_cast<size_t>(kPts * p.mstride + 16);
  p.in_floats = static_cast<size_t>(12 * input_plane(rows_per_block * p.TW));
  // With few output channels, and where the strips read B rows exactly (AVX-512 masked loads), the 36
  // products read the transformed input V in place instead of packing each C x cols slice into B panels
  // first (a copy of all of V per block, which only M / 6 A panels then share). Zen 5, 1 thread, in-model
  // per-node trace (lower quartile): DenseNet-121's 128->32 3x3 convs @56x56 7.7-7.9 -> 6.6-7.0 ms over
  // 6 convs, @28x28 4.0 -> 3.4-3.5 over 12. With many panels the unaligned rows (ld is not a multiple of
  // 16) cost more than the packing saves: Inception-v2's 64->192 @56x56 1.95 -> 2.14 ms, hence the limit.
  p.strips = p.M <= kWinogradStripsMaxM && gemm_f32_strips_exact(isa);
  if (p.strips) {
    p.row_offsets.resize(static_cast<size_t>(p.C));
    for (int64_t c = 0; c < p.C; ++c) p.row_offsets[static_cast<size_t>(c)] = c * p.ld;
  } else {
    // Each product packs its B block (C x cols of V) on the thread running it: room for the widest, of
    // a full block or the last one (the engine's blocks are not monotone in the column count).
    const int64_t last_rows = total_rows / nblocks;  // the smaller block size (rows_per_block or one fewer)
    p.gemm = gemm_f32_plan(p.M, rows_per_block * p.TW, p.C, GemmA::kPacked, GemmB::kRaw, false, false, 1, isa);
    p.gemm_last = gemm_f32_plan(p.M, last_rows * p.TW, p.C, GemmA::kPacked, GemmB::kRaw, false, false, 1, isa);
    p.gemm_floats = std::max(p.gemm.scratch_floats, p.gemm_last.scratch_floats);
  }
  auto round16 = [](size_t n) { return (n + 15) / 16 * 16; };  // each buffer 64-byte aligned
  p.m_off = round16(p.v_floats);
  p.in_off = p.m_off + round16(p.m_floats);
  p.gemm_off = p.in_off + round16(p.in_floats);
  p.slot_floats = p.gemm_off + p.gemm_floats;  // a slot per thread, whichever thread runs a block
  return p;
}

void winograd_conv(const ConvShape& s, const float* x, const WinogradWeights& w, const float* bias, float* y,
                   ep::ThreadPool* pool, ep::IsaTier isa, int64_t block_tiles) {
  winograd_conv(winograd_plan(s, pool ? pool->num_threads() : 1, isa, block_tiles), x, w, bias, y, pool, ep::SlotMemory{});
}

namespace {
void winograd_run(const WinogradPlan& p, const float* x, const WinogradWeights& w, const float* bias, float* y,
                  ep::ThreadPool* pool, const ep::SlotMemory& slots, const WinogradPost* post);
}  // namespace

void winograd_conv(const WinogradPlan& p, const float* x, const WinogradWeights& w, const float* bias, float* y,
                   ep::ThreadPool* pool, const ep::SlotMemory& slots, const WinogradPost* post) {
  if (p.nblocks == 0) return;
  const int threads = pool ? pool->num_threads() : 1;
  if (slots.base && slots.slots >= threads && slots.stride >= p.slot_bytes()) {
    winograd_run(p, x, w, bias, y, pool, slots, post);
    return;
  }
  const ep::HeapSlots own(p.slot_bytes(), threads);
  winograd_run(p, x, w, bias, y, pool, own.memory(), post);
}

namespace {
// winograd_conv on slots that serve the plan (a slot for every thread of the pool).
void winograd_run(const WinogradPlan& p, const float* x, const WinogradWeights& w, const float* bias, float* y,
                  ep::ThreadPool* pool, const ep::SlotMemory& slots, const WinogradPost* post) {
  // The calling thread's slot: transformed input V, products Mx, input rows.
  const size_t m_off = p.m_off, in_off = p.in_off, g_off = p.gemm_off;
  auto slot = [&]() { return static_cast<float*>(slots.slot(pool ? pool->slot() : 0)); };
  const int64_t total_rows = p.total_rows, nblocks = p.nblocks;
  const int64_t ld = p.ld, cstride = p.cstride, mstride = p.mstride;
  const WinogradPlan::Transforms transforms = p.transforms;
  const bool strips = p.strips, split_blocks = p.split_blocks;
  const ep::IsaTier isa = p.isa;
  // A pool smaller than the plan's (a plan is made at the pool's size) runs the blocks it is given.
  const int threads = pool ? std::min(p.threads, pool->num_threads()) : 1;
  const int64_t* boff = strips ? p.row_offsets.data() : nullptr;

  auto input_phase = [&](const float* xin, int64_t R0, int64_t R1, int64_t c0, int64_t c1, float* V) {
#ifdef NXRT_WINO_X86
    if (transforms == WinogradPlan::Transforms::kAvx512) {
      input_avx512(p, xin, R0, R1, c0, c1, V, ld, cstride, slot() + in_off);
      return;
    }
    if (transforms == WinogradPlan::Transforms::kAvx2) {
      input_avx2(p, xin, R0, R1, c0, c1, V, ld, cstride, slot() + in_off);
      return;
    }
#endif
    input_scalar(p, xin, R0, R1, c0, c1, V, ld, cstride);
  };
  auto output_phase = [&](const float* Mx, int64_t R0, int64_t R1, int64_t m0, int64_t m1) {
#ifdef NXRT_WINO_X86
    if (transforms == WinogradPlan::Transforms::kAvx512) {
      output_avx512(p, Mx, R0, R1, m0, m1, bias, y, ld, mstride, post);
      return;
    }
    if (transforms == WinogradPlan::Transforms::kAvx2) {
      output_avx2(p, Mx, R0, R1, m0, m1, bias, y, ld, mstride, post);
      return;
    }
#endif
    output_scalar(p, Mx, R0, R1, m0, m1, bias, y, ld, mstride, post);
  };
  auto gemms = [&](int64_t cols, const float* V, float* Mx, int64_t xi0, int64_t xi1) {
    if (strips) {
      for (int64_t xi = xi0; xi < xi1; ++xi)
        gemm_f32_strips(p.M, p.C, w.u[xi].data.data(), V + xi * cstride, boff, cols, Mx + xi * mstride, ld, 0,
                        nullptr, isa);
      return;
    }
    // Called inside a chunk (or on the one thread): the GEMM runs single-threaded on this thread's
    // slot, whose packing region is its own even where V and Mx are the caller's (phases split).
    const GemmScratch gs{slot() + g_off, p.gemm_floats, 1};
    const GemmPlan& gp = cols == p.gemm.N ? p.gemm : p.gemm_last;  // a full block or the last one
    assert(gp.N == cols);
    for (int64_t xi = xi0; xi < xi1; ++xi) {
      gemm_f32_packed_a(gp, 1.f, w.u[xi].data.data(), V + xi * cstride, ld, 0.f, Mx + xi * mstride, ld, nullptr,
                        nullptr, &gs);
    }
  };

  if (split_blocks || threads == 1) {
    auto body = [&](int64_t b0, int64_t b1) {
      float* V = slot();
      float* Mx = slot() + m_off;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t R0 = b * total_rows / nblocks, R1 = (b + 1) * total_rows / nblocks;
        const int64_t cols = (R1 - R0) * p.TW;
        input_phase(x, R0, R1, 0, p.C, V);
        gemms(cols, V, Mx, 0, kPts);
        output_phase(Mx, R0, R1, 0, p.M);
      }
    };
    if (threads > 1) {
      pool->parallel_for(nblocks, 1, body);
    } else {
      body(0, nblocks);
    }
    return;
  }
  // Few blocks: each phase split over the threads, the caller's V and Mx shared (input rows per thread).
  float* V = slot();
  float* Mx = slot() + m_off;
  for (int64_t b = 0; b < nblocks; ++b) {
    const int64_t R0 = b * total_rows / nblocks, R1 = (b + 1) * total_rows / nblocks;
    const int64_t cols = (R1 - R0) * p.TW;
    pool->parallel_for(p.C, 1, [&](int64_t c0, int64_t c1) { input_phase(x, R0, R1, c0, c1, V); });
    pool->parallel_for(kPts, 1, [&](int64_t x0, int64_t x1) { gemms(cols, V, Mx, x0, x1); });
    pool->parallel_for(p.M, 1, [&](int64_t m0, int64_t m1) { output_phase(Mx, R0, R1, m0, m1); });
  }
}
}  // namespace

}  // namespace nxrt::ops
