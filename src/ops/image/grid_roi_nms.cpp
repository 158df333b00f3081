// Image ops besides Resize: GridSample (16, 20, 22), AffineGrid (20), RoiAlign (10, 16, 22),
// NonMaxSuppression (10, 11). Semantics follow the ONNX operator definitions (PyTorch-compatible grid
// sampling, Caffe2-style RoiAlign sampling).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace nxrt::ops {

using ep::KernelContext;

namespace {

std::string itos(int64_t v) { return std::to_string(v); }

// ------------------------------------------------------------------------------------------------
// GridSample

double gs_reflect(double x, double lo, double hi) {
  const double rng = hi - lo;
  if (rng <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const double n = std::floor(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const double n = std::floor(dx / rng);
    const double r = dx - n * rng;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

void cubic_coeffs(double t, double* c) {
  const double A = -0.75;
  t = std::fabs(t);
  c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
  c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  c[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
  c[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
}

Status grid_sample_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& grid, ctx.required_tensor(1, "grid"));
  const auto& info = ctx.info();
  std::string mode = info.attr_string("mode", info.opset() >= 20 ? "linear" : "bilinear");
  if (mode == "bilinear") mode = "linear";
  if (mode == "bicubic") mode = "cubic";
  const std::string pad = info.attr_string("padding_mode", "zeros");
  const bool align = info.attr_int("align_corners", 0) != 0;
  if (mode != "linear" && mode != "nearest" && mode != "cubic") {
    return ctx.error("unsupported mode '" + mode + "'", StatusCode::kInvalidModel);
  }
  if (pad != "zeros" && pad != "border" && pad != "reflection") {
    return ctx.error("unsupported padding_mode '" + pad + "'", StatusCode::kInvalidModel);
  }
  const int64_t nd = x.rank() - 2;
  if (nd < 1 || grid.rank() != nd + 2 || grid.dim(0) != x.dim(0) || grid.dim(-1) != nd) {
    return ctx.error("X " + x.describe() + " and grid " + grid.describe() +
                     " must be [N, C, D1..Dr] and [N, O1..Or, r]");
  }
  if (mode == "cubic" && nd != 2) return ctx.error("cubic mode supports only 4-D input, got " + x.describe());
  const int64_t N = x.dim(0), C = x.dim(1);
  Dims out_shape = {N, C};
  int64_t npts = 1;
  for (int64_t i = 1; i <= nd; ++i) {
    out_shape.push_back(grid.dim(i));
    npts *= grid.dim(i);
  }
  Dims dims(x.shape().begin() + 2, x.shape().end());
  int64_t img = 1;
  for (int64_t d : dims) img *= d;
  const Dims st = contiguous_strides(dims);
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  if (out->numel() == 0) return Status::Ok();
  if (img == 0) return ctx.error("X " + x.describe() + " has an empty spatial dim");
  auto gv = read_double_values(grid);
  if (!gv.ok()) return ctx.error("grid must be float, got " + grid.describe());
  const int taps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  return dispatch_float(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        const T* src = x.data<T>();
        T* dst = out->data<T>();
        std::vector<int64_t> idx(static_cast<size_t>(nd * taps));
        std::vector<double> w(static_cast<size_t>(nd * taps));
        const Dims tap_shape(static_cast<size_t>(nd), taps);  // one tap per spatial dim per term
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t p = 0; p < npts; ++p) {
            const double* g = gv->data() + (n * npts + p) * nd;
            for (int64_t d = 0; d < nd; ++d) {
              const double len = static_cast<double>(dims[d]);
              const double nv = g[nd - 1 - d];  // grid holds (x, y, ...) = reversed dims
              double v = static_cast<float>(align ? (nv + 1) / 2.0 * (len - 1) : ((nv + 1) * len - 1) / 2.0);
              const double lo = align ? 0.0 : -0.5, hi = align ? len - 1 : len - 0.5;
              if (mode == "nearest") {
                v = std::nearbyint(v);  // round half to even (what the conformance data uses, 2-D and 3-D)
              }
              if (std::isnan(v)) v = -2.0;  // NaN samples nothing (zeros) / the first pixel (border, reflection)
              if (v < lo || v > hi) {
                if (pad == "border") v = std::clamp(v, 0.0, len - 1);
                else if (pad == "reflection" && std::isfinite(v)) v = static_cast<float>(gs_reflect(v, lo, hi));
              }
              v = std::clamp(v, -len - 4.0, 2.0 * len + 4.0);  // far outside: same taps, no int overflow
              // taps
              int64_t base;
              double c[4];
              if (mode == "nearest") {
                base = static_cast<int64_t>(v);
                c[0] = 1;
              } else if (mode == "linear") {
                base = static_cast<int64_t>(std::floor(v));
                c[0] = 1 - (v - static_cast<double>(base));
                c[1] = v - static_cast<double>(base);
              } else {
                const int64_t f = static_cast<int64_t>(std::floor(v));
                base = f - 1;
                cubic_coeffs(v - static_cast<double>(f), c);
              }
              for (int k = 0; k < taps; ++k) {
                int64_t i = base + k;
                if (i < 0 || i >= dims[d]) {
                  if (pad == "zeros") i = -1;
                  else if (pad == "border") i = std::clamp<int64_t>(i, 0, dims[d] - 1);
                  else i = std::clamp<int64_t>(static_cast<int64_t>(gs_reflect(static_cast<double>(i), lo, hi)), 0, dims[d] - 1);
                }
                idx[d * taps + k] = i;
                w[d * taps + k] = c[k];
              }
            }
            for (int64_t ch = 0; ch < C; ++ch) {
              const T* plane = src + (n * C + ch) * img;
              double acc = 0;
              auto t = strided_cursor(tap_shape, tap_shape.size());
              do {
                double wt = 1;
                int64_t off = 0;
                bool zero = false;
                for (int64_t d = 0; d < nd; ++d) {
                  const int64_t k = d * taps + t.index(static_cast<size_t>(d));
                  const int64_t i = idx[k];
                  if (i < 0) {
                    zero = true;
                    break;
                  }
                  wt *= w[k];
                  off += i * st[d];
                }
                if (!zero && wt != 0) acc += wt * to_compute<double>(plane[off]);
              } while (t.next());
              dst[(n * C + ch) * npts + p] = from_double<T>(acc);
            }
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported dtype " + x.describe()); });
}

// ------------------------------------------------------------------------------------------------
// AffineGrid

Status affine_grid_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& theta, ctx.required_tensor(0, "theta"));
  NXRT_ASSIGN_OR_RETURN(const std::vector<int64_t> size, required_indices(ctx, 1, "size"));
  const bool align = ctx.info().attr_int("align_corners", 0) != 0;
  if (size.size() != 4 && size.size() != 5) return ctx.error("size " + ints_to_string(size) + " must have 4 or 5 values");
  const int64_t nd = static_cast<int64_t>(size.size()) - 2;
  const int64_t N = size[0];
  if (theta.rank() != 3 || theta.dim(0) != N || theta.dim(1) != nd || theta.dim(2) != nd + 1) {
    return ctx.error("theta " + theta.describe() + " must be [N, " + itos(nd) + ", " + itos(nd + 1) + "] for size " +
                     ints_to_string(size));
  }
  for (int64_t v : size) {
    if (v < 0) return ctx.error("size " + ints_to_string(size) + " has a negative value");
  }
  Dims out_shape = {N};
  for (int64_t d = 2; d < static_cast<int64_t>(size.size()); ++d) out_shape.push_back(size[d]);
  out_shape.push_back(nd);
  if (!shape_is_sane(out_shape)) return ctx.error("size " + ints_to_string(size) + " is too large");
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, theta.dtype(), out_shape));
  auto th = read_double_values(theta);
  if (!th.ok()) return ctx.error("theta must be float, got " + theta.describe());
  auto coord = [&](int64_t i, int64_t len) -> double {
    if (align) return len <= 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1);
    return (2.0 * static_cast<double>(i) + 1.0) / static_cast<double>(len) - 1.0;
  };
  // spatial dims in order (D,) H, W; base vector (x=W, y=H, z=D, 1)
  std::vector<int64_t> sp(size.begin() + 2, size.end());
  int64_t npts = 1;
  for (int64_t v : sp) npts *= v;
  return dispatch_float(
      theta.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        T* o = out->data<T>();
        std::vector<double> base(static_cast<size_t>(nd + 1));
        for (int64_t n = 0; n < N; ++n) {
          const double* m = th->data() + n * nd * (nd + 1);
          for (int64_t p = 0; p < npts; ++p) {
            int64_t rem = p;
            for (int64_t d = nd - 1; d >= 0; --d) {
              const int64_t i = rem % sp[d];
              rem /= sp[d];
              base[nd - 1 - d] = coord(i, sp[d]);  // W -> base[0], H -> base[1], D -> base[2]
            }
            base[nd] = 1.0;
            for (int64_t r = 0; r < nd; ++r) {
              double acc = 0;
              for (int64_t c = 0; c <= nd; ++c) acc += m[r * (nd + 1) + c] * base[c];
              o[(n * npts + p) * nd + r] = from_double<T>(acc);
            }
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported dtype " + theta.describe()); });
}

// ------------------------------------------------------------------------------------------------
// RoiAlign

Status roi_align_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& rois_t, ctx.required_tensor(1, "rois"));
  NXRT_RETURN_IF_ERROR(ctx.required_tensor(2, "batch_indices").status());
  const auto& info = ctx.info();
  const std::string mode = info.attr_string("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.error("unsupported mode '" + mode + "'", StatusCode::kInvalidModel);
  const int64_t oh = info.attr_int("output_height", 1), ow = info.attr_int("output_width", 1);
  const int64_t sampling = info.attr_int("sampling_ratio", 0);
  const double scale = info.attr_float("spatial_scale", 1.0f);
  const bool half_pixel =
      info.opset() >= 16 && info.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
  if (oh <= 0 || ow <= 0 || sampling < 0) {
    return ctx.error("output_height/output_width must be positive and sampling_ratio >= 0", StatusCode::kInvalidModel);
  }
  if (x.rank() != 4) return ctx.error("X " + x.describe() + " must be 4-D");
  if (rois_t.rank() != 2 || rois_t.dim(1) != 4) return ctx.error("rois " + rois_t.describe() + " must be [num_rois, 4]");
  auto bi = read_indices(ctx.input(2), "batch_indices");
  if (!bi.ok()) return ctx.error(bi.status().message());
  const int64_t R = rois_t.dim(0);
  if (static_cast<int64_t>(bi->size()) != R) {
    return ctx.error("batch_indices has " + itos(bi->size()) + " values for " + itos(R) + " rois");
  }
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  for (int64_t b : *bi) {
    if (b < 0 || b >= N) return ctx.error("batch index " + itos(b) + " out of range for X " + x.describe());
  }
  auto rv = read_double_values(rois_t);
  if (!rv.ok()) return ctx.error("rois must be float, got " + rois_t.describe());
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), {R, C, oh, ow}));
  return dispatch_float(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        const T* src = x.data<T>();
        T* dst = out->data<T>();
        struct Pre { int64_t p[4]; double w[4]; };
        std::vector<Pre> pre;
        for (int64_t r = 0; r < R; ++r) {
          const double* roi = rv->data() + r * 4;
          const double off = half_pixel ? 0.5 : 0.0;
          const double sw = roi[0] * scale - off, sh = roi[1] * scale - off;
          const double ew = roi[2] * scale - off, eh = roi[3] * scale - off;
          double rw = ew - sw, rh = eh - sh;
          if (!half_pixel) {
            rw = std::max(rw, 1.0);
            rh = std::max(rh, 1.0);
          }
          if (!std::isfinite(sh) || !std::isfinite(sw) || !std::isfinite(rh) || !std::isfinite(rw) ||
              rh / static_cast<double>(oh) > 4096 || rw / static_cast<double>(ow) > 4096) {
            return ctx.error("roi " + itos(r) + " has a non-finite or too large extent for X " + x.describe());
          }
          const double bh = rh / static_cast<double>(oh), bw = rw / static_cast<double>(ow);
          const int64_t gh = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rh / static_cast<double>(oh)));
          const int64_t gw = sampling > 0 ? sampling : static_cast<int64_t>(std::ceil(rw / static_cast<double>(ow)));
          const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
          pre.assign(static_cast<size_t>(std::max<int64_t>(0, oh * ow * gh * gw)), Pre{{0, 0, 0, 0}, {0, 0, 0, 0}});
          size_t k = 0;
          for (int64_t ph = 0; ph < oh; ++ph) {
            for (int64_t pw = 0; pw < ow; ++pw) {
              for (int64_t iy = 0; iy < gh; ++iy) {
                const double yy = sh + static_cast<double>(ph) * bh + (static_cast<double>(iy) + 0.5) * bh / static_cast<double>(gh);
                for (int64_t ix = 0; ix < gw; ++ix, ++k) {
                  const double xx = sw + static_cast<double>(pw) * bw + (static_cast<double>(ix) + 0.5) * bw / static_cast<double>(gw);
                  double y = yy, xq = xx;
                  if (!(y >= -1.0 && y <= static_cast<double>(H) && xq >= -1.0 && xq <= static_cast<double>(W))) {
                    continue;  // outside the feature map (or NaN): contributes 0
                  }
                  y = std::max(y, 0.0);
                  xq = std::max(xq, 0.0);
                  int64_t yl = static_cast<int64_t>(y), xl = static_cast<int64_t>(xq), yh, xh;
                  if (yl >= H - 1) {
                    yh = yl = H - 1;
                    y = static_cast<double>(yl);
                  } else {
                    yh = yl + 1;
                  }
                  if (xl >= W - 1) {
                    xh = xl = W - 1;
                    xq = static_cast<double>(xl);
                  } else {
                    xh = xl + 1;
                  }
                  const double ly = y - static_cast<double>(yl), lx = xq - static_cast<double>(xl);
                  const double hy = 1 - ly, hx = 1 - lx;
                  pre[k] = Pre{{yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh}, {hy * hx, hy * lx, ly * hx, ly * lx}};
                }
              }
            }
          }
          for (int64_t c = 0; c < C; ++c) {
            const T* plane = src + ((*bi)[r] * C + c) * H * W;
            size_t q = 0;
            for (int64_t ph = 0; ph < oh; ++ph) {
              for (int64_t pw = 0; pw < ow; ++pw) {
                double val = 0;
                bool first = true;
                for (int64_t s = 0; s < gh * gw; ++s, ++q) {
                  const Pre& e = pre[q];
                  if (mode == "avg") {
                    for (int j = 0; j < 4; ++j) val += e.w[j] * to_compute<double>(plane[e.p[j]]);
                  } else {
                    double m = e.w[0] * to_compute<double>(plane[e.p[0]]);
                    for (int j = 1; j < 4; ++j) m = std::max(m, e.w[j] * to_compute<double>(plane[e.p[j]]));
                    val = first ? m : std::max(val, m);
                    first = false;
                  }
                }
                if (mode == "avg") val /= count;
                dst[((r * C + c) * oh + ph) * ow + pw] = from_double<T>(val);
              }
            }
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported dtype " + x.describe()); });
}

// ------------------------------------------------------------------------------------------------
// NonMaxSuppression

Status nms_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& boxes_t, ctx.required_tensor(0, "boxes"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& scores_t, ctx.required_tensor(1, "scores"));
  if (boxes_t.rank() != 3 || boxes_t.dim(2) != 4 || scores_t.rank() != 3 || scores_t.dim(0) != boxes_t.dim(0) ||
      scores_t.dim(2) != boxes_t.dim(1)) {
    return ctx.error("boxes " + boxes_t.describe() + " and scores " + scores_t.describe() +
                     " must be [B, N, 4] and [B, C, N]");
  }
  int64_t max_out = 0;
  double iou_th = 0, score_th = 0;
  bool has_score_th = false;
  if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
    auto v = read_indices(ctx.input(2), "max_output_boxes_per_class");
    if (!v.ok()) return ctx.error(v.status().message());
    max_out = (*v)[0];
  }
  if (ctx.has_input(3) && ctx.input(3).numel() > 0) {
    auto v = read_double_values(ctx.input(3));
    if (!v.ok()) return ctx.error("iou_threshold must be float");
    iou_th = (*v)[0];
  }
  if (ctx.has_input(4) && ctx.input(4).numel() > 0) {
    auto v = read_double_values(ctx.input(4));
    if (!v.ok()) return ctx.error("score_threshold must be float");
    score_th = (*v)[0];
    has_score_th = true;
  }
  const bool center = ctx.info().attr_int("center_point_box", 0) != 0;
  auto bv = read_double_values(boxes_t);
  auto sv = read_double_values(scores_t);
  if (!bv.ok() || !sv.ok()) return ctx.error("boxes and scores must be float");
  const int64_t B = boxes_t.dim(0), NB = boxes_t.dim(1), C = scores_t.dim(1);
  // Normalized corners (y1, x1, y2, x2) with y1 <= y2, x1 <= x2.
  std::vector<double> corners(static_cast<size_t>(B * NB * 4));
  for (int64_t i = 0; i < B * NB; ++i) {
    const double* b = bv->data() + i * 4;
    double y1, x1, y2, x2;
    if (center) {
      x1 = b[0] - b[2] / 2;
      x2 = b[0] + b[2] / 2;
      y1 = b[1] - b[3] / 2;
      y2 = b[1] + b[3] / 2;
    } else {
      y1 = std::min(b[0], b[2]);
      y2 = std::max(b[0], b[2]);
      x1 = std::min(b[1], b[3]);
      x2 = std::max(b[1], b[3]);
    }
    double* c = corners.data() + i * 4;
    c[0] = y1;
    c[1] = x1;
    c[2] = y2;
    c[3] = x2;
  }
  auto iou = [&](const double* a, const double* b) {
    const double ih = std::min(a[2], b[2]) - std::max(a[0], b[0]);
    const double iw = std::min(a[3], b[3]) - std::max(a[1], b[1]);
    if (ih <= 0 || iw <= 0) return 0.0;
    const double inter = ih * iw;
    const double ua = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return ua <= 0 ? 0.0 : inter / ua;
  };
  std::vector<int64_t> sel;
  if (max_out > 0) {
    std::vector<int64_t> cand, kept;
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t c = 0; c < C; ++c) {
        const double* s = sv->data() + (b * C + c) * NB;
        cand.clear();
        for (int64_t i = 0; i < NB; ++i) {
          if (std::isnan(s[i])) continue;
          if (!has_score_th || s[i] > score_th) cand.push_back(i);
        }
        std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t q) { return s[a] > s[q]; });
        kept.clear();
        for (int64_t i : cand) {
          if (static_cast<int64_t>(kept.size()) >= max_out) break;
          const double* bi = corners.data() + (b * NB + i) * 4;
          bool ok = true;
          for (int64_t k : kept) {
            if (iou(bi, corners.data() + (b * NB + k) * 4) > iou_th) {
              ok = false;
              break;
            }
          }
          if (ok) kept.push_back(i);
        }
        for (int64_t k : kept) {
          sel.push_back(b);
          sel.push_back(c);
          sel.push_back(k);
        }
      }
    }
  }
  const int64_t n = static_cast<int64_t>(sel.size() / 3);
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DataType::kInt64, {n, 3}));
  std::copy(sel.begin(), sel.end(), out->data<int64_t>());
  return Status::Ok();
}

}  // namespace

void register_image_ops(ep::KernelRegistry& r) {
  r.add_fn("GridSample", &grid_sample_fn);
  r.add_fn("AffineGrid", &affine_grid_fn);
  r.add_fn("RoiAlign", &roi_align_fn);
  r.add_fn("NonMaxSuppression", &nms_fn);
}

}  // namespace nxrt::ops
