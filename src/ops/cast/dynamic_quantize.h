// DynamicQuantizeLinear's two passes over a float32 tensor, at the kernel's ISA tier: the range (min
// and max together with 0) and the quantization to uint8. Each tier gives the scalar loops' bytes: the
// same float division by the scale and round-half-even, NaN to 0 (tests/unit/test_ops_cast.cpp holds
// every tier to the scalar loops on random and special values).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ep/cpu_features.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

// min(0, x...) and max(0, x...) over x[0, n): NaNs are skipped.
void dql_range(const float* x, int64_t n, float* mn, float* mx, ep::IsaTier tier);
// y[i] = clamp(round_half_even(x[i] / scale) + zp, 0, 255), a NaN quotient to 0; scale != 0.
void dql_quantize(const float* x, int64_t n, float scale, float zp, uint8_t* y, ep::IsaTier tier);

// The whole of DynamicQuantizeLinear on x[0, n): its scale ((max - min) / 255 of the range with 0), zero
// point (round_half_even(-min / scale), clamped) and uint8 codes q, both passes split over `pool` in
// fixed chunks (the result does not depend on the thread count; no heap memory). The kernel and
// com.microsoft DynamicQuantizeMatMul (for its A) both call it.
// One float quantized as the ONNX formula says: round_half_even(v / scale) + zp saturated to [lo, hi]
// (a NaN quotient gives zp). The com.microsoft QLinear* ops and QGemm requantize with it.
inline int32_t quantize_saturated(float v, float scale, int32_t zp, int32_t lo, int32_t hi) {
  float r = std::nearbyint(v / scale);
  if (std::isnan(r)) r = 0.f;
  r = std::min(static_cast<float>(hi - zp), std::max(static_cast<float>(lo - zp), r));
  return static_cast<int32_t>(r) + zp;
}

// QuantizeLinear / DequantizeLinear with one float32 scale and zero point, 8-bit codes as bytes (int8
// as two's complement): y[i] = clamp(round_half_even(x[i] / scale) + zp) to the type's range, a NaN to
// 0 (quantize_8bit), and y[i] = (float(x[i]) - zp) * scale (dequantize_8bit): the kernels' scalar
// float operations at every tier.
void quantize_8bit(const float* x, int64_t n, float scale, float zp, bool is_signed, uint8_t* y, ep::IsaTier tier);
void dequantize_8bit(const uint8_t* x, int64_t n, bool is_signed, float scale, float zp, float* y, ep::IsaTier tier);

void dynamic_quantize_u8(ep::ThreadPool& pool, const float* x, int64_t n, ep::IsaTier tier, uint8_t* q, float* scale,
                         uint8_t* zp);

}  // namespace nxrt::ops
