// The OpenAI wire format of `nxrt serve`, apart from HTTP so it can be unit-tested and fuzzed: request
// bodies of /v1/chat/completions and /v1/completions parsed and checked field by field (a wrong type or
// value is an OpenAI error object naming the field), and the response, chunk and error objects.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace nxrt::cli::serve {

// OpenAI's error object: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" -> null
  std::string code;   // "" -> null
};
std::string error_body(const ApiError& e);

// A completion request, chat or not, after checking.
struct CompletionRequest {
  bool chat = false;
  std::string model;
  // chat: the messages as the chat template reads them (content parts joined into one string), and tools.
  std::string messages_json;
  std::string tools_json;
  // completions: the prompt as text, or as token ids (prompt_is_ids).
  std::string prompt_text;
  std::vector<int64_t> prompt_ids;
  bool prompt_is_ids = false;
  std::optional<int64_t> max_tokens;  // max_tokens / max_completion_tokens
  double temperature = 1.0;
  double top_p = 1.0;
  int64_t top_k = 0;  // 0 or -1: all
  double min_p = 0.0;
  std::optional<int64_t> seed;
  std::vector<std::string> stop;
  double presence_penalty = 0.0, frequency_penalty = 0.0, repetition_penalty = 1.0;
  bool logprobs = false;
  int64_t top_logprobs = 0;  // chat: top_logprobs; completions: the integer logprobs
  int64_t n = 1;
  bool stream = false;
  bool include_usage = false;
  bool ignore_eos = false;
  std::string user;
};

struct ParsedRequest {
  bool ok = false;
  CompletionRequest request;
  ApiError error;
};
// Parses and checks a request body. Unknown fields are ignored (clients send fields of newer API
// versions); known fields of the wrong type or out of range are errors naming the field.
ParsedRequest parse_completion_request(std::string_view body, bool chat, int64_t max_n);

// Per generated token, when logprobs were asked for.
struct TokenLogprob {
  std::string token;
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;  // most likely first
};

struct Usage {
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
};

// One choice of a response or chunk.
struct ChoiceDelta {
  int64_t index = 0;
  std::string text;
  bool first = false;           // chat chunks: the first carries role "assistant"
  std::string finish_reason;    // "" -> null
  std::vector<TokenLogprob> logprobs;
  bool with_logprobs = false;   // logprobs object present (else null)
};

// A whole (non-streaming) response: chat.completion or text_completion.
std::string response_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                          const std::vector<ChoiceDelta>& choices, const Usage& usage);
// One SSE chunk's JSON: chat.completion.chunk or text_completion. include_usage adds "usage": null.
std::string chunk_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                       const ChoiceDelta& choice, bool include_usage);
// The last chunk when stream_options.include_usage: empty choices and the usage.
std::string usage_chunk_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                             const Usage& usage);
// GET /v1/models and /v1/models/{id}.
std::string models_body(const std::string& model, int64_t created);
std::string model_body(const std::string& model, int64_t created);

}  // namespace nxrt::cli::serve
