// Constant, ConstantOfShape, Range, EyeLike, Dropout.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <vector>

#include "ops/common.h"
#include "ops/generator/generator_util.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

Rng make_rng(const ep::KernelInfo& info) {
  if (info.has_attr("seed")) {
    const ir::Attribute* a = info.node().find_attribute("seed");
    // Float seed per the spec; accept an int attribute too.
    double s = a->type == ir::Attribute::Type::kInt ? static_cast<double>(a->i) : static_cast<double>(a->f);
    uint64_t bits;
    std::memcpy(&bits, &s, sizeof(bits));
    return Rng(bits);
  }
  static std::atomic<uint64_t> counter{0};
  uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  return Rng(t ^ (counter.fetch_add(1) * 0x2545F4914F6CDD1Dull));
}

namespace {

// ---------------------------------------------------------------------------------------------
// Constant

Status constant_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const ir::Node& node = info.node();
  const ir::Attribute* found = nullptr;
  for (const auto& a : node.attributes) {
    if (a.name == "value" || a.name == "sparse_value" || a.name == "value_float" || a.name == "value_floats" ||
        a.name == "value_int" || a.name == "value_ints" || a.name == "value_string" || a.name == "value_strings") {
      if (found) return ctx.error("Constant must have exactly one value attribute", StatusCode::kInvalidModel);
      found = &a;
    }
  }
  if (!found) return ctx.error("Constant has no value attribute", StatusCode::kInvalidModel);
  const ir::Attribute& a = *found;
  if (a.name == "value" || a.name == "sparse_value") {
    if (!a.t.defined()) {
      return ctx.error("Constant attribute '" + a.name + "' holds no (dense) tensor", StatusCode::kInvalidModel);
    }
    return ctx.set_output(0, Value(a.t));
  }
  if (a.name == "value_float") {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, {}));
    y->data<float>()[0] = a.f;
  } else if (a.name == "value_floats") {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, {static_cast<int64_t>(a.floats.size())}));
    std::copy(a.floats.begin(), a.floats.end(), y->data<float>());
  } else if (a.name == "value_int") {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt64, {}));
    y->data<int64_t>()[0] = a.i;
  } else if (a.name == "value_ints") {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt64, {static_cast<int64_t>(a.ints.size())}));
    std::copy(a.ints.begin(), a.ints.end(), y->data<int64_t>());
  } else if (a.name == "value_string") {
    Tensor t(DataType::kString, {});
    t.string_data()[0] = a.s;
    return ctx.set_output(0, Value(t));
  } else {
    Tensor t(DataType::kString, {static_cast<int64_t>(a.strings.size())});
    for (size_t i = 0; i < a.strings.size(); ++i) t.string_data()[i] = a.strings[i];
    return ctx.set_output(0, Value(t));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// ConstantOfShape

Status constant_of_shape_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  auto dims = read_int_values(ctx.input(0));
  if (!dims.ok()) return ctx.error("shape input: " + dims.status().message(), StatusCode::kInvalidArgument);
  for (int64_t d : dims.value()) {
    if (d < 0) return ctx.error("negative dimension in shape " + shape_to_string(dims.value()), StatusCode::kInvalidArgument);
  }
  if (!generated_size_ok(dims.value())) {
    return ctx.error("shape " + shape_to_string(dims.value()) + " is too large", StatusCode::kInvalidArgument);
  }
  const Tensor* v = info.attr_tensor("value");
  DataType dt = v ? v->dtype() : DataType::kFloat;
  if (v && v->numel() != 1) return ctx.error("value must hold one element, got " + v->describe(), StatusCode::kInvalidModel);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, dims.value()));
  const int64_t n = y->numel();
  if (n == 0) return Status::Ok();
  if (!v) {
    std::fill(y->data<float>(), y->data<float>() + n, 0.f);
    return Status::Ok();
  }
  if (dt == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) y->string_data()[i] = v->string_data()[0];
    return Status::Ok();
  }
  Tensor vc = v->contiguous();
  if (dtype_is_subbyte(dt)) {
    // Packed 4-bit / 2-bit elements, low bits first: replicate the element pattern across bytes.
    const int bits = dtype_bits(dt);
    const uint8_t e = static_cast<uint8_t>(vc.data<uint8_t>()[0] & ((1u << bits) - 1));
    uint8_t pattern = 0;
    for (int k = 0; k < 8; k += bits) pattern = static_cast<uint8_t>(pattern | (e << k));
    const size_t nbytes = y->nbytes();
    uint8_t* yd = y->data<uint8_t>();
    std::fill(yd, yd + nbytes, pattern);
    const int64_t used_bits = (n * bits) % 8;
    if (used_bits != 0) yd[nbytes - 1] = static_cast<uint8_t>(pattern & ((1u << used_bits) - 1));
    return Status::Ok();
  }
  return dispatch_by_size(
      dt,
      [&](auto tag) -> Status {
        using E = decltype(tag);
        E e;
        std::memcpy(&e, vc.raw_data(), sizeof(E));
        std::fill(y->data<E>(), y->data<E>() + n, e);
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(dt), StatusCode::kNotImplemented); });
}

// ---------------------------------------------------------------------------------------------
// Range: output[i] = start + i * delta, n = max(ceil((limit - start) / delta), 0).

Status range_compute(ep::KernelContext& ctx) {
  const Tensor& s = ctx.input(0);
  const Tensor& l = ctx.input(1);
  const Tensor& d = ctx.input(2);
  if (s.numel() != 1 || l.numel() != 1 || d.numel() != 1) {
    return ctx.error("Range inputs must be scalars", StatusCode::kInvalidArgument);
  }
  if (s.dtype() != l.dtype() || s.dtype() != d.dtype()) {
    return ctx.error("Range inputs differ in dtype", StatusCode::kInvalidArgument);
  }
  const DataType dt = s.dtype();
  return dispatch_numeric(
      dt,
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using C = compute_t<T>;
        const C start = static_cast<C>(s.data<T>()[0]), limit = static_cast<C>(l.data<T>()[0]),
                delta = static_cast<C>(d.data<T>()[0]);
        if (delta == C(0)) return ctx.error("Range delta must not be zero", StatusCode::kInvalidArgument);
        int64_t n;
        if constexpr (std::is_integral_v<C>) {
          const long double span = static_cast<long double>(limit) - static_cast<long double>(start);
          const long double q = std::ceil(span / static_cast<long double>(delta));
          if (q > 1e15L) return ctx.error("Range would produce too many elements", StatusCode::kInvalidArgument);
          n = static_cast<int64_t>(q);
        } else {
          const double q = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
          if (!std::isfinite(q) || q > 1e15) return ctx.error("Range length is not finite or too large", StatusCode::kInvalidArgument);
          n = static_cast<int64_t>(q);
        }
        n = std::max<int64_t>(n, 0);
        if (!generated_size_ok({n})) {
          return ctx.error("Range would produce " + std::to_string(n) + " elements", StatusCode::kInvalidArgument);
        }
        NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, {n}));
        T* yd = y->data<T>();
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_integral_v<C>) {
            yd[i] = static_cast<T>(static_cast<C>(start + static_cast<C>(i) * delta));
          } else {
            yd[i] = T(static_cast<C>(start + static_cast<C>(i) * delta));
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(dt), StatusCode::kNotImplemented); });
}

// ---------------------------------------------------------------------------------------------
// EyeLike

Status eye_like_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const Tensor& x = ctx.input(0);
  if (x.rank() != 2) return ctx.error("EyeLike expects a 2-D input, got " + x.describe(), StatusCode::kInvalidArgument);
  DataType dt = x.dtype();
  if (info.has_attr("dtype")) {
    int64_t v = info.attr_int("dtype", 0);
    if (!is_known_dtype(static_cast<int32_t>(v))) return ctx.error("bad dtype " + std::to_string(v));
    dt = static_cast<DataType>(v);
  }
  const int64_t k = info.attr_int("k", 0);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, x.shape()));
  const int64_t R = x.dim(0), Cc = x.dim(1);
  auto fill = [&](auto one) {
    using E = decltype(one);
    E* yd = y->data<E>();
    std::fill(yd, yd + R * Cc, E{});
    for (int64_t i = 0; i < R; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < Cc) yd[i * Cc + j] = one;
    }
  };
  if (dt == DataType::kBool) {
    fill(uint8_t{1});
    return Status::Ok();
  }
  return dispatch_numeric(
      dt,
      [&](auto tag) -> Status {
        using T = decltype(tag);
        if constexpr (std::is_integral_v<T>) fill(T(1));
        else fill(from_compute<T>(1));
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(dt), StatusCode::kNotImplemented); });
}

// ---------------------------------------------------------------------------------------------
// Dropout. Inference (opset >= 7 without training_mode, or is_test before 7): identity and an all-true
// mask (bool from opset 10, the input's dtype with ones before). Training (opset 12+ training_mode
// input true, or is_test=0 before 7): mask = uniform >= ratio, y = x * mask / (1 - ratio).

Status dropout_compute(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  const int64_t opset = info.opset();
  const Tensor& x = ctx.input(0);
  float ratio = info.attr_float("ratio", 0.5f);
  bool training = false;
  if (opset >= 12) {
    if (ctx.has_input(1)) {
      auto r = read_double_values(ctx.input(1));
      if (!r.ok() || r.value().size() != 1) return ctx.error("ratio must be a float scalar", StatusCode::kInvalidArgument);
      ratio = static_cast<float>(r.value()[0]);
    }
    if (ctx.has_input(2)) {
      auto t = read_int_values(ctx.input(2));
      if (!t.ok() || t.value().size() != 1) return ctx.error("training_mode must be a bool scalar", StatusCode::kInvalidArgument);
      training = t.value()[0] != 0;
    }
  } else if (opset < 7) {
    training = info.attr_int("is_test", 0) == 0;
  }
  if (training && (ratio < 0.f || ratio >= 1.f)) {
    return ctx.error("ratio must be in [0, 1), got " + std::to_string(ratio), StatusCode::kInvalidArgument);
  }
  const bool want_mask = ctx.num_outputs() > 1 && ctx.output_requested(1);
  const DataType mask_dt = opset >= 10 ? DataType::kBool : x.dtype();
  if (!training || ratio == 0.f) {
    NXRT_RETURN_IF_ERROR(ctx.set_output(0, Value(x)));
    if (want_mask) {
      NXRT_ASSIGN_OR_RETURN(Tensor * m, ctx.allocate_output(1, mask_dt, x.shape()));
      if (mask_dt == DataType::kBool) {
        std::fill(m->data<uint8_t>(), m->data<uint8_t>() + m->numel(), uint8_t{1});
      } else {
        NXRT_RETURN_IF_ERROR(dispatch_float(
            mask_dt,
            [&](auto tag) -> Status {
              using T = decltype(tag);
              std::fill(m->data<T>(), m->data<T>() + m->numel(), T(1.0f));
              return Status::Ok();
            },
            [&] { return ctx.error("unsupported dtype", StatusCode::kNotImplemented); }));
      }
    }
    return Status::Ok();
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
  std::vector<uint8_t> keep(static_cast<size_t>(x.numel()));
  Rng rng = make_rng(info);
  for (auto& k : keep) k = rng.uniform() >= ratio ? 1 : 0;
  const double scale = 1.0 / (1.0 - ratio);
  NXRT_RETURN_IF_ERROR(dispatch_float(
      x.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        using C = compute_t<T>;
        const T* xd = x.data<T>();
        T* yd = y->data<T>();
        for (int64_t i = 0; i < x.numel(); ++i) yd[i] = T(keep[i] ? static_cast<C>(static_cast<C>(xd[i]) * scale) : C(0));
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(x.dtype()), StatusCode::kNotImplemented); }));
  if (want_mask) {
    NXRT_ASSIGN_OR_RETURN(Tensor * m, ctx.allocate_output(1, mask_dt, x.shape()));
    if (mask_dt == DataType::kBool) {
      std::copy(keep.begin(), keep.end(), m->data<uint8_t>());
    } else {
      NXRT_RETURN_IF_ERROR(dispatch_float(
          mask_dt,
          [&](auto tag) -> Status {
            using T = decltype(tag);
            for (int64_t i = 0; i < m->numel(); ++i) m->data<T>()[i] = T(keep[i] ? 1.0f : 0.0f);
            return Status::Ok();
          },
          [&] { return ctx.error("unsupported dtype", StatusCode::kNotImplemented); }));
    }
  }
  return Status::Ok();
}

}  // namespace

void register_generator_ops(ep::KernelRegistry& r) {
  r.add_fn("Constant", &constant_compute);
  r.add_fn("ConstantOfShape", &constant_of_shape_compute);
  r.add_fn("Range", &range_compute);
  r.add_fn("EyeLike", &eye_like_compute);
  r.add_fn("Dropout", &dropout_compute);
  register_random_ops(r);
  register_loss_ops(r);
}

}  // namespace nxrt::ops
