// StridedCursor: the one N-d index walker of the strided kernels (Transpose/Expand copies, broadcast
// gathers and scatters, per-batch offsets of batched MatMul, index-mapped gathers of Pad/Resize).
//
// It walks the positions of a shape in row-major order (last axis fastest) and keeps, for each of K
// operands, the element offset of the current position under that operand's strides (0 along an axis
// the operand is broadcast on, anything else for views). A kernel that runs a tight loop over the
// innermost axis walks only the outer axes with it (rank = shape.size() - 1); one that goes element by
// element walks them all. K = 0 walks the index alone (index(d)).
//
// A step adds each operand's stride of the axis that moves and, on the axes that wrap, takes back what
// they added: the arithmetic of a hand-written odometer, with K a compile-time constant so the offset
// updates unroll. Allocation-free up to Dims::kInline axes.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "nxrt/dims.h"

namespace nxrt::ir {

template <int K>
class StridedCursor {
 public:
  // Walks the first `rank` axes of `shape`; strides[k] points at operand k's strides of those axes
  // (at least `rank` values) and start[k] is its offset at the origin. Shape and strides are read in
  // place: they must outlive the cursor.
  [[gnu::always_inline]] StridedCursor(const int64_t* shape, size_t rank,
                                       const std::array<const int64_t*, K>& strides,
                                       const std::array<int64_t, K>& start = {})
      : shape_(shape), rank_(rank), strides_(strides), start_(start), offsets_(start) {
    if (rank > Dims::kInline) index_heap_.reset(new long long[rank]);
    long long* index = index_data();
    for (size_t d = 0; d < rank; ++d) index[d] = 0;
  }
  // Made in place (strided_cursor() returns it by guaranteed copy elision) and walked there.
  StridedCursor(const StridedCursor&) = delete;
  StridedCursor& operator=(const StridedCursor&) = delete;

  // The number of positions (1 for rank 0; 0 when an axis is empty).
  int64_t count() const {
    int64_t n = 1;
    for (size_t d = 0; d < rank_; ++d) n *= shape_[d];
    return n;
  }

  int64_t offset(int k) const { return offsets_[static_cast<size_t>(k)]; }
  int64_t index(size_t d) const { return index_heap_ ? index_heap_[d] : index_inline_[d]; }

  // Moves to the next position. Returns false after the last one: the cursor is then back at the origin.
  bool next() {
    long long* index = index_data();
    for (size_t d = rank_; d-- > 0;) {
      for (size_t k = 0; k < kOps; ++k) offsets_[k] += strides_[k][d];
      if (++index[d] < shape_[d]) return true;
      for (size_t k = 0; k < kOps; ++k) offsets_[k] -= strides_[k][d] * shape_[d];
      index[d] = 0;
    }
    return false;
  }

  // Jumps to the position of row-major flat index `flat` (where a parallel chunk starts).
  void seek(int64_t flat) {
    offsets_ = start_;
    long long* index = index_data();
    for (size_t d = rank_; d-- > 0;) {
      const int64_t i = shape_[d] > 0 ? flat % shape_[d] : 0;
      flat = shape_[d] > 0 ? flat / shape_[d] : 0;
      index[d] = i;
      for (size_t k = 0; k < kOps; ++k) offsets_[k] += i * strides_[k][d];
    }
  }

 private:
  static constexpr size_t kOps = K;
  const int64_t* shape_;
  size_t rank_;
  std::array<const int64_t*, K> strides_;
  std::array<int64_t, K> start_;
  std::array<int64_t, K> offsets_;
  long long* index_data() { return index_heap_ ? index_heap_.get() : index_inline_; }

  // For the offsets to stay in registers across next() in a caller's loop, the compiler must see
  // that nothing else can change them: the cursor's address never escapes (the constructor is always
  // inlined; no member points into the cursor), and the index is `long long`, another type than the
  // int64_t (long) offsets, so writing it cannot change an offset (strict aliasing). Without these a
  // Transpose copy paid 4-10 more instructions per row.
  long long index_inline_[Dims::kInline];
  std::unique_ptr<long long[]> index_heap_;
};

// A cursor over all axes of `shape` (rank = shape.size()) or its leading `rank` axes, with operands'
// strides given as Dims (or anything with data()).
//   auto cur = strided_cursor(shape, shape.size() - 1, src_strides, dst_strides);
template <typename... S>
[[gnu::always_inline]] inline StridedCursor<static_cast<int>(sizeof...(S))> strided_cursor(const Dims& shape, size_t rank,
                                                                                         const S&... strides) {
  return StridedCursor<static_cast<int>(sizeof...(S))>(shape.data(), rank, {strides.data()...});
}

}  // namespace nxrt::ir
