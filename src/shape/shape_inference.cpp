// Load-time shape inference; see shape_inference.h and ir/symbols.h.
#include "shape/shape_inference.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>

#include "nxrt/float_types.h"
#include "shape/window_size.h"

namespace nxrt::ir {

// ---------------------------------------------------------------------------------------------
// SymbolTable

int32_t SymbolTable::named(const std::string& name) {
  auto it = by_name_.find(name);
  if (it != by_name_.end()) return it->second;
  auto id = static_cast<int32_t>(names_.size());
  names_.push_back(name);
  minted_.push_back(false);
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
  parent_.push_back(id);
  by_name_.emplace(n, id);
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

namespace nxrt::shape {
namespace {

using ir::SymDim;
using ir::SymbolTable;
using ir::ValueFacts;
using Kind = ir::TypeInfo::Kind;

constexpr size_t kMaxValues = 64;      // small int tensors whose values are tracked
constexpr int64_t kBig = int64_t{1} << 62;

// ---------------------------------------------------------------------------------------------
// Symbolic arithmetic (constants fold; products and sums are flattened and canonical).

void collect_factors(const SymbolTable& S, SymDim d, int64_t& c, std::vector<int32_t>& syms) {
  if (d.is_const()) {
    c *= d.value;
    return;
  }
  const ir::DerivedSymbol* dv = S.derived(d.sym);
  if (dv && dv->kind == "*") {
    for (const auto& o : dv->operands) collect_factors(S, o, c, syms);
    return;
  }
  syms.push_back(d.sym);
}

SymDim make_product(SymbolTable& S, int64_t c, std::vector<int32_t> syms) {
  if (c == 0 || syms.empty()) return SymDim::c(c);
  std::sort(syms.begin(), syms.end());
  if (c == 1 && syms.size() == 1) return SymDim::s(syms[0]);
  std::vector<SymDim> ops;
  if (c != 1) ops.push_back(SymDim::c(c));
  for (int32_t s : syms) ops.push_back(SymDim::s(s));
  return SymDim::s(S.derive("*", ops));
}

SymDim mul(SymbolTable& S, const std::vector<SymDim>& ds) {
  int64_t c = 1;
  std::vector<int32_t> syms;
  for (const auto& d : ds) collect_factors(S, d, c, syms);
  return make_product(S, c, std::move(syms));
}

// prod(num) / prod(den), cancelling common symbols; nullopt when all constant and not divisible.
std::optional<SymDim> divide(SymbolTable& S, const std::vector<SymDim>& num, const std::vector<SymDim>& den) {
  int64_t nc = 1, dc = 1;
  std::vector<int32_t> ns, ds;
  for (const auto& d : num) collect_factors(S, d, nc, ns);
  for (const auto& d : den) collect_factors(S, d, dc, ds);
  std::vector<int32_t> rest;
  for (int32_t d : ds) {
    auto it = std::find_if(ns.begin(), ns.end(), [&](int32_t n) { return S.same(n, d); });
    if (it != ns.end()) {
      ns.erase(it);
    } else {
      rest.push_back(d);
    }
  }
  if (rest.empty() && dc != 0 && nc % dc == 0) return make_product(S, nc / dc, std::move(ns));
  if (rest.empty() && ns.empty()) return std::nullopt;
  SymDim n = make_product(S, nc, std::move(ns));
  SymDim d = make_product(S, dc, std::move(rest));
  return SymDim::s(S.derive("/", {n, d}));
}

SymDim add(SymbolTable& S, const std::vector<SymDim>& ds) {
  int64_t c = 0;
  std::vector<SymDim> terms;
  std::function<void(SymDim)> collect = [&](SymDim d) {
    if (d.is_const()) {
      c += d.value;
      return;
    }
    const ir::DerivedSymbol* dv = S.derived(d.sym);
    if (dv && dv->kind == "+") {
      for (const auto& o : dv->operands) collect(o);
      return;
    }
    terms.push_back(d);
  };
  for (const auto& d : ds) collect(d);
  if (terms.empty()) return SymDim::c(c);
  std::sort(terms.begin(), terms.end(), [](SymDim a, SymDim b) { return a.sym < b.sym; });
  if (terms.size() == 1 && c == 0) return terms[0];
  if (c != 0) terms.push_back(SymDim::c(c));
  return SymDim::s(S.derive("+", terms));
}

SymDim sub(SymbolTable& S, SymDim a, SymDim b) {
  if (a.is_const() && b.is_const()) return SymDim::c(a.value - b.value);
  if (b.is_const()) return add(S, {a, SymDim::c(-b.value)});  // canonical: a sum with a constant term
  if (S.same(a, b)) return SymDim::c(0);
  if (!a.is_const()) {
    const ir::DerivedSymbol* dv = S.derived(a.sym);
    if (dv && dv->kind == "+") {
      std::vector<SymDim> rest = dv->operands;
      auto it = std::find_if(rest.begin(), rest.end(), [&](SymDim t) { return S.same(t, b); });
      if (it != rest.end()) {
        rest.erase(it);
        return add(S, rest);
      }
    }
  }
  return SymDim::s(S.derive("-", {a, b}));
}

int64_t floordiv_i(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

SymDim floordiv(SymbolTable& S, SymDim a, SymDim b) {
  if (b.is_const() && b.value == 1) return a;
  if (a.is_const() && b.is_const()) return b.value == 0 ? SymDim::s(S.mint()) : SymDim::c(floordiv_i(a.value, b.value));
  auto r = divide(S, {a}, {b});
  if (r) return *r;
  return SymDim::s(S.derive("/", {a, b}));
}

SymDim ceildiv(SymbolTable& S, SymDim a, SymDim b) {
  if (b.is_const() && b.value == 1) return a;
  if (a.is_const() && b.is_const()) {
    if (b.value == 0) return SymDim::s(S.mint());
    return SymDim::c(-floordiv_i(-a.value, b.value));
  }
  return SymDim::s(S.derive("ceil_div", {a, b}));
}

SymDim fn(SymbolTable& S, const std::string& kind, const std::vector<SymDim>& ops) {
  return SymDim::s(S.derive(kind, ops));
}

// ---------------------------------------------------------------------------------------------
// Facts helpers

ValueFacts tensor(DataType dt, std::vector<SymDim> dims) {
  ValueFacts v;
  v.kind = Kind::kTensor;
  v.dtype = dt;
  v.has_shape = true;
  v.dims = std::move(dims);
  return v;
}

ValueFacts tensor_unknown_rank(DataType dt) {
  ValueFacts v;
  v.kind = Kind::kTensor;
  v.dtype = dt;
  return v;
}

bool is_int_dtype(DataType dt) {
  return dt == DataType::kInt64 || dt == DataType::kInt32 || dt == DataType::kInt16 || dt == DataType::kInt8 ||
         dt == DataType::kUInt8 || dt == DataType::kUInt16 || dt == DataType::kUInt32 || dt == DataType::kUInt64 ||
         dt == DataType::kBool;
}

std::optional<int64_t> tensor_int_at(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DataType::kInt64: return t.data<int64_t>()[i];
    case DataType::kInt32: return t.data<int32_t>()[i];
    case DataType::kInt16: return t.data<int16_t>()[i];
    case DataType::kInt8: return t.data<int8_t>()[i];
    case DataType::kUInt8: return t.data<uint8_t>()[i];
    case DataType::kUInt16: return t.data<uint16_t>()[i];
    case DataType::kUInt32: return t.data<uint32_t>()[i];
    case DataType::kUInt64: return static_cast<int64_t>(t.data<uint64_t>()[i]);
    case DataType::kBool: return t.data<uint8_t>()[i] ? 1 : 0;
    default: return std::nullopt;
  }
}

ValueFacts from_tensor(const Tensor& t) {
  std::vector<SymDim> dims;
  for (int64_t d : t.shape()) dims.push_back(SymDim::c(d));
  ValueFacts v = tensor(t.dtype(), std::move(dims));
  DataType dt = t.dtype();
  if ((dt == DataType::kFloat || dt == DataType::kDouble || dt == DataType::kFloat16 || dt == DataType::kBFloat16) &&
      t.rank() <= 1 && t.numel() <= static_cast<int64_t>(kMaxValues) && t.is_contiguous() && t.storage()) {
    for (int64_t i = 0; i < t.numel(); ++i) {
      double x = dt == DataType::kFloat    ? t.data<float>()[i]
                 : dt == DataType::kDouble ? t.data<double>()[i]
                 : dt == DataType::kFloat16 ? static_cast<double>(static_cast<float>(t.data<Float16>()[i]))
                                            : static_cast<double>(static_cast<float>(t.data<BFloat16>()[i]));
      v.float_values.push_back(x);
    }
  }
  if (is_int_dtype(t.dtype()) && t.rank() <= 1 && t.numel() <= static_cast<int64_t>(kMaxValues) &&
      t.is_contiguous() && t.storage()) {
    Tensor c = t;
    v.has_values = true;
    for (int64_t i = 0; i < t.numel(); ++i) {
      auto x = tensor_int_at(c, i);
      if (!x) {
        v.has_values = false;
        v.values.clear();
        break;
      }
      v.values.push_back(SymDim::c(*x));
    }
  }
  return v;
}

ValueFacts from_type(SymbolTable& S, const ir::TypeInfo& t) {
  ValueFacts v;
  v.kind = t.kind;
  v.dtype = t.elem_type;
  if (t.kind == Kind::kTensor || t.kind == Kind::kSparseTensor) {
    v.has_shape = t.has_shape;
    for (const auto& d : t.dims) {
      if (d.is_fixed()) {
        v.dims.push_back(SymDim::c(d.value));
      } else if (!d.symbol.empty()) {
        v.dims.push_back(SymDim::s(S.named(d.symbol)));
      } else {
        v.dims.push_back(SymDim::s(S.mint()));
      }
    }
  } else if ((t.kind == Kind::kSequence || t.kind == Kind::kOptional) && t.inner) {
    v.inner = std::make_shared<ValueFacts>(from_type(S, *t.inner));
  }
  return v;
}

bool norm_axis(int64_t& a, int64_t rank) {
  if (a < -rank || a >= rank) return false;
  if (a < 0) a += rank;
  return true;
}

// ---------------------------------------------------------------------------------------------
// Per-node context

class Inferer;

struct Scope {
  ir::ShapeFacts* facts = nullptr;
  const Scope* parent = nullptr;
  const ValueFacts* lookup(const std::string& n) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (const ValueFacts* v = s->facts->find(n)) return v;
    }
    return nullptr;
  }
};

struct Ctx {
  Inferer* inf;
  const ir::Node* n;
  size_t index;
  int64_t opset;
  const Scope* scope;
  SymbolTable& S;
  std::vector<const ValueFacts*> in;
  std::vector<ValueFacts> out;

  const ValueFacts& input(size_t i) const {
    static const ValueFacts kNone;
    return i < in.size() && in[i] ? *in[i] : kNone;
  }
  bool has(size_t i) const { return i < in.size() && in[i] != nullptr; }
  size_t nin() const { return in.size(); }
  size_t nout() const { return n->outputs.size(); }
  bool out_used(size_t i) const { return i < n->outputs.size() && !n->outputs[i].empty(); }
  const ir::Attribute* attr(const char* name) const { return n->find_attribute(name); }
  int64_t ai(const char* name, int64_t def) const {
    const ir::Attribute* a = attr(name);
    return a ? a->i : def;
  }
  float af(const char* name, float def) const {
    const ir::Attribute* a = attr(name);
    return a ? a->f : def;
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
  std::optional<std::vector<int64_t>> const_ints(size_t i) const {
    if (!has(i) || !input(i).has_values) return std::nullopt;
    std::vector<int64_t> r;
    for (const auto& v : input(i).values) {
      if (!v.is_const()) return std::nullopt;
      r.push_back(v.value);
    }
    return r;
  }
  std::optional<int64_t> const_scalar(size_t i) const {
    auto v = const_ints(i);
    if (!v || v->size() != 1) return std::nullopt;
    return (*v)[0];
  }
  std::optional<SymDim> sym_scalar(size_t i) const {
    if (!has(i) || !input(i).has_values || input(i).values.size() != 1) return std::nullopt;
    return input(i).values[0];
  }
  Status error(const std::string& msg) const {
    return invalid_model("shape inference: node '" + n->name + "' (#" + std::to_string(index) + ", " +
                         (n->domain.empty() ? std::string("ai.onnx") : n->domain) + "::" + n->op_type + ", opset " +
                         std::to_string(opset) + "): " + msg);
  }
  std::string shape_str(const ValueFacts& v) const { return v.has_shape ? S.dims_string(v.dims) : "[rank?]"; }
  ValueFacts& set(size_t i, ValueFacts v) {
    if (out.size() <= i) out.resize(i + 1);
    out[i] = std::move(v);
    return out[i];
  }
  // Two dims that must be equal: constants that differ are an error; symbols are unified.
  Status unify(SymDim a, SymDim b, const std::string& what, SymDim* result) {
    if (a.is_const() && b.is_const()) {
      if (a.value != b.value) return error(what);
      *result = a;
    } else if (a.is_const()) {
      *result = a;
    } else if (b.is_const()) {
      *result = b;
    } else {
      S.unite(a.sym, b.sym);
      *result = a;
    }
    return Status::Ok();
  }
};

using ShapeFn = Status (*)(Ctx&);

// ---------------------------------------------------------------------------------------------
// Shared shape rules

// Multidirectional broadcasting of the given inputs (nullptr entries are skipped).
Status broadcast(Ctx& c, const std::vector<const ValueFacts*>& ins, bool* known, std::vector<SymDim>* dims) {
  size_t r = 0;
  *known = false;
  for (const auto* x : ins) {
    if (!x) continue;
    if (!x->has_shape) return Status::Ok();
    r = std::max(r, x->dims.size());
  }
  dims->assign(r, SymDim::c(1));
  for (const auto* x : ins) {
    if (!x) continue;
    size_t off = r - x->dims.size();
    for (size_t i = 0; i < x->dims.size(); ++i) {
      SymDim d = x->dims[i];
      SymDim& o = (*dims)[off + i];
      if (d.is_const() && d.value == 1) continue;
      if (o.is_const() && o.value == 1) {
        o = d;
      } else if (o.is_const() && d.is_const()) {
        if (o.value != d.value) {
          std::string shapes;
          for (const auto* y : ins) {
            if (y) shapes += (shapes.empty() ? "" : " and ") + c.shape_str(*y);
          }
          return c.error("cannot broadcast " + shapes + " (dim " + std::to_string(o.value) + " vs " +
                         std::to_string(d.value) + ")");
        }
      } else if (o.is_const()) {
        // d must be 1 or o.
      } else if (d.is_const()) {
        o = d;
      } else {
        c.S.unite(o.sym, d.sym);
      }
    }
  }
  *known = true;
  return Status::Ok();
}

// Elementwise on small int value vectors (with scalar broadcast).
std::optional<std::vector<SymDim>> values_binary(Ctx& c, const ValueFacts& a, const ValueFacts& b,
                                                 const std::function<std::optional<SymDim>(SymDim, SymDim)>& f) {
  if (!a.has_values || !b.has_values) return std::nullopt;
  size_t n = std::max(a.values.size(), b.values.size());
  if ((a.values.size() != n && a.values.size() != 1) || (b.values.size() != n && b.values.size() != 1)) {
    return std::nullopt;
  }
  std::vector<SymDim> r;
  for (size_t i = 0; i < n; ++i) {
    auto v = f(a.values[a.values.size() == 1 ? 0 : i], b.values[b.values.size() == 1 ? 0 : i]);
    if (!v) return std::nullopt;
    r.push_back(*v);
  }
  return r;
}

Status same_as_input0(Ctx& c) {
  ValueFacts v = c.input(0);
  v.has_values = false;
  v.values.clear();
  if (v.kind == Kind::kUnknown) v.kind = Kind::kTensor;
  for (size_t i = 0; i < c.nout(); ++i) c.set(i, i == 0 ? v : ValueFacts{});
  return Status::Ok();
}

// Neg/Abs keep the values of tracked small int tensors (constants only).
Status op_int_unary(Ctx& c) {
  ValueFacts v = c.input(0);
  if (v.kind == Kind::kUnknown) v.kind = Kind::kTensor;
  bool ok = v.has_values;
  for (auto& x : v.values) {
    if (!x.is_const()) {
      ok = false;
      break;
    }
    x.value = c.n->op_type == "Neg" ? -x.value : std::abs(x.value);
  }
  if (!ok) {
    v.has_values = false;
    v.values.clear();
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss: loss is the labels' shape with reduction
// "none", else a scalar; log_prob is like the scores.
Status op_loss(Ctx& c) {
  const ValueFacts& scores = c.input(0);
  DataType dt = scores.dtype;
  std::string red = c.as("reduction", "mean");
  if (red == "none") {
    ValueFacts l = c.input(1);
    l.kind = Kind::kTensor;
    l.dtype = dt;
    l.has_values = false;
    l.values.clear();
    c.set(0, l);
  } else {
    c.set(0, tensor(dt, {}));
  }
  if (c.nout() > 1) {
    ValueFacts lp = scores;
    lp.kind = Kind::kTensor;
    lp.has_values = false;
    lp.values.clear();
    c.set(1, lp);
  }
  return Status::Ok();
}

// Sequences and optionals (element facts merged across inputs where several can flow in).
ValueFacts merge_branches(SymbolTable& S, const ValueFacts& a, const ValueFacts& b);

ValueFacts wrap(Kind k, ValueFacts inner) {
  ValueFacts v;
  v.kind = k;
  inner.has_values = false;
  inner.values.clear();
  v.inner = std::make_shared<ValueFacts>(std::move(inner));
  return v;
}

Status op_sequence(Ctx& c) {
  const std::string& op = c.n->op_type;
  if (op == "SequenceConstruct") {
    ValueFacts e = c.input(0);
    for (size_t i = 1; i < c.nin(); ++i) e = merge_branches(c.S, e, c.input(i));
    c.set(0, wrap(Kind::kSequence, e));
  } else if (op == "SequenceEmpty") {
    c.set(0, wrap(Kind::kSequence, tensor_unknown_rank(static_cast<DataType>(c.ai("dtype", 1)))));
  } else if (op == "SequenceAt") {
    c.set(0, c.input(0).inner ? *c.input(0).inner : ValueFacts{});
  } else if (op == "SequenceLength") {
    c.set(0, tensor(DataType::kInt64, {}));
  } else if (op == "SequenceInsert") {
    const ValueFacts& s = c.input(0);
    c.set(0, wrap(Kind::kSequence, s.inner ? merge_branches(c.S, *s.inner, c.input(1)) : c.input(1)));
  } else if (op == "SequenceErase") {
    c.set(0, c.input(0));
  } else if (op == "SplitToSequence") {
    const ValueFacts& x = c.input(0);
    ValueFacts e = tensor_unknown_rank(x.dtype);
    if (x.has_shape) {
      int64_t axis = c.ai("axis", 0);
      if (!norm_axis(axis, static_cast<int64_t>(x.dims.size()))) return c.error("axis out of range for " + c.shape_str(x));
      e = tensor(x.dtype, x.dims);
      if (!c.has(1) && c.ai("keepdims", 1) == 0) {
        e.dims.erase(e.dims.begin() + axis);
      } else {
        e.dims[static_cast<size_t>(axis)] = SymDim::s(c.S.mint());
      }
    }
    c.set(0, wrap(Kind::kSequence, e));
  } else if (op == "ConcatFromSequence") {
    const ValueFacts* e = c.input(0).inner.get();
    DataType dt = e ? e->dtype : DataType::kUndefined;
    if (!e || !e->has_shape) {
      c.set(0, tensor_unknown_rank(dt));
      return Status::Ok();
    }
    bool new_axis = c.ai("new_axis", 0) != 0;
    int64_t r = static_cast<int64_t>(e->dims.size()) + (new_axis ? 1 : 0);
    int64_t axis = c.ai("axis", 0);
    if (!norm_axis(axis, r)) return c.error("axis out of range");
    std::vector<SymDim> d = e->dims;
    if (new_axis) {
      d.insert(d.begin() + axis, SymDim::s(c.S.mint()));
    } else {
      d[static_cast<size_t>(axis)] = SymDim::s(c.S.mint());
    }
    c.set(0, tensor(dt, d));
  } else if (op == "Optional") {
    if (c.has(0)) {
      c.set(0, wrap(Kind::kOptional, c.input(0)));
    } else {
      const ir::Attribute* t = c.attr("type");
      ValueFacts v;
      v.kind = Kind::kOptional;
      if (t) v.inner = std::make_shared<ValueFacts>(from_type(c.S, t->tp));
      c.set(0, v);
    }
  } else if (op == "OptionalGetElement") {
    const ValueFacts& o = c.input(0);
    c.set(0, o.kind == Kind::kOptional ? (o.inner ? *o.inner : ValueFacts{}) : o);
  } else if (op == "OptionalHasElement") {
    c.set(0, tensor(DataType::kBool, {}));
  }
  return Status::Ok();
}

Status op_identity(Ctx& c) {
  c.set(0, c.input(0));
  return Status::Ok();
}

Status op_binary(Ctx& c) {
  bool known;
  std::vector<SymDim> dims;
  std::vector<const ValueFacts*> ins;
  for (size_t i = 0; i < c.nin(); ++i) ins.push_back(c.has(i) ? c.in[i] : nullptr);
  const std::string& op = c.n->op_type;
  // Before opset 7 these ops broadcast B onto A (attrs broadcast/axis), or B is a per-channel slope
  // (PRelu): the output has A's shape.
  bool legacy = c.opset < 7 && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Pow" ||
                                op == "And" || op == "Or" || op == "Xor" || op == "Equal" || op == "Greater" ||
                                op == "Less" || op == "PRelu");
  if (legacy) {
    known = c.input(0).has_shape;
    dims = c.input(0).dims;
  } else {
    NXRT_RETURN_IF_ERROR(broadcast(c, ins, &known, &dims));
  }
  DataType dt = c.input(0).dtype;
  static const char* kBool[] = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"};
  for (const char* b : kBool) {
    if (op == b) dt = DataType::kBool;
  }
  if (dt == DataType::kUndefined) {
    for (const auto* x : ins) {
      if (x && x->dtype != DataType::kUndefined && op != "Pow" && op != "BitShift") dt = x->dtype;
    }
  }
  ValueFacts v = known ? tensor(dt, dims) : tensor_unknown_rank(dt);
  if (c.nin() == 2 && known && dims.size() <= 1) {
    const ValueFacts &a = c.input(0), &b = c.input(1);
    SymbolTable& S = c.S;
    std::optional<std::vector<SymDim>> vals;
    if (op == "Add") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> { return add(S, {x, y}); });
    } else if (op == "Sub") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> { return sub(S, x, y); });
    } else if (op == "Mul") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> { return mul(S, {x, y}); });
    } else if (op == "Div" && is_int_dtype(dt)) {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> {
        if (y.is_const() && y.value == 0) return std::nullopt;
        if (x.is_const() && y.is_const()) return SymDim::c(x.value / y.value);  // C truncation, as the kernel
        return floordiv(S, x, y);
      });
    } else if (op == "Equal") {
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> {
        if (S.same(x, y)) return SymDim::c(1);
        if (x.is_const() && y.is_const()) return SymDim::c(0);
        // A symbol from a tracked shape is a dim (>= 0): never equal to a negative constant.
        if ((x.is_const() && x.value < 0) || (y.is_const() && y.value < 0)) return SymDim::c(0);
        return std::nullopt;
      });
    } else if (op == "Max" || op == "Min") {
      bool mx = op == "Max";
      vals = values_binary(c, a, b, [&](SymDim x, SymDim y) -> std::optional<SymDim> {
        if (x.is_const() && y.is_const()) return SymDim::c(mx ? std::max(x.value, y.value) : std::min(x.value, y.value));
        if (S.same(x, y)) return x;
        return fn(S, mx ? "max" : "min", {x, y});
      });
    }
    if (vals && is_int_dtype(dt)) {
      v.has_values = true;
      v.values = std::move(*vals);
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_bool_unary(Ctx& c) {
  ValueFacts v = c.input(0);
  v.has_values = false;
  v.values.clear();
  v.kind = Kind::kTensor;
  v.dtype = DataType::kBool;
  c.set(0, v);
  return Status::Ok();
}

Status op_where(Ctx& c) {
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {c.has(0) ? c.in[0] : nullptr, c.has(1) ? c.in[1] : nullptr, c.has(2) ? c.in[2] : nullptr},
                                 &known, &dims));
  DataType dt = c.input(1).dtype != DataType::kUndefined ? c.input(1).dtype : c.input(2).dtype;
  ValueFacts v = known ? tensor(dt, dims) : tensor_unknown_rank(dt);
  const ValueFacts &cond = c.input(0), &x = c.input(1), &y = c.input(2);
  if (known && dims.size() <= 1 && cond.has_values && x.has_values && y.has_values) {
    size_t n = dims.empty() ? 1 : (dims[0].is_const() ? static_cast<size_t>(dims[0].value) : 0);
    bool ok = n > 0;
    for (const auto* s : {&cond, &x, &y}) ok = ok && (s->values.size() == n || s->values.size() == 1);
    if (ok) {
      for (size_t i = 0; i < n && ok; ++i) {
        SymDim cv = cond.values[cond.values.size() == 1 ? 0 : i];
        if (!cv.is_const()) {
          ok = false;
          break;
        }
        const ValueFacts& src = cv.value ? x : y;
        v.values.push_back(src.values[src.values.size() == 1 ? 0 : i]);
      }
      v.has_values = ok;
      if (!ok) v.values.clear();
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_cast(Ctx& c) {
  ValueFacts v = c.input(0);
  v.kind = Kind::kTensor;
  v.dtype = c.n->op_type == "CastLike" ? c.input(1).dtype : static_cast<DataType>(c.ai("to", 0));
  if (!is_int_dtype(v.dtype) || v.dtype == DataType::kBool) {
    v.has_values = false;
    v.values.clear();
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_matmul(Ctx& c) {
  const ValueFacts &a = c.input(0), &b = c.input(1);
  DataType dt = a.dtype;
  if (c.n->op_type == "MatMulInteger") dt = DataType::kInt32;
  if (c.n->op_type == "QLinearMatMul") dt = c.input(7).dtype;
  const ValueFacts& bb = c.n->op_type == "QLinearMatMul" ? c.input(3) : b;
  if (!a.has_shape || !bb.has_shape || a.dims.empty() || bb.dims.empty()) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  std::vector<SymDim> ad = a.dims, bd = bb.dims;
  bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), SymDim::c(1));
  if (b1) bd.push_back(SymDim::c(1));
  SymDim k;
  NXRT_RETURN_IF_ERROR(c.unify(ad.back(), bd[bd.size() - 2],
                               "MatMul inner dims differ: " + c.shape_str(a) + " x " + c.shape_str(bb), &k));
  ValueFacts ab = tensor(dt, std::vector<SymDim>(ad.begin(), ad.end() - 2));
  ValueFacts bbt = tensor(dt, std::vector<SymDim>(bd.begin(), bd.end() - 2));
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {&ab, &bbt}, &known, &dims));
  if (!a1) dims.push_back(ad[ad.size() - 2]);
  if (!b1) dims.push_back(bd.back());
  c.set(0, tensor(dt, dims));
  return Status::Ok();
}

Status op_gemm(Ctx& c) {
  const ValueFacts &a = c.input(0), &b = c.input(1);
  if (!a.has_shape || !b.has_shape || a.dims.size() != 2 || b.dims.size() != 2) {
    c.set(0, tensor_unknown_rank(a.dtype));
    return Status::Ok();
  }
  bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
  SymDim m = a.dims[ta ? 1 : 0], ka = a.dims[ta ? 0 : 1], kb = b.dims[tb ? 1 : 0], n = b.dims[tb ? 0 : 1];
  SymDim k;
  NXRT_RETURN_IF_ERROR(c.unify(ka, kb, "Gemm inner dims differ: " + c.shape_str(a) + " x " + c.shape_str(b), &k));
  ValueFacts y = tensor(a.dtype, {m, n});
  if (c.has(2) && c.input(2).has_shape) {
    bool known;
    std::vector<SymDim> dims;
    NXRT_RETURN_IF_ERROR(broadcast(c, {&y, c.in[2]}, &known, &dims));
    if (known && dims.size() == 2) y.dims = dims;
  }
  c.set(0, std::move(y));
  return Status::Ok();
}

// Conv-style spatial output size.
SymDim conv_out(SymbolTable& S, SymDim in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil_mode,
                const std::string& auto_pad) {
  int64_t ek = (k - 1) * d + 1;
  if (in.is_const()) {  // the kernels' rule (shape/window_size.h)
    const WindowAutoPad ap = auto_pad == "SAME_UPPER"   ? WindowAutoPad::kSameUpper
                             : auto_pad == "SAME_LOWER" ? WindowAutoPad::kSameLower
                             : auto_pad == "VALID"      ? WindowAutoPad::kValid
                                                        : WindowAutoPad::kNotSet;
    return SymDim::c(window_axis(in.value, k, s, d, pb, pe, ceil_mode, ap).out);
  }
  // A symbolic size: the same rule as an expression.
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return ceildiv(S, in, SymDim::c(s));
  if (auto_pad == "VALID") { pb = pe = 0; }
  SymDim x = add(S, {in, SymDim::c(pb + pe - ek)});
  if (s == 1) return add(S, {x, SymDim::c(1)});
  return add(S, {ceil_mode ? ceildiv(S, x, SymDim::c(s)) : floordiv(S, x, SymDim::c(s)), SymDim::c(1)});
}

Status op_conv_like(Ctx& c) {
  const std::string& op = c.n->op_type;
  const ValueFacts& x = c.input(0);
  bool is_pool = op.find("Pool") != std::string::npos;
  bool qlinear = op == "QLinearConv";
  const ValueFacts& w = c.input(qlinear ? 3 : 1);
  DataType dt = x.dtype;
  if (op == "ConvInteger") dt = DataType::kInt32;
  if (qlinear) dt = c.input(7).dtype;
  if (!x.has_shape || x.dims.size() < 2) {
    c.set(0, tensor_unknown_rank(dt));
    if (c.nout() > 1) c.set(1, tensor_unknown_rank(DataType::kInt64));
    return Status::Ok();
  }
  size_t ns = x.dims.size() - 2;
  std::vector<int64_t> kernel;
  if (auto ks = c.aints("kernel_shape")) kernel = *ks;
  if (kernel.empty() && !is_pool && w.has_shape && w.dims.size() == ns + 2) {
    for (size_t i = 0; i < ns; ++i) {
      if (!w.dims[i + 2].is_const()) {
        kernel.clear();
        break;
      }
      kernel.push_back(w.dims[i + 2].value);
    }
  }
  std::vector<SymDim> dims = {x.dims[0]};
  if (is_pool) {
    dims.push_back(x.dims[1]);
  } else if (op == "ConvTranspose") {
    if (w.has_shape && w.dims.size() >= 2) {
      dims.push_back(mul(c.S, {w.dims[1], SymDim::c(c.ai("group", 1))}));
    } else {
      dims.push_back(SymDim::s(c.S.mint()));
    }
  } else {
    dims.push_back(w.has_shape && !w.dims.empty() ? w.dims[0] : SymDim::s(c.S.mint()));
    if (w.has_shape && w.dims.size() == ns + 2) {
      SymDim cin = mul(c.S, {w.dims[1], SymDim::c(c.ai("group", 1))});
      SymDim r;
      NXRT_RETURN_IF_ERROR(c.unify(x.dims[1], cin, "input channels " + c.shape_str(x) + " do not match weights " +
                                                       c.shape_str(w) + " with group " + std::to_string(c.ai("group", 1)),
                                   &r));
    }
  }
  if (kernel.size() != ns) {
    for (size_t i = 0; i < ns; ++i) dims.push_back(SymDim::s(c.S.mint()));
  } else {
    std::vector<int64_t> strides = c.aints("strides").value_or(std::vector<int64_t>(ns, 1));
    std::vector<int64_t> dil = c.aints("dilations").value_or(std::vector<int64_t>(ns, 1));
    std::vector<int64_t> pads = c.aints("pads").value_or(std::vector<int64_t>(2 * ns, 0));
    if (strides.size() != ns) strides.assign(ns, 1);
    if (dil.size() != ns) dil.assign(ns, 1);
    if (pads.size() != 2 * ns) pads.assign(2 * ns, 0);
    std::string auto_pad = c.as("auto_pad", "NOTSET");
    bool ceil_mode = c.ai("ceil_mode", 0) != 0;
    if (op == "ConvTranspose") {
      auto out_shape = c.aints("output_shape");
      std::vector<int64_t> opad = c.aints("output_padding").value_or(std::vector<int64_t>(ns, 0));
      if (opad.size() != ns) opad.assign(ns, 0);
      for (size_t i = 0; i < ns; ++i) {
        if (out_shape && out_shape->size() >= ns) {
          dims.push_back(SymDim::c((*out_shape)[out_shape->size() - ns + i]));
          continue;
        }
        SymDim in = x.dims[i + 2];
        if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
          dims.push_back(mul(c.S, {in, SymDim::c(strides[i])}));
          continue;
        }
        if (auto_pad == "VALID") pads[i] = pads[i + ns] = 0;
        int64_t ek = (kernel[i] - 1) * dil[i] + 1;
        SymDim t = mul(c.S, {add(c.S, {in, SymDim::c(-1)}), SymDim::c(strides[i])});
        dims.push_back(add(c.S, {t, SymDim::c(opad[i] + ek - pads[i] - pads[i + ns])}));
      }
    } else {
      for (size_t i = 0; i < ns; ++i) {
        dims.push_back(conv_out(c.S, x.dims[i + 2], kernel[i], strides[i], dil[i], pads[i], pads[i + ns],
                                is_pool && ceil_mode, auto_pad));
      }
    }
  }
  c.set(0, tensor(dt, dims));
  if (c.nout() > 1) c.set(1, tensor(DataType::kInt64, dims));
  return Status::Ok();
}

Status op_global_pool(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape || x.dims.size() < 2) return same_as_input0(c);
  std::vector<SymDim> dims = {x.dims[0], x.dims[1]};
  for (size_t i = 2; i < x.dims.size(); ++i) dims.push_back(SymDim::c(1));
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

// nxrt::FusedConv (X, W, B?, Z?): the conv's output; with a residual Z, that shape only when Z has
// exactly it (a broadcasting Z is left unknown rather than guessed).
Status op_fused_conv(Ctx& c) {
  NXRT_RETURN_IF_ERROR(op_conv_like(c));
  if (c.n->inputs.size() > 3 && !c.n->inputs[3].empty()) {
    const ValueFacts& z = c.input(3);
    const ValueFacts y = c.out.empty() ? ValueFacts{} : c.out[0];
    bool same = y.has_shape && z.has_shape && y.dims.size() == z.dims.size();
    for (size_t i = 0; same && i < y.dims.size(); ++i) same = c.S.same(y.dims[i], z.dims[i]);
    if (!same) c.set(0, tensor_unknown_rank(y.dtype));
  }
  return Status::Ok();
}

Status op_batchnorm(Ctx& c) {
  NXRT_RETURN_IF_ERROR(same_as_input0(c));
  const ValueFacts& x = c.input(0);
  SymDim ch = x.has_shape && x.dims.size() >= 2 ? x.dims[1] : SymDim::s(c.S.mint());
  for (size_t i = 1; i < c.nout(); ++i) {
    DataType dt = c.input(std::min<size_t>(i + 2, 4)).dtype;
    c.set(i, tensor(dt == DataType::kUndefined ? x.dtype : dt, {ch}));
  }
  return Status::Ok();
}

// LayerNormalization-like: Y like X; statistics outputs keep dims before `axis` and have 1 after.
Status norm_with_stats(Ctx& c, int64_t axis, size_t first_stat, size_t last_stat, DataType stat_dt) {
  const ValueFacts& x = c.input(0);
  ValueFacts y = x;
  y.kind = Kind::kTensor;
  y.has_values = false;
  y.values.clear();
  c.set(0, y);
  for (size_t i = 1; i < c.nout(); ++i) {
    if (i < first_stat || i > last_stat) {
      c.set(i, y);  // e.g. input_skip_bias_sum
      continue;
    }
    if (!x.has_shape) {
      c.set(i, tensor_unknown_rank(stat_dt));
      continue;
    }
    int64_t r = static_cast<int64_t>(x.dims.size());
    int64_t a = axis;
    if (!norm_axis(a, r)) {
      c.set(i, tensor_unknown_rank(stat_dt));
      continue;
    }
    std::vector<SymDim> d(x.dims.begin(), x.dims.begin() + a);
    for (int64_t j = a; j < r; ++j) d.push_back(SymDim::c(1));
    c.set(i, tensor(stat_dt, d));
  }
  return Status::Ok();
}

Status op_layernorm(Ctx& c) {
  const std::string& op = c.n->op_type;
  DataType xd = c.input(0).dtype;
  if (op == "LayerNormalization") {
    int64_t stash = c.ai("stash_type", 1);
    return norm_with_stats(c, c.ai("axis", -1), 1, 2, static_cast<DataType>(stash == 0 ? int64_t(xd) : stash));
  }
  if (op == "SimplifiedLayerNormalization") return norm_with_stats(c, c.ai("axis", -1), 1, 1, DataType::kFloat);
  // Skip(Simplified)LayerNormalization: output, mean, inv_std_var, input_skip_bias_sum.
  // (ORT: mean/inv_std_var are float with the leading dims.)
  if (op == "SkipSimplifiedLayerNormalization" || op == "SkipLayerNormalization") {
    return norm_with_stats(c, -1, 1, 2, DataType::kFloat);
  }
  return same_as_input0(c);
}

Status op_shape(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) {
    c.set(0, tensor(DataType::kInt64, {SymDim::s(c.S.mint())}));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t start = c.opset >= 15 ? c.ai("start", 0) : 0, end = c.opset >= 15 ? c.ai("end", r) : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<SymDim> vals;
  for (int64_t i = start; i < end; ++i) vals.push_back(x.dims[static_cast<size_t>(i)]);
  ValueFacts v = tensor(DataType::kInt64, {SymDim::c(static_cast<int64_t>(vals.size()))});
  if (vals.size() <= kMaxValues) {
    v.has_values = true;
    v.values = std::move(vals);
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_size(Ctx& c) {
  ValueFacts v = tensor(DataType::kInt64, {});
  const ValueFacts& x = c.input(0);
  v.has_values = true;
  v.values = {x.has_shape ? mul(c.S, x.dims) : SymDim::s(c.S.mint())};
  c.set(0, std::move(v));
  return Status::Ok();
}

// Constant / ConstantOfShape helpers
Status op_constant(Ctx& c) {
  for (const auto& a : c.n->attributes) {
    if (a.name == "value" && a.type == ir::Attribute::Type::kTensor) {
      c.set(0, from_tensor(a.t));
      return Status::Ok();
    }
    if ((a.name == "value" || a.name == "sparse_value") && a.t.defined()) {
      c.set(0, from_tensor(a.t));
      return Status::Ok();
    }
    if (a.name == "value_float") {
      c.set(0, tensor(DataType::kFloat, {}));
      return Status::Ok();
    }
    if (a.name == "value_floats") {
      c.set(0, tensor(DataType::kFloat, {SymDim::c(static_cast<int64_t>(a.floats.size()))}));
      return Status::Ok();
    }
    if (a.name == "value_int" || a.name == "value_ints") {
      ValueFacts v = tensor(DataType::kInt64, {});
      std::vector<int64_t> vals = a.name == "value_int" ? std::vector<int64_t>{a.i} : a.ints;
      if (a.name == "value_ints") v.dims = {SymDim::c(static_cast<int64_t>(vals.size()))};
      if (vals.size() <= kMaxValues) {
        v.has_values = true;
        for (int64_t x : vals) v.values.push_back(SymDim::c(x));
      }
      c.set(0, std::move(v));
      return Status::Ok();
    }
    if (a.name == "value_string") {
      c.set(0, tensor(DataType::kString, {}));
      return Status::Ok();
    }
    if (a.name == "value_strings") {
      c.set(0, tensor(DataType::kString, {SymDim::c(static_cast<int64_t>(a.strings.size()))}));
      return Status::Ok();
    }
  }
  c.set(0, ValueFacts{});
  return Status::Ok();
}

// The dims given by a 1-D shape tensor input: its tracked values, or minted symbols when only its
// length is known; nullopt when even the rank is unknown.
std::optional<std::vector<SymDim>> shape_from_input(Ctx& c, size_t i) {
  const ValueFacts& s = c.input(i);
  if (s.has_values) return s.values;
  if (s.has_shape && s.dims.size() == 1 && s.dims[0].is_const()) {
    std::vector<SymDim> d;
    for (int64_t j = 0; j < s.dims[0].value; ++j) d.push_back(SymDim::s(c.S.mint()));
    return d;
  }
  return std::nullopt;
}

Status op_constant_of_shape(Ctx& c) {
  DataType dt = DataType::kFloat;
  const ir::Attribute* a = c.attr("value");
  std::optional<int64_t> fill;
  if (a && a->t.defined()) {
    dt = a->t.dtype();
    if (a->t.numel() == 1) fill = tensor_int_at(a->t, 0);
  }
  auto dims = shape_from_input(c, 0);
  if (!dims) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  ValueFacts v = tensor(dt, *dims);
  if (fill && dims->size() <= 1 && v.is_static()) {
    int64_t n = dims->empty() ? 1 : (*dims)[0].value;
    if (n >= 0 && n <= static_cast<int64_t>(kMaxValues)) {
      v.has_values = true;
      v.values.assign(static_cast<size_t>(n), SymDim::c(*fill));
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_reshape(Ctx& c) {
  const ValueFacts& x = c.input(0);
  std::optional<std::vector<SymDim>> target;
  if (c.opset < 5) {
    if (auto s = c.aints("shape")) {
      target.emplace();
      for (int64_t v : *s) target->push_back(SymDim::c(v));
    }
  } else {
    target = shape_from_input(c, 1);
  }
  if (!target) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  bool allowzero = c.opset >= 14 && c.ai("allowzero", 0) != 0;
  std::vector<SymDim> out = *target;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    SymDim& d = out[i];
    if (!d.is_const()) continue;
    if (d.value == 0 && !allowzero) {
      if (x.has_shape && i < x.dims.size()) {
        d = x.dims[i];
      } else if (x.has_shape) {
        return c.error("shape " + c.S.dims_string(*target) + " copies dim " + std::to_string(i) + " of input " +
                       c.shape_str(x));
      } else {
        d = SymDim::s(c.S.mint());
      }
    } else if (d.value == -1) {
      if (infer_at >= 0) return c.error("shape " + c.S.dims_string(*target) + " has more than one -1");
      infer_at = static_cast<int>(i);
    } else if (d.value < -1) {
      return c.error("shape " + c.S.dims_string(*target) + " has a negative dim");
    }
  }
  if (infer_at >= 0) {
    std::vector<SymDim> known;
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) != infer_at) known.push_back(out[i]);
    }
    if (!x.has_shape) {
      out[static_cast<size_t>(infer_at)] = SymDim::s(c.S.mint());
    } else {
      auto r = divide(c.S, x.dims, known);
      if (!r) {
        return c.error("cannot reshape " + c.shape_str(x) + " to " + c.S.dims_string(*target));
      }
      out[static_cast<size_t>(infer_at)] = *r;
    }
  } else if (x.is_static()) {
    bool all_const = true;
    for (const auto& d : out) all_const = all_const && d.is_const();
    if (all_const) {
      int64_t a = 1, b = 1;
      for (const auto& d : x.dims) a *= d.value;
      for (const auto& d : out) b *= d.value;
      if (a != b) return c.error("cannot reshape " + c.shape_str(x) + " to " + c.S.dims_string(*target));
    }
  }
  ValueFacts v = tensor(x.dtype, out);
  if (x.has_values) {
    v.has_values = true;
    v.values = x.values;
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_flatten(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) {
    c.set(0, tensor(x.dtype, {SymDim::s(c.S.mint()), SymDim::s(c.S.mint())}));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return c.error("axis " + std::to_string(c.ai("axis", 1)) + " out of range for " + c.shape_str(x));
  std::vector<SymDim> a(x.dims.begin(), x.dims.begin() + axis), b(x.dims.begin() + axis, x.dims.end());
  ValueFacts v = tensor(x.dtype, {mul(c.S, a), mul(c.S, b)});
  c.set(0, std::move(v));
  return Status::Ok();
}

std::optional<std::vector<int64_t>> axes_of(Ctx& c, size_t input_index, int64_t input_since) {
  if (c.opset >= input_since) {
    if (!c.has(input_index)) return std::vector<int64_t>{};
    return c.const_ints(input_index);
  }
  return c.aints("axes").value_or(std::vector<int64_t>{});
}

Status op_squeeze(Ctx& c) {
  const ValueFacts& x = c.input(0);
  auto axes = axes_of(c, 1, 13);
  bool axes_given = c.opset >= 13 ? c.has(1) : c.attr("axes") != nullptr;
  if (!x.has_shape || !axes) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::vector<bool> drop(x.dims.size(), false);
  if (!axes_given || axes->empty()) {
    for (size_t i = 0; i < x.dims.size(); ++i) {
      if (!x.dims[i].is_const()) {
        c.set(0, tensor_unknown_rank(x.dtype));
        return Status::Ok();
      }
      drop[i] = x.dims[i].value == 1;
    }
  } else {
    for (int64_t a : *axes) {
      if (!norm_axis(a, r)) return c.error("axis " + std::to_string(a) + " out of range for " + c.shape_str(x));
      SymDim d = x.dims[static_cast<size_t>(a)];
      if (d.is_const() && d.value != 1) {
        return c.error("cannot squeeze axis " + std::to_string(a) + " of " + c.shape_str(x));
      }
      drop[static_cast<size_t>(a)] = true;
    }
  }
  std::vector<SymDim> out;
  for (size_t i = 0; i < x.dims.size(); ++i) {
    if (!drop[i]) out.push_back(x.dims[i]);
  }
  ValueFacts v = tensor(x.dtype, out);
  v.has_values = x.has_values;
  v.values = x.values;
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_unsqueeze(Ctx& c) {
  const ValueFacts& x = c.input(0);
  auto axes = axes_of(c, 1, 13);
  if (x.has_shape && !axes && c.input(1).has_shape && c.input(1).dims.size() == 1 && c.input(1).dims[0].is_const()) {
    // Axes not known, their count is: the rank is.
    std::vector<SymDim> dims;
    for (size_t i = 0; i < x.dims.size() + static_cast<size_t>(c.input(1).dims[0].value); ++i) {
      dims.push_back(SymDim::s(c.S.mint()));
    }
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  if (!x.has_shape || !axes) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size() + axes->size());
  std::vector<bool> ins(static_cast<size_t>(r), false);
  for (int64_t a : *axes) {
    if (!norm_axis(a, r) || ins[static_cast<size_t>(a)]) {
      return c.error("bad axes for unsqueezing " + c.shape_str(x));
    }
    ins[static_cast<size_t>(a)] = true;
  }
  std::vector<SymDim> out;
  size_t j = 0;
  for (size_t i = 0; i < ins.size(); ++i) out.push_back(ins[i] ? SymDim::c(1) : x.dims[j++]);
  ValueFacts v = tensor(x.dtype, out);
  v.has_values = x.has_values;
  v.values = x.values;
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_transpose(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  size_t r = x.dims.size();
  std::vector<int64_t> perm;
  if (auto p = c.aints("perm")) {
    perm = *p;
  } else {
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  }
  if (perm.size() != r) return c.error("perm has " + std::to_string(perm.size()) + " entries for " + c.shape_str(x));
  std::vector<SymDim> out;
  for (int64_t p : perm) {
    if (!norm_axis(p, static_cast<int64_t>(r))) return c.error("perm entry out of range for " + c.shape_str(x));
    out.push_back(x.dims[static_cast<size_t>(p)]);
  }
  c.set(0, tensor(x.dtype, out));
  return Status::Ok();
}

Status op_concat(Ctx& c) {
  DataType dt = DataType::kUndefined;
  const ValueFacts* first = nullptr;
  bool all_known = true;
  for (size_t i = 0; i < c.nin(); ++i) {
    if (!c.has(i)) continue;
    if (dt == DataType::kUndefined) dt = c.input(i).dtype;
    if (!c.input(i).has_shape) {
      all_known = false;
    } else if (!first) {
      first = c.in[i];
    }
  }
  if (!first) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(first->dims.size());
  int64_t axis = c.ai("axis", c.opset < 4 ? 1 : 0);
  if (!norm_axis(axis, r)) return c.error("axis " + std::to_string(axis) + " out of range for " + c.shape_str(*first));
  std::vector<SymDim> out = first->dims;
  std::vector<SymDim> terms;
  for (size_t i = 0; i < c.nin(); ++i) {
    if (!c.has(i) || !c.input(i).has_shape) continue;
    const ValueFacts& x = c.input(i);
    if (static_cast<int64_t>(x.dims.size()) != r) {
      return c.error("inputs have ranks " + std::to_string(r) + " and " + std::to_string(x.dims.size()) + ": " +
                     c.shape_str(*first) + " and " + c.shape_str(x));
    }
    for (int64_t j = 0; j < r; ++j) {
      if (j == axis) continue;
      SymDim res;
      NXRT_RETURN_IF_ERROR(c.unify(out[static_cast<size_t>(j)], x.dims[static_cast<size_t>(j)],
                                   "inputs differ off the concat axis " + std::to_string(axis) + ": " +
                                       c.shape_str(*first) + " and " + c.shape_str(x),
                                   &res));
      out[static_cast<size_t>(j)] = res;
    }
    terms.push_back(x.dims[static_cast<size_t>(axis)]);
  }
  out[static_cast<size_t>(axis)] = all_known ? add(c.S, terms) : SymDim::s(c.S.mint());
  ValueFacts v = tensor(dt, out);
  if (r == 1) {
    bool vals = true;
    std::vector<SymDim> all;
    for (size_t i = 0; i < c.nin() && vals; ++i) {
      if (!c.has(i)) continue;
      vals = c.input(i).has_values;
      if (vals) all.insert(all.end(), c.input(i).values.begin(), c.input(i).values.end());
    }
    if (vals && all.size() <= kMaxValues) {
      v.has_values = true;
      v.values = std::move(all);
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_split(Ctx& c) {
  const ValueFacts& x = c.input(0);
  size_t n = c.nout();
  if (!x.has_shape) {
    for (size_t i = 0; i < n; ++i) c.set(i, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", 0);
  if (!norm_axis(axis, r)) return c.error("axis out of range for " + c.shape_str(x));
  std::optional<std::vector<int64_t>> sizes;
  bool sizes_given = false;
  if (c.opset >= 13) {
    if (c.has(1)) {
      sizes_given = true;
      sizes = c.const_ints(1);
    }
  } else if (c.attr("split")) {
    sizes_given = true;
    sizes = c.aints("split");
  } else if (c.opset < 2 && c.has(1)) {
    sizes_given = true;
    sizes = c.const_ints(1);
  }
  SymDim d = x.dims[static_cast<size_t>(axis)];
  std::vector<SymDim> parts;
  if (sizes_given) {
    if (sizes) {
      for (int64_t s : *sizes) parts.push_back(SymDim::c(s));
      if (d.is_const()) {
        int64_t sum = 0;
        for (int64_t s : *sizes) sum += s;
        if (sum != d.value) {
          return c.error("split sizes sum to " + std::to_string(sum) + " but the axis of " + c.shape_str(x) +
                         " is " + std::to_string(d.value));
        }
      }
    } else {
      for (size_t i = 0; i < n; ++i) parts.push_back(SymDim::s(c.S.mint()));
    }
  } else {
    int64_t k = c.opset >= 18 && c.attr("num_outputs") ? c.ai("num_outputs", static_cast<int64_t>(n))
                                                      : static_cast<int64_t>(n);
    if (k <= 0) return c.error("num_outputs must be positive");
    if (d.is_const()) {
      int64_t each = c.opset >= 18 ? -floordiv_i(-d.value, k) : d.value / k;
      if (c.opset < 18 && d.value % k != 0) {
        return c.error("axis of " + c.shape_str(x) + " does not split evenly into " + std::to_string(k));
      }
      for (int64_t i = 0; i < k; ++i) {
        parts.push_back(SymDim::c(std::max<int64_t>(0, std::min(each, d.value - i * each))));
      }
    } else {
      SymDim each = c.opset >= 18 ? ceildiv(c.S, d, SymDim::c(k)) : floordiv(c.S, d, SymDim::c(k));
      for (int64_t i = 0; i < k; ++i) parts.push_back(i + 1 < k || c.opset < 18 ? each : SymDim::s(c.S.mint()));
      if (c.opset >= 18 && k > 1 && !parts.empty()) parts.back() = sub(c.S, d, mul(c.S, {each, SymDim::c(k - 1)}));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    std::vector<SymDim> dims = x.dims;
    dims[static_cast<size_t>(axis)] = i < parts.size() ? parts[i] : SymDim::s(c.S.mint());
    c.set(i, tensor(x.dtype, dims));
  }
  return Status::Ok();
}

// Slice length for a constant dim (ONNX clamping rules).
int64_t slice_len(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (step == 0) return 0;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start > end ? (start - end - step - 1) / (-step) : 0;
}

Status op_slice(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.aints("starts");
    ends = c.aints("ends");
    axes = c.aints("axes");
  } else {
    starts = c.const_ints(1);
    ends = c.const_ints(2);
    if (c.has(3)) axes = c.const_ints(3);
    if (c.has(4)) steps = c.const_ints(4);
    if ((c.has(3) && !axes) || (c.has(4) && !steps)) starts.reset();
  }
  if (!starts || !ends || starts->size() != ends->size()) {
    // Unknown bounds: the rank stays, the sliced extents are unknown.
    std::vector<SymDim> dims;
    std::vector<bool> touched(static_cast<size_t>(r), axes.has_value() ? false : true);
    if (axes) {
      for (int64_t a : *axes) {
        if (norm_axis(a, r)) touched[static_cast<size_t>(a)] = true;
      }
    }
    for (int64_t i = 0; i < r; ++i) dims.push_back(touched[static_cast<size_t>(i)] ? SymDim::s(c.S.mint()) : x.dims[static_cast<size_t>(i)]);
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps) steps = std::vector<int64_t>(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size()) return c.error("starts/ends/axes/steps lengths differ");
  std::vector<SymDim> dims = x.dims;
  std::optional<std::vector<SymDim>> vals;
  if (x.has_values && r <= 1) vals = x.values;
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t a = (*axes)[i];
    if (!norm_axis(a, r)) return c.error("axis " + std::to_string((*axes)[i]) + " out of range for " + c.shape_str(x));
    int64_t s = (*starts)[i], e = (*ends)[i], st = (*steps)[i];
    if (st == 0) return c.error("step is 0");
    SymDim d = x.dims[static_cast<size_t>(a)];
    if (d.is_const()) {
      dims[static_cast<size_t>(a)] = SymDim::c(slice_len(d.value, s, e, st));
      if (vals && static_cast<int64_t>(vals->size()) == d.value) {
        std::vector<SymDim> nv;
        int64_t n = d.value, b = s < 0 ? s + n : s;
        b = st > 0 ? std::clamp<int64_t>(b, 0, n) : std::clamp<int64_t>(b, 0, n - 1);
        for (int64_t k = 0, len = slice_len(n, s, e, st); k < len; ++k) nv.push_back((*vals)[static_cast<size_t>(b + k * st)]);
        vals = std::move(nv);
      } else {
        vals.reset();
      }
      continue;
    }
    vals.reset();
    if (st == 1 && s >= 0 && e >= kBig / 4) {
      dims[static_cast<size_t>(a)] = sub(c.S, d, SymDim::c(s));
    } else if (st == 1 && s == 0 && e >= 0) {
      dims[static_cast<size_t>(a)] = fn(c.S, "min", {d, SymDim::c(e)});
    } else {
      dims[static_cast<size_t>(a)] = fn(c.S, "slice", {d, SymDim::c(s), SymDim::c(std::min(e, kBig)), SymDim::c(st)});
    }
  }
  ValueFacts v = tensor(x.dtype, dims);
  if (vals) {
    v.has_values = true;
    v.values = std::move(*vals);
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_gather(Ctx& c) {
  const ValueFacts &x = c.input(0), &idx = c.input(1);
  if (!x.has_shape || !idx.has_shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", 0);
  if (!norm_axis(axis, r)) return c.error("axis out of range for " + c.shape_str(x));
  std::vector<SymDim> out(x.dims.begin(), x.dims.begin() + axis);
  out.insert(out.end(), idx.dims.begin(), idx.dims.end());
  out.insert(out.end(), x.dims.begin() + axis + 1, x.dims.end());
  ValueFacts v = tensor(x.dtype, out);
  if (x.has_values && r == 1) {
    if (auto ids = c.const_ints(1)) {
      int64_t n = static_cast<int64_t>(x.values.size());
      v.has_values = true;
      for (int64_t i : *ids) {
        if (i < 0) i += n;
        if (i < 0 || i >= n) return c.error("index out of range for " + c.shape_str(x));
        v.values.push_back(x.values[static_cast<size_t>(i)]);
      }
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_gather_elements(Ctx& c) {
  ValueFacts v = c.input(1);
  v.kind = Kind::kTensor;
  v.dtype = c.input(0).dtype;
  v.has_values = false;
  v.values.clear();
  c.set(0, v);
  return Status::Ok();
}

Status op_gather_nd(Ctx& c) {
  const ValueFacts &x = c.input(0), &idx = c.input(1);
  int64_t b = c.ai("batch_dims", 0);
  if (!x.has_shape || !idx.has_shape || idx.dims.empty() || !idx.dims.back().is_const()) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t k = idx.dims.back().value;
  if (b + k > static_cast<int64_t>(x.dims.size())) return c.error("indices " + c.shape_str(idx) + " too deep for " + c.shape_str(x));
  std::vector<SymDim> out(idx.dims.begin(), idx.dims.end() - 1);
  out.insert(out.end(), x.dims.begin() + b + k, x.dims.end());
  c.set(0, tensor(x.dtype, out));
  return Status::Ok();
}

Status op_range(Ctx& c) {
  DataType dt = c.input(0).dtype;
  auto s = c.sym_scalar(0), l = c.sym_scalar(1), d = c.sym_scalar(2);
  SymDim n;
  if (s && l && d && s->is_const() && l->is_const() && d->is_const() && d->value != 0) {
    n = SymDim::c(std::max<int64_t>(0, -floordiv_i(-(l->value - s->value), d->value)));
  } else if (s && l && d && d->is_const() && d->value == 1) {
    n = sub(c.S, *l, *s);
  } else if (s && l && d) {
    n = fn(c.S, "range", {*s, *l, *d});
  } else {
    n = SymDim::s(c.S.mint());
  }
  ValueFacts v = tensor(dt, {n});
  if (n.is_const() && n.value <= static_cast<int64_t>(kMaxValues) && is_int_dtype(dt)) {
    v.has_values = true;
    for (int64_t i = 0; i < n.value; ++i) v.values.push_back(SymDim::c(s->value + i * d->value));
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_expand(Ctx& c) {
  const ValueFacts& x = c.input(0);
  auto shape = shape_from_input(c, 1);
  if (!shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  ValueFacts t = tensor(x.dtype, *shape);
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {&x, &t}, &known, &dims));
  c.set(0, known ? tensor(x.dtype, dims) : tensor_unknown_rank(x.dtype));
  return Status::Ok();
}

Status op_tile(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  std::vector<SymDim> dims = x.dims;
  const ValueFacts& rep = c.input(1);
  if (rep.has_values && rep.values.size() == dims.size()) {
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = mul(c.S, {dims[i], rep.values[i]});
  } else {
    for (auto& d : dims) d = SymDim::s(c.S.mint());
  }
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_reduce(Ctx& c) {
  const ValueFacts& x = c.input(0);
  const std::string& op = c.n->op_type;
  bool arg = op == "ArgMax" || op == "ArgMin";
  DataType dt = arg ? DataType::kInt64 : x.dtype;
  if (!x.has_shape) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  bool keep = c.ai("keepdims", 1) != 0;
  std::vector<int64_t> axes;
  if (arg) {
    axes = {c.ai("axis", 0)};
  } else {
    int64_t since = op == "ReduceSum" ? 13 : 18;
    auto a = axes_of(c, 1, since);
    if (!a) {
      // Axes unknown: with keepdims the rank stays; otherwise unknown.
      if (keep) {
        std::vector<SymDim> dims;
        for (int64_t i = 0; i < r; ++i) dims.push_back(SymDim::s(c.S.mint()));
        c.set(0, tensor(dt, dims));
      } else {
        c.set(0, tensor_unknown_rank(dt));
      }
      return Status::Ok();
    }
    axes = *a;
    if (axes.empty()) {
      if (c.opset >= since && c.ai("noop_with_empty_axes", 0) != 0) {
        c.set(0, tensor(dt, x.dims));
        return Status::Ok();
      }
      for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    }
  }
  std::vector<bool> red(static_cast<size_t>(r), false);
  for (int64_t a : axes) {
    if (!norm_axis(a, r)) return c.error("axis " + std::to_string(a) + " out of range for " + c.shape_str(x));
    red[static_cast<size_t>(a)] = true;
  }
  std::vector<SymDim> dims;
  for (int64_t i = 0; i < r; ++i) {
    if (!red[static_cast<size_t>(i)]) {
      dims.push_back(x.dims[static_cast<size_t>(i)]);
    } else if (keep) {
      dims.push_back(SymDim::c(1));
    }
  }
  ValueFacts v = tensor(dt, dims);
  if (op == "ReduceProd" && x.has_values && r == 1 && dims.size() <= 1) {
    v.has_values = true;
    v.values = {mul(c.S, x.values)};
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_topk(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
    c.set(1, tensor_unknown_rank(DataType::kInt64));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", -1);
  if (!norm_axis(axis, r)) return c.error("axis out of range for " + c.shape_str(x));
  SymDim k;
  if (c.opset < 10) {
    k = SymDim::c(c.ai("k", 0));
  } else if (auto s = c.sym_scalar(1)) {
    k = *s;
  } else {
    k = SymDim::s(c.S.mint());
  }
  std::vector<SymDim> dims = x.dims;
  dims[static_cast<size_t>(axis)] = k;
  c.set(0, tensor(x.dtype, dims));
  c.set(1, tensor(DataType::kInt64, dims));
  return Status::Ok();
}

Status op_nonzero(Ctx& c) {
  const ValueFacts& x = c.input(0);
  SymDim r = x.has_shape ? SymDim::c(static_cast<int64_t>(x.dims.size())) : SymDim::s(c.S.mint());
  c.set(0, tensor(DataType::kInt64, {r, SymDim::s(c.S.mint())}));
  return Status::Ok();
}

Status op_compress(Ctx& c) {
  const ValueFacts& x = c.input(0);
  const ir::Attribute* a = c.attr("axis");
  if (!a) {
    c.set(0, tensor(x.dtype, {SymDim::s(c.S.mint())}));
    return Status::Ok();
  }
  if (!x.has_shape) return same_as_input0(c);
  int64_t axis = a->i;
  if (!norm_axis(axis, static_cast<int64_t>(x.dims.size()))) return c.error("axis out of range for " + c.shape_str(x));
  std::vector<SymDim> dims = x.dims;
  dims[static_cast<size_t>(axis)] = SymDim::s(c.S.mint());
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_unique(Ctx& c) {
  const ValueFacts& x = c.input(0);
  SymDim u = SymDim::s(c.S.mint());
  const ir::Attribute* a = c.attr("axis");
  SymDim len = x.has_shape ? mul(c.S, x.dims) : SymDim::s(c.S.mint());
  if (!a) {
    c.set(0, tensor(x.dtype, {u}));
  } else if (!x.has_shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
  } else {
    int64_t axis = a->i;
    if (!norm_axis(axis, static_cast<int64_t>(x.dims.size()))) return c.error("axis out of range for " + c.shape_str(x));
    std::vector<SymDim> dims = x.dims;
    len = dims[static_cast<size_t>(axis)];
    dims[static_cast<size_t>(axis)] = u;
    c.set(0, tensor(x.dtype, dims));
  }
  c.set(1, tensor(DataType::kInt64, {u}));
  c.set(2, tensor(DataType::kInt64, {len}));
  c.set(3, tensor(DataType::kInt64, {u}));
  return Status::Ok();
}

Status op_dropout(Ctx& c) {
  NXRT_RETURN_IF_ERROR(same_as_input0(c));
  if (c.nout() > 1) {
    ValueFacts m = c.out[0];
    m.dtype = DataType::kBool;
    c.set(1, m);
  }
  return Status::Ok();
}

Status op_pad(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::optional<std::vector<SymDim>> pads;
  if (c.opset < 11) {
    if (auto p = c.aints(c.opset < 2 ? "paddings" : "pads")) {
      pads.emplace();
      for (int64_t v : *p) pads->push_back(SymDim::c(v));
    }
  } else if (c.has(1) && c.input(1).has_values) {
    pads = c.input(1).values;
  }
  std::vector<int64_t> axes;
  if (c.opset >= 18 && c.has(3)) {
    auto a = c.const_ints(3);
    if (!a) {
      std::vector<SymDim> dims;
      for (int64_t i = 0; i < r; ++i) dims.push_back(SymDim::s(c.S.mint()));
      c.set(0, tensor(x.dtype, dims));
      return Status::Ok();
    }
    axes = *a;
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  std::vector<SymDim> dims = x.dims;
  if (!pads || pads->size() != 2 * axes.size()) {
    for (int64_t a : axes) {
      if (norm_axis(a, r)) dims[static_cast<size_t>(a)] = SymDim::s(c.S.mint());
    }
  } else {
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i];
      if (!norm_axis(a, r)) return c.error("pad axis out of range for " + c.shape_str(x));
      dims[static_cast<size_t>(a)] = add(c.S, {dims[static_cast<size_t>(a)], (*pads)[i], (*pads)[i + axes.size()]});
    }
  }
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_resize(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::vector<SymDim> dims = x.dims;
  // sizes (opset >= 11: input 3) wins when given
  size_t sizes_idx = 3;
  bool odd_mode = c.as("keep_aspect_ratio_policy", "stretch") != "stretch" ||
                  c.as("coordinate_transformation_mode", "") == "tf_crop_and_resize";
  if (odd_mode) {
    for (auto& d : dims) d = SymDim::s(c.S.mint());
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  if (c.opset >= 11 && c.has(sizes_idx) && c.input(sizes_idx).has_values) {
    std::vector<int64_t> axes;
    if (auto a = c.aints("axes")) axes = *a;
    else for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    const auto& v = c.input(sizes_idx).values;
    if (v.size() == axes.size()) {
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i];
        if (norm_axis(a, r)) dims[static_cast<size_t>(a)] = v[i];
      }
      c.set(0, tensor(x.dtype, dims));
      return Status::Ok();
    }
  }
  // Scales: Resize input 2 (opset >= 11) or 1 (opset 10); Upsample input 1 (opset 9) or attr.
  std::vector<double> scales;
  bool upsample = c.n->op_type == "Upsample";
  size_t scales_idx = upsample || c.opset < 11 ? 1 : 2;
  if (upsample && c.opset < 9) {
    if (const ir::Attribute* a = c.attr("scales")) scales.assign(a->floats.begin(), a->floats.end());
  } else if (c.has(scales_idx)) {
    scales = c.input(scales_idx).float_values;
  }
  std::vector<int64_t> axes;
  if (!upsample && c.opset >= 18 && c.attr("axes")) {
    axes = *c.aints("axes");
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  if (scales.empty() || scales.size() != axes.size()) {
    for (auto& d : dims) d = SymDim::s(c.S.mint());
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!norm_axis(a, r)) return c.error("axis out of range for " + c.shape_str(x));
    SymDim& d = dims[static_cast<size_t>(a)];
    double sc = scales[i];
    if (d.is_const()) {
      d = SymDim::c(static_cast<int64_t>(std::floor(static_cast<double>(d.value) * sc + 1e-9)));
    } else if (sc == 1.0) {
      // unchanged
    } else if (sc == std::floor(sc) && sc > 0 && sc < 1e9) {
      d = mul(c.S, {d, SymDim::c(static_cast<int64_t>(sc))});
    } else {
      d = SymDim::s(c.S.mint());
    }
  }
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_depth_space(Ctx& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape || x.dims.size() != 4) return same_as_input0(c);
  int64_t b = c.ai("blocksize", 1);
  SymDim bb = SymDim::c(b * b);
  std::vector<SymDim> d = x.dims;
  if (c.n->op_type == "DepthToSpace") {
    d[1] = floordiv(c.S, d[1], bb);
    d[2] = mul(c.S, {d[2], SymDim::c(b)});
    d[3] = mul(c.S, {d[3], SymDim::c(b)});
  } else {
    d[1] = mul(c.S, {d[1], bb});
    d[2] = floordiv(c.S, d[2], SymDim::c(b));
    d[3] = floordiv(c.S, d[3], SymDim::c(b));
  }
  c.set(0, tensor(x.dtype, d));
  return Status::Ok();
}

Status op_onehot(Ctx& c) {
  const ValueFacts& idx = c.input(0);
  DataType dt = c.input(2).dtype;
  if (!idx.has_shape) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(idx.dims.size()) + 1;
  int64_t axis = c.ai("axis", -1);
  if (!norm_axis(axis, r)) return c.error("axis out of range");
  auto depth = c.sym_scalar(1);
  std::vector<SymDim> d = idx.dims;
  d.insert(d.begin() + axis, depth ? *depth : SymDim::s(c.S.mint()));
  c.set(0, tensor(dt, d));
  return Status::Ok();
}

// EyeLike, RandomNormalLike, RandomUniformLike: the input's shape, its dtype unless `dtype` says another,
// no known values.
Status op_like_input(Ctx& c) {
  ValueFacts v = c.input(0);
  v.kind = Kind::kTensor;
  v.has_values = false;
  v.values.clear();
  if (c.attr("dtype")) v.dtype = static_cast<DataType>(c.ai("dtype", 1));
  c.set(0, v);
  return Status::Ok();
}

Status op_quantize(Ctx& c) {
  ValueFacts v = c.input(0);
  v.kind = Kind::kTensor;
  v.has_values = false;
  v.values.clear();
  if (c.n->op_type == "QuantizeLinear") {
    v.dtype = c.has(2) ? c.input(2).dtype : DataType::kUInt8;
    if (c.attr("output_dtype") && c.ai("output_dtype", 0) != 0) v.dtype = static_cast<DataType>(c.ai("output_dtype", 0));
  } else {
    v.dtype = c.input(1).dtype;
    if (c.attr("output_dtype") && c.ai("output_dtype", 0) != 0) v.dtype = static_cast<DataType>(c.ai("output_dtype", 0));
  }
  c.set(0, v);
  return Status::Ok();
}

Status op_dyn_quant(Ctx& c) {
  ValueFacts v = c.input(0);
  v.kind = Kind::kTensor;
  v.dtype = DataType::kUInt8;
  c.set(0, v);
  c.set(1, tensor(DataType::kFloat, {}));
  c.set(2, tensor(DataType::kUInt8, {}));
  return Status::Ok();
}

Status op_rnn(Ctx& c) {
  const ValueFacts& x = c.input(0);
  const ValueFacts& w = c.input(1);
  DataType dt = x.dtype;
  int64_t hs = c.ai("hidden_size", -1);
  SymDim h = hs > 0 ? SymDim::c(hs) : SymDim::s(c.S.mint());
  SymDim dirs = w.has_shape && !w.dims.empty() ? w.dims[0] : SymDim::c(c.as("direction", "forward") == "bidirectional" ? 2 : 1);
  if (!x.has_shape || x.dims.size() != 3) {
    for (size_t i = 0; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  bool batch_first = c.ai("layout", 0) != 0;
  SymDim seq = x.dims[batch_first ? 1 : 0], b = x.dims[batch_first ? 0 : 1];
  c.set(0, batch_first ? tensor(dt, {b, seq, dirs, h}) : tensor(dt, {seq, dirs, b, h}));
  for (size_t i = 1; i < c.nout(); ++i) c.set(i, batch_first ? tensor(dt, {b, dirs, h}) : tensor(dt, {dirs, b, h}));
  return Status::Ok();
}

Status op_nms(Ctx& c) {
  c.set(0, tensor(DataType::kInt64, {SymDim::s(c.S.mint()), SymDim::c(3)}));
  return Status::Ok();
}

Status op_matmul_nbits(Ctx& c) {
  const ValueFacts& a = c.input(0);
  int64_t n = c.ai("N", -1);
  if (!a.has_shape || a.dims.empty()) {
    c.set(0, tensor_unknown_rank(a.dtype));
    return Status::Ok();
  }
  std::vector<SymDim> d = a.dims;
  int64_t k = c.ai("K", -1);
  if (k > 0) {
    SymDim r;
    NXRT_RETURN_IF_ERROR(c.unify(d.back(), SymDim::c(k), "input " + c.shape_str(a) + " does not end in K=" + std::to_string(k), &r));
  }
  d.back() = n > 0 ? SymDim::c(n) : SymDim::s(c.S.mint());
  c.set(0, tensor(a.dtype, d));
  return Status::Ok();
}

// ONNX Attention (opset 23): Q/K/V 4-D (B, heads, S, head) or 3-D (B, S, hidden).
Status op_attention(Ctx& c) {
  const ValueFacts &q = c.input(0), &k = c.input(1), &v = c.input(2);
  DataType dt = q.dtype;
  if (!q.has_shape || !k.has_shape || !v.has_shape || q.dims.size() != k.dims.size() || q.dims.size() != v.dims.size() ||
      (q.dims.size() != 3 && q.dims.size() != 4)) {
    for (size_t i = 0; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(i == 0 ? dt : dt));
    return Status::Ok();
  }
  SymDim b;
  NXRT_RETURN_IF_ERROR(c.unify(q.dims[0], k.dims[0], "batch of Q " + c.shape_str(q) + " and K " + c.shape_str(k) + " differ", &b));
  SymDim qs, kvs, qh, kvh, v_head, k_head;
  if (q.dims.size() == 4) {
    qh = q.dims[1];
    qs = q.dims[2];
    kvh = k.dims[1];
    kvs = k.dims[2];
    k_head = k.dims[3];
    v_head = v.dims[3];
  } else {
    qh = SymDim::c(c.ai("q_num_heads", 1));
    kvh = SymDim::c(c.ai("kv_num_heads", 1));
    qs = q.dims[1];
    kvs = k.dims[1];
    k_head = floordiv(c.S, k.dims[2], kvh);
    v_head = floordiv(c.S, v.dims[2], kvh);
  }
  SymDim total = kvs;
  if (c.has(4) && c.input(4).has_shape && c.input(4).dims.size() == 4) total = add(c.S, {c.input(4).dims[2], kvs});
  if (q.dims.size() == 4) {
    c.set(0, tensor(dt, {b, qh, qs, v_head}));
  } else {
    c.set(0, tensor(dt, {b, qs, mul(c.S, {qh, v_head})}));
  }
  if (c.nout() > 1) c.set(1, tensor(dt, {b, kvh, total, k_head}));
  if (c.nout() > 2) c.set(2, tensor(dt, {b, kvh, total, v_head}));
  if (c.nout() > 3) c.set(3, tensor(dt, {b, qh, qs, total}));
  return Status::Ok();
}

// com.microsoft GroupQueryAttention: query (B, S, hidden) or packed QKV; past_key (B, kv_heads, P, head).
Status op_gqa(Ctx& c) {
  const ValueFacts& q = c.input(0);
  DataType dt = q.dtype;
  int64_t nh = c.ai("num_heads", 0), kvh = c.ai("kv_num_heads", 0);
  if (!q.has_shape || q.dims.size() != 3 || nh <= 0 || kvh <= 0) {
    for (size_t i = 0; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  bool packed = !c.has(1) || (c.input(1).has_shape && c.input(1).dims.empty());
  SymDim hidden = q.dims[2];
  SymDim head = packed ? floordiv(c.S, hidden, SymDim::c(nh + 2 * kvh)) : floordiv(c.S, hidden, SymDim::c(nh));
  c.set(0, tensor(dt, {q.dims[0], q.dims[1], mul(c.S, {SymDim::c(nh), head})}));
  // present_* : (B, kv_heads, present_seq, head); with a past buffer its seq dim (shared buffer) or
  // past + new tokens; we take the past's when static (shared-buffer layout), else mint.
  SymDim present_seq = SymDim::s(c.S.mint());
  const ValueFacts& pk = c.input(3);
  if (pk.has_shape && pk.dims.size() == 4) {
    SymDim h;
    NXRT_RETURN_IF_ERROR(c.unify(pk.dims[3], head, "past_key " + c.shape_str(pk) + " head size differs from query " + c.shape_str(q), &h));
    head = h;
  }
  for (size_t i = 1; i < std::min<size_t>(c.nout(), 3); ++i) {
    c.set(i, tensor(dt, {q.dims[0], SymDim::c(kvh), present_seq, head}));
  }
  return Status::Ok();
}

// com.microsoft Attention (packed QKV weights): output (B, S, v_hidden).
Status op_ms_attention(Ctx& c) {
  const ValueFacts& x = c.input(0);
  const ValueFacts& w = c.input(1);
  if (!x.has_shape || x.dims.size() != 3) return same_as_input0(c);
  SymDim hidden = x.dims[2];
  if (auto hs = c.aints("qkv_hidden_sizes"); hs && hs->size() == 3) {
    hidden = SymDim::c((*hs)[2]);
  } else if (w.has_shape && w.dims.size() == 2) {
    hidden = floordiv(c.S, w.dims[1], SymDim::c(3));
  }
  c.set(0, tensor(x.dtype, {x.dims[0], x.dims[1], hidden}));
  for (size_t i = 1; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(x.dtype));
  return Status::Ok();
}

Status op_einsum(Ctx& c) {
  // Only the output rank is cheap to know; dims are matched by letter.
  std::string eq = c.as("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  DataType dt = c.input(0).dtype;
  if (arrow == std::string::npos || eq.find("...") != std::string::npos) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  std::map<char, SymDim> letter;
  std::string lhs = eq.substr(0, arrow);
  size_t term = 0, pos = 0;
  while (pos <= lhs.size()) {
    size_t comma = lhs.find(',', pos);
    std::string t = lhs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const ValueFacts& x = c.input(term);
    if (x.has_shape && x.dims.size() == t.size()) {
      for (size_t i = 0; i < t.size(); ++i) {
        auto it = letter.find(t[i]);
        if (it == letter.end()) {
          letter[t[i]] = x.dims[i];
        } else {
          SymDim r;
          // Broadcasting of 1 allowed.
          if (x.dims[i].is_const() && x.dims[i].value == 1) continue;
          if (it->second.is_const() && it->second.value == 1) {
            it->second = x.dims[i];
            continue;
          }
          NXRT_RETURN_IF_ERROR(c.unify(it->second, x.dims[i], "einsum dims for '" + std::string(1, t[i]) + "' differ", &r));
          it->second = r;
        }
      }
    }
    ++term;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::vector<SymDim> out;
  for (char ch : eq.substr(arrow + 2)) {
    auto it = letter.find(ch);
    out.push_back(it == letter.end() ? SymDim::s(c.S.mint()) : it->second);
  }
  c.set(0, tensor(dt, out));
  return Status::Ok();
}

Status op_random(Ctx& c) {
  DataType dt = static_cast<DataType>(c.ai("dtype", 1));
  if (auto s = c.aints("shape")) {
    std::vector<SymDim> d;
    for (int64_t v : *s) d.push_back(SymDim::c(v));
    c.set(0, tensor(dt, d));
  } else {
    c.set(0, tensor_unknown_rank(dt));
  }
  return Status::Ok();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Graph driver

namespace {

ValueFacts merge_branches(SymbolTable& S, const ValueFacts& a, const ValueFacts& b) {
  if (a.kind != b.kind) return ValueFacts{};
  ValueFacts r;
  r.kind = a.kind;
  r.dtype = a.dtype == b.dtype ? a.dtype : DataType::kUndefined;
  if (a.inner && b.inner) r.inner = std::make_shared<ValueFacts>(merge_branches(S, *a.inner, *b.inner));
  if (a.has_shape && b.has_shape && a.dims.size() == b.dims.size()) {
    r.has_shape = true;
    for (size_t i = 0; i < a.dims.size(); ++i) r.dims.push_back(S.same(a.dims[i], b.dims[i]) ? a.dims[i] : SymDim::s(S.mint()));
  }
  if (a.has_values && b.has_values && a.values.size() == b.values.size()) {
    bool eq = true;
    for (size_t i = 0; i < a.values.size(); ++i) eq = eq && S.same(a.values[i], b.values[i]);
    if (eq) {
      r.has_values = true;
      r.values = a.values;
    }
  }
  return r;
}

const std::unordered_map<std::string, ShapeFn>& shape_fns() {
  static const auto* m = [] {
    auto* r = new std::unordered_map<std::string, ShapeFn>();
    auto& t = *r;
    for (const char* op : {"Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sign", "Sin",
                           "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Erf",
                           "Tanh", "Sigmoid", "HardSigmoid", "HardSwish", "Relu", "LeakyRelu", "Elu", "Selu", "Celu",
                           "Gelu", "Mish", "Softplus", "Softsign", "ThresholdedRelu", "Clip", "Shrink", "Softmax",
                           "LogSoftmax", "Hardmax", "LpNormalization", "InstanceNormalization",
                           "MeanVarianceNormalization", "LRN", "BitwiseNot", "Trilu", "CumSum", "ReverseSequence",
                           "ScatterElements", "ScatterND", "Scatter", "RotaryEmbedding", "GroupNormalization",
                           "RMSNormalization", "Swish", "Affine", "ScaledTanh", "ImageScaler", "ParametricSoftplus",
                           "Crop", "Binarizer", "Det", "Bernoulli", "CenterCropPad", "Col2Im", "Upsample",
                           "TensorScatter", "Multinomial", "Not", "IsNaN", "IsInf", "BitCast", "SequenceEmpty"}) {
      t[op] = &same_as_input0;
    }
    // Ops whose output shape is not the input's: overridden below or left out.
    t.erase("Det");
    t.erase("Col2Im");
    t["Upsample"] = &op_resize;
    t.erase("Multinomial");
    t.erase("CenterCropPad");
    t.erase("Crop");
    t.erase("BitCast");
    t.erase("SequenceEmpty");
    t.erase("Binarizer");
    t.erase("Bernoulli");
    for (const char* op : {"SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceLength", "SequenceInsert",
                           "SequenceErase", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
                           "OptionalHasElement"}) {
      t[op] = &op_sequence;
    }
    t["Neg"] = &op_int_unary;
    t["Abs"] = &op_int_unary;
    t["CumProd"] = &same_as_input0;
    t["SoftmaxCrossEntropyLoss"] = &op_loss;
    t["NegativeLogLikelihoodLoss"] = &op_loss;
    t["Not"] = &op_bool_unary;
    t["IsNaN"] = &op_bool_unary;
    t["IsInf"] = &op_bool_unary;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "BitwiseAnd", "BitwiseOr",
                           "BitwiseXor", "PRelu", "Max", "Min", "Sum", "Mean", "Equal", "Less", "Greater",
                           "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor"}) {
      t[op] = &op_binary;
    }
    t["Where"] = &op_where;
    t["Cast"] = &op_cast;
    t["CastLike"] = &op_cast;
    t["MatMul"] = &op_matmul;
    t["MatMulInteger"] = &op_matmul;
    t["QLinearMatMul"] = &op_matmul;
    t["Gemm"] = &op_gemm;
    for (const char* op : {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "ConvInteger", "QLinearConv"}) {
      t[op] = &op_conv_like;
    }
    for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) t[op] = &op_global_pool;
    t["BatchNormalization"] = &op_batchnorm;
    t["LayerNormalization"] = &op_layernorm;
    t["Identity"] = &op_identity;
    t["Dropout"] = &op_dropout;
    t["Shape"] = &op_shape;
    t["Size"] = &op_size;
    t["Constant"] = &op_constant;
    t["ConstantOfShape"] = &op_constant_of_shape;
    t["Reshape"] = &op_reshape;
    t["Flatten"] = &op_flatten;
    t["Squeeze"] = &op_squeeze;
    t["Unsqueeze"] = &op_unsqueeze;
    t["Transpose"] = &op_transpose;
    t["Concat"] = &op_concat;
    t["Split"] = &op_split;
    t["Slice"] = &op_slice;
    t["Gather"] = &op_gather;
    t["GatherElements"] = &op_gather_elements;
    t["GatherND"] = &op_gather_nd;
    t["Range"] = &op_range;
    t["Expand"] = &op_expand;
    t["Tile"] = &op_tile;
    for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                           "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin"}) {
      t[op] = &op_reduce;
    }
    t["TopK"] = &op_topk;
    t["NonZero"] = &op_nonzero;
    t["Compress"] = &op_compress;
    t["Unique"] = &op_unique;
    t["Pad"] = &op_pad;
    t["Resize"] = &op_resize;
    t["DepthToSpace"] = &op_depth_space;
    t["SpaceToDepth"] = &op_depth_space;
    t["OneHot"] = &op_onehot;
    t["EyeLike"] = &op_like_input;
    t["QuantizeLinear"] = &op_quantize;
    t["DequantizeLinear"] = &op_quantize;
    t["DynamicQuantizeLinear"] = &op_dyn_quant;
    t["LSTM"] = &op_rnn;
    t["GRU"] = &op_rnn;
    t["RNN"] = &op_rnn;
    t["NonMaxSuppression"] = &op_nms;
    t["Attention"] = &op_attention;
    t["Einsum"] = &op_einsum;
    t["RandomNormal"] = &op_random;
    t["RandomUniform"] = &op_random;
    t["RandomNormalLike"] = &op_like_input;
    t["RandomUniformLike"] = &op_like_input;
    // com.microsoft
    t["com.microsoft::SimplifiedLayerNormalization"] = &op_layernorm;
    t["com.microsoft::SkipSimplifiedLayerNormalization"] = &op_layernorm;
    t["com.microsoft::SkipLayerNormalization"] = &op_layernorm;
    t["com.microsoft::LayerNormalization"] = &op_layernorm;
    t["com.microsoft::GroupQueryAttention"] = &op_gqa;
    t["com.microsoft::MatMulNBits"] = &op_matmul_nbits;
    t["com.microsoft::RotaryEmbedding"] = &same_as_input0;
    t["com.microsoft::Gelu"] = &same_as_input0;
    t["com.microsoft::FastGelu"] = &same_as_input0;
    t["com.microsoft::BiasGelu"] = &same_as_input0;
    t["com.microsoft::QuickGelu"] = &same_as_input0;
    t["com.microsoft::Attention"] = &op_ms_attention;
    t["com.microsoft::FusedMatMul"] = &op_matmul;
    // nxrt (the optimizer's fused ops).
    t["nxrt::FusedConv"] = &op_fused_conv;
    for (const char* op : {"nxrt::BatchNormRelu", "nxrt::Swish", "nxrt::HardSwish", "nxrt::Gelu"}) t[op] = &same_as_input0;
    // The default-domain LayerNormalization is registered with its own rule above;
    // SimplifiedLayerNormalization is also found in the default domain in some exports.
    t["SimplifiedLayerNormalization"] = &op_layernorm;
    return r;
  }();
  return *m;
}

}  // namespace

namespace {

struct Driver {
  ir::Model& model;
  std::shared_ptr<SymbolTable> syms;
  std::map<std::string, int> missing;

  Result<std::vector<ValueFacts>> infer_graph(ir::Graph& g, const Scope* parent, const std::vector<ValueFacts>* feed);
  Result<ValueFacts> merge_declared(const ValueFacts& inferred, const ir::TypeInfo& decl, const std::string& what);
};

Result<ValueFacts> Driver::merge_declared(const ValueFacts& inf, const ir::TypeInfo& decl, const std::string& what) {
  SymbolTable& S = *syms;
  if (decl.kind == Kind::kUnknown) return inf;
  if (inf.kind == Kind::kUnknown) return from_type(S, decl);
  if (inf.kind != decl.kind) {
    return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
  }
  ValueFacts r = inf;
  if (decl.kind == Kind::kSequence || decl.kind == Kind::kOptional) {
    if (decl.inner) {
      if (!inf.inner) {
        r.inner = std::make_shared<ValueFacts>(from_type(S, *decl.inner));
      } else {
        NXRT_ASSIGN_OR_RETURN(ValueFacts in, merge_declared(*inf.inner, *decl.inner, what));
        r.inner = std::make_shared<ValueFacts>(std::move(in));
      }
    }
    return r;
  }
  if (decl.kind != Kind::kTensor && decl.kind != Kind::kSparseTensor) return r;
  if (decl.elem_type != DataType::kUndefined) {
    if (inf.dtype != DataType::kUndefined && inf.dtype != decl.elem_type) {
      return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
    }
    r.dtype = decl.elem_type;
  }
  if (!decl.has_shape) return r;
  if (!inf.has_shape) {
    ValueFacts d = from_type(S, decl);
    r.has_shape = true;
    r.dims = d.dims;
    return r;
  }
  if (decl.dims.size() != inf.dims.size()) {
    return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
  }
  for (size_t i = 0; i < decl.dims.size(); ++i) {
    const ir::Dim& d = decl.dims[i];
    SymDim& x = r.dims[i];
    if (d.is_fixed()) {
      if (x.is_const() && x.value != d.value) {
        return invalid_model(what + " is declared " + decl.describe() + " but inferred " + inf.describe(S));
      }
      x = SymDim::c(d.value);
    } else if (!d.symbol.empty() && !x.is_const()) {
      int32_t named = S.named(d.symbol);
      S.unite(named, x.sym);
      x = SymDim::s(named);
    }
  }
  return r;
}

void prescan_names(SymbolTable& S, const ir::Graph& g) {
  auto scan_type = [&](const ir::TypeInfo& t, auto&& self) -> void {
    for (const auto& d : t.dims) {
      if (!d.symbol.empty()) S.reserve_name(d.symbol);
    }
    if (t.inner) self(*t.inner, self);
  };
  for (const auto* list : {&g.inputs, &g.outputs, &g.value_info}) {
    for (const auto& v : *list) scan_type(v.type, scan_type);
  }
  for (const auto& n : g.nodes) {
    for (const auto& a : n.attributes) {
      if (a.g) prescan_names(S, *a.g);
      for (const auto& sg : a.graphs) {
        if (sg) prescan_names(S, *sg);
      }
    }
  }
}

ValueFacts strip_values(ValueFacts v) {
  v.has_values = false;
  v.values.clear();
  return v;
}

Status op_if(Driver& d, Ctx& c) {
  const ir::Attribute* th = c.attr("then_branch");
  const ir::Attribute* el = c.attr("else_branch");
  if (!th || !th->g || !el || !el->g) return Status::Ok();
  NXRT_ASSIGN_OR_RETURN(auto a, d.infer_graph(*th->g, c.scope, nullptr));
  NXRT_ASSIGN_OR_RETURN(auto b, d.infer_graph(*el->g, c.scope, nullptr));
  auto cond = c.const_scalar(0);
  for (size_t i = 0; i < c.nout(); ++i) {
    if (i >= a.size() || i >= b.size()) {
      c.set(i, ValueFacts{});
    } else if (cond) {
      c.set(i, *cond ? a[i] : b[i]);
    } else {
      c.set(i, merge_branches(c.S, a[i], b[i]));
    }
  }
  return Status::Ok();
}

Status op_loop(Driver& d, Ctx& c) {
  const ir::Attribute* body = c.attr("body");
  if (!body || !body->g) return Status::Ok();
  size_t ncarried = c.nin() >= 2 ? c.nin() - 2 : 0;
  std::vector<ValueFacts> feed = {tensor(DataType::kInt64, {}), tensor(DataType::kBool, {})};
  for (size_t i = 0; i < ncarried; ++i) feed.push_back(strip_values(c.input(i + 2)));
  NXRT_ASSIGN_OR_RETURN(auto outs, d.infer_graph(*body->g, c.scope, &feed));
  // Carried values whose shape changes across iterations: generalize and infer the body again.
  bool changed = false;
  for (size_t i = 0; i < ncarried && 1 + i < outs.size(); ++i) {
    ValueFacts m = merge_branches(c.S, feed[i + 2], strip_values(outs[1 + i]));
    if (m.dims.size() != feed[i + 2].dims.size() || m.has_shape != feed[i + 2].has_shape) {
      changed = true;
    } else {
      for (size_t j = 0; j < m.dims.size(); ++j) changed = changed || !c.S.same(m.dims[j], feed[i + 2].dims[j]);
    }
    feed[i + 2] = m;
  }
  if (changed) {
    NXRT_ASSIGN_OR_RETURN(outs, d.infer_graph(*body->g, c.scope, &feed));
  }
  auto m = c.const_scalar(0);
  bool has_cond = c.has(1);
  SymDim iters = m && !has_cond ? SymDim::c(*m) : SymDim::s(c.S.mint());
  for (size_t i = 0; i < c.nout(); ++i) {
    if (1 + i >= outs.size()) {
      c.set(i, ValueFacts{});
    } else if (i < ncarried) {
      c.set(i, merge_branches(c.S, feed[i + 2], strip_values(outs[1 + i])));
    } else {
      ValueFacts v = strip_values(outs[1 + i]);
      if (v.kind == Kind::kTensor && v.has_shape) {
        v.dims.insert(v.dims.begin(), iters);
      } else if (v.kind == Kind::kTensor) {
        v.has_shape = false;
      }
      c.set(i, v);
    }
  }
  return Status::Ok();
}

Status op_scan(Driver& d, Ctx& c) {
  const ir::Attribute* body = c.attr("body");
  if (!body || !body->g || c.opset < 9) return Status::Ok();
  int64_t nscan = c.ai("num_scan_inputs", 0);
  int64_t nstate = static_cast<int64_t>(c.nin()) - nscan;
  if (nscan <= 0 || nstate < 0) return Status::Ok();
  std::vector<int64_t> in_axes = c.aints("scan_input_axes").value_or(std::vector<int64_t>(static_cast<size_t>(nscan), 0));
  std::vector<ValueFacts> feed;
  for (int64_t i = 0; i < nstate; ++i) feed.push_back(strip_values(c.input(static_cast<size_t>(i))));
  std::optional<SymDim> iters;
  for (int64_t i = 0; i < nscan; ++i) {
    ValueFacts x = strip_values(c.input(static_cast<size_t>(nstate + i)));
    if (x.has_shape) {
      int64_t a = static_cast<size_t>(i) < in_axes.size() ? in_axes[static_cast<size_t>(i)] : 0;
      if (!norm_axis(a, static_cast<int64_t>(x.dims.size()))) return c.error("scan input axis out of range for " + c.shape_str(x));
      SymDim n = x.dims[static_cast<size_t>(a)];
      if (iters) {
        SymDim r;
        NXRT_RETURN_IF_ERROR(c.unify(*iters, n, "scan inputs have different lengths", &r));
      } else {
        iters = n;
      }
      x.dims.erase(x.dims.begin() + a);
    }
    feed.push_back(x);
  }
  NXRT_ASSIGN_OR_RETURN(auto outs, d.infer_graph(*body->g, c.scope, &feed));
  SymDim n = iters ? *iters : SymDim::s(c.S.mint());
  std::vector<int64_t> out_axes = c.aints("scan_output_axes").value_or(std::vector<int64_t>{});
  for (size_t i = 0; i < c.nout() && i < outs.size(); ++i) {
    if (static_cast<int64_t>(i) < nstate) {
      c.set(i, merge_branches(c.S, feed[i], strip_values(outs[i])));
      continue;
    }
    ValueFacts v = strip_values(outs[i]);
    size_t k = i - static_cast<size_t>(nstate);
    if (v.has_shape) {
      int64_t a = k < out_axes.size() ? out_axes[k] : 0;
      if (!norm_axis(a, static_cast<int64_t>(v.dims.size()) + 1)) return c.error("scan output axis out of range");
      v.dims.insert(v.dims.begin() + a, n);
    }
    c.set(i, v);
  }
  return Status::Ok();
}

Result<std::vector<ValueFacts>> Driver::infer_graph(ir::Graph& g, const Scope* parent, const std::vector<ValueFacts>* feed) {
  SymbolTable& S = *syms;
  auto facts = std::make_shared<ir::ShapeFacts>();
  facts->symbols = syms;
  Scope scope{facts.get(), parent};
  std::unordered_map<std::string, const ir::TypeInfo*> declared;
  for (const auto& v : g.value_info) declared[v.name] = &v.type;
  for (const auto& v : g.outputs) declared[v.name] = &v.type;
  for (const auto& [name, t] : g.initializers) facts->values[name] = from_tensor(t);
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const ir::ValueInfo& in = g.inputs[i];
    ValueFacts v;
    if (feed && i < feed->size()) {
      NXRT_ASSIGN_OR_RETURN(v, merge_declared((*feed)[i], in.type, "subgraph input '" + in.name + "'"));
    } else {
      auto it = facts->values.find(in.name);
      if (it != facts->values.end()) {
        // An input with an initializer default: facts come from the initializer (including the
        // values of small int tensors, e.g. shapes fed to ConstantOfShape), merged with the declared
        // type. A feed that overrides it with a different shape is outside these facts.
        NXRT_ASSIGN_OR_RETURN(v, merge_declared(it->second, in.type, "graph input '" + in.name + "'"));
      } else {
        v = from_type(S, in.type);
      }
    }
    facts->values[in.name] = std::move(v);
    facts->order.push_back(in.name);
  }
  const auto& fns = shape_fns();
  static const ValueFacts kUnknown;
  for (size_t idx = 0; idx < g.nodes.size(); ++idx) {
    const ir::Node& node = g.nodes[idx];
    Ctx c{nullptr, &node, idx, model.opset_for(node.domain), &scope, S, {}, {}};
    c.in.reserve(node.inputs.size());
    for (const auto& name : node.inputs) {
      if (name.empty()) {
        c.in.push_back(nullptr);
      } else {
        const ValueFacts* v = scope.lookup(name);
        c.in.push_back(v ? v : &kUnknown);
      }
    }
    while (!c.in.empty() && !c.in.back()) c.in.pop_back();
    const std::string key = node.domain.empty() ? node.op_type : node.domain + "::" + node.op_type;
    Status st;
    if (node.domain.empty() && node.op_type == "If") {
      st = op_if(*this, c);
    } else if (node.domain.empty() && node.op_type == "Loop") {
      st = op_loop(*this, c);
    } else if (node.domain.empty() && node.op_type == "Scan") {
      st = op_scan(*this, c);
    } else {
      auto it = fns.find(key);
      if (it == fns.end() && (node.domain.empty() || node.domain == "ai.onnx")) it = fns.find(node.op_type);
      if (it == fns.end()) {
        missing[key]++;
        // Still infer subgraphs of unknown ops so their values get facts.
        for (const auto& a : node.attributes) {
          if (a.g) {
            auto r = infer_graph(*a.g, &scope, nullptr);
            if (!r.ok()) return r.status();
          }
        }
      } else {
        st = it->second(c);
      }
    }
    NXRT_RETURN_IF_ERROR(st);
    c.out.resize(node.outputs.size());
    for (size_t j = 0; j < node.outputs.size(); ++j) {
      const std::string& name = node.outputs[j];
      if (name.empty()) continue;
      ValueFacts v = std::move(c.out[j]);
      auto dit = declared.find(name);
      if (dit != declared.end()) {
        auto merged = merge_declared(v, *dit->second, "value '" + name + "'");
        if (!merged.ok()) return c.error(merged.status().message());
        v = std::move(merged).value();
      }
      facts->values[name] = std::move(v);
      facts->order.push_back(name);
    }
  }
  std::vector<ValueFacts> outs;
  for (const auto& o : g.outputs) {
    const ValueFacts* v = scope.lookup(o.name);
    ValueFacts r = v ? *v : ValueFacts{};
    if (!v) {
      NXRT_ASSIGN_OR_RETURN(r, merge_declared(r, o.type, "graph output '" + o.name + "'"));
    }
    outs.push_back(std::move(r));
  }
  g.shape_facts = std::move(facts);
  return outs;
}

}  // namespace

Status infer_shapes(ir::Model& model) {
  if (const char* env = std::getenv("NXRT_NO_SHAPE_INFERENCE")) {
    if (*env && std::string(env) != "0") return Status::Ok();
  }
  Driver d{model, std::make_shared<SymbolTable>(), {}};
  prescan_names(*d.syms, model.graph);
  auto r = d.infer_graph(model.graph, nullptr, nullptr);
  if (!r.ok()) return r.status();
  model.graph.shape_facts->ops_without_shape_fn = std::move(d.missing);
  return Status::Ok();
}

namespace {
void describe_graph(const ir::Graph& g, const std::string& indent, std::string& out) {
  const ir::ShapeFacts* f = g.shape_facts.get();
  if (!f) {
    out += indent + "(no shape facts)\n";
    return;
  }
  const SymbolTable& S = *f->symbols;
  size_t pos = 0;
  std::unordered_map<std::string, const ir::Node*> producer;
  for (const auto& n : g.nodes) {
    for (const auto& o : n.outputs) producer[o] = &n;
  }
  const ir::Node* last_node = nullptr;
  for (const auto& name : f->order) {
    const ValueFacts* v = f->find(name);
    auto it = producer.find(name);
    const ir::Node* node = it == producer.end() ? nullptr : it->second;
    // Subgraphs of the previous producer are printed before its outputs' successors.
    if (node != last_node && last_node) {
      for (const auto& a : last_node->attributes) {
        if (a.g) {
          out += indent + "  " + a.name + " of " + last_node->op_type + " '" + last_node->name + "':\n";
          describe_graph(*a.g, indent + "    ", out);
        }
      }
    }
    last_node = node;
    out += indent + name + ": " + (v ? v->describe(S) : std::string("?")) + "\n";
    ++pos;
  }
  if (last_node) {
    for (const auto& a : last_node->attributes) {
      if (a.g) {
        out += indent + "  " + a.name + " of " + last_node->op_type + " '" + last_node->name + "':\n";
        describe_graph(*a.g, indent + "    ", out);
      }
    }
  }
}
}  // namespace

std::string describe_shapes(const ir::Graph& g) {
  std::string out;
  describe_graph(g, "", out);
  if (g.shape_facts && g.shape_facts->symbols) {
    std::string lin = g.shape_facts->symbols->describe_lineage();
    if (!lin.empty()) out += "lineage:\n" + lin;
  }
  return out;
}

std::string describe_ops_without_shape_fn(const ir::Graph& g) {
  std::string out;
  if (!g.shape_facts) return out;
  for (const auto& [op, n] : g.shape_facts->ops_without_shape_fn) out += op + " " + std::to_string(n) + "\n";
  return out;
}

}  // namespace nxrt::shape
