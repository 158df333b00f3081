// The internal "nxrt" domain's ops (see fused_kernels.cpp).
#pragma once
#include <string>

#include "ep/kernel.h"
#include "nxrt/status.h"

namespace nxrt::optimizer {

enum class Activation { kNone, kRelu, kClip, kSigmoid, kTanh, kLeakyRelu, kHardSigmoid, kHardSwish };
Result<Activation> parse_activation(const std::string& s);

// Registers nxrt::FusedConv/FusedGemm/FusedMatMul/FusedAttention and nxrt copies of LayerNormalization,
// RMSNormalization, Gelu and HardSwish. Called last from register_cpu_kernels (it copies registered defs).
void register_fused_ops(ep::KernelRegistry& r);

}  // namespace nxrt::optimizer
