#include "common/wav.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <numbers>
#include <numeric>

namespace examples {
namespace {

uint32_t le16(const uint8_t* p) { return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8); }
uint32_t le32(const uint8_t* p) { return le16(p) | (le16(p + 2) << 16); }

constexpr uint32_t kFormatPcm = 1;
constexpr uint32_t kFormatFloat = 3;
constexpr uint32_t kFormatExtensible = 0xFFFE;

// One sample of the given encoding at p, scaled to [-1, 1].
float decode_sample(const uint8_t* p, uint32_t format, uint32_t bits) {
  if (format == kFormatFloat) {
    if (bits == 32) {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    double v;
    std::memcpy(&v, p, 8);
    return static_cast<float>(v);
  }
  switch (bits) {
    case 8: return (static_cast<float>(p[0]) - 128.f) / 128.f;  // 8-bit WAV is unsigned
    case 16: return static_cast<float>(static_cast<int16_t>(le16(p))) / 32768.f;
    case 24: {
      const int32_t v = static_cast<int32_t>((static_cast<uint32_t>(p[0]) << 8) | (static_cast<uint32_t>(p[1]) << 16) |
                                             (static_cast<uint32_t>(p[2]) << 24)) >> 8;
      return static_cast<float>(v) / 8388608.f;
    }
    default: return static_cast<float>(static_cast<int32_t>(le32(p))) / 2147483648.f;
  }
}

}  // namespace

nxrt::Result<Audio> parse_wav(const std::vector<uint8_t>& bytes, const std::string& name) {
  auto bad = [&](const std::string& what) { return nxrt::invalid_argument("WAV '" + name + "': " + what); };
  if (bytes.size() < 12 || std::memcmp(bytes.data(), "RIFF", 4) != 0 || std::memcmp(bytes.data() + 8, "WAVE", 4) != 0) {
    return bad("not a RIFF/WAVE file");
  }
  uint32_t format = 0, channels = 0, rate = 0, bits = 0;
  bool have_format = false;
  const uint8_t* data = nullptr;
  size_t data_size = 0;
  size_t pos = 12;
  while (pos + 8 <= bytes.size()) {
    const uint8_t* chunk = bytes.data() + pos;
    const size_t size = le32(chunk + 4);
    const size_t available = bytes.size() - pos - 8;
    if (std::memcmp(chunk, "fmt ", 4) == 0) {
      if (size < 16 || size > available) return bad("truncated 'fmt ' chunk at byte " + std::to_string(pos));
      format = le16(chunk + 8);
      channels = le16(chunk + 10);
      rate = le32(chunk + 12);
      bits = le16(chunk + 22);
      if (format == kFormatExtensible) {
        if (size < 40) return bad("WAVE_FORMAT_EXTENSIBLE 'fmt ' chunk shorter than 40 bytes");
        format = le16(chunk + 8 + 24);  // the sub-format GUID starts with the format code
      }
      have_format = true;
    } else if (std::memcmp(chunk, "data", 4) == 0) {
      data = chunk + 8;
      // Streaming writers leave the size at 0 or 0xFFFFFFFF: take what is there.
      data_size = (size == 0 || size > available) ? available : size;
      break;
    }
    pos += 8 + size + (size & 1);  // chunks are padded to an even size
  }
  if (!have_format) return bad("no 'fmt ' chunk before the audio data");
  if (data == nullptr) return bad("no 'data' chunk");
  const bool pcm_ok = format == kFormatPcm && (bits == 8 || bits == 16 || bits == 24 || bits == 32);
  const bool float_ok = format == kFormatFloat && (bits == 32 || bits == 64);
  if (!pcm_ok && !float_ok) {
    return bad("unsupported encoding (format " + std::to_string(format) + ", " + std::to_string(bits) +
               " bits); supported: PCM 8/16/24/32-bit, float 32/64-bit");
  }
  if (channels == 0) return bad("zero channels");
  if (rate == 0) return bad("sample rate 0");
  const size_t frame_bytes = static_cast<size_t>(bits / 8) * channels;
  const size_t frames = data_size / frame_bytes;
  Audio audio;
  audio.sample_rate = static_cast<int>(rate);
  audio.samples.resize(frames);
  for (size_t f = 0; f < frames; ++f) {
    float sum = 0;
    for (uint32_t c = 0; c < channels; ++c) sum += decode_sample(data + f * frame_bytes + c * (bits / 8), format, bits);
    audio.samples[f] = sum / static_cast<float>(channels);
  }
  return audio;
}

nxrt::Result<Audio> read_wav(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nxrt::io_error("cannot open WAV '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return nxrt::io_error("cannot read WAV '" + path + "'");
  return parse_wav(bytes, path);
}

std::vector<float> resample(const std::vector<float>& samples, int from_rate, int to_rate) {
  if (from_rate == to_rate || samples.empty()) return samples;
  // Output sample n sits at input position n * from / to = n * P / Q (P, Q coprime): its integer part is
  // (n * P) / Q and its fraction one of Q phases, so the kernel weights are computed once per phase.
  const int64_t g = std::gcd(static_cast<int64_t>(from_rate), static_cast<int64_t>(to_rate));
  const int64_t P = from_rate / g, Q = to_rate / g;
  const double cutoff = std::min(1.0, static_cast<double>(Q) / P);  // fraction of the input Nyquist band
  constexpr int kZeroCrossings = 16;                                 // kernel half-width in zero crossings
  const double half_width = kZeroCrossings / cutoff;                 // in input samples
  const int64_t reach = static_cast<int64_t>(std::ceil(half_width));
  const int64_t taps = 2 * reach + 1;                                // input offsets -reach .. reach
  auto kernel = [&](double d) {  // d: distance in input samples from the output position
    if (std::fabs(d) >= half_width) return 0.0;
    const double x = cutoff * d;
    const double sinc = x == 0 ? 1.0 : std::sin(std::numbers::pi * x) / (std::numbers::pi * x);
    return sinc * (0.5 + 0.5 * std::cos(std::numbers::pi * d / half_width));  // Hann window
  };
  // One row of weights per phase, unless an odd pair of rates makes that table large (then each output
  // computes its own).
  const bool tabulated = Q * taps <= (int64_t{1} << 20);
  std::vector<double> weights(static_cast<size_t>(tabulated ? Q * taps : taps));
  auto fill_row = [&](int64_t q, double* row) {
    const double frac = static_cast<double>(q) / static_cast<double>(Q);
    for (int64_t j = -reach; j <= reach; ++j) row[j + reach] = kernel(frac - static_cast<double>(j));
  };
  if (tabulated) {
    for (int64_t q = 0; q < Q; ++q) fill_row(q, &weights[static_cast<size_t>(q * taps)]);
  }
  const int64_t n_in = static_cast<int64_t>(samples.size());
  const int64_t out_len = n_in * Q / P;
  std::vector<float> out(static_cast<size_t>(out_len));
  for (int64_t n = 0; n < out_len; ++n) {
    const int64_t base = n * P / Q;
    const int64_t phase = n * P % Q;
    if (!tabulated) fill_row(phase, weights.data());
    const double* w = tabulated ? &weights[static_cast<size_t>(phase * taps)] : weights.data();
    double acc = 0, weight_sum = 0;
    for (int64_t j = std::max(-reach, -base); j <= reach && base + j < n_in; ++j) {
      acc += w[j + reach] * samples[static_cast<size_t>(base + j)];
      weight_sum += w[j + reach];
    }
    // Normalising by the weight sum keeps the DC gain at 1, also where the kernel is cut at the ends.
    out[static_cast<size_t>(n)] = static_cast<float>(weight_sum != 0 ? acc / weight_sum : 0.0);
  }
  return out;
}

}  // namespace examples
