// Linear models and SVMs of ai.onnx.ml: LinearRegressor, LinearClassifier, SVMRegressor, SVMClassifier.
// Semantics follow the ONNX reference implementation (onnx/reference/ops/aionnxml), which mirrors
// onnxruntime and libsvm: binary models with one score column expose two columns [-s, s] (or [1-s, s]
// for all-positive SVM weights) and the SVM probability path is libsvm's pairwise coupling.
#include <algorithm>
#include <cmath>

#include "ops/common.h"
#include "ops/ml/ml_util.h"

namespace nxrt::ops {

namespace {

using ml::PostTransform;

double dot(const double* a, const double* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

// ---- LinearRegressor: Y[n, t] = X[n] . coefficients[t] + intercepts[t], then the post-transform.
class LinearRegressorKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    coef_ = info.attr_floats("coefficients");
    intercepts_ = info.attr_floats("intercepts");
    targets_ = info.attr_int("targets", 1);
    if (targets_ < 1) return info.error("targets must be >= 1, got " + std::to_string(targets_));
    if (!intercepts_.empty() && static_cast<int64_t>(intercepts_.size()) != targets_) {
      return info.error("intercepts has " + std::to_string(intercepts_.size()) + " values for " + std::to_string(targets_) + " targets");
    }
    if (coef_.size() % static_cast<size_t>(targets_) != 0) {
      return info.error("coefficients (" + std::to_string(coef_.size()) + ") is not a multiple of targets (" +
                        std::to_string(targets_) + ")");
    }
    return ml::read_post_transform(info, &post_);
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(ml::Rows x, ml::read_rows(ctx, 0));
    if (static_cast<int64_t>(coef_.size()) != targets_ * x.c) {
      return ctx.error("coefficients has " + std::to_string(coef_.size()) + " values; expected targets (" +
                           std::to_string(targets_) + ") x features (" + std::to_string(x.c) + ")",
                       StatusCode::kInvalidArgument);
    }
    std::vector<double> w(coef_.begin(), coef_.end());
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, {x.n, targets_}));
    std::vector<double> row(static_cast<size_t>(targets_));
    for (int64_t r = 0; r < x.n; ++r) {
      for (int64_t t = 0; t < targets_; ++t) {
        row[static_cast<size_t>(t)] = dot(x.row(r), w.data() + t * x.c, x.c) +
                                      (intercepts_.empty() ? 0.0 : intercepts_[static_cast<size_t>(t)]);
      }
      ml::apply_post_transform(post_, row.data(), targets_);
      for (int64_t t = 0; t < targets_; ++t) y->data<float>()[r * targets_ + t] = static_cast<float>(row[static_cast<size_t>(t)]);
    }
    return Status::Ok();
  }

 private:
  std::vector<float> coef_, intercepts_;
  int64_t targets_ = 1;
  PostTransform post_ = PostTransform::kNone;
};

// ---- LinearClassifier.
class LinearClassifierKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    coef_ = info.attr_floats("coefficients");
    intercepts_ = info.attr_floats("intercepts");
    if (coef_.empty()) return info.error("coefficients is required");
    NXRT_RETURN_IF_ERROR(ml::read_labels(info, "classlabels_ints", "classlabels_strings", &labels_));
    return ml::read_post_transform(info, &post_);
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(ml::Rows x, ml::read_rows(ctx, 0));
    if (x.c == 0 || coef_.size() % static_cast<size_t>(x.c) != 0) {
      return ctx.error("coefficients (" + std::to_string(coef_.size()) + ") is not a multiple of the feature count " +
                           std::to_string(x.c),
                       StatusCode::kInvalidArgument);
    }
    int64_t k = static_cast<int64_t>(coef_.size()) / x.c;
    if (!intercepts_.empty() && static_cast<int64_t>(intercepts_.size()) != k) {
      return ctx.error("intercepts has " + std::to_string(intercepts_.size()) + " values for " + std::to_string(k) + " classes",
                       StatusCode::kInvalidArgument);
    }
    int64_t nl = static_cast<int64_t>(labels_.size());
    bool binary = k == 1 && nl == 2;
    int64_t cols = binary ? 2 : k;
    if (cols > 1 && nl != 0 && nl != cols) {
      return ctx.error(std::to_string(k) + " coefficient rows do not match " + std::to_string(nl) + " class labels",
                       StatusCode::kInvalidArgument);
    }
    std::vector<double> w(coef_.begin(), coef_.end());
    std::vector<int64_t> label_idx(static_cast<size_t>(x.n));
    std::vector<int64_t> raw(static_cast<size_t>(x.n));  // label value when there is one column
    Tensor* z = nullptr;
    if (ctx.output_requested(1)) {
      NXRT_ASSIGN_OR_RETURN(z, ctx.allocate_output(1, DataType::kFloat, {x.n, cols}));
    }
    std::vector<double> row(static_cast<size_t>(cols));
    for (int64_t r = 0; r < x.n; ++r) {
      for (int64_t c = 0; c < k; ++c) {
        row[static_cast<size_t>(c)] = dot(x.row(r), w.data() + c * x.c, x.c) +
                                      (intercepts_.empty() ? 0.0 : intercepts_[static_cast<size_t>(c)]);
      }
      if (binary) row = {-row[0], row[0]};
      ml::apply_post_transform(post_, row.data(), cols);
      if (cols > 1) {
        label_idx[static_cast<size_t>(r)] = std::max_element(row.begin(), row.end()) - row.begin();
      } else {
        double th = post_ == PostTransform::kNone ? 0.0 : 0.5;
        label_idx[static_cast<size_t>(r)] = row[0] >= th ? 0 : -1;
      }
      if (z) {
        for (int64_t c = 0; c < cols; ++c) z->data<float>()[r * cols + c] = static_cast<float>(row[static_cast<size_t>(c)]);
      }
    }
    if (cols > 1) return ml::write_labels(ctx, 0, labels_, label_idx);
    // One score column: the first label when score >= threshold, else 0 / "" (with no labels: 1 / 0).
    Dims shape{x.n};
    if (labels_.strings) {
      NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kString, shape));
      for (int64_t r = 0; r < x.n; ++r) {
        y->string_data()[r] = label_idx[static_cast<size_t>(r)] == 0 && nl > 0 ? labels_.strs[0] : std::string();
      }
    } else {
      NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt64, shape));
      for (int64_t r = 0; r < x.n; ++r) {
        bool hit = label_idx[static_cast<size_t>(r)] == 0;
        y->data<int64_t>()[r] = hit ? (nl > 0 ? labels_.ints[0] : 1) : 0;
      }
    }
    return Status::Ok();
  }

 private:
  std::vector<float> coef_, intercepts_;
  ml::Labels labels_;
  PostTransform post_ = PostTransform::kNone;
};

// ---- SVM common: kernel function and parameters.
enum class KernelType { kLinear, kPoly, kRbf, kSigmoid };

struct SvmCommon {
  KernelType kernel = KernelType::kLinear;
  double gamma = 0, coef0 = 0;
  int64_t degree = 0;
  std::vector<double> coef, sv, rho;
  PostTransform post = PostTransform::kNone;

  Status init(const ep::KernelInfo& info) {
    std::string k = info.attr_string("kernel_type", "LINEAR");
    if (k == "LINEAR") kernel = KernelType::kLinear;
    else if (k == "POLY") kernel = KernelType::kPoly;
    else if (k == "RBF") kernel = KernelType::kRbf;
    else if (k == "SIGMOID") kernel = KernelType::kSigmoid;
    else return info.error("kernel_type must be LINEAR, POLY, RBF or SIGMOID, got '" + k + "'");
    std::vector<float> p = info.attr_floats("kernel_params");
    if (!p.empty() && p.size() != 3) return info.error("kernel_params must hold 3 values (gamma, coef0, degree), got " + std::to_string(p.size()));
    if (p.size() == 3) {
      gamma = p[0];
      coef0 = p[1];
      degree = static_cast<int64_t>(p[2]);
    }
    for (float f : info.attr_floats("coefficients")) coef.push_back(f);
    for (float f : info.attr_floats("support_vectors")) sv.push_back(f);
    for (float f : info.attr_floats("rho")) rho.push_back(f);
    return ml::read_post_transform(info, &post);
  }

  double kdot(const double* a, const double* b, int64_t n, KernelType kt) const {
    switch (kt) {
      case KernelType::kLinear: return dot(a, b, n);
      case KernelType::kPoly: return std::pow(dot(a, b, n) * gamma + coef0, static_cast<double>(degree));
      case KernelType::kSigmoid: return std::tanh(dot(a, b, n) * gamma + coef0);
      case KernelType::kRbf: {
        double s = 0;
        for (int64_t i = 0; i < n; ++i) s += (a[i] - b[i]) * (a[i] - b[i]);
        return std::exp(-gamma * s);
      }
    }
    return 0;
  }
};

// ---- SVMRegressor (and one-class SVM).
class SVMRegressorKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(svm_.init(info));
    n_supports_ = info.attr_int("n_supports", 0);
    one_class_ = info.attr_int("one_class", 0) != 0;
    if (n_supports_ < 0) return info.error("n_supports must be >= 0");
    if (svm_.rho.empty()) return info.error("rho must hold one value");
    if (n_supports_ > 0 && static_cast<int64_t>(svm_.coef.size()) < n_supports_) {
      return info.error("coefficients has " + std::to_string(svm_.coef.size()) + " values for " + std::to_string(n_supports_) +
                        " support vectors");
    }
    if (n_supports_ > 0 && svm_.sv.size() % static_cast<size_t>(n_supports_) != 0) {
      return info.error("support_vectors (" + std::to_string(svm_.sv.size()) + ") is not a multiple of n_supports (" +
                        std::to_string(n_supports_) + ")");
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(ml::Rows x, ml::read_rows(ctx, 0));
    bool svc = n_supports_ > 0;
    int64_t need = svc ? n_supports_ * x.c : x.c;
    if (static_cast<int64_t>(svc ? svm_.sv.size() : svm_.coef.size()) != need) {
      return ctx.error(std::string(svc ? "support_vectors" : "coefficients") + " has " +
                           std::to_string(svc ? svm_.sv.size() : svm_.coef.size()) + " values; expected " +
                           std::to_string(need) + " for " + std::to_string(x.c) + " features",
                       StatusCode::kInvalidArgument);
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, {x.n, 1}));
    for (int64_t r = 0; r < x.n; ++r) {
      double s = 0;
      if (svc) {
        for (int64_t j = 0; j < n_supports_; ++j) s += svm_.coef[static_cast<size_t>(j)] * svm_.kdot(x.row(r), svm_.sv.data() + j * x.c, x.c, svm_.kernel);
      } else {
        s = dot(x.row(r), svm_.coef.data(), x.c);
      }
      s += svm_.rho[0];
      if (one_class_) s = s > 0 ? 1 : -1;
      ml::apply_post_transform(svm_.post, &s, 1);
      y->data<float>()[r] = static_cast<float>(s);
    }
    return Status::Ok();
  }

 private:
  SvmCommon svm_;
  int64_t n_supports_ = 0;
  bool one_class_ = false;
};

// libsvm's multi-class probability from pairwise probabilities r[i][j] (k x k).
std::vector<double> multiclass_probability(int64_t k, const std::vector<double>& r) {
  auto R = [&](int64_t i, int64_t j) { return r[static_cast<size_t>(i * k + j)]; };
  std::vector<double> q(static_cast<size_t>(k * k)), qp(static_cast<size_t>(k)), p(static_cast<size_t>(k));
  auto Q = [&](int64_t i, int64_t j) -> double& { return q[static_cast<size_t>(i * k + j)]; };
  int64_t max_iter = std::max<int64_t>(100, k);
  double eps = 0.005 / static_cast<double>(k);
  for (int64_t t = 0; t < k; ++t) {
    p[static_cast<size_t>(t)] = 1.0 / static_cast<double>(k);
    Q(t, t) = 0;
    for (int64_t j = 0; j < t; ++j) {
      Q(t, t) += R(j, t) * R(j, t);
      Q(t, j) = Q(j, t);
    }
    for (int64_t j = t + 1; j < k; ++j) {
      Q(t, t) += R(j, t) * R(j, t);
      Q(t, j) = -R(j, t) * R(t, j);
    }
  }
  for (int64_t it = 0; it < max_iter; ++it) {
    double pqp = 0;
    for (int64_t t = 0; t < k; ++t) {
      qp[static_cast<size_t>(t)] = 0;
      for (int64_t j = 0; j < k; ++j) qp[static_cast<size_t>(t)] += Q(t, j) * p[static_cast<size_t>(j)];
      pqp += p[static_cast<size_t>(t)] * qp[static_cast<size_t>(t)];
    }
    double max_error = 0;
    for (int64_t t = 0; t < k; ++t) max_error = std::max(max_error, std::fabs(qp[static_cast<size_t>(t)] - pqp));
    if (max_error < eps) break;
    for (int64_t t = 0; t < k; ++t) {
      double diff = (-qp[static_cast<size_t>(t)] + pqp) / Q(t, t);
      p[static_cast<size_t>(t)] += diff;
      pqp = (pqp + diff * (diff * Q(t, t) + 2 * qp[static_cast<size_t>(t)])) / (1 + diff) / (1 + diff);
      for (int64_t j = 0; j < k; ++j) {
        qp[static_cast<size_t>(j)] = (qp[static_cast<size_t>(j)] + diff * Q(t, j)) / (1 + diff);
        p[static_cast<size_t>(j)] /= (1 + diff);
      }
    }
  }
  return p;
}

// ---- SVMClassifier.
class SVMClassifierKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    NXRT_RETURN_IF_ERROR(svm_.init(info));
    NXRT_RETURN_IF_ERROR(ml::read_labels(info, "classlabels_ints", "classlabels_strings", &labels_));
    classes_ = std::max<int64_t>(static_cast<int64_t>(labels_.size()), 1);
    for (int64_t v : info.attr_ints("vectors_per_class")) {
      if (v < 0) return info.error("vectors_per_class must be non-negative");
      starts_.push_back(vectors_);
      per_class_.push_back(v);
      vectors_ += v;
    }
    for (float f : info.attr_floats("prob_a")) prob_a_.push_back(f);
    for (float f : info.attr_floats("prob_b")) prob_b_.push_back(f);
    if (prob_a_.size() != prob_b_.size()) {
      return info.error("prob_a (" + std::to_string(prob_a_.size()) + ") and prob_b (" + std::to_string(prob_b_.size()) +
                        ") must have the same length");
    }
    if (svm_.rho.empty()) return info.error("rho must not be empty");
    int64_t pairs = classes_ * (classes_ - 1) / 2;
    if (vectors_ > 0) {
      if (static_cast<int64_t>(per_class_.size()) != classes_) {
        return info.error("vectors_per_class has " + std::to_string(per_class_.size()) + " entries for " +
                          std::to_string(classes_) + " classes");
      }
      if (static_cast<int64_t>(svm_.coef.size()) != (classes_ - 1) * vectors_) {
        return info.error("coefficients has " + std::to_string(svm_.coef.size()) + " values; expected (classes - 1) x vectors = " +
                          std::to_string((classes_ - 1) * vectors_));
      }
      if (static_cast<int64_t>(svm_.rho.size()) < pairs) {
        return info.error("rho has " + std::to_string(svm_.rho.size()) + " values; expected one per class pair (" +
                          std::to_string(pairs) + ")");
      }
      if (!prob_a_.empty() && static_cast<int64_t>(prob_a_.size()) < pairs) {
        return info.error("prob_a has " + std::to_string(prob_a_.size()) + " values; expected one per class pair (" +
                          std::to_string(pairs) + ")");
      }
    }
    for (double c : svm_.coef) {
      if (c < 0) all_positive_ = false;
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    bool raw_label = false;  // per call: concurrent runs share the kernel
    NXRT_ASSIGN_OR_RETURN(ml::Rows x, ml::read_rows(ctx, 0));
    bool svc = vectors_ > 0;
    if (svc && static_cast<int64_t>(svm_.sv.size()) != vectors_ * x.c) {
      return ctx.error("support_vectors has " + std::to_string(svm_.sv.size()) + " values; expected " +
                           std::to_string(vectors_) + " x " + std::to_string(x.c) + " features",
                       StatusCode::kInvalidArgument);
    }
    if (!svc && static_cast<int64_t>(svm_.coef.size()) != classes_ * x.c) {
      return ctx.error("coefficients has " + std::to_string(svm_.coef.size()) + " values; expected classes (" +
                           std::to_string(classes_) + ") x features (" + std::to_string(x.c) + ")",
                       StatusCode::kInvalidArgument);
    }
    bool has_proba = svc && !prob_a_.empty();
    std::vector<int64_t> label(static_cast<size_t>(x.n));
    std::vector<std::vector<double>> out_rows(static_cast<size_t>(x.n));
    std::vector<double> kern(static_cast<size_t>(vectors_));
    for (int64_t r = 0; r < x.n; ++r) {
      const double* xr = x.row(r);
      std::vector<double> scores, votes;
      if (svc) {
        for (int64_t j = 0; j < vectors_; ++j) kern[static_cast<size_t>(j)] = svm_.kdot(xr, svm_.sv.data() + j * x.c, x.c, svm_.kernel);
        votes.assign(static_cast<size_t>(classes_), 0.0);
        int64_t e = 0;
        for (int64_t i = 0; i < classes_; ++i) {
          for (int64_t j = i + 1; j < classes_; ++j, ++e) {
            double s1 = 0, s2 = 0;
            for (int64_t v = 0; v < per_class_[static_cast<size_t>(i)]; ++v) {
              int64_t col = starts_[static_cast<size_t>(i)] + v;
              s1 += svm_.coef[static_cast<size_t>((j - 1) * vectors_ + col)] * kern[static_cast<size_t>(col)];
            }
            for (int64_t v = 0; v < per_class_[static_cast<size_t>(j)]; ++v) {
              int64_t col = starts_[static_cast<size_t>(j)] + v;
              s2 += svm_.coef[static_cast<size_t>(i * vectors_ + col)] * kern[static_cast<size_t>(col)];
            }
            double s = svm_.rho[static_cast<size_t>(e)] + s1 + s2;
            scores.push_back(s);
            votes[static_cast<size_t>(s > 0 ? i : j)] += 1;
          }
        }
      } else {
        for (int64_t c = 0; c < classes_; ++c) scores.push_back(dot(xr, svm_.coef.data() + c * x.c, x.c) + svm_.rho[0]);
      }
      if (has_proba) {
        std::vector<double> pr(static_cast<size_t>(classes_ * classes_), 0.0);
        int64_t e = 0;
        for (int64_t i = 0; i < classes_; ++i) {
          for (int64_t j = i + 1; j < classes_; ++j, ++e) {
            double val = scores[static_cast<size_t>(e)] * prob_a_[static_cast<size_t>(e)] + prob_b_[static_cast<size_t>(e)];
            double p = 1 - ml::logistic(val);
            p = std::min(std::max(p, 1e-7), 1 - 1e-7);
            pr[static_cast<size_t>(i * classes_ + j)] = p;
            pr[static_cast<size_t>(j * classes_ + i)] = 1 - p;
          }
        }
        scores = multiclass_probability(classes_, pr);
      }
      const std::vector<double>& pick = votes.empty() ? scores : votes;
      int64_t max_class = pick.empty() ? 0 : std::max_element(pick.begin(), pick.end()) - pick.begin();
      double max_weight = pick.empty() ? 0 : pick[static_cast<size_t>(max_class)];
      int add_second = -1;
      int64_t idx = max_class;
      if (svm_.rho.size() == 1) {
        if (labels_.size() == 2) {
          add_second = 2;
          if (!has_proba && all_positive_ && max_weight >= 0.5) idx = 1;
        } else {
          idx = max_weight > 0 ? 1 : 0;
          raw_label = true;
        }
      }
      label[static_cast<size_t>(r)] = idx;
      out_rows[static_cast<size_t>(r)] = write_scores(scores, add_second);
    }
    int64_t width = out_rows.empty() ? (svc && !has_proba ? classes_ * (classes_ - 1) / 2 : classes_)
                                     : static_cast<int64_t>(out_rows[0].size());
    if (ctx.output_requested(1)) {
      NXRT_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(1, DataType::kFloat, {x.n, width}));
      for (int64_t r = 0; r < x.n; ++r) {
        for (int64_t c = 0; c < width; ++c) z->data<float>()[r * width + c] = static_cast<float>(out_rows[static_cast<size_t>(r)][static_cast<size_t>(c)]);
      }
    }
    if (raw_label || labels_.size() == 0) {
      ml::Labels raw;  // label value = index
      return ml::write_labels(ctx, 0, raw, label);
    }
    for (int64_t v : label) {
      if (v < 0 || v >= static_cast<int64_t>(labels_.size())) {
        return ctx.error("predicted class " + std::to_string(v) + " has no label", StatusCode::kInvalidModel);
      }
    }
    return ml::write_labels(ctx, 0, labels_, label);
  }

 private:
  std::vector<double> write_scores(std::vector<double> s, int add_second) const {
    if (s.size() >= 2) {
      ml::apply_post_transform(svm_.post, s.data(), static_cast<int64_t>(s.size()));
      return s;
    }
    if (s.size() == 1) {
      double v = s[0];
      if (svm_.post == PostTransform::kProbit) return {ml::probit(v)};
      if (add_second == 0 || add_second == 1) return {1 - v, v};
      if (add_second == 2 || add_second == 3) {
        std::vector<double> two{-v, v};
        ml::apply_post_transform(svm_.post, two.data(), 2);
        return two;
      }
    }
    return s;
  }

  SvmCommon svm_;
  ml::Labels labels_;
  int64_t classes_ = 1, vectors_ = 0;
  std::vector<int64_t> starts_, per_class_;
  std::vector<double> prob_a_, prob_b_;
  bool all_positive_ = true;
};

}  // namespace

void register_ml_linear_ops(ep::KernelRegistry& r) {
  r.add_class<LinearRegressorKernel>("ai.onnx.ml", "LinearRegressor", 1);
  r.add_class<LinearClassifierKernel>("ai.onnx.ml", "LinearClassifier", 1);
  r.add_class<SVMRegressorKernel>("ai.onnx.ml", "SVMRegressor", 1);
  r.add_class<SVMClassifierKernel>("ai.onnx.ml", "SVMClassifier", 1);
}

}  // namespace nxrt::ops
