// The microkernels of the column-panel MatMulNBits path (accuracy_level 4, 4-bit codes), one file per
// ISA: matmul_nbits_int8.cpp (scalar, the driver), matmul_nbits_avx2.cpp, matmul_nbits_avx512.cpp,
// matmul_nbits_amx.cpp. Internal to src/ops/contrib; the public face is contrib/matmul_nbits.h.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "nxrt/float_types.h"
#include "ops/contrib/matmul_nbits.h"
#include "ops/stream_prefetch.h"

namespace nxrt::ops::contrib {

// How far ahead of the record being read the vector tiles prefetch the weight stream: the whole
// records that cover 8 KB. The hardware prefetcher does not cross 4 KB pages; this keeps the stream
// going across them, with enough lines in flight to cover a loaded DRAM round trip at one core's share
// of the bandwidth. Zen 5, measured where the memory is the same on both sides (this machine's VM
// pages differ by up to ~40% in speed from one allocation to the next, so separate processes do not
// compare): the LM-head-shape GEMV (85 MB) against a plain read of its own packed bytes, alternated
// in one process, ran at 0.84-0.89 of the read at 4 KB, 0.92-0.95 at 8 KB and 0.91-0.96 at 16 KB
// (1 thread), 0.83-0.93 / 0.93-1.09 / 0.99-1.14 (2 threads); in the Qwen2.5-0.5B-shape decode, steps
// alternating between 4 and 8 KB in one process (prompt 512), the 8 KB steps were 2.2-5.1% faster at 2
// threads (median of the per-process medians +2.4%, 6 of 7 processes faster) and 1.3-2.2% at 1;
// 12 KB and 16 KB were no faster than 4 KB at 2 threads (the tail of each claim's prefetch lands in
// panels the other thread reads), 16 KB 1.4% slower than 8 KB at 1. The AVX2 tile on the same machine
// (NXRT_ISA=avx2): +1.4% at 1 thread, +0.4% at 2. (1536 bytes, the first figure, left the loop waiting.)
inline constexpr int64_t kPanelPrefetchBytes = 8192;
// The AVX-512 VNNI tile's one-row (decode) loop, since it sums into eight accumulators and computes a
// record in less time: 6 KB. Same decode, steps alternating between 6 and 8 KB in one process: 6 KB
// faster at 2 threads in 15 of 16 processes (median +2%), at 1 thread +1% (median of 10, 7 faster);
// 12 KB 2-6% slower than 8 at both; 4 KB within 2% of 8 at 1 thread (5 processes, no direction).
inline constexpr int64_t kPanelPrefetchBytesAvx512Decode = 6144;
inline int64_t panel_prefetch_ahead(int64_t record_bytes, int64_t bytes = kPanelPrefetchBytes) {
  return (bytes + record_bytes - 1) / record_bytes * record_bytes;
}

// Decode also starts each page of its stream kPageAheadBytes early (prefetch_pages_ahead, once per
// record, after the dense prefetch). Qwen2.5-0.5B-shape decode on the Zen 5 VM (prompt 512, steps alternating with and
// without in one process): 24% faster per step at 2 threads and 50% at 1 with the AVX-512 VNNI tile,
// 14% / 12% with the AVX2 one; 16, 32 and 64 KB ahead, and T0 / T1 / NTA, within 0.6% of each other.

// One call's rows of quantized A against one panel of W.
struct PanelTile {
  const int8_t* a = nullptr;  // rows of int8 A, lda apart (kpad values each, zero past K)
  int64_t lda = 0;
  const float* sa = nullptr;  // per row and block: A's block scale
  const float* sq = nullptr;  // per row and block: A's block scale * sum of the block's int8 values
  int64_t lds = 0;
  const uint8_t* panel = nullptr;  // the panel's kb records
  float* y = nullptr;              // rows x ncols outputs, ldy apart
  int64_t ldy = 0;
  int64_t rows = 0, ncols = 0;
  // Multi-row tiles: prefetch the panel ahead of the records read. The driver asks only the first row
  // tile of a pass over A's rows; the later ones find the panel in L1/L2 (the prefetch loop cost the
  // 512-row products 1.5-3% on a Zen 5, alternated runs).
  bool prefetch_panel = true;
};

// rows <= 1 (any panel width; also the reference the vector tiles are compared with).
void qd8_f32_qb4w_gemm_1x16__scalar(const QuantPanels& W, const PanelTile& t);
// rows <= 2, 16-column panels.
void qd8_f32_qb4w_gemm_2x16__avx2(const QuantPanels& W, const PanelTile& t);
// rows <= 4, the AVX2 tile's 16-column panels and bits with AVX-VNNI (cpu_has_avx_vnni() CPUs only).
void qd8_f32_qb4w_gemm_4x16__avxvnni(const QuantPanels& W, const PanelTile& t);
// rows <= 4, 32-column panels.
void qd8_f32_qb4w_gemm_4x32__avx512vnni(const QuantPanels& W, const PanelTile& t);

// AMX: panels [p0, p1) of W against all M rows of A (a: M rounded up to 32 rows, the padding rows
// zero). Configures the tiles on the calling thread and releases them before returning. Each row's
// result has the same bits as the AVX512-VNNI tile's (the kAmxMinRows switch is batch-invariant).
// terms: amx_row_terms' table for A's rows. Panels are unpacked `group` at a time (amx_panel_group)
// into `scratch`: amx_unpack_scratch_bytes(W, group) bytes, 64-byte aligned, the calling thread's own.
// Y holds columns [y_col0, y_col0 + ldy) of the product (y_col0 a multiple of 32, the panels' first).
void qd8_f32_qb4w_gemm_32x32__amx(const QuantPanels& W, const int8_t* a, int64_t lda, const float* terms, int64_t M,
                                  int64_t p0, int64_t p1, float* Y, int64_t ldy, int64_t group, uint8_t* scratch,
                                  int64_t y_col0 = 0);
// The same kernel with its tile instructions emulated in scalar code (PanelKernel::kAmxEmulated: for
// tests on AVX-512 machines without AMX; same results, far slower). Needs no tile permission.
void qd8_f32_qb4w_gemm_32x32__amx_emulated(const QuantPanels& W, const int8_t* a, int64_t lda, const float* terms,
                                           int64_t M, int64_t p0, int64_t p1, float* Y, int64_t ldy, int64_t group,
                                           uint8_t* scratch, int64_t y_col0 = 0);

// Panels the AMX kernel unpacks together: the group's tiles stay in L2 (about 512 KB).
inline int64_t amx_panel_group(const QuantPanels& W) {
  const int64_t panel_code_bytes = W.kpad * 32;
  const int64_t g = (512 * 1024) / (panel_code_bytes > 0 ? panel_code_bytes : 1);
  return g < 1 ? 1 : g > W.panels && W.panels > 0 ? W.panels : g;
}
// Scratch for `group` unpacked panels: codes, then scales and (zero-point table) zero terms, each
// 64-byte aligned.
inline size_t amx_unpack_scratch_bytes(const QuantPanels& W, int64_t group) {
  auto up = [](size_t b) { return (b + 63) / 64 * 64; };
  const size_t codes = static_cast<size_t>(group * W.kpad * 32);
  const size_t scales = static_cast<size_t>(group * W.kb * 32) * sizeof(float);
  return up(codes) + up(scales) * (W.zp_table ? 2 : 1);
}

// The per-row block terms the AMX fold reads, per 32-row block of A (padding rows zero): [kb][32] A
// block scales, then [kb][32] of uniform_zp * (scale * sum) (the very product the VNNI tile takes) or,
// with a zero-point table, scale * sum. sa / sq: [rows][kb] as quantize_a_row writes them.
void amx_row_terms(const QuantPanels& W, const float* sa, const float* sq, int64_t M, int64_t rows, float* terms);
inline size_t amx_row_terms_floats(const QuantPanels& W, int64_t rows) { return static_cast<size_t>(2 * rows * W.kb); }

// Fewer rows than this go to the AVX512-VNNI tile even when AMX is chosen: a 16-row tile computes its
// padding rows too, and a decode step is bound by reading the weights, not by arithmetic.
constexpr int64_t kAmxMinRows = 8;

// Calls body(fp16, zp_table) with W's record format as two std::bool_constant, so a vector tile is
// instantiated once per format.
template <typename F>
void with_record_format(const QuantPanels& W, F&& body) {
  if (W.fp16_scales) {
    if (W.zp_table) body(std::true_type{}, std::true_type{}); else body(std::true_type{}, std::false_type{});
  } else {
    if (W.zp_table) body(std::false_type{}, std::true_type{}); else body(std::false_type{}, std::false_type{});
  }
}

// Block scale of column c in record `rec`.
inline float panel_scale(const QuantPanels& W, const uint8_t* rec, int64_t c) {
  const uint8_t* s = rec + W.scale_offset;
  if (W.fp16_scales) {
    uint16_t h;
    std::memcpy(&h, s + 2 * c, 2);
    return half_to_float(h);
  }
  float f;
  std::memcpy(&f, s + 4 * c, 4);
  return f;
}

}  // namespace nxrt::ops::contrib
