// A byte's output in a 256-entry table, over arrays: the 8-bit table ops (QLinearSigmoid / LeakyRelu,
// QLinearConcat's requantization, nxrt::ByteTable) share it.
#pragma once
#include <cstdint>

#include "ep/cpu_features.h"

namespace nxrt::ops {

// Whether lookup_bytes may take its AVX-512 VBMI loop at tier `tier` on this CPU (decided once, where
// the kernel is made or at the call's top).
bool byte_lookup_vbmi(ep::IsaTier tier);

// dst[i] = table[src[i]] for i < n (src and dst may be the same array). With `vbmi`, 64 bytes a step:
// vpermi2b looks the low 7 bits up in the table's two halves and each byte's top bit picks the half;
// otherwise byte by byte.
void lookup_bytes(const uint8_t* src, int64_t n, const uint8_t* table, uint8_t* dst, bool vbmi);

}  // namespace nxrt::ops
