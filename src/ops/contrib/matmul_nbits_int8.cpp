// MatMulNBits at accuracy_level 4 for 4-bit (and 2-bit) weights: int8 activations times weight codes
// in column panels, one layout for decode (M = 1) and prefill (M in the hundreds). This file packs the
// panels, holds the scalar tile, the table of microkernels and the driver; the vector tiles live in
// matmul_nbits_{avx2,avx512,amx}.cpp.
//
// Why panels: a row layout (contrib/matmul_nbits.cpp) dots one weight row with one A row, so every
// block's partial sum sits across the lanes of a vector and costs a convert, a scale and finally a
// horizontal add per (row, column). Here a vector's 32-bit lanes are output columns, each holding 4
// consecutive k of its column; an A quad is broadcast and vpdpbusd (or vpmaddubsw on plain AVX2)
// accumulates a vector of columns at once, the float work per block is a few vector ops per vector of
// columns, and a loaded weight vector serves MR rows of A. The same bytes are AMX's B-tile rows once
// the nibbles are split. See contrib/matmul_nbits.h for the layout.
#include <algorithm>
#include <cassert>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ep/cpu_features.h"
#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "nxrt/float_types.h"
#include "ops/contrib/matmul_nbits.h"
#include "ops/contrib/matmul_nbits_panel_kernels.h"
#include "ops/elementwise/silu_mul.h"

namespace nxrt::ops::contrib {

// ---- packing ----------------------------------------------------------------------------------

QuantPanels pack_quant_panels(const uint8_t* B, const float* scales, const float* zps, int64_t K, int64_t N,
                              int64_t bits, int64_t block, int64_t cols) {
  // MatMulNBits' block sizes; the tiles read a block's codes four 64-byte groups at a time.
  assert(block >= 16 && (block & (block - 1)) == 0);
  QuantPanels W;
  W.K = K;
  W.N = N;
  W.block = block;
  W.kb = (K + block - 1) / block;
  W.kpad = W.kb * block;
  W.cols = cols;
  W.panels = (N + cols - 1) / cols;
  const int64_t count = N * W.kb;
  // fp16 scales only when that loses nothing: every scale converts to fp16 and back unchanged.
  bool fp16 = count > 0;
  for (int64_t i = 0; i < count && fp16; ++i) {
    const float s = scales[i];
    fp16 = float_bits(half_to_float(float_to_half(s))) == float_bits(s);
  }
  bool uniform = count > 0;
  for (int64_t i = 1; i < count && uniform; ++i) uniform = zps[i] == zps[0];
  W.fp16_scales = fp16;
  W.zp_table = !uniform;
  W.uniform_zp = uniform ? zps[0] : 0.f;
  W.group_bytes = cols * 2;
  W.scale_offset = block / 4 * W.group_bytes;
  W.zp_offset = W.scale_offset + cols * (fp16 ? 2 : 4);
  // Records start 64-byte aligned for the 32-column tiles (the AVX-512 and AMX kernels read a record in
  // 64-byte lines); the 16-column tiles load 32 bytes at a time and need 32. Rounding those to 64 too
  // made an fp16-scale record of block 32 as long as an fp32 one (288 -> 320 bytes), so their decode
  // read the fp32 layout's bytes.
  const int64_t align = cols >= 32 ? 64 : 32;
  W.record_bytes = (W.zp_offset + (W.zp_table ? cols : 0) + align - 1) / align * align;
  W.data = PackedBytes(static_cast<size_t>(W.panels * W.kb * W.record_bytes));
  const int64_t blob = block * bits / 8;
  const int64_t half = cols / 2;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t p = n / cols, c = n % cols, lane = c % half;
    const int shift = c < half ? 0 : 4;
    for (int64_t j = 0; j < W.kb; ++j) {
      uint8_t* rec = W.data.data() + (p * W.kb + j) * W.record_bytes;
      const uint8_t* bl = B + (n * W.kb + j) * blob;
      const int64_t kend = std::min(block, K - j * block);
      int64_t kk = 0;
      if (bits == 4) {
        // Four codes (two blob bytes) fill one column's 4 bytes of a group: no per-element index math.
        for (; kk + 4 <= kend; kk += 4) {
          const uint8_t b0 = bl[kk / 2], b1 = bl[kk / 2 + 1];
          uint8_t* d = rec + (kk / 4) * W.group_bytes + lane * 4;
          d[0] = static_cast<uint8_t>(d[0] | ((b0 & 15) << shift));
          d[1] = static_cast<uint8_t>(d[1] | ((b0 >> 4) << shift));
          d[2] = static_cast<uint8_t>(d[2] | ((b1 & 15) << shift));
          d[3] = static_cast<uint8_t>(d[3] | ((b1 >> 4) << shift));
        }
      }
      for (; kk < kend; ++kk) {
        uint8_t* d = rec + (kk / 4) * W.group_bytes + lane * 4 + kk % 4;
        *d = static_cast<uint8_t>(*d | (raw_code(bl, kk, bits) << shift));
      }
      const float s = scales[n * W.kb + j];
      if (fp16) {
        const uint16_t h = float_to_half(s);
        std::memcpy(rec + W.scale_offset + 2 * c, &h, 2);
      } else {
        std::memcpy(rec + W.scale_offset + 4 * c, &s, 4);
      }
      if (W.zp_table) rec[W.zp_offset + c] = static_cast<uint8_t>(zps[n * W.kb + j]);
    }
  }
  return W;
}

// ---- the scalar tile --------------------------------------------------------------------------

// Same arithmetic as the vector tiles: exact int32 block dots, then the float scale / zero-point
// terms in the same order. Any panel width, any number of rows.
void qd8_f32_qb4w_gemm_1x16__scalar(const QuantPanels& W, const PanelTile& t) {
  const int64_t cols = W.cols, half = cols / 2, gpb = W.block / 4;
  for (int64_t r = 0; r < t.rows; ++r) {
    float f[32] = {};
    for (int64_t b = 0; b < W.kb; ++b) {
      const uint8_t* rec = t.panel + b * W.record_bytes;
      int32_t acc[32] = {};
      for (int64_t g = 0; g < gpb; ++g) {
        const uint8_t* wg = rec + g * W.group_bytes;
        const int8_t* ag = t.a + r * t.lda + b * W.block + g * 4;
        for (int64_t c = 0; c < cols; ++c) {
          const int shift = c < half ? 0 : 4;
          for (int q = 0; q < 4; ++q) acc[c] += ((wg[(c % half) * 4 + q] >> shift) & 15) * ag[q];
        }
      }
      const float sar = t.sa[r * t.lds + b], sqr = t.sq[r * t.lds + b];
      for (int64_t c = 0; c < cols; ++c) {
        const float s = panel_scale(W, rec, c);
        if (W.zp_table) {
          const float zterm = static_cast<float>(rec[W.zp_offset + c]) * s;
          f[c] = f[c] + static_cast<float>(acc[c]) * (s * sar) - zterm * sqr;
        } else {
          f[c] = f[c] + s * (static_cast<float>(acc[c]) * sar - W.uniform_zp * sqr);
        }
      }
    }
    std::memcpy(t.y + r * t.ldy, f, static_cast<size_t>(t.ncols) * sizeof(float));
  }
}

// ---- the table of kernels ---------------------------------------------------------------------

const std::vector<PanelKernelInfo>& panel_kernels() {
  static const std::vector<PanelKernelInfo> k = {
      {PanelKernel::kScalar, "qd8_f32_qb4w_gemm_1x16__scalar", 16, ep::IsaTier::kScalar},
      {PanelKernel::kAvx2, "qd8_f32_qb4w_gemm_2x16__avx2", 16, ep::IsaTier::kAvx2},
      {PanelKernel::kAvx512Vnni, "qd8_f32_qb4w_gemm_4x32__avx512vnni", 32, ep::IsaTier::kAvx512},
      {PanelKernel::kAmx, "qd8_f32_qb4w_gemm_32x32__amx", 32, ep::IsaTier::kAmx},
      // Never chosen (tests only); its tier is the one whose kernel it stands in for.
      {PanelKernel::kAmxEmulated, "qd8_f32_qb4w_gemm_32x32__amx_emulated", 32, ep::IsaTier::kAmx},
      // The AVX2 tile with AVX-VNNI (same panels, same bits), chosen at the AVX2 tier where the CPU has it.
      {PanelKernel::kAvxVnni, "qd8_f32_qb4w_gemm_4x16__avxvnni", 16, ep::IsaTier::kAvx2},
  };
  return k;
}

const PanelKernelInfo& panel_kernel_info(PanelKernel k) { return panel_kernels()[static_cast<size_t>(k)]; }

bool panel_kernel_supported(PanelKernel k) {
  const ep::IsaTier cpu = ep::cpu_isa_tier();
  switch (k) {
    case PanelKernel::kScalar: return true;
    case PanelKernel::kAvx2: return cpu >= ep::IsaTier::kAvx2 && ep::cpu_has_f16c();
    case PanelKernel::kAvxVnni: return panel_kernel_supported(PanelKernel::kAvx2) && ep::cpu_has_avx_vnni();
    case PanelKernel::kAvx512Vnni: return cpu >= ep::IsaTier::kAvx512 && ep::cpu_has_avx512_vnni() && ep::cpu_has_f16c();
    case PanelKernel::kAmx:
      return cpu >= ep::IsaTier::kAmx && panel_kernel_supported(PanelKernel::kAvx512Vnni) && ep::amx_tiles_usable();
    case PanelKernel::kAmxEmulated:  // the AVX-512 code around the tiles, and the VNNI tile under kAmxMinRows rows
      return panel_kernel_supported(PanelKernel::kAvx512Vnni);
  }
  return false;
}

PanelKernel choose_panel_kernel(ep::IsaTier tier) {
  if (tier >= ep::IsaTier::kAmx && ep::cpu_isa_tier() >= ep::IsaTier::kAmx) {
    if (panel_kernel_supported(PanelKernel::kAmx)) return PanelKernel::kAmx;
    static const bool said = [] {
      std::fprintf(stderr, "nxrt: MatMulNBits uses AVX512-VNNI instead of AMX: %s\n",
                   ep::amx_unavailable_reason().c_str());
      return true;
    }();
    (void)said;
  }
  if (tier >= ep::IsaTier::kAvx512 && panel_kernel_supported(PanelKernel::kAvx512Vnni)) return PanelKernel::kAvx512Vnni;
  if (tier >= ep::IsaTier::kAvx2 && panel_kernel_supported(PanelKernel::kAvxVnni)) return PanelKernel::kAvxVnni;
  if (tier >= ep::IsaTier::kAvx2 && panel_kernel_supported(PanelKernel::kAvx2)) return PanelKernel::kAvx2;
  return PanelKernel::kScalar;
}

// ---- the driver -------------------------------------------------------------------------------

namespace {
int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
size_t up64(size_t b) { return (b + 63) / 64 * 64; }
// A's rows, rounded up to whole AMX tiles (the padding rows are zero) when AMX may take them.
int64_t padded_rows(int64_t M) { return M < kAmxMinRows ? M : round_up(M, 32); }
}  // namespace

void amx_row_terms(const QuantPanels& W, const float* sa, const float* sq, int64_t M, int64_t rows, float* terms) {
  const int64_t kb = W.kb;
  for (int64_t m0 = 0; m0 < rows; m0 += 32) {
    float* sat = terms + (m0 / 32) * 2 * kb * 32;
    float* zqt = sat + kb * 32;
    for (int64_t r = 0; r < 32; ++r) {
      const int64_t m = m0 + r;
      for (int64_t b = 0; b < kb; ++b) {
        const bool real = m < M;
        sat[b * 32 + r] = real ? sa[m * kb + b] : 0.f;
        zqt[b * 32 + r] = !real ? 0.f : W.zp_table ? sq[m * kb + b] : W.uniform_zp * sq[m * kb + b];
      }
    }
  }
}

namespace {
// The parallel loop of panels_run_on (one item a panel) or panels_silu_mul_run_on (one item a gate/up
// pair of panels), for matmulnbits_panels_worker_head to predict the worker's first part.
struct PanelLoop {
  int64_t items = 0, grain = 1, panels_per_item = 1;
};
PanelLoop panel_loop(const NBitsPanelsPlan& plan, const QuantPanels& W, bool pairs) {
  if (pairs) return {W.panels / 2, std::max<int64_t>(1, plan.grain / 2), 2};
  return {W.panels, plan.grain, 1};
}

// Decode: one row of A, not on AMX (whose prefill loop is the one that runs then). It streams each
// panel once (the worker's first claim can be prefetched, the tasks start their pages, the claims halve).
bool panels_decode(const NBitsPanelsPlan& plan) { return plan.M == 1 && !plan.amx; }

// Decode's panels cost the same: two threads claim half of what is left each time
// (ThreadPool::Schedule::kStreaming), so each restarts its weight stream fewer times. Zen 5
// VM, Qwen2.5-0.5B-shape decode at 2 threads, steps alternating with and without in one process: +1.2 to
// +2.2% per step (5 processes each at three least-claim settings). Not for every loop: SqueezeNet's
// convolutions at 2 threads ran 0.6-3.1% slower with halving claims (paired in one process), ResNet-50,
// Inception-v2 and DenseNet-121 0.7-1.2% faster.
ep::ThreadPool::Schedule panel_schedule(const NBitsPanelsPlan& plan) {
  return panels_decode(plan) ? ep::ThreadPool::Schedule::kStreaming : ep::ThreadPool::Schedule::kGuided;
}

// A decode task over panels [p0, p1): the tiles start each page of the stream kPageAheadBytes ahead of
// the record they read, so the task's own first pages get that start here. Qwen2.5-0.5B-shape
// decode on the Zen 5 VM, steps alternating with and without in one process: +0.6% per step at 2
// threads (9 processes, 0.2-1.6%), +0.8% at 1.
void start_task_pages(const QuantPanels& W, int64_t p0, int64_t p1) {
  prefetch_first_pages(W.panel(p0), (p1 - p0) * W.kb * W.record_bytes);
}
}  // namespace

NBitsPanelsPlan matmulnbits_panels_plan(int64_t M, const QuantPanels& W, PanelKernel kernel, int threads, bool silu_mul) {
  NBitsPanelsPlan p;
  p.M = M;
  p.silu_mul = silu_mul;
  const bool amx_kernel = kernel == PanelKernel::kAmx || kernel == PanelKernel::kAmxEmulated;
  p.amx = amx_kernel && M >= kAmxMinRows;
  p.kernel = amx_kernel && !p.amx ? PanelKernel::kAvx512Vnni : kernel;
  p.slots = std::max(1, threads);
  // int8 rows, then block scales and scale*sum, then (AMX) the row terms, each 64-byte aligned.
  p.rows = padded_rows(M);
  const size_t terms = p.amx ? up64(amx_row_terms_floats(W, p.rows) * sizeof(float)) : 0;
  p.a_bytes = up64(static_cast<size_t>(p.rows * W.kpad)) + 2 * up64(static_cast<size_t>(p.rows * W.kb) * sizeof(float)) + terms;
  p.mr = p.kernel == PanelKernel::kAvx512Vnni || p.kernel == PanelKernel::kAvxVnni ? 4 : p.kernel == PanelKernel::kAvx2 ? 2 : 1;
  // Rows of A per pass over a task's panels: the int8 rows (mc * kpad bytes) stay in L2 while the
  // panels stream by.
  p.mc = std::max<int64_t>(p.mr, std::min<int64_t>(M, (256 * 1024) / std::max<int64_t>(1, W.kpad)) / p.mr * p.mr);
  // Tasks of a few panels: decode streams each panel once (tasks of >= 64 KB of weights), prefill
  // reuses the task's panels across the rows.
  const int64_t panel_bytes = W.kb * W.record_bytes;
  const int64_t grain = std::max<int64_t>(1, (64 * 1024) / std::max<int64_t>(1, panel_bytes));
  p.grain = std::min(grain, std::max<int64_t>(1, W.panels / 8));
  if (p.amx) {
    p.amx_group = amx_panel_group(W);
    p.slot_bytes = amx_unpack_scratch_bytes(W, p.amx_group);
    // The AMX tile writes whole panel groups over all rows: the gate/up pair goes through the product.
    if (silu_mul) p.product_bytes = up64(static_cast<size_t>(M * W.N) * sizeof(float));
  } else if (silu_mul) {
    p.slot_bytes = up64(static_cast<size_t>(2 * p.mc * W.cols) * sizeof(float));  // a pass's gate and up tiles
  }
  return p;
}

ep::WorkerPrefetch matmulnbits_panels_worker_head(const NBitsPanelsPlan& plan, const QuantPanels& W, size_t max_bytes) {
  if (!panels_decode(plan) || W.empty()) return {};
  const PanelLoop loop = panel_loop(plan, W, plan.silu_mul);
  const int64_t first = ep::ThreadPool::worker_first_claim(plan.slots, loop.items, loop.grain);
  if (first >= loop.items) return {};
  const int64_t item_bytes = loop.panels_per_item * W.kb * W.record_bytes;
  return {W.panel(first * loop.panels_per_item), std::min<size_t>(max_bytes, static_cast<size_t>((loop.items - first) * item_bytes))};
}

size_t NBitsPanelsPlan::workspace_bytes() const {
  return a_bytes + product_bytes + ep::SlotScratch::bytes(slot_bytes, slots);
}

void matmulnbits_panels(const float* A, int64_t M, const QuantPanels& W, const float* bias, float* Y,
                        ep::ThreadPool* pool, PanelKernel kernel, void* workspace) {
  const NBitsPanelsPlan plan = matmulnbits_panels_plan(M, W, kernel, pool ? pool->num_threads() : 1);
  matmulnbits_panels_run(plan, A, W, bias, Y, pool, workspace);
}

bool NBitsColumnSplit::fits(const QuantPanels& W) const {
  if (count <= 0 || first[0] != 0 || first[count] != W.N) return false;
  for (int i = 0; i < count; ++i) {
    if (first[i] % W.cols != 0 || first[i + 1] <= first[i]) return false;
  }
  return true;
}

namespace {
void panels_run_on(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias, float* Y,
                   ep::ThreadPool* pool, void* workspace, const NBitsColumnSplit* split);
void panels_silu_mul_run_on(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias,
                            float* Y, ep::ThreadPool* pool, void* workspace, bool avx512);
}  // namespace

void matmulnbits_panels_run(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias,
                            float* Y, ep::ThreadPool* pool, void* workspace, const NBitsColumnSplit* split) {
  if (plan.M == 0 || W.N == 0) return;
  assert(!split || split->fits(W));
  ep::run_on_plan_workspace(plan, pool, workspace, [&](const NBitsPanelsPlan& p, void* ws) {
    panels_run_on(p, A, W, bias, Y, pool, ws, split);
  });
}

namespace {
// A's rows quantized into the front of a panel plan's workspace: int8 rows, block scales, scale * sum
// and (AMX) the row terms.
struct QuantizedA {
  int8_t* aq = nullptr;
  float* sa = nullptr;
  float* sq = nullptr;
  float* terms = nullptr;  // AMX only
};
QuantizedA quantize_a(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, ep::ThreadPool* pool,
                      void* workspace) {
  const int64_t K = W.K, M = plan.M, rows = plan.rows;
  const ep::IsaTier quant_isa = panel_kernel_info(plan.kernel).tier;
  QuantizedA q;
  q.aq = static_cast<int8_t*>(workspace);
  q.sa = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + up64(static_cast<size_t>(rows * W.kpad)));
  q.sq = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(q.sa) + up64(static_cast<size_t>(rows * W.kb) * sizeof(float)));
  auto quant = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      quantize_a_row(A + m * K, K, W.block, W.kpad, q.aq + m * W.kpad, q.sa + m * W.kb, q.sq + m * W.kb, quant_isa);
  };
  if (pool && M >= 16) pool->parallel_for(M, 8, quant); else quant(0, M);
  if (plan.amx) {
    // The AMX tile reads whole 32-row blocks of A: the padding rows are zero (their terms too).
    std::memset(q.aq + M * W.kpad, 0, static_cast<size_t>((rows - M) * W.kpad));
    q.terms = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(q.sq) + up64(static_cast<size_t>(rows * W.kb) * sizeof(float)));
    amx_row_terms(W, q.sa, q.sq, M, rows, q.terms);
  }
  return q;
}

using TileFn = void (*)(const QuantPanels&, const PanelTile&);
using AmxFn = decltype(&qd8_f32_qb4w_gemm_32x32__amx);  // the emulated kernel has the same signature
// The AMX kernel of an amx plan: the tiles, or their emulation (tests).
AmxFn amx_fn(PanelKernel kernel) {
  return kernel == PanelKernel::kAmxEmulated ? qd8_f32_qb4w_gemm_32x32__amx_emulated : qd8_f32_qb4w_gemm_32x32__amx;
}
TileFn tile_fn(PanelKernel kernel) {
  return kernel == PanelKernel::kAvx512Vnni ? qd8_f32_qb4w_gemm_4x32__avx512vnni
         : kernel == PanelKernel::kAvx2     ? qd8_f32_qb4w_gemm_2x16__avx2
         : kernel == PanelKernel::kAvxVnni  ? qd8_f32_qb4w_gemm_4x16__avxvnni
                                            : qd8_f32_qb4w_gemm_1x16__scalar;
}

// matmulnbits_panels_run on a workspace that serves the plan (its slots cover the pool's threads).
void panels_run_on(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias, float* Y,
                   ep::ThreadPool* pool, void* workspace, const NBitsColumnSplit* split) {
  const int64_t N = W.N, M = plan.M;
  const bool amx = plan.amx;
  const QuantizedA qa = quantize_a(plan, A, W, pool, workspace);
  const int8_t* aq = qa.aq;
  const float* sa = qa.sa;
  const float* sq = qa.sq;
  const float* terms = qa.terms;
  // The per-thread scratch (AMX unpacked panels): the calling thread's slot after the quantized A.
  uint8_t* slot0 = static_cast<uint8_t*>(workspace) + plan.a_bytes + plan.product_bytes;
  const size_t stride = ep::SlotScratch::stride(plan.slot_bytes);
  const int64_t mr = plan.mr, mc = plan.mc;
  const TileFn tile = tile_fn(plan.kernel);
  const AmxFn amx_gemm = amx_fn(plan.kernel);
  auto work = [&](int64_t p0, int64_t p1) {
    if (amx) {
      uint8_t* scratch = slot0 + static_cast<size_t>(pool ? pool->slot() : 0) * stride;
      if (!split) {
        amx_gemm(W, aq, W.kpad, terms, M, p0, p1, Y, N, plan.amx_group, scratch, 0);
        return;
      }
      for (int s = 0; s < split->count; ++s) {  // the task's panels of each output
        // Rounded up: the last output may end inside W's last (partial) panel.
        const int64_t q0 = std::max(p0, split->first[s] / W.cols);
        const int64_t q1 = std::min(p1, (split->first[s + 1] + W.cols - 1) / W.cols);
        if (q0 < q1) {
          amx_gemm(W, aq, W.kpad, terms, M, q0, q1, split->outputs[s], split->first[s + 1] - split->first[s],
                   plan.amx_group, scratch, split->first[s]);
        }
      }
      return;
    }
    if (panels_decode(plan)) start_task_pages(W, p0, p1);
    for (int64_t m0 = 0; m0 < M; m0 += mc) {
      const int64_t m1 = std::min(M, m0 + mc);
      int s = 0;  // split: the output of panel p (panels ascend)
      for (int64_t p = p0; p < p1; ++p) {
        PanelTile t;
        t.lda = W.kpad;
        t.lds = W.kb;
        t.panel = W.panel(p);
        // This panel's columns [c0, c0 + ncols) of y, a row-major matrix ldy wide.
        float* y = Y;
        int64_t c0 = p * W.cols;
        t.ldy = N;
        if (split) {
          while (p * W.cols >= split->first[s + 1]) ++s;
          y = split->outputs[s];
          c0 = p * W.cols - split->first[s];
          t.ldy = split->first[s + 1] - split->first[s];
        }
        t.ncols = std::min<int64_t>(W.cols, t.ldy - c0);
        for (int64_t m = m0; m < m1; m += mr) {
          t.rows = std::min(mr, m1 - m);
          t.prefetch_panel = m == m0;
          t.a = aq + m * W.kpad;
          t.sa = sa + m * W.kb;
          t.sq = sq + m * W.kb;
          t.y = y + m * t.ldy + c0;
          tile(W, t);
        }
      }
    }
  };
  const PanelLoop loop = panel_loop(plan, W, /*pairs=*/false);
  if (pool && loop.items > 1) pool->parallel_for(loop.items, loop.grain, work, panel_schedule(plan));
  else work(0, loop.items);
  if (bias && !split) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) Y[m * N + n] += bias[n];
  }
  if (bias && split) {  // bias holds N values; output s gets its columns' share
    for (int s = 0; s < split->count; ++s) {
      const int64_t c0 = split->first[s], w = split->first[s + 1] - c0;
      for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < w; ++n) split->outputs[s][m * w + n] += bias[c0 + n];
    }
  }
}

// matmulnbits_panels_silu_mul_run on a workspace that serves the plan. Tasks take whole gate/up pairs
// of panels; per pass of rows both tiles go into the thread's slot (contiguous rows x cols blocks), the
// pair's biases are added, silu_mul_f32 runs once over the block and its rows are copied into Y.
void panels_silu_mul_run_on(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias,
                            float* Y, ep::ThreadPool* pool, void* workspace, bool avx512) {
  const int64_t M = plan.M, cols = W.cols, N = W.N / 2;
  const QuantizedA qa = quantize_a(plan, A, W, pool, workspace);
  float* product = plan.amx ? reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + plan.a_bytes) : nullptr;
  uint8_t* slot0 = static_cast<uint8_t*>(workspace) + plan.a_bytes + plan.product_bytes;
  const size_t stride = ep::SlotScratch::stride(plan.slot_bytes);
  const TileFn tile = tile_fn(plan.kernel);
  const AmxFn amx_gemm = amx_fn(plan.kernel);
  auto add_bias = [&](float* g, int64_t ldg, float* u, int64_t ldu, int64_t q, int64_t rows) {
    const float* bg = bias + 2 * q * cols;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        g[r * ldg + c] += bg[c];
        u[r * ldu + c] += bg[cols + c];
      }
  };
  auto work = [&](int64_t q0, int64_t q1) {
    uint8_t* slot = slot0 + static_cast<size_t>(pool ? pool->slot() : 0) * stride;
    if (plan.amx) {
      amx_gemm(W, qa.aq, W.kpad, qa.terms, M, 2 * q0, 2 * q1, product, W.N, plan.amx_group, slot, 0);
      for (int64_t q = q0; q < q1; ++q) {
        float* g = product + 2 * q * cols;
        float* u = g + cols;
        if (bias) add_bias(g, W.N, u, W.N, q, M);
        for (int64_t m = 0; m < M; ++m) silu_mul_f32(g + m * W.N, u + m * W.N, Y + m * N + q * cols, cols, avx512);
      }
      return;
    }
    if (panels_decode(plan)) start_task_pages(W, 2 * q0, 2 * q1);
    float* gate = reinterpret_cast<float*>(slot);  // [mc, cols], then the up tile [mc, cols]
    float* up = gate + plan.mc * cols;
    for (int64_t m0 = 0; m0 < M; m0 += plan.mc) {
      const int64_t m1 = std::min(M, m0 + plan.mc), rows = m1 - m0;
      for (int64_t q = q0; q < q1; ++q) {
        for (int half = 0; half < 2; ++half) {
          PanelTile t;
          t.lda = W.kpad;
          t.lds = W.kb;
          t.panel = W.panel(2 * q + half);
          t.ncols = cols;
          t.ldy = cols;
          for (int64_t m = m0; m < m1; m += plan.mr) {
            t.rows = std::min(plan.mr, m1 - m);
            t.prefetch_panel = m == m0;
            t.a = qa.aq + m * W.kpad;
            t.sa = qa.sa + m * W.kb;
            t.sq = qa.sq + m * W.kb;
            t.y = (half == 0 ? gate : up) + (m - m0) * cols;
            tile(W, t);
          }
        }
        if (bias) add_bias(gate, cols, up, cols, q, rows);
        silu_mul_f32(gate, up, gate, rows * cols, avx512);
        for (int64_t r = 0; r < rows; ++r)
          std::memcpy(Y + (m0 + r) * N + q * cols, gate + r * cols, static_cast<size_t>(cols) * sizeof(float));
      }
    }
  };
  const PanelLoop loop = panel_loop(plan, W, /*pairs=*/true);  // tasks take whole gate/up pairs
  if (pool && loop.items > 1) pool->parallel_for(loop.items, loop.grain, work, panel_schedule(plan));
  else work(0, loop.items);
}
}  // namespace

void matmulnbits_panels_silu_mul_run(const NBitsPanelsPlan& plan, const float* A, const QuantPanels& W, const float* bias,
                                     float* Y, ep::ThreadPool* pool, void* workspace, bool avx512) {
  if (plan.M == 0 || W.N == 0) return;
  assert(plan.silu_mul && W.panels % 2 == 0);
  ep::run_on_plan_workspace(plan, pool, workspace, [&](const NBitsPanelsPlan& p, void* ws) {
    panels_silu_mul_run_on(p, A, W, bias, Y, pool, ws, avx512);
  });
}

}  // namespace nxrt::ops::contrib
