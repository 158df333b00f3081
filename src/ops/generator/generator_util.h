// Helpers shared by the generator family: registration of the split files and a portable seeded RNG.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ops/common.h"

namespace nxrt::ops {

void register_random_ops(ep::KernelRegistry& r);  // generator/random.cpp
void register_loss_ops(ep::KernelRegistry& r);    // generator/loss.cpp

// Shapes that come from data (ConstantOfShape, Range, random shape attributes): refuse sizes that
// overflow or exceed 2^34 elements instead of failing inside the allocator.
inline bool generated_size_ok(const Dims& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d != 0 && n > (int64_t(1) << 34) / d) return false;
    n *= d;
  }
  return true;
}

// PCG32-style generator (64-bit state, xorshift-multiply output): same sequence on every platform,
// unlike std:: distributions.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0xD1B54A32D192ED03ull) { next(); }
  uint64_t next() {
    // splitmix64
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * (1.0 / 9007199254740992.0); }
  // Standard normal (Box-Muller).
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
};

// The RNG for a node: seeded from the float `seed` attribute when present, else from a process-wide
// counter mixed with the clock (a fresh stream per call).
Rng make_rng(const ep::KernelInfo& info);

}  // namespace nxrt::ops
