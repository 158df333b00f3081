// What a model or .pb file may ask of the reader. Each bound turns input that would make the reader
// (or the layers after it) nest without end, allocate far more than the file holds, or overflow its
// arithmetic into a load error naming the bound, the field path and the byte offset. The defaults sit
// far above real models: the largest public LLM graphs have tens of thousands of nodes, ranks up to 6,
// names under a few hundred bytes. docs/RELIABILITY.md lists every bound with its error message.
#pragma once
#include <cstddef>

namespace nxrt::onnx {

struct ReaderLimits {
  // Subgraphs (If/Loop/Scan bodies) nested in attributes, counted from the main graph.
  int max_graph_depth = 64;
  // Model-local function calls expanded inside each other.
  int max_function_depth = 32;
  // Nodes in the file: every graph, subgraph and function body together. Each parsed node costs
  // about a hundred times the two bytes an empty NodeProto takes in the file.
  size_t max_nodes = size_t{1} << 22;
  // Nodes that expanding model-local functions may add.
  size_t max_expanded_nodes = size_t{1} << 20;
  // Attributes of all nodes together (an empty AttributeProto: two bytes in, ~500 bytes parsed).
  size_t max_attributes = size_t{1} << 22;
  // Initializers and sparse initializers of all graphs together.
  size_t max_initializers = size_t{1} << 20;
  // Graph inputs, outputs and value_info entries of all graphs together.
  size_t max_value_infos = size_t{1} << 22;
  // Dims of a tensor, a sparse tensor or a declared shape.
  size_t max_rank = 64;
  // Any name: of a value, node, op type, domain, attribute, function, dim symbol, opset.
  size_t max_name_bytes = size_t{64} << 10;
  // Any other string: string tensor elements, string attributes, doc strings, metadata, map keys.
  size_t max_string_bytes = size_t{256} << 20;
};

}  // namespace nxrt::onnx
