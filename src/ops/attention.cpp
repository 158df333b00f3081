#include "ops/common.h"

namespace nxrt::ops {
void register_attention_ops(ep::KernelRegistry& r) { (void)r; }
}  // namespace nxrt::ops
