// The convolution engine behind Conv, ConvInteger and QLinearConv (and the transposed variant behind
// ConvTranspose). Exposed so unit tests can force each path and compare them.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ops/conv/small_spatial.h"
#include "ops/conv/strided_direct.h"
#include "ops/gemm/gemm.h"
#include "ops/conv/conv_geometry.h"
#include "ops/conv/depthwise.h"
#include "ops/conv/winograd.h"
#include "ops/window/window_engine.h"

namespace nxrt::ops {

// Every way conv_forward can compute a convolution. kAuto picks per shape (conv_engine.cpp, choose_path);
// the others force one, for tests and diagnosis: a forced path runs where it applies
// (conv_path_applies) and elsewhere the conv takes the kAuto choice.
enum class ConvPath {
  kAuto,
  kReference,               // conv_naive: the direct definition, double accumulation
  kIm2col,                  // the column matrix written in chunks of output rows, then a GEMM: every
                            // attribute combination and type (double convs take it)
  kImplicitGemm,            // float: the GEMM packs its im2col panels straight from the image (or from the
                            // zero-padded copy for 2-D kernels over 1x1), no column matrix
  kPaddedRowsGemm,          // float 2-D, 16..256-long reductions, rows of >= 12 outputs, stride_w 1 or 2
                            // (CNN stems): the input copied once into zero-padded planes so each tap's
                            // 16 outputs are contiguous, and the GEMM reads those rows in place, unpacked
  kPointwise,               // 1x1 kernel, no pads: the GEMM straight on the input (stride 1) or on its
                            // subsampled copy (larger strides: ConvPlan::subsample)
  kDepthwiseWindow,         // float depthwise on the window engine (conv/depthwise.h)
  kDepthwiseScalar,         // depthwise (one input channel per group), per-tap loops
  kWinograd,                // float 2-D 3x3, stride 1, dilation 1, group 1: Winograd F(4x4, 3x3) (conv/winograd.h);
                            // needs ConvWeights prepared with `winograd`
  kSmallSpatialDirect,      // float, planes of 2..256 pixels, AVX-512: 6 channels x up to 64 pixels a tile on
                            // the conv's packed weights (conv/small_spatial.h)
  kSmallSpatialTransposed,  // the same shapes as Y^T = col^T W^T, pixels as the broadcast dimension
  kStridedDirect,           // float 2-D, group 1, stride >= 2, AVX-512: output channels in the vector, up to 14
                            // pixels a tile, no im2col (conv/strided_direct.h)
};
// The names the `conv.path` kernel override takes ("auto", "reference", "im2col", "implicit-gemm",
// "padded-rows-gemm", "pointwise", "depthwise-window", "depthwise-scalar", "winograd",
// "small-spatial-direct", "small-spatial-transposed", "strided-direct").
const char* conv_path_name(ConvPath p);
std::optional<ConvPath> parse_conv_path(std::string_view name);

// What a conv kernel decided at creation from its KernelInfo (conv_config): the path to force, the paths
// kAuto must not pick, and the instruction-set tier for the GEMM and the paths' own vector code.
struct ConvConfig {
  ConvConfig(ConvPath p = ConvPath::kAuto, ep::IsaTier tier = ep::cpu_isa_tier()) : path(p), isa(tier) {}
  ConvPath path;
  ep::IsaTier isa;
  uint32_t auto_skips = 0;  // bit (1 << ConvPath) set: kAuto does not choose that path
  bool skip_stem_lanes = false;  // conv.skip=stem-lanes: nxrt::ConvMaxPool runs its bands (ops/conv/stem_lanes.h)
  bool skipped(ConvPath p) const { return (auto_skips >> static_cast<int>(p)) & 1u; }
};
// From the kernel overrides (ep/kernel_overrides.h): conv.path, conv.skip, reference=1 (kReference) and isa.
ConvConfig conv_config(const ep::KernelInfo& info);

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
  std::vector<PackedA<CT>> packed;  // per group
  // float, 3x3, group 1, prepared with `winograd`: the Winograd weights (transformed on first use).
  std::shared_ptr<const WinogradCache> wino;
  // float, not depthwise: W^T for the small-spatial path (conv/small_spatial.h), packed on first use.
  std::shared_ptr<const SmallSpatialCache> small;
  // float, 4-D, group 1: the strided direct path's [M/16][K][16] copy, repacked on first use.
  std::shared_ptr<const StridedDirectCache> strided;
  // `winograd`: the conv has stride 1 and dilation 1, so the Winograd path may run.
  void prepare(const Dims& w_shape, int64_t group_count, std::vector<CT> w, bool winograd = false);
  // The same from W's values in place (a constant initializer already in compute type): packs straight
  // from w and copies it into `raw` only where a path reads the raw weights, so a model's large conv
  // weights are not first copied into a temporary (a write pass and its page faults: ~94 MB for
  // ResNet-50's convs, ~80 MB for VGG-19's).
  void prepare(const Dims& w_shape, int64_t group_count, const CT* w, bool winograd = false);

 private:
  // Everything but `raw`; returns whether the raw weights must be kept.
  bool prepare_packed(const Dims& w_shape, int64_t group_count, const CT* w, bool winograd);
};

// What nxrt::FusedConv applies after the bias: y = act(conv + bias + residual), where residual (may be
// null) has y's layout and does not alias it. The GEMM paths do it in their store, while the tile of y
// is in cache; conv_forward reports whether it did.
struct ConvPost {
  const float* residual = nullptr;
  Activation act = Activation::kNone;  // conv_post_activation(act)
  float act_a = 0.f, act_b = 0.f;     // Clip's min and max; LeakyRelu's slope in act_a
  // Pre-activation of the input (FusedConv inputs 4 and 5, from a BN-ReLU before a 1x1 conv):
  // x' = max(x * pre_scale[c] + pre_shift[c], 0) per input channel, applied while packing. Only 1x1,
  // stride-1, unpadded, group-1 convs take it; conv_forward returns false for anything else and the
  // caller must then not use the output.
  const float* pre_scale = nullptr;
  const float* pre_shift = nullptr;
  // Channel shuffle of the input (FusedConv attribute `input_shuffle`, from ShuffleNet's Reshape-Transpose-
  // Reshape before a depthwise conv): with G > 1 groups, the conv's input channel c is channel
  // shuffled_channel(c, C, G) of x. The depthwise paths read those planes where they copy each plane in
  // anyway; every other path gets a shuffled copy of x (conv_forward_planned). The caller checks C % G == 0.
  int64_t input_shuffle = 0;
};

// The channel shuffle as a copy: for each of `outer` blocks, y[k][g] = x[g][k] over g < groups, k < per_group,
// each element a run of plane_bytes bytes (x and y do not overlap).
void channel_shuffle_copy(const void* x, void* y, int64_t outer, int64_t groups, int64_t per_group,
                          size_t plane_bytes);

// The activations a ConvPost may carry (every path that applies post applies these): none, Relu, Clip,
// LeakyRelu.
inline bool conv_post_activation(Activation a) {
  return a == Activation::kNone || a == Activation::kRelu || a == Activation::kClip || a == Activation::kLeakyRelu;
}

// Everything conv_forward decides from the shape, made once per shape by conv_plan: the Conv kernel's
// specialize keeps it in its variant (ConvVariant in conv_ops.cpp), and the plain conv_forward below
// makes one per call. Immutable once made, so concurrent calls at the shape share it.
struct ConvPlan {
  ConvShape s;
  int threads = 1;                      // the pool size it was made for (work splits depend on it)
  bool pre = false;                     // made for FusedConv's pre-activation (ConvPost::pre_scale)
  bool pre_direct = false;              // pre: the small-spatial direct path takes it (else the 1x1 GEMM)
  ConvPath path = ConvPath::kAuto;      // the resolved path (not pre)
  // The zero-padded input copy of kPaddedRowsGemm and of kImplicitGemm's 2-D kernels over 1x1
  // (conv_engine.cpp, PaddedIm2colPanels): its geometry and each tap's offset (c, kh, kw).
  bool padded = false;
  int64_t Hp = 0, Wrow = 0, half = 0, plane = 0;
  std::vector<int64_t> boff;
  std::vector<int64_t> row_offsets;     // kPointwise on the strips: input row k at k * in_size
  // kPointwise on a 1x1 kernel at a stride over 1 (no pads): the kept input positions are copied
  // (x[.., oh * sh, ow * sw]: the 1x1 kernel's im2col) into the workspace at offset 0, and the stride-1
  // 1x1 conv `sub` (its input the output grid) runs on the copy. The GEMM then reads whole rows instead
  // of gathering every other column while packing. Zen 5, 1 thread: ResNet-50's 256->512 1x1/2 @56x56
  // alone 1.24-1.29 -> 1.17-1.18 ms; in-model (per-node trace, alternated processes, pinned) 1.38-1.46 ->
  // 1.20-1.28 ms.
  bool subsample = false;
  ConvShape sub;
  int64_t im2col_rows = 0;              // kIm2col: output rows per column-matrix chunk
  // The float GEMM engine's plans where a path runs it (made with the conv plan, for its pool size and
  // tier): kPointwise's per-group product (single-threaded when the groups split over the threads),
  // kImplicitGemm's and the pre-activated pointwise's products with generated B, kIm2col's product over
  // a full chunk of output rows (gemm) and over the last one (gemm_last).
  GemmPlan gemm, gemm_last;
  bool pointwise_by_group = false;      // kPointwise: groups split over the threads, not each group's GEMM
  bool pointwise_unpacked = false;      // kPointwise, float: the strips on the input itself (no B packing)
  // The path's extra weights (transformed / transposed copies of the packed ones), shared by every
  // plan of the conv that takes the path and freed with the last of them.
  std::shared_ptr<const WinogradWeights> wino;
  WinogradPlan wino_plan;               // kWinograd: its tiling, blocks and thread split
  std::shared_ptr<const SmallSpatialWeights> small;
  std::shared_ptr<const StridedDirectWeights> strided;  // kStridedDirect
  StridedDirectPlan sd_plan;            // kStridedDirect: its tiles and work order
  // kDepthwiseWindow (float): the window engine's plan (null: the plain loops) and the floats of each
  // pool thread's slot of scratch it runs on.
  std::shared_ptr<const window::TapPlan> dw_plan;
  int64_t dw_slot_floats = 0;
  // Workspace: the padded input copy, the im2col chunk or the subsampled input, at offset 0.
  size_t workspace_bytes = 0;
  // Scratch each pool thread keeps to itself, apart from the workspace so that a session gives it the
  // same per-thread memory for every conv (KernelContext::thread_slots): kWinograd's transformed input,
  // products and input rows; kDepthwiseWindow's padded planes (dw_slot_floats); the GEMM engine's
  // packing scratch (gemm_slot_floats) where a float path runs it on unpacked B (pointwise, im2col,
  // implicit GEMM, pre-activated pointwise).
  size_t slot_bytes = 0;
  size_t gemm_slot_floats = 0;
};

// The plan for s on weights w (prepared for s) at `threads` threads; `pre`: for a call with a
// pre-activation. A post other than conv_post_activation's is not planned for: conv_forward then plans
// per call.
template <typename CT>
ConvPlan conv_plan(const ConvShape& s, const ConvWeights<CT>& w, const ConvConfig& cfg, int threads, bool pre);

// y[N, M, out...] = conv(x[N, C, in...], w) + bias (bias may be null), on cfg.path (see ConvPath). With
// `post` (float only), returns whether the path also applied it; when false the caller applies it to y.
// Plans per call (conv_plan) and takes its workspace from the heap.
template <typename CT>
bool conv_forward(const ConvShape& s, const CT* x, const ConvWeights<CT>& w, const CT* bias, CT* y,
                  ep::ThreadPool* pool, const ConvConfig& cfg = ConvConfig(), const ConvPost* post = nullptr);
// The same on a plan made for this shape, thread count and pre-activation (conv_plan_fits), with
// plan.workspace_bytes of 64-byte-aligned scratch at `workspace`: no shape-dependent planning.
// `slots`: plan.slot_bytes for each thread of the pool (KernelContext::thread_slots; without them, or
// with too few, the path takes heap scratch of its own).
template <typename CT>
bool conv_forward_planned(const ConvPlan& plan, const CT* x, const ConvWeights<CT>& w, const CT* bias, CT* y,
                          ep::ThreadPool* pool, const ConvConfig& cfg, const ConvPost* post, void* workspace,
                          const ep::SlotMemory& slots = {});
// Whether `plan` serves this call (same shape, pool size, pre-activation, a post it planned for).
bool conv_plan_fits(const ConvPlan& plan, const ConvShape& s, ep::ThreadPool* pool, const ConvPost* post);
bool operator==(const ConvShape& a, const ConvShape& b);
// Conv kernel variants (conv_ops.cpp) alive now, all nodes: what tests watch to see eviction free them.
int64_t conv_variants_live();

// The path conv_forward runs for this conv (kAuto resolved, a forced path that does not apply replaced
// by the kAuto choice).
template <typename CT>
ConvPath conv_chosen_path(const ConvShape& s, const ConvWeights<CT>& w, const ConvConfig& cfg, const ConvPost* post,
                          int threads);

// Implemented by the Conv kernel for nxrt::FusedConv: computes the node with `post` fused where the path
// allows. Returns whether it applied post (false: y holds conv + bias and the caller finishes it).
// `residual_shape` must equal the output's shape for post to be applied.
class ConvWithPost {
 public:
  virtual ~ConvWithPost() = default;
  // Kernel::specialize for the calls compute_with_post will make: `pre_activation` when their post
  // carries FusedConv's pre-activation (it changes the path).
  virtual Result<std::unique_ptr<ep::KernelVariant>> specialize_with_post(const ep::SpecializeContext& sc,
                                                                          bool pre_activation) const = 0;
  virtual Result<bool> compute_with_post(ep::KernelContext& ctx, const ConvPost& post, const Dims* residual_shape) const = 0;
};

// Whether a path can compute this shape in this type at this tier (weights aside: kWinograd also needs
// them prepared with `winograd`, the small-spatial paths their cache).
bool conv_path_applies(const ConvShape& s, ConvPath path, bool is_float = true, ep::IsaTier isa = ep::cpu_isa_tier());

// The direct definition, for tests.
template <typename CT>
void conv_naive(const ConvShape& s, const CT* x, const CT* w, const CT* bias, CT* y);

}  // namespace nxrt::ops
