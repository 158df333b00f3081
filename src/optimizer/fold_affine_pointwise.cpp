// Scalar affine (Mul by a constant scalar and/or Add of a constant scalar) feeding a pointwise Conv
// (1x1 kernel, no padding) is folded into that Conv's weights and bias:
//   Conv(a * x + b, W, B) = Conv(x, a * W, B + b * sum over (c, k) of W[m, c, k])
// which holds only because no padded zero enters a 1x1 window. PP-OCRv4's "learnable affine blocks"
// (HardSwish -> Mul(s) -> Add(t) -> 1x1 Conv) are the pattern; each fold removes two full passes.
#include "optimizer/graph_util.h"
#include "optimizer/optimizer.h"

namespace nxrt::optimizer {

namespace {

// `n` is a two-input node with one input a rank <= 1 single-value constant of dtype `dt`: that value and
// the other input.
bool scalar_operand(GraphInfo& gi, const ir::Node& n, DataType dt, double* v, std::string* other) {
  if (n.inputs.size() != 2 || n.outputs.size() != 1 || n.outputs[0].empty() || n.inputs[0] == n.inputs[1])
    return false;
  for (int s = 0; s < 2; ++s) {
    const Tensor* t = gi.constant(n.inputs[static_cast<size_t>(s)]);
    if (!t || t->rank() > 1 || t->numel() != 1 || t->dtype() != dt) continue;
    if (gi.is_const(n.inputs[static_cast<size_t>(1 - s)])) return false;
    std::vector<double> vals;
    if (!const_values(*t, &vals) || vals.size() != 1) return false;
    *v = vals[0];
    *other = n.inputs[static_cast<size_t>(1 - s)];
    return !other->empty();
  }
  return false;
}

}  // namespace

int fold_affine_into_pointwise_conv(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  if (pc.opset("") < 7) return 0;  // Mul/Add broadcast semantics
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    ir::Node& conv = g.nodes[i];
    if (dead[i] || !is_onnx(&conv, "Conv") || conv.inputs.size() < 2 || conv.outputs.size() != 1) continue;
    const Tensor* w = gi.constant(conv.inputs[1]);
    if (!w || w->rank() < 3 || (w->dtype() != DataType::kFloat && w->dtype() != DataType::kDouble)) continue;
    bool one = true;
    for (int64_t d = 2; d < w->rank(); ++d) one = one && w->dim(d) == 1;
    const std::string ap = attr_s(conv, "auto_pad", "NOTSET");
    bool no_pad = ap == "NOTSET" || ap == "VALID";
    for (int64_t p : attr_ints(conv, "pads")) no_pad = no_pad && p == 0;
    if (!one || !no_pad) continue;
    const bool has_b = conv.inputs.size() > 2 && !conv.inputs[2].empty();
    const Tensor* bias = has_b ? gi.constant(conv.inputs[2]) : nullptr;
    const int64_t M = w->dim(0);
    if (has_b && (!bias || bias->dtype() != w->dtype() || bias->numel() != M)) continue;
    // Walk back: [Mul(a)] then [Add(b)], each read by the next node alone.
    double a = 1.0, b = 0.0;
    std::string x = conv.inputs[0];
    std::vector<int> eaten;
    ir::Node* p = gi.single_use(x) ? gi.producer_of(x) : nullptr;
    std::string other;
    double v;
    if (is_onnx(p, "Add") && !dead[static_cast<size_t>(gi.producer.at(x))] && scalar_operand(gi, *p, w->dtype(), &v, &other)) {
      b = v;
      eaten.push_back(gi.producer.at(x));
      x = other;
      p = gi.single_use(x) ? gi.producer_of(x) : nullptr;
    }
    if (is_onnx(p, "Mul") && !dead[static_cast<size_t>(gi.producer.at(x))] && scalar_operand(gi, *p, w->dtype(), &v, &other)) {
      a = v;  // a * x + b: the Add came after the Mul
      eaten.push_back(gi.producer.at(x));
      x = other;
    }
    if (eaten.empty()) continue;
    std::vector<double> wv, bv;
    if (!const_values(*w, &wv) || (bias && !const_values(*bias, &bv))) continue;
    if (!bias) bv.assign(static_cast<size_t>(M), 0.0);
    const int64_t per = M > 0 ? w->numel() / M : 0;
    for (int64_t m = 0; m < M; ++m) {
      double s = 0;
      for (int64_t j = 0; j < per; ++j) s += wv[static_cast<size_t>(m * per + j)];
      bv[static_cast<size_t>(m)] += b * s;
      for (int64_t j = 0; j < per; ++j) wv[static_cast<size_t>(m * per + j)] *= a;
    }
    Tensor nw, nb;
    if (!make_tensor(w->dtype(), w->shape(), wv, &nw) || !make_tensor(w->dtype(), Dims{M}, bv, &nb)) continue;
    const std::string wn = pc.fresh_name(g, "affine1x1_w"), bn = pc.fresh_name(g, "affine1x1_b");
    g.initializers[wn] = std::move(nw);
    g.initializers[bn] = std::move(nb);
    conv.inputs.resize(3);
    conv.inputs[0] = x;
    conv.inputs[1] = wn;
    conv.inputs[2] = bn;
    for (int e : eaten) dead[static_cast<size_t>(e)] = true;
    ++done;
  }
  if (done) remove_nodes(g, dead);
  pc.count("affine_folded_into_pointwise_conv", done);
  return done;
}

}  // namespace nxrt::optimizer
