// Resize (opsets 10, 11, 13, 18, 19) and Upsample (1, 7, 9).
//
// Resizing is separable: each resized axis gets a plan (for every output coordinate, the input indices
// and weights of its taps, or "extrapolate"), and the plans are applied one axis at a time over a
// double buffer. Coordinates, tap positions, coefficients (nearest / linear / cubic, antialiased or not,
// exclude_outside) follow the ONNX operator definition and its reference implementation.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace nxrt::ops {

using ep::KernelContext;

namespace {

// floor/round of a double output size, saturated so an absurd scale gives an error, not UB.
int64_t to_size(double v) {
  if (!(v >= 0)) return -1;
  if (v > 1e15) return int64_t{1} << 51;
  return static_cast<int64_t>(v);
}

enum class Mode { kNearest, kLinear, kCubic };
enum class Coord {
  kHalfPixel, kHalfPixelSymmetric, kPytorchHalfPixel, kAlignCorners, kAsymmetric, kTfCropAndResize, kTfHalfPixelForNn
};
enum class NearestMode { kRoundPreferFloor, kRoundPreferCeil, kFloor, kCeil, kSimple };

struct ResizeParams {
  Mode mode = Mode::kNearest;
  Coord coord = Coord::kHalfPixel;
  NearestMode nearest = NearestMode::kRoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
};

struct AxisPlan {
  int64_t taps = 0;
  std::vector<int64_t> idx;   // out * taps
  std::vector<double> w;      // out * taps
  std::vector<uint8_t> extrap;
};

double cubic_kernel(double x, double A) {
  x = std::fabs(x);
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0.0;
}

AxisPlan plan_axis(const ResizeParams& p, int64_t in, int64_t out, double scale, double roi_start, double roi_end) {
  AxisPlan plan;
  const double out_w = scale * static_cast<double>(in);
  const double in_d = static_cast<double>(in);
  // taps and the first tap's offset from idx0 = ceil(x_ori) - 1
  int64_t taps = 2, first_off = 0;
  const double aa_scale = std::min(scale, 1.0);
  if (p.mode == Mode::kLinear && p.antialias) {
    const int64_t start = static_cast<int64_t>(std::floor(-1.0 / aa_scale)) + 1;
    taps = 2 - 2 * start;
    first_off = start;
  } else if (p.mode == Mode::kCubic && p.antialias) {
    const int64_t start = static_cast<int64_t>(std::floor(-2.0 / aa_scale)) + 1;
    taps = 2 - 2 * start;
    first_off = start;
  } else if (p.mode == Mode::kCubic) {
    taps = 4;
    first_off = -1;
  } else if (p.mode == Mode::kNearest) {
    taps = 1;
  }
  plan.taps = taps;
  plan.idx.assign(static_cast<size_t>(out * taps), 0);
  plan.w.assign(static_cast<size_t>(out * taps), 0.0);
  plan.extrap.assign(static_cast<size_t>(out), 0);
  std::vector<double> c(static_cast<size_t>(taps));
  for (int64_t x = 0; x < out; ++x) {
    const double xd = static_cast<double>(x);
    double xo = 0;
    switch (p.coord) {
      case Coord::kAlignCorners: xo = out_w == 1 ? 0.0 : xd * (in_d - 1) / (out_w - 1); break;
      case Coord::kAsymmetric: xo = xd / scale; break;
      case Coord::kTfCropAndResize:
        xo = out_w == 1 ? (roi_end - roi_start) * (in_d - 1) / 2 : xd * (roi_end - roi_start) * (in_d - 1) / (out_w - 1);
        xo += roi_start * (in_d - 1);
        if (xo < 0 || xo > in_d - 1) {
          plan.extrap[x] = 1;
          continue;
        }
        break;
      case Coord::kPytorchHalfPixel: xo = out_w == 1 ? -0.5 : (xd + 0.5) / scale - 0.5; break;
      case Coord::kHalfPixel: xo = (xd + 0.5) / scale - 0.5; break;
      case Coord::kTfHalfPixelForNn: xo = (xd + 0.5) / scale; break;
      case Coord::kHalfPixelSymmetric: {
        const double adjustment = static_cast<double>(out) / out_w;
        const double center = in_d / 2;
        xo = center * (1 - adjustment) + (xd + 0.5) / scale - 0.5;
        break;
      }
    }
    int64_t* ix = plan.idx.data() + x * taps;
    double* wx = plan.w.data() + x * taps;
    if (p.mode == Mode::kNearest) {
      int64_t k;
      if (p.nearest == NearestMode::kSimple) {
        k = scale < 1 ? static_cast<int64_t>(std::ceil(xo)) : static_cast<int64_t>(std::floor(xo));
      } else {
        const double fl = std::floor(xo);
        const bool integer = fl == xo;
        const int64_t idx0 = static_cast<int64_t>(std::ceil(xo)) - 1;
        const double ratio = integer ? 1.0 : xo - fl;
        bool take_upper;
        if (integer) {
          take_upper = true;
        } else {
          switch (p.nearest) {
            case NearestMode::kRoundPreferFloor: take_upper = ratio > 0.5; break;
            case NearestMode::kRoundPreferCeil: take_upper = ratio >= 0.5; break;
            case NearestMode::kFloor: take_upper = false; break;
            default: take_upper = true; break;
          }
        }
        k = idx0 + (take_upper ? 1 : 0);
      }
      ix[0] = std::clamp<int64_t>(k, 0, in - 1);
      wx[0] = 1.0;
      continue;
    }
    const double fl = std::floor(xo);
    const bool integer = fl == xo;
    const int64_t idx0 = static_cast<int64_t>(std::ceil(xo)) - 1;
    const double ratio = integer ? 1.0 : xo - fl;
    if (p.mode == Mode::kLinear && !p.antialias) {
      c[0] = 1 - ratio;
      c[1] = ratio;
    } else if (p.mode == Mode::kCubic && !p.antialias) {
      const double A = p.cubic_a;
      c[0] = cubic_kernel(ratio + 1, A);
      c[1] = cubic_kernel(ratio, A);
      c[2] = cubic_kernel(1 - ratio, A);
      c[3] = cubic_kernel(2 - ratio, A);
    } else {
      double sum = 0;
      for (int64_t t = 0; t < taps; ++t) {
        const double arg = (static_cast<double>(first_off + t) - ratio) * aa_scale;
        c[t] = p.mode == Mode::kLinear ? std::clamp(1 - std::fabs(arg), 0.0, 1.0) : cubic_kernel(arg, p.cubic_a);
        sum += c[t];
      }
      if (sum != 0) {
        for (auto& v : c) v /= sum;
      }
    }
    if (p.exclude_outside) {
      double sum = 0;
      for (int64_t t = 0; t < taps; ++t) {
        const int64_t k = idx0 + first_off + t;
        if (k < 0 || k >= in) c[t] = 0;
        sum += c[t];
      }
      if (sum != 0) {
        for (auto& v : c) v /= sum;
      }
    }
    for (int64_t t = 0; t < taps; ++t) {
      ix[t] = std::clamp<int64_t>(idx0 + first_off + t, 0, in - 1);
      wx[t] = c[t];
    }
  }
  return plan;
}

template <typename A, typename S>
inline A load_as(S v) {
  if constexpr (std::is_same_v<S, Float16> || std::is_same_v<S, BFloat16>) {
    return static_cast<A>(static_cast<float>(v));
  } else {
    return static_cast<A>(v);
  }
}
template <typename D, typename A>
inline D store_as(A v) {
  if constexpr (std::is_same_v<D, A>) {
    return v;
  } else {
    return from_double<D>(static_cast<double>(v));
  }
}

// Applies one axis plan: src has shape [outer, in, inner], dst [outer, out, inner]; accumulates in A.
template <typename A, typename S, typename D>
void apply_plan(const AxisPlan& plan, const S* src, D* dst, int64_t outer, int64_t in, int64_t out, int64_t inner,
                double extrap, ep::ThreadPool& pool) {
  const int64_t taps = plan.taps;
  std::vector<A> w(plan.w.size());
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<A>(plan.w[i]);
  const int64_t* ix = plan.idx.data();
  const D ev = store_as<D, A>(static_cast<A>(extrap));
  auto body = [&](int64_t ob, int64_t oe) {
    std::vector<A> acc(static_cast<size_t>(inner > 1 ? inner : 0));
    for (int64_t o = ob; o < oe; ++o) {
      const S* s = src + o * in * inner;
      D* d = dst + o * out * inner;
      if (inner == 1) {
        for (int64_t x = 0; x < out; ++x) {
          if (plan.extrap[x]) {
            d[x] = ev;
            continue;
          }
          A v = 0;
          for (int64_t t = 0; t < taps; ++t) v += w[x * taps + t] * load_as<A>(s[ix[x * taps + t]]);
          d[x] = store_as<D, A>(v);
        }
        continue;
      }
      for (int64_t x = 0; x < out; ++x) {
        D* dr = d + x * inner;
        if (plan.extrap[x]) {
          std::fill(dr, dr + inner, ev);
          continue;
        }
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t t = 0; t < taps; ++t) {
          const A wt = w[x * taps + t];
          if (wt == A(0)) continue;
          const S* sr = s + ix[x * taps + t] * inner;
          for (int64_t i = 0; i < inner; ++i) acc[i] += wt * load_as<A>(sr[i]);
        }
        for (int64_t i = 0; i < inner; ++i) dr[i] = store_as<D, A>(acc[i]);
      }
    }
  };
  const int64_t per = std::max<int64_t>(1, out * inner * taps);
  pool.parallel_for(outer, std::max<int64_t>(1, (int64_t{1} << 15) / per), body);
}


Status run_resize(KernelContext& ctx, const Tensor& x, const ResizeParams& p, const std::vector<double>& scales,
                  const Dims& out_shape, const std::vector<double>& roi) {
  const int64_t r = x.rank();
  for (double sc : scales) {
    if (!(sc > 0) || !std::isfinite(sc)) return ctx.error("scales must be positive and finite");
  }
  if (!shape_is_sane(out_shape)) {
    return ctx.error("output shape " + shape_to_string(out_shape) + " is invalid or too large for input " +
                     x.describe());
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  if (out->numel() == 0) return Status::Ok();
  if (x.numel() == 0) return ctx.error("cannot resize the empty input " + x.describe() + " to " + shape_to_string(out_shape));
  if (p.mode == Mode::kNearest && p.coord != Coord::kTfCropAndResize) {
    // Nearest is a pure gather: one source index per output coordinate and axis, elements copied as bytes.
    std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
    for (int64_t a = 0; a < r; ++a) {
      if (out_shape[a] == x.shape()[a] && scales[a] == 1.0) {
        maps[a].resize(static_cast<size_t>(out_shape[a]));
        std::iota(maps[a].begin(), maps[a].end(), 0);
      } else {
        maps[a] = plan_axis(p, x.shape()[a], out_shape[a], scales[a], 0.0, 1.0).idx;
      }
    }
    if (!gather_axis_maps(x, *out, maps)) return ctx.error("unsupported dtype " + x.describe());
    return Status::Ok();
  }
  // Axes that change; each gets one separable pass.
  std::vector<int64_t> passes;
  for (int64_t a = 0; a < r; ++a) {
    const bool identity = out_shape[a] == x.shape()[a] && scales[a] == 1.0 && p.coord != Coord::kTfCropAndResize;
    if (!identity) passes.push_back(a);
  }
  if (passes.empty()) {
    copy_run(x, 0, *out, 0, x.numel());
    return Status::Ok();
  }
  return dispatch_numeric(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        // float accumulation for float / half types and narrow integers; double otherwise.
        using A = std::conditional_t<std::is_same_v<T, double> || (std::is_integral_v<T> && sizeof(T) >= 4),
                                     double, float>;
        std::vector<A> cur, next;
        Dims shape = x.shape();
        for (size_t k = 0; k < passes.size(); ++k) {
          const int64_t a = passes[k];
          AxisPlan plan = plan_axis(p, x.shape()[a], out_shape[a], scales[a], roi[a], roi[a + r]);
          int64_t outer = 1, inner = 1;
          for (int64_t i = 0; i < r; ++i) {
            if (i < a) outer *= shape[i];
            if (i > a) inner *= shape[i];
          }
          const bool first = k == 0, last = k + 1 == passes.size();
          if (!last) next.assign(static_cast<size_t>(outer * out_shape[a] * inner), A(0));
          if (first && last) {
            apply_plan<A>(plan, x.data<T>(), out->data<T>(), outer, shape[a], out_shape[a], inner, p.extrapolation,
                          ctx.pool());
          } else if (first) {
            apply_plan<A>(plan, x.data<T>(), next.data(), outer, shape[a], out_shape[a], inner, p.extrapolation,
                          ctx.pool());
          } else if (last) {
            apply_plan<A>(plan, cur.data(), out->data<T>(), outer, shape[a], out_shape[a], inner, p.extrapolation,
                          ctx.pool());
          } else {
            apply_plan<A>(plan, cur.data(), next.data(), outer, shape[a], out_shape[a], inner, p.extrapolation,
                          ctx.pool());
          }
          cur.swap(next);
          shape[a] = out_shape[a];
        }
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported dtype " + x.describe()); });
}

Result<std::vector<double>> float_input(KernelContext& ctx, size_t i, const char* name) {
  auto v = read_double_values(ctx.input(i));
  if (!v.ok()) return ctx.error(std::string(name) + " must be numeric, got " + ctx.input(i).describe());
  return v;
}

bool present(KernelContext& ctx, size_t i) { return ctx.has_input(i) && ctx.input(i).numel() > 0; }

Status resize_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  const auto& info = ctx.info();
  const int64_t opset = info.opset();
  const int64_t r = x.rank();
  ResizeParams p;
  const std::string mode = info.attr_string("mode", "nearest");
  if (mode == "nearest") p.mode = Mode::kNearest;
  else if (mode == "linear") p.mode = Mode::kLinear;
  else if (mode == "cubic" && opset >= 11) p.mode = Mode::kCubic;
  else return ctx.error("unsupported mode '" + mode + "'", StatusCode::kInvalidModel);
  std::vector<double> scales_in, roi_in;
  std::vector<int64_t> sizes_in;
  if (opset < 11) {
    p.coord = Coord::kAsymmetric;
    p.nearest = NearestMode::kSimple;
    if (!present(ctx, 1)) return ctx.error("input 'scales' is required", StatusCode::kInvalidModel);
    NXRT_ASSIGN_OR_RETURN(scales_in, float_input(ctx, 1, "scales"));
  } else {
    const std::string ct = info.attr_string("coordinate_transformation_mode", "half_pixel");
    if (ct == "half_pixel") p.coord = Coord::kHalfPixel;
    else if (ct == "half_pixel_symmetric" && opset >= 19) p.coord = Coord::kHalfPixelSymmetric;
    else if (ct == "pytorch_half_pixel") p.coord = Coord::kPytorchHalfPixel;
    else if (ct == "align_corners") p.coord = Coord::kAlignCorners;
    else if (ct == "asymmetric") p.coord = Coord::kAsymmetric;
    else if (ct == "tf_crop_and_resize") p.coord = Coord::kTfCropAndResize;
    else if (ct == "tf_half_pixel_for_nn" && opset < 13) p.coord = Coord::kTfHalfPixelForNn;
    else return ctx.error("unsupported coordinate_transformation_mode '" + ct + "'", StatusCode::kInvalidModel);
    const std::string nm = info.attr_string("nearest_mode", "round_prefer_floor");
    if (nm == "round_prefer_floor") p.nearest = NearestMode::kRoundPreferFloor;
    else if (nm == "round_prefer_ceil") p.nearest = NearestMode::kRoundPreferCeil;
    else if (nm == "floor") p.nearest = NearestMode::kFloor;
    else if (nm == "ceil") p.nearest = NearestMode::kCeil;
    else return ctx.error("unsupported nearest_mode '" + nm + "'", StatusCode::kInvalidModel);
    p.cubic_a = info.attr_float("cubic_coeff_a", -0.75f);
    p.exclude_outside = info.attr_int("exclude_outside", 0) != 0;
    p.extrapolation = info.attr_float("extrapolation_value", 0.0f);
    if (opset >= 18) p.antialias = info.attr_int("antialias", 0) != 0;
    if (p.antialias && p.mode == Mode::kNearest) p.antialias = false;
    if (present(ctx, 1)) {
      NXRT_ASSIGN_OR_RETURN(roi_in, float_input(ctx, 1, "roi"));
    }
    if (present(ctx, 2)) {
      NXRT_ASSIGN_OR_RETURN(scales_in, float_input(ctx, 2, "scales"));
    }
    if (present(ctx, 3)) {
      auto s = read_indices(ctx.input(3), "sizes");
      if (!s.ok()) return ctx.error(s.status().message());
      sizes_in = std::move(s).value();
    }
    if (scales_in.empty() == sizes_in.empty()) {
      return ctx.error("exactly one of 'scales' and 'sizes' must be given");
    }
  }
  std::vector<int64_t> axes;
  if (opset >= 18 && info.has_attr("axes")) {
    axes = info.attr_ints("axes");
    std::vector<bool> seen(static_cast<size_t>(r), false);
    for (auto& a : axes) {
      const int64_t a0 = a;
      if (!normalize_axis(&a, r) || seen[a]) {
        return ctx.error("axes " + ints_to_string(info.attr_ints("axes")) + " invalid for input " + x.describe() +
                         " (axis " + std::to_string(a0) + ")", StatusCode::kInvalidModel);
      }
      seen[a] = true;
    }
  } else {
    axes.resize(static_cast<size_t>(r));
    std::iota(axes.begin(), axes.end(), 0);
  }
  const size_t na = axes.size();
  std::vector<double> scales(static_cast<size_t>(r), 1.0);
  Dims out_shape = x.shape();
  std::vector<double> roi(static_cast<size_t>(2 * r));
  for (int64_t i = 0; i < r; ++i) {
    roi[i] = 0;
    roi[i + r] = 1;
  }
  if (!roi_in.empty() && p.coord == Coord::kTfCropAndResize) {
    if (roi_in.size() != 2 * na) {
      return ctx.error("roi has " + std::to_string(roi_in.size()) + " values, expected " + std::to_string(2 * na));
    }
    for (size_t k = 0; k < na; ++k) {
      roi[axes[k]] = roi_in[k];
      roi[axes[k] + r] = roi_in[k + na];
    }
  }
  if (!scales_in.empty()) {
    if (scales_in.size() != na) {
      return ctx.error("scales has " + std::to_string(scales_in.size()) + " values, expected " + std::to_string(na) +
                       " for input " + x.describe());
    }
    for (size_t k = 0; k < na; ++k) {
      const double s = scales_in[k];
      if (!(s > 0)) return ctx.error("scales must be positive, got " + std::to_string(s));
      scales[axes[k]] = s;
      out_shape[axes[k]] = to_size(std::floor(s * static_cast<double>(x.shape()[axes[k]])));
    }
  } else {
    if (sizes_in.size() != na) {
      return ctx.error("sizes " + ints_to_string(sizes_in) + " must have " + std::to_string(na) + " values for input " +
                       x.describe());
    }
    for (size_t k = 0; k < na; ++k) {
      if (sizes_in[k] < 0) return ctx.error("sizes " + ints_to_string(sizes_in) + " has a negative value");
      const int64_t in = x.shape()[axes[k]];
      scales[axes[k]] = in == 0 ? 1.0 : static_cast<double>(sizes_in[k]) / static_cast<double>(in);
      out_shape[axes[k]] = sizes_in[k];
    }
    const std::string policy = opset >= 18 ? info.attr_string("keep_aspect_ratio_policy", "stretch") : "stretch";
    if (policy != "stretch") {
      if (policy != "not_larger" && policy != "not_smaller") {
        return ctx.error("unsupported keep_aspect_ratio_policy '" + policy + "'", StatusCode::kInvalidModel);
      }
      double s = policy == "not_larger" ? 1e300 : -1e300;
      for (int64_t a : axes) s = policy == "not_larger" ? std::min(s, scales[a]) : std::max(s, scales[a]);
      for (int64_t a : axes) {
        scales[a] = s;
        out_shape[a] = to_size(s * static_cast<double>(x.shape()[a]) + 0.5);
      }
    }
  }
  return run_resize(ctx, x, p, scales, out_shape, roi);
}

Status upsample_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  const auto& info = ctx.info();
  const int64_t opset = info.opset();
  const int64_t r = x.rank();
  ResizeParams p;
  p.coord = Coord::kAsymmetric;
  p.nearest = NearestMode::kSimple;
  const std::string mode = info.attr_string("mode", "nearest");
  if (mode == "nearest") p.mode = Mode::kNearest;
  else if (mode == "linear" || mode == "bilinear") p.mode = Mode::kLinear;
  else return ctx.error("unsupported mode '" + mode + "'", StatusCode::kInvalidModel);
  std::vector<double> scales;
  if (opset < 7) {
    if (r != 4) return ctx.error("input " + x.describe() + " must be 4-D");
    scales = {1.0, 1.0, info.attr_float("height_scale", 1.0f), info.attr_float("width_scale", 1.0f)};
  } else if (opset < 9) {
    for (float f : info.attr_floats("scales")) scales.push_back(f);
  } else {
    if (!ctx.has_input(1)) return ctx.error("input 'scales' is required", StatusCode::kInvalidModel);
    NXRT_ASSIGN_OR_RETURN(scales, float_input(ctx, 1, "scales"));
  }
  if (static_cast<int64_t>(scales.size()) != r) {
    return ctx.error("scales has " + std::to_string(scales.size()) + " values for input " + x.describe());
  }
  Dims out_shape = x.shape();
  for (int64_t a = 0; a < r; ++a) {
    if (!(scales[a] >= 1)) return ctx.error("Upsample scales must be >= 1, got " + std::to_string(scales[a]));
    out_shape[a] = to_size(std::floor(scales[a] * static_cast<double>(x.shape()[a])));
  }
  std::vector<double> roi(static_cast<size_t>(2 * r), 0.0);
  return run_resize(ctx, x, p, scales, out_shape, roi);
}

}  // namespace

void register_image_resize_ops(ep::KernelRegistry& r) {
  r.add_fn("Resize", &resize_fn);
  r.add_fn("Upsample", &upsample_fn);
}

}  // namespace nxrt::ops
