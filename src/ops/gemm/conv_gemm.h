// A private cache-blocked GEMM for the convolution family (Conv, ConvTranspose, ConvInteger,
// DeformConv, the recurrent ops): C[M,N] (+)= op(A)[M,K] * op(B)[K,N], row-major.
//
// A is packed once into MR-row panels per KC block (PackedA; conv weights are packed at kernel creation
// when W is a constant), B is packed per task into NR-column panels, and an MR x NR micro-kernel runs
// over them. float runs on the shared engine of ops/gemm/gemm.h (AVX2+FMA 6x16 kernel chosen at run time,
// portable fallback; the PackedA<float> layout is PackedAF32); double uses a plain-loop kernel here.
#pragma once
#include <cstdint>
#include <vector>

#include "ep/thread_pool.h"

namespace nxrt::ops::convgemm {

template <typename T>
struct PackedA {
  int64_t M = 0, K = 0;
  std::vector<T> data;  // per KC block: ceil(M/MR) panels of kc*MR values, row r of a panel at k*MR + r
};

// Packs op(A) (M x K; A(i,k) = transA ? A[k*lda + i] : A[i*lda + k]) scaled by alpha.
template <typename T>
void pack_a(bool transA, int64_t M, int64_t K, const T* A, int64_t lda, T alpha, PackedA<T>* out);

// C = A*B (accumulate=false) or C += A*B (accumulate=true). op(B)(k,n) = transB ? B[n*ldb + k] : B[k*ldb + n].
// Parallel over tiles of C when pool is given.
template <typename T>
void gemm_packed(const PackedA<T>& A, int64_t N, bool transB, const T* B, int64_t ldb, T* C, int64_t ldc,
                 bool accumulate, ep::ThreadPool* pool);

// BLAS-like: C = alpha*op(A)*op(B) + beta*C.
template <typename T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, ep::ThreadPool* pool);

// The straightforward triple loop, for tests.
template <typename T>
void gemm_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// Whether the float path uses the AVX2 micro-kernel on this CPU (for tests and logs).
bool using_avx2();

}  // namespace nxrt::ops::convgemm
