// See byte_lookup.h.
#include "ops/elementwise/byte_lookup.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace nxrt::ops {

bool byte_lookup_vbmi(ep::IsaTier tier) { return tier >= ep::IsaTier::kAvx512 && ep::cpu_has_avx512_vbmi(); }

namespace {
#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx2,fma"))) void lookup_bytes_vbmi(const uint8_t* src, int64_t n,
                                                                                       const uint8_t* table, uint8_t* dst) {
  const __m512i t0 = _mm512_loadu_si512(table), t1 = _mm512_loadu_si512(table + 64);
  const __m512i t2 = _mm512_loadu_si512(table + 128), t3 = _mm512_loadu_si512(table + 192);
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 k = n - i >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - i)) - 1;
    const __m512i x = _mm512_maskz_loadu_epi8(k, src + i);
    const __m512i lo = _mm512_permutex2var_epi8(t0, x, t1), hi = _mm512_permutex2var_epi8(t2, x, t3);
    _mm512_mask_storeu_epi8(dst + i, k, _mm512_mask_blend_epi8(_mm512_movepi8_mask(x), lo, hi));
  }
}
#endif
}  // namespace

void lookup_bytes(const uint8_t* src, int64_t n, const uint8_t* table, uint8_t* dst, bool vbmi) {
#if defined(__x86_64__)
  if (vbmi) {
    lookup_bytes_vbmi(src, n, table, dst);
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
}

}  // namespace nxrt::ops
