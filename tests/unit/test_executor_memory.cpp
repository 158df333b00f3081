// The executor's memory mechanisms through the public API: buffer reuse across runs (stable addresses,
// zero allocations in a steady-state decode loop), the shape-keyed kernel cache, caller-bound outputs
// with spare capacity, zero-copy views, and a Loop that does not allocate per iteration.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "alloc_counter.h"
#include "kernel_test_util.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "session/executor.h"

using namespace nxrt;
using nxrt::test::AllocCounter;
using nxrt::testing::graph_node;
using nxrt::testing::random_tensor;
using nxrt::testing::tensor_info;

namespace {

// capture: SessionOptions::capture (-1: from NXRT_CAPTURE, on by default).
std::unique_ptr<Session> make_session(const ir::Model& m, int capture = -1) {
  std::string bytes = onnx::serialize_model(m);
  SessionOptions o;
  o.capture = capture;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

constexpr int64_t kCap = 16;   // KV capacity
constexpr int64_t kHid = 16;   // hidden size
constexpr int64_t kVocab = 32;

// A one-layer, one-head decode step over a fixed-capacity KV cache (opset 24):
//   k = x Wk, q = x Wq; cache = TensorScatter(past, k, pos); p = Softmax(q cache^T + mask);
//   logits = (p cache) Wo.
// `past` and `present` are meant to be bound to one buffer, so the step appends in place.
ir::Model decode_step_model() {
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 24});
  ir::Graph& g = m.graph;
  g.name = "decode";
  g.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(kHid)}),
              tensor_info("past", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(1), ir::Dim::fixed(kCap), ir::Dim::fixed(kHid)}),
              tensor_info("pos", DataType::kInt64, {ir::Dim::fixed(1)}),
              tensor_info("mask", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(kCap)})};
  g.outputs = {tensor_info("logits", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(kVocab)}),
               tensor_info("present", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(1), ir::Dim::fixed(kCap), ir::Dim::fixed(kHid)})};
  g.initializers["Wk"] = random_tensor({kHid, kHid}, 1);
  g.initializers["Wq"] = random_tensor({kHid, kHid}, 2);
  g.initializers["Wo"] = random_tensor({kHid, kVocab}, 3);
  g.initializers["kshape"] = Tensor::from_vector<int64_t>(DataType::kInt64, {4}, {1, 1, 1, kHid});
  g.initializers["flat"] = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, kHid});
  g.nodes = {
      graph_node("MatMul", {"x", "Wk"}, {"k2"}),
      graph_node("Reshape", {"k2", "kshape"}, {"k"}),
      graph_node("TensorScatter", {"past", "k", "pos"}, {"present"}, {nxrt::testing::attr_int("axis", 2)}),
      graph_node("MatMul", {"x", "Wq"}, {"q"}),
      graph_node("Transpose", {"present"}, {"kt"}, {nxrt::testing::attr_ints("perm", {0, 1, 3, 2})}),
      graph_node("Reshape", {"q", "kshape"}, {"q4"}),
      graph_node("MatMul", {"q4", "kt"}, {"scores4"}),
      graph_node("Reshape", {"scores4", "flat_cap"}, {"scores"}),
      graph_node("Add", {"scores", "mask"}, {"masked"}),
      graph_node("Softmax", {"masked"}, {"probs"}, {nxrt::testing::attr_int("axis", -1)}),
      graph_node("Reshape", {"probs", "probs_shape"}, {"probs4"}),
      graph_node("MatMul", {"probs4", "present"}, {"ctx4"}),
      graph_node("Reshape", {"ctx4", "flat"}, {"ctx"}),
      graph_node("MatMul", {"ctx", "Wo"}, {"logits"}),
  };
  g.initializers["flat_cap"] = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, kCap});
  g.initializers["probs_shape"] = Tensor::from_vector<int64_t>(DataType::kInt64, {4}, {1, 1, 1, kCap});
  return m;
}

// The same step computed directly (reference for the bound, in-place run).
std::vector<float> reference_logits(const ir::Model& m, const Tensor& x, std::vector<float>& cache, int64_t pos,
                                    int64_t len) {
  const float* Wk = m.graph.initializers.at("Wk").data<float>();
  const float* Wq = m.graph.initializers.at("Wq").data<float>();
  const float* Wo = m.graph.initializers.at("Wo").data<float>();
  const float* xv = x.data<float>();
  std::vector<float> k(kHid, 0.f), q(kHid, 0.f);
  for (int64_t j = 0; j < kHid; ++j) {
    for (int64_t i = 0; i < kHid; ++i) {
      k[j] += xv[i] * Wk[i * kHid + j];
      q[j] += xv[i] * Wq[i * kHid + j];
    }
  }
  for (int64_t j = 0; j < kHid; ++j) cache[static_cast<size_t>(pos * kHid + j)] = k[j];
  std::vector<double> s(kCap);
  double mx = -1e30;
  for (int64_t t = 0; t < kCap; ++t) {
    double a = 0;
    for (int64_t j = 0; j < kHid; ++j) a += q[j] * cache[static_cast<size_t>(t * kHid + j)];
    s[t] = t < len ? a : a - 1e9;
    mx = std::max(mx, s[t]);
  }
  double z = 0;
  for (auto& v : s) z += (v = std::exp(v - mx));
  std::vector<double> c(kHid, 0.0);
  for (int64_t t = 0; t < kCap; ++t)
    for (int64_t j = 0; j < kHid; ++j) c[j] += s[t] / z * cache[static_cast<size_t>(t * kHid + j)];
  std::vector<float> out(kVocab, 0.f);
  for (int64_t v = 0; v < kVocab; ++v) {
    double a = 0;
    for (int64_t j = 0; j < kHid; ++j) a += c[j] * Wo[j * kVocab + v];
    out[v] = static_cast<float>(a);
  }
  return out;
}

}  // namespace

TEST(ExecutorMemory, DecodeLoopWithBoundKvCacheAllocatesNothingAfterWarmup) {
  ir::Model m = decode_step_model();
  // The eager steady state (pre-bound kernel-cache hits); captured replay, which skips the lookups,
  // is tested in test_capture.cpp.
  auto s = make_session(m, 0);
  ASSERT_TRUE(s);
  // Caller-owned memory: one KV buffer bound as both past and present, and the step's small inputs.
  std::vector<float> kv(kCap * kHid, 0.f);
  std::vector<float> ref_kv(kCap * kHid, 0.f);
  Tensor cache = Tensor::borrow(DataType::kFloat, {1, 1, kCap, kHid}, kv.data());
  Tensor x(DataType::kFloat, {1, kHid});
  Tensor pos(DataType::kInt64, {1});
  Tensor mask(DataType::kFloat, {1, kCap});
  IoBinding b;
  b.bind_input("x", Value(x));
  b.bind_input("past", Value(cache));
  b.bind_input("pos", Value(pos));
  b.bind_input("mask", Value(mask));
  b.bind_output("present", cache);
  const size_t logits_out = b.bind_output("logits");

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  auto step = [&](int64_t p) -> Status {
    for (int64_t i = 0; i < kHid; ++i) x.data<float>()[i] = d(rng);
    pos.data<int64_t>()[0] = p;
    for (int64_t t = 0; t < kCap; ++t) mask.data<float>()[t] = t <= p ? 0.f : -1e9f;
    return s->run(b);
  };
  // Warm-up: three steps (the first run fills the pool and the kernel cache).
  for (int64_t p = 0; p < 3; ++p) {
    ASSERT_TRUE(step(p).ok());
    std::vector<float> ref = reference_logits(m, x, ref_kv, p, p + 1);
    const Tensor& lg = b.output(logits_out).tensor();
    for (int64_t v = 0; v < kVocab; ++v) ASSERT_NEAR(lg.data<float>()[v], ref[v], 1e-4) << "step " << p;
  }
  const KernelCacheStats warm = s->kernel_cache_stats();
  const MemoryStats warm_mem = s->memory_stats();
  const void* logits_addr = b.output(logits_out).tensor().raw_data();

  uint64_t allocs = 0;
  for (int64_t p = 3; p < 13; ++p) {
    for (int64_t i = 0; i < kHid; ++i) x.data<float>()[i] = d(rng);
    pos.data<int64_t>()[0] = p;
    for (int64_t t = 0; t < kCap; ++t) mask.data<float>()[t] = t <= p ? 0.f : -1e9f;
    AllocCounter::arm();
    Status st = s->run(b);
    AllocCounter::disarm();
    allocs += AllocCounter::count();
    ASSERT_TRUE(st.ok()) << st.to_string();
    std::vector<float> ref = reference_logits(m, x, ref_kv, p, p + 1);
    const Tensor& lg = b.output(logits_out).tensor();
    for (int64_t v = 0; v < kVocab; ++v) ASSERT_NEAR(lg.data<float>()[v], ref[v], 1e-4) << "step " << p;
    EXPECT_EQ(lg.raw_data(), logits_addr) << "the logits buffer moved at step " << p;
  }
  EXPECT_EQ(allocs, 0u) << "heap allocations over 10 steady-state decode steps";
  // The cache was updated in place: the caller's buffer holds every appended row.
  for (size_t i = 0; i < kv.size(); ++i) ASSERT_NEAR(kv[i], ref_kv[i], 1e-5) << "kv element " << i;
  // Every lookup after warm-up took the pre-bound fast path.
  const KernelCacheStats after = s->kernel_cache_stats();
  EXPECT_EQ(after.misses, warm.misses);
  EXPECT_EQ(after.hits, warm.hits);
  EXPECT_EQ(after.prebound_hits - warm.prebound_hits, 10u * m.graph.nodes.size());
  EXPECT_EQ(s->memory_stats().allocations, warm_mem.allocations);
}

namespace {
// y = Relu(x) over a dynamic length: one node, one kernel-cache variant per distinct length.
ir::Model relu_model() {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "relu";
  m.graph.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::named("n")})};
  m.graph.outputs = {tensor_info("y", DataType::kFloat, {ir::Dim::named("n")})};
  m.graph.nodes = {graph_node("Relu", {"x"}, {"y"})};
  return m;
}
}  // namespace

TEST(ExecutorMemory, KernelCacheKeepsAtMostFourVariantsPerNodeAndEvictsTheLeastRecentlyUsed) {
  auto s = make_session(relu_model());
  ASSERT_TRUE(s);
  auto run_n = [&](int64_t n) {
    auto out = s->run({{"x", Value(random_tensor({n}, 1))}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    ASSERT_EQ((*out)[0].tensor().shape(), (Dims{n}));
  };
  run_n(1);
  run_n(1);  // same shape as the last call: pre-bound
  KernelCacheStats st = s->kernel_cache_stats();
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.prebound_hits, 1u);
  for (int64_t n = 2; n <= 4; ++n) run_n(n);
  run_n(1);  // a variant kept but not the last one: found by search
  st = s->kernel_cache_stats();
  EXPECT_EQ(st.entries, 4u);
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.evictions, 0u);
  run_n(5);  // fifth variant: evicts the least recently used (n=2)
  run_n(6);  // evicts n=3
  st = s->kernel_cache_stats();
  EXPECT_EQ(st.entries, 4u);
  EXPECT_EQ(st.evictions, 2u);
  EXPECT_EQ(st.misses, 6u);
  run_n(1);  // still cached (recently used)
  EXPECT_EQ(s->kernel_cache_stats().misses, 6u);
  run_n(2);  // was evicted: a miss
  EXPECT_EQ(s->kernel_cache_stats().misses, 7u);
}

TEST(ExecutorMemory, KernelCacheBoundComesFromTheEnvironment) {
  ::setenv("NXRT_KERNEL_CACHE_VARIANTS_PER_NODE", "2", 1);
  auto s = make_session(relu_model());
  ::unsetenv("NXRT_KERNEL_CACHE_VARIANTS_PER_NODE");
  ASSERT_TRUE(s);
  for (int64_t n = 1; n <= 5; ++n) ASSERT_TRUE(s->run({{"x", Value(random_tensor({n}, 2))}}).ok());
  KernelCacheStats st = s->kernel_cache_stats();
  EXPECT_EQ(st.entries, 2u);
  EXPECT_EQ(st.evictions, 3u);
}

TEST(ExecutorMemory, RunsAtChangingShapesKeepThePoolBounded) {
  auto s = make_session(relu_model());
  ASSERT_TRUE(s);
  for (int64_t n : {100000, 10, 50000, 7, 100000, 3}) {
    ASSERT_TRUE(s->run({{"x", Value(random_tensor({n}, 3))}}).ok());
  }
  // After a run at n=3 the pool holds at most the blocks that run needed (plus any the caller
  // still holds), not the large blocks of earlier runs.
  EXPECT_LE(s->memory_stats().bytes, 64u * 1024u);
}

TEST(ExecutorMemory, BoundOutputWithSpareCapacityReceivesTheLeadingRows) {
  // y = x + x over x [1,2,T,4], y bound to a [1,2,8,4] buffer (capacity 8 on the sequence axis).
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "kv";
  auto dims = std::vector<ir::Dim>{ir::Dim::fixed(1), ir::Dim::fixed(2), ir::Dim::named("T"), ir::Dim::fixed(4)};
  m.graph.inputs = {tensor_info("x", DataType::kFloat, dims)};
  m.graph.outputs = {tensor_info("y", DataType::kFloat, dims)};
  m.graph.nodes = {graph_node("Add", {"x", "x"}, {"y"})};
  auto s = make_session(m);
  ASSERT_TRUE(s);
  std::vector<float> buf(1 * 2 * 8 * 4, -7.f);
  Tensor x = random_tensor({1, 2, 3, 4}, 4);
  IoBinding b;
  b.bind_input("x", Value(x));
  size_t yi = b.bind_output("y", Tensor::borrow(DataType::kFloat, {1, 2, 8, 4}, buf.data()));
  Status st = s->run(b);
  ASSERT_TRUE(st.ok()) << st.to_string();
  const Tensor& y = b.output(yi).tensor();
  EXPECT_EQ(y.shape(), (Dims{1, 2, 3, 4}));
  EXPECT_EQ(y.storage()->data(), buf.data());
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < 8; ++t)
      for (int64_t j = 0; j < 4; ++j) {
        float got = buf[static_cast<size_t>((h * 8 + t) * 4 + j)];
        if (t < 3) {
          EXPECT_FLOAT_EQ(got, 2 * x.data<float>()[(h * 3 + t) * 4 + j]);
        } else {
          EXPECT_EQ(got, -7.f) << "capacity rows beyond the output must be untouched";
        }
      }
  // A buffer that cannot hold the output is an error naming it.
  b.bind_input("x", Value(random_tensor({1, 2, 9, 4}, 5)));
  st = s->run(b);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output 'y' is bound to float32[1,2,8,4]"), std::string::npos) << st.message();
  // Larger on two axes: refused too.
  IoBinding b2;
  b2.bind_input("x", Value(random_tensor({1, 1, 3, 4}, 6)));
  b2.bind_output("y", Tensor(DataType::kFloat, {1, 2, 8, 4}));
  EXPECT_FALSE(s->run(b2).ok());
}

TEST(ExecutorMemory, RuntimeAllocatedOutputsKeepTheirAddressAcrossRuns) {
  auto s = make_session(relu_model());
  ASSERT_TRUE(s);
  IoBinding b;
  b.bind_input("x", Value(random_tensor({1000}, 8)));
  size_t yi = b.bind_output("y");
  ASSERT_TRUE(s->run(b).ok());
  const void* first = b.output(yi).tensor().raw_data();
  const uint64_t allocs = s->memory_stats().allocations;
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s->run(b).ok());
    EXPECT_EQ(b.output(yi).tensor().raw_data(), first);
  }
  EXPECT_EQ(s->memory_stats().allocations, allocs);
  // A caller that keeps an output alive keeps its buffer: the next run gets another block.
  Value kept = b.output(yi);
  ASSERT_TRUE(s->run(b).ok());
  EXPECT_NE(b.output(yi).tensor().raw_data(), kept.tensor().raw_data());
}

TEST(ExecutorMemory, ViewsOfViewsAndViewsWhoseSourceDied) {
  // s = x + 1 (dies after the Slice reads it); v = Slice(s) (a view of s); t = Transpose(v) (a view of
  // a gathered copy); y = Relu(t). Also w = Slice(s) is a graph output: returned materialized.
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "views";
  m.graph.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(4), ir::Dim::fixed(6)})};
  m.graph.outputs = {tensor_info("y", DataType::kFloat, {ir::Dim::fixed(4), ir::Dim::fixed(2)}),
                     tensor_info("w", DataType::kFloat, {ir::Dim::fixed(2), ir::Dim::fixed(6)})};
  m.graph.initializers["one"] = Tensor::from_vector<float>(DataType::kFloat, {}, {1.f});
  m.graph.initializers["st"] = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 2});
  m.graph.initializers["en"] = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {3, 6});
  m.graph.initializers["ax"] = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {0, 1});
  m.graph.initializers["sp"] = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 2});
  m.graph.initializers["w0"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {2});
  m.graph.initializers["w1"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {4});
  m.graph.initializers["w2"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {0});
  m.graph.nodes = {
      graph_node("Add", {"x", "one"}, {"s"}),
      graph_node("Slice", {"s", "st", "en", "ax", "sp"}, {"v"}),  // rows 1..2, cols 2,4: [2,2] strided
      graph_node("Slice", {"s", "w0", "w1", "w2"}, {"w"}),        // rows 2..3: a contiguous view
      graph_node("Transpose", {"v"}, {"t"}, {nxrt::testing::attr_ints("perm", {1, 0})}),
      graph_node("Concat", {"t", "t"}, {"y"}, {nxrt::testing::attr_int("axis", 0)}),
  };
  auto s = make_session(m);
  ASSERT_TRUE(s);
  Tensor x = random_tensor({4, 6}, 9);
  auto out = s->run({{"x", Value(x)}});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& y = (*out)[0].tensor();
  const Tensor& w = (*out)[1].tensor();
  ASSERT_EQ(y.shape(), (Dims{4, 2}));
  EXPECT_TRUE(y.is_contiguous());
  EXPECT_TRUE(w.is_contiguous());
  const float* xv = x.data<float>();
  // v[i][j] = s[1+i][2+2j]; t = v^T; y = [t; t]
  for (int64_t r = 0; r < 4; ++r)
    for (int64_t c = 0; c < 2; ++c) {
      int64_t j = r % 2, i = c;
      EXPECT_FLOAT_EQ(y.data<float>()[r * 2 + c], xv[(1 + i) * 6 + 2 + 2 * j] + 1.f);
    }
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 6; ++c) EXPECT_FLOAT_EQ(w.data<float>()[r * 6 + c], xv[(2 + r) * 6 + c] + 1.f);
}

// A strided view the graph returns (a Slice of columns) is made contiguous in the run's buffer pool:
// with the caller dropping each run's output, runs after the first two take no new block and
// allocate no storage (the copy once came from a fresh heap block every run: a large one mapped,
// zeroed and faulted in anew each time).
TEST(ExecutorMemory, ViewOutputsAreMaterializedInPooledMemory) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "slice_out";
  m.graph.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(64), ir::Dim::fixed(96)})};
  m.graph.outputs = {tensor_info("y", DataType::kFloat, {ir::Dim::fixed(64), ir::Dim::fixed(70)})};
  m.graph.initializers["st"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {5});
  m.graph.initializers["en"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {75});
  m.graph.initializers["ax"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {1});
  m.graph.nodes = {graph_node("Slice", {"x", "st", "en", "ax"}, {"y"})};
  auto s = make_session(m);
  ASSERT_TRUE(s);
  const Tensor x = random_tensor({64, 96}, 4);
  auto check = [&](const Tensor& y) {
    ASSERT_EQ(y.shape(), (Dims{64, 70}));
    ASSERT_TRUE(y.is_contiguous());
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t c = 0; c < 70; ++c) ASSERT_EQ(y.data<float>()[r * 70 + c], x.data<float>()[r * 96 + 5 + c]);
  };
  uint64_t blocks = 0;
  for (int i = 0; i < 6; ++i) {
    if (i == 2) {
      blocks = s->memory_stats().allocations;
      storage_allocation_count(true);  // counts from here
    }
    auto out = s->run({{"x", Value(x)}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    check((*out)[0].tensor());
  }
  EXPECT_EQ(s->memory_stats().allocations, blocks);
  EXPECT_EQ(storage_allocation_count(false), 0u) << "storages allocated by runs 3-6 (the Slice output's copy)";
  // Through a binding too.
  IoBinding b;
  b.bind_input("x", Value(x));
  const size_t yi = b.bind_output("y");
  ASSERT_TRUE(s->run(b).ok());
  check(b.output(yi).tensor());
}

TEST(ExecutorMemory, DataDependentShapesChangeBetweenRuns) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "nz";
  m.graph.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(6)})};
  m.graph.outputs = {tensor_info("y", DataType::kInt64, {ir::Dim::fixed(1), ir::Dim::named("k")})};
  m.graph.nodes = {graph_node("NonZero", {"x"}, {"y"})};
  auto s = make_session(m);
  ASSERT_TRUE(s);
  for (int run = 0; run < 3; ++run) {
    Tensor x(DataType::kFloat, {6});
    int64_t expect = 0;
    for (int64_t i = 0; i < 6; ++i) {
      bool nz = (i + run) % (run + 2) == 0;
      x.data<float>()[i] = nz ? 1.f : 0.f;
      expect += nz;
    }
    auto out = s->run({{"x", Value(x)}});
    ASSERT_TRUE(out.ok());
    EXPECT_EQ((*out)[0].tensor().shape(), (Dims{1, expect}));
  }
}

namespace {
// Loop M times: x <- x + 1 (body reads the constant `one` from the outer scope).
ir::Model loop_model() {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "loop";
  m.graph.inputs = {tensor_info("M", DataType::kInt64, {}), tensor_info("x0", DataType::kFloat, {ir::Dim::fixed(8)})};
  m.graph.outputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(8)})};
  m.graph.initializers["one"] = Tensor::from_vector<float>(DataType::kFloat, {}, {1.f});
  m.graph.initializers["cond"] = Tensor::from_vector<uint8_t>(DataType::kBool, {}, {1});
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  body->inputs = {tensor_info("i", DataType::kInt64, {}), tensor_info("c", DataType::kBool, {}),
                  tensor_info("xi", DataType::kFloat, {ir::Dim::fixed(8)})};
  body->outputs = {tensor_info("c_out", DataType::kBool, {}), tensor_info("xo", DataType::kFloat, {ir::Dim::fixed(8)})};
  body->nodes = {graph_node("Identity", {"c"}, {"c_out"}), graph_node("Add", {"xi", "one"}, {"xo"})};
  m.graph.nodes = {graph_node("Loop", {"M", "cond", "x0"}, {"x"}, {nxrt::testing::attr_graph("body", body)})};
  return m;
}
}  // namespace

TEST(ExecutorMemory, LoopDoesNotAllocatePerIteration) {
  auto s = make_session(loop_model());
  ASSERT_TRUE(s);
  auto count_for = [&](int64_t iters) -> uint64_t {
    std::vector<std::pair<std::string, Value>> feeds = {{"M", Value(Tensor::scalar_int64(iters))},
                                                        {"x0", Value(Tensor(DataType::kFloat, {8}))}};
    std::vector<std::string> names = {"x"};
    EXPECT_TRUE(s->run(feeds, names).ok());  // warm
    AllocCounter::arm();
    auto out = s->run(feeds, names);
    AllocCounter::disarm();
    EXPECT_TRUE(out.ok());
    EXPECT_FLOAT_EQ((*out)[0].tensor().data<float>()[0], static_cast<float>(iters));
    return AllocCounter::count();
  };
  const uint64_t small = count_for(10);
  const uint64_t large = count_for(10000);
  // The run's own bookkeeping (feed checks, the output vector) is the same for both trip counts.
  EXPECT_EQ(large, small) << "allocations grew with the trip count: 10 iterations " << small << ", 10000 iterations "
                          << large;
}

TEST(ExecutorMemory, KvGrowthConcatAppendsInPlaceIntoTheBoundBuffer) {
  // present = Concat(past, new, axis 2); the caller binds past as a view of the first `len` rows of a
  // capacity buffer and present to the whole buffer: each step writes only the new row.
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "kvcat";
  m.graph.inputs = {tensor_info("past", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(2), ir::Dim::named("P"), ir::Dim::fixed(4)}),
                    tensor_info("new", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(2), ir::Dim::fixed(1), ir::Dim::fixed(4)})};
  m.graph.outputs = {tensor_info("present", DataType::kFloat, {ir::Dim::fixed(1), ir::Dim::fixed(2), ir::Dim::named("T"), ir::Dim::fixed(4)})};
  m.graph.nodes = {graph_node("Concat", {"past", "new"}, {"present"}, {nxrt::testing::attr_int("axis", 2)})};
  auto s = make_session(m);
  ASSERT_TRUE(s);
  constexpr int64_t cap = 6;
  std::vector<float> buf(1 * 2 * cap * 4, -1.f);
  auto storage = Storage::borrow(buf.data(), buf.size() * sizeof(float), nullptr);
  const Dims cap_strides{2 * cap * 4, cap * 4, 4, 1};
  for (int64_t len = 0; len < cap; ++len) {
    Tensor past(DataType::kFloat, {1, 2, len, 4}, storage, 0, cap_strides);
    Tensor nw = random_tensor({1, 2, 1, 4}, static_cast<uint32_t>(20 + len));
    IoBinding b;
    b.bind_input("past", Value(past));
    b.bind_input("new", Value(nw));
    b.bind_output("present", Tensor(DataType::kFloat, {1, 2, cap, 4}, storage));
    Status st = s->run(b);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const Tensor& present = b.output(0).tensor();
    EXPECT_EQ(present.shape(), (Dims{1, 2, len + 1, 4}));
    EXPECT_EQ(present.storage()->data(), buf.data());
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t j = 0; j < 4; ++j) {
        EXPECT_FLOAT_EQ(buf[static_cast<size_t>((h * cap + len) * 4 + j)], nw.data<float>()[h * 4 + j]);
      }
  }
  // Rows never written stay as they were; earlier rows keep what earlier steps appended.
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t t = 0; t < cap; ++t) EXPECT_NE(buf[static_cast<size_t>((h * cap + t) * 4)], -1.f);
}

// Concat-in-place planning (executor.h ConcatGroup): producers whose output only the Concat reads write
// into their range of its output. Checked against values computed here, across runs (the buffers are
// reused), with a graph input and a value read elsewhere too (both copied), a second Concat consuming
// the first, a batch of 2 (dims before the axis are not 1: no planning) and axis 0.
namespace {
// An ai.onnx opset-13 model with graph `name`, and static dims: what the concat-in-place tests build on.
ir::Model concat_model(const char* name) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 13});
  m.graph.name = name;
  return m;
}
std::vector<ir::Dim> fixed(std::initializer_list<int64_t> d) {
  std::vector<ir::Dim> v;
  for (int64_t x : d) v.push_back(ir::Dim::fixed(x));
  return v;
}
}  // namespace

TEST(ExecutorConcatInPlace, MatchesPlainConcatenation) {
  for (int64_t batch : {1, 2}) {
    for (int64_t axis : {0, 1}) {
      ir::Model m = concat_model("concat");
      ir::Graph& g = m.graph;
      g.inputs = {tensor_info("x", DataType::kFloat, fixed({batch, 3, 5}))};
      std::vector<ir::Dim> ydims = fixed({batch, 3, 5});
      ydims[static_cast<size_t>(axis)] = ir::Dim::fixed((axis == 0 ? batch : 3) * 5);
      g.outputs = {tensor_info("y", DataType::kFloat, ydims), tensor_info("n", DataType::kFloat, fixed({batch, 3, 5}))};
      g.nodes = {
          graph_node("Relu", {"x"}, {"r"}),
          graph_node("Neg", {"x"}, {"n"}),  // also a graph output: copied, not placed
          graph_node("Sigmoid", {"x"}, {"s"}),
          graph_node("Concat", {"r", "n", "x", "s"}, {"c1"}, {nxrt::testing::attr_int("axis", axis)}),
          graph_node("Abs", {"x"}, {"a"}),
          graph_node("Concat", {"a", "c1"}, {"c2"}, {nxrt::testing::attr_int("axis", axis)}),
          graph_node("Identity", {"c2"}, {"y"}),
      };
      auto s = make_session(m);
      ASSERT_TRUE(s);
      for (int run = 0; run < 3; ++run) {
        Tensor x = random_tensor({batch, 3, 5}, 40 + run);
        auto out = s->run({{"x", Value(x)}});
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const Tensor& y = out.value()[0].tensor();
        // Expected: c2 = concat(abs, relu, neg, x, sigmoid) along axis.
        const int64_t parts = 5;
        Dims want_shape{batch, 3, 5};
        want_shape[static_cast<size_t>(axis)] *= parts;
        ASSERT_EQ(y.shape(), want_shape);
        const float* xv = x.data<float>();
        const float* yv = y.data<float>();
        const int64_t outer = axis == 0 ? 1 : batch;       // blocks before the axis
        const int64_t inner = axis == 0 ? batch * 15 : 15;  // one part's block
        for (int64_t o = 0; o < outer; ++o) {
          for (int64_t p = 0; p < parts; ++p) {
            for (int64_t e = 0; e < inner; ++e) {
              const float v = xv[o * inner + e];
              const float want = p == 0 ? std::fabs(v) : p == 1 ? (v < 0 ? 0.f : v) : p == 2 ? -v : p == 3 ? v
                                                                                                 : 1.f / (1.f + std::exp(-v));
              ASSERT_NEAR(yv[(o * parts + p) * inner + e], want, 1e-6f)
                  << "batch " << batch << " axis " << axis << " run " << run << " part " << p;
            }
          }
        }
      }
    }
  }
}

// Chained groups (DenseNet's dense block): each Concat's output is the first input of the next one and
// is also read by another node, so its buffer is its range of the next group's buffer and neither
// Concat copies. Values checked against the plain definition over several runs (the buffers are
// reused), on a chain of three, with the last Concat's output read by Identity (the graph output).
TEST(ExecutorConcatInPlace, ChainedGroupsMatchPlainConcatenation) {
  ir::Model m = concat_model("dense");
  ir::Graph& g = m.graph;
  g.inputs = {tensor_info("x", DataType::kFloat, fixed({1, 2, 3}))};
  g.outputs = {tensor_info("y", DataType::kFloat, fixed({1, 16, 3}))};
  auto axis1 = [] { return std::vector<ir::Attribute>{nxrt::testing::attr_int("axis", 1)}; };
  g.nodes = {
      graph_node("Relu", {"x"}, {"r0"}),
      graph_node("Neg", {"r0"}, {"n1"}),
      graph_node("Concat", {"r0", "n1"}, {"c1"}, axis1()),  // [1, 4, 3]
      graph_node("Sigmoid", {"c1"}, {"s2"}),                // reads c1 besides the next Concat
      graph_node("Concat", {"c1", "s2"}, {"c2"}, axis1()),  // [1, 8, 3]
      graph_node("Abs", {"c2"}, {"a3"}),
      graph_node("Concat", {"c2", "a3"}, {"c3"}, axis1()),  // [1, 16, 3]
      graph_node("Identity", {"c3"}, {"y"}),
  };
  auto s = make_session(m);
  ASSERT_TRUE(s);
  for (int run = 0; run < 3; ++run) {
    Tensor x = random_tensor({1, 2, 3}, 70 + run);
    auto out = s->run({{"x", Value(x)}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = out.value()[0].tensor();
    ASSERT_EQ(y.shape(), (Dims{1, 16, 3}));
    std::vector<float> c1, c2, c3;
    const float* xv = x.data<float>();
    for (int i = 0; i < 6; ++i) c1.push_back(std::max(xv[i], 0.f));
    for (int i = 0; i < 6; ++i) c1.push_back(-c1[static_cast<size_t>(i)]);
    c2 = c1;
    for (float v : c1) c2.push_back(1.f / (1.f + std::exp(-v)));
    c3 = c2;
    for (float v : c2) c3.push_back(std::fabs(v));
    for (size_t i = 0; i < c3.size(); ++i) ASSERT_NEAR(y.data<float>()[i], c3[i], 1e-6f) << "run " << run << " at " << i;
  }
}

// A run context's thread slots: the same addresses for every request that fits (whatever the kernel),
// a larger request moves them once to a block that serves it, and the block is the pool's (counted in
// its bytes) but never handed to a tensor.
TEST(ExecutorMemory, ThreadSlotsStayPutAndAreNoTensorsMemory) {
  session::BufferPool pool;
  session::ThreadSlotArena arena;
  const ep::SlotMemory a = arena.get(pool, 1000, 2);
  ASSERT_NE(a.base, nullptr);
  EXPECT_GE(a.stride, 1000u);
  EXPECT_EQ(a.stride % 64, 0u);
  EXPECT_GE(a.slots, 2);
  const ep::SlotMemory b = arena.get(pool, 10, 2);
  EXPECT_EQ(b.base, a.base);
  EXPECT_EQ(b.stride, a.stride);
  const ep::SlotMemory c = arena.get(pool, 3 * a.stride, 2);
  EXPECT_GE(c.stride, 3 * a.stride);
  const ep::SlotMemory d = arena.get(pool, 1000, 1);  // fewer threads: the same slots
  EXPECT_EQ(d.base, c.base);
  EXPECT_EQ(d.stride, c.stride);
  EXPECT_GE(d.slots, 2);
  EXPECT_GE(pool.stats().bytes, c.stride * 2);
  // Tensors get other memory, also after a run boundary frees what no one holds.
  pool.end_run();
  for (int i = 0; i < 4; ++i) {
    auto t = pool.acquire(c.stride);
    const char* p = static_cast<const char*>(t->data());
    EXPECT_TRUE(p + c.stride <= c.base || p >= c.base + 2 * c.stride) << "tensor block inside the slots";
  }
}
