// Conv followed by an inference BatchNormalization: the normalization folds into the Conv's weights and
// bias (W'[m] = W[m] * f[m], B'[m] = (B[m] - mean[m]) * f[m] + bias[m], f = scale / sqrt(var + eps)),
// and the Conv takes over the BatchNormalization's output.
#include <cmath>

#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct ConvBn : Match {
  int conv = -1;
  const Tensor* w = nullptr;
  std::vector<double> scale, bias, mean, var, b;  // per output channel
};

bool match(Rewriter& rw, int anchor, ConvBn& m) {
  const ir::Node& bn = rw.node(anchor);
  if (!inference_batch_norm(rw, bn)) return false;
  const ir::Node* conv = rw.sole_producer(bn.inputs[0], "Conv", &m.conv);
  if (!conv || conv->inputs.size() < 2) return false;
  m.w = rw.constant(conv->inputs[1]);
  const bool has_b = conv->inputs.size() > 2 && !conv->inputs[2].empty();
  const Tensor* b = has_b ? rw.constant(conv->inputs[2]) : nullptr;
  if (!m.w || (has_b && !b)) return false;
  if (m.w->dtype() != DataType::kFloat && m.w->dtype() != DataType::kDouble) return false;
  if (m.w->rank() < 3) return false;
  const int64_t M = m.w->dim(0);
  std::vector<double>* params[] = {&m.scale, &m.bias, &m.mean, &m.var};
  for (size_t k = 1; k < 5; ++k) {
    const Tensor* t = rw.constant(bn.inputs[k]);
    if (!t || t->dtype() != m.w->dtype() || t->numel() != M || !const_values(*t, params[k - 1])) return false;
  }
  if (b) {
    if (b->dtype() != m.w->dtype() || b->numel() != M || !const_values(*b, &m.b)) return false;
  } else {
    m.b.assign(static_cast<size_t>(M), 0.0);
  }
  m.nodes = {m.conv, anchor};
  return true;
}

bool build(Rewriter& rw, const ConvBn& m, Rewrite& r) {
  const ir::Node& bn = rw.node(m.anchor);
  const double eps = attr_f(bn, "epsilon", 1e-5f);
  const int64_t M = m.w->dim(0);
  std::vector<double> f(static_cast<size_t>(M)), nb(static_cast<size_t>(M));
  for (size_t c = 0; c < static_cast<size_t>(M); ++c) {
    f[c] = m.scale[c] / std::sqrt(m.var[c] + eps);
    nb[c] = (m.b[c] - m.mean[c]) * f[c] + m.bias[c];
  }
  const std::string wn = scale_output_channels(rw, rw.node(m.conv).inputs[1], *m.w, f, "bnfold_w");
  Tensor nbt;
  if (!make_tensor(m.w->dtype(), Dims{M}, nb, &nbt)) return false;
  ir::Node conv = with_weights(rw.node(m.conv), wn, rw.add_initializer("bnfold_b", std::move(nbt)));
  conv.outputs[0] = bn.outputs[0];
  r.replace(m.conv, std::move(conv));
  return true;
}

const Fusion<ConvBn> kConvBn{
    .stat = "conv_bn_folded", .anchor = {{"BatchNormalization"}}, .match = match, .build = build, .domain = nullptr};

}  // namespace

int fold_conv_bn(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kConvBn); }

}  // namespace nxrt::optimizer
