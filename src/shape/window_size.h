// The output size of one spatial axis of a forward window op (Conv, ConvInteger, QLinearConv,
// DeformConv, the pools), by the ONNX rules: the one place both the kernels (ops/conv/conv_geometry)
// and shape inference compute it.
#pragma once
#include <cstdint>

namespace nxrt::shape {

enum class WindowAutoPad { kNotSet, kSameUpper, kSameLower, kValid };

struct WindowAxis {
  int64_t out = 0;        // output positions
  int64_t pad_begin = 0;  // the pads in effect (auto_pad SAME_* computes them; VALID zeroes them)
  int64_t pad_end = 0;
  bool fits = true;       // false: the dilated window is larger than the padded input (`out` is then < 1)
};

// in: the input's size on the axis; pads as given (ignored unless kNotSet). ceil_mode (the pools): the
// last window may run past the end, but must start inside the input or the left pad.
WindowAxis window_axis(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                       int64_t pad_end, bool ceil_mode, WindowAutoPad auto_pad);

}  // namespace nxrt::shape
