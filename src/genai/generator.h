// Generator internals: the rows' sequences, the caches (kv_cache.h), the feeds of a run and the search.
//
// Rows: rows = batch_size * num_beams; row r of prompt b is r = b * num_beams + beam. Every row has the
// same sequence length `len` (padding included); tokens[r * capacity + i] is its i-th token and
// valid[...] says whether it is a real token (0: left padding, or pad_token_id after the row finished).
// The model has run positions [0, run_len); positions [run_len, len) are pending (the last generated
// tokens, or appended ones) and run at the next get_logits / generate_next_token.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "genai/beam_search.h"
#include "genai/kv_cache.h"
#include "genai/model.h"
#include "genai/search.h"
#include "nxrt/genai.h"

namespace nxrt::genai {

struct Generator::Impl {
  const Model& model;
  const Model::Impl& m;
  SearchOptions opts;
  int64_t batch = 1, beams = 1, rows = 1, capacity = 0, vocab = 0;
  KvLayout layout = KvLayout::kAligned;
  std::unique_ptr<CacheSet> cache;
  Sampler sampler;
  std::unique_ptr<BeamSearch> beam;

  // Sequences ([rows * capacity]; beam search swaps in the *_next copies after reordering).
  std::vector<int64_t> tokens, tokens_next;
  std::vector<uint8_t> valid, valid_next;
  int64_t len = 0, run_len = 0;
  std::vector<int64_t> kv_len;    // per row: KV positions in use (kPerRow: its real tokens run so far)
  std::vector<int64_t> kv_len_next;  // beam search: kv_len reordered
  std::vector<uint8_t> row_done;  // greedy / sampling: the row generated EOS
  bool done = false;

  // Logits of the rows' next tokens: rows into the last run's logits output, or set_logits' values.
  bool logits_ready = false;
  Value logits_value;               // keeps the output tensor alive
  std::vector<float> user_logits;   // set_logits
  std::vector<LogitsRow> logit_rows;
  std::vector<uint8_t> seen;        // repetition penalty scratch

  // Feeds: the ids / mask / positions of a run are views over capacity-sized storage, so a step's
  // tensors are made without allocating.
  Tensor ids_store, mask_store, pos_store, use_cache_t;
  Tensor select_store;  // [rows, 1]: run_pos, when the model computes logits where asked (logits_positions)
  std::vector<int64_t> run_pos;  // per row: output position of its last real token in the run
  // Shared-buffer models run through an IoBinding (caches bound in place, logits pooled).
  IoBinding bind;
  IoBinding feed_bind;  // run_feeds: caches that grow (or are copied) between steps
  bool bound_ready = false, bound_checked = false;
  size_t ids_in = 0, mask_in = 0, pos_in = 0, ucb_in = 0, select_in = 0, logits_out = 0;
  Stats stats;

  Impl(const Model& model_, const SearchOptions& o, int64_t cap);
  // Validity and bookkeeping for appended tokens; runs them.
  Status append(const int64_t* ids, int64_t per_row);
  // Runs the model over positions [run_len, len).
  Status run_pending();
  Status run_feeds(int64_t S, int64_t T);
  Status run_bound(int64_t S, int64_t T);
  Status take_logits(const Tensor& lt, int64_t S);
  // Logits processors, then the search; appends the chosen tokens.
  Status pick_next();
  void apply_processors();
  void append_beam_step();
  void reset();
  int64_t* row_tokens(int64_t r) { return tokens.data() + r * capacity; }
  const int64_t* row_tokens(int64_t r) const { return tokens.data() + r * capacity; }
  bool is_eos(int64_t t) const;
};

}  // namespace nxrt::genai
