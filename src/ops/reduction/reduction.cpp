// Reduce* (L1, L2, LogSum, LogSumExp, Max, Mean, Min, Prod, Sum, SumSquare) and ArgMax/ArgMin.
//
// Every reduction is brought to one of two layouts: [O, R, I] (the reduced axes are one contiguous
// group after dropping size-1 axes and merging neighbours) computed in place, or, when the reduced
// axes are scattered, a transposed copy [kept..., reduced...] reduced as [O, R, 1].
// FP compares in selects (max, clamping) may not trap: lets g++ if-convert and vectorize them.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/common.h"
#include "ops/reduction/reduction_math.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

namespace {

enum class RK { kSum, kSumSquare, kL1, kL2, kLogSum, kLogSumExp, kMean, kProd, kMax, kMin };


// The accumulator type and the per-kind element map / combine / finalize.
template <typename T, RK K>
struct Red {
  static constexpr bool kFloat = is_float_like_v<T>;
  using A = std::conditional_t<
      kFloat, compute_t<T>,
      std::conditional_t<(K == RK::kMax || K == RK::kMin), T,
                         std::conditional_t<(K == RK::kL2 || K == RK::kLogSum || K == RK::kLogSumExp), double,
                                            uint64_t>>>;

  static A init() {
    if constexpr (K == RK::kProd) {
      return A(1);
    } else if constexpr (K == RK::kMax) {
      if constexpr (kFloat) return -std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::lowest();
    } else if constexpr (K == RK::kMin) {
      if constexpr (kFloat) return std::numeric_limits<A>::infinity();
      else return std::numeric_limits<A>::max();
    } else {
      return A(0);
    }
  }
  static A widen(T x) {
    if constexpr (kFloat) return to_compute<A>(x);
    else if constexpr (std::is_same_v<A, uint64_t> && std::is_signed_v<T>) return static_cast<uint64_t>(static_cast<int64_t>(x));
    else return static_cast<A>(x);
  }
  static A pre(T x) {
    if constexpr (K == RK::kSumSquare || K == RK::kL2) {
      A a = widen(x);
      return a * a;
    } else if constexpr (K == RK::kL1) {
      if constexpr (kFloat) return std::abs(widen(x));
      else if constexpr (std::is_signed_v<T>) return static_cast<A>(x < 0 ? -static_cast<int64_t>(x) : static_cast<int64_t>(x));
      else return widen(x);
    } else {
      return widen(x);
    }
  }
  static A combine(A acc, A v) {
    if constexpr (K == RK::kProd) {
      return acc * v;
    } else if constexpr (K == RK::kMax) {
      if constexpr (kFloat) {
        acc = v > acc ? v : acc;
        return v != v ? v : acc;  // NaN propagates
      } else {
        return v > acc ? v : acc;
      }
    } else if constexpr (K == RK::kMin) {
      if constexpr (kFloat) {
        acc = v < acc ? v : acc;
        return v != v ? v : acc;
      } else {
        return v < acc ? v : acc;
      }
    } else {
      return acc + v;
    }
  }
  static T finalize(A acc, int64_t count) {
    if constexpr (K == RK::kL2) {
      return saturate_cast<T>(std::sqrt(static_cast<double>(acc)));
    } else if constexpr (K == RK::kLogSum) {
      if constexpr (kFloat) return from_compute<T>(std::log(acc));
      else return saturate_cast<T>(std::log(acc));
    } else if constexpr (K == RK::kMean) {
      if constexpr (kFloat) {
        return from_compute<T>(acc / static_cast<A>(count));
      } else if constexpr (std::is_signed_v<T>) {
        return count == 0 ? T(0) : static_cast<T>(static_cast<int64_t>(acc) / count);
      } else {
        return count == 0 ? T(0) : static_cast<T>(acc / static_cast<uint64_t>(count));
      }
    } else if constexpr (kFloat) {
      return from_compute<T>(acc);
    } else if constexpr (std::is_same_v<A, uint64_t> && std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(acc));
    } else {
      return static_cast<T>(acc);
    }
  }
};

// LogSumExp: max pass, then sum of exp(x - max).
template <typename T>
struct LSE {
  using C = std::conditional_t<std::is_same_v<T, double>, double, std::conditional_t<is_float_like_v<T>, float, double>>;
  static C val(T x) { return static_cast<C>(static_cast<std::conditional_t<is_float_like_v<T>, compute_t<T>, double>>(x)); }
  static T finish(C m, C s) {
    C r;
    if (std::isinf(m)) r = m;  // all -inf (or empty): -inf; any +inf: +inf
    else r = m + std::log(s);
    if constexpr (is_float_like_v<T>) return from_compute<T>(r);
    else return saturate_cast<T>(static_cast<double>(r));
  }
};

template <typename T, RK K>
void reduce_ori(const T* x, T* y, int64_t O, int64_t R, int64_t I, ep::KernelContext& ctx) {
  using Rd = Red<T, K>;
  using A = typename Rd::A;
  const int64_t count = R;
  if constexpr (K == RK::kLogSumExp) {
    using L = LSE<T>;
    using C = typename L::C;
    parallel_run(ctx, O, R * I, [&](int64_t o0, int64_t o1) {
      std::vector<C> m(static_cast<size_t>(I)), s(static_cast<size_t>(I));
      for (int64_t o = o0; o < o1; ++o) {
        const T* xo = x + o * R * I;
        std::fill(m.begin(), m.end(), -std::numeric_limits<C>::infinity());
        std::fill(s.begin(), s.end(), C(0));
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < I; ++i) {
            C v = L::val(xo[r * I + i]);
            if (v > m[i] || v != v) m[i] = v;
          }
        for (int64_t r = 0; r < R; ++r)
          for (int64_t i = 0; i < I; ++i) {
            if (!std::isinf(m[i])) s[i] += exp_fast(L::val(xo[r * I + i]) - m[i]);
          }
        for (int64_t i = 0; i < I; ++i) y[o * I + i] = L::finish(m[i], s[i]);
      }
    });
    return;
  } else {
    if (I == 1) {
      // 8 independent lanes: an explicit reassociation the compiler may vectorize.
      auto range = [](const T* xo, int64_t n) {
        A acc[8];
        for (int j = 0; j < 8; ++j) acc[j] = Rd::init();
        int64_t r = 0;
        for (; r + 8 <= n; r += 8)
          for (int j = 0; j < 8; ++j) acc[j] = Rd::combine(acc[j], Rd::pre(xo[r + j]));
        for (; r < n; ++r) acc[0] = Rd::combine(acc[0], Rd::pre(xo[r]));
        const A a01 = Rd::combine(acc[0], acc[1]), a23 = Rd::combine(acc[2], acc[3]);
        const A a45 = Rd::combine(acc[4], acc[5]), a67 = Rd::combine(acc[6], acc[7]);
        return Rd::combine(Rd::combine(a01, a23), Rd::combine(a45, a67));
      };
      const int threads = ctx.pool().num_threads();
      if (threads > 1 && O < threads && R >= (int64_t(1) << 16)) {
        // Few long rows (e.g. a full reduction): split each row across the pool, combine partials.
        const int64_t parts = 4 * threads, chunk = (R + parts - 1) / parts;
        std::vector<A> partial(static_cast<size_t>(O * parts), Rd::init());
        ctx.pool().parallel_for(O * parts, 1, [&](int64_t t0, int64_t t1) {
          for (int64_t t = t0; t < t1; ++t) {
            const int64_t o = t / parts, r0 = (t % parts) * chunk, n = std::min(chunk, R - r0);
            if (n > 0) partial[t] = range(x + o * R + r0, n);
          }
        });
        for (int64_t o = 0; o < O; ++o) {
          A a = Rd::init();
          for (int64_t p = 0; p < parts; ++p) a = Rd::combine(a, partial[o * parts + p]);
          y[o] = Rd::finalize(a, count);
        }
        return;
      }
      parallel_run(ctx, O, R, [&](int64_t o0, int64_t o1) {
        for (int64_t o = o0; o < o1; ++o) y[o] = Rd::finalize(range(x + o * R, R), count);
      });
    } else {
      // Parallel over (o, chunk of i): each task owns a strip of accumulators.
      const int64_t ichunk = std::min<int64_t>(I, 1024);
      const int64_t nchunks = (I + ichunk - 1) / ichunk;
      parallel_run(ctx, O * nchunks, R * ichunk, [&](int64_t t0, int64_t t1) {
        std::vector<A> acc(static_cast<size_t>(ichunk));
        for (int64_t t = t0; t < t1; ++t) {
          const int64_t o = t / nchunks, i0 = (t % nchunks) * ichunk, n = std::min(ichunk, I - i0);
          std::fill(acc.begin(), acc.end(), Rd::init());
          A* a = acc.data();
          const T* xo = x + o * R * I + i0;
          for (int64_t r = 0; r < R; ++r) {
            const T* xr = xo + r * I;
            for (int64_t i = 0; i < n; ++i) a[i] = Rd::combine(a[i], Rd::pre(xr[i]));
          }
          T* yo = y + o * I + i0;
          for (int64_t i = 0; i < n; ++i) yo[i] = Rd::finalize(a[i], count);
        }
      });
    }
  }
}

// Elementwise "reduction over a set of one" (noop_with_empty_axes with empty axes).
template <typename T, RK K>
void reduce_noop(const T* x, T* y, int64_t n) {
  using Rd = Red<T, K>;
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (K == RK::kLogSumExp) {
      y[i] = x[i];
    } else {
      y[i] = Rd::finalize(Rd::combine(Rd::init(), Rd::pre(x[i])), 1);
    }
  }
}

template <typename T, RK K>
T empty_value(bool is_bool) {
  if constexpr (K == RK::kLogSumExp) {
    return LSE<T>::finish(-std::numeric_limits<typename LSE<T>::C>::infinity(), 0);
  } else {
    if (is_bool) {
      if constexpr (K == RK::kMin) return T(1);
      if constexpr (K == RK::kMax) return T(0);
    }
    return Red<T, K>::finalize(Red<T, K>::init(), 0);
  }
}

const char* rk_name(RK k) {
  switch (k) {
    case RK::kSum: return "ReduceSum";
    case RK::kSumSquare: return "ReduceSumSquare";
    case RK::kL1: return "ReduceL1";
    case RK::kL2: return "ReduceL2";
    case RK::kLogSum: return "ReduceLogSum";
    case RK::kLogSumExp: return "ReduceLogSumExp";
    case RK::kMean: return "ReduceMean";
    case RK::kProd: return "ReduceProd";
    case RK::kMax: return "ReduceMax";
    case RK::kMin: return "ReduceMin";
  }
  return "Reduce";
}

// Resolves axes / keepdims / noop into a plan. Returns false in *reduce when the op is a noop.
struct ReducePlan {
  bool noop = false;
  Dims reduced;  // per input axis: 1 when reduced (inline: planning allocates nothing)
  Dims out_shape;
};

Result<ReducePlan> plan_reduction(ep::KernelContext& ctx, const Tensor& x, bool axes_from_input) {
  const auto& info = ctx.info();
  ReducePlan p;
  const int64_t rank = x.rank();
  Dims axes;
  if (axes_from_input) {
    if (ctx.has_input(1)) {
      const Tensor& at = ctx.input(1);
      if (at.dtype() == DataType::kInt64) {
        axes.assign(at.data<int64_t>(), at.data<int64_t>() + at.numel());
      } else {
        auto v = read_int_values(at);
        if (!v.ok()) return ctx.error("axes input: " + v.status().message());
        axes = v.value();
      }
    }
  } else {
    axes = info.attr_ints("axes");
  }
  const bool keepdims = info.attr_int("keepdims", 1) != 0;
  const bool noop_empty = info.attr_int("noop_with_empty_axes", 0) != 0;
  p.reduced.assign(static_cast<size_t>(rank), 0);
  if (axes.empty()) {
    if (noop_empty) {
      p.noop = true;
      p.out_shape = x.shape();
      return p;
    }
    std::fill(p.reduced.begin(), p.reduced.end(), 1);
  } else {
    for (int64_t a : axes) {
      int64_t ax = a;
      if (!normalize_axis(&ax, rank)) {
        return ctx.error("axis " + std::to_string(a) + " out of range for input " + x.describe(),
                         StatusCode::kInvalidArgument);
      }
      p.reduced[static_cast<size_t>(ax)] = 1;
    }
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (!p.reduced[static_cast<size_t>(i)]) p.out_shape.push_back(x.shape()[static_cast<size_t>(i)]);
    else if (keepdims) p.out_shape.push_back(1);
  }
  return p;
}

template <RK K>
Status reduce_compute(ep::KernelContext& ctx) {
  const int64_t opset = ctx.info().opset();
  const int64_t axes_input_since = K == RK::kSum ? 13 : 18;
  const Tensor& x = ctx.input(0);
  NXRT_ASSIGN_OR_RETURN(ReducePlan plan, plan_reduction(ctx, x, opset >= axes_input_since));
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), plan.out_shape));
  const bool is_bool = x.dtype() == DataType::kBool;
  if (is_bool && K != RK::kMax && K != RK::kMin) {
    return ctx.error(std::string(rk_name(K)) + " does not support bool input", StatusCode::kNotImplemented);
  }
  const DataType dt = is_bool ? DataType::kUInt8 : x.dtype();
  auto unsupported = [&] {
    return ctx.error(std::string(rk_name(K)) + ": unsupported dtype " + dtype_name(x.dtype()), StatusCode::kNotImplemented);
  };
  return dispatch_numeric(
      dt,
      [&](auto tag) -> Status {
        using T = decltype(tag);
        T* yd = y->data<T>();
        if (plan.noop) {
          reduce_noop<T, K>(x.data<T>(), yd, x.numel());
          if (is_bool) {
            for (int64_t i = 0; i < x.numel(); ++i) yd[i] = static_cast<T>(x.data<uint8_t>()[i] != 0);
          }
          return Status::Ok();
        }
        const int64_t out_n = y->numel();
        if (out_n == 0) return Status::Ok();
        int64_t R = 1;
        for (int64_t i = 0; i < x.rank(); ++i)
          if (plan.reduced[static_cast<size_t>(i)]) R *= x.shape()[static_cast<size_t>(i)];
        if (R == 0) {
          const T v = empty_value<T, K>(is_bool);
          std::fill(yd, yd + out_n, v);
          return Status::Ok();
        }
        // Merge axes into groups of (reduced?) ignoring size-1 axes.
        // (inline arrays: the common cases allocate nothing)
        Dims gred, gsize;
        for (int64_t i = 0; i < x.rank(); ++i) {
          const int64_t d = x.shape()[static_cast<size_t>(i)];
          if (d == 1) continue;
          const int64_t r = plan.reduced[static_cast<size_t>(i)];
          if (!gred.empty() && gred.back() == r) gsize.back() *= d;
          else {
            gred.push_back(r);
            gsize.push_back(d);
          }
        }
        int n_red_groups = 0;
        for (int64_t g : gred) n_red_groups += g ? 1 : 0;
        if (n_red_groups <= 1) {
          int64_t O = 1, Rr = 1, I = 1;
          bool seen = false;
          for (size_t gi = 0; gi < gred.size(); ++gi) {
            if (gred[gi]) { Rr = gsize[gi]; seen = true; }
            else if (!seen) O *= gsize[gi];
            else I *= gsize[gi];
          }
          reduce_ori<T, K>(x.data<T>(), yd, O, Rr, I, ctx);
          return Status::Ok();
        }
        // Scattered reduced axes: transpose kept axes to the front.
        Dims perm_shape, perm_strides;
        const Dims st = contiguous_strides(x.shape());
        int64_t O = 1;
        for (int pass = 0; pass < 2; ++pass) {
          for (int64_t i = 0; i < x.rank(); ++i) {
            if ((plan.reduced[static_cast<size_t>(i)] != 0) == (pass == 1)) {
              perm_shape.push_back(x.shape()[static_cast<size_t>(i)]);
              perm_strides.push_back(st[static_cast<size_t>(i)]);
              if (pass == 0) O *= x.shape()[static_cast<size_t>(i)];
            }
          }
        }
        Tensor view(x.dtype(), perm_shape, x.storage(), x.byte_offset(), perm_strides);
        Tensor t = view.contiguous();
        reduce_ori<T, K>(t.data<T>(), yd, O, R, 1, ctx);
        return Status::Ok();
      },
      unsupported);
}

// ---------------------------------------------------------------------------------------------
// ArgMax / ArgMin

template <bool kMax>
Status arg_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  int64_t axis = info.attr_int("axis", 0);
  const bool keepdims = info.attr_int("keepdims", 1) != 0;
  const bool last = info.opset() >= 12 && info.attr_int("select_last_index", 0) != 0;
  const int64_t rank = x.rank();
  if (!normalize_axis(&axis, std::max<int64_t>(rank, 1))) {
    return ctx.error("axis " + std::to_string(info.attr_int("axis", 0)) + " out of range for " + x.describe(),
                     StatusCode::kInvalidArgument);
  }
  Dims out_shape;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != axis) out_shape.push_back(x.shape()[static_cast<size_t>(i)]);
    else if (keepdims) out_shape.push_back(1);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt64, out_shape));
  if (y->numel() == 0) return Status::Ok();
  ORI s = rank == 0 ? ORI{} : ori_around_axis(x.shape(), axis);
  if (s.R == 0) return ctx.error("cannot take Arg" + std::string(kMax ? "Max" : "Min") + " over an empty axis of " + x.describe(), StatusCode::kInvalidArgument);
  int64_t* yd = y->data<int64_t>();
  return dispatch_numeric(
      x.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using C = compute_t<T>;
        const T* xd = x.data<T>();
        auto better = [&](C v, C best) {
          if constexpr (kMax) return last ? v >= best : v > best;
          else return last ? v <= best : v < best;
        };
        parallel_run(ctx, s.O, s.R * s.I, [&](int64_t o0, int64_t o1) {
          std::vector<C> best(static_cast<size_t>(s.I));
          for (int64_t o = o0; o < o1; ++o) {
            const T* xo = xd + o * s.R * s.I;
            int64_t* yo = yd + o * s.I;
            for (int64_t i = 0; i < s.I; ++i) {
              best[i] = static_cast<C>(xo[i]);
              yo[i] = 0;
            }
            for (int64_t r = 1; r < s.R; ++r) {
              const T* xr = xo + r * s.I;
              for (int64_t i = 0; i < s.I; ++i) {
                C v = static_cast<C>(xr[i]);
                if (better(v, best[i])) {
                  best[i] = v;
                  yo[i] = r;
                }
              }
            }
          }
        });
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(x.dtype()), StatusCode::kNotImplemented); });
}

}  // namespace

void register_reduction_ops(ep::KernelRegistry& r) {
  r.add_fn("ReduceSum", &reduce_compute<RK::kSum>);
  r.add_fn("ReduceSumSquare", &reduce_compute<RK::kSumSquare>);
  r.add_fn("ReduceL1", &reduce_compute<RK::kL1>);
  r.add_fn("ReduceL2", &reduce_compute<RK::kL2>);
  r.add_fn("ReduceLogSum", &reduce_compute<RK::kLogSum>);
  r.add_fn("ReduceLogSumExp", &reduce_compute<RK::kLogSumExp>);
  r.add_fn("ReduceMean", &reduce_compute<RK::kMean>);
  r.add_fn("ReduceProd", &reduce_compute<RK::kProd>);
  r.add_fn("ReduceMax", &reduce_compute<RK::kMax>);
  r.add_fn("ReduceMin", &reduce_compute<RK::kMin>);
  r.add_fn("ArgMax", &arg_compute<true>);
  r.add_fn("ArgMin", &arg_compute<false>);
  register_softmax_ops(r);
  register_cumulative_ops(r);
}

}  // namespace nxrt::ops
