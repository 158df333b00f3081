#include "ops/conv/small_spatial.h"

#include <algorithm>
#include <cstring>

#include "ep/cpu_features.h"
#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "ops/conv/conv_engine.h"
#include "ops/fused/fused_ops.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_SSP_X86 1
#endif

namespace nxrt::ops {

namespace {

constexpr int kRows = 7;    // pixels per tile (the broadcast dimension)
constexpr int kVec = 16;    // output channels per vector (the PackedB panel width)
constexpr int kMaxNV = 3;   // vectors per tile: 7 x 48 accumulators
constexpr int kTileCols = kVec * kMaxNV;
// The direct path's vectors per tile: 6 x 64 accumulators (24; 10 loads per 24 FMAs) rather than 6 x 48
// (18; 9 per 18). Zen 5, in-process paired against 6 x 48 (both prefetching): ResNet-50 0.987 / 0.988 at
// 1 / 2 threads, SqueezeNet 0.98 / 0.97.
constexpr int kDirectNV = 4;
// The direct path: convs of fewer multiply-adds run on the calling thread (a wake-up costs more than
// the split saves: PP-OCR cls's 1x1 32->16 @3x96 took 3 us split, 1-2 on one thread); inputs over twice
// kDirectBlockBytes go in pixel blocks of about that size, each passed over by every 6-channel panel
// while it stays in L2 (else every panel streams all of x from L3: PP-OCRv4 det's 1x1 48->48 @160x160
// 1.60 -> 1.18 ms); at 2+ threads large planes split into ~kDirectBlocksPerThread pixel blocks a thread.
constexpr int64_t kDirectParallelMacs = int64_t(1) << 20;
constexpr int64_t kDirectBlockBytes = int64_t(256) << 10;
constexpr int64_t kDirectBlocksPerThread = 4;
// Whether the direct path splits this conv over a pool of `threads` (else it runs on the calling thread):
// what small_spatial_choice's rule assumes and small_spatial_direct_conv does.
bool direct_splits(const ConvShape& s, int threads) {
  return threads > 1 && s.N * s.M * (s.C / s.group * s.g.kvol()) * s.g.out_size() >= kDirectParallelMacs;
}
static_assert(kGemmNR == kVec, "the kernel reads PackedB panels one vector wide");

// The post activation the kernels apply in their store: 0 none, 1 Relu, 2 Clip (lo, hi), 3 LeakyRelu
// (slope in lo).
int small_spatial_act_code(const ConvPost* post) {
  if (!post) return 0;
  switch (post->act) {
    case Activation::kRelu: return 1;
    case Activation::kClip: return 2;
    case Activation::kLeakyRelu: return 3;
    default: return 0;
  }
}

// The kernels use AVX-512F/VL (and the engine's AVX2 GEMM kernels beside them): the AVX-512 tier.
bool tier_ok(ep::IsaTier isa) {
#ifdef NXRT_SSP_X86
  return isa >= ep::IsaTier::kAvx512 && ep::cpu_isa_tier() >= ep::IsaTier::kAvx512;
#else
  (void)isa;
  return false;
#endif
}

#ifdef NXRT_SSP_X86
// One tile: 7 pixel rows (the packed panel `a`, K x 7) by NV 16-channel vectors (PackedB panels q0..),
// over the K range [k0, k1) (k0 a multiple of kGemmKC). The accumulators start at zero (`first`) or
// from acc (7 x kTileCols); unless `last` they are saved to acc. When `last`: with y set, bias (or
// null) is added and the tile is written transposed to y (row r, channel j at y[j * ldy + r]; nrows
// rows, mcount channels valid: an in-register 8x16 transpose per vector and masked 7-float stores);
// without y, the biased tile goes to acc for the caller to scatter. Each k step also prefetches one
// 64-byte line of [pf, pf + 16 * pf_lines) into L2 while any are left (weights the next tiles read).
template <int NV>
__attribute__((target("avx512f,avx512vl"))) void tile_avx512(int64_t k0, int64_t k1, int64_t K, const float* a,
                                                              const float* b, int64_t n_padded, int64_t q0,
                                                              float* acc, bool first, bool last, float* y,
                                                              int64_t ldy, int nrows, int mcount,
                                                              const float* bias, const float* res, int act,
                                                              float lo_clip, float hi_clip, const float* pf,
                                                              int64_t pf_lines) {
  __m512 c[kRows][NV];
  const float* pf_end = pf + 16 * pf_lines;
  if (first) {
#pragma GCC unroll 7
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_setzero_ps();
  } else {
#pragma GCC unroll 7
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) c[r][v] = _mm512_loadu_ps(acc + r * kTileCols + v * kVec);
  }
  for (int64_t p0 = k0; p0 < k1; p0 += kGemmKC) {
    const int64_t kc = std::min<int64_t>(kGemmKC, K - p0);
    const int64_t kend = std::min<int64_t>(kc, k1 - p0);
    const float* bp = b + p0 * n_padded + q0 * kVec * kc;
    const int64_t bstride = kVec * kc;
    const float* ap = a + p0 * kRows;
#pragma GCC unroll 1
    for (int64_t k = 0; k < kend; ++k) {
      if (pf < pf_end) {
        _mm_prefetch(reinterpret_cast<const char*>(pf), _MM_HINT_T1);
        pf += 16;
      }
      __m512 bv[NV];
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) bv[v] = _mm512_loadu_ps(bp + v * bstride);
#pragma GCC unroll 7
      for (int r = 0; r < kRows; ++r) {
        const __m512 av = _mm512_set1_ps(ap[r]);
#pragma GCC unroll 3
        for (int v = 0; v < NV; ++v) c[r][v] = _mm512_fmadd_ps(av, bv[v], c[r][v]);
      }
      bp += kVec;
      ap += kRows;
    }
  }
  if (!last || !y) {
    if (last && bias) {
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) {
        const int left = mcount - v * kVec;
        const __mmask16 m = left >= kVec ? __mmask16(0xFFFF) : left <= 0 ? __mmask16(0) : __mmask16((1u << left) - 1);
        const __m512 bb = _mm512_maskz_loadu_ps(m, bias + v * kVec);
#pragma GCC unroll 7
        for (int r = 0; r < kRows; ++r) c[r][v] = _mm512_add_ps(c[r][v], bb);
      }
    }
#pragma GCC unroll 7
    for (int r = 0; r < kRows; ++r)
#pragma GCC unroll 3
      for (int v = 0; v < NV; ++v) _mm512_storeu_ps(acc + r * kTileCols + v * kVec, c[r][v]);
    return;
  }
  const __mmask8 rmask = static_cast<__mmask8>((1u << nrows) - 1);
#pragma GCC unroll 1
  for (int v = 0; v < NV; ++v) {
    const int left = mcount - v * kVec;
    if (left <= 0) break;
    __m512 r0 = c[0][v], r1 = c[1][v], r2 = c[2][v], r3 = c[3][v], r4 = c[4][v], r5 = c[5][v], r6 = c[6][v];
    if (bias) {
      const __mmask16 m = left >= kVec ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1);
      const __m512 bb = _mm512_maskz_loadu_ps(m, bias + v * kVec);
      r0 = _mm512_add_ps(r0, bb), r1 = _mm512_add_ps(r1, bb), r2 = _mm512_add_ps(r2, bb);
      r3 = _mm512_add_ps(r3, bb), r4 = _mm512_add_ps(r4, bb), r5 = _mm512_add_ps(r5, bb);
      r6 = _mm512_add_ps(r6, bb);
    }
    const __m512 r7 = _mm512_setzero_ps();
    // Per 128-bit lane L (channels 4L..4L+3): u_i holds channel 4L+i of rows 0..3, u_{4+i} of rows 4..7.
    const __m512 t0 = _mm512_unpacklo_ps(r0, r1), t1 = _mm512_unpackhi_ps(r0, r1);
    const __m512 t2 = _mm512_unpacklo_ps(r2, r3), t3 = _mm512_unpackhi_ps(r2, r3);
    const __m512 t4 = _mm512_unpacklo_ps(r4, r5), t5 = _mm512_unpackhi_ps(r4, r5);
    const __m512 t6 = _mm512_unpacklo_ps(r6, r7), t7 = _mm512_unpackhi_ps(r6, r7);
    __m512 u[8];
    u[0] = _mm512_shuffle_ps(t0, t2, 0x44), u[1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    u[2] = _mm512_shuffle_ps(t1, t3, 0x44), u[3] = _mm512_shuffle_ps(t1, t3, 0xEE);
    u[4] = _mm512_shuffle_ps(t4, t6, 0x44), u[5] = _mm512_shuffle_ps(t4, t6, 0xEE);
    u[6] = _mm512_shuffle_ps(t5, t7, 0x44), u[7] = _mm512_shuffle_ps(t5, t7, 0xEE);
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      // lo = [u_i.0, u_{4+i}.0, u_i.1, u_{4+i}.1]: channels i (low half) and 4 + i (high half);
      // hi likewise for channels 8 + i and 12 + i.
      const __m512 lo = _mm512_shuffle_f32x4(_mm512_shuffle_f32x4(u[i], u[4 + i], 0x44),
                                             _mm512_shuffle_f32x4(u[i], u[4 + i], 0x44), 0xD8);
      const __m512 hi = _mm512_shuffle_f32x4(_mm512_shuffle_f32x4(u[i], u[4 + i], 0xEE),
                                             _mm512_shuffle_f32x4(u[i], u[4 + i], 0xEE), 0xD8);
      const __m256 o[4] = {_mm512_castps512_ps256(lo),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(lo), 1)),
                           _mm512_castps512_ps256(hi),
                           _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(hi), 1))};
#pragma GCC unroll 4
      for (int h = 0; h < 4; ++h) {
        const int ch = 4 * h + i;
        if (ch >= left) continue;
        __m256 val = o[h];
        const int64_t off = (v * kVec + ch) * ldy;
        if (res) val = _mm256_add_ps(val, _mm256_maskz_loadu_ps(rmask, res + off));
        if (act == 1) val = _mm256_max_ps(val, _mm256_setzero_ps());
        if (act == 2) val = _mm256_min_ps(_mm256_max_ps(val, _mm256_set1_ps(lo_clip)), _mm256_set1_ps(hi_clip));
        if (act == 3)  // LeakyRelu, slope in lo_clip: a * v where !(v >= 0)
          val = _mm256_mask_mul_ps(val, _mm256_cmp_ps_mask(val, _mm256_setzero_ps(), _CMP_NGE_UQ), val,
                                   _mm256_set1_ps(lo_clip));
        _mm256_mask_storeu_ps(y + off, rmask, val);
      }
    }
  }
}

// Packs one panel whose 7 pixels are consecutive in the input (base[r] = base[0] + r): per channel and
// kernel position, one masked 7-float load and store.
__attribute__((target("avx512f,avx512vl"))) void pack_panel_contiguous(const float* x, int64_t cs, int64_t Cg,
                                                                        const int64_t* koff, int64_t kvol,
                                                                        float* dst) {
  const __mmask8 m = 0x7F;
  for (int64_t c = 0; c < Cg; ++c) {
    const float* xc = x + c * cs;
    for (int64_t kp = 0; kp < kvol; ++kp) {
      _mm256_mask_storeu_ps(dst, m, _mm256_maskz_loadu_ps(m, xc + koff[kp]));
      dst += kRows;
    }
  }
}

// The same for pixels 2 apart (base[r] = base[0] + 2r: stride 2): one masked 13-float load, the even
// lanes picked by a permute.
__attribute__((target("avx512f,avx512vl"))) void pack_panel_stride2(const float* x, int64_t cs, int64_t Cg,
                                                                     const int64_t* koff, int64_t kvol, float* dst) {
  const __mmask16 lm = 0x1FFF;
  const __mmask8 m = 0x7F;
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  for (int64_t c = 0; c < Cg; ++c) {
    const float* xc = x + c * cs;
    for (int64_t kp = 0; kp < kvol; ++kp) {
      const __m512 v = _mm512_permutexvar_ps(even, _mm512_maskz_loadu_ps(lm, xc + koff[kp]));
      _mm256_mask_storeu_ps(dst, m, _mm512_castps512_ps256(v));
      dst += kRows;
    }
  }
}
#endif

struct TileArgs {
  int64_t k0, k1, K;
  const float* a;
  const PackedB* b;
  int64_t q0;
  float* acc;
  bool first, last;
  float* y;
  int64_t ldy;
  int nrows, mcount;
  const float* bias;
  const float* res;  // residual at y's offset, or null
  int act;           // small_spatial_act_code
  float lo, hi;
  const float* pf = nullptr;  // lines to prefetch (tile_avx512)
  int64_t pf_lines = 0;
};

// A run of 64-byte lines of packed W^T to prefetch.
struct PfRegion {
  const float* at;
  int64_t lines;
};
// KC blocks of one unchunked K (up to 1.5 chunks) or of one chunk.
constexpr int kMaxPfRegions = 4;

void run_tile(int nv, const TileArgs& t) {
#ifdef NXRT_SSP_X86
  const float* bd = t.b->data.data();
  const int64_t np = t.b->n_padded;
  switch (nv) {
    case 1: return tile_avx512<1>(t.k0, t.k1, t.K, t.a, bd, np, t.q0, t.acc, t.first, t.last, t.y, t.ldy, t.nrows, t.mcount, t.bias, t.res, t.act, t.lo, t.hi, t.pf, t.pf_lines);
    case 2: return tile_avx512<2>(t.k0, t.k1, t.K, t.a, bd, np, t.q0, t.acc, t.first, t.last, t.y, t.ldy, t.nrows, t.mcount, t.bias, t.res, t.act, t.lo, t.hi, t.pf, t.pf_lines);
    default: return tile_avx512<3>(t.k0, t.k1, t.K, t.a, bd, np, t.q0, t.acc, t.first, t.last, t.y, t.ldy, t.nrows, t.mcount, t.bias, t.res, t.act, t.lo, t.hi, t.pf, t.pf_lines);
  }
#else
  (void)nv, (void)t;
#endif
}

// Geometry of the packed input: x itself (no pads) or a zero-padded copy.
struct Src {
  const float* x = nullptr;
  int64_t dims[3] = {1, 1, 1};  // (padded) spatial dims
  int64_t cs = 0;               // channel stride
};

// The input as both paths pack it: x itself when the conv has no pads, else a zero-padded copy of all
// N * C planes in `scratch`. `koff` gets the offsets of the kernel taps (kd, kh, kw) from a window's
// origin in that layout.
bool has_pads(const Geom3& g) { return g.pb[0] || g.pb[1] || g.pb[2] || g.pe[0] || g.pe[1] || g.pe[2]; }

// Floats of the padded copy padded_source writes (0 without pads).
int64_t padded_floats(const ConvShape& s) {
  const Geom3& g = s.g;
  if (!has_pads(g)) return 0;
  return s.N * s.C * (g.in[0] + g.pb[0] + g.pe[0]) * (g.in[1] + g.pb[1] + g.pe[1]) * (g.in[2] + g.pb[2] + g.pe[2]);
}

// The input copies both paths make before their products (the padded planes below, the direct path's
// gathered columns) run on the pool's threads, plane by plane, from kCopyParallelFloats floats in all
// (8K: copying and zeroing them takes ~5 us). ResNet-50's 512 x 7x7 padded planes took 26-33 us on the
// calling thread, the other idle, inside each of its two 3x3 convs at 7x7.
constexpr int64_t kCopyParallelFloats = int64_t{1} << 13;

// The layout padded_source gives (x, or the padded copy at xp), and the tap offsets, without copying.
Src source_layout(const ConvShape& s, const float* x, float* xp, int64_t* koff) {
  const Geom3& g = s.g;
  Src src;
  const bool pads = has_pads(g);
  for (int i = 0; i < 3; ++i) src.dims[i] = g.in[i] + (pads ? g.pb[i] + g.pe[i] : 0);
  src.cs = src.dims[0] * src.dims[1] * src.dims[2];
  src.x = pads ? xp : x;
  const int64_t plane1 = src.dims[1] * src.dims[2];
  for (int64_t kd = 0, t = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, ++t)
        koff[t] = kd * g.d[0] * plane1 + kh * g.d[1] * src.dims[2] + kw * g.d[2];
  return src;
}

// Writes the zero-padded copy of x's N * C planes at xp (src from source_layout; nothing without pads).
void copy_padded(const ConvShape& s, const float* x, float* xp, const Src& src, ep::ThreadPool* pool) {
  const Geom3& g = s.g;
  if (!has_pads(g)) return;
  const int64_t in_size = g.in_size(), IW = g.in[2], PWd = src.dims[2];
  // Each plane: the pad rows and columns zeroed, the input rows copied between them (a plain loop: the
  // rows are short).
  auto copy = [&](int64_t t0, int64_t t1) {
    for (int64_t nc = t0; nc < t1; ++nc) {
      const float* xs = x + nc * in_size;
      float* xd = xp + nc * src.cs;
      std::memset(xd, 0, sizeof(float) * static_cast<size_t>(src.cs));
      for (int64_t id = 0; id < g.in[0]; ++id)
        for (int64_t ih = 0; ih < g.in[1]; ++ih) {
          const float* r = xs + (id * g.in[1] + ih) * IW;
          float* d = xd + ((id + g.pb[0]) * src.dims[1] + ih + g.pb[1]) * PWd + g.pb[2];
          for (int64_t iw = 0; iw < IW; ++iw) d[iw] = r[iw];
        }
    }
  };
  const int64_t planes = s.N * s.C;
  if (pool && pool->num_threads() > 1 && planes > 1 && planes * src.cs >= kCopyParallelFloats) {
    pool->parallel_for(planes, 1, copy);
  } else {
    copy(0, planes);
  }
}

Src padded_source(const ConvShape& s, const float* x, float* xp, int64_t* koff, ep::ThreadPool* pool) {
  const Src src = source_layout(s, x, xp, koff);
  copy_padded(s, x, xp, src, pool);
  return src;
}

// The transposed path's K chunks: long K runs in chunks of kTransposedKChunk so a tile's slice of W^T
// stays in L2 across the pixel panels, the accumulators of every panel waiting in the thread's slot.
constexpr int64_t kTransposedKChunk = 2 * kGemmKC;
bool transposed_chunked(int64_t K) { return K > kTransposedKChunk + kTransposedKChunk / 2; }

// The transposed path's scratch in one workspace: the tap offsets, the padded input copy, the packed
// col^T of every group (both copies one a thread with transposed_private_pack), one accumulator slot per
// pool thread (its work items' chunked K) and the per-thread "packed" flags.
struct TransposedScratch {
  ScratchLayout lay;
  size_t koff = 0, pad = 0, a = 0, acc = 0, packed = 0;
  int64_t acc_stride = 0;  // floats per accumulator slot (64-byte aligned)
  int64_t pad_stride = 0;  // floats per padded copy (one, or one a thread: transposed_private_pack)
};
// col^T of one group: its pixel panels of 7 rows, K x 7 floats each.
int64_t transposed_group_floats(const ConvShape& s) {
  const int64_t K = s.C / s.group * s.g.kvol(), panels = (s.N * s.g.out_size() + kRows - 1) / kRows;
  return panels * K * kRows;
}

// Whether each thread packs its own copy of the padded input and col^T (one group split over the threads
// by output channels, so every thread reads all of col^T): a thread then reads only what it wrote itself.
// Packed once and shared, each thread reads what the other wrote, and the next call's writer must first
// take back the lines the reader holds; when the two vCPUs share no cache those transfers are slow. Zen 5,
// 3x3 512->512 @7x7 (ResNet-50's stage 4) alone at 2 threads, processes alternated: 0.89-0.94 -> 0.80-0.90
// ms in minutes where the shared padded copy and pack took 25 + 78 us a call (9 + 19 us in others); inside
// ResNet-50 within noise. Only for col^T of at most kPrivatePackBytes (it should stay in L2).
constexpr int64_t kPrivatePackBytes = int64_t(1) << 20;
bool transposed_private_pack(const ConvShape& s, int threads) {
  const int64_t nvec = (s.M / s.group + kVec - 1) / kVec;
  return threads > 1 && s.group == 1 && nvec > 1 &&
         transposed_group_floats(s) * int64_t(sizeof(float)) <= kPrivatePackBytes;
}

TransposedScratch transposed_scratch(const ConvShape& s, int threads) {
  const int64_t Cg = s.C / s.group, K = Cg * s.g.kvol();
  const int64_t rows = s.N * s.g.out_size(), panels = (rows + kRows - 1) / kRows;
  const bool priv = transposed_private_pack(s, threads);
  TransposedScratch t;
  t.acc_stride = ((transposed_chunked(K) ? panels : 1) * kRows * kTileCols + 15) / 16 * 16;
  t.koff = t.lay.add<int64_t>(s.g.kvol());
  t.pad_stride = (padded_floats(s) + 15) / 16 * 16;
  t.pad = t.lay.add<float>((priv ? threads : 1) * t.pad_stride);
  t.a = t.lay.add<float>((priv ? threads : s.group) * transposed_group_floats(s));
  t.acc = t.lay.add<float>(std::max(1, threads) * t.acc_stride);
  t.packed = t.lay.add<int32_t>(std::max(1, threads));
  return t;
}

// The direct path's: the tap offsets and each output pixel's window offset, the pre-activated input
// (FusedConv's BN-ReLU before a 1x1), the padded copy and the im2col rows (not for 1x1 convs).
struct DirectScratch {
  ScratchLayout lay;
  size_t koff = 0, pbase = 0, pre = 0, pad = 0, col = 0;
};
bool direct_pointwise(const Geom3& g) {
  bool pw = true;
  for (int i = 0; i < 3; ++i) pw = pw && g.k[i] == 1 && g.s[i] == 1 && g.pb[i] == 0 && g.pe[i] == 0;
  return pw;
}
DirectScratch direct_scratch(const ConvShape& s, bool pre) {
  const Geom3& g = s.g;
  const int64_t P = g.out_size(), Pp = (P + kVec - 1) / kVec * kVec, K = s.C / s.group * g.kvol();
  const bool pointwise = direct_pointwise(g);
  DirectScratch d;
  d.koff = d.lay.add<int64_t>(g.kvol());
  d.pbase = d.lay.add<int64_t>(pointwise ? 0 : P);
  d.pre = d.lay.add<float>(pre ? s.N * s.C * P : 0);
  d.pad = d.lay.add<float>(pointwise ? 0 : padded_floats(s));
  d.col = d.lay.add<float>(pointwise ? 0 : s.N * s.group * K * Pp);
  return d;
}

}  // namespace

bool small_spatial_weights_apply(const Dims& w_shape, int64_t group) {
  if (w_shape.size() < 3 || w_shape.size() > 5 || group < 1) return false;
  if (w_shape[0] <= 0 || w_shape[0] % group != 0) return false;
  return w_shape[1] > 1 || w_shape[0] / group > 1;  // not depthwise
}

void small_spatial_prepare(int64_t M, int64_t group, int64_t K, const float* w, SmallSpatialWeights* out) {
  const int64_t Mg = M / group;
  out->M = M;
  out->group = group;
  out->K = K;
  out->wt.clear();
  out->wt.reserve(static_cast<size_t>(group));
  // op(B) = W_g^T: B stored as W_g (Mg x K), transposed.
  for (int64_t g = 0; g < group; ++g) out->wt.push_back(pack_b_f32(true, K, Mg, w + g * Mg * K, K));
}

static std::shared_ptr<SmallSpatialWeights> make_small_spatial_weights(const std::vector<PackedA<float>>& packed) {
  auto out = std::make_shared<SmallSpatialWeights>();
  SmallSpatialWeights& w = *out;
  {
    // Repack each group's PackedA<float> (gemm/gemm.h: per K block of kGemmKC starting at k0, offset k0 * m_padded,
    // 6-row panels of kc x 6, element (i, k) at panel i / 6, k * 6 + i % 6) straight into the PackedB
    // layout of W^T (per K block at k0 * n_padded, 16-column panels of kc x 16, element (k, j) at panel
    // j / 16, k * 16 + j % 16): both use the same K blocks, and no unpacked temporary is made.
    const int64_t group = static_cast<int64_t>(packed.size());
    if (group == 0) return out;
    const int64_t Mg = packed[0].M, K = packed[0].K;
    const int64_t m_padded = (Mg + kGemmMR - 1) / kGemmMR * kGemmMR;
    w.M = Mg * group;
    w.group = group;
    w.K = K;
    w.wt.resize(static_cast<size_t>(group));
    for (int64_t g = 0; g < group; ++g) {
      PackedB& pb = w.wt[static_cast<size_t>(g)];
      pb.K = K;
      pb.N = Mg;
      pb.n_padded = (Mg + kVec - 1) / kVec * kVec;
      pb.data = PackedArray<float>(static_cast<size_t>(std::max<int64_t>(1, pb.n_padded * K)));
      for (int64_t k0 = 0; k0 < K; k0 += kGemmKC) {
        const int64_t kc = std::min(kGemmKC, K - k0);
        const float* src = packed[g].data.data() + k0 * m_padded;
        float* dst = pb.data.data() + k0 * pb.n_padded;
        for (int64_t i = 0; i < Mg; ++i) {
          const float* sp = src + (i / kGemmMR) * kGemmMR * kc + i % kGemmMR;
          float* dp = dst + (i / kVec) * kVec * kc + i % kVec;
          for (int64_t k = 0; k < kc; ++k) dp[k * kVec] = sp[k * kGemmMR];
        }
      }
    }
  }
  return out;
}

std::shared_ptr<const SmallSpatialWeights> SmallSpatialCache::acquire(const std::vector<PackedA<float>>& packed) const {
  return lazy_.acquire([&] { return make_small_spatial_weights(packed); });
}

bool small_spatial_applies(const ConvShape& s, ep::IsaTier isa) {
  if (!tier_ok(isa)) return false;
  const Geom3& g = s.g;
  if (s.N < 1 || s.group < 1 || s.C % s.group != 0 || s.M % s.group != 0) return false;
  if (s.C == s.group && s.M == s.group) return false;  // depthwise
  if (g.out_size() <= 0) return false;
  for (int i = 0; i < 3; ++i) {
    if (g.pb[i] < 0 || g.pe[i] < 0 || g.s[i] < 1 || g.d[i] < 1 || g.k[i] < 1) return false;
    // Every window lies inside the padded input.
    if ((g.out[i] - 1) * g.s[i] + (g.k[i] - 1) * g.d[i] >= g.in[i] + g.pb[i] + g.pe[i]) return false;
  }
  return true;
}

// A plane 7 or 8 pixels on a side that Winograd's 4x4 tiles still cover closely (at most 15% of the
// tiles' outputs past the plane) and with 6+ tiles: Winograd wins there too. Zen 5, 1 thread, one conv
// alone (small-spatial -> Winograd, us): 32->32 @19x8 25.9 -> 17.2 (the keyword-spotting CNN's four),
// @16x8 29.8 -> 24.0, @12x8 17.4 -> 16.4, @7x28 26.1 -> 18.0, 64->64 @8x24 82.9 -> 45.6, 128->32 @8x16
// 73.2 -> 56.1, 256->256 @8x12 590 -> 542, 16->16 @8x32 18.9 -> 9.6 (2 threads alike or more); and
// where it does not: 4 tiles (32->32 @8x8 12.9 -> 15.4, 128->32 @8x8 55.1 -> 65.6) or a third of
// the tiles' outputs wasted (@9x8 18.8 -> 22.4, @7x14 17.4 -> 20.6). The keyword-spotting CNN whole
// (in-process paired runs): 0.93-0.95 of the time at 1 thread, 0.88-0.92 at 2.
namespace {
bool winograd_tiles_fit(const ConvShape& s) {
  const int64_t oh = s.g.out[1], ow = s.g.out[2], th = (oh + 3) / 4, tw = (ow + 3) / 4;
  return s.N * th * tw >= 6 && 16 * th * tw * 100 <= 115 * oh * ow;
}
}  // namespace

// The kAuto rule. Every path here and the usual ones run near the core's FMA peak on their padded work,
// so the choice is the share of useful work: the usual path pads output channels to 6-row panels and
// each image's pixels to 16-column panels (49 -> 64); the transposed path pads the pixels of the batch
// to 7-row tiles (49 -> 49, 196 -> 196, 169 -> 175) and the output channels to 16; the direct path pads
// like the usual one except a last pixel alone (16q + 1), which costs 1/12 of a vector.
// - 1x1 convs (any stride): direct when its share is 5% higher (7x7 outputs) or at 2+ threads (see below).
// - other convs: transposed when its share is not lower (both paths pack x then), unless Winograd is
//   preferred on a plane over 8x8 or one its tiles fit (winograd_tiles_fit).
// - planes of 2..256 pixels, K >= 32, >= 8 output channels a group.
// Measured per conv (ms, usual -> chosen path, 1 thread / 2 threads; AMD EPYC Zen 4; main's fused-epilogue
// GEMM paths as the usual ones):
//   1x1 512->2048 @7x7 1.27 -> 0.93 / 0.62 -> 0.46 (direct);  1x1 2048->512 @7x7 1.26 -> 0.93 / 0.68 -> 0.46;
//   1x1 1024->2048 s2 14->7 2.99 -> 2.04 / 1.36 -> 0.96;     1x1 1024->352 @7x7 0.52 -> 0.32 / 0.22 -> 0.16;
//   1x1 544->544 g4 @7x7 0.093 -> 0.068 / 0.047 -> 0.035;    1x1 1024->256 @14x14 2 threads 0.59 -> 0.51;
//   1x1 576->224 @14x14 2 threads 0.28 -> 0.25 (1 thread: 1.00 -> 1.01 and 0.51 -> 0.50, so not taken);
//   3x3 512->512 @7x7 3.43 -> 2.39 / 1.86 -> 1.43 (transposed); 3x3 192->320 @7x7 0.73 -> 0.50 / 0.38 -> 0.28;
//   3x3 224->224 @7x7 0.62 -> 0.41 / 0.34 -> 0.24;            3x3 s2 256->256 28->14 2.53 -> 2.19 / 1.39 -> 1.20.
// Left to the usual paths: 3x3 @13x13..14x14 (Winograd: 3x3 256->256 @14x14 0.85 vs 2.16 transposed),
// planes over 16x16 (3x3 s2 128->128 56->28: 2.62 -> 2.30 but 1.31 -> 1.37 at 2 threads).
// conv_forward's kAuto asks this rule before Winograd, so 3x3 convs Winograd would take at 7x7 come here
// (3x3 128->32 @7x7: Winograd 0.084, transposed 0.040; Zen 5, ms of CPU: 0.069 -> 0.026).
SmallSpatialChoice small_spatial_choice(const ConvShape& s, int threads, ep::IsaTier isa) {
  if (!small_spatial_applies(s, isa)) return SmallSpatialChoice::kNone;
  const int64_t P = s.g.out_size();
  const int64_t Mg = s.M / s.group, K = s.C / s.group * s.g.kvol();
  const bool pointwise = s.g.kvol() == 1 && s.g.s[0] == 1 && s.g.s[1] == 1 && s.g.s[2] == 1 && s.g.pb[0] == 0 &&
                         s.g.pb[1] == 0 && s.g.pb[2] == 0 && s.g.pe[0] == 0 && s.g.pe[1] == 0 && s.g.pe[2] == 0;
  // 1x1 convs on planes over 256 pixels: direct where it beats the 1x1 GEMM, which packs B panels that
  // only Mg / 6 A panels then share. On one thread (or work too small to split) for up to 512 output
  // channels and 768 KiB of weights (each pixel block passes over all of them); at 2+ threads for few
  // output channels (<= 64: the GEMM splits large problems better), K >= 32, planes up to 80x80. Zen 5,
  // per-node traces over the CNNs of `make perf` (usual -> direct, ms): 1 thread: ResNet-50's 1x1s
  // 28.3 -> 26.5 over the model, SqueezeNet 256->32 @27x27 0.130 -> 0.093, Inception-v1 192->32 @28x28
  // 0.104 -> 0.061, PP-OCRv4 rec 128->128 @8x240 0.546 -> 0.436; 2 threads: SqueezeNet 128->16 @55x55
  // 0.088 -> 0.070, PP-OCRv4 det 96->18 @80x80 0.217 -> 0.177. Left to the GEMM: K < 16 (det's 12->96
  // @160x160 0.74 -> 0.90 direct), 1000+ output channels at 1 thread, 96+ at 2 (det 192->192 @40x40
  // 1.67 -> 1.87).
  if (pointwise && P > 256 && Mg >= 8 && K >= 16 && Mg * K * int64_t(sizeof(float)) <= (int64_t(768) << 10)) {
    const bool take = direct_splits(s, threads) ? Mg <= 64 && K >= 32 && P <= 6400 : Mg <= 512;
    return take ? SmallSpatialChoice::kDirect : SmallSpatialChoice::kNone;
  }
  if (P < 2 || P > 256 || K < 32 || Mg < 8) return SmallSpatialChoice::kNone;
  // Winograd F(4x4, 3x3) wins from 9x9 planes on (3x3 256->256 @14x14 0.87 ms vs 2.19 here); at 7x7
  // its 4x4 tiles cover 64 outputs for 49 and this path wins (3x3 128->32 @7x7 0.083 -> 0.040).
  if (winograd_preferred(s) && (std::min(s.g.out[1], s.g.out[2]) > 8 || winograd_tiles_fit(s))) {
    return SmallSpatialChoice::kNone;
  }
  const auto up = [](int64_t v, int64_t m) { return double((v + m - 1) / m * m); };
  const double rows = double(s.N * P);
  const double share_new = (double(Mg) / up(Mg, kVec)) * (rows / up(s.N * P, kRows));
  const double share_old = (double(Mg) / up(Mg, kGemmMR)) * (double(P) / up(P, kGemmNR));
  // 1x1 convs (any stride): the direct path, on the conv's own weights, when its share is higher (planes
  // of 16q + 1 pixels) or at 2+ threads (it splits the output channels evenly over the threads: 1x1
  // 1024->256 @14x14 0.59 -> 0.51 ms, 576->224 @14x14 0.28 -> 0.25 at 2 threads; 1.00 -> 1.01 and
  // 0.50 -> 0.50 at 1). At 1 thread on 14x14 it stays off: on a Zen 5 it wins in isolation
  // (nxrt_microbench BM_ConvSmallPlane, ms of CPU: 640->128 0.193 -> 0.170, 1024->256 0.584 -> 0.576)
  // but not inside ResNet-50 / DenseNet-121 runs (per-node trace: 1024->256 @14x14 4.41 -> 4.65 ms over
  // its convs), where x (up to 800 KiB) is read again per 6-channel panel over the whole K and spills
  // out of L2 beside the streamed weights, while the GEMM's K blocks keep its panels in cache.
  if (s.g.kvol() == 1 && P > kVec) {
    const int64_t rem = P % kVec;
    const double cost = double(P / kVec) + (rem == 1 ? 1.0 / 12 : rem > 0 ? 1.0 : 0.0);
    const double share_direct = (double(Mg) / up(Mg, kGemmMR)) * (double(P) / kVec) / cost;
    if (share_direct >= share_old * 1.05 || threads >= 2) return SmallSpatialChoice::kDirect;
  }
  // The transposed path keeps a second copy of the weights: 1x1 convs need a 10% better share for it.
  return share_new >= share_old * (pointwise ? 1.10 : 1.0) ? SmallSpatialChoice::kTransposed
                                                           : SmallSpatialChoice::kNone;
}

bool small_spatial_preferred(const ConvShape& s, int threads) {
  return small_spatial_choice(s, threads) != SmallSpatialChoice::kNone;
}

size_t small_spatial_workspace_bytes(const ConvShape& s, int threads) { return transposed_scratch(s, threads).lay.bytes(); }

size_t small_spatial_direct_workspace_bytes(const ConvShape& s, bool pre) { return direct_scratch(s, pre).lay.bytes(); }

void small_spatial_conv(const ConvShape& s, const float* x, const SmallSpatialWeights& w, const float* bias,
                        float* y, ep::ThreadPool* pool, const ConvPost* post) {
  const int threads = pool ? pool->num_threads() : 1;
  const ep::HeapScratch ws(small_spatial_workspace_bytes(s, threads));
  small_spatial_conv(s, x, w, bias, y, pool, post, ws.get(), threads);
}

void small_spatial_conv(const ConvShape& s, const float* x, const SmallSpatialWeights& w, const float* bias,
                        float* y, ep::ThreadPool* pool, const ConvPost* post, void* workspace, int slots) {
  const float* residual = post ? post->residual : nullptr;
  const int act = small_spatial_act_code(post);
  const float clip_lo = post ? post->act_a : 0.f, clip_hi = post ? post->act_b : 0.f;
  const Geom3& g = s.g;
  const int64_t G = s.group, Cg = s.C / G, Mg = s.M / G, kvol = g.kvol();
  const int64_t K = Cg * kvol;
  const int64_t P = g.out_size();
  const int64_t rows = s.N * P;
  const int64_t panels = (rows + kRows - 1) / kRows;
  const int threads = pool ? pool->num_threads() : 1;
  if (threads > slots) {  // a pool wider than the workspace was sized for: size one for it
    small_spatial_conv(s, x, w, bias, y, pool, post);
    return;
  }
  TransposedScratch scr = transposed_scratch(s, slots);
  scr.lay.bind(workspace);
  int64_t* koff = scr.lay.at<int64_t>(scr.koff);
  float* pad_base = scr.lay.at<float>(scr.pad);
  const bool private_pack = transposed_private_pack(s, threads);
  const Src layout = source_layout(s, x, pad_base, koff);
  if (!private_pack) copy_padded(s, x, pad_base, layout, pool);
  const int64_t plane1 = layout.dims[1] * layout.dims[2];

  // col^T packed: per group, per panel of 7 rows (pixels of all images), K x 7.
  const int64_t a_group = transposed_group_floats(s);
  float* abuf = scr.lay.at<float>(scr.a);
  float* acc_slots = scr.lay.at<float>(scr.acc);
  // Panels [t0, t1) (over groups x panels) of the input `src` into the col^T copy at `out`.
  auto pack_panels = [&](const Src& src, float* out, int64_t t0, int64_t t1) {
    int64_t base[kRows];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t gi = t / panels, pi = t % panels;
      for (int r = 0; r < kRows; ++r) {
        int64_t row = pi * kRows + r;
        if (row >= rows) row = pi * kRows;  // padding rows: any valid pixel (never stored)
        const int64_t n = row / P, p = row % P;
        const int64_t ow = p % g.out[2], oh = (p / g.out[2]) % g.out[1], od = p / (g.out[2] * g.out[1]);
        base[r] = (n * s.C + gi * Cg) * src.cs + od * g.s[0] * plane1 + oh * g.s[1] * src.dims[2] + ow * g.s[2];
      }
      float* dst = out + gi * a_group + pi * K * kRows;
#ifdef NXRT_SSP_X86
      bool step1 = true, step2 = true;
      for (int r = 1; r < kRows; ++r) {
        step1 = step1 && base[r] == base[0] + r;
        step2 = step2 && base[r] == base[0] + 2 * r;
      }
      if (step1) {
        pack_panel_contiguous(src.x + base[0], src.cs, Cg, koff, kvol, dst);
        continue;
      }
      if (step2) {
        pack_panel_stride2(src.x + base[0], src.cs, Cg, koff, kvol, dst);
        continue;
      }
#endif
      for (int64_t c = 0; c < Cg; ++c) {
        const float* xc = src.x + c * src.cs;
        for (int64_t kp = 0; kp < kvol; ++kp) {
          const float* xk = xc + koff[kp];
#pragma GCC unroll 7
          for (int r = 0; r < kRows; ++r) dst[r] = xk[base[r]];
          dst += kRows;
        }
      }
    }
  };
  auto pack = [&](int64_t t0, int64_t t1) { pack_panels(layout, abuf, t0, t1); };
  // With at least as many groups as threads, each work item is one whole group that packs its own
  // input; with one group split over the threads each thread packs its own copy (private_pack, on its
  // first item); otherwise the packing is a phase of its own (split over panels) before the GEMM items.
  const int64_t nvec = (Mg + kVec - 1) / kVec;
  const int64_t parts = G >= threads ? 1 : std::max<int64_t>(1, std::min<int64_t>(threads, nvec));
  const bool pack_in_item = parts == 1 && G > 1;
  int32_t* packed_by_slot = scr.lay.at<int32_t>(scr.packed);
  if (private_pack) {
    std::fill(packed_by_slot, packed_by_slot + threads, 0);
  } else if (!pack_in_item) {
    if (pool && threads > 1 && G * panels > 1 && G * a_group > (int64_t{1} << 16)) {
      pool->parallel_for(G * panels, 1, pack);
    } else {
      pack(0, G * panels);
    }
  }

  // GEMM + write-back: items are (group, part of the group's 16-channel vectors). A part is cut into
  // tiles of 3 vectors, with 2-vector tiles rather than a 1-vector one at its end when it can (a
  // 1-vector tile does 7 FMAs a k step for 8 loads). Long K runs in chunks so a tile's slice of W^T
  // stays in L2 across the pixel panels; the accumulators of every panel then wait in `accs`.
  constexpr int64_t kChunk = kTransposedKChunk;
  const bool chunked = transposed_chunked(K);
  auto work = [&](int64_t t0, int64_t t1) {
    float* accs = acc_slots + (pool ? pool->slot() : 0) * scr.acc_stride;  // this thread's slot
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t gi = t / parts, part = t % parts;
      const int64_t v0 = part * nvec / parts, v1 = (part + 1) * nvec / parts;
      if (pack_in_item) pack(gi * panels, (gi + 1) * panels);
      const float* ag = abuf + gi * a_group;
      if (private_pack) {  // one group: this thread's copies, made on its first item
        const int slot = pool->slot();
        float* mine = abuf + slot * a_group;
        if (!packed_by_slot[slot]) {
          Src src = layout;
          if (has_pads(g)) {
            float* xp = pad_base + slot * scr.pad_stride;
            src.x = xp;
            copy_padded(s, x, xp, src, nullptr);
          }
          pack_panels(src, mine, 0, panels);
          packed_by_slot[slot] = 1;
        }
        ag = mine;
      }
      const PackedB& wt = w.wt[static_cast<size_t>(gi)];
      for (int64_t q = v0; q < v1;) {
        const int64_t left = v1 - q;
        const int nv = static_cast<int>(left == 4 ? 2 : std::min<int64_t>(kMaxNV, left));
        const int64_t m0 = q * kVec;
        TileArgs ta;
        ta.K = K;
        ta.b = &wt;
        ta.q0 = q;
        ta.mcount = static_cast<int>(std::min<int64_t>(nv * kVec, Mg - m0));
        ta.bias = bias ? bias + gi * Mg + m0 : nullptr;
        ta.act = act;
        ta.lo = clip_lo;
        ta.hi = clip_hi;
        for (int64_t k0 = 0; k0 < K; k0 += chunked ? kChunk : K) {
          ta.k0 = k0;
          ta.k1 = chunked ? std::min(K, k0 + kChunk) : K;
          ta.first = k0 == 0;
          ta.last = ta.k1 == K;
          // The W^T slice the next (vectors, K chunk) step reads comes from memory (the weights stream
          // once per conv) at a rate one tile cannot take from DRAM; the tiles of pixel panels 1.. prefetch it,
          // split evenly, while they reread this slice from L2. Regions: one per KC block, nv' * kc lines.
          PfRegion regs[kMaxPfRegions];
          int nregs = 0;
          {
            int64_t nq = q, nk0 = ta.k1, nk1 = chunked ? std::min(K, ta.k1 + kChunk) : K;
            int nnv = nv;
            if (ta.k1 >= K) {
              nq = q + nv;
              const int64_t nleft = v1 - nq;
              nnv = static_cast<int>(nleft == 4 ? 2 : std::min<int64_t>(kMaxNV, nleft));
              nk0 = 0;
              nk1 = chunked ? std::min(K, kChunk) : K;
            }
            if (nq < v1 && panels > 1) {
              const float* bd = wt.data.data();
              for (int64_t p = nk0; p < nk1 && nregs < kMaxPfRegions; p += kGemmKC) {
                const int64_t kcp = std::min<int64_t>(kGemmKC, K - p);
                regs[nregs++] = {bd + p * wt.n_padded + nq * kVec * kcp, nnv * kcp};
              }
            }
          }
          int64_t pf_total = 0;
          for (int i = 0; i < nregs; ++i) pf_total += regs[i].lines;
          const int64_t pf_share = panels > 1 ? (pf_total + panels - 2) / (panels - 1) : 0;
          int reg = 0;
          int64_t reg_off = 0;
          for (int64_t pi = 0; pi < panels; ++pi) {
            ta.pf = nullptr;
            ta.pf_lines = 0;
            if (pi > 0 && reg < nregs) {
              const int64_t n = std::min(pf_share, regs[reg].lines - reg_off);
              ta.pf = regs[reg].at + reg_off * 16;
              ta.pf_lines = n;
              reg_off += n;
              if (reg_off >= regs[reg].lines) ++reg, reg_off = 0;
            }
            const int64_t row0 = pi * kRows;
            ta.nrows = static_cast<int>(std::min<int64_t>(kRows, rows - row0));
            const int64_t n0 = row0 / P, p0 = row0 % P;
            // Rows of one image, consecutive in y: written transposed by the kernel.
            const bool contiguous = p0 + ta.nrows <= P;
            ta.a = ag + pi * K * kRows;
            ta.acc = accs + (chunked ? pi : 0) * kRows * kTileCols;
            ta.y = contiguous ? y + (n0 * s.M + gi * Mg + m0) * P + p0 : nullptr;
            ta.res = contiguous && residual ? residual + (n0 * s.M + gi * Mg + m0) * P + p0 : nullptr;
            ta.ldy = P;
            run_tile(nv, ta);
            if (ta.last && !contiguous) {
              for (int r = 0; r < ta.nrows; ++r) {
                const int64_t row = row0 + r, n = row / P, p = row % P;
                const int64_t yo = (n * s.M + gi * Mg + m0) * P + p;
                float* yr = y + yo;
                const float* br = ta.acc + r * kTileCols;
                for (int64_t j = 0; j < ta.mcount; ++j) {
                  float v = br[j];
                  if (residual) v += residual[yo + j * P];
                  if (act == 1) v = v > 0.f ? v : 0.f;
                  if (act == 2) v = std::min(std::max(v, clip_lo), clip_hi);
                  if (act == 3) v = activation_of<Activation::kLeakyRelu>(v, clip_lo, 0.f);
                  yr[j * P] = v;
                }
              }
            }
          }
        }
        q += nv;
      }
    }
  };
  const int64_t items = G * parts;
  if (pool && threads > 1 && items > 1) {
    pool->parallel_for(items, 1, work);
  } else {
    work(0, items);
  }
}

// ---------------------------------------------------------------------------------------------
// The direct orientation on the conv's own packed weights (no extra copy): y[6 channels, pixels] with
// the pixels in 16-wide vectors, up to 4 a tile; a plane of 16q + 1 pixels (7x7 = 49) takes its last
// pixel as a 6-lane "tail" FMA on the PackedA panel instead of a whole 16-wide vector.

namespace {

#ifdef NXRT_SSP_X86
struct DirectArgs {
  int64_t K;
  const float* apk;  // the group's PackedA<float> data
  int64_t m_padded, pi;
  const float* b;  // B[k * ldb + pixel], at the tile's first pixel
  int64_t ldb;
  __mmask16 lastmask;  // valid pixels of the tile's last vector
  float* y;            // at (first channel of the panel, first pixel)
  int64_t ldy;
  int rows;  // valid channels of the panel
  const float* bias;
  const float* res;  // like y, or null
  int act;
  float lo, hi;
  // The next tile of this panel (NV vectors on), brought in while this one runs: its pf_vecs vectors (0:
  // none) of the y and residual rows, and with pf_x (a block's first channel panel) of the x rows.
  int pf_vecs;
  bool pf_x;
};

template <int NV, bool TAIL>
__attribute__((target("avx512f,avx512vl,fma"))) void direct_tile(const DirectArgs& d) {
  __m512 c[6][NV];
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) c[r][v] = _mm512_setzero_ps();
  __m256 tacc = _mm256_setzero_ps();
  const __mmask16 lastmask = d.lastmask;
  for (int r = 0; r < d.rows; ++r)
    for (int v = 0; v < d.pf_vecs; ++v) {
      const int64_t at = r * d.ldy + (NV + v) * kVec;
      __builtin_prefetch(d.y + at, 1, 3);
      if (d.res) _mm_prefetch(reinterpret_cast<const char*>(d.res + at), _MM_HINT_T0);
    }
  const int pf_x_vecs = d.pf_x ? d.pf_vecs : 0;
  for (int64_t p0 = 0; p0 < d.K; p0 += kGemmKC) {
    const int64_t kc = std::min<int64_t>(kGemmKC, d.K - p0);
    const float* a = d.apk + p0 * d.m_padded + d.pi * 6 * kc;
    const float* bk = d.b + p0 * d.ldb;
    const int64_t ldb = d.ldb;
    // The next channel panel's weights at the same k (one tile ahead): the packed weights stream from
    // memory once per conv.
    const int64_t pf = 6 * kc;
#pragma GCC unroll 1
    for (int64_t k = 0; k < kc; ++k) {
      _mm_prefetch(reinterpret_cast<const char*>(a + pf), _MM_HINT_T0);
      for (int v = 0; v < pf_x_vecs; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(bk + (NV + v) * kVec), _MM_HINT_T0);
      __m512 bv[NV];
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v)
        bv[v] = v == NV - 1 ? _mm512_maskz_loadu_ps(lastmask, bk + v * kVec) : _mm512_loadu_ps(bk + v * kVec);
#pragma GCC unroll 6
      for (int r = 0; r < 6; ++r) {
        const __m512 av = _mm512_set1_ps(a[r]);
#pragma GCC unroll 4
        for (int v = 0; v < NV; ++v) c[r][v] = _mm512_fmadd_ps(av, bv[v], c[r][v]);
      }
      if constexpr (TAIL) tacc = _mm256_fmadd_ps(_mm256_maskz_loadu_ps(0x3F, a), _mm256_set1_ps(bk[NV * kVec]), tacc);
      a += 6;
      bk += ldb;
    }
  }
  // Through a local buffer with fixed loops: indexing c with the run-time row count below would make
  // GCC keep c in memory and store it every k step.
  alignas(64) float cb[6][NV * kVec];
  alignas(32) float tb[8];
#pragma GCC unroll 6
  for (int r = 0; r < 6; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) _mm512_store_ps(cb[r] + v * kVec, c[r][v]);
  _mm256_store_ps(tb, tacc);
  for (int r = 0; r < d.rows; ++r) {
    const __m512 bb = _mm512_set1_ps(d.bias ? d.bias[r] : 0.f);
    float* yr = d.y + r * d.ldy;
    const float* rr = d.res ? d.res + r * d.ldy : nullptr;
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v == NV - 1 ? lastmask : __mmask16(0xFFFF);
      __m512 val = _mm512_add_ps(_mm512_load_ps(cb[r] + v * kVec), bb);
      if (rr) val = _mm512_add_ps(val, _mm512_maskz_loadu_ps(m, rr + v * kVec));
      if (d.act == 1) val = _mm512_max_ps(val, _mm512_setzero_ps());
      if (d.act == 2) val = _mm512_min_ps(_mm512_max_ps(val, _mm512_set1_ps(d.lo)), _mm512_set1_ps(d.hi));
      if (d.act == 3)
        val = _mm512_mask_mul_ps(val, _mm512_cmp_ps_mask(val, _mm512_setzero_ps(), _CMP_NGE_UQ), val,
                                 _mm512_set1_ps(d.lo));
      _mm512_mask_storeu_ps(yr + v * kVec, m, val);
    }
    if constexpr (TAIL) {
      float val = tb[r] + (d.bias ? d.bias[r] : 0.f);
      if (rr) val += rr[NV * kVec];
      if (d.act == 1) val = val > 0.f ? val : 0.f;
      if (d.act == 2) val = std::min(std::max(val, d.lo), d.hi);
      if (d.act == 3) val = activation_of<Activation::kLeakyRelu>(val, d.lo, 0.f);
      yr[NV * kVec] = val;
    }
  }
}

// The vectors of the next direct tile with `left` to go: 4 (24 accumulators), except that a run which
// would end in a lone vector (6 accumulators) ends in 3 + 2 instead.
int direct_tile_vecs(int64_t left) { return static_cast<int>(left == 5 ? 3 : std::min<int64_t>(kDirectNV, left)); }

void run_direct_tile(int nv, bool tail, const DirectArgs& d) {
  switch (nv * 2 + (tail ? 1 : 0)) {
    case 2: return direct_tile<1, false>(d);
    case 3: return direct_tile<1, true>(d);
    case 4: return direct_tile<2, false>(d);
    case 5: return direct_tile<2, true>(d);
    case 6: return direct_tile<3, false>(d);
    case 7: return direct_tile<3, true>(d);
    case 9: return direct_tile<4, true>(d);
    default: return direct_tile<4, false>(d);
  }
}
#endif

}  // namespace

bool small_spatial_direct_conv(const ConvShape& s, const float* x, const std::vector<PackedA<float>>& packed,
                               const float* bias, float* y, ep::ThreadPool* pool, const ConvPost* post) {
  const ep::HeapScratch ws(small_spatial_direct_workspace_bytes(s, post && post->pre_scale));
  return small_spatial_direct_conv(s, x, packed, bias, y, pool, post, ws.get());
}

bool small_spatial_direct_conv(const ConvShape& s, const float* x, const std::vector<PackedA<float>>& packed,
                               const float* bias, float* y, ep::ThreadPool* pool, const ConvPost* post,
                               void* workspace) {
#ifdef NXRT_SSP_X86
  const Geom3& g = s.g;
  const int64_t G = s.group, Cg = s.C / G, Mg = s.M / G, kvol = g.kvol();
  const int64_t K = Cg * kvol, P = g.out_size();
  const int threads = pool ? pool->num_threads() : 1;
  const bool pointwise = direct_pointwise(g);
  const bool pre = post && post->pre_scale;
  DirectScratch scr = direct_scratch(s, pre);
  scr.lay.bind(workspace);
  // FusedConv's pre-activation (a BN-ReLU before a 1x1 conv, DenseNet): x' = max(x * scale[c] + shift[c], 0)
  // written once per call (C x P floats, 1/M of the product's work), then read in place like x.
  if (pre) {
    if (!pointwise || G != 1 || !post->pre_shift) return false;
    float* xp = scr.lay.at<float>(scr.pre);
    auto preact = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t c = t % s.C;
        scale_shift_relu(x + t * P, xp + t * P, P, post->pre_scale[c], post->pre_shift[c]);
      }
    };
    if (pool && threads > 1 && s.N * s.C * P > (int64_t{1} << 16)) {
      pool->parallel_for(s.N * s.C, 1, preact);
    } else {
      preact(0, s.N * s.C);
    }
    x = xp;
  }
  // B: x itself (1x1, stride 1, no pads) or col[K][Pp] per image (rows padded to whole vectors so
  // the loads are aligned).
  const int64_t Pp = (P + kVec - 1) / kVec * kVec;
  const float* cols = nullptr;
  if (!pointwise) {
    int64_t* koff = scr.lay.at<int64_t>(scr.koff);
    int64_t* pbase = scr.lay.at<int64_t>(scr.pbase);
    const Src src = padded_source(s, x, scr.lay.at<float>(scr.pad), koff, pool);
    const int64_t plane1 = src.dims[1] * src.dims[2];
    for (int64_t p = 0; p < P; ++p) {
      const int64_t ow = p % g.out[2], oh = (p / g.out[2]) % g.out[1], od = p / (g.out[2] * g.out[1]);
      pbase[p] = od * g.s[0] * plane1 + oh * g.s[1] * src.dims[2] + ow * g.s[2];
    }
    float* colbuf = scr.lay.at<float>(scr.col);
    const int64_t OW = g.out[2], orows = P / OW;
    auto pack = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {  // t = (image, channel)
        const float* xc = src.x + t * src.cs;
        float* dst = colbuf + t * kvol * Pp;
        for (int64_t kp = 0; kp < kvol; ++kp, dst += Pp) {
          const float* xk = xc + koff[kp];
          for (int64_t r = 0; r < orows; ++r) {
            const int64_t* pb = pbase + r * OW;
            float* dr = dst + r * OW;
            if (g.s[2] == 1) {
              std::memcpy(dr, xk + pb[0], sizeof(float) * OW);
            } else {
              for (int64_t ow = 0; ow < OW; ++ow) dr[ow] = xk[pb[ow]];
            }
          }
        }
      }
    };
    // On the pool from 8K gathered floats: ResNet-50's 1x1/2 1024->2048 @14x14 (50K, a scalar gather at
    // stride 2) took 30 us on the calling thread.
    const int64_t items = s.N * s.C;
    if (pool && threads > 1 && items > 1 && s.N * G * K * P >= kCopyParallelFloats) {
      pool->parallel_for(items, 1, pack);
    } else {
      pack(0, items);
    }
    cols = colbuf;
  }
  // Pixel tiles: full 16-pixel vectors, the remainder as one masked vector, or as the tail when it is 1.
  const int64_t full = P / kVec, rem = P % kVec;
  const bool tail = rem == 1 && full > 0;
  const int64_t nvec = full + (rem > 0 && !tail ? 1 : 0);
  const __mmask16 remmask = rem > 0 && !tail ? __mmask16((1u << rem) - 1) : __mmask16(0xFFFF);
  const int64_t cpanels = (Mg + 5) / 6;
  // Pixel blocks (in vectors, whole tiles): all of x when it fits twice in kDirectBlockBytes, else about
  // that much of it (K rows of the block's pixels).
  const int64_t vec_bytes = K * kVec * int64_t(sizeof(float));
  int64_t block_vecs = nvec;
  if (K * P * int64_t(sizeof(float)) > 2 * kDirectBlockBytes)
    block_vecs = std::max<int64_t>(kDirectNV, kDirectBlockBytes / vec_bytes / kDirectNV * kDirectNV);
  const bool parallel = pool && direct_splits(s, threads);
  // Work items: with fewer images x groups than threads, pixel blocks where each thread gets a few of at
  // least a tile (x read once overall, the weights by every thread), else panel ranges (each thread reads
  // all of x: planes too small to split); with enough images x groups, one item each.
  bool split_pixels = false;
  if (parallel && s.N * G < threads) {
    const int64_t want = (nvec + kDirectBlocksPerThread * threads - 1) / (kDirectBlocksPerThread * threads);
    if (want >= kDirectNV) {
      split_pixels = true;
      block_vecs = std::min(block_vecs, (want + kDirectNV - 1) / kDirectNV * kDirectNV);
    }
  }
  const int64_t pblocks = (nvec + block_vecs - 1) / block_vecs;
  const int64_t parts = split_pixels ? pblocks
                        : std::max<int64_t>(1, std::min<int64_t>((threads + s.N * G - 1) / (s.N * G), cpanels));
  DirectArgs base{};
  base.m_padded = (Mg + kGemmMR - 1) / kGemmMR * kGemmMR;
  base.K = K;
  base.ldb = pointwise ? P : Pp;
  base.ldy = P;
  base.act = small_spatial_act_code(post);
  base.lo = post ? post->act_a : 0.f;
  base.hi = post ? post->act_b : 0.f;
  const float* residual = post ? post->residual : nullptr;
  auto work = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ng = t / parts, part = t % parts;
      const int64_t n = ng / G, gi = ng % G;
      const int64_t c0 = split_pixels ? 0 : part * cpanels / parts;
      const int64_t c1 = split_pixels ? cpanels : (part + 1) * cpanels / parts;
      const int64_t v_lo = split_pixels ? part * block_vecs : 0;
      const int64_t v_hi = split_pixels ? std::min(nvec, v_lo + block_vecs) : nvec;
      const float* b = pointwise ? x + (n * s.C + gi * Cg) * P : cols + (n * s.C + gi * Cg) * kvol * Pp;
      DirectArgs d = base;
      d.apk = packed[static_cast<size_t>(gi)].data.data();
      for (int64_t vb0 = v_lo; vb0 < v_hi; vb0 += block_vecs) {
        const int64_t vb1 = std::min(v_hi, vb0 + block_vecs);
        for (int64_t pi = c0; pi < c1; ++pi) {
          const int64_t m0 = pi * 6;
          d.pi = pi;
          d.rows = static_cast<int>(std::min<int64_t>(6, Mg - m0));
          const int64_t yoff = (n * s.M + gi * Mg + m0) * P;
          d.bias = bias ? bias + gi * Mg + m0 : nullptr;
          for (int64_t v0 = vb0; v0 < vb1;) {
            const int64_t left = vb1 - v0;
            const int nv = direct_tile_vecs(left);
            const bool last = v0 + nv >= nvec;
            d.lastmask = last ? remmask : __mmask16(0xFFFF);
            d.b = b + v0 * kVec;
            d.y = y + yoff + v0 * kVec;
            d.res = residual ? residual + yoff + v0 * kVec : nullptr;
            // Prefetch the next tile of this panel (the last tile none: the next panel's first tile rereads x
            // from L2). Its y and residual rows (6 + 6 planes) and x rows (K planes) are more streams than
            // the hardware prefetcher follows, and inside a model they come from L3 or DRAM. Zen 5, ResNet-50
            // at 1 thread, per-node trace: 1x1 64->256 @56x56 + residual 0.66-0.84 -> 0.58-0.64 ms; whole
            // model in-process paired 0.984 at 1 thread, 1.000 at 2 (where pixel blocks halve each stream).
            const int64_t nleft = vb1 - v0 - nv;
            d.pf_vecs = nleft > 0 ? direct_tile_vecs(nleft) : 0;
            d.pf_x = pi == c0;
            run_direct_tile(nv, last && tail, d);
            v0 += nv;
          }
        }
      }
    }
  };
  const int64_t items = s.N * G * parts;
  if (parallel && items > 1) {
    pool->parallel_for(items, 1, work);
  } else {
    work(0, items);
  }
  return true;
#else
  (void)s, (void)x, (void)packed, (void)bias, (void)y, (void)pool, (void)post, (void)workspace;
  return false;
#endif
}

}  // namespace nxrt::ops
