// A reader of Hugging Face `tokenizer.json` (the `tokenizers` library format) for BPE models such as
// Qwen2/3, Llama-3 (byte-level BPE) and Llama-2 style (byte_fallback) tokenizers.
//
// Pipeline of encode(text), as in tokenizers / tokenizers.js:
//   1. split the text on added tokens (longest match at each position, leftmost first);
//   2. each other section: normalizer -> split on normalized added tokens -> pre-tokenizer -> BPE;
//   3. post-processor (TemplateProcessing adds BOS/EOS when add_special_tokens).
// Supported components (anything else is a not_implemented error naming the type):
//   model         BPE (merges as "a b" strings or [a, b] pairs; byte_fallback; unk_token; fuse_unk;
//                 ignore_merges; continuing_subword_prefix; end_of_word_suffix)
//   normalizer    NFC NFD NFKC NFKD Lowercase Prepend Replace Strip Sequence
//   pre_tokenizer Split (Regex/String; Isolated Removed MergedWithPrevious MergedWithNext Contiguous;
//                 invert) ByteLevel Digits Metaspace WhitespaceSplit Sequence
//   post_processor TemplateProcessing ByteLevel Sequence
//   decoder       ByteLevel ByteFallback Fuse Replace Strip Metaspace Sequence
// Regexes run on PCRE2 (UTF + UCP, JIT when available) after a small Oniguruma->PCRE2 rewrite (\s is
// Unicode White_Space, \h is a hex digit, (?i:...) folds ASCII letters only, as tokenizers.js does).
// Input text that is not valid UTF-8 is read with U+FFFD replacing each bad sequence.
// Where tokenizers.js departs from the Rust tokenizers crate, this follows the crate: Split with
// invert=true keeps every piece for Isolated; MergedWithPrevious/MergedWithNext/Contiguous are real
// behaviors; Metaspace splits on the replacement when split=true. The check against tokenizers.js on
// seven real tokenizer.json files (scripts/check_tokenizers.sh) does not exercise those cases.
//
// A Tokenizer is immutable after load and safe to use from several threads at once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::genai {

class Json;
class TokenizerStream;

struct DecodeOptions {
  bool skip_special_tokens = false;
  // transformers' clean_up_tokenization (" ." -> "." etc.); off by default so that
  // decode(encode(x)) == x.
  bool clean_up_tokenization_spaces = false;
};

class Tokenizer {
 public:
  // `path` is a tokenizer.json file or a directory holding one.
  static Result<Tokenizer> load(const std::string& path);
  static Result<Tokenizer> from_json_text(std::string_view json_text);
  static Result<Tokenizer> from_json(const Json& root);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`. add_special_tokens: let the post-processor add its special tokens (BOS...).
  Result<std::vector<int32_t>> encode(std::string_view text, bool add_special_tokens = true) const;
  // Text of `ids`. An id outside the vocabulary is an invalid_argument error.
  Result<std::string> decode(std::span<const int32_t> ids, const DecodeOptions& options) const;
  Result<std::string> decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const {
    DecodeOptions o;
    o.skip_special_tokens = skip_special_tokens;
    return decode(ids, o);
  }
  // Incremental decoding, one id at a time; the stream refers to this tokenizer, which must outlive it.
  TokenizerStream create_stream(bool skip_special_tokens = false) const;

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
  std::unique_ptr<Impl> impl_;
};

// Streaming detokenizer: feed ids one by one; each step returns the text completed by that id (possibly
// empty), holding back bytes of an unfinished UTF-8 sequence. The concatenation of every step plus
// flush() equals Tokenizer::decode of all the ids.
class TokenizerStream {
 public:
  explicit TokenizerStream(const Tokenizer* tokenizer, bool skip_special_tokens = false)
      : tok_(tokenizer), skip_special_(skip_special_tokens) {}
  Result<std::string> step(int32_t id);
  // Whatever is still held back (an incomplete UTF-8 tail becomes U+FFFD); the stream then restarts.
  std::string flush();

 private:
  const Tokenizer* tok_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // ids_[prefix_, read_) have been emitted (kept as left context for decoders)
  size_t read_ = 0;
};

// UTF-8 helpers (exposed for tests).
// Replaces every ill-formed subsequence with U+FFFD (WHATWG "maximal subpart" rule, as TextDecoder).
std::string utf8_sanitize(std::string_view bytes);
// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence that could still be
// completed by more bytes.
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace nxrt::genai
