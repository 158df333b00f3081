// Model internals: the decoder session and the IO the generator feeds, resolved and checked once.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "nxrt/genai.h"

namespace nxrt::genai {

// One past/present pair the generator carries from run to run.
enum class CacheKind {
  kKey,       // [batch, kv_heads, seq, head_size]
  kValue,     // same
  kCombined,  // [2, batch, heads, seq, head_size]: key then value (ORT's GPT-2 Attention `past`)
  kState,     // [batch, dims...] of fixed size (a convolution / recurrent state): replaced every run
};

struct CacheIo {
  std::string past;     // graph input
  std::string present;  // graph output
  CacheKind kind = CacheKind::kKey;
  int64_t layer = 0;
  DataType dtype = DataType::kFloat;
  int64_t heads = 0;                // kKey / kValue / kCombined
  std::vector<int64_t> state_dims;  // kState: the dims after batch (all fixed)
  bool is_kv() const { return kind != CacheKind::kState; }
};

// Where a row's tokens sit in its KV rows.
enum class KvLayout {
  // Every row keeps its own length: row r's valid tokens are KV rows [0, len_r) with no padding in
  // between; the mask of a run is ones over [0, len_r + S) (right-padded), so the graph's
  // ReduceSum(attention_mask) gives each row its write position (GroupQueryAttention seqlens_k,
  // TensorScatter write_indices). Pads are never cached.
  kPerRow,
  // All rows share the sequence axis: KV row p is sequence position p, padding included and masked
  // by attention_mask (0 on pads); the graph applies the mask (Attention mask_index, an additive
  // mask built from attention_mask). Position ids count each row's real tokens.
  kAligned,
};

struct Model::Impl {
  Config config;
  std::unique_ptr<Session> session;
  std::vector<CacheIo> caches;  // per layer: key then value (or combined), conv states in layer order
  DataType kv_dtype = DataType::kFloat;
  DataType ids_dtype = DataType::kInt64;
  bool has_mask = false;
  DataType mask_dtype = DataType::kInt64;
  bool has_position_ids = false;
  DataType pos_dtype = DataType::kInt64;
  bool has_use_cache_branch = false;  // optimum merged decoder
  DataType logits_dtype = DataType::kFloat;
  int64_t vocab = 0;
  KvLayout layout = KvLayout::kAligned;
  bool has_state = false;       // some cache is a kState
  bool has_combined = false;    // some cache is kCombined
  // TensorScatter without GroupQueryAttention: a static cache whose capacity is the past's length, so
  // without a shared buffer the full-capacity past is fed and its present copied back every run.
  bool static_cache = false;
  std::string attention_ops;    // the attention ops found in the graph, for messages and cache_layout()
  std::vector<std::string> fetch_names;  // logits, then the presents in caches order
  // The session computes logits only where asked (SessionOptions::position_selected_outputs): the
  // input "<logits>_positions" (int64 [batch, k]) the runs feed each row's last position through.
  // Empty: the logits cover every position of a run.
  std::string logits_positions;
};

// Resolves and checks the decoder IO named by `config` against the session's inputs and outputs;
// `op_histogram` (op type -> count, "com.microsoft::X" for contrib ops) picks the KV layout.
Status resolve_io(Model::Impl* m, const std::map<std::string, int>& op_histogram);

}  // namespace nxrt::genai
