// x * Sigmoid(x) (SiLU, the gate of SwiGLU MLPs) -> nxrt::Swish(x, alpha = 1): one pass over x instead
// of a Sigmoid pass and a Mul pass, and one intermediate fewer.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct Silu : Match {
  int mul = -1;
};

bool match(Rewriter& rw, int anchor, Silu& m) {
  const ir::Node& sig = rw.node(anchor);
  if (!single_output(sig) || sig.inputs.size() != 1) return false;
  const std::string& x = sig.inputs[0];
  if (x.empty() || rw.gi.is_const(x)) return false;
  const ir::Node* mul = rw.sole_reader(sig.outputs[0], "Mul", &m.mul);
  if (!mul || mul->inputs.size() != 2 || other_input(*mul, sig.outputs[0]) != x) return false;
  m.nodes = {anchor, m.mul};
  return true;
}

bool build(Rewriter& rw, const Silu& m, Rewrite& r) {
  r.replace(m.mul, rw.fused_node(m.anchor, m.mul, {"Silu", "_silu", "Swish"}, {rw.node(m.anchor).inputs[0]}));
  return true;
}

const Fusion<Silu> kSilu{.stat = "fused_silu", .anchor = {{"Sigmoid"}}, .min_opset = 6, .match = match, .build = build};

}  // namespace

int fuse_silu(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kSilu); }

}  // namespace nxrt::optimizer
