// Model internals: the decoder session and the IO the generator feeds, resolved and checked once.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nxrt/genai.h"

namespace nxrt::genai {

struct KvPair {
  std::string past;     // graph input
  std::string present;  // graph output
};

struct Model::Impl {
  Config config;
  std::unique_ptr<Session> session;
  std::vector<KvPair> kv;          // per layer: key then value
  DataType kv_dtype = DataType::kFloat;
  DataType ids_dtype = DataType::kInt64;
  bool has_mask = false;
  DataType mask_dtype = DataType::kInt64;
  bool has_position_ids = false;
  DataType pos_dtype = DataType::kInt64;
  DataType logits_dtype = DataType::kFloat;
  int64_t vocab = 0;
  std::vector<std::string> fetch_names;  // logits, then the presents in kv order
};

// Resolves and checks the decoder IO named by `config` against the session's inputs and outputs.
Status resolve_io(Model::Impl* m);

}  // namespace nxrt::genai
