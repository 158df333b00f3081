// Single-precision GEMM used by MatMul, Gemm, Einsum and (through im2col) Conv.
//
//   C[M,N] = alpha * op(A)[M,K] * op(B)[K,N] + beta * C
//
// op(A) is A (row-major, M x K, row stride lda) or, with transA, A^T where A is stored K x M (row
// stride lda); likewise B. When beta == 0, C is not read (NaN/garbage in C does not propagate).
// `pool` may be null (single-threaded). The call must not be made from inside a parallel_for of the
// same pool (the pool is not reentrant).
#pragma once
#include <cstdint>
#include <vector>

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

// Cache-blocked, packed, parallel GEMM (the fast path).
void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool);

// op(B) packed once for repeated GEMMs against the same right operand (constant weights): the panel
// layout the blocked kernel consumes, so calls skip packing B.
struct PackedB {
  int64_t K = 0, N = 0;
  int64_t n_padded = 0;     // N rounded up to the panel width
  std::vector<float> data;  // per K block of the kernel: n_padded x kc, in NR-wide column panels
  bool empty() const { return data.empty(); }
};
PackedB pack_b_f32(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb);

// C = alpha * op(A) * B + beta * C with B prepacked by pack_b_f32.
void gemm_f32_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                     float* C, int64_t ldc, ep::ThreadPool* pool);

// Plain triple-loop GEMM with the same contract (double accumulation): the reference for tests.
void gemm_f32_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Same contract in double precision (blocked less aggressively; used by MatMul/Gemm/Einsum on double).
void gemm_f64(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
              int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ep::ThreadPool* pool);

}  // namespace nxrt::ops
