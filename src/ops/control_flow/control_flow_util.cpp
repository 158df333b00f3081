#include "ops/control_flow/control_flow_util.h"

#include <cstring>

namespace nxrt::ops {

namespace {

// Copies `count` rows of `row_elems` elements between tensors of the same dtype (strings included).
void copy_elems(const Tensor& src, int64_t src_off, Tensor& dst, int64_t dst_off, int64_t n) {
  if (n <= 0) return;
  if (src.dtype() == DataType::kString) {
    for (int64_t i = 0; i < n; ++i) dst.string_data()[dst_off + i] = src.string_data()[src_off + i];
    return;
  }
  size_t es = static_cast<size_t>(dtype_bits(src.dtype()) / 8);
  std::memcpy(static_cast<char*>(dst.raw_data()) + dst_off * es, static_cast<const char*>(src.raw_data()) + src_off * es,
              static_cast<size_t>(n) * es);
}

}  // namespace

Tensor take_range(const Tensor& t0, int64_t axis, int64_t begin, int64_t end) {
  Tensor t = t0.contiguous();
  Dims shape = t.shape();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  int64_t len = shape[axis];
  shape[axis] = end - begin;
  Tensor out(t.dtype(), shape);
  for (int64_t o = 0; o < outer; ++o) {
    copy_elems(t, (o * len + begin) * inner, out, o * (end - begin) * inner, (end - begin) * inner);
  }
  return out;
}

Tensor take_slice(const Tensor& t, int64_t axis, int64_t index) {
  Tensor r = take_range(t, axis, index, index + 1);
  Dims shape = r.shape();
  shape.erase(shape.begin() + axis);
  return r.reshaped(shape);
}

Result<Tensor> concat_tensors(const std::vector<Tensor>& parts0, int64_t axis) {
  if (parts0.empty()) return invalid_argument("concat of nothing");
  std::vector<Tensor> parts;
  for (const auto& p : parts0) parts.push_back(p.contiguous());
  Dims shape = parts[0].shape();
  if (axis < 0 || axis >= static_cast<int64_t>(shape.size())) return invalid_argument("concat axis out of range");
  int64_t total = 0;
  for (const auto& p : parts) {
    if (p.dtype() != parts[0].dtype() || p.rank() != parts[0].rank()) {
      return invalid_argument("cannot concatenate " + p.describe() + " with " + parts[0].describe());
    }
    for (size_t i = 0; i < shape.size(); ++i) {
      if (static_cast<int64_t>(i) != axis && p.shape()[i] != shape[i]) {
        return invalid_argument("cannot concatenate " + p.describe() + " with " + parts[0].describe() + " on axis " +
                                std::to_string(axis));
      }
    }
    total += p.shape()[axis];
  }
  shape[axis] = total;
  Tensor out(parts[0].dtype(), shape);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
  int64_t off = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (const auto& p : parts) {
      int64_t n = p.shape()[axis] * inner;
      copy_elems(p, o * n, out, off, n);
      off += n;
    }
  }
  return out;
}

Result<Tensor> stack_tensors(const std::vector<Tensor>& parts, int64_t axis) {
  std::vector<Tensor> expanded;
  for (const auto& p : parts) {
    if (p.shape() != parts[0].shape() || p.dtype() != parts[0].dtype()) {
      return invalid_argument("cannot stack " + p.describe() + " with " + parts[0].describe());
    }
    Dims s = p.shape();
    s.insert(s.begin() + axis, 1);
    expanded.push_back(p.reshaped(s));
  }
  return concat_tensors(expanded, axis);
}

}  // namespace nxrt::ops
