// nxrt::FusedAttention(Q, Kt, V, mask?, scale?): the unfused pattern
//     Y = MatMul(Softmax(MatMul(Q, Kt) [*|/ scale] [+ mask], axis=-1), V)
// with exactly those ops' semantics. Attributes: `scale_op` ("Mul", "Div" or ""), `softmax_opset`,
// `softmax_axis` (the fast path needs it to be the last axis).
//
// Fast path (float32, Q/Kt/V of rank >= 2 with identical batch dims, a mask that broadcasts into the
// scores without widening them): per batch item, scores = Q_b * Kt_b into a scratch [S, L], scale, mask,
// softmax and P * V_b straight into the output; the [batch, S, L] score tensor is never materialized.
// Anything else runs the original ops' kernels one after the other (exact fallback).
#include <cmath>
#include <limits>

#include "ep/kernel.h"
#include "ep/standalone_context.h"
#include "ops/common.h"
#include "ops/gemm/gemm.h"
#include "ops/fused/fused_ops.h"

namespace nxrt::ops {

namespace {

struct Step {
  ir::Node node;
  std::unique_ptr<ep::KernelInfo> info;
  std::unique_ptr<ep::Kernel> kernel;
};

class FusedAttentionKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    scale_op_ = info.attr_string("scale_op", "");
    if (!scale_op_.empty() && scale_op_ != "Mul" && scale_op_ != "Div") return info.error("bad scale_op " + scale_op_);
    const int64_t sm_opset = info.attr_int("softmax_opset", 13);
    NXRT_RETURN_IF_ERROR(add_step(info, "MatMul", 13, {}));
    if (!scale_op_.empty()) NXRT_RETURN_IF_ERROR(add_step(info, scale_op_, 14, {}));
    NXRT_RETURN_IF_ERROR(add_step(info, "Add", 14, {}));
    ir::Attribute axis;
    axis.name = "axis";
    axis.type = ir::Attribute::Type::kInt;
    axis.i = info.attr_int("softmax_axis", -1);
    axis_ = axis.i;
    NXRT_RETURN_IF_ERROR(add_step(info, "Softmax", sm_opset, {axis}));
    NXRT_RETURN_IF_ERROR(add_step(info, "MatMul", 13, {}));
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) override {
    const Tensor& q = ctx.input(0);
    const Tensor& kt = ctx.input(1);
    const Tensor& v = ctx.input(2);
    const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const Tensor* scale = ctx.has_input(4) ? &ctx.input(4) : nullptr;
    if (!scale_op_.empty() && !scale) return ctx.error("fused attention: missing scale");
    if (fast_path_applies(q, kt, v, mask, scale)) return fast(ctx, q, kt, v, mask, scale);
    return fallback(ctx, q, kt, v, mask, scale);
  }

 private:
  Status add_step(const ep::KernelInfo& info, const std::string& op, int64_t opset, std::vector<ir::Attribute> attrs) {
    auto s = std::make_unique<Step>();
    s->node.name = info.node().name + "/" + op;
    s->node.op_type = op;
    s->node.inputs = {"a", "b"};
    if (op == "Softmax") s->node.inputs = {"a"};
    s->node.outputs = {"y"};
    s->node.attributes = std::move(attrs);
    s->info = std::make_unique<ep::KernelInfo>(s->node, opset);
    s->info->registry_ = info.registry();
    if (!info.registry()) return info.error("fused attention: created without a kernel registry");
    const ep::KernelDef* def = info.registry()->find("", op, opset);
    if (!def) return info.error("fused attention: no CPU kernel for " + op);
    NXRT_ASSIGN_OR_RETURN(s->kernel, def->factory(*s->info));
    steps_.push_back(std::move(s));
    return Status::Ok();
  }

  Result<Value> run_step(ep::KernelContext& ctx, size_t i, std::vector<Value> in) {
    ep::StandaloneContext lc(*steps_[i]->info, std::move(in), ctx);
    NXRT_RETURN_IF_ERROR(steps_[i]->kernel->compute(lc));
    Value r = lc.output(0);
    if (r.is_tensor() && !r.tensor().is_contiguous()) r = Value(r.tensor().contiguous());
    return r;
  }

  Status fallback(ep::KernelContext& ctx, const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor* mask,
                  const Tensor* scale) {
    size_t k = 0;
    NXRT_ASSIGN_OR_RETURN(Value s, run_step(ctx, k++, {Value(q), Value(kt)}));
    if (!scale_op_.empty()) {
      NXRT_ASSIGN_OR_RETURN(s, run_step(ctx, k, {s, Value(*scale)}));
    }
    if (!scale_op_.empty()) ++k;
    if (mask) {
      NXRT_ASSIGN_OR_RETURN(s, run_step(ctx, k, {s, Value(*mask)}));
    }
    ++k;
    NXRT_ASSIGN_OR_RETURN(s, run_step(ctx, k++, {s}));
    NXRT_ASSIGN_OR_RETURN(s, run_step(ctx, k++, {s, Value(v)}));
    return ctx.set_output(0, std::move(s));
  }

  bool fast_path_applies(const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor* mask,
                         const Tensor* scale) const {
    if (q.dtype() != DataType::kFloat || kt.dtype() != DataType::kFloat || v.dtype() != DataType::kFloat) return false;
    if (scale && (scale->dtype() != DataType::kFloat || scale->numel() != 1)) return false;
    if (mask && mask->dtype() != DataType::kFloat) return false;
    const int64_t r = q.rank();
    if (r < 2 || kt.rank() != r || v.rank() != r) return false;
    if (axis_ != -1 && axis_ != r - 1) return false;
    for (int64_t i = 0; i < r - 2; ++i) {
      if (q.shape()[i] != kt.shape()[i] || q.shape()[i] != v.shape()[i]) return false;
    }
    const int64_t S = q.dim(-2), D = q.dim(-1), L = kt.dim(-1);
    if (kt.dim(-2) != D || v.dim(-2) != L) return false;
    if (mask) {
      if (mask->rank() > r) return false;
      Dims scores(q.shape().begin(), q.shape().end());
      scores[static_cast<size_t>(r - 1)] = L;
      Dims out;
      if (!broadcast_shapes(scores, mask->shape(), &out) || out != scores) return false;
    }
    return S > 0 && L > 0;
  }

  Status fast(ep::KernelContext& ctx, const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor* mask,
              const Tensor* scale) {
    const int64_t r = q.rank();
    const int64_t S = q.dim(-2), D = q.dim(-1), L = kt.dim(-1), Dv = v.dim(-1);
    Dims out_shape(q.shape().begin(), q.shape().end());
    out_shape[static_cast<size_t>(r - 1)] = Dv;
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, out_shape));
    const int64_t batch = S > 0 && D >= 0 ? q.numel() / std::max<int64_t>(1, S * D) : 0;
    int64_t nb = 1;
    for (int64_t i = 0; i < r - 2; ++i) nb *= q.shape()[static_cast<size_t>(i)];
    (void)batch;
    // Mask offsets per batch item and its row / column strides.
    std::vector<int64_t> moff;
    int64_t mrow = 0, mcol = 0;
    if (mask) {
      Dims scores(q.shape().begin(), q.shape().end());
      scores[static_cast<size_t>(r - 1)] = L;
      const Dims ms = broadcast_strides(mask->shape(), scores);
      mrow = ms[static_cast<size_t>(r - 2)];
      mcol = ms[static_cast<size_t>(r - 1)];
      moff.assign(static_cast<size_t>(nb), 0);
      std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(0, r - 2)), 0);
      int64_t off = 0;
      for (int64_t b = 0; b < nb; ++b) {
        moff[static_cast<size_t>(b)] = off;
        for (int64_t d = r - 2; d-- > 0;) {
          const size_t du = static_cast<size_t>(d);
          ++idx[du];
          off += ms[du];
          if (idx[du] < scores[du]) break;
          off -= ms[du] * scores[du];
          idx[du] = 0;
        }
      }
    }
    const float sc = scale ? scale->data<float>()[0] : 1.f;
    const bool mul = scale_op_ == "Mul", div = scale_op_ == "Div";
    const float* qd = q.data<float>();
    const float* kd = kt.data<float>();
    const float* vd = v.data<float>();
    const float* md = mask ? mask->data<float>() : nullptr;
    float* yd = y->data<float>();
    // Batch items in parallel when there are enough of them, else each GEMM on the pool.
    ep::ThreadPool& pool = ctx.pool();
    const bool per_item = nb >= pool.num_threads();
    ep::ThreadPool* gemm_pool = per_item ? nullptr : &pool;
    auto body = [&](int64_t b0, int64_t b1) {
      std::vector<float> p(static_cast<size_t>(S * L));
      for (int64_t b = b0; b < b1; ++b) {
        gemm_f32(false, false, S, L, D, 1.f, qd + b * S * D, D, kd + b * D * L, L, 0.f, p.data(), L, gemm_pool);
        for (int64_t s = 0; s < S; ++s) {
          float* row = p.data() + s * L;
          if (mul) {
            for (int64_t j = 0; j < L; ++j) row[j] *= sc;
          } else if (div) {
            for (int64_t j = 0; j < L; ++j) row[j] /= sc;
          }
          if (md) {
            const float* mr = md + moff[static_cast<size_t>(b)] + s * mrow;
            for (int64_t j = 0; j < L; ++j) row[j] += mr[j * mcol];
          }
          float mx = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < L; ++j) mx = std::max(mx, row[j]);
          double sum = 0;
          for (int64_t j = 0; j < L; ++j) {
            row[j] = std::exp(row[j] - mx);
            sum += row[j];
          }
          const float inv = static_cast<float>(1.0 / sum);
          for (int64_t j = 0; j < L; ++j) row[j] *= inv;
        }
        gemm_f32(false, false, S, Dv, L, 1.f, p.data(), L, vd + b * L * Dv, Dv, 0.f, yd + b * S * Dv, Dv,
                      gemm_pool);
      }
    };
    if (per_item) pool.parallel_for(nb, 1, body);
    else body(0, nb);
    return Status::Ok();
  }

  std::string scale_op_;
  int64_t axis_ = -1;
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace

void register_fused_attention(ep::KernelRegistry& r) {
  r.add_class<FusedAttentionKernel>(ir::kNxrtDomain, "FusedAttention");
}

}  // namespace nxrt::ops
