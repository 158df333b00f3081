// com.microsoft GatherBlockQuantized in the layout of a quantized embedding table (a tied lm_head's
// MatMulNBits weights seen as [vocab, hidden * bits / 8]): uint8 data of rank 2, bits 4 or 8 (low bits
// first), gather_axis 0, quantize_axis 1. Row by row, a block's scale and zero point read once, rows
// spread over the threads; the general kernel in contrib_ops.cpp validates the inputs and handles
// every other layout.
#pragma once
#include <cstdint>
#include <vector>

#include "ep/kernel.h"

namespace nxrt::ops::contrib {

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
