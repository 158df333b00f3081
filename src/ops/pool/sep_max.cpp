#include "ops/pool/sep_max.h"

#include <algorithm>
#include <limits>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_SM_X86 1
#define NXRT_SM_AVX2 __attribute__((target("avx2,fma")))
#define NXRT_SM_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))
#endif

namespace nxrt::ops::sepmax {

namespace {

constexpr int64_t kRowAlign = 16;  // ring rows hold OW rounded up to this (the widest vector)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int64_t ring_width(const Geom3& g) { return (g.out[2] + kRowAlign - 1) / kRowAlign * kRowAlign; }
int64_t ring_slots(const Geom3& g);

// What one row pass needs. [jv0, jv1): the outputs whose vectors (of `width` lanes, starting at
// multiples of it) read only columns inside [0, IW): plain loads there, no edge checks (set by
// interior_vectors for the vector width of the body that runs).
struct RowArgs {
  int64_t IW, OW, pl;
  int SW, KW;
  int64_t jv0 = 0, jv1 = 0;
};

// The range of RowArgs::jv0/jv1 for vectors of `width` outputs. A vector at output j0 reads columns
// [c0, c0 + span) with c0 = j0 * SW - pl: stride 1 reads KW overlapping vectors (span width + KW - 1);
// stride 2 reads pairs of vectors at the even taps (span 2 * width + the last even tap).
void interior_vectors(RowArgs* a, int64_t width) {
  const int64_t span = a->SW == 2 ? 2 * width + ((a->KW - 1) & ~int64_t{1}) : width + a->KW - 1;
  int64_t j0 = 0;
  while (j0 < a->OW && j0 * a->SW - a->pl < 0) j0 += width;
  int64_t j1 = j0;
  while (j1 + width <= a->OW && j1 * a->SW - a->pl + span <= a->IW) j1 += width;
  a->jv0 = j0;
  a->jv1 = j1;
}

// Plain loops: h[j] = max over the taps j*SW - pl + kw inside [0, IW) in column order; y[j] = max of
// rows[0..n)[j] in row order; both with acc = v > acc ? v : acc from -inf.
struct PlainOps {
  static constexpr int64_t kWidth = 0;  // no vectors: row() does not read jv0 / jv1
  static inline float edge(const float* s, const RowArgs& a, int SW, int KW, int64_t j) {
    float acc = kNegInf;
    for (int kw = 0; kw < KW; ++kw) {
      const int64_t c = j * SW - a.pl + kw;
      if (c < 0 || c >= a.IW) continue;
      const float v = s[c];
      acc = v > acc ? v : acc;
    }
    return acc;
  }
  template <int kSW, int kKW>
  static inline void row(const float* __restrict s, const RowArgs& a, float* __restrict h) {
    const int SW = kSW ? kSW : a.SW, KW = kKW ? kKW : a.KW;
    // Outputs [jlo, jhi) have every tap inside the row: no bounds checks there (the loop vectorizes).
    const int64_t jlo = std::min<int64_t>(a.OW, (a.pl + SW - 1) / SW);
    const int64_t jhi = std::max<int64_t>(jlo, std::min<int64_t>(a.OW, a.IW + a.pl - KW >= 0 ? (a.IW + a.pl - KW) / SW + 1 : 0));
    for (int64_t j = 0; j < jlo; ++j) h[j] = edge(s, a, SW, KW, j);
    const float* __restrict b = s - a.pl;
    for (int64_t j = jlo; j < jhi; ++j) {
      float acc = kNegInf;
      for (int kw = 0; kw < KW; ++kw) {
        const float v = b[j * SW + kw];
        acc = v > acc ? v : acc;
      }
      h[j] = acc;
    }
    for (int64_t j = jhi; j < a.OW; ++j) h[j] = edge(s, a, SW, KW, j);
  }
  static void vert(const float* const* rows, int n, int64_t OW, int64_t /*room*/, float* __restrict y) {
    if (n == 0) {
      for (int64_t j = 0; j < OW; ++j) y[j] = kNegInf;
      return;
    }
    // Row by row over the whole output row, in row order: the same first-maximal rule per column.
    const float* __restrict r0 = rows[0];
    for (int64_t j = 0; j < OW; ++j) y[j] = r0[j];
    for (int r = 1; r < n; ++r) {
      const float* __restrict rr = rows[r];
      for (int64_t j = 0; j < OW; ++j) {
        const float v = rr[j];
        y[j] = v > y[j] ? v : y[j];
      }
    }
  }
};

#ifdef NXRT_SM_X86
// 8-float vectors. A load at column c of a row of n floats: lanes outside [0, n) read as -inf (masked,
// never touched).
struct Avx2Ops {
  static constexpr int64_t kWidth = 8;
  NXRT_SM_AVX2 static inline __m256 load_clip(const float* s, int64_t c, int64_t n) {
    if (c >= 0 && c + 8 <= n) return _mm256_loadu_ps(s + c);
    const __m256i col = _mm256_add_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
                                         _mm256_set1_epi32(static_cast<int32_t>(c)));
    const __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(col, _mm256_set1_epi32(-1)),
                                       _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)), col));
    return _mm256_blendv_ps(_mm256_set1_ps(kNegInf), _mm256_maskload_ps(s + c, m), _mm256_castsi256_ps(m));
  }
  // Lanes 0, 2, .. 14 (even) / 1, 3, .. 15 (odd) of the 16 floats a:b.
  NXRT_SM_AVX2 static inline __m256 even(__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  }
  NXRT_SM_AVX2 static inline __m256 odd(__m256 a, __m256 b) {
    return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
  }
  template <bool kClip>
  NXRT_SM_AVX2 static inline __m256 load(const float* s, int64_t c, int64_t n) {
    return kClip ? load_clip(s, c, n) : _mm256_loadu_ps(s + c);
  }
  // The horizontal max of the 8 outputs from j0: plain loads where the plan's interior range says they
  // stay inside the row (kClip false), clipped ones elsewhere; the same maxima in the same order.
  template <bool kClip>
  NXRT_SM_AVX2 static inline __m256 outputs(const float* s, const RowArgs& a, int SW, int KW, int64_t j0) {
    __m256 acc = _mm256_set1_ps(kNegInf);  // _mm256_max_ps(v, acc) is v > acc ? v : acc: NaN skipped, ties keep acc
    if (SW == 2) {
      const int64_t c0 = 2 * j0 - a.pl;
      for (int k = 0; k < KW; k += 2) {
        const __m256 lo = load<kClip>(s, c0 + k, a.IW), hi = load<kClip>(s, c0 + k + 8, a.IW);
        acc = _mm256_max_ps(even(lo, hi), acc);
        if (k + 1 < KW) acc = _mm256_max_ps(odd(lo, hi), acc);
      }
    } else {
      const int64_t c0 = j0 - a.pl;
      for (int k = 0; k < KW; ++k) acc = _mm256_max_ps(load<kClip>(s, c0 + k, a.IW), acc);
    }
    return acc;
  }
  template <int kSW, int kKW>
  NXRT_SM_AVX2 static inline void row(const float* s, const RowArgs& a, float* h) {
    const int SW = kSW ? kSW : a.SW, KW = kKW ? kKW : a.KW;
    // Left edge, interior, right edge. (AVX-512's row keeps one edge loop instead: each shape measured
    // as fast as the loops before outputs() was shared, the other one up to 7% slower on 128x55x55, Zen 5.)
    int64_t j0 = 0;
    for (; j0 < a.jv0; j0 += 8) _mm256_storeu_ps(h + j0, outputs<true>(s, a, SW, KW, j0));
    for (; j0 < a.jv1; j0 += 8) _mm256_storeu_ps(h + j0, outputs<false>(s, a, SW, KW, j0));
    for (; j0 < a.OW; j0 += 8) _mm256_storeu_ps(h + j0, outputs<true>(s, a, SW, KW, j0));
  }
  NXRT_SM_AVX2 static inline void vert(const float* const* rows, int n, int64_t OW, int64_t room, float* y) {
    int64_t j0 = 0;
    if (n == 3) {  // the usual window height: the same maxima in the same order, no row loop
      const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2];
      for (; j0 + 8 <= std::min(OW, room); j0 += 8) {
        const __m256 acc = _mm256_max_ps(_mm256_loadu_ps(r2 + j0),
                                         _mm256_max_ps(_mm256_loadu_ps(r1 + j0), _mm256_loadu_ps(r0 + j0)));
        _mm256_storeu_ps(y + j0, acc);
      }
    }
    for (; j0 < OW; j0 += 8) {
      __m256 acc = _mm256_set1_ps(kNegInf);
      for (int r = 0; r < n; ++r) acc = _mm256_max_ps(_mm256_loadu_ps(rows[r] + j0), acc);
      if (j0 + 8 <= room) {
        _mm256_storeu_ps(y + j0, acc);
      } else {
        const __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(OW - j0)),
                                             _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        _mm256_maskstore_ps(y + j0, m, acc);
      }
    }
  }
};

// 16-float vectors, masked loads and stores at the edges.
struct Avx512Ops {
  static constexpr int64_t kWidth = 16;
  NXRT_SM_AVX512 static inline __m512 load_clip(const float* s, int64_t c, int64_t n, __m512 ninf) {
    if (c >= 0 && c + 16 <= n) return _mm512_loadu_ps(s + c);
    const int64_t lo = c < 0 ? -c : 0, hi = n - c < 16 ? n - c : 16;  // lanes [lo, hi) inside the row
    if (hi <= lo) return ninf;
    const uint32_t bits = ((1u << hi) - 1u) & ~((1u << lo) - 1u);
    return _mm512_mask_loadu_ps(ninf, static_cast<__mmask16>(bits), s + c);
  }
  template <bool kClip>
  NXRT_SM_AVX512 static inline __m512 load(const float* s, int64_t c, int64_t n, __m512 ninf) {
    return kClip ? load_clip(s, c, n, ninf) : _mm512_loadu_ps(s + c);
  }
  // The horizontal max of the 16 outputs from j0, as Avx2Ops::outputs (the caller's constants: -inf,
  // the even and the odd lane indices).
  template <bool kClip>
  NXRT_SM_AVX512 static inline __m512 outputs(const float* s, const RowArgs& a, int SW, int KW, int64_t j0, __m512 ninf,
                                              __m512i ieven, __m512i iodd) {
    __m512 acc = ninf;  // _mm512_max_ps(v, acc) is v > acc ? v : acc: NaN skipped, ties keep acc
    if (SW == 2) {
      const int64_t c0 = 2 * j0 - a.pl;
      for (int k = 0; k < KW; k += 2) {
        const __m512 lo = load<kClip>(s, c0 + k, a.IW, ninf), hi = load<kClip>(s, c0 + k + 16, a.IW, ninf);
        acc = _mm512_max_ps(_mm512_permutex2var_ps(lo, ieven, hi), acc);
        if (k + 1 < KW) acc = _mm512_max_ps(_mm512_permutex2var_ps(lo, iodd, hi), acc);
      }
    } else {
      const int64_t c0 = j0 - a.pl;
      for (int k = 0; k < KW; ++k) acc = _mm512_max_ps(load<kClip>(s, c0 + k, a.IW, ninf), acc);
    }
    return acc;
  }
  template <int kSW, int kKW>
  NXRT_SM_AVX512 static inline void row(const float* s, const RowArgs& a, float* h) {
    const int SW = kSW ? kSW : a.SW, KW = kKW ? kKW : a.KW;
    const __m512 ninf = _mm512_set1_ps(kNegInf);
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    for (int64_t j0 = a.jv0; j0 < a.jv1; j0 += 16) _mm512_storeu_ps(h + j0, outputs<false>(s, a, SW, KW, j0, ninf, ie, io));
    for (int64_t j0 = 0; j0 < a.OW; j0 += 16) {  // both edges in one loop (see Avx2Ops::row)
      if (j0 == a.jv0 && a.jv1 > a.jv0) {
        j0 = a.jv1 - 16;
        continue;
      }
      _mm512_storeu_ps(h + j0, outputs<true>(s, a, SW, KW, j0, ninf, ie, io));
    }
  }
  NXRT_SM_AVX512 static inline void vert(const float* const* rows, int n, int64_t OW, int64_t room, float* y) {
    int64_t j0 = 0;
    if (n == 3) {  // the usual window height: the same maxima in the same order, no row loop
      const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2];
      for (; j0 + 16 <= std::min(OW, room); j0 += 16) {
        const __m512 acc = _mm512_max_ps(_mm512_loadu_ps(r2 + j0),
                                         _mm512_max_ps(_mm512_loadu_ps(r1 + j0), _mm512_loadu_ps(r0 + j0)));
        _mm512_storeu_ps(y + j0, acc);
      }
    }
    for (; j0 < OW; j0 += 16) {
      __m512 acc = _mm512_set1_ps(kNegInf);
      for (int r = 0; r < n; ++r) acc = _mm512_max_ps(_mm512_loadu_ps(rows[r] + j0), acc);
      if (j0 + 16 <= room) {
        _mm512_storeu_ps(y + j0, acc);
      } else {
        _mm512_mask_storeu_ps(y + j0, static_cast<__mmask16>((1u << (OW - j0)) - 1u), acc);
      }
    }
  }
};

// 3x3 stride-2 windows on rows of at most 63 outputs (kNarrowMaxOutputs), pads of 0 or 1 at the start:
// a row's horizontal maxima are NV (1-4) vectors held in registers, and the vertical pass takes them
// from there; no ring and no edge loop. Each row is loaded as vectors of 16 columns from column -pl,
// lanes outside the row masked to -inf (the masked loads never touch memory outside it). Of a
// 32-column pair lo:hi the even lanes are the windows' first taps and the odd ones their second; the
// third tap is the even lanes one output on, whose last lane comes from the next pair's even lanes
// (for the row's last vector, that lane belongs to no output). Taps in column order from -inf, rows in
// row order: the reference's order, as the ring path.

// A vector of a row: a plain load where all 16 columns lie inside it; else a masked one (-inf outside).
// Zen 5 runs masked loads that miss the cache far slower than plain ones: with every load masked the
// 96x109x109 pool took 535 us on an input out of cache, against 264 for the ring path and 140 now.
NXRT_SM_AVX512 static inline __m512 narrow_load(const float* p, __mmask16 m, __m512 ninf) {
  return m == 0xffff ? _mm512_loadu_ps(p) : _mm512_mask_loadu_ps(ninf, m, p);
}

// Row r of the plane at xp (IH rows of IW), or -inf for a padding row (which adds nothing to a max from
// -inf).
template <int NV>
NXRT_SM_AVX512 static inline void narrow_row(const float* xp, int64_t r, int64_t IH, int64_t IW, const __mmask16* mlo,
                                             const __mmask16* mhi, int64_t pl, __m512 ninf, __m512i ie, __m512i io,
                                             __m512* h) {
  if (r < 0 || r >= IH) {
    for (int v = 0; v < NV; ++v) h[v] = ninf;
    return;
  }
  const float* s = xp + r * IW;
  __m512 e[NV], o[NV];
  for (int v = 0; v < NV; ++v) {
    const float* b = s + 32 * v - pl;
    const __m512 lo = narrow_load(b, mlo[v], ninf), hi = narrow_load(b + 16, mhi[v], ninf);
    e[v] = _mm512_permutex2var_ps(lo, ie, hi);
    o[v] = _mm512_permutex2var_ps(lo, io, hi);
  }
  for (int v = 0; v < NV; ++v) {
    const __m512 third = _mm512_castsi512_ps(
        _mm512_alignr_epi32(_mm512_castps_si512(e[v + 1 < NV ? v + 1 : v]), _mm512_castps_si512(e[v]), 1));
    __m512 acc = _mm512_max_ps(e[v], ninf);
    acc = _mm512_max_ps(o[v], acc);
    h[v] = _mm512_max_ps(third, acc);
  }
}

template <int NV>
NXRT_SM_AVX512 static inline void narrow_planes(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2], pt = g.pb[1], pl = g.pb[2];
  const __m512 ninf = _mm512_set1_ps(kNegInf);
  const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i io = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  // Lanes whose column lies inside [0, IW), for the loads at columns 32v - pl and 32v - pl + 16; the
  // output lanes of vector v that are outputs of the row.
  auto lanes = [&](int64_t c0, int64_t n) {
    uint32_t m = 0;
    for (int l = 0; l < 16; ++l) m |= (c0 + l >= 0 && c0 + l < n) ? 1u << l : 0u;
    return static_cast<__mmask16>(m);
  };
  __mmask16 mlo[NV], mhi[NV], mst[NV];
  for (int v = 0; v < NV; ++v) {
    mlo[v] = lanes(32 * v - pl, IW);
    mhi[v] = lanes(32 * v + 16 - pl, IW);
    mst[v] = lanes(16 * v, OW);
  }
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * IH * IW;
    float* yp = y + p * OH * OW;
    __m512 top[NV], mid[NV], bot[NV];
    narrow_row<NV>(xp, -pt, IH, IW, mlo, mhi, pl, ninf, ie, io, top);
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t a = 2 * oh - pt;
      narrow_row<NV>(xp, a + 1, IH, IW, mlo, mhi, pl, ninf, ie, io, mid);
      narrow_row<NV>(xp, a + 2, IH, IW, mlo, mhi, pl, ninf, ie, io, bot);
      for (int v = 0; v < NV; ++v) {
        const __m512 m = _mm512_max_ps(bot[v], _mm512_max_ps(mid[v], top[v]));
        _mm512_mask_storeu_ps(yp + oh * OW + 16 * v, mst[v], m);
        top[v] = bot[v];
      }
    }
  }
}

// Vectors a row needs: output 16v + 15's third tap is the next pair's first even lane.
NXRT_SM_AVX512 __attribute__((flatten)) void run_narrow_avx512(const Geom3& g, const float* x, float* y, int64_t p0,
                                                               int64_t p1) {
  const int64_t OW = g.out[2];
  if (OW <= 15) return narrow_planes<1>(g, x, y, p0, p1);
  if (OW <= 31) return narrow_planes<2>(g, x, y, p0, p1);
  if (OW <= 47) return narrow_planes<3>(g, x, y, p0, p1);
  narrow_planes<4>(g, x, y, p0, p1);
}
#endif

// Slots in the ring of row maxima: KH rounded up to a power of two (slot = row & (slots - 1)).
int64_t ring_slots(const Geom3& g) {
  int64_t r = 1;
  while (r < g.k[1]) r *= 2;
  return r;
}

// Per plane: output row oh reads input rows [oh*SH - pt, + KH) clipped to [0, IH); each of those rows'
// horizontal maxima is computed once (rows only move forward), into ring slot row & (slots - 1).
// kSW / kKW > 0: horizontal stride and kernel width fixed at compile time (0: read from g).
template <class Ops, int kSW, int kKW>
inline void drive(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1, float* ring) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.k[1], SH = g.s[1], pt = g.pb[1];
  const int64_t RW = ring_width(g), mask = ring_slots(g) - 1;
  RowArgs ra{IW, OW, g.pb[2], static_cast<int>(g.s[2]), static_cast<int>(g.k[2])};
  if constexpr (Ops::kWidth > 0) interior_vectors(&ra, Ops::kWidth);
  const float* rows[64];
  for (int64_t p = p0; p < p1; ++p) {
    const float* xp = x + p * IH * IW;
    float* yp = y + p * OH * OW;
    int64_t next = 0;  // rows below it are computed (or skipped)
    for (int64_t oh = 0; oh < OH; ++oh) {
      const int64_t a = oh * SH - pt;
      const int64_t r0 = std::max<int64_t>(a, 0), r1 = std::min(a + KH, IH);
      for (int64_t r = std::max(next, r0); r < r1; ++r)
        Ops::template row<kSW, kKW>(xp + r * IW, ra, ring + (r & mask) * RW);
      next = std::max(next, r1);
      int n = 0;
      for (int64_t r = r0; r < r1; ++r) rows[n++] = ring + (r & mask) * RW;
      // Vector stores may run past the row into outputs this call writes later (in order: they are
      // overwritten); only past the call's last output are the lanes masked off.
      Ops::vert(rows, n, OW, (p1 - p) * OH * OW - oh * OW, yp + oh * OW);
    }
  }
}

// The specializations every CNN uses (3x3 stride 2 or 1, 2x2 stride 2), else the generic loop.
template <class Ops>
inline void drive_any(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1, float* ring) {
  const int64_t SW = g.s[2], KW = g.k[2];
  if (SW == 2 && KW == 3) return drive<Ops, 2, 3>(g, x, y, p0, p1, ring);
  if (SW == 1 && KW == 3) return drive<Ops, 1, 3>(g, x, y, p0, p1, ring);
  if (SW == 2 && KW == 2) return drive<Ops, 2, 2>(g, x, y, p0, p1, ring);
  drive<Ops, 0, 0>(g, x, y, p0, p1, ring);
}

void run_plain(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1, float* ring) {
  drive_any<PlainOps>(g, x, y, p0, p1, ring);
}
#ifdef NXRT_SM_X86
// flatten: the drivers and row / vertical passes inline here, at this target.
NXRT_SM_AVX2 __attribute__((flatten)) void run_avx2(const Geom3& g, const float* x, float* y, int64_t p0,
                                                    int64_t p1, float* ring) {
  drive_any<Avx2Ops>(g, x, y, p0, p1, ring);
}
NXRT_SM_AVX512 __attribute__((flatten)) void run_avx512(const Geom3& g, const float* x, float* y, int64_t p0,
                                                        int64_t p1, float* ring) {
  drive_any<Avx512Ops>(g, x, y, p0, p1, ring);
}
#endif

}  // namespace

bool narrow_applies(const Geom3& g) {
  return applies(g) && g.k[1] == 3 && g.k[2] == 3 && g.s[1] == 2 && g.s[2] == 2 && g.pb[1] <= 1 && g.pb[2] <= 1 &&
         g.out[2] <= kNarrowMaxOutputs;
}

bool applies(const Geom3& g) {
  if (g.in[0] != 1 || g.out[0] != 1 || g.k[0] != 1 || g.pb[0] != 0 || g.pe[0] != 0) return false;
  for (int a = 1; a < 3; ++a) {
    if (g.k[a] < 1 || g.s[a] < 1 || g.d[a] != 1 || g.pb[a] < 0 || g.pe[a] < 0 || g.out[a] < 1 || g.in[a] < 0) {
      return false;
    }
  }
  // Column indices stay well inside int32 (the AVX2 edge masks compare them as such).
  return (g.s[2] == 1 || g.s[2] == 2) && g.k[2] <= 32 && g.k[1] <= 64 && g.in[2] < (int64_t{1} << 28) &&
         g.out[2] < (int64_t{1} << 28) && g.pb[2] < (int64_t{1} << 20);
}

ep::IsaTier body_tier(ep::IsaTier requested) {
#ifdef NXRT_SM_X86
  if (requested >= ep::IsaTier::kAvx512 && ep::cpu_isa_tier() >= ep::IsaTier::kAvx512) return ep::IsaTier::kAvx512;
  if (requested >= ep::IsaTier::kAvx2 && ep::cpu_has_avx2_fma()) return ep::IsaTier::kAvx2;
#else
  (void)requested;
#endif
  return ep::IsaTier::kScalar;
}

int64_t scratch_floats(const Geom3& g) { return ring_slots(g) * ring_width(g); }

void run(ep::IsaTier tier, const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1, float* scratch) {
#ifdef NXRT_SM_X86
  if (tier >= ep::IsaTier::kAvx512) {
    if (narrow_applies(g)) return run_narrow_avx512(g, x, y, p0, p1);
    return run_avx512(g, x, y, p0, p1, scratch);
  }
  if (tier >= ep::IsaTier::kAvx2) return run_avx2(g, x, y, p0, p1, scratch);
#else
  (void)tier;
#endif
  run_plain(g, x, y, p0, p1, scratch);
}

}  // namespace nxrt::ops::sepmax
