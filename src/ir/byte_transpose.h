// Byte matrix transposes: the 16 x 16 block in SSE2 registers (four rounds of interleaving row i with
// row i + 8), and a whole matrix by such blocks with byte-by-byte edges. The 8-bit conv path's
// channels-last copies (ops/conv/conv_ops.cpp) and strided copies of 8-bit views (Tensor copies of a
// channels-last value seen as NCHW, or the reverse) use them.
#pragma once
#include <cstdint>
#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

namespace nxrt::ir {

#if defined(__x86_64__) || defined(__i386__)
// dst row j (16 bytes, dst_stride apart) = byte j of each of 16 source rows (src_stride apart), each
// byte XOR `flip`.
inline void transpose_bytes_16x16(const uint8_t* src, int64_t src_stride, uint8_t flip, uint8_t* dst, int64_t dst_stride) {
  const __m128i f = _mm_set1_epi8(static_cast<char>(flip));
  __m128i a[16], t[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i * src_stride)), f);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = _mm_unpacklo_epi8(a[i], a[i + 8]);
      t[2 * i + 1] = _mm_unpackhi_epi8(a[i], a[i + 8]);
    }
    for (int i = 0; i < 16; ++i) a[i] = t[i];
  }
  for (int j = 0; j < 16; ++j) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + j * dst_stride), a[j]);
}
#endif

// dst[c * dst_stride + r] = src[r * src_stride + c] for r < rows, c < cols (a rows x cols byte matrix,
// rows src_stride apart, into its cols x rows transpose, rows dst_stride apart).
inline void transpose_bytes(const uint8_t* src, int64_t rows, int64_t cols, int64_t src_stride, uint8_t* dst,
                            int64_t dst_stride) {
  int64_t r0 = 0;
#if defined(__x86_64__) || defined(__i386__)
  for (; r0 + 16 <= rows; r0 += 16) {
    int64_t c0 = 0;
    for (; c0 + 16 <= cols; c0 += 16)
      transpose_bytes_16x16(src + r0 * src_stride + c0, src_stride, 0, dst + c0 * dst_stride + r0, dst_stride);
    for (int64_t c = c0; c < cols; ++c)
      for (int64_t r = r0; r < r0 + 16; ++r) dst[c * dst_stride + r] = src[r * src_stride + c];
  }
#endif
  for (int64_t r = r0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[c * dst_stride + r] = src[r * src_stride + c];
}

}  // namespace nxrt::ir
