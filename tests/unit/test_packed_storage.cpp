// ops/packed_storage.h: the huge-page buffers that hold weights packed once per kernel (MatMulNBits
// panels, the float GEMM's PackedA / PackedB, Winograd filters).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include <sys/mman.h>

#include "ir/page_mapping.h"
#include "ops/gemm/gemm.h"
#include "ops/packed_storage.h"

using nxrt::ops::PackedArray;
using nxrt::ops::PackedBytes;

// Packed-weight buffers share the arena's chunks: each is 64-byte aligned, zero-filled (also when it
// comes after buffers that were written and released), and does not overlap the others; moves hand the
// memory over, and sizes past the arena's limit and zero bytes work too.
TEST(PackedStorage, PackedBytesAreAlignedZeroedAndDisjoint) {
  std::mt19937 rng(3);
  std::vector<PackedBytes> live;
  for (int round = 0; round < 3; ++round) {
    for (size_t bytes : {size_t{1}, size_t{100}, size_t{4096}, size_t{3} << 19, size_t{5} << 20, size_t{20} << 20,
                         size_t{700}, size_t{9} << 20}) {
      PackedBytes b(bytes);
      ASSERT_EQ(b.size(), bytes);
      ASSERT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << bytes;
      for (size_t i = 0; i < bytes; i += 997) ASSERT_EQ(b.data()[i], 0) << bytes << " at " << i;
      ASSERT_EQ(b.data()[bytes - 1], 0) << bytes;
      std::memset(b.data(), 0xA5, bytes);
      live.push_back(std::move(b));
    }
    // Disjoint: every live buffer still holds its own fill.
    for (PackedBytes& b : live) {
      ASSERT_EQ(b.data()[0], 0xA5);
      ASSERT_EQ(b.data()[b.size() - 1], 0xA5);
    }
    // Release a random half, keep the rest for the next round.
    std::shuffle(live.begin(), live.end(), rng);
    live.resize(live.size() / 2);
  }
  PackedBytes moved(std::move(live.front()));
  EXPECT_TRUE(live.front().empty());
  EXPECT_EQ(moved.data()[0], 0xA5);
  PackedBytes none(0);
  EXPECT_TRUE(none.empty());
}

// A typed array over PackedBytes: n zero values, 64-byte aligned, element access, moves.
TEST(PackedStorage, PackedArrayHoldsZeroedValues) {
  for (size_t n : {size_t{1}, size_t{17}, size_t{300000}, size_t{5000000}}) {
    PackedArray<double> a(n);
    ASSERT_EQ(a.size(), n);
    ASSERT_FALSE(a.empty());
    ASSERT_EQ(reinterpret_cast<uintptr_t>(a.data()) % 64, 0u);
    for (size_t i = 0; i < n; i += 4099) ASSERT_EQ(a[i], 0.0) << n << " at " << i;
    ASSERT_EQ(a[n - 1], 0.0);
    for (size_t i = 0; i < n; ++i) a[i] = static_cast<double>(i);
    PackedArray<double> b(std::move(a));
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(b[n - 1], static_cast<double>(n - 1));
  }
  EXPECT_TRUE(PackedArray<float>().empty());
}

// The float engine's packed operands live in PackedArray: padding rows and columns are zero, and the
// values sit where the documented layouts put them (gemm.h).
TEST(PackedStorage, PackedGemmOperandsKeepTheirLayout) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  const int64_t M = 7, K = 300, N = 19;
  std::vector<float> A(static_cast<size_t>(M * K)), B(static_cast<size_t>(K * N));
  for (float& v : A) v = d(rng);
  for (float& v : B) v = d(rng);
  const nxrt::ops::PackedA<float> pa = nxrt::ops::pack_a<float>(false, M, K, A.data(), K);
  const int64_t R = nxrt::ops::kGemmPanelRows<float>;
  ASSERT_EQ(pa.m_padded, (M + R - 1) / R * R);
  ASSERT_EQ(pa.data.size(), static_cast<size_t>(pa.m_padded * K));
  for (int64_t k0 = 0; k0 < K; k0 += nxrt::ops::kGemmKC) {
    const int64_t kc = std::min(nxrt::ops::kGemmKC, K - k0);
    for (int64_t i = 0; i < pa.m_padded; ++i)
      for (int64_t k = 0; k < kc; ++k) {
        const float got = pa.data[static_cast<size_t>(k0 * pa.m_padded + (i / R) * R * kc + k * R + i % R)];
        ASSERT_EQ(got, i < M ? A[static_cast<size_t>(i * K + k0 + k)] : 0.f) << i << "," << k0 + k;
      }
  }
  const nxrt::ops::PackedB pb = nxrt::ops::pack_b_f32(false, K, N, B.data(), N);
  ASSERT_EQ(pb.n_padded % nxrt::ops::kGemmNR, 0);
  ASSERT_EQ(pb.data.size(), static_cast<size_t>(pb.n_padded * K));
  // Every value of B appears once; the rest (padding columns) is zero.
  std::vector<float> seen(pb.data.data(), pb.data.data() + pb.data.size());
  size_t nonzero = 0;
  for (float v : seen) nonzero += v != 0.f;
  EXPECT_EQ(nonzero, B.size());
  std::vector<float> sorted_b = B;
  std::vector<float> sorted_seen;
  for (float v : seen)
    if (v != 0.f) sorted_seen.push_back(v);
  std::sort(sorted_b.begin(), sorted_b.end());
  std::sort(sorted_seen.begin(), sorted_seen.end());
  EXPECT_EQ(sorted_seen, sorted_b);
}

// ir/page_mapping.h: a 2 MB-aligned zero-filled mapping, with and without the huge-page hint; the
// buddyinfo check answers no for more memory than any machine has, and yes for nothing at all where
// the file can be read.
TEST(PageMapping, AlignedZeroedMappingsAndFreeHugePages) {
  for (bool huge : {false, true}) {
    const size_t len = 3 * nxrt::ir::kHugePageBytes;
    auto* p = static_cast<unsigned char*>(nxrt::ir::map_zeroed_aligned(len, huge));
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % nxrt::ir::kHugePageBytes, 0u);
    for (size_t i = 0; i < len; i += 4096) ASSERT_EQ(p[i], 0) << i;
    std::memset(p, 0x5A, len);
    EXPECT_EQ(p[len - 1], 0x5A);
    munmap(p, len);
  }
  EXPECT_FALSE(nxrt::ir::free_huge_pages_cover(size_t{1} << 60));
  if (FILE* f = std::fopen("/proc/buddyinfo", "r")) {
    std::fclose(f);
    EXPECT_TRUE(nxrt::ir::free_huge_pages_cover(0));
  }
}
