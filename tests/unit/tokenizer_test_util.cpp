#include "tokenizer_test_util.h"

namespace nxrt::test {

using genai::Json;

std::string byte_char(int b) {
  bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  int cp = b;
  if (!printable) {
    int extra = 0;
    for (int x = 0; x < b; ++x) {
      bool p = (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF);
      if (!p) ++extra;
    }
    cp = 256 + extra;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

const char* const kQwenPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";


Json make_byte_level(const Spec& spec, std::vector<std::string>* vocab_out) {
  Json::Object vocab;
  std::vector<std::string> names;
  for (int b = 0; b < 256; ++b) names.push_back(byte_char(b));
  for (const auto& m : spec.merges) names.push_back(m.first + m.second);
  for (size_t i = 0; i < names.size(); ++i) vocab.emplace_back(names[i], Json::integer(static_cast<int64_t>(i)));
  Json::Array merges;
  for (const auto& m : spec.merges) {
    if (spec.merges_as_strings) {
      merges.push_back(Json::string(m.first + " " + m.second));
    } else {
      merges.push_back(Json::array({Json::string(m.first), Json::string(m.second)}));
    }
  }
  Json::Array added;
  int64_t next = static_cast<int64_t>(names.size());
  for (const auto& [content, special, lstrip, rstrip] : spec.added) {
    added.push_back(Json::object({{"id", Json::integer(next++)},
                                  {"content", Json::string(content)},
                                  {"single_word", Json::boolean(false)},
                                  {"lstrip", Json::boolean(lstrip)},
                                  {"rstrip", Json::boolean(rstrip)},
                                  {"normalized", Json::boolean(false)},
                                  {"special", Json::boolean(special)}}));
    names.push_back(content);
  }
  if (vocab_out) *vocab_out = names;
  Json pre = Json::object(
      {{"type", Json::string("Sequence")},
       {"pretokenizers",
        Json::array({Json::object({{"type", Json::string("Split")},
                                   {"pattern", Json::object({{"Regex", Json::string(spec.split_pattern)}})},
                                   {"behavior", Json::string("Isolated")},
                                   {"invert", Json::boolean(false)}}),
                     Json::object({{"type", Json::string("ByteLevel")},
                                   {"add_prefix_space", Json::boolean(false)},
                                   {"use_regex", Json::boolean(false)}})})}});
  Json post = spec.post.is_null() ? Json::object({{"type", Json::string("ByteLevel")}}) : spec.post;
  return Json::object({{"version", Json::string("1.0")},
                       {"added_tokens", Json::array(added)},
                       {"normalizer", spec.normalizer},
                       {"pre_tokenizer", pre},
                       {"post_processor", post},
                       {"decoder", Json::object({{"type", Json::string("ByteLevel")}})},
                       {"model", Json::object({{"type", Json::string("BPE")},
                                               {"vocab", Json::object(vocab)},
                                               {"merges", Json::array(merges)}})}});
}

}  // namespace nxrt::test
