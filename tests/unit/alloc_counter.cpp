#include "alloc_counter.h"

#include <atomic>
#include <cstdlib>
#include <execinfo.h>
#include <unistd.h>

#include <new>

#include "nxrt/tensor.h"

namespace {
std::atomic<bool> g_armed{false};
std::atomic<uint64_t> g_count{0};

thread_local bool t_in_trace = false;

// NXRT_ALLOC_TRACE=1 prints a backtrace of every counted allocation (to find what allocates).
void maybe_trace() {
  static const bool on = std::getenv("NXRT_ALLOC_TRACE") != nullptr;
  if (!on || t_in_trace) return;
  t_in_trace = true;
  void* frames[12];
  int n = backtrace(frames, 12);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  (void)!write(STDERR_FILENO, "----\n", 5);
  t_in_trace = false;
}

[[maybe_unused]] void* counted(std::size_t n, std::size_t align) {
  if (g_armed.load(std::memory_order_relaxed)) {
    g_count.fetch_add(1, std::memory_order_relaxed);
    maybe_trace();
  }
  if (n == 0) n = 1;
  void* p = nullptr;
  if (align > alignof(std::max_align_t)) {
    if (posix_memalign(&p, align, n) != 0) p = nullptr;
  } else {
    p = std::malloc(n);
  }
  return p;
}
}  // namespace

namespace nxrt::test {
void AllocCounter::arm() {
  g_count = 0;
  nxrt::storage_allocation_count(true);
  g_armed = true;
}
void AllocCounter::disarm() { g_armed = false; }
uint64_t AllocCounter::count() { return g_count.load() + nxrt::storage_allocation_count(false); }
}  // namespace nxrt::test

// ThreadSanitizer's runtime defines operator new/delete itself (strongly, unlike ASan's), so a TSan
// build (NXRT_TSAN) keeps its own and counts only tensor storage blocks; the release and ASan builds
// count every allocation.
#ifndef NXRT_TSAN_BUILD
void* operator new(std::size_t n) {
  void* p = counted(n, 0);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n) {
  void* p = counted(n, 0);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return counted(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) {
  void* p = counted(n, static_cast<std::size_t>(a));
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](std::size_t n, std::align_val_t a) {
  void* p = counted(n, static_cast<std::size_t>(a));
  if (!p) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
#endif  // NXRT_TSAN_BUILD
