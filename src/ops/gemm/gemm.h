// The one GEMM module: the float32 engine behind MatMul, Gemm, Einsum, attention, Conv (1x1, implicit
// GEMM, Winograd's products), ConvTranspose, ConvInteger, DeformConv and the recurrent ops; the
// float64 GEMM; one packed-left-operand type; one reference.
//
//   C[M,N] = epilogue( alpha * op(A)[M,K] * op(B)[K,N] + beta * C )
//
// op(A) is A (row-major, M x K, row stride lda) or, with transA, A^T where A is stored K x M (row
// stride lda); likewise B. When beta == 0, C is not read (NaN/garbage in C does not propagate).
// The epilogue (GemmEpilogue) is applied in this order, fused into the kernel's store while the tile
// of C is in cache:  v += bias (per column j or per row i);  v += residual[i, j];  v = act(v).
//
// float: KC x NC panels of op(B) and MC x KC blocks of op(A) packed per task, a 6x16 (AVX-512: 6x64)
// register-blocked micro-kernel over them, tasks over M/N blocks on the thread pool (small problems stay on the calling
// thread). The micro-kernels and the other ISA-specific pieces come as sets, one per instruction-set
// tier (gemm_kernels.h: f32_gemm_6x16__scalar, f32_gemm_6x16__avx2, f32_gemm_6x64__avx512); every entry point takes the
// tier its kernel chose once (KernelInfo::isa()) and runs the best set at or below it.
// Constant operands can be packed once (PackedB for weights on the right as in MatMul/Gemm, PackedA
// for weights on the left as in Conv) and reused by every call.
//
// `pool` may be null (single-threaded). Calls made from inside a parallel_for of the pool run
// single-threaded (the pool runs nested parallel_for inline).
//
// Create / reshape / run: everything the float engine decides from the shapes (path, threads, column
// blocks, row chunks, scratch) is a GemmPlan (gemm_f32_plan). The entry points without a plan make one
// per call; kernels that specialize make theirs once per shape (MatMul / Gemm variants, ConvPlan,
// WinogradPlan) and run it through the plan-taking overloads.
#pragma once
#include <cstdint>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/function_ref.h"
#include "ops/gemm/activation.h"
#include "ops/packed_storage.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

enum class GemmBias : uint8_t { kNone, kPerColumn /* bias[j], N values */, kPerRow /* bias[i], M values */ };

struct GemmEpilogue {
  GemmBias bias_kind = GemmBias::kNone;
  const float* bias = nullptr;
  const float* residual = nullptr;  // M x N, row stride ldr; may alias C only when it equals C exactly
  int64_t ldr = 0;
  Activation act = Activation::kNone;
  float act_a = 0.f, act_b = 0.f;  // the activation's parameters (ops/gemm/activation.h; Clip: min, max)
  // The caller's tier: the vector bodies (ops/elementwise/vec_math.h) at it apply Sigmoid, Tanh and Gelu,
  // which the kernels do not take in registers; kScalar: libm per element (the reference).
  ep::IsaTier isa = ep::IsaTier::kScalar;
  bool empty() const {
    return (bias_kind == GemmBias::kNone || bias == nullptr) && residual == nullptr && act == Activation::kNone;
  }
};

// Applies the epilogue (bias, residual, activation) to an rows x cols block of C whose top-left element is
// C(i0, j0). Exposed for callers that produce C by other means; the GEMM entry points fuse it.
void gemm_apply_epilogue(const GemmEpilogue& ep, int64_t i0, int64_t j0, int64_t rows, int64_t cols, float* c,
                         int64_t ldc);

constexpr int64_t kGemmKC = 256;  // K block of the packed layouts
constexpr int kGemmMR = 6, kGemmNR = 16;  // the float engine's tile: A panels of 6 rows, B panels of 16 columns

// op(B) packed once for repeated GEMMs against the same right operand (constant weights): the panel
// layout the engine consumes, so calls skip packing B.
struct PackedB {
  int64_t K = 0, N = 0;
  int64_t n_padded = 0;     // N rounded up to the panel width
  PackedArray<float> data;  // per K block of the kernel: n_padded x kc, in NR-wide column panels
  bool empty() const { return data.empty(); }
};
PackedB pack_b_f32(bool transB, int64_t K, int64_t N, const float* B, int64_t ldb, ep::IsaTier isa = ep::cpu_isa_tier());

// The row panel height of the packed left operand: the engine's tile rows (6 for float, 4 for double).
template <typename T> constexpr int kGemmPanelRows = 0;
template <> inline constexpr int kGemmPanelRows<float> = kGemmMR;
template <> inline constexpr int kGemmPanelRows<double> = 4;

// op(A) packed once (a constant left operand: conv and recurrent weights), for float and double alike.
// Layout: per K block of kGemmKC rows starting at k0, at offset k0 * m_padded, ceil(M/R) panels of
// kc x R values (R = kGemmPanelRows<T>; panel p at p * R * kc, element (r, k) at k * R + r), zero-padded
// to m_padded rows.
template <typename T>
struct PackedA {
  int64_t M = 0, K = 0;
  int64_t m_padded = 0;
  PackedArray<T> data;
  bool empty() const { return data.empty(); }
};
template <typename T>
PackedA<T> pack_a(bool transA, int64_t M, int64_t K, const T* A, int64_t lda, T scale = T(1));

// Per-thread packing scratch for the float engine (its A block when A is not prepacked, its B block when
// B is not a PackedB, including a GemmBPacker's destination), handed in by the
// caller: `slots` slots of `slot_floats` floats each, slot i at base + i * slot_floats (64-byte aligned
// when base is and slot_floats is a multiple of 16, as gemm_f32_scratch_floats returns). The engine uses
// slot `pool ? pool->slot() : 0`, so a call made inside a parallel_for chunk uses its thread's slot.
// Without one, or when it has fewer slots than the pool has threads or its slots are smaller than
// gemm_f32_scratch_floats for the call, the engine allocates exactly what the call needs (heap, per call).
struct GemmScratch {
  float* base = nullptr;
  size_t slot_floats = 0;
  int slots = 0;
  // Slot `slot` alone, for a single-threaded GEMM run inside a parallel_for chunk on that thread's
  // slot; none (the engine then allocates) when there is no such slot.
  GemmScratch only_slot(int slot) const {
    if (!base || slot < 0 || slot >= slots) return {};
    return {base + static_cast<size_t>(slot) * slot_floats, slot_floats, 1};
  }
};

struct F32GemmKernels;  // one tier's micro-kernels (gemm_kernels.h)

// How the float engine gets its operands: op(A) raw (A with lda, transposed or not) or prepacked
// (PackedA<float> layout); op(B) raw, a PackedB, or generated block by block by a GemmBPacker.
enum class GemmA : uint8_t { kRaw, kPacked };
enum class GemmB : uint8_t { kRaw, kPacked, kGenerated };

// The way the engine computes a problem.
enum class GemmPath : uint8_t {
  kNothing,     // M or N is 0: C is not touched
  kScaleC,      // K is 0: C = beta * C, then the epilogue
  kGemvRow,     // M == 1, A raw, B raw or packed: one row of op(A) against op(B), column ranges per task
  kGemvColumn,  // N == 1, both raw: the column as b^T op(A)^T, row ranges per task
  kBlocked,     // packed blocks under the micro-kernel; tasks = column blocks x row chunks
};

// Everything the float engine decides from a problem's shape, operand forms, ISA tier and pool width,
// made once by gemm_f32_plan (XNNPACK's create/reshape, where a run is XNNPACK's run): the path, the
// micro-kernel set, the threads, the column blocks and row chunks its tasks cover and the packing
// scratch it needs. The engine only executes a plan: every entry point without one makes one per call,
// and callers that specialize keep theirs in their kernel variant. Plain data, so copies are cheap and
// concurrent runs share one.
struct GemmPlan {
  // What it was made for.
  int64_t M = 0, N = 0, K = 0;
  GemmA a = GemmA::kRaw;
  GemmB b = GemmB::kRaw;
  bool trans_a = false, trans_b = false;  // of the raw operands (the GEMV paths' splits depend on them)
  ep::IsaTier isa = ep::IsaTier::kScalar;
  int pool_threads = 1;  // the width of the pool it runs on (1: none, or a call inside a parallel_for chunk)

  const F32GemmKernels* kernels = nullptr;  // f32_gemm_kernels(isa)
  GemmPath path = GemmPath::kNothing;
  // Whether the problem has enough multiply-adds to be worth waking threads (the GEMV paths count each
  // one 4 times: they are memory-bound). Independent of the width: a plan re-made for another width
  // decides threads from it alone.
  bool parallel_worth = false;
  int threads = 1;      // threads its tasks run on: pool_threads when parallel_worth, else 1 (the caller)
  int64_t tasks = 0;    // parallel_for items (the GEMV and blocked paths)
  int64_t per_task = 0;  // GEMV paths: columns (kGemvColumn: rows) per task, or 16-column panels of a PackedB
  // kBlocked: op(B)'s `panels` 16-column panels in n_blocks column blocks (block jb covers panels
  // [jb * panels / n_blocks, (jb + 1) * panels / n_blocks)), M in m_chunks chunks of chunk_rows rows;
  // task t is block t / m_chunks, chunk t % m_chunks. split_n: the threads split columns, not rows.
  int64_t panels = 0, n_blocks = 0, m_chunks = 0, chunk_rows = 0;
  bool split_n = false;
  // A raw and not transposed, on a kernel set with tile_a_rows: the tiles read A's rows in place and A
  // is not packed (no A block in the scratch below).
  bool a_in_place = false;
  // Packing scratch per slot (floats, multiples of 16; 0 when the path packs nothing): the A block first
  // (A raw), then the B block (B not a PackedB). Sized for the widest block at any width, so a plan
  // re-made for another width (see the run-time conditions in gemm_f32.cpp) fits the same slots.
  size_t scratch_a_floats = 0, scratch_floats = 0;
  // Slots a run uses when it takes its own scratch: one per pool thread when tasks run on several.
  int scratch_slots() const { return threads > 1 && tasks > 1 ? pool_threads : 1; }
};

// The plan for C[M,N] = op(A)[M,K] * op(B)[K,N] with the operands in these forms (transposes of raw
// operands only), run on a pool of `pool_threads` threads (1: no pool, or from inside a parallel_for
// chunk, where the pool runs nested loops inline) with the micro-kernels of `isa`.
GemmPlan gemm_f32_plan(int64_t M, int64_t N, int64_t K, GemmA a, GemmB b, bool trans_a, bool trans_b,
                       int pool_threads, ep::IsaTier isa = ep::cpu_isa_tier());

// Floats per slot the engine uses for an M x N x K product (a multiple of 16; 0 when it packs nothing):
// `a_packed`: A prepacked (PackedA layout); `b_packed`: B a PackedB (a GemmBPacker still needs its block:
// pass false). Blocks are no larger than the problem (K block min(K, kGemmKC), A block at most 144 rows,
// B block at most one column block). Independent of the thread count, and a bound over the tiers and
// A's transpose: it counts an A block for a raw A, which a tier that reads A's rows in place
// (GemmPlan::a_in_place, whose scratch_floats is then smaller) does not use.
size_t gemm_f32_scratch_floats(int64_t M, int64_t N, int64_t K, bool a_packed, bool b_packed);

// The general float entry point.
void gemm_f32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
              const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
              const GemmEpilogue* epilogue = nullptr, ep::IsaTier isa = ep::cpu_isa_tier(),
              const GemmScratch* scratch = nullptr);

// C = epilogue(alpha * op(A) * B + beta * C) with B prepacked by pack_b_f32.
void gemm_f32_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                     float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue = nullptr,
                     ep::IsaTier isa = ep::cpu_isa_tier(), const GemmScratch* scratch = nullptr);

// C = epilogue(alpha * A * op(B) + beta * C) with A prepacked: `a_packed` points at data laid out as
// PackedA<float> for an M x K matrix.
void gemm_f32_packed_a(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, bool transB,
                       const float* B, int64_t ldb, float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
                       const GemmEpilogue* epilogue = nullptr, ep::IsaTier isa = ep::cpu_isa_tier(),
                       const GemmScratch* scratch = nullptr);

// The entry points above on a plan made by gemm_f32_plan for the call's M, N, K, operand forms and
// transposes (the plan carries them and the tier). A run whose conditions differ from the plan's (a
// pool of another width, a call inside a parallel_for chunk) re-plans for them first, so the result
// is the one-call entry point's, bit for bit, whatever the pool.
void gemm_f32(const GemmPlan& plan, float alpha, const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
              float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue = nullptr,
              const GemmScratch* scratch = nullptr);
void gemm_f32_packed(const GemmPlan& plan, float alpha, const float* A, int64_t lda, const PackedB& B, float beta,
                     float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue = nullptr,
                     const GemmScratch* scratch = nullptr);
void gemm_f32_packed_a(const GemmPlan& plan, float alpha, const float* a_packed, const float* B, int64_t ldb,
                       float beta, float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue = nullptr,
                       const GemmScratch* scratch = nullptr);

// The widest column block the engine hands a B packer (its NC of 1024 columns plus a panel of rounding
// when blocks are evened out), so a packer can keep per-block scratch on its stack.
constexpr int64_t kGemmMaxBlockCols = 1024 + kGemmNR;

// Writes op(B)[p0:p0+kc, j0:j0+nc] as the engine's B block: ceil(nc/kGemmNR) panels of kc x kGemmNR
// floats (panel q at q * kGemmNR * kc, element (k, j) at k * kGemmNR + j), columns past nc zero. The
// engine calls it once per task and K block, from the thread running that task, with
// nc <= min(N, kGemmMaxBlockCols).
using GemmBPacker = ep::FunctionRef<void(int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst)>;

// C = epilogue(alpha * A * B + beta * C) with A prepacked (as gemm_f32_packed_a) and B produced block by
// block by `pack_b` (implicit GEMM: a convolution packs its im2col panels straight from the image, so no
// column matrix is written). Tasks split N first, so no two tasks pack the same B block.
void gemm_f32_packed_a_gen_b(int64_t M, int64_t N, int64_t K, float alpha, const float* a_packed, GemmBPacker pack_b,
                             float beta, float* C, int64_t ldc, ep::ThreadPool* pool,
                             const GemmEpilogue* epilogue = nullptr, ep::IsaTier isa = ep::cpu_isa_tier(),
                             const GemmScratch* scratch = nullptr);
// The same on a plan (as the plan-taking entry points above).
void gemm_f32_packed_a_gen_b(const GemmPlan& plan, float alpha, const float* a_packed, GemmBPacker pack_b, float beta,
                             float* C, int64_t ldc, ep::ThreadPool* pool, const GemmEpilogue* epilogue = nullptr,
                             const GemmScratch* scratch = nullptr);

// A run of columns of an implicit GEMM whose B rows are read in place (a conv's padded input):
//   C[0:M, j0:j0+ncols] = epilogue(A * B),  B(k, j) = brow[boff[k] + j],
// A prepacked for an M x K matrix (as gemm_f32_packed_a). Columns go in strips of 16: each row start
// must have ncols rounded up to 16 readable floats (columns past ncols are computed and dropped), unless
// gemm_f32_strips_exact(isa). Runs on the calling thread; callers split the work.
// prefetch_c: each tile first prefetches (for writing) the C rows it will store, for callers whose C is
// not in cache (a stem's output, written once).
void gemm_f32_strips(int64_t M, int64_t K, const float* a_packed, const float* brow, const int64_t* boff,
                     int64_t ncols, float* C, int64_t ldc, int64_t j0, const GemmEpilogue* epilogue = nullptr,
                     ep::IsaTier isa = ep::cpu_isa_tier(), bool prefetch_c = false);
// Whether gemm_f32_strips at this tier reads only the ncols columns of each B row (AVX-512: masked loads),
// so the rows need no readable slack: a 1x1 conv can run it on its input tensor, unpacked.
bool gemm_f32_strips_exact(ep::IsaTier isa);

// The float64 GEMM, same contract without the epilogue (blocked less aggressively: MatMul/Gemm/Einsum on
// double and the double conv / recurrent paths). `a_packed`, when set, is op(A) as PackedA<double>
// (transA and A are then ignored).
void gemm_f64(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
              int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc, ep::ThreadPool* pool,
              const PackedA<double>* a_packed = nullptr);

// Typed front doors for code templated on the compute type (the conv family, the recurrent ops): float
// goes to the f32 engine, double to gemm_f64.
template <typename T>
void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc, ep::ThreadPool* pool, ep::IsaTier isa = ep::cpu_isa_tier(),
          const GemmScratch* scratch = nullptr);
// C = A * op(B) + beta * C with A prepacked (N columns). `scratch`: the float engine's (ignored for double).
template <typename T>
void gemm_packed_a(const PackedA<T>& A, int64_t N, bool transB, const T* B, int64_t ldb, T beta, T* C, int64_t ldc,
                   ep::ThreadPool* pool, ep::IsaTier isa = ep::cpu_isa_tier(), const GemmScratch* scratch = nullptr);

// The plain triple loop with the same contract (double accumulation; the epilogue for float): what
// every engine and micro-kernel is tested against.
template <typename T>
void gemm_reference(bool transA, bool transB, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,
                    const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const GemmEpilogue* epilogue = nullptr);

// Whether the float engine runs vector (AVX2+) kernels at this tier on this CPU (the conv paths that pair
// their own vector code with the engine's ask it).
bool gemm_vector_kernels(ep::IsaTier isa);

}  // namespace nxrt::ops
