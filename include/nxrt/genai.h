// Text generation over an onnxruntime-genai style model folder (genai_config.json + decoder .onnx),
// shaped like onnxruntime-genai's API: Model (from a folder), GeneratorParams (search options),
// Generator (append_tokens, generate_next_token, get_logits, is_done, rewind_to).
//
// The generator owns the KV cache: one fixed-capacity buffer per past/present pair ([1, kv_heads,
// max_length, head_size]) when search.past_present_share_buffer is set, else a past that grows by the
// new rows every step. Batch 1.
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
};

// Reads PATH/genai_config.json (or PATH itself when it names a file).
Result<Config> read_config(const std::string& path);
// "past_key_values.%d.key", 3 -> "past_key_values.3.key"
std::string layer_name(const std::string& pattern, int64_t layer);

struct ModelOptions {
  SessionOptions session;  // threads, optimization level
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

  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  const Impl& impl() const { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

struct SearchOptions {
  int64_t max_length = 0;   // total tokens (prompt + generated) = KV capacity; 0: search.max_length
                            // from the config, else context_length
  bool do_sample = false;   // false: greedy (argmax, lowest id on ties)
  int64_t top_k = 0;        // sampling: keep the k most likely (0: all)
  double top_p = 1.0;       // sampling: smallest set with cumulative probability >= top_p
  double min_p = 0.0;       // sampling: drop tokens with p < min_p * p_max
  double temperature = 1.0; // sampling: logits / temperature
  double repetition_penalty = 1.0;  // > 1 discourages tokens already in the sequence
  uint64_t random_seed = 0;
  bool stop_at_eos = false;  // is_done() once an eos_token_id is generated
};

class GeneratorParams {
 public:
  // Search options start from the config's search section.
  explicit GeneratorParams(const Model& model);
  SearchOptions search;
};

class Generator {
 public:
  static Result<std::unique_ptr<Generator>> create(const Model& model, const GeneratorParams& params);
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // Appends tokens to the sequence and runs the model over them (and over a generated token not yet
  // run), leaving their logits ready. Error when the sequence would exceed max_length.
  Status append_tokens(const std::vector<int64_t>& ids);
  // Runs the model over the last generated token if needed, then picks the next token from the logits
  // (search options) and appends it. Error when done.
  Status generate_next_token();
  bool is_done() const;
  // Logits of the last position, [vocab] float32 (runs the model first if a token is pending).
  Result<std::vector<float>> get_logits();
  // Keeps the first `length` tokens; the cache forgets the rest. The next step re-runs the last token.
  Status rewind_to(size_t length);

  const std::vector<int64_t>& sequence() const;
  int64_t next_token() const;  // last generated token (-1 when none)
  int64_t max_length() const;

  // Timing of the last model run (the session.run call only), and the total of all runs.
  struct Stats {
    double last_run_ms = 0;
    int64_t runs = 0;
    double total_run_ms = 0;
    int64_t tokens_run = 0;  // positions fed to the model over all runs (prefill + decode)
  };
  const Stats& stats() const;
  // "in-place" / "copied" / "concat": how presents reach the next step's past.
  const char* kv_update() const;

  struct Impl;
  explicit Generator(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// The --prompt-len ids of `ort generate` / `nxrt generate`: mulberry32(seed 1234) in [0, vocab).
std::vector<int64_t> seeded_prompt(int64_t length, int64_t vocab, uint32_t seed = 1234);

}  // namespace nxrt::genai
