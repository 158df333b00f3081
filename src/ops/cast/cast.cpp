// Cast, CastLike and linear quantization (QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear).
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>

#include "ir/float8_types.h"
#include "ir/half_convert.h"
#include "ops/cast/cast_util.h"
#include "ops/cast/dynamic_quantize.h"
#include "ops/common.h"
#include "ops/elementwise/elementwise_util.h"

namespace nxrt::ops {
namespace {

using ep::KernelContext;
using ep::KernelInfo;

// Float -> integer as C casts behave on x86 (what numpy's astype gives there): truncate toward zero;
// narrow targets (<= 32-bit signed, 8/16-bit unsigned) convert through int32, uint32 and int64
// through int64, where out-of-range and NaN give the "integer indefinite" minimum, then the low bits
// are kept. Never UB.
template <typename D>
inline D float_to_int(double v) {
  if constexpr (std::is_same_v<D, uint64_t>) {
    if (v >= 9223372036854775808.0 && v < 18446744073709551616.0) return static_cast<uint64_t>(v);
  }
  if constexpr (sizeof(D) < 4 || std::is_same_v<D, int32_t>) {
    if (!(v > -2147483649.0 && v < 2147483648.0)) return static_cast<D>(std::numeric_limits<int32_t>::min());
    return static_cast<D>(static_cast<int32_t>(v));
  } else {
    if (!(v > -9223372036854775808.0 && v < 9223372036854775808.0)) {
      return static_cast<D>(static_cast<uint64_t>(std::numeric_limits<int64_t>::min()));
    }
    return static_cast<D>(static_cast<int64_t>(v));
  }
}

// float32 <-> float16 on F16C (ir/half_convert.h: bit for bit Float16's conversions): ~2.5 ns an
// element through Float16 (4M: 21 ms for float -> half -> float) against memory speed here.
using HalfConvert = void (*)(const uint8_t* in, uint8_t* out, int64_t n);
void floats_to_halves_f16c(const uint8_t* in, uint8_t* out, int64_t n) {
  ir::floats_to_halves(reinterpret_cast<const float*>(in), reinterpret_cast<uint16_t*>(out), n);
}
void halves_to_floats_f16c(const uint8_t* in, uint8_t* out, int64_t n) {
  ir::halves_to_floats(reinterpret_cast<const uint16_t*>(in), reinterpret_cast<float*>(out), n);
}

// The F16C conversion for S -> D, or null (other pairs; no F16C).
template <typename S, typename D>
HalfConvert half_convert() {
  if (!ir::half_conversion_vectorized()) return nullptr;
  if constexpr (std::is_same_v<S, float> && std::is_same_v<D, Float16>) return &floats_to_halves_f16c;
  if constexpr (std::is_same_v<S, Float16> && std::is_same_v<D, float>) return &halves_to_floats_f16c;
  return nullptr;
}

template <typename S>
inline S load_native(const void* base, int64_t i) {
  if constexpr (std::is_same_v<S, bool>) return static_cast<const uint8_t*>(base)[i] != 0;
  else return static_cast<const S*>(base)[i];
}

template <typename D>
inline void store_native(void* base, int64_t i, D v) {
  if constexpr (std::is_same_v<D, bool>) static_cast<uint8_t*>(base)[i] = v ? 1 : 0;
  else static_cast<D*>(base)[i] = v;
}

// One element S -> D among the native types.
template <typename D, typename S>
inline D cast_one(S s) {
  if constexpr (std::is_same_v<D, S>) {
    return s;
  } else if constexpr (std::is_same_v<S, Float16> || std::is_same_v<S, BFloat16>) {
    return cast_one<D, float>(static_cast<float>(s));
  } else if constexpr (std::is_same_v<D, bool>) {
    return s != S(0);
  } else if constexpr (std::is_same_v<D, Float16>) {
    if constexpr (std::is_same_v<S, float>) return Float16(s);
    else return Float16::from_bits(static_cast<uint16_t>(encode_minifloat(static_cast<double>(s), MiniFloat::kF16, false)));
  } else if constexpr (std::is_same_v<D, BFloat16>) {
    if constexpr (std::is_same_v<S, float>) return BFloat16(s);
    else return BFloat16::from_bits(static_cast<uint16_t>(encode_minifloat(static_cast<double>(s), MiniFloat::kBF16, false)));
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<D>(s);
  } else {  // integral D
    if constexpr (std::is_floating_point_v<S>) return float_to_int<D>(static_cast<double>(s));
    else return static_cast<D>(s);
  }
}

bool is_int_like(DataType t) { return dtype_is_integer(t) || t == DataType::kBool; }

MiniFloat minifloat_of(DataType t) {
  switch (t) {
    case DataType::kFloat8E4M3FN: return MiniFloat::kE4M3FN;
    case DataType::kFloat8E4M3FNUZ: return MiniFloat::kE4M3FNUZ;
    case DataType::kFloat8E5M2: return MiniFloat::kE5M2;
    case DataType::kFloat8E5M2FNUZ: return MiniFloat::kE5M2FNUZ;
    default: return MiniFloat::kE2M1;
  }
}

const float* float8_table(DataType t) {
  const auto& tab = MiniFloatTables::get();
  switch (t) {
    case DataType::kFloat8E4M3FN: return tab.e4m3fn;
    case DataType::kFloat8E4M3FNUZ: return tab.e4m3fnuz;
    case DataType::kFloat8E5M2: return tab.e5m2;
    case DataType::kFloat8E5M2FNUZ: return tab.e5m2fnuz;
    case DataType::kFloat8E8M0: return tab.e8m0;
    default: return nullptr;
  }
}

bool is_subbyte_int(DataType t) {
  return t == DataType::kInt4 || t == DataType::kUInt4 || t == DataType::kInt2 || t == DataType::kUInt2;
}

// ---- strings

bool iequals(const std::string& a, const char* b) {
  size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

double parse_double(const std::string& s0) {
  std::string s = trim(s0);
  if (iequals(s, "NaN") || iequals(s, "+NaN") || iequals(s, "-NaN")) return std::numeric_limits<double>::quiet_NaN();
  if (iequals(s, "INF") || iequals(s, "+INF") || iequals(s, "Infinity") || iequals(s, "+Infinity"))
    return std::numeric_limits<double>::infinity();
  if (iequals(s, "-INF") || iequals(s, "-Infinity")) return -std::numeric_limits<double>::infinity();
  if (s.empty()) return 0.0;
  if (iequals(s, "true")) return 1.0;
  if (iequals(s, "false")) return 0.0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return 0.0;  // not a number: undefined by the spec; 0
  return v;
}

// Integers parse exactly when the string is an integer literal, else through double.
bool parse_int64(const std::string& s0, int64_t* out) {
  std::string s = trim(s0);
  if (s.empty()) return false;
  if (iequals(s, "true") || iequals(s, "false")) {
    *out = iequals(s, "true") ? 1 : 0;
    return true;
  }
  const char* b = s.c_str();
  const char* e = b + s.size();
  if (*b == '+') ++b;
  auto r = std::from_chars(b, e, *out);
  if (r.ec == std::errc() && r.ptr == e) return true;
  uint64_t u;
  r = std::from_chars(b, e, u);
  if (r.ec == std::errc() && r.ptr == e) {
    *out = static_cast<int64_t>(u);
    return true;
  }
  return false;
}

// Like numpy's str() of a float: shortest round-trip digits, positional for 1e-4 <= |v| < 1e16 (with
// ".0" when integral), else scientific ("1e+20", "1.5e-05"); NaN / INF / -INF as the Cast spec names them.
template <typename T>
std::string format_float(T v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v < 0 ? "-INF" : "INF";
  char buf[512];
  const T a = v < 0 ? -v : v;
  if (a == 0 || (a >= static_cast<T>(1e-4) && a < static_cast<T>(1e16))) {
    auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
    std::string s(buf, r.ptr);
    if (s.find('.') == std::string::npos) s += ".0";
    return s;
  }
  auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  return std::string(buf, r.ptr);
}

template <typename S>
std::string format_native(S v) {
  if constexpr (std::is_same_v<S, bool>) return v ? "True" : "False";
  else if constexpr (std::is_same_v<S, Float16> || std::is_same_v<S, BFloat16>) return format_float(static_cast<float>(v));
  else if constexpr (std::is_floating_point_v<S>) return format_float(v);
  else return std::to_string(v);
}

// ---- generic loaders / storers (exotic types go through these)

// The whole-byte ("native") dtypes read into V values and written from them, element by element with
// C++ conversion semantics (cast_one); `what` names V's kind in the error.
template <typename V>
Status load_native_values(const Tensor& in, V* out, const char* what) {
  return dispatch_native(
      in.dtype(),
      [&](auto tag) -> Status {
        using S = decltype(tag);
        const void* p = in.raw_data();
        for (int64_t i = 0, n = in.numel(); i < n; ++i) out[i] = cast_one<V>(load_native<S>(p, i));
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("cannot read ") + dtype_name(in.dtype()) + " as " + what); });
}
template <typename V>
Status store_native_values(const V* v, Tensor* out, const char* what) {
  return dispatch_native(
      out->dtype(),
      [&](auto tag) -> Status {
        using D = decltype(tag);
        void* p = out->raw_data();
        for (int64_t i = 0, n = out->numel(); i < n; ++i) store_native<D>(p, i, cast_one<D>(v[i]));
        return Status::Ok();
      },
      [&] { return invalid_argument(std::string("cannot write ") + what + " as " + dtype_name(out->dtype())); });
}

Status load_ints(const Tensor& in, std::vector<int64_t>* out) {
  const int64_t n = in.numel();
  out->resize(static_cast<size_t>(n));
  const DataType t = in.dtype();
  if (is_subbyte_int(t)) {
    const int bits = dtype_bits(t);
    const bool sgn = t == DataType::kInt4 || t == DataType::kInt2;
    const uint8_t* p = in.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) (*out)[i] = subbyte_get(p, i, bits, sgn);
    return Status::Ok();
  }
  if (t == DataType::kString) {
    const std::string* p = in.string_data();
    for (int64_t i = 0; i < n; ++i) {
      int64_t v;
      if (!parse_int64(p[i], &v)) v = float_to_int<int64_t>(parse_double(p[i]));
      (*out)[i] = v;
    }
    return Status::Ok();
  }
  return load_native_values(in, out->data(), "integers");
}

Status store_ints(const std::vector<int64_t>& v, Tensor* out) {
  const int64_t n = out->numel();
  const DataType t = out->dtype();
  if (is_subbyte_int(t)) {
    const int bits = dtype_bits(t);
    uint8_t* p = out->data<uint8_t>();
    std::memset(p, 0, out->nbytes());
    for (int64_t i = 0; i < n; ++i) subbyte_set(p, i, bits, static_cast<uint32_t>(v[i]));
    return Status::Ok();
  }
  return store_native_values(v.data(), out, "integers");
}

Status store_doubles(const std::vector<double>& v, Tensor* out, const CastOptions& opts) {
  const int64_t n = out->numel();
  const DataType t = out->dtype();
  if (is_subbyte_int(t)) {
    const int bits = dtype_bits(t);
    uint8_t* p = out->data<uint8_t>();
    std::memset(p, 0, out->nbytes());
    for (int64_t i = 0; i < n; ++i) subbyte_set(p, i, bits, static_cast<uint32_t>(float_to_int<int64_t>(v[i])));
    return Status::Ok();
  }
  if (t == DataType::kFloat4E2M1) {
    uint8_t* p = out->data<uint8_t>();
    std::memset(p, 0, out->nbytes());
    for (int64_t i = 0; i < n; ++i) subbyte_set(p, i, 4, encode_minifloat(v[i], MiniFloat::kE2M1, true));
    return Status::Ok();
  }
  if (t == DataType::kFloat8E8M0) {
    uint8_t* p = out->data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) p[i] = encode_e8m0(static_cast<float>(v[i]), opts.saturate, opts.round_mode);
    return Status::Ok();
  }
  if (float8_table(t) != nullptr) {
    uint8_t* p = out->data<uint8_t>();
    const MiniFloat f = minifloat_of(t);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(encode_minifloat(v[i], f, opts.saturate));
    return Status::Ok();
  }
  if (t == DataType::kString) {
    std::string* p = out->string_data();
    for (int64_t i = 0; i < n; ++i) p[i] = format_float(static_cast<float>(v[i]));
    return Status::Ok();
  }
  return store_native_values(v.data(), out, "numbers");
}

}  // namespace

Status load_as_double(const Tensor& in, std::vector<double>* out) {
  const int64_t n = in.numel();
  out->resize(static_cast<size_t>(n));
  const DataType t = in.dtype();
  if (is_subbyte_int(t)) {
    std::vector<int64_t> iv;
    NXRT_RETURN_IF_ERROR(load_ints(in, &iv));
    for (int64_t i = 0; i < n; ++i) (*out)[i] = static_cast<double>(iv[i]);
    return Status::Ok();
  }
  if (t == DataType::kFloat4E2M1) {
    const uint8_t* p = in.data<uint8_t>();
    const float* tab = MiniFloatTables::get().e2m1;
    for (int64_t i = 0; i < n; ++i) (*out)[i] = tab[subbyte_get(p, i, 4, false)];
    return Status::Ok();
  }
  if (const float* tab = float8_table(t)) {
    const uint8_t* p = in.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) (*out)[i] = tab[p[i]];
    return Status::Ok();
  }
  if (t == DataType::kString) {
    const std::string* p = in.string_data();
    for (int64_t i = 0; i < n; ++i) (*out)[i] = parse_double(p[i]);
    return Status::Ok();
  }
  return load_native_values(in, out->data(), "numbers");
}

Status cast_tensor(const Tensor& in, Tensor* out, const CastOptions& opts, ep::ThreadPool* pool) {
  const DataType st = in.dtype(), dt = out->dtype();
  const int64_t n = in.numel();
  if (out->numel() != n) return invalid_argument("cast: element counts differ");
  if (n == 0) return Status::Ok();
  auto unsupported = [&] { return not_implemented(std::string("cast from ") + dtype_name(st) + " to " + dtype_name(dt)); };
  const bool s_native = st == DataType::kBool || (dtype_bits(st) >= 8 && float8_table(st) == nullptr && st != DataType::kString);
  const bool d_native = dt == DataType::kBool || (dtype_bits(dt) >= 8 && float8_table(dt) == nullptr && dt != DataType::kString);
  if (s_native && d_native) {
    return dispatch_native(
        st,
        [&](auto stag) -> Status {
          using S = decltype(stag);
          return dispatch_native(
              dt,
              [&](auto dtag) -> Status {
                using D = decltype(dtag);
                const void* ip = in.raw_data();
                void* op = out->raw_data();
                if constexpr (std::is_same_v<S, D>) {
                  std::memcpy(op, ip, out->nbytes());
                } else if (HalfConvert conv = half_convert<S, D>()) {
                  auto body = [&](int64_t b, int64_t e) {
                    conv(static_cast<const uint8_t*>(ip) + b * int64_t(sizeof(S)),
                         static_cast<uint8_t*>(op) + b * int64_t(sizeof(D)), e - b);
                  };
                  if (pool) ew::run_flat(*pool, n, 65536, body);
                  else body(0, n);
                } else {
                  auto body = [&](int64_t b, int64_t e) {
                    for (int64_t i = b; i < e; ++i) store_native<D>(op, i, cast_one<D>(load_native<S>(ip, i)));
                  };
                  if (pool) ew::run_flat(*pool, n, 65536, body);
                  else body(0, n);
                }
                return Status::Ok();
              },
              unsupported);
        },
        unsupported);
  }
  if (dt == DataType::kString) {
    std::string* p = out->string_data();
    if (st == DataType::kString) {
      const std::string* q = in.string_data();
      std::copy(q, q + n, p);
      return Status::Ok();
    }
    if (s_native) {
      return dispatch_native(
          st,
          [&](auto stag) -> Status {
            using S = decltype(stag);
            for (int64_t i = 0; i < n; ++i) p[i] = format_native(load_native<S>(in.raw_data(), i));
            return Status::Ok();
          },
          unsupported);
    }
    if (is_subbyte_int(st)) {
      std::vector<int64_t> v;
      NXRT_RETURN_IF_ERROR(load_ints(in, &v));
      for (int64_t i = 0; i < n; ++i) p[i] = std::to_string(v[i]);
      return Status::Ok();
    }
  }
  if ((is_int_like(st) || st == DataType::kString) && is_int_like(dt)) {
    std::vector<int64_t> v;
    NXRT_RETURN_IF_ERROR(load_ints(in, &v));
    return store_ints(v, out);
  }
  std::vector<double> v;
  NXRT_RETURN_IF_ERROR(load_as_double(in, &v));
  return store_doubles(v, out, opts);
}

bool dtype_from_onnx_name(const std::string& name0, DataType* out) {
  static const std::pair<const char*, DataType> kNames[] = {
      {"FLOAT", DataType::kFloat},       {"UINT8", DataType::kUInt8},     {"INT8", DataType::kInt8},
      {"UINT16", DataType::kUInt16},     {"INT16", DataType::kInt16},     {"INT32", DataType::kInt32},
      {"INT64", DataType::kInt64},       {"STRING", DataType::kString},   {"BOOL", DataType::kBool},
      {"FLOAT16", DataType::kFloat16},   {"DOUBLE", DataType::kDouble},   {"UINT32", DataType::kUInt32},
      {"UINT64", DataType::kUInt64},     {"BFLOAT16", DataType::kBFloat16}, {"FLOAT32", DataType::kFloat},
      {"FLOAT64", DataType::kDouble},
  };
  std::string name;
  for (char c : name0) name += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const auto& [n, t] : kNames) {
    if (name == n) {
      *out = t;
      return true;
    }
  }
  return false;
}

namespace {

Status read_cast_options(const KernelInfo& info, CastOptions* o) {
  o->saturate = info.attr_int("saturate", 1) != 0;
  const std::string rm = info.attr_string("round_mode", "up");
  if (rm == "up") o->round_mode = E8M0Round::kUp;
  else if (rm == "down") o->round_mode = E8M0Round::kDown;
  else if (rm == "nearest") o->round_mode = E8M0Round::kNearest;
  else return info.error("round_mode must be up, down or nearest, got '" + rm + "'");
  return Status::Ok();
}

Status run_cast(KernelContext& ctx, const Tensor& x, DataType to) {
  CastOptions opts;
  NXRT_RETURN_IF_ERROR(read_cast_options(ctx.info(), &opts));
  if (to == x.dtype()) return ctx.set_output(0, Value(x));
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, to, x.shape()));
  Status s = cast_tensor(x, y, opts, &ctx.pool());
  if (!s.ok()) return ctx.error(s.message(), s.code());
  return Status::Ok();
}

Status Cast(KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(ew::need_inputs(ctx, 1));
  const KernelInfo& info = ctx.info();
  const ir::Attribute* a = info.node().find_attribute("to");
  if (!a) return ctx.error("missing attribute 'to'", StatusCode::kInvalidModel);
  DataType to;
  if (a->type == ir::Attribute::Type::kString) {
    if (!dtype_from_onnx_name(a->s, &to)) return ctx.error("unknown 'to' type name '" + a->s + "'", StatusCode::kInvalidModel);
  } else {
    if (!is_known_dtype(static_cast<int32_t>(a->i)) || a->i == 0) {
      return ctx.error("unknown 'to' dtype " + std::to_string(a->i), StatusCode::kInvalidModel);
    }
    to = static_cast<DataType>(a->i);
  }
  return run_cast(ctx, ctx.input(0), to);
}

Status CastLike(KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(ew::need_inputs(ctx, 2));
  return run_cast(ctx, ctx.input(0), ctx.input(1).dtype());
}

// ---------------------------------------------------------------------------------------------
// Quantization

struct QuantLayout {
  int64_t outer = 1, dim = 1, inner = 1;  // x viewed as [outer, dim, inner] around axis
  int64_t block = 0;                      // > 0: blocked along axis
  int64_t sdim = 1;                       // scale's size along axis (blocked: ceil(dim / block))
  enum Mode { kTensor, kAxis, kBlocked } mode = kTensor;
};

Status quant_layout(const KernelContext& ctx, const Tensor& x, const Tensor& scale, const Tensor* zp,
                    QuantLayout* L) {
  const KernelInfo& info = ctx.info();
  if (zp && zp->shape() != scale.shape() && !(zp->numel() == 1 && scale.numel() == 1)) {
    return ctx.error("zero point shape " + shape_to_string(zp->shape()) + " differs from scale shape " +
                         shape_to_string(scale.shape()),
                     StatusCode::kInvalidArgument);
  }
  const int64_t block = info.attr_int("block_size", 0);
  if (block < 0) return ctx.error("block_size must be >= 0, got " + std::to_string(block), StatusCode::kInvalidModel);
  if (scale.numel() == 1 && scale.rank() <= 1 && block == 0) {
    L->mode = QuantLayout::kTensor;
    return Status::Ok();
  }
  int64_t axis = info.attr_int("axis", 1);
  if (!normalize_axis(&axis, x.rank())) {
    return ctx.error("axis " + std::to_string(info.attr_int("axis", 1)) + " out of range for input shape " +
                         shape_to_string(x.shape()),
                     StatusCode::kInvalidArgument);
  }
  for (int64_t i = 0; i < axis; ++i) L->outer *= x.shape()[i];
  L->dim = x.shape()[axis];
  for (int64_t i = axis + 1; i < x.rank(); ++i) L->inner *= x.shape()[i];
  if (block == 0) {
    if (scale.rank() != 1 || scale.shape()[0] != L->dim) {
      return ctx.error("per-axis scale must be 1-D of size " + std::to_string(L->dim) + " (input shape " +
                           shape_to_string(x.shape()) + ", axis " + std::to_string(axis) + "), got " +
                           shape_to_string(scale.shape()),
                       StatusCode::kInvalidArgument);
    }
    L->mode = QuantLayout::kAxis;
    L->sdim = L->dim;
    return Status::Ok();
  }
  L->mode = QuantLayout::kBlocked;
  L->block = block;
  L->sdim = (L->dim + block - 1) / block;
  bool ok = scale.rank() == x.rank();
  for (int64_t i = 0; ok && i < x.rank(); ++i) ok = scale.shape()[i] == (i == axis ? L->sdim : x.shape()[i]);
  if (!ok) {
    return ctx.error("blocked scale shape " + shape_to_string(scale.shape()) + " does not match input shape " +
                         shape_to_string(x.shape()) + " with axis " + std::to_string(axis) + " and block_size " +
                         std::to_string(block),
                     StatusCode::kInvalidArgument);
  }
  return Status::Ok();
}

// Calls fn(element index, parameter index) for every element of x in order.
template <typename Fn>
void for_each_quant(const QuantLayout& L, int64_t n, Fn&& fn) {
  if (L.mode == QuantLayout::kTensor) {
    for (int64_t i = 0; i < n; ++i) fn(i, int64_t{0});
    return;
  }
  int64_t i = 0;
  for (int64_t o = 0; o < L.outer; ++o) {
    for (int64_t d = 0; d < L.dim; ++d) {
      const int64_t p = L.mode == QuantLayout::kAxis ? d : (o * L.sdim + d / L.block) * L.inner;
      if (L.mode == QuantLayout::kAxis) {
        for (int64_t k = 0; k < L.inner; ++k, ++i) fn(i, p);
      } else {
        for (int64_t k = 0; k < L.inner; ++k, ++i) fn(i, p + k);
      }
    }
  }
}

bool quant_int_range(DataType t, double* lo, double* hi) {
  switch (t) {
    case DataType::kUInt8: *lo = 0; *hi = 255; return true;
    case DataType::kInt8: *lo = -128; *hi = 127; return true;
    case DataType::kUInt16: *lo = 0; *hi = 65535; return true;
    case DataType::kInt16: *lo = -32768; *hi = 32767; return true;
    case DataType::kUInt4: *lo = 0; *hi = 15; return true;
    case DataType::kInt4: *lo = -8; *hi = 7; return true;
    case DataType::kUInt2: *lo = 0; *hi = 3; return true;
    case DataType::kInt2: *lo = -2; *hi = 1; return true;
    case DataType::kInt32: *lo = -2147483648.0; *hi = 2147483647.0; return true;
    case DataType::kUInt32: *lo = 0; *hi = 4294967295.0; return true;
    default: return false;
  }
}

bool is_quant_float(DataType t) { return float8_table(t) != nullptr || t == DataType::kFloat4E2M1; }

inline double round_half_even(double v) {
  double f = std::floor(v);
  double d = v - f;
  if (d > 0.5) return f + 1;
  if (d < 0.5) return f;
  return std::fmod(f, 2.0) == 0.0 ? f : f + 1;
}

// Elements per parallel chunk of the per-tensor QuantizeLinear / DequantizeLinear loops.
constexpr int64_t kQuantChunk = 16384;

template <typename Q>
void quantize_fast(const QuantLayout& L, const Tensor& x, const Tensor& scale, const Tensor* zp, Tensor* y) {
  const float* xp = x.data<float>();
  const float* sp = scale.data<float>();
  const Q* zpp = zp ? zp->data<Q>() : nullptr;
  Q* yp = y->data<Q>();
  const float lo = static_cast<float>(std::numeric_limits<Q>::min());
  const float hi = static_cast<float>(std::numeric_limits<Q>::max());
  for_each_quant(L, x.numel(), [&](int64_t i, int64_t p) {
    float q = std::nearbyint(xp[i] / sp[p]) + (zpp ? static_cast<float>(zpp[p]) : 0.0f);
    q = q < lo ? lo : (q > hi ? hi : q);
    yp[i] = static_cast<Q>(q == q ? q : 0.0f);
  });
}

template <typename Q>
void dequantize_fast(const QuantLayout& L, const Tensor& x, const Tensor& scale, const Tensor* zp, Tensor* y) {
  const Q* xp = x.data<Q>();
  const float* sp = scale.data<float>();
  const Q* zpp = zp ? zp->data<Q>() : nullptr;
  float* yp = y->data<float>();
  for_each_quant(L, x.numel(), [&](int64_t i, int64_t p) {
    yp[i] = (static_cast<float>(xp[i]) - (zpp ? static_cast<float>(zpp[p]) : 0.0f)) * sp[p];
  });
}

Status QuantizeLinear(KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(ew::need_inputs(ctx, 2));
  const KernelInfo& info = ctx.info();
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  DataType qt = DataType::kUInt8;
  const int64_t odt = info.attr_int("output_dtype", 0);
  if (zp) {
    qt = zp->dtype();
    if (odt != 0 && odt != static_cast<int64_t>(qt)) {
      return ctx.error(std::string("output_dtype ") + std::to_string(odt) + " differs from zero point dtype " +
                           dtype_name(qt),
                       StatusCode::kInvalidModel);
    }
  } else if (odt != 0) {
    if (!is_known_dtype(static_cast<int32_t>(odt))) return ctx.error("unknown output_dtype " + std::to_string(odt));
    qt = static_cast<DataType>(odt);
  }
  double lo = 0, hi = 0;
  const bool qint = quant_int_range(qt, &lo, &hi);
  if (!qint && !is_quant_float(qt)) return ctx.error(std::string("unsupported quantized dtype ") + dtype_name(qt), StatusCode::kNotImplemented);
  QuantLayout L;
  NXRT_RETURN_IF_ERROR(quant_layout(ctx, x, scale, zp, &L));
  // The division runs in the precision of the scale, or of the `precision` attribute (opset 25).
  const int64_t prec_attr = info.attr_int("precision", 0);
  if (prec_attr != 0 && !is_known_dtype(static_cast<int32_t>(prec_attr))) {
    return ctx.error("unknown precision dtype " + std::to_string(prec_attr), StatusCode::kInvalidModel);
  }
  const DataType prec = prec_attr != 0 ? static_cast<DataType>(prec_attr) : scale.dtype();
  if (x.dtype() == DataType::kFloat && scale.dtype() == DataType::kFloat && prec == DataType::kFloat &&
      (qt == DataType::kUInt8 || qt == DataType::kInt8)) {
    // Fast path for the common QDQ case: float32 -> (u)int8, no double buffers.
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, qt, x.shape()));
    if (L.mode == QuantLayout::kTensor) {
      // One scale: the vector loops (dynamic_quantize.h) over the pool in fixed chunks.
      const float s = scale.data<float>()[0];
      const float z = !zp ? 0.0f : qt == DataType::kUInt8 ? zp->data<uint8_t>()[0] : zp->data<int8_t>()[0];
      const float* xp = x.data<float>();
      uint8_t* yp = static_cast<uint8_t*>(y->raw_data());
      const int64_t n = x.numel();
      ctx.pool().parallel_for((n + kQuantChunk - 1) / kQuantChunk, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t b = c * kQuantChunk;
          quantize_8bit(xp + b, std::min(kQuantChunk, n - b), s, z, qt == DataType::kInt8, yp + b, ctx.info().isa());
        }
      });
      return Status::Ok();
    }
    if (qt == DataType::kUInt8) quantize_fast<uint8_t>(L, x, scale, zp, y);
    else quantize_fast<int8_t>(L, x, scale, zp, y);
    return Status::Ok();
  }
  std::vector<double> xv, sv, zv;
  NXRT_RETURN_IF_ERROR(load_as_double(x, &xv));
  NXRT_RETURN_IF_ERROR(load_as_double(scale, &sv));
  if (zp) NXRT_RETURN_IF_ERROR(load_as_double(*zp, &zv));
  const bool in_double = prec == DataType::kDouble;
  // Rounds a value to the precision type (float16/bfloat16 results of a float division are correctly
  // rounded, float having more than twice their mantissa bits).
  auto to_prec = [prec](double v) { return round_to_float_dtype(v, prec); };
  const int64_t n = x.numel();
  std::vector<double> yv(static_cast<size_t>(n));
  const bool has_zp = zp != nullptr;
  for_each_quant(L, n, [&](int64_t i, int64_t p) {
    double q;
    if (in_double) q = xv[i] / sv[p];
    else q = to_prec(static_cast<double>(static_cast<float>(to_prec(xv[i])) / static_cast<float>(to_prec(sv[p]))));
    const double z = has_zp ? zv[p] : 0.0;
    if (qint) {
      q = round_half_even(q) + z;
      if (std::isnan(q)) q = 0;
      yv[i] = std::min(hi, std::max(lo, q));
    } else {
      yv[i] = in_double ? q + z : static_cast<double>(static_cast<float>(q + z));
    }
  });
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, qt, x.shape()));
  CastOptions opts;
  opts.saturate = info.attr_int("saturate", 1) != 0;
  Status s = qint ? [&] {
    std::vector<int64_t> iv(yv.size());
    for (size_t i = 0; i < yv.size(); ++i) iv[i] = static_cast<int64_t>(yv[i]);
    return store_ints(iv, y);
  }()
                  : store_doubles(yv, y, opts);
  if (!s.ok()) return ctx.error(s.message(), s.code());
  return Status::Ok();
}

Status DequantizeLinear(KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(ew::need_inputs(ctx, 2));
  const KernelInfo& info = ctx.info();
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const Tensor* zp = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (zp && zp->dtype() != x.dtype()) {
    return ctx.error(std::string("zero point dtype ") + dtype_name(zp->dtype()) + " differs from input dtype " +
                         dtype_name(x.dtype()),
                     StatusCode::kInvalidArgument);
  }
  DataType out_t = scale.dtype();
  const int64_t odt = info.attr_int("output_dtype", 0);
  if (odt != 0) {
    if (!is_known_dtype(static_cast<int32_t>(odt))) return ctx.error("unknown output_dtype " + std::to_string(odt));
    out_t = static_cast<DataType>(odt);
  }
  if (!dtype_is_float(out_t) || is_quant_float(out_t)) {
    return ctx.error(std::string("unsupported output dtype ") + dtype_name(out_t), StatusCode::kNotImplemented);
  }
  QuantLayout L;
  NXRT_RETURN_IF_ERROR(quant_layout(ctx, x, scale, zp, &L));
  if (out_t == DataType::kFloat && scale.dtype() == DataType::kFloat &&
      (x.dtype() == DataType::kUInt8 || x.dtype() == DataType::kInt8)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_t, x.shape()));
    if (L.mode == QuantLayout::kTensor) {
      const bool s8 = x.dtype() == DataType::kInt8;
      const float s = scale.data<float>()[0];
      const float z = !zp ? 0.0f : s8 ? zp->data<int8_t>()[0] : zp->data<uint8_t>()[0];
      const uint8_t* xp = static_cast<const uint8_t*>(x.raw_data());
      float* yp = y->data<float>();
      const int64_t n = x.numel();
      ctx.pool().parallel_for((n + kQuantChunk - 1) / kQuantChunk, 1, [&](int64_t c0, int64_t c1) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t b = c * kQuantChunk;
          dequantize_8bit(xp + b, std::min(kQuantChunk, n - b), s8, s, z, yp + b, ctx.info().isa());
        }
      });
      return Status::Ok();
    }
    if (x.dtype() == DataType::kUInt8) dequantize_fast<uint8_t>(L, x, scale, zp, y);
    else dequantize_fast<int8_t>(L, x, scale, zp, y);
    return Status::Ok();
  }
  std::vector<double> xv, sv, zv;
  NXRT_RETURN_IF_ERROR(load_as_double(x, &xv));
  NXRT_RETURN_IF_ERROR(load_as_double(scale, &sv));
  if (zp) NXRT_RETURN_IF_ERROR(load_as_double(*zp, &zv));
  const bool in_double = out_t == DataType::kDouble;
  const int64_t n = x.numel();
  std::vector<double> yv(static_cast<size_t>(n));
  const bool has_zp = zp != nullptr;
  for_each_quant(L, n, [&](int64_t i, int64_t p) {
    const double z = has_zp ? zv[p] : 0.0;
    if (in_double) {
      yv[i] = (xv[i] - z) * sv[p];
    } else {
      yv[i] = static_cast<float>(static_cast<float>(static_cast<float>(xv[i]) - static_cast<float>(z)) *
                                 static_cast<float>(sv[p]));
    }
  });
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, out_t, x.shape()));
  Status s = store_doubles(yv, y, CastOptions{});
  if (!s.ok()) return ctx.error(s.message(), s.code());
  return Status::Ok();
}

// ops/cast/dynamic_quantize.h's dynamic_quantize_u8: the range, then the quantization, over the pool.
Status DynamicQuantizeLinear(KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(ew::need_inputs(ctx, 1));
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kFloat) return ctx.error(std::string("input must be float32, got ") + dtype_name(x.dtype()), StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kUInt8, x.shape()));
  float scale = 0.0f;
  uint8_t zp = 0;
  dynamic_quantize_u8(ctx.pool(), x.data<float>(), x.numel(), ctx.info().isa(), y->data<uint8_t>(), &scale, &zp);
  if (ctx.output_requested(1)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * s, ctx.allocate_output(1, DataType::kFloat, {}));
    s->data<float>()[0] = scale;
  }
  if (ctx.output_requested(2)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(2, DataType::kUInt8, {}));
    z->data<uint8_t>()[0] = zp;
  }
  return Status::Ok();
}

}  // namespace

void register_cast_ops(ep::KernelRegistry& r) {
  r.add_fn("Cast", &Cast);
  r.add_fn("CastLike", &CastLike);
  r.add_fn("QuantizeLinear", &QuantizeLinear);
  r.add_fn("DequantizeLinear", &DequantizeLinear);
  r.add_fn("DynamicQuantizeLinear", &DynamicQuantizeLinear);
}

}  // namespace nxrt::ops
