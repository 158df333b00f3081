// The shared window engine of the small-CNN kernels (window/window_engine.h: depthwise conv, MaxPool,
// AveragePool) against the per-output definitions on random geometries: strides 1-4, pads, dilation,
// ceil-mode extents, odd and tiny sizes, kernels up to 64 taps, 1-D windows; the AVX2 body and the plain
// loop, one plane at a time and run_planes over strided plane runs; nothing outside the outputs written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "ops/conv/depthwise.h"
#include "ops/conv/conv_engine.h"
#include "ops/pool/row_pool.h"
#include "ops/window/window_engine.h"
#include "window_test_util.h"

using namespace nxrt;
using namespace nxrt::ops;
using window::PlaneOp;
using window::TapPlan;
using nxrt::testing::window_naive;

namespace {

std::vector<float> rand_vec(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(ref[i]) || std::isinf(ref[i])) {
      ASSERT_EQ(std::isnan(got[i]), std::isnan(ref[i])) << what << " at " << i;
      if (std::isinf(ref[i])) {
        ASSERT_EQ(got[i], ref[i]) << what << " at " << i;
      }
    } else {
      ASSERT_NEAR(got[i], ref[i], 2e-5f * (1.f + std::fabs(ref[i]))) << what << " at " << i;
    }
  }
}

// A random 2-D (or 1-D: height 1) window geometry the engine supports.
bool random_geom(std::mt19937& rng, int iter, Geom3* g) {
  std::uniform_int_distribution<int> pick(0, 1000);
  WindowAttrs a;
  const bool one_d = iter % 9 == 4;
  const bool wide = iter % 37 == 11;
  Dims in{one_d ? 1 : 1 + pick(rng) % 33, wide ? 200 + pick(rng) % 100 : 1 + pick(rng) % 40};
  Dims kernel{one_d ? 1 : 1 + pick(rng) % (iter % 3 == 0 ? 8 : 4), 1 + pick(rng) % (iter % 3 == 0 ? 8 : 4)};
  a.strides = {1 + pick(rng) % (iter % 4 == 0 ? 4 : 2), 1 + pick(rng) % (iter % 5 == 0 ? 4 : 2)};
  a.dilations = {iter % 6 == 1 ? 1 + pick(rng) % 3 : 1, iter % 7 == 2 ? 1 + pick(rng) % 3 : 1};
  for (int i = 0; i < 4; ++i) a.pads.push_back(pick(rng) % 4);
  for (int i = 0; i < 2; ++i) {  // pads below the kernel extent (pools require it)
    const int64_t ext = (kernel[i] - 1) * a.dilations[i] + 1;
    a.pads[i] = std::min<int64_t>(a.pads[i], ext - 1);
    a.pads[i + 2] = std::min<int64_t>(a.pads[i + 2], ext - 1);
  }
  a.ceil_mode = iter % 3 == 1;
  if (iter % 11 == 5) a.auto_pad = AutoPad::kSameUpper;
  a.kernel_shape = kernel;
  return forward_geometry(a, in, kernel, g).ok() && g->out_size() > 0 && kernel[0] * kernel[1] <= 64;
}

}  // namespace

TEST(WindowEngine, EngineMatchesDefinitionOnRandomGeometries) {
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 400; ++iter) {
    Geom3 g;
    if (!random_geom(rng, iter, &g)) continue;
    ASSERT_TRUE(TapPlan::supports(g)) << "iter " << iter;
    ++ran;
    const int64_t planes = 1 + pick(rng) % 4;
    const int64_t in_size = g.in_size(), out_size = g.out_size(), kvol = g.k[1] * g.k[2];
    const int64_t x_stride = in_size + (iter % 2 ? 3 : 0);  // run_planes with a gap between planes
    auto x = rand_vec(rng, planes * x_stride);
    if (iter % 4 == 0) x[static_cast<size_t>(pick(rng)) % x.size()] = std::numeric_limits<float>::quiet_NaN();
    auto w = rand_vec(rng, planes * kvol);
    auto bias = rand_vec(rng, planes);
    for (PlaneOp op : {PlaneOp::kConv, PlaneOp::kMax, PlaneOp::kAvg}) {
      for (int cip = 0; cip < (op == PlaneOp::kAvg ? 2 : 1); ++cip) {
        std::vector<float> ref(static_cast<size_t>(planes * out_size));
        for (int64_t p = 0; p < planes; ++p)
          window_naive(g, op, cip != 0, x.data() + p * x_stride, w.data() + p * kvol, bias[p],
                       ref.data() + p * out_size);
        for (int vec = 0; vec < 2; ++vec) {
          const std::string what = "iter " + std::to_string(iter) + " op " + std::to_string(static_cast<int>(op)) +
                                   " cip " + std::to_string(cip) + " vec " + std::to_string(vec);
          TapPlan plan;
          ASSERT_TRUE(plan.prepare(g, op, cip != 0)) << what;
          // Guards around the outputs: nothing outside [0, planes * out_size) may be written.
          std::vector<float> y(static_cast<size_t>(planes * out_size + 32), 77.f);
          float* y0 = y.data() + 16;
          for (int64_t p = 0; p < planes; ++p)
            plan.run(x.data() + p * x_stride, w.data() + p * kvol, bias[p], y0 + p * out_size, vec != 0);
          for (int i = 0; i < 16; ++i) {
            ASSERT_EQ(y[i], 77.f) << what;
            ASSERT_EQ(y[y.size() - 1 - i], 77.f) << what;
          }
          expect_close(std::vector<float>(y0, y0 + planes * out_size), ref, what + " run");
          std::fill(y.begin(), y.end(), 77.f);
          plan.run_planes(x.data(), x_stride, w.data(), kvol, bias.data(), true, y0, planes, vec != 0);
          for (int i = 0; i < 16; ++i) {
            ASSERT_EQ(y[i], 77.f) << what;
            ASSERT_EQ(y[y.size() - 1 - i], 77.f) << what;
          }
          expect_close(std::vector<float>(y0, y0 + planes * out_size), ref, what + " run_planes");
          // A plan without buffers of its own on caller scratch full of garbage (a kernel variant's plan
          // on a thread's slot): the same bits as run_planes.
          const std::vector<float> own(y0, y0 + planes * out_size);
          TapPlan shared;
          ASSERT_TRUE(shared.prepare(g, op, cip != 0, /*own_buffers=*/false)) << what;
          std::vector<float> scratch(static_cast<size_t>(shared.scratch_floats()), std::nanf(""));
          std::fill(y.begin(), y.end(), 77.f);
          shared.run_planes_in(scratch.data(), x.data(), x_stride, w.data(), kvol, bias.data(), true, y0, planes, vec != 0);
          ASSERT_EQ(std::memcmp(y0, own.data(), own.size() * sizeof(float)), 0) << what << " run_planes_in";
        }
      }
    }
  }
  EXPECT_GT(ran, 250);
}

// One plan per op with buffers of its own, switching geometries back and forth, keeps giving the right
// answers (the pad cells of a reused buffer stay pad; a rebuilt plan forgets the old geometry).
TEST(WindowEngine, ReusedPlanAcrossGeometries) {
  TapPlan plans[3];
  std::mt19937 rng(4);
  std::vector<Geom3> geoms;
  for (int iter = 0; geoms.size() < 6; ++iter) {
    Geom3 g;
    if (random_geom(rng, iter, &g)) geoms.push_back(g);
  }
  for (int round = 0; round < 3; ++round)
    for (const Geom3& g : geoms)
      for (PlaneOp op : {PlaneOp::kConv, PlaneOp::kMax, PlaneOp::kAvg}) {
        TapPlan& plan = plans[static_cast<int>(op)];
        ASSERT_TRUE(plan.prepare(g, op, round == 1));
        auto x = rand_vec(rng, g.in_size());
        auto w = rand_vec(rng, g.k[1] * g.k[2]);
        std::vector<float> y(static_cast<size_t>(g.out_size())), ref(y.size());
        plan.run(x.data(), w.data(), 0.5f, y.data());
        window_naive(g, op, round == 1, x.data(), w.data(), 0.5f, ref.data());
        expect_close(y, ref, "round " + std::to_string(round));
      }
}

TEST(WindowEngine, RefusesWhatItCannotDo) {
  Geom3 g;
  g.in[1] = g.in[2] = 20;
  g.k[1] = g.k[2] = 9;  // 81 taps
  g.out[1] = g.out[2] = 12;
  EXPECT_FALSE(TapPlan::supports(g));
  TapPlan plan;
  EXPECT_FALSE(plan.prepare(g, PlaneOp::kMax, false));
  g.k[1] = g.k[2] = 3;
  g.out[1] = g.out[2] = 18;
  EXPECT_TRUE(TapPlan::supports(g));
  g.in[0] = 2;  // a real depth axis
  EXPECT_FALSE(TapPlan::supports(g));
}

// dwconv::planes_f32 (what conv_impl's depthwise branch can call once per chunk of planes) against the
// naive convolution: batches, depth multiplier 2, no bias, chunks that start and end inside an image.
TEST(SmallCnnDepthwise, PlanesMatchNaiveConv) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 120; ++iter) {
    ConvShape s;
    s.N = 1 + pick(rng) % 2;
    s.group = s.C = 1 + pick(rng) % 6;
    s.M = s.C * (iter % 5 == 0 ? 2 : 1);
    if (!random_geom(rng, iter, &s.g)) continue;
    ASSERT_TRUE(dwconv::applies(s.g));
    ++ran;
    const int64_t kh = s.g.k[1], kw = s.g.k[2];
    Dims wshape{s.M, 1, kh, kw};
    if (s.g.in[1] == 1 && s.g.k[1] == 1) wshape = {s.M, 1, 1, kw};
    auto x = rand_vec(rng, s.N * s.C * s.g.in_size());
    auto w = rand_vec(rng, s.M * kh * kw);
    auto b = rand_vec(rng, s.M);
    const bool with_bias = iter % 3 != 0;
    const int64_t planes = s.N * s.M, out = s.g.out_size();
    std::vector<float> ref(static_cast<size_t>(planes * out));
    conv_naive<float>(s, x.data(), w.data(), with_bias ? b.data() : nullptr, ref.data());
    std::vector<float> y(ref.size() + 16, 55.f);
    const int64_t cut = planes > 1 ? 1 + pick(rng) % (planes - 1) : planes;
    dwconv::planes_f32(s.g, s.C, s.M, x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), 0, cut);
    dwconv::planes_f32(s.g, s.C, s.M, x.data(), w.data(), with_bias ? b.data() : nullptr, y.data(), cut, planes);
    for (size_t i = ref.size(); i < y.size(); ++i) ASSERT_EQ(y[i], 55.f) << "iter " << iter;
    y.resize(ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_NEAR(y[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i]))) << "iter " << iter << " at " << i;
  }
  EXPECT_GT(ran, 70);
}

// A depthwise conv reading its input through a channel shuffle (ConvPost::input_shuffle: ShuffleNet's
// Reshape-Transpose-Reshape folded into the conv) against the naive convolution of the shuffled copy:
// dwconv::planes_f32 in two chunks (the window engine's listed planes, more than one list of 64), and
// conv_forward on the depthwise paths (read in place) and on paths that take the shuffled copy (im2col,
// reference), with and without a post.
TEST(SmallCnnDepthwise, ShuffledInputMatchesConvOfShuffledCopy) {
  std::mt19937 rng(21);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 60; ++iter) {
    ConvShape s;
    s.N = 1 + pick(rng) % 2;
    const int64_t G = 2 + pick(rng) % 3, K = iter % 7 == 0 ? 40 : 1 + pick(rng) % 5;
    s.group = s.C = G * K;
    s.M = s.C * (iter % 5 == 0 ? 2 : 1);
    if (!random_geom(rng, iter, &s.g)) continue;
    ++ran;
    const int64_t kh = s.g.k[1], kw = s.g.k[2], in_size = s.g.in_size();
    auto x = rand_vec(rng, s.N * s.C * in_size);
    auto w = rand_vec(rng, s.M * kh * kw);
    auto b = rand_vec(rng, s.M);
    std::vector<float> xs(x.size());
    channel_shuffle_copy(x.data(), xs.data(), s.N, G, K, static_cast<size_t>(in_size) * sizeof(float));
    for (int64_t c = 0; c < s.C; ++c)  // the copy and the map agree
      ASSERT_EQ(xs[static_cast<size_t>(c * in_size)], x[static_cast<size_t>(shuffled_channel(c, s.C, G) * in_size)]);
    const int64_t planes = s.N * s.M, out = s.g.out_size();
    std::vector<float> ref(static_cast<size_t>(planes * out));
    conv_naive<float>(s, xs.data(), w.data(), b.data(), ref.data());
    auto check = [&](const std::vector<float>& y, const std::string& what) {
      for (size_t i = 0; i < ref.size(); ++i)
        ASSERT_NEAR(y[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i]))) << what << " iter " << iter << " at " << i;
    };
    std::vector<float> y(ref.size(), 55.f);
    const int64_t cut = planes > 1 ? 1 + pick(rng) % (planes - 1) : planes;
    dwconv::planes_f32(s.g, s.C, s.M, x.data(), w.data(), b.data(), y.data(), 0, cut, G);
    dwconv::planes_f32(s.g, s.C, s.M, x.data(), w.data(), b.data(), y.data(), cut, planes, G);
    check(y, "planes_f32");
    Dims wshape{s.M, 1, kh, kw};
    ConvWeights<float> cw;
    cw.prepare(wshape, s.group, w);
    for (ConvPath path : {ConvPath::kDepthwiseWindow, ConvPath::kDepthwiseScalar, ConvPath::kIm2col, ConvPath::kReference}) {
      ConvPost post;
      post.input_shuffle = G;
      std::fill(y.begin(), y.end(), 55.f);
      conv_forward<float>(s, x.data(), cw, b.data(), y.data(), nullptr, ConvConfig(path), &post);
      check(y, conv_path_name(path));
    }
  }
  EXPECT_GT(ran, 35);
}

// Pools with more than 64 taps leave the engine for the separable row path; both stay exact.
TEST(SmallCnnPool, LargeWindowsTakeTheSeparablePath) {
  std::mt19937 rng(13);
  for (int64_t k : {9, 12}) {
    Geom3 g;
    g.nsp = 2;
    g.in[1] = 30;
    g.in[2] = 27;
    g.k[1] = g.k[2] = k;
    g.s[1] = 2;
    g.s[2] = k == 9 ? 2 : 1;
    g.pb[1] = g.pb[2] = g.pe[1] = g.pe[2] = 2;
    g.out[1] = (g.in[1] + 4 - k) / g.s[1] + 1;
    g.out[2] = (g.in[2] + 4 - k) / g.s[2] + 1;
    ASSERT_FALSE(TapPlan::supports(g));
    auto x = rand_vec(rng, 2 * g.in_size());
    for (PlaneOp op : {PlaneOp::kMax, PlaneOp::kAvg}) {
      std::vector<float> y(static_cast<size_t>(2 * g.out_size())), ref(y.size());
      if (op == PlaneOp::kMax) {
        rowpool::max_pool_2d(g, x.data(), y.data(), 0, 2);
      } else {
        rowpool::avg_pool_2d(g, x.data(), y.data(), true, 0, 2);
      }
      for (int p = 0; p < 2; ++p)
        window_naive(g, op, true, x.data() + p * g.in_size(), nullptr, 0.f, ref.data() + p * g.out_size());
      expect_close(y, ref, "k " + std::to_string(k));
    }
  }
}

// Planes over the double-buffer limit (one buffer, each plane copied right before it is computed).
TEST(WindowEngine, LargePlanesSingleBuffer) {
  std::mt19937 rng(17);
  for (int64_t s : {1, 2}) {
    Geom3 g;
    g.nsp = 2;
    g.in[1] = 261;
    g.in[2] = 263;
    g.k[1] = g.k[2] = 3;
    g.s[1] = g.s[2] = s;
    g.pb[1] = g.pb[2] = g.pe[1] = g.pe[2] = 1;
    g.out[1] = (g.in[1] + 2 - 3) / s + 1;
    g.out[2] = (g.in[2] + 2 - 3) / s + 1;
    const int64_t planes = 3;
    auto x = rand_vec(rng, planes * g.in_size());
    auto w = rand_vec(rng, planes * 9);
    auto bias = rand_vec(rng, planes);
    for (PlaneOp op : {PlaneOp::kConv, PlaneOp::kMax, PlaneOp::kAvg}) {
      std::vector<float> ref(static_cast<size_t>(planes * g.out_size()));
      for (int64_t p = 0; p < planes; ++p)
        window_naive(g, op, false, x.data() + p * g.in_size(), w.data() + p * 9, bias[p],
                     ref.data() + p * g.out_size());
      for (int vec = 0; vec < 2; ++vec) {
        TapPlan plan;
        ASSERT_TRUE(plan.prepare(g, op, false));
        std::vector<float> y(ref.size(), 9.f);
        plan.run_planes(x.data(), g.in_size(), w.data(), 9, bias.data(), true, y.data(), planes, vec != 0);
        expect_close(y, ref, "stride " + std::to_string(s) + " op " + std::to_string(static_cast<int>(op)));
      }
    }
  }
}
