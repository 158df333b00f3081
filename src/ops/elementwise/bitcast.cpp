// BitCast (opset 26): reinterprets a tensor's bytes as another dtype of the same bit width. The output
// is a view of the input's storage (no copy); nxrt stores tensors little endian, as the spec requires.
#include <cstring>
#include <string>

#include "ops/common.h"

namespace nxrt::ops {
namespace {

Status bitcast_compute(ep::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& info = ctx.info();
  if (!info.has_attr("to")) return ctx.error("BitCast requires the 'to' attribute", StatusCode::kInvalidModel);
  const int64_t to = info.attr_int("to", 0);
  if (!is_known_dtype(static_cast<int32_t>(to)) || to > kMaxDataType || to <= 0) {
    return ctx.error("'to' = " + std::to_string(to) + " is not a known data type", StatusCode::kInvalidModel);
  }
  const DataType dt = static_cast<DataType>(to);
  if (dt == DataType::kString || x.dtype() == DataType::kString) {
    return ctx.error(std::string("BitCast does not support strings (") + dtype_name(x.dtype()) + " -> " + dtype_name(dt) +
                         ")",
                     StatusCode::kInvalidArgument);
  }
  if (dtype_bits(dt) != dtype_bits(x.dtype())) {
    return ctx.error(std::string("BitCast needs types of the same bit width: ") + dtype_name(x.dtype()) + " (" +
                         std::to_string(dtype_bits(x.dtype())) + " bits) -> " + dtype_name(dt) + " (" +
                         std::to_string(dtype_bits(dt)) + " bits)",
                     StatusCode::kInvalidArgument);
  }
  if (!x.is_contiguous() || !x.storage()) {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, dt, x.shape()));
    Tensor c = x.contiguous();
    if (c.nbytes() > 0) std::memcpy(y->raw_data(), c.raw_data(), c.nbytes());
    return Status::Ok();
  }
  return ctx.set_output(0, Value(Tensor(dt, x.shape(), x.storage(), x.byte_offset())));
}

}  // namespace

void register_bitcast_ops(ep::KernelRegistry& r) { r.add_fn("", "BitCast", 26, INT64_MAX, &bitcast_compute); }

}  // namespace nxrt::ops
