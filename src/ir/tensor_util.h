// Tensor helpers every layer uses (the optimizer's rewrites, shape inference, the CPU kernels):
// dtype -> C++ type dispatch, numpy broadcasting, axis normalization, reading constant values.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "nxrt/float_types.h"
#include "nxrt/tensor.h"

namespace nxrt::ir {

// The error of a dispatch that found no matching type: a Status, or a callable returning one, so the
// message (which names node, dtypes and shapes) is only built when it is needed. Building it on every
// call cost a heap allocation per node per run.
template <typename E>
Status dispatch_error(E&& e) {
  if constexpr (std::is_invocable_v<E>) {
    return e();
  } else {
    return e;
  }
}

// Calls f(T{}) with T the C++ type of `dt`, for the listed families. Returns the error
// `unsupported` (a Status or a callable making one) when dt is not in the family. Usage:
//   return dispatch_numeric(dt, [&](auto tag) { using T = decltype(tag); ...; return Status::Ok(); },
//                           [&] { return ctx.error("..."); });
template <typename F, typename E>
Status dispatch_numeric(DataType dt, F&& f, E&& unsupported) {
  switch (dt) {
    case DataType::kFloat: return f(float{});
    case DataType::kDouble: return f(double{});
    case DataType::kFloat16: return f(Float16{});
    case DataType::kBFloat16: return f(BFloat16{});
    case DataType::kInt8: return f(int8_t{});
    case DataType::kInt16: return f(int16_t{});
    case DataType::kInt32: return f(int32_t{});
    case DataType::kInt64: return f(int64_t{});
    case DataType::kUInt8: return f(uint8_t{});
    case DataType::kUInt16: return f(uint16_t{});
    case DataType::kUInt32: return f(uint32_t{});
    case DataType::kUInt64: return f(uint64_t{});
    default: return dispatch_error(unsupported);
  }
}

template <typename F, typename E>
Status dispatch_float(DataType dt, F&& f, E&& unsupported) {
  switch (dt) {
    case DataType::kFloat: return f(float{});
    case DataType::kDouble: return f(double{});
    case DataType::kFloat16: return f(Float16{});
    case DataType::kBFloat16: return f(BFloat16{});
    default: return dispatch_error(unsupported);
  }
}

// Any fixed-size dtype of whole bytes: for movement ops that copy elements without looking at them.
// Passes an unsigned integer type of the element's size (1, 2, 4, 8) or a 16-byte struct.
struct Bytes16 { uint64_t lo, hi; };
template <typename F, typename E>
Status dispatch_by_size(DataType dt, F&& f, E&& unsupported) {
  switch (dtype_bits(dt)) {
    case 8: return f(uint8_t{});
    case 16: return f(uint16_t{});
    case 32: return f(uint32_t{});
    case 64: return f(uint64_t{});
    case 128: return f(Bytes16{});
    default: return dispatch_error(unsupported);
  }
}

// The DataType for a C++ storage type.
template <typename T> constexpr DataType dtype_of();
template <> constexpr DataType dtype_of<float>() { return DataType::kFloat; }
template <> constexpr DataType dtype_of<double>() { return DataType::kDouble; }
template <> constexpr DataType dtype_of<Float16>() { return DataType::kFloat16; }
template <> constexpr DataType dtype_of<BFloat16>() { return DataType::kBFloat16; }
template <> constexpr DataType dtype_of<int8_t>() { return DataType::kInt8; }
template <> constexpr DataType dtype_of<int16_t>() { return DataType::kInt16; }
template <> constexpr DataType dtype_of<int32_t>() { return DataType::kInt32; }
template <> constexpr DataType dtype_of<int64_t>() { return DataType::kInt64; }
template <> constexpr DataType dtype_of<uint8_t>() { return DataType::kUInt8; }
template <> constexpr DataType dtype_of<uint16_t>() { return DataType::kUInt16; }
template <> constexpr DataType dtype_of<uint32_t>() { return DataType::kUInt32; }
template <> constexpr DataType dtype_of<uint64_t>() { return DataType::kUInt64; }
template <> constexpr DataType dtype_of<bool>() { return DataType::kBool; }

// Computation type: reduced floats compute in float.
template <typename T> struct compute_type { using type = T; };
template <> struct compute_type<Float16> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <typename T> using compute_t = typename compute_type<T>::type;

// Numpy-style broadcast of two shapes; false when they do not broadcast.
bool broadcast_shapes(const Dims& a, const Dims& b, Dims* out);
// Broadcast of many shapes, or an error naming the shapes.
Result<Dims> broadcast_all(const std::vector<Dims>& shapes);
// Element strides of `in` when broadcast to `out` (0 on broadcast axes), aligned right.
Dims broadcast_strides(const Dims& in, const Dims& out);

// Normalizes a possibly negative axis into [0, rank); false when out of range.
bool normalize_axis(int64_t* axis, int64_t rank);

// Reads an integer tensor (int32/int64/...) of any shape into int64 values.
Result<std::vector<int64_t>> read_int_values(const Tensor& t);
// Reads a float-like tensor into double values.
Result<std::vector<double>> read_double_values(const Tensor& t);

// BatchNormalization's inference statistics folded per channel, in double: a = scale / sqrt(var + eps),
// b = B - mean * a. `p` is {scale, B, mean, var}, each of the same length. (The BatchNormRelu kernel
// and the optimizer's pre-activation fusion must fold identically.)
Status fold_batch_norm(const std::vector<const Tensor*>& p, double eps, std::vector<double>* a,
                       std::vector<double>* b);

}  // namespace nxrt::ir
