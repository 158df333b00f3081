// Inlines model-local functions (FunctionProto) into their call sites.
#pragma once
#include "ir/graph.h"
#include "nxrt/status.h"
#include "onnx/limits.h"

namespace nxrt::onnx {

// Replaces every node whose (domain, op_type, overload) names a model-local function with the
// function body: inputs/outputs bound to the call site's names, body-internal names given a unique
// prefix, attribute references (ref_attr_name) substituted from the call site or the function's
// defaults (dropped when neither has them), nested calls expanded up to limits.max_function_depth,
// subgraphs included (nested up to limits.max_graph_depth), adding at most limits.max_expanded_nodes
// nodes (subgraph nodes included). The opset imports of every expanded function are merged into the
// model's; a domain imported at a different version is an error.
Status expand_functions(ir::Model& model, const ReaderLimits& limits = {});

}  // namespace nxrt::onnx
