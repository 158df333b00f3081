// Protobuf wire format: a bounds-checked decoder over a byte span and a small encoder.
//
// The decoder never reads past its span: every length is checked against the remaining bytes,
// varints longer than 10 bytes are rejected, and unknown fields (groups included) are skipped with a
// nesting limit. Errors carry the field path ("ModelProto.graph.node[3].attribute[1].t.dims") and
// the byte offset from the start of the file, as Status(kInvalidModel).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "nxrt/dims.h"
#include "nxrt/status.h"

namespace nxrt::onnx::wire {

enum WireType : uint8_t {
  kVarint = 0,
  kFixed64 = 1,
  kLen = 2,
  kStartGroup = 3,
  kEndGroup = 4,
  kFixed32 = 5,
};

const char* wire_type_name(int wt);

// One decoded field. For kLen, `data`/`size` is the payload (already bounds-checked).
struct Field {
  uint32_t number = 0;
  WireType type = kVarint;
  uint64_t value = 0;            // varint, fixed32 or fixed64 payload
  const uint8_t* data = nullptr;  // kLen payload
  size_t size = 0;
  size_t offset = 0;  // byte offset of the tag from the start of the file
};

// The error context: the file start (for offsets), the field path and the message nesting depth.
class Context {
 public:
  explicit Context(const uint8_t* base) : base_(base) {}

  struct Elem {
    const char* name;
    int64_t index;  // -1: not a repeated element
  };

  void push(const char* name, int64_t index = -1) { path_.push_back({name, index}); }
  void pop() { path_.pop_back(); }
  std::string path() const;
  size_t offset_of(const uint8_t* p) const { return static_cast<size_t>(p - base_); }
  const uint8_t* base() const { return base_; }

  // "<path>[.field]: <what> at byte <offset>"
  Status error(size_t offset, const std::string& what, const char* field = nullptr) const;
  // "<path>[.field]: <what>" (semantic errors with no single byte to point at)
  Status error_no_offset(const std::string& what, const char* field = nullptr) const;

  int depth = 0;  // current message nesting

 private:
  const uint8_t* base_;
  std::vector<Elem> path_;
};

// RAII: push a path element and count one nesting level.
class Scope {
 public:
  Scope(Context& c, const char* name, int64_t index = -1) : c_(c) {
    c_.push(name, index);
    ++c_.depth;
  }
  ~Scope() {
    --c_.depth;
    c_.pop();
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  Context& c_;
};

constexpr int kMaxMessageDepth = 200;

// Reads fields of one message from [begin, end).
class Reader {
 public:
  Reader(Context& ctx, const uint8_t* begin, size_t size) : ctx_(ctx), p_(begin), end_(begin + size) {}
  bool done() const { return p_ >= end_; }
  // Reads the next field. Unknown groups are skipped by the caller via skip(); a stray end-group or
  // an invalid wire type is an error.
  Status next(Field& f);
  // Skips a field the caller does not know (groups included).
  Status skip(const Field& f);
  Context& ctx() { return ctx_; }

 private:
  Context& ctx_;
  const uint8_t* p_;
  const uint8_t* end_;
};

// Decodes a varint at p (< end). Returns bytes consumed, 0 when truncated, -1 when longer than 10
// bytes / overflowing 64 bits.
inline int decode_varint(const uint8_t* p, const uint8_t* end, uint64_t* out) {
  uint64_t v = 0;
  for (int i = 0; i < 10; ++i) {
    if (p + i >= end) return 0;
    uint8_t b = p[i];
    if (i == 9 && b > 1) return -1;
    v |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
    if (!(b & 0x80)) {
      *out = v;
      return i + 1;
    }
  }
  return -1;
}

// ---- typed accessors: check the wire type, name the field in errors ----

Status expect_type(Context& c, const Field& f, WireType want, const char* name);
Status read_varint(Context& c, const Field& f, const char* name, uint64_t* out);
Status read_int64(Context& c, const Field& f, const char* name, int64_t* out);
Status read_int32(Context& c, const Field& f, const char* name, int32_t* out);  // range-checked
Status read_float(Context& c, const Field& f, const char* name, float* out);
Status read_string(Context& c, const Field& f, const char* name, std::string* out);
// Repeated scalars: packed (kLen) or one unpacked element.
Status append_varints(Context& c, const Field& f, const char* name, std::vector<int64_t>* out);
Status append_varints(Context& c, const Field& f, const char* name, Dims* out);
Status append_varints32(Context& c, const Field& f, const char* name, std::vector<int32_t>* out);
Status append_varintsu64(Context& c, const Field& f, const char* name, std::vector<uint64_t>* out);
Status append_floats(Context& c, const Field& f, const char* name, std::vector<float>* out);
Status append_doubles(Context& c, const Field& f, const char* name, std::vector<double>* out);

// ---- encoder ----

class Writer {
 public:
  std::string& buffer() { return buf_; }
  const std::string& buffer() const { return buf_; }
  std::string take() { return std::move(buf_); }

  void raw_varint(uint64_t v);
  void tag(uint32_t field, WireType wt) { raw_varint((static_cast<uint64_t>(field) << 3) | wt); }
  void varint(uint32_t field, uint64_t v) {
    tag(field, kVarint);
    raw_varint(v);
  }
  void int64(uint32_t field, int64_t v) { varint(field, static_cast<uint64_t>(v)); }
  void fixed32(uint32_t field, uint32_t v);
  void fixed64(uint32_t field, uint64_t v);
  void float32(uint32_t field, float v) {
    uint32_t b;
    std::memcpy(&b, &v, 4);
    fixed32(field, b);
  }
  void bytes(uint32_t field, std::string_view s) {
    tag(field, kLen);
    raw_varint(s.size());
    buf_.append(s.data(), s.size());
  }
  void bytes(uint32_t field, const void* p, size_t n) { bytes(field, std::string_view(static_cast<const char*>(p), n)); }
  void message(uint32_t field, const Writer& w) { bytes(field, w.buf_); }
  void packed_int64(uint32_t field, const std::vector<int64_t>& v);
  void packed_int32(uint32_t field, const std::vector<int32_t>& v);
  void packed_uint64(uint32_t field, const std::vector<uint64_t>& v);
  void packed_float(uint32_t field, const std::vector<float>& v);
  void packed_double(uint32_t field, const std::vector<double>& v);

 private:
  std::string buf_;
};

}  // namespace nxrt::onnx::wire
