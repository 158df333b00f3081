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
// Unicode White_Space, \h is a hex digit, (?i:...) folds ASCII letters only, as tokenizers.js does);
// the Unicode normalizers and Lowercase use ICU. Built with NXRT_WITH_TOKENIZER_LIBS=OFF (no PCRE2, no
// ICU), a tokenizer.json with a component that needs them fails to load with an error naming the
// component; the others (e.g. Llama-2 style: Prepend/Replace String normalizers, byte_fallback) work.
// Input text that is not valid UTF-8 is read with U+FFFD replacing each bad sequence.
// Where tokenizers.js departs from the Rust tokenizers crate, this follows the crate: Split with
// invert=true keeps every piece for Isolated; MergedWithPrevious/MergedWithNext/Contiguous are real
// behaviors; Metaspace splits on the replacement when split=true. The check against tokenizers.js on
// seven real tokenizer.json files (scripts/check_tokenizers.sh) does not exercise those cases.
//
// A Tokenizer is immutable after load and safe to use from several threads at once.
//
// Code: tokenizer.cpp (encode, decode, streaming), tokenizer/load.cpp (reading the file),
// tokenizer/bpe_model.cpp, and one file per component family in tokenizer/ (normalizers,
// pre_tokenizers, decoders, post_processor, added_tokens, vocab, regex, byte_alphabet).
#pragma once

// The Tokenizer / TokenizerStream classes are public (include/nxrt/tokenizer.h); the UTF-8 helpers the
// tokenizer relies on (utf8_sanitize, utf8_complete_prefix) are in genai/utf8.h.
#include "nxrt/tokenizer.h"
