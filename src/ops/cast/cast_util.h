// Whole-tensor dtype conversion shared by Cast, CastLike and the quantization kernels.
#pragma once
#include <string>
#include <vector>

#include "ir/float8_types.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"

namespace nxrt::ep {
class ThreadPool;
}

namespace nxrt::ops {

struct CastOptions {
  bool saturate = true;                   // float8 targets (opset 19+)
  E8M0Round round_mode = E8M0Round::kUp;  // float8e8m0 target (opset 24+)
};

// Converts every element of `in` (contiguous) into `out` (contiguous, same numel, already allocated with
// the target dtype). Any pair of dtypes among numbers, bool, string and the 8/4/2-bit types.
// With a pool, the common numeric conversions run in parallel.
Status cast_tensor(const Tensor& in, Tensor* out, const CastOptions& opts, ep::ThreadPool* pool = nullptr);

// Reads any numeric (incl. float8/4, int4/2, bool) tensor into doubles, exactly.
Status load_as_double(const Tensor& in, std::vector<double>* out);

// Parses a DataType name as used by Cast-1's string `to` ("FLOAT", "INT64", ...).
bool dtype_from_onnx_name(const std::string& name, DataType* out);

}  // namespace nxrt::ops
