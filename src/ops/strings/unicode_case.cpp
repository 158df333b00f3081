// Locale-free Unicode simple case mapping for StringNormalizer (see strings/strings_util.h for the ranges).
// Written from the Unicode character tables' structure: most cased blocks are either a fixed offset
// between an upper and a lower range, or alternating upper/lower pairs.
#include "ops/strings/strings_util.h"

namespace nxrt::ops {

namespace {

// Alternating pairs in [lo, hi]: upper at even offset from `lo` when upper_first.
struct PairRange {
  uint32_t lo, hi;
};
// Ranges where the upper-case letter has the even code point and lower = upper + 1.
constexpr PairRange kEvenUpper[] = {
    {0x0100, 0x012F}, {0x0132, 0x0137}, {0x014A, 0x0177}, {0x0182, 0x0185}, {0x01A0, 0x01A5},
    {0x01DE, 0x01EF}, {0x01F8, 0x021F}, {0x0222, 0x0233}, {0x0246, 0x024F}, {0x03D8, 0x03EF},
    {0x0460, 0x0481}, {0x048A, 0x04BF}, {0x04D0, 0x052F}, {0x1E00, 0x1E95}, {0x1EA0, 0x1EFF},
};
// Ranges where the upper-case letter has the odd code point and lower = upper + 1.
constexpr PairRange kOddUpper[] = {
    {0x0139, 0x0148}, {0x0179, 0x017E}, {0x01B3, 0x01B6}, {0x01CD, 0x01DC}, {0x04C1, 0x04CE},
};

// Fixed-offset ranges: [upper_lo, upper_hi] <-> [upper_lo + delta, upper_hi + delta].
struct OffsetRange {
  uint32_t lo, hi;
  int32_t delta;
};
constexpr OffsetRange kOffsets[] = {
    {0x0041, 0x005A, 0x20},   // ASCII
    {0x00C0, 0x00D6, 0x20},   // Latin-1
    {0x00D8, 0x00DE, 0x20},
    {0x0391, 0x03A1, 0x20},   // Greek capitals (no U+03A2)
    {0x03A3, 0x03AB, 0x20},
    {0x0388, 0x038A, 0x25},   // Έ Ή Ί -> έ ή ί
    {0x038E, 0x038F, 0x3F},   // Ύ Ώ -> ύ ώ
    {0x0410, 0x042F, 0x20},   // Cyrillic basic
    {0x0400, 0x040F, 0x50},   // Cyrillic Ѐ..Џ -> ѐ..џ
    {0x0531, 0x0556, 0x30},   // Armenian
    {0xFF21, 0xFF3A, 0x20},   // fullwidth Latin
};

bool in_pair_range(const PairRange* ranges, size_t n, uint32_t cp, bool even_upper, bool* is_upper) {
  for (size_t i = 0; i < n; ++i) {
    if (cp >= ranges[i].lo && cp <= ranges[i].hi) {
      bool even = (cp % 2) == 0;
      *is_upper = even_upper ? even : !even;
      return true;
    }
  }
  return false;
}

}  // namespace

uint32_t unicode_to_lower(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 0x20 : cp;
  for (const auto& r : kOffsets) {
    if (cp >= r.lo && cp <= r.hi) return cp + static_cast<uint32_t>(r.delta);
  }
  bool up = false;
  if (in_pair_range(kEvenUpper, std::size(kEvenUpper), cp, true, &up)) return up ? cp + 1 : cp;
  if (in_pair_range(kOddUpper, std::size(kOddUpper), cp, false, &up)) return up ? cp + 1 : cp;
  switch (cp) {
    case 0x0130: return 0x0069;  // İ -> i
    case 0x0178: return 0x00FF;  // Ÿ -> ÿ
    case 0x0386: return 0x03AC;  // Ά
    case 0x038C: return 0x03CC;  // Ό
    case 0x04C0: return 0x04CF;  // Ӏ
    case 0x01C4: case 0x01C5: return 0x01C6;  // Ǆ ǅ -> ǆ
    case 0x01C7: case 0x01C8: return 0x01C9;
    case 0x01CA: case 0x01CB: return 0x01CC;
    case 0x01F1: case 0x01F2: return 0x01F3;
    case 0x1E9E: return 0x00DF;  // ẞ -> ß
    default: return cp;
  }
}

uint32_t unicode_to_upper(uint32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 0x20 : cp;
  for (const auto& r : kOffsets) {
    uint32_t lo = r.lo + static_cast<uint32_t>(r.delta), hi = r.hi + static_cast<uint32_t>(r.delta);
    if (cp >= lo && cp <= hi) return cp - static_cast<uint32_t>(r.delta);
  }
  bool up = false;
  if (in_pair_range(kEvenUpper, std::size(kEvenUpper), cp, true, &up)) return up ? cp : cp - 1;
  if (in_pair_range(kOddUpper, std::size(kOddUpper), cp, false, &up)) return up ? cp : cp - 1;
  switch (cp) {
    case 0x00B5: return 0x039C;  // µ -> Μ
    case 0x00FF: return 0x0178;  // ÿ -> Ÿ
    case 0x0131: return 0x0049;  // ı -> I
    case 0x017F: return 0x0053;  // ſ -> S
    case 0x03C2: return 0x03A3;  // ς -> Σ
    case 0x03AC: return 0x0386;
    case 0x03CC: return 0x038C;
    case 0x04CF: return 0x04C0;
    case 0x01C4: case 0x01C5: case 0x01C6: return 0x01C4;
    case 0x01C7: case 0x01C8: case 0x01C9: return 0x01C7;
    case 0x01CA: case 0x01CB: case 0x01CC: return 0x01CA;
    case 0x01F1: case 0x01F2: case 0x01F3: return 0x01F1;
    default: return cp;  // ß and other uncased letters stay as they are (no 1:n expansion)
  }
}

uint32_t utf8_decode(std::string_view s, size_t i, size_t* len) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  *len = 1;
  if (c < 0x80) return c;
  size_t n = 0;
  uint32_t cp = 0, min = 0;
  if ((c & 0xE0) == 0xC0) { n = 2; cp = c & 0x1F; min = 0x80; }
  else if ((c & 0xF0) == 0xE0) { n = 3; cp = c & 0x0F; min = 0x800; }
  else if ((c & 0xF8) == 0xF0) { n = 4; cp = c & 0x07; min = 0x10000; }
  else return 0xFFFFFFFFu;
  if (i + n > s.size()) return 0xFFFFFFFFu;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0xFFFFFFFFu;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0xFFFFFFFFu;
  *len = n;
  return cp;
}

namespace {
void utf8_append(std::string* out, uint32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

template <typename F>
std::string map_utf8(std::string_view s, F&& f) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {  // ASCII fast path
      out.push_back(static_cast<char>(f(c)));
      ++i;
      continue;
    }
    size_t len = 1;
    uint32_t cp = utf8_decode(s, i, &len);
    if (cp == 0xFFFFFFFFu) {
      out.push_back(s[i]);  // invalid byte: copy unchanged
    } else {
      utf8_append(&out, f(cp));
    }
    i += len;
  }
  return out;
}
}  // namespace

std::string utf8_to_lower(std::string_view s) { return map_utf8(s, unicode_to_lower); }
std::string utf8_to_upper(std::string_view s) { return map_utf8(s, unicode_to_upper); }

bool unicode_is_space(uint32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace nxrt::ops
