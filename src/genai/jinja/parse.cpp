// Template text -> tokens -> Node tree.
//
// The lexer works on the template after the textual rewrites transformers' environment implies
// (trim_blocks, lstrip_blocks, one trailing newline dropped, generation markers removed), done here as
// @huggingface/jinja does them; every character keeps its offset in the original text so that errors
// point at what the author wrote.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "genai/jinja/ast.h"
#include "genai/jinja/jinja.h"
#include "genai/json.h"

namespace nxrt::genai::jinja {

uint32_t next_cp(const std::string& s, size_t& i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  i += len;
  return cp;
}

std::string line_col(const std::string& source, uint32_t pos) {
  size_t line = 1, col = 1;
  size_t i = 0;
  const size_t end = std::min<size_t>(pos, source.size());
  while (i < end) {
    if (source[i] == '\n') {
      ++line;
      col = 1;
      ++i;
    } else {
      next_cp(source, i);
      ++col;
    }
  }
  return std::to_string(line) + ":" + std::to_string(col);
}

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
enum class Tok {
  kText, kNumber, kString, kIdent, kEquals, kOpenParen, kCloseParen, kOpenStatement, kCloseStatement,
  kOpenExpression, kCloseExpression, kOpenSquare, kCloseSquare, kOpenCurly, kCloseCurly, kComma, kDot,
  kColon, kPipe, kAdditive, kMultiplicative, kPower, kComparison, kUnary, kComment,
};

const char* tok_name(Tok t) {
  static const char* kNames[] = {"text", "number", "string", "name", "'='", "'('", "')'", "'{%'", "'%}'", "'{{'",
                                 "'}}'", "'['", "']'", "'{'", "'}'", "','", "'.'", "':'", "'|'", "operator",
                                 "operator", "'**'", "comparison", "unary operator", "comment"};
  return kNames[static_cast<int>(t)];
}

struct Token {
  Tok type;
  std::string value;
  uint32_t pos;
};

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

// ------------------------------------------------------------------------------------------ parser
class Parser {
 public:
  Parser(std::vector<Token> toks, uint32_t end_pos) : t_(std::move(toks)), end_pos_(end_pos) {}

  NodePtr program() {
    auto prog = make(NodeKind::kText, 0);  // body holder; kind irrelevant
    while (i_ < t_.size()) prog->body.push_back(any());
    return prog;
  }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
  uint32_t end_pos_;
  int depth_ = 0;
  static constexpr int kMaxDepth = 256;

  // Counts the levels a loop adds by wrapping the tree it has built so far (a + b + c ...: each
  // operator nests the left side one level deeper); released when the loop's caller returns.
  struct ChainGuard {
    Parser* p;
    int added = 0;
    explicit ChainGuard(Parser* pp) : p(pp) {}
    void deeper() {
      ++added;
      if (++p->depth_ > kMaxDepth) throw TemplateError(p->pos(), "template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~ChainGuard() { p->depth_ -= added; }
  };

  struct DepthGuard {
    Parser* p;
    explicit DepthGuard(Parser* pp, uint32_t pos) : p(pp) {
      if (++p->depth_ > kMaxDepth) throw TemplateError(pos, "template nests deeper than " + std::to_string(kMaxDepth) + " levels");
    }
    ~DepthGuard() { --p->depth_; }
  };

  static NodePtr make(NodeKind k, uint32_t pos) { return std::make_unique<Node>(k, pos); }
  uint32_t pos() const { return i_ < t_.size() ? t_[i_].pos : end_pos_; }
  [[noreturn]] void fail(const std::string& msg) const {
    throw TemplateError(pos(), i_ < t_.size() ? msg + " (found " + describe(t_[i_]) + ")" : msg + " (found the end of the template)");
  }
  static std::string describe(const Token& t) {
    if (t.type == Tok::kIdent) return "'" + t.value + "'";
    if (t.type == Tok::kText || t.type == Tok::kComment) return tok_name(t.type);
    if (t.type == Tok::kString) return "string";
    return "'" + t.value + "'";
  }
  bool is(Tok type, size_t ahead = 0) const { return i_ + ahead < t_.size() && t_[i_ + ahead].type == type; }
  bool is_ident(const char* name, size_t ahead = 0) const {
    return is(Tok::kIdent, ahead) && t_[i_ + ahead].value == name;
  }
  bool is_statement(std::initializer_list<const char*> names) const {
    if (!is(Tok::kOpenStatement) || !is(Tok::kIdent, 1)) return false;
    for (const char* n : names) {
      if (t_[i_ + 1].value == n) return true;
    }
    return false;
  }
  const Token& expect(Tok type, const char* what) {
    if (!is(type)) fail(std::string("expected ") + what);
    return t_[i_++];
  }
  void expect_ident(const char* name) {
    if (!is_ident(name)) fail(std::string("expected '") + name + "'");
    ++i_;
  }
  // Parses statements until one of `names` opens ({% name ...); the end of the template is an error.
  void block_until(std::vector<NodePtr>& out, std::initializer_list<const char*> names, const char* opener,
                   uint32_t open_pos) {
    while (!is_statement(names)) {
      if (i_ >= t_.size()) {
        std::string want;
        for (const char* n : names) want += std::string(want.empty() ? "" : " or ") + "{% " + n + " %}";
        throw TemplateError(open_pos, std::string("'") + opener + "' is not closed: expected " + want +
                                          " before the end of the template");
      }
      out.push_back(any());
    }
  }
  void close_block(const char* end_name) {
    expect(Tok::kOpenStatement, "'{%'");
    expect_ident(end_name);
    expect(Tok::kCloseStatement, "'%}'");
  }

  NodePtr any() {
    DepthGuard g(this, pos());
    const Token& tk = t_[i_];
    switch (tk.type) {
      case Tok::kComment: {
        ++i_;
        return make(NodeKind::kComment, tk.pos);
      }
      case Tok::kText: {
        auto n = make(NodeKind::kText, tk.pos);
        n->str = tk.value;
        ++i_;
        return n;
      }
      case Tok::kOpenStatement:
        return statement();
      case Tok::kOpenExpression: {
        auto n = make(NodeKind::kOutput, tk.pos);
        ++i_;
        n->a = expression();
        expect(Tok::kCloseExpression, "'}}'");
        return n;
      }
      default:
        fail("unexpected token outside a tag");
    }
  }

  NodePtr statement() {
    const uint32_t open_pos = pos();
    expect(Tok::kOpenStatement, "'{%'");
    if (!is(Tok::kIdent)) fail("expected a statement name after '{%'");
    const std::string name = t_[i_].value;
    ++i_;
    if (name == "set") return set_statement(open_pos);
    if (name == "if") {
      auto n = if_statement(open_pos);
      close_block("endif");
      return n;
    }
    if (name == "for") {
      auto n = for_statement(open_pos);
      close_block("endfor");
      return n;
    }
    if (name == "macro") {
      auto n = make(NodeKind::kMacro, open_pos);
      if (!is(Tok::kIdent)) fail("expected a macro name");
      n->str = t_[i_++].value;
      n->args = call_args(true);
      expect(Tok::kCloseStatement, "'%}'");
      block_until(n->body, {"endmacro"}, "macro", open_pos);
      close_block("endmacro");
      return n;
    }
    if (name == "call") {
      auto n = make(NodeKind::kCallBlock, open_pos);
      if (is(Tok::kOpenParen)) n->args = call_args(true);
      if (!is(Tok::kIdent)) fail("expected a macro name after 'call'");
      auto callee = make(NodeKind::kIdent, pos());
      callee->str = t_[i_++].value;
      auto call = make(NodeKind::kCall, callee->pos);
      call->a = std::move(callee);
      call->args = call_args(false);
      n->a = std::move(call);
      expect(Tok::kCloseStatement, "'%}'");
      block_until(n->body, {"endcall"}, "call", open_pos);
      close_block("endcall");
      return n;
    }
    if (name == "filter") {
      auto n = make(NodeKind::kFilterBlock, open_pos);
      if (!is(Tok::kIdent)) fail("expected a filter name");
      auto f = make(NodeKind::kIdent, pos());
      f->str = t_[i_++].value;
      if (is(Tok::kOpenParen)) {
        auto call = make(NodeKind::kCall, f->pos);
        call->a = std::move(f);
        call->args = call_args(false);
        f = std::move(call);
      }
      n->a = std::move(f);
      expect(Tok::kCloseStatement, "'%}'");
      block_until(n->body, {"endfilter"}, "filter", open_pos);
      close_block("endfilter");
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(Tok::kCloseStatement, "'%}'");
      return make(name == "break" ? NodeKind::kBreak : NodeKind::kContinue, open_pos);
    }
    i_ -= 1;
    fail("unknown statement '" + name + "'");
  }

  NodePtr set_statement(uint32_t open_pos) {
    auto n = make(NodeKind::kSet, open_pos);
    n->a = expression_sequence(false);
    if (is(Tok::kEquals)) {
      ++i_;
      n->b = expression_sequence(false);
    } else {
      expect(Tok::kCloseStatement, "'=' or '%}'");
      block_until(n->body, {"endset"}, "set", open_pos);
      expect(Tok::kOpenStatement, "'{%'");
      expect_ident("endset");
    }
    expect(Tok::kCloseStatement, "'%}'");
    return n;
  }

  NodePtr if_statement(uint32_t open_pos) {
    auto n = make(NodeKind::kIf, open_pos);
    n->a = expression();
    expect(Tok::kCloseStatement, "'%}'");
    block_until(n->body, {"elif", "else", "endif"}, "if", open_pos);
    if (is_statement({"elif"})) {
      const uint32_t p = pos();
      DepthGuard g(this, p);  // each elif nests in the previous branch's else
      i_ += 2;
      n->alt.push_back(if_statement(p));
    } else if (is_statement({"else"})) {
      i_ += 2;
      expect(Tok::kCloseStatement, "'%}'");
      block_until(n->alt, {"endif"}, "if", open_pos);
    }
    return n;
  }

  NodePtr for_statement(uint32_t open_pos) {
    auto n = make(NodeKind::kFor, open_pos);
    n->a = expression_sequence(true);
    if (n->a->kind != NodeKind::kIdent && n->a->kind != NodeKind::kTuple) {
      throw TemplateError(n->a->pos, "expected a name or names for the loop variable");
    }
    if (!is_ident("in")) fail("expected 'in' after the loop variable");
    ++i_;
    n->b = expression();
    expect(Tok::kCloseStatement, "'%}'");
    block_until(n->body, {"endfor", "else"}, "for", open_pos);
    if (is_statement({"else"})) {
      i_ += 2;
      expect(Tok::kCloseStatement, "'%}'");
      block_until(n->alt, {"endfor"}, "for", open_pos);
    }
    return n;
  }

  NodePtr expression_sequence(bool primary_only) {
    const uint32_t p = pos();
    NodePtr first = primary_only ? primary() : expression();
    if (!is(Tok::kComma)) return first;
    auto tuple = make(NodeKind::kTuple, p);
    tuple->args.push_back(std::move(first));
    while (is(Tok::kComma)) {
      ++i_;
      tuple->args.push_back(primary_only ? primary() : expression());
    }
    return tuple;
  }

  NodePtr expression() {
    DepthGuard g(this, pos());
    return if_expression();
  }

  NodePtr if_expression() {
    DepthGuard g(this, pos());
    NodePtr a = or_expression();
    if (!is_ident("if")) return a;
    const uint32_t p = pos();
    ++i_;
    NodePtr test = or_expression();
    if (is_ident("else")) {
      ++i_;
      auto n = make(NodeKind::kTernary, p);
      n->a = std::move(test);
      n->b = std::move(a);
      n->c = if_expression();
      return n;
    }
    auto n = make(NodeKind::kSelect, p);
    n->a = std::move(a);
    n->b = std::move(test);
    return n;
  }

  NodePtr binary(NodePtr left, std::string op, uint32_t p, NodePtr right) {
    auto n = make(NodeKind::kBinary, p);
    n->str = std::move(op);
    n->a = std::move(left);
    n->b = std::move(right);
    return n;
  }

  // `a or b or c` / `a and b and c`: left-associative keyword operators.
  NodePtr keyword_chain(const char* keyword, NodePtr (Parser::*next)()) {
    NodePtr left = (this->*next)();
    ChainGuard chain(this);
    while (is_ident(keyword)) {
      chain.deeper();
      const uint32_t p = pos();
      ++i_;
      left = binary(std::move(left), keyword, p, (this->*next)());
    }
    return left;
  }
  NodePtr or_expression() { return keyword_chain("or", &Parser::and_expression); }
  NodePtr and_expression() { return keyword_chain("and", &Parser::not_expression); }
  NodePtr not_expression() {
    if (is_ident("not")) {
      DepthGuard g(this, pos());
      auto n = make(NodeKind::kUnary, pos());
      ++i_;
      n->str = "not";
      n->a = not_expression();
      return n;
    }
    return comparison();
  }
  NodePtr comparison() {
    NodePtr left = additive();
    ChainGuard chain(this);
    while (true) {
      chain.deeper();
      const uint32_t p = pos();
      std::string op;
      if (is_ident("not") && is_ident("in", 1)) {
        op = "not in";
        i_ += 2;
      } else if (is_ident("in")) {
        op = "in";
        ++i_;
      } else if (is(Tok::kComparison)) {
        op = t_[i_++].value;
      } else {
        break;
      }
      left = binary(std::move(left), op, p, additive());
    }
    return left;
  }
  // A left-associative level: operands from `next`, operators the tokens of type `op_type`.
  NodePtr left_assoc(Tok op_type, NodePtr (Parser::*next)()) {
    NodePtr left = (this->*next)();
    ChainGuard chain(this);
    while (is(op_type)) {
      chain.deeper();
      const uint32_t p = pos();
      std::string op = t_[i_++].value;
      left = binary(std::move(left), op, p, (this->*next)());
    }
    return left;
  }
  NodePtr additive() { return left_assoc(Tok::kAdditive, &Parser::multiplicative); }
  NodePtr multiplicative() { return left_assoc(Tok::kMultiplicative, &Parser::power); }
  NodePtr power() { return left_assoc(Tok::kPower, &Parser::test_expression); }
  // Tokens that can start a test's argument (`x is divisibleby 3`).
  bool starts_test_argument() const {
    if (i_ >= t_.size()) return false;
    switch (t_[i_].type) {
      case Tok::kNumber: case Tok::kString: case Tok::kOpenParen: case Tok::kOpenSquare: case Tok::kOpenCurly:
        return true;
      case Tok::kIdent: {
        static const char* kStop[] = {"and", "or", "not", "in", "is", "if", "else"};
        for (const char* s : kStop) {
          if (t_[i_].value == s) return false;
        }
        return true;
      }
      default:
        return false;
    }
  }
  NodePtr test_expression() {
    NodePtr operand = filter_expression();
    ChainGuard chain(this);
    while (is_ident("is")) {
      chain.deeper();
      const uint32_t p = pos();
      ++i_;
      auto n = make(NodeKind::kTest, p);
      if (is_ident("not")) {
        n->flag = true;
        ++i_;
      }
      if (!is(Tok::kIdent)) fail("expected a test name after 'is'");
      n->str = t_[i_++].value;
      n->a = std::move(operand);
      if (is(Tok::kOpenParen)) {
        auto args = call_args(false);
        if (args.size() != 1) throw TemplateError(p, "test '" + n->str + "' takes one argument");
        n->b = std::move(args[0]);
      } else if (starts_test_argument()) {
        n->b = filter_expression();
      }
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr filter_expression() {
    NodePtr operand = unary();
    ChainGuard chain(this);
    while (is(Tok::kPipe)) {
      chain.deeper();
      const uint32_t p = pos();
      ++i_;
      if (!is(Tok::kIdent)) fail("expected a filter name after '|'");
      auto f = make(NodeKind::kIdent, pos());
      f->str = t_[i_++].value;
      if (is(Tok::kOpenParen)) {
        auto call = make(NodeKind::kCall, f->pos);
        call->a = std::move(f);
        call->args = call_args(false);
        f = std::move(call);
      }
      auto n = make(NodeKind::kFilter, p);
      n->a = std::move(operand);
      n->b = std::move(f);
      operand = std::move(n);
    }
    return operand;
  }
  NodePtr unary() {
    if ((is(Tok::kUnary) || is(Tok::kAdditive)) && (t_[i_].value == "-" || t_[i_].value == "+")) {
      DepthGuard g(this, pos());
      auto n = make(NodeKind::kUnary, pos());
      n->str = t_[i_++].value;
      n->a = unary();
      return n;
    }
    NodePtr member = member_chain(primary());
    if (is(Tok::kOpenParen)) return call_chain(std::move(member));
    return member;
  }
  NodePtr call_chain(NodePtr callee) {
    ChainGuard chain(this);
    while (true) {
      chain.deeper();
      auto n = make(NodeKind::kCall, callee->pos);
      n->a = std::move(callee);
      n->args = call_args(false);
      callee = member_chain(std::move(n));
      if (!is(Tok::kOpenParen)) return callee;
    }
  }
  // Arguments in parentheses. parameters: a macro's declaration (names, name=default).
  std::vector<NodePtr> call_args(bool parameters) {
    const uint32_t open = pos();
    expect(Tok::kOpenParen, "'('");
    std::vector<NodePtr> args;
    bool saw_keyword = false, saw_spread = false;
    std::vector<std::string> names;
    while (!is(Tok::kCloseParen)) {
      if (i_ >= t_.size()) throw TemplateError(open, "'(' is not closed");
      const uint32_t p = pos();
      const bool kw_spread = is(Tok::kPower);
      const bool pos_spread = is(Tok::kMultiplicative) && t_[i_].value == "*";
      if (parameters && (kw_spread || pos_spread)) fail("argument unpacking is not allowed in a parameter list");
      if (kw_spread) {
        ++i_;
        auto n = make(NodeKind::kKwSpread, p);
        n->a = expression();
        args.push_back(std::move(n));
        if (is(Tok::kComma)) ++i_;
        if (!is(Tok::kCloseParen)) fail("'**' must be applied to the last argument");
        break;
      }
      NodePtr arg;
      if (pos_spread) {
        if (saw_spread) fail("only one '*' argument unpacking is allowed");
        saw_spread = true;
        ++i_;
        arg = make(NodeKind::kSpread, p);
        arg->a = expression();
      } else {
        arg = expression();
        if (is(Tok::kEquals)) {
          ++i_;
          if (arg->kind != NodeKind::kIdent) throw TemplateError(arg->pos, "expected a name before '='");
          auto kw = make(NodeKind::kKwArg, arg->pos);
          kw->str = arg->str;
          kw->a = expression();
          arg = std::move(kw);
        }
        if (parameters) {
          if (arg->kind != NodeKind::kIdent && arg->kind != NodeKind::kKwArg) {
            throw TemplateError(arg->pos, "expected a parameter name");
          }
          for (const std::string& nm : names) {
            if (nm == arg->str) throw TemplateError(arg->pos, "duplicate parameter '" + nm + "'");
          }
          names.push_back(arg->str);
        }
        if (arg->kind == NodeKind::kKwArg) {
          saw_keyword = true;
        } else if (saw_keyword) {
          throw TemplateError(arg->pos, parameters ? "a parameter without default follows one with a default"
                                                   : "a positional argument follows a keyword argument");
        } else if (saw_spread) {
          throw TemplateError(arg->pos, "a positional argument follows '*' unpacking");
        }
      }
      args.push_back(std::move(arg));
      if (is(Tok::kComma)) {
        ++i_;
      } else if (!is(Tok::kCloseParen)) {
        fail("expected ',' or ')' in the argument list");
      }
    }
    ++i_;
    return args;
  }
  NodePtr subscript() {
    const uint32_t p = pos();
    std::vector<NodePtr> parts;
    bool is_slice = false;
    while (!is(Tok::kCloseSquare)) {
      if (i_ >= t_.size()) throw TemplateError(p, "'[' is not closed");
      if (is(Tok::kColon)) {
        parts.push_back(nullptr);
        ++i_;
        is_slice = true;
      } else {
        parts.push_back(expression());
        if (is(Tok::kColon)) {
          ++i_;
          is_slice = true;
        } else if (!is(Tok::kCloseSquare)) {
          fail("expected ':' or ']'");
        }
      }
    }
    if (parts.empty()) fail("expected an index or a slice in '[]'");
    if (!is_slice) return std::move(parts[0]);
    if (parts.size() > 3) throw TemplateError(p, "a slice takes at most 3 parts");
    auto n = make(NodeKind::kSlice, p);
    parts.resize(3);
    n->a = std::move(parts[0]);
    n->b = std::move(parts[1]);
    n->c = std::move(parts[2]);
    return n;
  }
  NodePtr member_chain(NodePtr object) {
    ChainGuard chain(this);
    while (is(Tok::kDot) || is(Tok::kOpenSquare)) {
      chain.deeper();
      const uint32_t p = pos();
      const bool computed = is(Tok::kOpenSquare);
      ++i_;
      auto n = make(NodeKind::kMember, p);
      n->flag = computed;
      n->a = std::move(object);
      if (computed) {
        DepthGuard g(this, p);
        n->b = subscript();
        expect(Tok::kCloseSquare, "']'");
      } else {
        n->b = primary();
        if (n->b->kind != NodeKind::kIdent && n->b->kind != NodeKind::kInt) {
          throw TemplateError(n->b->pos, "expected a name or an integer after '.'");
        }
      }
      object = std::move(n);
    }
    return object;
  }
  // Items separated by commas (a trailing comma allowed) up to and including the `close` token.
  template <typename ParseItem>
  void comma_list(Tok close, const char* unclosed, const char* bad_separator, uint32_t open_pos, ParseItem item) {
    while (!is(close)) {
      if (i_ >= t_.size()) throw TemplateError(open_pos, unclosed);
      item();
      if (is(Tok::kComma)) {
        ++i_;
      } else if (!is(close)) {
        fail(bad_separator);
      }
    }
    ++i_;
  }
  NodePtr primary() {
    if (i_ >= t_.size()) fail("expected an expression");
    const Token& tk = t_[i_++];
    switch (tk.type) {
      case Tok::kNumber: {
        if (tk.value.find('.') != std::string::npos) {
          auto n = make(NodeKind::kFloat, tk.pos);
          n->fval = std::strtod(tk.value.c_str(), nullptr);
          return n;
        }
        auto n = make(NodeKind::kInt, tk.pos);
        errno = 0;
        const long long v = std::strtoll(tk.value.c_str(), nullptr, 10);
        if (errno == ERANGE) throw TemplateError(tk.pos, "integer literal " + tk.value + " is out of range");
        n->ival = v;
        return n;
      }
      case Tok::kString: {
        auto n = make(NodeKind::kString, tk.pos);
        n->str = tk.value;
        while (is(Tok::kString)) n->str += t_[i_++].value;  // adjacent literals concatenate
        return n;
      }
      case Tok::kIdent: {
        auto n = make(NodeKind::kIdent, tk.pos);
        n->str = tk.value;
        return n;
      }
      case Tok::kOpenParen: {
        DepthGuard g(this, tk.pos);
        NodePtr e = expression_sequence(false);
        expect(Tok::kCloseParen, "')'");
        return e;
      }
      case Tok::kOpenSquare: {
        DepthGuard g(this, tk.pos);
        auto n = make(NodeKind::kArray, tk.pos);
        comma_list(Tok::kCloseSquare, "'[' is not closed", "expected ',' or ']' in a list", tk.pos,
                   [&] { n->args.push_back(expression()); });
        return n;
      }
      case Tok::kOpenCurly: {
        DepthGuard g(this, tk.pos);
        auto n = make(NodeKind::kObject, tk.pos);
        comma_list(Tok::kCloseCurly, "'{' is not closed", "expected ',' or '}' in a dict", tk.pos, [&] {
          n->args.push_back(expression());
          expect(Tok::kColon, "':' between a key and its value");
          n->args.push_back(expression());
        });
        return n;
      }
      default:
        --i_;
        fail("expected an expression");
    }
  }
};

}  // namespace

Result<Template> Template::parse(std::string_view source, std::string name) {
  Template t;
  t.name_ = std::move(name);
  if (source.size() > (size_t{16} << 20)) {
    return invalid_argument(t.name_ + ": template of " + std::to_string(source.size()) + " bytes is over the 16 MiB limit");
  }
  auto src = std::make_shared<std::string>(source);
  try {
    Mapped m = preprocess(*src);
    Lexer lexer(m);
    std::vector<Token> toks = lexer.run();
    Parser parser(std::move(toks), static_cast<uint32_t>(m.at.back()));
    t.program_ = parser.program();
  } catch (const TemplateError& e) {
    return invalid_argument(t.name_ + ":" + line_col(*src, e.pos) + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return invalid_argument(t.name_ + ": out of memory while parsing");
  }
  t.source_ = std::move(src);
  return t;
}

}  // namespace nxrt::genai::jinja
