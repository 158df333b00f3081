// MatMulInteger(A, B, a_zp, b_zp) -> Cast(float) -> Mul(., Mul(a_scale, b_scale)) [-> Add(., bias)]
// -> com.microsoft::MatMulIntegerToFloat(A, B, a_scale, b_scale, a_zp, b_zp, bias): the pattern ORT's
// quantize_dynamic writes for every MatMul of a dynamically quantized model (DynamicQuantizeLinear
// before it), and the op ORT's own optimizer makes of it. One node where there were three or four: no
// int32 tensor, no Cast pass, no Mul pass over the output (the kernel converts the sums in place), and
// the same float operations, so the same bits (ops/linalg/integer_matmul.cpp).
//
// Only shapes the op takes unchanged: B a constant [K, N]; a_scale and a_zp one value (a constant, or
// DynamicQuantizeLinear's scalar outputs); b_scale one value or N (last dim N), of no higher rank than
// the product (so the Mul did not broadcast the output to a larger shape); bias a constant [N].
// Zen 5, a dynamically quantized BERT-base encoder (24 such MatMuls): see docs/PERF.md.
#include "ir/symbols.h"
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct IntegerToFloat : Match {
  int64_t N = 0;
  std::string a_scale, b_scale, bias;
  std::string out;  // the value the fused node writes (the Mul's or the Add's output)
};

// `name` holds one value: DynamicQuantizeLinear's y_scale / y_zero_point (scalars by the spec) or a
// constant of one element whose rank does not exceed `max_rank`.
bool one_value(Rewriter& rw, const std::string& name, int64_t max_rank) {
  if (name.empty()) return false;
  if (const Tensor* t = rw.constant(name)) return t->numel() == 1 && t->rank() <= max_rank;
  auto it = rw.gi.producer.find(name);
  if (it == rw.gi.producer.end()) return false;
  const ir::Node& p = rw.node(it->second);
  return is_onnx(&p, "DynamicQuantizeLinear") && p.outputs.size() >= 2 &&
         (p.outputs[1] == name || (p.outputs.size() >= 3 && p.outputs[2] == name));
}

// A float constant holding one value or one per column (last dim N, numel N), of rank <= max_rank.
bool per_column_constant(Rewriter& rw, const std::string& name, int64_t N, int64_t max_rank) {
  const Tensor* t = rw.constant(name);
  if (!t || t->dtype() != DataType::kFloat || t->rank() > max_rank) return false;
  return t->numel() == 1 || (t->rank() >= 1 && t->dim(-1) == N && t->numel() == N);
}

bool match(Rewriter& rw, int anchor, IntegerToFloat& m) {
  const ir::Node& mi = rw.node(anchor);
  if (mi.inputs.size() < 2 || !single_output(mi)) return false;
  const Tensor* b = rw.constant(mi.inputs[1]);
  if (!b || b->rank() != 2 || (b->dtype() != DataType::kInt8 && b->dtype() != DataType::kUInt8)) return false;
  m.N = b->dim(1);
  // The product's rank: load-time shape inference's (MatMul-like ops have no rank rule).
  const ir::ValueFacts* f = rw.g.shape_facts ? rw.g.shape_facts->find(mi.outputs[0]) : nullptr;
  if (!f || !f->has_shape) return false;
  const int64_t out_rank = static_cast<int64_t>(f->dims.size());
  if (mi.inputs.size() > 2 && !mi.inputs[2].empty() && !one_value(rw, mi.inputs[2], out_rank)) return false;
  if (mi.inputs.size() > 3 && !mi.inputs[3].empty()) {
    const Tensor* zb = rw.constant(mi.inputs[3]);
    if (!zb || zb->dtype() != b->dtype() || (zb->numel() != 1 && !(zb->rank() == 1 && zb->numel() == m.N))) return false;
  }
  int ci = -1, ui = -1;
  const ir::Node* cast = rw.sole_reader(mi.outputs[0], "Cast", &ci);
  if (!cast || attr_i(*cast, "to", 0) != static_cast<int64_t>(DataType::kFloat)) return false;
  const ir::Node* mul = rw.sole_reader(cast->outputs[0], "Mul", &ui);
  if (!mul || mul->inputs.size() != 2) return false;
  const std::string s = other_input(*mul, cast->outputs[0]);
  auto sp = rw.gi.producer.find(s);
  if (s.empty() || sp == rw.gi.producer.end()) return false;
  const ir::Node& smul = rw.node(sp->second);
  if (!is_onnx(&smul, "Mul") || smul.inputs.size() != 2) return false;
  // a_scale one value, b_scale one value or per column (either order in the scales' Mul).
  for (int k = 0; k < 2; ++k) {
    const std::string& p = smul.inputs[static_cast<size_t>(k)];
    const std::string& q = smul.inputs[static_cast<size_t>(1 - k)];
    if (one_value(rw, p, out_rank) && per_column_constant(rw, q, m.N, out_rank)) {
      m.a_scale = p;
      m.b_scale = q;
      break;
    }
  }
  if (m.a_scale.empty()) return false;
  m.nodes = {anchor, ci, ui};
  m.out = mul->outputs[0];
  int di = -1;
  if (const ir::Node* add = rw.sole_reader(mul->outputs[0], "Add", &di)) {
    const std::string bias = add->inputs.size() == 2 ? other_input(*add, mul->outputs[0]) : std::string();
    const Tensor* bt = bias.empty() ? nullptr : rw.constant(bias);
    if (bt && bt->dtype() == DataType::kFloat && bt->rank() == 1 && bt->numel() == m.N) {
      m.bias = bias;
      m.out = add->outputs[0];
      m.take(di);
    }
  }
  return true;
}

bool build(Rewriter& rw, const IntegerToFloat& m, Rewrite& r) {
  const ir::Node& mi = rw.node(m.anchor);
  auto in = [&](size_t i) { return i < mi.inputs.size() ? mi.inputs[i] : std::string(); };
  std::vector<std::string> inputs = {in(0), in(1), m.a_scale, m.b_scale, in(2), in(3), m.bias};
  while (!inputs.empty() && inputs.back().empty()) inputs.pop_back();
  const int last = m.nodes.back();
  r.replace(last, make_node(rw.fused_name(mi, "matmul_integer_to_float", "_to_float"), "com.microsoft",
                            "MatMulIntegerToFloat", std::move(inputs), {m.out}));
  return true;
}

const Fusion<IntegerToFloat> kIntegerToFloat{.stat = "fused_matmul_integer_to_float",
                                             .anchor = {{"MatMulInteger"}},
                                             .min_opset = 10,
                                             .match = match,
                                             .build = build,
                                             .domain = "com.microsoft",
                                             .domain_version = 1};

}  // namespace

int fuse_matmul_integer_to_float(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kIntegerToFloat); }

}  // namespace nxrt::optimizer
