// Shape and data-movement ops: Shape, Size, Reshape, Flatten, Squeeze, Unsqueeze, Identity, Transpose,
// Concat, Split, Slice, Expand, Tile, Pad, DepthToSpace, SpaceToDepth, Trilu, ReverseSequence, OneHot,
// CenterCropPad, Col2Im. Movement ops copy bytes and handle every dtype (strings and sub-byte too) through
// the strided copy in tensor_util.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "ops/common.h"
#include "ops/tensor/tensor_util.h"

namespace nxrt::ops {

using ep::KernelContext;

namespace {

std::string itos(int64_t v) { return std::to_string(v); }

// Output `i` as a view of `in` (same storage, same first element) with a new shape.
Status set_view(KernelContext& ctx, size_t i, const Tensor& in0, Dims shape) {
  Tensor in = in0.contiguous();
  return ctx.set_output(i, Value(Tensor(in.dtype(), std::move(shape), in.storage(), in.byte_offset())));
}

// Sets every element of a contiguous tensor to its zero (empty string for strings).
void zero_fill(Tensor& t) {
  if (t.dtype() == DataType::kString) {
    std::string* s = t.string_data();
    for (int64_t i = 0; i < t.numel(); ++i) s[i].clear();
    return;
  }
  if (t.nbytes()) std::memset(t.raw_data(), 0, t.nbytes());
}

// ------------------------------------------------------------------------------------------------
// Shape, Size

Status shape_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  const int64_t r = x.rank();
  int64_t start = 0, end = r;
  if (ctx.info().opset() >= 15) {
    start = ctx.info().attr_int("start", 0);
    end = ctx.info().has_attr("end") ? ctx.info().attr_int("end", r) : r;
  }
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  const int64_t n = std::max<int64_t>(0, end - start);
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DataType::kInt64, {n}));
  for (int64_t i = 0; i < n; ++i) out->data<int64_t>()[i] = x.shape()[start + i];
  return Status::Ok();
}

Status size_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, DataType::kInt64, {}));
  *out->data<int64_t>() = x.numel();
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Reshape, Flatten, Squeeze, Unsqueeze, Identity (views)

Result<Dims> reshape_dims(const Dims& in, const Dims& shape, bool allowzero) {
  Dims out(shape.size());
  int64_t infer = -1;
  int64_t known = 1;
  bool has_zero = false;
  for (size_t i = 0; i < shape.size(); ++i) {
    int64_t d = shape[i];
    if (d == -1) {
      if (infer >= 0) return invalid_argument("shape " + ints_to_string(shape) + " has more than one -1");
      infer = static_cast<int64_t>(i);
      continue;
    }
    if (d < -1) return invalid_argument("shape " + ints_to_string(shape) + " has a negative dim other than -1");
    if (d == 0) {
      has_zero = true;
      if (!allowzero) {
        if (i >= in.size()) {
          return invalid_argument("shape " + ints_to_string(shape) + " copies dim " + std::to_string(i) +
                                  " (0) but the input " + shape_to_string(in) + " has rank " +
                                  std::to_string(in.size()));
        }
        d = in[i];
      }
    }
    out[i] = d;
    if (__builtin_mul_overflow(known, d, &known)) {
      return invalid_argument("shape " + ints_to_string(shape) + " has too many elements");
    }
  }
  const int64_t n = shape_numel(in);
  if (infer >= 0) {
    if (allowzero && has_zero) {
      return invalid_argument("shape " + ints_to_string(shape) + " has both -1 and 0 with allowzero=1");
    }
    if (known == 0 || n % known != 0) {
      return invalid_argument("cannot reshape " + shape_to_string(in) + " to " + ints_to_string(shape));
    }
    out[infer] = n / known;
  } else if (known != n) {
    return invalid_argument("cannot reshape " + shape_to_string(in) + " (" + std::to_string(n) + " elements) to " +
                            ints_to_string(shape));
  }
  return out;
}

Status reshape_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  Dims shape;  // inline: reading the target shape allocates nothing
  if (ctx.info().opset() < 5) {
    if (!ctx.info().has_attr("shape")) return ctx.error("attribute 'shape' is missing", StatusCode::kInvalidModel);
    shape = ctx.info().attr_ints("shape");
  } else {
    NXRT_ASSIGN_OR_RETURN(const Tensor& st, ctx.required_tensor(1, "shape"));
    if (st.dtype() == DataType::kInt64) {
      shape.assign(st.data<int64_t>(), st.data<int64_t>() + st.numel());
    } else {
      NXRT_ASSIGN_OR_RETURN(auto v, required_indices(ctx, 1, "shape"));
      shape = v;
    }
  }
  const bool allowzero = ctx.info().opset() >= 14 && ctx.info().attr_int("allowzero", 0) != 0;
  auto dims = reshape_dims(x.shape(), shape, allowzero);
  if (!dims.ok()) return ctx.error(dims.status().message());
  return set_view(ctx, 0, x, std::move(dims).value());
}

Status flatten_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  const int64_t r = x.rank();
  int64_t axis = ctx.info().attr_int("axis", 1);
  const int64_t a0 = axis;
  if (axis < 0 && ctx.info().opset() >= 11) axis += r;
  if (axis < 0 || axis > r) {
    return ctx.error("axis " + itos(a0) + " out of range for input shape " + shape_to_string(x.shape()),
                     StatusCode::kInvalidModel);
  }
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? outer : inner) *= x.shape()[i];
  return set_view(ctx, 0, x, {outer, inner});
}

// Dims: a few axes, held inline (no allocation on the hot path).
Result<Dims> axes_from_attr_or_input(KernelContext& ctx, size_t input_index, bool* given) {
  *given = false;
  if (ctx.info().opset() < 13) {
    if (ctx.info().has_attr("axes")) {
      *given = true;
      return Dims(ctx.info().attr_ints("axes"));
    }
    return Dims{};
  }
  if (ctx.has_input(input_index)) {
    *given = true;
    const Tensor& t = ctx.input(input_index);
    if (t.dtype() == DataType::kInt64) return Dims(t.data<int64_t>(), t.data<int64_t>() + t.numel());
    NXRT_ASSIGN_OR_RETURN(auto v, required_indices(ctx, input_index, "axes"));
    return Dims(v);
  }
  return Dims{};
}

Status squeeze_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  const int64_t r = x.rank();
  bool given = false;
  NXRT_ASSIGN_OR_RETURN(Dims axes, axes_from_attr_or_input(ctx, 1, &given));
  Dims drop(static_cast<size_t>(r), 0);
  if (!given || axes.empty()) {  // no axes (or an empty axes tensor): drop every size-1 dim
    for (int64_t i = 0; i < r; ++i) drop[i] = x.shape()[i] == 1;
  } else {
    for (int64_t a : axes) {
      int64_t ax = a;
      if (!normalize_axis(&ax, r)) {
        return ctx.error("axis " + itos(a) + " out of range for input shape " + shape_to_string(x.shape()));
      }
      if (x.shape()[ax] != 1) {
        return ctx.error("cannot squeeze axis " + itos(a) + " of shape " + shape_to_string(x.shape()) +
                         ": its size is not 1");
      }
      drop[ax] = true;
    }
  }
  Dims out;
  for (int64_t i = 0; i < r; ++i) {
    if (!drop[i]) out.push_back(x.shape()[i]);
  }
  return set_view(ctx, 0, x, std::move(out));
}

Status unsqueeze_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  bool given = false;
  NXRT_ASSIGN_OR_RETURN(Dims axes, axes_from_attr_or_input(ctx, 1, &given));
  if (!given) return ctx.error("axes are required", StatusCode::kInvalidModel);
  const int64_t out_rank = x.rank() + static_cast<int64_t>(axes.size());
  Dims ins(static_cast<size_t>(out_rank), 0);
  for (int64_t a : axes) {
    int64_t ax = a;
    if (!normalize_axis(&ax, out_rank)) {
      return ctx.error("axis " + itos(a) + " out of range for output rank " + itos(out_rank) + " (input shape " +
                       shape_to_string(x.shape()) + ", axes " + ints_to_string(axes) + ")");
    }
    if (ins[ax]) return ctx.error("axes " + ints_to_string(axes) + " repeat an axis");
    ins[ax] = 1;
  }
  Dims out(static_cast<size_t>(out_rank));
  size_t j = 0;
  for (int64_t i = 0; i < out_rank; ++i) out[i] = ins[i] ? 1 : x.shape()[j++];
  return set_view(ctx, 0, x, std::move(out));
}

Status identity_fn(KernelContext& ctx) {
  const Value* v = ctx.input_value(0);
  if (!v) return ctx.error("required input 'input' is missing", StatusCode::kInvalidModel);
  return ctx.set_output(0, *v);
}

// ------------------------------------------------------------------------------------------------
// Transpose, Concat, Split, Slice, Expand, Tile

// Output 0 as a zero-copy view of `x` (contiguous) through `L`: the executor gathers it for consumers
// that need contiguous data and materializes it before a caller sees it. Strings and sub-byte dtypes
// have no element-addressable strides, so they are copied.
Status set_view_output(KernelContext& ctx, const Tensor& x, const StridedLayout& L) {
  if (x.dtype() != DataType::kString && !dtype_is_subbyte(x.dtype()) && x.storage() && x.is_contiguous()) {
    const int64_t es = dtype_bits(x.dtype()) / 8;
    return ctx.set_output(0, Value(Tensor(x.dtype(), L.shape, x.storage(), x.byte_offset() + L.offset * es, L.strides)));
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), L.shape));
  copy_window(x, L, *out, &ctx.pool());
  return Status::Ok();
}

// Transpose reads `perm` once at creation, so a run allocates nothing.
class TransposeKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    perm_ = info.attr_ints("perm");
    return Status::Ok();
  }
  Status compute(KernelContext& ctx) const override;

 private:
  Dims perm_;
};

Status TransposeKernel::compute(KernelContext& ctx) const {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  auto layout = transpose_layout(x.shape(), perm_);
  if (!layout.ok()) return ctx.error(layout.status().message() + " (input " + x.describe() + ")", StatusCode::kInvalidModel);
  return set_view_output(ctx, x, *layout);
}

Status concat_fn(KernelContext& ctx) {
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_input(i)) {
      NXRT_ASSIGN_OR_RETURN(const Tensor& in, ctx.required_tensor(i, "inputs"));
      ins.push_back(&in);
    }
  }
  if (ins.empty()) return ctx.error("no inputs", StatusCode::kInvalidModel);
  if (ctx.info().opset() >= 4 && !ctx.info().has_attr("axis")) {
    return ctx.error("attribute 'axis' is missing", StatusCode::kInvalidModel);
  }
  const int64_t a0 = ctx.info().attr_int("axis", 1);
  const Tensor& first = *ins[0];
  const int64_t r = first.rank();
  int64_t axis = a0;
  if (!normalize_axis(&axis, r)) {
    return ctx.error("axis " + itos(a0) + " out of range for input shape " + shape_to_string(first.shape()));
  }
  Dims out_shape = first.shape();
  out_shape[axis] = 0;
  for (const Tensor* t : ins) {
    bool ok = t->dtype() == first.dtype() && t->rank() == r;
    for (int64_t d = 0; ok && d < r; ++d) ok = d == axis || t->shape()[d] == first.shape()[d];
    if (!ok) {
      std::string s;
      for (const Tensor* u : ins) s += " " + u->describe();
      return ctx.error("inputs do not concatenate along axis " + itos(a0) + ":" + s);
    }
    out_shape[axis] += t->shape()[axis];
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, first.dtype(), out_shape));
  bool plain = out->is_contiguous();
  for (const Tensor* t : ins) plain = plain && t->is_contiguous();
  if (plain) {
    const Dims ost = contiguous_strides(out_shape);
    const int64_t es = dtype_is_subbyte(out->dtype()) || out->dtype() == DataType::kString ? 0
                                                                                           : dtype_bits(out->dtype()) / 8;
    int64_t pos = 0;
    for (const Tensor* t : ins) {
      // An input its producer already wrote into place (the executor's concat-in-place planning).
      const bool in_place = es > 0 && t->storage() == out->storage() &&
                            t->byte_offset() == out->byte_offset() + pos * ost[axis] * es;
      if (!in_place) {
        copy_elements(*t, 0, contiguous_strides(t->shape()), *out, pos * ost[axis], ost, t->shape(), &ctx.pool());
      }
      pos += t->shape()[axis];
    }
    return Status::Ok();
  }
  // Strided inputs or a strided output (an output bound to a buffer with spare capacity). A part that
  // already sits where it belongs (the past of a KV-growth Concat, a view of the very buffer the
  // output is bound to) is not copied: a decode step appends only the new rows.
  const Dims ost = out->effective_strides();
  const int64_t es = dtype_bits(out->dtype()) / 8;
  int64_t pos = 0;
  for (const Tensor* t : ins) {
    Tensor dst(out->dtype(), t->shape(), out->storage(), out->byte_offset() + pos * ost[axis] * es, ost);
    const bool in_place = t->storage() == dst.storage() && t->byte_offset() == dst.byte_offset() &&
                          t->effective_strides() == dst.effective_strides();
    if (!in_place) {
      Status st = copy_tensor_into(*t, dst);
      if (!st.ok()) return ctx.error(st.message());
    }
    pos += t->shape()[axis];
  }
  return Status::Ok();
}

// Concat takes strided inputs and writes strided outputs (see concat_fn).
class ConcatKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo&) { return Status::Ok(); }
  Status compute(KernelContext& ctx) const override { return concat_fn(ctx); }
  bool accepts_strided_input(size_t) const override { return true; }
  bool accepts_strided_output(size_t) const override { return true; }
};

Status split_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  const int64_t opset = ctx.info().opset();
  const int64_t a0 = ctx.info().attr_int("axis", 0);
  int64_t axis = a0;
  if (!normalize_axis(&axis, x.rank())) {
    return ctx.error("axis " + itos(a0) + " out of range for input shape " + shape_to_string(x.shape()));
  }
  const int64_t dim = x.shape()[axis];
  const int64_t n_out = static_cast<int64_t>(ctx.num_outputs());
  // Inline storage: a Split in a decode step (the optimizer splits sibling MatMulNBits outputs) runs
  // without a heap allocation.
  Dims split;
  bool given = false;
  if (opset < 13 && ctx.info().has_attr("split")) {
    split = ctx.info().attr_ints("split");
    given = true;
  } else if ((opset >= 13 || opset == 1) && ctx.has_input(1)) {
    NXRT_ASSIGN_OR_RETURN(const Tensor& st, ctx.required_tensor(1, "split"));
    if (st.dtype() == DataType::kInt64 && st.rank() == 1 && st.is_contiguous()) {
      const int64_t* p = st.data<int64_t>();
      split.assign(p, p + st.numel());
    } else {
      NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> v, required_indices(ctx, 1, "split"));
      split = v;
    }
    given = true;
  }
  if (given && !split.empty()) {
    if (static_cast<int64_t>(split.size()) != n_out) {
      return ctx.error("split " + ints_to_string(split) + " has " + itos(split.size()) + " entries but the node has " +
                       itos(n_out) + " outputs");
    }
    int64_t sum = 0;
    for (int64_t s : split) {
      if (s < 0) return ctx.error("split " + ints_to_string(split) + " has a negative size");
      sum += s;
    }
    if (sum != dim) {
      return ctx.error("split " + ints_to_string(split) + " sums to " + itos(sum) + " but axis " + itos(a0) +
                       " of " + shape_to_string(x.shape()) + " has size " + itos(dim));
    }
  } else {
    int64_t n = n_out;
    if (opset >= 18 && ctx.info().has_attr("num_outputs")) {
      n = ctx.info().attr_int("num_outputs", n_out);
      if (n != n_out || n <= 0) {
        return ctx.error("num_outputs " + itos(n) + " does not match the node's " + itos(n_out) + " outputs");
      }
    }
    if (n <= 0) return ctx.error("no outputs");
    if (opset < 18 && dim % n != 0) {
      return ctx.error("axis " + itos(a0) + " of " + shape_to_string(x.shape()) + " does not split evenly into " +
                       itos(n) + " outputs");
    }
    const int64_t chunk = (dim + n - 1) / n;
    int64_t rem = dim;
    for (int64_t i = 0; i < n; ++i) {
      int64_t c = std::min(chunk, rem);
      split.push_back(c);
      rem -= c;
    }
  }
  const Dims cs = contiguous_strides(x.shape());
  // With every axis before `axis` of size 1 each output is a contiguous run of x: a view, no copy (a
  // decode step's split of stacked MatMulNBits outputs, [1, 1, N]).
  int64_t outer = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= x.shape()[d];
  const bool views = outer == 1 && x.dtype() != DataType::kString && !dtype_is_subbyte(x.dtype()) && x.storage() &&
                     x.is_contiguous();
  int64_t pos = 0;
  for (int64_t i = 0; i < n_out; ++i) {
    if (views && ctx.output_requested(static_cast<size_t>(i))) {
      Dims shape = x.shape();
      shape[axis] = split[i];
      const int64_t es = dtype_bits(x.dtype()) / 8;
      NXRT_RETURN_IF_ERROR(ctx.set_output(static_cast<size_t>(i),
                                          Value(Tensor(x.dtype(), std::move(shape), x.storage(), x.byte_offset() + pos * cs[axis] * es))));
    } else if (ctx.output_requested(static_cast<size_t>(i))) {
      StridedLayout L{x.shape(), cs, pos * cs[axis]};
      L.shape[axis] = split[i];
      NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(static_cast<size_t>(i), x.dtype(), L.shape));
      copy_window(x, L, *out, &ctx.pool());
    }
    pos += split[i];
  }
  return Status::Ok();
}

Status slice_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.info().opset() < 10) {
    if (!ctx.info().has_attr("starts") || !ctx.info().has_attr("ends")) {
      return ctx.error("attributes 'starts' and 'ends' are required", StatusCode::kInvalidModel);
    }
    starts = ctx.info().attr_ints("starts");
    ends = ctx.info().attr_ints("ends");
    axes = ctx.info().attr_ints("axes");
  } else {
    NXRT_ASSIGN_OR_RETURN(starts, required_indices(ctx, 1, "starts"));
    NXRT_ASSIGN_OR_RETURN(ends, required_indices(ctx, 2, "ends"));
    if (ctx.has_input(3)) {
      NXRT_ASSIGN_OR_RETURN(axes, required_indices(ctx, 3, "axes"));
    }
    if (ctx.has_input(4)) {
      NXRT_ASSIGN_OR_RETURN(steps, required_indices(ctx, 4, "steps"));
    }
  }
  if (axes.empty() && !starts.empty()) {
    axes.resize(starts.size());
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  auto layout = slice_layout(x.shape(), starts, ends, axes, steps);
  if (!layout.ok()) return ctx.error(layout.status().message() + " (input " + x.describe() + ")");
  return set_view_output(ctx, x, *layout);
}

Status expand_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, required_indices(ctx, 1, "shape"));
  for (int64_t d : shape) {
    if (d < 0) return ctx.error("shape " + ints_to_string(shape) + " has a negative dim");
  }
  Dims out_shape;
  if (!broadcast_shapes(x.shape(), shape, &out_shape)) {
    return ctx.error("input shape " + shape_to_string(x.shape()) + " does not broadcast to " + ints_to_string(shape));
  }
  if (!shape_is_sane(out_shape)) {
    return ctx.error("Expand output shape " + shape_to_string(out_shape) + " is invalid or too large");
  }
  return set_view_output(ctx, x, StridedLayout{out_shape, broadcast_strides(x.shape(), out_shape), 0});
}

Status tile_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  const int64_t r = x.rank();
  std::vector<int64_t> repeats;
  if (ctx.info().opset() < 6) {
    NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> tiles, required_indices(ctx, 1, "tiles"));
    NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> ax, required_indices(ctx, 2, "axis"));
    if (tiles.size() != 1 || ax.size() != 1) return ctx.error("tiles and axis must be scalars");
    int64_t a = ax[0];
    if (!normalize_axis(&a, r)) return ctx.error("axis " + itos(ax[0]) + " out of range for " + x.describe());
    repeats.assign(static_cast<size_t>(r), 1);
    repeats[a] = tiles[0];
  } else {
    NXRT_ASSIGN_OR_RETURN(repeats, required_indices(ctx, 1, "repeats"));
  }
  if (static_cast<int64_t>(repeats.size()) != r) {
    return ctx.error("repeats " + ints_to_string(repeats) + " must have one entry per input dim " +
                     shape_to_string(x.shape()));
  }
  Dims out_shape(static_cast<size_t>(r)), view_shape, view_strides;
  const Dims cs = contiguous_strides(x.shape());
  for (int64_t i = 0; i < r; ++i) {
    if (repeats[i] < 0) return ctx.error("repeats " + ints_to_string(repeats) + " has a negative entry");
    if (__builtin_mul_overflow(x.shape()[i], repeats[i], &out_shape[i])) {
      return ctx.error("repeats " + ints_to_string(repeats) + " overflow the output shape of " + x.describe());
    }
    view_shape.push_back(repeats[i]);
    view_strides.push_back(0);
    view_shape.push_back(x.shape()[i]);
    view_strides.push_back(cs[i]);
  }
  if (!shape_is_sane(out_shape)) {
    return ctx.error("Tile output shape " + shape_to_string(out_shape) + " is invalid or too large");
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  copy_window(x, StridedLayout{view_shape, view_strides, 0}, *out, &ctx.pool());
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Pad

// Source index along one axis for output position o, or -1 for the constant.
int64_t pad_source(int64_t o, int64_t pad_begin, int64_t dim, int mode) {
  int64_t p = o - pad_begin;
  if (p >= 0 && p < dim) return p;
  switch (mode) {
    case 0: return -1;  // constant
    case 1: {           // reflect
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      p %= period;
      if (p < 0) p += period;
      return p < dim ? p : period - p;
    }
    case 2: return p < 0 ? 0 : dim - 1;  // edge
    default: {                            // wrap
      p %= dim;
      return p < 0 ? p + dim : p;
    }
  }
}


Status pad_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "data"));
  const int64_t opset = ctx.info().opset();
  const int64_t r = x.rank();
  const std::string mode_s = ctx.info().attr_string("mode", "constant");
  int mode;
  if (mode_s == "constant") mode = 0;
  else if (mode_s == "reflect") mode = 1;
  else if (mode_s == "edge") mode = 2;
  else if (mode_s == "wrap" && opset >= 19) mode = 3;
  else return ctx.error("unsupported mode '" + mode_s + "'", StatusCode::kInvalidModel);

  std::vector<int64_t> pads;
  std::vector<int64_t> axes;
  if (opset < 11) {
    const char* name = opset < 2 ? "paddings" : "pads";
    if (!ctx.info().has_attr(name)) return ctx.error(std::string("attribute '") + name + "' is missing", StatusCode::kInvalidModel);
    pads = ctx.info().attr_ints(name);
  } else {
    NXRT_ASSIGN_OR_RETURN(pads, required_indices(ctx, 1, "pads"));
    if (opset >= 18 && ctx.has_input(3)) {
      NXRT_ASSIGN_OR_RETURN(axes, required_indices(ctx, 3, "axes"));
    }
  }
  if (axes.empty()) {
    axes.resize(static_cast<size_t>(r));
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (pads.size() != 2 * axes.size()) {
    return ctx.error("pads " + ints_to_string(pads) + " must have 2 entries per padded axis (" +
                     itos(axes.size()) + " axes, input " + x.describe() + ")");
  }
  for (int64_t v : pads) {
    if (v > (int64_t{1} << 40) || v < -(int64_t{1} << 40)) {
      return ctx.error("pads " + ints_to_string(pads) + " are out of range for input " + x.describe());
    }
  }
  std::vector<int64_t> pb(static_cast<size_t>(r), 0), pe(static_cast<size_t>(r), 0);
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k];
    if (!normalize_axis(&a, r)) return ctx.error("axis " + itos(axes[k]) + " out of range for " + x.describe());
    if (seen[a]) return ctx.error("axes " + ints_to_string(axes) + " repeat an axis");
    seen[a] = true;
    pb[a] = pads[k];
    pe[a] = pads[k + axes.size()];
  }
  Dims out_shape(static_cast<size_t>(r));
  for (int64_t a = 0; a < r; ++a) {
    out_shape[a] = x.shape()[a] + pb[a] + pe[a];
    if (out_shape[a] < 0) {
      return ctx.error("pads " + ints_to_string(pads) + " remove more than the size of axis " + itos(a) +
                       " of " + x.describe());
    }
    if (mode != 0 && x.shape()[a] == 0 && out_shape[a] > 0) {
      return ctx.error("cannot " + mode_s + "-pad the empty axis " + itos(a) + " of " + x.describe());
    }
  }
  if (!shape_is_sane(out_shape)) {
    return ctx.error("Pad output shape " + shape_to_string(out_shape) + " is invalid or too large");
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  if (out->numel() == 0) return Status::Ok();

  if (mode == 0) {
    // Fill with the constant, then copy the part of the input that survives.
    bool filled = false;
    if (opset < 11) {
      double v = ctx.info().attr_float("value", 0.0f);
      if (v == 0) {
        zero_fill(*out);
        filled = true;
      } else {
        filled = fill_with_double(*out, v);
      }
    } else if (ctx.has_input(2) && ctx.input(2).numel() > 0) {
      const Tensor& cv = ctx.input(2);
      if (cv.dtype() != x.dtype()) {
        return ctx.error("constant_value " + cv.describe() + " must have the data's dtype " + x.describe());
      }
      copy_elements(cv, 0, Dims(static_cast<size_t>(r), 0), *out, 0, contiguous_strides(out_shape), out_shape);
      filled = true;
    } else {
      zero_fill(*out);
      filled = true;
    }
    if (!filled) return ctx.error("cannot fill " + x.describe() + " with a constant");
    Dims win(static_cast<size_t>(r));
    int64_t soff = 0, doff = 0;
    const Dims ics = contiguous_strides(x.shape()), ocs = contiguous_strides(out_shape);
    for (int64_t a = 0; a < r; ++a) {
      const int64_t s0 = std::max<int64_t>(0, -pb[a]);
      const int64_t d0 = std::max<int64_t>(0, pb[a]);
      win[a] = std::max<int64_t>(0, x.shape()[a] - s0 - std::max<int64_t>(0, -pe[a]));
      soff += s0 * ics[a];
      doff += d0 * ocs[a];
    }
    copy_elements(x, soff, ics, *out, doff, ocs, win);
    return Status::Ok();
  }

  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(r));
  for (int64_t a = 0; a < r; ++a) {
    maps[a].resize(static_cast<size_t>(out_shape[a]));
    for (int64_t o = 0; o < out_shape[a]; ++o) maps[a][o] = pad_source(o, pb[a], x.shape()[a], mode);
  }
  if (dtype_is_subbyte(x.dtype())) {
    Tensor u = subbyte_unpack(x);
    Tensor o(DataType::kUInt8, out_shape);
    gather_axis_maps(u.data<uint8_t>(), o.data<uint8_t>(), x.shape(), out_shape, maps);
    return ctx.set_output(0, Value(subbyte_pack(o, x.dtype())));
  }
  if (!gather_axis_maps(x, *out, maps)) return ctx.error("unsupported dtype " + x.describe());
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// DepthToSpace, SpaceToDepth

Status depth_to_space_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  const int64_t b = ctx.info().attr_int("blocksize", 0);
  const std::string mode = ctx.info().opset() >= 11 ? ctx.info().attr_string("mode", "DCR") : "DCR";
  if (mode != "DCR" && mode != "CRD") return ctx.error("unknown mode '" + mode + "'", StatusCode::kInvalidModel);
  if (b <= 0 || b > (int64_t{1} << 20)) {
    return ctx.error("blocksize " + itos(b) + " must be in [1, 2^20]", StatusCode::kInvalidModel);
  }
  if (x.rank() != 4 || x.dim(1) % (b * b) != 0) {
    return ctx.error("input " + x.describe() + " must be 4-D with channels divisible by blocksize^2 = " + itos(b * b));
  }
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3), Co = C / (b * b);
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), {N, Co, H * b, W * b}));
  // Output viewed as [N, Co, H, b(i), W, b(j)].
  const int64_t HW = H * W;
  Dims st;
  if (mode == "DCR") st = {C * HW, HW, W, b * Co * HW, 1, Co * HW};
  else st = {C * HW, b * b * HW, W, b * HW, 1, HW};
  copy_window(x, StridedLayout{{N, Co, H, b, W, b}, st, 0}, *out, &ctx.pool());
  return Status::Ok();
}

Status space_to_depth_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  const int64_t b = ctx.info().attr_int("blocksize", 0);
  if (b <= 0 || b > (int64_t{1} << 20)) {
    return ctx.error("blocksize " + itos(b) + " must be in [1, 2^20]", StatusCode::kInvalidModel);
  }
  if (x.rank() != 4 || x.dim(2) % b != 0 || x.dim(3) % b != 0) {
    return ctx.error("input " + x.describe() + " must be 4-D with H and W divisible by blocksize " + itos(b));
  }
  const int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), {N, C * b * b, H / b, W / b}));
  // Output viewed as [N, b(i), b(j), C, H/b, W/b].
  copy_window(x, StridedLayout{{N, b, b, C, H / b, W / b}, {C * H * W, W, 1, H * W, b * W, b}, 0}, *out, &ctx.pool());
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Trilu, ReverseSequence

Status trilu_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  if (x.rank() < 2) return ctx.error("input " + x.describe() + " must have rank >= 2");
  int64_t k = 0;
  if (ctx.has_input(1)) {
    NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> kv, required_indices(ctx, 1, "k"));
    if (kv.size() != 1) return ctx.error("k must be a scalar, got " + ctx.input(1).describe());
    k = kv[0];
  }
  const bool upper = ctx.info().attr_int("upper", 1) != 0;
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), x.shape()));
  const int64_t R = x.dim(-2), C = x.dim(-1);
  k = std::clamp<int64_t>(k, -(R + 1), C + 1);  // beyond the matrix either way: same result, no overflow
  const int64_t mats = R * C == 0 ? 0 : x.numel() / (R * C);
  auto run = [&](const Tensor& src, Tensor& dst) {
    return dispatch_elem(
        src.dtype(),
        [&](auto tag) {
          using E = decltype(tag);
          const E* s = elem_ptr<E>(src);
          E* d = elem_ptr<E>(dst);
          for (int64_t m = 0; m < mats; ++m) {
            for (int64_t i = 0; i < R; ++i) {
              const E* sr = s + (m * R + i) * C;
              E* dr = d + (m * R + i) * C;
              // keep j in [lo, hi)
              int64_t lo, hi;
              if (upper) {
                lo = std::clamp<int64_t>(i + k, 0, C);
                hi = C;
              } else {
                lo = 0;
                hi = std::clamp<int64_t>(i + k + 1, 0, C);
              }
              for (int64_t j = 0; j < C; ++j) dr[j] = (j >= lo && j < hi) ? sr[j] : E{};
            }
          }
          return Status::Ok();
        },
        [&] { return ctx.error("unsupported dtype " + src.describe()); });
  };
  if (dtype_is_subbyte(x.dtype())) {
    Tensor u = subbyte_unpack(x);
    Tensor o(DataType::kUInt8, x.shape());
    NXRT_RETURN_IF_ERROR(run(u, o));
    return ctx.set_output(0, Value(subbyte_pack(o, x.dtype())));
  }
  return run(x, *out);
}

Status reverse_sequence_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  NXRT_RETURN_IF_ERROR(ctx.required_tensor(1, "sequence_lens").status());
  const int64_t ba = ctx.info().attr_int("batch_axis", 1);
  const int64_t ta = ctx.info().attr_int("time_axis", 0);
  if (x.rank() < 2) return ctx.error("input " + x.describe() + " must have rank >= 2");
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0))) {
    return ctx.error("batch_axis " + itos(ba) + " and time_axis " + itos(ta) + " must be 0 and 1 in some order",
                     StatusCode::kInvalidModel);
  }
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> lens, required_indices(ctx, 1, "sequence_lens"));
  const int64_t B = x.dim(ba), T = x.dim(ta);
  if (static_cast<int64_t>(lens.size()) != B) {
    return ctx.error("sequence_lens has " + itos(lens.size()) + " entries but the batch size is " + itos(B));
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), x.shape()));
  const Dims cs = contiguous_strides(x.shape());
  copy_elements(x, 0, cs, *out, 0, cs, x.shape(), &ctx.pool());
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = lens[b];
    if (L < 0 || L > T) {
      return ctx.error("sequence_lens[" + itos(b) + "] = " + itos(L) + " is outside [0, " + itos(T) + "]");
    }
    if (L == 0) continue;
    Dims shape = x.shape();
    shape[ba] = 1;
    shape[ta] = L;
    Dims ss = cs;
    ss[ta] = -cs[ta];
    copy_elements(x, b * cs[ba] + (L - 1) * cs[ta], ss, *out, b * cs[ba], cs, shape);
  }
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// OneHot

Status onehot_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& ind, ctx.required_tensor(0, "indices"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& depth_t, ctx.required_tensor(1, "depth"));
  NXRT_ASSIGN_OR_RETURN(const Tensor& values, ctx.required_tensor(2, "values"));
  auto dv = read_double_values(depth_t);
  if (!dv.ok() || dv->size() != 1) return ctx.error("depth must be a numeric scalar, got " + depth_t.describe());
  const double depth_d = (*dv)[0];
  if (!(depth_d >= 1) || depth_d > 1e12) return ctx.error("depth " + std::to_string(depth_d) + " must be >= 1");
  const int64_t depth = static_cast<int64_t>(depth_d);
  if (values.numel() != 2) return ctx.error("values must have 2 elements [off, on], got " + values.describe());
  auto iv = read_double_values(ind);
  if (!iv.ok()) return ctx.error("indices must be numeric, got " + ind.describe());
  const int64_t r = ind.rank();
  int64_t axis = ctx.info().attr_int("axis", -1);
  const int64_t a0 = axis;
  if (!normalize_axis(&axis, r + 1)) {
    return ctx.error("axis " + itos(a0) + " out of range for output rank " + itos(r + 1));
  }
  Dims out_shape = ind.shape();
  out_shape.insert(out_shape.begin() + axis, depth);
  if (!shape_is_sane(out_shape)) {
    return ctx.error("OneHot output shape " + shape_to_string(out_shape) + " is invalid or too large");
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, values.dtype(), out_shape));
  const Dims ocs = contiguous_strides(out_shape);
  copy_elements(values, 0, Dims(out_shape.size(), 0), *out, 0, ocs, out_shape);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < r; ++i) (i < axis ? outer : inner) *= ind.shape()[i];
  if (dtype_is_subbyte(values.dtype())) return ctx.error("unsupported values dtype " + values.describe());
  return dispatch_elem(
      values.dtype(),
      [&](auto tag) {
        using E = decltype(tag);
        const E on = elem_ptr<E>(values)[1];
        E* d = elem_ptr<E>(*out);
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t i = 0; i < inner; ++i) {
            const double kd = (*iv)[o * inner + i];
            if (!(kd > -1e18 && kd < 1e18)) continue;  // NaN / huge: no hot entry
            int64_t k = static_cast<int64_t>(kd);
            if (k < 0) k += depth;
            if (k < 0 || k >= depth) continue;
            d[(o * depth + k) * inner + i] = on;
          }
        }
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported values dtype " + values.describe()); });
}

// ------------------------------------------------------------------------------------------------
// CenterCropPad

Status center_crop_pad_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input_data"));
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> shape, required_indices(ctx, 1, "shape"));
  const int64_t r = x.rank();
  std::vector<int64_t> axes = ctx.info().attr_ints("axes");
  if (axes.empty()) {
    axes.resize(static_cast<size_t>(r));
    std::iota(axes.begin(), axes.end(), 0);
  }
  if (axes.size() != shape.size()) {
    return ctx.error("shape " + ints_to_string(shape) + " must have one entry per axis " + ints_to_string(axes));
  }
  Dims out_shape = x.shape();
  std::vector<bool> seen(static_cast<size_t>(r), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t a = axes[k];
    if (!normalize_axis(&a, r)) return ctx.error("axis " + itos(axes[k]) + " out of range for " + x.describe());
    if (seen[a]) return ctx.error("axes " + ints_to_string(axes) + " repeat an axis");
    seen[a] = true;
    if (shape[k] < 0) return ctx.error("shape " + ints_to_string(shape) + " has a negative entry");
    out_shape[a] = shape[k];
  }
  if (!shape_is_sane(out_shape)) {
    return ctx.error("CenterCropPad output shape " + shape_to_string(out_shape) + " is invalid or too large");
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  zero_fill(*out);
  const Dims ics = contiguous_strides(x.shape()), ocs = contiguous_strides(out_shape);
  Dims win(static_cast<size_t>(r));
  int64_t soff = 0, doff = 0;
  for (int64_t a = 0; a < r; ++a) {
    const int64_t in = x.shape()[a], o = out_shape[a];
    if (in >= o) {
      soff += ((in - o) / 2) * ics[a];
      win[a] = o;
    } else {
      doff += ((o - in) / 2) * ocs[a];
      win[a] = in;
    }
  }
  copy_elements(x, soff, ics, *out, doff, ocs, win);
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------------
// Col2Im

Status col2im_fn(KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "input"));
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> image, required_indices(ctx, 1, "image_shape"));
  NXRT_ASSIGN_OR_RETURN(std::vector<int64_t> block, required_indices(ctx, 2, "block_shape"));
  const size_t nd = image.size();
  if (block.size() != nd || nd == 0) {
    return ctx.error("image_shape " + ints_to_string(image) + " and block_shape " + ints_to_string(block) +
                     " must have the same non-zero length");
  }
  std::vector<int64_t> dil = ctx.info().attr_ints("dilations", std::vector<int64_t>(nd, 1));
  std::vector<int64_t> pads = ctx.info().attr_ints("pads", std::vector<int64_t>(2 * nd, 0));
  std::vector<int64_t> strides = ctx.info().attr_ints("strides", std::vector<int64_t>(nd, 1));
  if (dil.size() != nd || strides.size() != nd || pads.size() != 2 * nd) {
    return ctx.error("dilations/strides/pads lengths do not match " + itos(nd) + " spatial dims",
                     StatusCode::kInvalidModel);
  }
  if (x.rank() != 3) return ctx.error("input " + x.describe() + " must be 3-D [N, C*prod(block), L]");
  constexpr int64_t kLim = int64_t{1} << 30;
  for (const auto* v : {&image, &block, &dil, &pads, &strides}) {
    for (int64_t e : *v) {
      if (e < -kLim || e > kLim) return ctx.error("image_shape/block_shape/attributes hold out-of-range values");
    }
  }
  int64_t kprod = 1;
  for (int64_t b : block) {
    if (b <= 0) return ctx.error("block_shape " + ints_to_string(block) + " must be positive");
    if (__builtin_mul_overflow(kprod, b, &kprod)) return ctx.error("block_shape " + ints_to_string(block) + " is too large");
  }
  if (x.dim(1) % kprod != 0) {
    return ctx.error("input " + x.describe() + " channel dim is not divisible by prod(block_shape) = " + itos(kprod));
  }
  std::vector<int64_t> nblocks(nd);
  int64_t L = 1;
  for (size_t d = 0; d < nd; ++d) {
    if (dil[d] <= 0 || strides[d] <= 0 || image[d] < 0) return ctx.error("dilations/strides must be positive");
    const int64_t eff = dil[d] * (block[d] - 1) + 1;
    const int64_t span = image[d] + pads[d] + pads[d + nd] - eff;
    if (span < 0) return ctx.error("block does not fit the padded image");
    nblocks[d] = span / strides[d] + 1;
    L *= nblocks[d];
  }
  if (x.dim(2) != L) {
    return ctx.error("input " + x.describe() + " has " + itos(x.dim(2)) + " blocks but image/block/strides give " +
                     itos(L));
  }
  const int64_t N = x.dim(0), C = x.dim(1) / kprod;
  Dims out_shape = {N, C};
  int64_t img_size = 1;
  for (int64_t v : image) {
    out_shape.push_back(v);
    img_size *= v;
  }
  if (!shape_is_sane(out_shape)) {
    return ctx.error("Col2Im output shape " + shape_to_string(out_shape) + " is invalid or too large");
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dtype(), out_shape));
  const Dims img_st = contiguous_strides(image);
  return dispatch_numeric(
      x.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        using A = compute_t<T>;
        std::vector<A> acc(static_cast<size_t>(N * C * img_size), A(0));
        const T* src = x.data<T>();
        std::vector<int64_t> kidx(nd), bidx(nd);
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t c = 0; c < C; ++c) {
            A* dst = acc.data() + (n * C + c) * img_size;
            for (int64_t k = 0; k < kprod; ++k) {
              int64_t rem = k;
              for (size_t d = nd; d-- > 0;) {
                kidx[d] = rem % block[d];
                rem /= block[d];
              }
              const T* row = src + ((n * C + c) * kprod + k) * L;
              for (int64_t l = 0; l < L; ++l) {
                int64_t rl = l, off = 0;
                bool inside = true;
                for (size_t d = nd; d-- > 0;) {
                  bidx[d] = rl % nblocks[d];
                  rl /= nblocks[d];
                  const int64_t p = bidx[d] * strides[d] - pads[d] + kidx[d] * dil[d];
                  if (p < 0 || p >= image[d]) {
                    inside = false;
                    break;
                  }
                  off += p * img_st[d];
                }
                if (inside) dst[off] += static_cast<A>(row[l]);
              }
            }
          }
        }
        T* o = out->data<T>();
        for (size_t i = 0; i < acc.size(); ++i) o[i] = static_cast<T>(acc[i]);
        return Status::Ok();
      },
      [&] { return ctx.error("unsupported dtype " + x.describe()); });
}

}  // namespace

void register_image_resize_ops(ep::KernelRegistry& r);  // image/resize.cpp
void register_image_ops(ep::KernelRegistry& r);         // image/grid_roi_nms.cpp

void register_tensor_ops(ep::KernelRegistry& r) {
  register_image_resize_ops(r);
  register_image_ops(r);
  r.add_fn("Shape", &shape_fn);
  r.add_fn("Size", &size_fn);
  r.add_fn("Reshape", &reshape_fn);
  r.add_fn("Flatten", &flatten_fn);
  r.add_fn("Squeeze", &squeeze_fn);
  r.add_fn("Unsqueeze", &unsqueeze_fn);
  r.add_fn("Identity", &identity_fn);
  r.add_class<TransposeKernel>("", "Transpose");
  r.add_class<ConcatKernel>("", "Concat");
  r.add_fn("Split", &split_fn);
  r.add_fn("Slice", &slice_fn);
  r.add_fn("Expand", &expand_fn);
  r.add_fn("Tile", &tile_fn);
  r.add_fn("Pad", &pad_fn);
  r.add_fn("DepthToSpace", &depth_to_space_fn);
  r.add_fn("SpaceToDepth", &space_to_depth_fn);
  r.add_fn("Trilu", &trilu_fn);
  r.add_fn("ReverseSequence", &reverse_sequence_fn);
  r.add_fn("OneHot", &onehot_fn);
  r.add_fn("CenterCropPad", &center_crop_pad_fn);
  r.add_fn("Col2Im", &col2im_fn);
}

}  // namespace nxrt::ops
