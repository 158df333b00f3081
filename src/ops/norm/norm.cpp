// Normalization ops: BatchNormalization (all versions), InstanceNormalization, LayerNormalization,
// GroupNormalization (18 and 21 semantics), MeanVarianceNormalization, LpNormalization, RMSNormalization.
//
// Statistics accumulate in double; the elementwise passes run in float (double for double tensors).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "ops/common.h"
#include "ops/contrib/skip_norm_rows.h"

namespace nxrt::ops {

namespace {

// Mean and (biased) variance of n values at stride 1.
template <typename T>
void mean_var(const T* x, int64_t n, double* mean, double* var) {
  // Eight running sums, element i into sum i % 8, added up at the end: the loops vectorize, where one
  // running double total waited on each add (InstanceNormalization of 64 planes of 128x128 at 1 thread
  // on Zen 5: 1.66 ms, most of it here).
  constexpr int kLanes = 8;
  double s[kLanes] = {}, q[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) s[j] += static_cast<double>(to_compute<float>(x[i + j]));
  for (int j = 0; i + j < n; ++j) s[j] += static_cast<double>(to_compute<float>(x[i + j]));
  double total = 0;
  for (int j = 0; j < kLanes; ++j) total += s[j];
  const double m = n > 0 ? total / static_cast<double>(n) : 0.0;
  for (i = 0; i + kLanes <= n; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const double d = static_cast<double>(to_compute<float>(x[i + j])) - m;
      q[j] += d * d;
    }
  for (int j = 0; i + j < n; ++j) {
    const double d = static_cast<double>(to_compute<float>(x[i + j])) - m;
    q[j] += d * d;
  }
  double v = 0;
  for (int j = 0; j < kLanes; ++j) v += q[j];
  *mean = m;
  *var = n > 0 ? v / static_cast<double>(n) : 0.0;
}
template <>
void mean_var<double>(const double* x, int64_t n, double* mean, double* var) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += x[i];
  const double m = n > 0 ? s / static_cast<double>(n) : 0.0;
  double v = 0;
  for (int64_t i = 0; i < n; ++i) v += (x[i] - m) * (x[i] - m);
  *mean = m;
  *var = n > 0 ? v / static_cast<double>(n) : 0.0;
}

// y[i] = x[i] * a + b over n values.
template <typename T>
void affine(const T* x, T* y, int64_t n, double a, double b) {
  using CT = compute_t<T>;
  const CT af = static_cast<CT>(a), bf = static_cast<CT>(b);
  for (int64_t i = 0; i < n; ++i) y[i] = from_compute<T>(to_compute<CT>(x[i]) * af + bf);
}

// `t` expanded (unidirectional broadcast) to `shape`, as double values.
Result<std::vector<double>> broadcast_to(const Tensor& t, const Dims& shape, const char* what) {
  NXRT_ASSIGN_OR_RETURN(std::vector<double> v, read_double_values(t));
  if (t.shape() == shape) return v;
  Dims out;
  if (!broadcast_shapes(shape, t.shape(), &out) || out != shape) {
    return invalid_argument(std::string(what) + " " + t.describe() + " does not broadcast to " + shape_to_string(shape));
  }
  const Dims st = broadcast_strides(t.shape(), shape);
  const int64_t n = shape_numel(shape);
  std::vector<double> r(static_cast<size_t>(n));
  auto cur = strided_cursor(shape, shape.size(), st);
  for (int64_t i = 0; i < n; ++i, cur.next()) r[i] = v[cur.offset(0)];
  return r;
}

Status unsupported_dtype(const ep::KernelContext& ctx, DataType dt) {
  return ctx.error(std::string(ctx.info().op_type()) + " does not support dtype " + dtype_name(dt));
}

// ------------------------------------------------------------------------------------------------
// BatchNormalization

Status batch_norm(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const int64_t opset = info.opset();
  const Tensor& X = ctx.input(0);
  for (size_t i = 1; i < 5; ++i)
    if (!ctx.has_input(i)) return ctx.error("missing input " + std::to_string(i));
  const double eps = info.attr_float("epsilon", 1e-5f);
  const double momentum = info.attr_float("momentum", 0.9f);
  if (X.rank() < 1) return ctx.error("X must have rank >= 1, got " + X.describe());
  const int64_t N = X.dim(0);
  int64_t C = X.rank() >= 2 ? X.dim(1) : 1;
  int64_t plane = (N * C) > 0 ? X.numel() / (N * C) : 0;
  bool training;
  if (opset >= 14) {
    training = info.attr_int("training_mode", 0) != 0;
  } else {
    size_t present = 0;
    for (size_t i = 1; i < ctx.num_outputs(); ++i) present += ctx.output_requested(i) ? 1 : 0;
    training = present > 0 && (opset >= 7 || info.attr_int("is_test", 0) == 0);
  }
  // spatial=0 (before opset 9): statistics per (channel, position) rather than per channel.
  const bool spatial = opset >= 9 || info.attr_int("spatial", 1) != 0;
  if (!spatial) {
    C = C * plane;
    plane = 1;
  }
  NXRT_ASSIGN_OR_RETURN(std::vector<double> scale, read_double_values(ctx.input(1)));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> bias, read_double_values(ctx.input(2)));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> mean, read_double_values(ctx.input(3)));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> var, read_double_values(ctx.input(4)));
  for (size_t i = 1; i < 5; ++i) {
    if (ctx.input(i).numel() != C) {
      return ctx.error("input " + std::to_string(i) + " " + ctx.input(i).describe() + " must have " +
                       std::to_string(C) + " values for X " + X.describe());
    }
  }
  std::vector<double> cur_mean = mean, cur_var = var;
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        const T* x = X.data<T>();
        T* y = Y->data<T>();
        if (training) {
          // Per-channel batch statistics over N and the spatial positions.
          ctx.pool().parallel_for(C, 1, [&](int64_t c0, int64_t c1) {
            for (int64_t c = c0; c < c1; ++c) {
              double s = 0;
              for (int64_t n = 0; n < N; ++n) {
                const T* p = x + (n * C + c) * plane;
                for (int64_t i = 0; i < plane; ++i) s += static_cast<double>(to_compute<compute_t<T>>(p[i]));
              }
              const double cnt = static_cast<double>(N * plane);
              const double m = cnt > 0 ? s / cnt : 0.0;
              double v = 0;
              for (int64_t n = 0; n < N; ++n) {
                const T* p = x + (n * C + c) * plane;
                for (int64_t i = 0; i < plane; ++i) {
                  const double d = static_cast<double>(to_compute<compute_t<T>>(p[i])) - m;
                  v += d * d;
                }
              }
              cur_mean[c] = m;
              cur_var[c] = cnt > 0 ? v / cnt : 0.0;
            }
          });
        }
        const std::vector<double>& um = training ? cur_mean : mean;
        const std::vector<double>& uv = training ? cur_var : var;
        ctx.pool().parallel_for(N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)),
                                [&](int64_t p0, int64_t p1) {
                                  for (int64_t p = p0; p < p1; ++p) {
                                    const int64_t c = p % C;
                                    const double a = scale[c] / std::sqrt(uv[c] + eps);
                                    affine(x + p * plane, y + p * plane, plane, a, bias[c] - um[c] * a);
                                  }
                                });
        if (training) {
          // Extra outputs: running mean/var (1, 2); before opset 14 also the saved batch mean/var (3, 4).
          auto write = [&](size_t idx, const Tensor& like, const std::vector<double>& v) -> Status {
            if (idx >= ctx.num_outputs() || !ctx.output_requested(idx)) return Status::Ok();
            NXRT_ASSIGN_OR_RETURN(Tensor * o, ctx.allocate_output(idx, like.dtype(), like.shape()));
            return dispatch_float(
                like.dtype(),
                [&](auto t2) -> Status {
                  using U = decltype(t2);
                  for (size_t i = 0; i < v.size(); ++i) o->data<U>()[i] = from_compute<U>(static_cast<compute_t<U>>(v[i]));
                  return Status::Ok();
                },
                [&] { return unsupported_dtype(ctx, like.dtype()); });
          };
          std::vector<double> run_mean(mean.size()), run_var(var.size());
          for (size_t c = 0; c < mean.size(); ++c) {
            run_mean[c] = mean[c] * momentum + cur_mean[c] * (1 - momentum);
            run_var[c] = var[c] * momentum + cur_var[c] * (1 - momentum);
          }
          NXRT_RETURN_IF_ERROR(write(1, ctx.input(3), run_mean));
          NXRT_RETURN_IF_ERROR(write(2, ctx.input(4), run_var));
          if (opset < 14) {
            NXRT_RETURN_IF_ERROR(write(3, ctx.input(3), cur_mean));
            NXRT_RETURN_IF_ERROR(write(4, ctx.input(4), cur_var));
          }
        }
        return Status::Ok();
      },
      [&] { return unsupported_dtype(ctx, X.dtype()); });
}

// ------------------------------------------------------------------------------------------------
// InstanceNormalization and GroupNormalization: statistics per (n, group of channels).

// Normalizes X viewed as [N, G, ch_per_group, plane]; scale/bias indexed per channel (or per group).
template <typename T>
void group_normalize(ep::KernelContext& ctx, const T* x, T* y, int64_t N, int64_t G, int64_t cpg, int64_t plane,
                     const std::vector<double>& scale, const std::vector<double>& bias, bool per_group,
                     double eps) {
  const int64_t chunk = cpg * plane;
  ctx.pool().parallel_for(N * G, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, chunk)), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t g = p % G;
      double m, v;
      mean_var(x + p * chunk, chunk, &m, &v);
      const double inv = 1.0 / std::sqrt(v + eps);
      for (int64_t c = 0; c < cpg; ++c) {
        const int64_t ch = g * cpg + c;
        const double s = per_group ? scale[g] : scale[ch];
        const double b = per_group ? bias[g] : bias[ch];
        const double a = s * inv;
        affine(x + p * chunk + c * plane, y + p * chunk + c * plane, plane, a, b - m * a);
      }
    }
  });
}

Status instance_norm(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("missing scale or B");
  if (X.rank() < 2) return ctx.error("X must have rank >= 2 (N, C, ...), got " + X.describe());
  const double eps = ctx.info().attr_float("epsilon", 1e-5f);
  const int64_t N = X.dim(0), C = X.dim(1);
  const int64_t plane = N * C > 0 ? X.numel() / (N * C) : 0;
  NXRT_ASSIGN_OR_RETURN(std::vector<double> scale, read_double_values(ctx.input(1)));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> bias, read_double_values(ctx.input(2)));
  if (static_cast<int64_t>(scale.size()) != C || static_cast<int64_t>(bias.size()) != C) {
    return ctx.error("scale " + ctx.input(1).describe() + " and B " + ctx.input(2).describe() + " must have " +
                     std::to_string(C) + " values");
  }
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        group_normalize<T>(ctx, X.data<T>(), Y->data<T>(), N, C, 1, plane, scale, bias, false, eps);
        return Status::Ok();
      },
      [&] { return unsupported_dtype(ctx, X.dtype()); });
}

Status group_norm(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!ctx.has_input(1) || !ctx.has_input(2)) return ctx.error("missing scale or bias");
  if (X.rank() < 2) return ctx.error("X must have rank >= 2 (N, C, ...), got " + X.describe());
  const auto& info = ctx.info();
  const double eps = info.attr_float("epsilon", 1e-5f);
  const int64_t G = info.attr_int("num_groups", 0);
  const int64_t N = X.dim(0), C = X.dim(1);
  if (G < 1 || C % G != 0) {
    return ctx.error("num_groups " + std::to_string(G) + " must be >= 1 and divide the channels of " + X.describe());
  }
  const int64_t plane = N * C > 0 ? X.numel() / (N * C) : 0;
  NXRT_ASSIGN_OR_RETURN(std::vector<double> scale, read_double_values(ctx.input(1)));
  NXRT_ASSIGN_OR_RETURN(std::vector<double> bias, read_double_values(ctx.input(2)));
  // Opset 18: scale/bias per group; opset 21: per channel.
  bool per_group;
  if (static_cast<int64_t>(scale.size()) == C && static_cast<int64_t>(bias.size()) == C &&
      (info.opset() >= 21 || C != G)) {
    per_group = false;
  } else if (static_cast<int64_t>(scale.size()) == G && static_cast<int64_t>(bias.size()) == G) {
    per_group = true;
  } else {
    return ctx.error("scale " + ctx.input(1).describe() + " and bias " + ctx.input(2).describe() + " must have " +
                     std::to_string(info.opset() >= 21 ? C : G) + " values");
  }
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        group_normalize<T>(ctx, X.data<T>(), Y->data<T>(), N, G, C / G, plane, scale, bias, per_group, eps);
        return Status::Ok();
      },
      [&] { return unsupported_dtype(ctx, X.dtype()); });
}

// ------------------------------------------------------------------------------------------------
// LayerNormalization and RMSNormalization: normalize over axes [axis, rank).

DataType stash_dtype(int64_t stash) {
  return is_known_dtype(static_cast<int32_t>(stash)) ? static_cast<DataType>(stash) : DataType::kFloat;
}

template <bool kRms>
Status last_axes_norm(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const auto& info = ctx.info();
  if (!ctx.has_input(1)) return ctx.error("missing input Scale");
  int64_t axis = info.attr_int("axis", -1);
  if (!normalize_axis(&axis, X.rank())) {
    return ctx.error("axis " + std::to_string(axis) + " is out of range for " + X.describe());
  }
  const double eps = info.attr_float("epsilon", 1e-5f);
  const DataType stash = stash_dtype(info.attr_int("stash_type", 1));
  const Dims norm_shape(X.shape().begin() + axis, X.shape().end());
  const int64_t inner = shape_numel(norm_shape);
  const int64_t outer = inner > 0 ? X.numel() / inner : 0;
  Dims stat_shape(X.shape().begin(), X.shape().begin() + axis);
  for (int64_t i = axis; i < X.rank(); ++i) stat_shape.push_back(1);
  // Scale/B already shaped like the normalized axes and in the compute type are read in place (the
  // usual case, and allocation-free); anything needing a broadcast or a conversion is expanded first.
  auto direct = [&](size_t i) {
    const Tensor& t = ctx.input(i);
    if (t.numel() != inner || t.rank() > static_cast<int64_t>(norm_shape.size()) || t.dtype() != X.dtype() ||
        (t.dtype() != DataType::kFloat && t.dtype() != DataType::kDouble))
      return false;
    const size_t off = norm_shape.size() - static_cast<size_t>(t.rank());
    for (int64_t d = 0; d < t.rank(); ++d)
      if (t.dim(d) != norm_shape[off + static_cast<size_t>(d)]) return false;
    return true;
  };
  const bool has_b = ctx.has_input(2);
  std::vector<double> scale, bias;
  if (!direct(1)) {
    auto sc = broadcast_to(ctx.input(1), norm_shape, "Scale");
    if (!sc.ok()) return ctx.error(sc.status().message());
    scale = std::move(sc.value());
  }
  if (has_b && !direct(2)) {
    auto b = broadcast_to(ctx.input(2), norm_shape, "B");
    if (!b.ok()) return ctx.error(b.status().message());
    bias = std::move(b.value());
  }
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using CT = compute_t<T>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        // Per-row statistics are kept only for LayerNormalization's optional outputs.
        bool want_stats = false;
        if constexpr (!kRms) {
          for (size_t idx : {size_t(1), size_t(2)})
            if (idx < ctx.num_outputs() && ctx.output_requested(idx)) want_stats = true;
        }
        std::vector<double> means, invs;
        if (want_stats) {
          means.resize(static_cast<size_t>(outer));
          invs.resize(static_cast<size_t>(outer));
        }
        const T* x = X.data<T>();
        T* y = Y->data<T>();
        std::vector<CT> sc_conv, b_conv;
        const CT* sc_ct;
        const CT* b_ct = nullptr;
        if constexpr (std::is_same_v<T, CT>) {
          sc_ct = scale.empty() ? ctx.input(1).data<CT>() : nullptr;
          if (has_b && bias.empty()) b_ct = ctx.input(2).data<CT>();
        } else {
          sc_ct = nullptr;
        }
        if (!sc_ct) {
          sc_conv.assign(scale.begin(), scale.end());
          sc_ct = sc_conv.data();
        }
        if (has_b && !b_ct) {
          b_conv.assign(bias.begin(), bias.end());
          b_ct = b_conv.data();
        }
        const bool round_stash = stash != DataType::kDouble && std::is_same_v<T, double>;
        bool vectorized = false;
        if constexpr (std::is_same_v<T, float>) {
          // Float rows on the vector body SkipLayerNormalization uses (statistics in double lanes,
          // contrib/skip_norm_rows.h); the loop below is its reference (scalar tier, other dtypes).
          // 4096 rows of 1024, 1 thread on Zen 5: 8.4 ms there, see the commit.
          const ep::IsaTier isa = ctx.info().isa();
          vectorized = contrib::skip_norm_row_vectorized(isa);
          if (vectorized) {
            ctx.pool().parallel_for(outer, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, inner)),
                                    [&](int64_t r0, int64_t r1) {
                                      for (int64_t r = r0; r < r1; ++r) {
                                        contrib::SkipNormRow row;
                                        row.x = x + r * inner;
                                        row.gamma = sc_ct;
                                        row.beta = b_ct;
                                        row.y = y + r * inner;
                                        row.H = inner;
                                        row.simplified = kRms;
                                        row.eps = eps;
                                        double m = 0, inv = 0;
                                        contrib::skip_norm_row_f32(isa, row, &m, &inv);
                                        if (want_stats) {
                                          means[r] = m;
                                          invs[r] = inv;
                                        }
                                      }
                                    });
          }
        }
        if (!vectorized) {
          ctx.pool().parallel_for(outer, std::max<int64_t>(1, 8192 / std::max<int64_t>(1, inner)),
                                  [&](int64_t r0, int64_t r1) {
                                    for (int64_t r = r0; r < r1; ++r) {
                                      const T* xr = x + r * inner;
                                      T* yr = y + r * inner;
                                      double m = 0, v;
                                      if constexpr (kRms) {
                                        double s = 0;
                                        for (int64_t i = 0; i < inner; ++i) {
                                          const double a = static_cast<double>(to_compute<CT>(xr[i]));
                                          s += a * a;
                                        }
                                        v = inner > 0 ? s / static_cast<double>(inner) : 0.0;
                                      } else {
                                        mean_var(xr, inner, &m, &v);
                                      }
                                      double inv = 1.0 / std::sqrt(v + eps);
                                      if (round_stash) inv = static_cast<float>(inv);
                                      if (want_stats) {
                                        means[r] = m;
                                        invs[r] = inv;
                                      }
                                      const CT mc = static_cast<CT>(m), ic = static_cast<CT>(inv);
                                      if (!b_ct) {
                                        for (int64_t i = 0; i < inner; ++i)
                                          yr[i] = from_compute<T>((to_compute<CT>(xr[i]) - mc) * ic * sc_ct[i]);
                                      } else {
                                        for (int64_t i = 0; i < inner; ++i)
                                          yr[i] = from_compute<T>((to_compute<CT>(xr[i]) - mc) * ic * sc_ct[i] + b_ct[i]);
                                      }
                                    }
                                  });
        }
        if constexpr (!kRms) {
          for (size_t idx : {size_t(1), size_t(2)}) {
            if (idx >= ctx.num_outputs() || !ctx.output_requested(idx)) continue;
            const std::vector<double>& src = idx == 1 ? means : invs;
            NXRT_ASSIGN_OR_RETURN(Tensor * o, ctx.allocate_output(idx, stash, stat_shape));
            NXRT_RETURN_IF_ERROR(dispatch_float(
                stash,
                [&](auto t2) -> Status {
                  using U = decltype(t2);
                  for (size_t i = 0; i < src.size(); ++i) o->data<U>()[i] = from_compute<U>(static_cast<compute_t<U>>(src[i]));
                  return Status::Ok();
                },
                [&] { return ctx.error(std::string("unsupported stash_type ") + dtype_name(stash)); }));
          }
        }
        return Status::Ok();
      },
      [&] { return unsupported_dtype(ctx, X.dtype()); });
}

// ------------------------------------------------------------------------------------------------
// LpNormalization: x / ||x||_p along one axis.

Status lp_norm(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  int64_t axis = ctx.info().attr_int("axis", -1);
  const int64_t p = ctx.info().attr_int("p", 2);
  if (p != 1 && p != 2) return ctx.error("p must be 1 or 2, got " + std::to_string(p));
  if (X.rank() == 0) return ctx.error("X must have rank >= 1");
  if (!normalize_axis(&axis, X.rank())) return ctx.error("axis out of range for " + X.describe());
  const int64_t n = X.dim(axis);
  int64_t inner = 1;
  for (int64_t i = axis + 1; i < X.rank(); ++i) inner *= X.dim(i);
  const int64_t outer = n * inner > 0 ? X.numel() / (n * inner) : 0;
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using CT = compute_t<T>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        const T* x = X.data<T>();
        T* y = Y->data<T>();
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            const T* xp = x + o * n * inner + i;
            T* yp = y + o * n * inner + i;
            double s = 0;
            for (int64_t k = 0; k < n; ++k) {
              const double v = static_cast<double>(to_compute<CT>(xp[k * inner]));
              s += p == 1 ? std::fabs(v) : v * v;
            }
            const double norm = p == 1 ? s : std::sqrt(s);
            const CT inv = norm > 0 ? static_cast<CT>(1.0 / norm) : CT(0);
            for (int64_t k = 0; k < n; ++k) yp[k * inner] = from_compute<T>(to_compute<CT>(xp[k * inner]) * inv);
          }
        }
        return Status::Ok();
      },
      [&] { return unsupported_dtype(ctx, X.dtype()); });
}

// ------------------------------------------------------------------------------------------------
// MeanVarianceNormalization: (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9) over `axes`.

Status mvn(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  std::vector<int64_t> axes = ctx.info().attr_ints("axes", {0, 2, 3});
  const int64_t rank = X.rank();
  std::vector<bool> reduce(static_cast<size_t>(rank), false);
  for (int64_t a : axes) {
    if (!normalize_axis(&a, rank)) return ctx.error("axis " + std::to_string(a) + " out of range for " + X.describe());
    reduce[a] = true;
  }
  // Kept-slot strides: 0 on reduced axes.
  Dims kept_shape = X.shape();
  for (int64_t d = 0; d < rank; ++d)
    if (reduce[d]) kept_shape[d] = 1;
  const Dims kst = broadcast_strides(kept_shape, X.shape());
  const int64_t slots = shape_numel(kept_shape);
  const int64_t n = X.numel();
  const int64_t per_slot = slots > 0 ? n / slots : 0;
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using CT = compute_t<T>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        const T* x = X.data<T>();
        T* y = Y->data<T>();
        std::vector<int64_t> slot_of(static_cast<size_t>(n));
        auto cur = strided_cursor(X.shape(), X.shape().size(), kst);
        for (int64_t i = 0; i < n; ++i, cur.next()) slot_of[i] = cur.offset(0);
        std::vector<double> s(static_cast<size_t>(slots), 0.0), s2(static_cast<size_t>(slots), 0.0);
        for (int64_t i = 0; i < n; ++i) {
          const double v = static_cast<double>(to_compute<CT>(x[i]));
          s[slot_of[i]] += v;
          s2[slot_of[i]] += v * v;
        }
        std::vector<double> mean(static_cast<size_t>(slots)), denom(static_cast<size_t>(slots));
        for (int64_t k = 0; k < slots; ++k) {
          mean[k] = per_slot > 0 ? s[k] / static_cast<double>(per_slot) : 0.0;
          const double var = per_slot > 0 ? s2[k] / static_cast<double>(per_slot) - mean[k] * mean[k] : 0.0;
          denom[k] = std::sqrt(std::max(var, 0.0)) + 1e-9;
        }
        for (int64_t i = 0; i < n; ++i) {
          const int64_t k = slot_of[i];
          y[i] = from_compute<T>(static_cast<CT>((static_cast<double>(to_compute<CT>(x[i])) - mean[k]) / denom[k]));
        }
        return Status::Ok();
      },
      [&] { return unsupported_dtype(ctx, X.dtype()); });
}

}  // namespace

void register_norm_ops(ep::KernelRegistry& r) {
  r.add_fn("BatchNormalization", &batch_norm);
  r.add_fn("InstanceNormalization", &instance_norm);
  r.add_fn("", "GroupNormalization", 18, INT64_MAX, &group_norm);
  r.add_fn("", "LayerNormalization", 17, INT64_MAX, &last_axes_norm<false>);
  r.add_fn("", "RMSNormalization", 23, INT64_MAX, &last_axes_norm<true>);
  r.add_fn("LpNormalization", &lp_norm);
  r.add_fn("MeanVarianceNormalization", &mvn);
}

}  // namespace nxrt::ops
