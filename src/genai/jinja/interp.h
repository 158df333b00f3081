// The template evaluator's state and operations (private to the engine). One Interp lives for one
// render: it counts steps, bytes and depth against the Limits, and fails with TemplateError.
// Its operations are defined by topic: render.cpp (expressions and statements), values.cpp (printing,
// JSON, comparison), members.cpp (member access, string and dict methods), operators.cpp, tests.cpp,
// filters.cpp; the global functions are in globals.cpp.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "genai/jinja/ast.h"
#include "genai/jinja/jinja.h"
#include "genai/jinja/value.h"

namespace nxrt::genai {
class Json;
}

namespace nxrt::genai::jinja {

// How tojson (and printing of lists and dicts) lays JSON out.
struct JsonStyle {
  int indent = 0;
  bool ensure_ascii = false;
  bool sort_keys = false;
  std::string item_sep = ", ", key_sep = ": ";
  bool undefined_as_null = true;
};

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

  Interp(const Limits& l, const std::string& src) : lim(l), source(src) {}
  ~Interp() {
    for (auto& w : namespaces) {
      if (auto m = w.lock()) {
        Members drop;
        drop.swap(*m);  // destroyed after the swap, when no member refers back into *m anymore
      }
    }
  }

  [[noreturn]] static void fail(uint32_t pos, const std::string& msg) { throw TemplateError(pos, msg); }

  // A value that stays around (a variable, a namespace attribute) may not nest deeper than kMaxNest:
  // growing a list inside a loop would otherwise make its destruction recurse without bound.
  static void check_nest(const Value& v, uint32_t pos) {
    if (v.nest > kMaxNest) fail(pos, "value nests deeper than " + std::to_string(kMaxNest) + " levels");
  }
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

  // ------------------------------------------------------------ values as text, comparison (values.cpp)
  void to_json(std::string& out, const Value& v, const JsonStyle& st, int level, uint32_t pos);
  // How `{{ v }}` prints v.
  std::string to_text(const Value& v, uint32_t pos);
  // How `~`, string `+` and join see a value: JavaScript's String() of the raw value, as
  // @huggingface/jinja concatenates. Floats lose the ".0", a list joins its items' printed forms with
  // ",", a dict is "[object Map]".
  std::string concat_text(const Value& v, uint32_t pos);
  // `==` (JavaScript's loose equality, lists and dicts by identity).
  static bool loose_equal(const Value& a, const Value& b);
  // `in` and the equality tests: numbers by value, else same kind and equal.
  static bool strict_equal(const Value& a, const Value& b);
  // Sort order of numbers and strings (-1, 0, 1); other kinds fail.
  int compare(const Value& a, const Value& b, bool case_sensitive, uint32_t pos);

  // ------------------------------------------------------------ expressions and statements (render.cpp)
  // Renders a statement list to text.
  std::string block(const std::vector<NodePtr>& body, const ScopePtr& env);
  Value eval(const Node& n, const ScopePtr& env);
  Args eval_args(const std::vector<NodePtr>& nodes, const ScopePtr& env);
  void assign_names(const Node& target, const Value& v, Scope& scope, uint32_t pos);
  void run_set(const Node& n, const ScopePtr& env);
  std::string run_for(const Node& n, const ScopePtr& env);
  // Names a macro body refers to as `varargs` / `kwargs` decide whether extra arguments are accepted.
  static void find_special(const Node& n, bool& varargs, bool& kwargs);
  void bind_params(const std::string& name, const std::vector<NodePtr>& params, bool varargs, bool kwargs, Args& args,
                   Scope& scope, const ScopePtr& scope_ptr, uint32_t pos);
  void define_macro(const Node& n, const ScopePtr& env);
  Value run_call_block(const Node& n, const ScopePtr& env);

  // ------------------------------------------------------------ members and methods (members.cpp)
  Value slice(const Value& obj, const Node& s, const ScopePtr& env);
  Value bound_method(const Value& obj, const std::string& name);
  Value get_member(const Value& obj, const Value& prop, uint32_t pos);
  Value member(const Node& n, const ScopePtr& env);
  Value call_method(const Value& obj, const std::string& name, Args& args, uint32_t pos);
  Value items_of(const Value& obj, uint32_t pos);
  Value dictsort(const Value& obj, Args& args, uint32_t pos);
  const std::string& string_arg(const Args& args, size_t i, const char* name, const char* fn, uint32_t pos);
  Value string_method(const std::string& s, const std::string& name, Args& args, uint32_t pos);
  std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count, uint32_t pos);
  Value split(const std::string& s, Args& args, uint32_t pos);
  static bool is_dict_method(const std::string& n);

  // ------------------------------------------------------------ operators (operators.cpp)
  Value unary(const Node& n, const ScopePtr& env);
  Value arith(const std::string& op, const Value& l, const Value& r, uint32_t pos);
  Value binary(const Node& n, const ScopePtr& env);
  static std::string describe(const Node& n);

  // ------------------------------------------------------------ tests (tests.cpp)
  bool run_test(const Node& n, const ScopePtr& env);
  bool test_value(const std::string& t, const Value& v, const Value* arg, uint32_t pos);

  // ------------------------------------------------------------ filters (filters.cpp)
  Value attribute_path(const Value& item, const std::string& path);
  Value tojson(const Value& v, const Args& args, uint32_t pos);
  Value apply_filter(const Value& v, const Node& f, const ScopePtr& env);
  Value filter(const std::string& name, const Value& v, Args& args, bool called, uint32_t pos, const ScopePtr& env);
  // The filter families `filter` dispatches to; nullopt when `name` is not theirs for this value.
  std::optional<Value> conversion_filter(const std::string& name, const Value& v, Args& args, bool called, uint32_t pos);
  std::optional<Value> join_filter(const Value& v, Args& args, bool called, uint32_t pos);
  std::optional<Value> list_filter(const std::string& name, const Value& v, Args& args, uint32_t pos,
                                   const ScopePtr& env);
  std::optional<Value> string_filter(const std::string& name, const Value& v, Args& args, uint32_t pos);
};

// The render context: a JSON value as a template value (objects in JavaScript's key order).
Value value_from_json(const Json& j, int depth);
// Puts the global functions and constants into the root scope.
void install_globals(Scope& g);

}  // namespace nxrt::genai::jinja
