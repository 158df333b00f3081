// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opset 12, 13).
//
// input [N, C, d1..dk] (scores or log-probabilities), target [N, d1..dk] int32/int64, optional
// weight [C]. loss[n, d] = -weight[t] * logp[n, t, d] (0 where t == ignore_index). reduction: none
// (shape [N, d1..dk]), sum, or mean (sum / sum of the applied weights).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/common.h"
#include "ops/generator/generator_util.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

namespace {

template <bool kSoftmax>
Status loss_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  const Tensor& target = ctx.input(1);
  const Tensor* weight = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  const std::string reduction = info.attr_string("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean") {
    return ctx.error("bad reduction '" + reduction + "'", StatusCode::kInvalidModel);
  }
  const bool has_ii = info.has_attr("ignore_index");
  const int64_t ii = info.attr_int("ignore_index", 0);
  if (x.rank() < 2) return ctx.error("input must be [N, C, ...], got " + x.describe(), StatusCode::kInvalidArgument);
  const int64_t N = x.dim(0), C = x.dim(1);
  const int64_t D = x.numel() / std::max<int64_t>(1, N * C);
  Dims tshape = x.shape();
  tshape.erase(tshape.begin() + 1);
  if (target.shape() != tshape) {
    return ctx.error("target " + target.describe() + " does not match input " + x.describe(), StatusCode::kInvalidArgument);
  }
  if (weight && (weight->rank() != 1 || weight->dim(0) != C || weight->dtype() != x.dtype())) {
    return ctx.error("weight must be [C] of the input dtype, got " + weight->describe(), StatusCode::kInvalidArgument);
  }
  auto tv = read_int_values(target);
  if (!tv.ok()) return ctx.error("target must be int32/int64", StatusCode::kInvalidArgument);
  auto xv = read_double_values(x);
  if (!xv.ok() || !dtype_is_float(x.dtype())) return ctx.error("input must be a float tensor", StatusCode::kInvalidArgument);
  std::vector<double> wv;
  if (weight) wv = read_double_values(*weight).value();
  std::vector<double>& lp = xv.value();
  if constexpr (kSoftmax) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t d = 0; d < D; ++d) {
        double* base = lp.data() + n * C * D + d;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t c = 0; c < C; ++c) m = std::max(m, base[c * D]);
        double s = 0;
        for (int64_t c = 0; c < C; ++c) s += std::exp(base[c * D] - m);
        const double ls = std::log(s);
        for (int64_t c = 0; c < C; ++c) base[c * D] = (base[c * D] - m) - ls;
      }
  }
  std::vector<double> loss(static_cast<size_t>(N * D)), w(static_cast<size_t>(N * D));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t t = tv.value()[n * D + d];
      const size_t o = static_cast<size_t>(n * D + d);
      if (has_ii && t == ii) {
        loss[o] = 0;
        w[o] = 0;
        continue;
      }
      if (t < 0 || t >= C) {
        return ctx.error("target value " + std::to_string(t) + " out of range [0, " + std::to_string(C) + ")",
                         StatusCode::kInvalidArgument);
      }
      w[o] = weight ? wv[t] : 1.0;
      loss[o] = -lp[(n * C + t) * D + d] * w[o];
    }
  const DataType dt = x.dtype();
  auto store = [&](Tensor* out, const std::vector<double>& vals) {
    return dispatch_float(
        dt,
        [&](auto tag) -> Status {
          using T = decltype(tag);
          for (size_t i = 0; i < vals.size(); ++i) out->data<T>()[i] = from_compute<T>(vals[i]);
          return Status::Ok();
        },
        [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(dt), StatusCode::kNotImplemented); });
  };
  if (reduction == "none") {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, tshape));
    NXRT_RETURN_IF_ERROR(store(y, loss));
  } else {
    double s = 0, ws = 0;
    for (size_t i = 0; i < loss.size(); ++i) {
      s += loss[i];
      ws += w[i];
    }
    double v = reduction == "sum" ? s : s / ws;
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, {}));
    NXRT_RETURN_IF_ERROR(store(y, {v}));
  }
  if constexpr (kSoftmax) {
    if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
      NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(1, dt, x.shape()));
      NXRT_RETURN_IF_ERROR(store(y, lp));
    }
  }
  return Status::Ok();
}

}  // namespace

void register_loss_ops(ep::KernelRegistry& r) {
  r.add_fn("NegativeLogLikelihoodLoss", &loss_compute<false>);
  r.add_fn("SoftmaxCrossEntropyLoss", &loss_compute<true>);
}

}  // namespace nxrt::ops
