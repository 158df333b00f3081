// SessionOptions::kv_cache_dtype: a float16 KV cache for a float32 model whose attention is
// com.microsoft::GroupQueryAttention.
//
// Why: a decode step reads the whole cache once per layer, and a long context makes the cache a large
// share of the bytes a step reads (Qwen2.5-0.5B at 4096 positions: 100 MB of float32 cache against
// ~310 MB of int4 weights) and of the memory a session holds. llama.cpp keeps its cache in float16 by
// default; ONNX exports of float32 models declare a float32 one. GroupQueryAttention's cache type
// (T_CACHE) may differ from its query type, so the cache can be float16 without touching the rest of
// the graph: the kernel rounds each new key/value row to float16 once, when it appends it, and widens
// cached rows to float32 as it reads them.
//
// The rewrite changes the graph's interface: every graph input that GroupQueryAttention nodes read as
// past_key / past_value (and nothing else reads) becomes float16, and so do the nodes' present_key /
// present_value graph outputs. A node is rewritten whole (both pasts and both presents) or not at all:
// its query must be float32, its pasts float32 graph inputs read only there, its presents graph outputs
// (or absent) that no node reads. Nodes that do not qualify keep their types.
#include <algorithm>
#include <set>

#include "ir/symbols.h"
#include "optimizer/graph_util.h"
#include "optimizer/optimizer.h"

namespace nxrt::optimizer {

namespace {

bool is_gqa(const ir::Node& n) {
  return ir::canonical_domain(n.domain) == "com.microsoft" && n.op_type == "GroupQueryAttention";
}

ir::ValueInfo* find_value(std::vector<ir::ValueInfo>& vs, const std::string& name) {
  auto it = std::find_if(vs.begin(), vs.end(), [&](const ir::ValueInfo& v) { return v.name == name; });
  return it == vs.end() ? nullptr : &*it;
}

}  // namespace

Result<std::vector<std::string>> retype_attention_caches(ir::Model& model, DataType dtype) {
  if (dtype != DataType::kFloat16) {
    return invalid_argument(std::string("kv_cache_dtype: only float16 can be chosen (or the model's own), got ") +
                            dtype_name(dtype));
  }
  ir::Graph& g = model.graph;
  GraphInfo gi(g, true, model.ir_version);
  auto float_of = [&](const std::string& name) {
    const ir::ValueFacts* f = g.shape_facts ? g.shape_facts->find(name) : nullptr;
    return f && f->dtype == DataType::kFloat;
  };
  // A past input qualifies when it is a float32 graph input (not an initializer) that only
  // GroupQueryAttention nodes read, in their past slots (not a graph output, no subgraph reads it).
  auto past_ok = [&](const std::string& name) {
    if (name.empty() || !gi.input_names.count(name) || g.initializers.count(name) || gi.protected_names.count(name)) {
      return false;
    }
    const ir::ValueInfo* in = find_value(g.inputs, name);
    if (!in || in->type.kind != ir::TypeInfo::Kind::kTensor || in->type.elem_type != DataType::kFloat) return false;
    auto it = gi.consumers.find(name);
    if (it == gi.consumers.end()) return false;
    for (int ci : it->second) {
      const ir::Node& c = g.nodes[static_cast<size_t>(ci)];
      if (!is_gqa(c)) return false;
      for (size_t k = 0; k < c.inputs.size(); ++k)
        if (c.inputs[k] == name && k != 3 && k != 4) return false;
    }
    return true;
  };
  // A present output qualifies when it is absent, or a graph output that no node (or subgraph) reads.
  auto present_ok = [&](const ir::Node& n, size_t k) {
    if (k >= n.outputs.size() || n.outputs[k].empty()) return true;
    const std::string& name = n.outputs[k];
    return find_value(g.outputs, name) && gi.num_uses(name) == 0 && !gi.captured.count(name);
  };
  std::set<std::string> inputs, outputs;
  for (const ir::Node& n : g.nodes) {
    if (!is_gqa(n) || n.inputs.size() < 5 || n.inputs[0].empty() || !float_of(n.inputs[0])) continue;
    if (!past_ok(n.inputs[3]) || !past_ok(n.inputs[4]) || !present_ok(n, 1) || !present_ok(n, 2)) continue;
    inputs.insert(n.inputs[3]);
    inputs.insert(n.inputs[4]);
    for (size_t k = 1; k <= 2 && k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) outputs.insert(n.outputs[k]);
  }
  // A past shared with a node that did not qualify would give that node a float16 cache it was not
  // checked for: drop such inputs (and their nodes' presents) until the set is closed.
  for (bool changed = true; changed;) {
    changed = false;
    for (const ir::Node& n : g.nodes) {
      if (!is_gqa(n) || n.inputs.size() < 5) continue;
      const bool a = inputs.count(n.inputs[3]) > 0, b = inputs.count(n.inputs[4]) > 0;
      const bool node_in = a && b && (n.outputs.size() < 2 || n.outputs[1].empty() || outputs.count(n.outputs[1])) &&
                           (n.outputs.size() < 3 || n.outputs[2].empty() || outputs.count(n.outputs[2]));
      if ((a || b) && !node_in) {
        inputs.erase(n.inputs[3]);
        inputs.erase(n.inputs[4]);
        for (size_t k = 1; k <= 2 && k < n.outputs.size(); ++k) outputs.erase(n.outputs[k]);
        changed = true;
      }
    }
  }
  std::vector<std::string> done;
  for (const std::string& name : inputs) {
    find_value(g.inputs, name)->type.elem_type = dtype;
    done.push_back(name);
  }
  for (const std::string& name : outputs) {
    find_value(g.outputs, name)->type.elem_type = dtype;
    done.push_back(name);
  }
  // Declared intermediate types of the rewritten values no longer hold.
  g.value_info.erase(std::remove_if(g.value_info.begin(), g.value_info.end(),
                                    [&](const ir::ValueInfo& v) { return inputs.count(v.name) || outputs.count(v.name); }),
                     g.value_info.end());
  return done;
}

}  // namespace nxrt::optimizer
