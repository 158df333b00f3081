// Silero VAD (v5 ONNX graphs: inputs `input` [1, N], `state` [2, 1, 128], `sr` int64; outputs the speech
// probability and the next state) on nxrt's public API, and the speech-segment rules the Silero project
// documents for its get_speech_timestamps.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nxrt/session.h"

namespace examples {

constexpr int kVadSampleRate = 16000;
constexpr int kVadWindow = 512;   // samples per model call at 16 kHz
constexpr int kVadContext = 64;   // trailing samples of the previous window fed in front of each window (v5)

struct VadParams {
  float threshold = 0.5f;       // a window with at least this probability is speech
  float neg_threshold = -1.f;   // speech ends below this; < 0 means max(threshold - 0.15, 0.01)
  int min_speech_ms = 250;      // shorter segments are dropped
  int min_silence_ms = 100;     // a segment ends only after this much silence
  int speech_pad_ms = 30;       // each segment is widened by this much on both sides
};

struct SpeechSegment {
  int64_t start = 0;  // in samples at 16 kHz
  int64_t end = 0;
};

// One speech probability per 512-sample window (the last window zero-padded), with the model's state and
// the 64-sample context carried from window to window.
class SileroVad {
 public:
  static nxrt::Result<std::unique_ptr<SileroVad>> load(const std::string& model_path, int threads);
  // `capture_window` >= 0 keeps that window's model inputs for captured_inputs().
  nxrt::Result<std::vector<float>> probabilities(const std::vector<float>& audio_16k, int64_t capture_window = -1);
  // Milliseconds spent in Session::run during the last probabilities() call, and how many runs.
  double model_ms() const { return model_ms_; }
  int64_t model_runs() const { return model_runs_; }
  // The inputs (name, tensor) of the captured window, to benchmark the same call elsewhere.
  const std::vector<std::pair<std::string, nxrt::Tensor>>& captured_inputs() const { return captured_; }

 private:
  SileroVad() = default;
  std::unique_ptr<nxrt::Session> session_;
  double model_ms_ = 0;
  int64_t model_runs_ = 0;
  std::vector<std::pair<std::string, nxrt::Tensor>> captured_;
};

// Silero's segmentation over per-window probabilities of `num_samples` samples at 16 kHz.
std::vector<SpeechSegment> speech_segments(const std::vector<float>& probs, int64_t num_samples, const VadParams& params);

}  // namespace examples
