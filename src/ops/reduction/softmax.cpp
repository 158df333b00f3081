// Softmax, LogSoftmax, Hardmax.
//
// Opset < 13: the input is coerced to 2-D [prod(dims[:axis]), prod(dims[axis:])] (default axis 1) and
// each row is normalized. Opset >= 13: normalization along the single axis (default -1).
// Computation subtracts the row max first (numerically stable); float16/bfloat16 compute in float.
// FP compares in selects (max, clamping) may not trap: lets g++ if-convert and vectorize them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/common.h"
#include "ops/elementwise/vec_math.h"
#include "ops/reduction/reduction_math.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

namespace {

enum class SM { kSoftmax, kLogSoftmax, kHardmax };

// Rows of R contiguous values (I == 1): vectorized max / exp / sum passes.
template <typename T, SM K>
void softmax_rows(const T* x, T* y, int64_t O, int64_t R, ep::KernelContext& ctx) {
  using C = compute_t<T>;
  constexpr bool kDirect = std::is_same_v<T, C>;
  if constexpr (std::is_same_v<T, float> && K != SM::kHardmax) {
    // Float rows on the vector body of the kernel's tier (ops/elementwise/vec_math.h): the loops below
    // are its reference (scalar tier, other dtypes). 4096 rows of 1024, 1 thread on Zen 5: 14.8 ms
    // there (exp_fast as SSE2 code), 2.5 here.
    if (const vecmath::SoftmaxRowFn row = vecmath::softmax_row_for_tier(ctx.info().isa())) {
      parallel_run(ctx, O, R * 8, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) row(x + o * R, y + o * R, R, K == SM::kLogSoftmax);
      });
      return;
    }
  }
  parallel_run(ctx, O, R * 8, [&](int64_t o0, int64_t o1) {
    std::vector<C> in_buf(kDirect ? 0 : static_cast<size_t>(R));
    std::vector<C> e_buf(static_cast<size_t>(K == SM::kSoftmax && kDirect ? 0 : R));
    for (int64_t o = o0; o < o1; ++o) {
      const T* xo = x + o * R;
      T* yo = y + o * R;
      const C* xr;
      if constexpr (kDirect) {
        xr = xo;
      } else {
        for (int64_t r = 0; r < R; ++r) in_buf[r] = static_cast<C>(xo[r]);
        xr = in_buf.data();
      }
      if constexpr (K == SM::kHardmax) {
        int64_t arg = 0;
        C best = xr[0];
        for (int64_t r = 1; r < R; ++r) {
          if (xr[r] > best) {
            best = xr[r];
            arg = r;
          }
        }
        for (int64_t r = 0; r < R; ++r) yo[r] = T(static_cast<C>(r == arg ? 1 : 0));
        continue;
      }
      const C m = row_max(xr, R);
      C* e;
      if constexpr (K == SM::kSoftmax && kDirect) {
        e = yo;
      } else {
        e = e_buf.data();
      }
      for (int64_t r = 0; r < R; ++r) e[r] = exp_fast(xr[r] - m);
      const C sum = row_sum(e, R);
      if constexpr (K == SM::kSoftmax) {
        const C inv = C(1) / sum;
        if constexpr (kDirect) {
          for (int64_t r = 0; r < R; ++r) yo[r] = e[r] * inv;
        } else {
          for (int64_t r = 0; r < R; ++r) yo[r] = T(e[r] * inv);
        }
      } else {
        const C ls = std::log(sum);
        if constexpr (kDirect) {
          for (int64_t r = 0; r < R; ++r) yo[r] = (xr[r] - m) - ls;
        } else {
          for (int64_t r = 0; r < R; ++r) yo[r] = T((xr[r] - m) - ls);
        }
      }
    }
  });
}

// General [O, R, I] layout: vector work runs across the I contiguous columns.
template <typename T, SM K>
void softmax_ori(const T* x, T* y, int64_t O, int64_t R, int64_t I, ep::KernelContext& ctx) {
  using C = compute_t<T>;
  if (I == 1) {
    softmax_rows<T, K>(x, y, O, R, ctx);
    return;
  }
  // Float softmax: the exponentials on the vector map of the kernel's tier (vec_math.h), a row of I
  // at a time ([16, 64, 4096] over axis 1, 1 thread on Zen 5: 12.5 ms with exp_fast's loop).
  const vecmath::MapFn exp_map = std::is_same_v<T, float> ? vecmath::map_for_tier(ctx.info().isa()) : nullptr;
  parallel_run(ctx, O, R * I * 8, [&](int64_t o0, int64_t o1) {
    std::vector<C> m(static_cast<size_t>(I)), s(static_cast<size_t>(I));
    std::vector<C> neg_m(exp_map ? static_cast<size_t>(I) : 0);
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
      if constexpr (K == SM::kHardmax) {
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
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < I; ++i) yo[r * I + i] = T(static_cast<C>(arg[i] == r ? 1 : 0));
        continue;
      }
      for (int64_t r = 1; r < R; ++r) {
        const T* xr = xo + r * I;
        C* mp = m.data();
        for (int64_t i = 0; i < I; ++i) {
          const C v = static_cast<C>(xr[i]);
          mp[i] = (v > mp[i] || v != v) ? v : mp[i];
        }
      }
      if constexpr (K == SM::kSoftmax) {
        for (int64_t r = 0; r < R; ++r) {
          const T* xr = xo + r * I;
          C* er = e.data() + r * I;
          C* sp = s.data();
          const C* mp = m.data();
          if constexpr (std::is_same_v<T, float>) {
            if (exp_map) {  // e = e^{x + (-max)}, the same value as x - max, on the vector exp
              if (r == 0)
                for (int64_t i = 0; i < I; ++i) neg_m[i] = -m[i];
              exp_map(vecmath::Fn::kExp, xr, neg_m.data(), er, I);
              for (int64_t i = 0; i < I; ++i) sp[i] += er[i];
              continue;
            }
          }
          for (int64_t i = 0; i < I; ++i) {
            er[i] = exp_fast(static_cast<C>(xr[i]) - mp[i]);
            sp[i] += er[i];
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
          C* sp = s.data();
          const C* mp = m.data();
          for (int64_t i = 0; i < I; ++i) sp[i] += exp_fast(static_cast<C>(xr[i]) - mp[i]);
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
  // Old opsets accept axis == rank (a single column per row); negative axes count from rank.
  if (axis < 0) axis += rk;
  if (axis < 0 || axis > rk || (!old && axis == rk)) {
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
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(x.dtype()), StatusCode::kNotImplemented); });
}

}  // namespace

void register_softmax_ops(ep::KernelRegistry& r) {
  r.add_fn("Softmax", &softmax_compute<SM::kSoftmax>);
  r.add_fn("LogSoftmax", &softmax_compute<SM::kLogSoftmax>);
  r.add_fn("Hardmax", &softmax_compute<SM::kHardmax>);
}

}  // namespace nxrt::ops
