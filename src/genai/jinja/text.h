// String helpers of the template engine with the semantics of @huggingface/jinja (JavaScript) or of
// Python where the engine follows Python (see jinja.h): code points, whitespace trimming, case mapping,
// number printing.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nxrt::genai::jinja {

// Each code point of `s` as its own string (ill-formed bytes one by one).
std::vector<std::string> code_points(const std::string& s);
// Number of code points (lead bytes) in `s`.
size_t cp_count(const std::string& s);
// JS trim / trimStart / trimEnd over Unicode whitespace.
std::string trim_js(const std::string& s, bool left, bool right);
// Python's str.strip(chars) family: strips code points that occur in `chars`.
std::string strip_chars(const std::string& s, const std::string& chars, bool left, bool right);
// Full Unicode case mapping (locale-independent, as JS toUpperCase/toLowerCase). Non-ASCII text needs
// ICU: built without it (NXRT_WITH_TOKENIZER_LIBS=OFF), a TemplateError at `pos` says so.
std::string change_case(const std::string& s, bool upper, uint32_t pos);
// Python's str.title() over ASCII letters (a letter after a non-word character is upper-cased).
std::string title_case(const std::string& s);
// Python's str.capitalize(): the first code point upper-cased, the rest unchanged.
std::string capitalize(const std::string& s, uint32_t pos);
// JS Number#toString: the shortest digits that read back as `d`, laid out as ECMAScript does.
std::string js_number(double d);
// A float as a template prints it: integral values keep ".0".
std::string float_text(double d);

}  // namespace nxrt::genai::jinja
