// Helpers shared by the com.microsoft contrib kernels (contrib_*.cpp).
#pragma once
#include <cstdint>
#include <type_traits>

#include "nxrt/float_types.h"

namespace nxrt::ops::contrib {

struct RotaryParams {
  int64_t rot = 0;          // rotated leading dims of each head (even)
  int64_t cache_width = 0;  // row length of cos/sin caches (>= rot / 2)
  bool interleaved = false;
};

template <typename T>
inline float cf(T v) { return static_cast<float>(v); }

template <typename T>
inline T to_t(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, double>) return static_cast<double>(v);
  else return T(v);
}

// Rotates one head vector x[D] into y[D] (may alias) with cos/sin rows of the position:
//   non-interleaved: pairs (i, i + rot/2); interleaved: pairs (2i, 2i + 1); dims >= rot copied.
template <typename T, typename CS>
inline void rotate_head(const T* x, T* y, int64_t D, const CS* cosr, const CS* sinr, const RotaryParams& p) {
  const int64_t half = p.rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const int64_t i1 = p.interleaved ? 2 * i : i;
    const int64_t i2 = p.interleaved ? 2 * i + 1 : i + half;
    const float c = cf(cosr[i]), s = cf(sinr[i]);
    const float x1 = cf(x[i1]), x2 = cf(x[i2]);
    y[i1] = to_t<T>(x1 * c - x2 * s);
    y[i2] = to_t<T>(x2 * c + x1 * s);
  }
  if (y != x)
    for (int64_t d = p.rot; d < D; ++d) y[d] = x[d];
}

}  // namespace nxrt::ops::contrib
