// nxrt::MatMulNBitsSiluMul (a gate/up MatMulNBits pair and the SwiGLU product after it, one kernel) and
// the pass that makes it (src/optimizer/fusions/fuse_matmulnbits_silu_mul.cpp). The kernel's product
// has the bits of the unfused pair (nxrt::MatMulNBitsSplit) followed by SiluMul's body, at every tier
// this CPU has, for decode and prefill rows, with and without a variant, at 1 and 2 threads; the
// optimized graph has the bits of the graph the pass leaves alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "ep/cpu_features.h"
#include "kernel_test_util.h"
#include "ops/contrib/matmul_nbits.h"
#include "ops/elementwise/silu_mul.h"
#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

// One MatMulNBits' constants: 4-bit codes [N, kb, 16] (block 32), scales, packed uint8 zero points.
struct Weights {
  Tensor B, S, Z, bias;
};

Weights random_weights(std::mt19937& rng, int64_t K, int64_t N) {
  const int64_t kb = (K + 31) / 32, zrow = (kb * 4 + 7) / 8;
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sc(0.01f, 0.1f);
  std::normal_distribution<float> nd(0.f, 1.f);
  Weights w{Tensor(DataType::kUInt8, {N, kb, 16}), Tensor(DataType::kFloat, {N * kb}), Tensor(DataType::kUInt8, {N * zrow}),
            Tensor(DataType::kFloat, {N})};
  for (int64_t i = 0; i < w.B.numel(); ++i) w.B.data<uint8_t>()[i] = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < w.S.numel(); ++i) w.S.data<float>()[i] = sc(rng);
  for (int64_t i = 0; i < w.Z.numel(); ++i) w.Z.data<uint8_t>()[i] = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < w.bias.numel(); ++i) w.bias.data<float>()[i] = nd(rng);
  return w;
}

// bias: 0 none, 1 both, 2 the up's only.
KernelRun pair_run(const char* op, int64_t K, int64_t N, const Tensor& A, const Weights& g, const Weights& u, bool zp,
                   int bias) {
  KernelRun run;
  run.op_type = op;
  run.domain = ir::kNxrtDomain;
  run.opset = 1;
  const bool split = std::string(op) == "MatMulNBitsSplit";
  run.attributes = {attr_int("K", K), attr_int("N", split ? 2 * N : N), attr_int("bits", 4), attr_int("block_size", 32),
                    attr_int("accuracy_level", 4)};
  if (split) run.attributes.push_back(attr_ints("splits", {N, N}));
  run.num_outputs = split ? 2 : 1;
  run.inputs = {Value(A)};
  for (const Weights* w : {&g, &u}) {
    run.inputs.push_back(Value(w->B));
    run.inputs.push_back(Value(w->S));
    run.inputs.push_back(zp ? Value(w->Z) : Value());
  }
  if (bias > 0) {
    run.inputs.push_back(bias == 1 ? Value(g.bias) : Value());
    run.inputs.push_back(Value(u.bias));
  }
  for (size_t i = 1; i < run.inputs.size(); ++i)
    if (run.inputs[i].is_tensor()) run.const_inputs.push_back(i);
  return run;
}

}  // namespace

TEST(MatMulNBitsSiluMul, KernelHasTheBitsOfTheSplitPairThenSiluMul) {
  std::mt19937 rng(41);
  int checked = 0;
  for (const char* tier_name : {"scalar", "avx2", "avx512", "amx"}) {
    const ep::IsaTier tier = *ep::parse_isa_tier(tier_name);
    if (tier > ep::cpu_isa_tier()) {
      std::printf("[ SKIPPED  ] tier %s: this CPU's best tier is %s\n", tier_name, ep::isa_tier_name(ep::cpu_isa_tier()));
      continue;
    }
    for (int it = 0; it < 12; ++it) {
      const int64_t K = it % 2 ? 200 : 96, N = it % 3 == 0 ? 32 : 96;
      const int64_t M = it % 4 == 0 ? 1 : it % 4 == 1 ? 5 : it % 4 == 2 ? 33 : 2;  // 33: AMX's 32-row tiles
      const bool zp = it % 5 != 1;
      const int bias = it % 3;
      const Weights g = random_weights(rng, K, N), u = random_weights(rng, K, N);
      const Tensor A = random_tensor({M, K}, 100 + it);
      for (int threads : {1, 2, 3})
        for (bool specialize : {false, true}) {
          SCOPED_TRACE(std::string("tier ") + tier_name + " K " + std::to_string(K) + " N " + std::to_string(N) + " M " +
                       std::to_string(M) + " zp " + std::to_string(zp) + " bias " + std::to_string(bias) + " threads " +
                       std::to_string(threads) + " variant " + std::to_string(specialize));
          KernelRun split = pair_run("MatMulNBitsSplit", K, N, A, g, u, zp, bias);
          KernelRun fused = pair_run("MatMulNBitsSiluMul", K, N, A, g, u, zp, bias);
          for (KernelRun* r : {&split, &fused}) {
            r->threads = threads;
            r->specialize = specialize;
            r->overrides = {{"isa", tier_name}};
          }
          auto halves = run_kernel(split);
          auto got = run_kernel(fused);
          ASSERT_TRUE(halves.ok()) << halves.status().to_string();
          ASSERT_TRUE(got.ok()) << got.status().to_string();
          const Tensor& gt = (*halves)[0].tensor();
          const Tensor& ut = (*halves)[1].tensor();
          const Tensor& y = (*got)[0].tensor();
          ASSERT_EQ(y.shape(), (Dims{M, N}));
          std::vector<float> want(static_cast<size_t>(M * N));
          ops::silu_mul_f32(gt.data<float>(), ut.data<float>(), want.data(), M * N, tier >= ep::IsaTier::kAvx512);
          for (int64_t i = 0; i < M * N; ++i) {
            ASSERT_EQ(y.data<float>()[i], want[static_cast<size_t>(i)]) << "element " << i;
            // And it is Swish(g) * u (a check on silu_mul_f32 itself).
            const double gv = gt.data<float>()[i], uv = ut.data<float>()[i];
            const double ref = gv / (1.0 + std::exp(-gv)) * uv;
            ASSERT_NEAR(y.data<float>()[i], ref, 1e-5 * (1.0 + std::fabs(ref))) << "element " << i;
          }
          ++checked;
        }
    }
  }
  EXPECT_GE(checked, 48);
}

TEST(MatMulNBitsSiluMul, KernelErrorsNameTheProblem) {
  std::mt19937 rng(43);
  const Weights g = random_weights(rng, 96, 40), u = random_weights(rng, 96, 40);
  auto r = run_kernel(pair_run("MatMulNBitsSiluMul", 96, 40, random_tensor({1, 96}, 1), g, u, false, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("N=40 must be a multiple of the panel width"), std::string::npos) << r.status().to_string();
  const Weights g2 = random_weights(rng, 96, 32), u2 = random_weights(rng, 96, 32);
  Tensor h(DataType::kFloat16, {1, 96});
  r = run_kernel(pair_run("MatMulNBitsSiluMul", 96, 32, h, g2, u2, false, 0));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("A must be float32, got float16"), std::string::npos) << r.status().to_string();
  KernelRun level0 = pair_run("MatMulNBitsSiluMul", 96, 32, random_tensor({1, 96}, 2), g2, u2, false, 0);
  level0.attributes.back() = attr_int("accuracy_level", 0);
  r = run_kernel(level0);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("takes accuracy_level 4"), std::string::npos) << r.status().to_string();
  KernelRun short_up = pair_run("MatMulNBitsSiluMul", 96, 32, random_tensor({1, 96}, 3), g2, random_weights(rng, 96, 64), false, 0);
  r = run_kernel(short_up);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output 1's B must be uint8 [32, 3, 16]"), std::string::npos) << r.status().to_string();
}

namespace {

constexpr int64_t kK = 96;

// a [2, 3, K] -> Relu -> r; gate and up MatMulNBits(r) (N columns, accuracy_level 4), optional bias
// Adds; y = (g * Sigmoid(g)) * u, with g the first sibling (or, gate_second, the second).
ModelBuilder swiglu(int64_t N, bool zero_points, bool bias, bool gate_second, uint32_t seed = 7) {
  ModelBuilder b(21);
  b.m.opset_imports.push_back({"com.microsoft", 1});
  b.input("a", {2, 3, kK});
  b.node("Relu", {"a"}, {"r"});
  std::mt19937 rng(seed);
  for (const char* name : {"first", "second"}) {
    const Weights w = random_weights(rng, kK, N);
    b.init(std::string(name) + "_B", w.B);
    b.init(std::string(name) + "_S", w.S);
    std::vector<std::string> in = {"r", std::string(name) + "_B", std::string(name) + "_S"};
    if (zero_points) {
      b.init(std::string(name) + "_Z", w.Z);
      in.push_back(std::string(name) + "_Z");
    }
    const std::string y = bias ? std::string(name) + "_mm" : std::string(name);
    ir::Node& n = b.node("MatMulNBits", in, {y},
                         {A_i("K", kK), A_i("N", N), A_i("bits", 4), A_i("block_size", 32), A_i("accuracy_level", 4)});
    n.domain = "com.microsoft";
    if (bias) {
      b.init(std::string(name) + "_bias", w.bias);
      b.node("Add", {y, std::string(name) + "_bias"}, {name});
    }
  }
  const std::string g = gate_second ? "second" : "first", u = gate_second ? "first" : "second";
  b.node("Sigmoid", {g}, {"sig"});
  b.node("Mul", {g, "sig"}, {"swish"});
  b.node("Mul", {"swish", u}, {"y"});
  b.output("y");
  return b;
}

int fused_pairs(const ir::Model& m) {
  optimizer::Stats st;
  optimized(m, OptLevel::kAll, &st);
  return st.counts.count("fused_matmulnbits_silu_mul") ? st.counts.at("fused_matmulnbits_silu_mul") : 0;
}

}  // namespace

TEST(MatMulNBitsSiluMulFusion, GateUpPairAndSiluMulBecomeOneNodeWithTheSameBits) {
  for (int c = 0; c < 4; ++c) {
    const bool zp = c % 2 == 1, bias = c >= 2, gate_second = c == 1 || c == 2;
    SCOPED_TRACE("zero points " + std::to_string(zp) + " bias " + std::to_string(bias) + " gate second " +
                 std::to_string(gate_second));
    const ModelBuilder b = swiglu(64, zp, bias, gate_second);
    EXPECT_EQ(fused_pairs(b.m), 1);
    const ir::Model o = optimized(b.m, OptLevel::kAll);
    EXPECT_EQ(count_op(o, "MatMulNBitsSiluMul"), 1);
    EXPECT_EQ(count_op(o, "MatMulNBitsSplit") + count_op(o, "SiluMul") + count_op(o, "MatMulNBits") + count_op(o, "Add"), 0);
    for (const auto& n : o.graph.nodes) {
      if (n.op_type != "MatMulNBitsSiluMul") continue;
      EXPECT_EQ(n.outputs, (std::vector<std::string>{"y"}));
      EXPECT_EQ(n.find_attribute("N")->i, 64);
      EXPECT_EQ(n.find_attribute("splits"), nullptr);
      const std::string g = gate_second ? "second" : "first", u = gate_second ? "first" : "second";
      ASSERT_GE(n.inputs.size(), 6u);  // (trailing absent inputs dropped)
      EXPECT_EQ(n.inputs[1], g + "_B");
      EXPECT_EQ(n.inputs[4], u + "_B");
      if (bias) {
        ASSERT_EQ(n.inputs.size(), 9u);
        EXPECT_EQ(n.inputs[7], g + "_bias");
        EXPECT_EQ(n.inputs[8], u + "_bias");
      }
    }
    // The same graph with the gate also a graph output keeps the stacked pair and SiluMul apart: the
    // fused node's y is that graph's y, bit for bit, for decode (1 row) and prefill (6 rows) shapes.
    ModelBuilder apart = b;
    apart.output(gate_second ? "second" : "first");
    EXPECT_EQ(fused_pairs(apart.m), 0);
    const ir::Model ao = optimized(apart.m, OptLevel::kAll);
    EXPECT_EQ(count_op(ao, "MatMulNBitsSplit"), 1);
    EXPECT_EQ(count_op(ao, "SiluMul"), 1);
    for (const Dims& shape : {Dims{2, 3, kK}, Dims{1, 1, kK}}) {
      ModelBuilder bs = b, as = apart;
      for (ModelBuilder* mb : {&bs, &as}) mb->m.graph.inputs[0] = ModelBuilder::vi("a", shape);
      const Tensor a = random_tensor(shape, 17);
      const auto got = run_at(bs.m, OptLevel::kAll, {{"a", Value(a)}});
      const auto want = run_at(as.m, OptLevel::kAll, {{"a", Value(a)}});
      ASSERT_EQ(got.size(), 1u);
      ASSERT_EQ(want.size(), 2u);
      ASSERT_EQ(got[0].shape(), want[0].shape());
      for (int64_t i = 0; i < got[0].numel(); ++i) ASSERT_EQ(got[0].data<float>()[i], want[0].data<float>()[i]) << "element " << i;
    }
    // And the unoptimized graph (MatMulNBits, Sigmoid, Mul) agrees within rounding.
    expect_same_numerics(b.m, {{"a", Value(random_tensor({2, 3, kK}, 18))}}, 1e-5);
  }
}

TEST(MatMulNBitsSiluMulFusion, LeavesOtherPairsAlone) {
  // The up product read elsewhere too.
  ModelBuilder b = swiglu(64, false, false, false);
  b.output("second");
  EXPECT_EQ(fused_pairs(b.m), 0);
  // Three stacked siblings: the Split has a third output.
  ModelBuilder c = swiglu(64, false, false, false);
  std::mt19937 rng(9);
  const Weights w = random_weights(rng, kK, 32);
  c.init("third_B", w.B);
  c.init("third_S", w.S);
  ir::Node& n = c.node("MatMulNBits", {"r", "third_B", "third_S"}, {"third"},
                       {A_i("K", kK), A_i("N", 32), A_i("bits", 4), A_i("block_size", 32), A_i("accuracy_level", 4)});
  n.domain = "com.microsoft";
  c.output("third");
  EXPECT_EQ(fused_pairs(c.m), 0);
  EXPECT_EQ(count_op(optimized(c.m, OptLevel::kAll), "MatMulNBitsSplit"), 1);
  // Not a SwiGLU product: g * u without the Sigmoid.
  ModelBuilder d = swiglu(64, false, false, false);
  d.m.graph.nodes.resize(d.m.graph.nodes.size() - 3);
  d.node("Mul", {"first", "second"}, {"y"});
  EXPECT_EQ(fused_pairs(d.m), 0);
}

// SessionOptions::disabled_optimizers (ORT's disabled_optimizers) skips a pass by name: the pair stays
// a MatMulNBitsSplit and a SiluMul, with the same outputs; a name that is no pass fails creation and
// the error lists the passes.
TEST(MatMulNBitsSiluMulFusion, DisabledOptimizersSkipThePass) {
  const ModelBuilder b = swiglu(64, true, false, false);
  ir::Model copy = b.m;
  optimizer::Options o;
  o.registry = ops::cpu_provider_registry().get();
  o.disabled = {"fuse_matmulnbits_silu_mul"};
  optimizer::Stats st;
  ASSERT_TRUE(optimizer::optimize(copy, o, &st).ok());
  EXPECT_EQ(st.counts.count("fused_matmulnbits_silu_mul"), 0u);
  EXPECT_EQ(count_op(copy, "MatMulNBitsSplit"), 1);
  EXPECT_EQ(count_op(copy, "SiluMul"), 1);

  const std::string bytes = onnx::serialize_model(b.m);
  const Tensor a = random_tensor({2, 3, kK}, 19);
  std::vector<Tensor> ys;
  for (bool disable : {false, true}) {
    SessionOptions so;
    if (disable) so.disabled_optimizers = {"fuse_matmulnbits_silu_mul"};
    auto s = Session::create_from_bytes(bytes.data(), bytes.size(), so);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto out = (*s)->run({{"a", Value(a)}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ys.push_back((*out)[0].tensor());
  }
  ASSERT_EQ(ys[0].numel(), ys[1].numel());
  EXPECT_EQ(std::memcmp(ys[0].raw_data(), ys[1].raw_data(), ys[0].nbytes()), 0);

  SessionOptions bad;
  bad.disabled_optimizers = {"fuse_swiglu"};
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), bad);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("'fuse_swiglu' is no optimizer pass"), std::string::npos) << s.status().to_string();
  EXPECT_NE(s.status().message().find("fuse_matmulnbits_silu_mul"), std::string::npos) << s.status().to_string();
}
