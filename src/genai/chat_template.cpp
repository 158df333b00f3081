// tokenizer_config.json, chat template selection and rendering, and the folder-level Tokenizer API
// (Tokenizer::create, apply_chat_template) on top of the tokenizer.json reader and the Jinja engine.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "genai/jinja/jinja.h"
#include "genai/json.h"
#include "genai/tokenizer.h"
#include "nxrt/genai.h"
#include "nxrt/tokenizer.h"

namespace nxrt::genai {
namespace {

namespace fs = std::filesystem;

// A special token in tokenizer_config.json: a string, an AddedToken object {"content": ...}, or null.
std::string token_string(const Json& root, const char* key) {
  const Json* v = root.find(key);
  if (!v) return "";
  if (v->is_string()) return v->as_string();
  if (v->is_object()) return v->get_string("content");
  return "";
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot read " + path);
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("error reading " + path);
  return ss.str();
}

}  // namespace

Result<TokenizerConfig> read_tokenizer_config(const std::string& folder) {
  TokenizerConfig cfg;
  cfg.folder = folder;
  std::error_code ec;
  const std::string jinja_path = (fs::path(folder) / "chat_template.jinja").string();
  const std::string config_path = (fs::path(folder) / "tokenizer_config.json").string();
  cfg.looked_at = {jinja_path, config_path};
  if (fs::exists(config_path, ec)) {
    NXRT_ASSIGN_OR_RETURN(Json root, parse_json_file(config_path));
    if (!root.is_object()) return invalid_argument(config_path + ": expected a JSON object");
    cfg.bos_token = token_string(root, "bos_token");
    cfg.eos_token = token_string(root, "eos_token");
    cfg.unk_token = token_string(root, "unk_token");
    cfg.pad_token = token_string(root, "pad_token");
    if (const Json* b = root.find("add_bos_token"); b && b->is_bool()) {
      cfg.has_add_bos_token = true;
      cfg.add_bos_token = b->as_bool();
    }
    if (const Json* t = root.find("chat_template")) {
      if (t->is_string()) {
        cfg.chat_templates.emplace_back("default", t->as_string());
      } else if (t->is_array()) {
        for (const Json& item : t->as_array()) {
          const Json* name = item.find("name");
          const Json* text = item.find("template");
          if (!name || !name->is_string() || !text || !text->is_string()) {
            return invalid_argument(config_path + ": chat_template list entries need string 'name' and 'template'");
          }
          cfg.chat_templates.emplace_back(name->as_string(), text->as_string());
        }
      } else if (!t->is_null()) {
        return invalid_argument(config_path + ": chat_template must be a string or a list of {name, template}");
      }
      if (!cfg.chat_templates.empty()) cfg.chat_template_file = config_path;
    }
  }
  if (fs::exists(jinja_path, ec)) {  // chat_template.jinja wins over tokenizer_config.json
    NXRT_ASSIGN_OR_RETURN(std::string text, read_text_file(jinja_path));
    cfg.chat_templates.erase(std::remove_if(cfg.chat_templates.begin(), cfg.chat_templates.end(),
                                            [](const auto& t) { return t.first == "default"; }),
                             cfg.chat_templates.end());
    cfg.chat_templates.insert(cfg.chat_templates.begin(), {"default", std::move(text)});
    cfg.chat_template_file = jinja_path;
  }
  return cfg;
}

Result<std::string> TokenizerConfig::chat_template(bool has_tools) const {
  if (chat_templates.empty()) {
    std::string files;
    for (const std::string& f : looked_at) files += (files.empty() ? "" : ", ") + f;
    return invalid_argument("no chat template: looked at " + files +
                            " (neither has one; give the template with `nxrt template FILE.jinja`)");
  }
  auto find = [&](const char* name) -> const std::string* {
    for (const auto& [n, t] : chat_templates) {
      if (n == name) return &t;
    }
    return nullptr;
  };
  if (has_tools) {
    if (const std::string* t = find("tool_use")) return *t;
  }
  if (const std::string* t = find("default")) return *t;
  std::string names;
  for (const auto& [n, t] : chat_templates) names += (names.empty() ? "" : ", ") + n;
  return invalid_argument(chat_template_file + ": no chat template named 'default' (templates: " + names + ")");
}

Result<std::string> render_chat_template(std::string_view template_source, std::string_view context_json,
                                         const TokenizerConfig* fill, const std::string& name) {
  NXRT_ASSIGN_OR_RETURN(Json ctx, parse_json(context_json));
  if (!ctx.is_object()) return invalid_argument(name + ": the context must be a JSON object");
  if (fill) {
    const std::pair<const char*, const std::string*> tokens[] = {
        {"bos_token", &fill->bos_token}, {"eos_token", &fill->eos_token},
        {"unk_token", &fill->unk_token}, {"pad_token", &fill->pad_token}};
    for (const auto& [key, value] : tokens) {
      if (!value->empty() && !ctx.find(key)) ctx.mutable_object().emplace_back(key, Json::string(*value));
    }
  }
  NXRT_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::parse(template_source, name));
  return t.render(ctx);
}

// ---------------------------------------------------------------------------------------------------
// Folder-level Tokenizer API
// ---------------------------------------------------------------------------------------------------
Result<Tokenizer> Tokenizer::create(const std::string& folder) {
  NXRT_ASSIGN_OR_RETURN(Tokenizer tok, load(folder));
  NXRT_ASSIGN_OR_RETURN(TokenizerConfig cfg, read_tokenizer_config(folder));
  tok.config_ = std::make_shared<const TokenizerConfig>(std::move(cfg));
  return tok;
}

Result<Tokenizer> Tokenizer::create(const Model& model) { return create(model.config().model_dir); }

const TokenizerConfig& Tokenizer::config() const {
  static const TokenizerConfig kEmpty;
  return config_ ? *config_ : kEmpty;
}

std::vector<int32_t> Tokenizer::eos_token_ids() const {
  std::vector<int32_t> ids;
  if (config_ && !config_->eos_token.empty()) {
    const int32_t id = token_to_id(config_->eos_token);
    if (id >= 0) ids.push_back(id);
  }
  if (ids.empty() && eos_token_id() >= 0) ids.push_back(eos_token_id());
  return ids;
}

Result<std::string> Tokenizer::apply_chat_template(std::string_view messages_json, std::string_view tools_json,
                                                   bool add_generation_prompt,
                                                   std::string_view extra_context_json) const {
  const TokenizerConfig& cfg = config();
  NXRT_ASSIGN_OR_RETURN(Json messages, parse_json(messages_json));
  if (!messages.is_array()) return invalid_argument("apply_chat_template: messages must be a JSON array");
  Json tools;
  const bool has_tools_text = !tools_json.empty() && tools_json != "null";
  if (has_tools_text) {
    NXRT_ASSIGN_OR_RETURN(tools, parse_json(tools_json));
    if (!tools.is_array() && !tools.is_null()) return invalid_argument("apply_chat_template: tools must be a JSON array");
  }
  const bool has_tools = tools.is_array() && !tools.as_array().empty();
  NXRT_ASSIGN_OR_RETURN(std::string source, cfg.chat_template(has_tools));
  Json::Object ctx;
  ctx.emplace_back("messages", std::move(messages));
  if (has_tools) ctx.emplace_back("tools", std::move(tools));
  ctx.emplace_back("add_generation_prompt", Json::boolean(add_generation_prompt));
  if (!extra_context_json.empty()) {
    NXRT_ASSIGN_OR_RETURN(Json extra, parse_json(extra_context_json));
    if (!extra.is_object()) return invalid_argument("apply_chat_template: the extra context must be a JSON object");
    for (const Json::Member& m : extra.as_object()) ctx.push_back(m);
  }
  const std::pair<const char*, const std::string*> tokens[] = {
      {"bos_token", &cfg.bos_token}, {"eos_token", &cfg.eos_token},
      {"unk_token", &cfg.unk_token}, {"pad_token", &cfg.pad_token}};
  for (const auto& token : tokens) {
    const std::string_view key = token.first;
    const bool given = std::any_of(ctx.begin(), ctx.end(), [key](const Json::Member& m) { return m.first == key; });
    if (!token.second->empty() && !given) ctx.emplace_back(std::string(key), Json::string(*token.second));
  }
  const std::string name = cfg.chat_template_file.empty() ? "chat_template" : cfg.chat_template_file;
  NXRT_ASSIGN_OR_RETURN(jinja::Template t, jinja::Template::parse(source, name));
  return t.render(Json::object(std::move(ctx)));
}

}  // namespace nxrt::genai
