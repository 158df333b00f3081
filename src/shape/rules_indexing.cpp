// Shape rules and op schemas: the Gather/Scatter family, TopK, NonZero, Compress, Unique, OneHot.
#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

Status op_gather(NodeContext& c) {
  const ValueFacts &x = c.input(0), &idx = c.input(1);
  if (!x.has_shape || !idx.has_shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", 0);
  if (!norm_axis(axis, r)) return c.error("axis out of range for " + c.shape_str(x));
  std::vector<SymDim> out(x.dims.begin(), x.dims.begin() + axis);
  out.insert(out.end(), idx.dims.begin(), idx.dims.end());
  out.insert(out.end(), x.dims.begin() + axis + 1, x.dims.end());
  ValueFacts v = tensor(x.dtype, out);
  if (x.has_values && r == 1) {
    if (auto ids = c.const_ints(1)) {
      int64_t n = static_cast<int64_t>(x.values.size());
      v.has_values = true;
      for (int64_t i : *ids) {
        if (i < 0) i += n;
        if (i < 0 || i >= n) return c.error("index out of range for " + c.shape_str(x));
        v.values.push_back(x.values[static_cast<size_t>(i)]);
      }
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_gather_elements(NodeContext& c) {
  ValueFacts v = tensor_like(c.input(1));
  v.dtype = c.input(0).dtype;
  c.set(0, v);
  return Status::Ok();
}

Status op_gather_nd(NodeContext& c) {
  const ValueFacts &x = c.input(0), &idx = c.input(1);
  int64_t b = c.ai("batch_dims", 0);
  if (!x.has_shape || !idx.has_shape || idx.dims.empty() || !idx.dims.back().is_const()) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  int64_t k = idx.dims.back().value;
  if (b + k > static_cast<int64_t>(x.dims.size())) return c.error("indices " + c.shape_str(idx) + " too deep for " + c.shape_str(x));
  std::vector<SymDim> out(idx.dims.begin(), idx.dims.end() - 1);
  out.insert(out.end(), x.dims.begin() + b + k, x.dims.end());
  c.set(0, tensor(x.dtype, out));
  return Status::Ok();
}

Status op_topk(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
    c.set(1, tensor_unknown_rank(DataType::kInt64));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(x.dims.size());
  int64_t axis = c.ai("axis", -1);
  if (!norm_axis(axis, r)) return c.error("axis out of range for " + c.shape_str(x));
  SymDim k;
  if (c.opset < 10) {
    k = SymDim::c(c.ai("k", 0));
  } else if (auto s = c.sym_scalar(1)) {
    k = *s;
  } else {
    k = SymDim::s(c.S.mint());
  }
  std::vector<SymDim> dims = x.dims;
  dims[static_cast<size_t>(axis)] = k;
  c.set(0, tensor(x.dtype, dims));
  c.set(1, tensor(DataType::kInt64, dims));
  return Status::Ok();
}

Status op_nonzero(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  SymDim r = x.has_shape ? SymDim::c(static_cast<int64_t>(x.dims.size())) : SymDim::s(c.S.mint());
  c.set(0, tensor(DataType::kInt64, {r, SymDim::s(c.S.mint())}));
  return Status::Ok();
}

Status op_compress(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  const ir::Attribute* a = c.attr("axis");
  if (!a) {
    c.set(0, tensor(x.dtype, {SymDim::s(c.S.mint())}));
    return Status::Ok();
  }
  if (!x.has_shape) return same_as_input0(c);
  int64_t axis = a->i;
  if (!norm_axis(axis, static_cast<int64_t>(x.dims.size()))) return c.error("axis out of range for " + c.shape_str(x));
  std::vector<SymDim> dims = x.dims;
  dims[static_cast<size_t>(axis)] = SymDim::s(c.S.mint());
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_unique(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  SymDim u = SymDim::s(c.S.mint());
  const ir::Attribute* a = c.attr("axis");
  SymDim len = x.has_shape ? mul(c.S, x.dims) : SymDim::s(c.S.mint());
  if (!a) {
    c.set(0, tensor(x.dtype, {u}));
  } else if (!x.has_shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
  } else {
    int64_t axis = a->i;
    if (!norm_axis(axis, static_cast<int64_t>(x.dims.size()))) return c.error("axis out of range for " + c.shape_str(x));
    std::vector<SymDim> dims = x.dims;
    len = dims[static_cast<size_t>(axis)];
    dims[static_cast<size_t>(axis)] = u;
    c.set(0, tensor(x.dtype, dims));
  }
  c.set(1, tensor(DataType::kInt64, {u}));
  c.set(2, tensor(DataType::kInt64, {len}));
  c.set(3, tensor(DataType::kInt64, {u}));
  return Status::Ok();
}

Status op_onehot(NodeContext& c) {
  const ValueFacts& idx = c.input(0);
  DataType dt = c.input(2).dtype;
  if (!idx.has_shape) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  int64_t r = static_cast<int64_t>(idx.dims.size()) + 1;
  int64_t axis = c.ai("axis", -1);
  if (!norm_axis(axis, r)) return c.error("axis out of range");
  auto depth = c.sym_scalar(1);
  std::vector<SymDim> d = idx.dims;
  d.insert(d.begin() + axis, depth ? *depth : SymDim::s(c.S.mint()));
  c.set(0, tensor(dt, d));
  return Status::Ok();
}

// nxrt::SelectPositions(X [batch, seq, ...], positions [batch, k]) -> [batch, k, ...] (ops/tensor/indexing.cpp).
Status op_select_positions(NodeContext& c) {
  const ValueFacts &x = c.input(0), &p = c.input(1);
  if (!x.has_shape) {
    c.set(0, tensor_unknown_rank(x.dtype));
    return Status::Ok();
  }
  if (x.dims.size() < 2) return c.error("X " + c.shape_str(x) + " must be [batch, seq, ...] (rank >= 2)");
  std::vector<SymDim> out = x.dims;
  if (p.has_shape) {
    if (p.dims.size() != 2) return c.error("positions " + c.shape_str(p) + " must be [batch, k]");
    NXRT_RETURN_IF_ERROR(c.unify(x.dims[0], p.dims[0], "the batch of X and of positions", &out[0]));
    out[1] = p.dims[1];
  } else {
    out[1] = SymDim::s(c.S.mint());
  }
  c.set(0, tensor(x.dtype, out));
  return Status::Ok();
}

}  // namespace

void add_indexing_schemas(SchemaList& s) {
  s.add("Gather", &op_gather);
  s.add("GatherElements", &op_gather_elements);
  s.add("GatherND", &op_gather_nd);
  s.add(ir::kNxrtDomain, "SelectPositions", &op_select_positions);
  for (const char* op : {"ScatterElements", "ScatterND", "Scatter"}) s.add(op, &same_as_input0).rank(kSameAsInput0);
  s.add("TopK", &op_topk).rank(kSameAsInput0);
  s.add("NonZero", &op_nonzero);
  s.add("Compress", &op_compress);
  s.add("Unique", &op_unique);
  s.add("OneHot", &op_onehot);
}

}  // namespace nxrt::shape
