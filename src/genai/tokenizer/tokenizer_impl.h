// Tokenizer::Impl: a loaded tokenizer.json (the BPE model, its added tokens and the pipeline around it).
// Built by tokenizer/load.cpp; the BPE model runs in tokenizer/bpe_model.cpp; encode, decode and
// streaming are in tokenizer.cpp.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "genai/tokenizer.h"
#include "genai/tokenizer/added_tokens.h"
#include "genai/tokenizer/decoders.h"
#include "genai/tokenizer/normalizers.h"
#include "genai/tokenizer/post_processor.h"
#include "genai/tokenizer/pre_tokenizers.h"
#include "genai/tokenizer/vocab.h"

namespace nxrt::genai {

struct Tokenizer::Impl {
  // Model (BPE).
  tok::TokenMap vocab;                    // token -> id (added tokens included, overriding)
  std::vector<std::string> id_to_token;  // id -> token (added tokens included)
  tok::MergeMap merges;                   // (left, right) -> (rank, merged)
  int32_t unk_id = -1;
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool fuse_unk = false;  // consecutive unknown characters of a word give one unk
  std::string continuing_subword_prefix, end_of_word_suffix;
  std::array<int32_t, 256> byte_fallback_ids{};

  std::vector<tok::AddedToken> added;
  std::vector<uint8_t> special_flag;  // by id
  std::vector<uint8_t> added_flag;    // by id
  tok::AddedSplitter split_unnormalized, split_normalized;
  tok::AddedSplitter plain_unnormalized, plain_normalized;  // non-special added tokens only (parse_special=false)
  std::unordered_map<int32_t, size_t> added_index;         // id -> index into `added`

  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::Decoder> decoder;
  // The decoder chain strips characters at the end of the whole text (Decoder::strips_text_end), so
  // TokenizerStream decodes from the first id on instead of from a short window.
  bool decoder_strips_text_end = false;
  tok::PostProcessor post;

  // Word cache: pre-token -> ids.
  static constexpr size_t kCacheCapacity = 20000;
  static constexpr size_t kMaxCachedWord = 256;
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>, tok::HashSV, std::equal_to<>> cache;

  // Byte-level fast path: when the pre-tokenizer ends with ByteLevel, it leaves pieces as raw bytes
  // and the model starts from one symbol per byte (byte_ids), looking words up in raw_vocab.
  bool raw_bytes = false;
  std::array<int32_t, 256> byte_ids{};
  tok::TokenMap raw_vocab;  // raw bytes of every byte-level token -> id

  int32_t lookup(std::string_view s) const { return vocab.find(s); }
  int32_t lookup_word(std::string_view w) const { return raw_bytes ? raw_vocab.find(w) : vocab.find(w); }
  const tok::AddedToken& added_token(int32_t id) const { return added[added_index.at(id)]; }
  // invalid_argument unless `id` is in the vocabulary.
  Status check_id(int32_t id) const;

  // BPE of one pre-tokenized word (tokenizer/bpe_model.cpp).
  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  // bpe_word through the word cache (and ignore_merges' whole-word lookup).
  void model_encode(std::string_view word, std::vector<int32_t>& out) const;
  // Pre-tokenizes a normalized section and encodes its pieces.
  Status encode_section(std::string_view text, bool first_section, std::vector<int32_t>& out) const;
  // `text` cut by `splitter` into plain sections and added tokens (`secs`), with the text of each in
  // `views`, trimmed of whitespace next to added tokens with lstrip / rstrip.
  void split_added(std::string_view text, const tok::AddedSplitter& splitter,
                   std::vector<tok::AddedSplitter::Section>& secs, std::vector<std::string_view>& views) const;
  // The decoder chain's output for `ids` (bytes, not necessarily valid UTF-8).
  // `continues`: the ids follow earlier ones of the same text (a streaming window past the start).
  Status decode_raw(std::span<const int32_t> ids, bool skip_special, std::string& out, bool continues = false) const;
};

}  // namespace nxrt::genai
