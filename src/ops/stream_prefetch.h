// Prefetching for kernels that stream memory once per call: the decode GEMV's weights, a decode
// step's pass over the KV cache.
#pragma once
#include <cstdint>

namespace nxrt::ops {

// A stream's first access to each 4 KB page pays for the page's address translation, and a dense
// prefetch a few KB ahead of the loads comes too late to hide that where translation is costly. On
// this project's Zen 5 VM (its hypervisor shadows the guest's page tables) a plain read of 322 MB ran
// at 25-30 GB/s on one core and 60-65 on two, and at 32-36 / 70 with one prefetch per page 64 KB
// ahead on top of a dense one 8 KB ahead; every second page gave 28-30, and which line of the page
// made no difference: it is the page, not the line. 16, 32 and 64 KB ahead measured the same in the
// int4 decode (matmul_nbits_panel_kernels.h). Where translation is cheap it costs one prefetch per 4 KB.
inline constexpr int64_t kPageAheadBytes = 32768;

// Calls touch(p) for the start p of each 4 KB page within (at + ahead, at + ahead + bytes]: called
// for each successive `bytes` of a stream, it reaches every page `ahead` bytes early, once.
template <typename Touch>
inline void for_each_page_ahead(const void* at, int64_t bytes, int64_t ahead, Touch&& touch) {
  const uint8_t* far = static_cast<const uint8_t*>(at) + ahead;
  for (int64_t off = 4096 - static_cast<int64_t>(reinterpret_cast<uintptr_t>(far) & 4095); off <= bytes; off += 4096) {
    touch(far + off);
  }
}

// Prefetches the first line of each page for_each_page_ahead names (past the mapping's end a prefetch
// is a no-op).
inline void prefetch_pages_ahead(const void* at, int64_t bytes, int64_t ahead = kPageAheadBytes) {
  for_each_page_ahead(at, bytes, ahead, [](const uint8_t* page) {
#if defined(__x86_64__)
    // An asm statement: GCC 12 (-O2 and up) deleted this loop, written with __builtin_prefetch or
    // _mm_prefetch, as a loop without side effects (clang kept it).
    asm volatile("prefetcht0 %0" : : "m"(*page));
#else
    __builtin_prefetch(page, 0, 3);
#endif
  });
}

// A run of `run_bytes` that a loop starts reading now, record by record, calling prefetch_pages_ahead
// per record: the pages of its first kPageAheadBytes lie before any record's window, so start them here.
inline void prefetch_first_pages(const void* run, int64_t run_bytes) {
  prefetch_pages_ahead(run, run_bytes < kPageAheadBytes ? run_bytes : kPageAheadBytes, 0);
}

}  // namespace nxrt::ops
