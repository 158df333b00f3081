#include "genai/utf8.h"

namespace nxrt::genai {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool is_js_space(uint32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

uint32_t next_cp(std::string_view s, size_t& i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k < len; ++k) {
    const unsigned char d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (d & 0x3F);
  }
  i += len;
  return cp;
}

std::string_view trim_js_space(std::string_view s, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t j = b;
      if (!is_js_space(next_cp(s, j))) break;
      b = j;
    }
  }
  if (right) {
    while (e > b) {
      size_t k = e - 1;
      while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
      size_t j = k;
      if (!is_js_space(next_cp(s, j)) || j != e) break;
      e = k;
    }
  }
  return s.substr(b, e - b);
}

bool utf8_valid(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int st = utf8_step(s, i);
    if (st < 0) return false;
    i += st;
  }
  return true;
}

std::string utf8_sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0, n = s.size();
  while (i < n) {
    int st = utf8_step(s, i);
    if (st > 0) {
      out.append(s.data() + i, st);
      i += st;
    } else {
      out += "\xEF\xBF\xBD";
      i += -st;
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  size_t n = s.size();
  for (size_t k = 1; k <= 3 && k <= n; ++k) {
    size_t p = n - k;
    unsigned char c = static_cast<unsigned char>(s[p]);
    if (c >= 0x80 && c <= 0xBF) continue;  // continuation byte: look further back
    Utf8Lead li = utf8_lead(c);
    if (li.len <= k) return n;  // ASCII, invalid, or a complete sequence
    // Lead of a longer sequence: incomplete if the bytes after it are valid so far.
    for (size_t j = 1; j < k; ++j) {
      unsigned char b = static_cast<unsigned char>(s[p + j]);
      unsigned char lo = j == 1 ? li.lo : 0x80, hi = j == 1 ? li.hi : 0xBF;
      if (b < lo || b > hi) return n;
    }
    return p;
  }
  return n;
}

}  // namespace nxrt::genai
