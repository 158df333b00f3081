// A 16 x 16 float transpose in AVX-512 registers, shared by the conv kernels that turn 16 pixels x 16
// channels around (strided_direct.cpp's channel-blocked input, stem_lanes.cpp's channels-last pooled rows).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace nxrt::ops {

// r[i] (row i: 16 values) -> r[j] = column j (16 values, one from each row).
__attribute__((target("avx512f"))) inline void transpose16x16_avx512(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  // Within each 128-bit lane L, u[4j + k] = column 4L + k of rows 4j .. 4j + 3.
  __m512 u[16];
  for (int j = 0; j < 4; ++j) {
    const __m512d a = _mm512_castps_pd(t[4 * j]), b = _mm512_castps_pd(t[4 * j + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * j + 2]), d = _mm512_castps_pd(t[4 * j + 3]);
    u[4 * j + 0] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * j + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * j + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * j + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
  for (int k = 0; k < 4; ++k) {
    const __m512 e0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88);
    const __m512 o0 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xDD);
    const __m512 e1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
    const __m512 o1 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xDD);
    r[k] = _mm512_shuffle_f32x4(e0, e1, 0x88);       // lane 0 of each: column k
    r[8 + k] = _mm512_shuffle_f32x4(e0, e1, 0xDD);   // lane 2: column 8 + k
    r[4 + k] = _mm512_shuffle_f32x4(o0, o1, 0x88);   // lane 1: column 4 + k
    r[12 + k] = _mm512_shuffle_f32x4(o0, o1, 0xDD);  // lane 3: column 12 + k
  }
}

}  // namespace nxrt::ops
#endif
