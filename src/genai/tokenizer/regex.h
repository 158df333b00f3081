// The regexes of tokenizer.json (Split / Replace patterns, ByteLevel's GPT-2 split) on PCRE2, and the
// {"Regex": ...} / {"String": ...} pattern objects that use them.
//
// tokenizer.json regexes are Oniguruma's (the tokenizers crate's engine); they run on PCRE2 (UTF + UCP,
// JIT when available) after a small rewrite that follows tokenizers.js: \s/\S = Unicode White_Space,
// \h/\H = hex digit, \w/\W = Alphabetic|M|Nd|Pc (+ a few Latin-1), (?i:...) / (?i) fold ASCII letters
// only. Built with NXRT_WITH_TOKENIZER_LIBS=OFF there is no regex engine: Regex::compile fails with a
// not_implemented error saying so, and literal String patterns still work.
#pragma once
#include <memory>
#include <type_traits>
#include <string>
#include <string_view>

#include "nxrt/status.h"

namespace nxrt::genai {
class Json;
}

namespace nxrt::genai::tok {

class Regex {
 public:
  // A compiled Oniguruma pattern; invalid_model when PCRE2 rejects it, not_implemented when nxrt was
  // built without PCRE2.
  static Result<std::shared_ptr<Regex>> compile(std::string_view onig_pattern);
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex();

  // Calls f(start, end) for every match, left to right (JS matchAll semantics: after an empty match
  // the search resumes one code point later). `s` must be valid UTF-8.
  template <typename F>
  Status for_each_match(std::string_view s, F&& f) const {
    using Fn = std::remove_reference_t<F>;
    return match_loop(
        s, [](void* ctx, size_t b, size_t e) { (*static_cast<Fn*>(ctx))(b, e); },
        const_cast<void*>(static_cast<const void*>(std::addressof(f))));
  }

 private:
  // The match loop, in regex.cpp with PCRE2 (one indirect call per match).
  using MatchFn = void (*)(void* ctx, size_t b, size_t e);
  Status match_loop(std::string_view s, MatchFn fn, void* ctx) const;

  struct Compiled;  // the PCRE2 code
  Regex() = default;
  Compiled* code_ = nullptr;
  std::string source_;
};

// A Split/Replace pattern: {"Regex": "..."} or {"String": "..."}.
struct Pattern {
  std::shared_ptr<Regex> regex;
  std::string literal;
  bool is_regex = false;

  template <typename F>
  Status for_each_match(std::string_view s, F&& f) const {
    if (is_regex) return regex->for_each_match(s, f);
    if (literal.empty()) return Status::Ok();
    size_t pos = 0;
    while (true) {
      size_t at = s.find(literal, pos);
      if (at == std::string_view::npos) break;
      f(at, at + literal.size());
      pos = at + literal.size();
    }
    return Status::Ok();
  }
};

// The 'pattern' member `j` of the component `where` names ("pre_tokenizer Split", ...).
Result<Pattern> parse_pattern(const Json* j, const std::string& where);

// `s` with every match of `p` replaced by `content`; *st receives a matching error.
std::string replace_all(std::string_view s, const Pattern& p, std::string_view content, Status* st);

}  // namespace nxrt::genai::tok
