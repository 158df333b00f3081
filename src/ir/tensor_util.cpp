#include "ir/tensor_util.h"

#include <algorithm>
#include <cmath>

namespace nxrt::ir {

bool broadcast_shapes(const Dims& a, const Dims& b, Dims* out) {
  size_t r = std::max(a.size(), b.size());
  Dims o(r);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) {
      o[i] = da;
    } else if (da == 1) {
      o[i] = db;
    } else {
      return false;
    }
  }
  *out = std::move(o);
  return true;
}

Result<Dims> broadcast_all(const std::vector<Dims>& shapes) {
  Dims out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Dims next;
    if (!broadcast_shapes(out, shapes[i], &next)) {
      std::string s = "shapes do not broadcast:";
      for (const auto& sh : shapes) s += " " + shape_to_string(sh);
      return invalid_argument(s);
    }
    out = std::move(next);
  }
  return out;
}

Dims broadcast_strides(const Dims& in, const Dims& out) {
  Dims st(out.size(), 0);
  Dims cs = contiguous_strides(in);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) st[off + i] = in[i] == 1 ? 0 : cs[i];
  return st;
}

bool normalize_axis(int64_t* axis, int64_t rank) {
  if (*axis < -rank || *axis >= rank) return false;
  if (*axis < 0) *axis += rank;
  return true;
}

namespace {
// Every element of t (contiguous) as V, for the dtypes `dispatch` covers; else `unsupported`.
template <typename V, typename D, typename E>
Result<std::vector<V>> read_values(const Tensor& t0, D&& dispatch, E&& unsupported) {
  const Tensor t = t0.contiguous();
  const int64_t n = t.numel();
  std::vector<V> v(static_cast<size_t>(n));
  NXRT_RETURN_IF_ERROR(dispatch(
      t.dtype() == DataType::kBool ? DataType::kUInt8 : t.dtype(),  // bool is one byte of 0/1
      [&](auto tag) {
        using T = decltype(tag);
        const T* p = t.data<T>();
        for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = to_compute<V>(p[i]);
        return Status::Ok();
      },
      [&] { return unsupported(t); }));
  return v;
}
}  // namespace

Result<std::vector<int64_t>> read_int_values(const Tensor& t) {
  return read_values<int64_t>(
      t, [](DataType dt, auto&& f, auto&& e) { return dispatch_integer(dt, f, e); },
      [](const Tensor& x) { return invalid_argument(std::string("expected an integer tensor, got ") + x.describe()); });
}

Result<std::vector<double>> read_double_values(const Tensor& t) {
  return read_values<double>(
      t, [](DataType dt, auto&& f, auto&& e) { return dispatch_numeric(dt, f, e); },
      [](const Tensor& x) { return invalid_argument(std::string("expected a numeric tensor, got ") + x.describe()); });
}

double round_to_float_dtype(double v, DataType dt) {
  switch (dt) {
    case DataType::kFloat: return static_cast<double>(static_cast<float>(v));
    case DataType::kFloat16: return half_to_float(float_to_half(static_cast<float>(v)));
    case DataType::kBFloat16: return bf16_to_float(float_to_bf16(static_cast<float>(v)));
    default: return v;
  }
}

// BatchNormalization's inference statistics folded per channel, in double: a = scale / sqrt(var + eps),
// b = B - mean * a. `p` is {scale, B, mean, var}, each of the same length.
Status fold_batch_norm(const std::vector<const Tensor*>& p, double eps, std::vector<double>* a,
                       std::vector<double>* b) {
  std::vector<double> v[4];
  for (size_t k = 0; k < 4; ++k) {
    NXRT_ASSIGN_OR_RETURN(v[k], read_double_values(*p[k]));
    if (v[k].size() != v[0].size()) return invalid_argument("scale, B, mean and var must have the same length");
  }
  const size_t C = v[0].size();
  a->resize(C);
  b->resize(C);
  for (size_t c = 0; c < C; ++c) {
    (*a)[c] = v[0][c] / std::sqrt(v[3][c] + eps);
    (*b)[c] = v[1][c] - v[2][c] * (*a)[c];
  }
  return Status::Ok();
}

}  // namespace nxrt::ir
