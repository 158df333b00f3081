// Row-wise float pooling for 2-D windows (MaxPool / AveragePool) and a vectorized GlobalAveragePool.
// The windowed pools reduce each output row in two passes: the window's valid input rows are reduced
// into one padded row buffer (contiguous, vectorizes), then each output column reduces its KW taps of
// that buffer. Results equal the per-window reference (pool/pool_ops.cpp) exactly for max and up to
// float summation order for average.
#pragma once
#include <cstddef>
#include <cstdint>

#include "ep/cpu_features.h"
#include "ops/conv/conv_geometry.h"
#include "ops/pool/flat_pool.h"
#include "ops/window/window_engine.h"

namespace nxrt::ops::rowpool {

// Whether the row-wise path handles this geometry (depth axis trivial: 1-D or 2-D pools).
bool applies(const Geom3& g);

// What the row-wise path decides at one geometry: which loop runs ("same" stride-1 max and average
// windows, and stride-2 max ones on rows under 24 outputs, on planes of up to 4096 floats at the
// AVX-512 tier: the flat path of pool/flat_pool.h; max
// pools without dilation, horizontal stride 2 and output rows of 24+ or stride 1 and rows of 64+, any at
// the scalar tier (or windows the engine refuses): the separable max of pool/sep_max.h; other windows of
// up to 64 taps: the window engine's plan, built here), the ISA tier its vector bodies run at and the
// scratch each thread needs. Made once per shape (the pool kernels' variant) and read-only afterwards:
// concurrent chunks and runs share it, each on its own scratch.
struct Plan {
  enum class Path { kNone, kGlobalAvg, kFlat, kSepMax, kEngine, kTaps, kRows };
  Path path = Path::kNone;
  Geom3 g;
  bool max = false;
  bool cip = false;   // count_include_pad (average)
  // The tier the bodies run at: the requested one (the kernel's KernelInfo::isa()) lowered to the best
  // body this CPU has; chosen once here, never per call.
  ep::IsaTier isa = ep::IsaTier::kScalar;
  bool avx2 = false;  // isa >= kAvx2
  window::TapPlan engine;    // kEngine: prepared without buffers of its own
  flatpool::Plan flat;       // kFlat
  size_t scratch_bytes = 0;  // per thread (a chunk's planes run on one thread's scratch)
  // Whether the plan was made for geometry h.
  bool fits(const Geom3& h) const;
};
// false (p->path kNone) when !applies(g). `isa`: the highest tier the plan may use.
bool make_plan(const Geom3& g, bool max, bool count_include_pad, Plan* p, ep::IsaTier isa = ep::cpu_isa_tier());
// Planes [p0, p1) of x (each g.in_size()) into y (each g.out_size()); scratch: p.scratch_bytes, 64-byte
// aligned, contents unspecified, used by no other thread meanwhile.
void run(const Plan& p, const float* x, float* y, int64_t p0, int64_t p1, void* scratch);

// make_plan + run with scratch allocated per call (tests).
void max_pool_2d(const Geom3& g, const float* x, float* y, int64_t p0, int64_t p1,
                 ep::IsaTier isa = ep::cpu_isa_tier());
void avg_pool_2d(const Geom3& g, const float* x, float* y, bool count_include_pad, int64_t p0, int64_t p1);

// y[q] = mean of x[q*plane .. (q+1)*plane) for q in [q0, q1).
void global_avg(const float* x, float* y, int64_t plane, int64_t q0, int64_t q1);

}  // namespace nxrt::ops::rowpool
