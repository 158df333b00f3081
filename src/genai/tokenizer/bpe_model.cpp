// The BPE model: merges applied to one word by rank (a priority queue over adjacent symbol pairs),
// unknown characters through byte_fallback or unk, and the per-tokenizer word cache.
#include <queue>

#include "genai/tokenizer/tokenizer_impl.h"
#include "genai/utf8.h"

namespace nxrt::genai {

using tok::Arena;
using tok::MergeMap;
using tok::Pieces;

void Tokenizer::Impl::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  struct Sym {
    int32_t id;
    int32_t prev, next;
    uint32_t b, e;  // byte range in `word` (for unknown symbols)
  };
  std::vector<Sym> syms;
  syms.reserve(word.size());
  // Initial symbols: one per byte (raw_bytes) or per character (with continuing_subword_prefix /
  // end_of_word_suffix).
  size_t i = 0;
  std::string tmp;
  if (raw_bytes) {
    for (; i < word.size(); ++i) {
      int32_t k = static_cast<int32_t>(i);
      syms.push_back({byte_ids[static_cast<unsigned char>(word[i])], k - 1, k + 1, static_cast<uint32_t>(i),
                      static_cast<uint32_t>(i + 1)});
    }
    if (!syms.empty()) syms.back().next = -1;
  }
  while (i < word.size()) {
    size_t l = cp_len(static_cast<unsigned char>(word[i]));
    if (i + l > word.size()) l = word.size() - i;
    bool first = i == 0, last = i + l == word.size();
    int32_t id;
    if ((first || continuing_subword_prefix.empty()) && (!last || end_of_word_suffix.empty())) {
      id = lookup(word.substr(i, l));
    } else {
      tmp.clear();
      if (!first) tmp += continuing_subword_prefix;
      tmp.append(word.substr(i, l));
      if (last) tmp += end_of_word_suffix;
      id = lookup(tmp);
    }
    int32_t k = static_cast<int32_t>(syms.size());
    syms.push_back({id, k - 1, -1, static_cast<uint32_t>(i), static_cast<uint32_t>(i + l)});
    if (k > 0) syms[k - 1].next = k;
    i += l;
  }
  struct Cand {
    int32_t rank;
    int32_t pos;  // left symbol
    int32_t left, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> q;
  auto push_pair = [&](int32_t a) {
    int32_t b = syms[a].next;
    if (b < 0 || syms[a].id < 0 || syms[b].id < 0) return;
    const MergeMap::Value* m = merges.find(syms[a].id, syms[b].id);
    if (!m) return;
    q.push({m->rank, a, syms[a].id, syms[b].id, m->merged});
  };
  for (int32_t k = 0; k + 1 < static_cast<int32_t>(syms.size()); ++k) push_pair(k);
  while (!q.empty()) {
    Cand c = q.top();
    q.pop();
    Sym& a = syms[c.pos];
    if (a.id != c.left || a.next < 0) continue;  // stale
    Sym& b = syms[a.next];
    if (b.id != c.right) continue;
    a.id = c.merged;
    a.e = b.e;
    a.next = b.next;
    if (b.next >= 0) syms[b.next].prev = c.pos;
    b.id = -2;  // dead
    if (a.prev >= 0) push_pair(a.prev);
    push_pair(c.pos);
  }
  bool last_unk = false;
  for (int32_t k = syms.empty() ? -1 : 0; k >= 0; k = syms[k].next) {
    const Sym& s = syms[k];
    if (s.id >= 0) {
      out.push_back(s.id);
      last_unk = false;
      continue;
    }
    // Unknown character.
    if (byte_fallback) {
      bool all = true;
      for (uint32_t p = s.b; p < s.e; ++p) all = all && byte_fallback_ids[static_cast<unsigned char>(word[p])] >= 0;
      if (all) {
        for (uint32_t p = s.b; p < s.e; ++p) out.push_back(byte_fallback_ids[static_cast<unsigned char>(word[p])]);
        last_unk = false;
        continue;
      }
    }
    if (unk_id >= 0 && !(fuse_unk && last_unk)) out.push_back(unk_id);
    last_unk = true;
  }
}

void Tokenizer::Impl::model_encode(std::string_view word, std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    int32_t id = lookup_word(word);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
  }
  bool cacheable = word.size() < kMaxCachedWord;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    auto it = cache.find(word);
    if (it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t before = out.size();
  bpe_word(word, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu);
    if (cache.size() >= kCacheCapacity) cache.clear();
    cache.emplace(std::string(word), std::vector<int32_t>(out.begin() + before, out.end()));
  }
}

Status Tokenizer::Impl::encode_section(std::string_view text, bool first_section, std::vector<int32_t>& out) const {
  if (!pre_tokenizer) {
    model_encode(text, out);
    return Status::Ok();
  }
  Pieces pieces;
  Arena arena;
  NXRT_RETURN_IF_ERROR(pre_tokenizer->split(text, first_section, pieces, arena));
  for (std::string_view p : pieces) model_encode(p, out);
  return Status::Ok();
}

}  // namespace nxrt::genai
