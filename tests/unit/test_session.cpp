// The public Session API on models built in memory.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "nxrt/session.h"
#include "onnx/model_writer.h"

using namespace nxrt;

namespace {

// y = Relu(x + w) with w an initializer: float32[2,3].
ir::Model relu_add_ir() {
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
  return m;
}
std::string relu_add_model() { return onnx::serialize_model(relu_add_ir()); }

}  // namespace

// Kernel override pool=exact: the session runs on exactly `threads` threads even past this machine's
// CPUs (here 4 on any machine: same result as 1 thread), and refuses more than the pool's limit with an
// error naming both, instead of trying to start thousands of threads.
TEST(Session, ExactPoolRunsPastTheCpusAndRefusesAbsurdCounts) {
  const std::string bytes = relu_add_model();
  const Value x(Tensor::from_vector<float>(DataType::kFloat, {2, 3}, {0, 0, 0, 1, 1, 1}));
  SessionOptions o;
  o.threads = 4;
  o.kernel_overrides = {{"pool", "exact"}};
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto out = (*s)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  EXPECT_EQ(std::vector<float>(y.data<float>(), y.data<float>() + 6), (std::vector<float>{1, 0, 0.5f, 2, 0, 1.5f}));
  o.threads = 100000;
  auto refused = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("pool=exact takes at most 256 threads; SessionOptions::threads is 100000"),
            std::string::npos)
      << refused.status().message();
}

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

TEST(Session, MetadataIsTheFilesDescriptiveFields) {
  ir::Model m = relu_add_ir();
  m.producer_name = "unit";
  m.producer_version = "1.2";
  m.domain = "ai.test";
  m.model_version = 7;
  m.doc = "adds then clamps";
  m.graph.doc = "the graph";
  m.metadata_props = {{"b", "2"}, {"a", "1"}};
  const std::string bytes = onnx::serialize_model(m);
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const ModelMetadata& md = (*s)->metadata();
  EXPECT_EQ(md.ir_version, 8);
  EXPECT_EQ(md.producer_name, "unit");
  EXPECT_EQ(md.producer_version, "1.2");
  EXPECT_EQ(md.domain, "ai.test");
  EXPECT_EQ(md.model_version, 7);
  EXPECT_EQ(md.description, "adds then clamps");
  EXPECT_EQ(md.graph_name, "g");
  EXPECT_EQ(md.graph_description, "the graph");
  ASSERT_EQ(md.custom.size(), 2u);  // file order kept
  EXPECT_EQ(md.custom[0], (std::pair<std::string, std::string>{"b", "2"}));
  EXPECT_EQ(md.custom[1], (std::pair<std::string, std::string>{"a", "1"}));
}

TEST(Session, EndProfilingWritesTheTraceOnceAndStops) {
  const std::string bytes = relu_add_model();
  const std::string path = ::testing::TempDir() + "nxrt_end_profiling.json";
  std::remove(path.c_str());
  SessionOptions o;
  o.trace_path = path;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->run({{"x", Value(Tensor(DataType::kFloat, {1, 3}))}}).ok());
  auto written = (*s)->end_profiling();
  ASSERT_TRUE(written.ok()) << written.status().to_string();
  EXPECT_EQ(*written, path);
  std::stringstream text;
  text << std::ifstream(path).rdbuf();
  EXPECT_NE(text.str().find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(text.str().find("\"name\":\"Relu\""), std::string::npos) << text.str();
  // Tracing stopped: a second call has nothing to write, and runs still work.
  auto again = (*s)->end_profiling();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, "");
  EXPECT_TRUE((*s)->run({{"x", Value(Tensor(DataType::kFloat, {1, 3}))}}).ok());
  std::remove(path.c_str());

  auto untraced = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(untraced.ok());
  auto none = (*untraced)->end_profiling();
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");
}

TEST(Session, OptimizedModelPathWritesALoadableModel) {
  const std::string bytes = relu_add_model();
  const std::string path = ::testing::TempDir() + "nxrt_optimized.onnx";
  std::remove(path.c_str());
  SessionOptions o;
  o.optimized_model_path = path;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto reloaded = Session::create(path);
  ASSERT_TRUE(reloaded.ok()) << reloaded.status().to_string();
  const auto x = Value(Tensor::from_vector<float>(DataType::kFloat, {1, 3}, {1, 2, 3}));
  auto a = (*s)->run({{"x", x}});
  auto b = (*reloaded)->run({{"x", x}});
  ASSERT_TRUE(a.ok() && b.ok());
  const float* pa = (*a)[0].tensor().data<float>();
  const float* pb = (*b)[0].tensor().data<float>();
  EXPECT_EQ(std::vector<float>(pa, pa + 3), std::vector<float>(pb, pb + 3));
  std::remove(path.c_str());

  o.optimized_model_path = ::testing::TempDir() + "no/such/folder/model.onnx";
  auto unwritable = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  ASSERT_FALSE(unwritable.ok());
  EXPECT_EQ(unwritable.status().code(), StatusCode::kIoError);
  EXPECT_NE(unwritable.status().message().find("optimized model"), std::string::npos);
}

TEST(Session, IoBindingClearsInputsAndOutputsSeparately) {
  const std::string bytes = relu_add_model();
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(s.ok());
  IoBinding b;
  b.bind_input("x", Value(Tensor::from_vector<float>(DataType::kFloat, {1, 3}, {1, 1, 1})));
  b.bind_output("y");
  ASSERT_EQ(b.num_outputs(), 1u);
  EXPECT_EQ(b.output_name(0), "y");
  ASSERT_TRUE((*s)->run(b).ok());
  b.clear_outputs();
  EXPECT_EQ(b.num_outputs(), 0u);
  b.bind_output("y");
  ASSERT_TRUE((*s)->run(b).ok());  // the input is still bound
  EXPECT_FLOAT_EQ(b.output(0).tensor().data<float>()[0], 2.f);
  b.clear_inputs();
  EXPECT_EQ(b.num_outputs(), 1u);
  Status missing = (*s)->run(b);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("required but was not bound"), std::string::npos) << missing.message();
}

TEST(Session, UnknownOptLevelInTheEnvironmentIsAnError) {
  const std::string bytes = relu_add_model();
  ::setenv("NXRT_OPT_LEVEL", "fastest", 1);
  auto bad = Session::create_from_bytes(bytes.data(), bytes.size());
  ::setenv("NXRT_OPT_LEVEL", "basic", 1);
  auto good = Session::create_from_bytes(bytes.data(), bytes.size());
  ::unsetenv("NXRT_OPT_LEVEL");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("NXRT_OPT_LEVEL=fastest"), std::string::npos) << bad.status().to_string();
  EXPECT_TRUE(good.ok()) << good.status().to_string();
}
