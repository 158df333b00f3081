// com.microsoft EmbedLayerNormalization (BERT / GPT-2 exports of ORT's transformer optimizer; semantics:
// onnxruntime docs/ContribOperators.md):
//   inputs  0 input_ids [B, S], 1 segment_ids [B, S] (optional), 2 word_embedding [V, H],
//           3 position_embedding [P, H], 4 segment_embedding [G, H] (optional), 5 gamma [H], 6 beta [H]
//           (optional), 7 mask [B, S] (optional), 8 position_ids [B, S] or [1, S] (optional; else 0..S-1)
//   outputs 0 LayerNorm(word[id] + position[pos] (+ segment[seg])) * gamma + beta,
//           1 mask_index [B] int32: the count of non-zero mask entries per row (0 without a mask),
//           2 embedding_sum (the sum before the normalization)
// Ids are int32 (int64 accepted); an id outside its table is an error naming the input and position.
#include <cmath>
#include <string>
#include <vector>

#include "ep/slot_scratch.h"
#include "ops/common.h"

namespace nxrt::ops::contrib {
namespace {

int64_t id_at(const Tensor& t, int64_t i) {
  return t.dtype() == DataType::kInt64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
}

bool is_id_type(DataType d) { return d == DataType::kInt32 || d == DataType::kInt64; }

Status embed_layer_norm(ep::KernelContext& ctx) {
  const Tensor& ids = ctx.input(0);
  const Tensor& word = ctx.input(2);
  const Tensor& posemb = ctx.input(3);
  const Tensor& gamma = ctx.input(5);
  const Tensor* seg = ctx.has_input(1) ? &ctx.input(1) : nullptr;
  const Tensor* segemb = ctx.has_input(4) ? &ctx.input(4) : nullptr;
  const Tensor* beta = ctx.has_input(6) ? &ctx.input(6) : nullptr;
  const Tensor* mask = ctx.has_input(7) ? &ctx.input(7) : nullptr;
  const Tensor* pos = ctx.has_input(8) ? &ctx.input(8) : nullptr;
  const float eps = ctx.info().attr_float("epsilon", 1e-12f);
  if (!is_id_type(ids.dtype()) || ids.rank() != 2) {
    return ctx.error("input_ids must be int32 [batch, seq], got " + ids.describe(), StatusCode::kInvalidArgument);
  }
  const int64_t B = ids.dim(0), S = ids.dim(1);
  const DataType dt = word.dtype();
  if (word.rank() != 2 || posemb.rank() != 2 || posemb.dim(1) != word.dim(1) || posemb.dtype() != dt) {
    return ctx.error("word_embedding and position_embedding must be [*, hidden] of one float type, got " +
                     word.describe() + ", " + posemb.describe(), StatusCode::kInvalidArgument);
  }
  const int64_t H = word.dim(1);
  auto vec_ok = [&](const Tensor* t) { return !t || (t->dtype() == dt && t->numel() == H); };
  if (!vec_ok(&gamma) || !vec_ok(beta)) {
    return ctx.error("gamma / beta must be " + std::string(dtype_name(dt)) + " [" + std::to_string(H) + "]",
                     StatusCode::kInvalidArgument);
  }
  if (seg != segemb && (!seg || !segemb)) {
    return ctx.error("segment_ids and segment_embedding must be given together", StatusCode::kInvalidArgument);
  }
  if (seg && (!is_id_type(seg->dtype()) || seg->shape() != ids.shape() || segemb->rank() != 2 ||
              segemb->dim(1) != H || segemb->dtype() != dt)) {
    return ctx.error("segment_ids must match input_ids and segment_embedding be [*, hidden], got " + seg->describe() +
                     ", " + segemb->describe(), StatusCode::kInvalidArgument);
  }
  if (mask && (!is_id_type(mask->dtype()) || mask->shape() != ids.shape())) {
    return ctx.error("mask must be int32 shaped like input_ids, got " + mask->describe(), StatusCode::kInvalidArgument);
  }
  const bool pos_shared = pos && pos->rank() == 2 && pos->dim(0) == 1 && B != 1;
  if (pos && (!is_id_type(pos->dtype()) || pos->rank() != 2 || pos->dim(1) != S || (pos->dim(0) != B && !pos_shared))) {
    return ctx.error("position_ids must be int32 [batch or 1, seq], got " + pos->describe(), StatusCode::kInvalidArgument);
  }
  const int64_t V = word.dim(0), P = posemb.dim(0), G = segemb ? segemb->dim(0) : 0;
  // Check every index before writing anything.
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      const int64_t i = b * S + s;
      const int64_t w = id_at(ids, i);
      const int64_t p = pos ? id_at(*pos, pos_shared ? s : i) : s;
      if (w < 0 || w >= V) {
        return ctx.error("input_ids[" + std::to_string(b) + ", " + std::to_string(s) + "] = " + std::to_string(w) +
                         " is outside word_embedding's " + std::to_string(V) + " rows", StatusCode::kInvalidArgument);
      }
      if (p < 0 || p >= P) {
        return ctx.error("position " + std::to_string(p) + " at [" + std::to_string(b) + ", " + std::to_string(s) +
                         "] is outside position_embedding's " + std::to_string(P) + " rows", StatusCode::kInvalidArgument);
      }
      if (seg) {
        const int64_t g = id_at(*seg, i);
        if (g < 0 || g >= G) {
          return ctx.error("segment_ids[" + std::to_string(b) + ", " + std::to_string(s) + "] = " + std::to_string(g) +
                           " is outside segment_embedding's " + std::to_string(G) + " rows", StatusCode::kInvalidArgument);
        }
      }
    }
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * Y, ctx.allocate_output(0, dt, Dims{B, S, H}));
  if (ctx.output_requested(1)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * mi, ctx.allocate_output(1, DataType::kInt32, Dims{B}));
    for (int64_t b = 0; b < B; ++b) {
      int32_t n = 0;
      for (int64_t s = 0; mask && s < S; ++s) n += id_at(*mask, b * S + s) != 0;
      mi->data<int32_t>()[b] = n;
    }
  }
  Tensor* sum_out = nullptr;
  if (ctx.output_requested(2)) {
    NXRT_ASSIGN_OR_RETURN(sum_out, ctx.allocate_output(2, dt, Dims{B, S, H}));
  }
  return dispatch_float(dt, [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* wt = word.data<T>();
    const T* pt = posemb.data<T>();
    const T* st = segemb ? segemb->data<T>() : nullptr;
    const T* g = gamma.data<T>();
    const T* be = beta ? beta->data<T>() : nullptr;
    T* y = Y->data<T>();
    T* es = sum_out ? sum_out->data<T>() : nullptr;
    // Each chunk's row of sums: its thread's slot.
    NXRT_ASSIGN_OR_RETURN(ep::SlotScratch slots, ep::SlotScratch::take(ctx, static_cast<size_t>(H) * sizeof(float)));
    auto work = [&](int64_t r0, int64_t r1) {
      float* row = slots.mine<float>();
      for (int64_t i = r0; i < r1; ++i) {
        const int64_t s = i % S;
        const int64_t w = id_at(ids, i);
        const int64_t p = pos ? id_at(*pos, pos_shared ? s : i) : s;
        const T* segrow = st ? st + id_at(*seg, i) * H : nullptr;
        double mean = 0;
        for (int64_t h = 0; h < H; ++h) {
          float v = static_cast<float>(wt[w * H + h]) + static_cast<float>(pt[p * H + h]);
          if (segrow) v += static_cast<float>(segrow[h]);
          row[h] = v;
          mean += v;
          if (es) es[i * H + h] = T(v);
        }
        mean /= static_cast<double>(H);
        double var = 0;
        for (int64_t h = 0; h < H; ++h) {
          const double d = row[h] - mean;
          var += d * d;
        }
        var /= static_cast<double>(H);
        const double inv = 1.0 / std::sqrt(var + static_cast<double>(eps));
        for (int64_t h = 0; h < H; ++h) {
          float v = static_cast<float>((row[h] - mean) * inv) * static_cast<float>(g[h]);
          if (be) v += static_cast<float>(be[h]);
          y[i * H + h] = T(v);
        }
      }
    };
    ctx.pool().parallel_for(B * S, 16, work);
    return Status::Ok();
  }, [&] { return ctx.error(std::string("embeddings must be float32/float16/bfloat16/double, got ") + dtype_name(dt), StatusCode::kInvalidArgument); });
}

}  // namespace

void register_contrib_embed_layer_norm(ep::KernelRegistry& r) {
  r.add_fn("com.microsoft", "EmbedLayerNormalization", 1, INT64_MAX, &embed_layer_norm);
}

}  // namespace nxrt::ops::contrib
