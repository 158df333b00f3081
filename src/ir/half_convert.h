// float16 <-> float32 over arrays, bit for bit the scalar conversions of nxrt/float_types.h
// (half_to_float, float_to_half), on F16C where the CPU has it (AVX2 + F16C: 8 elements an
// instruction), else element by element. Exact either way, so not an ISA-tier choice: the Cast kernel
// and the optimizer's float16 widening (a model's weights at session creation) both use it.
#pragma once
#include <cstdint>

namespace nxrt::ir {

void halves_to_floats(const uint16_t* in, float* out, int64_t n);
void floats_to_halves(const float* in, uint16_t* out, int64_t n);
// Whether the two run on F16C on this CPU.
bool half_conversion_vectorized();

}  // namespace nxrt::ir
