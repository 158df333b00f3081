// Image decoding for ImageDecoder (src/ops/image_decoder.cpp), exposed for unit tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::ops::image {

struct Decoded {
  int64_t width = 0;
  int64_t height = 0;
  int channels = 0;             // 1 (gray) or 3 (RGB)
  std::vector<uint8_t> pixels;  // HWC
};

// "jpeg", "png", "bmp", "pnm", "tiff", "webp", "jpeg2000", or nullptr when unrecognized.
const char* detect_format(const uint8_t* data, size_t size);
// Decodes any supported format; corrupt or unsupported data gives an error status, never a crash.
Status decode(const uint8_t* data, size_t size, Decoded* out);

// ITU-R 601-2 luma with PIL's fixed-point rounding (convert("L")).
inline uint8_t rgb_to_luma(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

}  // namespace nxrt::ops::image
