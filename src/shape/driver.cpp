// The shape inference driver: walks the main graph and, through the If/Loop/Scan rules, every subgraph;
// runs each node's shape function (found through its op schema); merges the inferred facts with the
// declared types; prints the results. See shape_inference.h.
#include <cstdlib>
#include <unordered_map>

#include "shape/node_context.h"
#include "shape/shape_inference.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

namespace {

class Driver final : public SubgraphInferer {
 public:
  Driver(ir::Model& m, std::shared_ptr<SymbolTable> symbols) : model(m), syms(std::move(symbols)) {}

  Result<std::vector<ValueFacts>> infer_subgraph(ir::Graph& g, const Scope* parent,
                                                 const std::vector<ValueFacts>* feed) override;
  // The inferred facts of a value refined by its declared type; a contradiction is an error naming `what`.
  Result<ValueFacts> merge_declared(const ValueFacts& inferred, const ir::TypeInfo& decl, const std::string& what);

  ir::Model& model;
  std::shared_ptr<SymbolTable> syms;
  std::map<std::string, int> missing;  // ops without a shape function -> node count
};

Result<ValueFacts> Driver::merge_declared(const ValueFacts& inf, const ir::TypeInfo& decl, const std::string& what) {
  SymbolTable& S = *syms;
  if (decl.kind == Kind::kUnknown) return inf;
  if (inf.kind == Kind::kUnknown) return from_type(S, decl);
  if (inf.kind != decl.kind) {
    return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
  }
  ValueFacts r = inf;
  if (decl.kind == Kind::kSequence || decl.kind == Kind::kOptional) {
    if (decl.inner) {
      if (!inf.inner) {
        r.inner = std::make_shared<ValueFacts>(from_type(S, *decl.inner));
      } else {
        NXRT_ASSIGN_OR_RETURN(ValueFacts in, merge_declared(*inf.inner, *decl.inner, what));
        r.inner = std::make_shared<ValueFacts>(std::move(in));
      }
    }
    return r;
  }
  if (decl.kind != Kind::kTensor && decl.kind != Kind::kSparseTensor) return r;
  if (decl.elem_type != DataType::kUndefined) {
    if (inf.dtype != DataType::kUndefined && inf.dtype != decl.elem_type) {
      return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
    }
    r.dtype = decl.elem_type;
  }
  if (!decl.has_shape) return r;
  if (!inf.has_shape) {
    ValueFacts d = from_type(S, decl);
    r.has_shape = true;
    r.dims = d.dims;
    return r;
  }
  if (decl.dims.size() != inf.dims.size()) {
    return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
  }
  for (size_t i = 0; i < decl.dims.size(); ++i) {
    const ir::Dim& d = decl.dims[i];
    SymDim& x = r.dims[i];
    if (d.is_fixed()) {
      if (x.is_const() && x.value != d.value) {
        return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
      }
      x = SymDim::c(d.value);
    } else if (!d.symbol.empty() && !x.is_const()) {
      int32_t named = S.named(d.symbol);
      S.unite(named, x.sym);
      x = SymDim::s(named);
    }
  }
  return r;
}

// Model-declared dim names anywhere in the model, so minted names never take one.
void prescan_names(SymbolTable& S, const ir::Graph& g) {
  auto scan_type = [&](const ir::TypeInfo& t, auto&& self) -> void {
    for (const auto& d : t.dims) {
      if (!d.symbol.empty()) S.reserve_name(d.symbol);
    }
    if (t.inner) self(*t.inner, self);
  };
  for (const auto* list : {&g.inputs, &g.outputs, &g.value_info}) {
    for (const auto& v : *list) scan_type(v.type, scan_type);
  }
  for (const auto& n : g.nodes) {
    for (const auto& a : n.attributes) {
      if (a.g) prescan_names(S, *a.g);
      for (const auto& sg : a.graphs) {
        if (sg) prescan_names(S, *sg);
      }
    }
  }
}

Result<std::vector<ValueFacts>> Driver::infer_subgraph(ir::Graph& g, const Scope* parent,
                                                      const std::vector<ValueFacts>* feed) {
  SymbolTable& S = *syms;
  auto facts = std::make_shared<ir::ShapeFacts>();
  facts->symbols = syms;
  Scope scope{facts.get(), parent};
  std::unordered_map<std::string, const ir::TypeInfo*> declared;
  for (const auto& v : g.value_info) declared[v.name] = &v.type;
  for (const auto& v : g.outputs) declared[v.name] = &v.type;
  for (const auto& [name, t] : g.initializers) facts->values[name] = from_tensor(t);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::ValueInfo& in = g.inputs[i];
    ValueFacts v;
    if (feed && i < feed->size()) {
      NXRT_ASSIGN_OR_RETURN(v, merge_declared((*feed)[i], in.type, "subgraph input '" + in.name + "'"));
    } else {
      auto it = facts->values.find(in.name);
      if (it != facts->values.end()) {
        // An input with an initializer default: facts come from the initializer (including the
        // values of small int tensors, e.g. shapes fed to ConstantOfShape), merged with the declared
        // type. A feed that overrides it with a different shape is outside these facts.
        NXRT_ASSIGN_OR_RETURN(v, merge_declared(it->second, in.type, "graph input '" + in.name + "'"));
      } else {
        v = from_type(S, in.type);
      }
    }
    facts->values[in.name] = std::move(v);
    facts->order.push_back(in.name);
  }
  static const ValueFacts kUnknown;
  for (size_t idx = 0; idx < g.nodes.size(); ++idx) {
    const ir::Node& node = g.nodes[idx];
    NodeContext c{&node, idx, model.opset_for(node.domain), &scope, S, this, {}, {}};
    c.in.reserve(node.inputs.size());
    for (const auto& name : node.inputs) {
      if (name.empty()) {
        c.in.push_back(nullptr);
      } else {
        const ValueFacts* v = scope.lookup(name);
        c.in.push_back(v ? v : &kUnknown);
      }
    }
    while (!c.in.empty() && !c.in.back()) c.in.pop_back();
    const OpSchema* schema = find_schema(node.domain, node.op_type, c.opset);
    Status st;
    if (schema && schema->shape_fn) {
      take_overflow_note();
      st = schema->shape_fn(c);
      // An overflow wins over the rule's own error, which may only follow from the saturated value.
      if (std::string note = take_overflow_note(); !note.empty()) {
        st = c.error("dim arithmetic overflows int64 (" + note + "): the model's dims or attributes are out of range");
      }
    } else {
      missing[node.domain.empty() ? node.op_type : node.domain + "::" + node.op_type]++;
      // Still infer subgraphs of unknown ops so their values get facts.
      for (const auto& a : node.attributes) {
        if (a.g) {
          auto r = infer_subgraph(*a.g, &scope, nullptr);
          if (!r.ok()) return r.status();
        }
      }
    }
    NXRT_RETURN_IF_ERROR(st);
    c.out.resize(node.outputs.size());
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      const std::string& name = node.outputs[j];
      if (name.empty()) continue;
      ValueFacts v = std::move(c.out[j]);
      auto dit = declared.find(name);
      if (dit != declared.end()) {
        auto merged = merge_declared(v, *dit->second, "value '" + name + "'");
        if (!merged.ok()) return c.error(merged.status().message());
        v = std::move(merged).value();
      }
      facts->values[name] = std::move(v);
      facts->order.push_back(name);
    }
  }
  std::vector<ValueFacts> outs;
  for (const auto& o : g.outputs) {
    const ValueFacts* v = scope.lookup(o.name);
    ValueFacts r = v ? *v : ValueFacts{};
    if (!v) {
      NXRT_ASSIGN_OR_RETURN(r, merge_declared(r, o.type, "graph output '" + o.name + "'"));
    }
    outs.push_back(std::move(r));
  }
  g.shape_facts = std::move(facts);
  return outs;
}

}  // namespace

Status infer_shapes(ir::Model& model) {
  if (const char* env = std::getenv("NXRT_NO_SHAPE_INFERENCE")) {
    if (*env && std::string(env) != "0") return Status::Ok();
  }
  Driver d(model, std::make_shared<SymbolTable>());
  prescan_names(*d.syms, model.graph);
  auto r = d.infer_subgraph(model.graph, nullptr, nullptr);
  if (!r.ok()) return r.status();
  model.graph.shape_facts->ops_without_shape_fn = std::move(d.missing);
  return Status::Ok();
}

namespace {
void describe_graph(const ir::Graph& g, const std::string& indent, std::string& out) {
  const ir::ShapeFacts* f = g.shape_facts.get();
  if (!f) {
    out += indent + "(no shape facts)\n";
    return;
  }
  const SymbolTable& S = *f->symbols;
  size_t pos = 0;
  std::unordered_map<std::string, const ir::Node*> producer;
  for (const auto& n : g.nodes) {
    for (const auto& o : n.outputs) producer[o] = &n;
  }
  const ir::Node* last_node = nullptr;
  for (const auto& name : f->order) {
    const ValueFacts* v = f->find(name);
    auto it = producer.find(name);
    const ir::Node* node = it == producer.end() ? nullptr : it->second;
    // Subgraphs of the previous producer are printed before its outputs' successors.
    if (node != last_node && last_node) {
      for (const auto& a : last_node->attributes) {
        if (a.g) {
          out += indent + "  " + a.name + " of " + last_node->op_type + " '" + last_node->name + "':\n";
          describe_graph(*a.g, indent + "    ", out);
        }
      }
    }
    last_node = node;
    out += indent + name + ": " + (v ? v->describe(S) : std::string("?")) + "\n";
    ++pos;
  }
  if (last_node) {
    for (const auto& a : last_node->attributes) {
      if (a.g) {
        out += indent + "  " + a.name + " of " + last_node->op_type + " '" + last_node->name + "':\n";
        describe_graph(*a.g, indent + "    ", out);
      }
    }
  }
}
}  // namespace

std::string describe_shapes(const ir::Graph& g) {
  std::string out;
  describe_graph(g, "", out);
  if (g.shape_facts && g.shape_facts->symbols) {
    std::string lin = g.shape_facts->symbols->describe_lineage();
    if (!lin.empty()) out += "lineage:\n" + lin;
  }
  return out;
}

std::string describe_ops_without_shape_fn(const ir::Graph& g) {
  std::string out;
  if (!g.shape_facts) return out;
  for (const auto& [op, n] : g.shape_facts->ops_without_shape_fn) out += op + " " + std::to_string(n) + "\n";
  return out;
}

}  // namespace nxrt::shape
