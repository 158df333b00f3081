#include "nxrt/session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <shared_mutex>
#include <unordered_set>

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "onnx/model_reader.h"
#include "onnx/model_writer.h"
#include "ops/cpu_provider.h"
#include "optimizer/optimizer.h"
#include "session/capture.h"
#include "session/executor.h"
#include "session/log.h"
#include "shape/shape_inference.h"
#include "session/type_meta.h"

namespace nxrt {

std::string ValueMeta::describe() const { return session::to_type_info(*this).describe(); }

struct Session::Impl {
  // The kernels: the CPU provider's registry, handed to the optimizer and the planner. The session is
  // the one place that names a provider; everything below it sees only ep::KernelRegistry.
  std::shared_ptr<const ep::KernelRegistry> registry;
  ep::KernelOverrides overrides;  // SessionOptions::kernel_overrides + NXRT_KERNEL_OVERRIDES / NXRT_ISA
  session::LogLevel log_level = session::LogLevel::kWarning;  // SessionOptions::log_level / NXRT_LOG
  std::unique_ptr<ir::Model> model;
  std::unique_ptr<session::GraphPlan> plan;
  std::unique_ptr<ep::ThreadPool> pool;
  std::vector<ValueMeta> inputs;
  std::vector<ValueMeta> outputs;
  ModelMetadata metadata;
  std::vector<std::string> position_selected;  // SessionOptions::position_selected_outputs rewritten
  std::vector<std::string> kv_cache_retyped;   // SessionOptions::kv_cache_dtype: the inputs/outputs retyped
  SessionOptions options;
  std::unique_ptr<session::Tracer> tracer;
  std::unique_ptr<session::OpProfile> profile;
  session::RunHooks hooks;
  std::atomic<size_t> runs{0};
  std::atomic<uint64_t> bound_eager_runs{0};  // bound runs that did not go through the capture controller
  // Concurrent runs. Every run holds `run_mu` shared, except a bound run that goes through captured
  // replay (and the calls that read or change capture state: capture_stats, reset_capture,
  // describe_capture, and end_profiling), which hold it exclusively. A run in flight owns one RunContext (frame, buffer
  // pool, binding scratch); kernels and their cached variants are shared (NodeKernelCache locks).
  mutable std::shared_mutex run_mu;
  session::KernelCacheConfig cache_config;
  session::MemoryBudget memory;
  struct RunContext {
    session::RunResources res;
    session::Frame frame;
    std::vector<session::BoundInput> bound_inputs;
    std::vector<session::BoundOutput> bound_outputs;
    // The counters as of this context's last finished run, copied under `contexts_mu` when the run
    // ends: kernel_cache_stats and memory_stats read these, so they never wait for runs in flight
    // (nor read counters a run is writing).
    KernelCacheStats finished_cache_stats;
    session::BufferPoolStats finished_pool_stats;
    explicit RunContext(session::MemoryBudget* budget) : res(budget) {}
  };
  // Every context made so far (the first one is the one captured replay uses), and the idle ones.
  // At most `max_run_contexts` exist; a run that finds none idle and the bound reached waits for one.
  std::mutex contexts_mu;
  std::condition_variable context_freed;
  std::vector<std::unique_ptr<RunContext>> contexts;
  std::vector<RunContext*> idle_contexts;
  size_t max_run_contexts = 8;
  // Per slot: the declared type of the graph input it holds (null for other slots), and whether it
  // is a graph output. Name checks on every run become index lookups.
  std::vector<const ValueMeta*> input_meta;
  std::vector<bool> output_slot;
  // Captured replay of bound runs (session/capture.h).
  std::unique_ptr<session::CaptureController> capture;

  RunContext* new_context() {
    auto c = std::make_unique<RunContext>(&memory);
    c->res.cache = &cache_config;
    c->frame.plan = plan.get();
    c->frame.slots.resize(plan->num_slots());
    c->frame.hooks = &hooks;
    c->frame.res = &c->res;
    contexts.push_back(std::move(c));
    return contexts.back().get();
  }
  RunContext* acquire_context() {
    std::unique_lock<std::mutex> lock(contexts_mu);
    while (idle_contexts.empty() && contexts.size() >= max_run_contexts) context_freed.wait(lock);
    if (idle_contexts.empty()) return new_context();
    RunContext* c = idle_contexts.back();
    idle_contexts.pop_back();
    return c;
  }
  // The end of a run in `c`: publishes its counters and, when the run took `c` from the idle list
  // (`owned`), gives it back.
  void finish_context(RunContext* c, bool owned) {
    {
      std::lock_guard<std::mutex> lock(contexts_mu);
      c->finished_cache_stats = c->res.cache_stats;
      c->finished_pool_stats = c->res.buffers.stats();
      if (owned) idle_contexts.push_back(c);
    }
    if (owned) context_freed.notify_one();
  }

  ~Impl() {
    if (tracer && !tracer->write()) std::fprintf(stderr, "nxrt: could not write trace %s\n", tracer->path().c_str());
    if (profile) std::fputs(profile->table().c_str(), stderr);
  }
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

namespace {
// Sets up tracing/profiling from options and environment before anything is timed.
void init_diagnostics(Session::Impl& impl) {
  std::string path = impl.options.trace_path;
  if (path.empty()) {
    if (const char* env = std::getenv("NXRT_TRACE")) path = env;
  }
  if (!path.empty()) impl.tracer = std::make_unique<session::Tracer>(path);
  const char* prof = std::getenv("NXRT_PROFILE_OPS");
  if (impl.options.profile_ops || (prof && *prof && std::string(prof) != "0")) {
    impl.profile = std::make_unique<session::OpProfile>();
  }
  impl.hooks.tracer = impl.tracer.get();
  impl.hooks.profile = impl.profile.get();
}
}  // namespace

// An initializer whose only reader packed it at creation and never reads its bytes again: the tensor
// keeps its dtype and shape (what that kernel may still check) over an inaccessible reservation, so the
// bytes are freed (folded weights: the heap block; a peak of weights plus packed copies no longer
// lasts the session) and a stray read faults at once instead of computing with stale data.
static Tensor released_initializer(const Tensor& t) {
  const size_t bytes = std::max<size_t>(1, t.nbytes());
  // Bytes borrowed from the model's file mapping stay resident after the last reference goes (the
  // mapping lives on): drop the pages lying wholly inside this tensor. They are clean file pages of
  // a private mapping, so should anything else map the same bytes it re-reads them from the file.
  if (t.storage() && !t.storage()->owned() && t.nbytes() > 0) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t lo = reinterpret_cast<uintptr_t>(t.raw_data()), hi = lo + t.nbytes();
    const uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;
    if (b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
  }
  void* p = mmap(nullptr, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return t;  // keep the bytes rather than fail
  std::shared_ptr<void> keep(p, [bytes](void* q) { munmap(q, bytes); });
  return Tensor::borrow(t.dtype(), t.shape(), p, std::move(keep));
}

static ModelMetadata metadata_of(const ir::Model& m) {
  ModelMetadata md;
  md.ir_version = m.ir_version;
  md.producer_name = m.producer_name;
  md.producer_version = m.producer_version;
  md.domain = m.domain;
  md.model_version = m.model_version;
  md.description = m.doc;
  md.graph_name = m.graph.name;
  md.graph_description = m.graph.doc;
  md.custom = m.metadata_props;
  return md;
}

static Result<std::unique_ptr<Session>> make_session(const std::function<Result<std::unique_ptr<ir::Model>>()>& load,
                                                     const SessionOptions& opts) {
  auto impl = std::make_unique<Session::Impl>();
  impl->options = opts;
  impl->registry = ops::cpu_provider_registry();
  NXRT_ASSIGN_OR_RETURN(impl->overrides, ep::KernelOverrides::from_options_and_env(opts.kernel_overrides));
  NXRT_ASSIGN_OR_RETURN(impl->log_level, session::resolve_log_level(opts.log_level));
  init_diagnostics(*impl);
  const double t_start = session::monotonic_us();
  double t0 = t_start;
  auto loaded = load();
  if (impl->tracer) impl->tracer->span("load", "session", t0, session::monotonic_us() - t0, "");
  if (!loaded.ok()) return loaded.status();
  impl->model = std::move(loaded).value();
  impl->metadata = metadata_of(*impl->model);
  // Load-time shape inference over the graph and its subgraphs (results on Graph::shape_facts); an
  // inconsistent model is rejected here, naming the original node.
  NXRT_RETURN_IF_ERROR(shape::infer_shapes(*impl->model));
  if (!opts.position_selected_outputs.empty()) {
    // A change of the graph's interface the caller asked for, made at every optimization level.
    NXRT_ASSIGN_OR_RETURN(impl->position_selected,
                          optimizer::select_output_positions(*impl->model, opts.position_selected_outputs,
                                                             opts.position_selection_optional));
    NXRT_RETURN_IF_ERROR(shape::infer_shapes(*impl->model));
  }
  if (opts.kv_cache_dtype != DataType::kUndefined) {
    // Also an interface change the caller asked for, at every optimization level.
    NXRT_ASSIGN_OR_RETURN(impl->kv_cache_retyped, optimizer::retype_attention_caches(*impl->model, opts.kv_cache_dtype));
    if (!impl->kv_cache_retyped.empty()) NXRT_RETURN_IF_ERROR(shape::infer_shapes(*impl->model));
  }
  if (opts.matmulnbits_scale_dtype != DataType::kUndefined) {
    // Before the optimizer, whose fusions carry the scales into nxrt's fused MatMulNBits ops; at every
    // level (the caller asked for it).
    NXRT_ASSIGN_OR_RETURN(optimizer::NbitsScalesRounded r,
                          optimizer::round_matmulnbits_scales(*impl->model, opts.matmulnbits_scale_dtype));
    // The originals' file pages, read once to round them, would otherwise stay resident beside the
    // copies (Qwen2.5-0.5B: 62 MB of float32 scales; peak RSS 453 -> 572 MB before this).
    for (const Tensor& t : r.replaced) released_initializer(t);
    session::log_message(impl->log_level, session::LogLevel::kInfo,
                         "matmulnbits_scale_dtype: of " + std::to_string(r.nodes) + " MatMulNBits nodes, " +
                             std::to_string(r.rounded) + " had their scales rounded to float16 values, " +
                             std::to_string(r.float16) + " had float16 values already, " +
                             std::to_string(r.nodes - r.rounded - r.float16) + " keep theirs");
  }
  const size_t nodes_loaded = impl->model->graph.nodes.size();
  const double t_shapes = session::monotonic_us();
  double t_optimized = t_shapes;
  {
    // NXRT_OPT_LEVEL overrides the option (conformance runs at each level).
    optimizer::Options oo;
    Result<OptLevel> level = optimizer::opt_level_from_env(opts.opt_level);
    if (!level.ok()) return level.status();
    oo.level = level.value();
    oo.registry = impl->registry.get();
    oo.disabled = opts.disabled_optimizers;
    oo.isa = impl->overrides.isa();
    oo.reference_kernels = impl->overrides.reference();
    optimizer::Stats stats;
    t0 = session::monotonic_us();
    {
      // Folded constants are weights the session keeps: large ones come zeroed from fresh mappings.
      Storage::LongLivedScope long_lived;
      NXRT_RETURN_IF_ERROR(optimizer::optimize(*impl->model, oo, &stats));
    }
    if (impl->tracer) impl->tracer->span("optimize", "session", t0, session::monotonic_us() - t0, "");
    if (std::getenv("NXRT_OPT_STATS")) std::fprintf(stderr, "nxrt optimizer: %s\n", stats.summary().c_str());
    session::log_message(impl->log_level, session::LogLevel::kDebug, "optimizer: " + stats.summary());
    // The facts describe the graph that runs: infer again over the rewritten graph.
    if (oo.level != OptLevel::kDisabled) NXRT_RETURN_IF_ERROR(shape::infer_shapes(*impl->model));
    t_optimized = session::monotonic_us();
  }
  if (opts.matmulnbits_scale_dtype != DataType::kUndefined) {
    // Again after the optimizer, which may have made MatMulNBits nodes (DequantizeLinear + MatMul).
    NXRT_ASSIGN_OR_RETURN(optimizer::NbitsScalesRounded r,
                          optimizer::round_matmulnbits_scales(*impl->model, opts.matmulnbits_scale_dtype));
    for (const Tensor& t : r.replaced) released_initializer(t);
    if (r.rounded > 0) {
      session::log_message(impl->log_level, session::LogLevel::kInfo,
                           "matmulnbits_scale_dtype: the scales of " + std::to_string(r.rounded) +
                               " MatMulNBits nodes the optimizer made rounded to float16 values");
    }
  }
  if (std::string missing = shape::describe_ops_without_shape_fn(impl->model->graph); !missing.empty()) {
    for (char& c : missing) c = c == '\n' ? ',' : c;
    missing.pop_back();
    session::log_message(impl->log_level, session::LogLevel::kInfo,
                         "no shape rule for these ops (op count): " + missing +
                             "; values after them get their shapes at run time");
  }
  // Written before planning: kernels may release the initializers they packed.
  if (!opts.optimized_model_path.empty()) {
    NXRT_RETURN_IF_ERROR(onnx::write_model_file(opts.optimized_model_path, *impl->model)
                             .with_context("writing the optimized model: "));
  }
  const ir::Graph& g = impl->model->graph;
  for (const auto& in : g.inputs) {
    ValueMeta m = session::to_value_meta(in.name, in.type);
    m.has_default = g.initializers.count(in.name) != 0;
    impl->inputs.push_back(std::move(m));
  }
  for (const auto& out : g.outputs) impl->outputs.push_back(session::to_value_meta(out.name, out.type));
  session::PlanEnv env{impl->model.get(), impl->registry.get(), &impl->overrides, {}};
  if (!std::getenv("NXRT_KEEP_PACKED_INITIALIZERS")) {
    ir::Graph& mg = impl->model->graph;
    env.release_initializer = [&mg](const std::string& name) {
      auto it = mg.initializers.find(name);
      if (it != mg.initializers.end() && it->second.dtype() != DataType::kString) it->second = released_initializer(it->second);
    };
  }
  t0 = session::monotonic_us();
  NXRT_ASSIGN_OR_RETURN(impl->plan, session::GraphPlan::build(g, env, {}));
#if defined(__GLIBC__)
  // Packing the weights freed many temporaries (a node's scales and zero points as floats, up to 17 MB
  // for a vocabulary-sized LM head); after glibc frees a large mapped block it raises its mmap threshold,
  // so later ones of that size came from the heap, whose freed pages stay with the process. Hand them
  // back once: Qwen2.5-0.5B-shape folder with --weight-scales float16, steady RSS 390 -> 313 MB (heap
  // 100 -> 23 MB); 347 MB either way without it.
  malloc_trim(0);
#endif
  if (impl->tracer) {
    impl->tracer->span("plan", "session", t0, session::monotonic_us() - t0,
                       "\"steps\":" + std::to_string(impl->plan->num_steps()));
  }
  const bool exact_pool = impl->overrides.get("pool") == "exact";
  if (exact_pool && opts.threads > ep::ThreadPool::kMaxExactThreads) {
    return invalid_argument("kernel override pool=exact takes at most " + std::to_string(ep::ThreadPool::kMaxExactThreads) +
                            " threads; SessionOptions::threads is " + std::to_string(opts.threads));
  }
  impl->pool = std::make_unique<ep::ThreadPool>(
      opts.threads, exact_pool ? ep::ThreadPool::Sizing::kExact : ep::ThreadPool::Sizing::kCappedByCpus);
  if (const char* v = std::getenv("NXRT_KERNEL_CACHE_VARIANTS_PER_NODE")) {
    long n = std::strtol(v, nullptr, 10);
    if (n > 0) impl->cache_config.variants_per_node = static_cast<size_t>(n);
  }
  if (const char* v = std::getenv("NXRT_MAX_CONCURRENT_RUNS")) {
    long n = std::strtol(v, nullptr, 10);
    if (n > 0) impl->max_run_contexts = static_cast<size_t>(n);
  }
  impl->idle_contexts.push_back(impl->new_context());
  // A run short of memory under the limit frees what idle contexts' pools keep (an idle context is
  // only taken under contexts_mu, so no run uses it meanwhile).
  impl->memory.reclaim_idle = [im = impl.get()] {
    std::lock_guard<std::mutex> lock(im->contexts_mu);
    for (Session::Impl::RunContext* c : im->idle_contexts) {
      c->res.buffers.trim();
      c->finished_pool_stats = c->res.buffers.stats();
    }
  };
  impl->input_meta.assign(impl->plan->num_slots(), nullptr);
  impl->output_slot.assign(impl->plan->num_slots(), false);
  for (const auto& m : impl->inputs) impl->input_meta[static_cast<size_t>(impl->plan->slot(m.name))] = &m;
  for (const auto& m : impl->outputs) impl->output_slot[static_cast<size_t>(impl->plan->slot(m.name))] = true;
  bool capture = opts.capture != 0;
  if (opts.capture < 0) {
    const char* e = std::getenv("NXRT_CAPTURE");
    capture = !e || std::string(e) != "0";
  }
  impl->capture = std::make_unique<session::CaptureController>(*impl->plan, capture,
                                                                session::classifier_mode_from_env());
  impl->cache_config.eviction_listener = impl->capture.get();
  size_t memory_limit = opts.memory_limit;
  if (const char* env = std::getenv("NXRT_MEMORY_LIMIT"); env && *env && memory_limit == 0) {
    NXRT_ASSIGN_OR_RETURN(memory_limit, session::parse_byte_size(env, "NXRT_MEMORY_LIMIT"));
  }
  impl->memory.limit = memory_limit;
  if (impl->log_level >= session::LogLevel::kInfo) {
    const double t_end = session::monotonic_us();
    char line[320];
    std::snprintf(line, sizeof line,
                  "session created in %.1f ms: %zu nodes (%zu after optimization), %zu steps; load + shapes %.1f ms, "
                  "optimize %.1f ms, plan %.1f ms; %d threads; kernels at ISA tier %s",
                  (t_end - t_start) / 1e3, nodes_loaded, impl->model->graph.nodes.size(), impl->plan->num_steps(),
                  (t_shapes - t_start) / 1e3, (t_optimized - t_shapes) / 1e3, (t_end - t_optimized) / 1e3,
                  opts.threads, ep::isa_tier_name(impl->overrides.isa()));
    session::log_message(impl->log_level, session::LogLevel::kInfo, line);
  }
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

// An allocation that fails outside a kernel (loading, optimizing, planning, binding feeds) ends the
// call with an error, like one inside a kernel does (GraphPlan::execute).
static Status allocation_failed(const char* during, const std::bad_alloc& e) {
  return runtime_error(std::string("out of memory ") + during + ": " + e.what());
}

Result<std::unique_ptr<Session>> Session::create(const std::string& model_path, const SessionOptions& opts) try {
  return make_session([&] { return onnx::load_model_file(model_path); }, opts);
} catch (const std::bad_alloc& e) {
  return allocation_failed("while creating the session", e);
}

Result<std::unique_ptr<Session>> Session::create_from_bytes(const void* data, size_t size,
                                                            const SessionOptions& opts) try {
  // The session keeps its own copy: initializers point into these bytes, and the caller's buffer may
  // not outlive the session.
  auto copy = std::shared_ptr<char[]>(new char[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  return make_session([&] { return onnx::load_model_bytes(copy.get(), size, copy, ""); }, opts);
} catch (const std::bad_alloc& e) {
  return allocation_failed("while creating the session", e);
}

const std::vector<ValueMeta>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueMeta>& Session::outputs() const { return impl_->outputs; }

Result<std::vector<Value>> Session::run(const std::vector<std::pair<std::string, Value>>& feeds) {
  std::vector<std::string> names;
  for (const auto& o : impl_->outputs) names.push_back(o.name);
  return run(feeds, names);
}

namespace {
// A run context of the session, held for one run: whatever happens in the run, the frame is left
// empty (and unbound) for the next run that takes the context, the buffer pool's run boundary is
// marked, and the context goes back to the idle list.
class ContextLease {
 public:
  // `ctx` given: a context the caller may use without taking it from the idle list (the exclusive
  // lock is held, so no other run is in flight).
  ContextLease(Session::Impl& impl, Session::Impl::RunContext* ctx = nullptr)
      : impl_(impl), ctx_(ctx ? ctx : impl.acquire_context()), owned_(ctx == nullptr) {
    impl_.memory.run_started();
  }
  ~ContextLease() {
    session::GraphPlan::clear_frame(ctx_->frame);
    for (auto& p : ctx_->frame.bound) p = nullptr;
    ctx_->res.buffers.end_run();
    impl_.finish_context(ctx_, owned_);
    impl_.memory.run_ended();  // after the context is idle: a run waiting for memory can reclaim it
  }
  ContextLease(const ContextLease&) = delete;
  ContextLease& operator=(const ContextLease&) = delete;
  Session::Impl::RunContext& operator*() const { return *ctx_; }
  Session::Impl::RunContext* operator->() const { return ctx_; }

 private:
  Session::Impl& impl_;
  Session::Impl::RunContext* ctx_;
  bool owned_;
};

// The graph-input metadata for `name`, or null when it is not a graph input.
const ValueMeta* input_meta_of(const Session::Impl& impl, const std::string& name) {
  const int s = impl.plan->slot(name);
  return s < 0 ? nullptr : impl.input_meta[static_cast<size_t>(s)];
}
// A view output (a Slice, Transpose, ... that the graph returns) made contiguous in the run's buffer
// pool, where the caller's dropped outputs come back to: not in a fresh heap block each run, which for
// a large output is a new mapping faulted in and zeroed every run (a 52 MB Slice output: 219 ms a run
// on the Zen 5 VM, for 32 us of graph).
Value materialized(session::Frame& frame, Value v) {
  if (!v.is_tensor() || v.tensor().is_contiguous()) return v;
  Result<Tensor> c = session::pooled_copy(frame.res ? &frame.res->buffers : nullptr, v.tensor());
  return c.ok() ? Value(std::move(c).value()) : Value(v.tensor().contiguous());
}

bool is_output_name(const Session::Impl& impl, const std::string& name) {
  const int s = impl.plan->slot(name);
  return s >= 0 && impl.output_slot[static_cast<size_t>(s)];
}
}  // namespace

static Status execute_frame(Session::Impl& impl, session::Frame& frame, const session::BindingView* bound);

Result<std::vector<Value>> Session::run(const std::vector<std::pair<std::string, Value>>& feeds,
                                        const std::vector<std::string>& output_names) try {
  std::shared_lock<std::shared_mutex> lock(impl_->run_mu);
  const session::GraphPlan& plan = *impl_->plan;
  ContextLease ctx(*impl_);
  session::Frame& frame = ctx->frame;
  std::unordered_set<std::string> fed;
  for (const auto& [name, value] : feeds) {
    const ValueMeta* meta = input_meta_of(*impl_, name);
    if (!meta) return invalid_argument("feed '" + name + "' is not an input of the model");
    if (!fed.insert(name).second) return invalid_argument("input '" + name + "' is fed twice");
    NXRT_RETURN_IF_ERROR(session::check_feed(*meta, value));
    frame.slots[static_cast<size_t>(plan.slot(name))] = value;
  }
  for (const auto& m : impl_->inputs) {
    if (!fed.count(m.name) && !m.has_default) {
      return invalid_argument("input '" + m.name + "' (" + m.describe() + ") is required but was not fed");
    }
  }
  std::vector<int> out_slots;
  for (const auto& name : output_names) {
    if (!is_output_name(*impl_, name)) return invalid_argument("'" + name + "' is not an output of the model");
    out_slots.push_back(plan.slot(name));
  }
  NXRT_RETURN_IF_ERROR(execute_frame(*impl_, frame, nullptr));
  std::vector<Value> outs;
  for (int s : out_slots) {
    Value v = frame.slots[static_cast<size_t>(s)];
    // Views never reach the caller un-materialized.
    outs.push_back(materialized(frame, std::move(v)));
  }
  return outs;
} catch (const std::bad_alloc& e) {
  return allocation_failed("during the run", e);
}

// `bound`: the binding of a bound run that goes through captured replay (the caller holds the
// exclusive lock); null: an eager run (feeds, or a bound run beside others).
static Status execute_frame(Session::Impl& impl, session::Frame& frame, const session::BindingView* bound) {
  Session::Impl* impl_ = &impl;
  ep::ThreadPool::CallerScope in_flight(*impl.pool);  // concurrent runs compute inline, one thread each
  double t0 = session::monotonic_us();
  Status st;
  const CaptureStats before = impl_->tracer && bound ? impl_->capture->stats() : CaptureStats();
  if (bound) {
    st = impl_->capture->run(*bound, frame, *impl_->pool);
  } else {
    st = impl_->plan->prepare_frame(frame);
    if (st.ok()) st = impl_->plan->execute(frame, *impl_->pool);
  }
  const size_t run = impl_->runs.fetch_add(1, std::memory_order_relaxed);
  if (impl_->tracer) {
    std::string args = "\"run\":" + std::to_string(run) + ",\"steps\":" + std::to_string(impl_->plan->num_steps());
    if (bound) {
      const CaptureStats after = impl_->capture->stats();
      const char* how = after.replayed_runs > before.replayed_runs       ? "replay"
                        : after.replay_fallbacks > before.replay_fallbacks ? "replay, finished eagerly"
                        : after.recorded_runs > before.recorded_runs     ? "recording"
                                                                         : "eager";
      args += ",\"capture\":\"" + std::string(how) + "\"";
    }
    impl_->tracer->span(run == 0 ? "first run" : "run", "session", t0, session::monotonic_us() - t0, args);
  }
  return st;
}

Status Session::run(IoBinding& b) try {
  // Captured replay keeps one set of records per session: a bound run uses it when it can have the
  // session to itself right away; beside other runs it runs eagerly (same results, no replay).
  std::unique_lock<std::shared_mutex> exclusive(impl_->run_mu, std::defer_lock);
  std::shared_lock<std::shared_mutex> shared(impl_->run_mu, std::defer_lock);
  if (!impl_->capture->enabled() || !exclusive.try_lock()) shared.lock();
  const bool captured = exclusive.owns_lock();
  const session::GraphPlan& plan = *impl_->plan;
  if (b.resolved_for_ != this) {
    b.input_slots_.clear();
    b.output_slots_.clear();
    std::unordered_set<std::string> fed;
    for (const auto& in : b.inputs_) {
      if (!input_meta_of(*impl_, in.name)) return invalid_argument("bound input '" + in.name + "' is not an input of the model");
      fed.insert(in.name);
      b.input_slots_.push_back(plan.slot(in.name));
    }
    for (const auto& m : impl_->inputs) {
      if (!fed.count(m.name) && !m.has_default) {
        return invalid_argument("input '" + m.name + "' (" + m.describe() + ") is required but was not bound");
      }
    }
    for (const auto& out : b.outputs_) {
      if (!is_output_name(*impl_, out.name)) return invalid_argument("bound output '" + out.name + "' is not an output of the model");
      b.output_slots_.push_back(plan.slot(out.name));
    }
    b.resolved_for_ = this;
  }
  // Captured replay always runs in the first context: its records hold that context's pool blocks.
  ContextLease ctx(*impl_, captured ? impl_->contexts.front().get() : nullptr);
  session::Frame& frame = ctx->frame;
  for (size_t i = 0; i < b.inputs_.size(); ++i) {
    const ValueMeta* meta = impl_->input_meta[static_cast<size_t>(b.input_slots_[i])];
    NXRT_RETURN_IF_ERROR(session::check_feed(*meta, b.inputs_[i].value));
    frame.slots[static_cast<size_t>(b.input_slots_[i])] = b.inputs_[i].value;
  }
  if (frame.bound.size() != plan.num_slots()) frame.bound.assign(plan.num_slots(), nullptr);
  for (size_t k = 0; k < b.outputs_.size(); ++k) {
    b.outputs_[k].value = Value();
    if (b.outputs_[k].has_buffer) frame.bound[static_cast<size_t>(b.output_slots_[k])] = &b.outputs_[k].buffer;
  }
  Status run_status;
  if (captured) {
    // What the capture controller compares against its records (vectors keep their capacity).
    ctx->bound_inputs.resize(b.inputs_.size());
    for (size_t i = 0; i < b.inputs_.size(); ++i) ctx->bound_inputs[i] = {b.input_slots_[i], &b.inputs_[i].value};
    ctx->bound_outputs.resize(b.outputs_.size());
    for (size_t k = 0; k < b.outputs_.size(); ++k) {
      ctx->bound_outputs[k] = {b.output_slots_[k], b.outputs_[k].has_buffer ? &b.outputs_[k].buffer : nullptr};
    }
    const session::BindingView view{&b, ctx->bound_inputs.data(), ctx->bound_inputs.size(),
                                    ctx->bound_outputs.data(), ctx->bound_outputs.size()};
    run_status = execute_frame(*impl_, frame, &view);
  } else {
    impl_->bound_eager_runs.fetch_add(1, std::memory_order_relaxed);
    run_status = execute_frame(*impl_, frame, nullptr);
  }
  NXRT_RETURN_IF_ERROR(run_status);
  for (size_t k = 0; k < b.outputs_.size(); ++k) {
    auto& out = b.outputs_[k];
    Value v = frame.slots[static_cast<size_t>(b.output_slots_[k])];
    if (out.has_buffer && v.is_tensor() && v.tensor().storage() != out.buffer.storage()) {
      // An output no node wrote into the buffer (a graph input or initializer passed through).
      const Tensor& t = v.tensor();
      if (t.dtype() != out.buffer.dtype() || t.shape() != out.buffer.shape() || t.dtype() == DataType::kString) {
        return invalid_argument("output '" + out.name + "' is " + t.describe() + ", which cannot be written into the bound " +
                                out.buffer.describe());
      }
      Tensor c = t.contiguous();
      std::memcpy(out.buffer.raw_data(), c.raw_data(), c.nbytes());
      v = Value(out.buffer);
    }
    if (!out.has_buffer) v = materialized(frame, std::move(v));
    out.value = std::move(v);
  }
  return Status::Ok();
} catch (const std::bad_alloc& e) {
  return allocation_failed("during the run", e);
}

// Counters of finished runs: read without waiting for the runs in flight (each context publishes
// its counters when its run ends, finish_context).
KernelCacheStats Session::kernel_cache_stats() const {
  KernelCacheStats s;
  {
    std::lock_guard<std::mutex> lock(impl_->contexts_mu);
    for (const auto& c : impl_->contexts) {
      const KernelCacheStats& r = c->finished_cache_stats;
      s.hits += r.hits;
      s.misses += r.misses;
      s.prebound_hits += r.prebound_hits;
      s.evictions += r.evictions;
    }
  }
  s.entries = 0;
  impl_->plan->for_each_cache([&](const session::NodeKernelCache& c) {
    std::shared_lock<std::shared_mutex> lock(c.mu);
    s.entries += c.variants.size();
  });
  return s;
}

MemoryStats Session::memory_stats() const {
  std::lock_guard<std::mutex> lock(impl_->contexts_mu);
  MemoryStats m;
  for (const auto& c : impl_->contexts) {
    const session::BufferPoolStats& p = c->finished_pool_stats;
    m.blocks += p.blocks;
    m.bytes += p.bytes;
    m.allocations += p.allocations;
    m.reuses += p.reuses;
  }
  return m;
}

// The calls below read or change capture state, which only a run holding the session alone uses:
// they wait for the runs in flight.
CaptureStats Session::capture_stats() const {
  std::unique_lock<std::shared_mutex> lock(impl_->run_mu);
  impl_->capture->apply_pending_evictions();
  CaptureStats st = impl_->capture->stats();
  st.eager_runs += impl_->bound_eager_runs.load(std::memory_order_relaxed);
  return st;
}

void Session::reset_capture() {
  std::unique_lock<std::shared_mutex> lock(impl_->run_mu);
  impl_->capture->apply_pending_evictions();
  impl_->capture->reset("the caller reset (rewind or a new sequence)");
}

std::string Session::describe_capture(const std::vector<std::pair<std::string, std::string>>& shared_kv) const {
  std::unique_lock<std::shared_mutex> lock(impl_->run_mu);
  std::vector<session::SharedKvPair> pairs;
  for (const auto& [past, present] : shared_kv) pairs.push_back({past, present});
  return impl_->capture->describe(pairs);
}

const ModelMetadata& Session::metadata() const { return impl_->metadata; }
const std::vector<std::string>& Session::position_selected_outputs() const { return impl_->position_selected; }
const std::vector<std::string>& Session::kv_cache_retyped() const { return impl_->kv_cache_retyped; }

Result<std::string> Session::end_profiling() {
  std::unique_lock<std::shared_mutex> lock(impl_->run_mu);
  if (!impl_->tracer) return std::string();
  const std::string path = impl_->tracer->path();
  const bool written = impl_->tracer->write();
  impl_->hooks.tracer = nullptr;
  impl_->tracer.reset();
  if (!written) return io_error("could not write trace '" + path + "'");
  return path;
}

size_t IoBinding::bind_input(const std::string& name, Value value) {
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (inputs_[i].name == name) {
      inputs_[i].value = std::move(value);
      return i;
    }
  }
  inputs_.push_back({name, std::move(value)});
  resolved_for_ = nullptr;
  return inputs_.size() - 1;
}

size_t IoBinding::bind_output(const std::string& name, Tensor buffer) {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i].name == name) {
      outputs_[i].has_buffer = true;
      outputs_[i].buffer = std::move(buffer);
      return i;
    }
  }
  Output o;
  o.name = name;
  o.has_buffer = true;
  o.buffer = std::move(buffer);
  outputs_.push_back(std::move(o));
  resolved_for_ = nullptr;
  return outputs_.size() - 1;
}

size_t IoBinding::bind_output(const std::string& name) {
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (outputs_[i].name == name) {
      outputs_[i].has_buffer = false;
      outputs_[i].buffer = Tensor();
      return i;
    }
  }
  Output o;
  o.name = name;
  outputs_.push_back(std::move(o));
  resolved_for_ = nullptr;
  return outputs_.size() - 1;
}

const Value* IoBinding::output(const std::string& name) const {
  for (const auto& o : outputs_) {
    if (o.name == name) return &o.value;
  }
  return nullptr;
}

void IoBinding::clear() {
  inputs_.clear();
  outputs_.clear();
  resolved_for_ = nullptr;
}

void IoBinding::clear_inputs() {
  inputs_.clear();
  resolved_for_ = nullptr;
}

void IoBinding::clear_outputs() {
  outputs_.clear();
  resolved_for_ = nullptr;
}

Result<ModelSummary> inspect_model(const std::string& model_path) {
  NXRT_ASSIGN_OR_RETURN(auto model, onnx::load_model_file(model_path));
  ModelSummary s;
  s.ir_version = model->ir_version;
  s.producer = model->producer_name + (model->producer_version.empty() ? "" : " " + model->producer_version);
  for (const auto& o : model->opset_imports) s.opsets.push_back({ir::canonical_domain(o.domain), o.version});
  const ir::Graph& g = model->graph;
  for (const auto& in : g.inputs) {
    ValueMeta m = session::to_value_meta(in.name, in.type);
    m.has_default = g.initializers.count(in.name) != 0;
    s.inputs.push_back(std::move(m));
  }
  for (const auto& out : g.outputs) s.outputs.push_back(session::to_value_meta(out.name, out.type));
  for (const auto& n : g.nodes) {
    s.op_histogram[n.domain.empty() ? n.op_type : n.domain + "::" + n.op_type]++;
  }
  s.num_nodes = g.nodes.size();
  s.num_initializers = g.initializers.size();
  for (const auto& [n, t] : g.initializers) s.initializer_bytes += static_cast<int64_t>(t.nbytes());
  return s;
}

Result<std::string> describe_model_shapes(const std::string& model_path) {
  NXRT_ASSIGN_OR_RETURN(auto model, onnx::load_model_file(model_path));
  NXRT_RETURN_IF_ERROR(shape::infer_shapes(*model));
  std::string s = shape::describe_shapes(model->graph);
  std::string missing = shape::describe_ops_without_shape_fn(model->graph);
  if (!missing.empty()) s += "ops without a shape function:\n" + missing;
  return s;
}

Result<Value> read_value_file(const std::string& path, const ValueMeta* expected, std::string* name) {
  if (!expected) return onnx::read_value_pb(path, nullptr, name);
  ir::TypeInfo t = session::to_type_info(*expected);
  return onnx::read_value_pb(path, &t, name);
}

Status write_value_file(const std::string& path, const Value& value, const std::string& name) {
  return onnx::write_value_pb(path, value, name);
}

}  // namespace nxrt
