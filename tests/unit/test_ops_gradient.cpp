// ai.onnx.preview.training::Gradient on in-memory models, checked against central finite differences
// of sum(y) computed by running the same model with perturbed inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "kernel_test_util.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"

using namespace nxrt;

namespace {

ir::ValueInfo vi(const std::string& name, DataType dt = DataType::kDouble) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = dt;
  return v;
}

ir::Node node(const std::string& op, std::vector<std::string> in, std::string out) {
  ir::Node n;
  n.name = op + "_" + out;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = {std::move(out)};
  return n;
}

struct GradModel {
  std::vector<ir::Node> forward;
  std::map<std::string, Tensor> feeds;        // graph inputs (all differentiated, in this order: xs)
  std::vector<std::string> xs;
  std::map<std::string, Tensor> initializers;
  std::string y = "y";
};

std::string build(const GradModel& gm, DataType dt = DataType::kDouble) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.opset_imports.push_back({"ai.onnx.preview.training", 1});
  ir::Graph& g = m.graph;
  g.name = "g";
  for (const auto& x : gm.xs) g.inputs.push_back(vi(x, dt));
  g.initializers = gm.initializers;
  g.nodes = gm.forward;
  ir::Node grad;
  grad.name = "grad";
  grad.op_type = "Gradient";
  grad.domain = "ai.onnx.preview.training";
  grad.inputs = gm.xs;
  for (const auto& x : gm.xs) grad.outputs.push_back("d_" + x);
  grad.attributes = {nxrt::testing::attr_strings("xs", gm.xs), nxrt::testing::attr_string("y", gm.y)};
  g.nodes.push_back(grad);
  g.outputs.push_back(vi(gm.y, dt));
  for (const auto& x : gm.xs) g.outputs.push_back(vi("d_" + x, dt));
  return onnx::serialize_model(m);
}

Tensor dt_tensor(Dims shape, std::vector<double> v) { return Tensor::from_vector<double>(DataType::kDouble, shape, v); }

std::vector<std::pair<std::string, Value>> feeds_of(const GradModel& gm, const std::map<std::string, Tensor>& t) {
  std::vector<std::pair<std::string, Value>> f;
  for (const auto& x : gm.xs) f.push_back({x, Value(t.at(x).clone())});
  return f;
}

double sum_y(Session& s, const GradModel& gm, const std::map<std::string, Tensor>& t) {
  auto out = s.run(feeds_of(gm, t));
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return 0;
  const Tensor& y = (*out)[0].tensor();
  double acc = 0;
  for (int64_t i = 0; i < y.numel(); ++i) acc += y.data<double>()[i];
  return acc;
}

// Runs the model, then checks every gradient element against a central difference of sum(y).
void check_against_finite_differences(const GradModel& gm) {
  std::string bytes = build(gm);
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto out = (*s)->run(feeds_of(gm, gm.feeds));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  ASSERT_EQ(out->size(), gm.xs.size() + 1);
  for (size_t i = 0; i < gm.xs.size(); ++i) {
    const std::string& x = gm.xs[i];
    const Tensor& g = (*out)[i + 1].tensor();
    ASSERT_EQ(g.shape(), gm.feeds.at(x).shape()) << x;
    for (int64_t e = 0; e < g.numel(); ++e) {
      const double h = 1e-6;
      auto plus = gm.feeds, minus = gm.feeds;
      plus[x] = gm.feeds.at(x).clone();
      minus[x] = gm.feeds.at(x).clone();
      plus[x].data<double>()[e] += h;
      minus[x].data<double>()[e] -= h;
      const double fd = (sum_y(**s, gm, plus) - sum_y(**s, gm, minus)) / (2 * h);
      EXPECT_NEAR(g.data<double>()[e], fd, 1e-5 * (1 + std::fabs(fd))) << "d/d" << x << "[" << e << "]";
    }
  }
}

}  // namespace

TEST(OpsGradient, ElementwiseChainWithBroadcasting) {
  GradModel gm;
  gm.xs = {"a", "b"};
  gm.feeds["a"] = dt_tensor({2, 3}, {0.3, -0.7, 1.1, 0.5, 2.0, -1.3});
  gm.feeds["b"] = dt_tensor({3}, {0.9, -0.4, 0.6});
  gm.initializers["two"] = dt_tensor({1}, {2.0});
  gm.forward = {node("Mul", {"a", "b"}, "m"),      node("Exp", {"b"}, "e"),       node("Sub", {"m", "e"}, "s"),
                node("Tanh", {"a"}, "t"),          node("Add", {"t", "two"}, "t2"), node("Div", {"s", "t2"}, "q"),
                node("Sigmoid", {"q"}, "sg"),      node("Neg", {"sg"}, "n"),      node("Identity", {"n"}, "id"),
                node("Exp", {"a"}, "ea"),          node("Add", {"ea", "two"}, "ea2"), node("Log", {"ea2"}, "l"),
                node("Sqrt", {"ea2"}, "sq"),       node("Relu", {"a"}, "r"),      node("Add", {"id", "l"}, "u"),
                node("Mul", {"u", "sq"}, "w"),     node("Add", {"w", "r"}, "y")};
  check_against_finite_differences(gm);
}

TEST(OpsGradient, MatMulShapes) {
  // Batched with a broadcast right operand, then vector-matrix and matrix-vector.
  GradModel gm;
  gm.xs = {"A", "B", "v", "w"};
  gm.feeds["A"] = dt_tensor({2, 2, 3}, {0.1, 0.2, -0.3, 0.4, 0.5, 0.6, -0.7, 0.8, 0.9, 1.0, -1.1, 1.2});
  gm.feeds["B"] = dt_tensor({3, 2}, {1.0, -0.5, 0.25, 0.75, -1.5, 2.0});
  gm.feeds["v"] = dt_tensor({2}, {0.3, -0.6});
  gm.feeds["w"] = dt_tensor({2}, {1.5, 0.5});
  gm.forward = {node("MatMul", {"A", "B"}, "AB"),    // [2,2,2]
                node("MatMul", {"v", "AB"}, "vAB"),  // [2,2]
                node("MatMul", {"vAB", "w"}, "y0"),  // [2]
                node("MatMul", {"v", "w"}, "vw"),    // []
                node("Mul", {"y0", "vw"}, "y")};
  check_against_finite_differences(gm);
}

TEST(OpsGradient, ConformanceShapeAndUnusedX) {
  // The ONNX test: c = a + b, d = c * a; dd/da = 2a + b, dd/db = a. x 'z' does not reach y: zero.
  GradModel gm;
  gm.xs = {"a", "b", "z"};
  gm.y = "d";
  gm.forward = {node("Add", {"a", "b"}, "c"), node("Mul", {"c", "a"}, "d"), node("Neg", {"z"}, "unused")};
  std::string bytes = build(gm, DataType::kFloat);
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto f = [](float v) { return Value(Tensor::from_vector<float>(DataType::kFloat, {}, {v})); };
  auto out = (*s)->run({{"a", f(3.f)}, {"b", f(5.f)}, {"z", Value(Tensor::from_vector<float>(DataType::kFloat, {2}, {1.f, 2.f}))}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[0], 24.f);
  EXPECT_FLOAT_EQ((*out)[1].tensor().data<float>()[0], 11.f);
  EXPECT_FLOAT_EQ((*out)[2].tensor().data<float>()[0], 3.f);
  const Tensor& dz = (*out)[3].tensor();
  ASSERT_EQ(dz.shape(), (Dims{2}));
  EXPECT_EQ(dz.data<float>()[0], 0.f);
  EXPECT_EQ(dz.data<float>()[1], 0.f);
}

TEST(OpsGradient, UnsupportedOpIsNotImplemented) {
  GradModel gm;
  gm.xs = {"a"};
  gm.forward = {node("Softmax", {"a"}, "s"), node("Exp", {"s"}, "y")};
  std::string bytes = build(gm);
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kNotImplemented) << s.status().to_string();
  EXPECT_NE(s.status().message().find("Softmax"), std::string::npos) << s.status().message();
  // Without a graph (a bare kernel), Gradient is an error, not a crash.
  nxrt::testing::KernelRun r;
  r.op_type = "Gradient";
  r.domain = "ai.onnx.preview.training";
  r.opset = 1;
  r.attributes = {nxrt::testing::attr_strings("xs", {"a"}), nxrt::testing::attr_string("y", "y")};
  r.inputs = {Value(dt_tensor({1}, {1.0}))};
  EXPECT_FALSE(nxrt::testing::run_kernel(r).ok());
}
