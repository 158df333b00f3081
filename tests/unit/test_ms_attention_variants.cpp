// com.microsoft MultiHeadAttention and Attention specialize: a variant (the OrtAttnPlan made once per
// input shapes, its scratch the declared workspace) computes exactly what a call without one computes,
// at 1 and 2 threads and for a 1-thread plan on a 2-thread pool, over random configurations (packed
// QKV / packed KV / separate / cross attention, pasts, every mask kind, attention_bias broadcasts,
// biases, float16, reference=1, constant or runtime weights); a steady call at fixed shapes with a
// variant asks ctx.workspace for nothing and allocates nothing; a bad shape is the same error from
// specialize and from compute.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "ep/kernel.h"
#include "ep/kernel_overrides.h"
#include "ep/standalone_context.h"
#include "ep/thread_pool.h"
#include "ir/tensor_util.h"
#include "kernel_test_util.h"
#include "ops/cpu_provider.h"
#include "variant_test_util.h"

using namespace nxrt;
using nxrt::testing::expect_variant_outcomes_match;
using nxrt::testing::expect_outcome_bits_equal;
using nxrt::testing::VariantOutcome;
using nxrt::testing::VariantContext;
using nxrt::test::AllocCounter;
using nxrt::testing::attr_float;
using nxrt::testing::attr_int;
using nxrt::testing::float_tensor_as;
using nxrt::testing::i32_tensor;
using nxrt::testing::normal_tensor;

namespace {

struct Case {
  std::string op = "MultiHeadAttention";
  std::vector<ir::Attribute> attrs;
  std::vector<Value> in;
  std::vector<size_t> const_inputs;  // inputs given to the kernel as constant initializers
  size_t outs = 3;
  std::string what;
};

struct Node {
  ir::Node node;
  ep::KernelOverrides overrides;
  std::unique_ptr<ep::KernelInfo> info;
  std::unique_ptr<ep::Kernel> kernel;
};

std::unique_ptr<Node> make_node(const Case& c, const std::map<std::string, std::string>& overrides = {}) {
  auto n = std::make_unique<Node>();
  n->node.name = "attn";
  n->node.op_type = c.op;
  n->node.domain = "com.microsoft";
  n->node.attributes = c.attrs;
  for (size_t i = 0; i < c.in.size(); ++i) n->node.inputs.push_back(c.in[i].is_none() ? "" : "in" + std::to_string(i));
  for (size_t i = 0; i < c.outs; ++i) n->node.outputs.push_back("out" + std::to_string(i));
  auto ov = ep::KernelOverrides::parse(overrides);
  EXPECT_TRUE(ov.ok());
  if (ov.ok()) n->overrides = *ov;
  n->info = std::make_unique<ep::KernelInfo>(n->node, 1);
  n->info->const_inputs_.assign(c.in.size(), nullptr);
  for (size_t i : c.const_inputs) n->info->const_inputs_[i] = &c.in[i].tensor();
  n->info->registry_ = ops::cpu_provider_registry().get();
  n->info->overrides_ = &n->overrides;
  auto k = ops::cpu_provider_registry()->find("com.microsoft", c.op, 1)->factory(*n->info);
  EXPECT_TRUE(k.ok()) << k.status().to_string();
  if (k.ok()) n->kernel = std::move(k).value();
  return n;
}

Result<std::unique_ptr<ep::KernelVariant>> specialize(const Node& n, const std::vector<Value>& in, int threads) {
  std::vector<DataType> dtypes;
  std::vector<Dims> shapes;
  for (const Value& v : in) {
    dtypes.push_back(v.is_tensor() ? v.tensor().dtype() : DataType::kUndefined);
    shapes.push_back(v.is_tensor() ? v.tensor().shape() : Dims{});
  }
  return n.kernel->specialize(ep::SpecializeContext(*n.info, dtypes.size(), dtypes.data(), shapes.data(), threads));
}


// Runs the case once on a pool of `threads`: without a variant (specialize_threads 0) or with one made
// for `specialize_threads`.
VariantOutcome run_case(const Case& c, int threads, int specialize_threads, const std::map<std::string, std::string>& overrides) {
  VariantOutcome r;
  auto n = make_node(c, overrides);
  if (!n->kernel) return r;
  std::unique_ptr<ep::KernelVariant> v;
  if (specialize_threads > 0) {
    auto s = specialize(*n, c.in, specialize_threads);
    EXPECT_TRUE(s.ok()) << c.what << ": " << s.status().to_string();
    if (!s.ok()) return r;
    v = std::move(s).value();
    EXPECT_NE(v, nullptr) << c.what;
    r.variant_bytes = v ? v->workspace_bytes() : 0;
  }
  ep::ThreadPool pool(threads, ep::ThreadPool::Sizing::kExact);
  VariantContext ctx(*n->info, c.in, pool, v.get());
  const Status s = n->kernel->compute(ctx);
  EXPECT_TRUE(s.ok()) << c.what << ": " << s.to_string();
  if (!s.ok()) return r;
  for (Value& o : ctx.outputs()) r.outs.push_back(o.is_tensor() ? o.tensor().clone() : Tensor());
  r.workspace_calls = ctx.workspace_calls;
  return r;
}


// The case checked as expect_variant_outcomes_match (variant_test_util.h) says.
void expect_variant_matches(const Case& c, const std::map<std::string, std::string>& overrides = {}) {
  SCOPED_TRACE(c.what);
  expect_variant_outcomes_match(c.what, [&](int threads, int specialize_threads) {
    return run_case(c, threads, specialize_threads, overrides);
  });
}

// Mask kinds of the mask index (int32): none, (B) ends, (2B) ends and starts, (B, T), (B, S, T).
enum class MaskKind { kNone, kEnd, kStartEnd, kKeys, kFull };
Value make_mask(MaskKind k, int64_t B, int64_t S, int64_t T) {
  switch (k) {
    case MaskKind::kNone: return Value();
    case MaskKind::kEnd: {
      std::vector<int32_t> v;
      for (int64_t b = 0; b < B; ++b) v.push_back(static_cast<int32_t>(T - b));
      return i32_tensor({B}, v);
    }
    case MaskKind::kStartEnd: {
      std::vector<int32_t> v;
      for (int64_t b = 0; b < B; ++b) v.push_back(static_cast<int32_t>(T - b));
      for (int64_t b = 0; b < B; ++b) v.push_back(static_cast<int32_t>(b % 2));
      return i32_tensor({2 * B}, v);
    }
    case MaskKind::kKeys: {
      std::vector<int32_t> v;
      for (int64_t i = 0; i < B * T; ++i) v.push_back(i % 5 != 3);
      return i32_tensor({B, T}, v);
    }
    case MaskKind::kFull: {
      std::vector<int32_t> v;
      for (int64_t i = 0; i < B * S * T; ++i) v.push_back(i % 7 != 2);
      return i32_tensor({B, S, T}, v);
    }
  }
  return Value();
}

// MultiHeadAttention's key/value layouts.
enum class Kv { kSeparate, kPackedQkv, kPackedKv, kCross };

// A random MultiHeadAttention case.
Case mha_case(std::mt19937& rng, int it, DataType dt) {
  Case c;
  const Kv kv = static_cast<Kv>(it % 4);
  const int64_t B = 1 + it % 2, N = 1 + (it / 2) % 3, H = 8 * (1 + it % 3), S = it % 3 == 0 ? 1 : 2 + it % 5;
  const int64_t L = kv == Kv::kSeparate || kv == Kv::kPackedKv || kv == Kv::kCross ? (it % 5 == 0 ? S + 3 : S) : S;
  const int64_t Hv = kv == Kv::kSeparate && it % 8 == 4 ? H + 8 : kv == Kv::kCross && it % 3 == 1 ? H + 8 : H;
  const bool past = kv != Kv::kCross && it % 3 != 1;
  const int64_t P = past ? 2 + it % 4 : 0, T = P + L;
  c.in.resize(8);
  switch (kv) {
    case Kv::kPackedQkv: c.in[0] = normal_tensor(rng, {B, S, N, 3, H}); break;
    case Kv::kPackedKv:
      c.in[0] = normal_tensor(rng, {B, S, N * H});
      c.in[1] = normal_tensor(rng, {B, L, N, 2, H});
      break;
    case Kv::kCross:
      c.in[0] = normal_tensor(rng, {B, S, N * H});
      c.in[1] = normal_tensor(rng, {B, N, L, H});
      c.in[2] = normal_tensor(rng, {B, N, L, Hv});
      break;
    case Kv::kSeparate:
      c.in[0] = normal_tensor(rng, {B, S, N * H});
      c.in[1] = normal_tensor(rng, {B, L, N * H});
      c.in[2] = normal_tensor(rng, {B, L, N * Hv});
      if (it % 2 == 0) c.in[3] = normal_tensor(rng, {2 * N * H + N * Hv});
      break;
  }
  if (kv == Kv::kCross && it % 2 == 0) c.in[3] = normal_tensor(rng, {3 * N * H});  // only Q's part applies
  const MaskKind mk = static_cast<MaskKind>((it / 3) % 5);
  c.in[4] = make_mask(mk, B, S, T);
  if (it % 4 == 2 || it % 7 == 3) c.in[5] = normal_tensor(rng, {it % 2 ? B : 1, it % 3 ? N : 1, S, T});
  if (past) {
    c.in[6] = normal_tensor(rng, {B, N, P, H});
    c.in[7] = normal_tensor(rng, {B, N, P, Hv});
  }
  for (size_t i : {0, 1, 2, 3, 5, 6, 7})
    if (c.in[i].is_tensor()) c.in[i] = float_tensor_as(c.in[i].tensor(), dt);
  c.attrs = {attr_int("num_heads", N)};
  if (it % 5 == 1) c.attrs.push_back(attr_int("unidirectional", 1));
  if (it % 6 == 5) c.attrs.push_back(attr_float("scale", 0.3f));
  c.what = "MHA it " + std::to_string(it) + " " + dtype_name(dt) + " kv " + std::to_string(static_cast<int>(kv)) +
           " B " + std::to_string(B) + " N " + std::to_string(N) + " S " + std::to_string(S) + " L " +
           std::to_string(L) + " P " + std::to_string(P) + " mask " + std::to_string(static_cast<int>(mk));
  return c;
}

// A random com.microsoft Attention case: constant or runtime weights and bias, a past, masks.
Case ms_attention_case(std::mt19937& rng, int it, DataType dt) {
  Case c;
  c.op = "Attention";
  c.outs = 2;
  const int64_t B = 1 + it % 2, N = 1 + (it / 2) % 3, H = 8 * (1 + it % 2), S = it % 3 == 0 ? 1 : 2 + it % 4;
  const int64_t Din = 16 + 8 * (it % 3);
  const bool past = it % 3 != 1;
  const int64_t Hv = !past && it % 4 == 1 ? H + 8 : H;
  const int64_t P = past ? 1 + it % 5 : 0, T = P + S;
  c.in.resize(6);
  c.in[0] = float_tensor_as(normal_tensor(rng, {B, S, Din}), dt);
  c.in[1] = float_tensor_as(normal_tensor(rng, {Din, 2 * N * H + N * Hv}), dt);
  if (it % 2 == 0) c.in[2] = float_tensor_as(normal_tensor(rng, {2 * N * H + N * Hv}), dt);
  const MaskKind mk = static_cast<MaskKind>((it / 2) % 5);
  c.in[3] = make_mask(mk, B, S, T);
  if (past) c.in[4] = float_tensor_as(normal_tensor(rng, {2, B, N, P, H}), dt);
  if (it % 4 == 3) c.in[5] = float_tensor_as(normal_tensor(rng, {1, it % 3 ? N : 1, S, T}), dt);
  if (it % 3 != 2) c.const_inputs = {1, 2};
  if (!c.in[2].is_tensor()) c.const_inputs = it % 3 != 2 ? std::vector<size_t>{1} : std::vector<size_t>{};
  c.attrs = {attr_int("num_heads", N)};
  if (Hv != H) c.outs = 1;  // present holds K and V rows alike
  if (Hv != H) c.attrs.push_back(nxrt::testing::attr_ints("qkv_hidden_sizes", {N * H, N * H, N * Hv}));
  if (it % 2 == 1) c.attrs.push_back(attr_int("unidirectional", 1));
  c.what = "Attention it " + std::to_string(it) + " " + dtype_name(dt) + " B " + std::to_string(B) + " N " +
           std::to_string(N) + " S " + std::to_string(S) + " P " + std::to_string(P) + " mask " +
           std::to_string(static_cast<int>(mk)) + (c.const_inputs.empty() ? " runtime W" : " constant W");
  return c;
}

}  // namespace

TEST(MsAttentionVariants, MhaVariantMatchesPerCallPlanBitForBit) {
  std::mt19937 rng(101);
  for (int it = 0; it < 40; ++it) expect_variant_matches(mha_case(rng, it, DataType::kFloat));
  for (int it = 0; it < 12; ++it) expect_variant_matches(mha_case(rng, it, DataType::kFloat16));
  for (int it = 0; it < 8; ++it) expect_variant_matches(mha_case(rng, it, DataType::kFloat), {{"reference", "1"}});
}

TEST(MsAttentionVariants, AttentionVariantMatchesPerCallPlanBitForBit) {
  std::mt19937 rng(102);
  for (int it = 0; it < 30; ++it) expect_variant_matches(ms_attention_case(rng, it, DataType::kFloat));
  for (int it = 0; it < 12; ++it) expect_variant_matches(ms_attention_case(rng, it, DataType::kFloat16));
  for (int it = 0; it < 6; ++it) expect_variant_matches(ms_attention_case(rng, it, DataType::kFloat), {{"reference", "1"}});
}

// Constant weights (and bias) prepared at creation give what the same weights as runtime inputs give,
// and the kernel no longer reads the initializers' bytes.
TEST(MsAttentionVariants, AttentionConstantWeightsArePreparedOnce) {
  std::mt19937 rng(103);
  for (int it = 0; it < 6; ++it) {
    Case c = ms_attention_case(rng, it * 3, DataType::kFloat);
    c.const_inputs = c.in[2].is_tensor() ? std::vector<size_t>{1, 2} : std::vector<size_t>{1};
    auto n = make_node(c);
    ASSERT_NE(n->kernel, nullptr);
    EXPECT_FALSE(n->kernel->reads_const_input_data(1)) << c.what;
    EXPECT_EQ(n->kernel->reads_const_input_data(2), !c.in[2].is_tensor()) << c.what;
    EXPECT_TRUE(n->kernel->reads_const_input_data(0));
    Case rt = c;
    rt.const_inputs.clear();
    const VariantOutcome a = run_case(c, 2, 2, {});
    const VariantOutcome b = run_case(rt, 2, 2, {});
    ASSERT_EQ(a.outs.size(), b.outs.size());
    for (size_t o = 0; o < a.outs.size(); ++o) {
      ASSERT_EQ(a.outs[o].shape(), b.outs[o].shape());
      for (int64_t i = 0; i < a.outs[o].numel(); ++i)
        ASSERT_NEAR(a.outs[o].data<float>()[i], b.outs[o].data<float>()[i], 1e-4f) << c.what << " output " << o;
    }
  }
}

// Steady calls at fixed shapes with a variant: no ctx.workspace request, no heap allocation once the
// outputs are bound (an MHA decode step over a past with a key padding mask and attention_bias, and
// Attention's GPT-2 decode step with constant weights).
TEST(MsAttentionVariants, SteadyCallWithVariantAllocatesNothing) {
  std::mt19937 rng(104);
  Case mha;
  {
    const int64_t B = 2, N = 4, H = 64, P = 23, T = P + 1;
    mha.in.resize(8);
    mha.in[0] = normal_tensor(rng, {B, 1, N * H});
    mha.in[1] = normal_tensor(rng, {B, 1, N * H});
    mha.in[2] = normal_tensor(rng, {B, 1, N * H});
    mha.in[3] = normal_tensor(rng, {3 * N * H});
    mha.in[4] = make_mask(MaskKind::kKeys, B, 1, T);
    mha.in[5] = normal_tensor(rng, {1, N, 1, T});
    mha.in[6] = normal_tensor(rng, {B, N, P, H});
    mha.in[7] = normal_tensor(rng, {B, N, P, H});
    mha.attrs = {attr_int("num_heads", N), attr_int("unidirectional", 1)};
    mha.what = "MHA decode";
  }
  Case gpt;
  {
    const int64_t B = 2, N = 4, H = 16, P = 9, Din = N * H;
    gpt.op = "Attention";
    gpt.outs = 2;
    gpt.in.resize(5);
    gpt.in[0] = normal_tensor(rng, {B, 1, Din});
    gpt.in[1] = normal_tensor(rng, {Din, 3 * N * H});
    gpt.in[2] = normal_tensor(rng, {3 * N * H});
    gpt.in[3] = make_mask(MaskKind::kKeys, B, 1, P + 1);
    gpt.in[4] = normal_tensor(rng, {2, B, N, P, H});
    gpt.const_inputs = {1, 2};
    gpt.attrs = {attr_int("num_heads", N), attr_int("unidirectional", 1)};
    gpt.what = "Attention decode";
  }
  for (const Case* c : {&mha, &gpt}) {
    SCOPED_TRACE(c->what);
    auto n = make_node(*c);
    ASSERT_NE(n->kernel, nullptr);
    auto v = specialize(*n, c->in, 2);
    ASSERT_TRUE(v.ok()) << v.status().to_string();
    ep::ThreadPool pool(2);
    VariantContext ctx(*n->info, c->in, pool, v->get());
    ASSERT_TRUE(n->kernel->compute(ctx).ok());
    for (size_t o = 0; o < c->outs; ++o) ctx.bind_output(o, Value(ctx.outputs()[o].tensor().clone()));
    ASSERT_TRUE(n->kernel->compute(ctx).ok());
    AllocCounter::arm();
    for (int step = 0; step < 8; ++step) {
      const Status s = n->kernel->compute(ctx);
      if (!s.ok()) {
        AllocCounter::disarm();
        FAIL() << s.to_string();
      }
    }
    AllocCounter::disarm();
    EXPECT_EQ(AllocCounter::count(), 0u) << "heap allocations over the steps (NXRT_ALLOC_TRACE=1 prints where)";
    EXPECT_EQ(ctx.workspace_calls, 0);
  }
}

// A bad shape is found by the plan: specialize returns the error, and compute without a variant
// reports the same text.
TEST(MsAttentionVariants, ShapeErrorsComeFromThePlan) {
  std::mt19937 rng(105);
  struct Bad { Case c; const char* text; };
  std::vector<Bad> bad;
  {
    Case c = mha_case(rng, 0, DataType::kFloat);  // separate K/V with a past
    c.in[7] = normal_tensor(rng, {c.in[6].tensor().dim(0), c.in[6].tensor().dim(1), c.in[6].tensor().dim(2) + 1, c.in[6].tensor().dim(3)});
    bad.push_back({c, "past_key/past_value"});
  }
  {
    Case c = mha_case(rng, 4, DataType::kFloat);
    c.in[4] = i32_tensor({3, 1, 1, 1}, {1, 1, 1});
    bad.push_back({c, "unsupported mask shape"});
  }
  {
    Case c = ms_attention_case(rng, 0, DataType::kFloat);
    c.in[2] = normal_tensor(rng, {5});
    c.const_inputs = {1};
    bad.push_back({c, "bias must have"});
  }
  {
    Case c = ms_attention_case(rng, 2, DataType::kFloat);
    c.in[5] = normal_tensor(rng, {1, 1, 1, 1});
    bad.push_back({c, "attention_bias must be"});
  }
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.c.what);
    auto n = make_node(b.c);
    ASSERT_NE(n->kernel, nullptr);
    auto v = specialize(*n, b.c.in, 1);
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find(b.text), std::string::npos) << v.status().message();
    ep::ThreadPool pool(1);
    VariantContext ctx(*n->info, b.c.in, pool, nullptr);
    const Status s = n->kernel->compute(ctx);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(b.text), std::string::npos) << s.message();
  }
}
