// The public Session API on models built in memory.
#include <gtest/gtest.h>

#include "nxrt/session.h"
#include "onnx/model_writer.h"

using namespace nxrt;

namespace {

// y = Relu(x + w) with w an initializer: float32[2,3].
std::string relu_add_model() {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  ir::Graph& g = m.graph;
  g.name = "g";
  ir::ValueInfo x;
  x.name = "x";
  x.type.kind = ir::TypeInfo::Kind::kTensor;
  x.type.elem_type = DataType::kFloat;
  x.type.has_shape = true;
  x.type.dims = {ir::Dim::named("batch"), ir::Dim::fixed(3)};
  ir::ValueInfo y = x;
  y.name = "y";
  g.inputs = {x};
  g.outputs = {y};
  g.initializers["w"] = Tensor::from_vector<float>(DataType::kFloat, {3}, {1.f, -10.f, 0.5f});
  ir::Node add;
  add.name = "add";
  add.op_type = "Add";
  add.inputs = {"x", "w"};
  add.outputs = {"s"};
  ir::Node relu;
  relu.name = "relu";
  relu.op_type = "Relu";
  relu.inputs = {"s"};
  relu.outputs = {"y"};
  g.nodes = {add, relu};
  return onnx::serialize_model(m);
}

}  // namespace

TEST(Session, FromBytesOutlivesTheCallersBuffer) {
  std::string bytes = relu_add_model();
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  std::fill(bytes.begin(), bytes.end(), '\xff');  // the caller reuses its buffer
  bytes.clear();
  bytes.shrink_to_fit();
  ASSERT_EQ((*s)->inputs().size(), 1u);
  EXPECT_EQ((*s)->inputs()[0].describe(), "tensor(float32)[batch,3]");
  auto out = (*s)->run({{"x", Value(Tensor::from_vector<float>(DataType::kFloat, {2, 3}, {0, 0, 0, 1, 1, 1}))}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  ASSERT_EQ(y.shape(), (Dims{2, 3}));
  std::vector<float> got(y.data<float>(), y.data<float>() + 6);
  EXPECT_EQ(got, (std::vector<float>{1, 0, 0.5f, 2, 0, 1.5f}));
}

TEST(Session, FeedErrorsNameTheInput) {
  std::string bytes = relu_add_model();
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok());
  auto bad_dtype = (*s)->run({{"x", Value(Tensor(DataType::kInt32, {2, 3}))}});
  ASSERT_FALSE(bad_dtype.ok());
  EXPECT_NE(bad_dtype.status().message().find("'x'"), std::string::npos);
  EXPECT_NE(bad_dtype.status().message().find("int32"), std::string::npos);
  auto bad_dim = (*s)->run({{"x", Value(Tensor(DataType::kFloat, {2, 4}))}});
  ASSERT_FALSE(bad_dim.ok());
  EXPECT_NE(bad_dim.status().message().find("dimension 1 must be 3"), std::string::npos) << bad_dim.status().message();
  auto missing = (*s)->run({});
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("required"), std::string::npos);
  auto unknown = (*s)->run({{"nope", Value(Tensor(DataType::kFloat, {1, 3}))}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
}

TEST(Session, MalformedBytesAreAnErrorNotACrash) {
  std::string bytes = relu_add_model();
  for (size_t cut : {size_t{1}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    auto s = Session::create_from_bytes(bytes.data(), cut);
    EXPECT_FALSE(s.ok()) << "cut at " << cut;
  }
}
