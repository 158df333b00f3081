#include "ops/common.h"

namespace nxrt::ops {
void register_image_decoder_ops(ep::KernelRegistry& r) { (void)r; }
}  // namespace nxrt::ops
