// genai_config.json -> genai::Config.
//
// JSON: until the tokenizer branch's general reader (src/genai/json.h) is on main, this file parses the
// config with a small private reader (ConfigJson in genai_config.cpp). Switching is local to
// genai_config.cpp: only parse_config_text() touches the JSON tree.
#pragma once
#include <string>

#include "nxrt/genai.h"

namespace nxrt::genai {

// Parses the text of a genai_config.json found at `path` (used for messages and to locate the decoder).
Result<Config> parse_config_text(const std::string& text, const std::string& path);

}  // namespace nxrt::genai
