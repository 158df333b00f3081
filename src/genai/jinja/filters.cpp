// Filters: `x | tojson(indent=2)`, `items | selectattr("a")`, `s | trim`...
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <optional>
#include "genai/jinja/interp.h"
#include "genai/jinja/text.h"

namespace nxrt::genai::jinja {

Value Interp::attribute_path(const Value& item, const std::string& path) {
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

Value Interp::tojson(const Value& v, const Args& args, uint32_t pos) {
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

Value Interp::apply_filter(const Value& v, const Node& f, const ScopePtr& env) {
  const bool called = f.kind == NodeKind::kCall;
  const std::string& name = called ? f.a->str : f.str;
  Args args;
  if (called) args = eval_args(f.args, env);
  return filter(name, v, args, called, f.pos, env);
}

Value Interp::filter(const std::string& name, const Value& v, Args& args, bool called, uint32_t pos, const ScopePtr& env) {
  if (name == "safe") return v;
  if (name == "tojson") return tojson(v, args, pos);
  if (std::optional<Value> r = conversion_filter(name, v, args, called, pos)) return *std::move(r);
  if (name == "join") {
    if (std::optional<Value> r = join_filter(v, args, called, pos)) return *std::move(r);
  }
  if (v.k == VK::kArray) {
    if (std::optional<Value> r = list_filter(name, v, args, pos, env)) return *std::move(r);
  }
  if (v.k == VK::kString) {
    if (std::optional<Value> r = string_filter(name, v, args, pos)) return *std::move(r);
  }
  if (v.is_num() && name == "abs") return v.k == VK::kInt ? (v.i == INT64_MIN ? Value::real(-static_cast<double>(v.i)) : Value::integer(std::llabs(v.i))) : Value::real(std::fabs(v.f));
  if (v.k == VK::kBool && name == "bool") return v;
  if (v.k == VK::kObject) {
    if (name == "items") return items_of(v, pos);
    if (is_dict_method(name)) return call_method(v, name, args, pos);
  }
  fail(pos, "filter '" + name + "' cannot be applied to a " + kind_name(v));
}

// default / d, string, int, float, length / count, list.
std::optional<Value> Interp::conversion_filter(const std::string& name, const Value& v, Args& args, bool called,
                                               uint32_t pos) {
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
  return std::nullopt;
}

// join(d="", attribute=none) of a list, or of a string's characters.
std::optional<Value> Interp::join_filter(const Value& v, Args& args, bool called, uint32_t pos) {
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
  return std::nullopt;
}

// first, last, reverse, unique, sort, selectattr / rejectattr, map of a list `v`.
std::optional<Value> Interp::list_filter(const std::string& name, const Value& v, Args& args, uint32_t pos,
                                         const ScopePtr& env) {
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
  return std::nullopt;
}

// upper, lower, title, capitalize, trim, replace, indent of a string `v`.
std::optional<Value> Interp::string_filter(const std::string& name, const Value& v, Args& args, uint32_t pos) {
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
  return std::nullopt;
}

}  // namespace nxrt::genai::jinja
