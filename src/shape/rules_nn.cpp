// Shape rules and op schemas: convolutions and pools (output extents from kernel, strides, dilations and
// pads), normalizations, Dropout, the RNNs, Resize/Upsample and NonMaxSuppression.
#include <algorithm>
#include <cmath>
#include <limits>

#include "shape/node_context.h"
#include "shape/symbolic.h"
#include "shape/window_size.h"

namespace nxrt::shape {

using enum RankRule;

namespace {

// Conv-style spatial output size.
SymDim conv_out(SymbolTable& S, SymDim in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, bool ceil_mode,
                const std::string& auto_pad) {
  // Checked first: kernel, dilation, pads and stride come from the file, and window_axis (shared with
  // the kernels) computes with them unchecked. An overflow is noted (a load error naming the node).
  if (s <= 0 || d <= 0 || k <= 0) return SymDim::s(S.mint());  // the kernel refuses these at run time
  const int64_t ek = add_i(mul_i(sub_i(k, 1), d), 1);
  if (in.is_const()) {  // the kernels' rule (shape/window_size.h)
    const WindowAutoPad ap = auto_pad == "SAME_UPPER"   ? WindowAutoPad::kSameUpper
                             : auto_pad == "SAME_LOWER" ? WindowAutoPad::kSameLower
                             : auto_pad == "VALID"      ? WindowAutoPad::kValid
                                                        : WindowAutoPad::kNotSet;
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();
    auto saturated = [](int64_t v) { return v == kMax || v == kMin; };  // the overflow is noted
    const int64_t span = sub_i(add_i(add_i(in.value, pb), pe), ek);
    if (saturated(ek) || saturated(span)) return SymDim::s(S.mint());
    // Bounds SAME's in + stride - 1 + dk and ceil_mode's (out - 1) * stride.
    if (saturated(add_i(add_i(add_i(in.value, s), ek), span < 0 ? -span : span))) return SymDim::s(S.mint());
    return SymDim::c(window_axis(in.value, k, s, d, pb, pe, ceil_mode, ap).out);
  }
  // A symbolic size: the same rule as an expression.
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") return ceildiv(S, in, SymDim::c(s));
  if (auto_pad == "VALID") { pb = pe = 0; }
  SymDim x = add(S, {in, SymDim::c(sub_i(add_i(pb, pe), ek))});
  if (s == 1) return add(S, {x, SymDim::c(1)});
  return add(S, {ceil_mode ? ceildiv(S, x, SymDim::c(s)) : floordiv(S, x, SymDim::c(s)), SymDim::c(1)});
}

// A window op's strides, dilations and pads for `ns` spatial axes, read from the attributes named
// `prefix` + "strides" etc. (ConvMaxPool's pool reads "pool_..."); absent or mis-sized: the defaults.
struct WindowInts {
  std::vector<int64_t> strides, dil, pads;
};
WindowInts window_ints(const NodeContext& c, size_t ns, const std::string& prefix) {
  WindowInts w;
  w.strides = c.aints((prefix + "strides").c_str()).value_or(std::vector<int64_t>(ns, 1));
  w.dil = c.aints((prefix + "dilations").c_str()).value_or(std::vector<int64_t>(ns, 1));
  w.pads = c.aints((prefix + "pads").c_str()).value_or(std::vector<int64_t>(2 * ns, 0));
  if (w.strides.size() != ns) w.strides.assign(ns, 1);
  if (w.dil.size() != ns) w.dil.assign(ns, 1);
  if (w.pads.size() != 2 * ns) w.pads.assign(2 * ns, 0);
  return w;
}

Status op_conv_like(NodeContext& c) {
  const std::string& op = c.n->op_type;
  // com.microsoft QLinearConv / QLinearAveragePool with channels_last: X [N, spatial..., C]. The rule
  // runs on X's channels-first view, and the output's channels go back to the last axis at the end.
  const bool channels_last = c.ai("channels_last", 0) != 0 || op == "NhwcMaxPool";
  ValueFacts x_first;
  if (channels_last && c.input(0).has_shape && c.input(0).dims.size() >= 3) {
    x_first = c.input(0);
    x_first.dims.insert(x_first.dims.begin() + 1, x_first.dims.back());
    x_first.dims.pop_back();
  }
  const ValueFacts& x = x_first.has_shape ? x_first : c.input(0);
  bool is_pool = op.find("Pool") != std::string::npos && op != "ConvMaxPool";  // ConvMaxPool: the conv here
  bool qlinear = op == "QLinearConv";
  const ValueFacts& w = c.input(qlinear ? 3 : 1);
  DataType dt = x.dtype;
  if (op == "ConvInteger") dt = DataType::kInt32;
  if (qlinear) dt = c.input(7).dtype;
  if (!x.has_shape || x.dims.size() < 2) {
    c.set(0, tensor_unknown_rank(dt));
    if (c.nout() > 1) c.set(1, tensor_unknown_rank(DataType::kInt64));
    return Status::Ok();
  }
  size_t ns = x.dims.size() - 2;
  std::vector<int64_t> kernel;
  if (auto ks = c.aints("kernel_shape")) kernel = *ks;
  if (kernel.empty() && !is_pool && w.has_shape && w.dims.size() == ns + 2) {
    for (size_t i = 0; i < ns; ++i) {
      if (!w.dims[i + 2].is_const()) {
        kernel.clear();
        break;
      }
      kernel.push_back(w.dims[i + 2].value);
    }
  }
  std::vector<SymDim> dims = {x.dims[0]};
  if (is_pool) {
    dims.push_back(x.dims[1]);
  } else if (op == "ConvTranspose") {
    if (w.has_shape && w.dims.size() >= 2) {
      dims.push_back(mul(c.S, {w.dims[1], SymDim::c(c.ai("group", 1))}));
    } else {
      dims.push_back(SymDim::s(c.S.mint()));
    }
  } else {
    dims.push_back(w.has_shape && !w.dims.empty() ? w.dims[0] : SymDim::s(c.S.mint()));
    if (w.has_shape && w.dims.size() == ns + 2) {
      SymDim cin = mul(c.S, {w.dims[1], SymDim::c(c.ai("group", 1))});
      SymDim r;
      NXRT_RETURN_IF_ERROR(c.unify(x.dims[1], cin, "input channels " + c.shape_str(x) + " do not match weights " +
                                                       c.shape_str(w) + " with group " + std::to_string(c.ai("group", 1)),
                                   &r));
    }
  }
  if (kernel.size() != ns) {
    for (size_t i = 0; i < ns; ++i) dims.push_back(SymDim::s(c.S.mint()));
  } else {
    auto [strides, dil, pads] = window_ints(c, ns, "");
    std::string auto_pad = c.as("auto_pad", "NOTSET");
    bool ceil_mode = c.ai("ceil_mode", 0) != 0;
    if (op == "ConvTranspose") {
      auto out_shape = c.aints("output_shape");
      std::vector<int64_t> opad = c.aints("output_padding").value_or(std::vector<int64_t>(ns, 0));
      if (opad.size() != ns) opad.assign(ns, 0);
      for (size_t i = 0; i < ns; ++i) {
        if (out_shape && out_shape->size() >= ns) {
          dims.push_back(SymDim::c((*out_shape)[out_shape->size() - ns + i]));
          continue;
        }
        SymDim in = x.dims[i + 2];
        if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
          dims.push_back(mul(c.S, {in, SymDim::c(strides[i])}));
          continue;
        }
        if (auto_pad == "VALID") pads[i] = pads[i + ns] = 0;
        const int64_t ek = add_i(mul_i(sub_i(kernel[i], 1), dil[i]), 1);
        SymDim t = mul(c.S, {add(c.S, {in, SymDim::c(-1)}), SymDim::c(strides[i])});
        dims.push_back(add(c.S, {t, SymDim::c(sub_i(sub_i(add_i(opad[i], ek), pads[i]), pads[i + ns]))}));
      }
    } else {
      for (size_t i = 0; i < ns; ++i) {
        dims.push_back(conv_out(c.S, x.dims[i + 2], kernel[i], strides[i], dil[i], pads[i], pads[i + ns],
                                is_pool && ceil_mode, auto_pad));
      }
    }
  }
  if (x_first.has_shape && dims.size() >= 3) {
    const SymDim ch = dims[1];
    dims.erase(dims.begin() + 1);
    dims.push_back(ch);
  }
  c.set(0, tensor(dt, dims));
  if (c.nout() > 1) c.set(1, tensor(DataType::kInt64, dims));
  return Status::Ok();
}

Status op_global_pool(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape || x.dims.size() < 2) return same_as_input0(c);
  std::vector<SymDim> dims = {x.dims[0], x.dims[1]};
  for (size_t i = 2; i < x.dims.size(); ++i) dims.push_back(SymDim::c(1));
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

// com.microsoft QLinearGlobalAveragePool: 1 over the spatial dims (NCHW, or NHWC with channels_last).
Status op_qlinear_global_pool(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape || x.dims.size() < 3) return same_as_input0(c);
  const bool last = c.ai("channels_last", 0) != 0;
  std::vector<SymDim> dims = x.dims;
  for (size_t i = 1; i < dims.size(); ++i)
    if (last ? i + 1 < dims.size() : i >= 2) dims[i] = SymDim::c(1);
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

// nxrt::FusedConv (X, W, B?, Z?): the conv's output; with a residual Z, that shape only when Z has
// exactly it (a broadcasting Z is left unknown rather than guessed).
Status op_fused_conv(NodeContext& c) {
  NXRT_RETURN_IF_ERROR(op_conv_like(c));
  if (c.n->inputs.size() > 3 && !c.n->inputs[3].empty()) {
    const ValueFacts& z = c.input(3);
    const ValueFacts y = c.out.empty() ? ValueFacts{} : c.out[0];
    bool same = y.has_shape && z.has_shape && y.dims.size() == z.dims.size();
    for (size_t i = 0; same && i < y.dims.size(); ++i) same = c.S.same(y.dims[i], z.dims[i]);
    if (!same) c.set(0, tensor_unknown_rank(y.dtype));
  }
  return Status::Ok();
}

// nxrt::ByteTable (X, Table): X's shape, Table's type (its values are a lookup table, not carried).
Status op_byte_table(NodeContext& c) {
  ValueFacts v = strip_values(c.input(0));
  if (v.kind == Kind::kUnknown) v.kind = Kind::kTensor;
  v.dtype = c.input(1).dtype;
  c.set(0, v);
  return Status::Ok();
}

// nxrt::ConvMaxPool (X, W, B?): the conv's output size per spatial axis, then the pool's over it
// (attributes pool_kernel_shape, pool_strides, pool_dilations, pool_pads, pool_ceil_mode, pool_auto_pad).
Status op_conv_max_pool(NodeContext& c) {
  NXRT_RETURN_IF_ERROR(op_conv_like(c));
  const ValueFacts y = c.out.empty() ? ValueFacts{} : c.out[0];
  if (!y.has_shape || y.dims.size() < 3) return Status::Ok();
  const size_t ns = y.dims.size() - 2;
  std::vector<int64_t> kernel = c.aints("pool_kernel_shape").value_or(std::vector<int64_t>{});
  std::vector<SymDim> dims = {y.dims[0], y.dims[1]};
  if (kernel.size() != ns) {
    for (size_t i = 0; i < ns; ++i) dims.push_back(SymDim::s(c.S.mint()));
  } else {
    const auto [strides, dil, pads] = window_ints(c, ns, "pool_");
    const std::string auto_pad = c.as("pool_auto_pad", "NOTSET");
    const bool ceil_mode = c.ai("pool_ceil_mode", 0) != 0;
    for (size_t i = 0; i < ns; ++i) {
      dims.push_back(conv_out(c.S, y.dims[i + 2], kernel[i], strides[i], dil[i], pads[i], pads[i + ns], ceil_mode,
                              auto_pad));
    }
  }
  c.set(0, tensor(y.dtype, dims));
  return Status::Ok();
}

Status op_batchnorm(NodeContext& c) {
  NXRT_RETURN_IF_ERROR(same_as_input0(c));
  const ValueFacts& x = c.input(0);
  SymDim ch = x.has_shape && x.dims.size() >= 2 ? x.dims[1] : SymDim::s(c.S.mint());
  for (size_t i = 1; i < c.nout(); ++i) {
    DataType dt = c.input(std::min<size_t>(i + 2, 4)).dtype;
    c.set(i, tensor(dt == DataType::kUndefined ? x.dtype : dt, {ch}));
  }
  return Status::Ok();
}

// LayerNormalization-like: Y like X; statistics outputs keep dims before `axis` and have 1 after.
Status norm_with_stats(NodeContext& c, int64_t axis, size_t first_stat, size_t last_stat, DataType stat_dt) {
  const ValueFacts& x = c.input(0);
  const ValueFacts y = tensor_like(x);
  c.set(0, y);
  for (size_t i = 1; i < c.nout(); ++i) {
    if (i < first_stat || i > last_stat) {
      c.set(i, y);  // e.g. input_skip_bias_sum
      continue;
    }
    if (!x.has_shape) {
      c.set(i, tensor_unknown_rank(stat_dt));
      continue;
    }
    int64_t r = static_cast<int64_t>(x.dims.size());
    int64_t a = axis;
    if (!norm_axis(a, r)) {
      c.set(i, tensor_unknown_rank(stat_dt));
      continue;
    }
    std::vector<SymDim> d(x.dims.begin(), x.dims.begin() + a);
    for (int64_t j = a; j < r; ++j) d.push_back(SymDim::c(1));
    c.set(i, tensor(stat_dt, d));
  }
  return Status::Ok();
}

Status op_layernorm(NodeContext& c) {
  const std::string& op = c.n->op_type;
  DataType xd = c.input(0).dtype;
  if (op == "LayerNormalization") {
    int64_t stash = c.ai("stash_type", 1);
    return norm_with_stats(c, c.ai("axis", -1), 1, 2, static_cast<DataType>(stash == 0 ? int64_t(xd) : stash));
  }
  if (op == "SimplifiedLayerNormalization") {
    NXRT_RETURN_IF_ERROR(norm_with_stats(c, c.ai("axis", -1), 1, 1, DataType::kFloat));
    // Y takes the scale's type (ORT: V), as the kernel writes it: a float16 X with a float32 scale
    // gives float32.
    const ValueFacts& g = c.input(1);
    if (c.nin() > 1 && g.dtype != DataType::kUndefined && g.dtype != xd) {
      ValueFacts y = c.input(0);
      y.dtype = g.dtype;
      y.has_values = false;
      y.values.clear();
      y.float_values.clear();
      c.set(0, std::move(y));
    }
    return Status::Ok();
  }
  // Skip(Simplified)LayerNormalization: output, mean, inv_std_var, input_skip_bias_sum.
  // (ORT: mean/inv_std_var are float with the leading dims.)
  if (op == "SkipSimplifiedLayerNormalization" || op == "SkipLayerNormalization") {
    return norm_with_stats(c, -1, 1, 2, DataType::kFloat);
  }
  return same_as_input0(c);
}

// com.microsoft EmbedLayerNormalization: output and embedding_sum [batch, seq, hidden], mask_index
// [batch] int32; hidden from word_embedding (input 2).
Status op_embed_layer_norm(NodeContext& c) {
  const ValueFacts& ids = c.input(0);
  const ValueFacts& w = c.input(2);
  if (!ids.has_shape || ids.dims.size() != 2 || !w.has_shape || w.dims.size() != 2) {
    for (size_t i = 0; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(i == 1 ? DataType::kInt32 : w.dtype));
    return Status::Ok();
  }
  for (size_t i = 0; i < c.nout(); ++i) {
    if (i == 1) c.set(i, tensor(DataType::kInt32, {ids.dims[0]}));
    else c.set(i, tensor(w.dtype, {ids.dims[0], ids.dims[1], w.dims[1]}));
  }
  return Status::Ok();
}

Status op_dropout(NodeContext& c) {
  NXRT_RETURN_IF_ERROR(same_as_input0(c));
  if (c.nout() > 1) {
    ValueFacts m = c.out[0];
    m.dtype = DataType::kBool;
    c.set(1, m);
  }
  return Status::Ok();
}

Status op_rnn(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  const ValueFacts& w = c.input(1);
  DataType dt = x.dtype;
  int64_t hs = c.ai("hidden_size", -1);
  SymDim h = hs > 0 ? SymDim::c(hs) : SymDim::s(c.S.mint());
  SymDim dirs = w.has_shape && !w.dims.empty() ? w.dims[0] : SymDim::c(c.as("direction", "forward") == "bidirectional" ? 2 : 1);
  if (!x.has_shape || x.dims.size() != 3) {
    for (size_t i = 0; i < c.nout(); ++i) c.set(i, tensor_unknown_rank(dt));
    return Status::Ok();
  }
  bool batch_first = c.ai("layout", 0) != 0;
  SymDim seq = x.dims[batch_first ? 1 : 0], b = x.dims[batch_first ? 0 : 1];
  c.set(0, batch_first ? tensor(dt, {b, seq, dirs, h}) : tensor(dt, {seq, dirs, b, h}));
  for (size_t i = 1; i < c.nout(); ++i) c.set(i, batch_first ? tensor(dt, {b, dirs, h}) : tensor(dt, {dirs, b, h}));
  return Status::Ok();
}

Status op_resize(NodeContext& c) {
  const ValueFacts& x = c.input(0);
  if (!x.has_shape) return same_as_input0(c);
  int64_t r = static_cast<int64_t>(x.dims.size());
  std::vector<SymDim> dims = x.dims;
  // sizes (opset >= 11: input 3) wins when given
  size_t sizes_idx = 3;
  bool odd_mode = c.as("keep_aspect_ratio_policy", "stretch") != "stretch" ||
                  c.as("coordinate_transformation_mode", "") == "tf_crop_and_resize";
  if (odd_mode) {
    for (auto& d : dims) d = SymDim::s(c.S.mint());
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  if (c.opset >= 11 && c.has(sizes_idx) && c.input(sizes_idx).has_values) {
    std::vector<int64_t> axes;
    if (auto a = c.aints("axes")) axes = *a;
    else for (int64_t i = 0; i < r; ++i) axes.push_back(i);
    const auto& v = c.input(sizes_idx).values;
    if (v.size() == axes.size()) {
      for (size_t i = 0; i < axes.size(); ++i) {
        int64_t a = axes[i];
        if (norm_axis(a, r)) dims[static_cast<size_t>(a)] = v[i];
      }
      c.set(0, tensor(x.dtype, dims));
      return Status::Ok();
    }
  }
  // Scales: Resize input 2 (opset >= 11) or 1 (opset 10); Upsample input 1 (opset 9) or attr.
  std::vector<double> scales;
  bool upsample = c.n->op_type == "Upsample";
  size_t scales_idx = upsample || c.opset < 11 ? 1 : 2;
  if (upsample && c.opset < 9) {
    if (const ir::Attribute* a = c.attr("scales")) scales.assign(a->floats.begin(), a->floats.end());
  } else if (c.has(scales_idx)) {
    scales = c.input(scales_idx).float_values;
  }
  std::vector<int64_t> axes;
  if (!upsample && c.opset >= 18 && c.attr("axes")) {
    axes = *c.aints("axes");
  } else {
    for (int64_t i = 0; i < r; ++i) axes.push_back(i);
  }
  if (scales.empty() || scales.size() != axes.size()) {
    for (auto& d : dims) d = SymDim::s(c.S.mint());
    c.set(0, tensor(x.dtype, dims));
    return Status::Ok();
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (!norm_axis(a, r)) return c.error("axis out of range for " + c.shape_str(x));
    SymDim& d = dims[static_cast<size_t>(a)];
    double sc = scales[i];
    if (d.is_const()) {
      d = SymDim::c(static_cast<int64_t>(std::floor(static_cast<double>(d.value) * sc + 1e-9)));
    } else if (sc == 1.0) {
      // unchanged
    } else if (sc == std::floor(sc) && sc > 0 && sc < 1e9) {
      d = mul(c.S, {d, SymDim::c(static_cast<int64_t>(sc))});
    } else {
      d = SymDim::s(c.S.mint());
    }
  }
  c.set(0, tensor(x.dtype, dims));
  return Status::Ok();
}

Status op_nms(NodeContext& c) {
  c.set(0, tensor(DataType::kInt64, {SymDim::s(c.S.mint()), SymDim::c(3)}));
  return Status::Ok();
}

}  // namespace

void add_nn_schemas(SchemaList& s) {
  for (const char* op : {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool", "ConvInteger", "QLinearConv"}) {
    s.add(op, &op_conv_like).rank(kSameAsInput0);
  }
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}) {
    s.add(op, &op_global_pool).rank(kSameAsInput0);
  }
  s.add("com.microsoft", "QLinearGlobalAveragePool", &op_qlinear_global_pool).rank(kSameAsInput0);
  s.add("com.microsoft", "QLinearAveragePool", &op_conv_like).rank(kSameAsInput0);  // a pool by its name
  s.add("com.microsoft", "QLinearConv", &op_conv_like).rank(kSameAsInput0);
  s.add("com.microsoft", "NhwcMaxPool", &op_conv_like).rank(kSameAsInput0);  // channels-last by its name
  s.add("BatchNormalization", &op_batchnorm).rank(kSameAsInput0);
  s.add("LayerNormalization", &op_layernorm).rank(kSameAsInput0);
  // Some exports put SimplifiedLayerNormalization in the default domain.
  s.add("SimplifiedLayerNormalization", &op_layernorm).rank(kSameAsInput0);
  for (const char* op : {"SimplifiedLayerNormalization", "SkipSimplifiedLayerNormalization", "SkipLayerNormalization",
                         "LayerNormalization"}) {
    s.add("com.microsoft", op, &op_layernorm).rank(kSameAsInput0);
  }
  s.add("com.microsoft", "EmbedLayerNormalization", &op_embed_layer_norm);
  for (const char* op : {"InstanceNormalization", "LpNormalization", "MeanVarianceNormalization", "LRN",
                         "GroupNormalization", "RMSNormalization"}) {
    s.add(op, &same_as_input0).rank(kSameAsInput0);
  }
  // Dropout in training mode draws a new mask every run.
  s.add("Dropout", &op_dropout).nondeterministic().rank(kSameAsInput0);
  for (const char* op : {"LSTM", "GRU", "RNN"}) s.add(op, &op_rnn);
  s.add("Resize", &op_resize).rank(kSameAsInput0);
  s.add("Upsample", &op_resize).rank(kSameAsInput0);
  s.add("NonMaxSuppression", &op_nms);
  // The optimizer's fused ops (src/ops/fused/).
  s.add(ir::kNxrtDomain, "FusedConv", &op_fused_conv).rank(kSameAsInput0);
  s.add(ir::kNxrtDomain, "ConvMaxPool", &op_conv_max_pool).rank(kSameAsInput0);
  s.add(ir::kNxrtDomain, "BatchNormRelu", &same_as_input0).rank(kSameAsInput0);
  s.add(ir::kNxrtDomain, "ByteTable", &op_byte_table).rank(kSameAsInput0);
  // ai.onnx kernels registered again under "nxrt" for fusions on models importing older opsets.
  s.add(ir::kNxrtDomain, "LayerNormalization", &op_layernorm).rank(kSameAsInput0);
  s.add(ir::kNxrtDomain, "RMSNormalization", &same_as_input0).rank(kSameAsInput0);
}

}  // namespace nxrt::shape
