// BatchNormalization (inference) followed by Relu -> nxrt::BatchNormRelu, one per-channel
// scale/shift + max(0, .) pass instead of two (DenseNet / Inception pre-activation BN-ReLU-Conv).
//
//   nxrt::BatchNormRelu(X, scale, B, mean, var), attribute epsilon: Relu(BatchNormalization(X, ...))
//
// The kernel (ops/fused/batch_norm_relu.cpp) and fuse_preact_conv fold the statistics the same way
// (ir::fold_batch_norm). The passes fuse only when the four parameters are non-overridable constants.
#include <cmath>

#include "ir/tensor_util.h"
#include "optimizer/graph_util.h"
#include "optimizer/optimizer.h"

namespace nxrt::optimizer {

int fuse_bn_relu(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  const int64_t opset = pc.opset("");
  if (opset < 7) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& bn = g.nodes[i];
    if (dead[i] || !is_onnx(&bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.outputs.empty()) continue;
    bool extra = false;
    for (size_t k = 1; k < bn.outputs.size(); ++k) extra |= !bn.outputs[k].empty();
    if (extra || bn.outputs[0].empty() || bn.inputs[0].empty()) continue;
    if (opset >= 14 && attr_i(bn, "training_mode", 0) != 0) continue;
    if (opset < 9 && attr_i(bn, "spatial", 1) == 0) continue;
    bool params = true;
    for (size_t k = 1; k < 5; ++k) {
      const Tensor* t = gi.constant(bn.inputs[k]);
      params = params && t && t->rank() == 1 &&
               (t->dtype() == DataType::kFloat || t->dtype() == DataType::kDouble) &&
               t->numel() == gi.constant(bn.inputs[1])->numel();
    }
    if (!params) continue;
    int c;
    const ir::Node* relu_p = sole_reader(gi, dead, bn.outputs[0], &c);
    if (!is_onnx(relu_p, "Relu") || relu_p->inputs.size() != 1 || !single_output(*relu_p)) continue;
    const ir::Node& relu = *relu_p;
    ir::Node fused;
    fused.name = bn.name.empty() ? "BatchNormRelu_" + std::to_string(done) : bn.name + "_relu";
    fused.domain = kNxrtDomain;
    fused.op_type = "BatchNormRelu";
    fused.inputs = bn.inputs;
    fused.outputs = {relu.outputs[0]};
    for (const auto& a : bn.attributes)
      if (a.name == "epsilon") fused.attributes.push_back(a);
    dead[i] = true;
    g.nodes[static_cast<size_t>(c)] = std::move(fused);
    pc.count("fused_bn_relu");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

// nxrt::BatchNormRelu whose only reader is a float 1x1, stride-1, unpadded, group-1 conv (Conv, or a
// FusedConv without a residual): DenseNet's BN-ReLU-Conv order. The folded scale/shift and the Relu
// move into the conv, which applies them while packing its input panels (FusedConv inputs 4 and 5,
// ops::ConvPost::pre_scale), so the activated tensor is never written or read back.
int fuse_preact_conv(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& bnr = g.nodes[i];
    if (dead[i] || bnr.domain != kNxrtDomain || bnr.op_type != "BatchNormRelu" || bnr.inputs.size() != 5 ||
        !single_output(bnr) || bnr.inputs[0].empty()) {
      continue;
    }
    int c;
    const ir::Node* conv_p = sole_reader(gi, dead, bnr.outputs[0], &c);
    if (!conv_p) continue;
    const bool plain = is_onnx(conv_p, "Conv");
    const bool fused = conv_p->domain == kNxrtDomain && conv_p->op_type == "FusedConv";
    if ((!plain && !fused) || conv_p->inputs.size() < 2 || conv_p->inputs[0] != bnr.outputs[0]) continue;
    const ir::Node& conv = *conv_p;
    if (fused && conv.inputs.size() > 3) continue;  // a residual (or an earlier pre-activation)
    const Tensor* w = gi.constant(conv.inputs[1]);
    if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->dim(2) != 1 || w->dim(3) != 1) continue;
    if (attr_i(conv, "group", 1) != 1) continue;
    const std::string pad_mode = attr_s(conv, "auto_pad", "NOTSET");
    if (pad_mode != "NOTSET" && pad_mode != "VALID") continue;
    bool unit = true;
    for (const auto& a : conv.attributes) {
      if (a.name == "strides")
        for (int64_t v : a.ints) unit = unit && v == 1;
      if (a.name == "pads")
        for (int64_t v : a.ints) unit = unit && v == 0;
    }
    if (!unit) continue;
    std::vector<const Tensor*> p;
    for (size_t k = 1; k < 5; ++k) {
      const Tensor* t = gi.constant(bnr.inputs[k]);
      if (t && t->rank() == 1 && t->numel() == w->dim(1)) p.push_back(t);
    }
    if (p.size() != 4) continue;
    // BatchNormReluKernel's epsilon (a float attribute, default 1e-5f) and fold: the same numbers.
    const double eps = attr_f(bnr, "epsilon", 1e-5f);
    std::vector<double> fa, fb;
    if (!ir::fold_batch_norm(p, eps, &fa, &fb).ok()) continue;
    const int64_t C = w->dim(1);
    Tensor sa(DataType::kFloat, {C}), sb(DataType::kFloat, {C});
    for (int64_t k = 0; k < C; ++k) {
      sa.data<float>()[k] = static_cast<float>(fa[k]);
      sb.data<float>()[k] = static_cast<float>(fb[k]);
    }
    const std::string an = pc.fresh_name(g, "preact_scale"), bn = pc.fresh_name(g, "preact_shift");
    g.initializers[an] = std::move(sa);
    g.initializers[bn] = std::move(sb);
    ir::Node n = conv;
    if (plain) {
      n.domain = kNxrtDomain;
      n.op_type = "FusedConv";
      n.attributes.push_back(make_attr_s("activation", ""));
      n.attributes.push_back(make_attr_i("inner_opset", pc.opset("")));
    }
    n.inputs.resize(4);  // X, W, B (may be empty), no residual
    n.inputs[0] = bnr.inputs[0];
    n.inputs.push_back(an);
    n.inputs.push_back(bn);
    dead[i] = true;
    g.nodes[static_cast<size_t>(c)] = std::move(n);
    pc.count("fused_preact_conv");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}


}  // namespace nxrt::optimizer
