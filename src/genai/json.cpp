#include "genai/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "genai/utf8.h"

namespace nxrt::genai {

Json Json::number(double d) {
  Number n;
  n.value = d;
  if (std::isfinite(d) && d == std::trunc(d) && std::fabs(d) < 9.2e18) {
    n.is_int = true;
    n.int_value = static_cast<int64_t>(d);
  }
  return Json(Storage(n));
}

Json Json::integer(int64_t i) {
  Number n;
  n.value = static_cast<double>(i);
  n.int_value = i;
  n.is_int = true;
  return Json(Storage(n));
}

const char* Json::type_name() const {
  switch (type()) {
    case Type::kNull: return "null";
    case Type::kBool: return "bool";
    case Type::kNumber: return "number";
    case Type::kString: return "string";
    case Type::kArray: return "array";
    case Type::kObject: return "object";
  }
  return "?";
}

int64_t Json::as_int() const {
  if (!is_number()) return 0;
  const Number& n = std::get<Number>(v_);
  if (n.is_int) return n.int_value;
  if (!std::isfinite(n.value)) return 0;
  if (n.value >= 9.2e18) return std::numeric_limits<int64_t>::max();
  if (n.value <= -9.2e18) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(n.value);
}

const std::string& Json::as_string() const {
  static const std::string kEmpty;
  return is_string() ? std::get<std::string>(v_) : kEmpty;
}

const Json::Array& Json::as_array() const {
  static const Array kEmpty;
  return is_array() ? std::get<Array>(v_) : kEmpty;
}

const Json::Object& Json::as_object() const {
  static const Object kEmpty;
  return is_object() ? std::get<Object>(v_) : kEmpty;
}

const Json* Json::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const Member& m : std::get<Object>(v_)) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

std::string Json::get_string(std::string_view key, std::string def) const {
  const Json* v = find(key);
  return v && v->is_string() ? v->as_string() : def;
}

int64_t Json::get_int(std::string_view key, int64_t def) const {
  const Json* v = find(key);
  return v && v->is_number() ? v->as_int() : def;
}

double Json::get_double(std::string_view key, double def) const {
  const Json* v = find(key);
  return v && v->is_number() ? v->as_double() : def;
}

bool Json::get_bool(std::string_view key, bool def) const {
  const Json* v = find(key);
  return v && v->is_bool() ? v->as_bool() : def;
}

namespace {


void dump_value(const Json& v, std::string& out) {
  switch (v.type()) {
    case Json::Type::kNull: out += "null"; break;
    case Json::Type::kBool: out += v.as_bool() ? "true" : "false"; break;
    case Json::Type::kNumber: {
      if (v.is_int()) {
        out += std::to_string(v.as_int());
      } else if (!std::isfinite(v.as_double())) {
        out += "null";
      } else {
        char buf[64];
        auto r = std::to_chars(buf, buf + sizeof(buf), v.as_double());
        out.append(buf, r.ptr);
      }
      break;
    }
    case Json::Type::kString: append_json_string(out, v.as_string()); break;
    case Json::Type::kArray: {
      out += '[';
      bool first = true;
      for (const Json& e : v.as_array()) {
        if (!first) out += ',';
        first = false;
        dump_value(e, out);
      }
      out += ']';
      break;
    }
    case Json::Type::kObject: {
      out += '{';
      bool first = true;
      for (const auto& m : v.as_object()) {
        if (!first) out += ',';
        first = false;
        append_json_string(out, m.first);
        out += ':';
        dump_value(m.second, out);
      }
      out += '}';
      break;
    }
  }
}

}  // namespace

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    if (c < 0x80 || !ensure_ascii) {
      out += static_cast<char>(c);
      ++i;
      continue;
    }
    // ensure_ascii: decode one code point (a malformed byte stands for U+FFFD).
    const uint32_t cp = next_cp(s, i);
    if (cp >= 0x10000) {
      const uint32_t v = cp - 0x10000;
      std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
    } else {
      std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    }
    out += buf;
  }
  out += '"';
}

std::string Json::dump() const {
  std::string out;
  dump_value(*this, out);
  return out;
}

class JsonParser {
 public:
  explicit JsonParser(std::string_view text) : s_(text) {}

  Result<Json> parse_document() {
    skip_ws();
    Json v;
    NXRT_RETURN_IF_ERROR(parse_value(v, 0));
    skip_ws();
    if (pos_ != s_.size()) return error("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 512;

  Status error(const std::string& what) const { return error_at(what, pos_); }
  Status error_at(const std::string& what, size_t at) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return invalid_argument("json: " + what + " at byte " + std::to_string(at) + " (line " +
                            std::to_string(line) + ", column " + std::to_string(col) + ")");
  }

  void skip_ws() {
    while (pos_ < s_.size()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  bool consume_literal(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) == lit) {
      pos_ += lit.size();
      return true;
    }
    return false;
  }

  Status parse_value(Json& out, int depth) {
    if (depth > kMaxDepth) return error("nesting deeper than 512 levels");
    if (pos_ >= s_.size()) return error("unexpected end of input, expected a value");
    char c = s_[pos_];
    switch (c) {
      case '{': return parse_object(out, depth);
      case '[': return parse_array(out, depth);
      case '"': {
        std::string str;
        NXRT_RETURN_IF_ERROR(parse_string(str));
        out = Json(Json::Storage(std::move(str)));
        return Status::Ok();
      }
      case 't':
        if (consume_literal("true")) {
          out = Json::boolean(true);
          return Status::Ok();
        }
        break;
      case 'f':
        if (consume_literal("false")) {
          out = Json::boolean(false);
          return Status::Ok();
        }
        break;
      case 'n':
        if (consume_literal("null")) {
          out = Json();
          return Status::Ok();
        }
        break;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number(out);
    }
    return error(std::string("unexpected character '") + printable(c) + "', expected a value");
  }

  static std::string printable(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\x%02x", u);
    return buf;
  }

  Status parse_object(Json& out, int depth) {
    ++pos_;  // '{'
    Json::Object members;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      out = Json::object(std::move(members));
      return Status::Ok();
    }
    while (true) {
      skip_ws();
      if (pos_ >= s_.size()) return error("unexpected end of input in an object");
      if (s_[pos_] != '"') return error("expected a string key in an object");
      std::string key;
      NXRT_RETURN_IF_ERROR(parse_string(key));
      skip_ws();
      if (pos_ >= s_.size() || s_[pos_] != ':') return error("expected ':' after an object key");
      ++pos_;
      skip_ws();
      members.emplace_back(std::move(key), Json());
      NXRT_RETURN_IF_ERROR(parse_value(members.back().second, depth + 1));
      skip_ws();
      if (pos_ >= s_.size()) return error("unexpected end of input in an object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        break;
      }
      return error("expected ',' or '}' in an object");
    }
    out = Json::object(std::move(members));
    return Status::Ok();
  }

  Status parse_array(Json& out, int depth) {
    ++pos_;  // '['
    Json::Array items;
    skip_ws();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      out = Json::array(std::move(items));
      return Status::Ok();
    }
    while (true) {
      skip_ws();
      items.emplace_back();
      NXRT_RETURN_IF_ERROR(parse_value(items.back(), depth + 1));
      skip_ws();
      if (pos_ >= s_.size()) return error("unexpected end of input in an array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        break;
      }
      return error("expected ',' or ']' in an array");
    }
    out = Json::array(std::move(items));
    return Status::Ok();
  }


  bool read_hex4(size_t at, uint32_t* v) const {
    if (at + 4 > s_.size()) return false;
    uint32_t r = 0;
    for (size_t i = at; i < at + 4; ++i) {
      char c = s_[i];
      r <<= 4;
      if (c >= '0' && c <= '9') {
        r |= static_cast<uint32_t>(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        r |= static_cast<uint32_t>(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        r |= static_cast<uint32_t>(c - 'A' + 10);
      } else {
        return false;
      }
    }
    *v = r;
    return true;
  }

  Status parse_string(std::string& out) {
    size_t start = pos_;
    ++pos_;  // '"'
    while (true) {
      // Copy the run of plain characters in one go.
      size_t run = pos_;
      while (run < s_.size()) {
        unsigned char c = static_cast<unsigned char>(s_[run]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        ++run;
      }
      out.append(s_.data() + pos_, run - pos_);
      pos_ = run;
      if (pos_ >= s_.size()) return error_at("unterminated string", start);
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        ++pos_;
        return Status::Ok();
      }
      if (c < 0x20) return error("control character in a string (must be escaped)");
      // Backslash escape.
      if (pos_ + 1 >= s_.size()) return error_at("unterminated string", start);
      char e = s_[pos_ + 1];
      switch (e) {
        case '"': out += '"'; pos_ += 2; break;
        case '\\': out += '\\'; pos_ += 2; break;
        case '/': out += '/'; pos_ += 2; break;
        case 'b': out += '\b'; pos_ += 2; break;
        case 'f': out += '\f'; pos_ += 2; break;
        case 'n': out += '\n'; pos_ += 2; break;
        case 'r': out += '\r'; pos_ += 2; break;
        case 't': out += '\t'; pos_ += 2; break;
        case 'u': {
          uint32_t cp;
          if (!read_hex4(pos_ + 2, &cp)) return error("bad \\u escape (expected 4 hex digits)");
          pos_ += 6;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            uint32_t lo;
            if (pos_ + 1 < s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u' && read_hex4(pos_ + 2, &lo) &&
                lo >= 0xDC00 && lo <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              pos_ += 6;
            } else {
              cp = 0xFFFD;  // lone high surrogate
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            cp = 0xFFFD;  // lone low surrogate
          }
          append_utf8(out, cp);
          break;
        }
        default:
          return error(std::string("bad escape '\\") + printable(e) + "' in a string");
      }
    }
  }

  Status parse_number(Json& out) {
    size_t start = pos_;
    size_t i = pos_;
    if (i < s_.size() && s_[i] == '-') ++i;
    if (i >= s_.size()) return error_at("bad number", start);
    if (s_[i] == '0') {
      ++i;
    } else if (s_[i] >= '1' && s_[i] <= '9') {
      while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') ++i;
    } else {
      return error_at("bad number (expected a digit)", i);
    }
    bool integral = true;
    if (i < s_.size() && s_[i] == '.') {
      integral = false;
      ++i;
      if (i >= s_.size() || s_[i] < '0' || s_[i] > '9') return error_at("bad number (expected a digit after '.')", i);
      while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') ++i;
    }
    if (i < s_.size() && (s_[i] == 'e' || s_[i] == 'E')) {
      integral = false;
      ++i;
      if (i < s_.size() && (s_[i] == '+' || s_[i] == '-')) ++i;
      if (i >= s_.size() || s_[i] < '0' || s_[i] > '9') return error_at("bad number (expected an exponent digit)", i);
      while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') ++i;
    }
    const char* b = s_.data() + start;
    const char* e = s_.data() + i;
    pos_ = i;
    if (integral) {
      int64_t iv = 0;
      auto r = std::from_chars(b, e, iv);
      if (r.ec == std::errc() && r.ptr == e) {
        out = Json::integer(iv);
        return Status::Ok();
      }
    }
    double d = 0;
    auto r = std::from_chars(b, e, d);
    if (r.ec == std::errc::result_out_of_range) {
      // Overflow to +-inf, underflow to 0, like JSON.parse.
      bool neg = *b == '-';
      bool tiny = false;
      for (const char* p = b; p < e; ++p) {
        if (*p == 'e' || *p == 'E') {
          tiny = p + 1 < e && p[1] == '-';
          break;
        }
      }
      d = tiny ? (neg ? -0.0 : 0.0) : (neg ? -HUGE_VAL : HUGE_VAL);
    } else if (r.ec != std::errc() || r.ptr != e) {
      return error_at("bad number", start);
    }
    Json::Number n;
    n.value = d;
    out = Json(Json::Storage(n));
    return Status::Ok();
  }

  std::string_view s_;
  size_t pos_ = 0;
};

Result<Json> parse_json(std::string_view text) { return JsonParser(text).parse_document(); }

Result<Json> parse_json_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open '" + path + "'");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("cannot read '" + path + "'");
  std::string text = std::move(ss).str();
  auto r = parse_json(text);
  if (!r.ok()) return r.status().with_context(path + ": ");
  return r;
}

}  // namespace nxrt::genai
