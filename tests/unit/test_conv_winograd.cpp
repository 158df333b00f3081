// Winograd F(4x4, 3x3) conv path (ops/conv/winograd.h) against the direct definition (conv_naive, double
// accumulation).
//
// Tolerance: Winograd is not bit-compatible with direct summation. The input transform B^T d B scales
// values by up to 10 per axis (row sums of |B^T|), the output transform by up to 18 per axis, and the
// rounding errors of these stages are summed over the input channels by the GEMMs. The error is therefore
// measured against the magnitude of the output, not element-wise: for inputs and weights in [-1, 1],
// max |y - ref| / rms(ref) is 2e-5..6e-5 for F(4x4, 3x3) on these shapes and up to 512-2048 input channels
// (printed by the tests; im2col + GEMM gives ~2e-6). The bound, 2e-4, leaves a 3x margin; a wrong
// transform coefficient, tile offset or padding case gives errors of order 1.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>
#include <vector>

#include "kernel_test_util.h"
#include "ep/cpu_features.h"
#include "ep/thread_pool.h"
#include "ops/conv/conv_engine.h"
#include "ops/conv/winograd.h"
#include "ops/gemm/gemm.h"

using namespace nxrt;
using namespace nxrt::ops;

namespace {

using nxrt::testing::random_floats;

struct Case {
  int64_t N, C, M, H, W, pt, pl, pb, pr;
  bool bias;
};

ConvShape shape_of(const Case& c) {
  ConvShape s;
  s.N = c.N;
  s.C = c.C;
  s.M = c.M;
  s.group = 1;
  s.g.nsp = 2;
  s.g.in[1] = c.H;
  s.g.in[2] = c.W;
  s.g.k[1] = s.g.k[2] = 3;
  s.g.pb[1] = c.pt;
  s.g.pb[2] = c.pl;
  s.g.pe[1] = c.pb;
  s.g.pe[2] = c.pr;
  s.g.out[1] = c.H + c.pt + c.pb - 2;
  s.g.out[2] = c.W + c.pl + c.pr - 2;
  return s;
}

// Threading / code modes of the tests: 0 default blocking, 1 tiny blocks (many blocks: threads take whole
// blocks), 2 scalar transforms (the scalar tier), 3 no pool.
struct Mode {
  int64_t block_tiles = 0;
  ep::IsaTier isa = ep::cpu_isa_tier();
};
Mode mode_of(int mode, int64_t tiny_blocks) {
  Mode m;
  if (mode == 1) m.block_tiles = tiny_blocks;
  if (mode == 2) m.isa = ep::IsaTier::kScalar;
  return m;
}

// Returns max |y - ref| / rms(ref) of the Winograd path on this case (or -1 when the shape is empty).
double winograd_error(const Case& c, std::mt19937& rng, ep::ThreadPool* pool, const std::string& what,
                      const Mode& mode = Mode()) {
  const ConvShape s = shape_of(c);
  if (s.g.out[1] <= 0 || s.g.out[2] <= 0) return -1;
  EXPECT_TRUE(winograd_applies(s)) << what;
  auto x = random_floats(rng, s.N * s.C * s.g.in_size());
  auto w = random_floats(rng, s.M * s.C * 9);
  auto b = random_floats(rng, s.M);
  const int64_t ny = s.N * s.M * s.g.out_size();
  std::vector<float> ref(ny), y(ny, 123.f);
  conv_naive<float>(s, x.data(), w.data(), c.bias ? b.data() : nullptr, ref.data());
  ConvWeights<float> cw;
  cw.prepare(Dims{s.M, s.C, 3, 3}, 1, w, true);
  EXPECT_TRUE(cw.wino != nullptr) << what;
  if (mode.block_tiles > 0) {
    winograd_conv(s, x.data(), *cw.wino->acquire(cw.packed[0], s.M, s.C), c.bias ? b.data() : nullptr, y.data(), pool,
                  mode.isa, mode.block_tiles);
  } else {
    const ConvConfig cfg(ConvPath::kWinograd, mode.isa);
    EXPECT_EQ(conv_chosen_path(s, cw, cfg, nullptr, 1), ConvPath::kWinograd) << what;
    conv_forward<float>(s, x.data(), cw, c.bias ? b.data() : nullptr, y.data(), pool, cfg);
  }
  double ss = 0, err = 0;
  for (int64_t i = 0; i < ny; ++i) {
    ss += double(ref[i]) * ref[i];
    err = std::max(err, std::fabs(double(y[i]) - ref[i]));
    if (!std::isfinite(y[i])) {
      ADD_FAILURE() << what << ": non-finite at " << i;
      return 1;
    }
  }
  const double rms = std::sqrt(ss / double(ny));
  return err / std::max(rms, 1e-6);
}

constexpr double kTol = 2e-4;

}  // namespace

TEST(ConvWinograd, MatchesNaiveOnRandomShapes) {
  std::mt19937 rng(11);
  ep::ThreadPool pool(2);
  std::uniform_int_distribution<int> pick(0, 1000);
  double worst = 0;
  int ran = 0;
  for (int iter = 0; iter < 40; ++iter) {
    Case c;
    c.N = 1 + iter % 2;
    c.C = 1 + pick(rng) % 37;
    c.M = 1 + pick(rng) % 29;
    c.H = 1 + pick(rng) % 27;
    c.W = 1 + pick(rng) % 41;
    c.pt = pick(rng) % 3;
    c.pl = pick(rng) % 3;
    c.pb = pick(rng) % 3;
    c.pr = pick(rng) % 3;
    c.bias = iter % 3 != 0;
    const std::string what = "iter " + std::to_string(iter) + " N" + std::to_string(c.N) + " C" +
                             std::to_string(c.C) + " M" + std::to_string(c.M) + " " + std::to_string(c.H) + "x" +
                             std::to_string(c.W);
    for (int mode = 0; mode < 3; ++mode) {
      // 0: default blocking, 1: tiny blocks (many blocks: threads take whole blocks), 2: scalar transforms.
      const double e = winograd_error(c, rng, &pool, what + " mode " + std::to_string(mode), mode_of(mode, 8));
      if (e < 0) continue;
      ++ran;
      worst = std::max(worst, e);
      EXPECT_LT(e, kTol) << what << " mode " << mode;
    }
  }
  EXPECT_GT(ran, 90);
  std::printf("[ConvWinograd] random shapes: max |err| / rms(ref) = %.3g\n", worst);
}

TEST(ConvWinograd, LargerShapesAllThreadingModes) {
  std::mt19937 rng(5);
  ep::ThreadPool pool(2);
  const Case cases[] = {
      {2, 64, 48, 19, 23, 1, 1, 1, 1, true},   // tails in both directions, batch 2
      {1, 40, 72, 37, 70, 2, 0, 0, 2, false},  // several 8-tile groups per row, asymmetric pads
      {1, 128, 32, 14, 14, 1, 1, 1, 1, true},  // 4 tiles per row
      {1, 128, 128, 13, 14, 1, 1, 1, 1, true}, // one block, big enough to split its phases over threads
      {1, 260, 20, 9, 10, 0, 1, 2, 1, true},   // > 256 input channels: two K blocks in the packed weights
      {1, 64, 3, 96, 80, 1, 1, 1, 1, true},    // few outputs on a larger plane (a last conv to an image)
      {1, 33, 1, 30, 45, 1, 1, 1, 1, false},   // one output map, odd sizes
  };
  double worst = 0;
  // Threads split whole blocks (second case) or each block's phases (last case); mode 3 runs without a pool.
  for (const Case& c : cases) {
    for (int mode = 0; mode < 4; ++mode) {
      ep::ThreadPool* p = mode == 3 ? nullptr : &pool;
      const double e =
          winograd_error(c, rng, p, "C" + std::to_string(c.C) + " mode " + std::to_string(mode), mode_of(mode, 16));
      worst = std::max(worst, e);
      EXPECT_LT(e, kTol) << "C" << c.C << " M" << c.M << " mode " << mode;
    }
  }
  std::printf("[ConvWinograd] larger shapes: max |err| / rms(ref) = %.3g\n", worst);
}

// Blocks split over 2 threads come in a multiple of 2, their rows spread evenly (sizes rows_per_block
// and one fewer), so each thread gets an equal share where the rows allow; one thread keeps the
// L2-sized blocks.
TEST(ConvWinograd, BlocksSpreadEvenlyOverThreads) {
  const ConvShape s = shape_of(Case{1, 64, 64, 56, 56, 1, 1, 1, 1, true});  // 14 tile rows of 14 tiles
  const WinogradPlan two = winograd_plan(s, 2);
  ASSERT_TRUE(two.split_blocks);
  EXPECT_EQ(two.nblocks % 2, 0);
  int64_t rows[2] = {0, 0}, covered = 0;
  for (int64_t b = 0; b < two.nblocks; ++b) {
    const int64_t r0 = b * two.total_rows / two.nblocks, r1 = (b + 1) * two.total_rows / two.nblocks;
    EXPECT_EQ(r0, covered);
    EXPECT_TRUE(r1 - r0 == two.rows_per_block || r1 - r0 == two.rows_per_block - 1) << "block " << b;
    rows[b < two.nblocks / 2 ? 0 : 1] += r1 - r0;
    covered = r1;
  }
  EXPECT_EQ(covered, two.total_rows);
  EXPECT_EQ(rows[0], rows[1]);  // each end of the block range: 7 rows
  const WinogradPlan one = winograd_plan(s, 1);
  EXPECT_EQ(one.nblocks, (one.total_rows + one.rows_per_block - 1) / one.rows_per_block);
}

// Convs with few tiles but many channels (DenseNet's 128->32 at 14x14 and 7x7: 16 and 4 tiles, ~0.17 ms
// on one thread) split over the pool: their products stream all 36 weight matrices however few tiles
// there are. A conv of few channels and tiles stays on the calling thread.
TEST(ConvWinograd, FewTilesManyChannelsUseThePool) {
  for (int64_t hw : {14, 7}) {
    const ConvShape s = shape_of(Case{1, 128, 32, hw, hw, 1, 1, 1, 1, true});
    EXPECT_EQ(winograd_plan(s, 2).threads, 2) << hw << "x" << hw;
    EXPECT_EQ(winograd_plan(s, 1).threads, 1) << hw << "x" << hw;
  }
  EXPECT_EQ(winograd_plan(shape_of(Case{1, 16, 16, 8, 8, 1, 1, 1, 1, true}), 2).threads, 1);
}

// The gate is a time (~50 us of one thread), so the AVX-512 tier, which does the work in about half of
// it, sets it twice as high: the keyword-spotting CNN's 16->16 @76x32 (2.0M) splits at the AVX2 tier and
// stays on the calling thread at AVX-512 (and AMX, whose Winograd runs the AVX-512 code).
TEST(ConvWinograd, ThreadGateFollowsTheTier) {
  const ConvShape s = shape_of(Case{1, 16, 16, 76, 32, 1, 1, 1, 1, true});
  EXPECT_EQ(winograd_plan(s, 2, ep::IsaTier::kAvx2).threads, 2);
  EXPECT_EQ(winograd_plan(s, 2, ep::IsaTier::kAvx512).threads, 1);
  EXPECT_EQ(winograd_plan(s, 2, ep::IsaTier::kAmx).threads, 1);
  // DenseNet's 128->32 @14x14 (2.6M) splits at every tier.
  const ConvShape d = shape_of(Case{1, 128, 32, 14, 14, 1, 1, 1, 1, true});
  for (ep::IsaTier t : {ep::IsaTier::kAvx2, ep::IsaTier::kAvx512, ep::IsaTier::kAmx})
    EXPECT_EQ(winograd_plan(d, 2, t).threads, 2) << ep::isa_tier_name(t);
}

TEST(ConvWinograd, PathSelection) {
  Case c{1, 64, 64, 56, 56, 1, 1, 1, 1, true};
  ConvShape s = shape_of(c);
  EXPECT_TRUE(conv_path_applies(s, ConvPath::kWinograd));
  EXPECT_TRUE(winograd_preferred(s));
  ConvShape strided = s;
  strided.g.s[2] = 2;
  EXPECT_FALSE(conv_path_applies(strided, ConvPath::kWinograd));
  ConvShape dilated = s;
  dilated.g.d[1] = 2;
  EXPECT_FALSE(conv_path_applies(dilated, ConvPath::kWinograd));
  ConvShape grouped = s;
  grouped.group = 2;
  EXPECT_FALSE(conv_path_applies(grouped, ConvPath::kWinograd));
  // kAuto rule: small outputs, few channels, or many channels on very few tiles stay on im2col.
  auto preferred = [](int64_t n, int64_t c, int64_t m, int64_t h, int64_t w) {
    return winograd_preferred(shape_of(Case{n, c, m, h, w, 1, 1, 1, 1, true}));
  };
  EXPECT_TRUE(preferred(1, 128, 32, 7, 7));
  EXPECT_FALSE(preferred(1, 512, 512, 7, 7));
  EXPECT_TRUE(preferred(2, 512, 512, 7, 7));
  EXPECT_FALSE(preferred(1, 64, 64, 5, 5));
  EXPECT_FALSE(preferred(1, 3, 64, 224, 224));
  // Few outputs with 32+ input channels go to Winograd (the GEMM paths would pack 9 C values a pixel for
  // at most 7 products each); with fewer input channels they stay on the GEMM.
  EXPECT_TRUE(preferred(1, 32, 3, 512, 512));
  EXPECT_TRUE(preferred(1, 256, 1, 64, 64));
  EXPECT_FALSE(preferred(1, 16, 3, 256, 256));
  EXPECT_FALSE(preferred(1, 64, 3, 5, 5));
  // Weights prepared without the hint (or with a non-3x3 shape) are not transformed, and a forced
  // kWinograd then takes the kAuto choice.
  std::mt19937 rng(3);
  auto w = random_floats(rng, 8 * 4 * 9);
  ConvWeights<float> plain;
  plain.prepare(Dims{8, 4, 3, 3}, 1, w);
  EXPECT_TRUE(plain.wino == nullptr);
  ConvWeights<float> five;
  five.prepare(Dims{8, 4, 1, 9}, 1, w, true);
  EXPECT_TRUE(five.wino == nullptr);
  Case small{1, 4, 8, 6, 7, 1, 1, 1, 1, true};
  ConvShape ss = shape_of(small);
  auto x = random_floats(rng, 4 * 6 * 7);
  std::vector<float> ref(8 * ss.g.out_size()), y(ref.size());
  conv_naive<float>(ss, x.data(), w.data(), w.data(), ref.data());
  EXPECT_NE(conv_chosen_path(ss, plain, ConvConfig(ConvPath::kWinograd), nullptr, 1), ConvPath::kWinograd);
  conv_forward<float>(ss, x.data(), plain, w.data(), y.data(), nullptr, ConvPath::kWinograd);
  for (size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i])));
}

TEST(ConvWinograd, ConvKernelUsesIt) {
  // Through the Conv kernel (W an input, prepared per run with the stride-1 hint): 16 -> 16 at 10x10 is
  // over the kAuto threshold.
  std::mt19937 rng(9);
  Case c{1, 16, 16, 10, 10, 1, 1, 1, 1, true};
  ConvShape s = shape_of(c);
  ASSERT_TRUE(winograd_preferred(s));
  auto x = random_floats(rng, 16 * 100);
  auto w = random_floats(rng, 16 * 16 * 9);
  auto b = random_floats(rng, 16);
  std::vector<float> ref(16 * 100);
  conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
  nxrt::testing::KernelRun run;
  run.op_type = "Conv";
  run.opset = 11;
  run.attributes = {nxrt::testing::attr_ints("pads", {1, 1, 1, 1})};
  run.inputs = {Tensor::from_vector<float>(DataType::kFloat, {1, 16, 10, 10}, x),
                Tensor::from_vector<float>(DataType::kFloat, {16, 16, 3, 3}, w),
                Tensor::from_vector<float>(DataType::kFloat, {16}, b)};
  auto out = nxrt::testing::run_kernel(run);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& t = out.value()[0].tensor();
  ASSERT_EQ(t.numel(), 1600);
  double ss = 0, err = 0;
  for (int64_t i = 0; i < 1600; ++i) {
    ss += double(ref[i]) * ref[i];
    err = std::max(err, std::fabs(double(t.data<float>()[i]) - ref[i]));
  }
  EXPECT_LT(err / std::sqrt(ss / 1600), kTol);
}

// The transforms' code at every tier this CPU runs (WinogradPlan::transforms: scalar, AVX2, AVX-512)
// against the direct definition on random shapes (narrow and wide rows, so groups of 8 / 16 tiles span
// tile rows, batches and the image's edges), with the post the output transform applies (residual,
// Relu / Clip / LeakyRelu), and the two vector variants bit-identical on the same products (the same
// plan, only the transforms swapped). y is guarded on both sides (masked stores
// must stay inside it). Tiers above the CPU's are named in the output as not run.
TEST(ConvWinograd, TransformsAtEveryTierMatchNaiveAndVectorVariantsBitIdentical) {
  using T = WinogradPlan::Transforms;
  const ep::IsaTier cpu = ep::cpu_isa_tier();
  const char* names[] = {"scalar", "avx2", "avx512"};
  std::vector<T> vec_transforms;
  for (int t = 1; t <= 2; ++t) {
    if (static_cast<int>(cpu) >= t) {
      vec_transforms.push_back(static_cast<T>(t));
    } else {
      std::printf("[ SKIPPED  ] Winograd transforms %s: not on this CPU, not checked\n", names[t]);
    }
  }
  // The plan takes its transforms from the tier.
  {
    const ConvShape s = shape_of(Case{1, 8, 8, 9, 9, 1, 1, 1, 1, true});
    EXPECT_EQ(winograd_plan(s, 1, ep::IsaTier::kScalar).transforms, T::kScalar);
    if (cpu >= ep::IsaTier::kAvx2) {
      EXPECT_EQ(winograd_plan(s, 1, ep::IsaTier::kAvx2).transforms, T::kAvx2);
    }
    if (cpu >= ep::IsaTier::kAvx512) {
      EXPECT_EQ(winograd_plan(s, 1, ep::IsaTier::kAvx512).transforms, T::kAvx512);
    }
    EXPECT_EQ(winograd_plan(s, 1, ep::IsaTier::kAmx).transforms, cpu >= ep::IsaTier::kAvx512 ? T::kAvx512
                                                                   : cpu >= ep::IsaTier::kAvx2 ? T::kAvx2
                                                                                               : T::kScalar);
  }
  std::mt19937 rng(2024);
  std::uniform_int_distribution<int> pick(0, 1000);
  ep::ThreadPool pool(2);
  constexpr int64_t kGuard = 64;
  constexpr float kSentinel = 123.f;
  int ran = 0, compared = 0;
  double worst = 0;
  for (int iter = 0; iter < 36; ++iter) {
    Case c;
    c.N = 1 + iter % 3 / 2;
    c.C = 1 + pick(rng) % 40;
    c.M = 1 + pick(rng) % 40;
    c.H = 1 + pick(rng) % 30;
    c.W = iter % 4 == 0 ? 1 + pick(rng) % 6 : 1 + pick(rng) % (iter % 4 == 1 ? 120 : 60);
    c.pt = pick(rng) % 3;
    c.pl = pick(rng) % 3;
    c.pb = pick(rng) % 3;
    c.pr = pick(rng) % 3;
    c.bias = iter % 3 != 1;
    const ConvShape s = shape_of(c);
    if (s.g.out[1] <= 0 || s.g.out[2] <= 0) continue;
    const std::string what = "iter " + std::to_string(iter) + " N" + std::to_string(c.N) + " C" + std::to_string(c.C) +
                             " M" + std::to_string(c.M) + " " + std::to_string(c.H) + "x" + std::to_string(c.W) +
                             " pads " + std::to_string(c.pt) + std::to_string(c.pl) + std::to_string(c.pb) +
                             std::to_string(c.pr) + " post " + std::to_string(iter % 5);
    const auto x = random_floats(rng, s.N * s.C * s.g.in_size());
    const auto w = random_floats(rng, s.M * s.C * 9);
    const auto b = random_floats(rng, s.M);
    const float* bias = c.bias ? b.data() : nullptr;
    const int64_t ny = s.N * s.M * s.g.out_size();
    std::vector<float> ref(static_cast<size_t>(ny));
    conv_naive<float>(s, x.data(), w.data(), bias, ref.data());
    // The post (FusedConv's epilogue) the output transform applies: none, Relu / LeakyRelu with a
    // residual, Clip, LeakyRelu; the reference gets it per element.
    const auto res = random_floats(rng, ny);
    WinogradPost post;
    const Activation acts[] = {Activation::kNone, Activation::kRelu, Activation::kClip, Activation::kLeakyRelu,
                               Activation::kLeakyRelu};
    post.act = acts[iter % 5];
    post.residual = iter % 5 == 1 || iter % 5 == 3 ? res.data() : nullptr;
    post.act_a = post.act == Activation::kClip ? -0.5f : 0.1f;
    post.act_b = 0.5f;
    // Errors are measured against the conv's own scale (the activations are 1-Lipschitz; Clip and Relu
    // shrink the output's rms, not the transforms' error).
    double conv_ss = 0;
    for (float v : ref) conv_ss += double(v) * v;
    const double conv_rms = std::max(std::sqrt(conv_ss / double(ny)), 1e-6);
    for (int64_t i = 0; i < ny; ++i) {
      float v = ref[static_cast<size_t>(i)];
      if (post.residual) v += post.residual[i];
      ref[static_cast<size_t>(i)] = apply_activation(post.act, v, post.act_a, post.act_b);
    }
    ConvWeights<float> cw;
    cw.prepare(Dims{s.M, s.C, 3, 3}, 1, w, true);
    ASSERT_TRUE(cw.wino != nullptr) << what;
    const auto wino = cw.wino->acquire(cw.packed[0], s.M, s.C);
    // Runs `plan` (on the pool or not); returns y without its guards, failing on a touched guard.
    auto run = [&](const WinogradPlan& plan, ep::ThreadPool* p, const std::string& how) {
      std::vector<float> buf(static_cast<size_t>(ny + 2 * kGuard), kSentinel);
      winograd_conv(plan, x.data(), *wino, bias, buf.data() + kGuard, p, ep::SlotMemory{}, &post);
      for (int64_t i = 0; i < kGuard; ++i) {
        EXPECT_EQ(buf[static_cast<size_t>(i)], kSentinel) << what << " " << how << ": wrote before y";
        EXPECT_EQ(buf[static_cast<size_t>(ny + kGuard + i)], kSentinel) << what << " " << how << ": wrote past y";
      }
      return std::vector<float>(buf.begin() + kGuard, buf.end() - kGuard);
    };
    auto error = [&](const std::vector<float>& y) {
      double err = 0;
      for (int64_t i = 0; i < ny; ++i) err = std::isfinite(y[i]) ? std::max(err, std::fabs(double(y[i]) - ref[i])) : 1e9;
      return err / conv_rms;
    };
    // Each tier's own plan (its GEMM kernels and transforms), default blocks on the pool and tiny blocks
    // without it, against the reference.
    for (int ti = 0; ti <= std::min(static_cast<int>(cpu), 2); ++ti) {
      const auto tier = static_cast<ep::IsaTier>(ti);
      for (int mode = 0; mode < 2; ++mode) {
        ep::ThreadPool* p = mode == 0 ? &pool : nullptr;
        const WinogradPlan plan = winograd_plan(s, p ? p->num_threads() : 1, tier, mode == 0 ? 0 : 8);
        const double e = error(run(plan, p, names[ti]));
        worst = std::max(worst, e);
        EXPECT_LT(e, kTol) << what << " tier " << names[ti] << " mode " << mode;
        ++ran;
      }
    }
    // The vector transforms on one plan (the CPU's GEMM kernels): bit-identical.
    if (vec_transforms.size() < 2) continue;
    for (int mode = 0; mode < 2; ++mode) {
      ep::ThreadPool* p = mode == 0 ? &pool : nullptr;
      WinogradPlan plan = winograd_plan(s, p ? p->num_threads() : 1, cpu, mode == 0 ? 0 : 8);
      std::vector<std::vector<float>> ys;
      for (T t : vec_transforms) {
        plan.transforms = t;
        ys.push_back(run(plan, p, names[static_cast<int>(t)]));
      }
      for (size_t k = 1; k < ys.size(); ++k) {
        for (int64_t i = 0; i < ny; ++i) {
          uint32_t a, bb;
          std::memcpy(&a, &ys[0][static_cast<size_t>(i)], 4);
          std::memcpy(&bb, &ys[k][static_cast<size_t>(i)], 4);
          ASSERT_EQ(a, bb) << what << " mode " << mode << ": " << names[static_cast<int>(vec_transforms[k])]
                           << " differs from avx2 at " << i;
        }
      }
      ++compared;
    }
  }
  EXPECT_GT(ran, 60);
  std::printf("[ CHECKED  ] Winograd transforms: %d runs against the reference (max |err| / rms(ref) = %.3g), %d "
              "AVX2 / AVX-512 bit comparisons\n",
              ran, worst, compared);
}

// The transformed filters: made from raw weights (winograd_prepare) and from the conv's packed GEMM
// weights (WinogradCache, which reads the taps out of the PackedA layout, a filter's 9 taps sometimes
// straddling two K blocks) they are the same bits, and each value is G g G^T of its filter (computed
// here in double), at (m, c) of its point's PackedA layout, with the padding rows zero. Shapes: M not a
// multiple of the panel height, C past one K block of the packed operands (256) and past it times 9.
TEST(ConvWinograd, TransformedFiltersFromRawAndPackedWeightsAgree) {
  const double G[6][3] = {{1.0 / 4, 0, 0},           {-1.0 / 6, -1.0 / 6, -1.0 / 6}, {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                          {1.0 / 24, 1.0 / 12, 1.0 / 6}, {1.0 / 24, -1.0 / 12, 1.0 / 6}, {0, 0, 1}};
  std::mt19937 rng(11);
  for (auto [M, C] : {std::pair<int64_t, int64_t>{7, 5}, {13, 300}, {32, 29}, {6, 257}}) {
    const std::vector<float> w = random_floats(rng, M * C * 9);
    WinogradWeights raw;
    winograd_prepare(M, C, w.data(), &raw);
    const PackedA<float> packed = pack_a<float>(false, M, C * 9, w.data(), C * 9);
    WinogradCache cache;
    const std::shared_ptr<const WinogradWeights> from_packed = cache.acquire(packed, M, C);
    ASSERT_EQ(raw.u.size(), 36u);
    ASSERT_EQ(from_packed->u.size(), 36u);
    const int64_t R = kGemmMR, m_padded = (M + R - 1) / R * R;
    for (int xi = 0; xi < 36; ++xi) {
      const PackedA<float>& a = raw.u[static_cast<size_t>(xi)];
      const PackedA<float>& b = from_packed->u[static_cast<size_t>(xi)];
      ASSERT_EQ(a.m_padded, m_padded);
      ASSERT_EQ(a.data.size(), static_cast<size_t>(m_padded * C));
      ASSERT_EQ(b.data.size(), a.data.size());
      ASSERT_EQ(std::memcmp(a.data.data(), b.data.data(), a.data.size() * sizeof(float)), 0) << M << "x" << C << " point " << xi;
      const int i = xi / 6, j = xi % 6;
      for (int64_t k0 = 0; k0 < C; k0 += kGemmKC) {
        const int64_t kc = std::min(kGemmKC, C - k0);
        for (int64_t m = 0; m < m_padded; ++m)
          for (int64_t c = k0; c < k0 + kc; ++c) {
            double want = 0;
            if (m < M) {
              const float* g = w.data() + (m * C + c) * 9;
              for (int r = 0; r < 3; ++r)
                for (int s = 0; s < 3; ++s) want += G[i][r] * g[r * 3 + s] * G[j][s];
            }
            const float got = a.data[static_cast<size_t>(k0 * m_padded + (m / R) * R * kc + (c - k0) * R + m % R)];
            ASSERT_NEAR(got, want, 1e-6 * (1 + std::fabs(want))) << M << "x" << C << " point " << xi << " m " << m << " c " << c;
          }
      }
    }
  }
}
