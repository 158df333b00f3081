// The double-precision GEMM (gemm_f64), the typed front doors (gemm<T>, gemm_packed_a<T>, pack_a<double>)
// and the reference; the float engine lives in gemm/gemm_f32.cpp.
// Cache-blocked GEMM: B is packed into KC x NC panels of NR-wide column strips, A into MC x KC blocks
// of MR-high row strips (zero-padded at the edges), and a register-blocked MR x NR micro-kernel (plain
// loops over constant trip counts, which g++ -O3 keeps in vector registers) runs over the packed
// data. Tiles of C (MC x NC) are independent tasks on the thread pool.
#include "ops/gemm/gemm.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "ep/thread_pool.h"

namespace nxrt::ops {

namespace {

template <typename T> struct GemmParams;
template <> struct GemmParams<double> {
  static constexpr int MR = kGemmPanelRows<double>, NR = 4;
  static constexpr int64_t MC = 64, KC = 256, NC = 256;
};

// Packs X[i0:i0+mc, p0:p0+kc] (X(i, p) = trans ? X[p * ld + i] : X[i * ld + p]) as ceil(mc/R) strips, each
// kc x R (the strip's row index fastest), zero-padded: A's row panels with R = MR, and B's column panels
// with R = NR on B viewed transposed.
template <typename T, int R>
void pack_strips(const T* X, int64_t ld, bool trans, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* out) {
  for (int64_t ir = 0; ir < mc; ir += R) {
    const int64_t rows = std::min<int64_t>(R, mc - ir);
    T* dst = out + ir * kc;
    if (!trans) {
      for (int64_t i = 0; i < R; ++i) {
        if (i < rows) {
          const T* src = X + (i0 + ir + i) * ld + p0;
          for (int64_t p = 0; p < kc; ++p) dst[p * R + i] = src[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) dst[p * R + i] = T(0);
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const T* src = X + (p0 + p) * ld + i0 + ir;
        int64_t i = 0;
        for (; i < rows; ++i) dst[p * R + i] = src[i];
        for (; i < R; ++i) dst[p * R + i] = T(0);
      }
    }
  }
}

// op(A)[i0:i0+mc, p0:p0+kc] as ceil(mc/MR) strips of kc x MR.
template <typename T>
void pack_a(const T* A, int64_t lda, bool transA, int64_t i0, int64_t mc, int64_t p0, int64_t kc, T* out) {
  pack_strips<T, GemmParams<T>::MR>(A, lda, transA, i0, mc, p0, kc, out);
}

// op(B)[p0:p0+kc, j0:j0+nc] as ceil(nc/NR) strips of kc x NR (column index fastest): op(B)^T's row strips.
template <typename T>
void pack_b(const T* B, int64_t ldb, bool transB, int64_t p0, int64_t kc, int64_t j0, int64_t nc, T* out) {
  pack_strips<T, GemmParams<T>::NR>(B, ldb, !transB, j0, nc, p0, kc, out);
}

// acc[MR*NR] = sum_p a[p*MR + i] * b[p*NR + j]. The flat accumulator with fully unrolled constant loops is
// what g++ -O3 turns into MR*NR/4 vector registers with broadcast-multiply-add (measured ~35 GFLOPS/core
// with SSE2 only; the shuffle-heavy code it emits for a 2-D c[MR][NR] runs at a third of that).
template <typename T>
inline void micro_kernel(int64_t kc, const T* __restrict a, const T* __restrict b, T* __restrict acc) {
  constexpr int MR = GemmParams<T>::MR, NR = GemmParams<T>::NR;
  T c[MR * NR] = {};
  for (int64_t p = 0; p < kc; ++p) {
    const T* bp = b + p * NR;
    const T* ap = a + p * MR;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 16
      for (int j = 0; j < NR; ++j) c[i * NR + j] += ap[i] * bp[j];
    }
  }
  for (int i = 0; i < MR * NR; ++i) acc[i] = c[i];
}

// Writes an rows x cols corner of acc into C: first k-block applies beta, later ones accumulate.
template <typename T>
inline void store_tile(const T* acc, int64_t rows, int64_t cols, T alpha, T beta, bool first, T* C, int64_t ldc) {
  constexpr int NR = GemmParams<T>::NR;
  for (int64_t i = 0; i < rows; ++i) {
    T* c = C + i * ldc;
    const T* a = acc + i * NR;
    if (!first) {
      for (int64_t j = 0; j < cols; ++j) c[j] += alpha * a[j];
    } else if (beta == T(0)) {
      for (int64_t j = 0; j < cols; ++j) c[j] = alpha * a[j];
    } else {
      for (int64_t j = 0; j < cols; ++j) c[j] = alpha * a[j] + beta * c[j];
    }
  }
}

template <typename T>
void scale_c(int64_t M, int64_t N, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0)) {
      for (int64_t j = 0; j < N; ++j) c[j] = T(0);
    } else if (beta != T(1)) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

void run_parallel(ep::ThreadPool* pool, int64_t n, int64_t grain, ep::FunctionRef<void(int64_t, int64_t)> fn) {
  if (pool && pool->num_threads() > 1) {
    pool->parallel_for(n, grain, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

// y[1,N] = alpha * a[K] * op(B) + beta * y.
template <typename T>
void gemv_row(bool transB, int64_t N, int64_t K, T alpha, const T* a, const T* B, int64_t ldb, T beta, T* y,
              ep::ThreadPool* pool) {
  const int64_t grain = std::max<int64_t>(16, 32768 / std::max<int64_t>(K, 1));
  run_parallel(pool, N, grain, [&](int64_t j0, int64_t j1) {
    const int64_t n = j1 - j0;
    if (transB) {
      for (int64_t j = j0; j < j1; ++j) {
        const T* b = B + j * ldb;
        T s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int64_t k = 0;
        for (; k + 4 <= K; k += 4) {
          s0 += a[k] * b[k];
          s1 += a[k + 1] * b[k + 1];
          s2 += a[k + 2] * b[k + 2];
          s3 += a[k + 3] * b[k + 3];
        }
        for (; k < K; ++k) s0 += a[k] * b[k];
        T s = (s0 + s1) + (s2 + s3);
        y[j] = beta == T(0) ? alpha * s : alpha * s + beta * y[j];
      }
    } else {
      std::vector<T> acc(static_cast<size_t>(n), T(0));
      T* __restrict ac = acc.data();
      for (int64_t k = 0; k < K; ++k) {
        const T av = a[k];
        const T* __restrict b = B + k * ldb + j0;
        for (int64_t j = 0; j < n; ++j) ac[j] += av * b[j];
      }
      for (int64_t j = 0; j < n; ++j) y[j0 + j] = beta == T(0) ? alpha * ac[j] : alpha * ac[j] + beta * y[j0 + j];
    }
  });
}

// y[1,N] = alpha * a[K] * B + beta * y with B prepacked (NR-wide panels per K block).
template <typename T>
void gemv_packed(int64_t N, int64_t K, T alpha, const T* a, const T* packed, int64_t n_padded, T beta, T* y,
                 ep::ThreadPool* pool) {
  using P = GemmParams<T>;
  constexpr int NR = P::NR;
  const int64_t panels = n_padded / NR;
  run_parallel(pool, panels, std::max<int64_t>(1, 4096 / std::max<int64_t>(K, 1)), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      T acc[NR] = {};
      for (int64_t p0 = 0; p0 < K; p0 += P::KC) {
        const int64_t kc = std::min<int64_t>(P::KC, K - p0);
        const T* bp = packed + p0 * n_padded + q * NR * kc;
        for (int64_t p = 0; p < kc; ++p) {
          const T av = a[p0 + p];
#pragma GCC unroll 16
          for (int j = 0; j < NR; ++j) acc[j] += av * bp[p * NR + j];
        }
      }
      const int64_t j0 = q * NR, cols = std::min<int64_t>(NR, N - j0);
      for (int64_t j = 0; j < cols; ++j) y[j0 + j] = beta == T(0) ? alpha * acc[j] : alpha * acc[j] + beta * y[j0 + j];
    }
  });
}

template <typename T>
void gemm_blocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                  const T* B, int64_t ldb, T beta, T* C, int64_t ldc, ep::ThreadPool* pool,
                  const T* prepacked = nullptr, int64_t n_padded = 0, const PackedA<T>* a_packed = nullptr) {
  using P = GemmParams<T>;
  constexpr int MR = P::MR, NR = P::NR;
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == T(0)) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  if (prepacked && M == 1) {
    if (transA && lda != 1) {
      std::vector<T> a(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) a[k] = A[k * lda];
      gemv_packed(N, K, alpha, a.data(), prepacked, n_padded, beta, C, pool);
    } else {
      gemv_packed(N, K, alpha, A, prepacked, n_padded, beta, C, pool);
    }
    return;
  }
  if (prepacked || a_packed) {
    // fall through to the blocked path; panels come from the prepacked buffers
  } else if (M == 1) {
    if (transA && lda != 1) {
      std::vector<T> a(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) a[k] = A[k * lda];
      gemv_row(transB, N, K, alpha, a.data(), B, ldb, beta, C, pool);
    } else {
      gemv_row(transB, N, K, alpha, A, B, ldb, beta, C, pool);
    }
    return;
  }
  if (!prepacked && !a_packed && N == 1) {
    // C[M,1] = op(A) b: the transpose problem y[1,M] = b^T op(A)^T, with y strided by ldc.
    std::vector<T> b(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) b[k] = transB ? B[k] : B[k * ldb];
    if (ldc == 1) {
      gemv_row(!transA, M, K, alpha, b.data(), A, lda, beta, C, pool);
    } else {
      std::vector<T> y(static_cast<size_t>(M));
      for (int64_t i = 0; i < M; ++i) y[i] = C[i * ldc];
      gemv_row(!transA, M, K, alpha, b.data(), A, lda, beta, y.data(), pool);
      for (int64_t i = 0; i < M; ++i) C[i * ldc] = y[i];
    }
    return;
  }

  const int threads = pool ? pool->num_threads() : 1;
  const int64_t mc_blk = P::MC;
  const int64_t m_blocks = (M + mc_blk - 1) / mc_blk;
  int64_t nc_blk = P::NC;
  // Enough tiles to keep every thread busy: shrink the N block when M alone does not provide them.
  if (threads > 1 && m_blocks * ((N + nc_blk - 1) / nc_blk) < 2 * threads) {
    int64_t want_nb = (2 * threads + m_blocks - 1) / m_blocks;
    int64_t nc = (N + want_nb - 1) / want_nb;
    nc = (nc + NR - 1) / NR * NR;
    nc_blk = std::max<int64_t>(std::min<int64_t>(nc, P::NC), 4 * NR);
  }
  const int64_t n_blocks = (N + nc_blk - 1) / nc_blk;
  const int64_t kc_blk = P::KC;

  // Per-thread packing buffers, sized to this problem (blocks no larger than M, N, K): one slot per
  // pool thread in one allocation per call, each task on its thread's slot (ThreadPool::slot()).
  const int64_t kc_max = std::min(kc_blk, K);
  const size_t a_need = a_packed ? 0 : static_cast<size_t>(((std::min(mc_blk, M) + MR - 1) / MR * MR) * kc_max);
  const size_t b_need = prepacked ? 0 : static_cast<size_t>(((std::min(nc_blk, N) + NR - 1) / NR * NR) * kc_max);
  const size_t slot_elems = (a_need + b_need + 7) / 8 * 8;  // 64-byte multiple
  const int slots = pool ? pool->num_threads() : 1;
  std::unique_ptr<T[]> scratch(new T[slot_elems * static_cast<size_t>(slots)]);

  auto tile = [&](int64_t t0, int64_t t1) {
    T* a_buf = scratch.get() + static_cast<size_t>(pool ? pool->slot() : 0) * slot_elems;
    T* b_buf = a_buf + a_need;
    alignas(64) T acc[MR * NR];
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t ib = t / n_blocks, jb = t % n_blocks;
      const int64_t i0 = ib * mc_blk, mc = std::min(mc_blk, M - i0);
      const int64_t j0 = jb * nc_blk, nc = std::min(nc_blk, N - j0);
      for (int64_t p0 = 0; p0 < K; p0 += kc_blk) {
        const int64_t kc = std::min(kc_blk, K - p0);
        const bool first = p0 == 0;
        const T* bpanels;
        if (prepacked) {
          bpanels = prepacked + p0 * n_padded + j0 * kc;
        } else {
          pack_b(B, ldb, transB, p0, kc, j0, nc, b_buf);
          bpanels = b_buf;
        }
        const T* apanels;
        if (a_packed) {
          apanels = a_packed->data.data() + p0 * a_packed->m_padded + i0 * kc;
        } else {
          pack_a(A, lda, transA, i0, mc, p0, kc, a_buf);
          apanels = a_buf;
        }
        for (int64_t jr = 0; jr < nc; jr += NR) {
          const int64_t cols = std::min<int64_t>(NR, nc - jr);
          const T* bp = bpanels + jr * kc;
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int64_t rows = std::min<int64_t>(MR, mc - ir);
            micro_kernel<T>(kc, apanels + ir * kc, bp, acc);
            store_tile<T>(acc, rows, cols, alpha, beta, first, C + (i0 + ir) * ldc + j0 + jr, ldc);
          }
        }
      }
    }
  };
  run_parallel(pool, m_blocks * n_blocks, 1, tile);
}

}  // namespace

void gemm_f64(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
              int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ep::ThreadPool* pool,
              const PackedA<double>* a_packed) {
  gemm_blocked<double>(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool, nullptr, 0, a_packed);
}

template <>
PackedA<double> pack_a<double>(bool transA, int64_t M, int64_t K, const double* A, int64_t lda, double scale) {
  constexpr int64_t R = kGemmPanelRows<double>;
  PackedA<double> pa;
  pa.M = M;
  pa.K = K;
  pa.m_padded = (M + R - 1) / R * R;
  pa.data = PackedArray<double>(static_cast<size_t>(std::max<int64_t>(1, pa.m_padded * K)));
  for (int64_t k0 = 0; k0 < K && M > 0; k0 += kGemmKC) {
    const int64_t kc = std::min(kGemmKC, K - k0);
    double* blk = pa.data.data() + k0 * pa.m_padded;
    pack_a(A, lda, transA, 0, M, k0, kc, blk);
    if (scale != 1.0) {
      for (int64_t i = 0; i < pa.m_padded * kc; ++i) blk[i] *= scale;
    }
  }
  return pa;
}

template <>
void gemm<float>(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
                 ep::IsaTier isa, const GemmScratch* scratch) {
  gemm_f32(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool, nullptr, isa, scratch);
}

template <>
void gemm<double>(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
                  int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ep::ThreadPool* pool,
                  ep::IsaTier, const GemmScratch*) {
  gemm_f64(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
}

template <>
void gemm_packed_a<float>(const PackedA<float>& A, int64_t N, bool transB, const float* B, int64_t ldb, float beta,
                          float* C, int64_t ldc, ep::ThreadPool* pool, ep::IsaTier isa, const GemmScratch* scratch) {
  if (A.M <= 0 || N <= 0) return;
  gemm_f32_packed_a(A.M, N, A.K, 1.f, A.data.data(), transB, B, ldb, beta, C, ldc, pool, nullptr, isa, scratch);
}

template <>
void gemm_packed_a<double>(const PackedA<double>& A, int64_t N, bool transB, const double* B, int64_t ldb,
                           double beta, double* C, int64_t ldc, ep::ThreadPool* pool, ep::IsaTier,
                           const GemmScratch*) {
  gemm_f64(false, transB, A.M, N, A.K, 1.0, nullptr, 0, B, ldb, beta, C, ldc, pool, &A);
}

template <typename T>
void gemm_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const GemmEpilogue* epilogue) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) {
        const T a = transA ? A[k * lda + i] : A[i * lda + k];
        const T b = transB ? B[j * ldb + k] : B[k * ldb + j];
        s += static_cast<double>(a) * static_cast<double>(b);
      }
      const T v = static_cast<T>(alpha * s);
      C[i * ldc + j] = beta == T(0) ? v : v + beta * C[i * ldc + j];
    }
  }
  if (!epilogue || epilogue->empty()) return;
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      T& v = C[i * ldc + j];
      if (epilogue->bias && epilogue->bias_kind == GemmBias::kPerColumn) v += epilogue->bias[j];
      if (epilogue->bias && epilogue->bias_kind == GemmBias::kPerRow) v += epilogue->bias[i];
      if (epilogue->residual) v += epilogue->residual[i * epilogue->ldr + j];
      v = apply_activation(epilogue->act, v, epilogue->act_a, epilogue->act_b);
    }
  }
}
template void gemm_reference<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                    int64_t, float, float*, int64_t, const GemmEpilogue*);
template void gemm_reference<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                     const double*, int64_t, double, double*, int64_t, const GemmEpilogue*);

}  // namespace nxrt::ops
