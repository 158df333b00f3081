// ExecContext: the KernelContext the executor hands to a kernel for one step of an eager run, built on
// the stack for every step. It binds the step's inputs from the frame (gathering strided views for
// kernels that want contiguous inputs), hands out outputs (bound caller buffers, concat placement,
// in-place reuse, pooled blocks), workspaces and the kernel-cache variant, and afterwards copies
// outputs into bound buffers that the kernel could not write directly.
//
// It also remembers how each output was produced and which temporaries it used, so that the capture
// recorder (capture.h) can turn an eager step into a replayable record.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "session/executor.h"

namespace nxrt::session {

// "node 'n' (#3, ai.onnx::MatMul, opset 21)"
std::string node_prefix(const ir::Node& node, size_t index, int64_t opset);
// "[float32[1,4], <none>]"
std::string describe_inputs(const Value* const* inputs, size_t n);
// The executor's error for a step: node prefix, its inputs, the message.
Status step_error(const PlanStep& step, const Value* const* inputs, size_t n, const std::string& msg,
                  StatusCode code);

// The thread pool's counters, read before and after a traced step: how many of its loops ran split over
// the threads and how many woke a sleeping worker (each costs the caller a system call), so a trace
// shows which nodes pay for cross-core work.
struct PoolActivity {
  uint64_t loops_split = 0, worker_wakes = 0;
  static PoolActivity of(const ep::ThreadPool& pool) { return {pool.loops_split(), pool.worker_wakes()}; }
  PoolActivity since(const PoolActivity& before) const {
    return {loops_split - before.loops_split, worker_wakes - before.worker_wakes};
  }
};

// One executed node on the trace / op profile. `capture`: "captured", "seam", "recording" or null
// (a plain eager run); `why`: the seam's reason.
// `variant_entry`: the kernel-cache entry the step ran with (-1: none); `pool`: what the thread pool
// did during the step.
void record_step(const RunHooks& hooks, const PlanStep& step, const Value* const* inputs, size_t n,
                 int variant_entry, double t0, double dur, PoolActivity pool, const char* capture = nullptr,
                 const std::string* why = nullptr);

// Pooled blocks a context holds until its step ends (workspaces): inline for the usual few, so a
// step allocates nothing to remember them.
class HeldBlocks {
 public:
  // Takes the block (from `pool`) and returns its memory.
  void* hold(std::shared_ptr<Storage> block) {
    void* p = block->data();
    if (n_inline_ < kInline) {
      inline_[n_inline_++] = std::move(block);
    } else {
      more_.push_back(std::move(block));
    }
    return p;
  }
  size_t size() const { return n_inline_ + more_.size(); }
  const std::shared_ptr<Storage>& at(size_t k) const { return k < n_inline_ ? inline_[k] : more_[k - n_inline_]; }

 private:
  static constexpr size_t kInline = 4;
  std::shared_ptr<Storage> inline_[kInline];
  size_t n_inline_ = 0;
  std::vector<std::shared_ptr<Storage>> more_;
};

class ExecContext final : public ep::KernelContext {
 public:
  ExecContext(const PlanStep& step, Frame& frame, ep::ThreadPool& pool);

  // Binds input values; strided views go to kernels that accept them, others get a contiguous copy.
  Status bind_inputs();

  const ep::KernelInfo& info() const override { return *step_.info; }
  size_t num_inputs() const override { return num_inputs_; }
  size_t num_outputs() const override { return step_.outputs.size(); }
  const Value* input_value(size_t i) const override { return i < num_inputs_ ? inputs_[i] : nullptr; }
  bool output_requested(size_t i) const override { return i < step_.outputs.size() && step_.outputs[i] >= 0; }
  Result<Tensor*> allocate_output(size_t i, DataType dtype, const Dims& shape) override;
  Status set_output(size_t i, Value v) override;
  ep::ThreadPool& pool() override { return pool_; }
  Result<void*> workspace(size_t bytes) override;
  Result<ep::SlotMemory> thread_slots(size_t bytes) override;
  const ep::KernelVariant* variant() const override { return variant_.get(); }
  const std::shared_ptr<const ep::KernelVariant>& variant_ref() const { return variant_; }
  void* variant_workspace() const override { return variant_ws_ ? variant_ws_->data() : nullptr; }
  // Sets the variant (held until the step ends) and reserves the workspace it declares (from the
  // buffer pool).
  void set_variant(std::shared_ptr<const ep::KernelVariant> v);

  Status error(const std::string& msg, StatusCode code) const override {
    return step_error(step_, inputs_, num_inputs_, msg, code);
  }
  Status error(const std::string& msg) const { return error(msg, StatusCode::kRuntimeError); }

  Frame& frame() { return frame_; }
  const PlanStep& step() const { return step_; }
  const Value* const* input_array() const { return inputs_; }

  // After compute: outputs given to the kernel as temporaries for a bound buffer are copied into it.
  Status finish_bound_outputs();

  // ---- what the capture recorder reads after the step (see capture.cpp)
  enum class Produced : uint8_t { kNone, kAllocated, kSet };
  Produced produced(size_t i) const { return i < kMaxTrackedOutputs ? produced_[i] : Produced::kSet; }
  // The value the kernel wrote for output i before finish_bound_outputs moved it into a bound buffer
  // (null when no copy happened): the kernel's own output, which a replay must re-create.
  const Value* pre_copy_value(size_t i) const;
  // The value of output i that the kernel wrote into, for an output the graph does not use.
  const Value* scratch_output(size_t i) const;
  // The workspaces handed out this step, in request order, and the variant's reserved workspace.
  const HeldBlocks& workspaces() const { return workspaces_; }
  const std::shared_ptr<Storage>& variant_workspace_storage() const { return variant_ws_; }
  // The kernel-cache entry the variant came from (index into step().cache.variants), or -1.
  int variant_entry() const { return variant_entry_; }
  void set_variant_entry(int e) { variant_entry_ = e; }

 private:
  static constexpr size_t kInlineInputs = 16;
  static constexpr size_t kInlineGathered = 4;
  static constexpr size_t kMaxTrackedOutputs = 16;

  Result<Tensor> new_tensor(DataType dtype, const Dims& shape);
  Result<Tensor> pooled_copy(const Tensor& src);
  Status copy_into(const Tensor& src, Tensor& dst);
  const Tensor* bound_buffer(size_t i) const;
  Result<Tensor> bound_view(size_t i, DataType dtype, const Dims& shape, const Tensor& bound);
  Result<Tensor*> allocate_bound(size_t i, DataType dtype, const Dims& shape, const Tensor& bound, Value* slot);
  Tensor* try_concat_placement(size_t i, DataType dtype, const Dims& shape, Value* slot);
  Tensor* group_buffer(int g, bool make);
  Tensor* try_inplace(DataType dtype, const Dims& shape, Value* slot);
  Value* out_slot(size_t i) {
    int s = step_.outputs[i];
    return s < 0 ? nullptr : &frame_.slots[static_cast<size_t>(s)];
  }
  void mark(size_t i, Produced p) {
    if (i < kMaxTrackedOutputs) produced_[i] = p;
  }

  struct PendingBound {
    size_t output;
    Tensor view;
  };
  struct CopiedOutput {
    size_t output;
    Value before;  // what the kernel produced, before it went into the bound buffer
  };

  const PlanStep& step_;
  Frame& frame_;
  ep::ThreadPool& pool_;
  const Value* inline_inputs_[kInlineInputs];
  std::vector<const Value*> heap_inputs_;
  const Value** inputs_ = nullptr;
  size_t num_inputs_ = 0;
  Value inline_gathered_[kInlineGathered];  // contiguous copies of strided inputs
  size_t num_inline_gathered_ = 0;
  std::vector<std::unique_ptr<Value>> gathered_;
  std::vector<std::pair<size_t, std::unique_ptr<Value>>> scratch_;  // outputs the graph does not use
  HeldBlocks workspaces_;  // held until the step ends
  std::shared_ptr<Storage> variant_ws_;
  std::vector<PendingBound> pending_bound_;
  std::vector<CopiedOutput> copied_;  // filled only while a recorder watches (Frame::observer)
  Produced produced_[kMaxTrackedOutputs] = {};
  std::shared_ptr<const ep::KernelVariant> variant_;
  int variant_entry_ = -1;
};

}  // namespace nxrt::session
