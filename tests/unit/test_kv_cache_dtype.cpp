// SessionOptions::kv_cache_dtype on a one-node GroupQueryAttention graph: the past inputs and present
// outputs become float16 and the session runs on float16 feeds (present equal to the float32 session's
// present rounded to float16); a node whose cache another node also reads is left as declared; any type
// but float16 is refused, naming the option.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "ir/tensor_util.h"
#include "kernel_test_util.h"
#include "optimizer_test_util.h"

using namespace nxrt;
using namespace nxrt::optest;

namespace {

constexpr int64_t kHeads = 2, kKvHeads = 1, kHead = 8, kCap = 6;

// y, present_key, present_value = GroupQueryAttention(q, k, v, past_key, past_value, seqlens_k, total).
// `extra_reader`: an Identity also reads past_key (output "past_copy").
ir::Model gqa_model(bool extra_reader) {
  ModelBuilder b(17);
  b.m.opset_imports.push_back({"com.microsoft", 1});
  b.input("q", {1, 1, kHeads * kHead});
  b.input("k", {1, 1, kKvHeads * kHead});
  b.input("v", {1, 1, kKvHeads * kHead});
  b.input("past_key", {1, kKvHeads, kCap, kHead});
  b.input("past_value", {1, kKvHeads, kCap, kHead});
  for (const char* name : {"seqlens_k", "total"}) {
    ir::ValueInfo i = ModelBuilder::vi(name, std::string(name) == "total" ? std::vector<int64_t>{} : std::vector<int64_t>{1});
    i.type.elem_type = DataType::kInt32;
    b.m.graph.inputs.push_back(i);
  }
  ir::Node& n = b.node("GroupQueryAttention", {"q", "k", "v", "past_key", "past_value", "seqlens_k", "total"},
                       {"y", "present_key", "present_value"},
                       {nxrt::testing::attr_int("num_heads", kHeads), nxrt::testing::attr_int("kv_num_heads", kKvHeads)});
  n.domain = "com.microsoft";
  for (const char* o : {"y", "present_key", "present_value"}) b.output(o);
  if (extra_reader) {
    b.node("Identity", {"past_key"}, {"past_copy"});
    b.output("past_copy");
  }
  return b.m;
}

Result<std::unique_ptr<Session>> session_of(const ir::Model& m, DataType kv) {
  const std::string bytes = onnx::serialize_model(m);
  SessionOptions so;
  so.kv_cache_dtype = kv;
  return Session::create_from_bytes(bytes.data(), bytes.size(), so);
}

DataType declared(const std::vector<ValueMeta>& vs, const std::string& name) {
  for (const auto& v : vs)
    if (v.name == name) return v.dtype;
  return DataType::kUndefined;
}

Tensor as_f16(const Tensor& t) {
  Tensor h(DataType::kFloat16, t.shape());
  EXPECT_TRUE(ir::store_floats(t.data<float>(), t.numel(), DataType::kFloat16, h.raw_data()).ok());
  return h;
}

Tensor as_f32(const Tensor& t) {
  Tensor f(DataType::kFloat, t.shape());
  EXPECT_TRUE(ir::load_floats(t.dtype(), t.raw_data(), t.numel(), f.data<float>()).ok());
  return f;
}

}  // namespace

TEST(KvCacheDtype, RetypesThePastsAndPresentsAndRuns) {
  const ir::Model m = gqa_model(false);
  auto half = session_of(m, DataType::kFloat16);
  ASSERT_TRUE(half.ok()) << half.status().to_string();
  const std::vector<std::string> want = {"past_key", "past_value", "present_key", "present_value"};
  std::vector<std::string> got = (*half)->kv_cache_retyped();
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, want);
  for (const char* name : {"past_key", "past_value"}) EXPECT_EQ(declared((*half)->inputs(), name), DataType::kFloat16) << name;
  for (const char* name : {"present_key", "present_value"}) EXPECT_EQ(declared((*half)->outputs(), name), DataType::kFloat16) << name;
  EXPECT_EQ(declared((*half)->inputs(), "q"), DataType::kFloat);
  EXPECT_EQ(declared((*half)->outputs(), "y"), DataType::kFloat);

  // Three cached rows, one new: float16 feeds against the float32 session on the same (rounded) past.
  const Tensor past_k = as_f32(as_f16(random_tensor({1, kKvHeads, kCap, kHead}, 5)));
  const Tensor past_v = as_f32(as_f16(random_tensor({1, kKvHeads, kCap, kHead}, 6)));
  std::map<std::string, Value> feeds = {
      {"q", Value(random_tensor({1, 1, kHeads * kHead}, 1))}, {"k", Value(random_tensor({1, 1, kKvHeads * kHead}, 2))},
      {"v", Value(random_tensor({1, 1, kKvHeads * kHead}, 3))},
      {"seqlens_k", Value(Tensor::from_vector<int32_t>(DataType::kInt32, {1}, {3}))},
      {"total", Value(Tensor::from_vector<int32_t>(DataType::kInt32, {}, {4}))}};
  auto plain = session_of(m, DataType::kUndefined);
  ASSERT_TRUE(plain.ok()) << plain.status().to_string();
  EXPECT_TRUE((*plain)->kv_cache_retyped().empty());
  feeds["past_key"] = Value(past_k);
  feeds["past_value"] = Value(past_v);
  auto r32 = (*plain)->run(std::vector<std::pair<std::string, Value>>(feeds.begin(), feeds.end()));
  ASSERT_TRUE(r32.ok()) << r32.status().to_string();
  feeds["past_key"] = Value(as_f16(past_k));
  feeds["past_value"] = Value(as_f16(past_v));
  auto r16 = (*half)->run(std::vector<std::pair<std::string, Value>>(feeds.begin(), feeds.end()));
  ASSERT_TRUE(r16.ok()) << r16.status().to_string();
  for (size_t o : {1u, 2u}) {
    const Tensor& p16 = (*r16)[o].tensor();
    ASSERT_EQ(p16.dtype(), DataType::kFloat16);
    const Tensor want16 = as_f16((*r32)[o].tensor());
    ASSERT_EQ(p16.shape(), want16.shape());
    EXPECT_EQ(std::memcmp(p16.raw_data(), want16.raw_data(), static_cast<size_t>(p16.numel()) * 2), 0) << "present " << o;
  }
  const Tensor& y16 = (*r16)[0].tensor();
  const Tensor& y32 = (*r32)[0].tensor();
  ASSERT_EQ(y16.dtype(), DataType::kFloat);
  for (int64_t i = 0; i < y32.numel(); ++i) EXPECT_NEAR(y16.data<float>()[i], y32.data<float>()[i], 5e-3) << i;
}

TEST(KvCacheDtype, LeavesACacheAnotherNodeReads) {
  auto s = session_of(gqa_model(true), DataType::kFloat16);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE((*s)->kv_cache_retyped().empty());
  EXPECT_EQ(declared((*s)->inputs(), "past_key"), DataType::kFloat);
  EXPECT_EQ(declared((*s)->outputs(), "present_key"), DataType::kFloat);
}

TEST(KvCacheDtype, OnlyFloat16CanBeAskedFor) {
  for (DataType t : {DataType::kInt8, DataType::kFloat, DataType::kBFloat16}) {
    auto s = session_of(gqa_model(false), t);
    ASSERT_FALSE(s.ok()) << dtype_name(t);
    EXPECT_EQ(s.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("kv_cache_dtype"), std::string::npos) << s.status().to_string();
  }
}
