// Attention family: the reference Attention against hand computations, the float32 fast path
// against the reference on random problems, 3-D vs 4-D layouts, RotaryEmbedding interleaved vs not.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "nxrt/float_types.h"
#include "kernel_test_util.h"
#include "ops/attention/attention_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_int;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Tensor ft(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }
std::vector<float> rnd(std::mt19937& rng, int64_t n) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<float> vals(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}
Result<std::vector<Value>> run_op(const std::string& op, int64_t opset, std::vector<ir::Attribute> attrs,
                                  std::vector<Value> inputs, size_t outs = 1, const std::string& domain = "") {
  KernelRun run;
  run.op_type = op;
  run.domain = domain;
  run.opset = opset;
  run.attributes = std::move(attrs);
  run.inputs = std::move(inputs);
  run.num_outputs = outs;
  run.threads = 2;
  return run_kernel(run);
}
void near_all(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isinf(b[i])) {
      ASSERT_EQ(a[i], b[i]) << "at " << i;
    } else {
      ASSERT_NEAR(a[i], b[i], tol) << "at " << i;
    }
  }
}

}  // namespace

TEST(OpsAttention, ReferenceMatchesHandComputation) {
  // One head, two queries, two keys, head size 2, scale 1.
  auto Q = ft({1, 1, 2, 2}, {1, 0, 0, 2});
  auto K = ft({1, 1, 2, 2}, {1, 0, 0, 1});
  auto V = ft({1, 1, 2, 2}, {1, 2, 3, 4});
  auto r = run_op("Attention", 23, {attr_float("scale", 1.f)}, {Q, K, V});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  // Row 0 scores [1, 0]; row 1 scores [0, 2].
  const double e1 = std::exp(1.0), e2 = std::exp(2.0);
  const double p0 = e1 / (e1 + 1), p1 = 1 / (1 + e2);
  std::vector<float> want = {float(p0 * 1 + (1 - p0) * 3), float(p0 * 2 + (1 - p0) * 4),
                             float(p1 * 1 + (1 - p1) * 3), float(p1 * 2 + (1 - p1) * 4)};
  near_all(vals(r.value()[0]), want, 1e-6f);

  // Causal: query 0 sees key 0 only. Default scale 1/sqrt(2); qk output mode 0 = raw scaled scores.
  auto c = run_op("Attention", 23, {attr_int("is_causal", 1)}, {Q, K, V}, 4);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const double s = 1 / std::sqrt(2.0);
  const double q1 = 1 / (1 + std::exp(2 * s));
  near_all(vals(c.value()[0]), {1, 2, float(q1 * 1 + (1 - q1) * 3), float(q1 * 2 + (1 - q1) * 4)}, 1e-6f);
  near_all(vals(c.value()[3]), {float(s), 0, 0, float(2 * s)}, 1e-6f);

  // A boolean mask that removes every key of row 0 gives a zero row (not NaN).
  Tensor m(DataType::kBool, {2, 2});
  m.data<bool>()[0] = false; m.data<bool>()[1] = false; m.data<bool>()[2] = true; m.data<bool>()[3] = true;
  auto f = run_op("Attention", 23, {attr_float("scale", 1.f), attr_int("qk_matmul_output_mode", 3)}, {Q, K, V, m}, 4);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  near_all(vals(f.value()[0]), {0, 0, want[2], want[3]}, 1e-6f);
  near_all(vals(f.value()[3]), {0, 0, float(p1), float(1 - p1)}, 1e-6f);
}

TEST(OpsAttention, FastPathMatchesReference) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> u(0, 1 << 20);
  for (int trial = 0; trial < 60; ++trial) {
    ops::AttnProblem<float> p;
    p.B = 1 + u(rng) % 3;
    p.Hkv = 1 + u(rng) % 3;
    p.Hq = p.Hkv * (1 + u(rng) % 3);
    p.Sq = 1 + u(rng) % 9;
    p.T = 1 + u(rng) % 17;
    p.D = 1 + u(rng) % 20;
    p.Dv = 1 + u(rng) % 20;
    p.scale = 0.3f + 0.1f * static_cast<float>(u(rng) % 5);
    p.softcap = (u(rng) % 3 == 0) ? 2.5f : 0.f;
    auto q = rnd(rng, p.B * p.Hq * p.Sq * p.D), k = rnd(rng, p.B * p.Hkv * p.T * p.D), v = rnd(rng, p.B * p.Hkv * p.T * p.Dv);
    p.q = q.data(); p.k = k.data(); p.v = v.data();
    std::vector<float> mask;
    if (u(rng) % 2) {  // mask broadcast over heads, maybe shorter than T
      const int64_t len = std::max<int64_t>(1, p.T - u(rng) % 3);
      mask = rnd(rng, p.B * p.Sq * len);
      for (auto& x : mask) if (x < -1.2f) x = -std::numeric_limits<float>::infinity();
      p.mask = mask.data();
      p.mask_len = len; p.mask_si = len; p.mask_sh = 0; p.mask_sb = p.Sq * len;
    }
    std::vector<int64_t> off(static_cast<size_t>(p.B)), nonpad(static_cast<size_t>(p.B));
    if (u(rng) % 2) {
      p.causal = true;
      for (auto& o : off) o = static_cast<int64_t>(u(rng) % (p.T + 2)) - 2;
      p.causal_offset = off.data();
    }
    if (u(rng) % 3 == 0) {
      for (auto& n : nonpad) n = u(rng) % (p.T + 1);
      p.nonpad = nonpad.data();
    }
    std::vector<float> y1(static_cast<size_t>(p.B * p.Hq * p.Sq * p.Dv)), y2 = y1;
    std::vector<float> qk1(static_cast<size_t>(p.B * p.Hq * p.Sq * p.T)), qk2 = qk1;
    p.qk_mode = u(rng) % 5 - 1;
    if (p.qk_mode >= 0) p.qk_out = qk1.data();
    p.y = y1.data();
    ops::attention_reference(p);
    if (p.qk_mode >= 0) p.qk_out = qk2.data();
    p.y = y2.data();
    ep::ThreadPool pool(2);
    const ops::AttnFastPlan fp = ops::attention_fast_plan(p, pool.num_threads());
    std::vector<float> scratch(fp.bytes() / sizeof(float));
    ops::attention_fast(p, fp, &pool, scratch.data());
    SCOPED_TRACE("trial " + std::to_string(trial));
    near_all(y2, y1, 1e-4f);
    if (p.qk_mode >= 0) near_all(qk2, qk1, 1e-4f);
  }
}

// With the kernel override reference=1 the op runs attention_reference; it agrees with the fast path, and a
// misspelled override is an error rather than a silent fast run.
TEST(OpsAttention, ReferenceOverrideAgreesWithTheFastPath) {
  std::mt19937 rng(11);
  const int64_t B = 2, Hq = 4, Hkv = 2, S = 5, T = 7, D = 8;
  auto Q = ft({B, Hq, S, D}, rnd(rng, B * Hq * S * D));
  auto K = ft({B, Hkv, T, D}, rnd(rng, B * Hkv * T * D));
  auto V = ft({B, Hkv, T, D}, rnd(rng, B * Hkv * T * D));
  KernelRun run;
  run.op_type = "Attention";
  run.opset = 23;
  run.attributes = {attr_int("is_causal", 1), attr_float("softcap", 3.f)};
  run.inputs = {Q, K, V};
  run.threads = 2;
  auto fast = run_kernel(run);
  run.overrides = {{"reference", "1"}};
  auto ref = run_kernel(run);
  ASSERT_TRUE(fast.ok() && ref.ok()) << fast.status().to_string() << ref.status().to_string();
  near_all(vals(fast.value()[0]), vals(ref.value()[0]), 1e-4f);
  run.overrides = {{"refrence", "1"}};
  EXPECT_FALSE(run_kernel(run).ok());
}

TEST(OpsAttention, ThreeDMatchesFourDWithPastAndGqa) {
  std::mt19937 rng(3);
  const int64_t B = 2, Hq = 4, Hkv = 2, Sq = 3, Skv = 2, P = 3, D = 4, Dv = 5;
  auto q4 = rnd(rng, B * Hq * Sq * D), k4 = rnd(rng, B * Hkv * Skv * D), v4 = rnd(rng, B * Hkv * Skv * Dv);
  auto pk = rnd(rng, B * Hkv * P * D), pv = rnd(rng, B * Hkv * P * Dv);
  auto to3 = [](const std::vector<float>& x, int64_t b, int64_t h, int64_t s, int64_t d) {
    std::vector<float> o(x.size());
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < h; ++j)
        for (int64_t t = 0; t < s; ++t)
          for (int64_t e = 0; e < d; ++e) o[((i * s + t) * h + j) * d + e] = x[((i * h + j) * s + t) * d + e];
    return o;
  };
  auto r4 = run_op("Attention", 23, {attr_int("is_causal", 1)},
                   {ft({B, Hq, Sq, D}, q4), ft({B, Hkv, Skv, D}, k4), ft({B, Hkv, Skv, Dv}, v4), Value(),
                    ft({B, Hkv, P, D}, pk), ft({B, Hkv, P, Dv}, pv)}, 3);
  ASSERT_TRUE(r4.ok()) << r4.status().to_string();
  auto r3 = run_op("Attention", 23, {attr_int("is_causal", 1), attr_int("q_num_heads", Hq), attr_int("kv_num_heads", Hkv)},
                   {ft({B, Sq, Hq * D}, to3(q4, B, Hq, Sq, D)), ft({B, Skv, Hkv * D}, to3(k4, B, Hkv, Skv, D)),
                    ft({B, Skv, Hkv * Dv}, to3(v4, B, Hkv, Skv, Dv)), Value(), ft({B, Hkv, P, D}, pk), ft({B, Hkv, P, Dv}, pv)}, 3);
  ASSERT_TRUE(r3.ok()) << r3.status().to_string();
  near_all(vals(r3.value()[0]), to3(vals(r4.value()[0]), B, Hq, Sq, Dv), 1e-5f);
  near_all(vals(r3.value()[1]), vals(r4.value()[1]), 0);
  EXPECT_EQ(r4.value()[1].tensor().shape(), (Dims{B, Hkv, P + Skv, D}));
  // present_key = concat(past, new) along the sequence axis.
  const auto pres = vals(r4.value()[1]);
  EXPECT_EQ(pres[0], pk[0]);
  EXPECT_EQ(pres[P * D], k4[0]);
  // Bad head ratio is an error, not a crash.
  auto bad = run_op("Attention", 23, {attr_int("q_num_heads", 3), attr_int("kv_num_heads", 2)},
                    {ft({1, 1, 6}, std::vector<float>(6)), ft({1, 1, 4}, std::vector<float>(4)), ft({1, 1, 4}, std::vector<float>(4))});
  EXPECT_FALSE(bad.ok());
}

TEST(OpsAttention, RotaryInterleavedVsHalves) {
  std::mt19937 rng(5);
  const int64_t B = 2, H = 2, S = 3, D = 8, half = 4, maxpos = 6;
  auto x = rnd(rng, B * H * S * D);
  std::vector<float> cs(maxpos * half), sn(maxpos * half);
  for (int64_t p = 0; p < maxpos; ++p)
    for (int64_t k = 0; k < half; ++k) {
      cs[p * half + k] = std::cos(0.3f * p * (k + 1));
      sn[p * half + k] = std::sin(0.3f * p * (k + 1));
    }
  auto pos = Tensor::from_vector<int64_t>(DataType::kInt64, {B, S}, {0, 1, 2, 5, 4, 3});
  // Interleaved pairs (2k, 2k+1) == halves layout (k, k+half) after permuting the head dim.
  std::vector<float> xp(x.size());
  for (int64_t r = 0; r < B * H * S; ++r)
    for (int64_t k = 0; k < half; ++k) {
      xp[r * D + k] = x[r * D + 2 * k];
      xp[r * D + half + k] = x[r * D + 2 * k + 1];
    }
  auto a = run_op("RotaryEmbedding", 23, {attr_int("interleaved", 1)}, {ft({B, H, S, D}, x), ft({maxpos, half}, cs), ft({maxpos, half}, sn), pos});
  auto b = run_op("RotaryEmbedding", 23, {}, {ft({B, H, S, D}, xp), ft({maxpos, half}, cs), ft({maxpos, half}, sn), pos});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  auto ya = vals(a.value()[0]), yb = vals(b.value()[0]);
  for (int64_t r = 0; r < B * H * S; ++r)
    for (int64_t k = 0; k < half; ++k) {
      ASSERT_NEAR(ya[r * D + 2 * k], yb[r * D + k], 1e-6f);
      ASSERT_NEAR(ya[r * D + 2 * k + 1], yb[r * D + half + k], 1e-6f);
    }
  // Hand check: batch 1, head 0, seq 0 uses position 5, pair k = 0.
  const int64_t r = (1 * H + 0) * S + 0;
  const float c = cs[5 * half], s = sn[5 * half];
  EXPECT_NEAR(yb[r * D], c * xp[r * D] - s * xp[r * D + half], 1e-6f);
  EXPECT_NEAR(yb[r * D + half], s * xp[r * D] + c * xp[r * D + half], 1e-6f);
  // Out-of-range position id is an error.
  auto bad = run_op("RotaryEmbedding", 23, {}, {ft({B, H, S, D}, xp), ft({maxpos, half}, cs), ft({maxpos, half}, sn),
                                                Tensor::from_vector<int64_t>(DataType::kInt64, {B, S}, {0, 1, 2, 6, 0, 0})});
  EXPECT_FALSE(bad.ok());
}

TEST(OpsAttention, TensorScatterCircular) {
  auto past = ft({2, 3, 1}, {0, 1, 2, 3, 4, 5});
  auto upd = ft({2, 2, 1}, {10, 11, 12, 13});
  auto idx = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {2, 0});
  auto r = run_op("TensorScatter", 24, {attr_string("mode", "circular"), attr_int("axis", 1)}, {past, upd, idx});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  near_all(vals(r.value()[0]), {11, 1, 10, 12, 13, 5}, 0);
  auto lin = run_op("TensorScatter", 24, {attr_int("axis", 1)}, {past, upd, idx});
  EXPECT_FALSE(lin.ok());  // linear write past the end
}

// Timing of the float32 fast path against the reference (run with --gtest_also_run_disabled_tests).
TEST(OpsAttention, DISABLED_FastPathTiming) {
  std::mt19937 rng(11);
  ops::AttnProblem<float> p;
  p.B = 1; p.Hq = 8; p.Hkv = 8; p.Sq = 256; p.T = 256; p.D = 64; p.Dv = 64;
  p.scale = 0.125f;
  p.causal = true;
  auto q = rnd(rng, p.B * p.Hq * p.Sq * p.D), k = rnd(rng, p.B * p.Hkv * p.T * p.D), v = rnd(rng, p.B * p.Hkv * p.T * p.Dv);
  p.q = q.data(); p.k = k.data(); p.v = v.data();
  std::vector<float> y(static_cast<size_t>(p.B * p.Hq * p.Sq * p.Dv));
  p.y = y.data();
  ep::ThreadPool pool(1);
  auto t0 = std::chrono::steady_clock::now();
  ops::attention_reference(p);
  auto t1 = std::chrono::steady_clock::now();
  const ops::AttnFastPlan fp = ops::attention_fast_plan(p, pool.num_threads());
  std::vector<float> scratch(fp.bytes() / sizeof(float));
  for (int i = 0; i < 5; ++i) ops::attention_fast(p, fp, &pool, scratch.data());
  auto t2 = std::chrono::steady_clock::now();
  std::printf("reference %.2f ms, fast %.2f ms (1 thread)\n", std::chrono::duration<double, std::milli>(t1 - t0).count(),
              std::chrono::duration<double, std::milli>(t2 - t1).count() / 5);
}

TEST(OpsAttention, ReducedAndDoublePrecisionMatchFloat) {
  std::mt19937 rng(9);
  const int64_t B = 1, H = 2, S = 3, T = 4, D = 8;
  auto q = rnd(rng, B * H * S * D), k = rnd(rng, B * H * T * D), v = rnd(rng, B * H * T * D);
  auto base = run_op("Attention", 23, {attr_int("is_causal", 1), attr_float("softcap", 3.f)},
                     {ft({B, H, S, D}, q), ft({B, H, T, D}, k), ft({B, H, T, D}, v)});
  ASSERT_TRUE(base.ok()) << base.status().to_string();
  const auto want = vals(base.value()[0]);
  auto conv = [](DataType dt, Dims shape, const std::vector<float>& x) {
    Tensor t(dt, shape);
    for (size_t i = 0; i < x.size(); ++i) {
      if (dt == DataType::kFloat16) t.data<Float16>()[i] = Float16(x[i]);
      else if (dt == DataType::kBFloat16) t.data<BFloat16>()[i] = BFloat16(x[i]);
      else t.data<double>()[i] = x[i];
    }
    return t;
  };
  for (DataType dt : {DataType::kFloat16, DataType::kBFloat16, DataType::kDouble}) {
    auto r = run_op("Attention", 23, {attr_int("is_causal", 1), attr_float("softcap", 3.f)},
                    {conv(dt, {B, H, S, D}, q), conv(dt, {B, H, T, D}, k), conv(dt, {B, H, T, D}, v)});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& y = r.value()[0].tensor();
    ASSERT_EQ(y.dtype(), dt);
    const float tol = dt == DataType::kBFloat16 ? 5e-2f : dt == DataType::kFloat16 ? 5e-3f : 1e-5f;
    for (int64_t i = 0; i < y.numel(); ++i) {
      const float got = dt == DataType::kFloat16 ? float(y.data<Float16>()[i])
                        : dt == DataType::kBFloat16 ? float(y.data<BFloat16>()[i]) : float(y.data<double>()[i]);
      ASSERT_NEAR(got, want[i], tol) << dtype_name(dt) << " at " << i;
    }
  }
}

// nxrt::FusedAttention takes Q, Kt and V as strided views (the Transposes that split heads out of a
// [B, S, H, D] projection): the fast path reads them in place (Kt, a view of K transposed, as B
// transposed) with the same bits as contiguous copies, with and without a mask and scale, 1 and 2
// threads; a view whose last axis is not unit-stride (Q read along columns) is copied first, same bits.
TEST(FusedAttentionOp, StridedHeadViewsGiveTheContiguousBits) {
  std::mt19937 rng(71);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t Bn = 2, S = 19, H = 3, D = 8;
  auto buffer = [&](int64_t n) {
    Tensor t(DataType::kFloat, Dims{n});
    for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = d(rng);
    return t;
  };
  const int64_t n = Bn * S * H * D;
  const Tensor qb = buffer(n), kb = buffer(n), vb = buffer(n);
  // [B, S, H, D] seen as [B, H, S, D] (Q, V) and as [B, H, D, S] (Kt).
  const Dims head_major{S * H * D, D, H * D, 1}, kt_strides{S * H * D, D, 1, H * D};
  const Tensor q(DataType::kFloat, Dims{Bn, H, S, D}, qb.storage(), qb.byte_offset(), head_major);
  const Tensor kt(DataType::kFloat, Dims{Bn, H, D, S}, kb.storage(), kb.byte_offset(), kt_strides);
  const Tensor v(DataType::kFloat, Dims{Bn, H, S, D}, vb.storage(), vb.byte_offset(), head_major);
  // Q [B, H, S, D] whose last axis has stride S (a view of a [B, H, D, S] buffer): not read in place.
  const Tensor q_cols(DataType::kFloat, Dims{Bn, H, S, D}, qb.storage(), qb.byte_offset(),
                      Dims{S * H * D, S * D, 1, S});
  ASSERT_FALSE(q.is_contiguous());
  ASSERT_FALSE(kt.is_contiguous());
  Tensor mask(DataType::kFloat, Dims{Bn, 1, 1, S});
  for (int64_t i = 0; i < Bn * S; ++i) mask.data<float>()[i] = i % 5 == 0 ? -1e4f : 0.f;
  for (int variant = 0; variant < 4; ++variant) {
    const bool with_mask = variant & 1, cols = variant & 2;
    for (int threads : {1, 2, 3}) {
      auto run_on = [&](const Tensor& qq, const Tensor& kk, const Tensor& vv) {
        KernelRun run;
        run.op_type = "FusedAttention";
        run.domain = "nxrt";
        run.opset = 1;
        run.threads = threads;
        run.specialize = true;
        run.attributes = {attr_string("scale_op", "Div")};
        run.inputs = {Value(qq), Value(kk), Value(vv), with_mask ? Value(mask) : Value(),
                      Value(Tensor::scalar_float(2.8284271f))};
        auto out = run_kernel(run);
        EXPECT_TRUE(out.ok()) << out.status().message();
        if (!out.ok()) return std::vector<float>{};
        const Tensor& y = out.value()[0].tensor();
        return std::vector<float>(y.data<float>(), y.data<float>() + y.numel());
      };
      const Tensor& qv = cols ? q_cols : q;
      const std::vector<float> viewed = run_on(qv, kt, v);
      const std::vector<float> copied = run_on(qv.contiguous(), kt.contiguous(), v.contiguous());
      ASSERT_EQ(viewed.size(), static_cast<size_t>(Bn * H * S * D));
      EXPECT_TRUE(viewed == copied) << "mask " << with_mask << " q by columns " << cols << " threads " << threads;
    }
  }
}

// transpose_output (the merging Transpose folded in) needs rank-4 operands: on rank 3 the kernel says
// so instead of running the fast path with a shape it did not plan.
TEST(FusedAttentionOp, TransposeOutputOnRankThreeIsAnError) {
  KernelRun run;
  run.op_type = "FusedAttention";
  run.domain = "nxrt";
  run.opset = 1;
  run.specialize = true;
  run.attributes = {attr_int("transpose_output", 1)};
  run.inputs = {Value(nxrt::testing::random_tensor({2, 5, 8}, 81)), Value(nxrt::testing::random_tensor({2, 8, 7}, 82)),
                Value(nxrt::testing::random_tensor({2, 7, 4}, 83))};
  auto out = run_kernel(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("transpose_output needs rank-4"), std::string::npos)
      << out.status().message();
}
