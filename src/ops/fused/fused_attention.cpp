// nxrt::FusedAttention(Q, Kt, V, mask?, scale?): the unfused pattern
//     Y = MatMul(Softmax(MatMul(Q, Kt) [*|/ scale] [+ mask], axis=-1), V)
// with exactly those ops' semantics. Attributes: `scale_op` ("Mul", "Div" or ""), `softmax_opset`,
// `softmax_axis` (the fast path needs it to be the last axis), `transpose_output` (1: Y is that result
// with axes 1 and 2 swapped, rank 4 only: the Transpose(perm = [0, 2, 1, 3]) that merges heads, taken
// by the optimizer; the fast path writes each head's rows H * Dv apart, straight into [B, S, H, Dv]).
//
// Fast path (float32, Q/Kt/V of rank >= 2 with identical batch dims, a mask that broadcasts into the
// scores without widening them): per batch item, scores = Q_b * Kt_b into a scratch [S, L], scale, mask,
// softmax and P * V_b straight into the output; the [batch, S, L] score tensor is never materialized.
// Q, Kt and V are read where they lie when they are the strided views a head split makes (a Transpose
// of [B, S, H, D]: each head's matrix is rows of D contiguous floats H * D apart), not gathered first.
// Anything else runs the original ops' kernels one after the other (exact fallback).
#include <cmath>
#include <limits>

#include "ep/kernel.h"
#include "ep/standalone_context.h"
#include "ops/common.h"
#include "ops/elementwise/vec_math.h"
#include "ops/gemm/gemm.h"
#include "ops/fused/fused_ops.h"
#include "ops/tensor/tensor_util.h"

namespace nxrt::ops {

namespace {

struct Step {
  ir::Node node;
  std::unique_ptr<ep::KernelInfo> info;
  std::unique_ptr<ep::Kernel> kernel;
};

// How the fast path addresses Q, Kt and V when they are strided views.
struct StridedOperands {
  // Whether every operand's matrices are addressable as the GEMM reads them: Q and V with unit stride
  // along their last axis, Kt with unit stride along either of its last two.
  static bool fit(const Tensor& q, const Tensor& kt, const Tensor& v) {
    if (q.is_contiguous() && kt.is_contiguous() && v.is_contiguous()) return true;
    const Dims qs = q.effective_strides(), ks = kt.effective_strides(), vs = v.effective_strides();
    const size_t r = qs.size();
    if (r < 2 || ks.size() != r || vs.size() != r) return false;
    return qs[r - 1] == 1 && vs[r - 1] == 1 && (ks[r - 1] == 1 || ks[r - 2] == 1);
  }
  // Where batch item b's matrix of an operand of shape `sh` and strides `st` (effective_strides, taken
  // once per call) starts, in elements from data<float>(); b * rows * cols for a contiguous one.
  static int64_t item_offset(const Dims& sh, const Dims& st, int64_t b) {
    int64_t off = 0;
    for (size_t d = sh.size() - 2; d-- > 0;) {
      off += (b % sh[d]) * st[d];
      b /= sh[d];
    }
    return off;
  }
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
    transpose_output_ = info.attr_int("transpose_output", 0) != 0;
    NXRT_RETURN_IF_ERROR(add_step(info, "Softmax", sm_opset, {axis}));
    NXRT_RETURN_IF_ERROR(add_step(info, "MatMul", 13, {}));
    return Status::Ok();
  }

  // Everything the fast path decides from dtypes and shapes: whether it applies, the output shape,
  // the mask's per-item offsets and strides, how the work splits over the pool, and the scratch
  // (one [S, L] score block per worker) it declares as the variant's workspace.
  struct Variant final : ep::KernelVariant {
    bool fast = false;
    int64_t S = 0, D = 0, L = 0, Dv = 0, nb = 1;
    int64_t workers = 1;  // > 1: batch items split over this many pool tasks, one score block each
    int64_t mrow = 0, mcol = 0;
    std::vector<int64_t> moff;  // per batch item (empty: no mask)
    Dims out_shape;
    size_t workspace_bytes() const override {
      return fast ? static_cast<size_t>(workers * S * L) * sizeof(float) : 0;
    }
  };

  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    auto v = std::make_unique<Variant>();
    plan(sc.dtype(0), sc.shape(0), sc.dtype(1), sc.shape(1), sc.dtype(2), sc.shape(2),
         sc.has_input(3) ? sc.dtype(3) : DataType::kUndefined, sc.has_input(3) ? &sc.shape(3) : nullptr,
         sc.has_input(4) ? sc.dtype(4) : DataType::kUndefined, sc.has_input(4) ? &sc.shape(4) : nullptr,
         sc.num_threads(), *v);
    return std::unique_ptr<ep::KernelVariant>(std::move(v));
  }

  Status compute(ep::KernelContext& ctx) const override {
    const Tensor& q = ctx.input(0);
    const Tensor& kt = ctx.input(1);
    const Tensor& v = ctx.input(2);
    const Tensor* mask = ctx.has_input(3) ? &ctx.input(3) : nullptr;
    const Tensor* scale = ctx.has_input(4) ? &ctx.input(4) : nullptr;
    if (!scale_op_.empty() && !scale) return ctx.error("fused attention: missing scale");
    const Variant* var = dynamic_cast<const Variant*>(ctx.variant());
    Variant local;  // a context without a kernel cache: plan this call
    if (!var) {
      plan(q.dtype(), q.shape(), kt.dtype(), kt.shape(), v.dtype(), v.shape(), mask ? mask->dtype() : DataType::kUndefined,
           mask ? &mask->shape() : nullptr, scale ? scale->dtype() : DataType::kUndefined,
           scale ? &scale->shape() : nullptr, ctx.pool().num_threads(), local);
      var = &local;
    }
    // Q, Kt and V may come as strided views (a Transpose splitting heads, accepts_strided_input): the
    // fast path reads them in place where each matrix's rows are runs of contiguous floats (Kt's
    // either way: a transposed view of K is B transposed); anything else gets contiguous copies here.
    if (var->fast && StridedOperands::fit(q, kt, v)) return fast(ctx, *var, q, kt, v, mask, scale);
    const Tensor qc = q.contiguous(), ktc = kt.contiguous(), vc = v.contiguous();
    if (var->fast) return fast(ctx, *var, qc, ktc, vc, mask, scale);
    return fallback(ctx, qc, ktc, vc, mask, scale);
  }
  // The executor hands Q, Kt and V over as they are (views included); compute copies what the fast path
  // cannot read in place. The mask and scale come contiguous.
  bool accepts_strided_input(size_t i) const override { return i <= 2; }

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

  Result<Value> run_step(ep::KernelContext& ctx, size_t i, std::vector<Value> in) const {
    ep::StandaloneContext lc(*steps_[i]->info, std::move(in), ctx);
    NXRT_RETURN_IF_ERROR(steps_[i]->kernel->compute(lc));
    Value r = lc.output(0);
    if (r.is_tensor() && !r.tensor().is_contiguous()) r = Value(r.tensor().contiguous());
    return r;
  }

  Status fallback(ep::KernelContext& ctx, const Tensor& q, const Tensor& kt, const Tensor& v, const Tensor* mask,
                  const Tensor* scale) const {
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
    if (!transpose_output_) return ctx.set_output(0, std::move(s));
    // [B, H, S, Dv] -> [B, S, H, Dv], gathered straight into the output (run_step's results are contiguous).
    const Tensor& t = s.tensor();
    if (t.rank() != 4) return ctx.error("fused attention: transpose_output needs rank-4 operands, got " +
                                        shape_to_string(t.shape()));
    NXRT_ASSIGN_OR_RETURN(StridedLayout merged, transpose_layout(t.shape(), Dims{0, 2, 1, 3}));
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, t.dtype(), merged.shape));
    copy_window(t, merged, *y, &ctx.pool());
    return Status::Ok();
  }

  void plan(DataType qt, const Dims& qs, DataType ktt, const Dims& kts, DataType vt, const Dims& vs, DataType mt,
            const Dims* ms, DataType st, const Dims* ss, int threads, Variant& out) const {
    out.fast = false;
    if (qt != DataType::kFloat || ktt != DataType::kFloat || vt != DataType::kFloat) return;
    if (ss && (st != DataType::kFloat || shape_numel(*ss) != 1)) return;
    if (ms && mt != DataType::kFloat) return;
    const int64_t r = static_cast<int64_t>(qs.size());
    if (r < 2 || static_cast<int64_t>(kts.size()) != r || static_cast<int64_t>(vs.size()) != r) return;
    if (transpose_output_ && r != 4) return;  // the fallback reports it
    if (axis_ != -1 && axis_ != r - 1) return;
    for (size_t i = 0; i + 2 < qs.size(); ++i) {
      if (qs[i] != kts[i] || qs[i] != vs[i]) return;
    }
    const int64_t S = qs[static_cast<size_t>(r - 2)], D = qs[static_cast<size_t>(r - 1)];
    const int64_t L = kts[static_cast<size_t>(r - 1)], Dv = vs[static_cast<size_t>(r - 1)];
    if (kts[static_cast<size_t>(r - 2)] != D || vs[static_cast<size_t>(r - 2)] != L || S <= 0 || L <= 0) return;
    Dims scores(qs.begin(), qs.end());
    scores[static_cast<size_t>(r - 1)] = L;
    if (ms) {
      if (static_cast<int64_t>(ms->size()) > r) return;
      Dims bshape;
      if (!broadcast_shapes(scores, *ms, &bshape) || bshape != scores) return;
    }
    out.fast = true;
    out.S = S;
    out.D = D;
    out.L = L;
    out.Dv = Dv;
    out.out_shape = qs;
    out.out_shape[static_cast<size_t>(r - 1)] = Dv;
    if (transpose_output_) std::swap(out.out_shape[1], out.out_shape[2]);
    out.nb = 1;
    for (int64_t i = 0; i < r - 2; ++i) out.nb *= qs[static_cast<size_t>(i)];
    // Batch items in parallel when there are enough of them, else each GEMM on the pool.
    out.workers = out.nb >= threads && threads > 1 ? threads : 1;
    out.moff.clear();
    if (ms) {
      // Mask offsets per batch item, and its row / column strides.
      const Dims mstr = broadcast_strides(*ms, scores);
      out.mrow = mstr[static_cast<size_t>(r - 2)];
      out.mcol = mstr[static_cast<size_t>(r - 1)];
      out.moff.assign(static_cast<size_t>(out.nb), 0);
      std::vector<int64_t> idx(static_cast<size_t>(std::max<int64_t>(0, r - 2)), 0);
      int64_t off = 0;
      for (int64_t b = 0; b < out.nb; ++b) {
        out.moff[static_cast<size_t>(b)] = off;
        for (int64_t d = r - 2; d-- > 0;) {
          const size_t du = static_cast<size_t>(d);
          ++idx[du];
          off += mstr[du];
          if (idx[du] < scores[du]) break;
          off -= mstr[du] * scores[du];
          idx[du] = 0;
        }
      }
    }
  }

  Status fast(ep::KernelContext& ctx, const Variant& pv, const Tensor& q, const Tensor& kt, const Tensor& v,
              const Tensor* mask, const Tensor* scale) const {
    const int64_t S = pv.S, D = pv.D, L = pv.L, Dv = pv.Dv, nb = pv.nb;
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, pv.out_shape));
    NXRT_ASSIGN_OR_RETURN(void* ws, ep::variant_workspace(ctx, pv));
    float* scratch = static_cast<float*>(ws);
    const float sc = scale ? scale->data<float>()[0] : 1.f;
    const bool mul = scale_op_ == "Mul", div = scale_op_ == "Div";
    const float* qd = q.data<float>();
    const float* kd = kt.data<float>();
    const float* vd = v.data<float>();
    const float* md = mask ? mask->data<float>() : nullptr;
    const int64_t* moff = pv.moff.data();
    const int64_t mrow = pv.mrow, mcol = pv.mcol;
    float* yd = y->data<float>();
    // Row strides of Q, Kt (or, Kt a transposed view, its column stride: B transposed) and V.
    const Dims qst = q.effective_strides(), kst = kt.effective_strides(), vst = v.effective_strides();
    const size_t r = qst.size();
    const int64_t lda = qst[r - 2], ldv = vst[r - 2];
    const bool kt_trans = kst[r - 1] != 1;
    const int64_t ldk = kt_trans ? kst[r - 1] : kst[r - 2];
    // Item b's output rows: [S, Dv] at b * S * Dv, or with transpose_output (items b = (n, h) of
    // [B, H]) rows H * Dv apart from n * S * H * Dv + h * Dv.
    const int64_t H = transpose_output_ ? q.dim(1) : 1;
    const int64_t ldy = H * Dv;
    auto y_item = [&](int64_t b) { return yd + (b / H) * S * H * Dv + (b % H) * Dv; };
    ep::ThreadPool& pool = ctx.pool();
    ep::ThreadPool* gemm_pool = pv.workers > 1 ? nullptr : &pool;
    // The softmax rows on the unfused Softmax kernel's vector body at this tier (the same function, so
    // the same bits as the unfused graph's Softmax); the scalar loop below where there is none.
    const vecmath::SoftmaxRowFn softmax_row = vecmath::softmax_row_for_tier(ctx.info().isa());
    // Worker w takes batch items [w*nb/W, (w+1)*nb/W) with score block w: each item's arithmetic is
    // the same whatever the split, so results do not depend on the thread count.
    auto work = [&](int64_t w0, int64_t w1) {
      for (int64_t w = w0; w < w1; ++w) {
        float* p = scratch + w * S * L;
        const int64_t b0 = w * nb / pv.workers, b1 = (w + 1) * nb / pv.workers;
        for (int64_t b = b0; b < b1; ++b) {
          gemm_f32(false, kt_trans, S, L, D, 1.f, qd + StridedOperands::item_offset(q.shape(), qst, b), lda,
                   kd + StridedOperands::item_offset(kt.shape(), kst, b), ldk, 0.f, p, L, gemm_pool);
          for (int64_t s = 0; s < S; ++s) {
            float* row = p + s * L;
            if (mul) {
              for (int64_t j = 0; j < L; ++j) row[j] *= sc;
            } else if (div) {
              for (int64_t j = 0; j < L; ++j) row[j] /= sc;
            }
            if (md) {
              const float* mr = md + moff[b] + s * mrow;
              for (int64_t j = 0; j < L; ++j) row[j] += mr[j * mcol];
            }
            if (softmax_row) {
              softmax_row(row, row, L, false);
              continue;
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
          gemm_f32(false, false, S, Dv, L, 1.f, p, L, vd + StridedOperands::item_offset(v.shape(), vst, b), ldv, 0.f,
                   y_item(b), ldy, gemm_pool);
        }
      }
    };
    if (pv.workers > 1) {
      pool.parallel_for(pv.workers, 1, work);
    } else {
      work(0, 1);
    }
    return Status::Ok();
  }

  std::string scale_op_;
  int64_t axis_ = -1;
  bool transpose_output_ = false;
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace

void register_fused_attention(ep::KernelRegistry& r) {
  r.add_class<FusedAttentionKernel>(ir::kNxrtDomain, "FusedAttention");
}

}  // namespace nxrt::ops
