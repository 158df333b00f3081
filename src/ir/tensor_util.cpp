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

Result<std::vector<int64_t>> read_int_values(const Tensor& t0) {
  Tensor t = t0.contiguous();
  int64_t n = t.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  switch (t.dtype()) {
    case DataType::kInt64: std::copy_n(t.data<int64_t>(), n, v.begin()); break;
    case DataType::kInt32: std::copy_n(t.data<int32_t>(), n, v.begin()); break;
    case DataType::kInt16: std::copy_n(t.data<int16_t>(), n, v.begin()); break;
    case DataType::kInt8: std::copy_n(t.data<int8_t>(), n, v.begin()); break;
    case DataType::kUInt8: std::copy_n(t.data<uint8_t>(), n, v.begin()); break;
    case DataType::kUInt16: std::copy_n(t.data<uint16_t>(), n, v.begin()); break;
    case DataType::kUInt32: std::copy_n(t.data<uint32_t>(), n, v.begin()); break;
    case DataType::kUInt64: std::copy_n(t.data<uint64_t>(), n, v.begin()); break;
    case DataType::kBool: std::copy_n(t.data<uint8_t>(), n, v.begin()); break;
    default: return invalid_argument(std::string("expected an integer tensor, got ") + t.describe());
  }
  return v;
}

Result<std::vector<double>> read_double_values(const Tensor& t0) {
  Tensor t = t0.contiguous();
  int64_t n = t.numel();
  std::vector<double> v(static_cast<size_t>(n));
  switch (t.dtype()) {
    case DataType::kFloat: std::copy_n(t.data<float>(), n, v.begin()); break;
    case DataType::kDouble: std::copy_n(t.data<double>(), n, v.begin()); break;
    case DataType::kFloat16:
      for (int64_t i = 0; i < n; ++i) v[i] = half_to_float(t.data<uint16_t>()[i]);
      break;
    case DataType::kBFloat16:
      for (int64_t i = 0; i < n; ++i) v[i] = bf16_to_float(t.data<uint16_t>()[i]);
      break;
    default: {
      auto iv = read_int_values(t);
      if (!iv.ok()) return invalid_argument(std::string("expected a numeric tensor, got ") + t.describe());
      for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(iv.value()[i]);
    }
  }
  return v;
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
