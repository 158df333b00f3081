// Shared pieces of the small-CNN float kernels (pool/row_pool.cpp, conv/depthwise.cpp): padded plane copies
// and "tap" loops that combine T source arrays elementwise (y[i] = op over t of src[t][i]), written
// once with AVX2 intrinsics and once as plain loops (the reference and the non-AVX2 fallback).
#pragma once
#include <cstdint>
#include <cstring>
#include <limits>

#include "ep/cpu_features.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_SC_X86 1
#define NXRT_SC_AVX2 __attribute__((target("avx2,fma")))
#else
#define NXRT_SC_AVX2
#endif

namespace nxrt::ops::window {

inline bool has_avx2() { return ep::cpu_has_avx2_fma(); }

// Row length of a padded plane row; with `split` (stride-2 windows) each row holds its even columns
// (ceil(Wp / 2)) then its odd columns, so stride-2 taps read contiguous runs.
inline int64_t even_len(int64_t Wp) { return (Wp + 1) / 2; }

// buf[Hp][Wp] = x[IH][IW] placed at (pt, pl), `pad` elsewhere.
inline void pad_plane(const float* __restrict x, int64_t IH, int64_t IW, int64_t pt, int64_t pl, int64_t Hp,
                      int64_t Wp, float pad, bool split, float* __restrict buf, float* __restrict row_tmp) {
  for (int64_t r = 0; r < Hp; ++r) {
    float* __restrict br = buf + r * Wp;
    const int64_t ih = r - pt;
    if (ih < 0 || ih >= IH) {
      for (int64_t i = 0; i < Wp; ++i) br[i] = pad;
      continue;
    }
    float* __restrict dst = split ? row_tmp : br;
    for (int64_t i = 0; i < pl; ++i) dst[i] = pad;
    std::memcpy(dst + pl, x + ih * IW, sizeof(float) * static_cast<size_t>(IW));
    for (int64_t i = pl + IW; i < Wp; ++i) dst[i] = pad;
    if (split) {
      const int64_t ne = even_len(Wp);
      for (int64_t j = 0; j < ne; ++j) br[j] = row_tmp[2 * j];
      for (int64_t j = 0; 2 * j + 1 < Wp; ++j) br[ne + j] = row_tmp[2 * j + 1];
    }
  }
}

enum class TapOp { kFma, kMax, kSum };

// y[i] = init op src[0][i] op ... op src[T-1][i] for i in [0, n); kFma: init + sum w[t] * src[t][i].
// kMax uses (v > acc ? v : acc) from `init`: NaN inputs are skipped, like the reference loops.
template <TapOp op>
inline void taps_plain(const float* const* src, const float* w, int T, float init, float* __restrict y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float acc = init;
    for (int t = 0; t < T; ++t) {
      const float v = src[t][i];
      if constexpr (op == TapOp::kFma) acc += w[t] * v;
      if constexpr (op == TapOp::kMax) acc = v > acc ? v : acc;
      if constexpr (op == TapOp::kSum) acc += v;
    }
    y[i] = acc;
  }
}

#ifdef NXRT_SC_X86
template <TapOp op>
NXRT_SC_AVX2 inline __m256 tap_step(__m256 acc, __m256 v, __m256 wv) {
  if constexpr (op == TapOp::kFma) return _mm256_fmadd_ps(wv, v, acc);
  if constexpr (op == TapOp::kMax) return _mm256_max_ps(v, acc);  // v > acc ? v : acc
  return _mm256_add_ps(acc, v);
}

template <TapOp op>
NXRT_SC_AVX2 inline void taps_avx2(const float* const* src, const float* w, int T, float init, float* __restrict y,
                                   int64_t n) {
  const __m256 vi = _mm256_set1_ps(init);
  const __m256 zero = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256 a0 = vi, a1 = vi, a2 = vi, a3 = vi;
    for (int t = 0; t < T; ++t) {
      const __m256 wv = op == TapOp::kFma ? _mm256_broadcast_ss(w + t) : zero;
      const float* s = src[t] + i;
      a0 = tap_step<op>(a0, _mm256_loadu_ps(s), wv);
      a1 = tap_step<op>(a1, _mm256_loadu_ps(s + 8), wv);
      a2 = tap_step<op>(a2, _mm256_loadu_ps(s + 16), wv);
      a3 = tap_step<op>(a3, _mm256_loadu_ps(s + 24), wv);
    }
    _mm256_storeu_ps(y + i, a0);
    _mm256_storeu_ps(y + i + 8, a1);
    _mm256_storeu_ps(y + i + 16, a2);
    _mm256_storeu_ps(y + i + 24, a3);
  }
  for (; i + 8 <= n; i += 8) {
    __m256 a0 = vi;
    for (int t = 0; t < T; ++t) {
      const __m256 wv = op == TapOp::kFma ? _mm256_broadcast_ss(w + t) : zero;
      a0 = tap_step<op>(a0, _mm256_loadu_ps(src[t] + i), wv);
    }
    _mm256_storeu_ps(y + i, a0);
  }
  if (i < n) {
    // The tail through a masked load/store keeps every lane's arithmetic identical to the main loop.
    alignas(32) int32_t mask_bits[8];
    for (int k = 0; k < 8; ++k) mask_bits[k] = i + k < n ? -1 : 0;
    const __m256i m = _mm256_load_si256(reinterpret_cast<const __m256i*>(mask_bits));
    __m256 a0 = vi;
    for (int t = 0; t < T; ++t) {
      const __m256 wv = op == TapOp::kFma ? _mm256_broadcast_ss(w + t) : zero;
      a0 = tap_step<op>(a0, _mm256_maskload_ps(src[t] + i, m), wv);
    }
    _mm256_maskstore_ps(y + i, m, a0);
  }
}
#endif

template <TapOp op>
inline void taps(bool avx2, const float* const* src, const float* w, int T, float init, float* y, int64_t n) {
#ifdef NXRT_SC_X86
  if (avx2) return taps_avx2<op>(src, w, T, init, y, n);
#endif
  taps_plain<op>(src, w, T, init, y, n);
}

}  // namespace nxrt::ops::window
