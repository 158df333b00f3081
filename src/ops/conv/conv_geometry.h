// Shared pieces of the conv / pooling family: attribute parsing, output-shape and padding rules, and
// the 3-D-normalized geometry (1-D and 2-D problems are run as 3-D with leading size-1 axes).
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/common.h"
#include "shape/window_size.h"

namespace nxrt::ops {

using AutoPad = shape::WindowAutoPad;  // kNotSet, kSameUpper, kSameLower, kValid

// Geometry of one conv/pool problem, spatial axes normalized to 3 (leading axes size 1).
struct Geom3 {
  int nsp = 0;              // real number of spatial axes (1..3)
  int64_t in[3] = {1, 1, 1};
  int64_t out[3] = {1, 1, 1};
  int64_t k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1};
  int64_t d[3] = {1, 1, 1};
  int64_t pb[3] = {0, 0, 0};  // pad at the beginning
  int64_t pe[3] = {0, 0, 0};  // pad at the end
  int64_t in_size() const { return in[0] * in[1] * in[2]; }
  int64_t out_size() const { return out[0] * out[1] * out[2]; }
  int64_t kvol() const { return k[0] * k[1] * k[2]; }
  // Sets axis j (0..2 of the normalized three).
  void set_axis(size_t j, int64_t in_, int64_t out_, int64_t k_, int64_t s_, int64_t d_, int64_t pb_, int64_t pe_) {
    in[j] = in_, out[j] = out_, k[j] = k_, s[j] = s_, d[j] = d_, pb[j] = pb_, pe[j] = pe_;
  }
};

// Count of a window's taps start + t * d (t in [0, k)) inside [lo, hi): the divisor of an average
// pool's output along one axis ([0, n) without pads; [-pad_begin, n + pad_end) counting them).
inline int64_t taps_inside(int64_t start, int64_t k, int64_t d, int64_t lo, int64_t hi) {
  int64_t n = 0;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t p = start + t * d;
    n += (p >= lo && p < hi) ? 1 : 0;
  }
  return n;
}

// The window attributes shared by Conv, ConvTranspose and the pools.
struct WindowAttrs {
  AutoPad auto_pad = AutoPad::kNotSet;
  std::vector<int64_t> kernel_shape;  // may be empty (conv: inferred from W)
  std::vector<int64_t> strides, dilations, pads;
  bool ceil_mode = false;
  // Reads auto_pad, kernel_shape, strides, dilations, pads (and ceil_mode when `with_ceil`), each named
  // with `prefix` in front (nxrt::ConvMaxPool's pool attributes: "pool_").
  Status parse(const ep::KernelInfo& info, bool with_ceil, const std::string& prefix = "");
};

// Fills g (in, k, s, d, pads, out) for a forward window op (Conv, pools), each axis by
// shape::window_axis (the rule shape inference uses too). `spatial_in` are the input's spatial dims,
// `kernel` the kernel's. Errors name the shapes.
Status forward_geometry(const WindowAttrs& a, const Dims& spatial_in, const Dims& kernel, Geom3* g);

// Output shape [N, C, out...] for the real spatial axes of g.
Dims geom_output_shape(int64_t n, int64_t c, const Geom3& g);

// Element conversion between storage type T and compute type CT (reduced floats go through float).
template <typename CT, typename T>
inline CT to_ct(T v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<CT>(static_cast<float>(v));
  } else {
    return static_cast<CT>(v);
  }
}
template <typename T, typename CT>
inline T from_ct(CT v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}
template <typename T, typename CT>
inline void convert_buffer(const T* src, CT* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = to_ct<CT>(src[i]);
}

}  // namespace nxrt::ops
