// The convolution engine behind Conv, ConvInteger and QLinearConv (and the transposed variant behind
// ConvTranspose). Exposed so unit tests can force each path and compare them.
#pragma once
#include <memory>
#include <vector>

#include "ep/kernel.h"
#include "ops/gemm/conv_gemm.h"
#include "ops/conv/small_spatial.h"
#include "ops/gemm/gemm.h"
#include "ops/conv/conv_geometry.h"
#include "ops/conv/winograd.h"

namespace nxrt::ops {

enum class ConvPath {
  kAuto,       // pick the fastest applicable path
  kIm2col,     // general: im2col + GEMM, correct for every attribute combination
  kPointwise,  // 1x1 kernel, stride 1, no pads: GEMM straight on the input
  kDepthwise,  // one input channel per group: direct loops
  kWinograd,   // float 2-D 3x3, stride 1, dilation 1, group 1: Winograd F(4x4, 3x3) (conv/winograd.h);
               // needs ConvWeights prepared with `winograd`
};

struct ConvShape {
  int64_t N = 0, C = 0, M = 0, group = 1;
  Geom3 g;
};

// Weights prepared for ConvShape's group split: the raw weights in compute type and, per group, the
// packed GEMM operand (M/group x C/group*kvol).
template <typename CT>
struct ConvWeights {
  Dims shape;                 // W's shape (M, C/group, k...)
  int64_t group = 1;
  std::vector<CT> raw;        // W in compute type (kept for depthwise, and for small 1x1 weights)
  std::vector<convgemm::PackedA<CT>> packed;  // per group
  // float, 3x3, group 1, prepared with `winograd`: the Winograd weights (transformed on first use).
  std::shared_ptr<const WinogradCache> wino;
  // float, not depthwise: W^T for the small-spatial path (conv/small_spatial.h), packed on first use.
  std::shared_ptr<const SmallSpatialCache> small;
  // `winograd`: the conv has stride 1 and dilation 1, so the Winograd path may run.
  void prepare(const Dims& w_shape, int64_t group_count, std::vector<CT> w, bool winograd = false);
};

// What nxrt::FusedConv applies after the bias: y = act(conv + bias + residual), where residual (may be
// null) has y's layout and does not alias it. The GEMM paths do it in their store, while the tile of y
// is in cache; conv_forward reports whether it did.
struct ConvPost {
  const float* residual = nullptr;
  GemmActivation act = GemmActivation::kNone;  // kNone, kRelu or kClip
  float clip_min = 0.f, clip_max = 0.f;
  // Pre-activation of the input (FusedConv inputs 4 and 5, from a BN-ReLU before a 1x1 conv):
  // x' = max(x * pre_scale[c] + pre_shift[c], 0) per input channel, applied while packing. Only 1x1,
  // stride-1, unpadded, group-1 convs take it; conv_forward returns false for anything else and the
  // caller must then not use the output.
  const float* pre_scale = nullptr;
  const float* pre_shift = nullptr;
};

// y[N, M, out...] = conv(x[N, C, in...], w) + bias (bias may be null). Paths other than kAuto and kIm2col
// fall back to kIm2col when they do not apply. With `post` (float only), returns whether the path also
// applied it; when false the caller applies it to y.
template <typename CT>
bool conv_forward(const ConvShape& s, const CT* x, const ConvWeights<CT>& w, const CT* bias, CT* y,
                  ep::ThreadPool* pool, ConvPath path = ConvPath::kAuto, const ConvPost* post = nullptr);

// Implemented by the Conv kernel for nxrt::FusedConv: computes the node with `post` fused where the path
// allows. Returns whether it applied post (false: y holds conv + bias and the caller finishes it).
// `residual_shape` must equal the output's shape for post to be applied.
class ConvWithPost {
 public:
  virtual ~ConvWithPost() = default;
  virtual Result<bool> compute_with_post(ep::KernelContext& ctx, const ConvPost& post, const Dims* residual_shape) = 0;
};

// Whether a path applies to a shape (tests).
bool conv_path_applies(const ConvShape& s, ConvPath path);

// The direct definition, for tests.
template <typename CT>
void conv_naive(const ConvShape& s, const CT* x, const CT* w, const CT* bias, CT* y);

}  // namespace nxrt::ops
