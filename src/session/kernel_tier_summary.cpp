// kernel_tier_summary (include/nxrt/session.h): the tier kernels use, as `nxrt info` prints it.
#include "ep/cpu_features.h"
#include "ep/kernel_overrides.h"
#include "nxrt/session.h"

namespace nxrt {

Result<std::string> kernel_tier_summary() {
  NXRT_ASSIGN_OR_RETURN(ep::KernelOverrides overrides, ep::KernelOverrides::from_options_and_env({}));
  const ep::IsaTier best = ep::cpu_isa_tier(), chosen = overrides.isa();
  std::string out = ep::isa_tier_name(chosen);
  if (chosen < best) out += std::string(" (capped by isa=") + ep::isa_tier_name(chosen) + ")";
  if (chosen >= ep::IsaTier::kAmx) {
    out += ep::amx_tiles_usable() ? " (AMX tiles granted by the OS)"
                                  : " (AMX unusable: " + ep::amx_unavailable_reason() + "; kernels use AVX-512)";
  }
  return out;
}

}  // namespace nxrt
