// StandaloneContext: the one KernelContext for running a kernel outside the executor. Constant folding
// evaluates nodes through it, the nxrt-domain fused kernels run the ops they wrap through it, and the
// unit tests and microbenchmarks run single kernels through it.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "ep/kernel.h"

namespace nxrt::ep {

// Reads the given input values (Value() = an omitted input), owns every output the kernel allocates or
// sets (outputs the node does not name are not requested), and keeps the workspaces it hands out until
// it is destroyed.
//
// Standalone, it runs on the given thread pool and its errors name the node (KernelInfo::error).
// Nested (made with an outer context), it runs inside that context's compute: the outer's thread pool,
// its step workspaces (pooled: the inner kernel allocates no scratch of its own) and its errors (which
// name the outer node and its inputs).
//
// A nested context with no inputs of its own allocates nothing until an output is made, so a subclass
// that forwards inputs and outputs to the outer context (FusedConv's wrapped Conv) keeps a run
// allocation-free.
class StandaloneContext : public KernelContext {
 public:
  StandaloneContext(const KernelInfo& info, std::vector<Value> inputs, ThreadPool& pool)
      : info_(info), inputs_(std::move(inputs)), pool_(&pool) {}
  StandaloneContext(const KernelInfo& info, std::vector<Value> inputs, KernelContext& outer)
      : info_(info), inputs_(std::move(inputs)), outer_(&outer) {}

  // Output i is written into `buffer`'s storage when the kernel allocates it with buffer's dtype and
  // shape (a caller-bound buffer, e.g. a KV cache that present shares with past); else it is new.
  void bind_output(size_t i, Value buffer);

  // The outputs, one per node output (kind none where the kernel produced nothing).
  std::vector<Value>& outputs();
  Value& output(size_t i) { return outputs().at(i); }

  const KernelInfo& info() const override { return info_; }
  size_t num_inputs() const override { return inputs_.size(); }
  size_t num_outputs() const override { return info_.num_outputs(); }
  const Value* input_value(size_t i) const override {
    return i < inputs_.size() && !inputs_[i].is_none() ? &inputs_[i] : nullptr;
  }
  bool output_requested(size_t i) const override { return info_.output_present(i); }
  Result<Tensor*> allocate_output(size_t i, DataType dtype, const Dims& shape) override;
  Status set_output(size_t i, Value v) override;
  ThreadPool& pool() override { return outer_ ? outer_->pool() : *pool_; }
  Result<void*> workspace(size_t bytes) override;
  Status error(const std::string& msg, StatusCode code = StatusCode::kRuntimeError) const override;

 protected:
  // The context this one runs inside, or nullptr when standalone.
  KernelContext* outer() const { return outer_; }

 private:
  const KernelInfo& info_;
  std::vector<Value> inputs_;
  std::vector<Value> outputs_;  // sized on first use
  std::vector<Value> bound_;    // bind_output buffers by output index
  ThreadPool* pool_ = nullptr;
  KernelContext* outer_ = nullptr;
};

}  // namespace nxrt::ep
