// Level-all pass, right after fuse_qdq: a QDQ model's float elementwise chains over one 8-bit value become
// a 256-entry table. In a QDQ model an activation like HardSwish, or x * a + b with constant scalars, runs
// in float between a DequantizeLinear and a QuantizeLinear (onnxruntime's QDQ transformer has no 8-bit
// form for it either, so it stays float there):
//
//   Y = QuantizeLinear(f(DequantizeLinear(x_q, xs, xz)), ys, yz)
//
// where f is any composition of elementwise ops whose other operands are constant scalars. Y's code then
// depends on x_q's code alone, so f is a map from 256 codes to 256 codes: the pass evaluates the chain once
// on a tensor holding every code (DequantizeLinear, each op in graph order, QuantizeLinear, with the CPU
// kernels, as constant folding does) and writes nxrt::ByteTable(x_q, table) in the QuantizeLinear's place
// (ops/fused/byte_table.cpp: one table lookup a byte, 64 at a time with AVX-512 VBMI). The float nodes
// stay for any other reader; dead-code removal drops the rest.
//
// Results: each table entry is what the same kernels compute for that code; the float graph computes the
// same operations element by element, so its codes agree wherever its kernels give every element the same
// value wherever it sits (exact IEEE operations: Add, Sub, Mul, Div, Max, Min, Relu, Clip, Neg, Abs,
// HardSigmoid, HardSwish, LeakyRelu); an op with a vector approximation (Sigmoid, Tanh, Exp, Erf) may round
// a vector lane and a scalar tail apart, so a code can move by one step there.
//
// Conditions, each checked: the QuantizeLinear and DequantizeLinear per tensor (constant scalar scale,
// constant scalar zero point or none), 8-bit codes on both ends, x_q not a constant; every node between is
// an ai.onnx op of the list below with one output, and each operand not from the chain a constant of one
// float value whose rank does not exceed x_q's; at most kMaxChain nodes.
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "ir/symbols.h"
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

constexpr size_t kMaxChain = 24;

bool is_8bit(DataType t) { return t == DataType::kUInt8 || t == DataType::kInt8; }

// Elementwise ops whose output element depends only on the same element of each input.
bool elementwise_op(const ir::Node& n) {
  static const std::unordered_set<std::string> ops = {
      "Add",       "Sub",  "Mul", "Div",  "Max",  "Min",     "Relu",     "Clip",  "Neg",     "Abs",  "HardSigmoid",
      "HardSwish", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Erf", "Elu", "Softplus", "Sqrt", "Reciprocal", "Pow"};
  return ir::canonical_domain(n.domain).empty() && ops.count(n.op_type) != 0;
}

// A QuantizeLinear / DequantizeLinear with an input and per-tensor parameters (qdq_per_tensor).
bool per_tensor(Rewriter& rw, const ir::Node& n, const Tensor** scale, const Tensor** zp) {
  return !n.inputs.empty() && !n.inputs[0].empty() && qdq_per_tensor(rw, n, scale, zp);
}

struct TableChain : Match {
  int dq = -1;             // the DequantizeLinear of x_q
  std::vector<int> chain;  // the float nodes between, in graph order
  DataType src = DataType::kUndefined;  // x_q's type
};

bool match(Rewriter& rw, int anchor, TableChain& m) {
  const ir::Node& q = rw.node(anchor);
  const Tensor *qs = nullptr, *qz = nullptr;
  if (!single_output(q) || !per_tensor(rw, q, &qs, &qz)) return false;
  // Walk back from the QuantizeLinear's input to the one DequantizeLinear it depends on.
  std::vector<std::string> stack = {q.inputs[0]};
  std::unordered_set<std::string> seen;
  std::vector<const Tensor*> constants;
  while (!stack.empty()) {
    const std::string v = stack.back();
    stack.pop_back();
    if (!seen.insert(v).second) continue;
    auto it = rw.gi.producer.find(v);
    if (it == rw.gi.producer.end() || !rw.live(it->second)) return false;
    const int pi = it->second;
    const ir::Node& p = rw.node(pi);
    if (is_onnx(&p, "DequantizeLinear")) {
      if (m.dq >= 0 && m.dq != pi) return false;  // a second 8-bit source
      m.dq = pi;
      continue;
    }
    if (!elementwise_op(p) || !single_output(p) || m.chain.size() >= kMaxChain) return false;
    m.chain.push_back(pi);
    for (const std::string& in : p.inputs) {
      if (in.empty()) continue;
      if (const Tensor* c = rw.constant(in)) {
        if (c->numel() != 1 || c->dtype() != DataType::kFloat) return false;
        constants.push_back(c);
        continue;
      }
      stack.push_back(in);
    }
  }
  if (m.dq < 0) return false;
  const ir::Node& dq = rw.node(m.dq);
  const Tensor *ds = nullptr, *dz = nullptr;
  if (!single_output(dq) || !per_tensor(rw, dq, &ds, &dz) || rw.constant(dq.inputs[0])) return false;
  // x_q's type: its zero point's, else what load-time inference says (an absent zero point is a 0 of
  // x's type, int8 or uint8).
  const ir::ValueFacts* xf = rw.g.shape_facts ? rw.g.shape_facts->find(dq.inputs[0]) : nullptr;
  m.src = dz ? dz->dtype() : xf ? xf->dtype : DataType::kUndefined;
  if (!is_8bit(m.src) || (xf && xf->dtype != DataType::kUndefined && xf->dtype != m.src)) return false;
  // The source's rank bounds the constants' (a [1, 1, 1, 1] scalar must not raise the output's rank):
  // from load-time shape inference, else the pass's rank inference.
  int64_t src_rank = -1;
  if (const ir::ValueFacts* f = rw.g.shape_facts ? rw.g.shape_facts->find(dq.inputs[0]) : nullptr; f && f->has_shape) {
    src_rank = static_cast<int64_t>(f->dims.size());
  } else if (auto r = rw.ranks().find(dq.inputs[0]); r != rw.ranks().end()) {
    src_rank = r->second;
  }
  for (const Tensor* c : constants)
    if (c->rank() > 0 && c->rank() > src_rank) return false;
  std::sort(m.chain.begin(), m.chain.end());
  m.take(anchor);
  return true;
}

bool build(Rewriter& rw, const TableChain& m, Rewrite& out) {
  const ir::Node& q = rw.node(m.anchor);
  const ir::Node& dq = rw.node(m.dq);
  // Every code of the source type, by its byte: entry b of the table is the output for byte b.
  Tensor codes(m.src, {256});
  for (int b = 0; b < 256; ++b) static_cast<uint8_t*>(codes.raw_data())[b] = static_cast<uint8_t>(b);
  std::unordered_map<std::string, Tensor> values;
  auto operand = [&](const std::string& name) -> const Tensor* {
    if (name.empty()) return nullptr;
    auto it = values.find(name);
    if (it != values.end()) return &it->second;
    return rw.constant(name);
  };
  auto eval = [&](const ir::Node& n, std::vector<const Tensor*> ins) {
    std::vector<Tensor> outs;
    if (!evaluate_node(rw.pc, rw.g, n, ins, &outs) || outs.size() != 1 || !outs[0].defined() || outs[0].numel() != 256) return false;
    values[n.outputs[0]] = std::move(outs[0]);
    return true;
  };
  std::vector<const Tensor*> dq_in = {&codes};
  for (size_t i = 1; i < dq.inputs.size(); ++i) dq_in.push_back(operand(dq.inputs[i]));
  if (!eval(dq, dq_in)) return false;
  for (int i : m.chain) {
    const ir::Node& n = rw.node(i);
    std::vector<const Tensor*> ins;
    for (const std::string& in : n.inputs) {
      const Tensor* t = operand(in);
      if (!in.empty() && !t) return false;
      ins.push_back(t);
    }
    if (!eval(n, ins)) return false;
  }
  std::vector<const Tensor*> q_in;
  for (const std::string& in : q.inputs) q_in.push_back(operand(in));
  if (!q_in[0] || !eval(q, q_in)) return false;
  Tensor table = values[q.outputs[0]].contiguous();
  if (!is_8bit(table.dtype())) return false;
  Tensor flat(table.dtype(), {256});
  std::memcpy(flat.raw_data(), table.raw_data(), 256);
  const std::string t = rw.add_initializer(q.name.empty() ? std::string("qdq_table") : q.name + "_table", std::move(flat));
  out.replace(m.anchor, make_node(rw.fused_name(q, "qdq_table", "_table"), ir::kNxrtDomain, "ByteTable",
                                  {dq.inputs[0], t}, {q.outputs[0]}));
  return true;
}

const Fusion<TableChain> kQdqTable{.stat = "fused_qdq_table",
                                   .anchor = {{"QuantizeLinear"}},
                                   .min_opset = 10,
                                   .match = match,
                                   .build = build};

}  // namespace

int fuse_qdq_table(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kQdqTable); }

}  // namespace nxrt::optimizer
