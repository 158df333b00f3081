#include "genai/search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "nxrt/float_types.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace nxrt::genai {

float LogitsRow::get(int64_t j) const {
  if (dtype == DataType::kFloat16) return half_to_float(static_cast<const uint16_t*>(data)[j]);
  return static_cast<const float*>(data)[j];
}

void LogitsRow::set(int64_t j, float v) const {
  if (dtype == DataType::kFloat16) {
    static_cast<uint16_t*>(data)[j] = float_to_half(v);
  } else {
    static_cast<float*>(data)[j] = v;
  }
}

int64_t argmax_first(const LogitsRow& row) {
  if (row.dtype == DataType::kFloat) return argmax_first(static_cast<const float*>(row.data), row.size);
  int64_t best = -1;
  float bv = 0;
  for (int64_t j = 0; j < row.size; ++j) {
    const float v = row.get(j);
    if (std::isnan(v)) continue;
    if (best < 0 || v > bv) {
      best = j;
      bv = v;
    }
  }
  return best < 0 ? 0 : best;
}

// Two passes, each a plain vector loop (a greedy step scans the whole vocabulary, 151936 logits for
// Qwen: ~100 us a token one compare-and-branch at a time): the largest non-NaN value, then the first
// index holding it. The maximum starts at -inf and a NaN never compares greater, so NaNs never win;
// when no value is greater than -inf the first -inf wins, as the one-pass rule had it (0 if all NaN).
int64_t argmax_first(const float* x, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  int64_t j = 0;
#if defined(__SSE2__)
  // _mm_max_ps(a, b) returns b when either is NaN: NaN logits leave the running maxima as they were.
  __m128 m0 = _mm_set1_ps(mx), m1 = m0, m2 = m0, m3 = m0;
  for (; j + 16 <= n; j += 16) {
    m0 = _mm_max_ps(_mm_loadu_ps(x + j), m0);
    m1 = _mm_max_ps(_mm_loadu_ps(x + j + 4), m1);
    m2 = _mm_max_ps(_mm_loadu_ps(x + j + 8), m2);
    m3 = _mm_max_ps(_mm_loadu_ps(x + j + 12), m3);
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_max_ps(_mm_max_ps(m0, m1), _mm_max_ps(m2, m3)));
  for (float v : lanes) mx = v > mx ? v : mx;
#endif
  for (; j < n; ++j) mx = x[j] > mx ? x[j] : mx;
  j = 0;
#if defined(__SSE2__)
  const __m128 target = _mm_set1_ps(mx);
  for (; j + 16 <= n; j += 16) {
    const int hit = _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + j), target)) |
                    _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + j + 4), target)) << 4 |
                    _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + j + 8), target)) << 8 |
                    _mm_movemask_ps(_mm_cmpeq_ps(_mm_loadu_ps(x + j + 12), target)) << 12;
    if (hit) return j + __builtin_ctz(static_cast<unsigned>(hit));
  }
#endif
  for (; j < n; ++j)
    if (x[j] == mx) return j;
  return 0;  // every value NaN
}

void apply_repetition_penalty(const LogitsRow& row, const int64_t* seq, int64_t n, double penalty,
                              std::vector<uint8_t>* seen) {
  if (penalty == 1.0 || !(penalty > 0)) return;
  if (seen->size() < static_cast<size_t>(row.size)) seen->resize(static_cast<size_t>(row.size));
  const float p = static_cast<float>(penalty);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = seq[i];
    if (t < 0 || t >= row.size || (*seen)[static_cast<size_t>(t)]) continue;
    (*seen)[static_cast<size_t>(t)] = 1;
    const float v = row.get(t);
    row.set(t, v > 0 ? v / p : v * p);
  }
  for (int64_t i = 0; i < n; ++i) {  // leave the scratch all zero for the next row
    const int64_t t = seq[i];
    if (t >= 0 && t < row.size) (*seen)[static_cast<size_t>(t)] = 0;
  }
}

void apply_repetition_penalty(float* logits, int64_t n, const std::vector<int64_t>& sequence, double penalty) {
  std::vector<uint8_t> seen;
  apply_repetition_penalty(LogitsRow{logits, DataType::kFloat, n}, sequence.data(),
                           static_cast<int64_t>(sequence.size()), penalty, &seen);
}

void suppress_tokens(const LogitsRow& row, const std::vector<int64_t>& ids) {
  const float lowest = row.dtype == DataType::kFloat16 ? -std::numeric_limits<float>::infinity()
                                                       : std::numeric_limits<float>::lowest();
  for (int64_t t : ids) {
    if (t >= 0 && t < row.size) row.set(t, lowest);
  }
}

void ban_repeated_ngrams(const LogitsRow& row, const int64_t* seq, int64_t n, int64_t ngram) {
  if (ngram <= 0 || n + 1 < ngram) return;
  const int64_t prefix = ngram - 1;  // the last ngram-1 tokens must match an earlier n-gram's start
  const float lowest = row.dtype == DataType::kFloat16 ? -std::numeric_limits<float>::infinity()
                                                       : std::numeric_limits<float>::lowest();
  for (int64_t i = 0; i + ngram <= n; ++i) {
    bool same = true;
    for (int64_t k = 0; k < prefix && same; ++k) same = seq[i + k] == seq[n - prefix + k];
    if (!same) continue;
    const int64_t banned = seq[i + prefix];
    if (banned >= 0 && banned < row.size) row.set(banned, lowest);
  }
}

Sampler::Sampler(const SearchOptions& opts) : o_(opts), rng_(opts.random_seed) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

int64_t Sampler::next(const LogitsRow& row) {
  const int64_t n = row.size;
  if (n == 0) return 0;
  if (!o_.do_sample || o_.top_k == 1) return argmax_first(row);

  const double temp = o_.temperature > 0 ? o_.temperature : 1.0;
  // Candidates by descending logit (ties: lower id first), NaN excluded.
  std::vector<int64_t>& idx = idx_;
  idx.clear();
  for (int64_t j = 0; j < n; ++j) {
    if (!std::isnan(row.get(j))) idx.push_back(j);
  }
  if (idx.empty()) return 0;
  auto cmp = [&](int64_t a, int64_t b) {
    const float va = row.get(a), vb = row.get(b);
    return va > vb || (va == vb && a < b);
  };
  size_t keep = idx.size();
  if (o_.top_k > 0 && static_cast<size_t>(o_.top_k) < keep) {
    keep = static_cast<size_t>(o_.top_k);
    std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(keep), idx.end(), cmp);
    idx.resize(keep);
  } else {
    std::sort(idx.begin(), idx.end(), cmp);
  }
  // Softmax over the candidates (the largest first), in double.
  std::vector<double>& p = p_;
  p.resize(keep);
  const double mx = static_cast<double>(row.get(idx[0])) / temp;
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) {
    p[i] = std::exp(static_cast<double>(row.get(idx[i])) / temp - mx);
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
