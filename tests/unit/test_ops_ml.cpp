// ai.onnx.ml ops: hand-computed cases and malformed attributes (clear errors, never crashes).
#include <gtest/gtest.h>

#include <cmath>

#include "kernel_test_util.h"
#include "ops/ml/ml_util.h"

using namespace nxrt;
using nxrt::testing::attr_float;
using nxrt::testing::attr_floats;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::attr_strings;
using nxrt::testing::attr_tensor;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {
constexpr const char* kMl = "ai.onnx.ml";
Tensor F(Dims shape, std::vector<float> v) { return Tensor::from_vector<float>(DataType::kFloat, shape, v); }
Tensor D(Dims shape, std::vector<double> v) { return Tensor::from_vector<double>(DataType::kDouble, shape, v); }
Tensor I64(Dims shape, std::vector<int64_t> v) { return Tensor::from_vector<int64_t>(DataType::kInt64, shape, v); }
Tensor S(Dims shape, std::vector<std::string> v) {
  Tensor t(DataType::kString, shape);
  for (size_t i = 0; i < v.size(); ++i) t.string_data()[i] = v[i];
  return t;
}
std::vector<float> fvals(const Tensor& t) { return std::vector<float>(t.data<float>(), t.data<float>() + t.numel()); }
std::vector<int64_t> ivals(const Tensor& t) { return std::vector<int64_t>(t.data<int64_t>(), t.data<int64_t>() + t.numel()); }
std::vector<std::string> svals(const Tensor& t) { return std::vector<std::string>(t.string_data(), t.string_data() + t.numel()); }
std::vector<Value> run(const KernelRun& r) {
  auto out = run_kernel(r);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  return out.ok() ? out.value() : std::vector<Value>(r.num_outputs, Value(Tensor(DataType::kFloat, {0})));
}
Tensor run1(const KernelRun& r) { return run(r)[0].tensor(); }
std::string err(const KernelRun& r) {
  auto out = run_kernel(r);
  EXPECT_FALSE(out.ok());
  return out.ok() ? std::string() : out.status().message();
}
void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol = 1e-5f) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << "at " << i;
}
}  // namespace

TEST(OpsMl, PostTransforms) {
  using namespace nxrt::ops::ml;
  EXPECT_NEAR(probit(0.5), 0.0, 1e-12);
  EXPECT_NEAR(probit(0.8413447460685429), 1.0, 1e-9);
  EXPECT_NEAR(probit(0.02275013194817921), -2.0, 1e-9);
  double row[3] = {1, 2, 3};
  apply_post_transform(PostTransform::kSoftmax, row, 3);
  EXPECT_NEAR(row[2], std::exp(3.0) / (std::exp(1.0) + std::exp(2.0) + std::exp(3.0)), 1e-12);
  double z[3] = {0, 1, 1};
  apply_post_transform(PostTransform::kSoftmaxZero, z, 3);
  EXPECT_NEAR(z[0], 0.0, 1e-12);
  EXPECT_NEAR(z[1], 0.5, 1e-12);
  double l = 0;
  apply_post_transform(PostTransform::kLogistic, &l, 1);
  EXPECT_EQ(l, 0.5);
}

TEST(OpsMl, ArrayFeatureExtractorBinarizer) {
  Tensor z = run1({"ArrayFeatureExtractor", kMl, 1, {}, {S({2, 3}, {"a", "b", "c", "d", "e", "f"}), I64({2}, {2, 0})}});
  EXPECT_EQ(z.shape(), (Dims{2, 2}));
  EXPECT_EQ(svals(z), (std::vector<std::string>{"c", "a", "f", "d"}));
  Tensor z1 = run1({"ArrayFeatureExtractor", kMl, 1, {}, {F({3}, {1, 2, 3}), I64({1}, {1})}});
  EXPECT_EQ(z1.shape(), (Dims{1, 1}));
  EXPECT_NE(err({"ArrayFeatureExtractor", kMl, 1, {}, {F({3}, {1, 2, 3}), I64({1}, {3})}}).find("out of range"), std::string::npos);
  Tensor b = run1({"Binarizer", kMl, 1, {attr_float("threshold", 1.5f)},
                   {Tensor::from_vector<int32_t>(DataType::kInt32, {3}, {1, 2, -5})}});
  EXPECT_EQ(std::vector<int32_t>(b.data<int32_t>(), b.data<int32_t>() + 3), (std::vector<int32_t>{0, 1, 0}));
}

TEST(OpsMl, LabelEncoderVersions) {
  // Opset 1: strings <-> indexes of classes_strings.
  Tensor a = run1({"LabelEncoder", kMl, 1, {attr_strings("classes_strings", {"x", "y"}), attr_int("default_int64", 9)},
                   {S({3}, {"y", "q", "x"})}});
  EXPECT_EQ(ivals(a), (std::vector<int64_t>{1, 9, 0}));
  Tensor b = run1({"LabelEncoder", kMl, 1, {attr_strings("classes_strings", {"x", "y"})}, {I64({3}, {1, 5, -1})}});
  EXPECT_EQ(svals(b), (std::vector<std::string>{"y", "_Unused", "_Unused"}));
  // Opset 2: float keys, NaN matches NaN, default_float.
  Tensor c = run1({"LabelEncoder", kMl, 2,
                   {attr_floats("keys_floats", {1.5f, NAN}), attr_strings("values_strings", {"one", "nan"}),
                    attr_string("default_string", "?")},
                   {F({3}, {NAN, 1.5f, 2})}});
  EXPECT_EQ(svals(c), (std::vector<std::string>{"nan", "one", "?"}));
  // Opset 4: tensor attributes (int16 values, default tensor); repeated key: last wins.
  Tensor vals = Tensor::from_vector<int16_t>(DataType::kInt16, {3}, {10, 20, 30});
  Tensor dflt = Tensor::from_vector<int16_t>(DataType::kInt16, {1}, {-7});
  Tensor d = run1({"LabelEncoder", kMl, 4,
                   {attr_tensor("keys_tensor", I64({3}, {4, 5, 4})), attr_tensor("values_tensor", vals),
                    attr_tensor("default_tensor", dflt)},
                   {I64({3}, {4, 6, 5})}});
  EXPECT_EQ(d.dtype(), DataType::kInt16);
  EXPECT_EQ(std::vector<int16_t>(d.data<int16_t>(), d.data<int16_t>() + 3), (std::vector<int16_t>{30, -7, 20}));
  // Malformed.
  EXPECT_NE(err({"LabelEncoder", kMl, 2, {attr_strings("keys_strings", {"a", "b"}), attr_ints("values_int64s", {1})}, {S({1}, {"a"})}})
                .find("same length"),
            std::string::npos);
  EXPECT_NE(err({"LabelEncoder", kMl, 2, {attr_ints("values_int64s", {1})}, {S({1}, {"a"})}}).find("keys_"), std::string::npos);
  EXPECT_NE(err({"LabelEncoder", kMl, 2, {attr_strings("keys_strings", {"a"}), attr_ints("values_int64s", {1})}, {F({1}, {1})}})
                .find("does not match"),
            std::string::npos);
}

namespace {
// Two stumps on feature 0 (tree 0: x0 <= 0.5 ? leaf w=1 : leaf w=3) and feature 1 (tree 1: x1 < 2 ? 10 : 20).
std::vector<nxrt::ir::Attribute> stump_nodes() {
  return {attr_ints("nodes_treeids", {0, 0, 0, 1, 1, 1}),
          attr_ints("nodes_nodeids", {0, 1, 2, 0, 1, 2}),
          attr_ints("nodes_featureids", {0, 0, 0, 1, 0, 0}),
          attr_strings("nodes_modes", {"BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_LT", "LEAF", "LEAF"}),
          attr_floats("nodes_values", {0.5f, 0, 0, 2, 0, 0}),
          attr_ints("nodes_truenodeids", {1, 0, 0, 1, 0, 0}),
          attr_ints("nodes_falsenodeids", {2, 0, 0, 2, 0, 0}),
          attr_ints("nodes_missing_value_tracks_true", {1, 0, 0, 0, 0, 0})};
}
}  // namespace

TEST(OpsMl, TreeEnsembleRegressor) {
  auto a = stump_nodes();
  a.push_back(attr_ints("target_treeids", {0, 0, 1, 1}));
  a.push_back(attr_ints("target_nodeids", {1, 2, 1, 2}));
  a.push_back(attr_ints("target_ids", {0, 0, 0, 0}));
  a.push_back(attr_floats("target_weights", {1, 3, 10, 20}));
  a.push_back(attr_int("n_targets", 1));
  Tensor x = F({3, 2}, {0, 1, 1, 5, NAN, 2});
  expect_near(fvals(run1({"TreeEnsembleRegressor", kMl, 3, a, {x}})), {11, 23, 21});
  auto avg = a;
  avg.push_back(attr_string("aggregate_function", "AVERAGE"));
  avg.push_back(attr_floats("base_values", {100}));
  expect_near(fvals(run1({"TreeEnsembleRegressor", kMl, 3, avg, {x}})), {105.5f, 111.5f, 110.5f});
  auto mx = a;
  mx.push_back(attr_string("aggregate_function", "MAX"));
  expect_near(fvals(run1({"TreeEnsembleRegressor", kMl, 1, mx, {x}})), {10, 20, 20});
  // Many rows over 4 threads give the same result as one thread.
  std::vector<float> big(2000);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>((i * 37) % 11) * 0.3f;
  KernelRun many{"TreeEnsembleRegressor", kMl, 3, a, {F({1000, 2}, big)}};
  std::vector<float> one = fvals(run1(many));
  many.threads = 4;
  EXPECT_EQ(fvals(run1(many)), one);
  // Too few features.
  EXPECT_NE(err({"TreeEnsembleRegressor", kMl, 3, a, {F({1, 1}, {0})}}).find("feature 1"), std::string::npos);
}

TEST(OpsMl, TreeEnsembleMalformed) {
  auto base = [] {
    auto a = stump_nodes();
    a.push_back(attr_ints("target_treeids", {0, 0, 1, 1}));
    a.push_back(attr_ints("target_nodeids", {1, 2, 1, 2}));
    a.push_back(attr_ints("target_ids", {0, 0, 0, 0}));
    a.push_back(attr_floats("target_weights", {1, 3, 10, 20}));
    a.push_back(attr_int("n_targets", 1));
    return a;
  };
  auto set = [](std::vector<nxrt::ir::Attribute> a, nxrt::ir::Attribute v) {
    for (auto& x : a) {
      if (x.name == v.name) x = v;
    }
    return a;
  };
  Tensor x = F({1, 2}, {0, 0});
  EXPECT_NE(err({"TreeEnsembleRegressor", kMl, 3, set(base(), attr_ints("nodes_truenodeids", {7, 0, 0, 1, 0, 0})), {x}})
                .find("child id 7"),
            std::string::npos);
  EXPECT_NE(err({"TreeEnsembleRegressor", kMl, 3, set(base(), attr_ints("nodes_featureids", {0, 0})), {x}}).find("nodes_featureids has 2"),
            std::string::npos);
  EXPECT_NE(err({"TreeEnsembleRegressor", kMl, 3, set(base(), attr_ints("target_nodeids", {1, 2, 1, 9})), {x}}).find("does not exist"),
            std::string::npos);
  EXPECT_NE(err({"TreeEnsembleRegressor", kMl, 3, set(base(), attr_ints("target_ids", {0, 0, 0, 5})), {x}}).find("target_ids[3]"),
            std::string::npos);
  EXPECT_NE(err({"TreeEnsembleRegressor", kMl, 3, set(base(), attr_strings("nodes_modes", {"BRANCH_LEQ", "LEAF", "LEAF", "BRANCH_XX", "LEAF", "LEAF"})), {x}})
                .find("BRANCH_XX"),
            std::string::npos);
  // A cycle reachable from the root (node 1 -> node 1) is reported at run time, not looped on.
  auto cyc = set(base(), attr_strings("nodes_modes", {"BRANCH_LEQ", "BRANCH_LEQ", "LEAF", "BRANCH_LT", "LEAF", "LEAF"}));
  cyc = set(cyc, attr_floats("nodes_values", {0.5f, 0.5f, 0, 2, 0, 0}));
  cyc = set(cyc, attr_ints("nodes_truenodeids", {1, 1, 0, 1, 0, 0}));
  cyc = set(cyc, attr_ints("nodes_falsenodeids", {2, 2, 0, 2, 0, 0}));
  EXPECT_NE(err({"TreeEnsembleRegressor", kMl, 3, cyc, {x}}).find("cycle"), std::string::npos);
}

TEST(OpsMl, TreeEnsembleClassifier) {
  auto a = stump_nodes();
  a.push_back(attr_ints("class_treeids", {0, 0, 1, 1}));
  a.push_back(attr_ints("class_nodeids", {1, 2, 1, 2}));
  a.push_back(attr_ints("class_ids", {0, 1, 2, 1}));
  a.push_back(attr_floats("class_weights", {1, 1, 1.5f, 1}));
  a.push_back(attr_strings("classlabels_strings", {"a", "b", "c"}));
  Tensor x = F({2, 2}, {0, 1, 1, 5});
  auto out = run({"TreeEnsembleClassifier", kMl, 3, a, {x}, 2});
  EXPECT_EQ(svals(out[0].tensor()), (std::vector<std::string>{"c", "b"}));
  expect_near(fvals(out[1].tensor()), {1, 0, 1.5f, 0, 2, 0});
  // Binary: votes only for class 1, all positive -> scores [1-s, s], label by s > 0.5.
  auto bin = stump_nodes();
  bin.push_back(attr_ints("class_treeids", {0, 0}));
  bin.push_back(attr_ints("class_nodeids", {1, 2}));
  bin.push_back(attr_ints("class_ids", {1, 1}));
  bin.push_back(attr_floats("class_weights", {0.25f, 0.75f}));
  bin.push_back(attr_ints("classlabels_int64s", {7, 8}));
  auto ob = run({"TreeEnsembleClassifier", kMl, 1, bin, {x}, 2});
  EXPECT_EQ(ivals(ob[0].tensor()), (std::vector<int64_t>{7, 8}));
  expect_near(fvals(ob[1].tensor()), {0.75f, 0.25f, 0.25f, 0.75f});
  EXPECT_NE(err({"TreeEnsembleClassifier", kMl, 3, stump_nodes(), {x}}).find("classlabels"), std::string::npos);
}

namespace {
std::vector<nxrt::ir::Attribute> te5(std::vector<int64_t> roots, std::vector<int64_t> trueids) {
  return {attr_int("n_targets", 2),
          attr_ints("tree_roots", roots),
          attr_tensor("nodes_modes", Tensor::from_vector<uint8_t>(DataType::kUInt8, {2}, {0, 3})),
          attr_ints("nodes_featureids", {0, 1}),
          attr_tensor("nodes_splits", D({2}, {1.0, 0.0})),
          attr_ints("nodes_truenodeids", trueids),
          attr_ints("nodes_trueleafs", {0, 1}),
          attr_ints("nodes_falsenodeids", {2, 1}),
          attr_ints("nodes_falseleafs", {1, 1}),
          attr_ints("leaf_targetids", {0, 1, 0}),
          attr_tensor("leaf_weights", D({3}, {1.0, 2.0, 4.0}))};
}
}  // namespace

TEST(OpsMl, TreeEnsembleOpset5) {
  // Node 0: x0 <= 1 ? node 1 : leaf 2 (t0 += 4). Node 1: x1 > 0 ? leaf 0 (t0 += 1) : leaf 1 (t1 += 2).
  Tensor x = D({3, 2}, {0, 1, 0, -1, 5, 0});
  Tensor y = run1({"TreeEnsemble", kMl, 5, te5({0}, {1, 0}), {x}});
  EXPECT_EQ(y.dtype(), DataType::kDouble);
  EXPECT_EQ(std::vector<double>(y.data<double>(), y.data<double>() + 6), (std::vector<double>{1, 0, 0, 2, 4, 0}));
  auto sm = te5({0}, {1, 0});
  sm.push_back(attr_int("post_transform", 2));
  Tensor yl = run1({"TreeEnsemble", kMl, 5, sm, {F({1, 2}, {0, 1})}});
  EXPECT_EQ(yl.dtype(), DataType::kFloat);
  expect_near(fvals(yl), {1 / (1 + std::exp(-1.0f)), 0.5f});
  EXPECT_NE(err({"TreeEnsemble", kMl, 5, te5({3}, {1, 0}), {x}}).find("tree_roots"), std::string::npos);
  EXPECT_NE(err({"TreeEnsemble", kMl, 5, te5({0}, {5, 0}), {x}}).find("nodes_truenodeids[0] = 5"), std::string::npos);
  auto badleaf = te5({0}, {1, 0});
  badleaf[9] = attr_ints("leaf_targetids", {0, 1, 2});
  EXPECT_NE(err({"TreeEnsemble", kMl, 5, badleaf, {x}}).find("leaf_targetids[2]"), std::string::npos);
  auto badlen = te5({0}, {1, 0});
  badlen[10] = attr_tensor("leaf_weights", D({2}, {1.0, 2.0}));
  EXPECT_NE(err({"TreeEnsemble", kMl, 5, badlen, {x}}).find("leaf_weights has 2"), std::string::npos);
  // A self-loop among interior nodes is caught at run time, not an endless loop.
  auto loop = te5({0}, {0, 0});
  EXPECT_NE(err({"TreeEnsemble", kMl, 5, loop, {D({1, 2}, {0, 0})}}).find("cycle"), std::string::npos);
}

TEST(OpsMl, LinearModels) {
  Tensor x = F({2, 2}, {1, 2, 3, 4});
  Tensor y = run1({"LinearRegressor", kMl, 1,
                   {attr_floats("coefficients", {1, 1, 0.5f, -1}), attr_floats("intercepts", {1, 0}), attr_int("targets", 2)},
                   {x}});
  expect_near(fvals(y), {4, -1.5f, 8, -2.5f});
  EXPECT_NE(err({"LinearRegressor", kMl, 1, {attr_floats("coefficients", {1, 1, 1}), attr_int("targets", 2)}, {x}})
                .find("multiple of targets"),
            std::string::npos);
  // Multiclass with softmax.
  auto mc = run({"LinearClassifier", kMl, 1,
                 {attr_floats("coefficients", {1, 0, 0, 1, -1, -1}), attr_ints("classlabels_ints", {10, 20, 30}),
                  attr_string("post_transform", "SOFTMAX")},
                 {x}, 2});
  EXPECT_EQ(ivals(mc[0].tensor()), (std::vector<int64_t>{20, 20}));
  float e1 = std::exp(1.0f), e2 = std::exp(2.0f), em3 = std::exp(-3.0f);
  std::vector<float> z0 = fvals(mc[1].tensor());
  z0.resize(3);
  expect_near(z0, {e1 / (e1 + e2 + em3), e2 / (e1 + e2 + em3), em3 / (e1 + e2 + em3)});
  // Binary with one coefficient row: scores [-s, s].
  auto bin = run({"LinearClassifier", kMl, 1,
                  {attr_floats("coefficients", {1, -1}), attr_floats("intercepts", {0.5f}), attr_strings("classlabels_strings", {"no", "yes"})},
                  {x}, 2});
  EXPECT_EQ(svals(bin[0].tensor()), (std::vector<std::string>{"no", "no"}));
  expect_near(fvals(bin[1].tensor()), {0.5f, -0.5f, 0.5f, -0.5f});
  EXPECT_FALSE(run_kernel({"LinearClassifier", kMl, 1, {attr_floats("coefficients", {1, 2, 3})}, {x}, 2}).ok());
}

TEST(OpsMl, NormalizerScalerImputer) {
  Tensor x = F({2, 2}, {3, -4, 0, 0});
  expect_near(fvals(run1({"Normalizer", kMl, 1, {attr_string("norm", "L2")}, {x}})), {0.6f, -0.8f, 0, 0});
  expect_near(fvals(run1({"Normalizer", kMl, 1, {attr_string("norm", "L1")}, {x}})), {3 / 7.0f, -4 / 7.0f, 0, 0});
  expect_near(fvals(run1({"Normalizer", kMl, 1, {attr_string("norm", "MAX")}, {x}})), {0.75f, -1, 0, 0});
  EXPECT_FALSE(run_kernel({"Normalizer", kMl, 1, {attr_string("norm", "L3")}, {x}}).ok());
  Tensor s = run1({"Scaler", kMl, 1, {attr_floats("offset", {1, 2}), attr_floats("scale", {2})},
                   {Tensor::from_vector<int64_t>(DataType::kInt64, {2, 2}, {1, 2, 3, 4})}});
  expect_near(fvals(s), {0, 0, 4, 4});
  EXPECT_NE(err({"Scaler", kMl, 1, {attr_floats("offset", {1, 2, 3})}, {x}}).find("offset"), std::string::npos);
  Tensor im = run1({"Imputer", kMl, 1, {attr_floats("imputed_value_floats", {7, 8}), attr_float("replaced_value_float", NAN)},
                    {F({2, 2}, {NAN, 1, 2, NAN})}});
  expect_near(fvals(im), {7, 1, 2, 8});
  Tensor ii = run1({"Imputer", kMl, 1, {attr_ints("imputed_value_int64s", {5}), attr_int("replaced_value_int64", -1)},
                    {I64({3}, {-1, 2, -1})}});
  EXPECT_EQ(ivals(ii), (std::vector<int64_t>{5, 2, 5}));
  EXPECT_NE(err({"Imputer", kMl, 1, {attr_floats("imputed_value_floats", {1, 2, 3})}, {x}}).find("imputed_value_floats has 3"),
            std::string::npos);
}

TEST(OpsMl, EncodersAndVectorizers) {
  Tensor oh = run1({"OneHotEncoder", kMl, 1, {attr_ints("cats_int64s", {3, 1, 2})}, {F({2}, {1.0f, 9})}});
  EXPECT_EQ(oh.shape(), (Dims{2, 3}));
  expect_near(fvals(oh), {0, 1, 0, 0, 0, 0});
  EXPECT_FALSE(run_kernel({"OneHotEncoder", kMl, 1, {attr_ints("cats_int64s", {3}), attr_int("zeros", 0)}, {I64({1}, {4})}}).ok());
  Tensor cm = run1({"CategoryMapper", kMl, 1,
                    {attr_ints("cats_int64s", {1, 2}), attr_strings("cats_strings", {"a", "b"}), attr_int("default_int64", -9)},
                    {S({3}, {"b", "z", "a"})}});
  EXPECT_EQ(ivals(cm), (std::vector<int64_t>{2, -9, 1}));
  Tensor cs = run1({"CategoryMapper", kMl, 1, {attr_ints("cats_int64s", {1, 2}), attr_strings("cats_strings", {"a", "b"})},
                    {I64({2}, {2, 5})}});
  EXPECT_EQ(svals(cs), (std::vector<std::string>{"b", "_Unused"}));
  EXPECT_NE(err({"CategoryMapper", kMl, 1, {attr_ints("cats_int64s", {1}), attr_strings("cats_strings", {"a", "b"})}, {I64({1}, {1})}})
                .find("same length"),
            std::string::npos);
  Tensor fv = run1({"FeatureVectorizer", kMl, 1, {attr_ints("inputdimensions", {1, 3})},
                    {F({2, 1}, {1, 2}), Tensor::from_vector<int32_t>(DataType::kInt32, {2, 2}, {3, 4, 5, 6})}});
  EXPECT_EQ(fv.shape(), (Dims{2, 4}));
  expect_near(fvals(fv), {1, 3, 4, 0, 2, 5, 6, 0});
  // ZipMap -> sequence of maps; DictVectorizer reads one back.
  auto zm = run({"ZipMap", kMl, 1, {attr_strings("classlabels_strings", {"p", "q"})}, {F({2, 2}, {0.1f, 0.9f, 0.7f, 0.3f})}});
  ASSERT_TRUE(zm[0].is_sequence());
  ASSERT_EQ(zm[0].items().size(), 2u);
  const MapValue& m1 = zm[0].items()[1].map_value();
  EXPECT_EQ(m1.string_keys, (std::vector<std::string>{"p", "q"}));
  expect_near(fvals(m1.values), {0.7f, 0.3f});
  EXPECT_FALSE(run_kernel({"ZipMap", kMl, 1, {attr_ints("classlabels_int64s", {1, 2, 3})}, {F({1, 2}, {1, 2})}}).ok());
  Tensor dv = run1({"DictVectorizer", kMl, 1, {attr_strings("string_vocabulary", {"q", "z", "p"})}, {zm[0].items()[1]}});
  EXPECT_EQ(dv.shape(), (Dims{1, 3}));
  expect_near(fvals(dv), {0.3f, 0, 0.7f});
  MapValue im;
  im.key_type = DataType::kInt64;
  im.value_type = DataType::kFloat;
  im.int_keys = {5, 2};
  im.values = F({2}, {1.5f, 2.5f});
  Tensor cmap = run1({"CastMap", kMl, 1, {attr_string("map_form", "SPARSE"), attr_int("max_map", 6)}, {Value::map(im)}});
  expect_near(fvals(cmap), {0, 0, 2.5f, 0, 0, 1.5f});
}

TEST(OpsMl, Svm) {
  Tensor x = F({2, 2}, {1, 0, 0, 2});
  // Linear SVR: s = x . [1, 2] + 0.5.
  expect_near(fvals(run1({"SVMRegressor", kMl, 1, {attr_floats("coefficients", {1, 2}), attr_floats("rho", {0.5f})}, {x}})),
              {1.5f, 4.5f});
  // RBF SVR with 2 support vectors (gamma 1): s = 2*K(x, sv0) - K(x, sv1) + 0.
  auto rbf = run1({"SVMRegressor", kMl, 1,
                   {attr_floats("coefficients", {2, -1}), attr_floats("rho", {0}), attr_int("n_supports", 2),
                    attr_floats("support_vectors", {1, 0, 0, 0}), attr_string("kernel_type", "RBF"),
                    attr_floats("kernel_params", {1, 0, 0})},
                   {x}});
  expect_near(fvals(rbf), {2 - std::exp(-1.0f), 2 * std::exp(-5.0f) - std::exp(-4.0f)});
  auto one = run1({"SVMRegressor", kMl, 1, {attr_floats("coefficients", {1, -1}), attr_floats("rho", {0}), attr_int("one_class", 1)}, {x}});
  expect_near(fvals(one), {1, -1});
  EXPECT_NE(err({"SVMRegressor", kMl, 1, {attr_floats("coefficients", {1, 2, 3}), attr_floats("rho", {0}), attr_int("n_supports", 2)}, {x}})
                .find("support_vectors"),
            std::string::npos);
  // Linear multiclass SVC (3 classes): scores = x . coef_c + rho[0].
  auto lc = run({"SVMClassifier", kMl, 1,
                 {attr_floats("coefficients", {1, 0, 0, 1, -1, -1}), attr_floats("rho", {0}), attr_ints("classlabels_ints", {0, 1, 2}),
                  attr_ints("vectors_per_class", {})},
                 {x}, 2});
  // rho has one value: binary rules do not apply to 3 labels -> raw label (max weight > 0).
  EXPECT_EQ(lc[1].tensor().shape(), (Dims{2, 3}));
  expect_near(fvals(lc[1].tensor()), {1, 0, -1, 0, 2, -2});
  // Kernel SVC with 2 classes, one vector each: score = rho + c0 * K(x, sv0) + c1 * K(x, sv1).
  auto svc = run({"SVMClassifier", kMl, 1,
                  {attr_floats("coefficients", {1, -1}), attr_floats("rho", {0.25f}), attr_ints("classlabels_ints", {4, 9}),
                   attr_ints("vectors_per_class", {1, 1}), attr_floats("support_vectors", {1, 0, 0, 1}),
                   attr_string("kernel_type", "LINEAR")},
                  {x}, 2});
  // Row 0: 0.25 + 1 - 0 = 1.25 > 0 -> class 0 votes; row 1: 0.25 + 0 - 2 < 0 -> class 1.
  EXPECT_EQ(ivals(svc[0].tensor()), (std::vector<int64_t>{4, 9}));
  expect_near(fvals(svc[1].tensor()), {-1.25f, 1.25f, 1.75f, -1.75f});
  EXPECT_NE(err({"SVMClassifier", kMl, 1,
                 {attr_floats("coefficients", {1}), attr_floats("rho", {0}), attr_ints("classlabels_ints", {4, 9}),
                  attr_ints("vectors_per_class", {1, 1})},
                 {x}, 2})
                .find("coefficients has 1"),
            std::string::npos);
}
