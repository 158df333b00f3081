// BatchNormalization followed by Mul / Add of a per-channel constant (broadcast against the input,
// whose rank must be known: 1 on every axis but axis 1): a Mul scales the BatchNormalization's scale and
// bias, an Add shifts its bias; the BatchNormalization takes over the op's output.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct BnAffine : Match {
  int op = -1;
  bool mul = false;
  DataType dtype = DataType::kUndefined;
  std::vector<double> c, scale, bias;  // per channel
};

bool match(Rewriter& rw, int anchor, BnAffine& m) {
  const ir::Node& bn = rw.node(anchor);
  if (!inference_batch_norm(rw, bn)) return false;
  const auto& ranks = rw.ranks();
  auto rit = ranks.find(bn.inputs[0]);
  if (rit == ranks.end() || rit->second < 2) return false;
  const ir::Node* op = rw.sole_reader(bn.outputs[0], &m.op);
  m.mul = is_onnx(op, "Mul");
  if ((!m.mul && !is_onnx(op, "Add")) || !single_output(*op)) return false;
  const Tensor* c = rw.constant(other_input(*op, bn.outputs[0]));
  const Tensor* scale = rw.constant(bn.inputs[1]);
  const Tensor* bias = rw.constant(bn.inputs[2]);
  if (!c || !scale || !bias || scale->rank() != 1 || bias->rank() != 1) return false;
  m.dtype = scale->dtype();
  if ((m.dtype != DataType::kFloat && m.dtype != DataType::kDouble) || bias->dtype() != m.dtype ||
      c->dtype() != m.dtype)
    return false;
  if (bias->numel() != scale->numel() || !per_channel_values(*c, rit->second, scale->numel(), &m.c)) return false;
  if (!const_values(*scale, &m.scale) || !const_values(*bias, &m.bias)) return false;
  m.nodes = {anchor, m.op};
  return true;
}

bool build(Rewriter& rw, const BnAffine& m, Rewrite& r) {
  std::vector<double> sv = m.scale, bv = m.bias;
  for (size_t k = 0; k < sv.size(); ++k) {
    if (m.mul) {
      sv[k] *= m.c[k];
      bv[k] *= m.c[k];
    } else {
      bv[k] += m.c[k];
    }
  }
  const Dims shape{static_cast<int64_t>(sv.size())};
  Tensor ns, nb;
  if (!make_tensor(m.dtype, shape, sv, &ns) || !make_tensor(m.dtype, shape, bv, &nb)) return false;
  ir::Node bn = rw.node(m.anchor);
  if (m.mul) bn.inputs[1] = rw.add_initializer("bnaffine_scale", std::move(ns));
  bn.inputs[2] = rw.add_initializer("bnaffine_bias", std::move(nb));
  bn.outputs[0] = rw.node(m.op).outputs[0];
  r.replace(m.anchor, std::move(bn));
  return true;
}

const Fusion<BnAffine> kBnAffine{
    .stat = "bn_affine_folded", .anchor = {{"BatchNormalization"}}, .min_opset = 7, .match = match, .build = build,
    .domain = nullptr};

}  // namespace

int fold_bn_affine(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kBnAffine); }

}  // namespace nxrt::optimizer
