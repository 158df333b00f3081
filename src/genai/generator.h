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
  bool share_buffer() const { return share_; }
  const char* update_mode() const { return share_ ? "copied" : "concat"; }

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
  bool logits_valid = false;
  bool done = false;
  int64_t last_token = -1;
  Stats stats;

  Impl(const Model& model_, const SearchOptions& o, int64_t cap);
  // Runs the model over sequence[kv->length() ..].
  Status run_pending();
};

}  // namespace nxrt::genai
