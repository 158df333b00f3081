#include "genai/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace nxrt::genai {
namespace {

// Heap order: the root is the worst kept candidate (lowest score; on equal scores the higher flat index,
// so the lower index is kept and ranks first).
bool worse(float sa, int64_t fa, float sb, int64_t fb) { return sa < sb || (sa == sb && fa > fb); }

}  // namespace

BeamSearch::BeamSearch(int64_t batch, int64_t beams, double length_penalty, bool early_stopping,
                       std::vector<int64_t> eos_ids, int64_t pad_token_id)
    : batch_(batch),
      beams_(beams),
      length_penalty_(length_penalty),
      early_stopping_(early_stopping),
      eos_(std::move(eos_ids)),
      pad_(pad_token_id) {
  reset();
}

void BeamSearch::reset() {
  const size_t rows = static_cast<size_t>(batch_ * beams_);
  prompts_.assign(static_cast<size_t>(batch_), Prompt{});
  not_done_ = batch_;
  finalized_ = false;
  // Only beam 0 of a prompt starts open, so the first step does not pick the same token num_beams times.
  beam_scores_.assign(rows, 0.f);
  for (int64_t b = 0; b < batch_; ++b)
    for (int64_t k = 1; k < beams_; ++k) beam_scores_[static_cast<size_t>(b * beams_ + k)] = -1e9f;
  next_scores_.assign(rows, 0.f);
  next_tokens_.assign(rows, 0);
  next_indices_.resize(rows);
  for (size_t r = 0; r < rows; ++r) next_indices_[r] = static_cast<int64_t>(r);
}

bool BeamSearch::is_eos(int64_t t) const { return std::find(eos_.begin(), eos_.end(), t) != eos_.end(); }

void BeamSearch::add(Prompt& p, const int64_t* tokens, int64_t len, float sum_logprobs) const {
  const float score = sum_logprobs / std::pow(static_cast<float>(len), static_cast<float>(length_penalty_));
  const size_t cap = static_cast<size_t>(beams_);
  if (p.hyps.size() == cap && score <= p.hyps.back().score) return;
  size_t at = p.hyps.size() == cap ? cap - 1 : p.hyps.size();
  while (at > 0 && score > p.hyps[at - 1].score) --at;
  Hypothesis h{std::vector<int64_t>(tokens, tokens + len), score};
  if (p.hyps.size() == cap) p.hyps.pop_back();
  p.hyps.insert(p.hyps.begin() + static_cast<std::ptrdiff_t>(at), std::move(h));
}

void BeamSearch::select(const std::vector<LogitsRow>& rows, const int64_t* seq, int64_t stride, int64_t len) {
  const int64_t V = rows.empty() ? 0 : rows[0].size;
  const size_t n_rows = static_cast<size_t>(batch_ * beams_);
  lse_.resize(n_rows);
  // Enough candidates that num_beams of them are not EOS even when every EOS id ranks high.
  const int64_t top_k = beams_ + std::max<int64_t>(beams_, static_cast<int64_t>(eos_.size()));
  auto heap_cmp = [](const Candidate& a, const Candidate& b) { return worse(b.score, b.flat, a.score, a.flat); };
  for (int64_t b = 0; b < batch_; ++b) {
    Prompt& p = prompts_[static_cast<size_t>(b)];
    if (p.done) {  // keeps padding its rows, each row following itself
      for (int64_t k = 0; k < beams_; ++k) {
        const size_t r = static_cast<size_t>(b * beams_ + k);
        next_scores_[r] = 0.f;
        next_tokens_[r] = pad_;
        next_indices_[r] = static_cast<int64_t>(r);
      }
      continue;
    }
    heap_.clear();
    for (int64_t k = 0; k < beams_; ++k) {
      const size_t r = static_cast<size_t>(b * beams_ + k);
      const LogitsRow& row = rows[r];
      // log_softmax(x)_j = (x_j - max) - log(sum exp(x - max)), as onnxruntime-genai's LogSoftMax.
      float mx = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < V; ++j) mx = std::max(mx, row.get(j));
      double sum = 0;
      for (int64_t j = 0; j < V; ++j) sum += std::exp(static_cast<double>(row.get(j) - mx));
      const float log_sum = static_cast<float>(std::log(sum));
      const float base = beam_scores_[r];
      for (int64_t j = 0; j < V; ++j) {
        const float s = (row.get(j) - mx) - log_sum + base;
        const int64_t flat = k * V + j;
        if (static_cast<int64_t>(heap_.size()) < top_k) {
          heap_.push_back({s, flat});
          std::push_heap(heap_.begin(), heap_.end(), heap_cmp);
        } else if (worse(heap_.front().score, heap_.front().flat, s, flat)) {
          std::pop_heap(heap_.begin(), heap_.end(), heap_cmp);
          heap_.back() = {s, flat};
          std::push_heap(heap_.begin(), heap_.end(), heap_cmp);
        }
      }
    }
    std::sort_heap(heap_.begin(), heap_.end(), heap_cmp);  // best first
    int64_t filled = 0;
    for (size_t j = 0; j < heap_.size() && filled < beams_; ++j) {
      const int64_t token = heap_[j].flat % V;
      const int64_t src = b * beams_ + heap_[j].flat / V;
      if (is_eos(token)) {
        if (static_cast<int64_t>(j) >= beams_) continue;  // worse than the num_beams best: dropped
        add(p, seq + src * stride, len, heap_[j].score);
        continue;
      }
      const size_t r = static_cast<size_t>(b * beams_ + filled);
      next_scores_[r] = heap_[j].score;
      next_tokens_[r] = token;
      next_indices_[r] = src;
      ++filled;
    }
    if (static_cast<int64_t>(p.hyps.size()) < beams_) continue;
    if (!early_stopping_) {
      // Done only when the best candidate of this step can no longer beat the worst hypothesis.
      const float best = heap_.front().score;
      const float cur = best / std::pow(static_cast<float>(len), static_cast<float>(length_penalty_));
      if (p.hyps.back().score < cur) continue;
    }
    p.done = true;
    --not_done_;
  }
  beam_scores_ = next_scores_;
}

void BeamSearch::finalize(const int64_t* seq, int64_t stride, int64_t len) {
  if (finalized_) return;
  finalized_ = true;
  for (int64_t b = 0; b < batch_; ++b) {
    Prompt& p = prompts_[static_cast<size_t>(b)];
    if (p.done) continue;
    for (int64_t k = 0; k < beams_; ++k) {
      const int64_t r = b * beams_ + k;
      add(p, seq + r * stride, len, beam_scores_[static_cast<size_t>(r)]);
    }
  }
}

const std::vector<int64_t>* BeamSearch::hypothesis(int64_t prompt, int64_t k) const {
  if (prompt < 0 || prompt >= batch_) return nullptr;
  const Prompt& p = prompts_[static_cast<size_t>(prompt)];
  if (k < 0 || k >= static_cast<int64_t>(p.hyps.size())) return nullptr;
  return &p.hyps[static_cast<size_t>(k)].tokens;
}

}  // namespace nxrt::genai
