#include "ir/graph.h"

namespace nxrt::ir {

std::string TypeInfo::describe() const {
  switch (kind) {
    case Kind::kUnknown: return "unknown";
    case Kind::kTensor:
    case Kind::kSparseTensor: {
      std::string s = kind == Kind::kSparseTensor ? "sparse_tensor(" : "tensor(";
      s += dtype_name(elem_type);
      s += ")";
      if (has_shape) {
        s += "[";
        for (size_t i = 0; i < dims.size(); ++i) {
          if (i) s += ",";
          s += dims[i].is_fixed() ? std::to_string(dims[i].value) : (dims[i].symbol.empty() ? "?" : dims[i].symbol);
        }
        s += "]";
      }
      return s;
    }
    case Kind::kSequence: return "seq(" + (inner ? inner->describe() : std::string("?")) + ")";
    case Kind::kOptional: return "optional(" + (inner ? inner->describe() : std::string("?")) + ")";
    case Kind::kMap: return std::string("map(") + dtype_name(elem_type) + "," + (inner ? inner->describe() : "?") + ")";
  }
  return "?";
}

const char* attribute_type_name(Attribute::Type t) {
  switch (t) {
    case Attribute::Type::kUndefined: return "UNDEFINED";
    case Attribute::Type::kFloat: return "FLOAT";
    case Attribute::Type::kInt: return "INT";
    case Attribute::Type::kString: return "STRING";
    case Attribute::Type::kTensor: return "TENSOR";
    case Attribute::Type::kGraph: return "GRAPH";
    case Attribute::Type::kSparseTensor: return "SPARSE_TENSOR";
    case Attribute::Type::kTypeProto: return "TYPE_PROTO";
    case Attribute::Type::kFloats: return "FLOATS";
    case Attribute::Type::kInts: return "INTS";
    case Attribute::Type::kStrings: return "STRINGS";
    case Attribute::Type::kTensors: return "TENSORS";
    case Attribute::Type::kGraphs: return "GRAPHS";
    case Attribute::Type::kSparseTensors: return "SPARSE_TENSORS";
    case Attribute::Type::kTypeProtos: return "TYPE_PROTOS";
  }
  return "?";
}

const Attribute* Node::find_attribute(std::string_view n) const {
  for (const auto& a : attributes) {
    if (a.name == n) return &a;
  }
  return nullptr;
}

std::string Node::label() const {
  std::string s = "node '" + name + "' (";
  if (!domain.empty()) s += domain + "::";
  return s + op_type + ")";
}

const ValueInfo* Graph::find_input(const std::string& n) const {
  for (const auto& v : inputs) {
    if (v.name == n) return &v;
  }
  return nullptr;
}

int64_t Model::opset_for(const std::string& d) const {
  const std::string want = canonical_domain(d);
  for (const auto& o : opset_imports) {
    if (canonical_domain(o.domain) == want) return o.version;
  }
  return 0;
}

}  // namespace nxrt::ir
