// FFT plans for the signal ops (DFT, STFT): complex FFT of any length in double precision, and a real
// FFT that packs an even-length real signal into a half-length complex transform.
//
// Lengths: powers of two use an iterative radix-2 transform with exact twiddles; small other lengths
// a direct DFT over an exact twiddle table; larger other lengths Bluestein's chirp-z algorithm over a
// power-of-two transform. Plans are immutable after construction (shareable between threads); the
// transforms take a caller-owned scratch vector.
#pragma once
#include <complex>
#include <cstdint>
#include <memory>
#include <vector>

namespace nxrt::ops::fft {

using cd = std::complex<double>;

class Plan {
 public:
  explicit Plan(int64_t n);
  int64_t size() const { return n_; }
  // In place: data[k] = sum_j data[j] * exp(-+2 pi i jk/n) (sign - forward, + inverse; never scaled).
  // `scratch` holds scratch_size() values (a caller's workspace: no allocation here).
  void transform(cd* data, bool inverse, cd* scratch) const;
  void transform(cd* data, bool inverse, std::vector<cd>& scratch) const {
    scratch.resize(scratch_size());
    transform(data, inverse, scratch.data());
  }
  size_t scratch_size() const;

 private:
  enum class Kind { kTrivial, kRadix2, kDirect, kBluestein };
  void radix2(cd* a, bool inverse) const;
  void direct(cd* a, bool inverse, cd* scratch) const;
  void bluestein(cd* a, bool inverse, cd* scratch) const;

  int64_t n_ = 0;
  Kind kind_ = Kind::kTrivial;
  std::vector<cd> twiddle_;     // radix2: exp(-2 pi i j/n), j < n/2; direct: exp(-2 pi i j/n), j < n
  std::vector<uint32_t> bitrev_;
  // Bluestein
  std::vector<cd> chirp_;       // exp(-i pi k^2/n)
  std::vector<cd> chirp_fft_;   // FFT_m of the conjugate chirp, wrapped
  std::unique_ptr<Plan> sub_;   // power-of-two plan of size m >= 2n-1
};

// Forward DFT of a real signal of length n: writes bins 0..n/2 (n/2+1 values).
class RealPlan {
 public:
  explicit RealPlan(int64_t n);
  int64_t size() const { return n_; }
  // `scratch` holds scratch_size() values.
  void forward(const double* x, cd* out, cd* scratch) const;
  void forward(const double* x, cd* out, std::vector<cd>& scratch, std::vector<cd>& /*unused*/) const {
    scratch.resize(scratch_size());
    forward(x, out, scratch.data());
  }
  size_t scratch_size() const;

 private:
  int64_t n_;
  bool packed_;               // even n: half-length complex transform
  std::unique_ptr<Plan> plan_;  // size n/2 (packed) or n
  std::vector<cd> twiddle_;     // exp(-2 pi i k/n), k <= n/2 (packed only)
};

// Reference O(n^2) DFT in long double (for tests).
std::vector<cd> naive_dft(const std::vector<cd>& x, bool inverse);

}  // namespace nxrt::ops::fft
