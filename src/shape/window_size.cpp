#include "shape/window_size.h"

#include <algorithm>

namespace nxrt::shape {

namespace {
int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
}  // namespace

WindowAxis window_axis(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, int64_t pad_begin,
                       int64_t pad_end, bool ceil_mode, WindowAutoPad auto_pad) {
  const int64_t dk = (kernel - 1) * dilation + 1;
  WindowAxis r;
  switch (auto_pad) {
    case WindowAutoPad::kSameUpper:
    case WindowAutoPad::kSameLower: {
      r.out = (in + stride - 1) / stride;
      const int64_t total = std::max<int64_t>(0, (r.out - 1) * stride + dk - in);
      const int64_t small = total / 2;
      r.pad_begin = auto_pad == WindowAutoPad::kSameUpper ? small : total - small;
      r.pad_end = total - r.pad_begin;
      return r;
    }
    case WindowAutoPad::kValid: {
      const int64_t span = in - dk;
      r.fits = span >= 0;
      r.out = (ceil_mode ? -floor_div(-span, stride) : floor_div(span, stride)) + 1;
      return r;
    }
    case WindowAutoPad::kNotSet:
      break;
  }
  r.pad_begin = pad_begin;
  r.pad_end = pad_end;
  const int64_t span = in + pad_begin + pad_end - dk;
  r.fits = span >= 0;
  r.out = (ceil_mode ? -floor_div(-span, stride) : floor_div(span, stride)) + 1;
  if (ceil_mode && (r.out - 1) * stride >= in + pad_begin) --r.out;
  return r;
}

}  // namespace nxrt::shape
