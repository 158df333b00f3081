// Scalar affine (Mul by a constant scalar and/or Add of a constant scalar) feeding a pointwise Conv
// (1x1 kernel, no padding) is folded into that Conv's weights and bias:
//   Conv(a * x + b, W, B) = Conv(x, a * W, B + b * sum over (c, k) of W[m, c, k])
// which holds only because no padded zero enters a 1x1 window. PP-OCRv4's "learnable affine blocks"
// (HardSwish -> Mul(s) -> Add(t) -> 1x1 Conv) are the pattern; each fold removes two full passes.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

// `n` is a two-input node with one input a rank <= 1 single-value constant of dtype `dt`: that value and
// the other input.
bool scalar_operand(const Rewriter& rw, const ir::Node& n, DataType dt, double* v, std::string* other) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0].empty() || n.inputs[0] == n.inputs[1])
    return false;
  for (int s = 0; s < 2; ++s) {
    const Tensor* t = rw.constant(n.inputs[static_cast<size_t>(s)]);
    if (!t || t->rank() > 1 || t->numel() != 1 || t->dtype() != dt) continue;
    if (rw.gi.is_const(n.inputs[static_cast<size_t>(1 - s)])) return false;
    std::vector<double> vals;
    if (!const_values(*t, &vals) || vals.size() != 1) return false;
    *v = vals[0];
    *other = n.inputs[static_cast<size_t>(1 - s)];
    return !other->empty();
  }
  return false;
}

struct PointwiseAffine : Match {
  std::string x;         // the input before the affine
  double a = 1, b = 0;   // a * x + b
  const Tensor* w = nullptr;
  const Tensor* bias = nullptr;
};

bool match(Rewriter& rw, int anchor, PointwiseAffine& m) {
  const ir::Node& conv = rw.node(anchor);
  if (conv.inputs.size() < 2 || conv.outputs.size() != 1) return false;
  m.w = rw.constant(conv.inputs[1]);
  const Tensor* w = m.w;
  if (!w || w->rank() < 3 || (w->dtype() != DataType::kFloat && w->dtype() != DataType::kDouble)) return false;
  bool one = true;
  for (int64_t d = 2; d < w->rank(); ++d) one = one && w->dim(d) == 1;
  const std::string ap = attr_s(conv, "auto_pad", "NOTSET");
  bool no_pad = ap == "NOTSET" || ap == "VALID";
  for (int64_t p : attr_ints(conv, "pads")) no_pad = no_pad && p == 0;
  if (!one || !no_pad) return false;
  const bool has_b = conv.inputs.size() > 2 && !conv.inputs[2].empty();
  m.bias = has_b ? rw.constant(conv.inputs[2]) : nullptr;
  if (has_b && (!m.bias || m.bias->dtype() != w->dtype() || m.bias->numel() != w->dim(0))) return false;
  // Walk back: [Mul(a)] then [Add(b)], each read by the next node alone.
  m.x = conv.inputs[0];
  int p = -1;
  std::string other;
  double v;
  if (rw.sole_producer(m.x, "Add", &p) && scalar_operand(rw, rw.node(p), w->dtype(), &v, &other)) {
    m.b = v;
    m.take(p);
    m.x = other;
  }
  if (rw.sole_producer(m.x, "Mul", &p) && scalar_operand(rw, rw.node(p), w->dtype(), &v, &other)) {
    m.a = v;  // a * x + b: the Add came after the Mul
    m.take(p);
    m.x = other;
  }
  if (m.nodes.empty()) return false;
  m.take(anchor);
  return true;
}

bool build(Rewriter& rw, const PointwiseAffine& m, Rewrite& r) {
  const Tensor* w = m.w;
  const int64_t M = w->dim(0);
  std::vector<double> wv, bv;
  if (!const_values(*w, &wv) || (m.bias && !const_values(*m.bias, &bv))) return false;
  if (!m.bias) bv.assign(static_cast<size_t>(M), 0.0);
  const int64_t per = M > 0 ? w->numel() / M : 0;
  for (int64_t o = 0; o < M; ++o) {
    double s = 0;
    for (int64_t j = 0; j < per; ++j) s += wv[static_cast<size_t>(o * per + j)];
    bv[static_cast<size_t>(o)] += m.b * s;
    for (int64_t j = 0; j < per; ++j) wv[static_cast<size_t>(o * per + j)] *= m.a;
  }
  Tensor nw, nb;
  if (!make_tensor(w->dtype(), w->shape(), wv, &nw) || !make_tensor(w->dtype(), Dims{M}, bv, &nb)) return false;
  const std::string wn = rw.add_initializer("affine1x1_w", std::move(nw));
  ir::Node conv = with_weights(rw.node(m.anchor), wn, rw.add_initializer("affine1x1_b", std::move(nb)));
  conv.inputs[0] = m.x;
  r.replace(m.anchor, std::move(conv));
  return true;
}

const Fusion<PointwiseAffine> kPointwiseAffine{
    .stat = "affine_folded_into_pointwise_conv", .anchor = {{"Conv"}}, .min_opset = 7, .match = match, .build = build,
    .domain = nullptr};

}  // namespace

int fold_affine_into_pointwise_conv(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kPointwiseAffine); }

}  // namespace nxrt::optimizer
