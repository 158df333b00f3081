// Shape rules and op schemas: MatMul and its integer/quantized forms, Gemm, Einsum, MatMulNBits.
#include <algorithm>
#include <map>

#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

// The product of MatMul operands `a` and `b` (numpy semantics); unknown rank when either rank is.
Status matmul_facts(NodeContext& c, const ValueFacts& a, const ValueFacts& b, DataType dt, ValueFacts* out) {
  if (!a.has_shape || !b.has_shape || a.dims.empty() || b.dims.empty()) {
    *out = tensor_unknown_rank(dt);
    return Status::Ok();
  }
  std::vector<SymDim> ad = a.dims, bd = b.dims;
  bool a1 = ad.size() == 1, b1 = bd.size() == 1;
  if (a1) ad.insert(ad.begin(), SymDim::c(1));
  if (b1) bd.push_back(SymDim::c(1));
  SymDim k;
  NXRT_RETURN_IF_ERROR(c.unify(ad.back(), bd[bd.size() - 2],
                               "MatMul inner dims differ: " + c.shape_str(a) + " x " + c.shape_str(b), &k));
  ValueFacts ab = tensor(dt, std::vector<SymDim>(ad.begin(), ad.end() - 2));
  ValueFacts bbt = tensor(dt, std::vector<SymDim>(bd.begin(), bd.end() - 2));
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {&ab, &bbt}, &known, &dims));
  if (!a1) dims.push_back(ad[ad.size() - 2]);
  if (!b1) dims.push_back(bd.back());
  *out = tensor(dt, dims);
  return Status::Ok();
}

Status op_matmul(NodeContext& c) {
  const ValueFacts& a = c.input(0);
  DataType dt = a.dtype;
  if (c.n->op_type == "MatMulInteger") dt = DataType::kInt32;
  if (c.n->op_type == "QLinearMatMul") dt = c.input(7).dtype;
  // com.microsoft MatMulIntegerToFloat: b_scale's float type; DynamicQuantizeMatMul: A's.
  if (c.n->op_type == "MatMulIntegerToFloat") dt = c.input(3).dtype;
  const ValueFacts& b = c.n->op_type == "QLinearMatMul" ? c.input(3) : c.input(1);
  ValueFacts y;
  NXRT_RETURN_IF_ERROR(matmul_facts(c, a, b, dt, &y));
  c.set(0, std::move(y));
  return Status::Ok();
}

// com.microsoft FusedMatMul: alpha * op(A) @ op(B), where transBatchX moves X's dim 0 to just before its
// last dim (rank >= 3) and transX then swaps its last two (rank >= 2), as the kernel does.
Status op_ms_fused_matmul(NodeContext& c) {
  auto operand = [&](size_t i, const char* tb, const char* t) {
    ValueFacts v = c.input(i);
    if (!v.has_shape) return v;
    std::vector<SymDim>& d = v.dims;
    if (c.ai(tb, 0) != 0 && d.size() >= 3) std::rotate(d.begin(), d.begin() + 1, d.end() - 1);
    if (c.ai(t, 0) != 0 && d.size() >= 2) std::swap(d[d.size() - 1], d[d.size() - 2]);
    return v;
  };
  const ValueFacts a = operand(0, "transBatchA", "transA"), b = operand(1, "transBatchB", "transB");
  ValueFacts y;
  NXRT_RETURN_IF_ERROR(matmul_facts(c, a, b, c.input(0).dtype, &y));
  c.set(0, std::move(y));
  return Status::Ok();
}

// com.microsoft QGemm: [M, N] of op(A) and op(B); float32, or y_zero_point's type (uint8 without it)
// when y_scale is given.
Status op_qgemm(NodeContext& c) {
  DataType dt = DataType::kFloat;
  if (c.has(7)) dt = c.has(8) ? c.input(8).dtype : DataType::kUInt8;
  const ValueFacts& a = c.input(0);
  const ValueFacts& b = c.input(3);
  if (!a.has_shape || !b.has_shape || a.dims.size() != 2 || b.dims.size() != 2) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  const SymDim m = c.ai("transA", 0) ? a.dims[1] : a.dims[0];
  const SymDim n = c.ai("transB", 0) ? b.dims[0] : b.dims[1];
  c.set(0, tensor(dt, {m, n}));
  return Status::Ok();
}

// `y` broadcast with optional input `i` when both have shapes (a fused residual or mask widens it).
Status widen_by_input(NodeContext& c, size_t i, DataType dt, ValueFacts* y) {
  if (!c.has(i) || !c.input(i).has_shape || !y->has_shape) return Status::Ok();
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {y, &c.input(i)}, &known, &dims));
  *y = tensor(dt, dims);
  return Status::Ok();
}

// nxrt::FusedMatMul(A, B, bias?, Z?) = act(MatMul(A, B) + bias + Z): the product, widened by Z if it
// broadcasts wider (bias is 1-D over the last axis).
Status op_nxrt_fused_matmul(NodeContext& c) {
  const DataType dt = c.input(0).dtype;
  ValueFacts y;
  NXRT_RETURN_IF_ERROR(matmul_facts(c, c.input(0), c.input(1), dt, &y));
  NXRT_RETURN_IF_ERROR(widen_by_input(c, 3, dt, &y));
  c.set(0, std::move(y));
  return Status::Ok();
}

// nxrt::FusedAttention(q, kt, v, mask?, scale?) = MatMul(Softmax(MatMul(q, kt) [op scale] [+ mask]), v):
// the shapes of the ops it replaced, so values after a fused attention keep load-time shapes.
Status op_fused_attention(NodeContext& c) {
  const DataType dt = c.input(0).dtype;
  ValueFacts scores;
  NXRT_RETURN_IF_ERROR(matmul_facts(c, c.input(0), c.input(1), dt, &scores));
  NXRT_RETURN_IF_ERROR(widen_by_input(c, 3, dt, &scores));
  ValueFacts y;
  NXRT_RETURN_IF_ERROR(matmul_facts(c, scores, c.input(2), dt, &y));
  // transpose_output: heads merged back, [B, H, S, Dv] -> [B, S, H, Dv] (rank 4 only).
  if (c.ai("transpose_output", 0) != 0 && y.has_shape) {
    if (y.dims.size() != 4) return c.error("FusedAttention transpose_output needs rank-4 operands, got " + c.shape_str(y));
    std::swap(y.dims[1], y.dims[2]);
  }
  c.set(0, std::move(y));
  return Status::Ok();
}

Status op_gemm(NodeContext& c) {
  const ValueFacts &a = c.input(0), &b = c.input(1);
  if (!a.has_shape || !b.has_shape || a.dims.size() != 2 || b.dims.size() != 2) {
    c.set(0, tensor_unknown_rank(a.dtype));
    return Status::Ok();
  }
  bool ta = c.ai("transA", 0) != 0, tb = c.ai("transB", 0) != 0;
  SymDim m = a.dims[ta ? 1 : 0], ka = a.dims[ta ? 0 : 1], kb = b.dims[tb ? 1 : 0], n = b.dims[tb ? 0 : 1];
  SymDim k;
  NXRT_RETURN_IF_ERROR(c.unify(ka, kb, "Gemm inner dims differ: " + c.shape_str(a) + " x " + c.shape_str(b), &k));
  ValueFacts y = tensor(a.dtype, {m, n});
  if (c.has(2) && c.input(2).has_shape) {
    bool known;
    std::vector<SymDim> dims;
    NXRT_RETURN_IF_ERROR(broadcast(c, {&y, c.in[2]}, &known, &dims));
    if (known && dims.size() == 2) y.dims = dims;
  }
  c.set(0, std::move(y));
  return Status::Ok();
}

Status op_einsum(NodeContext& c) {
  // Only the output rank is cheap to know; dims are matched by letter.
  std::string eq = c.as("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  DataType dt = c.input(0).dtype;
  if (arrow == std::string::npos || eq.find("...") != std::string::npos) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  std::map<char, SymDim> letter;
  std::string lhs = eq.substr(0, arrow);
  size_t term = 0, pos = 0;
  while (pos <= lhs.size()) {
    size_t comma = lhs.find(',', pos);
    std::string t = lhs.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    const ValueFacts& x = c.input(term);
    if (x.has_shape && x.dims.size() == t.size()) {
      for (size_t i = 0; i < t.size(); ++i) {
        auto it = letter.find(t[i]);
        if (it == letter.end()) {
          letter[t[i]] = x.dims[i];
        } else {
          SymDim r;
          // Broadcasting of 1 allowed.
          if (x.dims[i].is_const() && x.dims[i].value == 1) continue;
          if (it->second.is_const() && it->second.value == 1) {
            it->second = x.dims[i];
            continue;
          }
          NXRT_RETURN_IF_ERROR(c.unify(it->second, x.dims[i], "einsum dims for '" + std::string(1, t[i]) + "' differ", &r));
          it->second = r;
        }
      }
    }
    ++term;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  std::vector<SymDim> out;
  for (char ch : eq.substr(arrow + 2)) {
    auto it = letter.find(ch);
    out.push_back(it == letter.end() ? SymDim::s(c.S.mint()) : it->second);
  }
  c.set(0, tensor(dt, out));
  return Status::Ok();
}

// MatMulNBits' A dims (last one checked against K), or empty when A's rank is unknown.
Result<std::vector<SymDim>> matmul_nbits_a_dims(NodeContext& c) {
  const ValueFacts& a = c.input(0);
  if (!a.has_shape || a.dims.empty()) return std::vector<SymDim>{};
  std::vector<SymDim> d = a.dims;
  int64_t k = c.ai("K", -1);
  if (k > 0) {
    SymDim r;
    NXRT_RETURN_IF_ERROR(c.unify(d.back(), SymDim::c(k), "input " + c.shape_str(a) + " does not end in K=" + std::to_string(k), &r));
  }
  return d;
}

Status op_matmul_nbits(NodeContext& c) {
  const DataType dt = c.input(0).dtype;
  NXRT_ASSIGN_OR_RETURN(std::vector<SymDim> d, matmul_nbits_a_dims(c));
  if (d.empty()) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  int64_t n = c.ai("N", -1);
  d.back() = n > 0 ? SymDim::c(n) : SymDim::s(c.S.mint());
  c.set(0, tensor(dt, d));
  return Status::Ok();
}

// nxrt::MatMulNBitsSplit: MatMulNBits whose output columns go to one output per `splits` entry.
Status op_matmul_nbits_split(NodeContext& c) {
  const DataType dt = c.input(0).dtype;
  const std::vector<int64_t> splits = c.aints("splits").value_or(std::vector<int64_t>{});
  NXRT_ASSIGN_OR_RETURN(std::vector<SymDim> d, matmul_nbits_a_dims(c));
  for (size_t i = 0; i < c.nout(); ++i) {
    if (d.empty() || i >= splits.size()) {
      c.set(i, tensor_unknown_rank(dt));
      continue;
    }
    d.back() = SymDim::c(splits[i]);
    c.set(i, tensor(dt, d));
  }
  return Status::Ok();
}

}  // namespace

void add_linalg_schemas(SchemaList& s) {
  s.add("MatMul", &op_matmul).differentiable();
  s.add("MatMulInteger", &op_matmul);
  s.add("QLinearMatMul", &op_matmul);
  s.add("com.microsoft", "FusedMatMul", &op_ms_fused_matmul);
  s.add("com.microsoft", "MatMulIntegerToFloat", &op_matmul);
  s.add("com.microsoft", "QGemm", &op_qgemm);
  s.add("com.microsoft", "DynamicQuantizeMatMul", &op_matmul);
  s.add("Gemm", &op_gemm);
  s.add("Einsum", &op_einsum);
  s.add("com.microsoft", "MatMulNBits", &op_matmul_nbits);
  // The optimizer's fused ops (src/ops/fused/).
  s.add(ir::kNxrtDomain, "FusedAttention", &op_fused_attention);
  s.add(ir::kNxrtDomain, "FusedMatMul", &op_nxrt_fused_matmul);
  s.add(ir::kNxrtDomain, "FusedGemm", &op_gemm);
  s.add(ir::kNxrtDomain, "MatMulNBitsSplit", &op_matmul_nbits_split);
  s.add(ir::kNxrtDomain, "MatMulNBitsSiluMul", &op_matmul_nbits);  // Swish(A * gate) * (A * up): N columns
}

}  // namespace nxrt::shape
