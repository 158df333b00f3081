// Softmax, LogSoftmax, Hardmax.
//
// Opset < 13: the input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] (default axis 1) and
// each row is normalized. Opset >= 13: normalization along the single axis (default -1).
// Computation subtracts the row max first (numerically stable); float16/bfloat16 compute in float.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/common.h"
#include "ops/reduction_util.h"

namespace nxrt::ops {

namespace {

enum class SM { kSoftmax, kLogSoftmax, kHardmax };

template <typename T, SM K>
void softmax_ori(const T* x, T* y, int64_t O, int64_t R, int64_t I, ep::KernelContext& ctx) {
  using C = compute_t<T>;
  parallel_run(ctx, O, R * I * 8, [&](int64_t o0, int64_t o1) {
    std::vector<C> m(static_cast<size_t>(I)), s(static_cast<size_t>(I));
    std::vector<int64_t> arg(static_cast<size_t>(I));
    std::vector<C> e(K == SM::kSoftmax ? static_cast<size_t>(R * I) : 0);
    for (int64_t o = o0; o < o1; ++o) {
      const T* xo = x + o * R * I;
      T* yo = y + o * R * I;
      for (int64_t i = 0; i < I; ++i) {
        m[i] = static_cast<C>(xo[i]);
        arg[i] = 0;
        s[i] = C(0);
      }
      for (int64_t r = 1; r < R; ++r) {
        const T* xr = xo + r * I;
        for (int64_t i = 0; i < I; ++i) {
          C v = static_cast<C>(xr[i]);
          if (v > m[i]) {
            m[i] = v;
            arg[i] = r;
          }
        }
      }
      if constexpr (K == SM::kHardmax) {
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < I; ++i) yo[r * I + i] = T(static_cast<C>(arg[i] == r ? 1 : 0));
      } else if constexpr (K == SM::kSoftmax) {
        for (int64_t r = 0; r < R; ++r) {
          const T* xr = xo + r * I;
          C* er = e.data() + r * I;
          for (int64_t i = 0; i < I; ++i) {
            er[i] = std::exp(static_cast<C>(xr[i]) - m[i]);
            s[i] += er[i];
          }
        }
        for (int64_t i = 0; i < I; ++i) s[i] = C(1) / s[i];
        for (int64_t r = 0; r < R; ++r) {
          const C* er = e.data() + r * I;
          T* yr = yo + r * I;
          for (int64_t i = 0; i < I; ++i) yr[i] = T(er[i] * s[i]);
        }
      } else {
        for (int64_t r = 0; r < R; ++r) {
          const T* xr = xo + r * I;
          for (int64_t i = 0; i < I; ++i) s[i] += std::exp(static_cast<C>(xr[i]) - m[i]);
        }
        for (int64_t i = 0; i < I; ++i) s[i] = std::log(s[i]);
        for (int64_t r = 0; r < R; ++r) {
          const T* xr = xo + r * I;
          T* yr = yo + r * I;
          for (int64_t i = 0; i < I; ++i) yr[i] = T((static_cast<C>(xr[i]) - m[i]) - s[i]);
        }
      }
    }
  });
}

template <SM K>
Status softmax_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  const bool old = info.opset() < 13;
  const int64_t rank = x.rank();
  int64_t axis = info.attr_int("axis", old ? 1 : -1);
  const int64_t given = axis;
  // A scalar behaves as a 1-element vector.
  const int64_t rk = std::max<int64_t>(rank, 1);
  if (!normalize_axis(&axis, old ? rk + 1 : rk) || (!old && axis >= rk)) {
    return ctx.error("axis " + std::to_string(given) + " out of range for input " + x.describe(),
                     StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
  if (x.numel() == 0) return Status::Ok();
  ORI s;
  if (rank == 0) {
    s = ORI{1, 1, 1};
  } else if (old) {
    s.O = 1;
    s.R = 1;
    for (int64_t i = 0; i < rank; ++i) (i < axis ? s.O : s.R) *= x.shape()[static_cast<size_t>(i)];
    s.I = 1;
  } else {
    s = ori_around_axis(x.shape(), axis);
  }
  return dispatch_float(
      x.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        softmax_ori<T, K>(x.data<T>(), y->data<T>(), s.O, s.R, s.I, ctx);
        return Status::Ok();
      },
      ctx.error(std::string("unsupported dtype ") + dtype_name(x.dtype()), StatusCode::kNotImplemented));
}

}  // namespace

void register_softmax_ops(ep::KernelRegistry& r) {
  r.add_fn("Softmax", &softmax_compute<SM::kSoftmax>);
  r.add_fn("LogSoftmax", &softmax_compute<SM::kLogSoftmax>);
  r.add_fn("Hardmax", &softmax_compute<SM::kHardmax>);
}

}  // namespace nxrt::ops
