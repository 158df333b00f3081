// Single-precision GEMM used by MatMul, Gemm, Einsum, attention and (through im2col / 1x1) Conv.
//
//   C[M,N] = epilogue( alpha * op(A)[M,K] * op(B)[K,N] + beta * C )
//
// op(A) is A (row-major, M x K, row stride lda) or, with transA, A^T where A is stored K x M (row
// stride lda); likewise B. When beta == 0, C is not read (NaN/garbage in C does not propagate).
// The epilogue (GemmEpilogue) is applied in this order, fused into the kernel's store while the tile
// of C is in cache:  v += bias (per column j or per row i);  v += residual[i, j];  v = act(v).
//
// One engine serves every entry point: an AVX2+FMA 6x16 register-blocked micro-kernel (chosen at run
// time when the CPU has AVX2 and FMA; otherwise a portable plain-loop kernel), KC x NC panels of
// op(B) and MC x KC blocks of op(A) packed per task, tasks over M/N blocks on the thread pool (small
// problems stay on the calling thread). Constant operands can be packed once (PackedB for weights on
// the right as in MatMul/Gemm, PackedAF32 for weights on the left as in Conv) and reused by every call.
//
// `pool` may be null (single-threaded). Calls made from inside a parallel_for of the pool run
// single-threaded (the pool runs nested parallel_for inline).
#pragma once
#include <cstdint>
#include <vector>

#include "ep/function_ref.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

enum class GemmActivation : uint8_t { kNone, kRelu, kClip, kSigmoid, kTanh, kGelu /* erf form */ };
enum class GemmBias : uint8_t { kNone, kPerColumn /* bias[j], N values */, kPerRow /* bias[i], M values */ };

struct GemmEpilogue {
  GemmBias bias_kind = GemmBias::kNone;
  const float* bias = nullptr;
  const float* residual = nullptr;  // M x N, row stride ldr; may alias C only when it equals C exactly
  int64_t ldr = 0;
  GemmActivation act = GemmActivation::kNone;
  float clip_min = 0.f, clip_max = 0.f;  // kClip bounds
  bool empty() const {
    return (bias_kind == GemmBias::kNone || bias == nullptr) && residual == nullptr && act == GemmActivation::kNone;
  }
};

// Applies the epilogue (bias, residual, activation) to an rows x cols block of C whose top-left element is
// C(i0, j0). Exposed for callers that produce C by other means; the GEMM entry points fuse it.
void gemm_apply_epilogue(const GemmEpilogue& ep, int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* c,
                         int64_t ldc);

// op(B) packed once for repeated GEMMs against the same right operand (constant weights): the panel
// layout the engine consumes, so calls skip packing B.
struct PackedB {
  int64_t K = 0, N = 0;
  int64_t n_padded = 0;     // N rounded up to the panel width
  std::vector<float> data;  // per K block of the kernel: n_padded x kc, in NR-wide column panels
  bool empty() const { return data.empty(); }
};
PackedB pack_b_f32(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb);

// op(A) packed once (constant left operand: conv weights). Layout (shared with convgemm::PackedA<float>):
// per K block of kGemmKC rows starting at k0, at offset k0 * m_padded, ceil(M/6) panels of kc x 6
// values (panel p at p * 6 * kc, element (r, k) at k * 6 + r), zero-padded to m_padded rows.
struct PackedAF32 {
  int64_t M = 0, K = 0;
  int64_t m_padded = 0;
  std::vector<float> data;
  bool empty() const { return data.empty(); }
};
PackedAF32 pack_a_f32(bool transA, int64_t M, int64_t K, const float* A, int64_t lda, float scale = 1.f);
constexpr int64_t kGemmKC = 256;  // K block of both packed layouts
constexpr int kGemmMR = 6, kGemmNR = 16;

// The general entry point.
void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
              const GemmEpilogue* epilogue = nullptr);

// C = epilogue(alpha * op(A) * B + beta * C) with B prepacked by pack_b_f32.
void gemm_f32_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                     float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue = nullptr);

// C = epilogue(alpha * A * op(B) + beta * C) with A prepacked by pack_a_f32 (or convgemm::pack_a<float>):
// `a_packed` points at data laid out as PackedAF32 for an M x K matrix.
void gemm_f32_packed_a(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, bool transB,
                       const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
                       const GemmEpilogue* epilogue = nullptr);

// Writes op(B)[p0:p0+kc, j0:j0+nc] as the engine's B block: ceil(nc/kGemmNR) panels of kc x kGemmNR
// floats (panel q at q * kGemmNR * kc, element (k, j) at k * kGemmNR + j), columns past nc zero. The
// engine calls it once per task and K block, from the thread running that task, with nc <= N.
using GemmBPacker = ep::FunctionRef<void(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst)>;

// C = epilogue(alpha * A * B + beta * C) with A prepacked (as gemm_f32_packed_a) and B produced block by
// block by `pack_b` (implicit GEMM: a convolution packs its im2col panels straight from the image, so no
// column matrix is written). Tasks split N first, so no two tasks pack the same B block.
void gemm_f32_packed_a_gen_b(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, GemmBPacker pack_b,
                             float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
                             const GemmEpilogue* epilogue = nullptr);

// A run of columns of an implicit GEMM whose B rows are read in place (a conv's padded input):
//   C[0:M, j0:j0+ncols] = epilogue(A * B),  B(k, j) = brow[boff[k] + j],
// A prepacked for an M x K matrix (as gemm_f32_packed_a). Columns go in strips of 16: each row start
// must have ncols rounded up to 16 readable floats (columns past ncols are computed and dropped). Runs
// on the calling thread; callers split the work.
void gemm_f32_strips(int64_t M, int64_t K, const float* a_packed, const float* brow, const int64_t* boff,
                     int64_t ncols, float* C, int64_t ldc, int64_t j0, const GemmEpilogue* epilogue = nullptr);

// Plain triple-loop GEMM with the same contract (double accumulation): the reference for tests.
void gemm_f32_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
                        const GemmEpilogue* epilogue = nullptr);

// Same contract in double precision (blocked less aggressively; used by MatMul/Gemm/Einsum on double).
void gemm_f64(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
              int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ep::ThreadPool* pool);

// Kernel selection: whether the AVX2+FMA kernels are in use, and a switch for tests/benchmarks to force
// the portable kernels (false) or return to automatic selection (true). Not thread-safe against
// concurrent GEMMs; set it before running.
bool gemm_using_avx2();
void gemm_set_allow_avx2(bool allow);

}  // namespace nxrt::ops
