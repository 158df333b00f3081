// Load-time shape inference: symbolic dims, unification, derived symbols, subgraphs, errors, and a
// sweep over the light models and the ONNX node tests (inferred static shapes vs expected outputs).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "onnx/model_reader.h"
#include "shape/shape_inference.h"

using namespace nxrt;
using ir::SymDim;

namespace {

ir::Dim D(int64_t v) { return ir::Dim::fixed(v); }
ir::Dim D(const char* s) { return ir::Dim::named(s); }

ir::ValueInfo vi(const std::string& name, DataType dt, std::vector<ir::Dim> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = dt;
  v.type.has_shape = true;
  v.type.dims = std::move(dims);
  return v;
}

ir::Attribute attr_i(const std::string& n, int64_t v) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kInt;
  a.i = v;
  return a;
}
ir::Attribute attr_ints(const std::string& n, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}
ir::Attribute attr_g(const std::string& n, std::shared_ptr<ir::Graph> g) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kGraph;
  a.g = std::move(g);
  return a;
}

ir::Node node(const std::string& name, const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
              std::vector<ir::Attribute> attrs = {}) {
  ir::Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

Tensor i64(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
}

struct M {
  ir::Model model;
  M(int64_t opset = 18) { model.opset_imports.push_back({"", opset}); }
  ir::Graph& g() { return model.graph; }
  Status infer() { return shape::infer_shapes(model); }
  const ir::ValueFacts& v(const std::string& name) {
    const ir::ValueFacts* f = model.graph.shape_facts->find(name);
    EXPECT_NE(f, nullptr) << name;
    static ir::ValueFacts none;
    return f ? *f : none;
  }
  const ir::SymbolTable& S() { return *model.graph.shape_facts->symbols; }
  std::string str(const std::string& name) { return v(name).describe(S()); }
};

TEST(ShapeInference, BroadcastUnifiesSymbols) {
  M m;
  m.g().inputs = {vi("a", DataType::kFloat, {D("batch"), D(1), D(3)}), vi("b", DataType::kFloat, {D("n"), D(4), D(3)})};
  m.g().nodes = {node("add", "Add", {"a", "b"}, {"c"})};
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("c"), "float32[batch,4,3]");
  EXPECT_TRUE(m.S().same("batch", "n"));
  EXPECT_NE(shape::describe_shapes(m.g()).find("same: batch == n"), std::string::npos) << shape::describe_shapes(m.g());
}

TEST(ShapeInference, MatMulUnifiesInnerDims) {
  M m;
  m.g().inputs = {vi("a", DataType::kFloat, {D("b"), D("s"), D("k1")}), vi("w", DataType::kFloat, {D("k2"), D(7)})};
  m.g().nodes = {node("mm", "MatMul", {"a", "w"}, {"y"})};
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("y"), "float32[b,s,7]");
  EXPECT_TRUE(m.S().same("k1", "k2"));
}

TEST(ShapeInference, ConstantConflictErrorNamesNode) {
  M m;
  m.g().inputs = {vi("a", DataType::kFloat, {D(2), D(3)}), vi("b", DataType::kFloat, {D(5), D(4)})};
  m.g().nodes = {node("my_mm", "MatMul", {"a", "b"}, {"y"})};
  Status st = m.infer();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("my_mm"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("MatMul"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("opset 18"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[2,3]"), std::string::npos) << st.message();

  M m2;
  m2.g().inputs = {vi("a", DataType::kFloat, {D(2), D(3)}), vi("b", DataType::kFloat, {D(4), D(3)})};
  m2.g().nodes = {node("bad_add", "Add", {"a", "b"}, {"y"})};
  st = m2.infer();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("bad_add"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[4,3]"), std::string::npos) << st.message();

  M m3;
  m3.g().inputs = {vi("a", DataType::kFloat, {D(2), D(3)}), vi("b", DataType::kFloat, {D(2), D(3), D(1)})};
  m3.g().nodes = {node("cat", "Concat", {"a", "b"}, {"y"}, {attr_i("axis", 0)})};
  st = m3.infer();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("ranks"), std::string::npos) << st.message();

  // With a symbol on one side: unify, no error.
  M m4;
  m4.g().inputs = {vi("a", DataType::kFloat, {D(2), D("x")}), vi("b", DataType::kFloat, {D(5), D(4)})};
  m4.g().nodes = {node("mm", "MatMul", {"a", "b"}, {"y"})};
  ASSERT_TRUE(m4.infer().ok());
  EXPECT_EQ(m4.str("y"), "float32[2,4]");
}

TEST(ShapeInference, ReshapeMinusOneDerivesProduct) {
  M m;
  m.g().inputs = {vi("x", DataType::kFloat, {D("batch"), D("seq"), D(896)})};
  m.g().initializers["shape"] = i64({-1, 896});
  m.g().nodes = {node("r", "Reshape", {"x", "shape"}, {"y"})};
  ASSERT_TRUE(m.infer().ok());
  const auto& y = m.v("y");
  ASSERT_TRUE(y.has_shape);
  ASSERT_EQ(y.dims.size(), 2u);
  ASSERT_FALSE(y.dims[0].is_const());
  EXPECT_EQ(m.S().derived_string(y.dims[0].sym), m.S().name(y.dims[0].sym) + " = batch*seq");
  std::string d = shape::describe_shapes(m.g());
  EXPECT_NE(d.find("= batch*seq"), std::string::npos) << d;
}

TEST(ShapeInference, ShapeGatherConcatReshapeChain) {
  // Shape(x) -> Gather(0), Gather(1) -> Unsqueeze -> Concat with [14, 64] -> Reshape:
  // [batch, seq, 896] -> [batch, seq, 14, 64]; then back with [0, 0, -1] -> [batch, seq, 896].
  M m(18);
  m.g().inputs = {vi("x", DataType::kFloat, {D("batch"), D("seq"), D(896)})};
  m.g().initializers["i0"] = Tensor::scalar_int64(0);
  m.g().initializers["i1"] = Tensor::scalar_int64(1);
  m.g().initializers["ax"] = i64({0});
  m.g().initializers["heads"] = i64({14, 64});
  m.g().initializers["back"] = i64({0, 0, -1});
  m.g().nodes = {
      node("shape", "Shape", {"x"}, {"s"}),
      node("g0", "Gather", {"s", "i0"}, {"b"}),
      node("g1", "Gather", {"s", "i1"}, {"q"}),
      node("u0", "Unsqueeze", {"b", "ax"}, {"bu"}),
      node("u1", "Unsqueeze", {"q", "ax"}, {"qu"}),
      node("cat", "Concat", {"bu", "qu", "heads"}, {"target"}, {attr_i("axis", 0)}),
      node("r", "Reshape", {"x", "target"}, {"y"}),
      node("t", "Transpose", {"y"}, {"yt"}, {attr_ints("perm", {0, 2, 1, 3})}),
      node("r2", "Reshape", {"y", "back"}, {"z"}),
  };
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("s"), "int64[3]{batch,seq,896}");
  EXPECT_EQ(m.str("target"), "int64[4]{batch,seq,14,64}");
  EXPECT_EQ(m.str("y"), "float32[batch,seq,14,64]");
  EXPECT_EQ(m.str("yt"), "float32[batch,14,seq,64]");
  EXPECT_EQ(m.str("z"), "float32[batch,seq,896]");
}

TEST(ShapeInference, NonZeroMintsDataDependentSymbol) {
  M m;
  m.g().inputs = {vi("x", DataType::kFloat, {D(3), D("n")})};
  m.g().nodes = {node("nz", "NonZero", {"x"}, {"idx"}), node("t", "Transpose", {"idx"}, {"it"})};
  ASSERT_TRUE(m.infer().ok());
  const auto& v = m.v("idx");
  ASSERT_EQ(v.dims.size(), 2u);
  EXPECT_EQ(v.dims[0], SymDim::c(2));
  EXPECT_FALSE(v.dims[1].is_const());
  EXPECT_TRUE(m.S().is_minted(v.dims[1].sym));
  EXPECT_EQ(m.v("it").dims[0], v.dims[1]);
  EXPECT_EQ(v.dtype, DataType::kInt64);
}

TEST(ShapeInference, IfMergesBranches) {
  M m(13);
  m.g().inputs = {vi("c", DataType::kBool, {}), vi("x", DataType::kFloat, {D("n"), D(4)})};
  auto th = std::make_shared<ir::Graph>();
  th->nodes = {node("tn", "Relu", {"x"}, {"t_out"}), node("tn2", "Relu", {"x"}, {"t_out2"})};
  th->outputs = {vi("t_out", DataType::kFloat, {}), vi("t_out2", DataType::kFloat, {})};
  th->outputs[0].type.has_shape = false;
  th->outputs[1].type.has_shape = false;
  auto el = std::make_shared<ir::Graph>();
  el->initializers["k"] = i64({2, -1});
  el->nodes = {node("en", "Abs", {"x"}, {"e_out"}), node("en2", "Reshape", {"x", "k"}, {"e_out2"})};
  el->outputs = {vi("e_out", DataType::kFloat, {}), vi("e_out2", DataType::kFloat, {})};
  el->outputs[0].type.has_shape = false;
  el->outputs[1].type.has_shape = false;
  m.g().nodes = {node("if", "If", {"c"}, {"y", "y2"}, {attr_g("then_branch", th), attr_g("else_branch", el)})};
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("y"), "float32[n,4]");
  const auto& y2 = m.v("y2");
  ASSERT_EQ(y2.dims.size(), 2u);
  EXPECT_FALSE(y2.dims[0].is_const());  // n vs 2: a new symbol
  EXPECT_FALSE(m.S().same(y2.dims[0], SymDim::s(m.S().lookup("n"))));
  EXPECT_FALSE(y2.dims[1].is_const());  // 4 vs 2*n: a new symbol
  // Branch values are on the subgraphs.
  ASSERT_TRUE(th->shape_facts);
  EXPECT_EQ(th->shape_facts->find("t_out")->describe(m.S()), "float32[n,4]");
}

TEST(ShapeInference, LoopBodySeesOuterScope) {
  M m(13);
  m.g().inputs = {vi("x", DataType::kFloat, {D("n"), D(4)}), vi("acc", DataType::kFloat, {D(4)})};
  m.g().initializers["trip"] = Tensor::scalar_int64(5);
  auto body = std::make_shared<ir::Graph>();
  body->inputs = {vi("i", DataType::kInt64, {}), vi("cond_in", DataType::kBool, {}), vi("acc_in", DataType::kFloat, {})};
  body->inputs[2].type.has_shape = false;
  body->nodes = {node("rs", "ReduceMax", {"x"}, {"xs"}, {attr_ints("axes", {0}), attr_i("keepdims", 0)}),
                 node("ad", "Add", {"acc_in", "xs"}, {"acc_out"}), node("id", "Identity", {"cond_in"}, {"cond_out"}),
                 node("sc", "Mul", {"x", "xs"}, {"scan_out"})};
  body->outputs = {vi("cond_out", DataType::kBool, {}), vi("acc_out", DataType::kFloat, {}),
                   vi("scan_out", DataType::kFloat, {})};
  body->outputs[1].type.has_shape = false;
  body->outputs[2].type.has_shape = false;
  m.g().nodes = {node("loop", "Loop", {"trip", "", "acc"}, {"acc_final", "scans"}, {attr_g("body", body)})};
  ASSERT_TRUE(m.infer().ok()) << m.infer().message();
  EXPECT_EQ(m.str("acc_final"), "float32[4]");
  EXPECT_EQ(m.str("scans"), "float32[5,n,4]");
  ASSERT_TRUE(body->shape_facts);
  EXPECT_EQ(body->shape_facts->find("xs")->describe(m.S()), "float32[4]");

  // With a cond input the iteration count is a minted symbol.
  M m2(13);
  m2.g() = m.g();
  m2.g().inputs.push_back(vi("keep", DataType::kBool, {}));
  m2.g().nodes[0].inputs[1] = "keep";
  auto body2 = std::make_shared<ir::Graph>(*body);
  m2.g().nodes[0].attributes = {attr_g("body", body2)};
  ASSERT_TRUE(m2.infer().ok());
  const auto& s = m2.v("scans");
  ASSERT_EQ(s.dims.size(), 3u);
  EXPECT_FALSE(s.dims[0].is_const());
}

TEST(ShapeInference, OpsetSpecificAxes) {
  // Squeeze/Unsqueeze: attribute before 13, input from 13.
  M m11(11);
  m11.g().inputs = {vi("x", DataType::kFloat, {D("n"), D(1), D(3)})};
  m11.g().nodes = {node("sq", "Squeeze", {"x"}, {"y"}, {attr_ints("axes", {1})}),
                   node("us", "Unsqueeze", {"y"}, {"z"}, {attr_ints("axes", {0, -1})})};
  ASSERT_TRUE(m11.infer().ok());
  EXPECT_EQ(m11.str("y"), "float32[n,3]");
  EXPECT_EQ(m11.str("z"), "float32[1,n,3,1]");
  M m13(13);
  m13.g().inputs = {vi("x", DataType::kFloat, {D("n"), D(1), D(3)})};
  m13.g().initializers["ax"] = i64({1});
  m13.g().nodes = {node("sq", "Squeeze", {"x", "ax"}, {"y"}), node("rm", "ReduceMean", {"x"}, {"r"}, {attr_ints("axes", {2})})};
  ASSERT_TRUE(m13.infer().ok());
  EXPECT_EQ(m13.str("y"), "float32[n,3]");
  EXPECT_EQ(m13.str("r"), "float32[n,1,1]");
  // ReduceMean axes move to an input at 18.
  M m18(18);
  m18.g().inputs = {vi("x", DataType::kFloat, {D("n"), D(1), D(3)})};
  m18.g().initializers["ax"] = i64({0});
  m18.g().nodes = {node("rm", "ReduceMean", {"x", "ax"}, {"r"}, {attr_i("keepdims", 0)})};
  ASSERT_TRUE(m18.infer().ok());
  EXPECT_EQ(m18.str("r"), "float32[1,3]");
}

TEST(ShapeInference, ConvPoolAndDeclaredMerge) {
  M m(13);
  m.g().inputs = {vi("x", DataType::kFloat, {D("N"), D(3), D(224), D(224)})};
  m.g().initializers["w"] = Tensor(DataType::kFloat, {64, 3, 7, 7});
  m.g().nodes = {node("conv", "Conv", {"x", "w"}, {"c"},
                      {attr_ints("pads", {3, 3, 3, 3}), attr_ints("strides", {2, 2}), attr_ints("kernel_shape", {7, 7})}),
                 node("pool", "MaxPool", {"c"}, {"p"},
                      {attr_ints("kernel_shape", {3, 3}), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 1, 1, 1})}),
                 node("gap", "GlobalAveragePool", {"p"}, {"g"}), node("fl", "Flatten", {"g"}, {"f"})};
  m.g().value_info = {vi("f", DataType::kFloat, {D("batch"), D(64)})};
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("c"), "float32[N,64,112,112]");
  EXPECT_EQ(m.str("p"), "float32[N,64,56,56]");
  EXPECT_EQ(m.str("f"), "float32[batch,64]");  // declared name wins
  EXPECT_TRUE(m.S().same("N", "batch"));

  M bad(13);
  bad.g() = m.g();
  bad.g().value_info = {vi("p", DataType::kFloat, {D("N"), D(64), D(55), D(56)})};
  Status st = bad.infer();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'p'"), std::string::npos) << st.message();
}

TEST(ShapeInference, UnknownOpGivesUnknownRankAndIsListed) {
  M m;
  m.g().inputs = {vi("x", DataType::kFloat, {D(2)})};
  m.g().nodes = {node("f", "FancyOp", {"x"}, {"y"}), node("r", "Relu", {"y"}, {"z"})};
  m.g().nodes[0].domain = "my.domain";
  m.model.opset_imports.push_back({"my.domain", 1});
  ASSERT_TRUE(m.infer().ok());
  EXPECT_FALSE(m.v("z").has_shape);
  EXPECT_EQ(shape::describe_ops_without_shape_fn(m.g()), "my.domain::FancyOp 1\n");
}

TEST(ShapeInference, MicrosoftFusedMatMulAppliesItsTransposes) {
  // transBatchX moves X's dim 0 before its last dim, then transX swaps the last two (as the kernel).
  M m(17);
  m.model.opset_imports.push_back({"com.microsoft", 1});
  m.g().inputs = {vi("a", DataType::kFloat, {D(2), D(4), D(3)}), vi("b", DataType::kFloat, {D(5), D(4)}),
                  vi("c", DataType::kFloat, {D(3), D(2), D(4)}), vi("d", DataType::kFloat, {D(2), D(4), D(5)}),
                  vi("q", DataType::kInt8, {D(2), D(6)}), vi("w", DataType::kInt8, {D(6), D(7)})};
  std::vector<ir::Node> nodes = {node("t", "FusedMatMul", {"a", "b"}, {"y1"}, {attr_i("transA", 1), attr_i("transB", 1)}),
                                 node("tb", "FusedMatMul", {"c", "d"}, {"y2"}, {attr_i("transBatchA", 1)}),
                                 node("i2f", "MatMulIntegerToFloat", {"q", "w", "s", "s"}, {"y3"})};
  m.g().initializers["s"] = Tensor(DataType::kFloat, {});
  for (auto& n : nodes) n.domain = "com.microsoft";
  m.g().nodes = nodes;
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("y1"), "float32[2,3,5]");
  EXPECT_EQ(m.str("y2"), "float32[2,3,5]");
  EXPECT_EQ(m.str("y3"), "float32[2,7]");
}

TEST(ShapeInference, SimplifiedLayerNormalizationTakesTheScalesType) {
  M m(17);
  m.g().inputs = {vi("x", DataType::kFloat16, {D("batch"), D(8)})};
  m.g().initializers["g"] = Tensor(DataType::kFloat, {8});
  m.g().nodes = {node("n", "SimplifiedLayerNormalization", {"x", "g"}, {"y", "inv"})};
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("y"), "float32[batch,8]");
  EXPECT_EQ(m.str("inv"), "float32[batch,1]");
}

TEST(ShapeInference, EmbedLayerNormalization) {
  M m(11);
  m.model.opset_imports.push_back({"com.microsoft", 1});
  m.g().inputs = {vi("ids", DataType::kInt32, {D("batch"), D("seq")}), vi("pos", DataType::kInt32, {D("batch"), D("seq")})};
  m.g().initializers["wte"] = Tensor(DataType::kFloat, {100, 32});
  m.g().initializers["wpe"] = Tensor(DataType::kFloat, {64, 32});
  m.g().initializers["gamma"] = Tensor(DataType::kFloat, {32});
  m.g().initializers["beta"] = Tensor(DataType::kFloat, {32});
  ir::Node n = node("eln", "EmbedLayerNormalization", {"ids", "", "wte", "wpe", "", "gamma", "beta", "", "pos"},
                    {"y", "mask_index", "sum"});
  n.domain = "com.microsoft";
  m.g().nodes = {n};
  ASSERT_TRUE(m.infer().ok());
  EXPECT_EQ(m.str("y"), "float32[batch,seq,32]");
  EXPECT_EQ(m.str("sum"), "float32[batch,seq,32]");
  EXPECT_EQ(m.str("mask_index"), "int32[batch]");
}

TEST(ShapeInference, LlmContribOps) {
  M m(21);
  m.model.opset_imports.push_back({"com.microsoft", 1});
  m.g().inputs = {vi("ids", DataType::kInt64, {D("batch"), D("seq")}),
                  vi("past_k", DataType::kFloat16, {D("batch"), D(2), D("past"), D(64)}),
                  vi("past_v", DataType::kFloat16, {D("batch"), D(2), D("past"), D(64)}),
                  vi("seqlens_k", DataType::kInt32, {D("batch")}), vi("total", DataType::kInt32, {})};
  m.g().initializers["emb"] = Tensor(DataType::kFloat16, {100, 896});
  m.g().initializers["gamma"] = Tensor(DataType::kFloat16, {896});
  m.g().initializers["wq"] = Tensor(DataType::kUInt8, {896, 28, 16});
  m.g().initializers["sq"] = Tensor(DataType::kFloat16, {896 * 28});
  m.g().initializers["wkv"] = Tensor(DataType::kUInt8, {128, 28, 16});
  m.g().initializers["skv"] = Tensor(DataType::kFloat16, {128 * 28});
  auto ms = [](ir::Node n) {
    n.domain = "com.microsoft";
    return n;
  };
  m.g().nodes = {
      node("embed", "Gather", {"emb", "ids"}, {"h"}),
      ms(node("norm", "SkipSimplifiedLayerNormalization", {"h", "h", "gamma"}, {"hn", "", "", "hsum"})),
      ms(node("q_proj", "MatMulNBits", {"hn", "wq", "sq"}, {"q"},
              {attr_i("K", 896), attr_i("N", 896), attr_i("bits", 4), attr_i("block_size", 32)})),
      ms(node("k_proj", "MatMulNBits", {"hn", "wkv", "skv"}, {"k"},
              {attr_i("K", 896), attr_i("N", 128), attr_i("bits", 4), attr_i("block_size", 32)})),
      ms(node("v_proj", "MatMulNBits", {"hn", "wkv", "skv"}, {"v"},
              {attr_i("K", 896), attr_i("N", 128), attr_i("bits", 4), attr_i("block_size", 32)})),
      ms(node("attn", "GroupQueryAttention", {"q", "k", "v", "past_k", "past_v", "seqlens_k", "total"},
              {"o", "present_k", "present_v"}, {attr_i("num_heads", 14), attr_i("kv_num_heads", 2)})),
      node("res", "Add", {"o", "hsum"}, {"out"}),
  };
  ASSERT_TRUE(m.infer().ok()) << m.infer().message();
  EXPECT_EQ(m.str("h"), "float16[batch,seq,896]");
  EXPECT_EQ(m.str("hn"), "float16[batch,seq,896]");
  EXPECT_EQ(m.str("hsum"), "float16[batch,seq,896]");
  EXPECT_EQ(m.str("q"), "float16[batch,seq,896]");
  EXPECT_EQ(m.str("k"), "float16[batch,seq,128]");
  EXPECT_EQ(m.str("o"), "float16[batch,seq,896]");
  const auto& pk = m.v("present_k");
  ASSERT_EQ(pk.dims.size(), 4u);
  EXPECT_EQ(pk.dims[1], SymDim::c(2));
  EXPECT_EQ(pk.dims[3], SymDim::c(64));
  EXPECT_EQ(m.str("out"), "float16[batch,seq,896]");
  EXPECT_EQ(shape::describe_ops_without_shape_fn(m.g()), "");

  // MatMulNBits with a contradicting K is an error.
  M bad(21);
  bad.model.opset_imports.push_back({"com.microsoft", 1});
  bad.g().inputs = {vi("x", DataType::kFloat, {D("b"), D(512)})};
  bad.g().initializers["w"] = Tensor(DataType::kUInt8, {8, 28, 16});
  bad.g().initializers["s"] = Tensor(DataType::kFloat, {8 * 28});
  bad.g().nodes = {ms(node("mm4", "MatMulNBits", {"x", "w", "s"}, {"y"}, {attr_i("K", 896), attr_i("N", 8)}))};
  Status st = bad.infer();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("com.microsoft::MatMulNBits"), std::string::npos) << st.message();
}

TEST(ShapeInference, Opset23AttentionAndConcatSums) {
  M m(23);
  m.g().inputs = {vi("q", DataType::kFloat, {D("b"), D(8), D("s"), D(64)}),
                  vi("k", DataType::kFloat, {D("b"), D(2), D("s"), D(64)}),
                  vi("v", DataType::kFloat, {D("b"), D(2), D("s"), D(64)}),
                  vi("pk", DataType::kFloat, {D("b"), D(2), D("p"), D(64)}),
                  vi("pv", DataType::kFloat, {D("b"), D(2), D("p"), D(64)})};
  m.g().nodes = {node("att", "Attention", {"q", "k", "v", "", "pk", "pv"}, {"y", "pres_k", "pres_v"}),
                 node("cat", "Concat", {"pk", "k"}, {"kk"}, {attr_i("axis", 2)})};
  ASSERT_TRUE(m.infer().ok()) << m.infer().message();
  EXPECT_EQ(m.str("y"), "float32[b,8,s,64]");
  const auto& pres = m.v("pres_k");
  ASSERT_EQ(pres.dims.size(), 4u);
  EXPECT_EQ(m.S().derived_string(pres.dims[2].sym), m.S().name(pres.dims[2].sym) + " = s+p");  // terms in symbol order
  EXPECT_EQ(m.v("kk").dims[2], pres.dims[2]);  // the same derived sum
}

TEST(ShapeInference, ResizeWithConstantScales) {
  M m(13);
  m.g().inputs = {vi("x", DataType::kFloat, {D("N"), D(3), D("H"), D(16)})};
  m.g().initializers["scales"] = Tensor::from_vector<float>(DataType::kFloat, {4}, {1.f, 1.f, 2.f, 2.f});
  m.g().nodes = {node("up", "Resize", {"x", "", "scales"}, {"y"})};
  ASSERT_TRUE(m.infer().ok());
  const auto& y = m.v("y");
  ASSERT_EQ(y.dims.size(), 4u);
  EXPECT_EQ(y.dims[3], SymDim::c(32));
  EXPECT_EQ(m.S().derived_string(y.dims[2].sym), m.S().name(y.dims[2].sym) + " = 2*H");
}

TEST(ShapeInference, SymbolicConvAndSliceDerive) {
  M m(13);
  m.g().inputs = {vi("x", DataType::kFloat, {D("N"), D(3), D("H"), D("W")})};
  m.g().initializers["w"] = Tensor(DataType::kFloat, {8, 3, 3, 3});
  m.g().initializers["st"] = i64({1});
  m.g().initializers["en"] = i64({INT64_MAX});
  m.g().initializers["ax"] = i64({2});
  m.g().nodes = {node("conv", "Conv", {"x", "w"}, {"c"}, {attr_ints("kernel_shape", {3, 3})}),
                 node("sl", "Slice", {"x", "st", "en", "ax"}, {"s"})};
  ASSERT_TRUE(m.infer().ok());
  const auto& c = m.v("c");
  ASSERT_EQ(c.dims.size(), 4u);
  EXPECT_EQ(c.dims[1], SymDim::c(8));
  EXPECT_EQ(m.S().derived_string(c.dims[2].sym), m.S().name(c.dims[2].sym) + " = H-2");
  const auto& s = m.v("s");
  EXPECT_EQ(m.S().derived_string(s.dims[2].sym), m.S().name(s.dims[2].sym) + " = H-1");
}

// ---------------------------------------------------------------------------------------------
// Sweep over real models.

namespace fs = std::filesystem;

struct SweepResult {
  int models = 0, errors = 0, static_outputs = 0, matched = 0, tensor_outputs = 0, unknown_rank = 0;
  std::vector<std::string> error_lines, mismatch_lines, unresolved_lines;
};

void sweep_model(const fs::path& path, bool compare, SweepResult& r) {
  auto model = onnx::load_model_file(path.string());
  if (!model.ok()) return;  // reader failures are the reader's business
  ++r.models;
  Status st = shape::infer_shapes(**model);
  if (!st.ok()) {
    ++r.errors;
    r.error_lines.push_back(path.parent_path().filename().string() + ": " + st.message());
    return;
  }
  if (!compare) return;
  // Compare what inference alone finds: drop the main graph's declared output/value_info types.
  model = onnx::load_model_file(path.string());
  ir::Model& m = **model;
  std::vector<ir::TypeInfo> declared;
  for (auto& o : m.graph.outputs) {
    declared.push_back(o.type);
    o.type = ir::TypeInfo{};
  }
  m.graph.value_info.clear();
  fs::path ds = path.parent_path() / "test_data_set_0";
  if (!fs::exists(ds)) return;
  // Inputs get the concrete shapes of the test data (graph inputs without an initializer, in order).
  size_t k = 0;
  for (auto& in : m.graph.inputs) {
    if (m.graph.initializers.count(in.name)) continue;
    fs::path pb = ds / ("input_" + std::to_string(k++) + ".pb");
    if (in.type.kind != ir::TypeInfo::Kind::kTensor || !fs::exists(pb)) continue;
    auto v = onnx::read_value_pb(pb.string(), &in.type);
    if (!v.ok() || !v->is_tensor()) continue;
    in.type.has_shape = true;
    in.type.dims.clear();
    for (int64_t d : v->tensor().shape()) in.type.dims.push_back(ir::Dim::fixed(d));
  }
  if (!shape::infer_shapes(m).ok()) {
    r.mismatch_lines.push_back(path.parent_path().filename().string() + ": error with concrete input shapes");
    return;
  }
  for (size_t i = 0; i < m.graph.outputs.size(); ++i) {
    const ir::ValueFacts* f = m.graph.shape_facts->find(m.graph.outputs[i].name);
    if (declared[i].kind == ir::TypeInfo::Kind::kTensor) {
      ++r.tensor_outputs;
      if (!f || !f->has_shape) ++r.unknown_rank;
    }
    if (!f || f->kind != ir::TypeInfo::Kind::kTensor || !f->is_static()) {
      if (declared[i].kind == ir::TypeInfo::Kind::kTensor) {
        r.unresolved_lines.push_back(path.parent_path().filename().string() + ": output " + std::to_string(i) + " " +
                                     (f ? f->describe(*m.graph.shape_facts->symbols) : std::string("?")));
      }
      continue;
    }
    fs::path pb = ds / ("output_" + std::to_string(i) + ".pb");
    if (!fs::exists(pb)) continue;
    auto v = onnx::read_value_pb(pb.string(), &declared[i]);
    if (!v.ok() || !v->is_tensor()) continue;
    ++r.static_outputs;
    std::vector<int64_t> want(v->tensor().shape().begin(), v->tensor().shape().end());
    std::vector<int64_t> got;
    for (const auto& d : f->dims) got.push_back(d.value);
    if (want == got && (f->dtype == DataType::kUndefined || f->dtype == v->tensor().dtype())) {
      ++r.matched;
    } else {
      r.mismatch_lines.push_back(path.parent_path().filename().string() + ": output " + std::to_string(i) +
                                 " inferred " + f->describe(*m.graph.shape_facts->symbols) + " expected " +
                                 v->tensor().describe());
    }
  }
}

TEST(ShapeInferenceSweep, NodeTestsAndLightModels) {
  const fs::path node_root = NXRT_SOURCE_DIR "/../shared/onnx-tests/node";
  const fs::path light_root = NXRT_SOURCE_DIR "/../shared/models/light";
  if (!fs::exists(node_root)) GTEST_SKIP() << "no node tests at " << node_root;
  SweepResult node, light;
  auto t0 = std::chrono::steady_clock::now();
  // The ONNX node tests, plus the other backend-test folders next to them.
  for (const char* sub : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    fs::path root = node_root.parent_path() / sub;
    if (!fs::exists(root)) continue;
    for (const auto& e : fs::directory_iterator(root)) {
      fs::path p = e.path() / "model.onnx";
      if (fs::exists(p)) sweep_model(p, true, node);
    }
  }
  if (fs::exists(light_root)) {
    for (const auto& e : fs::directory_iterator(light_root)) {
      fs::path p = e.path() / "model.onnx";
      if (fs::exists(p)) sweep_model(p, true, light);
    }
  }
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto* r : {&node, &light}) {
    std::printf("%s: %d models, %d load errors; with test-data input shapes and no declared output shapes: "
                "%d tensor outputs, %d inferred fully static, %d match test_data_set_0, %d unknown rank\n",
                r == &node ? "onnx backend tests" : "light models", r->models, r->errors, r->tensor_outputs, r->static_outputs,
                r->matched, r->unknown_rank);
  }
  std::printf("sweep took %.2fs\n", s);
  for (const auto& l : node.error_lines) std::printf("  error: %s\n", l.c_str());
  for (const auto& l : light.error_lines) std::printf("  error: %s\n", l.c_str());
  for (const auto& l : node.mismatch_lines) std::printf("  mismatch: %s\n", l.c_str());
  for (const auto& l : light.mismatch_lines) std::printf("  mismatch: %s\n", l.c_str());
  if (std::getenv("NXRT_SWEEP_VERBOSE")) {
    for (const auto& l : node.unresolved_lines) std::printf("  unresolved: %s\n", l.c_str());
  }
  // Known genuinely inconsistent models are listed in kExpectedErrors.
  EXPECT_EQ(light.errors, 0);
  EXPECT_LE(node.errors, 0);
  EXPECT_EQ(node.matched, node.static_outputs);
}

}  // namespace

namespace {
// Debug helper: NXRT_DESCRIBE_SHAPES=path/model.onnx ./nxrt_unit_tests --gtest_filter=ShapeInferenceDebug.*
TEST(ShapeInferenceDebug, Describe) {
  const char* p = std::getenv("NXRT_DESCRIBE_SHAPES");
  if (!p) GTEST_SKIP() << "set NXRT_DESCRIBE_SHAPES=model.onnx";
  auto model = onnx::load_model_file(p);
  ASSERT_TRUE(model.ok()) << model.status().message();
  auto t0 = std::chrono::steady_clock::now();
  Status st = shape::infer_shapes(**model);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(st.ok()) << st.message();
  std::printf("%s", shape::describe_shapes((*model)->graph).c_str());
  std::printf("ops without a shape function:\n%s", shape::describe_ops_without_shape_fn((*model)->graph).c_str());
  std::printf("inference took %.3f ms\n", ms);
}
}  // namespace
