// ConvMaxPool's lanes path: a conv with few multiply-adds per output (a CNN stem: 3 input channels,
// 3x3 kernel) and the max pool after it, computed with the output channels in the vector lanes.
//
// Why: the conv engine's paths put output pixels in the lanes; with 27 multiply-adds per output a GEMM
// tile spends as long loading and storing its accumulators and packing its panels as multiplying, and the
// NCHW conv rows then go through a separable max pool plane by plane (SqueezeNet's stem: 0.49 ms fused at
// 1 thread on a Zen 5 against ORT's 0.33 for its NCHWc conv and pool). Here each conv output row is made
// as OW x M channels-last vectors (one broadcast input value times the M weights of a tap, a block of
// pixels a pass: every input load feeds M / 16 multiply-adds), the row is max-pooled across while it is
// in L1, the pooled columns of the pool's window rows are maxed down, and each pooled row is transposed
// (16 x 16 blocks) into the output planes.
//
// Exactness: the max pool folds taps in row-major window order keeping the first of equal values, as the
// reference does; the conv sums each output in tap order from its bias (within the conv tolerance).
#pragma once

#include <cstdint>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/conv/conv_engine.h"

namespace nxrt::ops {

// Everything the lanes path needs for one conv + pool geometry, made once per shape (ConvMaxPool's variant).
struct StemLanesPlan {
  ConvShape s;   // the conv (group 1)
  Geom3 pg;      // the pool over the conv's output (dilation 1)
  int64_t mv = 0;    // 16-lane vectors of output channels (M / 16)
  int64_t taps = 0;  // C x kH x kW
  int64_t wp = 0;    // a zero-padded input row: the floats a conv output row's taps read across
  bool direct_rows = false;  // no horizontal padding: the taps read X's rows in place
  std::vector<float> w;      // [taps][M]
  // One thread's slot: padded input rows (C x kH of wp, and one zero row), a conv row (OW x M), and the
  // pool's window rows pooled across (kH_pool rows of PW pixels rounded up to 16, x M).
  size_t xr_off = 0, row_off = 0, ring_off = 0, slot_bytes = 0;
};

// Whether the lanes path takes this conv + max pool at `isa` (AVX-512; group 1; M 16, 32, 48 or 64; C x kH x kW <=
// kStemLanesMaxTaps; pool window height <= kStemLanesMaxPoolRows, dilation 1; every pool window meets the
// conv's output), and if so its plan. w: the conv's weights [M, C, kH, kW].
constexpr int64_t kStemLanesMaxTaps = 64;
constexpr int64_t kStemLanesMaxPoolRows = 8;
bool stem_lanes_plan(const ConvShape& s, const Geom3& pg, const float* w, ep::IsaTier isa, StemLanesPlan* p);

// Pooled rows [r0, r1) of the N x PH rows (image-major) of y on the calling thread. bias: M floats; post:
// the activation (ConvPost::act, one conv_post_activation allows); slot: p.slot_bytes.
void stem_lanes_run(const StemLanesPlan& p, const float* x, const float* bias, const ConvPost& post, float* y,
                    int64_t r0, int64_t r1, char* slot);

}  // namespace nxrt::ops
