// MatMulNBits at accuracy_level 4 for 4-bit (and 2-bit) weights: int8 activations times weight codes
// in column panels, one kernel for decode (M = 1) and prefill (M in the hundreds).
//
// Why panels: the row layout (contrib/matmul_nbits.cpp) dots one weight row with one A row, so every
// block's partial sum sits across the 8 lanes of a vector and costs a convert, a scale and finally a
// horizontal add per (row, column). Here a vector's lanes are 8 output columns: each 32-bit lane holds
// 4 consecutive k of its column, an A quad is broadcast, and vpdpbusd (or vpmaddubsw on plain AVX2)
// accumulates 8 columns at once; the float work per block is 4 vector ops per 8 columns, and a loaded
// weight vector serves MR rows of A. See contrib/matmul_nbits.h for the layout.
#include <algorithm>
#include <cstring>

#include "ep/cpu_features.h"
#include "ep/thread_pool.h"
#include "ops/contrib/matmul_nbits.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_MNB_PANEL_X86 1
#endif

namespace nxrt::ops::contrib {

namespace {

// Byte offset and shift of (column c of the panel, k) inside the panel's group data.
inline void panel_slot(int64_t c, int64_t k, int64_t* byte, int* shift) {
  *byte = (k / 4) * 32 + (c % 8) * 4 + (k % 4);
  *shift = c < 8 ? 0 : 4;
}

}  // namespace

QuantPanels pack_quant_panels(const uint8_t* B, const float* scales, const float* zps, int64_t K, int64_t N,
                              int64_t bits, int64_t block) {
  QuantPanels W;
  W.K = K;
  W.N = N;
  W.block = block;
  W.kb = (K + block - 1) / block;
  W.kpad = W.kb * block;
  W.groups = W.kpad / 4;
  W.panels = (N + 15) / 16;
  const int64_t blob = block * bits / 8;
  const int64_t panel_bytes = W.groups * 32;
  W.data.assign(static_cast<size_t>(W.panels * panel_bytes), 0);
  W.scale.assign(static_cast<size_t>(W.panels * W.kb * 16), 0.f);
  // One zero point for every block (the default, or a model that stores a constant one): no table.
  bool uniform = N * W.kb > 0;
  for (int64_t i = 1; i < N * W.kb && uniform; ++i) uniform = zps[i] == zps[0];
  if (uniform) W.uniform_zp = zps[0];
  else W.zterm.assign(W.scale.size(), 0.f);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t p = n / 16, c = n % 16;
    uint8_t* pd = W.data.data() + p * panel_bytes;
    for (int64_t j = 0; j < W.kb; ++j) {
      const uint8_t* bl = B + (n * W.kb + j) * blob;
      int64_t kk = 0;
      if (bits == 4) {
        // Four codes (two blob bytes) fill one column's 4 bytes of a group: no per-element index math.
        const int shift = c < 8 ? 0 : 4;
        const int64_t kend = std::min(block, K - j * block);
        for (; kk + 4 <= kend; kk += 4) {
          const uint8_t b0 = bl[kk / 2], b1 = bl[kk / 2 + 1];
          uint8_t* d = pd + ((j * block + kk) / 4) * 32 + (c % 8) * 4;
          d[0] = static_cast<uint8_t>(d[0] | ((b0 & 15) << shift));
          d[1] = static_cast<uint8_t>(d[1] | ((b0 >> 4) << shift));
          d[2] = static_cast<uint8_t>(d[2] | ((b1 & 15) << shift));
          d[3] = static_cast<uint8_t>(d[3] | ((b1 >> 4) << shift));
        }
      }
      for (; kk < block && j * block + kk < K; ++kk) {
        int64_t byte;
        int shift;
        panel_slot(c, j * block + kk, &byte, &shift);
        pd[byte] = static_cast<uint8_t>(pd[byte] | (raw_code(bl, kk, bits) << shift));
      }
      const float s = scales[n * W.kb + j];
      W.scale[static_cast<size_t>((p * W.kb + j) * 16 + c)] = s;
      if (!uniform) W.zterm[static_cast<size_t>((p * W.kb + j) * 16 + c)] = zps[n * W.kb + j] * s;
    }
  }
  return W;
}

bool matmulnbits_has_vnni() { return ep::cpu_has_avx512_vnni(); }

PanelIsa matmulnbits_best_panel_isa() {
  if (matmulnbits_has_vnni()) return PanelIsa::kVnni;
  if (matmulnbits_has_avx2()) return PanelIsa::kAvx2;
  return PanelIsa::kScalar;
}

namespace {

// The portable tile: same arithmetic as the vector tiles (exact int32 block dots, then the float
// scale / zero-point terms in the same order).
void panel_tile_scalar(int64_t rows, const int8_t* a, int64_t lda, const float* sa, const float* sq, int64_t lds,
                       const uint8_t* w, const float* ws, const float* wz, float zp, int64_t kb, int64_t gpb, float* y,
                       int64_t ldy, int64_t ncols) {
  for (int64_t r = 0; r < rows; ++r) {
    float f[16] = {};
    for (int64_t b = 0; b < kb; ++b) {
      int32_t acc[16] = {};
      for (int64_t g = b * gpb; g < (b + 1) * gpb; ++g) {
        const uint8_t* wg = w + g * 32;
        const int8_t* ag = a + r * lda + g * 4;
        for (int c = 0; c < 16; ++c) {
          const int shift = c < 8 ? 0 : 4;
          for (int t = 0; t < 4; ++t) acc[c] += ((wg[(c % 8) * 4 + t] >> shift) & 15) * ag[t];
        }
      }
      const float sar = sa[r * lds + b], sqr = sq[r * lds + b];
      for (int c = 0; c < 16; ++c) {
        if (wz) f[c] = f[c] + static_cast<float>(acc[c]) * (ws[b * 16 + c] * sar) - wz[b * 16 + c] * sqr;
        else f[c] = f[c] + ws[b * 16 + c] * (static_cast<float>(acc[c]) * sar - zp * sqr);
      }
    }
    std::memcpy(y + r * ldy, f, static_cast<size_t>(ncols) * sizeof(float));
  }
}

#ifdef NXRT_MNB_PANEL_X86
#define NXRT_PANEL_TARGET "avx2,fma,avx512f,avx512vl,avx512vnni"
#define NXRT_PANEL_NAME panel_tile_vnni
#define NXRT_PANEL_VNNI 1
#include "ops/contrib/matmul_nbits_panel_tile.inc"
#undef NXRT_PANEL_TARGET
#undef NXRT_PANEL_NAME
#undef NXRT_PANEL_VNNI
#define NXRT_PANEL_TARGET "avx2,fma"
#define NXRT_PANEL_NAME panel_tile_avx2
#define NXRT_PANEL_VNNI 0
#include "ops/contrib/matmul_nbits_panel_tile.inc"
#undef NXRT_PANEL_TARGET
#undef NXRT_PANEL_NAME
#undef NXRT_PANEL_VNNI
#endif

// Rows per tile: VNNI has 32 vector registers (AVX-512VL), plain AVX2 16.
constexpr int kMrVnni = 4;
constexpr int kMrAvx2 = 2;

// Tiles of fewer than MR rows (the tail of M) take the next smaller instantiation.
template <PanelIsa kIsa, int MR>
void tile_upto(int64_t rows, const int8_t* a, int64_t lda, const float* sa, const float* sq, int64_t lds,
               const uint8_t* w, const float* ws, const float* wz, float zp, int64_t kb, int64_t gpb, float* y,
               int64_t ldy, int64_t ncols) {
#ifdef NXRT_MNB_PANEL_X86
  if constexpr (MR > 1) {
    if (rows < MR) return tile_upto<kIsa, MR - 1>(rows, a, lda, sa, sq, lds, w, ws, wz, zp, kb, gpb, y, ldy, ncols);
  }
  if constexpr (kIsa == PanelIsa::kVnni) {
    if (wz) panel_tile_vnni<MR, false>(a, lda, sa, sq, lds, w, ws, wz, zp, kb, gpb, y, ldy, ncols);
    else panel_tile_vnni<MR, true>(a, lda, sa, sq, lds, w, ws, wz, zp, kb, gpb, y, ldy, ncols);
  } else {
    if (wz) panel_tile_avx2<MR, false>(a, lda, sa, sq, lds, w, ws, wz, zp, kb, gpb, y, ldy, ncols);
    else panel_tile_avx2<MR, true>(a, lda, sa, sq, lds, w, ws, wz, zp, kb, gpb, y, ldy, ncols);
  }
#else
  panel_tile_scalar(rows, a, lda, sa, sq, lds, w, ws, wz, zp, kb, gpb, y, ldy, ncols);
#endif
}

}  // namespace

size_t matmulnbits_panels_workspace(int64_t M, const QuantPanels& W) {
  // int8 rows, then block scales and scale*sum, each 64-byte aligned.
  auto up = [](size_t b) { return (b + 63) / 64 * 64; };
  return up(static_cast<size_t>(M * W.kpad)) + 2 * up(static_cast<size_t>(M * W.kb) * sizeof(float));
}

void matmulnbits_panels(const float* A, int64_t M, const QuantPanels& W, const float* bias, float* Y,
                        ep::ThreadPool* pool, PanelIsa isa, void* workspace) {
  const int64_t N = W.N, K = W.K;
  if (M == 0 || N == 0) return;
  std::vector<uint8_t> own;
  if (!workspace) {
    own.resize(matmulnbits_panels_workspace(M, W));
    workspace = own.data();
  }
  auto up = [](size_t b) { return (b + 63) / 64 * 64; };
  int8_t* aq = static_cast<int8_t*>(workspace);
  float* sa = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + up(static_cast<size_t>(M * W.kpad)));
  float* sq = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(sa) + up(static_cast<size_t>(M * W.kb) * sizeof(float)));
  auto quant = [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m)
      quantize_a_row(A + m * K, K, W.block, W.kpad, aq + m * W.kpad, sa + m * W.kb, sq + m * W.kb);
  };
  if (pool && M >= 16) pool->parallel_for(M, 8, quant); else quant(0, M);

  const int64_t gpb = W.block / 4;
  const int64_t panel_bytes = W.groups * 32;
  const int64_t mr = isa == PanelIsa::kVnni ? kMrVnni : isa == PanelIsa::kAvx2 ? kMrAvx2 : 1;
  // Rows of A per pass over a task's panels: the int8 rows (mc * kpad bytes) stay in L2 while the
  // panels stream by.
  const int64_t mc = std::max<int64_t>(mr, std::min<int64_t>(M, (256 * 1024) / std::max<int64_t>(1, W.kpad)) / mr * mr);
  auto work = [&](int64_t p0, int64_t p1) {
    for (int64_t m0 = 0; m0 < M; m0 += mc) {
      const int64_t m1 = std::min(M, m0 + mc);
      for (int64_t p = p0; p < p1; ++p) {
        const uint8_t* w = W.data.data() + p * panel_bytes;
        const float* ws = W.scale.data() + p * W.kb * 16;
        const float* wz = W.zterm.empty() ? nullptr : W.zterm.data() + p * W.kb * 16;
        const float zp = W.uniform_zp;
        const int64_t ncols = std::min<int64_t>(16, N - p * 16);
        for (int64_t m = m0; m < m1; m += mr) {
          const int64_t rows = std::min(mr, m1 - m);
          const int8_t* a = aq + m * W.kpad;
          float* y = Y + m * N + p * 16;
          switch (isa) {
            case PanelIsa::kVnni:
              tile_upto<PanelIsa::kVnni, kMrVnni>(rows, a, W.kpad, sa + m * W.kb, sq + m * W.kb, W.kb, w, ws, wz, zp, W.kb, gpb, y, N, ncols);
              break;
            case PanelIsa::kAvx2:
              tile_upto<PanelIsa::kAvx2, kMrAvx2>(rows, a, W.kpad, sa + m * W.kb, sq + m * W.kb, W.kb, w, ws, wz, zp, W.kb, gpb, y, N, ncols);
              break;
            case PanelIsa::kScalar:
              panel_tile_scalar(rows, a, W.kpad, sa + m * W.kb, sq + m * W.kb, W.kb, w, ws, wz, zp, W.kb, gpb, y, N, ncols);
              break;
          }
        }
      }
    }
  };
  // Tasks of a few panels: decode streams each panel once (tasks of >= 64 KB of weights), prefill
  // reuses the task's panels across the rows.
  const int64_t grain = std::max<int64_t>(1, (64 * 1024) / std::max<int64_t>(1, panel_bytes));
  if (pool && W.panels > 1) pool->parallel_for(W.panels, std::min(grain, std::max<int64_t>(1, W.panels / 8)), work);
  else work(0, W.panels);
  if (bias) {
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) Y[m * N + n] += bias[n];
  }
}

}  // namespace nxrt::ops::contrib
