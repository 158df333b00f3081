// Small-spatial convolution paths: float convs whose output planes are small (7x7, 13x13, 14x14).
//
// The im2col / pointwise paths compute y[M, pixels] = W[M, K] * col[K, pixels] with the GEMM engine's
// 6x16 tile, 16 pixels a vector: a 7x7 plane (49 pixels) fills 64 columns (77%). Two AVX-512 paths:
//
// - Transposed (small_spatial_conv): Y^T[pixels, M] = col^T[pixels, K] * W^T[K, M], pixels as the
//   broadcast dimension (7 a tile: 49 = 7 x 7, 196 = 28 x 7) and output channels as the vector one
//   (16 a vector, 48 a tile). col^T is packed per call straight from x (any kernel, stride, dilation,
//   pads, groups; the pixels of all images form the rows); W^T is packed once per group (the PackedB
//   layout of ops/gemm/gemm.h) from the conv's packed weights on first use: a second copy of the weights,
//   kept only for convs that take this path. The tile is written back to NCHW transposed in registers,
//   with the bias and FusedConv's residual / activation (ConvPost) applied.
// - Direct (small_spatial_direct_conv): the usual orientation on the conv's own packed weights (no
//   copy), 6 channels x up to 64 pixels a tile, and for planes of 16q + 1 pixels (49 = 3 x 16 + 1) the
//   last pixel as a 6-lane FMA on the weight panel instead of a whole 16-wide vector.
//
// small_spatial_choice picks between them and the usual path (the kAuto rule, see the .cpp).
// They run at the AVX-512 tier and above (the conv kernel's KernelInfo::isa(), capped by the CPU);
// below it small_spatial_applies is false and the conv stays on its usual path.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "nxrt/dims.h"
#include "ep/cpu_features.h"
#include "ops/conv/shared_weights.h"
#include "ops/gemm/gemm.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

struct ConvShape;
struct ConvPost;

struct SmallSpatialWeights {
  int64_t M = 0, group = 1, K = 0;  // K = C/group * kernel volume
  std::vector<PackedB> wt;          // per group: op(B) = W_g^T, K x M/group
  bool empty() const { return wt.empty(); }
};

// Whether weights of this shape and group can serve the path (float conv weights of rank 3..5, not
// depthwise).
bool small_spatial_weights_apply(const Dims& w_shape, int64_t group);

// Packs W (M x K row-major, K = C/group * kvol) for the path.
void small_spatial_prepare(int64_t M, int64_t group, int64_t K, const float* w, SmallSpatialWeights* out);

// The transposed path's weights (W^T per group), made from the conv's packed GEMM weights when a plan
// that takes the path is made (conv_plan) and shared by every live plan that takes it, freed with the
// last one: the same lifetime as WinogradCache's, for the same reason (a second copy of the weights
// only while a shape that uses it is cached).
class SmallSpatialCache {
 public:
  std::shared_ptr<const SmallSpatialWeights> acquire(const std::vector<PackedA<float>>& packed) const;

 private:
  SharedLazyWeights<SmallSpatialWeights> lazy_;
};

// Whether the paths can compute this conv at this tier.
bool small_spatial_applies(const ConvShape& s, ep::IsaTier isa = ep::cpu_isa_tier());

// The kAuto choice: the usual path, the direct orientation on the conv's packed weights (1x1 convs on
// planes of 16q + 1 pixels, no extra copy), or the transposed product (W^T copy).
enum class SmallSpatialChoice { kNone, kDirect, kTransposed };
SmallSpatialChoice small_spatial_choice(const ConvShape& s, int threads, ep::IsaTier isa = ep::cpu_isa_tier());

// Whether it is expected to beat the usual path (im2col / pointwise GEMM) at this many threads: the
// kAuto rule, from measurements (see the .cpp).
bool small_spatial_preferred(const ConvShape& s, int threads);

// y[N, M, out...] = conv(x, w) + bias (bias may be null). Requires small_spatial_applies(s) and w
// prepared for s.M, s.group and K = s.C/s.group * kvol.
// With `post`: y = act(conv + bias + residual) (nxrt::FusedConv's epilogue), applied in the write-back.
void small_spatial_conv(const ConvShape& s, const float* x, const SmallSpatialWeights& w, const float* bias,
                        float* y, ep::ThreadPool* pool, const ConvPost* post = nullptr);
// The same with its scratch in `workspace` (64-byte aligned, small_spatial_workspace_bytes(s, slots)
// bytes: the padded input, the packed col^T and one accumulator slot per pool thread, indexed by
// ThreadPool::slot()), as a conv's plan declares it; a pool of more than `slots` threads gets a heap
// workspace instead. The overload above allocates one per call (tests, benchmarks).
size_t small_spatial_workspace_bytes(const ConvShape& s, int slots);
void small_spatial_conv(const ConvShape& s, const float* x, const SmallSpatialWeights& w, const float* bias,
                        float* y, ep::ThreadPool* pool, const ConvPost* post, void* workspace, int slots);

// The direct orientation on the conv's own packed weights (pack_a per group), no extra copy:
// y = conv + bias (+ post, its pre-activation included for 1x1 stride-1 unpadded group-1 convs).
// Requires small_spatial_applies(s). Returns false where it cannot run.
bool small_spatial_direct_conv(const ConvShape& s, const float* x, const std::vector<PackedA<float>>& packed,
                               const float* bias, float* y, ep::ThreadPool* pool, const ConvPost* post = nullptr);
// The same with its scratch (the pre-activated input with `pre`, the padded copy and im2col rows of a
// conv wider than 1x1; no per-thread part) in `workspace` of small_spatial_direct_workspace_bytes.
size_t small_spatial_direct_workspace_bytes(const ConvShape& s, bool pre);
bool small_spatial_direct_conv(const ConvShape& s, const float* x, const std::vector<PackedA<float>>& packed,
                               const float* bias, float* y, ep::ThreadPool* pool, const ConvPost* post,
                               void* workspace);

}  // namespace nxrt::ops
