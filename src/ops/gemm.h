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

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

// Cache-blocked, packed, parallel GEMM (the fast path).
void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool);

// Plain triple-loop GEMM with the same contract (double accumulation): the reference for tests.
void gemm_f32_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                        int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc);

// Same contract in double precision (blocked less aggressively; used by MatMul/Gemm/Einsum on double).
void gemm_f64(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
              int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ep::ThreadPool* pool);

}  // namespace nxrt::ops
