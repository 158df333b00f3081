// UTF-8 and JavaScript-whitespace helpers shared by the JSON reader, the tokenizer and the templates.
//
// Two ways of reading code points, because the callers need both:
//   - the strict ones (utf8_step, utf8_valid, utf8_sanitize, utf8_complete_prefix) follow Unicode's
//     well-formed UTF-8 (Table 3-7: no overlong forms, no surrogates) and the WHATWG "maximal subpart"
//     replacement rule, as the tokenizer must to match TextDecoder; cp_len / decode_cp then read text
//     already known to be valid;
//   - next_cp reads any bytes leniently (a byte that does not start a complete sequence is U+FFFD), as the
//     template engine and JSON's ensure_ascii writer see strings.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nxrt::genai {

// Appends code point `cp` to `out` as UTF-8.
void append_utf8(std::string& out, uint32_t cp);
// JavaScript's whitespace (String.prototype.trim, \s): White_Space + line terminators + U+FEFF.
bool is_js_space(uint32_t cp);

// Decodes the code point at s[i] and advances i past it. A lead byte that is invalid, a sequence cut off
// by the end, or a bad continuation byte reads as U+FFFD and advances one byte. Overlong forms and
// surrogates are not rejected.
uint32_t next_cp(std::string_view s, size_t& i);

// Strips JavaScript whitespace from the start (left) and/or the end (right) of `s`; ill-formed bytes
// are read as next_cp does (never whitespace).
std::string_view trim_js_space(std::string_view s, bool left, bool right);

// Expected sequence length for a lead byte (0: not a valid lead), and the range of its first
// continuation byte (Unicode Table 3-7, well-formed UTF-8).
struct Utf8Lead {
  uint8_t len, lo, hi;
};
inline Utf8Lead utf8_lead(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c >= 0xE1 && c <= 0xEC) return {3, 0x80, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xEE && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// At s[i]: length of a complete well-formed sequence (>0), or -(bytes of the maximal ill-formed
// subpart to replace with one U+FFFD).
inline int utf8_step(std::string_view s, size_t i) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const Utf8Lead li = utf8_lead(c);
  if (li.len == 1) return 1;
  if (li.len == 0) return -1;
  const size_t n = s.size();
  for (int k = 1; k < li.len; ++k) {
    if (i + k >= n) return -k;
    const unsigned char b = static_cast<unsigned char>(s[i + k]);
    const unsigned char lo = k == 1 ? li.lo : 0x80, hi = k == 1 ? li.hi : 0xBF;
    if (b < lo || b > hi) return -k;
  }
  return li.len;
}

// True when `s` is well-formed UTF-8.
bool utf8_valid(std::string_view s);

// Length of the code point starting with byte `c` in valid UTF-8.
inline size_t cp_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

// The code point at s[i] of valid UTF-8; *len receives its length in bytes.
inline uint32_t decode_cp(std::string_view s, size_t i, size_t* len) {
  const unsigned char c = static_cast<unsigned char>(s[i]);
  const size_t l = cp_len(c);
  *len = l;
  if (l == 1) return c;
  uint32_t cp = c & (l == 2 ? 0x1F : l == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < l; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Replaces every ill-formed subsequence with U+FFFD (WHATWG "maximal subpart" rule, as TextDecoder).
std::string utf8_sanitize(std::string_view bytes);
// Length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence that could still be
// completed by more bytes.
size_t utf8_complete_prefix(std::string_view bytes);

}  // namespace nxrt::genai
