// Shared pieces of the attention family (ai.onnx Attention, FlexAttention): the scaled-dot-product core
// over prepared (batch, heads, seq, head_size) arrays in the compute type, in a plain reference form
// (the contract every fast path is tested against) and a float32 fast form built on gemm_f32.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ops/common.h"

namespace nxrt::ops {

// One attention problem in compute type C (float or double). Layouts are contiguous:
//   q [B, Hq, Sq, D], k [B, Hkv, T, D], v [B, Hkv, T, Dv], y [B, Hq, Sq, Dv], qk_out [B, Hq, Sq, T].
// Query head h reads kv head h / (Hq / Hkv). The bias added to the (softcapped) scores at
// (b, h, i, j) is the sum of
//   mask[b*mask_sb + h*mask_sh + i*mask_si + j]  when mask != nullptr and j < mask_len; -inf for j >= mask_len,
//   -inf when causal and j > i + causal_offset[b],
//   -inf when nonpad != nullptr and j >= nonpad[b].
// Rows whose every score is -inf produce all-zero probabilities (and so zero outputs).
template <typename C>
struct AttnProblem {
  int64_t B = 0, Hq = 0, Hkv = 0, Sq = 0, T = 0, D = 0, Dv = 0;
  C scale = 1;
  C softcap = 0;  // <= 0: none
  const C* q = nullptr;
  const C* k = nullptr;
  const C* v = nullptr;
  const C* mask = nullptr;
  int64_t mask_sb = 0, mask_sh = 0, mask_si = 0, mask_len = 0;
  bool causal = false;
  const int64_t* causal_offset = nullptr;  // [B]; nullptr = all zero
  const int64_t* nonpad = nullptr;         // [B] or nullptr
  int qk_mode = -1;                        // -1: no qk_out; 0 raw, 1 softcapped, 2 + bias, 3 softmax
  C* y = nullptr;
  C* qk_out = nullptr;
};

// Plain loops, double accumulation. Slow; the definition of the semantics.
void attention_reference(const AttnProblem<float>& p);
void attention_reference(const AttnProblem<double>& p);
// GEMM-based float32 path (same results within float rounding). The (batch, head) pairs split into
// plan.workers fixed ranges, each with its own [Sq, T] score block and GEMM packing slot in `scratch`
// (plan.bytes(): a kernel declares it as its variant's workspace, or takes it from
// KernelContext::workspace, so a decode step allocates nothing and a captured replay finds it at its
// recorded address). Each pair's arithmetic does not depend on the split. pool may be null (the
// workers' ranges then run one after the other).
struct AttnFastPlan {
  int64_t workers = 1;
  size_t gemm_off = 0;       // floats from a worker's block to its GEMM slot (after the scores)
  size_t gemm_floats = 0;    // that slot's floats
  size_t worker_floats = 0;  // floats per worker (multiple of 16: blocks stay 64-byte aligned)
  size_t bytes() const { return static_cast<size_t>(workers) * worker_floats * sizeof(float); }
};
// The split for these dimensions on a pool of `threads`. A plan made for T also serves a problem with
// fewer keys (the same other dimensions): each worker's score rows and GEMM slot only get shorter.
AttnFastPlan attention_fast_plan(int64_t B, int64_t Hq, int64_t Sq, int64_t T, int64_t D, int64_t Dv, int threads);
inline AttnFastPlan attention_fast_plan(const AttnProblem<float>& p, int threads) {
  return attention_fast_plan(p.B, p.Hq, p.Sq, p.T, p.D, p.Dv, threads);
}
void attention_fast(const AttnProblem<float>& p, const AttnFastPlan& plan, ep::ThreadPool* pool, float* scratch);

// Floats of GEMM packing scratch (GemmScratch slot_floats) that serve every gemm_f32 call of an
// M' x N' x K' product with M' <= M, N' <= n_max and K' <= k_max: the A block the engine sizes for M
// rows, and a B block bounded by the engine's widest column block (gemm.h documents both bounds), so an
// attention plan sized by the KV bound serves every valid length its runs read.
size_t gemm_scratch_floats_bound(int64_t M, int64_t n_max, int64_t k_max);

// A float/double/float16/bfloat16 input as compute-type values; another dtype is an error naming it.
template <typename C>
Result<std::vector<C>> read_float_input(const ep::KernelContext& ctx, const Tensor& t, const char* name) {
  auto v = read_floats_as<C>(t);
  if (!v.ok()) {
    return ctx.error(std::string(name) + " must be a float tensor, got " + t.describe(), StatusCode::kInvalidArgument);
  }
  return v;
}

// An error of a kernel's plan as its compute reports it, the way the executor reports one from
// specialize: an error that already names the node (KernelInfo::error) as it is, any other through
// ctx.error (which adds the node and its inputs).
inline Status plan_error(const ep::KernelContext& ctx, const Status& s) {
  if (s.message().rfind("node '", 0) == 0) return s;
  return ctx.error(s.message(), s.code());
}

// A stateless attention op whose function takes `reference`: the kernel override reference=1
// (KernelInfo::overrides), read once at creation.
template <Status (*Fn)(ep::KernelContext&, bool reference)>
class ReferenceSwitchKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    reference_ = info.overrides().reference();
    return Status::Ok();
  }
  Status compute(ep::KernelContext& ctx) const override { return Fn(ctx, reference_); }

 private:
  bool reference_ = false;
};

}  // namespace nxrt::ops
