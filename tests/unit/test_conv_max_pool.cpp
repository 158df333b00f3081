// nxrt::ConvMaxPool (a conv and the max pool reading it, computed band by band: ops/conv/conv_max_pool.cpp)
// and the pass that makes it (optimizer/fusions/fuse_conv_max_pool.cpp). The kernel's result matches a
// direct double-precision conv + activation + max pool on random shapes (strides, pads, dilations,
// groups, ceil mode, several bands per thread, batches) at every tier this CPU has, at 1 and 2 threads,
// with and without its variant; the pass fuses exactly the patterns it documents, and a model's outputs
// with it equal those without it within the conv engine's tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ep/cpu_features.h"
#include "ops/conv/stem_lanes.h"
#include "kernel_test_util.h"
#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;
using nxrt::testing::attr_floats;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

struct Case {
  int64_t N, C, M, H, W, group;
  int64_t k, s, d, pad;            // conv (square)
  int64_t pk, ps, ppad, ceil;      // pool (square)
  const char* act;                 // "", "Relu", "Clip", "LeakyRelu"
  bool bias;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil_mode) {
  const int64_t span = in + pb + pe - ((k - 1) * d + 1);
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (o - 1) * s >= in + pb) --o;  // a window may not start in the end padding
  return o;
}

double act_of(const Case& c, double v) {
  const std::string a = c.act;
  if (a == "Relu") return v > 0 ? v : 0;
  if (a == "Clip") return std::min(std::max(v, -0.25), 0.5);
  if (a == "LeakyRelu") return v >= 0 ? v : 0.1 * v;
  return v;
}

// Direct conv (double sums), activation, max pool.
std::vector<double> reference(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b, Dims* shape) {
  const int64_t OH = out_size(c.H, c.k, c.s, c.d, c.pad, c.pad, false), OW = out_size(c.W, c.k, c.s, c.d, c.pad, c.pad, false);
  const int64_t PH = out_size(OH, c.pk, c.ps, 1, c.ppad, c.ppad, c.ceil), PW = out_size(OW, c.pk, c.ps, 1, c.ppad, c.ppad, c.ceil);
  const int64_t Cg = c.C / c.group, Mg = c.M / c.group;
  std::vector<double> conv(static_cast<size_t>(c.N * c.M * OH * OW));
  const float* xp = x.data<float>();
  const float* wp = w.data<float>();
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t m = 0; m < c.M; ++m)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = c.bias ? b.data<float>()[m] : 0.0;
          const int64_t g = m / Mg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < c.k; ++kh)
              for (int64_t kw = 0; kw < c.k; ++kw) {
                const int64_t ih = oh * c.s - c.pad + kh * c.d, iw = ow * c.s - c.pad + kw * c.d;
                if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                acc += double(xp[((n * c.C + g * Cg + ci) * c.H + ih) * c.W + iw]) *
                       wp[((m * Cg + ci) * c.k + kh) * c.k + kw];
              }
          conv[static_cast<size_t>(((n * c.M + m) * OH + oh) * OW + ow)] = act_of(c, acc);
        }
  std::vector<double> y(static_cast<size_t>(c.N * c.M * PH * PW));
  for (int64_t p = 0; p < c.N * c.M; ++p)
    for (int64_t ph = 0; ph < PH; ++ph)
      for (int64_t pw = 0; pw < PW; ++pw) {
        double best = -INFINITY;
        for (int64_t i = 0; i < c.pk; ++i)
          for (int64_t j = 0; j < c.pk; ++j) {
            const int64_t r = ph * c.ps - c.ppad + i, q = pw * c.ps - c.ppad + j;
            if (r < 0 || r >= OH || q < 0 || q >= OW) continue;
            best = std::max(best, conv[static_cast<size_t>((p * OH + r) * OW + q)]);
          }
        y[static_cast<size_t>((p * PH + ph) * PW + pw)] = best;
      }
  *shape = {c.N, c.M, PH, PW};
  return y;
}

KernelRun conv_pool_run(const Case& c, const Tensor& x, const Tensor& w, const Tensor& b) {
  KernelRun run;
  run.op_type = "ConvMaxPool";
  run.domain = ir::kNxrtDomain;
  run.opset = 1;
  run.attributes = {attr_ints("kernel_shape", {c.k, c.k}), attr_ints("strides", {c.s, c.s}),
                    attr_ints("dilations", {c.d, c.d}), attr_ints("pads", {c.pad, c.pad, c.pad, c.pad}),
                    attr_int("group", c.group), attr_ints("pool_kernel_shape", {c.pk, c.pk}),
                    attr_ints("pool_strides", {c.ps, c.ps}), attr_ints("pool_pads", {c.ppad, c.ppad, c.ppad, c.ppad}),
                    attr_int("pool_ceil_mode", c.ceil)};
  const std::string act = c.act;
  if (!act.empty()) run.attributes.push_back(attr_string("activation", act));
  if (act == "Clip") run.attributes.push_back(attr_floats("activation_params", {-0.25f, 0.5f}));
  if (act == "LeakyRelu") run.attributes.push_back(attr_floats("activation_params", {0.1f}));
  run.inputs = {Value(x), Value(w)};
  if (c.bias) run.inputs.push_back(Value(b));
  run.const_inputs = c.bias ? std::vector<size_t>{1, 2} : std::vector<size_t>{1};
  return run;
}

std::vector<std::string> tiers_here() {
  std::vector<std::string> t = {"scalar"};
  if (ep::cpu_isa_tier() >= ep::IsaTier::kAvx2) t.push_back("avx2");
  if (ep::cpu_isa_tier() >= ep::IsaTier::kAvx512) t.push_back("avx512");
  if (ep::cpu_isa_tier() < ep::IsaTier::kAvx512) std::printf("[ note ] no AVX-512 here: the avx512 tier not run\n");
  return t;
}

void check_case(const Case& c, uint32_t seed) {
  const Tensor x = random_tensor({c.N, c.C, c.H, c.W}, seed);
  const Tensor w = random_tensor({c.M, c.C / c.group, c.k, c.k}, seed + 1, -0.5f, 0.5f);
  const Tensor b = random_tensor({c.M}, seed + 2);
  Dims shape;
  const std::vector<double> ref = reference(c, x, w, b, &shape);
  double scale = 1e-3;
  for (double v : ref) scale = std::max(scale, std::fabs(v));
  for (const std::string& tier : tiers_here()) {
    for (int threads : {1, 2, 3}) {
      for (bool specialize : {true, false}) {
        KernelRun run = conv_pool_run(c, x, w, b);
        run.threads = threads;
        run.specialize = specialize;
        run.overrides = {{"isa", tier}};
        auto out = run_kernel(run);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const Tensor& y = (*out)[0].tensor();
        ASSERT_EQ(y.shape(), shape) << "tier " << tier;
        for (int64_t i = 0; i < y.numel(); ++i) {
          ASSERT_NEAR(y.data<float>()[i], ref[static_cast<size_t>(i)], 2e-5 * scale * std::sqrt(double(c.C * c.k * c.k)))
              << "element " << i << " tier " << tier << " threads " << threads << " specialize " << specialize;
        }
      }
    }
  }
}

// A stem (3 -> 16 channels 3x3/2, pool 3x3/2): several bands a thread, the first with the image's top.
TEST(ConvMaxPool, StemShapeManyBands) {
  check_case({1, 3, 16, 227, 227, 1, 3, 2, 1, 0, 3, 2, 0, 0, "Relu", true}, 11);
}

// Bands whose pool windows overlap by two rows (3x3 stride 1) and by three (5x5 stride 2): each band
// after a part's first takes the rows it shares with the previous one over, and its first pooled rows
// combine the two parts of their windows.
TEST(ConvMaxPool, CarriedRowsBetweenBands) {
  check_case({1, 2, 32, 150, 150, 1, 3, 1, 1, 1, 3, 1, 1, 0, "Relu", true}, 101);
  check_case({1, 3, 32, 120, 120, 1, 3, 2, 1, 1, 5, 2, 2, 1, "", true}, 111);
}

// ResNet's stem shape (7x7/2 pad 3, pool 3x3/2 pad 1), smaller: pads at both ends of every axis.
TEST(ConvMaxPool, PaddedConvAndPool) {
  check_case({1, 3, 8, 70, 62, 1, 7, 2, 1, 3, 3, 2, 1, 0, "", true}, 21);
}

// VGG-like: 3x3/1 pad 1 conv (the Winograd path) and a 2x2/2 pool (windows that never overlap).
TEST(ConvMaxPool, WinogradConvTwoByTwoPool) {
  check_case({1, 16, 24, 64, 64, 1, 3, 1, 1, 1, 2, 2, 0, 0, "Relu", false}, 31);
}

// More input channels than output ones (bands would copy more than they write): the conv runs whole,
// then the pool, in the node's workspace.
TEST(ConvMaxPool, WholeConvThenPool) {
  check_case({1, 32, 16, 40, 40, 1, 3, 1, 1, 1, 2, 2, 0, 0, "Relu", true}, 81);
  check_case({2, 24, 8, 17, 23, 1, 3, 2, 1, 1, 3, 2, 1, 1, "Clip", true}, 91);
}

// Ceil mode (last window partly past the end), Clip, batch 2, grouped and dilated convs.
TEST(ConvMaxPool, CeilModeGroupsDilationBatch) {
  check_case({2, 8, 12, 33, 29, 2, 3, 1, 2, 2, 3, 2, 0, 1, "Clip", true}, 41);
  check_case({2, 4, 6, 21, 40, 1, 5, 3, 1, 1, 2, 1, 1, 0, "LeakyRelu", true}, 51);
}

// Planes smaller than a band and one pooled row: every part holds one band or none.
TEST(ConvMaxPool, TinyPlanes) {
  check_case({1, 5, 7, 6, 6, 1, 3, 1, 1, 0, 2, 2, 0, 0, "Relu", true}, 61);
  check_case({3, 2, 3, 3, 9, 1, 1, 1, 1, 0, 3, 3, 0, 1, "", false}, 71);
}

// Whether the lanes path (ops/conv/stem_lanes.h) takes case c at the AVX-512 tier.
bool lanes_take(const Case& c) {
  const int64_t OH = out_size(c.H, c.k, c.s, c.d, c.pad, c.pad, false), OW = out_size(c.W, c.k, c.s, c.d, c.pad, c.pad, false);
  const int64_t PH = out_size(OH, c.pk, c.ps, 1, c.ppad, c.ppad, c.ceil), PW = out_size(OW, c.pk, c.ps, 1, c.ppad, c.ppad, c.ceil);
  ops::ConvShape s;
  s.N = c.N;
  s.C = c.C;
  s.M = c.M;
  s.group = c.group;
  s.g.nsp = 2;
  s.g.set_axis(1, c.H, OH, c.k, c.s, c.d, c.pad, c.pad);
  s.g.set_axis(2, c.W, OW, c.k, c.s, c.d, c.pad, c.pad);
  ops::Geom3 pg;
  pg.nsp = 2;
  pg.set_axis(1, OH, PH, c.pk, c.ps, 1, c.ppad, c.ppad);
  pg.set_axis(2, OW, PW, c.pk, c.ps, 1, c.ppad, c.ppad);
  const std::vector<float> w(static_cast<size_t>(c.M * c.C * c.k * c.k), 0.f);
  ops::StemLanesPlan plan;
  return ops::stem_lanes_plan(s, pg, w.data(), ep::IsaTier::kAvx512, &plan);
}

// The lanes path on random shapes it takes: 1-4 input channels, kernels 1-5, strides and dilations 1-2,
// conv and pool pads, 16-64 output channels, pool windows 2-3 at strides 1-3,
// ceil mode, every activation, with and without bias, batches, rows shorter than its pixel block, at 1
// and 2 threads; the same cases run the band path at the scalar and AVX2 tiers.
TEST(ConvMaxPool, LanesPathRandomShapes) {
  if (ep::cpu_isa_tier() < ep::IsaTier::kAvx512) std::printf("[ note ] no AVX-512 here: the lanes path not run\n");
  std::mt19937 rng(2024);
  const char* acts[] = {"", "Relu", "Clip", "LeakyRelu"};
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int taken = 0;
  for (int it = 0; it < 40; ++it) {
    Case c{};
    c.N = pick(1, 2);
    c.C = pick(1, 4);
    c.M = 16 * pick(1, 4);
    c.group = 1;
    c.k = pick(1, 5);
    c.s = pick(1, 2);
    c.d = it % 5 == 0 ? 2 : 1;
    c.pad = pick(0, std::min<int64_t>(2, c.k - 1));
    c.H = pick(c.k * c.d + 4, 40);
    c.W = it % 7 == 0 ? pick(c.k * c.d, c.k * c.d + 3) : pick(c.k * c.d + 4, 48);  // some rows of a few pixels
    c.pk = pick(2, 3);
    c.ps = pick(1, 3);
    c.ppad = pick(0, c.pk - 1);
    c.ceil = pick(0, 1);
    c.act = acts[it % 4];
    c.bias = it % 3 != 1;
    if (!lanes_take(c)) continue;
    ++taken;
    SCOPED_TRACE("case " + std::to_string(it));
    check_case(c, 300 + static_cast<uint32_t>(it));
  }
  EXPECT_GE(taken, 30);
  // A partial channel vector (24 outputs) stays on the bands.
  EXPECT_FALSE(lanes_take({1, 3, 24, 224, 224, 1, 3, 2, 1, 1, 3, 2, 1, 0, "Relu", true}));
  EXPECT_TRUE(lanes_take({1, 3, 64, 224, 224, 1, 3, 2, 1, 0, 3, 2, 0, 0, "Relu", true}));
}

TEST(ConvMaxPool, Errors) {
  const Case c{1, 3, 4, 10, 10, 1, 3, 1, 1, 0, 2, 2, 0, 0, "Relu", true};
  const Tensor x = random_tensor({1, 3, 10, 10}, 1);
  const Tensor w = random_tensor({4, 3, 3, 3}, 2);
  const Tensor b = random_tensor({4}, 3);
  {  // X of the wrong channel count: an error naming both shapes
    KernelRun run = conv_pool_run(c, random_tensor({1, 5, 10, 10}, 4), w, b);
    auto out = run_kernel(run);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("has 5 channels"), std::string::npos) << out.status().to_string();
  }
  {  // double X
    KernelRun run = conv_pool_run(c, Tensor(DataType::kDouble, {1, 3, 10, 10}), w, b);
    auto out = run_kernel(run);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("takes float X"), std::string::npos) << out.status().to_string();
  }
  {  // an activation the fused kernel does not apply
    KernelRun run = conv_pool_run(c, x, w, b);
    for (auto& a : run.attributes)
      if (a.name == "activation") a.s = "Sigmoid";
    auto out = run_kernel(run);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("not one ConvMaxPool applies"), std::string::npos) << out.status().to_string();
  }
  {  // a pool kernel of one axis
    KernelRun run = conv_pool_run(c, x, w, b);
    for (auto& a : run.attributes)
      if (a.name == "pool_kernel_shape") a.ints = {2};
    auto out = run_kernel(run);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("pool_kernel_shape must be 2 sizes"), std::string::npos)
        << out.status().to_string();
  }
  {  // a bias of the wrong length
    KernelRun run = conv_pool_run(c, x, w, random_tensor({5}, 9));
    auto out = run_kernel(run);
    ASSERT_FALSE(out.ok());
    EXPECT_NE(out.status().message().find("one value per output channel"), std::string::npos) << out.status().to_string();
  }
}

// Conv (+ Relu) -> MaxPool as a model: fused at level all, the outputs those of the unfused graph.
ModelBuilder conv_relu_pool(bool relu, bool second_reader, bool indices) {
  ModelBuilder b(13);
  b.input("x", {-1, 3, 45, 45});
  b.init("w", random_tensor({32, 3, 3, 3}, 5));
  b.init("bias", random_tensor({32}, 6));
  b.node("Conv", {"x", "w", "bias"}, {"c"}, {A_is("kernel_shape", {3, 3}), A_is("strides", {2, 2})});
  std::string pooled = "c";
  if (relu) {
    b.node("Relu", {"c"}, {"r"});
    pooled = "r";
  }
  std::vector<std::string> outs = {"y"};
  if (indices) outs.push_back("idx");
  b.node("MaxPool", {pooled}, outs, {A_is("kernel_shape", {3, 3}), A_is("strides", {2, 2}), A_is("pads", {1, 1, 1, 1})});
  b.output("y");
  if (indices) b.output("idx");
  if (second_reader) {
    b.node("Neg", {pooled}, {"n"});
    b.output("n");
  }
  return b;
}

TEST(ConvMaxPoolFusion, FusesConvReluPoolAndKeepsNumerics) {
  for (bool relu : {true, false}) {
    const ModelBuilder b = conv_relu_pool(relu, false, false);
    optimizer::Stats st;
    const ir::Model m = optimized(b.m, OptLevel::kAll, &st);
    EXPECT_EQ(count_op(m, "ConvMaxPool"), 1);
    EXPECT_EQ(count_op(m, "MaxPool"), 0);
    EXPECT_EQ(st.counts["fused_conv_max_pool"], 1);
    expect_same_numerics(b.m, {{"x", Value(random_tensor({2, 3, 45, 45}, 7))}}, 2e-5);
  }
}

TEST(ConvMaxPoolFusion, LeavesOtherPatterns) {
  // The conv's output read twice, and a MaxPool with its Indices output.
  EXPECT_EQ(count_op(optimized(conv_relu_pool(true, true, false).m, OptLevel::kAll), "ConvMaxPool"), 0);
  EXPECT_EQ(count_op(optimized(conv_relu_pool(true, false, true).m, OptLevel::kAll), "ConvMaxPool"), 0);
  // A Sigmoid between them (not an activation the kernel applies before pooling).
  ModelBuilder s = conv_relu_pool(false, false, false);
  s.m.graph.nodes.back().inputs[0] = "sg";
  s.m.graph.nodes.insert(s.m.graph.nodes.end() - 1, s.m.graph.nodes.back());
  s.m.graph.nodes[1] = ir::Node();
  s.m.graph.nodes[1].name = "sig";
  s.m.graph.nodes[1].op_type = "Sigmoid";
  s.m.graph.nodes[1].inputs = {"c"};
  s.m.graph.nodes[1].outputs = {"sg"};
  EXPECT_EQ(count_op(optimized(s.m, OptLevel::kAll), "ConvMaxPool"), 0);
  // W a graph input (not constant).
  ModelBuilder g = conv_relu_pool(true, false, false);
  g.m.graph.initializers.erase("w");
  g.input("w", {32, 3, 3, 3});
  EXPECT_EQ(count_op(optimized(g.m, OptLevel::kAll), "ConvMaxPool"), 0);
  // A conv that writes less than twice what it reads per output pixel (3 channels x stride 2 x 2 = 12
  // against 16 outputs): bands would not pay.
  ModelBuilder n = conv_relu_pool(true, false, false);
  n.init("w", random_tensor({16, 3, 3, 3}, 5));
  n.init("bias", random_tensor({16}, 6));
  EXPECT_EQ(count_op(optimized(n.m, OptLevel::kAll), "ConvMaxPool"), 0);
  // A costly conv per output (3 x 5 x 5 = 75 multiply-adds): the rows two bands share cost more than
  // the memory saved.
  ModelBuilder k = conv_relu_pool(true, false, false);
  k.init("w", random_tensor({32, 3, 5, 5}, 5));
  k.m.graph.nodes[0].attributes[0].ints = {5, 5};
  EXPECT_EQ(count_op(optimized(k.m, OptLevel::kAll), "ConvMaxPool"), 0);
  // Disabled by name.
  ir::Model copy = conv_relu_pool(true, false, false).m;
  optimizer::Options o;
  o.registry = ops::cpu_provider_registry().get();
  o.disabled = {"fuse_conv_max_pool"};
  ASSERT_TRUE(optimizer::optimize(copy, o, nullptr).ok());
  EXPECT_EQ(count_op(copy, "ConvMaxPool"), 0);
  EXPECT_EQ(count_op(copy, "MaxPool"), 1);
}

}  // namespace
