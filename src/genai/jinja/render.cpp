// Renders a parsed template: values, scopes, operators, filters, tests, string and dict methods.
//
// The evaluator signals errors with TemplateError (and break/continue with small control exceptions)
// internally, because nearly every line can fail and threading Result<> through each would bury the
// semantics; Template::render catches them all and returns a Status. Nothing escapes the engine.
#include <unicode/ustring.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genai/jinja/ast.h"
#include "genai/jinja/jinja.h"
#include "genai/json.h"

namespace nxrt::genai::jinja {
namespace {

// ------------------------------------------------------------------------------------------ values
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

const char* kind_name(const Value& v) {
  switch (v.k) {
    case VK::kUndefined: return "undefined";
    case VK::kNone: return "none";
    case VK::kBool: return "boolean";
    case VK::kInt: return "integer";
    case VK::kFloat: return "float";
    case VK::kString: return "string";
    case VK::kArray: return "list";
    case VK::kObject: return "dict";
    case VK::kNamespace: return "namespace";
    case VK::kFunction: return "function";
  }
  return "?";
}

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

struct BreakSignal {};
struct ContinueSignal {};

// ------------------------------------------------------------------------------------------ text helpers
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t b = i;
    next_cp(s, i);
    out.push_back(s.substr(b, i - b));
  }
  return out;
}

size_t cp_count(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// JS trim / trimStart / trimEnd over Unicode whitespace.
std::string trim_js(const std::string& s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t j = b;
      if (!is_js_space(next_cp(s, j))) break;
      b = j;
    }
  }
  if (right) {
    while (e > b) {
      size_t k = e - 1;
      while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      size_t j = k;
      if (!is_js_space(next_cp(s, j)) || j != e) break;
      e = k;
    }
  }
  return s.substr(b, e - b);
}

// Python's str.strip(chars) family: strips code points that occur in `chars`.
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  std::vector<std::string> set = code_points(chars);
  std::vector<std::string> cps = code_points(s);
  auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && in_set(cps[b])) ++b;
  if (right) while (e > b && in_set(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

// Full Unicode case mapping (locale-independent, as JS toUpperCase/toLowerCase).
std::string change_case(const std::string& s, bool upper) {
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    std::string out = s;
    for (char& c : out) {
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  UErrorCode err = U_ZERO_ERROR;
  int32_t n16 = 0;
  u_strFromUTF8WithSub(nullptr, 0, &n16, s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &err);
  err = U_ZERO_ERROR;
  std::u16string w(static_cast<size_t>(n16), u'\0');
  u_strFromUTF8WithSub(reinterpret_cast<UChar*>(w.data()), n16, nullptr, s.data(), static_cast<int32_t>(s.size()),
                       0xFFFD, nullptr, &err);
  if (U_FAILURE(err)) return s;
  std::u16string m(w.size() * 3 + 4, u'\0');
  err = U_ZERO_ERROR;
  const int32_t mn = upper ? u_strToUpper(reinterpret_cast<UChar*>(m.data()), static_cast<int32_t>(m.size()),
                                          reinterpret_cast<const UChar*>(w.data()), n16, "", &err)
                           : u_strToLower(reinterpret_cast<UChar*>(m.data()), static_cast<int32_t>(m.size()),
                                          reinterpret_cast<const UChar*>(w.data()), n16, "", &err);
  if (U_FAILURE(err)) return s;
  int32_t n8 = 0;
  err = U_ZERO_ERROR;
  u_strToUTF8(nullptr, 0, &n8, reinterpret_cast<const UChar*>(m.data()), mn, &err);
  std::string out(static_cast<size_t>(n8), '\0');
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), n8, nullptr, reinterpret_cast<const UChar*>(m.data()), mn, &err);
  return U_FAILURE(err) ? s : out;
}

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// JS Number#toString: the shortest digits that read back as `d`, laid out as ECMAScript does.
std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  if (d == 0) return "0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = 0; k < e; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;
  if (k <= n && n <= 21) {
    out += digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += "e";
    out += (n - 1 >= 0 ? "+" : "-");
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

// A float as a template prints it: integral values keep ".0".
std::string float_text(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::fabs(d) < 1e21 && std::floor(d) == d) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", d);
    return buf;
  }
  return js_number(d);
}

struct JsonStyle {
  int indent = 0;
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_sep = ", ", key_sep = ": ";
  bool undefined_as_null = true;
};

// ------------------------------------------------------------------------------------------ interpreter
struct Interp {
  const Limits& lim;
  const std::string& source;
  uint64_t steps = 0;
  size_t bytes = 0;
  int depth = 0;
  // Namespaces are the only mutable values, so the only way to build a reference cycle
  // (`{% set ns.self = ns %}`); their members are cleared when the render ends.
  std::vector<std::weak_ptr<Members>> namespaces;
  static constexpr uint32_t kMaxNest = 1024;

  ~Interp() {
    for (auto& w : namespaces) {
      if (auto m = w.lock()) {
        Members drop;
        drop.swap(*m);  // destroyed after the swap, when no member refers back into *m anymore
      }
    }
  }
  // A value that stays around (a variable, a namespace attribute) may not nest deeper than kMaxNest:
  // growing a list inside a loop would otherwise make its destruction recurse without bound.
  static void check_nest(const Value& v, uint32_t pos) {
    if (v.nest > kMaxNest) fail(pos, "value nests deeper than " + std::to_string(kMaxNest) + " levels");
  }

  Interp(const Limits& l, const std::string& src) : lim(l), source(src) {}

  [[noreturn]] static void fail(uint32_t pos, const std::string& msg) { throw TemplateError(pos, msg); }

  void step(uint32_t pos) {
    if (++steps > lim.max_steps) {
      fail(pos, "render stopped after " + std::to_string(lim.max_steps) + " steps (template loops too long)");
    }
  }
  // Accounts for a string or list of `n` bytes/elements being built.
  void charge(size_t n, uint32_t pos) {
    if (n > lim.max_output_bytes) {
      fail(pos, "a string of " + std::to_string(n) + " bytes exceeds the " + std::to_string(lim.max_output_bytes) +
                    "-byte limit");
    }
    bytes += n;
    if (bytes > lim.max_total_bytes) {
      fail(pos, "render built more than " + std::to_string(lim.max_total_bytes) + " bytes of strings and lists");
    }
  }
  Value make_str(std::string s, uint32_t pos) {
    charge(s.size(), pos);
    return Value::str(std::move(s));
  }

  struct Depth {
    Interp& in;
    Depth(Interp& i, uint32_t pos) : in(i) {
      if (++in.depth > in.lim.max_depth) {
        --in.depth;
        fail(pos, "template recursion deeper than " + std::to_string(in.lim.max_depth) + " levels");
      }
    }
    ~Depth() { --in.depth; }
  };

  // ---------------------------------------------------------------- text forms
  void to_json(std::string& out, const Value& v, const JsonStyle& st, int level, uint32_t pos) {
    if (out.size() > lim.max_output_bytes) fail(pos, "tojson output exceeds the size limit");
    if (level > lim.max_depth) fail(pos, "tojson: value nests too deeply");
    switch (v.k) {
      case VK::kUndefined: out += st.undefined_as_null ? "null" : "undefined"; return;
      case VK::kNone: out += "null"; return;
      case VK::kBool: out += v.b ? "true" : "false"; return;
      case VK::kInt: out += std::to_string(v.i); return;
      case VK::kFloat: out += std::isfinite(v.f) ? js_number(v.f) : "null"; return;
      case VK::kString: append_json_string(out, v.s, st.ensure_ascii); return;
      case VK::kFunction: fail(pos, "cannot convert a function to JSON");
      case VK::kArray: {
        const std::string pad_base = "\n" + std::string(static_cast<size_t>(st.indent * level), ' ');
        const std::string pad_child = pad_base + std::string(static_cast<size_t>(st.indent), ' ');
        out += '[';
        const bool nl = st.indent > 0 && !v.arr->empty();
        for (size_t k = 0; k < v.arr->size(); ++k) {
          if (k) out += st.item_sep;
          if (nl) out += pad_child;
          to_json(out, (*v.arr)[k], st, level + 1, pos);
        }
        if (nl) out += pad_base;
        out += ']';
        return;
      }
      case VK::kObject: case VK::kNamespace: {
        const std::string pad_base = "\n" + std::string(static_cast<size_t>(st.indent * level), ' ');
        const std::string pad_child = pad_base + std::string(static_cast<size_t>(st.indent), ' ');
        std::vector<const std::pair<std::string, Value>*> members;
        for (const auto& m : *v.obj) members.push_back(&m);
        if (st.sort_keys) {
          std::stable_sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->first < b->first; });
        }
        const bool nl = st.indent > 0 && !members.empty();
        out += '{';
        for (size_t k = 0; k < members.size(); ++k) {
          if (k) out += st.item_sep;
          if (nl) out += pad_child;
          append_json_string(out, members[k]->first, st.ensure_ascii);
          out += st.key_sep;
          to_json(out, members[k]->second, st, level + 1, pos);
        }
        if (nl) out += pad_base;
        out += '}';
        return;
      }
    }
  }

  // How `{{ v }}` prints v.
  std::string to_text(const Value& v, uint32_t pos) {
    switch (v.k) {
      case VK::kUndefined: case VK::kNone: return "";
      case VK::kBool: return v.b ? "true" : "false";
      case VK::kInt: return std::to_string(v.i);
      case VK::kFloat: return float_text(v.f);
      case VK::kString: return v.s;
      case VK::kFunction: return "[function " + v.fn->name + "]";
      default: {
        JsonStyle st;
        st.undefined_as_null = false;
        std::string out;
        to_json(out, v, st, 0, pos);
        return out;
      }
    }
  }
  // How `~`, string `+` and join see a value: JavaScript's String() of the raw value, as
  // @huggingface/jinja concatenates. Floats lose the ".0", a list joins its items' printed forms with
  // ",", a dict is "[object Map]".
  std::string concat_text(const Value& v, uint32_t pos) {
    switch (v.k) {
      case VK::kFloat: return js_number(v.f);
      case VK::kUndefined: return "undefined";
      case VK::kNone: return "null";
      case VK::kObject: case VK::kNamespace: return "[object Map]";
      case VK::kArray: {
        std::string out;
        for (size_t k = 0; k < v.arr->size(); ++k) {
          if (k) out += ',';
          const Value& x = (*v.arr)[k];
          out += x.k == VK::kUndefined ? "undefined" : x.k == VK::kNone ? "null" : to_text(x, pos);
          if (out.size() > lim.max_output_bytes) fail(pos, "string exceeds the size limit");
        }
        return out;
      }
      default: return to_text(v, pos);
    }
  }

  // ---------------------------------------------------------------- equality / comparison
  static bool loose_equal(const Value& a, const Value& b) {
    const bool an = a.k == VK::kNone || a.k == VK::kUndefined, bn = b.k == VK::kNone || b.k == VK::kUndefined;
    if (an || bn) return an && bn;
    auto numeric = [](const Value& v) { return v.k == VK::kInt || v.k == VK::kFloat || v.k == VK::kBool; };
    if (numeric(a) && numeric(b)) return a.num() == b.num();
    if (a.k == VK::kString && b.k == VK::kString) return a.s == b.s;
    if ((a.k == VK::kString && numeric(b)) || (numeric(a) && b.k == VK::kString)) {
      const std::string& s = a.k == VK::kString ? a.s : b.s;
      const double n = a.k == VK::kString ? b.num() : a.num();
      const std::string t = trim_js(s, true, true);
      if (t.empty()) return n == 0;
      char* end = nullptr;
      const double parsed = std::strtod(t.c_str(), &end);
      return end == t.c_str() + t.size() && parsed == n;
    }
    if (a.k != b.k) return false;
    if (a.arr) return a.arr == b.arr;
    if (a.obj) return a.obj == b.obj;
    if (a.fn) return a.fn == b.fn;
    return false;
  }
  static bool strict_equal(const Value& a, const Value& b) {
    if (a.is_num() && b.is_num()) return a.num() == b.num();
    if (a.k != b.k) return false;
    switch (a.k) {
      case VK::kUndefined: case VK::kNone: return true;
      case VK::kBool: return a.b == b.b;
      case VK::kString: return a.s == b.s;
      default: return loose_equal(a, b);
    }
  }
  int compare(const Value& a, const Value& b, bool case_sensitive, uint32_t pos) {
    auto numeric = [](const Value& v) { return v.k == VK::kInt || v.k == VK::kFloat || v.k == VK::kBool; };
    if (a.k == VK::kNone && b.k == VK::kNone) return 0;
    if (a.k == VK::kUndefined && b.k == VK::kUndefined) return 0;
    if (numeric(a) && numeric(b)) return a.num() < b.num() ? -1 : a.num() > b.num() ? 1 : 0;
    if (a.k == VK::kString && b.k == VK::kString) {
      const std::string x = case_sensitive ? a.s : change_case(a.s, false);
      const std::string y = case_sensitive ? b.s : change_case(b.s, false);
      return x < y ? -1 : x > y ? 1 : 0;
    }
    fail(pos, std::string("cannot compare ") + kind_name(a) + " with " + kind_name(b));
  }

  // ---------------------------------------------------------------- statements
  std::string block(const std::vector<NodePtr>& body, const ScopePtr& env) {
    std::string out;
    for (const NodePtr& st : body) {
      Value v = eval(*st, env);
      if (v.k == VK::kNone || v.k == VK::kUndefined) continue;
      if (v.k == VK::kString) {
        out += v.s;
      } else {
        out += to_text(v, st->pos);
      }
      if (out.size() > lim.max_output_bytes) {
        fail(st->pos, "output exceeds " + std::to_string(lim.max_output_bytes) + " bytes");
      }
    }
    return out;
  }

  Value eval(const Node& n, const ScopePtr& env) {
    Depth d(*this, n.pos);
    step(n.pos);
    switch (n.kind) {
      case NodeKind::kText: return Value::str(n.str);
      case NodeKind::kComment: return Value::none();
      case NodeKind::kOutput: return eval(*n.a, env);
      case NodeKind::kIf: {
        const bool t = eval(*n.a, env).truthy();
        return make_str(block(t ? n.body : n.alt, env), n.pos);
      }
      case NodeKind::kFor: return make_str(run_for(n, env), n.pos);
      case NodeKind::kSet: run_set(n, env); return Value::none();
      case NodeKind::kMacro: define_macro(n, env); return Value::none();
      case NodeKind::kCallBlock: return run_call_block(n, env);
      case NodeKind::kFilterBlock: {
        Value body = make_str(block(n.body, env), n.pos);
        return apply_filter(body, *n.a, env);
      }
      case NodeKind::kBreak: throw BreakSignal{};
      case NodeKind::kContinue: throw ContinueSignal{};
      case NodeKind::kInt: return Value::integer(n.ival);
      case NodeKind::kFloat: return Value::real(n.fval);
      case NodeKind::kString: return Value::str(n.str);
      case NodeKind::kIdent: {
        const Value* v = env->lookup(n.str);
        return v ? *v : Value();
      }
      case NodeKind::kArray: case NodeKind::kTuple: {
        Array items;
        for (const NodePtr& e : n.args) items.push_back(eval(*e, env));
        charge(items.size(), n.pos);
        return Value::array(std::move(items));
      }
      case NodeKind::kObject: {
        Value o = Value::object();
        for (size_t k = 0; k + 1 < n.args.size(); k += 2) {
          Value key = eval(*n.args[k], env);
          if (key.k != VK::kString) fail(n.args[k]->pos, std::string("dict keys must be strings, got ") + kind_name(key));
          o.set(key.s, eval(*n.args[k + 1], env));
        }
        return o;
      }
      case NodeKind::kMember: return member(n, env);
      case NodeKind::kCall: {
        Args args = eval_args(n.args, env);
        Value fn = eval(*n.a, env);
        if (fn.k != VK::kFunction) fail(n.pos, std::string("cannot call a ") + kind_name(fn) + " (not a function)");
        return fn.fn->call(*this, args, env, n.pos);
      }
      case NodeKind::kUnary: return unary(n, env);
      case NodeKind::kBinary: return binary(n, env);
      case NodeKind::kFilter: {
        Value operand = eval(*n.a, env);
        return apply_filter(operand, *n.b, env);
      }
      case NodeKind::kTest: return Value::boolean(run_test(n, env) != n.flag);
      case NodeKind::kSelect: {
        if (!eval(*n.b, env).truthy()) return Value();
        return eval(*n.a, env);
      }
      case NodeKind::kTernary: return eval(*n.a, env).truthy() ? eval(*n.b, env) : eval(*n.c, env);
      case NodeKind::kSlice: case NodeKind::kKwArg: case NodeKind::kSpread: case NodeKind::kKwSpread:
        fail(n.pos, "unexpected expression here");
    }
    fail(n.pos, "unknown node");
  }

  Args eval_args(const std::vector<NodePtr>& nodes, const ScopePtr& env) {
    Args a;
    for (const NodePtr& p : nodes) {
      if (p->kind == NodeKind::kSpread) {
        Value v = eval(*p->a, env);
        if (v.k != VK::kArray) fail(p->pos, std::string("cannot unpack a ") + kind_name(v) + " with '*'");
        for (const Value& x : *v.arr) a.pos.push_back(x);
      } else if (p->kind != NodeKind::kKwArg && p->kind != NodeKind::kKwSpread) {
        a.pos.push_back(eval(*p, env));
      }
    }
    auto add_kw = [&](const std::string& k, Value v, uint32_t pos) {
      for (const auto& [n, old] : a.kw) {
        if (n == k) fail(pos, "got multiple values for keyword argument '" + k + "'");
      }
      a.kw.emplace_back(k, std::move(v));
    };
    for (const NodePtr& p : nodes) {
      if (p->kind == NodeKind::kKwArg) {
        add_kw(p->str, eval(*p->a, env), p->pos);
      } else if (p->kind == NodeKind::kKwSpread) {
        Value v = eval(*p->a, env);
        if (v.k != VK::kObject) fail(p->pos, std::string("argument after ** must be a dict, not ") + kind_name(v));
        for (const auto& [k, x] : *v.obj) add_kw(k, x, p->pos);
      }
    }
    return a;
  }

  void assign_names(const Node& target, const Value& v, Scope& scope, uint32_t pos) {
    check_nest(v, pos);
    if (target.kind == NodeKind::kIdent) {
      scope.set(target.str, v);
      return;
    }
    if (v.k != VK::kArray) fail(pos, std::string("cannot unpack a ") + kind_name(v));
    if (v.arr->size() != target.args.size()) {
      fail(pos, std::string("too ") + (target.args.size() > v.arr->size() ? "few" : "many") + " values to unpack (expected " +
                    std::to_string(target.args.size()) + ", got " + std::to_string(v.arr->size()) + ")");
    }
    for (size_t k = 0; k < target.args.size(); ++k) {
      if (target.args[k]->kind != NodeKind::kIdent) fail(target.args[k]->pos, "can only unpack into names");
      scope.set(target.args[k]->str, (*v.arr)[k]);
    }
  }

  void run_set(const Node& n, const ScopePtr& env) {
    Value rhs = n.b ? eval(*n.b, env) : make_str(block(n.body, env), n.pos);
    const Node& target = *n.a;
    if (target.kind == NodeKind::kIdent || target.kind == NodeKind::kTuple) {
      assign_names(target, rhs, *env, n.pos);
      return;
    }
    if (target.kind == NodeKind::kMember && !target.flag) {
      Value obj = eval(*target.a, env);
      if (obj.k != VK::kNamespace) fail(target.pos, std::string("cannot set an attribute on a ") + kind_name(obj) + " (only on a namespace)");
      if (target.b->kind != NodeKind::kIdent) fail(target.b->pos, "expected an attribute name");
      check_nest(rhs, n.pos);
      obj.set(target.b->str, std::move(rhs));
      return;
    }
    fail(target.pos, "cannot assign to this expression");
  }

  std::string run_for(const Node& n, const ScopePtr& env) {
    auto scope = std::make_shared<Scope>(env);
    const Node* test = nullptr;
    Value iterable;
    if (n.b->kind == NodeKind::kSelect) {
      iterable = eval(*n.b->a, scope);
      test = n.b->b.get();
    } else {
      iterable = eval(*n.b, scope);
    }
    // Lists are immutable, so a list is iterated in place; dict keys and string characters are listed.
    std::shared_ptr<const Array> source;
    if (iterable.k == VK::kArray) {
      source = iterable.arr;
    } else if (iterable.k == VK::kObject) {
      auto keys = std::make_shared<Array>();
      for (const auto& [k, v] : *iterable.obj) keys->push_back(Value::str(k));
      source = std::move(keys);
    } else if (iterable.k == VK::kString) {
      auto chars = std::make_shared<Array>();
      for (std::string& c : code_points(iterable.s)) chars->push_back(Value::str(std::move(c)));
      source = std::move(chars);
    } else {
      fail(n.b->pos, std::string("cannot loop over a ") + kind_name(iterable));
    }
    if (test) {
      auto kept = std::make_shared<Array>();
      for (const Value& cur : *source) {
        step(n.pos);
        auto probe = std::make_shared<Scope>(scope);
        assign_names(*n.a, cur, *probe, n.pos);
        if (eval(*test, probe).truthy()) kept->push_back(cur);
      }
      source = std::move(kept);
    }
    const Array& items = *source;
    std::string out;
    bool iterated = false;
    const int64_t len = static_cast<int64_t>(items.size());
    static const char* const kLoopKeys[] = {"index", "index0", "revindex", "revindex0", "first",
                                            "last",  "length", "previtem", "nextitem"};
    Value loop;
    for (int64_t k = 0; k < len; ++k) {
      step(n.pos);
      const Value fields[] = {Value::integer(k + 1), Value::integer(k), Value::integer(len - k),
                              Value::integer(len - k - 1), Value::boolean(k == 0), Value::boolean(k == len - 1),
                              Value::integer(len), k > 0 ? items[k - 1] : Value(),
                              k < len - 1 ? items[k + 1] : Value()};
      // The loop dict is rebuilt in place unless the template kept a reference to last iteration's.
      if (!loop.obj || loop.obj.use_count() > 2) {
        Members m;
        for (size_t f = 0; f < 9; ++f) m.emplace_back(kLoopKeys[f], fields[f]);
        loop = Value::object(std::move(m));
      } else {
        for (size_t f = 0; f < 9; ++f) (*loop.obj)[f].second = fields[f];
        loop.nest = 1;
        for (const Value& f : fields) loop.nest = std::max(loop.nest, f.nest + 1);
      }
      scope->set("loop", loop);
      assign_names(*n.a, items[k], *scope, n.pos);
      try {
        out += block(n.body, scope);
      } catch (const ContinueSignal&) {
        continue;
      } catch (const BreakSignal&) {
        break;
      }
      iterated = true;
      if (out.size() > lim.max_output_bytes) fail(n.pos, "output exceeds the size limit");
    }
    if (!iterated) out += block(n.alt, scope);
    return out;
  }

  // Names a macro body refers to as `varargs` / `kwargs` decide whether extra arguments are accepted.
  static void find_special(const Node& n, bool& varargs, bool& kwargs) {
    if (n.kind == NodeKind::kIdent) {
      if (n.str == "varargs") varargs = true;
      if (n.str == "kwargs") kwargs = true;
    }
    for (const NodePtr* p : {&n.a, &n.b, &n.c}) {
      if (*p) find_special(**p, varargs, kwargs);
    }
    for (const auto* v : {&n.args, &n.body, &n.alt}) {
      for (const NodePtr& c : *v) find_special(*c, varargs, kwargs);
    }
  }

  void bind_params(const std::string& name, const std::vector<NodePtr>& params, bool varargs, bool kwargs, Args& args,
                   Scope& scope, const ScopePtr& scope_ptr, uint32_t pos) {
    std::vector<std::pair<std::string, Value>> kw = args.kw;
    std::vector<const Node*> pending;
    for (size_t k = 0; k < params.size(); ++k) {
      const Node& p = *params[k];
      Value v;
      bool have = false;
      if (k < args.pos.size()) {
        v = args.pos[k];
        have = true;
      } else {
        for (auto it = kw.begin(); it != kw.end(); ++it) {
          if (it->first == p.str) {
            v = it->second;
            kw.erase(it);
            have = true;
            break;
          }
        }
      }
      if (!have && p.kind == NodeKind::kKwArg) pending.push_back(&p);
      scope.set(p.str, v);
    }
    if (kwargs) {
      scope.set("kwargs", Value::object(Members(kw.begin(), kw.end())));
    } else if (!kw.empty()) {
      fail(pos, "macro " + name + " takes no keyword argument '" + kw.front().first + "'");
    }
    if (varargs) {
      Array rest;
      for (size_t k = params.size(); k < args.pos.size(); ++k) rest.push_back(args.pos[k]);
      scope.set("varargs", Value::array(std::move(rest)));
    } else if (args.pos.size() > params.size()) {
      fail(pos, "macro " + name + " takes at most " + std::to_string(params.size()) + " argument(s)");
    }
    for (const Node* p : pending) scope.set(p->str, eval(*p->a, scope_ptr));
  }

  void define_macro(const Node& n, const ScopePtr& env) {
    bool varargs = false, kwargs = false;
    for (const NodePtr& b : n.body) find_special(*b, varargs, kwargs);
    for (const NodePtr& p : n.args) {
      if (p->str == "varargs") varargs = false;
      if (p->str == "kwargs") kwargs = false;
    }
    const Node* node = &n;
    env->set(n.str, Value::function(n.str, [node, varargs, kwargs](Interp& in, Args& args, const ScopePtr& caller_env,
                                                                  uint32_t pos) {
               auto scope = std::make_shared<Scope>(caller_env);
               in.bind_params("'" + node->str + "'", node->args, varargs, kwargs, args, *scope, scope, pos);
               return in.make_str(in.block(node->body, scope), pos);
             }));
  }

  Value run_call_block(const Node& n, const ScopePtr& env) {
    bool varargs = false, kwargs = false;
    for (const NodePtr& b : n.body) find_special(*b, varargs, kwargs);
    const Node* node = &n;
    ScopePtr defining = env;
    Value caller = Value::function("caller", [node, defining, varargs, kwargs](Interp& in, Args& args, const ScopePtr&,
                                                                             uint32_t pos) {
      auto scope = std::make_shared<Scope>(defining);
      in.bind_params("caller", node->args, varargs, kwargs, args, *scope, scope, pos);
      return in.make_str(in.block(node->body, scope), pos);
    });
    const Node& call = *n.a;
    Args args = eval_args(call.args, env);
    Value fn = eval(*call.a, env);
    if (fn.k != VK::kFunction) fail(call.pos, std::string("cannot call a ") + kind_name(fn) + " (not a function)");
    auto inner = std::make_shared<Scope>(env);
    inner->set("caller", caller);
    return fn.fn->call(*this, args, inner, call.pos);
  }

  // ---------------------------------------------------------------- member access
  static int64_t wrap_index(int64_t i, size_t n) { return i < 0 ? i + static_cast<int64_t>(n) : i; }

  Value slice(const Value& obj, const Node& s, const ScopePtr& env) {
    auto part = [&](const NodePtr& p) -> std::pair<bool, int64_t> {
      if (!p) return {false, 0};
      Value v = eval(*p, env);
      if (v.undefined()) return {false, 0};
      if (v.k != VK::kInt) fail(p->pos, std::string("slice bounds must be integers, got ") + kind_name(v));
      return {true, v.i};
    };
    auto [has_start, start] = part(s.a);
    auto [has_stop, stop] = part(s.b);
    auto [has_step, stepv] = part(s.c);
    if (!has_step) stepv = 1;
    if (stepv == 0) fail(s.pos, "slice step cannot be zero");
    std::vector<std::string> chars;
    size_t len = 0;
    if (obj.k == VK::kArray) {
      len = obj.arr->size();
    } else if (obj.k == VK::kString) {
      chars = code_points(obj.s);
      len = chars.size();
    } else {
      fail(s.pos, std::string("cannot slice a ") + kind_name(obj));
    }
    const int64_t L = static_cast<int64_t>(len);
    std::vector<int64_t> picks;
    if (stepv > 0) {
      start = !has_start ? 0 : start < 0 ? std::max<int64_t>(L + start, 0) : std::min(start, L);
      stop = !has_stop ? L : stop < 0 ? std::max<int64_t>(L + stop, 0) : std::min(stop, L);
      for (int64_t k = start; k < stop;) {
        picks.push_back(k);
        if (__builtin_add_overflow(k, stepv, &k)) break;
      }
    } else {
      start = !has_start ? L - 1 : start < 0 ? std::max<int64_t>(L + start, -1) : std::min(start, L - 1);
      stop = !has_stop ? -1 : stop < -1 ? std::max<int64_t>(L + stop, -1) : std::min(stop, L - 1);
      for (int64_t k = start; k > stop;) {
        picks.push_back(k);
        if (__builtin_add_overflow(k, stepv, &k)) break;
      }
    }
    if (obj.k == VK::kArray) {
      Array out;
      for (int64_t k : picks) out.push_back((*obj.arr)[static_cast<size_t>(k)]);
      charge(out.size(), s.pos);
      return Value::array(std::move(out));
    }
    std::string out;
    for (int64_t k : picks) out += chars[static_cast<size_t>(k)];
    return make_str(std::move(out), s.pos);
  }

  Value bound_method(const Value& obj, const std::string& name) {
    return Value::function(name, [obj, name](Interp& in, Args& args, const ScopePtr&, uint32_t pos) {
      return in.call_method(obj, name, args, pos);
    });
  }

  static bool is_string_method(const std::string& n) {
    static const char* kNames[] = {"upper", "lower", "strip", "lstrip", "rstrip", "title", "capitalize", "startswith",
                                   "endswith", "split", "replace"};
    return std::find_if(std::begin(kNames), std::end(kNames), [&](const char* k) { return n == k; }) != std::end(kNames);
  }
  static bool is_dict_method(const std::string& n) {
    return n == "get" || n == "items" || n == "keys" || n == "values" || n == "dictsort";
  }

  Value get_member(const Value& obj, const Value& prop, uint32_t pos) {
    if (obj.k == VK::kObject || obj.k == VK::kNamespace) {
      if (prop.k != VK::kString) fail(pos, std::string("dict keys are strings, got ") + kind_name(prop));
      if (const Value* v = obj.find(prop.s)) return *v;
      if (obj.k == VK::kObject && is_dict_method(prop.s)) return bound_method(obj, prop.s);
      return Value();
    }
    if (obj.k == VK::kArray || obj.k == VK::kString) {
      if (prop.k == VK::kInt) {
        if (obj.k == VK::kArray) {
          const int64_t k = wrap_index(prop.i, obj.arr->size());
          if (k < 0 || k >= static_cast<int64_t>(obj.arr->size())) return Value();
          return (*obj.arr)[static_cast<size_t>(k)];
        }
        std::vector<std::string> cps = code_points(obj.s);
        const int64_t k = wrap_index(prop.i, cps.size());
        if (k < 0 || k >= static_cast<int64_t>(cps.size())) return Value();
        return Value::str(cps[static_cast<size_t>(k)]);
      }
      if (prop.k == VK::kString) {
        if (prop.s == "length") {
          return Value::integer(static_cast<int64_t>(obj.k == VK::kArray ? obj.arr->size() : cp_count(obj.s)));
        }
        if (obj.k == VK::kString && is_string_method(prop.s)) return bound_method(obj, prop.s);
        return Value();
      }
      fail(pos, std::string("cannot index a ") + kind_name(obj) + " with a " + kind_name(prop));
    }
    if (prop.k != VK::kString) fail(pos, std::string("cannot index a ") + kind_name(obj) + " with a " + kind_name(prop));
    return Value();
  }

  Value member(const Node& n, const ScopePtr& env) {
    Value obj = eval(*n.a, env);
    if (n.flag && n.b->kind == NodeKind::kSlice) return slice(obj, *n.b, env);
    Value prop;
    if (n.flag) {
      prop = eval(*n.b, env);
    } else if (n.b->kind == NodeKind::kInt) {
      prop = Value::integer(n.b->ival);
    } else {
      prop = Value::str(n.b->str);
    }
    return get_member(obj, prop, n.pos);
  }

  // ---------------------------------------------------------------- methods
  Value call_method(const Value& obj, const std::string& name, Args& args, uint32_t pos) {
    if (obj.k == VK::kString) return string_method(obj.s, name, args, pos);
    // dict methods
    if (name == "get") {
      const Value* key = args.get(0, "key");
      if (!key || key->k != VK::kString) fail(pos, "dict.get needs a string key");
      if (const Value* v = obj.find(key->s)) return *v;
      const Value* def = args.get(1, "default");
      return def ? *def : Value::none();
    }
    if (name == "items") return items_of(obj, pos);
    if (name == "keys") {
      Array out;
      for (const auto& [k, v] : *obj.obj) out.push_back(Value::str(k));
      return Value::array(std::move(out));
    }
    if (name == "values") {
      Array out;
      for (const auto& [k, v] : *obj.obj) out.push_back(v);
      return Value::array(std::move(out));
    }
    if (name == "dictsort") return dictsort(obj, args, pos);
    fail(pos, "unknown method '" + name + "'");
  }

  Value items_of(const Value& obj, uint32_t pos) {
    Array out;
    for (const auto& [k, v] : *obj.obj) out.push_back(Value::array({Value::str(k), v}));
    charge(out.size(), pos);
    return Value::array(std::move(out));
  }

  Value dictsort(const Value& obj, Args& args, uint32_t pos) {
    const Value* cs = args.get(0, "case_sensitive");
    const Value* by = args.get(1, "by");
    const Value* rev = args.get(2, "reverse");
    if (cs && cs->k != VK::kBool) fail(pos, "dictsort: case_sensitive must be a boolean");
    if (by && (by->k != VK::kString || (by->s != "key" && by->s != "value"))) fail(pos, "dictsort: by must be 'key' or 'value'");
    if (rev && rev->k != VK::kBool) fail(pos, "dictsort: reverse must be a boolean");
    const size_t idx = by && by->s == "value" ? 1 : 0;
    const bool case_sensitive = cs && cs->b, reverse = rev && rev->b;
    Array items = *items_of(obj, pos).arr;
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
      const int c = compare((*a.arr)[idx], (*b.arr)[idx], case_sensitive, pos);
      return reverse ? c > 0 : c < 0;
    });
    return Value::array(std::move(items));
  }

  const std::string& string_arg(const Args& args, size_t i, const char* name, const char* fn, uint32_t pos) {
    const Value* v = args.get(i, name);
    if (!v || v->k != VK::kString) fail(pos, std::string(fn) + "() needs a string argument '" + name + "'");
    return v->s;
  }

  Value string_method(const std::string& s, const std::string& name, Args& args, uint32_t pos) {
    if (name == "upper" || name == "lower") return make_str(change_case(s, name == "upper"), pos);
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const bool left = name != "rstrip", right = name != "lstrip";
      const Value* chars = args.get(0, "chars");
      if (chars && chars->k == VK::kString) return Value::str(strip_chars(s, chars->s, left, right));
      if (chars && chars->k != VK::kNone) fail(pos, name + "() takes a string or none");
      return Value::str(trim_js(s, left, right));
    }
    if (name == "title") return make_str(title_case(s), pos);
    if (name == "capitalize") return make_str(capitalize(s), pos);
    if (name == "startswith" || name == "endswith") {
      const Value* p = args.get(0, "prefix");
      if (!p) fail(pos, name + "() needs an argument");
      auto test = [&](const std::string& x) {
        if (x.size() > s.size()) return false;
        return name == "startswith" ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0;
      };
      if (p->k == VK::kString) return Value::boolean(test(p->s));
      if (p->k == VK::kArray) {
        for (const Value& x : *p->arr) {
          if (x.k != VK::kString) fail(pos, name + "() tuple elements must be strings");
          if (test(x.s)) return Value::boolean(true);
        }
        return Value::boolean(false);
      }
      fail(pos, name + "() argument must be a string or a tuple of strings");
    }
    if (name == "split") return split(s, args, pos);
    if (name == "replace") {
      const std::string& from = string_arg(args, 0, "old", "replace", pos);
      const std::string& to = string_arg(args, 1, "new", "replace", pos);
      const Value* count = args.get(2, "count");
      int64_t left = -1;
      if (count && count->k == VK::kInt) {
        left = count->i;
      } else if (count && count->k != VK::kNone) {
        fail(pos, "replace() count must be an integer or none");
      }
      return make_str(replace(s, from, to, left, pos), pos);
    }
    fail(pos, "unknown string method '" + name + "'");
  }

  std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count, uint32_t pos) {
    if (count == 0) return s;
    std::string out;
    if (from.empty()) {  // insert at every code point boundary
      std::vector<std::string> cps = code_points(s);
      for (size_t k = 0; k <= cps.size(); ++k) {
        if (count < 0 || static_cast<int64_t>(k) < count) out += to;
        if (k < cps.size()) out += cps[k];
        if (out.size() > lim.max_output_bytes) fail(pos, "replace() result exceeds the size limit");
      }
      return out;
    }
    size_t at = 0;
    int64_t done = 0;
    while (count < 0 || done < count) {
      const size_t hit = s.find(from, at);
      if (hit == std::string::npos) break;
      out.append(s, at, hit - at);
      out += to;
      at = hit + from.size();
      ++done;
      if (out.size() > lim.max_output_bytes) fail(pos, "replace() result exceeds the size limit");
    }
    out.append(s, at, std::string::npos);
    return out;
  }

  Value split(const std::string& s, Args& args, uint32_t pos) {
    const Value* sep = args.get(0, "sep");
    const Value* maxv = args.get(1, "maxsplit");
    if (sep && sep->k != VK::kString && sep->k != VK::kNone) fail(pos, "split() separator must be a string or none");
    if (maxv && maxv->k != VK::kInt) fail(pos, "split() maxsplit must be an integer");
    const int64_t maxsplit = maxv ? maxv->i : -1;
    Array out;
    if (!sep || sep->k == VK::kNone) {
      const std::string text = trim_js(s, true, false);
      size_t i = 0;
      while (i < text.size()) {
        size_t b = i;
        // skip spaces
        while (b < text.size()) {
          size_t j = b;
          if (!is_js_space(next_cp(text, j))) break;
          b = j;
        }
        if (b >= text.size()) break;
        if (maxsplit != -1 && static_cast<int64_t>(out.size()) >= maxsplit) {
          out.push_back(Value::str(text.substr(b)));
          break;
        }
        size_t e = b;
        while (e < text.size()) {
          size_t j = e;
          if (is_js_space(next_cp(text, j))) break;
          e = j;
        }
        out.push_back(Value::str(text.substr(b, e - b)));
        i = e;
      }
    } else {
      if (sep->s.empty()) fail(pos, "split(): empty separator");
      size_t at = 0;
      while (true) {
        if (maxsplit != -1 && static_cast<int64_t>(out.size()) >= maxsplit) {
          out.push_back(Value::str(s.substr(at)));
          break;
        }
        const size_t hit = s.find(sep->s, at);
        if (hit == std::string::npos) {
          out.push_back(Value::str(s.substr(at)));
          break;
        }
        out.push_back(Value::str(s.substr(at, hit - at)));
        at = hit + sep->s.size();
      }
    }
    charge(out.size() + s.size(), pos);
    return Value::array(std::move(out));
  }

  static std::string title_case(const std::string& s) {
    std::string out = s;
    for (size_t k = 0; k < out.size(); ++k) {
      const bool start = k == 0 || !is_word_char(out[k - 1]);
      if (start && out[k] >= 'a' && out[k] <= 'z') out[k] = static_cast<char>(out[k] - 32);
    }
    return out;
  }
  static std::string capitalize(const std::string& s) {
    if (s.empty()) return s;
    size_t i = 0;
    next_cp(s, i);
    return change_case(s.substr(0, i), true) + s.substr(i);
  }

  // ---------------------------------------------------------------- operators
  Value unary(const Node& n, const ScopePtr& env) {
    Value v = eval(*n.a, env);
    if (n.str == "not") return Value::boolean(!v.truthy());
    const bool neg = n.str == "-";
    if (v.k == VK::kFloat) return Value::real(neg ? -v.f : v.f);
    if (v.k == VK::kInt || v.k == VK::kBool) {
      const int64_t x = v.k == VK::kBool ? (v.b ? 1 : 0) : v.i;
      if (neg && x == INT64_MIN) return Value::real(-static_cast<double>(x));
      return Value::integer(neg ? -x : x);
    }
    fail(n.pos, "unary '" + n.str + "' needs a number, got " + kind_name(v));
  }

  Value arith(const std::string& op, const Value& l, const Value& r, uint32_t pos) {
    const bool is_float = l.k == VK::kFloat || r.k == VK::kFloat;
    if (!is_float && (op == "+" || op == "-" || op == "*")) {
      int64_t out = 0;
      bool overflow = op == "+" ? __builtin_add_overflow(l.i, r.i, &out)
                      : op == "-" ? __builtin_sub_overflow(l.i, r.i, &out)
                                  : __builtin_mul_overflow(l.i, r.i, &out);
      if (!overflow) return Value::integer(out);
    }
    const double a = l.num(), b = r.num();
    if (op == "+") return Value::real(a + b);
    if (op == "-") return Value::real(a - b);
    if (op == "*") return Value::real(a * b);
    if (op == "/") return Value::real(a / b);
    if (op == "//" || op == "%") {
      if (b == 0) fail(pos, "division by zero");
      if (!is_float) {
        if (l.i == INT64_MIN && r.i == -1) return op == "%" ? Value::integer(0) : Value::real(-static_cast<double>(l.i));
        if (op == "%") return Value::integer(l.i % r.i);
        return Value::integer(static_cast<int64_t>(std::floor(a / b)));
      }
      return Value::real(op == "%" ? std::fmod(a, b) : std::floor(a / b));
    }
    if (op == "<") return Value::boolean(a < b);
    if (op == ">") return Value::boolean(a > b);
    if (op == "<=") return Value::boolean(a <= b);
    if (op == ">=") return Value::boolean(a >= b);
    fail(pos, "unknown operator '" + op + "'");
  }

  Value binary(const Node& n, const ScopePtr& env) {
    const std::string& op = n.str;
    Value l = eval(*n.a, env);
    if (op == "and") return l.truthy() ? eval(*n.b, env) : l;
    if (op == "or") return l.truthy() ? l : eval(*n.b, env);
    Value r = eval(*n.b, env);
    if (op == "==") return Value::boolean(loose_equal(l, r));
    if (op == "!=") return Value::boolean(!loose_equal(l, r));
    const bool membership = op == "in" || op == "not in";
    if (l.undefined() || r.undefined()) {
      if (r.undefined() && membership) return Value::boolean(op == "not in");
      fail(n.pos, "'" + op + "' on an undefined value (" + describe(l.undefined() ? *n.a : *n.b) + ")");
    }
    if (l.k == VK::kNone || r.k == VK::kNone) {
      if (membership && r.k == VK::kArray) {
        // fall through to list membership below
      } else {
        fail(n.pos, "'" + op + "' on a none value (" + describe(l.k == VK::kNone ? *n.a : *n.b) + ")");
      }
    }
    if (op == "~") return make_str(concat_text(l, n.pos) + concat_text(r, n.pos), n.pos);
    auto numeric = [](const Value& v) { return v.k == VK::kInt || v.k == VK::kFloat || v.k == VK::kBool; };
    if (op == "**" && numeric(l) && numeric(r)) {
      const double a = l.num(), b = r.num();
      if (a == 0 && b < 0) fail(n.pos, "0 cannot be raised to a negative power");
      const double res = std::pow(a, b);
      if (!std::isfinite(res)) fail(n.pos, "'**' result is not a finite number");
      if (l.k == VK::kFloat || r.k == VK::kFloat || b < 0 || std::fabs(res) >= 9.2e18) return Value::real(res);
      return Value::integer(static_cast<int64_t>(res));
    }
    if (l.is_num() && r.is_num()) {
      if (op == "+" || op == "-" || op == "*" || op == "/" || op == "//" || op == "%" || op == "<" || op == ">" ||
          op == "<=" || op == ">=") {
        return arith(op, l, r, n.pos);
      }
    } else if (l.k == VK::kArray && r.k == VK::kArray && op == "+") {
      Array out = *l.arr;
      out.insert(out.end(), r.arr->begin(), r.arr->end());
      charge(out.size(), n.pos);
      return Value::array(std::move(out));
    } else if (r.k == VK::kArray && membership) {
      bool found = false;
      for (const Value& x : *r.arr) {
        if (strict_equal(x, l)) {
          found = true;
          break;
        }
      }
      return Value::boolean(found == (op == "in"));
    }
    if ((l.k == VK::kString || r.k == VK::kString) && op == "+") {
      return make_str(concat_text(l, n.pos) + concat_text(r, n.pos), n.pos);
    }
    if (l.k == VK::kString && r.k == VK::kString) {
      if (membership) return Value::boolean((r.s.find(l.s) != std::string::npos) == (op == "in"));
      if (op == "<" || op == ">" || op == "<=" || op == ">=") {
        const int c = l.s.compare(r.s);
        return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
      }
    }
    if (l.k == VK::kString && r.k == VK::kObject && membership) {
      return Value::boolean((r.find(l.s) != nullptr) == (op == "in"));
    }
    fail(n.pos, "operator '" + op + "' is not defined between " + kind_name(l) + " and " + kind_name(r));
  }

  static std::string describe(const Node& n) {
    if (n.kind == NodeKind::kIdent) return "'" + n.str + "'";
    if (n.kind == NodeKind::kMember && !n.b->str.empty() && !n.flag) return describe(*n.a) + "." + n.b->str;
    return "expression";
  }

  // ---------------------------------------------------------------- tests
  bool run_test(const Node& n, const ScopePtr& env) {
    Value v = eval(*n.a, env);
    const std::string& t = n.str;
    Value arg;
    const bool has_arg = n.b != nullptr;
    if (has_arg) arg = eval(*n.b, env);
    return test_value(t, v, has_arg ? &arg : nullptr, n.pos);
  }

  bool test_value(const std::string& t, const Value& v, const Value* arg, uint32_t pos) {
    if (t == "defined") return !v.undefined();
    if (t == "undefined") return v.undefined();
    if (t == "none") return v.k == VK::kNone;
    if (t == "boolean") return v.k == VK::kBool;
    if (t == "true") return v.k == VK::kBool && v.b;
    if (t == "false") return v.k == VK::kBool && !v.b;
    if (t == "string") return v.k == VK::kString;
    if (t == "number") return v.is_num();
    if (t == "integer") return v.k == VK::kInt;
    if (t == "float") return v.k == VK::kFloat;
    if (t == "iterable") return v.k == VK::kArray || v.k == VK::kString;
    if (t == "mapping") return v.k == VK::kObject;
    if (t == "sequence") return v.k == VK::kArray || v.k == VK::kObject || v.k == VK::kString;
    if (t == "callable") return v.k == VK::kFunction;
    if (t == "lower") return v.k == VK::kString && v.s == change_case(v.s, false);
    if (t == "upper") return v.k == VK::kString && v.s == change_case(v.s, true);
    if (t == "odd" || t == "even") {
      if (v.k != VK::kInt) fail(pos, "test '" + t + "' needs an integer, got " + kind_name(v));
      return (v.i % 2 != 0) == (t == "odd");
    }
    if (t == "equalto" || t == "eq" || t == "==" || t == "sameas") {
      if (!arg) fail(pos, "test '" + t + "' needs an argument");
      return strict_equal(v, *arg);
    }
    if (t == "ne") {
      if (!arg) fail(pos, "test 'ne' needs an argument");
      return !strict_equal(v, *arg);
    }
    if (t == "divisibleby") {
      if (!arg || arg->k != VK::kInt || v.k != VK::kInt || arg->i == 0) fail(pos, "test 'divisibleby' needs integers");
      return v.i % arg->i == 0;
    }
    if (t == "in") {
      if (!arg) fail(pos, "test 'in' needs an argument");
      if (arg->k == VK::kArray) {
        for (const Value& x : *arg->arr) {
          if (strict_equal(x, v)) return true;
        }
        return false;
      }
      if (arg->k == VK::kString && v.k == VK::kString) return arg->s.find(v.s) != std::string::npos;
      if (arg->k == VK::kObject && v.k == VK::kString) return arg->find(v.s) != nullptr;
      fail(pos, std::string("test 'in' cannot look in a ") + kind_name(*arg));
    }
    fail(pos, "unknown test '" + t + "'");
  }

  // ---------------------------------------------------------------- filters
  Value attribute_path(const Value& item, const std::string& path) {
    Value cur = item;
    size_t at = 0;
    while (true) {
      const size_t dot = path.find('.', at);
      const std::string part = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
      if (cur.k == VK::kObject || cur.k == VK::kNamespace) {
        const Value* v = cur.find(part);
        if (!v) return Value();
        cur = *v;
      } else if (cur.k == VK::kArray) {
        char* end = nullptr;
        const long long idx = std::strtoll(part.c_str(), &end, 10);
        if (end == part.c_str() || idx < 0 || idx >= static_cast<long long>(cur.arr->size())) return Value();
        cur = (*cur.arr)[static_cast<size_t>(idx)];
      } else {
        return Value();
      }
      if (dot == std::string::npos) return cur;
      at = dot + 1;
    }
  }

  Value tojson(const Value& v, const Args& args, uint32_t pos) {
    JsonStyle st;
    if (const Value* ind = args.get(0, "indent")) {
      if (ind->k == VK::kInt) {
        if (ind->i < 0 || ind->i > 64) fail(pos, "tojson: indent must be in 0..64");
        st.indent = static_cast<int>(ind->i);
      } else if (ind->k != VK::kNone) {
        fail(pos, "tojson: indent must be an integer");
      }
    }
    if (st.indent > 0) st.item_sep = ",";
    if (const Value* ea = args.get(99, "ensure_ascii")) {
      if (ea->k != VK::kBool) fail(pos, "tojson: ensure_ascii must be a boolean");
      st.ensure_ascii = ea->b;
    }
    if (const Value* sk = args.get(99, "sort_keys")) {
      if (sk->k != VK::kBool) fail(pos, "tojson: sort_keys must be a boolean");
      st.sort_keys = sk->b;
    }
    if (const Value* sep = args.get(99, "separators")) {
      if (sep->k == VK::kArray) {
        if (sep->arr->size() != 2 || (*sep->arr)[0].k != VK::kString || (*sep->arr)[1].k != VK::kString) {
          fail(pos, "tojson: separators must be two strings");
        }
        st.item_sep = (*sep->arr)[0].s;
        st.key_sep = (*sep->arr)[1].s;
      } else if (sep->k != VK::kNone) {
        fail(pos, "tojson: separators must be two strings");
      }
    }
    std::string out;
    to_json(out, v, st, 0, pos);
    return make_str(std::move(out), pos);
  }

  Value apply_filter(const Value& v, const Node& f, const ScopePtr& env) {
    const bool called = f.kind == NodeKind::kCall;
    const std::string& name = called ? f.a->str : f.str;
    Args args;
    if (called) args = eval_args(f.args, env);
    return filter(name, v, args, called, f.pos, env);
  }

  Value filter(const std::string& name, const Value& v, Args& args, bool called, uint32_t pos, const ScopePtr& env) {
    if (name == "safe") return v;
    if (name == "tojson") return tojson(v, args, pos);
    if (name == "default" || name == "d") {
      const Value* def = args.get(0, "default_value");
      const Value* boolean = args.get(1, "boolean");
      if (boolean && boolean->k != VK::kBool) fail(pos, "default: the boolean flag must be a boolean");
      if (v.undefined() || (boolean && boolean->b && !v.truthy())) return def ? *def : Value::str("");
      return v;
    }
    if (name == "string") {
      if (v.k == VK::kString) return v;
      if (v.k == VK::kBool) return Value::str(v.b ? "true" : "false");
      if (v.is_num() || v.k == VK::kArray || v.k == VK::kObject) return make_str(to_text(v, pos), pos);
    }
    if (name == "int" || name == "float") {
      const bool want_int = name == "int";
      const Value* def = args.get(0, "default");
      if (v.k == VK::kString) {
        const std::string t = trim_js(v.s, true, false);
        char* end = nullptr;
        if (want_int) {
          errno = 0;
          const long long x = std::strtoll(t.c_str(), &end, 10);
          if (end == t.c_str() || errno == ERANGE) return def ? *def : Value::integer(0);
          return Value::integer(x);
        }
        const double x = std::strtod(t.c_str(), &end);
        if (end == t.c_str()) return def ? *def : Value::real(0);
        return Value::real(x);
      }
      if (v.k == VK::kBool) return want_int ? Value::integer(v.b ? 1 : 0) : Value::real(v.b ? 1 : 0);
      if (v.k == VK::kInt) return want_int ? v : Value::real(static_cast<double>(v.i));
      if (v.k == VK::kFloat) {
        if (!want_int) return v;
        if (called) return v;  // @huggingface/jinja keeps the number as is with arguments
        if (!std::isfinite(v.f) || std::fabs(v.f) >= 9.2e18) fail(pos, "int: value out of range");
        return Value::integer(static_cast<int64_t>(std::floor(v.f)));
      }
    }
    if (name == "length" || name == "count") {
      if (v.k == VK::kArray) return Value::integer(static_cast<int64_t>(v.arr->size()));
      if (v.k == VK::kString) return Value::integer(static_cast<int64_t>(cp_count(v.s)));
      if (v.k == VK::kObject) return Value::integer(static_cast<int64_t>(v.obj->size()));
    }
    if (name == "list") {
      if (v.k == VK::kArray) return v;
      if (v.k == VK::kString) {
        Array out;
        for (std::string& c : code_points(v.s)) out.push_back(Value::str(std::move(c)));
        charge(out.size(), pos);
        return Value::array(std::move(out));
      }
      if (v.k == VK::kObject) return call_method(v, "keys", args, pos);
    }
    if (name == "join") {
      const Value* sep = args.get(0, "d");
      if (sep && sep->k != VK::kString) fail(pos, "join: the separator must be a string");
      const Value* attr = args.get(1, "attribute");
      const std::string d = sep ? sep->s : "";
      if (v.k == VK::kString) {
        if (!called) return v;
        std::string out;
        bool first = true;
        for (const std::string& c : code_points(v.s)) {
          if (!first) out += d;
          first = false;
          out += c;
          if (out.size() > lim.max_output_bytes) fail(pos, "join result exceeds the size limit");
        }
        return make_str(std::move(out), pos);
      }
      if (v.k == VK::kArray) {
        std::string out;
        for (size_t k = 0; k < v.arr->size(); ++k) {
          if (k) out += d;
          Value item = attr && attr->k == VK::kString ? attribute_path((*v.arr)[k], attr->s) : (*v.arr)[k];
          out += item.k == VK::kNone || item.undefined() ? std::string() : concat_text(item, pos);
          if (out.size() > lim.max_output_bytes) fail(pos, "join result exceeds the size limit");
        }
        return make_str(std::move(out), pos);
      }
    }
    if (v.k == VK::kArray) {
      const Array& a = *v.arr;
      if (name == "first") return a.empty() ? Value() : a.front();
      if (name == "last") return a.empty() ? Value() : a.back();
      if (name == "reverse") return Value::array(Array(a.rbegin(), a.rend()));
      if (name == "unique") {
        Array out;
        for (const Value& x : a) {
          bool seen = false;
          for (const Value& y : out) seen = seen || strict_equal(x, y);
          if (!seen) out.push_back(x);
        }
        return Value::array(std::move(out));
      }
      if (name == "sort") {
        const Value* rev = args.get(0, "reverse");
        const Value* cs = args.get(1, "case_sensitive");
        const Value* attr = args.get(2, "attribute");
        if ((rev && rev->k != VK::kBool) || (cs && cs->k != VK::kBool)) fail(pos, "sort: reverse and case_sensitive are booleans");
        std::string path;
        if (attr && attr->k == VK::kString) path = attr->s;
        else if (attr && attr->k == VK::kInt) path = std::to_string(attr->i);
        else if (attr && attr->k != VK::kNone) fail(pos, "sort: attribute must be a string or an integer");
        const bool reverse = rev && rev->b, case_sensitive = cs && cs->b;
        Array out = a;
        std::stable_sort(out.begin(), out.end(), [&](const Value& x, const Value& y) {
          const int c = path.empty() ? compare(x, y, case_sensitive, pos)
                                     : compare(attribute_path(x, path), attribute_path(y, path), case_sensitive, pos);
          return reverse ? c > 0 : c < 0;
        });
        return Value::array(std::move(out));
      }
      if (name == "selectattr" || name == "rejectattr") {
        const bool select = name == "selectattr";
        if (args.pos.empty() || args.pos[0].k != VK::kString) fail(pos, name + " needs an attribute name");
        const std::string attr = args.pos[0].s;
        std::string test;
        if (args.pos.size() > 1) {
          if (args.pos[1].k != VK::kString) fail(pos, name + ": the test name must be a string");
          test = args.pos[1].s;
        }
        const Value* targ = args.pos.size() > 2 ? &args.pos[2] : nullptr;
        Array out;
        for (const Value& item : a) {
          if (item.k != VK::kObject && item.k != VK::kNamespace) fail(pos, name + " applies to a list of dicts");
          const Value* x = item.find(attr);
          const bool r = x && (test.empty() ? x->truthy() : test_value(test, *x, targ, pos));
          if (r == select) out.push_back(item);
        }
        return Value::array(std::move(out));
      }
      if (name == "map") {
        if (const Value* attr = args.get(99, "attribute")) {
          if (attr->k != VK::kString) fail(pos, "map: attribute must be a string");
          const Value* def = args.get(99, "default");
          Array out;
          for (const Value& item : a) {
            if (item.k != VK::kObject && item.k != VK::kNamespace) fail(pos, "map(attribute=...) applies to a list of dicts");
            Value x = attribute_path(item, attr->s);
            out.push_back(x.undefined() && def ? *def : x);
          }
          return Value::array(std::move(out));
        }
        if (!args.pos.empty() && args.pos[0].k == VK::kString) {
          Args rest;
          rest.pos.assign(args.pos.begin() + 1, args.pos.end());
          rest.kw = args.kw;
          Array out;
          for (const Value& item : a) {
            step(pos);
            Args copy = rest;
            out.push_back(filter(args.pos[0].s, item, copy, !rest.pos.empty() || !rest.kw.empty(), pos, env));
          }
          return Value::array(std::move(out));
        }
        fail(pos, "map needs attribute=NAME or a filter name");
      }
    }
    if (v.k == VK::kString) {
      if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        return string_method(v.s, name, args, pos);
      }
      if (name == "trim") {
        const Value* chars = args.get(0, "chars");
        if (chars && chars->k == VK::kString) return Value::str(strip_chars(v.s, chars->s, true, true));
        return Value::str(trim_js(v.s, true, true));
      }
      if (name == "replace") return string_method(v.s, "replace", args, pos);
      if (name == "indent") {
        const Value* width = args.get(0, "width");
        const Value* first = args.get(1, "first");
        const Value* blank = args.get(2, "blank");
        std::string pad(4, ' ');
        if (width && width->k == VK::kInt) {
          if (width->i < 0 || width->i > 1024) fail(pos, "indent: width must be in 0..1024");
          pad.assign(static_cast<size_t>(width->i), ' ');
        } else if (width && width->k == VK::kString) {
          pad = width->s;
        } else if (width) {
          fail(pos, "indent: width must be a number");
        }
        std::string out;
        size_t at = 0, line = 0;
        while (true) {
          const size_t nl = v.s.find('\n', at);
          const std::string part = v.s.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
          const bool skip = (line == 0 && !(first && first->truthy())) || (part.empty() && !(blank && blank->truthy()));
          if (line) out += '\n';
          if (!skip) out += pad;
          out += part;
          if (out.size() > lim.max_output_bytes) fail(pos, "indent result exceeds the size limit");
          if (nl == std::string::npos) break;
          at = nl + 1;
          ++line;
        }
        return make_str(std::move(out), pos);
      }
    }
    if (v.is_num() && name == "abs") return v.k == VK::kInt ? (v.i == INT64_MIN ? Value::real(-static_cast<double>(v.i)) : Value::integer(std::llabs(v.i))) : Value::real(std::fabs(v.f));
    if (v.k == VK::kBool && name == "bool") return v;
    if (v.k == VK::kObject) {
      if (name == "items") return items_of(v, pos);
      if (is_dict_method(name)) return call_method(v, name, args, pos);
    }
    (void)env;
    fail(pos, "filter '" + name + "' cannot be applied to a " + kind_name(v));
  }
};

// ------------------------------------------------------------------------------------------ globals / context
Value from_json(const Json& j, int depth) {
  if (depth > 512) return Value::none();
  switch (j.type()) {
    case Json::Type::kNull: return Value::none();
    case Json::Type::kBool: return Value::boolean(j.as_bool());
    case Json::Type::kNumber: {
      if (j.is_int()) return Value::integer(j.as_int());
      const double d = j.as_double();
      if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9.2e18) return Value::integer(static_cast<int64_t>(d));
      return Value::real(d);
    }
    case Json::Type::kString: return Value::str(j.as_string());
    case Json::Type::kArray: {
      Array a;
      a.reserve(j.as_array().size());
      for (const Json& x : j.as_array()) a.push_back(from_json(x, depth + 1));
      return Value::array(std::move(a));
    }
    case Json::Type::kObject: {
      // JavaScript object order: integer-like keys first in ascending order, then the rest as written;
      // a repeated key keeps its first place and its last value.
      Value o = Value::object();
      std::vector<std::pair<uint64_t, const Json::Member*>> index_keys;
      auto array_index = [](const std::string& k, uint64_t* out) {
        if (k.empty() || k.size() > 10 || (k.size() > 1 && k[0] == '0')) return false;
        uint64_t v = 0;
        for (char c : k) {
          if (c < '0' || c > '9') return false;
          v = v * 10 + static_cast<uint64_t>(c - '0');
        }
        *out = v;
        return v < 4294967295ull;
      };
      for (const Json::Member& m : j.as_object()) {
        uint64_t idx = 0;
        if (array_index(m.first, &idx)) index_keys.push_back({idx, &m});
      }
      std::stable_sort(index_keys.begin(), index_keys.end(), [](auto& a, auto& b) { return a.first < b.first; });
      for (auto& [idx, m] : index_keys) o.set(m->first, from_json(m->second, depth + 1));
      for (const Json::Member& m : j.as_object()) {
        uint64_t idx = 0;
        if (!array_index(m.first, &idx)) o.set(m.first, from_json(m.second, depth + 1));
      }
      return o;
    }
  }
  return Value();
}

std::string strftime_js(const std::string& fmt) {
  static const char* kMonthsLong[] = {"January", "February", "March",     "April",   "May",      "June",
                                      "July",    "August",   "September", "October", "November", "December"};
  static const char* kMonthsShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  auto pad2 = [](int v) { return (v < 10 ? "0" : "") + std::to_string(v); };
  std::string out;
  for (size_t k = 0; k < fmt.size(); ++k) {
    if (fmt[k] != '%' || k + 1 >= fmt.size()) {
      out += fmt[k];
      continue;
    }
    const char c = fmt[k + 1];
    switch (c) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += kMonthsShort[tm.tm_mon]; break;
      case 'B': out += kMonthsLong[tm.tm_mon]; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += '%'; break;
      default: out += '%'; out += c; break;
    }
    ++k;
  }
  return out;
}

void install_globals(Scope& g) {
  g.set("false", Value::boolean(false));
  g.set("true", Value::boolean(true));
  g.set("none", Value::none());
  g.set("False", Value::boolean(false));
  g.set("True", Value::boolean(true));
  g.set("None", Value::none());
  g.set("raise_exception", Value::function("raise_exception", [](Interp& in, Args& args, const ScopePtr&, uint32_t pos) -> Value {
    std::string msg;
    for (const Value& v : args.pos) msg += (msg.empty() ? "" : " ") + in.to_text(v, pos);
    throw TemplateError(pos, "raise_exception: " + msg);
  }));
  g.set("strftime_now", Value::function("strftime_now", [](Interp& in, Args& args, const ScopePtr&, uint32_t pos) {
    const Value* f = args.get(0, "format");
    if (!f || f->k != VK::kString) Interp::fail(pos, "strftime_now needs a format string");
    return in.make_str(strftime_js(f->s), pos);
  }));
  g.set("range", Value::function("range", [](Interp& in, Args& args, const ScopePtr&, uint32_t pos) {
    for (const Value& v : args.pos) {
      if (v.k != VK::kInt) Interp::fail(pos, "range() takes integers");
    }
    int64_t start = 0, stop = 0, stepv = 1;
    if (args.pos.size() == 1) {
      stop = args.pos[0].i;
    } else if (args.pos.size() == 2 || args.pos.size() == 3) {
      start = args.pos[0].i;
      stop = args.pos[1].i;
      if (args.pos.size() == 3) stepv = args.pos[2].i;
    } else {
      Interp::fail(pos, "range() takes 1 to 3 integers");
    }
    if (stepv == 0) Interp::fail(pos, "range() step must not be zero");
    const double count = std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(stepv));
    if (count > static_cast<double>(in.lim.max_range)) {
      Interp::fail(pos, "range() of " + js_number(count) + " elements exceeds the limit of " + std::to_string(in.lim.max_range));
    }
    Array out;
    for (int64_t k = start; stepv > 0 ? k < stop : k > stop;) {
      out.push_back(Value::integer(k));
      if (__builtin_add_overflow(k, stepv, &k)) break;
    }
    in.charge(out.size(), pos);
    return Value::array(std::move(out));
  }));
  g.set("namespace", Value::function("namespace", [](Interp& in, Args& args, const ScopePtr&, uint32_t pos) {
    Value ns = Value::object({}, VK::kNamespace);
    if (args.pos.size() > 1) Interp::fail(pos, "namespace() takes at most one positional argument");
    if (args.pos.size() == 1) {
      const Value& src = args.pos[0];
      if (src.k == VK::kObject) {
        for (const auto& [k, v] : *src.obj) ns.set(k, v);
      } else if (src.k == VK::kArray) {
        for (const Value& pair : *src.arr) {
          if (pair.k != VK::kArray || pair.arr->size() != 2 || (*pair.arr)[0].k != VK::kString) {
            Interp::fail(pos, "namespace() expects a dict or a list of [key, value] pairs");
          }
          ns.set((*pair.arr)[0].s, (*pair.arr)[1]);
        }
      } else {
        Interp::fail(pos, std::string("namespace() cannot read a ") + kind_name(src));
      }
    }
    for (const auto& [k, v] : args.kw) ns.set(k, v);
    Interp::check_nest(ns, pos);
    in.namespaces.push_back(ns.obj);
    return ns;
  }));
}

}  // namespace

Result<std::string> Template::render(const Json& context, const Limits& limits) const {
  if (!program_) return invalid_argument(name_ + ": template was not parsed");
  if (!context.is_object()) return invalid_argument(name_ + ": the render context must be a JSON object");
  Interp in(limits, *source_);
  try {
    auto globals = std::make_shared<Scope>(nullptr);
    install_globals(*globals);
    for (const Json::Member& m : context.as_object()) globals->set(m.first, from_json(m.second, 0));
    return in.block(program_->body, globals);
  } catch (const TemplateError& e) {
    return invalid_argument(name_ + ":" + line_col(*source_, e.pos) + ": " + e.what());
  } catch (const BreakSignal&) {
    return invalid_argument(name_ + ": 'break' outside a loop");
  } catch (const ContinueSignal&) {
    return invalid_argument(name_ + ": 'continue' outside a loop");
  } catch (const std::bad_alloc&) {
    return invalid_argument(name_ + ": out of memory while rendering");
  }
}

}  // namespace nxrt::genai::jinja
