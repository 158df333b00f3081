#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "kernel_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_int;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Result<std::vector<Value>> bitcast(Tensor x, DataType to, int64_t opset = 26) {
  KernelRun r;
  r.op_type = "BitCast";
  r.opset = opset;
  r.inputs = {Value(std::move(x))};
  r.attributes = {attr_int("to", static_cast<int64_t>(to))};
  return run_kernel(r);
}

}  // namespace

TEST(OpsBitCast, FloatToInt32KeepsBits) {
  std::vector<float> v = {1.0f, -2.5f, 0.0f, 3.0e38f};
  auto out = bitcast(Tensor::from_vector<float>(DataType::kFloat, {2, 2}, v), DataType::kInt32);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  EXPECT_EQ(y.dtype(), DataType::kInt32);
  EXPECT_EQ(y.shape(), (Dims{2, 2}));
  for (size_t i = 0; i < v.size(); ++i) {
    int32_t bits;
    std::memcpy(&bits, &v[i], 4);
    EXPECT_EQ(y.data<int32_t>()[i], bits);
  }
}

TEST(OpsBitCast, SameWidthPairs) {
  auto a = bitcast(Tensor::from_vector<int8_t>(DataType::kInt8, {3}, {-1, 0, 127}), DataType::kUInt8);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)[0].tensor().data<uint8_t>()[0], 255);
  auto b = bitcast(Tensor::from_vector<uint8_t>(DataType::kBool, {2}, {1, 0}), DataType::kUInt8);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)[0].tensor().data<uint8_t>()[0], 1);
  auto c = bitcast(Tensor::from_vector<double>(DataType::kDouble, {}, {1.0}), DataType::kInt64);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)[0].tensor().data<int64_t>()[0], 0x3FF0000000000000LL);
  EXPECT_EQ((*c)[0].tensor().shape(), Dims{});
  auto d = bitcast(Tensor::from_vector<uint16_t>(DataType::kFloat16, {1}, {0x3C00}), DataType::kBFloat16);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)[0].tensor().data<uint16_t>()[0], 0x3C00);
  auto e = bitcast(Tensor::from_vector<uint8_t>(DataType::kInt4, {4}, {0x21, 0x43}), DataType::kUInt4);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)[0].tensor().data<uint8_t>()[1], 0x43);
  auto empty = bitcast(Tensor(DataType::kFloat, {0, 3}), DataType::kUInt32);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)[0].tensor().shape(), (Dims{0, 3}));
}

TEST(OpsBitCast, RejectsDifferentWidthsAndStrings) {
  EXPECT_FALSE(bitcast(Tensor::from_vector<float>(DataType::kFloat, {1}, {1.0f}), DataType::kInt64).ok());
  EXPECT_FALSE(bitcast(Tensor::from_vector<int8_t>(DataType::kInt8, {1}, {1}), DataType::kInt4).ok());
  EXPECT_FALSE(bitcast(Tensor(DataType::kString, {1}), DataType::kUInt8).ok());
  EXPECT_FALSE(bitcast(Tensor::from_vector<float>(DataType::kFloat, {1}, {1.0f}), static_cast<DataType>(99)).ok());
  // Not registered before opset 26.
  EXPECT_FALSE(bitcast(Tensor::from_vector<float>(DataType::kFloat, {1}, {1.0f}), DataType::kInt32, 25).ok());
}
