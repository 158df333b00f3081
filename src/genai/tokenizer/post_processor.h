// tokenizer.json post-processors (TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel,
// Sequence), reduced to what encoding one sequence needs: the special tokens around it.
#pragma once
#include <cstdint>
#include <vector>

#include "nxrt/status.h"

namespace nxrt::genai {
class Json;
}

namespace nxrt::genai::tok {

class TokenMap;

struct PostItem {
  bool is_sequence = false;  // the input sequence ("A")
  std::vector<int32_t> ids;  // a special token's ids
};

struct PostProcessor {
  std::vector<PostItem> single;  // empty: pass-through (ByteLevel)
  bool template_set = false;

  int32_t first_special() const {
    if (!single.empty() && !single.front().is_sequence && !single.front().ids.empty()) return single.front().ids[0];
    return -1;
  }
  int32_t last_special() const {
    if (!single.empty() && !single.back().is_sequence && !single.back().ids.empty()) return single.back().ids.back();
    return -1;
  }
  // `ids` laid into the template: the special tokens only with add_special_tokens.
  std::vector<int32_t> apply(const std::vector<int32_t>& ids, bool add_special_tokens) const;
};

// Reads the tokenizer.json post_processor object `j` into `post`; `vocab` resolves special tokens named
// by their content.
Status read_post_processor(const Json& j, const TokenMap& vocab, PostProcessor& post);

}  // namespace nxrt::genai::tok
