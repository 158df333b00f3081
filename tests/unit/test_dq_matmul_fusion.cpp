// The DequantizeLinear + MatMul -> com.microsoft MatMulNBits pass (src/optimizer/fusions/fuse_dq_matmul.cpp):
// the fused model's output against the unfused one (level disabled) for int4 / uint4 / int8 / uint8
// weights with and without zero points, K not a multiple of the block, and the patterns it must leave alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "ops/cpu_provider.h"
#include "ir/float8_types.h"
#include "nxrt/float_types.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "optimizer/optimizer.h"
#include "optimizer_test_util.h"

using namespace nxrt;

namespace {

ir::Attribute ai(const std::string& n, int64_t v) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kInt;
  a.i = v;
  return a;
}

ir::ValueInfo vi(const std::string& name, const Dims& dims, DataType dt = DataType::kFloat) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = dt;
  v.type.has_shape = true;
  for (int64_t d : dims) v.type.dims.push_back(ir::Dim::fixed(d));
  return v;
}

ir::Node node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
              std::vector<ir::Attribute> attrs = {}) {
  ir::Node n;
  n.name = op + "_" + out[0];
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

// Random integers in the dtype's range (int4/uint4 packed two per byte, low nibble first).
Tensor random_codes(DataType dt, const Dims& shape, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor t(dt, shape);
  const int64_t n = t.numel();
  uint8_t* p = t.data<uint8_t>();
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t r = rng();
    switch (dt) {
      case DataType::kInt4:
      case DataType::kUInt4: subbyte_set(p, i, 4, r & 15u); break;
      default: p[i] = static_cast<uint8_t>(r & 255u); break;
    }
  }
  return t;
}

Tensor random_floats(const Dims& shape, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t(DataType::kFloat, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

struct Case {
  DataType dt = DataType::kInt4;
  int64_t K = 80, N = 24, block = 32;
  bool zp = false;
  Dims a_shape;      // default {3, K}
  int64_t axis = 0;  // DequantizeLinear axis attribute
  bool dq_is_output = false;
  bool second_matmul = false;
  bool bias = false;  // MatMul -> Add(constant [N])
  bool half = false;  // float16 scales, input and output
  bool half_scales_float_out = false;  // float16 scales, output_dtype float (opset 23)
};

Tensor to_half(const Tensor& t) {
  Tensor h(DataType::kFloat16, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) h.data<Float16>()[i] = Float16(t.data<float>()[i]);
  return h;
}
Tensor to_float(const Tensor& t) {
  if (t.dtype() == DataType::kFloat) return t;
  Tensor f(DataType::kFloat, t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) f.data<float>()[i] = static_cast<float>(t.data<Float16>()[i]);
  return f;
}

ir::Model build(const Case& c) {
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", c.half_scales_float_out ? 23 : 21});
  m.graph.name = "g";
  const Dims a_shape = c.a_shape.empty() ? Dims{3, c.K} : c.a_shape;
  const DataType ft = c.half ? DataType::kFloat16 : DataType::kFloat;
  m.graph.inputs.push_back(vi("a", a_shape, ft));
  const int64_t kb = (c.K + c.block - 1) / c.block;
  m.graph.initializers["w_q"] = random_codes(c.dt, {c.K, c.N}, 7);
  m.graph.initializers["w_s"] = random_floats(c.axis == 0 ? Dims{kb, c.N} : Dims{c.K, (c.N + c.block - 1) / c.block}, 8, 0.01f, 0.1f);
  if (c.half || c.half_scales_float_out) m.graph.initializers["w_s"] = to_half(m.graph.initializers["w_s"]);
  std::vector<std::string> dq_in = {"w_q", "w_s"};
  if (c.zp) {
    m.graph.initializers["w_z"] = random_codes(c.dt, m.graph.initializers["w_s"].shape(), 9);
    dq_in.push_back("w_z");
  }
  m.graph.nodes.push_back(node("DequantizeLinear", dq_in, {"w"}, {ai("axis", c.axis), ai("block_size", c.block)}));
  if (c.half_scales_float_out) m.graph.nodes.back().attributes.push_back(ai("output_dtype", 1));
  if (c.bias) {
    m.graph.initializers["bias"] = random_floats({c.N}, 10, -1.f, 1.f);
    if (c.half) m.graph.initializers["bias"] = to_half(m.graph.initializers["bias"]);
    m.graph.nodes.push_back(node("MatMul", {"a", "w"}, {"mm"}));
    m.graph.nodes.push_back(node("Add", {"bias", "mm"}, {"y"}));
  } else {
    m.graph.nodes.push_back(node("MatMul", {"a", "w"}, {"y"}));
  }
  ir::ValueInfo y;
  y.name = "y";
  y.type.kind = ir::TypeInfo::Kind::kTensor;
  y.type.elem_type = ft;
  m.graph.outputs.push_back(y);
  if (c.second_matmul) {
    m.graph.nodes.push_back(node("Relu", {"a"}, {"r"}));
    m.graph.nodes.push_back(node("MatMul", {"r", "w"}, {"y2"}));
    y.name = "y2";
    m.graph.outputs.push_back(y);
  }
  if (c.dq_is_output) {
    y.name = "w";
    m.graph.outputs.push_back(y);
  }
  return m;
}

std::vector<Tensor> run_at(const ir::Model& m, OptLevel level, const Tensor& a) {
  std::vector<Tensor> r;
  for (const Tensor& t : optest::run_at(m, level, {{"a", Value(a)}})) r.push_back(to_float(t));
  return r;
}

// Optimizes at level all; returns the number of fused MatMuls and the node op types.
int fused_count(const ir::Model& m, std::vector<std::string>* ops) {
  ir::Model copy = m;
  optimizer::Options o;
  o.registry = ops::cpu_provider_registry().get();
  o.level = OptLevel::kAll;
  optimizer::Stats st;
  Status s = optimizer::optimize(copy, o, &st);
  EXPECT_TRUE(s.ok()) << s.to_string();
  for (const auto& n : copy.graph.nodes) ops->push_back((n.domain.empty() ? "" : n.domain + "::") + n.op_type);
  return st.counts.count("fused_dq_matmul") ? st.counts.at("fused_dq_matmul") : 0;
}

// Fused (level all) output within 1e-5 of max |unfused output| of the unfused (level disabled) one.
void expect_same(const ir::Model& m, const Tensor& a, double tol = 1e-5) {
  auto ref = run_at(m, OptLevel::kDisabled, a);
  auto got = run_at(m, OptLevel::kAll, a);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t k = 0; k < ref.size(); ++k) {
    ASSERT_EQ(ref[k].shape(), got[k].shape());
    double mx = 0, diff = 0;
    for (int64_t i = 0; i < ref[k].numel(); ++i) {
      mx = std::max(mx, std::fabs(static_cast<double>(ref[k].data<float>()[i])));
      diff = std::max(diff, std::fabs(static_cast<double>(ref[k].data<float>()[i]) - got[k].data<float>()[i]));
    }
    EXPECT_GT(mx, 0.0);
    EXPECT_LE(diff, tol * mx) << "output " << k;
  }
}

void check_fused(const Case& c) {
  const ir::Model m = build(c);
  std::vector<std::string> ops;
  EXPECT_EQ(fused_count(m, &ops), c.second_matmul ? 2 : 1);
  for (const auto& op : ops) {
    EXPECT_NE(op, "MatMul");
    if (!c.dq_is_output) {
      EXPECT_NE(op, "DequantizeLinear");
    }
  }
  const Dims a_shape = c.a_shape.empty() ? Dims{3, c.K} : c.a_shape;
  const Tensor a = random_floats(a_shape, 11, -1.f, 1.f);
  // float16: the unfused graph rounds each weight and the result to float16 (2^-11 relative).
  if (c.half) expect_same(m, to_half(a), 2e-3);
  else expect_same(m, a);
}

}  // namespace

TEST(DqMatMulFusion, Int4NoZeroPointPartialBlock) { check_fused({DataType::kInt4, 80, 24, 32, false}); }
TEST(DqMatMulFusion, Int4ZeroPoint) { check_fused({DataType::kInt4, 80, 24, 32, true}); }
TEST(DqMatMulFusion, UInt4NoZeroPoint) { check_fused({DataType::kUInt4, 80, 24, 32, false}); }
TEST(DqMatMulFusion, UInt4ZeroPointOddBlocks) { check_fused({DataType::kUInt4, 72, 9, 16, true}); }
TEST(DqMatMulFusion, Int8AndUInt8) {
  check_fused({DataType::kInt8, 70, 10, 32, false});
  check_fused({DataType::kInt8, 64, 10, 16, true});
  check_fused({DataType::kUInt8, 70, 10, 32, false});
  check_fused({DataType::kUInt8, 50, 10, 16, true});
}
TEST(DqMatMulFusion, Batched3DInputAndLargerBlock) {
  Case c{DataType::kInt4, 200, 17, 64, true};
  c.a_shape = {2, 5, 200};
  check_fused(c);
}
TEST(DqMatMulFusion, BiasAddAfter) {
  Case c{DataType::kInt4, 96, 40, 32, false};
  c.bias = true;
  check_fused(c);
  c = Case{DataType::kUInt8, 80, 12, 16, true};
  c.bias = true;
  check_fused(c);
}
TEST(DqMatMulFusion, Float16ScalesAndActivations) {
  Case c{DataType::kInt4, 80, 24, 32, false};
  c.half = true;
  check_fused(c);
  c = Case{DataType::kUInt4, 96, 16, 32, true};
  c.half = true;
  c.bias = true;
  check_fused(c);
  c = Case{DataType::kInt4, 80, 24, 32, true};
  c.half_scales_float_out = true;
  check_fused(c);
}
TEST(DqMatMulFusion, SharedWeightTwoMatMuls) {
  Case c{DataType::kUInt4, 96, 8, 32, true};
  c.second_matmul = true;
  check_fused(c);
}
TEST(DqMatMulFusion, DequantizedWeightAlsoAnOutputStays) {
  Case c{DataType::kInt4, 64, 8, 32, false};
  c.dq_is_output = true;
  check_fused(c);
  std::vector<std::string> ops;
  fused_count(build(c), &ops);
  EXPECT_NE(std::find(ops.begin(), ops.end(), "DequantizeLinear"), ops.end());
}

TEST(DqMatMulFusion, LeavesOtherPatternsAlone) {
  // Blocked along N (axis 1): not MatMulNBits's layout.
  Case c{DataType::kInt4, 64, 64, 32, false};
  c.axis = 1;
  std::vector<std::string> ops;
  EXPECT_EQ(fused_count(build(c), &ops), 0);
  expect_same(build(c), random_floats({3, 64}, 3, -1.f, 1.f));
  // Block size 8 (< 16).
  ops.clear();
  EXPECT_EQ(fused_count(build({DataType::kInt4, 64, 8, 8, false}), &ops), 0);
  // Dequantized tensor as MatMul's A input.
  ir::Model m = build({DataType::kInt4, 64, 8, 32, false});
  m.graph.nodes[1].inputs = {"w", "b"};
  m.graph.inputs[0] = vi("b", {8, 3});
  ops.clear();
  EXPECT_EQ(fused_count(m, &ops), 0);
  // The quantized weight is a graph input (not a constant).
  m = build({DataType::kInt4, 64, 8, 32, false});
  ir::ValueInfo q;
  q.name = "w_q";
  q.type.kind = ir::TypeInfo::Kind::kTensor;
  q.type.elem_type = DataType::kInt4;
  m.graph.initializers.erase("w_q");
  m.graph.inputs.push_back(q);
  ops.clear();
  EXPECT_EQ(fused_count(m, &ops), 0);
}
