// Symbolic dim arithmetic for shape inference. Constants fold; products and sums are flattened into
// one canonical derived symbol (sorted operands, one constant term), so the same expression built two
// ways is the same symbol ("batch*seq" from Flatten and from Reshape). Every result is an ir::SymDim.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/symbols.h"

namespace nxrt::shape {

// The product of the dims.
ir::SymDim mul(ir::SymbolTable& S, const std::vector<ir::SymDim>& ds);
// prod(num) / prod(den), cancelling common symbols; nullopt when all are constants and do not divide.
std::optional<ir::SymDim> divide(ir::SymbolTable& S, const std::vector<ir::SymDim>& num,
                                 const std::vector<ir::SymDim>& den);
// The sum of the dims.
ir::SymDim add(ir::SymbolTable& S, const std::vector<ir::SymDim>& ds);
// a - b (a sum that contains b loses that term).
ir::SymDim sub(ir::SymbolTable& S, ir::SymDim a, ir::SymDim b);
// Constant arithmetic is checked. A result outside int64 (a model whose dims or attributes are
// absurd) is noted and saturated, or gives a fresh symbol where a SymDim is returned; the driver turns
// the note into a load error naming the node ("dim arithmetic overflows int64: ...").
int64_t add_i(int64_t a, int64_t b);
int64_t sub_i(int64_t a, int64_t b);
int64_t mul_i(int64_t a, int64_t b);
// The first overflow noted on this thread since the last call ("" when none); clears it.
std::string take_overflow_note();
// Floor / ceiling division of integers (round toward negative / positive infinity, unlike C's `/`).
int64_t floordiv_i(int64_t a, int64_t b);
int64_t ceildiv_i(int64_t a, int64_t b);
// floor(a / b) and ceil(a / b); a zero constant divisor gives a fresh symbol.
ir::SymDim floordiv(ir::SymbolTable& S, ir::SymDim a, ir::SymDim b);
ir::SymDim ceildiv(ir::SymbolTable& S, ir::SymDim a, ir::SymDim b);
// A symbol defined as kind(operands), printed as a call: "max(a,b)", "slice(seq,1,-1,1)".
ir::SymDim fn(ir::SymbolTable& S, const std::string& kind, const std::vector<ir::SymDim>& operands);

}  // namespace nxrt::shape
