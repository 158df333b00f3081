// `nxrt chat MODEL_DIR`: a REPL over the model's chat template. Each turn re-renders the whole
// conversation and feeds the model only what its KV cache does not already hold: the longest common
// prefix of the new prompt and the generator's sequence is kept, the generator rewinds where they
// differ. Reads lines from standard input (a terminal or not: scripts pipe a session in); the prompt
// "> " is shown only on a terminal.
//   /reset        forget the conversation (the system prompt stays)
//   /system TEXT  set the system prompt (the next turn re-renders from the start of the change)
//   /stats        one line: turns, cache length, and for the last turn prompt tokens, prefilled tokens
//                 (the debug counter of positions the model actually ran), ttft and speeds
//   /exit         quit (so does end of input)
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

#include "nxrt/genai.h"
#include "nxrt/tokenizer.h"
#include "text_session.h"

using namespace nxrt;

namespace {

const char* kUsage =
    "usage: nxrt chat MODEL_DIR [--system TEXT] [--max-new-tokens N] [--max-length N] [--threads N]\n"
    "                 [--opt disabled|basic|all] [--kv-dtype float16|float32] [--stop STR]... [--ignore-eos]\n"
    "                 [--weight-scales float16|model]\n"
    "                 [--do-sample] [--top-k K]\n"
    "                 [--top-p P] [--temperature T] [--seed S]\n"
    "  one user message per line; commands: /reset, /system TEXT, /stats, /exit\n"
    "  --max-new-tokens N  reply length limit (default 256)\n"
    "  --max-length N      KV capacity for the whole conversation (default: the model's context length,\n"
    "                      at most 4096)\n"
    "  --kv-dtype T        float16: a float16 KV cache for a float32 GroupQueryAttention model (as generate)\n"
    "  --weight-scales S   float16: float32 MatMulNBits scales rounded to float16 values (as generate)\n";

[[noreturn]] void usage(const std::string& msg) { cli::usage_exit(msg, kUsage); }

void print_error(const Status& s) { cli::report_error(s); }

int64_t count_arg(const std::string& flag, const std::string& v) { return cli::count_arg(flag, v, kUsage); }
double real_arg(const std::string& flag, const std::string& v) { return cli::real_arg(flag, v, kUsage); }

struct Message {
  std::string role, content;
};

std::string messages_json(const std::string& system, const std::vector<Message>& msgs) {
  std::string out = "[";
  auto add = [&](const std::string& role, const std::string& content) {
    if (out.size() > 1) out += ",";
    out += "{\"role\":" + cli::json_quote(role) + ",\"content\":" + cli::json_quote(content) + "}";
  };
  if (!system.empty()) add("system", system);
  for (const Message& m : msgs) add(m.role, m.content);
  return out + "]";
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  std::string model_path, system, opt = "all";
  int64_t new_tokens = 256, max_length = -1;
  int threads = 1;
  DataType kv_dtype = DataType::kUndefined;  // --kv-dtype
  DataType weight_scales = DataType::kUndefined;  // --weight-scales
  cli::ReplyLimits limits;
  genai::SearchOptions so;
  bool sample = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0) {
      if (!model_path.empty()) usage("unexpected argument '" + a + "'");
      model_path = a;
      continue;
    }
    if (a == "--ignore-eos") { limits.ignore_eos = true; continue; }
    if (a == "--do-sample") { sample = true; continue; }
    if (i + 1 >= argc) usage(a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--system") system = v;
    else if (a == "--max-new-tokens") new_tokens = count_arg(a, v);
    else if (a == "--max-length") max_length = count_arg(a, v);
    else if (a == "--threads") threads = static_cast<int>(count_arg(a, v));
    else if (a == "--kv-dtype") kv_dtype = cli::kv_dtype_arg(v, kUsage);
    else if (a == "--weight-scales") weight_scales = cli::weight_scales_arg(v, kUsage);
    else if (a == "--opt") {
      if (v != "disabled" && v != "basic" && v != "all") usage("--opt takes disabled|basic|all");
      opt = v;
    } else if (a == "--stop") {
      if (v.empty()) usage("--stop needs a non-empty string");
      limits.stop_strings.push_back(v);
    } else if (a == "--top-k") so.top_k = count_arg(a, v);
    else if (a == "--top-p") so.top_p = real_arg(a, v);
    else if (a == "--temperature") so.temperature = real_arg(a, v);
    else if (a == "--seed") so.random_seed = static_cast<uint64_t>(count_arg(a, v));
    else usage("unknown option " + a);
  }
  if (model_path.empty()) usage("missing MODEL_DIR");
  if (threads < 1) usage("--threads must be at least 1");
  if (new_tokens < 1) usage("--max-new-tokens must be at least 1");
  limits.max_new_tokens = new_tokens;

  genai::ModelOptions mo;
  mo.session.threads = threads;
  mo.session.kv_cache_dtype = kv_dtype;
  mo.session.matmulnbits_scale_dtype = weight_scales;
  mo.session.opt_level = opt == "disabled" ? OptLevel::kDisabled : opt == "basic" ? OptLevel::kBasic : OptLevel::kAll;
  auto model_r = genai::Model::create(model_path, mo);
  if (!model_r.ok()) return print_error(model_r.status()), 1;
  const genai::Model& model = *model_r.value();
  auto tok_r = genai::Tokenizer::create(model);
  if (!tok_r.ok()) return print_error(tok_r.status()), 1;
  const genai::Tokenizer& tok = tok_r.value();
  if (auto t = tok.config().chat_template(false); !t.ok()) return print_error(t.status()), 1;
  limits.eos_ids = cli::text_eos_ids(model, tok);

  genai::GeneratorParams params(model);
  const int64_t context = model.config().context_length;
  // The KV cache is allocated at full capacity up front: default to at most 4096 positions so a model
  // with a long context does not reserve gigabytes for a short chat (--max-length raises it).
  const int64_t default_capacity = context > 0 ? std::min<int64_t>(context, 4096) : params.search.max_length;
  params.search.max_length = max_length > 0 ? max_length : default_capacity;
  if (context > 0 && params.search.max_length > context) {
    usage("--max-length " + std::to_string(params.search.max_length) + " exceeds model.context_length " +
          std::to_string(context));
  }
  params.search.do_sample = sample;
  if (sample) {
    params.search.top_k = so.top_k;
    params.search.top_p = so.top_p;
    params.search.temperature = so.temperature;
  }
  params.search.random_seed = so.random_seed;
  params.search.repetition_penalty = 1.0;
  params.search.stop_at_eos = false;
  auto gen_r = genai::Generator::create(model, params);
  if (!gen_r.ok()) return print_error(gen_r.status()), 1;
  genai::Generator& gen = *gen_r.value();

  const bool interactive = isatty(STDIN_FILENO) != 0;
  std::vector<Message> messages;
  int64_t turns = 0, total_prefilled = 0;
  cli::Reply last;
  std::string line;
  while (true) {
    if (interactive) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      messages.clear();
      Status s = gen.rewind_to(0);
      if (!s.ok()) print_error(s);
      std::printf("(conversation reset)\n");
      std::fflush(stdout);
      continue;
    }
    if (line == "/system" || line.rfind("/system ", 0) == 0) {
      system = line.size() > 8 ? line.substr(8) : "";
      std::printf("(system prompt %s)\n", system.empty() ? "cleared" : "set");
      std::fflush(stdout);
      continue;
    }
    if (line == "/stats") {
      std::printf("turns %lld  cache_tokens %zu  last_prompt_tokens %lld  last_prefilled %lld  last_reused %lld  "
                  "total_prefilled %lld  last_new_tokens %zu  last_ttft_ms %s\n",
                  static_cast<long long>(turns), gen.sequence().size(), static_cast<long long>(last.prompt_tokens),
                  static_cast<long long>(last.prefilled),
                  static_cast<long long>(last.prompt_tokens - last.prefilled), static_cast<long long>(total_prefilled),
                  last.tokens.size(), cli::fixed3(last.ttft_ms).c_str());
      std::fflush(stdout);
      continue;
    }
    if (line[0] == '/') {
      std::printf("unknown command %s (commands: /reset, /system TEXT, /stats, /exit)\n", line.c_str());
      std::fflush(stdout);
      continue;
    }
    messages.push_back({"user", line});
    auto rendered = tok.apply_chat_template(messages_json(system, messages), "", true);
    if (!rendered.ok()) {
      print_error(rendered.status());
      messages.pop_back();
      continue;
    }
    genai::EncodeOptions eo;
    eo.add_special_tokens = false;  // the template writes its own BOS
    auto ids = tok.encode(rendered.value(), eo);
    if (!ids.ok()) {
      print_error(ids.status());
      messages.pop_back();
      continue;
    }
    const std::vector<int64_t> prompt(ids->begin(), ids->end());
    auto reply = cli::generate_reply(gen, tok, prompt, limits, stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    if (!reply.ok()) {
      print_error(reply.status());
      messages.pop_back();
      std::fprintf(stderr, "(the turn was dropped; /reset starts over if the context is full)\n");
      continue;
    }
    last = std::move(reply).value();
    ++turns;
    total_prefilled += last.prefilled;
    messages.push_back({"assistant", last.text});
    std::fprintf(stderr, "%s\n", cli::summary_line(last).c_str());
  }
  return 0;
}
