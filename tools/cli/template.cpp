// `nxrt template TEMPLATE.jinja|MODEL_DIR --context CONTEXT.json`: prints the rendered template byte
// for byte (nothing added). CONTEXT is a JSON object with everything the template sees (messages, tools,
// add_generation_prompt, bos_token, ..., extra kwargs). For a model folder the template is the one
// `nxrt generate --chat` uses (chat_template.jinja, else tokenizer_config.json's chat_template; "tool_use"
// from a named list when CONTEXT has tools) and special tokens missing from CONTEXT come from
// tokenizer_config.json.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nxrt/tokenizer.h"
#include "text_session.h"

using namespace nxrt;

namespace {

const char* kUsage =
    "usage: nxrt template TEMPLATE.jinja|MODEL_DIR --context CONTEXT.json\n"
    "  prints the rendered template to stdout, byte for byte\n"
    "  CONTEXT.json  a JSON object: messages, tools, add_generation_prompt, bos_token, ... ('-': stdin)\n"
    "  MODEL_DIR     chat_template.jinja, else tokenizer_config.json's chat_template; special tokens missing\n"
    "                from CONTEXT come from tokenizer_config.json\n";

[[noreturn]] void usage(const std::string& msg) { cli::usage_exit(msg, kUsage); }

int fail(const Status& s) { return cli::report_error(s); }

// Whether the context has a non-empty "tools" list (decides between "default" and "tool_use").
bool context_has_tools(const std::string& context) {
  // The renderer parses the context properly; this only picks the template, so a cheap probe is enough:
  // render a one-line template that reports it.
  auto r = genai::render_chat_template("{{ 'yes' if tools is defined and tools else 'no' }}", context);
  return r.ok() && r.value() == "yes";
}

}  // namespace

int cmd_template(int argc, char** argv) {
  std::string source, context_path;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a == "--context") {
      if (i + 1 >= argc) usage("--context needs a file");
      context_path = argv[++i];
    } else if (a.rfind("--context=", 0) == 0) {
      context_path = a.substr(10);
    } else if (a.rfind("--", 0) == 0) {
      usage("unknown option " + a);
    } else if (source.empty()) {
      source = a;
    } else {
      usage("unexpected argument '" + a + "'");
    }
  }
  if (source.empty()) usage("missing TEMPLATE.jinja or MODEL_DIR");
  if (context_path.empty()) usage("missing --context CONTEXT.json");
  auto context = cli::read_text(context_path);
  if (!context.ok()) return fail(context.status());
  struct stat st {};
  if (stat(source.c_str(), &st) != 0) return fail(io_error("no such file or folder: " + source));
  Result<std::string> out = std::string();
  if (S_ISDIR(st.st_mode)) {
    auto cfg = genai::read_tokenizer_config(source);
    if (!cfg.ok()) return fail(cfg.status());
    auto text = cfg->chat_template(context_has_tools(context.value()));
    if (!text.ok()) return fail(text.status());
    out = genai::render_chat_template(text.value(), context.value(), &cfg.value(), cfg->chat_template_file);
  } else {
    auto text = cli::read_text(source);
    if (!text.ok()) return fail(text.status());
    out = genai::render_chat_template(text.value(), context.value(), nullptr, source);
  }
  if (!out.ok()) return fail(out.status());
  const std::string& s = out.value();
  if (!s.empty() && std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) return fail(io_error("writing stdout failed"));
  return std::fflush(stdout) == 0 ? 0 : 1;
}
