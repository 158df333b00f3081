// The float rows of com.microsoft's Skip(Simplified)LayerNormalization on AVX2 / AVX-512: the same
// per-element arithmetic as the plain loop in contrib_ops.cpp (float sums of input, skip and bias;
// statistics in double; y = float((v - mean) * inv) * gamma (+ beta)), with the double sums kept in
// vector lanes instead of one running total (so they add in another order). An LLM runs two of these
// per layer and token; the plain loop's serial double sums took ~3.4 us per 896-float row (Zen 5).
#pragma once
#include <cstdint>

#include "ep/cpu_features.h"

namespace nxrt::ops::contrib {

struct SkipNormRow {
  const float* x = nullptr;
  const float* skip = nullptr;   // may be null
  const float* bias = nullptr;   // may be null
  const float* gamma = nullptr;
  const float* beta = nullptr;   // may be null
  float* y = nullptr;
  float* sum_out = nullptr;      // input + skip + bias, when requested
  int64_t H = 0;
  bool simplified = false;       // RMS: no mean
  double eps = 0;
};

// Whether skip_norm_row_f32 has a vector body at this tier (AVX2 and up; isa: the kernel's tier, which
// KernelInfo::isa() caps by the CPU).
bool skip_norm_row_vectorized(ep::IsaTier isa);
// Normalizes one row; writes the row's mean (0 when simplified) and 1 / sqrt(var + eps). Requires
// skip_norm_row_vectorized(isa): below AVX2 the rows take contrib_ops.cpp's plain loop.
void skip_norm_row_f32(ep::IsaTier isa, const SkipNormRow& r, double* mean, double* inv);

}  // namespace nxrt::ops::contrib
