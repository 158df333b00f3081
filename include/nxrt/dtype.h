// Element types: the numbering is ONNX's TensorProto.DataType, so a dtype read from a file needs no map.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nxrt {

enum class DataType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kComplex64 = 14,
  kComplex128 = 15,
  kBFloat16 = 16,
  kFloat8E4M3FN = 17,
  kFloat8E4M3FNUZ = 18,
  kFloat8E5M2 = 19,
  kFloat8E5M2FNUZ = 20,
  kUInt4 = 21,
  kInt4 = 22,
  kFloat4E2M1 = 23,
  kFloat8E8M0 = 24,
  kUInt2 = 25,
  kInt2 = 26,
};

constexpr int32_t kMaxDataType = 26;

// True for values 1..26 (a dtype this build knows).
bool is_known_dtype(int32_t v);
// "float32", "int64", "float16", ... (ONNX's numpy-like spelling; "undefined" for 0).
const char* dtype_name(DataType t);
// Bits per element: 32 for float, 4 for int4, 2 for int2, 0 for string (stored as std::string).
int dtype_bits(DataType t);
// Bytes needed to hold n elements densely packed (sub-byte types round up).
size_t dtype_storage_bytes(DataType t, int64_t n);
bool dtype_is_float(DataType t);     // float, double, float16, bfloat16, float8*, float4
bool dtype_is_integer(DataType t);   // signed or unsigned integers incl. int4/int2 (not bool)
bool dtype_is_signed(DataType t);    // signed ints and all floats
bool dtype_is_subbyte(DataType t);   // int4, uint4, int2, uint2, float4e2m1

}  // namespace nxrt
