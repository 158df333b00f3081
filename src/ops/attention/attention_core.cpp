// The scaled-dot-product attention core: reference loops and the float32 GEMM path.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ep/thread_pool.h"
#include "ops/attention/attention_util.h"
#include "ops/gemm/gemm.h"

namespace nxrt::ops {
namespace {

// Keys j >= row_limit(...) are masked out for query row i of batch b (causal frontier, nonpad
// length, columns past a short mask); the rest get the additive mask.
template <typename C>
inline int64_t row_limit(const AttnProblem<C>& p, int64_t b, int64_t i) {
  int64_t lim = p.T;
  if (p.causal) lim = std::min(lim, std::max<int64_t>(0, i + (p.causal_offset ? p.causal_offset[b] : 0) + 1));
  if (p.nonpad) lim = std::min(lim, std::max<int64_t>(0, p.nonpad[b]));
  if (p.mask) lim = std::min(lim, p.mask_len);
  return lim;
}

// Scores row s[0..T) (already scaled) -> softcap, bias, softmax in place; writes the requested
// intermediate to qk_row (may be null). A = accumulation type for the softmax sum.
template <typename C, typename A>
void finish_row(const AttnProblem<C>& p, int64_t b, int64_t h, int64_t i, C* s, C* qk_row) {
  const int64_t T = p.T;
  const C inf = std::numeric_limits<C>::infinity();
  const int64_t lim = row_limit(p, b, i);
  if (qk_row && p.qk_mode == 0) std::copy(s, s + T, qk_row);
  if (p.softcap > 0) {
    const C cap = p.softcap, inv = C(1) / p.softcap;
    const int64_t n = (qk_row && p.qk_mode == 1) ? T : lim;  // masked columns only matter for output mode 1
    for (int64_t j = 0; j < n; ++j) s[j] = cap * std::tanh(s[j] * inv);
  }
  if (qk_row && p.qk_mode == 1) std::copy(s, s + T, qk_row);
  if (p.mask) {
    const C* m = p.mask + b * p.mask_sb + h * p.mask_sh + i * p.mask_si;
    for (int64_t j = 0; j < lim; ++j) s[j] += m[j];
  }
  for (int64_t j = lim; j < T; ++j) s[j] = -inf;
  if (qk_row && p.qk_mode == 2) std::copy(s, s + T, qk_row);
  C mx = -inf;
  bool nan = false;
  for (int64_t j = 0; j < lim; ++j) {
    if (std::isnan(s[j])) nan = true;
    mx = std::max(mx, s[j]);
  }
  if (!nan && mx == -inf) {
    std::fill(s, s + T, C(0));  // fully masked row: no key takes part
  } else {
    A sum = 0;
    for (int64_t j = 0; j < lim; ++j) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    const C inv = static_cast<C>(A(1) / sum);
    for (int64_t j = 0; j < lim; ++j) s[j] *= inv;
    std::fill(s + lim, s + T, C(0));
  }
  if (qk_row && p.qk_mode == 3) std::copy(s, s + T, qk_row);
}

// The reference row: every rule applied element by element, as the spec states it.
template <typename C>
void reference_row(const AttnProblem<C>& p, int64_t b, int64_t h, int64_t i, C* s, C* qk_row) {
  const int64_t T = p.T;
  const C inf = std::numeric_limits<C>::infinity();
  for (int64_t j = 0; j < T; ++j) {
    C x = s[j];
    if (qk_row && p.qk_mode == 0) qk_row[j] = x;
    if (p.softcap > 0) x = static_cast<C>(double(p.softcap) * std::tanh(double(x) / double(p.softcap)));
    if (qk_row && p.qk_mode == 1) qk_row[j] = x;
    bool out = false;
    if (p.mask) {
      if (j < p.mask_len) x += p.mask[b * p.mask_sb + h * p.mask_sh + i * p.mask_si + j];
      else out = true;
    }
    if (p.causal && j > i + (p.causal_offset ? p.causal_offset[b] : 0)) out = true;
    if (p.nonpad && j >= p.nonpad[b]) out = true;
    if (out) x = -inf;
    if (qk_row && p.qk_mode == 2) qk_row[j] = x;
    s[j] = x;
  }
  double mx = -INFINITY;
  bool nan = false;
  for (int64_t j = 0; j < T; ++j) {
    nan = nan || std::isnan(s[j]);
    mx = std::max(mx, double(s[j]));
  }
  if (!nan && mx == -INFINITY) {
    for (int64_t j = 0; j < T; ++j) s[j] = 0;  // no key takes part: zero probabilities
  } else {
    double sum = 0;
    std::vector<double> e(static_cast<size_t>(T));
    for (int64_t j = 0; j < T; ++j) sum += (e[j] = std::exp(double(s[j]) - mx));
    for (int64_t j = 0; j < T; ++j) s[j] = static_cast<C>(e[j] / sum);
  }
  if (qk_row && p.qk_mode == 3) std::copy(s, s + T, qk_row);
}

template <typename C>
void reference_impl(const AttnProblem<C>& p) {
  const int64_t group = p.Hq / p.Hkv;
  std::vector<C> s(static_cast<size_t>(p.T));
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t h = 0; h < p.Hq; ++h) {
      const int64_t hk = h / group;
      const C* kb = p.k + (b * p.Hkv + hk) * p.T * p.D;
      const C* vb = p.v + (b * p.Hkv + hk) * p.T * p.Dv;
      for (int64_t i = 0; i < p.Sq; ++i) {
        const C* qi = p.q + ((b * p.Hq + h) * p.Sq + i) * p.D;
        for (int64_t j = 0; j < p.T; ++j) {
          double acc = 0;
          for (int64_t d = 0; d < p.D; ++d) acc += double(qi[d]) * double(kb[j * p.D + d]);
          s[static_cast<size_t>(j)] = static_cast<C>(acc * double(p.scale));
        }
        const int64_t row = (b * p.Hq + h) * p.Sq + i;
        reference_row<C>(p, b, h, i, s.data(), p.qk_out ? p.qk_out + row * p.T : nullptr);
        C* yi = p.y + row * p.Dv;
        for (int64_t e = 0; e < p.Dv; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < p.T; ++j) {
            const double w = double(s[static_cast<size_t>(j)]);
            if (w != 0) acc += w * double(vb[j * p.Dv + e]);  // a masked key's value (even inf/NaN) adds nothing
          }
          yi[e] = static_cast<C>(acc);
        }
      }
    }
  }
}

}  // namespace

void attention_reference(const AttnProblem<float>& p) { reference_impl(p); }
void attention_reference(const AttnProblem<double>& p) { reference_impl(p); }

size_t gemm_scratch_floats_bound(int64_t M, int64_t n_max, int64_t k_max) {
  if (M <= 0 || n_max <= 0 || k_max <= 0) return 0;
  // The A block for M rows (N = 2 with B prepacked: the engine's A-block size alone).
  const size_t a = gemm_f32_scratch_floats(M, 2, k_max, false, true);
  // The B block: at most the columns of the problem rounded to panels, at most the widest block.
  const int64_t cols = std::min<int64_t>((n_max + kGemmNR - 1) / kGemmNR * kGemmNR, kGemmMaxBlockCols);
  const size_t b = static_cast<size_t>(cols * std::min<int64_t>(k_max, kGemmKC));
  return a + (b + 15) / 16 * 16;
}

AttnFastPlan attention_fast_plan(int64_t B, int64_t Hq, int64_t Sq, int64_t T, int64_t D, int64_t Dv, int threads) {
  AttnFastPlan fp;
  const int64_t n = B * Hq;
  fp.workers = n <= 1 ? 1 : std::max<int64_t>(1, std::min<int64_t>(n, threads));
  const size_t scores = (static_cast<size_t>(std::max<int64_t>(0, Sq * T)) + 15) / 16 * 16;
  fp.gemm_off = scores;
  // Scores Sq x T x D, outputs Sq x Dv x T.
  fp.gemm_floats = std::max(gemm_scratch_floats_bound(Sq, T, D), gemm_scratch_floats_bound(Sq, Dv, T));
  fp.worker_floats = scores + fp.gemm_floats;
  return fp;
}

void attention_fast(const AttnProblem<float>& p, const AttnFastPlan& plan, ep::ThreadPool* pool, float* scratch) {
  const int64_t group = p.Hq / p.Hkv;
  const int64_t T = p.T, Sq = p.Sq;
  if (Sq == 0) return;
  const int64_t n = p.B * p.Hq;
  const int64_t workers = plan.workers;
  auto work = [&](int64_t w0, int64_t w1) {
    for (int64_t wk = w0; wk < w1; ++wk) {
      float* s = scratch + static_cast<size_t>(wk) * plan.worker_floats;
      const GemmScratch gemm_slot{s + plan.gemm_off, plan.gemm_floats, 1};
      for (int64_t bh = wk * n / workers; bh < (wk + 1) * n / workers; ++bh) {
        const int64_t b = bh / p.Hq, h = bh % p.Hq, hk = h / group;
        const float* qb = p.q + bh * Sq * p.D;
        const float* kb = p.k + (b * p.Hkv + hk) * T * p.D;
        const float* vb = p.v + (b * p.Hkv + hk) * T * p.Dv;
        if (T > 0) {
          if (p.D > 0) {
            gemm_f32(false, true, Sq, T, p.D, p.scale, qb, p.D, kb, p.D, 0.f, s, T, nullptr, nullptr, ep::cpu_isa_tier(),
                     &gemm_slot);
          } else {
            std::fill(s, s + Sq * T, 0.f);
          }
        }
        for (int64_t i = 0; i < Sq; ++i) {
          finish_row<float, float>(p, b, h, i, s + i * T, p.qk_out ? p.qk_out + (bh * Sq + i) * T : nullptr);
        }
        float* yb = p.y + bh * Sq * p.Dv;
        if (p.Dv == 0) continue;
        if (T == 0) {
          std::fill(yb, yb + Sq * p.Dv, 0.f);
          continue;
        }
        // P @ V, skipping zero weights so masked keys with non-finite values cannot poison rows.
        bool finite_v = true;
        for (int64_t x = 0; x < T * p.Dv && finite_v; ++x) finite_v = std::isfinite(vb[x]);
        if (finite_v) {
          gemm_f32(false, false, Sq, p.Dv, T, 1.f, s, T, vb, p.Dv, 0.f, yb, p.Dv, nullptr, nullptr, ep::cpu_isa_tier(),
                   &gemm_slot);
        } else {
          for (int64_t i = 0; i < Sq; ++i) {
            float* yi = yb + i * p.Dv;
            std::fill(yi, yi + p.Dv, 0.f);
            for (int64_t j = 0; j < T; ++j) {
              const float w = s[i * T + j];
              if (w == 0.f) continue;
              const float* vj = vb + j * p.Dv;
              for (int64_t e = 0; e < p.Dv; ++e) yi[e] += w * vj[e];
            }
          }
        }
      }
    }
  };
  if (workers > 1 && pool) {
    pool->parallel_for(workers, 1, work);
  } else {
    work(0, workers);
  }
}

}  // namespace nxrt::ops
