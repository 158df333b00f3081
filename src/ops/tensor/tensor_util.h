// Helpers shared by the shape/movement ops (tensor/tensor.cpp) and the indexing ops (tensor/indexing.cpp):
// strided element copies for every dtype (strings and sub-byte included), the index math of Slice and
// Transpose (kept here so a zero-copy view path can reuse it), and scalar conversions.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/common.h"

namespace nxrt::ops {

// An element-strided window over a contiguous tensor: element (i0, i1, ...) of the window is element
// `offset + sum(ik * strides[k])` of the source. Strides may be negative (Slice with negative steps) or
// zero (Expand).
struct StridedLayout {
  Dims shape;
  Dims strides;
  int64_t offset = 0;
};

// Slice index math (opset 10+ semantics; opset 1-9 callers pass steps of 1). starts/ends/axes/steps
// have equal length; axes may be negative. Returns the window over `in_shape`, or an error message.
Result<StridedLayout> slice_layout(const Dims& in_shape, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                   const std::vector<int64_t>& steps);

// Transpose index math: perm empty = reversed axes. Returns an error when perm is not a permutation.
Result<StridedLayout> transpose_layout(const Dims& in_shape, const Dims& perm);

// dst[dst_offset + sum(i*dst_strides)] = src[src_offset + sum(i*src_strides)] for every index i of
// `shape`. Offsets and strides are in elements relative to the tensors' first element. Works for every
// dtype, strings and sub-byte types included; src and dst must have the same dtype and be distinct.
// Large copies are split over `pool` when given.
void copy_elements(const Tensor& src, int64_t src_offset, const Dims& src_strides, Tensor& dst,
                   int64_t dst_offset, const Dims& dst_strides, const Dims& shape, ep::ThreadPool* pool = nullptr);

// Gathers a window of `src` into the contiguous tensor `dst` (dst.shape() == layout.shape).
void copy_window(const Tensor& src, const StridedLayout& layout, Tensor& dst, ep::ThreadPool* pool = nullptr);

// Sub-byte types (int4/uint4/int2/uint2/float4): one uint8 per element holding the raw bits, and back.
Tensor subbyte_unpack(const Tensor& t);
Tensor subbyte_pack(const Tensor& u8, DataType dt);

// Copies `count` elements of index `src_index` .. from src into dst at `dst_index` (same dtype,
// contiguous, any dtype).
void copy_run(const Tensor& src, int64_t src_index, Tensor& dst, int64_t dst_index, int64_t count);

// Element pointers of a contiguous tensor for a dispatch_elem tag type.
template <typename E>
const E* elem_ptr(const Tensor& t) {
  if constexpr (std::is_same_v<E, std::string>) {
    return t.string_data();
  } else {
    return static_cast<const E*>(t.raw_data());
  }
}
template <typename E>
E* elem_ptr(Tensor& t) {
  if constexpr (std::is_same_v<E, std::string>) {
    return t.string_data();
  } else {
    return static_cast<E*>(t.raw_data());
  }
}

// A double stored as numeric type T: float16/bfloat16 through float, bool as v != 0, integers
// saturated (NaN -> 0). (The other way is to_compute<double>.)
template <typename T>
T from_double(double v) {
  if constexpr (is_reduced_float_v<T>) {
    return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != 0;
  } else if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(v);
  } else {
    if (v != v) return T(0);
    if (v <= static_cast<double>(std::numeric_limits<T>::lowest())) return std::numeric_limits<T>::lowest();
    if (v >= static_cast<double>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }
}

// Fills a contiguous tensor with a scalar given as double (numeric dtypes and bool); false otherwise.
bool fill_with_double(Tensor& t, double v);

// Whether a shape has no negative dims and at most 2^40 elements (no int64 overflow): guards output
// shapes computed from data (Expand, Tile, Pad, Resize, OneHot, ...).
bool shape_is_sane(const Dims& shape);

// "[1,2,3]" for error messages.
std::string ints_to_string(const std::vector<int64_t>& v);

// dst (contiguous, out_shape) element (i0, i1, ...) = src (contiguous, in_shape) element
// (maps[0][i0], maps[1][i1], ...): each output axis picks its source index through its own map (Pad's
// edge/reflect/wrap modes, Resize's nearest mode).
template <typename E>
void gather_axis_maps(const E* src, E* dst, const Dims& in_shape, const Dims& out_shape,
                      const std::vector<std::vector<int64_t>>& maps) {
  const size_t r = out_shape.size();
  const int64_t n = shape_numel(out_shape);
  if (n == 0) return;
  if (r == 0) {
    dst[0] = src[0];
    return;
  }
  const Dims cs = contiguous_strides(in_shape);
  const int64_t inner = out_shape[r - 1];
  const int64_t* last = maps[r - 1].data();
  auto rows = strided_cursor(out_shape, r - 1);
  for (int64_t done = 0; done < n; done += inner, rows.next()) {
    int64_t base = 0;
    for (size_t a = 0; a + 1 < r; ++a) base += maps[a][rows.index(a)] * cs[a];
    const E* s = src + base;
    E* d = dst + done;
    for (int64_t i = 0; i < inner; ++i) d[i] = s[last[i]];
  }
}
// The same over contiguous tensors of any whole-byte or string dtype (out: out_shape, x's dtype); false
// for another dtype.
bool gather_axis_maps(const Tensor& x, Tensor& out, const std::vector<std::vector<int64_t>>& maps);

// Reads an integer index input tensor (int32/int64) into int64 values; error message on other dtypes.
Result<std::vector<int64_t>> read_indices(const Tensor& t, const char* what);
// Input i, which the op requires, read by read_indices; errors (missing, not a tensor, another dtype)
// name the input and the node.
Result<std::vector<int64_t>> required_indices(const ep::KernelContext& ctx, size_t i, const char* name);

}  // namespace nxrt::ops
