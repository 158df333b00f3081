#include "ep/cpu_features.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace nxrt::ep {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vnni");
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_f16c() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);  // CPUID.1:ECX.F16C[bit 29]
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx512_vbmi() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vbmi");
  }();
  return has;
#else
  return false;
#endif
}

bool cpu_has_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    // CPUID.(EAX=7, ECX=1):EAX.AVX-VNNI[bit 4]; the YMM state the OS enables is AVX2's.
    return cpu_has_avx2_fma() && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a >> 4 & 1);
  }();
  return has;
#else
  return false;
#endif
}

namespace {
struct AmxState {
  bool usable = false;
  std::string why;
};
const AmxState& amx_state() {
  static const AmxState state = [] {
    AmxState s;
#if defined(__x86_64__)
    unsigned a = 7, b = 0, c = 0, d = 0;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    if (!((d >> 24 & 1) && (d >> 25 & 1))) {  // CPUID.(7,0):EDX AMX-TILE[24], AMX-INT8[25]
      s.why = "the CPU has no AMX-TILE/AMX-INT8";
      return s;
    }
#if defined(__linux__)
    // Linux hands out the 8 KB tile data state only to processes that ask (kernel 5.16+); without it
    // the first tile instruction faults.
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) != 0) {
      s.why = std::string("the OS refused the AMX tile state (arch_prctl ARCH_REQ_XCOMP_PERM: ") +
              std::strerror(errno) + ")";
      return s;
    }
#endif
    s.usable = true;
#else
    s.why = "not an x86-64 CPU";
#endif
    return s;
  }();
  return state;
}
}  // namespace

bool amx_tiles_usable() { return amx_state().usable; }
std::string amx_unavailable_reason() { return amx_state().why; }

const char* isa_tier_name(IsaTier t) {
  switch (t) {
    case IsaTier::kScalar: return "scalar";
    case IsaTier::kAvx2: return "avx2";
    case IsaTier::kAvx512: return "avx512";
    case IsaTier::kAmx: return "amx";
  }
  return "scalar";
}

std::optional<IsaTier> parse_isa_tier(std::string_view name) {
  for (IsaTier t : {IsaTier::kScalar, IsaTier::kAvx2, IsaTier::kAvx512, IsaTier::kAmx}) {
    if (name == isa_tier_name(t)) return t;
  }
  return std::nullopt;
}

IsaTier cpu_isa_tier() {
#if defined(__x86_64__) || defined(__i386__)
  static const IsaTier tier = [] {
    __builtin_cpu_init();
    if (!cpu_has_avx2_fma()) return IsaTier::kScalar;
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (!avx512) return IsaTier::kAvx2;
    // AMX: CPUID.(EAX=7,ECX=0):EDX bits 22 (AMX-BF16), 24 (AMX-TILE), 25 (AMX-INT8). Whether the OS
    // lets this process use the tile state is asked when a kernel first needs it.
    unsigned a = 7, b = 0, c = 0, d = 0;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    const bool amx = (d >> 22 & 1) && (d >> 24 & 1) && (d >> 25 & 1);
    return amx ? IsaTier::kAmx : IsaTier::kAvx512;
  }();
  return tier;
#else
  return IsaTier::kScalar;
#endif
}

std::string cpu_description() {
  std::string model = "unknown CPU";
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      if (std::strncmp(line, "model name", 10) == 0) {
        const char* colon = std::strchr(line, ':');
        if (colon) {
          model = colon + 1;
          while (!model.empty() && (model.front() == ' ' || model.front() == '\t')) model.erase(0, 1);
          while (!model.empty() && (model.back() == '\n' || model.back() == ' ')) model.pop_back();
        }
        break;
      }
    }
    std::fclose(f);
  }
  std::string feats;
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  const struct { const char* name; bool has; } list[] = {
      {"avx2", __builtin_cpu_supports("avx2") != 0},         {"fma", __builtin_cpu_supports("fma") != 0},
      {"avx512f", __builtin_cpu_supports("avx512f") != 0},   {"avx512bw", __builtin_cpu_supports("avx512bw") != 0},
      {"avx512vl", __builtin_cpu_supports("avx512vl") != 0}, {"avx512vnni", __builtin_cpu_supports("avx512vnni") != 0},
      {"avx512bf16", __builtin_cpu_supports("avx512bf16") != 0}, {"avx512vbmi", cpu_has_avx512_vbmi()},
      {"avxvnni", cpu_has_avx_vnni()},
      {"amx", cpu_isa_tier() == IsaTier::kAmx},
  };
  for (const auto& f : list) {
    if (!f.has) continue;
    if (!feats.empty()) feats += ' ';
    feats += f.name;
  }
#endif
  return model + " [" + feats + "] tier " + isa_tier_name(cpu_isa_tier());
}

}  // namespace nxrt::ep
