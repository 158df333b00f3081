// The provider interface: what a kernel sees, and how kernels are registered and found.
//
// The session reaches kernels only through this header. A Kernel is created once per node (per shape
// variant, later) from a KernelInfo (the node, its opset, attributes, constant inputs) and then
// computes many times from a KernelContext (input values, output allocation, thread pool, subgraphs).
#pragma once
#include <climits>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ep/kernel_overrides.h"
#include "ir/graph.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"

namespace nxrt::ep {

class ThreadPool;
class KernelContext;
class KernelRegistry;

// Runs one subgraph (an If branch, a Loop/Scan body). Built once when the session is created; each
// run() binds `inputs` to the subgraph's formal inputs and resolves outer-scope names through the
// calling node's frame (ctx).
class SubgraphRunner {
 public:
  virtual ~SubgraphRunner() = default;
  virtual const ir::Graph& graph() const = 0;
  virtual size_t num_inputs() const = 0;
  virtual size_t num_outputs() const = 0;
  virtual Result<std::vector<Value>> run(KernelContext& ctx, std::vector<Value> inputs) = 0;
  // The allocation-free form for loops: `inputs` are moved into the subgraph (the vector keeps its
  // capacity), `outputs` is resized to num_outputs() and overwritten. A Loop body run 10,000 times
  // through this allocates nothing per iteration beyond what its nodes produce.
  virtual Status run_into(KernelContext& ctx, std::vector<Value>& inputs, std::vector<Value>& outputs) = 0;
};

// Constant bytes a kernel's pool worker reads first (see KernelVariant::worker_prefetch).
struct WorkerPrefetch {
  const void* data = nullptr;
  size_t bytes = 0;
};

// Shape-specialized state: what Kernel::specialize decides once per distinct set of input dtypes and
// shapes (a plan, a blocking choice, precomputed strides, tables) and the scratch memory compute needs
// at those shapes. The executor's kernel cache keeps it per node, at most a few variants per node;
// evicting a variant destroys it. A variant is immutable after specialize (only const members are
// reachable from compute), so concurrent runs at the same shapes share it. The Kernel object itself
// (packed weights and other shape-independent state) is shared by all variants of its node.
class KernelVariant {
 public:
  virtual ~KernelVariant() = default;
  // Bytes of scratch every compute at these shapes needs (64-byte aligned). The executor reserves
  // them before the node runs and hands them out through KernelContext::variant_workspace(), so a
  // captured replay finds them at a fixed address; 0: none.
  virtual size_t workspace_bytes() const { return 0; }
  // The constant bytes (packed weights) the pool's worker reads first when compute runs at these
  // shapes, from memory: a captured replay hands them to the idle worker (ThreadPool::
  // prefetch_when_idle) when the node before it that also has some finishes, so the weight stream
  // starts while the serial work between them runs. Must stay valid as long as the kernel; {}: none.
  virtual WorkerPrefetch worker_prefetch() const { return {}; }
};

// How a kernel takes part in captured replay (src/session/capture.h): a steady decode step is
// recorded once and later steps re-run each recorded node's compute with the same variant, inputs,
// outputs and workspace at fixed addresses. A kernel declines when a replay of its compute would not
// be what an eager run does (it chooses work on the host from input values, or keeps state between
// runs); the node then stays an eager seam with `reason` in the schedule.
struct CaptureSupport {
  bool supported = true;
  const char* reason = "";  // why not, when !supported (a string literal)
  static CaptureSupport yes() { return {}; }
  static CaptureSupport no(const char* why) { return {false, why}; }
};

// Creation-time information about a node.
class KernelInfo {
 public:
  KernelInfo(const ir::Node& node, int64_t opset) : node_(node), opset_(opset) {}

  const ir::Node& node() const { return node_; }
  const std::string& op_type() const { return node_.op_type; }
  // Opset version the model imports for the node's domain: kernels switch semantics on it.
  int64_t opset() const { return opset_; }

  size_t num_inputs() const { return node_.inputs.size(); }
  size_t num_outputs() const { return node_.outputs.size(); }
  bool input_present(size_t i) const { return i < node_.inputs.size() && !node_.inputs[i].empty(); }
  bool output_present(size_t i) const { return i < node_.outputs.size() && !node_.outputs[i].empty(); }
  // The input's value when it is a constant known at creation (an initializer), else nullptr.
  const Tensor* const_input(size_t i) const {
    return i < const_inputs_.size() ? const_inputs_[i] : nullptr;
  }

  bool has_attr(std::string_view name) const { return node_.find_attribute(name) != nullptr; }
  int64_t attr_int(std::string_view name, int64_t dflt) const;
  float attr_float(std::string_view name, float dflt) const;
  std::string attr_string(std::string_view name, const std::string& dflt = {}) const;
  std::vector<int64_t> attr_ints(std::string_view name, std::vector<int64_t> dflt = {}) const;
  std::vector<float> attr_floats(std::string_view name, std::vector<float> dflt = {}) const;
  std::vector<std::string> attr_strings(std::string_view name, std::vector<std::string> dflt = {}) const;
  const Tensor* attr_tensor(std::string_view name) const;
  const ir::Graph* attr_graph(std::string_view name) const;
  // The prepared runner for a graph attribute (If/Loop/Scan...), or nullptr.
  SubgraphRunner* subgraph(const std::string& attr_name) const;

  // An error that names the node: "node 'n' (Op, opset 13): msg".
  Status error(const std::string& msg, StatusCode code = StatusCode::kInvalidModel) const;

  // The graph that contains the node (the main graph or a subgraph), or nullptr when the kernel is
  // created without one (unit tests). For ops defined over their graph, e.g. training's Gradient.
  const ir::Graph* graph() const { return graph_; }

  // The registry the kernel was found in, for kernels that create other kernels (the nxrt-domain
  // fused ops wrap a Conv/Gemm/MatMul kernel); nullptr when created without one.
  const KernelRegistry* registry() const { return registry_; }
  // Forced choices for tests and diagnosis (ep/kernel_overrides.h): read at creation/specialization.
  const KernelOverrides& overrides() const { return overrides_ ? *overrides_ : default_kernel_overrides(); }
  // The instruction-set tier this kernel may use (the CPU's best, capped by NXRT_ISA / isa=...).
  IsaTier isa() const { return overrides().isa(); }

  // Set by the session.
  std::vector<const Tensor*> const_inputs_;
  const ir::Graph* graph_ = nullptr;
  const KernelRegistry* registry_ = nullptr;
  const KernelOverrides* overrides_ = nullptr;
  std::unordered_map<std::string, SubgraphRunner*> subgraphs_;

 private:
  const ir::Node& node_;
  int64_t opset_;
};

// What Kernel::specialize sees: the node's creation info and the dtype and shape of every input
// (DataType::kUndefined with an empty shape for an omitted or non-tensor input). No input data: a
// variant must be right for every run at these shapes, whatever the values (constant inputs are
// available through info().const_input()).
class SpecializeContext {
 public:
  SpecializeContext(const KernelInfo& info, size_t n, const DataType* dtypes, const Dims* shapes, int threads = 1)
      : info_(info), n_(n), dtypes_(dtypes), shapes_(shapes), threads_(threads) {}
  const KernelInfo& info() const { return info_; }
  // Threads of the pool compute will run on (work splits and per-thread scratch).
  int num_threads() const { return threads_; }
  size_t num_inputs() const { return n_; }
  bool has_input(size_t i) const { return i < n_ && dtypes_[i] != DataType::kUndefined; }
  DataType dtype(size_t i) const { return i < n_ ? dtypes_[i] : DataType::kUndefined; }
  const Dims& shape(size_t i) const;

 private:
  const KernelInfo& info_;
  size_t n_;
  const DataType* dtypes_;
  const Dims* shapes_;
  int threads_;
};

// Scratch of each pool thread's own, from KernelContext::thread_slots: slot s (ThreadPool::slot()) at
// base + s * stride, `slots` of them.
struct SlotMemory {
  char* base = nullptr;
  size_t stride = 0;  // a multiple of 64, at least the bytes asked for
  int slots = 0;
  void* slot(int s) const { return base ? base + static_cast<size_t>(s) * stride : nullptr; }
};

// Run-time view of one node execution.
class KernelContext {
 public:
  virtual ~KernelContext() = default;

  virtual const KernelInfo& info() const = 0;
  virtual size_t num_inputs() const = 0;
  virtual size_t num_outputs() const = 0;
  // nullptr when the input is omitted (empty name) or beyond the node's inputs.
  virtual const Value* input_value(size_t i) const = 0;
  bool has_input(size_t i) const { return input_value(i) != nullptr; }
  // The input as a tensor. Contiguous unless the kernel declared it accepts strided inputs.
  // Precondition: has_input(i) and the value is a tensor (the executor checks kinds before compute
  // only for tensors it was told about; call input_value() for sequences/optionals).
  const Tensor& input(size_t i) const { return input_value(i)->tensor(); }
  // Input i as a tensor, or an error naming it (`name`, e.g. "indices"; nullptr: by its index) when it
  // is missing or is not a tensor: how a kernel reads an input the op requires.
  //   NXRT_ASSIGN_OR_RETURN(const Tensor& indices, ctx.required_tensor(1, "indices"));
  Result<std::reference_wrapper<const Tensor>> required_tensor(size_t i, const char* name) const;

  // Whether the graph uses output i (present and non-empty name).
  virtual bool output_requested(size_t i) const = 0;
  // A new contiguous output tensor; memory may be reused from dead values, contents unspecified
  // (zero on first allocation). Returns nullptr-free pointer valid until compute returns.
  virtual Result<Tensor*> allocate_output(size_t i, DataType dtype, const Dims& shape) = 0;
  // Sets output i to an arbitrary value: a view of an input, a sequence, an optional, a map.
  virtual Status set_output(size_t i, Value v) = 0;

  virtual ThreadPool& pool() = 0;

  // Step-lifetime scratch memory (64-byte aligned, contents unspecified) provided by the executor
  // from its buffer pool, so kernels need no malloc on the hot path. Valid until compute returns.
  virtual Result<void*> workspace(size_t bytes);
  // The state Kernel::specialize built for the current input shapes, or nullptr (a context without a
  // kernel cache: constant folding, fused wrappers, unit tests; the kernel then builds what it needs
  // per call).
  virtual const KernelVariant* variant() const { return nullptr; }
  // The workspace the current variant declared (KernelVariant::workspace_bytes), reserved by the
  // executor before compute; nullptr when there is none or the context does not reserve it (then ask
  // workspace() for the bytes: see variant_workspace below).
  virtual void* variant_workspace() const { return nullptr; }
  // `bytes` of scratch for each thread of pool() (at least pool().num_threads() slots; a chunk uses
  // slot pool().slot()), contents unspecified, valid until compute returns. Take them once, before the
  // parallel loops: a later call in the same compute may move them. A session run hands every kernel
  // of every run the same memory per thread (slot s at one address whatever the node, once no kernel
  // asks for more), so a thread's scratch is lines its own core last wrote. Scratch from workspace()
  // is pooled with tensors: its lines were last written by whichever thread wrote that memory, and
  // each line the other core holds costs a cross-core transfer on the first write (Zen 5 VM, vCPUs
  // ~900-1000 ns apart, 2 threads, in-process paired runs: SqueezeNet 0.95 of the time, DenseNet-121
  // 0.97, VGG-19 0.98; 1 thread within 1%). The default: workspace() for all slots.
  virtual Result<SlotMemory> thread_slots(size_t bytes);

  // An error naming the node, its op, opset and its input dtypes and shapes.
  virtual Status error(const std::string& msg, StatusCode code = StatusCode::kRuntimeError) const = 0;

 private:
  std::vector<std::shared_ptr<Storage>> fallback_workspaces_;  // contexts without a buffer pool
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  // Runs the node. const because one Kernel (attributes, packed weights) serves every run of its node,
  // concurrent runs included: per-shape state belongs in the variant, per-run state in the context's
  // outputs and workspace, so nothing a compute writes can race with another run.
  virtual Status compute(KernelContext& ctx) const = 0;
  // Whether input i may be given as a strided view (else the executor gathers it contiguous first).
  virtual bool accepts_strided_input(size_t /*i*/) const { return false; }
  // Whether output i may be handed out by allocate_output as a strided tensor (a caller-bound output
  // whose buffer has spare capacity on one axis, e.g. a fixed-capacity KV cache). Otherwise the
  // executor gives the kernel a contiguous temporary and copies it into the bound buffer afterwards.
  virtual bool accepts_strided_output(size_t /*i*/) const { return false; }
  // Whether compute() reads the bytes of constant input i. A kernel that copied (packed) a constant
  // input at creation and afterwards reads at most its dtype and shape returns false; the session then
  // drops the initializer's bytes when this node is its only reader, so weights are not held twice.
  virtual bool reads_const_input_data(size_t /*i*/) const { return true; }
  // The lifecycle is create (the factory: attributes, packed constant inputs) -> specialize (once per
  // distinct set of input dtypes and shapes: everything shape-dependent, and the workspace it needs) ->
  // compute (many times). The kernel cache calls specialize on the first run at new shapes and hands
  // the result back through KernelContext::variant() on every run at those shapes. A null variant
  // means the kernel keeps no per-shape state. const: specialize must not change the kernel.
  virtual Result<std::unique_ptr<KernelVariant>> specialize(const SpecializeContext& /*sc*/) const {
    return std::unique_ptr<KernelVariant>();
  }
  // Whether captured replay may re-run this kernel's compute (see CaptureSupport). Most kernels can.
  virtual CaptureSupport capture_support() const { return CaptureSupport::yes(); }
};

// The workspace `v` declared: reserved by the executor (KernelContext::variant_workspace) when `v` is
// the context's variant, else (a context that does not reserve it, a variant built per call) asked for
// now through KernelContext::workspace.
Result<void*> variant_workspace(KernelContext& ctx, const KernelVariant& v);

using KernelFactory = std::function<Result<std::unique_ptr<Kernel>>(const KernelInfo&)>;
using ComputeFn = Status (*)(KernelContext& ctx);

struct KernelDef {
  std::string domain;  // "" for ai.onnx
  std::string op_type;
  int64_t since_version = 1;
  int64_t end_version = INT64_MAX;
  KernelFactory factory;
  // The input whose buffer output 0 may overwrite (elementwise ops), or -1. The executor only does so
  // when that input dies at this node and nothing else shares its buffer.
  int inplace_input = -1;
  // For kernels registered with add_fn: why captured replay must not re-run them (null: it may). Class
  // kernels answer through Kernel::capture_support().
  const char* capture_decline = nullptr;
};

class KernelRegistry {
 public:
  void add(KernelDef def);
  // A stateless kernel: the function runs each compute and reads attributes through ctx.info().
  void add_fn(const std::string& domain, const std::string& op_type, int64_t since, int64_t end, ComputeFn fn);
  void add_fn(const std::string& op_type, ComputeFn fn) { add_fn("", op_type, 1, INT64_MAX, fn); }
  // A kernel class constructed from (const KernelInfo&) returning Status through init().
  template <typename K>
  void add_class(const std::string& domain, const std::string& op_type, int64_t since = 1,
                 int64_t end = INT64_MAX) {
    add(KernelDef{domain, op_type, since, end, [](const KernelInfo& info) -> Result<std::unique_ptr<Kernel>> {
                    auto k = std::make_unique<K>();
                    Status s = k->init(info);
                    if (!s.ok()) return s;
                    return std::unique_ptr<Kernel>(std::move(k));
                  }});
  }

  // Marks every registered version of (domain, op) as able to write output 0 over input `input`.
  void allow_inplace(const std::string& domain, const std::string& op_type, int input);
  // Marks every registered function kernel (add_fn) of (domain, op) as declining captured replay.
  void decline_capture(const std::string& domain, const std::string& op_type, const char* reason);

  // The def for (domain, op) whose version range covers `opset`, or nullptr.
  const KernelDef* find(const std::string& domain, const std::string& op_type, int64_t opset) const;
  // Whether any def exists for (domain, op) at any opset (for error messages).
  bool knows(const std::string& domain, const std::string& op_type) const;
  // Every def, sorted by domain, op and first opset.
  std::vector<const KernelDef*> defs() const;

 private:
  std::unordered_map<std::string, std::vector<KernelDef>> defs_;  // key: domain + "::" + op
};

}  // namespace nxrt::ep
