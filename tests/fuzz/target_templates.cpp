// Fuzz body: the chat-template engine (parser + renderer) on arbitrary template text, rendered
// with a small fixed conversation. Any input must give a rendering or an error Status with a line and
// column: no crash, no sanitizer report, no hang (render steps are bounded), no runaway memory.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_targets.h"
#include "genai/jinja/jinja.h"
#include "genai/json.h"

namespace nxrt::fuzz {

using genai::Json;
namespace jinja = genai::jinja;

namespace {

const Json& context() {
  static const Json ctx = [] {
    auto j = genai::parse_json(R"({
      "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "héllo <b>"},
                   {"role": "assistant", "content": "<think>r</think>ok", "tool_calls": [
                     {"type": "function", "function": {"name": "f", "arguments": {"a": 1, "b": [true, null]}}}]},
                   {"role": "tool", "content": "42"}],
      "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
      "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>", "n": 3, "x": 1.5
    })");
    return j.ok() ? j.value() : Json::object();
  }();
  return ctx;
}

}  // namespace

bool templates(const uint8_t* data, size_t size) {
  if (size > 4096) return true;  // long inputs only slow the search down
  jinja::Limits limits;
  limits.max_steps = 200'000;
  limits.max_output_bytes = 1 << 20;
  limits.max_total_bytes = 16 << 20;
  limits.max_range = 10'000;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto t = jinja::Template::parse(text, "fuzz");
  if (!t.ok()) {
    // A parse error always carries "fuzz:LINE:COL: " or names the size limit.
    return t.status().message().rfind("fuzz:", 0) == 0;
  }
  auto r = t->render(context(), limits);
  return r.ok() || !r.status().message().empty();
}

}  // namespace nxrt::fuzz
