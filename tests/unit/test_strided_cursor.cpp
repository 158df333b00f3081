// ir::StridedCursor (src/ir/strided_cursor.h), the N-d index walker of the strided kernels, against
// offsets computed directly from unravelled indices.
#include <gtest/gtest.h>

#include <random>

#include "ir/strided_cursor.h"

namespace nxrt {
namespace {

// The coordinates of row-major flat index `flat` in the leading `rank` axes of shape.
std::vector<int64_t> unravel(const Dims& shape, size_t rank, int64_t flat) {
  std::vector<int64_t> idx(rank);
  for (size_t d = rank; d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

int64_t dot(const std::vector<int64_t>& idx, const Dims& strides) {
  int64_t o = 0;
  for (size_t d = 0; d < idx.size(); ++d) o += idx[d] * strides[d];
  return o;
}

TEST(StridedCursor, WalksEveryPositionWithEachOperandsOffsets) {
  std::mt19937 rng(3);
  for (int it = 0; it < 60; ++it) {
    const size_t r = 1 + it % 11;  // past Dims' inline capacity too
    Dims shape(r), sa(r), sb(r);
    for (size_t d = 0; d < r; ++d) {
      shape[d] = 1 + static_cast<int64_t>(rng() % 3);
      sa[d] = static_cast<int64_t>(rng() % 7) - 2;  // negative (reversed views) and 0 (broadcast) too
      sb[d] = static_cast<int64_t>(rng() % 5);
    }
    const size_t rank = it % 2 ? r : r - 1;  // all axes, or the outer ones of a row loop
    auto cur = ir::strided_cursor(shape, rank, sa, sb);
    int64_t n = 0;
    do {
      const auto idx = unravel(shape, rank, n);
      for (size_t d = 0; d < rank; ++d) ASSERT_EQ(cur.index(d), idx[d]);
      ASSERT_EQ(cur.offset(0), dot(idx, sa)) << "position " << n;
      ASSERT_EQ(cur.offset(1), dot(idx, sb)) << "position " << n;
      ++n;
    } while (cur.next());
    ASSERT_EQ(n, cur.count());
    // Back at the origin after the last position.
    EXPECT_EQ(cur.offset(0), 0);
    EXPECT_EQ(cur.offset(1), 0);
  }
}

TEST(StridedCursor, SeekMatchesWalkingAndStartOffsetsAreKept) {
  const Dims shape{3, 4, 5}, s{100, -10, 1};
  ir::StridedCursor<1> walk(shape.data(), 3, {s.data()}, {7});
  ir::StridedCursor<1> jump(shape.data(), 3, {s.data()}, {7});
  for (int64_t i = 0; i < 60; ++i) {
    jump.seek(i);
    ASSERT_EQ(jump.offset(0), walk.offset(0)) << i;
    ASSERT_EQ(jump.offset(0), 7 + dot(unravel(shape, 3, i), s)) << i;
    walk.next();
  }
}

TEST(StridedCursor, RankZeroAndEmptyShapes) {
  const Dims scalar;
  auto one = ir::strided_cursor(scalar, 0);
  EXPECT_EQ(one.count(), 1);
  EXPECT_FALSE(one.next());
  const Dims empty{2, 0, 3}, st{0, 3, 1};
  auto none = ir::strided_cursor(empty, 3, st);
  EXPECT_EQ(none.count(), 0);
}

}  // namespace
}  // namespace nxrt
