// Renders a parsed template: the evaluator (expressions and statements: if, for, set, macro, call,
// filter blocks) and Template::render. Values are in value.h; printing and comparison in values.cpp;
// members and methods, operators, tests, filters and globals have a file each.
//
// The evaluator signals errors with TemplateError (and break/continue with small control exceptions)
// internally, because nearly every line can fail and threading Result<> through each would bury the
// semantics; Template::render catches them all and returns a Status. Nothing escapes the engine.
#include <memory>
#include <string>
#include <utility>
#include <vector>
#include "genai/jinja/interp.h"
#include "genai/jinja/jinja.h"
#include "genai/jinja/text.h"
#include "genai/json.h"

namespace nxrt::genai::jinja {

std::string Interp::block(const std::vector<NodePtr>& body, const ScopePtr& env) {
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

Value Interp::eval(const Node& n, const ScopePtr& env) {
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

Args Interp::eval_args(const std::vector<NodePtr>& nodes, const ScopePtr& env) {
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

void Interp::assign_names(const Node& target, const Value& v, Scope& scope, uint32_t pos) {
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

void Interp::run_set(const Node& n, const ScopePtr& env) {
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

std::string Interp::run_for(const Node& n, const ScopePtr& env) {
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
void Interp::find_special(const Node& n, bool& varargs, bool& kwargs) {
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

void Interp::bind_params(const std::string& name, const std::vector<NodePtr>& params, bool varargs, bool kwargs, Args& args,
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

void Interp::define_macro(const Node& n, const ScopePtr& env) {
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

Value Interp::run_call_block(const Node& n, const ScopePtr& env) {
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

Result<std::string> Template::render(const Json& context, const Limits& limits) const {
  if (!program_) return invalid_argument(name_ + ": template was not parsed");
  if (!context.is_object()) return invalid_argument(name_ + ": the render context must be a JSON object");
  Interp in(limits, *source_);
  try {
    auto globals = std::make_shared<Scope>(nullptr);
    install_globals(*globals);
    for (const Json::Member& m : context.as_object()) globals->set(m.first, value_from_json(m.second, 0));
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
