// CPU microbenchmarks (Google Benchmark): the float GEMM/GEMV engine, memory bandwidth (STREAM-like
// copy and read), ResNet-50 convolution shapes through the Conv engine, and the bandwidth of a few
// memory-bound kernels (Add, Softmax, LayerNormalization) run through the kernel registry.
//
//   make microbench      (or: build/nxrt_microbench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true)
//
// Counters: GFLOP/s for GEMM and conv (2*M*N*K), GB/s for GEMV (weight bytes read), streams and kernels
// (bytes read + written).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "ep/cpu_features.h"
#include "ep/kernel_overrides.h"
#include "ep/slot_scratch.h"
#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "ops/contrib/matmul_nbits.h"
#include "ops/conv/conv_engine.h"
#include "ops/gemm/gemm.h"
#include "../tools/read_bandwidth/read_loops.h"

namespace {

using namespace nxrt;

std::vector<float> rand_vec(size_t n, uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

ep::ThreadPool& pool_for(int threads) {
  static ep::ThreadPool p1(1), p2(2);
  return threads <= 1 ? p1 : p2;
}

// ---- GEMM: C[n,n] = A[n,n] * B[n,n] -------------------------------------------------------------
void BM_Gemm(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  auto A = rand_vec(n * n, 1), B = rand_vec(n * n, 2);
  std::vector<float> C(n * n);
  ep::ThreadPool& pool = pool_for(threads);
  for (auto _ : state) {
    ops::gemm_f32(false, false, n, n, n, 1.f, A.data(), n, B.data(), n, 0.f, C.data(), n, &pool);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}
BENCHMARK(BM_Gemm)->ArgsProduct({{256, 512, 1024, 2048}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// Same with B prepacked (constant weights).
void BM_GemmPackedB(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  auto A = rand_vec(n * n, 1), B = rand_vec(n * n, 2);
  std::vector<float> C(n * n);
  ops::PackedB pb = ops::pack_b_f32(false, n, n, B.data(), n);
  ep::ThreadPool& pool = pool_for(threads);
  for (auto _ : state) {
    ops::gemm_f32_packed(false, n, 1.f, A.data(), n, pb, 0.f, C.data(), n, &pool);
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemmPackedB)->ArgsProduct({{1024}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// Transformer linear layers: 128 tokens x K against a prepacked K x N weight (BERT-base's 768 x 768,
// 768 x 3072, 3072 x 768). Arg 3 (cold): each iteration takes the next of enough weight copies to
// pass 96 MiB, so the weights come from memory as in a model run, where a layer's weights were last
// read one forward pass ago; else the same copy (warm in L2/L3 where it fits).
void BM_GemmTransformer(benchmark::State& state) {
  const int64_t M = 128, K = state.range(0), N = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  const bool cold = state.range(3) != 0;
  auto A = rand_vec(M * K, 1);
  std::vector<float> C(M * N);
  const int64_t copies = cold ? std::max<int64_t>(2, (int64_t(96) << 20) / (4 * K * N) + 1) : 1;
  std::vector<ops::PackedB> pbs;
  for (int64_t c = 0; c < copies; ++c) {
    auto B = rand_vec(K * N, 2 + static_cast<uint32_t>(c));
    pbs.push_back(ops::pack_b_f32(false, K, N, B.data(), N));
  }
  ep::ThreadPool& pool = pool_for(threads);
  size_t next = 0;
  for (auto _ : state) {
    ops::gemm_f32_packed(false, M, 1.f, A.data(), K, pbs[next], 0.f, C.data(), N, &pool);
    next = (next + 1) % pbs.size();
    benchmark::DoNotOptimize(C.data());
  }
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * M * N * K * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemmTransformer)
    ->ArgsProduct({{768}, {768, 3072}, {1, 2}, {0, 1}})
    ->ArgsProduct({{3072}, {768}, {1, 2}, {0, 1}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// ---- GEMV: y[1,N] = x[1,K] * W[K,N], W prepacked ------------------------------------------------
void BM_GemvPacked(benchmark::State& state) {
  const int64_t K = 4096, N = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  auto W = rand_vec(K * N, 3), x = rand_vec(K, 4);
  std::vector<float> y(N);
  ops::PackedB pb = ops::pack_b_f32(false, K, N, W.data(), N);
  W.clear();
  W.shrink_to_fit();
  ep::ThreadPool& pool = pool_for(threads);
  for (auto _ : state) {
    ops::gemm_f32_packed(false, 1, 1.f, x.data(), K, pb, 0.f, y.data(), N, &pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(4.0 * K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemvPacked)->ArgsProduct({{4096, 11008}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// Unpacked weights, W stored N x K (Gemm transB=1, the usual Linear layout).
void BM_GemvTransB(benchmark::State& state) {
  const int64_t K = 4096, N = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  auto W = rand_vec(K * N, 3), x = rand_vec(K, 4);
  std::vector<float> y(N);
  ep::ThreadPool& pool = pool_for(threads);
  for (auto _ : state) {
    ops::gemm_f32(false, true, 1, N, K, 1.f, x.data(), K, W.data(), K, 0.f, y.data(), N, &pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["GB/s"] = benchmark::Counter(4.0 * K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemvTransB)->ArgsProduct({{4096}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Memory bandwidth: STREAM-like copy (GB/s = read + write bytes) and read (sum) ----------------
constexpr int64_t kStreamFloats = int64_t(1) << 25;  // 128 MiB per array

void BM_StreamCopy(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> a(kStreamFloats, 1.f), b(kStreamFloats, 0.f);
  ep::ThreadPool& pool = pool_for(threads);
  for (auto _ : state) {
    pool.parallel_for(kStreamFloats, int64_t(1) << 20, [&](int64_t s, int64_t e) {
      std::memcpy(b.data() + s, a.data() + s, sizeof(float) * (e - s));
    });
    benchmark::DoNotOptimize(b.data());
  }
  state.counters["GB/s"] = benchmark::Counter(2.0 * 4 * kStreamFloats * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamCopy)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_StreamRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  std::vector<float> a(kStreamFloats, 1.f);
  ep::ThreadPool& pool = pool_for(threads);
  std::vector<float> partial(64 * 16);
  for (auto _ : state) {
    pool.parallel_for(16, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        const int64_t per = kStreamFloats / 16;
        const float* p = a.data() + t * per;
        float s[16] = {};
        for (int64_t i = 0; i < per; i += 16)
          for (int j = 0; j < 16; ++j) s[j] += p[i + j];
        float tot = 0;
        for (float v : s) tot += v;
        partial[t * 16] = tot;
      }
    });
    benchmark::DoNotOptimize(partial.data());
  }
  state.counters["GB/s"] = benchmark::Counter(4.0 * kStreamFloats * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_StreamRead)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- ResNet-50 convolutions through the Conv engine ---------------------------------------------
struct ConvCase {
  int64_t C, M, H, W, k, stride, pad;
};
const ConvCase kConvCases[] = {
    {256, 64, 56, 56, 1, 1, 0},  // 1x1 256->64 at 56x56
    {64, 64, 56, 56, 3, 1, 1},   // 3x3 64->64 at 56x56
    {3, 64, 224, 224, 7, 2, 3},  // 7x7 stride 2, the first conv
    {512, 512, 7, 7, 3, 1, 1},   // 3x3 512->512 at 7x7 (last stage)
    {64, 256, 56, 56, 1, 1, 0},  // 1x1 64->256 at 56x56 (small K)
    {128, 128, 56, 56, 3, 2, 1}, // 3x3 stride 2 128->128 56x56 -> 28x28
    {256, 256, 28, 28, 3, 2, 1}, // 3x3 stride 2 256->256 28x28 -> 14x14
    {512, 1024, 28, 28, 1, 2, 0},  // 1x1 stride 2 512->1024 28x28 -> 14x14 (downsample)
};

// Runs conv_forward on case `cc` (batch 1, square kernel, symmetric pads) on `path`; reports GFLOP/s
// counted as 2 * M * K * pixels. `winograd`: prepare the weights for the Winograd path too.
// `skip_unless_path`: a forced path that does not apply to the case is reported as skipped.
void run_conv_case(benchmark::State& state, const ConvCase& cc, int threads, ops::ConvPath path, bool winograd,
                   const std::string& label, bool skip_unless_path = false) {
  ops::ConvShape s;
  s.N = 1;
  s.C = cc.C;
  s.M = cc.M;
  s.group = 1;
  s.g.nsp = 2;
  s.g.in[1] = cc.H;
  s.g.in[2] = cc.W;
  s.g.k[1] = s.g.k[2] = cc.k;
  s.g.s[1] = s.g.s[2] = cc.stride;
  s.g.pb[1] = s.g.pb[2] = s.g.pe[1] = s.g.pe[2] = cc.pad;
  s.g.out[1] = (cc.H + 2 * cc.pad - cc.k) / cc.stride + 1;
  s.g.out[2] = (cc.W + 2 * cc.pad - cc.k) / cc.stride + 1;
  auto x = rand_vec(cc.C * cc.H * cc.W, 5);
  auto w = rand_vec(cc.M * cc.C * cc.k * cc.k, 6);
  auto bias = rand_vec(cc.M, 7);
  ops::ConvWeights<float> cw;
  cw.prepare(Dims{cc.M, cc.C, cc.k, cc.k}, 1, w, winograd);
  std::vector<float> y(cc.M * s.g.out_size());
  ep::ThreadPool& pool = pool_for(threads);
  if (skip_unless_path) {
    // A forced path that does not apply runs the kAuto choice: report it as not run, not as that path.
    const ops::ConvPath ran = ops::conv_chosen_path<float>(s, cw, ops::ConvConfig(path), nullptr, threads);
    if (ran != path) {
      state.SkipWithError((std::string(ops::conv_path_name(path)) + " does not apply").c_str());
      return;
    }
  }
  // One plan for every iteration, as a Conv kernel's variant holds it: the Winograd / small-spatial
  // weight copies it acquires are made once (conv_forward plans per call, and so made them per iteration).
  const ops::ConvConfig cfg(path);
  const ops::ConvPlan plan = ops::conv_plan<float>(s, cw, cfg, threads, false);
  const ep::HeapScratch ws(plan.workspace_bytes);
  for (auto _ : state) {
    ops::conv_forward_planned<float>(plan, x.data(), cw, bias.data(), y.data(), &pool, cfg, nullptr, ws.get());
    benchmark::DoNotOptimize(y.data());
  }
  const double flops = 2.0 * cc.M * s.g.out_size() * cc.C * cc.k * cc.k;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(label + std::to_string(cc.C) + "->" + std::to_string(cc.M) + " @" + std::to_string(cc.H) + "x" +
                 std::to_string(cc.W));
}

void BM_ConvResNet50(benchmark::State& state) {
  const ConvCase& cc = kConvCases[state.range(0)];
  run_conv_case(state, cc, static_cast<int>(state.range(1)), ops::ConvPath::kAuto, false,
                std::to_string(cc.k) + "x" + std::to_string(cc.k) + "/" + std::to_string(cc.stride) + " ");
}
BENCHMARK(BM_ConvResNet50)->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7}, {1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- 3x3 stride-1 convs: im2col + GEMM vs Winograd F(4x4, 3x3), each path forced ---------------------
const ConvCase k3x3Cases[] = {
    {64, 64, 56, 56, 3, 1, 1},    // ResNet-50 stage 1
    {256, 256, 14, 14, 3, 1, 1},  // ResNet-50 stage 3
    {128, 128, 112, 112, 3, 1, 1},  // VGG-19 block 2
    {512, 512, 28, 28, 3, 1, 1},  // VGG-19 block 4
    {128, 32, 28, 28, 3, 1, 1},   // DenseNet-121 dense layer
    {128, 32, 56, 56, 3, 1, 1},   // DenseNet-121 block 1 dense layer
    {16, 64, 55, 55, 3, 1, 1},    // SqueezeNet fire 2 expand (few input channels: the transforms weigh)
    {64, 256, 13, 13, 3, 1, 1},   // SqueezeNet fire 9 expand (4 tiles a row)
    {32, 128, 27, 27, 3, 1, 1},   // SqueezeNet fire 4 expand (7 tile rows: two blocks)
    {48, 192, 13, 13, 3, 1, 1},   // SqueezeNet fire 6 expand
    {128, 32, 14, 14, 3, 1, 1},   // DenseNet-121 block 3 dense layer
    {64, 192, 56, 56, 3, 1, 1},   // Inception-v2's second conv (many output channels)
};

// Path 0: implicit GEMM (im2col panels), 1: Winograd, 2: padded-rows GEMM (direct, rows read in place).
const ops::ConvPath k3x3Paths[] = {ops::ConvPath::kImplicitGemm, ops::ConvPath::kWinograd,
                                   ops::ConvPath::kPaddedRowsGemm};
const char* const k3x3PathLabels[] = {"im2col ", "winograd ", "padded-rows "};

void BM_Conv3x3Path(benchmark::State& state) {
  const int64_t path = state.range(2);
  run_conv_case(state, k3x3Cases[state.range(0)], static_cast<int>(state.range(1)), k3x3Paths[path], true,
                k3x3PathLabels[path], path == 2);
}
BENCHMARK(BM_Conv3x3Path)->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {1, 2}, {0, 1, 2}})->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Convs on small planes (7x7, 14x14: ResNet-50's last stages, DenseNet-121's dense layers), each
// path forced; CPU time, so a loaded machine still compares the paths' work ----------------------------
const ConvCase kSmallPlaneCases[] = {
    {1024, 256, 14, 14, 1, 1, 0},  // ResNet-50 stage 3 reduce
    {256, 1024, 14, 14, 1, 1, 0},  // ResNet-50 stage 3 expand
    {2048, 512, 7, 7, 1, 1, 0},    // ResNet-50 stage 4 reduce
    {512, 2048, 7, 7, 1, 1, 0},    // ResNet-50 stage 4 expand
    {512, 512, 7, 7, 3, 1, 1},     // ResNet-50 stage 4 3x3
    {640, 128, 14, 14, 1, 1, 0},   // DenseNet-121 block 3 bottleneck
    {128, 32, 14, 14, 3, 1, 1},    // DenseNet-121 block 3 3x3
    {992, 128, 7, 7, 1, 1, 0},     // DenseNet-121 block 4 bottleneck
    {128, 32, 7, 7, 3, 1, 1},      // DenseNet-121 block 4 3x3
    {256, 128, 14, 14, 1, 1, 0},   // DenseNet-121 block 3 first bottleneck
    {576, 64, 14, 14, 1, 1, 0},    // Inception-v2 block 4 reduce
    {64, 256, 13, 13, 1, 1, 0},    // SqueezeNet fire 9 expand
    {512, 64, 13, 13, 1, 1, 0},    // SqueezeNet fire 9 squeeze
    {512, 1000, 13, 13, 1, 1, 0},  // SqueezeNet classifier (its largest node)
};
const ops::ConvPath kSmallPlanePaths[] = {ops::ConvPath::kAuto, ops::ConvPath::kPointwise,
                                          ops::ConvPath::kImplicitGemm, ops::ConvPath::kSmallSpatialDirect,
                                          ops::ConvPath::kSmallSpatialTransposed, ops::ConvPath::kWinograd};

void BM_ConvSmallPlane(benchmark::State& state) {
  const ConvCase& cc = kSmallPlaneCases[state.range(0)];
  const ops::ConvPath path = kSmallPlanePaths[state.range(1)];
  run_conv_case(state, cc, 1, path, true,
                std::string(ops::conv_path_name(path)) + " " + std::to_string(cc.k) + "x" + std::to_string(cc.k) + " ",
                path != ops::ConvPath::kAuto);
}
BENCHMARK(BM_ConvSmallPlane)->ArgsProduct({{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}, {0, 1, 2, 3, 4, 5}})->Unit(benchmark::kMillisecond);

// ---- CNN stems: few input channels, 224x224, stride 2 (SqueezeNet 1.1's 3x3 3->64, ResNet-50's /
// Inception's 7x7 3->64, ShuffleNet's 3x3 3->24), 1 thread, kAuto and padded-rows-gemm forced; CPU time --
const ConvCase kStemCases[] = {
    {3, 64, 224, 224, 3, 2, 0},  // SqueezeNet 1.1
    {3, 64, 224, 224, 7, 2, 3},  // ResNet-50, Inception-v1/v2, DenseNet-121
    {3, 24, 224, 224, 3, 2, 1},  // ShuffleNet
};
const ops::ConvPath kStemPaths[] = {ops::ConvPath::kAuto, ops::ConvPath::kPaddedRowsGemm};

void BM_ConvStem(benchmark::State& state) {
  const ConvCase& cc = kStemCases[state.range(0)];
  const ops::ConvPath path = kStemPaths[state.range(1)];
  run_conv_case(state, cc, 1, path, false,
                std::string(ops::conv_path_name(path)) + " " + std::to_string(cc.k) + "x" + std::to_string(cc.k) + " ",
                path != ops::ConvPath::kAuto);
}
BENCHMARK(BM_ConvStem)->ArgsProduct({{0, 1, 2}, {0, 1}})->Unit(benchmark::kMillisecond);

// ---- Memory-bound kernels through the registry (kernel_test_util) ---------------------------------
constexpr int64_t kRows = 4096, kCols = 1024;  // 16 MiB per tensor

void run_op(benchmark::State& state, testing::KernelRun run, double bytes) {
  for (auto _ : state) {
    auto r = testing::run_kernel(run);
    if (!r.ok()) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(r.value().data());
  }
  state.counters["GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

Tensor rand_tensor(Dims shape, uint32_t seed) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return Tensor::from_vector<float>(DataType::kFloat, shape, rand_vec(static_cast<size_t>(n), seed));
}

void BM_Add(benchmark::State& state) {
  testing::KernelRun run;
  run.op_type = "Add";
  run.threads = static_cast<int>(state.range(0));
  run.inputs = {rand_tensor(Dims{kRows, kCols}, 1), rand_tensor(Dims{kRows, kCols}, 2)};
  run_op(state, run, 3.0 * 4 * kRows * kCols);
}
BENCHMARK(BM_Add)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Softmax(benchmark::State& state) {
  testing::KernelRun run;
  run.op_type = "Softmax";
  run.opset = 13;
  run.threads = static_cast<int>(state.range(0));
  run.inputs = {rand_tensor(Dims{kRows, kCols}, 1)};
  run_op(state, run, 2.0 * 4 * kRows * kCols);
}
BENCHMARK(BM_Softmax)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_LayerNorm(benchmark::State& state) {
  testing::KernelRun run;
  run.op_type = "LayerNormalization";
  run.opset = 17;
  run.threads = static_cast<int>(state.range(0));
  run.inputs = {rand_tensor(Dims{kRows, kCols}, 1), rand_tensor(Dims{kCols}, 2), rand_tensor(Dims{kCols}, 3)};
  run_op(state, run, 2.0 * 4 * kRows * kCols);
}
BENCHMARK(BM_LayerNorm)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- int4 decode: one Qwen2.5-0.5B-shape token's MatMulNBits GEMVs (accuracy_level 4) --------------
// 24 layers of q, k, v, o, gate, up, down and the 151936-row LM head, packed as the model's column
// panels (fp32 block scales: random scales do not round-trip through fp16), run once each with M = 1 in
// model order: the weight stream of a decode step (about 309 MB). GB/s = packed bytes read / time;
// BM_NBitsDecodeStreamRead sums the same packed bytes with vector loads, the anchor it is held to: plain
// loads, or behind the prefetch scheme of nxrt_read_bandwidth's fastest loop (the weight-read limit's).
// The tier whose MatMulNBits tile the benchmarks below run: the CPU's, capped by NXRT_ISA (and
// NXRT_KERNEL_OVERRIDES' isa) through the session's own reading of them (NXRT_ISA=avx2 times the AVX2
// tile on an AVX-512 machine); a bad value ends the run naming it.
ep::IsaTier nbits_tier() {
  static const ep::IsaTier tier = [] {
    Result<ep::KernelOverrides> o = ep::KernelOverrides::from_options_and_env({});
    if (!o.ok()) {
      std::fprintf(stderr, "nxrt_microbench: %s\n", o.status().to_string().c_str());
      std::exit(2);
    }
    return o->isa();
  }();
  return tier;
}

struct DecodeWeights {
  std::vector<ops::contrib::QuantPanels> mats;
  size_t bytes = 0;
};
const DecodeWeights& decode_weights() {
  static const DecodeWeights w = [] {
    DecodeWeights d;
    const int64_t H = 896, KV = 128, F = 4864, V = 151936;
    std::vector<std::pair<int64_t, int64_t>> shapes;  // {K, N}
    for (int l = 0; l < 24; ++l)
      for (auto kn : {std::pair{H, H}, {H, KV}, {H, KV}, {H, H}, {H, F}, {H, F}, {F, H}}) shapes.push_back(kn);
    shapes.push_back({H, V});
    std::mt19937 rng(7);
    // The panel width of the kernel the machine's tier runs (32 columns on AVX-512, 16 on AVX2).
    const int64_t cols = ops::contrib::panel_kernel_info(ops::contrib::choose_panel_kernel(nbits_tier())).cols;
    for (auto [K, N] : shapes) {
      const int64_t kb = K / 32;
      std::vector<uint8_t> B(static_cast<size_t>(N * kb * 16));
      for (auto& b : B) b = static_cast<uint8_t>(rng());
      std::vector<float> sc(static_cast<size_t>(N * kb)), zp(sc.size(), 8.f);
      std::uniform_real_distribution<float> ds(0.001f, 0.02f);
      for (auto& s : sc) s = ds(rng);
      d.mats.push_back(ops::contrib::pack_quant_panels(B.data(), sc.data(), zp.data(), K, N, 4, 32, cols));
      d.bytes += d.mats.back().bytes();
    }
    return d;
  }();
  return w;
}

// The first matrix a decode benchmark runs: all of them (state.range(1) == 0) or the lm_head alone.
size_t decode_first_matrix(const benchmark::State& state, const DecodeWeights& w) {
  return state.range(1) == 0 ? 0 : w.mats.size() - 1;
}
size_t decode_bytes(const DecodeWeights& w, size_t first) {
  size_t b = 0;
  for (size_t i = first; i < w.mats.size(); ++i) b += w.mats[i].bytes();
  return b;
}

void BM_NBitsDecode(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const DecodeWeights& w = decode_weights();
  const auto kernel = ops::contrib::choose_panel_kernel(nbits_tier());
  std::vector<ops::contrib::NBitsPanelsPlan> plans;
  size_t ws = 0;
  int64_t maxn = 0;
  for (const auto& m : w.mats) {
    plans.push_back(ops::contrib::matmulnbits_panels_plan(1, m, kernel, threads));
    ws = std::max(ws, plans.back().workspace_bytes());
    maxn = std::max(maxn, m.N);
  }
  std::vector<float> a = rand_vec(4864, 3), y(static_cast<size_t>(maxn));
  auto* work = static_cast<uint8_t*>(std::aligned_alloc(64, (ws + 63) / 64 * 64));
  ep::ThreadPool& pool = pool_for(threads);
  const size_t first = decode_first_matrix(state, w);
  for (auto _ : state) {
    for (size_t i = first; i < w.mats.size(); ++i)
      ops::contrib::matmulnbits_panels_run(plans[i], a.data(), w.mats[i], nullptr, y.data(), &pool, work);
    benchmark::DoNotOptimize(y.data());
  }
  std::free(work);
  state.counters["GB/s"] = benchmark::Counter(double(decode_bytes(w, first)) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
// Args: threads, then 0 (a whole step's matrices) or 1 (the lm_head alone: one big stream, no
// per-matrix hand-off, the kernel's own read speed).
BENCHMARK(BM_NBitsDecode)->ArgsProduct({{1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_NBitsDecodeStreamRead(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  const bool paged = state.range(2) != 0;
  const DecodeWeights& w = decode_weights();
  ep::ThreadPool& pool = pool_for(threads);
  uint64_t sink = 0;
  const size_t first = decode_first_matrix(state, w);
  for (auto _ : state) {
    for (size_t i = first; i < w.mats.size(); ++i) {
      const auto& m = w.mats[i];
      const auto* p = reinterpret_cast<const uint64_t*>(m.data.data());
      const int64_t words = static_cast<int64_t>(m.bytes() / 8);
      std::vector<uint64_t> part(16 * 8, 0);
      // nxrt_read_bandwidth's own loops over 64-byte lines: plain (0), or behind its fastest prefetch
      // scheme (2), the one the weight-read limit takes.
      pool.parallel_for(words / 8, 512, [&](int64_t s, int64_t e) {
        part[static_cast<size_t>(pool.slot()) * 8] +=
            read_loops::sum(p + s * 8, static_cast<size_t>(e - s) * 8, paged ? 2 : 0);
      });
      for (uint64_t v : part) sink += v;
    }
    benchmark::DoNotOptimize(sink);
  }
  state.counters["GB/s"] = benchmark::Counter(double(decode_bytes(w, first)) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
// Args: threads, whole step (0) or lm_head (1), plain loads (0) or with nxrt_read_bandwidth's page-ahead
// prefetch (1).
BENCHMARK(BM_NBitsDecodeStreamRead)->ArgsProduct({{1, 2}, {0, 1}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

// The decode GEMV's A quantizer (one row, blocks of 32, in L1), per tier: arg 0 the row length (896:
// Qwen2.5-0.5B's hidden size, 4864: its down_proj input), arg 1 the tier (1 avx2, 2 avx512).
void BM_QuantizeARow(benchmark::State& state) {
  const int64_t K = state.range(0);
  const ep::IsaTier tier = state.range(1) == 2 ? ep::IsaTier::kAvx512 : ep::IsaTier::kAvx2;
  if (tier > ep::cpu_isa_tier()) {
    state.SkipWithError("tier not on this CPU");
    return;
  }
  const std::vector<float> a = rand_vec(static_cast<size_t>(K));
  std::vector<int8_t> q(static_cast<size_t>(K));
  std::vector<float> sa(static_cast<size_t>(K / 32)), sq(sa.size());
  for (auto _ : state) {
    ops::contrib::quantize_a_row(a.data(), K, 32, K, q.data(), sa.data(), sq.data(), tier);
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(K) * 4, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QuantizeARow)->ArgsProduct({{896, 4864}, {1, 2}})->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();

// The decode GEMV's compute rate with its weights in cache: one q/o_proj-sized matrix (896 x 896,
// block 32: 0.45 MB packed) run again and again on one thread, so it stays in L2. Against
// BM_NBitsDecode's streaming rate it shows how much headroom the kernel has over memory.
void BM_NBitsDecodeInCache(benchmark::State& state) {
  const int64_t K = 896, N = state.range(0);
  std::mt19937 rng(9);
  std::vector<uint8_t> B(static_cast<size_t>(N * (K / 32) * 16));
  for (auto& b : B) b = static_cast<uint8_t>(rng());
  std::vector<float> sc(static_cast<size_t>(N * (K / 32)), 0.01f), zp(sc.size(), 8.f);
  const auto kernel = ops::contrib::choose_panel_kernel(nbits_tier());
  const int64_t cols = ops::contrib::panel_kernel_info(kernel).cols;
  const auto m = ops::contrib::pack_quant_panels(B.data(), sc.data(), zp.data(), K, N, 4, 32, cols);
  const auto plan = ops::contrib::matmulnbits_panels_plan(1, m, kernel, 1);
  std::vector<float> a = rand_vec(K, 3), y(static_cast<size_t>(N));
  auto* work = static_cast<uint8_t*>(std::aligned_alloc(64, (plan.workspace_bytes() + 63) / 64 * 64 + 64));
  for (auto _ : state) {
    ops::contrib::matmulnbits_panels_run(plan, a.data(), m, nullptr, y.data(), nullptr, work);
    benchmark::DoNotOptimize(y.data());
  }
  std::free(work);
  state.counters["GB/s"] = benchmark::Counter(double(m.bytes()) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_NBitsDecodeInCache)->Arg(896)->Arg(128)->Unit(benchmark::kMicrosecond)->UseRealTime();

// The prefill product's compute rate: a 512-row A against one Qwen2.5-0.5B-shape projection (block
// 32, accuracy_level 4), the machine's tier's tile (AMX where it runs). Args: K, N, threads. GOPS counts
// a multiply and an add per weight per row; against the tier's int8 dot-product peak it says how much of
// the core the tile uses.
void BM_NBitsPrefill(benchmark::State& state) {
  const int64_t M = 512, K = state.range(0), N = state.range(1);
  const int threads = static_cast<int>(state.range(2));
  std::mt19937 rng(11);
  std::vector<uint8_t> B(static_cast<size_t>(N * (K / 32) * 16));
  for (auto& b : B) b = static_cast<uint8_t>(rng());
  std::vector<float> sc(static_cast<size_t>(N * (K / 32))), zp(sc.size(), 8.f);
  std::uniform_real_distribution<float> ds(0.001f, 0.02f);
  for (auto& s : sc) s = ds(rng);
  const auto kernel = ops::contrib::choose_panel_kernel(nbits_tier());
  const int64_t cols = ops::contrib::panel_kernel_info(kernel).cols;
  const auto m = ops::contrib::pack_quant_panels(B.data(), sc.data(), zp.data(), K, N, 4, 32, cols);
  const auto plan = ops::contrib::matmulnbits_panels_plan(M, m, kernel, threads);
  std::vector<float> a = rand_vec(M * K, 3), y(static_cast<size_t>(M * N));
  auto* work = static_cast<uint8_t*>(std::aligned_alloc(64, (plan.workspace_bytes() + 63) / 64 * 64 + 64));
  ep::ThreadPool& pool = pool_for(threads);
  for (auto _ : state) {
    ops::contrib::matmulnbits_panels_run(plan, a.data(), m, nullptr, y.data(), &pool, work);
    benchmark::DoNotOptimize(y.data());
  }
  std::free(work);
  state.counters["GOPS"] = benchmark::Counter(2.0 * M * K * N * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_NBitsPrefill)
    ->Args({896, 4864, 1})
    ->Args({4864, 896, 1})
    ->Args({896, 896, 1})
    ->Args({896, 4864, 2})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
