// The CPU provider's thread pool.
//
// - Persistent workers: num_threads() - 1 of them (the caller is the last thread and takes chunks
//   too). num_threads() is the requested count capped by the CPUs this process may run on
//   (sched_getaffinity); a request <= 0 means "all of them". 1 thread = no worker threads.
// - Idle workers spin, then sleep on a futex: an idle pool uses no CPU. While a session run is in
//   flight (a CallerScope) they spin through its serial stretches (up to ~2 ms), and on for ~100 us
//   after it ends (the next of back-to-back runs), rather than sleep, since waking a sleeper costs the
//   caller a system call.
// - With two threads the caller claims chunks from the front of [0, n) and the worker from the back,
//   so each takes a contiguous part of every loop (the caller the low indices, every time) while the
//   split point still follows their speed. Each side's first claim is fixed by n and the grain
//   (worker_first_claim), so what the worker reads first is known before the loop runs; later claims
//   take a quarter of what is left, or half (Schedule::kStreaming).
// - An idle two-thread worker can fetch ahead: prefetch_when_idle gives it a byte range (the weights a
//   coming loop has it read first) to prefetch into its L2 while it waits.
// - parallel_for called from inside a parallel_for of this pool (or while another thread is using the
//   pool) runs inline on the calling thread: nesting never deadlocks.
// - Several callers at once (concurrent session runs, each inside a CallerScope): while more than one
//   scope is open every parallel_for runs inline on its caller, so N runs use N threads and never
//   the workers as well (no oversubscription); with one scope left the workers serve it again.
#pragma once
#include <cstdint>
#include <functional>

#include "ep/function_ref.h"
#include <memory>

namespace nxrt::ep {

class ThreadPool {
 public:
  // How the requested count becomes num_threads().
  enum class Sizing {
    kCappedByCpus,  // at most the CPUs this process may run on (<= 0: all of them)
    // Exactly as requested (<= 0: all CPUs), even past the CPUs: for tests, so that a 2-CPU machine
    // still runs the 3+-thread code paths (the one-counter chunks, slots past 1, plans for more
    // threads) that users' bigger machines take. Oversubscribed, so for correctness only, not speed.
    // At most kMaxExactThreads (a session refuses more).
    kExact,
  };
  static constexpr int kMaxExactThreads = 256;
  explicit ThreadPool(int num_threads, Sizing sizing = Sizing::kCappedByCpus);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // How a two-thread loop's claims after the first shrink (other pool sizes take equal chunks).
  enum class Schedule {
    // Each claim a quarter of what is left, at least 1/32 of the loop: balances items of uneven cost.
    kGuided,
    // Each claim half of what is left, at least 1/128 of the loop: for items of equal cost that each
    // stream memory once (a decode GEMV's weight panels), where every claim restarts a thread's
    // stream, so fewer, longer claims read faster, and the two threads still meet within a small
    // last claim. The first claims are kGuided's.
    kStreaming,
  };

  // Calls fn(begin, end) over [0, n) split into chunks of at least `grain` items, on all threads;
  // returns when every chunk is done. Runs inline when n <= grain or the pool has one thread.
  void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn,
                    Schedule schedule = Schedule::kGuided);

  // 2-D tiles: [0, rows) x [0, cols) cut into tile_rows x tile_cols tiles (edge tiles smaller); calls
  // fn(r0, r1, c0, c1) once per tile, tiles spread over the threads.
  void parallel_for_2d(int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols,
                       FunctionRef<void(int64_t, int64_t, int64_t, int64_t)> fn);

  // Marks one caller (a session run) in flight for its lifetime; see the header comment.
  class CallerScope {
   public:
    explicit CallerScope(ThreadPool& pool);
    ~CallerScope();
    CallerScope(const CallerScope&) = delete;
    CallerScope& operator=(const CallerScope&) = delete;

   private:
    ThreadPool& pool_;
  };

  // For a pool of `threads` threads: the start of [begin, n), the worker's first claim in a
  // parallel_for(n, grain, ...) (two threads: the last quarter of the range, or the least claim the
  // grain and the range give). n (nothing) when the loop would run inline or the pool has another
  // size, whose workers' first chunks are not fixed.
  static int64_t worker_first_claim(int threads, int64_t n, int64_t grain);

  // Two-thread pools: the worker prefetches [data, data + bytes) into its L2 while it waits for the
  // next parallel_for (a few lines per spin iteration, not counted as spins), resuming between loops
  // until it has fetched it all or a later call replaces it. For the weights the worker streams first
  // in a coming loop (KernelVariant::worker_prefetch): the memory bus works while the caller runs
  // serial code. Prefetches never fault, so the range need not outlive the call (memory freed
  // meanwhile only wastes the reads). Other pool sizes, or nullptr / 0 bytes: nothing (a pending range
  // is dropped).
  void prefetch_when_idle(const void* data, size_t bytes);

  // CPUs this process may run on (sched_getaffinity; at least 1).
  static int available_cpus();

  // Whether the calling thread is currently inside a parallel_for of some pool (a worker or a caller).
  static bool in_parallel_region();

  // The calling thread's slot in [0, num_threads()): inside a parallel_for of this pool, the threads
  // running its chunks have distinct slots (the caller 0, worker i i + 1), and a loop nested in a chunk
  // (which runs inline) keeps its thread's slot. Outside one, and on threads that are not this pool's,
  // 0. Why: a kernel's per-thread scratch is one slot of the workspace its variant declared
  // (num_threads() slots), so two chunks running at once never share scratch. Concurrent session runs
  // each run inline on their own thread with slot 0, each on its own run's workspace.
  int slot() const;

  // Counts since the pool was made, for traces and tests: parallel_for calls handed to the workers (not
  // those run inline), how many of those found a worker asleep and woke it (a system call the caller
  // pays for; see the spin rule in thread_pool.cpp), and how many times a caller slept waiting for a
  // worker to finish its chunk (the worker then pays a wake).
  uint64_t loops_split() const;
  uint64_t worker_wakes() const;
  uint64_t caller_sleeps() const;

 private:
  struct Impl;
  int num_threads_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nxrt::ep
