#include "genai/tokenizer/normalizers.h"

#include <vector>

#include "genai/json.h"
#include "genai/tokenizer/regex.h"
#include "genai/tokenizer/sequence_items.h"
#include "genai/unicode.h"
#include "genai/utf8.h"

namespace nxrt::genai::tok {
namespace {

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

struct UnicodeNormalizer : Normalizer {
  NormalForm form = NormalForm::kNFC;
  Status normalize(std::string& s) const override {
    if (is_ascii(s)) return Status::Ok();
    return unicode_normalize(s, form);
  }
};

struct LowercaseNormalizer : Normalizer {
  Status normalize(std::string& s) const override {
    if (is_ascii(s)) {
      for (char& c : s) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
      }
      return Status::Ok();
    }
    std::string lower;
    Status st = unicode_change_case(s, false, lower);
    if (!st.ok()) return st.with_context("tokenizer: ");
    s = std::move(lower);
    return Status::Ok();
  }
};

struct PrependNormalizer : Normalizer {
  std::string prepend;
  Status normalize(std::string& s) const override {
    s.insert(0, prepend);
    return Status::Ok();
  }
};

struct ReplaceNormalizer : Normalizer {
  Pattern pattern;
  std::string content;
  Status normalize(std::string& s) const override {
    Status st;
    s = replace_all(s, pattern, content, &st);
    return st;
  }
};

struct StripNormalizer : Normalizer {
  bool left = true, right = true;
  Status normalize(std::string& s) const override {
    s = std::string(trim_js_space(s, left, right));
    return Status::Ok();
  }
};

struct SequenceNormalizer : Normalizer {
  std::vector<std::unique_ptr<Normalizer>> items;
  Status normalize(std::string& s) const override {
    for (const auto& n : items) NXRT_RETURN_IF_ERROR(n->normalize(s));
    return Status::Ok();
  }
};

// `st`, naming the normalizer when this build lacks what it needs.
Status require(Status st, const std::string& type) {
  if (st.code() != StatusCode::kNotImplemented) return st;
  return st.with_context("tokenizer.json: normalizer " + type + " ");
}

}  // namespace

Result<std::unique_ptr<Normalizer>> make_normalizer(const Json& j) {
  std::string type = j.get_string("type");
  if (NormalForm form; parse_normal_form(type, &form)) {
    NXRT_RETURN_IF_ERROR(require(require_normal_form(form), type));
    auto n = std::make_unique<UnicodeNormalizer>();
    n->form = form;
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Lowercase") {
    NXRT_RETURN_IF_ERROR(require(require_case_mapping(), type));
    return std::unique_ptr<Normalizer>(std::make_unique<LowercaseNormalizer>());
  }
  if (type == "Prepend") {
    auto n = std::make_unique<PrependNormalizer>();
    n->prepend = j.get_string("prepend");
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Replace") {
    auto n = std::make_unique<ReplaceNormalizer>();
    NXRT_ASSIGN_OR_RETURN(n->pattern, parse_pattern(j.find("pattern"), "normalizer Replace"));
    n->content = j.get_string("content");
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Strip") {
    auto n = std::make_unique<StripNormalizer>();
    n->left = j.get_bool("strip_left", true);
    n->right = j.get_bool("strip_right", true);
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  if (type == "Sequence") {
    auto n = std::make_unique<SequenceNormalizer>();
    NXRT_RETURN_IF_ERROR(read_sequence_items(j, "normalizers", make_normalizer, n->items));
    return std::unique_ptr<Normalizer>(std::move(n));
  }
  return not_implemented("tokenizer.json: normalizer type '" + type +
                         "' is not supported (supported: NFC NFD NFKC NFKD Lowercase Prepend Replace Strip Sequence)");
}

}  // namespace nxrt::genai::tok
