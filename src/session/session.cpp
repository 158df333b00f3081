#include "nxrt/session.h"

#include <chrono>
#include <unordered_set>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "onnx/model_reader.h"
#include "session/executor.h"
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
};

Session::Session(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Session::~Session() = default;

static Result<std::unique_ptr<Session>> make_session(Result<std::unique_ptr<ir::Model>> loaded,
                                                     const SessionOptions& opts) {
  if (!loaded.ok()) return loaded.status();
  auto impl = std::make_unique<Session::Impl>();
  impl->options = opts;
  impl->model = std::move(loaded).value();
  const ir::Graph& g = impl->model->graph;
  for (const auto& in : g.inputs) {
    ValueMeta m = session::to_value_meta(in.name, in.type);
    m.has_default = g.initializers.count(in.name) != 0;
    impl->inputs.push_back(std::move(m));
  }
  for (const auto& out : g.outputs) impl->outputs.push_back(session::to_value_meta(out.name, out.type));
  session::PlanEnv env{impl->model.get(), &ep::KernelRegistry::cpu()};
  NXRT_ASSIGN_OR_RETURN(impl->plan, session::GraphPlan::build(g, env, {}));
  impl->pool = std::make_unique<ep::ThreadPool>(opts.threads);
  return std::unique_ptr<Session>(new Session(std::move(impl)));
}

Result<std::unique_ptr<Session>> Session::create(const std::string& model_path, const SessionOptions& opts) {
  return make_session(onnx::load_model_file(model_path), opts);
}

Result<std::unique_ptr<Session>> Session::create_from_bytes(const void* data, size_t size, const SessionOptions& opts) {
  return make_session(onnx::load_model_bytes(data, size, nullptr, ""), opts);
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
  NXRT_RETURN_IF_ERROR(plan.prepare_frame(frame));
  NXRT_RETURN_IF_ERROR(plan.execute(frame, *impl_->pool));
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

Result<Value> read_value_file(const std::string& path, const ValueMeta* expected, std::string* name) {
  if (!expected) return onnx::read_value_pb(path, nullptr, name);
  ir::TypeInfo t = session::to_type_info(*expected);
  return onnx::read_value_pb(path, &t, name);
}

Status write_value_file(const std::string& path, const Value& value, const std::string& name) {
  return onnx::write_value_pb(path, value, name);
}

}  // namespace nxrt
