// Unicode case mapping and normalization forms for the tokenizer's normalizers and the template
// engine's upper/lower, through ICU. Built with NXRT_WITH_TOKENIZER_LIBS=OFF there is no ICU: every
// function here then returns a not_implemented error that says so (callers keep their ASCII fast
// paths, which need no tables).
#pragma once
#include <string>
#include <string_view>

#include "nxrt/status.h"

namespace nxrt::genai {

// Whether nxrt was built with PCRE2 and ICU (NXRT_WITH_TOKENIZER_LIBS).
bool tokenizer_libs_available();
// "nxrt was built without PCRE2/ICU (NXRT_WITH_TOKENIZER_LIBS=OFF)": what a component that needs them says.
const char* tokenizer_libs_missing_message();

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// The form named "NFC", "NFD", "NFKC" or "NFKD"; false for any other name.
bool parse_normal_form(std::string_view name, NormalForm* form);
const char* normal_form_name(NormalForm form);

// Ok when `form` can be applied (ICU has its data); without ICU, not_implemented("needs ICU: nxrt was
// built without ...") for the caller to prefix with what needs it.
Status require_normal_form(NormalForm form);
// Ok when unicode_change_case can map non-ASCII text; without ICU, as require_normal_form.
Status require_case_mapping();

// Normalizes the valid UTF-8 text `s` in place to `form` (unchanged when it already is).
Status unicode_normalize(std::string& s, NormalForm form);
// Full, locale-independent Unicode case mapping (as JavaScript's toUpperCase / toLowerCase) of `s`,
// whose ill-formed bytes are read as U+FFFD.
Status unicode_change_case(std::string_view s, bool upper, std::string& out);

}  // namespace nxrt::genai
