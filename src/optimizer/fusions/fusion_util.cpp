#include "optimizer/fusions/fusion_util.h"

#include <algorithm>
#include <cmath>

namespace nxrt::optimizer {

bool inference_batch_norm(const Rewriter& rw, const ir::Node& bn) {
  if (!is_onnx(&bn, "BatchNormalization") || bn.inputs.size() != 5 || bn.outputs.empty()) return false;
  for (size_t k = 1; k < bn.outputs.size(); ++k) {
    if (!bn.outputs[k].empty()) return false;
  }
  if (bn.outputs[0].empty()) return false;
  const int64_t opset = rw.opset();
  if (opset >= 14 && attr_i(bn, "training_mode", 0) != 0) return false;
  return !(opset < 9 && attr_i(bn, "spatial", 1) == 0);
}

bool per_channel_values(const Tensor& c, int64_t rank, int64_t channels, std::vector<double>* per) {
  const int64_t cr = c.rank();
  if (cr > rank) return false;
  int64_t cdim = 1;
  for (int64_t j = 0; j < cr; ++j) {
    const int64_t axis = rank - cr + j, d = c.shape()[static_cast<size_t>(j)];
    if (axis == 1) cdim = d;
    if (d != 1 && !(axis == 1 && d == channels)) return false;
  }
  std::vector<double> cv;
  if (!const_values(c, &cv)) return false;
  per->resize(static_cast<size_t>(channels));
  for (int64_t m = 0; m < channels; ++m) (*per)[static_cast<size_t>(m)] = cv[static_cast<size_t>(cdim == 1 ? 0 : m)];
  return true;
}

std::string scale_output_channels(Rewriter& rw, const std::string& w_name, const Tensor& w,
                                  const std::vector<double>& f, const char* prefix) {
  const bool in_place = rw.gi.single_use(w_name) && !rw.gi.input_names.count(w_name) && w.storage() &&
                        w.storage()->owned() && w.storage().use_count() == 1 && w.is_contiguous() &&
                        w.byte_offset() == 0;
  Tensor nw = in_place ? w : w.clone();
  const int64_t M = w.dim(0), per = M > 0 ? w.numel() / M : 0;
  for (int64_t m = 0; m < M; ++m) {
    const double s = f[static_cast<size_t>(m)];
    if (nw.dtype() == DataType::kFloat) {
      float* p = nw.data<float>() + m * per;
      for (int64_t j = 0; j < per; ++j) p[j] = static_cast<float>(static_cast<double>(p[j]) * s);
    } else {
      double* p = nw.data<double>() + m * per;
      for (int64_t j = 0; j < per; ++j) p[j] *= s;
    }
  }
  return in_place ? w_name : rw.add_initializer(prefix, std::move(nw));
}

int reduce_last_axes(const Rewriter& rw, const ir::Node& r) {
  if (attr_i(r, "keepdims", 1) != 1) return 0;
  std::vector<int64_t> axes;
  if (rw.opset() >= 18) {
    if (r.inputs.size() < 2 || r.inputs[1].empty()) return 0;
    std::vector<double> v;
    const Tensor* t = rw.constant(r.inputs[1]);
    if (!t || !const_values(*t, &v)) return 0;
    for (double d : v) axes.push_back(static_cast<int64_t>(d));
  } else {
    if (r.inputs.size() != 1) return 0;
    axes = attr_ints(r, "axes");
  }
  if (axes.empty()) return 0;
  std::sort(axes.begin(), axes.end());
  const int k = static_cast<int>(axes.size());
  for (int i = 0; i < k; ++i) {
    if (axes[static_cast<size_t>(i)] != -k + i) return 0;
  }
  return k;
}

bool norm_param(const Rewriter& rw, const std::string& name, int k, DataType* dtype, NormParam* out) {
  const Tensor* t = rw.constant(name);
  if (!t || !is_float_dtype(t->dtype())) return false;
  if (*dtype != DataType::kUndefined && *dtype != t->dtype()) return false;
  *dtype = t->dtype();
  const Dims& s = t->shape();
  size_t lead = 0;
  while (lead < s.size() && s[lead] == 1 && s.size() - lead > 1) ++lead;
  if (s.size() - lead > static_cast<size_t>(k) || s.empty()) return false;
  *out = {name, lead};
  return true;
}

std::string norm_param_value(Rewriter& rw, const NormParam& p) {
  if (p.lead == 0) return p.name;
  const Tensor* t = rw.constant(p.name);
  const Dims& s = t->shape();
  return rw.add_initializer("param", t->reshaped(Dims(s.begin() + static_cast<int64_t>(p.lead), s.end())));
}

ir::Node norm_node(Rewriter& rw, int anchor, int last, const Rewriter::FusedOp& f, std::vector<std::string> inputs,
                   int k, double eps, DataType dtype) {
  return rw.fused_node(anchor, last, f, std::move(inputs),
                       {make_attr_i("axis", -k), make_attr_f("epsilon", static_cast<float>(eps)),
                        make_attr_i("stash_type", dtype == DataType::kDouble ? 11 : 1)});
}

const Tensor* pointwise_conv_weight(const Rewriter& rw, const ir::Node& conv) {
  const bool plain = is_onnx(&conv, "Conv");
  const bool fused = conv.domain == kNxrtDomain && conv.op_type == "FusedConv";
  if ((!plain && !fused) || conv.inputs.size() < 2 || conv.inputs[0].empty()) return nullptr;
  if (fused && conv.inputs.size() > 3) return nullptr;
  const Tensor* w = rw.constant(conv.inputs[1]);
  if (!w || w->dtype() != DataType::kFloat || w->rank() != 4 || w->dim(2) != 1 || w->dim(3) != 1) return nullptr;
  if (attr_i(conv, "group", 1) != 1) return nullptr;
  const std::string pad_mode = attr_s(conv, "auto_pad", "NOTSET");
  if (pad_mode != "NOTSET" && pad_mode != "VALID") return nullptr;
  for (const auto& a : conv.attributes) {
    if (a.name != "strides" && a.name != "pads") continue;
    for (int64_t v : a.ints) {
      if (v != (a.name == "strides" ? 1 : 0)) return nullptr;
    }
  }
  return w;
}

ir::Node with_weights(const ir::Node& conv, const std::string& w, const std::string& b) {
  ir::Node n = conv;
  n.inputs.resize(3);
  n.inputs[1] = w;
  n.inputs[2] = b;
  return n;
}

bool qdq_per_tensor(const Rewriter& rw, const ir::Node& n, const Tensor** scale, const Tensor** zp) {
  if (n.inputs.size() < 2 || n.inputs[1].empty() || attr_i(n, "block_size", 0) != 0) return false;
  const Tensor* s = rw.constant(n.inputs[1]);
  if (!s || s->dtype() != DataType::kFloat || s->numel() != 1) return false;
  const float v = s->data<float>()[0];
  if (!(v > 0) || !std::isfinite(v)) return false;
  *scale = s;
  *zp = nullptr;
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const Tensor* z = rw.constant(n.inputs[2]);
    if (!z || (z->dtype() != DataType::kUInt8 && z->dtype() != DataType::kInt8) || z->numel() != 1) return false;
    *zp = z;
  }
  return true;
}

bool batch_norm_params(const Rewriter& rw, const ir::Node& bn, std::vector<const Tensor*>* params) {
  params->clear();
  for (size_t k = 1; k < 5 && k < bn.inputs.size(); ++k) {
    const Tensor* t = rw.constant(bn.inputs[k]);
    if (!t || t->rank() != 1 || (k > 1 && t->numel() != (*params)[0]->numel())) return false;
    params->push_back(t);
  }
  return params->size() == 4;
}

}  // namespace nxrt::optimizer
