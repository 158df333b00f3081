// RGB images for the examples: PNG and JPEG decoding with libpng and libjpeg-turbo (the libraries behind
// nxrt's ImageDecoder op), PNG writing, resampling and drawing. Small on purpose: just what the OCR
// example needs, with errors returned as nxrt::Status values.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nxrt/status.h"

namespace examples {

struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes per pixel: R, G, B

  Image() = default;
  Image(int w, int h) : width(w), height(h), rgb(static_cast<size_t>(w) * static_cast<size_t>(h) * 3) {}
  uint8_t* at(int x, int y) { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
  const uint8_t* at(int x, int y) const { return &rgb[(static_cast<size_t>(y) * width + x) * 3]; }
};

struct PointF {
  float x = 0;
  float y = 0;
};

// Reads a PNG or a JPEG (chosen by the file's signature, not its name). Transparent PNG pixels are put
// on white, grey images become three equal channels.
nxrt::Result<Image> load_image(const std::string& path);
nxrt::Status save_png(const std::string& path, const Image& image);

// Bilinear resize with OpenCV's INTER_LINEAR geometry (pixel centres aligned: source coordinate
// (x + 0.5) * scale - 0.5, clamped at the border), which is what PaddleOCR's preprocessing uses.
Image resize_bilinear(const Image& src, int width, int height);

// Bicubic sample (Keys kernel, a = -0.75 as in OpenCV's INTER_CUBIC) at a fractional position, edge
// pixels repeated outside the image. Writes 3 channels to `out`.
void sample_bicubic(const Image& src, float x, float y, uint8_t out[3]);

Image rotate_180(const Image& src);
// A quarter turn counter-clockwise (numpy's rot90).
Image rotate_90_ccw(const Image& src);

// Closed polygon outline, `thickness` pixels wide.
void draw_polygon(Image& image, const std::vector<PointF>& points, const uint8_t color[3], int thickness);

}  // namespace examples
