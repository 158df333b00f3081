// `nxrt generate`: greedy (or sampled) generation over an onnxruntime-genai style model folder, with
// the same prompt, timing definitions and --json keys as `ort generate` (../shared/tools/ort/ort-generate.js):
//   create_ms: Model::create; prefill_ms: the prefill session run; prefill_tok_s = prompt / prefill_ms;
//   ttft_ms: generation start to the first token (feeds, prefill, pick); decode_tok_s = (new_tokens - 1) /
//   time from the first token to the last (null with one token); decode_step_ms_median: one decode step
//   (run + pick); decode_steps_ms: every decode step's time in order (nxrt's own key). Exactly
//   --max-new-tokens tokens; EOS stops only with --stop-at-eos.
// --dump-logits FILE writes the logits row each new token was chosen from as a .npy (float32
// [new_tokens, vocab], the layout of tools/genai_reference.py's step_logits.npy); the buffer is sized before
// generation, and without the flag the decode loop does no extra work.
// Several prompts (repeated --prompt-ids, or several prompt texts) run as one batch, left-padded with
// pad_token_id; --num-beams runs beam search. Every returned sequence is printed (--json: "sequences",
// prompt and padding included, as Generator::get_sequence returns them).
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "nxrt/genai.h"
#include "nxrt/tokenizer.h"
#include "text_session.h"

using namespace nxrt;

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

const char* kUsage =
    "usage: nxrt generate MODEL_DIR [\"PROMPT TEXT\"... | --prompt-file F | --prompt-ids 1,2,3... | --prompt-len N]\n"
    "                     [--chat] [--system TEXT] [--stop STR]... [--ignore-eos] [--max-new-tokens N] [--max-length N]\n"
    "                     [--threads N] [--opt disabled|basic|all] [--kv-dtype float16|float32] [--warmup W] [--json]\n"
    "                     [--weight-scales float16|model]\n"
    "                     [--do-sample] [--top-k K] [--top-p P] [--min-p P] [--temperature T]\n"
    "                     [--repetition-penalty R] [--seed S] [--stop-at-eos] [--dump-logits FILE]\n"
    "                     [--num-beams N] [--num-return-sequences N] [--length-penalty X] [--min-length N]\n"
    "                     [--no-repeat-ngram-size N] [--logits last|every]\n"
    "  MODEL_DIR           folder with genai_config.json and the decoder .onnx (or the genai_config.json)\n"
    "  PROMPT TEXT         text to tokenize with the folder's tokenizer ('-': standard input); the reply streams\n"
    "                      to stdout as text, a summary line goes to stderr, generation stops at EOS; several\n"
    "                      prompt texts run as one batch (each reply printed after generation, \"[i] text\")\n"
    "  --prompt-file F     the prompt text from a file ('-': standard input)\n"
    "  --chat              wrap the prompt in the model's chat template (chat_template.jinja or\n"
    "                      tokenizer_config.json), with the generation prompt; --system TEXT adds a system turn\n"
    "  --stop STR          stop before STR (repeatable; not printed)\n"
    "  --ignore-eos        text mode: keep generating past EOS\n"
    "  --prompt-ids LIST   prompt token ids, comma-separated; repeat it for a batch (shorter prompts are\n"
    "                      left-padded with pad_token_id)\n"
    "  --prompt-len N      N prompt ids drawn with a fixed seed from [0, vocab) (default 16; same ids as ort generate)\n"
    "  --max-new-tokens N  tokens to generate, the first one from the prefill (default 32)\n"
    "  --max-length N      KV capacity (default prompt + new tokens; at most model.context_length)\n"
    "  --kv-dtype T        float16: keep a float32 model's GroupQueryAttention KV cache in float16 (half its\n"
    "                      memory and decode reads; attention still computes in float32); float32 (default):\n"
    "                      the model's own cache type\n"
    "  --weight-scales S   float16: round a model's float32 MatMulNBits block scales to float16 values, so\n"
    "                      the int4 weights are packed with 2-byte scales (fewer bytes a decode step reads;\n"
    "                      outputs move by that rounding, <= 2^-11 of a scale); model (default): as they are\n"
    "  --json              one JSON line with the keys of `ort generate` (text mode adds \"text\")\n"
    "  --dump-logits FILE  write the logits row each new token was chosen from (row 0: the prefill's last\n"
    "                      position) as NumPy .npy, float32 [new_tokens, vocab] (of the measured run; one prompt)\n"
    "  --num-beams N       beam search with N beams per prompt (ends at max length or when every prompt has N\n"
    "                      finished hypotheses); --num-return-sequences K (<= N) sequences per prompt, best first;\n"
    "                      --length-penalty X scores a hypothesis sum(log p) / length^X (default 1)\n"
    "  --min-length N      no EOS before the sequence (prompt included) has N tokens\n"
    "  --no-repeat-ngram-size N  never repeat an N-gram of the sequence\n"
    "  --logits last|every the LM head runs over each row's last position only (default, when the logits are\n"
    "                      a plain projection) or over every position of a run, as onnxruntime-genai does\n";

[[noreturn]] void usage(const std::string& msg) { cli::usage_exit(msg, kUsage); }

int fail(const Status& s) { return cli::report_error(s); }

int64_t parse_count(const std::string& flag, const std::string& v) { return cli::count_arg(flag, v, kUsage); }
double parse_real(const std::string& flag, const std::string& v) { return cli::real_arg(flag, v, kUsage); }
std::string num(double x) { return cli::fixed3(x); }

// The decode steps' times as a JSON array (ms, two decimals): where a generation's time goes step by step
// (the first steps of a generation run slower than the steady ones; docs/PERF.md).
std::string steps_json(const std::vector<double>& steps) {
  std::string out = "[";
  char buf[32];
  for (size_t i = 0; i < steps.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s%.2f", i ? "," : "", steps[i]);
    out += buf;
  }
  return out + "]";
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

struct RunResult {
  std::vector<int64_t> tokens;  // generated tokens of sequence 0
  std::vector<std::vector<int64_t>> sequences;  // every returned sequence (prompt and padding included)
  int64_t steps_run = 0;
  double prefill_ms = 0, ttft_ms = 0, decode_ms = 0;
  std::vector<double> steps;
  std::string kv_update;
};

// Appends the generator's current logits row (the one the next token is picked from) to `dump`.
Status dump_row(genai::Generator& gen, std::vector<float>* dump) {
  NXRT_ASSIGN_OR_RETURN(std::vector<float> row, gen.get_logits());
  dump->insert(dump->end(), row.begin(), row.end());
  return Status::Ok();
}

// `prompt`: batch_size rows of `prompt_len` ids (row-major). `dump`: when non-null, receives each new
// token's logits row (reserved by the caller; one row only).
Result<RunResult> generate_once(const genai::Model& model, const genai::GeneratorParams& params,
                                const std::vector<int64_t>& prompt, int64_t prompt_len, int64_t new_tokens,
                                std::vector<float>* dump) {
  NXRT_ASSIGN_OR_RETURN(std::unique_ptr<genai::Generator> gen, genai::Generator::create(model, params));
  RunResult r;
  const double t0 = now_ms();
  NXRT_RETURN_IF_ERROR(gen->append_tokens(prompt));
  r.prefill_ms = gen->stats().last_run_ms;
  if (dump) NXRT_RETURN_IF_ERROR(dump_row(*gen, dump));
  NXRT_RETURN_IF_ERROR(gen->generate_next_token());
  r.steps_run = 1;
  r.ttft_ms = now_ms() - t0;
  const double t2 = now_ms();
  for (int64_t k = 1; k < new_tokens && !gen->is_done(); ++k) {
    const double ts = now_ms();
    if (dump) NXRT_RETURN_IF_ERROR(dump_row(*gen, dump));  // runs the model over the pending token
    NXRT_RETURN_IF_ERROR(gen->generate_next_token());
    r.steps.push_back(now_ms() - ts);
    ++r.steps_run;
  }
  r.decode_ms = now_ms() - t2;
  r.kv_update = gen->kv_update();
  for (size_t i = 0; i < gen->num_sequences(); ++i) r.sequences.push_back(gen->get_sequence(i));
  if (!r.sequences.empty() && static_cast<int64_t>(r.sequences[0].size()) > prompt_len) {
    r.tokens.assign(r.sequences[0].begin() + prompt_len, r.sequences[0].end());
  }
  return r;
}

std::string join_ids(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// Left-pads every prompt to the longest with pad_token_id; row-major [prompts, longest].
Result<std::vector<int64_t>> pad_prompts(const std::vector<std::vector<int64_t>>& prompts, int64_t pad, int64_t* longest) {
  *longest = 0;
  for (const auto& p : prompts) *longest = std::max<int64_t>(*longest, static_cast<int64_t>(p.size()));
  std::vector<int64_t> out;
  for (const auto& p : prompts) {
    const int64_t missing = *longest - static_cast<int64_t>(p.size());
    if (missing > 0 && pad < 0) {
      return invalid_argument("prompts of different lengths need model.pad_token_id in genai_config.json to pad them");
    }
    out.insert(out.end(), static_cast<size_t>(missing), pad);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

// Writes float32 [rows, cols] as NumPy .npy (format 1.0, little-endian, C order).
Status write_npy(const std::string& path, const std::vector<float>& v, int64_t rows, int64_t cols) {
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(rows) + ", " +
                       std::to_string(cols) + "), }";
  const size_t unpadded = 10 + header.size() + 1;  // magic(6) version(2) len(2) header '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return invalid_argument("--dump-logits: cannot write " + path + ": " + std::strerror(errno));
  const uint16_t hl = static_cast<uint16_t>(header.size());
  const unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, static_cast<unsigned char>(hl & 0xff),
                                 static_cast<unsigned char>(hl >> 8)};
  bool ok = std::fwrite(pre, 1, sizeof pre, f) == sizeof pre;
  ok = ok && std::fwrite(header.data(), 1, header.size(), f) == header.size();
  ok = ok && (v.empty() || std::fwrite(v.data(), sizeof(float), v.size(), f) == v.size());
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) return invalid_argument("--dump-logits: writing " + path + " failed");
  return Status::Ok();
}

// Search options: the command line's where given, else greedy with the config's top-k/p/temperature.
struct SetFlags {
  bool sample, top_k, top_p, temp, rep;
};
// Batch and beam options of the command line (one row, no beams unless given).
struct BatchFlags {
  int64_t batch_size = 1;
  int64_t num_beams = 1;
  int64_t num_return_sequences = 1;
  double length_penalty = 1.0;
  int64_t min_length = 0;
  int64_t no_repeat_ngram_size = 0;
};
genai::GeneratorParams search_params(const genai::Model& model, const genai::SearchOptions& so, int64_t capacity,
                                     SetFlags set, const BatchFlags& bf = {}) {
  genai::GeneratorParams params(model);
  params.search.max_length = capacity;
  params.search.batch_size = bf.batch_size;
  params.search.num_beams = bf.num_beams;
  params.search.num_return_sequences = bf.num_return_sequences;
  params.search.length_penalty = bf.length_penalty;
  params.search.min_length = bf.min_length;
  params.search.no_repeat_ngram_size = bf.no_repeat_ngram_size;
  if (set.sample) params.search.do_sample = so.do_sample;
  else params.search.do_sample = false;  // greedy unless asked, whatever the config's search defaults
  if (set.top_k) params.search.top_k = so.top_k;
  if (set.top_p) params.search.top_p = so.top_p;
  if (set.temp) params.search.temperature = so.temperature;
  params.search.repetition_penalty = set.rep ? so.repetition_penalty : 1.0;
  params.search.min_p = so.min_p;
  params.search.random_seed = so.random_seed;
  params.search.stop_at_eos = so.stop_at_eos;
  return params;
}

struct TextRequest {
  std::vector<std::string> prompt_texts;  // several: one batch
  std::string prompt_text, prompt_file;
  bool chat, has_system;
  std::string system_text;
  std::vector<std::string> stops;
  bool ignore_eos, json;
  int64_t new_tokens, max_length, warmup;
  int threads;
  std::string opt;
  double create_ms;
};

// A text prompt's ids: through the chat template with --chat (which writes its own BOS), checked against
// the model's vocabulary.
Result<std::vector<int64_t>> encode_prompt(const genai::Model& model, const genai::Tokenizer& tok, const TextRequest& q,
                                           std::string text) {
  genai::EncodeOptions eo;
  if (q.chat) {
    std::string messages = "[";
    if (q.has_system) messages += "{\"role\":\"system\",\"content\":" + cli::json_quote(q.system_text) + "},";
    messages += "{\"role\":\"user\",\"content\":" + cli::json_quote(text) + "}]";
    NXRT_ASSIGN_OR_RETURN(text, tok.apply_chat_template(messages, "", true));
    eo.add_special_tokens = false;
  }
  NXRT_ASSIGN_OR_RETURN(std::vector<int32_t> ids32, tok.encode(text, eo));
  std::vector<int64_t> ids(ids32.begin(), ids32.end());
  if (ids.empty()) return invalid_argument("the prompt encodes to no tokens");
  const int64_t vocab = model.vocab_size();
  for (int64_t t : ids) {
    if (vocab > 0 && t >= vocab) {
      return invalid_argument("prompt token " + std::to_string(t) + " is outside the model's vocabulary (" +
                              std::to_string(vocab) + "): tokenizer and model do not match");
    }
  }
  return ids;
}

// Text mode: tokenize (through the chat template with --chat), stream the reply, summary on stderr.
int run_text(const genai::Model& model, const TextRequest& q, const genai::SearchOptions& so, bool set_sample,
             bool set_top_k, bool set_top_p, bool set_temp, bool set_rep) {
  std::string text = q.prompt_text;
  if (!q.prompt_file.empty() || text == "-") {
    auto r = cli::read_text(q.prompt_file.empty() ? "-" : q.prompt_file);
    if (!r.ok()) return fail(r.status());
    text = std::move(r).value();
  }
  auto tok_r = genai::Tokenizer::create(model);
  if (!tok_r.ok()) return fail(tok_r.status());
  const genai::Tokenizer& tok = tok_r.value();
  auto prompt_r = encode_prompt(model, tok, q, text);
  if (!prompt_r.ok()) return fail(prompt_r.status());
  const std::vector<int64_t> prompt = std::move(prompt_r).value();
  const int64_t total = static_cast<int64_t>(prompt.size()) + q.new_tokens;
  const int64_t capacity = q.max_length < 0 ? total : q.max_length;
  if (capacity < total) usage("--max-length " + std::to_string(capacity) + " < prompt + new tokens (" + std::to_string(total) + ")");
  const genai::Config& cfg = model.config();
  if (cfg.context_length > 0 && capacity > cfg.context_length) {
    return fail(invalid_argument("prompt (" + std::to_string(prompt.size()) + " tokens) + new tokens " +
                                 std::to_string(q.new_tokens) + " exceeds model.context_length " +
                                 std::to_string(cfg.context_length) + " (context overflow)"));
  }
  genai::SearchOptions plain = so;
  plain.stop_at_eos = false;  // EOS is handled below, with the tokenizer's EOS too
  const genai::GeneratorParams params =
      search_params(model, plain, capacity, {set_sample, set_top_k, set_top_p, set_temp, set_rep});
  cli::ReplyLimits limits;
  limits.max_new_tokens = q.new_tokens;
  limits.eos_ids = cli::text_eos_ids(model, tok);
  limits.ignore_eos = q.ignore_eos;
  limits.stop_strings = q.stops;
  for (int64_t w = 0; w < q.warmup; ++w) {
    auto gen = genai::Generator::create(model, params);
    if (!gen.ok()) return fail(gen.status());
    auto r = cli::generate_reply(*gen.value(), tok, prompt, limits, nullptr);
    if (!r.ok()) return fail(r.status());
  }
  auto gen = genai::Generator::create(model, params);
  if (!gen.ok()) return fail(gen.status());
  auto rr = cli::generate_reply(*gen.value(), tok, prompt, limits, q.json ? nullptr : stdout);
  if (!rr.ok()) {
    if (!q.json) std::fputc('\n', stdout);
    return fail(rr.status());
  }
  const cli::Reply& r = rr.value();
  const size_t n = r.tokens.size();
  if (q.json) {
    std::string toks;
    for (size_t i = 0; i < n; ++i) toks += (i ? "," : "") + std::to_string(r.tokens[i]);
    const std::string decode_tok_s = n > 1 ? num(static_cast<double>(n - 1) / (r.decode_ms / 1000.0)) : "null";
    const std::string step_med = r.steps.empty() ? "null" : num(median(r.steps));
    const bool share = cfg.past_present_share_buffer;
    std::printf(
        "{\"prompt_tokens\":%zu,\"new_tokens\":%zu,\"create_ms\":%s,\"prefill_ms\":%s,\"prefill_tok_s\":%s,"
        "\"decode_tok_s\":%s,\"ttft_ms\":%s,\"tokens\":[%s],\"threads\":%d,\"share_buffer\":%s,\"kv_update\":\"%s\","
        "\"kv_capacity\":%s,\"decode_step_ms_median\":%s,\"decode_steps_ms\":%s,\"warmup\":%lld,\"opt\":\"%s\","
        "\"runtime\":\"nxrt\",\"text\":%s}\n",
        prompt.size(), n, num(q.create_ms).c_str(), num(r.prefill_ms).c_str(),
        num(static_cast<double>(prompt.size()) / (r.prefill_ms / 1000.0)).c_str(), decode_tok_s.c_str(),
        num(r.ttft_ms).c_str(), toks.c_str(), q.threads, share ? "true" : "false", gen.value()->kv_update(),
        share ? std::to_string(capacity).c_str() : "null", step_med.c_str(), steps_json(r.steps).c_str(),
        static_cast<long long>(q.warmup), q.opt.c_str(), cli::json_quote(r.text).c_str());
  } else {
    std::fputc('\n', stdout);
    std::fflush(stdout);
  }
  std::fprintf(stderr, "%s\n", cli::summary_line(r).c_str());
  return 0;
}


// Several text prompts (or beam search) in one batch: every reply is printed after generation, "[i] text".
int run_text_batch(const genai::Model& model, const TextRequest& q, const genai::SearchOptions& so, SetFlags set,
                   const BatchFlags& bf_in) {
  auto tok_r = genai::Tokenizer::create(model);
  if (!tok_r.ok()) return fail(tok_r.status());
  const genai::Tokenizer& tok = tok_r.value();
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string& text : q.prompt_texts) {
    auto ids = encode_prompt(model, tok, q, text);
    if (!ids.ok()) return fail(ids.status().with_context("prompt " + std::to_string(prompts.size()) + ": "));
    prompts.push_back(std::move(ids).value());
  }
  int64_t longest = 0;
  auto padded = pad_prompts(prompts, model.config().pad_token_id, &longest);
  if (!padded.ok()) return fail(padded.status());
  const int64_t total = longest + q.new_tokens;
  const int64_t capacity = q.max_length < 0 ? total : q.max_length;
  if (capacity < total) usage("--max-length " + std::to_string(capacity) + " < prompt + new tokens (" + std::to_string(total) + ")");
  const genai::Config& cfg = model.config();
  if (cfg.context_length > 0 && capacity > cfg.context_length) {
    return fail(invalid_argument("prompt + new tokens " + std::to_string(capacity) + " exceeds model.context_length " +
                                 std::to_string(cfg.context_length) + " (context overflow)"));
  }
  genai::SearchOptions plain = so;
  plain.stop_at_eos = !q.ignore_eos;
  BatchFlags bf = bf_in;
  bf.batch_size = static_cast<int64_t>(prompts.size());
  const genai::GeneratorParams params = search_params(model, plain, capacity, set, bf);
  for (int64_t w = 0; w < q.warmup; ++w) {
    auto r = generate_once(model, params, padded.value(), longest, q.new_tokens, nullptr);
    if (!r.ok()) return fail(r.status());
  }
  auto rr = generate_once(model, params, padded.value(), longest, q.new_tokens, nullptr);
  if (!rr.ok()) return fail(rr.status());
  const RunResult& r = rr.value();
  const std::vector<int64_t> eos = cli::text_eos_ids(model, tok);
  std::vector<std::string> texts;
  for (const auto& seq : r.sequences) {
    // The reply: what follows the padded prompt, up to its first EOS (unless --ignore-eos) and its first
    // stop string.
    std::vector<int32_t> reply;
    for (size_t i = static_cast<size_t>(longest); i < seq.size(); ++i) {
      if (!q.ignore_eos && std::find(eos.begin(), eos.end(), seq[i]) != eos.end()) break;
      reply.push_back(static_cast<int32_t>(seq[i]));
    }
    auto text = tok.decode(reply, true);
    if (!text.ok()) return fail(text.status());
    std::string t = std::move(text).value();
    size_t cut = t.size();
    for (const std::string& stop : q.stops) cut = std::min(cut, t.find(stop));
    t.resize(cut);
    texts.push_back(std::move(t));
  }
  const std::string decode_tok_s =
      r.steps_run > 1 ? num(static_cast<double>(r.steps_run - 1) / (r.decode_ms / 1000.0)) : "null";
  if (q.json) {
    std::string seqs, txt;
    for (size_t i = 0; i < r.sequences.size(); ++i) seqs += std::string(i ? "," : "") + "[" + join_ids(r.sequences[i]) + "]";
    for (size_t i = 0; i < texts.size(); ++i) txt += std::string(i ? "," : "") + cli::json_quote(texts[i]);
    std::printf("{\"prompts\":%zu,\"prompt_tokens\":%lld,\"new_tokens\":%lld,\"create_ms\":%s,\"prefill_ms\":%s,"
                "\"decode_tok_s\":%s,\"ttft_ms\":%s,\"num_beams\":%lld,\"kv_update\":\"%s\",\"sequences\":[%s],"
                "\"texts\":[%s],\"runtime\":\"nxrt\"}\n",
                prompts.size(), static_cast<long long>(longest), static_cast<long long>(r.steps_run),
                num(q.create_ms).c_str(), num(r.prefill_ms).c_str(), decode_tok_s.c_str(), num(r.ttft_ms).c_str(),
                static_cast<long long>(bf.num_beams), r.kv_update.c_str(), seqs.c_str(), txt.c_str());
  } else {
    for (size_t i = 0; i < texts.size(); ++i) std::printf("[%zu] %s\n", i, texts[i].c_str());
  }
  std::fprintf(stderr, "prompts %zu  prompt_tokens %lld (padded)  new_tokens %lld  ttft %s ms  decode %s tok/s\n",
               prompts.size(), static_cast<long long>(longest), static_cast<long long>(r.steps_run),
               num(r.ttft_ms).c_str(), decode_tok_s.c_str());
  return 0;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  std::string model_path, opt = "all", dump_path;
  std::vector<std::string> prompt_ids_list, prompt_texts;
  std::string prompt_file, system_text;
  bool chat = false, has_system = false, ignore_eos = false;
  std::vector<std::string> stops;
  int64_t prompt_len = -1, new_tokens = 32, max_length = -1, warmup = 0;
  int threads = 1;
  DataType kv_dtype = DataType::kUndefined;  // --kv-dtype
  DataType weight_scales = DataType::kUndefined;  // --weight-scales
  bool json = false;
  bool last_logits = true;
  genai::SearchOptions so;
  BatchFlags bf;
  bool set_sample = false, set_top_k = false, set_top_p = false, set_temp = false, set_rep = false;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.rfind("--", 0) != 0) {
      if (model_path.empty()) model_path = a;
      else prompt_texts.push_back(a);
      continue;
    }
    std::string val;
    bool has_val = false;
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_val = true;
    }
    auto flag_only = [&]() {
      if (has_val) usage(a + " takes no value");
    };
    if (a == "--json") { flag_only(); json = true; continue; }
    if (a == "--do-sample") { flag_only(); so.do_sample = true; set_sample = true; continue; }
    if (a == "--stop-at-eos") { flag_only(); so.stop_at_eos = true; continue; }
    if (a == "--chat") { flag_only(); chat = true; continue; }
    if (a == "--ignore-eos") { flag_only(); ignore_eos = true; continue; }
    if (!has_val) {
      if (i + 1 >= argc) usage(a + " needs a value");
      val = argv[++i];
    }
    if (a == "--prompt-ids") prompt_ids_list.push_back(val);
    else if (a == "--prompt-file") prompt_file = val;
    else if (a == "--system") { system_text = val; has_system = true; }
    else if (a == "--stop") {
      if (val.empty()) usage("--stop needs a non-empty string");
      stops.push_back(val);
    }
    else if (a == "--prompt-len") prompt_len = parse_count(a, val);
    else if (a == "--max-new-tokens") new_tokens = parse_count(a, val);
    else if (a == "--max-length") max_length = parse_count(a, val);
    else if (a == "--warmup") warmup = parse_count(a, val);
    else if (a == "--threads") threads = static_cast<int>(parse_count(a, val));
    else if (a == "--kv-dtype") kv_dtype = cli::kv_dtype_arg(val, kUsage);
    else if (a == "--weight-scales") weight_scales = cli::weight_scales_arg(val, kUsage);
    else if (a == "--opt") {
      if (val != "disabled" && val != "basic" && val != "extended" && val != "all") usage("--opt takes disabled|basic|all");
      opt = val;
    } else if (a == "--top-k") { so.top_k = parse_count(a, val); set_top_k = true; }
    else if (a == "--top-p") { so.top_p = parse_real(a, val); set_top_p = true; }
    else if (a == "--min-p") so.min_p = parse_real(a, val);
    else if (a == "--temperature") { so.temperature = parse_real(a, val); set_temp = true; }
    else if (a == "--repetition-penalty") { so.repetition_penalty = parse_real(a, val); set_rep = true; }
    else if (a == "--num-beams") bf.num_beams = parse_count(a, val);
    else if (a == "--num-return-sequences") bf.num_return_sequences = parse_count(a, val);
    else if (a == "--length-penalty") bf.length_penalty = parse_real(a, val);
    else if (a == "--min-length") bf.min_length = parse_count(a, val);
    else if (a == "--no-repeat-ngram-size") bf.no_repeat_ngram_size = parse_count(a, val);
    else if (a == "--dump-logits") {
      if (val.empty()) usage("--dump-logits needs a file name");
      dump_path = val;
    } else if (a == "--logits") {
      if (val != "last" && val != "every") usage("--logits takes last|every");
      last_logits = val == "last";
    } else if (a == "--seed") so.random_seed = static_cast<uint64_t>(parse_count(a, val));
    else usage("unknown option " + a);
  }
  if (model_path.empty()) usage("missing MODEL_DIR");
  if (threads < 1) usage("--threads must be at least 1");
  if (new_tokens < 1) usage("--max-new-tokens must be at least 1");
  if (bf.num_beams < 1) usage("--num-beams must be at least 1");
  if (bf.num_return_sequences < 1 || bf.num_return_sequences > bf.num_beams) {
    usage("--num-return-sequences must be between 1 and --num-beams");
  }
  if (bf.num_beams > 1 && set_sample) usage("--do-sample does not go with --num-beams (beam search does not sample)");
  const bool has_prompt_ids = !prompt_ids_list.empty();
  if (has_prompt_ids && prompt_len >= 0) usage("give --prompt-ids or --prompt-len, not both");
  if (prompt_len == 0) usage("--prompt-len must be at least 1");
  const bool text_mode = !prompt_texts.empty() || !prompt_file.empty();
  if (!prompt_texts.empty() && !prompt_file.empty()) usage("give the prompt text or --prompt-file, not both");
  if (text_mode && (has_prompt_ids || prompt_len >= 0)) usage("give a text prompt or --prompt-ids/--prompt-len, not both");
  if (!text_mode && (chat || has_system || !stops.empty() || ignore_eos)) {
    usage("--chat, --system, --stop and --ignore-eos need a text prompt (PROMPT TEXT or --prompt-file)");
  }
  if (has_system && !chat) usage("--system needs --chat");
  if (text_mode && !dump_path.empty()) usage("--dump-logits works with --prompt-ids/--prompt-len");
  if (!dump_path.empty() && (prompt_ids_list.size() > 1 || bf.num_beams > 1)) {
    usage("--dump-logits works with one prompt and no beam search");
  }
  std::vector<std::vector<int64_t>> prompts;
  for (const std::string& prompt_ids : prompt_ids_list) {
    std::vector<int64_t> prompt;
    size_t p = 0;
    while (p <= prompt_ids.size()) {
      size_t q = prompt_ids.find(',', p);
      if (q == std::string::npos) q = prompt_ids.size();
      std::string s = prompt_ids.substr(p, q - p);
      s.erase(0, s.find_first_not_of(" \t"));
      s.erase(s.find_last_not_of(" \t") + 1);
      if (!s.empty()) {
        if (s.find_first_not_of("0123456789") != std::string::npos || s.size() > 12) {
          usage("--prompt-ids: '" + s + "' is not a token id");
        }
        prompt.push_back(std::stoll(s));
      }
      p = q + 1;
    }
    if (prompt.empty()) usage("--prompt-ids is empty");
    prompts.push_back(std::move(prompt));
  }

  genai::ModelOptions mo;
  mo.session.threads = threads;
  mo.session.kv_cache_dtype = kv_dtype;
  mo.session.matmulnbits_scale_dtype = weight_scales;
  mo.last_position_logits = last_logits;
  mo.session.opt_level = opt == "disabled" ? OptLevel::kDisabled : opt == "basic" ? OptLevel::kBasic : OptLevel::kAll;
  const double c0 = now_ms();
  auto model_r = genai::Model::create(model_path, mo);
  if (!model_r.ok()) return fail(model_r.status());
  const double create_ms = now_ms() - c0;
  const genai::Model& model = *model_r.value();
  const genai::Config& cfg = model.config();
  const int64_t vocab = model.vocab_size();
  const SetFlags set{set_sample, set_top_k, set_top_p, set_temp, set_rep};
  if (text_mode) {
    TextRequest req{prompt_texts, prompt_texts.empty() ? "" : prompt_texts[0], prompt_file, chat, has_system,
                    system_text, stops, ignore_eos, json, new_tokens, max_length, warmup, threads, opt, create_ms};
    if (prompt_texts.size() > 1 || bf.num_beams > 1) {
      if (!prompt_file.empty()) {
        auto r = cli::read_text(prompt_file);
        if (!r.ok()) return fail(r.status());
        req.prompt_texts = {std::move(r).value()};
      }
      return run_text_batch(model, req, so, set, bf);
    }
    return run_text(model, req, so, set_sample, set_top_k, set_top_p, set_temp, set_rep);
  }
  if (!has_prompt_ids) {
    if (vocab <= 0) {
      return fail(invalid_argument("vocab size unknown (logits shape is symbolic and genai_config has no model.vocab_size)"));
    }
    prompts.push_back(genai::seeded_prompt(prompt_len < 0 ? 16 : prompt_len, vocab));
  } else if (vocab > 0) {
    for (const auto& prompt : prompts) {
      for (int64_t t : prompt) {
        if (t >= vocab) usage("--prompt-ids: " + std::to_string(t) + " is outside the vocabulary (" + std::to_string(vocab) + ")");
      }
    }
  }
  int64_t prompt_width = 0;
  auto padded = pad_prompts(prompts, cfg.pad_token_id, &prompt_width);
  if (!padded.ok()) return fail(padded.status());
  const std::vector<int64_t>& prompt = padded.value();
  const int64_t total = prompt_width + new_tokens;
  const int64_t capacity = max_length < 0 ? total : max_length;
  if (capacity < total) {
    usage("--max-length " + std::to_string(capacity) + " < prompt + new tokens (" + std::to_string(total) + ")");
  }
  if (cfg.context_length > 0 && capacity > cfg.context_length) {
    return fail(invalid_argument(std::string(max_length < 0 ? "prompt + new tokens " : "--max-length ") +
                                 std::to_string(capacity) + " exceeds model.context_length " +
                                 std::to_string(cfg.context_length) + " (context overflow)"));
  }

  bf.batch_size = static_cast<int64_t>(prompts.size());
  genai::GeneratorParams params = search_params(model, so, capacity, set, bf);

  for (int64_t w = 0; w < warmup; ++w) {
    auto r = generate_once(model, params, prompt, prompt_width, new_tokens, nullptr);
    if (!r.ok()) return fail(r.status());
  }
  std::vector<float> dump;
  if (!dump_path.empty() && vocab > 0) dump.reserve(static_cast<size_t>(new_tokens * vocab));
  auto rr = generate_once(model, params, prompt, prompt_width, new_tokens, dump_path.empty() ? nullptr : &dump);
  if (!rr.ok()) return fail(rr.status());
  const RunResult& r = rr.value();
  const size_t n = static_cast<size_t>(r.steps_run);
  if (!dump_path.empty()) {
    const int64_t cols = n ? static_cast<int64_t>(dump.size() / n) : vocab;
    Status s = write_npy(dump_path, dump, static_cast<int64_t>(n), cols);
    if (!s.ok()) return fail(s);
  }
  const std::string toks = join_ids(r.tokens);
  const std::string decode_tok_s = n > 1 ? num(static_cast<double>(n - 1) / (r.decode_ms / 1000.0)) : "null";
  const std::string step_med = r.steps.empty() ? "null" : num(median(r.steps));
  const bool share = params.search.past_present_share_buffer;
  const bool several = prompts.size() > 1 || bf.num_beams > 1;
  if (json) {
    std::string seqs;
    if (several) {
      seqs = ",\"sequences\":[";
      for (size_t i = 0; i < r.sequences.size(); ++i) seqs += std::string(i ? "," : "") + "[" + join_ids(r.sequences[i]) + "]";
      seqs += "]";
    }
    std::printf(
        "{\"prompt_tokens\":%lld,\"new_tokens\":%zu,\"create_ms\":%s,\"prefill_ms\":%s,\"prefill_tok_s\":%s,"
        "\"decode_tok_s\":%s,\"ttft_ms\":%s,\"tokens\":[%s],\"threads\":%d,\"share_buffer\":%s,\"kv_update\":\"%s\","
        "\"kv_capacity\":%s,\"decode_step_ms_median\":%s,\"decode_steps_ms\":%s,\"warmup\":%lld,\"opt\":\"%s\","
        "\"runtime\":\"nxrt\"%s}\n",
        static_cast<long long>(prompt_width), n, num(create_ms).c_str(), num(r.prefill_ms).c_str(),
        num(static_cast<double>(prompt_width) / (r.prefill_ms / 1000.0)).c_str(), decode_tok_s.c_str(),
        num(r.ttft_ms).c_str(), toks.c_str(), threads, share ? "true" : "false", r.kv_update.c_str(),
        share ? std::to_string(capacity).c_str() : "null", step_med.c_str(), steps_json(r.steps).c_str(),
        static_cast<long long>(warmup), opt.c_str(), seqs.c_str());
  } else {
    if (several) {
      for (size_t i = 0; i < prompts.size(); ++i) std::printf("prompt %zu: %s\n", i, join_ids(prompts[i]).c_str());
      for (size_t i = 0; i < r.sequences.size(); ++i) std::printf("sequence %zu: %s\n", i, join_ids(r.sequences[i]).c_str());
    } else {
      std::printf("prompt: %s\ntokens: %s\n", join_ids(prompt).c_str(), toks.c_str());
    }
    std::printf("prompt_tokens %lld  new_tokens %zu  create %s ms  prefill %s ms (%s tok/s)  ttft %s ms  decode %s tok/s "
                "(median step %s ms)  kv %s capacity %lld  threads %d\n",
                static_cast<long long>(prompt_width), n, num(create_ms).c_str(), num(r.prefill_ms).c_str(),
                num(static_cast<double>(prompt_width) / (r.prefill_ms / 1000.0)).c_str(), num(r.ttft_ms).c_str(),
                decode_tok_s.c_str(), step_med.c_str(), r.kv_update.c_str(), static_cast<long long>(capacity),
                threads);
  }
  return 0;
}

// `nxrt info --capture MODEL_DIR [--opt LEVEL]`: the captured-replay schedule of a genai folder's
// decoder as the generator runs it (past/present bound to one buffer when past_present_share_buffer):
// segments, eager seams and why, pinned and growing symbols. A MODEL.onnx path: the plain model's.
int cmd_info_capture(int argc, char** argv) {
  if (argc < 1) {
    std::fprintf(stderr, "error: info --capture needs a MODEL_DIR\nusage: nxrt info --capture MODEL_DIR|MODEL.onnx [--opt disabled|basic|all]\n");
    return 2;
  }
  std::string opt = "all";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--opt" && i + 1 < argc) {
      opt = argv[++i];
    } else {
      std::fprintf(stderr, "error: unknown option '%s'\nusage: nxrt info --capture MODEL_DIR|MODEL.onnx [--opt disabled|basic|all]\n", a.c_str());
      return 2;
    }
  }
  if (opt != "disabled" && opt != "basic" && opt != "all") {
    std::fprintf(stderr, "error: --opt takes disabled, basic or all, got '%s'\n", opt.c_str());
    return 2;
  }
  genai::ModelOptions mo;
  mo.session.opt_level = opt == "disabled" ? OptLevel::kDisabled : opt == "basic" ? OptLevel::kBasic : OptLevel::kAll;
  const std::string path = argv[0];
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".onnx") == 0) {  // a plain model: nothing shared
    auto session = Session::create(path, mo.session);
    if (!session.ok()) {
      std::fprintf(stderr, "error: %s\n", session.status().to_string().c_str());
      return 1;
    }
    std::printf("model: %s\n%s", path.c_str(), (*session)->describe_capture({}).c_str());
    return 0;
  }
  auto model = genai::Model::create(path, mo);
  if (!model.ok()) {
    std::fprintf(stderr, "error: %s\n", model.status().to_string().c_str());
    return 1;
  }
  const genai::Config& c = (*model)->config();
  std::vector<std::pair<std::string, std::string>> shared;
  if (c.past_present_share_buffer) {
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      shared.push_back({genai::layer_name(c.past_key_names, l), genai::layer_name(c.present_key_names, l)});
      shared.push_back({genai::layer_name(c.past_value_names, l), genai::layer_name(c.present_value_names, l)});
    }
  }
  std::printf("model: %s\nkv cache: %s\n", c.decoder_path.c_str(),
              c.past_present_share_buffer ? "past and present share one fixed-capacity buffer per layer"
                                          : "the past grows by concatenation (nodes on its sequence axis stay eager seams)");
  std::printf("%s", (*model)->session().describe_capture(shared).c_str());
  return 0;
}
