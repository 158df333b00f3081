// A small general JSON reader (RFC 8259): parses text into a tree of null / bool / number / string /
// array / object values. Errors are values and name the byte offset (and line:column) of the problem.
// Objects keep their members in file order (duplicate keys are kept; find() returns the first).
// Strings hold UTF-8; \uXXXX escapes are decoded (a lone surrogate becomes U+FFFD).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::genai {

class Json {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Json>;
  using Member = std::pair<std::string, Json>;
  using Object = std::vector<Member>;
  struct Number {
    double value = 0;
    int64_t int_value = 0;  // valid when is_int
    bool is_int = false;    // written without fraction/exponent and fits in int64
  };

  Json() = default;  // null
  static Json boolean(bool b) { return Json(Storage(b)); }
  static Json number(double d);
  static Json integer(int64_t i);
  static Json string(std::string s) { return Json(Storage(std::move(s))); }
  static Json array(Array a = {}) { return Json(Storage(std::move(a))); }
  static Json object(Object o = {}) { return Json(Storage(std::move(o))); }

  Type type() const { return static_cast<Type>(v_.index()); }
  const char* type_name() const;
  bool is_null() const { return type() == Type::kNull; }
  bool is_bool() const { return type() == Type::kBool; }
  bool is_number() const { return type() == Type::kNumber; }
  bool is_int() const { return is_number() && std::get<Number>(v_).is_int; }
  bool is_string() const { return type() == Type::kString; }
  bool is_array() const { return type() == Type::kArray; }
  bool is_object() const { return type() == Type::kObject; }

  // Unchecked accessors: call only after checking the type (they return a default otherwise).
  bool as_bool() const { return is_bool() ? std::get<bool>(v_) : false; }
  double as_double() const { return is_number() ? std::get<Number>(v_).value : 0.0; }
  int64_t as_int() const;  // integral numbers exactly, others truncated
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& mutable_array() { return std::get<Array>(v_); }     // requires is_array()
  Object& mutable_object() { return std::get<Object>(v_); }  // requires is_object()

  // Object member lookup (first match), nullptr when absent or when this is not an object.
  const Json* find(std::string_view key) const;
  // Convenience getters for optional members: the default when absent, null, or of another type.
  std::string get_string(std::string_view key, std::string def = "") const;
  int64_t get_int(std::string_view key, int64_t def = 0) const;
  double get_double(std::string_view key, double def = 0) const;
  bool get_bool(std::string_view key, bool def = false) const;

  // Compact serialization (valid JSON; non-finite numbers are written as null).
  std::string dump() const;

 private:
  using Storage = std::variant<std::nullptr_t, bool, Number, std::string, Array, Object>;
  explicit Json(Storage v) : v_(std::move(v)) {}
  Storage v_{nullptr};
  friend class JsonParser;
};

// Appends `s` as a JSON string literal: escapes '"', '\\', \b \f \n \r \t, other controls as \u00xx;
// with ensure_ascii also DEL and every non-ASCII code point (\uXXXX, UTF-16 pairs above U+FFFF).
void append_json_string(std::string& out, std::string_view s, bool ensure_ascii = false);

// Parses one JSON document (surrounding whitespace allowed, nothing else after it). Nesting deeper
// than 512 levels is an error, not a stack overflow.
Result<Json> parse_json(std::string_view text);
// Reads and parses a file; io_error when it cannot be read. Errors name the path.
Result<Json> parse_json_file(const std::string& path);

}  // namespace nxrt::genai
