// If, Loop, Scan: kernels that run subgraphs through the executor's SubgraphRunner (the body's plan
// and kernels are built once, at session creation, and reused for every iteration).
#include "ops/common.h"
#include "ops/control_flow/control_flow_util.h"

namespace nxrt::ops {

namespace {

Result<bool> read_bool_scalar(const ep::KernelContext& ctx, const Value* v, const char* what) {
  if (!v->is_tensor() || v->tensor().numel() != 1) {
    return ctx.error(std::string(what) + " must be a single-element tensor, got " + v->describe());
  }
  const Tensor& t = v->tensor();
  switch (t.dtype()) {
    case DataType::kBool:
    case DataType::kUInt8:
    case DataType::kInt8: return *static_cast<const uint8_t*>(t.raw_data()) != 0;
    case DataType::kInt32: return *t.data<int32_t>() != 0;
    case DataType::kInt64: return *t.data<int64_t>() != 0;
    case DataType::kFloat: return *t.data<float>() != 0.f;
    default: return ctx.error(std::string(what) + " has unsupported dtype " + dtype_name(t.dtype()));
  }
}

Tensor bool_scalar(bool b) {
  Tensor t(DataType::kBool, {});
  *t.data<uint8_t>() = b ? 1 : 0;
  return t;
}

// An empty scan output for a loop that ran zero times: dtype and trailing dims from the body's
// declared output type where it gives them.
Tensor empty_scan_output(const ir::ValueInfo& declared) {
  DataType dt = declared.type.elem_type == DataType::kUndefined ? DataType::kFloat : declared.type.elem_type;
  Dims shape{0};
  if (declared.type.has_shape) {
    for (const auto& d : declared.type.dims) shape.push_back(d.is_fixed() ? d.value : 0);
  }
  return Tensor(dt, shape);
}

Status if_compute(ep::KernelContext& ctx) {
  if (!ctx.has_input(0)) return ctx.error("If needs a condition input");
  NXRT_ASSIGN_OR_RETURN(bool cond, read_bool_scalar(ctx, ctx.input_value(0), "condition"));
  ep::SubgraphRunner* branch = ctx.info().subgraph(cond ? "then_branch" : "else_branch");
  if (!branch) return ctx.error(std::string("missing ") + (cond ? "then_branch" : "else_branch") + " attribute");
  NXRT_ASSIGN_OR_RETURN(auto outs, branch->run(ctx, {}));
  if (outs.size() < ctx.num_outputs()) {
    return ctx.error("branch produced " + std::to_string(outs.size()) + " outputs, the node has " +
                     std::to_string(ctx.num_outputs()));
  }
  for (size_t i = 0; i < ctx.num_outputs(); ++i) NXRT_RETURN_IF_ERROR(ctx.set_output(i, std::move(outs[i])));
  return Status::Ok();
}

Status loop_compute(ep::KernelContext& ctx) {
  ep::SubgraphRunner* body = ctx.info().subgraph("body");
  if (!body) return ctx.error("Loop has no body attribute");
  const size_t n_carried = ctx.num_inputs() >= 2 ? ctx.num_inputs() - 2 : 0;
  if (body->num_inputs() != n_carried + 2) {
    return ctx.error("body takes " + std::to_string(body->num_inputs()) + " inputs, expected " +
                     std::to_string(n_carried + 2) + " (iteration, condition, " + std::to_string(n_carried) +
                     " loop-carried)");
  }
  if (body->num_outputs() < n_carried + 1) return ctx.error("body has too few outputs");
  const size_t n_scan = body->num_outputs() - 1 - n_carried;

  int64_t max_trip = INT64_MAX;
  if (ctx.has_input(0)) {
    const Tensor& m = ctx.input(0);
    if (m.numel() != 1) return ctx.error("trip count M must be a scalar, got " + m.describe());
    NXRT_ASSIGN_OR_RETURN(auto mv, read_int_values(m));
    max_trip = mv[0];
  }
  bool cond = true;
  if (ctx.has_input(1)) {
    NXRT_ASSIGN_OR_RETURN(cond, read_bool_scalar(ctx, ctx.input_value(1), "condition"));
  }
  std::vector<Value> carried;
  for (size_t i = 0; i < n_carried; ++i) {
    const Value* v = ctx.input_value(2 + i);
    carried.push_back(v ? *v : Value::optional_empty());
  }
  std::vector<std::vector<Tensor>> scans(n_scan);
  // The body's inputs and outputs live in vectors reused by every iteration, and the iteration
  // number and condition scalars are rewritten in place while nothing else holds them: a long loop
  // over a small body allocates nothing per iteration beyond what its nodes produce.
  std::vector<Value> in(n_carried + 2);
  std::vector<Value> outs;
  Tensor iter_t = Tensor::scalar_int64(0);
  Tensor cond_t = bool_scalar(cond);
  int64_t it = 0;
  for (; it < max_trip && cond; ++it) {
    if (iter_t.storage().use_count() != 1) iter_t = Tensor::scalar_int64(0);
    if (cond_t.storage().use_count() != 1) cond_t = bool_scalar(cond);
    *iter_t.data<int64_t>() = it;
    *cond_t.data<uint8_t>() = cond ? 1 : 0;
    in.resize(n_carried + 2);
    in[0] = Value(iter_t);
    in[1] = Value(cond_t);
    for (size_t i = 0; i < n_carried; ++i) in[2 + i] = std::move(carried[i]);
    NXRT_RETURN_IF_ERROR(body->run_into(ctx, in, outs));
    NXRT_ASSIGN_OR_RETURN(cond, read_bool_scalar(ctx, &outs[0], "body condition output"));
    for (size_t i = 0; i < n_carried; ++i) carried[i] = std::move(outs[1 + i]);
    for (size_t k = 0; k < n_scan; ++k) {
      Value& v = outs[1 + n_carried + k];
      if (!v.is_tensor()) return ctx.error("scan output " + std::to_string(k) + " is not a tensor: " + v.describe());
      scans[k].push_back(v.tensor());
    }
    for (auto& v : outs) v = Value();
  }
  for (size_t i = 0; i < n_carried && i < ctx.num_outputs(); ++i) {
    NXRT_RETURN_IF_ERROR(ctx.set_output(i, std::move(carried[i])));
  }
  for (size_t k = 0; k < n_scan && n_carried + k < ctx.num_outputs(); ++k) {
    if (!ctx.output_requested(n_carried + k)) continue;
    Tensor out;
    if (scans[k].empty()) {
      out = empty_scan_output(body->graph().outputs[1 + n_carried + k]);
    } else {
      auto st = stack_tensors(scans[k], 0);
      if (!st.ok()) return ctx.error("scan output " + std::to_string(k) + ": " + st.status().message());
      out = std::move(st).value();
    }
    NXRT_RETURN_IF_ERROR(ctx.set_output(n_carried + k, Value(std::move(out))));
  }
  return Status::Ok();
}

// Scan, opset 9 and later (no batch axis).
class ScanKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    opset_ = info.opset();
    num_scan_inputs_ = info.attr_int("num_scan_inputs", -1);
    if (num_scan_inputs_ < 1) return info.error("Scan needs num_scan_inputs >= 1");
    input_axes_ = info.attr_ints("scan_input_axes");
    input_dirs_ = info.attr_ints(opset_ < 9 ? "directions" : "scan_input_directions");
    output_axes_ = info.attr_ints("scan_output_axes");
    output_dirs_ = info.attr_ints("scan_output_directions");
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    ep::SubgraphRunner* body = ctx.info().subgraph("body");
    if (!body) return ctx.error("Scan has no body attribute");
    if (opset_ < 9) return compute_v8(ctx, body);
    const size_t m = static_cast<size_t>(num_scan_inputs_);
    if (ctx.num_inputs() < m) return ctx.error("fewer inputs than num_scan_inputs");
    const size_t n = ctx.num_inputs() - m;
    std::vector<Value> states;
    for (size_t i = 0; i < n; ++i) states.push_back(*ctx.input_value(i));
    std::vector<Tensor> scan_in;
    std::vector<int64_t> axes(m, 0);
    int64_t seq_len = -1;
    for (size_t j = 0; j < m; ++j) {
      const Tensor& t = ctx.input(n + j);
      int64_t ax = j < input_axes_.size() ? input_axes_[j] : 0;
      if (!normalize_axis(&ax, t.rank())) return ctx.error("scan_input_axes out of range for " + t.describe());
      axes[j] = ax;
      if (seq_len < 0) seq_len = t.shape()[ax];
      if (t.shape()[ax] != seq_len) return ctx.error("scan inputs differ in sequence length");
      scan_in.push_back(t);
    }
    NXRT_ASSIGN_OR_RETURN(auto scan_out, run_sequence(ctx, body, states, scan_in, axes, seq_len,
                                                      [&](size_t j) { return j < input_dirs_.size() && input_dirs_[j] == 1; }));
    for (size_t i = 0; i < n; ++i) NXRT_RETURN_IF_ERROR(ctx.set_output(i, std::move(states[i])));
    const size_t k_out = body->num_outputs() - n;
    for (size_t k = 0; k < k_out && n + k < ctx.num_outputs(); ++k) {
      bool reverse = k < output_dirs_.size() && output_dirs_[k] == 1;
      auto& parts = scan_out[k];
      if (reverse) std::reverse(parts.begin(), parts.end());
      Tensor out;
      if (parts.empty()) {
        out = empty_scan_output(body->graph().outputs[n + k]);
      } else {
        int64_t ax = k < output_axes_.size() ? output_axes_[k] : 0;
        if (!normalize_axis(&ax, parts[0].rank() + 1)) return ctx.error("scan_output_axes out of range");
        auto st = stack_tensors(parts, ax);
        if (!st.ok()) return ctx.error(st.status().message());
        out = std::move(st).value();
      }
      NXRT_RETURN_IF_ERROR(ctx.set_output(n + k, Value(std::move(out))));
    }
    return Status::Ok();
  }

 private:
  template <typename Reverse>
  Result<std::vector<std::vector<Tensor>>> run_sequence(ep::KernelContext& ctx, ep::SubgraphRunner* body,
                                                        std::vector<Value>& states, const std::vector<Tensor>& scan_in,
                                                        const std::vector<int64_t>& axes, int64_t seq_len,
                                                        Reverse reversed) const {
    const size_t n = states.size();
    if (body->num_inputs() != n + scan_in.size()) {
      return ctx.error("body takes " + std::to_string(body->num_inputs()) + " inputs, Scan provides " +
                       std::to_string(n + scan_in.size()));
    }
    if (body->num_outputs() < n) return ctx.error("body has fewer outputs than states");
    std::vector<std::vector<Tensor>> scan_out(body->num_outputs() - n);
    for (int64_t t = 0; t < seq_len; ++t) {
      std::vector<Value> in(states.begin(), states.end());
      for (size_t j = 0; j < scan_in.size(); ++j) {
        int64_t idx = reversed(j) ? seq_len - 1 - t : t;
        in.push_back(Value(take_slice(scan_in[j], axes[j], idx)));
      }
      NXRT_ASSIGN_OR_RETURN(auto outs, body->run(ctx, std::move(in)));
      for (size_t i = 0; i < n; ++i) states[i] = std::move(outs[i]);
      for (size_t k = 0; k < scan_out.size(); ++k) {
        if (!outs[n + k].is_tensor()) return ctx.error("scan output is not a tensor");
        scan_out[k].push_back(outs[n + k].tensor());
      }
    }
    return scan_out;
  }

  // Scan-8: input 0 is optional sequence_lens; states and scan inputs carry a leading batch axis.
  Status compute_v8(ep::KernelContext& ctx, ep::SubgraphRunner* body) const {
    const size_t m = static_cast<size_t>(num_scan_inputs_);
    if (ctx.num_inputs() < m + 1) return ctx.error("fewer inputs than num_scan_inputs + 1");
    const size_t n = ctx.num_inputs() - 1 - m;
    int64_t batch = -1, max_len = -1;
    for (size_t j = 0; j < m; ++j) {
      const Tensor& t = ctx.input(1 + n + j);
      if (t.rank() < 2) return ctx.error("Scan-8 scan inputs need [batch, seq, ...], got " + t.describe());
      if (batch < 0) batch = t.shape()[0], max_len = t.shape()[1];
    }
    std::vector<int64_t> lens(static_cast<size_t>(batch), max_len);
    if (ctx.has_input(0)) {
      NXRT_ASSIGN_OR_RETURN(lens, read_int_values(ctx.input(0)));
      if (static_cast<int64_t>(lens.size()) != batch) return ctx.error("sequence_lens must have batch entries");
    }
    std::vector<std::vector<Tensor>> final_states(n), outputs(body->num_outputs() - n);
    for (int64_t b = 0; b < batch; ++b) {
      std::vector<Value> states;
      for (size_t i = 0; i < n; ++i) states.push_back(Value(take_slice(ctx.input(1 + i), 0, b)));
      std::vector<Tensor> scan_in;
      for (size_t j = 0; j < m; ++j) {
        Tensor s = take_slice(ctx.input(1 + n + j), 0, b);
        scan_in.push_back(take_range(s, 0, 0, std::min(lens[b], s.shape()[0])));
      }
      std::vector<int64_t> axes(m, 0);
      NXRT_ASSIGN_OR_RETURN(auto scan_out, run_sequence(ctx, body, states, scan_in, axes, std::min(lens[b], max_len),
                                                        [&](size_t j) { return j < input_dirs_.size() && input_dirs_[j] == 1; }));
      for (size_t i = 0; i < n; ++i) final_states[i].push_back(states[i].tensor());
      for (size_t k = 0; k < scan_out.size(); ++k) {
        auto st = stack_tensors(scan_out[k], 0);
        if (!st.ok()) return ctx.error(st.status().message());
        outputs[k].push_back(std::move(st).value());
      }
    }
    for (size_t i = 0; i < n; ++i) {
      NXRT_ASSIGN_OR_RETURN(Tensor t, stack_tensors(final_states[i], 0));
      NXRT_RETURN_IF_ERROR(ctx.set_output(i, Value(std::move(t))));
    }
    for (size_t k = 0; k < outputs.size() && n + k < ctx.num_outputs(); ++k) {
      NXRT_ASSIGN_OR_RETURN(Tensor t, stack_tensors(outputs[k], 0));
      NXRT_RETURN_IF_ERROR(ctx.set_output(n + k, Value(std::move(t))));
    }
    return Status::Ok();
  }

  int64_t opset_ = 9;
  int64_t num_scan_inputs_ = 0;
  std::vector<int64_t> input_axes_, input_dirs_, output_axes_, output_dirs_;
};

}  // namespace

void register_control_flow_ops(ep::KernelRegistry& r) {
  r.add_fn("If", &if_compute);
  r.add_fn("Loop", &loop_compute);
  r.add_class<ScanKernel>("", "Scan");
}

}  // namespace nxrt::ops
