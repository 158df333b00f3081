// Row-wise float pooling for 2-D windows (MaxPool / AveragePool) and a vectorized GlobalAveragePool.
// The windowed pools reduce each output row in two passes: the window's valid input rows are reduced
// into one padded row buffer (contiguous, vectorizes), then each output column reduces its KW taps of
// that buffer. Results equal the per-window reference (pool/pool_ops.cpp) exactly for max and up to
// float summation order for average.
#pragma once
#include <cstdint>

#include "ops/conv/conv_geometry.h"

namespace nxrt::ops::rowpool {

// Whether the row-wise path handles this geometry (depth axis trivial: 1-D or 2-D pools).
bool applies(const Geom3& g);

// Planes [p0, p1) of x (each g.in_size()) into y (each g.out_size()).
void max_pool_2d(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1);
void avg_pool_2d(const Geom3& g, const float* x, float* y, bool count_include_pad, int64_t p0, int64_t p1);

// y[q] = mean of x[q*plane .. (q+1)*plane) for q in [q0, q1).
void global_avg(const float* x, float* y, int64_t plane, int64_t q0, int64_t q1);

}  // namespace nxrt::ops::rowpool
