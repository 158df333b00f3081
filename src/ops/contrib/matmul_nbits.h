// com.microsoft MatMulNBits: Y[M,N] = A[M,K] * dequant(B)^T (+ bias), B block-quantized along K.
//
// Raw (ONNX) layout, as the model stores it:
//   B      uint8 [N, k_blocks, blob], blob = block * bits / 8; element k of a block sits at bit
//          (k * bits) of the blob, low bits first.
//   scales [N * k_blocks] (decoded to float by the kernel)
//   zero points, decoded to one float per (n, block) (default 2^(bits-1)).
//   g_idx  (deprecated) int32 [K]: block index of element k; nullptr = k / block.
// accuracy_level 4 quantizes each block of A to int8 (scale = absmax / 127, round half even) and
// takes integer dot products; every other level computes in float.
//
// The fast path runs on a prepacked copy of B (QuantWeights) built once per kernel when B is a
// constant: 4-bit (and 2-bit, widened to 4) weights as nibbles in 32-element chunks (byte j holds
// element j low and element j + 16 high), 8-bit weights as signed bytes (value - 128).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ops/packed_storage.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops::contrib {

// Code kk of a raw blob (bits per code, low bits first).
inline int raw_code(const uint8_t* blob, int64_t kk, int64_t bits) {
  const int64_t bit = kk * bits;
  return (blob[bit >> 3] >> (bit & 7)) & ((1 << bits) - 1);
}

struct QuantWeights {
  int64_t K = 0, N = 0, bits = 4, block = 32;
  int64_t kblocks = 0;   // ceil(K / block)
  int64_t kpad = 0;      // elements per row in the packed layout: multiple of 32, >= kblocks * block
  int64_t kb = 0;        // kpad / block: blocks per packed row (>= kblocks; extra ones have scale 0)
  int64_t row_bytes = 0; // packed bytes per n
  std::vector<uint8_t> data;  // N * row_bytes
  std::vector<float> scale;   // N * kb
  std::vector<float> zterm;   // N * kb: (zero_point - storage offset) * scale
  bool empty() const { return data.empty(); }
};

// Packs raw B (see above). zps: N * kblocks effective zero points (float).
QuantWeights pack_quant_weights(const uint8_t* B, const float* scales, const float* zps, int64_t K, int64_t N,
                                int64_t bits, int64_t block);

// Quantizes one row of A ([K] floats) per block to int8 exactly as both kernels do. out: kpad
// int8 (zero past K); sa[kb]: block scales; sq[kb]: block scale * sum of the block's int8 values.
// Every tier gives the same bits (the AVX2 body a block at a time and the AVX-512 one 16 blocks at a
// time do the plain loop's arithmetic).
void quantize_a_row(const float* a, int64_t K, int64_t block, int64_t kpad, int8_t* out, float* sa, float* sq,
                    ep::IsaTier isa = ep::cpu_isa_tier());
// The plain loop quantize_a_row runs for blocks [first_block, kpad / block) (all of them: the reference).
void quantize_a_row_tail(const float* a, int64_t K, int64_t block, int64_t kpad, int8_t* out, float* sa, float* sq,
                         int64_t first_block);

// Plain loops over the raw layout (double accumulation): the definition the fast path is tested against.
void matmulnbits_reference(const float* A, int64_t M, const uint8_t* B, const float* scales, const float* zps,
                           const int32_t* g_idx, int64_t K, int64_t N, int64_t bits, int64_t block, int accuracy_level,
                           const float* bias, float* Y);

// What the fast path decides for M rows of A on W: the tiling (prefill panels or decode rows, the work
// split) and its scratch, the prepared A then `slots` slots of per-thread scratch (a task's dequantized
// panel, or the int8 rows' scale products), one per pool thread (ThreadPool::slot()). The MatMulNBits
// kernel makes it once per shape at specialize (its variant); matmulnbits_fast makes it per call.
struct NBitsFastPlan {
  int64_t M = 0;
  bool int8 = false;      // accuracy_level 4: int8 A, integer dots
  bool prefill = false;   // float and M > 8: dequantize panels of panel_cols rows of W, float GEMM on each
  bool use_avx2 = false;
  ep::IsaTier isa = ep::IsaTier::kScalar;
  int64_t panel_cols = 64;
  int64_t panels = 0;     // prefill: ceil(N / panel_cols)
  int64_t grain = 1;      // parallel_for grain: panels (prefill) or columns of Y (decode rows)
  size_t prepared_bytes = 0;  // the prepared A (decode rows), a multiple of 64
  size_t slot_bytes = 0;      // per-thread scratch (0: none)
  int slots = 1;
  // prepared_bytes + slots slots of slot_bytes (each 64-byte aligned).
  size_t workspace_bytes() const;
};
NBitsFastPlan matmulnbits_fast_plan(int64_t M, const QuantWeights& W, int accuracy_level, ep::IsaTier isa, int threads);
// workspace: plan.workspace_bytes() (64-byte aligned), or nullptr to allocate. A pool with more threads
// than plan.slots runs on scratch allocated here (no two threads ever share a slot).
void matmulnbits_fast_run(const NBitsFastPlan& plan, const float* A, const QuantWeights& W, const float* bias,
                          float* Y, ep::ThreadPool* pool, void* workspace);

// Fast path over packed weights; threads over N. isa: the highest tier the kernels may use (kScalar runs
// the plain loops; the row kernels have AVX2 bodies, which every tier above takes). The plan for the
// pool's threads, then matmulnbits_fast_run (workspace: that plan's workspace_bytes(), or nullptr).
void matmulnbits_fast(const float* A, int64_t M, const QuantWeights& W, int accuracy_level, const float* bias, float* Y,
                      ep::ThreadPool* pool, ep::IsaTier isa = ep::cpu_isa_tier(), void* workspace = nullptr);

bool matmulnbits_has_avx2();

// ---- accuracy_level 4, 4-bit (and 2-bit) weights: the column-panel layout (matmul_nbits_int8.cpp) ----
// Columns in panels of `cols` (16 for the AVX2 and scalar kernels, 32 for AVX-512 and AMX; N padded).
// A panel is kb records, one per block of K, each 64-byte aligned for 32 columns and 32-byte aligned for
// 16 (the widest load of the kernel that reads it), read front to back:
//   codes   block / 4 groups of cols * 2 bytes: group g holds k = 4g..4g+3; byte c*4 + t (c < cols/2,
//           t < 4) carries code(column c, k = 4g + t) in its low nibble and code(column cols/2 + c,
//           same k) in its high nibble, so one load unpacks (and, shift+and) to two vectors whose 32-bit
//           lanes each hold 4 consecutive k of one column (vpdpbusd's and AMX's B layout).
//   scales  cols block scales, fp16 when every scale of the matrix converts to fp16 and back unchanged
//           (the packed copy then reads 2 bytes per block instead of 4, with the same values), else fp32
//   zps     cols zero-point bytes, only when the zero points differ between blocks (else uniform_zp)
// Codes are the raw unsigned values; padding columns have scale 0 and zero point 0.
struct QuantPanels {
  int64_t K = 0, N = 0, block = 32;
  int64_t kb = 0;       // ceil(K / block)
  int64_t kpad = 0;     // kb * block
  int64_t cols = 16;    // columns per panel: 16 or 32
  int64_t panels = 0;   // ceil(N / cols)
  int64_t group_bytes = 0, scale_offset = 0, zp_offset = 0, record_bytes = 0;
  bool fp16_scales = false;
  bool zp_table = false;  // false: every code's zero point is uniform_zp
  float uniform_zp = 0.f;
  PackedBytes data;     // panels * kb * record_bytes
  bool empty() const { return data.empty(); }
  const uint8_t* panel(int64_t p) const { return data.data() + p * kb * record_bytes; }
  // Bytes a pass over all weights reads (codes, scales, zero points).
  size_t bytes() const { return data.size(); }
};

// B as in the raw layout above, bits 2 or 4; block a power of 2 >= 16 (as MatMulNBits requires); cols
// 16 or 32 (panel_kernel_cols(kernel)).
QuantPanels pack_quant_panels(const uint8_t* B, const float* scales, const float* zps, int64_t K, int64_t N,
                              int64_t bits, int64_t block, int64_t cols = 16);

// The microkernels over QuantPanels, named by operation, tile and ISA in XNNPACK's manner: qd8 = int8
// activations quantized per block at run time, f32 = float output, qb4w = block-quantized 4-bit weights;
// MRxNR = rows of A x columns per call. The AMX kernel takes prefill (many rows); fewer rows than
// amx_min_rows go to the AVX512-VNNI tile. kAmxEmulated is the AMX kernel with its tile instructions
// carried out in scalar code: never chosen (choose_panel_kernel), it lets the tests run everything else of
// the AMX path (unpacking, tile addressing, folding, the driver's AMX loops) on AVX-512 machines without AMX.
// kAvxVnni is the AVX2 tile with AVX-VNNI's vpdpbusd (same panels and bits; listed last so the earlier
// kernels keep their positions in panel_kernels()).
enum class PanelKernel { kScalar, kAvx2, kAvx512Vnni, kAmx, kAmxEmulated, kAvxVnni };
struct PanelKernelInfo {
  PanelKernel kernel;
  const char* name;   // e.g. "qd8_f32_qb4w_gemm_4x32__avx512vnni"
  int64_t cols;       // the panel width it reads
  ep::IsaTier tier;   // the lowest tier that may choose it
};
const std::vector<PanelKernelInfo>& panel_kernels();  // every kernel, scalar first
const PanelKernelInfo& panel_kernel_info(PanelKernel k);
// Whether this CPU (and OS, for AMX) can run the kernel.
bool panel_kernel_supported(PanelKernel k);
// The kernel a MatMulNBits of tier `tier` uses on this CPU: AMX when the tier allows it and the OS
// granted the tiles (else AVX512-VNNI, and the refusal is printed once), AVX512-VNNI at the avx512
// tier when the CPU has VNNI (else AVX2), AVX2 (its AVX-VNNI form where the CPU has AVX-VNNI), scalar.
PanelKernel choose_panel_kernel(ep::IsaTier tier);

// What the panel path decides for M rows of A on W: the microkernel (AMX only from kAmxMinRows rows),
// the tiling (rows per pass, panels per task) and its scratch: the quantized A (int8 rows, block
// scales, AMX row terms), then `slots` slots of per-thread scratch (AMX: a task's group of unpacked
// panels). Made once per shape by MatMulNBits' specialize, or per call by matmulnbits_panels.
struct NBitsPanelsPlan {
  int64_t M = 0;
  PanelKernel kernel = PanelKernel::kScalar;  // the one that runs (kAmx or kAmxEmulated only when amx)
  bool amx = false;
  int64_t rows = 0;        // A's rows in the workspace (M, or rounded up to whole 32-row AMX tiles)
  int64_t mr = 1;          // rows per microkernel call
  int64_t mc = 1;          // rows of A per pass over a task's panels
  int64_t grain = 1;       // panels per task
  int64_t amx_group = 0;   // AMX: panels unpacked together
  bool silu_mul = false;   // the gate/up pair layout (matmulnbits_panels_silu_mul_run)
  size_t a_bytes = 0;      // the quantized A, a multiple of 64
  size_t product_bytes = 0;  // silu_mul on AMX: the [M, W.N] product (0: none), after A
  size_t slot_bytes = 0;   // per-thread scratch (0: none): AMX's unpacked panels, or silu_mul's tiles
  int slots = 1;
  size_t workspace_bytes() const;
};
NBitsPanelsPlan matmulnbits_panels_plan(int64_t M, const QuantPanels& W, PanelKernel kernel, int threads,
                                        bool silu_mul = false);
// Y's columns written to several outputs instead (nxrt::MatMulNBitsSplit): columns [first[i],
// first[i + 1]) go to outputs[i], a row-major [M, first[i + 1] - first[i]] matrix. first[0] = 0,
// first[count] = N, and every first[i] is a multiple of W.cols, so that each panel has one output.
struct NBitsColumnSplit {
  const int64_t* first = nullptr;  // count + 1 offsets
  float* const* outputs = nullptr;
  int count = 0;
  bool fits(const QuantPanels& W) const;  // the offsets are panel boundaries of W
};
// Y[M, N] = quant8(A) * W (+ bias): A quantized per block as quantize_a_row does, integer block dots,
// the same result as matmulnbits_reference at accuracy_level 4 up to float summation order.
// plan.kernel must read W's panel width; workspace: plan.workspace_bytes() (64-byte aligned), or
// nullptr to allocate. A pool with more threads than plan.slots runs on scratch allocated here.
// split: Y's columns go to split->outputs (Y unused, split->fits(W)); bias, when given, holds all N
// values and each output gets its columns' share.
void matmulnbits_panels_run(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias,
                            float* Y, ep::ThreadPool* pool, void* workspace, const NBitsColumnSplit* split = nullptr);
// nxrt::MatMulNBitsSiluMul: W stacks a gate and an up matrix of N = W.N / 2 columns each panel by panel
// (panel 2q: gate columns [q * cols, (q + 1) * cols); panel 2q + 1: up's same columns; N % cols == 0),
// so that one task holds both halves of its outputs. Y[M, N] = Swish(A*Wg + bias_g) * (A*Wu + bias_u):
// each half as matmulnbits_panels_run computes it (the same tiles and bits), bias (when given: W.N
// values in W's column order) added as its Add did, then silu_mul_f32 (avx512: the kernel's tier) on the
// task's own columns, so neither half is written to memory whole. plan: made with silu_mul = true.
void matmulnbits_panels_silu_mul_run(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias,
                                     float* Y, ep::ThreadPool* pool, void* workspace, bool avx512);
// The packed bytes the pool's worker streams first when matmulnbits_panels_run (or, for a plan made
// with silu_mul, matmulnbits_panels_silu_mul_run) runs `plan` with one row of A (a decode GEMV) on a
// pool of plan.slots threads: the head of its first claim, at most max_bytes. {nullptr, 0} when
// nothing is fixed (more rows, AMX, a pool size whose workers' first chunks are not known).
ep::WorkerPrefetch matmulnbits_panels_worker_head(const NBitsPanelsPlan& plan, const QuantPanels& W, size_t max_bytes);
// The plan for the pool's threads, then matmulnbits_panels_run.
void matmulnbits_panels(const float* A, int64_t M, const QuantPanels& W, const float* bias, float* Y,
                        ep::ThreadPool* pool, PanelKernel kernel, void* workspace = nullptr);

}  // namespace nxrt::ops::contrib
