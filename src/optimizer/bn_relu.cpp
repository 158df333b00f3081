// BatchNormalization (inference) followed by Relu -> nxrt::BatchNormRelu, one per-channel
// scale/shift + max(0, .) pass instead of two (DenseNet / Inception pre-activation BN-ReLU-Conv).
//
//   nxrt::BatchNormRelu(X, scale, B, mean, var), attribute epsilon: Relu(BatchNormalization(X, ...))
//
// The kernel folds the statistics into a = scale / sqrt(var + eps) and b = B - mean * a in double, as the
// BatchNormalization kernel does; the float path may contract x * a + b into one FMA (1 ulp apart).
// The pass fuses only when the four parameters are non-overridable constants.
#include <cmath>

#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ops/common.h"
#include "optimizer/fused_ops.h"
#include "optimizer/graph_util.h"
#include "optimizer/optimizer.h"

namespace nxrt::optimizer {

namespace {

#if defined(__x86_64__) || defined(__i386__)
bool has_avx2() { return ep::cpu_has_avx2_fma(); }
#define NXRT_BNR_AVX2 __attribute__((target("avx2,fma")))
#else
bool has_avx2() { return false; }
#define NXRT_BNR_AVX2
#endif

__attribute__((always_inline)) inline void scale_shift_relu_body(const float* x, float* y, int64_t n, float a,
                                                                  float b) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i] * a + b;
    y[i] = v > 0.f ? v : 0.f;
  }
}
NXRT_BNR_AVX2 void scale_shift_relu_avx2(const float* x, float* y, int64_t n, float a, float b) {
  scale_shift_relu_body(x, y, n, a, b);
}
void scale_shift_relu_plain(const float* x, float* y, int64_t n, float a, float b) {
  scale_shift_relu_body(x, y, n, a, b);
}

}  // namespace

void scale_shift_relu(const float* x, float* y, int64_t n, float a, float b) {
  (has_avx2() ? scale_shift_relu_avx2 : scale_shift_relu_plain)(x, y, n, a, b);
}

namespace {

// BatchNormalization's inference statistics folded per channel, in double: a = scale / sqrt(var + eps),
// b = B - mean * a. `p` is {scale, B, mean, var}, each of the same length.
Status fold_batch_norm(const std::vector<const Tensor*>& p, double eps, std::vector<double>* a,
                       std::vector<double>* b) {
  std::vector<double> v[4];
  for (size_t k = 0; k < 4; ++k) {
    NXRT_ASSIGN_OR_RETURN(v[k], ops::read_double_values(*p[k]));
    if (v[k].size() != v[0].size()) return invalid_argument("scale, B, mean and var must have the same length");
  }
  const size_t C = v[0].size();
  a->resize(C);
  b->resize(C);
  for (size_t c = 0; c < C; ++c) {
    (*a)[c] = v[0][c] / std::sqrt(v[3][c] + eps);
    (*b)[c] = v[1][c] - v[2][c] * (*a)[c];
  }
  return Status::Ok();
}

class BatchNormReluKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    eps_ = info.attr_float("epsilon", 1e-5f);
    bool all = true;
    for (size_t i = 1; i < 5; ++i) all = all && info.const_input(i) != nullptr;
    if (all) {
      std::vector<const Tensor*> p;
      for (size_t i = 1; i < 5; ++i) p.push_back(info.const_input(i));
      Status st = fold(p);
      if (!st.ok()) return info.error(st.message());
      folded_ = true;
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) override {
    for (size_t i = 0; i < 5; ++i)
      if (!ctx.has_input(i)) return ctx.error("missing input " + std::to_string(i));
    const Tensor& X = ctx.input(0);
    if (X.rank() < 1) return ctx.error("X must have rank >= 1, got " + X.describe());
    if (!folded_) {
      std::vector<const Tensor*> p;
      for (size_t i = 1; i < 5; ++i) p.push_back(&ctx.input(i));
      Status st = fold(p);
      if (!st.ok()) return ctx.error(st.message());
    }
    const int64_t N = X.dim(0);
    const int64_t C = X.rank() >= 2 ? X.dim(1) : 1;
    const int64_t plane = (N * C) > 0 ? X.numel() / (N * C) : 0;
    if (static_cast<int64_t>(a_.size()) != C) {
      return ctx.error("parameters have " + std::to_string(a_.size()) + " values, X " + X.describe() + " has " +
                       std::to_string(C) + " channels");
    }
    return ops::dispatch_float(
        X.dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, X.dtype(), X.shape()));
          const T* x = X.data<T>();
          T* y = Y->data<T>();
          ctx.pool().parallel_for(N * C, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, plane)),
                                  [&](int64_t p0, int64_t p1) {
                                    for (int64_t p = p0; p < p1; ++p) {
                                      const int64_t c = p % C;
                                      if constexpr (std::is_same_v<T, float>) {
                                        scale_shift_relu(x + p * plane, y + p * plane, plane, af_[c], bf_[c]);
                                      } else {
                                        reference(x + p * plane, y + p * plane, plane, a_[c], b_[c]);
                                      }
                                    }
                                  });
          return Status::Ok();
        },
        [&] { return ctx.error(std::string("BatchNormRelu does not support dtype ") + dtype_name(X.dtype())); });
  }

  // BatchNormalization's per-plane affine (compute type: double for double, float otherwise), then Relu.
  template <typename T>
  static void reference(const T* x, T* y, int64_t n, double a, double b) {
    using CT = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const CT af = static_cast<CT>(a), bf = static_cast<CT>(b);
    for (int64_t i = 0; i < n; ++i) {
      const T v = static_cast<T>(static_cast<CT>(x[i]) * af + bf);
      y[i] = static_cast<CT>(v) > CT(0) ? v : T(0.f);
    }
  }

 private:
  Status fold(const std::vector<const Tensor*>& p) {
    NXRT_RETURN_IF_ERROR(fold_batch_norm(p, eps_, &a_, &b_));
    af_.assign(a_.begin(), a_.end());
    bf_.assign(b_.begin(), b_.end());
    return Status::Ok();
  }

  double eps_ = 1e-5;
  bool folded_ = false;
  std::vector<double> a_, b_;
  std::vector<float> af_, bf_;
};

}  // namespace



int fuse_bn_relu(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  const int64_t opset = pc.opset("");
  if (opset < 7) return 0;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& bn = g.nodes[i];
    if (dead[i] || !is_onnx(&bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.outputs.empty()) continue;
    bool extra = false;
    for (size_t k = 1; k < bn.outputs.size(); ++k) extra |= !bn.outputs[k].empty();
    if (extra || bn.outputs[0].empty() || bn.inputs[0].empty()) continue;
    if (opset >= 14 && attr_i(bn, "training_mode", 0) != 0) continue;
    if (opset < 9 && attr_i(bn, "spatial", 1) == 0) continue;
    bool params = true;
    for (size_t k = 1; k < 5; ++k) {
      const Tensor* t = gi.constant(bn.inputs[k]);
      params = params && t && t->rank() == 1 &&
               (t->dtype() == DataType::kFloat || t->dtype() == DataType::kDouble) &&
               t->numel() == gi.constant(bn.inputs[1])->numel();
    }
    if (!params) continue;
    int c;
    const ir::Node* relu_p = sole_reader(gi, dead, bn.outputs[0], &c);
    if (!is_onnx(relu_p, "Relu") || relu_p->inputs.size() != 1 || !single_output(*relu_p)) continue;
    const ir::Node& relu = *relu_p;
    ir::Node fused;
    fused.name = bn.name.empty() ? "BatchNormRelu_" + std::to_string(done) : bn.name + "_relu";
    fused.domain = kNxrtDomain;
    fused.op_type = "BatchNormRelu";
    fused.inputs = bn.inputs;
    fused.outputs = {relu.outputs[0]};
    for (const auto& a : bn.attributes)
      if (a.name == "epsilon") fused.attributes.push_back(a);
    dead[i] = true;
    g.nodes[static_cast<size_t>(c)] = std::move(fused);
    pc.count("fused_bn_relu");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

// nxrt::BatchNormRelu whose only reader is a float 1x1, stride-1, unpadded, group-1 conv (Conv, or a
// FusedConv without a residual): DenseNet's BN-ReLU-Conv order. The folded scale/shift and the Relu
// move into the conv, which applies them while packing its input panels (FusedConv inputs 4 and 5,
// ops::ConvPost::pre_scale), so the activated tensor is never written or read back.
int fuse_preact_conv(PassContext& pc, GraphInfo& gi) {
  ir::Graph& g = gi.g;
  std::vector<bool> dead(g.nodes.size(), false);
  int done = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& bnr = g.nodes[i];
    if (dead[i] || bnr.domain != kNxrtDomain || bnr.op_type != "BatchNormRelu" || bnr.inputs.size() != 5 ||
        !single_output(bnr) || bnr.inputs[0].empty()) {
      continue;
    }
    int c;
    const ir::Node* conv_p = sole_reader(gi, dead, bnr.outputs[0], &c);
    if (!conv_p) continue;
    const bool plain = is_onnx(conv_p, "Conv");
    const bool fused = conv_p->domain == kNxrtDomain && conv_p->op_type == "FusedConv";
    if ((!plain && !fused) || conv_p->inputs.size() < 2 || conv_p->inputs[0] != bnr.outputs[0]) continue;
    const ir::Node& conv = *conv_p;
    if (fused && conv.inputs.size() > 3) continue;  // a residual (or an earlier pre-activation)
    const Tensor* w = gi.constant(conv.inputs[1]);
    if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->dim(2) != 1 || w->dim(3) != 1) continue;
    if (attr_i(conv, "group", 1) != 1) continue;
    const std::string pad_mode = attr_s(conv, "auto_pad", "NOTSET");
    if (pad_mode != "NOTSET" && pad_mode != "VALID") continue;
    bool unit = true;
    for (const auto& a : conv.attributes) {
      if (a.name == "strides")
        for (int64_t v : a.ints) unit = unit && v == 1;
      if (a.name == "pads")
        for (int64_t v : a.ints) unit = unit && v == 0;
    }
    if (!unit) continue;
    std::vector<const Tensor*> p;
    for (size_t k = 1; k < 5; ++k) {
      const Tensor* t = gi.constant(bnr.inputs[k]);
      if (t && t->rank() == 1 && t->numel() == w->dim(1)) p.push_back(t);
    }
    if (p.size() != 4) continue;
    // BatchNormReluKernel's epsilon (a float attribute, default 1e-5f) and fold: the same numbers.
    const double eps = attr_f(bnr, "epsilon", 1e-5f);
    std::vector<double> fa, fb;
    if (!fold_batch_norm(p, eps, &fa, &fb).ok()) continue;
    const int64_t C = w->dim(1);
    Tensor sa(DataType::kFloat, {C}), sb(DataType::kFloat, {C});
    for (int64_t k = 0; k < C; ++k) {
      sa.data<float>()[k] = static_cast<float>(fa[k]);
      sb.data<float>()[k] = static_cast<float>(fb[k]);
    }
    const std::string an = pc.fresh_name(g, "preact_scale"), bn = pc.fresh_name(g, "preact_shift");
    g.initializers[an] = std::move(sa);
    g.initializers[bn] = std::move(sb);
    ir::Node n = conv;
    if (plain) {
      n.domain = kNxrtDomain;
      n.op_type = "FusedConv";
      n.attributes.push_back(make_attr_s("activation", ""));
      n.attributes.push_back(make_attr_i("inner_opset", pc.opset("")));
    }
    n.inputs.resize(4);  // X, W, B (may be empty), no residual
    n.inputs[0] = bnr.inputs[0];
    n.inputs.push_back(an);
    n.inputs.push_back(bn);
    dead[i] = true;
    g.nodes[static_cast<size_t>(c)] = std::move(n);
    pc.count("fused_preact_conv");
    ++done;
  }
  return finish_rewrites(pc, g, dead, done);
}

void register_bn_relu(ep::KernelRegistry& r) { r.add_class<BatchNormReluKernel>(kNxrtDomain, "BatchNormRelu"); }

}  // namespace nxrt::optimizer
