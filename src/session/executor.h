// The planned executor: a GraphPlan is built once per graph (and per subgraph) when the session is
// created; a Frame holds one run's values; execute() walks the plan.
//
// Values live in dense slots. Each step knows its input/output slots and which slots die after it
// (their last use, counting reads made by subgraphs from outer scope), so buffers are released as
// soon as nothing needs them.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "ir/graph.h"
#include "nxrt/session.h"
#include "session/buffer_pool.h"
#include "session/trace.h"

namespace nxrt::session {

class GraphPlan;

// One shape variant of a node in the kernel cache: the input dtypes and shapes it was specialized
// for and what the kernel built for them.
struct KernelVariantEntry {
  KernelVariantEntry() = default;
  // Moved only while the cache's mutex is held exclusively (the entry vector grows).
  KernelVariantEntry(KernelVariantEntry&& o) noexcept
      : dtypes(std::move(o.dtypes)), shapes(std::move(o.shapes)), state(std::move(o.state)),
        last_used(o.last_used.load(std::memory_order_relaxed)), valid(o.valid), recorded_by(o.recorded_by) {}
  std::vector<DataType> dtypes;  // kUndefined for an absent or non-tensor input
  std::vector<Dims> shapes;
  // Shared with the runs computing with it: an eviction by one run never frees a variant another run
  // is using (the last holder frees it).
  std::shared_ptr<const ep::KernelVariant> state;
  std::atomic<uint64_t> last_used{0};  // stamped by hits under the shared lock
  bool valid = false;        // false: a free entry (its specialize failed), reused by the next miss
  uint32_t recorded_by = 0;  // bit per capture slot whose record points at `state` (capture.h)
};

// The shape-keyed kernel cache of one node: at most `variants_per_node` variants, least recently
// used evicted (a variant a capture record uses only when every variant is recorded). `prebound` is
// the variant the node ran with last; a call with the same shapes takes it without searching (the
// steady state of a decode loop or of fixed-shape serving). Entries never move, so an index names a
// variant for as long as it lives. Concurrent runs find variants under `mu` held shared (a hit
// blocks no other run: it only stamps atomics), and insert or evict under `mu` held exclusively (also
// for specialize on a miss, so a second run at the same new shapes takes the first one's variant).
struct NodeKernelCache {
  NodeKernelCache() = default;
  // Moved only while the plan is built (before any run), so the mutex is not carried over.
  NodeKernelCache(NodeKernelCache&& o) noexcept
      : variants(std::move(o.variants)), prebound(o.prebound.load(std::memory_order_relaxed)) {}
  NodeKernelCache& operator=(NodeKernelCache&& o) noexcept {
    variants = std::move(o.variants);
    prebound.store(o.prebound.load(std::memory_order_relaxed), std::memory_order_relaxed);
    return *this;
  }
  std::vector<KernelVariantEntry> variants;
  std::atomic<int> prebound{-1};
  mutable std::shared_mutex mu;
};

// Told when the kernel cache evicts a variant that capture records point at (before it is destroyed),
// so those records are dropped and never replay a freed variant.
class VariantEvictionListener {
 public:
  virtual ~VariantEvictionListener() = default;
  virtual void on_recorded_variant_evicted(uint32_t recorded_by, const ir::Node& node) = 0;
};

// What every run of a session shares about the kernel caches.
struct KernelCacheConfig {
  std::atomic<uint64_t> clock{0};  // least-recently-used order across all runs
  size_t variants_per_node = 4;    // NXRT_KERNEL_CACHE_VARIANTS_PER_NODE overrides
  VariantEvictionListener* eviction_listener = nullptr;
};

// The state of one run in flight that every frame of it shares (the main graph's and every
// subgraph's). A session keeps a few of these (one per concurrent run, session.cpp) and reuses them.
// The per-thread scratch of one run context (KernelContext::thread_slots): one block from the context's
// buffer pool, held for the context's life and never a tensor's, slot s at s * stride. Every kernel of
// every run gets the same addresses, so a thread's slot stays in its own core's cache; a request for
// more takes a bigger block (slots move once, while shapes still grow).
class ThreadSlotArena {
 public:
  ep::SlotMemory get(BufferPool& pool, size_t bytes, int slots);
  size_t bytes() const { return block_ ? block_->bytes() : 0; }

 private:
  std::shared_ptr<Storage> block_;
  size_t stride_ = 0;
  int slots_ = 0;
};

struct RunResources {
  // `budget`: the session's memory budget shared by its pools (null: this pool's own).
  explicit RunResources(MemoryBudget* budget = nullptr) : buffers(budget) {}
  BufferPool buffers;
  ThreadSlotArena thread_slots;  // after `buffers`: its block goes back to the pool first
  KernelCacheStats cache_stats;  // this context's counters; the session sums them
  KernelCacheConfig own_cache;   // used when nothing shares the caches (tests, tools)
  KernelCacheConfig* cache = &own_cache;
};

// A Concat whose inputs are produced straight into its output (concat-in-place planning): when every
// input and the output have static shapes (load-time shape inference) and all axes before the concat
// axis are 1, each input is one contiguous byte range of the output. A producer of an input that only
// this Concat reads gets that range as its output (a view of the group's buffer, which is allocated
// into the Concat's output slot when the first such producer runs); the Concat then copies only the
// inputs that are not already in place. Shapes that differ at run time fall back to plain copies.
// A group's output may itself be an input of a later group (DenseNet: each dense layer's Concat is the
// first input of the next one, and also feeds that layer's conv): its buffer is then that range of
// the later group's buffer (`parent`), so neither Concat copies anything.
struct ConcatGroup {
  int out_slot = -1;
  DataType dtype = DataType::kUndefined;
  Dims out_shape;
  std::vector<Dims> in_shapes;        // per Concat input
  std::vector<int64_t> byte_offsets;  // per Concat input, into the output
  int parent = -1;                    // the group this output is an input of (-1: none)
  int parent_input = -1;              // which input of the parent's Concat
};

struct PlacedOutput {
  int group = -1;  // index into GraphPlan's concat groups; -1: a plain output
  int input = -1;  // which input of that Concat
};

struct PlanStep {
  const ir::Node* node = nullptr;
  size_t node_index = 0;  // index in the graph's node list (for error messages)
  std::unique_ptr<ep::KernelInfo> info;
  std::unique_ptr<ep::Kernel> kernel;
  std::vector<int> inputs;         // slot per node input; -1 when omitted
  std::vector<int> outputs;        // slot per node output; -1 when omitted
  std::vector<int> release_after;  // slots whose last use is this step
  int inplace_input = -1;          // input whose dying buffer output 0 may reuse (see KernelDef)
  std::vector<PlacedOutput> placed;  // per output (empty: none placed); see ConcatGroup
  int concat_group = -1;             // this step is the Concat of that group
  std::vector<std::unique_ptr<ep::SubgraphRunner>> subgraphs;
  std::vector<int> reads;            // every slot the step reads: inputs, then its subgraphs' captures
  const char* capture_decline = nullptr;  // KernelDef::capture_decline (function kernels)
  mutable NodeKernelCache cache;   // shared by concurrent runs: locks its own mutex
};

class ExecContext;

// Watches an eager run step by step (the capture recorder): called after each step's kernel computed
// and its bound outputs were finished, before the step's dead slots are released.
class StepObserver {
 public:
  virtual ~StepObserver() = default;
  virtual Status after_step(size_t step_index, ExecContext& ctx) = 0;
};

// What plan building needs from the session.
struct PlanEnv {
  const ir::Model* model = nullptr;
  const ep::KernelRegistry* registry = nullptr;
  const ep::KernelOverrides* overrides = nullptr;  // handed to every kernel's KernelInfo
  // Called (main graph only) right after a kernel that packed an initializer was created, when that
  // kernel is the initializer's only reader and no longer needs its bytes (see
  // Kernel::reads_const_input_data). The owner of the model replaces the initializer's storage.
  std::function<void(const std::string&)> release_initializer;
};

// Values visible to a run: this plan's slots, then the enclosing frames' (outer scope).
struct Frame {
  const GraphPlan* plan = nullptr;
  std::vector<Value> slots;
  const Frame* parent = nullptr;
  const RunHooks* hooks = nullptr;  // tracing / profiling; null or inactive when off
  RunResources* res = nullptr;      // buffer pool and kernel cache counters; null: plain allocation
  // Caller-bound output buffers by slot (empty when nothing is bound).
  std::vector<const Tensor*> bound;
  StepObserver* observer = nullptr;  // main graph only: the capture recorder while it records
  // The value named `name` here or in an enclosing frame; nullptr when absent or not yet computed.
  const Value* lookup(const std::string& name) const;
};

class GraphPlan {
 public:
  // `outer_names`: names defined in enclosing graphs (empty for the main graph).
  static Result<std::unique_ptr<GraphPlan>> build(const ir::Graph& graph, const PlanEnv& env,
                                                  const std::vector<std::string>& outer_names);

  const ir::Graph& graph() const { return *graph_; }
  int slot(const std::string& name) const {
    auto it = slot_of_.find(name);
    return it == slot_of_.end() ? -1 : it->second;
  }
  size_t num_slots() const { return slot_names_.size(); }
  size_t num_steps() const { return steps_.size(); }  // nodes executed per run (after optimization)
  const std::vector<int>& input_slots() const { return input_slots_; }
  const std::vector<int>& output_slots() const { return output_slots_; }
  const std::vector<ConcatGroup>& concat_groups() const { return concat_groups_; }

  // Fills constants and outer-scope values into a fresh frame (inputs are bound by the caller).
  Status prepare_frame(Frame& frame) const;
  // Drops every value of a finished frame, keeping the slot vector's capacity.
  static void clear_frame(Frame& frame);
  // Visits every node's kernel cache, this graph's and its subgraphs'.
  void for_each_cache(const std::function<void(const NodeKernelCache&)>& fn) const;
  // Runs every step (from step `first` on: the eager rest of a replay that had to stop).
  Status execute(Frame& frame, ep::ThreadPool& pool, size_t first = 0) const;
  // Runs step k alone, eagerly (also a seam of a captured replay: `capture_tag` "seam" and its reason
  // go on the step's trace span).
  Status run_step(size_t k, Frame& frame, ep::ThreadPool& pool, const char* capture_tag = nullptr,
                  const std::string* why = nullptr) const;
  const std::vector<PlanStep>& steps() const { return steps_; }
  // Initializer slots (graph inputs with a default included), and the slot names.
  const std::vector<std::pair<int, const Tensor*>>& constants() const { return constants_; }
  const std::string& slot_name(int s) const { return slot_names_[static_cast<size_t>(s)]; }

 private:
  const ir::Graph* graph_ = nullptr;
  std::unordered_map<std::string, int> slot_of_;
  std::vector<std::string> slot_names_;
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
  std::vector<std::pair<int, const Tensor*>> constants_;   // initializers
  std::vector<std::pair<int, std::string>> outer_refs_;    // slots filled from enclosing frames
  std::vector<PlanStep> steps_;
  std::vector<ConcatGroup> concat_groups_;

  static void plan_concat_groups(GraphPlan& plan, const ir::Graph& graph,
                                 const std::unordered_map<std::string, size_t>& producer,
                                 const std::vector<int>& readers, const std::vector<bool>& keep);
};

// Names a graph reads that it does not define (inputs, initializers, node outputs), including those
// read by its nested subgraphs: the outer-scope values it captures.
std::vector<std::string> free_names(const ir::Graph& graph);

}  // namespace nxrt::session
