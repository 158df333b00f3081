#include "ep/thread_pool.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NXRT_CPU_RELAX() _mm_pause()
#define NXRT_PREFETCH_L2(p) _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1)
#else
#define NXRT_CPU_RELAX() std::atomic_signal_fence(std::memory_order_seq_cst)
#define NXRT_PREFETCH_L2(p) __builtin_prefetch((p), 0, 2)
#endif

namespace nxrt::ep {

namespace {

// How long a waiting thread spins before it sleeps on the futex. kIdleSpins pauses (each ~20-40 ns)
// catch back-to-back parallel_for calls and an idle pool then sleeps. But waking a sleeper is not free
// for the thread that wakes it: the futex_wake system call sends an inter-processor interrupt, and on
// the Zen 5 VM it took the caller 21 us (median; 1.25 us for a call that wakes nobody), longer than many
// of a CNN's split loops run. So a worker serving a session run (one CallerScope open) spins on through
// the run's serial stretches, up to kInRunSpinUs more, past which a wake costs at most ~1% of the wait.
// The keyword-spotting CNN at 2 threads on that VM was woken twice a run without it (its first pool and
// its first split conv after ~110 us of one-thread convs).
constexpr int kIdleSpins = 4000;
constexpr double kInRunSpinUs = 2000;
// How long after a run ends a worker still spins (about kIdleSpins' time, counted from the run's end
// rather than from the worker's last loop): a session run in a loop (a benchmark, a generator's steps)
// starts its next run within it.
constexpr double kRunGapSpinUs = 100;
// Pause instructions between looks at the clock in the in-run spin.
constexpr uint32_t kSpinClockEvery = 64;
// Two threads claim at least 1/kTwoEndedMinParts of a loop at a time (see Impl::two_ended), or
// 1/kStreamingMinParts under Schedule::kStreaming: its claims halve what is left, so they reach the
// least claim in a few steps and the two threads then meet within one of it. A decode step's LM head
// (4748 panels of 18 KB on the Zen 5 VM) ended with 149-panel claims at 1/32, and its worker sat idle
// ~22 us a step (traced median) while the caller read its last one; at 1/128 decode steps ran 0.47%
// faster at 2 threads (steps alternating in one process, median of 9 processes, 8 of them faster).
constexpr int64_t kTwoEndedMinParts = 32;
constexpr int64_t kStreamingMinParts = 128;
// A two-thread loop's claims under a schedule (see Impl::two_ended): each side's first claim
// first_take, later ones (what is left) / take_divisor but at least min_take items. parallel_for claims
// by them and worker_first_claim predicts by them; first_take is the same for either schedule
// (worker_first_claim is not told which).
struct TwoEndedTakes {
  int64_t min_take, first_take, take_divisor;
};
TwoEndedTakes two_ended_takes(int64_t n, int64_t grain, ThreadPool::Schedule schedule = ThreadPool::Schedule::kGuided) {
  auto least = [&](int64_t parts) { return std::max(grain, (n + parts - 1) / parts); };
  const bool streaming = schedule == ThreadPool::Schedule::kStreaming;
  return {least(streaming ? kStreamingMinParts : kTwoEndedMinParts), std::max(least(kTwoEndedMinParts), n / 4),
          streaming ? 2 : 4};
}
// Cache lines an idle worker prefetches per spin iteration from a prefetch_when_idle range.
constexpr size_t kIdlePrefetchLines = 4;

thread_local int tl_parallel_depth = 0;
// The pool whose slot tl_slot is (a worker's own pool, or the pool a caller is driving), see slot().
thread_local const void* tl_slot_pool = nullptr;
thread_local int tl_slot = 0;

// A caller driving a job of `pool` takes slot 0 for it, and restores what it had (it may be a worker of
// another pool, or a caller of this one higher up) afterwards.
struct SlotGuard {
  const void* saved_pool;
  int saved_slot;
  explicit SlotGuard(const void* pool) : saved_pool(tl_slot_pool), saved_slot(tl_slot) {
    tl_slot_pool = pool;
    tl_slot = 0;
  }
  ~SlotGuard() {
    tl_slot_pool = saved_pool;
    tl_slot = saved_slot;
  }
};

struct DepthGuard {
  DepthGuard() { ++tl_parallel_depth; }
  ~DepthGuard() { --tl_parallel_depth; }
};

void futex_wait(std::atomic<uint32_t>* addr, uint32_t expected) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* addr, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(addr), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr, 0);
}

}  // namespace

// One job at a time: the caller publishes it (`open`) and bumps `gen`; a worker that sees the new
// generation registers in `active`, and runs chunks claimed from the atomic `next` counter only if the
// job is still open. When the caller has run out of chunks it closes the job and waits for the
// registered workers alone, so a worker that is asleep or descheduled (an oversubscribed machine) never
// holds the caller up: the caller does the work instead of waiting for that worker to be scheduled.
// The job's fields (and the caller's fn) outlive every registered worker's use of them; a worker that
// registers after the close sees `open` false and touches nothing.
struct ThreadPool::Impl {
  std::vector<std::thread> workers;
  std::mutex call_mu;  // one caller at a time; a second concurrent caller runs inline
  // Open CallerScopes (session runs in flight). Above one, every caller runs its loops inline: the
  // runs then each compute on their own thread, rather than one of them driving the workers while the
  // others' threads compete with those workers for the cores (a pooled loop whose worker was
  // preempted holding a chunk waits for it), and idle workers stop spinning.
  alignas(64) std::atomic<int> callers{0};

  alignas(64) std::atomic<uint32_t> gen{0};
  std::atomic<uint32_t> sleepers{0};
  std::atomic<bool> stop{false};
  alignas(64) std::atomic<uint32_t> active{0};  // workers registered for the current job
  std::atomic<bool> open{false};
  std::atomic<uint32_t> caller_sleeping{0};
  // Counts (written by the caller holding call_mu, read by anyone): loops handed to the workers, the
  // futex wakes they took, and the caller's sleeps waiting for them (see loops_split etc.).
  std::atomic<uint64_t> loops_split{0};
  std::atomic<uint64_t> worker_wakes{0};
  std::atomic<uint64_t> caller_sleeps{0};
  // When the last session run ended (steady clock, ns; CallerScope's destructor).
  std::atomic<int64_t> last_run_end_ns{INT64_MIN / 2};

  using Clock = std::chrono::steady_clock;
  static int64_t ns_of(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  // Whether a worker that has spun its kIdleSpins and then on since spin_start spins on at `now`:
  // while one run is in flight, up to kInRunSpinUs from spin_start; with none, until kRunGapSpinUs
  // after the last one ended (the next of back-to-back runs starts within it); never beside several.
  bool keep_spinning(Clock::time_point spin_start, Clock::time_point now) const {
    const int runs = callers.load(std::memory_order_relaxed);
    if (runs > 1 || now - spin_start >= std::chrono::duration<double, std::micro>(kInRunSpinUs)) return false;
    return runs == 1 ||
           ns_of(now) - last_run_end_ns.load(std::memory_order_relaxed) < static_cast<int64_t>(kRunGapSpinUs * 1e3);
  }
  // The counters above have one writer at a time (the caller holding call_mu): a relaxed load and store.
  static void count(std::atomic<uint64_t>& c) { c.store(c.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed); }

  // Current job.
  alignas(64) const FunctionRef<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0;
  int64_t chunk = 1;
  alignas(64) std::atomic<int64_t> next{0};

  // Two threads: the range is claimed from both ends, the caller from the front, the worker from the
  // back (front position in the low 32 bits, back in the high). Each thread then works on a contiguous
  // part of every loop, and the same part loop after loop (the caller the low indices): consecutive ops
  // that split their data alike (planes of a conv's output, then of the pool reading it) find their part
  // in their own core's cache, and a GEMV streams one contiguous run of weights per thread. With chunks
  // claimed in turn from one counter, each thread's chunks interleaved with the other's. Zen 5 (2 vCPUs),
  // in-process paired runs in both orders: SqueezeNet -5%, ResNet-50 -2.7%, Inception-v2 -1.4%,
  // Qwen2.5-0.5B-shape decode step -9%. More threads keep the one counter.
  // Each claim takes a quarter of what is left, at least min_take items (the grain, and 1/32 of the
  // range): big claims first, small ones where the two threads meet, so the one that finishes first
  // waits for at most a small claim. (Eight equal chunks before: the caller spent ~7% of a 2-thread decode
  // step waiting in parallel_for. Alternated processes, 2 threads: SqueezeNet 0.976 of the time, 8 of 8
  // rounds faster; Inception-v2 0.987, ResNet-50 0.995, decode step 0.985; 1/16 of the range as good,
  // 1/64 worse.)
  // A thread's first claim is a quarter of the whole range (at least min_take) whatever the other
  // has taken: the worker's first part of a loop is then known beforehand (worker_first_claim), and
  // prefetch_when_idle can have it read that part while it waits.
  bool two_ended = false;
  int64_t min_take = 1;
  int64_t first_take = 1;
  int64_t take_divisor = 4;  // a later claim takes (what is left) / this (Schedule)
  alignas(64) std::atomic<uint64_t> ends{0};

  // The range an idle worker prefetches (prefetch_when_idle), under a sequence lock: odd while the
  // caller rewrites it. Prefetches never fault, so a range whose memory went away costs only the
  // wasted reads.
  alignas(64) std::atomic<uint32_t> idle_seq{0};
  std::atomic<const char*> idle_data{nullptr};
  std::atomic<size_t> idle_bytes{0};

  // A worker's progress through the idle range.
  struct ReadAhead {
    uint32_t seq = 0;
    const char* data = nullptr;
    size_t bytes = 0, done = 0;
  };
  // Prefetches the next few lines of the idle range; false when there is nothing left to read.
  bool read_ahead(ReadAhead& ra) {
    const uint32_t s = idle_seq.load(std::memory_order_acquire);
    if (s != ra.seq && (s & 1) == 0) {
      const char* d = idle_data.load(std::memory_order_relaxed);
      const size_t n = idle_bytes.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (idle_seq.load(std::memory_order_relaxed) == s) {
        ra = {s, d, n, 0};
      }
    }
    if (ra.done >= ra.bytes) return false;
    for (size_t l = 0; l < kIdlePrefetchLines && ra.done < ra.bytes; ++l, ra.done += 64) NXRT_PREFETCH_L2(ra.data + ra.done);
    return true;
  }

  void run_chunks(bool from_back = false) {
    DepthGuard depth;
    if (two_ended) {
      bool first = true;
      for (;;) {
        uint64_t e = ends.load(std::memory_order_relaxed);
        uint64_t want;
        int64_t lo, hi;
        do {
          const int64_t f = static_cast<int64_t>(e & 0xffffffffu), b = static_cast<int64_t>(e >> 32);
          if (f >= b) return;
          const int64_t take = std::min(b - f, first ? first_take : std::max(min_take, (b - f) / take_divisor));
          lo = from_back ? b - take : f;
          hi = from_back ? b : f + take;
          want = from_back ? (static_cast<uint64_t>(f) | (static_cast<uint64_t>(lo) << 32))
                           : (static_cast<uint64_t>(hi) | (static_cast<uint64_t>(b) << 32));
        } while (!ends.compare_exchange_weak(e, want, std::memory_order_relaxed));
        first = false;
        (*fn)(lo, hi);
      }
    }
    for (;;) {
      const int64_t b = next.fetch_add(chunk, std::memory_order_relaxed);
      if (b >= n) break;
      (*fn)(b, std::min(n, b + chunk));
    }
  }

  void worker_loop(const ThreadPool* pool, int slot) {
    tl_slot_pool = pool;
    tl_slot = slot;
    uint32_t seen = 0;
    ReadAhead ra;
    for (;;) {
      uint32_t g = gen.load(std::memory_order_acquire);
      // Spins kIdleSpins pauses (prefetching the idle range between them, not counted), then on while
      // keep_spinning says so (a run in flight or just ended), then sleeps.
      for (int i = 0; g == seen && i < kIdleSpins && callers.load(std::memory_order_relaxed) <= 1;) {
        if (!read_ahead(ra)) {
          NXRT_CPU_RELAX();
          ++i;
        }
        g = gen.load(std::memory_order_acquire);
      }
      if (g == seen) {
        const Clock::time_point spin_start = Clock::now();
        for (uint32_t i = 0; g == seen; ++i) {
          if (i % kSpinClockEvery == 0 && !keep_spinning(spin_start, Clock::now())) break;
          if (!read_ahead(ra)) NXRT_CPU_RELAX();
          g = gen.load(std::memory_order_acquire);
        }
      }
      while (g == seen) {
        sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (gen.load(std::memory_order_seq_cst) == seen) futex_wait(&gen, seen);
        sleepers.fetch_sub(1, std::memory_order_seq_cst);
        g = gen.load(std::memory_order_acquire);
      }
      seen = g;
      if (stop.load(std::memory_order_acquire)) return;
      active.fetch_add(1, std::memory_order_seq_cst);
      if (open.load(std::memory_order_seq_cst)) run_chunks(/*from_back=*/true);
      if (active.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
          caller_sleeping.load(std::memory_order_seq_cst) != 0) {
        futex_wake(&active, 1);
      }
    }
  }

  // Called once the caller's run_chunks found no chunk left: closes the job, then waits for the
  // workers that registered before the close (each finishes the chunk it holds, if any).
  void wait_done() {
    open.store(false, std::memory_order_seq_cst);
    uint32_t p = active.load(std::memory_order_seq_cst);
    for (int i = 0; p != 0 && i < kIdleSpins; ++i) {
      NXRT_CPU_RELAX();
      p = active.load(std::memory_order_seq_cst);
    }
    // Then on, up to kInRunSpinUs: a sleeping caller costs the loop the worker's futex_wake (a system
    // call it makes on finishing its chunk) and the caller's own wake-up.
    if (p != 0) {
      const Clock::time_point spin_start = Clock::now();
      for (uint32_t i = 1; p != 0; ++i) {
        NXRT_CPU_RELAX();
        p = active.load(std::memory_order_seq_cst);
        if (i % kSpinClockEvery == 0 && Clock::now() - spin_start > std::chrono::duration<double, std::micro>(kInRunSpinUs)) break;
      }
    }
    if (p == 0) return;
    count(caller_sleeps);
    caller_sleeping.store(1, std::memory_order_seq_cst);
    while ((p = active.load(std::memory_order_seq_cst)) != 0) futex_wait(&active, p);
    caller_sleeping.store(0, std::memory_order_relaxed);
  }
};

int ThreadPool::available_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int c = CPU_COUNT(&set);
    if (c > 0) return c;
  }
  const unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

bool ThreadPool::in_parallel_region() { return tl_parallel_depth > 0; }

int ThreadPool::slot() const { return tl_slot_pool == this ? tl_slot : 0; }

ThreadPool::ThreadPool(int num_threads, Sizing sizing) : num_threads_(1), impl_(std::make_unique<Impl>()) {
  const int avail = available_cpus();
  num_threads_ = num_threads <= 0             ? avail
                 : sizing == Sizing::kExact ? std::min(num_threads, kMaxExactThreads)
                                            : std::max(1, std::min(num_threads, avail));
  for (int i = 1; i < num_threads_; ++i) impl_->workers.emplace_back([this, i] { impl_->worker_loop(this, i); });
}

ThreadPool::~ThreadPool() {
  if (impl_->workers.empty()) return;
  impl_->stop.store(true, std::memory_order_release);
  impl_->gen.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&impl_->gen, INT_MAX);
  for (auto& t : impl_->workers) t.join();
}

void ThreadPool::parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t, int64_t)> fn, Schedule schedule) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (num_threads_ == 1 || n <= grain || tl_parallel_depth > 0) {
    fn(0, n);
    return;
  }
  Impl& im = *impl_;
  if (im.callers.load(std::memory_order_relaxed) > 1) {  // runs in flight beside this one
    fn(0, n);
    return;
  }
  std::unique_lock<std::mutex> lk(im.call_mu, std::try_to_lock);
  if (!lk.owns_lock()) {  // another thread is using the pool: do the work here rather than wait
    fn(0, n);
    return;
  }
  const int64_t chunks_wanted = static_cast<int64_t>(num_threads_) * 4;
  Impl::count(im.loops_split);
  im.fn = &fn;
  im.n = n;
  im.chunk = std::max(grain, (n + chunks_wanted - 1) / chunks_wanted);
  im.next.store(0, std::memory_order_relaxed);
  im.two_ended = num_threads_ == 2 && n < (int64_t(1) << 31);
  const TwoEndedTakes takes = two_ended_takes(n, grain, schedule);
  im.min_take = takes.min_take;
  im.first_take = takes.first_take;
  im.take_divisor = takes.take_divisor;
  im.ends.store(static_cast<uint64_t>(n) << 32, std::memory_order_relaxed);
  im.open.store(true, std::memory_order_seq_cst);   // a worker still registered from an earlier
                                                    // generation may join this job: it is complete now
  im.gen.fetch_add(1, std::memory_order_seq_cst);  // publishes the job (release)
  if (im.sleepers.load(std::memory_order_seq_cst) != 0) {
    futex_wake(&im.gen, INT_MAX);
    Impl::count(im.worker_wakes);
  }
  SlotGuard slot(this);
  im.run_chunks();
  im.wait_done();
  im.fn = nullptr;
}

int64_t ThreadPool::worker_first_claim(int threads, int64_t n, int64_t grain) {
  grain = std::max<int64_t>(1, grain);
  if (threads != 2 || n <= grain || n >= (int64_t(1) << 31)) return n;
  // The caller's first claim comes off the front, then the worker's off the back (either order).
  const int64_t first_take = two_ended_takes(n, grain).first_take;
  return n - std::min(first_take, std::max<int64_t>(0, n - first_take));
}

uint64_t ThreadPool::loops_split() const { return impl_->loops_split.load(std::memory_order_relaxed); }
uint64_t ThreadPool::worker_wakes() const { return impl_->worker_wakes.load(std::memory_order_relaxed); }
uint64_t ThreadPool::caller_sleeps() const { return impl_->caller_sleeps.load(std::memory_order_relaxed); }

void ThreadPool::prefetch_when_idle(const void* data, size_t bytes) {
  if (num_threads_ != 2) return;
  if (!data) bytes = 0;
  Impl& im = *impl_;
  // One writer at a time (concurrent runs may share the pool): a call that finds another one writing
  // drops its hint.
  uint32_t s = im.idle_seq.load(std::memory_order_relaxed);
  if ((s & 1) != 0 || !im.idle_seq.compare_exchange_strong(s, s + 1, std::memory_order_relaxed)) return;
  std::atomic_thread_fence(std::memory_order_release);  // odd (being rewritten) before the new range
  im.idle_data.store(static_cast<const char*>(data), std::memory_order_relaxed);
  im.idle_bytes.store(bytes, std::memory_order_relaxed);
  im.idle_seq.store(s + 2, std::memory_order_release);
}

ThreadPool::CallerScope::CallerScope(ThreadPool& pool) : pool_(pool) {
  pool_.impl_->callers.fetch_add(1, std::memory_order_relaxed);
}
ThreadPool::CallerScope::~CallerScope() {
  pool_.impl_->last_run_end_ns.store(Impl::ns_of(Impl::Clock::now()), std::memory_order_relaxed);
  pool_.impl_->callers.fetch_sub(1, std::memory_order_relaxed);
}

void ThreadPool::parallel_for_2d(int64_t rows, int64_t cols, int64_t tile_rows, int64_t tile_cols,
                                 FunctionRef<void(int64_t, int64_t, int64_t, int64_t)> fn) {
  if (rows <= 0 || cols <= 0) return;
  tile_rows = std::max<int64_t>(1, tile_rows);
  tile_cols = std::max<int64_t>(1, tile_cols);
  const int64_t tr = (rows + tile_rows - 1) / tile_rows, tc = (cols + tile_cols - 1) / tile_cols;
  parallel_for(tr * tc, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t r0 = (t / tc) * tile_rows, c0 = (t % tc) * tile_cols;
      fn(r0, std::min(rows, r0 + tile_rows), c0, std::min(cols, c0 + tile_cols));
    }
  });
}

}  // namespace nxrt::ep
