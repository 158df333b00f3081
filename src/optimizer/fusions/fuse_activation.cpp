// Conv / Gemm / MatMul followed by what their fused kernels apply in place on the result ->
// nxrt::FusedConv(X, W, B?, Z?) / nxrt::FusedGemm(A, B, C?, Z?) / nxrt::FusedMatMul(A, B, bias?, Z?):
//   [bias]        MatMul + a 1-D float constant over the last axis; Gemm without C + a rank <= 1
//                 constant (becomes C with beta 1)
//   [residual]    Add (or two-input Sum) of a non-constant Z
//   [activation]  one of fused_activation.h's
// in that order, at least one of them. The fused node keeps the wrapped op's attributes and adds the
// activation ones (fused_activation.h).
#include "optimizer/fusions/fused_activation.h"
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct Epilogue : Match {
  int last = -1;
  bool conv = false, gemm = false, matmul = false;
  bool gemm_no_c = false;  // a Gemm without C whose bias becomes C
  DataType dtype = DataType::kUndefined;
  std::string cur;        // the value the next step reads (at the end: the fused output)
  std::string bias, z;    // "" when absent
  FusedActivation act;
  // Moves past node `index` (producing `next`), taking it.
  void step(int index, const std::string& next) {
    take(index);
    last = index;
    cur = next;
  }
};

// MatMul + per-column bias; Gemm without C + a rank <= 1 constant.
void match_bias(Rewriter& rw, Epilogue& m) {
  const ir::Node& base = rw.node(m.anchor);
  int idx;
  const ir::Node* add = rw.sole_reader(m.cur, "Add", &idx);
  if ((!m.matmul && !m.gemm_no_c) || !add) return;
  const std::string o = other_input(*add, m.cur);
  const Tensor* t = rw.constant(o);
  // A 1-D bias must not widen the result: MatMul of two 1-D inputs is a scalar, so one operand must be
  // known to have rank >= 2 (a constant weight, or a ranked value).
  bool result_ranked = m.gemm;
  if (m.matmul) {
    const Tensor* bw = rw.constant(base.inputs[1]);
    if (bw && bw->rank() >= 2) result_ranked = true;
    if (!result_ranked) {
      const auto& ranks = rw.ranks();
      auto it = ranks.find(base.inputs[0]);
      result_ranked = it != ranks.end() && it->second >= 2;
    }
  }
  if (t && result_ranked && t->rank() <= 1 && t->numel() >= 1 && is_float_dtype(t->dtype()) &&
      (m.dtype == DataType::kUndefined || m.dtype == t->dtype())) {
    m.dtype = t->dtype();
    m.bias = o;
    m.step(idx, add->outputs[0]);
  }
}

// Residual Add (or a two-input Sum) of a non-constant value.
void match_residual(Rewriter& rw, Epilogue& m) {
  int idx;
  const ir::Node* nx = rw.sole_reader(m.cur, &idx);
  if (!(is_onnx(nx, "Add") || (is_onnx(nx, "Sum") && nx->inputs.size() == 2)) || !single_output(*nx)) return;
  const std::string o = other_input(*nx, m.cur);
  // A constant here is a bias the bias step did not take (wrong rank): leave it to Add.
  if (o.empty() || rw.gi.is_const(o)) return;
  m.z = o;
  m.step(idx, nx->outputs[0]);
}

void match_activation(Rewriter& rw, Epilogue& m) {
  int idx;
  const ir::Node* nx = rw.sole_reader(m.cur, &idx);
  if (!nx || !single_output(*nx) || nx->inputs.empty() || nx->inputs[0] != m.cur) return;
  if (match_fused_activation(rw, *nx, &m.act)) m.step(idx, nx->outputs[0]);
}

bool match(Rewriter& rw, int anchor, Epilogue& m) {
  const ir::Node& base = rw.node(anchor);
  if (!single_output(base)) return false;
  m.conv = base.op_type == "Conv";
  m.gemm = base.op_type == "Gemm";
  m.matmul = base.op_type == "MatMul";
  if (base.inputs.size() < 2 || base.inputs[0].empty() || base.inputs[1].empty()) return false;
  // The element type must be a float type: Gemm/MatMul also take integers.
  if (!m.conv) {
    for (size_t k = 1; k < base.inputs.size(); ++k) {
      if (const Tensor* t = rw.constant(base.inputs[k])) m.dtype = t->dtype();
    }
  }
  m.last = anchor;
  m.cur = base.outputs[0];
  m.gemm_no_c = m.gemm && (base.inputs.size() < 3 || base.inputs[2].empty());
  match_bias(rw, m);
  if (!m.conv && !is_float_dtype(m.dtype)) return false;
  match_residual(rw, m);
  match_activation(rw, m);
  if (m.nodes.empty()) return false;
  m.take(anchor);
  return true;
}

bool build(Rewriter& rw, const Epilogue& m, Rewrite& r) {
  const ir::Node& base = rw.node(m.anchor);
  std::string third = base.inputs.size() > 2 ? base.inputs[2] : "";
  if (m.matmul || (m.gemm_no_c && !m.bias.empty())) third = m.bias;
  std::vector<std::string> inputs = {base.inputs[0], base.inputs[1], third, m.z};
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  ir::Node fused = make_node(base.name.empty() ? rw.node(m.last).name : base.name, kNxrtDomain,
                             m.conv ? "FusedConv" : m.gemm ? "FusedGemm" : "FusedMatMul", std::move(inputs), {m.cur},
                             base.attributes);
  if (m.gemm_no_c && !m.bias.empty()) {
    std::erase_if(fused.attributes, [](const ir::Attribute& a) { return a.name == "beta"; });
    fused.attributes.push_back(make_attr_f("beta", 1.f));
  }
  add_fused_activation_attrs(fused, m.act, rw.opset());
  r.replace(m.last, std::move(fused));
  r.stat = m.conv ? "fused_conv" : m.gemm ? "fused_gemm" : "fused_matmul";
  return true;
}

const Fusion<Epilogue> kEpilogue{
    .stat = "fused_conv", .anchor = {{"Conv", "Gemm", "MatMul"}}, .min_opset = 7, .match = match, .build = build};

}  // namespace

int fuse_activation(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kEpilogue); }

}  // namespace nxrt::optimizer
