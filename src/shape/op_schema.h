// One record per op: what the runtime knows about an op apart from its kernels. Read by shape
// inference (the shape function), the CPU provider (which input output 0 may overwrite), the
// optimizer (whether constant folding may evaluate it, how its rank follows from its inputs') and the
// gradient builder (whether it can differentiate it). Each op family's records sit next to its shape
// rules (src/shape/rules_<family>.cpp); docs/ARCHITECTURE.md, "How to add an op", says how to add one.
//
// An op without a record is unknown to these consumers: no shape function (its outputs get unknown
// facts), no in-place output, deterministic, unknown rank, not differentiable.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::shape {

class NodeContext;  // shape/node_context.h: what a shape function sees of one node
using ShapeFn = Status (*)(NodeContext&);

// How output 0's rank follows from the ranks of the inputs, for passes that know ranks but not shapes.
enum class RankRule {
  kUnknown,       // not described
  kSameAsInput0,  // output 0 has input 0's rank (unary elementwise, conv, pools, normalizations, Cast)
  kBroadcast,     // multidirectional broadcasting: the largest input rank, known only when all inputs' are
  kSameAsInputs,  // all inputs and output 0 share one rank (Concat): any one known input rank gives it
};

struct OpSchema {
  std::string domain;  // canonical: "" is ai.onnx
  std::string op_type;
  // The opset versions of `domain` the record describes. The records today cover every version (the
  // shape functions branch on the opset themselves), including opset 0: a node of a domain the model
  // does not import.
  int64_t since_version = 0;
  int64_t end_version = INT64_MAX;
  // Output dtypes and shapes from the inputs' facts; nullptr when there is none (the op is listed by
  // describe_ops_without_shape_fn and its outputs get unknown facts).
  ShapeFn shape_fn = nullptr;
  // The input whose buffer output 0 may overwrite, or -1: set only for ops whose every CPU kernel reads
  // element i of that input before it writes element i of output 0. The executor still checks that the
  // input dies at the node, has output 0's dtype and shape, and that nothing else shares its buffer.
  int inplace_input = -1;
  // False for ops whose outputs differ between runs on the same inputs (random generators, Dropout):
  // constant folding leaves them alone.
  bool deterministic = true;
  RankRule rank = RankRule::kUnknown;
  // The gradient builder (ai.onnx.preview.training Gradient) can differentiate through it.
  bool differentiable = false;
};

// The record for (domain, op_type) whose versions cover `opset`, or nullptr. "ai.onnx" and "" are the
// same domain.
const OpSchema* find_schema(const std::string& domain, const std::string& op_type, int64_t opset);
// As `opset`: the newest record, for a caller that reads a fact no version changes (a rank rule) and
// does not know the model's opset.
inline constexpr int64_t kNewestOpset = INT64_MAX;
// Every record, in the order the families add them.
const std::vector<OpSchema>& all_schemas();

}  // namespace nxrt::shape
