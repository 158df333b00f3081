#include "nxrt/dtype.h"

namespace nxrt {

bool is_known_dtype(int32_t v) { return v >= 1 && v <= kMaxDataType; }

const char* dtype_name(DataType t) {
  switch (t) {
    case DataType::kUndefined: return "undefined";
    case DataType::kFloat: return "float32";
    case DataType::kUInt8: return "uint8";
    case DataType::kInt8: return "int8";
    case DataType::kUInt16: return "uint16";
    case DataType::kInt16: return "int16";
    case DataType::kInt32: return "int32";
    case DataType::kInt64: return "int64";
    case DataType::kString: return "string";
    case DataType::kBool: return "bool";
    case DataType::kFloat16: return "float16";
    case DataType::kDouble: return "float64";
    case DataType::kUInt32: return "uint32";
    case DataType::kUInt64: return "uint64";
    case DataType::kComplex64: return "complex64";
    case DataType::kComplex128: return "complex128";
    case DataType::kBFloat16: return "bfloat16";
    case DataType::kFloat8E4M3FN: return "float8e4m3fn";
    case DataType::kFloat8E4M3FNUZ: return "float8e4m3fnuz";
    case DataType::kFloat8E5M2: return "float8e5m2";
    case DataType::kFloat8E5M2FNUZ: return "float8e5m2fnuz";
    case DataType::kUInt4: return "uint4";
    case DataType::kInt4: return "int4";
    case DataType::kFloat4E2M1: return "float4e2m1";
    case DataType::kFloat8E8M0: return "float8e8m0";
    case DataType::kUInt2: return "uint2";
    case DataType::kInt2: return "int2";
  }
  return "unknown-dtype";
}

int dtype_bits(DataType t) {
  switch (t) {
    case DataType::kBool:
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat8E8M0: return 8;
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16: return 16;
    case DataType::kFloat:
    case DataType::kInt32:
    case DataType::kUInt32: return 32;
    case DataType::kDouble:
    case DataType::kInt64:
    case DataType::kUInt64:
    case DataType::kComplex64: return 64;
    case DataType::kComplex128: return 128;
    case DataType::kUInt4:
    case DataType::kInt4:
    case DataType::kFloat4E2M1: return 4;
    case DataType::kUInt2:
    case DataType::kInt2: return 2;
    case DataType::kString:
    case DataType::kUndefined: return 0;
  }
  return 0;
}

size_t dtype_storage_bytes(DataType t, int64_t n) {
  if (n <= 0) return 0;
  if (t == DataType::kString) return static_cast<size_t>(n) * sizeof(std::string);
  int bits = dtype_bits(t);
  return (static_cast<size_t>(n) * static_cast<size_t>(bits) + 7) / 8;
}

bool dtype_is_float(DataType t) {
  switch (t) {
    case DataType::kFloat:
    case DataType::kDouble:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat8E4M3FN:
    case DataType::kFloat8E4M3FNUZ:
    case DataType::kFloat8E5M2:
    case DataType::kFloat8E5M2FNUZ:
    case DataType::kFloat8E8M0:
    case DataType::kFloat4E2M1: return true;
    default: return false;
  }
}

bool dtype_is_integer(DataType t) {
  switch (t) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kUInt16:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kUInt32:
    case DataType::kUInt64:
    case DataType::kUInt4:
    case DataType::kInt4:
    case DataType::kUInt2:
    case DataType::kInt2: return true;
    default: return false;
  }
}

bool dtype_is_signed(DataType t) {
  switch (t) {
    case DataType::kInt8:
    case DataType::kInt16:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kInt4:
    case DataType::kInt2: return true;
    default: return dtype_is_float(t);
  }
}

bool dtype_is_subbyte(DataType t) { return dtype_bits(t) > 0 && dtype_bits(t) < 8; }

}  // namespace nxrt
