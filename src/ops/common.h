// Helpers shared by the CPU kernels. The dtype dispatch, broadcasting and value readers live in
// ir/tensor_util.h (the optimizer and shape inference use them too) and are named here for the kernels.
#pragma once
#include <algorithm>
#include <complex>
#include <cstdint>
#include <string>
#include <vector>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "nxrt/float_types.h"
#include "ir/strided_cursor.h"
#include "ir/tensor_util.h"
#include "ops/gemm/gemm.h"
#include "nxrt/tensor.h"

namespace nxrt::ops {

// std::nearbyint under the default rounding mode (to nearest, ties to even) without the libm call (on
// the x86-64 baseline it is one): adding and subtracting 1.5 * 2^52 (an even number) rounds any
// |v| < 2^51 that way (-0 comes out +0); larger values, infinities and NaN come back as they are, as
// nearbyint returns them. The quantizing kernels' requantization uses it per output element.
inline double round_half_even(double v) {
  if (!(v < 0x1p51 && v > -0x1p51)) return v;
  return (v + 0x1.8p52) - 0x1.8p52;  // two roundings: without -ffast-math the compiler keeps both
}

using ir::Bytes16;
using ir::broadcast_all;
using ir::broadcast_shapes;
using ir::broadcast_strides;
using ir::compute_t;
using ir::dispatch_by_size;
using ir::dispatch_elem;
using ir::dispatch_error;
using ir::dispatch_float;
using ir::dispatch_integer;
using ir::dispatch_native;
using ir::dispatch_numeric;
using ir::dispatch_signed;
using ir::dispatch_unsigned;
using ir::dtype_of;
using ir::from_compute;
using ir::is_float_like_v;
using ir::is_reduced_float_v;
using ir::load_floats;
using ir::normalize_axis;
using ir::read_double_values;
using ir::read_floats_as;
using ir::read_int_values;
using ir::round_to_float_dtype;
using ir::store_floats;
using ir::to_compute;
using ir::strided_cursor;
using ir::StridedCursor;

// Several typed arrays in one step workspace (ctx.workspace), so a kernel needing scratch allocates
// nothing on the hot path: reserve each array (add<T>(n) returns its offset), allocate() once, then
// at<T>(offset). Arrays are 64-byte aligned.
class ScratchLayout {
 public:
  template <typename T>
  size_t add(int64_t n) {
    const size_t off = bytes_;
    bytes_ += (static_cast<size_t>(n > 0 ? n : 0) * sizeof(T) + 63) / 64 * 64;
    return off;
  }
  Status allocate(ep::KernelContext& ctx) {
    if (bytes_ == 0) return Status::Ok();
    auto r = ctx.workspace(bytes_);
    if (!r.ok()) return r.status();
    base_ = static_cast<uint8_t*>(r.value());
    return Status::Ok();
  }
  template <typename T>
  T* at(size_t off) const { return reinterpret_cast<T*>(base_ + off); }
  // The bytes the arrays take (what a variant declares as workspace).
  size_t bytes() const { return bytes_; }
  // The arrays in `base` (64-byte aligned, bytes() of it) instead of allocate().
  void bind(void* base) { base_ = static_cast<uint8_t*>(base); }

 private:
  size_t bytes_ = 0;
  uint8_t* base_ = nullptr;
};

// The float GEMM's packing scratch as slots of a variant's ScratchLayout: reserve() one slot of `floats`
// per thread at specialize (nothing when the GEMM packs nothing); scratch() hands them to the engine at
// compute, once the layout is bound.
struct GemmSlots {
  size_t offset = 0, slot_floats = 0;
  int slots = 0;
  void reserve(ScratchLayout& layout, size_t floats, int threads) {
    if (floats == 0) return;
    slot_floats = floats;
    slots = std::max(1, threads);
    offset = layout.add<float>(static_cast<int64_t>(floats) * slots);
  }
  GemmScratch scratch(const ScratchLayout& layout) const {
    if (slots == 0) return {};
    return {layout.at<float>(offset), slot_floats, slots};
  }
};

}  // namespace nxrt::ops
