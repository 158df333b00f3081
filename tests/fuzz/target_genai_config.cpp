// Fuzz body: genai_config.json text. Any input must give a Config or an error Status with a message;
// a Config that parses has the properties parse_config_text promises and the rest of the genai layer
// relies on (positive layer, head and size counts, no negative lengths, a decoder path).
#include <string>

#include "fuzz_targets.h"
#include "genai/genai_config.h"

namespace nxrt::fuzz {

bool genai_config(const uint8_t* data, size_t size) {
  if (size > (size_t{64} << 10)) return true;
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto c = genai::parse_config_text(text, "fuzz/genai_config.json");
  if (!c.ok()) return !c.status().message().empty();
  return c->num_hidden_layers >= 1 && c->num_key_value_heads >= 1 && c->head_size >= 1 && c->context_length >= 0 &&
         c->vocab_size >= 0 && c->max_length >= 0 && !c->decoder_path.empty();
}

}  // namespace nxrt::fuzz
