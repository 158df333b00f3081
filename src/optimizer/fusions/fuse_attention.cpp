// Scaled dot-product attention written out in ai.onnx ops -> nxrt::FusedAttention(q, kt, v, mask?, scale?):
//   y = MatMul(Softmax([MatMul(q, kt) (* or /) scale] [+ mask]), v)
// with scale a constant scalar; the attributes keep the Softmax's semantics (scale_op: "Mul", "Div" or
// ""; softmax_opset; softmax_axis, any axis: the kernel's fast path needs the last one at run time).
// A Transpose(perm = [0, 2, 1, 3]) that alone reads y (the heads merged back: [B, H, S, Dv] ->
// [B, S, H, Dv], before the Reshape to [B, S, H * Dv]) is taken too (transpose_output = 1): the kernel
// writes each head's rows H * Dv apart, so the Reshape after it is a view, not a gather of the
// transposed view.
#include <cmath>

#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct Attention : Match {
  int last = -1;
  int transpose = -1;  // the merging Transpose taken with it, or -1
  int64_t axis = -1;
  std::string q, kt, mask, scale, scale_op;
};

// Steps from the Softmax's input back over an optional mask Add and an optional scale Mul / Div to the
// first MatMul, taking each node; fills q, kt, mask, scale.
bool match_scores(Rewriter& rw, std::string cur, Attention& m) {
  int ip;
  const ir::Node* p = rw.sole_producer(cur, &ip);
  if (!p) return false;
  m.take(ip);
  if (is_onnx(p, "Add") && p->inputs.size() == 2 && p->inputs[0] != p->inputs[1]) {
    // The scores side is the one made by the scale or the first MatMul.
    int side = -1;
    for (int s = 0; s < 2 && side < 0; ++s) {
      const ir::Node* c = rw.sole_producer(p->inputs[static_cast<size_t>(s)]);
      if (is_onnx(c, "MatMul") || is_onnx(c, "Mul") || is_onnx(c, "Div")) side = s;
    }
    if (side < 0) return false;
    m.mask = p->inputs[static_cast<size_t>(1 - side)];
    cur = p->inputs[static_cast<size_t>(side)];
    p = rw.sole_producer(cur, &ip);
    if (!p) return false;
    m.take(ip);
  }
  if ((is_onnx(p, "Mul") || is_onnx(p, "Div")) && p->inputs.size() == 2) {
    int side = -1;
    for (int s = 0; s < 2; ++s) {
      const std::string& in = p->inputs[static_cast<size_t>(s)];
      const std::string& other = p->inputs[static_cast<size_t>(1 - s)];
      if (rw.sole_producer(in, "MatMul") && const_is_scalar(rw.constant(other), 0, INFINITY)) side = s;
    }
    if (side < 0 || (p->op_type == "Div" && side != 0)) return false;
    m.scale = p->inputs[static_cast<size_t>(1 - side)];
    m.scale_op = p->op_type;
    cur = p->inputs[static_cast<size_t>(side)];
    p = rw.sole_producer(cur, &ip);
    m.take(ip);
  }
  if (!is_onnx(p, "MatMul") || p->inputs.size() != 2) return false;
  m.q = p->inputs[0];
  m.kt = p->inputs[1];
  return true;
}

bool match(Rewriter& rw, int anchor, Attention& m) {
  const ir::Node& sm = rw.node(anchor);
  if (!single_output(sm) || sm.inputs.size() != 1) return false;
  const ir::Attribute* ax = sm.find_attribute("axis");
  m.axis = ax ? ax->i : (rw.opset() >= 13 ? -1 : 1);
  m.take(anchor);
  if (!match_scores(rw, sm.inputs[0], m)) return false;
  const ir::Node* mm2 = rw.sole_reader(sm.outputs[0], "MatMul", &m.last);
  if (!mm2 || mm2->inputs.size() != 2 || mm2->inputs[0] != sm.outputs[0] || mm2->inputs[1] == sm.outputs[0])
    return false;
  m.take(m.last);
  int ti = -1;
  const ir::Node* tr = rw.sole_reader(mm2->outputs[0], "Transpose", &ti);
  const ir::Attribute* perm = tr ? tr->find_attribute("perm") : nullptr;
  if (perm && perm->ints == std::vector<int64_t>{0, 2, 1, 3}) {
    m.transpose = ti;
    m.take(ti);
  }
  return true;
}

bool build(Rewriter& rw, const Attention& m, Rewrite& r) {
  std::vector<std::string> inputs = {m.q, m.kt, rw.node(m.last).inputs[1], m.mask, m.scale};
  while (inputs.back().empty()) inputs.pop_back();
  std::vector<ir::Attribute> attrs = {make_attr_s("scale_op", m.scale_op), make_attr_i("softmax_opset", rw.opset()),
                                      make_attr_i("softmax_axis", m.axis)};
  if (m.transpose >= 0) attrs.push_back(make_attr_i("transpose_output", 1));
  // Written where the last taken node was (the Transpose reads the second MatMul, so every input is
  // produced before it), as that node's output.
  const int last = m.transpose >= 0 ? m.transpose : m.last;
  r.replace(last, rw.fused_node(m.anchor, last, {"Attention", "_attention", "FusedAttention"}, std::move(inputs),
                                std::move(attrs)));
  return true;
}

const Fusion<Attention> kAttention{
    .stat = "fused_attention", .anchor = {{"Softmax"}}, .min_opset = 7, .match = match, .build = build};

}  // namespace

int fuse_attention(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kAttention); }

}  // namespace nxrt::optimizer
