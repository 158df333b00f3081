// FFT plans: see signal/fft.h.
#include "ops/signal/fft.h"

#include <algorithm>
#include <cmath>

namespace nxrt::ops::fft {
namespace {

constexpr double kTwoPi = 6.283185307179586476925286766559;
constexpr int64_t kDirectMax = 32;  // non-power-of-two lengths up to this use the direct DFT

bool is_pow2(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

// Plain complex multiply (std::complex's operator* takes a slow NaN-recovery path).
inline cd mul(cd a, cd b) {
  return cd(a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real());
}
inline cd mul_conj(cd a, cd b) {  // a * conj(b)
  return cd(a.real() * b.real() + a.imag() * b.imag(), a.imag() * b.real() - a.real() * b.imag());
}

// exp(-2 pi i num/den), with num reduced into [0, den) by the caller.
cd unit_root(int64_t num, int64_t den) {
  double a = kTwoPi * static_cast<double>(num) / static_cast<double>(den);
  return cd(std::cos(a), -std::sin(a));
}

}  // namespace

Plan::Plan(int64_t n) : n_(n) {
  if (n <= 1) {
    kind_ = Kind::kTrivial;
  } else if (is_pow2(n)) {
    kind_ = Kind::kRadix2;
    twiddle_.resize(static_cast<size_t>(n / 2));
    for (int64_t j = 0; j < n / 2; ++j) twiddle_[j] = unit_root(j, n);
    int bits = 0;
    while ((int64_t{1} << bits) < n) ++bits;
    bitrev_.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint32_t r = 0;
      for (int b = 0; b < bits; ++b) r |= static_cast<uint32_t>((i >> b) & 1) << (bits - 1 - b);
      bitrev_[i] = r;
    }
  } else if (n <= kDirectMax) {
    kind_ = Kind::kDirect;
    twiddle_.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) twiddle_[j] = unit_root(j, n);
  } else {
    kind_ = Kind::kBluestein;
    int64_t m = 1;
    while (m < 2 * n - 1) m <<= 1;
    sub_ = std::make_unique<Plan>(m);
    chirp_.resize(static_cast<size_t>(n));
    const int64_t two_n = 2 * n;
    for (int64_t k = 0; k < n; ++k) {
      // k^2 mod 2n without overflow for any n < 2^31.
      int64_t kk = static_cast<int64_t>((static_cast<unsigned __int128>(k) * static_cast<unsigned __int128>(k)) %
                                        static_cast<unsigned __int128>(two_n));
      chirp_[k] = unit_root(kk, two_n);  // exp(-i pi k^2/n)
    }
    chirp_fft_.assign(static_cast<size_t>(m), cd(0, 0));
    chirp_fft_[0] = std::conj(chirp_[0]);
    for (int64_t k = 1; k < n; ++k) chirp_fft_[k] = chirp_fft_[m - k] = std::conj(chirp_[k]);
    std::vector<cd> scratch;
    sub_->transform(chirp_fft_.data(), false, scratch);
  }
}

size_t Plan::scratch_size() const {
  switch (kind_) {
    case Kind::kDirect: return static_cast<size_t>(n_);
    case Kind::kBluestein: return static_cast<size_t>(sub_->size());
    default: return 0;
  }
}

void Plan::transform(cd* data, bool inverse, cd* scratch) const {
  switch (kind_) {
    case Kind::kTrivial: return;
    case Kind::kRadix2: radix2(data, inverse); return;
    case Kind::kDirect: direct(data, inverse, scratch); return;
    case Kind::kBluestein: bluestein(data, inverse, scratch); return;
  }
}

void Plan::radix2(cd* a, bool inverse) const {
  const int64_t n = n_;
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = bitrev_[i];
    if (i < r) std::swap(a[i], a[r]);
  }
  for (int64_t len = 2; len <= n; len <<= 1) {
    const int64_t half = len / 2;
    const int64_t step = n / len;
    for (int64_t i = 0; i < n; i += len) {
      cd* lo = a + i;
      cd* hi = a + i + half;
      for (int64_t j = 0; j < half; ++j) {
        const cd w = twiddle_[j * step];
        const cd v = inverse ? mul_conj(hi[j], w) : mul(hi[j], w);
        const cd u = lo[j];
        lo[j] = u + v;
        hi[j] = u - v;
      }
    }
  }
}

void Plan::direct(cd* a, bool inverse, cd* scratch) const {
  const int64_t n = n_;
  std::copy(a, a + n, scratch);
  for (int64_t k = 0; k < n; ++k) {
    double re = 0, im = 0;
    int64_t idx = 0;  // (j*k) mod n
    for (int64_t j = 0; j < n; ++j) {
      const cd w = twiddle_[idx];
      const cd x = scratch[j];
      const double wi = inverse ? -w.imag() : w.imag();
      re += x.real() * w.real() - x.imag() * wi;
      im += x.real() * wi + x.imag() * w.real();
      idx += k;
      if (idx >= n) idx -= n;
    }
    a[k] = cd(re, im);
  }
}

void Plan::bluestein(cd* a, bool inverse, cd* scratch) const {
  const int64_t n = n_;
  const int64_t m = sub_->size();
  std::fill(scratch, scratch + m, cd(0, 0));
  // Inverse via conjugation: IDFT(x) = conj(DFT(conj(x))).
  for (int64_t k = 0; k < n; ++k) scratch[k] = mul(inverse ? std::conj(a[k]) : a[k], chirp_[k]);
  sub_->radix2(scratch, false);
  for (int64_t k = 0; k < m; ++k) scratch[k] = mul(scratch[k], chirp_fft_[k]);
  sub_->radix2(scratch, true);
  const double scale = 1.0 / static_cast<double>(m);
  for (int64_t k = 0; k < n; ++k) {
    cd y = mul(scratch[k], chirp_[k]) * scale;
    a[k] = inverse ? std::conj(y) : y;
  }
}

RealPlan::RealPlan(int64_t n) : n_(n), packed_(n >= 4 && n % 2 == 0) {
  if (packed_) {
    plan_ = std::make_unique<Plan>(n / 2);
    twiddle_.resize(static_cast<size_t>(n / 2 + 1));
    for (int64_t k = 0; k <= n / 2; ++k) twiddle_[k] = unit_root(k, n);
  } else {
    plan_ = std::make_unique<Plan>(n);
  }
}

size_t RealPlan::scratch_size() const {
  return static_cast<size_t>(packed_ ? n_ / 2 : n_) + plan_->scratch_size();
}

void RealPlan::forward(const double* x, cd* out, cd* scratch) const {
  const int64_t n = n_;
  // scratch: the transformed signal, then the plan's own scratch.
  cd* scratch2 = scratch;
  cd* plan_scratch = scratch + (packed_ ? n / 2 : n);
  if (!packed_) {
    for (int64_t j = 0; j < n; ++j) scratch2[j] = cd(x[j], 0.0);
    plan_->transform(scratch2, false, plan_scratch);
    for (int64_t k = 0; k <= n / 2; ++k) out[k] = scratch2[k];
    return;
  }
  // z[j] = x[2j] + i x[2j+1]; Z = DFT_{h}(z); with E = DFT of evens, O = DFT of odds:
  // E[k] = (Z[k] + conj(Z[h-k]))/2, O[k] = (Z[k] - conj(Z[h-k]))/(2i), X[k] = E[k] + w^k O[k].
  const int64_t h = n / 2;
  for (int64_t j = 0; j < h; ++j) scratch2[j] = cd(x[2 * j], x[2 * j + 1]);
  plan_->transform(scratch2, false, plan_scratch);
  for (int64_t k = 0; k <= h; ++k) {
    const cd zk = scratch2[k == h ? 0 : k];
    const cd zc = std::conj(scratch2[k == 0 ? 0 : h - k]);
    const cd e = (zk + zc) * 0.5;
    const cd d = (zk - zc) * 0.5;
    const cd o(d.imag(), -d.real());  // d / i
    out[k] = e + mul(o, twiddle_[k]);
  }
}

std::vector<cd> naive_dft(const std::vector<cd>& x, bool inverse) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<cd> y(x.size());
  const long double two_pi = 6.283185307179586476925286766559L;
  std::vector<long double> c(x.size()), s(x.size());  // exp(+-2 pi i t/n), t < n, in long double
  for (int64_t t = 0; t < n; ++t) {
    const long double ang = two_pi * static_cast<long double>(t) / static_cast<long double>(n);
    c[t] = std::cos(ang);
    s[t] = inverse ? std::sin(ang) : -std::sin(ang);
  }
  for (int64_t k = 0; k < n; ++k) {
    long double re = 0, im = 0;
    int64_t t = 0;  // (j*k) mod n
    for (int64_t j = 0; j < n; ++j) {
      re += x[j].real() * c[t] - x[j].imag() * s[t];
      im += x[j].real() * s[t] + x[j].imag() * c[t];
      t += k;
      if (t >= n) t -= n;
    }
    y[k] = cd(static_cast<double>(re), static_cast<double>(im));
  }
  return y;
}

}  // namespace nxrt::ops::fft
