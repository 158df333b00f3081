#include "common/image.h"

#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include <jpeglib.h>
#include <png.h>

namespace examples {
namespace {

constexpr uint64_t kMaxPixels = uint64_t{1} << 28;  // refuse absurd headers before allocating

nxrt::Result<std::vector<uint8_t>> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nxrt::io_error("cannot open image '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return nxrt::io_error("cannot read image '" + path + "'");
  return bytes;
}

// libpng's simplified API reports errors through the png_image, so no setjmp is needed here.
nxrt::Result<Image> decode_png(const std::vector<uint8_t>& bytes, const std::string& path) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size())) {
    return nxrt::invalid_argument("invalid PNG '" + path + "': " + png.message);
  }
  if (png.width == 0 || png.height == 0 || uint64_t{png.width} * png.height > kMaxPixels) {
    png_image_free(&png);
    return nxrt::invalid_argument("PNG '" + path + "' has an unsupported size " + std::to_string(png.width) + "x" +
                                  std::to_string(png.height));
  }
  png.format = PNG_FORMAT_RGB;
  Image image(static_cast<int>(png.width), static_cast<int>(png.height));
  png_color white{255, 255, 255};  // background for transparent pixels: text is usually drawn on white
  if (!png_image_finish_read(&png, &white, image.rgb.data(), 0, nullptr)) {
    std::string message = png.message;
    png_image_free(&png);
    return nxrt::invalid_argument("invalid PNG '" + path + "': " + message);
  }
  return image;
}

struct JpegErrorManager {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void on_jpeg_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

void ignore_jpeg_message(j_common_ptr) {}

// libjpeg reports errors by calling error_exit, which longjmps back here. Between setjmp and the
// library calls this function only touches objects that outlive the jump (pixels, message), so no
// C++ destructor is skipped. Returns false with `message` set on a decode error.
bool decode_jpeg_into(const std::vector<uint8_t>& bytes, std::vector<uint8_t>* pixels, int* width, int* height,
                      std::string* message) {
  jpeg_decompress_struct cinfo;
  JpegErrorManager jerr;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&jerr.mgr);
  jerr.mgr.error_exit = on_jpeg_error;
  jerr.mgr.output_message = ignore_jpeg_message;
  jerr.message[0] = '\0';
  if (setjmp(jerr.jump)) {
    jpeg_destroy_decompress(&cinfo);
    message->assign(jerr.message);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;  // libjpeg-turbo converts grey and YCbCr; CMYK is refused below
  jpeg_calc_output_dimensions(&cinfo);
  if (cinfo.output_components != 3 || cinfo.output_width == 0 || cinfo.output_height == 0 ||
      uint64_t{cinfo.output_width} * cinfo.output_height > kMaxPixels) {
    jpeg_destroy_decompress(&cinfo);
    message->assign("unsupported colour layout or size (CMYK JPEGs are not supported)");
    return false;
  }
  *width = static_cast<int>(cinfo.output_width);
  *height = static_cast<int>(cinfo.output_height);
  pixels->resize(static_cast<size_t>(*width) * static_cast<size_t>(*height) * 3);
  jpeg_start_decompress(&cinfo);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = pixels->data() + static_cast<size_t>(cinfo.output_scanline) * cinfo.output_width * 3;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

uint8_t clamp_u8(float v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

}  // namespace

nxrt::Result<Image> load_image(const std::string& path) {
  NXRT_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, read_file(path));
  static const uint8_t kPngSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= 8 && std::memcmp(bytes.data(), kPngSignature, 8) == 0) return decode_png(bytes, path);
  if (bytes.size() >= 3 && bytes[0] == 0xFF && bytes[1] == 0xD8 && bytes[2] == 0xFF) {
    Image image;
    std::string message;
    if (!decode_jpeg_into(bytes, &image.rgb, &image.width, &image.height, &message)) {
      return nxrt::invalid_argument("invalid JPEG '" + path + "': " + message);
    }
    return image;
  }
  return nxrt::invalid_argument("'" + path + "' is neither a PNG nor a JPEG file");
}

nxrt::Status save_png(const std::string& path, const Image& image) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = PNG_FORMAT_RGB;
  if (!png_image_write_to_file(&png, path.c_str(), 0, image.rgb.data(), 0, nullptr)) {
    return nxrt::io_error("cannot write PNG '" + path + "': " + png.message);
  }
  return nxrt::Status::Ok();
}

Image resize_bilinear(const Image& src, int width, int height) {
  Image dst(width, height);
  const float sx = static_cast<float>(src.width) / static_cast<float>(width);
  const float sy = static_cast<float>(src.height) / static_cast<float>(height);
  // Per output column: the two source columns and the weight of the second (the same for every row).
  std::vector<int> x0(width), x1(width);
  std::vector<float> wx(width);
  for (int x = 0; x < width; ++x) {
    float fx = std::max((static_cast<float>(x) + 0.5f) * sx - 0.5f, 0.f);
    x0[x] = std::min(static_cast<int>(fx), src.width - 1);
    x1[x] = std::min(x0[x] + 1, src.width - 1);
    wx[x] = fx - static_cast<float>(x0[x]);
  }
  for (int y = 0; y < height; ++y) {
    float fy = std::max((static_cast<float>(y) + 0.5f) * sy - 0.5f, 0.f);
    const int y0 = std::min(static_cast<int>(fy), src.height - 1);
    const int y1 = std::min(y0 + 1, src.height - 1);
    const float wy = fy - static_cast<float>(y0);
    for (int x = 0; x < width; ++x) {
      const uint8_t* a = src.at(x0[x], y0);
      const uint8_t* b = src.at(x1[x], y0);
      const uint8_t* c = src.at(x0[x], y1);
      const uint8_t* d = src.at(x1[x], y1);
      uint8_t* o = dst.at(x, y);
      for (int ch = 0; ch < 3; ++ch) {
        const float top = static_cast<float>(a[ch]) + wx[x] * static_cast<float>(b[ch] - a[ch]);
        const float bottom = static_cast<float>(c[ch]) + wx[x] * static_cast<float>(d[ch] - c[ch]);
        o[ch] = clamp_u8(top + wy * (bottom - top));
      }
    }
  }
  return dst;
}

namespace {
// Keys' cubic convolution kernel weights for the four taps around a fraction t in [0, 1).
void cubic_weights(float t, float w[4]) {
  constexpr float a = -0.75f;
  auto near = [](float d) { return ((a + 2) * d - (a + 3)) * d * d + 1; };       // |d| <= 1
  auto far = [](float d) { return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a; };  // 1 < |d| < 2
  w[0] = far(1 + t);
  w[1] = near(t);
  w[2] = near(1 - t);
  w[3] = 1 - w[0] - w[1] - w[2];
}
}  // namespace

void sample_bicubic(const Image& src, float x, float y, uint8_t out[3]) {
  const float fx = std::floor(x), fy = std::floor(y);
  float wx[4], wy[4];
  cubic_weights(x - fx, wx);
  cubic_weights(y - fy, wy);
  const int ix = static_cast<int>(fx) - 1, iy = static_cast<int>(fy) - 1;
  float acc[3] = {0, 0, 0};
  for (int j = 0; j < 4; ++j) {
    const int sy = std::clamp(iy + j, 0, src.height - 1);
    for (int i = 0; i < 4; ++i) {
      const int sx = std::clamp(ix + i, 0, src.width - 1);
      const uint8_t* p = src.at(sx, sy);
      const float w = wx[i] * wy[j];
      for (int ch = 0; ch < 3; ++ch) acc[ch] += w * static_cast<float>(p[ch]);
    }
  }
  for (int ch = 0; ch < 3; ++ch) out[ch] = clamp_u8(acc[ch]);
}

Image rotate_180(const Image& src) {
  Image dst(src.width, src.height);
  for (int y = 0; y < src.height; ++y) {
    for (int x = 0; x < src.width; ++x) std::memcpy(dst.at(src.width - 1 - x, src.height - 1 - y), src.at(x, y), 3);
  }
  return dst;
}

Image rotate_90_ccw(const Image& src) {
  Image dst(src.height, src.width);
  // Source column x becomes destination row (width - 1 - x); source row y becomes destination column y.
  for (int y = 0; y < src.height; ++y) {
    for (int x = 0; x < src.width; ++x) std::memcpy(dst.at(y, src.width - 1 - x), src.at(x, y), 3);
  }
  return dst;
}

void draw_polygon(Image& image, const std::vector<PointF>& points, const uint8_t color[3], int thickness) {
  const int r = std::max(thickness, 1) / 2;
  auto plot = [&](int cx, int cy) {
    for (int y = cy - r; y <= cy + r; ++y) {
      for (int x = cx - r; x <= cx + r; ++x) {
        if (x >= 0 && y >= 0 && x < image.width && y < image.height) std::memcpy(image.at(x, y), color, 3);
      }
    }
  };
  for (size_t i = 0; i < points.size(); ++i) {
    const PointF a = points[i], b = points[(i + 1) % points.size()];
    const int steps = static_cast<int>(std::ceil(std::max(std::fabs(b.x - a.x), std::fabs(b.y - a.y)))) + 1;
    for (int s = 0; s <= steps; ++s) {
      const float t = static_cast<float>(s) / static_cast<float>(steps);
      plot(static_cast<int>(std::lround(a.x + t * (b.x - a.x))), static_cast<int>(std::lround(a.y + t * (b.y - a.y))));
    }
  }
}

}  // namespace examples
