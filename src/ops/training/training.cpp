// ai.onnx.preview.training optimizers: Adagrad, Adam, Momentum (standard and nesterov). Each takes
// a learning rate R and step count T (scalars), then n tensors of each kind, and returns the updated
// tensors grouped by kind. Computed in double and rounded back to the tensors' dtype.
//
// Gradient: d y / d xs over the node's enclosing graph (KernelInfo::graph()). At creation the kernel
// collects the forward nodes that y depends on, stopping at the names in xs and zs (the node's
// inputs, in that order) and at initializers (constants). Each run recomputes that forward subgraph
// in double from the node's inputs, then runs reverse-mode differentiation. Differentiable ops
// (default domain): Add, Sub, Mul, Div, Neg, Identity, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, MatMul
// (numpy semantics, 1-D and batched with broadcasting); Constant nodes are constants. Broadcast
// operands get their gradient summed over the broadcast axes. Any other op on the path from xs/zs to
// y is a not-implemented error naming it. An x that y does not depend on gets a zero gradient.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ops/common.h"
#include "shape/op_schema.h"

namespace nxrt::ops {
namespace {

const char* kTrainingDomain = "ai.onnx.preview.training";

Result<double> scalar_double(const ep::KernelContext& ctx, size_t i, const char* name) {
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) return ctx.error(std::string(name) + " must be a scalar, got shape " + shape_to_string(t.shape()), StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(auto v, t.dtype() == DataType::kInt64 || t.dtype() == DataType::kInt32 ? [&]() -> Result<std::vector<double>> {
    NXRT_ASSIGN_OR_RETURN(auto iv, read_int_values(t));
    return std::vector<double>(iv.begin(), iv.end());
  }() : read_double_values(t));
  return v[0];
}

// Checks the (R, T, groups x n) layout; returns n.
Result<int64_t> group_count(const ep::KernelContext& ctx, int64_t groups) {
  const int64_t ni = static_cast<int64_t>(ctx.num_inputs());
  if (ni < 2 + groups || (ni - 2) % groups != 0) {
    return ctx.error("expected R, T and " + std::to_string(groups) + " equal groups of tensors, got " + std::to_string(ni) + " inputs", StatusCode::kInvalidArgument);
  }
  const int64_t n = (ni - 2) / groups;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(static_cast<size_t>(2 + i));
    for (int64_t g = 1; g < groups; ++g) {
      const Tensor& o = ctx.input(static_cast<size_t>(2 + g * n + i));
      if (o.shape() != x.shape() || o.dtype() != x.dtype()) {
        return ctx.error("tensor " + std::to_string(i) + " of each group must share shape and dtype: " + x.describe() + " vs " + o.describe(), StatusCode::kInvalidArgument);
      }
    }
  }
  return n;
}

// Runs fn(elements in, elements out) for tensor i of every group, in double.
template <typename F>
Status for_each_group(ep::KernelContext& ctx, int64_t n, int64_t in_groups, int64_t out_groups, F&& fn) {
  for (int64_t i = 0; i < n; ++i) {
    const Tensor& x = ctx.input(static_cast<size_t>(2 + i));
    const int64_t m = x.numel();
    std::vector<std::vector<double>> in(static_cast<size_t>(in_groups));
    for (int64_t g = 0; g < in_groups; ++g) {
      NXRT_ASSIGN_OR_RETURN(in[g], read_double_values(ctx.input(static_cast<size_t>(2 + g * n + i))));
    }
    std::vector<std::vector<double>> out(static_cast<size_t>(out_groups), std::vector<double>(static_cast<size_t>(m)));
    for (int64_t e = 0; e < m; ++e) fn(in, out, e);
    for (int64_t g = 0; g < out_groups; ++g) {
      const size_t oi = static_cast<size_t>(g * n + i);
      if (!ctx.output_requested(oi)) continue;
      NXRT_ASSIGN_OR_RETURN(Tensor * o, ctx.allocate_output(oi, x.dtype(), x.shape()));
      Status st = dispatch_float(x.dtype(), [&](auto tag) -> Status {
        using T = decltype(tag);
        T* d = o->data<T>();
        for (int64_t e = 0; e < m; ++e) d[e] = from_compute<T>(out[g][e]);
        return Status::Ok();
      }, [&] { return ctx.error("optimizer tensors must be float or double", StatusCode::kInvalidArgument); });
      NXRT_RETURN_IF_ERROR(st);
    }
  }
  return Status::Ok();
}

Status check_float_inputs(const ep::KernelContext& ctx) {
  for (size_t i = 2; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return ctx.error("optimizer inputs may not be omitted", StatusCode::kInvalidArgument);
    const DataType dt = ctx.input(i).dtype();
    if (dt != DataType::kFloat && dt != DataType::kDouble) return ctx.error("optimizer tensors must be float or double", StatusCode::kInvalidArgument);
  }
  return Status::Ok();
}

Status adagrad(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  NXRT_RETURN_IF_ERROR(check_float_inputs(ctx));
  NXRT_ASSIGN_OR_RETURN(int64_t n, group_count(ctx, 3));
  NXRT_ASSIGN_OR_RETURN(double r, scalar_double(ctx, 0, "R"));
  NXRT_ASSIGN_OR_RETURN(double t, scalar_double(ctx, 1, "T"));
  const double decay = info.attr_float("decay_factor", 0.f);
  const double eps = info.attr_float("epsilon", 1e-6f);
  const double norm = info.attr_float("norm_coefficient", 0.f);
  const double rr = r / (1 + t * decay);
  return for_each_group(ctx, n, 3, 2, [&](const auto& in, auto& out, int64_t e) {
    const double x = in[0][e], g = in[1][e] + norm * x, h = in[2][e] + g * g;
    out[0][e] = x - rr * g / (std::sqrt(h) + eps);
    out[1][e] = h;
  });
}

Status adam(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  NXRT_RETURN_IF_ERROR(check_float_inputs(ctx));
  NXRT_ASSIGN_OR_RETURN(int64_t n, group_count(ctx, 4));
  NXRT_ASSIGN_OR_RETURN(double r, scalar_double(ctx, 0, "R"));
  NXRT_ASSIGN_OR_RETURN(double t, scalar_double(ctx, 1, "T"));
  const double alpha = info.attr_float("alpha", 0.9f);
  const double beta = info.attr_float("beta", 0.999f);
  const double eps = info.attr_float("epsilon", 1e-6f);
  const double norm = info.attr_float("norm_coefficient", 0.f);
  const double post = info.attr_float("norm_coefficient_post", 0.f);
  const double ra = t > 0 ? r * std::sqrt(1 - std::pow(beta, t)) / (1 - std::pow(alpha, t)) : r;
  return for_each_group(ctx, n, 4, 3, [&](const auto& in, auto& out, int64_t e) {
    const double x = in[0][e], g = in[1][e] + norm * x;
    const double v = alpha * in[2][e] + (1 - alpha) * g;
    const double h = beta * in[3][e] + (1 - beta) * g * g;
    const double xn = x - ra * (v / (std::sqrt(h) + eps));
    out[0][e] = (1 - post) * xn;
    out[1][e] = v;
    out[2][e] = h;
  });
}

Status momentum(ep::KernelContext& ctx) {
  const auto& info = ctx.info();
  NXRT_RETURN_IF_ERROR(check_float_inputs(ctx));
  NXRT_ASSIGN_OR_RETURN(int64_t n, group_count(ctx, 3));
  NXRT_ASSIGN_OR_RETURN(double r, scalar_double(ctx, 0, "R"));
  NXRT_ASSIGN_OR_RETURN(double t, scalar_double(ctx, 1, "T"));
  for (const char* a : {"alpha", "beta", "mode", "norm_coefficient"}) {
    if (!info.has_attr(a)) return info.error(std::string("Momentum requires attribute '") + a + "'");
  }
  const double alpha = info.attr_float("alpha", 0.f);
  const double beta = info.attr_float("beta", 0.f);
  const double norm = info.attr_float("norm_coefficient", 0.f);
  const std::string mode = info.attr_string("mode");
  if (mode != "standard" && mode != "nesterov") return info.error("mode must be 'standard' or 'nesterov', got '" + mode + "'");
  const bool nesterov = mode == "nesterov";
  const double ba = t > 0 ? beta : 1.0;
  return for_each_group(ctx, n, 3, 2, [&](const auto& in, auto& out, int64_t e) {
    const double x = in[0][e], g = in[1][e] + norm * x;
    const double v = alpha * in[2][e] + ba * g;
    out[0][e] = nesterov ? x - r * (g + alpha * v) : x - r * v;
    out[1][e] = v;
  });
}

// ---------------------------------------------------------------------------------------------
// Gradient

// A dense double array.
struct Arr {
  Dims shape;
  std::vector<double> v;
};

Arr filled(const Dims& shape, double value) {
  return Arr{shape, std::vector<double>(static_cast<size_t>(shape_numel(shape)), value)};
}

// Calls f(out_index, offset_a, offset_b) for each element of `out`, with a/b broadcast to it
// (strides from broadcast_strides). Offsets advance incrementally (an odometer), no per-element division.
template <typename F>
void for_each_broadcast(const Dims& out, const Dims& sa, const Dims& sb, F&& f) {
  const int64_t n = shape_numel(out);
  auto cur = strided_cursor(out, out.size(), sa, sb);
  for (int64_t i = 0; i < n; ++i, cur.next()) f(i, cur.offset(0), cur.offset(1));
}

// Elementwise binary op with numpy broadcasting.
template <typename F>
Result<Arr> binary(const Arr& a, const Arr& b, F&& f) {
  Arr o;
  if (!broadcast_shapes(a.shape, b.shape, &o.shape)) {
    return invalid_argument("shapes " + shape_to_string(a.shape) + " and " + shape_to_string(b.shape) + " do not broadcast");
  }
  o.v.resize(static_cast<size_t>(shape_numel(o.shape)));
  if (a.shape == b.shape) {
    for (size_t i = 0; i < o.v.size(); ++i) o.v[i] = f(a.v[i], b.v[i]);
    return o;
  }
  for_each_broadcast(o.shape, broadcast_strides(a.shape, o.shape), broadcast_strides(b.shape, o.shape),
                     [&](int64_t i, int64_t ia, int64_t ib) { o.v[static_cast<size_t>(i)] = f(a.v[static_cast<size_t>(ia)], b.v[static_cast<size_t>(ib)]); });
  return o;
}

// Sums g (shaped like a broadcast result) down to `target`, the shape of an operand.
Arr unbroadcast(const Arr& g, const Dims& target) {
  if (g.shape == target) return g;
  Arr o = filled(target, 0.0);
  const Dims st = broadcast_strides(target, g.shape);
  for_each_broadcast(g.shape, st, st, [&](int64_t i, int64_t ia, int64_t) { o.v[static_cast<size_t>(ia)] += g.v[static_cast<size_t>(i)]; });
  return o;
}

// Batched matrix product of a [..., M, K] and b [..., K, N] (rank >= 2), batch dims broadcast.
// ta/tb: use the transpose of the last two dims of a/b.
Result<Arr> matmul_nd(const Arr& a, const Arr& b, bool ta, bool tb) {
  const size_t ra = a.shape.size(), rb = b.shape.size();
  if (ra < 2 || rb < 2) return invalid_argument("matmul_nd needs rank >= 2");
  const int64_t m = ta ? a.shape[ra - 1] : a.shape[ra - 2];
  const int64_t k = ta ? a.shape[ra - 2] : a.shape[ra - 1];
  const int64_t kb = tb ? b.shape[rb - 1] : b.shape[rb - 2];
  const int64_t n = tb ? b.shape[rb - 2] : b.shape[rb - 1];
  if (k != kb) {
    return invalid_argument("MatMul inner dimensions differ: " + shape_to_string(a.shape) + " x " + shape_to_string(b.shape));
  }
  const Dims ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  Dims batch;
  if (!broadcast_shapes(ba, bb, &batch)) {
    return invalid_argument("MatMul batch dimensions do not broadcast: " + shape_to_string(a.shape) + " x " + shape_to_string(b.shape));
  }
  Arr o;
  o.shape = batch;
  o.shape.push_back(m);
  o.shape.push_back(n);
  o.v.assign(static_cast<size_t>(shape_numel(o.shape)), 0.0);
  const int64_t sa_r = ta ? 1 : k, sa_c = ta ? m : 1;  // a element (i, p) at i*sa_r + p*sa_c
  const int64_t sb_r = tb ? 1 : n, sb_c = tb ? k : 1;  // b element (p, j) at p*sb_r + j*sb_c
  Dims bsa = broadcast_strides(ba, batch), bsb = broadcast_strides(bb, batch);
  for_each_broadcast(batch, bsa, bsb, [&](int64_t bi, int64_t ia, int64_t ib) {
    const double* pa = a.v.data() + ia * m * k;
    const double* pb = b.v.data() + ib * k * n;
    double* po = o.v.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) {
        const double av = pa[i * sa_r + p * sa_c];
        for (int64_t j = 0; j < n; ++j) po[i * n + j] += av * pb[p * sb_r + j * sb_c];
      }
    }
  });
  return o;
}

// numpy matmul shapes: 1-D a is [1, K] (row), 1-D b is [K, 1] (column); the added dims are dropped.
Arr promote_a(const Arr& a) { return a.shape.size() == 1 ? Arr{Dims{1, a.shape[0]}, a.v} : a; }
Arr promote_b(const Arr& b) { return b.shape.size() == 1 ? Arr{Dims{b.shape[0], 1}, b.v} : b; }

Result<Arr> matmul(const Arr& a, const Arr& b) {
  if (a.shape.empty() || b.shape.empty()) return invalid_argument("MatMul operands must have rank >= 1");
  NXRT_ASSIGN_OR_RETURN(Arr o, matmul_nd(promote_a(a), promote_b(b), false, false));
  if (a.shape.size() == 1) o.shape.erase(o.shape.end() - 2);
  if (b.shape.size() == 1) o.shape.pop_back();
  return o;
}

// The value of `name`, or an error (cannot happen for a topologically ordered forward pass).
Result<const Arr*> lookup(const std::map<std::string, Arr>& val, const std::string& name) {
  auto it = val.find(name);
  if (it == val.end()) return invalid_argument("value '" + name + "' is not available");
  return &it->second;
}

// The ai.onnx ops whose schema marks them differentiable: forward() and backward() below implement each.
bool differentiable(const ir::Node& n) {
  if (!n.domain.empty()) return false;
  const shape::OpSchema* s = shape::find_schema(n.domain, n.op_type, shape::kNewestOpset);
  return s && s->differentiable;
}

// "Add, Sub, ..., Constant" for the error that names what the builder supports.
std::string differentiable_op_list() {
  std::string list;
  for (const shape::OpSchema& s : shape::all_schemas()) {
    if (s.domain.empty() && s.differentiable) list += s.op_type + ", ";
  }
  return list + "Constant";
}

size_t expected_inputs(const std::string& op) {
  return (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "MatMul") ? 2 : 1;
}

class GradientKernel : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    info_ = &info;
    const ir::Graph* g = info.graph();
    if (!g) return info.error("Gradient needs its enclosing graph, which this kernel was created without", StatusCode::kNotImplemented);
    xs_ = info.attr_strings("xs");
    zs_ = info.attr_strings("zs");
    y_ = info.attr_string("y");
    if (xs_.empty()) return info.error("Gradient requires a non-empty attribute 'xs'");
    if (y_.empty()) return info.error("Gradient requires attribute 'y'");
    if (info.num_inputs() != xs_.size() + zs_.size()) {
      return info.error("Gradient takes one input per name in xs and zs (" + std::to_string(xs_.size() + zs_.size()) +
                        "), got " + std::to_string(info.num_inputs()));
    }
    if (info.num_outputs() != xs_.size()) {
      return info.error("Gradient has one output per name in xs (" + std::to_string(xs_.size()) + "), got " +
                        std::to_string(info.num_outputs()));
    }
    for (size_t i = 0; i < xs_.size() + zs_.size(); ++i) {
      const std::string& name = i < xs_.size() ? xs_[i] : zs_[i - xs_.size()];
      if (!leaf_.emplace(name, i).second) return info.error("Gradient: '" + name + "' appears twice in xs/zs");
    }
    std::map<std::string, const ir::Node*> producer;
    for (const ir::Node& n : g->nodes) {
      if (&n == &info.node()) continue;
      for (const std::string& o : n.outputs) {
        if (!o.empty()) producer[o] = &n;
      }
    }
    // Depth-first from y; nodes are appended in post-order, which is a topological order.
    std::set<const ir::Node*> done, active;
    std::vector<std::pair<const ir::Node*, size_t>> stack;
    auto visit_value = [&](const std::string& name) -> Result<const ir::Node*> {
      if (leaf_.count(name) || constants_.count(name)) return static_cast<const ir::Node*>(nullptr);
      if (g->find_input(name)) {
        // Includes initializers that are also graph inputs: the fed value is not visible here.
        return info.error("Gradient: y depends on graph input '" + name + "', which is not listed in xs or zs");
      }
      auto init = g->initializers.find(name);
      if (init != g->initializers.end()) {
        NXRT_ASSIGN_OR_RETURN(auto v, read_double_values(init->second));
        constants_[name] = Arr{init->second.shape(), std::move(v)};
        return static_cast<const ir::Node*>(nullptr);
      }
      auto p = producer.find(name);
      if (p == producer.end()) {
        return info.error("Gradient: y depends on '" + name + "', which is neither in xs/zs, an initializer, nor computed in the graph");
      }
      return p->second;
    };
    NXRT_ASSIGN_OR_RETURN(const ir::Node* root, visit_value(y_));
    if (root) {
      stack.push_back({root, 0});
      active.insert(root);
    }
    while (!stack.empty()) {
      auto& [node, next] = stack.back();
      if (next == 0) NXRT_RETURN_IF_ERROR(check_node(*node));
      if (next < node->inputs.size()) {
        const std::string& in = node->inputs[next++];
        if (in.empty()) continue;
        NXRT_ASSIGN_OR_RETURN(const ir::Node* p, visit_value(in));
        if (!p || done.count(p)) continue;
        if (active.count(p)) return info.error("Gradient: the graph has a cycle through " + p->label());
        active.insert(p);
        stack.push_back({p, 0});
        continue;
      }
      const ir::Node* fin = node;
      stack.pop_back();
      active.erase(fin);
      done.insert(fin);
      order_.push_back(fin);
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    std::map<std::string, Arr> val = constants_;
    for (size_t i = 0; i < xs_.size() + zs_.size(); ++i) {
      if (!ctx.has_input(i)) return ctx.error("Gradient inputs may not be omitted", StatusCode::kInvalidArgument);
      const Tensor& t = ctx.input(i);
      auto v = read_double_values(t);
      if (!v.ok()) return ctx.error("Gradient input " + std::to_string(i) + " must be a float or integer tensor, got " + t.describe(), StatusCode::kInvalidArgument);
      val[i < xs_.size() ? xs_[i] : zs_[i - xs_.size()]] = Arr{t.shape(), std::move(*v)};
    }
    // Forward.
    for (const ir::Node* n : order_) {
      Status s = forward(*n, &val);
      if (!s.ok()) return ctx.error("forward pass at " + n->label() + ": " + s.message(), StatusCode::kInvalidArgument);
    }
    auto yit = val.find(y_);
    if (yit == val.end()) return ctx.error("Gradient: y '" + y_ + "' was not computed");
    // Backward.
    std::map<std::string, Arr> grad;
    grad[y_] = filled(yit->second.shape, 1.0);
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      Status s = backward(**it, val, &grad);
      if (!s.ok()) return ctx.error("backward pass at " + (*it)->label() + ": " + s.message(), StatusCode::kInvalidArgument);
    }
    for (size_t i = 0; i < xs_.size(); ++i) {
      if (!ctx.output_requested(i)) continue;
      const Tensor& x = ctx.input(i);
      auto git = grad.find(xs_[i]);
      const Arr g = git != grad.end() ? git->second : filled(x.shape(), 0.0);
      NXRT_ASSIGN_OR_RETURN(Tensor * o, ctx.allocate_output(i, x.dtype(), x.shape()));
      NXRT_RETURN_IF_ERROR(dispatch_float(x.dtype(), [&](auto tag) -> Status {
        using T = decltype(tag);
        T* d = o->data<T>();
        for (size_t e = 0; e < g.v.size(); ++e) d[e] = from_compute<T>(g.v[e]);
        return Status::Ok();
      }, [&] { return ctx.error("Gradient: x '" + xs_[i] + "' must be a float tensor, got " + x.describe(), StatusCode::kInvalidArgument); }));
    }
    return Status::Ok();
  }

 private:
  Status check_node(const ir::Node& n) const {
    if (n.op_type == "Constant" && n.domain.empty()) {
      if (!n.find_attribute("value")) return info_->error("Gradient: " + n.label() + " must use the 'value' attribute", StatusCode::kNotImplemented);
      return Status::Ok();
    }
    if (!differentiable(n)) {
      return info_->error("Gradient: differentiating " + (n.domain.empty() ? std::string() : n.domain + "::") + n.op_type + " (" + n.label() +
                              ") is not implemented (supported: " + differentiable_op_list() + ")",
                          StatusCode::kNotImplemented);
    }
    if (n.inputs.size() != expected_inputs(n.op_type) || n.outputs.size() != 1) {
      return info_->error("Gradient: " + n.label() + " has an unexpected number of inputs or outputs");
    }
    for (const std::string& in : n.inputs) {
      if (in.empty()) return info_->error("Gradient: " + n.label() + " has an omitted input");
    }
    return Status::Ok();
  }

  static Status forward(const ir::Node& n, std::map<std::string, Arr>* val) {
    const std::string& op = n.op_type;
    if (op == "Constant") {
      const ir::Attribute* a = n.find_attribute("value");
      if (!a || a->tensors.empty()) return invalid_argument("Constant without a tensor value");
      const Tensor& t = a->tensors[0];
      NXRT_ASSIGN_OR_RETURN(auto v, read_double_values(t));
      (*val)[n.outputs[0]] = Arr{t.shape(), std::move(v)};
      return Status::Ok();
    }
    NXRT_ASSIGN_OR_RETURN(const Arr* pa, lookup(*val, n.inputs[0]));
    const Arr& a = *pa;
    Arr o;
    if (expected_inputs(op) == 2) {
      NXRT_ASSIGN_OR_RETURN(const Arr* pb, lookup(*val, n.inputs[1]));
      const Arr& b = *pb;
      if (op == "Add") { NXRT_ASSIGN_OR_RETURN(o, binary(a, b, [](double p, double q) { return p + q; })); }
      else if (op == "Sub") { NXRT_ASSIGN_OR_RETURN(o, binary(a, b, [](double p, double q) { return p - q; })); }
      else if (op == "Mul") { NXRT_ASSIGN_OR_RETURN(o, binary(a, b, [](double p, double q) { return p * q; })); }
      else if (op == "Div") { NXRT_ASSIGN_OR_RETURN(o, binary(a, b, [](double p, double q) { return p / q; })); }
      else { NXRT_ASSIGN_OR_RETURN(o, matmul(a, b)); }
    } else {
      o = a;
      double (*f)(double) = nullptr;
      if (op == "Neg") f = [](double x) { return -x; };
      else if (op == "Relu") f = [](double x) { return x > 0 ? x : 0.0; };
      else if (op == "Sigmoid") f = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
      else if (op == "Tanh") f = [](double x) { return std::tanh(x); };
      else if (op == "Exp") f = [](double x) { return std::exp(x); };
      else if (op == "Log") f = [](double x) { return std::log(x); };
      else if (op == "Sqrt") f = [](double x) { return std::sqrt(x); };
      if (f) {
        for (double& x : o.v) x = f(x);
      }
    }
    (*val)[n.outputs[0]] = std::move(o);
    return Status::Ok();
  }

  static void accumulate(std::map<std::string, Arr>* grad, const std::string& name, Arr g) {
    auto it = grad->find(name);
    if (it == grad->end()) {
      grad->emplace(name, std::move(g));
      return;
    }
    for (size_t i = 0; i < g.v.size(); ++i) it->second.v[i] += g.v[i];
  }

  static Status backward(const ir::Node& n, const std::map<std::string, Arr>& val, std::map<std::string, Arr>* grad) {
    const std::string& op = n.op_type;
    if (op == "Constant") return Status::Ok();
    auto git = grad->find(n.outputs[0]);
    if (git == grad->end()) return Status::Ok();  // y does not depend on this output
    const Arr gy = git->second;
    NXRT_ASSIGN_OR_RETURN(const Arr* pa_in, lookup(val, n.inputs[0]));
    NXRT_ASSIGN_OR_RETURN(const Arr* py, lookup(val, n.outputs[0]));
    const Arr& a = *pa_in;
    const Arr& y = *py;
    if (expected_inputs(op) == 2) {
      NXRT_ASSIGN_OR_RETURN(const Arr* pb_in, lookup(val, n.inputs[1]));
      const Arr& b = *pb_in;
      Arr ga, gb;
      if (op == "MatMul") {
        // Promoted: A [.., M, K], B [.., K, N], G [.., M, N]; dA = G B^T, dB = A^T G, summed to each shape.
        const Arr pa = promote_a(a), pb = promote_b(b);
        Arr pg = gy;
        pg.shape = y.shape;
        if (a.shape.size() == 1) pg.shape.insert(pg.shape.end() - (b.shape.size() == 1 ? 0 : 1), 1);
        if (b.shape.size() == 1) pg.shape.push_back(1);
        NXRT_ASSIGN_OR_RETURN(ga, matmul_nd(pg, pb, false, true));
        NXRT_ASSIGN_OR_RETURN(gb, matmul_nd(pa, pg, true, false));
        ga = unbroadcast(ga, pa.shape);
        gb = unbroadcast(gb, pb.shape);
        ga.shape = a.shape;
        gb.shape = b.shape;
      } else {
        if (op == "Add") {
          ga = gy;
          gb = gy;
        } else if (op == "Sub") {
          ga = gy;
          NXRT_ASSIGN_OR_RETURN(gb, binary(gy, gy, [](double p, double) { return -p; }));
        } else if (op == "Mul") {
          NXRT_ASSIGN_OR_RETURN(ga, binary(gy, b, [](double g, double q) { return g * q; }));
          NXRT_ASSIGN_OR_RETURN(gb, binary(gy, a, [](double g, double p) { return g * p; }));
        } else {  // Div: y = a / b
          NXRT_ASSIGN_OR_RETURN(ga, binary(gy, b, [](double g, double q) { return g / q; }));
          NXRT_ASSIGN_OR_RETURN(Arr t, binary(gy, y, [](double g, double r) { return -g * r; }));
          NXRT_ASSIGN_OR_RETURN(gb, binary(t, b, [](double g, double q) { return g / q; }));
        }
        ga = unbroadcast(ga, a.shape);
        gb = unbroadcast(gb, b.shape);
      }
      accumulate(grad, n.inputs[0], std::move(ga));
      accumulate(grad, n.inputs[1], std::move(gb));
      return Status::Ok();
    }
    Arr ga = gy;
    for (size_t i = 0; i < ga.v.size(); ++i) {
      const double x = a.v[i], r = y.v[i], g = gy.v[i];
      double d = 1.0;
      if (op == "Neg") d = -1.0;
      else if (op == "Relu") d = x > 0 ? 1.0 : 0.0;
      else if (op == "Sigmoid") d = r * (1 - r);
      else if (op == "Tanh") d = 1 - r * r;
      else if (op == "Exp") d = r;
      else if (op == "Log") d = 1 / x;
      else if (op == "Sqrt") d = 0.5 / r;
      ga.v[i] = g * d;
    }
    accumulate(grad, n.inputs[0], std::move(ga));
    return Status::Ok();
  }

  const ep::KernelInfo* info_ = nullptr;
  std::vector<std::string> xs_, zs_;
  std::string y_;
  std::map<std::string, size_t> leaf_;
  std::map<std::string, Arr> constants_;
  std::vector<const ir::Node*> order_;  // forward nodes, topological
};

}  // namespace

void register_training_ops(ep::KernelRegistry& r) {
  r.add_class<GradientKernel>(kTrainingDomain, "Gradient", 1);
  r.add_fn(kTrainingDomain, "Adagrad", 1, INT64_MAX, &adagrad);
  r.add_fn(kTrainingDomain, "Adam", 1, INT64_MAX, &adam);
  r.add_fn(kTrainingDomain, "Momentum", 1, INT64_MAX, &momentum);
}

}  // namespace nxrt::ops
