// libFuzzer target: `nxrt serve`'s request parsing (tools/cli/serve_api.cpp) on arbitrary bodies, as
// chat and as completions. Any input must give a checked request or an OpenAI error object that is
// valid JSON: no crash, no exception escaping, no sanitizer report.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string_view>

#include "serve_api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (bool chat : {true, false}) {
    nxrt::cli::serve::ParsedRequest p = nxrt::cli::serve::parse_completion_request(body, chat, 4);
    if (!p.ok) {
      if (nlohmann::json::parse(nxrt::cli::serve::error_body(p.error), nullptr, false).is_discarded()) std::abort();
    } else if (chat && nlohmann::json::parse(p.request.messages_json, nullptr, false).is_discarded()) {
      std::abort();
    }
  }
  return 0;
}
