// See qgemm_u8s8.h.
#include "ops/linalg/qgemm_u8s8.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>

#include "ep/thread_pool.h"
#include "ops/common.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace nxrt::ops {

namespace {

constexpr int64_t kCols = 16;         // columns per panel
constexpr int64_t kRecordBytes = 64;  // one quad of k for a panel's 16 columns
constexpr int64_t kRowBlock = 64;     // rows of A per task
static_assert(kRowBlock % 16 == 0, "qgemm_u8s8_rows with `done` rounds blocks up to 16 rows");
constexpr int64_t kPairRows = 8;     // rows of the AVX-512 two-panel tile (tile2x8_avx512vnni)

// Per row: alpha (za + oa) and c1 = K * alpha - SA, so that Y = D + c1 * beta - alpha * SB (mod 2^32).
struct RowTerms {
  int32_t alpha = 0, c1 = 0;
};

// What a tile needs besides its rows of Au and its panel.
struct TileArgs {
  const uint8_t* au = nullptr;  // rows of Au, kp bytes apart
  int64_t kp = 0;
  const int8_t* panel = nullptr;  // quads records of 64 bytes
  int64_t quads = 0;
  // A row's quads as `segs` runs of seg_quads quads (segs * seg_quads = quads), run j at au + j *
  // seg_stride (one run, seg_quads = quads, for rows stored whole; QGemmARows).
  int64_t segs = 1, seg_quads = 0, seg_stride = 0;
  const uint8_t* rows_of(int64_t sg) const { return au + sg * seg_stride; }             // run sg of row 0
  const int8_t* panel_of(int64_t sg) const { return panel + sg * seg_quads * kRecordBytes; }  // its records
  const RowTerms* rows = nullptr;
  // The same tile from its row r on (the rows' bytes, terms, Y rows and output rows).
  TileArgs rows_after(int r) const {
    TileArgs t = *this;
    t.au += r * kp;
    t.rows += r;
    if (t.y) t.y += r * ldy;
    if (t.out) t.out += r;
    return t;
  }
  const int32_t* beta = nullptr;  // the panel's 16 beta values (zero past N)
  const int32_t* sb = nullptr;    // the panel's 16 SB values
  int32_t* y = nullptr;
  int64_t ldy = 0;
  int64_t ncols = 0;  // columns of the panel inside Y (<= 16)
  // With requantization (QGemmRequant) the tile writes bytes instead of y: its rows' output rows (null:
  // dropped), the panel's first column and its 16 values of bias - alpha * SB.
  const QGemmRequant* rq = nullptr;
  uint8_t* const* out = nullptr;
  int64_t col0 = 0;
  const int32_t* colterm = nullptr;
  const float* scale16 = nullptr;  // the panel's 16 scales (zero past N)
  bool beta_zero = false;  // every beta of the panel 0 (symmetric int8 weights): no c1 * beta term
};

// One output byte in double, as the reference requantization computes it (x = S + bias, exact).
uint8_t requant_exact(int32_t x, const QGemmRequant& rq, int64_t n) {
  const double lo = rq.out_signed ? -128.0 : 0.0, hi = rq.out_signed ? 127.0 : 255.0;
  const double q = std::min(hi, std::max(lo, round_half_even(static_cast<double>(x) * rq.scale_d[n]) + rq.zero_point));
  return static_cast<uint8_t>(static_cast<int32_t>(q));
}

// The output rows of consecutive GEMM rows (QGemmRequant's row mapping; null where a row is dropped),
// from row m on: one division where it starts, then a step per row.
class RequantRows {
 public:
  RequantRows(const QGemmRequant& rq, int64_t m) : rq_(rq), m_(m) {
    if (rq.row_period > 0) o1_ = m / rq.row_period, o2_ = m % rq.row_period;
  }
  // The next n rows' output rows into out.
  void next(int n, uint8_t** out) {
    for (int i = 0; i < n; ++i) {
      if (rq_.row_period == 0) {
        out[i] = rq_.y + m_++ * rq_.ldy;
        continue;
      }
      out[i] = o2_ < rq_.row_keep ? rq_.y + (o1_ * rq_.row_keep + o2_) * rq_.ldy : nullptr;
      if (++o2_ == rq_.row_period) o2_ = 0, ++o1_;
    }
  }

 private:
  const QGemmRequant& rq_;
  int64_t m_ = 0, o1_ = 0, o2_ = 0;
};

// The rows' 4 Au bytes of quad q as one 32-bit value.
inline int32_t quad_of(const uint8_t* row, int64_t q) {
  int32_t v;
  std::memcpy(&v, row + 4 * q, 4);
  return v;
}

// Y's row r from a tile's 16 exact dot products d (the fold of the header's formula, in uint32 so the
// wrap is defined).
inline void fold_row_scalar(const int32_t* d, const RowTerms& t, const TileArgs& a, int32_t* y) {
  for (int64_t c = 0; c < a.ncols; ++c) {
    const uint32_t v = static_cast<uint32_t>(d[c]) + static_cast<uint32_t>(t.c1) * static_cast<uint32_t>(a.beta[c]) -
                       static_cast<uint32_t>(t.alpha) * static_cast<uint32_t>(a.sb[c]);
    y[c] = static_cast<int32_t>(v);
  }
}

#if defined(__x86_64__) || defined(__i386__)

#define NXRT_QGEMM_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))
#define NXRT_QGEMM_AVX2 __attribute__((target("avx2,fma")))

// acc += the 4-byte dot products of u (unsigned) and s (signed) per 32-bit lane: vpdpbusd in place.
// With _mm512_dpbusd_epi32 GCC 12 copies every accumulator to a fresh register and back around each dot
// product (as in MatMulNBits' prefill tile, matmul_nbits_avx512.cpp); with this asm on an array of
// accumulators it keeps the array on the stack instead. tile2x8_avx512vnni uses it on 16 named
// accumulators, which stay in registers.
NXRT_QGEMM_AVX512 __attribute__((always_inline)) inline void dpbusd512(__m512i& acc, __m512i u, __m512i s) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
}

// The requantizing epilogue's constants for one panel (QGemmRequant). y_zero_point is added in float
// (w = x * scale + zp, one rounding), so w - zp is the product the guard reasons about: rne(w) - zp =
// rne(w - zp) for an integer zp. No clamp to the output range is needed for the guard: a product beyond
// ~2^9 saturates whichever way it rounds; only the conversion to int32 is kept from overflowing (min
// with 2^30; a very negative w converts to INT32_MIN, which saturates to lo too).
struct RequantVec {
  __m512 scale, zp;
  __m512i colterm, beta;
  __mmask16 keep;
  bool out_signed, beta_zero;
};
NXRT_QGEMM_AVX512 __attribute__((always_inline)) inline RequantVec requant_vec(const TileArgs& t) {
  const QGemmRequant& rq = *t.rq;
  RequantVec k;
  k.keep = t.ncols >= 16 ? __mmask16(0xffff) : __mmask16((1u << t.ncols) - 1);
  k.scale = _mm512_loadu_ps(t.scale16);
  k.zp = _mm512_set1_ps(static_cast<float>(rq.zero_point));
  k.colterm = _mm512_loadu_si512(t.colterm);
  k.beta = _mm512_loadu_si512(t.beta);
  k.out_signed = rq.out_signed;
  k.beta_zero = t.beta_zero;
  return k;
}

// Lanes of x whose float product lay within 2^-12 of a half-integer, in double (rare: ~2^-11 of them).
__attribute__((noinline)) void requant_lanes_exact(const int32_t* x, unsigned lanes, const TileArgs& t, uint8_t* dst) {
  for (int i = 0; i < 16; ++i)
    if (lanes >> i & 1u) dst[i] = requant_exact(x[i], *t.rq, t.col0 + i);
}

// Row r's 16 exact dot products d as output bytes at t.out[r] (QGemmRequant).
NXRT_QGEMM_AVX512 __attribute__((always_inline)) inline void requant_row_avx512(__m512i d, const TileArgs& t, int r,
                                                                               const RequantVec& k) {
  uint8_t* dst = t.out[r];
  if (!dst) return;
  dst += t.col0;
  __m512i x = _mm512_add_epi32(d, k.colterm);
  if (!k.beta_zero) x = _mm512_add_epi32(x, _mm512_mullo_epi32(_mm512_set1_epi32(t.rows[r].c1), k.beta));
  const __m512 w = _mm512_min_ps(_mm512_fmadd_ps(_mm512_cvtepi32_ps(x), k.scale, k.zp), _mm512_set1_ps(0x1p30f));
  const __m512i q = _mm512_cvt_roundps_epi32(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // |w - q| is exact wherever it matters (|w| < 2^10, q within half a step).
  const __mmask16 near_half = _mm512_mask_cmp_ps_mask(
      k.keep, _mm512_abs_ps(_mm512_sub_ps(w, _mm512_cvtepi32_ps(q))), _mm512_set1_ps(0.5f - 0x1p-12f), _CMP_GT_OQ);
  const __m128i b = k.out_signed ? _mm512_cvtsepi32_epi8(q) : _mm512_cvtusepi32_epi8(_mm512_max_epi32(q, _mm512_setzero_si512()));
  _mm_mask_storeu_epi8(dst, k.keep, b);
  if (near_half) {
    alignas(64) int32_t xs[16];
    _mm512_store_si512(xs, x);
    requant_lanes_exact(xs, near_half, t, dst);
  }
}

// A tile's rows as int32 Y or, with t.rq, as output bytes.
NXRT_QGEMM_AVX512 __attribute__((always_inline)) inline void finish_rows_avx512(const __m512i* acc, int stride, int rows,
                                                                               const TileArgs& t) {
  if (t.rq) {
    const RequantVec k = requant_vec(t);
    for (int r = 0; r < rows; ++r) requant_row_avx512(acc[r * stride], t, r, k);
    return;
  }
  const __m512i beta = _mm512_loadu_si512(t.beta), sb = _mm512_loadu_si512(t.sb);
  const __mmask16 keep = t.ncols >= 16 ? __mmask16(0xffff) : __mmask16((1u << t.ncols) - 1);
  for (int r = 0; r < rows; ++r) {
    const __m512i y = _mm512_sub_epi32(_mm512_add_epi32(acc[r * stride], _mm512_mullo_epi32(_mm512_set1_epi32(t.rows[r].c1), beta)),
                                       _mm512_mullo_epi32(_mm512_set1_epi32(t.rows[r].alpha), sb));
    _mm512_mask_storeu_epi32(t.y + r * t.ldy, keep, y);
  }
}

template <int MR>
NXRT_QGEMM_AVX512 void tile_avx512vnni(const TileArgs& a, int rows) {
  __m512i acc[MR];
  for (int r = 0; r < MR; ++r) acc[r] = _mm512_setzero_si512();
  for (int64_t sg = 0; sg < a.segs; ++sg) {
    const uint8_t* au = a.rows_of(sg);
    const int8_t* pa = a.panel_of(sg);
    for (int64_t q = 0; q < a.seg_quads; ++q) {
      const __m512i w = _mm512_loadu_si512(pa + q * kRecordBytes);
      for (int r = 0; r < MR; ++r) acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_set1_epi32(quad_of(au + r * a.kp, q)), w);
    }
  }
  finish_rows_avx512(acc, 1, std::min(MR, rows), a);
}

// Two adjacent panels (32 columns) at once: each row's broadcast quad serves both (a second TileArgs
// `b` for the second panel: its panel, beta, sb, y and ncols).
template <int MR>
NXRT_QGEMM_AVX512 void tile2_avx512vnni(const TileArgs& a, const TileArgs& b, int rows) {
  __m512i acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
  for (int64_t sg = 0; sg < a.segs; ++sg) {
    const uint8_t* au = a.rows_of(sg);
    const int8_t* pa = a.panel_of(sg);
    const int8_t* pb = b.panel_of(sg);
    for (int64_t q = 0; q < a.seg_quads; ++q) {
      const __m512i w0 = _mm512_loadu_si512(pa + q * kRecordBytes);
      const __m512i w1 = _mm512_loadu_si512(pb + q * kRecordBytes);
      for (int r = 0; r < MR; ++r) {
        const __m512i av = _mm512_set1_epi32(quad_of(au + r * a.kp, q));
        acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], av, w0);
        acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], av, w1);
      }
    }
  }
  finish_rows_avx512(&acc[0][0], 2, std::min(MR, rows), a);
  finish_rows_avx512(&acc[0][1], 2, std::min(MR, rows), b);
}

// Eight rows by one panel (an odd panel, or N of one panel): 8 named accumulators, so 8 independent
// vpdpbusd chains (the 4-row tile's 4 waited on each dot product's latency: PP-OCRv4 det's 3x3 stem to
// 16 channels on a 640x640 image spent ~1.5 ms in it).
NXRT_QGEMM_AVX512 void tile1x8_avx512vnni(const TileArgs& a) {
  const int64_t kp = a.kp;
  __m512i c0 = _mm512_setzero_si512(), c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
  for (int64_t sg = 0; sg < a.segs; ++sg) {
    const uint8_t* r0 = a.rows_of(sg);
    const int8_t* pa = a.panel_of(sg);
    for (int64_t q = 0; q < a.seg_quads; ++q) {
      const __m512i w = _mm512_loadu_si512(pa + q * kRecordBytes);
#define NXRT_QGEMM_ROW(R) dpbusd512(c##R, _mm512_set1_epi32(quad_of(r0 + (R) * kp, q)), w);
      NXRT_QGEMM_ROW(0) NXRT_QGEMM_ROW(1) NXRT_QGEMM_ROW(2) NXRT_QGEMM_ROW(3)
      NXRT_QGEMM_ROW(4) NXRT_QGEMM_ROW(5) NXRT_QGEMM_ROW(6) NXRT_QGEMM_ROW(7)
#undef NXRT_QGEMM_ROW
    }
  }
  const __m512i acc[8] = {c0, c1, c2, c3, c4, c5, c6, c7};
  finish_rows_avx512(acc, 1, 8, a);
}

// Eight rows by two panels: 16 accumulators, enough independent vpdpbusd chains for both of a Zen 5
// core's units (the 4-row pass, 8 chains, reached ~58% of their peak). Named accumulators, updated in
// place (dpbusd512), so they stay in registers.
NXRT_QGEMM_AVX512 __attribute__((always_inline)) inline void tile2x8_avx512vnni(const TileArgs& a, const TileArgs& b) {
  const int64_t kp = a.kp;
  __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00,
          c40 = c00, c41 = c00, c50 = c00, c51 = c00, c60 = c00, c61 = c00, c70 = c00, c71 = c00;
  for (int64_t sg = 0; sg < a.segs; ++sg) {
    const uint8_t* r0 = a.rows_of(sg);
    const int8_t* pa = a.panel_of(sg);
    const int8_t* pb = b.panel_of(sg);
    for (int64_t q = 0; q < a.seg_quads; ++q) {
      const __m512i w0 = _mm512_loadu_si512(pa + q * kRecordBytes);
      const __m512i w1 = _mm512_loadu_si512(pb + q * kRecordBytes);
#define NXRT_QGEMM_ROW(R)                                                   \
  {                                                                         \
    const __m512i av = _mm512_set1_epi32(quad_of(r0 + (R) * kp, q));        \
    dpbusd512(c##R##0, av, w0);                                             \
    dpbusd512(c##R##1, av, w1);                                             \
  }
      NXRT_QGEMM_ROW(0) NXRT_QGEMM_ROW(1) NXRT_QGEMM_ROW(2) NXRT_QGEMM_ROW(3)
      NXRT_QGEMM_ROW(4) NXRT_QGEMM_ROW(5) NXRT_QGEMM_ROW(6) NXRT_QGEMM_ROW(7)
#undef NXRT_QGEMM_ROW
    }
  }
  const __m512i acc[8][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31},
                             {c40, c41}, {c50, c51}, {c60, c61}, {c70, c71}};
  finish_rows_avx512(&acc[0][0], 2, 8, a);
  finish_rows_avx512(&acc[0][1], 2, 8, b);
}

// `tiles` 8-row tiles of two panels one after another from a's and b's rows on (a block's rows against
// one panel pair in one call: per tile the call and the arguments' setup were ~4% of a QDQ ResNet-50
// run), their output rows from `cursor` when requantizing.
NXRT_QGEMM_AVX512 void tiles2x8_avx512vnni(TileArgs a, TileArgs b, int64_t tiles, RequantRows* cursor, uint8_t** out) {
  for (int64_t i = 0; i < tiles; ++i) {
    if (cursor) cursor->next(static_cast<int>(kPairRows), out);
    tile2x8_avx512vnni(a, b);
    a.au += kPairRows * a.kp;
    b.au = a.au;
    a.rows += kPairRows;
    b.rows = a.rows;
    if (a.y) a.y += kPairRows * a.ldy, b.y += kPairRows * b.ldy;
  }
}

// acc += the 4-byte dot products of u (unsigned) and s (signed) per 32-bit lane: AVX-VNNI's VEX
// vpdpbusd, as an asm statement (the intrinsic needs the avxvnni target, which older toolchains lack).
NXRT_QGEMM_AVX2 __attribute__((always_inline)) inline void dpbusd_vex(__m256i& acc, __m256i u, __m256i s) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
}

// Stores 16 int32 (two halves) of row y, the first ncols of them.
NXRT_QGEMM_AVX2 inline void store16(int32_t* y, __m256i lo, __m256i hi, int64_t ncols) {
  if (ncols >= 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), lo);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + 8), hi);
    return;
  }
  alignas(32) int32_t t[16];
  _mm256_store_si256(reinterpret_cast<__m256i*>(t), lo);
  _mm256_store_si256(reinterpret_cast<__m256i*>(t + 8), hi);
  std::memcpy(y, t, static_cast<size_t>(ncols) * sizeof(int32_t));
}

NXRT_QGEMM_AVX2 inline __m256i fold8(__m256i d, const RowTerms& t, const int32_t* beta, const int32_t* sb) {
  const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(beta));
  const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb));
  return _mm256_sub_epi32(_mm256_add_epi32(d, _mm256_mullo_epi32(_mm256_set1_epi32(t.c1), b)),
                          _mm256_mullo_epi32(_mm256_set1_epi32(t.alpha), s));
}

// 8 of a row's requantized values (QGemmRequant, as requant_row_avx512 computes them) from its exact dot
// products d (columns c0 .. c0 + 7 of the panel): w = x * scale + zp in float, rounded to nearest even;
// `near_half` gets a bit per lane whose w lay within 2^-12 of a half-integer (lane i at bit c0 + i).
NXRT_QGEMM_AVX2 __attribute__((always_inline)) inline __m256i requant8_avx2(__m256i d, const TileArgs& t, int r, int c0,
                                                                          __m256i* x_out, unsigned* near_half) {
  __m256i x = _mm256_add_epi32(d, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.colterm + c0)));
  if (!t.beta_zero)
    x = _mm256_add_epi32(x, _mm256_mullo_epi32(_mm256_set1_epi32(t.rows[r].c1),
                                               _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.beta + c0))));
  *x_out = x;
  const __m256 scale = _mm256_loadu_ps(t.scale16 + c0);
  const __m256 w = _mm256_min_ps(_mm256_fmadd_ps(_mm256_cvtepi32_ps(x), scale, _mm256_set1_ps(static_cast<float>(t.rq->zero_point))),
                                 _mm256_set1_ps(0x1p30f));
  const __m256 rw = _mm256_round_ps(w, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 dist = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), _mm256_sub_ps(w, rw));
  *near_half |= static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(dist, _mm256_set1_ps(0.5f - 0x1p-12f), _CMP_GT_OQ))) << c0;
  return _mm256_cvttps_epi32(rw);  // rw is an integer (or past int32: INT32_MIN, which saturates)
}

// Row r of a tile (16 exact dot products as two halves) as int32 Y or, with t.rq, as output bytes.
NXRT_QGEMM_AVX2 __attribute__((always_inline)) inline void finish_row_avx2(__m256i lo, __m256i hi, const TileArgs& t, int r) {
  if (!t.rq) {
    store16(t.y + r * t.ldy, fold8(lo, t.rows[r], t.beta, t.sb), fold8(hi, t.rows[r], t.beta + 8, t.sb + 8), t.ncols);
    return;
  }
  uint8_t* dst = t.out[r];
  if (!dst) return;
  dst += t.col0;
  __m256i x[2];
  unsigned near_half = 0;
  const __m256i q0 = requant8_avx2(lo, t, r, 0, &x[0], &near_half), q1 = requant8_avx2(hi, t, r, 8, &x[1], &near_half);
  // int32 -> int16 -> bytes with saturation (packs work per 128-bit lane: the 64-bit quarters reordered).
  const __m256i w16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(q0, q1), 0xD8);
  const __m128i a = _mm256_castsi256_si128(w16), b = _mm256_extracti128_si256(w16, 1);
  const __m128i bytes = t.rq->out_signed ? _mm_packs_epi16(a, b) : _mm_packus_epi16(a, b);
  if (t.ncols >= 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), bytes);
  } else {
    alignas(16) uint8_t tmp[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), bytes);
    std::memcpy(dst, tmp, static_cast<size_t>(t.ncols));
  }
  near_half &= t.ncols >= 16 ? 0xffffu : (1u << t.ncols) - 1;
  if (near_half) {
    alignas(32) int32_t xs[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(xs), x[0]);
    _mm256_store_si256(reinterpret_cast<__m256i*>(xs + 8), x[1]);
    requant_lanes_exact(xs, near_half, t, dst);
  }
}

template <int MR>
NXRT_QGEMM_AVX2 void tile_avxvnni(const TileArgs& a, int rows) {
  __m256i acc[MR][2];
  for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
  for (int64_t sg = 0; sg < a.segs; ++sg) {
    const uint8_t* au = a.rows_of(sg);
    const int8_t* pa = a.panel_of(sg);
    for (int64_t q = 0; q < a.seg_quads; ++q) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + q * kRecordBytes));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + q * kRecordBytes + 32));
      for (int r = 0; r < MR; ++r) {
        const __m256i av = _mm256_set1_epi32(quad_of(au + r * a.kp, q));
        dpbusd_vex(acc[r][0], av, w0);
        dpbusd_vex(acc[r][1], av, w1);
      }
    }
  }
  for (int r = 0; r < MR && r < rows; ++r) finish_row_avx2(acc[r][0], acc[r][1], a, r);
}

// AVX-VNNI, four rows: the 8 accumulators named, so the in-place dot products keep them in registers
// (on the array above GCC 12 loads and stores every accumulator around each vpdpbusd).
NXRT_QGEMM_AVX2 void tile4_avxvnni(const TileArgs& a) {
  const int64_t kp = a.kp;
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
  for (int64_t sg = 0; sg < a.segs; ++sg) {
    const uint8_t* r0 = a.rows_of(sg);
    const int8_t* pa = a.panel_of(sg);
    for (int64_t q = 0; q < a.seg_quads; ++q) {
      const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + q * kRecordBytes));
      const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pa + q * kRecordBytes + 32));
#define NXRT_QGEMM_ROW(R)                                                \
  {                                                                      \
    const __m256i av = _mm256_set1_epi32(quad_of(r0 + (R) * kp, q));     \
    dpbusd_vex(c##R##0, av, w0);                                         \
    dpbusd_vex(c##R##1, av, w1);                                         \
  }
      NXRT_QGEMM_ROW(0) NXRT_QGEMM_ROW(1) NXRT_QGEMM_ROW(2) NXRT_QGEMM_ROW(3)
#undef NXRT_QGEMM_ROW
    }
  }
  const __m256i acc[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
  for (int r = 0; r < 4; ++r) finish_row_avx2(acc[r][0], acc[r][1], a, r);
}

// Plain AVX2: each record's four 16-byte column groups widened to int16 (shared by the rows), the
// row's quad as four int16 repeated, vpmaddwd: 32-bit lanes of (k0 k1) and (k2 k3) pair sums per
// column, added up over the quads and paired at the end (vphaddd, then vpermd back to column order).
template <int MR>
NXRT_QGEMM_AVX2 void tile_avx2(const TileArgs& a, int rows) {
  __m256i acc[MR][4];
  for (int r = 0; r < MR; ++r)
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_setzero_si256();
  for (int64_t sg = 0; sg < a.segs; ++sg) {
    const uint8_t* au = a.rows_of(sg);
    const int8_t* pa = a.panel_of(sg);
    for (int64_t q = 0; q < a.seg_quads; ++q) {
      const int8_t* rec = pa + q * kRecordBytes;
      __m256i w[4];
      for (int j = 0; j < 4; ++j) w[j] = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + 16 * j)));
      for (int r = 0; r < MR; ++r) {
        // The quad's 4 bytes widened to int16 and repeated: interleaving the broadcast quad with zeros
        // gives (b0, b1, b2, b3) as int16 twice per 128-bit lane (two vector instructions where the
        // widening in general registers took ~10).
        const __m256i av = _mm256_unpacklo_epi8(_mm256_set1_epi32(quad_of(au + r * a.kp, q)), _mm256_setzero_si256());
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_add_epi32(acc[r][j], _mm256_madd_epi16(w[j], av));
      }
    }
  }
  // hadd(x, y) per 128-bit half: x0+x1, x2+x3, y0+y1, y2+y3: columns 0, 1, 4, 5 | 2, 3, 6, 7 of the 8.
  const __m256i order = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  for (int r = 0; r < MR && r < rows; ++r) {
    const __m256i lo = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(acc[r][0], acc[r][1]), order);
    const __m256i hi = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(acc[r][2], acc[r][3]), order);
    finish_row_avx2(lo, hi, a, r);
  }
}

#endif

// One tile of `rows` (1 to 8 for kAvx512Vnni, to 4 for kAvxVnni and kNone, to 2 for kAvx2) rows against
// one panel.
void run_tile(QGemmKernel kernel, const TileArgs& a, int rows) {
#if defined(__x86_64__) || defined(__i386__)
  switch (kernel) {
    case QGemmKernel::kAvx512Vnni:
      if (rows == 8) tile1x8_avx512vnni(a);
      else if (rows > 4) tile_avx512vnni<4>(a, 4), run_tile(kernel, a.rows_after(4), rows - 4);
      else if (rows == 4) tile_avx512vnni<4>(a, 4);
      else if (rows == 3) tile_avx512vnni<3>(a, rows);
      else if (rows == 2) tile_avx512vnni<2>(a, rows); else tile_avx512vnni<1>(a, rows);
      return;
    case QGemmKernel::kAvxVnni:
      if (rows == 4) tile4_avxvnni(a); else if (rows == 3) tile_avxvnni<3>(a, rows);
      else if (rows == 2) tile_avxvnni<2>(a, rows); else tile_avxvnni<1>(a, rows);
      return;
    case QGemmKernel::kAvx2:
      if (rows == 2) tile_avx2<2>(a, rows); else tile_avx2<1>(a, rows);
      return;
    case QGemmKernel::kNone: break;
  }
#endif
  // Portable tile (kNone: not chosen by MatMulInteger, which keeps its generic loop then).
  for (int r = 0; r < rows; ++r) {
    int32_t d[kCols] = {};
    for (int64_t q = 0; q < a.quads; ++q) {
      const uint8_t* quad = a.rows_of(q / a.seg_quads) + r * a.kp + 4 * (q % a.seg_quads);
      for (int64_t c = 0; c < kCols; ++c)
        for (int i = 0; i < 4; ++i)
          d[c] = static_cast<int32_t>(static_cast<uint32_t>(d[c]) +
                                      static_cast<uint32_t>(quad[i]) *
                                          static_cast<uint32_t>(static_cast<int32_t>(a.panel[q * kRecordBytes + 4 * c + i])));
    }
    fold_row_scalar(d, a.rows[r], a, a.y + r * a.ldy);
  }
}

// Rows [m0, m1) of Au (row m at au + m * kp, its quads in `segs` runs seg_stride apart) against panels
// [p0, p1).
// With `rq` (QGemmRequant) the rows become output bytes instead of Y's int32 values: the AVX-512 tiles
// requantize in registers (colterm: bias - alpha * SB per packed column, scale16: the float scales
// padded to whole panels, beta_zero: every beta 0); the portable tile writes a small int32 tile first,
// each value then requantized in double.
void run_block(QGemmKernel kernel, const uint8_t* au, int64_t kp, const RowTerms* terms, const QGemmPackedB& B,
               const int32_t* beta, int64_t m0, int64_t m1, int64_t p0, int64_t p1, int32_t* Y, int64_t ldy,
               int64_t segs = 1, int64_t seg_stride = 0, const QGemmRequant* rq = nullptr,
               const int32_t* colterm = nullptr, const float* scale16 = nullptr, bool beta_zero = false) {
  uint8_t* out[kPairRows] = {};
  int32_t staged[4][kCols];  // the portable and AVX2-tier tiles' int32 rows when requantizing
  auto panel_args = [&](int64_t p) {
    TileArgs a;
    a.kp = kp;
    a.panel = B.data.data() + p * B.quads * kRecordBytes;
    a.quads = B.quads;
    a.segs = segs;
    a.seg_quads = B.quads / segs;
    a.seg_stride = seg_stride;
    a.beta = beta + p * kCols;
    a.sb = B.col_sums.data() + p * kCols;
    a.ldy = ldy;
    a.ncols = std::min<int64_t>(kCols, B.N - p * kCols);
    if (rq) {
      a.rq = rq;
      a.out = out;
      a.col0 = p * kCols;
      a.colterm = colterm + p * kCols;
      a.scale16 = scale16 + p * kCols;
      a.beta_zero = beta_zero;
    }
    return a;
  };
  for (int64_t p = p0; p < p1; ++p) {
    TileArgs a = panel_args(p);
#if defined(__x86_64__) || defined(__i386__)
    if (kernel == QGemmKernel::kAvx512Vnni && p + 1 < p1) {  // two panels per pass over the rows
      TileArgs b = panel_args(p + 1);
      std::optional<RequantRows> cursor;
      if (rq) cursor.emplace(*rq, m0);
      for (int64_t m = m0; m < m1;) {
        const int64_t left = m1 - m;
        a.au = b.au = au + m * kp;
        a.rows = b.rows = terms + m;
        a.y = Y ? Y + m * ldy + p * kCols : nullptr;
        b.y = Y ? a.y + kCols : nullptr;
        if (left >= kPairRows) {
          const int64_t tiles = left / kPairRows;
          tiles2x8_avx512vnni(a, b, tiles, rq ? &*cursor : nullptr, out);
          m += tiles * kPairRows;
          continue;
        }
        // (each branch below takes `left` rows but the 4-row one, which takes 4)
        if (rq) cursor->next(static_cast<int>(left >= 4 ? 4 : left), out);
        if (left >= 4) {
          tile2_avx512vnni<4>(a, b, 4);
          m += 4;
        } else {
          if (left == 3) tile2_avx512vnni<3>(a, b, 3); else if (left == 2) tile2_avx512vnni<2>(a, b, 2);
          else tile2_avx512vnni<1>(a, b, 1);
          m += left;
        }
      }
      ++p;
      continue;
    }
#endif
    // One panel: 8 rows a tile on AVX-512 (tile1x8_avx512vnni), else the kernel's tile height.
    const int mr = kernel == QGemmKernel::kAvx2 ? 2 : kernel == QGemmKernel::kAvx512Vnni ? 8 : 4;
    // The portable tile writes int32 rows: into `staged` when requantizing.
    const bool stage = rq && kernel == QGemmKernel::kNone;
    std::optional<RequantRows> cursor;
    if (rq) cursor.emplace(*rq, m0);
    for (int64_t m = m0; m < m1; m += mr) {
      const int rows = static_cast<int>(std::min<int64_t>(mr, m1 - m));
      a.au = au + m * kp;
      a.rows = terms + m;
      a.y = stage ? &staged[0][0] : Y ? Y + m * ldy + p * kCols : nullptr;
      if (stage) a.ldy = kCols;
      if (rq) cursor->next(rows, out);
      run_tile(kernel, a, rows);
      if (stage)
        for (int r = 0; r < rows; ++r) {
          if (!out[r]) continue;
          for (int64_t c = 0; c < a.ncols; ++c) {
            const int32_t x = static_cast<int32_t>(static_cast<uint32_t>(staged[r][c]) +
                                                   static_cast<uint32_t>(rq->bias[p * kCols + c]));
            out[r][p * kCols + c] = requant_exact(x, *rq, p * kCols + c);
          }
        }
    }
  }
}

}  // namespace

const std::vector<QGemmKernelInfo>& qgemm_kernels() {
  static const std::vector<QGemmKernelInfo> k = {
      {QGemmKernel::kAvx2, "qu8s8_i32_gemm_2x16__avx2", ep::IsaTier::kAvx2},
      {QGemmKernel::kAvxVnni, "qu8s8_i32_gemm_4x16__avxvnni", ep::IsaTier::kAvx2},
      {QGemmKernel::kAvx512Vnni, "qu8s8_i32_gemm_4x16__avx512vnni", ep::IsaTier::kAvx512},
  };
  return k;
}

const char* qgemm_kernel_name(QGemmKernel k) {
  for (const QGemmKernelInfo& i : qgemm_kernels())
    if (i.kernel == k) return i.name;
  return "generic integer matmul";
}

bool qgemm_kernel_supported(QGemmKernel k) {
  const ep::IsaTier cpu = ep::cpu_isa_tier();
  switch (k) {
    case QGemmKernel::kNone: return true;
    case QGemmKernel::kAvx2: return cpu >= ep::IsaTier::kAvx2;
    case QGemmKernel::kAvxVnni: return cpu >= ep::IsaTier::kAvx2 && ep::cpu_has_avx_vnni();
    case QGemmKernel::kAvx512Vnni: return cpu >= ep::IsaTier::kAvx512 && ep::cpu_has_avx512_vnni();
  }
  return false;
}

QGemmKernel choose_qgemm_kernel(ep::IsaTier tier) {
  if (tier >= ep::IsaTier::kAvx512 && qgemm_kernel_supported(QGemmKernel::kAvx512Vnni)) return QGemmKernel::kAvx512Vnni;
  if (tier >= ep::IsaTier::kAvx2 && qgemm_kernel_supported(QGemmKernel::kAvxVnni)) return QGemmKernel::kAvxVnni;
  if (tier >= ep::IsaTier::kAvx2 && qgemm_kernel_supported(QGemmKernel::kAvx2)) return QGemmKernel::kAvx2;
  return QGemmKernel::kNone;
}

QGemmPackedB qgemm_pack_b(const void* Bv, bool b_signed, int64_t K, int64_t N) {
  QGemmPackedB P;
  P.K = K;
  P.N = N;
  P.quads = (K + 3) / 4;
  P.panels = (N + kCols - 1) / kCols;
  P.ob = b_signed ? 0 : 128;
  P.data.assign(static_cast<size_t>(P.panels * P.quads * kRecordBytes), 0);
  P.col_sums.assign(static_cast<size_t>(P.panels * kCols), 0);
  const uint8_t* B = static_cast<const uint8_t*>(Bv);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t n = 0; n < N; ++n) {
      const uint8_t raw = B[k * N + n];
      const int32_t v = b_signed ? static_cast<int32_t>(static_cast<int8_t>(raw)) : static_cast<int32_t>(raw) - 128;
      const int64_t p = n / kCols, c = n % kCols;
      P.data[static_cast<size_t>((p * P.quads + k / 4) * kRecordBytes + 4 * c + k % 4)] = static_cast<int8_t>(v);
      P.col_sums[static_cast<size_t>(n)] += v;
    }
  return P;
}

size_t qgemm_workspace_bytes(const QGemmPackedB& B, int64_t M, bool rows_in_place) {
  const size_t rows = rows_in_place ? 0 : static_cast<size_t>(M * B.quads * 4);
  // beta, then qgemm_u8s8_rows' row sums, its per-block counts of finished panel groups (blocks of at
  // least 4 rows) and the requantizing tiles' bias - alpha * SB and float scale per packed column.
  return (rows + 63) / 64 * 64 + static_cast<size_t>(M) * sizeof(RowTerms) +
         static_cast<size_t>(3 * B.panels * kCols + M + M / 4 + 1) * sizeof(int32_t);
}

namespace {
// beta per packed column (zero past N) into `beta`.
void fill_beta(const QGemmPackedB& B, const int32_t* zb, int32_t* beta) {
  for (int64_t n = 0; n < B.panels * kCols; ++n) beta[n] = n < B.N ? zb[n] - B.ob : 0;
}
}  // namespace

bool qgemm_requant_exact(int64_t K, const int32_t* bias, const double* scale_d, int64_t n) {
  int64_t most = 0;
  for (int64_t i = 0; i < n; ++i) {
    most = std::max<int64_t>(most, bias[i] < 0 ? -static_cast<int64_t>(bias[i]) : bias[i]);
    const double a = std::fabs(scale_d[i]);
    if (!(a == 0.0 || (a >= 0x1p-100 && a <= 0x1p100))) return false;  // NaN fails too
  }
  return K <= (int64_t{1} << 31) / (255 * 255) && K * 255 * 255 + most < (int64_t{1} << 31);
}

void qgemm_requant_scales(const double* scale_d, int64_t n, float* scale) {
  for (int64_t i = 0; i < n; ++i) scale[i] = static_cast<float>(scale_d[i]);
}

void qgemm_u8s8_rows(QGemmKernel kernel, int64_t M, QGemmFillRows fill, int32_t alpha, const QGemmPackedB& B,
                     const int32_t* zb, int32_t* Y, int64_t ldy, ep::ThreadPool* pool, void* workspace,
                     const QGemmRowsDone* done, const QGemmARows* a_rows, const QGemmRequant* requant) {
  if (M <= 0 || B.N <= 0) return;
  const int64_t K = B.K, kp = B.quads * 4;
  uint8_t* au = static_cast<uint8_t*>(workspace);
  RowTerms* terms = reinterpret_cast<RowTerms*>(au + (a_rows ? 0 : (static_cast<size_t>(M * kp) + 63) / 64 * 64));
  int32_t* beta = reinterpret_cast<int32_t*>(terms + M);
  int32_t* row_sums = beta + B.panels * kCols;
  fill_beta(B, zb, beta);
  // The requantizing tiles' per-column terms: bias - alpha * SB (mod 2^32, as the fold's).
  int32_t* colterm = row_sums + M + M / 4 + 1;
  float* scale16 = reinterpret_cast<float*>(colterm + B.panels * kCols);
  bool beta_zero = true;
  if (requant)
    for (int64_t n = 0; n < B.panels * kCols; ++n) {
      const uint32_t b = n < B.N ? static_cast<uint32_t>(requant->bias[n]) : 0u;
      colterm[n] = static_cast<int32_t>(b - static_cast<uint32_t>(alpha) * static_cast<uint32_t>(B.col_sums[static_cast<size_t>(n)]));
      scale16[n] = n < B.N ? requant->scale[n] : 0.0f;
      beta_zero = beta_zero && beta[n] == 0;
    }
  // Blocks of up to kRowBlock rows, at least ~4 per thread when M allows (multiples of the tile height).
  const int threads = pool ? pool->num_threads() : 1;
  int64_t block = (M + 4 * threads - 1) / (4 * threads);
  // Whole 8-row tiles for the AVX-512 kernel, so only the last block has a short tile (196 rows as
  // blocks of 52 gave each block a 4-row tail, which runs at about half the 8-row tile's rate).
  const int64_t tile_rows = kernel == QGemmKernel::kAvx512Vnni ? kPairRows : 4;
  block = std::max<int64_t>(tile_rows, std::min<int64_t>(kRowBlock, (block + tile_rows - 1) / tile_rows * tile_rows));
  if (done) block = (block + 15) / 16 * 16;  // kRowBlock is a multiple of 16
  int64_t blocks = (M + block - 1) / block;
  // Rows [m0, m1) filled and their terms set.
  auto prepare_rows = [&](int64_t m0, int64_t m1) {
    fill(m0, m1, a_rows ? nullptr : au + m0 * kp, row_sums + m0);
    for (int64_t m = m0; m < m1; ++m) {
      terms[m].alpha = alpha;
      terms[m].c1 = static_cast<int32_t>(static_cast<uint32_t>(K) * static_cast<uint32_t>(alpha) - static_cast<uint32_t>(row_sums[m]));
    }
  };
  auto prepare = [&](int64_t b) { prepare_rows(b * block, std::min(M, (b + 1) * block)); };
  auto multiply = [&](int64_t b, int64_t p0, int64_t p1) {
    const int64_t m0 = b * block, m1 = std::min(M, m0 + block);
    if (a_rows)
      run_block(kernel, a_rows->base, a_rows->row_stride, terms, B, beta, m0, m1, p0, p1, Y, ldy, a_rows->segments,
                a_rows->segment_stride, requant, colterm, scale16, beta_zero);
    else run_block(kernel, au, kp, terms, B, beta, m0, m1, p0, p1, Y, ldy, 1, 0, requant, colterm, scale16, beta_zero);
  };
  // Few blocks for the threads (a conv's 7x7 plane is 49 rows: 4 blocks of 16 for 2 threads, one
  // thread doing 32 rows to the other's 17): the blocks' panels split into groups as well, each block
  // prepared first, and a block handed to `done` by whichever thread finishes its last group.
  // Weights past a core's L2 (a 3x3 conv of 512 channels: 2.4 MB) would stream from L3 or memory once
  // per block: then all rows are one block, whose panel groups each read their part of B once (QDQ
  // ResNet-50 at 2 threads ~3% faster on Zen 5; from 256 KB on it was slower than from 1 MB).
  constexpr size_t kL2Bytes = size_t(1) << 20;
  int64_t per_group = B.panels;
  // One thread: such weights against few rows (at most two blocks' worth: a 7x7 plane's 49) as one block
  // too (QDQ ResNet-50's last stage had read its 1-2.4 MB weights 4 times a conv, once per 16 rows).
  if (threads == 1 && B.data.size() >= kL2Bytes && M <= 2 * kRowBlock) {
    block = M;
    blocks = 1;
  }
  if (pool && threads > 1 && blocks < 4 * threads && B.panels >= 4) {
    if (B.data.size() >= kL2Bytes) {
      block = M;
      blocks = 1;
    }
    const int64_t want = (4 * threads + blocks - 1) / blocks;
    per_group = std::max<int64_t>(2, ((B.panels + want - 1) / want + 1) / 2 * 2);  // whole pairs of panels
  }
  const int64_t groups = (B.panels + per_group - 1) / per_group;
  if (groups > 1) {
    int32_t* finished = row_sums + M;  // per block: its groups multiplied so far
    pool->parallel_for((M + 15) / 16, 1, [&](int64_t c0, int64_t c1) { prepare_rows(c0 * 16, std::min(M, c1 * 16)); });
    for (int64_t b = 0; b < blocks; ++b) finished[b] = 0;
    pool->parallel_for(blocks * groups, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t b = t / groups, g = t % groups;
        multiply(b, g * per_group, std::min(B.panels, (g + 1) * per_group));
        if (done && std::atomic_ref<int32_t>(finished[b]).fetch_add(1, std::memory_order_acq_rel) + 1 == groups)
          (*done)(b * block, std::min(M, (b + 1) * block));
      }
    });
    return;
  }
  auto work = [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      prepare(b);
      multiply(b, 0, B.panels);
      if (done) (*done)(b * block, std::min(M, (b + 1) * block));
    }
  };
  if (pool) pool->parallel_for(blocks, 1, work); else work(0, blocks);
}

namespace {
// dst[k] = src[k] ^ flip for k < K, and the sum of the bytes written (Au's row and its SA).
uint32_t copy_row_scalar(const uint8_t* src, uint8_t flip, int64_t K, uint8_t* dst) {
  uint32_t sa = 0;
  for (int64_t k = 0; k < K; ++k) {
    dst[k] = static_cast<uint8_t>(src[k] ^ flip);
    sa += dst[k];
  }
  return sa;
}
#if defined(__x86_64__) || defined(__i386__)
// 32 bytes at a time, the sums by vpsadbw (a scalar byte loop took ~1 ns a byte: ~0.1 ms of a
// [128, 768] x [768, 768] MatMulInteger's ~0.3).
NXRT_QGEMM_AVX2 uint32_t copy_row_avx2(const uint8_t* src, uint8_t flip, int64_t K, uint8_t* dst) {
  const __m256i f = _mm256_set1_epi8(static_cast<char>(flip)), zero = _mm256_setzero_si256();
  __m256i acc = zero;
  int64_t k = 0;
  for (; k + 32 <= K; k += 32) {
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k)), f);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), v);
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(v, zero));
  }
  const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  const uint64_t sum = static_cast<uint64_t>(_mm_cvtsi128_si64(h)) + static_cast<uint64_t>(_mm_extract_epi64(h, 1));
  return static_cast<uint32_t>(sum) + copy_row_scalar(src + k, flip, K - k, dst + k);
}
#endif
uint32_t copy_row(QGemmKernel kernel, const uint8_t* src, uint8_t flip, int64_t K, uint8_t* dst) {
#if defined(__x86_64__) || defined(__i386__)
  if (kernel != QGemmKernel::kNone) return copy_row_avx2(src, flip, K, dst);  // every vector kernel has AVX2
#endif
  return copy_row_scalar(src, flip, K, dst);
}
}  // namespace

void qgemm_u8s8(QGemmKernel kernel, const void* Av, bool a_signed, int64_t M, int64_t lda, const int32_t* za,
                const QGemmPackedB& B, const int32_t* zb, int32_t* Y, int64_t ldy, ep::ThreadPool* pool,
                void* workspace) {
  if (M <= 0 || B.N <= 0) return;
  const int64_t K = B.K, kp = B.quads * 4;
  uint8_t* au = static_cast<uint8_t*>(workspace);
  RowTerms* terms = reinterpret_cast<RowTerms*>(au + (static_cast<size_t>(M * kp) + 63) / 64 * 64);
  int32_t* beta = reinterpret_cast<int32_t*>(terms + M);
  const uint8_t* A = static_cast<const uint8_t*>(Av);
  const uint8_t flip = a_signed ? 0x80 : 0;  // int8 + 128 as a byte: the sign bit flipped
  const int32_t oa = a_signed ? 128 : 0;
  auto prepare_rows = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      uint8_t* dst = au + m * kp;
      const uint32_t sa = copy_row(kernel, A + m * lda, flip, K, dst);
      std::memset(dst + K, 0, static_cast<size_t>(kp - K));
      const int32_t alpha = za[m] + oa;
      terms[m].alpha = alpha;
      terms[m].c1 = static_cast<int32_t>(static_cast<uint32_t>(K) * static_cast<uint32_t>(alpha) - sa);
    }
  };
  fill_beta(B, zb, beta);
  const int64_t row_blocks = (M + kRowBlock - 1) / kRowBlock;
  // Panels per task: a few panels so that tasks stay many when M is small.
  const int64_t panel_group = 4, groups = (B.panels + panel_group - 1) / panel_group;
  if (pool) {
    pool->parallel_for(row_blocks, 1, [&](int64_t b0, int64_t b1) { prepare_rows(b0 * kRowBlock, std::min(M, b1 * kRowBlock)); });
    pool->parallel_for(row_blocks * groups, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t rb = t / groups, g = t % groups;
        run_block(kernel, au, kp, terms, B, beta, rb * kRowBlock, std::min(M, (rb + 1) * kRowBlock), g * panel_group,
                  std::min(B.panels, (g + 1) * panel_group), Y, ldy);
      }
    });
  } else {
    prepare_rows(0, M);
    run_block(kernel, au, kp, terms, B, beta, 0, M, 0, B.panels, Y, ldy);
  }
}

}  // namespace nxrt::ops
