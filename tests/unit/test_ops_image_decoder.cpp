#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <openjpeg.h>
#include <png.h>
#include <webp/encode.h>

#include "kernel_test_util.h"
#include "ops/image/image_codecs.h"

using namespace nxrt;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Result<std::vector<Value>> decode(const std::vector<uint8_t>& bytes, const std::string& fmt = "RGB") {
  KernelRun r;
  r.op_type = "ImageDecoder";
  r.opset = 20;
  r.inputs = {Value(Tensor::from_vector<uint8_t>(DataType::kUInt8, {static_cast<int64_t>(bytes.size())}, bytes))};
  r.attributes = {attr_string("pixel_format", fmt)};
  return run_kernel(r);
}

std::vector<uint8_t> pixels_of(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<uint8_t>(t.data<uint8_t>(), t.data<uint8_t>() + t.numel());
}

// A small RGB test picture: w x h, smooth gradients.
std::vector<uint8_t> picture(int w, int h) {
  std::vector<uint8_t> p(static_cast<size_t>(w * h * 3));
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      p[(y * w + x) * 3] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[(y * w + x) * 3 + 1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[(y * w + x) * 3 + 2] = static_cast<uint8_t>((x + y) * 127 / (w + h - 2));
    }
  }
  return p;
}

std::vector<uint8_t> encode_png(const std::vector<uint8_t>& pix, int w, int h, uint32_t format) {
  png_image img;
  std::memset(&img, 0, sizeof(img));
  img.version = PNG_IMAGE_VERSION;
  img.width = static_cast<png_uint_32>(w);
  img.height = static_cast<png_uint_32>(h);
  img.format = format;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&img, nullptr, &size, 0, pix.data(), 0, nullptr));
  std::vector<uint8_t> out(size);
  EXPECT_TRUE(png_image_write_to_memory(&img, out.data(), &size, 0, pix.data(), 0, nullptr));
  out.resize(size);
  return out;
}

std::vector<uint8_t> encode_jpeg(const std::vector<uint8_t>& pix, int w, int h, int components) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = static_cast<JDIMENSION>(w);
  c.image_height = static_cast<JDIMENSION>(h);
  c.input_components = components;
  c.in_color_space = components == 3 ? JCS_RGB : JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 95, TRUE);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = const_cast<uint8_t*>(pix.data()) + static_cast<size_t>(c.next_scanline) * w * components;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::vector<uint8_t> out(buf, buf + size);
  std::free(buf);
  return out;
}

// WebP via libwebp's encoder: lossless (exact) or lossy.
std::vector<uint8_t> encode_webp(const std::vector<uint8_t>& pix, int w, int h, bool lossless) {
  uint8_t* buf = nullptr;
  const size_t size = lossless ? WebPEncodeLosslessRGB(pix.data(), w, h, w * 3, &buf)
                               : WebPEncodeRGB(pix.data(), w, h, w * 3, 90.f, &buf);
  EXPECT_GT(size, 0u);
  std::vector<uint8_t> out(buf, buf + size);
  WebPFree(buf);
  return out;
}

// JPEG 2000 via openjpeg's encoder (lossless 5-3 wavelet), as a JP2 file or a raw codestream.
struct J2kOut {
  std::vector<uint8_t> buf;
  size_t pos = 0;
};
OPJ_SIZE_T j2k_write(void* b, OPJ_SIZE_T n, void* u) {
  auto* o = static_cast<J2kOut*>(u);
  if (o->pos + n > o->buf.size()) o->buf.resize(o->pos + n);
  std::memcpy(o->buf.data() + o->pos, b, n);
  o->pos += n;
  return n;
}
OPJ_OFF_T j2k_skip(OPJ_OFF_T n, void* u) {
  auto* o = static_cast<J2kOut*>(u);
  o->pos += static_cast<size_t>(n);
  if (o->pos > o->buf.size()) o->buf.resize(o->pos);
  return n;
}
OPJ_BOOL j2k_seek(OPJ_OFF_T off, void* u) {
  auto* o = static_cast<J2kOut*>(u);
  o->pos = static_cast<size_t>(off);
  if (o->pos > o->buf.size()) o->buf.resize(o->pos);
  return OPJ_TRUE;
}

std::vector<uint8_t> encode_j2k(const std::vector<uint8_t>& pix, int w, int h, int comps, bool jp2) {
  opj_cparameters_t p;
  opj_set_default_encoder_parameters(&p);
  p.tcp_numlayers = 1;
  p.tcp_rates[0] = 0;
  p.cp_disto_alloc = 1;
  p.numresolution = 2;
  std::vector<opj_image_cmptparm_t> cp(static_cast<size_t>(comps));
  for (auto& c : cp) {
    std::memset(&c, 0, sizeof(c));
    c.dx = c.dy = 1;
    c.w = static_cast<OPJ_UINT32>(w);
    c.h = static_cast<OPJ_UINT32>(h);
    c.prec = 8;
  }
  opj_image_t* im = opj_image_create(static_cast<OPJ_UINT32>(comps), cp.data(), comps == 3 ? OPJ_CLRSPC_SRGB : OPJ_CLRSPC_GRAY);
  EXPECT_NE(im, nullptr);
  im->x0 = im->y0 = 0;
  im->x1 = static_cast<OPJ_UINT32>(w);
  im->y1 = static_cast<OPJ_UINT32>(h);
  for (int c = 0; c < comps; ++c) {
    for (int i = 0; i < w * h; ++i) im->comps[c].data[i] = pix[static_cast<size_t>(i * comps + c)];
  }
  opj_codec_t* codec = opj_create_compress(jp2 ? OPJ_CODEC_JP2 : OPJ_CODEC_J2K);
  EXPECT_TRUE(opj_setup_encoder(codec, &p, im));
  opj_stream_t* st = opj_stream_create(1 << 16, OPJ_FALSE);
  J2kOut out;
  opj_stream_set_user_data(st, &out, nullptr);
  opj_stream_set_write_function(st, j2k_write);
  opj_stream_set_skip_function(st, j2k_skip);
  opj_stream_set_seek_function(st, j2k_seek);
  EXPECT_TRUE(opj_start_compress(codec, im, st));
  EXPECT_TRUE(opj_encode(codec, st));
  EXPECT_TRUE(opj_end_compress(codec, st));
  opj_stream_destroy(st);
  opj_destroy_codec(codec);
  opj_image_destroy(im);
  return out.buf;
}

uint8_t luma(const uint8_t* p) { return ops::image::rgb_to_luma(p[0], p[1], p[2]); }

}  // namespace

TEST(OpsImageDecoder, PngRgbBgrGray) {
  const int w = 7, h = 5;
  auto pix = picture(w, h);
  auto png = encode_png(pix, w, h, PNG_FORMAT_RGB);
  auto rgb = decode(png, "RGB");
  ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
  EXPECT_EQ((*rgb)[0].tensor().shape(), (Dims{h, w, 3}));
  EXPECT_EQ(pixels_of((*rgb)[0]), pix);
  auto bgr = decode(png, "BGR");
  ASSERT_TRUE(bgr.ok());
  auto b = pixels_of((*bgr)[0]);
  for (int i = 0; i < w * h; ++i) {
    EXPECT_EQ(b[3 * i], pix[3 * i + 2]);
    EXPECT_EQ(b[3 * i + 2], pix[3 * i]);
  }
  auto gray = decode(png, "Grayscale");
  ASSERT_TRUE(gray.ok());
  EXPECT_EQ((*gray)[0].tensor().shape(), (Dims{h, w, 1}));
  auto g = pixels_of((*gray)[0]);
  for (int i = 0; i < w * h; ++i) EXPECT_EQ(g[i], luma(&pix[3 * i]));
}

TEST(OpsImageDecoder, PngGrayAndAlpha) {
  const int w = 4, h = 3;
  std::vector<uint8_t> gray(w * h);
  for (int i = 0; i < w * h; ++i) gray[i] = static_cast<uint8_t>(i * 20);
  auto png = encode_png(gray, w, h, PNG_FORMAT_GRAY);
  auto rgb = decode(png, "RGB");
  ASSERT_TRUE(rgb.ok());
  auto p = pixels_of((*rgb)[0]);
  for (int i = 0; i < w * h; ++i) EXPECT_EQ(p[3 * i + 1], gray[i]);
  auto g = decode(png, "Grayscale");
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(pixels_of((*g)[0]), gray);
  std::vector<uint8_t> rgba(w * h * 4);
  for (int i = 0; i < w * h; ++i) {
    rgba[4 * i] = static_cast<uint8_t>(i);
    rgba[4 * i + 1] = 100;
    rgba[4 * i + 2] = 200;
    rgba[4 * i + 3] = 255;
  }
  auto out = decode(encode_png(rgba, w, h, PNG_FORMAT_RGBA), "RGB");
  ASSERT_TRUE(out.ok());
  EXPECT_EQ((*out)[0].tensor().shape(), (Dims{h, w, 3}));
  EXPECT_EQ(pixels_of((*out)[0])[3 * 5], 5);
}

TEST(OpsImageDecoder, JpegCloseToSource) {
  const int w = 16, h = 16;
  auto pix = picture(w, h);
  auto jpg = encode_jpeg(pix, w, h, 3);
  auto rgb = decode(jpg, "RGB");
  ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
  EXPECT_EQ((*rgb)[0].tensor().shape(), (Dims{h, w, 3}));
  auto p = pixels_of((*rgb)[0]);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], pix[i], 12) << i;
  auto gray = decode(jpg, "Grayscale");
  ASSERT_TRUE(gray.ok());
  auto g = pixels_of((*gray)[0]);
  for (int i = 0; i < w * h; ++i) EXPECT_EQ(g[i], luma(&p[3 * i]));
  // A grayscale JPEG decodes to one channel, replicated for RGB.
  std::vector<uint8_t> gsrc(w * h, 128);
  auto gj = decode(encode_jpeg(gsrc, w, h, 1), "BGR");
  ASSERT_TRUE(gj.ok());
  for (uint8_t v : pixels_of((*gj)[0])) EXPECT_NEAR(v, 128, 2);
}

TEST(OpsImageDecoder, BmpPnmTiff) {
  // 2x2 24-bit bottom-up BMP: rows padded to 8 bytes.
  std::vector<uint8_t> bmp = {'B', 'M', 70, 0, 0, 0, 0, 0, 0, 0, 54, 0, 0, 0, 40, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 1, 0, 24, 0};
  bmp.resize(54, 0);
  const uint8_t rows[16] = {/*bottom*/ 1, 2, 3, 4, 5, 6, 0, 0, /*top*/ 7, 8, 9, 10, 11, 12, 0, 0};
  bmp.insert(bmp.end(), rows, rows + 16);
  auto b = decode(bmp);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_EQ(pixels_of((*b)[0]), (std::vector<uint8_t>{9, 8, 7, 12, 11, 10, 3, 2, 1, 6, 5, 4}));

  std::string ppm = "P6\n# comment\n2 1\n255\n";
  std::vector<uint8_t> pnm(ppm.begin(), ppm.end());
  for (uint8_t v : {10, 20, 30, 40, 50, 60}) pnm.push_back(v);
  auto p = decode(pnm);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(pixels_of((*p)[0]), (std::vector<uint8_t>{10, 20, 30, 40, 50, 60}));
  std::string pgm = "P2 2 1 15 0 15";
  auto g = decode(std::vector<uint8_t>(pgm.begin(), pgm.end()), "Grayscale");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(pixels_of((*g)[0]), (std::vector<uint8_t>{0, 255}));

  // Little-endian uncompressed RGB TIFF, 2x1.
  std::vector<uint8_t> tif = {'I', 'I', 42, 0, 8, 0, 0, 0};
  auto entry = [&](uint16_t tag, uint16_t type, uint32_t count, uint32_t value) {
    const uint8_t e[12] = {static_cast<uint8_t>(tag), static_cast<uint8_t>(tag >> 8), static_cast<uint8_t>(type), 0,
                           static_cast<uint8_t>(count), 0, 0, 0,
                           static_cast<uint8_t>(value), static_cast<uint8_t>(value >> 8), 0, 0};
    tif.insert(tif.end(), e, e + 12);
  };
  tif.push_back(8);
  tif.push_back(0);
  const uint32_t data_off = 8 + 2 + 8 * 12 + 4;
  entry(256, 3, 1, 2);         // width
  entry(257, 3, 1, 1);         // height
  entry(258, 3, 1, 8);         // bits per sample
  entry(259, 3, 1, 1);         // no compression
  entry(262, 3, 1, 2);         // RGB
  entry(273, 4, 1, data_off);  // strip offset
  entry(277, 3, 1, 3);         // samples per pixel
  entry(279, 4, 1, 6);         // strip bytes
  for (int i = 0; i < 4; ++i) tif.push_back(0);
  for (uint8_t v : {1, 2, 3, 4, 5, 6}) tif.push_back(v);
  auto t = decode(tif, "BGR");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(pixels_of((*t)[0]), (std::vector<uint8_t>{3, 2, 1, 6, 5, 4}));
}

TEST(OpsImageDecoder, CorruptDataIsAnError) {
  const int w = 8, h = 8;
  auto pix = picture(w, h);
  auto png = encode_png(pix, w, h, PNG_FORMAT_RGB);
  auto jpg = encode_jpeg(pix, w, h, 3);
  std::vector<std::vector<uint8_t>> bad = {
      {},
      {1, 2, 3, 4, 5},
      std::vector<uint8_t>(png.begin(), png.begin() + 8),
      std::vector<uint8_t>(png.begin(), png.begin() + static_cast<long>(png.size() / 2)),
      std::vector<uint8_t>(jpg.begin(), jpg.begin() + 3),
      std::vector<uint8_t>(jpg.begin(), jpg.begin() + static_cast<long>(jpg.size() / 2)),
      {'B', 'M', 0, 0},
      {'P', '6', ' ', '9', '9', ' ', '9', '9', ' ', '2', '5', '5', '\n', 1, 2},
      {'I', 'I', 42, 0, 255, 255, 0, 0},
      {'R', 'I', 'F', 'F', 0, 0, 0, 0, 'W', 'E', 'B', 'P', 0, 0},
  };
  // Random corruption of the valid files: any outcome but a crash; an error must carry a message.
  std::mt19937 rng(11);
  for (int i = 0; i < 40; ++i) {
    auto c = (i % 2) ? png : jpg;
    for (int k = 0; k < 4; ++k) c[8 + rng() % (c.size() - 8)] ^= static_cast<uint8_t>(1 + rng() % 255);
    auto r = decode(c);
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  // Every prefix of a valid file: an error or (rarely) a decoded image, never a crash.
  for (const auto* file : {&png, &jpg}) {
    for (size_t len = 0; len < file->size(); ++len) {
      auto r = decode(std::vector<uint8_t>(file->begin(), file->begin() + static_cast<long>(len)));
      if (!r.ok()) {
        EXPECT_FALSE(r.status().message().empty());
      }
    }
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    auto r = decode(bad[i]);
    EXPECT_FALSE(r.ok()) << "case " << i;
    if (!r.ok()) {
      EXPECT_NE(r.status().message().find("ImageDecoder"), std::string::npos);
    }
  }
  EXPECT_FALSE(decode(png, "RGBA").ok());
}

TEST(OpsImageDecoder, WebpLosslessExactLossyClose) {
  const int w = 9, h = 6;
  auto pix = picture(w, h);
  auto lossless = encode_webp(pix, w, h, true);
  ASSERT_STREQ(ops::image::detect_format(lossless.data(), lossless.size()), "webp");
  auto rgb = decode(lossless, "RGB");
  ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
  EXPECT_EQ((*rgb)[0].tensor().shape(), (Dims{h, w, 3}));
  EXPECT_EQ(pixels_of((*rgb)[0]), pix);
  auto bgr = decode(lossless, "BGR");
  ASSERT_TRUE(bgr.ok());
  EXPECT_EQ(pixels_of((*bgr)[0])[0], pix[2]);
  auto gray = decode(lossless, "Grayscale");
  ASSERT_TRUE(gray.ok());
  auto g = pixels_of((*gray)[0]);
  for (int i = 0; i < w * h; ++i) EXPECT_EQ(g[i], luma(&pix[3 * i]));
  auto lossy = decode(encode_webp(pix, w, h, false), "RGB");
  ASSERT_TRUE(lossy.ok()) << lossy.status().to_string();
  auto p = pixels_of((*lossy)[0]);
  ASSERT_EQ(p.size(), pix.size());
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], pix[i], 40) << i;
}

TEST(OpsImageDecoder, Jpeg2000Jp2AndCodestreamExact) {
  const int w = 12, h = 10;
  auto pix = picture(w, h);
  for (bool jp2 : {true, false}) {
    auto file = encode_j2k(pix, w, h, 3, jp2);
    ASSERT_STREQ(ops::image::detect_format(file.data(), file.size()), "jpeg2000");
    auto rgb = decode(file, "RGB");
    ASSERT_TRUE(rgb.ok()) << rgb.status().to_string();
    EXPECT_EQ((*rgb)[0].tensor().shape(), (Dims{h, w, 3}));
    EXPECT_EQ(pixels_of((*rgb)[0]), pix);
  }
  std::vector<uint8_t> gray(w * h);
  for (int i = 0; i < w * h; ++i) gray[i] = static_cast<uint8_t>(i * 2);
  auto g = decode(encode_j2k(gray, w, h, 1, true), "Grayscale");
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)[0].tensor().shape(), (Dims{h, w, 1}));
  EXPECT_EQ(pixels_of((*g)[0]), gray);
}

TEST(OpsImageDecoder, TruncatedOrCorruptWebpJpeg2000IsAnError) {
  const int w = 8, h = 8;
  auto pix = picture(w, h);
  const std::vector<std::vector<uint8_t>> files = {encode_webp(pix, w, h, true), encode_webp(pix, w, h, false),
                                                   encode_j2k(pix, w, h, 3, true), encode_j2k(pix, w, h, 3, false)};
  for (size_t f = 0; f < files.size(); ++f) {
    const auto& file = files[f];
    // Truncated at half, and at every 7th length: an error with a message naming the node.
    auto half = decode(std::vector<uint8_t>(file.begin(), file.begin() + static_cast<long>(file.size() / 2)));
    ASSERT_FALSE(half.ok()) << "file " << f;
    EXPECT_NE(half.status().message().find("ImageDecoder"), std::string::npos);
    for (size_t len = 0; len < file.size(); len += 7) {
      auto r = decode(std::vector<uint8_t>(file.begin(), file.begin() + static_cast<long>(len)));
      EXPECT_FALSE(r.ok()) << "file " << f << " length " << len << " of " << file.size();
    }
    // Random corruption: any outcome but a crash.
    std::mt19937 rng(static_cast<unsigned>(5 + f));
    for (int i = 0; i < 30; ++i) {
      auto c = file;
      for (int k = 0; k < 3; ++k) c[12 + rng() % (c.size() - 12)] ^= static_cast<uint8_t>(1 + rng() % 255);
      auto r = decode(c);
      if (!r.ok()) {
        EXPECT_FALSE(r.status().message().empty());
      }
    }
  }
}
