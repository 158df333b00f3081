// Image ops besides Resize: GridSample, AffineGrid, RoiAlign, NonMaxSuppression.
#include "ops/common.h"
#include "ops/tensor_util.h"

namespace nxrt::ops {
void register_image_ops(ep::KernelRegistry& r) { (void)r; }
}  // namespace nxrt::ops
