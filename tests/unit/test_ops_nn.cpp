// Conv / pooling family: GEMM vs reference, every conv path vs the direct definition, pooling corners.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "ops/cpu_provider.h"
#include "ep/standalone_context.h"
#include "kernel_test_util.h"
#include "ops/gemm/gemm.h"
#include "ops/conv/conv_engine.h"
#include "shape/window_size.h"

using namespace nxrt;
using namespace nxrt::ops;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

using nxrt::testing::random_floats;

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

// Random x, weights of `wshape` and bias for `s`; conv_forward on `path` must match conv_naive on every
// pool given.
void expect_conv_matches_naive(std::mt19937& rng, const ConvShape& s, const Dims& wshape, ConvPath path,
                               std::initializer_list<ep::ThreadPool*> pools, const std::string& what) {
  SCOPED_TRACE(what + " path " + conv_path_name(path));
  auto x = random_floats(rng, s.N * s.C * s.g.in_size());
  auto w = random_floats(rng, shape_numel(wshape));
  auto b = random_floats(rng, s.M);
  std::vector<float> ref(static_cast<size_t>(s.N * s.M * s.g.out_size()));
  conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
  ConvWeights<float> cw;
  cw.prepare(wshape, s.group, w);
  EXPECT_EQ(conv_chosen_path(s, cw, ConvConfig(path), nullptr, 1), path);  // the path under test really runs
  for (ep::ThreadPool* pool : pools) {
    std::vector<float> y(ref.size(), 123.f);
    conv_forward<float>(s, x.data(), cw, b.data(), y.data(), pool, path);
    expect_close(y, ref, 2e-4f, what + " threads " + std::to_string(pool->num_threads()));
  }
}

}  // namespace

TEST(OpsNnGemm, MatchesReferenceOnOddShapes) {
  std::mt19937 rng(1);
  ep::ThreadPool pool(3, ep::ThreadPool::Sizing::kExact);
  const int64_t shapes[][3] = {{1, 1, 1}, {7, 5, 3}, {6, 16, 256}, {13, 37, 300}, {65, 250, 70}, {3, 600, 9}};
  for (auto& sh : shapes) {
    const int64_t M = sh[0], N = sh[1], K = sh[2];
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        auto A = random_floats(rng, M * K), B = random_floats(rng, K * N), C0 = random_floats(rng, M * N);
        auto C1 = C0;
        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
        gemm<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.f, C0.data(), N, &pool);
        gemm_reference<float>(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, 2.f, C1.data(), N);
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
    auto x = random_floats(rng, s.N * s.C * s.g.in_size());
    auto w = random_floats(rng, shape_numel(wshape));
    auto b = random_floats(rng, s.M);
    const int64_t ny = s.N * s.M * s.g.out_size();
    std::vector<float> ref(ny);
    conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
    ConvWeights<float> cw;
    cw.prepare(wshape, s.group, w);
    // Every path that applies (the Winograd and small-spatial ones have their own tests).
    for (int pi = 0; pi <= static_cast<int>(ConvPath::kDepthwiseScalar); ++pi) {
      const auto p = static_cast<ConvPath>(pi);
      if (!conv_path_applies(s, p)) continue;
      std::vector<float> y(ny, 123.f);
      conv_forward<float>(s, x.data(), cw, b.data(), y.data(), &pool, p);
      expect_close(y, ref, 1e-4f, "iter " + std::to_string(iter) + " path " + conv_path_name(p));
    }
  }
  EXPECT_GT(ran, 50);
}

// The implicit-GEMM path (im2col panels packed per task, ops/gemm/gemm.h gemm_f32_packed_a_gen_b) on shapes
// big enough for several K blocks (K > 256), several column blocks and tasks, stride-2 rows long enough
// for the AVX2 even-column gather, pads cutting into those rows, and dilation; 1 and 2 threads.
TEST(OpsNnConv, ImplicitGemmMatchesNaiveOnLargerShapes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> pick(0, 1000);
  ep::ThreadPool pool1(1), pool2(2);
  // The last two are fixed direct-strips shapes (conv/conv_engine.cpp: 64 <= C*kh*kw <= 256, >= 12 outputs a
  // row): a 7x7/2 stem with pads and a dilated stride-1 3x3 with groups and a residual-free bias.
  for (int iter = 0; iter < 16; ++iter) {
    ConvShape s;
    s.N = 1 + iter % 2;
    s.group = iter % 5 == 4 ? 2 : 1;
    if (iter >= 14) {
      const bool stem = iter == 14;
      s.group = stem ? 1 : 2;
      s.C = stem ? 3 : 16;
      s.M = stem ? 13 : 14;
      WindowAttrs a;
      a.strides = {stem ? 2 : 1, stem ? 2 : 1};
      a.dilations = {stem ? 1 : 2, stem ? 1 : 2};
      a.pads = {3, 2, 3, 1};
      const Dims in{stem ? 45 : 20, stem ? 47 : 19}, kernel{stem ? 7 : 3, stem ? 7 : 3};
      ASSERT_TRUE(forward_geometry(a, in, kernel, &s.g).ok());
      const Dims ws{s.M, s.C / s.group, kernel[0], kernel[1]};
      for (ConvPath p : {ConvPath::kPaddedRowsGemm, ConvPath::kImplicitGemm, ConvPath::kIm2col}) {
        expect_conv_matches_naive(rng, s, ws, p, {&pool1, &pool2}, "padded-rows case " + std::to_string(iter));
      }
      continue;
    }
    const int64_t Cg = 1 + pick(rng) % (iter < 7 ? 4 : 40);
    const int64_t Mg = 1 + pick(rng) % 70;
    s.C = Cg * s.group;
    s.M = Mg * s.group;
    WindowAttrs a;
    Dims in, kernel;
    for (int i = 0; i < 2; ++i) {
      in.push_back(iter < 7 ? 30 + pick(rng) % 60 : 6 + pick(rng) % 24);
      kernel.push_back(1 + pick(rng) % (iter < 7 ? 7 : 3));
      a.strides.push_back(1 + pick(rng) % 3);
      a.dilations.push_back(iter % 3 == 2 ? 2 : 1);
    }
    for (int i = 0; i < 4; ++i) a.pads.push_back(pick(rng) % 4);
    ASSERT_TRUE(forward_geometry(a, in, kernel, &s.g).ok());
    expect_conv_matches_naive(rng, s, Dims{s.M, Cg, kernel[0], kernel[1]}, ConvPath::kImplicitGemm,
                              {&pool1, &pool2}, "iter " + std::to_string(iter));
  }
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

namespace {

Tensor ftensor(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }

Result<std::vector<Value>> run_op(const std::string& op, int64_t opset, std::vector<ir::Attribute> attrs,
                                  std::vector<Value> inputs, size_t outs = 1, int threads = 1) {
  KernelRun run;
  run.op_type = op;
  run.opset = opset;
  run.attributes = std::move(attrs);
  run.inputs = std::move(inputs);
  run.num_outputs = outs;
  run.threads = threads;
  return run_kernel(run);
}

}  // namespace

TEST(OpsNnPool, MaxPoolCeilModeDropsWindowStartingInPadding) {
  // 1x1x2x2, kernel 1, stride 2, ceil_mode: ceil((2-1)/2)+1 = 2 but window 1 starts at 2 >= in -> 1.
  auto out = run_op("MaxPool", 22, {attr_ints("kernel_shape", {1, 1}), attr_ints("strides", {2, 2}), attr_int("ceil_mode", 1)},
                    {ftensor({1, 1, 2, 2}, {1, 2, 3, 4})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out.value()[0].tensor().shape(), (Dims{1, 1, 1, 1}));
  EXPECT_EQ(values(out.value()[0]), (std::vector<float>{1}));
}

TEST(OpsNnPool, MaxPoolIndicesBothStorageOrders) {
  // 1x1x2x3 with the max of each 2x2 window (stride 1) at known positions.
  std::vector<float> x = {1, 9, 2, 8, 3, 7};  // rows [1 9 2] [8 3 7]
  for (int order = 0; order < 2; ++order) {
    auto out = run_op("MaxPool", 12, {attr_ints("kernel_shape", {2, 2}), attr_int("storage_order", order)},
                      {ftensor({1, 1, 2, 3}, x)}, 2);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(values(out.value()[0]), (std::vector<float>{9, 9}));
    const Tensor& ind = out.value()[1].tensor();
    ASSERT_EQ(ind.dtype(), DataType::kInt64);
    // max 9 at (h=0, w=1): row-major 1, column-major 0 + 1*2 = 2
    EXPECT_EQ(ind.data<int64_t>()[0], order == 0 ? 1 : 2);
    EXPECT_EQ(ind.data<int64_t>()[1], order == 0 ? 1 : 2);
  }
}

TEST(OpsNnPool, AveragePoolPadsAndCountIncludePad) {
  // 1x1x3x3 of ones, kernel 3, pads 1: corner window sees 4 real values of 9 positions.
  std::vector<float> ones(9, 1.f);
  auto excl = run_op("AveragePool", 19, {attr_ints("kernel_shape", {3, 3}), attr_ints("pads", {1, 1, 1, 1})},
                     {ftensor({1, 1, 3, 3}, ones)});
  ASSERT_TRUE(excl.ok()) << excl.status().to_string();
  for (float v : values(excl.value()[0])) EXPECT_FLOAT_EQ(v, 1.f);
  auto incl = run_op("AveragePool", 19,
                     {attr_ints("kernel_shape", {3, 3}), attr_ints("pads", {1, 1, 1, 1}), attr_int("count_include_pad", 1)},
                     {ftensor({1, 1, 3, 3}, ones)});
  ASSERT_TRUE(incl.ok());
  auto v = values(incl.value()[0]);
  EXPECT_FLOAT_EQ(v[0], 4.f / 9.f);
  EXPECT_FLOAT_EQ(v[1], 6.f / 9.f);
  EXPECT_FLOAT_EQ(v[4], 1.f);
}

TEST(OpsNnPool, AveragePoolCeilModeWindowPastPadding) {
  // in 4, kernel 3, stride 2, pads 0, ceil: out = ceil(1/2)+1 = 2; window 1 covers [2,5): 2 real values.
  auto incl = run_op("AveragePool", 19,
                     {attr_ints("kernel_shape", {3}), attr_ints("strides", {2}), attr_int("ceil_mode", 1),
                      attr_int("count_include_pad", 1)},
                     {ftensor({1, 1, 4}, {1, 2, 3, 4})});
  ASSERT_TRUE(incl.ok()) << incl.status().to_string();
  // count_include_pad counts positions inside the padded input only (here no pads): (3+4)/2
  EXPECT_EQ(values(incl.value()[0]), (std::vector<float>{2.f, 3.5f}));
}

TEST(OpsNnPool, GlobalPoolsAndLpPool) {
  auto avg = run_op("GlobalAveragePool", 1, {}, {ftensor({1, 2, 2}, {1, 3, -2, 4})});
  ASSERT_TRUE(avg.ok());
  EXPECT_EQ(avg.value()[0].tensor().shape(), (Dims{1, 2, 1}));
  EXPECT_EQ(values(avg.value()[0]), (std::vector<float>{2, 1}));
  auto mx = run_op("GlobalMaxPool", 1, {}, {ftensor({1, 2, 2}, {1, 3, -2, -4})});
  ASSERT_TRUE(mx.ok());
  EXPECT_EQ(values(mx.value()[0]), (std::vector<float>{3, -2}));
  auto lp = run_op("LpPool", 18, {attr_ints("kernel_shape", {2}), attr_int("p", 2)}, {ftensor({1, 1, 3}, {3, 4, 0})});
  ASSERT_TRUE(lp.ok());
  EXPECT_EQ(values(lp.value()[0]), (std::vector<float>{5, 4}));
}

TEST(OpsNnPool, MaxPoolInt8AndErrors) {
  KernelRun run;
  run.op_type = "MaxPool";
  run.opset = 12;
  run.attributes = {attr_ints("kernel_shape", {2})};
  run.inputs = {Tensor::from_vector<int8_t>(DataType::kInt8, {1, 1, 3}, {-5, -7, 3})};
  auto out = run_kernel(run);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = out.value()[0].tensor();
  EXPECT_EQ(y.data<int8_t>()[0], -5);
  EXPECT_EQ(y.data<int8_t>()[1], 3);
  // kernel larger than the input: an error, not a crash
  run.attributes = {attr_ints("kernel_shape", {5})};
  EXPECT_FALSE(run_kernel(run).ok());
}

TEST(OpsNnConvTranspose, MatchesScatterDefinition) {
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> pick(0, 1000);
  for (int iter = 0; iter < 20; ++iter) {
    const int64_t group = 1 + iter % 2, Cg = 1 + pick(rng) % 3, Mg = 1 + pick(rng) % 3;
    const int64_t C = Cg * group, M = Mg * group, H = 2 + pick(rng) % 4, W = 2 + pick(rng) % 4;
    const int64_t kh = 1 + pick(rng) % 3, kw = 1 + pick(rng) % 3, sh = 1 + pick(rng) % 3, sw = 1 + pick(rng) % 2;
    const int64_t dh = 1 + pick(rng) % 2, dw = 1;
    const int64_t pt = pick(rng) % 2, pl = pick(rng) % 2, pb = pick(rng) % 2, pr = 0;
    auto x = random_floats(rng, C * H * W), w = random_floats(rng, C * Mg * kh * kw), b = random_floats(rng, M);
    const int64_t OH = sh * (H - 1) + (kh - 1) * dh + 1 - pt - pb, OW = sw * (W - 1) + (kw - 1) * dw + 1 - pl - pr;
    std::vector<float> ref(M * OH * OW);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < OH * OW; ++i) ref[m * OH * OW + i] = b[m];
    for (int64_t c = 0; c < C; ++c) {
      const int64_t gi = c / Cg;
      for (int64_t ih = 0; ih < H; ++ih)
        for (int64_t iw = 0; iw < W; ++iw)
          for (int64_t mm = 0; mm < Mg; ++mm)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                const int64_t oh = ih * sh - pt + a * dh, ow = iw * sw - pl + e * dw;
                if (oh < 0 || oh >= OH || ow < 0 || ow >= OW) continue;
                ref[((gi * Mg + mm) * OH + oh) * OW + ow] +=
                    x[(c * H + ih) * W + iw] * w[((c * Mg + mm) * kh + a) * kw + e];
              }
    }
    auto out = run_op("ConvTranspose", 11,
                      {attr_ints("strides", {sh, sw}), attr_ints("dilations", {dh, dw}),
                       attr_ints("pads", {pt, pl, pb, pr}), attr_int("group", group)},
                      {ftensor({1, C, H, W}, x), ftensor({C, Mg, kh, kw}, w), ftensor({M}, b)}, 1, 2);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(out.value()[0].tensor().shape(), (Dims{1, M, OH, OW}));
    expect_close(values(out.value()[0]), ref, 1e-4f, "convtranspose iter " + std::to_string(iter));
  }
}

TEST(OpsNnConv, Float16MatchesFloat) {
  std::mt19937 rng(11);
  auto x = random_floats(rng, 2 * 3 * 5 * 5), w = random_floats(rng, 4 * 3 * 3 * 3);
  std::vector<Float16> xh, wh;
  for (float v : x) xh.push_back(Float16(v));
  for (float v : w) wh.push_back(Float16(v));
  std::vector<float> xr, wr;  // the float values the halves hold
  for (auto h : xh) xr.push_back(float(h));
  for (auto h : wh) wr.push_back(float(h));
  std::vector<ir::Attribute> attrs = {attr_ints("pads", {1, 1, 1, 1})};
  auto f = run_op("Conv", 22, attrs, {ftensor({2, 3, 5, 5}, xr), ftensor({4, 3, 3, 3}, wr)});
  auto h = run_op("Conv", 22, attrs,
                  {Tensor::from_vector<Float16>(DataType::kFloat16, {2, 3, 5, 5}, xh),
                   Tensor::from_vector<Float16>(DataType::kFloat16, {4, 3, 3, 3}, wh)});
  ASSERT_TRUE(f.ok() && h.ok());
  const Tensor& yh = h.value()[0].tensor();
  ASSERT_EQ(yh.dtype(), DataType::kFloat16);
  auto yf = values(f.value()[0]);
  for (int64_t i = 0; i < yh.numel(); ++i) EXPECT_NEAR(float(yh.data<Float16>()[i]), yf[i], 2e-3f * (1 + std::fabs(yf[i])));
}

// ------------------------------------------------------------------------------------------------
// Recurrent ops: properties that tie directions, layouts and sequence lengths together.

namespace {

struct RnnCase {
  std::string op;
  int64_t gates;
  int64_t S = 4, B = 3, I = 2, H = 3;
};

std::vector<float> slice_dir(const std::vector<float>& y, int64_t S, int64_t D, int64_t B, int64_t H, int64_t d) {
  std::vector<float> out;
  for (int64_t t = 0; t < S; ++t)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t j = 0; j < H; ++j) out.push_back(y[((t * D + d) * B + b) * H + j]);
  return out;
}

}  // namespace

TEST(OpsNnRnn, BidirectionalMatchesForwardAndReverseRuns) {
  std::mt19937 rng(5);
  for (RnnCase rc : {RnnCase{"RNN", 1}, RnnCase{"GRU", 3}, RnnCase{"LSTM", 4}}) {
    const int64_t G = rc.gates, S = rc.S, B = rc.B, I = rc.I, H = rc.H;
    auto x = random_floats(rng, S * B * I);
    auto w = random_floats(rng, 2 * G * H * I), r = random_floats(rng, 2 * G * H * H), bias = random_floats(rng, 2 * 2 * G * H);
    auto h0 = random_floats(rng, 2 * B * H);
    const size_t nout = rc.op == "LSTM" ? 3 : 2;
    auto bi = run_op(rc.op, 14, {attr_int("hidden_size", H), attr_string("direction", "bidirectional")},
                     {ftensor({S, B, I}, x), ftensor({2, G * H, I}, w), ftensor({2, G * H, H}, r),
                      ftensor({2, 2 * G * H}, bias), Value(), ftensor({2, B, H}, h0)},
                     nout);
    ASSERT_TRUE(bi.ok()) << bi.status().to_string();
    auto ybi = values(bi.value()[0]);
    for (int d = 0; d < 2; ++d) {
      auto part = [&](const std::vector<float>& v, int64_t n) {
        return std::vector<float>(v.begin() + d * n, v.begin() + (d + 1) * n);
      };
      auto one = run_op(rc.op, 14, {attr_int("hidden_size", H), attr_string("direction", d ? "reverse" : "forward")},
                        {ftensor({S, B, I}, x), ftensor({1, G * H, I}, part(w, G * H * I)),
                         ftensor({1, G * H, H}, part(r, G * H * H)), ftensor({1, 2 * G * H}, part(bias, 2 * G * H)),
                         Value(), ftensor({1, B, H}, part(h0, B * H))},
                        nout);
      ASSERT_TRUE(one.ok()) << one.status().to_string();
      expect_close(values(one.value()[0]), slice_dir(ybi, S, 2, B, H, d), 1e-5f, rc.op + " Y dir " + std::to_string(d));
      expect_close(values(one.value()[1]), part(values(bi.value()[1]), B * H), 1e-5f, rc.op + " Y_h");
    }
  }
}

TEST(OpsNnRnn, LayoutOneAndSequenceLens) {
  std::mt19937 rng(6);
  for (RnnCase rc : {RnnCase{"RNN", 1}, RnnCase{"GRU", 3}, RnnCase{"LSTM", 4}}) {
    const int64_t G = rc.gates, S = rc.S, B = rc.B, I = rc.I, H = rc.H;
    auto x = random_floats(rng, S * B * I);
    auto w = random_floats(rng, G * H * I), r = random_floats(rng, G * H * H);
    std::vector<int32_t> lens = {4, 2, 0};
    const size_t nout = rc.op == "LSTM" ? 3 : 2;
    std::vector<ir::Attribute> attrs = {attr_int("hidden_size", H), attr_string("direction", "reverse")};
    if (rc.op == "GRU") attrs.push_back(attr_int("linear_before_reset", 1));
    auto base = run_op(rc.op, 14, attrs,
                       {ftensor({S, B, I}, x), ftensor({1, G * H, I}, w), ftensor({1, G * H, H}, r), Value(),
                        Tensor::from_vector<int32_t>(DataType::kInt32, {B}, lens)},
                       nout);
    ASSERT_TRUE(base.ok()) << base.status().to_string();
    auto y = values(base.value()[0]);  // [S, 1, B, H]
    // steps past a batch entry's length are zero
    for (int64_t b = 0; b < B; ++b)
      for (int64_t t = lens[b]; t < S; ++t)
        for (int64_t j = 0; j < H; ++j) EXPECT_EQ(y[(t * B + b) * H + j], 0.f);
    // batch entry 1 (length 2) alone with S = 2 gives the same Y_h
    std::vector<float> x1;
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t i = 0; i < I; ++i) x1.push_back(x[(t * B + 1) * I + i]);
    auto alone = run_op(rc.op, 14, attrs, {ftensor({2, 1, I}, x1), ftensor({1, G * H, I}, w), ftensor({1, G * H, H}, r)}, nout);
    ASSERT_TRUE(alone.ok());
    auto yh = values(base.value()[1]);
    expect_close(values(alone.value()[1]), std::vector<float>(yh.begin() + H, yh.begin() + 2 * H), 1e-5f, rc.op + " lens");
    // layout 1: X as [B, S, I] gives Y as [B, S, D, H]
    std::vector<float> xt(x.size());
    for (int64_t t = 0; t < S; ++t)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < I; ++i) xt[(b * S + t) * I + i] = x[(t * B + b) * I + i];
    auto attrs1 = attrs;
    attrs1.push_back(attr_int("layout", 1));
    auto l1 = run_op(rc.op, 14, attrs1,
                     {ftensor({B, S, I}, xt), ftensor({1, G * H, I}, w), ftensor({1, G * H, H}, r), Value(),
                      Tensor::from_vector<int32_t>(DataType::kInt32, {B}, lens)},
                     nout);
    ASSERT_TRUE(l1.ok()) << l1.status().to_string();
    auto y1 = values(l1.value()[0]);
    for (int64_t t = 0; t < S; ++t)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t j = 0; j < H; ++j) ASSERT_NEAR(y1[(b * S + t) * H + j], y[(t * B + b) * H + j], 1e-6f);
  }
}

TEST(OpsNnRnn, LstmOneStepByHand) {
  // hidden 1, input 1, one step: gates i, o, f, c with peepholes and clip.
  const float x = 0.5f, h0 = 0.2f, c0 = -0.3f;
  const std::vector<float> w = {0.1f, 0.2f, 0.3f, 0.4f}, r = {0.5f, -0.6f, 0.7f, -0.8f};
  const std::vector<float> p = {0.9f, -0.1f, 0.2f};  // i, o, f
  auto sig = [](float v) { return 1.f / (1.f + std::exp(-v)); };
  const float i = sig(w[0] * x + r[0] * h0 + p[0] * c0);
  const float f = sig(w[2] * x + r[2] * h0 + p[2] * c0);
  const float c = std::tanh(w[3] * x + r[3] * h0);
  const float ct = f * c0 + i * c;
  const float o = sig(w[1] * x + r[1] * h0 + p[1] * ct);
  const float ht = o * std::tanh(ct);
  auto out = run_op("LSTM", 7, {attr_int("hidden_size", 1)},
                    {ftensor({1, 1, 1}, {x}), ftensor({1, 4, 1}, w), ftensor({1, 4, 1}, r), Value(), Value(),
                     ftensor({1, 1, 1}, {h0}), ftensor({1, 1, 1}, {c0}), ftensor({1, 3}, p)},
                    3);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_NEAR(values(out.value()[0])[0], ht, 1e-6f);
  EXPECT_NEAR(values(out.value()[2])[0], ct, 1e-6f);
}

TEST(OpsNnRnn, GruOneStepBothResetModes) {
  const float x = 0.7f, h0 = -0.4f;
  const std::vector<float> w = {0.3f, -0.2f, 0.5f}, r = {0.1f, 0.4f, -0.6f};
  const std::vector<float> b = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f};
  auto sig = [](float v) { return 1.f / (1.f + std::exp(-v)); };
  const float z = sig(w[0] * x + r[0] * h0 + b[0] + b[3]);
  const float rr = sig(w[1] * x + r[1] * h0 + b[1] + b[4]);
  for (int lbr = 0; lbr < 2; ++lbr) {
    const float hh = lbr ? std::tanh(w[2] * x + b[2] + rr * (r[2] * h0 + b[5]))
                         : std::tanh(w[2] * x + r[2] * (rr * h0) + b[2] + b[5]);
    const float want = (1 - z) * hh + z * h0;
    auto out = run_op("GRU", 7, {attr_int("hidden_size", 1), attr_int("linear_before_reset", lbr)},
                      {ftensor({1, 1, 1}, {x}), ftensor({1, 3, 1}, w), ftensor({1, 3, 1}, r), ftensor({1, 6}, b),
                       Value(), ftensor({1, 1, 1}, {h0})},
                      2);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_NEAR(values(out.value()[1])[0], want, 1e-6f) << "linear_before_reset " << lbr;
  }
}

// ------------------------------------------------------------------------------------------------
// Weights known at creation (initializers) are prepared once; the result must not change.

namespace {

// Runs op with input `const_idx` given as a creation-time constant.
Result<Tensor> run_with_const(const std::string& op, int64_t opset, std::vector<ir::Attribute> attrs,
                              const std::vector<Value>& inputs, std::vector<size_t> const_idx) {
  ir::Node node;
  node.op_type = op;
  node.attributes = std::move(attrs);
  for (size_t i = 0; i < inputs.size(); ++i) node.inputs.push_back(inputs[i].is_none() ? "" : "in" + std::to_string(i));
  node.outputs = {"y"};
  ep::KernelInfo info(node, opset);
  info.const_inputs_.assign(inputs.size(), nullptr);
  for (size_t i : const_idx) info.const_inputs_[i] = &inputs[i].tensor();
  const ep::KernelDef* def = ops::cpu_provider_registry()->find("", op, opset);
  if (!def) return not_implemented(op);
  auto k = def->factory(info);
  if (!k.ok()) return k.status();
  ep::ThreadPool pool(2);
  ep::StandaloneContext ctx(info, inputs, pool);
  NXRT_RETURN_IF_ERROR(k.value()->compute(ctx));
  return ctx.output(0).tensor();
}

}  // namespace

TEST(OpsNnConv, ConstantWeightsMatchRuntimeWeights) {
  std::mt19937 rng(21);
  // float Conv: regular and depthwise.
  for (int64_t group : {1, 4}) {
    const int64_t C = 4, M = 8, Cg = C / group;
    auto x = random_floats(rng, 2 * C * 6 * 6), w = random_floats(rng, M * Cg * 3 * 3), b = random_floats(rng, M);
    std::vector<Value> in = {ftensor({2, C, 6, 6}, x), ftensor({M, Cg, 3, 3}, w), ftensor({M}, b)};
    std::vector<ir::Attribute> attrs = {attr_int("group", group), attr_ints("pads", {1, 1, 1, 1}), attr_ints("strides", {2, 1})};
    auto a = run_with_const("Conv", 11, attrs, in, {1, 2});
    auto r = run_with_const("Conv", 11, attrs, in, {});
    ASSERT_TRUE(a.ok() && r.ok()) << a.status().to_string() << r.status().to_string();
    std::vector<float> va(a->data<float>(), a->data<float>() + a->numel()), vr(r->data<float>(), r->data<float>() + r->numel());
    EXPECT_EQ(va, vr);
  }
  // ConvInteger with a per-channel weight zero point.
  std::vector<uint8_t> xq(1 * 2 * 4 * 4), wq(3 * 2 * 2 * 2);
  for (size_t i = 0; i < xq.size(); ++i) xq[i] = static_cast<uint8_t>((i * 37) % 256);
  for (size_t i = 0; i < wq.size(); ++i) wq[i] = static_cast<uint8_t>((i * 91 + 7) % 256);
  std::vector<Value> qin = {Tensor::from_vector<uint8_t>(DataType::kUInt8, {1, 2, 4, 4}, xq),
                            Tensor::from_vector<uint8_t>(DataType::kUInt8, {3, 2, 2, 2}, wq),
                            Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {3}),
                            Tensor::from_vector<uint8_t>(DataType::kUInt8, {3}, {1, 128, 255})};
  auto qa = run_with_const("ConvInteger", 10, {}, qin, {1, 3});
  auto qr = run_with_const("ConvInteger", 10, {}, qin, {});
  ASSERT_TRUE(qa.ok() && qr.ok()) << qa.status().to_string() << qr.status().to_string();
  ASSERT_EQ(qa->shape(), (Dims{1, 3, 3, 3}));
  // spot-check one output against the definition
  int64_t want = 0;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) want += (int64_t(xq[(c * 4 + i) * 4 + j]) - 3) * (int64_t(wq[((1 * 2 + c) * 2 + i) * 2 + j]) - 128);
  EXPECT_EQ(qa->data<int32_t>()[9], want);
  for (int64_t i = 0; i < qa->numel(); ++i) EXPECT_EQ(qa->data<int32_t>()[i], qr->data<int32_t>()[i]);
}

// Constant float32 weights are packed straight from the initializer (ConvWeights::prepare from a
// pointer), the raw copy kept only for the paths that read it: every path's output must equal the one
// from weights given at run time. Cases: the general GEMM path, Winograd (3x3, stride 1), depthwise
// (raw weights), a single-position 1x1 (small pointwise, raw weights), a strided 1x1, and DeformConv.
TEST(OpsNnConv, ConstantWeightsPackedInPlaceMatchRuntimeWeights) {
  std::mt19937 rng(23);
  struct Case {
    int64_t N, C, M, H, W, k, group, stride, pad;
  };
  for (const Case& c : {Case{1, 16, 24, 10, 10, 3, 1, 1, 1}, Case{2, 5, 7, 9, 6, 3, 1, 2, 0}, Case{1, 8, 8, 7, 7, 3, 8, 1, 1},
                        Case{1, 48, 24, 1, 1, 1, 1, 1, 0}, Case{1, 12, 20, 8, 8, 1, 1, 2, 0}, Case{1, 6, 9, 5, 5, 5, 3, 1, 2}}) {
    SCOPED_TRACE("C " + std::to_string(c.C) + " M " + std::to_string(c.M) + " k " + std::to_string(c.k) + " group " +
                 std::to_string(c.group));
    const int64_t Cg = c.C / c.group;
    auto x = random_floats(rng, c.N * c.C * c.H * c.W), w = random_floats(rng, c.M * Cg * c.k * c.k),
         b = random_floats(rng, c.M);
    std::vector<Value> in = {ftensor({c.N, c.C, c.H, c.W}, x), ftensor({c.M, Cg, c.k, c.k}, w), ftensor({c.M}, b)};
    std::vector<ir::Attribute> attrs = {attr_int("group", c.group), attr_ints("pads", {c.pad, c.pad, c.pad, c.pad}),
                                        attr_ints("strides", {c.stride, c.stride})};
    auto a = run_with_const("Conv", 11, attrs, in, {1});
    auto r = run_with_const("Conv", 11, attrs, in, {});
    ASSERT_TRUE(a.ok() && r.ok()) << a.status().to_string() << r.status().to_string();
    ASSERT_EQ(a->shape(), r->shape());
    for (int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(a->data<float>()[i], r->data<float>()[i]) << "at " << i;
  }
  // DeformConv: zero offsets on a 3x3 kernel, constant float32 weights against run-time ones.
  const int64_t C = 4, M = 6, H = 5, W = 5;
  auto x = random_floats(rng, C * H * W), w = random_floats(rng, M * C * 9);
  std::vector<float> off(static_cast<size_t>(18 * H * W), 0.25f);
  std::vector<Value> in = {ftensor({1, C, H, W}, x), ftensor({M, C, 3, 3}, w), ftensor({1, 18, H, W}, off)};
  std::vector<ir::Attribute> attrs = {attr_ints("pads", {1, 1, 1, 1})};
  auto a = run_with_const("DeformConv", 19, attrs, in, {1});
  auto r = run_with_const("DeformConv", 19, attrs, in, {});
  ASSERT_TRUE(a.ok() && r.ok()) << a.status().to_string() << r.status().to_string();
  ASSERT_EQ(a->shape(), (Dims{1, M, H, W}));
  for (int64_t i = 0; i < a->numel(); ++i) ASSERT_EQ(a->data<float>()[i], r->data<float>()[i]) << "at " << i;
}

TEST(OpsNnConvTranspose, ConstantWeightsMatchRuntimeWeights) {
  std::mt19937 rng(22);
  auto x = random_floats(rng, 1 * 4 * 3 * 3), w = random_floats(rng, 4 * 3 * 2 * 2);
  std::vector<Value> in = {ftensor({1, 4, 3, 3}, x), ftensor({4, 3, 2, 2}, w)};
  std::vector<ir::Attribute> attrs = {attr_int("group", 2), attr_ints("strides", {2, 2})};
  auto a = run_with_const("ConvTranspose", 11, attrs, in, {1});
  auto r = run_with_const("ConvTranspose", 11, attrs, in, {});
  ASSERT_TRUE(a.ok() && r.ok()) << a.status().to_string() << r.status().to_string();
  ASSERT_EQ(a->shape(), (Dims{1, 6, 6, 6}));
  for (int64_t i = 0; i < a->numel(); ++i) EXPECT_EQ(a->data<float>()[i], r->data<float>()[i]);
}

TEST(OpsNnConv, CausalConvWithStateCarriesState) {
  // One channel, kernel 3: y[t] = w0*s[t] + w1*s[t+1] + w2*s[t+2] over s = past | x.
  std::vector<ir::Attribute> none;
  auto out = run_op("CausalConvWithState", 27, none,
                    {ftensor({1, 1, 2}, {1, 2}), ftensor({1, 1, 3}, {1, 10, 100}), Value(), ftensor({1, 1, 2}, {3, 4})}, 2);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(values(out.value()[0]), (std::vector<float>{3 + 40 + 100, 4 + 10 + 200}));
  EXPECT_EQ(values(out.value()[1]), (std::vector<float>{1, 2}));
  // no past state: zeros on the left; SiLU applied
  auto silu = run_op("CausalConvWithState", 27, {attr_string("activation", "silu")},
                     {ftensor({1, 1, 1}, {1}), ftensor({1, 1, 3}, {1, 1, 2})}, 2);
  ASSERT_TRUE(silu.ok()) << silu.status().to_string();
  EXPECT_NEAR(values(silu.value()[0])[0], 2.f / (1.f + std::exp(-2.f)), 1e-6f);
  EXPECT_EQ(values(silu.value()[1]), (std::vector<float>{0, 1}));
}

// Random window configurations (ceil_mode, dilations, pads, auto_pad, strides) against a direct
// reference; also run under ASan/UBSan to catch out-of-bounds reads on the window edges.
TEST(OpsNnPool, RandomConfigsMatchDirectReference) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 150; ++iter) {
    const int nsp = 1 + iter % 3;
    const int64_t N = 1 + pick(rng) % 2, C = 1 + pick(rng) % 2;
    WindowAttrs a;
    Dims in;
    for (int i = 0; i < nsp; ++i) {
      in.push_back(1 + pick(rng) % (nsp == 3 ? 5 : 8));
      a.kernel_shape.push_back(1 + pick(rng) % 3);
      a.strides.push_back(1 + pick(rng) % 3);
      a.dilations.push_back(1 + pick(rng) % 2);
    }
    for (int i = 0; i < 2 * nsp; ++i) a.pads.push_back(pick(rng) % 2);
    const int ap = pick(rng) % 6;
    a.auto_pad = ap == 0 ? AutoPad::kSameUpper : ap == 1 ? AutoPad::kSameLower : ap == 2 ? AutoPad::kValid : AutoPad::kNotSet;
    a.ceil_mode = pick(rng) % 2;
    Geom3 g;
    if (!forward_geometry(a, in, a.kernel_shape, &g).ok()) continue;
    ++ran;
    Dims xs{N, C};
    for (auto v : in) xs.push_back(v);
    auto x = random_floats(rng, shape_numel(xs));
    const bool cip = pick(rng) % 2;
    std::vector<ir::Attribute> attrs = {attr_ints("kernel_shape", a.kernel_shape), attr_ints("strides", a.strides),
                                        attr_ints("dilations", a.dilations), attr_int("ceil_mode", a.ceil_mode)};
    const char* apn[] = {"SAME_UPPER", "SAME_LOWER", "VALID", "NOTSET", "NOTSET", "NOTSET"};
    attrs.push_back(attr_string("auto_pad", apn[ap]));
    if (a.auto_pad == AutoPad::kNotSet) attrs.push_back(attr_ints("pads", a.pads));
    auto mx = run_op("MaxPool", 22, attrs, {ftensor(xs, x)}, 2);
    auto avg_attrs = attrs;
    avg_attrs.push_back(attr_int("count_include_pad", cip));
    auto av = run_op("AveragePool", 22, avg_attrs, {ftensor(xs, x)});
    ASSERT_TRUE(mx.ok() && av.ok()) << mx.status().to_string() << av.status().to_string();
    auto ym = values(mx.value()[0]), ya = values(av.value()[0]);
    const Tensor& ind = mx.value()[1].tensor();
    // direct reference
    int64_t o = 0;
    for (int64_t p = 0; p < N * C; ++p)
      for (int64_t od = 0; od < g.out[0]; ++od)
        for (int64_t oh = 0; oh < g.out[1]; ++oh)
          for (int64_t ow = 0; ow < g.out[2]; ++ow, ++o) {
            float best = -INFINITY, sum = 0;
            int64_t cnt = 0, padded = 0, best_at = -1;
            for (int64_t kd = 0; kd < g.k[0]; ++kd)
              for (int64_t kh = 0; kh < g.k[1]; ++kh)
                for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                  const int64_t id = od * g.s[0] - g.pb[0] + kd * g.d[0];
                  const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
                  const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
                  const bool in_pad = id >= -g.pb[0] && id < g.in[0] + g.pe[0] && ih >= -g.pb[1] &&
                                      ih < g.in[1] + g.pe[1] && iw >= -g.pb[2] && iw < g.in[2] + g.pe[2];
                  padded += in_pad;
                  if (id < 0 || id >= g.in[0] || ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
                  const int64_t at = ((p * g.in[0] + id) * g.in[1] + ih) * g.in[2] + iw;
                  if (x[at] > best) {
                    best = x[at];
                    best_at = at;
                  }
                  sum += x[at];
                  ++cnt;
                }
            if (cnt > 0) {
              ASSERT_EQ(ym[o], best) << "iter " << iter;
              ASSERT_EQ(ind.data<int64_t>()[o], best_at) << "iter " << iter;
            }
            const int64_t denom = cip ? padded : cnt;
            ASSERT_NEAR(ya[o], denom ? sum / denom : 0.f, 1e-5f) << "iter " << iter;
          }
  }
  EXPECT_GT(ran, 80);
}

TEST(OpsNnConvTranspose, RandomOutputShapeAndAutoPadRun) {
  std::mt19937 rng(32);
  std::uniform_int_distribution<int> pick(0, 1000);
  for (int iter = 0; iter < 40; ++iter) {
    const int nsp = 1 + iter % 3;
    Dims xs{1, 2}, ws{2, 1 + pick(rng) % 2}, strides, os, op;
    for (int i = 0; i < nsp; ++i) {
      xs.push_back(1 + pick(rng) % 4);
      ws.push_back(1 + pick(rng) % 3);
      strides.push_back(1 + pick(rng) % 3);
      op.push_back(pick(rng) % strides.back());
      os.push_back(xs.back() * strides.back() + pick(rng) % 3 - 1);
    }
    std::vector<ir::Attribute> attrs = {attr_ints("strides", strides), attr_ints("output_padding", op)};
    const int mode = iter % 3;
    if (mode == 0) attrs.push_back(attr_ints("output_shape", os));
    if (mode == 1) attrs.push_back(attr_string("auto_pad", iter % 2 ? "SAME_UPPER" : "SAME_LOWER"));
    auto out = run_op("ConvTranspose", 22, attrs,
                      {ftensor(xs, random_floats(rng, shape_numel(xs))), ftensor(ws, random_floats(rng, shape_numel(ws)))});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = out.value()[0].tensor();
    for (int i = 0; i < nsp; ++i) {
      if (mode == 0) {
        EXPECT_EQ(y.dim(2 + i), os[i]);
      } else if (mode == 1) {
        EXPECT_EQ(y.dim(2 + i), xs[2 + i] * strides[i]);
      }
    }
  }
}

TEST(OpsNnConv, DeformConvZeroOffsetsEqualConv) {
  std::mt19937 rng(33);
  auto x = random_floats(rng, 1 * 4 * 5 * 6), w = random_floats(rng, 6 * 2 * 3 * 2);
  std::vector<ir::Attribute> attrs = {attr_int("group", 2), attr_ints("pads", {1, 0, 1, 1}), attr_ints("strides", {2, 1}),
                                      attr_ints("kernel_shape", {3, 2})};
  auto conv = run_op("Conv", 22, attrs, {ftensor({1, 4, 5, 6}, x), ftensor({6, 2, 3, 2}, w)});
  ASSERT_TRUE(conv.ok()) << conv.status().to_string();
  const Tensor& yc = conv.value()[0].tensor();
  const int64_t OH = yc.dim(2), OW = yc.dim(3);
  auto dattrs = attrs;
  dattrs.push_back(attr_int("offset_group", 2));
  std::vector<float> offs(2 * 6 * 2 * OH * OW, 0.f);
  auto def = run_op("DeformConv", 22, dattrs,
                    {ftensor({1, 4, 5, 6}, x), ftensor({6, 2, 3, 2}, w), ftensor({1, 2 * 6 * 2, OH, OW}, offs)});
  ASSERT_TRUE(def.ok()) << def.status().to_string();
  expect_close(values(def.value()[0]), values(conv.value()[0]), 1e-5f, "deform vs conv");
  // large offsets sample outside the image: zeros, no crash
  std::vector<float> far(offs.size(), 1e6f);
  auto out = run_op("DeformConv", 22, dattrs,
                    {ftensor({1, 4, 5, 6}, x), ftensor({6, 2, 3, 2}, w), ftensor({1, 2 * 6 * 2, OH, OW}, far)});
  ASSERT_TRUE(out.ok());
  for (float v : values(out.value()[0])) EXPECT_EQ(v, 0.f);
}

// The conv kernels read conv.path / conv.skip / reference / isa (ep/kernel_overrides.h) at creation: every
// path forced through the Conv kernel, on shapes each path applies to, gives the automatic path's result.
TEST(OpsNnConv, PathOverridesThroughTheKernel) {
  std::mt19937 rng(41);
  struct Shape {
    int64_t C, M, group, H, k, stride, pad;
  };
  const Shape shapes[] = {
      {16, 16, 1, 10, 3, 1, 1},  // Winograd-preferred 3x3
      {3, 12, 1, 31, 7, 2, 3},   // a stem: padded-rows GEMM
      {64, 32, 1, 7, 1, 1, 0},   // 1x1 at 7x7: pointwise / small-spatial
      {8, 8, 8, 12, 3, 2, 1},    // depthwise
      {64, 48, 1, 7, 3, 1, 1},   // 3x3 at 7x7: small-spatial transposed on AVX-512
      {32, 40, 1, 31, 3, 2, 1},  // 3x3/2, 40 outputs (2.5 blocks): strided direct on AVX-512
      {24, 20, 1, 15, 1, 2, 0},  // 1x1/2: strided direct forced (channels past 16, every other column)
  };
  for (const Shape& sh : shapes) {
    const int64_t Cg = sh.C / sh.group;
    auto x = random_floats(rng, 2 * sh.C * sh.H * sh.H), w = random_floats(rng, sh.M * Cg * sh.k * sh.k);
    auto b = random_floats(rng, sh.M);
    nxrt::testing::KernelRun run;
    run.op_type = "Conv";
    run.opset = 11;
    run.threads = 2;
    run.attributes = {attr_int("group", sh.group), attr_ints("strides", {sh.stride, sh.stride}),
                      attr_ints("pads", {sh.pad, sh.pad, sh.pad, sh.pad})};
    run.inputs = {ftensor({2, sh.C, sh.H, sh.H}, x), ftensor({sh.M, Cg, sh.k, sh.k}, w), ftensor({sh.M}, b)};
    auto base = nxrt::testing::run_kernel(run);
    ASSERT_TRUE(base.ok()) << base.status().to_string();
    const Tensor& want = base.value()[0].tensor();
    std::vector<std::map<std::string, std::string>> forced = {{{"reference", "1"}},
                                                              {{"isa", "scalar"}},
                                                              {{"conv.skip", "winograd"}},
                                                              {{"conv.skip", "small-spatial"}},
                                                              {{"conv.skip", "padded-rows-gemm"}},
                                                              {{"conv.skip", "strided-direct"}}};
    for (int pi = 0; pi <= static_cast<int>(ConvPath::kStridedDirect); ++pi) {
      forced.push_back({{"conv.path", conv_path_name(static_cast<ConvPath>(pi))}});
    }
    for (const auto& o : forced) {
      run.overrides = o;
      auto got = nxrt::testing::run_kernel(run);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      const Tensor& t = got.value()[0].tensor();
      ASSERT_EQ(t.shape(), want.shape());
      for (int64_t i = 0; i < t.numel(); ++i) {
        ASSERT_NEAR(t.data<float>()[i], want.data<float>()[i], 2e-4f * (1.f + std::fabs(want.data<float>()[i])))
            << o.begin()->first << "=" << o.begin()->second << " C" << sh.C << " k" << sh.k << " at " << i;
      }
    }
  }
  // An unknown path name is refused when the kernel is created.
  nxrt::testing::KernelRun bad;
  bad.op_type = "Conv";
  bad.opset = 11;
  bad.inputs = {ftensor({1, 1, 3, 3}, std::vector<float>(9, 1.f)), ftensor({1, 1, 1, 1}, {1.f})};
  bad.overrides = {{"conv.path", "direct-strips"}};
  EXPECT_FALSE(nxrt::testing::run_kernel(bad).ok());
}

TEST(OpsNnConv, ConvConfigFromOverrides) {
  EXPECT_STREQ(conv_path_name(ConvPath::kPaddedRowsGemm), "padded-rows-gemm");
  for (int pi = 0; pi <= static_cast<int>(ConvPath::kStridedDirect); ++pi) {
    const auto p = static_cast<ConvPath>(pi);
    ASSERT_EQ(parse_conv_path(conv_path_name(p)), p);
  }
  EXPECT_FALSE(parse_conv_path("strips").has_value());
  ConvConfig c(ConvPath::kAuto);
  c.auto_skips = 1u << static_cast<int>(ConvPath::kWinograd);
  EXPECT_TRUE(c.skipped(ConvPath::kWinograd));
  EXPECT_FALSE(c.skipped(ConvPath::kPointwise));
  // A 3x3 Winograd-preferred conv: kAuto takes Winograd unless skipped.
  ConvShape s;
  s.N = 1, s.C = 16, s.M = 16;
  WindowAttrs a;
  a.pads = {1, 1, 1, 1};
  ASSERT_TRUE(forward_geometry(a, Dims{10, 10}, Dims{3, 3}, &s.g).ok());
  ConvWeights<float> cw;
  cw.prepare(Dims{16, 16, 3, 3}, 1, std::vector<float>(16 * 16 * 9, 0.5f), true);
  EXPECT_EQ(conv_chosen_path(s, cw, ConvConfig(), nullptr, 1), ConvPath::kWinograd);
  EXPECT_NE(conv_chosen_path(s, cw, c, nullptr, 1), ConvPath::kWinograd);
  EXPECT_EQ(conv_chosen_path(s, cw, ConvConfig(ConvPath::kIm2col), nullptr, 1), ConvPath::kIm2col);
}

// reference=1 turns the pools' row-wise float paths off; both give the same values.
TEST(OpsNnPool, ReferenceOverrideMatchesRowPaths) {
  std::mt19937 rng(43);
  auto x = random_floats(rng, 2 * 3 * 17 * 19);
  struct Op {
    const char* type;
    std::vector<ir::Attribute> attrs;
  };
  const Op ops[] = {
      {"MaxPool", {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}},
      {"AveragePool", {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {1, 1}), attr_ints("pads", {1, 1, 1, 1})}},
      {"GlobalAveragePool", {}},
  };
  for (const Op& op : ops) {
    nxrt::testing::KernelRun run;
    run.op_type = op.type;
    run.opset = 11;
    run.attributes = op.attrs;
    run.inputs = {ftensor({2, 3, 17, 19}, x)};
    auto fast = nxrt::testing::run_kernel(run);
    run.overrides = {{"reference", "1"}};
    auto ref = nxrt::testing::run_kernel(run);
    ASSERT_TRUE(fast.ok() && ref.ok()) << op.type;
    const Tensor& a = fast.value()[0].tensor();
    const Tensor& r = ref.value()[0].tensor();
    ASSERT_EQ(a.shape(), r.shape()) << op.type;
    for (int64_t i = 0; i < a.numel(); ++i) ASSERT_NEAR(a.data<float>()[i], r.data<float>()[i], 1e-5f) << op.type;
  }
}

// The one output-size rule of forward window ops (shape/window_size.h), which the kernels' geometry and
// shape inference both use.
TEST(OpsNnPool, WindowAxisRule) {
  using shape::WindowAutoPad;
  auto out = [](int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil, WindowAutoPad ap) {
    return shape::window_axis(in, k, s, d, pb, pe, ceil, ap);
  };
  EXPECT_EQ(out(224, 7, 2, 1, 3, 3, false, WindowAutoPad::kNotSet).out, 112);
  EXPECT_EQ(out(112, 3, 2, 1, 1, 1, false, WindowAutoPad::kNotSet).out, 56);
  EXPECT_EQ(out(5, 2, 2, 1, 0, 0, false, WindowAutoPad::kNotSet).out, 2);
  EXPECT_EQ(out(5, 2, 2, 1, 0, 0, true, WindowAutoPad::kNotSet).out, 3);
  EXPECT_EQ(out(4, 2, 2, 1, 1, 1, true, WindowAutoPad::kNotSet).out, 3);  // a 4th window would start in the right pad
  EXPECT_EQ(out(10, 3, 1, 2, 0, 0, false, WindowAutoPad::kNotSet).out, 6);  // dilated
  const shape::WindowAxis same = out(7, 4, 2, 1, 0, 0, false, WindowAutoPad::kSameUpper);
  EXPECT_EQ(same.out, 4);
  EXPECT_EQ(same.pad_begin, 1);
  EXPECT_EQ(same.pad_end, 2);
  const shape::WindowAxis lower = out(7, 4, 2, 1, 0, 0, false, WindowAutoPad::kSameLower);
  EXPECT_EQ(lower.pad_begin, 2);
  EXPECT_EQ(lower.pad_end, 1);
  const shape::WindowAxis valid = out(7, 3, 2, 1, 5, 5, false, WindowAutoPad::kValid);
  EXPECT_EQ(valid.out, 3);
  EXPECT_EQ(valid.pad_begin, 0);
  EXPECT_FALSE(out(2, 5, 1, 1, 1, 1, false, WindowAutoPad::kNotSet).fits);
  EXPECT_FALSE(out(2, 3, 1, 1, 0, 0, false, WindowAutoPad::kValid).fits);
}

// nxrt::FusedConv passes the overrides to the Conv kernel it wraps: on every forced path the residual and
// Relu come out as Relu(conv + bias + z), whether the path applies them in its store or leaves them to
// FusedConv.
TEST(OpsNnConv, FusedConvOnEveryForcedPath) {
  std::mt19937 rng(47);
  struct Shape {
    int64_t C, M, group, H, k, stride, pad;
  };
  const Shape shapes[] = {{16, 16, 1, 10, 3, 1, 1}, {3, 12, 1, 31, 7, 2, 3}, {64, 32, 1, 7, 1, 1, 0},
                          {8, 8, 8, 12, 3, 2, 1},   {64, 48, 1, 7, 3, 1, 1}, {32, 40, 1, 31, 3, 2, 1}};
  for (const Shape& sh : shapes) {
    const int64_t Cg = sh.C / sh.group;
    const int64_t out = (sh.H + 2 * sh.pad - sh.k) / sh.stride + 1;
    auto x = random_floats(rng, sh.C * sh.H * sh.H), w = random_floats(rng, sh.M * Cg * sh.k * sh.k);
    auto b = random_floats(rng, sh.M), z = random_floats(rng, sh.M * out * out);
    ConvShape s;
    s.N = 1, s.C = sh.C, s.M = sh.M, s.group = sh.group;
    WindowAttrs a;
    a.strides = {sh.stride, sh.stride};
    a.pads = {sh.pad, sh.pad, sh.pad, sh.pad};
    ASSERT_TRUE(forward_geometry(a, Dims{sh.H, sh.H}, Dims{sh.k, sh.k}, &s.g).ok());
    std::vector<float> ref(static_cast<size_t>(sh.M * out * out));
    conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
    for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(0.f, ref[i] + z[i]);
    nxrt::testing::KernelRun run;
    run.op_type = "FusedConv";
    run.domain = "nxrt";
    run.opset = 1;
    run.attributes = {attr_int("group", sh.group), attr_ints("strides", {sh.stride, sh.stride}),
                      attr_ints("pads", {sh.pad, sh.pad, sh.pad, sh.pad}), attr_string("activation", "Relu")};
    run.inputs = {ftensor({1, sh.C, sh.H, sh.H}, x), ftensor({sh.M, Cg, sh.k, sh.k}, w), ftensor({sh.M}, b),
                  ftensor({1, sh.M, out, out}, z)};
    for (int pi = 0; pi <= static_cast<int>(ConvPath::kStridedDirect); ++pi) {
      run.overrides = {{"conv.path", conv_path_name(static_cast<ConvPath>(pi))}};
      auto got = nxrt::testing::run_kernel(run);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      const Tensor& t = got.value()[0].tensor();
      ASSERT_EQ(t.numel(), static_cast<int64_t>(ref.size()));
      for (int64_t i = 0; i < t.numel(); ++i) {
        ASSERT_NEAR(t.data<float>()[i], ref[i], 2e-4f * (1.f + std::fabs(ref[i])))
            << "path " << conv_path_name(static_cast<ConvPath>(pi)) << " C" << sh.C << " k" << sh.k << " at " << i;
      }
      // The reference path is conv_naive itself: bit for bit, which shows the override reached the
      // wrapped Conv kernel.
      if (static_cast<ConvPath>(pi) == ConvPath::kReference) {
        for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(t.data<float>()[i], ref[i]) << "reference at " << i;
      }
    }
  }
}

// The FusedConv epilogue pass (activations the conv paths do not take in their store, and depthwise
// convs): its AVX2 loop gives the baseline loop's bits for every activation but Sigmoid and Tanh (the
// vector bodies: within a few ulps), with and without a residual, on a length that leaves a vector tail. The conv runs its reference path at both tiers so
// only the pass differs; both are checked against activation_of on the reference conv.
TEST(OpsNnConv, FusedConvEpilogueTiersAgree) {
  if (ep::cpu_isa_tier() < ep::IsaTier::kAvx2) GTEST_SKIP() << "no AVX2 on this CPU: the AVX2 pass is not checked";
  std::mt19937 rng(53);
  struct Case {
    const char* act;
    std::vector<float> params;
    Activation kind;
    int64_t group;
  };
  const Case cases[] = {{"HardSwish", {}, Activation::kHardSwish, 1},
                        {"HardSigmoid", {0.3f, 0.4f}, Activation::kHardSigmoid, 1},
                        {"Sigmoid", {}, Activation::kSigmoid, 1},
                        {"Tanh", {}, Activation::kTanh, 1},
                        {"LeakyRelu", {0.125f}, Activation::kLeakyRelu, 12},
                        {"Clip", {-0.5f, 0.75f}, Activation::kClip, 12},
                        {"Relu", {}, Activation::kRelu, 12}};
  const int64_t C = 12, M = 12, H = 11, out = 9;  // 3x3 valid: 12 x 9 x 9 = 972 outputs (121 vectors + 4)
  for (const Case& c : cases) {
    for (bool residual : {false, true}) {
      const int64_t Cg = C / c.group;
      auto x = random_floats(rng, C * H * H), w = random_floats(rng, M * Cg * 9);
      auto b = random_floats(rng, M), z = random_floats(rng, M * out * out);
      // Values around the activations' bends (HardSwish's -3 and 3, Clip's bounds).
      for (float& v : x) v *= 4.f;
      ConvShape s;
      s.N = 1, s.C = C, s.M = M, s.group = c.group;
      WindowAttrs a;
      ASSERT_TRUE(forward_geometry(a, Dims{H, H}, Dims{3, 3}, &s.g).ok());
      std::vector<float> ref(static_cast<size_t>(M * out * out));
      conv_naive<float>(s, x.data(), w.data(), b.data(), ref.data());
      const float pa = c.params.size() > 0 ? c.params[0] : 0.f, pb = c.params.size() > 1 ? c.params[1] : 0.f;
      for (size_t i = 0; i < ref.size(); ++i) ref[i] = apply_activation(c.kind, residual ? ref[i] + z[i] : ref[i], pa, pb);
      KernelRun run;
      run.op_type = "FusedConv";
      run.domain = "nxrt";
      run.opset = 1;
      run.attributes = {attr_int("group", c.group), attr_string("activation", c.act)};
      if (!c.params.empty()) run.attributes.push_back(nxrt::testing::attr_floats("activation_params", c.params));
      run.inputs = {ftensor({1, C, H, H}, x), ftensor({M, Cg, 3, 3}, w), ftensor({M}, b)};
      if (residual) run.inputs.push_back(ftensor({1, M, out, out}, z));
      std::vector<std::vector<float>> got;
      for (const char* tier : {"scalar", "avx2"}) {
        run.overrides = {{"conv.path", "reference"}, {"isa", tier}};
        auto r = run_kernel(run);
        ASSERT_TRUE(r.ok()) << c.act << " " << tier << ": " << r.status().to_string();
        const Tensor& t = r.value()[0].tensor();
        ASSERT_EQ(t.numel(), static_cast<int64_t>(ref.size()));
        got.emplace_back(t.data<float>(), t.data<float>() + t.numel());
        for (size_t i = 0; i < ref.size(); ++i) {
          ASSERT_NEAR(got.back()[i], ref[i], 1e-5f * (1.f + std::fabs(ref[i]))) << c.act << " " << tier << " at " << i;
        }
      }
      // Sigmoid and Tanh take the vector bodies of ops/elementwise/vec_math.h at the AVX2 tier: within a
      // few ulps of libm's, not its bits (test_vec_math.cpp holds them to the definitions).
      const bool vector_body = c.kind == Activation::kSigmoid || c.kind == Activation::kTanh;
      for (size_t i = 0; i < ref.size(); ++i) {
        if (vector_body) {
          ASSERT_NEAR(got[1][i], got[0][i], 4e-7f * std::fabs(got[0][i]) + 1e-9f) << c.act << " at " << i;
          continue;
        }
        ASSERT_EQ(std::memcmp(&got[0][i], &got[1][i], sizeof(float)), 0)
            << c.act << (residual ? " + residual" : "") << ": scalar " << got[0][i] << " vs avx2 " << got[1][i] << " at "
            << i;
      }
    }
  }
}
