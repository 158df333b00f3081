#include "ops/gemm/conv_gemm.h"

#include <algorithm>
#include <cstring>

#include <type_traits>

#include "ops/gemm/gemm.h"

namespace nxrt::ops::convgemm {

namespace {

constexpr int64_t kKC = 256;  // K block: an A panel (MR x KC) stays in L1, a B tile (KC x NT) in L2
constexpr int64_t kNT = 256;  // columns of C per task

template <typename T> struct Tile;
template <> struct Tile<float> { static constexpr int MR = 6, NR = 16; };
template <> struct Tile<double> { static constexpr int MR = 4, NR = 8; };

template <typename T>
using MicroKernel = void (*)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, int mr, int nr);

// Plain loops: acc[MR][NR] lives in registers; the compiler vectorizes the column loop.
template <typename T, int MR, int NR>
void micro_generic(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, int mr, int nr) {
  T acc[MR][NR] = {};
  for (int64_t k = 0; k < kc; ++k) {
    for (int r = 0; r < MR; ++r) {
      const T av = a[r];
      for (int j = 0; j < NR; ++j) acc[r][j] += av * b[j];
    }
    a += MR;
    b += NR;
  }
  if (mr == MR && nr == NR) {
    for (int r = 0; r < MR; ++r) {
      T* cr = c + r * ldc;
      for (int j = 0; j < NR; ++j) cr[j] += acc[r][j];
    }
  } else {
    for (int r = 0; r < mr; ++r) {
      T* cr = c + r * ldc;
      for (int j = 0; j < nr; ++j) cr[j] += acc[r][j];
    }
  }
}

template <typename T>
MicroKernel<T> pick_kernel() {
  return &micro_generic<T, Tile<T>::MR, Tile<T>::NR>;
}

// Packs rows [k0, k0+kc) x columns [n0, n0+nt) of op(B) into NR-wide panels (zero-padded).
template <typename T, int NR>
void pack_b(bool transB, const T* B, int64_t ldb, int64_t k0, int64_t kc, int64_t n0, int64_t nt, T* dst) {
  for (int64_t j0 = 0; j0 < nt; j0 += NR) {
    const int64_t nr = std::min<int64_t>(NR, nt - j0);
    T* p = dst + j0 * kc;
    if (!transB) {
      const T* src = B + k0 * ldb + n0 + j0;
      if (nr == NR) {
        for (int64_t k = 0; k < kc; ++k) {
          std::memcpy(p + k * NR, src + k * ldb, sizeof(T) * NR);
        }
      } else {
        for (int64_t k = 0; k < kc; ++k) {
          T* row = p + k * NR;
          const T* s = src + k * ldb;
          int64_t j = 0;
          for (; j < nr; ++j) row[j] = s[j];
          for (; j < NR; ++j) row[j] = T(0);
        }
      }
    } else {
      for (int64_t k = 0; k < kc; ++k) {
        T* row = p + k * NR;
        int64_t j = 0;
        for (; j < nr; ++j) row[j] = B[(n0 + j0 + j) * ldb + k0 + k];
        for (; j < NR; ++j) row[j] = T(0);
      }
    }
  }
}

}  // namespace

template <typename T>
void pack_a(bool transA, int64_t M, int64_t K, const T* A, int64_t lda, T alpha, PackedA<T>* out) {
  constexpr int MR = Tile<T>::MR;
  const int64_t Mp = (M + MR - 1) / MR * MR;
  out->M = M;
  out->K = K;
  out->data.assign(static_cast<size_t>(Mp * K), T(0));
  for (int64_t k0 = 0; k0 < K; k0 += kKC) {
    const int64_t kc = std::min(kKC, K - k0);
    T* blk = out->data.data() + k0 * Mp;
    for (int64_t i0 = 0; i0 < M; i0 += MR) {
      T* p = blk + i0 * kc;
      const int64_t mr = std::min<int64_t>(MR, M - i0);
      for (int64_t k = 0; k < kc; ++k) {
        for (int64_t r = 0; r < mr; ++r) {
          const T v = transA ? A[(k0 + k) * lda + i0 + r] : A[(i0 + r) * lda + k0 + k];
          p[k * MR + r] = alpha * v;
        }
      }
    }
  }
}

template <typename T>
void gemm_packed(const PackedA<T>& A, int64_t N, bool transB, const T* B, int64_t ldb, T* C, int64_t ldc,
                 bool accumulate, ep::ThreadPool* pool) {
  if constexpr (std::is_same_v<T, float>) {
    // The shared float engine: PackedA<float> has its PackedAF32 layout (same MR and K block).
    static_assert(Tile<float>::MR == kGemmMR && kKC == kGemmKC);
    if (A.M <= 0 || N <= 0) return;
    gemm_f32_packed_a(A.M, N, A.K, 1.f, A.data.data(), transB, B, ldb, accumulate ? 1.f : 0.f, C, ldc, pool);
    return;
  }
  constexpr int MR = Tile<T>::MR;
  constexpr int NR = Tile<T>::NR;
  const int64_t M = A.M, K = A.K;
  if (M <= 0 || N <= 0) return;
  if (!accumulate) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
  }
  if (K <= 0) return;
  const int64_t Mp = (M + MR - 1) / MR * MR;
  const int64_t panels = Mp / MR;
  const int threads = pool ? pool->num_threads() : 1;
  // Columns per task: kNT, or fewer when that leaves threads idle on a narrow C.
  int64_t nt = kNT;
  const int64_t n_tiles_full = (N + nt - 1) / nt;
  if (n_tiles_full < threads && N > NR) {
    nt = std::max<int64_t>(NR, ((N + threads - 1) / threads + NR - 1) / NR * NR);
  }
  const int64_t n_tiles = (N + nt - 1) / nt;
  int64_t m_chunks = 1;
  if (n_tiles < 2 * threads) m_chunks = std::min<int64_t>(panels, (2 * threads + n_tiles - 1) / n_tiles);
  const int64_t panels_per_chunk = (panels + m_chunks - 1) / m_chunks;
  m_chunks = (panels + panels_per_chunk - 1) / panels_per_chunk;
  const MicroKernel<T> kern = pick_kernel<T>();

  auto task = [&](int64_t t0, int64_t t1) {
    thread_local std::vector<T> bbuf;
    const size_t need = static_cast<size_t>(std::min(kKC, K) * ((nt + NR - 1) / NR * NR));
    if (bbuf.size() < need) bbuf.resize(need);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t tn = t / m_chunks, tm = t % m_chunks;
      const int64_t n0 = tn * nt, ncols = std::min(nt, N - n0);
      const int64_t p0 = tm * panels_per_chunk, p1 = std::min(panels, p0 + panels_per_chunk);
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kc = std::min(kKC, K - k0);
        pack_b<T, NR>(transB, B, ldb, k0, kc, n0, ncols, bbuf.data());
        const T* ablk = A.data.data() + k0 * Mp;
        for (int64_t p = p0; p < p1; ++p) {
          const T* ap = ablk + p * MR * kc;
          const int mr = static_cast<int>(std::min<int64_t>(MR, M - p * MR));
          T* crow = C + p * MR * ldc + n0;
          for (int64_t j0 = 0; j0 < ncols; j0 += NR) {
            const int nr = static_cast<int>(std::min<int64_t>(NR, ncols - j0));
            kern(kc, ap, bbuf.data() + j0 * kc, crow + j0, ldc, mr, nr);
          }
        }
      }
    }
  };
  const int64_t tasks = n_tiles * m_chunks;
  if (pool && tasks > 1) {
    pool->parallel_for(tasks, 1, task);
  } else {
    task(0, tasks);
  }
}

template <typename T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
          const T* B, int64_t ldb, T beta, T* C, int64_t ldc, ep::ThreadPool* pool) {
  if (M <= 0 || N <= 0) return;
  if constexpr (std::is_same_v<T, float>) {
    gemm_f32(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, pool);
    return;
  }
  if (beta == T(0)) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, T(0));
  } else if (beta != T(1)) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] *= beta;
  }
  if (K <= 0 || alpha == T(0)) return;
  PackedA<T> pa;
  pack_a(transA, M, K, A, lda, alpha, &pa);
  gemm_packed(pa, N, transB, B, ldb, C, ldc, /*accumulate=*/true, pool);
}

template <typename T>
void gemm_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T beta, T* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const T a = transA ? A[k * lda + i] : A[i * lda + k];
        const T b = transB ? B[j * ldb + k] : B[k * ldb + j];
        acc += static_cast<double>(a) * static_cast<double>(b);
      }
      const T prev = beta == T(0) ? T(0) : beta * C[i * ldc + j];
      C[i * ldc + j] = static_cast<T>(alpha * static_cast<T>(acc) + prev);
    }
  }
}

bool using_avx2() { return gemm_using_avx2(); }

#define NXRT_CONVGEMM_INSTANTIATE(T)                                                                      \
  template void pack_a<T>(bool, int64_t, int64_t, const T*, int64_t, T, PackedA<T>*);                     \
  template void gemm_packed<T>(const PackedA<T>&, int64_t, bool, const T*, int64_t, T*, int64_t, bool,    \
                               ep::ThreadPool*);                                                          \
  template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, \
                        T*, int64_t, ep::ThreadPool*);                                                    \
  template void gemm_reference<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*,  \
                                  int64_t, T, T*, int64_t);
NXRT_CONVGEMM_INSTANTIATE(float)
NXRT_CONVGEMM_INSTANTIATE(double)

}  // namespace nxrt::ops::convgemm
