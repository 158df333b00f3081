#include "ops/conv_depthwise.h"

#include "ops/smallcnn_simd.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace nxrt::ops::dwconv {

namespace {


constexpr int64_t kMaxK = 7;

}  // namespace

// One output plane. The input plane is first copied into a zero-padded scratch plane covering every
// window (horizontal stride 2: each row even columns first), so each output row is one check-free tap
// loop over its columns: y = bias + sum of KH*KW weight * shifted row (smallcnn::taps, AVX2 when
// available).
bool applies(const Geom3& g) {
  if (g.in[0] != 1 || g.out[0] != 1 || g.k[0] != 1 || g.pb[0] != 0) return false;
  if (g.k[1] < 1 || g.k[1] > kMaxK || g.k[2] < 1 || g.k[2] > kMaxK || g.k[1] * g.k[2] < 2) return false;
  if (g.s[2] != 1 && g.s[2] != 2) return false;
  return g.d[1] == 1 && g.d[2] == 1 && g.out[1] > 0 && g.out[2] > 0;
}

void plane_f32(const Geom3& g, const float* x, const float* w, float bias, float* y) {
  const int64_t IH = g.in[1], IW = g.in[2], OH = g.out[1], OW = g.out[2];
  const int64_t KH = g.k[1], KW = g.k[2], SH = g.s[1], SW = g.s[2];
  const int64_t pt = g.pb[1], pl = g.pb[2];
  const int64_t Hp = std::max(pt + IH, (OH - 1) * SH + KH), Wp = std::max(pl + IW, (OW - 1) * SW + KW);
  thread_local std::vector<float> scratch;
  const size_t need = static_cast<size_t>(Hp * Wp + Wp);
  if (scratch.size() < need) scratch.resize(need);
  float* buf = scratch.data();
  smallcnn::pad_plane(x, IH, IW, pt, pl, Hp, Wp, 0.f, SW == 2, buf, buf + Hp * Wp);
  const int64_t ne = smallcnn::even_len(Wp);
  int64_t off[kMaxK * kMaxK];
  const int T = static_cast<int>(KH * KW);
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) off[kh * KW + kw] = kh * Wp + (SW == 1 ? kw : (kw % 2 ? ne : 0) + kw / 2);
  const float* src[kMaxK * kMaxK];
  const bool avx2 = smallcnn::has_avx2();
  for (int64_t oh = 0; oh < OH; ++oh) {
    const float* b0 = buf + oh * SH * Wp;
    for (int t = 0; t < T; ++t) src[t] = b0 + off[t];
    smallcnn::taps<smallcnn::TapOp::kFma>(avx2, src, w, T, bias, y + oh * OW, OW);
  }
}

}  // namespace nxrt::ops::dwconv
