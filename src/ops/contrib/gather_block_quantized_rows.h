// com.microsoft GatherBlockQuantized in the layout of a quantized embedding table (a tied lm_head's
// MatMulNBits weights seen as [vocab, hidden * bits / 8]): uint8 data of rank 2, bits 4 or 8 (low bits
// first), gather_axis 0, quantize_axis 1. Row by row, a block's scale and zero point read once, rows
// spread over the threads; the general kernel in contrib_ops.cpp validates the inputs and handles
// every other layout.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "ep/kernel.h"
#include "ops/common.h"

namespace nxrt::ops::contrib {

// Runs body(T{}) with T the scales' element type (float, Float16 or BFloat16: GatherBlockQuantized's
// output type); any other type is an error naming it.
template <typename F>
Status dispatch_gbq_scale_type(ep::KernelContext& ctx, DataType dt, F&& body) {
  auto bad = [&] {
    return ctx.error(std::string("scales must be float32/float16/bfloat16, got ") + dtype_name(dt), StatusCode::kInvalidArgument);
  };
  return dispatch_float(dt, [&](auto tag) -> Status {
    if constexpr (std::is_same_v<decltype(tag), double>) return bad();
    else return body(tag);
  }, bad);
}

// Whether gather_block_quantized_rows handles this layout.
inline bool gather_block_quantized_rows_apply(DataType data_dtype, int64_t rank, int64_t gather_axis,
                                              int64_t quantize_axis, int64_t bits) {
  return data_dtype == DataType::kUInt8 && rank == 2 && gather_axis == 0 && quantize_axis == 1 &&
         (bits == 4 || bits == 8);
}

// out[i, :] = (code(data[idx[i], :]) - zero point) * scale, for idx[i] in [-rows, rows) (negative
// counts from the end); other indices give a row of zeros. cols: elements per row (data.dim(1) * 8 / bits).
// zp: packed uint8 zero points [rows, ceil(blocks * bits / 8)] or nullptr (2^(bits-1)).
Status gather_block_quantized_rows(ep::KernelContext& ctx, const Tensor& data, const std::vector<int64_t>& idx,
                                   const Tensor& scales, const Tensor* zp, int64_t bits, int64_t block, int64_t cols,
                                   Tensor* out);

}  // namespace nxrt::ops::contrib
