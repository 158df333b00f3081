// Vectorized float depthwise convolution (one input channel per output channel), 1-D or 2-D, any
// kernel up to 64 taps, any stride, pad and dilation, through the shared window engine
// (window/window_engine.h: a per-thread padded plane whose pad cells are written once, 8-wide output vectors
// in groups over all taps). conv/conv_engine.cpp's depthwise branch uses it when `applies`; the scalar per-tap
// loop there stays the reference (and handles every other geometry).
#pragma once
#include <cstdint>
#include <memory>

#include "ops/conv/conv_geometry.h"
#include "ops/window/window_engine.h"

namespace nxrt::ops {

// Channel c of a channel shuffle's output over C channels in G groups ([G, C/G] transposed to [C/G, G]):
// the input channel it holds.
inline int64_t shuffled_channel(int64_t c, int64_t C, int64_t G) { return (c % G) * (C / G) + c / G; }

}  // namespace nxrt::ops

namespace nxrt::ops::dwconv {

bool applies(const Geom3& g);

// The window engine's plan for depthwise convs of geometry g, prepared without buffers of its own (the
// conv's plan keeps it, shared by concurrent runs), or null when the engine does not take g. `isa`: the
// highest tier its vector body may use (the conv's ConvConfig::isa).
std::shared_ptr<const window::TapPlan> plan_f32(const Geom3& g, ep::IsaTier isa = ep::cpu_isa_tier());
// Floats of per-thread scratch planes_f32 runs `plan` on (0 for a null plan).
int64_t scratch_floats(const window::TapPlan* plan);

// Output planes [p0, p1) of a depthwise conv over N images: plane p = n * M + m reads input plane
// n * C + m / (M / C), weights w + m * KH * KW and bias[m] (bias may be null). M must be a multiple of C.
// `plan` (plan_f32(g); null: the plain per-output loops) runs on `scratch`, the calling thread's
// scratch_floats(plan) floats (contents unspecified). `shuffle` > 1: the input channels are read through a
// channel shuffle of that many groups (input channel c is x's channel shuffled_channel(c, C, shuffle),
// conv_engine.h's ConvPost::input_shuffle; C % shuffle == 0).
void planes_f32(const window::TapPlan* plan, float* scratch, const Geom3& g, int64_t C, int64_t M, const float* x,
                const float* w, const float* bias, float* y, int64_t p0, int64_t p1, int64_t shuffle = 0);

// The same with a plan and scratch made per call (tests).
void planes_f32(const Geom3& g, int64_t C, int64_t M, const float* x, const float* w, const float* bias, float* y,
                int64_t p0, int64_t p1, int64_t shuffle = 0);
// y[OH, OW] = bias + conv(x[IH, IW], w[KH, KW]) for one channel (plan and scratch per call; tests).
void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y);

}  // namespace nxrt::ops::dwconv
