// Kernel overrides: the one way to force a kernel's choice, for tests and diagnosis. A session takes
// them from SessionOptions::kernel_overrides and the NXRT_KERNEL_OVERRIDES environment variable
// ("key=value,key=value"); NXRT_ISA=<tier> is short for isa=<tier>. A kernel reads them through
// KernelInfo::overrides() when it is created or specialized, never per call.
//
// Every key a kernel may read is listed in known_kernel_overrides() with its values; an unknown key or
// value is an error at session creation, so a typo cannot silently test the default path.
#pragma once
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ep/cpu_features.h"
#include "nxrt/status.h"

namespace nxrt::ep {

struct KernelOverrideKey {
  const char* key;
  const char* values;  // "a|b|c"
  const char* what;
};
// The table of keys: docs/ARCHITECTURE.md ("Forcing a kernel path") and `nxrt info --overrides` print it.
const std::vector<KernelOverrideKey>& known_kernel_overrides();

class KernelOverrides {
 public:
  // Validated against known_kernel_overrides().
  static Result<KernelOverrides> parse(const std::map<std::string, std::string>& values);
  // SessionOptions' map, then NXRT_KERNEL_OVERRIDES and NXRT_ISA (the options win on a clash).
  static Result<KernelOverrides> from_options_and_env(const std::map<std::string, std::string>& options);

  // The value of `key`, or "" when it is not set.
  std::string_view get(std::string_view key) const;
  // reference=1: kernels that keep a reference implementation beside their fast paths run it.
  bool reference() const { return get("reference") == "1"; }
  // The instruction-set tier kernels may use: the CPU's best, capped by isa=<tier>.
  IsaTier isa() const { return isa_; }
  bool empty() const { return values_.empty(); }
  const std::map<std::string, std::string, std::less<>>& values() const { return values_; }

 private:
  std::map<std::string, std::string, std::less<>> values_;
  IsaTier isa_ = cpu_isa_tier();
};

// The overrides of a kernel created without a session (defaults: nothing forced, the CPU's tier).
const KernelOverrides& default_kernel_overrides();

}  // namespace nxrt::ep
