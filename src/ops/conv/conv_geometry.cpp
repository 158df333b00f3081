#include "ops/conv/conv_geometry.h"

namespace nxrt::ops {

namespace {
std::string ints_str(const std::vector<int64_t>& v) { return shape_to_string(v); }
}  // namespace

Status WindowAttrs::parse(const ep::KernelInfo& info, bool with_ceil, const std::string& prefix) {
  auto name = [&](const char* n) { return prefix + n; };
  std::string ap = info.attr_string(name("auto_pad"), "NOTSET");
  if (ap == "NOTSET" || ap.empty()) {
    auto_pad = AutoPad::kNotSet;
  } else if (ap == "SAME_UPPER") {
    auto_pad = AutoPad::kSameUpper;
  } else if (ap == "SAME_LOWER") {
    auto_pad = AutoPad::kSameLower;
  } else if (ap == "VALID") {
    auto_pad = AutoPad::kValid;
  } else {
    return info.error(name("auto_pad") + " must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + ap + "'");
  }
  kernel_shape = info.attr_ints(name("kernel_shape"));
  strides = info.attr_ints(name("strides"));
  dilations = info.attr_ints(name("dilations"));
  pads = info.attr_ints(name("pads"));
  ceil_mode = with_ceil && info.attr_int(name("ceil_mode"), 0) != 0;
  for (int64_t v : kernel_shape)
    if (v < 1) return info.error(name("kernel_shape") + " values must be >= 1, got " + ints_str(kernel_shape));
  for (int64_t v : strides)
    if (v < 1) return info.error(name("strides") + " must be >= 1, got " + ints_str(strides));
  for (int64_t v : dilations)
    if (v < 1) return info.error(name("dilations") + " must be >= 1, got " + ints_str(dilations));
  for (int64_t v : pads)
    if (v < 0) return info.error(name("pads") + " must be >= 0, got " + ints_str(pads));
  return Status::Ok();
}

Status forward_geometry(const WindowAttrs& a, const Dims& spatial_in, const Dims& kernel, Geom3* g) {
  const size_t n = spatial_in.size();
  if (n < 1 || n > 3) {
    return not_implemented("only 1 to 3 spatial axes are supported, input has " + std::to_string(n));
  }
  if (kernel.size() != n) {
    return invalid_argument("kernel has " + std::to_string(kernel.size()) + " spatial axes " + ints_str(kernel) +
                            " but the input has " + std::to_string(n) + " " + ints_str(spatial_in));
  }
  if (!a.strides.empty() && a.strides.size() != n)
    return invalid_argument("strides " + ints_str(a.strides) + " must have " + std::to_string(n) + " values");
  if (!a.dilations.empty() && a.dilations.size() != n)
    return invalid_argument("dilations " + ints_str(a.dilations) + " must have " + std::to_string(n) + " values");
  if (a.auto_pad == AutoPad::kNotSet && !a.pads.empty() && a.pads.size() != 2 * n)
    return invalid_argument("pads " + ints_str(a.pads) + " must have " + std::to_string(2 * n) + " values");
  *g = Geom3();
  g->nsp = static_cast<int>(n);
  const size_t off = 3 - n;
  for (size_t i = 0; i < n; ++i) {
    const size_t j = off + i;
    const int64_t in = spatial_in[i];
    const int64_t k = kernel[i];
    if (k < 1) return invalid_argument("kernel dims must be >= 1, got " + ints_str(kernel));
    const int64_t s = a.strides.empty() ? 1 : a.strides[i];
    const int64_t d = a.dilations.empty() ? 1 : a.dilations[i];
    const bool given = a.auto_pad == AutoPad::kNotSet && !a.pads.empty();
    const shape::WindowAxis ax = shape::window_axis(in, k, s, d, given ? a.pads[i] : 0, given ? a.pads[i + n] : 0,
                                                    a.ceil_mode, a.auto_pad);
    if (!ax.fits) {
      return invalid_argument("window " + std::to_string((k - 1) * d + 1) + " (kernel " + ints_str(kernel) +
                              ", dilations) is larger than the " +
                              (a.auto_pad == AutoPad::kValid ? "input " + ints_str(spatial_in) + " with auto_pad VALID"
                                                             : "padded input " + ints_str(spatial_in)));
    }
    g->set_axis(j, in, ax.out, k, s, d, ax.pad_begin, ax.pad_end);
  }
  return Status::Ok();
}

Dims geom_output_shape(int64_t n, int64_t c, const Geom3& g) {
  Dims out{n, c};
  for (int i = 3 - g.nsp; i < 3; ++i) out.push_back(g.out[i]);
  return out;
}

}  // namespace nxrt::ops
