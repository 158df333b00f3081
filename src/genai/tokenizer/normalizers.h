// tokenizer.json normalizers: NFC NFD NFKC NFKD Lowercase Prepend Replace Strip Sequence. A normalizer
// rewrites the text of a section (between added tokens) before the pre-tokenizer sees it.
// The Unicode forms and Lowercase need ICU: built without it (NXRT_WITH_TOKENIZER_LIBS=OFF) they fail to
// load, saying so; the others work.
#pragma once
#include <memory>
#include <string>

#include "nxrt/status.h"

namespace nxrt::genai {
class Json;
}

namespace nxrt::genai::tok {

struct Normalizer {
  virtual ~Normalizer() = default;
  // `s` is valid UTF-8, and stays so.
  virtual Status normalize(std::string& s) const = 0;
};

// The normalizer the tokenizer.json object `j` describes; not_implemented for an unknown type.
Result<std::unique_ptr<Normalizer>> make_normalizer(const Json& j);

}  // namespace nxrt::genai::tok
