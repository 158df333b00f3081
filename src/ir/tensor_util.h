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

// The dtype -> C++ type dispatch family: each calls f(T{}) with T the C++ type of `dt` when dt is in
// the family, else returns the error `unsupported` (a Status or a callable making one). Usage:
//   return dispatch_numeric(dt, [&](auto tag) { using T = decltype(tag); ...; return Status::Ok(); },
//                           [&] { return ctx.error("..."); });
//   dispatch_float     float, double, float16, bfloat16
//   dispatch_signed    dispatch_float + int8..int64
//   dispatch_integer   int8..int64, uint8..uint64
//   dispatch_unsigned  uint8..uint64
//   dispatch_numeric   dispatch_float + dispatch_integer
//   dispatch_native    dispatch_numeric + bool
//   dispatch_by_size   any whole-byte fixed-size dtype as an unsigned type of its size (or Bytes16)
//   dispatch_elem      dispatch_by_size + std::string
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

template <typename F, typename E>
Status dispatch_unsigned(DataType dt, F&& f, E&& unsupported) {
  switch (dt) {
    case DataType::kUInt8: return f(uint8_t{});
    case DataType::kUInt16: return f(uint16_t{});
    case DataType::kUInt32: return f(uint32_t{});
    case DataType::kUInt64: return f(uint64_t{});
    default: return dispatch_error(unsupported);
  }
}

// The signed integers, or `rest(dt)` for any other dtype (how the families chain).
template <typename F, typename R>
Status dispatch_signed_int_or(DataType dt, F&& f, R&& rest) {
  switch (dt) {
    case DataType::kInt8: return f(int8_t{});
    case DataType::kInt16: return f(int16_t{});
    case DataType::kInt32: return f(int32_t{});
    case DataType::kInt64: return f(int64_t{});
    default: return rest();
  }
}

template <typename F, typename E>
Status dispatch_signed(DataType dt, F&& f, E&& unsupported) {
  return dispatch_signed_int_or(dt, f, [&] { return dispatch_float(dt, f, unsupported); });
}

template <typename F, typename E>
Status dispatch_integer(DataType dt, F&& f, E&& unsupported) {
  return dispatch_signed_int_or(dt, f, [&] { return dispatch_unsigned(dt, f, unsupported); });
}

template <typename F, typename E>
Status dispatch_numeric(DataType dt, F&& f, E&& unsupported) {
  return dispatch_signed_int_or(dt, f, [&] {
    return dispatch_unsigned(dt, f, [&] { return dispatch_float(dt, f, unsupported); });
  });
}

template <typename F, typename E>
Status dispatch_native(DataType dt, F&& f, E&& unsupported) {
  if (dt == DataType::kBool) return f(bool{});
  return dispatch_numeric(dt, f, unsupported);
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

// Element-type dispatch for movement ops: f(tag) with tag an unsigned type of the element's size,
// Bytes16, or std::string. Sub-byte dtypes are not handled (callers unpack them first).
template <typename F, typename E>
Status dispatch_elem(DataType dt, F&& f, E&& unsupported) {
  if (dt == DataType::kString) return f(std::string{});
  return dispatch_by_size(dt, f, unsupported);
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

// The compute type of a storage type: float16/bfloat16 compute in float, every other type in itself.
// The one spelling of it; to_compute/from_compute convert between the two.
template <typename T> struct compute_type { using type = T; };
template <> struct compute_type<Float16> { using type = float; };
template <> struct compute_type<BFloat16> { using type = float; };
template <typename T> using compute_t = typename compute_type<T>::type;

template <typename T>
constexpr bool is_reduced_float_v = std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;
template <typename T>
constexpr bool is_float_like_v = std::is_floating_point_v<T> || is_reduced_float_v<T>;

// A storage value as compute type C (float16/bfloat16 through float).
template <typename C, typename T>
constexpr C to_compute(T v) {
  return static_cast<C>(static_cast<compute_t<T>>(v));
}
// A compute value stored as T (float16/bfloat16 rounded from float).
template <typename T, typename C>
constexpr T from_compute(C v) {
  if constexpr (is_reduced_float_v<T>) {
    return T(static_cast<float>(v));
  } else {
    return static_cast<T>(v);
  }
}

// n elements of a float/double/float16/bfloat16 buffer of dtype dt converted into C values, and back;
// other dtypes are an error.
template <typename C>
Status load_floats(DataType dt, const void* src, int64_t n, C* dst) {
  return dispatch_float(
      dt,
      [&](auto tag) {
        using T = decltype(tag);
        const T* s = static_cast<const T*>(src);
        for (int64_t i = 0; i < n; ++i) dst[i] = to_compute<C>(s[i]);
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("expected a float dtype, got ") + dtype_name(dt)); });
}
template <typename C>
Status store_floats(const C* src, int64_t n, DataType dt, void* dst) {
  return dispatch_float(
      dt,
      [&](auto tag) {
        using T = decltype(tag);
        T* d = static_cast<T*>(dst);
        for (int64_t i = 0; i < n; ++i) d[i] = from_compute<T>(src[i]);
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("expected a float dtype, got ") + dtype_name(dt)); });
}
// The whole (contiguous) tensor t as C values.
template <typename C>
Result<std::vector<C>> read_floats_as(const Tensor& t) {
  std::vector<C> v(static_cast<size_t>(t.numel()));
  if (!v.empty()) NXRT_RETURN_IF_ERROR(load_floats(t.dtype(), t.raw_data(), t.numel(), v.data()));
  return v;
}

// v rounded to the precision of float dtype dt (float, float16, bfloat16); unchanged for double.
double round_to_float_dtype(double v, DataType dt);

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
