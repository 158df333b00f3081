// nxrt::SiluMul's float32 body, shared with the kernels that apply it as an epilogue (the MatMulNBits
// gate/up pair, ops/contrib/matmul_nbits.cpp), so that a fused product has the unfused graph's bits.
#pragma once
#include <cstdint>

namespace nxrt::ops {

// y[i] = Swish(x[i]) * u[i] for i < n, on the calling thread: Swish's vector body (8 lanes, or 16 when
// `avx512`, the caller's tier, allows; lane for lane the same bits) on blocks held in L1, then the
// product; the scalar body without AVX2. y may be x or u (each block's Swish is computed aside first).
void silu_mul_f32(const float* x, const float* u, float* y, int64_t n, bool avx512);

}  // namespace nxrt::ops
