// ir/tensor_util.h: the dtype dispatch family, the compute-type conversions and the value readers.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "ir/tensor_util.h"

namespace nxrt {
namespace {

const DataType kAll[] = {
    DataType::kFloat,  DataType::kDouble, DataType::kFloat16, DataType::kBFloat16, DataType::kInt8,
    DataType::kInt16,  DataType::kInt32,  DataType::kInt64,   DataType::kUInt8,    DataType::kUInt16,
    DataType::kUInt32, DataType::kUInt64, DataType::kBool,    DataType::kString,   DataType::kInt4,
};

// The dtypes a dispatcher accepts, and for each the C++ type it passed must be that dtype's.
template <typename D>
std::set<DataType> accepted(D&& dispatch) {
  std::set<DataType> out;
  for (DataType dt : kAll) {
    bool typed_right = false;
    const Status s = dispatch(
        dt,
        [&](auto tag) {
          using T = decltype(tag);
          if constexpr (std::is_same_v<T, bool>) typed_right = dt == DataType::kBool;
          else typed_right = ir::dtype_of<T>() == dt;
          return Status::Ok();
        },
        [] { return invalid_argument("no"); });
    if (s.ok()) {
      EXPECT_TRUE(typed_right) << dtype_name(dt);
      out.insert(dt);
    }
  }
  return out;
}

TEST(TensorUtil, DispatchFamiliesCoverTheirDtypes) {
  using DT = DataType;
  const std::set<DT> fl = {DT::kFloat, DT::kDouble, DT::kFloat16, DT::kBFloat16};
  const std::set<DT> sint = {DT::kInt8, DT::kInt16, DT::kInt32, DT::kInt64};
  const std::set<DT> uint = {DT::kUInt8, DT::kUInt16, DT::kUInt32, DT::kUInt64};
  auto join = [](std::set<DT> a, const std::set<DT>& b) {
    a.insert(b.begin(), b.end());
    return a;
  };
  EXPECT_EQ(accepted([](DT d, auto&& f, auto&& e) { return ir::dispatch_float(d, f, e); }), fl);
  EXPECT_EQ(accepted([](DT d, auto&& f, auto&& e) { return ir::dispatch_unsigned(d, f, e); }), uint);
  EXPECT_EQ(accepted([](DT d, auto&& f, auto&& e) { return ir::dispatch_integer(d, f, e); }), join(sint, uint));
  EXPECT_EQ(accepted([](DT d, auto&& f, auto&& e) { return ir::dispatch_signed(d, f, e); }), join(fl, sint));
  EXPECT_EQ(accepted([](DT d, auto&& f, auto&& e) { return ir::dispatch_numeric(d, f, e); }),
            join(fl, join(sint, uint)));
  EXPECT_EQ(accepted([](DT d, auto&& f, auto&& e) { return ir::dispatch_native(d, f, e); }),
            join(join(fl, join(sint, uint)), {DT::kBool}));
}

TEST(TensorUtil, DispatchBySizeAndElemPassTheElementSize) {
  for (DataType dt : kAll) {
    size_t size = 0;
    const Status s = ir::dispatch_elem(
        dt,
        [&](auto tag) {
          size = sizeof(decltype(tag));
          return Status::Ok();
        },
        [] { return invalid_argument("no"); });
    if (dt == DataType::kInt4) {
      EXPECT_FALSE(s.ok());  // sub-byte: not a whole-byte element
    } else if (dt == DataType::kString) {
      EXPECT_EQ(size, sizeof(std::string));
    } else {
      ASSERT_TRUE(s.ok()) << dtype_name(dt);
      EXPECT_EQ(size * 8, static_cast<size_t>(dtype_bits(dt))) << dtype_name(dt);
    }
  }
}

TEST(TensorUtil, ComputeTypeConversions) {
  static_assert(std::is_same_v<ir::compute_t<Float16>, float>);
  static_assert(std::is_same_v<ir::compute_t<BFloat16>, float>);
  static_assert(std::is_same_v<ir::compute_t<double>, double>);
  static_assert(std::is_same_v<ir::compute_t<int32_t>, int32_t>);
  EXPECT_EQ(ir::to_compute<double>(Float16(1.5f)), 1.5);
  EXPECT_EQ(static_cast<float>(ir::from_compute<Float16>(2.25)), 2.25f);
  EXPECT_EQ(static_cast<float>(ir::from_compute<BFloat16>(3.0f)), 3.0f);
  EXPECT_EQ(ir::from_compute<int32_t>(7.0), 7);
  // float16 rounds: 1 + 2^-11 is halfway between two float16 values and rounds to even (1).
  EXPECT_EQ(static_cast<float>(ir::from_compute<Float16>(1.0 + std::ldexp(1.0, -11))), 1.0f);
  EXPECT_EQ(ir::round_to_float_dtype(1.0 + std::ldexp(1.0, -11), DataType::kFloat16), 1.0);
  EXPECT_EQ(ir::round_to_float_dtype(0.1, DataType::kFloat), static_cast<double>(0.1f));
  EXPECT_EQ(ir::round_to_float_dtype(0.1, DataType::kDouble), 0.1);
  EXPECT_EQ(ir::round_to_float_dtype(1.0 + std::ldexp(1.0, -9), DataType::kBFloat16), 1.0);
}

TEST(TensorUtil, LoadAndStoreFloatsRoundTrip) {
  const std::vector<float> src = {0.f, 1.f, -2.5f, 65504.f, 1e-3f};
  for (DataType dt : {DataType::kFloat, DataType::kDouble, DataType::kFloat16, DataType::kBFloat16}) {
    Tensor t(dt, {static_cast<int64_t>(src.size())});
    ASSERT_TRUE(ir::store_floats(src.data(), static_cast<int64_t>(src.size()), dt, t.raw_data()).ok());
    auto back = ir::read_floats_as<float>(t);
    ASSERT_TRUE(back.ok());
    for (size_t i = 0; i < src.size(); ++i) {
      const float tol = dt == DataType::kBFloat16 ? 0.01f * std::fabs(src[i]) : dt == DataType::kFloat16 ? 1e-3f * std::fabs(src[i]) + 1e-6f : 0.f;
      EXPECT_NEAR(back.value()[i], src[i], tol) << dtype_name(dt) << " " << i;
    }
  }
  Tensor ints(DataType::kInt32, {2});
  EXPECT_FALSE(ir::read_floats_as<float>(ints).ok());
  EXPECT_FALSE(ir::load_floats(DataType::kInt8, ints.raw_data(), 2, static_cast<float*>(nullptr)).ok());
}

TEST(TensorUtil, ReadIntAndDoubleValues) {
  const Tensor b = Tensor::from_vector<uint8_t>(DataType::kBool, {3}, {1, 0, 1});
  auto bi = ir::read_int_values(b);
  ASSERT_TRUE(bi.ok());
  EXPECT_EQ(bi.value(), (std::vector<int64_t>{1, 0, 1}));
  const Tensor i16 = Tensor::from_vector<int16_t>(DataType::kInt16, {2}, {-3, 300});
  EXPECT_EQ(ir::read_int_values(i16).value(), (std::vector<int64_t>{-3, 300}));
  EXPECT_EQ(ir::read_double_values(i16).value(), (std::vector<double>{-3.0, 300.0}));
  const Tensor h = Tensor::from_vector<Float16>(DataType::kFloat16, {2}, {Float16(0.5f), Float16(-4.f)});
  EXPECT_EQ(ir::read_double_values(h).value(), (std::vector<double>{0.5, -4.0}));
  EXPECT_FALSE(ir::read_int_values(h).ok());
  const Tensor s(DataType::kString, {1});
  EXPECT_FALSE(ir::read_double_values(s).ok());
}

}  // namespace
}  // namespace nxrt
