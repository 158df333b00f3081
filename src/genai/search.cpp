#include "genai/search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_set>

namespace nxrt::genai {

int64_t argmax_first(const float* x, int64_t n) {
  int64_t best = -1;
  float bv = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float v = x[j];
    if (std::isnan(v)) continue;
    if (best < 0 || v > bv) {
      best = j;
      bv = v;
    }
  }
  return best < 0 ? 0 : best;
}

void apply_repetition_penalty(float* logits, int64_t n, const std::vector<int64_t>& sequence, double penalty) {
  if (penalty == 1.0 || !(penalty > 0)) return;
  std::unordered_set<int64_t> seen;
  const float p = static_cast<float>(penalty);
  for (int64_t t : sequence) {
    if (t < 0 || t >= n || !seen.insert(t).second) continue;
    float& v = logits[t];
    v = v > 0 ? v / p : v * p;
  }
}

Sampler::Sampler(const SearchOptions& opts) : o_(opts), rng_(opts.random_seed) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int64_t Sampler::next(std::vector<float>* logits_in, const std::vector<int64_t>& sequence) {
  std::vector<float>& logits = *logits_in;
  const int64_t n = static_cast<int64_t>(logits.size());
  if (n == 0) return 0;
  apply_repetition_penalty(logits.data(), n, sequence, o_.repetition_penalty);
  if (!o_.do_sample || o_.top_k == 1) return argmax_first(logits.data(), n);

  const double temp = o_.temperature > 0 ? o_.temperature : 1.0;
  // Candidates by descending logit (ties: lower id first), NaN excluded.
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isnan(logits[j])) idx.push_back(j);
  }
  if (idx.empty()) return 0;
  auto cmp = [&](int64_t a, int64_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  size_t keep = idx.size();
  if (o_.top_k > 0 && static_cast<size_t>(o_.top_k) < keep) {
    keep = static_cast<size_t>(o_.top_k);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(), cmp);
    idx.resize(keep);
  } else {
    std::sort(idx.begin(), idx.end(), cmp);
  }
  // Softmax over the candidates (the largest first), in double.
  std::vector<double> p(keep);
  const double mx = static_cast<double>(logits[idx[0]]) / temp;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp(static_cast<double>(logits[idx[i]]) / temp - mx);
    sum += p[i];
  }
  for (double& v : p) v /= sum;
  if (o_.top_p < 1.0 && o_.top_p > 0) {
    double cum = 0;
    size_t k = 0;
    while (k < keep) {
      cum += p[k++];
      if (cum >= o_.top_p) break;
    }
    keep = std::max<size_t>(k, 1);
  }
  if (o_.min_p > 0) {
    const double floor = o_.min_p * p[0];
    size_t k = 1;
    while (k < keep && p[k] >= floor) ++k;
    keep = k;
  }
  double total = 0;
  for (size_t i = 0; i < keep; ++i) total += p[i];
  const double u = uniform() * total;
  double cum = 0;
  for (size_t i = 0; i < keep; ++i) {
    cum += p[i];
    if (u < cum) return idx[i];
  }
  return idx[keep - 1];
}

}  // namespace nxrt::genai
