// qd8_f32_qb4w_gemm_32x32__amx: MatMulNBits prefill on AMX-INT8 tiles (Sapphire Rapids and later).
//
// A task takes whole 32-column panels (layout in contrib/matmul_nbits.h). Each panel is first unpacked
// once into AMX's B layout: per block two 16-column tiles whose 64-byte rows hold 16 columns x 4
// consecutive k as unsigned bytes (the raw codes). The panel's group bytes already are those rows
// (low nibbles: columns 0-15, high nibbles: 16-31), so the unpack is and / shift+and, no shuffle.
// Then for every 32 rows of A: per block, 2 A tiles x 2 B tiles -> 4 int32 C tiles (tdpbsud: signed A
// x unsigned codes, K = min(block, 64) per instruction), stored and folded into float accumulators.
//
// Batch invariance: fewer than kAmxMinRows rows go to the AVX512-VNNI tile, so a row's output must not
// depend on which of the two computed it. Both produce the same exact int32 block dot (codes x int8 A)
// and fold it into the float accumulator with the same operations in the same order, block by block:
//   uniform zero point: y = fma(s, fmsub(float(dot), sa, zp * sq), y)
//   zero-point table:   y = fnmadd(zp * s, sq, fma(float(dot), s * sa, y))
// (s: the column's block scale, sa / sq: the row's block scale and scale * sum of its int8 values).
// The 32 x 32 floats stay in L1 between blocks.
//
// The tile instructions go through a Tiles policy: HardwareTiles (the AMX instructions) or
// EmulatedTiles (the same operations in scalar code, as the ISA reference defines them), which gives
// qd8_f32_qb4w_gemm_32x32__amx_emulated: everything else of this kernel (unpacking, tile addressing,
// folding, the group and row loops) runs as on AMX, so a machine without AMX (any AVX-512 one) still
// tests it against the reference and the VNNI tile's bits. Only tests use the emulated variant.
#include "ops/contrib/matmul_nbits_panel_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>

namespace nxrt::ops::contrib {

namespace {

#define NXRT_AMX_TARGET "amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx2,fma,f16c"

// The LDTILECFG memory operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette_id = 0;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles: 0-3 C (rows 0-15 / 16-31 x columns 0-15 / 16-31), 4-5 A (rows 0-15 / 16-31), 6-7 B.
TileConfig tile_config(int64_t kstep) {
  TileConfig c;
  c.palette_id = 1;
  for (int i = 0; i < 4; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = 64;
  }
  for (int i = 4; i < 6; ++i) {
    c.rows[i] = 16;
    c.colsb[i] = static_cast<uint16_t>(kstep);
  }
  for (int i = 6; i < 8; ++i) {
    c.rows[i] = static_cast<uint8_t>(kstep / 4);
    c.colsb[i] = 64;
  }
  return c;
}

// The tile operations this kernel uses, on the AMX unit. Tile numbers are template arguments because
// the instructions take them as immediates (GCC's macros paste the number into the register name, so
// each tile this kernel uses is spelled out).
struct HardwareTiles {
  __attribute__((target(NXRT_AMX_TARGET), always_inline)) inline void configure(int64_t kstep) {
    const TileConfig c = tile_config(kstep);
    _tile_loadconfig(&c);
  }
  __attribute__((target(NXRT_AMX_TARGET), always_inline)) inline void release() { _tile_release(); }
  template <int T>
  __attribute__((target(NXRT_AMX_TARGET), always_inline)) inline void zero() {
    static_assert(T >= 0 && T < 4, "C tiles are 0-3");
    if constexpr (T == 0) _tile_zero(0);
    else if constexpr (T == 1) _tile_zero(1);
    else if constexpr (T == 2) _tile_zero(2);
    else _tile_zero(3);
  }
  template <int T>
  __attribute__((target(NXRT_AMX_TARGET), always_inline)) inline void load(const void* base, int64_t stride) {
    static_assert(T >= 4 && T < 8, "A and B tiles are 4-7");
    if constexpr (T == 4) _tile_loadd(4, base, stride);
    else if constexpr (T == 5) _tile_loadd(5, base, stride);
    else if constexpr (T == 6) _tile_loadd(6, base, stride);
    else _tile_loadd(7, base, stride);
  }
  template <int T>
  __attribute__((target(NXRT_AMX_TARGET), always_inline)) inline void store(void* base, int64_t stride) {
    static_assert(T >= 0 && T < 4, "C tiles are 0-3");
    if constexpr (T == 0) _tile_stored(0, base, stride);
    else if constexpr (T == 1) _tile_stored(1, base, stride);
    else if constexpr (T == 2) _tile_stored(2, base, stride);
    else _tile_stored(3, base, stride);
  }
  // C += A (signed bytes) . B (unsigned bytes), TDPBSUD: C tile c takes A tile 4 + c / 2 and B tile 6 + c % 2.
  template <int C, int A, int B>
  __attribute__((target(NXRT_AMX_TARGET), always_inline)) inline void dot_signed_unsigned() {
    static_assert(C >= 0 && C < 4 && A == 4 + C / 2 && B == 6 + C % 2, "the tiles block_dots pairs");
    if constexpr (C == 0) _tile_dpbsud(0, 4, 6);
    else if constexpr (C == 1) _tile_dpbsud(1, 4, 7);
    else if constexpr (C == 2) _tile_dpbsud(2, 5, 6);
    else _tile_dpbsud(3, 5, 7);
  }
};

// The same operations in scalar code, on eight 1 KB tiles in memory, as the ISA reference defines them
// for palette 1: a tile has rows[t] rows of colsb[t] bytes; a load or store moves those rows, `stride`
// bytes apart; TDPBSUD adds to each int32 C[m][n] the products of A's row m, 4 signed bytes per k, with
// B's row k, 4 unsigned bytes at column n, for k < colsb[A] / 4 (int32 arithmetic, wrapping); tile
// shapes that do not fit each other poison C instead of faulting.
struct EmulatedTiles {
  alignas(64) uint8_t tiles[8][16 * 64] = {};
  TileConfig cfg;
  void configure(int64_t kstep) { cfg = tile_config(kstep); }
  void release() {}
  template <int T>
  void zero() { std::memset(tiles[T], 0, sizeof(tiles[T])); }
  template <int T>
  void load(const void* base, int64_t stride) {
    for (int r = 0; r < cfg.rows[T]; ++r)
      std::memcpy(tiles[T] + r * 64, static_cast<const uint8_t*>(base) + r * stride, cfg.colsb[T]);
  }
  template <int T>
  void store(void* base, int64_t stride) {
    for (int r = 0; r < cfg.rows[T]; ++r) std::memcpy(static_cast<uint8_t*>(base) + r * stride, tiles[T] + r * 64, cfg.colsb[T]);
  }
  template <int C, int A, int B>
  void dot_signed_unsigned() {
    const int M = cfg.rows[C], N = cfg.colsb[C] / 4, K = cfg.colsb[A] / 4;
    // Shapes the instruction refuses (#UD on hardware): C poisoned, so any test comparing it fails.
    if (cfg.rows[A] != M || cfg.rows[B] != K || cfg.colsb[B] != cfg.colsb[C]) {
      std::memset(tiles[C], 0x7f, sizeof(tiles[C]));
      return;
    }
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        int32_t c;
        std::memcpy(&c, tiles[C] + m * 64 + n * 4, 4);
        uint32_t acc = static_cast<uint32_t>(c);
        for (int k = 0; k < K; ++k)
          for (int i = 0; i < 4; ++i) {
            const int32_t a = static_cast<int8_t>(tiles[A][m * 64 + k * 4 + i]);
            const int32_t b = tiles[B][k * 64 + n * 4 + i];
            acc += static_cast<uint32_t>(a * b);
          }
        c = static_cast<int32_t>(acc);
        std::memcpy(tiles[C] + m * 64 + n * 4, &c, 4);
      }
  }
};

// One panel's codes as unsigned tile rows: block b, column half h, group g at ((b * 2 + h) * gpb + g) * 64;
// its scales as float [kb][32]; with a zero-point table also zp * scale as float [kb][32] (zs), computed
// as the VNNI tile does.
__attribute__((target(NXRT_AMX_TARGET))) void unpack_panel(const QuantPanels& W, const uint8_t* panel, uint8_t* codes,
                                                           float* scales, float* zs) {
  const __m512i m0f = _mm512_set1_epi8(0x0f);
  const int64_t gpb = W.block / 4;
  for (int64_t b = 0; b < W.kb; ++b) {
    const uint8_t* rec = panel + b * W.record_bytes;
    uint8_t* lo = codes + (b * 2) * gpb * 64;
    uint8_t* hi = lo + gpb * 64;
    for (int64_t g = 0; g < gpb; ++g) {
      const __m512i v = _mm512_loadu_si512(rec + g * 64);
      _mm512_storeu_si512(lo + g * 64, _mm512_and_si512(v, m0f));
      _mm512_storeu_si512(hi + g * 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f));
    }
    const uint8_t* s = rec + W.scale_offset;
    __m512 s0, s1;
    if (W.fp16_scales) {
      s0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
      s1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32)));
    } else {
      s0 = _mm512_loadu_ps(s);
      s1 = _mm512_loadu_ps(s + 64);
    }
    _mm512_storeu_ps(scales + b * 32, s0);
    _mm512_storeu_ps(scales + b * 32 + 16, s1);
    if (W.zp_table) {
      const uint8_t* zp = rec + W.zp_offset;
      const __m512 z0 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zp))));
      const __m512 z1 = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zp + 16))));
      _mm512_storeu_ps(zs + b * 32, _mm512_mul_ps(z0, s0));
      _mm512_storeu_ps(zs + b * 32 + 16, _mm512_mul_ps(z1, s1));
    }
  }
}

// Block b's int32 dots of up to 32 rows x 32 columns into c (row r at c + r * 32).
template <typename Tiles>
__attribute__((target(NXRT_AMX_TARGET))) inline void block_dots(Tiles& tiles, const QuantPanels& W, const uint8_t* codes,
                                                                const int8_t* a, int64_t lda, int64_t b, bool two,
                                                                int64_t kstep, int32_t* c) {
  const int64_t gpb = W.block / 4, steps = W.block / kstep, srows = kstep / 4;
  tiles.template zero<0>();
  tiles.template zero<1>();
  if (two) {
    tiles.template zero<2>();
    tiles.template zero<3>();
  }
  for (int64_t s = 0; s < steps; ++s) {
    const int8_t* a0 = a + b * W.block + s * kstep;
    const uint8_t* b0 = codes + ((b * 2) * gpb + s * srows) * 64;
    tiles.template load<4>(a0, lda);
    tiles.template load<6>(b0, 64);
    tiles.template load<7>(b0 + gpb * 64, 64);
    tiles.template dot_signed_unsigned<0, 4, 6>();
    tiles.template dot_signed_unsigned<1, 4, 7>();
    if (two) {
      tiles.template load<5>(a0 + 16 * lda, lda);
      tiles.template dot_signed_unsigned<2, 5, 6>();
      tiles.template dot_signed_unsigned<3, 5, 7>();
    }
  }
  tiles.template store<0>(c, 128);
  tiles.template store<1>(c + 16, 128);
  if (two) {
    tiles.template store<2>(c + 16 * 32, 128);
    tiles.template store<3>(c + 16 * 32 + 16, 128);
  }
}

// Folds row r's dots of block b (cr: 32 int32) into its accumulators: the VNNI tile's operations, in
// its order (see the top of this file).
template <bool kZpTable>
__attribute__((target(NXRT_AMX_TARGET))) inline void fold_block(const float* scales, const float* zs,
                                                                const float* sat, const float* zqt, int64_t b,
                                                                int64_t r, const int32_t* cr, __m512* f0, __m512* f1) {
  const __m512 s0 = _mm512_load_ps(scales + b * 32), s1 = _mm512_load_ps(scales + b * 32 + 16);
  const __m512 d0 = _mm512_cvtepi32_ps(_mm512_load_si512(cr)), d1 = _mm512_cvtepi32_ps(_mm512_load_si512(cr + 16));
  const __m512 sar = _mm512_set1_ps(sat[b * 32 + r]);
  if constexpr (!kZpTable) {
    const __m512 zq = _mm512_set1_ps(zqt[b * 32 + r]);
    *f0 = _mm512_fmadd_ps(s0, _mm512_fmsub_ps(d0, sar, zq), *f0);
    *f1 = _mm512_fmadd_ps(s1, _mm512_fmsub_ps(d1, sar, zq), *f1);
  } else {
    const __m512 sqr = _mm512_set1_ps(zqt[b * 32 + r]);
    const __m512 z0 = _mm512_load_ps(zs + b * 32), z1 = _mm512_load_ps(zs + b * 32 + 16);
    *f0 = _mm512_fnmadd_ps(z0, sqr, _mm512_fmadd_ps(d0, _mm512_mul_ps(s0, sar), *f0));
    *f1 = _mm512_fnmadd_ps(z1, sqr, _mm512_fmadd_ps(d1, _mm512_mul_ps(s1, sar), *f1));
  }
}

// Rows [m0, m0 + rows) (rows <= 32; A holds 32 readable rows from m0) against one unpacked panel.
// kFull: rows == 32, the loops over rows have a fixed count. kZpTable: W.zp_table (zs holds zp * scale).
// sat / zqt: the rows' block terms as [kb][32] (see amx_row_terms), read contiguously. Blocks go in
// pairs: both blocks' dots are stored, then each row's accumulators take block b and then b + 1 in
// registers (the same operations in the same order as one block at a time, with half the float
// accumulator loads and stores).
template <bool kFull, bool kZpTable, typename Tiles>
__attribute__((target(NXRT_AMX_TARGET))) void panel_rows(Tiles& tiles, const QuantPanels& W, const uint8_t* codes,
                                                         const float* scales, const float* zs, const int8_t* a,
                                                         int64_t lda, const float* sat, const float* zqt,
                                                         int64_t rows_in, float* y, int64_t ldy, int64_t ncols,
                                                         int64_t kstep) {
  const int64_t rows = kFull ? 32 : rows_in;
  alignas(64) int32_t c[2][32 * 32];
  alignas(64) float f[32 * 32];
  std::memset(f, 0, static_cast<size_t>(rows) * 32 * sizeof(float));
  const bool two = rows > 16;  // the second 16-row A tile holds real rows
  int64_t b = 0;
  for (; b + 2 <= W.kb; b += 2) {
    block_dots(tiles, W, codes, a, lda, b, two, kstep, c[0]);
    block_dots(tiles, W, codes, a, lda, b + 1, two, kstep, c[1]);
    for (int64_t r = 0; r < rows; ++r) {
      float* fr = f + r * 32;
      __m512 f0 = _mm512_load_ps(fr), f1 = _mm512_load_ps(fr + 16);
      fold_block<kZpTable>(scales, zs, sat, zqt, b, r, c[0] + r * 32, &f0, &f1);
      fold_block<kZpTable>(scales, zs, sat, zqt, b + 1, r, c[1] + r * 32, &f0, &f1);
      _mm512_store_ps(fr, f0);
      _mm512_store_ps(fr + 16, f1);
    }
  }
  if (b < W.kb) {
    block_dots(tiles, W, codes, a, lda, b, two, kstep, c[0]);
    for (int64_t r = 0; r < rows; ++r) {
      float* fr = f + r * 32;
      __m512 f0 = _mm512_load_ps(fr), f1 = _mm512_load_ps(fr + 16);
      fold_block<kZpTable>(scales, zs, sat, zqt, b, r, c[0] + r * 32, &f0, &f1);
      _mm512_store_ps(fr, f0);
      _mm512_store_ps(fr + 16, f1);
    }
  }
  for (int64_t r = 0; r < rows; ++r) std::memcpy(y + r * ldy, f + r * 32, static_cast<size_t>(ncols) * sizeof(float));
}

// qd8_f32_qb4w_gemm_32x32__amx on the tiles of `tiles`.
template <typename Tiles>
__attribute__((target(NXRT_AMX_TARGET))) void gemm_32x32(Tiles& tiles, const QuantPanels& W, const int8_t* a, int64_t lda,
                                                         const float* terms, int64_t M, int64_t p0, int64_t p1, float* Y,
                                                         int64_t ldy, int64_t group_max, uint8_t* scratch,
                                                         int64_t y_col0) {
  // Panels are unpacked a group at a time (the group's tiles stay in L2, about 512 KB), then each
  // 32-row block of A (kpad * 32 bytes, in L1 for the model sizes that matter) meets every panel of
  // the group before the next rows are read.
  const int64_t panel_code_bytes = W.kpad * 32, panel_scales = W.kb * 32;
  // The scratch (amx_unpack_scratch_bytes(W, group_max)) holds group_max panels: codes, scales, zero terms.
  const int64_t group = std::clamp<int64_t>(group_max, 1, std::max<int64_t>(1, p1 - p0));
  auto up = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t code_bytes = up(static_cast<size_t>(group_max * panel_code_bytes));
  const size_t scale_bytes = up(static_cast<size_t>(group_max * panel_scales) * sizeof(float));
  uint8_t* codes = scratch;
  float* scales = reinterpret_cast<float*>(scratch + code_bytes);
  float* zs = W.zp_table ? reinterpret_cast<float*>(scratch + code_bytes + scale_bytes) : nullptr;
  const int64_t kstep = std::min<int64_t>(W.block, 64);
  tiles.configure(kstep);
  for (int64_t g0 = p0; g0 < p1; g0 += group) {
    const int64_t g1 = std::min(p1, g0 + group);
    for (int64_t p = g0; p < g1; ++p)
      unpack_panel(W, W.panel(p), codes + (p - g0) * panel_code_bytes, scales + (p - g0) * panel_scales,
                   zs ? zs + (p - g0) * panel_scales : nullptr);
    for (int64_t m0 = 0; m0 < M; m0 += 32) {
      const int64_t rows = std::min<int64_t>(32, M - m0);
      const float* sat = terms + (m0 / 32) * 2 * panel_scales;
      const float* zqt = sat + panel_scales;
      for (int64_t p = g0; p < g1; ++p) {
        // Y holds columns [y_col0, y_col0 + ldy) of the product.
        const int64_t ncols = std::min<int64_t>(32, std::min(W.N, y_col0 + ldy) - p * 32);
        auto rows_fn = W.zp_table ? (rows == 32 ? panel_rows<true, true, Tiles> : panel_rows<false, true, Tiles>)
                                  : (rows == 32 ? panel_rows<true, false, Tiles> : panel_rows<false, false, Tiles>);
        rows_fn(tiles, W, codes + (p - g0) * panel_code_bytes, scales + (p - g0) * panel_scales,
                zs ? zs + (p - g0) * panel_scales : nullptr, a + m0 * lda, lda, sat, zqt, rows, Y + m0 * ldy + (p * 32 - y_col0), ldy, ncols, kstep);
      }
    }
  }
  tiles.release();
}

}  // namespace

__attribute__((target(NXRT_AMX_TARGET))) void qd8_f32_qb4w_gemm_32x32__amx(const QuantPanels& W, const int8_t* a,
                                                                           int64_t lda, const float* terms, int64_t M,
                                                                           int64_t p0, int64_t p1, float* Y,
                                                                           int64_t ldy, int64_t group_max,
                                                                           uint8_t* scratch, int64_t y_col0) {
  HardwareTiles tiles;
  gemm_32x32(tiles, W, a, lda, terms, M, p0, p1, Y, ldy, group_max, scratch, y_col0);
}

void qd8_f32_qb4w_gemm_32x32__amx_emulated(const QuantPanels& W, const int8_t* a, int64_t lda, const float* terms,
                                           int64_t M, int64_t p0, int64_t p1, float* Y, int64_t ldy, int64_t group_max,
                                           uint8_t* scratch, int64_t y_col0) {
  EmulatedTiles tiles;
  gemm_32x32(tiles, W, a, lda, terms, M, p0, p1, Y, ldy, group_max, scratch, y_col0);
}

}  // namespace nxrt::ops::contrib

#else

namespace nxrt::ops::contrib {
// Off x86-64 there are no tiles: panel_kernel_supported(kAmx / kAmxEmulated) is false, so nothing calls these.
void qd8_f32_qb4w_gemm_32x32__amx(const QuantPanels& W, const int8_t* a, int64_t lda, const float* terms, int64_t M,
                                  int64_t p0, int64_t p1, float* Y, int64_t ldy, int64_t group, uint8_t* scratch,
                                  int64_t y_col0) {
  (void)W, (void)a, (void)lda, (void)terms, (void)M, (void)p0, (void)p1, (void)Y, (void)ldy, (void)group, (void)scratch, (void)y_col0;
}
void qd8_f32_qb4w_gemm_32x32__amx_emulated(const QuantPanels& W, const int8_t* a, int64_t lda, const float* terms,
                                           int64_t M, int64_t p0, int64_t p1, float* Y, int64_t ldy, int64_t group,
                                           uint8_t* scratch, int64_t y_col0) {
  (void)W, (void)a, (void)lda, (void)terms, (void)M, (void)p0, (void)p1, (void)Y, (void)ldy, (void)group, (void)scratch, (void)y_col0;
}
}  // namespace nxrt::ops::contrib

#endif
