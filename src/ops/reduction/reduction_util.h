// Helpers shared by the reduction / softmax / linalg / generator kernels of this family.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/common.h"

namespace nxrt::ops {

void register_softmax_ops(ep::KernelRegistry& r);  // reduction/softmax.cpp
void register_cumulative_ops(ep::KernelRegistry& r);  // reduction/cumulative.cpp

// double -> T without undefined behaviour: NaN -> 0, out-of-range values saturate (integers);
// reduced floats round.
template <typename T>
inline T saturate_cast(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  } else if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return T(static_cast<float>(v));
  }
}

// Outer x Reduced x Inner decomposition of a shape around one axis.
struct ORI {
  int64_t O = 1, R = 1, I = 1;
};
inline ORI ori_around_axis(const Dims& shape, int64_t axis) {
  ORI s;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i) {
    if (i < axis) s.O *= shape[i];
    else if (i == axis) s.R = shape[i];
    else s.I *= shape[i];
  }
  return s;
}

// A scalar integer from a 0-D or 1-element tensor (the axis input of CumSum, ...).
inline Result<int64_t> read_scalar_int(const Tensor& t) {
  if (t.numel() != 1) return invalid_argument("expected a scalar, got " + t.describe());
  auto v = read_int_values(t);
  if (!v.ok()) return v.status();
  return v.value()[0];
}

// Runs fn over [0, n) on the pool when there is enough work.
inline void parallel_run(ep::KernelContext& ctx, int64_t n, int64_t work_per_item,
                         ep::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(1, work_per_item));
  if (n <= grain) {
    fn(0, n);
    return;
  }
  ctx.pool().parallel_for(n, grain, fn);
}

}  // namespace nxrt::ops
