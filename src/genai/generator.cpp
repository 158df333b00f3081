#include "genai/generator.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "nxrt/float_types.h"

namespace nxrt::genai {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Writes values[i] (or first + step * i when values is null) into an int64 or int32 tensor.
void fill_ints(Tensor& t, int64_t first, int64_t step, const int64_t* values) {
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = values ? values[i] : first + step * i;
    if (t.dtype() == DataType::kInt64) {
      t.data<int64_t>()[i] = v;
    } else {
      t.data<int32_t>()[i] = static_cast<int32_t>(v);
    }
  }
}

Tensor int_tensor(DataType t, Dims shape, int64_t first, int64_t step, const int64_t* values) {
  Tensor out(t, std::move(shape));
  fill_ints(out, first, step, values);
  return out;
}

// Rows [0, rows) of a [1, H, L, D] tensor, as a new [1, H, rows, D] tensor.
Tensor slice_rows(const Tensor& t, int64_t rows) {
  Tensor c = t.contiguous();
  const int64_t H = c.dim(1), L = c.dim(2), D = c.dim(3);
  Tensor out(c.dtype(), Dims{1, H, rows, D});
  const size_t es = dtype_storage_bytes(c.dtype(), 1);
  const auto* src = static_cast<const char*>(c.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t h = 0; h < H; ++h) {
    std::memcpy(dst + static_cast<size_t>(h * rows * D) * es, src + static_cast<size_t>(h * L * D) * es,
                static_cast<size_t>(rows * D) * es);
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------ KvCache
KvCache::KvCache(const Model::Impl& m, int64_t capacity, bool share_buffer)
    : m_(m), capacity_(capacity), share_(share_buffer) {
  const Config& c = m.config;
  const int64_t len = share_ ? capacity_ : 0;
  for (size_t i = 0; i < m.kv.size(); ++i) {
    past_.emplace_back(m.kv_dtype, Dims{1, c.num_key_value_heads, len, c.head_size});
  }
}

void KvCache::feeds(std::vector<std::pair<std::string, Value>>* out) const {
  for (size_t i = 0; i < m_.kv.size(); ++i) out->push_back({m_.kv[i].past, Value(past_[i])});
}

Status KvCache::update(std::vector<Value>* presents, size_t first, int64_t new_length) {
  const Config& c = m_.config;
  const int64_t want = share_ ? capacity_ : new_length;
  for (size_t i = 0; i < m_.kv.size(); ++i) {
    Value& v = (*presents)[first + i];
    if (!v.is_tensor()) return runtime_error("output '" + m_.kv[i].present + "' is not a tensor");
    Tensor t = v.tensor();
    const Dims expect{1, c.num_key_value_heads, want, c.head_size};
    if (t.dtype() != m_.kv_dtype || t.shape() != expect) {
      return runtime_error("output '" + m_.kv[i].present + "' is " + t.describe() + ", expected " +
                           std::string(dtype_name(m_.kv_dtype)) + shape_to_string(expect) +
                           (share_ ? " (past_present_share_buffer: present keeps the past's length)" : ""));
    }
    past_[i] = t.contiguous();
  }
  length_ = new_length;
  return Status::Ok();
}

void KvCache::rewind(int64_t length) {
  if (length >= length_) return;
  if (!share_) {
    for (auto& t : past_) t = slice_rows(t, length);
  }
  length_ = length;  // shared buffer: rows >= length are past the mask and get overwritten
}

// ------------------------------------------------------------------------------------------ Generator
Generator::Impl::Impl(const Model& model_, const SearchOptions& o, int64_t cap)
    : model(model_), m(model_.impl()), opts(o), capacity(cap), sampler(o) {
  kv = std::make_unique<KvCache>(m, capacity, m.config.past_present_share_buffer);
  sequence.reserve(static_cast<size_t>(std::max<int64_t>(capacity, 0)));
  m.session->reset_capture();  // a new generation: captured-replay records start over
}

Status Generator::Impl::run_pending() {
  const int64_t past = kv->length();
  const int64_t total = static_cast<int64_t>(sequence.size());
  const int64_t S = total - past;
  if (S <= 0) return invalid_argument("no tokens to run: call append_tokens first");
  if (total > capacity) {
    return invalid_argument("context overflow: " + std::to_string(total) + " tokens exceed max_length " +
                            std::to_string(capacity));
  }
  if (kv->share_buffer()) return run_bound(past, S, total);
  const Config& c = m.config;
  std::vector<std::pair<std::string, Value>> feeds;
  feeds.push_back({c.input_ids, Value(int_tensor(m.ids_dtype, Dims{1, S}, 0, 0, sequence.data() + past))});
  if (m.has_mask) feeds.push_back({c.attention_mask, Value(int_tensor(m.mask_dtype, Dims{1, total}, 1, 0, nullptr))});
  if (m.has_position_ids) {
    feeds.push_back({c.position_ids, Value(int_tensor(m.pos_dtype, Dims{1, S}, past, 1, nullptr))});
  }
  kv->feeds(&feeds);
  const double t0 = now_ms();
  auto r = m.session->run(feeds, m.fetch_names);
  const double dt = now_ms() - t0;
  if (!r.ok()) return r.status();
  std::vector<Value> outs = std::move(r).value();
  stats.last_run_ms = dt;
  stats.total_run_ms += dt;
  stats.runs += 1;
  stats.tokens_run += S;
  if (outs.empty() || !outs[0].is_tensor()) return runtime_error("logits output '" + c.logits + "' is not a tensor");
  NXRT_RETURN_IF_ERROR(take_logits(outs[0].tensor(), S));
  NXRT_RETURN_IF_ERROR(kv->update(&outs, 1, total));
  logits_valid = true;
  return Status::Ok();
}


Status Generator::Impl::run_bound(int64_t past, int64_t S, int64_t total) {
  const Config& c = m.config;
  if (!bound_ready) {
    ids_t = Tensor(m.ids_dtype, Dims{1, S});
    ids_in = bind.bind_input(c.input_ids, Value(ids_t));
    if (m.has_mask) {
      mask_ones = int_tensor(m.mask_dtype, Dims{1, capacity}, 1, 0, nullptr);
      mask_in = bind.bind_input(c.attention_mask, Value(mask_ones));
    }
    if (m.has_position_ids) {
      pos_t = Tensor(m.pos_dtype, Dims{1, S});
      pos_in = bind.bind_input(c.position_ids, Value(pos_t));
    }
    for (size_t i = 0; i < m.kv.size(); ++i) {
      bind.bind_input(m.kv[i].past, Value(kv->buffer(i)));
      bind.bind_output(m.kv[i].present, kv->buffer(i));
    }
    logits_out = bind.bind_output(c.logits);
    bound_ready = true;
  }
  // New tensors only when the number of new tokens changes (prefill, then 1 per decode step).
  if (ids_t.dim(1) != S) ids_t = Tensor(m.ids_dtype, Dims{1, S});
  fill_ints(ids_t, 0, 0, sequence.data() + past);
  bind.set_input(ids_in, Value(ids_t));
  if (m.has_mask) bind.set_input(mask_in, Value(Tensor(m.mask_dtype, Dims{1, total}, mask_ones.storage())));
  if (m.has_position_ids) {
    if (pos_t.dim(1) != S) pos_t = Tensor(m.pos_dtype, Dims{1, S});
    fill_ints(pos_t, past, 1, nullptr);
    bind.set_input(pos_in, Value(pos_t));
  }
  const double t0 = now_ms();
  Status st = m.session->run(bind);
  const double dt = now_ms() - t0;
  if (!st.ok()) return st;
  stats.last_run_ms = dt;
  stats.total_run_ms += dt;
  stats.runs += 1;
  stats.tokens_run += S;
  const Value& lv = bind.output(logits_out);
  if (!lv.is_tensor()) return runtime_error("logits output '" + c.logits + "' is not a tensor");
  NXRT_RETURN_IF_ERROR(take_logits(lv.tensor(), S));
  kv->set_length(total);
  logits_valid = true;
  return Status::Ok();
}

// `lt` is contiguous: the session materializes views before a caller sees them.
Status Generator::Impl::take_logits(const Tensor& lt, int64_t S) {
  const int64_t V = lt.rank() > 0 ? lt.dim(-1) : 0;
  if (V <= 0 || lt.numel() % V != 0 || (lt.numel() / V) % S != 0) {
    return runtime_error("logits " + lt.describe() + " do not have [.., " + std::to_string(S) + ", vocab] rows");
  }
  logits.resize(static_cast<size_t>(V));
  const int64_t off = lt.numel() - V;
  if (lt.dtype() == DataType::kFloat) {
    std::memcpy(logits.data(), lt.data<float>() + off, static_cast<size_t>(V) * sizeof(float));
  } else if (lt.dtype() == DataType::kFloat16) {
    const uint16_t* h = lt.data<uint16_t>() + off;
    for (int64_t j = 0; j < V; ++j) logits[static_cast<size_t>(j)] = half_to_float(h[j]);
  } else {
    return runtime_error("logits are " + lt.describe() + " (float32 or float16 only)");
  }
  return Status::Ok();
}

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
}

Result<std::unique_ptr<Generator>> Generator::create(const Model& model, const GeneratorParams& params) {
  const Config& c = model.config();
  const SearchOptions& o = params.search;
  int64_t cap = o.max_length > 0 ? o.max_length : c.context_length;
  if (cap <= 0) return invalid_argument("max_length unknown: set it (search options) or model.context_length");
  if (c.context_length > 0 && cap > c.context_length) {
    return invalid_argument("max_length " + std::to_string(cap) + " exceeds model.context_length " +
                            std::to_string(c.context_length));
  }
  if (o.top_k < 0 || o.top_p < 0 || o.top_p > 1 || o.min_p < 0 || o.min_p > 1 || !(o.temperature > 0) ||
      !(o.repetition_penalty > 0)) {
    return invalid_argument("search options out of range (top_k >= 0, 0 <= top_p <= 1, 0 <= min_p <= 1, "
                            "temperature > 0, repetition_penalty > 0)");
  }
  return std::make_unique<Generator>(std::make_unique<Impl>(model, o, cap));
}

Status Generator::append_tokens(const std::vector<int64_t>& ids) {
  Impl& g = *impl_;
  if (ids.empty()) return invalid_argument("append_tokens: no tokens");
  if (static_cast<int64_t>(g.sequence.size() + ids.size()) > g.capacity) {
    return invalid_argument("context overflow: " + std::to_string(g.sequence.size()) + " + " +
                            std::to_string(ids.size()) + " tokens exceed max_length " + std::to_string(g.capacity));
  }
  const int64_t V = g.m.vocab;
  for (int64_t t : ids) {
    if (t < 0 || (V > 0 && t >= V)) {
      return invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary (" + std::to_string(V) + ")");
    }
  }
  const size_t old = g.sequence.size();
  g.sequence.insert(g.sequence.end(), ids.begin(), ids.end());
  g.logits_valid = false;
  Status s = g.run_pending();
  if (!s.ok()) {
    g.sequence.resize(old);
    return s;
  }
  g.done = static_cast<int64_t>(g.sequence.size()) >= g.capacity;
  return Status::Ok();
}

Status Generator::generate_next_token() {
  Impl& g = *impl_;
  if (g.sequence.empty()) return invalid_argument("generate_next_token: call append_tokens first");
  if (is_done()) return invalid_argument("generate_next_token: generation is done (max_length " +
                                         std::to_string(g.capacity) + " reached or EOS)");
  if (!g.logits_valid) NXRT_RETURN_IF_ERROR(g.run_pending());
  g.row.assign(g.logits.begin(), g.logits.end());  // a scratch copy: sampling edits it in place
  const int64_t tok = g.sampler.next(&g.row, g.sequence);
  g.sequence.push_back(tok);
  g.last_token = tok;
  g.logits_valid = false;
  if (g.opts.stop_at_eos) {
    const auto& eos = g.m.config.eos_token_ids;
    if (std::find(eos.begin(), eos.end(), tok) != eos.end()) g.done = true;
  }
  if (static_cast<int64_t>(g.sequence.size()) >= g.capacity) g.done = true;
  return Status::Ok();
}

bool Generator::is_done() const {
  return impl_->done || static_cast<int64_t>(impl_->sequence.size()) >= impl_->capacity;
}

Result<std::vector<float>> Generator::get_logits() {
  Impl& g = *impl_;
  if (!g.logits_valid) NXRT_RETURN_IF_ERROR(g.run_pending());
  return g.logits;
}

Status Generator::rewind_to(size_t length) {
  Impl& g = *impl_;
  if (length > g.sequence.size()) {
    return invalid_argument("rewind_to(" + std::to_string(length) + "): the sequence has only " +
                            std::to_string(g.sequence.size()) + " tokens");
  }
  g.sequence.resize(length);
  // Keep the cache for all but the last token, which is re-run for its logits on the next step.
  const int64_t keep = length == 0 ? 0 : static_cast<int64_t>(length) - 1;
  g.kv->rewind(std::min(keep, g.kv->length()));
  g.m.session->reset_capture();  // the sequence moved back: record the next steady steps afresh
  g.logits_valid = false;
  g.done = false;
  g.last_token = length == 0 ? -1 : g.sequence.back();
  return Status::Ok();
}

const std::vector<int64_t>& Generator::sequence() const { return impl_->sequence; }
int64_t Generator::next_token() const { return impl_->last_token; }
int64_t Generator::max_length() const { return impl_->capacity; }
const Generator::Stats& Generator::stats() const { return impl_->stats; }
const char* Generator::kv_update() const { return impl_->kv->update_mode(); }

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
