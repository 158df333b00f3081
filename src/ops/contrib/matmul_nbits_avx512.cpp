// qd8_f32_qb4w_gemm_4x32__avx512vnni: up to 4 rows of int8 A against one 32-column panel (layout in
// contrib/matmul_nbits.h). One 64-byte group load is 32 columns x 4 k of nibbles: and / shift+and give
// two vectors of 16 columns, and vpdpbusd (unsigned codes x signed A) adds each lane's 4 products.
// This is the decode GEMV (M = 1, bound by reading the weights) and the prefill tile when AMX is not
// there.
#include "ops/contrib/matmul_nbits_panel_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>

namespace nxrt::ops::contrib {

namespace {

#define NXRT_AVX512VNNI_TARGET "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c"

template <bool kF16>
__attribute__((target(NXRT_AVX512VNNI_TARGET))) inline void load_scales32(const uint8_t* s, __m512* s0, __m512* s1) {
  if constexpr (kF16) {
    *s0 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
    *s1 = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32)));
  } else {
    *s0 = _mm512_loadu_ps(s);
    *s1 = _mm512_loadu_ps(s + 64);
  }
}

__attribute__((target(NXRT_AVX512VNNI_TARGET))) inline __m512i bcast_quad(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// acc += the 4-byte dot products of u (unsigned) and s (signed) in each 32-bit lane: vpdpbusd written
// in place. With _mm512_dpbusd_epi32 in the prefill tile's row loop GCC 12 copied every accumulator to
// a fresh register and back around each vpdpbusd (16 vmovdqa beside the 4-row tile's 8 dot products
// per group), and those copies set the tile's pace: 512 x 896 x 4864 on one Zen 5 core 1.29-1.47x
// faster this way (the two alternated in one process). The decode loop (one row) keeps the intrinsic:
// there the in-place form measured slower with the panel in cache (GCC still routes two of its four
// accumulators through a scratch register) and the same streaming from memory.
__attribute__((target(NXRT_AVX512VNNI_TARGET))) inline void dpbusd_inplace(__m512i& acc, __m512i u, __m512i s) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
}

template <int MR, bool kF16, bool kZpTable>
__attribute__((target(NXRT_AVX512VNNI_TARGET))) void gemm_vnni(const QuantPanels& W, const PanelTile& t) {
  const __m512i m0f = _mm512_set1_epi8(0x0f);
  const int64_t gpb = W.block / 4, rb = W.record_bytes;
  const int64_t ahead = panel_prefetch_ahead(rb, MR == 1 ? kPanelPrefetchBytesAvx512Decode : kPanelPrefetchBytes);
  __m512 f[MR][2];
  for (int r = 0; r < MR; ++r) f[r][0] = f[r][1] = _mm512_setzero_ps();
  for (int64_t b = 0; b < W.kb; ++b) {
    const uint8_t* rec = t.panel + b * rb;
    const int8_t* ab = t.a + b * W.block;
    // Past the panel's end this reads into the next panel (the next task's, or nothing: a prefetch
    // never faults).
    if constexpr (MR == 1) {
      // Decode reads each record once: NTA keeps the stream from evicting the L2 and L3 (the KV cache,
      // the activations) and spares the victim writes into L3 that a T0 stream makes.
      for (int64_t off = 0; off < rb; off += 64) _mm_prefetch(reinterpret_cast<const char*>(rec + ahead + off), _MM_HINT_NTA);
      prefetch_pages_ahead(rec, rb);
    } else {
      // Prefill reads a panel again for each pass over A's rows: keep it in L2.
      if (t.prefetch_panel)
        for (int64_t off = 0; off < rb; off += 64) _mm_prefetch(reinterpret_cast<const char*>(rec + ahead + off), _MM_HINT_T0);
    }
    __m512i acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_si512();
    if constexpr (MR == 1) {
      // One A row: four groups (four 64-byte lines) a step into eight accumulators, so vpdpbusd's
      // latency does not serialize the block (gpb = block / 4 is a multiple of 4: blocks are powers of
      // 2 >= 16, pack_quant_panels). Int32 sums: the same bits in any order. Four accumulators (two
      // groups a step) before: the cache-resident GEMV 54-58 -> 66-70 GB/s of weights on one Zen 5
      // core, and the Qwen2.5-0.5B-shape decode step (prompt 512, steps alternating in one process, 10
      // processes each) +1.6% at 2 threads (7 of 10 faster) and +0.55% at 1 (8 of 10).
      __m512i e0 = _mm512_setzero_si512(), e1 = _mm512_setzero_si512();
      __m512i c0 = _mm512_setzero_si512(), c1 = _mm512_setzero_si512();
      __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();
      for (int64_t g = 0; g < gpb; g += 4) {
        const __m512i v = _mm512_loadu_si512(rec + g * 64);
        const __m512i u = _mm512_loadu_si512(rec + g * 64 + 64);
        const __m512i w = _mm512_loadu_si512(rec + g * 64 + 128);
        const __m512i x = _mm512_loadu_si512(rec + g * 64 + 192);
        const __m512i av = bcast_quad(ab + g * 4), bv = bcast_quad(ab + g * 4 + 4);
        const __m512i cv = bcast_quad(ab + g * 4 + 8), dv = bcast_quad(ab + g * 4 + 12);
        acc[0][0] = _mm512_dpbusd_epi32(acc[0][0], _mm512_and_si512(v, m0f), av);
        acc[0][1] = _mm512_dpbusd_epi32(acc[0][1], _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f), av);
        e0 = _mm512_dpbusd_epi32(e0, _mm512_and_si512(u, m0f), bv);
        e1 = _mm512_dpbusd_epi32(e1, _mm512_and_si512(_mm512_srli_epi16(u, 4), m0f), bv);
        c0 = _mm512_dpbusd_epi32(c0, _mm512_and_si512(w, m0f), cv);
        c1 = _mm512_dpbusd_epi32(c1, _mm512_and_si512(_mm512_srli_epi16(w, 4), m0f), cv);
        d0 = _mm512_dpbusd_epi32(d0, _mm512_and_si512(x, m0f), dv);
        d1 = _mm512_dpbusd_epi32(d1, _mm512_and_si512(_mm512_srli_epi16(x, 4), m0f), dv);
      }
      acc[0][0] = _mm512_add_epi32(acc[0][0], _mm512_add_epi32(e0, _mm512_add_epi32(c0, d0)));
      acc[0][1] = _mm512_add_epi32(acc[0][1], _mm512_add_epi32(e1, _mm512_add_epi32(c1, d1)));
    } else {
      for (int64_t g = 0; g < gpb; ++g) {
        const __m512i v = _mm512_loadu_si512(rec + g * 64);
        const __m512i w0 = _mm512_and_si512(v, m0f);
        const __m512i w1 = _mm512_and_si512(_mm512_srli_epi16(v, 4), m0f);
        for (int r = 0; r < MR; ++r) {
          const __m512i av = bcast_quad(ab + r * t.lda + g * 4);
          dpbusd_inplace(acc[r][0], w0, av);
          dpbusd_inplace(acc[r][1], w1, av);
        }
      }
    }
    __m512 s0, s1;
    load_scales32<kF16>(rec + W.scale_offset, &s0, &s1);
    if constexpr (!kZpTable) {
      // sum_k s (q - zp) a = s * (dot * sa - zp * sq): no zero-point table to stream.
      for (int r = 0; r < MR; ++r) {
        const __m512 sar = _mm512_set1_ps(t.sa[r * t.lds + b]), zq = _mm512_set1_ps(W.uniform_zp * t.sq[r * t.lds + b]);
        f[r][0] = _mm512_fmadd_ps(s0, _mm512_fmsub_ps(_mm512_cvtepi32_ps(acc[r][0]), sar, zq), f[r][0]);
        f[r][1] = _mm512_fmadd_ps(s1, _mm512_fmsub_ps(_mm512_cvtepi32_ps(acc[r][1]), sar, zq), f[r][1]);
      }
    } else {
      const uint8_t* zp = rec + W.zp_offset;
      const __m512 z0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zp)))), s0);
      const __m512 z1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(zp + 16)))), s1);
      for (int r = 0; r < MR; ++r) {
        const __m512 sar = _mm512_set1_ps(t.sa[r * t.lds + b]), sqr = _mm512_set1_ps(t.sq[r * t.lds + b]);
        f[r][0] = _mm512_fnmadd_ps(z0, sqr, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][0]), _mm512_mul_ps(s0, sar), f[r][0]));
        f[r][1] = _mm512_fnmadd_ps(z1, sqr, _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][1]), _mm512_mul_ps(s1, sar), f[r][1]));
      }
    }
  }
  const __mmask16 k0 = t.ncols >= 16 ? __mmask16(0xffff) : __mmask16((1u << t.ncols) - 1);
  const __mmask16 k1 = t.ncols >= 32 ? __mmask16(0xffff) : t.ncols > 16 ? __mmask16((1u << (t.ncols - 16)) - 1) : __mmask16(0);
  for (int r = 0; r < MR; ++r) {
    _mm512_mask_storeu_ps(t.y + r * t.ldy, k0, f[r][0]);
    _mm512_mask_storeu_ps(t.y + r * t.ldy + 16, k1, f[r][1]);
  }
}

template <int MR>
void gemm_vnni_for(const QuantPanels& W, const PanelTile& t) {
  with_record_format(W, [&](auto fp16, auto zp_table) { gemm_vnni<MR, decltype(fp16)::value, decltype(zp_table)::value>(W, t); });
}

}  // namespace

void qd8_f32_qb4w_gemm_4x32__avx512vnni(const QuantPanels& W, const PanelTile& t) {
  switch (t.rows) {
    case 1: gemm_vnni_for<1>(W, t); break;
    case 2: gemm_vnni_for<2>(W, t); break;
    case 3: gemm_vnni_for<3>(W, t); break;
    default: gemm_vnni_for<4>(W, t); break;
  }
}

}  // namespace nxrt::ops::contrib

#else

namespace nxrt::ops::contrib {
void qd8_f32_qb4w_gemm_4x32__avx512vnni(const QuantPanels& W, const PanelTile& t) { qd8_f32_qb4w_gemm_1x16__scalar(W, t); }
}  // namespace nxrt::ops::contrib

#endif
