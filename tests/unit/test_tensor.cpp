#include <gtest/gtest.h>

#include "nxrt/float_types.h"
#include "nxrt/tensor.h"

using namespace nxrt;

TEST(Tensor, ContiguousCopyOfTransposedView) {
  Tensor t = Tensor::from_vector<float>(DataType::kFloat, {2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor v(DataType::kFloat, {3, 2}, t.storage(), 0, {1, 3});
  EXPECT_FALSE(v.is_contiguous());
  Tensor c = v.contiguous();
  ASSERT_TRUE(c.is_contiguous());
  std::vector<float> got(c.data<float>(), c.data<float>() + 6);
  EXPECT_EQ(got, (std::vector<float>{0, 3, 1, 4, 2, 5}));
}

TEST(Float16, RoundTripAndRounding) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);  // rounds up to inf
  EXPECT_EQ(half_to_float(0x0001), 5.9604644775390625e-08f);
  EXPECT_EQ(float_to_half(5.9604644775390625e-08f), 0x0001);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits_float(0x3f808000u)), 0x3f80);  // tie to even
  EXPECT_EQ(float_to_bf16(bits_float(0x3f818000u)), 0x3f82);
}
