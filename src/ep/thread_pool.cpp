#include "ep/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace nxrt::ep {

// Persistent workers woken per parallel_for; the caller takes chunks too. Chunks are claimed from an
// atomic counter so uneven work balances itself.
struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex mu;
  std::condition_variable wake;
  std::condition_variable done_cv;
  uint64_t generation = 0;
  bool stop = false;

  // Current job.
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  std::atomic<int64_t> next{0};
  int active = 0;

  void run_chunks() {
    for (;;) {
      int64_t b = next.fetch_add(chunk);
      if (b >= n) break;
      (*fn)(b, std::min(n, b + chunk));
    }
  }

  void worker_loop() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu);
        wake.wait(lk, [&] { return stop || generation != seen; });
        if (stop) return;
        seen = generation;
      }
      run_chunks();
      {
        std::lock_guard<std::mutex> lk(mu);
        if (--active == 0) done_cv.notify_one();
      }
    }
  }
};

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)), impl_(std::make_unique<Impl>()) {
  for (int i = 1; i < num_threads_; ++i) impl_->workers.emplace_back([this] { impl_->worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->wake.notify_all();
  for (auto& t : impl_->workers) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  Impl& im = *impl_;
  int64_t chunks_wanted = static_cast<int64_t>(num_threads_) * 4;
  int64_t chunk = std::max(grain, (n + chunks_wanted - 1) / chunks_wanted);
  {
    std::lock_guard<std::mutex> lk(im.mu);
    im.fn = &fn;
    im.n = n;
    im.chunk = chunk;
    im.next.store(0);
    im.active = static_cast<int>(im.workers.size());
    ++im.generation;
  }
  im.wake.notify_all();
  im.run_chunks();
  std::unique_lock<std::mutex> lk(im.mu);
  im.done_cv.wait(lk, [&] { return im.active == 0; });
  im.fn = nullptr;
}

}  // namespace nxrt::ep
