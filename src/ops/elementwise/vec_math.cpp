// vec_math.h's choice of body by tier (compiled like the rest of the library; the bodies themselves are
// in vec_math_avx2.cpp / vec_math_avx512.cpp).
#include "ops/elementwise/vec_math.h"

#include "ep/cpu_features.h"

namespace nxrt::ops::vecmath {

namespace {
// The AVX-512 or the AVX2 body for `tier`, or null (the scalar tier; off x86 always).
template <typename Fn>
Fn for_tier(ep::IsaTier tier, Fn avx512, Fn avx2) {
#if defined(__x86_64__)
  if (tier >= ep::IsaTier::kAvx512) return avx512;
  if (tier >= ep::IsaTier::kAvx2) return avx2;
#else
  (void)tier, (void)avx512, (void)avx2;
#endif
  return nullptr;
}
}  // namespace

MapFn map_for_tier(ep::IsaTier tier) { return for_tier<MapFn>(tier, &map_avx512, &map_avx2); }

SoftmaxRowFn softmax_row_for_tier(ep::IsaTier tier) {
  return for_tier<SoftmaxRowFn>(tier, &softmax_row_avx512, &softmax_row_avx2);
}

}  // namespace nxrt::ops::vecmath
