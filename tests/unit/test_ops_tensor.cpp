// Unit tests for the shape/movement ops: views, edge cases and malformed inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <limits>

#include "kernel_test_util.h"
#include "nxrt/tensor.h"

using namespace nxrt;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Tensor F(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, std::move(shape), v); }
Tensor I64(Dims shape, std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(DataType::kInt64, std::move(shape), v);
}
Tensor I64v(std::vector<int64_t> v) {
  Dims s{static_cast<int64_t>(v.size())};
  return I64(s, v);
}
Tensor S(Dims shape, std::vector<std::string> v) {
  Tensor t(DataType::kString, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.string_data()[i] = v[i];
  return t;
}
Tensor Iota(Dims shape) {
  Tensor t(DataType::kFloat, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i);
  return t;
}
std::vector<float> fv(const Value& v) {
  Tensor t = v.tensor().contiguous();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}
std::vector<std::string> sv(const Value& v) {
  Tensor t = v.tensor().contiguous();
  return std::vector<std::string>(t.string_data(), t.string_data() + t.numel());
}

Result<std::vector<Value>> run(const std::string& op, std::vector<Value> inputs, std::vector<ir::Attribute> attrs = {},
                               int64_t opset = 21, size_t n_out = 1) {
  KernelRun r;
  r.op_type = op;
  r.opset = opset;
  r.inputs = std::move(inputs);
  r.attributes = std::move(attrs);
  r.num_outputs = n_out;
  return run_kernel(r);
}

}  // namespace

TEST(OpsTensor, ReshapeIsAViewAndInfers) {
  Tensor x = Iota({2, 3, 4});
  auto out = run("Reshape", {x, I64v({0, -1})});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = out.value()[0].tensor();
  EXPECT_EQ(y.shape(), (Dims{2, 12}));
  EXPECT_EQ(y.storage().get(), x.storage().get());
  EXPECT_EQ(y.raw_data(), x.raw_data());
}

TEST(OpsTensor, ReshapeAllowZeroAndOpset1Attribute) {
  Tensor x(DataType::kFloat, {0, 3});
  auto out = run("Reshape", {x, I64v({3, 0})}, {attr_int("allowzero", 1)}, 14);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out.value()[0].tensor().shape(), (Dims{3, 0}));
  auto o1 = run("Reshape", {Iota({2, 3})}, {attr_ints("shape", {3, 2})}, 1);
  ASSERT_TRUE(o1.ok()) << o1.status().to_string();
  EXPECT_EQ(o1.value()[0].tensor().shape(), (Dims{3, 2}));
}

TEST(OpsTensor, ReshapeErrors) {
  auto a = run("Reshape", {Iota({2, 3}), I64v({-1, -1})});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("more than one -1"), std::string::npos);
  auto b = run("Reshape", {Iota({2, 3}), I64v({4, 2})});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("[2,3]"), std::string::npos) << b.status().message();
  EXPECT_NE(b.status().message().find("test_Reshape"), std::string::npos) << b.status().message();
  auto c = run("Reshape", {Iota({6}), I64v({1, 0, 6})});  // 0 copies a dim the input lacks
  EXPECT_FALSE(c.ok());
  auto d = run("Reshape", {Iota({6}), I64v({-3, -2})});
  EXPECT_FALSE(d.ok());
}

TEST(OpsTensor, FlattenSqueezeUnsqueezeAreViews) {
  Tensor x = Iota({2, 1, 3});
  auto f = run("Flatten", {x}, {attr_int("axis", -1)});
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f.value()[0].tensor().shape(), (Dims{2, 3}));
  EXPECT_EQ(f.value()[0].tensor().storage().get(), x.storage().get());
  auto s = run("Squeeze", {x});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value()[0].tensor().shape(), (Dims{2, 3}));
  EXPECT_EQ(s.value()[0].tensor().storage().get(), x.storage().get());
  auto s11 = run("Squeeze", {x}, {attr_ints("axes", {-2})}, 11);
  ASSERT_TRUE(s11.ok());
  EXPECT_EQ(s11.value()[0].tensor().shape(), (Dims{2, 3}));
  auto u = run("Unsqueeze", {x, I64v({0, -1})});
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_EQ(u.value()[0].tensor().shape(), (Dims{1, 2, 1, 3, 1}));
  EXPECT_EQ(u.value()[0].tensor().storage().get(), x.storage().get());
  auto u1 = run("Unsqueeze", {x}, {attr_ints("axes", {1})}, 1);
  ASSERT_TRUE(u1.ok());
  EXPECT_EQ(u1.value()[0].tensor().shape(), (Dims{2, 1, 1, 3}));
}

TEST(OpsTensor, SqueezeUnsqueezeErrors) {
  EXPECT_FALSE(run("Squeeze", {Iota({2, 3}), I64v({0})}).ok());   // dim is not 1
  EXPECT_FALSE(run("Squeeze", {Iota({2, 1}), I64v({5})}).ok());   // out of range
  EXPECT_FALSE(run("Unsqueeze", {Iota({2}), I64v({0, 0})}).ok()); // repeated
  EXPECT_FALSE(run("Unsqueeze", {Iota({2}), I64v({3})}).ok());    // out of range
  EXPECT_FALSE(run("Flatten", {Iota({2}), }, {attr_int("axis", 3)}).ok());
}

TEST(OpsTensor, IdentityPassesSequences) {
  Value seq = Value::sequence({Value(Iota({2})), Value(Iota({3}))});
  auto out = run("Identity", {seq});
  ASSERT_TRUE(out.ok());
  ASSERT_TRUE(out.value()[0].is_sequence());
  EXPECT_EQ(out.value()[0].items().size(), 2u);
  Tensor x = Iota({2});
  auto o2 = run("Identity", {x});
  ASSERT_TRUE(o2.ok());
  EXPECT_EQ(o2.value()[0].tensor().storage().get(), x.storage().get());
}

TEST(OpsTensor, TransposeDefaultAndStrings) {
  auto out = run("Transpose", {Iota({2, 3})});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(fv(out.value()[0]), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  auto s = run("Transpose", {S({2, 2}, {"a", "b", "c", "d"})}, {attr_ints("perm", {1, 0})});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(sv(s.value()[0]), (std::vector<std::string>{"a", "c", "b", "d"}));
  EXPECT_FALSE(run("Transpose", {Iota({2, 3})}, {attr_ints("perm", {0, 0})}).ok());
  EXPECT_FALSE(run("Transpose", {Iota({2, 3})}, {attr_ints("perm", {0, 1, 2})}).ok());
}

TEST(OpsTensor, TransposeInt4) {
  // int4 [2,3] packed low nibble first: values 1..6
  Tensor x(DataType::kInt4, {2, 3});
  uint8_t* p = static_cast<uint8_t*>(x.raw_data());
  p[0] = 0x21;
  p[1] = 0x43;
  p[2] = 0x65;
  auto out = run("Transpose", {x});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const uint8_t* q = static_cast<const uint8_t*>(out.value()[0].tensor().raw_data());
  EXPECT_EQ(q[0], 0x41);  // 1,4
  EXPECT_EQ(q[1], 0x52);  // 2,5
  EXPECT_EQ(q[2], 0x63);  // 3,6
  auto r = run("Reshape", {x, I64v({3, 2})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value()[0].tensor().dtype(), DataType::kInt4);
}

TEST(OpsTensor, SliceNegativeStepsAndClamping) {
  Tensor x = Iota({5});
  auto a = run("Slice", {x, I64v({INT64_MAX}), I64v({INT64_MIN}), I64v({0}), I64v({-2})});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{4, 2, 0}));
  auto b = run("Slice", {x, I64v({-100}), I64v({100})});
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fv(b.value()[0]), (std::vector<float>{0, 1, 2, 3, 4}));
  auto c = run("Slice", {x, I64v({3}), I64v({1})});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value()[0].tensor().shape(), (Dims{0}));
  auto d = run("Slice", {Iota({2, 3})}, {attr_ints("starts", {1}), attr_ints("ends", {3}), attr_ints("axes", {1})}, 9);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(fv(d.value()[0]), (std::vector<float>{1, 2, 4, 5}));
  EXPECT_FALSE(run("Slice", {x, I64v({0}), I64v({1}), I64v({0}), I64v({0})}).ok());    // step 0
  EXPECT_FALSE(run("Slice", {x, I64v({0}), I64v({1}), I64v({1})}).ok());               // bad axis
  EXPECT_FALSE(run("Slice", {x, I64v({0, 0}), I64v({1})}).ok());                        // length mismatch
}

TEST(OpsTensor, ConcatEmptyAndErrors) {
  Tensor e(DataType::kFloat, {0, 2});
  auto a = run("Concat", {Iota({1, 2}), e, Iota({2, 2})}, {attr_int("axis", -2)});
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{0, 1, 0, 1, 2, 3}));
  EXPECT_FALSE(run("Concat", {Iota({1, 2}), Iota({1, 3})}, {attr_int("axis", 0)}).ok());
  EXPECT_FALSE(run("Concat", {Iota({1, 2}), I64({1, 2}, {1, 2})}, {attr_int("axis", 0)}).ok());
  auto s = run("Concat", {S({1}, {"x"}), S({2}, {"y", "z"})}, {attr_int("axis", 0)});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(sv(s.value()[0]), (std::vector<std::string>{"x", "y", "z"}));
}

TEST(OpsTensor, SplitVersions) {
  auto a = run("Split", {Iota({7})}, {attr_int("num_outputs", 3)}, 18, 3);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(fv(a.value()[0]), (std::vector<float>{0, 1, 2}));
  EXPECT_EQ(fv(a.value()[2]), (std::vector<float>{6}));
  auto b = run("Split", {Iota({5})}, {attr_ints("split", {2, 3})}, 11, 2);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(fv(b.value()[1]), (std::vector<float>{2, 3, 4}));
  auto c = run("Split", {Iota({5}), I64v({1, 4})}, {}, 13, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(fv(c.value()[1]), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_FALSE(run("Split", {Iota({5}), I64v({1, 3})}, {}, 13, 2).ok());  // sum mismatch
  EXPECT_FALSE(run("Split", {Iota({5})}, {}, 13, 2).ok());                 // uneven before 18
}

// With every axis before the split axis of size 1, each output is a run of the input: a view of its
// storage (a decode step's [1, 1, N] split copies nothing); otherwise the outputs are copies.
TEST(OpsTensor, SplitOfContiguousRunsIsAView) {
  const Tensor x = Iota({1, 1, 6});
  auto v = run("Split", {x, I64v({2, 4})}, {attr_int("axis", -1)}, 13, 2);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  const Tensor& y1 = v.value()[1].tensor();
  EXPECT_EQ(y1.shape(), (Dims{1, 1, 4}));
  EXPECT_TRUE(y1.is_contiguous());
  EXPECT_EQ(y1.data<float>(), x.data<float>() + 2);
  EXPECT_EQ(fv(v.value()[0]), (std::vector<float>{0, 1}));
  EXPECT_EQ(fv(v.value()[1]), (std::vector<float>{2, 3, 4, 5}));
  const Tensor x2 = Iota({2, 6});
  auto c = run("Split", {x2, I64v({2, 4})}, {attr_int("axis", 1)}, 13, 2);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c.value()[1].tensor().data<float>(), x2.data<float>() + 2);
  EXPECT_EQ(fv(c.value()[1]), (std::vector<float>{2, 3, 4, 5, 8, 9, 10, 11}));
}

TEST(OpsTensor, PadModes) {
  Tensor x = Iota({3});  // 0 1 2
  auto r = run("Pad", {x, I64v({2, 2})}, {attr_string("mode", "reflect")});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(fv(r.value()[0]), (std::vector<float>{2, 1, 0, 1, 2, 1, 0}));
  auto e = run("Pad", {x, I64v({1, 2})}, {attr_string("mode", "edge")});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(fv(e.value()[0]), (std::vector<float>{0, 0, 1, 2, 2, 2}));
  auto w = run("Pad", {x, I64v({2, 1})}, {attr_string("mode", "wrap")});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(fv(w.value()[0]), (std::vector<float>{1, 2, 0, 1, 2, 0}));
  auto c = run("Pad", {x, I64v({-1, 2}), F({}, {7})});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(fv(c.value()[0]), (std::vector<float>{1, 2, 7, 7}));
  auto old = run("Pad", {x}, {attr_ints("pads", {1, 0}), nxrt::testing::attr_float("value", 5)}, 2);
  ASSERT_TRUE(old.ok()) << old.status().to_string();
  EXPECT_EQ(fv(old.value()[0]), (std::vector<float>{5, 0, 1, 2}));
  EXPECT_FALSE(run("Pad", {x, I64v({-2, -2})}).ok());  // negative size
  EXPECT_FALSE(run("Pad", {x, I64v({1})}).ok());       // wrong pads length
  auto ax = run("Pad", {Iota({2, 2}), I64v({1, 0}), Value(), I64v({-1})}, {}, 18);
  ASSERT_TRUE(ax.ok()) << ax.status().to_string();
  EXPECT_EQ(fv(ax.value()[0]), (std::vector<float>{0, 0, 1, 0, 2, 3}));
}

TEST(OpsTensor, TileExpandDepthToSpace) {
  auto t = run("Tile", {Iota({2}), I64v({2})});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(fv(t.value()[0]), (std::vector<float>{0, 1, 0, 1}));
  EXPECT_FALSE(run("Tile", {Iota({2}), I64v({2, 2})}).ok());
  auto e = run("Expand", {Iota({2, 1}), I64v({2, 3})});
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(fv(e.value()[0]), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_FALSE(run("Expand", {Iota({2, 2}), I64v({3, 2})}).ok());
  // DepthToSpace DCR of [1,4,1,1] -> [1,1,2,2]: out[i,j] = c (i*2+j)
  auto d = run("DepthToSpace", {Iota({1, 4, 1, 1})}, {attr_int("blocksize", 2)});
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(fv(d.value()[0]), (std::vector<float>{0, 1, 2, 3}));
  auto s = run("SpaceToDepth", {d.value()[0]}, {attr_int("blocksize", 2)});
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(fv(s.value()[0]), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_FALSE(run("DepthToSpace", {Iota({1, 3, 1, 1})}, {attr_int("blocksize", 2)}).ok());
}

TEST(OpsTensor, ShapeStartEndAndReverseSequence) {
  auto s = run("Shape", {Iota({2, 3, 4})}, {attr_int("start", -2)});
  ASSERT_TRUE(s.ok());
  const Tensor& t = s.value()[0].tensor();
  ASSERT_EQ(t.numel(), 2);
  EXPECT_EQ(t.data<int64_t>()[0], 3);
  auto rs = run("ReverseSequence", {Iota({3, 2}), I64v({2, 5})}, {attr_int("batch_axis", 1), attr_int("time_axis", 0)});
  EXPECT_FALSE(rs.ok());  // sequence length 5 > time dim 3
  auto ok = run("ReverseSequence", {Iota({3, 2}), I64v({2, 3})}, {attr_int("batch_axis", 1), attr_int("time_axis", 0)});
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(fv(ok.value()[0]), (std::vector<float>{2, 5, 0, 3, 4, 1}));
}

namespace {
// Naive transpose reference.
std::vector<float> naive_transpose(const Tensor& x, const std::vector<int64_t>& perm) {
  const Dims& in = x.shape();
  const size_t r = in.size();
  Dims out(r);
  for (size_t i = 0; i < r; ++i) out[i] = in[perm[i]];
  Dims ist = contiguous_strides(in);
  std::vector<float> res(static_cast<size_t>(x.numel()));
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0; k < x.numel(); ++k) {
    int64_t rem = k, off = 0;
    for (size_t i = r; i-- > 0;) {
      idx[i] = rem % out[i];
      rem /= out[i];
      off += idx[i] * ist[perm[i]];
    }
    res[k] = x.data<float>()[off];
  }
  return res;
}
}  // namespace

TEST(OpsTensor, TransposeTiledAndThreadedMatchesNaive) {
  Tensor x = Iota({3, 64, 40, 9});
  std::vector<int64_t> perm = {0, 1, 2, 3};
  do {
    KernelRun r;
    r.op_type = "Transpose";
    r.inputs = {x};
    r.attributes = {attr_ints("perm", perm)};
    r.threads = 3;
    auto out = run_kernel(r);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(fv(out.value()[0]), naive_transpose(x, perm)) << shape_to_string(perm);
  } while (std::next_permutation(perm.begin(), perm.end()));
  Tensor big = Iota({300, 257});
  KernelRun r;
  r.op_type = "Transpose";
  r.inputs = {big};
  r.threads = 4;
  auto out = run_kernel(r);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(fv(out.value()[0]), naive_transpose(big, {1, 0}));
}

TEST(OpsTensor, SubByteConcatSliceAndPad) {
  // uint4 [4] = 1,2,3,4 ; packed low nibble first
  Tensor x(DataType::kUInt4, {4});
  static_cast<uint8_t*>(x.raw_data())[0] = 0x21;
  static_cast<uint8_t*>(x.raw_data())[1] = 0x43;
  auto c = run("Concat", {x, x}, {attr_int("axis", 0)});
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  const auto* cp = static_cast<const uint8_t*>(c.value()[0].tensor().raw_data());
  EXPECT_EQ(cp[2], 0x21);
  EXPECT_EQ(cp[3], 0x43);
  auto s = run("Slice", {x, I64v({1}), I64v({4})});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const auto* sp = static_cast<const uint8_t*>(s.value()[0].tensor().raw_data());
  EXPECT_EQ(sp[0], 0x32);
  EXPECT_EQ(sp[1] & 0x0f, 0x4);
  auto p = run("Pad", {x, I64v({1, 1})}, {attr_string("mode", "edge")});
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const auto* pp = static_cast<const uint8_t*>(p.value()[0].tensor().raw_data());
  EXPECT_EQ(pp[0], 0x11);
  EXPECT_EQ(pp[2], 0x44);
}

TEST(OpsTensor, OneHotTriluCenterCropCol2Im) {
  Tensor vals = F({2}, {0, 5});
  auto o = run("OneHot", {I64v({-1, 3, 1}), I64({}, {3}), vals});
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(fv(o.value()[0]), (std::vector<float>{0, 0, 5, 0, 0, 0, 0, 5, 0}));  // 3 is out of range: all off
  EXPECT_FALSE(run("OneHot", {I64v({0}), I64({}, {0}), vals}).ok());         // depth 0
  EXPECT_FALSE(run("OneHot", {I64v({0}), I64({}, {3}), F({3}, {0, 1, 2})}).ok());  // 3 values
  auto t = run("Trilu", {Iota({2, 3}), I64({}, {1})}, {attr_int("upper", 0)});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(fv(t.value()[0]), (std::vector<float>{0, 1, 0, 3, 4, 5}));
  EXPECT_FALSE(run("Trilu", {Iota({3})}).ok());
  auto cc = run("CenterCropPad", {Iota({3, 1}), I64v({1, 3})});
  ASSERT_TRUE(cc.ok()) << cc.status().to_string();
  EXPECT_EQ(fv(cc.value()[0]), (std::vector<float>{0, 1, 0}));
  EXPECT_FALSE(run("CenterCropPad", {Iota({3, 1}), I64v({1})}).ok());
  // Col2Im: L must match the block count implied by image/block/strides.
  EXPECT_FALSE(run("Col2Im", {Iota({1, 4, 3}), I64v({3, 3}), I64v({2, 2})}, {}, 18).ok());
  auto ci = run("Col2Im", {Iota({1, 4, 4}), I64v({3, 3}), I64v({2, 2})}, {}, 18);
  ASSERT_TRUE(ci.ok()) << ci.status().to_string();
  EXPECT_EQ(ci.value()[0].tensor().shape(), (Dims{1, 1, 3, 3}));
}

TEST(OpsTensor, ImageOpsRejectMalformedInputs) {
  Tensor x = Iota({1, 1, 4, 4});
  // Resize: both scales and sizes given
  EXPECT_FALSE(run("Resize", {x, Value(), F({4}, {1, 1, 2, 2}), I64v({1, 1, 8, 8})}, {}, 19).ok());
  // Resize: scales of the wrong length
  EXPECT_FALSE(run("Resize", {x, Value(), F({2}, {2, 2})}, {}, 19).ok());
  auto up = run("Resize", {x, Value(), F({4}, {1, 1, 2, 2})}, {}, 19);
  ASSERT_TRUE(up.ok()) << up.status().to_string();
  EXPECT_EQ(up.value()[0].tensor().shape(), (Dims{1, 1, 8, 8}));
  // RoiAlign: batch index out of range
  EXPECT_FALSE(run("RoiAlign", {x, F({1, 4}, {0, 0, 1, 1}), I64v({1})}, {}, 16).ok());
  // NonMaxSuppression: boxes/scores shapes disagree
  EXPECT_FALSE(run("NonMaxSuppression", {F({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1}), F({1, 1, 3}, {1, 1, 1})}, {}, 11).ok());
  // GridSample: grid last dim must equal the spatial rank
  EXPECT_FALSE(run("GridSample", {x, F({1, 1, 1, 3}, {0, 0, 0})}, {}, 20).ok());
  // AffineGrid: theta shape must match size
  EXPECT_FALSE(run("AffineGrid", {F({1, 2, 2}, {1, 0, 0, 1}), I64v({1, 1, 2, 2})}, {}, 20).ok());
}

TEST(OpsTensor, HugeOutputShapesAreErrorsNotCrashes) {
  const int64_t big = int64_t{1} << 40;
  EXPECT_FALSE(run("Expand", {Iota({1, 1}), I64v({big, big})}).ok());
  EXPECT_FALSE(run("Tile", {Iota({2, 2}), I64v({big, big})}).ok());
  EXPECT_FALSE(run("Reshape", {Iota({4}), I64v({int64_t{1} << 62, 4, 4})}).ok());
  EXPECT_FALSE(run("Pad", {Iota({2}), I64v({big, big})}).ok());
  EXPECT_FALSE(run("Resize", {Iota({1, 1, 2, 2}), Value(), F({4}, {1, 1, 1e30f, 1e30f})}, {}, 19).ok());
  EXPECT_FALSE(run("OneHot", {I64v({0, 1}), I64({}, {big * 1024}), F({2}, {0, 1})}).ok());
}

TEST(OpsTensor, ExtremeValuesStayDefined) {
  // negative step over an empty axis
  auto s = run("Slice", {Tensor(DataType::kFloat, {0, 2}), I64v({-1}), I64v({INT64_MIN}), I64v({0}), I64v({-1})});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s.value()[0].tensor().shape(), (Dims{0, 2}));
  auto t = run("Trilu", {Iota({2, 2}), I64({}, {INT64_MAX})});
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(fv(t.value()[0]), (std::vector<float>{0, 0, 0, 0}));
  EXPECT_FALSE(run("Tile", {Iota({3}), I64v({INT64_MAX})}).ok());
  EXPECT_FALSE(run("DepthToSpace", {Iota({1, 4, 1, 1})}, {attr_int("blocksize", INT64_MAX)}).ok());
  EXPECT_FALSE(run("Pad", {Iota({2}), I64v({INT64_MAX, 1})}).ok());
  // GridSample with NaN / inf / huge grid coordinates: defined output
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const char* pad : {"zeros", "border", "reflection"}) {
    auto g = run("GridSample", {Iota({1, 1, 2, 2}), F({1, 1, 3, 2}, {nan, 0, inf, -inf, 1e30f, -1e30f})},
                 {attr_string("padding_mode", pad)}, 20);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
  }
  EXPECT_FALSE(run("RoiAlign", {Iota({1, 1, 4, 4}), F({1, 4}, {0, 0, nan, 2}), I64v({0})}, {}, 16).ok());
  auto n = run("NonMaxSuppression", {F({1, 2, 4}, {0, 0, 1, 1, 0, 0, 1, 1}), F({1, 1, 2}, {nan, 0.5f}), I64v({5})},
               {}, 11);
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(n.value()[0].tensor().shape(), (Dims{1, 3}));
}
