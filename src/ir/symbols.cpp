// ir::SymbolTable (symbols, union-find lineage, derived symbols) and ValueFacts printing; see symbols.h.
#include "ir/symbols.h"

#include <string>

namespace nxrt::ir {

int32_t SymbolTable::named(const std::string& name) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  auto id = static_cast<int32_t>(names_.size());
  names_.push_back(name);
  minted_.push_back(false);
  opaque_.push_back(false);
  parent_.push_back(id);
  by_name_.emplace(name, id);
  return id;
}

void SymbolTable::reserve_name(const std::string& name) { reserved_.emplace(name, 1); }

int32_t SymbolTable::mint() {
  std::string n;
  do {
    n = "unk__" + std::to_string(next_unk_++);
  } while (reserved_.count(n) || by_name_.count(n));
  auto id = static_cast<int32_t>(names_.size());
  names_.push_back(n);
  minted_.push_back(true);
  opaque_.push_back(false);
  parent_.push_back(id);
  by_name_.emplace(n, id);
  return id;
}

int32_t SymbolTable::mint_opaque() {
  int32_t id = mint();
  opaque_[static_cast<size_t>(id)] = true;
  return id;
}

int32_t SymbolTable::derive(const std::string& kind, const std::vector<SymDim>& operands) {
  std::string key = kind;
  for (const auto& o : operands) key += o.is_const() ? "|c" + std::to_string(o.value) : "|s" + std::to_string(o.sym);
  auto it = derived_memo_.find(key);
  if (it != derived_memo_.end()) return it->second;
  int32_t id = mint();
  derived_[id] = DerivedSymbol{kind, operands};
  derived_memo_.emplace(std::move(key), id);
  return id;
}

int32_t SymbolTable::find(int32_t s) const {
  if (s < 0 || static_cast<size_t>(s) >= parent_.size()) return s;
  while (parent_[static_cast<size_t>(s)] != s) {
    auto& p = parent_[static_cast<size_t>(s)];
    p = parent_[static_cast<size_t>(p)];
    s = p;
  }
  return s;
}

void SymbolTable::unite(int32_t a, int32_t b) {
  int32_t ra = find(a), rb = find(b);
  if (ra == rb) return;
  bool ma = minted_[static_cast<size_t>(ra)], mb = minted_[static_cast<size_t>(rb)];
  int32_t root = ra, child = rb;
  if (ma != mb) {
    root = ma ? rb : ra;
    child = ma ? ra : rb;
  } else if (rb < ra) {
    root = rb;
    child = ra;
  }
  parent_[static_cast<size_t>(child)] = root;
}

bool SymbolTable::same(SymDim a, SymDim b) const {
  if (a.is_const() != b.is_const()) return false;
  if (a.is_const()) return a.value == b.value;
  return find(a.sym) == find(b.sym);
}

bool SymbolTable::same(const std::string& a, const std::string& b) const {
  int32_t x = lookup(a), y = lookup(b);
  return x >= 0 && y >= 0 && same(x, y);
}

int32_t SymbolTable::lookup(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

const DerivedSymbol* SymbolTable::derived(int32_t s) const {
  auto it = derived_.find(s);
  return it == derived_.end() ? nullptr : &it->second;
}

std::string SymbolTable::dim_string(SymDim d) const {
  if (d.is_const()) return std::to_string(d.value);
  if (static_cast<size_t>(d.sym) >= names_.size()) return "?";
  // A model-declared name prints as itself; a minted one as its class representative.
  if (!minted_[static_cast<size_t>(d.sym)]) return names_[static_cast<size_t>(d.sym)];
  return names_[static_cast<size_t>(find(d.sym))];
}

std::string SymbolTable::dims_string(const std::vector<SymDim>& dims) const {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + dim_string(dims[i]);
  return s + "]";
}

std::string SymbolTable::derived_string(int32_t s) const {
  const DerivedSymbol* d = derived(s);
  if (!d) return name(s);
  std::string r = name(s) + " = ";
  bool infix = d->kind == "*" || d->kind == "+" || d->kind == "-" || d->kind == "/";
  if (!infix) r += d->kind + "(";
  for (size_t i = 0; i < d->operands.size(); ++i) {
    if (i && d->kind == "+" && d->operands[i].is_const() && d->operands[i].value < 0) {
      r += "-" + std::to_string(-d->operands[i].value);  // "seq-1", not "seq+-1"
      continue;
    }
    if (i) r += infix ? d->kind : ",";
    std::string o = dim_string(d->operands[i]);
    const DerivedSymbol* od = d->operands[i].is_const() ? nullptr : derived(find(d->operands[i].sym));
    bool paren = infix && od && (od->kind == "+" || od->kind == "-") && d->kind != "+";
    r += paren ? "(" + o + ")" : o;
  }
  if (!infix) r += ")";
  return r;
}

std::string SymbolTable::describe_lineage() const {
  std::string out;
  std::map<int32_t, std::vector<int32_t>> classes;
  for (size_t i = 0; i < names_.size(); ++i) classes[find(static_cast<int32_t>(i))].push_back(static_cast<int32_t>(i));
  for (const auto& [root, members] : classes) {
    if (members.size() < 2) continue;
    out += "same: " + names_[static_cast<size_t>(root)];
    for (int32_t m : members) {
      if (m != root) out += " == " + names_[static_cast<size_t>(m)];
    }
    out += "\n";
  }
  for (const auto& [s, d] : derived_) out += "derived: " + derived_string(s) + "\n";
  return out;
}

std::string ValueFacts::describe(const SymbolTable& syms) const {
  switch (kind) {
    case TypeInfo::Kind::kSequence: return "seq(" + (inner ? inner->describe(syms) : std::string("?")) + ")";
    case TypeInfo::Kind::kOptional: return "optional(" + (inner ? inner->describe(syms) : std::string("?")) + ")";
    case TypeInfo::Kind::kMap: return "map";
    case TypeInfo::Kind::kUnknown: return "?";
    default: break;
  }
  std::string s = dtype == DataType::kUndefined ? std::string("?") : std::string(dtype_name(dtype));
  s += has_shape ? syms.dims_string(dims) : std::string("[rank?]");
  if (has_values) {
    s += "{";
    for (size_t i = 0; i < values.size(); ++i) s += (i ? "," : "") + syms.dim_string(values[i]);
    s += "}";
  }
  return s;
}

}  // namespace nxrt::ir
