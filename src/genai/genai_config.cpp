#include "genai/genai_config.h"

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

// A small private JSON reader: enough for genai_config.json (objects, arrays, strings with escapes,
// numbers, literals). Replaced by the shared src/genai/json.h reader once that is on main.
struct ConfigJson {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool b = false;
  double num = 0;
  bool is_int = false;
  int64_t inum = 0;
  std::string str;
  std::vector<ConfigJson> arr;
  std::vector<std::string> keys;  // object members: keys[i] -> vals[i] (no pair<.., ConfigJson>: clang
  std::vector<ConfigJson> vals;   // rejects it while ConfigJson is incomplete)

  const ConfigJson* find(std::string_view key) const;  // defined below: the type must be complete
};

const ConfigJson* ConfigJson::find(std::string_view key) const {
  if (type != Type::kObject) return nullptr;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == key) return &vals[i];
  }
  return nullptr;
}

class Reader {
 public:
  explicit Reader(std::string_view s) : s_(s) {}

  Result<ConfigJson> parse() {
    ConfigJson v;
    NXRT_RETURN_IF_ERROR(value(&v, 0));
    ws();
    if (p_ != s_.size()) return err("unexpected text after the JSON value");
    return v;
  }

 private:
  Status err(const std::string& m) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < p_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    return invalid_argument("JSON " + m + " at line " + std::to_string(line) + ":" + std::to_string(col));
  }
  void ws() {
    while (p_ < s_.size() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\n' || s_[p_] == '\r')) ++p_;
  }
  bool lit(std::string_view w) {
    if (s_.substr(p_, w.size()) == w) {
      p_ += w.size();
      return true;
    }
    return false;
  }
  static void put_utf8(std::string* o, uint32_t c) {
    if (c < 0x80) {
      o->push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      o->push_back(static_cast<char>(0xC0 | (c >> 6)));
      o->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      o->push_back(static_cast<char>(0xE0 | (c >> 12)));
      o->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      o->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      o->push_back(static_cast<char>(0xF0 | (c >> 18)));
      o->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      o->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      o->push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  Status hex4(uint32_t* out) {
    if (p_ + 4 > s_.size()) return err("truncated \\u escape");
    uint32_t c = 0;
    for (int i = 0; i < 4; ++i) {
      char h = s_[p_++];
      c <<= 4;
      if (h >= '0' && h <= '9') c |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') c |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') c |= static_cast<uint32_t>(h - 'A' + 10);
      else return err("bad \\u escape");
    }
    *out = c;
    return Status::Ok();
  }
  Status string(std::string* o) {
    ++p_;  // opening quote
    while (true) {
      if (p_ >= s_.size()) return err("unterminated string");
      char c = s_[p_++];
      if (c == '"') return Status::Ok();
      if (static_cast<unsigned char>(c) < 0x20) return err("control character in string");
      if (c != '\\') {
        o->push_back(c);
        continue;
      }
      if (p_ >= s_.size()) return err("unterminated escape");
      char e = s_[p_++];
      switch (e) {
        case '"': o->push_back('"'); break;
        case '\\': o->push_back('\\'); break;
        case '/': o->push_back('/'); break;
        case 'b': o->push_back('\b'); break;
        case 'f': o->push_back('\f'); break;
        case 'n': o->push_back('\n'); break;
        case 'r': o->push_back('\r'); break;
        case 't': o->push_back('\t'); break;
        case 'u': {
          uint32_t c1 = 0;
          NXRT_RETURN_IF_ERROR(hex4(&c1));
          if (c1 >= 0xD800 && c1 < 0xDC00 && s_.substr(p_, 2) == "\\u") {
            p_ += 2;
            uint32_t c2 = 0;
            NXRT_RETURN_IF_ERROR(hex4(&c2));
            if (c2 >= 0xDC00 && c2 < 0xE000) c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
            else c1 = 0xFFFD;
          } else if (c1 >= 0xD800 && c1 < 0xE000) {
            c1 = 0xFFFD;
          }
          put_utf8(o, c1);
          break;
        }
        default: return err("bad escape");
      }
    }
  }
  Status value(ConfigJson* v, int depth) {
    if (depth > 256) return err("nesting too deep");
    ws();
    if (p_ >= s_.size()) return err("unexpected end of input");
    char c = s_[p_];
    if (c == '{') {
      ++p_;
      v->type = ConfigJson::Type::kObject;
      ws();
      if (p_ < s_.size() && s_[p_] == '}') {
        ++p_;
        return Status::Ok();
      }
      while (true) {
        ws();
        if (p_ >= s_.size() || s_[p_] != '"') return err("expected a member name");
        std::string key;
        NXRT_RETURN_IF_ERROR(string(&key));
        ws();
        if (p_ >= s_.size() || s_[p_] != ':') return err("expected ':'");
        ++p_;
        ConfigJson m;
        NXRT_RETURN_IF_ERROR(value(&m, depth + 1));
        v->keys.push_back(std::move(key));
        v->vals.push_back(std::move(m));
        ws();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < s_.size() && s_[p_] == '}') {
          ++p_;
          return Status::Ok();
        }
        return err("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++p_;
      v->type = ConfigJson::Type::kArray;
      ws();
      if (p_ < s_.size() && s_[p_] == ']') {
        ++p_;
        return Status::Ok();
      }
      while (true) {
        ConfigJson e;
        NXRT_RETURN_IF_ERROR(value(&e, depth + 1));
        v->arr.push_back(std::move(e));
        ws();
        if (p_ < s_.size() && s_[p_] == ',') {
          ++p_;
          continue;
        }
        if (p_ < s_.size() && s_[p_] == ']') {
          ++p_;
          return Status::Ok();
        }
        return err("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v->type = ConfigJson::Type::kString;
      return string(&v->str);
    }
    if (lit("true")) {
      v->type = ConfigJson::Type::kBool;
      v->b = true;
      return Status::Ok();
    }
    if (lit("false")) {
      v->type = ConfigJson::Type::kBool;
      return Status::Ok();
    }
    if (lit("null")) return Status::Ok();
    size_t start = p_;
    if (p_ < s_.size() && s_[p_] == '-') ++p_;
    bool frac = false;
    while (p_ < s_.size()) {
      char d = s_[p_];
      if (d >= '0' && d <= '9') {
        ++p_;
      } else if (d == '.' || d == 'e' || d == 'E' || d == '+' || d == '-') {
        frac = true;
        ++p_;
      } else {
        break;
      }
    }
    if (p_ == start || (p_ == start + 1 && s_[start] == '-')) return err("unexpected character");
    std::string tok(s_.substr(start, p_ - start));
    char* end = nullptr;
    v->type = ConfigJson::Type::kNumber;
    v->num = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size()) return err("bad number '" + tok + "'");
    if (!frac && tok.size() < 19) {
      v->is_int = true;
      v->inum = std::strtoll(tok.c_str(), nullptr, 10);
    }
    return Status::Ok();
  }

  std::string_view s_;
  size_t p_ = 0;
};

// Typed getters over a config object; a present member of the wrong type is an error.
class Fields {
 public:
  Fields(const ConfigJson* obj, std::string where, const std::string& path)
      : o_(obj), where_(std::move(where)), path_(path) {}
  const ConfigJson* get(const char* key) const { return o_ ? o_->find(key) : nullptr; }
  Status str(const char* key, std::string* out) const {
    const ConfigJson* v = get(key);
    if (!v || v->type == ConfigJson::Type::kNull) return Status::Ok();
    if (v->type != ConfigJson::Type::kString) return bad(key, "a string");
    *out = v->str;
    return Status::Ok();
  }
  Status integer(const char* key, int64_t* out) const {
    const ConfigJson* v = get(key);
    if (!v || v->type == ConfigJson::Type::kNull) return Status::Ok();
    if (v->type != ConfigJson::Type::kNumber || !v->is_int) return bad(key, "an integer");
    *out = v->inum;
    return Status::Ok();
  }
  Status number(const char* key, double* out) const {
    const ConfigJson* v = get(key);
    if (!v || v->type == ConfigJson::Type::kNull) return Status::Ok();
    if (v->type != ConfigJson::Type::kNumber) return bad(key, "a number");
    *out = v->num;
    return Status::Ok();
  }
  Status boolean(const char* key, bool* out) const {
    const ConfigJson* v = get(key);
    if (!v || v->type == ConfigJson::Type::kNull) return Status::Ok();
    if (v->type != ConfigJson::Type::kBool) return bad(key, "true or false");
    *out = v->b;
    return Status::Ok();
  }
  // An integer or an array of integers (eos_token_id).
  Status int_list(const char* key, std::vector<int64_t>* out) const {
    const ConfigJson* v = get(key);
    if (!v || v->type == ConfigJson::Type::kNull) return Status::Ok();
    out->clear();
    if (v->type == ConfigJson::Type::kNumber && v->is_int) {
      out->push_back(v->inum);
      return Status::Ok();
    }
    if (v->type != ConfigJson::Type::kArray) return bad(key, "an integer or a list of integers");
    for (const auto& e : v->arr) {
      if (e.type != ConfigJson::Type::kNumber || !e.is_int) return bad(key, "an integer or a list of integers");
      out->push_back(e.inum);
    }
    return Status::Ok();
  }

 private:
  Status bad(const char* key, const char* what) const {
    return invalid_argument(path_ + ": " + where_ + key + " must be " + what);
  }
  const ConfigJson* o_;
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
  auto parsed = Reader(text).parse();
  if (!parsed.ok()) return parsed.status().with_context(path + ": ");
  const ConfigJson& root = parsed.value();
  if (root.type != ConfigJson::Type::kObject) return invalid_argument(path + ": not a JSON object");
  Config c;
  c.config_path = path;
  size_t slash = path.find_last_of('/');
  c.model_dir = slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
  const ConfigJson* model = root.find("model");
  if (!model || model->type != ConfigJson::Type::kObject) return invalid_argument(path + ": no \"model\" object");
  const ConfigJson* dec = model->find("decoder");
  if (!dec || dec->type != ConfigJson::Type::kObject) {
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
  if (in.get("past_names") && !in.get("past_key_names")) {
    return not_implemented(path + ": combined past_names KV tensors are not supported (use past_key_names / "
                                  "past_value_names)");
  }
  NXRT_RETURN_IF_ERROR(out.str("logits", &c.logits));
  NXRT_RETURN_IF_ERROR(out.str("present_key_names", &c.present_key_names));
  NXRT_RETURN_IF_ERROR(out.str("present_value_names", &c.present_value_names));
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
