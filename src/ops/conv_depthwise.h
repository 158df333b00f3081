// Vectorized float depthwise convolution (one input channel per output channel), 1-D or 2-D, kernels
// up to 7x7, any vertical stride, horizontal stride 1 or 2, no dilation. The channel is copied into a
// zero-padded plane, then each output row is one AVX2 tap loop (smallcnn_simd.h). conv_impl.cpp's depthwise branch uses it when `applies`; the scalar
// per-tap loop there stays the reference (and handles every other geometry).
#pragma once
#include <cstdint>

#include "ops/conv_util.h"

namespace nxrt::ops::dwconv {

bool applies(const Geom3& g);

// y[OH, OW] = bias + conv(x[IH, IW], w[K, K]) for one channel.
void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y);

}  // namespace nxrt::ops::dwconv
