// The attention kernels' specialize: a variant (the plan made once per input shapes, its scratch the
// declared workspace) computes exactly what a call without one computes, at 1 and 2 threads, on random
// decode and prefill configurations; a step at fixed shapes with a variant asks ctx.workspace for
// nothing and, on GroupQueryAttention's decode and chunk paths over a fixed-capacity cache, allocates
// nothing; one variant serves every valid length its shapes allow (seqlens_k is read at compute).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "alloc_counter.h"
#include "ep/cpu_features.h"
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



// One node of a com.microsoft or ai.onnx attention op, its kernel created from the CPU registry.
struct Node {
  ir::Node node;
  ep::KernelOverrides overrides;
  std::unique_ptr<ep::KernelInfo> info;
  std::unique_ptr<ep::Kernel> kernel;
};

std::unique_ptr<Node> make_node(const std::string& domain, const std::string& op, int64_t opset,
                                std::vector<ir::Attribute> attrs, const std::vector<Value>& in, size_t outs,
                                const std::map<std::string, std::string>& overrides = {}) {
  auto n = std::make_unique<Node>();
  n->node.name = "attn";
  n->node.op_type = op;
  n->node.domain = domain;
  n->node.attributes = std::move(attrs);
  for (size_t i = 0; i < in.size(); ++i) n->node.inputs.push_back(in[i].is_none() ? "" : "in" + std::to_string(i));
  for (size_t i = 0; i < outs; ++i) n->node.outputs.push_back("out" + std::to_string(i));
  auto ov = ep::KernelOverrides::parse(overrides);
  EXPECT_TRUE(ov.ok());
  if (ov.ok()) n->overrides = *ov;
  n->info = std::make_unique<ep::KernelInfo>(n->node, opset);
  n->info->const_inputs_.assign(in.size(), nullptr);
  n->info->registry_ = ops::cpu_provider_registry().get();
  n->info->overrides_ = &n->overrides;
  auto k = ops::cpu_provider_registry()->find(domain, op, opset)->factory(*n->info);
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

struct Case {
  std::string domain = "com.microsoft", op = "GroupQueryAttention";
  int64_t opset = 1;
  std::vector<ir::Attribute> attrs;
  std::vector<Value> in;
  size_t outs = 3;
  bool share_kv = false;  // GQA: present_key/value written into past_key/value's buffers (inputs 3, 4)
  std::string what;
};


// Runs the case once on a pool of `threads`: without a variant (specialize_threads 0) or with one made
// for `specialize_threads`. A shared KV buffer is a fresh copy of the past each run.
VariantOutcome run_case(const Case& c, int threads, int specialize_threads,
                 const std::map<std::string, std::string>& overrides = {}) {
  VariantOutcome r;
  auto n = make_node(c.domain, c.op, c.opset, c.attrs, c.in, c.outs, overrides);
  if (!n->kernel) return r;
  std::vector<Value> in = c.in;
  if (c.share_kv) {
    in[3] = Value(in[3].tensor().clone());
    in[4] = Value(in[4].tensor().clone());
  }
  std::unique_ptr<ep::KernelVariant> v;
  if (specialize_threads > 0) {
    auto s = specialize(*n, in, specialize_threads);
    EXPECT_TRUE(s.ok()) << c.what << ": " << s.status().to_string();
    if (!s.ok()) return r;
    v = std::move(s).value();
    EXPECT_NE(v, nullptr) << c.what;
    r.variant_bytes = v ? v->workspace_bytes() : 0;
  }
  ep::ThreadPool pool(threads, ep::ThreadPool::Sizing::kExact);
  VariantContext ctx(*n->info, in, pool, v.get());
  if (c.share_kv) {
    ctx.bind_output(1, in[3]);
    ctx.bind_output(2, in[4]);
  }
  const Status s = n->kernel->compute(ctx);
  EXPECT_TRUE(s.ok()) << c.what << ": " << s.to_string();
  if (!s.ok()) return r;
  if (c.share_kv) {
    EXPECT_EQ(ctx.outputs()[1].tensor().raw_data(), in[3].tensor().raw_data()) << c.what << ": appended in place";
  }
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

// Random rotary caches [rows, D/2].
void add_rotary(std::mt19937& rng, int64_t D, bool interleaved, Case* c) {
  const int64_t rows = 300, half = D / 2;
  Tensor cs(DataType::kFloat, {rows, half}), sn(DataType::kFloat, {rows, half});
  for (int64_t p = 0; p < rows; ++p)
    for (int64_t i = 0; i < half; ++i) {
      cs.data<float>()[p * half + i] = std::cos(p * std::pow(10000.f, -2.f * i / D));
      sn.data<float>()[p * half + i] = std::sin(p * std::pow(10000.f, -2.f * i / D));
    }
  c->in[7] = cs;
  c->in[8] = sn;
  c->attrs.push_back(attr_int("do_rotary", 1));
  c->attrs.push_back(attr_int("rotary_interleaved", interleaved ? 1 : 0));
  (void)rng;
}

// KV cache kinds of a GQA case.
enum class Cache { kNone, kGrowing, kFixed, kFixedShared };

// A random GroupQueryAttention case: S new rows per batch row over pasts of `past` (ragged: row b has
// past - b % 2), in a cache of the given kind.
Case gqa_case(std::mt19937& rng, int64_t B, int64_t kvH, int64_t G, int64_t D, int64_t S, int64_t past, Cache cache,
              bool packed, bool rotary, bool window, bool softcap, bool bias) {
  Case c;
  const int64_t H = kvH * G;
  if (cache == Cache::kNone) past = 0;
  const int64_t cap = cache == Cache::kNone ? 0 : cache == Cache::kGrowing ? past : past + S + 3;
  std::vector<int32_t> seqlens(static_cast<size_t>(B));
  int32_t total = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t pb = cache == Cache::kGrowing || cache == Cache::kNone ? past - (past > 0 ? b % 2 : 0) : past - b % 2;
    seqlens[static_cast<size_t>(b)] = static_cast<int32_t>(std::max<int64_t>(0, pb) + S - 1);
    total = std::max<int32_t>(total, static_cast<int32_t>(std::max<int64_t>(0, pb) + S));
  }
  c.in.resize(11);
  if (packed) {
    c.in[0] = normal_tensor(rng, {B, S, (H + 2 * kvH) * D});
  } else {
    c.in[0] = normal_tensor(rng, {B, S, H * D});
    c.in[1] = normal_tensor(rng, {B, S, kvH * D});
    c.in[2] = normal_tensor(rng, {B, S, kvH * D});
  }
  if (cache != Cache::kNone) {
    c.in[3] = normal_tensor(rng, {B, kvH, cap, D});
    c.in[4] = normal_tensor(rng, {B, kvH, cap, D});
  }
  c.in[5] = i32_tensor({B}, seqlens);
  c.in[6] = i32_tensor({}, {total});
  c.attrs = {attr_int("num_heads", H), attr_int("kv_num_heads", kvH)};
  if (rotary) add_rotary(rng, D, (D / 8) % 2 == 1, &c);
  if (window) c.attrs.push_back(attr_int("local_window_size", 5));
  if (softcap) c.attrs.push_back(attr_float("softcap", 3.f));
  if (bias) c.in[10] = normal_tensor(rng, {B, 1, S, total + (cache == Cache::kFixed ? 2 : 0)});
  c.share_kv = cache == Cache::kFixedShared;
  c.what = "B " + std::to_string(B) + " kvH " + std::to_string(kvH) + " G " + std::to_string(G) + " D " +
           std::to_string(D) + " S " + std::to_string(S) + " past " + std::to_string(past) + " cache " +
           std::to_string(static_cast<int>(cache)) + (packed ? " packed" : "") + (rotary ? " rotary" : "") +
           (window ? " window" : "") + (softcap ? " softcap" : "") + (bias ? " bias" : "");
  return c;
}

}  // namespace

// Decode (one new row) and prefill / chunked prefill (several rows, some past the 64-row query block)
// at head sizes the AVX-512 decode kernels take (64, 96, 128) and others, packed QKV, rotary, windows,
// softcap, bias, pasts that grow with the shapes, fixed-capacity caches read through seqlens_k, shared
// past/present buffers.
TEST(AttentionVariants, GqaVariantMatchesPerCallPlanBitForBit) {
  std::mt19937 rng(77);
  const int64_t heads[] = {64, 96, 128, 32, 40, 8};
  const Cache caches[] = {Cache::kGrowing, Cache::kFixed, Cache::kFixedShared, Cache::kNone};
  for (int it = 0; it < 48; ++it) {
    const int64_t D = heads[it % 6];
    const int64_t kvH = 1 + it % 2, G = 1 + (it * 5) % 7, B = 1 + (it / 3) % 2;
    const bool decode = it % 3 != 2;
    const int64_t S = decode ? 1 : (it % 4 == 0 ? 70 : 2 + it % 5);
    const int64_t past = (it * 11) % 40;
    const Cache cache = caches[(it / 2) % 4];
    const Case c = gqa_case(rng, B, kvH, G, D, S, past, cache, it % 5 == 0, it % 4 != 3, it % 7 == 2, it % 6 == 1,
                            it % 8 == 5);
    expect_variant_matches(c);
    if (decode && ep::cpu_isa_tier() >= ep::IsaTier::kAvx512) expect_variant_matches(c, {{"isa", "avx2"}});
  }
}

// The reference path (reference=1) and the float16 path go through the same plan.
TEST(AttentionVariants, GqaReferenceAndFloat16PathsMatchPerCallPlan) {
  std::mt19937 rng(78);
  for (int it = 0; it < 6; ++it) {
    Case c = gqa_case(rng, 2, 2, 3, 32, it % 2 == 0 ? 1 : 4, 6, it < 3 ? Cache::kGrowing : Cache::kFixed, it == 1,
                      true, false, false, it == 4);
    expect_variant_matches(c, {{"reference", "1"}});
    for (Value& v : c.in) {
      if (v.is_tensor() && v.tensor().dtype() == DataType::kFloat) v = Value(float_tensor_as(v.tensor(), DataType::kFloat16));
    }
    c.what += " float16";
    expect_variant_matches(c);
  }
}

// A float16 KV cache beside a float32 query (SessionOptions::kv_cache_dtype): the cache holds each row
// rounded to float16 once, and attention reads it widened. Against the float32 kernel fed the same
// rounded past: present is bit-identical to that run's present rounded to float16 (the new rows are the
// same floats, rounded when appended), and the output differs only by the new rows' rounding; against
// the reference path (reference=1) over the float16 cache, the same values within float32 reordering.
// Decode on the AVX2 loops (head sizes % 8 == 0) and on the plain ones (12), prefill and chunks on the
// multi-row path, growing, fixed and shared caches; a variant matches a call without one, bit for bit.
TEST(AttentionVariants, GqaFloat16CacheReadsTheRoundedRows) {
  std::mt19937 rng(81);
  const int64_t heads[] = {64, 32, 40, 12, 128, 8};
  const Cache caches[] = {Cache::kGrowing, Cache::kFixed, Cache::kFixedShared};
  auto as_float32 = [](const Tensor& t) {  // float_tensor_as converts from float32 only
    Tensor f(DataType::kFloat, t.shape());
    EXPECT_TRUE(ir::load_floats(t.dtype(), t.raw_data(), t.numel(), f.data<float>()).ok());
    return f;
  };
  auto max_rel_diff = [&](const Tensor& a, const Tensor& b) {
    const Tensor fa = as_float32(a), fb = as_float32(b);
    double worst = 0;
    for (int64_t i = 0; i < fa.numel(); ++i) {
      const double x = fa.data<float>()[i], y = fb.data<float>()[i];
      worst = std::max(worst, std::abs(x - y) / (1.0 + std::abs(y)));
    }
    return worst;
  };
  for (int it = 0; it < 24; ++it) {
    const int64_t D = heads[it % 6];
    const int64_t kvH = 1 + it % 2, G = 1 + (it * 5) % 7, B = 1 + (it / 3) % 2;
    const bool decode = it % 3 != 2;
    const int64_t S = decode ? 1 : (it % 4 == 0 ? 70 : 2 + it % 5);
    const int64_t past = 1 + (it * 11) % 40;
    Case c32 = gqa_case(rng, B, kvH, G, D, S, past, caches[it % 3], it % 5 == 0, it % 4 != 3, it % 7 == 2,
                        it % 6 == 1, it % 8 == 5);
    // The past as float16, and as float32 holding the same (rounded) values.
    Case c16 = c32;
    for (int k : {3, 4}) {
      c16.in[k] = Value(float_tensor_as(c32.in[k].tensor(), DataType::kFloat16));
      c32.in[k] = Value(as_float32(c16.in[k].tensor()));
    }
    c16.what += " float16 cache";
    SCOPED_TRACE(c16.what);
    expect_variant_matches(c16);
    const VariantOutcome f16 = run_case(c16, 1, 1);
    const VariantOutcome f32 = run_case(c32, 1, 1);
    const VariantOutcome ref = run_case(c16, 1, 1, {{"reference", "1"}});
    ASSERT_EQ(f16.outs.size(), 3u);
    ASSERT_EQ(f32.outs.size(), 3u);
    ASSERT_EQ(ref.outs.size(), 3u);
    EXPECT_EQ(f16.outs[0].dtype(), DataType::kFloat);
    for (int k : {1, 2}) {
      ASSERT_EQ(f16.outs[k].dtype(), DataType::kFloat16);
      const Tensor want = float_tensor_as(f32.outs[k], DataType::kFloat16);
      ASSERT_EQ(want.shape(), f16.outs[k].shape());
      EXPECT_EQ(std::memcmp(want.raw_data(), f16.outs[k].raw_data(), static_cast<size_t>(want.numel()) * 2), 0)
          << "present " << k;
      EXPECT_EQ(std::memcmp(ref.outs[k].raw_data(), f16.outs[k].raw_data(), static_cast<size_t>(want.numel()) * 2), 0)
          << "reference present " << k;
    }
    EXPECT_LT(max_rel_diff(f16.outs[0], ref.outs[0]), 2e-5) << "against the reference path";
    // The new rows' rounding (relative 2^-11) moves the output by about that much.
    EXPECT_LT(max_rel_diff(f16.outs[0], f32.outs[0]), 5e-3) << "against the float32 cache";
  }
}

// The decode loops read a float16 cache with the float32 loops' arithmetic (their loads widen each
// element, which is exact): where every value the cache holds, the new rows included, is a float16
// value, the output is bit-identical to the float32 cache's, at each tier this CPU has (AVX-512 for
// head sizes 64/96/128, AVX2 forced with isa=avx2, and AVX2 for 40 at either).
TEST(AttentionVariants, GqaFloat16CacheDecodeHasTheFloat32LoopsBits) {
  std::mt19937 rng(83);
  auto rounded = [](const Tensor& t) {  // the float32 tensor holding t's values rounded to float16
    const Tensor h = float_tensor_as(t, DataType::kFloat16);
    Tensor f(DataType::kFloat, t.shape());
    EXPECT_TRUE(ir::load_floats(h.dtype(), h.raw_data(), h.numel(), f.data<float>()).ok());
    return f;
  };
  std::vector<std::string> tiers = {ep::isa_tier_name(ep::cpu_isa_tier())};
  if (ep::cpu_isa_tier() >= ep::IsaTier::kAvx512) tiers.push_back("avx2");
  else std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
  int cases = 0;
  for (int it = 0; it < 16; ++it) {
    const int64_t D = it % 4 == 0 ? 64 : it % 4 == 1 ? 128 : it % 4 == 2 ? 96 : 40;
    const int64_t kvH = 1 + it % 2, G = 1 + (it * 3) % 7, B = 1 + (it / 4) % 2;
    // Some caches longer than one chunk of the AVX-512 loop (512 keys at head size 64, 256 at 128).
    const int64_t past = it % 3 == 0 ? 600 + it * 37 : 3 + (it * 13) % 61;
    Case c32 = gqa_case(rng, B, kvH, G, D, 1, past, it % 2 ? Cache::kFixed : Cache::kFixedShared, false, false,
                        it % 5 == 1, it % 6 == 2, it % 7 == 3);
    for (int k : {1, 2, 3, 4}) c32.in[k] = Value(rounded(c32.in[k].tensor()));
    Case c16 = c32;
    for (int k : {3, 4}) c16.in[k] = Value(float_tensor_as(c32.in[k].tensor(), DataType::kFloat16));
    for (const std::string& tier : tiers) {
      SCOPED_TRACE(c32.what + " isa " + tier);
      const VariantOutcome f16 = run_case(c16, 2, 2, {{"isa", tier}});
      const VariantOutcome f32 = run_case(c32, 2, 2, {{"isa", tier}});
      ASSERT_EQ(f16.outs.size(), 3u);
      ASSERT_EQ(f32.outs.size(), 3u);
      const Tensor& y16 = f16.outs[0];
      const Tensor& y32 = f32.outs[0];
      ASSERT_EQ(y16.shape(), y32.shape());
      EXPECT_EQ(std::memcmp(y16.raw_data(), y32.raw_data(), static_cast<size_t>(y32.numel()) * 4), 0);
      ++cases;
    }
  }
  EXPECT_GE(cases, 16);
}

// One variant of a fixed-capacity cache serves every length seqlens_k gives it: decode and 3-row chunks
// at each past from 0 to the capacity, the same results as a call without a variant, and (the variant's
// workspace reserved, outputs bound) no heap allocation and no ctx.workspace on the step.
TEST(AttentionVariants, GqaFixedCapacityVariantServesEveryLengthWithoutAllocating) {
  std::mt19937 rng(79);
  for (const int64_t S : {1, 3}) {
    for (const int64_t D : {64, 128, 40}) {
      SCOPED_TRACE("S " + std::to_string(S) + " D " + std::to_string(D));
      const int64_t B = 2, kvH = 2, G = 4, H = kvH * G, cap = 24;
      std::vector<Value> in(9);
      in[0] = normal_tensor(rng, {B, S, H * D});
      in[1] = normal_tensor(rng, {B, S, kvH * D});
      in[2] = normal_tensor(rng, {B, S, kvH * D});
      Tensor pk = normal_tensor(rng, {B, kvH, cap, D}), pv = normal_tensor(rng, {B, kvH, cap, D});
      Tensor seqlens = i32_tensor({B}, {0, 0}), total = i32_tensor({}, {0});
      in[3] = pk;
      in[4] = pv;
      in[5] = seqlens;
      in[6] = total;
      Case rot;
      rot.in.resize(11);
      add_rotary(rng, D, false, &rot);
      in[7] = rot.in[7];
      in[8] = rot.in[8];
      std::vector<ir::Attribute> attrs = {attr_int("num_heads", H), attr_int("kv_num_heads", kvH), attr_int("do_rotary", 1)};
      auto n = make_node("com.microsoft", "GroupQueryAttention", 1, attrs, in, 3);
      ASSERT_NE(n->kernel, nullptr);
      auto v = specialize(*n, in, 2);
      ASSERT_TRUE(v.ok()) << v.status().to_string();
      ASSERT_NE(*v, nullptr);
      ep::ThreadPool pool(2);
      Tensor y(DataType::kFloat, {B, S, H * D});
      VariantContext ctx(*n->info, in, pool, v->get());
      ctx.bind_output(0, Value(y));
      ctx.bind_output(1, Value(pk));
      ctx.bind_output(2, Value(pv));
      uint64_t allocs = 0;
      for (int64_t past = 0; past + S <= cap; ++past) {
        // Row 1 one shorter (ragged); the first step is a prompt (past 0 everywhere).
        const int64_t p1 = std::max<int64_t>(0, past - 1);
        seqlens.data<int32_t>()[0] = static_cast<int32_t>(past + S - 1);
        seqlens.data<int32_t>()[1] = static_cast<int32_t>(past == 0 ? S - 1 : p1 + S - 1);
        total.data<int32_t>()[0] = static_cast<int32_t>(past + S);
        // The same step without a variant, on copies of the cache as it is now.
        std::vector<Value> ref_in = in;
        ref_in[3] = Value(pk.clone());
        ref_in[4] = Value(pv.clone());
        ref_in[5] = Value(seqlens.clone());
        ref_in[6] = Value(total.clone());
        ep::ThreadPool ref_pool(1);
        VariantContext ref_ctx(*n->info, ref_in, ref_pool, nullptr);
        ref_ctx.bind_output(1, ref_in[3]);
        ref_ctx.bind_output(2, ref_in[4]);
        ASSERT_TRUE(n->kernel->compute(ref_ctx).ok());
        AllocCounter::arm();
        const Status s = n->kernel->compute(ctx);
        AllocCounter::disarm();
        if (past > 0) allocs += AllocCounter::count();  // the first call sizes the context's output list
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_EQ(ctx.outputs()[0].tensor().raw_data(), y.raw_data());
        const Tensor& want = ref_ctx.outputs()[0].tensor();
        EXPECT_EQ(std::memcmp(want.raw_data(), y.raw_data(), y.nbytes()), 0) << "past " << past;
        EXPECT_EQ(std::memcmp(ref_in[3].tensor().raw_data(), pk.raw_data(), pk.nbytes()), 0) << "past " << past;
        EXPECT_EQ(std::memcmp(ref_in[4].tensor().raw_data(), pv.raw_data(), pv.nbytes()), 0) << "past " << past;
      }
      EXPECT_EQ(ctx.workspace_calls, 0);
      EXPECT_EQ(allocs, 0u) << "heap allocations over the steps (NXRT_ALLOC_TRACE=1 prints where)";
    }
  }
}

// total_sequence_length beyond the cache (present longer than past + S): the plan's buffers are sized
// by the shapes' bound (cap + S), which the valid lengths never exceed.
TEST(AttentionVariants, GqaPresentLongerThanCacheUsesTheShapeBound) {
  std::mt19937 rng(80);
  for (const int64_t S : {1, 2}) {
    Case c = gqa_case(rng, 1, 1, 2, 64, S, 5, Cache::kGrowing, false, true, false, false, false);
    c.in[6] = i32_tensor({}, {40});  // present of 40 rows; past 5 + S new rows are valid
    c.in[5] = i32_tensor({1}, {static_cast<int32_t>(5 + S - 1)});
    c.what += " total 40";
    expect_variant_matches(c);
    const VariantOutcome o = run_case(c, 1, 1);
    ASSERT_EQ(o.outs.size(), 3u);
    EXPECT_EQ(o.outs[1].shape(), (Dims{1, 1, 40, 64}));
  }
}

// Shape errors come from the plan, through specialize or a call without a variant alike.
TEST(AttentionVariants, GqaShapeErrorsComeFromThePlan) {
  std::mt19937 rng(81);
  Case c = gqa_case(rng, 1, 1, 2, 16, 1, 3, Cache::kGrowing, false, false, false, false, false);
  c.in[4] = normal_tensor(rng, {1, 1, 2, 16});  // past_value shorter than past_key
  auto n = make_node(c.domain, c.op, c.opset, c.attrs, c.in, 3);
  auto v = specialize(*n, c.in, 1);
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("past_key/past_value"), std::string::npos) << v.status().message();
  ep::ThreadPool pool(1);
  VariantContext ctx(*n->info, c.in, pool, nullptr);
  const Status s = n->kernel->compute(ctx);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("past_key/past_value"), std::string::npos) << s.message();
}

namespace {

// A random ai.onnx Attention case (opset 24): 3-D or 4-D, grouped heads, a past, masks of every rank
// (bool or additive), causal, nonpad_kv_seqlen, softcap, the qk output in each mode.
Case onnx_attention_case(std::mt19937& rng, int it, DataType dt) {
  Case c;
  c.domain = "";
  c.op = "Attention";
  c.opset = 24;
  c.outs = 4;
  const bool is3d = it % 2 == 0;
  const int64_t B = 1 + it % 2, Hkv = 1 + (it / 2) % 2, Hq = Hkv * (1 + it % 3), D = 8 * (1 + it % 3), Dv = it % 4 == 1 ? D + 8 : D;
  const int64_t Sq = it % 3 == 0 ? 1 : 3 + it % 4, Skv = it % 5 == 0 ? Sq + 2 : Sq, P = it % 3 == 1 ? 0 : 2 + it % 6;
  const int64_t T = P + Skv;
  c.in.resize(7);
  if (is3d) {
    c.in[0] = float_tensor_as(normal_tensor(rng, {B, Sq, Hq * D}), dt);
    c.in[1] = float_tensor_as(normal_tensor(rng, {B, Skv, Hkv * D}), dt);
    c.in[2] = float_tensor_as(normal_tensor(rng, {B, Skv, Hkv * Dv}), dt);
    c.attrs = {attr_int("q_num_heads", Hq), attr_int("kv_num_heads", Hkv)};
  } else {
    c.in[0] = float_tensor_as(normal_tensor(rng, {B, Hq, Sq, D}), dt);
    c.in[1] = float_tensor_as(normal_tensor(rng, {B, Hkv, Skv, D}), dt);
    c.in[2] = float_tensor_as(normal_tensor(rng, {B, Hkv, Skv, Dv}), dt);
  }
  if (P > 0) {
    c.in[4] = float_tensor_as(normal_tensor(rng, {B, Hkv, P, D}), dt);
    c.in[5] = float_tensor_as(normal_tensor(rng, {B, Hkv, P, Dv}), dt);
  }
  switch (it % 4) {
    case 1: c.in[3] = float_tensor_as(normal_tensor(rng, {Sq, T}), dt); break;
    case 2: {
      Tensor m(DataType::kBool, {B, 1, Sq, T});
      for (int64_t i = 0; i < m.numel(); ++i) m.data<bool>()[i] = (i * 7 + it) % 5 != 0;
      c.in[3] = m;
      break;
    }
    case 3: c.in[3] = float_tensor_as(normal_tensor(rng, {B, Hq, Sq, T - 1}), dt); break;
    default: break;
  }
  if (it % 5 == 3) {
    std::vector<int64_t> np(static_cast<size_t>(B));
    for (int64_t b = 0; b < B; ++b) np[static_cast<size_t>(b)] = T - b;
    c.in[6] = Tensor::from_vector(DataType::kInt64, {B}, np);
  }
  if (it % 3 == 2) c.attrs.push_back(attr_int("is_causal", 1));
  if (it % 7 == 4) c.attrs.push_back(attr_float("softcap", 2.f));
  if (it % 2 == 1) c.attrs.push_back(attr_int("qk_matmul_output_mode", it % 8 / 2));
  else c.outs = 3;
  c.what = "it " + std::to_string(it) + " " + dtype_name(dt) + (is3d ? " 3-D" : " 4-D") + " B " + std::to_string(B) +
           " Hq " + std::to_string(Hq) + " Hkv " + std::to_string(Hkv) + " Sq " + std::to_string(Sq) + " T " + std::to_string(T);
  return c;
}

}  // namespace

TEST(AttentionVariants, OnnxAttentionVariantMatchesPerCallPlanBitForBit) {
  std::mt19937 rng(90);
  for (int it = 0; it < 32; ++it) expect_variant_matches(onnx_attention_case(rng, it, DataType::kFloat));
  for (int it = 0; it < 8; ++it) {
    expect_variant_matches(onnx_attention_case(rng, it, DataType::kFloat16));
    expect_variant_matches(onnx_attention_case(rng, it, DataType::kDouble));
  }
  for (int it = 0; it < 8; ++it) expect_variant_matches(onnx_attention_case(rng, it, DataType::kFloat), {{"reference", "1"}});
}

// The ai.onnx Attention decode step of a static cache (TensorScatter's output, a [B, 1, 1, cap] bool
// mask): its variant's workspace holds every buffer the step needs, so the step asks ctx.workspace for
// nothing and allocates nothing once its outputs are bound.
TEST(AttentionVariants, OnnxAttentionDecodeStepWithVariantAllocatesNothing) {
  std::mt19937 rng(91);
  const int64_t B = 2, Hq = 4, Hkv = 2, D = 64, cap = 40;
  std::vector<Value> in(7);
  in[0] = normal_tensor(rng, {B, Hq, 1, D});
  in[1] = normal_tensor(rng, {B, Hkv, cap, D});
  in[2] = normal_tensor(rng, {B, Hkv, cap, D});
  Tensor mask(DataType::kBool, {B, 1, 1, cap});
  for (int64_t i = 0; i < mask.numel(); ++i) mask.data<bool>()[i] = i % cap < 17;
  in[3] = mask;
  auto n = make_node("", "Attention", 24, {}, in, 1);
  ASSERT_NE(n->kernel, nullptr);
  auto v = specialize(*n, in, 2);
  ASSERT_TRUE(v.ok()) << v.status().to_string();
  ep::ThreadPool pool(2);
  Tensor y(DataType::kFloat, {B, Hq, 1, D});
  VariantContext ctx(*n->info, in, pool, v->get());
  ctx.bind_output(0, Value(y));
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

namespace {

// For timing: what the executor gives a kernel in a steady decode loop. The variant's workspace is
// reserved once; any other workspace request is served from one arena rewound every call (the buffer
// pool's steady state: no allocation); outputs bound to fixed buffers.
class SteadyContext final : public ep::StandaloneContext {
 public:
  SteadyContext(const ep::KernelInfo& info, std::vector<Value> inputs, ep::ThreadPool& pool, const ep::KernelVariant* v)
      : ep::StandaloneContext(info, std::move(inputs), pool), variant_(v), arena_(Storage::allocate(size_t(64) << 20)) {
    if (v && v->workspace_bytes() > 0) ws_ = Storage::allocate(v->workspace_bytes());
  }
  const ep::KernelVariant* variant() const override { return variant_; }
  void* variant_workspace() const override { return ws_ ? ws_->data() : nullptr; }
  Result<void*> workspace(size_t bytes) override {
    const size_t at = used_;
    used_ += (bytes + 63) / 64 * 64;
    if (used_ > arena_->bytes()) return runtime_error("bench arena too small");
    return static_cast<void*>(static_cast<char*>(arena_->data()) + at);
  }
  void rewind() { used_ = 0; }

 private:
  const ep::KernelVariant* variant_;
  std::shared_ptr<Storage> ws_;
  std::shared_ptr<Storage> arena_;
  size_t used_ = 0;
};

}  // namespace

// The GroupQueryAttention decode step as the executor runs it (fixed-capacity shared cache, the kernel
// cache's variant when the kernel makes one), CPU time per step, median of 7 rounds. Run with
// --gtest_also_run_disabled_tests; NXRT_BENCH_THREADS sets the pool (default 1).
TEST(AttentionVariants, DISABLED_GqaDecodeStepBench) {
  std::mt19937 rng(1);
  const char* th = std::getenv("NXRT_BENCH_THREADS");
  const int threads = th ? std::atoi(th) : 1;
  struct Shape { const char* name; int64_t H, kvH, D; };
  // mqa-8x128: one KV head (multi-query), whose long rows the step splits into segments.
  for (const Shape sh : {Shape{"qwen2.5-0.5b", 14, 2, 64}, Shape{"llama-3-8b", 32, 8, 128}, Shape{"mqa-8x128", 8, 1, 128}}) {
    const int64_t cap = 2048;
    for (const int64_t past : {128, 1024, 2000}) {
      std::vector<Value> in(7);
      in[0] = normal_tensor(rng, {1, 1, sh.H * sh.D});
      in[1] = normal_tensor(rng, {1, 1, sh.kvH * sh.D});
      in[2] = normal_tensor(rng, {1, 1, sh.kvH * sh.D});
      Tensor pk = normal_tensor(rng, {1, sh.kvH, cap, sh.D}), pv = normal_tensor(rng, {1, sh.kvH, cap, sh.D});
      in[3] = pk;
      in[4] = pv;
      in[5] = i32_tensor({1}, {static_cast<int32_t>(past)});
      in[6] = i32_tensor({}, {static_cast<int32_t>(past + 1)});
      auto n = make_node("com.microsoft", "GroupQueryAttention", 1,
                         {attr_int("num_heads", sh.H), attr_int("kv_num_heads", sh.kvH)}, in, 3);
      ASSERT_NE(n->kernel, nullptr);
      auto v = specialize(*n, in, threads);
      ASSERT_TRUE(v.ok());
      ep::ThreadPool pool(threads, ep::ThreadPool::Sizing::kExact);
      SteadyContext ctx(*n->info, in, pool, v->get());
      Tensor y(DataType::kFloat, {1, 1, sh.H * sh.D});
      ctx.bind_output(0, Value(y));
      ctx.bind_output(1, Value(pk));
      ctx.bind_output(2, Value(pv));
      const int reps = 400;
      std::vector<double> rounds;
      for (int round = 0; round < 7; ++round) {
        timespec c0, c1;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
        for (int r = 0; r < reps; ++r) {
          ctx.rewind();
          ASSERT_TRUE(n->kernel->compute(ctx).ok());
        }
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
        rounds.push_back(((c1.tv_sec - c0.tv_sec) + 1e-9 * (c1.tv_nsec - c0.tv_nsec)) / reps);
      }
      std::sort(rounds.begin(), rounds.end());
      std::printf("GQA decode %-13s past %5ld threads %d variant %s: %.2f us/step cpu (median of 7)\n", sh.name,
                  static_cast<long>(past), threads, *v ? "yes" : "no ", rounds[3] * 1e6);
    }
  }
}

// The GroupQueryAttention decode step with its cache rows in memory, as in a decoder's step (the hot
// bench above reads one cache from L2 over and over): `layers` caches of the Qwen2.5-0.5B shape used in
// turn, and before each call a 16 MB read of another buffer through the pool (what the step's weight
// stream does to the caches), not timed. Wall time per call, median of 7 rounds of max(20, 480 / layers)
// passes over the layers. Run with --gtest_also_run_disabled_tests; NXRT_BENCH_THREADS sets the pool
// (default 1), NXRT_BENCH_PAST the cached tokens (default 528, a 512-token prompt's step),
// NXRT_BENCH_LAYERS the caches (default 24), NXRT_BENCH_HOT=1 drops the 16 MB reads (the caches then stay
// in L2 or L3). At 2 threads the bench agrees with a decoder's step: 17-25 us a call against ~20 us of
// the traced GroupQueryAttention (Zen 5); before the reads went through the pool its worker slept
// between calls and the 2-thread figure (65 us) was mostly the wake-up.
TEST(AttentionVariants, DISABLED_GqaDecodeColdBench) {
  std::mt19937 rng(1);
  const char* th = std::getenv("NXRT_BENCH_THREADS");
  const int threads = th ? std::atoi(th) : 1;
  const char* pe = std::getenv("NXRT_BENCH_PAST");
  const int64_t past = pe ? std::atoll(pe) : 528;
  const char* le = std::getenv("NXRT_BENCH_LAYERS");
  const int64_t layers = le ? std::max<int64_t>(1, std::atoll(le)) : 24;
  const int64_t H = 14, kvH = 2, D = 64, cap = past + 64;
  std::vector<Value> in(7);
  in[0] = normal_tensor(rng, {1, 1, H * D});
  in[1] = normal_tensor(rng, {1, 1, kvH * D});
  in[2] = normal_tensor(rng, {1, 1, kvH * D});
  std::vector<Tensor> pk, pv;
  for (int64_t l = 0; l < layers; ++l) {
    pk.push_back(normal_tensor(rng, {1, kvH, cap, D}));
    pv.push_back(normal_tensor(rng, {1, kvH, cap, D}));
  }
  in[3] = pk[0];
  in[4] = pv[0];
  in[5] = i32_tensor({1}, {static_cast<int32_t>(past)});
  in[6] = i32_tensor({}, {static_cast<int32_t>(past + 1)});
  auto n = make_node("com.microsoft", "GroupQueryAttention", 1, {attr_int("num_heads", H), attr_int("kv_num_heads", kvH)},
                     in, 3);
  ASSERT_NE(n->kernel, nullptr);
  auto v = specialize(*n, in, threads);
  ASSERT_TRUE(v.ok());
  ep::ThreadPool pool(threads, ep::ThreadPool::Sizing::kExact);
  std::vector<std::unique_ptr<SteadyContext>> ctxs;
  Tensor y(DataType::kFloat, {1, 1, H * D});
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<Value> li = in;
    li[3] = pk[l];
    li[4] = pv[l];
    ctxs.push_back(std::make_unique<SteadyContext>(*n->info, li, pool, v->get()));
    ctxs.back()->bind_output(0, Value(y));
    ctxs.back()->bind_output(1, Value(pk[l]));
    ctxs.back()->bind_output(2, Value(pv[l]));
  }
  std::vector<float> evict(std::getenv("NXRT_BENCH_HOT") ? 0 : size_t(4) << 20, 1.f);
  float sink = 0.f;
  const int steps = static_cast<int>(std::max<int64_t>(20, 480 / layers));
  std::vector<double> rounds;
  for (int round = 0; round < 7; ++round) {
    double total = 0;
    for (int step = 0; step < steps; ++step)
      for (int64_t l = 0; l < layers; ++l) {
        // The other caches' reads through the pool: every thread's caches get the stream, as in a
        // model's step, and a worker between calls stays awake (a sleeping one costs the timed call
        // its wake-up).
        std::vector<float> part(static_cast<size_t>(pool.num_threads()) * 16, 0.f);
        pool.parallel_for(static_cast<int64_t>(evict.size() / 16), 4096, [&](int64_t b, int64_t e) {
          float s = 0.f;
          for (int64_t i = b; i < e; ++i) s += evict[static_cast<size_t>(i) * 16];
          part[static_cast<size_t>(pool.slot()) * 16] += s;
        });
        for (float s : part) sink += s;
        const auto t0 = std::chrono::steady_clock::now();
        ctxs[l]->rewind();
        ASSERT_TRUE(n->kernel->compute(*ctxs[l]).ok());
        total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      }
    rounds.push_back(total / (steps * layers));
  }
  std::sort(rounds.begin(), rounds.end());
  const double bytes = 2.0 * kvH * (past + 1) * D * 4;
  std::printf("GQA decode qwen2.5-0.5b past %ld threads %d layers %ld%s: %.2f us/call (%.1f GB/s of cache rows; 24 "
              "layers %.3f ms) (checksum %g)\n",
              static_cast<long>(past), threads, static_cast<long>(layers), evict.empty() ? " hot" : "", rounds[3] * 1e6,
              bytes / rounds[3] * 1e-9, rounds[3] * 1e3 * 24, static_cast<double>(sink));
}
