// The caches a generator carries between runs: per CacheIo of the model one tensor with the rows of
// every sequence (batch_size * num_beams rows).
//
// Two modes:
//  - shared buffer (search.past_present_share_buffer, key/value caches only): one fixed-capacity
//    [rows, kv_heads, capacity, head_size] tensor per cache, bound as both the past input and the present
//    output, so GroupQueryAttention / TensorScatter write the new rows in place;
//  - growing (everything else): the pasts are fed as values and each run's presents replace them
//    (key/value [rows, heads, seq, head_size], combined [2, rows, heads, seq, head_size], states
//    [rows, ...] of fixed size);
//  - copied (a TensorScatter static cache without a shared buffer): full-capacity pasts fed as values,
//    the capacity-long presents replace them.
// Beam search moves rows (reorder): a row's block is contiguous in every layout (batch is the outermost
// dim after the combined key/value axis), so a row is copied with one memcpy per head (only the cached
// positions) or one per state; rows that keep their own beam are not copied.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "genai/model.h"

namespace nxrt::genai {

class CacheSet {
 public:
  CacheSet(const Model::Impl& m, int64_t rows, int64_t capacity, bool share);
  bool share() const { return share_; }
  // KV tensors keep `capacity` positions (shared, or copied static cache).
  bool fixed() const { return fixed_; }
  const char* update_mode() const { return share_ ? "in-place" : fixed_ ? "copied" : "concat"; }
  // Growing mode: adds each past as a feed.
  void add_feeds(std::vector<std::pair<std::string, Value>>* feeds) const;
  // Growing / copied mode: takes the presents outs[first + i] of a run. KV presents must hold `length`
  // positions (exact) or at least `length` (!exact: GroupQueryAttention keeps max(past, total) rows).
  Status take_presents(std::vector<Value>* outs, size_t first, int64_t length, bool exact);
  // Shared mode: binds every cache's buffer as its past input and present output.
  void bind(IoBinding* b) const;
  // Shared mode, after the first run: every present came back as the bound buffer.
  Status check_bound(const IoBinding& b, size_t first_output) const;
  // Row r of every cache becomes a copy of row src[r]; KV rows copy positions [0, len[src[r]]).
  // Returns the rows copied.
  int64_t reorder(const std::vector<int64_t>& src, const std::vector<int64_t>& len);
  // Growing mode: forgets KV positions >= keep.
  void truncate(int64_t keep);
  // Empties the pasts (growing) and zeroes every state.
  void reset();
  // The cached positions of the growing KV pasts (0 with shared buffers).
  int64_t past_length() const;

 private:
  struct Entry {
    const CacheIo* io;
    Tensor t;
  };
  Tensor empty_past(const CacheIo& io) const;

  const Model::Impl& m_;
  int64_t rows_, capacity_;
  bool share_, fixed_;
  std::vector<Entry> entries_;
  std::vector<char> scratch_;  // reorder: the moved rows (grow-only)
};

}  // namespace nxrt::genai
