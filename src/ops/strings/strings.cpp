// String ops: StringConcat, StringNormalizer, StringSplit, RegexFullMatch (RE2, linear time), and
// TfIdfVectorizer (strings/tfidf.cpp).
//
// Case mapping does not use std::locale (a machine may have no locales installed): StringNormalizer
// maps code points itself (strings/unicode_case.cpp) and accepts but ignores the `locale` attribute.
#if NXRT_HAVE_RE2
#include <re2/re2.h>
#endif

#include <algorithm>
#include <memory>
#include <unordered_set>

#include "ops/common.h"
#include "ops/strings/strings_util.h"

namespace nxrt::ops {

void register_tfidf_ops(ep::KernelRegistry& r);  // strings/tfidf.cpp

namespace {

Status require_string_input(ep::KernelContext& ctx, size_t i) {
  NXRT_ASSIGN_OR_RETURN(const Tensor& t, ctx.required_tensor(i, nullptr));
  if (t.dtype() != DataType::kString) {
    return ctx.error("input " + std::to_string(i) + " must be a string tensor, got " + t.describe(),
                     StatusCode::kInvalidArgument);
  }
  return Status::Ok();
}

// ---- StringConcat (opset 20): numpy-broadcast elementwise concatenation.
Status string_concat(ep::KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(require_string_input(ctx, 0));
  NXRT_RETURN_IF_ERROR(require_string_input(ctx, 1));
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  Dims out_shape;
  if (!broadcast_shapes(a.shape(), b.shape(), &out_shape)) {
    return ctx.error("shapes " + shape_to_string(a.shape()) + " and " + shape_to_string(b.shape()) + " do not broadcast",
                     StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kString, out_shape));
  const std::string* pa = a.string_data();
  const std::string* pb = b.string_data();
  std::string* py = y->string_data();
  int64_t n = shape_numel(out_shape);
  if (n == 0) return Status::Ok();
  int64_t na = a.numel(), nb = b.numel();
  if (na == n && nb == n) {
    for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
    return Status::Ok();
  }
  if (nb == 1 && na == n) {
    for (int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[0];
    return Status::Ok();
  }
  if (na == 1 && nb == n) {
    for (int64_t i = 0; i < n; ++i) py[i] = pa[0] + pb[i];
    return Status::Ok();
  }
  // General broadcast: walk the output with an odometer over all but the last axis.
  Dims sa = broadcast_strides(a.shape(), out_shape), sb = broadcast_strides(b.shape(), out_shape);
  size_t r = out_shape.size();
  int64_t inner = out_shape[r - 1], ia_step = sa[r - 1], ib_step = sb[r - 1];
  auto rows = strided_cursor(out_shape, r - 1, sa, sb);
  for (int64_t o = 0; o < n; o += inner, rows.next()) {
    const int64_t oa = rows.offset(0), ob = rows.offset(1);
    for (int64_t k = 0; k < inner; ++k) py[o + k] = pa[oa + k * ia_step] + pb[ob + k * ib_step];
  }
  return Status::Ok();
}

// ---- StringNormalizer (opset 10).
class StringNormalizerKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    std::string action = info.attr_string("case_change_action", "NONE");
    if (action == "LOWER") {
      action_ = kLower;
    } else if (action == "UPPER") {
      action_ = kUpper;
    } else if (action == "NONE") {
      action_ = kNone;
    } else {
      return info.error("case_change_action must be LOWER, UPPER or NONE, got '" + action + "'");
    }
    case_sensitive_ = info.attr_int("is_case_sensitive", 0) != 0;
    // `locale` is accepted and ignored: the case mapping is locale-independent (strings/strings_util.h).
    for (const std::string& w : info.attr_strings("stopwords")) {
      stopwords_.insert(case_sensitive_ ? w : utf8_to_lower(w));
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_RETURN_IF_ERROR(require_string_input(ctx, 0));
    const Tensor& x = ctx.input(0);
    bool two_d = x.rank() == 2;
    if (!(x.rank() == 1 || (two_d && x.dim(0) == 1))) {
      return ctx.error("input must have shape [C] or [1, C], got " + x.describe(), StatusCode::kInvalidArgument);
    }
    const std::string* px = x.string_data();
    int64_t n = x.numel();
    std::vector<const std::string*> kept;
    kept.reserve(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      if (!stopwords_.empty()) {
        bool stop = case_sensitive_ ? stopwords_.count(px[i]) > 0 : stopwords_.count(utf8_to_lower(px[i])) > 0;
        if (stop) continue;
      }
      kept.push_back(&px[i]);
    }
    int64_t c = static_cast<int64_t>(kept.size());
    bool all_dropped = c == 0;
    if (all_dropped) c = 1;  // the spec's "empty value": one empty string
    Dims shape = two_d ? Dims{1, c} : Dims{c};
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kString, shape));
    std::string* py = y->string_data();
    if (all_dropped) {
      py[0].clear();
      return Status::Ok();
    }
    for (size_t i = 0; i < kept.size(); ++i) {
      switch (action_) {
        case kLower: py[i] = utf8_to_lower(*kept[i]); break;
        case kUpper: py[i] = utf8_to_upper(*kept[i]); break;
        case kNone: py[i] = *kept[i]; break;
      }
    }
    return Status::Ok();
  }

 private:
  enum Action { kNone, kLower, kUpper };
  Action action_ = kNone;
  bool case_sensitive_ = false;
  std::unordered_set<std::string> stopwords_;
};

// ---- StringSplit (opset 20): Python str.split semantics.
// Splits on whitespace runs (leading/trailing whitespace dropped); maxsplit < 0 = unlimited.
void split_whitespace(std::string_view s, int64_t maxsplit, std::vector<std::string_view>* parts) {
  size_t i = 0, n = s.size();
  auto space_at = [&](size_t k, size_t* len) {
    uint32_t cp = utf8_decode(s, k, len);
    return cp != 0xFFFFFFFFu && unicode_is_space(cp);
  };
  int64_t splits = 0;
  while (i < n) {
    size_t len = 1;
    while (i < n && space_at(i, &len)) i += len;  // skip leading whitespace
    if (i >= n) break;
    if (maxsplit >= 0 && splits >= maxsplit) {  // the rest (trailing whitespace kept, as Python does)
      parts->push_back(s.substr(i));
      return;
    }
    size_t start = i;
    while (i < n && !space_at(i, &len)) i += len;
    parts->push_back(s.substr(start, i - start));
    ++splits;
  }
}

void split_delimiter(std::string_view s, std::string_view d, int64_t maxsplit, std::vector<std::string_view>* parts) {
  size_t start = 0;
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    size_t p = s.find(d, start);
    if (p == std::string_view::npos) break;
    parts->push_back(s.substr(start, p - start));
    start = p + d.size();
    ++splits;
  }
  parts->push_back(s.substr(start));
}

Status string_split(ep::KernelContext& ctx) {
  NXRT_RETURN_IF_ERROR(require_string_input(ctx, 0));
  const Tensor& x = ctx.input(0);
  const ep::KernelInfo& info = ctx.info();
  std::string delim = info.attr_string("delimiter", "");
  int64_t maxsplit = info.has_attr("maxsplit") ? info.attr_int("maxsplit", -1) : -1;
  if (maxsplit < 0) maxsplit = -1;
  int64_t n = x.numel();
  const std::string* px = x.string_data();
  std::vector<std::vector<std::string_view>> parts(static_cast<size_t>(n));
  int64_t width = 0;
  for (int64_t i = 0; i < n; ++i) {
    auto& p = parts[static_cast<size_t>(i)];
    if (delim.empty()) {
      split_whitespace(px[i], maxsplit, &p);
    } else {
      split_delimiter(px[i], delim, maxsplit, &p);
    }
    width = std::max<int64_t>(width, static_cast<int64_t>(p.size()));
  }
  Dims yshape = x.shape();
  yshape.push_back(width);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kString, yshape));
  std::string* py = y->string_data();
  for (int64_t i = 0; i < n; ++i) {
    const auto& p = parts[static_cast<size_t>(i)];
    for (int64_t k = 0; k < width; ++k) {
      py[i * width + k] = k < static_cast<int64_t>(p.size()) ? std::string(p[static_cast<size_t>(k)]) : std::string();
    }
  }
  if (ctx.output_requested(1)) {
    NXRT_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(1, DataType::kInt64, x.shape()));
    int64_t* pz = z->data<int64_t>();
    for (int64_t i = 0; i < n; ++i) pz[i] = static_cast<int64_t>(parts[static_cast<size_t>(i)].size());
  }
  return Status::Ok();
}

// ---- RegexFullMatch (opset 20): RE2 syntax. RE2 matches in time linear in the input, so a hostile
// pattern cannot stall the runtime; an invalid pattern fails at session creation.
#if NXRT_HAVE_RE2
class RegexFullMatchKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    if (!info.has_attr("pattern")) return info.error("attribute 'pattern' is required");
    std::string pattern = info.attr_string("pattern");
    RE2::Options opts;
    opts.set_log_errors(false);
    re_ = std::make_unique<RE2>(pattern, opts);
    if (!re_->ok()) {
      return info.error("invalid regular expression '" + pattern + "': " + re_->error());
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_RETURN_IF_ERROR(require_string_input(ctx, 0));
    const Tensor& x = ctx.input(0);
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kBool, x.shape()));
    const std::string* px = x.string_data();
    bool* py = y->data<bool>();
    for (int64_t i = 0, n = x.numel(); i < n; ++i) py[i] = RE2::FullMatch(px[i], *re_);
    return Status::Ok();
  }

 private:
  std::unique_ptr<RE2> re_;
};

#else
// Built without RE2 (NXRT_WITH_RE2=OFF): the op is known but refuses at session creation.
class RegexFullMatchKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    return info.error("RegexFullMatch: nxrt was built without RE2 (NXRT_WITH_RE2=OFF)", StatusCode::kNotImplemented);
  }
  Status compute(ep::KernelContext& ctx) const override { return ctx.error("RegexFullMatch: built without RE2"); }
};
#endif

}  // namespace

void register_string_ops(ep::KernelRegistry& r) {
  r.add_fn("", "StringConcat", 20, INT64_MAX, &string_concat);
  r.add_class<StringNormalizerKernel>("", "StringNormalizer", 10);
  r.add_fn("", "StringSplit", 20, INT64_MAX, &string_split);
  r.add_class<RegexFullMatchKernel>("", "RegexFullMatch", 20);
  register_tfidf_ops(r);
}

}  // namespace nxrt::ops
