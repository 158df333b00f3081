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
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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

// The bytes all buffer pools of one session hold together, against the session's memory limit (a
// session keeps one pool per concurrent run). Pools reserve from it atomically.
struct MemoryBudget {
  std::atomic<size_t> limit{0};  // 0 = no limit
  std::atomic<size_t> held{0};
  // Frees the free blocks of pools no run is using (the session's idle run contexts), so a run is not
  // refused for memory that idle pools keep; set before any run, may be empty.
  std::function<void()> reclaim_idle;

  // Runs in flight against this budget, so a run that finds the limit reached can wait for another to
  // end (its blocks become reclaimable) instead of failing while memory is about to come free. Each
  // run calls run_started() before its first buffer and run_ended() after its context is idle again.
  void run_started() { runs_in_flight.fetch_add(1); }
  void run_ended();
  // How many runs have ended so far: read before trying to reserve, so a run that ends between
  // that try and wait_for_a_run_to_end counts.
  uint64_t runs_ended_count() const { return runs_ended.load(); }
  // Returns true once some run has ended since `seen` (at once when one has). False, at once, when no
  // other run could end first: every other run in flight is itself waiting (or there is none), so
  // waiting would be a deadlock; the caller then fails with the limit's error, and its run's end
  // frees its blocks for the waiters.
  bool wait_for_a_run_to_end(uint64_t seen);

 private:
  std::atomic<int> runs_in_flight{0};
  std::atomic<int> runs_waiting{0};
  std::atomic<uint64_t> runs_ended{0};
  std::mutex wait_mu;
  std::condition_variable run_end;
};

class BufferPool {
 public:
  // `budget`: shared with the session's other pools; null: the pool keeps its own.
  explicit BufferPool(MemoryBudget* budget = nullptr);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  // A storage of at least `bytes`. Contents are unspecified (zero when the block is new; with
  // NXRT_POISON_BUFFERS=1 every acquired block is filled with 0xFF bytes, to find kernels that read
  // outputs they did not write). Throws AllocationError when the memory cannot be had or a new block
  // would take the pool past its limit (after it freed its free blocks); the executor turns that
  // into an error naming the node.
  std::shared_ptr<Storage> acquire(size_t bytes);
  // The most bytes the pool (with the others sharing its budget) may hold, in use or free; 0 = no
  // limit. Blocks that callers still hold (outputs they fetched) count until they are dropped.
  void set_limit(size_t bytes) { budget_->limit.store(bytes, std::memory_order_relaxed); }
  size_t limit() const { return budget_->limit.load(std::memory_order_relaxed); }
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
  // Takes `bytes` from the budget; false when that would pass its limit.
  bool reserve(size_t bytes);
  void give_back(size_t bytes);

  std::vector<Block> blocks_;
  uint64_t run_ = 1;
  // This run was refused a block for the limit: its blocks go back to the budget at end_run (not
  // kept for a next run that the same pressure would refuse), for the runs waiting on it.
  bool refused_this_run_ = false;
  bool poison_ = false;
  MemoryBudget own_budget_;
  MemoryBudget* budget_ = &own_budget_;
  size_t held_ = 0;  // sum of this pool's blocks' capacities
  BufferPoolStats stats_;
};

// A byte count as NXRT_MEMORY_LIMIT gives it: digits with an optional K, M, G or T suffix (powers of
// 1024; "KiB"/"KB"/"K" alike), e.g. "512M", "2G", "1048576". Errors name `what`.
Result<size_t> parse_byte_size(const std::string& text, const std::string& what);

// A contiguous tensor of `dtype` and `shape` on a block of `pool` (null, or a string tensor: memory of
// its own), and a contiguous copy of `src` (any strides) made the same way. The error names a shape
// whose size does not fit in memory, or the strided copy's own.
Result<Tensor> pooled_tensor(BufferPool* pool, DataType dtype, const Dims& shape);
Result<Tensor> pooled_copy(BufferPool* pool, const Tensor& src);

}  // namespace nxrt::session
