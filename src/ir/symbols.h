// Load-time shape facts: symbolic dims, their lineage, and the inferred type of every graph value.
//
// A dim (or the element of a small int64 tensor whose values are tracked, e.g. Shape(x)) is a SymDim:
// a constant or a symbol. Symbols are model-declared names ("batch"), minted ones ("unk__N") for
// data-dependent or unresolvable extents, or derived ones (a function of other dims: batch*seq).
// The SymbolTable is shared by a model's main graph and all its subgraphs. It records two lineage
// relations: a union-find of symbols unified with each other (same(a, b)), and derived[sym] =
// {kind, operands}. Filled by the shape layer (src/shape/); stored on ir::Graph::shape_facts.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"

namespace nxrt::ir {

struct SymDim {
  int64_t value = 0;  // the constant when sym < 0
  int32_t sym = -1;   // >= 0: a symbol id in the SymbolTable
  bool is_const() const { return sym < 0; }
  static SymDim c(int64_t v) { return SymDim{v, -1}; }
  static SymDim s(int32_t id) { return SymDim{0, id}; }
  bool operator==(const SymDim& o) const { return sym == o.sym && (sym >= 0 || value == o.value); }
  bool operator!=(const SymDim& o) const { return !(*this == o); }
};

// A symbol defined as a function of other dims. Kinds "*", "+", "-", "/" (floor division) print
// infix ("batch*seq"); any other kind prints as a call ("max(a,b)", "slice(seq,1,-1,1)").
struct DerivedSymbol {
  std::string kind;
  std::vector<SymDim> operands;
};

class SymbolTable {
 public:
  // The symbol of a model-declared dim name (the same name is the same symbol across the model).
  int32_t named(const std::string& name);
  // A fresh "unk__N" symbol (N skips names the model itself uses).
  int32_t mint();
  // A fresh symbol for an extent inference could not compute (a division by zero): opaque, so the
  // capture classifier never trusts it to stay fixed.
  int32_t mint_opaque();
  bool is_opaque(int32_t s) const { return opaque_[static_cast<size_t>(s)]; }
  // A derived symbol; the same (kind, operands) gives the same symbol.
  int32_t derive(const std::string& kind, const std::vector<SymDim>& operands);
  // Reserve a model name so minted names never collide with it.
  void reserve_name(const std::string& name);

  // Union-find over symbols. The representative prefers model-declared names.
  int32_t find(int32_t s) const;
  void unite(int32_t a, int32_t b);
  bool same(int32_t a, int32_t b) const { return find(a) == find(b); }
  bool same(SymDim a, SymDim b) const;
  // Same, by name (false when either name is unknown).
  bool same(const std::string& a, const std::string& b) const;

  size_t size() const { return names_.size(); }
  const std::string& name(int32_t s) const { return names_[static_cast<size_t>(s)]; }
  bool is_minted(int32_t s) const { return minted_[static_cast<size_t>(s)]; }
  int32_t lookup(const std::string& name) const;  // -1 when unknown
  const DerivedSymbol* derived(int32_t s) const;
  const std::map<int32_t, DerivedSymbol>& all_derived() const { return derived_; }

  // "3", "batch", or the representative's name of a unified symbol.
  std::string dim_string(SymDim d) const;
  std::string dims_string(const std::vector<SymDim>& dims) const;  // "[batch,seq,896]"
  // "unk__3 = batch*seq"
  std::string derived_string(int32_t s) const;
  // Lineage lines: "same: a == b == c" per union class with more than one member, then one line per
  // derived symbol.
  std::string describe_lineage() const;

 private:
  std::vector<std::string> names_;
  std::vector<bool> minted_;
  std::vector<bool> opaque_;
  mutable std::vector<int32_t> parent_;
  std::unordered_map<std::string, int32_t> by_name_;
  std::unordered_map<std::string, int> reserved_;
  std::map<int32_t, DerivedSymbol> derived_;
  std::unordered_map<std::string, int32_t> derived_memo_;
  int64_t next_unk_ = 0;
};

// What load-time inference knows about one value.
struct ValueFacts {
  TypeInfo::Kind kind = TypeInfo::Kind::kUnknown;
  DataType dtype = DataType::kUndefined;
  bool has_shape = false;  // rank known
  std::vector<SymDim> dims;
  // Small int tensors (rank <= 1, few elements): the element values, constants or symbols.
  bool has_values = false;
  std::vector<SymDim> values;
  // Small constant float tensors (rank <= 1): their values (e.g. Resize/Upsample scales).
  std::vector<double> float_values;
  std::shared_ptr<ValueFacts> inner;  // sequence / optional element

  bool is_static() const {
    if (!has_shape) return false;
    for (const auto& d : dims) {
      if (!d.is_const()) return false;
    }
    return true;
  }
  // "float32[batch,seq,896]", "int64[3]{batch,seq,896}", "float32[?]" (rank unknown), "seq(float32[2])".
  std::string describe(const SymbolTable& syms) const;
};

struct ShapeFacts {
  std::shared_ptr<SymbolTable> symbols;
  // Values defined in this graph (inputs, initializers, node outputs); subgraph values live on the
  // subgraph's own ShapeFacts.
  std::unordered_map<std::string, ValueFacts> values;
  std::vector<std::string> order;  // inputs, then node outputs in node order
  // Ops seen without a shape function ("domain::Op" -> count); on the main graph, for the whole model.
  std::map<std::string, int> ops_without_shape_fn;

  const ValueFacts* find(const std::string& name) const {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  }
};

}  // namespace nxrt::ir
