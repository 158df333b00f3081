// The window engine's per-output definitions (window/window_engine.h), shared by the tests that check
// its bodies and the pool / depthwise tiers built on it.
#pragma once
#include <cstdint>
#include <limits>

#include "ops/conv/conv_geometry.h"
#include "ops/window/window_engine.h"

namespace nxrt::testing {

// One plane by the definition, in double: conv (bias + sum w * x over valid taps), max (NaN skipped,
// -inf when no tap is valid), average (sum / valid taps, or / taps inside the padded extent with cip;
// 0 taps -> 0).
inline void window_naive(const ops::Geom3& g, ops::window::PlaneOp op, bool cip, const float* x, const float* w,
                         float bias, float* y) {
  using ops::window::PlaneOp;
  for (int64_t oh = 0; oh < g.out[1]; ++oh)
    for (int64_t ow = 0; ow < g.out[2]; ++ow) {
      double acc = op == PlaneOp::kMax ? -std::numeric_limits<double>::infinity() : op == PlaneOp::kConv ? bias : 0.0;
      int64_t valid = 0, padded = 0;
      for (int64_t kh = 0; kh < g.k[1]; ++kh)
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
          const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
          padded += (ih >= -g.pb[1] && ih < g.in[1] + g.pe[1] && iw >= -g.pb[2] && iw < g.in[2] + g.pe[2]) ? 1 : 0;
          if (ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) continue;
          ++valid;
          const double v = x[ih * g.in[2] + iw];
          if (op == PlaneOp::kConv) acc += static_cast<double>(w[kh * g.k[2] + kw]) * v;
          if (op == PlaneOp::kMax) acc = v > acc ? v : acc;  // NaN skipped
          if (op == PlaneOp::kAvg) acc += v;
        }
      if (op == PlaneOp::kAvg) {
        const int64_t den = cip ? padded : valid;
        acc = den > 0 ? acc / static_cast<double>(den) : 0.0;
      }
      y[oh * g.out[2] + ow] = static_cast<float>(acc);
    }
}

}  // namespace nxrt::testing
