// tokenizer.json pre-tokenizers: Split (Regex/String; Isolated Removed MergedWithPrevious MergedWithNext
// Contiguous; invert) ByteLevel Digits Metaspace WhitespaceSplit Sequence. A pre-tokenizer cuts a
// normalized section into the pieces (words) the BPE model encodes one by one.
// Those that need a regex (Split with a Regex pattern, ByteLevel with use_regex, Digits,
// WhitespaceSplit) fail to load when nxrt is built without PCRE2 (NXRT_WITH_TOKENIZER_LIBS=OFF).
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::genai {
class Json;
}

namespace nxrt::genai::tok {

class Regex;

// Pieces are views into the section text or into strings the pre-tokenizers made (kept in an Arena
// that outlives the pieces; std::deque never moves its elements).
using Pieces = std::vector<std::string_view>;
using Arena = std::deque<std::string>;

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  // Appends the pieces of `s` to `out` (views into `s` or into `arena`). first_section: `s` comes
  // from the start of the input.
  virtual Status split(std::string_view s, bool first_section, Pieces& out, Arena& arena) const = 0;
};

struct ByteLevelPreTokenizer : PreTokenizer {
  bool add_prefix_space = false;
  bool use_regex = true;
  // false: leave the bytes raw (the BPE model then maps bytes to the byte-level alphabet itself).
  bool map_bytes = true;
  std::shared_ptr<Regex> regex;
  Status split(std::string_view s, bool first_section, Pieces& out, Arena& arena) const override;
};

// The pre-tokenizer the tokenizer.json object `j` describes; not_implemented for an unknown type.
Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const Json& j);

// The ByteLevel step `p` ends with (`p` itself, or the last item of a Sequence), else nullptr.
ByteLevelPreTokenizer* final_byte_level(PreTokenizer* p);

}  // namespace nxrt::genai::tok
