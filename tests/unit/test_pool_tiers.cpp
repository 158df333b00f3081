// The pooling kernels at every ISA tier this CPU runs. Float MaxPool's separable path (pool/sep_max.h),
// and the flat path of "same" stride-1 max and average pools (pool/flat_pool.h, AVX-512), bit for bit
// against
// the per-window reference rule (acc = v > acc ? v : acc from -inf, taps row by row): random geometries
// (horizontal stride 1 or 2, vertical stride 1-3, kernels up to 5x5 and wide rows of up to 32 taps,
// pads, ceil-mode extents, 1-D windows, rows narrower than a vector), data with NaN, -inf, ties and
// zeros of both signs (whose sign the tap order decides); nothing outside the outputs written. Then
// the MaxPool kernel itself with the isa override against reference=1 on the shapes SqueezeNet,
// ResNet-50 and Inception-v1 pool. The window engine (window/window_engine.h: MaxPool / AveragePool on
// narrow rows, depthwise conv) prepared at each tier: max bit for bit against the reference rule,
// average bit for bit against the plain loop (same summation order) and close to the definition, conv
// the same bits at AVX2 and AVX-512 (same FMA order) and close to the definition. Tiers above the CPU's
// are named in the output as not run.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ep/cpu_features.h"
#include "kernel_test_util.h"
#include "window_test_util.h"
#include "ops/pool/flat_pool.h"
#include "ops/pool/row_pool.h"
#include "ops/pool/sep_max.h"
#include "ops/window/window_engine.h"

using namespace nxrt;
using namespace nxrt::ops;

namespace {

constexpr ep::IsaTier kTiers[] = {ep::IsaTier::kScalar, ep::IsaTier::kAvx2, ep::IsaTier::kAvx512};

// The tiers whose bodies this CPU runs; the others are reported as skipped.
std::vector<ep::IsaTier> runnable_tiers(const char* what) {
  std::vector<ep::IsaTier> out;
  for (ep::IsaTier t : kTiers) {
    if (sepmax::body_tier(t) == t) {
      out.push_back(t);
    } else {
      std::printf("[ SKIPPED  ] tier %s: not on this CPU, %s not checked there\n", ep::isa_tier_name(t), what);
    }
  }
  return out;
}

// Values with many ties: small integers, +-0, and now and then NaN or -inf.
std::vector<float> tie_data(std::mt19937& rng, int64_t n, bool specials) {
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) {
    const int r = pick(rng);
    if (specials && r < 3) {
      x = std::numeric_limits<float>::quiet_NaN();
    } else if (specials && r < 5) {
      x = -std::numeric_limits<float>::infinity();
    } else if (r < 30) {
      x = r % 2 ? 0.f : -0.f;
    } else {
      x = static_cast<float>(r % 7) - 6.f;  // mostly negative: zeros are often the maximum
    }
  }
  return v;
}

bool random_geom(std::mt19937& rng, int iter, Geom3* g) {
  std::uniform_int_distribution<int> pick(0, 1000);
  WindowAttrs a;
  const bool one_d = iter % 9 == 4;
  const bool wide_kernel = iter % 13 == 6;
  Dims in{one_d ? 1 : 1 + pick(rng) % 30, iter % 17 == 3 ? 100 + pick(rng) % 130 : 1 + pick(rng) % 45};
  Dims kernel{one_d ? 1 : 1 + pick(rng) % 5, wide_kernel ? 6 + pick(rng) % 27 : 1 + pick(rng) % 5};
  a.strides = {1 + pick(rng) % 3, 1 + pick(rng) % 2};
  a.dilations = {1, 1};
  for (int i = 0; i < 4; ++i) a.pads.push_back(pick(rng) % 4);
  for (int i = 0; i < 2; ++i) {  // pads below the kernel (the op requires it)
    a.pads[i] = std::min<int64_t>(a.pads[i], kernel[i] - 1);
    a.pads[i + 2] = std::min<int64_t>(a.pads[i + 2], kernel[i] - 1);
  }
  a.ceil_mode = iter % 3 == 1;
  if (iter % 11 == 5) a.auto_pad = AutoPad::kSameUpper;
  a.kernel_shape = kernel;
  return forward_geometry(a, in, kernel, g).ok() && g->out_size() > 0;
}

void expect_bits(const float* got, const float* ref, int64_t n, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    uint32_t a = 0, b = 0;
    std::memcpy(&a, got + i, 4);
    std::memcpy(&b, ref + i, 4);
    ASSERT_EQ(a, b) << what << " at " << i << ": " << got[i] << " vs " << ref[i];
  }
}

// The `guard` floats before and after the outputs still hold 77 (what the test filled them with).
void expect_guards(const std::vector<float>& y, int guard, const std::string& what) {
  for (int i = 0; i < guard; ++i) {
    ASSERT_EQ(y[static_cast<size_t>(i)], 77.f) << what;
    ASSERT_EQ(y[y.size() - 1 - static_cast<size_t>(i)], 77.f) << what;
  }
}

// An average pool's outputs against the definition: the same non-finite value where the window held
// NaN or an infinity, else within rounding of the sums' order.
void expect_avg_close(const float* got, const float* ref, int64_t n, const std::string& what) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(ref[i])) {
      ASSERT_TRUE(std::isnan(ref[i]) ? std::isnan(got[i]) : got[i] == ref[i]) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(got[i], ref[i], 1e-5 * (1 + std::fabs(ref[i]))) << what << " at " << i;
  }
}

// Whether this CPU runs the AVX-512 tier; if not, says which check is skipped.
bool have_avx512(const char* what) {
  if (ep::cpu_isa_tier() >= ep::IsaTier::kAvx512) return true;
  std::printf("[ SKIPPED  ] tier avx512: not on this CPU, %s not checked\n", what);
  return false;
}

}  // namespace

TEST(PoolTiers, SeparableMaxBitExactAtEveryTier) {
  const std::vector<ep::IsaTier> tiers = runnable_tiers("separable MaxPool");
  std::mt19937 rng(2121);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 500; ++iter) {
    Geom3 g;
    if (!random_geom(rng, iter, &g)) continue;
    ASSERT_TRUE(sepmax::applies(g)) << "iter " << iter;
    ++ran;
    const int64_t planes = 1 + pick(rng) % 3, in_size = g.in_size(), out_size = g.out_size();
    // Planes back to back with guards before and after: reads past the input would see the guards'
    // NaNs at least under ASan; writes past the output show in the output guards.
    std::vector<float> x(static_cast<size_t>(planes * in_size + 32), std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> data = tie_data(rng, planes * in_size, iter % 2 == 0);
    std::copy(data.begin(), data.end(), x.begin() + 16);
    const float* x0 = x.data() + 16;
    std::vector<float> ref(static_cast<size_t>(planes * out_size));
    // The window engine's max definition keeps the reference's rule (the first maximal tap in row-major
    // order, NaN skipped); its double accumulator holds each float exactly, so the bits match.
    for (int64_t p = 0; p < planes; ++p)
      nxrt::testing::window_naive(g, window::PlaneOp::kMax, false, x0 + p * in_size, nullptr, 0.f,
                                  ref.data() + p * out_size);
    for (ep::IsaTier t : tiers) {
      const std::string what = "iter " + std::to_string(iter) + " tier " + ep::isa_tier_name(t) + " in " +
                               std::to_string(g.in[1]) + "x" + std::to_string(g.in[2]) + " k " +
                               std::to_string(g.k[1]) + "x" + std::to_string(g.k[2]) + " s " +
                               std::to_string(g.s[1]) + "," + std::to_string(g.s[2]);
      std::vector<float> y(static_cast<size_t>(planes * out_size + 32), 77.f);
      float* y0 = y.data() + 16;
      // Garbage scratch: the path must not read what it did not write.
      std::vector<float> scratch(static_cast<size_t>(sepmax::scratch_floats(g)), std::nanf(""));
      const int64_t cut = planes > 1 ? 1 : planes;
      sepmax::run(t, g, x0, y0, 0, cut, scratch.data());
      sepmax::run(t, g, x0, y0, cut, planes, scratch.data());
      ASSERT_NO_FATAL_FAILURE(expect_guards(y, 16, what));
      expect_bits(y0, ref.data(), planes * out_size, what);
      // Through the row-wise plan (what the kernel runs): this path for wide rows (stride 2: 24+
      // outputs, stride 1: 64+) and at the scalar tier, else the window engine (also bit-exact: its taps run in the
      // reference's order).
      rowpool::Plan plan;
      ASSERT_TRUE(rowpool::make_plan(g, true, false, &plan, t)) << what;
      if (t == ep::IsaTier::kAvx512 && sepmax::narrow_applies(g)) {
        ASSERT_EQ(plan.path, rowpool::Plan::Path::kSepMax) << what;
      } else if (flatpool::applies(g, true, t)) {
        ASSERT_EQ(plan.path, rowpool::Plan::Path::kFlat) << what;
      } else if (t == ep::IsaTier::kScalar || g.out[2] >= (g.s[2] == 2 ? 24 : 64)) {
        ASSERT_EQ(plan.path, rowpool::Plan::Path::kSepMax) << what;
      }
      ASSERT_EQ(plan.isa, t) << what;
      std::fill(y.begin(), y.end(), 77.f);
      rowpool::max_pool_2d(g, x0, y0, 0, planes, t);
      expect_bits(y0, ref.data(), planes * out_size, what + " (plan)");
    }
  }
  EXPECT_GT(ran, 400);
}

// The flat path (pool/flat_pool.h) on random "same" stride-1 windows and stride-2 max ones on rows under
// 24 outputs (1x1 to 5x5, any split of the pads, ceil mode; planes from 1 to 4096 floats: rows shorter and
// longer than a vector, one row, one column), several
// planes a call and calls of part of the planes, as the row-wise plan runs it: max bit for bit against
// the reference rule (tie data: NaN, -inf, zeros of both signs), average against the definition
// (counting pads or not); nothing outside the outputs written. AVX-512 only: elsewhere the plan must
// not take it.
TEST(PoolTiers, FlatPoolSameWindows) {
  std::mt19937 rng(4242);
  std::uniform_int_distribution<int> pick(0, 1000);
  const bool have = have_avx512("the flat pool path");
  int ran = 0;
  for (int iter = 0; iter < 600; ++iter) {
    const int64_t kh = 1 + pick(rng) % 5, kw = 1 + pick(rng) % 5;
    int64_t H = 1 + pick(rng) % 64, W = 1 + pick(rng) % 64;
    if (iter % 10 == 3) H = 1;
    if (iter % 10 == 7) W = 1;
    if (H * W > flatpool::kFlatPoolMaxPlane) continue;
    const int64_t pt = pick(rng) % kh, pl = pick(rng) % kw;
    const int64_t stride = iter % 2 ? 2 : 1;
    WindowAttrs a;
    a.kernel_shape = {kh, kw};
    a.strides = {stride, stride};
    a.dilations = {1, 1};
    if (stride == 1) {  // "same": the output keeps the input's size
      a.pads = {pt, pl, kh - 1 - pt, kw - 1 - pl};
    } else {  // any pads under the kernel, ceil mode now and then
      a.pads = {pt, pl, pick(rng) % kh, pick(rng) % kw};
      a.ceil_mode = iter % 3 == 0;
    }
    Geom3 g;
    if (!forward_geometry(a, Dims{H, W}, Dims{kh, kw}, &g).ok() || g.out_size() <= 0) continue;
    if (stride == 2 && (2 * (g.out[1] - 1) >= H || 2 * (g.out[2] - 1) >= W || g.out[2] >= sepmax::kMinWidthS2)) {
      EXPECT_FALSE(flatpool::applies(g, true, ep::IsaTier::kAvx512)) << "iter " << iter;
      continue;
    }
    ASSERT_EQ(flatpool::applies(g, true, ep::IsaTier::kAvx512), have) << "iter " << iter;
    EXPECT_EQ(flatpool::applies(g, false, ep::IsaTier::kAvx512), have && stride == 1) << "iter " << iter;
    EXPECT_FALSE(flatpool::applies(g, true, ep::IsaTier::kAvx2));
    if (!have) continue;
    ++ran;
    const int64_t planes = 1 + pick(rng) % 40, plane = H * W, oplane = g.out_size();
    const std::string what = "iter " + std::to_string(iter) + " " + std::to_string(H) + "x" + std::to_string(W) +
                             " k " + std::to_string(kh) + "x" + std::to_string(kw) + " s " + std::to_string(stride) +
                             " pads " + std::to_string(g.pb[1]) + "," + std::to_string(g.pb[2]) + "," +
                             std::to_string(g.pe[1]) + "," + std::to_string(g.pe[2]) + " planes " + std::to_string(planes);
    std::vector<float> x(static_cast<size_t>(planes * plane + 32), std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> data = tie_data(rng, planes * plane, iter % 2 == 0);
    std::copy(data.begin(), data.end(), x.begin() + 16);
    const float* x0 = x.data() + 16;
    for (int mode = 0; mode < (stride == 1 ? 3 : 1); ++mode) {  // max, average without / counting pads
      const bool max = mode == 0, cip = mode == 2;
      const auto op = max ? window::PlaneOp::kMax : window::PlaneOp::kAvg;
      std::vector<float> ref(static_cast<size_t>(planes * oplane));
      for (int64_t q = 0; q < planes; ++q)
        nxrt::testing::window_naive(g, op, cip, x0 + q * plane, nullptr, 0.f, ref.data() + q * oplane);
      rowpool::Plan plan;
      ASSERT_TRUE(rowpool::make_plan(g, max, cip, &plan, ep::IsaTier::kAvx512)) << what;
      // 3x3 stride-2 max windows on narrow rows go to the separable path's register rows instead.
      const bool narrow = max && sepmax::narrow_applies(g);
      ASSERT_EQ(plan.path, narrow ? rowpool::Plan::Path::kSepMax : rowpool::Plan::Path::kFlat) << what;
      std::vector<float> y(static_cast<size_t>(planes * oplane + 32), 77.f);
      float* y0 = y.data() + 16;
      std::vector<float> scratch(plan.scratch_bytes / sizeof(float), std::nanf(""));
      const int64_t cut = pick(rng) % (planes + 1);
      rowpool::run(plan, x0, y0, 0, cut, scratch.data());
      rowpool::run(plan, x0, y0, cut, planes, scratch.data());
      ASSERT_NO_FATAL_FAILURE(expect_guards(y, 16, what));
      if (max) {
        expect_bits(y0, ref.data(), planes * oplane, what + " max");
      } else {
        ASSERT_NO_FATAL_FAILURE(expect_avg_close(y0, ref.data(), planes * oplane, what + (cip ? " avg cip" : " avg")));
      }
    }
  }
  if (have) {
    EXPECT_GT(ran, 350);
  }
}

// The flat path's register-row body (AVX-512: 3x3 "same" windows, pads of 1, rows of 12 to 64 floats):
// every width from 1 to 70, heights 1 to the plane limit, max bit for bit against the reference rule
// (tie data) and average (counting pads or not) against the definition, several planes a call and
// calls of part of the planes (whose first and last rows take the masked loads: the body reads whole
// vectors only inside the call's planes), guards around the output. Other widths take the flat body.
TEST(PoolTiers, FlatPoolRegisterRows3x3) {
  if (!have_avx512("the flat pool's register rows")) return;
  std::mt19937 rng(5353);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 280; ++iter) {
    const int64_t W = 1 + iter % 70;
    const int64_t H = 1 + pick(rng) % std::min<int64_t>(70, flatpool::kFlatPoolMaxPlane / W);
    WindowAttrs a;
    a.kernel_shape = {3, 3};
    a.strides = {1, 1};
    a.dilations = {1, 1};
    a.pads = {1, 1, 1, 1};
    Geom3 g;
    ASSERT_TRUE(forward_geometry(a, Dims{H, W}, Dims{3, 3}, &g).ok());
    ASSERT_TRUE(flatpool::applies(g, true, ep::IsaTier::kAvx512)) << H << "x" << W;
    ++ran;
    const int64_t planes = 1 + pick(rng) % 6, plane = H * W;
    const std::string what = "iter " + std::to_string(iter) + " " + std::to_string(H) + "x" + std::to_string(W) +
                             " planes " + std::to_string(planes);
    std::vector<float> x(static_cast<size_t>(planes * plane + 128), std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> data = tie_data(rng, planes * plane, iter % 2 == 0);
    std::copy(data.begin(), data.end(), x.begin() + 64);
    const float* x0 = x.data() + 64;
    for (int mode = 0; mode < 3; ++mode) {  // max, average without / counting pads
      const bool max = mode == 0, cip = mode == 2;
      const auto op = max ? window::PlaneOp::kMax : window::PlaneOp::kAvg;
      std::vector<float> ref(static_cast<size_t>(planes * plane));
      for (int64_t q = 0; q < planes; ++q)
        nxrt::testing::window_naive(g, op, cip, x0 + q * plane, nullptr, 0.f, ref.data() + q * plane);
      const flatpool::Plan plan = flatpool::make_plan(g, max, cip);
      const bool rows3 = W >= flatpool::kRows3MinWidth && W <= flatpool::kRows3MaxWidth;
      ASSERT_EQ(plan.rows3_vectors, rows3 ? (W + 15) / 16 : 0) << what;
      std::vector<float> y(static_cast<size_t>(planes * plane + 64), 77.f);
      float* y0 = y.data() + 32;
      std::vector<float> scratch(static_cast<size_t>(plan.scratch_floats()), std::nanf(""));
      const int64_t cut = pick(rng) % (planes + 1);
      flatpool::run(plan, x0, y0, 0, cut, scratch.data());
      flatpool::run(plan, x0, y0, cut, planes, scratch.data());
      ASSERT_NO_FATAL_FAILURE(expect_guards(y, 32, what));
      if (max) {
        expect_bits(y0, ref.data(), planes * plane, what + " max");
      } else {
        ASSERT_NO_FATAL_FAILURE(expect_avg_close(y0, ref.data(), planes * plane, what + (cip ? " avg cip" : " avg")));
      }
    }
  }
  EXPECT_GT(ran, 250);
}

// The separable path's narrow-row body (AVX-512: 3x3 stride-2 windows, rows of up to 63 outputs held in
// registers) on random planes: every width from 1 to 132 columns, 1 to 70 rows, start pads 0 or 1, end
// pads 0-2, ceil mode, several planes a call and calls of part of the planes; bit for bit against the
// reference rule on tie data (NaN, -inf, zeros of both signs), nothing outside the outputs written,
// and the row-wise plan takes it. The masked loads must stay inside each row: the input sits between
// NaN guards, which would show in the maxima of the edge windows if a load read past the row.
TEST(PoolTiers, NarrowSeparableMaxBitExact) {
  if (!have_avx512("the narrow separable MaxPool body")) return;
  std::mt19937 rng(9191);
  std::uniform_int_distribution<int> pick(0, 1000);
  int ran = 0;
  for (int iter = 0; iter < 800; ++iter) {
    const int64_t H = 1 + pick(rng) % 70, W = 1 + iter % 132;
    WindowAttrs a;
    a.kernel_shape = {3, 3};
    a.strides = {2, 2};
    a.dilations = {1, 1};
    a.pads = {pick(rng) % 2, pick(rng) % 2, pick(rng) % 3, pick(rng) % 3};
    a.ceil_mode = iter % 3 == 0;
    Geom3 g;
    if (!forward_geometry(a, Dims{H, W}, Dims{3, 3}, &g).ok() || g.out_size() <= 0) continue;
    if (g.out[2] > sepmax::kNarrowMaxOutputs) {
      EXPECT_FALSE(sepmax::narrow_applies(g));
      continue;
    }
    ASSERT_TRUE(sepmax::narrow_applies(g)) << "iter " << iter;
    ++ran;
    const int64_t planes = 1 + pick(rng) % 5, in_size = g.in_size(), out_size = g.out_size();
    const std::string what = "iter " + std::to_string(iter) + " " + std::to_string(H) + "x" + std::to_string(W) +
                             " pads " + std::to_string(g.pb[1]) + "," + std::to_string(g.pb[2]) + "," +
                             std::to_string(g.pe[1]) + "," + std::to_string(g.pe[2]) + " out " +
                             std::to_string(g.out[1]) + "x" + std::to_string(g.out[2]);
    std::vector<float> x(static_cast<size_t>(planes * in_size + 128), std::numeric_limits<float>::quiet_NaN());
    const std::vector<float> data = tie_data(rng, planes * in_size, iter % 2 == 0);
    std::copy(data.begin(), data.end(), x.begin() + 64);
    const float* x0 = x.data() + 64;
    std::vector<float> ref(static_cast<size_t>(planes * out_size));
    for (int64_t p = 0; p < planes; ++p)
      nxrt::testing::window_naive(g, window::PlaneOp::kMax, false, x0 + p * in_size, nullptr, 0.f,
                                  ref.data() + p * out_size);
    std::vector<float> y(static_cast<size_t>(planes * out_size + 64), 77.f);
    float* y0 = y.data() + 32;
    std::vector<float> scratch(static_cast<size_t>(sepmax::scratch_floats(g)), std::nanf(""));
    const int64_t cut = pick(rng) % (planes + 1);
    sepmax::run(ep::IsaTier::kAvx512, g, x0, y0, 0, cut, scratch.data());
    sepmax::run(ep::IsaTier::kAvx512, g, x0, y0, cut, planes, scratch.data());
    ASSERT_NO_FATAL_FAILURE(expect_guards(y, 32, what));
    expect_bits(y0, ref.data(), planes * out_size, what);
    rowpool::Plan plan;
    ASSERT_TRUE(rowpool::make_plan(g, true, false, &plan, ep::IsaTier::kAvx512)) << what;
    ASSERT_EQ(plan.path, rowpool::Plan::Path::kSepMax) << what;
    std::fill(y.begin(), y.end(), 77.f);
    rowpool::max_pool_2d(g, x0, y0, 0, planes, ep::IsaTier::kAvx512);
    expect_bits(y0, ref.data(), planes * out_size, what + " (plan)");
  }
  EXPECT_GT(ran, 650);
}

// The MaxPool kernel (its specialized variant) at each tier against the per-window loops (reference=1),
// on the pool shapes of SqueezeNet (ceil_mode, and without), ResNet-50, Inception-v1 and -v2, and two odd ones.
TEST(PoolTiers, MaxPoolKernelAtEveryTierMatchesReference) {
  const std::vector<ep::IsaTier> tiers = runnable_tiers("the MaxPool kernel");
  struct Case {
    Dims shape;
    std::vector<int64_t> k, s, pads;
    int64_t ceil;
  };
  const Case cases[] = {
      {{1, 96, 109, 109}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1},
      {{1, 256, 54, 54}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1},
      {{1, 512, 27, 27}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 1},
      {{1, 128, 55, 55}, {3, 3}, {2, 2}, {0, 0, 0, 0}, 0},
      {{1, 320, 28, 28}, {3, 3}, {2, 2}, {0, 0, 1, 1}, 0},
      {{1, 64, 112, 112}, {3, 3}, {2, 2}, {1, 1, 1, 1}, 0},
      {{1, 192, 28, 28}, {3, 3}, {1, 1}, {1, 1, 1, 1}, 0},
      {{2, 3, 17, 31}, {2, 2}, {2, 2}, {0, 0, 0, 0}, 1},
      {{1, 5, 9, 7}, {4, 3}, {3, 1}, {2, 1, 1, 2}, 0},
  };
  for (const Case& c : cases) {
    Tensor x = nxrt::testing::random_tensor(c.shape, 7);
    {  // ties and zeros of both signs in part of the input
      float* d = x.data<float>();
      for (int64_t i = 0; i < x.numel(); i += 5) d[i] = (i / 5) % 2 ? 0.f : -0.f;
    }
    auto make = [&](std::map<std::string, std::string> ov) {
      nxrt::testing::KernelRun r;
      r.op_type = "MaxPool";
      r.attributes = {nxrt::testing::attr_ints("kernel_shape", c.k), nxrt::testing::attr_ints("strides", c.s),
                      nxrt::testing::attr_ints("pads", c.pads), nxrt::testing::attr_int("ceil_mode", c.ceil)};
      r.inputs = {Value(x)};
      r.threads = 2;
      r.specialize = true;
      r.overrides = std::move(ov);
      return nxrt::testing::run_kernel(r);
    };
    auto ref = make({{"reference", "1"}});
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    const Tensor& rt = (*ref)[0].tensor();
    for (ep::IsaTier t : tiers) {
      auto got = make({{"isa", ep::isa_tier_name(t)}});
      ASSERT_TRUE(got.ok()) << got.status().message();
      const Tensor& gt = (*got)[0].tensor();
      ASSERT_EQ(gt.shape(), rt.shape());
      expect_bits(gt.data<float>(), rt.data<float>(), rt.numel(),
                  std::string("shape ") + shape_to_string(c.shape) + " tier " + ep::isa_tier_name(t));
    }
  }
}

namespace {

// Any window geometry the engine takes: strides 1-4, dilation, pads, ceil mode, 1-D.
bool engine_geom(std::mt19937& rng, int iter, Geom3* g) {
  std::uniform_int_distribution<int> pick(0, 1000);
  WindowAttrs a;
  const bool one_d = iter % 9 == 4;
  Dims in{one_d ? 1 : 1 + pick(rng) % 33, iter % 13 == 2 ? 100 + pick(rng) % 100 : 1 + pick(rng) % 40};
  Dims kernel{one_d ? 1 : 1 + pick(rng) % 5, 1 + pick(rng) % 5};
  a.strides = {1 + pick(rng) % (iter % 4 == 0 ? 4 : 2), 1 + pick(rng) % (iter % 5 == 0 ? 4 : 2)};
  a.dilations = {iter % 6 == 1 ? 1 + pick(rng) % 3 : 1, iter % 7 == 2 ? 1 + pick(rng) % 3 : 1};
  for (int i = 0; i < 4; ++i) a.pads.push_back(pick(rng) % 4);
  for (int i = 0; i < 2; ++i) {
    const int64_t ext = (kernel[i] - 1) * a.dilations[i] + 1;
    a.pads[i] = std::min<int64_t>(a.pads[i], ext - 1);
    a.pads[i + 2] = std::min<int64_t>(a.pads[i + 2], ext - 1);
  }
  a.ceil_mode = iter % 3 == 1;
  a.kernel_shape = kernel;
  return forward_geometry(a, in, kernel, g).ok() && g->out_size() > 0;
}

}  // namespace

TEST(PoolTiers, WindowEngineAtEveryTier) {
  using window::PlaneOp;
  const std::vector<ep::IsaTier> tiers = runnable_tiers("the window engine");
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> pick(0, 1000);
  std::uniform_real_distribution<float> val(-2.f, 2.f);
  int ran = 0;
  for (int iter = 0; iter < 300; ++iter) {
    Geom3 g;
    if (!engine_geom(rng, iter, &g) || !window::TapPlan::supports(g)) continue;
    ++ran;
    const int64_t planes = 1 + pick(rng) % 3, in_size = g.in_size(), out_size = g.out_size(), kvol = g.k[1] * g.k[2];
    std::vector<float> xmax = tie_data(rng, planes * in_size, iter % 2 == 0), xr(static_cast<size_t>(planes * in_size));
    for (auto& v : xr) v = val(rng);
    std::vector<float> w(static_cast<size_t>(planes * kvol)), bias(static_cast<size_t>(planes));
    for (auto& v : w) v = val(rng);
    for (auto& v : bias) v = val(rng);
    for (PlaneOp op : {PlaneOp::kMax, PlaneOp::kAvg, PlaneOp::kConv}) {
      for (int cip = 0; cip < (op == PlaneOp::kAvg ? 2 : 1); ++cip) {
        const std::vector<float>& x = op == PlaneOp::kMax ? xmax : xr;
        std::vector<float> ref(static_cast<size_t>(planes * out_size));
        for (int64_t p = 0; p < planes; ++p) {
          nxrt::testing::window_naive(g, op, cip != 0, x.data() + p * in_size, w.data() + p * kvol, bias[p],
                                      ref.data() + p * out_size);
        }
        std::vector<float> plain, conv_vec;  // the plain loop's bits; the first vector tier's conv bits
        for (ep::IsaTier t : tiers) {
          const std::string what = "iter " + std::to_string(iter) + " op " + std::to_string(static_cast<int>(op)) +
                                   " cip " + std::to_string(cip) + " tier " + ep::isa_tier_name(t);
          window::TapPlan plan;
          ASSERT_TRUE(plan.prepare(g, op, cip != 0, /*own_buffers=*/false, t)) << what;
          // AVX-512 jobs only for rows of 16+ outputs; narrower rows run the AVX2 body.
          const ep::IsaTier expect = t == ep::IsaTier::kAvx512 && g.out[2] < 16 ? ep::IsaTier::kAvx2 : t;
          ASSERT_EQ(plan.tier(), expect) << what;
          std::vector<float> scratch(static_cast<size_t>(plan.scratch_floats()), std::nanf(""));
          std::vector<float> y(static_cast<size_t>(planes * out_size + 32), 77.f);
          float* y0 = y.data() + 16;
          plan.run_planes_in(scratch.data(), x.data(), in_size, w.data(), kvol, bias.data(), true, y0, planes);
          ASSERT_NO_FATAL_FAILURE(expect_guards(y, 16, what));
          const std::vector<float> got(y0, y0 + planes * out_size);
          if (op == PlaneOp::kMax) {
            expect_bits(got.data(), ref.data(), planes * out_size, what);
            continue;
          }
          for (size_t i = 0; i < got.size(); ++i)
            ASSERT_NEAR(got[i], ref[i], 2e-5f * (1.f + std::fabs(ref[i]))) << what << " at " << i;
          if (t == ep::IsaTier::kScalar) {
            plain = got;
          } else if (op == PlaneOp::kAvg && !plain.empty()) {
            expect_bits(got.data(), plain.data(), planes * out_size, what + " vs plain");
          } else if (op == PlaneOp::kConv && conv_vec.empty()) {
            conv_vec = got;
          } else if (op == PlaneOp::kConv) {
            expect_bits(got.data(), conv_vec.data(), planes * out_size, what + " vs avx2");
          }
        }
      }
    }
  }
  EXPECT_GT(ran, 200);
}

// MaxPool on int8 / uint8 codes (pool/max_pool_8bit.h: the row path) against reference=1 (the per-window
// loop), byte for byte: random 1-D and 2-D geometries (strides 1-3, dilations, pads, ceil mode, rows
// narrower and wider than a vector), random bytes (many ties), 1 and 2 threads.
TEST(PoolTiers, MaxPool8BitRowPathMatchesReference) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> pick(0, 1000);
  int checked = 0;
  for (int iter = 0; iter < 120; ++iter) {
    const bool one_d = iter % 7 == 3;
    const int64_t H = 1 + pick(rng) % 30, W = 1 + pick(rng) % (iter % 5 == 0 ? 90 : 40);
    std::vector<int64_t> k = {1 + pick(rng) % 4, 1 + pick(rng) % 5};
    std::vector<int64_t> s = {1 + pick(rng) % 3, 1 + pick(rng) % (iter % 3 == 0 ? 3 : 2)};
    std::vector<int64_t> d = {iter % 6 == 1 ? 2 : 1, iter % 8 == 2 ? 2 : 1};
    std::vector<int64_t> pads(4);
    for (int i = 0; i < 4; ++i) pads[static_cast<size_t>(i)] = std::min<int64_t>(pick(rng) % 3, (k[static_cast<size_t>(i % 2)] - 1) * d[static_cast<size_t>(i % 2)]);
    Dims shape = {1 + iter % 2, 1 + pick(rng) % 5, H, W};
    if (one_d) {
      shape = {1, 3, W};
      k = {k[1]};
      s = {s[1]};
      d = {d[1]};
      pads = {pads[1], pads[3]};
    }
    const int64_t ceil = iter % 4 == 1;
    for (bool s8 : {false, true}) {
      std::vector<uint8_t> bytes(static_cast<size_t>(shape_numel(shape)));
      for (auto& b : bytes) b = static_cast<uint8_t>(pick(rng) % (iter % 2 ? 256 : 7) + (iter % 2 ? 0 : 125));
      const DataType dt = s8 ? DataType::kInt8 : DataType::kUInt8;
      auto make = [&](std::map<std::string, std::string> ov, int threads) {
        nxrt::testing::KernelRun r;
        r.op_type = "MaxPool";
        r.opset = 12;
        r.attributes = {nxrt::testing::attr_ints("kernel_shape", k), nxrt::testing::attr_ints("strides", s),
                        nxrt::testing::attr_ints("dilations", d), nxrt::testing::attr_ints("pads", pads),
                        nxrt::testing::attr_int("ceil_mode", ceil)};
        r.inputs = {Value(Tensor::from_vector<uint8_t>(dt, shape, bytes))};
        r.threads = threads;
        r.overrides = std::move(ov);
        return nxrt::testing::run_kernel(r);
      };
      auto ref = make({{"reference", "1"}}, 1);
      if (!ref.ok()) continue;  // a geometry MaxPool refuses (an empty output): both paths refuse
      const Tensor& rt = (*ref)[0].tensor();
      for (int threads : {1, 2}) {
        auto got = make({}, threads);
        ASSERT_TRUE(got.ok()) << got.status().message();
        const Tensor& gt = (*got)[0].tensor();
        ASSERT_EQ(gt.shape(), rt.shape());
        ASSERT_EQ(std::memcmp(gt.raw_data(), rt.raw_data(), rt.nbytes()), 0)
            << "iter " << iter << " shape " << shape_to_string(shape) << (s8 ? " int8" : " uint8") << " threads " << threads;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 300);
}
