#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <random>
#include <vector>

#include "nxrt/float_types.h"
#include "kernel_test_util.h"
#include "ops/signal/fft.h"

using namespace nxrt;
using nxrt::ops::fft::cd;
using nxrt::testing::attr_int;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

Result<std::vector<Value>> run(const std::string& op, std::vector<Value> inputs, std::vector<ir::Attribute> attrs,
                               int64_t opset = 20) {
  KernelRun r;
  r.op_type = op;
  r.opset = opset;
  r.inputs = std::move(inputs);
  r.attributes = std::move(attrs);
  r.threads = 2;
  return run_kernel(r);
}

Tensor ftensor(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, std::move(shape), v); }
Tensor i64(int64_t v) { return Tensor::scalar_int64(v); }
Tensor i32(int32_t v) { return Tensor::from_vector<int32_t>(DataType::kInt32, {}, {v}); }

std::vector<cd> random_signal(int64_t n, std::mt19937& rng, bool real) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<cd> x(static_cast<size_t>(n));
  for (auto& v : x) v = cd(u(rng), real ? 0.0 : u(rng));
  return x;
}

double max_abs_diff(const std::vector<cd>& a, const std::vector<cd>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

std::vector<float> values(const Value& v) {
  const Tensor& t = v.tensor();
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

}  // namespace

TEST(OpsSignal, FftMatchesNaiveDft) {
  std::mt19937 rng(1234);
  std::vector<int64_t> lengths = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 16, 17, 31, 32, 33, 37, 64, 97, 100, 127, 128, 131,
                                  210, 251, 256, 257, 509, 512, 1031};
  std::uniform_int_distribution<int64_t> extra(2, 400);
  for (int i = 0; i < 6; ++i) lengths.push_back(extra(rng));
  for (int64_t n : lengths) {
    ops::fft::Plan plan(n);
    std::vector<cd> scratch;
    for (bool inverse : {false, true}) {
      auto x = random_signal(n, rng, false);
      auto want = ops::fft::naive_dft(x, inverse);
      auto got = x;
      plan.transform(got.data(), inverse, scratch);
      // Unit-variance inputs: |X| ~ sqrt(n); double precision FFT error is ~1e-16 * sqrt(n) * log(n).
      EXPECT_LT(max_abs_diff(got, want), 1e-12 * std::sqrt(static_cast<double>(n)) + 1e-14)
          << "n=" << n << " inverse=" << inverse;
    }
  }
}

TEST(OpsSignal, RealFftMatchesNaiveDft) {
  std::mt19937 rng(99);
  for (int64_t n : {1, 2, 3, 4, 6, 7, 10, 15, 16, 18, 34, 50, 97, 100, 128, 254, 1000}) {
    ops::fft::RealPlan plan(n);
    auto x = random_signal(n, rng, true);
    std::vector<double> xr(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) xr[i] = x[i].real();
    std::vector<cd> out(static_cast<size_t>(n / 2 + 1)), s1, s2;
    plan.forward(xr.data(), out.data(), s1, s2);
    auto want = ops::fft::naive_dft(x, false);
    want.resize(out.size());
    EXPECT_LT(max_abs_diff(out, want), 1e-12 * std::sqrt(static_cast<double>(n)) + 1e-14) << "n=" << n;
  }
}

// DFT over axis 1 of a real [2, n, 1] input (opset 20) against the naive DFT, full and one-sided.
TEST(OpsSignal, DftRealInputAxis1) {
  std::mt19937 rng(7);
  for (int64_t n : {5, 8, 12, 13}) {
    for (int onesided : {0, 1}) {
      std::vector<float> xs(static_cast<size_t>(2 * n));
      std::uniform_real_distribution<float> u(-1, 1);
      for (auto& v : xs) v = u(rng);
      auto out = run("DFT", {ftensor({2, n, 1}, xs), Value(), i64(1)}, {attr_int("onesided", onesided)});
      ASSERT_TRUE(out.ok()) << out.status().to_string();
      const Tensor& y = (*out)[0].tensor();
      const int64_t bins = onesided ? n / 2 + 1 : n;
      ASSERT_EQ(y.shape(), (Dims{2, bins, 2}));
      for (int64_t b = 0; b < 2; ++b) {
        std::vector<cd> x(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) x[i] = cd(xs[b * n + i], 0);
        auto want = ops::fft::naive_dft(x, false);
        for (int64_t k = 0; k < bins; ++k) {
          EXPECT_NEAR(y.data<float>()[(b * bins + k) * 2], want[k].real(), 1e-5);
          EXPECT_NEAR(y.data<float>()[(b * bins + k) * 2 + 1], want[k].imag(), 1e-5);
        }
      }
    }
  }
}

// Complex input, DFT over a middle axis (inner dims > 1), then the inverse restores the input.
TEST(OpsSignal, DftComplexMiddleAxisRoundTrip) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  const Dims shape{2, 7, 3, 2};
  std::vector<float> xs(2 * 7 * 3 * 2);
  for (auto& v : xs) v = u(rng);
  auto fwd = run("DFT", {ftensor(shape, xs), Value(), i64(1)}, {});
  ASSERT_TRUE(fwd.ok()) << fwd.status().to_string();
  // Check one line against the naive DFT: batch 1, inner index 2.
  std::vector<cd> line(7);
  for (int64_t k = 0; k < 7; ++k) line[k] = cd(xs[((1 * 7 + k) * 3 + 2) * 2], xs[((1 * 7 + k) * 3 + 2) * 2 + 1]);
  auto want = ops::fft::naive_dft(line, false);
  const float* y = (*fwd)[0].tensor().data<float>();
  for (int64_t k = 0; k < 7; ++k) {
    EXPECT_NEAR(y[((1 * 7 + k) * 3 + 2) * 2], want[k].real(), 1e-5);
    EXPECT_NEAR(y[((1 * 7 + k) * 3 + 2) * 2 + 1], want[k].imag(), 1e-5);
  }
  // Opset 17: axis attribute; inverse.
  auto inv = run("DFT", {(*fwd)[0]}, {attr_int("axis", 1), attr_int("inverse", 1)}, 17);
  ASSERT_TRUE(inv.ok()) << inv.status().to_string();
  auto back = values((*inv)[0]);
  ASSERT_EQ(back.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) EXPECT_NEAR(back[i], xs[i], 1e-5);
}

// rfft then irfft (onesided inverse) gives back the real signal, for even and odd lengths.
TEST(OpsSignal, RfftIrfftRoundTrip) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t n : {8, 9, 10, 11}) {
    std::vector<float> xs(static_cast<size_t>(n));
    for (auto& v : xs) v = u(rng);
    auto spec = run("DFT", {ftensor({1, n, 1}, xs), Value(), i64(1)}, {attr_int("onesided", 1)});
    ASSERT_TRUE(spec.ok());
    EXPECT_EQ((*spec)[0].tensor().dim(1), n / 2 + 1);
    // Odd n needs dft_length: the default is 2 * (bins - 1).
    auto back = run("DFT", {(*spec)[0], i64(n), i64(1)}, {attr_int("onesided", 1), attr_int("inverse", 1)});
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    ASSERT_EQ((*back)[0].tensor().shape(), (Dims{1, n, 1}));
    auto got = values((*back)[0]);
    for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], xs[i], 1e-5) << "n=" << n;
  }
}

TEST(OpsSignal, DftLengthPadsAndTruncates) {
  std::vector<float> xs = {1, 2, 3, 4};
  auto padded = run("DFT", {ftensor({1, 4, 1}, xs), i64(6), i64(1)}, {});
  ASSERT_TRUE(padded.ok());
  ASSERT_EQ((*padded)[0].tensor().shape(), (Dims{1, 6, 2}));
  std::vector<cd> x = {1, 2, 3, 4, 0, 0};
  auto want = ops::fft::naive_dft(x, false);
  auto got = values((*padded)[0]);
  for (int k = 0; k < 6; ++k) EXPECT_NEAR(got[2 * k], want[k].real(), 1e-5);
  auto cut = run("DFT", {ftensor({1, 4, 1}, xs), i32(2), i64(-2)}, {});
  ASSERT_TRUE(cut.ok());
  auto c = values((*cut)[0]);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_NEAR(c[0], 3.0, 1e-6);   // 1 + 2
  EXPECT_NEAR(c[2], -1.0, 1e-6);  // 1 - 2
}

TEST(OpsSignal, DftDoubleAndHalf) {
  std::vector<double> xd = {0.5, -1.0, 2.0};
  auto d = run("DFT", {Tensor::from_vector<double>(DataType::kDouble, {1, 3, 1}, xd)}, {}, 17);
  ASSERT_TRUE(d.ok());
  const double* yd = (*d)[0].tensor().data<double>();
  EXPECT_NEAR(yd[0], 1.5, 1e-15);
  EXPECT_NEAR(yd[2], 0.5 - (-1.0 + 2.0) * 0.5, 1e-14);
  std::vector<Float16> xh = {Float16(1.0f), Float16(1.0f), Float16(1.0f), Float16(1.0f)};
  auto h = run("DFT", {Tensor::from_vector<Float16>(DataType::kFloat16, {1, 4, 1}, xh)}, {}, 17);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(static_cast<float>((*h)[0].tensor().data<Float16>()[0]), 4.0f);
  EXPECT_EQ(static_cast<float>((*h)[0].tensor().data<Float16>()[2]), 0.0f);
}

TEST(OpsSignal, DftRejectsBadInputs) {
  EXPECT_FALSE(run("DFT", {ftensor({1, 4, 3}, std::vector<float>(12, 0))}, {}).ok());        // last dim 3
  EXPECT_FALSE(run("DFT", {ftensor({1, 4, 1}, {1, 2, 3, 4}), Value(), i64(2)}, {}).ok());   // complex dim
  EXPECT_FALSE(run("DFT", {ftensor({1, 4, 1}, {1, 2, 3, 4}), Value(), i64(-1)}, {}).ok());  // complex dim
  EXPECT_FALSE(run("DFT", {ftensor({1, 4, 1}, {1, 2, 3, 4}), i64(0), i64(1)}, {}).ok());    // dft_length 0
  EXPECT_FALSE(run("DFT", {ftensor({4}, {1, 2, 3, 4})}, {}).ok());                          // rank 1
  EXPECT_FALSE(run("DFT", {Tensor::from_vector<int32_t>(DataType::kInt32, {1, 2, 1}, {1, 2})}, {}, 17).ok());
}

TEST(OpsSignal, StftMatchesFramedDft) {
  const int64_t len = 40, step = 6, fl = 8;
  std::vector<float> sig(len), win(fl);
  for (int64_t i = 0; i < len; ++i) sig[i] = std::sin(0.3f * i) + 0.1f * i;
  for (int64_t i = 0; i < fl; ++i) win[i] = 0.5f - 0.5f * std::cos(6.2831853f * i / fl);
  for (int onesided : {1, 0}) {
    auto out = run("STFT", {ftensor({1, len, 1}, sig), i64(step), ftensor({fl}, win), i64(fl)},
                   {attr_int("onesided", onesided)}, 17);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const int64_t frames = 1 + (len - fl) / step, bins = onesided ? fl / 2 + 1 : fl;
    const Tensor& y = (*out)[0].tensor();
    ASSERT_EQ(y.shape(), (Dims{1, frames, bins, 2}));
    for (int64_t f = 0; f < frames; ++f) {
      std::vector<cd> frame(fl);
      for (int64_t i = 0; i < fl; ++i) frame[i] = cd(static_cast<double>(sig[f * step + i]) * win[i], 0);
      auto want = ops::fft::naive_dft(frame, false);
      for (int64_t k = 0; k < bins; ++k) {
        EXPECT_NEAR(y.data<float>()[(f * bins + k) * 2], want[k].real(), 1e-4);
        EXPECT_NEAR(y.data<float>()[(f * bins + k) * 2 + 1], want[k].imag(), 1e-4);
      }
    }
  }
  // Complex signal, two-sided: frame 1 against the naive DFT of the windowed frame.
  std::vector<float> csig(2 * len);
  for (int64_t i = 0; i < 2 * len; ++i) csig[i] = std::cos(0.17f * i);
  auto cplx = run("STFT", {ftensor({1, len, 2}, csig), i64(step), ftensor({fl}, win)}, {attr_int("onesided", 0)}, 17);
  ASSERT_TRUE(cplx.ok()) << cplx.status().to_string();
  {
    std::vector<cd> frame(fl);
    for (int64_t i = 0; i < fl; ++i) frame[i] = cd(csig[2 * (step + i)], csig[2 * (step + i) + 1]) * static_cast<double>(win[i]);
    auto want = ops::fft::naive_dft(frame, false);
    const float* y = (*cplx)[0].tensor().data<float>();
    for (int64_t k = 0; k < fl; ++k) {
      EXPECT_NEAR(y[(fl + k) * 2], want[k].real(), 1e-5);
      EXPECT_NEAR(y[(fl + k) * 2 + 1], want[k].imag(), 1e-5);
    }
  }
  // No window and no frame_length: one frame over the whole signal.
  auto whole = run("STFT", {ftensor({1, len, 1}, sig), i64(step)}, {}, 17);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ((*whole)[0].tensor().shape(), (Dims{1, 1, len / 2 + 1, 2}));
  EXPECT_FALSE(run("STFT", {ftensor({1, len, 1}, sig), i64(0), Value(), i64(fl)}, {}, 17).ok());
  EXPECT_FALSE(run("STFT", {ftensor({1, 4, 1}, {1, 2, 3, 4}), i64(1), Value(), i64(8)}, {}, 17).ok());
}

TEST(OpsSignal, WindowsMatchFormulas) {
  const double pi = 3.14159265358979323846;
  for (int periodic : {1, 0}) {
    const int64_t size = 10;
    const double N = periodic ? size : size - 1;
    auto hann = run("HannWindow", {i32(size)}, {attr_int("periodic", periodic)}, 17);
    auto hamming = run("HammingWindow", {i64(size)}, {attr_int("periodic", periodic)}, 17);
    auto blackman = run("BlackmanWindow", {i64(size)},
                        {attr_int("periodic", periodic), attr_int("output_datatype", static_cast<int64_t>(DataType::kDouble))}, 17);
    ASSERT_TRUE(hann.ok() && hamming.ok() && blackman.ok());
    ASSERT_EQ((*blackman)[0].tensor().dtype(), DataType::kDouble);
    for (int64_t n = 0; n < size; ++n) {
      const double s = std::sin(pi * n / N);
      EXPECT_NEAR((*hann)[0].tensor().data<float>()[n], s * s, 1e-7);
      EXPECT_NEAR((*hamming)[0].tensor().data<float>()[n], 0.54347826 - 0.45652174 * std::cos(2 * pi * n / N), 1e-7);
      EXPECT_NEAR((*blackman)[0].tensor().data<double>()[n],
                  0.42 - 0.5 * std::cos(2 * pi * n / N) + 0.08 * std::cos(4 * pi * n / N), 1e-15);
    }
  }
  auto ints = run("HannWindow", {i64(4)}, {attr_int("output_datatype", static_cast<int64_t>(DataType::kInt64))}, 17);
  ASSERT_TRUE(ints.ok());
  EXPECT_EQ((*ints)[0].tensor().data<int64_t>()[2], 1);  // peak of a periodic window of 4
  EXPECT_EQ((*ints)[0].tensor().data<int64_t>()[1], 0);
  EXPECT_FALSE(run("HannWindow", {i64(-1)}, {}, 17).ok());
  EXPECT_FALSE(run("HannWindow", {i64(4)}, {attr_int("output_datatype", static_cast<int64_t>(DataType::kString))}, 17).ok());
}

TEST(OpsSignal, MelWeightMatrixShapeAndTriangles) {
  auto out = run("MelWeightMatrix", {i32(8), i32(16), i32(8192), Tensor::scalar_float(0.0f), Tensor::scalar_float(4096.0f)},
                 {}, 17);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  const Tensor& w = (*out)[0].tensor();
  ASSERT_EQ(w.shape(), (Dims{9, 8}));
  for (int64_t m = 0; m < 8; ++m) {
    float peak = 0;
    for (int64_t b = 0; b < 9; ++b) {
      float v = w.data<float>()[b * 8 + m];
      EXPECT_GE(v, 0.0f);
      EXPECT_LE(v, 1.0f);
      peak = std::max(peak, v);
    }
    EXPECT_EQ(peak, 1.0f) << "mel bin " << m;
  }
  EXPECT_FALSE(run("MelWeightMatrix", {i32(0), i32(16), i32(8192), Tensor::scalar_float(0.0f), Tensor::scalar_float(4096.0f)},
                   {}, 17)
                   .ok());
}
