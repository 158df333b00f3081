// FlexAttention's mask_mod (ai.onnx.preview): no conformance test exercises it, so this checks both
// forms the kernel accepts against a plain causal-attention computation: a subgraph returning
// replacement scores (scores + a -inf upper triangle, the form the ONNX schema text describes) and
// one returning a boolean keep-mask (positions where it is false get -inf).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernel_test_util.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"

using namespace nxrt;

namespace {

constexpr int64_t kL = 4, kD = 3;

// A float/bool tensor value with fixed dims.
ir::ValueInfo vi(const std::string& name, DataType dt, std::vector<int64_t> dims) {
  std::vector<ir::Dim> d;
  for (int64_t x : dims) d.push_back(ir::Dim::fixed(x));
  return nxrt::testing::tensor_info(name, dt, std::move(d));
}

// Q, K, V [1, 1, L, D]; mask_mod is `body`.
std::string flex_model(std::shared_ptr<ir::Graph> body) {
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 23});
  m.opset_imports.push_back({"ai.onnx.preview", 1});
  m.graph.name = "flex";
  m.graph.inputs = {vi("Q", DataType::kFloat, {1, 1, kL, kD}), vi("K", DataType::kFloat, {1, 1, kL, kD}),
                    vi("V", DataType::kFloat, {1, 1, kL, kD})};
  m.graph.outputs = {vi("Y", DataType::kFloat, {1, 1, kL, kD})};
  ir::Node f = nxrt::testing::graph_node("FlexAttention", {"Q", "K", "V"}, {"Y"});
  f.domain = "ai.onnx.preview";
  f.attributes.push_back(nxrt::testing::attr_graph("mask_mod", std::move(body)));
  m.graph.nodes = {f};
  return onnx::serialize_model(m);
}

Tensor rnd(uint32_t seed) {
  Tensor t(DataType::kFloat, {1, 1, kL, kD});
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(g);
  return t;
}

std::vector<float> causal_reference(const Tensor& q, const Tensor& k, const Tensor& v) {
  std::vector<float> y(kL * kD, 0.f);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kD));
  for (int64_t i = 0; i < kL; ++i) {
    std::vector<double> s(kL, -1e300);
    double mx = -1e300;
    for (int64_t j = 0; j <= i; ++j) {
      double a = 0;
      for (int64_t d = 0; d < kD; ++d) a += q.data<float>()[i * kD + d] * k.data<float>()[j * kD + d];
      s[j] = a * scale;
      mx = std::max(mx, s[j]);
    }
    double z = 0;
    for (int64_t j = 0; j <= i; ++j) z += std::exp(s[j] - mx);
    for (int64_t j = 0; j <= i; ++j)
      for (int64_t d = 0; d < kD; ++d) y[i * kD + d] += std::exp(s[j] - mx) / z * v.data<float>()[j * kD + d];
  }
  return y;
}

void expect_causal(const std::string& bytes) {
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Tensor q = rnd(1), k = rnd(2), v = rnd(3);
  auto out = (*s)->run({{"Q", Value(q)}, {"K", Value(k)}, {"V", Value(v)}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  std::vector<float> ref = causal_reference(q, k, v);
  const Tensor& y = (*out)[0].tensor();
  for (int64_t i = 0; i < kL * kD; ++i) EXPECT_NEAR(y.data<float>()[i], ref[i], 1e-5) << "element " << i;
}

}  // namespace

TEST(FlexAttentionMaskMod, ReplacementScoresFromTheSubgraph) {
  auto body = std::make_shared<ir::Graph>();
  body->name = "mask_mod";
  body->inputs = {vi("scores", DataType::kFloat, {1, 1, kL, kL})};
  body->outputs = {vi("masked", DataType::kFloat, {1, 1, kL, kL})};
  Tensor bias(DataType::kFloat, {kL, kL});
  for (int64_t i = 0; i < kL; ++i)
    for (int64_t j = 0; j < kL; ++j) bias.data<float>()[i * kL + j] = j > i ? -std::numeric_limits<float>::infinity() : 0.f;
  body->initializers["causal_bias"] = bias;
  body->nodes = {nxrt::testing::graph_node("Add", {"scores", "causal_bias"}, {"masked"})};
  expect_causal(flex_model(body));
}

TEST(FlexAttentionMaskMod, BooleanKeepMaskFromTheSubgraph) {
  auto body = std::make_shared<ir::Graph>();
  body->name = "mask_mod";
  body->inputs = {vi("scores", DataType::kFloat, {1, 1, kL, kL})};
  body->outputs = {vi("keep", DataType::kBool, {1, 1, kL, kL})};
  Tensor lower(DataType::kBool, {kL, kL});
  for (int64_t i = 0; i < kL; ++i)
    for (int64_t j = 0; j < kL; ++j) lower.data<uint8_t>()[i * kL + j] = j <= i;
  Tensor shape = Tensor::from_vector<int64_t>(DataType::kInt64, {4}, {1, 1, kL, kL});
  body->initializers["lower"] = lower;
  body->initializers["shape4"] = shape;
  body->nodes = {nxrt::testing::graph_node("Expand", {"lower", "shape4"}, {"keep"})};
  expect_causal(flex_model(body));
}
