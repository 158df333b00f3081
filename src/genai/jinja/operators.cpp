// Unary and binary operators: arithmetic with Python's integer semantics (overflow turns to float),
// comparisons, `in`, `~` and string / list `+`, `and` / `or` short-circuit.
#include <cmath>
#include <cstdint>
#include "genai/jinja/interp.h"

namespace nxrt::genai::jinja {

Value Interp::unary(const Node& n, const ScopePtr& env) {
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

Value Interp::arith(const std::string& op, const Value& l, const Value& r, uint32_t pos) {
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

Value Interp::binary(const Node& n, const ScopePtr& env) {
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

std::string Interp::describe(const Node& n) {
  if (n.kind == NodeKind::kIdent) return "'" + n.str + "'";
  if (n.kind == NodeKind::kMember && !n.b->str.empty() && !n.flag) return describe(*n.a) + "." + n.b->str;
  return "expression";
}

}  // namespace nxrt::genai::jinja
