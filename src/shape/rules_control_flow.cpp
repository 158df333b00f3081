// Shape rules and op schemas: If, Loop and Scan (their bodies are inferred as subgraphs that see the
// enclosing values), sequences and optionals (facts of the element, merged where several can flow in).
#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

namespace {

// The facts two values share (If branches, a loop-carried value before and after an iteration): dims
// that are not the same become fresh symbols, dtypes that differ become undefined.
ValueFacts merge_branches(SymbolTable& S, const ValueFacts& a, const ValueFacts& b) {
  if (a.kind != b.kind) return ValueFacts{};
  ValueFacts r;
  r.kind = a.kind;
  r.dtype = a.dtype == b.dtype ? a.dtype : DataType::kUndefined;
  if (a.inner && b.inner) r.inner = std::make_shared<ValueFacts>(merge_branches(S, *a.inner, *b.inner));
  if (a.has_shape && b.has_shape && a.dims.size() == b.dims.size()) {
    r.has_shape = true;
    for (size_t i = 0; i < a.dims.size(); ++i) r.dims.push_back(S.same(a.dims[i], b.dims[i]) ? a.dims[i] : SymDim::s(S.mint()));
  }
  if (a.has_values && b.has_values && a.values.size() == b.values.size()) {
    bool eq = true;
    for (size_t i = 0; i < a.values.size(); ++i) eq = eq && S.same(a.values[i], b.values[i]);
    if (eq) {
      r.has_values = true;
      r.values = a.values;
    }
  }
  return r;
}

ValueFacts wrap(Kind k, ValueFacts inner) {
  ValueFacts v;
  v.kind = k;
  v.inner = std::make_shared<ValueFacts>(strip_values(std::move(inner)));
  return v;
}

Status op_sequence(NodeContext& c) {
  const std::string& op = c.n->op_type;
  if (op == "SequenceConstruct") {
    ValueFacts e = c.input(0);
    for (size_t i = 1; i < c.nin(); ++i) e = merge_branches(c.S, e, c.input(i));
    c.set(0, wrap(Kind::kSequence, e));
  } else if (op == "SequenceEmpty") {
    c.set(0, wrap(Kind::kSequence, tensor_unknown_rank(static_cast<DataType>(c.ai("dtype", 1)))));
  } else if (op == "SequenceAt") {
    c.set(0, c.input(0).inner ? *c.input(0).inner : ValueFacts{});
  } else if (op == "SequenceLength") {
    c.set(0, tensor(DataType::kInt64, {}));
  } else if (op == "SequenceInsert") {
    const ValueFacts& s = c.input(0);
    c.set(0, wrap(Kind::kSequence, s.inner ? merge_branches(c.S, *s.inner, c.input(1)) : c.input(1)));
  } else if (op == "SequenceErase") {
    c.set(0, c.input(0));
  } else if (op == "SplitToSequence") {
    const ValueFacts& x = c.input(0);
    ValueFacts e = tensor_unknown_rank(x.dtype);
    if (x.has_shape) {
      int64_t axis = c.ai("axis", 0);
      if (!norm_axis(axis, static_cast<int64_t>(x.dims.size()))) return c.error("axis out of range for " + c.shape_str(x));
      e = tensor(x.dtype, x.dims);
      if (!c.has(1) && c.ai("keepdims", 1) == 0) {
        e.dims.erase(e.dims.begin() + axis);
      } else {
        e.dims[static_cast<size_t>(axis)] = SymDim::s(c.S.mint());
      }
    }
    c.set(0, wrap(Kind::kSequence, e));
  } else if (op == "ConcatFromSequence") {
    const ValueFacts* e = c.input(0).inner.get();
    DataType dt = e ? e->dtype : DataType::kUndefined;
    if (!e || !e->has_shape) {
      c.set(0, tensor_unknown_rank(dt));
      return Status::Ok();
    }
    bool new_axis = c.ai("new_axis", 0) != 0;
    int64_t r = static_cast<int64_t>(e->dims.size()) + (new_axis ? 1 : 0);
    int64_t axis = c.ai("axis", 0);
    if (!norm_axis(axis, r)) return c.error("axis out of range");
    std::vector<SymDim> d = e->dims;
    if (new_axis) {
      d.insert(d.begin() + axis, SymDim::s(c.S.mint()));
    } else {
      d[static_cast<size_t>(axis)] = SymDim::s(c.S.mint());
    }
    c.set(0, tensor(dt, d));
  } else if (op == "Optional") {
    if (c.has(0)) {
      c.set(0, wrap(Kind::kOptional, c.input(0)));
    } else {
      const ir::Attribute* t = c.attr("type");
      ValueFacts v;
      v.kind = Kind::kOptional;
      if (t) v.inner = std::make_shared<ValueFacts>(from_type(c.S, t->tp));
      c.set(0, v);
    }
  } else if (op == "OptionalGetElement") {
    const ValueFacts& o = c.input(0);
    c.set(0, o.kind == Kind::kOptional ? (o.inner ? *o.inner : ValueFacts{}) : o);
  } else if (op == "OptionalHasElement") {
    c.set(0, tensor(DataType::kBool, {}));
  }
  return Status::Ok();
}

Status op_if(NodeContext& c) {
  const ir::Attribute* th = c.attr("then_branch");
  const ir::Attribute* el = c.attr("else_branch");
  if (!th || !th->g || !el || !el->g) return Status::Ok();
  NXRT_ASSIGN_OR_RETURN(auto a, c.infer_subgraph(*th->g, nullptr));
  NXRT_ASSIGN_OR_RETURN(auto b, c.infer_subgraph(*el->g, nullptr));
  auto cond = c.const_scalar(0);
  for (size_t i = 0; i < c.nout(); ++i) {
    if (i >= a.size() || i >= b.size()) {
      c.set(i, ValueFacts{});
    } else if (cond) {
      c.set(i, *cond ? a[i] : b[i]);
    } else {
      c.set(i, merge_branches(c.S, a[i], b[i]));
    }
  }
  return Status::Ok();
}

Status op_loop(NodeContext& c) {
  const ir::Attribute* body = c.attr("body");
  if (!body || !body->g) return Status::Ok();
  size_t ncarried = c.nin() >= 2 ? c.nin() - 2 : 0;
  std::vector<ValueFacts> feed = {tensor(DataType::kInt64, {}), tensor(DataType::kBool, {})};
  for (size_t i = 0; i < ncarried; ++i) feed.push_back(strip_values(c.input(i + 2)));
  NXRT_ASSIGN_OR_RETURN(auto outs, c.infer_subgraph(*body->g, &feed));
  // Carried values whose shape changes across iterations: generalize and infer the body again.
  bool changed = false;
  for (size_t i = 0; i < ncarried && 1 + i < outs.size(); ++i) {
    ValueFacts m = merge_branches(c.S, feed[i + 2], strip_values(outs[1 + i]));
    if (m.dims.size() != feed[i + 2].dims.size() || m.has_shape != feed[i + 2].has_shape) {
      changed = true;
    } else {
      for (size_t j = 0; j < m.dims.size(); ++j) changed = changed || !c.S.same(m.dims[j], feed[i + 2].dims[j]);
    }
    feed[i + 2] = m;
  }
  if (changed) {
    NXRT_ASSIGN_OR_RETURN(outs, c.infer_subgraph(*body->g, &feed));
  }
  auto m = c.const_scalar(0);
  bool has_cond = c.has(1);
  SymDim iters = m && !has_cond ? SymDim::c(*m) : SymDim::s(c.S.mint());
  for (size_t i = 0; i < c.nout(); ++i) {
    if (1 + i >= outs.size()) {
      c.set(i, ValueFacts{});
    } else if (i < ncarried) {
      c.set(i, merge_branches(c.S, feed[i + 2], strip_values(outs[1 + i])));
    } else {
      ValueFacts v = strip_values(outs[1 + i]);
      if (v.kind == Kind::kTensor && v.has_shape) {
        v.dims.insert(v.dims.begin(), iters);
      } else if (v.kind == Kind::kTensor) {
        v.has_shape = false;
      }
      c.set(i, v);
    }
  }
  return Status::Ok();
}

Status op_scan(NodeContext& c) {
  const ir::Attribute* body = c.attr("body");
  if (!body || !body->g || c.opset < 9) return Status::Ok();
  int64_t nscan = c.ai("num_scan_inputs", 0);
  int64_t nstate = static_cast<int64_t>(c.nin()) - nscan;
  if (nscan <= 0 || nstate < 0) return Status::Ok();
  std::vector<int64_t> in_axes = c.aints("scan_input_axes").value_or(std::vector<int64_t>(static_cast<size_t>(nscan), 0));
  std::vector<ValueFacts> feed;
  for (int64_t i = 0; i < nstate; ++i) feed.push_back(strip_values(c.input(static_cast<size_t>(i))));
  std::optional<SymDim> iters;
  for (int64_t i = 0; i < nscan; ++i) {
    ValueFacts x = strip_values(c.input(static_cast<size_t>(nstate + i)));
    if (x.has_shape) {
      int64_t a = static_cast<size_t>(i) < in_axes.size() ? in_axes[static_cast<size_t>(i)] : 0;
      if (!norm_axis(a, static_cast<int64_t>(x.dims.size()))) return c.error("scan input axis out of range for " + c.shape_str(x));
      SymDim n = x.dims[static_cast<size_t>(a)];
      if (iters) {
        SymDim r;
        NXRT_RETURN_IF_ERROR(c.unify(*iters, n, "scan inputs have different lengths", &r));
      } else {
        iters = n;
      }
      x.dims.erase(x.dims.begin() + a);
    }
    feed.push_back(x);
  }
  NXRT_ASSIGN_OR_RETURN(auto outs, c.infer_subgraph(*body->g, &feed));
  SymDim n = iters ? *iters : SymDim::s(c.S.mint());
  std::vector<int64_t> out_axes = c.aints("scan_output_axes").value_or(std::vector<int64_t>{});
  for (size_t i = 0; i < c.nout() && i < outs.size(); ++i) {
    if (static_cast<int64_t>(i) < nstate) {
      c.set(i, merge_branches(c.S, feed[i], strip_values(outs[i])));
      continue;
    }
    ValueFacts v = strip_values(outs[i]);
    size_t k = i - static_cast<size_t>(nstate);
    if (v.has_shape) {
      int64_t a = k < out_axes.size() ? out_axes[k] : 0;
      if (!norm_axis(a, static_cast<int64_t>(v.dims.size()) + 1)) return c.error("scan output axis out of range");
      v.dims.insert(v.dims.begin() + a, n);
    }
    c.set(i, v);
  }
  return Status::Ok();
}

}  // namespace

void add_control_flow_schemas(SchemaList& s) {
  s.add("If", &op_if);
  s.add("Loop", &op_loop);
  s.add("Scan", &op_scan);
  for (const char* op : {"SequenceConstruct", "SequenceEmpty", "SequenceAt", "SequenceLength", "SequenceInsert",
                         "SequenceErase", "SplitToSequence", "ConcatFromSequence", "Optional", "OptionalGetElement",
                         "OptionalHasElement"}) {
    s.add(op, &op_sequence);
  }
}

}  // namespace nxrt::shape
