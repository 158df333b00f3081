// The parsed form of a template (private to the engine): one node type for statements and expressions.
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace nxrt::genai::jinja {

enum class NodeKind {
  // statements
  kText,      // text: str
  kOutput,    // {{ a }}
  kIf,        // if a: body else alt
  kFor,       // for a (Ident or Tuple) in b (may be kSelect): body else alt
  kSet,       // set a = b, or set a %} body {% endset
  kMacro,     // macro str(args...): body
  kCallBlock, // call(args...) a: body   (a is a kCall)
  kFilterBlock,  // filter a: body    (a: kIdent or kCall)
  kBreak,
  kContinue,
  kComment,
  // expressions
  kInt,       // ival
  kFloat,     // fval
  kString,    // str
  kIdent,     // str
  kArray,     // args
  kTuple,     // args
  kObject,    // args: key, value, key, value...
  kMember,    // a[b] (flag: computed) or a.b
  kSlice,     // a:b:c (each may be null)
  kCall,      // a(args)
  kUnary,     // str a
  kBinary,    // a str b
  kFilter,    // a | b   (b: kIdent or kCall)
  kTest,      // a is [not] str [b]  (flag: negated)
  kSelect,    // a if b   (no else: undefined when b is false)
  kTernary,   // a if b else c: a = condition, b = true value, c = false value
  kKwArg,     // str = a
  kSpread,    // *a
  kKwSpread,  // **a
};

struct Node {
  NodeKind kind;
  uint32_t pos = 0;  // byte offset in the original template
  std::string str;
  int64_t ival = 0;
  double fval = 0;
  bool flag = false;
  std::unique_ptr<Node> a, b, c;
  std::vector<std::unique_ptr<Node>> args;
  std::vector<std::unique_ptr<Node>> body, alt;
  Node(NodeKind k, uint32_t p) : kind(k), pos(p) {}
};
using NodePtr = std::unique_ptr<Node>;

// Internal error (parse or render) at a template offset; Template::parse/render turn it into a Status.
struct TemplateError : std::runtime_error {
  uint32_t pos;
  TemplateError(uint32_t p, const std::string& m) : std::runtime_error(m), pos(p) {}
};

// "LINE:COL" (1-based, columns in code points) of byte offset `pos` in `source`.
std::string line_col(const std::string& source, uint32_t pos);

}  // namespace nxrt::genai::jinja
