#include "genai/genai_config.h"

#include "genai/json.h"

#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string_view>
#include <utility>
#include <vector>

namespace nxrt::genai {
namespace {

// Typed getters over a config object; a present member of the wrong type is an error.
class Fields {
 public:
  Fields(const Json* obj, std::string where, const std::string& path)
      : o_(obj), where_(std::move(where)), path_(path) {}
  const Json* get(const char* key) const { return o_ ? o_->find(key) : nullptr; }
  Status str(const char* key, std::string* out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return Status::Ok();
    if (!v->is_string()) return bad(key, "a string");
    *out = v->as_string();
    return Status::Ok();
  }
  Status integer(const char* key, int64_t* out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return Status::Ok();
    if (!v->is_int()) return bad(key, "an integer");
    *out = v->as_int();
    return Status::Ok();
  }
  Status number(const char* key, double* out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return Status::Ok();
    if (!v->is_number()) return bad(key, "a number");
    *out = v->as_double();
    return Status::Ok();
  }
  Status boolean(const char* key, bool* out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return Status::Ok();
    if (!v->is_bool()) return bad(key, "true or false");
    *out = v->as_bool();
    return Status::Ok();
  }
  // An array of strings (layer_types).
  Status str_list(const char* key, std::vector<std::string>* out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return Status::Ok();
    if (!v->is_array()) return bad(key, "a list of strings");
    out->clear();
    for (const auto& e : v->as_array()) {
      if (!e.is_string()) return bad(key, "a list of strings");
      out->push_back(e.as_string());
    }
    return Status::Ok();
  }
  // An integer or an array of integers (eos_token_id).
  Status int_list(const char* key, std::vector<int64_t>* out) const {
    const Json* v = get(key);
    if (!v || v->is_null()) return Status::Ok();
    out->clear();
    if (v->is_int()) {
      out->push_back(v->as_int());
      return Status::Ok();
    }
    if (!v->is_array()) return bad(key, "an integer or a list of integers");
    for (const auto& e : v->as_array()) {
      if (!e.is_int()) return bad(key, "an integer or a list of integers");
      out->push_back(e.as_int());
    }
    return Status::Ok();
  }

 private:
  Status bad(const char* key, const char* what) const {
    return invalid_argument(path_ + ": " + where_ + key + " must be " + what);
  }
  const Json* o_;
  std::string where_;
  const std::string& path_;
};

bool file_exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
bool dir_exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string layer_name(const std::string& pattern, int64_t layer) {
  std::string out = pattern;
  size_t pos = out.find("%d");
  if (pos != std::string::npos) out.replace(pos, 2, std::to_string(layer));
  return out;
}

Result<Config> parse_config_text(const std::string& text, const std::string& path) {
  auto parsed = parse_json(text);
  if (!parsed.ok()) return parsed.status().with_context(path + ": ");
  const Json& root = parsed.value();
  if (!root.is_object()) return invalid_argument(path + ": not a JSON object");
  Config c;
  c.config_path = path;
  size_t slash = path.find_last_of('/');
  c.model_dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const Json* model = root.find("model");
  if (!model || !model->is_object()) return invalid_argument(path + ": no \"model\" object");
  const Json* dec = model->find("decoder");
  if (!dec || !dec->is_object()) {
    return invalid_argument(path + ": no \"model.decoder\" object");
  }
  Fields m(model, "model.", path), d(dec, "model.decoder.", path);
  Fields in(dec->find("inputs"), "model.decoder.inputs.", path);
  Fields out(dec->find("outputs"), "model.decoder.outputs.", path);
  Fields s(root.find("search"), "search.", path);
  std::string filename;
  NXRT_RETURN_IF_ERROR(d.str("filename", &filename));
  if (filename.empty()) return invalid_argument(path + ": model.decoder.filename missing");
  c.decoder_path = filename[0] == '/' ? filename : c.model_dir + "/" + filename;
  NXRT_RETURN_IF_ERROR(in.str("input_ids", &c.input_ids));
  NXRT_RETURN_IF_ERROR(in.str("attention_mask", &c.attention_mask));
  NXRT_RETURN_IF_ERROR(in.str("position_ids", &c.position_ids));
  NXRT_RETURN_IF_ERROR(in.str("past_key_names", &c.past_key_names));
  NXRT_RETURN_IF_ERROR(in.str("past_value_names", &c.past_value_names));
  NXRT_RETURN_IF_ERROR(in.str("past_names", &c.past_names));
  NXRT_RETURN_IF_ERROR(in.str("past_conv_names", &c.past_conv_names));
  NXRT_RETURN_IF_ERROR(in.str("use_cache_branch", &c.use_cache_branch));
  NXRT_RETURN_IF_ERROR(out.str("logits", &c.logits));
  NXRT_RETURN_IF_ERROR(out.str("present_key_names", &c.present_key_names));
  NXRT_RETURN_IF_ERROR(out.str("present_value_names", &c.present_value_names));
  NXRT_RETURN_IF_ERROR(out.str("present_names", &c.present_names));
  NXRT_RETURN_IF_ERROR(out.str("present_conv_names", &c.present_conv_names));
  if (c.past_names.empty() != c.present_names.empty()) {
    return invalid_argument(path + ": model.decoder.inputs.past_names and outputs.present_names (combined KV "
                                   "tensors) must be given together");
  }
  NXRT_RETURN_IF_ERROR(d.str_list("layer_types", &c.layer_types));
  NXRT_RETURN_IF_ERROR(d.integer("conv_cache_size", &c.conv_cache_size));
  NXRT_RETURN_IF_ERROR(m.str("type", &c.model_type));
  NXRT_RETURN_IF_ERROR(d.integer("num_hidden_layers", &c.num_hidden_layers));
  NXRT_RETURN_IF_ERROR(d.integer("num_attention_heads", &c.num_attention_heads));
  NXRT_RETURN_IF_ERROR(d.integer("num_key_value_heads", &c.num_key_value_heads));
  NXRT_RETURN_IF_ERROR(d.integer("head_size", &c.head_size));
  NXRT_RETURN_IF_ERROR(d.integer("hidden_size", &c.hidden_size));
  NXRT_RETURN_IF_ERROR(m.integer("context_length", &c.context_length));
  NXRT_RETURN_IF_ERROR(m.integer("vocab_size", &c.vocab_size));
  NXRT_RETURN_IF_ERROR(m.integer("bos_token_id", &c.bos_token_id));
  NXRT_RETURN_IF_ERROR(m.int_list("eos_token_id", &c.eos_token_ids));
  NXRT_RETURN_IF_ERROR(m.integer("pad_token_id", &c.pad_token_id));
  NXRT_RETURN_IF_ERROR(s.integer("max_length", &c.max_length));
  NXRT_RETURN_IF_ERROR(s.boolean("do_sample", &c.do_sample));
  NXRT_RETURN_IF_ERROR(s.integer("top_k", &c.top_k));
  NXRT_RETURN_IF_ERROR(s.number("top_p", &c.top_p));
  NXRT_RETURN_IF_ERROR(s.number("temperature", &c.temperature));
  NXRT_RETURN_IF_ERROR(s.number("repetition_penalty", &c.repetition_penalty));
  NXRT_RETURN_IF_ERROR(s.boolean("past_present_share_buffer", &c.past_present_share_buffer));
  NXRT_RETURN_IF_ERROR(s.integer("min_length", &c.min_length));
  NXRT_RETURN_IF_ERROR(s.integer("num_beams", &c.num_beams));
  NXRT_RETURN_IF_ERROR(s.integer("num_return_sequences", &c.num_return_sequences));
  NXRT_RETURN_IF_ERROR(s.number("length_penalty", &c.length_penalty));
  NXRT_RETURN_IF_ERROR(s.boolean("early_stopping", &c.early_stopping));
  NXRT_RETURN_IF_ERROR(s.integer("no_repeat_ngram_size", &c.no_repeat_ngram_size));
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.head_size == 0 && c.hidden_size > 0 && c.num_attention_heads > 0) {
    c.head_size = c.hidden_size / c.num_attention_heads;
  }
  auto positive = [&](int64_t v, const char* what) -> Status {
    if (v < 1) return invalid_argument(path + ": " + what + " missing or not a positive integer");
    return Status::Ok();
  };
  NXRT_RETURN_IF_ERROR(positive(c.num_hidden_layers, "model.decoder.num_hidden_layers"));
  NXRT_RETURN_IF_ERROR(positive(c.num_key_value_heads, "model.decoder.num_key_value_heads"));
  NXRT_RETURN_IF_ERROR(positive(c.head_size, "model.decoder.head_size"));
  if (c.context_length < 0 || c.vocab_size < 0 || c.max_length < 0) {
    return invalid_argument(path + ": context_length / vocab_size / max_length must not be negative");
  }
  if (!c.layer_types.empty() && static_cast<int64_t>(c.layer_types.size()) != c.num_hidden_layers) {
    return invalid_argument(path + ": model.decoder.layer_types has " + std::to_string(c.layer_types.size()) +
                            " entries, num_hidden_layers is " + std::to_string(c.num_hidden_layers));
  }
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    const std::string& t = c.layer_types[i];
    if (t != "conv" && t != "full_attention" && t != "attention" && t != "sliding_attention") {
      return not_implemented(path + ": model.decoder.layer_types[" + std::to_string(i) + "] '" + t +
                             "' is not supported (attention layers: full_attention, attention, sliding_attention; "
                             "state layers: conv)");
    }
  }
  return c;
}

Result<Config> read_config(const std::string& path) {
  std::string file = path;
  if (dir_exists(path)) {
    file = path + (path.empty() || path.back() == '/' ? "" : "/") + "genai_config.json";
  }
  if (!file_exists(file)) {
    return io_error("cannot read " + file + ": no such file" +
                    (dir_exists(path) ? "" : " (give a model folder with genai_config.json, or the file)"));
  }
  std::ifstream f(file, std::ios::binary);
  if (!f) return io_error("cannot open " + file);
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("cannot read " + file);
  NXRT_ASSIGN_OR_RETURN(Config c, parse_config_text(ss.str(), file));
  if (!file_exists(c.decoder_path)) {
    return io_error(file + ": model.decoder.filename names " + c.decoder_path + ", which does not exist");
  }
  return c;
}

}  // namespace nxrt::genai
