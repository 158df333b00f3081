// Winograd F(4x4, 3x3) convolution for float 2-D convs with a 3x3 kernel, stride 1, dilation 1, group 1
// (any pads, any batch): the Conv engine's kWinograd path (winograd_preferred says when kAuto picks it).
//
//   Y = A^T [ (G g G^T) (.) (B^T d B) ] A      per 6x6 input tile d -> 4x4 output tile, per (Cout, Cin)
//
// Interpolation points 0, +-1, +-2 and infinity (the usual matrices of Lavin & Gray). The element-wise
// products summed over input channels become 36 GEMMs, one per transform-domain point xi:
//   M_xi[Cout x tiles] = U_xi[Cout x Cin] * V_xi[Cin x tiles]
// U_xi (the transformed weights) is prepared once and stored as packed left GEMM operands (PackedA<float>),
// so the calls run straight on the shared float GEMM engine (ops/gemm/gemm.h).
//
// Work is cut into blocks of whole tile rows (across the batch) sized so the transformed input and the
// GEMM results of a block stay near L2. Blocks are split over the threads when there are enough of them;
// otherwise each block's three phases (input transform over channels, GEMMs over xi, output transform
// over output channels) are split. The transforms are AVX-512 (16 tiles a vector) or AVX2+FMA (8 tiles),
// chosen from the tier when the plan is made (WinogradPlan::transforms; vector code only where the GEMM
// kernels are vector code, see gemm_vector_kernels), with a portable scalar fallback.
//
// Accuracy: the F(4,3) transforms scale values by up to ~10 (the +-2 points), so the result's error is
// larger than that of direct fp32 summation: max error 2e-5..6e-5 of the output's rms on random data
// (im2col + GEMM: ~2e-6), measured in tests/unit/test_conv_winograd.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "nxrt/dims.h"
#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ops/conv/shared_weights.h"
#include "ops/gemm/activation.h"
#include "ops/gemm/gemm.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

struct ConvShape;

struct WinogradWeights {
  int64_t M = 0, C = 0;
  std::vector<PackedA<float>> u;  // 36 packed M x C operands, xi = 6 * row + col of the 6x6 transform domain
  bool empty() const { return u.empty(); }
};

// Whether weights of this shape and group can serve the Winograd path (4-D, 3x3, group 1).
bool winograd_weights_apply(const Dims& w_shape, int64_t group);

// Transforms w (M x C x 3 x 3, row-major).
void winograd_prepare(int64_t M, int64_t C, const float* w, WinogradWeights* out);

// The transformed weights of one conv, made from the conv's packed GEMM weights when a plan that takes
// the path is made (conv_plan, at specialize) and shared by every live plan that takes it: they go
// with the last such plan (evicted variants free them), so convs that never take the path (stride
// known only at run time, outputs too small) keep only their 1x packed copy instead of the 4x
// transformed one. Not in the kernel at creation for that reason, and not per plan so that several
// shapes of one conv share one copy.
class WinogradCache {
 public:
  // `packed`: the M x (C * 9) weights packed by pack_a (scale 1), the same every call. Thread-safe.
  std::shared_ptr<const WinogradWeights> acquire(const PackedA<float>& packed, int64_t M, int64_t C) const;

 private:
  SharedLazyWeights<WinogradWeights> lazy_;
};

// Transformed weight sets alive now (all convs): what tests watch to see eviction free them.
int64_t winograd_weights_live();

// Whether the path can compute this conv (2-D, 3x3, stride 1, dilation 1, group 1).
bool winograd_applies(const ConvShape& s);

// Whether it is expected to beat im2col + GEMM on this shape (the kAuto rule; see the .cpp).
bool winograd_preferred(const ConvShape& s);

// Everything winograd_conv decides from the shape, the pool size and the tier: the tiling, the block
// size and count, how the work splits over threads, the buffer sizes, and the row offsets the in-place
// products read. Made once per shape (ConvPlan holds one, made when the conv's variant specializes);
// immutable afterwards, so concurrent calls share it.
struct WinogradPlan {
  int64_t N = 0, C = 0, M = 0, IH = 0, IW = 0, OH = 0, OW = 0, pt = 0, pl = 0;  // pt/pl: top/left pads
  int64_t TH = 0, TW = 0;                 // tiles per image (4x4 outputs each)
  int64_t total_rows = 0;                 // N * TH tile rows
  int64_t rows_per_block = 1, nblocks = 0;  // the larger block size: blocks of it or one row fewer, spread evenly
  int threads = 1;                        // 1: the calling thread does it all (small problems)
  bool split_blocks = false;              // threads take whole blocks (else each block's phases split)
  int64_t ld = 0, cstride = 0, mstride = 0;
  size_t v_floats = 0, m_floats = 0, in_floats = 0;  // per-thread buffers (transformed input, products, input rows)
  // Not strips: the products' GEMM plans (a full block's columns and the last block's; single-threaded,
  // each product runs on the thread that holds its block or phase) and their packing scratch (the larger
  // scratch_floats of the two).
  GemmPlan gemm, gemm_last;
  size_t gemm_floats = 0;
  // Each thread's slot of scratch (winograd_conv's `slots`, ThreadPool::slot()) holds those four
  // buffers: V at 0, then the products, input rows and GEMM scratch at these offsets (floats, 64-byte
  // aligned).
  size_t m_off = 0, in_off = 0, gemm_off = 0;
  size_t slot_floats = 0;
  size_t slot_bytes() const { return slot_floats * sizeof(float); }
  ep::IsaTier isa = ep::IsaTier::kScalar;
  // The input and output transforms' code, chosen from the tier when the plan is made: scalar, AVX2 (8
  // tiles a vector) or AVX-512 (16 tiles a vector, masked tails). The two vector variants do the same
  // operations per element, so their results are bit-identical.
  enum class Transforms : uint8_t { kScalar, kAvx2, kAvx512 };
  Transforms transforms = Transforms::kScalar;
  bool strips = false;                    // products read V in place through row_offsets
  std::vector<int64_t> row_offsets;       // strips: c * ld per input channel
};

// The plan of winograd_conv for `s` (winograd_applies(s)) run on a pool of `pool_threads` threads.
// `block_tiles` > 0 forces the tiles per block (tests and tuning; 0: the sizing rule).
WinogradPlan winograd_plan(const ConvShape& s, int pool_threads, ep::IsaTier isa = ep::cpu_isa_tier(),
                           int64_t block_tiles = 0);

// What the output transform applies after the bias (FusedConv's epilogue, the conv engine's ConvPost
// without a pre-activation): y = act(conv + bias + residual), residual (may be null) shaped like y, act
// one of ConvPost's (winograd_post_applies). Per element: (v + bias) + residual, then the activation as
// activation_of defines it, in every variant of the transforms.
struct WinogradPost {
  const float* residual = nullptr;
  Activation act = Activation::kNone;
  float act_a = 0.f, act_b = 0.f;  // Clip's min and max; LeakyRelu's slope in act_a
};
inline bool winograd_post_applies(Activation a) {
  return a == Activation::kNone || a == Activation::kRelu || a == Activation::kClip || a == Activation::kLeakyRelu;
}

// y[N, M, OH, OW] = conv(x, w) + bias (bias may be null), as `p` plans it; w prepared for p.M x p.C; then
// `post` when given (winograd_post_applies(post->act)).
// The transforms run p.transforms' code and the products the GEMM kernels at p.isa.
// `slots`: p.slot_bytes() for each thread of the pool (KernelContext::thread_slots; ConvPlan::slot_bytes);
// none, or fewer than the pool's threads: heap scratch of its own.
void winograd_conv(const WinogradPlan& p, const float* x, const WinogradWeights& w, const float* bias, float* y,
                   ep::ThreadPool* pool, const ep::SlotMemory& slots, const WinogradPost* post = nullptr);

// Plans and runs in one call (tests, benchmarks).
void winograd_conv(const ConvShape& s, const float* x, const WinogradWeights& w, const float* bias, float* y,
                   ep::ThreadPool* pool, ep::IsaTier isa = ep::cpu_isa_tier(), int64_t block_tiles = 0);


}  // namespace nxrt::ops
