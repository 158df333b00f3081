// Level-all pass: 1x1 convolutions that read the same X with the same attributes (an Inception module's
// 1x1, 3x3-reduce and 5x5-reduce branches) become one convolution over their weights stacked along the
// output channels, then a Split of its output along axis 1 into the original outputs:
//
//   Y1 = Conv(X, W1, B1)  (M1 channels)                  Y = Conv(X, [W1; W2; W3], [B1; B2; B3])
//   Y2 = Conv(X, W2, B2)  (M2)                      ->   Y1, Y2, Y3 = Split(Y, [M1, M2, M3], axis = 1)
//   Y3 = Conv(X, W3, B3)  (M3)
//
// (or nxrt::FusedConv with the same activation). Why: each pointwise convolution packs X (its GEMM's
// B, C x H*W floats) and runs its own parallel loop over a GEMM with few rows (64 output channels: at 2
// threads such a GEMM splits into few tiles); one GEMM with M1 + M2 + M3 rows packs X once and splits
// better. With batch 1 every Split output is a contiguous channel range of Y, so Split hands out views
// (no copy); a Concat that had placed a sibling's output in its own buffer copies that view instead.
// Zen 5 (2 vCPUs, AVX-512), in-process paired runs, both orders: Inception-v2 -4% at 2 threads, -1% at
// 1 (its 1x1 convs 3.87 -> 3.56 ms a run at 2 threads, Concat copies +0.06 ms); Inception-v1 -0.6% /
// -1.6%.
//
// Taken: Conv (ai.onnx) or nxrt::FusedConv without a residual or pre-activation, group 1, 1x1 kernel,
// strides 1, pads 0, constant float32 weights and bias (a missing bias reads as zeros when a sibling
// has one), the same op and attributes on every sibling, one output each; at most 8 siblings. The
// stacked node takes the first sibling's place in node order with the Split right after it (X is
// computed there, and every reader of a sibling comes after it).
#include <algorithm>
#include <cstring>

#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"
#include "optimizer/rewrite.h"

namespace nxrt::optimizer {

namespace {

constexpr size_t kMaxStacked = 8;

bool same_attribute(const ir::Attribute& a, const ir::Attribute& b) {
  if (a.name != b.name || a.type != b.type) return false;
  switch (a.type) {
    case ir::Attribute::Type::kInt: return a.i == b.i;
    case ir::Attribute::Type::kFloat: return a.f == b.f;
    case ir::Attribute::Type::kString: return a.s == b.s;
    case ir::Attribute::Type::kInts: return a.ints == b.ints;
    case ir::Attribute::Type::kFloats: return a.floats == b.floats;
    default: return false;  // tensors, graphs: never stacked
  }
}

bool same_attributes(const ir::Node& a, const ir::Node& b) {
  if (a.attributes.size() != b.attributes.size()) return false;
  for (const ir::Attribute& x : a.attributes) {
    const ir::Attribute* y = b.find_attribute(x.name);
    if (!y || !same_attribute(x, *y)) return false;
  }
  return true;
}

// A pointwise convolution this pass can stack: its weight (and bias, or nullptr).
bool stackable(const Rewriter& rw, const ir::Node& n, const Tensor** w, const Tensor** b) {
  *w = pointwise_conv_weight(rw, n);
  if (!*w || n.inputs.size() > 3 || !single_output(n) || !(*w)->is_contiguous()) return false;
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  *b = has_bias ? rw.constant(n.inputs[2]) : nullptr;
  return !has_bias || (*b && (*b)->dtype() == DataType::kFloat && (*b)->numel() == (*w)->dim(0) && (*b)->is_contiguous());
}

struct SiblingConvs : Match {
  std::vector<const Tensor*> w, b;  // per sibling, in node order (anchor first); b may be nullptr
};

bool match(Rewriter& rw, int anchor, SiblingConvs& m) {
  const ir::Node& first = rw.node(anchor);
  const Tensor *w = nullptr, *b = nullptr;
  if (!stackable(rw, first, &w, &b)) return false;
  m.take(anchor);
  m.w.push_back(w);
  m.b.push_back(b);
  for (int c : rw.later_readers(first.inputs[0], anchor)) {
    if (m.w.size() == kMaxStacked) break;
    const ir::Node& n = rw.node(c);
    if (n.op_type != first.op_type || n.domain != first.domain || n.inputs[0] != first.inputs[0]) continue;
    if (!stackable(rw, n, &w, &b) || w->dim(1) != m.w[0]->dim(1) || !same_attributes(n, first)) continue;
    m.take(c);
    m.w.push_back(w);
    m.b.push_back(b);
  }
  return m.w.size() >= 2;
}

bool build(Rewriter& rw, const SiblingConvs& m, Rewrite& r) {
  const int64_t C = m.w[0]->dim(1);
  int64_t M = 0;
  bool any_bias = false;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < m.w.size(); ++i) {
    sizes.push_back(m.w[i]->dim(0));
    M += m.w[i]->dim(0);
    any_bias |= m.b[i] != nullptr;
  }
  Tensor W(DataType::kFloat, {M, C, 1, 1});
  Tensor B(DataType::kFloat, {any_bias ? M : 0});
  int64_t row = 0;
  for (size_t i = 0; i < m.w.size(); ++i) {
    std::memcpy(W.data<float>() + row * C, m.w[i]->data<float>(), m.w[i]->nbytes());
    if (any_bias) {
      float* dst = B.data<float>() + row;
      if (m.b[i]) std::memcpy(dst, m.b[i]->data<float>(), m.b[i]->nbytes());
      else std::fill(dst, dst + sizes[i], 0.f);
    }
    row += sizes[i];
  }
  const ir::Node& first = rw.node(m.anchor);
  std::vector<std::string> inputs = {first.inputs[0], rw.add_initializer("conv_stacked_W", std::move(W))};
  if (any_bias) inputs.push_back(rw.add_initializer("conv_stacked_B", std::move(B)));
  const std::string name = first.name.empty() ? "Conv_" + std::to_string(rw.done()) : first.name;
  const std::string y = rw.pc.fresh_name(rw.g, name + "_stacked_out");
  ir::Node stacked = first;
  stacked.name = name + "_stacked";
  stacked.inputs = std::move(inputs);
  stacked.outputs = {y};
  std::vector<std::string> outputs;
  for (int c : m.nodes) outputs.push_back(rw.node(c).outputs[0]);
  // Split's sizes: an input from opset 13, an attribute before.
  std::vector<std::string> split_inputs = {y};
  std::vector<ir::Attribute> split_attrs = {make_attr_i("axis", 1)};
  if (rw.opset() >= 13) {
    split_inputs.push_back(rw.add_initializer("conv_stacked_split", Tensor::from_vector<int64_t>(
                                                                        DataType::kInt64, {static_cast<int64_t>(sizes.size())}, sizes)));
  } else {
    split_attrs.push_back(make_attr_is("split", sizes));
  }
  r.replace(m.anchor, std::move(stacked));
  r.insert_after(m.anchor, make_node(name + "_stacked_split", "", "Split", std::move(split_inputs), std::move(outputs),
                                     std::move(split_attrs)));
  return true;
}

const Fusion<SiblingConvs> kSiblingConvs{.stat = "fused_sibling_pointwise_conv",
                                         .anchor = {{"Conv", "FusedConv"}, {"", kNxrtDomain}},
                                         .match = match,
                                         .build = build,
                                         .domain = nullptr};

}  // namespace

int fuse_sibling_pointwise_conv(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kSiblingConvs); }

}  // namespace nxrt::optimizer
