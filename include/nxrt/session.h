// The public entry point: load a model, inspect its inputs and outputs, run it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nxrt/status.h"
#include "nxrt/tensor.h"

namespace nxrt {

enum class OptLevel { kDisabled = 0, kBasic = 1, kAll = 2 };

struct SessionOptions {
  int threads = 1;               // intra-op threads; 1 = no worker threads
  OptLevel opt_level = OptLevel::kAll;
  // Messages on stderr: 0 error, 1 warning, 2 info (a line per session: sizes, phase times, ISA tier),
  // 3 debug (what each optimizer pass did). -1: from NXRT_LOG (0-3 or error|warning|info|debug;
  // unset: 1).
  int log_level = -1;
  // Chrome-trace / Perfetto JSON of session phases and every executed node, written when the session
  // is destroyed. Empty: taken from the NXRT_TRACE environment variable (unset = off).
  std::string trace_path;
  // Print total time per op type to stderr when the session is destroyed (also NXRT_PROFILE_OPS=1).
  bool profile_ops = false;
  // Test and diagnosis only: forced kernel choices as key -> value, e.g. {"reference", "1"} or
  // {"isa", "avx2"}. Merged over NXRT_KERNEL_OVERRIDES ("k=v,k=v") and NXRT_ISA; an unknown key or
  // value fails session creation. `nxrt info --overrides` lists the keys (docs/ARCHITECTURE.md too).
  std::map<std::string, std::string> kernel_overrides;
  // Captured replay of steady bound steps (Session::run(IoBinding&) at unchanged shapes: a decode step
  // is recorded once and replayed; see docs/ARCHITECTURE.md). 1 on, 0 off, -1: from NXRT_CAPTURE
  // (unset: on). Outputs are bit-identical either way.
  int capture = -1;
  // Write the graph as optimized (before kernels are built) to this ONNX file; empty: don't. Fused
  // nodes are in nxrt's own domain, so the file is for nxrt (and for reading), not for other runtimes.
  std::string optimized_model_path;
  // The most bytes the session's buffer pool may hold (node outputs, kernel workspaces; not the
  // weights): an allocation that would exceed it fails the run with an error naming the node. 0: taken
  // from NXRT_MEMORY_LIMIT ("512M", "2G", a plain byte count; unset = no limit).
  size_t memory_limit = 0;
  // Outputs computed only at the positions the caller asks for, e.g. an LLM's logits during prefill
  // (the LM head then runs over one position per row instead of the whole sequence). For each name the
  // session adds the input `<name>_positions`, int64 [batch, k], and the output becomes [batch, k, n]:
  // row b holds the output at positions[b, 0..k) (negative counts from the end). The output must be a
  // per-position projection of a [batch, seq, hidden] value (MatMul / MatMulNBits, then optionally Cast,
  // Tanh, or Add/Sub/Mul/Div with a constant); otherwise creation fails with NotImplemented.
  std::vector<std::string> position_selected_outputs;
  // true: an output of position_selected_outputs the rewrite refuses keeps every position instead of
  // failing creation; Session::position_selected_outputs() lists the outputs that were rewritten.
  bool position_selection_optional = false;
  // The element type of the KV cache of com.microsoft::GroupQueryAttention nodes. kFloat16 on a
  // float32 model: their past_key / past_value graph inputs and present_key / present_value graph
  // outputs become float16 (half the cache's memory, and of the bytes a decode step reads from it;
  // attention still computes in float32 over the rounded rows). Nodes whose cache is not a plain graph
  // input/output pair keep their types; Session::kv_cache_retyped() lists what changed.
  // kUndefined: as the model declares. Any other type is an error at creation.
  DataType kv_cache_dtype = DataType::kUndefined;
  // The block scales com.microsoft::MatMulNBits nodes are packed with. kFloat16 on a model with float32
  // scales: each scale is rounded to the nearest float16 value (at most 2^-11 relative), so the int4
  // weights' packed records carry 2-byte scales, as in llama.cpp's Q4_0 (a Qwen2.5-0.5B-shape decode
  // step then reads 291 MB instead of 322); outputs move by about that rounding. A node whose scales
  // float16 cannot hold as normal numbers, or that are not a constant read only as MatMulNBits scales,
  // keeps them (log level info counts the nodes rounded). The rounded copies live until their node is
  // packed (Qwen2.5-0.5B shape: peak RSS at creation +51 MB, steady -35 MB). kUndefined: as the model
  // declares (scales that are all float16 values are packed as float16 anyway, losing nothing). Any
  // other type is an error at creation.
  DataType matmulnbits_scale_dtype = DataType::kUndefined;
  // Optimizer passes not to run, by name (ORT's disabled_optimizers): e.g. {"fuse_matmulnbits_silu_mul"}
  // to measure a fusion's effect in one process. A name that is no pass fails creation with an error
  // that lists the passes (optimizer_pass_names()).
  std::vector<std::string> disabled_optimizers;
};

// Declared type of a graph input or output.
struct ValueMeta {
  enum class Kind { kUnknown, kTensor, kSparseTensor, kSequence, kOptional, kMap };
  std::string name;
  Kind kind = Kind::kUnknown;
  DataType dtype = DataType::kUndefined;  // tensor element type (map: key type)
  bool has_shape = false;
  std::vector<int64_t> shape;             // -1 for a symbolic or unknown dim
  std::vector<std::string> dim_names;     // symbol per dim ("" when fixed or unnamed)
  std::shared_ptr<ValueMeta> inner;       // sequence/optional element, map value
  bool has_default = false;               // an initializer provides a default: feeding is optional
  std::string describe() const;
};

// The model's descriptive fields as stored in the file (ModelProto / GraphProto).
struct ModelMetadata {
  int64_t ir_version = 0;
  std::string producer_name;
  std::string producer_version;
  std::string domain;
  int64_t model_version = 0;
  std::string description;        // ModelProto.doc_string
  std::string graph_name;
  std::string graph_description;  // GraphProto.doc_string
  std::vector<std::pair<std::string, std::string>> custom;  // metadata_props, in file order
};

struct ModelSummary {
  int64_t ir_version = 0;
  std::string producer;
  std::vector<std::pair<std::string, int64_t>> opsets;  // domain ("" = ai.onnx), version
  std::vector<ValueMeta> inputs;
  std::vector<ValueMeta> outputs;
  std::map<std::string, int> op_histogram;              // "Conv" or "com.microsoft::Foo" -> count
  size_t num_nodes = 0;
  size_t num_initializers = 0;
  int64_t initializer_bytes = 0;
};

// Kernel cache counters (see docs/ARCHITECTURE.md, "Kernel cache").
struct KernelCacheStats {
  size_t entries = 0;          // shape variants held, over all nodes
  uint64_t hits = 0;           // lookups served by an existing variant after a search
  uint64_t misses = 0;         // lookups that specialized a new variant
  uint64_t prebound_hits = 0;  // lookups whose shapes equalled the node's last call (no search)
  uint64_t evictions = 0;      // variants dropped by the per-node bound
};

// Captured replay counters (see SessionOptions::capture).
struct CaptureStats {
  bool enabled = false;
  uint64_t eager_runs = 0;        // bound runs with every node eager (warm-up, a new shape, unsupported)
  uint64_t recorded_runs = 0;     // bound runs that ran eagerly while recording
  uint64_t replayed_runs = 0;     // bound runs served by replaying a record
  uint64_t replay_fallbacks = 0;  // replays that stopped early and finished the step eagerly
  uint64_t invalidations = 0;     // records dropped
  std::string last_invalidation;  // why the last record was dropped
  size_t captured_steps = 0;      // in the schedule last used: nodes a replay re-runs
  size_t seam_steps = 0;          //   and nodes that stay eager
  std::vector<std::string> slot_states;  // per slot: needs-warmup, armed, ready, unsupported
};

// Buffer pool counters: where node outputs and kernel workspaces live.
struct MemoryStats {
  size_t blocks = 0;          // blocks held by the pool (in use or free)
  size_t bytes = 0;           // bytes held by the pool
  uint64_t allocations = 0;   // blocks obtained from the system since creation
  uint64_t reuses = 0;        // requests served by an existing block
};

// Caller-bound inputs and outputs for Session::run(IoBinding&). Binding once and re-running performs
// no name lookups and, at unchanged shapes, no heap allocation.
class IoBinding {
 public:
  // Feeds input `name`; a tensor over caller memory (Tensor::borrow) is read in place. Returns an
  // index for set_input(). Binding a name again replaces its value.
  size_t bind_input(const std::string& name, Value value);
  void set_input(size_t index, Value value) { inputs_[index].value = std::move(value); }
  // Output `name` is written into `buffer`'s memory. The buffer may be larger than the output on one
  // axis (a fixed-capacity KV cache): the output is then the view of its leading part along that axis.
  // Binding an input and an output to the same memory (past/present KV) makes the kernel update it in
  // place.
  size_t bind_output(const std::string& name, Tensor buffer);
  // Output `name` is allocated by the runtime (from its pool); read it with output() after run.
  size_t bind_output(const std::string& name);
  // The value of a bound output after Session::run (a view of the bound buffer when one was given).
  const Value& output(size_t index) const { return outputs_[index].value; }
  const Value* output(const std::string& name) const;
  size_t num_outputs() const { return outputs_.size(); }
  const std::string& output_name(size_t index) const { return outputs_[index].name; }
  void clear();
  void clear_inputs();
  void clear_outputs();

 private:
  friend class Session;
  struct Input {
    std::string name;
    Value value;
  };
  struct Output {
    std::string name;
    bool has_buffer = false;
    Tensor buffer;
    Value value;
  };
  std::vector<Input> inputs_;
  std::vector<Output> outputs_;
  // Slots resolved by the session that last ran this binding (so re-runs skip name lookups).
  const void* resolved_for_ = nullptr;
  std::vector<int> input_slots_;
  std::vector<int> output_slots_;
};

class Session {
 public:
  static Result<std::unique_ptr<Session>> create(const std::string& model_path, const SessionOptions& opts = {});
  static Result<std::unique_ptr<Session>> create_from_bytes(const void* data, size_t size,
                                                            const SessionOptions& opts = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // All graph inputs (those with has_default may be omitted) and outputs, in graph order.
  const std::vector<ValueMeta>& inputs() const;
  const std::vector<ValueMeta>& outputs() const;

  // Runs the graph. feeds by input name; returns every graph output in graph order.
  Result<std::vector<Value>> run(const std::vector<std::pair<std::string, Value>>& feeds);
  // Runs and returns only the named outputs, in that order.
  Result<std::vector<Value>> run(const std::vector<std::pair<std::string, Value>>& feeds,
                                 const std::vector<std::string>& output_names);

  // Runs with caller-bound inputs and outputs (see IoBinding). Outputs bound without a buffer are
  // readable through binding.output() until the next run or until the binding is cleared.
  Status run(IoBinding& binding);

  KernelCacheStats kernel_cache_stats() const;
  CaptureStats capture_stats() const;
  // Drops every captured-replay record: call when the caller's sequence state moved (a rewind, a new
  // request), so the next steps warm up and record again.
  void reset_capture();
  // The captured-replay schedule: segments, eager seams and why, when the named (past input, present
  // output) pairs are bound to one fixed-capacity buffer each (as a generator binds its KV cache).
  std::string describe_capture(const std::vector<std::pair<std::string, std::string>>& shared_kv) const;
  MemoryStats memory_stats() const;
  const ModelMetadata& metadata() const;
  // The outputs of SessionOptions::position_selected_outputs that were rewritten (each with its input
  // `<name>_positions`), in the order asked; fewer than asked only with position_selection_optional.
  const std::vector<std::string>& position_selected_outputs() const;
  // The graph inputs and outputs SessionOptions::kv_cache_dtype retyped (empty without it).
  const std::vector<std::string>& kv_cache_retyped() const;

  // Writes the trace recorded so far (SessionOptions::trace_path or NXRT_TRACE) and stops tracing.
  // Returns the file written, or "" when the session was not tracing.
  Result<std::string> end_profiling();

  struct Impl;
  // Internal: sessions are made by create().
  explicit Session(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// What this build of nxrt can run: every kernel the CPU provider registers.
struct RegisteredKernel {
  std::string domain;  // "" = ai.onnx
  std::string op_type;
  int64_t since_version = 1;
  int64_t end_version = INT64_MAX;  // INT64_MAX: still current
  int inplace_input = -1;           // the input output 0 may overwrite, or -1
};
// Sorted by domain, op, opset.
std::vector<RegisteredKernel> registered_kernels();
// The CPU this process runs on: model, the SIMD features that matter, and the instruction-set tier
// kernels choose (NXRT_ISA caps it).
std::string cpu_summary();
// The tier kernels use in sessions made now, e.g. "avx2 (capped by isa=avx2)" under NXRT_ISA=avx2 on
// an AVX-512 CPU, or "amx (AMX tiles granted by the OS)"; errors: a malformed NXRT_ISA / overrides.
Result<std::string> kernel_tier_summary();
// The optimizer's passes by name, in the order they run: what SessionOptions::disabled_optimizers takes.
std::vector<std::string> optimizer_pass_names();
// The keys SessionOptions::kernel_overrides accepts: key, allowed values ("a|b"), what it does.
struct KernelOverrideKeyInfo {
  std::string key, values, what;
};
std::vector<KernelOverrideKeyInfo> kernel_override_keys();

// Reads a model's metadata without building kernels.
Result<ModelSummary> inspect_model(const std::string& model_path);
// Load-time shape inference results as text: one line per value ("name: float32[batch,seq,896]"),
// subgraph values indented, then symbol lineage ("same: a == b", "derived: unk__3 = batch*seq") and
// the ops that had no shape function. Errors are the inference's load errors.
Result<std::string> describe_model_shapes(const std::string& model_path);

// Test-data files (.pb): TensorProto, SequenceProto, OptionalProto or MapProto, chosen by `expected`
// (nullptr: TensorProto). `name` receives the proto's name.
Result<Value> read_value_file(const std::string& path, const ValueMeta* expected, std::string* name = nullptr);
Status write_value_file(const std::string& path, const Value& value, const std::string& name);

}  // namespace nxrt
