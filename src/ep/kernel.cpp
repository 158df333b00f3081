#include "ep/kernel.h"

#include <algorithm>
#include <mutex>

#include "ep/thread_pool.h"

namespace nxrt::ep {

namespace {
const ir::Attribute* find_typed(const ir::Node& node, std::string_view name) { return node.find_attribute(name); }
}  // namespace

int64_t KernelInfo::attr_int(std::string_view name, int64_t dflt) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a ? a->i : dflt;
}

float KernelInfo::attr_float(std::string_view name, float dflt) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a ? a->f : dflt;
}

std::string KernelInfo::attr_string(std::string_view name, const std::string& dflt) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a ? a->s : dflt;
}

std::vector<int64_t> KernelInfo::attr_ints(std::string_view name, std::vector<int64_t> dflt) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a ? a->ints : dflt;
}

std::vector<float> KernelInfo::attr_floats(std::string_view name, std::vector<float> dflt) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a ? a->floats : dflt;
}

std::vector<std::string> KernelInfo::attr_strings(std::string_view name, std::vector<std::string> dflt) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a ? a->strings : dflt;
}

const Tensor* KernelInfo::attr_tensor(std::string_view name) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a && a->type == ir::Attribute::Type::kTensor ? &a->t : nullptr;
}

const ir::Graph* KernelInfo::attr_graph(std::string_view name) const {
  const ir::Attribute* a = find_typed(node_, name);
  return a && a->g ? a->g.get() : nullptr;
}

SubgraphRunner* KernelInfo::subgraph(const std::string& attr_name) const {
  auto it = subgraphs_.find(attr_name);
  return it == subgraphs_.end() ? nullptr : it->second;
}

Status KernelInfo::error(const std::string& msg, StatusCode code) const {
  std::string d = node_.domain.empty() ? "ai.onnx" : node_.domain;
  return Status(code, "node '" + node_.name + "' (" + d + "::" + node_.op_type + ", opset " +
                          std::to_string(opset_) + "): " + msg);
}

// ---------------------------------------------------------------------------------------------

static std::string registry_key(const std::string& domain, const std::string& op) {
  return ir::canonical_domain(domain) + "::" + op;
}

void KernelRegistry::add(KernelDef def) {
  def.domain = ir::canonical_domain(def.domain);
  defs_[registry_key(def.domain, def.op_type)].push_back(std::move(def));
}

void KernelRegistry::add_fn(const std::string& domain, const std::string& op_type, int64_t since, int64_t end,
                            ComputeFn fn) {
  struct FnKernel final : Kernel {
    ComputeFn fn;
    Status compute(KernelContext& ctx) const override { return fn(ctx); }
  };
  add(KernelDef{domain, op_type, since, end, [fn](const KernelInfo&) -> Result<std::unique_ptr<Kernel>> {
                  auto k = std::make_unique<FnKernel>();
                  k->fn = fn;
                  return std::unique_ptr<Kernel>(std::move(k));
                }});
}

void KernelRegistry::decline_capture(const std::string& domain, const std::string& op_type, const char* reason) {
  auto it = defs_.find(registry_key(domain, op_type));
  if (it == defs_.end()) return;
  for (auto& d : it->second) d.capture_decline = reason;
}

void KernelRegistry::allow_inplace(const std::string& domain, const std::string& op_type, int input) {
  auto it = defs_.find(registry_key(domain, op_type));
  if (it == defs_.end()) return;
  for (auto& d : it->second) d.inplace_input = input;
}

const KernelDef* KernelRegistry::find(const std::string& domain, const std::string& op_type, int64_t opset) const {
  auto it = defs_.find(registry_key(domain, op_type));
  if (it == defs_.end()) return nullptr;
  for (const auto& d : it->second) {
    if (opset >= d.since_version && opset <= d.end_version) return &d;
  }
  return nullptr;
}

bool KernelRegistry::knows(const std::string& domain, const std::string& op_type) const {
  return defs_.count(registry_key(domain, op_type)) != 0;
}

std::vector<const KernelDef*> KernelRegistry::defs() const {
  std::vector<const KernelDef*> out;
  for (const auto& [k, v] : defs_) {
    for (const auto& d : v) out.push_back(&d);
  }
  std::sort(out.begin(), out.end(), [](const KernelDef* a, const KernelDef* b) {
    return std::tie(a->domain, a->op_type, a->since_version) < std::tie(b->domain, b->op_type, b->since_version);
  });
  return out;
}

}  // namespace nxrt::ep

namespace nxrt::ep {

Result<std::reference_wrapper<const Tensor>> KernelContext::required_tensor(size_t i, const char* name) const {
  const Value* v = input_value(i);
  if (v != nullptr && v->is_tensor()) return std::cref(v->tensor());
  const std::string what = name ? std::string("input '") + name + "' (#" + std::to_string(i) + ")"
                                 : "input #" + std::to_string(i);
  if (v == nullptr) return error("required " + what + " is missing", StatusCode::kInvalidModel);
  return error(what + " must be a tensor, got " + v->describe(), StatusCode::kInvalidArgument);
}

Result<void*> KernelContext::workspace(size_t bytes) {
  fallback_workspaces_.push_back(Storage::allocate(bytes));
  return fallback_workspaces_.back()->data();
}

Result<SlotMemory> KernelContext::thread_slots(size_t bytes) {
  SlotMemory m;
  m.stride = (bytes + 63) / 64 * 64;
  m.slots = pool().num_threads();
  NXRT_ASSIGN_OR_RETURN(void* p, workspace(std::max<size_t>(64, m.stride * static_cast<size_t>(m.slots))));
  m.base = static_cast<char*>(p);
  return m;
}

const Dims& SpecializeContext::shape(size_t i) const {
  static const Dims kNone;
  return i < n_ ? shapes_[i] : kNone;
}

Result<void*> variant_workspace(KernelContext& ctx, const KernelVariant& v) {
  if (v.workspace_bytes() == 0) return nullptr;
  if (&v == ctx.variant()) {
    if (void* p = ctx.variant_workspace()) return p;
  }
  return ctx.workspace(v.workspace_bytes());
}

}  // namespace nxrt::ep
