// com.microsoft MatMulNBits: the packed fast kernels (AVX2 and scalar) against the reference on random
// shapes, bits 2/4/8, block sizes 16..256, zero points, accuracy levels 0 and 4; the kernel through the
// registry (float16 A, packed uint8 / float zero points, bias, g_idx); a disabled GEMV benchmark.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <ctime>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "ep/cpu_features.h"
#include "ep/thread_pool.h"
#include "nxrt/float_types.h"
#include "kernel_test_util.h"
#include "variant_test_util.h"
#include "ops/contrib/matmul_nbits.h"

using namespace nxrt;
using namespace nxrt::ops::contrib;
using nxrt::testing::attr_int;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

struct Problem {
  int64_t M, K, N, bits, block;
  std::vector<float> A, scales, zps, bias;
  std::vector<uint8_t> B;
};

Problem make(std::mt19937& rng, int64_t M, int64_t K, int64_t N, int64_t bits, int64_t block, bool zp) {
  Problem p{M, K, N, bits, block, {}, {}, {}, {}, {}};
  const int64_t kb = (K + block - 1) / block;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> sc(0.01f, 0.1f);
  p.A.resize(static_cast<size_t>(M * K));
  for (auto& v : p.A) v = nd(rng);
  p.B.resize(static_cast<size_t>(N * kb * block * bits / 8));
  for (auto& v : p.B) v = static_cast<uint8_t>(byte(rng));
  p.scales.resize(static_cast<size_t>(N * kb));
  for (auto& v : p.scales) v = sc(rng);
  p.zps.assign(static_cast<size_t>(N * kb), static_cast<float>(1 << (bits - 1)));
  if (zp) {
    std::uniform_int_distribution<int> z(0, (1 << bits) - 1);
    for (auto& v : p.zps) v = static_cast<float>(z(rng));
  }
  p.bias.resize(static_cast<size_t>(N));
  for (auto& v : p.bias) v = nd(rng);
  return p;
}

// Scales a model converted from fp16 weights would have: each exactly representable in fp16.
void round_scales_to_fp16(Problem* p) {
  for (auto& v : p->scales) v = half_to_float(float_to_half(v));
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_LE(std::fabs(got[i] - want[i]), atol + rtol * std::fabs(want[i])) << what << " at " << i << ": " << got[i] << " vs " << want[i];
  }
}

// A MatMulNBits run of K x N weights (`bits` bits, `block` per scale), accuracy_level `level`.
KernelRun nbits_run(int64_t K, int64_t N, int64_t bits, int64_t block, int64_t level) {
  KernelRun run;
  run.op_type = "MatMulNBits";
  run.domain = "com.microsoft";
  run.opset = 1;
  run.attributes = {attr_int("K", K), attr_int("N", N), attr_int("bits", bits), attr_int("block_size", block),
                    attr_int("accuracy_level", level)};
  return run;
}

}  // namespace

TEST(ContribMatMulNBits, FastMatchesReferenceRandomShapes) {
  std::mt19937 rng(7);
  ep::ThreadPool pool(2);
  const int64_t blocks[] = {16, 32, 64, 128, 256};
  const int64_t bitss[] = {2, 4, 8};
  int cases = 0;
  for (int64_t bits : bitss)
    for (int64_t block : blocks)
      for (int level : {0, 4}) {
        std::uniform_int_distribution<int64_t> kd(1, 300), nd(1, 40), md(1, 13);
        const int64_t K = kd(rng), N = nd(rng), M = (cases % 3 == 0) ? 1 : md(rng);
        const bool zp = (cases % 2) == 0;
        Problem p = make(rng, M, K, N, bits, block, zp);
        const bool use_bias = cases % 4 == 1;
        std::vector<float> ref(static_cast<size_t>(M * N)), fast(ref.size()), scal(ref.size());
        matmulnbits_reference(p.A.data(), M, p.B.data(), p.scales.data(), p.zps.data(), nullptr, K, N, bits, block, level,
                              use_bias ? p.bias.data() : nullptr, ref.data());
        QuantWeights W = pack_quant_weights(p.B.data(), p.scales.data(), p.zps.data(), K, N, bits, block);
        matmulnbits_fast(p.A.data(), M, W, level, use_bias ? p.bias.data() : nullptr, fast.data(), &pool);
        matmulnbits_fast(p.A.data(), M, W, level, use_bias ? p.bias.data() : nullptr, scal.data(), nullptr,
                         ep::IsaTier::kScalar);
        const std::string what = "bits " + std::to_string(bits) + " block " + std::to_string(block) + " level " +
                                 std::to_string(level) + " M,K,N " + std::to_string(M) + "," + std::to_string(K) + "," + std::to_string(N);
        expect_close(fast, ref, 1e-4, 1e-4, what + " avx2");
        expect_close(scal, ref, 1e-4, 1e-4, what + " scalar");
        ++cases;
      }
  // Prefill path (M > 8, accuracy 0): dequantized panels + GEMM.
  Problem p = make(rng, 37, 200, 150, 4, 32, true);
  std::vector<float> ref(37 * 150), fast(ref.size());
  matmulnbits_reference(p.A.data(), 37, p.B.data(), p.scales.data(), p.zps.data(), nullptr, 200, 150, 4, 32, 0, p.bias.data(), ref.data());
  QuantWeights W = pack_quant_weights(p.B.data(), p.scales.data(), p.zps.data(), 200, 150, 4, 32);
  matmulnbits_fast(p.A.data(), 37, W, 0, p.bias.data(), fast.data(), &pool);
  expect_close(fast, ref, 1e-4, 1e-4, "prefill");
}

// Every column-panel microkernel (accuracy_level 4, 4- and 2-bit codes) this machine can run, against
// the reference: decode (M = 1), tails of each row tile and of AMX's 32-row tile, N not a multiple of
// the panel, blocks 16..256 (AVX2 flushes its 16-bit sums every 8 groups, AMX takes 64 k per tile
// instruction), K not a multiple of the block, fp16 and fp32 scale records, uniform zero points and
// zero-point tables. A kernel the CPU (or OS) cannot run is named in the output as skipped.
TEST(ContribMatMulNBits, PanelKernelsMatchReference) {
  std::mt19937 rng(11);
  ep::ThreadPool pool(2);
  std::vector<PanelKernelInfo> kernels;
  for (const PanelKernelInfo& k : panel_kernels()) {
    if (panel_kernel_supported(k.kernel)) {
      kernels.push_back(k);
    } else {
      std::printf("[ SKIPPED  ] %s: this CPU/OS cannot run it (best tier %s%s%s)\n", k.name,
                  ep::isa_tier_name(ep::cpu_isa_tier()), ep::amx_tiles_usable() ? "" : "; AMX: ",
                  ep::amx_tiles_usable() ? "" : ep::amx_unavailable_reason().c_str());
    }
  }
  auto check = [&](const Problem& p, bool use_bias, const std::string& what, ep::ThreadPool* tp) {
    std::vector<float> ref(static_cast<size_t>(p.M * p.N));
    matmulnbits_reference(p.A.data(), p.M, p.B.data(), p.scales.data(), p.zps.data(), nullptr, p.K, p.N, p.bits, p.block, 4,
                          use_bias ? p.bias.data() : nullptr, ref.data());
    for (const PanelKernelInfo& k : kernels) {
      QuantPanels W = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), p.K, p.N, p.bits, p.block, k.cols);
      std::vector<float> got(ref.size(), -1.f);
      matmulnbits_panels(p.A.data(), p.M, W, use_bias ? p.bias.data() : nullptr, got.data(), tp, k.kernel, nullptr);
      expect_close(got, ref, 1e-4, 1e-4,
                   std::string(k.name) + (W.fp16_scales ? " fp16 scales" : " fp32 scales") +
                       (W.zp_table ? " zp table" : " uniform zp") + " " + what);
      if (::testing::Test::HasFatalFailure()) return;
    }
  };
  int cases = 0;
  for (int64_t bits : {4, 2})
    for (int64_t block : {16, 32, 64, 128, 256})
      for (int64_t M : {1, 3, 6, 16, 37, 70}) {
        std::uniform_int_distribution<int64_t> kd(1, 600), nd(1, 70);
        const int64_t K = kd(rng), N = nd(rng);
        const bool zp = cases % 2 == 0, use_bias = cases % 3 == 1;
        Problem p = make(rng, M, K, N, bits, block, zp);
        if (cases % 4 < 2) round_scales_to_fp16(&p);
        check(p, use_bias,
              "bits " + std::to_string(bits) + " block " + std::to_string(block) + " M,K,N " + std::to_string(M) + "," +
                  std::to_string(K) + "," + std::to_string(N),
              cases % 2 ? &pool : nullptr);
        if (::testing::Test::HasFatalFailure()) return;
        ++cases;
      }
  // Prefill-sized: more rows than one pass over the panels holds (the A rows are taken in chunks).
  for (int64_t K : {896, 4864}) {
    Problem p = make(rng, 256, K, 40, 4, 32, true);
    check(p, false, "prefill-sized K " + std::to_string(K), &pool);
    if (::testing::Test::HasFatalFailure()) return;
  }
  // Extremes: every code 15 against A rows of +-absmax (the 16-bit sums of the AVX2 path at their bound).
  Problem p = make(rng, 2, 512, 16, 4, 256, false);
  std::fill(p.B.begin(), p.B.end(), 0xff);
  for (int64_t i = 0; i < p.M * p.K; ++i) p.A[static_cast<size_t>(i)] = (i % 3 == 0) ? -2.f : 2.f;
  check(p, false, "extremes", nullptr);
}

// The AVX-VNNI tile (vpdpbusd) writes the AVX2 tile's bits: both form the same exact 32-bit sums
// (the AVX2 tile's 16-bit partial sums never saturate), so a CPU with AVX-VNNI computes what one
// without it does. Random shapes over bits, blocks, rows (the 2-row tile and its 1-row tail), scale
// and zero-point formats, and the extremes that put the AVX2 tile's 16-bit sums at their bound.
TEST(ContribMatMulNBits, AvxVnniTileHasTheAvx2TilesBits) {
  if (!panel_kernel_supported(PanelKernel::kAvxVnni)) {
    std::printf("[ SKIPPED  ] %s: this CPU has no AVX-VNNI\n", panel_kernel_info(PanelKernel::kAvxVnni).name);
    return;
  }
  std::mt19937 rng(71);
  ep::ThreadPool pool(2);
  auto compare = [&](const Problem& p, const std::string& what, ep::ThreadPool* tp) {
    QuantPanels W = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), p.K, p.N, p.bits, p.block, 16);
    std::vector<float> want(static_cast<size_t>(p.M * p.N), -1.f), got(want.size(), -2.f);
    matmulnbits_panels(p.A.data(), p.M, W, p.bias.data(), want.data(), tp, PanelKernel::kAvx2, nullptr);
    matmulnbits_panels(p.A.data(), p.M, W, p.bias.data(), got.data(), tp, PanelKernel::kAvxVnni, nullptr);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(float)), 0) << what << " element " << i << ": " << got[i] << " vs " << want[i];
  };
  int cases = 0;
  for (int64_t bits : {4, 2})
    for (int64_t block : {16, 32, 64, 256})
      for (int64_t M : {1, 2, 3, 5, 7, 40}) {  // the 4-row tile and its 3-, 2- and 1-row tails
        std::uniform_int_distribution<int64_t> kd(1, 700), nd(1, 70);
        const int64_t K = kd(rng), N = nd(rng);
        Problem p = make(rng, M, K, N, bits, block, cases % 2 == 0);
        if (cases % 4 < 2) round_scales_to_fp16(&p);
        compare(p, "bits " + std::to_string(bits) + " block " + std::to_string(block) + " M,K,N " + std::to_string(M) + "," +
                       std::to_string(K) + "," + std::to_string(N), cases % 2 ? &pool : nullptr);
        if (::testing::Test::HasFatalFailure()) return;
        ++cases;
      }
  Problem p = make(rng, 3, 512, 16, 4, 256, false);
  std::fill(p.B.begin(), p.B.end(), 0xff);
  for (int64_t i = 0; i < p.M * p.K; ++i) p.A[static_cast<size_t>(i)] = (i % 3 == 0) ? -2.f : 2.f;
  compare(p, "extremes", nullptr);
}

// The AMX kernel's rows have the AVX512-VNNI tile's bits (the kAmxMinRows switch is batch-invariant,
// see matmul_nbits_amx.cpp): plain products, the gate/up SiluMul pair layout (through the AMX product
// buffer) and column splits, 1 and 2 threads, row counts on and off AMX's 32-row tiles, blocks 16..128,
// uniform zero points and tables, fp16 and fp32 scale records. On a machine without AMX tiles the
// emulated kernel (the same code with its tile instructions in scalar code) runs in its place, so the
// unpacking, tile addressing, folding and the driver's AMX loops are checked on every AVX-512 machine.
TEST(ContribMatMulNBits, AmxRowsHaveTheVnniTilesBits) {
  if (!panel_kernel_supported(PanelKernel::kAvx512Vnni)) {
    std::printf("[ SKIPPED  ] no AVX512-VNNI on this CPU (best tier %s): neither AMX kernel can run\n",
                ep::isa_tier_name(ep::cpu_isa_tier()));
    return;
  }
  std::mt19937 rng(53);
  ep::ThreadPool pool(2);
  int checked = 0;
  for (PanelKernel amx : {PanelKernel::kAmx, PanelKernel::kAmxEmulated}) {
    const char* name = panel_kernel_info(amx).name;
    if (!panel_kernel_supported(amx)) {
      std::printf("[ SKIPPED  ] %s: %s\n", name, ep::amx_unavailable_reason().c_str());
      continue;
    }
    struct Shape { int64_t K, N, block; bool zp, fp16; };
    // N a multiple of 64: the SiluMul layout's halves are whole panels.
    for (const Shape& sh : {Shape{256, 128, 32, false, false}, Shape{200, 64, 16, true, true}, Shape{384, 192, 128, true, false},
                            Shape{96, 64, 64, false, true}})
      for (int64_t M : {int64_t{8}, int64_t{33}, int64_t{70}})
        for (ep::ThreadPool* tp : {static_cast<ep::ThreadPool*>(nullptr), &pool}) {
          const int threads = tp ? tp->num_threads() : 1;
          const std::string what = std::string(name) + " K " + std::to_string(sh.K) + " N " + std::to_string(sh.N) +
                                   " block " + std::to_string(sh.block) + " M " + std::to_string(M) +
                                   (sh.zp ? " zp table" : " uniform zp") + (sh.fp16 ? " fp16 scales" : " fp32 scales") +
                                   " threads " + std::to_string(threads);
          SCOPED_TRACE(what);
          Problem p = make(rng, M, sh.K, sh.N, 4, sh.block, sh.zp);
          if (sh.fp16) round_scales_to_fp16(&p);
          const QuantPanels W = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), sh.K, sh.N, 4, sh.block, 32);
          ASSERT_EQ(W.fp16_scales, sh.fp16);
          ASSERT_EQ(W.zp_table, sh.zp);
          auto same_bits = [&](const std::vector<float>& got, const std::vector<float>& want, const char* part) {
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i)
              ASSERT_EQ(float_bits(got[i]), float_bits(want[i])) << part << " element " << i << ": " << got[i] << " vs " << want[i];
          };
          // Plain product, with a bias.
          const NBitsPanelsPlan on_amx = matmulnbits_panels_plan(M, W, amx, threads);
          const NBitsPanelsPlan on_vnni = matmulnbits_panels_plan(M, W, PanelKernel::kAvx512Vnni, threads);
          ASSERT_TRUE(on_amx.amx);
          ASSERT_EQ(on_amx.kernel, amx);
          std::vector<float> got(static_cast<size_t>(M * sh.N), -1.f), want(got.size(), -2.f);
          matmulnbits_panels_run(on_amx, p.A.data(), W, p.bias.data(), got.data(), tp, nullptr);
          matmulnbits_panels_run(on_vnni, p.A.data(), W, p.bias.data(), want.data(), tp, nullptr);
          same_bits(got, want, "product");
          // Columns split among outputs on the panel grid (ColumnSplitWritesEachOutputsColumns has a last
          // output ending inside a panel).
          const std::vector<int64_t> first = sh.N > 64 ? std::vector<int64_t>{0, 32, sh.N - 32, sh.N} : std::vector<int64_t>{0, 32, sh.N};
          const int nout = static_cast<int>(first.size()) - 1;
          std::vector<std::vector<float>> parts;
          std::vector<float*> outs;
          for (int i = 0; i < nout; ++i) parts.emplace_back(static_cast<size_t>(M * (first[i + 1] - first[i])), -3.f);
          for (auto& part : parts) outs.push_back(part.data());
          const NBitsColumnSplit split{first.data(), outs.data(), nout};
          ASSERT_TRUE(split.fits(W));
          matmulnbits_panels_run(on_amx, p.A.data(), W, nullptr, nullptr, tp, nullptr, &split);
          std::vector<float> whole(got.size());
          matmulnbits_panels_run(on_vnni, p.A.data(), W, nullptr, whole.data(), tp, nullptr);
          for (int i = 0; i < nout; ++i) {
            const int64_t w = first[i + 1] - first[i];
            std::vector<float> cols(static_cast<size_t>(M * w));
            for (int64_t m = 0; m < M; ++m)
              for (int64_t n = 0; n < w; ++n) cols[static_cast<size_t>(m * w + n)] = whole[static_cast<size_t>(m * sh.N + first[i] + n)];
            same_bits(parts[static_cast<size_t>(i)], cols, "split output");
          }
          // The SiluMul pair layout: W's panels alternate gate and up (N / 2 columns each), with the bias.
          const NBitsPanelsPlan pair_amx = matmulnbits_panels_plan(M, W, amx, threads, /*silu_mul=*/true);
          const NBitsPanelsPlan pair_vnni = matmulnbits_panels_plan(M, W, PanelKernel::kAvx512Vnni, threads, true);
          ASSERT_TRUE(pair_amx.amx);
          std::vector<float> g(static_cast<size_t>(M * sh.N / 2), -1.f), gw(g.size(), -2.f);
          matmulnbits_panels_silu_mul_run(pair_amx, p.A.data(), W, p.bias.data(), g.data(), tp, nullptr, true);
          matmulnbits_panels_silu_mul_run(pair_vnni, p.A.data(), W, p.bias.data(), gw.data(), tp, nullptr, true);
          same_bits(g, gw, "silu_mul");
          if (::testing::Test::HasFatalFailure()) return;
          ++checked;
        }
  }
  std::printf("[ INFO     ] %d AMX runs had the VNNI tile's bits\n", checked);
  EXPECT_GT(checked, 0);
}

// Columns split among outputs (nxrt::MatMulNBitsSplit, NBitsColumnSplit): every panel kernel this
// machine runs, decode and prefill rows (AMX from kAmxMinRows), 1 and 2 threads. Each output holds the
// same bits as its columns of the unsplit product: a panel's columns are computed by the same tile from
// the same quantized A either way, only written elsewhere.
TEST(ContribMatMulNBits, ColumnSplitWritesEachOutputsColumns) {
  std::mt19937 rng(23);
  ep::ThreadPool pool(2);
  const std::vector<int64_t> widths = {96, 32, 64, 45};  // every output but the last starts and ends on 32
  std::vector<int64_t> first = {0};
  for (int64_t w : widths) first.push_back(first.back() + w);
  const int64_t N = first.back();
  int kernels_run = 0;
  for (const PanelKernelInfo& k : panel_kernels()) {
    if (!panel_kernel_supported(k.kernel)) {
      std::printf("[ SKIPPED  ] %s: this CPU/OS cannot run it\n", k.name);
      continue;
    }
    ++kernels_run;
    for (int64_t M : {1, 5, 40})
      for (ep::ThreadPool* tp : {static_cast<ep::ThreadPool*>(nullptr), &pool})
        for (bool use_bias : {false, true}) {
        Problem p = make(rng, M, 200, N, 4, 32, M == 5);
        const float* bias = use_bias ? p.bias.data() : nullptr;  // each task adds its own columns' share
        QuantPanels W = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), p.K, N, 4, 32, k.cols);
        const NBitsPanelsPlan plan = matmulnbits_panels_plan(M, W, k.kernel, tp ? tp->num_threads() : 1);
        std::vector<float> whole(static_cast<size_t>(M * N));
        matmulnbits_panels_run(plan, p.A.data(), W, bias, whole.data(), tp, nullptr);
        if (use_bias) {  // the whole product with the bias: the product without it, plus the bias
          std::vector<float> plain(whole.size());
          matmulnbits_panels_run(plan, p.A.data(), W, nullptr, plain.data(), tp, nullptr);
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n)
              ASSERT_EQ(whole[static_cast<size_t>(m * N + n)], plain[static_cast<size_t>(m * N + n)] + p.bias[static_cast<size_t>(n)])
                  << k.name << " M " << M << " row " << m << " col " << n;
        }
        std::vector<std::vector<float>> parts;
        std::vector<float*> outs;
        for (int64_t w : widths) parts.emplace_back(static_cast<size_t>(M * w), -7.f);
        for (auto& part : parts) outs.push_back(part.data());
        const NBitsColumnSplit split{first.data(), outs.data(), static_cast<int>(widths.size())};
        ASSERT_TRUE(split.fits(W)) << k.name;
        matmulnbits_panels_run(plan, p.A.data(), W, bias, nullptr, tp, nullptr, &split);
        for (size_t i = 0; i < widths.size(); ++i)
          for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < widths[i]; ++n)
              ASSERT_EQ(parts[i][static_cast<size_t>(m * widths[i] + n)], whole[static_cast<size_t>(m * N + first[i] + n)])
                  << k.name << (plan.amx ? " (AMX rows)" : "") << (use_bias ? " with bias" : "") << " M " << M
                  << " output " << i << " row " << m << " col " << n;
      }
  }
  EXPECT_GT(kernels_run, 0);
  // Offsets off the panel grid do not fit (the kernel then computes the whole product and copies).
  Problem p = make(rng, 1, 64, 80, 4, 32, false);
  QuantPanels W = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), 64, 80, 4, 32, 16);
  const int64_t off_grid[] = {0, 40, 80}, on_grid[] = {0, 48, 80};
  EXPECT_FALSE((NBitsColumnSplit{off_grid, nullptr, 2}.fits(W)));
  EXPECT_TRUE((NBitsColumnSplit{on_grid, nullptr, 2}.fits(W)));
}

// The op nxrt::MatMulNBitsSplit: its outputs are the columns of com.microsoft::MatMulNBits over the
// stacked weights, through the panel path's direct writes (float32, splits on the panel grid) and through
// the computed-then-copied product (float16 A; splits off the grid), and its input errors.
TEST(ContribMatMulNBits, SplitOpOutputsAreTheColumnsOfMatMulNBits) {
  std::mt19937 rng(29);
  // bias: the unsplit op gets a bias and the split op each output's share (last_bias: the last output
  // alone has one; the unsplit op's other columns add zeros).
  struct Case { std::vector<int64_t> widths; int64_t M; bool fp16, bias, last_bias = false; };
  const Case cases[] = {{{64, 32, 32}, 1, false, false}, {{64, 32, 40}, 7, false, false}, {{20, 44}, 3, false, false},
                        {{32, 32}, 2, true, false},     {{64, 32}, 4, false, true},       {{64, 32, 40}, 1, false, true, true},
                        {{20, 44}, 3, false, true},
                        // The last output ends inside a panel, on the prefill rows (AMX's on an AMX machine).
                        {{64, 32, 40}, 9, false, true}};
  for (const Case& c : cases) {
    int64_t N = 0;
    for (int64_t w : c.widths) N += w;
    const int64_t K = 96;
    Problem p = make(rng, c.M, K, N, 4, 32, true);
    const int64_t kb = K / 32;
    Tensor B = Tensor::from_vector<uint8_t>(DataType::kUInt8, {N, kb, 16}, p.B);
    Tensor S = Tensor::from_vector<float>(DataType::kFloat, {N * kb}, p.scales);
    std::vector<uint8_t> zp(static_cast<size_t>(N * ((kb * 4 + 7) / 8)), 0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t j = 0; j < kb; ++j)
        zp[static_cast<size_t>(n * ((kb * 4 + 7) / 8) + j / 2)] |= static_cast<uint8_t>(static_cast<int>(p.zps[static_cast<size_t>(n * kb + j)]) << (4 * (j % 2)));
    Tensor Z = Tensor::from_vector<uint8_t>(DataType::kUInt8, {static_cast<int64_t>(zp.size())}, zp);
    Tensor A = Tensor::from_vector<float>(DataType::kFloat, {1, c.M, K}, p.A);
    if (c.fp16) {
      Tensor h(DataType::kFloat16, A.shape());
      for (int64_t i = 0; i < A.numel(); ++i) h.data<Float16>()[i] = Float16(A.data<float>()[i]);
      A = h;
    }
    std::vector<Value> inputs = {Value(A), Value(B), Value(S), Value(Z)};
    KernelRun whole = nbits_run(K, N, 4, 32, 4);
    whole.specialize = true;
    whole.inputs = inputs;
    whole.const_inputs = {1, 2, 3};
    // MatMulNBitsSplit reads each output's own weights, scales and zero points (rows of the above).
    std::vector<Value> split_inputs = {Value(A)};
    std::vector<size_t> split_consts;
    int64_t n0 = 0;
    const int64_t zrow = (kb * 4 + 7) / 8;
    for (int64_t w : c.widths) {
      split_consts.insert(split_consts.end(), {split_inputs.size(), split_inputs.size() + 1, split_inputs.size() + 2});
      split_inputs.push_back(Value(Tensor::from_vector<uint8_t>(
          DataType::kUInt8, {w, kb, 16}, std::vector<uint8_t>(p.B.begin() + n0 * kb * 16, p.B.begin() + (n0 + w) * kb * 16))));
      split_inputs.push_back(Value(Tensor::from_vector<float>(
          DataType::kFloat, {w * kb}, std::vector<float>(p.scales.begin() + n0 * kb, p.scales.begin() + (n0 + w) * kb))));
      split_inputs.push_back(Value(Tensor::from_vector<uint8_t>(
          DataType::kUInt8, {w * zrow}, std::vector<uint8_t>(zp.begin() + n0 * zrow, zp.begin() + (n0 + w) * zrow))));
      n0 += w;
    }
    if (c.bias) {
      if (c.last_bias) std::fill(p.bias.begin(), p.bias.end() - c.widths.back(), 0.f);
      whole.inputs.push_back(Value());
      whole.inputs.push_back(Value(Tensor::from_vector<float>(DataType::kFloat, {N}, p.bias)));
      int64_t b0 = 0;
      for (size_t i = 0; i < c.widths.size(); ++i) {
        const int64_t bw = c.widths[i];
        if (c.last_bias && i + 1 < c.widths.size()) {
          split_inputs.push_back(Value());
        } else {
          split_consts.push_back(split_inputs.size());
          split_inputs.push_back(Value(Tensor::from_vector<float>(
              DataType::kFloat, {bw}, std::vector<float>(p.bias.begin() + b0, p.bias.begin() + b0 + bw))));
        }
        b0 += bw;
      }
    }
    auto w = run_kernel(whole);
    ASSERT_TRUE(w.ok()) << w.status().to_string();
    KernelRun split = nbits_run(K, N, 4, 32, 4);
    split.specialize = true;
    split.op_type = "MatMulNBitsSplit";
    split.domain = ir::kNxrtDomain;
    split.attributes.push_back(nxrt::testing::attr_ints("splits", c.widths));
    split.num_outputs = c.widths.size();
    split.inputs = split_inputs;
    split.const_inputs = split_consts;
    auto got = run_kernel(split);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->size(), c.widths.size());
    const Tensor& y = (*w)[0].tensor();
    int64_t c0 = 0;
    for (size_t i = 0; i < c.widths.size(); ++i) {
      const Tensor& part = (*got)[i].tensor();
      ASSERT_EQ(part.shape(), (Dims{1, c.M, c.widths[i]}));
      ASSERT_EQ(part.dtype(), y.dtype());
      for (int64_t m = 0; m < c.M; ++m)
        for (int64_t n = 0; n < c.widths[i]; ++n) {
          const size_t at = static_cast<size_t>(m * c.widths[i] + n), from = static_cast<size_t>(m * N + c0 + n);
          if (c.fp16) {
            ASSERT_EQ(part.data<Float16>()[at].bits, y.data<Float16>()[from].bits) << "output " << i;
          } else {
            ASSERT_EQ(part.data<float>()[at], y.data<float>()[from]) << "output " << i << " row " << m << " col " << n;
          }
        }
      c0 += c.widths[i];
    }
  }
  // Attribute errors name the problem.
  KernelRun bad = nbits_run(64, 64, 4, 32, 4);
  bad.op_type = "MatMulNBitsSplit";
  bad.domain = ir::kNxrtDomain;
  bad.attributes.push_back(nxrt::testing::attr_ints("splits", {32, 16}));
  bad.num_outputs = 2;
  bad.inputs = {Value(Tensor(DataType::kFloat, {1, 64})), Value(Tensor(DataType::kUInt8, {32, 2, 16})),
                Value(Tensor(DataType::kFloat, {64})), Value(), Value(Tensor(DataType::kUInt8, {16, 2, 16})),
                Value(Tensor(DataType::kFloat, {32}))};
  bad.const_inputs = {1, 2, 4, 5};
  auto r = run_kernel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("splits sum to 48, not N=64"), std::string::npos) << r.status().to_string();
  // A part whose weights do not match its split size is named.
  bad.attributes.back() = nxrt::testing::attr_ints("splits", {32, 32});
  r = run_kernel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output 1's B must be uint8 [32, 2, 16]"), std::string::npos) << r.status().to_string();
  // Zero points on one part only.
  bad.inputs[4] = Value(Tensor(DataType::kUInt8, {32, 2, 16}));
  bad.inputs[5] = Value(Tensor(DataType::kFloat, {64}));
  bad.inputs[3] = Value(Tensor(DataType::kUInt8, {32}));
  bad.const_inputs = {1, 2, 3, 4, 5};
  r = run_kernel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("zero points must be given for every output or none"), std::string::npos) << r.status().to_string();
  // A bias of the wrong size, and more inputs than weights and biases.
  bad.inputs[3] = Value();
  bad.inputs.push_back(Value());                                   // (output 1's zero points)
  bad.inputs.push_back(Value(Tensor(DataType::kFloat, {32})));     // output 0's bias: 32 for 32 columns
  bad.inputs.push_back(Value(Tensor(DataType::kFloat, {31})));     // output 1's: 31 for 32
  bad.const_inputs = {1, 2, 4, 5, 7, 8};
  r = run_kernel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("output 1's bias must be a float32 constant with 32 elements"), std::string::npos)
      << r.status().to_string();
  bad.inputs.back() = Value(Tensor(DataType::kFloat, {32}));
  bad.inputs.push_back(Value(Tensor(DataType::kFloat, {32})));
  bad.const_inputs.push_back(9);
  r = run_kernel(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("takes at most 9 inputs"), std::string::npos) << r.status().to_string();
}

// The op at each forced tier (isa=scalar|avx2|avx512|amx, what NXRT_ISA sets): every tier this CPU has
// gives the reference's result through the kernel the tier chooses, which never exceeds the tier. A
// tier above this CPU's is named in the output as not run.
TEST(ContribMatMulNBits, EachForcedTierMatchesReference) {
  std::mt19937 rng(5);
  const int64_t K = 200, N = 70, bits = 4, block = 32, kb = (K + block - 1) / block;
  for (const char* tier_name : {"scalar", "avx2", "avx512", "amx"}) {
    const ep::IsaTier tier = *ep::parse_isa_tier(tier_name);
    if (tier > ep::cpu_isa_tier()) {
      std::printf("[ SKIPPED  ] tier %s: this CPU's best tier is %s\n", tier_name, ep::isa_tier_name(ep::cpu_isa_tier()));
      continue;
    }
    const PanelKernel chosen = choose_panel_kernel(tier);
    EXPECT_LE(panel_kernel_info(chosen).tier, tier) << tier_name;
    std::printf("[ INFO     ] tier %s: MatMulNBits accuracy_level 4 runs %s\n", tier_name, panel_kernel_info(chosen).name);
    for (int level : {0, 4})
      for (int64_t M : {1, 40}) {
        Problem p = make(rng, M, K, N, bits, block, false);
        std::vector<float> ref(static_cast<size_t>(M * N));
        matmulnbits_reference(p.A.data(), M, p.B.data(), p.scales.data(), p.zps.data(), nullptr, K, N, bits, block, level,
                              nullptr, ref.data());
        KernelRun run = nbits_run(K, N, bits, block, level);
        run.inputs = {Tensor::from_vector(DataType::kFloat, {M, K}, p.A),
                      Tensor::from_vector(DataType::kUInt8, {N, kb, block / 2}, p.B),
                      Tensor::from_vector(DataType::kFloat, {N * kb}, p.scales)};
        run.threads = 2;
        run.overrides = {{"isa", tier_name}};
        auto out = run_kernel(run);
        ASSERT_TRUE(out.ok()) << out.status().to_string();
        const Tensor& y = (*out)[0].tensor();
        for (int64_t i = 0; i < M * N; ++i)
          ASSERT_NEAR(y.data<float>()[i], ref[static_cast<size_t>(i)], 1e-4 + 1e-4 * std::fabs(ref[static_cast<size_t>(i)]))
              << "tier " << tier_name << " level " << level << " M " << M << " at " << i;
      }
  }
}

// Batch invariance: at each forced tier, row r of Y has the same bits whether the op runs on that row
// alone (M = 1, the decode kernel) or on it among M rows (the prefill kernels: AMX from kAmxMinRows
// rows at the amx tier, the 4-row VNNI / 2-row AVX2 tiles, the 4-row row-layout kernels).
// Serving batches requests' rows together, so a request's output must not depend on its batch-mates.
// Not yet at accuracy_level 0 above 8 rows: there the prefill dequantizes panels of B and runs the
// float GEMM, which sums in another order than the row kernels M <= 8 take; those Ms are left out.
TEST(ContribMatMulNBits, EachRowIsIndependentOfTheBatch) {
  struct Shape {
    int64_t K, N, block;
  };
  const int64_t kMaxRows = 33;
  auto run_rows = [](const Problem& p, const std::vector<uint8_t>& zpk, int64_t zrow, bool zp, bool bias, int level,
                     const char* tier, int64_t r0, int64_t M, std::vector<float>* y) {
    const int64_t kb = (p.K + p.block - 1) / p.block;
    KernelRun run = nbits_run(p.K, p.N, p.bits, p.block, level);
    std::vector<float> a(p.A.begin() + r0 * p.K, p.A.begin() + (r0 + M) * p.K);
    run.inputs = {Tensor::from_vector(DataType::kFloat, {M, p.K}, a),
                  Tensor::from_vector(DataType::kUInt8, {p.N, kb, p.block * p.bits / 8}, p.B),
                  Tensor::from_vector(DataType::kFloat, {p.N * kb}, p.scales),
                  zp ? Value(Tensor::from_vector(DataType::kUInt8, {p.N, zrow}, zpk)) : Value(), Value(),
                  bias ? Value(Tensor::from_vector(DataType::kFloat, {p.N}, p.bias)) : Value()};
    run.threads = 2;
    run.overrides = {{"isa", tier}};
    auto out = run_kernel(run);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& t = (*out)[0].tensor();
    y->assign(t.data<float>(), t.data<float>() + M * p.N);
  };
  std::mt19937 rng(23);
  int64_t checked = 0;
  for (const char* tier_name : {"scalar", "avx2", "avx512", "amx"}) {
    const ep::IsaTier tier = *ep::parse_isa_tier(tier_name);
    if (tier > ep::cpu_isa_tier()) {
      std::printf("[ SKIPPED  ] tier %s: this CPU's best tier is %s\n", tier_name, ep::isa_tier_name(ep::cpu_isa_tier()));
      continue;
    }
    for (const Shape& sh : {Shape{256, 70, 32}, Shape{200, 96, 64}, Shape{384, 40, 128}})
      for (int64_t bits : {4, 8})
        for (int level : {0, 4})
          for (bool zp_and_bias : {false, true}) {  // and fp16-exact scales
            Problem p = make(rng, kMaxRows, sh.K, sh.N, bits, sh.block, zp_and_bias);
            if (zp_and_bias) round_scales_to_fp16(&p);  // the packed panels' fp16 scale records too
            const int64_t kb = (sh.K + sh.block - 1) / sh.block, zrow = (kb * bits + 7) / 8;
            std::vector<uint8_t> zpk(static_cast<size_t>(sh.N * zrow), 0);
            for (int64_t n = 0; n < sh.N; ++n)
              for (int64_t j = 0; j < kb; ++j) {
                const int64_t bit = j * bits;
                zpk[static_cast<size_t>(n * zrow + bit / 8)] |=
                    static_cast<uint8_t>(static_cast<int>(p.zps[static_cast<size_t>(n * kb + j)]) << (bit % 8));
              }
            const std::string what = std::string("tier ") + tier_name + " K " + std::to_string(sh.K) + " N " +
                                     std::to_string(sh.N) + " block " + std::to_string(sh.block) + " bits " +
                                     std::to_string(bits) + " level " + std::to_string(level) +
                                     (zp_and_bias ? " zp+bias+fp16 scales" : "");
            std::vector<std::vector<float>> alone(static_cast<size_t>(kMaxRows));
            for (int64_t r = 0; r < kMaxRows; ++r)
              run_rows(p, zpk, zrow, zp_and_bias, zp_and_bias, level, tier_name, r, 1, &alone[static_cast<size_t>(r)]);
            for (int64_t M : {3, 8, 16, 33}) {
              if (level == 0 && M > 8) continue;  // the float prefill GEMM: see above
              std::vector<float> y;
              run_rows(p, zpk, zrow, zp_and_bias, zp_and_bias, level, tier_name, 0, M, &y);
              for (int64_t r = 0; r < M; ++r)
                for (int64_t n = 0; n < sh.N; ++n) {
                  const float got = y[static_cast<size_t>(r * sh.N + n)], want = alone[static_cast<size_t>(r)][static_cast<size_t>(n)];
                  ASSERT_EQ(float_bits(got), float_bits(want))
                      << what << ": M " << M << " row " << r << " column " << n << ": " << got << " vs alone " << want;
                }
              ++checked;
            }
          }
  }
  std::printf("[ INFO     ] %ld batched runs matched their rows run alone\n", static_cast<long>(checked));
  EXPECT_GT(checked, 0);
}

// Scales go to fp16 in the packed copy only when that is exact; otherwise the record keeps fp32.
// Both panel widths: fp16 records are shorter (block 32: 576 against 640 bytes for 32 columns, 288
// against 320 for 16, whose records were once rounded up to 64 bytes and so read as many bytes as fp32).
TEST(ContribMatMulNBits, PackedScalesAreFp16OnlyWhenExact) {
  for (const int64_t cols : {int64_t{32}, int64_t{16}}) {
    std::mt19937 rng(9);
    Problem p = make(rng, 1, 64, 8, 4, 32, false);
    QuantPanels fp32 = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), 64, 8, 4, 32, cols);
    EXPECT_FALSE(fp32.fp16_scales);
    round_scales_to_fp16(&p);
    QuantPanels fp16 = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), 64, 8, 4, 32, cols);
    EXPECT_TRUE(fp16.fp16_scales);
    EXPECT_EQ(fp32.record_bytes, cols * 16 + cols * 4) << cols;
    EXPECT_EQ(fp16.record_bytes, cols * 16 + cols * 2) << cols;
    EXPECT_LT(fp16.bytes(), fp32.bytes()) << cols;
    EXPECT_FALSE(fp16.zp_table);
    EXPECT_EQ(fp16.uniform_zp, 8.f);
  }
}

// The vector A quantizers (AVX2 a block at a time, AVX-512 16 blocks at a time) equal the plain loop
// bit for bit (values, scales, sums): K tails, groups of 16 blocks whole and cut short, blocks of very
// different magnitudes side by side (each block's scale is its own lane of the AVX-512 reductions) and
// all-zero blocks.
TEST(ContribMatMulNBits, VectorQuantizerMatchesPlainLoop) {
  std::mt19937 rng(4);
  std::normal_distribution<float> nd(0.f, 3.f);
  if (ep::cpu_isa_tier() < ep::IsaTier::kAvx512)
    std::printf("[ SKIPPED  ] tier avx512: this CPU's best tier is %s\n", ep::isa_tier_name(ep::cpu_isa_tier()));
  for (int64_t block : {16, 32, 64, 128}) {
    for (int64_t K : {block, 3 * block, 5 * block + 7, int64_t{896}, 16 * block, 33 * block + 3, int64_t{4864}}) {
      const int64_t kb = (K + block - 1) / block, kpad = kb * block;
      std::vector<float> a(static_cast<size_t>(K));
      for (auto& v : a) v = nd(rng);
      // The first block's absmax 127 makes its scale 1, so these land exactly halfway: round half to even.
      a[0] = 0.5f;
      a[1] = 2.5f;
      a[2] = 127.f;
      a[3] = -3.5f;
      if (K > 40) std::fill(a.begin() + 16, a.begin() + 32, 0.f);  // an all-zero half block
      for (int64_t j = 1; j < K / block; ++j) {  // whole blocks: zero, tiny, huge, or as drawn
        float* blk = a.data() + j * block;
        if (j % 7 == 5) std::fill(blk, blk + block, 0.f);
        if (j % 7 == 2) for (int64_t i = 0; i < block; ++i) blk[i] *= 1e-3f;
        if (j % 7 == 3) for (int64_t i = 0; i < block; ++i) blk[i] *= 1e4f;
      }
      // Non-finite values at the first, a middle and the last position of three whole blocks (NaN: a
      // NaN scale and -128s for the block; +-inf: an infinite scale, -128 where inf * 0 is NaN).
      const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
      if (K / block >= 9) {
        a[static_cast<size_t>(6 * block)] = nan;
        a[static_cast<size_t>(7 * block + block / 2 + 1)] = inf;
        a[static_cast<size_t>(8 * block + block - 1)] = -inf;
        a[static_cast<size_t>(8 * block + 3)] = nan;
      }
      std::vector<int8_t> q1(static_cast<size_t>(kpad)), q2(q1.size());
      std::vector<float> s1(static_cast<size_t>(kb)), s2(s1.size()), z1(s1.size()), z2(s1.size());
      quantize_a_row_tail(a.data(), K, block, kpad, q2.data(), s2.data(), z2.data(), 0);
      for (ep::IsaTier tier : {ep::IsaTier::kScalar, ep::IsaTier::kAvx2, ep::IsaTier::kAvx512}) {
        if (tier > ep::cpu_isa_tier()) continue;
        quantize_a_row(a.data(), K, block, kpad, q1.data(), s1.data(), z1.data(), tier);
        ASSERT_EQ(q1, q2) << "block " << block << " K " << K << " tier " << ep::isa_tier_name(tier);
        // Bitwise (NaN scales compare unequal as floats).
        ASSERT_EQ(std::memcmp(s1.data(), s2.data(), s1.size() * sizeof(float)), 0) << "scales, block " << block << " K " << K;
        ASSERT_EQ(std::memcmp(z1.data(), z2.data(), z1.size() * sizeof(float)), 0) << "sums, block " << block << " K " << K;
      }
    }
  }
}

TEST(ContribMatMulNBits, Int8LevelIsCloseToFloatLevel) {
  std::mt19937 rng(3);
  Problem p = make(rng, 2, 256, 16, 4, 32, false);
  std::vector<float> f(32), q(32);
  matmulnbits_reference(p.A.data(), 2, p.B.data(), p.scales.data(), p.zps.data(), nullptr, 256, 16, 4, 32, 0, nullptr, f.data());
  matmulnbits_reference(p.A.data(), 2, p.B.data(), p.scales.data(), p.zps.data(), nullptr, 256, 16, 4, 32, 4, nullptr, q.data());
  for (size_t i = 0; i < f.size(); ++i) EXPECT_NEAR(q[i], f[i], 0.05 + 0.02 * std::fabs(f[i]));
}

TEST(ContribMatMulNBits, KernelFloat16PackedZeroPointsBiasAndGidx) {
  std::mt19937 rng(11);
  const int64_t M = 3, K = 70, N = 9, bits = 4, block = 16, kb = 5;
  Problem p = make(rng, M, K, N, bits, block, true);
  // Packed uint8 zero points: N x ceil(kb * 4 / 8) bytes.
  const int64_t zrow = (kb * bits + 7) / 8;
  std::vector<uint8_t> zpk(static_cast<size_t>(N * zrow), 0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t j = 0; j < kb; ++j)
      zpk[static_cast<size_t>(n * zrow + j / 2)] |= static_cast<uint8_t>(static_cast<int>(p.zps[static_cast<size_t>(n * kb + j)]) << ((j % 2) * 4));
  std::vector<Float16> a16, s16, b16;
  for (float v : p.A) a16.push_back(Float16(v));
  for (float v : p.scales) s16.push_back(Float16(v));
  for (float v : p.bias) b16.push_back(Float16(v));
  std::vector<float> a_r, s_r, b_r;
  for (auto v : a16) a_r.push_back(static_cast<float>(v));
  for (auto v : s16) s_r.push_back(static_cast<float>(v));
  for (auto v : b16) b_r.push_back(static_cast<float>(v));
  // A non-trivial g_idx: element k uses block (k / 16 + 1) % kb.
  std::vector<int32_t> g(static_cast<size_t>(K));
  for (int64_t k = 0; k < K; ++k) g[static_cast<size_t>(k)] = static_cast<int32_t>((k / 16 + 1) % kb);
  for (int variant = 0; variant < 2; ++variant) {
    KernelRun run = nbits_run(K, N, bits, block, 0);  // accuracy_level 0, as when the attribute is absent
    run.inputs = {Tensor::from_vector(DataType::kFloat16, {M, K}, a16), Tensor::from_vector(DataType::kUInt8, {N, kb, 8}, p.B),
                  Tensor::from_vector(DataType::kFloat16, {N * kb}, s16), Tensor::from_vector(DataType::kUInt8, {N, zrow}, zpk),
                  variant == 1 ? Value(Tensor::from_vector(DataType::kInt32, {K}, g)) : Value(),
                  Tensor::from_vector(DataType::kFloat16, {N}, b16)};
    run.threads = 2;
    auto out = run_kernel(run);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0].tensor();
    ASSERT_EQ(y.shape(), (Dims{M, N}));
    std::vector<float> ref(static_cast<size_t>(M * N));
    matmulnbits_reference(a_r.data(), M, p.B.data(), s_r.data(), p.zps.data(), variant == 1 ? g.data() : nullptr, K, N, bits,
                          block, 0, b_r.data(), ref.data());
    for (int64_t i = 0; i < M * N; ++i)
      EXPECT_NEAR(static_cast<float>(y.data<Float16>()[i]), ref[static_cast<size_t>(i)], 0.01 + 0.002 * std::fabs(ref[static_cast<size_t>(i)]));
  }
}

TEST(ContribMatMulNBits, ErrorsNameShapes) {
  KernelRun run;
  run.op_type = "MatMulNBits";
  run.domain = "com.microsoft";
  run.opset = 1;
  run.attributes = {attr_int("K", 32), attr_int("N", 4), attr_int("bits", 4), attr_int("block_size", 32)};
  run.inputs = {Tensor(DataType::kFloat, {1, 31}), Tensor(DataType::kUInt8, {4, 1, 16}), Tensor(DataType::kFloat, {4})};
  auto out = run_kernel(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("K=32"), std::string::npos) << out.status().message();
  run.attributes[3] = attr_int("block_size", 24);
  out = run_kernel(run);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("block_size"), std::string::npos);
}

// Read bandwidth of this process right now: GB/s of summing a 512 MB buffer on the pool's threads
// (the anchor the GEMV's GB/s is compared with, measured in the same run).
double read_gbps(ep::ThreadPool& pool) {
  static std::vector<uint64_t> buf(size_t{64} << 20, 1);  // 512 MB, touched once
  const int64_t chunks = 64, per = static_cast<int64_t>(buf.size()) / chunks;
  std::vector<uint64_t> sums(static_cast<size_t>(chunks));
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c) {
        const uint64_t* p = buf.data() + c * per;
        uint64_t s[8] = {};
        for (int64_t i = 0; i < per; i += 8)
          for (int j = 0; j < 8; ++j) s[j] += p[i + j];
        sums[static_cast<size_t>(c)] = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
      }
    });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(buf.size() * 8) / sec / 1e9);
  }
  EXPECT_EQ(sums[0], static_cast<uint64_t>(per));
  return best;
}

// Every panel kernel this CPU runs: M = 1 as GB/s of packed weights read (and % of read_gbps measured
// just before), M = 512 as GOP/s (2*M*K*N). Then the row layout (accuracy_level 0). Run with
//   ./build/nxrt_unit_tests --gtest_also_run_disabled_tests --gtest_filter='*MatMulNBitsBench*'
// NXRT_BENCH_SHAPES=decode|prefill limits the rows, NXRT_BENCH_KERNEL=amx the kernels (a part of their
// names); NXRT_BENCH_FP16=1 rounds the scales to fp16.
TEST(ContribMatMulNBits, DISABLED_MatMulNBitsBench) {
  std::mt19937 rng(1);
  struct Shape { int64_t K, N; };
  const Shape shapes[] = {{896, 4864}, {4864, 896}, {896, 151936}};
  const char* only = std::getenv("NXRT_BENCH_SHAPES");
  const bool fp16 = std::getenv("NXRT_BENCH_FP16") != nullptr;
  const char* kernel_filter = std::getenv("NXRT_BENCH_KERNEL");  // a part of the kernel names to run
  for (int threads : {1, 2}) {
    ep::ThreadPool pool(threads);
    for (const Shape& s : shapes)
      for (int64_t M : {1, 512}) {
        if (M == 512 && s.N > 10000) continue;
        if (only && std::string(only) == (M == 1 ? "prefill" : "decode")) continue;
        Problem p = make(rng, M, s.K, s.N, 4, 32, false);
        if (fp16) round_scales_to_fp16(&p);
        const double bw = M == 1 ? read_gbps(pool) : 0.0;
        for (const PanelKernelInfo& k : panel_kernels()) {
          if (!panel_kernel_supported(k.kernel)) continue;
          if (M == 1 && k.kernel == PanelKernel::kAmx) continue;  // M = 1 runs the VNNI tile
          if (k.kernel == PanelKernel::kAmxEmulated) continue;   // scalar tile emulation: a test aid
          if (M > 1 && k.kernel == PanelKernel::kScalar) continue;  // the reference, seconds per call
          if (kernel_filter && !std::strstr(k.name, kernel_filter)) continue;
          QuantPanels P = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), s.K, s.N, 4, 32, k.cols);
          std::vector<float> y(static_cast<size_t>(M * s.N));
          const NBitsPanelsPlan plan = matmulnbits_panels_plan(M, P, k.kernel, pool.num_threads());
          std::vector<uint8_t> ws(plan.workspace_bytes() + 64);
          void* ws64 = ws.data() + (64 - reinterpret_cast<uintptr_t>(ws.data()) % 64) % 64;
          auto call = [&] { matmulnbits_panels_run(plan, p.A.data(), P, nullptr, y.data(), &pool, ws64); };
          call();
          const int reps = M == 1 ? std::max<int>(5, static_cast<int>(2e9 / (s.K * s.N))) : 3;
          // One thread: CPU time of this thread (the machine may be shared); more: wall time.
          std::vector<double> times;
          for (int r = 0; r < reps; ++r) {
            timespec c0, c1;
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
            const auto t0 = std::chrono::steady_clock::now();
            call();
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
            times.push_back(threads == 1 ? (c1.tv_sec - c0.tv_sec) + 1e-9 * (c1.tv_nsec - c0.tv_nsec)
                                         : std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          }
          std::sort(times.begin(), times.end());
          const double sec = times[times.size() / 2];
          const double bytes = static_cast<double>(P.bytes());
          if (M == 1) {
            std::printf("threads %d K %5ld N %6ld M 1   %-36s %8.3f ms %6.2f GB/s = %3.0f%% of read %6.2f GB/s (%s scales)\n",
                        threads, static_cast<long>(s.K), static_cast<long>(s.N), k.name, sec * 1e3, bytes / sec / 1e9,
                        100.0 * bytes / sec / 1e9 / bw, bw, P.fp16_scales ? "fp16" : "fp32");
          } else {
            std::printf("threads %d K %5ld N %6ld M %ld %-36s %8.3f ms %7.1f GOP/s\n", threads, static_cast<long>(s.K),
                        static_cast<long>(s.N), static_cast<long>(M), k.name, sec * 1e3, 2.0 * M * s.K * s.N / sec / 1e9);
          }
        }
        // The row layout at accuracy_level 0 (float), what the onnx-style graphs run.
        QuantWeights W = pack_quant_weights(p.B.data(), p.scales.data(), p.zps.data(), s.K, s.N, 4, 32);
        std::vector<float> y(static_cast<size_t>(M * s.N));
        matmulnbits_fast(p.A.data(), M, W, 0, nullptr, y.data(), &pool);
        const auto t0 = std::chrono::steady_clock::now();
        const int reps = M == 1 ? 5 : 1;
        for (int r = 0; r < reps; ++r) matmulnbits_fast(p.A.data(), M, W, 0, nullptr, y.data(), &pool);
        const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
        std::printf("threads %d K %5ld N %6ld M %ld %-36s %8.3f ms\n", threads, static_cast<long>(s.K),
                    static_cast<long>(s.N), static_cast<long>(M), "row layout, accuracy_level 0", sec * 1e3);
      }
  }
}

// The bytes a decode GEMV's worker reads first (what a replay has the idle worker prefetch): the head of
// its first claim of panels (gate/up pairs for the SiluMul layout), capped; nothing for more rows, one
// thread or a pool size whose first chunks are not fixed. Checked against the pool's own first claim.
TEST(ContribMatMulNBits, PanelsWorkerHeadIsTheWorkersFirstClaim) {
  std::mt19937 rng(41);
  for (const PanelKernelInfo& k : panel_kernels()) {
    // AMX takes many rows only (its plans have none).
    if (k.kernel == PanelKernel::kAmx || k.kernel == PanelKernel::kAmxEmulated) continue;
    Problem p = make(rng, 1, 256, 640, 4, 32, false);
    QuantPanels W = pack_quant_panels(p.B.data(), p.scales.data(), p.zps.data(), p.K, p.N, 4, 32, k.cols);
    const size_t panel_bytes = static_cast<size_t>(W.kb * W.record_bytes);
    for (bool silu : {false, true}) {
      SCOPED_TRACE(std::string(k.name) + (silu ? " silu_mul" : ""));
      const NBitsPanelsPlan plan = matmulnbits_panels_plan(1, W, k.kernel, 2, silu);
      const int64_t per = silu ? 2 : 1, items = W.panels / per;
      const int64_t grain = silu ? std::max<int64_t>(1, plan.grain / 2) : plan.grain;
      const int64_t first = ep::ThreadPool::worker_first_claim(2, items, grain);
      ASSERT_LT(first, items);
      const ep::WorkerPrefetch all = matmulnbits_panels_worker_head(plan, W, SIZE_MAX);
      EXPECT_EQ(all.data, W.panel(first * per));
      EXPECT_EQ(all.bytes, static_cast<size_t>(items - first) * per * panel_bytes);
      const ep::WorkerPrefetch capped = matmulnbits_panels_worker_head(plan, W, 1000);
      EXPECT_EQ(capped.data, all.data);
      EXPECT_EQ(capped.bytes, 1000u);
      EXPECT_EQ(matmulnbits_panels_worker_head(matmulnbits_panels_plan(4, W, k.kernel, 2, silu), W, SIZE_MAX).bytes, 0u);
      EXPECT_EQ(matmulnbits_panels_worker_head(matmulnbits_panels_plan(1, W, k.kernel, 1, silu), W, SIZE_MAX).bytes, 0u);
      EXPECT_EQ(matmulnbits_panels_worker_head(matmulnbits_panels_plan(1, W, k.kernel, 4, silu), W, SIZE_MAX).bytes, 0u);
    }
  }
}

// With constant weights the kernel packs them at creation and specialize plans the tiling for A's rows
// (decode rows, prefill panels, the int8 panel path) with num_threads slots of per-thread scratch: the
// result is the same bits with and without the variant, at 1 and 2 threads, and close to the reference.
TEST(ContribMatMulNBits, VariantTilingAndSlotsMatchPerCallPlan) {
  struct Case { const char* what; int64_t M, K, N, bits, block, acc; };
  const Case cases[] = {
      {"float decode", 1, 256, 300, 4, 32, 0},
      {"float 5 rows", 5, 200, 120, 4, 16, 0},
      {"float prefill", 20, 128, 200, 4, 32, 0},
      {"int8 rows 8-bit", 5, 256, 300, 8, 32, 4},   // the int8 row path: per-thread scale products
      {"int8 rows 8-bit block 64", 1, 512, 260, 8, 64, 4},
      {"int8 panels decode", 1, 256, 300, 4, 32, 4},
      {"int8 panels prefill", 40, 128, 100, 4, 32, 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    std::mt19937 rng(static_cast<uint32_t>(c.M * 131 + c.N));
    Problem p = make(rng, c.M, c.K, c.N, c.bits, c.block, false);
    const int64_t kb = (c.K + c.block - 1) / c.block;
    KernelRun run = nbits_run(c.K, c.N, c.bits, c.block, c.acc);
    run.inputs = {Tensor::from_vector(DataType::kFloat, {c.M, c.K}, p.A),
                  Tensor::from_vector(DataType::kUInt8, {c.N, kb, c.block * c.bits / 8}, p.B),
                  Tensor::from_vector(DataType::kFloat, {c.N * kb}, p.scales)};
    run.const_inputs = {1, 2};
    nxrt::testing::expect_variant_paths_equal(run, true);  // the prepared A at least
    run.specialize = true;
    run.threads = 2;
    auto out = run_kernel(run);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0].tensor();
    std::vector<float> ref(static_cast<size_t>(c.M * c.N));
    matmulnbits_reference(p.A.data(), c.M, p.B.data(), p.scales.data(), p.zps.data(), nullptr, c.K, c.N, c.bits, c.block,
                          static_cast<int>(c.acc), nullptr, ref.data());
    expect_close(std::vector<float>(y.data<float>(), y.data<float>() + y.numel()), ref, 1e-3, 1e-3, c.what);
  }
}
