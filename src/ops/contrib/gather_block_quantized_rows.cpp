#include "ops/contrib/gather_block_quantized_rows.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "ep/thread_pool.h"
#include "nxrt/float_types.h"
#include "ops/common.h"

namespace nxrt::ops::contrib {

namespace {

template <typename T>
void dequant_row(const uint8_t* row, const T* sc, const uint8_t* zrow, int64_t bits, int64_t block, int64_t cols, T* y) {
  const int64_t blocks = (cols + block - 1) / block;
  const int dflt = 1 << (bits - 1);
  for (int64_t j = 0; j < blocks; ++j) {
    const float s = static_cast<float>(sc[j]);
    int z = dflt;
    if (zrow) z = bits == 8 ? zrow[j] : (zrow[j / 2] >> ((j % 2) * 4)) & 15;
    const int64_t k0 = j * block, k1 = std::min(cols, k0 + block);
    float v[256];  // block <= 256 in every model seen; larger blocks go in pieces
    for (int64_t k = k0; k < k1; k += 256) {
      const int64_t n = std::min<int64_t>(256, k1 - k);
      if (bits == 8) {
        for (int64_t t = 0; t < n; ++t) v[t] = static_cast<float>(row[k + t] - z) * s;
      } else {
        for (int64_t t = 0; t < n; ++t) {
          const int64_t e = k + t;
          v[t] = static_cast<float>(((row[e >> 1] >> ((e & 1) * 4)) & 15) - z) * s;
        }
      }
      if constexpr (std::is_same_v<T, float>) {
        std::memcpy(y + k, v, static_cast<size_t>(n) * sizeof(float));
      } else {
        for (int64_t t = 0; t < n; ++t) y[k + t] = T(v[t]);
      }
    }
  }
}

}  // namespace

Status gather_block_quantized_rows(ep::KernelContext& ctx, const Tensor& data, const std::vector<int64_t>& idx,
                                   const Tensor& scales, const Tensor* zp, int64_t bits, int64_t block, int64_t cols,
                                   Tensor* out) {
  const int64_t rows = data.dim(0), row_bytes = data.dim(1), blocks = (cols + block - 1) / block;
  const int64_t zp_bytes = zp ? zp->dim(1) : 0;
  const uint8_t* d = data.data<uint8_t>();
  const uint8_t* z = zp ? zp->data<uint8_t>() : nullptr;
  const int64_t n = static_cast<int64_t>(idx.size());
  return dispatch_gbq_scale_type(ctx, scales.dtype(), [&](auto tag) -> Status {
    using T = decltype(tag);
    const T* sc = scales.data<T>();
    T* y = out->data<T>();
    auto work = [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        int64_t g = idx[static_cast<size_t>(i)];
        if (g < 0) g += rows;
        T* yi = y + i * cols;
        if (g < 0 || g >= rows) {
          std::fill(yi, yi + cols, T(0.f));
          continue;
        }
        dequant_row(d + g * row_bytes, sc + g * blocks, z ? z + g * zp_bytes : nullptr, bits, block, cols, yi);
      }
    };
    // A decode step gathers one row; a prefill hundreds.
    if (n >= 64) ctx.pool().parallel_for(n, 16, work); else work(0, n);
    return Status::Ok();
  });
}

}  // namespace nxrt::ops::contrib
