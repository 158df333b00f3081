// Vectorized small-CNN kernels against their plain references on random shapes: row-wise pooling
// (pool_fast), depthwise conv (conv_depthwise), per-channel BatchNormalization + Relu.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <random>

#include "kernel_test_util.h"
#include "variant_test_util.h"
#include "ops/conv/depthwise.h"
#include "ops/conv/conv_engine.h"
#include "ops/pool/row_pool.h"

using namespace nxrt;
using namespace nxrt::ops;

namespace {

std::vector<float> rand_vec(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// The per-window definition (ONNX MaxPool / AveragePool) over geometry g, one plane.
void pool_naive(const Geom3& g, const float* x, float* y, bool is_max, bool cip) {
  for (int64_t oh = 0; oh < g.out[1]; ++oh)
    for (int64_t ow = 0; ow < g.out[2]; ++ow) {
      double acc = is_max ? -std::numeric_limits<double>::infinity() : 0.0;
      int64_t valid = 0, padded = 0;
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
          const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
          const bool in_pad = ih >= -g.pb[1] && ih < g.in[1] + g.pe[1] && iw >= -g.pb[2] && iw < g.in[2] + g.pe[2];
          padded += in_pad ? 1 : 0;
          if (ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
          ++valid;
          const double v = x[ih * g.in[2] + iw];
          acc = is_max ? std::max(acc, v) : acc + v;
        }
      float r;
      if (is_max) {
        r = static_cast<float>(acc);
      } else {
        const int64_t den = cip ? padded : valid;
        r = den > 0 ? static_cast<float>(acc / static_cast<double>(den)) : 0.f;
      }
      y[oh * g.out[2] + ow] = r;
    }
}

}  // namespace

TEST(SmallCnnPool, RowWiseMatchesPerWindowOnRandomShapes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 300; ++iter) {
    const bool one_d = iter % 7 == 3;
    WindowAttrs a;
    Dims in, kernel;
    const int nsp = one_d ? 1 : 2;
    for (int i = 0; i < nsp; ++i) {
      in.push_back(1 + pick(rng) % 23);
      kernel.push_back(1 + pick(rng) % 5);
      a.strides.push_back(1 + pick(rng) % 3);
      a.dilations.push_back(iter % 5 == 0 ? 2 : 1);
    }
    for (int i = 0; i < 2 * nsp; ++i) a.pads.push_back(pick(rng) % 3);
    for (int i = 0; i < nsp; ++i) {  // pads must stay below the kernel extent
      a.pads[i] = std::min<int64_t>(a.pads[i], kernel[i] - 1);
      a.pads[i + nsp] = std::min<int64_t>(a.pads[i + nsp], kernel[i] - 1);
    }
    a.ceil_mode = iter % 3 == 1;
    if (iter % 11 == 5) a.auto_pad = AutoPad::kSameUpper;
    a.kernel_shape = kernel;
    Geom3 g;
    if (!forward_geometry(a, in, kernel, &g).ok() || g.out_size() == 0) continue;
    ASSERT_TRUE(rowpool::applies(g));
    ++ran;
    const int64_t planes = 1 + pick(rng) % 3;
    auto x = rand_vec(rng, planes * g.in_size());
    if (iter % 4 == 0) x[static_cast<size_t>(pick(rng)) % x.size()] = std::numeric_limits<float>::quiet_NaN();
    // Geom3 keeps 1-D windows on its last axis; the naive loop reads axes 1 and 2 either way.
    for (int kind = 0; kind < 3; ++kind) {
      const bool is_max = kind == 0, cip = kind == 2;
      std::vector<float> fast(static_cast<size_t>(planes * g.out_size()), 123.f), ref(fast.size());
      if (is_max) {
        rowpool::max_pool_2d(g, x.data(), fast.data(), 0, planes);
      } else {
        rowpool::avg_pool_2d(g, x.data(), fast.data(), cip, 0, planes);
      }
      for (int64_t p = 0; p < planes; ++p) {
        // The reference skips NaN for max (v > best); emulate by replacing NaN with -inf.
        std::vector<float> xp(x.begin() + p * g.in_size(), x.begin() + (p + 1) * g.in_size());
        if (is_max)
          for (auto& v : xp)
            if (std::isnan(v)) v = -std::numeric_limits<float>::infinity();
        pool_naive(g, xp.data(), ref.data() + p * g.out_size(), is_max, cip);
      }
      for (size_t i = 0; i < fast.size(); ++i) {
        if (std::isnan(ref[i]) || std::isinf(ref[i])) {
          ASSERT_EQ(std::isnan(fast[i]), std::isnan(ref[i])) << "iter " << iter << " kind " << kind << " at " << i;
          if (std::isinf(ref[i])) {
            ASSERT_EQ(fast[i], ref[i]) << "iter " << iter << " kind " << kind << " at " << i;
          }
        } else {
          ASSERT_NEAR(fast[i], ref[i], 1e-5f * (1.f + std::fabs(ref[i]))) << "iter " << iter << " kind " << kind
                                                                          << " at " << i;
        }
      }
    }
  }
  EXPECT_GT(ran, 150);
}

TEST(SmallCnnPool, GlobalAverageMatchesSum) {
  std::mt19937 rng(3);
  for (int64_t plane : {1, 7, 16, 49, 50, 197, 1000}) {
    auto x = rand_vec(rng, 3 * plane);
    std::vector<float> y(3);
    rowpool::global_avg(x.data(), y.data(), plane, 0, 3);
    for (int q = 0; q < 3; ++q) {
      double s = 0;
      for (int64_t i = 0; i < plane; ++i) s += x[q * plane + i];
      EXPECT_NEAR(y[q], s / plane, 1e-5) << plane;
    }
  }
}

TEST(SmallCnnDepthwise, VectorizedMatchesNaiveOnRandomShapes) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 200; ++iter) {
    ConvShape s;
    s.N = 1 + pick(rng) % 2;
    s.group = s.C = 1 + pick(rng) % 5;
    s.M = s.C * (iter % 6 == 0 ? 2 : 1);
    const int64_t k = iter % 3 == 0 ? 3 : iter % 3 == 1 ? 5 : 7;
    const int64_t kh = iter % 5 == 2 ? 1 + pick(rng) % 7 : k;  // non-square kernels too
    WindowAttrs a;
    const bool wide = iter == 17;
    Dims in{wide ? 4100 : 1 + pick(rng) % 30, wide ? 4100 : 1 + pick(rng) % 30};
    if (wide) in[0] = 4;
    Dims kernel{kh, k};
    const int64_t st = 1 + pick(rng) % 2;
    a.strides = {iter % 4 == 1 ? 1 + pick(rng) % 3 : st, st};  // vertical stride 3 / asymmetric strides too
    for (int i = 0; i < 4; ++i) a.pads.push_back(pick(rng) % (k / 2 + 2));
    if (iter % 9 == 4) a.auto_pad = AutoPad::kSameUpper;
    if (!forward_geometry(a, in, kernel, &s.g).ok() || s.g.out_size() == 0) continue;
    ASSERT_TRUE(dwconv::applies(s.g));
    ++ran;
    const int64_t Cg = 1;
    Dims wshape{s.M, Cg, kh, k};
    auto x = rand_vec(rng, s.N * s.C * s.g.in_size());
    auto w = rand_vec(rng, shape_numel(wshape));
    auto b = rand_vec(rng, s.M);
    const int64_t ny = s.N * s.M * s.g.out_size();
    std::vector<float> ref(static_cast<size_t>(ny)), y(static_cast<size_t>(ny), 123.f);
    conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
    const int64_t Mg = s.M / s.group;
    for (int64_t n = 0; n < s.N; ++n)
      for (int64_t m = 0; m < s.M; ++m)
        dwconv::plane_f32(s.g, x.data() + (n * s.C + m / Mg) * s.g.in_size(), w.data() + m * kh * k, b[m],
                          y.data() + (n * s.M + m) * s.g.out_size());
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i]))) << "iter " << iter << " at " << i;
    // The engine's depthwise path takes the same kernel.
    ConvWeights<float> cw;
    cw.prepare(wshape, s.group, w);
    ep::ThreadPool pool(2);
    for (ConvPath path : {ConvPath::kDepthwiseWindow, ConvPath::kDepthwiseScalar}) {
      if (conv_path_applies(s, path)) {  // group > 1 (one channel and one group is a plain conv)
        ASSERT_EQ(conv_chosen_path(s, cw, ConvConfig(path), nullptr, 2), path);
      }
      std::vector<float> y2(static_cast<size_t>(ny), 7.f);
      conv_forward<float>(s, x.data(), cw, b.data(), y2.data(), &pool, path);
      for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y2[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i])));
    }
  }
  EXPECT_GT(ran, 120);
}

namespace {

Result<std::vector<float>> run_f(const std::string& domain, const std::string& op, int64_t opset,
                                 std::vector<Value> inputs, std::vector<ir::Attribute> attrs, int threads) {
  nxrt::testing::KernelRun run;
  run.op_type = op;
  run.domain = domain;
  run.opset = opset;
  run.inputs = std::move(inputs);
  run.attributes = std::move(attrs);
  run.threads = threads;
  NXRT_ASSIGN_OR_RETURN(std::vector<Value> out, nxrt::testing::run_kernel(run));
  const Tensor& t = out[0].tensor();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace

TEST(SmallCnnBatchNormRelu, EqualsBatchNormThenRelu) {
  std::mt19937 rng(9);
  const Dims shapes[] = {{1, 3, 5, 7}, {2, 16, 9, 9}, {1, 64, 1, 1}, {3, 5}, {1, 7, 33}};
  for (const Dims& sh : shapes) {
    const int64_t C = sh[1];
    auto x = rand_vec(rng, shape_numel(sh));
    auto sc = rand_vec(rng, C), b = rand_vec(rng, C), mean = rand_vec(rng, C), var = rand_vec(rng, C);
    for (auto& v : var) v = std::fabs(v) + 0.1f;
    auto T = [&](const Dims& d, const std::vector<float>& v) { return Value(Tensor::from_vector<float>(DataType::kFloat, d, v)); };
    std::vector<Value> in = {T(sh, x), T({C}, sc), T({C}, b), T({C}, mean), T({C}, var)};
    const std::vector<ir::Attribute> attrs = {nxrt::testing::attr_float("epsilon", 1e-3f)};
    auto bn = run_f("", "BatchNormalization", 15, in, attrs, 1);
    ASSERT_TRUE(bn.ok()) << bn.status().to_string();
    auto relu = run_f("", "Relu", 14, {T(sh, bn.value())}, {}, 1);
    ASSERT_TRUE(relu.ok());
    for (int threads : {1, 3}) {
      auto fused = run_f("nxrt", "BatchNormRelu", 1, in, attrs, threads);
      ASSERT_TRUE(fused.ok()) << fused.status().to_string();
      ASSERT_EQ(fused.value().size(), relu.value().size());
      for (size_t i = 0; i < relu.value().size(); ++i)
        ASSERT_NEAR(fused.value()[i], relu.value()[i], 1e-5f * (1.f + std::fabs(relu.value()[i]))) << i;
    }
  }
  // Wrong parameter length is an error, not a read out of bounds.
  auto T = [&](const Dims& d, float v) { return Value(Tensor::from_vector<float>(DataType::kFloat, d, std::vector<float>(shape_numel(d), v))); };
  auto bad = run_f("nxrt", "BatchNormRelu", 1, {T({1, 4, 2, 2}, 1.f), T({3}, 1.f), T({3}, 0.f), T({3}, 0.f), T({3}, 1.f)}, {}, 1);
  EXPECT_FALSE(bad.ok());
}

TEST(SmallCnnPointwise, SinglePositionGemvMatchesNaive) {
  std::mt19937 rng(13);
  for (int iter = 0; iter < 40; ++iter) {
    ConvShape s;
    s.N = 1 + iter % 2;
    s.group = iter % 3 == 0 ? 2 : 1;
    const int64_t Cg = 1 + (iter * 7) % 70, Mg = 1 + (iter * 5) % 40;
    s.C = Cg * s.group;
    s.M = Mg * s.group;
    WindowAttrs a;
    const Dims in = iter % 2 ? Dims{1, 1} : Dims{1};
    const Dims kernel = iter % 2 ? Dims{1, 1} : Dims{1};
    ASSERT_TRUE(forward_geometry(a, in, kernel, &s.g).ok());
    Dims wshape{s.M, Cg};
    for (auto k : kernel) wshape.push_back(k);
    auto x = rand_vec(rng, s.N * s.C), w = rand_vec(rng, shape_numel(wshape)), b = rand_vec(rng, s.M);
    std::vector<float> ref(static_cast<size_t>(s.N * s.M)), y(ref.size(), 5.f);
    conv_naive<float>(s, x.data(), w.data(), iter % 4 == 1 ? nullptr : b.data(), ref.data());
    ConvWeights<float> cw;
    cw.prepare(wshape, s.group, w);
    ASSERT_FALSE(cw.raw.empty());
    conv_forward<float>(s, x.data(), cw, iter % 4 == 1 ? nullptr : b.data(), y.data(), nullptr, ConvPath::kAuto);
    for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i]))) << iter;
  }
}

// The pool's caller no longer waits for workers that did not join a job: many short jobs back to back
// (workers joining late, or for the next job) must still cover every index exactly once.
TEST(SmallCnnThreadPool, ShortJobsBackToBackCoverEveryIndexOnce) {
  for (int threads : {2, 3, 4}) {
    ep::ThreadPool pool(threads, ep::ThreadPool::Sizing::kExact);
    std::vector<std::atomic<int>> hits(257);
    for (int job = 0; job < 3000; ++job) {
      const int64_t n = 1 + job % 257;
      for (int64_t i = 0; i < n; ++i) hits[static_cast<size_t>(i)].store(0, std::memory_order_relaxed);
      pool.parallel_for(n, 1 + job % 3, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)].fetch_add(1, std::memory_order_relaxed);
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "job " << job << " i " << i;
    }
  }
}

// MaxPool / AveragePool keep the row-wise plan in their variant and run each chunk on its thread's slot
// (KernelContext::thread_slots): every path (global average, window engine, tap passes, row passes) gives
// the same with and without a variant at 1 and 2 threads, and matches the per-window loops.
TEST(SmallCnnPool, VariantPlanAndSlotsMatchPerCallPlanAndReference) {
  struct Shape {
    const char* what;
    int64_t h, w;
    std::vector<int64_t> kernel, strides, dilations, pads;
    bool narrow_max = false;  // a 3x3 stride-2 max pool that AVX-512 runs without scratch (sep_max.h)
    // An average over one window covering the plane: the plane's mean, no scratch (1: counting pads or
    // not; 2: only when padded cells are not counted, the window reaching past the plane).
    int global_avg = 0;
  };
  const Shape shapes[] = {
      {"engine 3x3", 20, 20, {3, 3}, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {"engine stride 2", 21, 19, {3, 3}, {2, 2}, {1, 1}, {0, 1, 1, 0}, true},
      {"taps 9x9", 24, 24, {9, 9}, {1, 1}, {1, 1}, {2, 2, 2, 2}},
      {"rows 9x9 stride 3", 30, 30, {9, 9}, {3, 3}, {1, 1}, {1, 1, 1, 1}},
      {"global", 12, 13, {12, 13}, {1, 1}, {1, 1}, {0, 0, 0, 0}, false, 1},
      {"global, window past the plane", 6, 6, {7, 7}, {1, 1}, {1, 1}, {0, 0, 1, 1}, false, 2},
  };
  for (const Shape& sh : shapes) {
    for (const char* op : {"MaxPool", "AveragePool"}) {
      for (int cip = 0; cip < (std::string(op) == "AveragePool" ? 2 : 1); ++cip) {
        SCOPED_TRACE(std::string(sh.what) + " " + op + " cip " + std::to_string(cip));
        nxrt::testing::KernelRun r;
        r.op_type = op;
        r.opset = 19;
        r.attributes = {nxrt::testing::attr_ints("kernel_shape", sh.kernel), nxrt::testing::attr_ints("strides", sh.strides),
                        nxrt::testing::attr_ints("dilations", sh.dilations), nxrt::testing::attr_ints("pads", sh.pads)};
        if (cip) r.attributes.push_back(nxrt::testing::attr_int("count_include_pad", 1));
        r.inputs = {nxrt::testing::random_tensor({2, 9, sh.h, sh.w}, 21)};
        // The global average (a window over the whole plane) needs no scratch, nor the narrow max rows.
        const bool avg = std::string(op) == "AveragePool";
        const bool global = avg && (sh.global_avg == 1 || (sh.global_avg == 2 && !cip));
        const bool narrow = sh.narrow_max && !avg && ep::cpu_isa_tier() >= ep::IsaTier::kAvx512;
        nxrt::testing::expect_variant_paths_equal(r, !global && !narrow);
        r.specialize = true;
        r.threads = 2;
        auto fast = nxrt::testing::run_kernel(r);
        ASSERT_TRUE(fast.ok()) << fast.status().to_string();
        r.specialize = false;
        r.overrides = {{"reference", "1"}};
        auto ref = nxrt::testing::run_kernel(r);
        ASSERT_TRUE(ref.ok()) << ref.status().to_string();
        const Tensor& a = (*fast)[0].tensor();
        const Tensor& b = (*ref)[0].tensor();
        ASSERT_EQ(a.shape(), b.shape());
        for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-5f) << i;
      }
    }
  }
}
