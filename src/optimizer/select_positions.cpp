// SessionOptions::position_selected_outputs: an output such as an LLM's logits is computed only at the
// positions the caller feeds, instead of at every position of the sequence.
//
// Why: a prefill of S tokens needs the logits of one position per row, but the LM head (hidden x vocab,
// the largest matmul of a small model) runs over all S. Selecting the rows of the hidden state before
// that matmul makes its cost independent of S (llama.cpp computes the last position only; this keeps the
// choice with the caller, so right-padded rows and speculative verification still get the positions
// they need).
//
// The rewrite walks back from the output through ops that act on each position alone, with constants:
//   Cast, Identity, Tanh, and Add / Sub / Mul / Div with a constant that does not vary along the
//   sequence axis (a scalar, a vector over the last axis, ...),
// to a MatMul or com.microsoft::MatMulNBits whose A input is [batch, seq, hidden] (from load-time shape
// inference, which runs before this and again after). Every value on the
// way must be read by that one node only. It then inserts nxrt::SelectPositions(A, positions) in front
// of the matmul and declares the graph input `<output>_positions` (int64 [batch, positions]); the
// output's sequence axis becomes that input's second dim. Anything else is refused with an error
// naming the node where the walk stopped, and the model is left as it was.
#include <algorithm>

#include "ir/symbols.h"
#include "optimizer/graph_util.h"
#include "optimizer/optimizer.h"

namespace nxrt::optimizer {

namespace {

// A tensor known at load time: a (non-overridable) initializer or a Constant node's `value`.
const Tensor* constant_tensor(GraphInfo& gi, const std::string& name) {
  if (const Tensor* t = gi.constant(name)) return t;
  const ir::Node* p = gi.producer_of(name);
  if (!is_onnx(p, "Constant")) return nullptr;
  const ir::Attribute* a = p->find_attribute("value");
  return a && a->type == ir::Attribute::Type::kTensor ? &a->t : nullptr;
}

// Whether broadcasting `c` against a [batch, seq, ...] value of rank `rank` gives every position the same
// operand: its dim aligned with the sequence axis (axis 1) is absent or 1.
bool constant_along_sequence(const Tensor& c, int64_t rank) {
  const int64_t r = c.rank();
  if (r > rank) return false;
  const int64_t seq_axis_in_c = 1 - (rank - r);  // axis 1 of the value, as an axis of c
  return seq_axis_in_c < 0 || c.dim(seq_axis_in_c) == 1;
}

Status select_one(ir::Model& model, GraphInfo& gi, const std::string& output) {
  ir::Graph& g = model.graph;
  const std::string where = "position_selected_outputs: output '" + output + "': ";
  auto out_it = std::find_if(g.outputs.begin(), g.outputs.end(), [&](const ir::ValueInfo& v) { return v.name == output; });
  if (out_it == g.outputs.end()) return invalid_argument(where + "the graph has no such output");
  const std::string input_name = output + "_positions";
  bool taken = gi.producer.count(input_name) || g.initializers.count(input_name) || gi.input_names.count(input_name);
  if (taken) return invalid_argument(where + "the graph already has a value named '" + input_name + "'");
  // Every value on the way is [batch, seq, n] (load-time shape inference ran before this).
  const ir::ValueFacts* of = g.shape_facts ? g.shape_facts->find(output) : nullptr;
  if (!of || !of->has_shape || of->dims.size() != 3) {
    return not_implemented(where + "it is not known to be [batch, seq, n] (rank 3)");
  }
  // Whatever reads the output inside the graph would see its new shape: refuse rather than change it.
  if (gi.num_uses(output) > 0) return not_implemented(where + "nodes of the graph read it too");
  for (const ir::Node& node : g.nodes) {
    for (const ir::Attribute& a : node.attributes) {
      std::vector<const ir::Graph*> subgraphs;
      if (a.g) subgraphs.push_back(a.g.get());
      for (const auto& sg : a.graphs) subgraphs.push_back(sg.get());
      for (const ir::Graph* sg : subgraphs) {
        const std::vector<std::string> reads = outer_reads(*sg);
        if (std::find(reads.begin(), reads.end(), output) != reads.end()) {
          return not_implemented(where + "a subgraph of node " + node.label() + " reads it");
        }
      }
    }
  }
  constexpr int64_t rank = 3;
  std::vector<std::string> on_the_way;  // values whose declared shapes the rewrite invalidates

  std::string value = output;
  for (int steps = 0;; ++steps) {
    ir::Node* n = gi.producer_of(value);
    if (!n) return not_implemented(where + "no node computes '" + value + "' (a graph input or a constant)");
    const std::string at = "node " + n->label() + " ";
    if (steps > 0 && !gi.single_use(value)) {
      return not_implemented(where + "'" + value + "' is read elsewhere too, so its positions cannot be dropped");
    }
    const std::string dom = ir::canonical_domain(n->domain);
    const bool matmul = (dom.empty() && n->op_type == "MatMul") || (dom == "com.microsoft" && n->op_type == "MatMulNBits");
    if (matmul) {
      // Rows of A are positions: a matmul maps each row of A alone, whatever B is.
      if (n->inputs.empty() || n->inputs[0].empty()) return not_implemented(where + at + "has no A input");
      const std::string a = n->inputs[0];
      // A must be [batch, seq, hidden] for its rows to be the output's positions (an [S, hidden] A
      // against a batched B would put the positions on another axis).
      const ir::ValueFacts* af = g.shape_facts ? g.shape_facts->find(a) : nullptr;
      if (!af || !af->has_shape || af->dims.size() != 3) {
        return not_implemented(where + at + "multiplies an A input '" + a + "' not known to be [batch, seq, hidden]");
      }
      ir::Node sel;
      sel.op_type = "SelectPositions";
      sel.domain = ir::kNxrtDomain;
      sel.name = "nxrt_select_positions_" + output;
      sel.inputs = {a, input_name};
      std::string selected = a + "_at_" + input_name;
      while (gi.producer.count(selected) || g.initializers.count(selected) || gi.input_names.count(selected)) selected += "_";
      sel.outputs = {selected};
      n->inputs[0] = selected;
      // Declared shapes on the way no longer hold along the sequence axis: drop those hints.
      on_the_way.push_back(value);
      g.value_info.erase(std::remove_if(g.value_info.begin(), g.value_info.end(),
                                        [&](const ir::ValueInfo& v) {
                                          return std::find(on_the_way.begin(), on_the_way.end(), v.name) != on_the_way.end();
                                        }),
                         g.value_info.end());
      const size_t at_index = static_cast<size_t>(n - g.nodes.data());
      g.nodes.insert(g.nodes.begin() + static_cast<std::ptrdiff_t>(at_index), std::move(sel));
      ir::ValueInfo in;
      in.name = input_name;
      in.type.kind = ir::TypeInfo::Kind::kTensor;
      in.type.elem_type = DataType::kInt64;
      in.type.has_shape = true;
      ir::Dim batch = ir::Dim::named("batch");
      if (out_it->type.has_shape && !out_it->type.dims.empty()) batch = out_it->type.dims[0];
      in.type.dims = {batch, ir::Dim::named(input_name)};
      if (out_it->type.has_shape && out_it->type.dims.size() >= 2) out_it->type.dims[1] = ir::Dim::named(input_name);
      g.inputs.push_back(std::move(in));
      if (model.opset_for(ir::kNxrtDomain) == 0) model.opset_imports.push_back({ir::kNxrtDomain, ir::kNxrtOpset});
      return Status::Ok();
    }
    const bool unary = dom.empty() && (n->op_type == "Cast" || n->op_type == "Identity" || n->op_type == "Tanh");
    const bool binary = dom.empty() && (n->op_type == "Add" || n->op_type == "Sub" || n->op_type == "Mul" || n->op_type == "Div");
    std::string next;
    if (unary && !n->inputs.empty()) {
      next = n->inputs[0];
    } else if (binary && n->inputs.size() == 2) {
      for (int side = 0; side < 2; ++side) {
        const Tensor* c = constant_tensor(gi, n->inputs[static_cast<size_t>(1 - side)]);
        if (c && constant_along_sequence(*c, rank)) next = n->inputs[static_cast<size_t>(side)];
        if (!next.empty()) break;
      }
      if (next.empty()) return not_implemented(where + at + "combines two values that vary along the sequence");
    } else {
      return not_implemented(where + at + "is not a per-position op (expected MatMul / MatMulNBits of [batch, seq, "
                             "hidden], optionally followed by Cast, Tanh, or Add/Sub/Mul/Div with a constant)");
    }
    if (steps > 16) return not_implemented(where + "no MatMul within 16 ops of the output");
    on_the_way.push_back(value);
    value = next;
  }
}

}  // namespace

Result<std::vector<std::string>> select_output_positions(ir::Model& model, const std::vector<std::string>& outputs,
                                                         bool optional) {
  std::vector<std::string> done;
  for (const std::string& o : outputs) {
    // Fresh analysis per output: the previous one inserted a node.
    GraphInfo gi(model.graph, true, model.ir_version);
    Status st = select_one(model, gi, o);
    if (st.ok()) {
      done.push_back(o);
    } else if (!optional) {
      return st;
    }
    // Optional: a refusal leaves the graph as it was (select_one refuses before changing anything).
  }
  return done;
}

}  // namespace nxrt::optimizer
