// Fuzz body: tokenizer.json loading, then encode / decode / streaming decode.
//
// The input is tokenizer.json text, optionally followed by a NUL byte and the text to encode (without
// one, a fixed sample text is encoded). A tokenizer that does not load must say why. One that loads:
// every encode either succeeds or says why; ids that encode produced decode; streaming those ids one
// at a time gives the same text as decoding them at once (include/nxrt/tokenizer.h promises it); ids
// made from the text's bytes (in and out of the vocabulary) decode or are refused with a message.
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_targets.h"
#include "genai/tokenizer.h"

namespace nxrt::fuzz {

namespace {

constexpr std::string_view kSample = "Hello, world! 123 héllo  \t\n<|im_start|>user\nñ 日本語 🙂";

bool has_message(const Status& s) { return !s.message().empty(); }

// The most ids the streaming check runs on (the first ones). A decoder chain that strips the text's end
// (Strip with stop > 0) decodes all the ids so far at every step (tokenizer.cpp says why), so streaming
// n ids costs n^2 / 2 token decodes: for the thousands of byte-fallback ids a fuzzed text of a few KB
// makes, past libFuzzer's timeout on an instrumented build of a loaded machine (a finding of a
// 15-minute campaign: 3,000 ids took 13 s).
constexpr size_t kMaxStreamedIds = 512;

// decode(ids) and the streamed steps + flush() agree, or decode refuses the ids.
bool check_decode(const genai::Tokenizer& tok, std::span<const int32_t> all_ids, bool skip_special) {
  const std::span<const int32_t> ids = all_ids.first(std::min(all_ids.size(), kMaxStreamedIds));
  auto whole = tok.decode(ids, skip_special);
  if (!whole.ok()) return has_message(whole.status());
  genai::TokenizerStream stream = tok.create_stream(skip_special);
  std::string streamed;
  for (int32_t id : ids) {
    auto piece = stream.step(id);
    if (!piece.ok()) return false;  // decode accepted every id, so must each step
    streamed += *piece;
  }
  // flush() gives text only for ids that end inside a UTF-8 sequence (U+FFFD, as decode gives), so a
  // caller that never flushes (the onnxruntime-genai API) misses nothing else.
  const std::string rest = stream.flush();
  if (!rest.empty() && !whole->ends_with("\xEF\xBF\xBD")) return false;
  streamed += rest;
  return streamed == *whole;
}

}  // namespace

bool tokenizer(const uint8_t* data, size_t size) {
  if (size > (size_t{64} << 10)) return true;  // long inputs only slow the search down
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view json = in.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? kSample : in.substr(nul + 1);
  auto tok = genai::Tokenizer::from_json_text(json);
  if (!tok.ok()) return has_message(tok.status());
  for (bool special : {true, false}) {
    genai::EncodeOptions eo;
    eo.add_special_tokens = special;
    eo.parse_special = special;
    auto ids = tok->encode(text, eo);
    if (!ids.ok()) {
      if (!has_message(ids.status())) return false;
      continue;
    }
    for (int32_t id : *ids) {
      if (id < 0 || static_cast<size_t>(id) >= tok->vocab_size()) return false;
    }
    auto back = tok->decode(std::span<const int32_t>(*ids));
    if (!back.ok()) return false;  // ids the tokenizer made itself must decode
    if (!check_decode(*tok, *ids, special)) return false;
  }
  // Ids from the text's bytes, some past the vocabulary.
  std::vector<int32_t> raw;
  const int64_t span = static_cast<int64_t>(tok->vocab_size()) + 3;
  for (size_t i = 0; i + 1 < text.size() && raw.size() < 256; i += 2) {
    const int64_t v = static_cast<uint8_t>(text[i]) | (static_cast<uint8_t>(text[i + 1]) << 8);
    raw.push_back(static_cast<int32_t>(v % span) - 1);
  }
  return check_decode(*tok, raw, false) && check_decode(*tok, raw, true);
}

}  // namespace nxrt::fuzz
