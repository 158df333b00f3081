// The items of a tokenizer.json "Sequence" component (normalizers, pre_tokenizers, decoders): the
// non-null elements of the array member `key`, each built by `make` (make_normalizer...).
#pragma once
#include <memory>
#include <vector>

#include "genai/json.h"
#include "nxrt/status.h"

namespace nxrt::genai::tok {

template <typename T, typename Make>
Status read_sequence_items(const Json& j, const char* key, Make&& make, std::vector<std::unique_ptr<T>>& items) {
  const Json* list = j.find(key);
  for (const Json& e : list ? list->as_array() : Json::Array{}) {
    if (e.is_null()) continue;
    NXRT_ASSIGN_OR_RETURN(auto item, make(e));
    items.push_back(std::move(item));
  }
  return Status::Ok();
}

}  // namespace nxrt::genai::tok
