#include "ops/conv/depthwise.h"

#include "ops/window/window_engine.h"

#include <algorithm>
#include <vector>

namespace nxrt::ops::dwconv {

bool applies(const Geom3& g) { return window::TapPlan::supports(g); }

namespace {

// Geometries the engine refuses (callers check `applies` first): the plain per-output definition.
void plane_naive(const Geom3& g, const float* x, const float* w, float bias, float* y) {
  for (int64_t oh = 0; oh < g.out[1]; ++oh)
    for (int64_t ow = 0; ow < g.out[2]; ++ow) {
      float acc = bias;
      for (int64_t kh = 0; kh < g.k[1]; ++kh) {
        const int64_t ih = oh * g.s[1] - g.pb[1] + kh * g.d[1];
        if (ih < 0 || ih >= g.in[1]) continue;
        for (int64_t kw = 0; kw < g.k[2]; ++kw) {
          const int64_t iw = ow * g.s[2] - g.pb[2] + kw * g.d[2];
          if (iw >= 0 && iw < g.in[2]) acc += w[kh * g.k[2] + kw] * x[ih * g.in[2] + iw];
        }
      }
      y[oh * g.out[2] + ow] = acc;
    }
}

}  // namespace

std::shared_ptr<const window::TapPlan> plan_f32(const Geom3& g, ep::IsaTier isa) {
  auto plan = std::make_shared<window::TapPlan>();
  if (!plan->prepare(g, window::PlaneOp::kConv, false, /*own_buffers=*/false, isa)) return nullptr;
  return plan;
}

int64_t scratch_floats(const window::TapPlan* plan) { return plan ? plan->scratch_floats() : 0; }

void planes_f32(const window::TapPlan* plan, float* scratch, const Geom3& g, int64_t C, int64_t M, const float* x,
                const float* w, const float* bias, float* y, int64_t p0, int64_t p1, int64_t shuffle) {
  if (p1 <= p0) return;
  const int64_t in_size = g.in_size(), out_size = g.out_size(), kvol = g.k[1] * g.k[2];
  const int64_t mult = C > 0 ? M / C : 1;
  const bool shuffled = shuffle > 1;
  // Input channel of input-channel index c (the shuffle's map, or c itself).
  auto in_channel = [&](int64_t c) { return shuffled ? shuffled_channel(c, C, shuffle) : c; };
  if (plan && mult == 1) {
    // Runs of planes inside one image: consecutive input planes, weights and biases; through a shuffle,
    // the run's input planes listed (up to 64 a run).
    constexpr int64_t kListed = 64;
    const float* planes[kListed];
    for (int64_t p = p0; p < p1;) {
      const int64_t n = p / M, m = p % M, cnt = std::min({p1 - p, M - m, shuffled ? kListed : M});
      const float* xn = x + n * C * in_size;
      float* yp = y + p * out_size;
      const float* bp = bias ? bias + m : nullptr;
      if (shuffled) {
        for (int64_t i = 0; i < cnt; ++i) planes[i] = xn + in_channel(m + i) * in_size;
        plan->run_planes_at(scratch, planes, w + m * kvol, kvol, bp, true, yp, cnt);
      } else {
        plan->run_planes_in(scratch, xn + m * in_size, in_size, w + m * kvol, kvol, bp, true, yp, cnt);
      }
      p += cnt;
    }
    return;
  }
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t n = p / M, m = p % M;
    const float* xp = x + (n * C + in_channel(m / mult)) * in_size;
    const float b = bias ? bias[m] : 0.f;
    if (plan) {
      plan->run_planes_in(scratch, xp, in_size, w + m * kvol, kvol, &b, false, y + p * out_size, 1);
    } else {
      plane_naive(g, xp, w + m * kvol, b, y + p * out_size);
    }
  }
}

void planes_f32(const Geom3& g, int64_t C, int64_t M, const float* x, const float* w, const float* bias, float* y,
                int64_t p0, int64_t p1, int64_t shuffle) {
  const std::shared_ptr<const window::TapPlan> plan = plan_f32(g);
  std::vector<float> scratch(static_cast<size_t>(scratch_floats(plan.get())));
  planes_f32(plan.get(), scratch.data(), g, C, M, x, w, bias, y, p0, p1, shuffle);
}

void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y) {
  planes_f32(g, 1, 1, x, w, &bias, y, 0, 1);
}

}  // namespace nxrt::ops::dwconv
