// tokenizer.json decoders: ByteLevel ByteFallback Fuse Replace Strip Metaspace Sequence. A decoder chain
// turns the token strings of ids back into text pieces (bytes, not necessarily UTF-8).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::genai {
class Json;
}

namespace nxrt::genai::tok {

struct DecodeToken {
  std::string text;
  bool added = false;  // an added token: passes through ByteLevel unchanged
  // Set on the first token of a piece that continues a sequence (a streaming decoder's window past
  // the start): what decoders do at the start of a text only (Strip's start, Metaspace's first-space
  // removal) is not done then, so pieces decoded this way join into the whole text's decoding.
  bool continues = false;
};
using DecodeTokens = std::vector<DecodeToken>;

struct Decoder {
  virtual ~Decoder() = default;
  virtual Status decode_chain(DecodeTokens& tokens) const = 0;
  // Whether this decoder (the rest of a chain, with `fused` telling whether a Fuse came before) removes
  // characters at the end of the whole text: a Strip with `stop` > 0 after a Fuse. Such a chain's
  // output for a prefix of the ids can end shorter than the same characters do once more ids follow,
  // so a streaming decoder must not take a window's end for the text's end (TokenizerStream::step).
  virtual bool strips_text_end(bool& fused) const {
    (void)fused;
    return false;
  }
};

// The decoder the tokenizer.json object `j` describes; not_implemented for an unknown type.
Result<std::unique_ptr<Decoder>> make_decoder(const Json& j);

}  // namespace nxrt::genai::tok
