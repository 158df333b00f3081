// The VAD example's own code (examples/): WAV parsing, resampling and Silero's speech-segment rules.
// The model itself runs on real audio in tests/examples/.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numbers>
#include <string>
#include <vector>

#include "common/wav.h"
#include "vad/silero_vad.h"

namespace ex = examples;

namespace {

void put16(std::vector<uint8_t>& b, uint32_t v) {
  b.push_back(static_cast<uint8_t>(v));
  b.push_back(static_cast<uint8_t>(v >> 8));
}
void put32(std::vector<uint8_t>& b, uint32_t v) {
  put16(b, v & 0xFFFF);
  put16(b, v >> 16);
}
void put_tag(std::vector<uint8_t>& b, const char* tag) { b.insert(b.end(), tag, tag + 4); }

// A WAV file with the given format code, channels, rate, bits and raw sample bytes; `extra` chunks
// before "fmt " test that unknown chunks are skipped.
std::vector<uint8_t> wav(uint16_t format, uint16_t channels, uint32_t rate, uint16_t bits,
                         const std::vector<uint8_t>& data, bool extra_chunk = false) {
  std::vector<uint8_t> b;
  put_tag(b, "RIFF");
  put32(b, 0);  // patched below
  put_tag(b, "WAVE");
  if (extra_chunk) {
    put_tag(b, "LIST");
    put32(b, 3);
    b.insert(b.end(), {'a', 'b', 'c', 0});  // odd size + pad byte
  }
  put_tag(b, "fmt ");
  put32(b, 16);
  put16(b, format);
  put16(b, channels);
  put32(b, rate);
  put32(b, rate * channels * bits / 8);
  put16(b, static_cast<uint16_t>(channels * bits / 8));
  put16(b, bits);
  put_tag(b, "data");
  put32(b, static_cast<uint32_t>(data.size()));
  b.insert(b.end(), data.begin(), data.end());
  const uint32_t riff = static_cast<uint32_t>(b.size() - 8);
  std::memcpy(b.data() + 4, &riff, 4);
  return b;
}

std::vector<float> probs_from(const std::string& pattern) {  // '#' = speech window, '.' = silence
  std::vector<float> p;
  for (char c : pattern) p.push_back(c == '#' ? 0.9f : (c == '~' ? 0.4f : 0.05f));
  return p;
}

}  // namespace

TEST(ExamplesWav, Pcm16StereoIsMixedToMono) {
  std::vector<uint8_t> data;
  for (int16_t v : {16384, 0, -32768, -16384}) put16(data, static_cast<uint16_t>(v));  // two frames
  auto audio = ex::parse_wav(wav(1, 2, 22050, 16, data, /*extra_chunk=*/true), "t.wav");
  ASSERT_TRUE(audio.ok()) << audio.status().message();
  EXPECT_EQ(audio->sample_rate, 22050);
  ASSERT_EQ(audio->samples.size(), 2u);
  EXPECT_FLOAT_EQ(audio->samples[0], 0.25f);
  EXPECT_FLOAT_EQ(audio->samples[1], -0.75f);
}

TEST(ExamplesWav, FloatAnd24BitSamples) {
  std::vector<uint8_t> f;
  for (float v : {0.5f, -0.125f}) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    put32(f, bits);
  }
  auto a = ex::parse_wav(wav(3, 1, 16000, 32, f), "f.wav");
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->samples, (std::vector<float>{0.5f, -0.125f}));
  const std::vector<uint8_t> s24 = {0x00, 0x00, 0x40, 0x00, 0x00, 0xC0};  // +0.5, -0.5
  auto b = ex::parse_wav(wav(1, 1, 8000, 24, s24), "s24.wav");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->samples, (std::vector<float>{0.5f, -0.5f}));
}

TEST(ExamplesWav, ErrorsNameTheFileAndTheProblem) {
  auto not_wav = ex::parse_wav({'R', 'I', 'F', 'X'}, "x.wav");
  ASSERT_FALSE(not_wav.ok());
  EXPECT_NE(not_wav.status().message().find("'x.wav'"), std::string::npos);
  EXPECT_NE(not_wav.status().message().find("not a RIFF/WAVE"), std::string::npos);
  auto adpcm = ex::parse_wav(wav(2, 1, 8000, 4, {0, 0}), "adpcm.wav");
  ASSERT_FALSE(adpcm.ok());
  EXPECT_NE(adpcm.status().message().find("unsupported encoding (format 2"), std::string::npos);
  std::vector<uint8_t> no_data = wav(1, 1, 8000, 16, {});
  no_data.resize(no_data.size() - 8);  // drop the data chunk header
  auto missing = ex::parse_wav(no_data, "nodata.wav");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no 'data' chunk"), std::string::npos);
  auto unreadable = ex::read_wav("/nonexistent/dir/a.wav");
  ASSERT_FALSE(unreadable.ok());
  EXPECT_NE(unreadable.status().message().find("/nonexistent/dir/a.wav"), std::string::npos);
}

TEST(ExamplesWav, ResampleKeepsFrequencyAndLevel) {
  const int from = 22050, to = 16000;
  const double hz = 440;
  std::vector<float> x(from);  // one second
  for (size_t n = 0; n < x.size(); ++n) x[n] = static_cast<float>(0.5 * std::sin(2 * std::numbers::pi * hz * n / from));
  const std::vector<float> y = ex::resample(x, from, to);
  ASSERT_EQ(y.size(), static_cast<size_t>(to));
  double max_err = 0;
  for (size_t n = 200; n + 200 < y.size(); ++n) {  // away from the ends, where the kernel is cut
    const double ideal = 0.5 * std::sin(2 * std::numbers::pi * hz * n / to);
    max_err = std::max(max_err, std::fabs(y[n] - ideal));
  }
  EXPECT_LT(max_err, 2e-3);
  // A tone above the new Nyquist frequency (8 kHz) is filtered out rather than aliased.
  for (size_t n = 0; n < x.size(); ++n) x[n] = static_cast<float>(0.5 * std::sin(2 * std::numbers::pi * 10000 * n / from));
  const std::vector<float> z = ex::resample(x, from, to);
  double peak = 0;
  for (size_t n = 200; n + 200 < z.size(); ++n) peak = std::max(peak, std::fabs(static_cast<double>(z[n])));
  EXPECT_LT(peak, 0.05);
  EXPECT_EQ(ex::resample(x, 16000, 16000), x);
  // Coprime rates (16000 phases of 67 taps): weights computed per output instead of tabulated.
  std::vector<float> c(32003);
  for (size_t n = 0; n < c.size(); ++n) c[n] = static_cast<float>(0.5 * std::sin(2 * std::numbers::pi * hz * n / 32003));
  const std::vector<float> d = ex::resample(c, 32003, 16000);
  ASSERT_EQ(d.size(), 16000u);
  for (size_t n = 200; n + 200 < d.size(); n += 97) {
    EXPECT_NEAR(d[n], 0.5 * std::sin(2 * std::numbers::pi * hz * n / 16000), 2e-3) << n;
  }
}

TEST(ExamplesVad, SegmentsFollowSilerosRules) {
  const int64_t w = ex::kVadWindow;
  const int64_t pad = 16000 * 30 / 1000;
  ex::VadParams params;
  // 10 quiet windows, 20 speech windows (640 ms), 10 quiet.
  auto one = ex::speech_segments(probs_from("..........####################.........."), 40 * w, params);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].start, 10 * w - pad);
  EXPECT_EQ(one[0].end, 30 * w + pad);

  // Too short (5 windows = 160 ms < 250 ms): dropped.
  EXPECT_TRUE(ex::speech_segments(probs_from("..........#####.........."), 25 * w, params).empty());

  // A 2-window dip (64 ms < 100 ms of silence) does not split; a value between the thresholds neither
  // starts nor ends speech.
  auto dip = ex::speech_segments(probs_from("....##########..######~~~######........"), 39 * w, params);
  ASSERT_EQ(dip.size(), 1u);
  EXPECT_EQ(dip[0].start, 4 * w - pad);
  EXPECT_EQ(dip[0].end, 31 * w + pad);

  // Speech until the end of the audio ends there (no padding past the last sample).
  auto open_end = ex::speech_segments(probs_from("....############"), 16 * w - 100, params);
  ASSERT_EQ(open_end.size(), 1u);
  EXPECT_EQ(open_end[0].end, 16 * w - 100);
}

TEST(ExamplesVad, CloseSegmentsShareTheGapInsteadOfOverlapping) {
  ex::VadParams params;
  params.speech_pad_ms = 200;  // 3200 samples of padding, more than half of the 6-window gap
  const int64_t w = ex::kVadWindow;
  auto two = ex::speech_segments(probs_from("..##########......##########.........."), 38 * w, params);
  ASSERT_EQ(two.size(), 2u);
  // First speech ends at window 12 (the first quiet window), second starts at window 18: the gap is split.
  EXPECT_EQ(two[0].end, 12 * w + 3 * w);
  EXPECT_EQ(two[1].start, 18 * w - 3 * w);
  // Four quiet windows are shorter than min_silence_ms (the check sees at most 3 x 512 < 1600 samples).
  EXPECT_EQ(ex::speech_segments(probs_from("..##########....##########.........."), 36 * w, params).size(), 1u);
  EXPECT_EQ(two[0].start, 0);  // clamped at the start of the audio
}
