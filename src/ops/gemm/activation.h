// The activations a GEMM or convolution applies in its store (GemmEpilogue, ConvPost) and that the
// nxrt-domain fused ops name in their "activation" attribute (FusedConv, FusedGemm, FusedMatMul): one
// enum and one scalar definition for all of them.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "nxrt/status.h"
#include "ops/elementwise/vec_math.h"

namespace nxrt::ops {

// Parameters (a, b) by kind: Clip (min, max), LeakyRelu (alpha, -), HardSigmoid (alpha, beta); the
// others take none. Gelu is the erf form.
enum class Activation : uint8_t { kNone, kRelu, kClip, kSigmoid, kTanh, kGelu, kLeakyRelu, kHardSigmoid, kHardSwish };

// The fused ops' attribute value ("" = none, "Relu", "Clip", "Sigmoid", "Tanh", "LeakyRelu",
// "HardSigmoid", "HardSwish"); anything else is an error naming it.
Result<Activation> parse_activation(const std::string& s);

// act(v) for a kind known at compile time (the fused epilogue loops specialize on it). A NaN input
// comes out NaN for Relu and Clip, as the ONNX ops give it.
template <Activation A, typename CT>
inline CT activation_of(CT v, float a, float b) {
  if constexpr (A == Activation::kNone) return v;
  if constexpr (A == Activation::kRelu) return v < CT(0) ? CT(0) : v;
  if constexpr (A == Activation::kClip) return v < CT(a) ? CT(a) : (v > CT(b) ? CT(b) : v);
  if constexpr (A == Activation::kSigmoid) return CT(1) / (CT(1) + std::exp(-v));
  if constexpr (A == Activation::kTanh) return std::tanh(v);
  if constexpr (A == Activation::kGelu) return CT(0.5) * v * (CT(1) + std::erf(v * CT(0.70710678118654752)));
  // max(v, 0) + a * min(v, 0): v >= 0 ? v : a * v (NaN and infinities alike; a zero product may come out
  // +0 where the select gives -0), with no branch: GCC keeps a multiply on one side of a select a branch
  // per element under its default -ftrapping-math, mispredicted at every sign change, and does not
  // vectorize the loop.
  if constexpr (A == Activation::kLeakyRelu) return std::max(v, CT(0)) + CT(a) * std::min(v, CT(0));
  if constexpr (A == Activation::kHardSigmoid) return std::max(CT(0), std::min(CT(1), CT(a) * v + CT(b)));
  if constexpr (A == Activation::kHardSwish) return v * std::max(CT(0), std::min(CT(1), v / CT(6) + CT(0.5)));
}

template <typename CT>
inline CT apply_activation(Activation act, CT v, float a, float b) {
  switch (act) {
    case Activation::kNone: return v;
    case Activation::kRelu: return activation_of<Activation::kRelu>(v, a, b);
    case Activation::kClip: return activation_of<Activation::kClip>(v, a, b);
    case Activation::kSigmoid: return activation_of<Activation::kSigmoid>(v, a, b);
    case Activation::kTanh: return activation_of<Activation::kTanh>(v, a, b);
    case Activation::kGelu: return activation_of<Activation::kGelu>(v, a, b);
    case Activation::kLeakyRelu: return activation_of<Activation::kLeakyRelu>(v, a, b);
    case Activation::kHardSigmoid: return activation_of<Activation::kHardSigmoid>(v, a, b);
    case Activation::kHardSwish: return activation_of<Activation::kHardSwish>(v, a, b);
  }
  return v;
}

// The float vector map (ops/elementwise/vec_math.h) that computes `act`, for the activations the
// kernels do not apply in registers: Sigmoid, Tanh and Gelu (erf form); false for the others.
inline bool activation_vector_fn(Activation act, vecmath::Fn* fn) {
  switch (act) {
    case Activation::kSigmoid: *fn = vecmath::Fn::kSigmoid; return true;
    case Activation::kTanh: *fn = vecmath::Fn::kTanh; return true;
    case Activation::kGelu: *fn = vecmath::Fn::kGeluErf; return true;
    default: return false;
  }
}

}  // namespace nxrt::ops
