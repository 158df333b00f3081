// Text in and text out for an LLM folder, shaped like onnxruntime-genai's Tokenizer API:
// Tokenizer::create(model), encode, decode, apply_chat_template, and TokenizerStream for streaming
// detokenization (decode(token) -> the text that token completes).
//
// A folder's tokenizer is tokenizer.json (Hugging Face `tokenizers` format, read by src/genai/tokenizer*)
// plus tokenizer_config.json (special token strings, add_bos_token, chat_template) and an optional
// chat_template.jinja, which wins over tokenizer_config.json's chat_template as in transformers.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::genai {

class Json;
class Model;
class TokenizerStream;

struct DecodeOptions {
  bool skip_special_tokens = false;
  // transformers' clean_up_tokenization (" ." -> "." etc.); off by default so that
  // decode(encode(x)) == x.
  bool clean_up_tokenization_spaces = false;
};

struct EncodeOptions {
  // Let the post-processor add its special tokens (BOS...), and honour tokenizer_config.json's
  // add_bos_token when the tokenizer came from a folder.
  bool add_special_tokens = true;
  // Special tokens written in the text ("<|im_start|>") become their ids, as in transformers and
  // onnxruntime-genai; false encodes them as plain text (transformers' split_special_tokens=True).
  bool parse_special = true;
};

// What tokenizer_config.json (and chat_template.jinja) say: special-token strings and chat templates.
struct TokenizerConfig {
  std::string folder;
  // Special tokens as strings ("" when absent or null); an AddedToken object contributes its content.
  std::string bos_token, eos_token, unk_token, pad_token;
  bool has_add_bos_token = false;  // add_bos_token present in the file
  bool add_bos_token = false;
  // Chat templates by name: a plain string is "default"; a list keeps its names.
  std::vector<std::pair<std::string, std::string>> chat_templates;
  std::string chat_template_file;       // the file they came from ("" when none)
  std::vector<std::string> looked_at;   // files searched for a chat template, in order

  // The template to render: with tools, "tool_use" when there is one; else "default". An error names
  // the files looked at (no template) or the names available (no default).
  Result<std::string> chat_template(bool has_tools) const;
};

// Reads FOLDER/tokenizer_config.json (absent: all empty) and FOLDER/chat_template.jinja.
Result<TokenizerConfig> read_tokenizer_config(const std::string& folder);

// Renders `template_source` (Jinja2, as transformers renders chat templates) with the JSON object
// `context_json` as its variables. With `fill`, bos_token/eos_token/unk_token/pad_token missing from the
// context are taken from it. `name` prefixes errors, which carry the template line and column.
Result<std::string> render_chat_template(std::string_view template_source, std::string_view context_json,
                                         const TokenizerConfig* fill = nullptr, const std::string& name = "template");

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one (tokenizer_config.json is not read).
  static Result<Tokenizer> load(const std::string& path);
  static Result<Tokenizer> from_json_text(std::string_view json_text);
  static Result<Tokenizer> from_json(const Json& root);
  // The model folder's tokenizer.json + tokenizer_config.json (+ chat_template.jinja).
  static Result<Tokenizer> create(const Model& model);
  static Result<Tokenizer> create(const std::string& folder);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`. add_special_tokens: let the post-processor add its special tokens (BOS...).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = true) const;
  Result<std::vector<int32_t>> encode(std::string_view text, const EncodeOptions& options) const;
  // Text of `ids`. An id outside the vocabulary is an invalid_argument error.
  Result<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& options) const;
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const {
    DecodeOptions o;
    o.skip_special_tokens = skip_special_tokens;
    return decode(ids, o);
  }
  // Incremental decoding, one id at a time; the stream refers to this tokenizer, which must outlive it.
  TokenizerStream create_stream(bool skip_special_tokens = false) const;

  // Renders the folder's chat template over `messages_json` (a JSON array of {role, content, ...}),
  // `tools_json` (a JSON array, or "" / "null" for none) and add_generation_prompt, with the special
  // tokens of tokenizer_config.json; `extra_context_json` (a JSON object, or "") adds variables such as
  // enable_thinking. Encode the result with add_special_tokens=false: the template writes its own BOS.
  Result<std::string> apply_chat_template(std::string_view messages_json, std::string_view tools_json = "",
                                          bool add_generation_prompt = true,
                                          std::string_view extra_context_json = "") const;
  // tokenizer_config.json of the folder (empty when the tokenizer was loaded from a file alone).
  const TokenizerConfig& config() const;
  // Ids that end a reply: tokenizer_config.json's eos_token, else the post-processor's last special.
  std::vector<int32_t> eos_token_ids() const;

  int32_t token_to_id(std::string_view token) const;  // -1 when absent
  std::string id_to_token(int32_t id) const;          // "" when out of range
  bool is_special(int32_t id) const;                   // an added token marked "special"
  size_t vocab_size() const;                           // 1 + the largest id (model vocab and added tokens)
  // The token the post-processor puts first / last with add_special_tokens (-1 when none).
  int32_t bos_token_id() const;
  int32_t eos_token_id() const;

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::vector<int32_t> with_config_bos(std::vector<int32_t> ids, bool add_special_tokens) const;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const TokenizerConfig> config_;
};

// Streaming detokenizer: feed ids one by one; each step returns the text completed by that id (possibly
// empty), holding back bytes of an unfinished UTF-8 sequence. The concatenation of every step plus
// flush() equals Tokenizer::decode of all the ids. flush() adds text only when the ids end inside a
// UTF-8 sequence (it gives U+FFFD there, as decode() does), so a caller that never flushes (the
// onnxruntime-genai API has no flush) misses only that. A decoder that strips characters at the end of
// the text (a Strip with `stop` > 0 after a Fuse) gets the same guarantee without flush(): such
// characters are held back until a later id puts text after them, and never come out otherwise, as
// decode() drops them too.
class TokenizerStream {
 public:
  explicit TokenizerStream(const Tokenizer* tokenizer, bool skip_special_tokens = false)
      : tok_(tokenizer), skip_special_(skip_special_tokens) {}
  Result<std::string> step(int32_t id);
  // onnxruntime-genai's name for step().
  Result<std::string> decode(int32_t id) { return step(id); }
  // Whatever is still held back (an incomplete UTF-8 tail becomes U+FFFD); the stream then restarts.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // ids_[prefix_, read_) have been emitted (kept as left context for decoders)
  size_t read_ = 0;
};

}  // namespace nxrt::genai
