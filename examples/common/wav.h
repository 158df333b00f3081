// WAV reading and resampling for the VAD example.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nxrt/status.h"

namespace examples {

struct Audio {
  int sample_rate = 0;
  std::vector<float> samples;  // mono, in [-1, 1]
};

// Reads a RIFF/WAVE file: PCM 8/16/24/32-bit or IEEE float 32/64-bit (also in WAVE_FORMAT_EXTENSIBLE),
// any number of channels, averaged to mono.
nxrt::Result<Audio> read_wav(const std::string& path);
// The same from bytes already in memory; `name` is used in error messages.
nxrt::Result<Audio> parse_wav(const std::vector<uint8_t>& bytes, const std::string& name);

// Band-limited resampling (Hann-windowed sinc, cut off at the lower of the two Nyquist frequencies).
std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate);

}  // namespace examples
