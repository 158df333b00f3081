#include "ep/kernel_overrides.h"

#include <algorithm>
#include <cstdlib>

namespace nxrt::ep {

const std::vector<KernelOverrideKey>& known_kernel_overrides() {
  static const std::vector<KernelOverrideKey> keys = {
      {"reference", "0|1",
       "1: every kernel that keeps a reference implementation beside its fast paths runs the reference (the conv "
       "family: the direct definition; MaxPool/AveragePool/LpPool/GlobalAveragePool: the per-window loops)"},
      {"isa", "scalar|avx2|avx512|amx",
       "caps the instruction-set tier kernels choose from (default: the best this CPU has); NXRT_ISA sets it too"},
      {"conv.path",
       "auto|reference|im2col|implicit-gemm|padded-rows-gemm|pointwise|depthwise-window|depthwise-scalar|winograd|"
       "small-spatial-direct|small-spatial-transposed|strided-direct",
       "Conv, ConvInteger, QLinearConv, nxrt::FusedConv: run this path (ops/conv/conv_engine.h ConvPath) on every conv "
       "it applies to; the others keep the automatic choice. reference=1 wins over it"},
      {"conv.skip", "none|winograd|small-spatial|padded-rows-gemm|strided-direct|stem-lanes",
       "the same convs: the automatic choice never picks this path (A/B of one path on a whole model); "
       "stem-lanes: nxrt::ConvMaxPool's channels-last path (ops/conv/stem_lanes.h)"},
      {"pool", "capped|exact",
       "exact: the session's thread pool has SessionOptions::threads threads even past this machine's CPUs "
       "(oversubscribed: for tests of the 3+-thread paths, the one-counter chunks and plans for more threads, on small "
       "machines; never for speed); capped (default): at most the CPUs"},
  };
  return keys;
}

namespace {
bool value_allowed(const KernelOverrideKey& k, std::string_view v) {
  std::string_view all = k.values;
  while (!all.empty()) {
    const size_t bar = all.find('|');
    if (all.substr(0, bar) == v) return true;
    if (bar == std::string_view::npos) break;
    all.remove_prefix(bar + 1);
  }
  return false;
}
}  // namespace

Result<KernelOverrides> KernelOverrides::parse(const std::map<std::string, std::string>& values) {
  KernelOverrides o;
  const auto& keys = known_kernel_overrides();
  for (const auto& kv : values) {
    const std::string& k = kv.first;  // (clang 14 cannot capture a structured binding)
    const std::string& v = kv.second;
    auto it = std::find_if(keys.begin(), keys.end(), [&](const KernelOverrideKey& e) { return k == e.key; });
    if (it == keys.end()) {
      std::string known;
      for (const auto& e : keys) known += (known.empty() ? "" : ", ") + std::string(e.key);
      return invalid_argument("unknown kernel override '" + k + "' (known: " + known + ")");
    }
    if (!value_allowed(*it, v)) {
      return invalid_argument("kernel override " + k + "=" + v + ": the value must be one of " + it->values);
    }
    o.values_[k] = v;
  }
  if (auto it = o.values_.find("isa"); it != o.values_.end()) {
    const IsaTier cap = *parse_isa_tier(it->second);
    o.isa_ = std::min(cap, cpu_isa_tier());
  }
  return o;
}

Result<KernelOverrides> KernelOverrides::from_options_and_env(const std::map<std::string, std::string>& options) {
  std::map<std::string, std::string> merged;
  if (const char* env = std::getenv("NXRT_KERNEL_OVERRIDES")) {
    std::string_view rest = env;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      if (!item.empty()) {
        const size_t eq = item.find('=');
        if (eq == std::string_view::npos) {
          return invalid_argument("NXRT_KERNEL_OVERRIDES: '" + std::string(item) + "' is not key=value");
        }
        merged[std::string(item.substr(0, eq))] = std::string(item.substr(eq + 1));
      }
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (const char* isa = std::getenv("NXRT_ISA"); isa && *isa) {
    if (!parse_isa_tier(isa)) {
      return invalid_argument(std::string("NXRT_ISA=") + isa + ": the value must be one of scalar|avx2|avx512|amx");
    }
    merged["isa"] = isa;
  }
  for (const auto& [k, v] : options) merged[k] = v;
  return parse(merged);
}

std::string_view KernelOverrides::get(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? std::string_view() : std::string_view(it->second);
}

const KernelOverrides& default_kernel_overrides() {
  static const KernelOverrides o;
  return o;
}

}  // namespace nxrt::ep
