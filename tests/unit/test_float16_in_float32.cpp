// compute_float16_in_float32 (src/optimizer/float16_in_float32.cpp): float16 / bfloat16 nodes of the
// listed ops run in float32, widened where float16 values enter, rounded where they leave. Checks the
// rewritten graph (which nodes, which casts, what stays float16), the graph's interface, and the
// numbers: a converted region's outputs are the float32 computation rounded once, and stay within
// float16 tolerance of the op-by-op float16 kernels.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "nxrt/float_types.h"
#include "optimizer_test_util.h"
#include "shape/shape_inference.h"

using namespace nxrt;
using namespace nxrt::optest;

namespace {

Tensor half_tensor(const Dims& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  const Tensor f = random_tensor(shape, seed, lo, hi);
  Tensor h(DataType::kFloat16, shape);
  for (int64_t i = 0; i < f.numel(); ++i) h.data<Float16>()[i] = Float16(f.data<float>()[i]);
  return h;
}

Tensor bf16_tensor(const Dims& shape, uint32_t seed) {
  const Tensor f = random_tensor(shape, seed);
  Tensor h(DataType::kBFloat16, shape);
  for (int64_t i = 0; i < f.numel(); ++i) h.data<BFloat16>()[i] = BFloat16(f.data<float>()[i]);
  return h;
}

std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) {
    switch (t.dtype()) {
      case DataType::kFloat16: v[i] = static_cast<float>(t.data<Float16>()[i]); break;
      case DataType::kBFloat16: v[i] = static_cast<float>(t.data<BFloat16>()[i]); break;
      case DataType::kFloat: v[i] = t.data<float>()[i]; break;
      case DataType::kInt64: v[i] = static_cast<double>(t.data<int64_t>()[i]); break;
      default: ADD_FAILURE() << "dtype " << dtype_name(t.dtype());
    }
  }
  return v;
}

void set_type(ir::ValueInfo& v, DataType t) { v.type.elem_type = t; }

// Optimized at `level` after load-time shape inference (the pass reads the inferred dtypes).
ir::Model optimized_inferred(const ir::Model& m, OptLevel level, optimizer::Stats* st = nullptr,
                             std::vector<std::string> disabled = {}) {
  ir::Model copy = m;
  EXPECT_TRUE(shape::infer_shapes(copy).ok());
  optimizer::Options o;
  o.registry = ops::cpu_provider_registry().get();
  o.level = level;
  o.disabled = std::move(disabled);
  Status s = optimizer::optimize(copy, o, st);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return copy;
}

const ir::Node* node_writing(const ir::Model& m, const std::string& name) {
  for (const auto& n : m.graph.nodes)
    if (std::find(n.outputs.begin(), n.outputs.end(), name) != n.outputs.end()) return &n;
  return nullptr;
}

// x [4, 8] float16 -> MatMul(W [8, 6]) -> Add(b) -> Relu = r (a graph output) -> Floor -> f (a graph
// output); Floor stays float16 (its result turns on exact values).
ModelBuilder region_model() {
  ModelBuilder b(17);
  b.input("x", {4, 8});
  set_type(b.m.graph.inputs[0], DataType::kFloat16);
  b.init("W", half_tensor({8, 6}, 3));
  b.init("b", half_tensor({6}, 4));
  b.node("MatMul", {"x", "W"}, {"mm"});
  b.node("Add", {"mm", "b"}, {"a"});
  b.node("Relu", {"a"}, {"r"});
  b.init("k", Tensor::from_vector<Float16>(DataType::kFloat16, {}, {Float16(4.f)}));
  b.node("Mul", {"r", "k"}, {"r4"});
  b.node("Floor", {"r4"}, {"f"});
  b.output("r");
  b.output("f");
  for (auto& o : b.m.graph.outputs) set_type(o, DataType::kFloat16);
  return b;
}

// GroupQueryAttention's int32 length inputs, and its three float16 outputs as graph outputs.
void add_gqa_lengths(ModelBuilder& b) {
  b.input("seqlens_k", {1});
  b.m.graph.inputs.back().type.elem_type = DataType::kInt32;
  b.input("total_len", {});
  b.m.graph.inputs.back().type.elem_type = DataType::kInt32;
}
void add_gqa_outputs(ModelBuilder& b) {
  for (const char* o : {"attn", "present_key", "present_value"}) {
    b.output(o);
    set_type(b.m.graph.outputs.back(), DataType::kFloat16);
  }
}

}  // namespace

TEST(Float16InFloat32, ConvertsTheRegionAndRoundsWhereValuesLeaveIt) {
  ModelBuilder b = region_model();
  optimizer::Stats st;
  ir::Model o = optimized_inferred(b.m, OptLevel::kBasic, &st);
  // The weights folded to float32 initializers; x widened once; r rounded under its own name (a graph
  // output), r4 rounded for Floor, which stays float16.
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Cast", "MatMul", "Add", "Relu", "Cast", "Mul", "Cast", "Floor"}));
  EXPECT_EQ(st.counts["float16_nodes_in_float32"], 4);
  EXPECT_EQ(st.counts["float16_widening_casts"], 1);    // x
  EXPECT_EQ(st.counts["float16_constants_widened"], 3);  // W, b, k: float32 initializers
  EXPECT_EQ(st.counts["float16_rounding_casts"], 2);
  const ir::Node* mm = node_writing(o, "mm_f32");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->inputs[0], "x_f32");
  ASSERT_TRUE(o.graph.initializers.count(mm->inputs[1]));
  EXPECT_EQ(o.graph.initializers.at(mm->inputs[1]).dtype(), DataType::kFloat);
  const ir::Node* rr = node_writing(o, "r");
  ASSERT_NE(rr, nullptr);
  EXPECT_EQ(rr->op_type, "Cast");
  EXPECT_EQ(rr->inputs[0], "r_f32");
  EXPECT_EQ(node_writing(o, "f")->op_type, "Floor");
  EXPECT_EQ(node_writing(o, "f")->inputs[0], "r4");
  // The interface: inputs and outputs keep float16.
  EXPECT_EQ(o.graph.inputs[0].type.elem_type, DataType::kFloat16);
  EXPECT_EQ(o.graph.outputs[0].type.elem_type, DataType::kFloat16);
}

TEST(Float16InFloat32, OutputsAreTheFloat32ComputationRoundedOnce) {
  ModelBuilder b = region_model();
  const Tensor x = half_tensor({4, 8}, 11, -2.f, 2.f);
  auto got = run_at(b.m, OptLevel::kAll, {{"x", Value(x)}});
  auto per_op = run_at(b.m, OptLevel::kDisabled, {{"x", Value(x)}});
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(per_op.size(), 2u);
  EXPECT_EQ(got[0].dtype(), DataType::kFloat16);
  EXPECT_EQ(got[1].dtype(), DataType::kFloat16);
  // r in float32 from the float16 values, rounded once.
  const auto xs = as_doubles(x), ws = as_doubles(b.m.graph.initializers.at("W")), bs = as_doubles(b.m.graph.initializers.at("b"));
  const auto r = as_doubles(got[0]), f = as_doubles(got[1]), r_op = as_doubles(per_op[0]);
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 6; ++j) {
      float acc = 0.f;
      for (int k = 0; k < 8; ++k) acc += static_cast<float>(xs[i * 8 + k]) * static_cast<float>(ws[k * 6 + j]);
      acc += static_cast<float>(bs[j]);
      const float relu = std::max(acc, 0.f);
      const double want = static_cast<float>(Float16(relu));
      const size_t e = static_cast<size_t>(i * 6 + j);
      // The GEMM's summation order may differ from this loop's: one float16 ulp either way.
      EXPECT_NEAR(r[e], want, std::ldexp(1.0, -10) * std::max(1.0, std::fabs(want))) << e;
      // Op by op (each op rounded): within float16 tolerance of the region's result.
      EXPECT_NEAR(r_op[e], r[e], 4e-3 * (1 + std::fabs(r[e]))) << e;
      // Floor read the rounded product.
      EXPECT_EQ(f[e], std::floor(static_cast<float>(Float16(static_cast<float>(Float16(relu)) * 4.f)))) << e;
    }
  }
}

TEST(Float16InFloat32, DisablingThePassKeepsTheFloat16Kernels) {
  ModelBuilder b = region_model();
  ir::Model o = optimized_inferred(b.m, OptLevel::kAll, nullptr, {"compute_float16_in_float32"});
  EXPECT_EQ(count_op(o, "Cast"), 0);
  EXPECT_EQ(o.graph.initializers.at("W").dtype(), DataType::kFloat16);
}

TEST(Float16InFloat32, CastsInsideTheRegion) {
  // y16 = Cast<float16>(xf) (xf float32) feeds Add with a float16 input; the sum is cast to float32
  // (a graph output) and to int64 (stays: its value turns on exact values, so it reads the rounded sum).
  ModelBuilder b(17);
  b.input("xf", {5});
  b.input("h", {5});
  set_type(b.m.graph.inputs[1], DataType::kFloat16);
  b.node("Cast", {"xf"}, {"y16"}, {A_i("to", static_cast<int64_t>(DataType::kFloat16))});
  b.node("Add", {"y16", "h"}, {"s"});
  b.node("Cast", {"s"}, {"s32"}, {A_i("to", static_cast<int64_t>(DataType::kFloat))});
  b.node("Cast", {"s"}, {"si"}, {A_i("to", static_cast<int64_t>(DataType::kInt64))});
  b.output("s32");
  b.output("si");
  b.m.graph.outputs[1].type.elem_type = DataType::kInt64;
  ir::Model o = optimized_inferred(b.m, OptLevel::kBasic);
  // Both float Casts became Identities: the one inside went, the one writing graph output s32 stays (a
  // copy); h widened; s rounded for the int64 Cast.
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Cast", "Add", "Cast", "Identity", "Cast"}));
  const ir::Node* add = node_writing(o, "s_f32");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->op_type, "Add");
  EXPECT_EQ(add->inputs[0], "xf");
  EXPECT_EQ(node_writing(o, "s32")->inputs[0], "s_f32");
  const ir::Node* si = node_writing(o, "si");
  ASSERT_NE(si, nullptr);
  EXPECT_EQ(si->inputs[0], "s");
  EXPECT_EQ(node_writing(o, "s")->op_type, "Cast");
  // Numbers: s32 = xf + h in float32 (no rounding of xf to float16 inside the region).
  Tensor xf = Tensor::from_vector<float>(DataType::kFloat, {5}, {1.0001f, -2.5f, 3.14159f, 1000.3f, -0.2f});
  Tensor h = Tensor::from_vector<Float16>(DataType::kFloat16, {5},
                                          {Float16(0.5f), Float16(0.25f), Float16(-1.f), Float16(0.5f), Float16(2.f)});
  auto got = run_at(b.m, OptLevel::kBasic, {{"xf", Value(xf)}, {"h", Value(h)}});
  ASSERT_EQ(got.size(), 2u);
  const auto hs = as_doubles(h), s32 = as_doubles(got[0]), si_v = as_doubles(got[1]);
  for (int i = 0; i < 5; ++i) {
    const float want = xf.data<float>()[i] + static_cast<float>(hs[i]);
    EXPECT_EQ(s32[i], want) << i;
    EXPECT_EQ(si_v[i], std::trunc(static_cast<float>(Float16(want)))) << i;
  }
}

TEST(Float16InFloat32, SubgraphReadsKeepTheFloat16Value) {
  // An If branch reads the region's value by its name: it stays a float16 value (rounded).
  ModelBuilder b(17);
  b.input("x", {3});
  set_type(b.m.graph.inputs[0], DataType::kFloat16);
  b.input("c", {});
  b.m.graph.inputs[1].type.elem_type = DataType::kBool;
  b.init("k", Tensor::from_vector<Float16>(DataType::kFloat16, {3}, {Float16(1.f), Float16(2.f), Float16(3.f)}));
  b.node("Mul", {"x", "k"}, {"m"});
  auto branch = [](const std::string& op) {
    auto g = std::make_shared<ir::Graph>();
    g->name = op;
    ir::Node n;
    n.op_type = op;
    n.inputs = {"m"};
    n.outputs = {"o_" + op};
    g->nodes.push_back(n);
    ir::ValueInfo v;
    v.name = "o_" + op;
    v.type.kind = ir::TypeInfo::Kind::kTensor;
    v.type.elem_type = DataType::kFloat16;
    g->outputs.push_back(v);
    return g;
  };
  b.node("If", {"c"}, {"y"}, {A_g("then_branch", branch("Neg")), A_g("else_branch", branch("Abs"))});
  b.output("y");
  set_type(b.m.graph.outputs[0], DataType::kFloat16);
  ir::Model o = optimized_inferred(b.m, OptLevel::kBasic);
  const ir::Node* m = node_writing(o, "m");
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->op_type, "Cast");  // the Mul runs in float32 and its product is rounded as "m"
  Tensor x = half_tensor({3}, 5);
  Tensor c = Tensor::from_vector<bool>(DataType::kBool, {}, {true});
  auto got = run_at(b.m, OptLevel::kBasic, {{"x", Value(x)}, {"c", Value(c)}});
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].dtype(), DataType::kFloat16);
  const auto xs = as_doubles(x), y = as_doubles(got[0]);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(y[i], -static_cast<float>(Float16(static_cast<float>(xs[i]) * (i + 1)))) << i;
}

TEST(Float16InFloat32, Bfloat16RoundsBackToBfloat16) {
  ModelBuilder b(17);
  b.input("x", {2, 4});
  set_type(b.m.graph.inputs[0], DataType::kBFloat16);
  b.init("W", bf16_tensor({4, 3}, 7));
  b.node("MatMul", {"x", "W"}, {"y"});
  b.output("y");
  set_type(b.m.graph.outputs[0], DataType::kBFloat16);
  ir::Model o = optimized_inferred(b.m, OptLevel::kBasic);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Cast", "MatMul", "Cast"}));
  const Tensor x = bf16_tensor({2, 4}, 8);
  auto got = run_at(b.m, OptLevel::kBasic, {{"x", Value(x)}});
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(got[0].dtype(), DataType::kBFloat16);
  const auto xs = as_doubles(x), ws = as_doubles(b.m.graph.initializers.at("W")), y = as_doubles(got[0]);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) {
      float acc = 0.f;
      for (int k = 0; k < 4; ++k) acc += static_cast<float>(xs[i * 4 + k]) * static_cast<float>(ws[k * 3 + j]);
      EXPECT_NEAR(y[i * 3 + j], static_cast<float>(BFloat16(acc)), std::ldexp(1.0, -7) * std::max(1.f, std::fabs(acc)));
    }
}

TEST(Float16InFloat32, GroupQueryAttentionKeepsItsFloat16Cache) {
  // A decode step: q/k/v from x by MatMuls (the region), GroupQueryAttention over a float16 past of 3
  // rows in a cache of 4; the past/present stay float16 graph inputs/outputs, the query side float32.
  const int64_t H = 2, kvH = 1, D = 8, cap = 4;
  ModelBuilder b(17);
  b.m.opset_imports.push_back({"com.microsoft", 1});
  b.input("x", {1, 1, 16});
  b.input("past_key", {1, kvH, cap, D});
  b.input("past_value", {1, kvH, cap, D});
  for (auto& in : b.m.graph.inputs) set_type(in, DataType::kFloat16);
  add_gqa_lengths(b);
  b.init("Wq", half_tensor({16, H * D}, 21));
  b.init("Wk", half_tensor({16, kvH * D}, 22));
  b.init("Wv", half_tensor({16, kvH * D}, 23));
  b.node("MatMul", {"x", "Wq"}, {"q"});
  b.node("MatMul", {"x", "Wk"}, {"k"});
  b.node("MatMul", {"x", "Wv"}, {"v"});
  ir::Node& g = b.node("GroupQueryAttention", {"q", "k", "v", "past_key", "past_value", "seqlens_k", "total_len"},
                       {"attn", "present_key", "present_value"}, {A_i("num_heads", H), A_i("kv_num_heads", kvH)});
  g.domain = "com.microsoft";
  add_gqa_outputs(b);
  ir::Model o = optimized_inferred(b.m, OptLevel::kBasic);
  const ir::Node* gqa = node_writing(o, "present_key");
  ASSERT_NE(gqa, nullptr);
  EXPECT_EQ(gqa->op_type, "GroupQueryAttention");
  EXPECT_EQ(gqa->inputs[0], "q_f32");
  EXPECT_EQ(gqa->inputs[3], "past_key");
  EXPECT_EQ(gqa->inputs[4], "past_value");
  EXPECT_EQ(gqa->outputs[0], "attn_f32");
  EXPECT_EQ(gqa->outputs[2], "present_value");
  EXPECT_EQ(node_writing(o, "attn")->op_type, "Cast");
  const std::vector<std::pair<std::string, Value>> feeds = {
      {"x", Value(half_tensor({1, 1, 16}, 31))},
      {"past_key", Value(half_tensor({1, kvH, cap, D}, 32))},
      {"past_value", Value(half_tensor({1, kvH, cap, D}, 33))},
      {"seqlens_k", Value(Tensor::from_vector<int32_t>(DataType::kInt32, {1}, {3}))},
      {"total_len", Value(Tensor::from_vector<int32_t>(DataType::kInt32, {}, {4}))}};
  auto got = run_at(b.m, OptLevel::kBasic, feeds);
  auto per_op = run_at(b.m, OptLevel::kDisabled, feeds);
  ASSERT_EQ(got.size(), 3u);
  ASSERT_EQ(per_op.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    ASSERT_EQ(got[k].dtype(), DataType::kFloat16) << k;
    const auto a = as_doubles(got[k]), r = as_doubles(per_op[k]);
    ASSERT_EQ(a.size(), r.size());
    for (size_t i = 0; i < a.size(); ++i) {
      if (k == 0) {
        EXPECT_NEAR(a[i], r[i], 4e-3 * (1 + std::fabs(r[i]))) << "attn " << i;
      } else {
        // The new row: k / v in float32 rounded once to float16 when appended, as the float16 MatMul
        // rounded its output: the same cache bits.
        EXPECT_EQ(a[i], r[i]) << "present " << k << " " << i;
      }
    }
  }
}

TEST(Float16InFloat32, DataMovementJoinsOnlyBehindTheRegion) {
  // Gather from a float16 table stays float16 (its rows are widened, not the table); a Reshape of the
  // region's own value joins it.
  ModelBuilder b(17);
  b.input("ids", {3});
  b.m.graph.inputs[0].type.elem_type = DataType::kInt64;
  b.init("table", half_tensor({50, 8}, 41));
  b.init("W", half_tensor({8, 4}, 42));
  b.init("shape", ints({12}));
  b.node("Gather", {"table", "ids"}, {"rows"});
  b.node("MatMul", {"rows", "W"}, {"mm"});
  b.node("Reshape", {"mm", "shape"}, {"y"});
  b.output("y");
  set_type(b.m.graph.outputs[0], DataType::kFloat16);
  ir::Model o = optimized_inferred(b.m, OptLevel::kBasic);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"Gather", "Cast", "MatMul", "Reshape", "Cast"}));
  EXPECT_EQ(node_writing(o, "rows")->op_type, "Gather");
  EXPECT_EQ(o.graph.initializers.at("table").dtype(), DataType::kFloat16);
  EXPECT_EQ(node_writing(o, "y_f32")->op_type, "Reshape");
  const Tensor ids = Tensor::from_vector<int64_t>(DataType::kInt64, {3}, {7, 0, 49});
  auto got = run_at(b.m, OptLevel::kBasic, {{"ids", Value(ids)}});
  auto per_op = run_at(b.m, OptLevel::kDisabled, {{"ids", Value(ids)}});
  ASSERT_EQ(got.size(), 1u);
  ASSERT_EQ(per_op.size(), 1u);
  // One MatMul rounded once either way: the same bits.
  EXPECT_EQ(as_doubles(got[0]), as_doubles(per_op[0]));
}

TEST(Float16InFloat32, GroupQueryAttentionWithoutPastKeepsFloat16) {
  // A prompt node writing presents from no past: its cache type would follow the query, so the node
  // stays float16 (its presents must stay the declared float16).
  const int64_t H = 2, kvH = 1, D = 8, S = 3;
  ModelBuilder b(17);
  b.m.opset_imports.push_back({"com.microsoft", 1});
  b.input("q", {1, S, H * D});
  b.input("k", {1, S, kvH * D});
  b.input("v", {1, S, kvH * D});
  for (auto& in : b.m.graph.inputs) set_type(in, DataType::kFloat16);
  add_gqa_lengths(b);
  ir::Node& g = b.node("GroupQueryAttention", {"q", "k", "v", "", "", "seqlens_k", "total_len"},
                       {"attn", "present_key", "present_value"}, {A_i("num_heads", H), A_i("kv_num_heads", kvH)});
  g.domain = "com.microsoft";
  add_gqa_outputs(b);
  ir::Model o = optimized_inferred(b.m, OptLevel::kBasic);
  EXPECT_EQ(ops_of(o), (std::vector<std::string>{"com.microsoft::GroupQueryAttention"}));
  const std::vector<std::pair<std::string, Value>> feeds = {
      {"q", Value(half_tensor({1, S, H * D}, 51))}, {"k", Value(half_tensor({1, S, kvH * D}, 52))},
      {"v", Value(half_tensor({1, S, kvH * D}, 53))},
      {"seqlens_k", Value(Tensor::from_vector<int32_t>(DataType::kInt32, {1}, {S - 1}))},
      {"total_len", Value(Tensor::from_vector<int32_t>(DataType::kInt32, {}, {S}))}};
  auto got = run_at(b.m, OptLevel::kBasic, feeds);
  ASSERT_EQ(got.size(), 3u);
  for (const Tensor& t : got) EXPECT_EQ(t.dtype(), DataType::kFloat16);
}
