#include "genai/tokenizer/byte_alphabet.h"

#include "genai/utf8.h"

namespace nxrt::genai::tok {

ByteAlphabet::ByteAlphabet() {
  cp_to_byte.fill(-1);
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    uint32_t cp = printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++);
    append_utf8(byte_to_str[b], cp);
    cp_to_byte[cp] = static_cast<int16_t>(b);
  }
}

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet a;
  return a;
}

}  // namespace nxrt::genai::tok
