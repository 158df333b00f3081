// SequenceBatch: independent sequences in the rows of one fixed-capacity KV cache (include/nxrt/genai.h).
//
// Every key/value cache is one [rows, kv_heads, capacity, head_size] buffer; row r's block is contiguous,
// so a run binds the view of the blocks of rows [lowest fed, highest fed] (batch 1 for a single row). Rows sit at their own lengths: a run feeds row r its tokens at positions
// [len_r, len_r + n_r) followed by filler up to the run's width S, and the attention mask is ones over
// [0, len_r + S), so GroupQueryAttention's seqlens_k / TensorScatter's write index put each row's tokens
// at its own length. Filler lands past a row's length, where nothing reads it before it is overwritten.
// A row not fed in a multi-row run gets filler only, written at min(len, capacity - S): when that is
// below its length, the row's tail is forgotten (truncated) rather than written past the capacity.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "genai/model.h"
#include "genai/search.h"
#include "nxrt/genai.h"

namespace nxrt::genai {
namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void put_int(Tensor& t, int64_t i, int64_t v) {
  if (t.dtype() == DataType::kInt64) {
    t.data<int64_t>()[i] = v;
  } else {
    t.data<int32_t>()[i] = static_cast<int32_t>(v);
  }
}

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

struct SequenceBatch::Impl {
  const Model::Impl& m;
  int64_t rows = 0, capacity = 0, vocab = 0;
  std::vector<Tensor> caches;  // per model cache: [rows, heads, capacity, head_size]
  std::vector<std::vector<int64_t>> tokens;
  std::vector<std::vector<float>> last_logits;  // per feed of the last run
  Stats stats;

  Impl(const Model::Impl& mi, int64_t r, int64_t cap) : m(mi), rows(r), capacity(cap), vocab(mi.vocab) {
    for (const CacheIo& io : m.caches) caches.emplace_back(io.dtype, Dims{rows, io.heads, capacity, m.config.head_size});
    tokens.resize(static_cast<size_t>(rows));
  }

  // The view of rows [first, first + n) of a cache buffer.
  Tensor rows_view(const Tensor& t, int64_t first, int64_t n) const {
    const int64_t row_elems = t.dim(1) * t.dim(2) * t.dim(3);
    const size_t offset = dtype_storage_bytes(t.dtype(), static_cast<size_t>(first * row_elems));
    return Tensor(t.dtype(), Dims{n, t.dim(1), t.dim(2), t.dim(3)}, t.storage(), static_cast<int64_t>(offset));
  }

  Status run(const std::vector<RowFeed>& feeds);
};

Status SequenceBatch::Impl::run(const std::vector<RowFeed>& feeds) {
  if (feeds.empty()) return invalid_argument("SequenceBatch::run: no rows to run");
  std::vector<uint8_t> fed(static_cast<size_t>(rows), 0);
  int64_t S = 0, highest = 0, lowest = rows;
  for (const RowFeed& f : feeds) {
    if (f.row < 0 || f.row >= rows) return invalid_argument("SequenceBatch::run: row " + str(f.row) + " outside [0, " + str(rows) + ")");
    if (fed[static_cast<size_t>(f.row)]) return invalid_argument("SequenceBatch::run: row " + str(f.row) + " fed twice");
    fed[static_cast<size_t>(f.row)] = 1;
    if (f.tokens.empty()) return invalid_argument("SequenceBatch::run: row " + str(f.row) + " has no tokens");
    for (int64_t t : f.tokens) {
      if (t < 0 || (vocab > 0 && t >= vocab)) {
        return invalid_argument("token id " + str(t) + " (row " + str(f.row) + ") is outside the vocabulary (" + str(vocab) + ")");
      }
    }
    S = std::max<int64_t>(S, static_cast<int64_t>(f.tokens.size()));
    highest = std::max(highest, f.row);
    lowest = std::min(lowest, f.row);
  }
  // The rows [lowest, highest] run as one batch on the view of their blocks (batch 1 for one row).
  const int64_t first = lowest;
  const int64_t n = highest - lowest + 1;
  for (const RowFeed& f : feeds) {
    const int64_t len = static_cast<int64_t>(tokens[static_cast<size_t>(f.row)].size());
    if (len + S > capacity) {
      return invalid_argument("context overflow: row " + str(f.row) + " holds " + str(len) + " tokens, + " + str(S) +
                              " exceed max_length " + str(capacity));
    }
  }
  // Where each batch row writes (its length; an idle row's possibly lowered to fit the filler).
  std::vector<int64_t> start(static_cast<size_t>(n)), count(static_cast<size_t>(n), 0);
  std::vector<const std::vector<int64_t>*> feed_of(static_cast<size_t>(n), nullptr);
  for (const RowFeed& f : feeds) feed_of[static_cast<size_t>(f.row - first)] = &f.tokens;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t len = static_cast<int64_t>(tokens[static_cast<size_t>(first + b)].size());
    start[static_cast<size_t>(b)] = feed_of[static_cast<size_t>(b)] ? len : std::min(len, capacity - S);
    if (feed_of[static_cast<size_t>(b)]) count[static_cast<size_t>(b)] = static_cast<int64_t>(feed_of[static_cast<size_t>(b)]->size());
  }
  int64_t T = 0;
  for (int64_t b = 0; b < n; ++b) T = std::max(T, start[static_cast<size_t>(b)] + S);
  const Config& c = m.config;
  const int64_t filler = c.pad_token_id >= 0 ? c.pad_token_id : 0;
  Tensor ids(m.ids_dtype, Dims{n, S});
  Tensor pos(m.has_position_ids ? m.pos_dtype : DataType::kInt64, Dims{n, S});
  Tensor mask(m.mask_dtype, Dims{n, T});
  // Where each row's logits are read: its last fed token (an idle row: any position, 0).
  Tensor select(DataType::kInt64, Dims{n, 1});
  for (int64_t b = 0; b < n; ++b) select.data<int64_t>()[b] = std::max<int64_t>(count[static_cast<size_t>(b)] - 1, 0);
  for (int64_t b = 0; b < n; ++b) {
    const std::vector<int64_t>* f = feed_of[static_cast<size_t>(b)];
    const int64_t s0 = start[static_cast<size_t>(b)];
    for (int64_t i = 0; i < S; ++i) {
      put_int(ids, b * S + i, f && i < count[static_cast<size_t>(b)] ? (*f)[static_cast<size_t>(i)] : filler);
      put_int(pos, b * S + i, s0 + i);
    }
    for (int64_t j = 0; j < T; ++j) put_int(mask, b * T + j, j < s0 + S ? 1 : 0);
  }
  IoBinding bind;
  std::vector<Tensor> views;
  views.reserve(m.caches.size());
  bind.bind_input(c.input_ids, Value(ids));
  bind.bind_input(c.attention_mask, Value(mask));
  if (m.has_position_ids) bind.bind_input(c.position_ids, Value(pos));
  if (!m.logits_positions.empty()) bind.bind_input(m.logits_positions, Value(select));
  const size_t logits_out = bind.bind_output(c.logits);
  for (size_t k = 0; k < m.caches.size(); ++k) {
    views.push_back(rows_view(caches[k], first, n));
    const Tensor& view = views.back();
    bind.bind_input(m.caches[k].past, Value(view));
    bind.bind_output(m.caches[k].present, view);
  }
  const double t0 = now_ms();
  NXRT_RETURN_IF_ERROR(m.session->run(bind));
  stats.total_run_ms += now_ms() - t0;
  stats.runs += 1;
  for (size_t k = 0; k < m.caches.size(); ++k) {
    const Value& v = bind.output(logits_out + 1 + k);
    if (!v.is_tensor() || v.tensor().raw_data() != views[k].raw_data()) {
      return runtime_error("SequenceBatch: output '" + m.caches[k].present + "' was not written in place into its bound buffer");
    }
  }
  const Value& lv = bind.output(logits_out);
  if (!lv.is_tensor()) return runtime_error("logits output '" + c.logits + "' is not a tensor");
  const Tensor lt = lv.tensor().contiguous();
  if (lt.rank() != 3 || lt.dim(0) != n || (lt.dim(1) != S && lt.dim(1) != 1) || lt.dim(2) <= 0 ||
      (lt.dtype() != DataType::kFloat && lt.dtype() != DataType::kFloat16)) {
    return runtime_error("logits " + lt.describe() + " are not float32/float16 [" + str(n) + ", " + str(S) + " (or 1), vocab]");
  }
  const int64_t V = lt.dim(2), S1 = lt.dim(1);
  vocab = V;
  last_logits.resize(feeds.size());
  for (size_t i = 0; i < feeds.size(); ++i) {
    const int64_t b = feeds[i].row - first;
    const int64_t last = count[static_cast<size_t>(b)] - 1;
    if (S1 == 1 && last != S - 1 && m.logits_positions.empty()) {
      return not_implemented("logits " + lt.describe() + " hold the last position only, but row " + str(feeds[i].row) +
                             " ends earlier in this run");
    }
    LogitsRow row{const_cast<char*>(static_cast<const char*>(lt.raw_data())) +
                      dtype_storage_bytes(lt.dtype(), static_cast<size_t>((b * S1 + (S1 == 1 ? 0 : last)) * V)),
                  lt.dtype(), V};
    std::vector<float>& out = last_logits[i];
    out.resize(static_cast<size_t>(V));
    for (int64_t j = 0; j < V; ++j) out[static_cast<size_t>(j)] = row.get(j);
  }
  // Commit: fed rows grow, idle rows whose filler overlapped their tail forget it.
  for (int64_t b = 0; b < n; ++b) {
    std::vector<int64_t>& row = tokens[static_cast<size_t>(first + b)];
    if (const std::vector<int64_t>* f = feed_of[static_cast<size_t>(b)]) {
      row.insert(row.end(), f->begin(), f->end());
      stats.positions_run += static_cast<int64_t>(f->size());
    } else if (static_cast<int64_t>(row.size()) > start[static_cast<size_t>(b)]) {
      row.resize(static_cast<size_t>(start[static_cast<size_t>(b)]));
    }
  }
  return Status::Ok();
}

SequenceBatch::SequenceBatch(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SequenceBatch::~SequenceBatch() = default;

Result<std::unique_ptr<SequenceBatch>> SequenceBatch::create(const Model& model, int64_t rows, int64_t max_length) {
  const Model::Impl& m = model.impl();
  const Config& c = m.config;
  if (m.layout != KvLayout::kPerRow || m.has_state || m.has_combined || !m.has_mask || m.has_use_cache_branch) {
    return invalid_argument("SequenceBatch: " + c.decoder_path +
                            " does not keep rows at their own lengths in key/value caches it can update in place "
                            "(it needs GroupQueryAttention or TensorScatter key/value caches and an attention_mask; "
                            "this graph has " + (m.attention_ops.empty() ? std::string("neither") : m.attention_ops) + ")");
  }
  const int64_t cap = max_length > 0 ? max_length : c.context_length;
  if (cap <= 0) return invalid_argument("SequenceBatch: max_length unknown (set it or model.context_length)");
  if (c.context_length > 0 && cap > c.context_length) {
    return invalid_argument("SequenceBatch: max_length " + str(cap) + " exceeds model.context_length " + str(c.context_length));
  }
  if (rows < 1) return invalid_argument("SequenceBatch: rows must be at least 1, got " + str(rows));
  if (static_cast<double>(rows) * static_cast<double>(cap) > 1e9) return invalid_argument("SequenceBatch: rows * max_length is too large");
  return std::make_unique<SequenceBatch>(std::make_unique<Impl>(m, rows, cap));
}

int64_t SequenceBatch::rows() const { return impl_->rows; }
int64_t SequenceBatch::max_length() const { return impl_->capacity; }
int64_t SequenceBatch::vocab_size() const { return impl_->vocab; }
const SequenceBatch::Stats& SequenceBatch::stats() const { return impl_->stats; }

const std::vector<int64_t>& SequenceBatch::row_tokens(int64_t row) const {
  static const std::vector<int64_t> kNone;
  if (row < 0 || row >= impl_->rows) return kNone;
  return impl_->tokens[static_cast<size_t>(row)];
}

Status SequenceBatch::truncate_row(int64_t row, int64_t keep) {
  if (row < 0 || row >= impl_->rows) return invalid_argument("truncate_row: row " + str(row) + " outside [0, " + str(impl_->rows) + ")");
  std::vector<int64_t>& t = impl_->tokens[static_cast<size_t>(row)];
  if (keep < 0 || keep > static_cast<int64_t>(t.size())) {
    return invalid_argument("truncate_row(" + str(row) + ", " + str(keep) + "): the row holds " + str(static_cast<int64_t>(t.size())) + " tokens");
  }
  t.resize(static_cast<size_t>(keep));  // positions past the length are masked out and overwritten
  return Status::Ok();
}

Status SequenceBatch::run(const std::vector<RowFeed>& feeds) { return impl_->run(feeds); }

Status SequenceBatch::logits(size_t feed, std::vector<float>* out) const {
  if (feed >= impl_->last_logits.size()) {
    return invalid_argument("SequenceBatch::logits: feed " + str(static_cast<int64_t>(feed)) + " of a run with " +
                            str(static_cast<int64_t>(impl_->last_logits.size())) + " feeds");
  }
  *out = impl_->last_logits[feed];
  return Status::Ok();
}

// ------------------------------------------------------------------------------------------ TokenPicker
struct TokenPicker::Impl {
  SearchOptions options;
  Sampler sampler;
  explicit Impl(const SearchOptions& o) : options(o), sampler(o) {}
};

TokenPicker::TokenPicker(const SearchOptions& options) : impl_(std::make_unique<Impl>(options)) {}
TokenPicker::~TokenPicker() = default;
TokenPicker::TokenPicker(TokenPicker&&) noexcept = default;
TokenPicker& TokenPicker::operator=(TokenPicker&&) noexcept = default;

int64_t TokenPicker::pick(std::vector<float>* logits, const std::vector<int64_t>& history) {
  apply_repetition_penalty(logits->data(), static_cast<int64_t>(logits->size()), history, impl_->options.repetition_penalty);
  return impl_->sampler.next(LogitsRow{logits->data(), DataType::kFloat, static_cast<int64_t>(logits->size())});
}

}  // namespace nxrt::genai
