// Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <type_traits>

#include "ops/conv/conv_engine.h"

namespace nxrt::ops {

namespace {

template <typename T>
using ct_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Any numeric tensor's values as CT.
template <typename CT>
Result<std::vector<CT>> tensor_values(const Tensor& t) {
  std::vector<CT> out(static_cast<size_t>(t.numel()));
  Status st = dispatch_numeric(
      t.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        convert_buffer<T, CT>(t.data<T>(), out.data(), t.numel());
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("unsupported dtype ") + dtype_name(t.dtype())); });
  if (!st.ok()) return st;
  return out;
}

Dims spatial_of(const Dims& shape) { return Dims(shape.begin() + 2, shape.end()); }

// Checks X/W of a forward conv and fills the shape; `err` makes the error from its message.
template <typename Err>
Status conv_shape_checked(const WindowAttrs& attrs, int64_t group, const Dims& x, const Dims& w, ConvShape* s,
                          Err err) {
  if (x.size() < 3) return err("input X must have rank >= 3 (N, C, spatial...), got " + shape_to_string(x));
  if (w.size() != x.size()) {
    return err("W " + shape_to_string(w) + " must have the same rank as X " + shape_to_string(x));
  }
  if (group < 1) return err("group must be >= 1, got " + std::to_string(group));
  if (w[1] * group != x[1]) {
    return err("X has " + std::to_string(x[1]) + " channels but W " + shape_to_string(w) + " with group " +
                     std::to_string(group) + " expects " + std::to_string(w[1] * group));
  }
  if (w[0] % group != 0) {
    return err("W's output channels " + std::to_string(w[0]) + " are not divisible by group " +
                     std::to_string(group));
  }
  Dims kernel = spatial_of(w);
  if (!attrs.kernel_shape.empty() && attrs.kernel_shape != kernel) {
    return err("kernel_shape " + shape_to_string(attrs.kernel_shape) + " does not match W " +
                     shape_to_string(w));
  }
  s->N = x[0];
  s->C = x[1];
  s->M = w[0];
  s->group = group;
  Status st = forward_geometry(attrs, spatial_of(x), kernel, &s->g);
  if (!st.ok()) return err(st.message(), st.code());
  return Status::Ok();
}

Status conv_shape(const ep::KernelContext& ctx, const WindowAttrs& attrs, int64_t group, const Dims& x,
                  const Dims& w, ConvShape* s) {
  return conv_shape_checked(attrs, group, x, w, s, [&](const std::string& m, StatusCode c = StatusCode::kRuntimeError) {
    return ctx.error(m, c);
  });
}

std::atomic<int64_t> g_conv_variants_live{0};

// A Conv node's state at one input shape: the engine's plan (path, padded-input layout, offsets, the
// path's extra weights) and the workspace it declares. Made by specialize, shared by concurrent runs.
struct ConvVariant final : ep::KernelVariant {
  ConvVariant() { g_conv_variants_live.fetch_add(1, std::memory_order_relaxed); }
  ~ConvVariant() override { g_conv_variants_live.fetch_sub(1, std::memory_order_relaxed); }
  size_t workspace_bytes() const override { return plan.workspace_bytes; }
  ConvPlan plan;
};

// ------------------------------------------------------------------------------------------------
// Conv

class ConvKernel final : public ep::Kernel, public ConvWithPost {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, false));
    group_ = info.attr_int("group", 1);
    if (group_ < 1) return info.error("group must be >= 1, got " + std::to_string(group_));
    cfg_ = conv_config(info);
    if (const Tensor* w = info.const_input(1)) {
      if (w->rank() >= 3 && w->dim(0) % group_ == 0) {
        if (w->dtype() == DataType::kDouble) {
          auto v = tensor_values<double>(*w);
          if (v.ok()) {
            wd_.prepare(w->shape(), group_, std::move(v.value()));
            have_wd_ = true;
          }
        } else if (dtype_is_float(w->dtype())) {
          auto v = tensor_values<float>(*w);
          if (v.ok()) {
            wf_.prepare(w->shape(), group_, std::move(v.value()), unit_stride_dilation());
            have_wf_ = true;
          }
        }
      }
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    return dispatch_float(
        X.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx, nullptr, nullptr, nullptr);
        },
        [&] { return ctx.error(std::string("Conv does not support dtype ") + dtype_name(X.dtype())); });
  }

  Result<bool> compute_with_post(ep::KernelContext& ctx, const ConvPost& post, const Dims* residual_shape) const override {
    const Tensor& X = ctx.input(0);
    bool applied = false;
    NXRT_RETURN_IF_ERROR(dispatch_float(
        X.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx, &post, residual_shape, &applied);
        },
        [&] { return ctx.error(std::string("Conv does not support dtype ") + dtype_name(X.dtype())); }));
    return applied;
  }
  // Prepared constant weights are all run() uses (W's dtype must equal X's, its shape is fixed).
  bool reads_const_input_data(size_t i) const override { return !(i == 1 && (have_wf_ || have_wd_)); }

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    return specialize_with_post(sc, false);
  }

  // A plan for the prepared weights at these shapes. None (compute plans per call or reports the
  // problem) when W is not a prepared constant or the shapes are wrong.
  Result<std::unique_ptr<ep::KernelVariant>> specialize_with_post(const ep::SpecializeContext& sc,
                                                                  bool pre_activation) const override {
    std::unique_ptr<ep::KernelVariant> none;
    if (!sc.has_input(0) || !sc.has_input(1) || sc.dtype(1) != sc.dtype(0)) return none;
    const DataType dt = sc.dtype(0);
    ConvShape s;
    auto err = [](const std::string& m, StatusCode c = StatusCode::kRuntimeError) { return Status(c, m); };
    if (!conv_shape_checked(attrs_, group_, sc.shape(0), sc.shape(1), &s, err).ok()) return none;
    if (s.N * s.M * s.g.out_size() == 0) return none;
    auto v = std::make_unique<ConvVariant>();
    if (dt == DataType::kDouble) {
      if (!have_wd_ || wd_.shape != sc.shape(1)) return none;
      v->plan = conv_plan<double>(s, wd_, cfg_, sc.num_threads(), false);
    } else if (dtype_is_float(dt)) {
      if (!have_wf_ || wf_.shape != sc.shape(1)) return none;
      // Only float X carries a post into the engine (run()).
      v->plan = conv_plan<float>(s, wf_, cfg_, sc.num_threads(), pre_activation && dt == DataType::kFloat);
    } else {
      return none;
    }
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

 private:
  // `post` (FusedConv) is passed on to the engine for float when the residual has Y's shape and is not
  // Y's buffer; *applied says whether it was applied.
  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx, const ConvPost* post, const Dims* residual_shape, bool* applied) const {
    const Tensor& X = ctx.input(0);
    if (!ctx.has_input(1)) return ctx.error("missing input W");
    const Tensor& W = ctx.input(1);
    if (W.dtype() != X.dtype()) {
      return ctx.error(std::string("W dtype ") + dtype_name(W.dtype()) + " differs from X dtype " +
                       dtype_name(X.dtype()));
    }
    ConvShape s;
    NXRT_RETURN_IF_ERROR(conv_shape(ctx, attrs_, group_, X.shape(), W.shape(), &s));
    const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (B && (B->dtype() != X.dtype() || B->numel() != s.M)) {
      return ctx.error("bias " + B->describe() + " must be " + dtype_name(X.dtype()) + " with " +
                       std::to_string(s.M) + " values");
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), geom_output_shape(s.N, s.M, s.g)));
    if (Y->numel() == 0) return Status::Ok();

    const ConvWeights<CT>* wp = nullptr;
    ConvWeights<CT> local;
    // The variant's plan serves when it was made for these weights (the prepared ones) and this call.
    const auto* variant = dynamic_cast<const ConvVariant*>(ctx.variant());
    if constexpr (std::is_same_v<CT, double>) {
      if (have_wd_ && wd_.shape == W.shape()) wp = &wd_;
    } else {
      if (have_wf_ && wf_.shape == W.shape()) wp = &wf_;
    }
    if (!wp) {
      NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
      local.prepare(W.shape(), group_, std::move(wv), unit_stride_dilation());
      wp = &local;
    }
    std::vector<CT> bias;
    if (B) {
      NXRT_ASSIGN_OR_RETURN(bias, tensor_values<CT>(*B));
    }
    const CT* xp;
    std::vector<CT> xbuf;
    if constexpr (std::is_same_v<T, CT>) {
      xp = X.data<CT>();
    } else {
      xbuf.resize(static_cast<size_t>(X.numel()));
      convert_buffer<T, CT>(X.data<T>(), xbuf.data(), X.numel());
      xp = xbuf.data();
    }
    if constexpr (std::is_same_v<T, CT>) {
      const ConvPost* fused = nullptr;
      if constexpr (std::is_same_v<T, float>) {
        if (post && (!post->residual || (residual_shape && *residual_shape == Y->shape() &&
                                         post->residual != Y->data<float>()))) {
          fused = post;
        }
      }
      bool done;
      if (variant && wp != &local && conv_plan_fits(variant->plan, s, &ctx.pool(), fused)) {
        NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *variant));
        done = conv_forward_planned<CT>(variant->plan, xp, *wp, B ? bias.data() : nullptr, Y->data<CT>(),
                                        &ctx.pool(), cfg_, fused, ws);
      } else {
        done = conv_forward<CT>(s, xp, *wp, B ? bias.data() : nullptr, Y->data<CT>(), &ctx.pool(), cfg_, fused);
      }
      if (applied) *applied = fused && done;
    } else {
      std::vector<CT> ybuf(static_cast<size_t>(Y->numel()));
      if (variant && wp != &local && conv_plan_fits(variant->plan, s, &ctx.pool(), nullptr)) {
        NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, *variant));
        conv_forward_planned<CT>(variant->plan, xp, *wp, B ? bias.data() : nullptr, ybuf.data(), &ctx.pool(), cfg_,
                                 nullptr, ws);
      } else {
        conv_forward<CT>(s, xp, *wp, B ? bias.data() : nullptr, ybuf.data(), &ctx.pool(), cfg_);
      }
      T* yo = Y->data<T>();
      for (int64_t i = 0; i < Y->numel(); ++i) yo[i] = from_ct<T>(ybuf[i]);
    }
    return Status::Ok();
  }

  // Stride 1 and dilation 1 on every axis: the Winograd path may apply (ConvWeights::prepare).
  bool unit_stride_dilation() const {
    for (int64_t v : attrs_.strides)
      if (v != 1) return false;
    for (int64_t v : attrs_.dilations)
      if (v != 1) return false;
    return true;
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  ConvConfig cfg_;  // the path / tier overrides, read at creation
  ConvWeights<float> wf_;
  ConvWeights<double> wd_;
  bool have_wf_ = false, have_wd_ = false;
};

// ------------------------------------------------------------------------------------------------
// ConvInteger and QLinearConv: exact integer sums, computed in double (exact below 2^53).

// Zero point values: scalar (broadcast to n) or n values.
Result<std::vector<double>> zero_points(const ep::KernelContext& ctx, size_t idx, int64_t n, const char* what) {
  if (!ctx.has_input(idx)) return std::vector<double>(static_cast<size_t>(n), 0.0);
  const Tensor& t = ctx.input(idx);
  NXRT_ASSIGN_OR_RETURN(std::vector<double> v, read_double_values(t));
  if (v.size() == 1) return std::vector<double>(static_cast<size_t>(n), v[0]);
  if (static_cast<int64_t>(v.size()) != n) {
    return ctx.error(std::string(what) + " " + t.describe() + " must be a scalar or have " + std::to_string(n) +
                     " values");
  }
  return v;
}

bool is_8bit(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// w - w_zero_point (scalar or per output channel) in double.
Result<std::vector<double>> centered_weights(const Tensor& W, const std::vector<double>& wzp) {
  NXRT_ASSIGN_OR_RETURN(std::vector<double> wv, tensor_values<double>(W));
  const int64_t M = W.rank() > 0 ? W.dim(0) : 0;
  const int64_t per_m = M > 0 ? W.numel() / M : 0;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < per_m; ++i) wv[m * per_m + i] -= wzp[wzp.size() == 1 ? 0 : m];
  return wv;
}

// Weights prepared at creation when w (and its zero point, if given) are constants.
struct IntWeights {
  bool ready = false;
  ConvWeights<double> w;
  void init(const ep::KernelInfo& info, size_t w_idx, size_t wzp_idx, int64_t group) {
    const Tensor* W = info.const_input(w_idx);
    if (!W || W->rank() < 3 || group < 1 || W->dim(0) % group != 0 || !is_8bit_dtype(W->dtype())) return;
    std::vector<double> wzp{0.0};
    if (info.input_present(wzp_idx)) {
      const Tensor* z = info.const_input(wzp_idx);
      if (!z) return;
      auto v = read_double_values(*z);
      if (!v.ok() || (v->size() != 1 && static_cast<int64_t>(v->size()) != W->dim(0))) return;
      wzp = v.value();
    }
    auto wv = centered_weights(*W, wzp);
    if (!wv.ok()) return;
    w.prepare(W->shape(), group, std::move(wv.value()));
    ready = true;
  }
  static bool is_8bit_dtype(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }
};

// Runs the integer conv of inputs (x at 0, w at w_idx) with zero points; returns the double sums.
Status integer_conv(ep::KernelContext& ctx, const WindowAttrs& attrs, int64_t group, size_t w_idx, size_t xzp_idx,
                    size_t wzp_idx, const IntWeights& pre, const ConvConfig& cfg, ConvShape* s,
                    std::vector<double>* y) {
  const Tensor& X = ctx.input(0);
  if (!ctx.has_input(w_idx)) return ctx.error("missing input w");
  const Tensor& W = ctx.input(w_idx);
  if (!is_8bit(X.dtype()) || !is_8bit(W.dtype())) {
    return ctx.error(std::string("x and w must be uint8 or int8, got ") + dtype_name(X.dtype()) + " and " +
                     dtype_name(W.dtype()));
  }
  NXRT_RETURN_IF_ERROR(conv_shape(ctx, attrs, group, X.shape(), W.shape(), s));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> xzp, zero_points(ctx, xzp_idx, 1, "x_zero_point"));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> wzp, zero_points(ctx, wzp_idx, s->M, "w_zero_point"));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> xv, tensor_values<double>(X));
  for (double& v : xv) v -= xzp[0];
  ConvWeights<double> local;
  const ConvWeights<double>* w = &pre.w;
  if (!pre.ready || pre.w.shape != W.shape() || pre.w.group != group) {
    NXRT_ASSIGN_OR_RETURN(std::vector<double> wv, centered_weights(W, wzp));
    local.prepare(W.shape(), group, std::move(wv));
    w = &local;
  }
  y->assign(static_cast<size_t>(s->N * s->M * s->g.out_size()), 0.0);
  if (y->empty()) return Status::Ok();
  conv_forward<double>(*s, xv.data(), *w, nullptr, y->data(), &ctx.pool(), cfg);
  return Status::Ok();
}

// What ConvInteger and QLinearConv share: attributes, weights prepared at creation, the path overrides.
struct IntegerConv {
  WindowAttrs attrs;
  int64_t group = 1;
  IntWeights pre;
  ConvConfig cfg;
  size_t w_idx = 1, xzp_idx = 2, wzp_idx = 3;
  Status init(const ep::KernelInfo& info, size_t w, size_t xzp, size_t wzp) {
    NXRT_RETURN_IF_ERROR(attrs.parse(info, false));
    group = info.attr_int("group", 1);
    w_idx = w, xzp_idx = xzp, wzp_idx = wzp;
    pre.init(info, w_idx, wzp_idx, group);
    cfg = conv_config(info);
    return Status::Ok();
  }
  Status run(ep::KernelContext& ctx, ConvShape* s, std::vector<double>* y) const {
    return integer_conv(ctx, attrs, group, w_idx, xzp_idx, wzp_idx, pre, cfg, s, y);
  }
};

class ConvIntegerKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) { return conv_.init(info, 1, 2, 3); }
  Status compute(ep::KernelContext& ctx) const override {
    ConvShape s;
    std::vector<double> y;
    NXRT_RETURN_IF_ERROR(conv_.run(ctx, &s, &y));
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, DataType::kInt32, geom_output_shape(s.N, s.M, s.g)));
    int32_t* yo = Y->data<int32_t>();
    for (size_t i = 0; i < y.size(); ++i) yo[i] = static_cast<int32_t>(std::llround(y[i]));
    return Status::Ok();
  }

 private:
  IntegerConv conv_;
};

class QLinearConvKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) { return conv_.init(info, 3, 2, 5); }
  Status compute(ep::KernelContext& ctx) const override {
    for (size_t i : {1, 4, 6}) {
      if (!ctx.has_input(i)) return ctx.error("missing scale input " + std::to_string(i));
    }
    ConvShape s;
    std::vector<double> y;
    NXRT_RETURN_IF_ERROR(conv_.run(ctx, &s, &y));
    NXRT_ASSIGN_OR_RETURN(std::vector<double> xs, read_double_values(ctx.input(1)));
    NXRT_ASSIGN_OR_RETURN(std::vector<double> ws, read_double_values(ctx.input(4)));
    NXRT_ASSIGN_OR_RETURN(std::vector<double> ys, read_double_values(ctx.input(6)));
    if (xs.size() != 1 || ys.size() != 1) return ctx.error("x_scale and y_scale must be scalars");
    if (ws.size() != 1 && static_cast<int64_t>(ws.size()) != s.M) {
      return ctx.error("w_scale must be a scalar or have " + std::to_string(s.M) + " values");
    }
    NXRT_ASSIGN_OR_RETURN(std::vector<double> yzp, zero_points(ctx, 7, 1, "y_zero_point"));
    DataType yt = ctx.has_input(7) ? ctx.input(7).dtype() : ctx.input(0).dtype();
    if (!is_8bit(yt)) return ctx.error(std::string("y_zero_point must be uint8 or int8, got ") + dtype_name(yt));
    std::vector<double> bias;
    if (ctx.has_input(8)) {
      NXRT_ASSIGN_OR_RETURN(bias, read_double_values(ctx.input(8)));
      if (static_cast<int64_t>(bias.size()) != s.M) {
        return ctx.error("B " + ctx.input(8).describe() + " must have " + std::to_string(s.M) + " values");
      }
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, yt, geom_output_shape(s.N, s.M, s.g)));
    const double lo = yt == DataType::kUInt8 ? 0.0 : -128.0, hi = yt == DataType::kUInt8 ? 255.0 : 127.0;
    const int64_t plane = s.g.out_size();
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t m = 0; m < s.M; ++m) {
        const double scale = xs[0] * ws[ws.size() == 1 ? 0 : m] / ys[0];
        const double b = bias.empty() ? 0.0 : bias[m];
        const size_t base = static_cast<size_t>((n * s.M + m) * plane);
        for (int64_t i = 0; i < plane; ++i) {
          double v = std::nearbyint((y[base + i] + b) * scale) + yzp[0];
          v = std::min(hi, std::max(lo, v));
          if (yt == DataType::kUInt8) {
            Y->data<uint8_t>()[base + i] = static_cast<uint8_t>(v);
          } else {
            Y->data<int8_t>()[base + i] = static_cast<int8_t>(v);
          }
        }
      }
    }
    return Status::Ok();
  }

 private:
  IntegerConv conv_;
};

// ------------------------------------------------------------------------------------------------
// ConvTranspose: col = W_g^T * X_g (GEMM), then col2im scatter-adds into Y.

class ConvTransposeKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, false));
    group_ = info.attr_int("group", 1);
    if (group_ < 1) return info.error("group must be >= 1, got " + std::to_string(group_));
    output_padding_ = info.attr_ints("output_padding");
    output_shape_ = info.attr_ints("output_shape");
    isa_ = info.isa();
    if (const Tensor* w = info.const_input(1)) {
      if (w->rank() >= 3 && w->dim(0) % group_ == 0) {
        if (w->dtype() == DataType::kDouble) {
          auto v = tensor_values<double>(*w);
          if (v.ok()) pack_transposed(w->shape(), v.value(), &packed_d_);
        } else if (dtype_is_float(w->dtype())) {
          auto v = tensor_values<float>(*w);
          if (v.ok()) pack_transposed(w->shape(), v.value(), &packed_f_);
        }
        packed_shape_ = w->shape();
      }
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    return dispatch_float(
        X.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx);
        },
        [&] { return ctx.error(std::string("ConvTranspose does not support dtype ") + dtype_name(X.dtype())); });
  }

 private:
  Status geometry(const ep::KernelContext& ctx, const Dims& x, const Dims& w, Geom3* g) const {
    const size_t n = x.size() - 2;
    if (n < 1 || n > 3) return ctx.error("only 1 to 3 spatial axes are supported, X is " + shape_to_string(x),
                                         StatusCode::kNotImplemented);
    Dims kernel(w.begin() + 2, w.end());
    if (!attrs_.kernel_shape.empty() && attrs_.kernel_shape != kernel) {
      return ctx.error("kernel_shape " + shape_to_string(attrs_.kernel_shape) + " does not match W " +
                       shape_to_string(w));
    }
    auto check_len = [&](const std::vector<int64_t>& v, size_t want, const char* what) -> Status {
      if (!v.empty() && v.size() != want) {
        return ctx.error(std::string(what) + " " + shape_to_string(v) + " must have " + std::to_string(want) +
                         " values");
      }
      return Status::Ok();
    };
    NXRT_RETURN_IF_ERROR(check_len(attrs_.strides, n, "strides"));
    NXRT_RETURN_IF_ERROR(check_len(attrs_.dilations, n, "dilations"));
    NXRT_RETURN_IF_ERROR(check_len(output_padding_, n, "output_padding"));
    if (attrs_.auto_pad == AutoPad::kNotSet && output_shape_.empty()) {
      NXRT_RETURN_IF_ERROR(check_len(attrs_.pads, 2 * n, "pads"));
    }
    if (!output_shape_.empty() && output_shape_.size() != n && output_shape_.size() != n + 2) {
      return ctx.error("output_shape " + shape_to_string(output_shape_) + " must have " + std::to_string(n) +
                       " values");
    }
    *g = Geom3();
    g->nsp = static_cast<int>(n);
    const size_t off = 3 - n;
    for (size_t i = 0; i < n; ++i) {
      const size_t j = off + i;
      const int64_t in = x[2 + i], k = kernel[i];
      const int64_t s = attrs_.strides.empty() ? 1 : attrs_.strides[i];
      const int64_t d = attrs_.dilations.empty() ? 1 : attrs_.dilations[i];
      const int64_t op = output_padding_.empty() ? 0 : output_padding_[i];
      const int64_t dk = (k - 1) * d + 1;
      const int64_t full = s * (in - 1) + op + dk;
      int64_t pb = 0, pe = 0, out = 0;
      const bool same = attrs_.auto_pad == AutoPad::kSameUpper || attrs_.auto_pad == AutoPad::kSameLower;
      if (!output_shape_.empty() || same) {
        out = !output_shape_.empty() ? output_shape_[output_shape_.size() - n + i] : in * s;
        const int64_t total = full - out;  // negative: the output extends past the full result (zeros/bias)
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division
        if (attrs_.auto_pad == AutoPad::kSameUpper) {
          pb = half;
          pe = total - pb;
        } else {
          pe = half;
          pb = total - pe;
        }
      } else if (attrs_.auto_pad == AutoPad::kValid) {
        out = full;
      } else {
        if (!attrs_.pads.empty()) {
          pb = attrs_.pads[i];
          pe = attrs_.pads[i + n];
        }
        out = full - pb - pe;
      }
      if (out < 0) return ctx.error("computed output size " + std::to_string(out) + " is negative");
      g->set_axis(j, in, out, k, s, d, pb, pe);
    }
    return Status::Ok();
  }

  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx) const {
    const Tensor& X = ctx.input(0);
    if (!ctx.has_input(1)) return ctx.error("missing input W");
    const Tensor& W = ctx.input(1);
    if (W.dtype() != X.dtype()) {
      return ctx.error(std::string("W dtype ") + dtype_name(W.dtype()) + " differs from X dtype " +
                       dtype_name(X.dtype()));
    }
    if (X.rank() < 3 || W.rank() != X.rank()) {
      return ctx.error("X " + shape_to_string(X.shape()) + " and W " + shape_to_string(W.shape()) +
                       " must have the same rank >= 3");
    }
    const int64_t N = X.dim(0), C = X.dim(1);
    if (W.dim(0) != C || C % group_ != 0) {
      return ctx.error("W " + shape_to_string(W.shape()) + " must have X's " + std::to_string(C) +
                       " channels first, divisible by group " + std::to_string(group_));
    }
    const int64_t Cg = C / group_, Mg = W.dim(1), M = Mg * group_;
    Geom3 g;
    NXRT_RETURN_IF_ERROR(geometry(ctx, X.shape(), W.shape(), &g));
    const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (B && (B->dtype() != X.dtype() || B->numel() != M)) {
      return ctx.error("bias " + B->describe() + " must be " + dtype_name(X.dtype()) + " with " +
                       std::to_string(M) + " values");
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), geom_output_shape(N, M, g)));
    if (Y->numel() == 0) return Status::Ok();
    NXRT_ASSIGN_OR_RETURN(std::vector<CT> xv, tensor_values<CT>(X));
    std::vector<CT> bias;
    if (B) {
      NXRT_ASSIGN_OR_RETURN(bias, tensor_values<CT>(*B));
    }
    const int64_t kvol = g.kvol(), in_size = g.in_size(), out_size = g.out_size();
    const int64_t rows = Mg * kvol;
    std::vector<PackedA<CT>> local;
    const std::vector<PackedA<CT>>* pk;
    if constexpr (std::is_same_v<CT, double>) {
      pk = &packed_d_;
    } else {
      pk = &packed_f_;
    }
    if (pk->empty() || packed_shape_ != W.shape()) {
      NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
      pack_transposed(W.shape(), wv, &local);
      pk = &local;
    }
    const std::vector<PackedA<CT>>& packed = *pk;
    std::vector<CT> ybuf;
    CT* y;
    if constexpr (std::is_same_v<T, CT>) {
      y = Y->data<CT>();
    } else {
      ybuf.resize(static_cast<size_t>(Y->numel()));
      y = ybuf.data();
    }
    std::vector<CT> col(static_cast<size_t>(rows * in_size));
    const int64_t KH = g.k[1], KW = g.k[2], OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2];
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t gi = 0; gi < group_; ++gi) {
        const CT* xg = xv.data() + (n * C + gi * Cg) * in_size;
        gemm_packed_a<CT>(packed[gi], in_size, false, xg, in_size, CT(0), col.data(), in_size, &ctx.pool(), isa_);
        auto body = [&](int64_t m0, int64_t m1) {
          for (int64_t m = m0; m < m1; ++m) {
            CT* yp = y + (n * M + gi * Mg + m) * out_size;
            std::fill(yp, yp + out_size, B ? bias[gi * Mg + m] : CT(0));
            for (int64_t kidx = 0; kidx < kvol; ++kidx) {
              const int64_t kd = kidx / (KH * KW), kh = (kidx / KW) % KH, kw = kidx % KW;
              const CT* crow = col.data() + (m * kvol + kidx) * in_size;
              const int64_t wbase = kw * g.d[2] - g.pb[2];
              // input columns iw whose output column iw*s + wbase lies in [0, OW)
              int64_t lo = wbase >= 0 ? 0 : (-wbase + g.s[2] - 1) / g.s[2];
              int64_t hi = (OW - 1 - wbase) < 0 ? 0 : (OW - 1 - wbase) / g.s[2] + 1;
              lo = std::min(lo, IW);
              hi = std::min(hi, IW);
              if (hi <= lo) continue;
              for (int64_t id = 0; id < g.in[0]; ++id) {
                const int64_t od = id * g.s[0] - g.pb[0] + kd * g.d[0];
                if (od < 0 || od >= g.out[0]) continue;
                for (int64_t ih = 0; ih < IH; ++ih) {
                  const int64_t oh = ih * g.s[1] - g.pb[1] + kh * g.d[1];
                  if (oh < 0 || oh >= OH) continue;
                  CT* yrow = yp + (od * OH + oh) * OW;
                  const CT* c = crow + (id * IH + ih) * IW;
                  const int64_t sw = g.s[2];
                  for (int64_t iw = lo; iw < hi; ++iw) yrow[iw * sw + wbase] += c[iw];
                }
              }
            }
          }
        };
        ctx.pool().parallel_for(Mg, 1, body);
      }
    }
    if constexpr (!std::is_same_v<T, CT>) {
      T* yo = Y->data<T>();
      for (int64_t i = 0; i < Y->numel(); ++i) yo[i] = from_ct<T>(ybuf[i]);
    }
    return Status::Ok();
  }

  // Per group, the GEMM operand W_g^T: (M/group * kvol) x (C/group).
  template <typename CT>
  void pack_transposed(const Dims& w_shape, const std::vector<CT>& wv, std::vector<PackedA<CT>>* out) const {
    const int64_t Cg = w_shape[0] / group_;
    const int64_t rows = shape_numel(w_shape) / std::max<int64_t>(1, w_shape[0]);
    out->clear();
    for (int64_t gi = 0; gi < group_; ++gi) out->push_back(pack_a<CT>(true, rows, Cg, wv.data() + gi * Cg * rows, rows));
  }

  WindowAttrs attrs_;
  int64_t group_ = 1;
  std::vector<int64_t> output_padding_, output_shape_;
  Dims packed_shape_;
  std::vector<PackedA<float>> packed_f_;
  std::vector<PackedA<double>> packed_d_;
  ep::IsaTier isa_ = ep::cpu_isa_tier();
};

// ------------------------------------------------------------------------------------------------
// DeformConv (2-D): bilinear sampling at offset positions (times the mask) into columns, then GEMM.

class DeformConvKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, false));
    attrs_.auto_pad = AutoPad::kNotSet;
    group_ = info.attr_int("group", 1);
    offset_group_ = info.attr_int("offset_group", 1);
    isa_ = info.isa();
    if (group_ < 1 || offset_group_ < 1) return info.error("group and offset_group must be >= 1");
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    return dispatch_float(
        X.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          return run<T, ct_of<T>>(ctx);
        },
        [&] { return ctx.error(std::string("DeformConv does not support dtype ") + dtype_name(X.dtype())); });
  }

 private:
  template <typename T, typename CT>
  Status run(ep::KernelContext& ctx) const {
    const Tensor& X = ctx.input(0);
    if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("missing input W or offset");
    const Tensor& W = ctx.input(1);
    const Tensor& O = ctx.input(2);
    if (X.rank() != 4) return ctx.error("DeformConv supports 2-D inputs (N, C, H, W), got " + X.describe(),
                                        StatusCode::kNotImplemented);
    if (W.dtype() != X.dtype() || O.dtype() != X.dtype()) return ctx.error("W and offset must have X's dtype");
    ConvShape s;
    NXRT_RETURN_IF_ERROR(conv_shape(ctx, attrs_, group_, X.shape(), W.shape(), &s));
    const Geom3& g = s.g;
    const int64_t KH = g.k[1], KW = g.k[2], kvol = KH * KW, OH = g.out[1], OW = g.out[2];
    const int64_t out_size = OH * OW, IH = g.in[1], IW = g.in[2];
    if (s.C % offset_group_ != 0) return ctx.error("channels are not divisible by offset_group");
    const Dims want_off{s.N, offset_group_ * kvol * 2, OH, OW};
    if (O.shape() != want_off) {
      return ctx.error("offset " + O.describe() + " must have shape " + shape_to_string(want_off));
    }
    const Tensor* B = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const Tensor* Mk = ctx.has_input(4) ? &ctx.input(4) : nullptr;
    if (B && B->numel() != s.M) return ctx.error("B " + B->describe() + " must have " + std::to_string(s.M) + " values");
    const Dims want_mask{s.N, offset_group_ * kvol, OH, OW};
    if (Mk && Mk->shape() != want_mask) {
      return ctx.error("mask " + Mk->describe() + " must have shape " + shape_to_string(want_mask));
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), geom_output_shape(s.N, s.M, g)));
    if (Y->numel() == 0) return Status::Ok();
    NXRT_ASSIGN_OR_RETURN(std::vector<CT> xv, tensor_values<CT>(X));
    NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
    NXRT_ASSIGN_OR_RETURN(std::vector<CT> ov, tensor_values<CT>(O));
    std::vector<CT> mv, bias;
    if (Mk) {
      NXRT_ASSIGN_OR_RETURN(mv, tensor_values<CT>(*Mk));
    }
    if (B) {
      NXRT_ASSIGN_OR_RETURN(bias, tensor_values<CT>(*B));
    }
    ConvWeights<CT> w;
    w.prepare(W.shape(), group_, std::move(wv));
    const int64_t G = group_, Cg = s.C / G, Mg = s.M / G, K = Cg * kvol;
    const int64_t ch_per_og = s.C / offset_group_;
    std::vector<CT> col(static_cast<size_t>(K * out_size));
    std::vector<CT> ybuf(static_cast<size_t>(Y->numel()));
    for (int64_t n = 0; n < s.N; ++n) {
      for (int64_t gi = 0; gi < G; ++gi) {
        auto body = [&](int64_t r0, int64_t r1) {
          for (int64_t row = r0; row < r1; ++row) {
            const int64_t c = gi * Cg + row / kvol, kidx = row % kvol;
            const int64_t kh = kidx / KW, kw = kidx % KW;
            const int64_t og = c / ch_per_og;
            const CT* xc = xv.data() + (n * s.C + c) * IH * IW;
            const CT* offy = ov.data() + ((n * offset_group_ + og) * kvol * 2 + 2 * kidx) * out_size;
            const CT* offx = offy + out_size;
            const CT* mk = Mk ? mv.data() + ((n * offset_group_ + og) * kvol + kidx) * out_size : nullptr;
            CT* dst = col.data() + row * out_size;
            for (int64_t oh = 0; oh < OH; ++oh) {
              for (int64_t ow = 0; ow < OW; ++ow) {
                const int64_t p = oh * OW + ow;
                const CT h = static_cast<CT>(oh * g.s[1] - g.pb[1] + kh * g.d[1]) + offy[p];
                const CT wq = static_cast<CT>(ow * g.s[2] - g.pb[2] + kw * g.d[2]) + offx[p];
                CT v = 0;
                if (h > CT(-1) && h < CT(IH) && wq > CT(-1) && wq < CT(IW)) {
                  const CT hf = std::floor(h), wf = std::floor(wq);
                  const int64_t h0 = static_cast<int64_t>(hf), w0 = static_cast<int64_t>(wf);
                  const CT lh = h - hf, lw = wq - wf;
                  auto at = [&](int64_t yy, int64_t xx) -> CT {
                    return (yy >= 0 && yy < IH && xx >= 0 && xx < IW) ? xc[yy * IW + xx] : CT(0);
                  };
                  v = (1 - lh) * (1 - lw) * at(h0, w0) + (1 - lh) * lw * at(h0, w0 + 1) +
                      lh * (1 - lw) * at(h0 + 1, w0) + lh * lw * at(h0 + 1, w0 + 1);
                }
                dst[p] = mk ? v * mk[p] : v;
              }
            }
          }
        };
        ctx.pool().parallel_for(K, 1, body);
        CT* yg = ybuf.data() + (n * s.M + gi * Mg) * out_size;
        for (int64_t m = 0; m < Mg; ++m) std::fill(yg + m * out_size, yg + (m + 1) * out_size, B ? bias[gi * Mg + m] : CT(0));
        gemm_packed_a<CT>(w.packed[gi], out_size, false, col.data(), out_size, CT(1), yg, out_size, &ctx.pool(), isa_);
      }
    }
    T* yo = Y->data<T>();
    for (int64_t i = 0; i < Y->numel(); ++i) yo[i] = from_ct<T>(ybuf[i]);
    return Status::Ok();
  }

  ep::IsaTier isa_ = ep::cpu_isa_tier();
  WindowAttrs attrs_;
  int64_t group_ = 1, offset_group_ = 1;
};

// ------------------------------------------------------------------------------------------------
// CausalConvWithState (27): depthwise causal 1-D conv over [past_state | input], optional SiLU, and
// the last k-1 positions of that sequence as present_state.

Status causal_conv_with_state(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!ctx.has_input(1)) return ctx.error("missing input weight");
  const Tensor& W = ctx.input(1);
  const std::string act = ctx.info().attr_string("activation", "none");
  const bool silu = act == "silu" || act == "swish";
  if (!silu && act != "none") return ctx.error("activation must be 'silu', 'swish' or 'none', got '" + act + "'");
  if (X.rank() != 3) return ctx.error("input must be (batch, channels, length), got " + X.describe());
  const int64_t B = X.dim(0), C = X.dim(1), L = X.dim(2);
  if (W.rank() != 3 || W.dim(0) != C || W.dim(1) != 1 || W.dim(2) < 1 || W.dtype() != X.dtype()) {
    return ctx.error("weight " + W.describe() + " must be (" + std::to_string(C) + ", 1, k) of the input's dtype");
  }
  const int64_t K = W.dim(2), P = K - 1;
  const Tensor* bias = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const Tensor* past = ctx.has_input(3) ? &ctx.input(3) : nullptr;
  if (bias && (bias->numel() != C || bias->dtype() != X.dtype())) {
    return ctx.error("bias " + bias->describe() + " must have " + std::to_string(C) + " values");
  }
  const Dims state_shape{B, C, P};
  if (past && (past->shape() != state_shape || past->dtype() != X.dtype())) {
    return ctx.error("past_state " + past->describe() + " must have shape " + shape_to_string(state_shape));
  }
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using CT = ct_of<T>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        Tensor* S = nullptr;
        if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
          NXRT_ASSIGN_OR_RETURN(S, ctx.allocate_output(1, X.dtype(), state_shape));
        }
        NXRT_ASSIGN_OR_RETURN(std::vector<CT> wv, tensor_values<CT>(W));
        std::vector<CT> bv;
        if (bias) {
          NXRT_ASSIGN_OR_RETURN(bv, tensor_values<CT>(*bias));
        }
        const T* x = X.data<T>();
        const T* ps = past ? past->data<T>() : nullptr;
        T* y = Y->data<T>();
        T* st = S ? S->data<T>() : nullptr;
        ctx.pool().parallel_for(B * C, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, L * K)), [&](int64_t p0, int64_t p1) {
          std::vector<CT> seq(static_cast<size_t>(P + L));
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t c = p % C;
            for (int64_t i = 0; i < P; ++i) seq[i] = ps ? to_ct<CT>(ps[p * P + i]) : CT(0);
            for (int64_t i = 0; i < L; ++i) seq[P + i] = to_ct<CT>(x[p * L + i]);
            const CT* w = wv.data() + c * K;
            const CT b0 = bias ? bv[c] : CT(0);
            for (int64_t t = 0; t < L; ++t) {
              CT acc = b0;
              for (int64_t k = 0; k < K; ++k) acc += w[k] * seq[t + k];
              if (silu) acc = acc / (CT(1) + std::exp(-acc));
              y[p * L + t] = from_ct<T>(acc);
            }
            if (st) {
              for (int64_t i = 0; i < P; ++i) st[p * P + i] = from_ct<T>(seq[L + i]);
            }
          }
        });
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("CausalConvWithState does not support dtype ") + dtype_name(X.dtype())); });
}

}  // namespace

int64_t conv_variants_live() { return g_conv_variants_live.load(std::memory_order_relaxed); }

void register_conv_kernels(ep::KernelRegistry& r) {
  r.add_class<ConvKernel>("", "Conv", 1);
  r.add_class<ConvTransposeKernel>("", "ConvTranspose", 1);
  r.add_class<ConvIntegerKernel>("", "ConvInteger", 10);
  r.add_class<QLinearConvKernel>("", "QLinearConv", 10);
  r.add_class<DeformConvKernel>("", "DeformConv", 19);
  r.add_fn("", "CausalConvWithState", 27, INT64_MAX, &causal_conv_with_state);
}

}  // namespace nxrt::ops
