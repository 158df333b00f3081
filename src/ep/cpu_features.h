// What the CPU this process runs on supports, checked once: kernels with AVX2 / AVX512-VNNI bodies
// (target attributes) pick them at run time through these, never through -march flags.
#pragma once

namespace nxrt::ep {

bool cpu_has_avx2_fma();     // AVX2 and FMA
bool cpu_has_avx512_vnni();  // AVX-512 F + VL + VNNI (vpdpbusd on 256-bit registers), and AVX2/FMA

}  // namespace nxrt::ep
