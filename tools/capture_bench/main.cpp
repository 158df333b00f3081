// Per-step time of bound steps with captured replay off and on (SessionOptions::capture), in one process:
// two sessions of the same model, stepped in alternating rounds, so machine noise hits both alike.
// With --disable, the two sessions both capture and differ in optimizer passes instead: the second
// runs without the named ones (SessionOptions::disabled_optimizers), which measures what a fusion
// gives. Public API only.
//
//   nxrt_capture_bench genai MODEL_DIR [--prompt-len P] [--steps N] [--rounds R] [--threads T]
//                      [--disable PASS[,PASS]]
//       greedy decode steps (Generator: run the last token + pick the next); each round makes a fresh
//       generator per session (prompt P seeded ids) and runs N steps of each in turns, timing every
//       step after the first 4; the paired line is the median of the step-by-step ratios, the last
//       line that of the prompt's (prefill) time per round, the sessions' order alternating.
//   nxrt_capture_bench vad MODEL.onnx [--steps N] [--rounds R] [--threads T]
//       a Silero VAD v5 stream: chunks of 64 + 512 samples of a seeded signal, the state carried in two
//       bound buffers that swap each chunk (IoBinding), the probability in a bound buffer.
//
// Prints one JSON line per session kind: median and quartiles of the step time (us) over all timed
// steps of all rounds, the number of steps, and the session's capture counters.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "nxrt/genai.h"
#include "nxrt/session.h"

using namespace nxrt;

namespace {

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Args {
  std::string mode, path;
  int64_t prompt_len = 16, steps = 64, rounds = 5;
  int threads = 1;
  std::vector<std::string> disable;  // --disable: the second session's disabled optimizer passes
};

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "error: %s\nusage: nxrt_capture_bench genai MODEL_DIR [--prompt-len P] [--steps N] [--rounds R] [--threads T]\n"
               "                          [--disable PASS[,PASS]]\n"
               "       nxrt_capture_bench vad MODEL.onnx [--steps N] [--rounds R] [--threads T]\n",
               msg.c_str());
  std::exit(2);
}

Args parse(int argc, char** argv) {
  if (argc < 3) usage("missing mode or model");
  Args a;
  a.mode = argv[1];
  a.path = argv[2];
  if (a.mode != "genai" && a.mode != "vad") usage("mode is genai or vad");
  for (int i = 3; i < argc; ++i) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(k + " needs a value");
    if (k == "--disable") {
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        const size_t end = std::min(list.find(',', at), list.size());
        if (end > at) a.disable.push_back(list.substr(at, end - at));
        at = end + 1;
      }
      if (a.disable.empty()) usage("--disable needs a pass name");
      continue;
    }
    const long long v = std::atoll(argv[++i]);
    if (v <= 0) usage(k + " must be a positive number");
    if (k == "--prompt-len") a.prompt_len = v;
    else if (k == "--steps") a.steps = v;
    else if (k == "--rounds") a.rounds = v;
    else if (k == "--threads") a.threads = static_cast<int>(v);
    else usage("unknown option " + k);
  }
  return a;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

void report(const std::string& kind, const std::vector<double>& us, const CaptureStats& st) {
  std::printf("{\"session\":\"%s\",\"steps\":%zu,\"median_us\":%.2f,\"p25_us\":%.2f,\"p75_us\":%.2f,"
              "\"replayed_runs\":%llu,\"recorded_runs\":%llu,\"eager_runs\":%llu,\"captured_nodes\":%zu,"
              "\"seam_nodes\":%zu}\n",
              kind.c_str(), us.size(), quantile(us, 0.5), quantile(us, 0.25), quantile(us, 0.75),
              static_cast<unsigned long long>(st.replayed_runs), static_cast<unsigned long long>(st.recorded_runs),
              static_cast<unsigned long long>(st.eager_runs), st.captured_steps, st.seam_steps);
}

int bench_genai(const Args& a) {
  std::unique_ptr<genai::Model> models[2];
  for (int c = 0; c < 2; ++c) {
    genai::ModelOptions mo;
    mo.session.threads = a.threads;
    mo.session.capture = a.disable.empty() ? c : 1;
    if (c == 1 && !a.disable.empty()) mo.session.disabled_optimizers = a.disable;
    auto m = genai::Model::create(a.path, mo);
    if (!m.ok()) {
      std::fprintf(stderr, "error: %s\n", m.status().to_string().c_str());
      return 1;
    }
    models[c] = std::move(m).value();
  }
  const std::vector<int64_t> prompt = genai::seeded_prompt(a.prompt_len, models[0]->vocab_size(), 1234);
  std::vector<double> times[2];
  std::vector<double> step_ratio;  // per step index of a round: the second session's step / the first's
  std::vector<double> prefill_ratio;  // per round: the second session's prompt time / the first's
  constexpr int kWarm = 4;
  for (int64_t r = 0; r < a.rounds; ++r) {
    // Both generators live through the round and take their steps in turns (the first to go
    // alternating), so a slow stretch of the machine hits neighbouring steps of both.
    std::unique_ptr<genai::Generator> gens[2];
    double prefill_us[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const int c = (r % 2 == 0) ? k : 1 - k;
      genai::GeneratorParams params(*models[c]);
      params.search.max_length = a.prompt_len + a.steps + 1;
      auto gen = genai::Generator::create(*models[c], params);
      if (!gen.ok()) {
        std::fprintf(stderr, "error: %s\n", gen.status().to_string().c_str());
        return 1;
      }
      gens[c] = std::move(gen).value();
      const double t0 = now_us();
      if (Status st = gens[c]->append_tokens(prompt); !st.ok()) {
        std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
        return 1;
      }
      prefill_us[c] = now_us() - t0;
    }
    prefill_ratio.push_back(prefill_us[1] / prefill_us[0]);
    for (int64_t i = 0; i < a.steps; ++i) {
      double dt[2] = {0, 0};
      for (int c = 0; c < 2; ++c) {
        const int kind = ((r + i) % 2 == 0) ? c : 1 - c;
        const double t0 = now_us();
        Status st = gens[kind]->generate_next_token();
        dt[kind] = now_us() - t0;
        if (!st.ok()) {
          std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
          return 1;
        }
      }
      if (i < kWarm) continue;
      for (int c = 0; c < 2; ++c) times[c].push_back(dt[c]);
      step_ratio.push_back(dt[1] / dt[0]);
    }
  }
  std::string without;
  for (const std::string& d : a.disable) without += (without.empty() ? "without " : ",") + d;
  report(a.disable.empty() ? "capture off" : "all passes", times[0], models[0]->session().capture_stats());
  report(a.disable.empty() ? "capture on" : without, times[1], models[1]->session().capture_stats());
  // Paired: each step against the other session's step of the same index, run right before or after it.
  std::printf("{\"second_over_first_paired_median\":%.4f,\"p25\":%.4f,\"p75\":%.4f,\"pairs\":%zu,\"second_faster\":%zu}\n",
              quantile(step_ratio, 0.5), quantile(step_ratio, 0.25), quantile(step_ratio, 0.75), step_ratio.size(),
              static_cast<size_t>(std::count_if(step_ratio.begin(), step_ratio.end(), [](double x) { return x < 1.0; })));
  std::printf("{\"prefill_second_over_first_median\":%.4f,\"p25\":%.4f,\"p75\":%.4f,\"rounds\":%zu}\n",
              quantile(prefill_ratio, 0.5), quantile(prefill_ratio, 0.25), quantile(prefill_ratio, 0.75), prefill_ratio.size());
  return 0;
}

int bench_vad(const Args& a) {
  constexpr int64_t kChunk = 576;  // 64 samples of context + a 512-sample window (16 kHz)
  std::unique_ptr<Session> sessions[2];
  for (int c = 0; c < 2; ++c) {
    SessionOptions o;
    o.threads = a.threads;
    o.capture = c;
    auto s = Session::create(a.path, o);
    if (!s.ok()) {
      std::fprintf(stderr, "error: %s\n", s.status().to_string().c_str());
      return 1;
    }
    sessions[c] = std::move(s).value();
  }
  std::vector<double> times[2];
  for (int64_t r = 0; r < a.rounds; ++r) {
    for (int c = 0; c < 2; ++c) {
      const int kind = (r % 2 == 0) ? c : 1 - c;
      Session& s = *sessions[kind];
      Tensor x(DataType::kFloat, {1, kChunk});
      Tensor states[2] = {Tensor(DataType::kFloat, {2, 1, 128}), Tensor(DataType::kFloat, {2, 1, 128})};
      std::memset(states[0].raw_data(), 0, states[0].nbytes());
      Tensor prob(DataType::kFloat, {1, 1});
      IoBinding b;
      b.bind_input("input", Value(x));
      b.bind_input("sr", Value(Tensor::scalar_int64(16000)));
      b.bind_output(s.outputs()[0].name, prob);
      std::mt19937 rng(static_cast<uint32_t>(r));
      std::normal_distribution<float> noise(0.f, 0.1f);
      for (int64_t i = 0; i < a.steps; ++i) {
        for (int64_t k = 0; k < kChunk; ++k) {
          x.data<float>()[k] = 0.3f * std::sin(0.05f * static_cast<float>(i * kChunk + k)) + noise(rng);
        }
        // The state ping-pongs between two buffers: this chunk reads one and writes the other.
        b.bind_input("state", Value(states[i % 2]));
        b.bind_output(s.outputs()[1].name, states[(i + 1) % 2]);
        const double t0 = now_us();
        Status st = s.run(b);
        const double dt = now_us() - t0;
        if (!st.ok()) {
          std::fprintf(stderr, "error: %s\n", st.to_string().c_str());
          return 1;
        }
        if (i >= 4) times[kind].push_back(dt);
      }
    }
  }
  report("capture off", times[0], sessions[0]->capture_stats());
  report("capture on", times[1], sessions[1]->capture_stats());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  return a.mode == "genai" ? bench_genai(a) : bench_vad(a);
}
