// Shape rules and op schemas: shape and movement ops (Shape, Reshape, Squeeze, Transpose, Concat, Split,
// Slice, Expand, Tile, Pad, DepthToSpace, ...). Small int tensors keep their tracked values through the
// ops that only move them, so shapes computed in the graph (Shape -> Gather -> Concat -> Reshape) stay known.
#include <algorithm>

#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

Status op_identity(NodeContext& c) {
  c.set(0, c.input(0));
  return Status::Ok();
}

Status op_shape(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) {
    c.set(0, tensor(DataType::kInt64, {SymDim::s(c.S.mint())}));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t start = c.opset >= 15 ? c.ai("start", 0) : 0, end = c.opset >= 15 ? c.ai("end", r) : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  std::vector<SymDim> vals;
  for (int64_t i = start; i < end; ++i) vals.push_back(x.dims[static_cast<size_t>(i)]);
  ValueFacts v = tensor(DataType::kInt64, {SymDim::c(static_cast<int64_t>(vals.size()))});
  if (vals.size() <= kMaxValues) {
    v.has_values = true;
    v.values = std::move(vals);
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_size(NodeContext& c) {
  ValueFacts v = tensor(DataType::kInt64, {});
  const ValueFacts& x = c.input(0);
  v.has_values = true;
  v.values = {x.has_shape ? mul(c.S, x.dims) : SymDim::s(c.S.mint())};
  c.set(0, std::move(v));
  return Status::Ok();
}

// Output 0 holds x's elements in new dims (Reshape, Squeeze, Unsqueeze): tracked values carry over.
Status set_reshaped(NodeContext& c, const ValueFacts& x, std::vector<SymDim> dims) {
  ValueFacts v = tensor(x.dtype, std::move(dims));
  v.has_values = x.has_values;
  v.values = x.values;
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_reshape(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  std::optional<std::vector<SymDim>> target;
  if (c.opset < 5) {
    if (auto s = c.aints("shape")) {
      target.emplace();
      for (int64_t v : *s) target->push_back(SymDim::c(v));
    }
  } else {
    target = shape_from_input(c, 1);
  }
  if (!target) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  bool allowzero = c.opset >= 14 && c.ai("allowzero", 0) != 0;
  std::vector<SymDim> out = *target;
  int infer_at = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    SymDim& d = out[i];
    if (!d.is_const()) continue;
    if (d.value == 0 && !allowzero) {
      if (x.has_shape && i < x.dims.size()) {
        d = x.dims[i];
      } else if (x.has_shape) {
        return c.error("shape " + c.S.dims_string(*target) + " copies dim " + std::to_string(i) + " of input " +
                       c.shape_str(x));
      } else {
        d = SymDim::s(c.S.mint());
      }
    } else if (d.value == -1) {
      if (infer_at >= 0) return c.error("shape " + c.S.dims_string(*target) + " has more than one -1");
      infer_at = static_cast<int>(i);
    } else if (d.value < -1) {
      return c.error("shape " + c.S.dims_string(*target) + " has a negative dim");
    }
  }
  if (infer_at >= 0) {
    std::vector<SymDim> known;
    for (size_t i = 0; i < out.size(); ++i) {
      if (static_cast<int>(i) != infer_at) known.push_back(out[i]);
    }
    if (!x.has_shape) {
      out[static_cast<size_t>(infer_at)] = SymDim::s(c.S.mint());
    } else {
      auto r = divide(c.S, x.dims, known);
      if (!r) {
        return c.error("cannot reshape " + c.shape_str(x) + " to " + c.S.dims_string(*target));
      }
      out[static_cast<size_t>(infer_at)] = *r;
    }
  } else if (x.is_static()) {
    bool all_const = true;
    for (const auto& d : out) all_const = all_const && d.is_const();
    if (all_const) {
      int64_t a = 1, b = 1;
      for (const auto& d : x.dims) a = mul_i(a, d.value);
      for (const auto& d : out) b = mul_i(b, d.value);
      if (a != b) return c.error("cannot reshape " + c.shape_str(x) + " to " + c.S.dims_string(*target));
    }
  }
  return set_reshaped(c, x, std::move(out));
}

Status op_flatten(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) {
    c.set(0, tensor(x.dtype, {SymDim::s(c.S.mint()), SymDim::s(c.S.mint())}));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", 1);
  if (axis < 0) axis += r;
  if (axis < 0 || axis > r) return c.error("axis " + std::to_string(c.ai("axis", 1)) + " out of range for " + c.shape_str(x));
  std::vector<SymDim> a(x.dims.begin(), x.dims.begin() + axis), b(x.dims.begin() + axis, x.dims.end());
  ValueFacts v = tensor(x.dtype, {mul(c.S, a), mul(c.S, b)});
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_squeeze(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  auto axes = axes_of(c, 1, 13);
  bool axes_given = c.opset >= 13 ? c.has(1) : c.attr("axes") != nullptr;
  if (!x.has_shape || !axes) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::vector<bool> drop(x.dims.size(), false);
  if (!axes_given || axes->empty()) {
    for (size_t i = 0; i < x.dims.size(); ++i) {
      if (!x.dims[i].is_const()) {
        c.set(0, tensor_unknown_rank(x.dtype));
        return Status::Ok();
      }
      drop[i] = x.dims[i].value == 1;
    }
  } else {
    for (int64_t a : *axes) {
      if (!norm_axis(a, r)) return c.error("axis " + std::to_string(a) + " out of range for " + c.shape_str(x));
      SymDim d = x.dims[static_cast<size_t>(a)];
      if (d.is_const() && d.value != 1) {
        return c.error("cannot squeeze axis " + std::to_string(a) + " of " + c.shape_str(x));
      }
      drop[static_cast<size_t>(a)] = true;
    }
  }
  std::vector<SymDim> out;
  for (size_t i = 0; i < x.dims.size(); ++i) {
    if (!drop[i]) out.push_back(x.dims[i]);
  }
  return set_reshaped(c, x, std::move(out));
}

Status op_unsqueeze(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  auto axes = axes_of(c, 1, 13);
  if (x.has_shape && !axes && c.input(1).has_shape && c.input(1).dims.size() == 1 && c.input(1).dims[0].is_const()) {
    // Axes not known, their count is: the rank is.
    std::vector<SymDim> dims;
    for (size_t i = 0; i < x.dims.size() + static_cast<size_t>(c.input(1).dims[0].value); ++i) {
      dims.push_back(SymDim::s(c.S.mint()));
    }
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  if (!x.has_shape || !axes) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size() + axes->size());
  std::vector<bool> ins(static_cast<size_t>(r), false);
  for (int64_t a : *axes) {
    if (!norm_axis(a, r) || ins[static_cast<size_t>(a)]) {
      return c.error("bad axes for unsqueezing " + c.shape_str(x));
    }
    ins[static_cast<size_t>(a)] = true;
  }
  std::vector<SymDim> out;
  size_t j = 0;
  for (size_t i = 0; i < ins.size(); ++i) out.push_back(ins[i] ? SymDim::c(1) : x.dims[j++]);
  return set_reshaped(c, x, std::move(out));
}

Status op_transpose(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  size_t r = x.dims.size();
  std::vector<int64_t> perm;
  if (auto p = c.aints("perm")) {
    perm = *p;
  } else {
    for (size_t i = 0; i < r; ++i) perm.push_back(static_cast<int64_t>(r - 1 - i));
  }
  if (perm.size() != r) return c.error("perm has " + std::to_string(perm.size()) + " entries for " + c.shape_str(x));
  std::vector<SymDim> out;
  for (int64_t p : perm) {
    if (!norm_axis(p, static_cast<int64_t>(r))) return c.error("perm entry out of range for " + c.shape_str(x));
    out.push_back(x.dims[static_cast<size_t>(p)]);
  }
  c.set(0, tensor(x.dtype, out));
  return Status::Ok();
}

// com.microsoft QLinearConcat (Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples): the
// concatenation of the X inputs along `axis`, of X0's type.
Status op_qlinear_concat(NodeContext& c) {
  const ValueFacts* first = nullptr;
  bool all_known = true;
  for (size_t i = 2; i < c.nin(); i += 3) {
    if (!c.has(i) || !c.input(i).has_shape) {
      all_known = false;
    } else if (!first) {
      first = c.in[i];
    }
  }
  const DataType dt = c.has(2) ? c.input(2).dtype : DataType::kUndefined;
  if (!first || !all_known) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(first->dims.size());
  int64_t axis = c.ai("axis", 0);
  if (!norm_axis(axis, r)) return c.error("axis " + std::to_string(axis) + " out of range for " + c.shape_str(*first));
  std::vector<SymDim> out = first->dims;
  std::vector<SymDim> terms;
  for (size_t i = 2; i < c.nin(); i += 3) {
    const ValueFacts& x = c.input(i);
    if (static_cast<int64_t>(x.dims.size()) != r) return c.error("inputs differ in rank: " + c.shape_str(*first) + " and " + c.shape_str(x));
    for (int64_t j = 0; j < r; ++j) {
      if (j == axis) continue;
      SymDim res;
      NXRT_RETURN_IF_ERROR(c.unify(out[static_cast<size_t>(j)], x.dims[static_cast<size_t>(j)],
                                   "inputs differ off the concat axis: " + c.shape_str(*first) + " and " + c.shape_str(x), &res));
      out[static_cast<size_t>(j)] = res;
    }
    terms.push_back(x.dims[static_cast<size_t>(axis)]);
  }
  out[static_cast<size_t>(axis)] = add(c.S, terms);
  c.set(0, tensor(dt, out));
  return Status::Ok();
}

Status op_concat(NodeContext& c) {
  DataType dt = DataType::kUndefined;
  const ValueFacts* first = nullptr;
  bool all_known = true;
  for (size_t i = 0; i < c.nin(); ++i) {
    if (!c.has(i)) continue;
    if (dt == DataType::kUndefined) dt = c.input(i).dtype;
    if (!c.input(i).has_shape) {
      all_known = false;
    } else if (!first) {
      first = c.in[i];
    }
  }
  if (!first) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(first->dims.size());
  int64_t axis = c.ai("axis", c.opset < 4 ? 1 : 0);
  if (!norm_axis(axis, r)) return c.error("axis " + std::to_string(axis) + " out of range for " + c.shape_str(*first));
  std::vector<SymDim> out = first->dims;
  std::vector<SymDim> terms;
  for (size_t i = 0; i < c.nin(); ++i) {
    if (!c.has(i) || !c.input(i).has_shape) continue;
    const ValueFacts& x = c.input(i);
    if (static_cast<int64_t>(x.dims.size()) != r) {
      return c.error("inputs have ranks " + std::to_string(r) + " and " + std::to_string(x.dims.size()) + ": " +
                     c.shape_str(*first) + " and " + c.shape_str(x));
    }
    for (int64_t j = 0; j < r; ++j) {
      if (j == axis) continue;
      SymDim res;
      NXRT_RETURN_IF_ERROR(c.unify(out[static_cast<size_t>(j)], x.dims[static_cast<size_t>(j)],
                                   "inputs differ off the concat axis " + std::to_string(axis) + ": " +
                                       c.shape_str(*first) + " and " + c.shape_str(x),
                                   &res));
      out[static_cast<size_t>(j)] = res;
    }
    terms.push_back(x.dims[static_cast<size_t>(axis)]);
  }
  out[static_cast<size_t>(axis)] = all_known ? add(c.S, terms) : SymDim::s(c.S.mint());
  ValueFacts v = tensor(dt, out);
  if (r == 1) {
    bool vals = true;
    std::vector<SymDim> all;
    for (size_t i = 0; i < c.nin() && vals; ++i) {
      if (!c.has(i)) continue;
      vals = c.input(i).has_values;
      if (vals) all.insert(all.end(), c.input(i).values.begin(), c.input(i).values.end());
    }
    if (vals && all.size() <= kMaxValues) {
      v.has_values = true;
      v.values = std::move(all);
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_split(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  size_t n = c.nout();
  if (!x.has_shape) {
    for (size_t i = 0; i < n; ++i) c.set(i, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", 0);
  if (!norm_axis(axis, r)) return c.error("axis out of range for " + c.shape_str(x));
  std::optional<std::vector<int64_t>> sizes;
  bool sizes_given = false;
  if (c.opset >= 13) {
    if (c.has(1)) {
      sizes_given = true;
      sizes = c.const_ints(1);
    }
  } else if (c.attr("split")) {
    sizes_given = true;
    sizes = c.aints("split");
  } else if (c.opset < 2 && c.has(1)) {
    sizes_given = true;
    sizes = c.const_ints(1);
  }
  SymDim d = x.dims[static_cast<size_t>(axis)];
  std::vector<SymDim> parts;
  if (sizes_given) {
    if (sizes) {
      for (int64_t s : *sizes) parts.push_back(SymDim::c(s));
      if (d.is_const()) {
        int64_t sum = 0;
        for (int64_t s : *sizes) sum = add_i(sum, s);
        if (sum != d.value) {
          return c.error("split sizes sum to " + std::to_string(sum) + " but the axis of " + c.shape_str(x) +
                         " is " + std::to_string(d.value));
        }
      }
    } else {
      for (size_t i = 0; i < n; ++i) parts.push_back(SymDim::s(c.S.mint()));
    }
  } else {
    int64_t k = c.opset >= 18 && c.attr("num_outputs") ? c.ai("num_outputs", static_cast<int64_t>(n))
                                                      : static_cast<int64_t>(n);
    if (k <= 0) return c.error("num_outputs must be positive");
    // Parts past the node's outputs are never used (and num_outputs comes from the file).
    const int64_t made = std::min<int64_t>(k, static_cast<int64_t>(n));
    if (d.is_const()) {
      int64_t each = c.opset >= 18 ? ceildiv_i(d.value, k) : d.value / k;
      if (c.opset < 18 && d.value % k != 0) {
        return c.error("axis of " + c.shape_str(x) + " does not split evenly into " + std::to_string(k));
      }
      for (int64_t i = 0; i < made; ++i) {
        parts.push_back(SymDim::c(std::max<int64_t>(0, std::min(each, sub_i(d.value, mul_i(i, each))))));
      }
    } else {
      SymDim each = c.opset >= 18 ? ceildiv(c.S, d, SymDim::c(k)) : floordiv(c.S, d, SymDim::c(k));
      for (int64_t i = 0; i < made; ++i) parts.push_back(i + 1 < k || c.opset < 18 ? each : SymDim::s(c.S.mint()));
      if (c.opset >= 18 && k > 1 && made == k) parts.back() = sub(c.S, d, mul(c.S, {each, SymDim::c(k - 1)}));
    }
  }
  for (size_t i = 0; i < n; ++i) {
    std::vector<SymDim> dims = x.dims;
    dims[static_cast<size_t>(axis)] = i < parts.size() ? parts[i] : SymDim::s(c.S.mint());
    c.set(i, tensor(x.dtype, dims));
  }
  return Status::Ok();
}

// Slice length for a constant dim (ONNX clamping rules).
int64_t slice_len(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (step == 0) return 0;
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end > start ? (end - start + step - 1) / step : 0;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start > end ? (start - end - step - 1) / (-step) : 0;
}

Status op_slice(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::optional<std::vector<int64_t>> starts, ends, axes, steps;
  if (c.opset < 10) {
    starts = c.aints("starts");
    ends = c.aints("ends");
    axes = c.aints("axes");
  } else {
    starts = c.const_ints(1);
    ends = c.const_ints(2);
    if (c.has(3)) axes = c.const_ints(3);
    if (c.has(4)) steps = c.const_ints(4);
    if ((c.has(3) && !axes) || (c.has(4) && !steps)) starts.reset();
  }
  if (!starts || !ends || starts->size() != ends->size()) {
    // Unknown bounds: the rank stays, the sliced extents are unknown.
    std::vector<SymDim> dims;
    std::vector<bool> touched(static_cast<size_t>(r), axes.has_value() ? false : true);
    if (axes) {
      for (int64_t a : *axes) {
        if (norm_axis(a, r)) touched[static_cast<size_t>(a)] = true;
      }
    }
    for (int64_t i = 0; i < r; ++i) dims.push_back(touched[static_cast<size_t>(i)] ? SymDim::s(c.S.mint()) : x.dims[static_cast<size_t>(i)]);
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  if (!axes) {
    axes.emplace();
    for (size_t i = 0; i < starts->size(); ++i) axes->push_back(static_cast<int64_t>(i));
  }
  if (!steps) steps = std::vector<int64_t>(starts->size(), 1);
  if (axes->size() != starts->size() || steps->size() != starts->size()) return c.error("starts/ends/axes/steps lengths differ");
  std::vector<SymDim> dims = x.dims;
  std::optional<std::vector<SymDim>> vals;
  if (x.has_values && r <= 1) vals = x.values;
  for (size_t i = 0; i < axes->size(); ++i) {
    int64_t a = (*axes)[i];
    if (!norm_axis(a, r)) return c.error("axis " + std::to_string((*axes)[i]) + " out of range for " + c.shape_str(x));
    int64_t s = (*starts)[i], e = (*ends)[i], st = (*steps)[i];
    if (st == 0) return c.error("step is 0");
    SymDim d = x.dims[static_cast<size_t>(a)];
    if (d.is_const()) {
      dims[static_cast<size_t>(a)] = SymDim::c(slice_len(d.value, s, e, st));
      if (vals && static_cast<int64_t>(vals->size()) == d.value) {
        std::vector<SymDim> nv;
        int64_t n = d.value, b = s < 0 ? s + n : s;
        b = st > 0 ? std::clamp<int64_t>(b, 0, n) : std::clamp<int64_t>(b, 0, n - 1);
        for (int64_t k = 0, len = slice_len(n, s, e, st); k < len; ++k) nv.push_back((*vals)[static_cast<size_t>(b + k * st)]);
        vals = std::move(nv);
      } else {
        vals.reset();
      }
      continue;
    }
    vals.reset();
    if (st == 1 && s >= 0 && e >= kBig / 4) {
      dims[static_cast<size_t>(a)] = sub(c.S, d, SymDim::c(s));
    } else if (st == 1 && s == 0 && e >= 0) {
      dims[static_cast<size_t>(a)] = fn(c.S, "min", {d, SymDim::c(e)});
    } else {
      dims[static_cast<size_t>(a)] = fn(c.S, "slice", {d, SymDim::c(s), SymDim::c(std::min(e, kBig)), SymDim::c(st)});
    }
  }
  ValueFacts v = tensor(x.dtype, dims);
  if (vals) {
    v.has_values = true;
    v.values = std::move(*vals);
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_expand(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  auto shape = shape_from_input(c, 1);
  if (!shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  ValueFacts t = tensor(x.dtype, *shape);
  bool known;
  std::vector<SymDim> dims;
  NXRT_RETURN_IF_ERROR(broadcast(c, {&x, &t}, &known, &dims));
  c.set(0, known ? tensor(x.dtype, dims) : tensor_unknown_rank(x.dtype));
  return Status::Ok();
}

Status op_tile(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  std::vector<SymDim> dims = x.dims;
  const ValueFacts& rep = c.input(1);
  if (rep.has_values && rep.values.size() == dims.size()) {
    for (size_t i = 0; i < dims.size(); ++i) dims[i] = mul(c.S, {dims[i], rep.values[i]});
  } else {
    for (auto& d : dims) d = SymDim::s(c.S.mint());
  }
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_pad(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::optional<std::vector<SymDim>> pads;
  if (c.opset < 11) {
    if (auto p = c.aints(c.opset < 2 ? "paddings" : "pads")) {
      pads.emplace();
      for (int64_t v : *p) pads->push_back(SymDim::c(v));
    }
  } else if (c.has(1) && c.input(1).has_values) {
    pads = c.input(1).values;
  }
  std::vector<int64_t> axes;
  if (c.opset >= 18 && c.has(3)) {
    auto a = c.const_ints(3);
    if (!a) {
      std::vector<SymDim> dims;
      for (int64_t i = 0; i < r; ++i) dims.push_back(SymDim::s(c.S.mint()));
      c.set(0, tensor(x.dtype, dims));
      return Status::Ok();
    }
    axes = *a;
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  std::vector<SymDim> dims = x.dims;
  if (!pads || pads->size() != 2 * axes.size()) {
    for (int64_t a : axes) {
      if (norm_axis(a, r)) dims[static_cast<size_t>(a)] = SymDim::s(c.S.mint());
    }
  } else {
    for (size_t i = 0; i < axes.size(); ++i) {
      int64_t a = axes[i];
      if (!norm_axis(a, r)) return c.error("pad axis out of range for " + c.shape_str(x));
      dims[static_cast<size_t>(a)] = add(c.S, {dims[static_cast<size_t>(a)], (*pads)[i], (*pads)[i + axes.size()]});
    }
  }
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_depth_space(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape || x.dims.size() != 4) return same_as_input0(c);
  int64_t b = c.ai("blocksize", 1);
  SymDim bb = SymDim::c(mul_i(b, b));
  std::vector<SymDim> d = x.dims;
  if (c.n->op_type == "DepthToSpace") {
    d[1] = floordiv(c.S, d[1], bb);
    d[2] = mul(c.S, {d[2], SymDim::c(b)});
    d[3] = mul(c.S, {d[3], SymDim::c(b)});
  } else {
    d[1] = mul(c.S, {d[1], bb});
    d[2] = floordiv(c.S, d[2], SymDim::c(b));
    d[3] = floordiv(c.S, d[3], SymDim::c(b));
  }
  c.set(0, tensor(x.dtype, d));
  return Status::Ok();
}

}  // namespace

void add_tensor_schemas(SchemaList& s) {
  s.add("Identity", &op_identity).rank(kSameAsInput0).differentiable();
  s.add("Shape", &op_shape);
  s.add("Size", &op_size);
  s.add("Reshape", &op_reshape);
  s.add("Flatten", &op_flatten);
  s.add("Squeeze", &op_squeeze);
  s.add("Unsqueeze", &op_unsqueeze);
  s.add("Transpose", &op_transpose).rank(kSameAsInput0);
  s.add("Concat", &op_concat).rank(kSameAsInputs);
  s.add("com.microsoft", "QLinearConcat", &op_qlinear_concat);
  s.add("Split", &op_split);
  s.add("Slice", &op_slice).rank(kSameAsInput0);
  s.add("Expand", &op_expand);
  s.add("Tile", &op_tile).rank(kSameAsInput0);
  s.add("Pad", &op_pad).rank(kSameAsInput0);
  s.add("DepthToSpace", &op_depth_space).rank(kSameAsInput0);
  s.add("SpaceToDepth", &op_depth_space).rank(kSameAsInput0);
  for (const char* op : {"Trilu", "ReverseSequence"}) s.add(op, &same_as_input0).rank(kSameAsInput0);
}

}  // namespace nxrt::shape
