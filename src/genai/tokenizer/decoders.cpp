#include "genai/tokenizer/decoders.h"

#include "genai/json.h"
#include "genai/tokenizer/byte_alphabet.h"
#include "genai/tokenizer/regex.h"
#include "genai/tokenizer/sequence_items.h"
#include "genai/utf8.h"

namespace nxrt::genai::tok {
namespace {

struct ByteLevelDecoder : Decoder {
  Status decode_chain(DecodeTokens& tokens) const override {
    const ByteAlphabet& a = byte_alphabet();
    for (DecodeToken& t : tokens) {
      if (t.added) continue;
      std::string out;
      out.reserve(t.text.size());
      std::string_view s = t.text;
      size_t i = 0;
      while (i < s.size()) {
        size_t l = 1;
        int st = utf8_step(s, i);
        if (st > 0) {
          l = static_cast<size_t>(st);
          uint32_t cp = decode_cp(s, i, &l);
          if (cp < 512 && a.cp_to_byte[cp] >= 0) {
            out += static_cast<char>(a.cp_to_byte[cp]);
          } else {
            out.append(s.substr(i, l));
          }
        } else {
          l = static_cast<size_t>(-st);
          out.append(s.substr(i, l));
        }
        i += l;
      }
      t.text = std::move(out);
    }
    return Status::Ok();
  }
};

struct ByteFallbackDecoder : Decoder {
  Status decode_chain(DecodeTokens& tokens) const override {
    auto hexval = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    for (DecodeToken& t : tokens) {
      const std::string& s = t.text;
      if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>') {
        int h = hexval(s[3]), l = hexval(s[4]);
        if (h >= 0 && l >= 0) t.text = std::string(1, static_cast<char>(h * 16 + l));
      }
    }
    return Status::Ok();
  }
};

struct FuseDecoder : Decoder {
  Status decode_chain(DecodeTokens& tokens) const override {
    DecodeToken all;
    all.continues = !tokens.empty() && tokens.front().continues;
    for (const DecodeToken& t : tokens) all.text += t.text;
    all.added = true;  // already decoded
    tokens.assign(1, std::move(all));
    return Status::Ok();
  }
  bool strips_text_end(bool& fused) const override {
    fused = true;
    return false;
  }
};

struct ReplaceDecoder : Decoder {
  Pattern pattern;
  std::string content;
  Status decode_chain(DecodeTokens& tokens) const override {
    for (DecodeToken& t : tokens) {
      Status st;
      std::string r = replace_all(t.text, pattern, content, &st);
      NXRT_RETURN_IF_ERROR(st);
      t.text = std::move(r);
    }
    return Status::Ok();
  }
};

struct StripDecoder : Decoder {
  std::string content;  // one character
  int64_t start = 0, stop = 0;
  Status decode_chain(DecodeTokens& tokens) const override {
    if (content.empty()) return Status::Ok();
    for (DecodeToken& t : tokens) {
      std::string_view s = t.text;
      const int64_t strip_start = t.continues ? 0 : start;
      for (int64_t i = 0; i < strip_start && s.substr(0, content.size()) == content; ++i) {
        s.remove_prefix(content.size());
      }
      for (int64_t i = 0; i < stop && s.size() >= content.size() &&
                          s.substr(s.size() - content.size()) == content;
           ++i) {
        s.remove_suffix(content.size());
      }
      t.text = std::string(s);
    }
    return Status::Ok();
  }
  // Without a Fuse before it, Strip acts on each token alone, wherever the text ends.
  bool strips_text_end(bool& fused) const override { return fused && stop > 0 && !content.empty(); }
};

struct MetaspaceDecoder : Decoder {
  std::string replacement = "\xE2\x96\x81";
  bool strip_first = true;
  Status decode_chain(DecodeTokens& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string r;
      std::string_view s = tokens[i].text;
      size_t pos = 0;
      while (true) {
        size_t at = s.find(replacement, pos);
        if (at == std::string_view::npos) break;
        r.append(s.substr(pos, at - pos));
        r += ' ';
        pos = at + replacement.size();
      }
      r.append(s.substr(pos));
      if (i == 0 && strip_first && !tokens[i].continues && !r.empty() && r[0] == ' ') r.erase(0, 1);
      tokens[i].text = std::move(r);
    }
    return Status::Ok();
  }
};

struct SequenceDecoder : Decoder {
  std::vector<std::unique_ptr<Decoder>> items;
  Status decode_chain(DecodeTokens& tokens) const override {
    for (const auto& d : items) NXRT_RETURN_IF_ERROR(d->decode_chain(tokens));
    return Status::Ok();
  }
  bool strips_text_end(bool& fused) const override {
    for (const auto& d : items) {
      if (d->strips_text_end(fused)) return true;
    }
    return false;
  }
};

}  // namespace

Result<std::unique_ptr<Decoder>> make_decoder(const Json& j) {
  std::string type = j.get_string("type");
  if (type == "ByteLevel") return std::unique_ptr<Decoder>(std::make_unique<ByteLevelDecoder>());
  if (type == "ByteFallback") return std::unique_ptr<Decoder>(std::make_unique<ByteFallbackDecoder>());
  if (type == "Fuse") return std::unique_ptr<Decoder>(std::make_unique<FuseDecoder>());
  if (type == "Replace") {
    auto d = std::make_unique<ReplaceDecoder>();
    NXRT_ASSIGN_OR_RETURN(d->pattern, parse_pattern(j.find("pattern"), "decoder Replace"));
    d->content = j.get_string("content");
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Strip") {
    auto d = std::make_unique<StripDecoder>();
    d->content = j.get_string("content", " ");
    // tokenizers' Strip decoder strips one character (its `content` is a char): a longer string is no
    // tokenizer it would load, and the streaming decoder relies on the end strip removing whole
    // characters (fuzzing found " <unk" breaking streamed == decode).
    if (d->content.empty() || utf8_step(d->content, 0) != static_cast<int>(d->content.size())) {
      return invalid_argument("tokenizer.json: decoder Strip: content '" + d->content +
                              "' is not one character (Strip strips a single character)");
    }
    d->start = j.get_int("start", 0);
    d->stop = j.get_int("stop", 0);
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Metaspace") {
    auto d = std::make_unique<MetaspaceDecoder>();
    d->replacement = j.get_string("replacement", d->replacement);
    if (const Json* ps = j.find("prepend_scheme"); ps && ps->is_string()) {
      d->strip_first = ps->as_string() != "never";
    } else if (const Json* aps = j.find("add_prefix_space"); aps && aps->is_bool()) {
      d->strip_first = aps->as_bool();
    }
    return std::unique_ptr<Decoder>(std::move(d));
  }
  if (type == "Sequence") {
    auto d = std::make_unique<SequenceDecoder>();
    NXRT_RETURN_IF_ERROR(read_sequence_items(j, "decoders", make_decoder, d->items));
    return std::unique_ptr<Decoder>(std::move(d));
  }
  return not_implemented("tokenizer.json: decoder type '" + type +
                         "' is not supported (supported: ByteLevel ByteFallback Fuse Replace Strip Metaspace Sequence)");
}

}  // namespace nxrt::genai::tok
