// MaxPool over 8-bit planes (int8 / uint8: QDQ and QOperator models pool their codes directly), 1-D and
// 2-D windows without the indices output. Each output row is reduced in two passes: the window's valid
// input rows into one row buffer (a byte max over the row, 16 bytes at a time), padded at both ends with
// the lowest code so the padding never wins, then each output column takes its KW taps of that row
// (vectors for horizontal stride 1 and 2, the latter after splitting the row into even and odd bytes).
// int8 runs as uint8 with the sign bit flipped (an order-preserving map), so one loop serves both.
// Results equal the per-window reference loop's (pool/pool_ops.cpp) byte for byte.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ops/conv/conv_geometry.h"

namespace nxrt::ops::maxpool8 {

// Whether the row path handles this geometry (depth axis trivial: 1-D or 2-D pools).
bool applies(const Geom3& g);
// Scratch one thread needs for planes of geometry g.
size_t scratch_bytes(const Geom3& g);
// Planes [p0, p1) of x (each g.in_size() bytes) into y (each g.out_size()); scratch: scratch_bytes(g).
void run(const Geom3& g, const uint8_t* x, uint8_t* y, bool is_signed, int64_t p0, int64_t p1, void* scratch);

// Channels-last: x [N, in..., C] bytes to y [N, out..., C], output rows [r0, r1) of all images (row r:
// image r / (out[0] * out[1]), its (out[0], out[1]) row r % that): each output pixel's C bytes the byte
// max of its window's valid input pixels (16 channels a vector), padding left out (a window of padding
// alone gives the lowest code, as the reference loop does). com.microsoft NhwcMaxPool.
void run_channels_last(const Geom3& g, int64_t C, const uint8_t* x, uint8_t* y, bool is_signed, int64_t r0, int64_t r1);

}  // namespace nxrt::ops::maxpool8
