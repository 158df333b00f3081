// Load-time shape inference with symbolic dims and lineage (see ir/symbols.h for the data model).
//
// Every value of the main graph and of every subgraph (If/Loop/Scan bodies see outer-scope values)
// gets a dtype (or undefined) and a shape whose dims are constants, model symbols, or minted symbols
// (unk__N). An unresolvable dim is a symbol, never a failure; an op without a shape function gives
// unknown rank. Only certain inconsistencies are errors (kInvalidModel): two constant dims that must
// be equal and are not, a rank mismatch, a declared (value_info / graph output) constant that
// contradicts the inferred one. Errors name the node (name, index, op, domain, opset) and the shapes.
#pragma once
#include <string>

#include "ir/graph.h"
#include "ir/symbols.h"
#include "nxrt/status.h"

namespace nxrt::shape {

// Runs inference over model.graph and its subgraphs; stores the results on each graph's shape_facts
// (all sharing one SymbolTable). Setting NXRT_NO_SHAPE_INFERENCE=1 in the environment skips it.
Status infer_shapes(ir::Model& model);

// One line per value, "name: float32[batch,seq,896]" (subgraph values indented under their node),
// then the lineage lines ("same: a == b", "unk__3 = batch*seq"). Empty facts print a note.
std::string describe_shapes(const ir::Graph& g);

// Ops that had no shape function, with counts ("com.microsoft::Foo 3"), one per line.
std::string describe_ops_without_shape_fn(const ir::Graph& g);

}  // namespace nxrt::shape
