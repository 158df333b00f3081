// Continuous batching for `nxrt serve`: one scheduler thread owns a genai::SequenceBatch (rows of one
// fixed-capacity KV cache) and serves every request through it. Each loop iteration it drops cancelled
// requests, admits queued requests into free rows (a row whose cached tokens share the longest prefix
// with the prompt is reused: only the rest is prefilled), runs one prefill run of at most
// `prefill_chunk` positions (the oldest admitted request's next chunk, with the prompts of requests in
// the rows next to it when they fit), so a long prompt delays the running streams by one chunk at
// most, then one decode step of every decoding row together, picking each row's next token
// with its own request's sampling settings. A finished row keeps its tokens as a cached prefix until
// another request needs the row (least recently used first).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nxrt/genai.h"
#include "nxrt/tokenizer.h"
#include "serve_api.h"

namespace nxrt::cli::serve {

// Prometheus counters, gauges and histograms of the server (GET /metrics).
class Metrics {
 public:
  Metrics();
  void count_request(const std::string& path, int status);
  void observe_ttft(double seconds);
  void observe_itl(double seconds);
  void add_prompt_tokens(int64_t n, int64_t reused);
  void add_generated_tokens(int64_t n);
  void count_finish(const std::string& reason);
  // One model run: a decode step of `rows` rows, or a prefill run of `rows` rows and `positions` tokens.
  void count_decode_step(int64_t rows);
  void count_prefill_run(int64_t rows, int64_t positions);
  void set_gauges(int64_t queued, int64_t active, int64_t kv_used, int64_t kv_capacity);
  int64_t active() const;
  int64_t queued() const;
  std::string render() const;

 private:
  struct Histogram {
    std::vector<double> bounds;
    std::vector<int64_t> counts;  // per bound, then +Inf
    double sum = 0;
    int64_t count = 0;
    void observe(double v);
  };
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;
  std::map<std::string, int64_t> finishes_;
  Histogram ttft_, itl_;
  int64_t prompt_tokens_ = 0, reused_tokens_ = 0, generated_tokens_ = 0;
  int64_t decode_steps_ = 0, decode_rows_ = 0, prefill_runs_ = 0, prefill_rows_ = 0, prefill_positions_ = 0;
  int64_t queued_ = 0, active_ = 0, kv_used_ = 0, kv_capacity_ = 0;
};

struct GenParams {
  int64_t max_tokens = 16;
  genai::SearchOptions search;  // do_sample, temperature, top_k, top_p, min_p, repetition_penalty, seed
  double presence_penalty = 0, frequency_penalty = 0;
  std::vector<std::string> stop;
  bool ignore_eos = false;
  int64_t top_logprobs = 0;
  bool logprobs = false;
};

// What the scheduler hands a request's HTTP handler: text pieces as they are decoded, then the end.
struct GenEvent {
  std::string text;
  std::vector<TokenLogprob> logprobs;
  bool final = false;
  std::string finish_reason;  // final: "stop", "length", "cancelled" or "error"
  std::string error;          // finish_reason "error": what failed
};

class GenRequest {
 public:
  GenRequest(std::vector<int64_t> prompt, GenParams params) : prompt(std::move(prompt)), params(std::move(params)) {}
  const std::vector<int64_t> prompt;
  const GenParams params;
  std::atomic<bool> cancelled{false};

  // Handler side: the next event, waiting at most `timeout`; false when none came.
  bool next_event(GenEvent* ev, std::chrono::milliseconds timeout);
  // Scheduler side.
  void push(GenEvent ev);
  Usage usage() const;
  void set_usage(const Usage& u);

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenEvent> events_;
  Usage usage_;
};

struct SchedulerOptions {
  int64_t max_batch = 4;      // rows of the KV cache: requests decoded together
  int64_t max_queue = 64;     // requests waiting for a row; more are refused (429)
  int64_t ctx = 2048;         // KV capacity of a row: prompt + completion tokens
  int64_t prefill_chunk = 256;  // positions per prefill run (rows x tokens)
  bool prefix_reuse = true;   // false: every request prefills its whole prompt (benchmarks)
  int64_t step_delay_ms = 0;  // test hook: a pause after every step (NXRT_SERVE_TEST_STEP_DELAY_MS)
};

class Scheduler {
 public:
  Scheduler(const genai::Model& model, const genai::Tokenizer& tok, std::vector<int64_t> eos_ids,
            const SchedulerOptions& opts, Metrics* metrics);
  ~Scheduler();
  // Creates the KV rows and starts the thread.
  Status start();
  enum class Admit { kQueued, kQueueFull, kStopping };
  Admit submit(std::shared_ptr<GenRequest> r);
  // Ends every queued and running request now ("cancelled"), e.g. at the drain deadline.
  void cancel_all();
  // Refuses new requests, finishes the running ones, joins the thread.
  void stop();
  int64_t pending() const;  // queued + running
  const SchedulerOptions& options() const { return opts_; }

 private:
  struct Row;
  void loop();
  void admit_locked();
  void drop_cancelled();
  Status prefill_some();
  Status decode_all();
  // Picks and emits the next token of row `r` from `logits`.
  void advance(Row& row, int64_t r, std::vector<float>& logits);
  void finish(Row& row, int64_t r, const std::string& reason, const std::string& error = "");
  void update_gauges();

  const genai::Model& model_;
  const genai::Tokenizer& tok_;
  const std::vector<int64_t> eos_ids_;
  const SchedulerOptions opts_;
  Metrics* metrics_;
  std::unique_ptr<genai::SequenceBatch> batch_;
  std::vector<std::unique_ptr<Row>> rows_;
  uint64_t clock_ = 0;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<GenRequest>> queue_;
  int64_t running_ = 0;
  bool stopping_ = false, cancel_all_ = false;
  std::thread thread_;
};

}  // namespace nxrt::cli::serve
