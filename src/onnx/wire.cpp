#include "onnx/wire.h"

#include <bit>
#include <limits>

static_assert(std::endian::native == std::endian::little, "the ONNX reader assumes a little-endian host");

namespace nxrt::onnx::wire {

const char* wire_type_name(int wt) {
  switch (wt) {
    case kVarint: return "varint";
    case kFixed64: return "fixed64";
    case kLen: return "length-delimited";
    case kStartGroup: return "start-group";
    case kEndGroup: return "end-group";
    case kFixed32: return "fixed32";
  }
  return "invalid";
}

std::string Context::path() const {
  std::string s;
  for (size_t i = 0; i < path_.size(); ++i) {
    if (i) s += '.';
    s += path_[i].name;
    if (path_[i].index >= 0) {
      s += '[';
      s += std::to_string(path_[i].index);
      s += ']';
    }
  }
  return s;
}

Status Context::error(size_t offset, const std::string& what, const char* field) const {
  std::string p = path();
  if (field) {
    if (!p.empty()) p += '.';
    p += field;
  }
  return invalid_model(p + ": " + what + " at byte " + std::to_string(offset));
}

Status Context::error_no_offset(const std::string& what, const char* field) const {
  std::string p = path();
  if (field) {
    if (!p.empty()) p += '.';
    p += field;
  }
  return invalid_model(p + ": " + what);
}

Status Reader::next(Field& f) {
  const size_t tag_off = ctx_.offset_of(p_);
  uint64_t tag = 0;
  int n = decode_varint(p_, end_, &tag);
  if (n == 0) return ctx_.error(tag_off, "truncated field tag");
  if (n < 0) return ctx_.error(tag_off, "field tag varint longer than 10 bytes");
  p_ += n;
  const uint64_t number = tag >> 3;
  const int wt = static_cast<int>(tag & 7);
  if (number == 0 || number > 536870911u) {
    return ctx_.error(tag_off, "invalid field number " + std::to_string(number));
  }
  f.number = static_cast<uint32_t>(number);
  f.type = static_cast<WireType>(wt);
  f.offset = tag_off;
  f.data = nullptr;
  f.size = 0;
  f.value = 0;
  auto field_desc = [&] { return "field " + std::to_string(number); };
  switch (wt) {
    case kVarint: {
      int m = decode_varint(p_, end_, &f.value);
      if (m == 0) return ctx_.error(tag_off, "truncated varint in " + field_desc());
      if (m < 0) return ctx_.error(tag_off, "varint longer than 10 bytes in " + field_desc());
      p_ += m;
      return Status::Ok();
    }
    case kFixed64:
      if (end_ - p_ < 8) return ctx_.error(tag_off, "truncated fixed64 in " + field_desc());
      std::memcpy(&f.value, p_, 8);
      p_ += 8;
      return Status::Ok();
    case kFixed32: {
      if (end_ - p_ < 4) return ctx_.error(tag_off, "truncated fixed32 in " + field_desc());
      uint32_t v;
      std::memcpy(&v, p_, 4);
      f.value = v;
      p_ += 4;
      return Status::Ok();
    }
    case kLen: {
      uint64_t len = 0;
      int m = decode_varint(p_, end_, &len);
      if (m == 0) return ctx_.error(tag_off, "truncated length in " + field_desc());
      if (m < 0) return ctx_.error(tag_off, "length varint longer than 10 bytes in " + field_desc());
      p_ += m;
      const uint64_t remaining = static_cast<uint64_t>(end_ - p_);
      if (len > remaining) {
        return ctx_.error(tag_off, "length " + std::to_string(len) + " of " + field_desc() + " exceeds the " +
                                       std::to_string(remaining) + " remaining bytes");
      }
      f.data = p_;
      f.size = static_cast<size_t>(len);
      p_ += len;
      return Status::Ok();
    }
    case kStartGroup:
      return Status::Ok();  // the caller skips it (no ONNX field is a group)
    case kEndGroup:
      return ctx_.error(tag_off, "unexpected end-group for " + field_desc());
    default:
      return ctx_.error(tag_off, "invalid wire type " + std::to_string(wt) + " for " + field_desc());
  }
}

Status Reader::skip(const Field& f) {
  if (f.type != kStartGroup) return Status::Ok();  // already consumed by next()
  // Skip nested fields until the matching end-group.
  std::vector<uint32_t> open{f.number};
  while (!open.empty()) {
    if (p_ >= end_) return ctx_.error(f.offset, "unterminated group (field " + std::to_string(f.number) + ")");
    const size_t tag_off = ctx_.offset_of(p_);
    uint64_t tag = 0;
    int n = decode_varint(p_, end_, &tag);
    if (n == 0) return ctx_.error(tag_off, "truncated field tag in group");
    if (n < 0) return ctx_.error(tag_off, "field tag varint longer than 10 bytes in group");
    const int wt = static_cast<int>(tag & 7);
    const uint64_t number = tag >> 3;
    if (wt == kEndGroup) {
      p_ += n;
      if (number != open.back()) {
        return ctx_.error(tag_off, "end-group for field " + std::to_string(number) + " does not match start-group " +
                                       std::to_string(open.back()));
      }
      open.pop_back();
      continue;
    }
    if (wt == kStartGroup) {
      p_ += n;
      if (number == 0) return ctx_.error(tag_off, "invalid field number 0");
      if (open.size() + ctx_.depth >= static_cast<size_t>(kMaxMessageDepth)) {
        return ctx_.error(tag_off, "groups nested too deeply");
      }
      open.push_back(static_cast<uint32_t>(number));
      continue;
    }
    Field inner;
    NXRT_RETURN_IF_ERROR(next(inner));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------

Status expect_type(Context& c, const Field& f, WireType want, const char* name) {
  if (f.type == want) return Status::Ok();
  return c.error(f.offset, std::string("expected wire type ") + wire_type_name(want) + ", got " +
                               wire_type_name(f.type),
                 name);
}

Status read_varint(Context& c, const Field& f, const char* name, uint64_t* out) {
  NXRT_RETURN_IF_ERROR(expect_type(c, f, kVarint, name));
  *out = f.value;
  return Status::Ok();
}

Status read_int64(Context& c, const Field& f, const char* name, int64_t* out) {
  NXRT_RETURN_IF_ERROR(expect_type(c, f, kVarint, name));
  *out = static_cast<int64_t>(f.value);
  return Status::Ok();
}

Status read_int32(Context& c, const Field& f, const char* name, int32_t* out) {
  NXRT_RETURN_IF_ERROR(expect_type(c, f, kVarint, name));
  const int64_t v = static_cast<int64_t>(f.value);
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max()) {
    return c.error(f.offset, "value " + std::to_string(v) + " does not fit int32", name);
  }
  *out = static_cast<int32_t>(v);
  return Status::Ok();
}

Status read_float(Context& c, const Field& f, const char* name, float* out) {
  NXRT_RETURN_IF_ERROR(expect_type(c, f, kFixed32, name));
  uint32_t b = static_cast<uint32_t>(f.value);
  std::memcpy(out, &b, 4);
  return Status::Ok();
}

Status read_string(Context& c, const Field& f, const char* name, std::string* out) {
  NXRT_RETURN_IF_ERROR(expect_type(c, f, kLen, name));
  out->assign(reinterpret_cast<const char*>(f.data), f.size);
  return Status::Ok();
}

namespace {

template <typename Vec>
Status append_varints_impl(Context& c, const Field& f, const char* name, Vec* out) {
  using T = typename Vec::value_type;
  if (f.type == kVarint) {
    out->push_back(static_cast<T>(f.value));
    return Status::Ok();
  }
  if (f.type != kLen) {
    return c.error(f.offset, std::string("expected wire type varint or length-delimited (packed), got ") +
                                 wire_type_name(f.type),
                   name);
  }
  const uint8_t* p = f.data;
  const uint8_t* end = f.data + f.size;
  size_t count = 0;
  for (const uint8_t* q = p; q < end; ++q) count += !(*q & 0x80);
  out->reserve(out->size() + count);
  while (p < end) {
    uint64_t v = 0;
    int n = decode_varint(p, end, &v);
    if (n == 0) return c.error(c.offset_of(p), "truncated varint in packed field", name);
    if (n < 0) return c.error(c.offset_of(p), "varint longer than 10 bytes in packed field", name);
    out->push_back(static_cast<T>(v));
    p += n;
  }
  return Status::Ok();
}

template <typename T, WireType kWt>
Status append_fixed_impl(Context& c, const Field& f, const char* name, std::vector<T>* out) {
  if (f.type == kWt) {
    T v;
    if constexpr (sizeof(T) == 4) {
      uint32_t b = static_cast<uint32_t>(f.value);
      std::memcpy(&v, &b, 4);
    } else {
      std::memcpy(&v, &f.value, 8);
    }
    out->push_back(v);
    return Status::Ok();
  }
  if (f.type != kLen) {
    return c.error(f.offset, std::string("expected wire type ") + wire_type_name(kWt) +
                                 " or length-delimited (packed), got " + wire_type_name(f.type),
                   name);
  }
  if (f.size % sizeof(T) != 0) {
    return c.error(f.offset, "packed field of " + std::to_string(f.size) + " bytes is not a multiple of " +
                                 std::to_string(sizeof(T)),
                   name);
  }
  const size_t n = f.size / sizeof(T);
  const size_t old = out->size();
  out->resize(old + n);
  if (n) std::memcpy(out->data() + old, f.data, f.size);
  return Status::Ok();
}

}  // namespace

Status append_varints(Context& c, const Field& f, const char* name, std::vector<int64_t>* out) {
  return append_varints_impl(c, f, name, out);
}
Status append_varints(Context& c, const Field& f, const char* name, Dims* out) {
  return append_varints_impl(c, f, name, out);
}
Status append_varints32(Context& c, const Field& f, const char* name, std::vector<int32_t>* out) {
  return append_varints_impl(c, f, name, out);
}
Status append_varintsu64(Context& c, const Field& f, const char* name, std::vector<uint64_t>* out) {
  return append_varints_impl(c, f, name, out);
}
Status append_floats(Context& c, const Field& f, const char* name, std::vector<float>* out) {
  return append_fixed_impl<float, kFixed32>(c, f, name, out);
}
Status append_doubles(Context& c, const Field& f, const char* name, std::vector<double>* out) {
  return append_fixed_impl<double, kFixed64>(c, f, name, out);
}

// ---------------------------------------------------------------------------------------------

void Writer::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    buf_.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  buf_.push_back(static_cast<char>(v));
}

void Writer::fixed32(uint32_t field, uint32_t v) {
  tag(field, kFixed32);
  char b[4];
  std::memcpy(b, &v, 4);
  buf_.append(b, 4);
}

void Writer::fixed64(uint32_t field, uint64_t v) {
  tag(field, kFixed64);
  char b[8];
  std::memcpy(b, &v, 8);
  buf_.append(b, 8);
}

void Writer::packed_int64(uint32_t field, const std::vector<int64_t>& v) {
  if (v.empty()) return;
  Writer w;
  for (int64_t x : v) w.raw_varint(static_cast<uint64_t>(x));
  bytes(field, w.buf_);
}

void Writer::packed_int32(uint32_t field, const std::vector<int32_t>& v) {
  if (v.empty()) return;
  Writer w;
  for (int32_t x : v) w.raw_varint(static_cast<uint64_t>(static_cast<int64_t>(x)));
  bytes(field, w.buf_);
}

void Writer::packed_uint64(uint32_t field, const std::vector<uint64_t>& v) {
  if (v.empty()) return;
  Writer w;
  for (uint64_t x : v) w.raw_varint(x);
  bytes(field, w.buf_);
}

void Writer::packed_float(uint32_t field, const std::vector<float>& v) {
  if (v.empty()) return;
  bytes(field, v.data(), v.size() * sizeof(float));
}

void Writer::packed_double(uint32_t field, const std::vector<double>& v) {
  if (v.empty()) return;
  bytes(field, v.data(), v.size() * sizeof(double));
}

}  // namespace nxrt::onnx::wire
