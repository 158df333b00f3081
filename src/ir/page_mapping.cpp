#include "ir/page_mapping.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace nxrt::ir {

void* map_zeroed_aligned(size_t len, bool huge) {
#if defined(__linux__)
  // Over-map by one huge page and trim, so the mapping starts on a 2 MB boundary.
  void* raw = mmap(nullptr, len + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (base + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  if (aligned > base) munmap(raw, aligned - base);
  const uintptr_t end = base + len + kHugePageBytes;
  if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
  if (huge) madvise(reinterpret_cast<void*>(aligned), len, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
#else
  (void)len;
  (void)huge;
  return nullptr;
#endif
}

bool free_huge_pages_cover(size_t bytes) {
#if defined(__linux__)
  // Lines read "Node 0, zone   Normal  c0 c1 ... c10": free blocks of 2^order pages per order.
  std::FILE* f = std::fopen("/proc/buddyinfo", "r");
  if (!f) return false;
  const long page = sysconf(_SC_PAGESIZE);
  const size_t min_order_bytes = kHugePageBytes;
  size_t free_bytes = 0;
  char line[512];
  while (std::fgets(line, sizeof(line), f)) {
    const char* p = std::strstr(line, "zone");
    if (!p) continue;
    p += 4;
    while (*p == ' ') ++p;
    while (*p && *p != ' ') ++p;  // the zone's name
    for (int order = 0; *p; ++order) {
      char* next = nullptr;
      const unsigned long long count = std::strtoull(p, &next, 10);
      if (next == p) break;
      p = next;
      const size_t block = static_cast<size_t>(page) << order;
      if (block >= min_order_bytes) free_bytes += static_cast<size_t>(count) * block;
    }
  }
  std::fclose(f);
  return page > 0 && free_bytes / 2 >= bytes;
#else
  (void)bytes;
  return false;
#endif
}

}  // namespace nxrt::ir
