#include "genai/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <filesystem>
#include <functional>
#include <mutex>
#include <queue>
#include <unordered_map>

#include "genai/json.h"

namespace nxrt::genai {

// ---------------------------------------------------------------------------------------------------
// UTF-8
// ---------------------------------------------------------------------------------------------------
namespace {

// Expected sequence length for a lead byte (0: not a valid lead), and the range of its first
// continuation byte (Unicode Table 3-7, well-formed UTF-8).
struct LeadInfo {
  uint8_t len, lo, hi;
};
LeadInfo lead_info(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c >= 0xE1 && c <= 0xEC) return {3, 0x80, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xEE && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// At s[i]: length of a complete well-formed sequence (>0), or -(bytes of the maximal ill-formed
// subpart to replace with one U+FFFD).
int utf8_step(std::string_view s, size_t i) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  LeadInfo li = lead_info(c);
  if (li.len == 1) return 1;
  if (li.len == 0) return -1;
  size_t n = s.size();
  for (int k = 1; k < li.len; ++k) {
    if (i + k >= n) return -k;
    unsigned char b = static_cast<unsigned char>(s[i + k]);
    unsigned char lo = k == 1 ? li.lo : 0x80, hi = k == 1 ? li.hi : 0xBF;
    if (b < lo || b > hi) return -k;
  }
  return li.len;
}

bool utf8_valid(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int st = utf8_step(s, i);
    if (st < 0) return false;
    i += st;
  }
  return true;
}

// Length of the code point starting at s[i] in valid UTF-8.
inline size_t cp_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

inline uint32_t decode_cp(std::string_view s, size_t i, size_t* len) {
  unsigned char c = static_cast<unsigned char>(s[i]);
  size_t l = cp_len(c);
  *len = l;
  if (l == 1) return c;
  uint32_t cp = c & (l == 2 ? 0x1F : l == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < l; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

std::string_view trim_js_end(std::string_view s) {
  while (!s.empty()) {
    size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    size_t l;
    if (!is_js_space(decode_cp(s, i, &l))) break;
    s = s.substr(0, i);
  }
  return s;
}

std::string_view trim_js_start(std::string_view s) {
  while (!s.empty()) {
    size_t l;
    if (!is_js_space(decode_cp(s, 0, &l))) break;
    s = s.substr(l);
  }
  return s;
}

}  // namespace

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0, n = s.size();
  while (i < n) {
    int st = utf8_step(s, i);
    if (st > 0) {
      out.append(s.data() + i, st);
      i += st;
    } else {
      out += "\xEF\xBF\xBD";
      i += -st;
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  size_t n = s.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    size_t p = n - k;
    unsigned char c = static_cast<unsigned char>(s[p]);
    if (c >= 0x80 && c <= 0xBF) continue;  // continuation byte: look further back
    LeadInfo li = lead_info(c);
    if (li.len <= k) return n;  // ASCII, invalid, or a complete sequence
    // Lead of a longer sequence: incomplete if the bytes after it are valid so far.
    for (size_t j = 1; j < k; ++j) {
      unsigned char b = static_cast<unsigned char>(s[p + j]);
      unsigned char lo = j == 1 ? li.lo : 0x80, hi = j == 1 ? li.hi : 0xBF;
      if (b < lo || b > hi) return n;
    }
    return p;
  }
  return n;
}

// ---------------------------------------------------------------------------------------------------
// Regex (PCRE2)
// ---------------------------------------------------------------------------------------------------
namespace {

// Oniguruma (the tokenizers crate's engine) -> PCRE2, following tokenizers.js's translation:
// \s/\S = Unicode White_Space, \h/\H = hex digit, \w/\W = Alphabetic|M|Nd|Pc (+ a few Latin-1), and
// (?i:...) / (?i) fold ASCII letters only.
std::string rewrite_oniguruma(std::string_view p) {
  static const char* kWordChars = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
  std::string out;
  std::vector<bool> ci_stack{false};
  bool in_class = false;
  size_t class_start = 0;
  auto is_alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto swap_case = [](char c) { return static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c + 32); };
  size_t i = 0, n = p.size();
  while (i < n) {
    char c = p[i];
    bool ci = ci_stack.back();
    if (c == '\\' && i + 1 < n) {
      char e = p[i + 1];
      if ((e == 'p' || e == 'P' || e == 'x') && i + 2 < n && p[i + 2] == '{') {
        size_t close = p.find('}', i + 2);
        if (close == std::string_view::npos) close = n - 1;
        out.append(p.substr(i, close + 1 - i));
        i = close + 1;
        continue;
      }
      std::string rep;
      switch (e) {
        case 's': rep = "\\p{White_Space}"; break;
        case 'S': rep = "\\P{White_Space}"; break;
        case 'h': rep = in_class ? "0-9A-Fa-f" : "[0-9A-Fa-f]"; break;
        case 'H': if (!in_class) rep = "[^0-9A-Fa-f]"; break;
        case 'w': rep = in_class ? std::string(kWordChars) : "[" + std::string(kWordChars) + "]"; break;
        case 'W': if (!in_class) rep = "[^" + std::string(kWordChars) + "]"; break;
        default: break;
      }
      if (!rep.empty()) {
        out += rep;
        i += 2;
        continue;
      }
      size_t l = cp_len(static_cast<unsigned char>(e));
      out.append(p.substr(i, 1 + l));
      i += 1 + l;
      continue;
    }
    if (in_class) {
      if (c == ']' && i > class_start) {
        in_class = false;
        out += c;
        ++i;
        continue;
      }
      if (ci && is_alpha(c)) {
        if (i + 2 < n && p[i + 1] == '-' && is_alpha(p[i + 2])) {
          out += p.substr(i, 3);
          out += swap_case(c);
          out += '-';
          out += swap_case(p[i + 2]);
          i += 3;
        } else {
          out += c;
          out += swap_case(c);
          ++i;
        }
        continue;
      }
      out += c;
      ++i;
      continue;
    }
    if (c == '[') {
      in_class = true;
      out += c;
      ++i;
      if (i < n && p[i] == '^') out += p[i++];
      class_start = i + 1;  // a ']' right at the start is a literal
      if (i < n && p[i] == ']') {
        out += p[i++];
      }
      class_start = i;
      continue;
    }
    if (c == '(') {
      if (p.substr(i, 4) == "(?i:") {
        ci_stack.push_back(true);
        out += "(?:";
        i += 4;
        continue;
      }
      if (p.substr(i, 5) == "(?-i:") {
        ci_stack.push_back(false);
        out += "(?:";
        i += 5;
        continue;
      }
      if (p.substr(i, 4) == "(?i)") {
        ci_stack.back() = true;
        i += 4;
        continue;
      }
      if (p.substr(i, 5) == "(?-i)") {
        ci_stack.back() = false;
        i += 5;
        continue;
      }
      ci_stack.push_back(ci);
      // Copy a group prefix with a name verbatim: (?<name> (?P<name> (?'name'
      size_t j = i + 1;
      if (j < n && p[j] == '?') {
        ++j;
        if (j < n && p[j] == 'P') ++j;
        if (j + 1 < n && (p[j] == '<' || p[j] == '\'') && p[j + 1] != '=' && p[j + 1] != '!') {
          char close = p[j] == '<' ? '>' : '\'';
          size_t e = p.find(close, j + 1);
          if (e != std::string_view::npos) j = e;
        }
        out.append(p.substr(i, j + 1 - i));
        i = j + 1;
        continue;
      }
      out += c;
      ++i;
      continue;
    }
    if (c == ')') {
      if (ci_stack.size() > 1) ci_stack.pop_back();
      out += c;
      ++i;
      continue;
    }
    if (ci && is_alpha(c)) {
      out += '[';
      out += c;
      out += swap_case(c);
      out += ']';
      ++i;
      continue;
    }
    out += c;
    ++i;
  }
  return out;
}

struct JitStack {
  pcre2_match_context* mctx = nullptr;
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_data* md = nullptr;
  JitStack() {
    mctx = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (mctx && stack) pcre2_jit_stack_assign(mctx, nullptr, stack);
    md = pcre2_match_data_create(1, nullptr);
  }
  ~JitStack() {
    if (md) pcre2_match_data_free(md);
    if (stack) pcre2_jit_stack_free(stack);
    if (mctx) pcre2_match_context_free(mctx);
  }
};

JitStack& thread_jit() {
  thread_local JitStack js;
  return js;
}

class Regex {
 public:
  static Result<std::shared_ptr<Regex>> compile(std::string_view onig_pattern) {
    std::string pat = rewrite_oniguruma(onig_pattern);
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_compile_context* cctx = pcre2_compile_context_create(nullptr);
    if (cctx) pcre2_set_newline(cctx, PCRE2_NEWLINE_LF);
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pat.data()), pat.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE | PCRE2_ALT_CIRCUMFLEX, &err,
                                     &off, cctx);
    if (cctx) pcre2_compile_context_free(cctx);
    if (!code) {
      PCRE2_UCHAR buf[256];
      pcre2_get_error_message(err, buf, sizeof(buf));
      return invalid_model("tokenizer.json: cannot compile regex '" + std::string(onig_pattern) +
                           "' (as PCRE2 '" + pat + "'): " + reinterpret_cast<char*>(buf) + " at offset " +
                           std::to_string(off));
    }
    auto r = std::make_shared<Regex>();
    r->code_ = code;
    r->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
    r->source_ = std::string(onig_pattern);
    return r;
  }
  Regex() = default;
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  ~Regex() {
    if (code_) pcre2_code_free(code_);
  }

  // Calls f(start, end) for every match, left to right (JS matchAll semantics: after an empty match
  // the search resumes one code point later). `s` must be valid UTF-8.
  template <typename F>
  Status for_each_match(std::string_view s, F&& f) const {
    JitStack& js = thread_jit();
    if (!js.md) return runtime_error("tokenizer: out of memory for regex match data");
    size_t pos = 0;
    while (pos <= s.size()) {
      int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, PCRE2_NO_UTF_CHECK,
                           js.md, js.mctx);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(rc, buf, sizeof(buf));
        return runtime_error("tokenizer: regex '" + source_ + "' failed: " + reinterpret_cast<char*>(buf));
      }
      PCRE2_SIZE* ov = pcre2_get_ovector_pointer(js.md);
      size_t b = ov[0], e = ov[1];
      f(b, e);
      if (e > b) {
        pos = e;
      } else {
        if (e >= s.size()) break;
        pos = e + cp_len(static_cast<unsigned char>(s[e]));
      }
    }
    return Status::Ok();
  }

 private:
  pcre2_code* code_ = nullptr;
  bool jit_ = false;
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

Result<Pattern> parse_pattern(const Json* j, const std::string& where) {
  if (!j || !j->is_object()) return invalid_model("tokenizer.json: " + where + ": missing 'pattern' object");
  Pattern p;
  if (const Json* r = j->find("Regex"); r && r->is_string()) {
    NXRT_ASSIGN_OR_RETURN(p.regex, Regex::compile(r->as_string()));
    p.is_regex = true;
  } else if (const Json* s = j->find("String"); s && s->is_string()) {
    p.literal = s->as_string();
  } else {
    return invalid_model("tokenizer.json: " + where + ": 'pattern' needs a 'Regex' or 'String' member");
  }
  return p;
}

std::string replace_all(std::string_view s, const Pattern& p, std::string_view content, Status* st) {
  std::string out;
  size_t prev = 0;
  *st = p.for_each_match(s, [&](size_t b, size_t e) {
    out.append(s.substr(prev, b - prev));
    out.append(content);
    prev = e;
  });
  out.append(s.substr(prev));
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Normalizers
// ---------------------------------------------------------------------------------------------------
struct Normalizer {
  virtual ~Normalizer() = default;
  virtual Status normalize(std::string& s) const = 0;
};

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

Status to_utf16(std::string_view s, std::u16string& out) {
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = 0;
  out.resize(s.size() + 1);
  u_strFromUTF8(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len, s.data(),
                static_cast<int32_t>(s.size()), &err);
  if (U_FAILURE(err)) return runtime_error(std::string("tokenizer: UTF-8 -> UTF-16 failed: ") + u_errorName(err));
  out.resize(len);
  return Status::Ok();
}

Status from_utf16(const std::u16string& s, std::string& out) {
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = 0;
  out.resize(s.size() * 3 + 1);
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &len, reinterpret_cast<const UChar*>(s.data()),
              static_cast<int32_t>(s.size()), &err);
  if (U_FAILURE(err)) return runtime_error(std::string("tokenizer: UTF-16 -> UTF-8 failed: ") + u_errorName(err));
  out.resize(len);
  return Status::Ok();
}

// True when every code point of `s` is in a range whose characters are unchanged by NFC in any
// context (NFC_Quick_Check=Yes, canonical combining class 0, not a composition's second part): Latin-1
// and Latin Extended/IPA below U+0300, kana (without U+3099/U+309A), CJK ideographs, Hangul
// syllables, fullwidth forms, emoji. A fast path only: anything else goes through ICU.
bool nfc_stable(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0xCC) {  // U+0000..U+02FF
      i += cp_len(c);
      continue;
    }
    size_t l;
    uint32_t cp = decode_cp(s, i, &l);
    bool ok = (cp >= 0x3040 && cp <= 0x3098) || (cp >= 0x309B && cp <= 0x30FF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
              (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xFF01 && cp <= 0xFFEF) || (cp >= 0x1F300 && cp <= 0x1FAFF) ||
              (cp >= 0x3000 && cp <= 0x303F && cp != 0x302A && cp != 0x302B && cp != 0x302C && cp != 0x302D &&
               cp != 0x302E && cp != 0x302F);
    if (!ok) return false;
    i += l;
  }
  return true;
}

struct UnicodeNormalizer : Normalizer {
  const UNormalizer2* norm = nullptr;
  std::string form;
  Status normalize(std::string& s) const override {
    if (is_ascii(s)) return Status::Ok();
    if (form == "NFC" && nfc_stable(s)) return Status::Ok();
    std::u16string u;
    NXRT_RETURN_IF_ERROR(to_utf16(s, u));
    UErrorCode err = U_ZERO_ERROR;
    const UChar* src = reinterpret_cast<const UChar*>(u.data());
    int32_t n = static_cast<int32_t>(u.size());
    if (unorm2_isNormalized(norm, src, n, &err) && U_SUCCESS(err)) return Status::Ok();
    err = U_ZERO_ERROR;
    std::u16string dst(u.size() * 3 + 16, u'\0');
    int32_t len = unorm2_normalize(norm, src, n, reinterpret_cast<UChar*>(dst.data()),
                                   static_cast<int32_t>(dst.size()), &err);
    if (U_FAILURE(err)) return runtime_error("tokenizer: " + form + " normalization failed: " + u_errorName(err));
    dst.resize(len);
    return from_utf16(dst, s);
  }
};

struct LowercaseNormalizer : Normalizer {
  Status normalize(std::string& s) const override {
    if (is_ascii(s)) {
      for (char& c : s) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      }
      return Status::Ok();
    }
    std::u16string u;
    NXRT_RETURN_IF_ERROR(to_utf16(s, u));
    std::u16string dst(u.size() * 3 + 16, u'\0');
    UErrorCode err = U_ZERO_ERROR;
    int32_t len = u_strToLower(reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()),
                               reinterpret_cast<const UChar*>(u.data()), static_cast<int32_t>(u.size()), "", &err);
    if (U_FAILURE(err)) return runtime_error(std::string("tokenizer: lowercase failed: ") + u_errorName(err));
    dst.resize(len);
    return from_utf16(dst, s);
  }
};

struct PrependNormalizer : Normalizer {
  std::string prepend;
  Status normalize(std::string& s) const override {
    s.insert(0, prepend);
    return Status::Ok();
  }
};

struct ReplaceNormalizer : Normalizer {
  Pattern pattern;
  std::string content;
  Status normalize(std::string& s) const override {
    Status st;
    s = replace_all(s, pattern, content, &st);
    return st;
  }
};

struct StripNormalizer : Normalizer {
  bool left = true, right = true;
  Status normalize(std::string& s) const override {
    std::string_view v = s;
    if (left) v = trim_js_start(v);
    if (right) v = trim_js_end(v);
    s = std::string(v);
    return Status::Ok();
  }
};

struct SequenceNormalizer : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> items;
  Status normalize(std::string& s) const override {
    for (const auto& n : items) NXRT_RETURN_IF_ERROR(n->normalize(s));
    return Status::Ok();
  }
};

Result<std::unique_ptr<Normalizer>> make_normalizer(const Json& j) {
  std::string type = j.get_string("type");
  if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    auto n = std::make_unique<UnicodeNormalizer>();
    UErrorCode err = U_ZERO_ERROR;
    n->norm = type == "NFC"    ? unorm2_getNFCInstance(&err)
              : type == "NFD"  ? unorm2_getNFDInstance(&err)
              : type == "NFKC" ? unorm2_getNFKCInstance(&err)
                               : unorm2_getNFKDInstance(&err);
    if (U_FAILURE(err) || !n->norm) return runtime_error("tokenizer: ICU " + type + " normalizer unavailable");
    n->form = type;
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Lowercase") return std::unique_ptr<Normalizer>(std::make_unique<LowercaseNormalizer>());
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    n->prepend = j.get_string("prepend");
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Replace") {
    auto n = std::make_unique<ReplaceNormalizer>();
    NXRT_ASSIGN_OR_RETURN(n->pattern, parse_pattern(j.find("pattern"), "normalizer Replace"));
    n->content = j.get_string("content");
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    n->left = j.get_bool("strip_left", true);
    n->right = j.get_bool("strip_right", true);
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Sequence") {
    auto n = std::make_unique<SequenceNormalizer>();
    for (const Json& e : j.find("normalizers") ? j.find("normalizers")->as_array() : Json::Array{}) {
      if (e.is_null()) continue;
      NXRT_ASSIGN_OR_RETURN(auto item, make_normalizer(e));
      n->items.push_back(std::move(item));
    }
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  return not_implemented("tokenizer.json: normalizer type '" + type +
                         "' is not supported (supported: NFC NFD NFKC NFKD Lowercase Prepend Replace Strip Sequence)");
}

// ---------------------------------------------------------------------------------------------------
// Byte-level alphabet (GPT-2): every byte maps to a printable code point.
// ---------------------------------------------------------------------------------------------------
struct ByteAlphabet {
  std::array<std::string, 256> byte_to_str;  // UTF-8 of the code point for each byte
  std::array<int16_t, 512> cp_to_byte;        // -1: not in the alphabet
  ByteAlphabet() {
    cp_to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
      append_utf8(byte_to_str[b], cp);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

// ---------------------------------------------------------------------------------------------------
// Pre-tokenizers: a list of pieces in, a list of pieces out.
// ---------------------------------------------------------------------------------------------------
// Pieces are views into the section text or into strings the pre-tokenizers made (kept in an Arena
// that outlives the pieces; std::deque never moves its elements).
using Pieces = std::vector<std::string_view>;
using Arena = std::deque<std::string>;

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `s` at the matches of `p` (or at the gaps, when invert) with the tokenizers crate's behaviors.
Status split_by(std::string_view s, const Pattern& p, SplitBehavior behavior, bool invert, Pieces& out) {
  if (behavior == SplitBehavior::kIsolated) {  // the common case: every match and every gap
    size_t prev = 0;
    NXRT_RETURN_IF_ERROR(p.for_each_match(s, [&](size_t b, size_t e) {
      if (e == b) return;
      if (b > prev) out.push_back(s.substr(prev, b - prev));
      out.push_back(s.substr(b, e - b));
      prev = e;
    }));
    if (prev < s.size()) out.push_back(s.substr(prev));
    return Status::Ok();
  }
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  NXRT_RETURN_IF_ERROR(p.for_each_match(s, [&](size_t b, size_t e) {
    if (e == b) return;
    if (b > prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }));
  if (prev < s.size()) spans.push_back({prev, s.size(), false});
  if (invert) {
    for (Span& sp : spans) sp.match = !sp.match;
  }
  switch (behavior) {
    case SplitBehavior::kIsolated:
      break;
    case SplitBehavior::kRemoved:
      for (const Span& sp : spans) {
        if (!sp.match) out.push_back(s.substr(sp.b, sp.e - sp.b));
      }
      break;
    case SplitBehavior::kMergedWithPrevious: {
      size_t start = 0;
      bool open = false;
      for (const Span& sp : spans) {
        if (sp.match && open) {
          out.push_back(s.substr(start, sp.e - start));
          open = false;
        } else if (sp.match) {
          out.push_back(s.substr(sp.b, sp.e - sp.b));
        } else {
          if (open) out.push_back(s.substr(start, sp.b - start));
          start = sp.b;
          open = true;
        }
      }
      if (open) out.push_back(s.substr(start));
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      size_t start = 0;
      bool open = false;
      for (const Span& sp : spans) {
        if (sp.match) {
          if (open) out.push_back(s.substr(start, sp.b - start));
          start = sp.b;
          open = true;
        } else if (open) {
          out.push_back(s.substr(start, sp.e - start));
          open = false;
        } else {
          out.push_back(s.substr(sp.b, sp.e - sp.b));
        }
      }
      if (open) out.push_back(s.substr(start));
      break;
    }
    case SplitBehavior::kContiguous: {
      size_t i = 0;
      while (i < spans.size()) {
        size_t j = i;
        if (spans[i].match) {
          while (j + 1 < spans.size() && spans[j + 1].match) ++j;
        }
        out.push_back(s.substr(spans[i].b, spans[j].e - spans[i].b));
        i = j + 1;
      }
      break;
    }
  }
  return Status::Ok();
}

struct PreTokenizer {
  virtual ~PreTokenizer() = default;
  // Appends the pieces of `s` to `out` (views into `s` or into `arena`). first_section: `s` comes
  // from the start of the input.
  virtual Status split(std::string_view s, bool first_section, Pieces& out, Arena& arena) const = 0;
};

struct SplitPreTokenizer : PreTokenizer {
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  Status split(std::string_view s, bool, Pieces& out, Arena&) const override {
    return split_by(s, pattern, behavior, invert, out);
  }
};

struct ByteLevelPreTokenizer : PreTokenizer {
  bool add_prefix_space = false;
  bool use_regex = true;
  // false: leave the bytes raw (the BPE model then maps bytes to the byte-level alphabet itself).
  bool map_bytes = true;
  std::shared_ptr<Regex> regex;
  Status split(std::string_view s, bool, Pieces& out, Arena& arena) const override {
    if (add_prefix_space && (s.empty() || s[0] != ' ')) {
      arena.push_back(" " + std::string(s));
      s = arena.back();
    }
    size_t first = out.size();
    if (use_regex) {
      Pattern p;
      p.regex = regex;
      p.is_regex = true;
      NXRT_RETURN_IF_ERROR(split_by(s, p, SplitBehavior::kIsolated, false, out));
    } else {
      out.push_back(s);
    }
    if (map_bytes) {
      const ByteAlphabet& a = byte_alphabet();
      for (size_t k = first; k < out.size(); ++k) {
        std::string m;
        m.reserve(out[k].size() * 2);
        for (unsigned char c : out[k]) m += a.byte_to_str[c];
        arena.push_back(std::move(m));
        out[k] = arena.back();
      }
    }
    return Status::Ok();
  }
};

struct DigitsPreTokenizer : PreTokenizer {
  Pattern pattern;  // [0-9] (ASCII digits, as tokenizers and tokenizers.js)
  bool individual = false;
  Status split(std::string_view s, bool, Pieces& out, Arena&) const override {
    return split_by(s, pattern, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false, out);
  }
};

struct WhitespaceSplitPreTokenizer : PreTokenizer {
  Pattern pattern;  // \s+
  Status split(std::string_view s, bool, Pieces& out, Arena&) const override {
    return split_by(s, pattern, SplitBehavior::kRemoved, false, out);
  }
};

struct MetaspacePreTokenizer : PreTokenizer {
  std::string replacement = "\xE2\x96\x81";  // U+2581
  std::string scheme = "always";
  bool do_split = true;
  Status split(std::string_view s, bool first_section, Pieces& out, Arena& arena) const override {
    std::string r;
    for (char c : s) {
      if (c == ' ') {
        r += replacement;
      } else {
        r += c;
      }
    }
    bool prepend = scheme == "always" || (scheme == "first" && first_section);
    if (prepend && r.compare(0, replacement.size(), replacement) != 0) r.insert(0, replacement);
    arena.push_back(std::move(r));
    if (!do_split) {
      out.push_back(arena.back());
      return Status::Ok();
    }
    Pattern p;
    p.literal = replacement;
    return split_by(arena.back(), p, SplitBehavior::kMergedWithNext, false, out);
  }
};

struct SequencePreTokenizer : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> items;
  Status split(std::string_view s, bool first_section, Pieces& out, Arena& arena) const override {
    Pieces cur{s}, next;
    for (const auto& t : items) {
      next.clear();
      next.reserve(cur.size() * 2);
      for (std::string_view p : cur) NXRT_RETURN_IF_ERROR(t->split(p, first_section, next, arena));
      std::swap(cur, next);
    }
    out.insert(out.end(), cur.begin(), cur.end());
    return Status::Ok();
  }
};

// GPT-2's pre-tokenization regex, used by ByteLevel with use_regex.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const Json& j) {
  std::string type = j.get_string("type");
  if (type == "Split") {
    auto t = std::make_unique<SplitPreTokenizer>();
    NXRT_ASSIGN_OR_RETURN(t->pattern, parse_pattern(j.find("pattern"), "pre_tokenizer Split"));
    std::string b = j.get_string("behavior", "Isolated");
    if (b == "Isolated") {
      t->behavior = SplitBehavior::kIsolated;
    } else if (b == "Removed") {
      t->behavior = SplitBehavior::kRemoved;
    } else if (b == "MergedWithPrevious") {
      t->behavior = SplitBehavior::kMergedWithPrevious;
    } else if (b == "MergedWithNext") {
      t->behavior = SplitBehavior::kMergedWithNext;
    } else if (b == "Contiguous") {
      t->behavior = SplitBehavior::kContiguous;
    } else {
      return not_implemented("tokenizer.json: Split behavior '" + b + "' is not supported");
    }
    t->invert = j.get_bool("invert", false);
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "ByteLevel") {
    auto t = std::make_unique<ByteLevelPreTokenizer>();
    t->add_prefix_space = j.get_bool("add_prefix_space", false);
    t->use_regex = j.get_bool("use_regex", true);
    if (t->use_regex) {
      NXRT_ASSIGN_OR_RETURN(t->regex, Regex::compile(kGpt2Pattern));
    }
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "Digits") {
    auto t = std::make_unique<DigitsPreTokenizer>();
    NXRT_ASSIGN_OR_RETURN(t->pattern.regex, Regex::compile("[0-9]"));
    t->pattern.is_regex = true;
    t->individual = j.get_bool("individual_digits", false);
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "WhitespaceSplit") {
    auto t = std::make_unique<WhitespaceSplitPreTokenizer>();
    NXRT_ASSIGN_OR_RETURN(t->pattern.regex, Regex::compile("\\s+"));
    t->pattern.is_regex = true;
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "Metaspace") {
    auto t = std::make_unique<MetaspacePreTokenizer>();
    t->replacement = j.get_string("replacement", t->replacement);
    if (t->replacement.empty()) return invalid_model("tokenizer.json: Metaspace with an empty replacement");
    if (const Json* ps = j.find("prepend_scheme"); ps && ps->is_string()) {
      t->scheme = ps->as_string();
    } else if (const Json* aps = j.find("add_prefix_space"); aps && aps->is_bool()) {
      t->scheme = aps->as_bool() ? "always" : "never";
    }
    t->do_split = j.get_bool("split", true);
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "Sequence") {
    auto t = std::make_unique<SequencePreTokenizer>();
    for (const Json& e : j.find("pretokenizers") ? j.find("pretokenizers")->as_array() : Json::Array{}) {
      if (e.is_null()) continue;
      NXRT_ASSIGN_OR_RETURN(auto item, make_pre_tokenizer(e));
      t->items.push_back(std::move(item));
    }
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  return not_implemented("tokenizer.json: pre_tokenizer type '" + type +
                         "' is not supported (supported: Split ByteLevel Digits Metaspace WhitespaceSplit Sequence)");
}

// ---------------------------------------------------------------------------------------------------
// Decoders: token strings (bytes, not necessarily UTF-8) in, token strings out.
// ---------------------------------------------------------------------------------------------------
struct DecodeToken {
  std::string text;
  bool added = false;  // an added token: passes through ByteLevel unchanged
};
using DecodeTokens = std::vector<DecodeToken>;

struct Decoder {
  virtual ~Decoder() = default;
  virtual Status decode_chain(DecodeTokens& tokens) const = 0;
};

struct ByteLevelDecoder : Decoder {
  Status decode_chain(DecodeTokens& tokens) const override {
    const ByteAlphabet& a = byte_alphabet();
    for (DecodeToken& t : tokens) {
      if (t.added) continue;
      std::string out;
      out.reserve(t.text.size());
      std::string_view s = t.text;
      size_t i = 0;
      while (i < s.size()) {
        size_t l = 1;
        int st = utf8_step(s, i);
        if (st > 0) {
          l = static_cast<size_t>(st);
          uint32_t cp = decode_cp(s, i, &l);
          if (cp < 512 && a.cp_to_byte[cp] >= 0) {
            out += static_cast<char>(a.cp_to_byte[cp]);
          } else {
            out.append(s.substr(i, l));
          }
        } else {
          l = static_cast<size_t>(-st);
          out.append(s.substr(i, l));
        }
        i += l;
      }
      t.text = std::move(out);
    }
    return Status::Ok();
  }
};

struct ByteFallbackDecoder : Decoder {
  Status decode_chain(DecodeTokens& tokens) const override {
    auto hexval = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    for (DecodeToken& t : tokens) {
      const std::string& s = t.text;
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') {
        int h = hexval(s[3]), l = hexval(s[4]);
        if (h >= 0 && l >= 0) t.text = std::string(1, static_cast<char>(h * 16 + l));
      }
    }
    return Status::Ok();
  }
};

struct FuseDecoder : Decoder {
  Status decode_chain(DecodeTokens& tokens) const override {
    DecodeToken all;
    for (const DecodeToken& t : tokens) all.text += t.text;
    all.added = true;  // already decoded
    tokens.assign(1, std::move(all));
    return Status::Ok();
  }
};

struct ReplaceDecoder : Decoder {
  Pattern pattern;
  std::string content;
  Status decode_chain(DecodeTokens& tokens) const override {
    for (DecodeToken& t : tokens) {
      Status st;
      std::string r = replace_all(t.text, pattern, content, &st);
      NXRT_RETURN_IF_ERROR(st);
      t.text = std::move(r);
    }
    return Status::Ok();
  }
};

struct StripDecoder : Decoder {
  std::string content;  // one character
  int64_t start = 0, stop = 0;
  Status decode_chain(DecodeTokens& tokens) const override {
    if (content.empty()) return Status::Ok();
    for (DecodeToken& t : tokens) {
      std::string_view s = t.text;
      for (int64_t i = 0; i < start && s.substr(0, content.size()) == content; ++i) s.remove_prefix(content.size());
      for (int64_t i = 0; i < stop && s.size() >= content.size() &&
                          s.substr(s.size() - content.size()) == content;
           ++i) {
        s.remove_suffix(content.size());
      }
      t.text = std::string(s);
    }
    return Status::Ok();
  }
};

struct MetaspaceDecoder : Decoder {
  std::string replacement = "\xE2\x96\x81";
  bool strip_first = true;
  Status decode_chain(DecodeTokens& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string r;
      std::string_view s = tokens[i].text;
      size_t pos = 0;
      while (true) {
        size_t at = s.find(replacement, pos);
        if (at == std::string_view::npos) break;
        r.append(s.substr(pos, at - pos));
        r += ' ';
        pos = at + replacement.size();
      }
      r.append(s.substr(pos));
      if (i == 0 && strip_first && !r.empty() && r[0] == ' ') r.erase(0, 1);
      tokens[i].text = std::move(r);
    }
    return Status::Ok();
  }
};

struct SequenceDecoder : Decoder {
  std::vector<std::unique_ptr<Decoder>> items;
  Status decode_chain(DecodeTokens& tokens) const override {
    for (const auto& d : items) NXRT_RETURN_IF_ERROR(d->decode_chain(tokens));
    return Status::Ok();
  }
};

Result<std::unique_ptr<Decoder>> make_decoder(const Json& j) {
  std::string type = j.get_string("type");
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(std::make_unique<ByteLevelDecoder>());
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(std::make_unique<ByteFallbackDecoder>());
  if (type == "Fuse") return std::unique_ptr<Decoder>(std::make_unique<FuseDecoder>());
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    NXRT_ASSIGN_OR_RETURN(d->pattern, parse_pattern(j.find("pattern"), "decoder Replace"));
    d->content = j.get_string("content");
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = j.get_string("content", " ");
    d->start = j.get_int("start", 0);
    d->stop = j.get_int("stop", 0);
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    d->replacement = j.get_string("replacement", d->replacement);
    if (const Json* ps = j.find("prepend_scheme"); ps && ps->is_string()) {
      d->strip_first = ps->as_string() != "never";
    } else if (const Json* aps = j.find("add_prefix_space"); aps && aps->is_bool()) {
      d->strip_first = aps->as_bool();
    }
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Sequence") {
    auto d = std::make_unique<SequenceDecoder>();
    for (const Json& e : j.find("decoders") ? j.find("decoders")->as_array() : Json::Array{}) {
      if (e.is_null()) continue;
      NXRT_ASSIGN_OR_RETURN(auto item, make_decoder(e));
      d->items.push_back(std::move(item));
    }
    return std::unique_ptr<Decoder>(std::move(d));
  }
  return not_implemented("tokenizer.json: decoder type '" + type +
                         "' is not supported (supported: ByteLevel ByteFallback Fuse Replace Strip Metaspace Sequence)");
}

// ---------------------------------------------------------------------------------------------------
// Post-processors: ids of the sequence in, ids with special tokens out.
// ---------------------------------------------------------------------------------------------------
struct PostItem {
  bool is_sequence = false;     // the input sequence ("A")
  std::vector<int32_t> ids;     // a special token's ids
};

struct PostProcessor {
  std::vector<PostItem> single;  // empty: pass-through (ByteLevel)
  bool template_set = false;
  int32_t first_special() const {
    if (!single.empty() && !single.front().is_sequence && !single.front().ids.empty()) return single.front().ids[0];
    return -1;
  }
  int32_t last_special() const {
    if (!single.empty() && !single.back().is_sequence && !single.back().ids.empty()) return single.back().ids.back();
    return -1;
  }
};

struct HashSV {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
// Open-addressing (linear probing) map from strings to ids, owning its keys: one allocation per long
// key instead of a node per entry, and a probe sequence that stays in cache.
class TokenMap {
 public:
  void reserve(size_t n) {
    keys_.reserve(n);
    vals_.reserve(n);
    if (n * 2 > slots_.size()) rehash(n * 2);
  }
  size_t size() const { return keys_.size(); }
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    uint64_t h = hash(key);
    uint32_t tag = static_cast<uint32_t>(h >> 32) | 1u;
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& sl = slots_[i];
      if (sl.tag == 0) return -1;
      if (sl.tag == tag && keys_[sl.index] == key) return vals_[sl.index];
    }
  }
  // Inserts, or overwrites the value of an existing key.
  void set(std::string_view key, int32_t value) { insert(key, value, true); }
  // Inserts only when absent.
  void emplace(std::string_view key, int32_t value) { insert(key, value, false); }
  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < keys_.size(); ++i) f(keys_[i], vals_[i]);
  }

 private:
  struct Slot {
    uint32_t tag = 0;  // 0: empty; else high hash bits | 1
    uint32_t index = 0;
  };
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>()(s) * 0x9E3779B97F4A7C15ull; }
  void rehash(size_t want) {
    size_t cap = 16;
    while (cap < want) cap <<= 1;
    std::vector<Slot> slots(cap);
    size_t mask = cap - 1;
    for (uint32_t k = 0; k < keys_.size(); ++k) {
      uint64_t h = hash(keys_[k]);
      size_t i = h & mask;
      while (slots[i].tag != 0) i = (i + 1) & mask;
      slots[i] = {static_cast<uint32_t>(h >> 32) | 1u, k};
    }
    slots_ = std::move(slots);
  }
  void insert(std::string_view key, int32_t value, bool overwrite) {
    if ((keys_.size() + 1) * 2 > slots_.size()) rehash((keys_.size() + 1) * 2);
    uint64_t h = hash(key);
    uint32_t tag = static_cast<uint32_t>(h >> 32) | 1u;
    size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    for (;; i = (i + 1) & mask) {
      Slot& sl = slots_[i];
      if (sl.tag == 0) break;
      if (sl.tag == tag && keys_[sl.index] == key) {
        if (overwrite) vals_[sl.index] = value;
        return;
      }
    }
    slots_[i] = {tag, static_cast<uint32_t>(keys_.size())};
    keys_.emplace_back(key);
    vals_.push_back(value);
  }
  std::vector<std::string> keys_;
  std::vector<int32_t> vals_;
  std::vector<Slot> slots_;
};

// Open-addressing map (left id, right id) -> (rank, merged id).
class MergeMap {
 public:
  struct Value {
    int32_t rank, merged;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    if (cap > keys_.size()) rehash(cap);
  }
  const Value* find(int32_t a, int32_t b) const {
    if (keys_.empty()) return nullptr;
    uint64_t key = pack(a, b);
    size_t mask = keys_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  // Keeps the first value for a key (the lowest rank).
  void emplace(int32_t a, int32_t b, Value v) {
    if ((size_ + 1) * 2 > keys_.size()) rehash(std::max<size_t>(16, keys_.size() * 2));
    uint64_t key = pack(a, b);
    size_t mask = keys_.size() - 1;
    size_t i = hash(key) & mask;
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) return;
      i = (i + 1) & mask;
    }
    keys_[i] = key;
    vals_[i] = v;
    ++size_;
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  void rehash(size_t cap) {
    std::vector<uint64_t> keys(cap, kEmpty);
    std::vector<Value> vals(cap);
    size_t mask = cap - 1;
    for (size_t j = 0; j < keys_.size(); ++j) {
      if (keys_[j] == kEmpty) continue;
      size_t i = hash(keys_[j]) & mask;
      while (keys[i] != kEmpty) i = (i + 1) & mask;
      keys[i] = keys_[j];
      vals[i] = vals_[j];
    }
    keys_ = std::move(keys);
    vals_ = std::move(vals);
  }
  std::vector<uint64_t> keys_;
  std::vector<Value> vals_;
  size_t size_ = 0;
};

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = false;
};

// Longest-match splitter over a set of added tokens (leftmost position first, then longest).
class AddedSplitter {
 public:
  void add(const std::string& content, int32_t id) {
    if (content.empty()) return;
    by_first_[static_cast<unsigned char>(content[0])].push_back({content, id});
    first_[static_cast<unsigned char>(content[0])] = true;
    any_ = true;
  }
  void finish() {
    for (auto& v : by_first_) {
      std::stable_sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
    }
  }
  bool empty() const { return !any_; }
  struct Section {
    size_t b, e;
    int32_t id;  // -1: plain text
  };
  void split(std::string_view s, std::vector<Section>& out) const {
    size_t start = 0, i = 0, n = s.size();
    while (i < n) {
      unsigned char c = static_cast<unsigned char>(s[i]);
      if (first_[c]) {
        const Entry* hit = nullptr;
        for (const Entry& e : by_first_[c]) {
          if (e.text.size() <= n - i && std::memcmp(s.data() + i, e.text.data(), e.text.size()) == 0) {
            hit = &e;
            break;
          }
        }
        if (hit) {
          if (i > start) out.push_back({start, i, -1});
          out.push_back({i, i + hit->text.size(), hit->id});
          i += hit->text.size();
          start = i;
          continue;
        }
      }
      ++i;
    }
    if (start < n) out.push_back({start, n, -1});
  }

 private:
  struct Entry {
    std::string text;
    int32_t id;
  };
  std::array<std::vector<Entry>, 256> by_first_;
  std::array<bool, 256> first_{};
  bool any_ = false;
};

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Tokenizer
// ---------------------------------------------------------------------------------------------------
struct Tokenizer::Impl {
  // Model (BPE).
  TokenMap vocab;                            // token -> id (added tokens included, overriding)
  std::vector<std::string> id_to_token;      // id -> token (added tokens included)
  MergeMap merges;                           // (left, right) -> (rank, merged)
  int32_t unk_id = -1;
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool fuse_unk = false;  // consecutive unknown characters of a word give one unk
  std::string continuing_subword_prefix, end_of_word_suffix;
  std::array<int32_t, 256> byte_fallback_ids{};

  std::vector<AddedToken> added;
  std::vector<uint8_t> special_flag;         // by id
  std::vector<uint8_t> added_flag;           // by id
  AddedSplitter split_unnormalized, split_normalized;
  AddedSplitter plain_unnormalized, plain_normalized;  // non-special added tokens only (parse_special=false)
  std::unordered_map<int32_t, size_t> added_index;  // id -> index into `added`

  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Decoder> decoder;
  PostProcessor post;

  // Word cache: pre-token -> ids.
  static constexpr size_t kCacheCapacity = 20000;
  static constexpr size_t kMaxCachedWord = 256;
  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>, HashSV, std::equal_to<>> cache;

  // Byte-level fast path: when the pre-tokenizer ends with ByteLevel, it leaves pieces as raw bytes
  // and the model starts from one symbol per byte (byte_ids), looking words up in raw_vocab.
  bool raw_bytes = false;
  std::array<int32_t, 256> byte_ids{};
  TokenMap raw_vocab;  // raw bytes of every byte-level token -> id

  int32_t lookup(std::string_view s) const { return vocab.find(s); }
  int32_t lookup_word(std::string_view w) const { return raw_bytes ? raw_vocab.find(w) : vocab.find(w); }

  void bpe_word(std::string_view word, std::vector<int32_t>& out) const;
  void model_encode(std::string_view word, std::vector<int32_t>& out) const;
  Status encode_section(std::string_view text, bool first_section, std::vector<int32_t>& out) const;
  Status decode_raw(std::span<const int32_t> ids, bool skip_special, std::string& out) const;
};

void Tokenizer::Impl::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Sym {
    int32_t id;
    int32_t prev, next;
    uint32_t b, e;  // byte range in `word` (for unknown symbols)
  };
  std::vector<Sym> syms;
  syms.reserve(word.size());
  // Initial symbols: one per byte (raw_bytes) or per character (with continuing_subword_prefix /
  // end_of_word_suffix).
  size_t i = 0;
  std::string tmp;
  if (raw_bytes) {
    for (; i < word.size(); ++i) {
      int32_t k = static_cast<int32_t>(i);
      syms.push_back({byte_ids[static_cast<unsigned char>(word[i])], k - 1, k + 1, static_cast<uint32_t>(i),
                      static_cast<uint32_t>(i + 1)});
    }
    if (!syms.empty()) syms.back().next = -1;
  }
  while (i < word.size()) {
    size_t l = cp_len(static_cast<unsigned char>(word[i]));
    if (i + l > word.size()) l = word.size() - i;
    bool first = i == 0, last = i + l == word.size();
    int32_t id;
    if ((first || continuing_subword_prefix.empty()) && (!last || end_of_word_suffix.empty())) {
      id = lookup(word.substr(i, l));
    } else {
      tmp.clear();
      if (!first) tmp += continuing_subword_prefix;
      tmp.append(word.substr(i, l));
      if (last) tmp += end_of_word_suffix;
      id = lookup(tmp);
    }
    int32_t k = static_cast<int32_t>(syms.size());
    syms.push_back({id, k - 1, -1, static_cast<uint32_t>(i), static_cast<uint32_t>(i + l)});
    if (k > 0) syms[k - 1].next = k;
    i += l;
  }
  struct Cand {
    int32_t rank;
    int32_t pos;  // left symbol
    int32_t left, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
  auto push_pair = [&](int32_t a) {
    int32_t b = syms[a].next;
    if (b < 0 || syms[a].id < 0 || syms[b].id < 0) return;
    const MergeMap::Value* m = merges.find(syms[a].id, syms[b].id);
    if (!m) return;
    q.push({m->rank, a, syms[a].id, syms[b].id, m->merged});
  };
  for (int32_t k = 0; k + 1 < static_cast<int32_t>(syms.size()); ++k) push_pair(k);
  while (!q.empty()) {
    Cand c = q.top();
    q.pop();
    Sym& a = syms[c.pos];
    if (a.id != c.left || a.next < 0) continue;  // stale
    Sym& b = syms[a.next];
    if (b.id != c.right) continue;
    a.id = c.merged;
    a.e = b.e;
    a.next = b.next;
    if (b.next >= 0) syms[b.next].prev = c.pos;
    b.id = -2;  // dead
    if (a.prev >= 0) push_pair(a.prev);
    push_pair(c.pos);
  }
  bool last_unk = false;
  for (int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[k].next) {
    const Sym& s = syms[k];
    if (s.id >= 0) {
      out.push_back(s.id);
      last_unk = false;
      continue;
    }
    // Unknown character.
    if (byte_fallback) {
      bool all = true;
      for (uint32_t p = s.b; p < s.e; ++p) all = all && byte_fallback_ids[static_cast<unsigned char>(word[p])] >= 0;
      if (all) {
        for (uint32_t p = s.b; p < s.e; ++p) out.push_back(byte_fallback_ids[static_cast<unsigned char>(word[p])]);
        last_unk = false;
        continue;
      }
    }
    if (unk_id >= 0 && !(fuse_unk && last_unk)) out.push_back(unk_id);
    last_unk = true;
  }
}

void Tokenizer::Impl::model_encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    int32_t id = lookup_word(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  bool cacheable = word.size() < kMaxCachedWord;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t before = out.size();
  bpe_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (cache.size() >= kCacheCapacity) cache.clear();
    cache.emplace(std::string(word), std::vector<int32_t>(out.begin() + before, out.end()));
  }
}

Status Tokenizer::Impl::encode_section(std::string_view text, bool first_section, std::vector<int32_t>& out) const {
  if (!pre_tokenizer) {
    model_encode(text, out);
    return Status::Ok();
  }
  Pieces pieces;
  Arena arena;
  NXRT_RETURN_IF_ERROR(pre_tokenizer->split(text, first_section, pieces, arena));
  for (std::string_view p : pieces) model_encode(p, out);
  return Status::Ok();
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (std::filesystem::is_directory(path, ec)) file = (std::filesystem::path(path) / "tokenizer.json").string();
  if (!std::filesystem::exists(file, ec)) return io_error("tokenizer: no such file '" + file + "'");
  NXRT_ASSIGN_OR_RETURN(Json root, parse_json_file(file));
  auto t = from_json(root);
  if (!t.ok()) return t.status().with_context(file + ": ");
  return t;
}

Result<Tokenizer> Tokenizer::from_json_text(std::string_view json_text) {
  NXRT_ASSIGN_OR_RETURN(Json root, parse_json(json_text));
  return from_json(root);
}

Result<Tokenizer> Tokenizer::from_json(const Json& root) {
  if (!root.is_object()) return invalid_model("tokenizer.json: the top level is not an object");
  auto impl = std::make_unique<Impl>();
  const Json* model = root.find("model");
  if (!model || !model->is_object()) return invalid_model("tokenizer.json: missing 'model' object");
  std::string mtype = model->get_string("type");
  const Json* vocab = model->find("vocab");
  const Json* merges = model->find("merges");
  if (mtype.empty() && merges) mtype = "BPE";
  if (mtype != "BPE") {
    return not_implemented("tokenizer.json: model type '" + mtype + "' is not supported (supported: BPE)");
  }
  if (!vocab || !vocab->is_object()) return invalid_model("tokenizer.json: BPE model without a 'vocab' object");
  if (!merges || !merges->is_array()) return invalid_model("tokenizer.json: BPE model without a 'merges' array");

  // Vocabulary.
  int32_t max_id = -1;
  impl->vocab.reserve(vocab->as_object().size() + 1024);
  for (const auto& [tok, idv] : vocab->as_object()) {
    if (!idv.is_int() || idv.as_int() < 0 || idv.as_int() > 0x7FFFFFFF) {
      return invalid_model("tokenizer.json: vocab entry '" + tok + "' has a bad id");
    }
    int32_t id = static_cast<int32_t>(idv.as_int());
    impl->vocab.set(tok, id);
    max_id = std::max(max_id, id);
  }
  // Added tokens (override the vocabulary for their content, like tokenizers.js).
  if (const Json* at = root.find("added_tokens"); at && at->is_array()) {
    for (const Json& a : at->as_array()) {
      AddedToken t;
      const Json* id = a.find("id");
      const Json* content = a.find("content");
      if (!id || !id->is_int() || id->as_int() < 0 || id->as_int() > 0x7FFFFFFF || !content || !content->is_string()) {
        return invalid_model("tokenizer.json: added_tokens entry without an integer 'id' and a string 'content'");
      }
      t.id = static_cast<int32_t>(id->as_int());
      t.content = content->as_string();
      t.special = a.get_bool("special", false);
      t.lstrip = a.get_bool("lstrip", false);
      t.rstrip = a.get_bool("rstrip", false);
      t.normalized = a.get_bool("normalized", !t.special);
      max_id = std::max(max_id, t.id);
      impl->added.push_back(std::move(t));
    }
  }
  impl->id_to_token.assign(static_cast<size_t>(max_id + 1), std::string());
  impl->vocab.for_each([&](const std::string& tok, int32_t id) { impl->id_to_token[id] = tok; });
  impl->special_flag.assign(impl->id_to_token.size(), 0);
  impl->added_flag.assign(impl->id_to_token.size(), 0);
  for (size_t k = 0; k < impl->added.size(); ++k) {
    const AddedToken& t = impl->added[k];
    impl->vocab.set(t.content, t.id);
    impl->id_to_token[t.id] = t.content;
    impl->special_flag[t.id] = t.special;
    impl->added_flag[t.id] = 1;
    impl->added_index[t.id] = k;
  }

  // Merges.
  const auto& ml = merges->as_array();
  impl->merges.reserve(ml.size());
  std::string_view left, right;
  std::string joined;
  for (size_t r = 0; r < ml.size(); ++r) {
    const Json& m = ml[r];
    if (m.is_string()) {
      std::string_view s = m.as_string();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) {
        return invalid_model("tokenizer.json: merge " + std::to_string(r) + " '" + std::string(s) + "' is not 'a b'");
      }
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (m.is_array() && m.as_array().size() == 2 && m.as_array()[0].is_string() && m.as_array()[1].is_string()) {
      left = m.as_array()[0].as_string();
      right = m.as_array()[1].as_string();
    } else {
      return invalid_model("tokenizer.json: merge " + std::to_string(r) + " is neither 'a b' nor [a, b]");
    }
    joined.assign(left);
    joined.append(right);
    int32_t a = impl->lookup(left), b = impl->lookup(right), c = impl->lookup(joined);
    if (a < 0 || b < 0 || c < 0) {
      return invalid_model("tokenizer.json: merge " + std::to_string(r) + " ('" + std::string(left) + "', '" +
                           std::string(right) + "') uses a token missing from the vocabulary");
    }
    impl->merges.emplace(a, b, {static_cast<int32_t>(r), c});  // first (lowest) rank wins
  }

  if (const Json* unk = model->find("unk_token"); unk && unk->is_string()) impl->unk_id = impl->lookup(unk->as_string());
  impl->byte_fallback = model->get_bool("byte_fallback", false);
  impl->ignore_merges = model->get_bool("ignore_merges", false);
  impl->fuse_unk = model->get_bool("fuse_unk", false);
  impl->continuing_subword_prefix = model->get_string("continuing_subword_prefix");
  impl->end_of_word_suffix = model->get_string("end_of_word_suffix");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    impl->byte_fallback_ids[b] = impl->lookup(buf);
  }

  // Pipeline components.
  if (const Json* n = root.find("normalizer"); n && !n->is_null()) {
    NXRT_ASSIGN_OR_RETURN(impl->normalizer, make_normalizer(*n));
  }
  if (const Json* p = root.find("pre_tokenizer"); p && !p->is_null()) {
    NXRT_ASSIGN_OR_RETURN(impl->pre_tokenizer, make_pre_tokenizer(*p));
  }
  if (const Json* d = root.find("decoder"); d && !d->is_null()) {
    NXRT_ASSIGN_OR_RETURN(impl->decoder, make_decoder(*d));
  }
  if (const Json* pp = root.find("post_processor"); pp && !pp->is_null()) {
    std::function<Status(const Json&)> add_post = [&](const Json& j) -> Status {
      std::string type = j.get_string("type");
      if (type == "ByteLevel") return Status::Ok();
      if (type == "Sequence") {
        for (const Json& e : j.find("processors") ? j.find("processors")->as_array() : Json::Array{}) {
          NXRT_RETURN_IF_ERROR(add_post(e));
        }
        return Status::Ok();
      }
      if (type == "TemplateProcessing") {
        const Json* single = j.find("single");
        if (!single || !single->is_array()) return invalid_model("tokenizer.json: TemplateProcessing without 'single'");
        const Json* specials = j.find("special_tokens");
        std::vector<PostItem> items;
        for (const Json& it : single->as_array()) {
          PostItem item;
          if (const Json* sq = it.find("Sequence")) {
            item.is_sequence = true;
            if (sq->get_string("id", "A") != "A") continue;
          } else if (const Json* st = it.find("SpecialToken")) {
            std::string name = st->get_string("id");
            const Json* def = specials ? specials->find(name) : nullptr;
            if (def && def->find("ids") && def->find("ids")->is_array()) {
              for (const Json& x : def->find("ids")->as_array()) item.ids.push_back(static_cast<int32_t>(x.as_int()));
            } else {
              int32_t id = impl->lookup(name);
              if (id < 0) return invalid_model("tokenizer.json: TemplateProcessing special token '" + name + "' is unknown");
              item.ids.push_back(id);
            }
          } else {
            return invalid_model("tokenizer.json: TemplateProcessing item is neither Sequence nor SpecialToken");
          }
          items.push_back(std::move(item));
        }
        impl->post.single = std::move(items);
        impl->post.template_set = true;
        return Status::Ok();
      }
      if (type == "BertProcessing" || type == "RobertaProcessing") {
        std::vector<PostItem> items(3);
        const Json* cls = j.find("cls");
        const Json* sep = j.find("sep");
        if (!cls || !sep || cls->as_array().size() != 2 || sep->as_array().size() != 2) {
          return invalid_model("tokenizer.json: " + type + " needs 'cls' and 'sep' pairs");
        }
        items[0].ids.push_back(static_cast<int32_t>(cls->as_array()[1].as_int()));
        items[1].is_sequence = true;
        items[2].ids.push_back(static_cast<int32_t>(sep->as_array()[1].as_int()));
        impl->post.single = std::move(items);
        impl->post.template_set = true;
        return Status::Ok();
      }
      return not_implemented("tokenizer.json: post_processor type '" + type +
                             "' is not supported (supported: TemplateProcessing ByteLevel BertProcessing "
                             "RobertaProcessing Sequence)");
    };
    NXRT_RETURN_IF_ERROR(add_post(*pp));
  }

  // Byte-level fast path (see Impl::raw_bytes).
  if (impl->pre_tokenizer && impl->continuing_subword_prefix.empty() && impl->end_of_word_suffix.empty()) {
    ByteLevelPreTokenizer* last = dynamic_cast<ByteLevelPreTokenizer*>(impl->pre_tokenizer.get());
    if (auto* sq = dynamic_cast<SequencePreTokenizer*>(impl->pre_tokenizer.get()); sq && !sq->items.empty()) {
      last = dynamic_cast<ByteLevelPreTokenizer*>(sq->items.back().get());
    }
    const ByteAlphabet& a = byte_alphabet();
    bool all_bytes = true;
    for (int b = 0; b < 256; ++b) {
      impl->byte_ids[b] = impl->lookup(a.byte_to_str[b]);
      all_bytes = all_bytes && impl->byte_ids[b] >= 0;
    }
    if (last && all_bytes) {
      last->map_bytes = false;
      impl->raw_bytes = true;
      if (impl->ignore_merges) {  // raw_vocab is only used for ignore_merges
        impl->raw_vocab.reserve(impl->vocab.size());
        std::string raw;
        impl->vocab.for_each([&](const std::string& tok, int32_t id) {
          raw.clear();
          for (size_t i = 0; i < tok.size();) {
            size_t l;
            if (utf8_step(tok, i) <= 0) return;
            uint32_t cp = decode_cp(tok, i, &l);
            if (cp >= 512 || a.cp_to_byte[cp] < 0) return;
            raw += static_cast<char>(a.cp_to_byte[cp]);
            i += l;
          }
          impl->raw_vocab.set(raw, id);
        });
      }
    }
  }

  // Added-token splitters. Normalized added tokens are matched after normalization (on their
  // normalized form); the others on the raw text.
  for (const AddedToken& t : impl->added) {
    if (t.normalized && impl->normalizer) {
      std::string n = t.content;
      NXRT_RETURN_IF_ERROR(impl->normalizer->normalize(n));
      impl->split_normalized.add(n, t.id);
      if (!t.special) impl->plain_normalized.add(n, t.id);
      if (n != t.content) impl->vocab.emplace(n, t.id);
    } else {
      impl->split_unnormalized.add(t.content, t.id);
      if (!t.special) impl->plain_unnormalized.add(t.content, t.id);
    }
  }
  impl->split_unnormalized.finish();
  impl->split_normalized.finish();
  impl->plain_unnormalized.finish();
  impl->plain_normalized.finish();
  return Tokenizer(std::move(impl));
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  EncodeOptions o;
  o.add_special_tokens = add_special_tokens;
  return encode(input, o);
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view input, const EncodeOptions& options) const {
  const Impl& m = *impl_;
  const bool add_special_tokens = options.add_special_tokens;
  const AddedSplitter& split_raw = options.parse_special ? m.split_unnormalized : m.plain_unnormalized;
  const AddedSplitter& split_norm = options.parse_special ? m.split_normalized : m.plain_normalized;
  if (input.size() > (size_t{1} << 30)) {  // ICU and the BPE symbols index with 32-bit offsets
    return invalid_argument("tokenizer: input of " + std::to_string(input.size()) + " bytes is over the 1 GiB limit");
  }
  std::string sanitized;
  std::string_view text = input;
  if (!utf8_valid(input)) {
    sanitized = utf8_sanitize(input);
    text = sanitized;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);

  std::vector<AddedSplitter::Section> secs;
  split_raw.split(text, secs);
  // Section texts after lstrip/rstrip trimming of neighbours of added tokens.
  std::vector<std::string_view> views(secs.size());
  for (size_t k = 0; k < secs.size(); ++k) views[k] = text.substr(secs[k].b, secs[k].e - secs[k].b);
  for (size_t k = 0; k < secs.size(); ++k) {
    if (secs[k].id < 0) continue;
    const AddedToken& t = m.added[m.added_index.at(secs[k].id)];
    if (t.lstrip && k > 0) views[k - 1] = trim_js_end(views[k - 1]);
    if (t.rstrip && k + 1 < secs.size()) views[k + 1] = trim_js_start(views[k + 1]);
  }
  std::vector<AddedSplitter::Section> subs;
  for (size_t k = 0; k < secs.size(); ++k) {
    if (views[k].empty()) continue;
    if (secs[k].id >= 0) {
      ids.push_back(secs[k].id);
      continue;
    }
    bool first = k == 0;
    std::string normalized;
    std::string_view section = views[k];
    if (m.normalizer) {
      normalized = std::string(section);
      NXRT_RETURN_IF_ERROR(m.normalizer->normalize(normalized));
      section = normalized;
      if (section.empty()) continue;
    }
    if (split_norm.empty()) {
      NXRT_RETURN_IF_ERROR(m.encode_section(section, first, ids));
      continue;
    }
    subs.clear();
    split_norm.split(section, subs);
    std::vector<std::string_view> sv(subs.size());
    for (size_t q = 0; q < subs.size(); ++q) sv[q] = section.substr(subs[q].b, subs[q].e - subs[q].b);
    for (size_t q = 0; q < subs.size(); ++q) {
      if (subs[q].id < 0) continue;
      const AddedToken& t = m.added[m.added_index.at(subs[q].id)];
      if (t.lstrip && q > 0) sv[q - 1] = trim_js_end(sv[q - 1]);
      if (t.rstrip && q + 1 < subs.size()) sv[q + 1] = trim_js_start(sv[q + 1]);
    }
    for (size_t q = 0; q < subs.size(); ++q) {
      if (sv[q].empty()) continue;
      if (subs[q].id >= 0) {
        ids.push_back(subs[q].id);
      } else {
        NXRT_RETURN_IF_ERROR(m.encode_section(sv[q], first, ids));
      }
    }
  }

  if (!m.post.template_set) return with_config_bos(std::move(ids), add_special_tokens);
  std::vector<int32_t> out;
  out.reserve(ids.size() + 4);
  for (const PostItem& item : m.post.single) {
    if (item.is_sequence) {
      out.insert(out.end(), ids.begin(), ids.end());
    } else if (add_special_tokens) {
      out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
  }
  return with_config_bos(std::move(out), add_special_tokens);
}

// tokenizer_config.json's add_bos_token (transformers rebuilds the post-processor from it): a BOS the
// post-processor did not add is put first.
std::vector<int32_t> Tokenizer::with_config_bos(std::vector<int32_t> ids, bool add_special_tokens) const {
  if (!add_special_tokens || !config_ || !config_->add_bos_token || config_->bos_token.empty()) return ids;
  const int32_t bos = token_to_id(config_->bos_token);
  if (bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

Status Tokenizer::Impl::decode_raw(std::span<const int32_t> ids, bool skip_special, std::string& out) const {
  DecodeTokens toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token.size()) {
      return invalid_argument("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(id_to_token.size()) + ")");
    }
    if (skip_special && special_flag[id]) continue;
    toks.push_back({id_to_token[id], added_flag[id] != 0});
  }
  if (decoder) {
    NXRT_RETURN_IF_ERROR(decoder->decode_chain(toks));
    for (const DecodeToken& t : toks) out += t.text;
  } else {
    for (size_t k = 0; k < toks.size(); ++k) {
      if (k) out += ' ';
      out += toks[k].text;
    }
  }
  return Status::Ok();
}

namespace {
std::string clean_up_tokenization(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    std::string r;
    std::string_view f = from;
    size_t pos = 0;
    while (true) {
      size_t at = s.find(f, pos);
      if (at == std::string::npos) break;
      r.append(s, pos, at - pos);
      r += to;
      pos = at + f.size();
    }
    r.append(s, pos, std::string::npos);
    s = std::move(r);
  }
  return s;
}
}  // namespace

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::string raw;
  NXRT_RETURN_IF_ERROR(impl_->decode_raw(ids, options.skip_special_tokens, raw));
  std::string text = utf8_valid(raw) ? std::move(raw) : utf8_sanitize(raw);
  if (options.clean_up_tokenization_spaces) text = clean_up_tokenization(std::move(text));
  return text;
}

TokenizerStream Tokenizer::create_stream(bool skip_special_tokens) const {
  return TokenizerStream(this, skip_special_tokens);
}

int32_t Tokenizer::token_to_id(std::string_view token) const { return impl_->lookup(token); }

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size()) return "";
  return impl_->id_to_token[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special_flag.size() && impl_->special_flag[id];
}

size_t Tokenizer::vocab_size() const { return impl_->id_to_token.size(); }
int32_t Tokenizer::bos_token_id() const { return impl_->post.first_special(); }
int32_t Tokenizer::eos_token_id() const { return impl_->post.last_special(); }

// ---------------------------------------------------------------------------------------------------
// Streaming (the DecodeStream scheme of tokenizers: decode a short window ids[prefix_, end) and emit
// what it adds over ids[prefix_, read_), once it does not end inside a UTF-8 sequence).
// ---------------------------------------------------------------------------------------------------
Result<std::string> TokenizerStream::step(int32_t id) {
  const Tokenizer::Impl& m = tok_->impl();
  if (id < 0 || static_cast<size_t>(id) >= m.id_to_token.size()) {
    return invalid_argument("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(m.id_to_token.size()) + ")");
  }
  if (skip_special_ && m.special_flag[id]) return std::string();
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string prefix_raw, new_raw;
  NXRT_RETURN_IF_ERROR(m.decode_raw(all.subspan(prefix_, read_ - prefix_), false, prefix_raw));
  NXRT_RETURN_IF_ERROR(m.decode_raw(all.subspan(prefix_), false, new_raw));
  if (new_raw.size() <= prefix_raw.size()) return std::string();
  std::string_view added = std::string_view(new_raw).substr(prefix_raw.size());
  if (utf8_complete_prefix(added) != added.size()) return std::string();  // wait for the rest
  std::string text = utf8_sanitize(added);
  prefix_ = read_;
  read_ = ids_.size();
  return text;
}

std::string TokenizerStream::flush() {
  const Tokenizer::Impl& m = tok_->impl();
  std::span<const int32_t> all(ids_);
  std::string prefix_raw, new_raw;
  std::string out;
  if (m.decode_raw(all.subspan(prefix_, read_ - prefix_), false, prefix_raw).ok() &&
      m.decode_raw(all.subspan(prefix_), false, new_raw).ok() && new_raw.size() > prefix_raw.size()) {
    out = utf8_sanitize(std::string_view(new_raw).substr(prefix_raw.size()));
  }
  ids_.clear();
  prefix_ = read_ = 0;
  return out;
}

}  // namespace nxrt::genai
