// Broadcast iteration for the elementwise kernels (and Cast/quantization helpers).
//
// A BcastPlan collapses an output shape and up to 3 input shapes into the fewest dims: size-1 output
// dims are dropped and neighbouring dims where every input either broadcasts or not are merged. The
// innermost collapsed dim then has stride 0 or 1 for each input, so kernels run one tight loop per
// row (same-shape inputs become a single row; a scalar becomes stride 0) and only advance an odometer
// between rows. Rows are split over the thread pool by flat output index.
#pragma once
#include <algorithm>
#include <array>
#include <initializer_list>
#include <cstdint>
#include <string>
#include <vector>

#include "ep/kernel.h"
#include "ep/thread_pool.h"
#include "ir/strided_cursor.h"
#include "nxrt/tensor.h"

namespace nxrt::ops::ew {

constexpr int kMaxInputs = 3;

struct BcastPlan {
  Dims dims;                               // collapsed output dims, at least one
  std::array<Dims, kMaxInputs> strides;    // element strides of each input over `dims`
  int num_inputs = 0;
  int64_t numel = 0;
  int64_t inner_stride(int k) const { return strides[k].back(); }
};

// Builds the plan; `out` must be the broadcast of all `ins` (checked by the caller).
// Allocation-free for ranks up to 16 (the per-node cost of a decode step must not touch the heap).
inline BcastPlan make_plan(const Dims& out, const Dims* const* ins, size_t num_ins) {
  BcastPlan p;
  p.num_inputs = static_cast<int>(num_ins);
  p.numel = shape_numel(out);
  const size_t r = out.size();
  std::array<std::array<bool, kMaxInputs>, 16> inline_flags;
  std::vector<std::array<bool, kMaxInputs>> heap_flags(r > 16 ? r : 0);
  std::array<bool, kMaxInputs>* flags = r > 16 ? heap_flags.data() : inline_flags.data();
  size_t nflags = 0;  // per kept dim: input k broadcasts along it
  Dims dims;
  for (size_t i = 0; i < r; ++i) {
    const int64_t d = out[i];
    if (d == 1) continue;
    std::array<bool, kMaxInputs> f{};
    for (int k = 0; k < p.num_inputs; ++k) {
      const Dims& s = *ins[k];  // NOLINT
      const size_t off = r - s.size();
      const int64_t dk = i >= off ? s[i - off] : 1;
      f[k] = dk == 1;
    }
    if (!dims.empty() && flags[nflags - 1] == f) {
      dims.back() *= d;
    } else {
      dims.push_back(d);
      flags[nflags++] = f;
    }
  }
  if (dims.empty()) {
    dims.push_back(1);
    flags[nflags++] = std::array<bool, kMaxInputs>{};
  }
  p.dims = dims;
  for (int k = 0; k < p.num_inputs; ++k) {
    Dims st(dims.size(), 0);
    int64_t running = 1;
    for (size_t j = dims.size(); j-- > 0;) {
      if (flags[j][k]) {
        st[j] = 0;
      } else {
        st[j] = running;
        running *= dims[j];
      }
    }
    p.strides[k] = std::move(st);
  }
  return p;
}
inline BcastPlan make_plan(const Dims& out, std::initializer_list<const Dims*> ins) {
  return make_plan(out, ins.begin(), ins.size());
}
inline BcastPlan make_plan(const Dims& out, const std::vector<const Dims*>& ins) {
  return make_plan(out, ins.data(), ins.size());
}

// Calls fn(out_offset, in_offsets, len) for each row piece of flat output range [begin, end).
template <int N, typename Fn>
void for_each_row(const BcastPlan& p, int64_t begin, int64_t end, Fn&& fn) {
  const size_t r = p.dims.size();
  const int64_t inner = p.dims[r - 1];
  std::array<const int64_t*, N> strides;
  for (int k = 0; k < N; ++k) strides[k] = p.strides[k].data();
  ir::StridedCursor<N> rows(p.dims.data(), r - 1, strides);  // the row's start in each input
  rows.seek(begin / inner);
  int64_t j = begin % inner;
  int64_t pos = begin;
  while (pos < end) {
    const int64_t len = std::min(inner - j, end - pos);
    int64_t offs[N > 0 ? N : 1];
    for (int k = 0; k < N; ++k) offs[k] = rows.offset(k) + j * p.strides[k][r - 1];
    fn(pos, static_cast<const int64_t*>(offs), len);
    pos += len;
    j += len;
    if (j == inner) {
      j = 0;
      rows.next();
    }
  }
}

// Runs for_each_row over the whole output, in parallel when it is large enough.
template <int N, typename Fn>
void run_plan(ep::ThreadPool& pool, const BcastPlan& p, int64_t grain, Fn&& fn) {
  if (p.numel <= 0) return;
  if (pool.num_threads() <= 1 || p.numel < 2 * grain) {
    for_each_row<N>(p, 0, p.numel, fn);
    return;
  }
  pool.parallel_for(p.numel, grain, [&](int64_t b, int64_t e) { for_each_row<N>(p, b, e, fn); });
}

// Splits [0, n) over the pool (or runs inline).
template <typename Fn>
void run_flat(ep::ThreadPool& pool, int64_t n, int64_t grain, Fn&& fn) {
  if (n <= 0) return;
  if (pool.num_threads() <= 1 || n < 2 * grain) {
    fn(int64_t{0}, n);
    return;
  }
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e) { fn(b, e); });
}

// Binary apply: o[i] = f(a[ia], b[ib]) over a plan for (a, b).
template <typename A, typename B, typename O, typename F>
void apply_binary(ep::ThreadPool& pool, const BcastPlan& p, const A* a, const B* b, O* o, F f,
                  int64_t grain = 32768) {
  const int64_t sa = p.inner_stride(0), sb = p.inner_stride(1);
  run_plan<2>(pool, p, grain, [&](int64_t oo, const int64_t* offs, int64_t len) {
    const A* pa = a + offs[0];
    const B* pb = b + offs[1];
    O* po = o + oo;
    if (sa != 0 && sb != 0) {
      for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j], pb[j]);
    } else if (sa == 0 && sb != 0) {
      const A av = *pa;
      for (int64_t j = 0; j < len; ++j) po[j] = f(av, pb[j]);
    } else if (sa != 0) {
      const B bv = *pb;
      for (int64_t j = 0; j < len; ++j) po[j] = f(pa[j], bv);
    } else {
      const O v = f(*pa, *pb);
      for (int64_t j = 0; j < len; ++j) po[j] = v;
    }
  });
}

// Checks that inputs [0, n) are present tensors (a malformed node must not reach ctx.input()).
inline Status need_inputs(const ep::KernelContext& ctx, size_t n) {
  for (size_t i = 0; i < n; ++i) NXRT_RETURN_IF_ERROR(ctx.required_tensor(i, nullptr).status());
  return Status::Ok();
}

}  // namespace nxrt::ops::ew
