// Run-time memory bounds: SessionOptions::memory_limit / NXRT_MEMORY_LIMIT turn an allocation past the
// limit into an error naming the node; a shape whose size overflows, or one too large for the machine,
// is an error too; after any of these the session runs again normally.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "ir/allocation.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "session/buffer_pool.h"

using namespace nxrt;

namespace {

ir::ValueInfo input(const std::string& name, DataType dt, std::vector<ir::Dim> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = dt;
  v.type.has_shape = true;
  v.type.dims = std::move(dims);
  return v;
}

ir::Node make_node(const std::string& name, const std::string& op, std::vector<std::string> in,
                   std::vector<std::string> out) {
  ir::Node n;
  n.name = name;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

// y = Expand(x, shape) + 1: the output's size is whatever the caller's `shape` says. Expand gives a
// broadcast view (no memory), so the first buffer of that size is Add's output: node 'plus_one'.
std::string expand_model() {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.inputs.push_back(input("x", DataType::kFloat, {ir::Dim::fixed(1)}));
  m.graph.inputs.push_back(input("shape", DataType::kInt64, {ir::Dim::fixed(2)}));
  m.graph.initializers["one"] = Tensor::scalar_float(1.f);
  m.graph.nodes.push_back(make_node("grow", "Expand", {"x", "shape"}, {"big"}));
  m.graph.nodes.push_back(make_node("plus_one", "Add", {"big", "one"}, {"y"}));
  ir::ValueInfo y;
  y.name = "y";
  y.type.kind = ir::TypeInfo::Kind::kTensor;
  y.type.elem_type = DataType::kFloat;
  m.graph.outputs.push_back(y);
  return onnx::serialize_model(m);
}

std::vector<std::pair<std::string, Value>> feeds(int64_t rows, int64_t cols) {
  return {{"x", Value(Tensor::from_vector<float>(DataType::kFloat, {1}, {2.f}))},
          {"shape", Value(Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {rows, cols}))}};
}

std::unique_ptr<Session> make_session(size_t memory_limit) {
  const std::string bytes = expand_model();
  SessionOptions o;
  o.memory_limit = memory_limit;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return s.ok() ? std::move(s).value() : nullptr;
}

// A run that must succeed: y is all 3.
void expect_runs(Session& s, int64_t rows, int64_t cols) {
  auto r = s.run(feeds(rows, cols));
  ASSERT_TRUE(r.ok()) << r.status().message();
  const Tensor& y = (*r)[0].tensor();
  ASSERT_EQ(y.numel(), rows * cols);
  EXPECT_EQ(y.data<float>()[0], 3.f);
  EXPECT_EQ(y.data<float>()[rows * cols - 1], 3.f);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kUnderAsan = true;
#else
constexpr bool kUnderAsan = false;
#endif
#else
constexpr bool kUnderAsan = false;
#endif

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

}  // namespace

TEST(MemoryLimit, OverTheLimitIsAnErrorNamingTheNode) {
  auto s = make_session(size_t{1} << 20);  // 1 MiB
  ASSERT_TRUE(s);
  expect_runs(*s, 256, 256);  // 256 KiB for `big`, the same for y
  auto r = s->run(feeds(1024, 512));  // 2 MiB
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kRuntimeError);
  EXPECT_HAS(r.status().message(), "node 'plus_one'");
  EXPECT_HAS(r.status().message(), "memory limit exceeded: a new buffer of 2097152 bytes would take the session's "
                                   "buffers from ");
  EXPECT_HAS(r.status().message(), "past its limit of 1048576 (SessionOptions::memory_limit / NXRT_MEMORY_LIMIT)");
  // The failed run left the session as it was.
  expect_runs(*s, 256, 256);
  EXPECT_LE(s->memory_stats().bytes, size_t{1} << 20);
}

TEST(MemoryLimit, FreeBlocksAreGivenBackBeforeRefusing) {
  // Two runs of 384 KiB buffers fill most of a 1 MiB pool; a run of different sizes only fits once
  // the free blocks of the earlier shapes are released.
  auto s = make_session(size_t{1} << 20);
  ASSERT_TRUE(s);
  expect_runs(*s, 384, 256);
  expect_runs(*s, 480, 256);
  expect_runs(*s, 500, 256);
  EXPECT_LE(s->memory_stats().bytes, size_t{1} << 20);
}

TEST(MemoryLimit, FromTheEnvironment) {
  {
    ScopedEnv env("NXRT_MEMORY_LIMIT", "1M");
    auto s = make_session(0);
    ASSERT_TRUE(s);
    auto r = s->run(feeds(1024, 512));
    ASSERT_FALSE(r.ok());
    EXPECT_HAS(r.status().message(), "limit of 1048576");
    // The option wins over the environment.
    auto t = make_session(size_t{8} << 20);
    ASSERT_TRUE(t);
    expect_runs(*t, 1024, 512);
  }
  ScopedEnv bad("NXRT_MEMORY_LIMIT", "lots");
  const std::string bytes = expand_model();
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  EXPECT_HAS(s.status().message(),
             "NXRT_MEMORY_LIMIT='lots' is not a byte count (digits and an optional K, M, G or T)");
}

TEST(MemoryLimit, ParseByteSize) {
  using session::parse_byte_size;
  EXPECT_EQ(parse_byte_size("1048576", "x").value(), size_t{1} << 20);
  EXPECT_EQ(parse_byte_size("512M", "x").value(), size_t{512} << 20);
  EXPECT_EQ(parse_byte_size("2g", "x").value(), size_t{2} << 30);
  EXPECT_EQ(parse_byte_size("3KiB", "x").value(), size_t{3} << 10);
  EXPECT_EQ(parse_byte_size("1TB", "x").value(), size_t{1} << 40);
  EXPECT_FALSE(parse_byte_size("", "x").ok());
  EXPECT_FALSE(parse_byte_size("M", "x").ok());
  EXPECT_FALSE(parse_byte_size("-1", "x").ok());
  EXPECT_FALSE(parse_byte_size("5X", "x").ok());
  EXPECT_HAS(parse_byte_size("99999999999999999999", "x").status().message(), "is too large");
  EXPECT_HAS(parse_byte_size("17179869184G", "x").status().message(), "is too large");
}

TEST(MemoryLimit, ShapesTooLargeForAnyMemory) {
  auto s = make_session(0);  // no limit
  ASSERT_TRUE(s);
  // 2^32 x 2^32 floats: Expand itself refuses a shape of more than 2^40 elements.
  auto r = s->run(feeds(int64_t{1} << 32, int64_t{1} << 32));
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "node 'grow'");
  EXPECT_HAS(r.status().message(), "is invalid or too large");
  // 2^40 floats (4 TiB) pass Expand's bound but no machine has them: Add's allocation fails, as an error.
  // (AddressSanitizer reports such a request and stops, unless ASAN_OPTIONS has
  // allocator_may_return_null=1, as `make asan-test` sets.)
  const char* asan = std::getenv("ASAN_OPTIONS");
  if (!kUnderAsan || (asan && std::string(asan).find("allocator_may_return_null=1") != std::string::npos)) {
    r = s->run(feeds(int64_t{1} << 20, int64_t{1} << 20));
    ASSERT_FALSE(r.ok());
    EXPECT_HAS(r.status().message(), "node 'plus_one'");
    EXPECT_HAS(r.status().message(), "cannot allocate 4398046511104 bytes");
  }
  expect_runs(*s, 16, 16);
  // A plain tensor of an impossible shape.
  EXPECT_THROW(Tensor(DataType::kFloat, {int64_t{1} << 40, int64_t{1} << 40}), AllocationError);
  EXPECT_THROW(Tensor(DataType::kString, {int64_t{1} << 62}), AllocationError);
  EXPECT_THROW(Tensor(DataType::kFloat, {-2}), AllocationError);
  size_t bytes = 0;
  EXPECT_TRUE(shape_storage_bytes(DataType::kInt4, {3, 3}, &bytes));
  EXPECT_EQ(bytes, 5u);
  EXPECT_FALSE(shape_storage_bytes(DataType::kDouble, {int64_t{1} << 61}, &bytes));
}
