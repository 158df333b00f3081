// Conv / pooling family: GEMM vs reference, every conv path vs the direct definition, pooling corners.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernel_test_util.h"
#include "ops/conv_gemm.h"
#include "ops/conv_impl.h"

using namespace nxrt;
using namespace nxrt::ops;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

std::vector<float> random_vec(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, float tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tol * (1.f + std::fabs(b[i]))) << what << " at " << i;
  }
}

std::vector<float> values(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace

TEST(OpsNnGemm, MatchesReferenceOnOddShapes) {
  std::mt19937 rng(1);
  ep::ThreadPool pool(3);
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {6, 16, 256}, {13, 37, 300}, {65, 250, 70}, {3, 600, 9}};
  for (auto& sh : shapes) {
    const int64_t M = sh[0], N = sh[1], K = sh[2];
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        auto A = random_vec(rng, M * K), B = random_vec(rng, K * N), C0 = random_vec(rng, M * N);
        auto C1 = C0;
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        convgemm::gemm<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.f, C0.data(), N, &pool);
        convgemm::gemm_reference<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.f, C1.data(), N);
        expect_close(C0, C1, 1e-4f, "gemm " + std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
      }
  }
}

TEST(OpsNnConv, PathsMatchNaiveOnRandomShapes) {
  std::mt19937 rng(7);
  ep::ThreadPool pool(2);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 80; ++iter) {
    ConvShape s;
    const int nsp = 1 + iter % 3;
    s.N = 1 + pick(rng) % 2;
    const bool depthwise = iter % 4 == 1;
    s.group = depthwise ? 1 + pick(rng) % 4 : 1 + (pick(rng) % 3 == 0 ? 1 : 0);
    const int64_t Cg = depthwise ? 1 : 1 + pick(rng) % 4;
    const int64_t Mg = 1 + pick(rng) % 3;
    s.C = Cg * s.group;
    s.M = Mg * s.group;
    WindowAttrs a;
    Dims in, kernel;
    const bool pointwise = iter % 4 == 2;
    for (int i = 0; i < nsp; ++i) {
      in.push_back(3 + pick(rng) % (nsp == 3 ? 4 : 9));
      kernel.push_back(pointwise ? 1 : 1 + pick(rng) % 3);
      a.strides.push_back(pointwise ? 1 : 1 + pick(rng) % 2);
      a.dilations.push_back(1 + pick(rng) % 2);
    }
    for (int i = 0; i < 2 * nsp; ++i) a.pads.push_back(pointwise ? 0 : pick(rng) % 3);
    if (iter % 5 == 3) a.auto_pad = iter % 2 ? AutoPad::kSameUpper : AutoPad::kSameLower;
    if (!forward_geometry(a, in, kernel, &s.g).ok()) continue;  // window larger than the padded input
    ++ran;
    Dims wshape{s.M, Cg};
    for (auto k : kernel) wshape.push_back(k);
    auto x = random_vec(rng, s.N * s.C * s.g.in_size());
    auto w = random_vec(rng, shape_numel(wshape));
    auto b = random_vec(rng, s.M);
    const int64_t ny = s.N * s.M * s.g.out_size();
    std::vector<float> ref(ny);
    conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
    ConvWeights<float> cw;
    cw.prepare(wshape, s.group, w);
    for (ConvPath p : {ConvPath::kIm2col, ConvPath::kPointwise, ConvPath::kDepthwise, ConvPath::kAuto}) {
      if (!conv_path_applies(s, p)) continue;
      std::vector<float> y(ny, 123.f);
      conv_forward<float>(s, x.data(), cw, b.data(), y.data(), &pool, p);
      expect_close(y, ref, 1e-4f, "iter " + std::to_string(iter) + " path " + std::to_string(int(p)));
    }
  }
  EXPECT_GT(ran, 50);
}

TEST(OpsNnConv, KernelWithAutoPadAndGroups) {
  // 1x2x3x3 input, 2 groups, 3x3 ones kernel, SAME_UPPER, stride 2 -> 2x2 output per channel.
  std::vector<float> x(18);
  for (int i = 0; i < 18; ++i) x[i] = float(i);
  KernelRun run;
  run.op_type = "Conv";
  run.opset = 11;
  run.attributes = {attr_string("auto_pad", "SAME_UPPER"), attr_ints("strides", {2, 2}), attr_int("group", 2)};
  run.inputs = {Tensor::from_vector<float>(DataType::kFloat, {1, 2, 3, 3}, x),
                Tensor::from_vector<float>(DataType::kFloat, {2, 1, 3, 3}, std::vector<float>(18, 1.f)),
                Tensor::from_vector<float>(DataType::kFloat, {2}, {0.5f, -1.f})};
  auto out = run_kernel(run);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out.value()[0].tensor().shape(), (Dims{1, 2, 2, 2}));
  // out=2, total pad = (2-1)*2+3-3 = 2 -> 1 each side. Windows rows {-1..1},{1..3}.
  std::vector<float> want = {0 + 1 + 3 + 4 + 0.5f, 1 + 2 + 4 + 5 + 0.5f, 3 + 4 + 6 + 7 + 0.5f, 4 + 5 + 7 + 8 + 0.5f,
                             9 + 10 + 12 + 13 - 1.f, 10 + 11 + 13 + 14 - 1.f, 12 + 13 + 15 + 16 - 1.f,
                             13 + 14 + 16 + 17 - 1.f};
  expect_close(values(out.value()[0]), want, 1e-6f, "conv");
}

TEST(OpsNnConv, RejectsMismatchedChannels) {
  KernelRun run;
  run.op_type = "Conv";
  run.inputs = {Tensor(DataType::kFloat, {1, 3, 4, 4}), Tensor(DataType::kFloat, {2, 2, 3, 3})};
  auto out = run_kernel(run);
  EXPECT_FALSE(out.ok());
}
