// `nxrt serve`'s OpenAI request parsing and response objects (tools/cli/serve_api.cpp), apart from HTTP.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "serve_api.h"

using namespace nxrt::cli::serve;
using nlohmann::json;

namespace {

ParsedRequest chat(const std::string& body) { return parse_completion_request(body, true, 4); }
ParsedRequest completion(const std::string& body) { return parse_completion_request(body, false, 4); }

}  // namespace

TEST(ServeApi, ChatRequestFields) {
  ParsedRequest p = chat(R"({"model":"m","messages":[{"role":"system","content":"be brief"},
    {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
    {"role":"assistant","content":null,"tool_calls":[]},{"role":"tool","content":"42","tool_call_id":"x"},
    {"role":"developer","content":"d"}],
    "max_completion_tokens":7,"max_tokens":3,"temperature":0,"top_p":0.5,"top_k":-1,"min_p":0.1,"seed":9,
    "stop":["x","","yy"],"presence_penalty":1.5,"frequency_penalty":-1,"repetition_penalty":1.1,
    "logprobs":true,"top_logprobs":3,"n":2,"stream":true,"stream_options":{"include_usage":true},"user":"u",
    "some_future_field":{"a":1}})");
  ASSERT_TRUE(p.ok) << p.error.message;
  const CompletionRequest& q = p.request;
  EXPECT_EQ(q.model, "m");
  const json msgs = json::parse(q.messages_json);
  ASSERT_EQ(msgs.size(), 5u);
  EXPECT_EQ(msgs[1]["content"], "a\nb");
  EXPECT_EQ(msgs[2]["content"], "");
  EXPECT_EQ(msgs[3]["tool_call_id"], "x");
  EXPECT_EQ(msgs[4]["role"], "system");
  EXPECT_EQ(q.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_EQ(q.temperature, 0);
  EXPECT_EQ(q.top_k, 0);
  EXPECT_EQ(q.seed, 9);
  EXPECT_EQ(q.stop, (std::vector<std::string>{"x", "yy"}));
  EXPECT_TRUE(q.logprobs);
  EXPECT_EQ(q.top_logprobs, 3);
  EXPECT_EQ(q.n, 2);
  EXPECT_TRUE(q.stream && q.include_usage);
  EXPECT_EQ(q.user, "u");
}

TEST(ServeApi, CompletionPrompts) {
  ParsedRequest p = completion(R"({"prompt":"hi","logprobs":2,"stop":"\n"})");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.request.prompt_text, "hi");
  EXPECT_EQ(p.request.top_logprobs, 2);
  EXPECT_EQ(p.request.stop, std::vector<std::string>{"\n"});
  p = completion(R"({"prompt":[1,2,3]})");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.request.prompt_ids, (std::vector<int64_t>{1, 2, 3}));
  p = completion(R"({"prompt":[[4,5]]})");
  ASSERT_TRUE(p.ok && p.request.prompt_is_ids);
  p = completion(R"({"prompt":["one"]})");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.request.prompt_text, "one");
  EXPECT_FALSE(completion(R"({"prompt":["a","b"]})").ok);
  EXPECT_FALSE(completion(R"({"prompt":{}})").ok);
}

TEST(ServeApi, ErrorsNameTheField) {
  struct Case {
    const char* body;
    bool is_chat;
    const char* param;  // "" -> null
    const char* code;
  };
  const Case cases[] = {
      {"{not json", true, "", "invalid_json"},
      // A number beyond double range fails nlohmann's parse with out_of_range, not parse_error (fuzz).
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":1e400})", true, "", "invalid_json"},
      {"3333333333333333333e333", true, "", "invalid_json"},
      {"[1,2]", true, "body", "invalid_type"},
      {R"({"model":"m"})", true, "messages", "missing_required_parameter"},
      {R"({"messages":"hi"})", true, "messages", "invalid_type"},
      {R"({"messages":[]})", true, "messages", "empty_array"},
      {R"({"messages":[{"content":"x"}]})", true, "messages[0].role", "missing_required_parameter"},
      {R"({"messages":[{"role":"king","content":"x"}]})", true, "messages[0].role", "invalid_value"},
      {R"({"messages":[{"role":"user"}]})", true, "messages[0].content", "missing_required_parameter"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", true, "messages[0].content[0].type", "invalid_value"},
      {R"({"messages":[{"role":"user","content":5}]})", true, "messages[0].content", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", true, "temperature", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":3})", true, "temperature", "invalid_value"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":0})", true, "max_tokens", "invalid_value"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1.5})", true, "max_tokens", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":9223372036854775807})", true, "max_tokens", "invalid_value"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_completion_tokens":1e300})", true, "max_completion_tokens", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", true, "stream", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", true, "stop[0]", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":5})", true, "n", "invalid_value"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})", true, "top_logprobs", "invalid_value"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":1}})", true,
       "stream_options.include_usage", "invalid_type"},
      {R"({"messages":[{"role":"user","content":"x"}],"tools":{}})", true, "tools", "invalid_type"},
      {R"({})", false, "prompt", "missing_required_parameter"},
      {R"({"prompt":"x","logprobs":true})", false, "logprobs", "invalid_type"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    ParsedRequest p = parse_completion_request(c.body, c.is_chat, 4);
    ASSERT_FALSE(p.ok);
    EXPECT_EQ(p.error.status, 400);
    EXPECT_EQ(p.error.param, c.param);
    EXPECT_EQ(p.error.code, c.code);
    EXPECT_FALSE(p.error.message.empty());
    // The error object has OpenAI's four keys.
    const json e = json::parse(error_body(p.error));
    ASSERT_TRUE(e.contains("error"));
    for (const char* k : {"message", "type", "param", "code"}) EXPECT_TRUE(e["error"].contains(k)) << k;
    EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  }
}

TEST(ServeApi, ResponseAndChunkObjects) {
  ChoiceDelta c;
  c.text = "hello";
  c.finish_reason = "length";
  Usage u{5, 3, 2};
  json r = json::parse(response_body(true, "chatcmpl-1", 100, "m", {c}, u));
  EXPECT_EQ(r["object"], "chat.completion");
  EXPECT_EQ(r["choices"][0]["message"]["content"], "hello");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["total_tokens"], 8);
  EXPECT_EQ(r["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  r = json::parse(response_body(false, "cmpl-1", 100, "m", {c}, u));
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["choices"][0]["text"], "hello");
  ChoiceDelta first;
  first.first = true;
  json k = json::parse(chunk_body(true, "x", 1, "m", first, true));
  EXPECT_EQ(k["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(k["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(k.contains("usage") && k["usage"].is_null());
  json uc = json::parse(usage_chunk_body(true, "x", 1, "m", u));
  EXPECT_TRUE(uc["choices"].empty());
  EXPECT_EQ(uc["usage"]["completion_tokens"], 3);
  // Invalid UTF-8 in generated text still makes valid JSON.
  c.text = std::string("\xff\xfe", 2);
  EXPECT_FALSE(json::parse(response_body(true, "a", 1, "m", {c}, u), nullptr, false).is_discarded());
  json models = json::parse(models_body("m", 1));
  EXPECT_EQ(models["data"][0]["id"], "m");
}

// Random and mutated bodies never crash the parser and always give either a request or an error object.
TEST(ServeApi, ParserSurvivesMutatedBodies) {
  const std::string seed = R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"max_tokens":3,"stop":["x"],"stream_options":{"include_usage":true}})";
  std::mt19937 rng(1);
  for (int i = 0; i < 3000; ++i) {
    std::string b = seed;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b[at] = static_cast<char>(rng() % 256); break;
        case 1: b.erase(at, 1 + rng() % 8); break;
        default: b.insert(at, 1, "{}[]\",:0-e"[rng() % 10]); break;
      }
      if (b.empty()) b = "{";
    }
    ParsedRequest p = parse_completion_request(b, (i & 1) != 0, 4);
    if (!p.ok) {
      EXPECT_FALSE(json::parse(error_body(p.error), nullptr, false).is_discarded());
    } else {
      EXPECT_FALSE(json::parse(p.request.chat ? p.request.messages_json : "{}", nullptr, false).is_discarded());
    }
  }
}
