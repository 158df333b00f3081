// Stride-1 float MaxPool / AveragePool that keep the plane's size ("same" padding: a 3x3 window with
// pads of 1, the pool branches of Inception modules), and stride-2 MaxPool on narrow rows, on planes of up
// to kFlatPoolMaxPlane floats at the AVX-512 tier: each plane is reduced as one flat run of 16-float
// vectors, not row by row. Stride 2 runs the same horizontal pass over every input column, then the
// vertical pass at the even rows only and keeps the even columns (output j's window starts at 2 j - pl).
//
// Why: these planes are small (7x7 to 56x56) and many (576 planes of 14x14 in Inception-v2), and the row
// paths pay per row and per plane (a 14-wide row is one vector with 2 lanes idle plus the loop around
// it); the window engine spent ~7 cycles an output on 576x14x14. Here a plane of 196 floats is 13
// vectors through two passes:
//   horizontal: h[p] = reduce over kw of x[p + kw - pl], each tap one masked load of the flat plane (a
//               lane whose column would leave its row reads the reduction's identity: -inf or 0);
//   vertical:   y[p] = reduce over kh of h[p + (kh - pt) * W], rows outside the plane masked the same way;
// then, for the average, one division by the position's tap count. The masks and counts depend only on
// the shape: the plan makes them once.
//
// Max: taps in column order within a row, rows in order, each kept only when strictly greater
// (max(v, acc) keeps acc on ties and NaN): the reference's first maximal tap in row-major order, bit for
// bit (the sign of a zero result included), NaN skipped. Average: the same sums in another order, divided
// by the same count.
#pragma once
#include <cstdint>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/conv/conv_geometry.h"

namespace nxrt::ops::flatpool {

// The largest plane (floats) the path takes: its horizontal pass's scratch stays in L1.
constexpr int64_t kFlatPoolMaxPlane = 4096;
// 3x3 "same" windows (pads of 1) on rows of kRows3MinWidth to kRows3MaxWidth floats take the register-row
// body: each row's horizontal reductions stay in up to 4 vectors for the vertical pass, no flat-plane
// scratch. Narrower rows would leave most lanes idle (1024x7x7 average: 16 -> 28 us in cache), where the
// flat run of vectors packs several rows into each.
constexpr int64_t kRows3MinWidth = 12;
constexpr int64_t kRows3MaxWidth = 64;

// What the path decides once per shape: the masks of every vector's taps and the average's reciprocals.
struct Plan {
  Geom3 g;
  bool max = false;
  int64_t W = 0, plane = 0, nvec = 0;  // W: the row length (in = out); nvec: 16-float vectors a plane
  int64_t batch = 1;                   // planes a horizontal pass covers before their vertical passes
  int64_t h_lo = 0, h_hi = 0;          // vectors whose horizontal taps all read inside the plane
  int64_t v_lo = 0, v_hi = 0;          // vectors whose lanes' window rows all lie inside the plane
  std::vector<uint16_t> hmask;         // [nvec][KW]: lanes whose tap kw stays inside their row
  std::vector<uint16_t> vmask;         // stride 1: [nvec][KH]: lanes whose tap row kh is inside the plane
  std::vector<float> count;            // average: [nvec * 16] the taps each position divides by
  bool stride2 = false;                // stride 2: the vertical pass at even rows, then the even columns
  int rows3_vectors = 0;               // 3x3 "same" on register rows (kRows3MinWidth..kRows3MaxWidth): vectors a row
  // (Stride 2 reads up to 32 floats past a plane's last row of h: slack after the batch.)
  int64_t scratch_floats() const { return batch * nvec * 16 + 32; }
};

// Whether the path handles g at this tier for a max (`max`) or average pool: 2-D, no dilation, pads
// smaller than the window, a plane of at most kFlatPoolMaxPlane floats, AVX-512 here and allowed; stride
// 1 with the output the input's size on both axes, or (max only) stride 2 on both axes with every
// window's anchor 2 i inside the input and output rows narrower than the separable max path takes
// (sepmax::kMinWidthS2: this path reduces every input column first, four times the outputs, which only
// pays against the window engine's per-row costs on narrow rows; not for averages).
bool applies(const Geom3& g, bool max, ep::IsaTier isa);

// The plan for g (applies(g, ...)): max, or average counting pads or not (count_include_pad).
Plan make_plan(const Geom3& g, bool max, bool count_include_pad);

// Planes [p0, p1) of x into y (each plane p.plane floats); scratch: p.scratch_floats() floats.
void run(const Plan& p, const float* x, float* y, int64_t p0, int64_t p1, float* scratch);

}  // namespace nxrt::ops::flatpool
