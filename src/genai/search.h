// Picking the next token from a logits row: logits processors (min_length, repetition penalty,
// no_repeat_ngram_size) applied in place, greedy argmax (lowest id on ties), or sampling (temperature,
// top-k, top-p, min-p) with a seeded, platform-independent PRNG. Rows are read where the model left
// them, float32 or float16 (LogitsRow), so a float16 model's logits are never copied to float32 whole.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "nxrt/genai.h"

namespace nxrt::genai {

// One row of logits, float32 or float16, read and edited in place.
struct LogitsRow {
  void* data = nullptr;
  DataType dtype = DataType::kFloat;
  int64_t size = 0;
  float get(int64_t j) const;
  void set(int64_t j, float v) const;
};

// Index of the largest value, the lowest index on ties; NaN values never win (0 when all are NaN).
int64_t argmax_first(const LogitsRow& row);
int64_t argmax_first(const float* x, int64_t n);

// HF / onnxruntime-genai: for each distinct token in seq[0, n), a positive logit is divided by `penalty`,
// a negative one multiplied by it. No-op for penalty == 1. `seen` is scratch (grown to the row size).
void apply_repetition_penalty(const LogitsRow& row, const int64_t* seq, int64_t n, double penalty,
                              std::vector<uint8_t>* seen);
void apply_repetition_penalty(float* logits, int64_t n, const std::vector<int64_t>& sequence, double penalty);
// Sets the given ids to the lowest value (float32: lowest finite, as onnxruntime-genai; float16: -inf).
void suppress_tokens(const LogitsRow& row, const std::vector<int64_t>& ids);
// HF's no_repeat_ngram_size: bans every token that would complete an n-gram already in seq[0, n).
void ban_repeated_ngrams(const LogitsRow& row, const int64_t* seq, int64_t n, int64_t ngram);

class Sampler {
 public:
  explicit Sampler(const SearchOptions& opts);
  // Next token from `row` (greedy when do_sample is false or top_k is 1). Reads the row only.
  int64_t next(const LogitsRow& row);
  // A uniform double in [0, 1) from the generator (53 random bits).
  double uniform();

 private:
  SearchOptions o_;
  std::mt19937_64 rng_;  // the engine's output sequence is fixed by the standard
  std::vector<int64_t> idx_;  // scratch, kept so a step does not allocate
  std::vector<double> p_;
};

}  // namespace nxrt::genai
