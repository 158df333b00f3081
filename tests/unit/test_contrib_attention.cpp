// com.microsoft GroupQueryAttention / MultiHeadAttention / Attention: the fast paths against the
// reference path (kernel override reference=1) on random configurations, GQA with present sharing the past buffer
// (in-place append), ragged batches, packed QKV equivalence, a hand-checked decode step.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <ctime>
#include <random>

#include "ops/cpu_provider.h"
#include "ep/cpu_features.h"
#include "ep/kernel.h"
#include "ep/standalone_context.h"
#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "variant_test_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_int;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Tensor rnd(std::mt19937& rng, Dims shape, float scale = 1.f) {
  Tensor t(DataType::kFloat, shape);
  std::normal_distribution<float> d(0.f, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}
Tensor i32(Dims shape, std::vector<int32_t> v) { return Tensor::from_vector(DataType::kInt32, shape, v); }

// A GroupQueryAttention decode step's seven inputs (query, key, value, past key/value of cap rows,
// seqlens_k, total_sequence_length) with random rows, batch b's past length pasts[b]; total: the
// longest row's length.
struct GqaDecodeInputs {
  std::vector<Value> in;
  int32_t total = 0;
};
GqaDecodeInputs gqa_decode_inputs(std::mt19937& rng, int64_t H, int64_t kvH, int64_t D, int64_t cap,
                                  const std::vector<int64_t>& pasts) {
  const int64_t B = static_cast<int64_t>(pasts.size());
  GqaDecodeInputs r;
  std::vector<int32_t> seqlens;
  for (int64_t past : pasts) {
    seqlens.push_back(static_cast<int32_t>(past));
    r.total = std::max<int32_t>(r.total, static_cast<int32_t>(past + 1));
  }
  r.in.resize(7);
  r.in[0] = rnd(rng, {B, 1, H * D});
  r.in[1] = rnd(rng, {B, 1, kvH * D});
  r.in[2] = rnd(rng, {B, 1, kvH * D});
  r.in[3] = rnd(rng, {B, kvH, cap, D});
  r.in[4] = rnd(rng, {B, kvH, cap, D});
  r.in[5] = i32({B}, seqlens);
  r.in[6] = i32({}, {r.total});
  return r;
}

void expect_near(const Tensor& a, const Tensor& b, float tol, const std::string& what) {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  for (int64_t i = 0; i < a.numel(); ++i)
    ASSERT_NEAR(a.data<float>()[i], b.data<float>()[i], tol) << what << " at " << i;
}

Result<std::vector<Value>> run_ms(const std::string& op, std::vector<ir::Attribute> attrs, std::vector<Value> inputs,
                                  size_t outs, bool reference, const char* isa = nullptr, int threads = 2,
                                  bool specialize = false) {
  KernelRun run;
  run.op_type = op;
  run.domain = "com.microsoft";
  run.opset = 1;
  run.attributes = std::move(attrs);
  if (reference) run.overrides = {{"reference", "1"}};
  if (isa) run.overrides["isa"] = isa;
  run.inputs = std::move(inputs);
  run.num_outputs = outs;
  run.threads = threads;
  run.specialize = specialize;
  return run_kernel(run);
}

// Present outputs (1, 2) written into the past inputs' buffers (3, 4): the shared KV buffer.
void share_kv_buffers(ep::StandaloneContext& ctx, const std::vector<Value>& in) {
  ctx.bind_output(1, in[3]);
  ctx.bind_output(2, in[4]);
}

}  // namespace

TEST(ContribAttention, GqaFastMatchesReferenceRandom) {
  std::mt19937 rng(5);
  for (int it = 0; it < 24; ++it) {
    const int64_t kvH = 1 + it % 2, H = kvH * (1 + it % 3), D = 8 * (1 + it % 2);
    const int64_t B = 1 + (it / 3) % 2;
    const bool decode = it % 2 == 1;
    // Some prompts longer than the fast path's 64-row query blocks.
    const int64_t S = decode ? 1 : (it % 8 == 0 ? 70 + it * 3 : 2 + it % 5);
    const int64_t cap = decode ? 4 + it % 4 : (it % 4 == 0 ? 3 : 0);  // chunked prefill when cap > 0
    const bool packed = it % 5 == 0, rotary = it % 3 != 2, window = it % 4 == 1;
    std::vector<int32_t> seqlens(static_cast<size_t>(B));
    int32_t total = 0;
    for (int64_t b = 0; b < B; ++b) {
      // Ragged pasts for decode: batch b has past cap - b.
      const int64_t past = cap > 0 ? cap - (decode ? b % 2 : 0) : 0;
      seqlens[static_cast<size_t>(b)] = static_cast<int32_t>(past + S - 1);
      total = std::max<int32_t>(total, static_cast<int32_t>(past + S));
    }
    std::vector<Value> in(9);
    if (packed) {
      in[0] = rnd(rng, {B, S, (H + 2 * kvH) * D});
    } else {
      in[0] = rnd(rng, {B, S, H * D});
      in[1] = rnd(rng, {B, S, kvH * D});
      in[2] = rnd(rng, {B, S, kvH * D});
    }
    if (cap > 0) {
      in[3] = rnd(rng, {B, kvH, cap, D});
      in[4] = rnd(rng, {B, kvH, cap, D});
    }
    in[5] = i32({B}, seqlens);
    in[6] = i32({}, {total});
    std::vector<ir::Attribute> attrs = {attr_int("num_heads", H), attr_int("kv_num_heads", kvH)};
    if (rotary) {
      const int64_t maxs = 256, half = D / 2;
      Tensor c(DataType::kFloat, {maxs, half}), s(DataType::kFloat, {maxs, half});
      for (int64_t p = 0; p < maxs; ++p)
        for (int64_t i = 0; i < half; ++i) {
          c.data<float>()[p * half + i] = std::cos(p * std::pow(10000.f, -2.f * i / D));
          s.data<float>()[p * half + i] = std::sin(p * std::pow(10000.f, -2.f * i / D));
        }
      in[7] = c;
      in[8] = s;
      attrs.push_back(attr_int("do_rotary", 1));
      attrs.push_back(attr_int("rotary_interleaved", it % 2));
    }
    if (window) attrs.push_back(attr_int("local_window_size", 2));
    if (it % 6 == 3) attrs.push_back(attr_float("softcap", 1.5f));
    if (it % 7 == 4) {
      in.resize(11);
      in[10] = rnd(rng, {1, H, S, total});
    }
    auto fast = run_ms("GroupQueryAttention", attrs, in, 3, false);
    auto ref = run_ms("GroupQueryAttention", attrs, in, 3, true);
    ASSERT_TRUE(fast.ok()) << fast.status().to_string();
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (int o = 0; o < 3; ++o) expect_near((*fast)[o].tensor(), (*ref)[o].tensor(), 2e-5f, "it " + std::to_string(it) + " out " + std::to_string(o));
  }
}

// The single-token decode step at the head sizes the AVX-512 kernels take (64, 96, 128) and two they
// leave to AVX2 (32, and 40: a last 8-column pass): every tier this CPU has (AVX-512, and AVX2 forced with isa=avx2) against the
// reference on random groups (1-8 query heads per KV head), cache lengths around the 4-row score
// blocks, ragged batches, windows, softcap and bias.
TEST(ContribAttention, GqaDecodeEveryTierMatchesReference) {
  std::mt19937 rng(21);
  const bool avx512 = ep::cpu_isa_tier() >= ep::IsaTier::kAvx512;
  if (!avx512) std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
  int cases = 0;
  for (int it = 0; it < 40; ++it) {
    const int64_t D = it % 5 == 0 ? 64 : it % 5 == 1 ? 128 : it % 5 == 2 ? 96 : it % 5 == 3 ? 32 : 40;
    const int64_t kvH = 1 + it % 2, G = 1 + (it * 5) % 8, H = kvH * G, B = 1 + (it / 2) % 2;
    const int64_t cap = 1 + (it * 13) % 70;
    const bool window = it % 5 == 2, softcap = it % 6 == 1, bias = it % 7 == 3;
    std::vector<int64_t> pasts;
    for (int64_t b = 0; b < B; ++b) pasts.push_back(std::max<int64_t>(0, cap - 1 - b % 2));  // ragged: batch 1 one row shorter
    auto [in, total] = gqa_decode_inputs(rng, H, kvH, D, cap, pasts);
    std::vector<ir::Attribute> attrs = {attr_int("num_heads", H), attr_int("kv_num_heads", kvH)};
    if (window) attrs.push_back(attr_int("local_window_size", 3));
    if (softcap) attrs.push_back(attr_float("softcap", 2.f));
    if (bias) {
      in.resize(11);
      in[10] = rnd(rng, {B, H, 1, total});
    }
    auto ref = run_ms("GroupQueryAttention", attrs, in, 3, true);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (const char* isa : {"avx512", "avx2"}) {
      if (std::string(isa) == "avx512" && !avx512) continue;
      auto got = run_ms("GroupQueryAttention", attrs, in, 3, false, isa);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      for (int o = 0; o < 3; ++o)
        expect_near((*got)[o].tensor(), (*ref)[o].tensor(), 3e-5f,
                    std::string(isa) + " it " + std::to_string(it) + " D " + std::to_string(D) + " G " + std::to_string(G) + " out " + std::to_string(o));
      ++cases;
    }
  }
  EXPECT_GE(cases, 40);
}

// The decode step over caches longer than one chunk of the AVX-512 loop (512 keys at head size 64,
// 341 at 96, 256 at 128): the online softmax across chunks against the reference, with biases that
// mask whole chunks of one head (-inf) and that raise the maximum chunk after chunk (each raise
// rescales the sum and outputs so far), a window that starts mid-chunk, softcap, groups of 1 to 16
// heads and ragged batches. AVX2 (forced) too, whose loops take whole rows.
TEST(ContribAttention, GqaDecodeLongCacheMatchesReference) {
  std::mt19937 rng(33);
  const bool avx512 = ep::cpu_isa_tier() >= ep::IsaTier::kAvx512;
  if (!avx512) std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
  for (int it = 0; it < 8; ++it) {
    const int64_t D = it % 3 == 0 ? 64 : it % 3 == 1 ? 128 : 96;
    const int64_t kvH = 1 + it % 2, G = it % 4 == 0 ? 7 : it % 4 == 1 ? 1 : it % 4 == 2 ? 4 : 16;
    const int64_t H = kvH * G, B = 1 + (it / 4) % 2, cap = 1100 + it * 60;
    const int bias_kind = it % 3;  // 0 none, 1 head 0 masked over the first 600 keys + a ramp, 2 steep ramp
    std::vector<int64_t> pasts;
    for (int64_t b = 0; b < B; ++b) pasts.push_back(cap - 1 - 37 * b);  // ragged
    auto [in, total] = gqa_decode_inputs(rng, H, kvH, D, cap, pasts);
    std::vector<ir::Attribute> attrs = {attr_int("num_heads", H), attr_int("kv_num_heads", kvH)};
    if (it == 5) attrs.push_back(attr_int("local_window_size", 700));
    if (it == 6) attrs.push_back(attr_float("softcap", 3.f));
    if (bias_kind != 0) {
      in.resize(11);
      Tensor bias(DataType::kFloat, {B, H, 1, total});
      float* bp = bias.data<float>();
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t j = 0; j < total; ++j) {
            float v = (bias_kind == 1 ? 0.004f : 0.02f) * static_cast<float>(j);
            if (bias_kind == 1 && h == 0 && j < 600) v = -std::numeric_limits<float>::infinity();
            bp[(b * H + h) * total + j] = v;
          }
      in[10] = bias;
    }
    auto ref = run_ms("GroupQueryAttention", attrs, in, 3, true);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (const char* isa : {"avx512", "avx2"}) {
      if (std::string(isa) == "avx512" && !avx512) continue;
      auto got = run_ms("GroupQueryAttention", attrs, in, 3, false, isa);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      expect_near((*got)[0].tensor(), (*ref)[0].tensor(), 3e-5f,
                  std::string(isa) + " it " + std::to_string(it) + " D " + std::to_string(D) + " G " + std::to_string(G));
    }
  }
}

// Rows past one segment of the decode step (4 chunks: 2048 keys at head size 64, 1024 at 128) go as
// several work items whose parts merge in order: against the reference, and bit for bit the same at 1,
// 2 and 3 threads, with and without the kernel's variant (the result depends on the segment size, not
// on how many threads share the segments). Ragged batches (one row within one segment, the other
// across three), a head masked by -inf bias over its whole first segment, a window ending mid-row, a
// float16 cache. AVX2 (forced) takes the same driver.
TEST(ContribAttention, GqaDecodeSegmentsMatchReferenceAtAnyThreadCount) {
  std::mt19937 rng(57);
  const bool avx512 = ep::cpu_isa_tier() >= ep::IsaTier::kAvx512;
  if (!avx512) std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
  struct Shape { int64_t D, kvH, G, B, cap; int bias; int64_t window; bool f16; };
  for (const Shape sh : {Shape{64, 2, 7, 2, 4700, 1, 0, false}, Shape{128, 1, 4, 1, 2600, 0, 0, false},
                         Shape{64, 1, 3, 1, 4200, 0, 3000, false}, Shape{128, 2, 2, 1, 2300, 1, 0, true}}) {
    SCOPED_TRACE("D " + std::to_string(sh.D) + " cap " + std::to_string(sh.cap));
    const int64_t H = sh.kvH * sh.G;
    std::vector<int64_t> pasts;
    for (int64_t b = 0; b < sh.B; ++b) pasts.push_back(b == 0 ? sh.cap - 1 : 1500);  // batch 1 within one segment
    auto [in, total] = gqa_decode_inputs(rng, H, sh.kvH, sh.D, sh.cap, pasts);
    if (sh.f16) {  // values a float16 cache holds exactly, so the reference reads the same numbers
      for (size_t k : {3, 4}) {
        Tensor& t = in[k].tensor();
        for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(Float16(t.data<float>()[i]));
      }
    }
    std::vector<ir::Attribute> attrs = {attr_int("num_heads", H), attr_int("kv_num_heads", sh.kvH)};
    if (sh.window > 0) attrs.push_back(attr_int("local_window_size", sh.window));
    if (sh.bias) {
      in.resize(11);
      Tensor bias(DataType::kFloat, {sh.B, H, 1, total});
      for (int64_t b = 0; b < sh.B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t j = 0; j < total; ++j)
            bias.data<float>()[(b * H + h) * total + j] =
                h == 0 && j < 2100 ? -std::numeric_limits<float>::infinity() : 0.001f * static_cast<float>(j % 97);
      in[10] = bias;
    }
    auto ref = run_ms("GroupQueryAttention", attrs, in, 3, true);
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    for (const char* isa : {"avx512", "avx2"}) {
      if (std::string(isa) == "avx512" && !avx512) continue;
      std::vector<Tensor> outs;
      std::vector<Value> cache_in = in;
      if (sh.f16)
        for (size_t k : {3, 4}) cache_in[k] = Value(nxrt::testing::float_tensor_as(in[k].tensor(), DataType::kFloat16));
      for (int threads : {1, 2, 3})
        for (bool specialize : {false, true}) {
          auto got = run_ms("GroupQueryAttention", attrs, cache_in, 3, false, isa, threads, specialize);
          ASSERT_TRUE(got.ok()) << got.status().to_string();
          outs.push_back((*got)[0].tensor());
        }
      expect_near(outs[0], (*ref)[0].tensor(), 3e-5f, std::string(isa) + " against the reference");
      for (size_t i = 1; i < outs.size(); ++i)
        EXPECT_EQ(std::memcmp(outs[i].raw_data(), outs[0].raw_data(), static_cast<size_t>(outs[0].numel()) * 4), 0)
            << isa << " run " << i << " (threads " << 1 + i / 2 << ", variant " << i % 2 << ") differs from 1 thread";
    }
  }
}

TEST(ContribAttention, GqaSharedBufferAppendsInPlace) {
  std::mt19937 rng(9);
  const int64_t B = 2, H = 4, kvH = 2, D = 8, cap = 10;
  // Batch 0 has 5 cached tokens, batch 1 has 3; one new token each.
  std::vector<Value> in(7);
  in[0] = rnd(rng, {B, 1, H * D});
  in[1] = rnd(rng, {B, 1, kvH * D});
  in[2] = rnd(rng, {B, 1, kvH * D});
  Tensor pk = rnd(rng, {B, kvH, cap, D}), pv = rnd(rng, {B, kvH, cap, D});
  const Tensor pk0 = pk.clone(), pv0 = pv.clone();
  in[3] = pk;
  in[4] = pv;
  in[5] = i32({B}, {5, 3});
  in[6] = i32({}, {6});
  ir::Node node;
  node.name = "gqa";
  node.op_type = "GroupQueryAttention";
  node.domain = "com.microsoft";
  node.attributes = {attr_int("num_heads", H), attr_int("kv_num_heads", kvH)};
  node.inputs = {"q", "k", "v", "pk", "pv", "sl", "tot"};
  node.outputs = {"y", "pk", "pv"};
  ep::KernelInfo info(node, 1);
  info.const_inputs_.assign(7, nullptr);
  auto k = ops::cpu_provider_registry()->find("com.microsoft", "GroupQueryAttention", 1)->factory(info);
  ASSERT_TRUE(k.ok());
  ep::ThreadPool pool(2);
  ep::StandaloneContext ctx(info, in, pool);
  share_kv_buffers(ctx, in);
  ASSERT_TRUE(k.value()->compute(ctx).ok());
  ASSERT_EQ(ctx.outputs()[1].tensor().raw_data(), pk.raw_data());
  // Rows other than the appended one are untouched; the appended row holds the new key/value.
  const int64_t pos[2] = {5, 3};
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < kvH; ++h)
      for (int64_t j = 0; j < cap; ++j)
        for (int64_t d = 0; d < D; ++d) {
          const int64_t e = ((b * kvH + h) * cap + j) * D + d;
          const float want_k = j == pos[b] ? in[1].tensor().data<float>()[b * kvH * D + h * D + d] : pk0.data<float>()[e];
          const float want_v = j == pos[b] ? in[2].tensor().data<float>()[b * kvH * D + h * D + d] : pv0.data<float>()[e];
          ASSERT_EQ(pk.data<float>()[e], want_k);
          ASSERT_EQ(pv.data<float>()[e], want_v);
        }
  // Same output as the non-shared run over the same past.
  std::vector<Value> in2 = in;
  in2[3] = pk0;
  in2[4] = pv0;
  auto ref = run_ms("GroupQueryAttention", node.attributes, in2, 3, true);
  ASSERT_TRUE(ref.ok());
  expect_near(ctx.outputs()[0].tensor(), (*ref)[0].tensor(), 2e-5f, "shared vs copy");
}

TEST(ContribAttention, GqaDecodeHandComputed) {
  // One head, D=2, past of 1 key, one new token: softmax over 2 keys.
  std::vector<Value> in(7);
  in[0] = Tensor::from_vector<float>(DataType::kFloat, {1, 1, 2}, {1.f, 0.f});
  in[1] = Tensor::from_vector<float>(DataType::kFloat, {1, 1, 2}, {2.f, 0.f});
  in[2] = Tensor::from_vector<float>(DataType::kFloat, {1, 1, 2}, {0.f, 4.f});
  in[3] = Tensor::from_vector<float>(DataType::kFloat, {1, 1, 1, 2}, {0.f, 0.f});
  in[4] = Tensor::from_vector<float>(DataType::kFloat, {1, 1, 1, 2}, {2.f, 0.f});
  in[5] = i32({1}, {1});
  in[6] = i32({}, {2});
  auto out = run_ms("GroupQueryAttention", {attr_int("num_heads", 1), attr_int("kv_num_heads", 1), attr_float("scale", 1.f)}, in, 3, false);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  // scores 0 and 2 -> p = [1/(1+e^2), e^2/(1+e^2)]
  const float p1 = std::exp(2.f) / (1.f + std::exp(2.f)), p0 = 1.f - p1;
  const float* y = (*out)[0].tensor().data<float>();
  EXPECT_NEAR(y[0], p0 * 2.f, 1e-6);
  EXPECT_NEAR(y[1], p1 * 4.f, 1e-6);
  EXPECT_EQ((*out)[1].tensor().shape(), (Dims{1, 1, 2, 2}));
}

TEST(ContribAttention, GqaRejectsInconsistentSeqlens) {
  std::mt19937 rng(1);
  std::vector<Value> in(7);
  in[0] = rnd(rng, {1, 1, 8});
  in[1] = rnd(rng, {1, 1, 8});
  in[2] = rnd(rng, {1, 1, 8});
  in[3] = rnd(rng, {1, 1, 2, 8});
  in[4] = rnd(rng, {1, 1, 2, 8});
  in[5] = i32({1}, {7});  // past would be 7 > cache length 2
  in[6] = i32({}, {8});
  auto out = run_ms("GroupQueryAttention", {attr_int("num_heads", 1), attr_int("kv_num_heads", 1)}, in, 3, false);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("seqlens_k"), std::string::npos) << out.status().message();
}

TEST(ContribAttention, MhaPackedQkvMatchesSeparate) {
  std::mt19937 rng(3);
  const int64_t B = 2, S = 3, N = 2, H = 4;
  Tensor packed = rnd(rng, {B, S, N, 3, H});
  Tensor q(DataType::kFloat, {B, S, N * H}), k(DataType::kFloat, {B, S, N * H}), v(DataType::kFloat, {B, S, N * H});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t d = 0; d < H; ++d) {
          const float* src = packed.data<float>() + (((b * S + s) * N + n) * 3) * H + d;
          q.data<float>()[(b * S + s) * N * H + n * H + d] = src[0];
          k.data<float>()[(b * S + s) * N * H + n * H + d] = src[H];
          v.data<float>()[(b * S + s) * N * H + n * H + d] = src[2 * H];
        }
  for (bool reference : {false, true}) {
    auto a = run_ms("MultiHeadAttention", {attr_int("num_heads", N), attr_int("unidirectional", 1)}, {packed}, 1, reference);
    auto b = run_ms("MultiHeadAttention", {attr_int("num_heads", N), attr_int("unidirectional", 1)}, {q, k, v}, 1, false);
    ASSERT_TRUE(a.ok() && b.ok());
    expect_near((*a)[0].tensor(), (*b)[0].tensor(), 1e-5f, "packed vs separate");
  }
}

TEST(ContribAttention, AttentionFastMatchesReference) {
  std::mt19937 rng(4);
  const int64_t B = 2, S = 5, Din = 12, N = 3, H = 4;
  std::vector<Value> in = {rnd(rng, {B, S, Din}), rnd(rng, {Din, 3 * N * H}, 0.3f), rnd(rng, {3 * N * H}),
                           i32({B, S}, {1, 1, 1, 0, 0, 1, 1, 1, 1, 1}), rnd(rng, {2, B, N, 0, H})};
  for (int causal : {0, 1}) {
    auto a = run_ms("Attention", {attr_int("num_heads", N), attr_int("unidirectional", causal)}, in, 2, false);
    auto b = run_ms("Attention", {attr_int("num_heads", N), attr_int("unidirectional", causal)}, in, 2, true);
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    ASSERT_TRUE(b.ok());
    expect_near((*a)[0].tensor(), (*b)[0].tensor(), 1e-5f, "attention");
    expect_near((*a)[1].tensor(), (*b)[1].tensor(), 0.f, "present");
  }
}

// Decode-step cost of GroupQueryAttention at Qwen2.5-0.5B shapes (14 heads, 2 KV heads, head 64) over
// a shared 2048-row cache at several context lengths. Run with --gtest_also_run_disabled_tests.
TEST(ContribAttention, DISABLED_GqaDecodeBench) {
  std::mt19937 rng(1);
  const int64_t H = 14, kvH = 2, D = 64, cap = 2048;
  for (int64_t past : {128, 512, 2000}) {
    std::vector<Value> in(7);
    in[0] = rnd(rng, {1, 1, H * D});
    in[1] = rnd(rng, {1, 1, kvH * D});
    in[2] = rnd(rng, {1, 1, kvH * D});
    in[3] = rnd(rng, {1, kvH, cap, D});
    in[4] = rnd(rng, {1, kvH, cap, D});
    in[5] = i32({1}, {static_cast<int32_t>(past)});
    in[6] = i32({}, {static_cast<int32_t>(past + 1)});
    ir::Node node;
    node.name = "gqa";
    node.op_type = "GroupQueryAttention";
    node.domain = "com.microsoft";
    node.attributes = {attr_int("num_heads", H), attr_int("kv_num_heads", kvH)};
    node.inputs = {"q", "k", "v", "pk", "pv", "sl", "tot"};
    node.outputs = {"y", "pk", "pv"};
    ep::KernelInfo info(node, 1);
    info.const_inputs_.assign(7, nullptr);
    auto k = ops::cpu_provider_registry()->find("com.microsoft", "GroupQueryAttention", 1)->factory(info);
    ASSERT_TRUE(k.ok());
    ep::ThreadPool pool(1);
    ep::StandaloneContext ctx(info, in, pool);
    share_kv_buffers(ctx, in);
    const int reps = 200;
    timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    for (int r = 0; r < reps; ++r) ASSERT_TRUE(k.value()->compute(ctx).ok());
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    const double cpu = ((c1.tv_sec - c0.tv_sec) + 1e-9 * (c1.tv_nsec - c0.tv_nsec)) / reps;
    const double bytes = 2.0 * kvH * (past + 1) * D * 4;  // K and V rows read
    std::printf("GQA decode past %5ld: %.1f us/step cpu, %.2f GB/s KV read per core\n", static_cast<long>(past), cpu * 1e6, bytes / cpu / 1e9);
  }
}
