// Helpers for the string ops: locale-free Unicode case mapping and whitespace tests over UTF-8.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace nxrt::ops {

// Simple (one code point to one code point) case mapping, independent of the process locale: ASCII,
// Latin-1, Latin Extended-A/B (the regular pairs), Latin Extended Additional, Greek (incl. tonos
// forms, final sigma), Cyrillic (incl. extended pairs), Armenian, Georgian Mkhedruli/Mtavruli is left
// alone, fullwidth Latin. Other code points map to themselves.
uint32_t unicode_to_lower(uint32_t cp);
uint32_t unicode_to_upper(uint32_t cp);

// Lower/upper-cases a UTF-8 string code point by code point. Invalid UTF-8 bytes are copied unchanged.
std::string utf8_to_lower(std::string_view s);
std::string utf8_to_upper(std::string_view s);

// Decodes one code point at s[i]; sets *len to its byte length (1 for an invalid byte, whose value is
// returned as 0xFFFFFFFF).
uint32_t utf8_decode(std::string_view s, size_t i, size_t* len);

// Python str.isspace() whitespace (ASCII controls \t\n\v\f\r, \x1c-\x1f, space, U+0085, U+00A0, U+1680,
// U+2000-U+200A, U+2028, U+2029, U+202F, U+205F, U+3000).
bool unicode_is_space(uint32_t cp);

}  // namespace nxrt::ops
