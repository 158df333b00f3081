// Image decoding for ImageDecoder (image/image_decoder.cpp; the library-backed formats in library_codecs.cpp),
// exposed for unit tests.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
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

// Bounds memory for hostile headers: 256 Mpixel at most.
constexpr uint64_t kMaxPixels = uint64_t{1} << 28;
// Whether a w x h image may be decoded; else *err says why.
bool size_ok(uint64_t w, uint64_t h, std::string* err);
// JPEG, PNG, JPEG 2000 and WebP through their libraries (false + *err on failure, or when nxrt was
// built without them).
bool decode_with_library(const std::string& format, const uint8_t* data, size_t size, Decoded* out, std::string* err);

// ITU-R 601-2 luma with PIL's fixed-point rounding (convert("L")).
inline uint8_t rgb_to_luma(uint8_t r, uint8_t g, uint8_t b) {
  return static_cast<uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

}  // namespace nxrt::ops::image
