// The ImageDecoder formats decoded through Debian's libraries: JPEG (libjpeg-turbo), PNG (libpng),
// JPEG 2000 (openjpeg) and WebP (libwebp). Built without them (NXRT_WITH_IMAGE_CODECS=OFF), these
// formats are reported as such and the hand-written ones (image/image_decoder.cpp) still decode.
//
// Corrupt data never aborts: libjpeg and libpng report errors through handlers that longjmp back here.
// The setjmp functions keep no C++ objects with destructors of their own and write only through pointers
// to caller-owned memory. openjpeg reads from a bounds-checked memory stream and reports errors through a
// callback plus a false return; libwebp returns status codes.
#include <algorithm>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "ops/image/image_codecs.h"

#if NXRT_HAVE_IMAGE_CODECS
#include <jpeglib.h>
#include <jerror.h>
#include <openjpeg.h>
#include <png.h>
#include <webp/decode.h>

namespace nxrt::ops::image {

namespace {

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

bool decode_with_library(const std::string& format, const uint8_t* data, size_t size, Decoded* out, std::string* err) {
  if (format == "jpeg") return decode_jpeg(data, size, out, err);
  if (format == "png") {
    std::vector<uint8_t*> rows;
    return decode_png(data, size, out, &rows, err);
  }
  if (format == "jpeg2000") return decode_jpeg2000(data, size, out, err);
  if (format == "webp") return decode_webp(data, size, out, err);
  return (*err = format + " is not a library-decoded format", false);
}

}  // namespace nxrt::ops::image

#else

namespace nxrt::ops::image {

bool decode_with_library(const std::string& format, const uint8_t*, size_t, Decoded*, std::string* err) {
  *err = format + " images: nxrt was built without image codec libraries (NXRT_WITH_IMAGE_CODECS=OFF)";
  return false;
}

}  // namespace nxrt::ops::image

#endif
