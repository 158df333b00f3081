#include "genai/jinja/text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "genai/jinja/ast.h"
#include "genai/unicode.h"
#include "genai/utf8.h"

namespace nxrt::genai::jinja {
namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

}  // namespace

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t b = i;
    next_cp(s, i);
    out.push_back(s.substr(b, i - b));
  }
  return out;
}

size_t cp_count(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

// JS trim / trimStart / trimEnd over Unicode whitespace.
std::string trim_js(const std::string& s, bool left, bool right) { return std::string(trim_js_space(s, left, right)); }

// Python's str.strip(chars) family: strips code points that occur in `chars`.
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right) {
  std::vector<std::string> set = code_points(chars);
  std::vector<std::string> cps = code_points(s);
  auto in_set = [&](const std::string& c) { return std::find(set.begin(), set.end(), c) != set.end(); };
  size_t b = 0, e = cps.size();
  if (left) while (b < e && in_set(cps[b])) ++b;
  if (right) while (e > b && in_set(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

// Full Unicode case mapping (locale-independent, as JS toUpperCase/toLowerCase); ASCII without tables.
std::string change_case(const std::string& s, bool upper, uint32_t pos) {
  bool ascii = true;
  for (char c : s) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    std::string out = s;
    for (char& c : out) {
      if (upper && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
      if (!upper && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  std::string out;
  const Status st = unicode_change_case(s, upper, out);
  if (st.ok()) return out;
  if (st.code() == StatusCode::kNotImplemented) {
    throw TemplateError(pos, std::string(upper ? "upper" : "lower") + "-case mapping of non-ASCII text " + st.message());
  }
  return s;  // an ICU failure leaves the text as it is
}

std::string title_case(const std::string& s) {
  std::string out = s;
  for (size_t k = 0; k < out.size(); ++k) {
    const bool start = k == 0 || !is_word_char(out[k - 1]);
    if (start && out[k] >= 'a' && out[k] <= 'z') out[k] = static_cast<char>(out[k] - 32);
  }
  return out;
}

std::string capitalize(const std::string& s, uint32_t pos) {
  if (s.empty()) return s;
  size_t i = 0;
  next_cp(s, i);
  return change_case(s.substr(0, i), true, pos) + s.substr(i);
}

// JS Number#toString: the shortest digits that read back as `d`, laid out as ECMAScript does.
std::string js_number(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  if (d == 0) return "0";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = 0; k < e; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  const int exp10 = std::atoi(sci.c_str() + e + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;
  if (k <= n && n <= 21) {
    out += digits + std::string(static_cast<size_t>(n - k), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<size_t>(n)) + "." + digits.substr(static_cast<size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0." + std::string(static_cast<size_t>(-n), '0') + digits;
  } else {
    out += digits.substr(0, 1);
    if (k > 1) out += "." + digits.substr(1);
    out += "e";
    out += (n - 1 >= 0 ? "+" : "-");
    out += std::to_string(std::abs(n - 1));
  }
  return out;
}

// A float as a template prints it: integral values keep ".0".
std::string float_text(double d) {
  if (d == 0 && std::signbit(d)) return "-0.0";
  if (std::isfinite(d) && std::fabs(d) < 1e21 && std::floor(d) == d) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f", d);
    return buf;
  }
  return js_number(d);
}

}  // namespace nxrt::genai::jinja
