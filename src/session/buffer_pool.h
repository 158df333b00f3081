// BufferPool: the memory that node outputs live in, reused within a run and across runs.
//
// Every block the pool hands out stays in the pool. A block is free when nothing but the pool refers
// to it (use_count() == 1): its last tensor died, was released after its last use, or the caller
// dropped the output it fetched. acquire() returns the smallest free block that fits and is not
// wastefully large, so a run with the same shapes as the last one walks the same blocks in the same
// order: the same addresses, and no heap allocation at all. end_run() returns blocks that a whole run
// did not touch to the system, so a stream of changing shapes (new prompt lengths) cannot grow memory
// without limit: what stays is what the most recent run needed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nxrt/status.h"
#include "ir/allocation.h"
#include "nxrt/tensor.h"

namespace nxrt::session {

struct BufferPoolStats {
  size_t blocks = 0;          // blocks held (in use or free)
  size_t bytes = 0;           // bytes held
  uint64_t allocations = 0;   // blocks ever obtained from the system
  uint64_t reuses = 0;        // acquires served by an existing block
  uint64_t trimmed = 0;       // blocks returned to the system by end_run
};

class BufferPool {
 public:
  BufferPool();
  // A storage of at least `bytes`. Contents are unspecified (zero when the block is new; with
  // NXRT_POISON_BUFFERS=1 every acquired block is filled with 0xFF bytes, to find kernels that read
  // outputs they did not write). Throws AllocationError when the memory cannot be had or a new block
  // would take the pool past its limit (after it freed its free blocks); the executor turns that
  // into an error naming the node.
  std::shared_ptr<Storage> acquire(size_t bytes);
  // The most bytes the pool may hold (in use or free); 0 = no limit. Blocks that callers still hold
  // (outputs they fetched) count until they are dropped.
  void set_limit(size_t bytes) { limit_ = bytes; }
  size_t limit() const { return limit_; }
  // Marks a run boundary: frees blocks that were not acquired since the previous call.
  void end_run();
  // Frees every free block.
  void trim();
  BufferPoolStats stats() const;

 private:
  struct Block {
    std::shared_ptr<Storage> storage;
    size_t capacity = 0;
    uint64_t last_run = 0;
  };
  std::vector<Block> blocks_;
  uint64_t run_ = 1;
  bool poison_ = false;
  size_t limit_ = 0;
  size_t held_ = 0;  // sum of the blocks' capacities
  BufferPoolStats stats_;
};

// A byte count as NXRT_MEMORY_LIMIT gives it: digits with an optional K, M, G or T suffix (powers of
// 1024; "KiB"/"KB"/"K" alike), e.g. "512M", "2G", "1048576". Errors name `what`.
Result<size_t> parse_byte_size(const std::string& text, const std::string& what);

}  // namespace nxrt::session
