// Text generation over an onnxruntime-genai style model folder (genai_config.json + decoder .onnx),
// shaped like onnxruntime-genai's API: Model (from a folder), GeneratorParams (search options),
// Generator (append_tokens, generate_next_token, get_logits / set_logits, get_next_tokens,
// get_sequence, is_done, rewind_to).
//
// Batches of batch_size rows (left-padded with pad_token_id), greedy / sampled search or beam search
// (num_beams rows per prompt). The generator owns the caches: per KV pair a fixed-capacity
// [rows, kv_heads, max_length, head_size] buffer updated in place when search.past_present_share_buffer
// is set (GroupQueryAttention / TensorScatter graphs), else a past that grows by the new rows every
// step; combined [2, rows, heads, seq, head_size] KV tensors (past_names) and fixed-size recurrent /
// convolution states (hybrid layer stacks) are carried the same way. docs/genai.md has the layouts.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nxrt/session.h"
#include "nxrt/status.h"
#include "nxrt/tensor.h"

namespace nxrt::genai {

// The parts of genai_config.json the runtime reads (onnxruntime-genai's defaults for absent names).
struct Config {
  std::string config_path;   // the genai_config.json read
  std::string model_dir;     // its folder
  std::string decoder_path;  // model_dir / model.decoder.filename
  // model.decoder.inputs / outputs
  std::string input_ids = "input_ids";
  std::string attention_mask = "attention_mask";
  std::string position_ids = "position_ids";
  std::string past_key_names = "past_key_values.%d.key";
  std::string past_value_names = "past_key_values.%d.value";
  std::string logits = "logits";
  std::string present_key_names = "present.%d.key";
  std::string present_value_names = "present.%d.value";
  // Combined KV tensors ([2, batch, heads, seq, head_size], ORT's GPT-2 Attention): set instead of the
  // key/value names (model.decoder.inputs.past_names / outputs.present_names, e.g. "past_%d").
  std::string past_names;
  std::string present_names;
  // Hybrid stacks: per-layer type (model.decoder.layer_types; empty = every layer is attention).
  // "conv" layers carry a fixed-size state [batch, ...] named by past_conv_names / present_conv_names.
  std::vector<std::string> layer_types;
  std::string past_conv_names = "past_conv.%d";
  std::string present_conv_names = "present_conv.%d";
  int64_t conv_cache_size = 0;  // 0: unknown
  // Hugging Face optimum's merged decoder: a bool [1] input that selects the with-past If branch.
  std::string use_cache_branch = "use_cache_branch";
  std::string model_type;  // model.type
  int64_t num_hidden_layers = 0;
  int64_t num_attention_heads = 0;
  int64_t num_key_value_heads = 0;
  int64_t head_size = 0;
  int64_t hidden_size = 0;
  int64_t context_length = 0;  // 0: unknown
  int64_t vocab_size = 0;      // 0: unknown
  int64_t bos_token_id = -1;
  std::vector<int64_t> eos_token_ids;
  int64_t pad_token_id = -1;
  // search defaults
  int64_t max_length = 0;  // 0: unset
  bool do_sample = false;
  int64_t top_k = 0;
  double top_p = 1.0;
  double temperature = 1.0;
  double repetition_penalty = 1.0;
  bool past_present_share_buffer = false;
  int64_t min_length = 0;
  int64_t num_beams = 1;
  int64_t num_return_sequences = 1;
  double length_penalty = 1.0;
  bool early_stopping = true;
  int64_t no_repeat_ngram_size = 0;
};

// Reads PATH/genai_config.json (or PATH itself when it names a file).
Result<Config> read_config(const std::string& path);
// "past_key_values.%d.key", 3 -> "past_key_values.3.key"
std::string layer_name(const std::string& pattern, int64_t layer);

struct ModelOptions {
  SessionOptions session;  // threads, optimization level
  // Compute the logits of each row's last position only, not of every position of a prefill (the LM
  // head then costs one position per row). Applies when the logits are a per-position projection
  // (SessionOptions::position_selected_outputs); other graphs keep every position. Tokens and logits
  // are the same either way.
  bool last_position_logits = true;
};

class Model {
 public:
  // Reads genai_config.json, creates the decoder session and checks its IO against the config
  // (every named input/output exists, KV shapes agree with kv heads / head size).
  static Result<std::unique_ptr<Model>> create(const std::string& path, const ModelOptions& opts = {});
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const Config& config() const;
  Session& session() const;
  // Vocabulary size: the logits output's last dim when fixed, else model.vocab_size (0: unknown).
  int64_t vocab_size() const;
  // The element type of the KV tensors (float32 or float16).
  DataType kv_dtype() const;
  // How the decoder's caches are laid out and fed, in words (docs/genai.md, "Export styles"):
  // e.g. "key/value per layer, rows at their own lengths (GroupQueryAttention seqlens)".
  std::string cache_layout() const;
  // Whether the session computes the logits of each row's last position only (ModelOptions::
  // last_position_logits, applied when the logits are a per-position projection).
  bool last_position_logits() const;

  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct SearchOptions {
  int64_t max_length = 0;   // total tokens per row (prompt + generated) = KV capacity; 0: search.max_length
                            // from the config, else context_length
  int64_t batch_size = 1;   // rows appended together: append_tokens takes [batch_size, seq] ids
  int64_t min_length = 0;   // EOS ids are suppressed while the sequence (prompt included) is shorter
  bool do_sample = false;   // false: greedy (argmax, lowest id on ties)
  int64_t top_k = 0;        // sampling: keep the k most likely (0: all)
  double top_p = 1.0;       // sampling: smallest set with cumulative probability >= top_p
  double min_p = 0.0;       // sampling: drop tokens with p < min_p * p_max
  double temperature = 1.0; // sampling: logits / temperature
  double repetition_penalty = 1.0;   // > 1 discourages tokens already in the row (prompt and pads included)
  int64_t no_repeat_ngram_size = 0;  // > 0: a token that would repeat an n-gram of the row is banned
  uint64_t random_seed = 0;
  bool stop_at_eos = false;  // greedy / sampling: a row is done once it generates an eos_token_id (then
                             // pad_token_id follows); is_done() when every row is. Beam search always
                             // ends a hypothesis at EOS.
  // Beam search (num_beams > 1; do_sample must be false).
  int64_t num_beams = 1;
  int64_t num_return_sequences = 1;  // sequences per prompt returned by get_sequence (<= num_beams)
  double length_penalty = 1.0;       // a hypothesis scores sum(log p) / length^length_penalty
  bool early_stopping = true;        // a prompt is done once num_beams hypotheses ended
  // Fixed-capacity KV buffers updated in place (GeneratorParams starts from search.past_present_share_buffer
  // of the config; the graph must write the new rows at ReduceSum(attention_mask) - sequence_length, as
  // GroupQueryAttention / TensorScatter do); false feeds a past that grows every step.
  bool past_present_share_buffer = false;
};

class GeneratorParams {
 public:
  // Search options start from the config's search section.
  explicit GeneratorParams(const Model& model);
  SearchOptions search;
  // onnxruntime-genai's set_search_option by name (max_length, batch_size, num_beams, top_k, ...):
  // numbers for the numeric options, set_search_option_bool for do_sample, early_stopping,
  // past_present_share_buffer and stop_at_eos. Unknown names and wrong types are errors.
  Status set_search_option(const std::string& name, double value);
  Status set_search_option_bool(const std::string& name, bool value);
};

class Generator {
 public:
  static Result<std::unique_ptr<Generator>> create(const Model& model, const GeneratorParams& params);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Appends [batch_size, seq] ids (row-major; batch_size 1: any length) to every row and runs the
  // model over them (and over generated tokens not yet run), leaving their logits ready. Tokens equal
  // to pad_token_id are padding (attention mask 0, not cached) in the first append and, at
  // batch_size > 1, in every append; left-pad shorter prompts with it. After a finished generation
  // the rows continue (finished rows resume). Beam search takes one append (rewind_to(0) to restart).
  // Errors: the sequence would exceed max_length, an id outside the vocabulary, a row of padding only.
  Status append_tokens(const std::vector<int64_t>& ids);
  Status append_tokens(const int32_t* ids, size_t count);
  // ids: int32 or int64 [batch_size, seq] (or [seq] at batch_size 1).
  Status append_tokens(const Tensor& ids);
  // Runs the model over the last generated tokens if needed, applies min_length, repetition penalty
  // and no_repeat_ngram_size to the logits, then picks the next token of every row (greedy, sampled or
  // beam search) and appends it. Error when done.
  Status generate_next_token();
  bool is_done() const;
  // Logits the next tokens are picked from, [rows, vocab] float32 row-major (rows = batch_size *
  // num_beams); runs the model first if tokens are pending.
  Result<std::vector<float>> get_logits();
  // Replaces those logits ([rows * vocab] float32) for the next generate_next_token, which uses them
  // instead of the model's (a logits processor: get_logits, edit, set_logits, generate_next_token).
  Status set_logits(const std::vector<float>& logits);
  // Keeps the first `length` tokens of every row; the caches forget the rest (the last kept token is
  // run again for its logits). Beam search and models with recurrent state: length 0 only.
  Status rewind_to(size_t length);

  // Row `index` (greedy / sampling: 0 .. batch_size-1), prompt and padding included. Beam search:
  // index = prompt * num_return_sequences + k, the k-th best hypothesis once done (before that, the
  // current beam k of that prompt).
  std::vector<int64_t> get_sequence(size_t index) const;
  std::vector<int64_t> sequence() const { return get_sequence(0); }  // row 0
  size_t token_count() const;               // tokens per row (every row has the same count)
  std::vector<int64_t> get_next_tokens() const;  // the last token of every row [rows] (empty before any)
  int64_t next_token() const;  // last generated token of row 0 (-1 when none)
  int64_t max_length() const;
  const SearchOptions& search_options() const;
  size_t num_sequences() const;  // get_sequence indices: batch_size, or batch_size * num_return_sequences
  bool row_done(size_t row) const;  // greedy / sampling: the row generated EOS (stop_at_eos) or is full

  // Timing of the last model run (the session.run call only), and the total of all runs.
  struct Stats {
    double last_run_ms = 0;
    int64_t runs = 0;
    double total_run_ms = 0;
    int64_t tokens_run = 0;  // positions fed to the model per row over all runs (prefill + decode)
    int64_t rows_reordered = 0;  // beam search: cache rows copied to follow their beam
  };
  const Stats& stats() const;
  // "in-place" / "concat": how presents reach the next step's past.
  const char* kv_update() const;

  struct Impl;
  explicit Generator(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Independent sequences in the rows of one fixed-capacity KV cache, for serving many requests at once
// (continuous batching, `nxrt serve`). Each row holds its own sequence at its own length; a run appends
// tokens to any subset of rows (a prompt chunk to one row, or one token to each decoding row) and
// leaves the logits of each fed row's last token. A row is freed or rewound with truncate_row, so a
// new request can reuse a row whose cached tokens share its prefix. Needs the per-row KV layout with a
// shared buffer (GroupQueryAttention / TensorScatter key/value caches; docs/genai.md).
class SequenceBatch {
 public:
  struct RowFeed {
    int64_t row = 0;
    std::vector<int64_t> tokens;  // appended to the row and run
  };
  struct Stats {
    int64_t runs = 0;
    int64_t positions_run = 0;  // tokens fed over all runs (every fed row's, filler excluded)
    double total_run_ms = 0;
  };

  // rows sequences of at most max_length tokens each (0: the model's context_length).
  static Result<std::unique_ptr<SequenceBatch>> create(const Model& model, int64_t rows, int64_t max_length);
  ~SequenceBatch();
  SequenceBatch(const SequenceBatch&) = delete;
  SequenceBatch& operator=(const SequenceBatch&) = delete;

  int64_t rows() const;
  int64_t max_length() const;
  // The tokens row `row` holds in the cache, in order.
  const std::vector<int64_t>& row_tokens(int64_t row) const;
  // Keeps the first `keep` tokens of the row (0 frees it). Error when keep exceeds its length.
  Status truncate_row(int64_t row, int64_t keep);
  // Appends each feed's tokens to its row and runs them in one model run (distinct rows, at least one
  // token each). Rows [lowest fed, highest fed] run together as one batch (a single feed: batch 1 on
  // its row alone); rows between them that are not fed carry filler that is never cached. Errors: a row past max_length, an id
  // outside the vocabulary, a repeated row; the rows are unchanged then.
  Status run(const std::vector<RowFeed>& feeds);
  // The logits of feed `i`'s last token after the last run, float32 [vocab], copied into *out.
  Status logits(size_t feed, std::vector<float>* out) const;
  int64_t vocab_size() const;
  const Stats& stats() const;

  struct Impl;
  explicit SequenceBatch(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Picks tokens from float32 logits with one request's search options (the generator's own search:
// greedy when do_sample is false, else temperature / top_k / top_p / min_p drawn from random_seed),
// after repetition_penalty over `history`. One picker per request: it carries the random state.
class TokenPicker {
 public:
  explicit TokenPicker(const SearchOptions& options);
  ~TokenPicker();
  TokenPicker(TokenPicker&&) noexcept;
  TokenPicker& operator=(TokenPicker&&) noexcept;
  // Edits `logits` in place (the penalty) and returns the chosen id.
  int64_t pick(std::vector<float>* logits, const std::vector<int64_t>& history);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The --prompt-len ids of `ort generate` / `nxrt generate`: mulberry32(seed 1234) in [0, vocab).
std::vector<int64_t> seeded_prompt(int64_t length, int64_t vocab, uint32_t seed = 1234);

}  // namespace nxrt::genai
