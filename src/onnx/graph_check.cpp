#include "onnx/graph_check.h"

#include <functional>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace nxrt::onnx {

namespace {

void collect_free(const ir::Graph& g, std::unordered_set<std::string>& out) {
  std::unordered_set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& [name, t] : g.initializers) defined.insert(name);
  for (const auto& n : g.nodes) {
    for (const auto& o : n.outputs) {
      if (!o.empty()) defined.insert(o);
    }
  }
  auto use = [&](const std::string& s) {
    if (!s.empty() && !defined.count(s)) out.insert(s);
  };
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs) use(i);
    for (const auto& a : n.attributes) {
      std::vector<const ir::Graph*> subs;
      if (a.g) subs.push_back(a.g.get());
      for (const auto& sg : a.graphs) {
        if (sg) subs.push_back(sg.get());
      }
      for (const ir::Graph* sg : subs) {
        std::unordered_set<std::string> inner;
        collect_free(*sg, inner);
        for (const auto& s : inner) use(s);
      }
    }
  }
  for (const auto& o : g.outputs) use(o.name);
}

}  // namespace

std::vector<std::string> subgraph_free_names(const ir::Graph& g) {
  std::unordered_set<std::string> s;
  collect_free(g, s);
  return std::vector<std::string>(s.begin(), s.end());
}

Status check_and_sort_nodes(std::vector<ir::Node>& nodes, const std::vector<std::string>& defined,
                            const std::function<Status(size_t, const std::string&)>& node_error) {
  const size_t n = nodes.size();
  std::unordered_set<std::string_view> outer(defined.begin(), defined.end());
  std::unordered_map<std::string_view, size_t> producer;
  producer.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    for (const auto& o : nodes[i].outputs) {
      if (o.empty()) continue;
      auto [it, inserted] = producer.emplace(o, i);
      if (!inserted) {
        const ir::Node& first = nodes[it->second];
        return node_error(i, "output '" + o + "' is already produced by " + first.label());
      }
      if (outer.count(o)) return node_error(i, "output '" + o + "' redefines a graph input or initializer");
    }
  }
  // Dependencies: for node i, the producers of its inputs (and of names its subgraphs read).
  std::vector<std::vector<size_t>> deps(n);
  bool sorted = true;
  for (size_t i = 0; i < n; ++i) {
    auto add = [&](const std::string& name) {
      if (name.empty()) return;
      auto it = producer.find(name);
      if (it == producer.end()) return;
      deps[i].push_back(it->second);
      if (it->second >= i) sorted = false;
    };
    for (const auto& in : nodes[i].inputs) add(in);
    for (const auto& a : nodes[i].attributes) {
      if (a.g) {
        for (const auto& s : subgraph_free_names(*a.g)) add(s);
      }
      for (const auto& g : a.graphs) {
        if (g) {
          for (const auto& s : subgraph_free_names(*g)) add(s);
        }
      }
    }
  }
  if (sorted) return Status::Ok();

  // Kahn's algorithm, always taking the lowest original index that is ready (stable order).
  std::vector<std::vector<size_t>> users(n);
  std::vector<size_t> pending(n, 0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t p : deps[i]) {
      users[p].push_back(i);
      ++pending[i];
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (pending[i] == 0) ready.push(i);
  }
  std::vector<size_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (size_t u : users[i]) {
      if (--pending[u] == 0) ready.push(u);
    }
  }
  if (order.size() != n) {
    // Walk back through unfinished producers until a node repeats: that node lies on a cycle.
    size_t cur = 0;
    while (pending[cur] == 0) ++cur;
    std::vector<char> seen(n, 0);
    while (!seen[cur]) {
      seen[cur] = 1;
      size_t next = cur;
      for (size_t p : deps[cur]) {
        if (pending[p] != 0) {
          next = p;
          break;
        }
      }
      if (next == cur) break;  // self-loop
      cur = next;
    }
    std::string path = nodes[cur].label();
    return node_error(cur, "the graph has a cycle through " + path);
  }
  std::vector<ir::Node> sorted_nodes;
  sorted_nodes.reserve(n);
  for (size_t i : order) sorted_nodes.push_back(std::move(nodes[i]));
  nodes = std::move(sorted_nodes);
  return Status::Ok();
}

}  // namespace nxrt::onnx
