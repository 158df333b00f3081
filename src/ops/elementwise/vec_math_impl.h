// The algorithms of vec_math.h on a vector traits type T (vec_math_avx2.cpp, vec_math_avx512.cpp): T::V
// holds T::kLanes floats, T::M a lane mask; every operation is an IEEE single-precision one (fused
// multiply-adds included) with the same result in every lane at either width.
//
// Included only by those two files, each compiled for its instruction set: it uses nothing but the
// traits, so no inline function of another header gets compiled here with instructions the rest of
// the program must not assume.
#pragma once
#include <cstdint>

#include "ops/elementwise/vec_math.h"

namespace nxrt::ops::vecmath {
namespace {

// c[0] x^(N-1) + ... + c[N-1] by Horner's rule, highest coefficient first (one FMA a step).
template <class T, int N>
inline typename T::V horner(typename T::V x, const float (&c)[N]) {
  typename T::V p = T::set1(c[0]);
  for (int i = 1; i < N; ++i) p = T::fmadd(p, x, T::set1(c[i]));
  return p;
}

// e^x: exp_fast's range reduction (x = k ln 2 + r, ln 2 in two parts), degree-6 polynomial and 2^k
// applied as two factors (simd_math.h's exp8_avx2 / exp16_avx512, operation for operation): 0 below
// -87.34, +inf above 88.72, NaN stays NaN.
template <class T>
inline typename T::V exp_v(typename T::V x) {
  using V = typename T::V;
  const V hi = T::set1(88.72283f), lo = T::set1(-87.33654f);
  const V xc = T::min(T::max(x, lo), hi);
  const V k = T::round(T::mul(xc, T::set1(1.44269504088896341f)));
  V r = T::fnmadd(k, T::set1(0.693359375f), xc);
  r = T::fnmadd(k, T::set1(-2.12194440e-4f), r);
  V p = T::set1(1.9875691500E-4f);
  p = T::fmadd(p, r, T::set1(1.3981999507E-3f));
  p = T::fmadd(p, r, T::set1(8.3334519073E-3f));
  p = T::fmadd(p, r, T::set1(4.1665795894E-2f));
  p = T::fmadd(p, r, T::set1(1.6666665459E-1f));
  p = T::fmadd(p, r, T::set1(5.0000001201E-1f));
  p = T::add(T::fmadd(T::mul(p, r), r, r), T::set1(1.0f));
  V v = T::scale_pow2(p, k);
  v = T::select(T::lt(x, lo), T::set1(0.f), v);
  v = T::select(T::gt(x, hi), T::set1(__builtin_inff()), v);
  return T::select(T::isnan(x), x, v);
}

// tanh x. |x| < 0.625: x + x^3 P(x^2), P of degree 4 fitted (least squares on the relative error,
// reweighted towards the worst points) to tanh on that interval: under 1 ulp in float arithmetic.
// Past it, 1 - 2 / (e^{2|x|} + 1) with x's sign (tanh >= 0.55 there, so the subtraction loses under a
// bit); e^{2|x|} = inf gives 1.
template <class T>
inline typename T::V tanh_v(typename T::V x) {
  using V = typename T::V;
  const V one = T::set1(1.f);
  const V a = T::abs(x), z = T::mul(x, x);
  const V p = horner<T>(z, {-5.704057869e-03f, 2.063825913e-02f, -5.373946577e-02f, 1.333143860e-01f,
                            -3.333328068e-01f});
  const V small = T::copysign(T::fmadd(T::mul(x, z), p, x), x);  // tanh(-0) = -0
  const V e = exp_v<T>(T::add(a, a));
  const V big = T::copysign(T::sub(one, T::div(T::set1(2.f), T::add(e, one))), x);
  return T::select(T::lt(a, T::set1(0.625f)), small, big);  // NaN: the second form, NaN
}

// ln x: x = 2^e m with m in [sqrt(1/2), sqrt(2)) (subnormal x scaled by 2^23 first), ln m = log1p(f),
// f = m - 1 exact, as f + f^2 Q(f) with Q of degree 8 fitted here (under 1 ulp in float arithmetic),
// plus e ln 2 in two parts (e * 0.693359375 is exact). ln 0 = -inf, ln of a negative = NaN, ln inf = inf.
template <class T>
inline typename T::V log_v(typename T::V x) {
  using V = typename T::V;
  const V one = T::set1(1.f);
  const typename T::M sub = T::lt(x, T::set1(1.17549435e-38f));
  const V xs = T::select(sub, T::mul(x, T::set1(8388608.f)), x);
  V e = T::exponent(xs);
  e = T::select(sub, T::sub(e, T::set1(23.f)), e);
  V m = T::mantissa(xs);
  const typename T::M big = T::gt(m, T::set1(1.41421356f));
  m = T::select(big, T::mul(m, T::set1(0.5f)), m);
  e = T::select(big, T::add(e, one), e);
  const V f = T::sub(m, one);
  const V q = horner<T>(f, {-7.624291629e-02f, 1.290722340e-01f, -1.324333996e-01f, 1.418139189e-01f,
                            -1.660898477e-01f, 2.000199407e-01f, -2.500158846e-01f, 3.333332539e-01f,
                            -4.999998808e-01f});
  const V lg = T::fmadd(T::mul(f, f), q, f);
  V y = T::fmadd(e, T::set1(0.693359375f), T::fmadd(e, T::set1(-2.12194440e-4f), lg));
  const V zero = T::set1(0.f), inf = T::set1(__builtin_inff());
  y = T::select(T::eq(x, zero), T::sub(zero, inf), y);
  y = T::select(T::lt(x, zero), T::set1(__builtin_nanf("")), y);
  y = T::select(T::eq(x, inf), inf, y);
  return T::select(T::isnan(x), x, y);
}

// erf x / x on |x| <= 1 as a polynomial in x^2 (degree 6, fitted like tanh's).
template <class T>
inline typename T::V erf_over_x(typename T::V z) {
  return horner<T>(z, {7.852678391e-05f, -8.009852027e-04f, 5.188290961e-03f, -2.685379423e-02f,
                       1.128358468e-01f, -3.761262596e-01f, 1.128379107e+00f});
}

// erfc t for 1 <= t <= 10: e^{-t^2} s H(s) with s = 1 / (1 + t/2), H of degree 8 fitted to
// erfc(t) e^{t^2} / s over [1, 9.45] (erfc underflows past ~9.3). t^2 is split into its float hi and
// the exact rest lo (an FMA), e^{-t^2} ~ e^{-hi} (1 - lo): otherwise t^2's rounding alone would cost
// t^2 ulps. About 5 ulp relative.
template <class T>
inline typename T::V erfc_tail(typename T::V t) {
  using V = typename T::V;
  const V one = T::set1(1.f);
  const V s = T::div(one, T::fmadd(t, T::set1(0.5f), one));
  const V h = horner<T>(s, {-4.274824634e-02f, 2.351465821e-01f, -4.262893200e-01f, 2.393399924e-01f,
                            -1.358888764e-02f, 2.007554919e-01f, 2.430530787e-01f, 2.824234962e-01f,
                            2.820824981e-01f});
  const V hi = T::mul(t, t);
  const V lo = T::fmsub(t, t, hi);
  V e = exp_v<T>(T::sub(T::set1(0.f), hi));
  e = T::fnmadd(e, lo, e);
  return T::mul(T::mul(e, s), h);
}

template <class T>
inline typename T::V erf_v(typename T::V x) {
  using V = typename T::V;
  const V one = T::set1(1.f);
  const V t = T::abs(x);
  const V small = T::mul(x, erf_over_x<T>(T::mul(x, x)));
  const V big = T::copysign(T::sub(one, erfc_tail<T>(T::min(t, T::set1(10.f)))), x);
  const V y = T::select(T::lt(t, one), small, big);
  return T::select(T::isnan(x), x, y);
}

// x/2 (1 + erf z), z = x / sqrt 2: 1 + z erf(z)/z for |z| < 1; past it 2 - erfc |z| for z > 0 and
// erfc |z| itself for z < 0, where 1 + erf z would cancel (x = -5: 1 + erf = 5.7e-7, ~10% off in
// float). The order of the final products is the reference's (0.5 * x) * w.
template <class T>
inline typename T::V gelu_erf_v(typename T::V x) {
  using V = typename T::V;
  const V one = T::set1(1.f);
  const V z = T::mul(x, T::set1(0.7071067811865476f));
  const V t = T::abs(z);
  const V small = T::fmadd(z, erf_over_x<T>(T::mul(z, z)), one);
  const V ec = erfc_tail<T>(T::min(t, T::set1(10.f)));
  const V big = T::select(T::lt(z, T::set1(0.f)), ec, T::sub(T::set1(2.f), ec));
  const V y = T::mul(T::mul(T::set1(0.5f), x), T::select(T::lt(t, one), small, big));
  return T::select(T::isnan(x), x, y);
}

// x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3), as x / (1 + e^{-2u}) (the same value, and no
// cancellation where tanh u is near -1).
template <class T>
inline typename T::V gelu_tanh_v(typename T::V x) {
  using V = typename T::V;
  const V u = T::mul(T::set1(0.7978845608028654f), T::fmadd(T::mul(T::set1(0.044715f), x), T::mul(x, x), x));
  return T::div(x, T::add(T::set1(1.f), exp_v<T>(T::mul(u, T::set1(-2.f)))));
}

// Softmax (or log-softmax) of one row: the max (NaN anywhere makes every output NaN, as the scalar
// loop's row_max does), e = e^{x - max} with its sum (e written to y for softmax), then y = e / sum as
// e * (1 / sum), or (x - max) - log(sum). The sums add in lane order then across lanes, so the tiers'
// bits may differ in the sum's last place.
template <class T>
void softmax_row(const float* x, float* y, int64_t n, bool log_softmax) {
  using V = typename T::V;
  using M = typename T::M;
  constexpr int64_t L = T::kLanes;
  const float ninf = -__builtin_inff();
  V mx = T::set1(ninf);
  M nan = T::no_lanes();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V v = T::load(x + i);
    nan = T::lanes_or(nan, T::isnan(v));
    mx = T::max(mx, v);
  }
  const int tail = static_cast<int>(n - i);
  if (tail > 0) {
    const V v = T::load_n_fill(x + i, tail, ninf);
    nan = T::lanes_or(nan, T::isnan(v));
    mx = T::max(mx, v);
  }
  const float m = T::any(nan) ? __builtin_nanf("") : T::hmax(mx);
  const V vm = T::set1(m);
  V sum = T::set1(0.f);
  for (i = 0; i + L <= n; i += L) {
    const V e = exp_v<T>(T::sub(T::load(x + i), vm));
    if (!log_softmax) T::store(y + i, e);
    sum = T::add(sum, e);
  }
  if (tail > 0) {
    const V e = exp_v<T>(T::sub(T::load_n_fill(x + i, tail, ninf), vm));  // past n: e^-inf = 0
    if (!log_softmax) T::store_n(y + i, e, tail);
    sum = T::add(sum, e);
  }
  const float total = T::hadd(sum);
  if (log_softmax) {
    const V ls = T::set1(__builtin_logf(total));
    for (i = 0; i + L <= n; i += L) T::store(y + i, T::sub(T::sub(T::load(x + i), vm), ls));
    if (tail > 0) T::store_n(y + i, T::sub(T::sub(T::load_n(x + i, tail), vm), ls), tail);
    return;
  }
  const V inv = T::set1(1.f / total);
  for (i = 0; i + L <= n; i += L) T::store(y + i, T::mul(T::load(y + i), inv));
  if (tail > 0) T::store_n(y + i, T::mul(T::load_n(y + i, tail), inv), tail);
}

template <class T, Fn F>
inline typename T::V apply(typename T::V x) {
  if constexpr (F == Fn::kExp) return exp_v<T>(x);
  else if constexpr (F == Fn::kTanh) return tanh_v<T>(x);
  else if constexpr (F == Fn::kErf) return erf_v<T>(x);
  else if constexpr (F == Fn::kGeluErf) return gelu_erf_v<T>(x);
  else if constexpr (F == Fn::kGeluTanh) return gelu_tanh_v<T>(x);
  else if constexpr (F == Fn::kLog) return log_v<T>(x);
  else if constexpr (F == Fn::kSigmoid) {
    const typename T::V one = T::set1(1.f);
    return T::div(one, T::add(one, exp_v<T>(T::sub(T::set1(0.f), x))));
  } else {
    return T::sqrt(x);
  }
}

template <class T, Fn F, bool kBias>
void map_fn(const float* x, const float* bias, float* y, int64_t n) {
  using V = typename T::V;
  constexpr int64_t L = T::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    V v = T::load(x + i);
    if constexpr (kBias) v = T::add(v, T::load(bias + i));
    T::store(y + i, apply<T, F>(v));
  }
  if (i < n) {
    const int r = static_cast<int>(n - i);
    V v = T::load_n(x + i, r);
    if constexpr (kBias) v = T::add(v, T::load_n(bias + i, r));
    T::store_n(y + i, apply<T, F>(v), r);
  }
}

template <class T, Fn F>
void map_fn_bias(const float* x, const float* bias, float* y, int64_t n) {
  if (bias) map_fn<T, F, true>(x, bias, y, n);
  else map_fn<T, F, false>(x, nullptr, y, n);
}

template <class T>
void map_any(Fn fn, const float* x, const float* bias, float* y, int64_t n) {
  switch (fn) {
    case Fn::kExp: return map_fn_bias<T, Fn::kExp>(x, bias, y, n);
    case Fn::kTanh: return map_fn_bias<T, Fn::kTanh>(x, bias, y, n);
    case Fn::kErf: return map_fn_bias<T, Fn::kErf>(x, bias, y, n);
    case Fn::kGeluErf: return map_fn_bias<T, Fn::kGeluErf>(x, bias, y, n);
    case Fn::kGeluTanh: return map_fn_bias<T, Fn::kGeluTanh>(x, bias, y, n);
    case Fn::kSqrt: return map_fn_bias<T, Fn::kSqrt>(x, bias, y, n);
    case Fn::kSigmoid: return map_fn_bias<T, Fn::kSigmoid>(x, bias, y, n);
    case Fn::kLog: return map_fn_bias<T, Fn::kLog>(x, bias, y, n);
  }
}

}  // namespace
}  // namespace nxrt::ops::vecmath
