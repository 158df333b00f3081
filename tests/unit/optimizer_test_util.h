// Helpers of the optimizer's unit tests: a small model builder, optimizing a model, running it at an
// optimization level, and comparing the outputs of the levels.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu_provider.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "optimizer/optimizer.h"

namespace nxrt::optest {

// Attributes: int, float, ints, tensor.
inline ir::Attribute named_attr(const std::string& n, ir::Attribute::Type type) {
  ir::Attribute a;
  a.name = n;
  a.type = type;
  return a;
}
inline ir::Attribute A_i(const std::string& n, int64_t v) {
  ir::Attribute a = named_attr(n, ir::Attribute::Type::kInt);
  a.i = v;
  return a;
}
inline ir::Attribute A_f(const std::string& n, float v) {
  ir::Attribute a = named_attr(n, ir::Attribute::Type::kFloat);
  a.f = v;
  return a;
}
inline ir::Attribute A_is(const std::string& n, std::vector<int64_t> v) {
  ir::Attribute a = named_attr(n, ir::Attribute::Type::kInts);
  a.ints = std::move(v);
  return a;
}
inline ir::Attribute A_t(const std::string& n, Tensor t) {
  ir::Attribute a = named_attr(n, ir::Attribute::Type::kTensor);
  a.t = std::move(t);
  return a;
}
inline ir::Attribute A_g(const std::string& n, std::shared_ptr<ir::Graph> g) {
  ir::Attribute a = named_attr(n, ir::Attribute::Type::kGraph);
  a.g = std::move(g);
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
  void output(const std::string& name, DataType dtype = DataType::kFloat) {
    ir::ValueInfo v;
    v.name = name;
    v.type.kind = ir::TypeInfo::Kind::kTensor;
    v.type.elem_type = dtype;
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

// Runs the model at `level` on `threads` intra-op threads (NXRT_OPT_LEVEL must not be set in the test
// environment).
inline std::vector<Tensor> run_at(const ir::Model& m, OptLevel level, const std::vector<std::pair<std::string, Value>>& feeds,
                                  int threads = 1) {
  std::string bytes = onnx::serialize_model(m);
  SessionOptions so;
  so.opt_level = level;
  so.threads = threads;
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
                          double tol = 1e-5, int threads = 1) {
  auto ref = run_at(m, OptLevel::kDisabled, feeds);
  for (OptLevel level : {OptLevel::kBasic, OptLevel::kAll}) {
    auto got = run_at(m, level, feeds, threads);
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


// ---- patterns the fusions match, reading graph input "x" and writing "y" (no graph output added) ----

// LayerNorm over `axes`, scale `gamma` and bias "beta" (initializers the caller adds).
inline void add_layer_norm(ModelBuilder& b, const std::vector<int64_t>& axes, const std::string& gamma) {
  b.init("two", scalar_f(2.f));
  b.init("eps", scalar_f(1e-5f));
  b.node("ReduceMean", {"x"}, {"m"}, {A_is("axes", axes)});
  b.node("Sub", {"x", "m"}, {"d"});
  b.node("Pow", {"d", "two"}, {"p"});
  b.node("ReduceMean", {"p"}, {"v"}, {A_is("axes", axes)});
  b.node("Add", {"v", "eps"}, {"e"});
  b.node("Sqrt", {"e"}, {"s"});
  b.node("Div", {"d", "s"}, {"n"});
  b.node("Mul", {"n", gamma}, {"g"});
  b.node("Add", {"g", "beta"}, {"y"});
}

// RMSNorm over the last axis of width `width`: x / sqrt(...) or x * Reciprocal(sqrt(...)).
inline void add_rms_norm(ModelBuilder& b, int64_t width, bool reciprocal) {
  b.init("two", scalar_f(2.f));
  b.init("eps", scalar_f(1e-6f));
  b.init("gamma", random_tensor({width}, 29));
  b.node("Pow", {"x", "two"}, {"p"});
  b.node("ReduceMean", {"p"}, {"v"}, {A_is("axes", {-1})});
  b.node("Add", {"v", "eps"}, {"e"});
  b.node("Sqrt", {"e"}, {"s"});
  if (reciprocal) {
    b.node("Reciprocal", {"s"}, {"r"});
    b.node("Mul", {"x", "r"}, {"n"});
  } else {
    b.node("Div", {"x", "s"}, {"n"});
  }
  b.node("Mul", {"gamma", "n"}, {"y"});
}

// GELU, erf or tanh form, with one of the three tails 0.5 * x * a:
//   0: Mul(x, a) then * 0.5;  1: Mul(a, 0.5) then x *;  2: h = Mul(x, 0.5) then h * a.
// `sqrt2` is the erf form's divisor (a wrong one must not fuse).
inline void add_gelu(ModelBuilder& b, bool tanh, int tail, float sqrt2 = 1.4142135f) {
  b.init("one", scalar_f(1.f));
  b.init("half", scalar_f(0.5f));
  if (tanh) {
    b.init("three", scalar_f(3.f));
    b.init("k", scalar_f(0.044715f));
    b.init("c", scalar_f(0.7978845608f));
    b.node("Pow", {"x", "three"}, {"x3"});
    b.node("Mul", {"k", "x3"}, {"q"});
    b.node("Add", {"x", "q"}, {"w"});
    b.node("Mul", {"w", "c"}, {"u"});
    b.node("Tanh", {"u"}, {"t"});
    b.node("Add", {"one", "t"}, {"a"});
  } else {
    b.init("sqrt2", scalar_f(sqrt2));
    b.node("Div", {"x", "sqrt2"}, {"u"});
    b.node("Erf", {"u"}, {"t"});
    b.node("Add", {"t", "one"}, {"a"});
  }
  if (tail == 0) {
    b.node("Mul", {"x", "a"}, {"m"});
    b.node("Mul", {"m", "half"}, {"y"});
  } else if (tail == 1) {
    b.node("Mul", {"a", "half"}, {"m"});
    b.node("Mul", {"x", "m"}, {"y"});
  } else {
    b.node("Mul", {"x", "half"}, {"h"});
    b.node("Mul", {"h", "a"}, {"y"});
  }
}

}  // namespace nxrt::optest
