// GELU written out in ai.onnx ops -> nxrt::Gelu(x), attribute approximate:
//   "none": 0.5 * x * (1 + Erf(x / sqrt(2)))                           (or Erf(x * sqrt(0.5)))
//   "tanh": 0.5 * x * (1 + Tanh(sqrt(2 / pi) * (x + 0.044715 * x ^ 3)))
// in any order of the three factors of the tail. Constants must be within 1e-3 (relative) of these.
#include <cmath>

#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct Gelu : Match {
  bool erf = false;
  int last = -1;
  std::string x;
};

bool near(const Rewriter& rw, const std::string& name, double want) {
  double v;
  return const_scalar(rw.constant(name), &v) && std::fabs(v - want) <= 1e-3 * std::fabs(want);
}

// The input of a two-input Mul whose other input is the constant `c` ("" when neither is).
std::string times_constant(const Rewriter& rw, const ir::Node& mul, double c) {
  return near(rw, mul.inputs[1], c) ? mul.inputs[0] : near(rw, mul.inputs[0], c) ? mul.inputs[1] : std::string();
}

// u = x / sqrt(2) or x * sqrt(0.5) (the Erf's input, made by node u): x, else "".
std::string erf_argument(const Rewriter& rw, const ir::Node& u) {
  if (u.op_type == "Div" && near(rw, u.inputs[1], std::sqrt(2.0))) return u.inputs[0];
  if (u.op_type == "Mul" && near(rw, u.inputs[1], std::sqrt(0.5))) return u.inputs[0];
  if (u.op_type == "Mul" && near(rw, u.inputs[0], std::sqrt(0.5))) return u.inputs[1];
  return {};
}

// u = sqrt(2 / pi) * (x + 0.044715 * x ^ 3) (the Tanh's input, made by node u): x, else "". Takes
// the Add, the Mul by 0.044715 and the Pow.
std::string tanh_argument(Rewriter& rw, const ir::Node& u, Gelu& m) {
  if (u.op_type != "Mul") return {};
  const std::string w = times_constant(rw, u, std::sqrt(2.0 / M_PI));
  int ia;
  const ir::Node* a = w.empty() ? nullptr : rw.sole_producer(w, "Add", &ia);
  if (!a || a->inputs.size() != 2) return {};
  m.take(ia);
  for (size_t s = 0; s < 2; ++s) {
    const std::string& x = a->inputs[s];
    int iq, ic;
    const ir::Node* qm = rw.sole_producer(a->inputs[1 - s], "Mul", &iq);
    if (!qm || qm->inputs.size() != 2) continue;
    const std::string cube = times_constant(rw, *qm, 0.044715);
    const ir::Node* p3 = cube.empty() ? nullptr : rw.sole_producer(cube, "Pow", &ic);
    if (!p3 || p3->inputs.size() != 2 || p3->inputs[0] != x || !const_is_scalar(rw.constant(p3->inputs[1]), 3.0))
      continue;
    m.take(iq);
    m.take(ic);
    return x;
  }
  return {};
}

// The tail from a = 1 + erf/tanh(...): 0.5 * x * a in one of three orders. Takes its nodes; returns
// the last one's index, or -1.
int gelu_tail(Rewriter& rw, const std::string& a, const std::string& x, Gelu& m) {
  int i1 = -1, i2 = -1;
  const ir::Node* m1 = rw.sole_reader(a, "Mul", &i1);
  if (!m1) return -1;
  const std::string other = other_input(*m1, a);
  if (other.empty()) return -1;
  const double tol = 1e-4;
  if (other == x) {  // Mul(x, a) -> Mul(., 0.5)
    const ir::Node* m2 = rw.sole_reader(m1->outputs[0], "Mul", &i2);
    if (!m2 || !const_is_scalar(rw.constant(other_input(*m2, m1->outputs[0])), 0.5, tol)) return -1;
    m.nodes.insert(m.nodes.end(), {i1, i2});
    return i2;
  }
  if (const_is_scalar(rw.constant(other), 0.5, tol)) {  // Mul(a, 0.5) -> Mul(x, .)
    const ir::Node* m2 = rw.sole_reader(m1->outputs[0], "Mul", &i2);
    if (!m2 || other_input(*m2, m1->outputs[0]) != x) return -1;
    m.nodes.insert(m.nodes.end(), {i1, i2});
    return i2;
  }
  // Mul(h, a) with h = Mul(x, 0.5) read only here.
  int ih;
  const ir::Node* h = rw.sole_producer(other, "Mul", &ih);
  if (!h || h->inputs.size() != 2) return -1;
  const std::string hx = h->inputs[0] == x ? h->inputs[1] : h->inputs[1] == x ? h->inputs[0] : std::string();
  if (hx.empty() || !const_is_scalar(rw.constant(hx), 0.5, tol)) return -1;
  m.nodes.insert(m.nodes.end(), {ih, i1});
  return i1;
}

bool match(Rewriter& rw, int anchor, Gelu& m) {
  const ir::Node& e = rw.node(anchor);
  if (!single_output(e) || e.inputs.size() != 1) return false;
  m.erf = e.op_type == "Erf";
  m.take(anchor);
  int iu;
  const ir::Node* u = rw.sole_producer(e.inputs[0], &iu);
  if (!u || !ir::canonical_domain(u->domain).empty() || u->inputs.size() != 2) return false;
  m.take(iu);
  m.x = m.erf ? erf_argument(rw, *u) : tanh_argument(rw, *u, m);
  if (m.x.empty()) return false;
  int iadd;
  const ir::Node* one = rw.sole_reader(e.outputs[0], "Add", &iadd);
  if (!one || !near(rw, other_input(*one, e.outputs[0]), 1.0)) return false;
  m.take(iadd);
  m.last = gelu_tail(rw, one->outputs[0], m.x, m);
  return m.last >= 0;
}

bool build(Rewriter& rw, const Gelu& m, Rewrite& r) {
  r.replace(m.last, rw.fused_node(m.anchor, m.last, {"Gelu", "_gelu", "Gelu"}, {m.x},
                                  {make_attr_s("approximate", m.erf ? "none" : "tanh")}));
  return true;
}

const Fusion<Gelu> kGelu{
    .stat = "fused_gelu", .anchor = {{"Erf", "Tanh"}}, .min_opset = 7, .match = match, .build = build};

}  // namespace

int fuse_gelu(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kGelu); }

}  // namespace nxrt::optimizer
