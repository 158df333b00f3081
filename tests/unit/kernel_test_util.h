// Runs one CPU kernel on given inputs without a model or session: for unit tests of ops, and for
// checking fast kernels against reference kernels on random shapes.
#pragma once
#include <cstring>
#include <memory>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ep/kernel.h"
#include "ep/standalone_context.h"
#include "ep/thread_pool.h"
#include "ir/graph.h"

namespace nxrt::testing {

// n floats uniform in [-1, 1): the random operands of the kernel-against-reference tests.
inline std::vector<float> random_floats(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// Attribute builders.
ir::Attribute attr_int(const std::string& name, int64_t v);
ir::Attribute attr_float(const std::string& name, float v);
ir::Attribute attr_string(const std::string& name, const std::string& v);
ir::Attribute attr_ints(const std::string& name, std::vector<int64_t> v);
ir::Attribute attr_floats(const std::string& name, std::vector<float> v);
ir::Attribute attr_strings(const std::string& name, std::vector<std::string> v);
ir::Attribute attr_tensor(const std::string& name, Tensor t);
ir::Attribute attr_graph(const std::string& name, std::shared_ptr<ir::Graph> g);

// Graph builders for tests that build whole models (executor, session, subgraph ops).
// A tensor value with a declared shape (each dim ir::Dim::fixed or ir::Dim::named).
ir::ValueInfo tensor_info(const std::string& name, DataType dt, std::vector<ir::Dim> dims);
// A node named after its first output.
ir::Node graph_node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                    std::vector<ir::Attribute> attrs = {});

// A float tensor of `shape` with values drawn uniformly from [-1, 1) (mt19937 seeded with `seed`).
Tensor random_tensor(Dims shape, uint32_t seed);
// n bytes, each the low byte of one draw of rng (8-bit test operands).
inline std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng() & 0xff);
  return v;
}

struct KernelRun {
  std::string op_type;
  std::string domain;              // "" = ai.onnx
  int64_t opset = 21;
  std::vector<ir::Attribute> attributes;
  std::vector<Value> inputs;       // Value() (kind none) = omitted optional input
  size_t num_outputs = 1;
  int threads = 1;
  // Kernel overrides (ep/kernel_overrides.h), e.g. {"reference", "1"} or {"isa", "scalar"}.
  std::map<std::string, std::string> overrides;
  // Calls Kernel::specialize first, at the inputs' dtypes and shapes for `specialize_threads` threads
  // (0: `threads`), and runs compute with that variant and its workspace reserved, as the executor's
  // kernel cache does. false: no variant (constant folding, fused wrappers).
  bool specialize = false;
  // Inputs the kernel sees as constants at creation (KernelInfo::const_input: initializers it may pack).
  std::vector<size_t> const_inputs;
  int specialize_threads = 0;
  // When set, receives the variant's workspace_bytes() (0: no variant was made).
  size_t* variant_workspace_bytes = nullptr;
  // When set, receives the most bytes per thread compute asked of ctx.thread_slots (0: none).
  size_t* thread_slot_bytes = nullptr;
};

// A context as the executor gives one: the variant (or none), its declared workspace reserved up front
// and thread slots apart from it (both filled with a byte pattern, as a pooled block may hold garbage,
// so scratch read before written shows), and every ctx.workspace request counted (a variant should
// leave none to ask for).
class VariantContext final : public ep::StandaloneContext {
 public:
  VariantContext(const ep::KernelInfo& info, std::vector<Value> inputs, ep::ThreadPool& pool,
                 const ep::KernelVariant* v)
      : ep::StandaloneContext(info, std::move(inputs), pool), variant_(v) {
    const size_t bytes = v ? v->workspace_bytes() : 0;
    if (bytes > 0) {
      ws_ = Storage::allocate(bytes);
      std::memset(ws_->data(), 0xA5, bytes);
    }
  }
  const ep::KernelVariant* variant() const override { return variant_; }
  void* variant_workspace() const override { return ws_ ? ws_->data() : nullptr; }
  Result<void*> workspace(size_t bytes) override {
    ++workspace_calls;
    return ep::StandaloneContext::workspace(bytes);
  }
  Result<ep::SlotMemory> thread_slots(size_t bytes) override {
    max_thread_slot_bytes = std::max(max_thread_slot_bytes, bytes);
    ep::SlotMemory m;
    m.stride = (bytes + 63) / 64 * 64;
    m.slots = pool().num_threads();
    slots_.push_back(Storage::allocate(std::max<size_t>(64, m.stride * static_cast<size_t>(m.slots))));
    std::memset(slots_.back()->data(), 0xA5, slots_.back()->bytes());
    m.base = static_cast<char*>(slots_.back()->data());
    return m;
  }
  int workspace_calls = 0;
  size_t max_thread_slot_bytes = 0;

 private:
  const ep::KernelVariant* variant_;
  std::shared_ptr<Storage> ws_;
  std::vector<std::shared_ptr<Storage>> slots_;
};

// Creates the kernel from the CPU registry and runs it once; returns the outputs.
Result<std::vector<Value>> run_kernel(const KernelRun& run);

}  // namespace nxrt::testing
