#include "genai/generator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <new>
#include <random>

#include "nxrt/float_types.h"

namespace nxrt::genai {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void put_int(Tensor& store, int64_t i, int64_t v) {
  if (store.dtype() == DataType::kInt64) {
    store.data<int64_t>()[i] = v;
  } else {
    store.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
}

// A [rows, cols] view over the first rows * cols elements of a capacity-sized store (no allocation).
Tensor view2d(const Tensor& store, int64_t rows, int64_t cols) {
  return Tensor(store.dtype(), Dims{rows, cols}, store.storage());
}

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

// ------------------------------------------------------------------------------------------ Impl
Generator::Impl::Impl(const Model& model_, const SearchOptions& o, int64_t cap)
    : model(model_),
      m(model_.impl()),
      opts(o),
      batch(o.batch_size),
      beams(o.num_beams),
      rows(o.batch_size * o.num_beams),
      capacity(cap),
      vocab(model_.impl().vocab),
      layout(model_.impl().layout),
      sampler(o) {
  cache = std::make_unique<CacheSet>(m, rows, capacity, o.past_present_share_buffer);
  const size_t n = static_cast<size_t>(rows * capacity);
  tokens.assign(n, 0);
  valid.assign(n, 0);
  if (beams > 1) {
    tokens_next.assign(n, 0);
    valid_next.assign(n, 0);
    beam = std::make_unique<BeamSearch>(batch, beams, o.length_penalty, o.early_stopping, m.config.eos_token_ids,
                                        m.config.pad_token_id);
  }
  kv_len.assign(static_cast<size_t>(rows), 0);
  kv_len_next.assign(static_cast<size_t>(rows), 0);
  row_done.assign(static_cast<size_t>(rows), 0);
  run_pos.assign(static_cast<size_t>(rows), 0);
  logit_rows.resize(static_cast<size_t>(rows));
  ids_store = Tensor(m.ids_dtype, Dims{rows * capacity});
  mask_store = Tensor(m.has_mask ? m.mask_dtype : DataType::kInt64, Dims{rows * capacity});
  pos_store = Tensor(m.has_position_ids ? m.pos_dtype : DataType::kInt64, Dims{rows * capacity});
  use_cache_t = Tensor(DataType::kBool, Dims{1});
  select_store = Tensor(DataType::kInt64, Dims{rows, 1});
  if (vocab > 0) seen.assign(static_cast<size_t>(vocab), 0);
  m.session->reset_capture();  // a new generation: captured-replay records start over
}

bool Generator::Impl::is_eos(int64_t t) const {
  const auto& eos = m.config.eos_token_ids;
  return std::find(eos.begin(), eos.end(), t) != eos.end();
}

void Generator::Impl::reset() {
  m.session->reset_capture();  // a new sequence: record the next steady steps afresh
  len = run_len = 0;
  std::fill(kv_len.begin(), kv_len.end(), 0);
  std::fill(row_done.begin(), row_done.end(), 0);
  done = false;
  logits_ready = false;
  cache->reset();
  if (beam) beam->reset();
}

// A failed allocation outside Session::run (the KV cache, feeds, logits) is an error value too.
static Status allocation_failed(const std::bad_alloc& e) {
  return runtime_error(std::string("out of memory in the generator: ") + e.what());
}

Status Generator::Impl::append(const int64_t* ids, int64_t per_row) {
  if (per_row <= 0) return invalid_argument("append_tokens: no tokens");
  if (beams > 1 && len > 0) {
    return invalid_argument("append_tokens: beam search takes its prompt in one append (rewind_to(0) to start over)");
  }
  if (len + per_row > capacity) {
    return invalid_argument("context overflow: " + str(len) + " + " + str(per_row) + " tokens per row exceed max_length " +
                            str(capacity));
  }
  for (int64_t i = 0; i < batch * per_row; ++i) {
    const int64_t t = ids[i];
    if (t < 0 || (vocab > 0 && t >= vocab)) {
      return invalid_argument("token id " + str(t) + " (row " + str(i / per_row) + ") is outside the vocabulary (" +
                              str(vocab) + ")");
    }
  }
  // pad_token_id is padding in the first append and, with several rows, in every append; a single row
  // continuing a conversation keeps every token (as onnxruntime-genai).
  const int64_t pad = m.config.pad_token_id;
  const bool pad_rule = pad >= 0 && (len == 0 || batch > 1);
  for (int64_t b = 0; b < batch; ++b) {
    bool any = false;
    for (int64_t i = 0; i < per_row && !any; ++i) any = !pad_rule || ids[b * per_row + i] != pad;
    for (int64_t i = 0; i < len && !any; ++i) any = valid[static_cast<size_t>(b * beams * capacity + i)] != 0;
    if (!any) {
      return invalid_argument("append_tokens: row " + str(b) + " holds only pad_token_id " + str(pad) +
                              " (padding): nothing to run");
    }
  }
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t k = 0; k < beams; ++k) {
      const int64_t r = b * beams + k;
      for (int64_t i = 0; i < per_row; ++i) {
        const int64_t t = ids[b * per_row + i];
        tokens[static_cast<size_t>(r * capacity + len + i)] = t;
        valid[static_cast<size_t>(r * capacity + len + i)] = !pad_rule || t != pad;
      }
    }
  }
  const int64_t old = len;
  len += per_row;
  std::fill(row_done.begin(), row_done.end(), 0);  // finished rows continue with the new tokens
  done = false;
  logits_ready = false;
  Status s;
  try {
    s = run_pending();
  } catch (const std::bad_alloc& e) {
    s = allocation_failed(e);
  }
  if (!s.ok()) {
    len = old;
    return s;
  }
  done = len >= capacity;
  return Status::Ok();
}

Status Generator::Impl::run_pending() {
  const int64_t S = len - run_len;
  if (S <= 0) return invalid_argument("no tokens to run: call append_tokens first");
  if (len > capacity) {
    return invalid_argument("context overflow: " + str(len) + " tokens exceed max_length " + str(capacity));
  }
  const int64_t pad = m.config.pad_token_id;
  int64_t T = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* tok = row_tokens(r);
    const uint8_t* ok = valid.data() + r * capacity;
    if (layout == KvLayout::kPerRow) {
      // The row's real tokens first, filler after: each row writes its cache from its own length.
      int64_t n = 0;
      for (int64_t p = run_len; p < len; ++p) {
        if (!ok[p]) continue;
        put_int(ids_store, r * S + n, tok[p]);
        put_int(pos_store, r * S + n, kv_len[static_cast<size_t>(r)] + n);
        ++n;
      }
      run_pos[static_cast<size_t>(r)] = std::max<int64_t>(n - 1, 0);
      for (int64_t i = n; i < S; ++i) {
        put_int(ids_store, r * S + i, pad >= 0 ? pad : 0);
        put_int(pos_store, r * S + i, kv_len[static_cast<size_t>(r)] + i);
      }
      T = std::max(T, kv_len[static_cast<size_t>(r)] + S);
    } else {
      int64_t count = 0;  // real tokens before position p: the position id (onnxruntime-genai)
      for (int64_t p = 0; p < run_len; ++p) count += ok[p];
      for (int64_t p = run_len; p < len; ++p) {
        put_int(ids_store, r * S + (p - run_len), tok[p]);
        put_int(pos_store, r * S + (p - run_len), ok[p] ? count : 0);
        count += ok[p];
      }
      run_pos[static_cast<size_t>(r)] = S - 1;
      T = len;
    }
  }
  if (m.has_mask) {
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* ok = valid.data() + r * capacity;
      const int64_t ext = kv_len[static_cast<size_t>(r)] + S;
      for (int64_t j = 0; j < T; ++j) {
        put_int(mask_store, r * T + j, layout == KvLayout::kPerRow ? (j < ext ? 1 : 0) : ok[j]);
      }
    }
  }
  use_cache_t.data<bool>()[0] = run_len > 0;
  for (int64_t r = 0; r < rows; ++r) select_store.data<int64_t>()[r] = run_pos[static_cast<size_t>(r)];
  // Let go of the last logits first, so the session's pool hands the same block to this run's.
  logits_value = Value();
  const double t0 = now_ms();
  Status st = cache->share() ? run_bound(S, T) : run_feeds(S, T);
  const double dt = now_ms() - t0;
  if (!st.ok()) return st;
  stats.last_run_ms = dt;
  stats.total_run_ms += dt;
  stats.runs += 1;
  stats.tokens_run += S;
  for (int64_t r = 0; r < rows; ++r) {
    if (layout == KvLayout::kPerRow) {
      const uint8_t* ok = valid.data() + r * capacity;
      for (int64_t p = run_len; p < len; ++p) kv_len[static_cast<size_t>(r)] += ok[p];
    } else {
      kv_len[static_cast<size_t>(r)] = len;
    }
  }
  run_len = len;
  logits_ready = true;
  return Status::Ok();
}

Status Generator::Impl::run_feeds(int64_t S, int64_t T) {
  const Config& c = m.config;
  std::vector<std::pair<std::string, Value>> feeds;
  feeds.push_back({c.input_ids, Value(view2d(ids_store, rows, S))});
  if (m.has_mask) feeds.push_back({c.attention_mask, Value(view2d(mask_store, rows, T))});
  if (m.has_position_ids) feeds.push_back({c.position_ids, Value(view2d(pos_store, rows, S))});
  if (m.has_use_cache_branch) feeds.push_back({c.use_cache_branch, Value(use_cache_t)});
  if (!m.logits_positions.empty()) feeds.push_back({m.logits_positions, Value(select_store)});
  cache->add_feeds(&feeds);
  // Through one IoBinding with runtime-allocated outputs, so that steady steps can be captured and
  // replayed (the growing past only feeds eager seams; session/capture.h).
  if (feed_bind.num_outputs() == 0) {
    for (const auto& name : m.fetch_names) feed_bind.bind_output(name);
  }
  feed_bind.clear_inputs();
  for (auto& [name, v] : feeds) feed_bind.bind_input(name, std::move(v));
  const Status run_status = m.session->run(feed_bind);
  feed_bind.clear_inputs();  // the old past goes as soon as the cache lets go of it
  NXRT_RETURN_IF_ERROR(run_status);
  std::vector<Value> outs;
  outs.reserve(feed_bind.num_outputs());
  for (size_t k = 0; k < feed_bind.num_outputs(); ++k) outs.push_back(feed_bind.output(k));
  if (outs.empty() || !outs[0].is_tensor()) return runtime_error("logits output '" + c.logits + "' is not a tensor");
  logits_value = outs[0];
  NXRT_RETURN_IF_ERROR(take_logits(logits_value.tensor(), S));
  if (cache->fixed()) return cache->take_presents(&outs, 1, capacity, true);
  // Aligned rows grow by S positions; GroupQueryAttention's present keeps max(past, total) positions.
  return cache->take_presents(&outs, 1, layout == KvLayout::kAligned ? len : T, layout == KvLayout::kAligned);
}

Status Generator::Impl::run_bound(int64_t S, int64_t T) {
  const Config& c = m.config;
  if (!bound_ready) {
    ids_in = bind.bind_input(c.input_ids, Value(view2d(ids_store, rows, S)));
    if (m.has_mask) mask_in = bind.bind_input(c.attention_mask, Value(view2d(mask_store, rows, T)));
    if (m.has_position_ids) pos_in = bind.bind_input(c.position_ids, Value(view2d(pos_store, rows, S)));
    if (m.has_use_cache_branch) ucb_in = bind.bind_input(c.use_cache_branch, Value(use_cache_t));
    if (!m.logits_positions.empty()) select_in = bind.bind_input(m.logits_positions, Value(select_store));
    logits_out = bind.bind_output(c.logits);
    cache->bind(&bind);  // outputs 1.. are the presents
    bound_ready = true;
  }
  bind.set_input(ids_in, Value(view2d(ids_store, rows, S)));
  if (m.has_mask) bind.set_input(mask_in, Value(view2d(mask_store, rows, T)));
  if (m.has_position_ids) bind.set_input(pos_in, Value(view2d(pos_store, rows, S)));
  if (!m.logits_positions.empty()) bind.set_input(select_in, Value(select_store));
  NXRT_RETURN_IF_ERROR(m.session->run(bind));
  if (!bound_checked) {
    NXRT_RETURN_IF_ERROR(cache->check_bound(bind, logits_out + 1));
    bound_checked = true;
  }
  const Value& lv = bind.output(logits_out);
  if (!lv.is_tensor()) return runtime_error("logits output '" + c.logits + "' is not a tensor");
  logits_value = lv;
  return take_logits(logits_value.tensor(), S);
}

// `lt` is contiguous: the session materializes views before a caller sees them. Rows point into it.
Status Generator::Impl::take_logits(const Tensor& lt, int64_t S) {
  const int64_t V = lt.rank() > 0 ? lt.dim(-1) : 0;
  if (lt.rank() != 3 || lt.dim(0) != rows || (lt.dim(1) != S && lt.dim(1) != 1) || V <= 0) {
    return runtime_error("logits " + lt.describe() + " are not [" + str(rows) + ", " + str(S) + " (or 1), vocab]");
  }
  if (lt.dtype() != DataType::kFloat && lt.dtype() != DataType::kFloat16) {
    return runtime_error("logits are " + lt.describe() + " (float32 or float16 only)");
  }
  if (vocab > 0 && V != vocab) {
    return runtime_error("logits have " + str(V) + " entries per row, the vocabulary " + str(vocab));
  }
  vocab = V;
  if (seen.size() < static_cast<size_t>(V)) seen.assign(static_cast<size_t>(V), 0);
  const int64_t S1 = lt.dim(1);
  if (S1 == 1 && S > 1 && m.logits_positions.empty()) {
    for (int64_t r = 0; r < rows; ++r) {
      if (run_pos[static_cast<size_t>(r)] != S - 1) {
        return not_implemented("logits " + lt.describe() + " hold the last position only, but row " + str(r) +
                               " ends earlier in this run (rows of different lengths need logits for every position)");
      }
    }
  }
  Tensor t = lt;  // shares the storage: the rows are read and edited in place
  char* base = static_cast<char*>(t.raw_data());
  const size_t es = dtype_storage_bytes(t.dtype(), 1);
  // With logits_positions fed, row r's single position is run_pos[r].
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t pos = S1 == 1 ? 0 : run_pos[static_cast<size_t>(r)];
    logit_rows[static_cast<size_t>(r)] = {base + static_cast<size_t>((r * S1 + pos) * V) * es, t.dtype(), V};
  }
  return Status::Ok();
}

void Generator::Impl::apply_processors() {
  const bool min_len = len < opts.min_length;
  for (int64_t r = 0; r < rows; ++r) {
    if (!beam && row_done[static_cast<size_t>(r)]) continue;
    const LogitsRow& row = logit_rows[static_cast<size_t>(r)];
    if (min_len) suppress_tokens(row, m.config.eos_token_ids);
    apply_repetition_penalty(row, row_tokens(r), len, opts.repetition_penalty, &seen);
    if (opts.no_repeat_ngram_size > 0) ban_repeated_ngrams(row, row_tokens(r), len, opts.no_repeat_ngram_size);
  }
}

Status Generator::Impl::pick_next() {
  if (!logits_ready) NXRT_RETURN_IF_ERROR(run_pending());
  apply_processors();
  logits_ready = false;
  if (beam) {
    beam->select(logit_rows, tokens.data(), capacity, len);
    append_beam_step();
    return Status::Ok();
  }
  const int64_t pad = m.config.pad_token_id;
  bool all_done = true;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t at = static_cast<size_t>(r * capacity + len);
    if (row_done[static_cast<size_t>(r)]) {  // a finished row is padded
      tokens[at] = pad >= 0 ? pad : 0;
      valid[at] = 0;
      continue;
    }
    const int64_t tok = sampler.next(logit_rows[static_cast<size_t>(r)]);
    tokens[at] = tok;
    valid[at] = 1;
    if (opts.stop_at_eos && is_eos(tok)) row_done[static_cast<size_t>(r)] = 1;
    all_done = all_done && row_done[static_cast<size_t>(r)];
  }
  ++len;
  if ((opts.stop_at_eos && all_done) || len >= capacity) done = true;
  return Status::Ok();
}

void Generator::Impl::append_beam_step() {
  const std::vector<int64_t>& src = beam->next_indices();
  const std::vector<int64_t>& next = beam->next_tokens();
  bool moved = false;
  for (int64_t r = 0; r < rows; ++r) moved = moved || src[static_cast<size_t>(r)] != r;
  if (moved) {
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t from = src[static_cast<size_t>(r)];
      std::copy_n(tokens.begin() + from * capacity, len, tokens_next.begin() + r * capacity);
      std::copy_n(valid.begin() + from * capacity, len, valid_next.begin() + r * capacity);
    }
    tokens.swap(tokens_next);
    valid.swap(valid_next);
    // The caches follow their beams; kv_len (equal within a prompt) is reordered with them.
    stats.rows_reordered += cache->reorder(src, kv_len);
    for (int64_t r = 0; r < rows; ++r) kv_len_next[static_cast<size_t>(r)] = kv_len[static_cast<size_t>(src[static_cast<size_t>(r)])];
    kv_len.swap(kv_len_next);
  }
  const int64_t pad = m.config.pad_token_id;
  for (int64_t r = 0; r < rows; ++r) {
    const size_t at = static_cast<size_t>(r * capacity + len);
    const int64_t t = next[static_cast<size_t>(r)];
    tokens[at] = t;
    valid[at] = !(pad >= 0 && t == pad && beam->prompt_done(r / beams));
  }
  ++len;
  if (beam->done() || len >= capacity) done = true;
}

// ------------------------------------------------------------------------------------------ Generator
Generator::Generator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Generator::~Generator() = default;

GeneratorParams::GeneratorParams(const Model& model) {
  const Config& c = model.config();
  search.max_length = c.max_length;
  search.do_sample = c.do_sample;
  search.top_k = c.top_k;
  search.top_p = c.top_p;
  search.temperature = c.temperature;
  search.repetition_penalty = c.repetition_penalty;
  search.min_length = c.min_length;
  search.num_beams = c.num_beams;
  search.num_return_sequences = c.num_return_sequences;
  search.length_penalty = c.length_penalty;
  search.early_stopping = c.early_stopping;
  search.no_repeat_ngram_size = c.no_repeat_ngram_size;
  search.past_present_share_buffer = c.past_present_share_buffer;
}

Status GeneratorParams::set_search_option(const std::string& name, double value) {
  auto integer = [&](int64_t* out, int64_t min) -> Status {
    if (!std::isfinite(value) || value != std::floor(value)) {
      return invalid_argument("search option '" + name + "' takes an integer, got " + std::to_string(value));
    }
    if (value < static_cast<double>(min)) {
      return invalid_argument("search option '" + name + "' must be at least " + std::to_string(min));
    }
    *out = static_cast<int64_t>(value);
    return Status::Ok();
  };
  if (name == "max_length") return integer(&search.max_length, 0);
  if (name == "batch_size") return integer(&search.batch_size, 1);
  if (name == "min_length") return integer(&search.min_length, 0);
  if (name == "top_k") return integer(&search.top_k, 0);
  if (name == "num_beams") return integer(&search.num_beams, 1);
  if (name == "num_return_sequences") return integer(&search.num_return_sequences, 1);
  if (name == "no_repeat_ngram_size") return integer(&search.no_repeat_ngram_size, 0);
  if (name == "random_seed") {
    int64_t seed = 0;
    NXRT_RETURN_IF_ERROR(integer(&seed, -1));
    // onnxruntime-genai: -1 draws a seed.
    search.random_seed = seed == -1 ? (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()
                                    : static_cast<uint64_t>(seed);
    return Status::Ok();
  }
  double* real = name == "top_p"                ? &search.top_p
                 : name == "min_p"              ? &search.min_p
                 : name == "temperature"        ? &search.temperature
                 : name == "repetition_penalty" ? &search.repetition_penalty
                 : name == "length_penalty"     ? &search.length_penalty
                                                : nullptr;
  if (real) {
    if (!std::isfinite(value)) return invalid_argument("search option '" + name + "' must be finite");
    *real = value;
    return Status::Ok();
  }
  if (name == "diversity_penalty") {
    if (value != 0) return not_implemented("search option diversity_penalty " + std::to_string(value) + ": group beam search");
    return Status::Ok();
  }
  if (name == "do_sample" || name == "early_stopping" || name == "past_present_share_buffer" || name == "stop_at_eos") {
    return invalid_argument("search option '" + name + "' takes a bool (set_search_option_bool)");
  }
  return invalid_argument("unknown search option '" + name +
                          "' (numbers: max_length, batch_size, min_length, top_k, top_p, min_p, temperature, "
                          "repetition_penalty, num_beams, num_return_sequences, length_penalty, "
                          "no_repeat_ngram_size, random_seed, diversity_penalty; bools: do_sample, early_stopping, "
                          "past_present_share_buffer, stop_at_eos)");
}

Status GeneratorParams::set_search_option_bool(const std::string& name, bool value) {
  if (name == "do_sample") search.do_sample = value;
  else if (name == "early_stopping") search.early_stopping = value;
  else if (name == "past_present_share_buffer") search.past_present_share_buffer = value;
  else if (name == "stop_at_eos") search.stop_at_eos = value;
  else return invalid_argument("unknown bool search option '" + name + "' (do_sample, early_stopping, "
                               "past_present_share_buffer, stop_at_eos)");
  return Status::Ok();
}

Result<std::unique_ptr<Generator>> Generator::create(const Model& model, const GeneratorParams& params) try {
  const Config& c = model.config();
  const Model::Impl& m = model.impl();
  const SearchOptions& o = params.search;
  int64_t cap = o.max_length > 0 ? o.max_length : c.context_length;
  if (cap <= 0) return invalid_argument("max_length unknown: set it (search options) or model.context_length");
  if (c.context_length > 0 && cap > c.context_length) {
    return invalid_argument("max_length " + str(cap) + " exceeds model.context_length " + str(c.context_length));
  }
  if (o.top_k < 0 || o.top_p < 0 || o.top_p > 1 || o.min_p < 0 || o.min_p > 1 || !(o.temperature > 0) ||
      !(o.repetition_penalty > 0)) {
    return invalid_argument("search options out of range (top_k >= 0, 0 <= top_p <= 1, 0 <= min_p <= 1, "
                            "temperature > 0, repetition_penalty > 0)");
  }
  if (o.batch_size < 1 || o.num_beams < 1 || o.min_length < 0 || o.no_repeat_ngram_size < 0 ||
      !std::isfinite(o.length_penalty)) {
    return invalid_argument("search options out of range (batch_size >= 1, num_beams >= 1, min_length >= 0, "
                            "no_repeat_ngram_size >= 0, finite length_penalty)");
  }
  if (o.num_return_sequences < 1 || o.num_return_sequences > o.num_beams) {
    return invalid_argument("num_return_sequences " + str(o.num_return_sequences) + " must be between 1 and num_beams " +
                            str(o.num_beams));
  }
  if (o.num_beams > 1 && o.do_sample) {
    return invalid_argument("do_sample with num_beams " + str(o.num_beams) + ": beam search does not sample");
  }
  if (o.past_present_share_buffer && (m.layout != KvLayout::kPerRow || m.has_state || m.has_combined)) {
    return invalid_argument(
        "search.past_present_share_buffer: " + c.decoder_path + " does not write its KV cache in place (it needs "
        "GroupQueryAttention or TensorScatter key/value caches; this graph has " +
        (m.attention_ops.empty() ? std::string("neither") : m.attention_ops) +
        (m.has_state ? ", recurrent states" : "") + (m.has_combined ? ", combined past_names" : "") +
        "): set past_present_share_buffer false");
  }
  if (static_cast<double>(o.batch_size) * static_cast<double>(o.num_beams) * static_cast<double>(cap) > 1e9) {
    return invalid_argument("batch_size * num_beams * max_length is too large");
  }
  return std::make_unique<Generator>(std::make_unique<Impl>(model, o, cap));
} catch (const std::bad_alloc& e) {
  return allocation_failed(e);
}

Status Generator::append_tokens(const std::vector<int64_t>& ids) {
  Impl& g = *impl_;
  if (ids.empty()) return invalid_argument("append_tokens: no tokens");
  if (ids.size() % static_cast<size_t>(g.batch) != 0) {
    return invalid_argument("append_tokens: " + str(static_cast<int64_t>(ids.size())) +
                            " ids do not split into batch_size " + str(g.batch) + " rows");
  }
  return g.append(ids.data(), static_cast<int64_t>(ids.size()) / g.batch);
}

Status Generator::append_tokens(const int32_t* ids, size_t count) {
  return append_tokens(std::vector<int64_t>(ids, ids + count));
}

Status Generator::append_tokens(const Tensor& ids) {
  Impl& g = *impl_;
  if (ids.dtype() != DataType::kInt32 && ids.dtype() != DataType::kInt64) {
    return invalid_argument("append_tokens: ids are " + ids.describe() + " (int32 or int64)");
  }
  if (ids.rank() == 2 ? ids.dim(0) != g.batch : !(ids.rank() == 1 && g.batch == 1)) {
    return invalid_argument("append_tokens: ids " + ids.describe() + " are not [batch_size " + str(g.batch) + ", seq]");
  }
  Tensor c = ids.contiguous();
  std::vector<int64_t> v(static_cast<size_t>(c.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = c.dtype() == DataType::kInt64 ? c.data<int64_t>()[i] : c.data<int32_t>()[i];
  }
  return append_tokens(v);
}

Status Generator::generate_next_token() try {
  Impl& g = *impl_;
  if (g.len == 0 && !g.logits_ready) return invalid_argument("generate_next_token: call append_tokens first");
  if (is_done()) {
    return invalid_argument("generate_next_token: generation is done (max_length " + str(g.capacity) + " reached" +
                            (g.beam ? " or every prompt has num_beams hypotheses)" : " or EOS)"));
  }
  return g.pick_next();
} catch (const std::bad_alloc& e) {
  return allocation_failed(e);
}

bool Generator::is_done() const { return impl_->done || impl_->len >= impl_->capacity; }

Result<std::vector<float>> Generator::get_logits() try {
  Impl& g = *impl_;
  if (!g.logits_ready) NXRT_RETURN_IF_ERROR(g.run_pending());
  std::vector<float> out(static_cast<size_t>(g.rows * g.vocab));
  for (int64_t r = 0; r < g.rows; ++r) {
    const LogitsRow& row = g.logit_rows[static_cast<size_t>(r)];
    for (int64_t j = 0; j < g.vocab; ++j) out[static_cast<size_t>(r * g.vocab + j)] = row.get(j);
  }
  return out;
} catch (const std::bad_alloc& e) {
  return allocation_failed(e);
}

Status Generator::set_logits(const std::vector<float>& logits) try {
  Impl& g = *impl_;
  if (g.len > g.run_len) NXRT_RETURN_IF_ERROR(g.run_pending());  // keeps the caches in step with the tokens
  if (g.vocab <= 0) return invalid_argument("set_logits: the vocabulary size is unknown before the first run");
  if (static_cast<int64_t>(logits.size()) != g.rows * g.vocab) {
    return invalid_argument("set_logits: " + str(static_cast<int64_t>(logits.size())) + " values, expected rows " +
                            str(g.rows) + " x vocab " + str(g.vocab));
  }
  g.user_logits = logits;
  for (int64_t r = 0; r < g.rows; ++r) {
    g.logit_rows[static_cast<size_t>(r)] = {g.user_logits.data() + r * g.vocab, DataType::kFloat, g.vocab};
  }
  g.logits_ready = true;
  return Status::Ok();
} catch (const std::bad_alloc& e) {
  return allocation_failed(e);
}

Status Generator::rewind_to(size_t length) {
  Impl& g = *impl_;
  const int64_t n = static_cast<int64_t>(length);
  if (n > g.len) {
    return invalid_argument("rewind_to(" + str(n) + "): the sequence has only " + str(g.len) + " tokens");
  }
  if (n == 0) {
    g.reset();
    return Status::Ok();
  }
  if (n == g.len) return Status::Ok();
  if (g.beam) return invalid_argument("rewind_to(" + str(n) + "): beam search rewinds to 0 only");
  if (g.m.has_state) {
    return invalid_argument("rewind_to(" + str(n) + "): the model carries recurrent states (" +
                            g.m.config.past_conv_names + ") that cannot be rewound: rewind_to(0) only");
  }
  for (int64_t r = 0; r < g.rows; ++r) {
    const uint8_t* ok = g.valid.data() + r * g.capacity;
    if (std::find(ok, ok + n, 1) == ok + n) {
      return invalid_argument("rewind_to(" + str(n) + "): row " + str(r) + " has only padding before that position");
    }
  }
  g.len = n;
  // Keep the cache for all but the last token, which is re-run for its logits on the next step.
  g.run_len = std::min(g.run_len, n - 1);
  int64_t longest = 0;
  bool all_done = true;
  for (int64_t r = 0; r < g.rows; ++r) {
    const uint8_t* ok = g.valid.data() + r * g.capacity;
    int64_t k = g.run_len;
    if (g.layout == KvLayout::kPerRow) k = std::count(ok, ok + g.run_len, 1);
    g.kv_len[static_cast<size_t>(r)] = k;
    longest = std::max(longest, k);
    g.row_done[static_cast<size_t>(r)] = !ok[n - 1];  // a finished row keeps its padding
    all_done = all_done && g.row_done[static_cast<size_t>(r)];
  }
  g.cache->truncate(longest);
  g.m.session->reset_capture();  // the sequence moved back: record the next steady steps afresh
  g.logits_ready = false;
  g.done = (g.opts.stop_at_eos && all_done) || g.len >= g.capacity;
  return Status::Ok();
}

std::vector<int64_t> Generator::get_sequence(size_t index) const {
  const Impl& g = *impl_;
  const int64_t i = static_cast<int64_t>(index);
  if (g.beam) {
    const int64_t nrs = g.opts.num_return_sequences;
    if (i >= g.batch * nrs) return {};
    const int64_t prompt = i / nrs, k = i % nrs;
    if (is_done()) g.beam->finalize(g.tokens.data(), g.capacity, g.len);
    if (g.beam->finalized()) {
      const std::vector<int64_t>* h = g.beam->hypothesis(prompt, k);
      return h ? *h : std::vector<int64_t>();
    }
    const int64_t* t = g.row_tokens(prompt * g.beams + k);
    return std::vector<int64_t>(t, t + g.len);
  }
  if (i >= g.rows) return {};
  const int64_t* t = g.row_tokens(i);
  return std::vector<int64_t>(t, t + g.len);
}

size_t Generator::token_count() const { return static_cast<size_t>(impl_->len); }

std::vector<int64_t> Generator::get_next_tokens() const {
  const Impl& g = *impl_;
  std::vector<int64_t> out;
  if (g.len == 0) return out;
  for (int64_t r = 0; r < g.rows; ++r) out.push_back(g.row_tokens(r)[g.len - 1]);
  return out;
}

int64_t Generator::next_token() const { return impl_->len ? impl_->row_tokens(0)[impl_->len - 1] : -1; }
int64_t Generator::max_length() const { return impl_->capacity; }
const SearchOptions& Generator::search_options() const { return impl_->opts; }
size_t Generator::num_sequences() const {
  const Impl& g = *impl_;
  return static_cast<size_t>(g.beam ? g.batch * g.opts.num_return_sequences : g.rows);
}
bool Generator::row_done(size_t row) const {
  const Impl& g = *impl_;
  return row < g.row_done.size() && (g.row_done[row] || g.len >= g.capacity);
}
const Generator::Stats& Generator::stats() const { return impl_->stats; }
const char* Generator::kv_update() const { return impl_->cache->update_mode(); }

std::vector<int64_t> seeded_prompt(int64_t length, int64_t vocab, uint32_t seed) {
  // mulberry32, as ort-generate.js draws its --prompt-len ids (Math.floor(rnd() * vocab)).
  std::vector<int64_t> out;
  uint32_t a = seed;
  for (int64_t i = 0; i < length; ++i) {
    a += 0x6D2B79F5u;
    uint32_t t = a;
    t = (t ^ (t >> 15)) * (t | 1u);
    t ^= t + (t ^ (t >> 7)) * (t | 61u);
    const double r = static_cast<double>(t ^ (t >> 14)) / 4294967296.0;
    out.push_back(static_cast<int64_t>(r * static_cast<double>(vocab)));
  }
  return out;
}

}  // namespace nxrt::genai
