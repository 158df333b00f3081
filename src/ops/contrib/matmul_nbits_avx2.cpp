// qd8_f32_qb4w_gemm_2x16__avx2: up to 2 rows of int8 A against one 16-column panel (layout in
// contrib/matmul_nbits.h), AVX2's vpmaddubsw with 16-bit partial sums widened every 8 groups.
// qd8_f32_qb4w_gemm_4x16__avxvnni: the same tile with AVX-VNNI's vpdpbusd, which forms each 32-bit
// lane's 4-byte dot product and adds it to the lane in one instruction (one per row, group and half
// where vpmaddubsw and a 16-bit add were, and no widening), so up to 4 rows: the inner loop then
// holds 8 sums beside the group's weights (the float results wait in memory between blocks). The
// 16-bit partial sums never saturate (see below), so both tiles form the same 32-bit sums and write
// the same bits. Zen 5 (avx_vnni), prefill shapes M 512 x K 896 x N 4864 and K 4864 x N 896,
// DISABLED_MatMulNBitsBench, the two tiles in the same runs: 0.55-0.57 of the AVX2 tile's time at
// 1 and 2 threads (0.63-0.64 with 2 rows, as the AVX2 tile has).
#include <algorithm>

#include "ops/contrib/matmul_nbits_panel_kernels.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace nxrt::ops::contrib {

namespace {

// Block scales of the record's 16 columns as two vectors of 8.
template <bool kF16>
__attribute__((target("avx2,fma,f16c"))) inline void load_scales16(const uint8_t* s, __m256* s0, __m256* s1) {
  if constexpr (kF16) {
    *s0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s)));
    *s1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16)));
  } else {
    *s0 = _mm256_loadu_ps(reinterpret_cast<const float*>(s));
    *s1 = _mm256_loadu_ps(reinterpret_cast<const float*>(s) + 8);
  }
}

// acc += the 4-byte dot products of u (unsigned) and s (signed) in each 32-bit lane: AVX-VNNI's
// vpdpbusd, as an asm statement so that the one tile template serves both bodies (the intrinsic would
// need the avxvnni target on the AVX2 body too). Run only where cpu_has_avx_vnni().
__attribute__((target("avx2"))) inline void dpbusd_vex(__m256i& acc, __m256i u, __m256i s) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u), "x"(s));
}

// kVnni: the int32 sums by vpdpbusd (qd8_f32_qb4w_gemm_4x16__avxvnni), else vpmaddubsw.
template <int MR, bool kF16, bool kZpTable, bool kVnni>
__attribute__((target("avx2,fma,f16c"))) void gemm_avx2(const QuantPanels& W, const PanelTile& t) {
  const __m256i m0f = _mm256_set1_epi8(0x0f);
  const __m256i ones = _mm256_set1_epi16(1);
  // The geometry in locals: nothing in the loops may then be reloaded through the references.
  const int64_t block = W.block, gpb = block / 4, kb = W.kb, rb = W.record_bytes, lda = t.lda, lds = t.lds;
  const int64_t scale_offset = W.scale_offset, zp_offset = W.zp_offset;
  const float uniform_zp = W.uniform_zp;
  const uint8_t* panel = t.panel;
  const int8_t* a = t.a;
  const float* sa = t.sa;
  const float* sq = t.sq;
  const int64_t ahead = panel_prefetch_ahead(rb);
  __m256 f[MR][2];
  for (int r = 0; r < MR; ++r) f[r][0] = f[r][1] = _mm256_setzero_ps();
  for (int64_t b = 0; b < kb; ++b) {
    const uint8_t* rec = panel + b * rb;
    const int8_t* ab = a + b * block;
    if constexpr (MR == 1) {
      // Decode streams the weights once: fetch kPanelPrefetchBytes ahead (the hardware prefetcher stops
      // at 4 KB pages), NTA so the stream does not evict the L2/L3. Zen 5 capped at avx2, Qwen2.5-0.5B-shape
      // decode steps alternated in one process, both orders: two records ahead with T0 (the earlier
      // loop) 20.8 / 20.3 ms, 4 KB NTA 17.9 / 18.2 ms; 4 KB T0 and 2 KB NTA in between (8 KB since: see
      // kPanelPrefetchBytes).
      for (int64_t off = 0; off < rb; off += 64) _mm_prefetch(reinterpret_cast<const char*>(rec + ahead + off), _MM_HINT_NTA);
      prefetch_pages_ahead(rec, rb);
    }
    __m256i acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    // Two loops over the groups, not one body switching per group: merged (a run of gpb groups for
    // vpdpbusd, of 8 for vpmaddubsw), the 4-row AVX-VNNI tile took 2.3x the time in the prefill-shape
    // DISABLED_MatMulNBitsBench on Zen 5 (36 against 16 ms), its sums no longer held in registers.
    if constexpr (kVnni) {
      for (int64_t g = 0; g < gpb; ++g) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + g * 32));
        const __m256i w0 = _mm256_and_si256(v, m0f);
        const __m256i w1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
        for (int r = 0; r < MR; ++r) {
          int32_t a4;
          std::memcpy(&a4, ab + r * lda + g * 4, 4);
          const __m256i av = _mm256_set1_epi32(a4);
          dpbusd_vex(acc[r][0], w0, av);
          dpbusd_vex(acc[r][1], w1, av);
        }
      }
    }
    // |a| <= 127 and codes <= 15: a 16-bit lane gains at most 2*15*127 per group, so 8 groups fit.
    for (int64_t g0 = 0; !kVnni && g0 < gpb; g0 += 8) {
      const int64_t g1 = std::min<int64_t>(gpb, g0 + 8);
      __m256i s16[MR][2];
      for (int r = 0; r < MR; ++r) s16[r][0] = s16[r][1] = _mm256_setzero_si256();
      for (int64_t g = g0; g < g1; ++g) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + g * 32));
        const __m256i w0 = _mm256_and_si256(v, m0f);
        const __m256i w1 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m0f);
        for (int r = 0; r < MR; ++r) {
          int32_t a4;
          std::memcpy(&a4, ab + r * lda + g * 4, 4);
          const __m256i av = _mm256_set1_epi32(a4);
          s16[r][0] = _mm256_add_epi16(s16[r][0], _mm256_maddubs_epi16(w0, av));
          s16[r][1] = _mm256_add_epi16(s16[r][1], _mm256_maddubs_epi16(w1, av));
        }
      }
      for (int r = 0; r < MR; ++r) {
        acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(s16[r][0], ones));
        acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(s16[r][1], ones));
      }
    }
    __m256 s0, s1;
    load_scales16<kF16>(rec + scale_offset, &s0, &s1);
    if constexpr (!kZpTable) {
      // sum_k s (q - zp) a = s * (dot * sa - zp * sq): no zero-point table to stream.
      for (int r = 0; r < MR; ++r) {
        const __m256 sar = _mm256_set1_ps(sa[r * lds + b]), zq = _mm256_set1_ps(uniform_zp * sq[r * lds + b]);
        f[r][0] = _mm256_fmadd_ps(s0, _mm256_fmsub_ps(_mm256_cvtepi32_ps(acc[r][0]), sar, zq), f[r][0]);
        f[r][1] = _mm256_fmadd_ps(s1, _mm256_fmsub_ps(_mm256_cvtepi32_ps(acc[r][1]), sar, zq), f[r][1]);
      }
    } else {
      // zp * s is exact in float for fp16 scales and the same rounding as a packed zp * s for fp32 ones.
      const uint8_t* zp = rec + zp_offset;
      const __m256 z0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zp)))), s0);
      const __m256 z1 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(zp + 8)))), s1);
      for (int r = 0; r < MR; ++r) {
        const __m256 sar = _mm256_set1_ps(sa[r * lds + b]), sqr = _mm256_set1_ps(sq[r * lds + b]);
        f[r][0] = _mm256_fnmadd_ps(z0, sqr, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][0]), _mm256_mul_ps(s0, sar), f[r][0]));
        f[r][1] = _mm256_fnmadd_ps(z1, sqr, _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][1]), _mm256_mul_ps(s1, sar), f[r][1]));
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* y = t.y + r * t.ldy;
    if (t.ncols == 16) {
      _mm256_storeu_ps(y, f[r][0]);
      _mm256_storeu_ps(y + 8, f[r][1]);
    } else {
      alignas(32) float tmp[16];
      _mm256_store_ps(tmp, f[r][0]);
      _mm256_store_ps(tmp + 8, f[r][1]);
      std::memcpy(y, tmp, static_cast<size_t>(t.ncols) * sizeof(float));
    }
  }
}

template <int MR, bool kVnni>
void gemm_avx2_for(const QuantPanels& W, const PanelTile& t) {
  with_record_format(W, [&](auto fp16, auto zp_table) {
    gemm_avx2<MR, decltype(fp16)::value, decltype(zp_table)::value, kVnni>(W, t);
  });
}

}  // namespace

void qd8_f32_qb4w_gemm_2x16__avx2(const QuantPanels& W, const PanelTile& t) {
  if (t.rows >= 2) gemm_avx2_for<2, false>(W, t);
  else gemm_avx2_for<1, false>(W, t);
}

void qd8_f32_qb4w_gemm_4x16__avxvnni(const QuantPanels& W, const PanelTile& t) {
  if (t.rows >= 4) gemm_avx2_for<4, true>(W, t);
  else if (t.rows == 3) gemm_avx2_for<3, true>(W, t);
  else if (t.rows == 2) gemm_avx2_for<2, true>(W, t);
  else gemm_avx2_for<1, true>(W, t);
}

}  // namespace nxrt::ops::contrib

#else

namespace nxrt::ops::contrib {
void qd8_f32_qb4w_gemm_2x16__avx2(const QuantPanels& W, const PanelTile& t) { qd8_f32_qb4w_gemm_1x16__scalar(W, t); }
void qd8_f32_qb4w_gemm_4x16__avxvnni(const QuantPanels& W, const PanelTile& t) { qd8_f32_qb4w_gemm_1x16__scalar(W, t); }
}  // namespace nxrt::ops::contrib

#endif
