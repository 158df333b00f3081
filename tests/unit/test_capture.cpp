// Captured replay and the kernel lifecycle: the capture classifier's schedule (seeds, lineage closure,
// pins, modes), the slot state machine and every invalidation, bit-identical replay against eager runs,
// allocation-free replayed steps, trace spans; kernel-cache variants that own their state and
// workspace and are freed on eviction.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "alloc_counter.h"
#include "ep/kernel.h"
#include "kernel_test_util.h"
#include "nxrt/genai.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "ops/conv/conv_engine.h"
#include "ops/conv/winograd.h"
#include "ops/cpu_provider.h"
#include "session/capture.h"
#include "session/capture_schedule.h"
#include "session/executor.h"
#include "shape/shape_inference.h"

using namespace nxrt;
using nxrt::test::AllocCounter;
using nxrt::testing::attr_graph;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::graph_node;
using nxrt::testing::random_tensor;
using nxrt::testing::tensor_info;

namespace {

constexpr int64_t kHid = 8;
constexpr int64_t kVocab = 16;

ir::Dim named(const char* n) { return ir::Dim::named(n); }
ir::Dim fixed(int64_t v) { return ir::Dim::fixed(v); }

// A one-layer attention step over a fixed-capacity KV cache written by TensorScatter (opset 24), with
// S new tokens: the attention mask [1, total] only feeds ReduceSum (a seam: its length grows), whose
// result is added to the context. past_key / present_key have the symbolic capacity on axis 2.
ir::Model kv_step_model() {
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 24});
  ir::Graph& g = m.graph;
  g.name = "kv_step";
  g.inputs = {tensor_info("x", DataType::kFloat, {fixed(1), named("sequence_length"), fixed(kHid)}),
              tensor_info("past_key", DataType::kFloat, {fixed(1), fixed(1), named("max_sequence_length"), fixed(kHid)}),
              tensor_info("write_idx", DataType::kInt64, {fixed(1)}),
              tensor_info("attention_mask", DataType::kInt64, {fixed(1), named("total_sequence_length")})};
  g.outputs = {tensor_info("logits", DataType::kFloat, {fixed(1), named("sequence_length"), fixed(kVocab)}),
               tensor_info("present_key", DataType::kFloat, {fixed(1), fixed(1), named("max_sequence_length"), fixed(kHid)})};
  g.initializers["Wk"] = random_tensor({kHid, kHid}, 1);
  g.initializers["Wq"] = random_tensor({kHid, kHid}, 2);
  g.initializers["Wo"] = random_tensor({kHid, kVocab}, 3);
  g.initializers["heads4"] = Tensor::from_vector<int64_t>(DataType::kInt64, {4}, {1, 1, -1, kHid});
  g.initializers["back3"] = Tensor::from_vector<int64_t>(DataType::kInt64, {3}, {1, -1, kHid});
  g.initializers["axes1"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {1});
  g.nodes = {
      graph_node("MatMul", {"x", "Wk"}, {"k"}),
      graph_node("Reshape", {"k", "heads4"}, {"k4"}),
      graph_node("TensorScatter", {"past_key", "k4", "write_idx"}, {"present_key"}, {attr_int("axis", 2)}),
      graph_node("MatMul", {"x", "Wq"}, {"q"}),
      graph_node("Reshape", {"q", "heads4"}, {"q4"}),
      graph_node("Transpose", {"present_key"}, {"kt"}, {attr_ints("perm", {0, 1, 3, 2})}),
      graph_node("MatMul", {"q4", "kt"}, {"scores"}),
      graph_node("Softmax", {"scores"}, {"probs"}, {attr_int("axis", -1)}),
      graph_node("MatMul", {"probs", "present_key"}, {"ctx4"}),
      graph_node("Reshape", {"ctx4", "back3"}, {"ctx"}),
      graph_node("ReduceSum", {"attention_mask", "axes1"}, {"total"}, {attr_int("keepdims", 0)}),
      graph_node("Cast", {"total"}, {"total_f"}, {attr_int("to", static_cast<int64_t>(DataType::kFloat))}),
      graph_node("Add", {"ctx", "total_f"}, {"y"}),
      graph_node("MatMul", {"y", "Wo"}, {"logits"}),
  };
  return m;
}

std::unique_ptr<Session> make_session(const ir::Model& m, int capture) {
  std::string bytes = onnx::serialize_model(m);
  SessionOptions o;
  o.capture = capture;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

// Drives kv_step_model through an IoBinding the way a generator does: one KV buffer bound as past and
// present, S new tokens at position `pos`, the mask a view of a capacity-sized buffer of ones.
struct KvStepper {
  static constexpr int64_t kCap = 32;
  explicit KvStepper(Session& s, bool shared = true) : session(s) {
    cache = Tensor(DataType::kFloat, {1, 1, kCap, kHid});
    std::memset(cache.raw_data(), 0, cache.nbytes());
    other = Tensor(DataType::kFloat, {1, 1, kCap, kHid});
    ones = Tensor(DataType::kInt64, {1, kCap});
    for (int64_t i = 0; i < kCap; ++i) ones.data<int64_t>()[i] = 1;
    idx = Tensor(DataType::kInt64, {1});
    b.bind_input("past_key", Value(cache));
    b.bind_output("present_key", shared ? cache : other);
    logits = b.bind_output("logits");
  }
  // Runs S tokens at position pos (seeded inputs).
  Status step(int64_t S, int64_t pos) {
    // One input buffer per token count, as a generator keeps them: the binding signature holds
    // addresses, so a decode and a verify step each keep their own.
    Tensor& xs = x_by_len[S];
    if (xs.rank() == 0) xs = Tensor(DataType::kFloat, {1, S, kHid});
    x = xs;
    std::mt19937 rng(static_cast<uint32_t>(1000 + pos));
    std::uniform_real_distribution<float> d(-1.f, 1.f);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = d(rng);
    idx.data<int64_t>()[0] = pos;
    b.bind_input("x", Value(x));
    b.bind_input("write_idx", Value(idx));
    b.bind_input("attention_mask", Value(Tensor(DataType::kInt64, {1, pos + S}, ones.storage())));
    return session.run(b);
  }
  std::vector<float> out() const {
    const Tensor& t = b.output(logits).tensor();
    return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
  }
  Session& session;
  IoBinding b;
  Tensor cache, other, ones, idx, x;
  std::map<int64_t, Tensor> x_by_len;
  size_t logits = 0;
};

// A float graph output without a declared shape.
ir::ValueInfo shapeless(const std::string& name) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = DataType::kFloat;
  v.type.has_shape = false;
  return v;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// An eager session and a capturing session of one model stepped together through KvSteppers; every
// step's logits must be bit-identical.
struct Lockstep {
  explicit Lockstep(const ir::Model& m) : eager(make_session(m, 0)), cap(make_session(m, 1)), e(*eager), c(*cap) {}
  void step(int64_t S) {
    ASSERT_TRUE(e.step(S, pos).ok());
    Status st = c.step(S, pos);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(bit_equal(e.out(), c.out())) << S << " tokens at " << pos;
    pos += S;
  }
  CaptureStats stats() const { return cap->capture_stats(); }
  std::unique_ptr<Session> eager, cap;
  KvStepper e, c;
  int64_t pos = 0;
};

// A plan of `m` over the CPU registry, with load-time shape facts (what a session builds).
struct PlannedModel {
  explicit PlannedModel(ir::Model model) : m(std::move(model)) {
    Status st = shape::infer_shapes(m);
    EXPECT_TRUE(st.ok()) << st.to_string();
    registry = ops::cpu_provider_registry();
    auto p = session::GraphPlan::build(m.graph, session::PlanEnv{&m, registry.get(), nullptr, {}}, {});
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    if (p.ok()) plan = std::move(p).value();
  }
  size_t step_of(const std::string& output) const {
    for (size_t k = 0; k < plan->steps().size(); ++k) {
      for (const auto& o : plan->steps()[k].node->outputs) {
        if (o == output) return k;
      }
    }
    ADD_FAILURE() << "no step makes " << output;
    return 0;
  }
  ir::Model m;
  std::shared_ptr<const ep::KernelRegistry> registry;
  std::unique_ptr<session::GraphPlan> plan;
};

}  // namespace

// ------------------------------------------------------------------------------------------ classifier

TEST(CaptureClassifier, SharedFixedCapacityCacheIsPinnedAndOnlyTheGrowingMaskStaysEager) {
  PlannedModel pm(kv_step_model());
  auto sched = session::build_capture_schedule(*pm.plan, session::ClassifierMode::kFailSafe,
                                               {{"past_key", "present_key"}});
  EXPECT_EQ(sched.steps.size() - sched.captured_steps(), 1u) << sched.describe(*pm.plan);
  const auto& seam = sched.steps[pm.step_of("total")];
  EXPECT_FALSE(seam.captured);
  EXPECT_NE(seam.reason.find("total_sequence_length"), std::string::npos) << seam.reason;
  EXPECT_TRUE(sched.steps[pm.step_of("present_key")].captured);
  EXPECT_TRUE(sched.steps[pm.step_of("scores")].captured);
  ASSERT_EQ(sched.pinned_symbols.size(), 1u);
  EXPECT_EQ(sched.pinned_symbols[0].rfind("max_sequence_length", 0), 0u) << sched.pinned_symbols[0];
  EXPECT_EQ(sched.segments(), 2u);
}

TEST(CaptureClassifier, UnsharedCacheKeepsEveryNodeOnTheGrowingAxisEager) {
  PlannedModel pm(kv_step_model());
  auto sched = session::build_capture_schedule(*pm.plan, session::ClassifierMode::kFailSafe, {});
  for (const char* v : {"present_key", "kt", "scores", "probs", "ctx4", "total"}) {
    EXPECT_FALSE(sched.steps[pm.step_of(v)].captured) << v;
  }
  for (const char* v : {"k", "k4", "q", "q4", "ctx", "y", "logits", "total_f"}) {
    EXPECT_TRUE(sched.steps[pm.step_of(v)].captured) << v << ": " << sched.steps[pm.step_of(v)].reason;
  }
  // The seed: the KV sequence axis of TensorScatter's cache, and the rank-4 past/present graph I/O.
  EXPECT_NE(sched.steps[pm.step_of("present_key")].reason.find("max_sequence_length"), std::string::npos);
  EXPECT_TRUE(sched.pinned_symbols.empty());
}

TEST(CaptureClassifier, GrowingSymbolsCloseOverUnificationAndDerivation) {
  // kv: [1, 1, seq_kv, 4] past. Flatten it ([seq_kv*4], a derived symbol), add a vector whose declared
  // length `n` is unified with seq_kv*4 by broadcasting, and use `n` elsewhere: all of them grow.
  // `batch` stays fixed: derivation runs from source to derived only.
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 21});
  ir::Graph& g = m.graph;
  g.inputs = {tensor_info("past_kv", DataType::kFloat, {fixed(1), fixed(1), named("seq_kv"), fixed(4)}),
              tensor_info("v", DataType::kFloat, {named("n")}),
              tensor_info("w", DataType::kFloat, {named("n")}),
              tensor_info("h", DataType::kFloat, {named("batch"), fixed(4)})};
  g.outputs = {tensor_info("sum", DataType::kFloat, {named("n")}), tensor_info("h2", DataType::kFloat, {named("batch"), fixed(4)}),
               tensor_info("ww", DataType::kFloat, {named("n")})};
  g.initializers["flat"] = Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {-1});
  g.nodes = {graph_node("Reshape", {"past_kv", "flat"}, {"kv_flat"}),
             graph_node("Add", {"kv_flat", "v"}, {"sum"}),
             graph_node("Mul", {"w", "w"}, {"ww"}),
             graph_node("Relu", {"h"}, {"h2"})};
  PlannedModel pm(std::move(m));
  for (auto mode : {session::ClassifierMode::kFailSafe, session::ClassifierMode::kDenylist}) {
    auto sched = session::build_capture_schedule(*pm.plan, mode, {});
    SCOPED_TRACE(session::classifier_mode_name(mode));
    EXPECT_FALSE(sched.steps[pm.step_of("kv_flat")].captured);
    EXPECT_FALSE(sched.steps[pm.step_of("sum")].captured);
    // `w` never meets the cache, but its length `n` was unified with seq_kv*4: the same extent.
    EXPECT_FALSE(sched.steps[pm.step_of("ww")].captured) << sched.describe(*pm.plan);
    EXPECT_TRUE(sched.steps[pm.step_of("h2")].captured) << sched.steps[pm.step_of("h2")].reason;
  }
}

TEST(CaptureClassifier, DataDependentShapesAndControlFlowAreSeamsAndFailSafeDiffersFromDenylist) {
  // NonZero's output length depends on the data; its consumer sees only that minted symbol.
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 21});
  ir::Graph& g = m.graph;
  g.inputs = {tensor_info("x", DataType::kFloat, {fixed(6)})};
  g.outputs = {tensor_info("nzf", DataType::kFloat, {fixed(1), named("k")})};
  g.nodes = {graph_node("NonZero", {"x"}, {"nz"}),
             graph_node("Cast", {"nz"}, {"nzf"}, {attr_int("to", static_cast<int64_t>(DataType::kFloat))})};
  PlannedModel pm(std::move(m));
  auto fs = session::build_capture_schedule(*pm.plan, session::ClassifierMode::kFailSafe, {});
  auto dl = session::build_capture_schedule(*pm.plan, session::ClassifierMode::kDenylist, {});
  for (const auto* s : {&fs, &dl}) {
    const auto& e = s->steps[pm.step_of("nz")];
    EXPECT_FALSE(e.captured);
    EXPECT_NE(e.reason.find("depends on input data"), std::string::npos) << e.reason;
  }
  EXPECT_FALSE(fs.steps[pm.step_of("nzf")].captured) << "fail-safe: a minted symbol without provenance";
  EXPECT_TRUE(dl.steps[pm.step_of("nzf")].captured) << "denylist: not proven growing";
}

// ------------------------------------------------------------------------------------------ replay

TEST(CaptureReplay, DecodeStepsReplayBitIdenticalToEagerAndAllocateNothing) {
  Lockstep t(kv_step_model());
  t.step(4);  // prefill of 4 tokens
  uint64_t allocs = 0;
  while (t.pos < KvStepper::kCap) {
    const bool replaying = t.stats().replayed_runs > 0;
    ASSERT_TRUE(t.e.step(1, t.pos).ok());
    if (replaying) AllocCounter::arm();
    Status st = t.c.step(1, t.pos);
    if (replaying) {
      AllocCounter::disarm();
      allocs += AllocCounter::count();
    }
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_TRUE(bit_equal(t.e.out(), t.c.out())) << "step at " << t.pos;
    ++t.pos;
  }
  ASSERT_EQ(std::memcmp(t.e.cache.raw_data(), t.c.cache.raw_data(), t.e.cache.nbytes()), 0);
  const CaptureStats st = t.stats();
  EXPECT_TRUE(st.enabled);
  EXPECT_EQ(st.recorded_runs, 1u);
  // Prefill (warm-up of slot 0), decode 1 (warm-up of slot 1), decode 2 (recording), then replays.
  EXPECT_EQ(st.replayed_runs, static_cast<uint64_t>(KvStepper::kCap - 4 - 2));
  EXPECT_EQ(st.invalidations, 0u);
  EXPECT_EQ(st.seam_steps, 1u) << t.cap->describe_capture({{"past_key", "present_key"}});
  EXPECT_EQ(allocs, 0u) << "heap allocations over replayed steps (NXRT_ALLOC_TRACE=1 prints where)";
  EXPECT_EQ(t.eager->capture_stats().replayed_runs, 0u);
  EXPECT_FALSE(t.eager->capture_stats().enabled);
}

TEST(CaptureReplay, BindingSignatureChangeDropsTheRecord) {
  Lockstep t(kv_step_model());
  // Moves the KV cache to another buffer (same contents): the signature's addresses change.
  auto move_cache = [&]() {
    for (KvStepper* k : {&t.e, &t.c}) {
      Tensor moved(DataType::kFloat, {1, 1, KvStepper::kCap, kHid});
      std::memcpy(moved.raw_data(), k->cache.raw_data(), moved.nbytes());
      k->cache = moved;
      k->b.bind_input("past_key", Value(moved));
      k->b.bind_output("present_key", moved);
    }
  };
  for (int i = 0; i < 4; ++i) t.step(1);
  ASSERT_EQ(t.stats().replayed_runs, 2u);
  move_cache();
  t.step(1);  // a new signature: the free slot warms up, this step is eager
  EXPECT_EQ(t.stats().replayed_runs, 2u);
  for (int i = 0; i < 3; ++i) t.step(1);  // recorded at the new addresses, then replayed
  EXPECT_EQ(t.stats().replayed_runs, 4u);
  EXPECT_EQ(t.stats().invalidations, 0u) << "the first record still holds its slot";
  move_cache();
  t.step(1);  // a third signature takes the least recently used slot: the first record is dropped
  const CaptureStats st = t.stats();
  EXPECT_EQ(st.invalidations, 1u);
  EXPECT_NE(st.last_invalidation.find("new binding signature"), std::string::npos) << st.last_invalidation;
  for (int i = 0; i < 3; ++i) t.step(1);
  EXPECT_EQ(t.stats().replayed_runs, 6u);
}

TEST(CaptureReplay, ResetAndPrefillShapeChangesReWarm) {
  Lockstep t(kv_step_model());
  for (int i = 0; i < 4; ++i) t.step(1);
  ASSERT_EQ(t.stats().slot_states[0], "ready");
  // A rewind / new sequence: every record goes, the next steps warm up again.
  t.cap->reset_capture();
  CaptureStats st = t.stats();
  EXPECT_EQ(st.invalidations, 1u);
  EXPECT_NE(st.last_invalidation.find("reset"), std::string::npos) << st.last_invalidation;
  EXPECT_EQ(st.slot_states[0], "needs-warmup");
  t.pos = 0;
  for (int i = 0; i < 4; ++i) t.step(1);
  EXPECT_EQ(t.stats().slot_states[0], "ready");
  // Prefills of new lengths take the least recently used slot: the decode record survives the first,
  // the second (a third signature) takes its slot back from it.
  t.step(3);
  const uint64_t replays = t.stats().replayed_runs;
  t.step(1);
  EXPECT_EQ(t.stats().replayed_runs, replays + 1) << "decode still replays after a prefill";
  t.step(2);
  t.step(5);
  st = t.stats();
  EXPECT_EQ(st.invalidations, 2u) << st.last_invalidation;
  EXPECT_NE(st.last_invalidation.find("new binding signature"), std::string::npos) << st.last_invalidation;
  for (int i = 0; i < 4; ++i) t.step(1);
}

TEST(CaptureReplay, DecodeAndVerifySlotsAlternateWithoutReRecording) {
  Lockstep t(kv_step_model());
  for (int i = 0; i < 8; ++i) t.step(i % 2 == 0 ? 1 : 3);  // decode one token, verify k+1 = 3 drafted ones
  const CaptureStats st = t.stats();
  EXPECT_EQ(st.recorded_runs, 2u);
  EXPECT_EQ(st.replayed_runs, 4u);
  EXPECT_EQ(st.invalidations, 0u);
}

TEST(CaptureReplay, EvictingARecordedVariantDropsTheRecord) {
  ::setenv("NXRT_KERNEL_CACHE_VARIANTS_PER_NODE", "1", 1);
  Lockstep t(kv_step_model());
  ::unsetenv("NXRT_KERNEL_CACHE_VARIANTS_PER_NODE");
  for (int i = 0; i < 3; ++i) t.step(1);
  ASSERT_EQ(t.stats().replayed_runs, 1u);
  // Three new tokens: every captured node needs a variant at the new shapes, and with one variant per
  // node the recorded ones are evicted.
  t.step(3);
  const CaptureStats st = t.stats();
  EXPECT_EQ(st.invalidations, 1u);
  EXPECT_NE(st.last_invalidation.find("evicted"), std::string::npos) << st.last_invalidation;
  for (int i = 0; i < 4; ++i) t.step(1);
  EXPECT_EQ(t.stats().replayed_runs, 3u) << "warmed up and recorded again";
}

namespace {
// h = x * W (captured); an If on ReduceSum(flag) > 0 doubles or triples h (the branch reads h from the
// outer scope); y = that + 1 (captured).
ir::Model if_model() {
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 21});
  ir::Graph& g = m.graph;
  g.inputs = {tensor_info("x", DataType::kFloat, {fixed(1), fixed(kHid)}), tensor_info("flag", DataType::kFloat, {fixed(1)})};
  g.outputs = {tensor_info("y", DataType::kFloat, {fixed(1), fixed(kHid)})};
  g.initializers["W"] = random_tensor({kHid, kHid}, 9);
  g.initializers["two"] = Tensor::from_vector<float>(DataType::kFloat, {1}, {2.f});
  g.initializers["three"] = Tensor::from_vector<float>(DataType::kFloat, {1}, {3.f});
  g.initializers["zero"] = Tensor::from_vector<float>(DataType::kFloat, {1}, {0.f});
  g.initializers["one"] = Tensor::from_vector<float>(DataType::kFloat, {1}, {1.f});
  auto branch = [](const char* name, const char* factor) {
    auto b = std::make_shared<ir::Graph>();
    b->name = name;
    b->outputs = {tensor_info(std::string(name) + "_out", DataType::kFloat, {fixed(1), fixed(kHid)})};
    b->nodes = {graph_node("Mul", {"h", factor}, {std::string(name) + "_out"})};
    return b;
  };
  g.nodes = {graph_node("MatMul", {"x", "W"}, {"h"}),
             graph_node("Greater", {"flag", "zero"}, {"cond1"}),
             graph_node("Squeeze", {"cond1"}, {"cond"}),
             graph_node("If", {"cond"}, {"branch"}, {attr_graph("then_branch", branch("then", "two")),
                                                     attr_graph("else_branch", branch("else", "three"))}),
             graph_node("Add", {"branch", "one"}, {"y"})};
  return m;
}
}  // namespace

TEST(CaptureReplay, AnIfBranchFlipFinishesTheStepEagerlyAndReRecords) {
  ir::Model m = if_model();
  auto eager = make_session(m, 0);
  auto cap = make_session(m, 1);
  ASSERT_TRUE(eager && cap);
  Tensor x(DataType::kFloat, {1, kHid}), flag(DataType::kFloat, {1});
  IoBinding be, bc;
  for (IoBinding* b : {&be, &bc}) {
    b->bind_input("x", Value(x));
    b->bind_input("flag", Value(flag));
    b->bind_output("y");
  }
  auto run = [&](float f, int i) {
    flag.data<float>()[0] = f;
    for (int64_t k = 0; k < kHid; ++k) x.data<float>()[k] = 0.25f * static_cast<float>(k - i);
    ASSERT_TRUE(eager->run(be).ok());
    Status st = cap->run(bc);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const Tensor& a = be.output(0).tensor();
    const Tensor& b = bc.output(0).tensor();
    ASSERT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "run " << i;
  };
  for (int i = 0; i < 4; ++i) run(1.f, i);
  CaptureStats st = cap->capture_stats();
  ASSERT_EQ(st.replayed_runs, 2u);
  EXPECT_EQ(st.seam_steps, 1u) << "only the If is eager";
  run(-1.f, 4);  // the other branch
  st = cap->capture_stats();
  EXPECT_EQ(st.replay_fallbacks, 1u);
  EXPECT_EQ(st.invalidations, 1u);
  EXPECT_NE(st.last_invalidation.find("other branch"), std::string::npos) << st.last_invalidation;
  run(-1.f, 5);  // re-recorded on the next step
  run(-1.f, 6);
  EXPECT_EQ(cap->capture_stats().recorded_runs, 2u);
  EXPECT_EQ(cap->capture_stats().replayed_runs, 3u);
}

namespace {
// A recurrent step: new_state = x * W + state, y = Relu(new_state); the caller feeds new_state back
// as the next state (runtime-allocated, so it is a pool block the record made).
ir::Model recurrent_model() {
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 21});
  ir::Graph& g = m.graph;
  g.inputs = {tensor_info("x", DataType::kFloat, {fixed(1), fixed(kHid)}),
              tensor_info("state", DataType::kFloat, {fixed(1), fixed(kHid)})};
  g.outputs = {tensor_info("new_state", DataType::kFloat, {fixed(1), fixed(kHid)}),
               tensor_info("y", DataType::kFloat, {fixed(1), fixed(kHid)})};
  g.initializers["W"] = random_tensor({kHid, kHid}, 11);
  g.nodes = {graph_node("MatMul", {"x", "W"}, {"h"}), graph_node("Add", {"h", "state"}, {"new_state"}),
             graph_node("Relu", {"new_state"}, {"y"})};
  return m;
}
}  // namespace

TEST(CaptureReplay, AKeptRecurrentOutputIsNeverOverwrittenAndStillReplays) {
  ir::Model m = recurrent_model();
  std::unique_ptr<Session> sessions[2] = {make_session(m, 0), make_session(m, 1)};
  ASSERT_TRUE(sessions[0] && sessions[1]);
  IoBinding b[2];
  Value state[2];
  size_t ns[2], yo[2];
  for (int c = 0; c < 2; ++c) {
    state[c] = Value(random_tensor({1, kHid}, 12));
    ns[c] = b[c].bind_output("new_state");
    yo[c] = b[c].bind_output("y");
  }
  for (int step = 0; step < 12; ++step) {
    Value x(random_tensor({1, kHid}, 100 + static_cast<uint32_t>(step)));
    std::vector<float> kept_before;
    for (int c = 0; c < 2; ++c) {
      b[c].bind_input("x", x);
      b[c].bind_input("state", state[c]);
      const Tensor& st = state[c].tensor();
      if (c == 1) kept_before.assign(st.data<float>(), st.data<float>() + st.numel());
      ASSERT_TRUE(sessions[c]->run(b[c]).ok()) << "step " << step;
    }
    // The state the capturing caller fed in (last step's output, still held) is unchanged.
    const Tensor& held = state[1].tensor();
    ASSERT_EQ(std::memcmp(held.data<float>(), kept_before.data(), kept_before.size() * sizeof(float)), 0)
        << "a replay wrote over an output the caller kept, step " << step;
    for (size_t k : {ns[0], yo[0]}) {
      const Tensor& e = b[0].output(k).tensor();
      const Tensor& r = b[1].output(k).tensor();
      ASSERT_EQ(std::memcmp(e.raw_data(), r.raw_data(), e.nbytes()), 0) << "step " << step;
    }
    for (int c = 0; c < 2; ++c) state[c] = b[c].output(ns[c]);
  }
  const CaptureStats st = sessions[1]->capture_stats();
  EXPECT_GE(st.replayed_runs, 9u) << "the kept state moves to a fresh block instead of forcing eager steps";
  EXPECT_EQ(st.invalidations, 0u) << st.last_invalidation;
}

TEST(CaptureReplay, TraceSpansSayCapturedOrSeamAndWhy) {
  ir::Model m = kv_step_model();
  const std::string path = ::testing::TempDir() + "capture_trace.json";
  std::string bytes = onnx::serialize_model(m);
  SessionOptions o;
  o.capture = 1;
  o.trace_path = path;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  ASSERT_TRUE(s.ok());
  KvStepper c(**s);
  for (int64_t pos = 0; pos < 4; ++pos) ASSERT_TRUE(c.step(1, pos).ok());
  ASSERT_TRUE((*s)->end_profiling().ok());
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string trace = ss.str();
  EXPECT_NE(trace.find("\"capture\":\"captured\""), std::string::npos);
  EXPECT_NE(trace.find("\"capture\":\"seam\",\"why\":\"shape of 'attention_mask'"), std::string::npos);
  EXPECT_NE(trace.find("\"capture\":\"recording\""), std::string::npos);
  EXPECT_NE(trace.find("\"capture\":\"replay\""), std::string::npos);
  std::remove(path.c_str());
}

TEST(CaptureReplay, EnvironmentSwitchDisablesReplay) {
  ::setenv("NXRT_CAPTURE", "0", 1);
  auto s = make_session(kv_step_model(), -1);
  ::unsetenv("NXRT_CAPTURE");
  KvStepper c(*s);
  for (int64_t pos = 0; pos < 5; ++pos) ASSERT_TRUE(c.step(1, pos).ok());
  EXPECT_FALSE(s->capture_stats().enabled);
  EXPECT_EQ(s->capture_stats().replayed_runs, 0u);
  EXPECT_EQ(s->capture_stats().eager_runs, 5u);
}

// ------------------------------------------------------------------------------------------ real decoders

// 256 greedy decode steps on the tiny decoders of both export styles (ctest's genai_tiny_models
// fixture): replay against eager, every logit bit-identical, the replayed steps allocation-free.
TEST(CaptureReplay, TinyDecodersReplayBitIdenticalOver256GreedySteps) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset (ctest sets it after writing the tiny models)";
  // Every export style the Generator runs: GroupQueryAttention over one shared buffer (genai),
  // TensorScatter into a static cache (onnx), caches that grow by concatenation (optimum, gpt2), an
  // If on use_cache_branch (optimum-merged) and recurrent conv states (hybrid).
  struct Style {
    const char* dir;
    uint64_t min_replays;  // of 256 decode steps
    bool fixed_cache;      // KV bound in place: a replayed step allocates nothing
  };
  for (const Style& style : {Style{"genai", 250, true}, Style{"onnx", 250, true}, Style{"optimum", 250, false},
                             Style{"gpt2", 250, false}, Style{"optimum-merged", 0, false}, Style{"hybrid", 250, false}}) {
    SCOPED_TRACE(style.dir);
    if (!std::ifstream(std::string(root) + "/" + style.dir + "/genai_config.json")) {
      ADD_FAILURE() << "no tiny model folder " << style.dir << " (the genai_tiny_models fixture writes it)";
      continue;
    }
    std::unique_ptr<genai::Model> models[2];
    std::unique_ptr<genai::Generator> gens[2];
    for (int c = 0; c < 2; ++c) {
      genai::ModelOptions mo;
      mo.session.capture = c;
      auto model = genai::Model::create(std::string(root) + "/" + style.dir, mo);
      ASSERT_TRUE(model.ok()) << model.status().to_string();
      models[c] = std::move(model).value();
      genai::GeneratorParams params(*models[c]);
      params.search.max_length = 300;
      auto gen = genai::Generator::create(*models[c], params);
      ASSERT_TRUE(gen.ok()) << gen.status().to_string();
      gens[c] = std::move(gen).value();
      ASSERT_TRUE(gens[c]->append_tokens({5, 17, 3, 99, 42, 7, 1, 250}).ok());
    }
    // Odd steps run the model in get_logits (the logits are compared bit for bit), even steps inside
    // generate_next_token (the replay's allocations are counted there).
    uint64_t allocs = 0;
    for (int i = 0; i < 256; ++i) {
      if (i % 2 == 1) {
        auto le = gens[0]->get_logits();
        auto lc = gens[1]->get_logits();
        ASSERT_TRUE(le.ok() && lc.ok());
        ASSERT_TRUE(bit_equal(*le, *lc)) << "logits differ at step " << i;
      }
      ASSERT_TRUE(gens[0]->generate_next_token().ok());
      const bool measure = i % 2 == 0 && models[1]->session().capture_stats().replayed_runs > 0;
      if (measure) AllocCounter::arm();
      Status st = gens[1]->generate_next_token();
      if (measure) {
        AllocCounter::disarm();
        allocs += AllocCounter::count();
      }
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(gens[0]->next_token(), gens[1]->next_token()) << "step " << i;
    }
    const CaptureStats st = models[1]->session().capture_stats();
    const std::string sched = models[1]->session().describe_capture({});
    EXPECT_GE(st.replayed_runs, style.min_replays) << sched;
    EXPECT_EQ(st.invalidations, 0u) << st.last_invalidation;
    if (style.min_replays == 0) {
      // The merged export runs the whole decoder inside If(use_cache_branch): one host-control-flow
      // seam, nothing to replay at the main graph's level.
      EXPECT_EQ(st.replayed_runs, 0u);
      EXPECT_NE(sched.find("host control flow: If"), std::string::npos) << sched;
      continue;
    }
    EXPECT_NE(sched.find("segment 1"), std::string::npos) << sched;
    // A cache that grows by concatenation allocates its new presents every step (eager seams); a
    // fixed-capacity cache bound in place leaves nothing to allocate.
    if (style.fixed_cache) {
      EXPECT_GT(st.captured_steps, st.seam_steps) << sched;
      EXPECT_EQ(allocs, 0u) << "heap allocations over replayed decode steps";
    }
  }
}

// ------------------------------------------------------------------------------------------ lifecycle

namespace {

std::atomic<int> g_live_variants{0};

// y = x + 1, with a variant per input shape that declares a workspace: the executor must reserve it
// before compute, and evicting the variant must destroy it.
class ProbeVariant final : public ep::KernelVariant {
 public:
  explicit ProbeVariant(int64_t n) : n_(n) { ++g_live_variants; }
  ~ProbeVariant() override { --g_live_variants; }
  size_t workspace_bytes() const override { return static_cast<size_t>(n_) * sizeof(float); }
  int64_t n() const { return n_; }

 private:
  int64_t n_;
};

class ProbeKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo&) { return Status::Ok(); }
  Result<std::unique_ptr<ep::KernelVariant>> specialize(const ep::SpecializeContext& sc) const override {
    ++specializations;
    return std::unique_ptr<ep::KernelVariant>(std::make_unique<ProbeVariant>(shape_numel(sc.shape(0))));
  }
  Status compute(ep::KernelContext& ctx) const override {
    const auto* v = dynamic_cast<const ProbeVariant*>(ctx.variant());
    if (!v) return ctx.error("no variant");
    if (v->n() != ctx.input(0).numel()) return ctx.error("variant of another shape");
    float* ws = static_cast<float*>(ctx.variant_workspace());
    if (!ws) return ctx.error("the variant's workspace was not reserved");
    last_workspace = ws;
    const Tensor& x = ctx.input(0);
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), x.shape()));
    for (int64_t i = 0; i < x.numel(); ++i) ws[i] = x.data<float>()[i] + 1.f;
    std::memcpy(y->raw_data(), ws, x.nbytes());
    return Status::Ok();
  }
  static inline std::atomic<int> specializations{0};
  static inline void* last_workspace = nullptr;
};

}  // namespace

TEST(KernelLifecycle, VariantsHoldPerShapeStateAndWorkspaceAndEvictionFreesThem) {
  ep::KernelRegistry reg;
  reg.add_class<ProbeKernel>("", "Relu");
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.inputs = {tensor_info("x", DataType::kFloat, {named("n")})};
  m.graph.outputs = {tensor_info("y", DataType::kFloat, {named("n")})};
  m.graph.nodes = {graph_node("Relu", {"x"}, {"y"})};
  ASSERT_TRUE(shape::infer_shapes(m).ok());
  auto plan = session::GraphPlan::build(m.graph, session::PlanEnv{&m, &reg, nullptr, {}}, {});
  ASSERT_TRUE(plan.ok()) << plan.status().to_string();
  session::RunResources res;
  res.cache->variants_per_node = 2;
  ep::ThreadPool pool(1);
  session::Frame frame;
  frame.plan = plan->get();
  frame.res = &res;
  frame.slots.resize((*plan)->num_slots());
  auto run = [&](int64_t n) {
    Tensor x(DataType::kFloat, {n});
    for (int64_t i = 0; i < n; ++i) x.data<float>()[i] = static_cast<float>(i);
    frame.slots[static_cast<size_t>((*plan)->input_slots()[0])] = Value(x);
    ASSERT_TRUE((*plan)->prepare_frame(frame).ok());
    Status st = (*plan)->execute(frame, pool);
    ASSERT_TRUE(st.ok()) << st.to_string();
    const Tensor& y = frame.slots[static_cast<size_t>((*plan)->output_slots()[0])].tensor();
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y.data<float>()[i], static_cast<float>(i) + 1.f);
    session::GraphPlan::clear_frame(frame);
    res.buffers.end_run();
  };
  const int live0 = g_live_variants.load();
  ProbeKernel::specializations = 0;
  run(4);
  run(4);
  EXPECT_EQ(ProbeKernel::specializations.load(), 1) << "specialized once per shape";
  run(5);
  EXPECT_EQ(g_live_variants.load() - live0, 2);
  run(6);  // a third shape: the least recently used variant (n=4) is evicted and destroyed
  EXPECT_EQ(g_live_variants.load() - live0, 2);
  EXPECT_EQ(res.cache_stats.evictions, 1u);
  run(4);
  EXPECT_EQ(ProbeKernel::specializations.load(), 4) << "n=4 was evicted, so it is specialized again";
  plan->reset();
  EXPECT_EQ(g_live_variants.load(), live0) << "the plan's cache owned every variant";
}

TEST(KernelLifecycle, SpecializedSignalAndEinsumKernelsMatchTheirPerCallResults) {
  // DFT / STFT keep their FFT plans and Einsum its plan per shape; running the same node at two shapes
  // alternately through a session (variants cached) must equal running each shape in a fresh session.
  ir::Model m;
  m.ir_version = 10;
  m.opset_imports.push_back({"", 20});
  ir::Graph& g = m.graph;
  g.inputs = {tensor_info("sig", DataType::kFloat, {fixed(2), named("len"), fixed(1)}),
              tensor_info("a", DataType::kFloat, {named("i"), fixed(3)}), tensor_info("b", DataType::kFloat, {fixed(3), named("k")})};
  g.outputs = {shapeless("spec"), shapeless("st"), shapeless("ab")};
  g.initializers["step"] = Tensor::from_vector<int64_t>(DataType::kInt64, {}, {4});
  g.initializers["fl"] = Tensor::from_vector<int64_t>(DataType::kInt64, {}, {6});
  g.nodes = {graph_node("DFT", {"sig"}, {"spec"}),
             graph_node("STFT", {"sig", "step", "", "fl"}, {"st"}),
             graph_node("Einsum", {"a", "b"}, {"ab"}, {nxrt::testing::attr_string("equation", "ij,jk->ik")})};
  std::string bytes = onnx::serialize_model(m);
  auto cached = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(cached.ok()) << cached.status().to_string();
  auto feeds = [](int64_t len, int64_t i, int64_t k) {
    return std::vector<std::pair<std::string, Value>>{{"sig", Value(random_tensor({2, len, 1}, 5))},
                                                      {"a", Value(random_tensor({i, 3}, 6))},
                                                      {"b", Value(random_tensor({3, k}, 7))}};
  };
  for (int rep = 0; rep < 2; ++rep) {
    for (auto [len, i, k] : {std::tuple<int64_t, int64_t, int64_t>{16, 2, 5}, {12, 4, 3}}) {
      auto got = (*cached)->run(feeds(len, i, k));
      auto fresh = Session::create_from_bytes(bytes.data(), bytes.size());
      ASSERT_TRUE(fresh.ok());
      auto want = (*fresh)->run(feeds(len, i, k));
      ASSERT_TRUE(got.ok() && want.ok()) << got.status().to_string() << want.status().to_string();
      for (size_t o = 0; o < 3; ++o) {
        const Tensor& a = (*got)[o].tensor();
        const Tensor& b = (*want)[o].tensor();
        ASSERT_EQ(a.shape(), b.shape());
        ASSERT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "output " << o << " len " << len;
      }
    }
  }
  const KernelCacheStats st = (*cached)->kernel_cache_stats();
  EXPECT_GE(st.hits, 3u) << "the second round found the variants";
}

TEST(KernelLifecycle, ConvVariantsHoldTheirPlansAndEvictionFreesThemAndTheirWeights) {
  // One 3x3 conv (+ Relu, which the optimizer may fuse: the FusedConv wrapper forwards the variant) at
  // shapes that take Winograd (12x12, 16x16) and shapes that do not (3x3 .. 6x6). Each shape gets its
  // own ConvVariant; the Winograd shapes share one transformed copy of the weights, which goes with
  // the last variant that uses it; the session's outputs equal a fresh session's at every shape.
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  ir::Graph& g = m.graph;
  g.inputs = {tensor_info("x", DataType::kFloat, {fixed(1), fixed(16), named("h"), named("w")})};
  g.outputs = {shapeless("y")};
  g.initializers["W"] = random_tensor({16, 16, 3, 3}, 11);
  g.initializers["B"] = random_tensor({16}, 12);
  g.nodes = {graph_node("Conv", {"x", "W", "B"}, {"c"}, {attr_ints("pads", {1, 1, 1, 1})}),
             graph_node("Relu", {"c"}, {"y"})};
  std::string bytes = onnx::serialize_model(m);
  const int64_t variants0 = ops::conv_variants_live(), wino0 = ops::winograd_weights_live();
  auto cached = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_TRUE(cached.ok()) << cached.status().to_string();
  auto run = [&](int64_t hw) {
    const Tensor x = random_tensor({1, 16, hw, hw}, 20 + static_cast<uint32_t>(hw));
    auto got = (*cached)->run({{"x", Value(x)}});
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    auto fresh = Session::create_from_bytes(bytes.data(), bytes.size());
    ASSERT_TRUE(fresh.ok());
    auto want = (*fresh)->run({{"x", Value(x)}});
    ASSERT_TRUE(want.ok()) << want.status().to_string();
    const Tensor& a = (*got)[0].tensor();
    const Tensor& b = (*want)[0].tensor();
    ASSERT_EQ(a.shape(), (Dims{1, 16, hw, hw}));
    ASSERT_EQ(a.shape(), b.shape());
    ASSERT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << hw << "x" << hw;
  };
  run(12);
  run(16);
  run(12);
  EXPECT_EQ(ops::conv_variants_live() - variants0, 2) << "one variant per shape";
  EXPECT_EQ(ops::winograd_weights_live() - wino0, 1) << "both Winograd shapes share one transformed copy";
  run(4);
  run(5);
  run(6);  // a fifth shape: 16x16 (least recently used) is evicted
  EXPECT_EQ(ops::conv_variants_live() - variants0, 4) << "the per-node bound";
  EXPECT_EQ(ops::winograd_weights_live() - wino0, 1) << "12x12 still holds the transformed weights";
  run(3);  // 12x12 is evicted: nothing takes Winograd any more
  EXPECT_EQ(ops::conv_variants_live() - variants0, 4);
  EXPECT_EQ(ops::winograd_weights_live() - wino0, 0) << "evicting the last Winograd variant freed its weights";
  EXPECT_EQ((*cached)->kernel_cache_stats().evictions, 2u);
  run(12);  // planned again, weights transformed again
  EXPECT_EQ(ops::winograd_weights_live() - wino0, 1);
  cached->reset();
  EXPECT_EQ(ops::conv_variants_live(), variants0);
  EXPECT_EQ(ops::winograd_weights_live(), wino0);
}
