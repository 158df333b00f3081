#include "onnx/function_expand.h"

#include <algorithm>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>

#include "onnx/parser.h"

namespace nxrt::onnx {

namespace {

using Renames = std::unordered_map<std::string, std::string>;

std::shared_ptr<ir::Graph> deep_copy_graph(const ir::Graph& g);

ir::Attribute deep_copy_attr(const ir::Attribute& a) {
  ir::Attribute c = a;
  if (a.g) c.g = deep_copy_graph(*a.g);
  for (auto& sg : c.graphs) {
    if (sg) sg = deep_copy_graph(*sg);
  }
  return c;
}

std::shared_ptr<ir::Graph> deep_copy_graph(const ir::Graph& g) {
  auto c = std::make_shared<ir::Graph>(g);
  for (auto& n : c->nodes) {
    for (auto& a : n.attributes) a = deep_copy_attr(a);
  }
  return c;
}

// Nodes in `nodes` and in every subgraph they hold: what instantiating them copies.
size_t count_nodes(const std::vector<ir::Node>& nodes) {
  size_t n = nodes.size();
  for (const auto& node : nodes) {
    for (const auto& a : node.attributes) {
      if (a.g) n += count_nodes(a.g->nodes);
      for (const auto& sg : a.graphs) {
        if (sg) n += count_nodes(sg->nodes);
      }
    }
  }
  return n;
}

void collect_names(const ir::Graph& g, std::vector<const std::string*>& out) {
  for (const auto& v : g.inputs) out.push_back(&v.name);
  for (const auto& v : g.outputs) out.push_back(&v.name);
  for (const auto& [k, t] : g.initializers) out.push_back(&k);
  for (const auto& n : g.nodes) {
    for (const auto& s : n.inputs) out.push_back(&s);
    for (const auto& s : n.outputs) out.push_back(&s);
    for (const auto& a : n.attributes) {
      if (a.g) collect_names(*a.g, out);
      for (const auto& sg : a.graphs) {
        if (sg) collect_names(*sg, out);
      }
    }
  }
}

class Expander {
 public:
  Expander(ir::Model& m, const ReaderLimits& limits) : m_(m), limits_(limits) {
    for (const auto& f : m.functions) {
      fns_.emplace(std::make_tuple(ir::canonical_domain(f.domain), f.name, f.overload), &f);
    }
  }

  Status run() {
    if (fns_.empty()) return Status::Ok();
    return expand_graph(m_.graph, 0, 0);
  }

 private:
  const ir::Function* find(const ir::Node& n) const {
    auto it = fns_.find(std::make_tuple(ir::canonical_domain(n.domain), n.op_type, n.overload));
    return it == fns_.end() ? nullptr : it->second;
  }

  const std::string& prefix_base() {
    if (prefix_base_.empty()) {
      std::vector<const std::string*> names;
      collect_names(m_.graph, names);
      std::string base = "_nxrt_fn";
      bool clash = true;
      while (clash) {
        clash = false;
        for (const std::string* s : names) {
          if (s->compare(0, base.size(), base) == 0) {
            clash = true;
            base += "_";
            break;
          }
        }
      }
      prefix_base_ = base;
    }
    return prefix_base_;
  }

  Status merge_opsets(const ir::Function& fn) {
    for (const auto& o : fn.opset_imports) {
      const int64_t v = m_.opset_for(o.domain);
      if (v == 0) {
        m_.opset_imports.push_back(o);
      } else if (v != o.version) {
        return invalid_model("function '" + (fn.domain.empty() ? std::string() : fn.domain + "::") + fn.name +
                             "' imports domain '" + o.domain + "' version " + std::to_string(o.version) +
                             " but the model imports version " + std::to_string(v));
      }
    }
    return Status::Ok();
  }

  // depth: function calls being expanded; graph_depth: subgraph nesting of g.
  Status expand_graph(ir::Graph& g, int depth, int graph_depth) {
    std::vector<ir::Node> out;
    out.reserve(g.nodes.size());
    NXRT_RETURN_IF_ERROR(expand_nodes(g.nodes, depth, graph_depth, out));
    g.nodes = std::move(out);
    return Status::Ok();
  }

  Status expand_nodes(std::vector<ir::Node>& nodes, int depth, int graph_depth, std::vector<ir::Node>& out) {
    for (auto& node : nodes) {
      const bool has_subgraph = std::any_of(node.attributes.begin(), node.attributes.end(),
                                            [](const ir::Attribute& a) { return a.g || !a.graphs.empty(); });
      if (has_subgraph && graph_depth + 1 > limits_.max_graph_depth) {
        return invalid_model(node.label() + ": subgraphs nested deeper than " +
                             std::to_string(limits_.max_graph_depth) +
                             " after function expansion");
      }
      for (auto& a : node.attributes) {
        if (a.g) NXRT_RETURN_IF_ERROR(expand_graph(*a.g, depth, graph_depth + 1));
        for (auto& sg : a.graphs) {
          if (sg) NXRT_RETURN_IF_ERROR(expand_graph(*sg, depth, graph_depth + 1));
        }
      }
      const ir::Function* fn = find(node);
      if (!fn) {
        out.push_back(std::move(node));
        continue;
      }
      if (depth >= limits_.max_function_depth) {
        return invalid_model(node.label() + ": function calls nested deeper than " +
                             std::to_string(limits_.max_function_depth) + " (is function '" + fn->name +
                             "' recursive?)");
      }
      // Subgraph nodes count too: a body with a large If branch, called through a few levels of
      // functions that each call the next twice, would otherwise copy that branch exponentially often.
      auto [it, fresh] = body_nodes_.try_emplace(fn, 0);
      if (fresh) it->second = count_nodes(fn->nodes);
      instantiated_ += it->second;
      if (instantiated_ > limits_.max_expanded_nodes) {
        return invalid_model(node.label() + ": function expansion produces more than " +
                             std::to_string(limits_.max_expanded_nodes) + " nodes");
      }
      NXRT_RETURN_IF_ERROR(merge_opsets(*fn));
      std::vector<ir::Node> body;
      instantiate(*fn, node, body);
      NXRT_RETURN_IF_ERROR(expand_nodes(body, depth + 1, graph_depth, out));
    }
    return Status::Ok();
  }

  void instantiate(const ir::Function& fn, const ir::Node& call, std::vector<ir::Node>& out) {
    const std::string prefix = prefix_base() + std::to_string(counter_++) + "_";
    Renames ren;
    for (size_t i = 0; i < fn.inputs.size(); ++i) {
      ren[fn.inputs[i]] = i < call.inputs.size() ? call.inputs[i] : std::string();
    }
    for (size_t i = 0; i < fn.outputs.size(); ++i) {
      const bool bound = i < call.outputs.size() && !call.outputs[i].empty();
      ren[fn.outputs[i]] = bound ? call.outputs[i] : prefix + fn.outputs[i];
    }
    auto map_name = [&](const std::string& s) -> std::string {
      if (s.empty()) return s;
      auto it = ren.find(s);
      return it != ren.end() ? it->second : prefix + s;
    };
    const std::string call_name = call.name.empty() ? prefix + fn.name : call.name;
    for (const ir::Node& b : fn.nodes) {
      ir::Node n;
      n.name = call_name + "/" + (b.name.empty() ? b.op_type : b.name);
      n.op_type = b.op_type;
      n.domain = b.domain;
      n.overload = b.overload;
      n.doc = b.doc;
      for (const auto& s : b.inputs) n.inputs.push_back(map_name(s));
      for (const auto& s : b.outputs) n.outputs.push_back(map_name(s));
      n.attributes = substitute(b.attributes, call, fn, prefix, ren);
      out.push_back(std::move(n));
    }
  }

  // Resolves ref_attr_name references and copies/renames subgraphs of a function-body node.
  std::vector<ir::Attribute> substitute(const std::vector<ir::Attribute>& in, const ir::Node& call,
                                        const ir::Function& fn, const std::string& prefix, const Renames& ren) {
    std::vector<ir::Attribute> out;
    out.reserve(in.size());
    for (const ir::Attribute& a : in) {
      if (!a.ref_attr_name.empty()) {
        const ir::Attribute* src = call.find_attribute(a.ref_attr_name);
        if (!src) {
          for (const auto& d : fn.attribute_defaults) {
            if (d.name == a.ref_attr_name) {
              src = &d;
              break;
            }
          }
        }
        if (!src) continue;  // neither the call site nor a default sets it: the attribute is absent
        ir::Attribute c = deep_copy_attr(*src);
        c.name = a.name;
        c.ref_attr_name.clear();
        out.push_back(std::move(c));
        continue;
      }
      ir::Attribute c = a;
      if (a.g) c.g = rename_graph(*a.g, call, fn, prefix, ren);
      for (auto& sg : c.graphs) {
        if (sg) sg = rename_graph(*sg, call, fn, prefix, ren);
      }
      out.push_back(std::move(c));
    }
    return out;
  }

  // A copy of a subgraph inside a function body: names it defines get the instance prefix, names it
  // reads from the function's scope are bound like the body's own.
  std::shared_ptr<ir::Graph> rename_graph(const ir::Graph& g, const ir::Node& call, const ir::Function& fn,
                                          const std::string& prefix, const Renames& outer) {
    Renames scope = outer;
    for (const auto& v : g.inputs) scope[v.name] = prefix + v.name;
    for (const auto& [k, t] : g.initializers) scope[k] = prefix + k;
    for (const auto& n : g.nodes) {
      for (const auto& o : n.outputs) {
        if (!o.empty()) scope[o] = prefix + o;
      }
    }
    auto map_name = [&](const std::string& s) -> std::string {
      if (s.empty()) return s;
      auto it = scope.find(s);
      return it != scope.end() ? it->second : s;
    };
    auto c = std::make_shared<ir::Graph>();
    c->name = g.name;
    c->doc = g.doc;
    for (auto v : g.inputs) {
      v.name = map_name(v.name);
      c->inputs.push_back(std::move(v));
    }
    for (auto v : g.outputs) {
      v.name = map_name(v.name);
      c->outputs.push_back(std::move(v));
    }
    for (auto v : g.value_info) {
      v.name = map_name(v.name);
      c->value_info.push_back(std::move(v));
    }
    for (const auto& [k, t] : g.initializers) c->initializers.emplace(map_name(k), t);
    for (const auto& b : g.nodes) {
      ir::Node n = b;
      n.inputs.clear();
      n.outputs.clear();
      for (const auto& s : b.inputs) n.inputs.push_back(map_name(s));
      for (const auto& s : b.outputs) n.outputs.push_back(map_name(s));
      n.attributes = substitute(b.attributes, call, fn, prefix, scope);
      c->nodes.push_back(std::move(n));
    }
    return c;
  }

  ir::Model& m_;
  const ReaderLimits& limits_;
  std::unordered_map<const ir::Function*, size_t> body_nodes_;  // count_nodes of each function's body
  std::map<std::tuple<std::string, std::string, std::string>, const ir::Function*> fns_;
  std::string prefix_base_;
  int64_t counter_ = 0;
  size_t instantiated_ = 0;
};

}  // namespace

Status expand_functions(ir::Model& model, const ReaderLimits& limits) { return Expander(model, limits).run(); }

}  // namespace nxrt::onnx
