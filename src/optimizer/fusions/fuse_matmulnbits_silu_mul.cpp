// Level-all pass, after fuse_silu and fuse_sibling_matmulnbits: a stacked gate/up pair whose two outputs
// only a SwiGLU product reads becomes one node that writes the product:
//
//   g, u = nxrt::MatMulNBitsSplit(A, Bg, Sg, Zg, Bu, Su, Zu[, bias_g, bias_u])  (splits = [N, N])
//   y = nxrt::SiluMul(g, u)
//     ->   y = nxrt::MatMulNBitsSiluMul(A, Bg, Sg, Zg, Bu, Su, Zu[, bias_g, bias_u])  (N = N)
//
// Why: the kernel stacks the two matrices panel by panel, so each task computes the gate and up
// columns of the same outputs and finishes them in cache (matmulnbits_panels_silu_mul_run): g and u
// are never written whole and read back (a 512-token prefill of Qwen2.5-0.5B wrote and read 20 MB of
// them per layer), and a decode step loses a node and its hand-off per layer, plus the pass that read
// the other thread's half of g and u. The product has the unfused graph's bits: the same tiles, the
// bias added as before, then SiluMul's own body (silu_mul_f32).
//
// Taken: exactly two outputs of equal width N, a multiple of 32 (every panel width), each read only by
// one SiluMul (x = one output, u = the other; no other reader, not a graph output), float32 scales (a
// float32 product: SiluMul's fused body is float32's).
#include "optimizer/passes.h"
#include "optimizer/rewrite.h"

namespace nxrt::optimizer {

namespace {

struct GateUp : Match {
  int silu_mul = -1;
  int gate = 0;  // the Split output SiluMul reads as x (the other is u)
};

bool match(Rewriter& rw, int anchor, GateUp& m) {
  const ir::Node& split = rw.node(anchor);
  if (split.outputs.size() != 2) return false;
  const std::vector<int64_t> splits = attr_ints(split, "splits");
  if (splits.size() != 2 || splits[0] != splits[1] || splits[0] <= 0 || splits[0] % 32 != 0) return false;
  if (split.inputs.size() < 3) return false;
  const Tensor* scales = rw.constant(split.inputs[2]);
  if (!scales || scales->dtype() != DataType::kFloat) return false;
  int idx = -1;
  const ir::Node* sm = rw.sole_reader(split.outputs[0], &idx);
  if (!sm || sm->op_type != "SiluMul" || ir::canonical_domain(sm->domain) != kNxrtDomain || sm->inputs.size() != 2 ||
      sm->outputs.size() != 1)
    return false;
  int idx_u = -1;
  if (rw.sole_reader(split.outputs[1], &idx_u) == nullptr || idx_u != idx) return false;
  if (sm->inputs[0] == split.outputs[0] && sm->inputs[1] == split.outputs[1]) m.gate = 0;
  else if (sm->inputs[0] == split.outputs[1] && sm->inputs[1] == split.outputs[0]) m.gate = 1;
  else return false;
  m.silu_mul = idx;
  m.take(anchor);
  m.take(idx);
  return true;
}

bool build(Rewriter& rw, const GateUp& m, Rewrite& r) {
  const ir::Node& split = rw.node(m.anchor);
  const int g = m.gate, u = 1 - m.gate;
  auto in = [&](size_t i) { return i < split.inputs.size() ? split.inputs[i] : std::string(); };
  // A, the gate's three weights, the up's, then the gate's and the up's bias.
  std::vector<std::string> inputs = {in(0)};
  for (int part : {g, u})
    for (size_t k = 0; k < 3; ++k) inputs.push_back(in(1 + 3 * static_cast<size_t>(part) + k));
  inputs.push_back(in(7 + static_cast<size_t>(g)));
  inputs.push_back(in(7 + static_cast<size_t>(u)));
  while (inputs.back().empty()) inputs.pop_back();
  std::vector<ir::Attribute> attrs;
  for (const ir::Attribute& a : split.attributes) {
    if (a.name != "N" && a.name != "splits") attrs.push_back(a);
  }
  attrs.push_back(make_attr_i("N", attr_ints(split, "splits")[0]));
  const ir::Node& sm = rw.node(m.silu_mul);
  r.replace(m.silu_mul, make_node(split.name.empty() ? "MatMulNBitsSiluMul_" + std::to_string(rw.done()) : split.name + "_silu_mul",
                                  kNxrtDomain, "MatMulNBitsSiluMul", std::move(inputs), {sm.outputs[0]}, std::move(attrs)));
  return true;
}

const Fusion<GateUp> kGateUp{.stat = "fused_matmulnbits_silu_mul",
                             .anchor = {{"MatMulNBitsSplit"}, {kNxrtDomain}},
                             .match = match,
                             .build = build};

}  // namespace

int fuse_matmulnbits_silu_mul(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kGateUp); }

}  // namespace nxrt::optimizer
