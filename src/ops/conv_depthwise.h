// Vectorized float depthwise convolution (one input channel per output channel), 2-D, square 3x3 /
// 5x5 / 7x7 kernels, stride 1 or 2, no dilation. Each output row is computed in one pass: the interior
// columns (every tap inside the input) by a fixed-size kernel the compiler vectorizes, the border
// columns with bounds checks. conv_impl.cpp's depthwise branch uses it when `applies`; the scalar
// per-tap loop there stays the reference (and handles every other geometry).
#pragma once
#include <cstdint>

#include "ops/conv_util.h"

namespace nxrt::ops::dwconv {

bool applies(const Geom3& g);

// y[OH, OW] = bias + conv(x[IH, IW], w[K, K]) for one channel.
void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y);

}  // namespace nxrt::ops::dwconv
