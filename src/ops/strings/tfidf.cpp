// TfIdfVectorizer (opset 9): counts pooled n-grams (with skips) per row of a 1-D/2-D int32/int64/string
// input, then weights them (TF, IDF, TFIDF).
//
// Pool layout: pool_* holds the n-grams flat, 1-grams first; ngram_counts[k] is the pool offset where
// the (k+1)-grams start. The i-th pooled n-gram (in pool order) counts into output column
// ngram_indexes[i]. An n-gram of length n with skip s takes items at p, p+(s+1), ..., p+(n-1)(s+1) for
// every s in [0, max_skip_count]; 1-grams are counted once (skips do not apply to them).
// Weights: the ONNX text indexes them by pooled n-gram; onnxruntime by output column. The two agree
// when ngram_indexes is a permutation (every exported model); when they differ in length, the one
// whose length matches is used.
#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "ops/common.h"

namespace nxrt::ops {

namespace {

class TfIdfVectorizerKernel final : public ep::Kernel {
 public:
  Status init(const ep::KernelInfo& info) {
    min_n_ = info.attr_int("min_gram_length", 1);
    max_n_ = info.attr_int("max_gram_length", 1);
    max_skip_ = info.attr_int("max_skip_count", 0);
    if (min_n_ < 1 || max_n_ < min_n_) {
      return info.error("need 1 <= min_gram_length <= max_gram_length, got min " + std::to_string(min_n_) + ", max " +
                        std::to_string(max_n_));
    }
    if (max_skip_ < 0) return info.error("max_skip_count must be >= 0, got " + std::to_string(max_skip_));
    std::string mode = info.attr_string("mode", "");
    if (mode == "TF") {
      mode_ = kTF;
    } else if (mode == "IDF") {
      mode_ = kIDF;
    } else if (mode == "TFIDF") {
      mode_ = kTFIDF;
    } else {
      return info.error("mode must be TF, IDF or TFIDF, got '" + mode + "'");
    }
    std::vector<int64_t> counts = info.attr_ints("ngram_counts");
    std::vector<int64_t> indexes = info.attr_ints("ngram_indexes");
    std::vector<int64_t> pool_i = info.attr_ints("pool_int64s");
    std::vector<std::string> pool_s = info.attr_strings("pool_strings");
    weights_ = info.attr_floats("weights");
    bool has_i = info.has_attr("pool_int64s"), has_s = info.has_attr("pool_strings");
    if (has_i == has_s) return info.error("exactly one of pool_int64s and pool_strings must be set");
    strings_ = has_s;
    int64_t pool_size = static_cast<int64_t>(strings_ ? pool_s.size() : pool_i.size());
    if (indexes.empty()) return info.error("ngram_indexes must not be empty");
    for (int64_t v : indexes) {
      if (v < 0) return info.error("ngram_indexes must be non-negative, got " + std::to_string(v));
    }
    out_dim_ = *std::max_element(indexes.begin(), indexes.end()) + 1;
    // Walk the pool level by level.
    size_t ngram_i = 0;
    by_len_.assign(static_cast<size_t>(std::max<int64_t>(max_n_, static_cast<int64_t>(counts.size()))) + 1, {});
    for (size_t k = 0; k < counts.size(); ++k) {
      int64_t n = static_cast<int64_t>(k) + 1;
      int64_t start = counts[k];
      int64_t end = k + 1 < counts.size() ? counts[k + 1] : pool_size;
      if (start < 0 || end < start || end > pool_size) {
        return info.error("ngram_counts " + std::to_string(k) + " gives pool range [" + std::to_string(start) + ", " +
                          std::to_string(end) + ") outside a pool of " + std::to_string(pool_size));
      }
      if ((end - start) % n != 0) {
        return info.error("pool range for " + std::to_string(n) + "-grams has " + std::to_string(end - start) +
                          " items, not a multiple of " + std::to_string(n));
      }
      for (int64_t p = start; p < end; p += n) {
        if (ngram_i >= indexes.size()) {
          return info.error("the pool holds more n-grams than ngram_indexes has entries (" +
                            std::to_string(indexes.size()) + ")");
        }
        std::string key;
        for (int64_t q = p; q < p + n; ++q) {
          if (strings_) {
            append_string(&key, pool_s[static_cast<size_t>(q)]);
          } else {
            append_int(&key, pool_i[static_cast<size_t>(q)]);
          }
        }
        by_len_[static_cast<size_t>(n)][key] = Entry{indexes[ngram_i], static_cast<int64_t>(ngram_i)};
        ++ngram_i;
      }
    }
    num_ngrams_ = static_cast<int64_t>(ngram_i);
    if (!weights_.empty()) {
      if (static_cast<int64_t>(weights_.size()) == out_dim_) {
        weights_by_output_ = true;
      } else if (static_cast<int64_t>(weights_.size()) == num_ngrams_) {
        weights_by_output_ = false;
      } else {
        return info.error("weights has " + std::to_string(weights_.size()) + " entries; expected one per n-gram (" +
                          std::to_string(num_ngrams_) + ")");
      }
    }
    return Status::Ok();
  }

  Status compute(ep::KernelContext& ctx) const override {
    NXRT_ASSIGN_OR_RETURN(const Tensor& x, ctx.required_tensor(0, "X"));
    DataType dt = x.dtype();
    if (strings_ ? dt != DataType::kString : (dt != DataType::kInt32 && dt != DataType::kInt64)) {
      return ctx.error(std::string("input must be ") + (strings_ ? "a string tensor (pool_strings is set)" :
                                                                   "int32 or int64 (pool_int64s is set)") +
                           ", got " + x.describe(),
                       StatusCode::kInvalidArgument);
    }
    if (x.rank() != 1 && x.rank() != 2) {
      return ctx.error("input must be 1-D or 2-D, got " + x.describe(), StatusCode::kInvalidArgument);
    }
    int64_t rows = x.rank() == 2 ? x.dim(0) : 1;
    int64_t cols = x.rank() == 2 ? x.dim(1) : x.dim(0);
    Dims yshape = x.rank() == 2 ? Dims{rows, out_dim_} : Dims{out_dim_};
    NXRT_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, DataType::kFloat, yshape));
    float* py = y->data<float>();
    std::fill(py, py + rows * out_dim_, 0.0f);
    std::vector<int64_t> ngram_count(static_cast<size_t>(num_ngrams_));
    std::string key;
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(ngram_count.begin(), ngram_count.end(), 0);
      for (int64_t n = min_n_; n <= max_n_ && n < static_cast<int64_t>(by_len_.size()); ++n) {
        const auto& table = by_len_[static_cast<size_t>(n)];
        if (table.empty()) continue;
        int64_t skips = n == 1 ? 0 : max_skip_;
        for (int64_t s = 0; s <= skips; ++s) {
          int64_t stride = s + 1;
          for (int64_t p = 0; p + (n - 1) * stride < cols; ++p) {
            key.clear();
            for (int64_t q = 0; q < n; ++q) append_item(&key, x, r * cols + p + q * stride);
            auto it = table.find(key);
            if (it != table.end()) ++ngram_count[static_cast<size_t>(it->second.ngram)];
          }
        }
      }
      float* row = py + r * out_dim_;
      for (const auto& table : by_len_) {
        for (const auto& kv : table) {
          int64_t c = ngram_count[static_cast<size_t>(kv.second.ngram)];
          if (c == 0) continue;
          float w = 1.0f;
          if (!weights_.empty()) {
            w = weights_[static_cast<size_t>(weights_by_output_ ? kv.second.out : kv.second.ngram)];
          }
          float v = mode_ == kTF ? static_cast<float>(c) : mode_ == kIDF ? w : static_cast<float>(c) * w;
          row[kv.second.out] += v;
        }
      }
    }
    return Status::Ok();
  }

 private:
  static void append_int(std::string* key, int64_t v) {
    char b[8];
    std::memcpy(b, &v, 8);
    key->append(b, 8);
  }
  static void append_string(std::string* key, const std::string& s) {
    append_int(key, static_cast<int64_t>(s.size()));
    key->append(s);
  }
  static void append_item(std::string* key, const Tensor& x, int64_t i) {
    switch (x.dtype()) {
      case DataType::kString: append_string(key, x.string_data()[i]); break;
      case DataType::kInt32: append_int(key, x.data<int32_t>()[i]); break;
      default: append_int(key, x.data<int64_t>()[i]); break;
    }
  }

  struct Entry {
    int64_t out;    // output column
    int64_t ngram;  // position among pooled n-grams
  };
  enum Mode { kTF, kIDF, kTFIDF };
  Mode mode_ = kTF;
  int64_t min_n_ = 1, max_n_ = 1, max_skip_ = 0, out_dim_ = 0, num_ngrams_ = 0;
  bool strings_ = false;
  bool weights_by_output_ = true;
  std::vector<float> weights_;
  std::vector<std::unordered_map<std::string, Entry>> by_len_;  // by n-gram length
};

}  // namespace

void register_tfidf_ops(ep::KernelRegistry& r) { r.add_class<TfIdfVectorizerKernel>("", "TfIdfVectorizer", 9); }

}  // namespace nxrt::ops
