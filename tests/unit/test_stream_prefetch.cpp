// ops/stream_prefetch.h: the pages a stream's page-ahead prefetch reaches, called record by record as
// the decode tiles and the attention loops call it.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

#include "ops/stream_prefetch.h"

namespace {

// Walks records of `record` bytes over [base, base + length), as the kernels do, and counts how often
// each page start is touched.
std::map<uintptr_t, int> touched_pages(uintptr_t base, int64_t length, int64_t record, int64_t ahead) {
  std::map<uintptr_t, int> seen;
  for (int64_t at = 0; at < length; at += record) {
    nxrt::ops::for_each_page_ahead(reinterpret_cast<const void*>(base + at), record, ahead, [&](const uint8_t* p) {
      ++seen[reinterpret_cast<uintptr_t>(p)];
    });
  }
  return seen;
}

TEST(StreamPrefetch, EveryPageAheadIsTouchedOnceAtItsStart) {
  // Record sizes of the panel layouts (block 32 int4 + fp16 / fp32 scales, a larger block), a 4-row
  // attention block, a record longer than a page; starts on and off a page boundary.
  for (int64_t record : {int64_t{544}, int64_t{576}, int64_t{1024}, int64_t{2112}, int64_t{4352}, int64_t{9000}}) {
    for (uintptr_t base : {uintptr_t{0x100000}, uintptr_t{0x100000 + 192}, uintptr_t{0x100000 + 4000}}) {
      for (int64_t ahead : {int64_t{16384}, nxrt::ops::kPageAheadBytes, int64_t{65536}}) {
        const int64_t records = 200;
        const auto seen = touched_pages(base, records * record, record, ahead);
        // The pages starting within (base + ahead, base + ahead + records * record], each once.
        const uintptr_t lo = base + static_cast<uintptr_t>(ahead), hi = lo + static_cast<uintptr_t>(records * record);
        std::vector<uintptr_t> want;
        for (uintptr_t p = (lo / 4096 + 1) * 4096; p <= hi; p += 4096) want.push_back(p);
        ASSERT_EQ(seen.size(), want.size()) << "record " << record << " base " << base << " ahead " << ahead;
        size_t i = 0;
        for (const auto& [page, count] : seen) {
          EXPECT_EQ(page, want[i++]) << "record " << record;
          EXPECT_EQ(count, 1) << "page " << page << " record " << record;
        }
      }
    }
  }
}

}  // namespace
