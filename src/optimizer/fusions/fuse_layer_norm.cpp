// LayerNorm written out in ai.onnx ops -> nxrt::LayerNormalization(x, scale, bias?):
//   m = ReduceMean(x), d = x - m, v = ReduceMean(d ^ 2), y = d / Sqrt(v + eps) * scale [+ bias]
// with both ReduceMeans over the same last k axes (keepdims), scale and bias constants no wider than
// those axes. d is read by exactly the Pow and the Div.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct LayerNorm : Match {
  int last = -1;
  int k = 0;  // normalized over the last k axes
  double eps = 0;
  DataType dtype = DataType::kUndefined;
  NormParam scale, bias;  // bias.name empty: none
  std::string x, out;
};

// The Pow(d, 2) and Div(d, .) that read d = x - mean, when they are its only readers.
bool split_of_centered(Rewriter& rw, const std::string& d, int* ipow, int* idiv) {
  if (rw.gi.protected_names.count(d) || rw.gi.num_uses(d) != 2) return false;
  for (int c : rw.gi.consumers.at(d)) {
    const ir::Node& n = rw.node(c);
    if (!rw.live(c) || n.inputs.size() != 2 || n.inputs[0] != d) continue;
    if (is_onnx(&n, "Pow")) *ipow = c;
    if (is_onnx(&n, "Div")) *idiv = c;
  }
  return *ipow >= 0 && *idiv >= 0 && single_output(rw.node(*ipow)) && single_output(rw.node(*idiv));
}

bool match(Rewriter& rw, int anchor, LayerNorm& m) {
  const ir::Node& r1 = rw.node(anchor);
  if (!single_output(r1) || r1.inputs.empty()) return false;
  m.k = reduce_last_axes(rw, r1);
  if (m.k == 0) return false;
  m.x = r1.inputs[0];
  const std::string& mean = r1.outputs[0];
  int isub, ipow = -1, ir2, iadd, isqrt, idiv = -1, imul;
  const ir::Node* sub = rw.sole_reader(mean, "Sub", &isub);
  if (!sub || sub->inputs.size() != 2 || sub->inputs[0] != m.x || sub->inputs[1] != mean) return false;
  if (!split_of_centered(rw, sub->outputs[0], &ipow, &idiv)) return false;
  const ir::Node& pw = rw.node(ipow);
  const ir::Node& dv = rw.node(idiv);
  if (!const_is_scalar(rw.constant(pw.inputs[1]), 2.0)) return false;
  const ir::Node* r2 = rw.sole_reader(pw.outputs[0], "ReduceMean", &ir2);
  if (!r2 || reduce_last_axes(rw, *r2) != m.k) return false;
  const ir::Node* add = rw.sole_reader(r2->outputs[0], "Add", &iadd);
  if (!add || !const_scalar(rw.constant(other_input(*add, r2->outputs[0])), &m.eps)) return false;
  const ir::Node* sq = rw.sole_reader(add->outputs[0], "Sqrt", &isqrt);
  if (!sq || !rw.gi.single_use(sq->outputs[0]) || dv.inputs[1] != sq->outputs[0]) return false;
  const ir::Node* mul = rw.sole_reader(dv.outputs[0], "Mul", &imul);
  if (!mul || !norm_param(rw, other_input(*mul, dv.outputs[0]), m.k, &m.dtype, &m.scale)) return false;
  m.out = mul->outputs[0];
  m.last = imul;
  int ibias;
  const ir::Node* ba = rw.sole_reader(m.out, "Add", &ibias);
  if (ba && norm_param(rw, other_input(*ba, m.out), m.k, &m.dtype, &m.bias)) {
    m.out = ba->outputs[0];
    m.last = ibias;
  }
  m.nodes = {anchor, isub, ipow, ir2, iadd, isqrt, idiv, imul};
  if (m.last != imul) m.take(m.last);
  return true;
}

bool build(Rewriter& rw, const LayerNorm& m, Rewrite& r) {
  std::vector<std::string> inputs = {m.x, norm_param_value(rw, m.scale)};
  if (!m.bias.name.empty()) inputs.push_back(norm_param_value(rw, m.bias));
  r.replace(m.last, norm_node(rw, m.anchor, m.last, {"LayerNorm", "_layernorm", "LayerNormalization"},
                              std::move(inputs), m.k, m.eps, m.dtype));
  return true;
}

const Fusion<LayerNorm> kLayerNorm{
    .stat = "fused_layer_norm", .anchor = {{"ReduceMean"}}, .min_opset = 7, .match = match, .build = build};

}  // namespace

int fuse_layer_norm(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kLayerNorm); }

}  // namespace nxrt::optimizer
