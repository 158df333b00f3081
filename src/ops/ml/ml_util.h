// Shared pieces of the ai.onnx.ml kernels: post-transforms, reading numeric inputs as [N, C] doubles,
// class-label outputs.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "ops/common.h"

namespace nxrt::ops::ml {

enum class PostTransform { kNone = 0, kSoftmax = 1, kLogistic = 2, kSoftmaxZero = 3, kProbit = 4 };

// Parses "NONE" / "SOFTMAX" / "LOGISTIC" / "SOFTMAX_ZERO" / "PROBIT".
bool parse_post_transform(const std::string& s, PostTransform* out);
// Reads the `post_transform` attribute (string, or int for TreeEnsemble opset 5).
Status read_post_transform(const ep::KernelInfo& info, PostTransform* out);

double logistic(double x);
double probit(double p);  // sqrt(2) * erfinv(2p - 1)
// Applies the transform to one row of scores, in place.
void apply_post_transform(PostTransform pt, double* row, int64_t n);

// A numeric input (float, double, float16, bfloat16, any integer) as row-major doubles. Rank 1 [C] is
// one row; rank 2 [N, C]; higher ranks are [dim0, rest]. A scalar is [1, 1].
struct Rows {
  std::vector<double> v;
  int64_t n = 0;
  int64_t c = 0;
  const double* row(int64_t i) const { return v.data() + i * c; }
};
Result<Rows> read_rows(const ep::KernelContext& ctx, size_t i);

// Class labels: int64 or strings (exactly one attribute pair must be set).
struct Labels {
  bool strings = false;
  std::vector<int64_t> ints;
  std::vector<std::string> strs;
  size_t size() const { return strings ? strs.size() : ints.size(); }
};
Status read_labels(const ep::KernelInfo& info, const std::string& ints_name, const std::string& strings_name,
                   Labels* out);
// Allocates the label output [n] and fills it with labels[idx[i]] (idx must be in range).
Status write_labels(ep::KernelContext& ctx, size_t out, const Labels& labels, const std::vector<int64_t>& idx);

// Floats attribute or its double `<name>_as_tensor` twin (tree ensembles); empty when neither.
Result<std::vector<double>> floats_or_tensor(const ep::KernelInfo& info, const std::string& name);

}  // namespace nxrt::ops::ml
