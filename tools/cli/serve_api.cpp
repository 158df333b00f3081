#include "serve_api.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace nxrt::cli::serve {
namespace {

using json = nlohmann::ordered_json;

const char* type_name(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return "an integer";
    case json::value_t::number_float: return "a number";
    default: return "a value";
  }
}

ApiError bad_type(const std::string& field, const char* expected, const json& got) {
  ApiError e;
  e.message = "Invalid type for '" + field + "': expected " + expected + ", but got " + type_name(got) + " instead.";
  e.param = field;
  e.code = "invalid_type";
  return e;
}

ApiError bad_value(const std::string& field, const std::string& why) {
  ApiError e;
  e.message = "Invalid value for '" + field + "': " + why;
  e.param = field;
  e.code = "invalid_value";
  return e;
}

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool is_int(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return true;
  if (v.is_number_float()) {
    const double d = v.get<double>();
    return std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15;
  }
  return false;
}

// Reads the fields of a request object one by one; the first problem wins.
class Reader {
 public:
  explicit Reader(const json& obj) : obj_(obj) {}
  bool failed() const { return failed_; }
  const ApiError& error() const { return error_; }
  void fail(ApiError e) {
    if (!failed_) error_ = std::move(e);
    failed_ = true;
  }
  // The field when present and not null.
  const json* get(const char* name) const {
    auto it = obj_.find(name);
    return it == obj_.end() || it->is_null() ? nullptr : &*it;
  }
  void number(const char* name, double lo, double hi, double* out) {
    const json* v = get(name);
    if (!v || failed_) return;
    if (!v->is_number()) return fail(bad_type(name, "a number", *v));
    const double d = v->get<double>();
    if (!(d >= lo && d <= hi)) return fail(bad_value(name, num(d) + " is outside [" + num(lo) + ", " + num(hi) + "]."));
    *out = d;
  }
  void integer(const char* name, int64_t lo, int64_t hi, std::optional<int64_t>* out) {
    const json* v = get(name);
    if (!v || failed_) return;
    if (!is_int(*v)) return fail(bad_type(name, "an integer", *v));
    const int64_t i = v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                          ? INT64_MAX
                          : v->is_number_float() ? static_cast<int64_t>(v->get<double>()) : v->get<int64_t>();
    if (i < lo || i > hi) {
      return fail(bad_value(name, std::to_string(i) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]."));
    }
    *out = i;
  }
  void boolean(const char* name, bool* out) {
    const json* v = get(name);
    if (!v || failed_) return;
    if (!v->is_boolean()) return fail(bad_type(name, "a boolean", *v));
    *out = v->get<bool>();
  }
  void string(const char* name, std::string* out) {
    const json* v = get(name);
    if (!v || failed_) return;
    if (!v->is_string()) return fail(bad_type(name, "a string", *v));
    *out = v->get<std::string>();
  }

 private:
  const json& obj_;
  bool failed_ = false;
  ApiError error_;
};

// Chat content: a string, or parts [{type: "text", text}] joined with newlines (other part types are
// not supported by a text model).
bool content_text(const json& content, const std::string& where, std::string* out, ApiError* err) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return true;
  }
  if (!content.is_array()) {
    *err = bad_type(where, "a string or an array of content parts", content);
    return false;
  }
  std::string text;
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) {
      *err = bad_type(at, "an object", part);
      return false;
    }
    auto type = part.find("type");
    if (type == part.end() || !type->is_string()) {
      *err = bad_value(at + ".type", "a content part needs a string 'type'.");
      return false;
    }
    if (*type != "text") {
      *err = bad_value(at + ".type", "content parts of type '" + type->get<std::string>() +
                                         "' are not supported (text only: this is a text model).");
      return false;
    }
    auto t = part.find("text");
    if (t == part.end() || !t->is_string()) {
      *err = bad_type(at + ".text", "a string", t == part.end() ? json() : *t);
      return false;
    }
    if (!text.empty()) text += "\n";
    text += t->get<std::string>();
  }
  *out = std::move(text);
  return true;
}

bool parse_messages(const json& msgs, json* out, ApiError* err) {
  if (!msgs.is_array()) {
    *err = bad_type("messages", "an array", msgs);
    return false;
  }
  if (msgs.empty()) {
    *err = bad_value("messages", "the array is empty; at least one message is required.");
    err->code = "empty_array";
    return false;
  }
  *out = json::array();
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& m = msgs[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) {
      *err = bad_type(at, "an object", m);
      return false;
    }
    auto role = m.find("role");
    if (role == m.end() || !role->is_string()) {
      *err = bad_type(at + ".role", "a string", role == m.end() ? json() : *role);
      if (role == m.end()) {
        err->message = "Missing required parameter: '" + at + ".role'.";
        err->code = "missing_required_parameter";
      }
      return false;
    }
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "developer" && r != "user" && r != "assistant" && r != "tool") {
      *err = bad_value(at + ".role", "'" + r + "' is not one of system, developer, user, assistant, tool.");
      return false;
    }
    json msg = m;  // other fields (name, tool_calls, tool_call_id) pass through to the template
    msg["role"] = r == "developer" ? "system" : r;  // templates know "system"
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      if (r != "assistant") {
        *err = ApiError{};
        err->message = "Missing required parameter: '" + at + ".content'.";
        err->param = at + ".content";
        err->code = "missing_required_parameter";
        return false;
      }
      msg["content"] = "";
    } else {
      std::string text;
      if (!content_text(*content, at + ".content", &text, err)) return false;
      msg["content"] = text;
    }
    out->push_back(std::move(msg));
  }
  return true;
}

}  // namespace

std::string error_body(const ApiError& e) {
  json err = {{"message", e.message}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

ParsedRequest parse_completion_request(std::string_view body, bool chat, int64_t max_n) {
  ParsedRequest out;
  json root = json::parse(body.begin(), body.end(), nullptr, false);
  if (root.is_discarded()) {
    // Parse again for the position of the error (the non-throwing parse does not report it).
    std::string where;
    try {
      const json again = json::parse(body.begin(), body.end());
      (void)again;
    } catch (const json::parse_error& e) {
      where = " (byte " + std::to_string(e.byte) + ")";
    } catch (const json::exception& e) {
      // A number too large for a double (out_of_range.406) fails the first parse too but is not a
      // parse_error; say what it was instead of letting the exception escape.
      std::string what = e.what();
      if (what.size() > 160) what = what.substr(0, 160) + "...";
      where = " (" + what + ")";
    }
    out.error.message = "We could not parse the JSON body of your request" + where +
                        ". The body must be a JSON object; see https://platform.openai.com/docs/api-reference.";
    out.error.code = "invalid_json";
    return out;
  }
  if (!root.is_object()) {
    out.error = bad_type("body", "a JSON object", root);
    return out;
  }
  CompletionRequest& q = out.request;
  q.chat = chat;
  Reader rd(root);
  rd.string("model", &q.model);
  if (chat) {
    const json* msgs = rd.get("messages");
    if (!msgs) {
      out.error.message = "Missing required parameter: 'messages'.";
      out.error.param = "messages";
      out.error.code = "missing_required_parameter";
      return out;
    }
    json normalized;
    ApiError err;
    if (!parse_messages(*msgs, &normalized, &err)) {
      out.error = err;
      return out;
    }
    q.messages_json = normalized.dump(-1, ' ', false, json::error_handler_t::replace);
    if (const json* tools = rd.get("tools")) {
      if (!tools->is_array()) {
        out.error = bad_type("tools", "an array", *tools);
        return out;
      }
      if (!tools->empty()) q.tools_json = tools->dump(-1, ' ', false, json::error_handler_t::replace);
    }
  } else {
    const json* p = rd.get("prompt");
    if (!p) {
      out.error.message = "Missing required parameter: 'prompt'.";
      out.error.param = "prompt";
      out.error.code = "missing_required_parameter";
      return out;
    }
    // A string, or a list of one: a string, or token ids (a list of integers or a list of one such list).
    const json* one = p;
    if (p->is_array() && p->size() == 1 && ((*p)[0].is_string() || (*p)[0].is_array())) one = &(*p)[0];
    if (one->is_string()) {
      q.prompt_text = one->get<std::string>();
    } else if (one->is_array() && !one->empty() && std::all_of(one->begin(), one->end(), [](const json& v) { return is_int(v); })) {
      q.prompt_is_ids = true;
      for (const json& v : *one) q.prompt_ids.push_back(v.is_number_float() ? static_cast<int64_t>(v.get<double>()) : v.get<int64_t>());
    } else if (one->is_array() && one->size() > 1) {
      out.error = bad_value("prompt", "a list of several prompts is not supported: send one prompt per request.");
      return out;
    } else {
      out.error = bad_type("prompt", "a string, an array of token ids, or an array of one of those", *p);
      return out;
    }
  }
  std::optional<int64_t> max_tokens, max_completion_tokens, top_k, seed, n, top_logprobs, logprobs_count;
  rd.integer("max_tokens", 1, INT32_MAX, &max_tokens);
  rd.integer("max_completion_tokens", 1, INT32_MAX, &max_completion_tokens);
  q.max_tokens = max_completion_tokens ? max_completion_tokens : max_tokens;
  rd.number("temperature", 0.0, 2.0, &q.temperature);
  rd.number("top_p", 0.0, 1.0, &q.top_p);
  if (!rd.failed() && rd.get("top_p") && q.top_p <= 0) rd.fail(bad_value("top_p", "must be greater than 0."));
  rd.integer("top_k", -1, INT32_MAX, &top_k);
  if (top_k) q.top_k = *top_k < 0 ? 0 : *top_k;
  rd.number("min_p", 0.0, 1.0, &q.min_p);
  rd.integer("seed", INT64_MIN, INT64_MAX, &seed);
  q.seed = seed;
  rd.number("presence_penalty", -2.0, 2.0, &q.presence_penalty);
  rd.number("frequency_penalty", -2.0, 2.0, &q.frequency_penalty);
  rd.number("repetition_penalty", 1e-6, 1e6, &q.repetition_penalty);
  rd.integer("n", 1, max_n, &n);
  if (n) q.n = *n;
  rd.boolean("stream", &q.stream);
  rd.boolean("ignore_eos", &q.ignore_eos);
  rd.string("user", &q.user);
  if (chat) {
    rd.boolean("logprobs", &q.logprobs);
    rd.integer("top_logprobs", 0, 20, &top_logprobs);
    if (top_logprobs) {
      if (!q.logprobs && !rd.failed()) rd.fail(bad_value("top_logprobs", "requires 'logprobs' to be true."));
      q.top_logprobs = *top_logprobs;
    }
  } else {
    rd.integer("logprobs", 0, 5, &logprobs_count);
    if (logprobs_count) {
      q.logprobs = true;
      q.top_logprobs = *logprobs_count;
    }
  }
  if (const json* stop = rd.get("stop"); stop && !rd.failed()) {
    if (stop->is_string()) {
      if (!stop->get<std::string>().empty()) q.stop.push_back(stop->get<std::string>());
    } else if (stop->is_array() && stop->size() <= 16) {
      for (size_t i = 0; i < stop->size(); ++i) {
        const json& s = (*stop)[i];
        if (!s.is_string()) {
          rd.fail(bad_type("stop[" + std::to_string(i) + "]", "a string", s));
          break;
        }
        if (!s.get<std::string>().empty()) q.stop.push_back(s.get<std::string>());
      }
    } else if (stop->is_array()) {
      rd.fail(bad_value("stop", std::to_string(stop->size()) + " stop sequences; at most 16."));
    } else {
      rd.fail(bad_type("stop", "a string or an array of strings", *stop));
    }
  }
  if (const json* so = rd.get("stream_options"); so && !rd.failed()) {
    if (!so->is_object()) {
      rd.fail(bad_type("stream_options", "an object", *so));
    } else {
      Reader sr(*so);
      sr.boolean("include_usage", &q.include_usage);
      if (sr.failed()) {
        ApiError e = sr.error();
        e.param = "stream_options." + e.param;
        e.message.replace(e.message.find('\'') + 1, 0, "stream_options.");
        rd.fail(e);
      }
    }
  }
  if (rd.failed()) {
    out.error = rd.error();
    return out;
  }
  out.ok = true;
  return out;
}

namespace {

json logprobs_json(bool chat, const std::vector<TokenLogprob>& lps) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : lps) {
      auto bytes = [](const std::string& s) {
        json b = json::array();
        for (unsigned char c : s) b.push_back(c);
        return b;
      };
      json top = json::array();
      for (const auto& [tok, lp] : t.top) top.push_back({{"token", tok}, {"logprob", lp}, {"bytes", bytes(tok)}});
      content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes(t.token)}, {"top_logprobs", top}});
    }
    return {{"content", content}, {"refusal", nullptr}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.token);
    token_logprobs.push_back(t.logprob);
    json m = json::object();
    for (const auto& [tok, lp] : t.top) m[tok] = lp;
    top.push_back(m);
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", json::array()}};
}

json finish_json(const std::string& f) { return f.empty() ? json(nullptr) : json(f); }

json usage_json(const Usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::string response_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                          const std::vector<ChoiceDelta>& choices, const Usage& usage) {
  json cs = json::array();
  for (const ChoiceDelta& c : choices) {
    json lp = c.with_logprobs ? logprobs_json(chat, c.logprobs) : json(nullptr);
    if (chat) {
      cs.push_back({{"index", c.index},
                    {"message", {{"role", "assistant"}, {"content", c.text}, {"refusal", nullptr}}},
                    {"logprobs", lp},
                    {"finish_reason", finish_json(c.finish_reason)}});
    } else {
      cs.push_back({{"index", c.index}, {"text", c.text}, {"logprobs", lp}, {"finish_reason", finish_json(c.finish_reason)}});
    }
  }
  return dump({{"id", id},
               {"object", chat ? "chat.completion" : "text_completion"},
               {"created", created},
               {"model", model},
               {"system_fingerprint", "nxrt"},
               {"choices", cs},
               {"usage", usage_json(usage)}});
}

std::string chunk_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                       const ChoiceDelta& c, bool include_usage) {
  json lp = c.with_logprobs ? logprobs_json(chat, c.logprobs) : json(nullptr);
  json choice;
  if (chat) {
    json delta = json::object();
    if (c.first) delta["role"] = "assistant";
    if (c.first || !c.text.empty()) delta["content"] = c.text;
    choice = {{"index", c.index}, {"delta", delta}, {"logprobs", lp}, {"finish_reason", finish_json(c.finish_reason)}};
  } else {
    choice = {{"index", c.index}, {"text", c.text}, {"logprobs", lp}, {"finish_reason", finish_json(c.finish_reason)}};
  }
  json j = {{"id", id},
            {"object", chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", model},
            {"system_fingerprint", "nxrt"},
            {"choices", json::array({choice})}};
  if (include_usage) j["usage"] = nullptr;
  return dump(j);
}

std::string usage_chunk_body(bool chat, const std::string& id, int64_t created, const std::string& model,
                             const Usage& usage) {
  return dump({{"id", id},
               {"object", chat ? "chat.completion.chunk" : "text_completion"},
               {"created", created},
               {"model", model},
               {"system_fingerprint", "nxrt"},
               {"choices", json::array()},
               {"usage", usage_json(usage)}});
}

std::string model_body(const std::string& model, int64_t created) {
  return dump({{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "nxrt"}});
}

std::string models_body(const std::string& model, int64_t created) {
  return dump({{"object", "list"}, {"data", json::array({json::parse(model_body(model, created))})}});
}

}  // namespace nxrt::cli::serve
