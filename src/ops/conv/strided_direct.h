// Direct float convolution for 2-D convs with a stride of 2 or more (ResNet's 3x3/2 downsampling
// convs), group 1, at the AVX-512 tier: the conv engine's kStridedDirect path.
//
// Output channels are the vector (16 a block, 2 blocks a tile, 3 where a row's runs are 9 pixels or
// fewer) and a run of up to 14 pixels of one output row the tile's other side (rows cut into equal
// runs: 28 -> 14 + 14): for every input channel and tap, the tile loads its weight vectors once and
// broadcasts each of its pixels' input values against them (up to 28 accumulators, no im2col). Why:
// stride 2 makes the GEMM paths gather every other input pixel into panels (implicit GEMM) or read rows
// whose tails waste lanes (padded rows); ResNet-50's 3x3/2 128->128 @56x56 took 1.4-1.5 ms on any of
// them at 1 thread on a Zen 5, against ORT's 1.07 ms for the same conv in NCHWc.
//
// The input image is first copied into channel-blocked zero-padded planes ([C/16][H][W][16], the
// workspace), so a tile's broadcasts over one block's 16 channels reuse the same cache lines (one a
// pixel) and read without bounds checks; the weights are repacked once per conv ([M/16][K][16] in that order) from its
// packed GEMM weights, shared by every plan that takes the path (StridedDirectCache). Output rows times
// groups of output-channel blocks split over the threads, row-major, so the first thread takes the
// top rows. The bias, FusedConv's residual and its activation (ConvPost) are applied in the store.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/conv/shared_weights.h"
#include "ops/gemm/gemm.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

struct ConvShape;
struct ConvPost;

struct StridedDirectWeights {
  int64_t M = 0, C = 0, K = 0, blocks = 0;  // K = C rounded up to cb, times kH * kW; blocks = ceil(M / 16)
  int64_t cb = 16;                           // input channels a block: 16, or C when C < 16
  // [blocks][K][16]: output channel m at block m / 16, lane m % 16; input channel c, tap (kh, kw) at
  // ((c / cb * kH + kh) * kW + kw) * cb + c % cb (the channel-blocked input's order); zeros past C and M.
  std::vector<float> w;
};

// The repacked weights of one conv, made from its packed GEMM weights on first use.
class StridedDirectCache {
 public:
  // `packed`: the conv's M x (C * kH * kW) packed GEMM weights.
  std::shared_ptr<const StridedDirectWeights> acquire(const PackedA<float>& packed, int64_t C, int64_t KH,
                                                      int64_t KW) const;

 private:
  SharedLazyWeights<StridedDirectWeights> lazy_;
};

// Whether the path can compute this conv at this tier (2-D, group 1, a stride of 2 or more on each
// axis, AVX-512 on this CPU and allowed by `isa`).
bool strided_direct_applies(const ConvShape& s, ep::IsaTier isa);
// Whether kAuto takes it: it applies, M >= 16, the kernel is wider than 1x1, and C >= 16 (a block) or
// the stride is 4 or more (AlexNet's 11x11/4 stem). Zen 5, 1 thread, alone: 3x3/2 128->128 @56x56 1.32
// ms against 1.48 on the implicit GEMM; 1x1/2 256->512 @56x56 1.46 against 1.16 (the GEMM paths win
// there).
bool strided_direct_preferred(const ConvShape& s, ep::IsaTier isa, int threads = 1);

// Bytes of workspace a call needs: one image's zero-padded input planes.
size_t strided_direct_workspace_bytes(const ConvShape& s);

// How a call cuts its work, decided from the shape once (ConvPlan holds it): output rows cut into equal
// runs of at most run_px pixels, output-channel blocks in groups of `group`, and the work items (output
// row x group) ordered row-major (the threads split the rows, each reading its part of the input) or
// group-major (they split the output channels, and a group's weights serve all its rows while they are
// in L2: where the weights are 4x the padded input or more).
struct StridedDirectPlan {
  int64_t run_px = 1, group = 2;
  bool group_major = false;
};
StridedDirectPlan strided_direct_plan(const ConvShape& s);

// y[N, M, OH, OW] = conv(x, w) + bias (bias may be null), then post's residual and activation
// (conv_post_activation) when post is given. workspace: strided_direct_workspace_bytes(s), 64-byte aligned.
void strided_direct_conv(const StridedDirectPlan& plan, const ConvShape& s, const float* x,
                         const StridedDirectWeights& w, const float* bias, float* y, ep::ThreadPool* pool,
                         const ConvPost* post, void* workspace);

}  // namespace nxrt::ops
