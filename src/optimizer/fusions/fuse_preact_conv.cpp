// nxrt::BatchNormRelu whose only reader is a float 1x1, stride-1, unpadded, group-1 conv (Conv, or a
// FusedConv without a residual): DenseNet's BN-ReLU-Conv order. The folded scale/shift and the Relu
// move into the conv, which applies them while packing its input panels (FusedConv inputs 4 and 5,
// ops::ConvPost::pre_scale), so the activated tensor is never written or read back.
#include "ir/tensor_util.h"
#include "optimizer/fusions/fused_activation.h"
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct PreactConv : Match {
  int conv = -1;
  std::vector<const Tensor*> params;  // scale, B, mean, var
};

bool match(Rewriter& rw, int anchor, PreactConv& m) {
  const ir::Node& bnr = rw.node(anchor);
  if (bnr.inputs.size() != 5 || !single_output(bnr) || bnr.inputs[0].empty()) return false;
  const ir::Node* conv = rw.sole_reader(bnr.outputs[0], &m.conv);
  if (!conv || conv->inputs[0] != bnr.outputs[0] || !pointwise_conv_weight(rw, *conv)) return false;
  const int64_t C = rw.constant(conv->inputs[1])->dim(1);
  if (!batch_norm_params(rw, bnr, &m.params) || m.params[0]->numel() != C) return false;
  m.nodes = {anchor, m.conv};
  return true;
}

bool build(Rewriter& rw, const PreactConv& m, Rewrite& r) {
  const ir::Node& bnr = rw.node(m.anchor);
  // BatchNormReluKernel's epsilon (a float attribute, default 1e-5f) and fold: the same numbers.
  const double eps = attr_f(bnr, "epsilon", 1e-5f);
  std::vector<double> fa, fb;
  if (!ir::fold_batch_norm(m.params, eps, &fa, &fb).ok()) return false;
  const int64_t C = static_cast<int64_t>(fa.size());
  Tensor sa(DataType::kFloat, {C}), sb(DataType::kFloat, {C});
  for (int64_t k = 0; k < C; ++k) {
    sa.data<float>()[k] = static_cast<float>(fa[static_cast<size_t>(k)]);
    sb.data<float>()[k] = static_cast<float>(fb[static_cast<size_t>(k)]);
  }
  ir::Node n = rw.node(m.conv);
  if (is_onnx(&n, "Conv")) {
    n.domain = kNxrtDomain;
    n.op_type = "FusedConv";
    add_fused_activation_attrs(n, FusedActivation{}, rw.opset());
  }
  n.inputs.resize(4);  // X, W, B (may be empty), no residual
  n.inputs[0] = bnr.inputs[0];
  n.inputs.push_back(rw.add_initializer("preact_scale", std::move(sa)));
  n.inputs.push_back(rw.add_initializer("preact_shift", std::move(sb)));
  r.replace(m.conv, std::move(n));
  return true;
}

const Fusion<PreactConv> kPreactConv{
    .stat = "fused_preact_conv", .anchor = {{"BatchNormRelu"}, {kNxrtDomain}}, .match = match, .build = build};

}  // namespace

int fuse_preact_conv(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kPreactConv); }

}  // namespace nxrt::optimizer
