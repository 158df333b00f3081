// Level-all pass: a 2-D float convolution whose only reader is a MaxPool becomes one node:
//
//   Y0 = Conv(X, W, B)  or  nxrt::FusedConv(X, W, B, activation = Relu | Clip | LeakyRelu | none)
//   Y  = MaxPool(Y0)                     ->  Y = nxrt::ConvMaxPool(X, W, B, <conv attributes>,
//                                                activation..., pool_kernel_shape, pool_strides, ...)
//
// Why: the conv's full-resolution output (a CNN stem's 3-13 MB) is otherwise written out and read back
// once by the pool; the fused kernel (ops/conv/conv_max_pool.cpp) pools each band of conv rows while it
// is in L2 and writes only the pooled tensor.
//
// Taken: the conv's W a constant float [M, C / group, kH, kW] (so X is float and 2-D) with 2 x C x the
// strides' product <= M (the conv writes much more than it reads) and C / group x kH x kW <= 32 (cheap
// per output), B absent or a
// constant float of M values; a FusedConv without a residual, pre-activation or input shuffle; the
// MaxPool with only its Y output, its kernel_shape two sizes; the conv's output read by the pool alone.
#include "optimizer/fusions/fusion_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

constexpr int64_t kMaxMacsPerOutput = 32;

struct ConvPool : Match {
  int conv = -1, pool = -1;
};

bool match(Rewriter& rw, int anchor, ConvPool& m) {
  const ir::Node& pool = rw.node(anchor);
  if (!single_output(pool) || pool.inputs.size() != 1 || pool.inputs[0].empty()) return false;
  if (attr_ints(pool, "kernel_shape").size() != 2) return false;
  int ci = -1;
  const ir::Node* conv = rw.sole_producer(pool.inputs[0], &ci);
  if (!conv) return false;
  const bool plain = is_onnx(conv, "Conv");
  const bool fused = ir::canonical_domain(conv->domain) == kNxrtDomain && conv->op_type == "FusedConv";
  if (!plain && !fused) return false;
  if (conv->inputs.size() < 2 || conv->inputs.size() > 3 || conv->inputs[0].empty()) return false;
  if (fused) {
    if (conv->find_attribute("input_shuffle_shape")) return false;
    const std::string act = attr_s(*conv, "activation", "");
    if (act != "" && act != "Relu" && act != "Clip" && act != "LeakyRelu") return false;
  }
  const Tensor* w = rw.constant(conv->inputs[1]);
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 4) return false;
  const int64_t group = std::max<int64_t>(1, attr_i(*conv, "group", 1));
  if (w->dim(0) % group != 0) return false;
  // Input floats per output pixel (channels x stride area) at most half the output channels: where the
  // bands pay (a stem: 3 x 2 x 2 against 64). Convs that read as much as they write (VGG's 64 -> 64,
  // AlexNet's 384 -> 256) gained nothing fused and lost 2-10% at 2 threads (Zen 5): left to the two nodes.
  int64_t in_per_out = w->dim(1) * group;
  for (int64_t st : attr_ints(*conv, "strides")) in_per_out *= st;
  if (2 * in_per_out > w->dim(0)) return false;
  // And few multiply-adds per output (C / group x kH x kW <= 32: SqueezeNet's and ShuffleNet's 3x3 stems,
  // 27), where the stem's time is mostly its output's memory traffic. 7x7 stems (147 per output) gained
  // little: Zen 5, 1 thread, per-node traces, ResNet-50 / DenseNet-121 / Inception-v1 stem + pool 1-5%
  // faster fused, but the node after it up to 20 us slower (its input written band by band, colder).
  if (w->dim(1) * w->dim(2) * w->dim(3) > kMaxMacsPerOutput) return false;
  if (conv->inputs.size() == 3 && !conv->inputs[2].empty()) {
    const Tensor* b = rw.constant(conv->inputs[2]);
    if (!b || b->dtype() != DataType::kFloat || b->numel() != w->dim(0)) return false;
  }
  m.conv = ci;
  m.pool = anchor;
  m.nodes = {ci, anchor};
  return true;
}

bool build(Rewriter& rw, const ConvPool& m, Rewrite& r) {
  const ir::Node& conv = rw.node(m.conv);
  const ir::Node& pool = rw.node(m.pool);
  std::vector<ir::Attribute> attrs;
  for (const auto& a : conv.attributes) {
    if (a.name != "inner_opset") attrs.push_back(a);
  }
  for (const char* name : {"kernel_shape", "strides", "dilations", "pads", "ceil_mode", "auto_pad"}) {
    if (const ir::Attribute* a = pool.find_attribute(name)) {
      ir::Attribute c = *a;
      c.name = std::string("pool_") + name;
      attrs.push_back(std::move(c));
    }
  }
  std::vector<std::string> inputs(conv.inputs.begin(), conv.inputs.end());
  r.replace(m.pool, rw.fused_node(m.conv, m.pool, {"ConvMaxPool", "_max_pool", "ConvMaxPool"}, std::move(inputs),
                                  std::move(attrs)));
  return true;
}

const Fusion<ConvPool> kConvMaxPool{.stat = "fused_conv_max_pool", .anchor = {{"MaxPool"}}, .match = match, .build = build};

}  // namespace

int fuse_conv_max_pool(PassContext& pc, GraphInfo& gi) { return run_fusion(pc, gi, kConvMaxPool); }

}  // namespace nxrt::optimizer
