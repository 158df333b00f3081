// Tokens (lexer.h) -> Node tree: the recursive-descent parser of statements and expressions, and
// Template::parse.
#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "genai/jinja/ast.h"
#include "genai/jinja/jinja.h"
#include "genai/jinja/lexer.h"
#include "genai/utf8.h"

namespace nxrt::genai::jinja {

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
  // '%}', the statements up to {% END_NAME %}, and that tag: the body of a macro, call or filter block.
  void block_body(std::vector<NodePtr>& body, const char* opener, const char* end_name, uint32_t open_pos) {
    expect(Tok::kCloseStatement, "'%}'");
    block_until(body, {end_name}, opener, open_pos);
    close_block(end_name);
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
      block_body(n->body, "macro", "endmacro", open_pos);
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
      block_body(n->body, "call", "endcall", open_pos);
      return n;
    }
    if (name == "filter") {
      auto n = make(NodeKind::kFilterBlock, open_pos);
      n->a = filter_reference("expected a filter name");
      block_body(n->body, "filter", "endfilter", open_pos);
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
  // A filter as `x | f` and `{% filter f %}` name it: an identifier, or a call of one (`f(args)`).
  NodePtr filter_reference(const char* missing_name) {
    if (!is(Tok::kIdent)) fail(missing_name);
    auto f = make(NodeKind::kIdent, pos());
    f->str = t_[i_++].value;
    if (is(Tok::kOpenParen)) {
      auto call = make(NodeKind::kCall, f->pos);
      call->a = std::move(f);
      call->args = call_args(false);
      f = std::move(call);
    }
    return f;
  }
  NodePtr filter_expression() {
    NodePtr operand = unary();
    ChainGuard chain(this);
    while (is(Tok::kPipe)) {
      chain.deeper();
      const uint32_t p = pos();
      ++i_;
      NodePtr f = filter_reference("expected a filter name after '|'");
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
    uint32_t end_pos = 0;
    std::vector<Token> toks = lex_template(*src, &end_pos);
    Parser parser(std::move(toks), end_pos);
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
