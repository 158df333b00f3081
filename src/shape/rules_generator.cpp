// Shape rules and op schemas: Constant, ConstantOfShape, Range, EyeLike, the random generators and the
// losses.
#include <algorithm>

#include "shape/node_context.h"
#include "shape/symbolic.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

// Constant / ConstantOfShape helpers
Status op_constant(NodeContext& c) {
  for (const auto& a : c.n->attributes) {
    if (a.name == "value" && a.type == ir::Attribute::Type::kTensor) {
      c.set(0, from_tensor(a.t));
      return Status::Ok();
    }
    if ((a.name == "value" || a.name == "sparse_value") && a.t.defined()) {
      c.set(0, from_tensor(a.t));
      return Status::Ok();
    }
    if (a.name == "value_float") {
      c.set(0, tensor(DataType::kFloat, {}));
      return Status::Ok();
    }
    if (a.name == "value_floats") {
      c.set(0, tensor(DataType::kFloat, {SymDim::c(static_cast<int64_t>(a.floats.size()))}));
      return Status::Ok();
    }
    if (a.name == "value_int" || a.name == "value_ints") {
      ValueFacts v = tensor(DataType::kInt64, {});
      std::vector<int64_t> vals = a.name == "value_int" ? std::vector<int64_t>{a.i} : a.ints;
      if (a.name == "value_ints") v.dims = {SymDim::c(static_cast<int64_t>(vals.size()))};
      if (vals.size() <= kMaxValues) {
        v.has_values = true;
        for (int64_t x : vals) v.values.push_back(SymDim::c(x));
      }
      c.set(0, std::move(v));
      return Status::Ok();
    }
    if (a.name == "value_string") {
      c.set(0, tensor(DataType::kString, {}));
      return Status::Ok();
    }
    if (a.name == "value_strings") {
      c.set(0, tensor(DataType::kString, {SymDim::c(static_cast<int64_t>(a.strings.size()))}));
      return Status::Ok();
    }
  }
  c.set(0, ValueFacts{});
  return Status::Ok();
}

Status op_constant_of_shape(NodeContext& c) {
  DataType dt = DataType::kFloat;
  const ir::Attribute* a = c.attr("value");
  std::optional<int64_t> fill;
  if (a && a->t.defined()) {
    dt = a->t.dtype();
    if (a->t.numel() == 1) fill = tensor_int_at(a->t, 0);
  }
  auto dims = shape_from_input(c, 0);
  if (!dims) {
    c.set(0, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  ValueFacts v = tensor(dt, *dims);
  if (fill && dims->size() <= 1 && v.is_static()) {
    int64_t n = dims->empty() ? 1 : (*dims)[0].value;
    if (n >= 0 && n <= static_cast<int64_t>(kMaxValues)) {
      v.has_values = true;
      v.values.assign(static_cast<size_t>(n), SymDim::c(*fill));
    }
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_range(NodeContext& c) {
  DataType dt = c.input(0).dtype;
  auto s = c.sym_scalar(0), l = c.sym_scalar(1), d = c.sym_scalar(2);
  SymDim n;
  if (s && l && d && s->is_const() && l->is_const() && d->is_const() && d->value != 0) {
    n = SymDim::c(std::max<int64_t>(0, ceildiv_i(sub_i(l->value, s->value), d->value)));
  } else if (s && l && d && d->is_const() && d->value == 1) {
    n = sub(c.S, *l, *s);
  } else if (s && l && d) {
    n = fn(c.S, "range", {*s, *l, *d});
  } else {
    n = SymDim::s(c.S.mint());
  }
  ValueFacts v = tensor(dt, {n});
  if (n.is_const() && n.value <= static_cast<int64_t>(kMaxValues) && is_int_dtype(dt)) {
    v.has_values = true;
    for (int64_t i = 0; i < n.value; ++i) v.values.push_back(SymDim::c(add_i(s->value, mul_i(i, d->value))));
  }
  c.set(0, std::move(v));
  return Status::Ok();
}

Status op_random(NodeContext& c) {
  DataType dt = static_cast<DataType>(c.ai("dtype", 1));
  if (auto s = c.aints("shape")) {
    std::vector<SymDim> d;
    for (int64_t v : *s) d.push_back(SymDim::c(v));
    c.set(0, tensor(dt, d));
  } else {
    c.set(0, tensor_unknown_rank(dt));
  }
  return Status::Ok();
}

// EyeLike, RandomNormalLike, RandomUniformLike: the input's shape, its dtype unless `dtype` says another,
// no known values.
Status op_like_input(NodeContext& c) {
  ValueFacts v = tensor_like(c.input(0));
  if (c.attr("dtype")) v.dtype = static_cast<DataType>(c.ai("dtype", 1));
  c.set(0, v);
  return Status::Ok();
}

// SoftmaxCrossEntropyLoss / NegativeLogLikelihoodLoss: loss is the labels' shape with reduction
// "none", else a scalar; log_prob is like the scores.
Status op_loss(NodeContext& c) {
  const ValueFacts& scores = c.input(0);
  DataType dt = scores.dtype;
  std::string red = c.as("reduction", "mean");
  if (red == "none") {
    ValueFacts l = tensor_like(c.input(1));
    l.dtype = dt;
    c.set(0, l);
  } else {
    c.set(0, tensor(dt, {}));
  }
  if (c.nout() > 1) {
    c.set(1, tensor_like(scores));
  }
  return Status::Ok();
}

}  // namespace

void add_generator_schemas(SchemaList& s) {
  s.add("Constant", &op_constant);
  s.add("ConstantOfShape", &op_constant_of_shape);
  s.add("Range", &op_range);
  s.add("EyeLike", &op_like_input).rank(kSameAsInput0);
  // Random generators: a new value every run, so constant folding must not evaluate them.
  s.add("RandomNormal", &op_random).nondeterministic();
  s.add("RandomUniform", &op_random).nondeterministic();
  s.add("RandomNormalLike", &op_like_input).nondeterministic().rank(kSameAsInput0);
  s.add("RandomUniformLike", &op_like_input).nondeterministic().rank(kSameAsInput0);
  s.add("Multinomial", nullptr).nondeterministic();
  s.add("Bernoulli", nullptr).nondeterministic();
  s.add("SoftmaxCrossEntropyLoss", &op_loss);
  s.add("NegativeLogLikelihoodLoss", &op_loss);
}

}  // namespace nxrt::shape
