// Member access (a.b, a[i], slices) and the methods of strings and dicts.
#include <algorithm>
#include <utility>
#include "genai/jinja/interp.h"
#include "genai/jinja/text.h"
#include "genai/utf8.h"

namespace nxrt::genai::jinja {
namespace {

int64_t wrap_index(int64_t i, size_t n) { return i < 0 ? i + static_cast<int64_t>(n) : i; }

bool is_string_method(const std::string& n) {
  static const char* kNames[] = {"upper", "lower", "strip", "lstrip", "rstrip", "title", "capitalize", "startswith",
                                 "endswith", "split", "replace"};
  return std::find_if(std::begin(kNames), std::end(kNames), [&](const char* k) { return n == k; }) != std::end(kNames);
}

}  // namespace

bool Interp::is_dict_method(const std::string& n) {
  return n == "get" || n == "items" || n == "keys" || n == "values" || n == "dictsort";
}

Value Interp::slice(const Value& obj, const Node& s, const ScopePtr& env) {
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

Value Interp::bound_method(const Value& obj, const std::string& name) {
  return Value::function(name, [obj, name](Interp& in, Args& args, const ScopePtr&, uint32_t pos) {
    return in.call_method(obj, name, args, pos);
  });
}

Value Interp::get_member(const Value& obj, const Value& prop, uint32_t pos) {
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

Value Interp::member(const Node& n, const ScopePtr& env) {
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

Value Interp::call_method(const Value& obj, const std::string& name, Args& args, uint32_t pos) {
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

Value Interp::items_of(const Value& obj, uint32_t pos) {
  Array out;
  for (const auto& [k, v] : *obj.obj) out.push_back(Value::array({Value::str(k), v}));
  charge(out.size(), pos);
  return Value::array(std::move(out));
}

Value Interp::dictsort(const Value& obj, Args& args, uint32_t pos) {
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

const std::string& Interp::string_arg(const Args& args, size_t i, const char* name, const char* fn, uint32_t pos) {
  const Value* v = args.get(i, name);
  if (!v || v->k != VK::kString) fail(pos, std::string(fn) + "() needs a string argument '" + name + "'");
  return v->s;
}

Value Interp::string_method(const std::string& s, const std::string& name, Args& args, uint32_t pos) {
  if (name == "upper" || name == "lower") return make_str(change_case(s, name == "upper", pos), pos);
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    const bool left = name != "rstrip", right = name != "lstrip";
    const Value* chars = args.get(0, "chars");
    if (chars && chars->k == VK::kString) return Value::str(strip_chars(s, chars->s, left, right));
    if (chars && chars->k != VK::kNone) fail(pos, name + "() takes a string or none");
    return Value::str(trim_js(s, left, right));
  }
  if (name == "title") return make_str(title_case(s), pos);
  if (name == "capitalize") return make_str(capitalize(s, pos), pos);
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

std::string Interp::replace(const std::string& s, const std::string& from, const std::string& to, int64_t count, uint32_t pos) {
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

Value Interp::split(const std::string& s, Args& args, uint32_t pos) {
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

}  // namespace nxrt::genai::jinja
