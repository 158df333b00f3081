// Batched matrix multiplication shared by MatMul, Einsum and the integer matmuls.
#pragma once
#include <cstdint>
#include <type_traits>
#include <vector>

#include "ep/cpu_features.h"
#include "ops/common.h"
#include "ops/gemm/gemm.h"

namespace nxrt::ops {

void register_einsum_ops(ep::KernelRegistry& r);       // linalg/einsum.cpp
void register_quant_matmul_ops(ep::KernelRegistry& r);  // linalg/integer_matmul.cpp

// numpy.matmul shape logic. A/B 1-D operands are promoted ([K] -> [1,K] / [K,1]) and the promoted
// dim dropped from the output.
struct MatMulShape {
  int64_t M = 0, N = 0, K = 0;
  Dims batch;                 // broadcast batch dims
  Dims a_batch_strides;       // per batch dim, in matrices (0 where broadcast)
  Dims b_batch_strides;
  int64_t a_batches = 1, b_batches = 1;
  Dims out_shape;
  int64_t batch_count() const { return shape_numel(batch); }
  // Whether B (resp. A) is the same matrix for every batch.
  bool b_shared() const { return b_batches == 1; }
};
Result<MatMulShape> matmul_shape(const Dims& a, const Dims& b);

// A MatMul kernel that can apply a fused node's epilogue in its GEMM's store (FusedMatMul: a bias per
// output column, a residual of the output's shape, the activation), which saves the passes over the
// output the fused kernel would make after it. compute_with_post computes output 0 with `ep` applied
// and returns true; or computes nothing and returns false when this call cannot take it (a B that was
// not packed at creation, a bias that is not `bias_len` = the output's N values, a residual whose
// shape is not the output's), and the caller then runs the plain compute and its own epilogue.
// `ep.residual`'s row stride and `ep.isa` are set here (the output's N, the kernel's tier).
class MatMulWithPost {
 public:
  virtual ~MatMulWithPost() = default;
  virtual Result<bool> compute_with_post(ep::KernelContext& ctx, GemmEpilogue ep, int64_t bias_len,
                                         const Dims* residual_shape) const = 0;
};

// How matmul_batched runs a batched product, decided from the shape once (MatMul's variant keeps it):
// how the batches go over the threads, and the float engine's plan for one of its GEMMs (float and the
// reduced floats, which compute in float; unused for other types).
struct MatMulPlan {
  enum class Batches : uint8_t {
    kTall,    // B shared and A's batches contiguous: one GEMM of batch_count * M rows on the pool
    kEach,    // one GEMM per batch in turn, each on the pool (one batch, or enough work in each)
    kChunks,  // batches in parallel_for chunks, each GEMM single-threaded on its chunk's thread
  };
  Batches batches = Batches::kEach;
  int64_t chunk_grain = 1;  // kChunks: the parallel_for grain (batches)
  GemmPlan gemm;            // its packing scratch: gemm.scratch_floats per slot, a slot per pool thread
};
// The plan for s on a pool of `pool_threads` threads at tier `isa`.
MatMulPlan matmul_plan(const MatMulShape& s, int pool_threads, ep::IsaTier isa = ep::cpu_isa_tier());

// Y[batch, M, N] = A x B for contiguous row-major operands laid out per MatMulShape.
// float/double go through the blocked GEMM (float at the caller's tier); reduced floats compute in float;
// integers wrap. `plan`: matmul_plan(s, pool.num_threads(), isa), else made per call. `scratch`: the float
// GEMM's packing scratch for pool.num_threads() slots of plan->gemm.scratch_floats (else the GEMM
// allocates per call).
template <typename T>
void matmul_batched(const T* A, const T* B, T* Y, const MatMulShape& s, ep::ThreadPool& pool,
                    ep::IsaTier isa = ep::cpu_isa_tier(), const GemmScratch* scratch = nullptr,
                    const MatMulPlan* plan = nullptr);

// Integer GEMM (row-major, C = A x B, wrapping arithmetic in AccT).
template <typename T, typename AccT>
void gemm_int(int64_t M, int64_t N, int64_t K, const T* A, const T* B, AccT* C) {
  using U = std::make_unsigned_t<AccT>;
  for (int64_t i = 0; i < M; ++i) {
    U* c = reinterpret_cast<U*>(C + i * N);
    for (int64_t j = 0; j < N; ++j) c[j] = 0;
    for (int64_t k = 0; k < K; ++k) {
      const U a = static_cast<U>(static_cast<AccT>(A[i * K + k]));
      const T* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) c[j] += a * static_cast<U>(static_cast<AccT>(b[j]));
    }
  }
}

}  // namespace nxrt::ops
