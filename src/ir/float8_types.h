// Codecs for the ONNX 8-bit and 4-bit floats (float8 e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz, float8 e8m0,
// float4 e2m1) and the packed sub-byte integers (int4/uint4, int2/uint2).
//
// Decoding is exact (every value of these formats is a float). Encoding rounds to nearest even from a
// double (so float and double sources round once); `saturate` picks what happens past the largest
// finite value: clamp to it, or become inf (e5m2) / NaN (formats without inf).
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "nxrt/float_types.h"

namespace nxrt {

enum class MiniFloat { kE4M3FN, kE4M3FNUZ, kE5M2, kE5M2FNUZ, kE2M1, kF16, kBF16 };

struct MiniFloatSpec {
  int exp_bits;
  int man_bits;
  int bias;
  bool has_inf;      // IEEE-style inf (exponent all ones, mantissa 0)
  bool ieee_nan;     // exponent all ones means inf/NaN (e5m2, f16, bf16)
  bool fnuz;         // no negative zero; 0x80 is NaN
  bool has_nan;      // false for e2m1
  double max_value;  // largest finite value
  int total_bits;
};

inline constexpr MiniFloatSpec minifloat_spec(MiniFloat f) {
  switch (f) {
    case MiniFloat::kE4M3FN: return {4, 3, 7, false, false, false, true, 448.0, 8};
    case MiniFloat::kE4M3FNUZ: return {4, 3, 8, false, false, true, true, 240.0, 8};
    case MiniFloat::kE5M2: return {5, 2, 15, true, true, false, true, 57344.0, 8};
    case MiniFloat::kE5M2FNUZ: return {5, 2, 16, false, false, true, true, 57344.0, 8};
    case MiniFloat::kE2M1: return {2, 1, 1, false, false, false, false, 6.0, 4};
    case MiniFloat::kF16: return {5, 10, 15, true, true, false, true, 65504.0, 16};
    case MiniFloat::kBF16: return {8, 7, 127, true, true, false, true, 3.3895313892515355e38, 16};
  }
  return {0, 0, 0, false, false, false, false, 0, 0};
}

// Encodes x into the format's bits (in the low total_bits of the result).
inline uint32_t encode_minifloat(double x, MiniFloat fmt, bool saturate) {
  const MiniFloatSpec s = minifloat_spec(fmt);
  const uint32_t sign_bit = 1u << (s.total_bits - 1);
  const uint32_t exp_all = (1u << s.exp_bits) - 1;
  auto nan_code = [&](bool neg) -> uint32_t {
    if (s.fnuz) return sign_bit;                           // 0x80
    if (s.ieee_nan) return (neg ? sign_bit : 0) | (exp_all << s.man_bits) | (1u << (s.man_bits - 1));
    return (neg ? sign_bit : 0) | (sign_bit - 1);          // e4m3fn: S.1111.111
  };
  auto max_code = [&](bool neg) -> uint32_t {
    uint32_t m;
    if (s.ieee_nan) m = ((exp_all - 1) << s.man_bits) | ((1u << s.man_bits) - 1);
    else if (!s.has_nan || s.fnuz) m = sign_bit - 1;
    else m = sign_bit - 2;  // e4m3fn: S.1111.110
    return (neg ? sign_bit : 0) | m;
  };
  auto inf_code = [&](bool neg) -> uint32_t { return (neg ? sign_bit : 0) | (exp_all << s.man_bits); };
  auto overflow = [&](bool neg) -> uint32_t {
    if (saturate || !s.has_nan) return max_code(neg);
    return s.has_inf ? inf_code(neg) : nan_code(neg);
  };

  if (std::isnan(x)) return s.has_nan ? nan_code(std::signbit(x)) : sign_bit;  // e2m1: NaN -> -0 (as the reference)
  const bool neg = std::signbit(x);
  const double a = std::fabs(x);
  if (std::isinf(a)) return overflow(neg);
  const uint32_t sgn = neg ? sign_bit : 0;
  if (a == 0) return s.fnuz ? 0u : sgn;
  const int emin = 1 - s.bias;  // smallest normal exponent
  int e2;
  std::frexp(a, &e2);  // a = f * 2^e2, f in [0.5, 1)
  int e = e2 - 1;      // a in [2^e, 2^(e+1))
  if (e < emin) e = emin;
  // Quantum at this exponent; a / q is exact (power-of-two scaling) unless it underflows, which
  // cannot happen for doubles at these exponents.
  double scaled = std::ldexp(a, s.man_bits - e);
  double m = std::nearbyint(scaled);  // ties to even (default rounding mode)
  // Handle ties explicitly in case the rounding mode was changed.
  {
    double fl = std::floor(scaled);
    double diff = scaled - fl;
    if (diff > 0.5) m = fl + 1;
    else if (diff < 0.5) m = fl;
    else m = (std::fmod(fl, 2.0) == 0.0) ? fl : fl + 1;
  }
  double v = std::ldexp(m, e - s.man_bits);
  if (v > s.max_value) return overflow(neg);
  if (m == 0) return (s.fnuz ? 0u : sgn);
  uint32_t mi = static_cast<uint32_t>(m);
  uint32_t code;
  if (mi < (1u << s.man_bits)) {
    code = mi;  // subnormal (only possible at e == emin)
  } else {
    if (mi >= (2u << s.man_bits)) {  // rounding carried into the next binade
      mi >>= 1;
      ++e;
    }
    uint32_t ef = static_cast<uint32_t>(e + s.bias);
    code = (ef << s.man_bits) | (mi - (1u << s.man_bits));
  }
  return (s.fnuz && code == 0) ? 0u : (sgn | code);
}

inline float decode_minifloat(uint32_t bits, MiniFloat fmt) {
  const MiniFloatSpec s = minifloat_spec(fmt);
  const uint32_t sign_bit = 1u << (s.total_bits - 1);
  const uint32_t exp_all = (1u << s.exp_bits) - 1;
  bits &= (sign_bit << 1) - 1;
  const bool neg = (bits & sign_bit) != 0;
  const uint32_t mag = bits & (sign_bit - 1);
  const uint32_t ef = mag >> s.man_bits;
  const uint32_t mf = mag & ((1u << s.man_bits) - 1);
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  if (s.fnuz && bits == sign_bit) return qnan;
  if (s.has_nan && !s.fnuz && !s.ieee_nan && mag == sign_bit - 1) return neg ? -qnan : qnan;
  if (s.ieee_nan && ef == exp_all) {
    if (mf == 0) return neg ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
    return neg ? -qnan : qnan;
  }
  double v;
  if (ef == 0) v = std::ldexp(static_cast<double>(mf), 1 - s.bias - s.man_bits);
  else v = std::ldexp(static_cast<double>(mf | (1u << s.man_bits)), static_cast<int>(ef) - s.bias - s.man_bits);
  return static_cast<float>(neg ? -v : v);
}

// Decode tables for the 8-bit formats (and e2m1 in the first 16 entries), built once.
struct MiniFloatTables {
  float e4m3fn[256], e4m3fnuz[256], e5m2[256], e5m2fnuz[256], e2m1[16], e8m0[256];
  MiniFloatTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      e4m3fn[i] = decode_minifloat(i, MiniFloat::kE4M3FN);
      e4m3fnuz[i] = decode_minifloat(i, MiniFloat::kE4M3FNUZ);
      e5m2[i] = decode_minifloat(i, MiniFloat::kE5M2);
      e5m2fnuz[i] = decode_minifloat(i, MiniFloat::kE5M2FNUZ);
      e8m0[i] = i == 255 ? std::numeric_limits<float>::quiet_NaN()
                         : static_cast<float>(std::ldexp(1.0, static_cast<int>(i) - 127));
    }
    for (uint32_t i = 0; i < 16; ++i) e2m1[i] = decode_minifloat(i, MiniFloat::kE2M1);
  }
  static const MiniFloatTables& get() {
    static const MiniFloatTables t;
    return t;
  }
};

// float8 e8m0: an unsigned power of two 2^(e-127), 0xFF = NaN. round_mode: 0 up, 1 down, 2 nearest.
enum class E8M0Round { kUp = 0, kDown = 1, kNearest = 2 };
inline uint8_t encode_e8m0(float x, bool saturate, E8M0Round mode) {
  uint32_t b = float_bits(x);
  uint32_t ex = (b >> 23) & 0xffu;
  uint32_t m = b & 0x7fffffu;
  if (ex == 0xffu) {
    if (m != 0) return 0xff;           // NaN
    return saturate ? 0xfe : 0xff;     // inf
  }
  // The sign is ignored (e8m0 has none). Float denormals (ex == 0) lie below 2^-126.
  uint32_t e = ex;
  if (mode == E8M0Round::kUp) {
    if (ex == 0) e = m > 0x400000u ? 1 : 0;  // (0, 2^-127] -> 2^-127, (2^-127, 2^-126) -> 2^-126
    else if (m != 0) e = ex + 1;
  } else if (mode == E8M0Round::kNearest) {  // ties away from zero (to the larger power)
    if (ex == 0) e = m >= 0x600000u ? 1 : 0;
    else if (m >= 0x400000u) e = ex + 1;
  }
  if (e >= 0xffu) return saturate ? 0xfe : 0xff;
  return static_cast<uint8_t>(e);
}
inline float decode_e8m0(uint8_t b) { return MiniFloatTables::get().e8m0[b]; }

// Sub-byte packing: element i lives in byte i / (8 / bits), lowest bits first.
inline int64_t subbyte_get(const uint8_t* data, int64_t i, int bits, bool is_signed) {
  const int per = 8 / bits;
  const uint32_t byte = data[i / per];
  const int shift = static_cast<int>(i % per) * bits;
  const uint32_t mask = (1u << bits) - 1;
  uint32_t v = (byte >> shift) & mask;
  if (is_signed && (v & (1u << (bits - 1)))) return static_cast<int64_t>(v) - (int64_t{1} << bits);
  return static_cast<int64_t>(v);
}
inline void subbyte_set(uint8_t* data, int64_t i, int bits, uint32_t v) {
  const int per = 8 / bits;
  const int shift = static_cast<int>(i % per) * bits;
  const uint32_t mask = ((1u << bits) - 1) << shift;
  uint8_t& byte = data[i / per];
  byte = static_cast<uint8_t>((byte & ~mask) | ((v << shift) & mask));
}

}  // namespace nxrt
