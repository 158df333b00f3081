// Load-time graph checks: duplicate producers and cycles; nodes are put in topological order.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "nxrt/status.h"

namespace nxrt::onnx {

// Names a subgraph reads from its enclosing scopes (used minus defined), recursively.
std::vector<std::string> subgraph_free_names(const ir::Graph& g);

// Checks that no value is produced twice (by two nodes, or by a node and one of `defined`: graph
// inputs / initializers) and that the nodes form a DAG (edges: node outputs to node inputs, and to
// names read by the nodes' subgraphs). Reorders `nodes` into a stable topological order when they
// are not already in one. `node_error(i, what)` builds the error for node i (before reordering).
Status check_and_sort_nodes(std::vector<ir::Node>& nodes, const std::vector<std::string>& defined,
                            const std::function<Status(size_t, const std::string&)>& node_error);

}  // namespace nxrt::onnx
