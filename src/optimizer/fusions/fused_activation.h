// The activation a fused nxrt node applies to its result: the one place the optimizer writes the
// attribute contract that ops/fused parses (FusedConv, FusedGemm, FusedMatMul):
//   activation         "" (none), "Relu", "Sigmoid", "Tanh", "Gelu" (the erf form), "LeakyRelu", "HardSigmoid",
//                      "HardSwish", "Clip"
//   activation_params  LeakyRelu: alpha; HardSigmoid: alpha, beta; Clip: min, max (absent when empty)
//   inner_opset        the ai.onnx opset the wrapped Conv / Gemm / MatMul is created at
#pragma once
#include <string>
#include <vector>

#include "optimizer/rewrite.h"

namespace nxrt::optimizer {

struct FusedActivation {
  std::string name;  // the `activation` attribute ("" = none)
  std::vector<float> params;
};

// Whether `n`, reading the fused result as its only data input, is an activation the fused kernels
// apply; fills `act` when it is (and leaves it alone otherwise).
bool match_fused_activation(const Rewriter& rw, const ir::Node& n, FusedActivation* act);

// Appends `activation`, `activation_params` (when there are any) and `inner_opset` to `fused`.
void add_fused_activation_attrs(ir::Node& fused, const FusedActivation& act, int64_t inner_opset);

}  // namespace nxrt::optimizer
