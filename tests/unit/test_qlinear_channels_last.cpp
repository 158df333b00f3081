// Channels-last 8-bit convs: com.microsoft QLinearConv with channels_last = 1 and com.microsoft
// NhwcMaxPool against their NCHW ops on transposed data (byte for byte: the same sums, the same
// windows), and the qlinear_channels_last pass (optimizer/qlinear_channels_last.cpp) on a small QOperator
// network: the same output bytes as without it, convs and what lies between them channels-last with
// Transposes left only at the network's edges, nothing converted at the scalar tier.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "ep/cpu_features.h"
#include "kernel_test_util.h"
#include "optimizer_test_util.h"
#include "shape/shape_inference.h"

namespace nxrt {
namespace {

using testing::KernelRun;
using testing::random_bytes;

// [N, C, H, W] bytes <-> [N, H, W, C] bytes.
std::vector<uint8_t> to_last(const std::vector<uint8_t>& x, const Dims& nchw) {
  const int64_t N = nchw[0], C = nchw[1], H = nchw[2], W = nchw[3];
  std::vector<uint8_t> y(x.size());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p) y[static_cast<size_t>((n * H * W + p) * C + c)] = x[static_cast<size_t>((n * C + c) * H * W + p)];
  return y;
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const uint8_t* p = static_cast<const uint8_t*>(t.raw_data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

bool have_gemm_tier() { return ep::cpu_isa_tier() >= ep::IsaTier::kAvx2; }

TEST(QLinearChannelsLast, ConvMatchesTheNchwConvOnTransposedData) {
  if (!have_gemm_tier()) GTEST_SKIP() << "the channels-last conv needs the 8-bit GEMM (AVX2)";
  std::mt19937 rng(31);
  struct Case {
    Dims x, w;
    std::vector<int64_t> strides, pads;
    int64_t group;
  };
  const Case cases[] = {
      {{1, 16, 9, 11}, {32, 16, 3, 3}, {1, 1}, {1, 1, 1, 1}, 1},
      {{2, 64, 7, 7}, {24, 64, 1, 1}, {1, 1}, {0, 0, 0, 0}, 1},   // 1x1: rows read in place
      {{1, 12, 10, 8}, {16, 6, 3, 2}, {2, 1}, {0, 1, 1, 0}, 2},  // groups of 8 outputs
      {{1, 3, 13, 13}, {16, 3, 5, 5}, {2, 2}, {2, 2, 2, 2}, 1},  // a stem: 3 channels
      // Stems over the space-to-depth image: 7x7 stride 2 with uneven pads, stride 3 over 4 channels.
      {{2, 3, 21, 18}, {40, 3, 7, 7}, {2, 2}, {3, 2, 3, 3}, 1},
      {{1, 4, 14, 13}, {8, 4, 3, 3}, {3, 3}, {1, 0, 2, 1}, 1},
      // Stride 1 (the implicit GEMM over a padded copy): one row of taps, pads on one side only; one
      // column of taps, 4 channels.
      {{1, 8, 6, 10}, {16, 8, 1, 3}, {1, 1}, {0, 2, 0, 1}, 1},
      {{2, 4, 7, 5}, {8, 4, 3, 1}, {1, 1}, {1, 0, 2, 0}, 1},
      // Depthwise (the channels-last depthwise path): 3x3, and 5x5 with stride 2 and one-sided pads.
      {{1, 16, 9, 11}, {16, 1, 3, 3}, {1, 1}, {1, 1, 1, 1}, 16},
      {{2, 40, 10, 9}, {40, 1, 5, 5}, {2, 2}, {2, 1, 2, 2}, 40},
      {{1, 12, 6, 20}, {12, 1, 3, 3}, {1, 1}, {0, 1, 1, 0}, 12},  // channels off the 8- and 16-wide steps
  };
  for (const Case& c : cases)
    for (bool x_signed : {false, true}) {
      const DataType xdt = x_signed ? DataType::kInt8 : DataType::kUInt8;
      const int64_t M = c.w[0];
      const auto xb = random_bytes(rng, static_cast<size_t>(shape_numel(c.x)));
      Tensor w = Tensor::from_vector<uint8_t>(DataType::kInt8, c.w, random_bytes(rng, static_cast<size_t>(shape_numel(c.w))));
      std::vector<float> ws(static_cast<size_t>(M));
      for (float& v : ws) v = 0.002f + static_cast<float>(rng() % 100) * 1e-4f;
      std::vector<int32_t> bias(static_cast<size_t>(M));
      for (int32_t& v : bias) v = static_cast<int32_t>(rng() % 4001) - 2000;
      // Symmetric weights but for the depthwise cases, whose path takes per-channel zero points too.
      const bool depthwise = c.group == c.x[1];
      const std::vector<uint8_t> wzv = depthwise ? random_bytes(rng, static_cast<size_t>(M)) : std::vector<uint8_t>(static_cast<size_t>(M), 0);
      auto inputs = [&](Tensor x) {
        return std::vector<Value>{Value(x), Value(Tensor::scalar_float(0.03f)), Value(Tensor::from_vector<uint8_t>(xdt, {}, {7})), Value(w),
                                  Value(Tensor::from_vector<float>(DataType::kFloat, {M}, ws)),
                                  Value(Tensor::from_vector<uint8_t>(DataType::kInt8, {M}, wzv)),
                                  Value(Tensor::scalar_float(0.6f)), Value(Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {100})),
                                  Value(Tensor::from_vector<int32_t>(DataType::kInt32, {M}, bias))};
      };
      const std::vector<ir::Attribute> attrs = {testing::attr_ints("strides", c.strides), testing::attr_ints("pads", c.pads),
                                                testing::attr_int("group", c.group)};
      KernelRun nchw{"QLinearConv", "", 10, attrs, inputs(Tensor::from_vector<uint8_t>(xdt, c.x, xb))};
      nchw.const_inputs = {3, 4, 5, 8};
      nchw.overrides = {{"isa", "scalar"}, {"reference", "1"}};  // the double engine's direct definition
      auto want = testing::run_kernel(nchw);
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      const Tensor& wt = (*want)[0].tensor();
      const Dims xl = {c.x[0], c.x[2], c.x[3], c.x[1]};
      std::vector<ir::Attribute> cl_attrs = attrs;
      cl_attrs.push_back(testing::attr_int("channels_last", 1));
      // The machine's tier and the AVX2 one (its own requantization loop), 1 and 2 threads; depthwise
      // convs also at the scalar tier (their path has a loop for each).
      for (int tries = 0; tries < (depthwise ? 6 : 4); ++tries) {
        const int threads = 1 + tries % 2;
        KernelRun last{"QLinearConv", "com.microsoft", 1, cl_attrs, inputs(Tensor::from_vector<uint8_t>(xdt, xl, to_last(xb, c.x)))};
        last.const_inputs = {3, 4, 5, 8};
        last.threads = threads;
        if (tries >= 2) last.overrides = {{"isa", tries >= 4 ? "scalar" : "avx2"}};
        auto got = testing::run_kernel(last);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        const Tensor& gt = (*got)[0].tensor();
        ASSERT_EQ(gt.shape(), (Dims{wt.dim(0), wt.dim(2), wt.dim(3), wt.dim(1)}));
        EXPECT_EQ(bytes_of(gt), to_last(bytes_of(wt), wt.shape()))
            << shape_to_string(c.x) << (x_signed ? " int8" : " uint8") << " threads " << threads
            << (tries >= 4 ? " scalar" : tries >= 2 ? " avx2" : "");
      }
    }
  // Groups of fewer than 8 outputs that are not depthwise have no channels-last path: an error that says so.
  KernelRun dw{"QLinearConv", "com.microsoft", 1, {testing::attr_int("group", 2), testing::attr_int("channels_last", 1)},
               {Value(Tensor(DataType::kUInt8, {1, 5, 5, 4})), Value(Tensor::scalar_float(1.f)), Value(Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {0})),
                Value(Tensor::from_vector<uint8_t>(DataType::kInt8, {4, 2, 3, 3}, std::vector<uint8_t>(72, 1))), Value(Tensor::scalar_float(1.f)),
                Value(Tensor::from_vector<uint8_t>(DataType::kInt8, {}, {0})), Value(Tensor::scalar_float(1.f)),
                Value(Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {0}))}};
  dw.const_inputs = {3, 5};
  auto r = testing::run_kernel(dw);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("channels_last"), std::string::npos) << r.status().message();
}

TEST(QLinearChannelsLast, NhwcMaxPoolMatchesMaxPoolOnTransposedData) {
  std::mt19937 rng(37);
  struct Case {
    Dims x;
    std::vector<int64_t> k, s, pads, d;
    int64_t ceil;
  };
  const Case cases[] = {{{1, 24, 11, 13}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 0},
                        {{2, 5, 9, 9}, {2, 3}, {1, 2}, {0, 1, 0, 1}, {1, 1}, 1},
                        {{1, 33, 8, 7}, {3, 2}, {2, 1}, {1, 0, 1, 1}, {2, 1}, 0},
                        // 81 taps: past the 64 a pixel's taps are gathered for, the rest folded in place.
                        {{1, 20, 12, 11}, {9, 9}, {1, 2}, {4, 4, 4, 4}, {1, 1}, 0}};
  for (const Case& c : cases)
    for (bool s8 : {false, true}) {
      const DataType dt = s8 ? DataType::kInt8 : DataType::kUInt8;
      const auto xb = random_bytes(rng, static_cast<size_t>(shape_numel(c.x)));
      const std::vector<ir::Attribute> attrs = {testing::attr_ints("kernel_shape", c.k), testing::attr_ints("strides", c.s),
                                                testing::attr_ints("pads", c.pads), testing::attr_ints("dilations", c.d),
                                                testing::attr_int("ceil_mode", c.ceil)};
      auto want = testing::run_kernel(KernelRun{"MaxPool", "", 12, attrs, {Value(Tensor::from_vector<uint8_t>(dt, c.x, xb))}});
      ASSERT_TRUE(want.ok()) << want.status().to_string();
      const Tensor& wt = (*want)[0].tensor();
      for (int threads : {1, 2}) {
        KernelRun r{"NhwcMaxPool", "com.microsoft", 1, attrs,
                    {Value(Tensor::from_vector<uint8_t>(dt, {c.x[0], c.x[2], c.x[3], c.x[1]}, to_last(xb, c.x)))}};
        r.threads = threads;
        auto got = testing::run_kernel(r);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        EXPECT_EQ(bytes_of((*got)[0].tensor()), to_last(bytes_of(wt), wt.shape())) << shape_to_string(c.x) << (s8 ? " int8" : " uint8");
      }
    }
}

// A QOperator network: two 3x3 convs, a residual QLinearAdd, a Concat of two branches, a MaxPool, a
// QLinearMul by a per-channel constant and a QLinearGlobalAveragePool; the batch fixed or a symbol.
optest::ModelBuilder qoperator_net(bool dynamic_batch) {
  using namespace optest;
  std::mt19937 rng(41);
  ModelBuilder b(13);
  b.m.opset_imports.push_back({"com.microsoft", 1});
  b.input("x", {dynamic_batch ? -1 : 1, 16, 12, 12});
  b.init("xs", scalar_f(0.02f));
  b.init("xz", Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {128}));
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  auto conv = [&](const std::string& in, const std::string& out, int64_t cin, int64_t cout, const char* tag) {
    const std::string w = std::string("w_") + tag, ws = std::string("ws_") + tag, wz = std::string("wz_") + tag;
    b.init(w, Tensor::from_vector<uint8_t>(DataType::kInt8, {cout, cin, 3, 3}, random_bytes(rng, static_cast<size_t>(cout * cin * 9))));
    b.init(ws, scalar_f(0.004f));
    b.init(wz, Tensor::from_vector<uint8_t>(DataType::kInt8, {}, {0}));
    b.node("QLinearConv", {in, "xs", "xz", w, ws, wz, "xs", "xz"}, {out}, {A_is("pads", {1, 1, 1, 1})});
  };
  conv("xq", "c1", 16, 16, "a");
  conv("c1", "c2", 16, 16, "b");
  b.node("QLinearAdd", {"c2", "xs", "xz", "xq", "xs", "xz", "xs", "xz"}, {"r"}).domain = "com.microsoft";
  conv("r", "c3", 16, 8, "c");
  conv("r", "c4", 16, 8, "d");
  b.node("QLinearConcat", {"xs", "xz", "c3", "xs", "xz", "c4", "xs", "xz"}, {"cat"}, {A_i("axis", 1)}).domain = "com.microsoft";
  b.node("MaxPool", {"cat"}, {"mp"}, {A_is("kernel_shape", {2, 2}), A_is("strides", {2, 2})});
  conv("mp", "c5", 16, 16, "e");
  // A per-channel operand, [1, C, 1, 1]: it gets a small Transpose of its own.
  b.init("pc", Tensor::from_vector<uint8_t>(DataType::kUInt8, {1, 16, 1, 1}, random_bytes(rng, 16)));
  b.node("QLinearMul", {"c5", "xs", "xz", "pc", "xs", "xz", "xs", "xz"}, {"c5m"}).domain = "com.microsoft";
  // An elementwise 8-bit op inside the chain (no Transposes around it).
  b.node("QLinearLeakyRelu", {"c5m", "xs", "xz", "xs", "xz"}, {"c5l"}, {A_f("alpha", 0.1f)}).domain = "com.microsoft";
  b.node("QLinearAveragePool", {"c5l", "xs", "xz", "xs", "xz"}, {"ap"},
         {A_is("kernel_shape", {3, 3}), A_is("pads", {1, 1, 1, 1}), A_i("count_include_pad", 1)}).domain = "com.microsoft";
  b.node("QLinearGlobalAveragePool", {"ap", "xs", "xz", "xs", "xz"}, {"gap"}).domain = "com.microsoft";
  b.node("DequantizeLinear", {"gap", "xs", "xz"}, {"y"});
  b.output("y");
  return b;
}

// QLinearAdd and QLinearMul overwrite A where A dies at them (their schemas' in-place input 0): the same
// bytes as when A is also a graph output (kept, so written to a buffer of its own), for A the same shape
// as the output and B full, per-channel ([C]) or scalar, 1 and 2 threads, levels disabled and all.
TEST(QLinearChannelsLast, BinaryOpsInPlaceOnTheirFirstOperand) {
  using namespace optest;
  for (const char* op : {"QLinearAdd", "QLinearMul"})
    for (const Dims& b_shape : {Dims{3, 40, 37}, Dims{37}, Dims{}})
      for (bool keep_a : {false, true}) {
        SCOPED_TRACE(std::string(op) + " b " + shape_to_string(b_shape) + (keep_a ? " kept" : " in place"));
        ModelBuilder b(13);
        b.m.opset_imports.push_back({"com.microsoft", 1});
        b.input("x", {3, 40, 37});
        b.init("xs", scalar_f(0.02f));
        b.init("xz", Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {128}));
        b.init("bs", scalar_f(0.03f));
        b.init("bz", Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {100}));
        b.init("ys", scalar_f(std::string(op) == "QLinearMul" ? 0.004f : 0.05f));
        b.init("yz", Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {120}));
        std::mt19937 rng(53);
        const std::vector<uint8_t> bv = random_bytes(rng, static_cast<size_t>(shape_numel(b_shape)));
        b.init("bq", Tensor::from_vector<uint8_t>(DataType::kUInt8, b_shape, bv));
        b.node("QuantizeLinear", {"x", "xs", "xz"}, {"a"});
        b.node(op, {"a", "xs", "xz", "bq", "bs", "bz", "ys", "yz"}, {"y"}).domain = "com.microsoft";
        b.output("y", DataType::kUInt8);
        if (keep_a) b.output("a", DataType::kUInt8);
        const std::vector<std::pair<std::string, Value>> feeds = {{"x", Value(random_tensor({3, 40, 37}, 9, -3.f, 3.f))}};
        for (OptLevel level : {OptLevel::kDisabled, OptLevel::kAll})
          for (int threads : {1, 2}) {
            auto got = run_at(b.m, level, feeds, threads);
            ASSERT_FALSE(got.empty());
            // The formula on a's bytes (QuantizeLinear's, which the kept run returns).
            const Tensor x = random_tensor({3, 40, 37}, 9, -3.f, 3.f);
            const bool mul = std::string(op) == "QLinearMul";
            const float ys = mul ? 0.004f : 0.05f;
            for (int64_t i = 0; i < x.numel(); ++i) {
              const float xv = x.data<float>()[i];
              const int32_t aq = static_cast<int32_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(xv / 0.02f) + 128.0f)));
              const int64_t bi = i % static_cast<int64_t>(bv.size());
              const float va = 0.02f * static_cast<float>(aq - 128), vb = 0.03f * static_cast<float>(bv[static_cast<size_t>(bi)] - 100);
              const float v = mul ? va * vb : va + vb;
              const int32_t want = static_cast<int32_t>(std::min(255.0f, std::max(0.0f, std::nearbyint(v / ys) + 120.0f)));
              ASSERT_EQ(static_cast<int32_t>(got[0].data<uint8_t>()[i]), want) << "element " << i << " threads " << threads;
              if (keep_a) {
                ASSERT_EQ(static_cast<int32_t>(got[1].data<uint8_t>()[i]), aq) << "a at " << i;
              }
            }
          }
      }
}

TEST(QLinearChannelsLast, PassKeepsTheBytesAndTransposesOnlyAtTheEdges) {
  for (bool dynamic_batch : {false, true}) {
    SCOPED_TRACE(dynamic_batch ? "dynamic batch" : "fixed batch");
    using namespace optest;
    ModelBuilder b = qoperator_net(dynamic_batch);
    const std::vector<std::pair<std::string, Value>> feeds = {{"x", Value(random_tensor({1, 16, 12, 12}, 5, -2.f, 2.f))}};
    ir::Model copy = b.m;
    ASSERT_TRUE(shape::infer_shapes(copy).ok());
    optimizer::Stats st;
    optimizer::Options o;
    o.registry = ops::cpu_provider_registry().get();
    ir::Model on = copy;
    ASSERT_TRUE(optimizer::optimize(on, o, &st).ok());
    if (!have_gemm_tier()) {
      EXPECT_EQ(st.counts["qlinear_channels_last"], 0);
      GTEST_SKIP() << "no 8-bit GEMM tier: nothing converted";
    }
    EXPECT_EQ(st.counts["qlinear_channels_last"], 5);  // the convs
    EXPECT_EQ(count_op(on, "NhwcMaxPool"), 1);
    // x's quantized copy in, the per-channel operand, the pooled [1, 1, 1, C] out (constant folding may
    // turn the operand's into an initializer)
    EXPECT_LE(count_op(on, "Transpose"), 3);
    EXPECT_GE(count_op(on, "Transpose"), 2);
    // The pools read channels-last: the QLinearMul before them (per-channel operand) stayed channels-last.
    int pools_last = 0;
    for (const auto& n : on.graph.nodes)
      if (n.op_type == "QLinearGlobalAveragePool" || n.op_type == "QLinearAveragePool")
        for (const auto& a : n.attributes) pools_last += a.name == "channels_last" && a.i == 1;
    EXPECT_EQ(pools_last, 2);
    // At the scalar tier the kernels have no channels-last path: the pass leaves the graph alone.
    o.isa = ep::IsaTier::kScalar;
    optimizer::Stats st_scalar;
    ir::Model off = copy;
    ASSERT_TRUE(optimizer::optimize(off, o, &st_scalar).ok());
    EXPECT_EQ(st_scalar.counts["qlinear_channels_last"], 0);
    EXPECT_EQ(count_op(off, "Transpose"), 0);
    // The same bytes as the NCHW graph (the pass disabled), 1 and 2 threads.
    for (int threads : {1, 2}) {
      std::string bytes = onnx::serialize_model(b.m);
      auto run = [&](bool disable) {
        SessionOptions so;
        so.threads = threads;
        if (disable) so.disabled_optimizers = {"qlinear_channels_last"};
        auto s = Session::create_from_bytes(bytes.data(), bytes.size(), so);
        EXPECT_TRUE(s.ok()) << s.status().to_string();
        auto out = (*s)->run(feeds);
        EXPECT_TRUE(out.ok()) << out.status().to_string();
        return (*out)[0].tensor();
      };
      const Tensor a = run(false), c = run(true);
      ASSERT_EQ(a.shape(), c.shape());
      EXPECT_EQ(std::memcmp(a.raw_data(), c.raw_data(), a.nbytes()), 0) << "threads " << threads;
    }
  }
}

}  // namespace
}  // namespace nxrt

namespace nxrt {
namespace {
// A QLinearConv whose w_zero_point is given at run time: neither channels-last path can prepare its
// weights at creation, so the pass leaves it NCHW and the session runs it (it had been converted, and
// the channels-last kernel then refused it).
TEST(QLinearChannelsLast, PassLeavesAConvWithARunTimeWeightZeroPoint) {
  if (!have_gemm_tier()) GTEST_SKIP() << "no 8-bit GEMM tier: the pass converts nothing";
  using namespace optest;
  std::mt19937 rng(47);
  ModelBuilder b(13);
  b.input("x", {1, 16, 6, 6});
  b.input("wz", {16});
  b.m.graph.inputs.back().type.elem_type = DataType::kInt8;
  b.init("xs", scalar_f(0.02f));
  b.init("xz", Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {128}));
  b.init("w", Tensor::from_vector<uint8_t>(DataType::kInt8, {16, 16, 3, 3}, random_bytes(rng, 16 * 16 * 9)));
  b.init("ws", scalar_f(0.004f));
  b.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"});
  b.node("QLinearConv", {"xq", "xs", "xz", "w", "ws", "wz", "xs", "xz"}, {"c"}, {A_is("pads", {1, 1, 1, 1})});
  b.node("DequantizeLinear", {"c", "xs", "xz"}, {"y"});
  b.output("y");
  ir::Model copy = b.m;
  ASSERT_TRUE(shape::infer_shapes(copy).ok());
  optimizer::Stats st;
  optimizer::Options o;
  o.registry = ops::cpu_provider_registry().get();
  ASSERT_TRUE(optimizer::optimize(copy, o, &st).ok());
  EXPECT_EQ(st.counts["qlinear_channels_last"], 0);
  const std::string bytes = onnx::serialize_model(b.m);
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), SessionOptions{});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto out = (*s)->run({{"x", Value(random_tensor({1, 16, 6, 6}, 9, -2.f, 2.f))},
                        {"wz", Value(Tensor::from_vector<uint8_t>(DataType::kInt8, {16}, random_bytes(rng, 16)))}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
}
}  // namespace
}  // namespace nxrt
