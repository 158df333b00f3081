#include "serve_scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "text_session.h"

namespace nxrt::cli::serve {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string fmt(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

// ------------------------------------------------------------------------------------------ Metrics
void Metrics::Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  counts[i] += 1;
  sum += v;
  count += 1;
}

Metrics::Metrics() {
  ttft_.bounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  itl_.bounds = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
  ttft_.counts.assign(ttft_.bounds.size() + 1, 0);
  itl_.counts.assign(itl_.bounds.size() + 1, 0);
}

void Metrics::count_request(const std::string& path, int status) {
  std::lock_guard<std::mutex> lock(mu_);
  requests_[{path, status}] += 1;
}
void Metrics::observe_ttft(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(seconds);
}
void Metrics::observe_itl(double seconds) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(seconds);
}
void Metrics::add_prompt_tokens(int64_t n, int64_t reused) {
  std::lock_guard<std::mutex> lock(mu_);
  prompt_tokens_ += n;
  reused_tokens_ += reused;
}
void Metrics::add_generated_tokens(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  generated_tokens_ += n;
}
void Metrics::count_finish(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  finishes_[reason] += 1;
}
void Metrics::count_decode_step(int64_t rows) {
  std::lock_guard<std::mutex> lock(mu_);
  decode_steps_ += 1;
  decode_rows_ += rows;
}
void Metrics::count_prefill_run(int64_t rows, int64_t positions) {
  std::lock_guard<std::mutex> lock(mu_);
  prefill_runs_ += 1;
  prefill_rows_ += rows;
  prefill_positions_ += positions;
}
void Metrics::set_gauges(int64_t queued, int64_t active, int64_t kv_used, int64_t kv_capacity) {
  std::lock_guard<std::mutex> lock(mu_);
  queued_ = queued;
  active_ = active;
  kv_used_ = kv_used;
  kv_capacity_ = kv_capacity;
}
int64_t Metrics::active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return active_;
}
int64_t Metrics::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queued_;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::string o;
  auto head = [&](const char* name, const char* type, const char* help) {
    o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
  };
  auto counter = [&](const char* name, const char* help, int64_t value) {
    head(name, "counter", help);
    o += std::string(name) + " " + std::to_string(value) + "\n";
  };
  head("nxrt_http_requests_total", "counter", "HTTP requests answered, by path and status code.");
  for (const auto& [key, n] : requests_) {
    o += "nxrt_http_requests_total{path=\"" + key.first + "\",code=\"" + std::to_string(key.second) + "\"} " +
         std::to_string(n) + "\n";
  }
  head("nxrt_request_finish_total", "counter", "Generation requests ended, by finish reason.");
  for (const auto& [reason, n] : finishes_) o += "nxrt_request_finish_total{reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  counter("nxrt_prompt_tokens_total", "Prompt tokens of admitted requests.", prompt_tokens_);
  counter("nxrt_prefix_cache_hit_tokens_total", "Prompt tokens taken from a cached prefix instead of prefilled.", reused_tokens_);
  counter("nxrt_generation_tokens_total", "Tokens generated.", generated_tokens_);
  counter("nxrt_decode_steps_total", "Batched decode steps (one model run each).", decode_steps_);
  counter("nxrt_decode_rows_total", "Rows decoded over all steps (/ steps = the mean decode batch).", decode_rows_);
  counter("nxrt_prefill_runs_total", "Prefill runs (one model run each, one or more prompts).", prefill_runs_);
  counter("nxrt_prefill_rows_total", "Prompt pieces prefilled over all prefill runs.", prefill_rows_);
  counter("nxrt_prefill_positions_total", "Prompt tokens run by prefill runs.", prefill_positions_);
  auto hist = [&](const char* name, const char* help, const Histogram& h) {
    head(name, "histogram", help);
    int64_t cum = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cum += h.counts[i];
      o += std::string(name) + "_bucket{le=\"" + fmt(h.bounds[i]) + "\"} " + std::to_string(cum) + "\n";
    }
    cum += h.counts.back();
    o += std::string(name) + "_bucket{le=\"+Inf\"} " + std::to_string(cum) + "\n";
    o += std::string(name) + "_sum " + fmt(h.sum) + "\n" + name + "_count " + std::to_string(h.count) + "\n";
  };
  hist("nxrt_time_to_first_token_seconds", "From admission to the queue to the first generated token.", ttft_);
  hist("nxrt_inter_token_latency_seconds", "Between consecutive tokens of one request.", itl_);
  head("nxrt_queue_depth", "gauge", "Requests waiting for a KV row.");
  o += "nxrt_queue_depth " + std::to_string(queued_) + "\n";
  head("nxrt_active_sequences", "gauge", "Requests holding a KV row (prefilling or decoding).");
  o += "nxrt_active_sequences " + std::to_string(active_) + "\n";
  head("nxrt_kv_cache_used_positions", "gauge", "KV positions held by running requests.");
  o += "nxrt_kv_cache_used_positions " + std::to_string(kv_used_) + "\n";
  head("nxrt_kv_cache_capacity_positions", "gauge", "KV positions of all rows (max_batch * ctx).");
  o += "nxrt_kv_cache_capacity_positions " + std::to_string(kv_capacity_) + "\n";
  head("nxrt_kv_cache_usage_ratio", "gauge", "nxrt_kv_cache_used_positions / nxrt_kv_cache_capacity_positions.");
  o += "nxrt_kv_cache_usage_ratio " + fmt(kv_capacity_ > 0 ? static_cast<double>(kv_used_) / static_cast<double>(kv_capacity_) : 0) + "\n";
  return o;
}

// ------------------------------------------------------------------------------------------ GenRequest
bool GenRequest::next_event(GenEvent* ev, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, timeout, [&] { return !events_.empty(); })) return false;
  *ev = std::move(events_.front());
  events_.pop_front();
  return true;
}

void GenRequest::push(GenEvent ev) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(ev));
  }
  cv_.notify_all();
}

Usage GenRequest::usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  return usage_;
}

void GenRequest::set_usage(const Usage& u) {
  std::lock_guard<std::mutex> lock(mu_);
  usage_ = u;
}

// ------------------------------------------------------------------------------------------ Scheduler
struct Scheduler::Row {
  std::shared_ptr<GenRequest> req;  // null: free (its tokens may serve as a cached prefix)
  uint64_t last_used = 0;
  uint64_t admitted = 0;            // admission order: prefill goes first come, first served
  std::vector<int64_t> pending;     // prompt tokens not prefilled yet
  int64_t next_token = -1;          // picked, not run yet
  int64_t reused = 0;
  std::vector<int64_t> generated;
  std::unordered_map<int64_t, int64_t> counts;  // generated token -> times (presence / frequency penalty)
  std::unique_ptr<genai::TokenPicker> picker;
  std::unique_ptr<genai::TokenizerStream> stream;
  std::unique_ptr<StopFilter> filter;
  double t_last = 0;
  double t_submit = 0;
};

Scheduler::Scheduler(const genai::Model& model, const genai::Tokenizer& tok, std::vector<int64_t> eos_ids,
                     const SchedulerOptions& opts, Metrics* metrics)
    : model_(model), tok_(tok), eos_ids_(std::move(eos_ids)), opts_(opts), metrics_(metrics) {}

Scheduler::~Scheduler() { stop(); }

Status Scheduler::start() {
  NXRT_ASSIGN_OR_RETURN(batch_, genai::SequenceBatch::create(model_, opts_.max_batch, opts_.ctx));
  for (int64_t r = 0; r < opts_.max_batch; ++r) rows_.push_back(std::make_unique<Row>());
  update_gauges();
  thread_ = std::thread([this] { loop(); });
  return Status::Ok();
}

Scheduler::Admit Scheduler::submit(std::shared_ptr<GenRequest> r) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Admit::kStopping;
    // A request is refused only when every row is busy and the queue is full.
    if (static_cast<int64_t>(queue_.size()) >= opts_.max_queue && running_ + static_cast<int64_t>(queue_.size()) >= opts_.max_batch) {
      return Admit::kQueueFull;
    }
    queue_.push_back(std::move(r));
  }
  cv_.notify_all();
  return Admit::kQueued;
}

void Scheduler::cancel_all() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancel_all_ = true;
  }
  cv_.notify_all();
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

int64_t Scheduler::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_ + static_cast<int64_t>(queue_.size());
}

// Scheduler thread only (it reads the rows).
void Scheduler::update_gauges() {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t used = 0;
  if (batch_) {
    for (size_t r = 0; r < rows_.size(); ++r) {
      if (rows_[r]->req) used += static_cast<int64_t>(batch_->row_tokens(static_cast<int64_t>(r)).size());
    }
  }
  metrics_->set_gauges(static_cast<int64_t>(queue_.size()), running_, used, opts_.max_batch * opts_.ctx);
}

void Scheduler::finish(Row& row, int64_t r, const std::string& reason, const std::string& error) {
  (void)r;
  if (!row.req) return;
  GenEvent ev;
  if (row.filter && reason != "cancelled" && reason != "error") {
    row.filter->finish();
    ev.text = row.filter->take_released();
  }
  ev.final = true;
  ev.finish_reason = reason;
  ev.error = error;
  Usage u;
  u.prompt_tokens = static_cast<int64_t>(row.req->prompt.size());
  u.completion_tokens = static_cast<int64_t>(row.generated.size());
  u.cached_tokens = row.reused;
  row.req->set_usage(u);
  row.req->push(std::move(ev));
  metrics_->count_finish(reason);
  row.req.reset();
  row.picker.reset();
  row.stream.reset();
  row.filter.reset();
  row.pending.clear();
  row.generated.clear();
  row.counts.clear();
  row.next_token = -1;
  row.last_used = ++clock_;
  std::lock_guard<std::mutex> lock(mu_);
  --running_;
}

void Scheduler::drop_cancelled() {
  bool all = false;
  std::vector<std::shared_ptr<GenRequest>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all = cancel_all_;
    cancel_all_ = false;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (all || (*it)->cancelled) {
        dropped.push_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& q : dropped) {
    GenEvent ev;
    ev.final = true;
    ev.finish_reason = "cancelled";
    Usage u;
    u.prompt_tokens = static_cast<int64_t>(q->prompt.size());
    q->set_usage(u);
    q->push(std::move(ev));
    metrics_->count_finish("cancelled");
  }
  for (size_t r = 0; r < rows_.size(); ++r) {
    Row& row = *rows_[r];
    if (row.req && (all || row.req->cancelled)) finish(row, static_cast<int64_t>(r), "cancelled");
  }
}

// Free rows take queued requests: the row whose cached tokens share the longest prefix with the prompt
// (at most all but its last token, so the model runs at least one position), else the least recently
// used free row.
void Scheduler::admit_locked() {
  while (!queue_.empty()) {
    std::shared_ptr<GenRequest> req = queue_.front();
    int64_t best = -1;
    size_t best_keep = 0;
    for (size_t r = 0; r < rows_.size(); ++r) {
      const Row& row = *rows_[r];
      if (row.req) continue;
      const size_t keep = opts_.prefix_reuse ? std::min(common_prefix(batch_->row_tokens(static_cast<int64_t>(r)), req->prompt),
                                                        req->prompt.size() - 1)
                                             : 0;
      if (best < 0 || keep > best_keep || (keep == best_keep && row.last_used < rows_[static_cast<size_t>(best)]->last_used)) {
        best = static_cast<int64_t>(r);
        best_keep = keep;
      }
    }
    if (best < 0) return;
    queue_.pop_front();
    Row& row = *rows_[static_cast<size_t>(best)];
    (void)batch_->truncate_row(best, static_cast<int64_t>(best_keep));  // keep <= the row's length
    row.req = req;
    row.admitted = ++clock_;
    row.last_used = row.admitted;
    row.reused = static_cast<int64_t>(best_keep);
    row.pending.assign(req->prompt.begin() + static_cast<std::ptrdiff_t>(best_keep), req->prompt.end());
    row.next_token = -1;
    row.generated.clear();
    row.counts.clear();
    row.picker = std::make_unique<genai::TokenPicker>(req->params.search);
    row.stream = std::make_unique<genai::TokenizerStream>(&tok_);
    row.filter = std::make_unique<StopFilter>(req->params.stop, nullptr);
    row.t_submit = now_s();
    ++running_;
    metrics_->add_prompt_tokens(static_cast<int64_t>(req->prompt.size()), row.reused);
  }
}

void Scheduler::advance(Row& row, int64_t r, std::vector<float>& logits) {
  const GenParams& p = row.req->params;
  const double now = now_s();
  if (row.generated.empty()) {
    metrics_->observe_ttft(now - row.t_submit);
  } else {
    metrics_->observe_itl(now - row.t_last);
  }
  row.t_last = now;
  // OpenAI's presence / frequency penalties over the tokens generated so far.
  if (p.presence_penalty != 0 || p.frequency_penalty != 0) {
    for (const auto& [id, n] : row.counts) {
      if (id >= 0 && id < static_cast<int64_t>(logits.size())) {
        logits[static_cast<size_t>(id)] -= static_cast<float>(p.presence_penalty + p.frequency_penalty * static_cast<double>(n));
      }
    }
  }
  // log-softmax of those logits for logprobs (before temperature and the sampling filters).
  std::vector<double> logp;
  if (p.logprobs) {
    double mx = -INFINITY;
    for (float v : logits) mx = std::max(mx, static_cast<double>(v));
    double sum = 0;
    for (float v : logits) sum += std::exp(static_cast<double>(v) - mx);
    const double lse = mx + std::log(sum);
    logp.resize(logits.size());
    for (size_t j = 0; j < logits.size(); ++j) logp[j] = static_cast<double>(logits[j]) - lse;
  }
  const int64_t id = row.picker->pick(&logits, batch_->row_tokens(r));
  row.generated.push_back(id);
  row.counts[id] += 1;
  metrics_->add_generated_tokens(1);
  GenEvent ev;
  auto token_text = [&](int64_t t) {
    if (t >= static_cast<int64_t>(tok_.vocab_size())) return std::string();
    const int32_t one = static_cast<int32_t>(t);
    auto s = tok_.decode(std::span<const int32_t>(&one, 1));
    return s.ok() ? s.value() : std::string();
  };
  if (p.logprobs) {
    TokenLogprob lp;
    lp.token = token_text(id);
    lp.logprob = logp[static_cast<size_t>(id)];
    if (p.top_logprobs > 0) {
      std::vector<int64_t> idx(logp.size());
      for (size_t j = 0; j < idx.size(); ++j) idx[j] = static_cast<int64_t>(j);
      const size_t k = std::min<size_t>(static_cast<size_t>(p.top_logprobs), idx.size());
      std::partial_sort(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(k), idx.end(), [&](int64_t a, int64_t b) {
        return logp[static_cast<size_t>(a)] > logp[static_cast<size_t>(b)] ||
               (logp[static_cast<size_t>(a)] == logp[static_cast<size_t>(b)] && a < b);
      });
      for (size_t j = 0; j < k; ++j) lp.top.push_back({token_text(idx[j]), logp[static_cast<size_t>(idx[j])]});
    }
    ev.logprobs.push_back(std::move(lp));
  }
  const bool eos = !p.ignore_eos && std::find(eos_ids_.begin(), eos_ids_.end(), id) != eos_ids_.end();
  if (eos) {
    const std::string tail = row.stream->flush();
    const bool hit = !tail.empty() && row.filter->add(tail);
    ev.text = row.filter->take_released();
    if (!ev.text.empty() || !ev.logprobs.empty()) row.req->push(std::move(ev));
    (void)hit;
    return finish(row, r, "stop");
  }
  // Models often pad their vocabulary past the tokenizer's (Qwen: 151936 logits, 151669 tokens): such an
  // id has no text.
  Result<std::string> piece = std::string();
  if (id < static_cast<int64_t>(tok_.vocab_size())) piece = row.stream->step(static_cast<int32_t>(id));
  if (!piece.ok()) return finish(row, r, "error", piece.status().to_string());
  const bool stop_hit = !piece->empty() && row.filter->add(*piece);
  ev.text = row.filter->take_released();
  if (!ev.text.empty() || !ev.logprobs.empty()) row.req->push(std::move(ev));
  if (stop_hit) return finish(row, r, "stop");
  if (static_cast<int64_t>(row.generated.size()) >= p.max_tokens ||
      static_cast<int64_t>(batch_->row_tokens(r).size()) + 1 > batch_->max_length()) {
    const std::string tail = row.stream->flush();
    const bool hit = !tail.empty() && row.filter->add(tail);
    if (hit) {
      GenEvent t;
      t.text = row.filter->take_released();
      if (!t.text.empty()) row.req->push(std::move(t));
      return finish(row, r, "stop");
    }
    return finish(row, r, "length");
  }
  row.next_token = id;
}

// The oldest admitted request with prompt tokens left, joined by the prefilling requests in the rows
// next to it (a burst of new requests lands in adjacent free rows), as one run of at most
// prefill_chunk positions (rows x the longest piece): one batched prefill instead of one per request.
Status Scheduler::prefill_some() {
  const int64_t rows = static_cast<int64_t>(rows_.size());
  auto prefilling = [&](int64_t r) { return r >= 0 && r < rows && rows_[static_cast<size_t>(r)]->req && !rows_[static_cast<size_t>(r)]->pending.empty(); };
  const int64_t budget = std::max<int64_t>(opts_.prefill_chunk, 1);
  auto piece = [&](int64_t r) { return std::min<int64_t>(static_cast<int64_t>(rows_[static_cast<size_t>(r)]->pending.size()), budget); };
  int64_t oldest = -1;
  for (int64_t r = 0; r < rows; ++r) {
    if (prefilling(r) && (oldest < 0 || rows_[static_cast<size_t>(r)]->admitted < rows_[static_cast<size_t>(oldest)]->admitted)) oldest = r;
  }
  if (oldest < 0) return Status::Ok();
  // Every row of a run is fed S positions (its piece, then filler), which must fit in its row.
  auto fits = [&](int64_t r, int64_t S) {
    return static_cast<int64_t>(batch_->row_tokens(r).size()) + S <= batch_->max_length();
  };
  int64_t lo = oldest, hi = oldest, S = piece(oldest);
  for (bool grew = true; grew;) {
    grew = false;
    for (int64_t cand : {hi + 1, lo - 1}) {
      if (!prefilling(cand)) continue;
      const int64_t s2 = std::max(S, piece(cand));
      if ((hi - lo + 2) * s2 > budget || !fits(cand, s2)) continue;
      bool all_fit = true;
      for (int64_t r = lo; r <= hi && all_fit; ++r) all_fit = fits(r, s2);
      if (!all_fit) continue;
      (cand > hi ? hi : lo) = cand;
      S = s2;
      grew = true;
    }
  }
  std::vector<genai::SequenceBatch::RowFeed> feeds;
  for (int64_t r = lo; r <= hi; ++r) {
    const Row& row = *rows_[static_cast<size_t>(r)];
    feeds.push_back({r, std::vector<int64_t>(row.pending.begin(), row.pending.begin() + piece(r))});
  }
  Status s = batch_->run(feeds);
  if (!s.ok()) {
    for (const auto& f : feeds) finish(*rows_[static_cast<size_t>(f.row)], f.row, "error", s.to_string());
    return s;
  }
  int64_t positions = 0;
  for (const auto& f : feeds) positions += static_cast<int64_t>(f.tokens.size());
  metrics_->count_prefill_run(static_cast<int64_t>(feeds.size()), positions);
  std::vector<float> logits;
  for (size_t i = 0; i < feeds.size(); ++i) {
    Row& row = *rows_[static_cast<size_t>(feeds[i].row)];
    row.pending.erase(row.pending.begin(), row.pending.begin() + static_cast<std::ptrdiff_t>(feeds[i].tokens.size()));
    if (row.pending.empty()) {
      NXRT_RETURN_IF_ERROR(batch_->logits(i, &logits));
      advance(row, feeds[i].row, logits);
    }
  }
  return Status::Ok();
}

Status Scheduler::decode_all() {
  std::vector<genai::SequenceBatch::RowFeed> feeds;
  for (size_t r = 0; r < rows_.size(); ++r) {
    const Row& row = *rows_[r];
    if (row.req && row.pending.empty() && row.next_token >= 0) feeds.push_back({static_cast<int64_t>(r), {row.next_token}});
  }
  if (feeds.empty()) return Status::Ok();
  Status s = batch_->run(feeds);
  if (!s.ok()) {
    for (const auto& f : feeds) finish(*rows_[static_cast<size_t>(f.row)], f.row, "error", s.to_string());
    return s;
  }
  metrics_->count_decode_step(static_cast<int64_t>(feeds.size()));
  std::vector<float> logits;
  for (size_t i = 0; i < feeds.size(); ++i) {
    Row& row = *rows_[static_cast<size_t>(feeds[i].row)];
    row.next_token = -1;
    NXRT_RETURN_IF_ERROR(batch_->logits(i, &logits));
    advance(row, feeds[i].row, logits);
  }
  return Status::Ok();
}

void Scheduler::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || cancel_all_ || running_ > 0 || !queue_.empty(); });
      if (stopping_ && running_ == 0 && queue_.empty()) break;
    }
    drop_cancelled();
    {
      std::lock_guard<std::mutex> lock(mu_);
      admit_locked();
    }
    Status s = prefill_some();
    if (s.ok()) s = decode_all();
    if (!s.ok()) std::fprintf(stderr, "nxrt serve: %s\n", s.to_string().c_str());
    update_gauges();
    if (opts_.step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(opts_.step_delay_ms));
  }
  update_gauges();
}

}  // namespace nxrt::cli::serve
