// Tokenizer::load / from_json: reads tokenizer.json into a Tokenizer::Impl, one step per part of the
// file (vocabulary, added tokens, merges, model options, pipeline components), then prepares the
// byte-level fast path and the added-token splitters.
#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "genai/json.h"
#include "genai/tokenizer/byte_alphabet.h"
#include "genai/tokenizer/tokenizer_impl.h"
#include "genai/utf8.h"

namespace nxrt::genai {
namespace {

using tok::AddedToken;

Status read_vocab(const Json& vocab, Tokenizer::Impl& m, int32_t& max_id) {
  m.vocab.reserve(vocab.as_object().size() + 1024);
  for (const auto& [tok, idv] : vocab.as_object()) {
    if (!idv.is_int() || idv.as_int() < 0 || idv.as_int() > 0x7FFFFFFF) {
      return invalid_model("tokenizer.json: vocab entry '" + tok + "' has a bad id");
    }
    int32_t id = static_cast<int32_t>(idv.as_int());
    m.vocab.set(tok, id);
    max_id = std::max(max_id, id);
  }
  return Status::Ok();
}

Status read_added_tokens(const Json& root, Tokenizer::Impl& m, int32_t& max_id) {
  const Json* at = root.find("added_tokens");
  if (!at || !at->is_array()) return Status::Ok();
  for (const Json& a : at->as_array()) {
    AddedToken t;
    const Json* id = a.find("id");
    const Json* content = a.find("content");
    if (!id || !id->is_int() || id->as_int() < 0 || id->as_int() > 0x7FFFFFFF || !content || !content->is_string()) {
      return invalid_model("tokenizer.json: added_tokens entry without an integer 'id' and a string 'content'");
    }
    t.id = static_cast<int32_t>(id->as_int());
    t.content = content->as_string();
    t.special = a.get_bool("special", false);
    t.lstrip = a.get_bool("lstrip", false);
    t.rstrip = a.get_bool("rstrip", false);
    t.normalized = a.get_bool("normalized", !t.special);
    max_id = std::max(max_id, t.id);
    m.added.push_back(std::move(t));
  }
  return Status::Ok();
}

// The id tables below have one slot per id up to the largest, so a file of a few tokens with an id
// of two billion would ask for 64 GB (a fuzzed tokenizer.json did). Real vocabularies are dense or
// nearly so (a model's padded vocabulary leaves at most a few thousand ids unused); ids more than
// four times the token count past the end, with 64K to spare, mean a broken file, and the error says so.
Status check_id_space(const Tokenizer::Impl& m, int32_t max_id) {
  const size_t tokens = m.vocab.size() + m.added.size();
  const size_t limit = 4 * tokens + 65536;
  if (max_id >= 0 && static_cast<size_t>(max_id) >= limit) {
    return invalid_model("tokenizer.json: token id " + std::to_string(max_id) + " is far past its " +
                         std::to_string(tokens) + " tokens (ids must stay below " + std::to_string(limit) +
                         ", 4 x the token count + 65536)");
  }
  return Status::Ok();
}

// id -> token and the per-id flags; added tokens override the vocabulary for their content, like
// tokenizers.js.
void index_tokens(Tokenizer::Impl& m, int32_t max_id) {
  m.id_to_token.assign(static_cast<size_t>(max_id + 1), std::string());
  m.vocab.for_each([&](const std::string& tok, int32_t id) { m.id_to_token[id] = tok; });
  m.special_flag.assign(m.id_to_token.size(), 0);
  m.added_flag.assign(m.id_to_token.size(), 0);
  for (size_t k = 0; k < m.added.size(); ++k) {
    const AddedToken& t = m.added[k];
    m.vocab.set(t.content, t.id);
    m.id_to_token[t.id] = t.content;
    m.special_flag[t.id] = t.special;
    m.added_flag[t.id] = 1;
    m.added_index[t.id] = k;
  }
}

// Merges as "a b" strings or [a, b] pairs; the first (lowest) rank of a pair wins.
Status read_merges(const Json& merges, Tokenizer::Impl& m) {
  const auto& ml = merges.as_array();
  m.merges.reserve(ml.size());
  std::string_view left, right;
  std::string joined;
  for (size_t r = 0; r < ml.size(); ++r) {
    const Json& e = ml[r];
    if (e.is_string()) {
      std::string_view s = e.as_string();
      size_t sp = s.find(' ');
      if (sp == std::string::npos) {
        return invalid_model("tokenizer.json: merge " + std::to_string(r) + " '" + std::string(s) + "' is not 'a b'");
      }
      left = s.substr(0, sp);
      right = s.substr(sp + 1);
    } else if (e.is_array() && e.as_array().size() == 2 && e.as_array()[0].is_string() && e.as_array()[1].is_string()) {
      left = e.as_array()[0].as_string();
      right = e.as_array()[1].as_string();
    } else {
      return invalid_model("tokenizer.json: merge " + std::to_string(r) + " is neither 'a b' nor [a, b]");
    }
    joined.assign(left);
    joined.append(right);
    int32_t a = m.lookup(left), b = m.lookup(right), c = m.lookup(joined);
    if (a < 0 || b < 0 || c < 0) {
      return invalid_model("tokenizer.json: merge " + std::to_string(r) + " ('" + std::string(left) + "', '" +
                           std::string(right) + "') uses a token missing from the vocabulary");
    }
    m.merges.emplace(a, b, {static_cast<int32_t>(r), c});
  }
  return Status::Ok();
}

void read_model_options(const Json& model, Tokenizer::Impl& m) {
  if (const Json* unk = model.find("unk_token"); unk && unk->is_string()) m.unk_id = m.lookup(unk->as_string());
  m.byte_fallback = model.get_bool("byte_fallback", false);
  m.ignore_merges = model.get_bool("ignore_merges", false);
  m.fuse_unk = model.get_bool("fuse_unk", false);
  m.continuing_subword_prefix = model.get_string("continuing_subword_prefix");
  m.end_of_word_suffix = model.get_string("end_of_word_suffix");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    m.byte_fallback_ids[b] = m.lookup(buf);
  }
}

Status read_pipeline(const Json& root, Tokenizer::Impl& m) {
  if (const Json* n = root.find("normalizer"); n && !n->is_null()) {
    NXRT_ASSIGN_OR_RETURN(m.normalizer, tok::make_normalizer(*n));
  }
  if (const Json* p = root.find("pre_tokenizer"); p && !p->is_null()) {
    NXRT_ASSIGN_OR_RETURN(m.pre_tokenizer, tok::make_pre_tokenizer(*p));
  }
  if (const Json* d = root.find("decoder"); d && !d->is_null()) {
    NXRT_ASSIGN_OR_RETURN(m.decoder, tok::make_decoder(*d));
    bool fused = false;
    m.decoder_strips_text_end = m.decoder->strips_text_end(fused);
  }
  if (const Json* pp = root.find("post_processor"); pp && !pp->is_null()) {
    NXRT_RETURN_IF_ERROR(tok::read_post_processor(*pp, m.vocab, m.post));
  }
  return Status::Ok();
}

// The byte-level fast path (Impl::raw_bytes): when the pre-tokenizer ends with ByteLevel and every byte
// has a token, the pre-tokenizer leaves pieces as raw bytes and the model maps them itself.
void enable_byte_level_fast_path(Tokenizer::Impl& m) {
  if (!m.pre_tokenizer || !m.continuing_subword_prefix.empty() || !m.end_of_word_suffix.empty()) return;
  tok::ByteLevelPreTokenizer* last = tok::final_byte_level(m.pre_tokenizer.get());
  const tok::ByteAlphabet& a = tok::byte_alphabet();
  bool all_bytes = true;
  for (int b = 0; b < 256; ++b) {
    m.byte_ids[b] = m.lookup(a.byte_to_str[b]);
    all_bytes = all_bytes && m.byte_ids[b] >= 0;
  }
  if (!last || !all_bytes) return;
  last->map_bytes = false;
  m.raw_bytes = true;
  if (!m.ignore_merges) return;  // raw_vocab is only used for ignore_merges
  m.raw_vocab.reserve(m.vocab.size());
  std::string raw;
  m.vocab.for_each([&](const std::string& tok, int32_t id) {
    raw.clear();
    for (size_t i = 0; i < tok.size();) {
      size_t l;
      if (utf8_step(tok, i) <= 0) return;
      uint32_t cp = decode_cp(tok, i, &l);
      if (cp >= 512 || a.cp_to_byte[cp] < 0) return;
      raw += static_cast<char>(a.cp_to_byte[cp]);
      i += l;
    }
    m.raw_vocab.set(raw, id);
  });
}

// Normalized added tokens are matched after normalization (on their normalized form); the others on
// the raw text.
Status build_added_splitters(Tokenizer::Impl& m) {
  for (const AddedToken& t : m.added) {
    if (t.normalized && m.normalizer) {
      std::string n = t.content;
      NXRT_RETURN_IF_ERROR(m.normalizer->normalize(n));
      m.split_normalized.add(n, t.id);
      if (!t.special) m.plain_normalized.add(n, t.id);
      if (n != t.content) m.vocab.emplace(n, t.id);
    } else {
      m.split_unnormalized.add(t.content, t.id);
      if (!t.special) m.plain_unnormalized.add(t.content, t.id);
    }
  }
  m.split_unnormalized.finish();
  m.split_normalized.finish();
  m.plain_unnormalized.finish();
  m.plain_normalized.finish();
  return Status::Ok();
}

}  // namespace

Result<Tokenizer> Tokenizer::load(const std::string& path) {
  std::error_code ec;
  std::string file = path;
  if (std::filesystem::is_directory(path, ec)) file = (std::filesystem::path(path) / "tokenizer.json").string();
  if (!std::filesystem::exists(file, ec)) return io_error("tokenizer: no such file '" + file + "'");
  NXRT_ASSIGN_OR_RETURN(Json root, parse_json_file(file));
  auto t = from_json(root);
  if (!t.ok()) return t.status().with_context(file + ": ");
  return t;
}

Result<Tokenizer> Tokenizer::from_json_text(std::string_view json_text) {
  NXRT_ASSIGN_OR_RETURN(Json root, parse_json(json_text));
  return from_json(root);
}

Result<Tokenizer> Tokenizer::from_json(const Json& root) {
  if (!root.is_object()) return invalid_model("tokenizer.json: the top level is not an object");
  auto impl = std::make_unique<Impl>();
  const Json* model = root.find("model");
  if (!model || !model->is_object()) return invalid_model("tokenizer.json: missing 'model' object");
  std::string mtype = model->get_string("type");
  const Json* vocab = model->find("vocab");
  const Json* merges = model->find("merges");
  if (mtype.empty() && merges) mtype = "BPE";
  if (mtype != "BPE") {
    return not_implemented("tokenizer.json: model type '" + mtype + "' is not supported (supported: BPE)");
  }
  if (!vocab || !vocab->is_object()) return invalid_model("tokenizer.json: BPE model without a 'vocab' object");
  if (!merges || !merges->is_array()) return invalid_model("tokenizer.json: BPE model without a 'merges' array");

  int32_t max_id = -1;
  NXRT_RETURN_IF_ERROR(read_vocab(*vocab, *impl, max_id));
  NXRT_RETURN_IF_ERROR(read_added_tokens(root, *impl, max_id));
  NXRT_RETURN_IF_ERROR(check_id_space(*impl, max_id));
  index_tokens(*impl, max_id);
  NXRT_RETURN_IF_ERROR(read_merges(*merges, *impl));
  read_model_options(*model, *impl);
  NXRT_RETURN_IF_ERROR(read_pipeline(root, *impl));
  enable_byte_level_fast_path(*impl);
  NXRT_RETURN_IF_ERROR(build_added_splitters(*impl));
  return Tokenizer(std::move(impl));
}

}  // namespace nxrt::genai
