#include "ops/ml/ml_util.h"

#include <algorithm>
#include <limits>

namespace nxrt::ops::ml {

bool parse_post_transform(const std::string& s, PostTransform* out) {
  if (s == "NONE") { *out = PostTransform::kNone; return true; }
  if (s == "SOFTMAX") { *out = PostTransform::kSoftmax; return true; }
  if (s == "LOGISTIC") { *out = PostTransform::kLogistic; return true; }
  if (s == "SOFTMAX_ZERO") { *out = PostTransform::kSoftmaxZero; return true; }
  if (s == "PROBIT") { *out = PostTransform::kProbit; return true; }
  return false;
}

Status read_post_transform(const ep::KernelInfo& info, PostTransform* out) {
  const ir::Attribute* a = info.node().find_attribute("post_transform");
  *out = PostTransform::kNone;
  if (!a) return Status::Ok();
  if (a->type == ir::Attribute::Type::kInt) {
    if (a->i < 0 || a->i > 4) return info.error("post_transform must be in [0, 4], got " + std::to_string(a->i));
    *out = static_cast<PostTransform>(a->i);
    return Status::Ok();
  }
  if (!parse_post_transform(a->s, out)) {
    return info.error("post_transform must be NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT, got '" + a->s + "'");
  }
  return Status::Ok();
}

double logistic(double x) {
  // Stable for large |x|.
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  double e = std::exp(x);
  return e / (1.0 + e);
}

namespace {
// Inverse error function: a rational first guess refined by Newton steps on std::erf.
double erfinv(double y) {
  if (std::isnan(y) || y < -1 || y > 1) return std::numeric_limits<double>::quiet_NaN();
  if (y == 1) return std::numeric_limits<double>::infinity();
  if (y == -1) return -std::numeric_limits<double>::infinity();
  const double a = 0.147;
  const double pi = 3.14159265358979323846;
  double ln = std::log((1 - y) * (1 + y));
  double t = 2 / (pi * a) + ln / 2;
  double x = std::copysign(std::sqrt(std::sqrt(t * t - ln / a) - t), y);
  for (int i = 0; i < 3; ++i) {
    double err = std::erf(x) - y;
    x -= err / (2 / std::sqrt(pi) * std::exp(-x * x));
  }
  return x;
}
}  // namespace

double probit(double p) { return 1.4142135623730951 * erfinv(2 * p - 1); }

void apply_post_transform(PostTransform pt, double* row, int64_t n) {
  switch (pt) {
    case PostTransform::kNone: return;
    case PostTransform::kLogistic:
      for (int64_t i = 0; i < n; ++i) row[i] = logistic(row[i]);
      return;
    case PostTransform::kProbit:
      for (int64_t i = 0; i < n; ++i) row[i] = probit(row[i]);
      return;
    case PostTransform::kSoftmax: {
      if (n == 0) return;
      double mx = *std::max_element(row, row + n), sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += (row[i] = std::exp(row[i] - mx));
      for (int64_t i = 0; i < n; ++i) row[i] /= sum;
      return;
    }
    case PostTransform::kSoftmaxZero: {
      // Softmax over the non-zero scores; zero scores stay (about) zero.
      if (n == 0) return;
      double mx = *std::max_element(row, row + n), sum = 0;
      for (int64_t i = 0; i < n; ++i) {
        row[i] = (row[i] > 1e-7 || row[i] < -1e-7) ? std::exp(row[i] - mx) : row[i] * std::exp(-mx);
        sum += row[i];
      }
      for (int64_t i = 0; i < n; ++i) row[i] = sum == 0 ? 0.5 : row[i] / sum;
      return;
    }
  }
}

Result<Rows> read_rows(const ep::KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i) || !ctx.input_value(i)->is_tensor()) {
    return ctx.error("input " + std::to_string(i) + " is missing or not a tensor", StatusCode::kInvalidArgument);
  }
  const Tensor& x = ctx.input(i);
  Rows r;
  Status bad = ctx.error("input must be a numeric tensor, got " + x.describe(), StatusCode::kInvalidArgument);
  if (x.dtype() == DataType::kBool) return bad;
  NXRT_RETURN_IF_ERROR(dispatch_numeric(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = x.data<T>();
    r.v.resize(static_cast<size_t>(x.numel()));
    for (int64_t k = 0, n = x.numel(); k < n; ++k) r.v[static_cast<size_t>(k)] = to_compute<double>(p[k]);
    return Status::Ok();
  }, bad));
  if (x.rank() == 0) {
    r.n = 1;
    r.c = 1;
  } else if (x.rank() == 1) {
    r.n = 1;
    r.c = x.dim(0);
  } else {
    r.n = x.dim(0);
    r.c = r.n == 0 ? 0 : x.numel() / r.n;
    if (r.n == 0) {
      r.c = 1;
      for (int64_t d = 1; d < x.rank(); ++d) r.c *= x.dim(d);
    }
  }
  return r;
}

Status read_labels(const ep::KernelInfo& info, const std::string& ints_name, const std::string& strings_name,
                   Labels* out) {
  bool has_i = info.has_attr(ints_name), has_s = info.has_attr(strings_name);
  if (has_i && has_s) {
    return info.error("only one of " + ints_name + " and " + strings_name + " may be set");
  }
  out->strings = has_s;
  out->ints = info.attr_ints(ints_name);
  out->strs = info.attr_strings(strings_name);
  return Status::Ok();
}

Status write_labels(ep::KernelContext& ctx, size_t out, const Labels& labels, const std::vector<int64_t>& idx) {
  Dims shape{static_cast<int64_t>(idx.size())};
  if (labels.strings) {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(out, DataType::kString, shape));
    for (size_t i = 0; i < idx.size(); ++i) y->string_data()[i] = labels.strs[static_cast<size_t>(idx[i])];
  } else {
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(out, DataType::kInt64, shape));
    for (size_t i = 0; i < idx.size(); ++i) {
      y->data<int64_t>()[i] = labels.ints.empty() ? idx[i] : labels.ints[static_cast<size_t>(idx[i])];
    }
  }
  return Status::Ok();
}

Result<std::vector<double>> floats_or_tensor(const ep::KernelInfo& info, const std::string& name) {
  if (const Tensor* t = info.attr_tensor(name + "_as_tensor")) {
    auto v = read_double_values(*t);
    if (!v.ok()) return info.error("attribute " + name + "_as_tensor: " + v.status().message());
    return std::move(v).value();
  }
  std::vector<float> f = info.attr_floats(name);
  return std::vector<double>(f.begin(), f.end());
}

}  // namespace nxrt::ops::ml
