// RandomUniform, RandomNormal, RandomUniformLike, RandomNormalLike, Bernoulli, Multinomial.
// Seeded from the `seed` attribute (same seed, same output); a fresh stream per call without one.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/common.h"
#include "ops/generator/generator_util.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

namespace {

Result<DataType> dtype_attr(const ep::KernelInfo& info, DataType dflt) {
  if (!info.has_attr("dtype")) return dflt;
  const int64_t v = info.attr_int("dtype", 0);
  if (!is_known_dtype(static_cast<int32_t>(v))) return invalid_argument("bad dtype attribute " + std::to_string(v));
  return static_cast<DataType>(v);
}

template <bool kNormal>
Status random_fill(ep::KernelContext& ctx, DataType dt, const Dims& shape) {
  const auto& info = ctx.info();
  const double a = kNormal ? info.attr_float("mean", 0.f) : info.attr_float("low", 0.f);
  const double b = kNormal ? info.attr_float("scale", 1.f) : info.attr_float("high", 1.f);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, shape));
  Rng rng = make_rng(info);
  return dispatch_float(
      dt,
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using C = compute_t<T>;
        T* yd = y->data<T>();
        for (int64_t i = 0; i < y->numel(); ++i) {
          double v = kNormal ? a + b * rng.normal() : a + (b - a) * rng.uniform();
          C c = static_cast<C>(v);
          if constexpr (!kNormal) {
            if (!(static_cast<double>(c) < b) && b > a) c = static_cast<C>(a);  // keep [low, high)
          }
          yd[i] = T(c);
        }
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("random output dtype must be a float type, got ") + dtype_name(dt),
                StatusCode::kInvalidModel); });
}

template <bool kNormal>
Status random_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  auto dt = dtype_attr(info, DataType::kFloat);
  if (!dt.ok()) return ctx.error(dt.status().message(), StatusCode::kInvalidModel);
  if (!info.has_attr("shape")) return ctx.error("missing 'shape' attribute", StatusCode::kInvalidModel);
  Dims shape = info.attr_ints("shape");
  if (!generated_size_ok(shape)) return ctx.error("bad or too large shape " + shape_to_string(shape), StatusCode::kInvalidModel);
  return random_fill<kNormal>(ctx, dt.value(), shape);
}

template <bool kNormal>
Status random_like_compute(ep::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto dt = dtype_attr(ctx.info(), x.dtype());
  if (!dt.ok()) return ctx.error(dt.status().message(), StatusCode::kInvalidModel);
  return random_fill<kNormal>(ctx, dt.value(), x.shape());
}

Status bernoulli_compute(ep::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto dt = dtype_attr(ctx.info(), x.dtype());
  if (!dt.ok()) return ctx.error(dt.status().message(), StatusCode::kInvalidModel);
  auto p = read_double_values(x);
  if (!p.ok() || !dtype_is_float(x.dtype())) {
    return ctx.error("Bernoulli input must be a float tensor, got " + x.describe(), StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt.value(), x.shape()));
  Rng rng = make_rng(ctx.info());
  std::vector<uint8_t> bits(static_cast<size_t>(x.numel()));
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = rng.uniform() < p.value()[i] ? 1 : 0;
  if (dt.value() == DataType::kBool) {
    std::copy(bits.begin(), bits.end(), y->data<uint8_t>());
    return Status::Ok();
  }
  return dispatch_numeric(
      dt.value(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        T* yd = y->data<T>();
        for (size_t i = 0; i < bits.size(); ++i) {
          if constexpr (std::is_integral_v<T>) yd[i] = static_cast<T>(bits[i]);
          else yd[i] = from_compute<T>(bits[i]);
        }
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported output dtype ") + dtype_name(dt.value()), StatusCode::kNotImplemented); });
}

Status multinomial_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.error("Multinomial expects [batch, classes], got " + x.describe(), StatusCode::kInvalidArgument);
  const int64_t n = info.attr_int("sample_size", 1);
  if (n < 0 || !generated_size_ok({x.dim(0), n})) return ctx.error("bad sample_size " + std::to_string(n), StatusCode::kInvalidModel);
  auto dt = dtype_attr(info, DataType::kInt32);
  if (!dt.ok() || (dt.value() != DataType::kInt32 && dt.value() != DataType::kInt64)) {
    return ctx.error("Multinomial dtype must be int32 or int64", StatusCode::kInvalidModel);
  }
  auto lp = read_double_values(x);
  if (!lp.ok() || !dtype_is_float(x.dtype())) return ctx.error("Multinomial input must be float", StatusCode::kInvalidArgument);
  const int64_t B = x.dim(0), C = x.dim(1);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt.value(), {B, n}));
  if (C == 0 && B * n > 0) return ctx.error("Multinomial needs at least one class", StatusCode::kInvalidArgument);
  Rng rng = make_rng(info);
  std::vector<double> cdf(static_cast<size_t>(C));
  for (int64_t b = 0; b < B; ++b) {
    const double* row = lp.value().data() + b * C;
    double m = -INFINITY;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, row[c]);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) {
      s += std::isinf(m) ? 1.0 : std::exp(row[c] - m);
      cdf[c] = s;
    }
    for (int64_t i = 0; i < n; ++i) {
      const double u = rng.uniform() * s;
      int64_t k = std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
      k = std::min<int64_t>(k, C - 1);
      if (dt.value() == DataType::kInt32) y->data<int32_t>()[b * n + i] = static_cast<int32_t>(k);
      else y->data<int64_t>()[b * n + i] = k;
    }
  }
  return Status::Ok();
}

}  // namespace

void register_random_ops(ep::KernelRegistry& r) {
  r.add_fn("RandomUniform", &random_compute<false>);
  r.add_fn("RandomNormal", &random_compute<true>);
  r.add_fn("RandomUniformLike", &random_like_compute<false>);
  r.add_fn("RandomNormalLike", &random_like_compute<true>);
  r.add_fn("Bernoulli", &bernoulli_compute);
  r.add_fn("Multinomial", &multinomial_compute);
}

}  // namespace nxrt::ops
