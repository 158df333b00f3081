// The CPU provider's thread pool. 1 thread means no worker threads: everything runs on the caller.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>

namespace nxrt::ep {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }
  // Calls fn(begin, end) over [0, n) split into chunks of at least `grain` items, on all threads;
  // returns when every chunk is done. Runs inline when n is small or the pool has one thread.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

 private:
  struct Impl;
  int num_threads_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nxrt::ep
