// Anonymous memory mappings for large long-lived blocks (folded weights, packed weights): zero-filled
// by the kernel, 2 MB-aligned, optionally on transparent huge pages.
//
// Why huge pages: each first touch of a 4 KB page is a page fault, and on a VM whose hypervisor shadows
// the guest's page tables a fault costs ~11 us (an AMD EPYC Zen 5 VM, 2026-12-06: 4 KB pages fill at
// ~355 MB/s, 2 MB pages at ~600 MB/s when the host must back them and ~16 GB/s when it already does).
// Why not always: with THP's defrag in "madvise" mode, a fault in a marked range compacts memory
// synchronously when no free 2 MB block is at hand (VGG-19's folded weights once took 1.7 s instead of
// 0.47 s to create that way), so callers that can do without ask free_huge_pages_cover first.
#pragma once

#include <cstddef>

namespace nxrt::ir {

inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// A 2 MB-aligned, zero-filled, read-write anonymous mapping of len bytes (len a multiple of 2 MB), marked
// for transparent huge pages when `huge` (a hint: without THP the pages stay 4 KB); release it with
// munmap(p, len). nullptr when mmap fails.
void* map_zeroed_aligned(size_t len, bool huge);

// Whether the kernel's free lists hold at least twice `bytes` in free blocks of 2 MB or more
// (/proc/buddyinfo), so huge-page faults over `bytes` can be served without compaction. False where
// that cannot be read.
bool free_huge_pages_cover(size_t bytes);

}  // namespace nxrt::ir
