#include "ep/standalone_context.h"

namespace nxrt::ep {

void StandaloneContext::bind_output(size_t i, Value buffer) {
  if (bound_.size() <= i) bound_.resize(i + 1);
  bound_[i] = std::move(buffer);
}

std::vector<Value>& StandaloneContext::outputs() {
  if (outputs_.size() < num_outputs()) outputs_.resize(num_outputs());
  return outputs_;
}

Result<Tensor*> StandaloneContext::allocate_output(size_t i, DataType dtype, const Dims& shape) {
  if (i >= num_outputs()) {
    return error("kernel allocated output " + std::to_string(i) + " but the node has " +
                 std::to_string(num_outputs()));
  }
  Value& out = outputs()[i];
  if (i < bound_.size() && bound_[i].is_tensor() && bound_[i].tensor().dtype() == dtype &&
      bound_[i].tensor().shape() == shape) {
    out = bound_[i];  // the same storage
  } else {
    out = Value(Tensor(dtype, shape));
  }
  return &out.tensor();
}

Status StandaloneContext::set_output(size_t i, Value v) {
  if (i >= num_outputs()) {
    return error("kernel set output " + std::to_string(i) + " but the node has " + std::to_string(num_outputs()));
  }
  outputs()[i] = std::move(v);
  return Status::Ok();
}

Result<void*> StandaloneContext::workspace(size_t bytes) {
  if (outer_) return outer_->workspace(bytes);
  return KernelContext::workspace(bytes);
}

Status StandaloneContext::error(const std::string& msg, StatusCode code) const {
  return outer_ ? outer_->error(msg, code) : info_.error(msg, code);
}

}  // namespace nxrt::ep
