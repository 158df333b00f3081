// Captured replay of a steady bound step (a decode step: IoBinding at unchanged shapes).
//
// After a warm-up step at a binding signature, the next step at the same signature runs eagerly while
// a recorder writes down, for every step the schedule captures (capture_schedule.h), the kernel, its
// cache variant, its input and output tensors (fixed addresses, held by the record), the gathers of
// strided inputs, the copies into bound buffers and the workspaces. Later steps at that signature
// replay the record: each captured node's compute is called with a prebuilt context, with no shape
// resolution, kernel-cache lookup, view building, buffer-pool search or liveness bookkeeping; pure
// view nodes over fixed inputs are skipped (their recorded views stay valid). Eager seams run through
// the normal per-step path in between, reading the captured values they need from the frame.
//
// State per slot: NeedsWarmup -> Armed -> Ready (replay), or Unsupported until reset. Two slots, so a
// decode step (1 new token) and a verify step (k+1 tokens, speculative decoding) alternate without
// re-recording; a third signature (a prefill) takes the least recently used slot. A record is dropped
// (and the slot re-warms) when the binding signature changes (dtype or shape of a bound input read
// by a captured node; address, dtype or shape of a bound output buffer a captured node writes: a
// replay reads inputs from the frame wherever they are, but writes into recorded output addresses), an If seam picks the other branch mid-replay
// (the step finishes eagerly, the next one re-records), a kernel-cache variant it uses is evicted, the
// caller resets (rewind, new sequence), or a replayed kernel asks for another output shape than it
// recorded. NXRT_CAPTURE=0 (or SessionOptions::capture = 0) disables replay.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "nxrt/session.h"
#include "session/capture_schedule.h"
#include "session/executor.h"

namespace nxrt::session {

enum class CaptureState { kNeedsWarmup, kArmed, kReady, kUnsupported };
const char* capture_state_name(CaptureState s);

// What a bound run looks like to the capture controller (built by Session::run(IoBinding&)).
struct BoundInput {
  int slot = -1;
  const Value* value = nullptr;
};
struct BoundOutput {
  int slot = -1;
  const Tensor* buffer = nullptr;  // null: the runtime allocates the output
};
struct BindingView {
  const void* id = nullptr;  // the IoBinding
  const BoundInput* inputs = nullptr;
  size_t num_inputs = 0;
  const BoundOutput* outputs = nullptr;
  size_t num_outputs = 0;
};

class CaptureRecord;

class CaptureController final : public VariantEvictionListener {
 public:
  static constexpr int kSlots = 2;

  CaptureController(const GraphPlan& plan, bool enabled, ClassifierMode mode);
  ~CaptureController() override;
  CaptureController(const CaptureController&) = delete;
  CaptureController& operator=(const CaptureController&) = delete;

  bool enabled() const { return enabled_; }
  // Concurrency: run, reset, stats, describe and apply_pending_evictions are called by one thread at a
  // time with no other run of the session in flight (the session's exclusive lock).
  // on_recorded_variant_evicted may also come from eager runs of the session running side by side
  // (shared lock): those are queued and applied by the next exclusive call.
  //
  // Runs the main graph for one bound step (the frame holds the inputs, frame.bound the outputs):
  // eagerly, recording, or as a replay, as the slot of this binding's signature says.
  Status run(const BindingView& b, Frame& frame, ep::ThreadPool& pool);
  // The caller's sequence moved (rewind, reset, a new request): every record is dropped.
  void reset(const std::string& why);
  void on_recorded_variant_evicted(uint32_t recorded_by, const ir::Node& node) override;
  // Drops the records that evictions by concurrent eager runs invalidated.
  void apply_pending_evictions();

  CaptureStats stats() const;
  // The schedule with the given KV pairs bound to one buffer each (nxrt info --capture).
  std::string describe(const std::vector<SharedKvPair>& shared_kv) const;

 private:
  struct SigEntry {
    int slot = -1;
    bool output = false;
    const void* data = nullptr;
    DataType dtype = DataType::kUndefined;
    Dims shape;
    bool contiguous = true;
  };
  struct Slot {
    CaptureState state = CaptureState::kNeedsWarmup;
    const CaptureSchedule* schedule = nullptr;
    const void* binding = nullptr;
    size_t num_inputs = 0, num_outputs = 0;
    std::vector<SigEntry> sig;
    std::unique_ptr<CaptureRecord> record;
    uint64_t last_used = 0;
    int invalidations = 0;  // records dropped since the last reset
    bool busy = false;      // a run is using it: invalidation is deferred to its end
    std::string pending_invalidation;
    std::string why;  // Unsupported: why
  };

  bool matches(const Slot& s, const BindingView& b) const;
  Slot& take_slot(const BindingView& b);
  const CaptureSchedule& schedule_for(const BindingView& b);
  void drop_record(Slot& s, const std::string& why, CaptureState next);
  void drop_evicted(uint32_t recorded_by, const std::string& why);
  Status run_slot(const BindingView& b, Frame& frame, ep::ThreadPool& pool);
  Status run_eager(Frame& frame, ep::ThreadPool& pool);
  Status record(Slot& s, Frame& frame, ep::ThreadPool& pool);
  Status replay(Slot& s, Frame& frame, ep::ThreadPool& pool);

  const GraphPlan& plan_;
  bool enabled_;
  ClassifierMode mode_;
  Slot slots_[kSlots];
  uint64_t clock_ = 0;
  std::map<std::string, std::unique_ptr<CaptureSchedule>> schedules_;  // by pinned KV pairs
  std::vector<std::pair<int, const Tensor*>> input_defaults_;  // graph inputs with an initializer default
  CaptureStats stats_;
  bool in_run_ = false;  // inside run(): evictions come from this run's own steps
  std::mutex pending_mu_;
  std::vector<std::pair<uint32_t, std::string>> pending_evictions_;  // (recorded_by, why)
};

}  // namespace nxrt::session
