// The values a template computes with (private to the engine): Value, the call arguments of functions
// and filters (Args), variable scopes (Scope), and the control signals of break / continue.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nxrt::genai::jinja {

// Value kinds: JavaScript-like (undefined and none differ), lists hold tuples too, a namespace is the
// one mutable dict.
enum class VK { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kNamespace, kFunction };

struct Value;
struct Args;
struct Scope;
using ScopePtr = std::shared_ptr<Scope>;
using Array = std::vector<Value>;
using Members = std::vector<std::pair<std::string, Value>>;
struct Interp;
struct Function {
  std::string name;
  std::function<Value(Interp&, Args&, const ScopePtr&, uint32_t pos)> call;
};

struct Value {
  VK k = VK::kUndefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<Array> arr;      // kArray (tuples too)
  std::shared_ptr<Members> obj;    // kObject, kNamespace
  std::shared_ptr<Function> fn;    // kFunction
  uint32_t nest = 0;               // list/dict nesting depth (0 for scalars), bounded so destruction stays shallow

  static Value none() { Value v; v.k = VK::kNone; return v; }
  static Value boolean(bool x) { Value v; v.k = VK::kBool; v.b = x; return v; }
  static Value integer(int64_t x) { Value v; v.k = VK::kInt; v.i = x; return v; }
  static Value real(double x) { Value v; v.k = VK::kFloat; v.f = x; return v; }
  static Value str(std::string x) { Value v; v.k = VK::kString; v.s = std::move(x); return v; }
  static Value array(Array a = {}) {
    Value v;
    v.k = VK::kArray;
    for (const Value& x : a) v.nest = std::max(v.nest, x.nest + 1);
    if (v.nest == 0) v.nest = 1;
    v.arr = std::make_shared<Array>(std::move(a));
    return v;
  }
  static Value object(Members m = {}, VK kind = VK::kObject) {
    Value v;
    v.k = kind;
    for (const auto& [name, x] : m) v.nest = std::max(v.nest, x.nest + 1);
    if (v.nest == 0) v.nest = 1;
    v.obj = std::make_shared<Members>(std::move(m));
    return v;
  }
  static Value function(std::string name, decltype(Function::call) c) {
    Value v;
    v.k = VK::kFunction;
    v.fn = std::make_shared<Function>(Function{std::move(name), std::move(c)});
    return v;
  }
  bool undefined() const { return k == VK::kUndefined; }
  bool is_num() const { return k == VK::kInt || k == VK::kFloat; }
  double num() const { return k == VK::kInt ? static_cast<double>(i) : k == VK::kFloat ? f : k == VK::kBool ? (b ? 1 : 0) : 0; }
  const Value* find(std::string_view key) const {
    if (!obj) return nullptr;
    for (const auto& [name, v] : *obj) {
      if (name == key) return &v;
    }
    return nullptr;
  }
  void set(const std::string& key, Value v) {
    nest = std::max(nest, v.nest + 1);
    for (auto& [name, old] : *obj) {
      if (name == key) {
        old = std::move(v);
        return;
      }
    }
    obj->emplace_back(key, std::move(v));
  }
  bool truthy() const {
    switch (k) {
      case VK::kUndefined: case VK::kNone: return false;
      case VK::kBool: return b;
      case VK::kInt: return i != 0;
      case VK::kFloat: return f != 0 && !std::isnan(f);
      case VK::kString: return !s.empty();
      case VK::kArray: return !arr->empty();
      case VK::kObject: return !obj->empty();
      case VK::kNamespace: case VK::kFunction: return true;
    }
    return false;
  }
};

// "integer", "list", "dict"...: the kind as error messages name it.
const char* kind_name(const Value& v);

// Call arguments: positional, then keyword (get() looks a parameter up by position, then by name).
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* get(size_t index, const char* name) const {
    if (index < pos.size()) return &pos[index];
    for (const auto& [n, v] : kw) {
      if (n == name) return &v;
    }
    return nullptr;
  }
};

// Variables: a chain of scopes, innermost first (globals at the root).
struct Scope {
  ScopePtr parent;
  std::vector<std::pair<std::string, Value>> vars;
  explicit Scope(ScopePtr p) : parent(std::move(p)) {}
  void set(const std::string& name, Value v) {
    for (auto& [n, old] : vars) {
      if (n == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
  const Value* lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      for (const auto& [n, v] : s->vars) {
        if (n == name) return &v;
      }
    }
    return nullptr;
  }
};

// {% break %} / {% continue %}: thrown by the evaluator, caught by the enclosing loop.
struct BreakSignal {};
struct ContinueSignal {};

}  // namespace nxrt::genai::jinja
