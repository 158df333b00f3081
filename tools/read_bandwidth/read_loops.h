// The read loops nxrt_read_bandwidth times, shared with bench/microbench.cpp's
// BM_NBitsDecodeStreamRead so that the microbenchmark's anchor is the very loop the weight-read limit
// is measured with. Header-only (the tool links nothing of nxrt).
#pragma once
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nxrt::read_loops {

#if defined(__x86_64__)
// How sum_avx2 prefetches ahead of its loads (past the slice's end a prefetch is a no-op).
enum class Ahead { kNone, kLines4K, kLines8KPages32K };

// Sums n words with 32-byte loads and four accumulators, prefetching as `kAhead` says.
template <Ahead kAhead>
__attribute__((target("avx2"))) uint64_t sum_avx2(const uint64_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if constexpr (kAhead == Ahead::kLines4K) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 512), _MM_HINT_NTA);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 520), _MM_HINT_NTA);
    } else if constexpr (kAhead == Ahead::kLines8KPages32K) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 1024), _MM_HINT_NTA);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 1032), _MM_HINT_NTA);
      // One line per 4 KB page (512 words) 32 KB ahead; i steps by 16 words, so once per page.
      if ((reinterpret_cast<uintptr_t>(p + i) & 4095) == 0) {
        _mm_prefetch(reinterpret_cast<const char*>(p + i + 4096), _MM_HINT_T0);
      }
    }
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 4)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 8)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 12)));
  }
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d)));
  uint64_t s = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) s += p[i];
  return s;
}
#endif

inline uint64_t sum_plain(const uint64_t* p, size_t n) {
  uint64_t s[4] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int j = 0; j < 4; ++j) s[j] += p[i + j];
  for (; i < n; ++i) s[0] += p[i];
  return s[0] + s[1] + s[2] + s[3];
}

// loop: 0 plain, 1 lines 4 KB ahead, 2 lines 8 KB and pages 32 KB ahead (all plain without AVX2).
inline uint64_t sum(const uint64_t* p, size_t n, int loop) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2")) {
    switch (loop) {
      case 0: return sum_avx2<Ahead::kNone>(p, n);
      case 1: return sum_avx2<Ahead::kLines4K>(p, n);
      default: return sum_avx2<Ahead::kLines8KPages32K>(p, n);
    }
  }
#endif
  (void)loop;
  return sum_plain(p, n);
}

}  // namespace nxrt::read_loops
