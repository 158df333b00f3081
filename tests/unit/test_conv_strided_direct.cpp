// The strided direct conv path (ops/conv/strided_direct.h) against conv_naive on random shapes:
// strides 1 to 3, 1x1 to 7x7 kernels, dilation, pads at either end, channel counts off the 16-lane
// blocks (input and output; under 16 input channels, blocks of all of them), batches, 1 and 2 threads, with the bias and FusedConv's residual and
// activations in its store; and where kAuto takes it. The path needs AVX-512: on other CPUs the test
// says so and checks only that the path does not apply.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "ops/conv/conv_engine.h"
#include "ops/conv/strided_direct.h"

using namespace nxrt;
using namespace nxrt::ops;
using nxrt::testing::random_floats;

namespace {

ConvShape shape_of(int64_t N, int64_t C, int64_t M, int64_t H, int64_t W, int64_t k, int64_t stride, int64_t dil,
                   int64_t pt, int64_t pb) {
  ConvShape s;
  s.N = N, s.C = C, s.M = M, s.group = 1;
  WindowAttrs a;
  a.strides = {stride, stride};
  a.dilations = {dil, dil};
  a.pads = {pt, pt, pb, pb};
  EXPECT_TRUE(forward_geometry(a, Dims{H, W}, Dims{k, k}, &s.g).ok());
  return s;
}

// Max error relative to 1 + |ref| of the forced path against conv_naive; post_mode 0: bias only, 1:
// residual + Relu, 2: Clip(-0.5, 0.5), 3: residual + LeakyRelu(0.1).
double strided_error(const ConvShape& s, int post_mode, ep::ThreadPool* pool, std::mt19937& rng) {
  const int64_t kvol = s.g.kvol();
  auto x = random_floats(rng, s.N * s.C * s.g.in_size());
  auto w = random_floats(rng, s.M * s.C * kvol);
  auto b = random_floats(rng, s.M);
  const int64_t ny = s.N * s.M * s.g.out_size();
  std::vector<float> ref(static_cast<size_t>(ny)), y(static_cast<size_t>(ny), 123.f);
  conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
  auto res = random_floats(rng, ny);
  ConvPost post;
  if (post_mode == 1 || post_mode == 3) post.residual = res.data();
  if (post_mode == 1) post.act = Activation::kRelu;
  if (post_mode == 2) post.act = Activation::kClip, post.act_a = -0.5f, post.act_b = 0.5f;
  if (post_mode == 3) post.act = Activation::kLeakyRelu, post.act_a = 0.1f;
  for (int64_t i = 0; i < ny; ++i) {
    float v = ref[i] + (post.residual ? res[i] : 0.f);
    ref[i] = apply_activation(post.act, v, post.act_a, post.act_b);
  }
  ConvWeights<float> cw;
  cw.prepare(Dims{s.M, s.C, s.g.k[1], s.g.k[2]}, 1, w, false);
  const bool applied = conv_forward<float>(s, x.data(), cw, b.data(), y.data(), pool,
                                           ConvConfig(ConvPath::kStridedDirect), post_mode ? &post : nullptr);
  EXPECT_TRUE(applied || !post_mode);
  double err = 0;
  for (int64_t i = 0; i < ny; ++i) {
    if (!std::isfinite(y[i])) return 1e9;
    err = std::max(err, std::fabs(double(y[i]) - ref[i]) / (1.0 + std::fabs(ref[i])));
  }
  return err;
}

bool have_avx512() { return ep::cpu_isa_tier() >= ep::IsaTier::kAvx512; }

}  // namespace

TEST(ConvStridedDirect, MatchesNaiveOnRandomShapes) {
  std::mt19937 rng(7);
  if (!have_avx512()) {
    std::printf("[ note ] no AVX-512 on this CPU: the strided direct path does not apply, not run\n");
    EXPECT_FALSE(strided_direct_applies(shape_of(1, 32, 32, 16, 16, 3, 2, 1, 1, 1), ep::cpu_isa_tier()));
    return;
  }
  ep::ThreadPool pool(2);
  std::uniform_int_distribution<int> pick(0, 1 << 20);
  for (int trial = 0; trial < 40; ++trial) {
    const int64_t k = std::vector<int64_t>{1, 3, 3, 5, 7}[pick(rng) % 5];
    const int64_t stride = std::vector<int64_t>{1, 2, 2, 3}[pick(rng) % 4];
    const int64_t dil = k > 1 && pick(rng) % 5 == 0 ? 2 : 1;
    const int64_t C = 1 + pick(rng) % 40, M = 1 + pick(rng) % 50, N = 1 + pick(rng) % 2;
    const int64_t pt = pick(rng) % k, pb = pick(rng) % k;
    const int64_t ek = (k - 1) * dil + 1;
    const int64_t H = ek + pick(rng) % 30, W = ek + pick(rng) % 40;
    const ConvShape s = shape_of(N, C, M, H, W, k, stride, dil, pt, pb);
    ASSERT_TRUE(strided_direct_applies(s, ep::IsaTier::kAvx512));
    const int post_mode = trial % 4;
    const double err = strided_error(s, post_mode, trial % 2 ? &pool : nullptr, rng);
    EXPECT_LT(err, 1e-5 * std::sqrt(double(C * k * k))) << "trial " << trial << " C" << C << " M" << M << " " << H
                                                         << "x" << W << " k" << k << " s" << stride << " d" << dil
                                                         << " pads " << pt << "," << pb << " post " << post_mode;
  }
}

namespace {

// Fixed shapes against conv_naive: each with a post mode (see strided_error), on 2 threads or none, and
// a tolerance.
struct FixedCase {
  ConvShape s;
  int post_mode;
  bool threaded;
  double tol;
};
void expect_fixed_cases(uint32_t seed, const std::vector<FixedCase>& cases) {
  std::mt19937 rng(seed);
  ep::ThreadPool pool(2);
  for (size_t i = 0; i < cases.size(); ++i) {
    const FixedCase& c = cases[i];
    EXPECT_LT(strided_error(c.s, c.post_mode, c.threaded ? &pool : nullptr, rng), c.tol) << "case " << i;
  }
}

}  // namespace

// ResNet-50's 3x3/2 convs (28 and 14 pixel rows: tiles of 14) and a 7-wide output (tiles of 3 blocks).
TEST(ConvStridedDirect, ResNetShapes) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  expect_fixed_cases(11, {{shape_of(1, 128, 128, 56, 56, 3, 2, 1, 1, 1), 1, true, 2e-4},
                          {shape_of(1, 256, 256, 28, 28, 3, 2, 1, 1, 1), 0, false, 3e-4},
                          {shape_of(1, 64, 80, 14, 14, 3, 2, 1, 1, 1), 3, true, 2e-4}});
}

// Under 16 input channels a block holds all of them ([Hp][Wp][C], no zero lanes): stems of 3 color
// planes (AlexNet's 11x11/4, a 7x7/2 with pads, a 3x3/2), 1 and 15 channels, stride 4 with ragged edges.
TEST(ConvStridedDirect, FewInputChannels) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  expect_fixed_cases(13, {{shape_of(1, 3, 96, 67, 67, 11, 4, 1, 0, 0), 1, true, 2e-4},
                          {shape_of(2, 3, 64, 45, 38, 7, 2, 1, 3, 3), 0, false, 2e-4},
                          {shape_of(1, 3, 24, 33, 33, 3, 2, 1, 1, 1), 2, true, 2e-4},
                          {shape_of(1, 1, 17, 29, 31, 5, 4, 1, 2, 1), 3, false, 2e-4},
                          {shape_of(1, 15, 40, 30, 26, 3, 4, 2, 1, 2), 1, true, 2e-4}});
}

// Where the weights are 4x the padded input or more the work items go group-major (the threads split
// the output channels): ResNet-50's 3x3/2 512->512 @14x14 and its 3x3 512->512 @7x7, and a ragged
// channel count with 3-block groups; row-major where the input is the larger (3x3/2 128->128 @56x56).
// Both orders against conv_naive on 2 threads and none.
TEST(ConvStridedDirect, GroupMajorOrder) {
  const ConvShape down = shape_of(1, 512, 512, 14, 14, 3, 2, 1, 1, 1);
  const ConvShape same = shape_of(1, 512, 512, 7, 7, 3, 1, 1, 1, 1);
  const ConvShape ragged = shape_of(2, 70, 150, 9, 7, 3, 1, 1, 1, 1);
  const ConvShape wide = shape_of(1, 128, 128, 56, 56, 3, 2, 1, 1, 1);
  EXPECT_TRUE(strided_direct_plan(down).group_major);
  EXPECT_TRUE(strided_direct_plan(same).group_major);
  EXPECT_TRUE(strided_direct_plan(ragged).group_major);
  EXPECT_EQ(strided_direct_plan(ragged).group, 3);
  EXPECT_FALSE(strided_direct_plan(wide).group_major);
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512 on this CPU";
  expect_fixed_cases(17, {{down, 1, true, 3e-4},
                          {same, 0, true, 3e-4},
                          {same, 3, false, 3e-4},
                          {ragged, 2, true, 2e-4},
                          {ragged, 1, false, 2e-4}});
}

// kAuto takes the path for strided convs with 16+ input and output channels and a kernel over 1x1,
// and leaves 1x1/2 convs and stride-2 stems (3 channels) to the GEMM paths, but takes a stride-4 stem;
// with stride 1 only 3x3 convs on planes of 8x8 or less, at 2+ threads; not below the AVX-512 tier.
TEST(ConvStridedDirect, AutoChoice) {
  const ConvShape s3 = shape_of(1, 128, 128, 56, 56, 3, 2, 1, 1, 1);
  const ConvShape s1 = shape_of(1, 256, 512, 56, 56, 1, 2, 1, 0, 0);
  const ConvShape stem = shape_of(1, 3, 64, 224, 224, 7, 2, 1, 3, 3);
  const ConvShape unit = shape_of(1, 64, 64, 56, 56, 3, 1, 1, 1, 1);
  const ConvShape alex = shape_of(1, 3, 96, 227, 227, 11, 4, 1, 0, 0);
  EXPECT_EQ(strided_direct_preferred(alex, ep::IsaTier::kAvx512), have_avx512());
  EXPECT_EQ(strided_direct_preferred(s3, ep::IsaTier::kAvx512), have_avx512());
  EXPECT_FALSE(strided_direct_preferred(s3, ep::IsaTier::kAvx2));
  EXPECT_FALSE(strided_direct_preferred(s1, ep::IsaTier::kAvx512));
  EXPECT_FALSE(strided_direct_preferred(stem, ep::IsaTier::kAvx512));
  EXPECT_FALSE(strided_direct_preferred(unit, ep::IsaTier::kAvx512, 1));
  EXPECT_FALSE(strided_direct_preferred(unit, ep::IsaTier::kAvx512, 2));
  const ConvShape small = shape_of(1, 512, 512, 7, 7, 3, 1, 1, 1, 1);
  const ConvShape small_5x5 = shape_of(1, 64, 64, 7, 7, 5, 1, 1, 2, 2);
  EXPECT_FALSE(strided_direct_preferred(small, ep::IsaTier::kAvx512, 1));
  EXPECT_EQ(strided_direct_preferred(small, ep::IsaTier::kAvx512, 2), have_avx512());
  EXPECT_FALSE(strided_direct_preferred(small, ep::IsaTier::kAvx2, 2));
  EXPECT_FALSE(strided_direct_preferred(small_5x5, ep::IsaTier::kAvx512, 2));
  if (have_avx512()) {
    ConvWeights<float> cs;
    cs.prepare(Dims{512, 512, 3, 3}, 1, std::vector<float>(512 * 512 * 9, 0.01f), false);
    const ConvConfig auto512(ConvPath::kAuto, ep::IsaTier::kAvx512);
    EXPECT_EQ(conv_chosen_path<float>(small, cs, auto512, nullptr, 2), ConvPath::kStridedDirect);
    EXPECT_NE(conv_chosen_path<float>(small, cs, auto512, nullptr, 1), ConvPath::kStridedDirect);
  }
  if (have_avx512()) {
    ConvWeights<float> cw;
    cw.prepare(Dims{128, 128, 3, 3}, 1, std::vector<float>(128 * 128 * 9, 0.01f), false);
    EXPECT_EQ(conv_chosen_path<float>(s3, cw, ConvConfig(ConvPath::kAuto, ep::IsaTier::kAvx512), nullptr, 1), ConvPath::kStridedDirect);
    ConvConfig skip(ConvPath::kAuto, ep::IsaTier::kAvx512);
    skip.auto_skips = 1u << static_cast<int>(ConvPath::kStridedDirect);
    EXPECT_NE(conv_chosen_path<float>(s3, cw, skip, nullptr, 1), ConvPath::kStridedDirect);
  }
}
