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
#include <string>
#include <string_view>

// The Tokenizer / TokenizerStream classes are public (include/nxrt/tokenizer.h); this header adds what
// only the library and its tests use.
#include "nxrt/tokenizer.h"

namespace nxrt::genai {

// UTF-8 helpers (exposed for tests).
// Replaces every ill-formed subsequence with U+FFFD (WHATWG "maximal subpart" rule, as TextDecoder).
std::string utf8_sanitize(std::string_view bytes);
// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence that could still be
// completed by more bytes.
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace nxrt::genai
