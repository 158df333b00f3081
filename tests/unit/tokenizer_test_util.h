// Hand-built byte-level BPE tokenizer.json files for unit tests (test_tokenizer.cpp, test_chat_template.cpp).
#pragma once
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "genai/json.h"
#include "genai/unicode.h"

// For tests whose tokenizers need PCRE2 or ICU (a regex pre-tokenizer, NFC...): skipped in a build
// without them (NXRT_WITH_TOKENIZER_LIBS=OFF), where loading such a tokenizer is an error by design
// (GenaiTokenizer.RegexAndUnicodeComponentsFollowTheBuildOption checks that error).
#define NXRT_SKIP_WITHOUT_TOKENIZER_LIBS()                  \
  if (!::nxrt::genai::tokenizer_libs_available()) GTEST_SKIP() \
      << "nxrt was built without PCRE2/ICU (NXRT_WITH_TOKENIZER_LIBS=OFF)"

namespace nxrt::test {

// GPT-2 byte -> printable code point, as UTF-8.
std::string byte_char(int b);

// Qwen2/3's pre-tokenizer split pattern.
extern const char* const kQwenPattern;

struct Spec {
  std::vector<std::pair<std::string, std::string>> merges;  // byte-level strings
  std::vector<std::tuple<std::string, bool, bool, bool>> added;  // content, special, lstrip, rstrip
  std::string split_pattern = kQwenPattern;
  genai::Json normalizer;     // null
  genai::Json post;           // null
  bool merges_as_strings = false;
};

// A byte-level BPE tokenizer: ids 0..255 are the bytes, then one id per merge result, then added tokens.
genai::Json make_byte_level(const Spec& spec, std::vector<std::string>* vocab_out = nullptr);

}  // namespace nxrt::test
