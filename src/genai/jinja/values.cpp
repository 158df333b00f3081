// Values as text (how {{ }} prints, how ~ concatenates, tojson) and value comparison (==, `in`, sort
// order), with @huggingface/jinja's semantics; and the JSON render context turned into values.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include "genai/jinja/interp.h"
#include "genai/jinja/text.h"
#include "genai/json.h"

namespace nxrt::genai::jinja {

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


void Interp::to_json(std::string& out, const Value& v, const JsonStyle& st, int level, uint32_t pos) {
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
std::string Interp::to_text(const Value& v, uint32_t pos) {
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
std::string Interp::concat_text(const Value& v, uint32_t pos) {
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

bool Interp::loose_equal(const Value& a, const Value& b) {
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

bool Interp::strict_equal(const Value& a, const Value& b) {
  if (a.is_num() && b.is_num()) return a.num() == b.num();
  if (a.k != b.k) return false;
  switch (a.k) {
    case VK::kUndefined: case VK::kNone: return true;
    case VK::kBool: return a.b == b.b;
    case VK::kString: return a.s == b.s;
    default: return loose_equal(a, b);
  }
}

int Interp::compare(const Value& a, const Value& b, bool case_sensitive, uint32_t pos) {
  auto numeric = [](const Value& v) { return v.k == VK::kInt || v.k == VK::kFloat || v.k == VK::kBool; };
  if (a.k == VK::kNone && b.k == VK::kNone) return 0;
  if (a.k == VK::kUndefined && b.k == VK::kUndefined) return 0;
  if (numeric(a) && numeric(b)) return a.num() < b.num() ? -1 : a.num() > b.num() ? 1 : 0;
  if (a.k == VK::kString && b.k == VK::kString) {
    const std::string x = case_sensitive ? a.s : change_case(a.s, false, pos);
    const std::string y = case_sensitive ? b.s : change_case(b.s, false, pos);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail(pos, std::string("cannot compare ") + kind_name(a) + " with " + kind_name(b));
}

Value value_from_json(const Json& j, int depth) {
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
      for (const Json& x : j.as_array()) a.push_back(value_from_json(x, depth + 1));
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
      for (auto& [idx, m] : index_keys) o.set(m->first, value_from_json(m->second, depth + 1));
      for (const Json::Member& m : j.as_object()) {
        uint64_t idx = 0;
        if (!array_index(m.first, &idx)) o.set(m.first, value_from_json(m.second, depth + 1));
      }
      return o;
    }
  }
  return Value();
}

}  // namespace nxrt::genai::jinja
