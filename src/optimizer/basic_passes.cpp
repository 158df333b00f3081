// Level-basic passes: constant folding, Identity/Dropout elimination, Shape/Size folding, dead code.
#include <set>

#include "optimizer/graph_util.h"
#include "ir/tensor_util.h"
#include "shape/op_schema.h"

namespace nxrt::optimizer {

namespace {

// The op's schema says its outputs may differ between runs on the same inputs (random generators, Dropout).
bool is_nondeterministic(const ir::Node& n, int64_t opset) {
  const shape::OpSchema* s = shape::find_schema(n.domain, n.op_type, opset);
  return s && !s->deterministic;
}

// Ops whose outputs are not plain tensors, or that are defined over their graph / training state.
bool never_fold(const ir::Node& n) {
  static const std::set<std::string> kOps = {
      "SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt", "SequenceLength",
      "SplitToSequence", "ConcatFromSequence", "SequenceMap", "Optional", "OptionalHasElement",
      "OptionalGetElement", "Gradient", "Adam", "Adagrad", "Momentum", "If", "Loop", "Scan", "ImageDecoder"};
  return kOps.count(n.op_type) != 0 || has_graph_attr(n);
}

// Upper bound on the output size of ops that can blow up small constants; -1 when unknown.
int64_t predicted_bytes(const ir::Node& n, const std::vector<const Tensor*>& in) {
  auto numel_of = [](const Tensor* shape_t) -> int64_t {
    std::vector<double> v;
    if (!shape_t || !const_values(*shape_t, &v)) return -1;
    double p = 1;
    for (double d : v) p *= std::max(d, 1.0);
    return p > 1e15 ? INT64_MAX / 16 : static_cast<int64_t>(p);
  };
  if (n.op_type == "ConstantOfShape") {
    int64_t e = numel_of(in.empty() ? nullptr : in[0]);
    const ir::Attribute* v = n.find_attribute("value");
    const int64_t elem = v && v->t.defined() ? std::max<int64_t>(1, dtype_storage_bytes(v->t.dtype(), 1)) : 4;
    return e < 0 ? -1 : e * elem;
  }
  if (n.op_type == "Expand" && in.size() >= 2 && in[0]) {
    int64_t e = numel_of(in[1]);
    return e < 0 ? -1 : std::max(e, in[0]->numel()) * 8 * std::max<int64_t>(1, in[0]->numel());
  }
  if (n.op_type == "Tile" && in.size() >= 2 && in[0]) {
    int64_t e = numel_of(in[1]);
    return e < 0 ? -1 : e * static_cast<int64_t>(std::max<size_t>(1, in[0]->nbytes()));
  }
  return -1;
}

}  // namespace

int fold_constants(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  std::vector<bool> dead(g.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    const std::string dom = ir::canonical_domain(n.domain);
    if (!dom.empty() && dom != "ai.onnx.ml") continue;
    if (is_nondeterministic(n, pc.opset(dom)) || never_fold(n)) continue;
    bool all_const = true, any_output = false, protected_out = false;
    std::vector<const Tensor*> in;
    for (const auto& name : n.inputs) {
      if (name.empty()) {
        in.push_back(nullptr);
        continue;
      }
      const Tensor* t = gi.constant(name);
      if (!t) {
        all_const = false;
        break;
      }
      in.push_back(t);
    }
    if (!all_const) continue;
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      any_output = true;
      protected_out |= gi.protected_names.count(o) != 0 || g.initializers.count(o) != 0;
    }
    // Graph outputs stay produced by their node: the caller sees the same value either way, and the
    // executor's treatment of an output that is an initializer is not worth the risk.
    if (!any_output || protected_out) continue;
    // ConstantOfShape is how some exporters write weights: fold it up to a larger bound.
    const int64_t limit = n.op_type == "ConstantOfShape" ? pc.options->max_constant_of_shape_bytes
                                                         : pc.options->max_folded_bytes;
    int64_t pred = predicted_bytes(n, in);
    if (pred > limit) continue;
    std::vector<Tensor> outs;
    if (!evaluate_node(pc, g, n, in, &outs)) continue;
    bool fits = true;
    for (const auto& t : outs) fits &= !t.defined() || static_cast<int64_t>(t.nbytes()) <= limit;
    if (!fits) continue;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (!n.outputs[k].empty()) g.initializers[n.outputs[k]] = outs[k];
    }
    dead[i] = true;
    ++folded;
    if (n.op_type == "Constant") pc.count("constant_to_initializer");
    else pc.count("constant_folded");
  }
  if (folded) remove_nodes(g, dead);
  return folded;
}

int eliminate_identities(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  std::vector<bool> dead(g.nodes.size(), false);
  std::unordered_map<std::string, std::string> rename;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!ir::canonical_domain(n.domain).empty() || n.inputs.empty() || n.inputs[0].empty() || n.outputs.empty() ||
        n.outputs[0].empty())
      continue;
    if (n.op_type == "Identity") {
      if (n.inputs.size() != 1 || n.outputs.size() != 1) continue;
    } else if (n.op_type == "Dropout") {
      // Inference Dropout is Identity on output 0 when the mask is not used and training is off.
      if (n.outputs.size() > 1 && !n.outputs[1].empty() &&
          (gi.num_uses(n.outputs[1]) > 0 || gi.protected_names.count(n.outputs[1])))
        continue;
      const int64_t opset = pc.opset("");
      if (opset < 7 && attr_i(n, "is_test", 0) == 0) continue;  // training-mode Dropout before opset 7
      if (opset >= 12 && n.inputs.size() > 2 && !n.inputs[2].empty()) {
        double train = 1;
        if (!const_scalar(gi.constant(n.inputs[2]), &train) || train != 0) continue;
      }
    } else {
      continue;
    }
    const std::string& out = n.outputs[0];
    if (gi.protected_names.count(out)) continue;
    std::string src = n.inputs[0];
    while (rename.count(src)) src = rename[src];
    rename[out] = src;
    dead[i] = true;
    pc.count(n.op_type == "Identity" ? "identity_removed" : "dropout_removed");
  }
  if (rename.empty()) return 0;
  for (auto& n : g.nodes) {
    for (auto& in : n.inputs) {
      auto it = rename.find(in);
      if (it != rename.end()) in = it->second;
    }
  }
  remove_nodes(g, dead);
  return static_cast<int>(rename.size());
}

int fold_shapes(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  std::vector<bool> dead(g.nodes.size(), false);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& n = g.nodes[i];
    if (!ir::canonical_domain(n.domain).empty() || (n.op_type != "Shape" && n.op_type != "Size")) continue;
    if (n.inputs.size() != 1 || n.inputs[0].empty() || n.outputs.size() != 1 || n.outputs[0].empty()) continue;
    const std::string& out = n.outputs[0];
    if (gi.protected_names.count(out) || g.initializers.count(out)) continue;
    Dims shape;
    if (!gi.static_shape(n.inputs[0], &shape)) continue;
    Tensor result;
    if (n.op_type == "Size") {
      result = Tensor::scalar_int64(shape_numel(shape));
    } else {
      const int64_t r = static_cast<int64_t>(shape.size());
      int64_t start = attr_i(n, "start", 0), end = attr_i(n, "end", r);
      if (pc.opset("") < 15) start = 0, end = r;
      if (start < 0) start += r;
      if (end < 0) end += r;
      start = std::clamp<int64_t>(start, 0, r);
      end = std::clamp<int64_t>(end, 0, r);
      std::vector<int64_t> v;
      for (int64_t k = start; k < end; ++k) v.push_back(shape[static_cast<size_t>(k)]);
      result = Tensor::from_vector(DataType::kInt64, Dims{static_cast<int64_t>(v.size())}, v);
    }
    g.initializers[out] = result;
    dead[i] = true;
    ++folded;
    pc.count("shape_folded");
  }
  if (folded) remove_nodes(g, dead);
  return folded;
}

int remove_dead_code(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  // Walk backwards so chains of dead nodes go in one pass.
  std::unordered_map<std::string, int> uses;
  for (const auto& [name, readers] : gi.consumers) uses[name] = static_cast<int>(readers.size());
  std::vector<bool> dead(g.nodes.size(), false);
  int removed = 0;
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const ir::Node& n = g.nodes[k];
    const std::string dom = ir::canonical_domain(n.domain);
    if (!dom.empty() && dom != "ai.onnx.ml" && dom != kNxrtDomain) continue;
    bool used = false;
    for (const auto& o : n.outputs) {
      if (o.empty()) continue;
      used |= uses[o] > 0 || gi.protected_names.count(o) != 0;
    }
    if (used) continue;
    dead[k] = true;
    ++removed;
    for (const auto& in : n.inputs) {
      if (!in.empty()) --uses[in];
    }
  }
  if (removed) remove_nodes(g, dead);
  pc.count("dead_nodes_removed", removed);
  // Initializers nobody reads (and that are not graph inputs: those stay as defaults).
  int dropped = 0;
  for (auto it = g.initializers.begin(); it != g.initializers.end();) {
    if (uses[it->first] <= 0 && !gi.protected_names.count(it->first) && !gi.input_names.count(it->first)) {
      it = g.initializers.erase(it);
      ++dropped;
    } else {
      ++it;
    }
  }
  pc.count("initializers_removed", dropped);
  return removed;
}

}  // namespace nxrt::optimizer
