#include "genai/kv_cache.h"

#include <algorithm>
#include <cstring>

namespace nxrt::genai {
namespace {

// Axis of the sequence positions in a KV tensor ([rows, H, T, D] or [2, rows, H, T, D]).
int64_t seq_axis(const CacheIo& io) { return io.kind == CacheKind::kCombined ? 3 : 2; }

// The first `keep` positions along the sequence axis of a contiguous KV tensor, as a new tensor.
Tensor slice_positions(const Tensor& t, int64_t axis, int64_t keep) {
  Tensor c = t.contiguous();
  Dims shape = c.shape();
  const int64_t T = shape[static_cast<size_t>(axis)];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < shape.size(); ++d) inner *= shape[d];
  shape[static_cast<size_t>(axis)] = keep;
  Tensor out(c.dtype(), shape);
  const size_t es = dtype_storage_bytes(c.dtype(), 1);
  const auto* src = static_cast<const char*>(c.raw_data());
  auto* dst = static_cast<char*>(out.raw_data());
  for (int64_t o = 0; o < outer; ++o) {
    std::memcpy(dst + static_cast<size_t>(o * keep * inner) * es, src + static_cast<size_t>(o * T * inner) * es,
                static_cast<size_t>(keep * inner) * es);
  }
  return out;
}

}  // namespace

CacheSet::CacheSet(const Model::Impl& m, int64_t rows, int64_t capacity, bool share)
    : m_(m), rows_(rows), capacity_(capacity), share_(share), fixed_(share || m.static_cache) {
  for (const CacheIo& io : m.caches) entries_.push_back({&io, empty_past(io)});
}

Tensor CacheSet::empty_past(const CacheIo& io) const {
  const Config& c = m_.config;
  const int64_t len = fixed_ ? capacity_ : 0;
  switch (io.kind) {
    case CacheKind::kKey:
    case CacheKind::kValue: return Tensor(io.dtype, Dims{rows_, io.heads, len, c.head_size});
    case CacheKind::kCombined: return Tensor(io.dtype, Dims{2, rows_, io.heads, len, c.head_size});
    case CacheKind::kState: {
      Dims d{rows_};
      for (int64_t x : io.state_dims) d.push_back(x);
      return Tensor(io.dtype, d);  // zero-filled: the state before any token
    }
  }
  return Tensor();
}

void CacheSet::add_feeds(std::vector<std::pair<std::string, Value>>* feeds) const {
  for (const Entry& e : entries_) feeds->push_back({e.io->past, Value(e.t)});
}

Status CacheSet::take_presents(std::vector<Value>* outs, size_t first, int64_t length, bool exact) {
  for (size_t i = 0; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    Value& v = (*outs)[first + i];
    if (!v.is_tensor()) return runtime_error("output '" + e.io->present + "' is not a tensor");
    Tensor t = v.tensor();
    Dims want = e.t.shape();
    bool ok = t.dtype() == e.t.dtype() && t.rank() == static_cast<int64_t>(want.size());
    if (ok && e.io->is_kv()) {
      const size_t ax = static_cast<size_t>(seq_axis(*e.io));
      const int64_t got_len = t.shape()[ax];
      want[ax] = exact ? length : std::max(length, got_len);
    }
    ok = ok && t.shape() == want;
    if (!ok) {
      return runtime_error("output '" + e.io->present + "' is " + t.describe() + ", expected " +
                           std::string(dtype_name(e.t.dtype())) + shape_to_string(want) +
                           (e.io->is_kv() ? " (the past grown by the new positions)" : " (the state's shape)"));
    }
    e.t = t.contiguous();
  }
  return Status::Ok();
}

void CacheSet::bind(IoBinding* b) const {
  for (const Entry& e : entries_) {
    b->bind_input(e.io->past, Value(e.t));
    b->bind_output(e.io->present, e.t);
  }
}

Status CacheSet::check_bound(const IoBinding& b, size_t first_output) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Value& v = b.output(first_output + i);
    const Entry& e = entries_[i];
    if (!v.is_tensor() || v.tensor().shape() != e.t.shape() || v.tensor().raw_data() != e.t.raw_data()) {
      return runtime_error("search.past_present_share_buffer: output '" + e.io->present + "' came back as " +
                           (v.is_tensor() ? v.tensor().describe() : std::string("a non-tensor")) + ", not in the " +
                           e.t.describe() + " buffer bound to '" + e.io->past +
                           "': the graph does not write its cache in place (set past_present_share_buffer false)");
    }
  }
  return Status::Ok();
}

int64_t CacheSet::reorder(const std::vector<int64_t>& src, const std::vector<int64_t>& len) {
  int64_t moved = 0;
  for (size_t r = 0; r < src.size(); ++r) moved += src[r] != static_cast<int64_t>(r);
  if (moved == 0) return 0;
  for (Entry& e : entries_) {
    const Dims& s = e.t.shape();
    const size_t es = dtype_storage_bytes(e.t.dtype(), 1);
    auto* base = static_cast<char*>(e.t.raw_data());
    // A row as (blocks) x (block stride, bytes used): KV rows copy the cached positions of every head.
    int64_t blocks, stride, halves = 1, half_stride = 0;
    int64_t pos_elems = 0;  // elements per position (head_size) for KV; 0 for states
    if (e.io->kind == CacheKind::kState) {
      blocks = 1;
      stride = e.t.numel() / rows_;
    } else if (e.io->kind == CacheKind::kCombined) {
      halves = 2;
      half_stride = s[1] * s[2] * s[3] * s[4];
      blocks = s[2];
      stride = s[3] * s[4];
      pos_elems = s[4];
    } else {
      blocks = s[1];
      stride = s[2] * s[3];
      pos_elems = s[3];
    }
    const int64_t row_elems = blocks * stride;
    const size_t row_bytes = static_cast<size_t>(row_elems) * es * static_cast<size_t>(halves);
    if (scratch_.size() < static_cast<size_t>(moved) * row_bytes) scratch_.resize(static_cast<size_t>(moved) * row_bytes);
    const int64_t T = e.io->kind == CacheKind::kState ? 0 : s[static_cast<size_t>(seq_axis(*e.io))];
    auto used = [&](int64_t from) {
      if (!pos_elems) return stride;
      return std::min(T, len[static_cast<size_t>(from)]) * pos_elems;
    };
    // Copy the sources out first (a source may itself be overwritten), then into their new rows.
    for (int pass = 0; pass < 2; ++pass) {
      size_t slot = 0;
      for (size_t r = 0; r < src.size(); ++r) {
        const int64_t from = src[r];
        if (from == static_cast<int64_t>(r)) continue;
        char* sc = scratch_.data() + slot++ * row_bytes;
        const int64_t n = used(from);
        for (int64_t h = 0; h < halves; ++h) {
          for (int64_t b = 0; b < blocks; ++b) {
            const int64_t row = pass == 0 ? from : static_cast<int64_t>(r);
            char* cache = base + static_cast<size_t>(h * half_stride + row * row_elems + b * stride) * es;
            char* tmp = sc + static_cast<size_t>((h * blocks + b) * stride) * es;
            if (pass == 0) std::memcpy(tmp, cache, static_cast<size_t>(n) * es);
            else std::memcpy(cache, tmp, static_cast<size_t>(n) * es);
          }
        }
      }
    }
  }
  return moved;
}

void CacheSet::truncate(int64_t keep) {
  if (fixed_) return;  // positions past a row's length are masked out and overwritten
  for (Entry& e : entries_) {
    if (!e.io->is_kv()) continue;
    const int64_t ax = seq_axis(*e.io);
    if (e.t.dim(ax) > keep) e.t = slice_positions(e.t, ax, keep);
  }
}

void CacheSet::reset() {
  for (Entry& e : entries_) {
    if (fixed_ && e.io->is_kv()) continue;
    e.t = empty_past(*e.io);
  }
}

int64_t CacheSet::past_length() const {
  if (fixed_) return 0;
  for (const Entry& e : entries_) {
    if (e.io->is_kv()) return e.t.dim(seq_axis(*e.io));
  }
  return 0;
}

}  // namespace nxrt::genai
