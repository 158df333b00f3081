// Conv followed by Mul / Add of a constant that is per output channel (broadcast against Y: 1 on every
// axis but axis 1): a Mul scales W's rows and B, an Add shifts B; the Conv takes over the op's output.
// Runs repeatedly, so Mul-then-Add chains fold fully.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct ConvAffine : Match {
  int op = -1;
  bool mul = false;
  const Tensor* w = nullptr;
  std::vector<double> c, b;  // per output channel: the constant, the bias
};

bool match(Rewriter& rw, int anchor, ConvAffine& m) {
  const ir::Node& conv = rw.node(anchor);
  if (!single_output(conv) || conv.inputs.size() < 2) return false;
  const ir::Node* op = rw.sole_reader(conv.outputs[0], &m.op);
  m.mul = is_onnx(op, "Mul");
  if ((!m.mul && !is_onnx(op, "Add")) || !single_output(*op)) return false;
  const Tensor* c = rw.constant(other_input(*op, conv.outputs[0]));
  m.w = rw.constant(conv.inputs[1]);
  const bool has_b = conv.inputs.size() > 2 && !conv.inputs[2].empty();
  const Tensor* b = has_b ? rw.constant(conv.inputs[2]) : nullptr;
  if (!c || !m.w || (has_b && !b) || m.w->rank() < 3 || c->dtype() != m.w->dtype() ||
      (b && b->dtype() != m.w->dtype()))
    return false;
  if (m.w->dtype() != DataType::kFloat && m.w->dtype() != DataType::kDouble) return false;
  const int64_t M = m.w->dim(0);
  if (!per_channel_values(*c, m.w->rank(), M, &m.c)) return false;
  if (b && (!const_values(*b, &m.b) || b->numel() != M)) return false;
  if (!b) m.b.assign(static_cast<size_t>(M), 0.0);
  m.nodes = {anchor, m.op};
  return true;
}

bool build(Rewriter& rw, const ConvAffine& m, Rewrite& r) {
  std::string wn = rw.node(m.anchor).inputs[1];
  if (m.mul) wn = scale_output_channels(rw, wn, *m.w, m.c, "affine_w");
  std::vector<double> bv = m.b;
  for (size_t k = 0; k < bv.size(); ++k) bv[k] = m.mul ? bv[k] * m.c[k] : bv[k] + m.c[k];
  Tensor nbt;
  if (!make_tensor(m.w->dtype(), Dims{m.w->dim(0)}, bv, &nbt)) return false;
  ir::Node conv = with_weights(rw.node(m.anchor), wn, rw.add_initializer("affine_b", std::move(nbt)));
  conv.outputs[0] = rw.node(m.op).outputs[0];
  r.replace(m.anchor, std::move(conv));
  return true;
}

const Fusion<ConvAffine> kConvAffine{
    .stat = "conv_affine_folded", .anchor = {{"Conv"}}, .min_opset = 7, .match = match, .build = build,
    .domain = nullptr};

}  // namespace

int fold_conv_affine(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kConvAffine); }

}  // namespace nxrt::optimizer
