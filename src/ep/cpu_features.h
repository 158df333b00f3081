// What the CPU this process runs on supports, checked once: kernels with AVX2 / AVX-512 / AMX bodies
// (target attributes) pick them at run time through these, never through -march flags.
#pragma once
#include <optional>
#include <string>
#include <string_view>

namespace nxrt::ep {

bool cpu_has_avx2_fma();     // AVX2 and FMA
bool cpu_has_avx512_vnni();  // AVX-512 F + VL + VNNI (vpdpbusd on 256-bit registers), and AVX2/FMA
bool cpu_has_f16c();         // vcvtph2ps / vcvtps2ph (every AVX2 CPU so far has it)
bool cpu_has_avx512_vbmi();  // AVX-512 F + BW + VBMI (vpermi2b: byte tables), and AVX2/FMA
// AVX-VNNI: vpdpbusd on 256-bit registers in a VEX encoding, without AVX-512 (Intel Alder Lake and
// later clients, Sierra Forest; also Sapphire Rapids and Zen 5), and AVX2/FMA. An AVX2-tier kernel
// may use it where the CPU has it.
bool cpu_has_avx_vnni();

// Whether this process may use the AMX tile registers: the CPU has AMX-TILE and AMX-INT8, and (Linux)
// the OS granted the tile data state (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)), asked once
// on the first call. amx_unavailable_reason() says why not ("" when usable).
bool amx_tiles_usable();
std::string amx_unavailable_reason();

// Instruction-set tiers, each including the ones below it. A kernel decides its tier once, at creation
// or specialization (KernelInfo::isa()), from the CPU's best tier capped by NXRT_ISA or the
// `isa` kernel override (ep/kernel_overrides.h).
//   kScalar  portable C++ (also what every optimized kernel is tested against)
//   kAvx2    AVX2 + FMA (+ F16C; + AVX-VNNI where the CPU has it)
//   kAvx512  AVX-512 F/BW/VL/DQ (+ VNNI where the CPU has it)
//   kAmx     AMX-TILE with AMX-INT8 and AMX-BF16 (Sapphire Rapids and later)
enum class IsaTier { kScalar = 0, kAvx2 = 1, kAvx512 = 2, kAmx = 3 };
const char* isa_tier_name(IsaTier t);
std::optional<IsaTier> parse_isa_tier(std::string_view name);
// The best tier this CPU supports.
IsaTier cpu_isa_tier();
// A one-line description: model name, the features that matter here, the tier.
std::string cpu_description();

}  // namespace nxrt::ep
