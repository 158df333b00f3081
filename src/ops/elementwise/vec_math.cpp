// vec_math.h's choice of map by tier (compiled like the rest of the library; the maps themselves are
// in vec_math_avx2.cpp / vec_math_avx512.cpp).
#include "ops/elementwise/vec_math.h"

#include "ep/cpu_features.h"

namespace nxrt::ops::vecmath {

MapFn map_for_tier(ep::IsaTier tier) {
#if defined(__x86_64__)
  if (tier >= ep::IsaTier::kAvx512) return &map_avx512;
  if (tier >= ep::IsaTier::kAvx2) return &map_avx2;
#else
  (void)tier;
#endif
  return nullptr;
}

SoftmaxRowFn softmax_row_for_tier(ep::IsaTier tier) {
#if defined(__x86_64__)
  if (tier >= ep::IsaTier::kAvx512) return &softmax_row_avx512;
  if (tier >= ep::IsaTier::kAvx2) return &softmax_row_avx2;
#else
  (void)tier;
#endif
  return nullptr;
}

}  // namespace nxrt::ops::vecmath
