#include "kernel_test_util.h"

#include <cstring>
#include <random>

#include "ep/standalone_context.h"
#include "ops/cpu_provider.h"

namespace nxrt::testing {

namespace {
ir::Attribute make(const std::string& name, ir::Attribute::Type t) {
  ir::Attribute a;
  a.name = name;
  a.type = t;
  return a;
}

}  // namespace

Tensor random_tensor(Dims shape, uint32_t seed) {
  Tensor t(DataType::kFloat, std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

ir::Attribute attr_int(const std::string& name, int64_t v) {
  auto a = make(name, ir::Attribute::Type::kInt);
  a.i = v;
  return a;
}
ir::Attribute attr_float(const std::string& name, float v) {
  auto a = make(name, ir::Attribute::Type::kFloat);
  a.f = v;
  return a;
}
ir::Attribute attr_string(const std::string& name, const std::string& v) {
  auto a = make(name, ir::Attribute::Type::kString);
  a.s = v;
  return a;
}
ir::Attribute attr_ints(const std::string& name, std::vector<int64_t> v) {
  auto a = make(name, ir::Attribute::Type::kInts);
  a.ints = std::move(v);
  return a;
}
ir::Attribute attr_floats(const std::string& name, std::vector<float> v) {
  auto a = make(name, ir::Attribute::Type::kFloats);
  a.floats = std::move(v);
  return a;
}
ir::Attribute attr_strings(const std::string& name, std::vector<std::string> v) {
  auto a = make(name, ir::Attribute::Type::kStrings);
  a.strings = std::move(v);
  return a;
}
ir::Attribute attr_tensor(const std::string& name, Tensor t) {
  auto a = make(name, ir::Attribute::Type::kTensor);
  a.t = std::move(t);
  return a;
}

ir::Attribute attr_graph(const std::string& name, std::shared_ptr<ir::Graph> g) {
  auto a = make(name, ir::Attribute::Type::kGraph);
  a.g = std::move(g);
  return a;
}

ir::ValueInfo tensor_info(const std::string& name, DataType dt, std::vector<ir::Dim> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = dt;
  v.type.has_shape = true;
  v.type.dims = std::move(dims);
  return v;
}

ir::Node graph_node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                    std::vector<ir::Attribute> attrs) {
  ir::Node n;
  n.name = out.empty() ? op : out[0] + "_node";
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

Result<std::vector<Value>> run_kernel(const KernelRun& run) {
  ir::Node node;
  node.name = "test_" + run.op_type;
  node.op_type = run.op_type;
  node.domain = run.domain;
  node.attributes = run.attributes;
  for (size_t i = 0; i < run.inputs.size(); ++i) {
    node.inputs.push_back(run.inputs[i].is_none() ? std::string() : "in" + std::to_string(i));
  }
  for (size_t i = 0; i < run.num_outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
  const ep::KernelDef* def = ops::cpu_provider_registry()->find(run.domain, run.op_type, run.opset);
  if (!def) return not_implemented("no CPU kernel for " + run.op_type + " at opset " + std::to_string(run.opset));
  ep::KernelInfo info(node, run.opset);
  info.const_inputs_.assign(run.inputs.size(), nullptr);
  for (size_t i : run.const_inputs) {
    if (i < run.inputs.size() && run.inputs[i].is_tensor()) info.const_inputs_[i] = &run.inputs[i].tensor();
  }
  info.registry_ = ops::cpu_provider_registry().get();
  NXRT_ASSIGN_OR_RETURN(ep::KernelOverrides overrides, ep::KernelOverrides::parse(run.overrides));
  info.overrides_ = &overrides;
  auto kernel = def->factory(info);
  if (!kernel.ok()) return kernel.status();
  // Exactly run.threads, past this machine's CPUs too: 3+-thread tests run those paths on 2-CPU machines.
  ep::ThreadPool pool(run.threads, ep::ThreadPool::Sizing::kExact);
  std::unique_ptr<ep::KernelVariant> variant;
  if (run.specialize) {
    std::vector<DataType> dtypes;
    std::vector<Dims> shapes;
    for (const Value& v : run.inputs) {
      dtypes.push_back(v.is_tensor() ? v.tensor().dtype() : DataType::kUndefined);
      shapes.push_back(v.is_tensor() ? v.tensor().shape() : Dims{});
    }
    ep::SpecializeContext sc(info, dtypes.size(), dtypes.data(), shapes.data(),
                             run.specialize_threads > 0 ? run.specialize_threads : pool.num_threads());
    NXRT_ASSIGN_OR_RETURN(variant, kernel.value()->specialize(sc));
  }
  if (run.variant_workspace_bytes) *run.variant_workspace_bytes = variant ? variant->workspace_bytes() : 0;
  VariantContext ctx(info, run.inputs, pool, variant.get());
  NXRT_RETURN_IF_ERROR(kernel.value()->compute(ctx));
  if (run.thread_slot_bytes) *run.thread_slot_bytes = ctx.max_thread_slot_bytes;
  return std::move(ctx.outputs());
}

}  // namespace nxrt::testing
