#include "optimizer/fusions/fused_activation.h"

#include <cmath>

namespace nxrt::optimizer {

namespace {

struct ParamAttr {
  const char* name;
  float dflt;  // the ai.onnx default
};
struct ActivationOp {
  const char* op;
  std::vector<ParamAttr> params;  // read from the node's float attributes, in `activation_params` order
};

// The one-input activations whose attributes are their parameters (Clip is read apart: its bounds are
// inputs from opset 11).
const std::vector<ActivationOp>& activation_ops() {
  static const std::vector<ActivationOp> kOps = {
      {"Relu", {}},
      {"Sigmoid", {}},
      {"Tanh", {}},
      {"LeakyRelu", {{"alpha", 0.01f}}},
      {"HardSigmoid", {{"alpha", 0.2f}, {"beta", 0.5f}}},
      {"HardSwish", {}},
  };
  return kOps;
}

// Clip's bounds: attributes before opset 11, optional constant scalar inputs from 11.
bool clip_bounds(const Rewriter& rw, const ir::Node& n, std::vector<float>* bounds) {
  float lo = -INFINITY, hi = INFINITY;
  bool ok = true;
  if (rw.opset() < 11) {
    lo = attr_f(n, "min", -3.402823e+38f);
    hi = attr_f(n, "max", 3.402823e+38f);
    ok = n.inputs.size() == 1;
  } else {
    for (size_t k = 1; k < n.inputs.size() && ok; ++k) {
      if (n.inputs[k].empty()) continue;
      double v = 0;
      ok = const_scalar(rw.constant(n.inputs[k]), &v);
      (k == 1 ? lo : hi) = static_cast<float>(v);
    }
  }
  *bounds = {lo, hi};
  return ok;
}

}  // namespace

bool match_fused_activation(const Rewriter& rw, const ir::Node& n, FusedActivation* act) {
  const std::string dom = ir::canonical_domain(n.domain);
  // Gelu in its exact (erf) form: ai.onnx Gelu (opset 20) or the nxrt Gelu fuse_gelu makes of the
  // written-out Div / Erf / Add / Mul / Mul. The tanh approximation has no fused activation.
  if (n.op_type == "Gelu" && (dom.empty() || dom == kNxrtDomain)) {
    if (n.inputs.size() != 1 || attr_s(n, "approximate", "none") != "none") return false;
    *act = {"Gelu", {}};
    return true;
  }
  // nxrt::HardSwish is what fuse_hard_swish made of the ai.onnx pattern.
  if (!dom.empty() && !(dom == kNxrtDomain && n.op_type == "HardSwish")) return false;
  if (n.op_type == "Clip") {
    std::vector<float> bounds;
    if (!clip_bounds(rw, n, &bounds)) return false;
    *act = {n.op_type, std::move(bounds)};
    return true;
  }
  for (const ActivationOp& a : activation_ops()) {
    if (n.op_type != a.op || n.inputs.size() != 1) continue;
    *act = {n.op_type, {}};
    for (const ParamAttr& p : a.params) act->params.push_back(attr_f(n, p.name, p.dflt));
    return true;
  }
  return false;
}

void add_fused_activation_attrs(ir::Node& fused, const FusedActivation& act, int64_t inner_opset) {
  fused.attributes.push_back(make_attr_s("activation", act.name));
  if (!act.params.empty()) fused.attributes.push_back(make_attr_fs("activation_params", act.params));
  fused.attributes.push_back(make_attr_i("inner_opset", inner_opset));
}

}  // namespace nxrt::optimizer
