// Shape arithmetic on dims and attributes a model declares: a result outside int64 is a load error
// naming the node (src/shape/symbolic.h), never signed overflow; attributes cannot make inference loop
// for as long as they say.
#include <gtest/gtest.h>

#include <climits>
#include <string>
#include <vector>

#include "shape/shape_inference.h"
#include "shape/symbolic.h"

using namespace nxrt;

namespace {

ir::ValueInfo float_input(const std::string& name, std::vector<int64_t> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = DataType::kFloat;
  v.type.has_shape = true;
  for (int64_t d : dims) v.type.dims.push_back(ir::Dim::fixed(d));
  return v;
}

ir::Attribute ints(const std::string& name, std::vector<int64_t> v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kInts;
  a.ints = std::move(v);
  return a;
}

ir::Attribute int_attr(const std::string& name, int64_t v) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kInt;
  a.i = v;
  return a;
}

ir::Node make_node(const std::string& name, const std::string& op, std::vector<std::string> in,
                   std::vector<std::string> out, std::vector<ir::Attribute> attrs = {}) {
  ir::Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.attributes = std::move(attrs);
  return n;
}

Tensor i64s(std::vector<int64_t> v) {
  return Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
}

std::string infer_error(ir::Model& m) {
  if (m.opset_imports.empty()) m.opset_imports.push_back({"", 18});
  Status s = shape::infer_shapes(m);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidModel) << s.message();
  return s.message();
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

}  // namespace

TEST(ShapeOverflow, CheckedIntegerHelpers) {
  EXPECT_EQ(shape::take_overflow_note(), "");
  EXPECT_EQ(shape::mul_i(int64_t{1} << 31, int64_t{1} << 31), int64_t{1} << 62);
  EXPECT_EQ(shape::take_overflow_note(), "");
  EXPECT_EQ(shape::mul_i(int64_t{1} << 32, int64_t{1} << 32), INT64_MAX);
  EXPECT_EQ(shape::mul_i(int64_t{1} << 32, -(int64_t{1} << 32)), INT64_MIN);
  EXPECT_EQ(shape::take_overflow_note(), "4294967296 * 4294967296");  // the first one
  EXPECT_EQ(shape::take_overflow_note(), "");
  EXPECT_EQ(shape::add_i(INT64_MAX, 1), INT64_MAX);
  EXPECT_EQ(shape::sub_i(INT64_MIN, 1), INT64_MIN);
  EXPECT_EQ(shape::take_overflow_note(), "9223372036854775807 + 1");
  EXPECT_EQ(shape::floordiv_i(INT64_MIN, -1), INT64_MAX);
  EXPECT_EQ(shape::take_overflow_note(), "0 - -9223372036854775808");
  EXPECT_EQ(shape::floordiv_i(-7, 2), -4);
  EXPECT_EQ(shape::ceildiv_i(-7, 2), -3);
  EXPECT_EQ(shape::ceildiv_i(7, 2), 4);
  EXPECT_EQ(shape::ceildiv_i(7, -1), -7);
  EXPECT_EQ(shape::take_overflow_note(), "");
}

TEST(ShapeOverflow, ReshapeOfAHugeInput) {
  // float[2^32, 2^32] has 2^64 elements: Reshape to [-1] would compute that count.
  ir::Model m;
  m.graph.inputs.push_back(float_input("x", {int64_t{1} << 32, int64_t{1} << 32}));
  m.graph.initializers["shape"] = i64s({-1});
  m.graph.nodes.push_back(make_node("flat", "Reshape", {"x", "shape"}, {"y"}));
  EXPECT_HAS(infer_error(m), "flat");
  EXPECT_HAS(infer_error(m), "dim arithmetic overflows int64 (4294967296 * 4294967296)");
}

TEST(ShapeOverflow, ConvKernelAndDilation) {
  ir::Model m;
  m.graph.inputs.push_back(float_input("x", {1, 1, 8, 8}));
  m.graph.inputs.push_back(float_input("w", {1, 1, 3, 3}));
  m.graph.nodes.push_back(make_node("conv", "Conv", {"x", "w"}, {"y"},
                                    {ints("kernel_shape", {3, int64_t{1} << 40}), ints("dilations", {1, int64_t{1} << 40})}));
  EXPECT_HAS(infer_error(m), "dim arithmetic overflows int64");
}

TEST(ShapeOverflow, WindowPadsStridesAndZeroStride) {
  // The output size of a window op is computed once checked, then by the rule the kernels share
  // (shape/window_size.h), which is not: pads and strides near INT64_MAX must stop at the check.
  {
    ir::Model m;
    m.graph.inputs.push_back(float_input("x", {1, 1, 8, 8}));
    m.graph.nodes.push_back(make_node("pool", "MaxPool", {"x"}, {"y"},
                                      {ints("kernel_shape", {2, 2}), ints("pads", {INT64_MAX - 2, 0, 0, 0}),
                                       int_attr("ceil_mode", 1)}));
    EXPECT_HAS(infer_error(m), "dim arithmetic overflows int64");
  }
  {
    ir::Model m;
    m.graph.inputs.push_back(float_input("x", {1, 1, 8, 8}));
    m.graph.nodes.push_back(make_node("pool", "MaxPool", {"x"}, {"y"},
                                      {ints("kernel_shape", {2, 2}), ints("strides", {INT64_MAX, 1}),
                                       int_attr("ceil_mode", 1)}));
    EXPECT_HAS(infer_error(m), "dim arithmetic overflows int64");
  }
  // A zero stride divides by nothing at load: the dim stays unknown and the kernel refuses it at run.
  ir::Model m;
  m.opset_imports.push_back({"", 18});
  m.graph.inputs.push_back(float_input("x", {1, 1, 8, 8}));
  m.graph.inputs.push_back(float_input("w", {1, 1, 3, 3}));
  m.graph.nodes.push_back(make_node("conv", "Conv", {"x", "w"}, {"y"}, {ints("strides", {0, 1})}));
  Status s = shape::infer_shapes(m);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST(ShapeOverflow, RangeOverTheWholeInt64Line) {
  ir::Model m;
  m.graph.initializers["start"] = Tensor::scalar_int64(INT64_MIN);
  m.graph.initializers["limit"] = Tensor::scalar_int64(INT64_MAX);
  m.graph.initializers["delta"] = Tensor::scalar_int64(1);
  m.graph.nodes.push_back(make_node("range", "Range", {"start", "limit", "delta"}, {"y"}));
  EXPECT_HAS(infer_error(m), "node 'range'");
  EXPECT_HAS(infer_error(m), "dim arithmetic overflows int64 (9223372036854775807 - -9223372036854775808)");
}

TEST(ShapeOverflow, SplitSizesAndHugeNumOutputs) {
  ir::Model m;
  m.graph.inputs.push_back(float_input("x", {6}));
  m.graph.initializers["sizes"] = i64s({INT64_MAX, 7});
  m.graph.nodes.push_back(make_node("split", "Split", {"x", "sizes"}, {"a", "b"}));
  EXPECT_HAS(infer_error(m), "dim arithmetic overflows int64 (9223372036854775807 + 7)");

  // num_outputs of 2^40 on a two-output node: inference makes the two parts it needs, at once.
  ir::Model k;
  k.opset_imports.push_back({"", 18});
  k.graph.inputs.push_back(float_input("x", {6}));
  k.graph.nodes.push_back(make_node("split", "Split", {"x"}, {"a", "b"}, {int_attr("num_outputs", int64_t{1} << 40)}));
  ASSERT_TRUE(shape::infer_shapes(k).ok());
  const ir::ValueFacts* a = k.graph.shape_facts->find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->dims.size(), 1u);
  EXPECT_TRUE(a->dims[0].is_const());
  EXPECT_EQ(a->dims[0].value, 1);  // ceil(6 / 2^40)
}
