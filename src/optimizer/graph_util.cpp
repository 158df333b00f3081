#include "optimizer/graph_util.h"

#include <cmath>

#include "ep/standalone_context.h"
#include "ir/tensor_util.h"
#include "shape/op_schema.h"

namespace nxrt::optimizer {

int64_t PassContext::opset(const std::string& domain) const { return model->opset_for(domain); }

std::string PassContext::fresh_name(const ir::Graph& g, const std::string& prefix) {
  for (;;) {
    std::string n = "_nxrt_" + prefix + "_" + std::to_string(next_id++);
    bool used = g.initializers.count(n) != 0;
    for (const auto& node : g.nodes) {
      for (const auto& o : node.outputs) used |= o == n;
    }
    if (!used) return n;
  }
}

namespace {
void collect_reads(const ir::Graph& g, std::unordered_set<std::string>* defined, std::vector<std::string>* out,
                   std::unordered_set<std::string>* seen) {
  std::unordered_set<std::string> local = *defined;
  for (const auto& in : g.inputs) local.insert(in.name);
  for (const auto& [n, t] : g.initializers) local.insert(n);
  for (const auto& node : g.nodes) {
    for (const auto& o : node.outputs) local.insert(o);
  }
  auto read = [&](const std::string& n) {
    if (n.empty() || local.count(n)) return;
    if (seen->insert(n).second) out->push_back(n);
  };
  for (const auto& node : g.nodes) {
    for (const auto& i : node.inputs) read(i);
    for (const auto& a : node.attributes) {
      std::vector<std::string> sub;
      std::unordered_set<std::string> sub_seen;
      auto visit = [&](const ir::Graph& sg) {
        std::unordered_set<std::string> none;
        collect_reads(sg, &none, &sub, &sub_seen);
      };
      if (a.g) visit(*a.g);
      for (const auto& sg : a.graphs) {
        if (sg) visit(*sg);
      }
      for (const auto& n : sub) read(n);
    }
  }
  for (const auto& o : g.outputs) read(o.name);
}
}  // namespace

std::vector<std::string> outer_reads(const ir::Graph& g) {
  std::unordered_set<std::string> defined, seen;
  std::vector<std::string> out;
  collect_reads(g, &defined, &out, &seen);
  return out;
}

GraphInfo::GraphInfo(ir::Graph& graph, bool main_graph, int64_t ir_version)
    : g(graph), main_(main_graph), ir_version_(ir_version) {
  for (const auto& in : g.inputs) input_names.insert(in.name);
  for (const auto& o : g.outputs) protected_names.insert(o.name);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    for (const auto& o : n.outputs) {
      if (!o.empty()) producer[o] = static_cast<int>(i);
    }
    for (const auto& in : n.inputs) {
      if (!in.empty()) consumers[in].push_back(static_cast<int>(i));
    }
    for (const auto& a : n.attributes) {
      auto visit = [&](const ir::Graph& sg) {
        for (const auto& name : outer_reads(sg)) {
          protected_names.insert(name);
          captured.insert(name);
        }
      };
      if (a.g) visit(*a.g);
      for (const auto& sg : a.graphs) {
        if (sg) visit(*sg);
      }
    }
  }
}

const Tensor* GraphInfo::constant(const std::string& name) const {
  if (name.empty()) return nullptr;
  auto it = g.initializers.find(name);
  if (it == g.initializers.end()) return nullptr;
  // An initializer that is also a graph input is a default the caller may override (IR >= 4); in a
  // subgraph, inputs shadow nothing of the kind but stay non-constant too.
  if (input_names.count(name) && (!main_ || ir_version_ >= 4)) return nullptr;
  return &it->second;
}

bool GraphInfo::static_shape(const std::string& name, Dims* out) const {
  auto from = [&](const ir::ValueInfo& vi) {
    if (vi.name != name || vi.type.kind != ir::TypeInfo::Kind::kTensor || !vi.type.has_shape) return false;
    Dims d;
    for (const auto& dim : vi.type.dims) {
      if (!dim.is_fixed()) return false;
      d.push_back(dim.value);
    }
    *out = d;
    return true;
  };
  if (const Tensor* t = constant(name)) {
    *out = t->shape();
    return true;
  }
  // Main-graph inputs are checked against their declared shapes when fed; subgraph inputs (loop-carried
  // values) are not, so only the main graph's count.
  if (main_) {
    for (const auto& v : g.inputs) {
      if (from(v)) return true;
    }
  } else if (input_names.count(name)) {
    return false;
  }
  for (const auto& v : g.value_info) {
    if (from(v)) return true;
  }
  for (const auto& v : g.outputs) {
    if (from(v)) return true;
  }
  return false;
}

std::unordered_map<std::string, int64_t> infer_ranks(const GraphInfo& gi) {
  std::unordered_map<std::string, int64_t> rank;
  const ir::Graph& g = gi.g;
  if (gi.is_main()) {  // subgraph inputs' declared ranks are not checked
    for (const auto& in : g.inputs) {
      if (in.type.kind == ir::TypeInfo::Kind::kTensor && in.type.has_shape) {
        rank[in.name] = static_cast<int64_t>(in.type.dims.size());
      }
    }
  }
  for (const auto& vi : g.value_info) {
    if (vi.type.kind == ir::TypeInfo::Kind::kTensor && vi.type.has_shape) {
      rank[vi.name] = static_cast<int64_t>(vi.type.dims.size());
    }
  }
  auto rank_of = [&](const std::string& n) -> int64_t {
    if (n.empty()) return -1;
    if (const Tensor* t = gi.constant(n)) return t->rank();
    auto it = rank.find(n);
    return it == rank.end() ? -1 : it->second;
  };
  for (const auto& n : g.nodes) {
    if (n.outputs.empty() || n.outputs[0].empty() || n.inputs.empty() || rank.count(n.outputs[0])) continue;
    // No op's rank rule changes between opset versions: the newest record's serves every version.
    const shape::OpSchema* schema = shape::find_schema(n.domain, n.op_type, shape::kNewestOpset);
    int64_t r = -1;
    switch (schema ? schema->rank : shape::RankRule::kUnknown) {
      case shape::RankRule::kSameAsInput0:
        r = rank_of(n.inputs[0]);
        break;
      case shape::RankRule::kBroadcast:
        for (const auto& in : n.inputs) {
          const int64_t ri = rank_of(in);
          if (ri < 0) {
            r = -1;
            break;
          }
          r = std::max(r, ri);
        }
        break;
      case shape::RankRule::kSameAsInputs:
        for (const auto& in : n.inputs) r = std::max(r, rank_of(in));
        break;
      case shape::RankRule::kUnknown:
        break;
    }
    if (r >= 0) rank[n.outputs[0]] = r;
  }
  return rank;
}

void remove_nodes(ir::Graph& g, const std::vector<bool>& dead) {
  std::vector<ir::Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (i >= dead.size() || !dead[i]) kept.push_back(std::move(g.nodes[i]));
  }
  g.nodes = std::move(kept);
}

bool const_values(const Tensor& t, std::vector<double>* out) {
  auto r = ir::read_double_values(t);
  if (!r.ok()) return false;
  *out = std::move(r).value();
  return true;
}

bool const_scalar(const Tensor* t, double* v) {
  if (!t || t->numel() != 1) return false;
  std::vector<double> vals;
  if (!const_values(*t, &vals) || vals.size() != 1) return false;
  *v = vals[0];
  return true;
}

bool const_is_scalar(const Tensor* t, double v, double tol) {
  double x;
  return const_scalar(t, &x) && std::fabs(x - v) <= tol;
}

int64_t attr_i(const ir::Node& n, const std::string& name, int64_t dflt) {
  const ir::Attribute* a = n.find_attribute(name);
  return a && a->type == ir::Attribute::Type::kInt ? a->i : dflt;
}
float attr_f(const ir::Node& n, const std::string& name, float dflt) {
  const ir::Attribute* a = n.find_attribute(name);
  return a && a->type == ir::Attribute::Type::kFloat ? a->f : dflt;
}
std::string attr_s(const ir::Node& n, const std::string& name, const std::string& dflt) {
  const ir::Attribute* a = n.find_attribute(name);
  return a && a->type == ir::Attribute::Type::kString ? a->s : dflt;
}
std::vector<int64_t> attr_ints(const ir::Node& n, const std::string& name) {
  const ir::Attribute* a = n.find_attribute(name);
  return a && a->type == ir::Attribute::Type::kInts ? a->ints : std::vector<int64_t>{};
}
bool has_graph_attr(const ir::Node& n) {
  for (const auto& a : n.attributes) {
    if (a.g || !a.graphs.empty() || a.type == ir::Attribute::Type::kGraph || a.type == ir::Attribute::Type::kGraphs)
      return true;
  }
  return false;
}

bool evaluate_node(PassContext& pc, const ir::Graph& g, const ir::Node& node, const std::vector<const Tensor*>& inputs,
                   std::vector<Tensor>* outs) {
  int64_t opset = pc.opset(node.domain);
  if (opset == 0 || !pc.registry) return false;
  const ep::KernelDef* def = pc.registry->find(node.domain, node.op_type, opset);
  if (!def) return false;
  ep::KernelInfo info(node, opset);
  info.const_inputs_ = inputs;
  info.graph_ = &g;
  info.registry_ = pc.registry;
  auto kernel = def->factory(info);
  if (!kernel.ok()) return false;
  std::vector<Value> vals;
  for (const Tensor* t : inputs) vals.push_back(t ? Value(*t) : Value());
  ep::StandaloneContext ctx(info, std::move(vals), *pc.pool);
  if (!(*kernel)->compute(ctx).ok()) return false;
  outs->clear();
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i].empty()) {
      outs->push_back(Tensor());
      continue;
    }
    Value& v = ctx.outputs()[i];
    if (!v.is_tensor() || !v.tensor().defined()) return false;
    outs->push_back(v.tensor().contiguous());
  }
  return true;
}

// ---- shared by the rewrite passes (declared in graph_util.h) ----

bool is_onnx(const ir::Node* n, const char* op) {
  return n && ir::canonical_domain(n->domain).empty() && n->op_type == op;
}

bool single_output(const ir::Node& n) { return n.outputs.size() == 1 && !n.outputs[0].empty(); }

void import_domain(PassContext& pc, const char* domain, int64_t version) {
  if (pc.model->opset_for(domain) == 0) pc.model->opset_imports.push_back({domain, version});
}

namespace {
ir::Attribute named_attr(const std::string& name, ir::Attribute::Type type) {
  ir::Attribute a;
  a.name = name;
  a.type = type;
  return a;
}
}  // namespace

ir::Attribute make_attr_i(const std::string& name, int64_t v) {
  ir::Attribute a = named_attr(name, ir::Attribute::Type::kInt);
  a.i = v;
  return a;
}
ir::Attribute make_attr_f(const std::string& name, float v) {
  ir::Attribute a = named_attr(name, ir::Attribute::Type::kFloat);
  a.f = v;
  return a;
}
ir::Attribute make_attr_s(const std::string& name, const std::string& v) {
  ir::Attribute a = named_attr(name, ir::Attribute::Type::kString);
  a.s = v;
  return a;
}
ir::Attribute make_attr_fs(const std::string& name, std::vector<float> v) {
  ir::Attribute a = named_attr(name, ir::Attribute::Type::kFloats);
  a.floats = std::move(v);
  return a;
}

ir::Attribute make_attr_is(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a = named_attr(name, ir::Attribute::Type::kInts);
  a.ints = std::move(v);
  return a;
}

bool make_tensor(DataType dtype, const Dims& shape, const std::vector<double>& v, Tensor* out) {
  Tensor t(dtype, shape);
  if (static_cast<size_t>(t.numel()) != v.size()) return false;
  if (dtype == DataType::kFloat) {
    for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = static_cast<float>(v[i]);
  } else if (dtype == DataType::kDouble) {
    for (size_t i = 0; i < v.size(); ++i) t.data<double>()[i] = v[i];
  } else {
    return false;
  }
  *out = std::move(t);
  return true;
}

}  // namespace nxrt::optimizer
