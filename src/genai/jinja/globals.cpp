// The render's global functions: namespace, range, raise_exception, strftime_now, and the boolean /
// none constants.
#include <cmath>
#include <ctime>
#include "genai/jinja/interp.h"
#include "genai/jinja/text.h"

namespace nxrt::genai::jinja {

namespace {

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

}  // namespace

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

}  // namespace nxrt::genai::jinja
