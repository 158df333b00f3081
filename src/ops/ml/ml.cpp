// The ai.onnx.ml domain: the simple transforms here (ArrayFeatureExtractor, Binarizer, CastMap,
// CategoryMapper, DictVectorizer, FeatureVectorizer, Imputer, LabelEncoder, Normalizer, OneHotEncoder,
// Scaler, ZipMap); tree ensembles in ml/tree_ensemble.cpp; linear models and SVMs in ml/linear_svm.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <unordered_map>

#include "ops/common.h"
#include "ops/ml/ml_util.h"

namespace nxrt::ops {

void register_ml_tree_ops(ep::KernelRegistry& r);    // ml/tree_ensemble.cpp
void register_ml_linear_ops(ep::KernelRegistry& r);  // ml/linear_svm.cpp

namespace {

using ml::Rows;

constexpr const char* kMl = "ai.onnx.ml";

Result<const Tensor*> tensor_input(const ep::KernelContext& ctx, size_t i) {
  const Value* v = ctx.input_value(i);
  if (!v || !v->is_tensor()) {
    return ctx.error("input " + std::to_string(i) + " must be a tensor, got " + (v ? v->describe() : "nothing"),
                     StatusCode::kInvalidArgument);
  }
  return &v->tensor();
}

// ---- ArrayFeatureExtractor: picks indices Y along the last axis of X.
Status array_feature_extractor(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
  NXRT_ASSIGN_OR_RETURN(const Tensor* yi, tensor_input(ctx, 1));
  if (yi->dtype() != DataType::kInt64) return ctx.error("indices must be int64, got " + yi->describe(), StatusCode::kInvalidArgument);
  if (x->rank() == 0) return ctx.error("X must have rank >= 1, got a scalar", StatusCode::kInvalidArgument);
  int64_t last = x->dim(-1);
  const int64_t* idx = yi->data<int64_t>();
  int64_t k = yi->numel();
  for (int64_t j = 0; j < k; ++j) {
    if (idx[j] < 0 || idx[j] >= last) {
      return ctx.error("index " + std::to_string(idx[j]) + " is out of range for the last axis of " + x->describe(),
                       StatusCode::kInvalidArgument);
    }
  }
  Dims shape = x->shape();
  shape.back() = k;
  if (x->rank() == 1) shape = {1, k};
  int64_t rows = last == 0 ? 0 : x->numel() / last;
  if (last == 0) {
    rows = 1;
    for (int64_t d = 0; d + 1 < x->rank(); ++d) rows *= x->dim(d);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * z, ctx.allocate_output(0, x->dtype(), shape));
  if (x->dtype() == DataType::kString) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j) z->string_data()[r * k + j] = x->string_data()[r * last + idx[j]];
    return Status::Ok();
  }
  return dispatch_by_size(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x->data<T>();
    T* pz = z->data<T>();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < k; ++j) pz[r * k + j] = px[r * last + idx[j]];
    return Status::Ok();
  }, [&] { return ctx.error(std::string("unsupported dtype ") + dtype_name(x->dtype()), StatusCode::kNotImplemented); });
}

// ---- Binarizer: x > threshold ? 1 : 0, same dtype.
Status binarizer(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
  double th = ctx.info().attr_float("threshold", 0.0f);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x->dtype(), x->shape()));
  return dispatch_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* px = x->data<T>();
    T* py = y->data<T>();
    for (int64_t i = 0, n = x->numel(); i < n; ++i) {
      py[i] = static_cast<T>(static_cast<C>(static_cast<double>(static_cast<C>(px[i])) > th ? 1 : 0));
    }
    return Status::Ok();
  }, [&] { return ctx.error("X must be numeric, got " + x->describe(), StatusCode::kInvalidArgument); });
}

// ---- Normalizer: per row MAX (divide by max |x|, as scikit-learn and the ONNX reference do), L1
// (sum |x|), L2 (sqrt of sum x^2); a zero divisor leaves the row unchanged. Output float.
Status normalizer(ep::KernelContext& ctx) {
  std::string norm = ctx.info().attr_string("norm", "MAX");
  if (norm != "MAX" && norm != "L1" && norm != "L2") {
    return ctx.error("norm must be MAX, L1 or L2, got '" + norm + "'", StatusCode::kInvalidModel);
  }
  NXRT_ASSIGN_OR_RETURN(Rows x, ml::read_rows(ctx, 0));
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, ctx.input(0).shape()));
  float* py = y->data<float>();
  for (int64_t r = 0; r < x.n; ++r) {
    const double* row = x.row(r);
    double d = 0;
    if (norm == "MAX") {
      for (int64_t j = 0; j < x.c; ++j) d = std::max(d, std::fabs(row[j]));
    } else if (norm == "L1") {
      for (int64_t j = 0; j < x.c; ++j) d += std::fabs(row[j]);
    } else {
      for (int64_t j = 0; j < x.c; ++j) d += row[j] * row[j];
      d = std::sqrt(d);
    }
    for (int64_t j = 0; j < x.c; ++j) py[r * x.c + j] = static_cast<float>(d == 0 ? row[j] : row[j] / d);
  }
  return Status::Ok();
}

// ---- Scaler: (x - offset) * scale; offset/scale of length 1 or C. Output float.
Status scaler(ep::KernelContext& ctx) {
  std::vector<float> offset = ctx.info().attr_floats("offset"), scale = ctx.info().attr_floats("scale");
  NXRT_ASSIGN_OR_RETURN(Rows x, ml::read_rows(ctx, 0));
  auto ok_len = [&](size_t n) { return n == 0 || n == 1 || static_cast<int64_t>(n) == x.c; };
  if (!ok_len(offset.size()) || !ok_len(scale.size())) {
    return ctx.error("offset (" + std::to_string(offset.size()) + ") and scale (" + std::to_string(scale.size()) +
                         ") must have length 1 or the feature count " + std::to_string(x.c),
                     StatusCode::kInvalidModel);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, ctx.input(0).shape()));
  float* py = y->data<float>();
  for (int64_t r = 0; r < x.n; ++r) {
    for (int64_t j = 0; j < x.c; ++j) {
      double o = offset.empty() ? 0.0 : offset[offset.size() == 1 ? 0 : static_cast<size_t>(j)];
      double s = scale.empty() ? 1.0 : scale[scale.size() == 1 ? 0 : static_cast<size_t>(j)];
      py[r * x.c + j] = static_cast<float>((x.row(r)[j] - o) * s);
    }
  }
  return Status::Ok();
}

// ---- Imputer: replaces `replaced_value_*` (NaN matches NaN) by imputed_value_* (length 1 or C).
Status imputer(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
  const ep::KernelInfo& info = ctx.info();
  bool is_float = dtype_is_float(x->dtype());
  int64_t c = x->rank() == 0 ? 1 : x->dim(-1);
  std::vector<double> imputed;
  if (is_float) {
    for (float f : info.attr_floats("imputed_value_floats")) imputed.push_back(f);
  } else {
    for (int64_t v : info.attr_ints("imputed_value_int64s")) imputed.push_back(static_cast<double>(v));
  }
  if (imputed.size() != 1 && static_cast<int64_t>(imputed.size()) != c) {
    return ctx.error(std::string("imputed_value_") + (is_float ? "floats" : "int64s") + " has " +
                         std::to_string(imputed.size()) + " values; expected 1 or the feature count " +
                         std::to_string(c) + " for " + x->describe(),
                     StatusCode::kInvalidModel);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x->dtype(), x->shape()));
  return dispatch_numeric(x->dtype(), [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const T* px = x->data<T>();
    T* py = y->data<T>();
    int64_t n = x->numel();
    if constexpr (std::is_floating_point_v<C>) {
      double rep = info.attr_float("replaced_value_float", 0.0f);
      bool rep_nan = std::isnan(rep);
      for (int64_t i = 0; i < n; ++i) {
        double v = static_cast<C>(px[i]);
        bool hit = rep_nan ? std::isnan(v) : v == rep;
        py[i] = hit ? static_cast<T>(static_cast<C>(imputed[imputed.size() == 1 ? 0 : static_cast<size_t>(i % c)])) : px[i];
      }
    } else {
      int64_t rep = info.attr_int("replaced_value_int64", 0);
      for (int64_t i = 0; i < n; ++i) {
        bool hit = static_cast<int64_t>(px[i]) == rep;
        py[i] = hit ? static_cast<T>(imputed[imputed.size() == 1 ? 0 : static_cast<size_t>(i % c)]) : px[i];
      }
    }
    return Status::Ok();
  }, [&] { return ctx.error("X must be numeric, got " + x->describe(), StatusCode::kInvalidArgument); });
}

// ---- OneHotEncoder: appends a category axis; numeric inputs are truncated to int64.
Status one_hot_encoder(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
  const ep::KernelInfo& info = ctx.info();
  bool has_i = info.has_attr("cats_int64s"), has_s = info.has_attr("cats_strings");
  if (has_i == has_s) return ctx.error("exactly one of cats_int64s and cats_strings must be set", StatusCode::kInvalidModel);
  bool zeros = info.attr_int("zeros", 1) != 0;
  std::unordered_map<int64_t, int64_t> imap;
  std::unordered_map<std::string, int64_t> smap;
  int64_t ncat = 0;
  if (has_i) {
    for (int64_t v : info.attr_ints("cats_int64s")) imap.emplace(v, ncat++);
  } else {
    for (const auto& s : info.attr_strings("cats_strings")) smap.emplace(s, ncat++);
  }
  bool str_in = x->dtype() == DataType::kString;
  if (str_in != has_s) {
    return ctx.error(std::string("input ") + x->describe() + " does not match the " + (has_s ? "string" : "integer") +
                         " categories",
                     StatusCode::kInvalidArgument);
  }
  std::vector<int64_t> hot(static_cast<size_t>(x->numel()), -1);
  if (str_in) {
    for (int64_t i = 0; i < x->numel(); ++i) {
      auto it = smap.find(x->string_data()[i]);
      if (it != smap.end()) hot[static_cast<size_t>(i)] = it->second;
    }
  } else {
    NXRT_ASSIGN_OR_RETURN(Rows r, ml::read_rows(ctx, 0));
    for (size_t i = 0; i < r.v.size(); ++i) {
      double d = r.v[i];
      if (!std::isfinite(d)) continue;
      auto it = imap.find(static_cast<int64_t>(d));
      if (it != imap.end()) hot[i] = it->second;
    }
  }
  if (!zeros) {
    for (size_t i = 0; i < hot.size(); ++i) {
      if (hot[i] < 0) return ctx.error("input element " + std::to_string(i) + " is not a known category and zeros=0");
    }
  }
  Dims shape = x->shape();
  shape.push_back(ncat);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, shape));
  float* py = y->data<float>();
  std::fill(py, py + y->numel(), 0.0f);
  for (size_t i = 0; i < hot.size(); ++i) {
    if (hot[i] >= 0) py[static_cast<int64_t>(i) * ncat + hot[i]] = 1.0f;
  }
  return Status::Ok();
}

// ---- CategoryMapper: string -> int64 (cats_strings -> cats_int64s) or int64 -> string.
Status category_mapper(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
  const ep::KernelInfo& info = ctx.info();
  std::vector<int64_t> ints = info.attr_ints("cats_int64s");
  std::vector<std::string> strs = info.attr_strings("cats_strings");
  if (ints.size() != strs.size()) {
    return ctx.error("cats_int64s (" + std::to_string(ints.size()) + ") and cats_strings (" +
                         std::to_string(strs.size()) + ") must have the same length",
                     StatusCode::kInvalidModel);
  }
  int64_t n = x->numel();
  if (x->dtype() == DataType::kString) {
    std::unordered_map<std::string, int64_t> m;
    for (size_t i = 0; i < strs.size(); ++i) m[strs[i]] = ints[i];
    int64_t dflt = info.attr_int("default_int64", -1);
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt64, x->shape()));
    for (int64_t i = 0; i < n; ++i) {
      auto it = m.find(x->string_data()[i]);
      y->data<int64_t>()[i] = it == m.end() ? dflt : it->second;
    }
    return Status::Ok();
  }
  if (x->dtype() != DataType::kInt64) {
    return ctx.error("input must be string or int64, got " + x->describe(), StatusCode::kInvalidArgument);
  }
  std::unordered_map<int64_t, std::string> m;
  for (size_t i = 0; i < ints.size(); ++i) m[ints[i]] = strs[i];
  std::string dflt = info.attr_string("default_string", "_Unused");
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kString, x->shape()));
  for (int64_t i = 0; i < n; ++i) {
    auto it = m.find(x->data<int64_t>()[i]);
    y->string_data()[i] = it == m.end() ? dflt : it->second;
  }
  return Status::Ok();
}

// ---- FeatureVectorizer: concatenates [N, C_i] inputs into [N, sum(inputdimensions)] float; an input
// with more columns than its declared dimension is truncated, fewer is zero-padded.
Status feature_vectorizer(ep::KernelContext& ctx) {
  std::vector<int64_t> dims = ctx.info().attr_ints("inputdimensions");
  size_t nin = ctx.num_inputs();
  if (dims.size() != nin) {
    return ctx.error("inputdimensions has " + std::to_string(dims.size()) + " entries for " + std::to_string(nin) +
                         " inputs",
                     StatusCode::kInvalidModel);
  }
  int64_t total = 0;
  for (int64_t d : dims) {
    if (d < 0) return ctx.error("inputdimensions must be non-negative", StatusCode::kInvalidModel);
    total += d;
  }
  std::vector<Rows> rows;
  int64_t n = -1;
  for (size_t i = 0; i < nin; ++i) {
    NXRT_ASSIGN_OR_RETURN(Rows r, ml::read_rows(ctx, i));
    if (n >= 0 && r.n != n) {
      return ctx.error("inputs have different batch sizes (" + std::to_string(n) + " vs " + std::to_string(r.n) + ")",
                       StatusCode::kInvalidArgument);
    }
    n = r.n;
    rows.push_back(std::move(r));
  }
  if (n < 0) n = 0;
  bool one_d = nin > 0 && ctx.input(0).rank() == 1;
  Dims shape = one_d ? Dims{total} : Dims{n, total};
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, shape));
  float* py = y->data<float>();
  std::fill(py, py + y->numel(), 0.0f);
  int64_t off = 0;
  for (size_t i = 0; i < nin; ++i) {
    int64_t w = std::min(dims[i], rows[i].c);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < w; ++j) py[r * total + off + j] = static_cast<float>(rows[i].row(r)[j]);
    off += dims[i];
  }
  return Status::Ok();
}

// ---- ZipMap: [N, C] float -> sequence of N maps {label_j: x[n, j]}.
Status zip_map(ep::KernelContext& ctx) {
  NXRT_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
  const ep::KernelInfo& info = ctx.info();
  ml::Labels labels;
  NXRT_RETURN_IF_ERROR(ml::read_labels(info, "classlabels_int64s", "classlabels_strings", &labels));
  if (!info.has_attr("classlabels_int64s") && !info.has_attr("classlabels_strings")) {
    return ctx.error("one of classlabels_int64s and classlabels_strings must be set", StatusCode::kInvalidModel);
  }
  if (x->dtype() != DataType::kFloat) return ctx.error("X must be float, got " + x->describe(), StatusCode::kInvalidArgument);
  if (x->rank() != 1 && x->rank() != 2) return ctx.error("X must be 1-D or 2-D, got " + x->describe(), StatusCode::kInvalidArgument);
  int64_t c = x->dim(-1), n = x->rank() == 2 ? x->dim(0) : 1;
  if (c != static_cast<int64_t>(labels.size())) {
    return ctx.error("X has " + std::to_string(c) + " columns but there are " + std::to_string(labels.size()) +
                         " class labels",
                     StatusCode::kInvalidArgument);
  }
  std::vector<Value> items;
  items.reserve(static_cast<size_t>(n));
  const float* px = x->data<float>();
  for (int64_t r = 0; r < n; ++r) {
    MapValue m;
    m.key_type = labels.strings ? DataType::kString : DataType::kInt64;
    m.value_type = DataType::kFloat;
    if (labels.strings) {
      m.string_keys = labels.strs;
    } else {
      m.int_keys = labels.ints;
    }
    m.values = Tensor(DataType::kFloat, {c});
    std::copy(px + r * c, px + (r + 1) * c, m.values.data<float>());
    items.push_back(Value::map(std::move(m)));
  }
  return ctx.set_output(0, Value::sequence(std::move(items)));
}

// ---- DictVectorizer: map -> [1, V] (a sequence of maps -> [N, V]) by the vocabulary.
Status dict_vectorizer(ep::KernelContext& ctx) {
  const Value* in = ctx.input_value(0);
  const ep::KernelInfo& info = ctx.info();
  bool has_i = info.has_attr("int64_vocabulary"), has_s = info.has_attr("string_vocabulary");
  if (has_i == has_s) return ctx.error("exactly one of int64_vocabulary and string_vocabulary must be set", StatusCode::kInvalidModel);
  std::vector<int64_t> ivoc = info.attr_ints("int64_vocabulary");
  std::vector<std::string> svoc = info.attr_strings("string_vocabulary");
  int64_t v = static_cast<int64_t>(has_s ? svoc.size() : ivoc.size());
  std::unordered_map<int64_t, int64_t> imap;
  std::unordered_map<std::string, int64_t> smap;
  for (int64_t i = 0; i < v; ++i) {
    if (has_s) {
      smap.emplace(svoc[static_cast<size_t>(i)], i);
    } else {
      imap.emplace(ivoc[static_cast<size_t>(i)], i);
    }
  }
  std::vector<const MapValue*> maps;
  if (in && in->is_map()) {
    maps.push_back(&in->map_value());
  } else if (in && in->is_sequence()) {
    for (const Value& it : in->items()) {
      if (!it.is_map()) return ctx.error("input sequence must hold maps", StatusCode::kInvalidArgument);
      maps.push_back(&it.map_value());
    }
  } else {
    return ctx.error("input must be a map, got " + (in ? in->describe() : std::string("nothing")), StatusCode::kInvalidArgument);
  }
  DataType vt = maps.empty() ? DataType::kFloat : maps[0]->values.dtype();
  for (const MapValue* m : maps) {
    if ((m->key_type == DataType::kString) != has_s) {
      return ctx.error("map key type does not match the vocabulary", StatusCode::kInvalidArgument);
    }
    if (m->values.dtype() != vt) return ctx.error("maps have different value types", StatusCode::kInvalidArgument);
  }
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, vt, {static_cast<int64_t>(maps.size()), v}));
  for (size_t r = 0; r < maps.size(); ++r) {
    const MapValue& m = *maps[r];
    int64_t nk = m.values.numel();
    for (int64_t k = 0; k < nk; ++k) {
      int64_t col = -1;
      if (has_s) {
        if (static_cast<size_t>(k) >= m.string_keys.size()) break;
        auto it = smap.find(m.string_keys[static_cast<size_t>(k)]);
        if (it != smap.end()) col = it->second;
      } else {
        if (static_cast<size_t>(k) >= m.int_keys.size()) break;
        auto it = imap.find(m.int_keys[static_cast<size_t>(k)]);
        if (it != imap.end()) col = it->second;
      }
      if (col < 0) continue;  // keys outside the vocabulary are dropped
      int64_t o = static_cast<int64_t>(r) * v + col;
      if (vt == DataType::kString) {
        y->string_data()[o] = m.values.string_data()[k];
      } else {
        NXRT_RETURN_IF_ERROR(dispatch_by_size(vt, [&](auto tag) {
          using T = decltype(tag);
          y->data<T>()[o] = m.values.data<T>()[k];
          return Status::Ok();
        }, [&] { return ctx.error("unsupported map value type", StatusCode::kNotImplemented); }));
      }
    }
  }
  return Status::Ok();
}

// ---- CastMap: map(int64 -> float|string) -> 1-D tensor ordered by key (DENSE) or indexed by key (SPARSE).
Status cast_map(ep::KernelContext& ctx) {
  const Value* in = ctx.input_value(0);
  if (!in || !in->is_map()) return ctx.error("input must be a map", StatusCode::kInvalidArgument);
  const MapValue& m = in->map_value();
  if (m.key_type != DataType::kInt64) return ctx.error("map keys must be int64", StatusCode::kInvalidArgument);
  const ep::KernelInfo& info = ctx.info();
  std::string to = info.attr_string("cast_to", "TO_FLOAT"), form = info.attr_string("map_form", "DENSE");
  int64_t max_map = info.attr_int("max_map", 1);
  DataType od = to == "TO_FLOAT" ? DataType::kFloat : to == "TO_INT64" ? DataType::kInt64 :
                to == "TO_STRING" ? DataType::kString : DataType::kUndefined;
  if (od == DataType::kUndefined) return ctx.error("cast_to must be TO_FLOAT, TO_INT64 or TO_STRING, got '" + to + "'", StatusCode::kInvalidModel);
  if (form != "DENSE" && form != "SPARSE") return ctx.error("map_form must be DENSE or SPARSE, got '" + form + "'", StatusCode::kInvalidModel);
  std::map<int64_t, int64_t> order;  // key -> position in the map
  for (size_t i = 0; i < m.int_keys.size() && static_cast<int64_t>(i) < m.values.numel(); ++i) order[m.int_keys[i]] = static_cast<int64_t>(i);
  bool sparse = form == "SPARSE";
  int64_t len = sparse ? max_map : static_cast<int64_t>(order.size());
  if (len < 0) return ctx.error("max_map must be non-negative", StatusCode::kInvalidModel);
  NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, od, {1, len}));
  bool str_vals = m.values.dtype() == DataType::kString;
  std::vector<double> nums;
  if (!str_vals) {
    auto r = read_double_values(m.values);
    if (!r.ok()) return ctx.error("map values must be float or string", StatusCode::kInvalidArgument);
    nums = std::move(r).value();
  }
  if (od != DataType::kString) std::fill_n(static_cast<char*>(y->raw_data()), y->nbytes(), 0);
  int64_t pos = 0;
  for (const auto& [key, i] : order) {
    int64_t o = sparse ? key : pos++;
    if (o < 0 || o >= len) {
      if (sparse) return ctx.error("key " + std::to_string(key) + " is outside [0, max_map=" + std::to_string(len) + ")", StatusCode::kInvalidArgument);
      continue;
    }
    if (od == DataType::kString) {
      y->string_data()[o] = str_vals ? m.values.string_data()[i] : std::to_string(nums[static_cast<size_t>(i)]);
    } else {
      double d = str_vals ? std::strtod(m.values.string_data()[i].c_str(), nullptr) : nums[static_cast<size_t>(i)];
      if (od == DataType::kFloat) {
        y->data<float>()[o] = static_cast<float>(d);
      } else {
        y->data<int64_t>()[o] = static_cast<int64_t>(d);
      }
    }
  }
  return Status::Ok();
}

// ---- LabelEncoder.
// Opset 1: classes_strings; string -> index (default_int64), int64 -> classes_strings[i] (default_string).
// Opset 2+: keys_* -> values_* with default_*; opset 4 adds keys_tensor / values_tensor / default_tensor.
// Float keys match by value with every NaN equal to every NaN; a repeated key: the last one wins.
class LabelEncoderKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    if (info.opset() < 2) return init_v1(info);
    const char* key_attrs[] = {"keys_strings", "keys_int64s", "keys_floats", "keys_tensor"};
    const char* val_attrs[] = {"values_strings", "values_int64s", "values_floats", "values_tensor"};
    int nk = 0, nv = 0;
    for (const char* a : key_attrs) nk += info.has_attr(a);
    for (const char* a : val_attrs) nv += info.has_attr(a);
    if (nk != 1) return info.error("exactly one keys_* attribute must be set, got " + std::to_string(nk));
    if (nv != 1) return info.error("exactly one values_* attribute must be set, got " + std::to_string(nv));
    // Keys.
    Tensor keys;
    if (info.has_attr("keys_strings")) {
      auto s = info.attr_strings("keys_strings");
      keys = Tensor(DataType::kString, {static_cast<int64_t>(s.size())});
      for (size_t i = 0; i < s.size(); ++i) keys.string_data()[i] = s[i];
    } else if (info.has_attr("keys_int64s")) {
      keys = Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(info.attr_ints("keys_int64s").size())}, info.attr_ints("keys_int64s"));
    } else if (info.has_attr("keys_floats")) {
      keys = Tensor::from_vector<float>(DataType::kFloat, {static_cast<int64_t>(info.attr_floats("keys_floats").size())}, info.attr_floats("keys_floats"));
    } else {
      const Tensor* t = info.attr_tensor("keys_tensor");
      if (!t) return info.error("keys_tensor must be a tensor attribute");
      keys = t->contiguous();
    }
    // Values.
    if (info.has_attr("values_strings")) {
      auto s = info.attr_strings("values_strings");
      values_ = Tensor(DataType::kString, {static_cast<int64_t>(s.size())});
      for (size_t i = 0; i < s.size(); ++i) values_.string_data()[i] = s[i];
    } else if (info.has_attr("values_int64s")) {
      auto v = info.attr_ints("values_int64s");
      values_ = Tensor::from_vector<int64_t>(DataType::kInt64, {static_cast<int64_t>(v.size())}, v);
    } else if (info.has_attr("values_floats")) {
      auto v = info.attr_floats("values_floats");
      values_ = Tensor::from_vector<float>(DataType::kFloat, {static_cast<int64_t>(v.size())}, v);
    } else {
      const Tensor* t = info.attr_tensor("values_tensor");
      if (!t) return info.error("values_tensor must be a tensor attribute");
      values_ = t->contiguous();
    }
    if (keys.numel() != values_.numel()) {
      return info.error("keys (" + std::to_string(keys.numel()) + ") and values (" + std::to_string(values_.numel()) +
                        ") must have the same length");
    }
    // Default.
    DataType vt = values_.dtype();
    if (const Tensor* d = info.attr_tensor("default_tensor")) {
      if (d->dtype() != vt || d->numel() != 1) {
        return info.error("default_tensor must hold one " + std::string(dtype_name(vt)) + ", got " + d->describe());
      }
      default_ = d->contiguous();
    } else if (vt == DataType::kString) {
      default_ = Tensor(DataType::kString, {1});
      default_.string_data()[0] = info.attr_string("default_string", "_Unused");
    } else if (dtype_is_float(vt)) {
      NXRT_RETURN_IF_ERROR(make_default(info, vt, static_cast<double>(info.attr_float("default_float", -0.0f))));
    } else {
      NXRT_RETURN_IF_ERROR(make_default(info, vt, static_cast<double>(info.attr_int("default_int64", -1))));
    }
    // Index the keys.
    key_type_ = keys.dtype();
    int64_t n = keys.numel();
    if (key_type_ == DataType::kString) {
      for (int64_t i = 0; i < n; ++i) str_keys_[keys.string_data()[i]] = i;
    } else if (dtype_is_float(key_type_)) {
      auto v = read_double_values(keys);
      if (!v.ok()) return info.error("keys: " + v.status().message());
      for (int64_t i = 0; i < n; ++i) float_keys_[canon(v.value()[static_cast<size_t>(i)])] = i;
    } else {
      auto v = read_int_values(keys);
      if (!v.ok()) return info.error("keys: " + v.status().message());
      for (int64_t i = 0; i < n; ++i) int_keys_[v.value()[static_cast<size_t>(i)]] = i;
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(const Tensor* x, tensor_input(ctx, 0));
    DataType xt = x->dtype();
    if (v1_) {
      if (xt != DataType::kString && xt != DataType::kInt64) {
        return ctx.error("input must be string or int64, got " + x->describe(), StatusCode::kInvalidArgument);
      }
      return emit_v1(ctx, x->shape());
    }
    bool ok = key_type_ == DataType::kString ? xt == DataType::kString
              : dtype_is_float(key_type_)    ? dtype_is_float(xt)
                                             : (dtype_is_integer(xt));
    if (!ok) {
      return ctx.error(std::string("input ") + x->describe() + " does not match the " + dtype_name(key_type_) + " keys",
                       StatusCode::kInvalidArgument);
    }
    int64_t n = x->numel();
    std::vector<int64_t> hit(static_cast<size_t>(n), -1);
    if (xt == DataType::kString) {
      for (int64_t i = 0; i < n; ++i) {
        auto it = str_keys_.find(x->string_data()[i]);
        if (it != str_keys_.end()) hit[static_cast<size_t>(i)] = it->second;
      }
    } else if (dtype_is_float(xt)) {
      NXRT_ASSIGN_OR_RETURN(auto v, read_double_values(*x));
      for (int64_t i = 0; i < n; ++i) {
        auto it = float_keys_.find(canon(v[static_cast<size_t>(i)]));
        if (it != float_keys_.end()) hit[static_cast<size_t>(i)] = it->second;
      }
    } else {
      NXRT_ASSIGN_OR_RETURN(auto v, read_int_values(*x));
      for (int64_t i = 0; i < n; ++i) {
        auto it = int_keys_.find(v[static_cast<size_t>(i)]);
        if (it != int_keys_.end()) hit[static_cast<size_t>(i)] = it->second;
      }
    }
    return emit(ctx, x->shape(), hit);
  }

 private:
  Status init_v1(const ep::KernelInfo& info) {
    classes_ = info.attr_strings("classes_strings");
    v1_ = true;
    v1_default_int_ = info.attr_int("default_int64", -1);
    v1_default_str_ = info.attr_string("default_string", "_Unused");
    for (size_t i = 0; i < classes_.size(); ++i) str_keys_.emplace(classes_[i], static_cast<int64_t>(i));
    return Status::Ok();
  }

  Status make_default(const ep::KernelInfo& info, DataType vt, double d) {
    default_ = Tensor(vt, {1});
    return dispatch_numeric(vt, [&](auto tag) {
      using T = decltype(tag);
      default_.data<T>()[0] = from_compute<T>(d);
      return Status::Ok();
    }, [&] { return info.error(std::string("unsupported values dtype ") + dtype_name(vt)); });
  }

  // Maps every NaN to one key; -0.0 and 0.0 stay distinct bit patterns but compare by value here.
  static uint64_t canon(double d) {
    if (std::isnan(d)) return 0x7FF8000000000000ull;
    if (d == 0) d = 0;
    uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
  }

  Status emit(ep::KernelContext& ctx, const Dims& shape, const std::vector<int64_t>& hit) const {
    DataType vt = values_.dtype();
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, vt, shape));
    if (vt == DataType::kString) {
      for (size_t i = 0; i < hit.size(); ++i) {
        y->string_data()[i] = hit[i] < 0 ? default_.string_data()[0] : values_.string_data()[hit[i]];
      }
      return Status::Ok();
    }
    return dispatch_by_size(vt, [&](auto tag) {
      using T = decltype(tag);
      const T* pv = values_.data<T>();
      T d = default_.data<T>()[0];
      T* py = y->data<T>();
      for (size_t i = 0; i < hit.size(); ++i) py[i] = hit[i] < 0 ? d : pv[hit[i]];
      return Status::Ok();
    }, [&] { return ctx.error(std::string("unsupported values dtype ") + dtype_name(vt), StatusCode::kNotImplemented); });
  }

  Status emit_v1(ep::KernelContext& ctx, const Dims& shape) const {
    const Tensor& x = ctx.input(0);
    int64_t n = x.numel();
    if (x.dtype() == DataType::kString) {
      NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kInt64, shape));
      for (int64_t i = 0; i < n; ++i) {
        auto it = str_keys_.find(x.string_data()[i]);
        y->data<int64_t>()[i] = it == str_keys_.end() ? v1_default_int_ : it->second;
      }
      return Status::Ok();
    }
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kString, shape));
    const int64_t* px = x.data<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      bool in = px[i] >= 0 && px[i] < static_cast<int64_t>(classes_.size());
      y->string_data()[i] = in ? classes_[static_cast<size_t>(px[i])] : v1_default_str_;
    }
    return Status::Ok();
  }

  // Opset 1.
  bool v1_ = false;
  std::vector<std::string> classes_;
  int64_t v1_default_int_ = -1;
  std::string v1_default_str_;
  // Opset 2+.
  DataType key_type_ = DataType::kString;
  std::unordered_map<std::string, int64_t> str_keys_;
  std::unordered_map<int64_t, int64_t> int_keys_;
  std::unordered_map<uint64_t, int64_t> float_keys_;
  Tensor values_;
  Tensor default_;
};

}  // namespace

void register_ml_ops(ep::KernelRegistry& r) {
  r.add_fn(kMl, "ArrayFeatureExtractor", 1, INT64_MAX, &array_feature_extractor);
  r.add_fn(kMl, "Binarizer", 1, INT64_MAX, &binarizer);
  r.add_fn(kMl, "CastMap", 1, INT64_MAX, &cast_map);
  r.add_fn(kMl, "CategoryMapper", 1, INT64_MAX, &category_mapper);
  r.add_fn(kMl, "DictVectorizer", 1, INT64_MAX, &dict_vectorizer);
  r.add_fn(kMl, "FeatureVectorizer", 1, INT64_MAX, &feature_vectorizer);
  r.add_fn(kMl, "Imputer", 1, INT64_MAX, &imputer);
  r.add_class<LabelEncoderKernel>(kMl, "LabelEncoder", 1);
  r.add_fn(kMl, "Normalizer", 1, INT64_MAX, &normalizer);
  r.add_fn(kMl, "OneHotEncoder", 1, INT64_MAX, &one_hot_encoder);
  r.add_fn(kMl, "Scaler", 1, INT64_MAX, &scaler);
  r.add_fn(kMl, "ZipMap", 1, INT64_MAX, &zip_map);
  register_ml_tree_ops(r);
  register_ml_linear_ops(r);
}

}  // namespace nxrt::ops
