// BatchNormalization (inference) followed by Relu -> nxrt::BatchNormRelu, one per-channel
// scale/shift + max(0, .) pass instead of two (DenseNet / Inception pre-activation BN-ReLU-Conv).
//
//   nxrt::BatchNormRelu(X, scale, B, mean, var), attribute epsilon: Relu(BatchNormalization(X, ...))
//
// The kernel (ops/fused/batch_norm_relu.cpp) and fuse_preact_conv fold the statistics the same way
// (ir::fold_batch_norm). The pass fuses only when the four parameters are non-overridable constants.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct BnRelu : Match {
  int relu = -1;
};

bool match(Rewriter& rw, int anchor, BnRelu& m) {
  const ir::Node& bn = rw.node(anchor);
  std::vector<const Tensor*> params;
  if (!inference_batch_norm(rw, bn) || bn.inputs[0].empty() || !batch_norm_params(rw, bn, &params)) return false;
  for (const Tensor* t : params) {
    if (t->dtype() != DataType::kFloat && t->dtype() != DataType::kDouble) return false;
  }
  const ir::Node* relu = rw.sole_reader(bn.outputs[0], "Relu", &m.relu);
  if (!relu || relu->inputs.size() != 1) return false;
  m.nodes = {anchor, m.relu};
  return true;
}

bool build(Rewriter& rw, const BnRelu& m, Rewrite& r) {
  const ir::Node& bn = rw.node(m.anchor);
  ir::Node fused = rw.fused_node(m.anchor, m.relu, {"BatchNormRelu", "_relu", "BatchNormRelu"}, bn.inputs);
  for (const auto& a : bn.attributes) {
    if (a.name == "epsilon") fused.attributes.push_back(a);
  }
  r.replace(m.relu, std::move(fused));
  return true;
}

const Fusion<BnRelu> kBnRelu{
    .stat = "fused_bn_relu", .anchor = {{"BatchNormalization"}}, .min_opset = 7, .match = match, .build = build};

}  // namespace

int fuse_bn_relu(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kBnRelu); }

}  // namespace nxrt::optimizer
