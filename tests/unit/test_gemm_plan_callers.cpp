// The kernels that run the float GEMM on plans they keep in their variant (ConvTranspose, DeformConv,
// Einsum, RNN/GRU/LSTM): each computes bit for bit the same with and without a variant, at 1 and 2
// threads (shapes large enough that the projections and column GEMMs split over the pool), and a float
// LSTM run through a session at fixed shapes allocates nothing after its first run.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "alloc_counter.h"
#include "kernel_test_util.h"
#include "nxrt/float_types.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "variant_test_util.h"

using namespace nxrt;
using nxrt::testing::f64_tensor;
using nxrt::testing::f16_tensor;
using nxrt::testing::f32_tensor;
using nxrt::test::AllocCounter;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::expect_variant_paths_equal;
using nxrt::testing::graph_node;
using nxrt::testing::KernelRun;
using nxrt::testing::random_floats;
using nxrt::testing::tensor_info;

namespace {




TEST(GemmPlanCallers, ConvTransposeWithAndWithoutVariant) {
  std::mt19937 rng(1901);
  std::uniform_int_distribution<int> pick(0, 1000);
  for (int iter = 0; iter < 6; ++iter) {
    const int64_t group = 1 + pick(rng) % 2, Cg = 4 + pick(rng) % 13, Mg = 2 + pick(rng) % 9;
    const int64_t N = 1 + pick(rng) % 2, H = 6 + pick(rng) % 20, W = 6 + pick(rng) % 20;
    const int64_t k = 1 + pick(rng) % 3, s = 1 + pick(rng) % 2;
    const Dims xs{N, Cg * group, H, W}, ws{Cg * group, Mg, k, k};
    SCOPED_TRACE("iter " + std::to_string(iter) + " X " + shape_to_string(xs) + " W " + shape_to_string(ws));
    const auto x = random_floats(rng, shape_numel(xs)), w = random_floats(rng, shape_numel(ws)),
               b = random_floats(rng, Mg * group);
    KernelRun run;
    run.op_type = "ConvTranspose";
    run.opset = 22;
    run.attributes = {attr_int("group", group), attr_ints("strides", {s, s}),
                      attr_ints("pads", {iter % 2, 0, 0, iter % 2})};
    run.num_outputs = 1;
    for (auto make : {&f32_tensor, &f16_tensor}) {
      run.inputs = {make(xs, x), make(ws, w), make({Mg * group}, b)};
      run.const_inputs = {};
      expect_variant_paths_equal(run, true);
      run.const_inputs = {1};
      expect_variant_paths_equal(run, true);
    }
  }
}

TEST(GemmPlanCallers, DeformConvWithAndWithoutVariant) {
  std::mt19937 rng(1902);
  std::uniform_int_distribution<int> pick(0, 1000);
  for (int iter = 0; iter < 6; ++iter) {
    const int64_t group = 1 + pick(rng) % 2, offset_group = 1 + pick(rng) % 2;
    const int64_t C = group * offset_group * (2 + pick(rng) % 4), M = group * (4 + pick(rng) % 12);
    const int64_t N = 1 + pick(rng) % 2, H = 8 + pick(rng) % 16, W = 8 + pick(rng) % 16;
    const int64_t kh = 1 + pick(rng) % 3, kw = 1 + pick(rng) % 3, pad = pick(rng) % 2;
    const int64_t OH = H + 2 * pad - kh + 1, OW = W + 2 * pad - kw + 1;
    const Dims xs{N, C, H, W}, ws{M, C / group, kh, kw}, os{N, offset_group * kh * kw * 2, OH, OW},
        ms{N, offset_group * kh * kw, OH, OW};
    SCOPED_TRACE("iter " + std::to_string(iter) + " X " + shape_to_string(xs) + " W " + shape_to_string(ws));
    const auto x = random_floats(rng, shape_numel(xs)), w = random_floats(rng, shape_numel(ws));
    auto off = random_floats(rng, shape_numel(os));
    for (float& o : off) o *= 2.5f;
    const auto mask = random_floats(rng, shape_numel(ms)), b = random_floats(rng, M);
    KernelRun run;
    run.op_type = "DeformConv";
    run.opset = 22;
    run.attributes = {attr_int("group", group), attr_int("offset_group", offset_group),
                      attr_ints("pads", {pad, pad, pad, pad})};
    for (auto make : {&f32_tensor, &f16_tensor}) {
      run.inputs = {make(xs, x), make(ws, w), make(os, off), iter % 2 ? Value(make({M}, b)) : Value(),
                    iter % 3 ? Value(make(ms, mask)) : Value()};
      run.const_inputs = {};
      expect_variant_paths_equal(run, true);
      run.const_inputs = {1};
      expect_variant_paths_equal(run, true);
    }
  }
}

TEST(GemmPlanCallers, EinsumWithAndWithoutVariant) {
  std::mt19937 rng(1907);
  struct Case {
    std::string equation;
    std::vector<Dims> shapes;
    bool packs = true;  // whether a float product packs (declares scratch): not a GEMV
  };
  const std::vector<Case> cases = {
      {"ij,jk->ik", {{37, 70}, {70, 45}}},
      {"ij,kj->ik", {{64, 33}, {50, 33}}},
      {"bij,bjk->bik", {{3, 20, 31}, {3, 31, 17}}},
      {"bhid,bhjd->bhij", {{2, 3, 24, 16}, {2, 3, 19, 16}}},
      {"...ij,jk->...ik", {{2, 3, 40, 12}, {12, 36}}},
      {"abc,cd,de->abe", {{4, 9, 30}, {30, 25}, {25, 18}}},
      {"ii,ij->j", {{21, 21}, {21, 40}}, false},
      {"bn,anm,bm->ba", {{6, 14}, {5, 14, 11}, {6, 11}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.equation);
    std::vector<std::vector<float>> values;
    for (const Dims& d : c.shapes) values.push_back(random_floats(rng, shape_numel(d)));
    KernelRun run;
    run.op_type = "Einsum";
    run.opset = 12;
    run.attributes = {attr_string("equation", c.equation)};
    for (auto make : {&f32_tensor, &f16_tensor, &f64_tensor}) {
      const bool is_float = make == &f32_tensor || make == &f16_tensor;
      run.inputs.clear();
      for (size_t i = 0; i < c.shapes.size(); ++i) run.inputs.push_back(make(c.shapes[i], values[i]));
      expect_variant_paths_equal(run, is_float && c.packs);
    }
  }
}

// One random recurrent op: RNN, GRU or LSTM with random dims, direction, layout, initial states and
// sequence lengths.
void check_recurrent(const std::string& op, int64_t gates, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 1000);
  const char* directions[] = {"forward", "reverse", "bidirectional"};
  for (int iter = 0; iter < 6; ++iter) {
    const std::string direction = directions[iter % 3];
    const int64_t D = direction == "bidirectional" ? 2 : 1;
    const int64_t S = 1 + pick(rng) % 12, Bn = 1 + pick(rng) % 6, I = 1 + pick(rng) % 48, H = 1 + pick(rng) % 40;
    const int64_t layout = iter / 3;
    const bool with_bias = iter % 2 == 0, with_states = iter % 3 != 1, with_lens = iter % 2 == 1;
    const Dims xs = layout == 0 ? Dims{S, Bn, I} : Dims{Bn, S, I};
    const Dims state = layout == 0 ? Dims{D, Bn, H} : Dims{Bn, D, H};
    SCOPED_TRACE(op + " iter " + std::to_string(iter) + " " + direction + " X " + shape_to_string(xs) + " hidden " +
                 std::to_string(H) + " layout " + std::to_string(layout));
    const auto x = random_floats(rng, shape_numel(xs)), w = random_floats(rng, D * gates * H * I),
               r = random_floats(rng, D * gates * H * H), b = random_floats(rng, D * 2 * gates * H),
               h0 = random_floats(rng, shape_numel(state)), c0 = random_floats(rng, shape_numel(state)),
               p = random_floats(rng, D * 3 * H);
    std::vector<int32_t> lens(static_cast<size_t>(Bn));
    for (int32_t& l : lens) l = static_cast<int32_t>(pick(rng) % (S + 1));
    KernelRun run;
    run.op_type = op;
    run.opset = 22;
    run.attributes = {attr_int("hidden_size", H), attr_string("direction", direction), attr_int("layout", layout)};
    if (op == "GRU") run.attributes.push_back(attr_int("linear_before_reset", iter % 2));
    run.num_outputs = op == "LSTM" ? 3 : 2;
    for (auto make : {&f32_tensor, &f16_tensor, &f64_tensor}) {
      run.inputs = {make(xs, x), make({D, gates * H, I}, w), make({D, gates * H, H}, r),
                    with_bias ? Value(make({D, 2 * gates * H}, b)) : Value(),
                    with_lens ? Value(Tensor::from_vector<int32_t>(DataType::kInt32, {Bn}, lens)) : Value(),
                    with_states ? Value(make(state, h0)) : Value()};
      if (op == "LSTM") {
        run.inputs.push_back(with_states ? Value(make(state, c0)) : Value());
        run.inputs.push_back(iter % 2 ? Value(make({D, 3 * H}, p)) : Value());
      }
      expect_variant_paths_equal(run, true);
    }
  }
}

TEST(GemmPlanCallers, RnnWithAndWithoutVariant) { check_recurrent("RNN", 1, 1903); }
TEST(GemmPlanCallers, GruWithAndWithoutVariant) { check_recurrent("GRU", 3, 1904); }
TEST(GemmPlanCallers, LstmWithAndWithoutVariant) { check_recurrent("LSTM", 4, 1905); }

// A shape error is found by specialize (and by compute without a variant) with the message it always had.
TEST(GemmPlanCallers, RecurrentShapeErrorComesFromSpecialize) {
  KernelRun run;
  run.op_type = "LSTM";
  run.opset = 22;
  run.attributes = {attr_int("hidden_size", 4)};
  run.num_outputs = 3;
  std::mt19937 rng(1906);
  run.inputs = {f32_tensor({3, 2, 5}, random_floats(rng, 30)), f32_tensor({1, 16, 6}, random_floats(rng, 96)),
                f32_tensor({1, 16, 4}, random_floats(rng, 64))};
  for (bool specialize : {false, true}) {
    run.specialize = specialize;
    auto got = nxrt::testing::run_kernel(run);
    ASSERT_FALSE(got.ok());
    const std::string what = got.status().to_string();
    EXPECT_NE(what.find("W float32[1,16,6] must have shape [1,16,5]"), std::string::npos) << what;
    // compute names the node itself; the executor names it for a specialize error.
    if (!specialize) {
      EXPECT_NE(what.find("LSTM"), std::string::npos) << what;
    }
  }
}

TEST(GemmPlanCallers, FloatLstmAllocatesNothingAfterTheFirstRun) {
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const int64_t S = 7, Bn = 3, I = 24, H = 32, D = 2;
    ir::Model m;
    m.ir_version = 8;
    m.opset_imports.push_back({"", 17});
    m.graph.name = "lstm";
    m.graph.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(S), ir::Dim::fixed(Bn), ir::Dim::fixed(I)}),
                      tensor_info("h0", DataType::kFloat, {ir::Dim::fixed(D), ir::Dim::fixed(Bn), ir::Dim::fixed(H)})};
    m.graph.outputs = {tensor_info("y", DataType::kFloat, {ir::Dim::named("s"), ir::Dim::named("d"),
                                                          ir::Dim::named("b"), ir::Dim::named("h")}),
                       tensor_info("yh", DataType::kFloat, {ir::Dim::named("d"), ir::Dim::named("b"),
                                                           ir::Dim::named("h")}),
                       tensor_info("yc", DataType::kFloat, {ir::Dim::named("d"), ir::Dim::named("b"),
                                                           ir::Dim::named("h")})};
    m.graph.initializers["w"] = nxrt::testing::random_tensor({D, 4 * H, I}, 11);
    m.graph.initializers["r"] = nxrt::testing::random_tensor({D, 4 * H, H}, 12);
    m.graph.initializers["b"] = nxrt::testing::random_tensor({D, 8 * H}, 13);
    m.graph.nodes = {graph_node("LSTM", {"x", "w", "r", "b", "", "h0"}, {"y", "yh", "yc"},
                                {attr_int("hidden_size", H), attr_string("direction", "bidirectional")})};
    std::string bytes = onnx::serialize_model(m);
    SessionOptions o;
    o.capture = 0;
    o.threads = threads;
    o.kernel_overrides = {{"pool", "exact"}};  // 3 threads even on a 2-CPU machine
    auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    IoBinding b;
    b.bind_input("x", Value(nxrt::testing::random_tensor({S, Bn, I}, 14)));
    b.bind_input("h0", Value(nxrt::testing::random_tensor({D, Bn, H}, 15)));
    const size_t y_out = b.bind_output("y"), yh_out = b.bind_output("yh"), yc_out = b.bind_output("yc");
    ASSERT_TRUE((*s)->run(b).ok());
    auto values = [&](size_t i) {
      const Tensor& t = b.output(i).tensor();
      return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    };
    const std::vector<float> y = values(y_out), yh = values(yh_out), yc = values(yc_out);
    uint64_t allocs = 0;
    for (int i = 0; i < 5; ++i) {
      AllocCounter::arm();
      Status st = (*s)->run(b);
      AllocCounter::disarm();
      allocs += AllocCounter::count();
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(values(y_out), y);
      ASSERT_EQ(values(yh_out), yh);
      ASSERT_EQ(values(yc_out), yc);
    }
    EXPECT_EQ(allocs, 0u) << "heap allocations over 5 runs at unchanged shapes";
  }
}

}  // namespace
