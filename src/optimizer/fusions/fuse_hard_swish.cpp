// HardSwish written out in ai.onnx ops -> nxrt::HardSwish(x):
//   x * Clip(x + 3, 0, 6) / 6    (or * (1/6))
// fuse_activation then moves it into a producing Conv / Gemm / MatMul.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct HardSwish : Match {
  int last = -1;
  std::string x;
};

// Clip(v, 0, 6): bounds are attributes before opset 11, constant inputs from 11.
bool clip_0_6(const Rewriter& rw, const ir::Node& clip) {
  if (rw.opset() < 11) {
    return clip.inputs.size() == 1 && attr_f(clip, "min", -1) == 0.f && attr_f(clip, "max", -1) == 6.f;
  }
  return clip.inputs.size() == 3 && const_is_scalar(rw.constant(clip.inputs[1]), 0.0) &&
         const_is_scalar(rw.constant(clip.inputs[2]), 6.0);
}

bool match(Rewriter& rw, int anchor, HardSwish& m) {
  const ir::Node& add = rw.node(anchor);
  if (!single_output(add) || add.inputs.size() != 2) return false;
  for (size_t s = 0; s < 2; ++s) {
    if (const_is_scalar(rw.constant(add.inputs[1 - s]), 3.0, 1e-6)) m.x = add.inputs[s];
  }
  if (m.x.empty() || rw.gi.is_const(m.x)) return false;
  int ic, im, id;
  const ir::Node* clip = rw.sole_reader(add.outputs[0], "Clip", &ic);
  if (!clip || clip->inputs.empty() || clip->inputs[0] != add.outputs[0] || !clip_0_6(rw, *clip)) return false;
  const ir::Node* mul = rw.sole_reader(clip->outputs[0], "Mul", &im);
  if (!mul || other_input(*mul, clip->outputs[0]) != m.x) return false;
  const ir::Node* last = rw.sole_reader(mul->outputs[0], &id);
  if (!last || !single_output(*last) || last->inputs.size() != 2) return false;
  if (is_onnx(last, "Div")) {
    if (last->inputs[0] != mul->outputs[0] || !const_is_scalar(rw.constant(last->inputs[1]), 6.0, 1e-6)) return false;
  } else if (!is_onnx(last, "Mul") ||
             !const_is_scalar(rw.constant(other_input(*last, mul->outputs[0])), 1.0 / 6.0, 1e-6)) {
    return false;
  }
  m.last = id;
  m.nodes = {anchor, ic, im, id};
  return true;
}

bool build(Rewriter& rw, const HardSwish& m, Rewrite& r) {
  r.replace(m.last, rw.fused_node(m.anchor, m.last, {"HardSwish", "_hardswish", "HardSwish"}, {m.x}));
  return true;
}

const Fusion<HardSwish> kHardSwish{
    .stat = "fused_hard_swish", .anchor = {{"Add"}}, .min_opset = 7, .match = match, .build = build};

}  // namespace

int fuse_hard_swish(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kHardSwish); }

}  // namespace nxrt::optimizer
