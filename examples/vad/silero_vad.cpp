#include "vad/silero_vad.h"

#include <algorithm>

#include "common/timing.h"

namespace examples {

nxrt::Result<std::unique_ptr<SileroVad>> SileroVad::load(const std::string& model_path, int threads) {
  nxrt::SessionOptions options;
  options.threads = threads;
  auto session = nxrt::Session::create(model_path, options);
  if (!session.ok()) return session.status().with_context(model_path + ": ");
  const auto& inputs = (*session)->inputs();
  auto has_input = [&](const char* name) {
    return std::any_of(inputs.begin(), inputs.end(), [&](const nxrt::ValueMeta& m) { return m.name == name; });
  };
  if (!has_input("input") || !has_input("state") || !has_input("sr") || (*session)->outputs().size() != 2) {
    return nxrt::invalid_model(model_path + ": not a Silero VAD v5 graph (expected inputs 'input', 'state', 'sr' "
                               "and two outputs: the probability and the next state)");
  }
  std::unique_ptr<SileroVad> vad(new SileroVad());
  vad->session_ = std::move(session).value();
  return vad;
}

nxrt::Result<std::vector<float>> SileroVad::probabilities(const std::vector<float>& audio_16k,
                                                          int64_t capture_window) {
  model_ms_ = 0;
  model_runs_ = 0;
  captured_.clear();
  std::vector<float> probs;
  nxrt::Tensor state(nxrt::DataType::kFloat, nxrt::Dims{2, 1, 128});  // zeros: the start of a stream
  std::vector<float> context(kVadContext, 0.f);
  const int64_t n = static_cast<int64_t>(audio_16k.size());
  for (int64_t start = 0, window = 0; start < n; start += kVadWindow, ++window) {
    // [previous 64 samples | this window], the window zero-padded at the end of the audio.
    nxrt::Tensor x(nxrt::DataType::kFloat, nxrt::Dims{1, kVadContext + kVadWindow});
    float* px = x.data<float>();
    std::copy(context.begin(), context.end(), px);
    const int64_t count = std::min<int64_t>(kVadWindow, n - start);
    std::copy(audio_16k.begin() + start, audio_16k.begin() + start + count, px + kVadContext);
    std::copy(px + kVadWindow, px + kVadWindow + kVadContext, context.begin());
    std::vector<std::pair<std::string, nxrt::Value>> feeds = {
        {"input", x}, {"state", state}, {"sr", nxrt::Tensor::scalar_int64(kVadSampleRate)}};
    if (window == capture_window) {
      for (const auto& [name, value] : feeds) captured_.emplace_back(name, value.tensor().clone());
    }
    const auto t0 = Clock::now();
    auto outputs = session_->run(feeds);
    model_ms_ += ms_since(t0);
    ++model_runs_;
    if (!outputs.ok()) {
      return outputs.status().with_context("Silero VAD, window at sample " + std::to_string(start) + ": ");
    }
    const nxrt::Value& prob = (*outputs)[0];
    const nxrt::Value& next_state = (*outputs)[1];
    if (!prob.is_tensor() || prob.tensor().dtype() != nxrt::DataType::kFloat || prob.tensor().numel() != 1 ||
        !next_state.is_tensor() || next_state.tensor().shape() != state.shape()) {
      return nxrt::runtime_error("Silero VAD: expected a float probability and a [2, 1, 128] state, got " +
                                 prob.describe() + " and " + next_state.describe());
    }
    probs.push_back(*prob.tensor().contiguous().data<float>());
    state = next_state.tensor().clone();  // the session reuses its output buffers on the next run
  }
  return probs;
}

std::vector<SpeechSegment> speech_segments(const std::vector<float>& probs, int64_t num_samples,
                                           const VadParams& params) {
  const int64_t min_speech = int64_t{kVadSampleRate} * params.min_speech_ms / 1000;
  const int64_t min_silence = int64_t{kVadSampleRate} * params.min_silence_ms / 1000;
  const int64_t pad = int64_t{kVadSampleRate} * params.speech_pad_ms / 1000;
  const float neg_threshold = params.neg_threshold >= 0 ? params.neg_threshold : std::max(params.threshold - 0.15f, 0.01f);

  std::vector<SpeechSegment> segments;
  bool in_speech = false;
  SpeechSegment current;
  int64_t silence_start = 0;  // where the current run of quiet windows began; 0 = none
  for (size_t i = 0; i < probs.size(); ++i) {
    const int64_t pos = static_cast<int64_t>(i) * kVadWindow;
    if (probs[i] >= params.threshold) silence_start = 0;  // speech again: forget a tentative end
    if (probs[i] >= params.threshold && !in_speech) {
      in_speech = true;
      current.start = pos;
      continue;
    }
    if (probs[i] < neg_threshold && in_speech) {
      if (silence_start == 0) silence_start = pos;
      if (pos - silence_start < min_silence) continue;  // not quiet for long enough yet
      current.end = silence_start;
      if (current.end - current.start > min_speech) segments.push_back(current);
      in_speech = false;
      silence_start = 0;
    }
  }
  if (in_speech && num_samples - current.start > min_speech) {
    current.end = num_samples;
    segments.push_back(current);
  }
  // Padding: each segment grows by `pad` on both sides; where two segments are closer than 2 * pad, the
  // gap is split between them instead.
  for (size_t i = 0; i < segments.size(); ++i) {
    if (i == 0) segments[i].start = std::max<int64_t>(0, segments[i].start - pad);
    if (i + 1 < segments.size()) {
      const int64_t gap = segments[i + 1].start - segments[i].end;
      if (gap < 2 * pad) {
        segments[i].end += gap / 2;
        segments[i + 1].start = std::max<int64_t>(0, segments[i + 1].start - gap / 2);
      } else {
        segments[i].end = std::min(num_samples, segments[i].end + pad);
        segments[i + 1].start = std::max<int64_t>(0, segments[i + 1].start - pad);
      }
    } else {
      segments[i].end = std::min(num_samples, segments[i].end + pad);
    }
  }
  return segments;
}

}  // namespace examples
