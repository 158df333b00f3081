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

// copy_tensor_into an 8-bit view whose destination rows run along the source's unit stride (an NHWC
// value seen as NCHW, and the reverse): the blocked byte transpose, against the element definition, on
// sizes off the 16 x 16 blocks and with a batch axis.
TEST(Tensor, ByteTransposedViewsCopyLikeTheirElements) {
  for (const Dims& nhwc : {Dims{1, 5, 7, 3}, Dims{2, 17, 19, 33}, Dims{1, 4, 4, 16}, Dims{3, 1, 40, 20}}) {
    const int64_t N = nhwc[0], H = nhwc[1], W = nhwc[2], C = nhwc[3];
    std::vector<uint8_t> bytes(static_cast<size_t>(N * H * W * C));
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37 + i / 7);
    Tensor t = Tensor::from_vector<uint8_t>(DataType::kUInt8, nhwc, bytes);
    // NCHW view of the NHWC bytes.
    Tensor v(DataType::kUInt8, {N, C, H, W}, t.storage(), 0, {H * W * C, 1, W * C, C});
    Tensor out(DataType::kUInt8, {N, C, H, W});
    ASSERT_TRUE(copy_tensor_into(v, out).ok());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w)
            ASSERT_EQ(out.data<uint8_t>()[((n * C + c) * H + h) * W + w], bytes[static_cast<size_t>(((n * H + h) * W + w) * C + c)])
                << shape_to_string(nhwc) << " n " << n << " c " << c << " h " << h << " w " << w;
    // And back: the NHWC view of the NCHW copy.
    Tensor back_view(DataType::kUInt8, {N, H, W, C}, out.storage(), 0, {C * H * W, W, 1, H * W});
    Tensor back(DataType::kUInt8, nhwc);
    ASSERT_TRUE(copy_tensor_into(back_view, back).ok());
    EXPECT_EQ(std::vector<uint8_t>(back.data<uint8_t>(), back.data<uint8_t>() + back.numel()), bytes) << shape_to_string(nhwc);
  }
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
