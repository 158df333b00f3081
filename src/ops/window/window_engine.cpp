#include "ops/window/window_engine.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "ops/window/window_simd.h"

namespace nxrt::ops::window {

namespace {

constexpr int kGroup = 8;  // jobs whose accumulators stay in registers together
constexpr int64_t kDoubleBufferMax = int64_t{1} << 16;  // floats per padded plane (256 KB)

void make_key(const Geom3& g, PlaneOp op, bool cip, ep::IsaTier tier, int64_t* k) {
  const int64_t v[17] = {g.in[1], g.in[2], g.out[1], g.out[2], g.k[1], g.k[2],  g.s[1],               g.s[2],
                         g.d[1],  g.d[2],  g.pb[1],  g.pb[2],  g.pe[1], g.pe[2], static_cast<int64_t>(op), cip ? 1 : 0,
                         static_cast<int64_t>(tier)};
  std::memcpy(k, v, sizeof(v));
}

// Extent of the padded plane: every input cell and every window tap.
void padded_dims(const Geom3& g, int64_t* Hp, int64_t* Wp) {
  *Hp = std::max(g.pb[1] + g.in[1], (g.out[1] - 1) * g.s[1] + (g.k[1] - 1) * g.d[1] + 1);
  *Wp = std::max(g.pb[2] + g.in[2], (g.out[2] - 1) * g.s[2] + (g.k[2] - 1) * g.d[2] + 1);
}

// What one run needs, as plain pointers for the job loops.
struct JobView {
  const float* buf;
  const int64_t* off;
  int T;
  const int32_t* jb;
  const int32_t* jy;
  const int32_t* jn;
  int64_t nj;     // a multiple of kGroup / 2
  int64_t nfull;  // jobs [0, nfull) store all their lanes (8 or 16) into y
  int64_t tail0;  // the first output of the later jobs (stored through a stack buffer); total when none
  int64_t total;  // outputs per plane
  const float* cnt;
};

template <PlaneOp op>
void jobs_plain(const JobView& v, const float* w, float bias, float* __restrict y) {
  const float init = op == PlaneOp::kConv ? bias
                     : op == PlaneOp::kMax ? -std::numeric_limits<float>::infinity()
                                           : 0.f;
  for (int64_t j = 0; j < v.nj; ++j) {
    const float* b = v.buf + v.jb[j];
    for (int32_t l = 0; l < v.jn[j]; ++l) {
      float acc = init;
      for (int t = 0; t < v.T; ++t) {
        const float x = b[l + v.off[t]];
        if constexpr (op == PlaneOp::kConv) acc += w[t] * x;
        if constexpr (op == PlaneOp::kMax) acc = x > acc ? x : acc;
        if constexpr (op == PlaneOp::kAvg) acc += x;
      }
      if constexpr (op == PlaneOp::kAvg) acc /= v.cnt[v.jy[j] + l];
      y[v.jy[j] + l] = acc;
    }
  }
}

void copy_row_plain(const float* s, float* d, int64_t n) {
  if (n > 0) std::memcpy(d, s, sizeof(float) * static_cast<size_t>(n));
}
void split2_plain(const float* s, int64_t n, float* A, float* B) {
  for (int64_t i = 0; 2 * i < n; ++i) A[i] = s[2 * i];
  for (int64_t i = 0; 2 * i + 1 < n; ++i) B[i] = s[2 * i + 1];
}

#ifdef NXRT_SC_X86
alignas(32) const int32_t kMaskTab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

NXRT_SC_AVX2 inline __m256i first_lanes(int64_t n) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTab + 8 - n));
}

template <PlaneOp op>
NXRT_SC_AVX2 inline __m256 step(__m256 acc, const float* p, __m256 wv) {
  if constexpr (op == PlaneOp::kConv) return _mm256_fmadd_ps(wv, _mm256_loadu_ps(p), acc);
  if constexpr (op == PlaneOp::kMax) return _mm256_max_ps(_mm256_loadu_ps(p), acc);  // v > acc ? v : acc
  return _mm256_add_ps(acc, _mm256_loadu_ps(p));
}

// One group of G jobs [j, j + G) with its accumulators in registers over all taps. In job order: a
// row's extra lanes are overwritten by the later jobs that own them; jobs from nfull on (the plane's
// last, partial vectors) store into `tail` (output tail0 at tail[0]).
template <PlaneOp op, int G>
NXRT_SC_AVX2 __attribute__((always_inline)) inline void job_group(
    int64_t j, int T, const float* __restrict buf, const int64_t* __restrict off, const int32_t* __restrict jb,
    const int32_t* __restrict jy, const float* __restrict cnt, const float* __restrict w, __m256 init,
    int64_t nfull, int64_t tail0, float* __restrict y, float* __restrict tail) {
  const float* b[G];
  __m256 a[G];
#pragma GCC unroll 8
  for (int k = 0; k < G; ++k) {
    b[k] = buf + jb[j + k];
    a[k] = init;
  }
  for (int t = 0; t < T; ++t) {
    const int64_t o = off[t];
    __m256 wv = _mm256_setzero_ps();
    if constexpr (op == PlaneOp::kConv) wv = _mm256_broadcast_ss(w + t);
#pragma GCC unroll 8
    for (int k = 0; k < G; ++k) a[k] = step<op>(a[k], b[k] + o, wv);
  }
  if constexpr (op == PlaneOp::kAvg) {
#pragma GCC unroll 8
    for (int k = 0; k < G; ++k) a[k] = _mm256_div_ps(a[k], _mm256_loadu_ps(cnt + jy[j + k]));
  }
  if (j + G <= nfull) {
#pragma GCC unroll 8
    for (int k = 0; k < G; ++k) _mm256_storeu_ps(y + jy[j + k], a[k]);
  } else {
    for (int k = 0; k < G; ++k) {
      float* d = j + k < nfull ? y + jy[j + k] : tail + (jy[j + k] - tail0);
      _mm256_storeu_ps(d, a[k]);
    }
  }
}

// The jobs of one plane: groups of kGroup (8 independent accumulator chains hide the FMA latency; 4
// left the loop latency-bound at ~3x its throughput bound), then one group of 4 when the job count (a
// multiple of 4) leaves one (14x14 planes: 28 jobs).
template <PlaneOp op>
NXRT_SC_AVX2 void jobs_avx2(const JobView& v, const float* w, float bias, float* __restrict y) {
  const int T = v.T;
  const float* __restrict buf = v.buf;
  const int64_t* __restrict off = v.off;
  const int32_t* __restrict jb = v.jb;
  const int32_t* __restrict jy = v.jy;
  const float* __restrict cnt = v.cnt;
  const int64_t nfull = v.nfull, nj = v.nj, tail0 = v.tail0;
  const __m256 init = op == PlaneOp::kConv  ? _mm256_set1_ps(bias)
                      : op == PlaneOp::kMax ? _mm256_set1_ps(-std::numeric_limits<float>::infinity())
                                            : _mm256_setzero_ps();
  alignas(32) float tail[24];
  int64_t j = 0;
  for (; j + kGroup <= nj; j += kGroup)
    job_group<op, kGroup>(j, T, buf, off, jb, jy, cnt, w, init, nfull, tail0, y, tail);
  if (j < nj) job_group<op, kGroup / 2>(j, T, buf, off, jb, jy, cnt, w, init, nfull, tail0, y, tail);
  for (int64_t i = tail0; i < v.total; ++i) y[i] = tail[i - tail0];
}

#define NXRT_SC_AVX512 __attribute__((target("avx512f,avx512vl,avx2,fma")))

template <PlaneOp op>
NXRT_SC_AVX512 inline __m512 step512(__m512 acc, const float* p, __m512 wv) {
  if constexpr (op == PlaneOp::kConv) return _mm512_fmadd_ps(wv, _mm512_loadu_ps(p), acc);
  if constexpr (op == PlaneOp::kMax) return _mm512_max_ps(_mm512_loadu_ps(p), acc);  // v > acc ? v : acc
  return _mm512_add_ps(acc, _mm512_loadu_ps(p));
}

// job_group with 16-float jobs: the same taps in the same order per lane; the plane's last, partial
// jobs (from nfull on) store their jn lanes through a mask.
template <PlaneOp op, int G>
NXRT_SC_AVX512 __attribute__((always_inline)) inline void job_group512(
    int64_t j, int T, const float* __restrict buf, const int64_t* __restrict off, const int32_t* __restrict jb,
    const int32_t* __restrict jy, const int32_t* __restrict jn, const float* __restrict cnt,
    const float* __restrict w, __m512 init, int64_t nfull, float* __restrict y) {
  const float* b[G];
  __m512 a[G];
#pragma GCC unroll 8
  for (int k = 0; k < G; ++k) {
    b[k] = buf + jb[j + k];
    a[k] = init;
  }
  for (int t = 0; t < T; ++t) {
    const int64_t o = off[t];
    __m512 wv = _mm512_setzero_ps();
    if constexpr (op == PlaneOp::kConv) wv = _mm512_set1_ps(w[t]);
#pragma GCC unroll 8
    for (int k = 0; k < G; ++k) a[k] = step512<op>(a[k], b[k] + o, wv);
  }
  if constexpr (op == PlaneOp::kAvg) {
#pragma GCC unroll 8
    for (int k = 0; k < G; ++k) a[k] = _mm512_div_ps(a[k], _mm512_loadu_ps(cnt + jy[j + k]));
  }
  if (j + G <= nfull) {
#pragma GCC unroll 8
    for (int k = 0; k < G; ++k) _mm512_storeu_ps(y + jy[j + k], a[k]);
  } else {
    for (int k = 0; k < G; ++k) {
      if (j + k < nfull) {
        _mm512_storeu_ps(y + jy[j + k], a[k]);
      } else {
        _mm512_mask_storeu_ps(y + jy[j + k], static_cast<__mmask16>((1u << jn[j + k]) - 1u), a[k]);
      }
    }
  }
}

template <PlaneOp op>
NXRT_SC_AVX512 void jobs_avx512(const JobView& v, const float* w, float bias, float* __restrict y) {
  const __m512 init = op == PlaneOp::kConv  ? _mm512_set1_ps(bias)
                      : op == PlaneOp::kMax ? _mm512_set1_ps(-std::numeric_limits<float>::infinity())
                                            : _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + kGroup <= v.nj; j += kGroup)
    job_group512<op, kGroup>(j, v.T, v.buf, v.off, v.jb, v.jy, v.jn, v.cnt, w, init, v.nfull, y);
  if (j < v.nj) job_group512<op, kGroup / 2>(j, v.T, v.buf, v.off, v.jb, v.jy, v.jn, v.cnt, w, init, v.nfull, y);
}

// d[0, n) = s[0, n). A row shorter than a vector is stored as one full vector with `pad` in the lanes
// past n: the cells after the row are pad cells or cells a later row rewrites (fill goes forward).
// `overread`: s[0, 8) may be read even when n < 8 (more of the plane follows).
NXRT_SC_AVX2 inline void copy_row_avx2(const float* s, float* d, int64_t n, float pad, bool overread) {
  if (n >= 8) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_loadu_ps(s + i));
    if (i < n) _mm256_storeu_ps(d + n - 8, _mm256_loadu_ps(s + n - 8));  // overlaps, stays inside [0, n)
  } else if (n > 0) {
    const __m256i m = first_lanes(n);
    const __m256 v = overread ? _mm256_loadu_ps(s) : _mm256_maskload_ps(s, m);
    _mm256_storeu_ps(d, _mm256_blendv_ps(_mm256_set1_ps(pad), v, _mm256_castsi256_ps(m)));
  }
}

NXRT_SC_AVX2 inline __m256 even_lanes(__m256 a, __m256 b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
}
NXRT_SC_AVX2 inline __m256 odd_lanes(__m256 a, __m256 b) {
  return _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

// A[i] = s[2i] (ceil(n/2) elements), B[i] = s[2i+1] (floor(n/2)). The last partial vectors are stored
// whole with `pad` past the data, like copy_row_avx2: the one of the region lower in memory (`a_first`:
// A lies below B) first, so whatever its extra lanes cover is rewritten by the stores after it.
// `overread`: s[0, n rounded up to 16) may be read.
NXRT_SC_AVX2 inline void split2_avx2(const float* s, int64_t n, float* A, float* B, bool a_first, float pad,
                                     bool overread) {
  const int64_t full = n / 16 * 16, r = n - full;
  __m256 ev = _mm256_setzero_ps(), od = _mm256_setzero_ps();
  if (r > 0) {
    const __m256i ma = first_lanes(std::min<int64_t>(r, 8)), mb = first_lanes(std::max<int64_t>(r - 8, 0));
    const __m256 a = overread ? _mm256_loadu_ps(s + full) : _mm256_maskload_ps(s + full, ma);
    const __m256 b = overread ? _mm256_loadu_ps(s + full + 8) : _mm256_maskload_ps(s + full + 8, mb);
    const __m256 p = _mm256_set1_ps(pad);
    ev = _mm256_blendv_ps(p, even_lanes(a, b), _mm256_castsi256_ps(first_lanes((r + 1) / 2)));
    od = _mm256_blendv_ps(p, odd_lanes(a, b), _mm256_castsi256_ps(first_lanes(r / 2)));
    if (a_first) {
      _mm256_storeu_ps(A + full / 2, ev);
    } else {
      _mm256_storeu_ps(B + full / 2, od);
    }
  }
  for (int64_t i = 0; i < full; i += 16) {
    const __m256 a = _mm256_loadu_ps(s + i), b = _mm256_loadu_ps(s + i + 8);
    _mm256_storeu_ps(A + i / 2, even_lanes(a, b));
    _mm256_storeu_ps(B + i / 2, odd_lanes(a, b));
  }
  if (r > 0) {
    if (a_first) {
      _mm256_storeu_ps(B + full / 2, od);
    } else {
      _mm256_storeu_ps(A + full / 2, ev);
    }
  }
}

// The interior rows of one plane into the padded buffer (TapPlan::fill's AVX2 body).
NXRT_SC_AVX2 void fill_avx2(const float* x, int64_t IH, int64_t IW, float* buf, int64_t Wp, int64_t first_row,
                            float* A0, float* B0, int64_t pl, int64_t SW, float pad) {
  const int64_t plane = IH * IW;
  const int64_t span = SW == 1 ? 8 : (IW + 15) / 16 * 16;  // what a row's vectors may read
  for (int64_t ih = 0; ih < IH; ++ih) {
    const float* s = x + ih * IW;
    const bool overread = ih * IW + span <= plane;
    const int64_t r = (first_row + ih) * Wp;
    if (SW == 1) {
      copy_row_avx2(s, buf + r + pl, IW, pad, overread);
    } else {
      split2_avx2(s, IW, A0 + r, B0 + r, A0 < B0, pad, overread);
    }
  }
}
#endif

}  // namespace

bool TapPlan::supports(const Geom3& g) {
  if (g.in[0] != 1 || g.out[0] != 1 || g.k[0] != 1 || g.pb[0] != 0 || g.pe[0] != 0) return false;
  for (int a = 1; a < 3; ++a) {
    if (g.k[a] < 1 || g.s[a] < 1 || g.d[a] < 1 || g.pb[a] < 0 || g.pe[a] < 0 || g.out[a] < 1 || g.in[a] < 0) {
      return false;
    }
  }
  if (g.k[1] * g.k[2] > kMaxTaps) return false;
  int64_t Hp = 0, Wp = 0;
  padded_dims(g, &Hp, &Wp);
  // Job indices are int32: keep the padded plane and its slack well inside that.
  return Hp < (int64_t{1} << 20) && Wp < (int64_t{1} << 20) && Hp * Wp + 2 * Wp + 64 < (int64_t{1} << 30);
}

bool TapPlan::prepare(const Geom3& g, PlaneOp op, bool cip, bool own_buffers, ep::IsaTier isa) {
  ep::IsaTier tier = ep::IsaTier::kScalar;
#ifdef NXRT_SC_X86
  // 16-float jobs only for rows of 16+ outputs: narrower rows would load twice the bytes for the same
  // job count (Zen 5, 832x7x7 3x3/1 max: 49.6 us at 16 floats vs 38.5 at 8; 480x14x14 53-70 vs 52-55;
  // 192x28x28: 76-80 vs 83-107).
  if (isa >= ep::IsaTier::kAvx512 && ep::cpu_isa_tier() >= ep::IsaTier::kAvx512 && g.out[2] >= 16) {
    tier = ep::IsaTier::kAvx512;
  } else if (isa >= ep::IsaTier::kAvx2 && has_avx2()) {
    tier = ep::IsaTier::kAvx2;
  }
#endif
  int64_t key[17];
  make_key(g, op, op == PlaneOp::kAvg && cip, tier, key);
  if (built_ && std::memcmp(key, key_, sizeof(key)) == 0 && own_buffers == !buf_.empty()) return true;
  built_ = false;
  if (!supports(g)) return false;
  std::memcpy(key_, key, sizeof(key));
  op_ = op;
  cip_ = op == PlaneOp::kAvg && cip;
  tier_ = tier;
  W_ = tier == ep::IsaTier::kAvx512 ? 16 : 8;
  IH_ = g.in[1];
  IW_ = g.in[2];
  OH_ = g.out[1];
  OW_ = g.out[2];
  pt_ = g.pb[1];
  pl_ = g.pb[2];
  SW_ = g.s[2];
  padded_dims(g, &Hp_, &Wp_);
  const int64_t KH = g.k[1], KW = g.k[2], SH = g.s[1], DH = g.d[1], DW = g.d[2];
  T_ = static_cast<int>(KH * KW);

  phase_start_.assign(static_cast<size_t>(SW_), 0);
  for (int64_t r = 1; r < SW_; ++r) {
    const int64_t prev = r - 1;
    const int64_t len = prev < Wp_ ? (Wp_ - 1 - prev) / SW_ + 1 : 0;
    phase_start_[r] = phase_start_[r - 1] + len;
  }
  off_.resize(static_cast<size_t>(T_));
  int64_t max_off = 0;
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw) {
      const int64_t c = kw * DW;
      const int64_t o = kh * DH * Wp_ + phase_start_[c % SW_] + c / SW_;
      off_[kh * KW + kw] = o;
      max_off = std::max(max_off, o);
    }

  job_buf_.clear();
  job_y_.clear();
  job_n_.clear();
  const int64_t total = OH_ * OW_;
  int64_t max_jb = 0;
  for (int64_t oh = 0; oh < OH_; ++oh)
    for (int64_t c = 0; c < OW_; c += W_) {
      const int64_t jb = oh * SH * Wp_ + c, jy = oh * OW_ + c;
      job_buf_.push_back(static_cast<int32_t>(jb));
      job_y_.push_back(static_cast<int32_t>(jy));
      job_n_.push_back(static_cast<int32_t>(std::min<int64_t>(W_, total - jy)));
      max_jb = std::max(max_jb, jb);
    }
  // Whole groups (8, or 4 at the end): the last job repeated (an idempotent re-store). Plans of 5-7
  // jobs take a full 8 (one group, not a 4 and a padded 4).
  const size_t unit = job_buf_.size() % kGroup > kGroup / 2 || job_buf_.size() < kGroup ? kGroup : kGroup / 2;
  while (job_buf_.size() % unit != 0) {
    job_buf_.push_back(job_buf_.back());
    job_y_.push_back(job_y_.back());
    job_n_.push_back(job_n_.back());
  }
  nfull_ = 0;
  while (nfull_ < static_cast<int64_t>(job_n_.size()) && job_n_[nfull_] == W_) ++nfull_;
  tail0_ = nfull_ < static_cast<int64_t>(job_n_.size()) ? job_y_[nfull_] : total;
  const float pad = op == PlaneOp::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  // Two padded planes: run_planes fills the next plane while the current one is computed.
  bufsz_ = (std::max(Hp_ * Wp_, max_jb + max_off + W_) + W_ + 15) / 16 * 16;
  // Large planes get one buffer (each plane copied right before it is computed): a per-thread plan
  // should not hold two copies of an image-sized plane. A fresh vector, so a plan that served a large
  // plane gives that memory back.
  nbuf_ = bufsz_ <= kDoubleBufferMax ? 2 : 1;
  if (own_buffers) {
    std::vector<float>(static_cast<size_t>(nbuf_ * bufsz_), pad).swap(buf_);
  } else {
    std::vector<float>().swap(buf_);
  }

  cnt_.clear();
  if (op == PlaneOp::kAvg) {
    cnt_.assign(static_cast<size_t>(total + W_), 1.f);
    for (int64_t oh = 0; oh < OH_; ++oh) {
      const int64_t sh = oh * SH - pt_;
      const int64_t nh = cip_ ? taps_inside(sh, KH, DH, -pt_, IH_ + g.pe[1]) : taps_inside(sh, KH, DH, 0, IH_);
      for (int64_t ow = 0; ow < OW_; ++ow) {
        const int64_t sw = ow * SW_ - pl_;
        const int64_t nw = cip_ ? taps_inside(sw, KW, DW, -pl_, IW_ + g.pe[2]) : taps_inside(sw, KW, DW, 0, IW_);
        // No tap inside: every tap reads a pad 0, so the sum is 0 and 0 / 1 gives the reference's 0.
        cnt_[oh * OW_ + ow] = nh * nw > 0 ? static_cast<float>(nh * nw) : 1.f;
      }
    }
  }
  built_ = true;
  return true;
}

void TapPlan::fill(const float* x, bool vec, float* bufs, int which) const {
  float* buf = bufs + which * bufsz_;
  const float pad = op_ == PlaneOp::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
#ifdef NXRT_SC_X86
  if (vec && SW_ <= 2) {
    // Input column ix sits at padded column pl + ix: with pl even the input's even columns go to phase
    // 0, else to phase 1 (A: where the even input columns go, B: the odd ones).
    float* A = SW_ == 1 ? buf : pl_ % 2 == 0 ? buf + phase_start_[0] + pl_ / 2 : buf + phase_start_[1] + (pl_ - 1) / 2;
    float* B = SW_ == 1 ? buf : pl_ % 2 == 0 ? buf + phase_start_[1] + pl_ / 2 : buf + phase_start_[0] + (pl_ + 1) / 2;
    fill_avx2(x, IH_, IW_, buf, Wp_, pt_, A, B, pl_, SW_, pad);
    return;
  }
#endif
  for (int64_t ih = 0; ih < IH_; ++ih) {
    const float* s = x + ih * IW_;
    float* row = buf + (pt_ + ih) * Wp_;
    if (SW_ == 1) {
      copy_row_plain(s, row + pl_, IW_);
    } else if (SW_ == 2) {
      float* A = pl_ % 2 == 0 ? row + phase_start_[0] + pl_ / 2 : row + phase_start_[1] + (pl_ - 1) / 2;
      float* B = pl_ % 2 == 0 ? row + phase_start_[1] + pl_ / 2 : row + phase_start_[0] + (pl_ + 1) / 2;
      split2_plain(s, IW_, A, B);
    } else {
      for (int64_t ix = 0; ix < IW_; ++ix) {
        const int64_t q = pl_ + ix;
        row[phase_start_[q % SW_] + q / SW_] = s[ix];
      }
    }
  }
}

void TapPlan::jobs(const float* buf, const float* w, float bias, float* y, bool vec) const {
  const JobView v{buf,         off_.data(), T_,     job_buf_.data(), job_y_.data(), job_n_.data(),
                  static_cast<int64_t>(job_buf_.size()), nfull_, tail0_, OH_ * OW_, cnt_.empty() ? nullptr : cnt_.data()};
#ifdef NXRT_SC_X86
  if (vec && tier_ == ep::IsaTier::kAvx512) {
    switch (op_) {
      case PlaneOp::kConv: return jobs_avx512<PlaneOp::kConv>(v, w, bias, y);
      case PlaneOp::kMax: return jobs_avx512<PlaneOp::kMax>(v, w, bias, y);
      case PlaneOp::kAvg: return jobs_avx512<PlaneOp::kAvg>(v, w, bias, y);
    }
  }
  if (vec) {
    switch (op_) {
      case PlaneOp::kConv: return jobs_avx2<PlaneOp::kConv>(v, w, bias, y);
      case PlaneOp::kMax: return jobs_avx2<PlaneOp::kMax>(v, w, bias, y);
      case PlaneOp::kAvg: return jobs_avx2<PlaneOp::kAvg>(v, w, bias, y);
    }
  }
#endif
  switch (op_) {
    case PlaneOp::kConv: return jobs_plain<PlaneOp::kConv>(v, w, bias, y);
    case PlaneOp::kMax: return jobs_plain<PlaneOp::kMax>(v, w, bias, y);
    case PlaneOp::kAvg: return jobs_plain<PlaneOp::kAvg>(v, w, bias, y);
  }
}

void TapPlan::run(const float* x, const float* w, float bias, float* y, bool vec) {
  run_planes(x, 0, w, 0, &bias, false, y, 1, vec);
}

void TapPlan::run_planes(const float* x, int64_t x_stride, const float* w, int64_t w_stride, const float* bias,
                         bool bias_per_plane, float* y, int64_t count, bool vec) {
  if (!built_ || count <= 0 || buf_.empty()) return;
  run_on(buf_.data(), x, x_stride, nullptr, w, w_stride, bias, bias_per_plane, y, count, vec);
}

// The scratch's contents are unspecified: its pad cells are written once per run (in the buffers the
// run uses: one plane uses one).
void TapPlan::reset_scratch(float* scratch, int64_t count) const {
  const float pad = op_ == PlaneOp::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
  std::fill(scratch, scratch + std::min<int64_t>(nbuf_, count) * bufsz_, pad);
}

void TapPlan::run_planes_in(float* scratch, const float* x, int64_t x_stride, const float* w, int64_t w_stride,
                            const float* bias, bool bias_per_plane, float* y, int64_t count, bool vec) const {
  if (!built_ || count <= 0) return;
  reset_scratch(scratch, count);
  run_on(scratch, x, x_stride, nullptr, w, w_stride, bias, bias_per_plane, y, count, vec);
}

void TapPlan::run_planes_at(float* scratch, const float* const* x_planes, const float* w, int64_t w_stride,
                            const float* bias, bool bias_per_plane, float* y, int64_t count, bool vec) const {
  if (!built_ || count <= 0) return;
  reset_scratch(scratch, count);
  run_on(scratch, nullptr, 0, x_planes, w, w_stride, bias, bias_per_plane, y, count, vec);
}

void TapPlan::run_on(float* bufs, const float* x, int64_t x_stride, const float* const* x_planes, const float* w,
                     int64_t w_stride, const float* bias, bool bias_per_plane, float* y, int64_t count,
                     bool vec) const {
  // The plan's tier (chosen at prepare); the AVX2 plane copy serves the AVX-512 tier too.
  const bool avx2 = vec && tier_ >= ep::IsaTier::kAvx2;
  auto plane = [&](int64_t i) { return x_planes ? x_planes[i] : x + i * x_stride; };
  fill(plane(0), avx2, bufs, 0);
  for (int64_t i = 0; i < count; ++i) {
    // The next plane's copy goes first: the current plane's loads then never wait on just-stored rows.
    const int cur = nbuf_ == 2 ? static_cast<int>(i & 1) : 0;
    if (nbuf_ == 2 && i + 1 < count) fill(plane(i + 1), avx2, bufs, 1 - cur);
    if (nbuf_ == 1 && i > 0) fill(plane(i), avx2, bufs, 0);
    const float b = bias ? bias[bias_per_plane ? i : 0] : 0.f;
    jobs(bufs + cur * bufsz_, w ? w + i * w_stride : nullptr, b, y + i * OH_ * OW_, avx2);
  }
}


}  // namespace nxrt::ops::window
