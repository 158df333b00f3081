// CumSum (opset 11, 14) and CumProd (opset 26): inclusive/exclusive, forward/reverse, along an axis
// given as a 0-D (or 1-element) int32/int64 input.
#include <algorithm>
#include <vector>

#include "ops/common.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

namespace {

template <typename C, bool = std::is_integral_v<C>> struct WrapAcc { using type = C; };
template <typename C> struct WrapAcc<C, true> { using type = uint64_t; };

template <typename T, bool kProd>
void cumulate(const T* x, T* y, ORI s, bool exclusive, bool reverse, ep::KernelContext& ctx) {
  using C = compute_t<T>;
  // Integer accumulation wraps (unsigned arithmetic) rather than overflowing.
  using A = typename WrapAcc<C>::type;
  parallel_run(ctx, s.O, s.R * s.I, [&](int64_t o0, int64_t o1) {
    std::vector<A> acc(static_cast<size_t>(s.I));
    for (int64_t o = o0; o < o1; ++o) {
      const T* xo = x + o * s.R * s.I;
      T* yo = y + o * s.R * s.I;
      std::fill(acc.begin(), acc.end(), kProd ? A(1) : A(0));
      for (int64_t step = 0; step < s.R; ++step) {
        const int64_t r = reverse ? s.R - 1 - step : step;
        const T* xr = xo + r * s.I;
        T* yr = yo + r * s.I;
        for (int64_t i = 0; i < s.I; ++i) {
          const A v = static_cast<A>(static_cast<C>(xr[i]));
          if (exclusive) {
            yr[i] = T(static_cast<C>(acc[i]));
            acc[i] = kProd ? A(acc[i] * v) : A(acc[i] + v);
          } else {
            acc[i] = kProd ? A(acc[i] * v) : A(acc[i] + v);
            yr[i] = T(static_cast<C>(acc[i]));
          }
        }
      }
    }
  });
}

template <bool kProd>
Status cum_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  if (!ctx.has_input(1)) return ctx.error("missing axis input", StatusCode::kInvalidModel);
  auto a = read_scalar_int(ctx.input(1));
  if (!a.ok()) return ctx.error("axis: " + a.status().message(), StatusCode::kInvalidArgument);
  int64_t axis = a.value();
  if (!normalize_axis(&axis, std::max<int64_t>(x.rank(), 1))) {
    return ctx.error("axis " + std::to_string(a.value()) + " out of range for " + x.describe(),
                     StatusCode::kInvalidArgument);
  }
  const bool exclusive = info.attr_int("exclusive", 0) != 0;
  const bool reverse = info.attr_int("reverse", 0) != 0;
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
  if (x.numel() == 0) return Status::Ok();
  ORI s = x.rank() == 0 ? ORI{} : ori_around_axis(x.shape(), axis);
  return dispatch_numeric(
      x.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        cumulate<T, kProd>(x.data<T>(), y->data<T>(), s, exclusive, reverse, ctx);
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(x.dtype()), StatusCode::kNotImplemented); });
}

}  // namespace

void register_cumulative_ops(ep::KernelRegistry& r) {
  r.add_fn("CumSum", &cum_compute<false>);
  r.add_fn("CumProd", &cum_compute<true>);
}

}  // namespace nxrt::ops
