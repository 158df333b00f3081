// Many threads running one session at once (Session::run with feeds and with IoBinding): every
// output is bit-identical to the same input run alone, whatever the other threads run meanwhile
// (other shapes, evictions from the kernel cache, subgraphs, captured replay). `make tsan` runs these
// under ThreadSanitizer.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "kernel_test_util.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"

using namespace nxrt;
using nxrt::testing::attr_graph;
using nxrt::testing::graph_node;
using nxrt::testing::random_tensor;
using nxrt::testing::tensor_info;

namespace {

std::unique_ptr<Session> session_of(const ir::Model& m, int threads = 1) {
  std::string bytes = onnx::serialize_model(m);
  SessionOptions o;
  o.threads = threads;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Same dtype, shape and bytes.
bool bit_identical(const Value& a, const Value& b) {
  if (!a.is_tensor() || !b.is_tensor()) return false;
  const Tensor& x = a.tensor();
  const Tensor& y = b.tensor();
  return x.dtype() == y.dtype() && x.shape() == y.shape() && x.nbytes() == y.nbytes() &&
         std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) == 0;
}

// Runs body(thread index) on `n` threads at once (released together) and joins them.
template <typename Fn>
void on_threads(int n, Fn body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < n; ++t) {
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      body(t);
    });
  }
  for (auto& th : ts) th.join();
}

// Rows of x (any count) through a small dense layer, then data-dependent shapes: NonZero of the
// activations (its count depends on the values) and a Loop whose trip count is an input (the body, a
// subgraph, reads `b` from the outer scope).
ir::Model dynamic_model() {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  ir::Graph& g = m.graph;
  g.name = "dynamic";
  g.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::named("n"), ir::Dim::fixed(8)}),
              tensor_info("M", DataType::kInt64, {})};
  g.outputs = {tensor_info("y", DataType::kFloat, {ir::Dim::named("n"), ir::Dim::fixed(8)}),
               tensor_info("nz", DataType::kInt64, {ir::Dim::fixed(2), ir::Dim::named("k")}),
               tensor_info("acc", DataType::kFloat, {ir::Dim::named("n"), ir::Dim::fixed(8)})};
  g.initializers["W"] = random_tensor({8, 8}, 11);
  g.initializers["b"] = random_tensor({8}, 12);
  g.initializers["cond"] = Tensor::from_vector<uint8_t>(DataType::kBool, {}, {1});
  auto body = std::make_shared<ir::Graph>();
  body->name = "body";
  body->inputs = {tensor_info("i", DataType::kInt64, {}), tensor_info("c", DataType::kBool, {}),
                  tensor_info("a", DataType::kFloat, {ir::Dim::named("n"), ir::Dim::fixed(8)})};
  body->outputs = {tensor_info("c_out", DataType::kBool, {}),
                   tensor_info("a_out", DataType::kFloat, {ir::Dim::named("n"), ir::Dim::fixed(8)})};
  body->nodes = {graph_node("Identity", {"c"}, {"c_out"}), graph_node("Add", {"a", "b"}, {"t"}),
                 graph_node("Tanh", {"t"}, {"a_out"})};
  g.nodes = {graph_node("MatMul", {"x", "W"}, {"xw"}), graph_node("Add", {"xw", "b"}, {"h"}),
             graph_node("Relu", {"h"}, {"y"}), graph_node("NonZero", {"y"}, {"nz"}),
             graph_node("Loop", {"M", "cond", "y"}, {"acc"}, {attr_graph("body", body)})};
  return m;
}

// The inputs of case c: rows and trip count vary with c.
std::vector<std::pair<std::string, Value>> dynamic_feeds(int c) {
  const int64_t rows = 1 + (c * 5) % 9;
  return {{"x", Value(random_tensor({rows, 8}, 100 + static_cast<uint32_t>(c)))},
          {"M", Value(Tensor::scalar_int64(c % 4))}};
}

// Sets an environment variable for the life of the object (the session reads it at creation).
struct ScopedEnv {
  std::string name;
  ScopedEnv(const char* n, const char* v) : name(n) { setenv(n, v, 1); }
  ~ScopedEnv() { unsetenv(name.c_str()); }
};

}  // namespace

TEST(ConcurrentRuns, DifferentShapesPerThreadMatchSerialRuns) {
  // Two variants per node and nine shapes: the threads evict each other's variants all the time.
  ScopedEnv variants("NXRT_KERNEL_CACHE_VARIANTS_PER_NODE", "2");
  auto s = session_of(dynamic_model(), 2);
  ASSERT_TRUE(s);
  constexpr int kCases = 9;
  std::vector<std::vector<Value>> expected(kCases);
  for (int c = 0; c < kCases; ++c) {
    auto out = s->run(dynamic_feeds(c));
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expected[c] = std::move(out).value();
    ASSERT_EQ(expected[c].size(), 3u);
  }
  constexpr int kThreads = 4, kRuns = 50;
  std::atomic<int> mismatches{0}, failures{0};
  on_threads(kThreads, [&](int t) {
    for (int i = 0; i < kRuns; ++i) {
      const int c = (t * 3 + i) % kCases;
      auto out = s->run(dynamic_feeds(c));
      if (!out.ok()) {
        failures.fetch_add(1);
        continue;
      }
      for (size_t k = 0; k < 3; ++k) {
        if (!bit_identical((*out)[k], expected[c][k])) mismatches.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  // Nine shapes through two variants per node: evictions happened, and the bound held.
  const KernelCacheStats ks = s->kernel_cache_stats();
  EXPECT_GT(ks.evictions, 0u);
  EXPECT_GE(ks.hits + ks.misses + ks.prebound_hits, static_cast<uint64_t>(kCases + kThreads * kRuns));
}

TEST(ConcurrentRuns, LightCnnThreadsMatchSerialRuns) {
  namespace fs = std::filesystem;
  const fs::path dir = NXRT_SOURCE_DIR "/../shared/models/light/light_squeezenet";
  if (!fs::exists(dir / "model.onnx")) GTEST_SKIP() << "no " << dir.string();
  SessionOptions o;
  o.threads = 2;  // the intra-op pool is contended too: a run that finds it busy works inline
  auto s = Session::create((dir / "model.onnx").string(), o);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Session& session = **s;
  const ValueMeta* image = nullptr;  // the one input without an initializer default
  for (const auto& m : session.inputs()) {
    if (!m.has_default && !image) image = &m;
  }
  ASSERT_TRUE(image);
  const std::string name = image->name;
  auto in = read_value_file((dir / "test_data_set_0" / "input_0.pb").string(), image);
  ASSERT_TRUE(in.ok()) << in.status().to_string();
  // Four inputs: the data set's and three scaled copies.
  constexpr int kInputs = 4;
  std::vector<Value> inputs;
  std::vector<std::vector<Value>> expected;
  for (int c = 0; c < kInputs; ++c) {
    Tensor t = in->tensor().contiguous(true);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 1.f + 0.25f * static_cast<float>(c);
    inputs.push_back(Value(t));
    auto out = session.run({{name, inputs.back()}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expected.push_back(std::move(out).value());
  }
  constexpr int kThreads = 4, kRuns = 12;
  std::atomic<int> mismatches{0}, failures{0};
  on_threads(kThreads, [&](int t) {
    for (int i = 0; i < kRuns; ++i) {
      const int c = (t + i) % kInputs;
      auto out = session.run({{name, inputs[c]}});
      if (!out.ok()) {
        failures.fetch_add(1);
        continue;
      }
      for (size_t k = 0; k < out->size(); ++k) {
        if (!bit_identical((*out)[k], expected[c][k])) mismatches.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  // Each concurrent run had its own buffers: at most one context per thread was made.
  EXPECT_GT(session.memory_stats().blocks, 0u);
}

TEST(ConcurrentRuns, BoundThreadsEachWithTheirOwnBinding) {
  // y = Relu(x W + b), z = Tanh(y): each thread binds its own input and its own output buffers.
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.name = "bound";
  m.graph.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(4), ir::Dim::fixed(16)})};
  m.graph.outputs = {tensor_info("y", DataType::kFloat, {ir::Dim::fixed(4), ir::Dim::fixed(16)}),
                     tensor_info("z", DataType::kFloat, {ir::Dim::fixed(4), ir::Dim::fixed(16)})};
  m.graph.initializers["W"] = random_tensor({16, 16}, 21);
  m.graph.initializers["b"] = random_tensor({16}, 22);
  m.graph.nodes = {graph_node("MatMul", {"x", "W"}, {"xw"}), graph_node("Add", {"xw", "b"}, {"h"}),
                   graph_node("Relu", {"h"}, {"y"}), graph_node("Tanh", {"y"}, {"z"})};
  auto s = session_of(m);
  ASSERT_TRUE(s);
  constexpr int kThreads = 4, kRuns = 50;
  std::vector<Tensor> xs;
  std::vector<std::vector<Value>> expected;
  for (int t = 0; t < kThreads; ++t) {
    xs.push_back(random_tensor({4, 16}, 200 + static_cast<uint32_t>(t)));
    auto out = s->run({{"x", Value(xs.back())}});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    expected.push_back(std::move(out).value());
  }
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<IoBinding> bindings(kThreads);
  on_threads(kThreads, [&](int t) {
    IoBinding& b = bindings[static_cast<size_t>(t)];
    b.bind_input("x", Value(xs[static_cast<size_t>(t)]));
    Tensor y(DataType::kFloat, {4, 16});
    b.bind_output("y", y);
    b.bind_output("z");  // allocated by the run
    for (int i = 0; i < kRuns; ++i) {
      std::memset(y.raw_data(), 0, y.nbytes());
      Status st = s->run(b);
      if (!st.ok()) {
        failures.fetch_add(1);
        continue;
      }
      if (!bit_identical(Value(y), expected[static_cast<size_t>(t)][0])) mismatches.fetch_add(1);
      if (!bit_identical(*b.output("z"), expected[static_cast<size_t>(t)][1])) mismatches.fetch_add(1);
    }
  });
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  // Alone again, a binding goes through captured replay as before (warm-up, record, replay).
  IoBinding& b = bindings[0];
  const CaptureStats before = s->capture_stats();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(s->run(b).ok());
  const CaptureStats after = s->capture_stats();
  EXPECT_GT(after.replayed_runs, before.replayed_runs);
  EXPECT_TRUE(bit_identical(*b.output("z"), expected[0][1]));
}

TEST(ConcurrentRuns, MoreThreadsThanRunContextsWait) {
  // Two run contexts at most: the other threads wait for one to come free.
  ScopedEnv contexts("NXRT_MAX_CONCURRENT_RUNS", "2");
  auto s = session_of(dynamic_model());
  ASSERT_TRUE(s);
  std::vector<std::vector<Value>> expected;
  for (int c = 0; c < 3; ++c) {
    auto out = s->run(dynamic_feeds(c));
    ASSERT_TRUE(out.ok());
    expected.push_back(std::move(out).value());
  }
  std::atomic<int> mismatches{0};
  on_threads(6, [&](int t) {
    for (int i = 0; i < 20; ++i) {
      const int c = (t + i) % 3;
      auto out = s->run(dynamic_feeds(c));
      if (!out.ok() || !bit_identical((*out)[2], expected[c][2])) mismatches.fetch_add(1);
    }
  });
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(ConcurrentRuns, MemoryLimitCoversEveryRunContext) {
  // The limit is the session's, over the buffers of all concurrent runs: with room for about one and
  // a half runs' buffers, some of several concurrent runs may fail with the limit's error (never a
  // crash, never a wrong result), and the pools together never pass the limit.
  ir::Model m = dynamic_model();
  std::string bytes = onnx::serialize_model(m);
  size_t one_run = 0;
  Value ref;
  {
    auto probe = Session::create_from_bytes(bytes.data(), bytes.size());
    ASSERT_TRUE(probe.ok());
    {
      auto out = (*probe)->run(dynamic_feeds(7));
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      ref = Value((*out)[2].tensor().clone());
    }  // the outputs go back to the pool
    one_run = (*probe)->memory_stats().bytes;
  }
  ASSERT_GT(one_run, 0u);
  SessionOptions o;
  o.memory_limit = one_run + one_run / 2;
  auto created = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(created.ok());
  Session& s = **created;
  std::atomic<int> ok{0}, limited{0}, other{0};
  on_threads(4, [&](int) {
    for (int i = 0; i < 20; ++i) {
      auto out = s.run(dynamic_feeds(7), {"acc"});
      if (out.ok()) {
        if (bit_identical((*out)[0], ref)) ok.fetch_add(1);
        else other.fetch_add(1);
      } else if (out.status().message().find("memory limit exceeded") != std::string::npos) {
        limited.fetch_add(1);
      } else {
        other.fetch_add(1);
      }
    }
  });
  EXPECT_EQ(other.load(), 0);
  EXPECT_GT(ok.load(), 0);
  EXPECT_LE(s.memory_stats().bytes, o.memory_limit);
}

// A run refused for memory that another run in flight holds waits for that run to end and then
// reclaims its (now idle) blocks, instead of failing a run that fits on its own.
TEST(ConcurrentRuns, RunRefusedForMemoryWaitsForTheRunInFlight) {
  ir::Model m = dynamic_model();
  std::string bytes = onnx::serialize_model(m);
  // A long run (a Loop of 30000 steps over 2048 x 8 values, ~0.3-0.6 s) and a short one of the same
  // rows: each needs about the same buffers, `one_run`.
  auto long_feeds = [] {
    return std::vector<std::pair<std::string, Value>>{{"x", Value(random_tensor({2048, 8}, 7))},
                                                      {"M", Value(Tensor::scalar_int64(30000))}};
  };
  auto short_feeds = [] {
    return std::vector<std::pair<std::string, Value>>{{"x", Value(random_tensor({2048, 8}, 8))},
                                                      {"M", Value(Tensor::scalar_int64(1))}};
  };
  size_t one_run = 0;
  Value short_ref;
  double short_alone_s = 1e9;  // the short run's fastest time alone
  {
    auto probe = Session::create_from_bytes(bytes.data(), bytes.size());
    ASSERT_TRUE(probe.ok());
    for (int i = 0; i < 3; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      auto out = (*probe)->run(short_feeds(), {"acc"});
      short_alone_s = std::min(short_alone_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      short_ref = Value((*out)[0].tensor().clone());
    }
    auto out = (*probe)->run(long_feeds(), {"acc"});
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    one_run = (*probe)->memory_stats().bytes;
  }
  ASSERT_GT(one_run, 0u);
  SessionOptions o;
  o.memory_limit = one_run + one_run / 2;  // room for one run, not two
  // The short run starts some time into the long one. Whether the long run holds its buffers by then is
  // up to the scheduler (on a loaded machine its thread may not have run yet, and the short run then
  // simply fits), so the attempt is repeated with later starts: every short run must succeed with the
  // right result, and at least one must have found the long run's buffers in the way and waited for it
  // (before runs waited, that one failed with the limit's error). A short run that waited ends after
  // the long run's context went idle, but may return before the long thread sets its flag (on a loaded
  // machine the waiter runs first), so taking 20x its time alone counts as having waited too.
  int waited = 0;
  for (int start_ms : {20, 100, 300}) {
    auto created = Session::create_from_bytes(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(created.ok());
    Session& s = **created;
    std::atomic<bool> long_run_done{false};
    std::thread long_run([&] {
      auto r = s.run(long_feeds(), {"acc"});
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      long_run_done = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(start_ms));
    const bool started_during_long_run = !long_run_done.load();
    const auto t0 = std::chrono::steady_clock::now();
    auto out = s.run(short_feeds(), {"acc"});
    const double short_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const bool ended_after_long_run = long_run_done.load() || short_s > 20 * short_alone_s;
    long_run.join();
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_TRUE(bit_identical((*out)[0], short_ref));
    EXPECT_LE(s.memory_stats().bytes, o.memory_limit);
    if (started_during_long_run && ended_after_long_run) ++waited;
  }
  EXPECT_GT(waited, 0) << "no short run met the long one's buffers: the limit never bound";
}

// kernel_cache_stats and memory_stats read the counters of finished runs: they answer while a long
// run is in flight instead of waiting for it (a server polling stats beside a stream of runs), and
// once that run ends its counters are in them.
TEST(ConcurrentRuns, StatsAnswerWhileARunIsInFlight) {
  auto s = session_of(dynamic_model());
  ASSERT_NE(s, nullptr);
  ASSERT_TRUE(s->run(dynamic_feeds(1)).ok());
  const KernelCacheStats before = s->kernel_cache_stats();
  EXPECT_GT(before.misses, 0u);
  EXPECT_GT(s->memory_stats().bytes, 0u);
  // A Loop of many steps over 2048 x 8 values (each an Add and a Tanh, ~10-20 us with the vector Tanh):
  // long enough (~0.3-0.6 s) that the stats calls below, made 20 ms after it starts, come while it
  // is still running.
  std::atomic<bool> long_run_done{false};
  std::thread long_run([&] {
    auto r = s->run({{"x", Value(random_tensor({2048, 8}, 7))}, {"M", Value(Tensor::scalar_int64(30000))}});
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    long_run_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const KernelCacheStats during = s->kernel_cache_stats();
  const MemoryStats memory_during = s->memory_stats();
  const bool answered_during_run = !long_run_done.load();
  long_run.join();
  EXPECT_TRUE(answered_during_run) << "the stats calls waited for the run in flight";
  EXPECT_EQ(during.misses, before.misses);  // the long run's counters are not in yet
  EXPECT_GT(memory_during.bytes, 0u);
  const KernelCacheStats after = s->kernel_cache_stats();
  EXPECT_GT(after.hits + after.misses, during.hits + during.misses);
}
