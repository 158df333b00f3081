// Internal to the optimizer: per-graph analysis (producers, consumers, constants, protected names) and
// the context the passes share.
#pragma once
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "ir/graph.h"
#include "optimizer/optimizer.h"

namespace nxrt::optimizer {

struct PassContext {
  ir::Model* model = nullptr;
  const Options* options = nullptr;
  Stats* stats = nullptr;
  const ep::KernelRegistry* registry = nullptr;
  ep::ThreadPool* pool = nullptr;
  int next_id = 0;  // for fresh value / node names
  void count(const std::string& what, int n = 1) {
    if (stats && n) stats->counts[what] += n;
  }
  int64_t opset(const std::string& domain) const;
  // A name no graph value uses yet (prefix + counter); checked against `g`.
  std::string fresh_name(const ir::Graph& g, const std::string& prefix);
};

// Names a graph reads that it does not define, including those read by nested subgraphs.
std::vector<std::string> outer_reads(const ir::Graph& g);

class GraphInfo {
 public:
  // `main_graph`: initializers that are also graph inputs are overridable (not constant) from IR 4.
  GraphInfo(ir::Graph& g, bool main_graph, int64_t ir_version);

  ir::Graph& g;
  std::unordered_map<std::string, int> producer;                 // value -> node index
  std::unordered_map<std::string, std::vector<int>> consumers;   // value -> reading node indices
  std::unordered_set<std::string> protected_names;               // graph outputs, subgraph captures
  std::unordered_set<std::string> captured;                      // values nested subgraphs read
  std::unordered_set<std::string> input_names;

  const Tensor* constant(const std::string& name) const;
  bool is_const(const std::string& name) const { return constant(name) != nullptr; }
  int num_uses(const std::string& name) const {
    auto it = consumers.find(name);
    return it == consumers.end() ? 0 : static_cast<int>(it->second.size());
  }
  // The value is read by exactly one node input and is neither a graph output nor captured.
  bool single_use(const std::string& name) const { return num_uses(name) == 1 && !protected_names.count(name); }
  // The only consumer of `name` (when single_use), else -1.
  int sole_consumer(const std::string& name) const {
    return single_use(name) ? consumers.at(name)[0] : -1;
  }
  // The node producing `name`, or nullptr.
  ir::Node* producer_of(const std::string& name) {
    auto it = producer.find(name);
    return it == producer.end() ? nullptr : &g.nodes[static_cast<size_t>(it->second)];
  }
  // Declared static shape (graph input / output / value_info / initializer), or false.
  bool static_shape(const std::string& name, Dims* out) const;
  bool is_main() const { return main_; }

 private:
  bool main_ = false;
  int64_t ir_version_ = 0;
};

// Ranks known without running the graph: declared / constant ranks propagated in node order by each
// op's schema rank rule (shape/op_schema.h: like input 0, broadcast, Concat). Values missing from the map
// have unknown rank.
std::unordered_map<std::string, int64_t> infer_ranks(const GraphInfo& gi);

// Removes nodes flagged in `dead` (same size as g.nodes), keeping order.
void remove_nodes(ir::Graph& g, const std::vector<bool>& dead);

// ---- shared by the passes (the rewrite driver is rewrite.h) ----
// Whether n is the ai.onnx op `op` (nullptr: no).
bool is_onnx(const ir::Node* n, const char* op);
// One non-empty output.
bool single_output(const ir::Node& n);
// Adds `domain` at `version` to the model's opset imports unless it is imported already.
void import_domain(PassContext& pc, const char* domain, int64_t version);
// Writes doubles into a new float or double tensor; false for other dtypes or a size mismatch.
bool make_tensor(DataType dtype, const Dims& shape, const std::vector<double>& v, Tensor* out);
ir::Attribute make_attr_i(const std::string& name, int64_t v);
ir::Attribute make_attr_f(const std::string& name, float v);
ir::Attribute make_attr_s(const std::string& name, const std::string& v);
ir::Attribute make_attr_fs(const std::string& name, std::vector<float> v);
ir::Attribute make_attr_is(const std::string& name, std::vector<int64_t> v);

// A constant's values as doubles when it is a float/int tensor; false otherwise.
bool const_values(const Tensor& t, std::vector<double>* out);
// A constant holding a single value (any shape of numel 1) equal to `v` within `tol`.
bool const_is_scalar(const Tensor* t, double v, double tol = 0);
bool const_scalar(const Tensor* t, double* v);

// Attribute helpers.
int64_t attr_i(const ir::Node& n, const std::string& name, int64_t dflt);
float attr_f(const ir::Node& n, const std::string& name, float dflt);
std::string attr_s(const ir::Node& n, const std::string& name, const std::string& dflt = {});
std::vector<int64_t> attr_ints(const ir::Node& n, const std::string& name);
bool has_graph_attr(const ir::Node& n);

// Evaluates one node with the CPU kernel given constant inputs. Returns false (and leaves `outs`
// unspecified) when the node has no kernel, the kernel fails or an output is not a tensor.
bool evaluate_node(PassContext& pc, const ir::Graph& g, const ir::Node& node, const std::vector<const Tensor*>& inputs,
                   std::vector<Tensor>* outs);

}  // namespace nxrt::optimizer
