#include "ops/gemm/activation.h"

namespace nxrt::ops {

Result<Activation> parse_activation(const std::string& s) {
  if (s.empty()) return Activation::kNone;
  if (s == "Relu") return Activation::kRelu;
  if (s == "Clip") return Activation::kClip;
  if (s == "Sigmoid") return Activation::kSigmoid;
  if (s == "Tanh") return Activation::kTanh;
  if (s == "Gelu") return Activation::kGelu;
  if (s == "LeakyRelu") return Activation::kLeakyRelu;
  if (s == "HardSigmoid") return Activation::kHardSigmoid;
  if (s == "HardSwish") return Activation::kHardSwish;
  return invalid_model("unknown fused activation '" + s + "'");
}

}  // namespace nxrt::ops
