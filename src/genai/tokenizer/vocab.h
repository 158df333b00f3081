// The BPE model's lookup tables: token string -> id (TokenMap) and id pair -> merge (MergeMap), both
// open-addressing hash maps sized for vocabularies of a few hundred thousand entries.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt::genai::tok {

// Transparent string hash (lets a std::unordered_map<std::string, ...> be searched with string_views).
struct HashSV {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

// Open-addressing (linear probing) map from strings to ids, owning its keys: one allocation per long
// key instead of a node per entry, and a probe sequence that stays in cache.
class TokenMap {
 public:
  void reserve(size_t n) {
    keys_.reserve(n);
    vals_.reserve(n);
    if (n * 2 > slots_.size()) rehash(n * 2);
  }
  size_t size() const { return keys_.size(); }
  int32_t find(std::string_view key) const {
    if (slots_.empty()) return -1;
    uint64_t h = hash(key);
    uint32_t tag = static_cast<uint32_t>(h >> 32) | 1u;
    size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const Slot& sl = slots_[i];
      if (sl.tag == 0) return -1;
      if (sl.tag == tag && keys_[sl.index] == key) return vals_[sl.index];
    }
  }
  // Inserts, or overwrites the value of an existing key.
  void set(std::string_view key, int32_t value) { insert(key, value, true); }
  // Inserts only when absent.
  void emplace(std::string_view key, int32_t value) { insert(key, value, false); }
  template <typename F>
  void for_each(F&& f) const {
    for (size_t i = 0; i < keys_.size(); ++i) f(keys_[i], vals_[i]);
  }

 private:
  struct Slot {
    uint32_t tag = 0;  // 0: empty; else high hash bits | 1
    uint32_t index = 0;
  };
  static uint64_t hash(std::string_view s) { return std::hash<std::string_view>()(s) * 0x9E3779B97F4A7C15ull; }
  void rehash(size_t want) {
    size_t cap = 16;
    while (cap < want) cap <<= 1;
    std::vector<Slot> slots(cap);
    size_t mask = cap - 1;
    for (uint32_t k = 0; k < keys_.size(); ++k) {
      uint64_t h = hash(keys_[k]);
      size_t i = h & mask;
      while (slots[i].tag != 0) i = (i + 1) & mask;
      slots[i] = {static_cast<uint32_t>(h >> 32) | 1u, k};
    }
    slots_ = std::move(slots);
  }
  void insert(std::string_view key, int32_t value, bool overwrite) {
    if ((keys_.size() + 1) * 2 > slots_.size()) rehash((keys_.size() + 1) * 2);
    uint64_t h = hash(key);
    uint32_t tag = static_cast<uint32_t>(h >> 32) | 1u;
    size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    for (;; i = (i + 1) & mask) {
      Slot& sl = slots_[i];
      if (sl.tag == 0) break;
      if (sl.tag == tag && keys_[sl.index] == key) {
        if (overwrite) vals_[sl.index] = value;
        return;
      }
    }
    slots_[i] = {tag, static_cast<uint32_t>(keys_.size())};
    keys_.emplace_back(key);
    vals_.push_back(value);
  }
  std::vector<std::string> keys_;
  std::vector<int32_t> vals_;
  std::vector<Slot> slots_;
};

// Open-addressing map (left id, right id) -> (rank, merged id).
class MergeMap {
 public:
  struct Value {
    int32_t rank, merged;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < n * 2) cap <<= 1;
    if (cap > keys_.size()) rehash(cap);
  }
  const Value* find(int32_t a, int32_t b) const {
    if (keys_.empty()) return nullptr;
    uint64_t key = pack(a, b);
    size_t mask = keys_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      if (keys_[i] == key) return &vals_[i];
      if (keys_[i] == kEmpty) return nullptr;
    }
  }
  // Keeps the first value for a key (the lowest rank).
  void emplace(int32_t a, int32_t b, Value v) {
    if ((size_ + 1) * 2 > keys_.size()) rehash(std::max<size_t>(16, keys_.size() * 2));
    uint64_t key = pack(a, b);
    size_t mask = keys_.size() - 1;
    size_t i = hash(key) & mask;
    while (keys_[i] != kEmpty) {
      if (keys_[i] == key) return;
      i = (i + 1) & mask;
    }
    keys_[i] = key;
    vals_[i] = v;
    ++size_;
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t pack(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  static uint64_t hash(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
  }
  void rehash(size_t cap) {
    std::vector<uint64_t> keys(cap, kEmpty);
    std::vector<Value> vals(cap);
    size_t mask = cap - 1;
    for (size_t j = 0; j < keys_.size(); ++j) {
      if (keys_[j] == kEmpty) continue;
      size_t i = hash(keys_[j]) & mask;
      while (keys[i] != kEmpty) i = (i + 1) & mask;
      keys[i] = keys_[j];
      vals[i] = vals_[j];
    }
    keys_ = std::move(keys);
    vals_ = std::move(vals);
  }
  std::vector<uint64_t> keys_;
  std::vector<Value> vals_;
  size_t size_ = 0;
};

}  // namespace nxrt::genai::tok
