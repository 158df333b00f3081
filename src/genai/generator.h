// Generator internals. KvCache is the one place that knows how past/present reach the session: today
// through Session::run feeds (a present comes back as a new tensor and replaces the past); with
// IoBinding it binds past and present to one buffer and only feeds()/update() change.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "genai/model.h"
#include "genai/search.h"
#include "nxrt/genai.h"

namespace nxrt::genai {

class KvCache {
 public:
  // share_buffer: fixed [1, kv_heads, capacity, head_size] tensors; else the past grows per step.
  KvCache(const Model::Impl& m, int64_t capacity, bool share_buffer);
  // Adds the past feeds for a run over new tokens when `length` rows are valid.
  void feeds(std::vector<std::pair<std::string, Value>>* out) const;
  // Takes the presents (in kv order) of a run that left `new_length` valid rows.
  Status update(std::vector<Value>* presents, size_t first, int64_t new_length);
  // Forgets rows >= length.
  void rewind(int64_t length);
  int64_t length() const { return length_; }
  void set_length(int64_t n) { length_ = n; }
  bool share_buffer() const { return share_; }
  // share_buffer: past and present are bound to one buffer and updated in place by the model.
  const char* update_mode() const { return share_ ? "in-place" : "concat"; }
  // The fixed-capacity buffer of kv pair i (share_buffer only).
  const Tensor& buffer(size_t i) const { return past_[i]; }

 private:
  const Model::Impl& m_;
  int64_t capacity_;
  bool share_;
  int64_t length_ = 0;
  std::vector<Tensor> past_;
};

struct Generator::Impl {
  const Model& model;
  const Model::Impl& m;
  SearchOptions opts;
  int64_t capacity = 0;
  std::unique_ptr<KvCache> kv;
  Sampler sampler;
  std::vector<int64_t> sequence;
  std::vector<float> logits;  // last position, valid when logits_valid
  std::vector<float> row;     // sampling scratch (kept to avoid an allocation per token)
  bool logits_valid = false;
  bool done = false;
  int64_t last_token = -1;
  Stats stats;

  // share_buffer models run through an IoBinding: past_i and present_i bound to one KV buffer, the
  // attention mask a view of a capacity-sized buffer of ones, logits in a runtime-owned buffer that
  // keeps its address. A decode step at steady state allocates nothing.
  IoBinding bind;
  bool bound_ready = false;
  size_t ids_in = 0, mask_in = 0, pos_in = 0, logits_out = 0;
  Tensor ids_t, pos_t, mask_ones;

  Impl(const Model& model_, const SearchOptions& o, int64_t cap);
  // Runs the model over sequence[kv->length() ..].
  Status run_pending();
  Status run_bound(int64_t past, int64_t S, int64_t total);
  Status take_logits(const Tensor& lt, int64_t S);
};

}  // namespace nxrt::genai
