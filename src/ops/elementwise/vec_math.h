// Float32 transcendental maps on AVX2 (8 lanes) and AVX-512 (16 lanes): Exp, Tanh, Erf, Sqrt and the
// GELU forms (erf: Gelu / BiasGelu; tanh: Gelu approximate="tanh" / FastGelu). One source for both
// tiers (vec_math_impl.h, instantiated by vec_math_avx2.cpp and vec_math_avx512.cpp, each compiled
// for its instruction set), so a lane computes the same operations at either width: the same bits.
// The kernels keep libm's per-element loops as the reference (the scalar tier, other dtypes); the
// tests hold both tiers to it within a few float ulps (test_vec_math.cpp).
//
// Accuracy (float32 results against the double-precision functions): Exp exp_fast's (simd_math.h:
// 0 below -87.34, as ORT's MLAS does for denormal results); Tanh within 2 ulp; Erf within 3 ulp of
// |erf| near 0 and 1e-7 absolutely past 1; the GELUs within 1e-6 relative where the result is over
// 1e-30, plus about arg * 2^-23 past |x| ~ 3, where the exponential's argument arg (x^2 / 2, or 2u)
// carries its own rounding (the erf form's negative tail is computed as x/2 erfc(-x/sqrt 2), and the
// tanh form as x / (1 + e^{-2u}): 1 + erf and 1 + tanh would cancel there, ~10% off at x = -5); Sqrt
// exact (IEEE); Log within 2 ulp (ln 0 = -inf, negatives NaN). NaN inputs give NaN.
#pragma once
#include <cstdint>

namespace nxrt::ep {
enum class IsaTier;  // ep/cpu_features.h (not included: the per-ISA files include only this header)
}

namespace nxrt::ops::vecmath {

enum class Fn : uint8_t {
  kExp,
  kTanh,
  kErf,
  kGeluErf,   // x/2 (1 + erf(x / sqrt 2))
  kGeluTanh,  // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), computed as x / (1 + exp(-2u))
  kSqrt,
  kSigmoid,   // 1 / (1 + e^{-x}) (the GEMM and fused-op epilogues' Sigmoid; the Sigmoid op has its own)
  kLog,       // ln x
};

// y[i] = fn(x[i] + (bias ? bias[i] : 0)) for i < n, on the calling thread. y may be x. Call only where
// the CPU has the tier's instructions (AVX2 + FMA; AVX-512 F/DQ/BW/VL).
void map_avx2(Fn fn, const float* x, const float* bias, float* y, int64_t n);
void map_avx512(Fn fn, const float* x, const float* bias, float* y, int64_t n);

// y = softmax(x) (or log-softmax) over one row of n floats, on the calling thread; y may be x. Every
// output is NaN where x holds a NaN, as in the scalar loops.
void softmax_row_avx2(const float* x, float* y, int64_t n, bool log_softmax);
void softmax_row_avx512(const float* x, float* y, int64_t n, bool log_softmax);
using SoftmaxRowFn = void (*)(const float* x, float* y, int64_t n, bool log_softmax);
SoftmaxRowFn softmax_row_for_tier(ep::IsaTier tier);  // null on the scalar tier

// The map of a kernel's tier (KernelInfo::isa(), which the CPU has): AVX-512 or AVX2; null on the
// scalar tier (and off x86), where kernels run their reference loops.
using MapFn = void (*)(Fn fn, const float* x, const float* bias, float* y, int64_t n);
MapFn map_for_tier(ep::IsaTier tier);

}  // namespace nxrt::ops::vecmath
