// Pooling: MaxPool, AveragePool, LpPool, their Global forms, MaxUnpool, MaxRoiPool; and LRN; the
// 8-bit com.microsoft NhwcMaxPool and QLinearAveragePool.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>

#include "ops/common.h"
#include "ops/conv/conv_geometry.h"
#include "ep/slot_scratch.h"
#include "ops/pool/max_pool_8bit.h"
#include "ops/pool/row_pool.h"

namespace nxrt::ops {

namespace {

// Per output coordinate along one axis: the window's first input coordinate and the range of taps
// [t0, t1) that land inside the input; `padded` counts taps inside the padded input.
struct AxisWin {
  int64_t start, t0, t1, padded;
};

std::vector<AxisWin> axis_windows(const Geom3& g, int j) {
  std::vector<AxisWin> w(static_cast<size_t>(g.out[j]));
  for (int64_t o = 0; o < g.out[j]; ++o) {
    const int64_t start = o * g.s[j] - g.pb[j];
    AxisWin a{start, g.k[j], 0, 0};
    for (int64_t t = 0; t < g.k[j]; ++t) {
      const int64_t p = start + t * g.d[j];
      if (p >= 0 && p < g.in[j]) {
        a.t0 = std::min(a.t0, t);
        a.t1 = std::max(a.t1, t + 1);
      }
      if (p >= -g.pb[j] && p < g.in[j] + g.pe[j]) ++a.padded;
    }
    if (a.t1 <= a.t0) a.t0 = a.t1 = 0;
    w[static_cast<size_t>(o)] = a;
  }
  return w;
}

struct Windows {
  std::vector<AxisWin> w[3];
  explicit Windows(const Geom3& g) {
    for (int j = 0; j < 3; ++j) w[j] = axis_windows(g, j);
  }
};

template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
T lowest_value() {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return T(-std::numeric_limits<float>::infinity());
  } else if constexpr (std::is_floating_point_v<T>) {
    return -std::numeric_limits<T>::infinity();
  } else {
    return std::numeric_limits<T>::lowest();
  }
}

// Values of type T compared in float for reduced floats, natively otherwise.
template <typename T>
using cmp_t = std::conditional_t<std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>, float, T>;

// Taps [t0, t1) of every AxisWin land inside the input (positions grow with the tap index), so the
// window loops need no bounds checks.
template <typename T, bool kIndex>
void max_pool_planes(const Geom3& g, const Windows& win, const T* x, T* y, int64_t* ind, bool col_major,
                     int64_t p0, int64_t p1) {
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const int64_t ID = g.in[0], IH = g.in[1], IW = g.in[2];
  const int64_t dd = g.d[0], dh = g.d[1], dw = g.d[2];
  for (int64_t p = p0; p < p1; ++p) {
    const T* xp = x + p * in_size;
    T* yp = y + p * out_size;
    int64_t* ip = kIndex ? ind + p * out_size : nullptr;
    int64_t o = 0;
    for (const AxisWin& a : win.w[0])
      for (const AxisWin& b : win.w[1])
        for (const AxisWin& c : win.w[2]) {
          cmp_t<T> best = static_cast<cmp_t<T>>(lowest_value<T>());
          int64_t best_at = -1;
          for (int64_t td = a.t0; td < a.t1; ++td) {
            const int64_t id = a.start + td * dd;
            for (int64_t th = b.t0; th < b.t1; ++th) {
              const int64_t ih = b.start + th * dh;
              const T* row = xp + (id * IH + ih) * IW + c.start + c.t0 * dw;  // first valid tap
              if constexpr (kIndex) {
                for (int64_t tw = c.t0; tw < c.t1; ++tw) {
                  const cmp_t<T> v = static_cast<cmp_t<T>>(row[(tw - c.t0) * dw]);
                  if (v > best || best_at < 0) {
                    best = v;
                    const int64_t iw = c.start + tw * dw;
                    best_at = col_major ? id + ID * (ih + IH * iw) : (id * IH + ih) * IW + iw;
                  }
                }
              } else {
                const int64_t nt = c.t1 - c.t0;
                for (int64_t i = 0; i < nt; ++i) {
                  const cmp_t<T> v = static_cast<cmp_t<T>>(row[i * dw]);
                  best = v > best ? v : best;
                }
              }
            }
          }
          if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
            yp[o] = T(best);
          } else {
            yp[o] = best;
          }
          if constexpr (kIndex) ip[o] = best_at < 0 ? -1 : p * in_size + best_at;
          ++o;
        }
  }
}

enum class SumKind { kAverage, kLp };

template <typename T>
void sum_pool_planes(const Geom3& g, const Windows& win, const T* x, T* y, SumKind kind, bool count_include_pad,
                     double p_norm, int64_t p0, int64_t p1) {
  using A = acc_t<T>;
  const int64_t in_size = g.in_size(), out_size = g.out_size();
  const int64_t IH = g.in[1], IW = g.in[2];
  const A pf = static_cast<A>(p_norm);
  for (int64_t p = p0; p < p1; ++p) {
    const T* xp = x + p * in_size;
    T* yp = y + p * out_size;
    int64_t o = 0;
    for (const AxisWin& a : win.w[0])
      for (const AxisWin& b : win.w[1])
        for (const AxisWin& c : win.w[2]) {
          A sum = 0;
          int64_t cnt = 0;
          for (int64_t td = a.t0; td < a.t1; ++td) {
            const int64_t id = a.start + td * g.d[0];
            for (int64_t th = b.t0; th < b.t1; ++th) {
              const int64_t ih = b.start + th * g.d[1];
              const T* row = xp + (id * IH + ih) * IW + c.start + c.t0 * g.d[2];  // first valid tap
              for (int64_t tw = c.t0; tw < c.t1; ++tw) {
                const A v = to_ct<A>(row[(tw - c.t0) * g.d[2]]);
                if (kind == SumKind::kAverage) {
                  sum += v;
                } else if (p_norm == 2.0) {
                  sum += v * v;
                } else if (p_norm == 1.0) {
                  sum += std::fabs(v);
                } else {
                  sum += std::pow(std::fabs(v), pf);
                }
                ++cnt;
              }
            }
          }
          A r;
          if (kind == SumKind::kAverage) {
            const int64_t denom = count_include_pad ? a.padded * b.padded * c.padded : cnt;
            r = denom > 0 ? sum / static_cast<A>(denom) : A(0);
          } else if (p_norm == 2.0) {
            r = std::sqrt(sum);
          } else if (p_norm == 1.0) {
            r = sum;
          } else {
            r = std::pow(sum, A(1) / pf);
          }
          yp[o++] = from_ct<T>(r);
        }
  }
}

// The row-wise float paths (pool/row_pool.h) run unless the kernel override reference=1 asks for the
// per-window loops (read when the kernel is created).
bool row_paths_allowed(const ep::KernelInfo& info) { return !info.overrides().reference(); }

// The row-wise path's plan for one input shape (its per-thread scratch, plan.scratch_bytes, comes
// from KernelContext::thread_slots).
struct PoolVariant final : ep::KernelVariant {
  rowpool::Plan plan;
};

// Shared front end of the windowed pools.
class PoolBase : public ep::Kernel {
 public:
  Status init_base(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, true));
    if (attrs_.kernel_shape.empty()) return info.error("attribute kernel_shape is required");
    row_paths_ = row_paths_allowed(info);
    isa_ = info.isa();
    return Status::Ok();
  }

 protected:
  Status geometry(const ep::KernelContext& ctx, const Tensor& X, Geom3* g) const {
    if (X.rank() < 3) return ctx.error("input must have rank >= 3 (N, C, spatial...), got " + X.describe());
    Dims sp(X.shape().begin() + 2, X.shape().end());
    if (attrs_.kernel_shape.size() != sp.size()) {
      return ctx.error("kernel_shape " + shape_to_string(attrs_.kernel_shape) + " does not match the input's " +
                       std::to_string(sp.size()) + " spatial axes " + X.describe());
    }
    Status st = forward_geometry(attrs_, sp, attrs_.kernel_shape, g);
    if (!st.ok()) return ctx.error(st.message(), st.code());
    return Status::Ok();
  }
  int64_t grain(const Geom3& g) const { return std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.out_size() * g.kvol())); }

  // The row-wise float path's plan at float X of these shapes (none when that path would not run).
  Result<std::unique_ptr<ep::KernelVariant>> specialize_rows(const ep::SpecializeContext& sc, bool max,
                                                             bool cip) const {
    std::unique_ptr<ep::KernelVariant> none;
    const Dims& x = sc.shape(0);
    if (!row_paths_ || sc.dtype(0) != DataType::kFloat || x.size() < 3) return none;
    Dims sp(x.begin() + 2, x.end());
    if (attrs_.kernel_shape.size() != sp.size()) return none;
    Geom3 g;
    if (!forward_geometry(attrs_, sp, attrs_.kernel_shape, &g).ok()) return none;
    auto v = std::make_unique<PoolVariant>();
    if (!rowpool::make_plan(g, max, cip, &v->plan, isa_)) return none;
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  // Planes [0, planes) through the row-wise path: the variant's plan when it was made for g, else a plan
  // made now; each chunk on its thread's slot.
  Status run_rows(ep::KernelContext& ctx, const Geom3& g, bool max, bool cip, const float* x, float* y,
                  int64_t planes) const {
    const auto* v = dynamic_cast<const PoolVariant*>(ctx.variant());
    rowpool::Plan local;
    const rowpool::Plan* plan = &local;
    if (v && v->plan.fits(g) && v->plan.max == max && v->plan.cip == (!max && cip)) {
      plan = &v->plan;
    } else {
      rowpool::make_plan(g, max, cip, &local, isa_);
    }
    NXRT_ASSIGN_OR_RETURN(ep::SlotScratch slots, ep::SlotScratch::take(ctx, plan->scratch_bytes));
    ctx.pool().parallel_for(planes, grain(g), [&](int64_t p0, int64_t p1) {
      rowpool::run(*plan, x, y, p0, p1, slots.mine());
    });
    return Status::Ok();
  }

  WindowAttrs attrs_;
  bool row_paths_ = true;  // the row-wise float paths (reference=1 turns them off)
  ep::IsaTier isa_ = ep::IsaTier::kScalar;  // the tier the row-wise plans may use (KernelInfo::isa())
};

class MaxPoolKernel final : public PoolBase {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(init_base(info));
    storage_order_ = info.attr_int("storage_order", 0);
    if (storage_order_ != 0 && storage_order_ != 1) return info.error("storage_order must be 0 or 1");
    return Status::Ok();
  }
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    // The indices output takes the per-window loops.
    if (sc.info().output_present(1)) return std::unique_ptr<ep::KernelVariant>();
    return specialize_rows(sc, true, false);
  }
  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    Geom3 g;
    NXRT_RETURN_IF_ERROR(geometry(ctx, X, &g));
    const Dims oshape = geom_output_shape(X.dim(0), X.dim(1), g);
    const int64_t planes = X.dim(0) * X.dim(1);
    const Status unsupported = ctx.error(std::string("MaxPool does not support dtype ") + dtype_name(X.dtype()));
    auto body = [&](auto tag) -> Status {
      using T = decltype(tag);
      NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), oshape));
      int64_t* ind = nullptr;
      if (ctx.num_outputs() > 1 && ctx.output_requested(1)) {
        NXRT_ASSIGN_OR_RETURN(Tensor * I, ctx.allocate_output(1, DataType::kInt64, oshape));
        ind = I->data<int64_t>();
      }
      if (Y->numel() == 0) return Status::Ok();
      const bool fast = row_paths_ && rowpool::applies(g);
      Windows win(g);
      const T* x = X.data<T>();
      T* y = Y->data<T>();
      if constexpr (std::is_same_v<T, float>) {
        if (fast && !ind) return run_rows(ctx, g, true, false, x, y, planes);
      }
      if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>) {
        if (row_paths_ && !ind && maxpool8::applies(g)) {
          NXRT_ASSIGN_OR_RETURN(ep::SlotScratch slots, ep::SlotScratch::take(ctx, maxpool8::scratch_bytes(g)));
          ctx.pool().parallel_for(planes, grain(g), [&](int64_t p0, int64_t p1) {
            maxpool8::run(g, reinterpret_cast<const uint8_t*>(x), reinterpret_cast<uint8_t*>(y),
                          std::is_same_v<T, int8_t>, p0, p1, slots.mine());
          });
          return Status::Ok();
        }
      }
      ctx.pool().parallel_for(planes, grain(g), [&](int64_t p0, int64_t p1) {
        if (ind) {
          max_pool_planes<T, true>(g, win, x, y, ind, storage_order_ == 1, p0, p1);
        } else {
          max_pool_planes<T, false>(g, win, x, y, nullptr, false, p0, p1);
        }
      });
      return Status::Ok();
    };
    switch (X.dtype()) {
      case DataType::kFloat: return body(float{});
      case DataType::kDouble: return body(double{});
      case DataType::kFloat16: return body(Float16{});
      case DataType::kBFloat16: return body(BFloat16{});
      case DataType::kInt8: return body(int8_t{});
      case DataType::kUInt8: return body(uint8_t{});
      default: return unsupported;
    }
  }

 private:
  int64_t storage_order_ = 0;
};

class SumPoolKernel final : public PoolBase {
 public:
  explicit SumPoolKernel(SumKind kind = SumKind::kAverage) : kind_(kind) {}
  Status init_kind(const ep::KernelInfo& info, SumKind kind) {
    kind_ = kind;
    NXRT_RETURN_IF_ERROR(init_base(info));
    count_include_pad_ = info.attr_int("count_include_pad", 0) != 0;
    if (kind == SumKind::kLp) {
      const ir::Attribute* a = info.node().find_attribute("p");
      p_ = 2.0;
      if (a) p_ = a->type == ir::Attribute::Type::kFloat ? static_cast<double>(a->f) : static_cast<double>(a->i);
      if (!(p_ > 0)) return info.error("p must be positive");
    }
    return Status::Ok();
  }
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    if (kind_ != SumKind::kAverage) return std::unique_ptr<ep::KernelVariant>();
    return specialize_rows(sc, false, count_include_pad_);
  }
  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    Geom3 g;
    NXRT_RETURN_IF_ERROR(geometry(ctx, X, &g));
    const int64_t planes = X.dim(0) * X.dim(1);
    return dispatch_float(
        X.dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), geom_output_shape(X.dim(0), X.dim(1), g)));
          if (Y->numel() == 0) return Status::Ok();
          const T* x = X.data<T>();
          T* y = Y->data<T>();
          if constexpr (std::is_same_v<T, float>) {
            if (kind_ == SumKind::kAverage && row_paths_ && rowpool::applies(g)) {
              return run_rows(ctx, g, false, count_include_pad_, x, y, planes);
            }
          }
          Windows win(g);
          ctx.pool().parallel_for(planes, grain(g), [&](int64_t p0, int64_t p1) {
            sum_pool_planes<T>(g, win, x, y, kind_, count_include_pad_, p_, p0, p1);
          });
          return Status::Ok();
        },
        [&] { return ctx.error(std::string("pooling does not support dtype ") + dtype_name(X.dtype())); });
  }

 private:
  SumKind kind_;
  bool count_include_pad_ = false;
  double p_ = 2.0;
};

struct AveragePoolKernel final : ep::Kernel {
  SumPoolKernel k;
  Status init(const ep::KernelInfo& info) { return k.init_kind(info, SumKind::kAverage); }
  Status compute(ep::KernelContext& ctx) const override { return k.compute(ctx); }
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    return k.specialize(sc);
  }
};
struct LpPoolKernel final : ep::Kernel {
  SumPoolKernel k;
  Status init(const ep::KernelInfo& info) { return k.init_kind(info, SumKind::kLp); }
  Status compute(ep::KernelContext& ctx) const override { return k.compute(ctx); }
};

// ------------------------------------------------------------------------------------------------
// Global pools: reduce every axis after N and C.

enum class GlobalKind { kAverage, kMax, kLp };

template <GlobalKind kind>
Status global_pool(ep::KernelContext& ctx, bool row_paths) {
  const Tensor& X = ctx.input(0);
  if (X.rank() < 2) return ctx.error("input must have rank >= 2 (N, C, ...), got " + X.describe());
  double p = 2.0;
  if constexpr (kind == GlobalKind::kLp) {
    const ir::Attribute* a = ctx.info().node().find_attribute("p");
    if (a) p = a->type == ir::Attribute::Type::kFloat ? static_cast<double>(a->f) : static_cast<double>(a->i);
    if (!(p > 0)) return ctx.error("p must be positive");
  }
  Dims oshape{X.dim(0), X.dim(1)};
  for (int64_t i = 2; i < X.rank(); ++i) oshape.push_back(1);
  const int64_t planes = X.dim(0) * X.dim(1);
  const int64_t plane = planes > 0 ? X.numel() / planes : 0;
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), oshape));
        const T* x = X.data<T>();
        T* y = Y->data<T>();
        if constexpr (kind == GlobalKind::kAverage && std::is_same_v<T, float>) {
          if (row_paths) {
            ctx.pool().parallel_for(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)),
                                    [&](int64_t p0, int64_t p1) { rowpool::global_avg(x, y, plane, p0, p1); });
            return Status::Ok();
          }
        }
        ctx.pool().parallel_for(planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)),
                                [&](int64_t p0, int64_t p1) {
                                  for (int64_t q = p0; q < p1; ++q) {
                                    const T* xp = x + q * plane;
                                    A r;
                                    if constexpr (kind == GlobalKind::kMax) {
                                      r = plane > 0 ? to_ct<A>(xp[0]) : -std::numeric_limits<A>::infinity();
                                      for (int64_t i = 1; i < plane; ++i) r = std::max(r, to_ct<A>(xp[i]));
                                    } else if constexpr (kind == GlobalKind::kAverage) {
                                      A s = 0;
                                      for (int64_t i = 0; i < plane; ++i) s += to_ct<A>(xp[i]);
                                      r = plane > 0 ? s / static_cast<A>(plane) : A(0);
                                    } else {
                                      A s = 0;
                                      for (int64_t i = 0; i < plane; ++i) {
                                        const A v = std::fabs(to_ct<A>(xp[i]));
                                        s += p == 2.0 ? v * v : std::pow(v, static_cast<A>(p));
                                      }
                                      r = p == 2.0 ? std::sqrt(s) : std::pow(s, static_cast<A>(1.0 / p));
                                    }
                                    y[q] = from_ct<T>(r);
                                  }
                                });
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("global pooling does not support dtype ") + dtype_name(X.dtype())); });
}

template <GlobalKind kind>
class GlobalPoolKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    row_paths_ = row_paths_allowed(info);
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override { return global_pool<kind>(ctx, row_paths_); }

 private:
  bool row_paths_ = true;
};

// ------------------------------------------------------------------------------------------------
// MaxUnpool

class MaxUnpoolKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    kernel_ = info.attr_ints("kernel_shape");
    strides_ = info.attr_ints("strides");
    pads_ = info.attr_ints("pads");
    if (kernel_.empty()) return info.error("attribute kernel_shape is required");
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    if (!ctx.has_input(1)) return ctx.error("missing input I");
    const Tensor& I = ctx.input(1);
    if (I.dtype() != DataType::kInt64 || I.shape() != X.shape()) {
      return ctx.error("I " + I.describe() + " must be int64 with X's shape " + X.describe());
    }
    const size_t n = kernel_.size();
    if (X.rank() != static_cast<int64_t>(n) + 2) {
      return ctx.error("kernel_shape " + shape_to_string(kernel_) + " does not match X " + X.describe());
    }
    if ((!strides_.empty() && strides_.size() != n) || (!pads_.empty() && pads_.size() != 2 * n)) {
      return ctx.error("strides/pads lengths do not match kernel_shape");
    }
    Dims oshape{X.dim(0), X.dim(1)};
    for (size_t i = 0; i < n; ++i) {
      const int64_t s = strides_.empty() ? 1 : strides_[i];
      const int64_t pb = pads_.empty() ? 0 : pads_[i], pe = pads_.empty() ? 0 : pads_[i + n];
      oshape.push_back((X.dim(2 + i) - 1) * s + kernel_[i] - pb - pe);
    }
    // Indices address the default (inferred) output; an explicit output_shape keeps each element's
    // coordinates and lays them out in the bigger tensor.
    Dims inferred = oshape;
    if (ctx.has_input(2)) {
      NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> os, read_int_values(ctx.input(2)));
      if (os.size() != oshape.size()) {
        return ctx.error("output_shape " + shape_to_string(os) + " must have rank " + std::to_string(oshape.size()));
      }
      oshape = os;
    }
    for (int64_t d : inferred)
      if (d < 0) return ctx.error("negative output dim in " + shape_to_string(inferred));
    for (int64_t d : oshape)
      if (d < 0) return ctx.error("negative output dim in " + shape_to_string(oshape));
    const bool remap = inferred != oshape;
    const int64_t inferred_total = shape_numel(inferred);
    return dispatch_by_size(
        X.dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), oshape));
          T* y = Y->data<T>();
          std::fill(y, y + Y->numel(), T{});
          const T* x = X.data<T>();
          const int64_t* ind = I.data<int64_t>();
          const int64_t total = Y->numel();
          for (int64_t i = 0; i < X.numel(); ++i) {
            int64_t at = ind[i];
            if (remap && at >= 0 && at < inferred_total) {
              int64_t rem = at, stride = 1;
              at = 0;
              for (size_t d = inferred.size(); d-- > 0;) {
                const int64_t coord = rem % inferred[d];
                rem /= inferred[d];
                if (coord >= oshape[d]) {
                  at = -1;
                  break;
                }
                at += coord * stride;
                stride *= oshape[d];
              }
            } else if (remap) {
              at = -1;
            }
            if (at < 0 || at >= total) {
              return ctx.error("index " + std::to_string(ind[i]) + " is out of range for output " +
                               shape_to_string(oshape));
            }
            y[at] = x[i];
          }
          return Status::Ok();
        },
        [&] { return ctx.error(std::string("MaxUnpool does not support dtype ") + dtype_name(X.dtype())); });
  }

 private:
  std::vector<int64_t> kernel_, strides_, pads_;
};

// ------------------------------------------------------------------------------------------------
// MaxRoiPool

Status max_roi_pool(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  if (!ctx.has_input(1)) return ctx.error("missing input rois");
  const Tensor& R = ctx.input(1);
  const auto& info = ctx.info();
  std::vector<int64_t> pooled = info.attr_ints("pooled_shape");
  const float scale = info.attr_float("spatial_scale", 1.f);
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1) return ctx.error("pooled_shape must be 2 positive values");
  if (X.rank() != 4) return ctx.error("X must be 4-D (N, C, H, W), got " + X.describe());
  if (R.rank() != 2 || R.dim(1) != 5 || R.dtype() != X.dtype()) {
    return ctx.error("rois " + R.describe() + " must be (num_rois, 5) of X's dtype");
  }
  const int64_t N = X.dim(0), C = X.dim(1), H = X.dim(2), W = X.dim(3), PH = pooled[0], PW = pooled[1];
  const int64_t nr = R.dim(0);
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), {nr, C, PH, PW}));
        const T* x = X.data<T>();
        const T* r = R.data<T>();
        T* y = Y->data<T>();
        for (int64_t i = 0; i < nr; ++i) {
          const int64_t b = static_cast<int64_t>(to_ct<A>(r[i * 5]));
          if (b < 0 || b >= N) return ctx.error("roi batch index " + std::to_string(b) + " out of range");
          const int64_t x1 = static_cast<int64_t>(std::round(to_ct<A>(r[i * 5 + 1]) * scale));
          const int64_t y1 = static_cast<int64_t>(std::round(to_ct<A>(r[i * 5 + 2]) * scale));
          const int64_t x2 = static_cast<int64_t>(std::round(to_ct<A>(r[i * 5 + 3]) * scale));
          const int64_t y2 = static_cast<int64_t>(std::round(to_ct<A>(r[i * 5 + 4]) * scale));
          const int64_t rh = std::max<int64_t>(y2 - y1 + 1, 1), rw = std::max<int64_t>(x2 - x1 + 1, 1);
          const A bh = static_cast<A>(rh) / static_cast<A>(PH), bw = static_cast<A>(rw) / static_cast<A>(PW);
          for (int64_t c = 0; c < C; ++c) {
            const T* xp = x + (b * C + c) * H * W;
            T* yp = y + ((i * C + c) * PH) * PW;
            for (int64_t ph = 0; ph < PH; ++ph) {
              int64_t hs = static_cast<int64_t>(std::floor(ph * bh)) + y1;
              int64_t he = static_cast<int64_t>(std::ceil((ph + 1) * bh)) + y1;
              hs = std::min(std::max<int64_t>(hs, 0), H);
              he = std::min(std::max<int64_t>(he, 0), H);
              for (int64_t pw = 0; pw < PW; ++pw) {
                int64_t ws = static_cast<int64_t>(std::floor(pw * bw)) + x1;
                int64_t we = static_cast<int64_t>(std::ceil((pw + 1) * bw)) + x1;
                ws = std::min(std::max<int64_t>(ws, 0), W);
                we = std::min(std::max<int64_t>(we, 0), W);
                A m = (he <= hs || we <= ws) ? A(0) : -std::numeric_limits<A>::infinity();
                for (int64_t h = hs; h < he; ++h)
                  for (int64_t w = ws; w < we; ++w) m = std::max(m, to_ct<A>(xp[h * W + w]));
                yp[ph * PW + pw] = from_ct<T>(m);
              }
            }
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("MaxRoiPool does not support dtype ") + dtype_name(X.dtype())); });
}

// ------------------------------------------------------------------------------------------------
// LRN: y = x / (bias + alpha/size * sum of squares over nearby channels)^beta

Status lrn(ep::KernelContext& ctx) {
  const Tensor& X = ctx.input(0);
  const auto& info = ctx.info();
  const int64_t size = info.attr_int("size", 0);
  const double alpha = info.attr_float("alpha", 1e-4f), beta = info.attr_float("beta", 0.75f),
               bias = info.attr_float("bias", 1.0f);
  if (size < 1) return ctx.error("attribute size must be >= 1");
  if (X.rank() < 2) return ctx.error("input must have rank >= 2 (N, C, ...), got " + X.describe());
  const int64_t N = X.dim(0), C = X.dim(1);
  const int64_t plane = (N * C) > 0 ? X.numel() / (N * C) : 0;
  const int64_t lo_off = (size - 1) / 2, hi_off = size - 1 - lo_off;
  return dispatch_float(
      X.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
        NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
        const T* x = X.data<T>();
        T* y = Y->data<T>();
        const A a = static_cast<A>(alpha / static_cast<double>(size)), bt = static_cast<A>(beta),
                bs = static_cast<A>(bias);
        ctx.pool().parallel_for(N * C, 1, [&](int64_t p0, int64_t p1) {
          std::vector<A> sq(static_cast<size_t>(plane));
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t n = p / C, c = p % C;
            std::fill(sq.begin(), sq.end(), A(0));
            const int64_t c0 = std::max<int64_t>(0, c - lo_off), c1 = std::min<int64_t>(C - 1, c + hi_off);
            for (int64_t cc = c0; cc <= c1; ++cc) {
              const T* xp = x + (n * C + cc) * plane;
              for (int64_t i = 0; i < plane; ++i) {
                const A v = to_ct<A>(xp[i]);
                sq[i] += v * v;
              }
            }
            const T* xp = x + p * plane;
            T* yp = y + p * plane;
            for (int64_t i = 0; i < plane; ++i) yp[i] = from_ct<T>(to_ct<A>(xp[i]) / std::pow(bs + a * sq[i], bt));
          }
        });
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("LRN does not support dtype ") + dtype_name(X.dtype())); });
}

}  // namespace

// com.microsoft NhwcMaxPool (onnxruntime's contrib op; nxrt's qlinear_channels_last pass writes it): MaxPool
// over int8 / uint8 X [N, spatial..., C], Y [N, spatial..., C] (pool/max_pool_8bit.h).
class NhwcMaxPoolKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, true));
    if (attrs_.kernel_shape.empty()) return info.error("attribute kernel_shape is required");
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    if (X.dtype() != DataType::kUInt8 && X.dtype() != DataType::kInt8) {
      return ctx.error("X must be uint8 or int8, got " + X.describe(), StatusCode::kInvalidArgument);
    }
    if (X.rank() < 3 || X.rank() > 5) return ctx.error("X must be [N, spatial..., C] with 1-3 spatial axes, got " + X.describe());
    Dims sp(X.shape().begin() + 1, X.shape().end() - 1);
    if (attrs_.kernel_shape.size() != sp.size()) {
      return ctx.error("kernel_shape " + shape_to_string(attrs_.kernel_shape) + " does not match the input's " +
                       std::to_string(sp.size()) + " spatial axes " + X.describe());
    }
    Geom3 g;
    Status st = forward_geometry(attrs_, sp, attrs_.kernel_shape, &g);
    if (!st.ok()) return ctx.error(st.message(), st.code());
    const int64_t N = X.dim(0), C = X.dim(-1);
    Dims oshape = geom_output_shape(N, C, g);
    oshape.erase(oshape.begin() + 1);
    oshape.push_back(C);
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), oshape));
    if (Y->numel() == 0) return Status::Ok();
    const uint8_t* x = static_cast<const uint8_t*>(X.raw_data());
    uint8_t* y = static_cast<uint8_t*>(Y->raw_data());
    const bool s8 = X.dtype() == DataType::kInt8;
    // Split over the output rows of all images: each row writes its own bytes.
    ctx.pool().parallel_for(N * g.out[0] * g.out[1], 4, [&](int64_t r0, int64_t r1) {
      maxpool8::run_channels_last(g, C, x, y, s8, r0, r1);
    });
    return Status::Ok();
  }

 private:
  WindowAttrs attrs_;
};

// com.microsoft QLinearAveragePool(X, x_scale, x_zero_point?, y_scale, y_zero_point?; the pool's
// attributes, count_include_pad, channels_last): AveragePool over 8-bit codes, X and Y [N, C, spatial...]
// or, with channels_last = 1, [N, spatial..., C]. Each window's exact integer sum S of x - x_zero_point
// over its taps inside X (a padded tap is a zero point: the float op's 0), then one rounding:
//   y = saturate(round_half_even(S * x_scale / (divisor * y_scale)) + y_zero_point)   (in double)
// with the divisor AveragePool's (the window's taps inside X, or inside the padded input with
// count_include_pad). The float op between a dequantization and a quantization rounds each step in
// float instead, so its bytes can differ by one near a rounding tie (onnxruntime's kernel, in float too,
// likewise: scripts/check_contrib_ort.sh compares within one step).
class QLinearAveragePoolKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(attrs_.parse(info, true));
    if (attrs_.kernel_shape.empty()) return info.error("attribute kernel_shape is required");
    count_include_pad_ = info.attr_int("count_include_pad", 0) != 0;
    channels_last_ = info.attr_int("channels_last", 0) != 0;
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& X = ctx.input(0);
    if (X.dtype() != DataType::kUInt8 && X.dtype() != DataType::kInt8) {
      return ctx.error("X must be uint8 or int8, got " + X.describe(), StatusCode::kInvalidArgument);
    }
    const bool s8 = X.dtype() == DataType::kInt8;
    if (X.rank() < 3 || X.rank() > 5) {
      return ctx.error(std::string("X must be ") + (channels_last_ ? "[N, spatial..., C]" : "[N, C, spatial...]") +
                           " with 1-3 spatial axes, got " + X.describe(),
                       StatusCode::kInvalidArgument);
    }
    NXRT_ASSIGN_OR_RETURN(const double xs, scale_of(ctx, 1, "x_scale"));
    NXRT_ASSIGN_OR_RETURN(const double ys, scale_of(ctx, 3, "y_scale"));
    NXRT_ASSIGN_OR_RETURN(const int32_t xz, zero_point_of(ctx, 2, X.dtype(), "x_zero_point"));
    NXRT_ASSIGN_OR_RETURN(const int32_t yz, zero_point_of(ctx, 4, X.dtype(), "y_zero_point"));
    const Dims sp = channels_last_ ? Dims(X.shape().begin() + 1, X.shape().end() - 1) : Dims(X.shape().begin() + 2, X.shape().end());
    if (attrs_.kernel_shape.size() != sp.size()) {
      return ctx.error("kernel_shape " + shape_to_string(attrs_.kernel_shape) + " does not match the input's " +
                       std::to_string(sp.size()) + " spatial axes " + X.describe(), StatusCode::kInvalidArgument);
    }
    Geom3 g;
    Status st = forward_geometry(attrs_, sp, attrs_.kernel_shape, &g);
    if (!st.ok()) return ctx.error(st.message(), st.code());
    for (int j = 0; j < 3; ++j)
      if (g.d[j] != 1) return ctx.error("dilations are not an attribute of QLinearAveragePool", StatusCode::kInvalidArgument);
    const int64_t N = X.dim(0), C = channels_last_ ? X.dim(-1) : X.dim(1);
    Dims oshape = geom_output_shape(N, C, g);
    if (channels_last_) {
      oshape.erase(oshape.begin() + 1);
      oshape.push_back(C);
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), oshape));
    if (Y->numel() == 0) return Status::Ok();
    const Windows win(g);
    const double mult = xs / ys;
    const double lo = s8 ? -128.0 : 0.0, hi = s8 ? 127.0 : 255.0;
    // The byte of the window whose codes sum to `sum` over `taps` taps inside X, `divisor` as above.
    auto requantize = [&](int64_t sum, int64_t taps, int64_t divisor) {
      if (divisor <= 0) divisor = 1;  // (a window with no tap inside the padded input: 0, as AveragePool's)
      const double v = static_cast<double>(sum - taps * xz) * mult / static_cast<double>(divisor);
      const double q = std::min(hi, std::max(lo, round_half_even(v) + static_cast<double>(yz)));
      return static_cast<uint8_t>(static_cast<int32_t>(q));
    };
    const uint8_t* x = static_cast<const uint8_t*>(X.raw_data());
    uint8_t* y = static_cast<uint8_t*>(Y->raw_data());
    const int64_t in_size = g.in_size(), out_size = g.out_size();
    auto code = [s8](uint8_t b) { return s8 ? static_cast<int32_t>(static_cast<int8_t>(b)) : static_cast<int32_t>(b); };
    if (!channels_last_) {
      ctx.pool().parallel_for(N * C, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, out_size)), [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const uint8_t* xp = x + p * in_size;
          uint8_t* yp = y + p * out_size;
          int64_t o = 0;
          for (const AxisWin& a : win.w[0])
            for (const AxisWin& b : win.w[1])
              for (const AxisWin& c : win.w[2]) {
                int64_t sum = 0;
                for (int64_t td = a.t0; td < a.t1; ++td)
                  for (int64_t th = b.t0; th < b.t1; ++th) {
                    const uint8_t* row = xp + ((a.start + td) * g.in[1] + b.start + th) * g.in[2] + c.start;
                    for (int64_t tw = c.t0; tw < c.t1; ++tw) sum += code(row[tw]);
                  }
                const int64_t taps = (a.t1 - a.t0) * (b.t1 - b.t0) * (c.t1 - c.t0);
                yp[o++] = requantize(sum, taps, count_include_pad_ ? a.padded * b.padded * c.padded : taps);
              }
        }
      });
      return Status::Ok();
    }
    // Channels-last: per output pixel, the taps' rows of C codes added into int32 sums, 256 channels at
    // a time (in registers or L1; the loops over a row vectorize).
    constexpr int64_t kBlock = 256;
    ctx.pool().parallel_for(N * out_size, std::max<int64_t>(1, 4096 / C), [&](int64_t q0, int64_t q1) {
      int32_t acc[kBlock];
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t n = q / out_size, o = q % out_size;
        const AxisWin& a = win.w[0][static_cast<size_t>(o / (g.out[1] * g.out[2]))];
        const AxisWin& b = win.w[1][static_cast<size_t>(o / g.out[2] % g.out[1])];
        const AxisWin& c = win.w[2][static_cast<size_t>(o % g.out[2])];
        const int64_t taps = (a.t1 - a.t0) * (b.t1 - b.t0) * (c.t1 - c.t0);
        const int64_t divisor = count_include_pad_ ? a.padded * b.padded * c.padded : taps;
        for (int64_t c0 = 0; c0 < C; c0 += kBlock) {
          const int64_t nc = std::min(kBlock, C - c0);
          std::fill(acc, acc + nc, 0);
          for (int64_t td = a.t0; td < a.t1; ++td)
            for (int64_t th = b.t0; th < b.t1; ++th)
              for (int64_t tw = c.t0; tw < c.t1; ++tw) {
                const int64_t pix = ((a.start + td) * g.in[1] + b.start + th) * g.in[2] + c.start + tw;
                const uint8_t* row = x + (n * in_size + pix) * C + c0;
                if (s8)
                  for (int64_t i = 0; i < nc; ++i) acc[i] += static_cast<int8_t>(row[i]);
                else
                  for (int64_t i = 0; i < nc; ++i) acc[i] += row[i];
              }
          uint8_t* yo = y + q * C + c0;
          for (int64_t i = 0; i < nc; ++i) yo[i] = requantize(acc[i], taps, divisor);
        }
      }
    });
    return Status::Ok();
  }

 private:
  // A scalar scale input: positive and finite.
  static Result<double> scale_of(ep::KernelContext& ctx, size_t i, const char* name) {
    if (!ctx.has_input(i)) return ctx.error(std::string("missing ") + name, StatusCode::kInvalidArgument);
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 || t.dtype() != DataType::kFloat) {
      return ctx.error(std::string(name) + " must be a float scalar, got " + t.describe(), StatusCode::kInvalidArgument);
    }
    const double v = t.data<float>()[0];
    if (!(v > 0) || !std::isfinite(v)) {
      return ctx.error(std::string(name) + " must be positive and finite, got " + std::to_string(v), StatusCode::kInvalidArgument);
    }
    return v;
  }
  // An optional scalar zero point of X's type (0 when absent).
  static Result<int32_t> zero_point_of(ep::KernelContext& ctx, size_t i, DataType dt, const char* name) {
    if (!ctx.has_input(i)) return 0;
    const Tensor& t = ctx.input(i);
    if (t.numel() != 1 || t.dtype() != dt) {
      return ctx.error(std::string(name) + " must be a " + dtype_name(dt) + " scalar, got " + t.describe(),
                       StatusCode::kInvalidArgument);
    }
    const uint8_t b = static_cast<const uint8_t*>(t.raw_data())[0];
    return dt == DataType::kInt8 ? static_cast<int32_t>(static_cast<int8_t>(b)) : static_cast<int32_t>(b);
  }

  WindowAttrs attrs_;
  bool count_include_pad_ = false, channels_last_ = false;
};

void register_pool_kernels(ep::KernelRegistry& r) {
  r.add_class<MaxPoolKernel>("", "MaxPool", 1);
  r.add_class<NhwcMaxPoolKernel>("com.microsoft", "NhwcMaxPool", 1);
  r.add_class<QLinearAveragePoolKernel>("com.microsoft", "QLinearAveragePool", 1);
  r.add_class<AveragePoolKernel>("", "AveragePool", 1);
  r.add_class<LpPoolKernel>("", "LpPool", 1);
  r.add_class<GlobalPoolKernel<GlobalKind::kAverage>>("", "GlobalAveragePool", 1);
  r.add_class<GlobalPoolKernel<GlobalKind::kMax>>("", "GlobalMaxPool", 1);
  r.add_class<GlobalPoolKernel<GlobalKind::kLp>>("", "GlobalLpPool", 1);
  r.add_class<MaxUnpoolKernel>("", "MaxUnpool", 9);
  r.add_fn("MaxRoiPool", &max_roi_pool);
  r.add_fn("LRN", &lrn);
}

}  // namespace nxrt::ops
