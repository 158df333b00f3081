// Tests: `x is defined`, `x is divisibleby 3`, `x is in list`...
#include "genai/jinja/interp.h"
#include "genai/jinja/text.h"

namespace nxrt::genai::jinja {

bool Interp::run_test(const Node& n, const ScopePtr& env) {
  Value v = eval(*n.a, env);
  const std::string& t = n.str;
  Value arg;
  const bool has_arg = n.b != nullptr;
  if (has_arg) arg = eval(*n.b, env);
  return test_value(t, v, has_arg ? &arg : nullptr, n.pos);
}

bool Interp::test_value(const std::string& t, const Value& v, const Value* arg, uint32_t pos) {
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
  if (t == "lower") return v.k == VK::kString && v.s == change_case(v.s, false, pos);
  if (t == "upper") return v.k == VK::kString && v.s == change_case(v.s, true, pos);
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

}  // namespace nxrt::genai::jinja
