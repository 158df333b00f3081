// f32_gemm_6x16__scalar: the portable variant of the float engine's kernels (gemm_kernels.h), and the
// variant table. Plain loops over constant trip counts, which the compiler keeps in vector registers
// with baseline (SSE2) code.
#include <algorithm>
#include <array>

#include "ops/gemm/gemm_kernels.h"

namespace nxrt::ops {

using namespace gemm_detail;

namespace {

// A flat accumulator and constant trip counts. `b_row(p)` is B's row p (NR floats): a packed panel, or a
// row read in place.
template <typename BRow>
inline void tile_generic_rows(int64_t kc, const float* __restrict a, BRow b_row, float* c, int64_t ldc, int mr,
                              int nr, float alpha, float beta) {
  float acc[MR * NR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const float* bp = b_row(p);
    const float* ap = a + p * MR;
#pragma GCC unroll 8
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) acc[i * NR + j] += ap[i] * bp[j];
    }
  }
  store_edge(acc, c, ldc, mr, nr, alpha, beta);
}

void tile_scalar(int64_t kc, const float* __restrict a, const float* __restrict b, float* c, int64_t ldc, int mr,
                 int nr, float alpha, float beta) {
  tile_generic_rows(kc, a, [b](int64_t p) { return b + p * NR; }, c, ldc, mr, nr, alpha, beta);
}

bool tile_rows_scalar(int64_t kc, const float* __restrict a, const float* brow, const int64_t* boff, float* c,
                      int64_t ldc, int mr, int nr, float alpha, float beta, const GemmEpilogue*, int64_t, int64_t) {
  tile_generic_rows(kc, a, [brow, boff](int64_t p) { return brow + boff[p]; }, c, ldc, mr, nr, alpha, beta);
  return false;
}

void gemv_raw_scalar(bool transB, int64_t j0, int64_t j1, int64_t K, float alpha, const float* a, const float* B,
                     int64_t ldb, float beta, float* y) {
  gemv_raw_cols(transB, j0, j1, K, alpha, a, B, ldb, beta, y);
}

// K blocks outer so each block's slice of panels is one sequential stream.
void gemv_packed_scalar(int64_t q0, int64_t q1, int64_t N, int64_t K, float alpha, const float* a,
                        const float* packed, int64_t n_padded, float beta, float* y) {
  constexpr int64_t kSub = 64;  // panels per pass: 1024 accumulators
  alignas(64) float acc[kSub * NR];
  for (int64_t s0 = q0; s0 < q1; s0 += kSub) {
    const int64_t s1 = std::min(q1, s0 + kSub);
    std::fill(acc, acc + (s1 - s0) * NR, 0.f);
    for (int64_t p0 = 0; p0 < K; p0 += KC) {
      const int64_t kc = std::min(KC, K - p0);
      const float* ap = a + p0;
      for (int64_t q = s0; q < s1; ++q) {
        const float* bp = packed + p0 * n_padded + q * NR * kc;
        float* ac = acc + (q - s0) * NR;
        for (int64_t p = 0; p < kc; ++p) {
          const float av = ap[p];
#pragma GCC unroll 16
          for (int j = 0; j < NR; ++j) ac[j] += av * bp[p * NR + j];
        }
      }
    }
    for (int64_t q = s0; q < s1; ++q) {
      const int64_t jb = q * NR, cols = std::min<int64_t>(NR, N - jb);
      for (int64_t j = 0; j < cols; ++j) {
        const float v = alpha * acc[(q - s0) * NR + j];
        y[jb + j] = beta == 0.f ? v : v + beta * y[jb + j];
      }
    }
  }
}

}  // namespace

const F32GemmKernels kF32Gemm6x16Scalar = {
    "f32_gemm_6x16__scalar", ep::IsaTier::kScalar, 1, false, &tile_scalar, &tile_rows_scalar, nullptr, nullptr, nullptr,
    &gemv_raw_scalar,        &gemv_packed_scalar, nullptr, nullptr,
};

const std::vector<const F32GemmKernels*>& f32_gemm_kernel_variants() {
  static const std::vector<const F32GemmKernels*> all = {
      &kF32Gemm6x16Scalar,
#if defined(__x86_64__) || defined(__i386__)
      &kF32Gemm6x16Avx2,
      &kF32Gemm6x64Avx512,
#endif
  };
  return all;
}

bool f32_gemm_kernels_supported(const F32GemmKernels& k) {
  // An AVX2 variant also needs FMA; cpu_isa_tier() is kAvx2 or above only when the CPU has both.
  return k.tier <= ep::cpu_isa_tier();
}

const F32GemmKernels& f32_gemm_kernels(ep::IsaTier isa) {
  // Resolved once per tier: entry points look it up on every call.
  static const auto by_tier = [] {
    std::array<const F32GemmKernels*, 4> t{};
    for (int tier = 0; tier < 4; ++tier) {
      const F32GemmKernels* best = &kF32Gemm6x16Scalar;
      for (const F32GemmKernels* k : f32_gemm_kernel_variants()) {
        if (static_cast<int>(k->tier) <= tier && f32_gemm_kernels_supported(*k) && k->tier >= best->tier) best = k;
      }
      t[static_cast<size_t>(tier)] = best;
    }
    return t;
  }();
  return *by_tier[static_cast<size_t>(isa)];
}

bool gemm_vector_kernels(ep::IsaTier isa) { return f32_gemm_kernels(isa).tier >= ep::IsaTier::kAvx2; }

bool gemm_f32_strips_exact(ep::IsaTier isa) { return f32_gemm_kernels(isa).rows_exact; }

}  // namespace nxrt::ops
