// compute_float16_in_float32: a float16 (or bfloat16) model's arithmetic runs in float32.
//
// Why: x86 CPUs have no float16 arithmetic below AVX512-FP16, so a float16 kernel widens its inputs,
// computes in float32 and rounds its output, op after op; every op's fp32 kernel (GEMM packing,
// fusions, vector loops) would need a float16 twin to be fast. Models exported in float16 (GPU-first
// exports, transformers.js `model_fp16.onnx`, q4f16 LLMs) ran 1.5-18x slower than their float32 twins
// here (Zen 5, 1 thread: BERT-base encoder 207 ms against 45; ResNet-50 173 against 41). ONNX Runtime's
// CPU provider does the same thing with Casts around the nodes it has no float16 kernel for.
//
// What: every node of the ops listed below that reads or writes float16 is rewritten to read and write
// float32. A float16 value such a node reads from outside the region is widened once: a constant here,
// into a float32 initializer (not through constant folding, whose size bound would leave a large
// weight's Cast to run every call), a graph input or an outside node's value by a Cast. A value the
// region makes keeps float32 precision while it flows between converted nodes, and is rounded to
// float16 by a Cast under its original name only where something outside the region reads it (a graph
// output, a node that stays float16, a subgraph). So the graph's interface is unchanged and values
// inside the region are not rounded between ops: results differ from op-by-op float16 rounding by about
// those roundings and are closer to the float32 computation (a float16 copy of the BERT encoder: max
// error against a float64 reference 0.0057 this way, 0.0069 op by op; within one float16 ulp of ORT's
// output). Explicit Casts to float16 inside the region carry no rounding either. Ops whose results
// turn on exact values (comparisons, Floor/Ceil/Round, ArgMax, TopK, NonZero, IsInf) are left out, so
// they see float16 values as before. Data-movement ops join the region only behind a value it made (a
// Gather from a float16 embedding table widens the rows it gathers, not the table).
//
// GroupQueryAttention keeps a float16 KV cache (past/present inputs and outputs): it computes in float32
// beside a float16 cache already (kv_cache_dtype.cpp); one that writes presents from no past stays
// float16 (its cache type would follow the query). Attention ops with other past/present state are
// converted only without it (their caches would be copied in and out every step).
//
// `--disable compute_float16_in_float32` (or optimization level disabled) keeps op-by-op float16.
#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "ir/half_convert.h"
#include "ir/symbols.h"
#include "nxrt/float_types.h"
#include "optimizer/graph_util.h"
#include "optimizer/passes.h"

namespace nxrt::optimizer {

namespace {

// How a listed op's float16 inputs and outputs are converted.
enum class Rule {
  kAll,            // every float16 input and output
  kFollow,         // like kAll, when one of its float16 inputs is made by the region
  kGqa,            // GroupQueryAttention: all but past_key/past_value (3, 4) and present_key/value (1, 2)
  kNoState,        // like kAll, only when the inputs and outputs named in `state` are absent
  kCast,           // Cast: see convert_cast
  kConstant,       // Constant: its value attribute
  kConstantOfShape,
};

struct OpRule {
  Rule rule;
  // kNoState: input indices (low 16 bits as a mask) and output indices (high bits) that must be absent.
  uint32_t state_inputs = 0, state_outputs = 0;
};

const std::unordered_map<std::string, OpRule>& onnx_rules() {
  static const std::unordered_map<std::string, OpRule> m = [] {
    std::unordered_map<std::string, OpRule> r;
    for (const char* op :
         {// arithmetic and activations
          "Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean", "Neg", "Abs", "Exp", "Log", "Sqrt",
          "Reciprocal", "Sigmoid", "HardSigmoid", "Tanh", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu", "Celu",
          "Softplus", "Softsign", "HardSwish", "Mish", "ThresholdedRelu", "Shrink", "Gelu", "Erf", "Sin", "Cos",
          "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Clip", "Where",
          // reductions, normalizations, softmax
          "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
          "ReduceLogSumExp", "ReduceSumSquare", "Softmax", "LogSoftmax", "LayerNormalization",
          "BatchNormalization", "InstanceNormalization", "GroupNormalization", "LpNormalization",
          "MeanVarianceNormalization", "RMSNormalization", "SimplifiedLayerNormalization", "CumSum",
          // linear algebra, convolution, pooling, resampling, recurrences
          "MatMul", "Gemm", "Einsum", "Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool",
          "GlobalMaxPool", "LpPool", "Resize", "Upsample", "GridSample", "LSTM", "GRU", "RNN", "RotaryEmbedding"}) {
      r[op] = {Rule::kAll};
    }
    // Data movement and shape queries: exact in any type, so converted only to keep a region whole:
    // they join it when a float16 value they read is the region's own (a Gather from a float16
    // embedding table stays float16 and its rows are widened, not the table).
    for (const char* op : {"Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND",
                           "ScatterND", "ScatterElements", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Pad",
                           "Identity", "Dropout", "DepthToSpace", "SpaceToDepth", "Trilu", "Shape", "Size"}) {
      r[op] = {Rule::kFollow};
    }
    r["Cast"] = {Rule::kCast};
    r["Constant"] = {Rule::kConstant};
    r["ConstantOfShape"] = {Rule::kConstantOfShape};
    // ai.onnx Attention (opset 23): past_key/past_value (4, 5), present_key/present_value (1, 2).
    r["Attention"] = {Rule::kNoState, (1u << 4) | (1u << 5), (1u << 1) | (1u << 2)};
    return r;
  }();
  return m;
}

const std::unordered_map<std::string, OpRule>& microsoft_rules() {
  static const std::unordered_map<std::string, OpRule> m = [] {
    std::unordered_map<std::string, OpRule> r;
    for (const char* op : {"MatMulNBits", "SkipLayerNormalization", "SkipSimplifiedLayerNormalization",
                           "SimplifiedLayerNormalization", "FastGelu", "BiasGelu", "Gelu", "QuickGelu",
                           "RotaryEmbedding", "FusedMatMul", "GatherBlockQuantized"}) {
      r[op] = {Rule::kAll};
    }
    r["GroupQueryAttention"] = {Rule::kGqa};
    // past (4) and present (1); past_key/past_value (5, 6) and present_key/present_value (1, 2).
    r["Attention"] = {Rule::kNoState, 1u << 4, 1u << 1};
    r["MultiHeadAttention"] = {Rule::kNoState, (1u << 6) | (1u << 7), (1u << 1) | (1u << 2)};
    return r;
  }();
  return m;
}

const OpRule* rule_of(const ir::Node& n) {
  const std::string dom = ir::canonical_domain(n.domain);
  if (dom == ir::kNxrtDomain) {
    // The generator's row selection in front of the LM head (select_positions.cpp): data movement.
    static const OpRule follow{Rule::kFollow};
    return n.op_type == "SelectPositions" ? &follow : nullptr;
  }
  if (!dom.empty() && dom != "com.microsoft") return nullptr;
  const auto& m = dom.empty() ? onnx_rules() : microsoft_rules();
  auto it = m.find(n.op_type);
  return it == m.end() ? nullptr : &it->second;
}

bool is_half(DataType t) { return t == DataType::kFloat16 || t == DataType::kBFloat16; }

bool slot_in(uint32_t mask, size_t i) { return i < 32 && ((mask >> i) & 1u); }

class Converter {
 public:
  Converter(PassContext& pc, GraphInfo& gi) : pc_(pc), gi_(gi), g_(gi.g) {}

  int run() {
    const size_t count = g_.nodes.size();
    std::vector<char> convert(count, 0);
    int converted = 0;
    // In node order (topological), so a data-movement node knows whether the region made its input.
    // made_: the float16 values the region makes (its nodes' converted outputs), named below.
    std::vector<std::string> made_order;
    for (size_t k = 0; k < count; ++k) {
      const ir::Node& n = g_.nodes[k];
      convert[k] = qualifies(n) ? 1 : 0;
      if (!convert[k]) continue;
      ++converted;
      for (size_t j = 0; j < n.outputs.size(); ++j)
        if (converts_output(n, j) && made_.emplace(n.outputs[j], std::string()).second) made_order.push_back(n.outputs[j]);
    }
    // Most graphs have no float16 nodes: the name table is built only when one converts.
    if (!converted) return 0;
    for (const auto& n : g_.nodes)
      for (const auto& o : n.outputs) names_.insert(o);
    for (const auto& [k, t] : g_.initializers) names_.insert(k);
    for (const auto& v : g_.inputs) names_.insert(v.name);
    for (const std::string& v : made_order) made_[v] = fresh(v);
    // Which of them something outside reads under the original name.
    std::unordered_set<std::string> read_as_half;  // region-made values read as float16 somewhere
    for (const auto& name : gi_.protected_names)
      if (made_.count(name)) read_as_half.insert(name);
    for (size_t k = 0; k < count; ++k) {
      const ir::Node& n = g_.nodes[k];
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!made_.count(n.inputs[i])) continue;
        if (!convert[k] || !converts_input(n, i)) read_as_half.insert(n.inputs[i]);
      }
    }
    std::vector<ir::Node> out;
    out.reserve(count * 2);
    for (size_t k = 0; k < count; ++k) {
      ir::Node n = std::move(g_.nodes[k]);
      if (!convert[k]) {
        out.push_back(std::move(n));
        continue;
      }
      // A Cast whose input is float32 once converted (float32, or a float16 widened) is an Identity.
      const bool cast_of_float = n.op_type == "Cast" && !n.inputs.empty() && !n.inputs[0].empty() &&
                                 (dtype_before(n.inputs[0]) == DataType::kFloat || is_half(dtype_before(n.inputs[0])));
      for (size_t i = 0; i < n.inputs.size(); ++i) {
        if (!converts_input(n, i)) continue;
        n.inputs[i] = widened(n.inputs[i], &out);
      }
      std::vector<std::pair<std::string, std::string>> rounds;  // (float32 name, original name)
      for (size_t j = 0; j < n.outputs.size(); ++j) {
        if (!converts_output(n, j)) continue;
        const std::string orig = n.outputs[j];
        n.outputs[j] = made_.at(orig);
        if (read_as_half.count(orig)) rounds.emplace_back(n.outputs[j], orig);
      }
      retype_attributes(n, cast_of_float);
      out.push_back(std::move(n));
      for (const auto& [f32, orig] : rounds) out.push_back(cast_node(f32, orig, dtype_before(orig)));
    }
    g_.nodes = std::move(out);
    // Declared types of the renamed values no longer hold; the originals that stay keep theirs.
    g_.value_info.erase(std::remove_if(g_.value_info.begin(), g_.value_info.end(),
                                       [&](const ir::ValueInfo& v) {
                                         return made_.count(v.name) && !read_as_half.count(v.name);
                                       }),
                        g_.value_info.end());
    pc_.count("float16_nodes_in_float32", converted);
    pc_.count("float16_constants_widened", widened_constants_);
    pc_.count("float16_widening_casts", static_cast<int>(widened_.size()) - widened_constants_);
    pc_.count("float16_rounding_casts", static_cast<int>(read_as_half.size()));
    return converted;
  }

 private:
  // The value's dtype from load-time inference (initializers and inputs included), or undefined.
  DataType dtype(const std::string& name) const {
    if (name.empty()) return DataType::kUndefined;
    if (const Tensor* t = gi_.constant(name)) return t->dtype();
    const ir::ValueFacts* f = g_.shape_facts ? g_.shape_facts->find(name) : nullptr;
    if (!f || f->kind != ir::TypeInfo::Kind::kTensor) return DataType::kUndefined;
    return f->dtype;
  }

  bool qualifies(const ir::Node& n) const {
    const OpRule* r = rule_of(n);
    if (!r || has_graph_attr(n)) return false;
    bool any_half = false;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      const DataType t = dtype(n.inputs[i]);
      if (t == DataType::kUndefined) return false;  // not known to be a tensor of a known type
      if (r->rule == Rule::kNoState && slot_in(r->state_inputs, i)) return false;
      any_half |= is_half(t) && converts_input_slot(n, *r, i);
    }
    for (size_t j = 0; j < n.outputs.size(); ++j) {
      if (n.outputs[j].empty()) continue;
      const DataType t = dtype(n.outputs[j]);
      if (t == DataType::kUndefined) return false;
      if (r->rule == Rule::kNoState && slot_in(r->state_outputs, j)) return false;
      any_half |= is_half(t) && converts_output_slot(n, *r, j);
    }
    switch (r->rule) {
      case Rule::kGqa: {
        // The cache type comes from the pasts; without them presents would follow the (widened) query,
        // so a node writing presents from no past stays float16.
        const bool pasts = n.inputs.size() > 4 && !n.inputs[3].empty() && !n.inputs[4].empty();
        const bool presents = (n.outputs.size() > 1 && !n.outputs[1].empty()) || (n.outputs.size() > 2 && !n.outputs[2].empty());
        return any_half && (pasts || !presents);
      }
      case Rule::kCast: {
        // Float16 out from a float or an integer; float32 out of a float16 (its input widened).
        const int64_t to = attr_i(n, "to", 0);
        if (n.inputs.empty() || n.outputs.size() != 1) return false;
        const DataType from = dtype(n.inputs[0]);
        const bool to_half = to == static_cast<int64_t>(DataType::kFloat16) || to == static_cast<int64_t>(DataType::kBFloat16);
        if (to_half) return from != DataType::kString && from != DataType::kUndefined;
        return is_half(from) && to == static_cast<int64_t>(DataType::kFloat);
      }
      case Rule::kConstant: {
        const ir::Attribute* a = n.find_attribute("value");
        return a && a->type == ir::Attribute::Type::kTensor && is_half(a->t.dtype()) && n.outputs.size() == 1;
      }
      case Rule::kConstantOfShape: {
        const ir::Attribute* a = n.find_attribute("value");
        return a && a->type == ir::Attribute::Type::kTensor && is_half(a->t.dtype());
      }
      case Rule::kFollow:
        for (size_t i = 0; i < n.inputs.size(); ++i)
          if (made_.count(n.inputs[i])) return true;
        return false;
      default:
        return any_half;
    }
  }

  static bool converts_input_slot(const ir::Node& n, const OpRule& r, size_t i) {
    if (r.rule == Rule::kGqa) return i != 3 && i != 4;
    (void)n;
    return true;
  }
  static bool converts_output_slot(const ir::Node& n, const OpRule& r, size_t j) {
    if (r.rule == Rule::kGqa) return j != 1 && j != 2;
    (void)n;
    return true;
  }
  bool converts_input(const ir::Node& n, size_t i) const {
    const OpRule* r = rule_of(n);
    return r && !n.inputs[i].empty() && is_half(dtype_before(n.inputs[i])) && converts_input_slot(n, *r, i);
  }
  bool converts_output(const ir::Node& n, size_t j) const {
    const OpRule* r = rule_of(n);
    if (!r || n.outputs[j].empty()) return false;
    return is_half(dtype_before(n.outputs[j])) && converts_output_slot(n, *r, j);
  }
  // Types as the graph had them before this pass renamed anything (original names only).
  DataType dtype_before(const std::string& name) const {
    auto it = original_dtype_.find(name);
    if (it != original_dtype_.end()) return it->second;
    const DataType t = dtype(name);
    original_dtype_.emplace(name, t);
    return t;
  }

  // The float32 version of float16 value `name`: the region's own, or a widening Cast made once.
  std::string widened(const std::string& name, std::vector<ir::Node>* out) {
    auto m = made_.find(name);
    if (m != made_.end()) return m->second;
    auto w = widened_.find(name);
    if (w != widened_.end()) return w->second;
    const std::string f32 = fresh(name);
    widened_.emplace(name, f32);
    if (const Tensor* t = gi_.constant(name); t && t->is_contiguous()) {
      // A constant is widened here, not by a Cast for constant folding, whose size bound (64 MB) would
      // leave a large weight's Cast (an fp16 LM head: 272 MB) to run on every call.
      g_.initializers[f32] = widen(*t);
      ++widened_constants_;
      return f32;
    }
    out->push_back(cast_node(name, f32, DataType::kFloat));
    return f32;
  }

  static Tensor widen(const Tensor& t) {
    Tensor f(DataType::kFloat, t.shape());
    const uint16_t* h = static_cast<const uint16_t*>(t.raw_data());
    float* d = f.data<float>();
    if (t.dtype() == DataType::kFloat16) {
      ir::halves_to_floats(h, d, t.numel());  // F16C: a BERT-base encoder's weights 260 -> 30 ms
    } else {
      for (int64_t i = 0; i < t.numel(); ++i) d[i] = bf16_to_float(h[i]);
    }
    return f;
  }

  // Attributes that name float16: Cast's target, Constant / ConstantOfShape values.
  void retype_attributes(ir::Node& n, bool cast_of_float) {
    const OpRule* r = rule_of(n);
    if (!r) return;
    if (r->rule == Rule::kCast) {
      // float32 -> float32 (a float16 input widened, or a float32 value cast to float16 in the region):
      // an Identity, which eliminate_identities removes.
      if (cast_of_float) {
        n.op_type = "Identity";
        n.attributes.clear();
        return;
      }
      for (auto& a : n.attributes)
        if (a.name == "to") a.i = static_cast<int64_t>(DataType::kFloat);
      return;
    }
    if (r->rule == Rule::kConstant || r->rule == Rule::kConstantOfShape) {
      for (auto& a : n.attributes) {
        if (a.name != "value" || a.type != ir::Attribute::Type::kTensor || !is_half(a.t.dtype())) continue;
        a.t = widen(a.t);
      }
    }
  }

  ir::Node cast_node(const std::string& in, const std::string& out, DataType to) {
    ir::Node c;
    c.op_type = "Cast";
    c.name = out + "_cast";
    c.inputs = {in};
    c.outputs = {out};
    c.attributes.push_back(make_attr_i("to", static_cast<int64_t>(to)));
    return c;
  }

  // "<name>_f32" (traces and errors keep naming the model's value), numbered if that is taken.
  std::string fresh(const std::string& base) {
    std::string n = base + "_f32";
    while (!names_.insert(n).second) n = base + "_f32_" + std::to_string(pc_.next_id++);
    return n;
  }

  PassContext& pc_;
  GraphInfo& gi_;
  ir::Graph& g_;
  std::unordered_set<std::string> names_;
  std::unordered_map<std::string, std::string> made_;     // region-made float16 value -> float32 name
  std::unordered_map<std::string, std::string> widened_;  // outside float16 value -> its float32 version
  int widened_constants_ = 0;
  mutable std::unordered_map<std::string, DataType> original_dtype_;
};

}  // namespace

int compute_float16_in_float32(PassContext& pc, GraphInfo& gi) {
  if (!gi.g.shape_facts) return 0;
  Converter c(pc, gi);
  return c.run();
}

}  // namespace nxrt::optimizer
