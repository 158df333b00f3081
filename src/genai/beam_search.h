// Beam search with onnxruntime-genai's scoring (src/search.cpp BeamSearch_Cpu, src/beam_search_scorer.cpp):
// per prompt, num_beams rows; each step takes log_softmax of every row's logits plus the row's beam
// score, keeps the best 2 * num_beams (token, source beam) candidates over all of the prompt's rows,
// moves a candidate that is an EOS id among the first num_beams into the prompt's finished hypotheses
// (the sequence without the EOS, scored sum_logprobs / length^length_penalty with length = the whole
// sequence, prompt and padding included) and continues the best num_beams others. A prompt is done when
// it holds num_beams hypotheses (early_stopping) or when none of its candidates can beat the worst of
// them; at max_length the open beams join the hypotheses. Hypotheses are ranked best first; equal
// scores keep their arrival order.
#pragma once
#include <cstdint>
#include <vector>

#include "genai/search.h"

namespace nxrt::genai {

class BeamSearch {
 public:
  BeamSearch(int64_t batch, int64_t beams, double length_penalty, bool early_stopping, std::vector<int64_t> eos_ids,
             int64_t pad_token_id);
  // Chooses the next beams. rows[r]: the (processed) logits of row r = prompt * beams + beam;
  // seq: tokens of row r at seq[r * stride + i], i < len. Afterwards next_tokens()[r] is appended to
  // row next_indices()[r] to form the new row r, whose beam score is next_scores()[r].
  void select(const std::vector<LogitsRow>& rows, const int64_t* seq, int64_t stride, int64_t len);
  const std::vector<int64_t>& next_tokens() const { return next_tokens_; }
  const std::vector<int64_t>& next_indices() const { return next_indices_; }
  // Every prompt is done.
  bool done() const { return not_done_ == 0; }
  bool prompt_done(int64_t prompt) const { return prompts_[static_cast<size_t>(prompt)].done; }
  // Adds the open beams of unfinished prompts to their hypotheses (once; at the end of generation).
  void finalize(const int64_t* seq, int64_t stride, int64_t len);
  bool finalized() const { return finalized_; }
  // The k-th best hypothesis of `prompt` (null when it has fewer).
  const std::vector<int64_t>* hypothesis(int64_t prompt, int64_t k) const;
  void reset();

 private:
  struct Hypothesis {
    std::vector<int64_t> tokens;
    float score = 0;
  };
  struct Prompt {
    std::vector<Hypothesis> hyps;  // best first, at most beams_
    bool done = false;
  };
  struct Candidate {
    float score;
    int64_t flat;  // beam * vocab + token within the prompt
  };
  void add(Prompt& p, const int64_t* tokens, int64_t len, float sum_logprobs) const;
  bool is_eos(int64_t t) const;

  int64_t batch_, beams_;
  double length_penalty_;
  bool early_stopping_;
  std::vector<int64_t> eos_;
  int64_t pad_;
  int64_t not_done_ = 0;
  bool finalized_ = false;
  std::vector<Prompt> prompts_;
  std::vector<float> beam_scores_;  // [rows]: sum of log-probabilities of each open beam
  std::vector<float> next_scores_;
  std::vector<int64_t> next_tokens_, next_indices_;
  std::vector<Candidate> heap_;  // scratch
  std::vector<float> lse_;       // scratch: per row max + log(sum exp(x - max))
};

}  // namespace nxrt::genai
