// Shared pieces of the attention family (ai.onnx Attention, FlexAttention): the scaled-dot-product core
// over prepared (batch, heads, seq, head_size) arrays in the compute type, in a plain reference form
// (the contract every fast path is tested against) and a float32 fast form built on gemm_f32.
#pragma once
#include <cstdint>
#include <vector>

namespace nxrt::ep {
class ThreadPool;
}

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
// GEMM-based float32 path (same results within float rounding). pool may be null.
void attention_fast(const AttnProblem<float>& p, ep::ThreadPool* pool);

}  // namespace nxrt::ops
