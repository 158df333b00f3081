// ai.onnx.preview.training optimizers: Adagrad, Adam, Momentum (standard and nesterov). Each takes
// a learning rate R and step count T (scalars), then n tensors of each kind, and returns the updated
// tensors grouped by kind. Computed in double and rounded back to the tensors' dtype.
#include <cmath>
#include <string>
#include <vector>

#include "ops/common.h"

namespace nxrt::ops {
namespace {

const char* kTrainingDomain = "ai.onnx.preview.training";

Result<double> scalar_double(const ep::KernelContext& ctx, size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) return ctx.error(std::string(name) + " must be a scalar, got shape " + shape_to_string(t.shape()), StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(auto v, t.dtype() == DataType::kInt64 || t.dtype() == DataType::kInt32 ? [&]() -> Result<std::vector<double>> {
    NXRT_ASSIGN_OR_RETURN(auto iv, read_int_values(t));
    return std::vector<double>(iv.begin(), iv.end());
  }() : read_double_values(t));
  return v[0];
}

// Checks the (R, T, groups x n) layout; returns n.
Result<int64_t> group_count(const ep::KernelContext& ctx, int64_t groups) {
  const int64_t ni = static_cast<int64_t>(ctx.num_inputs());
  if (ni < 2 + groups || (ni - 2) % groups != 0) {
    return ctx.error("expected R, T and " + std::to_string(groups) + " equal groups of tensors, got " + std::to_string(ni) + " inputs", StatusCode::kInvalidArgument);
  }
  const int64_t n = (ni - 2) / groups;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(static_cast<size_t>(2 + i));
    for (int64_t g = 1; g < groups; ++g) {
      const Tensor& o = ctx.input(static_cast<size_t>(2 + g * n + i));
      if (o.shape() != x.shape() || o.dtype() != x.dtype()) {
        return ctx.error("tensor " + std::to_string(i) + " of each group must share shape and dtype: " + x.describe() + " vs " + o.describe(), StatusCode::kInvalidArgument);
      }
    }
  }
  return n;
}

// Runs fn(elements in, elements out) for tensor i of every group, in double.
template <typename F>
Status for_each_group(ep::KernelContext& ctx, int64_t n, int64_t in_groups, int64_t out_groups, F&& fn) {
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(static_cast<size_t>(2 + i));
    const int64_t m = x.numel();
    std::vector<std::vector<double>> in(static_cast<size_t>(in_groups));
    for (int64_t g = 0; g < in_groups; ++g) {
      NXRT_ASSIGN_OR_RETURN(in[g], read_double_values(ctx.input(static_cast<size_t>(2 + g * n + i))));
    }
    std::vector<std::vector<double>> out(static_cast<size_t>(out_groups), std::vector<double>(static_cast<size_t>(m)));
    for (int64_t e = 0; e < m; ++e) fn(in, out, e);
    for (int64_t g = 0; g < out_groups; ++g) {
      const size_t oi = static_cast<size_t>(g * n + i);
      if (!ctx.output_requested(oi)) continue;
      NXRT_ASSIGN_OR_RETURN(Tensor * o, ctx.allocate_output(oi, x.dtype(), x.shape()));
      Status st = dispatch_float(x.dtype(), [&](auto tag) -> Status {
        using T = decltype(tag);
        T* d = o->data<T>();
        for (int64_t e = 0; e < m; ++e) d[e] = T(static_cast<compute_t<T>>(out[g][e]));
        return Status::Ok();
      }, ctx.error("optimizer tensors must be float or double", StatusCode::kInvalidArgument));
      NXRT_RETURN_IF_ERROR(st);
    }
  }
  return Status::Ok();
}

Status check_float_inputs(const ep::KernelContext& ctx) {
  for (size_t i = 2; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("optimizer inputs may not be omitted", StatusCode::kInvalidArgument);
    const DataType dt = ctx.input(i).dtype();
    if (dt != DataType::kFloat && dt != DataType::kDouble) return ctx.error("optimizer tensors must be float or double", StatusCode::kInvalidArgument);
  }
  return Status::Ok();
}

Status adagrad(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  NXRT_RETURN_IF_ERROR(check_float_inputs(ctx));
  NXRT_ASSIGN_OR_RETURN(int64_t n, group_count(ctx, 3));
  NXRT_ASSIGN_OR_RETURN(double r, scalar_double(ctx, 0, "R"));
  NXRT_ASSIGN_OR_RETURN(double t, scalar_double(ctx, 1, "T"));
  const double decay = info.attr_float("decay_factor", 0.f);
  const double eps = info.attr_float("epsilon", 0.f);
  const double norm = info.attr_float("norm_coefficient", 0.f);
  const double rr = r / (1 + t * decay);
  return for_each_group(ctx, n, 3, 2, [&](const auto& in, auto& out, int64_t e) {
    const double x = in[0][e], g = in[1][e] + norm * x, h = in[2][e] + g * g;
    out[0][e] = x - rr * g / (std::sqrt(h) + eps);
    out[1][e] = h;
  });
}

Status adam(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  NXRT_RETURN_IF_ERROR(check_float_inputs(ctx));
  NXRT_ASSIGN_OR_RETURN(int64_t n, group_count(ctx, 4));
  NXRT_ASSIGN_OR_RETURN(double r, scalar_double(ctx, 0, "R"));
  NXRT_ASSIGN_OR_RETURN(double t, scalar_double(ctx, 1, "T"));
  const double alpha = info.attr_float("alpha", 0.9f);
  const double beta = info.attr_float("beta", 0.999f);
  const double eps = info.attr_float("epsilon", 0.f);
  const double norm = info.attr_float("norm_coefficient", 0.f);
  const double post = info.attr_float("norm_coefficient_post", 0.f);
  const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
  return for_each_group(ctx, n, 4, 3, [&](const auto& in, auto& out, int64_t e) {
    const double x = in[0][e], g = in[1][e] + norm * x;
    const double v = alpha * in[2][e] + (1 - alpha) * g;
    const double h = beta * in[3][e] + (1 - beta) * g * g;
    const double xn = x - ra * (v / (std::sqrt(h) + eps));
    out[0][e] = (1 - post) * xn;
    out[1][e] = v;
    out[2][e] = h;
  });
}

Status momentum(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  NXRT_RETURN_IF_ERROR(check_float_inputs(ctx));
  NXRT_ASSIGN_OR_RETURN(int64_t n, group_count(ctx, 3));
  NXRT_ASSIGN_OR_RETURN(double r, scalar_double(ctx, 0, "R"));
  NXRT_ASSIGN_OR_RETURN(double t, scalar_double(ctx, 1, "T"));
  for (const char* a : {"alpha", "beta", "mode", "norm_coefficient"}) {
    if (!info.has_attr(a)) return info.error(std::string("Momentum requires attribute '") + a + "'");
  }
  const double alpha = info.attr_float("alpha", 0.f);
  const double beta = info.attr_float("beta", 0.f);
  const double norm = info.attr_float("norm_coefficient", 0.f);
  const std::string mode = info.attr_string("mode");
  if (mode != "standard" && mode != "nesterov") return info.error("mode must be 'standard' or 'nesterov', got '" + mode + "'");
  const bool nesterov = mode == "nesterov";
  const double ba = t > 0 ? beta : 1.0;
  return for_each_group(ctx, n, 3, 2, [&](const auto& in, auto& out, int64_t e) {
    const double x = in[0][e], g = in[1][e] + norm * x;
    const double v = alpha * in[2][e] + ba * g;
    out[0][e] = nesterov ? x - r * (g + alpha * v) : x - r * v;
    out[1][e] = v;
  });
}

}  // namespace

void register_training_ops(ep::KernelRegistry& r) {
  r.add_fn(kTrainingDomain, "Adagrad", 1, INT64_MAX, &adagrad);
  r.add_fn(kTrainingDomain, "Adam", 1, INT64_MAX, &adam);
  r.add_fn(kTrainingDomain, "Momentum", 1, INT64_MAX, &momentum);
}

}  // namespace nxrt::ops
