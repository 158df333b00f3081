// com.microsoft GatherBlockQuantized on uint8 data (an int4 or int8 quantized embedding table): the
// row-by-row path (rank 2, gather_axis 0, quantize_axis 1) and the general one (quantize_axis 0)
// against values computed here from the packing rules, with odd block counts (each row's zero points
// end in a half-used byte; ORT 1.30 reads them so, tools/make_contrib_cases.py gbq_*_odd_blocks), no zero points, negative and out-of-range indices, 8-bit
// codes, float16 scales, and a gather big enough to spread over threads.
#include <gtest/gtest.h>

#include <random>

#include "kernel_test_util.h"
#include "nxrt/float_types.h"

using namespace nxrt;
using nxrt::testing::attr_int;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

struct Table {
  int64_t rows, cols, bits, block;
  std::vector<uint8_t> data, zp;  // zp empty: none
  std::vector<float> scales;      // [rows, blocks] (quantize_axis 1) or [ceil(rows / block), cols] (axis 0)
};

int code(const Table& t, int64_t r, int64_t c) {
  const int64_t per = 8 / t.bits, row_bytes = t.cols / per;
  return (t.data[static_cast<size_t>(r * row_bytes + c / per)] >> ((c % per) * t.bits)) & ((1 << t.bits) - 1);
}

// Zero point of scale-grid cell (i, j) in a grid `last` wide: each grid row packed on its own.
int zero_point(const Table& t, int64_t i, int64_t j, int64_t last) {
  if (t.zp.empty()) return 1 << (t.bits - 1);
  const int64_t per = 8 / t.bits, row = (last + per - 1) / per;
  return (t.zp[static_cast<size_t>(i * row + j / per)] >> ((j % per) * t.bits)) & ((1 << t.bits) - 1);
}

Table make_table(std::mt19937& rng, int64_t rows, int64_t cols, int64_t bits, int64_t block, bool zp, int quant_axis) {
  Table t{rows, cols, bits, block, {}, {}, {}};
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sc(0.01f, 0.1f);
  t.data.resize(static_cast<size_t>(rows * cols * bits / 8));
  for (auto& v : t.data) v = static_cast<uint8_t>(byte(rng));
  const int64_t grid_rows = quant_axis == 1 ? rows : (rows + block - 1) / block;
  const int64_t grid_cols = quant_axis == 1 ? (cols + block - 1) / block : cols;
  t.scales.resize(static_cast<size_t>(grid_rows * grid_cols));
  for (auto& v : t.scales) v = sc(rng);
  if (zp) {
    const int64_t per = 8 / bits;
    t.zp.resize(static_cast<size_t>(grid_rows * ((grid_cols + per - 1) / per)));
    for (auto& v : t.zp) v = static_cast<uint8_t>(byte(rng));
  }
  return t;
}

Result<std::vector<Value>> gather(const Table& t, const std::vector<int64_t>& idx, Dims idx_shape, int quant_axis,
                                  bool fp16_scales = false) {
  KernelRun run;
  run.op_type = "GatherBlockQuantized";
  run.domain = "com.microsoft";
  run.opset = 1;
  run.attributes = {attr_int("bits", t.bits), attr_int("block_size", t.block), attr_int("gather_axis", 0),
                    attr_int("quantize_axis", quant_axis)};
  const int64_t grid_rows = quant_axis == 1 ? t.rows : (t.rows + t.block - 1) / t.block;
  const int64_t grid_cols = static_cast<int64_t>(t.scales.size()) / grid_rows;
  Value scales = Tensor::from_vector(DataType::kFloat, {grid_rows, grid_cols}, t.scales);
  if (fp16_scales) {
    std::vector<Float16> h;
    for (float v : t.scales) h.push_back(Float16(v));
    scales = Tensor::from_vector(DataType::kFloat16, {grid_rows, grid_cols}, h);
  }
  run.inputs = {Tensor::from_vector(DataType::kUInt8, {t.rows, t.cols * t.bits / 8}, t.data),
                Tensor::from_vector(DataType::kInt64, idx_shape, idx), scales};
  if (!t.zp.empty()) {
    run.inputs.push_back(Tensor::from_vector(DataType::kUInt8, {grid_rows, static_cast<int64_t>(t.zp.size()) / grid_rows}, t.zp));
  }
  run.threads = 2;
  return run_kernel(run);
}

// The expected row for index g (quantize_axis 1 or 0).
std::vector<float> expected_row(const Table& t, int64_t g, int quant_axis, bool fp16_scales) {
  std::vector<float> y(static_cast<size_t>(t.cols), 0.f);
  if (g < 0) g += t.rows;
  if (g < 0 || g >= t.rows) return y;
  for (int64_t c = 0; c < t.cols; ++c) {
    const int64_t i = quant_axis == 1 ? g : g / t.block, j = quant_axis == 1 ? c / t.block : c;
    const int64_t last = quant_axis == 1 ? (t.cols + t.block - 1) / t.block : t.cols;
    float s = t.scales[static_cast<size_t>(i * last + j)];
    if (fp16_scales) s = static_cast<float>(Float16(s));
    y[static_cast<size_t>(c)] = static_cast<float>(code(t, g, c) - zero_point(t, i, j, last)) * s;
  }
  return y;
}

void expect_rows(const Tensor& y, const Table& t, const std::vector<int64_t>& idx, int quant_axis, bool fp16,
                 const std::string& what) {
  ASSERT_EQ(y.numel(), static_cast<int64_t>(idx.size()) * t.cols) << what;
  for (size_t i = 0; i < idx.size(); ++i) {
    const std::vector<float> want = expected_row(t, idx[i], quant_axis, fp16);
    for (int64_t c = 0; c < t.cols; ++c) {
      const float got = fp16 ? static_cast<float>(y.data<Float16>()[static_cast<int64_t>(i) * t.cols + c])
                             : y.data<float>()[static_cast<int64_t>(i) * t.cols + c];
      const float w = fp16 ? static_cast<float>(Float16(want[static_cast<size_t>(c)])) : want[static_cast<size_t>(c)];
      ASSERT_EQ(got, w) << what << " index " << idx[i] << " column " << c;
    }
  }
}

}  // namespace

TEST(ContribGatherBlockQuantized, EmbeddingRowsMatchThePackingRules) {
  std::mt19937 rng(21);
  for (int64_t bits : {4, 8})
    for (bool zp : {true, false})
      for (int64_t cols : {48, 64, 80}) {  // 3, 4 and 5 blocks of 16
        const Table t = make_table(rng, 7, cols, bits, 16, zp, 1);
        const std::vector<int64_t> idx = {6, 0, -1, 3, 7, -8};  // 7 and -8 are out of range: zero rows
        auto y = gather(t, idx, {2, 3}, 1);
        ASSERT_TRUE(y.ok()) << y.status().to_string();
        EXPECT_EQ((*y)[0].tensor().shape(), (Dims{2, 3, cols}));
        expect_rows((*y)[0].tensor(), t, idx, 1, false,
                    "bits " + std::to_string(bits) + " zp " + std::to_string(zp) + " cols " + std::to_string(cols));
      }
  // float16 scales give a float16 table; a prefill-sized gather spreads over the threads.
  const Table t = make_table(rng, 300, 96, 4, 32, true, 1);
  std::vector<int64_t> idx(200);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 37) % 300);
  for (bool fp16 : {false, true}) {
    auto y = gather(t, idx, {1, 200}, 1, fp16);
    ASSERT_TRUE(y.ok()) << y.status().to_string();
    expect_rows((*y)[0].tensor(), t, idx, 1, fp16, fp16 ? "fp16 scales" : "many rows");
  }
}

TEST(ContribGatherBlockQuantized, QuantizedAlongTheGatherAxis) {
  // quantize_axis 0 (the general path): a scale and a zero point per (block of rows, column).
  std::mt19937 rng(22);
  const Table t = make_table(rng, 40, 10, 4, 16, true, 0);
  const std::vector<int64_t> idx = {39, 0, 17};
  auto y = gather(t, idx, {3}, 0);
  ASSERT_TRUE(y.ok()) << y.status().to_string();
  expect_rows((*y)[0].tensor(), t, idx, 0, false, "quantize_axis 0");
}
