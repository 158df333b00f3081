// fuse_qdq (optimizer/fusions/fuse_qdq.cpp): the DequantizeLinear -> op -> QuantizeLinear groups of a QDQ
// model rewritten into the 8-bit ops. Each group kind is built alone (a quantized graph input, the op,
// a QuantizeLinear whose 8-bit output is the graph output) and held to the unfused graph (level
// disabled: the float op between the DequantizeLinear and the QuantizeLinear): the float op is gone,
// the 8-bit op is there, and every output code is within one step of the unfused one (exact sums
// rounded once against float sums rounded per operation), almost all equal; the ops that only move
// values give the same bytes. The refusals keep the float op where the rewrite would change results.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "optimizer_test_util.h"
#include "shape/shape_inference.h"

namespace nxrt {
namespace {

using namespace optest;

// A QDQ test graph: graph inputs quantized to uint8 and dequantized again, constant int8 weights behind
// their DequantizeLinear, and the output quantized.
struct QdqModel {
  ModelBuilder b{13};
  std::mt19937 rng{11};
  int count = 0;
  std::vector<std::pair<std::string, Value>> feeds;
  std::string last_scale, last_zp;  // the last quantize()'s parameters

  std::string fresh(const char* what) { return std::string(what) + std::to_string(count++); }
  // QuantizeLinear(v) with scale s and uint8 zero point z (or int8 when `signed_z`): the 8-bit value.
  std::string quantize(const std::string& v, float s, int z, bool signed_z = false) {
    const std::string q = fresh("q"), sn = fresh("s"), zn = fresh("z");
    b.init(sn, scalar_f(s));
    b.init(zn, signed_z ? Tensor::from_vector<int8_t>(DataType::kInt8, {}, {static_cast<int8_t>(z)})
                        : Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {static_cast<uint8_t>(z)}));
    b.node("QuantizeLinear", {v, sn, zn}, {q});
    last_scale = sn;
    last_zp = zn;
    return q;
  }
  // DequantizeLinear of the last quantize()'s value with its parameters.
  std::string dequantize(const std::string& q) {
    const std::string f = fresh("f");
    b.node("DequantizeLinear", {q, last_scale, last_zp}, {f});
    return f;
  }
  std::string qdq(const std::string& v, float s, int z) { return dequantize(quantize(v, s, z)); }
  // A float graph input in [-1, 1), quantized and dequantized (scale 2/255, zero point 128).
  std::string input(const std::string& name, const Dims& dims) {
    b.input(name, dims);
    feeds.emplace_back(name, Value(random_tensor(dims, 100 + static_cast<uint32_t>(count), -1.f, 1.f)));
    return qdq(name, 2.f / 255, 128);
  }
  // Constant int8 weights ~ U(-1, 1) / sqrt(fan_in), symmetric, per slice along `axis` (-1: per tensor).
  std::string weight(const Dims& dims, int64_t axis, int64_t fan_in, std::vector<float>* scales) {
    std::uniform_int_distribution<int> code(-127, 127);
    std::vector<int8_t> w(static_cast<size_t>(shape_numel(dims)));
    for (auto& v : w) v = static_cast<int8_t>(code(rng));
    const int64_t n = axis < 0 ? 1 : dims[static_cast<size_t>(axis)];
    std::uniform_real_distribution<float> jitter(0.6f, 1.4f);
    scales->assign(static_cast<size_t>(n), 0.f);
    for (auto& s : *scales) s = jitter(rng) / (127.f * std::sqrt(static_cast<float>(fan_in)));
    const std::string wq = fresh("w"), ws = fresh("ws"), wz = fresh("wz"), wf = fresh("wf");
    b.init(wq, Tensor::from_vector<int8_t>(DataType::kInt8, dims, w));
    b.init(ws, axis < 0 ? scalar_f((*scales)[0]) : Tensor::from_vector<float>(DataType::kFloat, {n}, *scales));
    b.init(wz, axis < 0 ? Tensor::from_vector<int8_t>(DataType::kInt8, {}, {0})
                        : Tensor::from_vector<int8_t>(DataType::kInt8, {n}, std::vector<int8_t>(static_cast<size_t>(n), 0)));
    std::vector<ir::Attribute> attrs;
    if (axis >= 0) attrs.push_back(A_i("axis", axis));
    b.node("DequantizeLinear", {wq, ws, wz}, {wf}, attrs);
    return wf;
  }
  // An int32 bias of n values with scale x_scale * w_scale (times `scale_factor`).
  std::string bias(int64_t n, float xs, const std::vector<float>& ws, float scale_factor = 1.f) {
    std::uniform_int_distribution<int32_t> code(-3000, 3000);
    std::vector<int32_t> v(static_cast<size_t>(n));
    for (auto& c : v) c = code(rng);
    std::vector<float> s(ws.size());
    for (size_t i = 0; i < ws.size(); ++i) s[i] = xs * ws[i] * scale_factor;
    const std::string bq = fresh("b"), bs = fresh("bs"), bf = fresh("bf");
    b.init(bq, Tensor::from_vector<int32_t>(DataType::kInt32, {n}, v));
    std::vector<ir::Attribute> attrs;
    if (s.size() > 1) {
      b.init(bs, Tensor::from_vector<float>(DataType::kFloat, {static_cast<int64_t>(s.size())}, s));
      attrs.push_back(A_i("axis", 0));
    } else {
      b.init(bs, scalar_f(s[0]));
    }
    b.node("DequantizeLinear", {bq, bs}, {bf}, attrs);
    return bf;
  }
  // The op's float output quantized (scale s, not the inputs' 2/255 unless given, zero point z) as the
  // graph output "y".
  void output(const std::string& f, int z = 128, float s = 3.f / 255) {
    const std::string q = quantize(f, s, z);
    b.node("Identity", {q}, {"y"});
    b.output("y", DataType::kUInt8);
  }
};

constexpr float kXs = 2.f / 255;

// The model's 8-bit output at level all against the unfused graph's (level disabled), at 1 and 2 threads:
// every code within `max_step` of it, at least `min_equal` of them equal, and not all the same code.
void expect_codes_near_unfused(QdqModel& m, int max_step, double min_equal, const std::string& what) {
  for (int threads : {1, 2}) {
    auto got = run_at(m.b.m, OptLevel::kAll, m.feeds, threads);
    auto want = run_at(m.b.m, OptLevel::kDisabled, m.feeds, threads);
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(want.size(), 1u);
    ASSERT_EQ(got[0].shape(), want[0].shape());
    ASSERT_EQ(got[0].dtype(), want[0].dtype());
    const bool s8 = got[0].dtype() == DataType::kInt8;
    const uint8_t* g = static_cast<const uint8_t*>(got[0].raw_data());
    const uint8_t* w = static_cast<const uint8_t*>(want[0].raw_data());
    int64_t equal = 0, spread = 0;
    for (int64_t i = 0; i < got[0].numel(); ++i) {
      const int gi = s8 ? static_cast<int8_t>(g[i]) : g[i], wi = s8 ? static_cast<int8_t>(w[i]) : w[i];
      ASSERT_LE(std::abs(gi - wi), max_step) << what << " element " << i << " threads " << threads;
      equal += gi == wi;
      spread += wi != (s8 ? static_cast<int8_t>(w[0]) : w[0]);
    }
    EXPECT_GE(static_cast<double>(equal), min_equal * static_cast<double>(got[0].numel())) << what;
    EXPECT_GT(spread, 0) << what << ": every output code the same (saturated?): the case tests little";
  }
}

// Fused at level all: `op` gone, `fused` there once; every output code within one of the unfused graph's
// and at least `min_equal` of them equal.
void expect_fused(QdqModel& m, const std::string& op, const std::string& fused, double min_equal = 0.9) {
  ir::Model copy = m.b.m;
  const Status inferred = shape::infer_shapes(copy);
  ASSERT_TRUE(inferred.ok()) << inferred.to_string();
  optimizer::Stats st;
  ir::Model o = optimized(copy, OptLevel::kAll, &st);
  EXPECT_EQ(count_op(o, op), op == fused ? 1 : 0) << op;
  EXPECT_EQ(count_op(o, fused), 1) << fused;
  EXPECT_GE(st.counts["fused_qdq"], 1) << op;
  expect_codes_near_unfused(m, 1, min_equal, op);
}

TEST(OptimizerFuseQdq, ConvWithPerChannelWeightsAndBias) {
  QdqModel m;
  const std::string x = m.input("x", {1, 8, 9, 10});
  std::vector<float> ws;
  const std::string w = m.weight({16, 8, 3, 3}, 0, 72, &ws);
  const std::string bias = m.bias(16, kXs, ws);
  m.b.node("Conv", {x, w, bias}, {"c"}, {A_is("pads", {1, 1, 1, 1}), A_is("kernel_shape", {3, 3})});
  m.output("c");
  expect_fused(m, "Conv", "QLinearConv");
}

TEST(OptimizerFuseQdq, GroupedConvPerTensorNoBiasInt8Output) {
  QdqModel m;
  const std::string x = m.input("x", {1, 8, 7, 7});
  std::vector<float> ws;
  const std::string w = m.weight({8, 2, 3, 3}, -1, 18, &ws);
  m.b.node("Conv", {x, w}, {"c"}, {A_i("group", 4), A_is("strides", {2, 2})});
  const std::string q = m.quantize("c", 3.f / 255, 0, true);
  m.b.node("Identity", {q}, {"y"});
  m.b.output("y", DataType::kInt8);
  expect_fused(m, "Conv", "QLinearConv");
}

TEST(OptimizerFuseQdq, ReluBeforeAZeroPointOfZeroIsDropped) {
  QdqModel m;
  const std::string x = m.input("x", {1, 4, 6, 6});
  std::vector<float> ws;
  const std::string w = m.weight({8, 4, 1, 1}, 0, 4, &ws);
  m.b.node("Conv", {x, w, m.bias(8, kXs, ws)}, {"c"});
  m.b.node("Relu", {"c"}, {"r"});
  m.output("r", 0, 1.f / 255);
  expect_fused(m, "Conv", "QLinearConv");
  ir::Model copy = m.b.m;
  ASSERT_TRUE(shape::infer_shapes(copy).ok());
  EXPECT_EQ(count_op(optimized(copy, OptLevel::kAll), "Relu"), 0);
}

TEST(OptimizerFuseQdq, MatMulWithConstantPerColumnWeights) {
  QdqModel m;
  const std::string x = m.input("x", {2, 5, 24});
  std::vector<float> ws;
  m.b.node("MatMul", {x, m.weight({24, 16}, 1, 24, &ws)}, {"p"});
  m.output("p");
  expect_fused(m, "MatMul", "QLinearMatMul");
}

TEST(OptimizerFuseQdq, MatMulOfTwoActivations) {
  QdqModel m;
  const std::string a = m.input("a", {3, 4, 8});
  const std::string b = m.input("b", {3, 8, 5});
  m.b.node("MatMul", {a, b}, {"p"});
  m.output("p", 128, 8.f / 255);
  expect_fused(m, "MatMul", "QLinearMatMul");
}

TEST(OptimizerFuseQdq, GemmWithBias) {
  QdqModel m;
  const std::string x = m.input("x", {4, 32});
  std::vector<float> ws;
  const std::string w = m.weight({10, 32}, 0, 32, &ws);
  m.b.node("Gemm", {x, w, m.bias(10, kXs, ws)}, {"g"}, {A_i("transB", 1)});
  m.output("g");
  expect_fused(m, "Gemm", "QGemm");
}

TEST(OptimizerFuseQdq, AddMulConcatAndUnaryOps) {
  for (const char* op : {"Add", "Mul", "Concat", "Sigmoid", "LeakyRelu", "GlobalAveragePool", "AveragePool", "Softmax"}) {
    QdqModel m;
    const std::string a = m.input("a", {1, 6, 5, 5});
    const std::string o(op);
    if (o == "Add" || o == "Mul" || o == "Concat") {
      const std::string b = m.input("b", {1, 6, 5, 5});
      std::vector<ir::Attribute> attrs;
      if (o == "Concat") attrs.push_back(A_i("axis", 1));
      m.b.node(op, {a, b}, {"r"}, attrs);
    } else if (o == "AveragePool") {
      m.b.node(op, {a}, {"r"}, {A_is("kernel_shape", {2, 2}), A_is("pads", {0, 0, 1, 1})});
    } else if (o == "LeakyRelu") {
      m.b.node(op, {a}, {"r"}, {A_f("alpha", 0.1f)});
    } else {
      m.b.node(op, {a}, {"r"});
    }
    // Outputs of [0, 1] (sigmoid, softmax) on the whole 8-bit range.
    const bool unit = o == "Sigmoid" || o == "Softmax";
    m.output("r", unit ? 0 : 128, unit ? 1.f / 255 : 3.f / 255);
    const std::string fused = o == "Add" || o == "Mul" ? "QLinear" + o : "QLinear" + o;
    SCOPED_TRACE(op);
    expect_fused(m, op, fused);
  }
}

TEST(OptimizerFuseQdq, DataMovementOpsRunOnTheCodesAsTheyAre) {
  for (const char* op : {"MaxPool", "Transpose", "Reshape", "Flatten"}) {
    QdqModel m;
    const std::string a = m.input("a", {1, 4, 6, 6});
    const std::string o(op);
    if (o == "MaxPool") m.b.node(op, {a}, {"r"}, {A_is("kernel_shape", {3, 3}), A_is("strides", {2, 2}), A_is("pads", {1, 1, 1, 1})});
    if (o == "Transpose") m.b.node(op, {a}, {"r"}, {A_is("perm", {0, 2, 3, 1})});
    if (o == "Reshape") {
      m.b.init("shape", ints({1, 4, 36}));
      m.b.node(op, {a, "shape"}, {"r"});
    }
    if (o == "Flatten") m.b.node(op, {a}, {"r"});
    m.output("r", 128, kXs);  // the input's scale and zero point
    SCOPED_TRACE(op);
    expect_fused(m, op, op, 1.0);
  }
}

// The float op stays where the rewrite would change what the graph computes.
TEST(OptimizerFuseQdq, RefusesWhatItCannotFuseExactly) {
  auto ops_after = [](QdqModel& m, const std::string& op) {
    ir::Model copy = m.b.m;
    EXPECT_TRUE(shape::infer_shapes(copy).ok());
    return count_op(optimized(copy, OptLevel::kAll), op);
  };
  {  // the conv's float output is also a graph output
    QdqModel m;
    const std::string x = m.input("x", {1, 4, 5, 5});
    std::vector<float> ws;
    m.b.node("Conv", {x, m.weight({4, 4, 1, 1}, 0, 4, &ws)}, {"c"});
    m.output("c");
    m.b.output("c");
    EXPECT_EQ(ops_after(m, "Conv"), 1);
  }
  {  // a bias whose scale is not x_scale * w_scale
    QdqModel m;
    const std::string x = m.input("x", {1, 4, 5, 5});
    std::vector<float> ws;
    const std::string w = m.weight({4, 4, 1, 1}, 0, 4, &ws);
    m.b.node("Conv", {x, w, m.bias(4, kXs, ws, 1.01f)}, {"c"});
    m.output("c");
    EXPECT_EQ(ops_after(m, "Conv"), 1);
    EXPECT_EQ(ops_after(m, "QLinearConv"), 0);
  }
  {  // a Relu before a zero point that does not clamp at 0
    QdqModel m;
    const std::string x = m.input("x", {1, 4, 5, 5});
    std::vector<float> ws;
    m.b.node("Conv", {x, m.weight({4, 4, 1, 1}, 0, 4, &ws)}, {"c"});
    m.b.node("Relu", {"c"}, {"r"});
    m.output("r", 128);
    EXPECT_EQ(ops_after(m, "QLinearConv"), 0);  // (the float Conv and Relu fuse otherwise)
  }
  {  // a MaxPool requantized with other parameters
    QdqModel m;
    const std::string x = m.input("x", {1, 4, 6, 6});
    m.b.node("MaxPool", {x}, {"r"}, {A_is("kernel_shape", {2, 2})});
    m.output("r", 128, 3.f / 255);
    EXPECT_EQ(ops_after(m, "MaxPool"), 1);
    EXPECT_EQ(ops_after(m, "DequantizeLinear"), 1);
  }
}

// fuse_qdq_table: a float elementwise chain over one 8-bit value, with constant scalar operands, becomes
// nxrt::ByteTable; the chain's output codes, evaluated once for every input code, are the unfused graph's
// (`exact`; else within one step). The ops of `ops_gone` must be gone after it.
void expect_table(QdqModel& m, const std::vector<std::string>& ops_gone, bool exact) {
  ir::Model copy = m.b.m;
  ASSERT_TRUE(shape::infer_shapes(copy).ok());
  optimizer::Stats st;
  ir::Model o = optimized(copy, OptLevel::kAll, &st);
  EXPECT_EQ(count_op(o, "ByteTable"), 1);
  EXPECT_EQ(st.counts["fused_qdq_table"], 1);
  for (const std::string& op : ops_gone) EXPECT_EQ(count_op(o, op), 0) << op;
  expect_codes_near_unfused(m, exact ? 0 : 1, exact ? 1.0 : 0.0, "ByteTable");
}

// PP-OCRv4's learnable HardSwish as its QDQ export writes it: x * Clip(x + 3, 0, 6) / 6 * a + b with
// scalar a, b of shape [1]; exact IEEE operations, so the same bytes.
TEST(OptimizerFuseQdqTable, LearnableHardSwishChainIsOneTable) {
  QdqModel m;
  const std::string x = m.input("x", {2, 8, 9, 10});
  m.b.init("three", scalar_f(3.f));
  m.b.init("zero", scalar_f(0.f));
  m.b.init("six", scalar_f(6.f));
  m.b.init("a", Tensor::from_vector<float>(DataType::kFloat, {1}, {0.47f}));
  m.b.init("b", Tensor::from_vector<float>(DataType::kFloat, {1}, {-0.0076f}));
  m.b.node("Add", {x, "three"}, {"t1"});
  m.b.node("Clip", {"t1", "zero", "six"}, {"t2"});
  m.b.node("Mul", {x, "t2"}, {"t3"});
  m.b.node("Div", {"t3", "six"}, {"t4"});
  m.b.node("Mul", {"a", "t4"}, {"t5"});
  m.b.node("Add", {"t5", "b"}, {"t6"});
  m.output("t6", 60, 1.5f / 255);
  expect_table(m, {"Add", "Clip", "Mul", "Div"}, true);
}

// Swish into an int8 output: Sigmoid has a vector approximation, so a code may move by one step.
TEST(OptimizerFuseQdqTable, SwishIntoInt8IsOneTable) {
  QdqModel m;
  const std::string x = m.input("x", {1, 16, 33});
  m.b.node("Sigmoid", {x}, {"s"});
  m.b.node("Mul", {x, "s"}, {"sw"});
  const std::string q = m.quantize("sw", 1.f / 127, -20, true);
  m.b.node("Identity", {q}, {"y"});
  m.b.output("y", DataType::kInt8);
  expect_table(m, {"Sigmoid", "Mul"}, false);
}

// An int8 source whose DequantizeLinear has no zero point (a 0 of int8): the table's codes are int8.
TEST(OptimizerFuseQdqTable, Int8SourceWithoutAZeroPoint) {
  QdqModel m;
  m.b.input("x", {3, 40});
  m.feeds.emplace_back("x", Value(random_tensor({3, 40}, 77, -1.f, 1.f)));
  const std::string q = m.quantize("x", 1.f / 127, 0, true);
  m.b.node("DequantizeLinear", {q, m.last_scale}, {"xf"});
  m.b.init("k", scalar_f(-1.5f));
  m.b.node("Mul", {"xf", "k"}, {"p"});
  m.output("p", 128, 2.f / 255);
  expect_table(m, {"Mul"}, true);
}

TEST(OptimizerFuseQdqTable, Refusals) {
  auto tables = [](QdqModel& m) {
    ir::Model copy = m.b.m;
    EXPECT_TRUE(shape::infer_shapes(copy).ok());
    return count_op(optimized(copy, OptLevel::kAll), "ByteTable");
  };
  {  // a per-channel constant: each channel its own map
    QdqModel m;
    const std::string x = m.input("x", {1, 4, 5, 5});
    m.b.init("pc", Tensor::from_vector<float>(DataType::kFloat, {4, 1, 1}, {0.5f, 1.f, 1.5f, 2.f}));
    m.b.node("Mul", {x, "pc"}, {"p"});
    m.output("p");
    EXPECT_EQ(tables(m), 0);
  }
  {  // two 8-bit sources
    QdqModel m;
    const std::string x = m.input("x", {1, 4, 5, 5});
    const std::string y = m.input("y2", {1, 4, 5, 5});
    m.b.init("two", scalar_f(2.f));
    m.b.node("Mul", {x, "two"}, {"p"});
    m.b.node("Add", {"p", y}, {"s"});
    m.output("s");
    EXPECT_EQ(tables(m), 0);
  }
  {  // a one-value constant of higher rank than the source (it would raise the output's rank)
    QdqModel m;
    const std::string x = m.input("x", {6, 7});
    m.b.init("k", Tensor::from_vector<float>(DataType::kFloat, {1, 1, 1}, {1.5f}));
    m.b.node("Mul", {x, "k"}, {"p"});
    m.output("p");
    EXPECT_EQ(tables(m), 0);
  }
}

}  // namespace
}  // namespace nxrt
