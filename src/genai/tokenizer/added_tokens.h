// Added tokens (tokenizer.json "added_tokens"): matched in the text before anything else, and never
// split by the model.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nxrt::genai::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false, lstrip = false, rstrip = false, normalized = false;
};

// Longest-match splitter over a set of added tokens (leftmost position first, then longest).
class AddedSplitter {
 public:
  void add(const std::string& content, int32_t id) {
    if (content.empty()) return;
    by_first_[static_cast<unsigned char>(content[0])].push_back({content, id});
    first_[static_cast<unsigned char>(content[0])] = true;
    any_ = true;
  }
  // Call once after the last add().
  void finish();
  bool empty() const { return !any_; }
  struct Section {
    size_t b, e;
    int32_t id;  // -1: plain text
  };
  // Appends the sections of `s`: plain text (id -1) and added tokens, in order.
  void split(std::string_view s, std::vector<Section>& out) const;

 private:
  struct Entry {
    std::string text;
    int32_t id;
  };
  std::array<std::vector<Entry>, 256> by_first_;
  std::array<bool, 256> first_{};
  bool any_ = false;
};

}  // namespace nxrt::genai::tok
