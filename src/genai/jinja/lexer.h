// The template lexer (private to the engine): template text -> tokens.
//
// It works on the template after the textual rewrites transformers' environment implies (trim_blocks,
// lstrip_blocks, one trailing newline dropped, generation markers removed), done here as
// @huggingface/jinja does them; every token keeps its offset in the original text so that errors
// point at what the author wrote.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nxrt::genai::jinja {

enum class Tok {
  kText, kNumber, kString, kIdent, kEquals, kOpenParen, kCloseParen, kOpenStatement, kCloseStatement,
  kOpenExpression, kCloseExpression, kOpenSquare, kCloseSquare, kOpenCurly, kCloseCurly, kComma, kDot,
  kColon, kPipe, kAdditive, kMultiplicative, kPower, kComparison, kUnary, kComment,
};

// How errors name a token type.
const char* tok_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  uint32_t pos;
};

// The tokens of `source`; *end_pos receives the offset of the end of the original text. Errors are
// thrown as TemplateError.
std::vector<Token> lex_template(const std::string& source, uint32_t* end_pos);

}  // namespace nxrt::genai::jinja
