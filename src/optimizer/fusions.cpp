// Level-all passes: Conv+BatchNormalization folding and pattern fusions into the nxrt domain.
//
// Every matcher checks, for each intermediate value it swallows, that exactly one node reads it and
// that it is neither a graph output nor read by a subgraph; constants must be initializers that the
// caller cannot override. The fused node takes the place of the pattern's last node (so every input it
// reads is already computed there) and keeps that node's output name.
#include <algorithm>
#include <cmath>

#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

// For a two-input node with one input `name`, the other input ("" when `name` is not an input or both
// inputs are `name`).
std::string other_input(const ir::Node& n, const std::string& name) {
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return {};
  if (n.inputs[0] == name) return n.inputs[1];
  if (n.inputs[1] == name) return n.inputs[0];
  return {};
}

bool is_float_dtype(DataType d) {
  return d == DataType::kFloat || d == DataType::kDouble || d == DataType::kFloat16 || d == DataType::kBFloat16;
}

// ReduceMean axes (attribute before opset 18, constant input from 18) when they are the last k axes
// written negatively and keepdims is 1; returns k or 0.
int reduce_last_axes(PassContext& pc, GraphInfo& gi, const ir::Node& r) {
  if (attr_i(r, "keepdims", 1) != 1) return 0;
  std::vector<int64_t> axes;
  if (pc.opset("") >= 18) {
    if (r.inputs.size() < 2 || r.inputs[1].empty()) return 0;
    std::vector<double> v;
    const Tensor* t = gi.constant(r.inputs[1]);
    if (!t || !const_values(*t, &v)) return 0;
    for (double d : v) axes.push_back(static_cast<int64_t>(d));
  } else {
    if (r.inputs.size() != 1) return 0;
    axes = attr_ints(r, "axes");
  }
  if (axes.empty()) return 0;
  std::sort(axes.begin(), axes.end());
  const int k = static_cast<int>(axes.size());
  for (int i = 0; i < k; ++i) {
    if (axes[static_cast<size_t>(i)] != -k + i) return 0;
  }
  return k;
}

// A Scale/Bias constant for a normalization over the last k axes: leading size-1 axes removed, rank
// <= k (so broadcasting it never widened the output). Returns the value name to use ("" = refuse).
std::string norm_param(PassContext& pc, GraphInfo& gi, const std::string& name, int k, DataType* dtype) {
  const Tensor* t = gi.constant(name);
  if (!t || !is_float_dtype(t->dtype())) return {};
  if (*dtype != DataType::kUndefined && *dtype != t->dtype()) return {};
  *dtype = t->dtype();
  Dims s = t->shape();
  size_t lead = 0;
  while (lead < s.size() && s[lead] == 1 && s.size() - lead > 1) ++lead;
  if (s.size() - lead > static_cast<size_t>(k)) return {};
  if (s.empty()) return {};
  if (lead == 0) return name;
  std::string n = pc.fresh_name(gi.g, "param");
  gi.g.initializers[n] = t->reshaped(Dims(s.begin() + static_cast<int64_t>(lead), s.end()));
  return n;
}

// GELU tail: from a = (1 + erf/tanh(...)) find 0.5 * x * a. Returns the final node index or -1 and
// appends swallowed node indices to `nodes`.
int gelu_tail(GraphInfo& gi, const std::vector<bool>& dead, const std::string& a, const std::string& x,
              std::vector<int>* nodes) {
  int i1 = -1, i2 = -1;
  ir::Node* m1 = sole_reader(gi, dead, a, &i1);
  if (!is_onnx(m1, "Mul") || !single_output(*m1)) return -1;
  const std::string other = other_input(*m1, a);
  if (other.empty()) return -1;
  const double tol = 1e-4;
  if (other == x) {  // Mul(x, a) -> Mul(., 0.5)
    ir::Node* m2 = sole_reader(gi, dead, m1->outputs[0], &i2);
    if (!is_onnx(m2, "Mul") || !single_output(*m2)) return -1;
    if (!const_is_scalar(gi.constant(other_input(*m2, m1->outputs[0])), 0.5, tol)) return -1;
    nodes->push_back(i1);
    nodes->push_back(i2);
    return i2;
  }
  if (const_is_scalar(gi.constant(other), 0.5, tol)) {  // Mul(a, 0.5) -> Mul(x, .)
    ir::Node* m2 = sole_reader(gi, dead, m1->outputs[0], &i2);
    if (!is_onnx(m2, "Mul") || !single_output(*m2) || other_input(*m2, m1->outputs[0]) != x) return -1;
    nodes->push_back(i1);
    nodes->push_back(i2);
    return i2;
  }
  // Mul(h, a) with h = Mul(x, 0.5) read only here.
  ir::Node* h = gi.producer_of(other);
  if (!is_onnx(h, "Mul") || !single_output(*h) || !gi.single_use(other)) return -1;
  const std::string hx = h->inputs.size() == 2 && h->inputs[0] == x ? h->inputs[1]
                         : h->inputs.size() == 2 && h->inputs[1] == x ? h->inputs[0]
                                                                      : std::string();
  if (hx.empty() || !const_is_scalar(gi.constant(hx), 0.5, tol)) return -1;
  int hi = gi.producer.at(other);
  if (dead[static_cast<size_t>(hi)]) return -1;
  nodes->push_back(hi);
  nodes->push_back(i1);
  return i1;
}

void replace_with(GraphInfo& gi, std::vector<bool>& dead, const std::vector<int>& nodes, int last, ir::Node fused) {
  for (int i : nodes) dead[static_cast<size_t>(i)] = true;
  dead[static_cast<size_t>(last)] = false;
  gi.g.nodes[static_cast<size_t>(last)] = std::move(fused);
}

}  // namespace

int fuse_activation(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  std::vector<bool> dead(g.nodes.size(), false);
  const int64_t opset = pc.opset("");
  if (opset < 7) return 0;
  int done = 0;
  std::unordered_map<std::string, int64_t> ranks;
  bool ranks_done = false;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& base = g.nodes[i];
    if (dead[i] || !ir::canonical_domain(base.domain).empty() || !single_output(base)) continue;
    const bool conv = base.op_type == "Conv", gemm = base.op_type == "Gemm", matmul = base.op_type == "MatMul";
    if (!conv && !gemm && !matmul) continue;
    if (base.inputs.size() < 2 || base.inputs[0].empty() || base.inputs[1].empty()) continue;
    // The element type must be a float type: Gemm/MatMul also take integers.
    DataType dt = DataType::kUndefined;
    if (!conv) {
      for (size_t k = 1; k < base.inputs.size(); ++k) {
        if (const Tensor* t = gi.constant(base.inputs[k])) dt = t->dtype();
      }
    }
    std::vector<int> nodes;
    std::string cur = base.outputs[0], bias, z, act;
    std::vector<float> act_params;
    int last = static_cast<int>(i);
    int idx = -1;
    ir::Node* nx = sole_reader(gi, dead, cur, &idx);
    // MatMul + per-column bias; Gemm without C + a rank <= 1 constant (becomes C with beta 1).
    const bool gemm_no_c = gemm && (base.inputs.size() < 3 || base.inputs[2].empty());
    if ((matmul || gemm_no_c) && is_onnx(nx, "Add") && single_output(*nx)) {
      const std::string o = other_input(*nx, cur);
      const Tensor* t = gi.constant(o);
      // A 1-D bias must not widen the result: MatMul of two 1-D inputs is a scalar, so one operand
      // must be known to have rank >= 2 (a constant weight, or a ranked value).
      bool result_ranked = gemm;
      if (matmul) {
        const Tensor* bw = gi.constant(base.inputs[1]);
        if (bw && bw->rank() >= 2) result_ranked = true;
        if (!result_ranked) {
          if (!ranks_done) ranks = infer_ranks(gi), ranks_done = true;
          auto it = ranks.find(base.inputs[0]);
          result_ranked = it != ranks.end() && it->second >= 2;
        }
      }
      if (t && result_ranked && t->rank() <= 1 && t->numel() >= 1 && is_float_dtype(t->dtype()) &&
          (dt == DataType::kUndefined || dt == t->dtype())) {
        dt = t->dtype();
        bias = o;
        nodes.push_back(idx);
        last = idx;
        cur = nx->outputs[0];
        nx = sole_reader(gi, dead, cur, &idx);
      }
    }
    if (!conv && !is_float_dtype(dt)) continue;
    // Residual Add (or a two-input Sum).
    if ((is_onnx(nx, "Add") || (is_onnx(nx, "Sum") && nx->inputs.size() == 2)) && single_output(*nx)) {
      const std::string o = other_input(*nx, cur);
      // A constant here is a bias the bias step did not take (wrong rank): leave it to Add.
      if (!o.empty() && !gi.is_const(o)) {
        z = o;
        nodes.push_back(idx);
        last = idx;
        cur = nx->outputs[0];
        nx = sole_reader(gi, dead, cur, &idx);
      }
    }
    // Activation.
    if (nx && (ir::canonical_domain(nx->domain).empty() ||
               (nx->domain == kNxrtDomain && nx->op_type == "HardSwish")) &&
        single_output(*nx) && !nx->inputs.empty() && nx->inputs[0] == cur) {
      const std::string& op = nx->op_type;
      bool ok = false;
      if ((op == "Relu" || op == "Sigmoid" || op == "Tanh") && nx->inputs.size() == 1) {
        ok = true;
      } else if (op == "LeakyRelu" && nx->inputs.size() == 1) {
        act_params = {attr_f(*nx, "alpha", 0.01f)};
        ok = true;
      } else if (op == "HardSigmoid" && nx->inputs.size() == 1) {
        act_params = {attr_f(*nx, "alpha", 0.2f), attr_f(*nx, "beta", 0.5f)};
        ok = true;
      } else if (op == "HardSwish" && nx->inputs.size() == 1) {
        ok = true;
      } else if (op == "Clip") {
        float lo = -INFINITY, hi = INFINITY;
        ok = true;
        if (opset < 11) {
          lo = attr_f(*nx, "min", -3.402823e+38f);
          hi = attr_f(*nx, "max", 3.402823e+38f);
          ok = nx->inputs.size() == 1;
        } else {
          for (size_t k = 1; k < nx->inputs.size() && ok; ++k) {
            if (nx->inputs[k].empty()) continue;
            double v;
            ok = const_scalar(gi.constant(nx->inputs[k]), &v);
            (k == 1 ? lo : hi) = static_cast<float>(v);
          }
        }
        act_params = {lo, hi};
      }
      if (ok) {
        act = op;
        nodes.push_back(idx);
        last = idx;
        cur = nx->outputs[0];
      }
    }
    if (nodes.empty()) continue;
    if (conv && !z.empty() && act.empty() && bias.empty()) {
      // Conv + Add alone still saves a pass; keep it.
    }
    ir::Node fused;
    fused.name = base.name.empty() ? g.nodes[static_cast<size_t>(last)].name : base.name;
    fused.domain = kNxrtDomain;
    fused.op_type = conv ? "FusedConv" : gemm ? "FusedGemm" : "FusedMatMul";
    std::string third = base.inputs.size() > 2 ? base.inputs[2] : "";
    if (matmul || (gemm_no_c && !bias.empty())) third = bias;
    fused.inputs = {base.inputs[0], base.inputs[1], third, z};
    while (!fused.inputs.empty() && fused.inputs.back().empty()) fused.inputs.pop_back();
    fused.outputs = {cur};
    fused.attributes = base.attributes;
    if (gemm_no_c && !bias.empty()) {
      std::erase_if(fused.attributes, [](const ir::Attribute& a) { return a.name == "beta"; });
      fused.attributes.push_back(make_attr_f("beta", 1.f));
    }
    fused.attributes.push_back(make_attr_s("activation", act));
    if (!act_params.empty()) fused.attributes.push_back(make_attr_fs("activation_params", act_params));
    fused.attributes.push_back(make_attr_i("inner_opset", opset));
    nodes.push_back(static_cast<int>(i));
    replace_with(gi, dead, nodes, last, std::move(fused));
    pc.count(conv ? "fused_conv" : gemm ? "fused_gemm" : "fused_matmul");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

int fuse_layer_norm(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  if (pc.opset("") < 7) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& r1 = g.nodes[i];
    if (dead[i] || !is_onnx(&r1, "ReduceMean") || !single_output(r1) || r1.inputs.empty()) continue;
    const int k = reduce_last_axes(pc, gi, r1);
    if (k == 0) continue;
    const std::string x = r1.inputs[0], m = r1.outputs[0];
    int isub, ipow, ir2, iadd, isqrt, idiv, imul = -1, ibias = -1;
    ir::Node* sub = sole_reader(gi, dead, m, &isub);
    if (!is_onnx(sub, "Sub") || !single_output(*sub) || sub->inputs.size() != 2 || sub->inputs[0] != x ||
        sub->inputs[1] != m)
      continue;
    const std::string d = sub->outputs[0];
    if (gi.protected_names.count(d) || gi.num_uses(d) != 2) continue;
    ir::Node* pw = nullptr;
    ir::Node* dv = nullptr;
    for (int c : gi.consumers.at(d)) {
      ir::Node* n = &g.nodes[static_cast<size_t>(c)];
      if (dead[static_cast<size_t>(c)]) continue;
      if (is_onnx(n, "Pow") && n->inputs.size() == 2 && n->inputs[0] == d) pw = n, ipow = c;
      if (is_onnx(n, "Div") && n->inputs.size() == 2 && n->inputs[0] == d) dv = n, idiv = c;
    }
    if (!pw || !dv || !single_output(*pw) || !single_output(*dv)) continue;
    if (!const_is_scalar(gi.constant(pw->inputs[1]), 2.0)) continue;
    ir::Node* r2 = sole_reader(gi, dead, pw->outputs[0], &ir2);
    if (!is_onnx(r2, "ReduceMean") || !single_output(*r2) || reduce_last_axes(pc, gi, *r2) != k) continue;
    ir::Node* add = sole_reader(gi, dead, r2->outputs[0], &iadd);
    if (!is_onnx(add, "Add") || !single_output(*add)) continue;
    double eps;
    if (!const_scalar(gi.constant(other_input(*add, r2->outputs[0])), &eps)) continue;
    ir::Node* sq = sole_reader(gi, dead, add->outputs[0], &isqrt);
    if (!is_onnx(sq, "Sqrt") || !single_output(*sq)) continue;
    if (!gi.single_use(sq->outputs[0]) || dv->inputs[1] != sq->outputs[0]) continue;
    ir::Node* mul = sole_reader(gi, dead, dv->outputs[0], &imul);
    if (!is_onnx(mul, "Mul") || !single_output(*mul)) continue;
    DataType dt = DataType::kUndefined;
    const std::string scale = norm_param(pc, gi, other_input(*mul, dv->outputs[0]), k, &dt);
    if (scale.empty()) continue;
    std::string bias, out = mul->outputs[0];
    int last = imul;
    ir::Node* ba = sole_reader(gi, dead, out, &ibias);
    if (is_onnx(ba, "Add") && single_output(*ba)) {
      bias = norm_param(pc, gi, other_input(*ba, out), k, &dt);
      if (!bias.empty()) {
        out = ba->outputs[0];
        last = ibias;
      }
    }
    ir::Node fused;
    fused.name = r1.name.empty() ? "LayerNorm_" + std::to_string(done) : r1.name + "_layernorm";
    fused.domain = kNxrtDomain;
    fused.op_type = "LayerNormalization";
    fused.inputs = {x, scale};
    if (!bias.empty()) fused.inputs.push_back(bias);
    fused.outputs = {out};
    fused.attributes = {make_attr_i("axis", -k), make_attr_f("epsilon", static_cast<float>(eps)),
                        make_attr_i("stash_type", dt == DataType::kDouble ? 11 : 1)};
    std::vector<int> nodes = {static_cast<int>(i), isub, ipow, ir2, iadd, isqrt, idiv, imul};
    if (last == ibias) nodes.push_back(ibias);
    replace_with(gi, dead, nodes, last, std::move(fused));
    pc.count("fused_layer_norm");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

int fuse_rms_norm(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  if (pc.opset("") < 7) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& pw = g.nodes[i];
    if (dead[i] || !is_onnx(&pw, "Pow") || !single_output(pw) || pw.inputs.size() != 2) continue;
    if (!const_is_scalar(gi.constant(pw.inputs[1]), 2.0)) continue;
    const std::string x = pw.inputs[0];
    int ir1, iadd, isqrt, inorm, irecip = -1, imul;
    ir::Node* r = sole_reader(gi, dead, pw.outputs[0], &ir1);
    if (!is_onnx(r, "ReduceMean") || !single_output(*r)) continue;
    const int k = reduce_last_axes(pc, gi, *r);
    if (k == 0) continue;
    ir::Node* add = sole_reader(gi, dead, r->outputs[0], &iadd);
    if (!is_onnx(add, "Add") || !single_output(*add)) continue;
    double eps;
    if (!const_scalar(gi.constant(other_input(*add, r->outputs[0])), &eps)) continue;
    ir::Node* sq = sole_reader(gi, dead, add->outputs[0], &isqrt);
    if (!is_onnx(sq, "Sqrt") || !single_output(*sq)) continue;
    ir::Node* nx = sole_reader(gi, dead, sq->outputs[0], &inorm);
    if (!nx || !single_output(*nx)) continue;
    if (is_onnx(nx, "Div")) {
      if (nx->inputs.size() != 2 || nx->inputs[0] != x || nx->inputs[1] != sq->outputs[0]) continue;
    } else if (is_onnx(nx, "Reciprocal")) {
      irecip = inorm;
      nx = sole_reader(gi, dead, nx->outputs[0], &inorm);
      if (!is_onnx(nx, "Mul") || !single_output(*nx) || other_input(*nx, g.nodes[static_cast<size_t>(irecip)].outputs[0]) != x)
        continue;
    } else {
      continue;
    }
    ir::Node* mul = sole_reader(gi, dead, nx->outputs[0], &imul);
    if (!is_onnx(mul, "Mul") || !single_output(*mul)) continue;
    DataType dt = DataType::kUndefined;
    const std::string scale = norm_param(pc, gi, other_input(*mul, nx->outputs[0]), k, &dt);
    if (scale.empty()) continue;
    ir::Node fused;
    fused.name = pw.name.empty() ? "RMSNorm_" + std::to_string(done) : pw.name + "_rmsnorm";
    fused.domain = kNxrtDomain;
    fused.op_type = "RMSNormalization";
    fused.inputs = {x, scale};
    fused.outputs = {mul->outputs[0]};
    fused.attributes = {make_attr_i("axis", -k), make_attr_f("epsilon", static_cast<float>(eps)),
                        make_attr_i("stash_type", dt == DataType::kDouble ? 11 : 1)};
    std::vector<int> nodes = {static_cast<int>(i), ir1, iadd, isqrt, inorm, imul};
    if (irecip >= 0) nodes.push_back(irecip);
    replace_with(gi, dead, nodes, imul, std::move(fused));
    pc.count("fused_rms_norm");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

int fuse_gelu(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  if (pc.opset("") < 7) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  const double rel = 1e-3;
  auto near = [&](const std::string& name, double want) {
    double v;
    return const_scalar(gi.constant(name), &v) && std::fabs(v - want) <= rel * std::fabs(want);
  };
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& e = g.nodes[i];
    if (dead[i] || !single_output(e) || e.inputs.size() != 1) continue;
    const bool erf = is_onnx(&e, "Erf"), tanh = is_onnx(&e, "Tanh");
    if (!erf && !tanh) continue;
    std::vector<int> nodes = {static_cast<int>(i)};
    std::string x;
    auto swallow = [&](const std::string& v) -> ir::Node* {  // producer of v when v is read only here
      ir::Node* p = gi.producer_of(v);
      if (!p || !single_output(*p) || !gi.single_use(v) || dead[static_cast<size_t>(gi.producer.at(v))]) return nullptr;
      nodes.push_back(gi.producer.at(v));
      return p;
    };
    ir::Node* u = swallow(e.inputs[0]);
    if (!u || !ir::canonical_domain(u->domain).empty() || u->inputs.size() != 2) continue;
    if (erf) {
      if (u->op_type == "Div" && near(u->inputs[1], std::sqrt(2.0))) x = u->inputs[0];
      else if (u->op_type == "Mul" && near(u->inputs[1], std::sqrt(0.5))) x = u->inputs[0];
      else if (u->op_type == "Mul" && near(u->inputs[0], std::sqrt(0.5))) x = u->inputs[1];
      else continue;
    } else {
      // Mul(Add(x, Mul(Pow(x, 3), 0.044715)), sqrt(2/pi))
      if (u->op_type != "Mul") continue;
      const double c = std::sqrt(2.0 / M_PI);
      std::string w = near(u->inputs[1], c) ? u->inputs[0] : near(u->inputs[0], c) ? u->inputs[1] : std::string();
      if (w.empty()) continue;
      ir::Node* a = swallow(w);
      if (!is_onnx(a, "Add") || a->inputs.size() != 2) continue;
      bool found = false;
      for (int s = 0; s < 2 && !found; ++s) {
        const std::string cand_x = a->inputs[static_cast<size_t>(s)], q = a->inputs[static_cast<size_t>(1 - s)];
        ir::Node* qm = gi.producer_of(q);
        if (!is_onnx(qm, "Mul") || !single_output(*qm) || !gi.single_use(q) || qm->inputs.size() != 2) continue;
        std::string cube = near(qm->inputs[1], 0.044715) ? qm->inputs[0]
                           : near(qm->inputs[0], 0.044715) ? qm->inputs[1]
                                                            : std::string();
        ir::Node* p3 = cube.empty() ? nullptr : gi.producer_of(cube);
        if (!is_onnx(p3, "Pow") || !single_output(*p3) || !gi.single_use(cube) || p3->inputs.size() != 2 ||
            p3->inputs[0] != cand_x || !const_is_scalar(gi.constant(p3->inputs[1]), 3.0))
          continue;
        nodes.push_back(gi.producer.at(q));
        nodes.push_back(gi.producer.at(cube));
        x = cand_x;
        found = true;
      }
      if (!found) continue;
    }
    int iadd;
    ir::Node* one = sole_reader(gi, dead, e.outputs[0], &iadd);
    if (!is_onnx(one, "Add") || !single_output(*one) || !near(other_input(*one, e.outputs[0]), 1.0)) continue;
    nodes.push_back(iadd);
    const int last = gelu_tail(gi, dead, one->outputs[0], x, &nodes);
    if (last < 0) continue;
    bool clash = false;
    for (int n : nodes) clash |= dead[static_cast<size_t>(n)];
    if (clash) continue;
    ir::Node fused;
    fused.name = e.name.empty() ? "Gelu_" + std::to_string(done) : e.name + "_gelu";
    fused.domain = kNxrtDomain;
    fused.op_type = "Gelu";
    fused.inputs = {x};
    fused.outputs = {g.nodes[static_cast<size_t>(last)].outputs[0]};
    fused.attributes = {make_attr_s("approximate", erf ? "none" : "tanh")};
    replace_with(gi, dead, nodes, last, std::move(fused));
    pc.count("fused_gelu");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

int fuse_attention(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  const int64_t opset = pc.opset("");
  if (opset < 7) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& sm = g.nodes[i];
    if (dead[i] || !is_onnx(&sm, "Softmax") || !single_output(sm) || sm.inputs.size() != 1) continue;
    // Any axis: the kernel takes its fast path only when it is the last one at run time.
    const ir::Attribute* ax = sm.find_attribute("axis");
    const int64_t axis = ax ? ax->i : (opset >= 13 ? -1 : 1);
    std::vector<int> nodes = {static_cast<int>(i)};
    auto take = [&](const std::string& v) -> ir::Node* {  // the producer of v when only the pattern reads v
      ir::Node* p = gi.producer_of(v);
      if (!p || !single_output(*p) || !gi.single_use(v) || dead[static_cast<size_t>(gi.producer.at(v))]) return nullptr;
      return p;
    };
    std::string cur = sm.inputs[0], mask, scale, scale_op;
    ir::Node* p = take(cur);
    if (!p) continue;
    nodes.push_back(gi.producer.at(cur));
    if (is_onnx(p, "Add") && p->inputs.size() == 2 && p->inputs[0] != p->inputs[1]) {
      // The scores side is the one made by the scale or the first MatMul.
      int side = -1;
      for (int s = 0; s < 2 && side < 0; ++s) {
        ir::Node* c = take(p->inputs[static_cast<size_t>(s)]);
        if (is_onnx(c, "MatMul") || is_onnx(c, "Mul") || is_onnx(c, "Div")) side = s;
      }
      if (side < 0) continue;
      mask = p->inputs[static_cast<size_t>(1 - side)];
      cur = p->inputs[static_cast<size_t>(side)];
      p = take(cur);
      if (!p) continue;
      nodes.push_back(gi.producer.at(cur));
    }
    if ((is_onnx(p, "Mul") || is_onnx(p, "Div")) && p->inputs.size() == 2) {
      int side = -1;
      for (int s = 0; s < 2; ++s) {
        const std::string& in = p->inputs[static_cast<size_t>(s)];
        const std::string& other = p->inputs[static_cast<size_t>(1 - s)];
        if (is_onnx(take(in), "MatMul") && const_is_scalar(gi.constant(other), 0, INFINITY)) side = s;
      }
      if (side < 0 || (p->op_type == "Div" && side != 0)) continue;
      scale = p->inputs[static_cast<size_t>(1 - side)];
      scale_op = p->op_type;
      cur = p->inputs[static_cast<size_t>(side)];
      p = take(cur);
      nodes.push_back(gi.producer.at(cur));
    }
    if (!is_onnx(p, "MatMul") || p->inputs.size() != 2) continue;
    const std::string q = p->inputs[0], kt = p->inputs[1];
    int i2;
    ir::Node* mm2 = sole_reader(gi, dead, sm.outputs[0], &i2);
    if (!is_onnx(mm2, "MatMul") || !single_output(*mm2) || mm2->inputs.size() != 2 || mm2->inputs[0] != sm.outputs[0] ||
        mm2->inputs[1] == sm.outputs[0])
      continue;
    nodes.push_back(i2);
    bool clash = false;
    for (int n : nodes) clash |= dead[static_cast<size_t>(n)];
    if (clash) continue;
    ir::Node fused;
    fused.name = sm.name.empty() ? "Attention_" + std::to_string(done) : sm.name + "_attention";
    fused.domain = kNxrtDomain;
    fused.op_type = "FusedAttention";
    fused.inputs = {q, kt, mm2->inputs[1], mask, scale};
    while (fused.inputs.back().empty()) fused.inputs.pop_back();
    fused.outputs = {mm2->outputs[0]};
    fused.attributes = {make_attr_s("scale_op", scale_op), make_attr_i("softmax_opset", opset),
                        make_attr_i("softmax_axis", axis)};
    replace_with(gi, dead, nodes, i2, std::move(fused));
    pc.count("fused_attention");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

int fuse_hard_swish(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  const int64_t opset = pc.opset("");
  if (opset < 7) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& add = g.nodes[i];
    if (dead[i] || !is_onnx(&add, "Add") || !single_output(add) || add.inputs.size() != 2) continue;
    // x * Clip(x + 3, 0, 6) / 6   (or * (1/6))
    std::string x;
    for (int s = 0; s < 2; ++s) {
      if (const_is_scalar(gi.constant(add.inputs[static_cast<size_t>(1 - s)]), 3.0, 1e-6))
        x = add.inputs[static_cast<size_t>(s)];
    }
    if (x.empty() || gi.is_const(x)) continue;
    int ic, im, id;
    ir::Node* clip = sole_reader(gi, dead, add.outputs[0], &ic);
    if (!is_onnx(clip, "Clip") || !single_output(*clip) || clip->inputs.empty() || clip->inputs[0] != add.outputs[0])
      continue;
    if (opset < 11) {  // bounds are attributes
      if (clip->inputs.size() != 1 || attr_f(*clip, "min", -1) != 0.f || attr_f(*clip, "max", -1) != 6.f) continue;
    } else if (clip->inputs.size() != 3 || !const_is_scalar(gi.constant(clip->inputs[1]), 0.0) ||
               !const_is_scalar(gi.constant(clip->inputs[2]), 6.0)) {
      continue;
    }
    ir::Node* mul = sole_reader(gi, dead, clip->outputs[0], &im);
    if (!is_onnx(mul, "Mul") || !single_output(*mul) || other_input(*mul, clip->outputs[0]) != x) continue;
    ir::Node* last = sole_reader(gi, dead, mul->outputs[0], &id);
    if (!last || !single_output(*last) || last->inputs.size() != 2) continue;
    if (is_onnx(last, "Div")) {
      if (last->inputs[0] != mul->outputs[0] || !const_is_scalar(gi.constant(last->inputs[1]), 6.0, 1e-6)) continue;
    } else if (is_onnx(last, "Mul")) {
      if (!const_is_scalar(gi.constant(other_input(*last, mul->outputs[0])), 1.0 / 6.0, 1e-6)) continue;
    } else {
      continue;
    }
    ir::Node fused;
    fused.name = add.name.empty() ? "HardSwish_" + std::to_string(done) : add.name + "_hardswish";
    fused.domain = kNxrtDomain;
    fused.op_type = "HardSwish";
    fused.inputs = {x};
    fused.outputs = {last->outputs[0]};
    replace_with(gi, dead, {static_cast<int>(i), ic, im, id}, id, std::move(fused));
    pc.count("fused_hard_swish");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

// x * Sigmoid(x) (SiLU, the gate of SwiGLU MLPs) -> nxrt::Swish(x, alpha = 1): one pass over x instead
// of a Sigmoid pass and a Mul pass, and one intermediate fewer.
int fuse_silu(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  if (pc.opset("") < 6) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& sig = g.nodes[i];
    if (dead[i] || !is_onnx(&sig, "Sigmoid") || !single_output(sig) || sig.inputs.size() != 1) continue;
    const std::string x = sig.inputs[0];
    if (x.empty() || gi.is_const(x)) continue;
    int im;
    ir::Node* mul = sole_reader(gi, dead, sig.outputs[0], &im);
    if (!is_onnx(mul, "Mul") || !single_output(*mul) || mul->inputs.size() != 2 || other_input(*mul, sig.outputs[0]) != x)
      continue;
    ir::Node fused;
    fused.name = sig.name.empty() ? "Silu_" + std::to_string(done) : sig.name + "_silu";
    fused.domain = kNxrtDomain;
    fused.op_type = "Swish";
    fused.inputs = {x};
    fused.outputs = {mul->outputs[0]};
    replace_with(gi, dead, {static_cast<int>(i), im}, im, std::move(fused));
    pc.count("fused_silu");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

}  // namespace nxrt::optimizer
