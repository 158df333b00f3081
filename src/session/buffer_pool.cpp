#include "session/buffer_pool.h"

#include <algorithm>
#include <chrono>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

namespace nxrt::session {

namespace {
// A free block serves a request when it is at most twice as large (plus a page of slack), so small
// tensors do not pin large blocks that a later large tensor of the same run would need.
bool fits(size_t capacity, size_t bytes) { return capacity >= bytes && capacity <= 2 * bytes + 4096; }
}  // namespace

BufferPool::BufferPool(MemoryBudget* budget) : budget_(budget ? budget : &own_budget_) {
  const char* p = std::getenv("NXRT_POISON_BUFFERS");
  poison_ = p && *p && std::string(p) != "0";
  blocks_.reserve(64);
}

// The blocks go when the pool goes (callers may still hold some: those outlive it on their own).
BufferPool::~BufferPool() { give_back(held_); }

bool BufferPool::reserve(size_t bytes) {
  const size_t limit = budget_->limit.load(std::memory_order_relaxed);
  size_t held = budget_->held.load(std::memory_order_relaxed);
  do {
    if (limit > 0 && bytes > limit - std::min(held, limit)) return false;
  } while (!budget_->held.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  held_ += bytes;
  return true;
}

void BufferPool::give_back(size_t bytes) {
  held_ -= bytes;
  budget_->held.fetch_sub(bytes, std::memory_order_relaxed);
}

std::shared_ptr<Storage> BufferPool::acquire(size_t bytes) {
  Block* best = nullptr;
  for (Block& b : blocks_) {
    if (b.storage.use_count() != 1 || !fits(b.capacity, bytes)) continue;
    if (!best || b.capacity < best->capacity) best = &b;
    if (b.capacity == bytes) break;
  }
  if (best) {
    best->last_run = run_;
    ++stats_.reuses;
    // The copy's reference-count increment (acq_rel) reads the release decrement of whoever dropped
    // the block last, possibly on another thread: their reads of it happen before our writes.
    std::shared_ptr<Storage> block = best->storage;
    if (poison_) std::memset(block->data(), 0xFF, best->capacity);
    return block;
  }
  if (!reserve(bytes)) {
    // Free blocks count against the limit: give this pool's back, then those the idle pools keep.
    auto reserve_after_freeing = [&] {
      trim();
      if (reserve(bytes)) return true;
      if (!budget_->reclaim_idle) return false;
      budget_->reclaim_idle();
      return reserve(bytes);
    };
    uint64_t ends_seen = budget_->runs_ended_count();
    bool ok = reserve_after_freeing();
    // Other runs in flight hold the rest: each that ends makes its blocks reclaimable (an idle
    // context's pool, or a refused run's, which end_run gives back), so wait for one rather than
    // fail a run that would fit once they are done.
    while (!ok && budget_->wait_for_a_run_to_end(ends_seen)) {
      ends_seen = budget_->runs_ended_count();
      ok = reserve_after_freeing();
    }
    if (!ok) {
      refused_this_run_ = true;
      throw AllocationError("memory limit exceeded: a new buffer of " + std::to_string(bytes) +
                            " bytes would take the session's buffers from " +
                            std::to_string(budget_->held.load(std::memory_order_relaxed)) +
                            " bytes past its limit of " + std::to_string(limit()) +
                            " (SessionOptions::memory_limit / NXRT_MEMORY_LIMIT)");
    }
  }
  Block b;
  try {
    b.storage = Storage::allocate(bytes);
  } catch (...) {
    give_back(bytes);
    throw;
  }
  b.storage->mark_pooled();
  b.capacity = bytes;
  b.last_run = run_;
  ++stats_.allocations;
  if (poison_) std::memset(b.storage->data(), 0xFF, bytes);
  blocks_.push_back(std::move(b));
  return blocks_.back().storage;
}

void BufferPool::end_run() {
  if (refused_this_run_) {
    refused_this_run_ = false;
    trim();
  }
  size_t keep = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    if (b.last_run != run_ && b.storage.use_count() == 1) {
      ++stats_.trimmed;
      give_back(b.capacity);
      continue;
    }
    if (keep != i) blocks_[keep] = std::move(b);
    ++keep;
  }
  blocks_.resize(keep);
  ++run_;
}

void BufferPool::trim() {
  size_t keep = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    if (blocks_[i].storage.use_count() == 1) {
      ++stats_.trimmed;
      give_back(blocks_[i].capacity);
      continue;
    }
    if (keep != i) blocks_[keep] = std::move(blocks_[i]);
    ++keep;
  }
  blocks_.resize(keep);
}

void MemoryBudget::run_ended() {
  runs_ended.fetch_add(1);
  runs_in_flight.fetch_sub(1);
  // Sequentially consistent with the waiter's increment of runs_waiting and its read of runs_ended:
  // either this sees the waiter and wakes it, or the waiter sees this end and does not sleep.
  if (runs_waiting.load() > 0) {
    { std::lock_guard<std::mutex> lock(wait_mu); }
    run_end.notify_all();
  }
}

bool MemoryBudget::wait_for_a_run_to_end(uint64_t seen) {
  std::unique_lock<std::mutex> lock(wait_mu);
  if (runs_ended.load() != seen) return true;
  if (runs_waiting.load() + 1 >= runs_in_flight.load()) return false;
  runs_waiting.fetch_add(1);
  // The deadlock rule above makes an endless wait impossible while runs keep their promise to call
  // run_ended; the bound is a backstop against one that does not, so a run fails rather than hangs.
  const bool ended = run_end.wait_for(lock, std::chrono::seconds(30), [&] { return runs_ended.load() != seen; });
  runs_waiting.fetch_sub(1);
  return ended;
}

BufferPoolStats BufferPool::stats() const {
  BufferPoolStats s = stats_;
  s.blocks = blocks_.size();
  s.bytes = held_;
  return s;
}

Result<size_t> parse_byte_size(const std::string& text, const std::string& what) {
  size_t i = 0;
  uint64_t v = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (__builtin_mul_overflow(v, uint64_t{10}, &v) || __builtin_add_overflow(v, uint64_t(text[i] - '0'), &v)) {
      return invalid_argument(what + "='" + text + "' is too large");
    }
    ++i;
  }
  std::string unit = text.substr(i);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit.empty() || unit == "B") shift = 0;
  for (const auto& [prefix, s] : {std::pair<char, int>{'K', 10}, {'M', 20}, {'G', 30}, {'T', 40}}) {
    if (unit == std::string(1, prefix) || unit == std::string(1, prefix) + "B" || unit == std::string(1, prefix) + "IB") {
      shift = s;
    }
  }
  if (i == 0 || shift < 0) {
    return invalid_argument(what + "='" + text + "' is not a byte count (digits and an optional K, M, G or T)");
  }
  if (shift > 0 && v > (UINT64_MAX >> shift)) return invalid_argument(what + "='" + text + "' is too large");
  return static_cast<size_t>(v << shift);
}

Result<Tensor> pooled_tensor(BufferPool* pool, DataType dtype, const Dims& shape) {
  if (!pool || dtype == DataType::kString) return Tensor(dtype, shape);
  size_t bytes = 0;
  if (!shape_storage_bytes(dtype, shape, &bytes)) {
    return invalid_argument(std::string("cannot allocate ") + dtype_name(dtype) + shape_to_string(shape) +
                            ": its size does not fit in memory");
  }
  return Tensor(dtype, shape, pool->acquire(bytes));
}

Result<Tensor> pooled_copy(BufferPool* pool, const Tensor& src) {
  if (!pool || src.dtype() == DataType::kString) return src.contiguous(true);
  NXRT_ASSIGN_OR_RETURN(Tensor dst, pooled_tensor(pool, src.dtype(), src.shape()));
  NXRT_RETURN_IF_ERROR(copy_tensor_into(src, dst));
  return dst;
}

}  // namespace nxrt::session
