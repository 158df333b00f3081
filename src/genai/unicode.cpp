#include "genai/unicode.h"

#if NXRT_HAVE_TOKENIZER_LIBS
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#endif

#include "genai/utf8.h"

namespace nxrt::genai {

const char* tokenizer_libs_missing_message() {
  return "nxrt was built without PCRE2/ICU (NXRT_WITH_TOKENIZER_LIBS=OFF)";
}

bool parse_normal_form(std::string_view name, NormalForm* form) {
  if (name == "NFC") *form = NormalForm::kNFC;
  else if (name == "NFD") *form = NormalForm::kNFD;
  else if (name == "NFKC") *form = NormalForm::kNFKC;
  else if (name == "NFKD") *form = NormalForm::kNFKD;
  else return false;
  return true;
}

const char* normal_form_name(NormalForm form) {
  switch (form) {
    case NormalForm::kNFC: return "NFC";
    case NormalForm::kNFD: return "NFD";
    case NormalForm::kNFKC: return "NFKC";
    case NormalForm::kNFKD: return "NFKD";
  }
  return "?";
}

#if NXRT_HAVE_TOKENIZER_LIBS

bool tokenizer_libs_available() { return true; }

namespace {

Status to_utf16(std::string_view s, std::u16string& out) {
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = 0;
  out.resize(s.size() + 1);
  u_strFromUTF8(reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &len, s.data(),
                static_cast<int32_t>(s.size()), &err);
  if (U_FAILURE(err)) return runtime_error(std::string("tokenizer: UTF-8 -> UTF-16 failed: ") + u_errorName(err));
  out.resize(len);
  return Status::Ok();
}

Status from_utf16(const std::u16string& s, std::string& out) {
  UErrorCode err = U_ZERO_ERROR;
  int32_t len = 0;
  out.resize(s.size() * 3 + 1);
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &len, reinterpret_cast<const UChar*>(s.data()),
              static_cast<int32_t>(s.size()), &err);
  if (U_FAILURE(err)) return runtime_error(std::string("tokenizer: UTF-16 -> UTF-8 failed: ") + u_errorName(err));
  out.resize(len);
  return Status::Ok();
}

// True when every code point of `s` is in a range whose characters are unchanged by NFC in any
// context (NFC_Quick_Check=Yes, canonical combining class 0, not a composition's second part): Latin-1
// and Latin Extended/IPA below U+0300, kana (without U+3099/U+309A), CJK ideographs, Hangul
// syllables, fullwidth forms, emoji. A fast path only: anything else goes through ICU.
bool nfc_stable(std::string_view s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0xCC) {  // U+0000..U+02FF
      i += cp_len(c);
      continue;
    }
    size_t l;
    uint32_t cp = decode_cp(s, i, &l);
    bool ok = (cp >= 0x3040 && cp <= 0x3098) || (cp >= 0x309B && cp <= 0x30FF) || (cp >= 0x4E00 && cp <= 0x9FFF) ||
              (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xFF01 && cp <= 0xFFEF) || (cp >= 0x1F300 && cp <= 0x1FAFF) ||
              (cp >= 0x3000 && cp <= 0x303F && cp != 0x302A && cp != 0x302B && cp != 0x302C && cp != 0x302D &&
               cp != 0x302E && cp != 0x302F);
    if (!ok) return false;
    i += l;
  }
  return true;
}

const UNormalizer2* icu_normalizer(NormalForm form, UErrorCode* err) {
  switch (form) {
    case NormalForm::kNFC: return unorm2_getNFCInstance(err);
    case NormalForm::kNFD: return unorm2_getNFDInstance(err);
    case NormalForm::kNFKC: return unorm2_getNFKCInstance(err);
    case NormalForm::kNFKD: return unorm2_getNFKDInstance(err);
  }
  return nullptr;
}

}  // namespace

Status require_normal_form(NormalForm form) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* norm = icu_normalizer(form, &err);
  if (U_FAILURE(err) || !norm) {
    return runtime_error(std::string("tokenizer: ICU ") + normal_form_name(form) + " normalizer unavailable");
  }
  return Status::Ok();
}

Status require_case_mapping() { return Status::Ok(); }

Status unicode_normalize(std::string& s, NormalForm form) {
  if (form == NormalForm::kNFC && nfc_stable(s)) return Status::Ok();
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* norm = icu_normalizer(form, &err);
  const std::string name = normal_form_name(form);
  if (U_FAILURE(err) || !norm) return runtime_error("tokenizer: ICU " + name + " normalizer unavailable");
  std::u16string u;
  NXRT_RETURN_IF_ERROR(to_utf16(s, u));
  const UChar* src = reinterpret_cast<const UChar*>(u.data());
  int32_t n = static_cast<int32_t>(u.size());
  if (unorm2_isNormalized(norm, src, n, &err) && U_SUCCESS(err)) return Status::Ok();
  err = U_ZERO_ERROR;
  std::u16string dst(u.size() * 3 + 16, u'\0');
  int32_t len = unorm2_normalize(norm, src, n, reinterpret_cast<UChar*>(dst.data()), static_cast<int32_t>(dst.size()),
                                 &err);
  if (U_FAILURE(err)) return runtime_error("tokenizer: " + name + " normalization failed: " + u_errorName(err));
  dst.resize(len);
  return from_utf16(dst, s);
}

Status unicode_change_case(std::string_view s, bool upper, std::string& out) {
  const char* what = upper ? "upper-case mapping" : "lower-case mapping";
  UErrorCode err = U_ZERO_ERROR;
  int32_t n16 = 0;
  u_strFromUTF8WithSub(nullptr, 0, &n16, s.data(), static_cast<int32_t>(s.size()), 0xFFFD, nullptr, &err);
  err = U_ZERO_ERROR;
  std::u16string w(static_cast<size_t>(n16), u'\0');
  u_strFromUTF8WithSub(reinterpret_cast<UChar*>(w.data()), n16, nullptr, s.data(), static_cast<int32_t>(s.size()),
                       0xFFFD, nullptr, &err);
  if (U_FAILURE(err)) return runtime_error(std::string(what) + " failed: " + u_errorName(err));
  std::u16string m(w.size() * 3 + 4, u'\0');
  err = U_ZERO_ERROR;
  const int32_t mn = upper ? u_strToUpper(reinterpret_cast<UChar*>(m.data()), static_cast<int32_t>(m.size()),
                                          reinterpret_cast<const UChar*>(w.data()), n16, "", &err)
                           : u_strToLower(reinterpret_cast<UChar*>(m.data()), static_cast<int32_t>(m.size()),
                                          reinterpret_cast<const UChar*>(w.data()), n16, "", &err);
  if (U_FAILURE(err)) return runtime_error(std::string(what) + " failed: " + u_errorName(err));
  int32_t n8 = 0;
  err = U_ZERO_ERROR;
  u_strToUTF8(nullptr, 0, &n8, reinterpret_cast<const UChar*>(m.data()), mn, &err);
  out.assign(static_cast<size_t>(n8), '\0');
  err = U_ZERO_ERROR;
  u_strToUTF8(out.data(), n8, nullptr, reinterpret_cast<const UChar*>(m.data()), mn, &err);
  if (U_FAILURE(err)) return runtime_error(std::string(what) + " failed: " + u_errorName(err));
  return Status::Ok();
}

#else  // !NXRT_HAVE_TOKENIZER_LIBS

bool tokenizer_libs_available() { return false; }

namespace {
Status needs_icu() { return not_implemented(std::string("needs ICU: ") + tokenizer_libs_missing_message()); }
}  // namespace

Status require_normal_form(NormalForm) { return needs_icu(); }
Status require_case_mapping() { return needs_icu(); }
Status unicode_normalize(std::string&, NormalForm form) { return needs_icu().with_context(normal_form_name(form) + std::string(" normalization ")); }
Status unicode_change_case(std::string_view, bool, std::string&) { return needs_icu(); }

#endif  // NXRT_HAVE_TOKENIZER_LIBS

}  // namespace nxrt::genai
