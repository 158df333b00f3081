#include "session/exec_context.h"

#include "ir/allocation.h"

#include <utility>

namespace nxrt::session {

std::string describe_inputs(const Value* const* inputs, size_t n) {
  std::string s = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i) s += ", ";
    s += inputs[i] ? inputs[i]->describe() : "<none>";
  }
  return s + "]";
}

std::string node_prefix(const ir::Node& node, size_t index, int64_t opset) {
  std::string d = node.domain.empty() ? "ai.onnx" : node.domain;
  return "node '" + node.name + "' (#" + std::to_string(index) + ", " + d + "::" + node.op_type + ", opset " +
         std::to_string(opset) + ")";
}

Status step_error(const PlanStep& step, const Value* const* inputs, size_t n, const std::string& msg,
                  StatusCode code) {
  return Status(code, node_prefix(*step.node, step.node_index, step.info->opset()) + " inputs " +
                          describe_inputs(inputs, n) + ": " + msg);
}

void record_step(const RunHooks& hooks, const PlanStep& step, const Value* const* inputs, size_t n,
                 int variant_entry, double t0, double dur, PoolActivity pool, const char* capture,
                 const std::string* why) {
  const ir::Node& node = *step.node;
  if (hooks.profile) hooks.profile->add(node.domain.empty() ? node.op_type : node.domain + "::" + node.op_type, dur);
  if (hooks.tracer) {
    std::string args = "\"node_index\":" + std::to_string(step.node_index) + ",\"node\":\"" +
                       json_escape(node.name) + "\",\"domain\":\"" +
                       json_escape(node.domain.empty() ? "ai.onnx" : node.domain) +
                       "\",\"opset\":" + std::to_string(step.info->opset()) + ",\"inputs\":\"" +
                       json_escape(describe_inputs(inputs, n)) + "\",\"kernel_variant\":" +
                       std::to_string(variant_entry) + ",\"loops_split\":" + std::to_string(pool.loops_split) +
                       ",\"worker_wakes\":" + std::to_string(pool.worker_wakes);
    if (capture) args += ",\"capture\":\"" + std::string(capture) + "\"";
    if (why) args += ",\"why\":\"" + json_escape(*why) + "\"";
    hooks.tracer->span(node.op_type, "node", t0, dur, args);
  }
}

ExecContext::ExecContext(const PlanStep& step, Frame& frame, ep::ThreadPool& pool)
    : step_(step), frame_(frame), pool_(pool) {
  const size_t n = step.inputs.size();
  if (n > kInlineInputs) {
    heap_inputs_.resize(n, nullptr);
    inputs_ = heap_inputs_.data();
  } else {
    inputs_ = inline_inputs_;
    for (size_t i = 0; i < n; ++i) inline_inputs_[i] = nullptr;
  }
  num_inputs_ = n;
}

Status ExecContext::bind_inputs() {
  for (size_t i = 0; i < num_inputs_; ++i) {
    int s = step_.inputs[i];
    if (s < 0) continue;
    const Value& v = frame_.slots[static_cast<size_t>(s)];
    if (v.is_none()) continue;
    if (v.is_tensor() && !v.tensor().is_contiguous() && !step_.kernel->accepts_strided_input(i)) {
      NXRT_ASSIGN_OR_RETURN(Tensor c, pooled_copy(v.tensor()));
      if (num_inline_gathered_ < kInlineGathered) {
        Value& g = inline_gathered_[num_inline_gathered_++];
        g = Value(std::move(c));
        inputs_[i] = &g;
      } else {
        gathered_.push_back(std::make_unique<Value>(std::move(c)));
        inputs_[i] = gathered_.back().get();
      }
    } else {
      inputs_[i] = &v;
    }
  }
  return Status::Ok();
}

Result<Tensor*> ExecContext::allocate_output(size_t i, DataType dtype, const Dims& shape) {
  if (i >= step_.outputs.size()) {
    return error("kernel wrote output " + std::to_string(i) + " but the node has " +
                 std::to_string(step_.outputs.size()));
  }
  // Refuse sizes that overflow or that no machine can hold before asking the allocator.
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return error("output " + std::to_string(i) + " has a negative dimension " + shape_to_string(shape));
    if (d > 0 && n > kMaxElements / d) {
      return error("output " + std::to_string(i) + " shape " + shape_to_string(shape) + " is too large to allocate");
    }
    n *= d;
  }
  mark(i, Produced::kAllocated);
  Value* slot = out_slot(i);
  if (slot) {
    if (const Tensor* bound = bound_buffer(i)) return allocate_bound(i, dtype, shape, *bound, slot);
    if (Tensor* placed = try_concat_placement(i, dtype, shape, slot)) return placed;
    if (i == 0) {
      if (Tensor* reused = try_inplace(dtype, shape, slot)) return reused;
    }
  }
  NXRT_ASSIGN_OR_RETURN(Tensor t, new_tensor(dtype, shape));
  if (!slot) {  // output not used by the graph: still give the kernel somewhere to write
    scratch_.push_back({i, std::make_unique<Value>(std::move(t))});
    return &scratch_.back().second->tensor();
  }
  *slot = Value(std::move(t));
  return &slot->tensor();
}

Status ExecContext::set_output(size_t i, Value v) {
  if (i >= step_.outputs.size()) {
    return error("kernel set output " + std::to_string(i) + " but the node has " +
                 std::to_string(step_.outputs.size()));
  }
  mark(i, Produced::kSet);
  if (Value* slot = out_slot(i)) *slot = std::move(v);
  return Status::Ok();
}

Result<void*> ExecContext::workspace(size_t bytes) {
  if (!frame_.res) return ep::KernelContext::workspace(bytes);
  return workspaces_.hold(frame_.res->buffers.acquire(bytes));
}

Result<ep::SlotMemory> ExecContext::thread_slots(size_t bytes) {
  if (!frame_.res) return ep::KernelContext::thread_slots(bytes);
  return frame_.res->thread_slots.get(frame_.res->buffers, bytes, pool_.num_threads());
}

void ExecContext::set_variant(std::shared_ptr<const ep::KernelVariant> v) {
  variant_ = std::move(v);
  const size_t bytes = variant_ ? variant_->workspace_bytes() : 0;
  if (bytes > 0 && frame_.res) variant_ws_ = frame_.res->buffers.acquire(bytes);
}

const Value* ExecContext::pre_copy_value(size_t i) const {
  for (const auto& c : copied_) {
    if (c.output == i) return &c.before;
  }
  return nullptr;
}

const Value* ExecContext::scratch_output(size_t i) const {
  for (const auto& [k, v] : scratch_) {
    if (k == i) return v.get();
  }
  return nullptr;
}

Status ExecContext::finish_bound_outputs() {
  const bool observed = frame_.observer != nullptr;
  for (auto& p : pending_bound_) {
    Value* slot = out_slot(p.output);
    const Tensor* bound = bound_buffer(p.output);
    if (!slot || !bound || !slot->is_tensor()) continue;
    Tensor dst = p.view;
    NXRT_RETURN_IF_ERROR(copy_into(slot->tensor(), dst));
    if (observed) copied_.push_back({p.output, *slot});
    *slot = Value(std::move(dst));
  }
  // Values a kernel set directly (views, identity) on a bound output also end up in its buffer.
  if (!frame_.bound.empty()) {
    for (size_t i = 0; i < step_.outputs.size(); ++i) {
      const Tensor* bound = bound_buffer(i);
      Value* slot = out_slot(i);
      if (!bound || !slot || !slot->is_tensor()) continue;
      const Tensor& t = slot->tensor();
      if (t.storage() == bound->storage()) continue;
      NXRT_ASSIGN_OR_RETURN(Tensor dst, bound_view(i, t.dtype(), t.shape(), *bound));
      NXRT_RETURN_IF_ERROR(copy_into(t, dst));
      if (observed) copied_.push_back({i, *slot});
      *slot = Value(std::move(dst));
    }
  }
  return Status::Ok();
}

// A fresh contiguous tensor: from the session's buffer pool when there is one (errors name the node).
Result<Tensor> ExecContext::new_tensor(DataType dtype, const Dims& shape) {
  Result<Tensor> t = session::pooled_tensor(frame_.res ? &frame_.res->buffers : nullptr, dtype, shape);
  if (!t.ok()) return error(t.status().message());
  return t;
}

Result<Tensor> ExecContext::pooled_copy(const Tensor& src) {
  Result<Tensor> t = session::pooled_copy(frame_.res ? &frame_.res->buffers : nullptr, src);
  if (!t.ok()) return error(t.status().message());
  return t;
}

// Copies `src` (any strides) into `dst` (same dtype and shape, any strides).
Status ExecContext::copy_into(const Tensor& src, Tensor& dst) {
  Status s = copy_tensor_into(src, dst);
  if (!s.ok()) return error(s.message());
  return Status::Ok();
}

const Tensor* ExecContext::bound_buffer(size_t i) const {
  int s = step_.outputs[i];
  if (s < 0 || frame_.bound.empty()) return nullptr;
  return frame_.bound[static_cast<size_t>(s)];
}

// The part of a bound buffer that holds an output of `shape`: the whole buffer when the shapes
// match, else the leading part along the one axis where the buffer is larger (its capacity).
Result<Tensor> ExecContext::bound_view(size_t i, DataType dtype, const Dims& shape, const Tensor& bound) {
  const std::string& name = step_.node->outputs[i];
  if (bound.dtype() != dtype) {
    return error("output '" + name + "' is bound to " + bound.describe() + " but the kernel produces " +
                 dtype_name(dtype) + shape_to_string(shape));
  }
  if (bound.shape() == shape) return bound;
  bool ok = bound.rank() == static_cast<int64_t>(shape.size());
  int grow_axes = 0;
  for (size_t a = 0; ok && a < shape.size(); ++a) {
    if (shape[a] > bound.shape()[a]) ok = false;
    if (shape[a] < bound.shape()[a]) ++grow_axes;
  }
  if (!ok || grow_axes > 1) {
    return error("output '" + name + "' is bound to " + bound.describe() + ", which cannot hold " +
                 dtype_name(dtype) + shape_to_string(shape) +
                 " (a bound buffer may exceed the output on one axis only)");
  }
  return Tensor(dtype, shape, bound.storage(), bound.byte_offset(), bound.effective_strides());
}

Result<Tensor*> ExecContext::allocate_bound(size_t i, DataType dtype, const Dims& shape, const Tensor& bound,
                                            Value* slot) {
  NXRT_ASSIGN_OR_RETURN(Tensor view, bound_view(i, dtype, shape, bound));
  if (view.is_contiguous() || step_.kernel->accepts_strided_output(i)) {
    *slot = Value(std::move(view));
    return &slot->tensor();
  }
  // The kernel writes contiguous memory: give it a temporary, copied into the view afterwards.
  NXRT_ASSIGN_OR_RETURN(Tensor t, new_tensor(dtype, shape));
  pending_bound_.push_back({i, std::move(view)});
  *slot = Value(std::move(t));
  return &slot->tensor();
}

// ConcatGroup: output i of a producer goes straight into its range of the Concat's output (allocated
// into the Concat's slot by the first producer); the Concat's own output 0 is that buffer. nullptr
// when this output is not placed or the run's dtype/shape differ from the plan's.
Tensor* ExecContext::try_concat_placement(size_t i, DataType dtype, const Dims& shape, Value* slot) {
  const GraphPlan& plan = *frame_.plan;
  int g = -1, input = -1;
  if (i < step_.placed.size()) g = step_.placed[i].group, input = step_.placed[i].input;
  if (g < 0 && i == 0 && step_.concat_group >= 0) g = step_.concat_group;
  if (g < 0 || !frame_.res) return nullptr;
  const ConcatGroup& cg = plan.concat_groups()[static_cast<size_t>(g)];
  if (dtype != cg.dtype || shape != (input >= 0 ? cg.in_shapes[static_cast<size_t>(input)] : cg.out_shape)) {
    return nullptr;
  }
  // The Concat reuses the buffer its inputs are in (none made: it allocates its own).
  if (input < 0) return group_buffer(g, /*make=*/false);
  const Tensor* buf = group_buffer(g, /*make=*/true);
  if (!buf) return nullptr;
  *slot = Value(Tensor(dtype, shape, buf->storage(), buf->byte_offset() + cg.byte_offsets[static_cast<size_t>(input)]));
  return &slot->tensor();
}

// Group g's output buffer in its Concat's slot, with `make` made on first use: its range of the parent
// group's buffer when it has one (made first), else a pool buffer. nullptr when the slot holds a tensor
// of another dtype or shape (a run whose shapes differ from the plan's: plain copies), or holds nothing
// and `make` is false.
Tensor* ExecContext::group_buffer(int g, bool make) {
  const ConcatGroup& cg = frame_.plan->concat_groups()[static_cast<size_t>(g)];
  Value& out = frame_.slots[static_cast<size_t>(cg.out_slot)];
  if (out.is_tensor()) {
    Tensor& t = out.tensor();
    return t.dtype() == cg.dtype && t.shape() == cg.out_shape ? &t : nullptr;
  }
  if (!make) return nullptr;
  if (cg.parent >= 0) {
    const Tensor* p = group_buffer(cg.parent, true);
    if (p) {
      const ConcatGroup& pg = frame_.plan->concat_groups()[static_cast<size_t>(cg.parent)];
      out = Value(Tensor(cg.dtype, cg.out_shape, p->storage(),
                         p->byte_offset() + pg.byte_offsets[static_cast<size_t>(cg.parent_input)]));
      return &out.tensor();
    }
  }
  const size_t bytes = dtype_storage_bytes(cg.dtype, shape_numel(cg.out_shape));
  out = Value(Tensor(cg.dtype, cg.out_shape, frame_.res->buffers.acquire(bytes)));
  return &out.tensor();
}

// Output 0 written over a dying input: same dtype and shape, contiguous, owned memory that nothing
// else references (not a feed, initializer, view or graph output), and released after this step.
Tensor* ExecContext::try_inplace(DataType dtype, const Dims& shape, Value* slot) {
  int k = step_.inplace_input;
  if (k < 0 || static_cast<size_t>(k) >= num_inputs_ || step_.inputs[k] < 0) return nullptr;
  const Value* in = inputs_[k];
  if (!in || in != &frame_.slots[static_cast<size_t>(step_.inputs[k])] || !in->is_tensor()) return nullptr;
  const Tensor& t = in->tensor();
  if (t.dtype() != dtype || t.shape() != shape || !t.is_contiguous() || t.byte_offset() != 0) return nullptr;
  const auto& st = t.storage();
  if (!st || !st->owned() || st.use_count() != (st->pooled() ? 2 : 1)) return nullptr;
  bool dies = false;
  for (int r : step_.release_after) dies |= r == step_.inputs[k];
  if (!dies) return nullptr;
  *slot = *in;
  return &slot->tensor();
}

}  // namespace nxrt::session
