#include "optimizer/rewrite.h"

#include <algorithm>

namespace nxrt::optimizer {

bool Anchor::accepts(const ir::Node& n) const {
  if (!ops.empty() && std::find(ops.begin(), ops.end(), n.op_type) == ops.end()) return false;
  return domains.empty() || std::find(domains.begin(), domains.end(), ir::canonical_domain(n.domain)) != domains.end();
}

Rewriter::Rewriter(PassContext& pass_context, GraphInfo& graph_info)
    : pc(pass_context), gi(graph_info), g(graph_info.g), taken_(graph_info.g.nodes.size(), false) {}

ir::Node* Rewriter::sole_reader(const std::string& value, int* index) const {
  const int c = gi.sole_consumer(value);
  if (c < 0 || !live(c)) return nullptr;
  if (index) *index = c;
  return &g.nodes[static_cast<size_t>(c)];
}

ir::Node* Rewriter::sole_reader(const std::string& value, const char* op, int* index) const {
  int c = -1;
  ir::Node* n = sole_reader(value, &c);
  if (!is_onnx(n, op) || !single_output(*n)) return nullptr;
  if (index) *index = c;
  return n;
}

ir::Node* Rewriter::sole_producer(const std::string& value, int* index) const {
  auto it = gi.producer.find(value);
  if (it == gi.producer.end() || !live(it->second) || !gi.single_use(value)) return nullptr;
  ir::Node* n = &g.nodes[static_cast<size_t>(it->second)];
  if (!single_output(*n)) return nullptr;
  if (index) *index = it->second;
  return n;
}

ir::Node* Rewriter::sole_producer(const std::string& value, const char* op, int* index) const {
  int p = -1;
  ir::Node* n = sole_producer(value, &p);
  if (!is_onnx(n, op)) return nullptr;
  if (index) *index = p;
  return n;
}

std::vector<int> Rewriter::later_readers(const std::string& value, int index) const {
  std::vector<int> r;
  auto it = gi.consumers.find(value);
  if (it == gi.consumers.end()) return r;
  for (int c : it->second) {
    if (c > index && live(c)) r.push_back(c);
  }
  std::sort(r.begin(), r.end());
  r.erase(std::unique(r.begin(), r.end()), r.end());
  return r;
}

const std::unordered_map<std::string, int64_t>& Rewriter::ranks() {
  if (!ranks_known_) {
    ranks_ = infer_ranks(gi);
    ranks_known_ = true;
  }
  return ranks_;
}

std::string Rewriter::add_initializer(const std::string& prefix, Tensor t) {
  std::string name = pc.fresh_name(g, prefix);
  g.initializers[name] = std::move(t);
  return name;
}

std::string Rewriter::fused_name(const ir::Node& anchor, const char* kind, const char* suffix) const {
  return anchor.name.empty() ? kind + ("_" + std::to_string(done_)) : anchor.name + suffix;
}

ir::Node Rewriter::fused_node(int anchor, int last, const FusedOp& f, std::vector<std::string> inputs,
                              std::vector<ir::Attribute> attributes) {
  return make_node(fused_name(node(anchor), f.kind, f.suffix), kNxrtDomain, f.op, std::move(inputs),
                   {node(last).outputs[0]}, std::move(attributes));
}

bool Rewriter::all_live(const Match& m) const {
  for (int i : m.nodes) {
    if (!live(i)) return false;
  }
  return true;
}

void Rewriter::apply(const Match& m, Rewrite& r, const char* stat) {
  for (int i : m.nodes) taken_[static_cast<size_t>(i)] = true;
  for (auto& [at, n] : r.nodes) {
    taken_[static_cast<size_t>(at)] = false;
    g.nodes[static_cast<size_t>(at)] = std::move(n);
  }
  for (auto& [at, n] : r.after) inserted_after_[at].push_back(std::move(n));
  for (auto& [from, to] : r.renames) renames_[from] = to;
  pc.count(r.stat ? r.stat : stat, r.count);
  done_ += r.count;
}

int Rewriter::finish(const char* domain, int64_t version) {
  if (!done_) return 0;
  if (!inserted_after_.empty()) {
    // The inserted nodes go right after their position (node indices are not used past this point).
    std::vector<ir::Node> nodes;
    std::vector<bool> taken;
    nodes.reserve(g.nodes.size());
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      nodes.push_back(std::move(g.nodes[i]));
      taken.push_back(taken_[i]);
      auto it = inserted_after_.find(static_cast<int>(i));
      if (it == inserted_after_.end()) continue;
      for (ir::Node& n : it->second) {
        nodes.push_back(std::move(n));
        taken.push_back(false);
      }
    }
    g.nodes = std::move(nodes);
    taken_ = std::move(taken);
    inserted_after_.clear();
  }
  if (!renames_.empty()) {
    for (auto& n : g.nodes) {
      for (auto& in : n.inputs) {
        // A chain of renames (an Identity reading an Identity, in any node order) ends at the first
        // value not renamed; the hop bound stops on a cycle, which only a malformed graph has.
        size_t hops = 0;
        for (auto it = renames_.find(in); it != renames_.end() && hops++ < renames_.size(); it = renames_.find(in)) {
          in = it->second;
        }
      }
    }
  }
  remove_nodes(g, taken_);
  if (domain) import_domain(pc, domain, version);
  return done_;
}

std::string other_input(const ir::Node& n, const std::string& name) {
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return {};
  if (n.inputs[0] == name) return n.inputs[1];
  if (n.inputs[1] == name) return n.inputs[0];
  return {};
}

bool is_float_dtype(DataType d) {
  return d == DataType::kFloat || d == DataType::kDouble || d == DataType::kFloat16 || d == DataType::kBFloat16;
}

ir::Node make_node(std::string name, const char* domain, const char* op, std::vector<std::string> inputs,
                   std::vector<std::string> outputs, std::vector<ir::Attribute> attributes) {
  ir::Node n;
  n.name = std::move(name);
  n.domain = domain;
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = std::move(outputs);
  n.attributes = std::move(attributes);
  return n;
}

}  // namespace nxrt::optimizer
