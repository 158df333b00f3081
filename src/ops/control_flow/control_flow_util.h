// Slicing a tensor along an axis and stacking slices back: shared by Loop, Scan and the sequence ops.
#pragma once
#include <vector>

#include "nxrt/tensor.h"

namespace nxrt::ops {

// The index-th slice of `t` along `axis` (rank drops by one), copied into a new contiguous tensor.
Tensor take_slice(const Tensor& t, int64_t axis, int64_t index);
// Slices [begin, end) along `axis` (rank kept), copied.
Tensor take_range(const Tensor& t, int64_t axis, int64_t begin, int64_t end);
// Stacks equal-shaped tensors along a new axis `axis` of the result.
Result<Tensor> stack_tensors(const std::vector<Tensor>& parts, int64_t axis);
// Concatenates along an existing axis.
Result<Tensor> concat_tensors(const std::vector<Tensor>& parts, int64_t axis);

}  // namespace nxrt::ops
