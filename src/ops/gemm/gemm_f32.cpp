// The float32 GEMM engine behind gemm/gemm.h: blocking, packing and threading; the ISA-specific
// kernels come from the variant the caller's tier picks (gemm_kernels.h).
//
// Blocking (Zen 4 / Haswell-class core: 32 KiB L1d, 1 MiB L2):
//   KC = 256   a 6 x KC A micro-panel (6 KiB) and a KC x 16 B micro-panel (16 KiB) fit L1 together
//   MC = 144   an MC x KC block of packed A (144 KiB), walked one 6-row micro-panel (L1) at a time
//   NC <= 1024 a KC x NC block of packed B streamed under each A micro-panel, at most half the L2
//              (512 KiB: 512 columns at KC = 256), so it is read from L2 and not L3 (block_columns)
// Loop order per task (one NC column block x a range of MC row blocks):
//   for each KC block: pack B (or point into PackedB); for each MC block: pack A (or point into
//   PackedA<float>, or, a raw non-transposed A on a tier with tile_a_rows, read its rows in place); for
//   each 6-row micro-panel of A: for each run of n_panels 16-column micro-panels of B (one for AVX2, up
//   to four for AVX-512): micro-kernel.
// The epilogue runs on each tile of C right after its last K block.
// gemm_f32_plan makes every one of these choices from the shape, the operand forms, the tier and the
// pool's width (a GemmPlan); engine() checks the run-time conditions a plan cannot know and execute()
// runs it. The loops above and the micro-kernels are the same whether a plan is made per call or kept.
#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "ops/elementwise/vec_math.h"
#include "ops/gemm/gemm_kernels.h"

namespace nxrt::ops {

namespace {

constexpr int MR = kGemmMR, NR = kGemmNR;
constexpr int64_t KC = kGemmKC;
constexpr int64_t MC = 144;
constexpr int64_t NC = 1024;
static_assert(NC + NR <= kGemmMaxBlockCols, "B packers size their stack scratch by kGemmMaxBlockCols");
// The most bytes of packed B one column block holds: half of a 1 MiB L2, leaving room for the C rows
// and A panels that stream past it.
constexpr int64_t kBBlockBytes = int64_t(512) << 10;

// The widest column block for a K of `K`: NC, narrowed (whole panels) so KC x columns stays within
// kBBlockBytes. Every 6-row A micro-panel re-reads the whole block, so a block that spills out of L2
// is fetched from L3 once per micro-panel. Zen 5 (1 MiB L2), 1 thread, in-model per-node trace (lower
// quartile): DenseNet-121's twelve pre-activated 1x1 ->128 convs @28x28 (K 128-480) 5.1-5.2 -> 4.7 ms,
// its 512->256 @28x28 1.26-1.28 -> 1.14-1.15; ResNet-50's 256->128 @56x56 1.46-1.51 -> 1.31-1.42.
int64_t block_columns(int64_t K) {
  const int64_t kc = std::max<int64_t>(1, std::min(K, KC));
  const int64_t cols = kBBlockBytes / (kc * int64_t(sizeof(float))) / NR * NR;
  return std::clamp<int64_t>(cols, 16 * NR, NC);
}
// The engine's column blocks before any split over threads: n_blocks of at most nc_max columns, evened
// out to whole panels. A split over threads (split_n) only makes the blocks narrower.
int64_t plain_column_blocks(int64_t N, int64_t K) {
  const int64_t panels = (N + NR - 1) / NR;
  const int64_t nc_max = block_columns(K);
  return std::min<int64_t>(panels, (N + nc_max - 1) / nc_max);
}
constexpr size_t round16(size_t n) { return (n + 15) / 16 * 16; }

// The width of the next tile with `left` columns to go on a kernel of tile_cols-wide tiles: whole tiles,
// except that a run which would end in a lone panel (1-16 columns after a full tile) ends in two
// narrower tiles instead (..., 48, 17-32 on the 64-column AVX-512 tile). A one-panel tile has 6
// accumulators, split over even and odd k to hide the FMA latency, and costs ~1.3x a panel of a wide
// tile: the 4 columns past 192 of a 14x14 plane (196 columns) took 8% of ResNet-50's 1x1 convs there.
int tile_width(int64_t left, int64_t tile_cols) {
  if (tile_cols >= 3 * NR && left > tile_cols && left - tile_cols <= NR) return static_cast<int>(tile_cols - NR);
  return static_cast<int>(std::min(left, tile_cols));
}

// At most this many 6-row A micro-panels, a prepacked A against a raw B is packed and multiplied in
// column blocks of kFewRowBlockCols (gemm_f32_plan says why).
constexpr int64_t kFewRowPanels = 6, kFewRowBlockCols = 4 * NR;

// Column blocks per thread when the threads split a GEMM's columns (GemmPlan::split_n).
constexpr int64_t kSplitBlocksPerThread = 8;
// Below this many multiply-adds a GEMM stays on the calling thread (waking workers costs more).
constexpr int64_t kParallelMacs = int64_t(1) << 20;


// ---------------------------------------------------------------------------------------------
// Packing.

// op(A)[i0:i0+mc, p0:p0+kc] as ceil(mc/MR) panels of kc x MR (row index fastest), zero-padded; scaled.
void pack_a_block(const float* A, int64_t lda, bool transA, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                  float* out, float scale) {
  for (int64_t ir = 0; ir < mc; ir += MR) {
    const int64_t rows = std::min<int64_t>(MR, mc - ir);
    float* dst = out + ir * kc;
    if (!transA) {
      const float* src[MR];
      for (int64_t i = 0; i < MR; ++i) src[i] = A + (i0 + ir + std::min<int64_t>(i, rows - 1)) * lda + p0;
      if (rows == MR && scale == 1.f) {
        for (int64_t p = 0; p < kc; ++p) {
          float* d = dst + p * MR;
          d[0] = src[0][p]; d[1] = src[1][p]; d[2] = src[2][p];
          d[3] = src[3][p]; d[4] = src[4][p]; d[5] = src[5][p];
        }
      } else {
        for (int64_t p = 0; p < kc; ++p) {
          float* d = dst + p * MR;
          for (int64_t i = 0; i < MR; ++i) d[i] = i < rows ? scale * src[i][p] : 0.f;
        }
      }
    } else {
      for (int64_t p = 0; p < kc; ++p) {
        const float* src = A + (p0 + p) * lda + i0 + ir;
        float* d = dst + p * MR;
        int64_t i = 0;
        for (; i < rows; ++i) d[i] = scale * src[i];
        for (; i < MR; ++i) d[i] = 0.f;
      }
    }
  }
}


// op(B)[p0:p0+kc, j0:j0+nc] as ceil(nc/NR) panels of kc x NR (column index fastest), zero-padded.
void pack_b_block(const F32GemmKernels& kern, const float* B, int64_t ldb, bool transB, int64_t p0, int64_t kc,
                  int64_t j0, int64_t nc, float* out) {
  if (!transB) {
    const int64_t full = nc / NR;
    for (int64_t p = 0; p < kc; ++p) {
      const float* src = B + (p0 + p) * ldb + j0;
      float* dst = out + p * NR;
      for (int64_t q = 0; q < full; ++q) std::memcpy(dst + q * NR * kc, src + q * NR, sizeof(float) * NR);
    }
  }
  for (int64_t jr = 0; jr < nc; jr += NR) {
    const int64_t cols = std::min<int64_t>(NR, nc - jr);
    float* dst = out + jr * kc;
    if (!transB) {
      const float* src = B + p0 * ldb + j0 + jr;
      if (cols == NR) {
        // Whole panels: rows outer so B is read sequentially (handled below for all full panels at once).
        continue;
      } else {
        for (int64_t p = 0; p < kc; ++p) {
          float* d = dst + p * NR;
          const float* s = src + p * ldb;
          int64_t j = 0;
          for (; j < cols; ++j) d[j] = s[j];
          for (; j < NR; ++j) d[j] = 0.f;
        }
      }
    } else {
      // B stored N x K: column j of op(B) is row j of B (contiguous in p).
      if (cols == NR && kern.pack_b_trans_panel) {
        kern.pack_b_trans_panel(B + (j0 + jr) * ldb + p0, ldb, kc, dst);
        continue;
      }
      for (int64_t j = 0; j < NR; ++j) {
        if (j < cols) {
          const float* s = B + (j0 + jr + j) * ldb + p0;
          for (int64_t p = 0; p < kc; ++p) dst[p * NR + j] = s[p];
        } else {
          for (int64_t p = 0; p < kc; ++p) dst[p * NR + j] = 0.f;
        }
      }
    }
  }
}



// The width a call on `pool` runs at now: 1 without a pool, and inside a parallel_for chunk (the pool
// runs nested loops inline on the chunk's thread).
int run_width(const ep::ThreadPool* pool) {
  return pool && !ep::ThreadPool::in_parallel_region() ? pool->num_threads() : 1;
}

void run_tasks(ep::ThreadPool* pool, int threads, int64_t n, ep::FunctionRef<void(int64_t, int64_t)> fn) {
  if (threads > 1 && n > 1) {
    pool->parallel_for(n, 1, fn);
  } else if (n > 0) {
    fn(0, n);
  }
}

// y[1, N] = alpha * a[K] * op(B) + beta * y; B raw or packed; tasks of plan.per_task columns (B raw) or
// 16-column panels (B packed). N, K: the GEMV's own (kGemvColumn runs it over op(A)^T: N = M).
void gemv(const GemmPlan& plan, int64_t N, int64_t K, float alpha, const float* a, bool transB, const float* B,
          int64_t ldb, const PackedB* packed, float beta, float* y, ep::ThreadPool* pool) {
  const F32GemmKernels& kern = *plan.kernels;
  const int64_t per = plan.per_task;
  if (packed) {
    const int64_t panels = packed->n_padded / NR;
    run_tasks(pool, plan.threads, plan.tasks, [&](int64_t t0, int64_t t1) {
      const int64_t q0 = t0 * per, q1 = std::min(panels, t1 * per);
      kern.gemv_packed(q0, q1, N, K, alpha, a, packed->data.data(), packed->n_padded, beta, y);
    });
    return;
  }
  run_tasks(pool, plan.threads, plan.tasks, [&](int64_t t0, int64_t t1) {
    const int64_t j0 = t0 * per, j1 = std::min(N, t1 * per);
    kern.gemv_raw(transB, j0, j1, K, alpha, a, B, ldb, beta, y);
  });
}

// ---------------------------------------------------------------------------------------------
// The blocked engine.

struct ASrc {
  const float* A = nullptr;
  int64_t lda = 0;
  bool trans = false;
  const float* packed = nullptr;  // PackedA<float> layout
};

struct BSrc {
  const float* B = nullptr;
  int64_t ldb = 0;
  bool trans = false;
  const PackedB* packed = nullptr;
  const GemmBPacker* gen = nullptr;  // B produced per block by the caller
};

void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.f) {
      std::fill(c, c + N, 0.f);
    } else if (beta != 1.f) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
  }
}

// Runs `plan` (made for these operands' forms and transposes, and for this pool's width at this call: see
// engine()) on them.
void execute(const GemmPlan& plan, float alpha, const ASrc& as, const BSrc& bs, float beta, float* C, int64_t ldc,
             const GemmEpilogue* ep, ep::ThreadPool* pool, const GemmScratch* scratch) {
  const int64_t M = plan.M, N = plan.N, K = plan.K;
  if (plan.path == GemmPath::kNothing) return;
  if (ep && ep->empty()) ep = nullptr;
  if (plan.path == GemmPath::kScaleC || alpha == 0.f) {
    scale_c(M, N, beta, C, ldc);
    if (ep) gemm_apply_epilogue(*ep, 0, 0, M, N, C, ldc);
    return;
  }
  if (plan.path == GemmPath::kGemvRow) {
    std::vector<float> tmp;
    const float* a = as.A;
    if (as.trans && as.lda != 1) {
      tmp.resize(static_cast<size_t>(K));
      for (int64_t k = 0; k < K; ++k) tmp[k] = as.A[k * as.lda];
      a = tmp.data();
    }
    gemv(plan, N, K, alpha, a, bs.trans, bs.B, bs.ldb, bs.packed, beta, C, pool);
    if (ep) gemm_apply_epilogue(*ep, 0, 0, 1, N, C, ldc);
    return;
  }
  if (plan.path == GemmPath::kGemvColumn) {  // y[1, M] = b^T op(A)^T
    std::vector<float> b(static_cast<size_t>(K)), y(static_cast<size_t>(M));
    for (int64_t k = 0; k < K; ++k) b[k] = bs.trans ? bs.B[k] : bs.B[k * bs.ldb];
    if (beta != 0.f)
      for (int64_t i = 0; i < M; ++i) y[i] = C[i * ldc];
    gemv(plan, M, K, alpha, b.data(), !as.trans, as.A, as.lda, nullptr, beta, y.data(), pool);
    for (int64_t i = 0; i < M; ++i) C[i * ldc] = y[i];
    if (ep) gemm_apply_epilogue(*ep, 0, 0, M, 1, C, ldc);
    return;
  }

  const F32GemmKernels& kern = *plan.kernels;
  const int64_t panels = plan.panels, n_blocks = plan.n_blocks, m_chunks = plan.m_chunks;
  const int64_t chunk_rows = plan.chunk_rows, tasks = plan.tasks;
  auto block_cols = [&](int64_t jb, int64_t* j0, int64_t* nc) {
    *j0 = jb * panels / n_blocks * NR;
    *nc = std::min(N, (jb + 1) * panels / n_blocks * NR) - *j0;
  };
  const int64_t tile_cols = NR * kern.n_panels;  // one call covers n_panels adjacent B panels
  const int64_t a_stride_k = as.packed ? (M + MR - 1) / MR * MR : 0;  // PackedA's m_padded
  const float* bpacked = bs.packed ? bs.packed->data.data() : nullptr;
  // A raw and not transposed, on a variant that reads its rows in place (tile_a_rows): A is not packed.
  const bool a_in_place = plan.a_in_place;
  const int64_t n_padded = bs.packed ? bs.packed->n_padded : 0;

  // Packing scratch: the caller's slot of `scratch` (pool->slot(): distinct among the chunks running at
  // once, kept by a call nested in a chunk), else this call's own, one slot per thread that runs tasks.
  const size_t need_a = plan.scratch_a_floats, need = plan.scratch_floats;
  std::optional<ep::HeapScratch> own;
  float* scr_base = nullptr;
  size_t scr_stride = 0;
  int scr_slots = 0;
  bool scr_by_slot = false;  // index by pool->slot() (else the one slot 0)
  if (need > 0) {
    const int pool_threads = pool ? pool->num_threads() : 1;
    if (scratch && scratch->base && scratch->slot_floats >= need && scratch->slots >= pool_threads) {
      scr_base = scratch->base;
      scr_stride = scratch->slot_floats;
      scr_slots = scratch->slots;
      scr_by_slot = pool != nullptr;
    } else {
      // Tasks on several threads: they hold distinct slots in [0, num_threads()); else only this thread.
      const int slots = plan.scratch_slots();
      own.emplace(need * static_cast<size_t>(slots) * sizeof(float));
      scr_base = static_cast<float*>(own->get());
      scr_stride = need;
      scr_slots = slots;
      scr_by_slot = slots > 1;
    }
  }
  auto task = [&](int64_t t0, int64_t t1) {
    float* slot = nullptr;
    if (scr_base) {
      const int s = scr_by_slot ? pool->slot() : 0;
      assert(s >= 0 && s < scr_slots);
      (void)scr_slots;
      slot = scr_base + static_cast<size_t>(s) * scr_stride;
    }
    float* abuf = as.packed ? nullptr : slot;
    float* bbuf = bpacked ? nullptr : slot + need_a;
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t jb = t / m_chunks, mb = t % m_chunks;
      int64_t j0, nc;
      block_cols(jb, &j0, &nc);
      const int64_t r0 = mb * chunk_rows, r1 = std::min(M, r0 + chunk_rows);
      for (int64_t p0 = 0; p0 < K; p0 += KC) {
        const int64_t kc = std::min(KC, K - p0);
        const bool last_k = p0 + kc >= K;
        // The packed-B block this task multiplies next (PackedB: weights, which a model run reads from
        // memory): the next K block of these columns, or after the last one the next task's first when
        // this thread runs it. The in-place-A tiles prefetch it into L2 a line per 4 k steps (tile_a_rows'
        // pf_b), so that block's first micro-panel does not wait on memory: it consumes B at ~21 bytes a
        // cycle, faster than one core reads memory. Zen 5, 128 rows against weights rotated past L3
        // (BM_GemmTransformer/.../1), in-process alternated: 0.93-0.99 of the time over BERT-base's three
        // shapes at 1 and 2 threads, warm weights unchanged; the BERT-shaped encoder 0.955 / 0.952 at 1 /
        // 2 threads. Issued as a burst at each tile's start instead, the misses queued ahead of the FMAs
        // and it gained nothing (nor did one prefetch per 4 KB page).
        const char* next_b = nullptr;
        int64_t next_b_bytes = 0, next_b_at = 0;
        if (bpacked && a_in_place) {
          int64_t np0 = p0 + kc, nj0 = j0, nnc = nc;
          if (last_k) {
            np0 = t + 1 < t1 ? 0 : K;
            if (np0 == 0) block_cols((t + 1) / m_chunks, &nj0, &nnc);
          }
          if (np0 < K) {
            const int64_t nkc = std::min(KC, K - np0);
            next_b = reinterpret_cast<const char*>(bpacked + np0 * n_padded + nj0 * nkc);
            next_b_bytes = (nnc + NR - 1) / NR * NR * nkc * int64_t(sizeof(float));
          }
        }
        const float beta_k = p0 == 0 ? beta : 1.f;
        const bool ep_in_tile = last_k && ep && kern.tile_epilogue && alpha == 1.f && beta_k == 0.f;
        const float* bblk;
        if (bpacked) {
          bblk = bpacked + p0 * n_padded + j0 * kc;
        } else if (bs.gen) {
          (*bs.gen)(p0, kc, j0, nc, bbuf);
          bblk = bbuf;
        } else {
          pack_b_block(kern, bs.B, bs.ldb, bs.trans, p0, kc, j0, nc, bbuf);
          bblk = bbuf;
        }
        for (int64_t i0 = r0; i0 < r1; i0 += MC) {
          const int64_t mc = std::min(MC, r1 - i0);
          const float* ablk = nullptr;
          if (as.packed) {
            ablk = as.packed + p0 * a_stride_k + i0 * kc;
          } else if (!a_in_place) {
            pack_a_block(as.A, as.lda, as.trans, i0, mc, p0, kc, abuf, 1.f);
            ablk = abuf;
          }
          // A micro-panel (L1) outer, B micro-panels (the L2-resident block) inner: C is walked along
          // its rows, which keeps small-K problems (1x1 convs) from being bound by C traffic.
          for (int64_t ir = 0; ir < mc; ir += MR) {
            const int mr = static_cast<int>(std::min<int64_t>(MR, mc - ir));
            const float* ap = a_in_place ? as.A + (i0 + ir) * as.lda + p0 : ablk + ir * kc;
            float* crow = C + (i0 + ir) * ldc + j0;
            for (int64_t jr = 0, nr = 0; jr < nc; jr += nr) {
              nr = tile_width(nc - jr, tile_cols);
              // The panel's first tile also prefetches the next A micro-panel: packed conv weights come
              // from memory, and a 1x1 conv on 14x14 uses each panel for only 7 tiles. Prefetching in
              // every tile cost 3-5% where a panel serves 16 (56x56 blocks of 512 columns).
              const bool pf = jr == 0;
              // Each tile call below returns true when the epilogue rode on its store; else the plain
              // product is stored and the epilogue (last K block) follows.
              if (a_in_place) {
                const float* pf_b =
                    next_b_at < next_b_bytes ? reinterpret_cast<const float*>(next_b + next_b_at) : nullptr;
                next_b_at += (kc + 3) / 4 * 64;  // the lines this tile is given (a one-panel tile skips them)
                if (kern.tile_a_rows(kc, ap, as.lda, bblk + jr * kc, crow + jr, ldc, mr, nr, alpha, beta_k,
                                     ep_in_tile ? ep : nullptr, i0 + ir, j0 + jr, pf_b))
                  continue;
              } else if (ep_in_tile) {
                auto* te = pf && kern.tile_epilogue_prefetch_a ? kern.tile_epilogue_prefetch_a : kern.tile_epilogue;
                if (te(kc, ap, bblk + jr * kc, crow + jr, ldc, mr, nr, *ep, i0 + ir, j0 + jr)) continue;
              } else {
                auto* t = pf && kern.tile_prefetch_a ? kern.tile_prefetch_a : kern.tile;
                t(kc, ap, bblk + jr * kc, crow + jr, ldc, mr, nr, alpha, beta_k);
              }
              if (last_k && ep) {
                if (kern.epilogue_tile && kern.epilogue_tile(*ep, i0 + ir, j0 + jr, mr, nr, crow + jr, ldc)) continue;
                gemm_apply_epilogue(*ep, i0 + ir, j0 + jr, mr, nr, crow + jr, ldc);
              }
            }
          }
        }
      }
    }
  };
  run_tasks(pool, plan.threads, tasks, task);
}

// Runs `plan` on these operands. What a plan cannot know is checked here, at run time:
// - the width the pool runs at now (run_width): another pool than the one planned for, or a call from
//   inside a parallel_for chunk, which the pool runs inline on one thread. Where that changes the
//   plan's thread decision (only when it found the problem worth threads), the plan is re-made for the
//   width at hand: a few integer operations, no allocation, and the result is the one a per-call plan
//   gives. Re-made rather than stored as a second, 1-thread plan, because any width may come (a plan
//   for 2 threads on a pool of 4 re-plans too), and its scratch need is the same at every width, so the
//   caller's slots still serve.
// - the operand forms the entry point got (and a PackedB's own N and K): a plan made for other forms is
//   re-made for these, so a mismatched plan costs a re-plan, never a wrong product.
void engine(const GemmPlan& plan, float alpha, const ASrc& as, const BSrc& bs, float beta, float* C, int64_t ldc,
            const GemmEpilogue* ep, ep::ThreadPool* pool, const GemmScratch* scratch) {
  const GemmA a = as.packed ? GemmA::kPacked : GemmA::kRaw;
  const GemmB b = bs.packed ? GemmB::kPacked : bs.gen ? GemmB::kGenerated : GemmB::kRaw;
  const int64_t N = bs.packed ? bs.packed->N : plan.N, K = bs.packed ? bs.packed->K : plan.K;
  const int width = run_width(pool);
  const int want = plan.parallel_worth && width > 1 ? width : 1;
  if (want != plan.threads || a != plan.a || b != plan.b || N != plan.N || K != plan.K || plan.kernels == nullptr) {
    const GemmPlan now = gemm_f32_plan(plan.M, N, K, a, b, as.trans, bs.trans, width, plan.isa);
    return execute(now, alpha, as, bs, beta, C, ldc, ep, pool, scratch);
  }
  execute(plan, alpha, as, bs, beta, C, ldc, ep, pool, scratch);
}


}  // namespace

// ---------------------------------------------------------------------------------------------
// Public entry points.

void gemm_apply_epilogue(const GemmEpilogue& ep, int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* c,
                         int64_t ldc) {
  const bool has_bias = ep.bias != nullptr && ep.bias_kind != GemmBias::kNone;
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    if (has_bias) {
      if (ep.bias_kind == GemmBias::kPerColumn) {
        const float* b = ep.bias + j0;
        for (int64_t j = 0; j < cols; ++j) cr[j] += b[j];
      } else {
        const float b = ep.bias[i0 + r];
        for (int64_t j = 0; j < cols; ++j) cr[j] += b;
      }
    }
    if (ep.residual) {
      const float* res = ep.residual + (i0 + r) * ep.ldr + j0;
      for (int64_t j = 0; j < cols; ++j) cr[j] += res[j];
    }
    const float a = ep.act_a, b = ep.act_b;
    switch (ep.act) {
      case Activation::kNone:
        break;
      case Activation::kRelu:
        for (int64_t j = 0; j < cols; ++j) cr[j] = activation_of<Activation::kRelu>(cr[j], 0.f, 0.f);
        break;
      case Activation::kClip:
        for (int64_t j = 0; j < cols; ++j) cr[j] = activation_of<Activation::kClip>(cr[j], a, b);
        break;
      case Activation::kLeakyRelu:
        for (int64_t j = 0; j < cols; ++j) cr[j] = activation_of<Activation::kLeakyRelu>(cr[j], a, b);
        break;
      default: {
        vecmath::Fn fn;
        if (const vecmath::MapFn map = activation_vector_fn(ep.act, &fn) ? vecmath::map_for_tier(ep.isa) : nullptr) {
          map(fn, cr, nullptr, cr, cols);
          break;
        }
        for (int64_t j = 0; j < cols; ++j) cr[j] = apply_activation(ep.act, cr[j], a, b);
        break;
      }
    }
  }
}

GemmPlan gemm_f32_plan(int64_t M, int64_t N, int64_t K, GemmA a, GemmB b, bool trans_a, bool trans_b,
                       int pool_threads, ep::IsaTier isa) {
  GemmPlan p;
  p.M = M;
  p.N = N;
  p.K = K;
  p.a = a;
  p.b = b;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.isa = isa;
  p.pool_threads = std::max(1, pool_threads);
  p.kernels = &f32_gemm_kernels(isa);
  if (M <= 0 || N <= 0) return p;  // kNothing
  if (K <= 0) {
    p.path = GemmPath::kScaleC;
    return p;
  }
  auto decide_threads = [&](int64_t macs) {
    p.parallel_worth = macs >= kParallelMacs;
    p.threads = p.parallel_worth ? p.pool_threads : 1;
  };
  // GEMV over `n` outputs (columns of B, rows of op(A)) of B raw (`trans`: its outputs are rows, read
  // along K) or packed: about 4 tasks a thread, raw ranges of whole 16-column groups (at least 64
  // columns, or 4 rows), packed ranges of whole panels.
  auto plan_gemv = [&](int64_t n, bool trans, bool packed) {
    decide_threads(n * K * 4);  // memory-bound: worth threads at smaller sizes
    const int64_t share = int64_t(p.threads) * 4;
    if (packed) {
      const int64_t panels = (n + NR - 1) / NR;
      p.per_task = std::max<int64_t>(1, (panels + share - 1) / share);
      p.tasks = (panels + p.per_task - 1) / p.per_task;
    } else {
      p.per_task = std::max<int64_t>(trans ? 4 : 64, (n + share - 1) / share / 16 * 16);
      p.tasks = (n + p.per_task - 1) / p.per_task;
    }
  };
  // GEMV: one row of op(A) (not prepacked) against B raw or packed.
  if (M == 1 && a == GemmA::kRaw && b != GemmB::kGenerated) {
    p.path = GemmPath::kGemvRow;
    plan_gemv(N, trans_b, b == GemmB::kPacked);
    return p;
  }
  // N == 1 with raw operands: y[1, M] = b^T op(A)^T, a GEMV over op(A)^T (rows of A when not transposed).
  if (N == 1 && a == GemmA::kRaw && b == GemmB::kRaw) {
    p.path = GemmPath::kGemvColumn;
    plan_gemv(M, !trans_a, false);
    return p;
  }

  p.path = GemmPath::kBlocked;
  decide_threads(M * N * K);
  const int threads = p.threads;
  // Column blocks of at most nc_max, evened out to whole panels (block jb covers panels
  // [jb * panels / n_blocks, (jb + 1) * panels / n_blocks)); row chunks so every thread has work.
  const int64_t panels = (N + NR - 1) / NR;
  int64_t nc_max = block_columns(K);
  // Few rows against a raw B (a 1x1 conv with 16-36 output channels on its input): each packed column
  // then serves at most 6 A micro-panels, so a wide block buys no reuse, while packing it scatters each
  // B row over up to 64 panels 8 KiB apart (as many pages as the L1 TLB holds) and the kernels read it
  // back from L2. Blocks of 4 panels stay in L1 between the packing and the products. Zen 3, 1 thread,
  // in-process paired runs: 1x1 convs 128->16 @55x55 0.85 of the time, 64->16 0.86, 256->32 @27x27
  // 0.90, 192->32 @28x28 0.93, 128->32 @27x27 0.97, 480->16 @14x14 0.99; with 8 or 11 micro-panels
  // (M 48, 64) 0.98-1.03, so those keep the wide blocks. In SqueezeNet (per-node traces of alternated
  // processes) its M = 16 and 32 squeeze convs take 0.80-0.96 of the time. Only for the 16-column tile
  // (AVX2, scalar): the AVX-512 tile spans 64 columns, so such a block would be one tile wide, and
  // 1x1 convs with few outputs run unpacked there (conv_engine's pointwise_unpacked); not measured.
  if (a == GemmA::kPacked && b == GemmB::kRaw && p.kernels->n_panels == 1 && (M + MR - 1) / MR <= kFewRowPanels)
    nc_max = kFewRowBlockCols;
  int64_t n_blocks = (N + nc_max - 1) / nc_max;
  // With A prepacked (conv weights) and B packed per task (a raw image for 1x1 convs, im2col panels
  // for the implicit GEMM), row chunks would each pack the same B block again, and B's packing costs
  // about as much per column as a 16-row slice of the product. Under 512 rows, split the columns over
  // the threads instead (blocks of whole panels, below). With more rows the duplicate
  // packing is cheap next to the product. Measured at 2 threads: ResNet-50's stride-2 3x3 convs (128,
  // 256 rows) 1.4 ms split on N vs 2.1 / 1.8 on rows, 1024 rows 1.24 ms on rows vs 1.3-1.5 on N;
  // DenseNet's 1x1 convs (128 rows, 784 columns, K 352-480) took 4 row chunks that each packed all of B
  // and split 72 / 56 rows between the threads.
  // Also when all of A is at most 1 MB (one L2): every column block then reads it from cache anyway.
  // ResNet-50's 1x1/2 256->512 at 2 threads: 1.32 -> 1.07-1.12 ms on columns.
  // And with B a PackedB (a MatMul's weights) under 512 rows: row chunks would each stream the same
  // weight blocks into their own core's L2, from memory in a model run. Zen 5, 2 threads, weights
  // rotated past L3, in-process alternated, columns / row chunks: 128 x 768 x 768 0.96, 128 x 768 x 3072
  // 0.98, 128 x 3072 x 768 0.95, 32-64 rows 0.90-0.98, 512 rows 0.98-0.99, 1024 rows 1.00-1.02 (hence the
  // bound); warm weights 0.97-0.99 under 512 rows; the BERT-shaped encoder 0.963.
  const bool split_n = threads > 1 && panels >= 2 * threads &&
                       ((a == GemmA::kPacked && b != GemmB::kPacked && (M < 512 || M * K <= (int64_t(1) << 18))) ||
                        (b == GemmB::kPacked && M < 512));
  if (split_n) {
    // Up to kSplitBlocksPerThread blocks a thread of >= 4 panels each, so the pool balances them: with
    // one block a thread, a thread that came late or read the other core's data held the other up
    // (the caller waited in parallel_for ~7% of a ResNet-50 run at 2 threads). Zen 5, 2 threads,
    // in-process paired runs in both orders, 8 a thread vs blocks as wide as nc_max (1-4 a thread):
    // ResNet-50 -6.8%, DenseNet-121 -4.1%, Inception-v2 -2.1%, SqueezeNet -1.0% (4 a thread: ResNet-50
    // -4.4%; 16: as 8).
    const int64_t per_thread = (panels + threads - 1) / threads;
    const int64_t sub = std::max((per_thread * NR + nc_max - 1) / nc_max,  // each block <= nc_max columns
                                 std::min<int64_t>(kSplitBlocksPerThread, per_thread / 4));
    n_blocks = std::min<int64_t>(panels, static_cast<int64_t>(threads) * sub);
  } else {
    n_blocks = std::min<int64_t>(panels, n_blocks);
  }
  [[maybe_unused]] const int64_t nc_blk = (panels + n_blocks - 1) / n_blocks * NR;  // the widest block
  assert(nc_blk <= kGemmMaxBlockCols);
  assert(n_blocks >= plain_column_blocks(N, K));  // so the scratch's B block below covers nc_blk
  const int64_t m_panels = (M + MR - 1) / MR;
  int64_t m_chunks = 1;
  if (threads > 1 && !split_n) {
    const int64_t want = 2 * threads;
    m_chunks = std::min(m_panels, (want + n_blocks - 1) / n_blocks);
    // A generated B (the implicit GEMM's im2col panels) in one column block: every row chunk generates
    // all of it again, so one chunk a thread instead of two. ResNet-50's 3x3 512->512 @7x7 (512 rows, 49
    // columns, K 4608) generated its 1.2 MB of panels four times at 2 threads. Zen 3 (AVX2), 2 threads,
    // in-process paired runs: ResNet-50 0.979 / 0.982 of the time, DenseNet-121 0.969, Inception-v2 1.000.
    if (b == GemmB::kGenerated && n_blocks == 1) m_chunks = std::min<int64_t>(m_panels, threads);
    // Large M: chunks of whole MC blocks keep the A-block reuse.
    m_chunks = std::max<int64_t>(m_chunks, 1);
  }
  const int64_t chunk_rows = ((m_panels + m_chunks - 1) / m_chunks) * MR;
  m_chunks = (M + chunk_rows - 1) / chunk_rows;
  p.panels = panels;
  p.n_blocks = n_blocks;
  p.m_chunks = m_chunks;
  p.chunk_rows = chunk_rows;
  p.split_n = split_n;
  p.tasks = n_blocks * m_chunks;

  // Scratch per slot: an A block (up to MC rows of one K block) when A is raw, then a B block when B is
  // not a PackedB, as wide as the widest block without a split over threads (a split only narrows
  // blocks), so the need is the same at every width.
  const int64_t kc = std::min(K, KC);
  // A raw and not transposed: the tier's tile_a_rows reads it in place (Zen 5, AVX-512, 128 x 768 x 768
  // against a PackedB, 1 thread: packing A was ~6% of the time; BERT-shaped encoder 0.96 of its time).
  p.a_in_place = a == GemmA::kRaw && !trans_a && p.kernels->tile_a_rows != nullptr;
  if (a == GemmA::kRaw && !p.a_in_place)
    p.scratch_a_floats = round16(static_cast<size_t>(std::min<int64_t>(MC, m_panels * MR) * kc));
  p.scratch_floats = p.scratch_a_floats;
  if (b != GemmB::kPacked) {
    const int64_t plain_blocks = plain_column_blocks(N, K);
    const int64_t plain_blk = (panels + plain_blocks - 1) / plain_blocks * NR;
    p.scratch_floats += round16(static_cast<size_t>(plain_blk * kc));
  }
  return p;
}

size_t gemm_f32_scratch_floats(int64_t M, int64_t N, int64_t K, bool a_packed, bool b_packed) {
  // Planned with a transposed raw A, which every tier packs: the bound then also covers a call at a tier
  // that packs a non-transposed A (one without tile_a_rows).
  return gemm_f32_plan(M, N, K, a_packed ? GemmA::kPacked : GemmA::kRaw, b_packed ? GemmB::kPacked : GemmB::kRaw,
                       !a_packed, false, 1)
      .scratch_floats;
}

PackedB pack_b_f32(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb, ep::IsaTier isa) {
  const F32GemmKernels& kern = f32_gemm_kernels(isa);
  PackedB pb;
  pb.K = K;
  pb.N = N;
  pb.n_padded = (N + NR - 1) / NR * NR;
  pb.data = PackedArray<float>(static_cast<size_t>(std::max<int64_t>(1, pb.n_padded * K)));
  for (int64_t p0 = 0; p0 < K; p0 += KC) {
    const int64_t kc = std::min(KC, K - p0);
    pack_b_block(kern, B, ldb, transB, p0, kc, 0, N, pb.data.data() + p0 * pb.n_padded);
  }
  return pb;
}

// The float instance of pack_a (the double one is in gemm_f64.cpp).
template <>
PackedA<float> pack_a<float>(bool transA, int64_t M, int64_t K, const float* A, int64_t lda, float scale) {
  PackedA<float> pa;
  pa.M = M;
  pa.K = K;
  pa.m_padded = (M + MR - 1) / MR * MR;
  pa.data = PackedArray<float>(static_cast<size_t>(std::max<int64_t>(1, pa.m_padded * K)));
  for (int64_t p0 = 0; p0 < K; p0 += KC) {
    const int64_t kc = std::min(KC, K - p0);
    if (M > 0) pack_a_block(A, lda, transA, 0, M, p0, kc, pa.data.data() + p0 * pa.m_padded, scale);
  }
  return pa;
}

// The one-call entry points plan for the width the call runs at (run_width), then run that plan.

void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
              const GemmEpilogue* epilogue, ep::IsaTier isa, const GemmScratch* scratch) {
  gemm_f32(gemm_f32_plan(M, N, K, GemmA::kRaw, GemmB::kRaw, transA, transB, run_width(pool), isa), alpha, A, lda, B,
           ldb, beta, C, ldc, pool, epilogue, scratch);
}

void gemm_f32(const GemmPlan& plan, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue, const GemmScratch* scratch) {
  ASrc as;
  as.A = A;
  as.lda = lda;
  as.trans = plan.trans_a;
  BSrc bs;
  bs.B = B;
  bs.ldb = ldb;
  bs.trans = plan.trans_b;
  engine(plan, alpha, as, bs, beta, C, ldc, epilogue, pool, scratch);
}

void gemm_f32_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                     float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue, ep::IsaTier isa,
                     const GemmScratch* scratch) {
  gemm_f32_packed(gemm_f32_plan(M, B.N, B.K, GemmA::kRaw, GemmB::kPacked, transA, false, run_width(pool), isa), alpha,
                  A, lda, B, beta, C, ldc, pool, epilogue, scratch);
}

void gemm_f32_packed(const GemmPlan& plan, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                     float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue,
                     const GemmScratch* scratch) {
  ASrc as;
  as.A = A;
  as.lda = lda;
  as.trans = plan.trans_a;
  BSrc bs;
  bs.packed = &B;
  engine(plan, alpha, as, bs, beta, C, ldc, epilogue, pool, scratch);
}

void gemm_f32_packed_a(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, bool transB,
                       const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
                       const GemmEpilogue* epilogue, ep::IsaTier isa, const GemmScratch* scratch) {
  gemm_f32_packed_a(gemm_f32_plan(M, N, K, GemmA::kPacked, GemmB::kRaw, false, transB, run_width(pool), isa), alpha,
                    a_packed, B, ldb, beta, C, ldc, pool, epilogue, scratch);
}

void gemm_f32_packed_a(const GemmPlan& plan, float alpha, const float* a_packed, const float* B, int64_t ldb,
                       float beta, float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue,
                       const GemmScratch* scratch) {
  ASrc as;
  as.packed = a_packed;
  BSrc bs;
  bs.B = B;
  bs.ldb = ldb;
  bs.trans = plan.trans_b;
  engine(plan, alpha, as, bs, beta, C, ldc, epilogue, pool, scratch);
}

void gemm_f32_packed_a_gen_b(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, GemmBPacker pack_b,
                             float beta, float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue,
                             ep::IsaTier isa, const GemmScratch* scratch) {
  gemm_f32_packed_a_gen_b(gemm_f32_plan(M, N, K, GemmA::kPacked, GemmB::kGenerated, false, false, run_width(pool), isa),
                          alpha, a_packed, pack_b, beta, C, ldc, pool, epilogue, scratch);
}

void gemm_f32_packed_a_gen_b(const GemmPlan& plan, float alpha, const float* a_packed, GemmBPacker pack_b, float beta,
                             float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue,
                             const GemmScratch* scratch) {
  ASrc as;
  as.packed = a_packed;
  BSrc bs;
  bs.gen = &pack_b;
  engine(plan, alpha, as, bs, beta, C, ldc, epilogue, pool, scratch);
}

void gemm_f32_strips(int64_t M, int64_t K, const float* a_packed, const float* brow, const int64_t* boff,
                     int64_t ncols, float* C, int64_t ldc, int64_t j0, const GemmEpilogue* ep, ep::IsaTier isa,
                     bool prefetch_c) {
  if (M <= 0 || ncols <= 0) return;
  if (ep && ep->empty()) ep = nullptr;
  const F32GemmKernels& kern = f32_gemm_kernels(isa);
  const int64_t m_padded = (M + MR - 1) / MR * MR;
  const int64_t tile_cols = NR * kern.n_panels;
  // A panel outer, strips inner: the stores run along the panel's 6 output rows (prefetchable streams)
  // rather than down all M rows of one strip.
  for (int64_t i0 = 0; i0 < M; i0 += MR) {
    const int mr = static_cast<int>(std::min<int64_t>(MR, M - i0));
    for (int64_t js = 0, nrr = 0; js < ncols; js += nrr) {
      nrr = tile_width(ncols - js, tile_cols);
      float* c = C + i0 * ldc + j0 + js;
      if (prefetch_c) {
        // The tile's mr rows lie in separate output planes: more streams than the hardware prefetcher
        // follows, so their lines would be fetched only at the stores after the k loop.
        for (int r = 0; r < mr; ++r) {
          const float* row = c + r * ldc;
          for (int64_t j = 0; j < nrr; j += 16) __builtin_prefetch(row + j, 1, 3);
          __builtin_prefetch(row + nrr - 1, 1, 3);  // an unaligned row's last line
        }
      }
      bool ep_done = false;
      for (int64_t p0 = 0; p0 < K; p0 += KC) {
        const int64_t kc = std::min(KC, K - p0);
        const float* ap = a_packed + p0 * m_padded + i0 * kc;
        const float beta = p0 == 0 ? 0.f : 1.f;
        // The epilogue rides on the store when this is the only K block.
        ep_done = kern.tile_rows(kc, ap, brow + js, boff + p0, c, ldc, mr, nrr, 1.f, beta, K <= KC ? ep : nullptr,
                                 i0, j0 + js);
      }
      if (ep && !ep_done) {
        if (kern.epilogue_tile && kern.epilogue_tile(*ep, i0, j0 + js, mr, nrr, c, ldc)) continue;
        gemm_apply_epilogue(*ep, i0, j0 + js, mr, nrr, c, ldc);
      }
    }
  }
}

}  // namespace nxrt::ops
