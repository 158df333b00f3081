#include "ops/tensor/tensor_util.h"

#include <algorithm>
#include <cstring>

namespace nxrt::ops {

std::string ints_to_string(const std::vector<int64_t>& v) { return shape_to_string(v); }

bool shape_is_sane(const Dims& shape) {
  int64_t n = 1;
  bool zero = false;
  for (int64_t d : shape) {
    if (d < 0) return false;
    if (d == 0) zero = true;
  }
  if (zero) return true;
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(n, d, &n) || n > (int64_t{1} << 40)) return false;
  }
  return true;
}

Result<std::vector<int64_t>> read_indices(const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) {
    return invalid_argument(std::string(what) + " must be int32 or int64, got " + t.describe());
  }
  return read_int_values(t);
}

bool gather_axis_maps(const Tensor& x, Tensor& out, const std::vector<std::vector<int64_t>>& maps) {
  const Status st = dispatch_elem(
      x.dtype(),
      [&](auto tag) {
        using E = decltype(tag);
        gather_axis_maps(elem_ptr<E>(x), elem_ptr<E>(out), x.shape(), out.shape(), maps);
        return Status::Ok();
      },
      [] { return invalid_argument("unsupported dtype"); });
  return st.ok();
}

Result<std::vector<int64_t>> required_indices(const ep::KernelContext& ctx, size_t i, const char* name) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& t, ctx.required_tensor(i, name));
  auto v = read_indices(t, name);
  if (!v.ok()) return ctx.error(v.status().message());
  return v;
}

Result<StridedLayout> slice_layout(const Dims& in_shape, const std::vector<int64_t>& starts,
                                   const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                                   const std::vector<int64_t>& steps) {
  const int64_t rank = static_cast<int64_t>(in_shape.size());
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return invalid_argument("starts/ends/axes/steps lengths differ: starts " + ints_to_string(starts) + ", ends " +
                            ints_to_string(ends) + ", axes " + ints_to_string(axes) + ", steps " +
                            ints_to_string(steps));
  }
  StridedLayout L;
  L.shape = in_shape;
  Dims cs = contiguous_strides(in_shape);
  L.strides = cs;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (size_t k = 0; k < axes.size(); ++k) {
    int64_t ax = axes[k];
    if (!normalize_axis(&ax, rank)) {
      return invalid_argument("axis " + std::to_string(axes[k]) + " out of range for input shape " +
                              shape_to_string(in_shape));
    }
    if (seen[ax]) return invalid_argument("axes " + ints_to_string(axes) + " repeat an axis");
    seen[ax] = true;
    const int64_t dim = in_shape[ax];
    const int64_t step = steps[k];
    if (step == 0) return invalid_argument("step for axis " + std::to_string(axes[k]) + " is 0");
    if (dim == 0) {
      L.shape[ax] = 0;
      continue;
    }
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s += dim;  // no overflow: dim >= 0 (INT64_MIN + dim stays representable)
    if (e < 0) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
    }
    int64_t n = 0;
    if (step > 0 && e > s) n = (e - s + step - 1) / step;
    if (step < 0 && s > e) n = (s - e + (-step) - 1) / (-step);
    L.shape[ax] = n;
    L.strides[ax] = cs[ax] * step;
    if (n > 0) L.offset += s * cs[ax];
  }
  return L;
}

Result<StridedLayout> transpose_layout(const Dims& in_shape, const Dims& perm_in) {
  const size_t rank = in_shape.size();
  Dims perm = perm_in;
  if (perm.empty()) {
    perm.resize(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  }
  if (perm.size() != rank) {
    return invalid_argument("perm " + ints_to_string(perm) + " does not match input rank " + std::to_string(rank));
  }
  Dims seen(rank, 0);
  Dims cs = contiguous_strides(in_shape);
  StridedLayout L;
  L.shape.resize(rank);
  L.strides.resize(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t p = perm[i];
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[p]) {
      return invalid_argument("perm " + ints_to_string(perm) + " is not a permutation of 0.." +
                              std::to_string(static_cast<int64_t>(rank) - 1));
    }
    seen[p] = 1;
    L.shape[i] = in_shape[p];
    L.strides[i] = cs[p];
  }
  return L;
}

namespace {

// Drops size-1 dims and merges dims that are contiguous in both source and destination.
void coalesce(Dims& shape, Dims& a, Dims& b) {
  Dims s2, a2, b2;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!s2.empty() && a2.back() == a[i] * shape[i] && b2.back() == b[i] * shape[i]) {
      s2.back() *= shape[i];
      a2.back() = a[i];
      b2.back() = b[i];
      continue;
    }
    s2.push_back(shape[i]);
    a2.push_back(a[i]);
    b2.push_back(b[i]);
  }
  if (s2.empty()) {
    s2.push_back(1);
    a2.push_back(1);
    b2.push_back(1);
  }
  shape.swap(s2);
  a.swap(a2);
  b.swap(b2);
}

template <typename E>
void copy_loop(const E* src, E* dst, Dims shape, Dims ss, Dims ds) {
  if (shape_numel(shape) == 0) return;
  size_t r = shape.size();
  // Transpose-like copies (destination contiguous inside, source strided inside, with some other dim
  // contiguous in the source): move that dim next to the last one and copy in cache-sized tiles.
  if (r >= 2 && ds[r - 1] == 1 && ss[r - 1] != 1 && shape[r - 1] >= 8) {
    size_t k = r;
    for (size_t i = 0; i + 1 < r; ++i) {
      if (ss[i] == 1 && shape[i] >= 8) k = i;
    }
    if (k < r) {
      std::swap(shape[k], shape[r - 2]);
      std::swap(ss[k], ss[r - 2]);
      std::swap(ds[k], ds[r - 2]);
      const int64_t A = shape[r - 2], B = shape[r - 1];
      const int64_t dsa = ds[r - 2], ssb = ss[r - 1];
      auto cur = strided_cursor(shape, r - 2, ss, ds);
      constexpr int64_t kTile = 32;
      do {
        const E* s = src + cur.offset(0);
        E* d = dst + cur.offset(1);
        for (int64_t a0 = 0; a0 < A; a0 += kTile) {
          const int64_t a1 = std::min(A, a0 + kTile);
          for (int64_t b0 = 0; b0 < B; b0 += kTile) {
            const int64_t b1 = std::min(B, b0 + kTile);
            for (int64_t a = a0; a < a1; ++a) {
              E* dr = d + a * dsa;
              const E* sr = s + a;
              for (int64_t b = b0; b < b1; ++b) dr[b] = sr[b * ssb];
            }
          }
        }
      } while (cur.next());
      return;
    }
  }
  const int64_t inner = shape[r - 1], is = ss[r - 1], id = ds[r - 1];
  auto cur = strided_cursor(shape, r - 1, ss, ds);
  do {
    const E* s = src + cur.offset(0);
    E* d = dst + cur.offset(1);
    if (is == 1 && id == 1) {
      if constexpr (std::is_trivially_copyable_v<E>) {
        std::memcpy(d, s, static_cast<size_t>(inner) * sizeof(E));
      } else {
        std::copy(s, s + inner, d);
      }
    } else if (is == 0 && id == 1) {
      std::fill(d, d + inner, *s);
    } else {
      for (int64_t i = 0; i < inner; ++i) d[i * id] = s[i * is];
    }
  } while (cur.next());
}

inline uint8_t get_bits(const uint8_t* p, int bits, int64_t e) {
  int64_t bit = e * bits;
  return static_cast<uint8_t>((p[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1));
}
inline void set_bits(uint8_t* p, int bits, int64_t e, uint8_t v) {
  int64_t bit = e * bits;
  uint8_t mask = static_cast<uint8_t>(((1u << bits) - 1) << (bit & 7));
  p[bit >> 3] = static_cast<uint8_t>((p[bit >> 3] & ~mask) | ((v << (bit & 7)) & mask));
}

}  // namespace

Tensor subbyte_unpack(const Tensor& t) {
  Tensor out(DataType::kUInt8, t.shape());
  const int bits = dtype_bits(t.dtype());
  const auto* p = static_cast<const uint8_t*>(t.raw_data());
  uint8_t* d = out.data<uint8_t>();
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) d[i] = get_bits(p, bits, i);
  return out;
}

Tensor subbyte_pack(const Tensor& u8, DataType dt) {
  Tensor out(dt, u8.shape());
  const int bits = dtype_bits(dt);
  auto* p = static_cast<uint8_t*>(out.raw_data());
  const uint8_t* s = u8.data<uint8_t>();
  const int64_t n = u8.numel();
  for (int64_t i = 0; i < n; ++i) set_bits(p, bits, i, s[i]);
  return out;
}

void copy_elements(const Tensor& src, int64_t src_offset, const Dims& src_strides, Tensor& dst,
                   int64_t dst_offset, const Dims& dst_strides, const Dims& shape0, ep::ThreadPool* pool) {
  if (shape_numel(shape0) == 0) return;
  Dims shape = shape0, ss = src_strides, ds = dst_strides;
  coalesce(shape, ss, ds);
  const DataType dt = src.dtype();
  if (dtype_is_subbyte(dt)) {
    const int bits = dtype_bits(dt);
    const auto* s = static_cast<const uint8_t*>(src.raw_data());
    auto* d = static_cast<uint8_t*>(dst.raw_data());
    StridedCursor<2> cur(shape.data(), shape.size(), {ss.data(), ds.data()}, {src_offset, dst_offset});
    do {
      set_bits(d, bits, cur.offset(1), get_bits(s, bits, cur.offset(0)));
    } while (cur.next());
    return;
  }
  (void)dispatch_elem(
      dt,
      [&](auto tag) {
        using E = decltype(tag);
        const E* s = elem_ptr<E>(src) + src_offset;
        E* d = elem_ptr<E>(dst) + dst_offset;
        const int64_t n = shape_numel(shape);
        if (pool == nullptr || pool->num_threads() <= 1 || n < (int64_t{1} << 16)) {
          copy_loop<E>(s, d, shape, ss, ds);
          return Status::Ok();
        }
        // Split the outermost dim across threads (a 1-D copy splits its only dim).
        const int64_t per_row = n / shape[0];
        const int64_t grain = std::max<int64_t>(1, (int64_t{1} << 14) / std::max<int64_t>(per_row, 1));
        pool->parallel_for(shape[0], grain, [&](int64_t b, int64_t e) {
          Dims sh = shape;
          sh[0] = e - b;
          copy_loop<E>(s + b * ss[0], d + b * ds[0], sh, ss, ds);
        });
        return Status::Ok();
      },
      [&] { return Status::Ok(); });
}

void copy_window(const Tensor& src, const StridedLayout& layout, Tensor& dst, ep::ThreadPool* pool) {
  copy_elements(src, layout.offset, layout.strides, dst, 0, contiguous_strides(layout.shape), layout.shape, pool);
}

void copy_run(const Tensor& src, int64_t src_index, Tensor& dst, int64_t dst_index, int64_t count) {
  if (count <= 0) return;
  copy_elements(src, src_index, {1}, dst, dst_index, {1}, {count});
}

bool fill_with_double(Tensor& t, double v) {
  if (t.dtype() == DataType::kBool) {
    std::fill_n(t.data<uint8_t>(), t.numel(), static_cast<uint8_t>(v != 0));
    return true;
  }
  Status s = dispatch_numeric(
      t.dtype(),
      [&](auto tag) {
        using T = decltype(tag);
        std::fill_n(t.data<T>(), t.numel(), from_double<T>(v));
        return Status::Ok();
      },
      [&] { return invalid_argument("not numeric"); });
  return s.ok();
}

}  // namespace nxrt::ops
