#include "session/buffer_pool.h"

#include <cstdlib>
#include <cstring>
#include <string>

namespace nxrt::session {

namespace {
// A free block serves a request when it is at most twice as large (plus a page of slack), so small
// tensors do not pin large blocks that a later large tensor of the same run would need.
bool fits(size_t capacity, size_t bytes) { return capacity >= bytes && capacity <= 2 * bytes + 4096; }
}  // namespace

BufferPool::BufferPool() {
  const char* p = std::getenv("NXRT_POISON_BUFFERS");
  poison_ = p && *p && std::string(p) != "0";
  blocks_.reserve(64);
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
    if (poison_) std::memset(best->storage->data(), 0xFF, best->capacity);
    return best->storage;
  }
  Block b;
  b.storage = Storage::allocate(bytes);
  b.storage->mark_pooled();
  b.capacity = bytes;
  b.last_run = run_;
  ++stats_.allocations;
  if (poison_) std::memset(b.storage->data(), 0xFF, bytes);
  blocks_.push_back(std::move(b));
  return blocks_.back().storage;
}

void BufferPool::end_run() {
  size_t keep = 0;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    Block& b = blocks_[i];
    if (b.last_run != run_ && b.storage.use_count() == 1) {
      ++stats_.trimmed;
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
      continue;
    }
    if (keep != i) blocks_[keep] = std::move(blocks_[i]);
    ++keep;
  }
  blocks_.resize(keep);
}

BufferPoolStats BufferPool::stats() const {
  BufferPoolStats s = stats_;
  s.blocks = blocks_.size();
  s.bytes = 0;
  for (const Block& b : blocks_) s.bytes += b.capacity;
  return s;
}

}  // namespace nxrt::session
