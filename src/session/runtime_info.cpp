// What this build can run and on what: the public registered_kernels(), cpu_summary(),
// optimizer_pass_names() and kernel_override_keys() (`nxrt info --ops`, `nxrt info --overrides`, the header of `nxrt info`).
#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ep/kernel_overrides.h"
#include "nxrt/session.h"
#include "ops/cpu_provider.h"
#include "optimizer/optimizer.h"

namespace nxrt {

std::vector<RegisteredKernel> registered_kernels() {
  std::vector<RegisteredKernel> out;
  for (const ep::KernelDef* d : ops::cpu_provider_registry()->defs()) {
    out.push_back({d->domain, d->op_type, d->since_version, d->end_version, d->inplace_input});
  }
  return out;
}

std::string cpu_summary() { return ep::cpu_description(); }

std::vector<std::string> optimizer_pass_names() { return optimizer::pass_names(); }

std::vector<KernelOverrideKeyInfo> kernel_override_keys() {
  std::vector<KernelOverrideKeyInfo> out;
  for (const auto& k : ep::known_kernel_overrides()) out.push_back({k.key, k.values, k.what});
  return out;
}

}  // namespace nxrt
