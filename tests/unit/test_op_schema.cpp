// Op schemas (src/shape/op_schema.h): every op with a CPU kernel has a record or is on the reviewed list
// below; the records' in-place, determinism, rank and differentiability facts equal the hand lists they
// replaced; and their readers use them (the CPU registry's in-place defs, the optimizer's rank inference,
// shape inference's list of ops without a shape function).
#include <gtest/gtest.h>

#include <set>

#include "kernel_test_util.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "ops/cpu_provider.h"
#include "optimizer/graph_util.h"
#include "shape/op_schema.h"
#include "shape/shape_inference.h"

using namespace nxrt;

namespace {

// Ops with a CPU kernel and no schema, reviewed: each is deterministic, has no output that may overwrite
// an input, has no shape function yet (its outputs get unknown facts) and no described rank. An op added
// with a kernel and no schema fails EveryCpuKernelHasASchemaOrIsReviewed until it gets a record next to
// its family's shape rules (src/shape/rules_<family>.cpp) or is reviewed onto this list.
// Keys as KernelRegistry::ops() prints them: "domain::op", "" being ai.onnx.
const std::set<std::string> kReviewedWithoutSchema = {
    // ai.onnx: image, signal, strings, decoding and newer ops whose output shapes are not modelled.
    "::AffineGrid", "::BitCast", "::BlackmanWindow", "::CausalConvWithState", "::CenterCropPad", "::Col2Im",
    "::DFT", "::DeformConv", "::Det", "::GridSample", "::HammingWindow", "::HannWindow", "::ImageDecoder",
    "::LinearAttention", "::MaxRoiPool", "::MaxUnpool", "::MelWeightMatrix", "::RegexFullMatch", "::RoiAlign",
    "::STFT", "::SequenceMap", "::StringConcat", "::StringNormalizer", "::StringSplit", "::SwiGLU",
    "::TfIdfVectorizer",
    // ai.onnx.ml
    "ai.onnx.ml::ArrayFeatureExtractor", "ai.onnx.ml::Binarizer", "ai.onnx.ml::CastMap",
    "ai.onnx.ml::CategoryMapper", "ai.onnx.ml::DictVectorizer", "ai.onnx.ml::FeatureVectorizer",
    "ai.onnx.ml::Imputer", "ai.onnx.ml::LabelEncoder", "ai.onnx.ml::LinearClassifier",
    "ai.onnx.ml::LinearRegressor", "ai.onnx.ml::Normalizer", "ai.onnx.ml::OneHotEncoder",
    "ai.onnx.ml::SVMClassifier", "ai.onnx.ml::SVMRegressor", "ai.onnx.ml::Scaler", "ai.onnx.ml::TreeEnsemble",
    "ai.onnx.ml::TreeEnsembleClassifier", "ai.onnx.ml::TreeEnsembleRegressor", "ai.onnx.ml::ZipMap",
    // training and preview domains (never constant-folded: the optimizer's never_fold list)
    "ai.onnx.preview.training::Adagrad", "ai.onnx.preview.training::Adam", "ai.onnx.preview.training::Gradient",
    "ai.onnx.preview.training::Momentum", "ai.onnx.preview::FlexAttention",
    // com.microsoft
    "com.microsoft::GatherBlockQuantized", "com.microsoft::MultiHeadAttention",
};

std::pair<std::string, std::string> split_key(const std::string& key) {
  const size_t at = key.find("::");
  return {key.substr(0, at), key.substr(at + 2)};
}

std::set<std::string> schema_ops(bool (*pick)(const shape::OpSchema&)) {
  std::set<std::string> r;
  for (const auto& s : shape::all_schemas()) {
    if (pick(s)) r.insert(s.domain + "::" + s.op_type);
  }
  return r;
}

// "domain::op" of every op the CPU provider registers (each once).
std::set<std::string> registered_keys(const ep::KernelRegistry& reg) {
  std::set<std::string> keys;
  for (const ep::KernelDef* d : reg.defs()) keys.insert(d->domain + "::" + d->op_type);
  return keys;
}

TEST(OpSchema, EveryCpuKernelHasASchemaOrIsReviewed) {
  auto reg = ops::cpu_provider_registry();
  std::set<std::string> registered;
  for (const std::string& key : registered_keys(*reg)) {
    registered.insert(key);
    auto [domain, op] = split_key(key);
    const bool has = shape::find_schema(domain, op, shape::kNewestOpset) != nullptr;
    if (has) {
      EXPECT_EQ(kReviewedWithoutSchema.count(key), 0u) << key << " has a schema now: take it off kReviewedWithoutSchema";
    } else {
      EXPECT_EQ(kReviewedWithoutSchema.count(key), 1u)
          << key << " has a CPU kernel but no op schema: add its record to src/shape/rules_<family>.cpp "
          << "(docs/ARCHITECTURE.md, \"How to add an op\") or review it onto kReviewedWithoutSchema";
    }
  }
  for (const std::string& key : kReviewedWithoutSchema) {
    EXPECT_EQ(registered.count(key), 1u) << key << " is on kReviewedWithoutSchema but has no CPU kernel";
  }
}

TEST(OpSchema, OneRecordPerOpAndDomainsAreCanonical) {
  std::set<std::string> seen;
  for (const auto& s : shape::all_schemas()) {
    EXPECT_NE(s.domain, "ai.onnx") << s.op_type;
    EXPECT_TRUE(seen.insert(s.domain + "::" + s.op_type).second) << "two records for " << s.domain << "::" << s.op_type;
    EXPECT_LE(s.since_version, s.end_version) << s.op_type;
  }
  // "ai.onnx" and "" name the same records; an op no family knows has none.
  EXPECT_EQ(shape::find_schema("ai.onnx", "Relu", 14), shape::find_schema("", "Relu", 14));
  ASSERT_NE(shape::find_schema("", "Relu", 14), nullptr);
  EXPECT_NE(shape::find_schema("", "Relu", 14)->shape_fn, nullptr);
  EXPECT_EQ(shape::find_schema("", "NoSuchOp", 14), nullptr);
  EXPECT_EQ(shape::find_schema("com.microsoft", "Relu", 1), nullptr);
}

// The list src/ops/cpu_provider.cpp called KernelRegistry::allow_inplace with before the schemas held it.
const std::set<std::string> kOldInPlaceOps = {
    "Abs", "Neg", "Relu", "Sigmoid", "Tanh", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil", "Round", "Sin",
    "Cos", "Erf", "Softplus", "Softsign", "Elu", "Selu", "LeakyRelu", "HardSigmoid", "HardSwish", "Gelu", "Mish",
    "Celu", "ThresholdedRelu", "Shrink", "Sign", "Clip", "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum",
    "Mean", "PRelu", "Not", "BitwiseNot", "Atan", "Tan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
    "Swish"};

// Added since: com.microsoft QLinearAdd / QLinearMul over A (their rows read an element of A before they
// write it; a residual add then writes into lines it has just read).
const std::set<std::string> kContribInPlaceOps = {"QLinearAdd", "QLinearMul"};

TEST(OpSchema, InPlaceInputsEqualTheOldListAndReachTheCpuRegistry) {
  std::set<std::string> expected;
  for (const auto& op : kOldInPlaceOps) expected.insert("::" + op);
  for (const auto& op : kContribInPlaceOps) expected.insert("com.microsoft::" + op);
  EXPECT_EQ(schema_ops([](const shape::OpSchema& s) { return s.inplace_input >= 0; }), expected);
  for (const auto& s : shape::all_schemas()) {
    if (s.inplace_input >= 0) {
      EXPECT_EQ(s.inplace_input, 0) << s.op_type;
    }
  }
  // Every version of every CPU kernel def: input 0 for the listed ai.onnx and com.microsoft ops, none
  // elsewhere (the nxrt-domain copies of Gelu/HardSwish/Swish included).
  auto reg = ops::cpu_provider_registry();
  int checked = 0;
  for (const std::string& key : registered_keys(*reg)) {
    auto [domain, op] = split_key(key);
    const int want = (domain.empty() && kOldInPlaceOps.count(op)) || (domain == "com.microsoft" && kContribInPlaceOps.count(op)) ? 0 : -1;
    for (int64_t opset = 1; opset <= 25; ++opset) {
      const ep::KernelDef* def = reg->find(domain, op, opset);
      if (!def) continue;
      EXPECT_EQ(def->inplace_input, want) << key << " at opset " << opset;
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

TEST(OpSchema, NondeterministicAndDifferentiableOpsEqualTheOldLists) {
  // basic_passes.cpp's is_nondeterministic list.
  EXPECT_EQ(schema_ops([](const shape::OpSchema& s) { return !s.deterministic; }),
            (std::set<std::string>{"::RandomNormal", "::RandomUniform", "::RandomNormalLike", "::RandomUniformLike",
                                   "::Multinomial", "::Bernoulli", "::Dropout"}));
  // training.cpp's differentiable_ops(): what the gradient builder's forward/backward implement.
  EXPECT_EQ(schema_ops([](const shape::OpSchema& s) { return s.differentiable; }),
            (std::set<std::string>{"::Add", "::Sub", "::Mul", "::Div", "::Neg", "::Identity", "::Relu", "::Sigmoid",
                                   "::Tanh", "::Exp", "::Log", "::Sqrt", "::MatMul"}));
}

TEST(OpSchema, RankRulesCoverTheOptimizersOldLists) {
  auto rank_of = [](const char* domain, const char* op) {
    const shape::OpSchema* s = shape::find_schema(domain, op, shape::kNewestOpset);
    return s ? s->rank : shape::RankRule::kUnknown;
  };
  // graph_util.cpp's kSameRank (ai.onnx, and FusedConv/Gelu/HardSwish in the nxrt domain) and kBroadcast.
  for (const char* op : {"Conv", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
                         "BatchNormalization", "InstanceNormalization", "LRN", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
                         "Clip", "HardSigmoid", "HardSwish", "Elu", "Selu", "Softplus", "Abs", "Neg", "Exp", "Log",
                         "Sqrt", "Erf", "Identity", "Dropout", "Cast", "Softmax", "LogSoftmax", "ConvTranspose",
                         "Gelu", "PRelu"}) {
    EXPECT_EQ(rank_of("", op), shape::RankRule::kSameAsInput0) << op;
  }
  for (const char* op : {"FusedConv", "Gelu", "HardSwish"}) {
    EXPECT_EQ(rank_of(ir::kNxrtDomain, op), shape::RankRule::kSameAsInput0) << op;
  }
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum"}) {
    EXPECT_EQ(rank_of("", op), shape::RankRule::kBroadcast) << op;
  }
  EXPECT_EQ(rank_of("", "Concat"), shape::RankRule::kSameAsInputs);
  EXPECT_EQ(rank_of("", "Reshape"), shape::RankRule::kUnknown);
}

ir::ValueInfo tensor_vi(const std::string& name, std::vector<int64_t> dims) {
  ir::ValueInfo v;
  v.name = name;
  v.type.kind = ir::TypeInfo::Kind::kTensor;
  v.type.elem_type = DataType::kFloat;
  v.type.has_shape = true;
  for (int64_t d : dims) v.type.dims.push_back(ir::Dim::fixed(d));
  return v;
}

ir::Node make_node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out) {
  ir::Node n;
  n.name = op + "_" + out[0];
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

TEST(OpSchema, OptimizerRankInferenceFollowsTheRules) {
  ir::Graph g;
  g.inputs = {tensor_vi("x", {2, 3, 4, 5}), tensor_vi("v", {5})};
  g.initializers["c"] = Tensor(DataType::kFloat, {3, 1, 1});
  g.nodes = {
      make_node("Floor", {"x"}, {"fl"}),          // like input 0
      make_node("Add", {"fl", "c"}, {"sum"}),     // broadcast of a rank-4 value and a rank-3 constant
      make_node("Mul", {"v", "unknown"}, {"m"}),  // broadcast with an input of unknown rank
      make_node("Concat", {"unknown", "sum"}, {"cat"}),  // any known input's rank
      make_node("Reshape", {"x", "c"}, {"r"}),    // no rank rule
      make_node("Relu", {"r"}, {"rr"}),           // input of unknown rank
  };
  g.outputs = {tensor_vi("rr", {})};
  optimizer::GraphInfo gi(g, /*main_graph=*/true, /*ir_version=*/8);
  const auto ranks = optimizer::infer_ranks(gi);
  auto rank = [&](const char* n) { return ranks.count(n) ? ranks.at(n) : -1; };
  EXPECT_EQ(rank("x"), 4);
  EXPECT_EQ(rank("fl"), 4);
  EXPECT_EQ(rank("sum"), 4);
  EXPECT_EQ(rank("m"), -1);
  EXPECT_EQ(rank("cat"), 4);
  EXPECT_EQ(rank("r"), -1);
  EXPECT_EQ(rank("rr"), -1);
}

TEST(OpSchema, OpsWithARecordButNoShapeFunctionAreListed) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 15});
  m.graph.inputs = {tensor_vi("x", {2, 3})};
  m.graph.nodes = {make_node("Bernoulli", {"x"}, {"b"}), make_node("Relu", {"b"}, {"y"})};
  m.graph.outputs = {tensor_vi("y", {})};
  m.graph.outputs[0].type.has_shape = false;
  ASSERT_NE(shape::find_schema("", "Bernoulli", 15), nullptr);
  ASSERT_TRUE(shape::infer_shapes(m).ok());
  EXPECT_EQ(shape::describe_ops_without_shape_fn(m.graph), "Bernoulli 1\n");
  EXPECT_FALSE(m.graph.shape_facts->find("y")->has_shape);
}

TEST(OpSchema, GradientBuilderNamesTheDifferentiableOps) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports = {{"", 17}, {"ai.onnx.preview.training", 1}};
  ir::ValueInfo a = tensor_vi("a", {2}), y = tensor_vi("y", {2}), da = tensor_vi("d_a", {2});
  m.graph.inputs = {a};
  ir::Node grad = make_node("Gradient", {"a"}, {"d_a"});
  grad.domain = "ai.onnx.preview.training";
  grad.attributes = {nxrt::testing::attr_strings("xs", {"a"}), nxrt::testing::attr_string("y", "y")};
  m.graph.nodes = {make_node("Softmax", {"a"}, {"y"}), grad};
  m.graph.outputs = {y, da};
  const std::string bytes = onnx::serialize_model(m);
  auto s = Session::create_from_bytes(bytes.data(), bytes.size());
  ASSERT_FALSE(s.ok());
  const std::string& msg = s.status().message();
  EXPECT_NE(msg.find("differentiating Softmax"), std::string::npos) << msg;
  for (const auto& rec : shape::all_schemas()) {
    if (rec.differentiable) {
      EXPECT_NE(msg.find(rec.op_type + ", "), std::string::npos) << rec.op_type << ": " << msg;
    }
  }
  EXPECT_NE(msg.find(", Constant)"), std::string::npos) << msg;
}

}  // namespace
