// Level-all pass: a channel shuffle (ShuffleNet's Reshape-Transpose-Reshape) whose only reader is a
// depthwise convolution moves into that convolution:
//
//   s = Reshape(X, [A, G, K, d...])                    Y = nxrt::FusedConv(X, W, B, input_shuffle_shape =
//   t = Transpose(s, perm = [0, 2, 1, 3, ...])   ->                       [A, G, K, d...])
//   u = Reshape(t, [A, G * K, d...])
//   Y = Conv(u, W, B)  (group G * K, W [M, 1, k...])
//
// Why: the Transpose is a view, so the second Reshape copies the whole tensor into channel order, and
// the depthwise conv then copies each plane again into its padded scratch plane. Reading plane
// shuffled_channel(c) there instead makes the shuffle free (5.6% of ShuffleNet-v1's run time on a Zen 3,
// 1 thread). The fused kernel checks X's shape at run time: where X is not [A, G * K, d...] it makes
// the shuffled copy itself, so the result is the three nodes' for any X they accept.
//
// Taken: both shapes constant int64 with every size positive (no 0 or -1 to resolve against X), the
// second the first with axes 1 and 2 merged, the Transpose's perm written out as swapping axes 1 and 2,
// each intermediate value read only by the next node; the conv a Conv (ai.onnx) or an nxrt::FusedConv
// without a pre-activation, with constant weights [M, 1, k...] and `group` equal to its G * K input
// channels.
#include "optimizer/fusions/fused_activation.h"
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

struct ChannelShuffle : Match {
  std::string x;
  std::vector<int64_t> split;  // [A, G, K, d...]
};

// The values of a constant int64 shape whose sizes are all positive.
bool positive_shape(const Rewriter& rw, const std::string& name, std::vector<int64_t>* out) {
  const Tensor* t = rw.constant(name);
  if (!t || t->dtype() != DataType::kInt64 || t->rank() != 1 || !t->is_contiguous()) return false;
  out->assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  for (int64_t d : *out)
    if (d <= 0) return false;
  return true;
}

bool match(Rewriter& rw, int anchor, ChannelShuffle& m) {
  const ir::Node& conv = rw.node(anchor);
  const bool fused = !is_onnx(&conv, "Conv");
  if (fused && ir::canonical_domain(conv.domain) != kNxrtDomain) return false;
  if (!single_output(conv) || conv.inputs.size() < 2 || conv.inputs[0].empty()) return false;
  if (fused && (conv.inputs.size() > 4 || conv.find_attribute("input_shuffle_shape"))) return false;
  const Tensor* w = rw.constant(conv.inputs[1]);
  if (!w || w->rank() < 3 || w->dim(1) != 1) return false;
  int r2i = -1, tri = -1, r1i = -1;
  const ir::Node* r2 = rw.sole_producer(conv.inputs[0], "Reshape", &r2i);
  if (!r2 || r2->inputs.size() != 2) return false;
  const ir::Node* tr = rw.sole_producer(r2->inputs[0], "Transpose", &tri);
  if (!tr) return false;
  const ir::Node* r1 = rw.sole_producer(tr->inputs[0], "Reshape", &r1i);
  if (!r1 || r1->inputs.size() != 2 || r1->inputs[0].empty()) return false;
  std::vector<int64_t> s1, s2;
  if (!positive_shape(rw, r1->inputs[1], &s1) || !positive_shape(rw, r2->inputs[1], &s2)) return false;
  // s2 = s1 with axes 1 and 2 merged, the conv's input: rank of W, G * K channels, one group each.
  if (s2.size() != static_cast<size_t>(w->rank()) || s1.size() != s2.size() + 1) return false;
  if (s1[0] != s2[0] || s1[1] * s1[2] != s2[1] || !std::equal(s1.begin() + 3, s1.end(), s2.begin() + 2)) return false;
  if (attr_i(conv, "group", 1) != s2[1] || s1[1] < 2 || s1[2] < 2) return false;
  std::vector<int64_t> perm(s1.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int64_t>(i);
  std::swap(perm[1], perm[2]);
  if (attr_ints(*tr, "perm") != perm) return false;
  m.x = r1->inputs[0];
  m.split = std::move(s1);
  m.nodes = {r1i, tri, r2i, anchor};
  return true;
}

bool build(Rewriter& rw, const ChannelShuffle& m, Rewrite& r) {
  ir::Node n = rw.node(m.anchor);
  if (is_onnx(&n, "Conv")) {
    n.domain = kNxrtDomain;
    n.op_type = "FusedConv";
    add_fused_activation_attrs(n, FusedActivation{}, rw.opset());
  }
  n.inputs[0] = m.x;
  n.attributes.push_back(make_attr_is("input_shuffle_shape", m.split));
  r.replace(m.anchor, std::move(n));
  return true;
}

const Fusion<ChannelShuffle> kChannelShuffle{.stat = "fused_channel_shuffle",
                                             .anchor = {{"Conv", "FusedConv"}, {"", kNxrtDomain}},
                                             .match = match,
                                             .build = build};

}  // namespace

int fuse_channel_shuffle(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kChannelShuffle); }

}  // namespace nxrt::optimizer
