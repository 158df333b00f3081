// PackedBytes and the huge-page arena it allocates from (see packed_storage.h for why).
#include "ops/packed_storage.h"

#include "ir/page_mapping.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace nxrt::ops {

namespace {

constexpr size_t kHugePage = ir::kHugePageBytes;
// Buffers up to kArenaMaxBytes come out of the arena's shared chunks; larger ones (a vocabulary-sized
// lm_head) get a mapping of their own.
constexpr size_t kArenaChunkBytes = size_t{32} << 20;
constexpr size_t kArenaMaxBytes = size_t{16} << 20;

// A 2 MB-aligned zero-filled mapping of len bytes (a multiple of 2 MB) on transparent huge pages. Always
// marked (unlike Storage's folded weights, which ask ir::free_huge_pages_cover first): packed weights are
// read on every run (a decode step streams them all), so their 2 MB pages keep paying after any
// one-time compaction at creation.
uint8_t* map_huge_pages(size_t len) { return static_cast<uint8_t*>(ir::map_zeroed_aligned(len, true)); }

}  // namespace

// A model's packed weights come as many buffers of 0.1-6 MB (a decoder layer's projections). Each in a
// mapping of its own rounded up to 2 MB, the last huge page of every one was backed whole: 45 MB over
// a Qwen2.5-0.5B-shape model's 309 MB of records; and the buffers under 2 MB (its q/k/v and o
// projections) sat on 4 KB pages, a TLB miss per 4 KB of a decode step's stream (those products ran
// 8-10% slower per call than on huge pages). The arena hands buffers out back to back (64-byte
// aligned) from shared 32 MB chunks of huge pages. Space in a chunk is never handed out twice, so
// every buffer is fresh zero-filled memory; a chunk is unmapped when the last of its buffers is
// released (the chunk being filled too, so nothing outlives its buffers).
struct PackedArenaChunk {
  uint8_t* base = nullptr;
  size_t len = 0, used = 0;
  int64_t live = 0;  // buffers handed out and not released
};

namespace {

class PackedArena {
 public:
  static PackedArena& instance() {
    static PackedArena* arena = new PackedArena;  // never destroyed: static buffers may outlive it
    return *arena;
  }
  // bytes (64-byte aligned) of zero-filled memory and the chunk it is in; nullptr when no chunk can be
  // mapped.
  uint8_t* allocate(size_t bytes, PackedArenaChunk** chunk) {
#if defined(__linux__)
    const size_t rounded = (bytes + 63) / 64 * 64;
    std::lock_guard<std::mutex> lk(mu_);
    if (!current_ || current_->used + rounded > current_->len) {
      uint8_t* base = map_huge_pages(kArenaChunkBytes);
      if (!base) return nullptr;
      current_ = new PackedArenaChunk{base, kArenaChunkBytes, 0, 0};  // (a full one stays until its last release)
    }
    uint8_t* p = current_->base + current_->used;
    current_->used += rounded;
    ++current_->live;
    *chunk = current_;
    return p;
#else
    (void)bytes;
    (void)chunk;
    return nullptr;
#endif
  }
  void release(PackedArenaChunk* c) {
    std::lock_guard<std::mutex> lk(mu_);
    if (--c->live > 0) return;
    if (c == current_) current_ = nullptr;
    unmap(c);
  }

 private:
  static void unmap(PackedArenaChunk* c) {
#if defined(__linux__)
    munmap(c->base, c->len);
#endif
    delete c;
  }
  std::mutex mu_;
  PackedArenaChunk* current_ = nullptr;
};

}  // namespace

namespace {

// Heap bytes handed to small_first buffers so far (never given back: a budget, not a count of live bytes).
std::atomic<size_t> g_small_first_bytes{0};

// Whether a small_first buffer of `bytes` still fits the budget (and takes its share of it if so).
bool take_small_first_share(size_t bytes) {
  size_t used = g_small_first_bytes.load(std::memory_order_relaxed);
  do {
    if (bytes > PackedBytes::kSmallFirstBytes - std::min(used, PackedBytes::kSmallFirstBytes)) return false;
  } while (!g_small_first_bytes.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return true;
}

}  // namespace

PackedBytes::PackedBytes(size_t bytes, bool small_first) : n_(bytes) {
  if (bytes == 0) return;
#if defined(__linux__)
  if (small_first && take_small_first_share(bytes)) {
    // the heap, below
  } else if (bytes <= kArenaMaxBytes) {
    p_ = PackedArena::instance().allocate(bytes, &chunk_);
    if (p_) return;
  } else {
    const size_t len = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    p_ = map_huge_pages(len);
    if (p_) {
      mapped_ = len;
      return;
    }
  }
#endif
  const size_t rounded = (bytes + 63) / 64 * 64;
  p_ = static_cast<uint8_t*>(std::aligned_alloc(64, rounded));
  if (!p_) throw std::bad_alloc();
  std::memset(p_, 0, rounded);
}

void PackedBytes::release() {
  if (!p_) return;
  if (chunk_) {
    PackedArena::instance().release(chunk_);
  } else if (mapped_) {
#if defined(__linux__)
    munmap(p_, mapped_);
#endif
  } else {
    std::free(p_);
  }
  p_ = nullptr;
  chunk_ = nullptr;
  n_ = mapped_ = 0;
}

PackedBytes::~PackedBytes() { release(); }
PackedBytes::PackedBytes(PackedBytes&& o) noexcept : p_(o.p_), n_(o.n_), mapped_(o.mapped_), chunk_(o.chunk_) {
  o.p_ = nullptr;
  o.chunk_ = nullptr;
  o.n_ = o.mapped_ = 0;
}
PackedBytes& PackedBytes::operator=(PackedBytes&& o) noexcept {
  if (this != &o) {
    release();
    p_ = o.p_;
    n_ = o.n_;
    mapped_ = o.mapped_;
    chunk_ = o.chunk_;
    o.p_ = nullptr;
    o.chunk_ = nullptr;
    o.n_ = o.mapped_ = 0;
  }
  return *this;
}

}  // namespace nxrt::ops
