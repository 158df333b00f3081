// ImageDecoder (opset 20): encoded image bytes (1-D uint8) -> [H, W, C] uint8 in pixel_format RGB, BGR
// (C = 3) or Grayscale (C = 1).
//
// Formats: JPEG (libjpeg-turbo), PNG (libpng), JPEG 2000 (openjpeg; JP2 boxes or a raw codestream), WebP
// (libwebp; still images, lossy or lossless), and small hand-written decoders for BMP, PNM (P1-P6) and
// baseline TIFF (8-bit, uncompressed or PackBits). Alpha channels are dropped. Grayscale from colour uses the ITU-R 601-2 luma transform with the same
// fixed-point rounding as PIL's convert("L"), the reference implementation's decoder.
//
// The library-backed formats are in library_codecs.cpp (optional: NXRT_WITH_IMAGE_CODECS).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ops/common.h"
#include "ops/image/image_codecs.h"

namespace nxrt::ops {
namespace image {

namespace {

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

}  // namespace

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
  if (f == "jpeg" || f == "png" || f == "jpeg2000" || f == "webp") {
    ok = decode_with_library(f, data, size, out, &err);
  } else if (f == "bmp") {
    ok = decode_bmp(data, size, out, &err);
  } else if (f == "pnm") {
    ok = decode_pnm(data, size, out, &err);
  } else if (f == "tiff") {
    ok = decode_tiff(data, size, out, &err);
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
