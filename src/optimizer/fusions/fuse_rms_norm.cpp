// RMSNorm written out in ai.onnx ops -> nxrt::RMSNormalization(x, scale):
//   y = x / Sqrt(ReduceMean(x ^ 2) + eps) * scale    (or x * Reciprocal(Sqrt(...)) * scale)
// with the ReduceMean over the last k axes (keepdims) and scale a constant no wider than those axes.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct RmsNorm : Match {
  int last = -1;
  int k = 0;
  double eps = 0;
  DataType dtype = DataType::kUndefined;
  NormParam scale;
  std::string x;
};

bool match(Rewriter& rw, int anchor, RmsNorm& m) {
  const ir::Node& pw = rw.node(anchor);
  if (!single_output(pw) || pw.inputs.size() != 2 || !const_is_scalar(rw.constant(pw.inputs[1]), 2.0)) return false;
  m.x = pw.inputs[0];
  int ir1, iadd, isqrt, inorm, irecip = -1, imul;
  const ir::Node* r = rw.sole_reader(pw.outputs[0], "ReduceMean", &ir1);
  if (!r) return false;
  m.k = reduce_last_axes(rw, *r);
  if (m.k == 0) return false;
  const ir::Node* add = rw.sole_reader(r->outputs[0], "Add", &iadd);
  if (!add || !const_scalar(rw.constant(other_input(*add, r->outputs[0])), &m.eps)) return false;
  const ir::Node* sq = rw.sole_reader(add->outputs[0], "Sqrt", &isqrt);
  if (!sq) return false;
  const ir::Node* nx = rw.sole_reader(sq->outputs[0], &inorm);
  if (!nx || !single_output(*nx)) return false;
  if (is_onnx(nx, "Div")) {  // x / s
    if (nx->inputs.size() != 2 || nx->inputs[0] != m.x || nx->inputs[1] != sq->outputs[0]) return false;
  } else if (is_onnx(nx, "Reciprocal")) {  // x * (1 / s)
    irecip = inorm;
    nx = rw.sole_reader(nx->outputs[0], "Mul", &inorm);
    if (!nx || other_input(*nx, rw.node(irecip).outputs[0]) != m.x) return false;
  } else {
    return false;
  }
  const ir::Node* mul = rw.sole_reader(nx->outputs[0], "Mul", &imul);
  if (!mul || !norm_param(rw, other_input(*mul, nx->outputs[0]), m.k, &m.dtype, &m.scale)) return false;
  m.last = imul;
  m.nodes = {anchor, ir1, iadd, isqrt, inorm, imul};
  if (irecip >= 0) m.take(irecip);
  return true;
}

bool build(Rewriter& rw, const RmsNorm& m, Rewrite& r) {
  r.replace(m.last, norm_node(rw, m.anchor, m.last, {"RMSNorm", "_rmsnorm", "RMSNormalization"},
                              {m.x, norm_param_value(rw, m.scale)}, m.k, m.eps, m.dtype));
  return true;
}

const Fusion<RmsNorm> kRmsNorm{
    .stat = "fused_rms_norm", .anchor = {{"Pow"}}, .min_opset = 7, .match = match, .build = build};

}  // namespace

int fuse_rms_norm(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kRmsNorm); }

}  // namespace nxrt::optimizer
