// Helpers of the optimizer's unit tests: a small model builder, optimizing a model, running it at an
// optimization level, and comparing the outputs of the levels.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu_provider.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "optimizer/optimizer.h"

namespace nxrt::optest {

inline ir::Attribute A_i(const std::string& n, int64_t v) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kInt;
  a.i = v;
  return a;
}
inline ir::Attribute A_f(const std::string& n, float v) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kFloat;
  a.f = v;
  return a;
}
inline ir::Attribute A_is(const std::string& n, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}
inline ir::Attribute A_t(const std::string& n, Tensor t) {
  ir::Attribute a;
  a.name = n;
  a.type = ir::Attribute::Type::kTensor;
  a.t = std::move(t);
  return a;
}

inline Tensor random_tensor(const Dims& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t(DataType::kFloat, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

inline Tensor scalar_f(float v) { return Tensor::from_vector<float>(DataType::kFloat, {}, {v}); }
inline Tensor ints(std::vector<int64_t> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  return Tensor::from_vector<int64_t>(DataType::kInt64, {n}, v);
}

struct ModelBuilder {
  ir::Model m;
  explicit ModelBuilder(int64_t opset) {
    m.ir_version = 8;
    m.opset_imports.push_back({"", opset});
    m.graph.name = "g";
  }
  static ir::ValueInfo vi(const std::string& name, const std::vector<int64_t>& dims) {
    ir::ValueInfo v;
    v.name = name;
    v.type.kind = ir::TypeInfo::Kind::kTensor;
    v.type.elem_type = DataType::kFloat;
    v.type.has_shape = true;
    for (int64_t d : dims) v.type.dims.push_back(d >= 0 ? ir::Dim::fixed(d) : ir::Dim::named("n"));
    return v;
  }
  void input(const std::string& name, const std::vector<int64_t>& dims) { m.graph.inputs.push_back(vi(name, dims)); }
  void output(const std::string& name) {
    ir::ValueInfo v;
    v.name = name;
    v.type.kind = ir::TypeInfo::Kind::kTensor;
    v.type.elem_type = DataType::kFloat;
    m.graph.outputs.push_back(v);
  }
  void init(const std::string& name, Tensor t) { m.graph.initializers[name] = std::move(t); }
  ir::Node& node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                 std::vector<ir::Attribute> attrs = {}) {
    ir::Node n;
    n.name = op + "_" + std::to_string(m.graph.nodes.size());
    n.op_type = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.attributes = std::move(attrs);
    m.graph.nodes.push_back(std::move(n));
    return m.graph.nodes.back();
  }
};

// The model after optimization at `level`, and its op types in order.
inline ir::Model optimized(const ir::Model& m, OptLevel level, optimizer::Stats* stats = nullptr) {
  ir::Model copy = m;
  optimizer::Options o;
  o.registry = ops::cpu_provider_registry().get();
  o.level = level;
  Status s = optimizer::optimize(copy, o, stats);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return copy;
}
inline std::vector<std::string> ops_of(const ir::Model& m) {
  std::vector<std::string> r;
  for (const auto& n : m.graph.nodes) r.push_back((n.domain.empty() ? "" : n.domain + "::") + n.op_type);
  return r;
}

// Runs the model at `level` (NXRT_OPT_LEVEL must not be set in the test environment).
inline std::vector<Tensor> run_at(const ir::Model& m, OptLevel level, const std::vector<std::pair<std::string, Value>>& feeds) {
  std::string bytes = onnx::serialize_model(m);
  SessionOptions so;
  so.opt_level = level;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), so);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  auto out = (*s)->run(feeds);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return {};
  std::vector<Tensor> r;
  for (auto& v : *out) r.push_back(v.tensor());
  return r;
}

// Outputs at level all (and basic) equal those at level disabled within tolerance.
inline void expect_same_numerics(const ir::Model& m, const std::vector<std::pair<std::string, Value>>& feeds,
                          double tol = 1e-5) {
  auto ref = run_at(m, OptLevel::kDisabled, feeds);
  for (OptLevel level : {OptLevel::kBasic, OptLevel::kAll}) {
    auto got = run_at(m, level, feeds);
    ASSERT_EQ(got.size(), ref.size());
    for (size_t k = 0; k < ref.size(); ++k) {
      ASSERT_EQ(got[k].shape(), ref[k].shape()) << "output " << k;
      ASSERT_EQ(got[k].dtype(), ref[k].dtype());
      const float* a = ref[k].data<float>();
      const float* b = got[k].data<float>();
      for (int64_t i = 0; i < ref[k].numel(); ++i) {
        ASSERT_NEAR(a[i], b[i], tol * (1 + std::fabs(a[i]))) << "output " << k << " element " << i << " level "
                                                             << static_cast<int>(level);
      }
    }
  }
}

inline int count_op(const ir::Model& m, const std::string& op) {
  int c = 0;
  for (const auto& n : m.graph.nodes) c += n.op_type == op;
  return c;
}


}  // namespace nxrt::optest
