// A Jinja2 template engine for chat templates (the subset Hugging Face chat templates use).
//
// Semantics follow @huggingface/jinja (what transformers.js renders chat templates with), which in turn
// follows transformers' Python setup: trim_blocks and lstrip_blocks on, one trailing newline of the
// template dropped, `{% generation %}` markers removed. Where the two differ on output (printing
// booleans as true/false, none as nothing, lists and dicts as JSON, tojson's number formatting) this
// follows @huggingface/jinja, so `make check-templates` can require byte-identical output. Deliberate
// departures, chosen for Python's meaning where the JS one loses information:
//   - str.strip/lstrip/rstrip(chars) strip exactly `chars` (the JS version ignores the argument);
//   - string length, indexing and slicing count code points, not UTF-16 units;
//   - tojson(sort_keys=true) sorts keys by code point (Python), not by locale collation;
//   - a few extras the JS version rejects: tests with an argument (`x is divisibleby 3`, `in`), the
//     `list` filter on strings and mappings, `default` without parentheses.
//
// Untrusted templates are bounded: nesting depth at parse and at render time, a budget of evaluation
// steps (loop iterations included), the size of `range()`, and the bytes of every string built. Going
// over a bound is an error naming the template line and column, never a hang or a crash.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "nxrt/status.h"

namespace nxrt::genai {
class Json;
}

namespace nxrt::genai::jinja {

struct Limits {
  size_t max_output_bytes = size_t{32} << 20;  // the rendered text and any single string
  size_t max_total_bytes = size_t{256} << 20;  // all strings and lists built during one render
  uint64_t max_steps = 5'000'000;              // evaluated nodes + loop iterations
  int max_depth = 600;                         // nested evaluation (macro calls included)
  int64_t max_range = 1'000'000;               // elements of one range() / list
};

struct Node;  // parsed program (private to the engine)

class Template {
 public:
  // `name` prefixes error messages ("chat_template.jinja:3:14: ...").
  static Result<Template> parse(std::string_view source, std::string name = "template");

  // Renders with the members of `context` (a JSON object) as variables. Globals: namespace, range,
  // raise_exception, strftime_now, true/false/none (and True/False/None).
  Result<std::string> render(const Json& context, const Limits& limits = {}) const;

  const std::string& name() const { return name_; }

 private:
  Template() = default;
  std::shared_ptr<const Node> program_;
  std::shared_ptr<const std::string> source_;  // the original text, for line/column of runtime errors
  std::string name_;
};

}  // namespace nxrt::genai::jinja
