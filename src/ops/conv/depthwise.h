// Vectorized float depthwise convolution (one input channel per output channel), 1-D or 2-D, any
// kernel up to 64 taps, any stride, pad and dilation, through the shared window engine
// (window/window_engine.h: a per-thread padded plane whose pad cells are written once, 8-wide output vectors
// in groups over all taps). conv/conv_engine.cpp's depthwise branch uses it when `applies`; the scalar per-tap
// loop there stays the reference (and handles every other geometry).
#pragma once
#include <cstdint>

#include "ops/conv/conv_geometry.h"

namespace nxrt::ops::dwconv {

bool applies(const Geom3& g);

// y[OH, OW] = bias + conv(x[IH, IW], w[KH, KW]) for one channel.
void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y);

// Output planes [p0, p1) of a depthwise conv over N images: plane p = n * M + m reads input plane
// n * C + m / (M / C), weights w + m * KH * KW and bias[m] (bias may be null). M must be a multiple of C.
void planes_f32(const Geom3& g, int64_t C, int64_t M, const float* x, const float* w, const float* bias, float* y,
                int64_t p0, int64_t p1);

}  // namespace nxrt::ops::dwconv
