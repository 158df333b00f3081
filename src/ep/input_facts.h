// What a kernel's variant is made from, for kernels whose specialize validates shapes and plans: the
// dtype and shape of each input (InputFacts), copied from the SpecializeContext at specialize or from
// the inputs when compute runs without a variant, and variant_or_make, which gives compute the
// context's variant or makes the same one per call, so both run one code path.
#pragma once
#include <algorithm>
#include <array>
#include <memory>
#include <string>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "nxrt/status.h"

namespace nxrt::ep {

// A shape error found while making a variant. It names no node: the executor adds the node and its
// inputs to what specialize returns, and compute without a variant reports it through ctx.error.
inline Status variant_error(const std::string& msg, StatusCode code = StatusCode::kRuntimeError) {
  return Status(code, msg);
}

// The dtype and shape of each input: all a variant is made from, copied from the SpecializeContext at
// specialize or from the inputs when compute runs without a variant (then it is made per call).
struct InputFacts {
  static constexpr size_t kMax = 9;  // QLinearConv's inputs, the most of any kernel that uses it
  size_t n = 0;
  std::array<DataType, kMax> dtypes{};
  std::array<Dims, kMax> shapes{};

  bool has(size_t i) const { return i < n && dtypes[i] != DataType::kUndefined; }
  DataType dtype(size_t i) const { return i < n ? dtypes[i] : DataType::kUndefined; }
  const Dims& shape(size_t i) const {
    static const Dims none;
    return i < n ? shapes[i] : none;
  }
  std::string describe(size_t i) const { return std::string(dtype_name(dtype(i))) + shape_to_string(shape(i)); }

  static InputFacts of(const ep::SpecializeContext& sc) {
    InputFacts f;
    f.n = std::min(sc.num_inputs(), kMax);
    for (size_t i = 0; i < f.n; ++i) {
      f.dtypes[i] = sc.dtype(i);
      if (sc.has_input(i)) f.shapes[i] = sc.shape(i);
    }
    return f;
  }
  static InputFacts of(const ep::KernelContext& ctx) {
    InputFacts f;
    f.n = std::min(ctx.num_inputs(), kMax);
    for (size_t i = 0; i < f.n; ++i) {
      const Value* v = ctx.input_value(i);
      if (v && v->is_tensor()) {
        f.dtypes[i] = v->tensor().dtype();
        f.shapes[i] = v->tensor().shape();
      }
    }
    return f;
  }
  // Whether ctx's inputs have these dtypes and shapes (no copy: this runs on every call).
  bool describes(const ep::KernelContext& ctx) const {
    if (std::min(ctx.num_inputs(), kMax) != n) return false;
    for (size_t i = 0; i < n; ++i) {
      const Value* v = ctx.input_value(i);
      const bool tensor = v && v->is_tensor();
      if (!tensor) {
        if (dtypes[i] != DataType::kUndefined) return false;
        continue;
      }
      if (v->tensor().dtype() != dtypes[i] || v->tensor().shape() != shapes[i]) return false;
    }
    return true;
  }
};

// The context's variant when it is a V made for these inputs (`in` holds what it was made for), else
// one made now by make(InputFacts, threads) into `own`: a context without a kernel cache (constant
// folding, unit tests) runs the same code as one with a variant. Errors name the node.
template <typename V, typename Make>
Result<const V*> variant_or_make(ep::KernelContext& ctx, std::unique_ptr<V>* own, Make&& make) {
  if (const auto* v = dynamic_cast<const V*>(ctx.variant()); v && v->in.describes(ctx)) return v;
  Result<std::unique_ptr<V>> made = make(InputFacts::of(ctx), ctx.pool().num_threads());
  if (!made.ok()) return ctx.error(made.status().message(), made.status().code());
  *own = std::move(made).value();
  return static_cast<const V*>(own->get());
}

}  // namespace nxrt::ep
