#include "ops/conv_depthwise.h"

#include "ops/smallcnn_simd.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace nxrt::ops::dwconv {

namespace {


constexpr int64_t kMaxK = 7;

// One output plane. The input plane is first copied into a zero-padded scratch plane covering every
// window (stride 2: each row even columns first), so each output row is one check-free tap loop over
// its columns: y = bias + sum of K*K weight * shifted row (smallcnn::taps, AVX2 when available).
template <int K, int S>
void plane(const Geom3& g, const float* x, const float* w, float bias, float* y, bool avx2) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t pt = g.pb[1], pl = g.pb[2];
  const int64_t Hp = std::max(pt + IH, (OH - 1) * S + K), Wp = std::max(pl + IW, (OW - 1) * S + K);
  thread_local std::vector<float> scratch;
  const size_t need = static_cast<size_t>(Hp * Wp + Wp);
  if (scratch.size() < need) scratch.resize(need);
  float* buf = scratch.data();
  smallcnn::pad_plane(x, IH, IW, pt, pl, Hp, Wp, 0.f, S == 2, buf, buf + Hp * Wp);
  const int64_t ne = smallcnn::even_len(Wp);
  int64_t off[K * K];
  for (int kh = 0; kh < K; ++kh)
    for (int kw = 0; kw < K; ++kw) off[kh * K + kw] = kh * Wp + (S == 1 ? kw : (kw % 2 ? ne : 0) + kw / 2);
  const float* src[K * K];
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* b0 = buf + oh * S * Wp;
    for (int t = 0; t < K * K; ++t) src[t] = b0 + off[t];
    smallcnn::taps<smallcnn::TapOp::kFma>(avx2, src, w, K * K, bias, y + oh * OW, OW);
  }
}

using PlaneFn = void (*)(const Geom3&, const float*, const float*, float, float*, bool);

template <int K>
PlaneFn pick_k(int64_t s) {
  return s == 1 ? &plane<K, 1> : &plane<K, 2>;
}

}  // namespace

bool applies(const Geom3& g) {
  if (g.in[0] != 1 || g.out[0] != 1 || g.k[0] != 1 || g.pb[0] != 0) return false;
  if (g.k[1] != g.k[2] || (g.k[1] != 3 && g.k[1] != 5 && g.k[1] != 7)) return false;
  if (g.s[1] != g.s[2] || (g.s[1] != 1 && g.s[1] != 2)) return false;
  if (g.d[1] != 1 || g.d[2] != 1) return false;
  return g.k[1] <= kMaxK;
}

void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y) {
  PlaneFn fn = nullptr;
  switch (g.k[1]) {
    case 3: fn = pick_k<3>(g.s[1]); break;
    case 5: fn = pick_k<5>(g.s[1]); break;
    default: fn = pick_k<7>(g.s[1]); break;
  }
  fn(g, x, w, bias, y, smallcnn::has_avx2());
}

}  // namespace nxrt::ops::dwconv
