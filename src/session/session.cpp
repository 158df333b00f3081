#include "nxrt/session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <unordered_set>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "onnx/model_reader.h"
#include "session/executor.h"
#include "session/shape_inference.h"
#include "session/type_meta.h"

namespace nxrt {

std::string ValueMeta::describe() const { return session::to_type_info(*this).describe(); }

struct Session::Impl {
  std::unique_ptr<ir::Model> model;
  std::unique_ptr<session::GraphPlan> plan;
  std::unique_ptr<ep::ThreadPool> pool;
  std::vector<ValueMeta> inputs;
  std::vector<ValueMeta> outputs;
  SessionOptions options;
  std::unique_ptr<session::Tracer> tracer;
  std::unique_ptr<session::OpProfile> profile;
  session::RunHooks hooks;
  size_t runs = 0;

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

static Result<std::unique_ptr<Session>> make_session(const std::function<Result<std::unique_ptr<ir::Model>>()>& load,
                                                     const SessionOptions& opts) {
  auto impl = std::make_unique<Session::Impl>();
  impl->options = opts;
  init_diagnostics(*impl);
  double t0 = session::monotonic_us();
  auto loaded = load();
  if (impl->tracer) impl->tracer->span("load", "session", t0, session::monotonic_us() - t0, "");
  if (!loaded.ok()) return loaded.status();
  impl->model = std::move(loaded).value();
  // Load-time shape inference over the graph and its subgraphs (results on Graph::shape_facts).
  NXRT_RETURN_IF_ERROR(session::infer_shapes(*impl->model));
  const ir::Graph& g = impl->model->graph;
  for (const auto& in : g.inputs) {
    ValueMeta m = session::to_value_meta(in.name, in.type);
    m.has_default = g.initializers.count(in.name) != 0;
    impl->inputs.push_back(std::move(m));
  }
  for (const auto& out : g.outputs) impl->outputs.push_back(session::to_value_meta(out.name, out.type));
  session::PlanEnv env{impl->model.get(), &ep::KernelRegistry::cpu()};
  t0 = session::monotonic_us();
  NXRT_ASSIGN_OR_RETURN(impl->plan, session::GraphPlan::build(g, env, {}));
  if (impl->tracer) impl->tracer->span("plan", "session", t0, session::monotonic_us() - t0, "");
  impl->pool = std::make_unique<ep::ThreadPool>(opts.threads);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Result<std::unique_ptr<Session>> Session::create(const std::string& model_path, const SessionOptions& opts) {
  return make_session([&] { return onnx::load_model_file(model_path); }, opts);
}

Result<std::unique_ptr<Session>> Session::create_from_bytes(const void* data, size_t size, const SessionOptions& opts) {
  // The session keeps its own copy: initializers point into these bytes, and the caller's buffer may
  // not outlive the session.
  auto copy = std::shared_ptr<char[]>(new char[size > 0 ? size : 1]);
  if (size > 0) std::memcpy(copy.get(), data, size);
  return make_session([&] { return onnx::load_model_bytes(copy.get(), size, copy, ""); }, opts);
}

const std::vector<ValueMeta>& Session::inputs() const { return impl_->inputs; }
const std::vector<ValueMeta>& Session::outputs() const { return impl_->outputs; }

Result<std::vector<Value>> Session::run(const std::vector<std::pair<std::string, Value>>& feeds) {
  std::vector<std::string> names;
  for (const auto& o : impl_->outputs) names.push_back(o.name);
  return run(feeds, names);
}

Result<std::vector<Value>> Session::run(const std::vector<std::pair<std::string, Value>>& feeds,
                                        const std::vector<std::string>& output_names) {
  const session::GraphPlan& plan = *impl_->plan;
  session::Frame frame;
  frame.plan = &plan;
  frame.slots.assign(plan.num_slots(), Value());
  std::unordered_set<std::string> fed;
  for (const auto& [name, value] : feeds) {
    const ValueMeta* meta = nullptr;
    for (const auto& m : impl_->inputs) {
      if (m.name == name) meta = &m;
    }
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
  frame.hooks = &impl_->hooks;
  double t0 = session::monotonic_us();
  NXRT_RETURN_IF_ERROR(plan.prepare_frame(frame));
  Status st = plan.execute(frame, *impl_->pool);
  if (impl_->tracer) {
    impl_->tracer->span(impl_->runs == 0 ? "first run" : "run", "session", t0, session::monotonic_us() - t0,
                        "\"run\":" + std::to_string(impl_->runs));
  }
  ++impl_->runs;
  NXRT_RETURN_IF_ERROR(st);
  std::vector<Value> outs;
  for (const auto& name : output_names) {
    int s = plan.slot(name);
    bool is_output = false;
    for (const auto& o : impl_->outputs) is_output |= o.name == name;
    if (s < 0 || !is_output) return invalid_argument("'" + name + "' is not an output of the model");
    Value v = frame.slots[static_cast<size_t>(s)];
    // Views never reach the caller un-materialized.
    if (v.is_tensor() && !v.tensor().is_contiguous()) v = Value(v.tensor().contiguous());
    outs.push_back(std::move(v));
  }
  return outs;
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
  NXRT_RETURN_IF_ERROR(session::infer_shapes(*model));
  std::string s = session::describe_shapes(model->graph);
  std::string missing = session::describe_ops_without_shape_fn(model->graph);
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
