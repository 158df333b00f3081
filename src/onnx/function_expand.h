// Inlines model-local functions (FunctionProto) into their call sites.
#pragma once
#include "ir/graph.h"
#include "nxrt/status.h"

namespace nxrt::onnx {

constexpr int kMaxFunctionDepth = 32;

// Replaces every node whose (domain, op_type, overload) names a model-local function with the
// function body: inputs/outputs bound to the call site's names, body-internal names given a unique
// prefix, attribute references (ref_attr_name) substituted from the call site or the function's
// defaults (dropped when neither has them), nested calls expanded up to kMaxFunctionDepth, subgraphs
// included. The opset imports of every expanded function are merged into the model's; a domain
// imported at a different version is an error.
Status expand_functions(ir::Model& model);

}  // namespace nxrt::onnx
