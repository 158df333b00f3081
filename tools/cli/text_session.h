// Text generation pieces shared by `nxrt generate` (text prompts) and `nxrt chat`: the streaming reply
// loop (EOS, stop strings held back until they can no longer match, UTF-8 pieces printed once complete),
// the prefix-reuse step for a new prompt, and small JSON/text helpers. Public API only.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "nxrt/genai.h"
#include "nxrt/tokenizer.h"

namespace nxrt::cli {

// Decoded text with stop strings: passes text on as soon as it can no longer be the start of a stop
// string, and stops before the first stop string (which is never passed on). Released text goes to
// `out` (when not null) and is also returned by take_released().
class StopFilter {
 public:
  StopFilter(const std::vector<std::string>& stops, std::FILE* out) : stops_(stops), out_(out) {}
  // Adds decoded text; returns true when a stop string completed (the text before it is released).
  bool add(const std::string& piece);
  // Releases whatever is held back (the end of the text).
  void finish() { emit(text_.size()); }
  // The text released since the last call.
  std::string take_released();
  const std::string& text() const { return text_; }

 private:
  void emit(size_t upto);
  const std::vector<std::string>& stops_;
  std::FILE* out_;
  std::string text_;
  size_t printed_ = 0;  // text_[0, printed_) is released
  size_t taken_ = 0;    // text_[0, taken_) was returned by take_released
};

struct ReplyLimits {
  int64_t max_new_tokens = 256;
  std::vector<int64_t> eos_ids;  // generation stops after one of these (not printed) unless ignore_eos
  bool ignore_eos = false;
  std::vector<std::string> stop_strings;  // generation stops before the first of these (not printed)
};

struct Reply {
  std::vector<int64_t> tokens;  // every generated id (an EOS that stopped generation included)
  std::string text;             // what was printed
  std::string finish;           // "eos", "stop" or "length"
  int64_t prompt_tokens = 0;
  int64_t prefilled = 0;  // prompt positions the model ran (the rest came from the KV cache)
  double prefill_ms = 0, ttft_ms = 0, decode_ms = 0;
  std::vector<double> steps;  // per decode step (run + pick)
};

// Feeds `prompt` to `gen` reusing the longest common prefix with what the generator already holds
// (rewinding where they diverge), then generates a reply. `out` (may be null) receives the text as it
// is decoded.
Result<Reply> generate_reply(genai::Generator& gen, const genai::Tokenizer& tok, const std::vector<int64_t>& prompt,
                             const ReplyLimits& limits, std::FILE* out);

// Length of the common prefix of two id sequences.
size_t common_prefix(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// EOS ids for text mode: genai_config.json's eos_token_id list plus tokenizer_config.json's eos_token.
std::vector<int64_t> text_eos_ids(const genai::Model& model, const genai::Tokenizer& tok);

// "prompt_tokens 12  prefilled 12  new_tokens 5  ttft 3.1 ms  prefill 3870.2 tok/s  decode 512.0 tok/s"
std::string summary_line(const Reply& r);

// "error: MSG" + the command's usage on stderr, exit 2 (a usage error).
[[noreturn]] void usage_exit(const std::string& msg, const char* usage);
// A flag's value as a non-negative integer / a finite number, else a usage error.
int64_t count_arg(const std::string& flag, const std::string& v, const char* usage);
double real_arg(const std::string& flag, const std::string& v, const char* usage);
// --kv-dtype: "float16" (SessionOptions::kv_cache_dtype) or "float32" (the model's own cache type,
// kUndefined), else a usage error.
DataType kv_dtype_arg(const std::string& v, const char* usage);
// --weight-scales: "float16" (SessionOptions::matmulnbits_scale_dtype) or "model" (the scales as the
// model has them, kUndefined), else a usage error.
DataType weight_scales_arg(const std::string& v, const char* usage);
// "error: STATUS" on one line of stderr; returns 1 (the exit code of a failed command).
int report_error(const Status& s);

// A JSON string literal of UTF-8 text.
std::string json_quote(const std::string& s);
// Reads a whole file, or standard input for "-".
Result<std::string> read_text(const std::string& path);
// "%.3f" of x rounded to 3 decimals.
std::string fixed3(double x);

}  // namespace nxrt::cli
