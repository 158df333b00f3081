// One engine for the small-CNN window kernels over NCHW float planes: depthwise convolution
// (conv/depthwise.cpp), MaxPool and AveragePool (pool/row_pool.cpp). A TapPlan holds everything about one
// window geometry that does not depend on the data, built once per geometry (at specialize: a kernel
// variant's, run on a thread's slot of scratch with run_planes_in) and reused for every plane:
//   - a padded plane buffer (pad value: 0 for conv / average, -inf for max) whose pad cells are written
//     once (per prepare, or per run_planes_in call); each plane only rewrites its interior cells. With horizontal stride S > 1 each padded row is
//     stored phase by phase (columns 0, S, 2S, ... then 1, S+1, ... : "split" rows), so every tap of a
//     strided output row reads a contiguous run;
//   - the tap offsets (kh, kw) -> offset in that buffer (dilation folds in here);
//   - the output "jobs": one W-wide vector per (output row, W columns), in output order (W: 16 at the
//     AVX-512 tier, else 8). A row's last
//     vector may run past the row; its extra lanes land on the next rows' first outputs, which later
//     jobs overwrite with their real values, so no row needs a scalar tail. Only the lanes past the
//     plane's end are left out (the last vectors' stores go through a short copy, or a masked store).
// Each group of jobs keeps its accumulators in registers over all taps (AVX-512 or AVX2 at the tier
// the plan was prepared for, a plain loop otherwise; the plain loop is also what the tests compare the
// vector paths with). Every body runs each output's taps in the same order: max results are the
// reference's bit for bit, sums and FMAs round the same way at every tier.
#pragma once
#include <cstdint>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/conv/conv_geometry.h"

namespace nxrt::ops::window {

enum class PlaneOp { kConv, kMax, kAvg };

class TapPlan {
 public:
  static constexpr int64_t kMaxTaps = 64;

  // Whether the engine handles g: depth axis trivial (1-D or 2-D windows), at most kMaxTaps taps, any
  // stride, pad, dilation, ceil-mode extent.
  static bool supports(const Geom3& g);

  // (Re)builds for g unless the last build was for the same geometry, op and tier. `cip`: AveragePool's
  // count_include_pad (ignored for other ops). Returns false (nothing built) when !supports(g).
  // own_buffers false: the plan holds no padded planes (a kernel variant's plan, shared by concurrent
  // runs): only run_planes_in runs it, on the caller's scratch. `isa`: the highest tier the vector body
  // may use (a kernel's KernelInfo::isa()), chosen here once: tier() is what this CPU has of it (AVX-512
  // only for output rows of 16+; narrower ones run the AVX2 body).
  bool prepare(const Geom3& g, PlaneOp op, bool cip, bool own_buffers = true, ep::IsaTier isa = ep::cpu_isa_tier());
  // The vector body's tier (kScalar: the plain loop only); valid once prepared.
  ep::IsaTier tier() const { return tier_; }

  // One plane: y[OH*OW] from x[IH*IW]. kConv: bias + sum of w[kh*KW+kw] * window; kMax: max over the
  // window with NaN skipped (v > acc ? v : acc from -inf, the reference's rule); kAvg: sum / count
  // (count of valid taps, or of taps inside the padded extent with cip; 0 taps -> 0).
  // `vec`: use the vector body of the plan's tier (false forces the plain loop).
  void run(const float* x, const float* w, float bias, float* y, bool vec = true);

  // `count` planes: plane i reads x + i * x_stride, weights w + i * w_stride (w may be null for pools),
  // bias[i] (bias_per_plane) or bias[0] (bias may be null: 0), writes y + i * OH * OW. The copy of
  // plane i + 1 is made before plane i is computed (two buffers; planes over 256 KB use one), which
  // hides the store-to-load stall that computing right after a copy pays on small planes.
  void run_planes(const float* x, int64_t x_stride, const float* w, int64_t w_stride, const float* bias,
                  bool bias_per_plane, float* y, int64_t count, bool vec = true);

  // run_planes on `scratch` (scratch_floats() floats, contents unspecified: its pad cells are written
  // first) instead of the plan's own buffers: a const plan (a kernel variant's) on a thread's slot.
  void run_planes_in(float* scratch, const float* x, int64_t x_stride, const float* w, int64_t w_stride,
                     const float* bias, bool bias_per_plane, float* y, int64_t count, bool vec = true) const;
  // The same with plane i read from x_planes[i] (planes in any order: a depthwise conv reading through a
  // channel shuffle).
  void run_planes_at(float* scratch, const float* const* x_planes, const float* w, int64_t w_stride,
                     const float* bias, bool bias_per_plane, float* y, int64_t count, bool vec = true) const;
  // Floats of scratch run_planes_in needs (the padded planes and their slack); valid once prepared.
  int64_t scratch_floats() const { return nbuf_ * bufsz_; }

 private:
  void fill(const float* x, bool vec, float* bufs, int which) const;
  void reset_scratch(float* scratch, int64_t count) const;
  // Plane i of the input: x_planes[i], or x + i * x_stride when x_planes is null.
  void run_on(float* bufs, const float* x, int64_t x_stride, const float* const* x_planes, const float* w,
              int64_t w_stride, const float* bias, bool bias_per_plane, float* y, int64_t count, bool vec) const;
  void jobs(const float* buf, const float* w, float bias, float* y, bool vec) const;

  // Key.
  int64_t key_[17] = {};
  bool built_ = false;
  PlaneOp op_ = PlaneOp::kConv;
  bool cip_ = false;
  ep::IsaTier tier_ = ep::IsaTier::kScalar;
  int64_t W_ = 8;  // lanes per job
  // Geometry.
  int64_t IH_ = 0, IW_ = 0, OH_ = 0, OW_ = 0, Hp_ = 0, Wp_ = 0, pt_ = 0, pl_ = 0, SW_ = 1;
  int T_ = 0;
  std::vector<int64_t> phase_start_;  // SW_ entries: where each column phase starts in a padded row
  std::vector<int64_t> off_;          // T_ tap offsets
  std::vector<int32_t> job_buf_, job_y_, job_n_;  // per job: buffer start, output start, lanes to store
  int64_t nfull_ = 0;                             // jobs [0, nfull_) store all W_ lanes
  int64_t tail0_ = 0;                             // first output of the jobs after them
  std::vector<float> buf_;            // nbuf_ padded planes (+ slack for the last vectors' extra lanes);
                                      // empty when prepared without own buffers
  int64_t bufsz_ = 0;                 // floats per padded plane in buf_
  int64_t nbuf_ = 2;                  // padded planes in buf_ (1 for large planes)
  std::vector<float> cnt_;            // kAvg: divisor per output (+ W_ ones)
};

}  // namespace nxrt::ops::window
