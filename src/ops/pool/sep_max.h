// Separable float MaxPool for 2-D windows without dilation and horizontal stride 1 or 2 (every CNN
// max pool: 3x3 stride 2, 3x3 stride 1 pad 1, 2x2 stride 2): each input row's horizontal window max is
// taken once, straight from the input (masked loads give -inf past its edges, no padded copy; stride 2
// splits a row's even and odd columns in registers), into a ring of KH rows; each output row is then
// the vertical max of its window's rows in that ring.
//
// Bit-exact with the per-window reference (acc = v > acc ? v : acc from -inf, taps row by row): the
// row pass keeps the first of equal values in column order and the vertical pass the first row whose
// value equals the maximum, which is the reference's first maximal tap in row-major order (this
// decides the sign of a zero result); NaN inputs are skipped in the row pass.
//
// Bodies: plain loops (kScalar, and the reference the tests compare against), 8-float AVX2 and
// 16-float AVX-512 vectors; the caller picks one tier once (its plan) and passes it on every call.
#pragma once
#include <cstdint>

#include "ep/cpu_features.h"
#include "ops/conv/conv_geometry.h"

namespace nxrt::ops::sepmax {

// Output rows at least this wide take this path in the row-wise plan (pool/row_pool.h) where the window
// engine could run them too (horizontal stride 2 / 1); narrower stride-2 max pools go to the flat path
// (pool/flat_pool.h) at the AVX-512 tier.
constexpr int64_t kMinWidthS2 = 24;
constexpr int64_t kMinWidthS1 = 64;

// Whether this path handles g (depth axis trivial, no dilation, horizontal stride 1 or 2, KW <= 32,
// KH <= 64).
bool applies(const Geom3& g);

// 3x3 stride-2 windows with pads of 0 or 1 at the start (any at the end) on rows of at most this many
// outputs: at the AVX-512 tier a row's maxima stay in registers (no ring, no edge loop), which the
// row-wise plan prefers to the ring, the flat path and the window engine for these shapes.
constexpr int64_t kNarrowMaxOutputs = 63;
bool narrow_applies(const Geom3& g);

// The tier the bodies run at for a requested tier: the best body at or below it that this CPU has.
ep::IsaTier body_tier(ep::IsaTier requested);

// Floats of scratch one call needs (a ring of KH rounded up to a power of two rows of maxima, OW
// rounded up to 16 each).
int64_t scratch_floats(const Geom3& g);

// Planes [p0, p1) of x (each g.in_size()) into y (each g.out_size()) with the body of `tier`
// (body_tier's result). scratch: scratch_floats(g) floats, contents unspecified.
void run(ep::IsaTier tier, const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1, float* scratch);

}  // namespace nxrt::ops::sepmax
