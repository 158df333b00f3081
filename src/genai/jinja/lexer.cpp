#include "genai/jinja/lexer.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "genai/jinja/ast.h"
#include "genai/utf8.h"

namespace nxrt::genai::jinja {
namespace {

// ------------------------------------------------------------------------------------------ rewrites
struct Mapped {
  std::string s;
  std::vector<uint32_t> at;  // original offset of s[i]; at[s.size()] = end of the original
  void push(char c, uint32_t o) {
    s += c;
    at.push_back(o);
  }
};

bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// Whitespace as JS's \s at byte i (ASCII fast path; multi-byte spaces decoded); returns its length or 0.
size_t space_len(const std::string& s, size_t i) {
  if (i >= s.size()) return 0;
  if (static_cast<unsigned char>(s[i]) < 0x80) return is_ascii_space(s[i]) ? 1 : 0;
  size_t j = i;
  const uint32_t cp = next_cp(s, j);
  return is_js_space(cp) ? j - i : 0;
}

bool line_start(const std::string& s, size_t i) {
  if (i == 0) return true;
  const char p = s[i - 1];
  if (p == '\n' || p == '\r') return true;
  // U+2028 / U+2029 (E2 80 A8 / A9) also end lines for a multiline ^.
  return i >= 3 && static_cast<unsigned char>(s[i - 3]) == 0xE2 && static_cast<unsigned char>(s[i - 2]) == 0x80 &&
         (static_cast<unsigned char>(s[i - 1]) == 0xA8 || static_cast<unsigned char>(s[i - 1]) == 0xA9);
}

Mapped preprocess(const std::string& src) {
  Mapped m0;
  size_t n = src.size();
  if (n && src[n - 1] == '\n') --n;  // keep_trailing_newline=False
  m0.s.reserve(n);
  // lstrip_blocks: spaces/tabs at a line start before "{%", "{#" (and "{-") go.
  for (size_t i = 0; i < n;) {
    if (line_start(src, i) && (src[i] == ' ' || src[i] == '\t')) {
      size_t j = i;
      while (j < n && (src[j] == ' ' || src[j] == '\t')) ++j;
      if (j + 1 < n && src[j] == '{' && (src[j + 1] == '%' || src[j + 1] == '#' || src[j + 1] == '-')) {
        i = j;
        continue;
      }
      for (; i < j; ++i) m0.push(src[i], static_cast<uint32_t>(i));
      continue;
    }
    m0.push(src[i], static_cast<uint32_t>(i));
    ++i;
  }
  // trim_blocks: the newline right after "%}", "#}" (and "-}") goes.
  Mapped m1;
  m1.s.reserve(m0.s.size());
  for (size_t i = 0; i < m0.s.size(); ++i) {
    m1.push(m0.s[i], m0.at[i]);
    if (m0.s[i] == '}' && i > 0 && (m0.s[i - 1] == '%' || m0.s[i - 1] == '#' || m0.s[i - 1] == '-') &&
        i + 1 < m0.s.size() && m0.s[i + 1] == '\n') {
      ++i;
    }
  }
  // {% generation %} / {% endgeneration %} (assistant-mask markers) are removed with the whitespace
  // around them unless the tag's '-' asks to strip it.
  Mapped m2;
  const std::string& s = m1.s;
  size_t copied = 0;  // s[0, copied) is in m2
  size_t i = 0;
  while ((i = s.find("{%", i)) != std::string::npos) {
    size_t j = i + 2;
    const bool lstrip = j < s.size() && s[j] == '-';
    if (lstrip) ++j;
    while (size_t k = space_len(s, j)) j += k;
    if (s.compare(j, 3, "end") == 0) j += 3;
    if (s.compare(j, 10, "generation") != 0) {
      i += 2;
      continue;
    }
    j += 10;
    while (size_t k = space_len(s, j)) j += k;
    const bool rstrip = j < s.size() && s[j] == '-';
    if (rstrip) ++j;
    if (s.compare(j, 2, "%}") != 0) {
      i += 2;
      continue;
    }
    j += 2;
    size_t before = i;  // the whitespace run before the tag (not reaching into what is already copied)
    while (before > copied) {
      size_t k = before - 1;
      while (k > copied && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      if (space_len(s, k) != before - k) break;
      before = k;
    }
    for (size_t q = copied; q < (lstrip ? before : i); ++q) m2.push(s[q], m1.at[q]);
    size_t after = j;
    while (size_t k = space_len(s, after)) after += k;
    if (!rstrip) {
      for (size_t q = j; q < after; ++q) m2.push(s[q], m1.at[q]);
    }
    copied = after;
    i = after;
  }
  for (size_t q = copied; q < s.size(); ++q) m2.push(s[q], m1.at[q]);
  m2.at.push_back(static_cast<uint32_t>(n));
  return m2;
}

// ------------------------------------------------------------------------------------------ lexer
bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(const Mapped& m) : m_(m), s_(m.s) {}

  std::vector<Token> run() {
    while (i_ < s_.size()) {
      const bool after_tag = toks_.empty() || toks_.back().type == Tok::kCloseStatement ||
                             toks_.back().type == Tok::kCloseExpression || toks_.back().type == Tok::kComment;
      if (after_tag) {
        const size_t start = i_;
        while (i_ < s_.size() && !(s_[i_] == '{' && i_ + 1 < s_.size() &&
                                   (s_[i_ + 1] == '%' || s_[i_ + 1] == '{' || s_[i_ + 1] == '#'))) {
          ++i_;
        }
        if (i_ > start) {
          push(Tok::kText, s_.substr(start, i_ - start), start);
          continue;
        }
      }
      if (starts("{#")) {
        lex_comment();
        continue;
      }
      if (starts("{%-")) {
        strip_trailing_space();
        push(Tok::kOpenStatement, "{%", i_);
        i_ += 3;
        continue;
      }
      if (starts("{{-")) {
        strip_trailing_space();
        push(Tok::kOpenExpression, "{{", i_);
        curly_depth_ = 0;
        i_ += 3;
        continue;
      }
      skip_space_in_tag();
      if (i_ >= s_.size()) break;
      if (starts("-%}")) {
        push(Tok::kCloseStatement, "%}", i_);
        i_ += 3;
        skip_space();
        continue;
      }
      if (starts("-}}")) {
        push(Tok::kCloseExpression, "}}", i_);
        i_ += 3;
        skip_space();
        continue;
      }
      const char ch = s_[i_];
      if (ch == '-' || ch == '+') {
        if (toks_.empty() || toks_.back().type == Tok::kText) fail(i_, std::string("unexpected '") + ch + "'");
        switch (toks_.back().type) {
          case Tok::kIdent: case Tok::kNumber: case Tok::kString: case Tok::kCloseParen: case Tok::kCloseSquare:
            break;  // a binary operator
          default: {
            const size_t at = i_++;
            std::string num = digits();
            if (!num.empty() && i_ + 1 < s_.size() && s_[i_] == '.' && is_digit(s_[i_ + 1])) {
              ++i_;
              num += "." + digits();
            }
            push(num.empty() ? Tok::kUnary : Tok::kNumber, std::string(1, ch) + num, at);
            continue;
          }
        }
      }
      if (lex_operator()) continue;
      if (ch == '\'' || ch == '"') {
        lex_string(ch);
        continue;
      }
      if (is_digit(ch)) {
        const size_t at = i_;
        std::string num = digits();
        if ((toks_.empty() || toks_.back().type != Tok::kDot) && i_ + 1 < s_.size() && s_[i_] == '.' &&
            is_digit(s_[i_ + 1])) {
          ++i_;
          num += "." + digits();
        }
        push(Tok::kNumber, num, at);
        continue;
      }
      if (is_word(ch)) {
        const size_t at = i_;
        while (i_ < s_.size() && is_word(s_[i_])) ++i_;
        push(Tok::kIdent, s_.substr(at, i_ - at), at);
        continue;
      }
      size_t j = i_;
      const uint32_t cp = next_cp(s_, j);
      fail(i_, cp < 0x80 ? std::string("unexpected character '") + ch + "'"
                         : "unexpected character '" + s_.substr(i_, j - i_) + "'");
    }
    return std::move(toks_);
  }

 private:
  const Mapped& m_;
  const std::string& s_;
  size_t i_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> toks_;

  [[noreturn]] void fail(size_t at, const std::string& msg) const {
    throw TemplateError(m_.at[std::min(at, m_.s.size())], msg);
  }
  bool starts(const char* t) const { return s_.compare(i_, std::strlen(t), t) == 0; }
  void push(Tok t, std::string v, size_t at) { toks_.push_back({t, std::move(v), m_.at[at]}); }
  std::string digits() {
    const size_t at = i_;
    while (i_ < s_.size() && is_digit(s_[i_])) ++i_;
    return s_.substr(at, i_ - at);
  }
  void skip_space() {
    while (size_t k = space_len(s_, i_)) i_ += k;
  }
  // Whitespace between tokens of a tag; reaching the end of the template there is an error.
  void skip_space_in_tag() {
    while (size_t k = space_len(s_, i_)) {
      i_ += k;
      if (i_ >= s_.size()) fail(i_, "unexpected end of template inside a tag");
    }
  }
  void strip_trailing_space() {
    if (toks_.empty() || toks_.back().type != Tok::kText) return;
    std::string& v = toks_.back().value;
    // trimEnd: drop trailing JS whitespace (code points).
    size_t end = v.size();
    while (end > 0) {
      size_t k = end - 1;
      while (k > 0 && (static_cast<unsigned char>(v[k]) & 0xC0) == 0x80) --k;
      if (space_len(v, k) != end - k) break;
      end = k;
    }
    v.resize(end);
    if (v.empty()) toks_.pop_back();
  }
  void lex_comment() {
    const size_t at = i_;
    i_ += 2;
    const bool strip_before = i_ < s_.size() && s_[i_] == '-';
    if (strip_before) ++i_;
    const size_t body = i_;
    while (!(i_ + 1 < s_.size() && s_[i_] == '#' && s_[i_ + 1] == '}')) {
      if (i_ + 2 >= s_.size()) fail(at, "comment '{#' is not closed with '#}'");
      ++i_;
    }
    std::string text = s_.substr(body, i_ - body);
    const bool strip_after = !text.empty() && text.back() == '-';
    if (strip_after) text.pop_back();
    if (strip_before) strip_trailing_space();
    push(Tok::kComment, std::move(text), at);
    i_ += 2;
    if (strip_after) skip_space();
  }
  bool lex_operator() {
    static const std::pair<const char*, Tok> kTable[] = {
        {"{%", Tok::kOpenStatement}, {"%}", Tok::kCloseStatement}, {"{{", Tok::kOpenExpression},
        {"}}", Tok::kCloseExpression}, {"(", Tok::kOpenParen}, {")", Tok::kCloseParen}, {"{", Tok::kOpenCurly},
        {"}", Tok::kCloseCurly}, {"[", Tok::kOpenSquare}, {"]", Tok::kCloseSquare}, {",", Tok::kComma},
        {".", Tok::kDot}, {":", Tok::kColon}, {"|", Tok::kPipe}, {"<=", Tok::kComparison},
        {">=", Tok::kComparison}, {"==", Tok::kComparison}, {"!=", Tok::kComparison}, {"<", Tok::kComparison},
        {">", Tok::kComparison}, {"+", Tok::kAdditive}, {"-", Tok::kAdditive}, {"~", Tok::kAdditive},
        {"**", Tok::kPower}, {"*", Tok::kMultiplicative}, {"//", Tok::kMultiplicative},
        {"/", Tok::kMultiplicative}, {"%", Tok::kMultiplicative}, {"=", Tok::kEquals}};
    for (const auto& [seq, type] : kTable) {
      if (type == Tok::kCloseExpression && curly_depth_ > 0) continue;  // "}}" closing a dict literal
      if (!starts(seq)) continue;
      push(type, seq, i_);
      if (type == Tok::kOpenExpression) curly_depth_ = 0;
      if (type == Tok::kOpenCurly) ++curly_depth_;
      if (type == Tok::kCloseCurly) --curly_depth_;
      i_ += std::strlen(seq);
      return true;
    }
    return false;
  }
  void lex_string(char quote) {
    const size_t at = i_++;
    std::string out;
    while (true) {
      if (i_ >= s_.size()) fail(at, "string literal is not closed");
      const char c = s_[i_];
      if (c == quote) break;
      if (c == '\\') {
        if (++i_ >= s_.size()) fail(at, "string literal is not closed");
        const char e = s_[i_++];
        if (e == 'x' || e == 'u') {
          const size_t len = e == 'x' ? 2 : 4;
          if (i_ + len > s_.size()) fail(i_ - 2, "invalid escape in string literal");
          uint32_t cp = 0;
          for (size_t k = 0; k < len; ++k) {
            const char h = s_[i_ + k];
            const int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
            if (d < 0) fail(i_ - 2, "invalid escape in string literal");
            cp = cp * 16 + static_cast<uint32_t>(d);
          }
          i_ += len;
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;  // a lone UTF-16 surrogate has no UTF-8 form
          append_utf8(out, cp);
          continue;
        }
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          default: fail(i_ - 2, std::string("unknown escape '\\") + e + "' in string literal");
        }
        continue;
      }
      out += c;
      ++i_;
      if (i_ >= s_.size()) fail(at, "string literal is not closed");
    }
    ++i_;
    push(Tok::kString, std::move(out), at);
  }

};

}  // namespace

const char* tok_name(Tok t) {
  static const char* kNames[] = {"text", "number", "string", "name", "'='", "'('", "')'", "'{%'", "'%}'", "'{{'",
                                 "'}}'", "'['", "']'", "'{'", "'}'", "','", "'.'", "':'", "'|'", "operator",
                                 "operator", "'**'", "comparison", "unary operator", "comment"};
  return kNames[static_cast<int>(t)];
}

std::vector<Token> lex_template(const std::string& source, uint32_t* end_pos) {
  Mapped m = preprocess(source);
  *end_pos = static_cast<uint32_t>(m.at.back());
  return Lexer(m).run();
}

}  // namespace nxrt::genai::jinja
