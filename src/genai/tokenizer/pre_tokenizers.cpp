#include "genai/tokenizer/pre_tokenizers.h"

#include "genai/json.h"
#include "genai/tokenizer/byte_alphabet.h"
#include "genai/tokenizer/regex.h"
#include "genai/tokenizer/sequence_items.h"

namespace nxrt::genai::tok {
namespace {

enum class SplitBehavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Splits `s` at the matches of `p` (or at the gaps, when invert) with the tokenizers crate's behaviors.
Status split_by(std::string_view s, const Pattern& p, SplitBehavior behavior, bool invert, Pieces& out) {
  if (behavior == SplitBehavior::kIsolated) {  // the common case: every match and every gap
    size_t prev = 0;
    NXRT_RETURN_IF_ERROR(p.for_each_match(s, [&](size_t b, size_t e) {
      if (e == b) return;
      if (b > prev) out.push_back(s.substr(prev, b - prev));
      out.push_back(s.substr(b, e - b));
      prev = e;
    }));
    if (prev < s.size()) out.push_back(s.substr(prev));
    return Status::Ok();
  }
  struct Span {
    size_t b, e;
    bool match;
  };
  std::vector<Span> spans;
  size_t prev = 0;
  NXRT_RETURN_IF_ERROR(p.for_each_match(s, [&](size_t b, size_t e) {
    if (e == b) return;
    if (b > prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }));
  if (prev < s.size()) spans.push_back({prev, s.size(), false});
  if (invert) {
    for (Span& sp : spans) sp.match = !sp.match;
  }
  switch (behavior) {
    case SplitBehavior::kIsolated:
      break;
    case SplitBehavior::kRemoved:
      for (const Span& sp : spans) {
        if (!sp.match) out.push_back(s.substr(sp.b, sp.e - sp.b));
      }
      break;
    case SplitBehavior::kMergedWithPrevious: {
      size_t start = 0;
      bool open = false;
      for (const Span& sp : spans) {
        if (sp.match && open) {
          out.push_back(s.substr(start, sp.e - start));
          open = false;
        } else if (sp.match) {
          out.push_back(s.substr(sp.b, sp.e - sp.b));
        } else {
          if (open) out.push_back(s.substr(start, sp.b - start));
          start = sp.b;
          open = true;
        }
      }
      if (open) out.push_back(s.substr(start));
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      size_t start = 0;
      bool open = false;
      for (const Span& sp : spans) {
        if (sp.match) {
          if (open) out.push_back(s.substr(start, sp.b - start));
          start = sp.b;
          open = true;
        } else if (open) {
          out.push_back(s.substr(start, sp.e - start));
          open = false;
        } else {
          out.push_back(s.substr(sp.b, sp.e - sp.b));
        }
      }
      if (open) out.push_back(s.substr(start));
      break;
    }
    case SplitBehavior::kContiguous: {
      size_t i = 0;
      while (i < spans.size()) {
        size_t j = i;
        if (spans[i].match) {
          while (j + 1 < spans.size() && spans[j + 1].match) ++j;
        }
        out.push_back(s.substr(spans[i].b, spans[j].e - spans[i].b));
        i = j + 1;
      }
      break;
    }
  }
  return Status::Ok();
}

struct SplitPreTokenizer : PreTokenizer {
  Pattern pattern;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  Status split(std::string_view s, bool, Pieces& out, Arena&) const override {
    return split_by(s, pattern, behavior, invert, out);
  }
};

struct DigitsPreTokenizer : PreTokenizer {
  Pattern pattern;  // [0-9] (ASCII digits, as tokenizers and tokenizers.js)
  bool individual = false;
  Status split(std::string_view s, bool, Pieces& out, Arena&) const override {
    return split_by(s, pattern, individual ? SplitBehavior::kIsolated : SplitBehavior::kContiguous, false, out);
  }
};

struct WhitespaceSplitPreTokenizer : PreTokenizer {
  Pattern pattern;  // \s+
  Status split(std::string_view s, bool, Pieces& out, Arena&) const override {
    return split_by(s, pattern, SplitBehavior::kRemoved, false, out);
  }
};

struct MetaspacePreTokenizer : PreTokenizer {
  std::string replacement = "\xE2\x96\x81";  // U+2581
  std::string scheme = "always";
  bool do_split = true;
  Status split(std::string_view s, bool first_section, Pieces& out, Arena& arena) const override {
    std::string r;
    for (char c : s) {
      if (c == ' ') {
        r += replacement;
      } else {
        r += c;
      }
    }
    bool prepend = scheme == "always" || (scheme == "first" && first_section);
    if (prepend && r.compare(0, replacement.size(), replacement) != 0) r.insert(0, replacement);
    arena.push_back(std::move(r));
    if (!do_split) {
      out.push_back(arena.back());
      return Status::Ok();
    }
    Pattern p;
    p.literal = replacement;
    return split_by(arena.back(), p, SplitBehavior::kMergedWithNext, false, out);
  }
};

struct SequencePreTokenizer : PreTokenizer {
  std::vector<std::unique_ptr<PreTokenizer>> items;
  Status split(std::string_view s, bool first_section, Pieces& out, Arena& arena) const override {
    Pieces cur{s}, next;
    for (const auto& t : items) {
      next.clear();
      next.reserve(cur.size() * 2);
      for (std::string_view p : cur) NXRT_RETURN_IF_ERROR(t->split(p, first_section, next, arena));
      std::swap(cur, next);
    }
    out.insert(out.end(), cur.begin(), cur.end());
    return Status::Ok();
  }
};

// GPT-2's pre-tokenization regex, used by ByteLevel with use_regex.
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// A regex a pre-tokenizer builds in (not from the file), naming the pre-tokenizer when this build has
// no regex engine.
Result<std::shared_ptr<Regex>> builtin_regex(const char* pattern, const char* where) {
  auto r = Regex::compile(pattern);
  if (!r.ok()) return r.status().with_context(std::string("tokenizer.json: pre_tokenizer ") + where + ": ");
  return r;
}

Result<SplitBehavior> parse_split_behavior(const std::string& b) {
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return not_implemented("tokenizer.json: Split behavior '" + b + "' is not supported");
}

}  // namespace

Result<std::unique_ptr<PreTokenizer>> make_pre_tokenizer(const Json& j) {
  std::string type = j.get_string("type");
  if (type == "Split") {
    auto t = std::make_unique<SplitPreTokenizer>();
    NXRT_ASSIGN_OR_RETURN(t->pattern, parse_pattern(j.find("pattern"), "pre_tokenizer Split"));
    NXRT_ASSIGN_OR_RETURN(t->behavior, parse_split_behavior(j.get_string("behavior", "Isolated")));
    t->invert = j.get_bool("invert", false);
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "ByteLevel") {
    auto t = std::make_unique<ByteLevelPreTokenizer>();
    t->add_prefix_space = j.get_bool("add_prefix_space", false);
    t->use_regex = j.get_bool("use_regex", true);
    if (t->use_regex) {
      NXRT_ASSIGN_OR_RETURN(t->regex, builtin_regex(kGpt2Pattern, "ByteLevel (use_regex)"));
    }
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "Digits") {
    auto t = std::make_unique<DigitsPreTokenizer>();
    NXRT_ASSIGN_OR_RETURN(t->pattern.regex, builtin_regex("[0-9]", "Digits"));
    t->pattern.is_regex = true;
    t->individual = j.get_bool("individual_digits", false);
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "WhitespaceSplit") {
    auto t = std::make_unique<WhitespaceSplitPreTokenizer>();
    NXRT_ASSIGN_OR_RETURN(t->pattern.regex, builtin_regex("\\s+", "WhitespaceSplit"));
    t->pattern.is_regex = true;
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "Metaspace") {
    auto t = std::make_unique<MetaspacePreTokenizer>();
    t->replacement = j.get_string("replacement", t->replacement);
    if (t->replacement.empty()) return invalid_model("tokenizer.json: Metaspace with an empty replacement");
    if (const Json* ps = j.find("prepend_scheme"); ps && ps->is_string()) {
      t->scheme = ps->as_string();
    } else if (const Json* aps = j.find("add_prefix_space"); aps && aps->is_bool()) {
      t->scheme = aps->as_bool() ? "always" : "never";
    }
    t->do_split = j.get_bool("split", true);
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  if (type == "Sequence") {
    auto t = std::make_unique<SequencePreTokenizer>();
    NXRT_RETURN_IF_ERROR(read_sequence_items(j, "pretokenizers", make_pre_tokenizer, t->items));
    return std::unique_ptr<PreTokenizer>(std::move(t));
  }
  return not_implemented("tokenizer.json: pre_tokenizer type '" + type +
                         "' is not supported (supported: Split ByteLevel Digits Metaspace WhitespaceSplit Sequence)");
}

Status ByteLevelPreTokenizer::split(std::string_view s, bool, Pieces& out, Arena& arena) const {
  if (add_prefix_space && (s.empty() || s[0] != ' ')) {
    arena.push_back(" " + std::string(s));
    s = arena.back();
  }
  size_t first = out.size();
  if (use_regex) {
    Pattern p;
    p.regex = regex;
    p.is_regex = true;
    NXRT_RETURN_IF_ERROR(split_by(s, p, SplitBehavior::kIsolated, false, out));
  } else {
    out.push_back(s);
  }
  if (map_bytes) {
    const ByteAlphabet& a = byte_alphabet();
    for (size_t k = first; k < out.size(); ++k) {
      std::string m;
      m.reserve(out[k].size() * 2);
      for (unsigned char c : out[k]) m += a.byte_to_str[c];
      arena.push_back(std::move(m));
      out[k] = arena.back();
    }
  }
  return Status::Ok();
}

ByteLevelPreTokenizer* final_byte_level(PreTokenizer* p) {
  if (auto* sq = dynamic_cast<SequencePreTokenizer*>(p); sq && !sq->items.empty()) {
    return dynamic_cast<ByteLevelPreTokenizer*>(sq->items.back().get());
  }
  return dynamic_cast<ByteLevelPreTokenizer*>(p);
}

}  // namespace nxrt::genai::tok
