// Indexing ops: Gather, GatherElements, GatherND, Scatter, ScatterElements, ScatterND, Compress, NonZero,
// Unique, TopK, and nxrt::SelectPositions. Every index is checked before any element is touched; data-dependent outputs (NonZero,
// Compress, Unique, TopK) are sized at run time.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace nxrt::ops {

using ep::KernelContext;

namespace {

std::string itos(int64_t v) { return std::to_string(v); }

// Normalizes index values against `dim` in place (negative counts from the end); error on out-of-range.
// `what` is a callable making the message prefix: built only on error.
template <typename Idx, typename What>
Status check_indices(KernelContext& ctx, Idx& idx, int64_t dim, What&& what) {
  for (size_t j = 0; j < idx.size(); ++j) {
    int64_t v = idx[j];
    if (v < 0) v += dim;
    if (v < 0 || v >= dim) {
      return ctx.error(what() + ": index " + itos(idx[j]) + " (at flat position " + itos(static_cast<int64_t>(j)) +
                       ") is out of range [" + itos(-dim) + ", " + itos(dim - 1) + "]");
    }
    idx[j] = v;
  }
  return Status::Ok();
}

// Runs f(tag) over the element type; sub-byte dtypes are rejected.
template <typename F>
Status dispatch_any(KernelContext& ctx, DataType dt, F&& f) {
  if (dtype_is_subbyte(dt)) return ctx.error(std::string("dtype ") + dtype_name(dt) + " is not supported");
  return dispatch_elem(dt, std::forward<F>(f), [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(dt)); });
}

// ------------------------------------------------------------------------------------------------
// Gather family

Status gather_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& it, ctx.required_tensor(1, "indices"));
  const int64_t a0 = ctx.info().attr_int("axis", 0);
  int64_t axis = a0;
  if (!normalize_axis(&axis, x.rank())) {
    return ctx.error("axis " + itos(a0) + " out of range for data " + x.describe());
  }
  // Indices in a Dims: inline for the few ids of a decode step, no allocation.
  Dims idx;
  if (it.dtype() == DataType::kInt64) {
    idx.assign(it.data<int64_t>(), it.data<int64_t>() + it.numel());
  } else if (it.dtype() == DataType::kInt32) {
    idx.assign(it.data<int32_t>(), it.data<int32_t>() + it.numel());
  } else {
    NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> v, required_indices(ctx, 1, "indices"));
    idx = v;
  }
  const int64_t dim = x.shape()[axis];
  NXRT_RETURN_IF_ERROR(check_indices(ctx, idx, dim, [&] { return "Gather on data " + x.describe() + " axis " + itos(a0); }));
  Dims out_shape(x.shape().begin(), x.shape().begin() + axis);
  out_shape.insert(out_shape.end(), it.shape().begin(), it.shape().end());
  out_shape.insert(out_shape.end(), x.shape().begin() + axis + 1, x.shape().end());
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i < axis) outer *= x.shape()[i];
    if (i > axis) inner *= x.shape()[i];
  }
  const int64_t n = static_cast<int64_t>(idx.size());
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  if (out->numel() == 0) return Status::Ok();
  return dispatch_any(ctx, x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* s = elem_ptr<E>(x);
    E* d = elem_ptr<E>(*out);
    // Rows (o, j) of `inner` elements each, split over the pool when large.
    auto rows = [&](int64_t b, int64_t e) {
      for (int64_t row = b; row < e; ++row) {
        const int64_t o = row / n, j = row % n;
        const E* src = s + (o * dim + idx[j]) * inner;
        E* dst = d + row * inner;
        if (inner == 1) {
          *dst = *src;
        } else {
          std::copy(src, src + inner, dst);
        }
      }
    };
    const int64_t total = outer * n;
    if (total * inner >= (int64_t{1} << 16)) {
      ctx.pool().parallel_for(total, std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(inner, 1)), rows);
    } else {
      rows(0, total);
    }
    return Status::Ok();
  });
}

Status gather_elements_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& it, ctx.required_tensor(1, "indices"));
  const int64_t r = x.rank();
  const int64_t a0 = ctx.info().attr_int("axis", 0);
  int64_t axis = a0;
  if (!normalize_axis(&axis, r)) return ctx.error("axis " + itos(a0) + " out of range for data " + x.describe());
  if (it.rank() != r) return ctx.error("indices " + it.describe() + " must have the rank of data " + x.describe());
  for (int64_t d = 0; d < r; ++d) {
    if (d != axis && it.shape()[d] > x.shape()[d]) {
      return ctx.error("indices " + it.describe() + " exceed data " + x.describe() + " on axis " + itos(d));
    }
  }
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, required_indices(ctx, 1, "indices"));
  NXRT_RETURN_IF_ERROR(check_indices(ctx, idx, x.shape()[axis], [&] { return "GatherElements on data " + x.describe(); }));
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), it.shape()));
  if (out->numel() == 0) return Status::Ok();
  const Dims xs = contiguous_strides(x.shape());
  return dispatch_any(ctx, x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* s = elem_ptr<E>(x);
    E* d = elem_ptr<E>(*out);
    const int64_t n = it.numel();
    Dims rest = xs;  // the data offset of each index position without its axis coordinate
    rest[axis] = 0;
    auto cur = strided_cursor(it.shape(), it.shape().size(), rest);
    for (int64_t k = 0; k < n; ++k, cur.next()) d[k] = s[cur.offset(0) + idx[k] * xs[axis]];
    return Status::Ok();
  });
}

Status gather_nd_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& it, ctx.required_tensor(1, "indices"));
  const int64_t r = x.rank(), q = it.rank();
  const int64_t b = ctx.info().opset() >= 12 ? ctx.info().attr_int("batch_dims", 0) : 0;
  if (q < 1) return ctx.error("indices " + it.describe() + " must have rank >= 1");
  if (b < 0 || b >= std::min(r, q)) {
    return ctx.error("batch_dims " + itos(b) + " must be in [0, min(rank(data), rank(indices))) for data " +
                     x.describe() + ", indices " + it.describe());
  }
  for (int64_t i = 0; i < b; ++i) {
    if (x.shape()[i] != it.shape()[i]) {
      return ctx.error("batch dims of data " + x.describe() + " and indices " + it.describe() + " differ");
    }
  }
  const int64_t k = it.shape()[q - 1];
  if (k > r - b) return ctx.error("indices " + it.describe() + " index more dims than data " + x.describe() + " has");
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, required_indices(ctx, 1, "indices"));
  Dims out_shape(it.shape().begin(), it.shape().end() - 1);
  out_shape.insert(out_shape.end(), x.shape().begin() + b + k, x.shape().end());
  int64_t slice = 1;
  for (int64_t i = b + k; i < r; ++i) slice *= x.shape()[i];
  int64_t batch = 1;
  for (int64_t i = 0; i < b; ++i) batch *= x.shape()[i];
  int64_t tuples = 1;
  for (int64_t i = b; i < q - 1; ++i) tuples *= it.shape()[i];
  const Dims xs = contiguous_strides(x.shape());
  const int64_t batch_stride = b > 0 ? xs[b - 1] : 0;
  // Resolve every tuple to a data offset first.
  std::vector<int64_t> offs(static_cast<size_t>(batch * tuples));
  for (int64_t bt = 0; bt < batch; ++bt) {
    for (int64_t t = 0; t < tuples; ++t) {
      const int64_t* tup = idx.data() + (bt * tuples + t) * k;
      int64_t off = bt * batch_stride;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t dim = x.shape()[b + j];
        int64_t v = tup[j];
        if (v < 0) v += dim;
        if (v < 0 || v >= dim) {
          return ctx.error("index " + itos(tup[j]) + " out of range for axis " + itos(b + j) + " of data " +
                           x.describe());
        }
        off += v * xs[b + j];
      }
      offs[bt * tuples + t] = off;
    }
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  if (out->numel() == 0) return Status::Ok();
  return dispatch_any(ctx, x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* s = elem_ptr<E>(x);
    E* d = elem_ptr<E>(*out);
    for (size_t t = 0; t < offs.size(); ++t) std::copy(s + offs[t], s + offs[t] + slice, d + t * slice);
    return Status::Ok();
  });
}

// nxrt::SelectPositions(X [batch, seq, ...], positions int64 [batch, k]) -> [batch, k, ...]: row b of the
// output holds X[b, positions[b, j]] for j < k (a negative position counts from the end of the sequence).
// Inserted by SessionOptions::position_selected_outputs in front of a per-position projection (an LLM's
// LM head), so that the projection runs over the k positions the caller needs, not the whole sequence.
// Equal to GatherND(X, Unsqueeze(positions, -1), batch_dims=1); a plain row copy, it needs no other
// variant.
Status select_positions_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& p, ctx.required_tensor(1, "positions"));
  if (x.rank() < 2) return ctx.error("X " + x.describe() + " must be [batch, seq, ...] (rank >= 2)");
  if (p.dtype() != DataType::kInt64 || p.rank() != 2 || p.dim(0) != x.dim(0)) {
    return ctx.error("positions " + p.describe() + " must be int64 [batch, k] with batch " + itos(x.dim(0)) +
                     " (that of X " + x.describe() + ")");
  }
  if (dtype_is_subbyte(x.dtype())) return ctx.error("X " + x.describe() + ": sub-byte dtypes are not supported");
  const int64_t batch = x.dim(0), seq = x.dim(1), k = p.dim(1);
  const Tensor pc = p.contiguous();
  const int64_t* pos = pc.data<int64_t>();
  for (int64_t i = 0; i < batch * k; ++i) {
    const int64_t v = pos[i];
    if (v < -seq || v >= seq) {
      return ctx.error("positions[" + itos(i / k) + ", " + itos(i % k) + "] = " + itos(v) + " is outside the sequence of " +
                       itos(seq) + " positions of X " + x.describe());
    }
  }
  Dims out_shape = x.shape();
  out_shape[1] = k;
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  if (out->numel() == 0) return Status::Ok();
  const Tensor xc = x.contiguous();
  const size_t row_bytes = dtype_storage_bytes(x.dtype(), static_cast<size_t>(x.numel() / std::max<int64_t>(1, batch * seq)));
  const char* src = static_cast<const char*>(xc.raw_data());
  char* dst = static_cast<char*>(out->raw_data());
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < k; ++j) {
      int64_t v = pos[b * k + j];
      if (v < 0) v += seq;
      std::memcpy(dst + static_cast<size_t>(b * k + j) * row_bytes, src + static_cast<size_t>(b * seq + v) * row_bytes,
                  row_bytes);
    }
  }
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Scatter family

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Result<Reduction> parse_reduction(KernelContext& ctx) {
  const std::string s = ctx.info().attr_string("reduction", "none");
  const int64_t opset = ctx.info().opset();
  if (s == "none") return Reduction::kNone;
  if (opset >= 16 && s == "add") return Reduction::kAdd;
  if (opset >= 16 && s == "mul") return Reduction::kMul;
  if (opset >= 18 && s == "max") return Reduction::kMax;
  if (opset >= 18 && s == "min") return Reduction::kMin;
  return ctx.error("unsupported reduction '" + s + "'", StatusCode::kInvalidModel);
}

// Applies updates: dst_offsets[j] receives updates element run j (run elements each).
template <typename T>
void scatter_apply(T* d, const T* u, const std::vector<int64_t>& dst, int64_t run, Reduction red) {
  for (size_t j = 0; j < dst.size(); ++j) {
    T* o = d + dst[j];
    const T* v = u + static_cast<int64_t>(j) * run;
    for (int64_t i = 0; i < run; ++i) {
      if constexpr (std::is_same_v<T, std::string>) {
        o[i] = v[i];
      } else {
        using C = compute_t<T>;
        const C a = static_cast<C>(o[i]);
        const C b = static_cast<C>(v[i]);
        C r;
        switch (red) {
          case Reduction::kAdd: r = static_cast<C>(a + b); break;
          case Reduction::kMul: r = static_cast<C>(a * b); break;
          case Reduction::kMax: r = std::max(a, b); break;
          case Reduction::kMin: r = std::min(a, b); break;
          default: r = b; break;
        }
        o[i] = static_cast<T>(r);
      }
    }
  }
}

Status scatter_run(KernelContext& ctx, const Tensor& x, const Tensor& upd, const std::vector<int64_t>& dst,
                   int64_t run, Reduction red) {
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), x.shape()));
  if (out->numel() > 0) copy_run(x, 0, *out, 0, x.numel());
  if (dst.empty() || run == 0) return Status::Ok();
  if (red == Reduction::kNone) {
    return dispatch_any(ctx, x.dtype(), [&](auto tag) {
      using E = decltype(tag);
      const E* u = elem_ptr<E>(upd);
      E* d = elem_ptr<E>(*out);
      for (size_t j = 0; j < dst.size(); ++j) std::copy(u + j * run, u + (j + 1) * run, d + dst[j]);
      return Status::Ok();
    });
  }
  if (x.dtype() == DataType::kBool) {
    scatter_apply(out->data<uint8_t>(), upd.data<uint8_t>(), dst, run,
                  red == Reduction::kAdd ? Reduction::kMax : red == Reduction::kMul ? Reduction::kMin : red);
    return Status::Ok();
  }
  return dispatch_numeric(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        scatter_apply(out->data<T>(), upd.data<T>(), dst, run, red);
        return Status::Ok();
      },
      [&] { return ctx.error("reduction is not supported for dtype " + x.describe()); });
}

Status scatter_elements_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& it, ctx.required_tensor(1, "indices"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& upd, ctx.required_tensor(2, "updates"));
  NXRT_ASSIGN_OR_RETURN(Reduction red, parse_reduction(ctx));
  const int64_t r = x.rank();
  const int64_t a0 = ctx.info().attr_int("axis", 0);
  int64_t axis = a0;
  if (!normalize_axis(&axis, r)) return ctx.error("axis " + itos(a0) + " out of range for data " + x.describe());
  if (it.shape() != upd.shape() || it.rank() != r || upd.dtype() != x.dtype()) {
    return ctx.error("indices " + it.describe() + " and updates " + upd.describe() +
                     " must have the same shape and the rank (updates: the dtype) of data " + x.describe());
  }
  for (int64_t d = 0; d < r; ++d) {
    if (d != axis && it.shape()[d] > x.shape()[d]) {
      return ctx.error("indices " + it.describe() + " exceed data " + x.describe() + " on axis " + itos(d));
    }
  }
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, required_indices(ctx, 1, "indices"));
  NXRT_RETURN_IF_ERROR(check_indices(ctx, idx, x.shape()[axis], [&] { return "ScatterElements into data " + x.describe(); }));
  const Dims xs = contiguous_strides(x.shape());
  std::vector<int64_t> dst(idx.size());
  Dims rest = xs;  // the data offset of each index position without its axis coordinate
  rest[axis] = 0;
  auto cur = strided_cursor(it.shape(), it.shape().size(), rest);
  for (size_t k = 0; k < idx.size(); ++k, cur.next()) dst[k] = cur.offset(0) + idx[k] * xs[axis];
  return scatter_run(ctx, x, upd, dst, 1, red);
}

Status scatter_nd_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& it, ctx.required_tensor(1, "indices"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& upd, ctx.required_tensor(2, "updates"));
  NXRT_ASSIGN_OR_RETURN(Reduction red, parse_reduction(ctx));
  const int64_t r = x.rank(), q = it.rank();
  if (q < 1) return ctx.error("indices " + it.describe() + " must have rank >= 1");
  const int64_t k = it.shape()[q - 1];
  if (k > r) return ctx.error("indices " + it.describe() + " index more dims than data " + x.describe() + " has");
  Dims want(it.shape().begin(), it.shape().end() - 1);
  want.insert(want.end(), x.shape().begin() + k, x.shape().end());
  if (upd.shape() != want || upd.dtype() != x.dtype()) {
    return ctx.error("updates " + upd.describe() + " must be " + std::string(dtype_name(x.dtype())) +
                     shape_to_string(want) + " for data " + x.describe() + " and indices " + it.describe());
  }
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> idx, required_indices(ctx, 1, "indices"));
  const Dims xs = contiguous_strides(x.shape());
  int64_t run = 1;
  for (int64_t i = k; i < r; ++i) run *= x.shape()[i];
  const int64_t tuples = k == 0 ? shape_numel(Dims(it.shape().begin(), it.shape().end() - 1))
                                : static_cast<int64_t>(idx.size()) / k;
  std::vector<int64_t> dst(static_cast<size_t>(tuples));
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t off = 0;
    for (int64_t j = 0; j < k; ++j) {
      const int64_t dim = x.shape()[j];
      int64_t v = idx[t * k + j];
      if (v < 0) v += dim;
      if (v < 0 || v >= dim) {
        return ctx.error("index " + itos(idx[t * k + j]) + " out of range for axis " + itos(j) + " of data " +
                         x.describe());
      }
      off += v * xs[j];
    }
    dst[t] = off;
  }
  return scatter_run(ctx, x, upd, dst, run, red);
}

// ------------------------------------------------------------------------------------------------
// Compress, NonZero

Status compress_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& cond, ctx.required_tensor(1, "condition"));
  if (cond.rank() != 1) return ctx.error("condition " + cond.describe() + " must be 1-D");
  auto cv = read_int_values(cond);
  if (!cv.ok()) return ctx.error("condition must be bool, got " + cond.describe());
  const bool has_axis = ctx.info().has_attr("axis");
  int64_t axis = 0;
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (has_axis) {
    const int64_t a0 = ctx.info().attr_int("axis", 0);
    axis = a0;
    if (!normalize_axis(&axis, x.rank())) return ctx.error("axis " + itos(a0) + " out of range for " + x.describe());
    dim = x.shape()[axis];
    for (int64_t i = 0; i < x.rank(); ++i) {
      if (i < axis) outer *= x.shape()[i];
      if (i > axis) inner *= x.shape()[i];
    }
  }
  std::vector<int64_t> keep;
  for (size_t i = 0; i < cv->size(); ++i) {
    if ((*cv)[i] == 0) continue;
    if (static_cast<int64_t>(i) >= dim) {
      return ctx.error("condition " + cond.describe() + " selects index " + itos(i) + " beyond the size " + itos(dim) +
                       " of input " + x.describe());
    }
    keep.push_back(static_cast<int64_t>(i));
  }
  Dims out_shape;
  if (has_axis) {
    out_shape = x.shape();
    out_shape[axis] = static_cast<int64_t>(keep.size());
  } else {
    out_shape = {static_cast<int64_t>(keep.size())};
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  const int64_t n = static_cast<int64_t>(keep.size());
  if (out->numel() == 0) return Status::Ok();
  return dispatch_any(ctx, x.dtype(), [&](auto tag) {
    using E = decltype(tag);
    const E* s = elem_ptr<E>(x);
    E* d = elem_ptr<E>(*out);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < n; ++j) {
        const E* src = s + (o * dim + keep[j]) * inner;
        std::copy(src, src + inner, d + (o * n + j) * inner);
      }
    }
    return Status::Ok();
  });
}

Status nonzero_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  const int64_t n = x.numel();
  std::vector<int64_t> hits;
  Status s = Status::Ok();
  if (x.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) {
      if (!x.string_data()[i].empty()) hits.push_back(i);
    }
  } else if (x.dtype() == DataType::kBool) {
    const uint8_t* p = x.data<uint8_t>();
    for (int64_t i = 0; i < n; ++i) {
      if (p[i]) hits.push_back(i);
    }
  } else {
    s = dispatch_numeric(
        x.dtype(),
        [&](auto tag) {
          using T = decltype(tag);
          const T* p = x.data<T>();
          for (int64_t i = 0; i < n; ++i) {
            if (static_cast<compute_t<T>>(p[i]) != compute_t<T>(0)) hits.push_back(i);
          }
          return Status::Ok();
        },
        [&] { return ctx.error("unsupported dtype " + x.describe()); });
  }
  NXRT_RETURN_IF_ERROR(s);
  const int64_t r = std::max<int64_t>(1, x.rank());
  const Dims shape = x.rank() == 0 ? Dims{1} : x.shape();
  const int64_t nnz = static_cast<int64_t>(hits.size());
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DataType::kInt64, {r, nnz}));
  int64_t* o = out->data<int64_t>();
  for (int64_t j = 0; j < nnz; ++j) {
    int64_t rem = hits[j];
    for (int64_t a = r - 1; a >= 0; --a) {
      o[a * nnz + j] = rem % shape[a];
      rem /= shape[a];
    }
  }
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Unique

// Strict ordering with NaN after everything (and NaNs equal to each other).
template <typename K>
bool key_less(const K& a, const K& b) {
  if constexpr (std::is_floating_point_v<K>) {
    if (std::isnan(a)) return false;
    if (std::isnan(b)) return true;
  }
  return a < b;
}
template <typename K>
bool key_equal(const K& a, const K& b) {
  return !key_less(a, b) && !key_less(b, a);
}

template <typename K>
Status unique_impl(KernelContext& ctx, const Tensor& x, const std::vector<K>& keys, bool has_axis, int64_t axis,
                   bool sorted) {
  int64_t outer = 1, dim = x.numel(), inner = 1;
  if (has_axis) {
    dim = x.shape()[axis];
    for (int64_t i = 0; i < x.rank(); ++i) {
      if (i < axis) outer *= x.shape()[i];
      if (i > axis) inner *= x.shape()[i];
    }
  }
  // Row j: elements (o, j, i) in (o, i) order.
  auto row_less = [&](int64_t a, int64_t b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) {
        const K& ka = keys[(o * dim + a) * inner + i];
        const K& kb = keys[(o * dim + b) * inner + i];
        if (key_less(ka, kb)) return true;
        if (key_less(kb, ka)) return false;
      }
    }
    return false;
  };
  std::vector<int64_t> order(static_cast<size_t>(dim));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), row_less);
  // Groups of equal rows, each led by its first occurrence (stable sort keeps lowest index first).
  std::vector<int64_t> first;           // first occurrence of each group (sorted order)
  std::vector<int64_t> counts;
  std::vector<int64_t> group_of(static_cast<size_t>(dim));
  for (size_t p = 0; p < order.size(); ++p) {
    if (p == 0 || row_less(order[p - 1], order[p])) {
      first.push_back(order[p]);
      counts.push_back(0);
    }
    group_of[order[p]] = static_cast<int64_t>(first.size()) - 1;
    ++counts.back();
  }
  const int64_t nu = static_cast<int64_t>(first.size());
  std::vector<int64_t> rank_of(static_cast<size_t>(nu));  // group -> output position
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> g(static_cast<size_t>(nu));
    std::iota(g.begin(), g.end(), 0);
    std::sort(g.begin(), g.end(), [&](int64_t a, int64_t b) { return first[a] < first[b]; });
    for (int64_t p = 0; p < nu; ++p) rank_of[g[p]] = p;
  }
  std::vector<int64_t> out_first(static_cast<size_t>(nu)), out_counts(static_cast<size_t>(nu));
  for (int64_t g = 0; g < nu; ++g) {
    out_first[rank_of[g]] = first[g];
    out_counts[rank_of[g]] = counts[g];
  }
  Dims y_shape = has_axis ? x.shape() : Dims{nu};
  if (has_axis) y_shape[axis] = nu;
  if (ctx.output_requested(0)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), y_shape));
    for (int64_t u = 0; u < nu; ++u) {
      copy_elements(x, out_first[u] * inner, {dim * inner, 1}, *y, u * inner, {nu * inner, 1}, {outer, inner});
    }
  }
  auto write = [&](size_t i, const std::vector<int64_t>& v) -> Status {
    if (!ctx.output_requested(i)) return Status::Ok();
    NXRT_ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(i, DataType::kInt64, {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), t->data<int64_t>());
    return Status::Ok();
  };
  std::vector<int64_t> inverse(static_cast<size_t>(dim));
  for (int64_t j = 0; j < dim; ++j) inverse[j] = rank_of[group_of[j]];
  NXRT_RETURN_IF_ERROR(write(1, out_first));
  NXRT_RETURN_IF_ERROR(write(2, inverse));
  NXRT_RETURN_IF_ERROR(write(3, out_counts));
  return Status::Ok();
}

Status unique_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  const bool sorted = ctx.info().attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.info().has_attr("axis");
  int64_t axis = 0;
  if (has_axis) {
    const int64_t a0 = ctx.info().attr_int("axis", 0);
    axis = a0;
    if (!normalize_axis(&axis, x.rank())) return ctx.error("axis " + itos(a0) + " out of range for " + x.describe());
  }
  const int64_t n = x.numel();
  if (x.dtype() == DataType::kString) {
    std::vector<std::string> keys(x.string_data(), x.string_data() + n);
    return unique_impl(ctx, x, keys, has_axis, axis, sorted);
  }
  if (x.dtype() == DataType::kBool) {
    std::vector<uint8_t> keys(x.data<uint8_t>(), x.data<uint8_t>() + n);
    return unique_impl(ctx, x, keys, has_axis, axis, sorted);
  }
  return dispatch_numeric(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        std::vector<compute_t<T>> keys(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) keys[i] = static_cast<compute_t<T>>(x.data<T>()[i]);
        return unique_impl(ctx, x, keys, has_axis, axis, sorted);
      },
      [&] { return ctx.error("unsupported dtype " + x.describe()); });
}

// ------------------------------------------------------------------------------------------------
// TopK

Status topk_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
  const int64_t opset = ctx.info().opset();
  int64_t k;
  if (opset < 10) {
    if (!ctx.info().has_attr("k")) return ctx.error("attribute 'k' is missing", StatusCode::kInvalidModel);
    k = ctx.info().attr_int("k", 0);
  } else {
    NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> kv, required_indices(ctx, 1, "K"));
    if (kv.size() != 1) return ctx.error("K must hold one value, got " + ctx.input(1).describe());
    k = kv[0];
  }
  const int64_t a0 = ctx.info().attr_int("axis", -1);
  int64_t axis = a0;
  if (!normalize_axis(&axis, x.rank())) return ctx.error("axis " + itos(a0) + " out of range for " + x.describe());
  const bool largest = opset < 11 || ctx.info().attr_int("largest", 1) != 0;
  const int64_t dim = x.shape()[axis];
  if (k < 0 || k > dim) {
    return ctx.error("k = " + itos(k) + " is outside [0, " + itos(dim) + "] for axis " + itos(a0) + " of " +
                     x.describe());
  }
  Dims out_shape = x.shape();
  out_shape[axis] = k;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (i < axis) outer *= x.shape()[i];
    if (i > axis) inner *= x.shape()[i];
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * vals, ctx.allocate_output(0, x.dtype(), out_shape));
  Tensor* inds = nullptr;
  if (ctx.output_requested(1)) {
    NXRT_ASSIGN_OR_RETURN(inds, ctx.allocate_output(1, DataType::kInt64, out_shape));
  }
  return dispatch_numeric(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        using K = compute_t<T>;
        const T* src = x.data<T>();
        T* vo = vals->data<T>();
        std::vector<std::pair<K, int64_t>> lane(static_cast<size_t>(dim));
        auto better = [&](const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& b) {
          if (largest ? key_less(b.first, a.first) : key_less(a.first, b.first)) return true;
          if (key_equal(a.first, b.first)) return a.second < b.second;
          return false;
        };
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            const T* s = src + o * dim * inner + i;
            for (int64_t j = 0; j < dim; ++j) lane[j] = {static_cast<K>(s[j * inner]), j};
            std::partial_sort(lane.begin(), lane.begin() + k, lane.end(), better);
            for (int64_t j = 0; j < k; ++j) {
              const int64_t oi = o * k * inner + j * inner + i;
              vo[oi] = s[lane[j].second * inner];
              if (inds) inds->data<int64_t>()[oi] = lane[j].second;
            }
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported dtype " + x.describe()); });
}

}  // namespace

void register_indexing_ops(ep::KernelRegistry& r) {
  r.add_fn("Gather", &gather_fn);
  r.add_fn("GatherElements", &gather_elements_fn);
  r.add_fn("GatherND", &gather_nd_fn);
  r.add_fn(ir::kNxrtDomain, "SelectPositions", 1, INT64_MAX, &select_positions_fn);
  r.add_fn("Scatter", &scatter_elements_fn);
  r.add_fn("ScatterElements", &scatter_elements_fn);
  r.add_fn("ScatterND", &scatter_nd_fn);
  r.add_fn("Compress", &compress_fn);
  r.add_fn("NonZero", &nonzero_fn);
  r.add_fn("Unique", &unique_fn);
  r.add_fn("TopK", &topk_fn);
}

}  // namespace nxrt::ops
