// Picking the next token from a logits row: repetition penalty, greedy argmax (lowest id on ties), or
// sampling (temperature, top-k, top-p, min-p) with a seeded, platform-independent PRNG.
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "nxrt/genai.h"

namespace nxrt::genai {

// Index of the largest value, the lowest index on ties; NaN values never win (0 when all are NaN).
int64_t argmax_first(const float* x, int64_t n);

// HF-style: for each distinct token in `sequence`, a positive logit is divided by `penalty`, a negative
// one multiplied by it. No-op for penalty == 1.
void apply_repetition_penalty(float* logits, int64_t n, const std::vector<int64_t>& sequence, double penalty);

class Sampler {
 public:
  explicit Sampler(const SearchOptions& opts);
  // Next token from `logits` (modified: penalties / temperature are applied in place).
  int64_t next(std::vector<float>* logits, const std::vector<int64_t>& sequence);
  // A uniform double in [0, 1) from the generator (53 random bits).
  double uniform();

 private:
  SearchOptions o_;
  std::mt19937_64 rng_;  // the engine's output sequence is fixed by the standard
};

}  // namespace nxrt::genai
