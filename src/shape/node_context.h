// What a shape function sees of one node (NodeContext), the facts helpers the rule files share, and the
// internal interface the rule files use to add their op schemas. Internal to src/shape/.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/symbols.h"
#include "nxrt/status.h"
#include "shape/op_schema.h"

namespace nxrt::shape {

using ir::SymDim;
using ir::SymbolTable;
using ir::ValueFacts;
using Kind = ir::TypeInfo::Kind;

inline constexpr size_t kMaxValues = 64;  // small int tensors whose element values are tracked
inline constexpr int64_t kBig = int64_t{1} << 62;

// The facts of the values visible at one point: a graph's own values, then its enclosing graphs'.
struct Scope {
  ir::ShapeFacts* facts = nullptr;
  const Scope* parent = nullptr;
  const ir::ValueFacts* lookup(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (const ir::ValueFacts* v = s->facts->find(n)) return v;
    }
    return nullptr;
  }
};

// Runs inference over a subgraph (If/Loop/Scan bodies); implemented by the driver.
class SubgraphInferer {
 public:
  // The facts of g's outputs. `feed` (may be null) gives facts for g's inputs in order (merged with
  // their declared types); g sees the values of `parent` as outer scope.
  virtual Result<std::vector<ir::ValueFacts>> infer_subgraph(ir::Graph& g, const Scope* parent,
                                                              const std::vector<ir::ValueFacts>* feed) = 0;

 protected:
  ~SubgraphInferer() = default;
};

class NodeContext {
 public:
  const ir::Node* n;
  size_t index;  // in its graph, for error messages
  int64_t opset;
  const Scope* scope;
  ir::SymbolTable& S;
  SubgraphInferer* subgraphs;
  std::vector<const ir::ValueFacts*> in;  // nullptr: an omitted input (trailing ones are dropped)
  std::vector<ir::ValueFacts> out;

  const ir::ValueFacts& input(size_t i) const {
    static const ir::ValueFacts kNone;
    return i < in.size() && in[i] ? *in[i] : kNone;
  }
  bool has(size_t i) const { return i < in.size() && in[i] != nullptr; }
  size_t nin() const { return in.size(); }
  size_t nout() const { return n->outputs.size(); }
  const ir::Attribute* attr(const char* name) const { return n->find_attribute(name); }
  int64_t ai(const char* name, int64_t def) const {
    const ir::Attribute* a = attr(name);
    return a ? a->i : def;
  }
  std::string as(const char* name, const std::string& def) const {
    const ir::Attribute* a = attr(name);
    return a ? a->s : def;
  }
  std::optional<std::vector<int64_t>> aints(const char* name) const {
    const ir::Attribute* a = attr(name);
    if (!a) return std::nullopt;
    return a->ints;
  }
  // The values of input i when all are constants.
  std::optional<std::vector<int64_t>> const_ints(size_t i) const;
  std::optional<int64_t> const_scalar(size_t i) const;
  // The single tracked value of input i (a constant or a symbol).
  std::optional<ir::SymDim> sym_scalar(size_t i) const;
  // An invalid-model error naming the node (name, index, domain::op, opset).
  Status error(const std::string& msg) const;
  std::string shape_str(const ir::ValueFacts& v) const { return v.has_shape ? S.dims_string(v.dims) : "[rank?]"; }
  ir::ValueFacts& set(size_t i, ir::ValueFacts v) {
    if (out.size() <= i) out.resize(i + 1);
    out[i] = std::move(v);
    return out[i];
  }
  // Two dims that must be equal: constants that differ are an error (`what`); symbols are unified.
  Status unify(ir::SymDim a, ir::SymDim b, const std::string& what, ir::SymDim* result);
  // Infers a graph attribute of this node; see SubgraphInferer.
  Result<std::vector<ir::ValueFacts>> infer_subgraph(ir::Graph& g, const std::vector<ir::ValueFacts>* feed) {
    return subgraphs->infer_subgraph(g, scope, feed);
  }
};

// ---- facts helpers ----
ir::ValueFacts tensor(DataType dt, std::vector<ir::SymDim> dims);
ir::ValueFacts tensor_unknown_rank(DataType dt);
bool is_int_dtype(DataType dt);  // integer or bool
// Element i of an integer or bool tensor; nullopt for other dtypes.
std::optional<int64_t> tensor_int_at(const Tensor& t, int64_t i);
// A constant's facts, with the element values of small int (and float) tensors.
ir::ValueFacts from_tensor(const Tensor& t);
// A declared type's facts: named dims become model symbols, unnamed ones fresh symbols.
ir::ValueFacts from_type(ir::SymbolTable& S, const ir::TypeInfo& t);
// Normalizes a possibly negative axis into [0, rank); false when out of range.
bool norm_axis(int64_t& a, int64_t rank);
// v without tracked element values (what an op that computes new elements keeps of its input).
ValueFacts strip_values(ValueFacts v);
// v's dtype and shape as a tensor, without tracked element values.
ValueFacts tensor_like(ValueFacts v);

// ---- rules several families share ----
// Multidirectional broadcasting of the given inputs (nullptr entries are skipped). *known is false
// when an input's rank is unknown; incompatible constant dims are an error.
Status broadcast(NodeContext& c, const std::vector<const ir::ValueFacts*>& ins, bool* known,
                 std::vector<ir::SymDim>* dims);
// Output 0 has input 0's dtype and shape (no tracked values); other outputs are unknown.
Status same_as_input0(NodeContext& c);
// The dims given by the 1-D shape tensor input i: its tracked values, or fresh symbols when only its
// length is known; nullopt when even that is unknown.
std::optional<std::vector<ir::SymDim>> shape_from_input(NodeContext& c, size_t i);
// An op's axes: the attribute before opset `input_since`, input `input_index` from it (empty when
// omitted; nullopt when given but not constant).
std::optional<std::vector<int64_t>> axes_of(NodeContext& c, size_t input_index, int64_t input_since);

// ---- adding schemas (the rule files) ----
class SchemaList {
 public:
  // Sets the optional fields of the record just added.
  class Entry {
   public:
    Entry(std::vector<OpSchema>* list, size_t i) : list_(list), i_(i) {}
    Entry& inplace(int input) {
      rec().inplace_input = input;
      return *this;
    }
    Entry& nondeterministic() {
      rec().deterministic = false;
      return *this;
    }
    Entry& rank(RankRule r) {
      rec().rank = r;
      return *this;
    }
    Entry& differentiable() {
      rec().differentiable = true;
      return *this;
    }

   private:
    OpSchema& rec() { return (*list_)[i_]; }
    std::vector<OpSchema>* list_;
    size_t i_;
  };

  explicit SchemaList(std::vector<OpSchema>* out) : out_(out) {}
  // A record covering every opset; `fn` may be nullptr (an op known only for its other fields).
  Entry add(const std::string& domain, const std::string& op_type, ShapeFn fn);
  Entry add(const std::string& op_type, ShapeFn fn) { return add("", op_type, fn); }

 private:
  std::vector<OpSchema>* out_;
};

// One per rule file: adds that family's records.
void add_elementwise_schemas(SchemaList& s);    // rules_elementwise.cpp: unary/binary math, logic, Cast, quantize
void add_tensor_schemas(SchemaList& s);         // rules_tensor.cpp: shape and movement ops
void add_indexing_schemas(SchemaList& s);       // rules_indexing.cpp: Gather/Scatter family, TopK, NonZero, ...
void add_generator_schemas(SchemaList& s);      // rules_generator.cpp: Constant*, Range, random, losses
void add_nn_schemas(SchemaList& s);             // rules_nn.cpp: conv, pools, normalizations, RNNs, Resize
void add_reduction_schemas(SchemaList& s);      // rules_reduction.cpp: Reduce*, ArgMax/Min, Softmax, CumSum
void add_linalg_schemas(SchemaList& s);         // rules_linalg.cpp: MatMul family, Gemm, Einsum, MatMulNBits
void add_attention_schemas(SchemaList& s);      // rules_attention.cpp: Attention, GQA, rotary embeddings
void add_control_flow_schemas(SchemaList& s);   // rules_control_flow.cpp: If/Loop/Scan, sequences, optionals

}  // namespace nxrt::shape
