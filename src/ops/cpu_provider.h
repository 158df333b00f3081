// The CPU execution provider: every kernel of src/ops/ in one registry. The session is the composition
// root: it asks for this registry and hands it to the optimizer (constant folding) and the planner, which
// reach kernels only through ep/kernel.h.
#pragma once
#include <memory>

#include "ep/kernel.h"

namespace nxrt::ops {

// Built on first use (thread-safe) and immutable afterwards; shared by every session.
std::shared_ptr<const ep::KernelRegistry> cpu_provider_registry();

// Fills `r` with every CPU kernel (what cpu_provider_registry() holds); for tools and tests that build
// their own registry.
void register_cpu_kernels(ep::KernelRegistry& r);

}  // namespace nxrt::ops
