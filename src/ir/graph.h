// The in-memory model: Graph, Node, attributes and value types, as read from an ONNX file.
//
// Names are kept as strings (ONNX wires nodes by name); the session maps them to dense ids when it
// plans a run. Subgraphs (If/Loop/Scan bodies) are owned by the attribute that holds them.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nxrt/dtype.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"

namespace nxrt::ir {

// The internal domain of the ops the optimizer's fusions create (nxrt::FusedConv, ...), implemented by
// the CPU provider (src/ops/fused/). The optimizer imports it into a model when it creates such a node.
inline constexpr const char* kNxrtDomain = "nxrt";
inline constexpr int64_t kNxrtOpset = 1;

// One dimension of a declared shape: a fixed size, a named symbol ("batch"), or unknown.
struct Dim {
  int64_t value = -1;   // >= 0 when fixed
  std::string symbol;   // non-empty for a named symbolic dim
  bool is_fixed() const { return value >= 0; }
  static Dim fixed(int64_t v) { return Dim{v, {}}; }
  static Dim named(std::string s) { return Dim{-1, std::move(s)}; }
};

// ONNX TypeProto: tensor, sparse tensor, sequence, optional or map.
struct TypeInfo {
  enum class Kind { kUnknown, kTensor, kSparseTensor, kSequence, kOptional, kMap };
  Kind kind = Kind::kUnknown;
  DataType elem_type = DataType::kUndefined;  // tensor / sparse tensor element type; map key type
  bool has_shape = false;                     // false: rank unknown
  std::vector<Dim> dims;
  std::shared_ptr<TypeInfo> inner;            // sequence / optional element type, map value type
  std::string describe() const;
};

struct ValueInfo {
  std::string name;
  TypeInfo type;
  std::string doc;
};

class Graph;
struct ShapeFacts;  // ir/symbols.h: load-time shape inference results

struct Attribute {
  enum class Type {
    kUndefined = 0, kFloat = 1, kInt = 2, kString = 3, kTensor = 4, kGraph = 5, kSparseTensor = 11,
    kTypeProto = 13, kFloats = 6, kInts = 7, kStrings = 8, kTensors = 9, kGraphs = 10,
    kSparseTensors = 12, kTypeProtos = 14,
  };
  std::string name;
  Type type = Type::kUndefined;
  std::string ref_attr_name;  // set inside function bodies: value comes from the caller's attribute
  float f = 0;
  int64_t i = 0;
  std::string s;  // raw bytes
  Tensor t;
  std::shared_ptr<Graph> g;
  TypeInfo tp;
  std::vector<float> floats;
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  std::vector<Tensor> tensors;
  std::vector<std::shared_ptr<Graph>> graphs;
  std::vector<TypeInfo> type_protos;
};

const char* attribute_type_name(Attribute::Type t);

struct Node {
  std::string name;
  std::string op_type;
  std::string domain;  // "" means ai.onnx
  std::string overload;  // NodeProto.overload: selects a model-local function overload
  std::vector<std::string> inputs;   // "" = omitted optional input
  std::vector<std::string> outputs;  // "" = omitted optional output
  std::vector<Attribute> attributes;
  std::string doc;

  const Attribute* find_attribute(std::string_view n) const;  // string_view: no allocation per lookup
  // "node 'name' (domain::Op)" for error messages.
  std::string label() const;
};

class Graph {
 public:
  std::string name;
  std::vector<Node> nodes;
  std::vector<ValueInfo> inputs;
  std::vector<ValueInfo> outputs;
  std::vector<ValueInfo> value_info;
  // Initializers by name (dense; sparse initializers are densified at load).
  std::map<std::string, Tensor> initializers;
  std::string doc;
  // Load-time shape inference (shape/shape_inference.h); null until it has run.
  std::shared_ptr<ShapeFacts> shape_facts;

  const ValueInfo* find_input(const std::string& n) const;
};

struct OpsetImport {
  std::string domain;  // "" or "ai.onnx" = default domain
  int64_t version = 0;
};

// A model-local function (FunctionProto); expanded into callers at load.
struct Function {
  std::string name;
  std::string domain;
  std::string overload;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  std::vector<std::string> attribute_names;     // attributes without defaults
  std::vector<Attribute> attribute_defaults;    // attribute_proto: attributes with defaults
  std::vector<Node> nodes;
  std::vector<OpsetImport> opset_imports;
};

class Model {
 public:
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string doc;
  std::vector<OpsetImport> opset_imports;
  std::vector<std::pair<std::string, std::string>> metadata_props;
  std::vector<Function> functions;
  Graph graph;

  // Opset version imported for a domain ("" and "ai.onnx" are the same); 0 when not imported.
  int64_t opset_for(const std::string& domain) const;
  // Keeps the mmapped file (or bytes) that zero-copy tensors point into alive.
  std::shared_ptr<void> backing;
};

// Normalizes "ai.onnx" to "".
inline std::string canonical_domain(const std::string& d) { return d == "ai.onnx" ? std::string() : d; }

}  // namespace nxrt::ir
