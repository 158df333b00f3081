// Small-spatial conv path (ops/conv/small_spatial.h) against the direct definition (conv_naive, double
// accumulation), and through conv_forward's kAuto dispatch.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "ep/thread_pool.h"
#include "ops/conv/conv_engine.h"
#include "ops/conv/small_spatial.h"
#include "ops/gemm/gemm.h"
#include "kernel_test_util.h"

using namespace nxrt;
using namespace nxrt::ops;

namespace {

using nxrt::testing::random_floats;

// Fills g.out from in/k/s/d/pads; false when the output is empty.
bool finish(ConvShape* s) {
  Geom3& g = s->g;
  for (int i = 0; i < 3; ++i) {
    const int64_t span = (g.k[i] - 1) * g.d[i] + 1;
    const int64_t avail = g.in[i] + g.pb[i] + g.pe[i];
    if (avail < span) return false;
    g.out[i] = (avail - span) / g.s[i] + 1;
  }
  return true;
}

// Whether this CPU runs the small-spatial paths (AVX-512F): the tests skip without them.
bool paths_available() {
  ConvShape probe;
  probe.N = 1, probe.C = 4, probe.M = 16, probe.g.nsp = 2, probe.g.in[1] = probe.g.in[2] = 7;
  finish(&probe);
  return small_spatial_applies(probe);
}

// Max |y - ref| / (1 + |ref|) of the path (forced) on s.
double path_error(const ConvShape& s, bool with_bias, std::mt19937& rng, ep::ThreadPool* pool, bool through_auto,
                  int post_mode = 0, bool direct = false) {
  const int64_t Cg = s.C / s.group;
  const int64_t kvol = s.g.kvol();
  auto x = random_floats(rng, s.N * s.C * s.g.in_size());
  auto w = random_floats(rng, s.M * Cg * kvol);
  auto b = random_floats(rng, s.M);
  const int64_t ny = s.N * s.M * s.g.out_size();
  std::vector<float> ref(static_cast<size_t>(ny)), y(static_cast<size_t>(ny), 123.f);
  conv_naive<float>(s, x.data(), w.data(), with_bias ? b.data() : nullptr, ref.data());
  // post_mode 1: residual + Relu, 2: Clip(-0.5, 0.5), 3: residual + LeakyRelu(0.1) (nxrt::FusedConv's
  // epilogue).
  auto res = random_floats(rng, ny);
  ConvPost post;
  if (post_mode == 1) {
    post.residual = res.data();
    post.act = Activation::kRelu;
    for (int64_t i = 0; i < ny; ++i) ref[i] = std::max(0.f, ref[i] + res[i]);
  } else if (post_mode == 2) {
    post.act = Activation::kClip;
    post.act_a = -0.5f, post.act_b = 0.5f;
    for (int64_t i = 0; i < ny; ++i) ref[i] = std::min(0.5f, std::max(-0.5f, ref[i]));
  } else if (post_mode == 3) {
    post.residual = res.data();
    post.act = Activation::kLeakyRelu;
    post.act_a = 0.1f;
    for (int64_t i = 0; i < ny; ++i) {
      const float v = ref[i] + res[i];
      ref[i] = v >= 0.f ? v : 0.1f * v;
    }
  }
  Dims ws{s.M, Cg};
  for (int i = 3 - s.g.nsp; i < 3; ++i) ws.push_back(s.g.k[i]);
  if (direct) {
    ConvWeights<float> cw;
    cw.prepare(ws, s.group, w, false);
    EXPECT_TRUE(small_spatial_direct_conv(s, x.data(), cw.packed, with_bias ? b.data() : nullptr, y.data(), pool,
                                          post_mode ? &post : nullptr));
  } else if (through_auto) {
    ConvWeights<float> cw;
    cw.prepare(ws, s.group, w, false);
    EXPECT_TRUE(cw.small != nullptr);
    const bool applied = conv_forward<float>(s, x.data(), cw, with_bias ? b.data() : nullptr, y.data(), pool,
                                             ConvConfig(), post_mode ? &post : nullptr);
    if (post_mode) {
      EXPECT_TRUE(applied);
    }
  } else {
    SmallSpatialWeights sw;
    small_spatial_prepare(s.M, s.group, Cg * kvol, w.data(), &sw);
    small_spatial_conv(s, x.data(), sw, with_bias ? b.data() : nullptr, y.data(), pool, post_mode ? &post : nullptr);
  }
  double err = 0;
  for (int64_t i = 0; i < ny; ++i) {
    if (!std::isfinite(y[i])) return 1e9;
    err = std::max(err, std::fabs(double(y[i]) - ref[i]) / (1.0 + std::fabs(ref[i])));
  }
  return err;
}

std::string describe(const ConvShape& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "N%lld C%lld M%lld g%lld nsp%d in %lldx%lldx%lld k %lldx%lldx%lld s %lld,%lld d %lld,%lld "
                "pads %lld,%lld,%lld,%lld out %lld px",
                (long long)s.N, (long long)s.C, (long long)s.M, (long long)s.group, s.g.nsp, (long long)s.g.in[0],
                (long long)s.g.in[1], (long long)s.g.in[2], (long long)s.g.k[0], (long long)s.g.k[1],
                (long long)s.g.k[2], (long long)s.g.s[1], (long long)s.g.s[2], (long long)s.g.d[1],
                (long long)s.g.d[2], (long long)s.g.pb[1], (long long)s.g.pb[2], (long long)s.g.pe[1],
                (long long)s.g.pe[2], (long long)s.g.out_size());
  return buf;
}

}  // namespace

TEST(ConvSmallSpatial, MatchesNaiveOnRandomShapes) {
  if (!paths_available()) GTEST_SKIP() << "no AVX-512F on this CPU";
  std::mt19937 rng(17);
  ep::ThreadPool pool(2);
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  double worst = 0;
  int ran = 0;
  for (int iter = 0; iter < 120; ++iter) {
    ConvShape s;
    s.N = 1 + iter % 2;
    s.group = iter % 5 == 0 ? 1 + pick(rng) % 4 : 1;
    s.C = s.group * (1 + pick(rng) % 23);
    s.M = s.group * (1 + pick(rng) % 70);
    s.g.nsp = iter % 7 == 0 ? 1 : iter % 11 == 0 ? 3 : 2;
    for (int i = 3 - s.g.nsp; i < 3; ++i) {
      s.g.in[i] = 1 + pick(rng) % (s.g.nsp == 3 ? 6 : s.g.nsp == 1 ? 150 : 16);
      s.g.k[i] = 1 + pick(rng) % 3;
      s.g.s[i] = 1 + pick(rng) % 2;
      s.g.d[i] = 1 + (pick(rng) % 4 == 0);
      s.g.pb[i] = pick(rng) % 3;
      s.g.pe[i] = pick(rng) % 3;
    }
    if (iter % 4 == 0) {  // 1x1 stride 1, no pads (the pointwise case)
      for (int i = 0; i < 3; ++i) s.g.k[i] = 1, s.g.s[i] = 1, s.g.d[i] = 1, s.g.pb[i] = s.g.pe[i] = 0;
    }
    if (!finish(&s) || s.g.out_size() > 200) continue;
    if (s.C == s.group && s.M == s.group) continue;  // depthwise: not this path
    ASSERT_TRUE(small_spatial_applies(s)) << describe(s);
    const bool bias = iter % 3 != 0;
    // modes 0, 1: transposed path with / without the pool; 2, 3: direct path with residual + Relu; 4, 5:
    // residual + LeakyRelu on the transposed / direct path.
    for (int mode = 0; mode < 6; ++mode) {
      const int post_mode = mode < 4 ? mode / 2 : 3;
      const bool direct = mode < 4 ? mode >= 2 : mode == 5;
      const double e = path_error(s, bias, rng, mode % 2 == 0 ? &pool : nullptr, false, post_mode, direct);
      ++ran;
      worst = std::max(worst, e);
      EXPECT_LT(e, 1e-4) << describe(s) << " mode " << mode;
    }
  }
  EXPECT_GT(ran, 360);
  std::printf("[ConvSmallSpatial] %d runs, max |err| / (1 + |ref|) = %.3g\n", ran, worst);
}

TEST(ConvSmallSpatial, ModelShapesThroughConvForward) {
  if (!paths_available()) GTEST_SKIP() << "no AVX-512F on this CPU";
  std::mt19937 rng(3);
  ep::ThreadPool pool(2);
  struct C {
    int64_t N, C, M, G, H, k, s, p;
    bool taken;  // by one of this file's paths at 2 threads (else conv_forward's usual ones)
  };
  const C cases[] = {
      {1, 96, 200, 1, 7, 1, 1, 0, true},    // 1x1 at 7x7, > 1 tile of channels with a tail
      {2, 64, 100, 1, 7, 3, 1, 1, true},    // 3x3 at 7x7, batch 2 (panels straddle the images)
      {1, 136, 136, 4, 7, 1, 1, 0, true},   // grouped 1x1 (ShuffleNet)
      {1, 40, 48, 1, 14, 3, 1, 1, false},   // 14x14
      {1, 300, 40, 1, 13, 1, 1, 0, true},   // 13x13, K > 256 (two PackedB K blocks)
      {1, 64, 64, 1, 14, 1, 2, 0, true},    // 1x1 stride 2 -> 7x7
      {1, 32, 64, 1, 15, 3, 2, 1, false},   // 3x3 stride 2 -> 8x8
      {1, 64, 96, 2, 7, 3, 1, 1, true},     // grouped 3x3 (transposed, W^T repacked per group, K = 288: 2 blocks)
      {2, 40, 90, 2, 7, 3, 1, 1, true},     // 45 output channels a group: partial panels on both layouts
  };
  for (const C& c : cases) {
    ConvShape s;
    s.N = c.N, s.C = c.C, s.M = c.M, s.group = c.G, s.g.nsp = 2;
    s.g.in[1] = s.g.in[2] = c.H;
    s.g.k[1] = s.g.k[2] = c.k;
    s.g.s[1] = s.g.s[2] = c.s;
    for (int i = 1; i < 3; ++i) s.g.pb[i] = s.g.pe[i] = c.p;
    ASSERT_TRUE(finish(&s));
    EXPECT_EQ(small_spatial_choice(s, 2) != SmallSpatialChoice::kNone, c.taken) << describe(s);
    for (int mode = 0; mode < 8; ++mode) {
      const double e = path_error(s, true, rng, mode % 2 == 0 ? &pool : nullptr, true, mode / 2);
      EXPECT_LT(e, 1e-4) << describe(s) << " mode " << mode;
    }
  }
}

// Timing helper (not a test): NXRT_SSP_BENCH=1 ./build/nxrt_unit_tests --gtest_filter='*SmallSpatialBench*'
// --gtest_also_run_disabled_tests. Prints ms per call of the usual path and of this path.
TEST(ConvSmallSpatial, DISABLED_SmallSpatialBench) {
  struct C {
    const char* name;
    int64_t C, M, G, H, k, s, p;
  };
  const C cases[] = {
      {"r50 1x1 512->2048 7x7", 512, 2048, 1, 7, 1, 1, 0},
      {"r50 1x1 2048->512 7x7", 2048, 512, 1, 7, 1, 1, 0},
      {"r50 3x3 512->512 7x7", 512, 512, 1, 7, 3, 1, 1},
      {"r50 1x1 1024->256 14x14", 1024, 256, 1, 14, 1, 1, 0},
      {"r50 1x1 256->1024 14x14", 256, 1024, 1, 14, 1, 1, 0},
      {"r50 3x3 256->256 14x14", 256, 256, 1, 14, 3, 1, 1},
      {"r50 1x1 1024->2048 s2 14->7", 1024, 2048, 1, 14, 1, 2, 0},
      {"inc 3x3 192->320 7x7", 192, 320, 1, 7, 3, 1, 1},
      {"inc 3x3 224->224 7x7", 224, 224, 1, 7, 3, 1, 1},
      {"inc 1x1 1024->352 7x7", 1024, 352, 1, 7, 1, 1, 0},
      {"inc 1x1 576->224 14x14", 576, 224, 1, 14, 1, 1, 0},
      {"shuf 1x1 544->544 g4 7x7", 544, 544, 4, 7, 1, 1, 0},
      {"shuf 1x1 272->272 g4 14x14", 272, 272, 4, 14, 1, 1, 0},
      {"sq 1x1 512->64 13x13", 512, 64, 1, 13, 1, 1, 0},
      {"sq 3x3 64->256 13x13", 64, 256, 1, 13, 3, 1, 1},
      {"dn 3x3 128->32 7x7", 128, 32, 1, 7, 3, 1, 1},
      {"dn 1x1 992->128 7x7", 992, 128, 1, 7, 1, 1, 0},
      {"3x3 s2 128 56->28", 128, 128, 1, 56, 3, 2, 1},
      {"3x3 s2 256 28->14", 256, 256, 1, 28, 3, 2, 1},
      {"3x3 64->64 28x28", 64, 64, 1, 28, 3, 1, 1},
      {"1x1 128->512 28x28", 128, 512, 1, 28, 1, 1, 0},
  };
  const char* only = std::getenv("NXRT_SSP_ONLY");
  const int threads = std::getenv("NXRT_SSP_THREADS") ? std::atoi(std::getenv("NXRT_SSP_THREADS")) : 1;
  ep::ThreadPool pool(threads);
  std::mt19937 rng(1);
  for (const C& c : cases) {
    if (only && !std::strstr(c.name, only)) continue;
    ConvShape s;
    s.N = 1, s.C = c.C, s.M = c.M, s.group = c.G, s.g.nsp = 2;
    s.g.in[1] = s.g.in[2] = c.H;
    s.g.k[1] = s.g.k[2] = c.k;
    s.g.s[1] = s.g.s[2] = c.s;
    for (int i = 1; i < 3; ++i) s.g.pb[i] = s.g.pe[i] = c.p;
    finish(&s);
    const int64_t Cg = c.C / c.G;
    auto x = random_floats(rng, s.C * s.g.in_size());
    auto w = random_floats(rng, s.M * Cg * c.k * c.k);
    auto b = random_floats(rng, s.M);
    std::vector<float> y(static_cast<size_t>(s.M * s.g.out_size()));
    ConvWeights<float> cw;
    cw.prepare(Dims{s.M, Cg, c.k, c.k}, c.G, w, c.s == 1);
    SmallSpatialWeights sw;
    small_spatial_prepare(s.M, c.G, Cg * c.k * c.k, w.data(), &sw);
    auto time = [&](auto&& fn) {
      for (int i = 0; i < 5; ++i) fn();
      std::vector<double> t;
      for (int rep = 0; rep < 7; ++rep) {
        const int iters = 20;
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iters; ++i) fn();
        t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / iters);
      }
      std::sort(t.begin(), t.end());
      if (only) {
        std::vector<double> one;
        for (int i = 0; i < 200; ++i) {
          auto t0 = std::chrono::steady_clock::now();
          fn();
          one.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(one.begin(), one.end());
        std::printf("  single calls: p10 %.3f p50 %.3f p90 %.3f max %.3f\n", one[20], one[100], one[180], one[199]);
      }
      return t[t.size() / 2];
    };
    const ConvPath usual = c.k == 1 && c.s == 1 ? ConvPath::kPointwise
                           : c.k == 3 && c.s == 1 && winograd_preferred(s) ? ConvPath::kWinograd
                                                                           : ConvPath::kImplicitGemm;
    const double a = time([&] { conv_forward<float>(s, x.data(), cw, b.data(), y.data(), &pool, usual); });
    const double bb = time([&] { small_spatial_conv(s, x.data(), sw, b.data(), y.data(), &pool); });
    const double dd = time([&] { small_spatial_direct_conv(s, x.data(), cw.packed, b.data(), y.data(), &pool); });
    std::printf("  direct %7.3f ms (%.2fx vs usual)\n", dd, a / dd);
    const double gmacs = double(s.M) * Cg * c.k * c.k * s.g.out_size() / 1e6;
    std::printf("%-30s T%d usual %7.3f ms  small %7.3f ms  (%.2fx)  small %.1f GFLOPS  preferred %d\n", c.name,
                threads, a, bb, a / bb, 2 * gmacs / bb, int(small_spatial_preferred(s, threads)));
  }
}

// kAuto with weights prepared for Winograd too (as the Conv kernel prepares 3x3 stride-1 convs): on a 7x7
// plane the transposed path comes before Winograd (its 4x4 tiles cover 64 outputs for 49) at 1 thread,
// and the strided direct path before both at 2 (strided_direct_preferred); on 14x14 Winograd keeps the
// conv, and on planes 8 wide where its tiles fit closely and are 6 or more (winograd_tiles_fit). Either way the output matches the direct definition.
TEST(ConvSmallSpatial, AutoOrderWithWinogradWeights) {
  if (!paths_available()) GTEST_SKIP() << "no AVX-512F on this CPU";
  std::mt19937 rng(11);
  ep::ThreadPool pool(2);
  struct C {
    int64_t C, M, H, W;
    ConvPath expected;
  };
  const C cases[] = {{128, 32, 7, 7, ConvPath::kSmallSpatialTransposed},  // DenseNet-121 block 4
                     {64, 48, 7, 7, ConvPath::kSmallSpatialTransposed},
                     {128, 32, 14, 14, ConvPath::kWinograd},            // DenseNet-121 block 3
                     {32, 32, 19, 8, ConvPath::kWinograd},              // tiles cover 160 outputs for 152
                     {32, 32, 9, 8, ConvPath::kSmallSpatialTransposed},   // 192 for 72
                     {32, 32, 8, 8, ConvPath::kSmallSpatialTransposed}};  // 4 tiles
  for (const C& c : cases) {
    ConvShape s;
    s.N = 1, s.C = c.C, s.M = c.M, s.g.nsp = 2;
    s.g.in[1] = c.H;
    s.g.in[2] = c.W;
    s.g.k[1] = s.g.k[2] = 3;
    s.g.pb[1] = s.g.pb[2] = s.g.pe[1] = s.g.pe[2] = 1;
    ASSERT_TRUE(finish(&s));
    ASSERT_TRUE(winograd_preferred(s)) << describe(s);
    auto x = random_floats(rng, s.C * s.g.in_size());
    auto w = random_floats(rng, s.M * s.C * 9);
    auto b = random_floats(rng, s.M);
    ConvWeights<float> cw;
    cw.prepare(Dims{s.M, s.C, 3, 3}, 1, w, true);
    for (int threads : {1, 2}) {
      const ConvPath expected =
          strided_direct_preferred(s, ep::cpu_isa_tier(), threads) ? ConvPath::kStridedDirect : c.expected;
      EXPECT_EQ(conv_chosen_path<float>(s, cw, ConvConfig(), nullptr, threads), expected) << describe(s);
    }
    const int64_t ny = s.M * s.g.out_size();
    std::vector<float> ref(static_cast<size_t>(ny)), y(static_cast<size_t>(ny), 123.f);
    conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
    conv_forward<float>(s, x.data(), cw, b.data(), y.data(), &pool);
    double err = 0;
    for (int64_t i = 0; i < ny; ++i) err = std::max(err, std::fabs(double(y[i]) - ref[i]) / (1.0 + std::fabs(ref[i])));
    EXPECT_LT(err, 1e-4) << describe(s);
  }
}

// FusedConv's pre-activation (x' = max(x * scale[c] + shift[c], 0) before a 1x1 conv, DenseNet) on small
// planes: the direct path forced and kAuto (direct on 16q + 1 planes such as 7x7 and 9x9, else the preact
// GEMM) on random shapes (batch 1-2, with and without a residual, Relu) against conv_naive on the
// pre-activated input, at 1 and 2 threads.
TEST(ConvSmallSpatial, DirectWithPreActivationMatchesNaive) {
  if (!paths_available()) GTEST_SKIP() << "no AVX-512F on this CPU";
  std::mt19937 rng(17);
  ep::ThreadPool pool(2);
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  const int64_t sides[] = {5, 7, 9, 13, 14, 16};  // 7x7, 9x9: 16q + 1 pixels
  for (int trial = 0; trial < 24; ++trial) {
    ConvShape s;
    s.N = 1 + pick(rng) % 2;
    s.C = 32 + pick(rng) % 300;
    s.M = 8 + pick(rng) % 140;
    s.g.nsp = 2;
    s.g.in[1] = sides[pick(rng) % 6];
    s.g.in[2] = sides[pick(rng) % 6];
    ASSERT_TRUE(finish(&s));
    const int64_t P = s.g.out_size(), ny = s.N * s.M * P;
    auto x = random_floats(rng, s.N * s.C * P);
    auto w = random_floats(rng, s.M * s.C);
    auto b = random_floats(rng, s.M);
    auto scale = random_floats(rng, s.C);
    auto shift = random_floats(rng, s.C);
    auto res = random_floats(rng, ny);
    std::vector<float> xp(x.size());
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
      const int64_t c = (i / P) % s.C;
      xp[i] = std::max(0.f, x[i] * scale[c] + shift[c]);
    }
    std::vector<float> ref(static_cast<size_t>(ny));
    conv_naive<float>(s, xp.data(), w.data(), b.data(), ref.data());
    const bool with_res = trial % 2 == 1;
    for (int64_t i = 0; i < ny; ++i) ref[i] = std::max(0.f, ref[i] + (with_res ? res[i] : 0.f));
    ConvPost post;
    post.residual = with_res ? res.data() : nullptr;
    post.act = Activation::kRelu;
    post.pre_scale = scale.data();
    post.pre_shift = shift.data();
    ConvWeights<float> cw;
    cw.prepare(Dims{s.M, s.C, 1, 1}, 1, w, false);
    for (ConvPath path : {ConvPath::kSmallSpatialDirect, ConvPath::kAuto}) {
      for (ep::ThreadPool* tp : {static_cast<ep::ThreadPool*>(nullptr), &pool}) {
        std::vector<float> y(static_cast<size_t>(ny), 123.f);
        ASSERT_TRUE(conv_forward<float>(s, x.data(), cw, b.data(), y.data(), tp, ConvConfig(path), &post))
            << describe(s);
        double err = 0;
        for (int64_t i = 0; i < ny; ++i)
          err = std::max(err, std::fabs(double(y[i]) - ref[i]) / (1.0 + std::fabs(ref[i])));
        EXPECT_LT(err, 1e-4) << describe(s) << " " << conv_path_name(path) << (tp ? " 2 threads" : " 1 thread");
      }
    }
  }
}

TEST(ConvSmallSpatial, Choice) {
  if (!paths_available()) GTEST_SKIP() << "no AVX-512F on this CPU";
  auto choice = [](int64_t C, int64_t M, int64_t H, int64_t k, int64_t st, int64_t G = 1, int threads = 1) {
    ConvShape s;
    s.N = 1, s.C = C, s.M = M, s.group = G, s.g.nsp = 2;
    s.g.in[1] = s.g.in[2] = H;
    s.g.k[1] = s.g.k[2] = k;
    s.g.s[1] = s.g.s[2] = st;
    s.g.pb[1] = s.g.pb[2] = s.g.pe[1] = s.g.pe[2] = k / 2;
    finish(&s);
    return small_spatial_choice(s, threads);
  };
  EXPECT_EQ(choice(512, 2048, 7, 1, 1), SmallSpatialChoice::kDirect);
  EXPECT_EQ(choice(1024, 2048, 14, 1, 2), SmallSpatialChoice::kDirect);   // 1x1 stride 2 -> 7x7
  EXPECT_EQ(choice(544, 544, 7, 1, 1, 4), SmallSpatialChoice::kDirect);   // grouped
  EXPECT_EQ(choice(512, 512, 7, 3, 1), SmallSpatialChoice::kTransposed);
  EXPECT_EQ(choice(256, 256, 28, 3, 2), SmallSpatialChoice::kTransposed);  // 3x3 stride 2 -> 14x14
  EXPECT_EQ(choice(1024, 256, 14, 1, 1), SmallSpatialChoice::kNone);      // 1x1 at 14x14: +6% share only
  EXPECT_EQ(choice(1024, 256, 14, 1, 1, 1, 2), SmallSpatialChoice::kDirect);  // ... but at 2 threads
  EXPECT_EQ(choice(272, 272, 14, 1, 1, 4), SmallSpatialChoice::kNone);
  EXPECT_EQ(choice(64, 16, 4, 1, 1), SmallSpatialChoice::kNone);           // 1x1 on 16 pixels: the usual path
  EXPECT_EQ(choice(3, 64, 7, 3, 1), SmallSpatialChoice::kNone);            // K < 32
  // 1x1 on planes over 256 pixels: direct on one thread up to 512 output channels and 768 KiB of weights;
  // at 2 threads for up to 64 output channels (K >= 32, up to 80x80), or work too small to split.
  EXPECT_EQ(choice(128, 512, 28, 1, 1), SmallSpatialChoice::kDirect);
  EXPECT_EQ(choice(256, 32, 27, 1, 1), SmallSpatialChoice::kDirect);
  EXPECT_EQ(choice(16, 64, 55, 1, 1), SmallSpatialChoice::kDirect);
  EXPECT_EQ(choice(512, 1024, 28, 1, 1), SmallSpatialChoice::kNone);      // 2 MiB of weights
  EXPECT_EQ(choice(12, 96, 160, 1, 1), SmallSpatialChoice::kNone);        // K < 16
  EXPECT_EQ(choice(128, 512, 28, 1, 1, 1, 2), SmallSpatialChoice::kNone);
  EXPECT_EQ(choice(256, 32, 27, 1, 1, 1, 2), SmallSpatialChoice::kDirect);
  EXPECT_EQ(choice(48, 48, 160, 1, 1, 1, 2), SmallSpatialChoice::kNone);  // over 80x80
  EXPECT_EQ(choice(16, 64, 55, 1, 1, 1, 2), SmallSpatialChoice::kNone);   // K < 32 ...
  EXPECT_EQ(choice(16, 16, 17, 1, 1, 1, 2), SmallSpatialChoice::kDirect); // ... unless it runs on one thread
}

// The direct path where x is read in pixel blocks (over 512 KiB of it) and, on 2 threads, where the
// threads split the pixels (one image, planes of 17+ vectors) instead of the channel panels: against the reference,
// with a remainder vector, a 16q + 1 tail, batch 2, groups and the fused residual + activation.
TEST(ConvSmallSpatial, DirectLargePlanesMatchNaive) {
  if (!paths_available()) GTEST_SKIP() << "no AVX-512F on this CPU";
  std::mt19937 rng(29);
  ep::ThreadPool pool(2);
  struct C {
    int64_t N, C, M, G, H, W;
  };
  const C cases[] = {
      {1, 192, 40, 1, 40, 41},  // 1640 px (102 vectors + 8), x 1.2 MiB: pixel blocks of 20 vectors
      {1, 64, 20, 1, 55, 55},   // 3025 px = 189 vectors + 1: the tail, x 756 KiB
      {1, 48, 13, 1, 97, 33},   // 3201 px = 200 vectors + 1, 13 channels: a partial panel
      {2, 96, 30, 1, 33, 33},   // batch 2 (at 2 threads one item per image, no pixel split)
      {1, 128, 24, 2, 40, 40},  // 2 groups
      {1, 32, 16, 1, 7, 9},     // small: one block, one thread
      {1, 40, 14, 1, 5, 13},    // 65 px = 4 vectors + 1: a 4-vector tile with the tail
  };
  for (const C& c : cases) {
    ConvShape s;
    s.N = c.N, s.C = c.C, s.M = c.M, s.group = c.G, s.g.nsp = 2;
    s.g.in[1] = c.H, s.g.in[2] = c.W;
    ASSERT_TRUE(finish(&s));
    for (int mode = 0; mode < 4; ++mode) {  // pool or not; no post / residual + LeakyRelu
      const double e = path_error(s, true, rng, mode % 2 == 0 ? &pool : nullptr, false, mode < 2 ? 0 : 3, true);
      EXPECT_LT(e, 1e-4) << describe(s) << " mode " << mode;
    }
  }
}
