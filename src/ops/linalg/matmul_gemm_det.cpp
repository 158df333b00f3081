// MatMul, Gemm, Det.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "ops/common.h"
#include "ops/gemm/gemm.h"
#include "ops/linalg/linalg_util.h"
#include "ops/reduction/reduction_util.h"

namespace nxrt::ops {

Result<MatMulShape> matmul_shape(const Dims& a0, const Dims& b0) {
  if (a0.empty() || b0.empty()) {
    return invalid_argument("MatMul operands must have rank >= 1, got " + shape_to_string(a0) + " and " +
                            shape_to_string(b0));
  }
  Dims a = a0, b = b0;
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  MatMulShape s;
  s.M = a[a.size() - 2];
  s.K = a[a.size() - 1];
  s.N = b[b.size() - 1];
  if (b[b.size() - 2] != s.K) {
    return invalid_argument("MatMul inner dimensions differ: " + shape_to_string(a0) + " x " + shape_to_string(b0));
  }
  Dims ab(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  if (!broadcast_shapes(ab, bb, &s.batch)) {
    return invalid_argument("MatMul batch dimensions do not broadcast: " + shape_to_string(a0) + " x " +
                            shape_to_string(b0));
  }
  s.a_batch_strides = broadcast_strides(ab, s.batch);
  s.b_batch_strides = broadcast_strides(bb, s.batch);
  s.a_batches = shape_numel(ab);
  s.b_batches = shape_numel(bb);
  s.out_shape = s.batch;
  if (!a1) s.out_shape.push_back(s.M);
  if (!b1) s.out_shape.push_back(s.N);
  return s;
}

namespace {

// Offsets (in matrices) of A and B for each flattened output batch index.
void batch_offsets(const MatMulShape& s, std::vector<int64_t>* ao, std::vector<int64_t>* bo) {
  const int64_t nb = s.batch_count();
  ao->resize(static_cast<size_t>(nb));
  bo->resize(static_cast<size_t>(nb));
  auto cur = strided_cursor(s.batch, s.batch.size(), s.a_batch_strides, s.b_batch_strides);
  for (int64_t i = 0; i < nb; ++i, cur.next()) {
    (*ao)[i] = cur.offset(0);
    (*bo)[i] = cur.offset(1);
  }
}

// C = A * B (row-major, M x K times K x N); float on the engine's `plan` (made for these M, N, K).
template <typename T>
void gemm_plain(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, ep::ThreadPool* pool,
                const GemmPlan& plan, const GemmScratch* scratch) {
  if constexpr (std::is_same_v<T, float>) {
    gemm_f32(plan, 1.f, A, K, B, N, 0.f, C, N, pool, nullptr, scratch);
  } else if constexpr (std::is_same_v<T, double>) {
    gemm_f64(false, false, M, N, K, 1.0, A, K, B, N, 0.0, C, N, pool);
  } else {
    // Integers wrap: accumulating modulo 2^32 (2^64 for 64-bit types) and truncating gives the same
    // result as any wider accumulation, and the 32-bit loop vectorizes.
    using U = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
    auto rows = [&](int64_t i0, int64_t i1) {
      std::vector<U> acc(static_cast<size_t>(N));
      for (int64_t i = i0; i < i1; ++i) {
        std::fill(acc.begin(), acc.end(), U(0));
        U* __restrict c = acc.data();
        for (int64_t k = 0; k < K; ++k) {
          const U a = static_cast<U>(A[i * K + k]);
          const T* __restrict b = B + k * N;
          for (int64_t j = 0; j < N; ++j) c[j] += a * static_cast<U>(b[j]);
        }
        for (int64_t j = 0; j < N; ++j) C[i * N + j] = static_cast<T>(c[j]);
      }
    };
    if (pool && pool->num_threads() > 1 && M > 1) {
      pool->parallel_for(M, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, N * K)), rows);
    } else {
      rows(0, M);
    }
  }
}

template <typename T>
void matmul_batched_native(const T* A, const T* B, T* Y, const MatMulShape& s, ep::ThreadPool& pool,
                           const MatMulPlan& plan, const GemmScratch* scratch) {
  const int64_t nb = s.batch_count();
  const int64_t M = s.M, N = s.N, K = s.K;
  if (nb == 0 || M == 0 || N == 0) return;
  if (plan.batches == MatMulPlan::Batches::kTall) {
    gemm_plain<T>(nb * M, N, K, A, B, Y, &pool, plan.gemm, scratch);
    return;
  }
  std::vector<int64_t> ao, bo;
  batch_offsets(s, &ao, &bo);
  if (plan.batches == MatMulPlan::Batches::kEach) {
    for (int64_t i = 0; i < nb; ++i) {
      gemm_plain<T>(M, N, K, A + ao[i] * M * K, B + bo[i] * K * N, Y + i * M * N, &pool, plan.gemm, scratch);
    }
  } else {
    pool.parallel_for(nb, plan.chunk_grain, [&](int64_t b0, int64_t b1) {
      // Single-threaded GEMMs in a chunk: this thread's slot alone.
      const GemmScratch one = scratch ? scratch->only_slot(pool.slot()) : GemmScratch{};
      for (int64_t i = b0; i < b1; ++i)
        gemm_plain<T>(M, N, K, A + ao[i] * M * K, B + bo[i] * K * N, Y + i * M * N, nullptr, plan.gemm, &one);
    });
  }
}

// n float16/bfloat16 values as float.
template <typename T>
std::vector<float> to_float(const T* p, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = to_compute<float>(p[i]);
  return v;
}

}  // namespace

MatMulPlan matmul_plan(const MatMulShape& s, int pool_threads, ep::IsaTier isa) {
  MatMulPlan p;
  const int64_t nb = s.batch_count();
  const int64_t M = s.M, N = s.N, K = s.K;
  // B shared and A's batches contiguous in order: one tall GEMM.
  if (s.b_shared() && s.a_batches == nb) {
    p.batches = MatMulPlan::Batches::kTall;
    p.gemm = gemm_f32_plan(nb * M, N, K, GemmA::kRaw, GemmB::kRaw, false, false, pool_threads, isa);
    return p;
  }
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  if (nb == 1 || work >= (int64_t(1) << 18)) {
    p.batches = MatMulPlan::Batches::kEach;
    p.gemm = gemm_f32_plan(M, N, K, GemmA::kRaw, GemmB::kRaw, false, false, pool_threads, isa);
    return p;
  }
  // Small GEMMs: the batches over the threads, each GEMM on its chunk's thread (called without a pool).
  p.batches = MatMulPlan::Batches::kChunks;
  p.chunk_grain = std::max<int64_t>(1, (int64_t(1) << 16) / work);
  p.gemm = gemm_f32_plan(M, N, K, GemmA::kRaw, GemmB::kRaw, false, false, 1, isa);
  return p;
}

template <typename T>
void matmul_batched(const T* A, const T* B, T* Y, const MatMulShape& s, ep::ThreadPool& pool, ep::IsaTier isa,
                    const GemmScratch* scratch, const MatMulPlan* plan) {
  const MatMulPlan own = plan ? MatMulPlan{} : matmul_plan(s, pool.num_threads(), isa);
  const MatMulPlan& p = plan ? *plan : own;
  if constexpr (is_reduced_float_v<T>) {
    std::vector<float> a = to_float(A, s.a_batches * s.M * s.K);
    std::vector<float> b = to_float(B, s.b_batches * s.K * s.N);
    std::vector<float> y(static_cast<size_t>(s.batch_count() * s.M * s.N));
    matmul_batched_native<float>(a.data(), b.data(), y.data(), s, pool, p, scratch);
    for (size_t i = 0; i < y.size(); ++i) Y[i] = T(y[i]);
  } else {
    matmul_batched_native<T>(A, B, Y, s, pool, p, scratch);
  }
}

#define NXRT_INSTANTIATE_MATMUL(T) \
  template void matmul_batched<T>(const T*, const T*, T*, const MatMulShape&, ep::ThreadPool&, ep::IsaTier, \
                                  const GemmScratch*, const MatMulPlan*);
NXRT_INSTANTIATE_MATMUL(float)
NXRT_INSTANTIATE_MATMUL(double)
NXRT_INSTANTIATE_MATMUL(Float16)
NXRT_INSTANTIATE_MATMUL(BFloat16)
NXRT_INSTANTIATE_MATMUL(int8_t)
NXRT_INSTANTIATE_MATMUL(int16_t)
NXRT_INSTANTIATE_MATMUL(int32_t)
NXRT_INSTANTIATE_MATMUL(int64_t)
NXRT_INSTANTIATE_MATMUL(uint8_t)
NXRT_INSTANTIATE_MATMUL(uint16_t)
NXRT_INSTANTIATE_MATMUL(uint32_t)
NXRT_INSTANTIATE_MATMUL(uint64_t)
#undef NXRT_INSTANTIATE_MATMUL

namespace {

// What MatMul and Gemm specialize for float, float16 and bfloat16 inputs (which compute in float): the
// float engine's plan for these shapes at the pool's size; its packing scratch, plan.scratch_floats per
// pool thread, comes from KernelContext::thread_slots. MatMul's carries how its batches run too.
template <typename Plan>
struct GemmPlanVariant final : ep::KernelVariant {
  explicit GemmPlanVariant(Plan p) : plan(std::move(p)) {}
  size_t slot_floats() const { return gemm_plan().scratch_floats; }
  const GemmPlan& gemm_plan() const {
    if constexpr (std::is_same_v<Plan, MatMulPlan>) {
      return plan.gemm;
    } else {
      return plan;
    }
  }
  const Plan plan;
};
using MatMulVariant = GemmPlanVariant<MatMulPlan>;
using GemmVariant = GemmPlanVariant<GemmPlan>;

// The context's variant when it is a V (else null), with its scratch in `scratch` (the thread slots;
// none when they are not to be had: the engine then allocates per call).
template <typename V>
const V* gemm_variant(ep::KernelContext& ctx, GemmScratch* scratch) {
  const auto* v = dynamic_cast<const V*>(ctx.variant());
  if (!v) return nullptr;
  *scratch = {};
  if (v->slot_floats() == 0) return v;
  Result<ep::SlotMemory> slots = ctx.thread_slots(v->slot_floats() * sizeof(float));
  if (slots.ok()) *scratch = {reinterpret_cast<float*>(slots->base), slots->stride / sizeof(float), slots->slots};
  return v;
}

template <typename V, typename Plan>
Result<std::unique_ptr<ep::KernelVariant>> gemm_plan_variant(const ep::SpecializeContext&, Plan plan) {
  return std::unique_ptr<ep::KernelVariant>(std::make_unique<V>(std::move(plan)));
}

// Whether a plan was made for this product (a variant is made for the node's input shapes, so it always
// is; a mismatch would be a caller's bug, which costs a per-call plan rather than a wrong product).
bool gemm_plan_serves(const GemmPlan& p, int64_t M, int64_t N, int64_t K, GemmB b, bool ta, bool tb) {
  return p.M == M && p.N == N && p.K == K && p.a == GemmA::kRaw && p.b == b && p.trans_a == ta &&
         (b == GemmB::kPacked || p.trans_b == tb);
}
bool matmul_plan_serves(const MatMulPlan& p, const MatMulShape& s) {
  const int64_t rows = p.batches == MatMulPlan::Batches::kTall ? s.batch_count() * s.M : s.M;
  return gemm_plan_serves(p.gemm, rows, s.N, s.K, GemmB::kRaw, false, false);
}

Status matmul_compute(ep::KernelContext& ctx, ep::IsaTier isa) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) {
    return ctx.error(std::string("MatMul operands differ in dtype: ") + a.describe() + " x " + b.describe(),
                     StatusCode::kInvalidArgument);
  }
  auto sr = matmul_shape(a.shape(), b.shape());
  if (!sr.ok()) return ctx.error(sr.status().message(), StatusCode::kInvalidArgument);
  const MatMulShape& s = sr.value();
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), s.out_shape));
  return dispatch_numeric(
      a.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        T* yd = y->data<T>();
        if (s.K == 0) {
          std::fill(yd, yd + y->numel(), T(0));
          return Status::Ok();
        }
        GemmScratch gs;
        const MatMulVariant* v = gemm_variant<MatMulVariant>(ctx, &gs);
        const MatMulPlan* plan = v && matmul_plan_serves(v->plan, s) ? &v->plan : nullptr;
        matmul_batched<T>(a.data<T>(), b.data<T>(), yd, s, ctx.pool(), isa, &gs, plan);
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(a.dtype()), StatusCode::kNotImplemented); });
}

// ---------------------------------------------------------------------------------------------
// Gemm: Y = alpha * op(A) op(B) + beta * C, C unidirectionally broadcast to [M, N].

template <typename T>
Status gemm_typed(ep::KernelContext& ctx, const Tensor& a, const Tensor& b, const Tensor* c, bool ta, bool tb,
                  float alpha, float beta, int64_t M, int64_t N, int64_t K, Tensor* y, ep::IsaTier isa) {
  T* yd = y->data<T>();
  const bool use_c = c != nullptr && beta != 0.f;
  // Fill Y with broadcast C (as compute type), then accumulate.
  using Cm = compute_t<T>;
  std::vector<Cm> cbuf;
  Cm* out;
  std::vector<Cm> ybuf;
  if constexpr (std::is_same_v<T, Cm>) {
    out = yd;
  } else {
    ybuf.resize(static_cast<size_t>(M * N));
    out = ybuf.data();
  }
  if (use_c) {
    Dims cst = broadcast_strides(c->shape(), Dims{M, N});
    const T* cd = c->data<T>();
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) out[i * N + j] = static_cast<Cm>(cd[i * cst[0] + j * cst[1]]);
  }
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Float16> ||
                std::is_same_v<T, BFloat16>) {
    const Cm* ap;
    const Cm* bp;
    std::vector<Cm> abuf, bbuf;
    if constexpr (std::is_same_v<T, Cm>) {
      ap = a.data<T>();
      bp = b.data<T>();
    } else {
      abuf = to_float(a.data<T>(), a.numel());
      bbuf = to_float(b.data<T>(), b.numel());
      ap = abuf.data();
      bp = bbuf.data();
    }
    const int64_t lda = ta ? M : K, ldb = tb ? K : N;
    if constexpr (std::is_same_v<Cm, double>) {
      gemm_f64(ta, tb, M, N, K, alpha, ap, lda, bp, ldb, use_c ? beta : 0.0, out, N, &ctx.pool());
    } else {
      GemmScratch gs;
      const GemmVariant* v = gemm_variant<GemmVariant>(ctx, &gs);
      const GemmPlan plan = v && gemm_plan_serves(v->plan, M, N, K, GemmB::kRaw, ta, tb)
                                ? v->plan
                                : gemm_f32_plan(M, N, K, GemmA::kRaw, GemmB::kRaw, ta, tb, ctx.pool().num_threads(), isa);
      gemm_f32(plan, alpha, ap, lda, bp, ldb, use_c ? beta : 0.f, out, N, &ctx.pool(), nullptr, &gs);
    }
    if constexpr (!std::is_same_v<T, Cm>) {
      for (int64_t i = 0; i < M * N; ++i) yd[i] = T(out[i]);
    }
  } else {
    // Integer Gemm: exact integer products, scaled by alpha/beta in double.
    const T* ad = a.data<T>();
    const T* bd = b.data<T>();
    const T* cd = use_c ? c->data<T>() : nullptr;
    Dims cst = use_c ? broadcast_strides(c->shape(), Dims{M, N}) : Dims{0, 0};
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        using Acc = std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>;
        std::make_unsigned_t<Acc> s = 0;
        for (int64_t k = 0; k < K; ++k) {
          Acc av = static_cast<Acc>(ta ? ad[k * M + i] : ad[i * K + k]);
          Acc bv = static_cast<Acc>(tb ? bd[j * K + k] : bd[k * N + j]);
          s += static_cast<std::make_unsigned_t<Acc>>(av) * static_cast<std::make_unsigned_t<Acc>>(bv);
        }
        double v = static_cast<double>(static_cast<Acc>(s));
        if (alpha != 1.f) v *= alpha;
        if (use_c) v += static_cast<double>(beta) * static_cast<double>(cd[i * cst[0] + j * cst[1]]);
        yd[i * N + j] = (alpha == 1.f && (!use_c || beta == 1.f))
                            ? static_cast<T>(static_cast<Acc>(s) + (use_c ? static_cast<Acc>(cd[i * cst[0] + j * cst[1]]) : Acc(0)))
                            : saturate_cast<T>(v);
      }
    }
  }
  return Status::Ok();
}

Status gemm_compute(ep::KernelContext& ctx, ep::IsaTier isa) {
  const auto& info = ctx.info();
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
  if (c == nullptr && info.opset() < 11) return ctx.error("Gemm before opset 11 requires input C");
  const bool ta = info.attr_int("transA", 0) != 0, tb = info.attr_int("transB", 0) != 0;
  const float alpha = info.attr_float("alpha", 1.f), beta = info.attr_float("beta", 1.f);
  if (a.rank() != 2 || b.rank() != 2) {
    return ctx.error("Gemm expects 2-D A and B, got " + a.describe() + " and " + b.describe(),
                     StatusCode::kInvalidArgument);
  }
  if (a.dtype() != b.dtype() || (c && c->dtype() != a.dtype())) {
    return ctx.error("Gemm operand dtypes differ", StatusCode::kInvalidArgument);
  }
  const int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1);
  const int64_t Kb = tb ? b.dim(1) : b.dim(0), N = tb ? b.dim(0) : b.dim(1);
  if (K != Kb) {
    return ctx.error("Gemm inner dimensions differ: op(A) is [" + std::to_string(M) + "," + std::to_string(K) +
                         "], op(B) is [" + std::to_string(Kb) + "," + std::to_string(N) + "]",
                     StatusCode::kInvalidArgument);
  }
  if (c) {
    Dims out;
    if (c->rank() > 2 || !broadcast_shapes(c->shape(), Dims{M, N}, &out) || out != Dims{M, N}) {
      return ctx.error("Gemm C " + c->describe() + " does not broadcast to [" + std::to_string(M) + "," +
                           std::to_string(N) + "]",
                       StatusCode::kInvalidArgument);
    }
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, a.dtype(), Dims{M, N}));
  if (M == 0 || N == 0) return Status::Ok();
  Tensor c2;
  if (c) c2 = c->rank() == 2 ? *c : c->reshaped(c->rank() == 1 ? Dims{1, c->dim(0)} : Dims{1, 1});
  return dispatch_numeric(
      a.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        return gemm_typed<T>(ctx, a, b, c ? &c2 : nullptr, ta, tb, alpha, beta, M, N, K, y, isa);
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(a.dtype()), StatusCode::kNotImplemented); });
}

// ---------------------------------------------------------------------------------------------
// Det: LU decomposition with partial pivoting per matrix, in double.

Status det_compute(ep::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2 || x.dim(-1) != x.dim(-2)) {
    return ctx.error("Det expects [..., M, M], got " + x.describe(), StatusCode::kInvalidArgument);
  }
  const int64_t n = x.dim(-1);
  Dims out_shape(x.shape().begin(), x.shape().end() - 2);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), out_shape));
  const int64_t nb = y->numel();
  return dispatch_float(
      x.dtype(),
      [&](auto tag) -> Status {
        using T = decltype(tag);
        const T* xd = x.data<T>();
        T* yd = y->data<T>();
        parallel_run(ctx, nb, n * n * n, [&](int64_t b0, int64_t b1) {
          std::vector<double> m(static_cast<size_t>(n * n));
          for (int64_t bi = b0; bi < b1; ++bi) {
            const T* src = xd + bi * n * n;
            for (int64_t i = 0; i < n * n; ++i) m[i] = to_compute<double>(src[i]);
            double det = 1.0;
            for (int64_t col = 0; col < n; ++col) {
              int64_t piv = col;
              double best = std::abs(m[col * n + col]);
              for (int64_t r = col + 1; r < n; ++r) {
                double v = std::abs(m[r * n + col]);
                if (v > best) {
                  best = v;
                  piv = r;
                }
              }
              if (best == 0.0) {
                det = 0.0;
                break;
              }
              if (piv != col) {
                for (int64_t k = 0; k < n; ++k) std::swap(m[col * n + k], m[piv * n + k]);
                det = -det;
              }
              const double d = m[col * n + col];
              det *= d;
              for (int64_t r = col + 1; r < n; ++r) {
                const double f = m[r * n + col] / d;
                if (f == 0.0) continue;
                for (int64_t k = col + 1; k < n; ++k) m[r * n + k] -= f * m[col * n + k];
              }
            }
            yd[bi] = from_compute<T>(det);
          }
        });
        return Status::Ok();
      },
      [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(x.dtype()), StatusCode::kNotImplemented); });
}

// ---------------------------------------------------------------------------------------------
// Class kernels: a constant float32 right operand (an initializer) is packed once at creation.

class MatMulKernel final : public ep::Kernel, public MatMulWithPost {
 public:
  Status init(const ep::KernelInfo& info) {
    isa_ = info.isa();
    const Tensor* b = info.const_input(1);
    if (b && b->dtype() == DataType::kFloat && b->rank() == 2 && b->numel() > 0) {
      Tensor bc = b->contiguous();
      packed_ = pack_b_f32(false, b->dim(0), b->dim(1), bc.data<float>(), b->dim(1), isa_);
      b_shape_ = b->shape();
    }
    return Status::Ok();
  }
  bool reads_const_input_data(size_t i) const override { return !(i == 1 && !packed_.empty()); }
  // The float GEMM's plan for these shapes (with a constant B, the one GEMM A's batches fold into) and
  // its packing scratch, one slot per thread.
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    if (!sc.has_input(0) || !sc.has_input(1)) return std::unique_ptr<ep::KernelVariant>();
    const DataType dt = sc.dtype(0);
    if (dt != DataType::kFloat && dt != DataType::kFloat16 && dt != DataType::kBFloat16)
      return std::unique_ptr<ep::KernelVariant>();
    auto sr = matmul_shape(sc.shape(0), packed_.empty() ? sc.shape(1) : b_shape_);
    if (!sr.ok()) return std::unique_ptr<ep::KernelVariant>();
    const MatMulShape& s = sr.value();
    if (packed_.empty()) return gemm_plan_variant<MatMulVariant>(sc, matmul_plan(s, sc.num_threads(), isa_));
    if (dt != DataType::kFloat) return std::unique_ptr<ep::KernelVariant>();
    return gemm_plan_variant<MatMulVariant>(sc, packed_b_plan(s, sc.num_threads()));
  }
  Status compute(ep::KernelContext& ctx) const override {
    if (packed_.empty()) return matmul_compute(ctx, isa_);
    return compute_packed(ctx, nullptr, nullptr).status();
  }
  Result<bool> compute_with_post(ep::KernelContext& ctx, GemmEpilogue ep, int64_t bias_len,
                                 const Dims* residual_shape) const override {
    if (packed_.empty() || (ep.bias && bias_len != packed_.N)) return false;
    ep.isa = isa_;
    return compute_packed(ctx, &ep, residual_shape);
  }

 private:
  // The product against the B packed at creation, with `ep` in the GEMM's store when given; false (and
  // nothing computed) when the residual's shape is not the output's.
  Result<bool> compute_packed(ep::KernelContext& ctx, GemmEpilogue* ep, const Dims* residual_shape) const {
    const Tensor& a = ctx.input(0);
    // B was packed at creation (and its bytes may be gone): only a float A can pair with it.
    if (a.dtype() != DataType::kFloat)
      return ctx.error(std::string("A must be float32 like the constant B, got ") + a.describe(), StatusCode::kInvalidArgument);
    auto sr = matmul_shape(a.shape(), b_shape_);
    if (!sr.ok()) return ctx.error(sr.status().message(), StatusCode::kInvalidArgument);
    const MatMulShape& s = sr.value();
    if (ep && ep->residual && (!residual_shape || *residual_shape != s.out_shape)) return false;
    if (ep) ep->ldr = s.N;
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, s.out_shape));
    if (y->numel() == 0) return true;
    GemmScratch gs;
    const MatMulVariant* v = gemm_variant<MatMulVariant>(ctx, &gs);
    const int64_t rows = s.batch_count() * s.M;
    const MatMulPlan plan = v && gemm_plan_serves(v->plan.gemm, rows, s.N, s.K, GemmB::kPacked, false, false)
                                ? v->plan
                                : packed_b_plan(s, ctx.pool().num_threads());
    gemm_f32_packed(plan.gemm, 1.f, a.data<float>(), s.K, packed_, 0.f, y->data<float>(), s.N, &ctx.pool(), ep, &gs);
    return true;
  }

  // B has no batch dims: A's batches fold into M of one GEMM against the packed B.
  MatMulPlan packed_b_plan(const MatMulShape& s, int threads) const {
    MatMulPlan p;
    p.batches = MatMulPlan::Batches::kTall;
    p.gemm = gemm_f32_plan(s.batch_count() * s.M, packed_.N, packed_.K, GemmA::kRaw, GemmB::kPacked, false, false,
                           threads, isa_);
    return p;
  }
  PackedB packed_;
  Dims b_shape_;
  ep::IsaTier isa_ = ep::cpu_isa_tier();  // the GEMM kernels' tier, chosen at creation
};

class GemmKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    isa_ = info.isa();
    const Tensor* b = info.const_input(1);
    tb_ = info.attr_int("transB", 0) != 0;
    if (b && b->dtype() == DataType::kFloat && b->rank() == 2 && b->numel() > 0) {
      Tensor bc = b->contiguous();
      const int64_t K = tb_ ? b->dim(1) : b->dim(0), N = tb_ ? b->dim(0) : b->dim(1);
      packed_ = pack_b_f32(tb_, K, N, bc.data<float>(), b->dim(1), isa_);
      b_shape_ = b->shape();
    }
    return Status::Ok();
  }
  bool reads_const_input_data(size_t i) const override { return !(i == 1 && !packed_.empty()); }
  // The float GEMM's packing scratch for these shapes, one slot per thread.
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    if (!sc.has_input(0) || !sc.has_input(1)) return std::unique_ptr<ep::KernelVariant>();
    const DataType dt = sc.dtype(0);
    const Dims& as = sc.shape(0);
    const Dims& bs = packed_.empty() ? sc.shape(1) : b_shape_;
    if ((dt != DataType::kFloat && dt != DataType::kFloat16 && dt != DataType::kBFloat16) || as.size() != 2 ||
        bs.size() != 2)
      return std::unique_ptr<ep::KernelVariant>();
    const bool ta = sc.info().attr_int("transA", 0) != 0;
    const int64_t M = ta ? as[1] : as[0], K = ta ? as[0] : as[1], N = tb_ ? bs[0] : bs[1];
    if (packed_.empty()) {
      return gemm_plan_variant<GemmVariant>(
          sc, gemm_f32_plan(M, N, K, GemmA::kRaw, GemmB::kRaw, ta, tb_, sc.num_threads(), isa_));
    }
    if (dt != DataType::kFloat || K != packed_.K) return std::unique_ptr<ep::KernelVariant>();
    return gemm_plan_variant<GemmVariant>(sc, packed_b_plan(M, ta, sc.num_threads()));
  }
  Status compute(ep::KernelContext& ctx) const override {
    const auto& info = ctx.info();
    const Tensor& a = ctx.input(0);
    const Tensor* c = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    if (packed_.empty()) return gemm_compute(ctx, isa_);
    // B was packed at creation (and its bytes may be gone): inputs that cannot pair with it are errors
    // reported here, without the general kernel.
    if (a.dtype() != DataType::kFloat || a.rank() != 2 || (c && c->dtype() != DataType::kFloat) ||
        (c == nullptr && info.opset() < 11)) {
      return ctx.error("A must be float32 [M, K] (and C float32, required before opset 11) to multiply the constant B " +
                           shape_to_string(b_shape_) + "; got A " + a.describe() + (c ? ", C " + c->describe() : std::string(", no C")),
                       StatusCode::kInvalidArgument);
    }
    const bool ta = info.attr_int("transA", 0) != 0;
    const float alpha = info.attr_float("alpha", 1.f), beta = info.attr_float("beta", 1.f);
    const int64_t M = ta ? a.dim(1) : a.dim(0), K = ta ? a.dim(0) : a.dim(1), N = packed_.N;
    if (K != packed_.K)
      return ctx.error("A " + a.describe() + " has K = " + std::to_string(K) + " but the constant B " + shape_to_string(b_shape_) +
                           " needs K = " + std::to_string(packed_.K), StatusCode::kInvalidArgument);
    const bool use_c = c != nullptr && beta != 0.f;
    if (c) {
      Dims out;
      if (c->rank() > 2 || !broadcast_shapes(c->shape(), Dims{M, N}, &out) || out != Dims{M, N})
        return ctx.error("C " + c->describe() + " does not broadcast to the output [" + std::to_string(M) + ", " +
                             std::to_string(N) + "]", StatusCode::kInvalidArgument);
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, Dims{M, N}));
    if (M == 0 || N == 0) return Status::Ok();
    float* yd = y->data<float>();
    GemmScratch gs;
    const GemmVariant* v = gemm_variant<GemmVariant>(ctx, &gs);
    const GemmPlan plan = v && gemm_plan_serves(v->plan, M, N, K, GemmB::kPacked, ta, false)
                              ? v->plan
                              : packed_b_plan(M, ta, ctx.pool().num_threads());
    // A bias vector (C of shape [N], [1,N] or [M,1]) with beta == 1 is fused into the GEMM's store.
    if (use_c && beta == 1.f && c->numel() > 0) {
      GemmEpilogue ep;
      const bool row_vec = c->numel() == N && (c->rank() == 1 || (c->rank() == 2 && c->dim(0) == 1));
      const bool col_vec = c->rank() == 2 && c->dim(1) == 1 && c->dim(0) == M && M > 1;
      if (row_vec || col_vec) {
        ep.bias_kind = row_vec ? GemmBias::kPerColumn : GemmBias::kPerRow;
        ep.bias = c->data<float>();
        gemm_f32_packed(plan, alpha, a.data<float>(), ta ? M : K, packed_, 0.f, yd, N, &ctx.pool(), &ep, &gs);
        return Status::Ok();
      }
    }
    if (use_c) {
      Tensor c2 = c->rank() == 2 ? *c : c->reshaped(c->rank() == 1 ? Dims{1, c->dim(0)} : Dims{1, 1});
      const Dims cst = broadcast_strides(c2.shape(), Dims{M, N});
      const float* cd = c2.data<float>();
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) yd[i * N + j] = cd[i * cst[0] + j * cst[1]];
    }
    gemm_f32_packed(plan, alpha, a.data<float>(), ta ? M : K, packed_, use_c ? beta : 0.f, yd, N, &ctx.pool(), nullptr,
                    &gs);
    return Status::Ok();
  }

 private:
  GemmPlan packed_b_plan(int64_t M, bool ta, int threads) const {
    return gemm_f32_plan(M, packed_.N, packed_.K, GemmA::kRaw, GemmB::kPacked, ta, false, threads, isa_);
  }

  bool tb_ = false;
  PackedB packed_;
  Dims b_shape_;
  ep::IsaTier isa_ = ep::cpu_isa_tier();  // the GEMM kernels' tier, chosen at creation
};

}  // namespace

void register_linalg_ops(ep::KernelRegistry& r) {
  r.add_class<MatMulKernel>("", "MatMul");
  r.add_class<GemmKernel>("", "Gemm");
  r.add_fn("Det", &det_compute);
  register_einsum_ops(r);
  register_quant_matmul_ops(r);
}

}  // namespace nxrt::ops
