// Captured replay: the record, the recorder, the replay and the slot state machine (see capture.h).
#include "session/capture.h"

#include "ir/allocation.h"

#include <algorithm>
#include <deque>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "session/exec_context.h"
#include "session/trace.h"

namespace nxrt::session {

const char* capture_state_name(CaptureState s) {
  switch (s) {
    case CaptureState::kNeedsWarmup: return "needs-warmup";
    case CaptureState::kArmed: return "armed";
    case CaptureState::kReady: return "ready";
    case CaptureState::kUnsupported: return "unsupported";
  }
  return "?";
}

// ------------------------------------------------------------------------------------------ record

// A recorded step. Values live in `values` (a deque: addresses stay put as it grows) and hold their
// storage, so every captured tensor keeps its address for as long as the record lives.
class CaptureRecord {
 public:
  struct Input {
    const Value* value = nullptr;  // arena value, or a frame slot (graph input, seam output)
    // A frame-slot input is checked before each replay against what was recorded.
    bool check = false;
    DataType dtype = DataType::kUndefined;
    Dims shape;
    bool contiguous = true;
  };
  struct Gather {  // a strided input copied into a contiguous temporary the kernel reads
    Input source;
    Value tmp;
  };
  struct Output {
    Value* compute = nullptr;    // what the kernel writes (allocate_output returns it)
    Value* published = nullptr;  // what readers see (== compute, or the bound buffer it is copied to)
    bool allocated = false;      // recorded through allocate_output (else set_output)
  };
  struct Node {
    size_t step = 0;
    const ep::KernelVariant* variant = nullptr;
    void* variant_ws = nullptr;
    // When this node's variant has worker_prefetch bytes: those of the next such node (the first one
    // after the last), handed to the idle worker once this node has run.
    ep::WorkerPrefetch next_prefetch;
    uint32_t in0 = 0, nin = 0, out0 = 0, nout = 0, ws0 = 0, nws = 0, g0 = 0, ng = 0;
    bool elided = false;  // a view of fixed inputs: the recorded view stays valid
  };
  struct Export {  // a captured value (or constant) a seam or the caller reads from the frame
    int slot = -1;
    const Value* value = nullptr;
    size_t producer = 0;  // the step that made it (0 for constants)
  };
  struct Seam {
    size_t step = 0;
    uint32_t exp0 = 0, nexp = 0;
    int if_cond = -1;  // If: the recorded condition (0/1), checked before each replay
    int cond_slot = -1;
  };
  struct Item {
    bool seam = false;
    uint32_t index = 0;
  };

  std::deque<Value> values;
  std::vector<Input> inputs;  // per node input (Input::value null: omitted)
  std::deque<Gather> gathers;
  std::vector<Output> outputs;
  std::vector<std::shared_ptr<Storage>> workspaces;
  std::vector<size_t> workspace_bytes;
  std::vector<std::shared_ptr<Storage>> variant_workspaces;
  // The variants the nodes point at: a record never replays a freed variant, even when a concurrent
  // eager run evicted it (that eviction drops the record at the next captured run).
  std::vector<std::shared_ptr<const ep::KernelVariant>> variants;
  std::vector<Node> nodes;
  std::vector<Seam> seams;
  std::vector<Export> exports;        // seams' ranges
  std::vector<Export> final_exports;  // graph outputs made by captured steps
  // Per final export: how many references to its storage the record and the session hold between
  // runs. More at the start of a replay means the caller kept the previous step's output, which a
  // replay would overwrite in place: that step runs eagerly instead.
  std::vector<long> final_export_refs;
  // Per final export: a pooled tensor that only its producer's output value holds in the record (no
  // recorded view shares it), so a replay may move it to a fresh pool block when the caller kept
  // the last one (a recurrent state fed back as the next step's input).
  std::vector<char> final_export_movable;
  // Outputs a replay sets anew every step (views over this step's inputs, values a kernel hands
  // over): let go after each replay, so the record does not pin last step's blocks in the pool.
  std::vector<uint32_t> per_step_outputs;
  void release_per_step_outputs() {
    for (uint32_t i : per_step_outputs) {
      *outputs[i].compute = Value();
      *outputs[i].published = Value();
    }
  }
  std::vector<Export> all_exports;    // every captured value with a slot (for an eager finish)
  std::vector<Item> items;
  std::vector<std::pair<size_t, int>> marked;  // (step, kernel-cache entry) this record points at
  uint32_t mark_bit = 0;
  const GraphPlan* plan = nullptr;

  ~CaptureRecord() {
    // The variants it pointed at may be evicted again.
    for (auto [k, e] : marked) {
      auto& vs = plan->steps()[k].cache.variants;
      if (static_cast<size_t>(e) < vs.size()) vs[static_cast<size_t>(e)].recorded_by &= ~mark_bit;
    }
  }
};

namespace {

bool input_matches(const CaptureRecord::Input& in) {
  const Value* v = in.value;
  if (!v->is_tensor()) return false;
  const Tensor& t = v->tensor();
  return t.dtype() == in.dtype && t.shape() == in.shape && t.is_contiguous() == in.contiguous;
}

// ------------------------------------------------------------------------------------------ recorder

class Recorder final : public StepObserver {
 public:
  Recorder(const GraphPlan& plan, const CaptureSchedule& schedule, Frame& frame, CaptureRecord& r)
      : plan_(plan), schedule_(schedule), frame_(frame), r_(r), origin_(plan.num_slots(), kNone),
        fixed_origin_(plan.num_slots(), false) {
    for (int s : plan.input_slots()) graph_input_[s] = true;
    for (const auto& [slot, t] : plan.constants()) constant_.insert(slot);
  }

  Status after_step(size_t k, ExecContext& ctx) override {
    const PlanStep& step = plan_.steps()[k];
    if (!schedule_.steps[k].captured) return record_seam(k, step, ctx);
    return record_node(k, step, ctx);
  }

  // After the last step: graph outputs that captured steps made are written to the frame at the end;
  // each node whose worker reads weights first learns the next such node's (see Node::next_prefetch).
  void finish() {
    std::vector<CaptureRecord::Node*> streams;
    for (CaptureRecord::Node& n : r_.nodes)
      if (!n.elided && n.variant && n.variant->worker_prefetch().bytes > 0) streams.push_back(&n);
    for (size_t i = 0; i < streams.size(); ++i)
      streams[i]->next_prefetch = streams[(i + 1) % streams.size()]->variant->worker_prefetch();
    for (int s : plan_.output_slots()) {
      if (origin_[static_cast<size_t>(s)] >= 0) {
        const auto& e = arena_origin(s);
        r_.final_exports.push_back({s, e.value, e.producer});
      }
    }
  }

 private:
  static constexpr int kNone = -1;   // not made in this step (graph input, or not yet)
  static constexpr int kSeam = -2;   // made by a seam
  struct Origin {
    const Value* value;
    size_t producer;
  };

  const Origin& arena_origin(int s) const { return origins_[static_cast<size_t>(origin_[static_cast<size_t>(s)])]; }

  // The arena value a captured input reads from slot s: recorded constants are copied in (once).
  int origin_for(int s) {
    int o = origin_[static_cast<size_t>(s)];
    if (o == kNone && constant_.count(s) && !graph_input_.count(s)) {
      r_.values.push_back(frame_.slots[static_cast<size_t>(s)]);
      o = add_origin(s, &r_.values.back(), 0, true);
    }
    return o;
  }
  int add_origin(int s, const Value* v, size_t producer, bool fixed) {
    origins_.push_back({v, producer});
    const int o = static_cast<int>(origins_.size() - 1);
    origin_[static_cast<size_t>(s)] = o;
    fixed_origin_[static_cast<size_t>(s)] = fixed;
    r_.all_exports.push_back({s, v, producer});
    return o;
  }

  Status record_seam(size_t k, const PlanStep& step, ExecContext& ctx) {
    CaptureRecord::Seam seam;
    seam.step = k;
    seam.exp0 = static_cast<uint32_t>(r_.exports.size());
    std::unordered_set<int> done;
    for (int s : step.reads) {
      if (!done.insert(s).second) continue;
      const int o = origin_for(s);
      if (o >= 0) r_.exports.push_back({s, origins_[static_cast<size_t>(o)].value, origins_[static_cast<size_t>(o)].producer});
    }
    seam.nexp = static_cast<uint32_t>(r_.exports.size()) - seam.exp0;
    const ir::Node& node = *step.node;
    if (node.domain.empty() && node.op_type == "If" && ctx.has_input(0) && ctx.input_value(0)->is_tensor()) {
      const Tensor& c = ctx.input(0);
      if (c.numel() == 1 && c.dtype() == DataType::kBool) {
        seam.if_cond = c.data<bool>()[0] ? 1 : 0;
        seam.cond_slot = step.inputs[0];
      }
    }
    for (int s : step.outputs) {
      if (s >= 0) origin_[static_cast<size_t>(s)] = kSeam;
    }
    r_.items.push_back({true, static_cast<uint32_t>(r_.seams.size())});
    r_.seams.push_back(seam);
    return Status::Ok();
  }

  Status record_node(size_t k, const PlanStep& step, ExecContext& ctx) {
    CaptureRecord::Node n;
    n.step = k;
    n.variant = ctx.variant();
    if (n.variant) r_.variants.push_back(ctx.variant_ref());
    if (ctx.variant_entry() >= 0 && n.variant) {
      auto& e = step.cache.variants[static_cast<size_t>(ctx.variant_entry())];
      e.recorded_by |= r_.mark_bit;
      r_.marked.push_back({k, ctx.variant_entry()});
    }
    if (const auto& ws = ctx.variant_workspace_storage()) {
      r_.variant_workspaces.push_back(ws);
      n.variant_ws = ws->data();
    }
    // Inputs.
    n.in0 = static_cast<uint32_t>(r_.inputs.size());
    n.nin = static_cast<uint32_t>(ctx.num_inputs());
    n.g0 = static_cast<uint32_t>(r_.gathers.size());
    bool all_fixed_sources = true;
    std::vector<const Storage*> input_storages;
    std::vector<bool> input_is_constant;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      CaptureRecord::Input in;
      const int s = step.inputs[i];
      const Value* seen = ctx.input_value(i);
      bool constant = false;
      if (s >= 0 && seen) {
        const int o = origin_for(s);
        if (o >= 0) {
          in.value = origins_[static_cast<size_t>(o)].value;
          constant = constant_.count(s) && !graph_input_.count(s);
          if (!fixed_origin_[static_cast<size_t>(s)]) all_fixed_sources = false;
        } else {
          // A graph input (bound: the signature holds its shape; a replay reads it from the frame,
          // wherever it lives this step) or a seam's output (checked before each replay). Neither
          // keeps its address, so views of them are rebuilt on every replay.
          in.value = &frame_.slots[static_cast<size_t>(s)];
          in.check = true;
          all_fixed_sources = false;
        }
        if (in.value->is_tensor()) {
          in.dtype = in.value->tensor().dtype();
          in.shape = in.value->tensor().shape();
          in.contiguous = in.value->tensor().is_contiguous();
          input_storages.push_back(in.value->tensor().storage().get());
        } else if (in.check) {
          return Status(StatusCode::kRuntimeError, "captured step reads a non-tensor value");
        }
        if (seen != &frame_.slots[static_cast<size_t>(s)]) {  // the executor gathered a strided view
          r_.gathers.push_back({in, *seen});
          CaptureRecord::Input g;
          g.value = &r_.gathers.back().tmp;
          in = g;
          all_fixed_sources = false;
        }
      }
      input_is_constant.push_back(constant);
      r_.inputs.push_back(std::move(in));
    }
    n.ng = static_cast<uint32_t>(r_.gathers.size()) - n.g0;
    // Outputs.
    n.out0 = static_cast<uint32_t>(r_.outputs.size());
    n.nout = static_cast<uint32_t>(step.outputs.size());
    bool all_views = n.ng == 0 && !step.outputs.empty();
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      const int s = step.outputs[i];
      Value published;
      if (s >= 0) {
        published = frame_.slots[static_cast<size_t>(s)];
      } else if (const Value* sc = ctx.scratch_output(i)) {
        published = *sc;
      }
      CaptureRecord::Output out;
      out.allocated = ctx.produced(i) == ExecContext::Produced::kAllocated;
      if (const Value* before = ctx.pre_copy_value(i)) {
        r_.values.push_back(*before);
        out.compute = &r_.values.back();
        r_.values.push_back(std::move(published));
        out.published = &r_.values.back();
      } else {
        r_.values.push_back(std::move(published));
        out.compute = out.published = &r_.values.back();
      }
      // A pure view: set (not allocated) to a tensor over one of this node's input storages.
      const Value& pv = *out.compute;
      const bool view = ctx.produced(i) == ExecContext::Produced::kSet && pv.is_tensor() &&
                        std::find(input_storages.begin(), input_storages.end(), pv.tensor().storage().get()) !=
                            input_storages.end();
      if (!view) all_views = false;
      r_.outputs.push_back(out);
    }
    // Elided: every output a view over fixed inputs, and every other input a constant (a Reshape's
    // shape, a Slice's starts): such a view is the same tensor on every replay.
    if (all_views && all_fixed_sources) {
      for (size_t i = 0; i < ctx.num_inputs(); ++i) {
        const Value* v = r_.inputs[n.in0 + i].value;
        if (!v || input_is_constant[i] || !v->is_tensor()) continue;
        bool source = false;
        for (uint32_t j = 0; j < n.nout; ++j) {
          const Value* o = r_.outputs[n.out0 + j].compute;
          source |= o->tensor().storage() == v->tensor().storage();
        }
        if (!source) all_views = false;
      }
      n.elided = all_views;
    }
    for (size_t i = 0; i < step.outputs.size(); ++i) {
      const int s = step.outputs[i];
      const CaptureRecord::Output& out = r_.outputs[n.out0 + i];
      if (s < 0) continue;
      const bool fixed = out.allocated || n.elided || out.published != out.compute;
      add_origin(s, out.published, k, fixed);
    }
    // Workspaces, in request order.
    n.ws0 = static_cast<uint32_t>(r_.workspaces.size());
    n.nws = static_cast<uint32_t>(ctx.workspaces().size());
    for (size_t j = 0; j < ctx.workspaces().size(); ++j) {
      r_.workspaces.push_back(ctx.workspaces().at(j));
      r_.workspace_bytes.push_back(ctx.workspaces().at(j)->bytes());
    }
    r_.items.push_back({false, static_cast<uint32_t>(r_.nodes.size())});
    r_.nodes.push_back(n);
    return Status::Ok();
  }

  const GraphPlan& plan_;
  const CaptureSchedule& schedule_;
  Frame& frame_;
  CaptureRecord& r_;
  std::vector<int> origin_;  // per slot: index into origins_, kNone or kSeam
  std::vector<bool> fixed_origin_;
  std::vector<Origin> origins_;
  std::unordered_map<int, bool> graph_input_;
  std::unordered_set<int> constant_;
};

// ------------------------------------------------------------------------------------------ replay

// The KernelContext of a replayed node: everything was decided when it was recorded.
class ReplayContext final : public ep::KernelContext {
 public:
  ReplayContext(const PlanStep& step, const CaptureRecord& r, const CaptureRecord::Node& n, ep::ThreadPool& pool,
                Frame& frame)
      : step_(step), r_(r), n_(n), pool_(pool), frame_(frame) {
    const size_t count = n.nin;
    if (count > kInline) {
      heap_inputs_.resize(count);
      inputs_ = heap_inputs_.data();
    }
    for (size_t i = 0; i < count; ++i) inputs_[i] = r.inputs[n.in0 + i].value;
  }

  const ep::KernelInfo& info() const override { return *step_.info; }
  size_t num_inputs() const override { return n_.nin; }
  size_t num_outputs() const override { return n_.nout; }
  const Value* input_value(size_t i) const override {
    if (i >= n_.nin) return nullptr;
    const Value* v = inputs_[i];
    return v && !v->is_none() ? v : nullptr;
  }
  bool output_requested(size_t i) const override { return i < step_.outputs.size() && step_.outputs[i] >= 0; }

  Result<Tensor*> allocate_output(size_t i, DataType dtype, const Dims& shape) override {
    if (i >= n_.nout) return error("kernel wrote output " + std::to_string(i) + " but the node has " + std::to_string(n_.nout), StatusCode::kRuntimeError);
    Value& v = *r_.outputs[n_.out0 + i].compute;
    if (r_.outputs[n_.out0 + i].allocated && v.is_tensor() && v.tensor().dtype() == dtype && v.tensor().shape() == shape) {
      return &v.tensor();
    }
    // Not what was recorded: give the kernel fresh memory and finish this step eagerly.
    diverged_ = true;
    if (!frame_.res || dtype == DataType::kString) {
      v = Value(Tensor(dtype, shape));
    } else {
      v = Value(Tensor(dtype, shape, frame_.res->buffers.acquire(dtype_storage_bytes(dtype, shape_numel(shape)))));
    }
    return &v.tensor();
  }
  Status set_output(size_t i, Value v) override {
    if (i >= n_.nout) return error("kernel set output " + std::to_string(i) + " but the node has " + std::to_string(n_.nout), StatusCode::kRuntimeError);
    const CaptureRecord::Output& o = r_.outputs[n_.out0 + i];
    if (o.allocated) diverged_ = true;
    *o.compute = std::move(v);
    return Status::Ok();
  }
  ep::ThreadPool& pool() override { return pool_; }
  Result<void*> workspace(size_t bytes) override {
    if (next_ws_ < n_.nws && r_.workspace_bytes[n_.ws0 + next_ws_] >= bytes) {
      return r_.workspaces[n_.ws0 + next_ws_++]->data();
    }
    ++next_ws_;
    if (!frame_.res) return ep::KernelContext::workspace(bytes);
    return extra_ws_.hold(frame_.res->buffers.acquire(bytes));
  }
  Result<ep::SlotMemory> thread_slots(size_t bytes) override {
    if (!frame_.res) return ep::KernelContext::thread_slots(bytes);
    return frame_.res->thread_slots.get(frame_.res->buffers, bytes, pool_.num_threads());
  }
  const ep::KernelVariant* variant() const override { return n_.variant; }
  void* variant_workspace() const override { return n_.variant_ws; }
  Status error(const std::string& msg, StatusCode code) const override {
    return step_error(step_, inputs_, n_.nin, msg, code);
  }
  bool diverged() const { return diverged_; }
  const Value* const* input_array() const { return inputs_; }

 private:
  static constexpr size_t kInline = 16;
  const PlanStep& step_;
  const CaptureRecord& r_;
  const CaptureRecord::Node& n_;
  ep::ThreadPool& pool_;
  Frame& frame_;
  const Value* inline_inputs_[kInline] = {};
  std::vector<const Value*> heap_inputs_;
  const Value** inputs_ = inline_inputs_;
  uint32_t next_ws_ = 0;
  HeldBlocks extra_ws_;  // workspaces the record did not have, held for the step
  bool diverged_ = false;
};

}  // namespace

// ------------------------------------------------------------------------------------------ controller

CaptureController::CaptureController(const GraphPlan& plan, bool enabled, ClassifierMode mode)
    : plan_(plan), enabled_(enabled), mode_(mode) {
  stats_.enabled = enabled;
  const std::unordered_set<int> inputs(plan.input_slots().begin(), plan.input_slots().end());
  for (const auto& c : plan.constants()) {
    if (inputs.count(c.first)) input_defaults_.push_back(c);
  }
}

CaptureController::~CaptureController() = default;

bool CaptureController::matches(const Slot& s, const BindingView& b) const {
  if (!s.schedule || s.binding != b.id || s.num_inputs != b.num_inputs || s.num_outputs != b.num_outputs) return false;
  for (const SigEntry& e : s.sig) {
    const Tensor* t = nullptr;
    if (e.output) {
      for (size_t k = 0; k < b.num_outputs && !t; ++k) {
        if (b.outputs[k].slot == e.slot) t = b.outputs[k].buffer;
      }
    } else {
      for (size_t k = 0; k < b.num_inputs && !t; ++k) {
        if (b.inputs[k].slot == e.slot && b.inputs[k].value->is_tensor()) t = &b.inputs[k].value->tensor();
      }
    }
    if (!t || (e.output && t->raw_data() != e.data) || t->dtype() != e.dtype || t->shape() != e.shape ||
        t->is_contiguous() != e.contiguous) {
      return false;
    }
  }
  return true;
}

const CaptureSchedule& CaptureController::schedule_for(const BindingView& b) {
  std::vector<SharedKvPair> shared;
  std::string key;
  for (const SharedKvPair& p : pinnable_kv_pairs(plan_)) {
    const void* in = nullptr;
    const void* out = nullptr;
    for (size_t k = 0; k < b.num_inputs; ++k) {
      if (plan_.slot_name(b.inputs[k].slot) == p.past && b.inputs[k].value->is_tensor()) {
        in = b.inputs[k].value->tensor().raw_data();
      }
    }
    for (size_t k = 0; k < b.num_outputs; ++k) {
      if (plan_.slot_name(b.outputs[k].slot) == p.present && b.outputs[k].buffer) out = b.outputs[k].buffer->raw_data();
    }
    if (in && in == out) {
      shared.push_back(p);
      key += p.past + "=" + p.present + ";";
    }
  }
  auto& sched = schedules_[key];
  if (!sched) sched = std::make_unique<CaptureSchedule>(build_capture_schedule(plan_, mode_, shared));
  return *sched;
}

CaptureController::Slot& CaptureController::take_slot(const BindingView& b) {
  Slot* victim = &slots_[0];
  for (Slot& s : slots_) {
    if (s.last_used < victim->last_used) victim = &s;
  }
  drop_record(*victim, "a new binding signature (new shapes or buffers) took the slot", CaptureState::kNeedsWarmup);
  Slot& s = *victim;
  s.state = CaptureState::kNeedsWarmup;
  s.invalidations = 0;
  s.why.clear();
  s.schedule = &schedule_for(b);
  s.binding = b.id;
  s.num_inputs = b.num_inputs;
  s.num_outputs = b.num_outputs;
  s.sig.clear();
  // The signature: dtype and shape of every bound input a captured step reads, and address, dtype and
  // shape of every bound output buffer a captured step writes (inputs only seams read, like a growing
  // attention mask, may change freely; input addresses may too, since a replay reads inputs from the
  // frame: a recurrent state fed back from the last step's output lands somewhere new every step).
  std::vector<bool> read(plan_.num_slots(), false), written(plan_.num_slots(), false);
  for (size_t k = 0; k < plan_.steps().size(); ++k) {
    if (!s.schedule->steps[k].captured) continue;
    for (int r : plan_.steps()[k].reads) read[static_cast<size_t>(r)] = true;
    for (int o : plan_.steps()[k].outputs) {
      if (o >= 0) written[static_cast<size_t>(o)] = true;
    }
  }
  for (size_t k = 0; k < b.num_inputs; ++k) {
    const BoundInput& in = b.inputs[k];
    if (!read[static_cast<size_t>(in.slot)] || !in.value->is_tensor()) continue;
    const Tensor& t = in.value->tensor();
    s.sig.push_back({in.slot, false, t.raw_data(), t.dtype(), t.shape(), t.is_contiguous()});
  }
  for (size_t k = 0; k < b.num_outputs; ++k) {
    const BoundOutput& out = b.outputs[k];
    if (!out.buffer || !written[static_cast<size_t>(out.slot)]) continue;
    const Tensor& t = *out.buffer;
    s.sig.push_back({out.slot, true, t.raw_data(), t.dtype(), t.shape(), t.is_contiguous()});
  }
  if (s.schedule->captured_steps() == 0) {
    s.state = CaptureState::kUnsupported;
    s.why = "no step can be captured";
  }
  return s;
}

void CaptureController::drop_record(Slot& s, const std::string& why, CaptureState next) {
  if (s.record) {
    ++stats_.invalidations;
    stats_.last_invalidation = why;
    ++s.invalidations;
    s.record.reset();
  }
  s.state = next;
  // A slot whose records keep being dropped (an If that flips every step) stops trying until reset.
  constexpr int kMaxInvalidations = 8;
  if (s.invalidations >= kMaxInvalidations && next != CaptureState::kUnsupported) {
    s.state = CaptureState::kUnsupported;
    s.why = "records dropped " + std::to_string(s.invalidations) + " times (last: " + why + ")";
  }
}

void CaptureController::reset(const std::string& why) {
  for (Slot& s : slots_) {
    if (s.busy) {
      s.pending_invalidation = why;
      continue;
    }
    drop_record(s, why, CaptureState::kNeedsWarmup);
    s.invalidations = 0;
    s.why.clear();
    if (s.schedule && s.schedule->captured_steps() == 0) s.state = CaptureState::kUnsupported;
  }
}

void CaptureController::on_recorded_variant_evicted(uint32_t recorded_by, const ir::Node& node) {
  const std::string why = "the kernel-cache variant of node '" + node.name + "' (" + node.op_type + ") was evicted";
  if (!in_run_) {
    // An eager run beside others (Session::run): the records belong to whoever runs the controller
    // next, which drops them before it looks at them.
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending_evictions_.push_back({recorded_by, why});
    return;
  }
  drop_evicted(recorded_by, why);
}

void CaptureController::apply_pending_evictions() {
  std::vector<std::pair<uint32_t, std::string>> pending;
  {
    std::lock_guard<std::mutex> lock(pending_mu_);
    pending.swap(pending_evictions_);
  }
  for (const auto& [bits, why] : pending) drop_evicted(bits, why);
}

void CaptureController::drop_evicted(uint32_t recorded_by, const std::string& why) {
  for (int i = 0; i < kSlots; ++i) {
    if (!(recorded_by & (1u << i))) continue;
    Slot& s = slots_[i];
    if (s.busy) {
      s.pending_invalidation = why;
    } else {
      drop_record(s, why, CaptureState::kNeedsWarmup);
    }
  }
}

Status CaptureController::run_eager(Frame& frame, ep::ThreadPool& pool) {
  ++stats_.eager_runs;
  NXRT_RETURN_IF_ERROR(plan_.prepare_frame(frame));
  return plan_.execute(frame, pool);
}

Status CaptureController::run(const BindingView& b, Frame& frame, ep::ThreadPool& pool) {
  if (!enabled_) return run_eager(frame, pool);
  apply_pending_evictions();
  in_run_ = true;
  Status st = run_slot(b, frame, pool);
  in_run_ = false;
  return st;
}

Status CaptureController::run_slot(const BindingView& b, Frame& frame, ep::ThreadPool& pool) {
  Slot* slot = nullptr;
  for (Slot& s : slots_) {
    if (matches(s, b)) slot = &s;
  }
  if (!slot) slot = &take_slot(b);
  slot->last_used = ++clock_;
  stats_.captured_steps = slot->schedule->captured_steps();
  stats_.seam_steps = slot->schedule->steps.size() - stats_.captured_steps;
  slot->busy = true;
  Status st;
  switch (slot->state) {
    case CaptureState::kNeedsWarmup:
      st = run_eager(frame, pool);
      if (st.ok()) slot->state = CaptureState::kArmed;
      break;
    case CaptureState::kArmed:
      st = record(*slot, frame, pool);
      break;
    case CaptureState::kReady:
      st = replay(*slot, frame, pool);
      break;
    case CaptureState::kUnsupported:
      st = run_eager(frame, pool);
      break;
  }
  slot->busy = false;
  if (!slot->pending_invalidation.empty()) {
    drop_record(*slot, slot->pending_invalidation, CaptureState::kNeedsWarmup);
    slot->pending_invalidation.clear();
  }
  if (!st.ok() && slot->record) drop_record(*slot, "the step failed: " + st.message(), CaptureState::kNeedsWarmup);
  return st;
}

Status CaptureController::record(Slot& s, Frame& frame, ep::ThreadPool& pool) {
  ++stats_.recorded_runs;
  auto r = std::make_unique<CaptureRecord>();
  r->plan = &plan_;
  r->mark_bit = 1u << static_cast<unsigned>(&s - slots_);
  NXRT_RETURN_IF_ERROR(plan_.prepare_frame(frame));
  Recorder rec(plan_, *s.schedule, frame, *r);
  frame.observer = &rec;
  Status st;
  try {
    for (size_t k = 0; k < plan_.steps().size() && st.ok(); ++k) {
      const ScheduleEntry& e = s.schedule->steps[k];
      st = plan_.run_step(k, frame, pool, e.captured ? "recording" : "seam", e.captured ? nullptr : &e.reason);
    }
  } catch (const AllocationError& e) {
    st = Status(StatusCode::kRuntimeError, std::string(e.what()) + " (while recording a captured step)");
  } catch (const std::bad_alloc&) {
    st = Status(StatusCode::kRuntimeError, "out of memory while recording a captured step");
  }
  frame.observer = nullptr;
  if (!st.ok()) return st;  // the record (with its marks) is dropped; the slot stays armed
  rec.finish();
  for (const CaptureRecord::Export& e : r->final_exports) {
    long refs = -1;  // a caller's bound buffer or not a tensor: nothing to guard
    bool movable = false;
    const bool bound = static_cast<size_t>(e.slot) < frame.bound.size() && frame.bound[static_cast<size_t>(e.slot)];
    if (!bound && e.value->is_tensor() && e.value->tensor().storage()) {
      const Storage* st = e.value->tensor().storage().get();
      refs = e.value->tensor().storage().use_count();
      // The frame's references go when the run ends.
      for (const Value& v : frame.slots) refs -= v.is_tensor() && v.tensor().storage().get() == st ? 1 : 0;
      size_t sharing = 0;
      for (const Value& v : r->values) sharing += v.is_tensor() && v.tensor().storage().get() == st ? 1 : 0;
      for (const CaptureRecord::Output& o : r->outputs) {
        movable |= o.compute == e.value && o.published == e.value && o.allocated && sharing == 1;
      }
    }
    r->final_export_refs.push_back(refs);
    r->final_export_movable.push_back(movable ? 1 : 0);
  }
  for (const CaptureRecord::Node& n : r->nodes) {
    if (n.elided) continue;
    const PlanStep& step = plan_.steps()[n.step];
    for (uint32_t j = 0; j < n.nout; ++j) {
      const CaptureRecord::Output& o = r->outputs[n.out0 + j];
      if (o.allocated || o.published != o.compute) continue;
      // An optional output nobody reads that the kernel left unset (SkipSimplifiedLayerNormalization's
      // mean and inverse deviation in an LLM): nothing to let go. Listing them cost a replay a pass over
      // cold records after each step, ~11-30 us of a 2-thread Qwen2.5-0.5B-shape step on the Zen 5 VM
      // for its 96. (A later replay that did set one would keep that step's value until the next.)
      if (o.compute->is_none() && step.outputs[j] < 0) continue;  // (nout is the step's output count)
      r->per_step_outputs.push_back(n.out0 + j);
    }
  }
  s.record = std::move(r);
  s.state = CaptureState::kReady;
  return Status::Ok();
}

Status CaptureController::replay(Slot& s, Frame& frame, ep::ThreadPool& pool) {
  CaptureRecord& r = *s.record;
  for (size_t j = 0; j < r.final_exports.size(); ++j) {
    Value& v = const_cast<Value&>(*r.final_exports[j].value);  // the record's own value (r.values)
    if (r.final_export_refs[j] < 0 || v.tensor().storage().use_count() <= r.final_export_refs[j]) continue;
    // The caller still holds the last step's output: a replay must not write over it.
    if (!r.final_export_movable[j] || !frame.res) return run_eager(frame, pool);  // the record stays
    const Tensor& old = v.tensor();
    v = Value(Tensor(old.dtype(), old.shape(), frame.res->buffers.acquire(old.nbytes())));
  }
  const bool observed = frame.hooks && frame.hooks->active();
  std::string stop;  // why the replay stopped early (then the rest of the step runs eagerly)
  size_t resume = plan_.steps().size();
  // Graph inputs with a default that the binding left out.
  for (const auto& [slot, t] : input_defaults_) {
    Value& v = frame.slots[static_cast<size_t>(slot)];
    if (v.is_none()) v = Value(*t);
  }
  for (const CaptureRecord::Item& item : r.items) {
    if (item.seam) {
      const CaptureRecord::Seam& seam = r.seams[item.index];
      for (uint32_t j = 0; j < seam.nexp; ++j) {
        const CaptureRecord::Export& e = r.exports[seam.exp0 + j];
        frame.slots[static_cast<size_t>(e.slot)] = *e.value;
      }
      bool flipped = false;
      if (seam.if_cond >= 0) {
        const Value& c = frame.slots[static_cast<size_t>(seam.cond_slot)];
        flipped = !c.is_tensor() || c.tensor().numel() != 1 || (c.tensor().data<bool>()[0] ? 1 : 0) != seam.if_cond;
      }
      NXRT_RETURN_IF_ERROR(plan_.run_step(seam.step, frame, pool, "seam", &s.schedule->steps[seam.step].reason));
      if (flipped) {
        stop = "the If seam '" + plan_.steps()[seam.step].node->name + "' picked the other branch";
        resume = seam.step + 1;
        break;
      }
      if (!s.pending_invalidation.empty()) {
        stop = s.pending_invalidation;
        resume = seam.step + 1;
        break;
      }
      continue;
    }
    const CaptureRecord::Node& n = r.nodes[item.index];
    if (n.elided) continue;
    const PlanStep& step = plan_.steps()[n.step];
    bool inputs_ok = true;
    for (uint32_t i = 0; i < n.nin; ++i) {
      const CaptureRecord::Input& in = r.inputs[n.in0 + i];
      if (in.check && !input_matches(in)) inputs_ok = false;
    }
    for (uint32_t j = 0; j < n.ng && inputs_ok; ++j) {
      CaptureRecord::Gather& g = r.gathers[n.g0 + j];
      if (g.source.check && !input_matches(g.source)) {
        inputs_ok = false;
        break;
      }
      NXRT_RETURN_IF_ERROR(copy_tensor_into(g.source.value->tensor(), g.tmp.tensor()));
    }
    if (!inputs_ok) {
      stop = "an input of '" + step.node->name + "' from an eager seam changed shape";
      resume = n.step;
      break;
    }
    ReplayContext ctx(step, r, n, pool, frame);
    const double t0 = observed ? monotonic_us() : 0;
    const PoolActivity pool0 = observed ? PoolActivity::of(pool) : PoolActivity{};
    Status st;
    try {
      st = step.kernel->compute(ctx);
    } catch (const AllocationError& e) {
      st = ctx.error(e.what(), StatusCode::kRuntimeError);
    } catch (const std::bad_alloc&) {
      st = ctx.error("out of memory", StatusCode::kRuntimeError);
    }
    if (observed) {
      record_step(*frame.hooks, step, ctx.input_array(), n.nin, -1, t0, monotonic_us() - t0,
                  PoolActivity::of(pool).since(pool0), "captured");
    }
    if (!st.ok()) {
      if (st.message().rfind("node '", 0) == 0) return st;
      return ctx.error(st.message(), st.code());
    }
    for (uint32_t i = 0; i < n.nout; ++i) {
      const CaptureRecord::Output& o = r.outputs[n.out0 + i];
      if (o.published != o.compute && o.compute->is_tensor()) {
        NXRT_RETURN_IF_ERROR(copy_tensor_into(o.compute->tensor(), o.published->tensor()));
      }
    }
    if (ctx.diverged()) {
      stop = "node '" + step.node->name + "' produced another output than it recorded";
      resume = n.step + 1;
      break;
    }
    if (n.next_prefetch.bytes > 0) pool.prefetch_when_idle(n.next_prefetch.data, n.next_prefetch.bytes);
  }
  if (stop.empty()) {
    for (const CaptureRecord::Export& e : r.final_exports) frame.slots[static_cast<size_t>(e.slot)] = *e.value;
    r.release_per_step_outputs();
    ++stats_.replayed_runs;
    return Status::Ok();
  }
  // Finish the step eagerly from `resume`: the frame gets every captured value made before it.
  ++stats_.replay_fallbacks;
  for (const CaptureRecord::Export& e : r.all_exports) {
    if (e.producer < resume) frame.slots[static_cast<size_t>(e.slot)] = *e.value;
  }
  r.release_per_step_outputs();
  NXRT_RETURN_IF_ERROR(plan_.prepare_frame(frame));
  Status st = plan_.execute(frame, pool, resume);
  s.pending_invalidation.clear();
  drop_record(s, stop, CaptureState::kArmed);
  return st;
}

CaptureStats CaptureController::stats() const {
  CaptureStats st = stats_;
  for (const Slot& s : slots_) st.slot_states.push_back(capture_state_name(s.state));
  return st;
}

std::string CaptureController::describe(const std::vector<SharedKvPair>& shared_kv) const {
  return build_capture_schedule(plan_, mode_, shared_kv).describe(plan_);
}

}  // namespace nxrt::session
