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
void quantize_a_row(const float* a, int64_t K, int64_t block, int64_t kpad, int8_t* out, float* sa, float* sq);
// The plain loop quantize_a_row runs for blocks [first_block, kpad / block) (all of them: the reference).
void quantize_a_row_tail(const float* a, int64_t K, int64_t block, int64_t kpad, int8_t* out, float* sa, float* sq,
                         int64_t first_block);

// Plain loops over the raw layout (double accumulation): the definition the fast path is tested against.
void matmulnbits_reference(const float* A, int64_t M, const uint8_t* B, const float* scales, const float* zps,
                           const int32_t* g_idx, int64_t K, int64_t N, int64_t bits, int64_t block, int accuracy_level,
                           const float* bias, float* Y);

// Fast path over packed weights; threads over N. force_scalar: skip the AVX2 kernels (tests).
// workspace: matmulnbits_fast_workspace(M, W, accuracy_level) bytes of scratch, or nullptr to allocate
// (the M <= 8 paths use it; larger M at accuracy 0 dequantizes panels into its own buffers).
void matmulnbits_fast(const float* A, int64_t M, const QuantWeights& W, int accuracy_level, const float* bias, float* Y,
                      ep::ThreadPool* pool, bool force_scalar = false, void* workspace = nullptr);
size_t matmulnbits_fast_workspace(int64_t M, const QuantWeights& W, int accuracy_level);

bool matmulnbits_has_avx2();

// ---- accuracy_level 4, 4-bit weights: the column-panel layout (contrib/matmul_nbits_int8.cpp) ----
// Columns in panels of 16 (N padded); a panel holds, per group of 4 k, 32 bytes: byte c*4 + t
// (c in 0..7, t in 0..3) carries code(column c, k = 4g + t) in its low nibble and code(column 8 + c,
// same k) in its high nibble, so one 32-byte load unpacks (and, shift+and) to two vectors of 8 columns
// x 4 consecutive k. Codes are the raw unsigned values; zero points live in zterm = zp * scale.
struct QuantPanels {
  int64_t K = 0, N = 0, block = 32;
  int64_t kb = 0;      // ceil(K / block)
  int64_t kpad = 0;    // kb * block
  int64_t groups = 0;  // kpad / 4
  int64_t panels = 0;  // ceil(N / 16)
  std::vector<uint8_t> data;  // panels * groups * 32
  std::vector<float> scale;   // panels * kb * 16 (0 for padding columns)
  std::vector<float> zterm;   // panels * kb * 16; empty when every block has zero point uniform_zp
  float uniform_zp = 0.f;
  bool empty() const { return data.empty(); }
};

enum class PanelIsa { kScalar, kAvx2, kVnni };

// B as in the raw layout above, bits 2 or 4.
QuantPanels pack_quant_panels(const uint8_t* B, const float* scales, const float* zps, int64_t K, int64_t N,
                              int64_t bits, int64_t block);
bool matmulnbits_has_vnni();
PanelIsa matmulnbits_best_panel_isa();
// Scratch bytes matmulnbits_panels needs for M rows (int8 A and its block scales).
size_t matmulnbits_panels_workspace(int64_t M, const QuantPanels& W);
// Y[M, N] = quant8(A) * W (+ bias): A quantized per block as quantize_a_row does, integer block dots,
// the same result as matmulnbits_reference at accuracy_level 4 up to float summation order.
// workspace: matmulnbits_panels_workspace(M, W) bytes, or nullptr to allocate.
void matmulnbits_panels(const float* A, int64_t M, const QuantPanels& W, const float* bias, float* Y,
                        ep::ThreadPool* pool, PanelIsa isa, void* workspace);

}  // namespace nxrt::ops::contrib
