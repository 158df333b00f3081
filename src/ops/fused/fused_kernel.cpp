// Kernels of the internal "nxrt" domain that the optimizer's fusions create.
//
//   nxrt::FusedConv(X, W, B?, Z?)      Y = act(Conv(X, W, B) + Z)
//   nxrt::FusedGemm(A, B, C?, Z?)      Y = act(Gemm(A, B, C) + Z)
//   nxrt::FusedMatMul(A, B, bias?, Z?) Y = act(MatMul(A, B) + bias + Z), bias 1-D over the last axis
// Attributes: those of the wrapped op, plus `activation` (Relu, Clip, Sigmoid, Tanh, LeakyRelu,
// HardSigmoid or empty), `activation_params` (Clip: min, max; LeakyRelu: alpha; HardSigmoid: alpha,
// beta) and `inner_opset` (the opset the wrapped op is created at). The wrapped op's own kernel does the
// heavy work (packed weights, im2col / pointwise / depthwise paths); the epilogue runs in place on its
// output. Z normally has Y's shape; other broadcastable shapes take a general (slower) path.
// FusedConv's `input_shuffle_shape` [A, G, K, d...] (optimizer fuse_channel_shuffle): the conv reads
// Reshape(X, [A, G, K, d...]) with axes 1 and 2 swapped, as [A, G * K, d...] (a channel shuffle). When X
// already has that shape the depthwise paths read the shuffled planes in place (ConvPost::input_shuffle);
// otherwise the shuffled copy is made here.
//
// Also registered under "nxrt": LayerNormalization, RMSNormalization, Gelu, HardSwish and Swish, the
// ai.onnx kernels (opset 17 / 23 / 20 / 14 / 24 semantics), so fusions work on models importing older opsets.
#include <cmath>
#include <optional>

#include "ep/kernel.h"
#include "ep/standalone_context.h"
#include "ops/common.h"
#include "ops/elementwise/vec_math.h"
#include "ops/conv/conv_engine.h"
#include "ops/fused/fused_ops.h"
#include "ops/linalg/linalg_util.h"

namespace nxrt::ops {

namespace {

struct ActParams {
  Activation kind = Activation::kNone;
  float a = 0, b = 0;
};

// y = act(y [+ z]) over [i0, i1), the activation fixed at compile time so the loop vectorizes. The
// parameters are copied to locals first: read through `p`, a store to yd[i] might change them, so the
// compiler reloaded them per element and kept LeakyRelu a branch per element (mispredicted on every
// sign change: 44% of a keyword-spotting CNN's run time).
template <Activation A, typename T, typename CT>
__attribute__((always_inline)) inline void epilogue_body(T* yd, const T* zd, int64_t i0, int64_t i1,
                                                         const ActParams& p) {
  const float a = p.a, b = p.b;
  if (zd) {
    for (int64_t i = i0; i < i1; ++i) {
      const CT s = static_cast<CT>(T(static_cast<CT>(yd[i]) + static_cast<CT>(zd[i])));
      yd[i] = T(activation_of<A>(s, a, b));
    }
  } else {
    for (int64_t i = i0; i < i1; ++i) yd[i] = T(activation_of<A>(static_cast<CT>(yd[i]), a, b));
  }
}

// The same loop vectorized 8 floats wide (AVX2 tier and up). No FMA in the target, so nothing is contracted
// and every element gets the baseline loop's bits. The pass runs on the output of a conv path that leaves
// the activation to it (depthwise convs, HardSwish / HardSigmoid); at the baseline's 4-wide stores it took
// 16% of PP-OCR mobile cls's run time (Zen 3, 1 thread, perf).
#if defined(__x86_64__)
template <Activation A, typename T, typename CT>
__attribute__((target("avx2"))) void epilogue_range_avx2(T* yd, const T* zd, int64_t i0, int64_t i1,
                                                         const ActParams& p) {
  epilogue_body<A, T, CT>(yd, zd, i0, i1, p);
}
#endif

template <Activation A, typename T, typename CT>
void epilogue_tier(bool avx2, T* yd, const T* zd, int64_t i0, int64_t i1, const ActParams& p) {
#if defined(__x86_64__)
  if (avx2) return epilogue_range_avx2<A, T, CT>(yd, zd, i0, i1, p);
#else
  (void)avx2;
#endif
  epilogue_body<A, T, CT>(yd, zd, i0, i1, p);
}

template <typename T, typename CT>
void epilogue_dispatch(bool avx2, T* yd, const T* zd, int64_t i0, int64_t i1, const ActParams& p) {
  switch (p.kind) {
    case Activation::kNone: return epilogue_tier<Activation::kNone, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kRelu: return epilogue_tier<Activation::kRelu, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kClip: return epilogue_tier<Activation::kClip, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kSigmoid: return epilogue_tier<Activation::kSigmoid, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kTanh: return epilogue_tier<Activation::kTanh, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kGelu: return epilogue_tier<Activation::kGelu, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kLeakyRelu: return epilogue_tier<Activation::kLeakyRelu, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kHardSigmoid: return epilogue_tier<Activation::kHardSigmoid, T, CT>(avx2, yd, zd, i0, i1, p);
    case Activation::kHardSwish: return epilogue_tier<Activation::kHardSwish, T, CT>(avx2, yd, zd, i0, i1, p);
  }
}

template <typename T>
using ct_of = std::conditional_t<std::is_same_v<T, double>, double, float>;

// The wrapped Conv/Gemm/MatMul's view of the fused node (a StandaloneContext nested in the fused
// node's context, so pool, workspaces and errors are the fused node's). Inputs are the fused node's
// first n_in (input 0 replaceable: FusedConv's pre-activated X). Output 0 is the fused node's own
// output 0 when the wrapped op allocates it at the residual's shape (or there is no residual), so the
// epilogue then runs in place; any other shape, or a view the op sets, is a temporary owned here that
// compute() combines into output 0 (is_temp_).
class ForwardContext final : public ep::StandaloneContext {
 public:
  ForwardContext(ep::KernelContext& outer, const ep::KernelInfo& info, size_t n_in, const Dims* z_shape)
      : StandaloneContext(info, {}, outer), n_in_(n_in), z_shape_(z_shape) {}
  size_t num_inputs() const override { return n_in_; }
  const Value* input_value(size_t i) const override {
    if (i == 0 && in0_override_) return in0_override_;
    return i < n_in_ ? outer()->input_value(i) : nullptr;
  }
  Result<Tensor*> allocate_output(size_t i, DataType dtype, const Dims& shape) override {
    if (i != 0) return error("fused kernel: the wrapped op allocated output " + std::to_string(i));
    const bool in_place = !z_shape_ || *z_shape_ == shape;
    NXRT_ASSIGN_OR_RETURN(out_, in_place ? outer()->allocate_output(0, dtype, shape)
                                         : StandaloneContext::allocate_output(0, dtype, shape));
    is_temp_ = !in_place;
    return out_;
  }
  Status set_output(size_t i, Value v) override {
    if (i != 0 || !v.is_tensor()) return error("fused kernel: the wrapped op set a non-tensor output");
    NXRT_RETURN_IF_ERROR(StandaloneContext::set_output(0, Value(v.tensor().contiguous(true))));
    out_ = &output(0).tensor();
    is_temp_ = true;
    return Status::Ok();
  }

  // The wrapped kernel's variant is the fused node's own (FusedKernel::specialize asks the wrapped
  // kernel for it), with its reserved workspace.
  const ep::KernelVariant* variant() const override { return outer()->variant(); }
  void* variant_workspace() const override { return outer()->variant_workspace(); }
  // And the node's per-thread slots: the fused kernel itself holds none while the wrapped one runs.
  Result<ep::SlotMemory> thread_slots(size_t bytes) override { return outer()->thread_slots(bytes); }

  const Value* in0_override_ = nullptr;
  Tensor* out_ = nullptr;  // the wrapped op's result
  bool is_temp_ = false;   // out_ is a temporary, not the fused node's output 0

 private:
  size_t n_in_;
  const Dims* z_shape_;
};

class FusedKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    const std::string& op = info.op_type();
    if (op == "FusedConv") inner_op_ = "Conv", n_inner_ = 3, dflt_opset_ = 11;
    else if (op == "FusedGemm") inner_op_ = "Gemm", n_inner_ = 3, dflt_opset_ = 13;
    else if (op == "FusedMatMul") inner_op_ = "MatMul", n_inner_ = 2, dflt_opset_ = 13, has_bias_ = true;
    else return info.error("unknown fused op");
    epilogue_avx2_ = info.isa() >= ep::IsaTier::kAvx2;
    NXRT_ASSIGN_OR_RETURN(act_.kind, parse_activation(info.attr_string("activation", "")));
    // Sigmoid, Tanh and Gelu on the float vector bodies of the kernel's tier (ops/elementwise/vec_math.h)
    // rather than libm per element (a Tanh after a 3-channel 512x512 conv: ~18 ms of libm).
    if (activation_vector_fn(act_.kind, &act_fn_)) act_map_ = vecmath::map_for_tier(info.isa());
    std::vector<float> p = info.attr_floats("activation_params", {});
    if (act_.kind == Activation::kClip) {
      act_.a = p.size() > 0 ? p[0] : -INFINITY;
      act_.b = p.size() > 1 ? p[1] : INFINITY;
    } else if (act_.kind == Activation::kLeakyRelu) {
      act_.a = p.size() > 0 ? p[0] : 0.01f;
    } else if (act_.kind == Activation::kHardSigmoid) {
      act_.a = p.size() > 0 ? p[0] : 0.2f;
      act_.b = p.size() > 1 ? p[1] : 0.5f;
    }
    NXRT_RETURN_IF_ERROR(init_shuffle(info));
    const ir::Node& n = info.node();
    inner_node_.name = n.name;
    inner_node_.op_type = inner_op_;
    for (size_t i = 0; i < n_inner_ && i < n.inputs.size(); ++i) inner_node_.inputs.push_back(n.inputs[i]);
    inner_node_.outputs = {n.outputs.empty() ? std::string("y") : n.outputs[0]};
    for (const auto& a : n.attributes) {
      if (a.name != "activation" && a.name != "activation_params" && a.name != "inner_opset" &&
          a.name != "input_shuffle_shape")
        inner_node_.attributes.push_back(a);
    }
    const int64_t opset = info.attr_int("inner_opset", dflt_opset_);
    inner_info_ = std::make_unique<ep::KernelInfo>(inner_node_, opset);
    for (size_t i = 0; i < n_inner_; ++i) inner_info_->const_inputs_.push_back(info.const_input(i));
    // FusedConv inputs 4 and 5: the pre-activation scale/shift (optimizer fuse_preact_conv), constants.
    if (op == "FusedConv" && n.inputs.size() > 4 && !n.inputs[4].empty()) {
      const Tensor* a = info.const_input(4);
      const Tensor* b = n.inputs.size() > 5 ? info.const_input(5) : nullptr;
      if (!a || !b || a->dtype() != DataType::kFloat || b->dtype() != DataType::kFloat || a->rank() != 1 ||
          b->shape() != a->shape()) {
        return info.error("pre-activation scale/shift (inputs 4, 5) must be constant float vectors of one length");
      }
      pre_scale_.assign(a->data<float>(), a->data<float>() + a->numel());
      pre_shift_.assign(b->data<float>(), b->data<float>() + b->numel());
    }
    if (!shuffle_split_.empty() && !pre_scale_.empty()) {
      return info.error("input_shuffle_shape and a pre-activation (inputs 4, 5) cannot be combined");
    }
    inner_info_->graph_ = info.graph();
    inner_info_->registry_ = info.registry();
    inner_info_->overrides_ = &info.overrides();  // the wrapped kernel honours the same forced choices
    if (!info.registry()) return info.error("created without a kernel registry: cannot make its " + inner_op_);
    const ep::KernelDef* def = info.registry()->find("", inner_op_, opset);
    if (!def) return info.error("no CPU kernel for " + inner_op_ + " at opset " + std::to_string(opset));
    NXRT_ASSIGN_OR_RETURN(inner_, def->factory(*inner_info_));
    return Status::Ok();
  }

  // The wrapped kernel's inputs are forwarded unchanged: it decides for them.
  bool reads_const_input_data(size_t i) const override { return i >= n_inner_ || inner_->reads_const_input_data(i); }

  // Whether a wrapped Conv takes the epilogue (residual, activation and any pre-activation) into its
  // GEMM: float X and residual, and Relu/Clip/LeakyRelu/no activation. specialize plans for what
  // compute then does, so both ask here.
  bool epilogue_in_conv(DataType x, std::optional<DataType> z) const {
    return conv_post_activation(act_.kind) && x == DataType::kFloat && (!z || *z == DataType::kFloat);
  }

  // The wrapped kernel's variant for its inputs (the fused node's first n_inner_), as compute() will
  // call it: a Conv with the pre-activation in its post when compute_with_post will carry it.
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    const size_t n = std::min(n_inner_, sc.num_inputs());
    std::vector<DataType> dtypes(n);
    std::vector<Dims> shapes(n);
    for (size_t i = 0; i < n; ++i) {
      dtypes[i] = sc.dtype(i);
      shapes[i] = sc.shape(i);
    }
    // The wrapped conv reads X shuffled, at the shuffle's shape.
    if (!shuffle_split_.empty() && n > 0 && shape_numel(shapes[0]) == shape_numel(shuffled_shape_)) {
      shapes[0] = shuffled_shape_;
    }
    const ep::SpecializeContext inner(*inner_info_, n, dtypes.data(), shapes.data(), sc.num_threads());
    if (const auto* conv_post = dynamic_cast<const ConvWithPost*>(inner_.get())) {
      const bool pre = !pre_scale_.empty() &&
                       epilogue_in_conv(sc.dtype(0), sc.has_input(3) ? std::optional(sc.dtype(3)) : std::nullopt);
      return conv_post->specialize_with_post(inner, pre);
    }
    return inner_->specialize(inner);
  }
  Status compute(ep::KernelContext& ctx) const override {
    const Tensor* z = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const Tensor* bias = has_bias_ && ctx.has_input(2) ? &ctx.input(2) : nullptr;
    ForwardContext fc(ctx, *inner_info_, n_inner_, z ? &z->shape() : nullptr);
    const bool pre = !pre_scale_.empty();
    if (pre) {
      const Tensor& x0 = ctx.input(0);
      if (x0.dtype() != DataType::kFloat || x0.rank() < 2 || x0.dim(1) != static_cast<int64_t>(pre_scale_.size())) {
        return ctx.error("pre-activation of " + std::to_string(pre_scale_.size()) + " channels does not fit input " +
                         x0.describe());
      }
    }
    // MatMul on float against weights packed at creation: the bias, residual and activation go into the
    // GEMM's store (the passes below over the output then do not run). Zen 5, the BERT-shaped encoder
    // (bias on every projection, Gelu after the first FFN one): see docs/PERF.md.
    if (const auto* mm_post = dynamic_cast<const MatMulWithPost*>(inner_.get()); mm_post && !pre) {
      const bool float_io = ctx.input(0).dtype() == DataType::kFloat && (!z || z->dtype() == DataType::kFloat) &&
                            (!bias || (bias->dtype() == DataType::kFloat && bias->rank() == 1));
      if (float_io) {
        GemmEpilogue ep;
        if (bias) {
          ep.bias_kind = GemmBias::kPerColumn;
          ep.bias = bias->data<float>();
        }
        ep.residual = z ? z->data<float>() : nullptr;
        // Sigmoid, Tanh and Gelu are not applied in the GEMM's registers: per tile they would be a call of
        // the vector body per 64-column row (slower than one pass: Gelu after the encoder's 768 -> 3072
        // projection 14.7 -> 15.0 ms over 4 layers), so they run as one pass over the output below.
        if (!act_map_) {
          ep.act = act_.kind;
          ep.act_a = act_.a;
          ep.act_b = act_.b;
        }
        NXRT_ASSIGN_OR_RETURN(bool applied, mm_post->compute_with_post(fc, ep, bias ? bias->numel() : 0,
                                                                       z ? &z->shape() : nullptr));
        if (applied && fc.out_ && !fc.is_temp_) {
          if (act_map_) vector_activation_pass(ctx.pool(), fc.out_->data<float>(), nullptr, fc.out_->numel());
          return Status::Ok();
        }
        if (applied) return ctx.error("fused kernel: the MatMul applied the epilogue to a temporary output");
      }
    }
    // Conv on float with Relu/Clip/LeakyRelu/no activation: the residual and activation go into the GEMM's
    // store (and a pre-activation into its input packing).
    auto* conv_post = dynamic_cast<ConvWithPost*>(inner_.get());
    const bool in_conv =
        conv_post && epilogue_in_conv(ctx.input(0).dtype(), z ? std::optional(z->dtype()) : std::nullopt);
    Value preact;    // the general path's pre-activated X
    Value shuffled;  // X shuffled, where the conv does not read it through the shuffle
    int64_t shuffle_in_conv = 0;
    if (!shuffle_split_.empty()) {
      const Tensor& x0 = ctx.input(0);
      if (x0.numel() != shape_numel(shuffled_shape_) || !dtype_is_float(x0.dtype())) {
        return ctx.error("input_shuffle_shape " + shape_to_string(shuffle_split_) + " does not fit input " +
                         x0.describe());
      }
      if (in_conv && x0.shape() == shuffled_shape_) {
        shuffle_in_conv = shuffle_split_[1];
      } else {
        const Tensor xc = x0.contiguous();
        Tensor xs(x0.dtype(), shuffled_shape_);
        const int64_t A = shuffle_split_[0], G = shuffle_split_[1], K = shuffle_split_[2];
        channel_shuffle_copy(xc.raw_data(), xs.raw_data(), A, G, K, dtype_storage_bytes(x0.dtype(), x0.numel() / (A * G * K)));
        shuffled = Value(std::move(xs));
        fc.in0_override_ = &shuffled;
      }
    }
    if (in_conv) {
      ConvPost post;
      post.input_shuffle = shuffle_in_conv;
      post.residual = z ? z->data<float>() : nullptr;
      post.act = act_.kind;
      post.act_a = act_.a;
      post.act_b = act_.b;
      if (pre) {
        post.pre_scale = pre_scale_.data();
        post.pre_shift = pre_shift_.data();
      }
      NXRT_ASSIGN_OR_RETURN(bool applied, conv_post->compute_with_post(fc, post, z ? &z->shape() : nullptr));
      if (applied && fc.out_ && !fc.is_temp_) return Status::Ok();
      if (applied) return ctx.error("fused kernel: the Conv applied the epilogue to a temporary output");
      if (pre) return ctx.error("fused kernel: the Conv could not take the pre-activation (not a 1x1 conv?)");
    } else {
      if (pre) {
        // x' = max(x * a[c] + b[c], 0) per channel (BatchNormRelu's arithmetic), then the plain Conv.
        const Tensor& x0 = ctx.input(0);
        Tensor xp(DataType::kFloat, x0.shape());
        const int64_t C = x0.dim(1), plane = C > 0 ? x0.numel() / (x0.dim(0) * C) : 0;
        const float* xs = x0.data<float>();
        float* xd = xp.data<float>();
        for (int64_t p = 0; p < x0.dim(0) * C; ++p) {
          const size_t c = static_cast<size_t>(p % C);
          scale_shift_relu(xs + p * plane, xd + p * plane, plane, pre_scale_[c], pre_shift_[c]);
        }
        preact = Value(std::move(xp));
        fc.in0_override_ = &preact;
      }
      NXRT_RETURN_IF_ERROR(inner_->compute(fc));
    }
    if (!fc.out_) return ctx.error("fused kernel: the wrapped " + inner_op_ + " produced no output");
    Tensor& y = *fc.out_;
    if (z && z->dtype() != y.dtype()) return ctx.error("residual input dtype differs from the output's");
    if (bias && bias->dtype() != y.dtype()) return ctx.error("bias dtype differs from the output's");
    const int64_t ncol = y.rank() > 0 ? y.dim(-1) : 1;
    if (bias && !(bias->numel() == ncol || bias->numel() == 1)) {
      return ctx.error("bias " + bias->describe() + " does not match the last axis of " + y.describe());
    }
    return dispatch_float(
        y.dtype(),
        [&](auto tag) -> Status {
          using T = decltype(tag);
          using CT = ct_of<T>;
          T* yd = y.data<T>();
          const int64_t n = y.numel();
          if (bias) {
            const T* bd = bias->data<T>();
            const bool scalar = bias->numel() == 1;
            if (scalar) {
              const CT b0 = static_cast<CT>(bd[0]);
              for (int64_t i = 0; i < n; ++i) yd[i] = T(static_cast<CT>(yd[i]) + b0);
            } else if (ncol > 0) {
              // The bias in the compute type: read in place for float, else converted into step scratch.
              const CT* bc;
              if constexpr (std::is_same_v<T, CT>) {
                bc = bd;
              } else {
                NXRT_ASSIGN_OR_RETURN(void* ws, ctx.workspace(static_cast<size_t>(ncol) * sizeof(CT)));
                CT* conv = static_cast<CT*>(ws);
                for (int64_t c = 0; c < ncol; ++c) conv[c] = static_cast<CT>(bd[c]);
                bc = conv;
              }
              for (int64_t r0 = 0; r0 < n; r0 += ncol) {
                T* row = yd + r0;
                for (int64_t c = 0; c < ncol; ++c) row[c] = T(static_cast<CT>(row[c]) + bc[c]);
              }
            }
          }
          if (!fc.is_temp_) {
            const T* zd = z ? z->data<T>() : nullptr;
            if (!zd && act_.kind == Activation::kNone) return Status::Ok();
            const ActParams act = act_;
            const bool avx2 = epilogue_avx2_;
            if constexpr (std::is_same_v<T, float>) {
              if (act_map_) {
                vector_activation_pass(ctx.pool(), yd, zd, n);
                return Status::Ok();
              }
            }
            ctx.pool().parallel_for(n, 1 << 14, [&](int64_t i0, int64_t i1) {
              epilogue_dispatch<T, CT>(avx2, yd, zd, i0, i1, act);
            });
            return Status::Ok();
          }
          // General path: the wrapped op's result and Z broadcast to the output shape.
          Dims out_shape;
          if (!z) {
            out_shape = y.shape();
          } else if (!broadcast_shapes(y.shape(), z->shape(), &out_shape)) {
            return ctx.error("residual " + z->describe() + " does not broadcast with " + y.describe());
          }
          NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, y.dtype(), out_shape));
          T* od = out->data<T>();
          const int64_t total = out->numel();
          const Dims ys = broadcast_strides(y.shape(), out_shape);
          const Dims zs = z ? broadcast_strides(z->shape(), out_shape) : Dims(out_shape.size(), 0);
          const T* zd = z ? z->data<T>() : nullptr;
          const size_t r = out_shape.size();
          std::vector<int64_t> idx(r, 0);
          int64_t yo = 0, zo = 0;
          for (int64_t i = 0; i < total; ++i) {
            CT s = static_cast<CT>(yd[yo]);
            if (zd) s = static_cast<CT>(T(s + static_cast<CT>(zd[zo])));
            od[i] = T(apply_activation(act_.kind, s, act_.a, act_.b));
            for (size_t d = r; d-- > 0;) {
              ++idx[d];
              yo += ys[d];
              zo += zs[d];
              if (idx[d] < out_shape[d]) break;
              yo -= ys[d] * out_shape[d];
              zo -= zs[d] * out_shape[d];
              idx[d] = 0;
            }
          }
          return Status::Ok();
        },
        [&] { return ctx.error("fused kernel: unsupported dtype " + std::string(dtype_name(y.dtype()))); });
  }

 private:
  // y (+ z when given), then the activation's vector body (act_map_ set), in chunks over the pool.
  void vector_activation_pass(ep::ThreadPool& pool, float* yd, const float* zd, int64_t n) const {
    ActParams add_only = act_;
    add_only.kind = Activation::kNone;
    pool.parallel_for(n, 1 << 14, [&](int64_t i0, int64_t i1) {
      if (zd) epilogue_dispatch<float, float>(epilogue_avx2_, yd, zd, i0, i1, add_only);
      act_map_(act_fn_, yd + i0, nullptr, yd + i0, i1 - i0);
    });
  }

  std::string inner_op_;
  size_t n_inner_ = 0;
  int64_t dflt_opset_ = 13;
  bool has_bias_ = false;
  // FusedConv's input_shuffle_shape [A, G, K, d...] (empty: none) and the shape the conv reads, [A, G * K, d...].
  Status init_shuffle(const ep::KernelInfo& info) {
    shuffle_split_ = info.attr_ints("input_shuffle_shape", {});
    if (shuffle_split_.empty()) return Status::Ok();
    bool valid = info.op_type() == "FusedConv" && shuffle_split_.size() >= 3;
    int64_t total = 1;  // every size positive and their product representable (a model's attribute)
    for (int64_t d : shuffle_split_) valid = valid && d > 0 && !__builtin_mul_overflow(total, d, &total);
    if (!valid) {
      return info.error("input_shuffle_shape must be 3 or more positive sizes [A, G, K, ...] on a FusedConv, got " +
                        shape_to_string(shuffle_split_));
    }
    shuffled_shape_ = {shuffle_split_[0], shuffle_split_[1] * shuffle_split_[2]};
    shuffled_shape_.insert(shuffled_shape_.end(), shuffle_split_.begin() + 3, shuffle_split_.end());
    return Status::Ok();
  }

  std::vector<float> pre_scale_, pre_shift_;  // FusedConv pre-activation (empty: none)
  Dims shuffle_split_, shuffled_shape_;
  ActParams act_;
  bool epilogue_avx2_ = false;  // the epilogue pass takes its AVX2 loop (the kernel's tier, at creation)
  vecmath::MapFn act_map_ = nullptr;  // the activation's vector body, when it has one at this tier
  vecmath::Fn act_fn_ = vecmath::Fn::kSigmoid;
  ir::Node inner_node_;
  std::unique_ptr<ep::KernelInfo> inner_info_;
  std::unique_ptr<ep::Kernel> inner_;
};

}  // namespace

void register_fused_attention(ep::KernelRegistry& r);  // fused_attention.cpp
void register_bn_relu(ep::KernelRegistry& r);          // batch_norm_relu.cpp
void register_byte_table(ep::KernelRegistry& r);       // byte_table.cpp

void register_fused_ops(ep::KernelRegistry& r) {
  register_fused_attention(r);
  register_bn_relu(r);
  register_byte_table(r);
  r.add_class<FusedKernel>(ir::kNxrtDomain, "FusedConv");
  r.add_class<FusedKernel>(ir::kNxrtDomain, "FusedGemm");
  r.add_class<FusedKernel>(ir::kNxrtDomain, "FusedMatMul");
  struct Copy {
    const char* op;
    int64_t opset;
  };
  for (Copy c : {Copy{"LayerNormalization", 17}, Copy{"RMSNormalization", 23}, Copy{"Gelu", 20}, Copy{"HardSwish", 14}, Copy{"Swish", 24}}) {
    const ep::KernelDef* def = r.find("", c.op, c.opset);
    if (!def) continue;
    ep::KernelDef copy = *def;
    copy.domain = ir::kNxrtDomain;
    copy.since_version = 1;
    copy.end_version = INT64_MAX;
    r.add(std::move(copy));
  }
}

}  // namespace nxrt::ops
