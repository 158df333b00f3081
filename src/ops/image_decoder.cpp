// ImageDecoder (opset 20): encoded image bytes (1-D uint8) -> [H, W, C] uint8 in pixel_format RGB, BGR
// (C = 3) or Grayscale (C = 1).
//
// Formats: JPEG (libjpeg-turbo), PNG (libpng), JPEG 2000 (openjpeg; JP2 boxes or a raw codestream), WebP
// (libwebp; still images, lossy or lossless), and small hand-written decoders for BMP, PNM (P1-P6) and
// baseline TIFF (8-bit, uncompressed or PackBits). Alpha channels are dropped. Grayscale from colour uses the ITU-R 601-2 luma transform with the same
// fixed-point rounding as PIL's convert("L"), the reference implementation's decoder.
//
// Corrupt data never aborts: libjpeg and libpng report errors through handlers that longjmp back here.
// The setjmp functions keep no C++ objects with destructors of their own and write only through pointers
// to caller-owned memory. openjpeg reads from a bounds-checked memory stream and reports errors through a
// callback plus a false return; libwebp returns status codes.
#include <algorithm>
#include <csetjmp>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <jpeglib.h>
#include <jerror.h>
#include <openjpeg.h>
#include <png.h>
#include <webp/decode.h>

#include "ops/common.h"
#include "ops/image_decoder_util.h"

namespace nxrt::ops {
namespace image {

namespace {

constexpr uint64_t kMaxPixels = uint64_t{1} << 28;  // 256 Mpixel: bounds memory for hostile headers

bool size_ok(uint64_t w, uint64_t h, std::string* err) {
  if (w == 0 || h == 0) {
    *err = "image has zero width or height";
    return false;
  }
  if (w > kMaxPixels || h > kMaxPixels || w * h > kMaxPixels) {
    *err = "image is too large (" + std::to_string(w) + "x" + std::to_string(h) + ")";
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// JPEG

struct JpegError {
  jpeg_error_mgr mgr;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr cinfo) {
  auto* e = reinterpret_cast<JpegError*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->message);
  longjmp(e->jump, 1);
}

void jpeg_on_message(j_common_ptr cinfo, int level) {
  // Warnings (level -1): a truncated stream is an error for us (PIL refuses truncated images too);
  // other warnings (extraneous bytes, ...) are ignored. Trace messages (level >= 0) are dropped.
  if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
    auto* e = reinterpret_cast<JpegError*>(cinfo->err);
    std::snprintf(e->message, sizeof(e->message), "truncated JPEG data (premature end of file)");
    longjmp(e->jump, 1);
  }
}

void jpeg_silent(j_common_ptr) {}

// Decodes into *out (caller-owned). Returns false with *err set on failure.
bool decode_jpeg(const uint8_t* data, size_t size, Decoded* out, std::string* err) {
  jpeg_decompress_struct cinfo;
  JpegError jerr;
  std::memset(&cinfo, 0, sizeof(cinfo));
  cinfo.err = jpeg_std_error(&jerr.mgr);
  jerr.mgr.error_exit = jpeg_on_error;
  jerr.mgr.emit_message = jpeg_on_message;
  jerr.mgr.output_message = jpeg_silent;
  jerr.message[0] = '\0';
  if (setjmp(jerr.jump)) {
    jpeg_destroy_decompress(&cinfo);
    err->assign(std::string("invalid JPEG: ") + jerr.message);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  int channels = 3;
  if (cinfo.num_components == 1) {
    cinfo.out_color_space = JCS_GRAYSCALE;
    channels = 1;
  } else if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    cinfo.out_color_space = JCS_CMYK;
    channels = 4;
  } else {
    cinfo.out_color_space = JCS_RGB;
  }
  jpeg_calc_output_dimensions(&cinfo);
  if (!size_ok(cinfo.output_width, cinfo.output_height, err)) {
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  if (cinfo.output_components != channels) {
    jpeg_destroy_decompress(&cinfo);
    err->assign("unsupported JPEG colour layout");
    return false;
  }
  out->width = cinfo.output_width;
  out->height = cinfo.output_height;
  out->channels = channels;
  out->pixels.resize(static_cast<size_t>(out->width) * out->height * channels);
  jpeg_start_decompress(&cinfo);
  uint8_t* base = out->pixels.data();
  const size_t stride = static_cast<size_t>(out->width) * channels;
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = base + stride * cinfo.output_scanline;
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  const bool adobe_inverted = cinfo.saw_Adobe_marker;
  jpeg_destroy_decompress(&cinfo);
  if (channels == 4) {
    // CMYK -> RGB. Adobe files store inverted CMYK (255 = no ink).
    const size_t n = static_cast<size_t>(out->width) * out->height;
    uint8_t* p = out->pixels.data();
    for (size_t i = 0; i < n; ++i) {
      int c = p[4 * i], m = p[4 * i + 1], y = p[4 * i + 2], k = p[4 * i + 3];
      if (!adobe_inverted) {
        c = 255 - c;
        m = 255 - m;
        y = 255 - y;
        k = 255 - k;
      }
      p[3 * i] = static_cast<uint8_t>((c * k + 127) / 255);
      p[3 * i + 1] = static_cast<uint8_t>((m * k + 127) / 255);
      p[3 * i + 2] = static_cast<uint8_t>((y * k + 127) / 255);
    }
    out->channels = 3;
    out->pixels.resize(n * 3);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// PNG

struct PngReader {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char message[256];
};

void png_read_mem(png_structp png, png_bytep dst, png_size_t len) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (len > r->size - r->pos) png_error(png, "truncated PNG data");
  std::memcpy(dst, r->data + r->pos, len);
  r->pos += len;
}

void png_on_error(png_structp png, png_const_charp msg) {
  auto* r = static_cast<PngReader*>(png_get_error_ptr(png));
  std::snprintf(r->message, sizeof(r->message), "%s", msg ? msg : "error");
  png_longjmp(png, 1);
}

void png_on_warning(png_structp, png_const_charp) {}

bool decode_png(const uint8_t* data, size_t size, Decoded* out, std::vector<uint8_t*>* rows, std::string* err) {
  PngReader reader{data, size, 0, {0}};
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, png_on_error, png_on_warning);
  if (!png) {
    err->assign("libpng initialization failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    err->assign("libpng initialization failed");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    err->assign(std::string("invalid PNG: ") + reader.message);
    return false;
  }
  png_set_read_fn(png, &reader, png_read_mem);
  png_set_user_limits(png, 1u << 24, 1u << 24);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info);
  const png_uint_32 h = png_get_image_height(png, info);
  if (!size_ok(w, h, err)) {
    png_destroy_read_struct(&png, &info, nullptr);
    return false;
  }
  const int color = png_get_color_type(png, info);
  const int depth = png_get_bit_depth(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (depth == 16) png_set_strip_16(png);
  // Transparency is dropped: the output has no alpha channel.
  if (color & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int channels = png_get_channels(png, info);
  if ((channels != 1 && channels != 3) || png_get_bit_depth(png, info) != 8 ||
      png_get_rowbytes(png, info) != static_cast<size_t>(w) * channels) {
    png_destroy_read_struct(&png, &info, nullptr);
    err->assign("unsupported PNG pixel layout");
    return false;
  }
  out->width = w;
  out->height = h;
  out->channels = channels;
  out->pixels.resize(static_cast<size_t>(w) * h * channels);
  rows->resize(h);
  for (png_uint_32 y = 0; y < h; ++y) (*rows)[y] = out->pixels.data() + static_cast<size_t>(y) * w * channels;
  png_read_image(png, rows->data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

// ---------------------------------------------------------------------------------------------
// Little helpers for the hand-written formats.

uint32_t le16(const uint8_t* p) { return p[0] | (p[1] << 8); }
uint32_t le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) | (static_cast<uint32_t>(p[2]) << 16) |
         (static_cast<uint32_t>(p[3]) << 24);
}
uint32_t be16(const uint8_t* p) { return (p[0] << 8) | p[1]; }
uint32_t be32(const uint8_t* p) {
  return (static_cast<uint32_t>(p[0]) << 24) | (static_cast<uint32_t>(p[1]) << 16) | (static_cast<uint32_t>(p[2]) << 8) |
         static_cast<uint32_t>(p[3]);
}

// ---------------------------------------------------------------------------------------------
// BMP: uncompressed 1/4/8-bit palette, 24-bit BGR and 32-bit BGRX; bottom-up or top-down.

bool decode_bmp(const uint8_t* d, size_t n, Decoded* out, std::string* err) {
  if (n < 26) return (*err = "invalid BMP: truncated header", false);
  const uint32_t pix_off = le32(d + 10);
  const uint32_t hdr = le32(d + 14);
  int64_t w, h;
  uint32_t bpp, compression = 0, colors_used = 0;
  size_t pal_entry = 4;
  if (hdr == 12) {
    w = le16(d + 18);
    h = static_cast<int16_t>(le16(d + 20));
    bpp = le16(d + 24);
    pal_entry = 3;
  } else if (hdr >= 40 && n >= 14 + 40) {
    w = static_cast<int32_t>(le32(d + 18));
    h = static_cast<int32_t>(le32(d + 22));
    bpp = le16(d + 28);
    compression = le32(d + 30);
    colors_used = le32(d + 46);
  } else {
    return (*err = "invalid BMP: unsupported header size " + std::to_string(hdr), false);
  }
  if (compression != 0 && !(compression == 3 && bpp == 32)) {
    return (*err = "unsupported BMP compression " + std::to_string(compression), false);
  }
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 24 && bpp != 32) {
    return (*err = "unsupported BMP bit depth " + std::to_string(bpp), false);
  }
  const bool top_down = h < 0;
  if (h < 0) h = -h;
  if (w <= 0 || !size_ok(static_cast<uint64_t>(w), static_cast<uint64_t>(h), err)) {
    if (err->empty()) *err = "invalid BMP: bad width";
    return false;
  }
  std::vector<uint8_t> palette;  // RGB triples
  if (bpp <= 8) {
    uint32_t count = colors_used ? colors_used : (1u << bpp);
    if (count > 256) return (*err = "invalid BMP: palette too large", false);
    const size_t pal_off = 14 + static_cast<size_t>(hdr);
    if (pal_off + count * pal_entry > n) return (*err = "invalid BMP: truncated palette", false);
    palette.resize(256 * 3, 0);
    for (uint32_t i = 0; i < count; ++i) {
      const uint8_t* p = d + pal_off + i * pal_entry;
      palette[3 * i] = p[2];
      palette[3 * i + 1] = p[1];
      palette[3 * i + 2] = p[0];
    }
  }
  const uint64_t stride = ((static_cast<uint64_t>(w) * bpp + 31) / 32) * 4;
  if (pix_off > n || stride * static_cast<uint64_t>(h) > n - pix_off) return (*err = "invalid BMP: truncated pixel data", false);
  out->width = w;
  out->height = h;
  out->channels = 3;
  out->pixels.resize(static_cast<size_t>(w * h * 3));
  for (int64_t y = 0; y < h; ++y) {
    const uint8_t* row = d + pix_off + stride * static_cast<uint64_t>(top_down ? y : h - 1 - y);
    uint8_t* o = out->pixels.data() + y * w * 3;
    for (int64_t x = 0; x < w; ++x) {
      if (bpp == 24 || bpp == 32) {
        const uint8_t* p = row + x * (bpp / 8);
        o[3 * x] = p[2];
        o[3 * x + 1] = p[1];
        o[3 * x + 2] = p[0];
      } else {
        uint32_t idx;
        if (bpp == 8) idx = row[x];
        else if (bpp == 4) idx = (row[x / 2] >> (x % 2 ? 0 : 4)) & 0xF;
        else idx = (row[x / 8] >> (7 - x % 8)) & 1;
        std::memcpy(o + 3 * x, palette.data() + 3 * idx, 3);
      }
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// PNM: P1/P4 (bitmap), P2/P5 (gray), P3/P6 (RGB); maxval up to 65535 scaled to 8 bits.

bool decode_pnm(const uint8_t* d, size_t n, Decoded* out, std::string* err) {
  const int kind = d[1] - '0';
  size_t pos = 2;
  auto skip_space = [&]() {
    while (pos < n) {
      if (d[pos] == '#') {
        while (pos < n && d[pos] != '\n' && d[pos] != '\r') ++pos;
      } else if (d[pos] == ' ' || d[pos] == '\t' || d[pos] == '\n' || d[pos] == '\r' || d[pos] == '\v' || d[pos] == '\f') {
        ++pos;
      } else {
        break;
      }
    }
  };
  auto number = [&](uint64_t* v) -> bool {
    skip_space();
    if (pos >= n || d[pos] < '0' || d[pos] > '9') return false;
    uint64_t x = 0;
    while (pos < n && d[pos] >= '0' && d[pos] <= '9') {
      x = x * 10 + (d[pos] - '0');
      if (x > (uint64_t{1} << 32)) return false;
      ++pos;
    }
    *v = x;
    return true;
  };
  uint64_t w, h, maxval = 1;
  if (!number(&w) || !number(&h)) return (*err = "invalid PNM header", false);
  const bool bitmap = kind == 1 || kind == 4;
  if (!bitmap && (!number(&maxval) || maxval == 0 || maxval > 65535)) return (*err = "invalid PNM maxval", false);
  if (!size_ok(w, h, err)) return false;
  const int channels = (kind == 3 || kind == 6) ? 3 : 1;
  const bool binary = kind >= 4;
  if (binary) {
    if (pos >= n) return (*err = "invalid PNM: truncated", false);
    ++pos;  // the single whitespace byte after the header
  }
  out->width = w;
  out->height = h;
  out->channels = channels;
  const uint64_t count = w * h * channels;
  out->pixels.resize(count);
  uint8_t* o = out->pixels.data();
  auto scale = [&](uint64_t v) -> uint8_t {
    if (v > maxval) v = maxval;
    return static_cast<uint8_t>((v * 255 + maxval / 2) / maxval);
  };
  if (bitmap && binary) {
    const uint64_t stride = (w + 7) / 8;
    if (stride * h > n - pos) return (*err = "invalid PNM: truncated pixel data", false);
    for (uint64_t y = 0; y < h; ++y) {
      for (uint64_t x = 0; x < w; ++x) {
        o[y * w + x] = ((d[pos + y * stride + x / 8] >> (7 - x % 8)) & 1) ? 0 : 255;  // 1 = black
      }
    }
    return true;
  }
  if (binary) {
    const uint64_t bps = maxval > 255 ? 2 : 1;
    if (count * bps > n - pos) return (*err = "invalid PNM: truncated pixel data", false);
    for (uint64_t i = 0; i < count; ++i) {
      o[i] = bps == 2 ? scale(be16(d + pos + 2 * i)) : (maxval == 255 ? d[pos + i] : scale(d[pos + i]));
    }
    return true;
  }
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t v;
    if (bitmap) {
      skip_space();
      if (pos >= n || (d[pos] != '0' && d[pos] != '1')) return (*err = "invalid PNM: bad bitmap sample", false);
      o[i] = d[pos++] == '1' ? 0 : 255;
      continue;
    }
    if (!number(&v)) return (*err = "invalid PNM: truncated pixel data", false);
    o[i] = scale(v);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// TIFF: first image, 8 bits per sample, chunky, strips, no compression or PackBits; RGB(A), gray.

struct TiffReader {
  const uint8_t* d;
  size_t n;
  bool le;
  uint32_t u16(size_t off) const { return le ? le16(d + off) : be16(d + off); }
  uint32_t u32(size_t off) const { return le ? le32(d + off) : be32(d + off); }
};

bool tiff_values(const TiffReader& r, size_t entry, std::vector<uint32_t>* v) {
  const uint32_t type = r.u16(entry + 2);
  const uint32_t count = r.u32(entry + 4);
  size_t width = type == 3 ? 2 : (type == 4 ? 4 : (type == 1 ? 1 : 0));
  if (width == 0 || count > (1u << 24)) return false;
  size_t bytes = width * count;
  size_t off = bytes <= 4 ? entry + 8 : r.u32(entry + 8);
  if (off > r.n || bytes > r.n - off) return false;
  v->resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    (*v)[i] = width == 2 ? r.u16(off + 2 * i) : (width == 4 ? r.u32(off + 4 * i) : r.d[off + i]);
  }
  return true;
}

bool decode_tiff(const uint8_t* d, size_t n, Decoded* out, std::string* err) {
  TiffReader r{d, n, d[0] == 'I'};
  if (n < 8) return (*err = "invalid TIFF: truncated", false);
  const size_t ifd = r.u32(4);
  if (ifd > n || n - ifd < 2) return (*err = "invalid TIFF: bad IFD offset", false);
  const uint32_t entries = r.u16(ifd);
  if (static_cast<uint64_t>(entries) * 12 > n - ifd - 2) return (*err = "invalid TIFF: truncated IFD", false);
  uint32_t w = 0, h = 0, compression = 1, photometric = UINT32_MAX, spp = 1, rows_per_strip = 0, planar = 1, predictor = 1;
  std::vector<uint32_t> bps{1}, offsets, counts, v;
  for (uint32_t e = 0; e < entries; ++e) {
    const size_t ent = ifd + 2 + 12 * static_cast<size_t>(e);
    const uint32_t tag = r.u16(ent);
    if (tag != 256 && tag != 257 && tag != 258 && tag != 259 && tag != 262 && tag != 273 && tag != 277 && tag != 278 &&
        tag != 279 && tag != 284 && tag != 317) {
      continue;
    }
    if (!tiff_values(r, ent, &v) || v.empty()) return (*err = "invalid TIFF: bad tag " + std::to_string(tag), false);
    switch (tag) {
      case 256: w = v[0]; break;
      case 257: h = v[0]; break;
      case 258: bps = v; break;
      case 259: compression = v[0]; break;
      case 262: photometric = v[0]; break;
      case 273: offsets = v; break;
      case 277: spp = v[0]; break;
      case 278: rows_per_strip = v[0]; break;
      case 279: counts = v; break;
      case 284: planar = v[0]; break;
      case 317: predictor = v[0]; break;
      default: break;
    }
  }
  if (!size_ok(w, h, err)) return false;
  for (uint32_t b : bps) {
    if (b != 8) return (*err = "unsupported TIFF: only 8 bits per sample", false);
  }
  if (compression != 1 && compression != 32773) {
    return (*err = "unsupported TIFF compression " + std::to_string(compression), false);
  }
  if (planar != 1 || predictor != 1) return (*err = "unsupported TIFF layout (planar or predictor)", false);
  if (photometric == UINT32_MAX) photometric = spp >= 3 ? 2 : 1;  // tag missing: guess from the samples
  int channels;
  if (photometric == 2 && (spp == 3 || spp == 4)) channels = 3;
  else if ((photometric == 0 || photometric == 1) && (spp == 1 || spp == 2)) channels = 1;
  else return (*err = "unsupported TIFF photometric " + std::to_string(photometric), false);
  if (offsets.empty() || offsets.size() != counts.size()) return (*err = "invalid TIFF: bad strips", false);
  if (rows_per_strip == 0 || rows_per_strip > h) rows_per_strip = h;
  // Gather the raw (decompressed) samples strip by strip.
  const uint64_t row_bytes = static_cast<uint64_t>(w) * spp;
  const uint64_t total = row_bytes * h;
  std::vector<uint8_t> raw;
  raw.reserve(total);
  for (size_t s = 0; s < offsets.size() && raw.size() < total; ++s) {
    const uint64_t off = offsets[s], cnt = counts[s];
    if (off > n || cnt > n - off) return (*err = "invalid TIFF: strip outside the file", false);
    const uint64_t want = std::min<uint64_t>(total - raw.size(), row_bytes * rows_per_strip);
    if (compression == 1) {
      if (cnt < want) return (*err = "invalid TIFF: short strip", false);
      raw.insert(raw.end(), d + off, d + off + want);
    } else {
      const uint64_t target = raw.size() + want;
      uint64_t p = off;
      const uint64_t end = off + cnt;
      while (raw.size() < target) {
        if (p >= end) return (*err = "invalid TIFF: truncated PackBits strip", false);
        const int8_t c = static_cast<int8_t>(d[p++]);
        if (c >= 0) {
          const uint64_t len = static_cast<uint64_t>(c) + 1;
          if (len > end - p || raw.size() + len > target) return (*err = "invalid TIFF: bad PackBits run", false);
          raw.insert(raw.end(), d + p, d + p + len);
          p += len;
        } else if (c != -128) {
          const uint64_t len = static_cast<uint64_t>(1 - c);
          if (p >= end || raw.size() + len > target) return (*err = "invalid TIFF: bad PackBits run", false);
          raw.insert(raw.end(), len, d[p++]);
        }
      }
    }
  }
  if (raw.size() != total) return (*err = "invalid TIFF: missing pixel data", false);
  out->width = w;
  out->height = h;
  out->channels = channels;
  const uint64_t px = static_cast<uint64_t>(w) * h;
  out->pixels.resize(px * channels);
  for (uint64_t i = 0; i < px; ++i) {
    for (int c = 0; c < channels; ++c) {
      uint8_t val = raw[i * spp + c];
      out->pixels[i * channels + c] = photometric == 0 ? static_cast<uint8_t>(255 - val) : val;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// JPEG 2000 (openjpeg): a read-only memory stream; errors arrive through a callback and false returns.

struct J2kMemory {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

OPJ_SIZE_T j2k_read(void* buf, OPJ_SIZE_T nb, void* user) {
  auto* m = static_cast<J2kMemory*>(user);
  if (m->pos >= m->size) return static_cast<OPJ_SIZE_T>(-1);  // end of stream
  const size_t k = std::min<size_t>(nb, m->size - m->pos);
  std::memcpy(buf, m->data + m->pos, k);
  m->pos += k;
  return k;
}

OPJ_OFF_T j2k_skip(OPJ_OFF_T nb, void* user) {
  auto* m = static_cast<J2kMemory*>(user);
  if (nb < 0) {
    if (static_cast<uint64_t>(-nb) > m->pos) return -1;
    m->pos -= static_cast<size_t>(-nb);
    return nb;
  }
  // Skipping past the end leaves the stream at its end; the next read then reports end of stream.
  const uint64_t k = std::min<uint64_t>(static_cast<uint64_t>(nb), m->size - m->pos);
  m->pos += static_cast<size_t>(k);
  return nb;
}

OPJ_BOOL j2k_seek(OPJ_OFF_T off, void* user) {
  auto* m = static_cast<J2kMemory*>(user);
  if (off < 0 || static_cast<uint64_t>(off) > m->size) return OPJ_FALSE;
  m->pos = static_cast<size_t>(off);
  return OPJ_TRUE;
}

void j2k_on_error(const char* msg, void* user) {
  auto* e = static_cast<std::string*>(user);
  if (e->empty() && msg) {
    e->assign(msg);
    while (!e->empty() && (e->back() == '\n' || e->back() == '\r')) e->pop_back();
  }
}

void j2k_silent(const char*, void*) {}

// Owns the openjpeg objects for one decode.
struct J2kHandles {
  opj_codec_t* codec = nullptr;
  opj_stream_t* stream = nullptr;
  opj_image_t* image = nullptr;
  J2kHandles() = default;
  J2kHandles(const J2kHandles&) = delete;
  J2kHandles& operator=(const J2kHandles&) = delete;
  ~J2kHandles() {
    if (image) opj_image_destroy(image);
    if (stream) opj_stream_destroy(stream);
    if (codec) opj_destroy_codec(codec);
  }
};

bool decode_jpeg2000(const uint8_t* data, size_t size, Decoded* out, std::string* err) {
  const bool codestream = size >= 2 && data[0] == 0xFF && data[1] == 0x4F;
  J2kMemory mem{data, size, 0};
  std::string lib_error;
  J2kHandles h;
  h.codec = opj_create_decompress(codestream ? OPJ_CODEC_J2K : OPJ_CODEC_JP2);
  h.stream = opj_stream_create(size_t{1} << 16, OPJ_TRUE);
  if (!h.codec || !h.stream) return (*err = "openjpeg initialization failed", false);
  opj_stream_set_user_data(h.stream, &mem, nullptr);
  opj_stream_set_user_data_length(h.stream, size);
  opj_stream_set_read_function(h.stream, j2k_read);
  opj_stream_set_skip_function(h.stream, j2k_skip);
  opj_stream_set_seek_function(h.stream, j2k_seek);
  opj_set_error_handler(h.codec, j2k_on_error, &lib_error);
  opj_set_warning_handler(h.codec, j2k_silent, nullptr);
  opj_set_info_handler(h.codec, j2k_silent, nullptr);
  opj_dparameters_t params;
  opj_set_default_decoder_parameters(&params);
  auto fail = [&](const std::string& what) {
    *err = "invalid JPEG 2000: " + what;
    if (!lib_error.empty()) *err += " (" + lib_error + ")";
    return false;
  };
  if (!opj_setup_decoder(h.codec, &params)) return fail("decoder setup failed");
  // A truncated codestream is an error (as for JPEG), not a partially decoded picture.
  if (!opj_decoder_set_strict_mode(h.codec, OPJ_TRUE)) return fail("decoder setup failed");
  if (!opj_read_header(h.stream, h.codec, &h.image) || !h.image) return fail("cannot read the header");
  const opj_image_t* im = h.image;
  if (im->x1 <= im->x0 || im->y1 <= im->y0) return fail("empty image area");
  const uint64_t w = im->x1 - im->x0, ht = im->y1 - im->y0;
  if (!size_ok(w, ht, err)) return false;
  const uint32_t nc = im->numcomps;
  if (nc < 1 || nc > 4 || !im->comps) return fail("unsupported component count " + std::to_string(nc));
  if (!opj_decode(h.codec, h.stream, h.image) || !opj_end_decompress(h.codec, h.stream)) return fail("decoding failed");
  // Gray (+alpha) or RGB (+alpha); every used component full resolution with 1..16-bit samples.
  const int channels = nc >= 3 ? 3 : 1;
  if (im->color_space == OPJ_CLRSPC_CMYK || im->color_space == OPJ_CLRSPC_EYCC) {
    *err = "unsupported JPEG 2000 colour space (CMYK/e-YCC)";
    return false;
  }
  const uint32_t cw = im->comps[0].w, ch = im->comps[0].h;
  if (!size_ok(cw, ch, err)) return false;
  for (int c = 0; c < channels; ++c) {
    const opj_image_comp_t& comp = im->comps[c];
    if (!comp.data) return fail("component " + std::to_string(c) + " was not decoded");
    if (comp.w != cw || comp.h != ch || comp.dx != 1 || comp.dy != 1) {
      *err = "unsupported JPEG 2000: subsampled components";
      return false;
    }
    if (comp.prec < 1 || comp.prec > 16) {
      *err = "unsupported JPEG 2000 sample precision " + std::to_string(comp.prec);
      return false;
    }
  }
  out->width = cw;
  out->height = ch;
  out->channels = channels;
  const size_t px = static_cast<size_t>(cw) * ch;
  out->pixels.resize(px * channels);
  for (int c = 0; c < channels; ++c) {
    const opj_image_comp_t& comp = im->comps[c];
    const int32_t offset = comp.sgnd ? (1 << (comp.prec - 1)) : 0;
    const int32_t maxv = (1 << comp.prec) - 1;
    const OPJ_INT32* src = comp.data;
    uint8_t* o = out->pixels.data() + c;
    for (size_t i = 0; i < px; ++i) {
      const int32_t v = std::clamp<int32_t>(src[i] + offset, 0, maxv);
      uint8_t b;
      if (comp.prec == 8) b = static_cast<uint8_t>(v);
      else if (comp.prec > 8) b = static_cast<uint8_t>(v >> (comp.prec - 8));
      else b = static_cast<uint8_t>((v * 255 + maxv / 2) / maxv);
      o[i * channels] = b;
    }
  }
  if (channels == 3 && im->color_space == OPJ_CLRSPC_SYCC) {
    uint8_t* p = out->pixels.data();
    auto to8 = [](double v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); };
    for (size_t i = 0; i < px; ++i) {
      const double y = p[3 * i], cb = p[3 * i + 1] - 128.0, cr = p[3 * i + 2] - 128.0;
      p[3 * i] = to8(y + 1.402 * cr);
      p[3 * i + 1] = to8(y - 0.344136 * cb - 0.714136 * cr);
      p[3 * i + 2] = to8(y + 1.772 * cb);
    }
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// WebP (libwebp): still images; alpha is dropped by decoding straight to RGB.

const char* webp_status_name(VP8StatusCode s) {
  switch (s) {
    case VP8_STATUS_OUT_OF_MEMORY: return "out of memory";
    case VP8_STATUS_INVALID_PARAM: return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR: return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE: return "unsupported feature";
    case VP8_STATUS_SUSPENDED: return "suspended";
    case VP8_STATUS_USER_ABORT: return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA: return "truncated data";
    default: return "error";
  }
}

bool decode_webp(const uint8_t* data, size_t size, Decoded* out, std::string* err) {
  WebPBitstreamFeatures features;
  const VP8StatusCode st = WebPGetFeatures(data, size, &features);
  if (st != VP8_STATUS_OK) return (*err = std::string("invalid WebP: ") + webp_status_name(st), false);
  if (features.has_animation) return (*err = "unsupported WebP: animated images", false);
  if (features.width <= 0 || features.height <= 0) return (*err = "invalid WebP: bad dimensions", false);
  if (!size_ok(static_cast<uint64_t>(features.width), static_cast<uint64_t>(features.height), err)) return false;
  out->width = features.width;
  out->height = features.height;
  out->channels = 3;
  const size_t stride = static_cast<size_t>(features.width) * 3;
  out->pixels.resize(stride * static_cast<size_t>(features.height));
  if (!WebPDecodeRGBInto(data, size, out->pixels.data(), out->pixels.size(), static_cast<int>(stride))) {
    return (*err = "invalid WebP: decoding failed (corrupt or truncated data)", false);
  }
  return true;
}

}  // namespace

const char* detect_format(const uint8_t* d, size_t n) {
  if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return "jpeg";
  if (n >= 8 && std::memcmp(d, "\x89PNG\r\n\x1a\n", 8) == 0) return "png";
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return "bmp";
  if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6') return "pnm";
  if (n >= 4 && ((d[0] == 'I' && d[1] == 'I' && d[2] == 42 && d[3] == 0) || (d[0] == 'M' && d[1] == 'M' && d[2] == 0 && d[3] == 42))) {
    return "tiff";
  }
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0) return "webp";
  if ((n >= 12 && std::memcmp(d, "\x00\x00\x00\x0cjP  \r\n\x87\n", 12) == 0) ||
      (n >= 4 && d[0] == 0xFF && d[1] == 0x4F && d[2] == 0xFF && d[3] == 0x51)) {
    return "jpeg2000";
  }
  return nullptr;
}

Status decode(const uint8_t* data, size_t size, Decoded* out) {
  const char* fmt = detect_format(data, size);
  if (!fmt) return invalid_argument("unrecognized image format (" + std::to_string(size) + " bytes)");
  std::string err;
  bool ok = false;
  const std::string f = fmt;
  if (f == "jpeg") {
    ok = decode_jpeg(data, size, out, &err);
  } else if (f == "png") {
    std::vector<uint8_t*> rows;
    ok = decode_png(data, size, out, &rows, &err);
  } else if (f == "bmp") {
    ok = decode_bmp(data, size, out, &err);
  } else if (f == "pnm") {
    ok = decode_pnm(data, size, out, &err);
  } else if (f == "tiff") {
    ok = decode_tiff(data, size, out, &err);
  } else if (f == "jpeg2000") {
    ok = decode_jpeg2000(data, size, out, &err);
  } else if (f == "webp") {
    ok = decode_webp(data, size, out, &err);
  } else {
    return not_implemented(f + " images are not supported");
  }
  if (!ok) return invalid_argument(err);
  return Status::Ok();
}

}  // namespace image

namespace {

Status image_decoder_compute(ep::KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DataType::kUInt8 || x.rank() != 1) {
    return ctx.error("encoded_stream must be a 1-D uint8 tensor, got " + x.describe(), StatusCode::kInvalidArgument);
  }
  const std::string fmt = ctx.info().attr_string("pixel_format", "RGB");
  if (fmt != "RGB" && fmt != "BGR" && fmt != "Grayscale") {
    return ctx.error("pixel_format must be RGB, BGR or Grayscale, got '" + fmt + "'", StatusCode::kInvalidModel);
  }
  image::Decoded img;
  Status s = image::decode(x.data<uint8_t>(), static_cast<size_t>(x.numel()), &img);
  if (!s.ok()) return ctx.error(s.message(), s.code());
  const int64_t h = img.height, w = img.width;
  const int64_t px = h * w;
  const uint8_t* p = img.pixels.data();
  if (fmt == "Grayscale") {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kUInt8, {h, w, 1}));
    uint8_t* o = y->data<uint8_t>();
    if (img.channels == 1) {
      std::memcpy(o, p, static_cast<size_t>(px));
    } else {
      for (int64_t i = 0; i < px; ++i) o[i] = image::rgb_to_luma(p[3 * i], p[3 * i + 1], p[3 * i + 2]);
    }
    return Status::Ok();
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kUInt8, {h, w, 3}));
  uint8_t* o = y->data<uint8_t>();
  const bool bgr = fmt == "BGR";
  if (img.channels == 1) {
    for (int64_t i = 0; i < px; ++i) o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = p[i];
  } else if (!bgr) {
    std::memcpy(o, p, static_cast<size_t>(px * 3));
  } else {
    for (int64_t i = 0; i < px; ++i) {
      o[3 * i] = p[3 * i + 2];
      o[3 * i + 1] = p[3 * i + 1];
      o[3 * i + 2] = p[3 * i];
    }
  }
  return Status::Ok();
}

}  // namespace

void register_image_decoder_ops(ep::KernelRegistry& r) {
  r.add_fn("", "ImageDecoder", 20, INT64_MAX, &image_decoder_compute);
}

}  // namespace nxrt::ops
