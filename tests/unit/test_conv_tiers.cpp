// The conv engine's GEMM paths (implicit GEMM, padded rows, pointwise, im2col) and its kAuto choice at
// every ISA tier this CPU runs (ConvConfig::isa: the GEMM kernel variant and the paths' own vector code),
// with and without nxrt::FusedConv's post (residual + Relu / Clip / LeakyRelu), against the direct
// definition (conv_naive) on random shapes. Tiers above the CPU's are named in the output as not run.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/thread_pool.h"
#include "ops/conv/conv_engine.h"
#include "kernel_test_util.h"

using namespace nxrt;
using namespace nxrt::ops;

namespace {

using nxrt::testing::random_floats;

// A random 2-D conv shape the GEMM paths take: channels and widths that cross the 6-row and 16/32-column
// tile edges, 3x3 or 1x1 kernels, stride 1 or 2, one or two groups.
bool random_shape(std::mt19937& rng, int iter, ConvShape* s) {
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  s->N = 1 + pick(rng) % 2;
  s->group = iter % 6 == 0 ? 2 : 1;  // grouped 1x1 convs too (each group its own GEMM)
  s->C = s->group * (1 + pick(rng) % 40);
  s->M = s->group * (1 + pick(rng) % 70);
  Geom3& g = s->g;
  g.nsp = 2;
  const bool pointwise = iter % 3 == 0;
  for (int i = 1; i < 3; ++i) {
    g.in[i] = 3 + pick(rng) % 40;
    g.k[i] = pointwise ? 1 : 3;
    g.s[i] = pointwise ? 1 : 1 + pick(rng) % 2;
    g.d[i] = 1;
    g.pb[i] = g.pe[i] = pointwise ? 0 : 1;
  }
  for (int i = 1; i < 3; ++i) {
    const int64_t avail = g.in[i] + g.pb[i] + g.pe[i];
    if (avail < g.k[i]) return false;
    g.out[i] = (avail - g.k[i]) / g.s[i] + 1;
  }
  return true;
}

struct PostCase {
  Activation act;
  bool residual;
};

float apply_post(const PostCase& p, float v, float res) {
  if (p.residual) v += res;
  switch (p.act) {
    case Activation::kRelu: return v < 0.f ? 0.f : v;
    case Activation::kClip: return std::min(0.5f, std::max(-0.5f, v));
    case Activation::kLeakyRelu: return v >= 0.f ? v : 0.1f * v;
    default: return v;
  }
}

// Runs `path` (or kAuto) on `s` at `tier`, on the calling thread and on `pool`, with FusedConv's post
// `pc` (Clip's bounds -0.5/0.5, LeakyRelu's slope 0.1), and checks every output against the direct
// definition `conv` with the same post applied (a path that did not apply the post gets it here).
// Adds the runs checked to *runs; stops at the first output off (the caller then ends the test).
void check_against_naive(const ConvShape& s, ConvPath path, ep::IsaTier tier, const PostCase& pc,
                         const std::vector<float>& x, const ConvWeights<float>& cw, const std::vector<float>& b,
                         const std::vector<float>& res, const std::vector<float>& conv, ep::ThreadPool& pool,
                         int* runs) {
  ConvPost post;
  post.act = pc.act;
  post.residual = pc.residual ? res.data() : nullptr;
  post.act_a = pc.act == Activation::kClip ? -0.5f : 0.1f;
  post.act_b = 0.5f;
  const Geom3& g = s.g;
  const int64_t ny = static_cast<int64_t>(conv.size());
  for (ep::ThreadPool* p : {static_cast<ep::ThreadPool*>(nullptr), &pool}) {
    std::vector<float> y(static_cast<size_t>(ny), 123.f);
    const bool applied = conv_forward<float>(s, x.data(), cw, b.data(), y.data(), p, ConvConfig(path, tier), &post);
    for (int64_t i = 0; i < ny; ++i) {
      const float want = apply_post(pc, conv[i], res[i]);
      const float got = applied ? y[i] : apply_post(pc, y[i], res[i]);
      // Winograd (kAuto may take it) carries ~5e-5 relative error; the GEMM paths ~1e-6.
      ASSERT_NEAR(got, want, 2e-4f * (1.f + std::fabs(want)))
          << conv_path_name(path) << " chose " << conv_path_name(conv_chosen_path(s, cw, ConvConfig(path, tier), &post, 1))
          << " N" << s.N << " C" << s.C << " M" << s.M << " in " << g.in[1] << "x" << g.in[2] << " k" << g.k[1]
          << " s" << g.s[1] << " pads " << g.pb[1] << "," << g.pb[2] << "," << g.pe[1] << "," << g.pe[2] << " act "
          << static_cast<int>(pc.act) << " res " << pc.residual << " at " << i;
    }
    ++*runs;
  }
}

// Random input, weights (of shape wshape, prepared for the paths), bias and residual for s, and the
// direct definition's output on them; drawn in that order from rng.
struct ConvOperands {
  std::vector<float> x, b, res, conv;
  ConvWeights<float> cw;
};
ConvOperands make_operands(std::mt19937& rng, const ConvShape& s, const Dims& wshape, bool winograd) {
  ConvOperands o;
  o.x = random_floats(rng, s.N * s.C * s.g.in_size());
  const auto w = random_floats(rng, shape_numel(wshape));
  o.b = random_floats(rng, s.M);
  const int64_t ny = s.N * s.M * s.g.out_size();
  o.res = random_floats(rng, ny);
  o.conv.resize(static_cast<size_t>(ny));
  conv_naive<float>(s, o.x.data(), w.data(), o.b.data(), o.conv.data());
  o.cw.prepare(wshape, s.group, w, winograd);
  return o;
}

}  // namespace

TEST(ConvTiers, GemmPathsAndAutoAtEveryTierAgainstNaive) {
  const ep::IsaTier cpu = ep::cpu_isa_tier();
  for (int t = static_cast<int>(cpu) + 1; t <= static_cast<int>(ep::IsaTier::kAmx); ++t) {
    std::printf("[ SKIPPED  ] tier %s: not on this CPU, conv paths not checked there\n",
                ep::isa_tier_name(static_cast<ep::IsaTier>(t)));
  }
  const ConvPath paths[] = {ConvPath::kAuto, ConvPath::kImplicitGemm, ConvPath::kPaddedRowsGemm,
                            ConvPath::kPointwise, ConvPath::kIm2col};
  const PostCase posts[] = {{Activation::kNone, false},
                            {Activation::kRelu, true},
                            {Activation::kClip, false},
                            {Activation::kLeakyRelu, true},
                            {Activation::kLeakyRelu, false}};
  ep::ThreadPool pool(2);
  std::mt19937 rng(2121);
  int ran = 0;
  for (int ti = 0; ti <= static_cast<int>(cpu); ++ti) {
    const auto tier = static_cast<ep::IsaTier>(ti);
    SCOPED_TRACE(std::string("tier ") + ep::isa_tier_name(tier));
    int ran_tier = 0;
    for (int iter = 0; iter < 24; ++iter) {
      ConvShape s;
      if (!random_shape(rng, iter, &s)) continue;
      const Dims wshape{s.M, s.C / s.group, s.g.k[1], s.g.k[2]};
      const ConvOperands o = make_operands(rng, s, wshape, /*winograd=*/true);
      for (ConvPath path : paths) {
        if (path != ConvPath::kAuto && !conv_path_applies(s, path, true, tier)) continue;
        const PostCase& pc = posts[(iter + static_cast<int>(path)) % 5];
        check_against_naive(s, path, tier, pc, o.x, o.cw, o.b, o.res, o.conv, pool, &ran_tier);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    EXPECT_GT(ran_tier, 60);
    ran += ran_tier;
    std::printf("[ CHECKED  ] tier %s: %d conv runs\n", ep::isa_tier_name(tier), ran_tier);
  }
  EXPECT_GT(ran, 0);
}

namespace {

// A 1x1 conv at strides over 1 without pads (ResNet's projection shortcuts: kPointwise on the subsampled
// input): strides 2 and 3 on either axis, odd sizes, batches (odd iters), groups (every fifth), and one
// 3-D case (iter 7). The larger ones split the subsampling copy over 2 threads.
ConvShape strided_pointwise_shape(std::mt19937& rng, int iter) {
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  ConvShape s;
  s.N = 1 + iter % 2;
  s.group = iter % 5 == 4 ? 2 : 1;
  s.C = s.group * (1 + pick(rng) % 48);
  s.M = s.group * (1 + pick(rng) % 40);
  Geom3& g = s.g;
  g.nsp = iter == 7 ? 3 : 2;
  const int64_t strides[][3] = {{1, 2, 2}, {1, 3, 1}, {1, 1, 2}, {1, 2, 3}, {2, 2, 2}};
  for (int i = 0; i < 3; ++i) {
    g.k[i] = g.d[i] = 1;
    g.pb[i] = g.pe[i] = 0;
    g.s[i] = g.nsp == 3 ? strides[4][i] : strides[iter % 4][i];
    g.in[i] = i == 0 ? (g.nsp == 3 ? 5 : 1) : 3 + pick(rng) % 57;
    g.out[i] = (g.in[i] - 1) / g.s[i] + 1;
  }
  return s;
}

}  // namespace

// Those shapes on kPointwise and kAuto with FusedConv's post, at every tier this CPU runs, on 1 and 2
// threads, against the direct definition.
TEST(ConvTiers, StridedPointwiseAtEveryTierAgainstNaive) {
  const PostCase posts[] = {{Activation::kNone, false}, {Activation::kRelu, true}, {Activation::kLeakyRelu, false}};
  ep::ThreadPool pool(2);
  std::mt19937 rng(9090);
  for (int ti = 0; ti <= static_cast<int>(ep::cpu_isa_tier()); ++ti) {
    const auto tier = static_cast<ep::IsaTier>(ti);
    SCOPED_TRACE(std::string("tier ") + ep::isa_tier_name(tier));
    int ran_tier = 0;
    for (int iter = 0; iter < 16; ++iter) {
      const ConvShape s = strided_pointwise_shape(rng, iter);
      const Dims wshape = s.g.nsp == 3 ? Dims{s.M, s.C / s.group, 1, 1, 1} : Dims{s.M, s.C / s.group, 1, 1};
      const ConvOperands o = make_operands(rng, s, wshape, /*winograd=*/false);
      ASSERT_TRUE(conv_path_applies(s, ConvPath::kPointwise, true, tier));
      for (ConvPath path : {ConvPath::kPointwise, ConvPath::kAuto}) {
        const PostCase& pc = posts[(iter + static_cast<int>(path)) % 3];
        check_against_naive(s, path, tier, pc, o.x, o.cw, o.b, o.res, o.conv, pool, &ran_tier);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    EXPECT_EQ(ran_tier, 16 * 2 * 2);
  }
}

// Stem-shaped convs (1-4 input channels, 3x3 / 5x5 / 7x7 kernels, stride 1 or 2, pads, odd widths of 12+
// outputs, output channels crossing the 6-row A panels and 64-column tiles of the strips) on the
// padded-rows path and kAuto, with and without FusedConv's post, at every tier this CPU runs.
TEST(ConvTiers, StemShapesPaddedRowsAtEveryTierAgainstNaive) {
  const ep::IsaTier cpu = ep::cpu_isa_tier();
  for (int t = static_cast<int>(cpu) + 1; t <= static_cast<int>(ep::IsaTier::kAmx); ++t) {
    std::printf("[ SKIPPED  ] tier %s: not on this CPU, stem convs not checked there\n",
                ep::isa_tier_name(static_cast<ep::IsaTier>(t)));
  }
  const PostCase posts[] = {{Activation::kNone, false},
                            {Activation::kRelu, true},
                            {Activation::kClip, false},
                            {Activation::kLeakyRelu, true}};
  std::mt19937 rng(4711);
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  ep::ThreadPool pool(2);
  for (int ti = 0; ti <= static_cast<int>(cpu); ++ti) {
    const auto tier = static_cast<ep::IsaTier>(ti);
    SCOPED_TRACE(std::string("tier ") + ep::isa_tier_name(tier));
    int ran_tier = 0;
    for (int iter = 0; iter < 20; ++iter) {
      ConvShape s;
      s.N = 1;
      s.group = 1;
      s.C = 1 + iter % 4;
      const int64_t ms[] = {1, 5, 11, 12, 13, 24, 29, 64, 70};
      s.M = ms[pick(rng) % 9];
      Geom3& g = s.g;
      g.nsp = 2;
      const int64_t k = 3 + 2 * (pick(rng) % 3);
      const int64_t st = 1 + iter % 2;
      for (int i = 1; i < 3; ++i) {
        g.k[i] = k;
        g.s[i] = st;
        g.d[i] = 1;
        g.pb[i] = pick(rng) % (k / 2 + 1);
        g.pe[i] = pick(rng) % (k / 2 + 1);
        g.in[i] = st * (12 + pick(rng) % 40) + k + (i == 2 ? 1 - 2 * (pick(rng) % 2) : 0);
        g.out[i] = (g.in[i] + g.pb[i] + g.pe[i] - k) / st + 1;
      }
      const Dims wshape{s.M, s.C, k, k};
      const ConvOperands o = make_operands(rng, s, wshape, /*winograd=*/false);
      for (ConvPath path : {ConvPath::kPaddedRowsGemm, ConvPath::kAuto}) {
        if (path != ConvPath::kAuto && !conv_path_applies(s, path, true, tier)) continue;
        const PostCase& pc = posts[(iter + static_cast<int>(path)) % 4];
        check_against_naive(s, path, tier, pc, o.x, o.cw, o.b, o.res, o.conv, pool, &ran_tier);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
    EXPECT_GT(ran_tier, 40);
    std::printf("[ CHECKED  ] tier %s: %d stem conv runs\n", ep::isa_tier_name(tier), ran_tier);
  }
}
