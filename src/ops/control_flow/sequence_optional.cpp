// Sequences (Sequence*, SplitToSequence, ConcatFromSequence, SequenceMap) and optionals.
#include "ops/common.h"
#include "ops/control_flow/control_flow_util.h"

namespace nxrt::ops {

namespace {

Result<const Value*> sequence_input(const ep::KernelContext& ctx, size_t i) {
  const Value* v = ctx.input_value(i);
  if (!v || !v->is_sequence()) {
    return ctx.error("input " + std::to_string(i) + " must be a sequence, got " + (v ? v->describe() : "nothing"),
                     StatusCode::kInvalidArgument);
  }
  return v;
}

// Reads an optional position input; `allow_end` permits position == size (insertion).
Result<int64_t> position_input(const ep::KernelContext& ctx, size_t i, int64_t size, int64_t dflt, bool allow_end) {
  if (!ctx.has_input(i)) return dflt;
  const Tensor& t = ctx.input(i);
  if (t.numel() != 1) return ctx.error("position must be a scalar, got " + t.describe());
  NXRT_ASSIGN_OR_RETURN(auto v, read_int_values(t));
  int64_t p = v[0];
  int64_t hi = allow_end ? size : size - 1;
  if (p < -size || p > hi) {
    return ctx.error("position " + std::to_string(p) + " is out of range for a sequence of length " +
                     std::to_string(size), StatusCode::kInvalidArgument);
  }
  return p < 0 ? p + size : p;
}

DataType elem_type_of(const Value& seq) {
  if (seq.sequence_elem_type() != DataType::kUndefined) return seq.sequence_elem_type();
  return seq.items().empty() ? DataType::kUndefined : seq.items()[0].tensor().dtype();
}

Status sequence_empty(ep::KernelContext& ctx) {
  auto dt = static_cast<DataType>(ctx.info().attr_int("dtype", static_cast<int64_t>(DataType::kFloat)));
  return ctx.set_output(0, Value::sequence({}, dt));
}

Status sequence_construct(ep::KernelContext& ctx) {
  std::vector<Value> items;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i) || !ctx.input_value(i)->is_tensor()) return ctx.error("inputs must be tensors");
    if (i > 0 && ctx.input(i).dtype() != ctx.input(0).dtype()) return ctx.error("inputs must share one dtype");
    items.push_back(*ctx.input_value(i));
  }
  DataType dt = items.empty() ? DataType::kUndefined : items[0].tensor().dtype();
  return ctx.set_output(0, Value::sequence(std::move(items), dt));
}

Status sequence_insert(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
  if (!ctx.has_input(1) || !ctx.input_value(1)->is_tensor()) return ctx.error("tensor input missing");
  const Tensor& t = ctx.input(1);
  DataType et = elem_type_of(*seq);
  if (et != DataType::kUndefined && et != t.dtype()) {
    return ctx.error(std::string("cannot insert ") + t.describe() + " into a sequence of " + dtype_name(et));
  }
  int64_t n = static_cast<int64_t>(seq->items().size());
  NXRT_ASSIGN_OR_RETURN(int64_t pos, position_input(ctx, 2, n, n, true));
  std::vector<Value> items = seq->items();
  items.insert(items.begin() + pos, Value(t));
  return ctx.set_output(0, Value::sequence(std::move(items), t.dtype()));
}

Status sequence_erase(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
  int64_t n = static_cast<int64_t>(seq->items().size());
  if (n == 0) return ctx.error("cannot erase from an empty sequence", StatusCode::kInvalidArgument);
  NXRT_ASSIGN_OR_RETURN(int64_t pos, position_input(ctx, 1, n, n - 1, false));
  std::vector<Value> items = seq->items();
  items.erase(items.begin() + pos);
  return ctx.set_output(0, Value::sequence(std::move(items), elem_type_of(*seq)));
}

Status sequence_at(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
  int64_t n = static_cast<int64_t>(seq->items().size());
  if (!ctx.has_input(1)) return ctx.error("position input missing");
  NXRT_ASSIGN_OR_RETURN(int64_t pos, position_input(ctx, 1, n, 0, false));
  return ctx.set_output(0, seq->items()[static_cast<size_t>(pos)]);
}

Status sequence_length(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
  return ctx.set_output(0, Value(Tensor::scalar_int64(static_cast<int64_t>(seq->items().size()))));
}

Status split_to_sequence(ep::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  int64_t axis = ctx.info().attr_int("axis", 0);
  if (!normalize_axis(&axis, x.rank())) return ctx.error("axis out of range");
  bool keepdims = ctx.info().attr_int("keepdims", 1) != 0;
  int64_t len = x.shape()[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.has_input(1)) {
    sizes.assign(static_cast<size_t>(len), 1);
    squeeze = !keepdims;
  } else {
    const Tensor& s = ctx.input(1);
    NXRT_ASSIGN_OR_RETURN(auto sv, read_int_values(s));
    if (s.rank() == 0) {
      int64_t chunk = sv[0];
      if (chunk <= 0) return ctx.error("split must be positive");
      for (int64_t done = 0; done < len; done += chunk) sizes.push_back(std::min(chunk, len - done));
    } else {
      int64_t total = 0;
      for (int64_t v : sv) {
        if (v < 0) return ctx.error("split sizes must be non-negative");
        total += v;
      }
      if (total != len) return ctx.error("split sizes sum to " + std::to_string(total) + ", axis has " + std::to_string(len));
      sizes = sv;
    }
  }
  std::vector<Value> items;
  int64_t start = 0;
  for (int64_t sz : sizes) {
    Tensor part = take_range(x, axis, start, start + sz);
    if (squeeze) {
      Dims sh = part.shape();
      sh.erase(sh.begin() + axis);
      part = part.reshaped(sh);
    }
    items.push_back(Value(std::move(part)));
    start += sz;
  }
  return ctx.set_output(0, Value::sequence(std::move(items), x.dtype()));
}

Status concat_from_sequence(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
  if (seq->items().empty()) return ctx.error("cannot concatenate an empty sequence");
  bool new_axis = ctx.info().attr_int("new_axis", 0) != 0;
  if (!ctx.info().has_attr("axis")) return ctx.error("axis attribute is required");
  int64_t axis = ctx.info().attr_int("axis", 0);
  std::vector<Tensor> parts;
  for (const auto& v : seq->items()) parts.push_back(v.tensor());
  int64_t rank = parts[0].rank() + (new_axis ? 1 : 0);
  if (!normalize_axis(&axis, rank)) return ctx.error("axis out of range");
  auto r = new_axis ? stack_tensors(parts, axis) : concat_tensors(parts, axis);
  if (!r.ok()) return ctx.error(r.status().message());
  return ctx.set_output(0, Value(std::move(r).value()));
}

Status sequence_map(ep::KernelContext& ctx) {
  ep::SubgraphRunner* body = ctx.info().subgraph("body");
  if (!body) return ctx.error("SequenceMap has no body");
  NXRT_ASSIGN_OR_RETURN(const Value* seq, sequence_input(ctx, 0));
  size_t n = seq->items().size();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) {
    const Value* v = ctx.input_value(i);
    if (v && v->is_sequence() && v->items().size() != n) return ctx.error("input sequences differ in length");
  }
  std::vector<std::vector<Value>> outs(body->num_outputs());
  for (size_t k = 0; k < n; ++k) {
    std::vector<Value> in;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      const Value* v = ctx.input_value(i);
      in.push_back(v->is_sequence() ? v->items()[k] : *v);
    }
    NXRT_ASSIGN_OR_RETURN(auto r, body->run(ctx, std::move(in)));
    for (size_t o = 0; o < r.size() && o < outs.size(); ++o) outs[o].push_back(std::move(r[o]));
  }
  for (size_t o = 0; o < outs.size() && o < ctx.num_outputs(); ++o) {
    DataType dt = outs[o].empty() ? body->graph().outputs[o].type.elem_type : outs[o][0].tensor().dtype();
    NXRT_RETURN_IF_ERROR(ctx.set_output(o, Value::sequence(std::move(outs[o]), dt)));
  }
  return Status::Ok();
}

Status optional_make(ep::KernelContext& ctx) {
  if (ctx.has_input(0)) return ctx.set_output(0, Value::optional_of(*ctx.input_value(0)));
  return ctx.set_output(0, Value::optional_empty());
}

Status optional_has_element(ep::KernelContext& ctx) {
  Tensor t(DataType::kBool, {});
  const Value* v = ctx.input_value(0);
  bool has = v && (!v->is_optional() || v->has_element());
  *t.data<uint8_t>() = has ? 1 : 0;
  return ctx.set_output(0, Value(std::move(t)));
}

Status optional_get_element(ep::KernelContext& ctx) {
  const Value* v = ctx.input_value(0);
  if (!v) return ctx.error("input missing");
  if (!v->is_optional()) return ctx.set_output(0, *v);  // opset 18: tensors and sequences pass through
  if (!v->has_element()) return ctx.error("the optional is empty", StatusCode::kInvalidArgument);
  return ctx.set_output(0, v->element());
}

}  // namespace

void register_sequence_ops(ep::KernelRegistry& r) {
  r.add_fn("SequenceEmpty", &sequence_empty);
  r.add_fn("SequenceConstruct", &sequence_construct);
  r.add_fn("SequenceInsert", &sequence_insert);
  r.add_fn("SequenceErase", &sequence_erase);
  r.add_fn("SequenceAt", &sequence_at);
  r.add_fn("SequenceLength", &sequence_length);
  r.add_fn("SplitToSequence", &split_to_sequence);
  r.add_fn("ConcatFromSequence", &concat_from_sequence);
  r.add_fn("SequenceMap", &sequence_map);
  r.add_fn("Optional", &optional_make);
  r.add_fn("OptionalHasElement", &optional_has_element);
  r.add_fn("OptionalGetElement", &optional_get_element);
}

}  // namespace nxrt::ops
