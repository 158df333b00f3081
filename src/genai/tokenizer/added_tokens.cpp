#include "genai/tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

namespace nxrt::genai::tok {

void AddedSplitter::finish() {
  for (auto& v : by_first_) {
    std::stable_sort(v.begin(), v.end(), [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
  }
}

void AddedSplitter::split(std::string_view s, std::vector<Section>& out) const {
  size_t start = 0, i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (first_[c]) {
      const Entry* hit = nullptr;
      for (const Entry& e : by_first_[c]) {
        if (e.text.size() <= n - i && std::memcmp(s.data() + i, e.text.data(), e.text.size()) == 0) {
          hit = &e;
          break;
        }
      }
      if (hit) {
        if (i > start) out.push_back({start, i, -1});
        out.push_back({i, i + hit->text.size(), hit->id});
        i += hit->text.size();
        start = i;
        continue;
      }
    }
    ++i;
  }
  if (start < n) out.push_back({start, n, -1});
}

}  // namespace nxrt::genai::tok
