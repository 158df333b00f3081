// The internal "nxrt" domain's ops (see fused/fused_kernel.cpp).
#pragma once
#include <cstdint>
#include <string>

#include "ep/kernel.h"
#include "nxrt/status.h"
#include "ops/gemm/activation.h"

namespace nxrt::ops {

// The fused ops' "activation" attribute: ops::Activation and parse_activation (ops/gemm/activation.h).

// y = max(x * a + b, 0) over n floats (BatchNormRelu's inner loop; AVX2 where available; a NaN
// comes out 0). Also FusedConv's pre-activation on its general path.
void scale_shift_relu(const float* x, float* y, int64_t n, float a, float b);

// Registers nxrt::FusedConv/FusedGemm/FusedMatMul/FusedAttention and nxrt copies of LayerNormalization,
// RMSNormalization, Gelu and HardSwish. Called last from register_cpu_kernels (it copies registered defs).
void register_fused_ops(ep::KernelRegistry& r);

}  // namespace nxrt::ops
