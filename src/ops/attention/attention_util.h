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
// GEMM-based float32 path (same results within float rounding). pool may be null. The (batch, head)
// pairs split into attention_fast_workers() fixed ranges, each with its own [Sq, T] score block in
// `scratch` (attention_fast_scratch_bytes(): the caller takes it from KernelContext::workspace, so a
// decode step allocates nothing and a captured replay finds it at its recorded address). Each pair's
// arithmetic does not depend on the split.
int64_t attention_fast_workers(const AttnProblem<float>& p, const ep::ThreadPool* pool);
size_t attention_fast_scratch_bytes(const AttnProblem<float>& p, const ep::ThreadPool* pool);
void attention_fast(const AttnProblem<float>& p, ep::ThreadPool* pool, float* scratch);

// A float/double/float16/bfloat16 input as compute-type values; another dtype is an error naming it.
template <typename C>
Result<std::vector<C>> read_float_input(const ep::KernelContext& ctx, const Tensor& t, const char* name) {
  auto v = read_floats_as<C>(t);
  if (!v.ok()) {
    return ctx.error(std::string(name) + " must be a float tensor, got " + t.describe(), StatusCode::kInvalidArgument);
  }
  return v;
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
