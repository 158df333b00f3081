// Level-basic passes: constant folding, Identity/Dropout elimination, Shape/Size folding, dead code.
#include <algorithm>
#include <set>

#include "optimizer/passes.h"
#include "optimizer/rewrite.h"
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

// ---- constant folding ----

struct ConstantNode : Match {
  std::vector<const Tensor*> inputs;  // nullptr for an absent optional input
  int64_t limit = 0;                  // bytes an output may have
};

bool match_constant_node(Rewriter& rw, int anchor, ConstantNode& m) {
  const ir::Node& n = rw.node(anchor);
  if (is_nondeterministic(n, rw.pc.opset(ir::canonical_domain(n.domain))) || never_fold(n)) return false;
  for (const auto& name : n.inputs) {
    const Tensor* t = name.empty() ? nullptr : rw.constant(name);
    if (!name.empty() && !t) return false;
    m.inputs.push_back(t);
  }
  bool any_output = false;
  for (const auto& o : n.outputs) {
    if (o.empty()) continue;
    any_output = true;
    // Graph outputs stay produced by their node: the caller sees the same value either way, and the
    // executor's treatment of an output that is an initializer is not worth the risk.
    if (rw.gi.protected_names.count(o) || rw.g.initializers.count(o)) return false;
  }
  if (!any_output) return false;
  // ConstantOfShape is how some exporters write weights: fold it up to a larger bound.
  const Options& opts = *rw.pc.options;
  m.limit = n.op_type == "ConstantOfShape" ? opts.max_constant_of_shape_bytes : opts.max_folded_bytes;
  if (predicted_bytes(n, m.inputs) > m.limit) return false;
  m.take(anchor);
  return true;
}

// The node's outputs become initializers (it is evaluated with the CPU kernel) and the node goes.
bool build_folded_constant(Rewriter& rw, const ConstantNode& m, Rewrite& r) {
  const ir::Node& n = rw.node(m.anchor);
  std::vector<Tensor> outs;
  if (!evaluate_node(rw.pc, rw.g, n, m.inputs, &outs)) return false;
  for (const auto& t : outs) {
    if (t.defined() && static_cast<int64_t>(t.nbytes()) > m.limit) return false;
  }
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    if (!n.outputs[k].empty()) rw.g.initializers[n.outputs[k]] = outs[k];
  }
  r.stat = n.op_type == "Constant" ? "constant_to_initializer" : "constant_folded";
  return true;
}

const Fusion<ConstantNode> kFoldConstants{
    .stat = "constant_folded", .anchor = {{}, {"", "ai.onnx.ml"}}, .match = match_constant_node,
    .build = build_folded_constant, .domain = nullptr};

// ---- Identity / inference Dropout ----

bool match_identity(Rewriter& rw, int anchor, Match& m) {
  const ir::Node& n = rw.node(anchor);
  if (n.inputs.empty() || n.inputs[0].empty() || n.outputs.empty() || n.outputs[0].empty()) return false;
  if (n.op_type == "Identity") {
    if (n.inputs.size() != 1 || n.outputs.size() != 1) return false;
  } else {
    // Inference Dropout is Identity on output 0 when the mask is not used and training is off.
    if (n.outputs.size() > 1 && !n.outputs[1].empty() &&
        (rw.gi.num_uses(n.outputs[1]) > 0 || rw.gi.protected_names.count(n.outputs[1])))
      return false;
    const int64_t opset = rw.opset();
    if (opset < 7 && attr_i(n, "is_test", 0) == 0) return false;  // training-mode Dropout before opset 7
    if (opset >= 12 && n.inputs.size() > 2 && !n.inputs[2].empty()) {
      double train = 1;
      if (!const_scalar(rw.constant(n.inputs[2]), &train) || train != 0) return false;
    }
  }
  if (rw.gi.protected_names.count(n.outputs[0])) return false;
  m.take(anchor);
  return true;
}

// The node goes; its readers read its input.
bool build_identity(Rewriter& rw, const Match& m, Rewrite& r) {
  const ir::Node& n = rw.node(m.anchor);
  r.renames.emplace_back(n.outputs[0], n.inputs[0]);
  r.stat = n.op_type == "Identity" ? "identity_removed" : "dropout_removed";
  return true;
}

const Fusion<Match> kEliminateIdentities{
    .stat = "identity_removed", .anchor = {{"Identity", "Dropout"}}, .match = match_identity, .build = build_identity,
    .domain = nullptr};

// ---- Shape / Size of statically shaped values ----

struct ShapeNode : Match {
  Dims shape;  // of the input
};

bool match_shape_node(Rewriter& rw, int anchor, ShapeNode& m) {
  const ir::Node& n = rw.node(anchor);
  if (n.inputs.size() != 1 || n.inputs[0].empty() || n.outputs.size() != 1 || n.outputs[0].empty()) return false;
  const std::string& out = n.outputs[0];
  if (rw.gi.protected_names.count(out) || rw.g.initializers.count(out)) return false;
  if (!rw.gi.static_shape(n.inputs[0], &m.shape)) return false;
  m.take(anchor);
  return true;
}

// The output becomes an initializer and the node goes.
bool build_shape_value(Rewriter& rw, const ShapeNode& m, Rewrite& r) {
  const ir::Node& n = rw.node(m.anchor);
  Tensor result;
  if (n.op_type == "Size") {
    result = Tensor::scalar_int64(shape_numel(m.shape));
  } else {
    const int64_t rank = static_cast<int64_t>(m.shape.size());
    int64_t start = attr_i(n, "start", 0), end = attr_i(n, "end", rank);
    if (rw.opset() < 15) start = 0, end = rank;
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::clamp<int64_t>(start, 0, rank);
    end = std::clamp<int64_t>(end, 0, rank);
    std::vector<int64_t> v(m.shape.begin() + start, m.shape.begin() + std::max(start, end));
    result = Tensor::from_vector(DataType::kInt64, Dims{static_cast<int64_t>(v.size())}, v);
  }
  rw.g.initializers[n.outputs[0]] = std::move(result);
  return true;
}

const Fusion<ShapeNode> kFoldShapes{
    .stat = "shape_folded", .anchor = {{"Shape", "Size"}}, .match = match_shape_node, .build = build_shape_value,
    .domain = nullptr};

}  // namespace

int fold_constants(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kFoldConstants); }
int eliminate_identities(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kEliminateIdentities); }
int fold_shapes(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kFoldShapes); }

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
