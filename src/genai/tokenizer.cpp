// The Tokenizer class (include/nxrt/tokenizer.h): encode, decode and streaming decode over a loaded
// tokenizer.json (Tokenizer::Impl, tokenizer/tokenizer_impl.h; loading is in tokenizer/load.cpp).
#include "genai/tokenizer.h"

#include <utility>

#include "genai/tokenizer/tokenizer_impl.h"
#include "genai/utf8.h"

namespace nxrt::genai {

using tok::AddedSplitter;
using tok::AddedToken;
using tok::DecodeToken;
using tok::DecodeTokens;

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Status Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token.size()) {
    return invalid_argument("tokenizer: token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(id_to_token.size()) + ")");
  }
  return Status::Ok();
}

void Tokenizer::Impl::split_added(std::string_view text, const AddedSplitter& splitter,
                                  std::vector<AddedSplitter::Section>& secs,
                                  std::vector<std::string_view>& views) const {
  secs.clear();
  splitter.split(text, secs);
  views.resize(secs.size());
  for (size_t k = 0; k < secs.size(); ++k) views[k] = text.substr(secs[k].b, secs[k].e - secs[k].b);
  for (size_t k = 0; k < secs.size(); ++k) {
    if (secs[k].id < 0) continue;
    const AddedToken& t = added_token(secs[k].id);
    if (t.lstrip && k > 0) views[k - 1] = trim_js_space(views[k - 1], false, true);
    if (t.rstrip && k + 1 < secs.size()) views[k + 1] = trim_js_space(views[k + 1], true, false);
  }
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view input, bool add_special_tokens) const {
  EncodeOptions o;
  o.add_special_tokens = add_special_tokens;
  return encode(input, o);
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view input, const EncodeOptions& options) const {
  const Impl& m = *impl_;
  const bool add_special_tokens = options.add_special_tokens;
  const AddedSplitter& split_raw = options.parse_special ? m.split_unnormalized : m.plain_unnormalized;
  const AddedSplitter& split_norm = options.parse_special ? m.split_normalized : m.plain_normalized;
  if (input.size() > (size_t{1} << 30)) {  // ICU and the BPE symbols index with 32-bit offsets
    return invalid_argument("tokenizer: input of " + std::to_string(input.size()) + " bytes is over the 1 GiB limit");
  }
  std::string sanitized;
  std::string_view text = input;
  if (!utf8_valid(input)) {
    sanitized = utf8_sanitize(input);
    text = sanitized;
  }
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);

  std::vector<AddedSplitter::Section> secs, subs;
  std::vector<std::string_view> views, sub_views;
  m.split_added(text, split_raw, secs, views);
  for (size_t k = 0; k < secs.size(); ++k) {
    if (views[k].empty()) continue;
    if (secs[k].id >= 0) {
      ids.push_back(secs[k].id);
      continue;
    }
    bool first = k == 0;
    std::string normalized;
    std::string_view section = views[k];
    if (m.normalizer) {
      normalized = std::string(section);
      NXRT_RETURN_IF_ERROR(m.normalizer->normalize(normalized));
      section = normalized;
      if (section.empty()) continue;
    }
    if (split_norm.empty()) {
      NXRT_RETURN_IF_ERROR(m.encode_section(section, first, ids));
      continue;
    }
    m.split_added(section, split_norm, subs, sub_views);
    for (size_t q = 0; q < subs.size(); ++q) {
      if (sub_views[q].empty()) continue;
      if (subs[q].id >= 0) {
        ids.push_back(subs[q].id);
      } else {
        NXRT_RETURN_IF_ERROR(m.encode_section(sub_views[q], first, ids));
      }
    }
  }

  if (!m.post.template_set) return with_config_bos(std::move(ids), add_special_tokens);
  return with_config_bos(m.post.apply(ids, add_special_tokens), add_special_tokens);
}

// tokenizer_config.json's add_bos_token (transformers rebuilds the post-processor from it): a BOS the
// post-processor did not add is put first.
std::vector<int32_t> Tokenizer::with_config_bos(std::vector<int32_t> ids, bool add_special_tokens) const {
  if (!add_special_tokens || !config_ || !config_->add_bos_token || config_->bos_token.empty()) return ids;
  const int32_t bos = token_to_id(config_->bos_token);
  if (bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

Status Tokenizer::Impl::decode_raw(std::span<const int32_t> ids, bool skip_special, std::string& out,
                                   bool continues) const {
  DecodeTokens toks;
  toks.reserve(ids.size());
  for (int32_t id : ids) {
    NXRT_RETURN_IF_ERROR(check_id(id));
    if (skip_special && special_flag[id]) continue;
    toks.push_back({id_to_token[id], added_flag[id] != 0, continues && toks.empty()});
  }
  if (decoder) {
    NXRT_RETURN_IF_ERROR(decoder->decode_chain(toks));
    for (const DecodeToken& t : toks) out += t.text;
  } else {
    for (size_t k = 0; k < toks.size(); ++k) {
      if (k) out += ' ';
      out += toks[k].text;
    }
  }
  return Status::Ok();
}

namespace {
std::string clean_up_tokenization(std::string s) {
  static const std::pair<const char*, const char*> kRules[] = {
      {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    std::string r;
    std::string_view f = from;
    size_t pos = 0;
    while (true) {
      size_t at = s.find(f, pos);
      if (at == std::string::npos) break;
      r.append(s, pos, at - pos);
      r += to;
      pos = at + f.size();
    }
    r.append(s, pos, std::string::npos);
    s = std::move(r);
  }
  return s;
}
}  // namespace

Result<std::string> Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  std::string raw;
  NXRT_RETURN_IF_ERROR(impl_->decode_raw(ids, options.skip_special_tokens, raw));
  std::string text = utf8_valid(raw) ? std::move(raw) : utf8_sanitize(raw);
  if (options.clean_up_tokenization_spaces) text = clean_up_tokenization(std::move(text));
  return text;
}

TokenizerStream Tokenizer::create_stream(bool skip_special_tokens) const {
  return TokenizerStream(this, skip_special_tokens);
}

int32_t Tokenizer::token_to_id(std::string_view token) const { return impl_->lookup(token); }

std::string Tokenizer::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size()) return "";
  return impl_->id_to_token[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special_flag.size() && impl_->special_flag[id];
}

size_t Tokenizer::vocab_size() const { return impl_->id_to_token.size(); }
int32_t Tokenizer::bos_token_id() const { return impl_->post.first_special(); }
int32_t Tokenizer::eos_token_id() const { return impl_->post.last_special(); }

// ---------------------------------------------------------------------------------------------------
// Streaming (the DecodeStream scheme of tokenizers: decode a short window ids[prefix_, end) and emit
// what it adds over ids[prefix_, read_), once it does not end inside a UTF-8 sequence).
//
// A decoder chain that strips the end of the whole text (Fuse, then Strip with `stop` > 0) breaks the
// window scheme: a window's end is not the text's end, and a window made of strippable characters
// only strips fewer of them than the whole text does, so characters already emitted could not be
// taken back. For such a chain the window always starts at the first id: the stream then emits what
// decode() of all the ids so far adds over decode() of the ids before, which only grows by appending
// (the characters the end strip removes are held back until a later id makes them part of the text's
// middle, and are never emitted if no such id comes, as decode() drops them). The cost is a decode of
// the whole text so far at each step; no public tokenizer.json we know of uses `stop` > 0.
// ---------------------------------------------------------------------------------------------------
Result<std::string> TokenizerStream::step(int32_t id) {
  const Tokenizer::Impl& m = tok_->impl();
  NXRT_RETURN_IF_ERROR(m.check_id(id));
  if (skip_special_ && m.special_flag[id]) return std::string();
  ids_.push_back(id);
  std::span<const int32_t> all(ids_);
  std::string prefix_raw, new_raw;
  // Both windows start at prefix_: past the start of the text they decode as a continuation.
  NXRT_RETURN_IF_ERROR(m.decode_raw(all.subspan(prefix_, read_ - prefix_), false, prefix_raw, prefix_ > 0));
  NXRT_RETURN_IF_ERROR(m.decode_raw(all.subspan(prefix_), false, new_raw, prefix_ > 0));
  if (new_raw.size() <= prefix_raw.size()) return std::string();
  std::string_view added = std::string_view(new_raw).substr(prefix_raw.size());
  if (utf8_complete_prefix(added) != added.size()) return std::string();  // wait for the rest
  std::string text = utf8_sanitize(added);
  if (!m.decoder_strips_text_end) prefix_ = read_;
  read_ = ids_.size();
  return text;
}

std::string TokenizerStream::flush() {
  const Tokenizer::Impl& m = tok_->impl();
  std::span<const int32_t> all(ids_);
  std::string prefix_raw, new_raw;
  std::string out;
  if (m.decode_raw(all.subspan(prefix_, read_ - prefix_), false, prefix_raw, prefix_ > 0).ok() &&
      m.decode_raw(all.subspan(prefix_), false, new_raw, prefix_ > 0).ok() && new_raw.size() > prefix_raw.size()) {
    out = utf8_sanitize(std::string_view(new_raw).substr(prefix_raw.size()));
  }
  ids_.clear();
  prefix_ = read_ = 0;
  return out;
}

}  // namespace nxrt::genai
