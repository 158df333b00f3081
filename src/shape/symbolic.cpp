// Symbolic dim arithmetic; see symbolic.h.
#include "shape/symbolic.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <utility>

namespace nxrt::shape {

using ir::SymDim;
using ir::SymbolTable;

namespace {

thread_local std::string tl_overflow_note;

int64_t overflowed(const char* op, int64_t a, int64_t b, int64_t saturated) {
  if (tl_overflow_note.empty()) {
    tl_overflow_note = std::to_string(a) + " " + op + " " + std::to_string(b);
  }
  return saturated;
}

int64_t saturate(bool positive) { return positive ? INT64_MAX : INT64_MIN; }

}  // namespace

int64_t add_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return overflowed("+", a, b, saturate(b > 0));
  return r;
}

int64_t sub_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return overflowed("-", a, b, saturate(b < 0));
  return r;
}

int64_t mul_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return overflowed("*", a, b, saturate((a < 0) == (b < 0)));
  return r;
}

std::string take_overflow_note() { return std::exchange(tl_overflow_note, std::string()); }

namespace {

// Splits a dim into its constant factor (multiplied into c) and its symbol factors, looking through
// derived products.
void collect_factors(const SymbolTable& S, SymDim d, int64_t& c, std::vector<int32_t>& syms) {
  if (d.is_const()) {
    c = mul_i(c, d.value);
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

}  // namespace

SymDim mul(SymbolTable& S, const std::vector<SymDim>& ds) {
  int64_t c = 1;
  std::vector<int32_t> syms;
  for (const auto& d : ds) collect_factors(S, d, c, syms);
  return make_product(S, c, std::move(syms));
}

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
      c = add_i(c, d.value);
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
  if (a.is_const() && b.is_const()) return SymDim::c(sub_i(a.value, b.value));
  if (b.is_const()) return add(S, {a, SymDim::c(sub_i(0, b.value))});  // canonical: a sum with a constant term
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
  if (b == -1) return sub_i(0, a);  // INT64_MIN / -1 does not fit
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t ceildiv_i(int64_t a, int64_t b) {
  if (b == -1) return sub_i(0, a);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) == (b < 0))) ++q;
  return q;
}

SymDim floordiv(SymbolTable& S, SymDim a, SymDim b) {
  if (b.is_const() && b.value == 1) return a;
  if (a.is_const() && b.is_const()) return b.value == 0 ? SymDim::s(S.mint_opaque()) : SymDim::c(floordiv_i(a.value, b.value));
  auto r = divide(S, {a}, {b});
  if (r) return *r;
  return SymDim::s(S.derive("/", {a, b}));
}

SymDim ceildiv(SymbolTable& S, SymDim a, SymDim b) {
  if (b.is_const() && b.value == 1) return a;
  if (a.is_const() && b.is_const()) {
    if (b.value == 0) return SymDim::s(S.mint_opaque());
    return SymDim::c(ceildiv_i(a.value, b.value));
  }
  return SymDim::s(S.derive("ceil_div", {a, b}));
}

SymDim fn(SymbolTable& S, const std::string& kind, const std::vector<SymDim>& ops) {
  return SymDim::s(S.derive(kind, ops));
}

}  // namespace nxrt::shape
