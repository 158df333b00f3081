// GPT-2's byte-level alphabet: every byte maps to a printable code point, so that byte-level BPE
// vocabularies are strings of printable characters. Shared by the ByteLevel pre-tokenizer and decoder
// and by the byte-level fast path of the BPE model.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace nxrt::genai::tok {

struct ByteAlphabet {
  std::array<std::string, 256> byte_to_str;  // UTF-8 of the code point for each byte
  std::array<int16_t, 512> cp_to_byte;        // -1: not in the alphabet
  ByteAlphabet();
};

const ByteAlphabet& byte_alphabet();

}  // namespace nxrt::genai::tok
