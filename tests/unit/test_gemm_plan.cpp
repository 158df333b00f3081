// The float GEMM engine's plans (GemmPlan, gemm_f32_plan, the plan-taking entry points): a plan run gives
// the one-call entry point's bits for every operand form (raw, packed A, packed B, generated B), every
// tier this CPU runs, with and without a pool of 1 or 2 threads, and is close to gemm_reference; a plan
// made for 2 threads and run on 1 thread, without a pool or inside a parallel_for chunk, re-plans and
// still gives the one-call bits; what the plan decides (path, threads, split, scratch) follows its rules.
// MatMul and Gemm with and without their specialized variant (which holds the plans) are bit-identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "nxrt/float_types.h"
#include "ops/gemm/gemm.h"
#include "ops/gemm/gemm_kernels.h"

namespace nxrt {
namespace {

using ops::GemmA;
using ops::GemmB;
using ops::GemmPath;
using ops::GemmPlan;
using ops::GemmScratch;

enum class Form { kRaw, kPackedA, kPackedB, kGenB };
constexpr Form kForms[] = {Form::kRaw, Form::kPackedA, Form::kPackedB, Form::kGenB};

GemmA a_of(Form f) { return f == Form::kPackedA || f == Form::kGenB ? GemmA::kPacked : GemmA::kRaw; }
GemmB b_of(Form f) {
  return f == Form::kPackedB ? GemmB::kPacked : f == Form::kGenB ? GemmB::kGenerated : GemmB::kRaw;
}

// One problem with its operands in every form.
struct Problem {
  int64_t M, N, K;
  bool ta, tb;
  float alpha, beta;
  std::vector<float> A, B, C0, bias;
  ops::PackedA<float> pa;  // op(A) packed (ta honoured)
  ops::PackedB pb;         // op(B) packed (tb honoured)
  int64_t lda() const { return ta ? M : K; }
  int64_t ldb() const { return tb ? K : N; }
};

Problem make_problem(std::mt19937& rng, int64_t M, int64_t N, int64_t K, bool ta, bool tb, float alpha, float beta,
                     ep::IsaTier isa) {
  Problem p{M, N, K, ta, tb, alpha, beta, {}, {}, {}, {}, {}, {}};
  p.A = nxrt::testing::random_floats(rng, M * K);
  p.B = nxrt::testing::random_floats(rng, K * N);
  p.C0 = nxrt::testing::random_floats(rng, M * N);
  p.bias = nxrt::testing::random_floats(rng, N);
  p.pa = ops::pack_a<float>(ta, M, K, p.A.data(), p.lda());
  p.pb = ops::pack_b_f32(tb, K, N, p.B.data(), p.ldb(), isa);
  return p;
}

ops::GemmEpilogue epilogue_of(const Problem& p) {
  ops::GemmEpilogue ep;
  ep.bias_kind = ops::GemmBias::kPerColumn;
  ep.bias = p.bias.data();
  ep.act = ops::Activation::kRelu;
  return ep;
}

// C = epilogue(alpha * op(A) * op(B) + beta * C0) in form f: on `plan` when given, else the one-call
// entry point at `isa`. Packed A / generated B read op(A) from pa; generated B packs op(B) per block.
std::vector<float> run(const Problem& p, Form f, const GemmPlan* plan, ep::ThreadPool* pool, ep::IsaTier isa,
                       const GemmScratch* gs = nullptr) {
  std::vector<float> C = p.C0;
  const ops::GemmEpilogue ep = epilogue_of(p);
  const int64_t M = p.M, N = p.N, K = p.K;
  auto gen = [&](int64_t p0, int64_t kc, int64_t j0, int64_t nc, float* dst) {
    constexpr int64_t NR = ops::kGemmNR;
    for (int64_t q = 0; q * NR < nc; ++q)
      for (int64_t k = 0; k < kc; ++k)
        for (int64_t j = 0; j < NR; ++j) {
          const int64_t col = j0 + q * NR + j, row = p0 + k;
          float v = 0.f;
          if (q * NR + j < nc) v = p.tb ? p.B[col * K + row] : p.B[row * N + col];
          dst[q * NR * kc + k * NR + j] = v;
        }
  };
  switch (f) {
    case Form::kRaw:
      if (plan) {
        ops::gemm_f32(*plan, p.alpha, p.A.data(), p.lda(), p.B.data(), p.ldb(), p.beta, C.data(), N, pool, &ep, gs);
      } else {
        ops::gemm_f32(p.ta, p.tb, M, N, K, p.alpha, p.A.data(), p.lda(), p.B.data(), p.ldb(), p.beta, C.data(), N,
                      pool, &ep, isa, gs);
      }
      break;
    case Form::kPackedA:
      if (plan) {
        ops::gemm_f32_packed_a(*plan, p.alpha, p.pa.data.data(), p.B.data(), p.ldb(), p.beta, C.data(), N, pool, &ep,
                               gs);
      } else {
        ops::gemm_f32_packed_a(M, N, K, p.alpha, p.pa.data.data(), p.tb, p.B.data(), p.ldb(), p.beta, C.data(), N,
                               pool, &ep, isa, gs);
      }
      break;
    case Form::kPackedB:
      if (plan) {
        ops::gemm_f32_packed(*plan, p.alpha, p.A.data(), p.lda(), p.pb, p.beta, C.data(), N, pool, &ep, gs);
      } else {
        ops::gemm_f32_packed(p.ta, M, p.alpha, p.A.data(), p.lda(), p.pb, p.beta, C.data(), N, pool, &ep, isa, gs);
      }
      break;
    case Form::kGenB:
      if (plan) {
        ops::gemm_f32_packed_a_gen_b(*plan, p.alpha, p.pa.data.data(), gen, p.beta, C.data(), N, pool, &ep, gs);
      } else {
        ops::gemm_f32_packed_a_gen_b(M, N, K, p.alpha, p.pa.data.data(), gen, p.beta, C.data(), N, pool, &ep, isa,
                                     gs);
      }
      break;
  }
  return C;
}

GemmPlan plan_for(const Problem& p, Form f, int threads, ep::IsaTier isa) {
  return ops::gemm_f32_plan(p.M, p.N, p.K, a_of(f), b_of(f), p.ta, p.tb, threads, isa);
}

std::vector<float> reference(const Problem& p) {
  std::vector<float> R = p.C0;
  const ops::GemmEpilogue ep = epilogue_of(p);
  ops::gemm_reference<float>(p.ta, p.tb, p.M, p.N, p.K, p.alpha, p.A.data(), p.lda(), p.B.data(), p.ldb(), p.beta,
                             R.data(), p.N, &ep);
  return R;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, int64_t K) {
  ASSERT_EQ(got.size(), want.size());
  const float tol = 1e-4f * (1.f + std::sqrt(static_cast<float>(K)));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "at " << i;
}

struct Shape {
  int64_t M, N, K;
};

// 1s, small odd sizes, and sizes past every block (MC 144 rows, NC up to 1024 columns, KC 256).
std::vector<Shape> test_shapes(std::mt19937& rng) {
  std::vector<Shape> v = {{1, 1, 1},   {1, 37, 300},  {5, 1, 40},      {7, 33, 5},     {1, 600, 70},
                          {40, 1, 9},  {2, 0, 3},     {3, 4, 0},       {64, 784, 96},  {150, 1100, 260},
                          {13, 700, 513}, {600, 40, 64}};
  std::uniform_int_distribution<int64_t> dm(1, 160), dn(1, 1200), dk(1, 600);
  for (int i = 0; i < 4; ++i) v.push_back({dm(rng), dn(rng), dk(rng)});
  return v;
}

TEST(GemmPlan, PlanRunEqualsOneCallEveryFormTierAndPool) {
  std::mt19937 rng(2024);
  ep::ThreadPool pool1(1), pool2(2);
  const std::vector<Shape> shapes = test_shapes(rng);
  int planned_parallel = 0;
  for (int t = 0; t <= static_cast<int>(ep::cpu_isa_tier()); ++t) {
    const auto isa = static_cast<ep::IsaTier>(t);
    SCOPED_TRACE(ops::f32_gemm_kernels(isa).name);
    for (size_t si = 0; si < shapes.size(); ++si) {
      const Shape& sh = shapes[si];
      for (Form f : kForms) {
        const bool a_raw = a_of(f) == GemmA::kRaw;
        const bool ta = a_raw && (rng() & 1), tb = rng() & 1;
        // Alternate the plain store (alpha 1, beta 0: the epilogue in the tile) with alpha/beta.
        const bool plain = (si + static_cast<size_t>(f)) % 2 == 0;
        const Problem p = make_problem(rng, sh.M, sh.N, sh.K, ta, tb, plain ? 1.f : 0.5f, plain ? 0.f : 2.f, isa);
        SCOPED_TRACE(::testing::Message() << "M " << sh.M << " N " << sh.N << " K " << sh.K << " ta " << ta << " tb "
                                          << tb << " form " << static_cast<int>(f) << " alpha " << p.alpha);
        const std::vector<float> want = reference(p);
        for (ep::ThreadPool* pool : {static_cast<ep::ThreadPool*>(nullptr), &pool1, &pool2}) {
          const int width = pool ? pool->num_threads() : 1;
          SCOPED_TRACE(::testing::Message() << "pool width " << width);
          const GemmPlan plan = plan_for(p, f, width, isa);
          // The one-call bound covers the plan; equal unless this plan reads a raw A in place.
          const size_t bound =
              ops::gemm_f32_scratch_floats(sh.M, sh.N, sh.K, a_of(f) == GemmA::kPacked, b_of(f) == GemmB::kPacked);
          if (plan.a_in_place) {
            EXPECT_LE(plan.scratch_floats, bound);
          } else {
            EXPECT_EQ(plan.scratch_floats, bound);
          }
          if (plan.threads > 1) ++planned_parallel;
          const std::vector<float> one_call = run(p, f, nullptr, pool, isa);
          expect_near(one_call, want, sh.K);
          if (::testing::Test::HasFatalFailure()) return;
          EXPECT_EQ(run(p, f, &plan, pool, isa), one_call) << "plan run vs one call";
          // The plan's scratch, a slot per pool thread, as a variant declares it.
          std::vector<float> slots(plan.scratch_floats * static_cast<size_t>(width) + 16);
          const GemmScratch gs{slots.data(), plan.scratch_floats, width};
          EXPECT_EQ(run(p, f, &plan, pool, isa, &gs), one_call) << "plan run on its scratch";
        }
      }
    }
  }
  EXPECT_GT(planned_parallel, 0);
}

// A plan made for a 2-thread pool, run where only one thread computes: on a 1-thread pool, without a
// pool, and from inside the 2-thread pool's parallel_for chunks (nested loops run inline), each chunk on
// its own slot of the plan's scratch. The engine re-plans for the width at hand: the one-call bits.
TEST(GemmPlan, TwoThreadPlanRunsOnOneThreadAndInsideChunks) {
  std::mt19937 rng(77);
  ep::ThreadPool pool1(1), pool2(2);
  const ep::IsaTier isa = ep::cpu_isa_tier();
  for (const Shape& sh : {Shape{150, 1100, 260}, Shape{64, 784, 96}, Shape{1, 4096, 300}, Shape{2000, 1, 600}}) {
    for (Form f : kForms) {
      if ((sh.M == 1 || sh.N == 1) && f != Form::kRaw) continue;  // the GEMV shapes: raw operands
      const Problem p = make_problem(rng, sh.M, sh.N, sh.K, false, f == Form::kPackedB, 1.f, 0.f, isa);
      SCOPED_TRACE(::testing::Message() << "M " << sh.M << " N " << sh.N << " K " << sh.K << " form "
                                        << static_cast<int>(f));
      const GemmPlan plan2 = plan_for(p, f, 2, isa);
      ASSERT_EQ(plan2.threads, 2) << "the shape is worth 2 threads";
      const std::vector<float> serial = run(p, f, nullptr, nullptr, isa);
      expect_near(serial, reference(p), sh.K);
      EXPECT_EQ(run(p, f, &plan2, &pool1, isa), run(p, f, nullptr, &pool1, isa)) << "1-thread pool";
      EXPECT_EQ(run(p, f, &plan2, nullptr, isa), serial) << "no pool";
      // Inside chunks: two products at once, one per chunk, on the chunk thread's slot.
      const size_t floats = plan2.scratch_floats;
      std::vector<float> slots(floats * 2 + 16, -3.f);
      const GemmScratch gs{slots.data(), floats, 2};
      std::vector<float> got[2];
      pool2.parallel_for(2, 1, [&](int64_t b0, int64_t b1) {
        for (int64_t b = b0; b < b1; ++b) got[b] = run(p, f, &plan2, &pool2, isa, &gs);
      });
      EXPECT_EQ(got[0], serial) << "inside a chunk";
      EXPECT_EQ(got[1], serial) << "inside a chunk";
      // And on a pool wider than planned for (re-planned for its width).
      ep::ThreadPool pool3(3, ep::ThreadPool::Sizing::kExact);
      if (pool3.num_threads() == 3) {
        EXPECT_EQ(run(p, f, &plan2, &pool3, isa), run(p, f, nullptr, &pool3, isa)) << "wider pool";
      }
    }
  }
}

// A plan given operands of other forms than it was made for re-plans (never a wrong product).
TEST(GemmPlan, MismatchedFormsReplan) {
  std::mt19937 rng(5);
  ep::ThreadPool pool2(2);
  const ep::IsaTier isa = ep::cpu_isa_tier();
  const Problem p = make_problem(rng, 70, 300, 90, false, false, 1.f, 0.f, isa);
  const GemmPlan raw = plan_for(p, Form::kRaw, 2, isa);
  for (Form f : {Form::kPackedA, Form::kPackedB, Form::kGenB})
    EXPECT_EQ(run(p, f, &raw, &pool2, isa), run(p, f, nullptr, &pool2, isa)) << static_cast<int>(f);
}

// What a plan decides, by the engine's rules.
TEST(GemmPlan, DecisionsFollowTheRules) {
  const ep::IsaTier isa = ep::cpu_isa_tier();
  auto plan = [&](int64_t M, int64_t N, int64_t K, GemmA a, GemmB b, int threads) {
    return ops::gemm_f32_plan(M, N, K, a, b, false, false, threads, isa);
  };
  EXPECT_EQ(plan(0, 5, 5, GemmA::kRaw, GemmB::kRaw, 2).path, GemmPath::kNothing);
  EXPECT_EQ(plan(5, 5, 0, GemmA::kRaw, GemmB::kRaw, 2).path, GemmPath::kScaleC);
  EXPECT_EQ(plan(1, 500, 50, GemmA::kRaw, GemmB::kRaw, 2).path, GemmPath::kGemvRow);
  EXPECT_EQ(plan(1, 500, 50, GemmA::kRaw, GemmB::kPacked, 2).path, GemmPath::kGemvRow);
  EXPECT_EQ(plan(500, 1, 50, GemmA::kRaw, GemmB::kRaw, 2).path, GemmPath::kGemvColumn);
  EXPECT_EQ(plan(500, 1, 50, GemmA::kRaw, GemmB::kPacked, 2).path, GemmPath::kBlocked);
  EXPECT_EQ(plan(1, 500, 50, GemmA::kRaw, GemmB::kGenerated, 2).path, GemmPath::kBlocked);  // a GEMV cannot generate B
  EXPECT_EQ(plan(1, 500, 50, GemmA::kPacked, GemmB::kRaw, 2).path, GemmPath::kBlocked);
  EXPECT_EQ(plan(1, 500, 50, GemmA::kRaw, GemmB::kRaw, 2).scratch_floats, 0u);  // GEMVs pack nothing

  // Small problems stay on the calling thread whatever the pool; big ones take the pool's threads.
  const GemmPlan small = plan(8, 32, 32, GemmA::kRaw, GemmB::kRaw, 2);
  EXPECT_FALSE(small.parallel_worth);
  EXPECT_EQ(small.threads, 1);
  EXPECT_EQ(small.tasks, 1);
  const GemmPlan big = plan(256, 256, 256, GemmA::kRaw, GemmB::kRaw, 2);
  EXPECT_TRUE(big.parallel_worth);
  EXPECT_EQ(big.threads, 2);
  EXPECT_EQ(big.scratch_slots(), 2);
  EXPECT_GE(big.tasks, 2);
  EXPECT_EQ(big.tasks, big.n_blocks * big.m_chunks);
  // Packed A and B packed per task, few rows: the threads split the columns (no B block packed twice).
  const GemmPlan conv = plan(64, 784, 576, GemmA::kPacked, GemmB::kGenerated, 2);
  EXPECT_TRUE(conv.split_n);
  EXPECT_EQ(conv.m_chunks, 1);
  EXPECT_GE(conv.n_blocks, 2);
  EXPECT_FALSE(plan(64, 784, 576, GemmA::kPacked, GemmB::kGenerated, 1).split_n);
  // A raw A against a PackedB (weights) under 512 rows splits the columns too (no weight block read by
  // both cores); from 512 rows on, row chunks.
  const GemmPlan linear = plan(128, 768, 768, GemmA::kRaw, GemmB::kPacked, 2);
  EXPECT_TRUE(linear.split_n);
  EXPECT_EQ(linear.m_chunks, 1);
  EXPECT_GE(linear.n_blocks, 4);
  EXPECT_FALSE(plan(512, 768, 768, GemmA::kRaw, GemmB::kPacked, 2).split_n);
  EXPECT_FALSE(plan(128, 768, 768, GemmA::kRaw, GemmB::kRaw, 2).split_n);
  // The scratch need is the same at every width (a re-plan fits the caller's slots).
  for (GemmA a : {GemmA::kRaw, GemmA::kPacked})
    for (GemmB b : {GemmB::kRaw, GemmB::kPacked, GemmB::kGenerated})
      for (const Shape& sh : {Shape{64, 784, 576}, Shape{150, 2100, 300}, Shape{7, 33, 5}}) {
        const size_t one = plan(sh.M, sh.N, sh.K, a, b, 1).scratch_floats;
        EXPECT_EQ(plan(sh.M, sh.N, sh.K, a, b, 2).scratch_floats, one);
        EXPECT_EQ(plan(sh.M, sh.N, sh.K, a, b, 8).scratch_floats, one);
        EXPECT_EQ(one % 16, 0u);
      }
}

// ---------------------------------------------------------------------------------------------
// MatMul and Gemm: the specialized variant (plans made once, scratch reserved) against the per-call
// plans of a context without one, bit for bit, including a variant made for 2 threads run on 1.

Tensor randf(Dims shape, std::mt19937& rng, DataType dt = DataType::kFloat) {
  Tensor t(DataType::kFloat, shape);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  if (dt == DataType::kFloat16) {
    Tensor h(DataType::kFloat16, shape);
    for (int64_t i = 0; i < t.numel(); ++i) h.data<Float16>()[i] = Float16(t.data<float>()[i]);
    return h;
  }
  return t;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

void expect_variant_bits(nxrt::testing::KernelRun r, const std::string& what) {
  SCOPED_TRACE(what);
  r.specialize = false;
  auto plain = nxrt::testing::run_kernel(r);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  for (int specialize_threads : {0, 2}) {
    r.specialize = true;
    r.specialize_threads = specialize_threads;
    size_t ws = 0;
    r.variant_workspace_bytes = &ws;
    auto planned = nxrt::testing::run_kernel(r);
    ASSERT_TRUE(planned.ok()) << planned.status().to_string();
    EXPECT_TRUE(same_bits(planned.value()[0].tensor(), plain.value()[0].tensor()))
        << "variant for " << specialize_threads << " threads, run on " << r.threads;
  }
}

TEST(GemmPlan, MatMulAndGemmWithAndWithoutVariantAreBitIdentical) {
  std::mt19937 rng(31);
  using nxrt::testing::attr_float;
  using nxrt::testing::attr_int;
  for (int threads : {1, 2, 3}) {
    // MatMul: a tall GEMM (B shared), a GEMM per batch, small batches in chunks, 1-D operands, a GEMV,
    // float16, and a constant (packed) B.
    const std::vector<std::pair<Dims, Dims>> mm = {
        {{2, 3, 40, 50}, {50, 60}},  {{2, 80, 300}, {2, 300, 90}}, {{6, 12, 20}, {6, 20, 30}},
        {{50}, {50, 70}},            {{1, 700}, {700, 300}},       {{3, 1, 200, 64}, {2, 64, 100}},
        {{130, 300}, {300, 1}}};
    for (const auto& [as, bs] : mm) {
      for (bool const_b : {false, true}) {
        if (const_b && bs.size() != 2) continue;
        nxrt::testing::KernelRun r;
        r.op_type = "MatMul";
        r.opset = 13;
        r.threads = threads;
        r.inputs = {randf(as, rng), randf(bs, rng)};
        if (const_b) r.const_inputs = {1};
        expect_variant_bits(r, "MatMul " + shape_to_string(as) + " x " + shape_to_string(bs) +
                                   (const_b ? " const B" : "") + " threads " + std::to_string(threads));
      }
    }
    {
      nxrt::testing::KernelRun r;
      r.op_type = "MatMul";
      r.opset = 13;
      r.threads = threads;
      r.inputs = {randf({3, 70, 90}, rng, DataType::kFloat16), randf({90, 40}, rng, DataType::kFloat16)};
      expect_variant_bits(r, "MatMul float16");
    }
    // Gemm: transposes, alpha/beta with a C to broadcast, a bias vector fused into a packed B's store.
    for (int64_t M : {1, 37, 300}) {
      for (bool ta : {false, true})
        for (bool tb : {false, true})
          for (bool const_b : {false, true}) {
            const int64_t K = 130, N = 75;
            nxrt::testing::KernelRun r;
            r.op_type = "Gemm";
            r.opset = 13;
            r.threads = threads;
            r.attributes = {attr_int("transA", ta), attr_int("transB", tb), attr_float("alpha", 0.5f),
                            attr_float("beta", const_b ? 1.f : 2.f)};
            r.inputs = {randf(ta ? Dims{K, M} : Dims{M, K}, rng), randf(tb ? Dims{N, K} : Dims{K, N}, rng),
                        randf({N}, rng)};
            if (const_b) r.const_inputs = {1};
            expect_variant_bits(r, "Gemm M " + std::to_string(M) + " ta " + std::to_string(ta) + " tb " +
                                       std::to_string(tb) + (const_b ? " const B" : "") + " threads " +
                                       std::to_string(threads));
          }
    }
  }
}

}  // namespace
}  // namespace nxrt
