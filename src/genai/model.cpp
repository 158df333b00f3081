#include "genai/model.h"

#include <algorithm>
#include <map>
#include <set>

namespace nxrt::genai {
namespace {

const ValueMeta* find_meta(const std::vector<ValueMeta>& v, const std::string& name) {
  for (const auto& m : v) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

bool is_int_type(DataType t) { return t == DataType::kInt64 || t == DataType::kInt32; }
bool is_kv_float(DataType t) { return t == DataType::kFloat || t == DataType::kFloat16; }

bool is_state_layer(const Config& c, int64_t layer) {
  return !c.layer_types.empty() && c.layer_types[static_cast<size_t>(layer)] == "conv";
}

// Checks one KV input's declared shape against the config: [batch, heads, seq, head_size] (or the
// combined [2, batch, heads, seq, head_size]).
Status check_kv_shape(const ValueMeta& pm, const CacheIo& io, const Config& c, const std::string& where) {
  if (!pm.has_shape) return Status::Ok();
  const bool combined = io.kind == CacheKind::kCombined;
  const size_t rank = combined ? 5 : 4;
  const char* layout = combined ? "[2, batch, heads, seq, head_size] (genai_config past_names)"
                                : "[batch, kv_heads, seq, head_size]";
  if (pm.shape.size() != rank) {
    return invalid_argument(where + "'" + pm.name + "' has rank " + std::to_string(pm.shape.size()) + ", expected " +
                            layout);
  }
  const size_t o = combined ? 1 : 0;
  if (combined && pm.shape[0] > 0 && pm.shape[0] != 2) {
    return invalid_argument(where + "'" + pm.name + "' has " + std::to_string(pm.shape[0]) + " in dim 0, expected 2 " +
                            "(key and value: genai_config past_names)");
  }
  if (pm.shape[o + 1] > 0 && pm.shape[o + 1] != c.num_key_value_heads) {
    return invalid_argument(where + "genai_config num_key_value_heads " + std::to_string(c.num_key_value_heads) +
                            " but '" + pm.name + "' has " + std::to_string(pm.shape[o + 1]) + " heads");
  }
  if (pm.shape[o + 3] > 0 && pm.shape[o + 3] != c.head_size) {
    return invalid_argument(where + "genai_config head_size " + std::to_string(c.head_size) + " but '" + pm.name +
                            "' has " + std::to_string(pm.shape[o + 3]));
  }
  return Status::Ok();
}

}  // namespace

Status resolve_io(Model::Impl* m, const std::map<std::string, int>& op_histogram) {
  const Config& c = m->config;
  const auto& ins = m->session->inputs();
  const auto& outs = m->session->outputs();
  const std::string where = c.decoder_path + ": ";
  auto tensor_in = [&](const std::string& name, const char* what, bool required) -> Result<const ValueMeta*> {
    const ValueMeta* v = find_meta(ins, name);
    if (!v) {
      if (required) {
        return invalid_argument(where + "graph has no input '" + name + "' (genai_config " + what + ")");
      }
      return static_cast<const ValueMeta*>(nullptr);
    }
    if (v->kind != ValueMeta::Kind::kTensor) return invalid_argument(where + "input '" + name + "' is not a tensor");
    return v;
  };
  NXRT_ASSIGN_OR_RETURN(const ValueMeta* ids, tensor_in(c.input_ids, "model.decoder.inputs.input_ids", true));
  if (!is_int_type(ids->dtype)) {
    return not_implemented(where + "input_ids '" + ids->name + "' is " + dtype_name(ids->dtype) + " (int32 or int64 only)");
  }
  m->ids_dtype = ids->dtype;
  NXRT_ASSIGN_OR_RETURN(const ValueMeta* mask, tensor_in(c.attention_mask, "attention_mask", false));
  if (mask) {
    if (!is_int_type(mask->dtype)) {
      return not_implemented(where + "attention_mask is " + dtype_name(mask->dtype) + " (int32 or int64 only)");
    }
    m->has_mask = true;
    m->mask_dtype = mask->dtype;
  }
  NXRT_ASSIGN_OR_RETURN(const ValueMeta* pos, tensor_in(c.position_ids, "position_ids", false));
  if (pos) {
    if (!is_int_type(pos->dtype)) {
      return not_implemented(where + "position_ids is " + dtype_name(pos->dtype) + " (int32 or int64 only)");
    }
    m->has_position_ids = true;
    m->pos_dtype = pos->dtype;
  }
  NXRT_ASSIGN_OR_RETURN(const ValueMeta* ucb, tensor_in(c.use_cache_branch, "use_cache_branch", false));
  if (ucb) {
    if (ucb->dtype != DataType::kBool) {
      return not_implemented(where + "'" + ucb->name + "' (genai_config use_cache_branch) is " +
                             dtype_name(ucb->dtype) + ", expected bool [1]");
    }
    m->has_use_cache_branch = true;
  }
  const ValueMeta* logits = find_meta(outs, c.logits);
  if (!logits) return invalid_argument(where + "graph has no output '" + c.logits + "' (genai_config logits)");
  if (logits->dtype != DataType::kFloat && logits->dtype != DataType::kFloat16) {
    return not_implemented(where + "logits are " + dtype_name(logits->dtype) + " (float32 or float16 only)");
  }
  m->logits_dtype = logits->dtype;
  m->vocab = c.vocab_size;
  if (logits->has_shape && !logits->shape.empty() && logits->shape.back() > 0) m->vocab = logits->shape.back();
  m->fetch_names = {c.logits};

  std::set<std::string> known = {c.input_ids};
  if (mask) known.insert(c.attention_mask);
  if (pos) known.insert(c.position_ids);
  if (ucb) known.insert(c.use_cache_branch);
  if (!m->logits_positions.empty()) known.insert(m->logits_positions);
  m->caches.clear();
  m->has_state = m->has_combined = false;
  bool first_kv = true;
  auto add = [&](CacheIo io, const char* past_key, const char* present_key) -> Status {
    const ValueMeta* pm = find_meta(ins, io.past);
    if (!pm) {
      return invalid_argument(where + "graph has no input '" + io.past + "' (genai_config " + past_key +
                              ", layer " + std::to_string(io.layer) + " of num_hidden_layers " +
                              std::to_string(c.num_hidden_layers) +
                              (c.layer_types.empty() ? "" : ", layer_types " + c.layer_types[static_cast<size_t>(io.layer)]) +
                              ")");
    }
    if (!find_meta(outs, io.present)) {
      return invalid_argument(where + "graph has no output '" + io.present + "' (genai_config " + present_key + ")");
    }
    if (pm->kind != ValueMeta::Kind::kTensor || !is_kv_float(pm->dtype)) {
      return not_implemented(where + "cache input '" + io.past + "' must be a float32 or float16 tensor");
    }
    io.dtype = pm->dtype;
    if (io.kind == CacheKind::kState) {
      if (!pm->has_shape || pm->shape.size() < 2) {
        return invalid_argument(where + "state input '" + io.past + "' needs a declared shape [batch, ...]");
      }
      for (size_t d = 1; d < pm->shape.size(); ++d) {
        if (pm->shape[d] <= 0) {
          return invalid_argument(where + "state input '" + io.past + "' has a symbolic dim " + std::to_string(d) +
                                  ": states after the batch dim must have a fixed size");
        }
        io.state_dims.push_back(pm->shape[d]);
      }
      if (c.conv_cache_size > 0 && io.state_dims.back() != c.conv_cache_size) {
        return invalid_argument(where + "genai_config conv_cache_size " + std::to_string(c.conv_cache_size) + " but '" +
                                io.past + "' has " + std::to_string(io.state_dims.back()) + " in its last dim");
      }
      m->has_state = true;
    } else {
      NXRT_RETURN_IF_ERROR(check_kv_shape(*pm, io, c, where));
      io.heads = c.num_key_value_heads;
      if (first_kv) m->kv_dtype = pm->dtype;
      if (pm->dtype != m->kv_dtype) return invalid_argument(where + "KV inputs differ in element type");
      first_kv = false;
      if (io.kind == CacheKind::kCombined) m->has_combined = true;
    }
    known.insert(io.past);
    m->fetch_names.push_back(io.present);
    m->caches.push_back(std::move(io));
    return Status::Ok();
  };
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    if (is_state_layer(c, i)) {
      CacheIo io;
      io.past = layer_name(c.past_conv_names, i);
      io.present = layer_name(c.present_conv_names, i);
      io.kind = CacheKind::kState;
      io.layer = i;
      NXRT_RETURN_IF_ERROR(add(std::move(io), "past_conv_names", "present_conv_names"));
    } else if (!c.past_names.empty()) {
      CacheIo io;
      io.past = layer_name(c.past_names, i);
      io.present = layer_name(c.present_names, i);
      io.kind = CacheKind::kCombined;
      io.layer = i;
      NXRT_RETURN_IF_ERROR(add(std::move(io), "past_names", "present_names"));
    } else {
      for (int kvi = 0; kvi < 2; ++kvi) {
        CacheIo io;
        io.past = layer_name(kvi ? c.past_value_names : c.past_key_names, i);
        io.present = layer_name(kvi ? c.present_value_names : c.present_key_names, i);
        io.kind = kvi ? CacheKind::kValue : CacheKind::kKey;
        io.layer = i;
        NXRT_RETURN_IF_ERROR(add(std::move(io), kvi ? "past_value_names" : "past_key_names",
                                 kvi ? "present_value_names" : "present_key_names"));
      }
    }
  }
  for (const auto& v : ins) {
    if (!known.count(v.name) && !v.has_default) {
      return invalid_argument(where + "graph input '" + v.name +
                              "' is not one the generator feeds (input_ids, attention_mask, position_ids, "
                              "use_cache_branch, past KV / state as named in genai_config)");
    }
  }
  // The KV layout follows the attention op: GroupQueryAttention and TensorScatter caches take each row's
  // write position from ReduceSum(attention_mask); anything else reads the mask itself.
  m->attention_ops.clear();
  for (const char* op : {"com.microsoft::GroupQueryAttention", "TensorScatter", "com.microsoft::Attention",
                         "com.microsoft::MultiHeadAttention", "Attention", "If"}) {
    if (op_histogram.count(op)) m->attention_ops += (m->attention_ops.empty() ? "" : ", ") + std::string(op);
  }
  const bool per_row = op_histogram.count("com.microsoft::GroupQueryAttention") || op_histogram.count("TensorScatter");
  m->layout = per_row ? KvLayout::kPerRow : KvLayout::kAligned;
  m->static_cache = op_histogram.count("TensorScatter") && !op_histogram.count("com.microsoft::GroupQueryAttention");
  if (per_row && m->has_combined) {
    return not_implemented(where + "combined past_names KV tensors with GroupQueryAttention / TensorScatter");
  }
  if (per_row && !m->has_mask) {
    return invalid_argument(where + "graph has GroupQueryAttention / TensorScatter but no attention_mask input '" +
                            c.attention_mask + "' (the rows' cache lengths come from it)");
  }
  return Status::Ok();
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::create(const std::string& path, const ModelOptions& opts) {
  auto impl = std::make_unique<Impl>();
  NXRT_ASSIGN_OR_RETURN(impl->config, read_config(path));
  SessionOptions so = opts.session;
  const std::string& logits = impl->config.logits;
  // The caller may have listed the logits among the session's position-selected outputs already.
  const bool listed = std::find(so.position_selected_outputs.begin(), so.position_selected_outputs.end(), logits) !=
                      so.position_selected_outputs.end();
  const bool select = opts.last_position_logits && !listed;
  if (select) {
    // Logits that are not a plain projection of the hidden state (or a graph with a value of the
    // input's name) stay at every position: the session says which outputs it rewrote.
    so.position_selected_outputs.push_back(logits);
    so.position_selection_optional = true;
  }
  Result<std::unique_ptr<Session>> session = Session::create(impl->config.decoder_path, so);
  if (!session.ok()) return session.status();
  impl->session = std::move(session).value();
  const std::vector<std::string>& rewritten = impl->session->position_selected_outputs();
  if (std::find(rewritten.begin(), rewritten.end(), logits) != rewritten.end()) impl->logits_positions = logits + "_positions";
  NXRT_ASSIGN_OR_RETURN(ModelSummary summary, inspect_model(impl->config.decoder_path));
  NXRT_RETURN_IF_ERROR(resolve_io(impl.get(), summary.op_histogram));
  return std::make_unique<Model>(std::move(impl));
}

const Config& Model::config() const { return impl_->config; }
Session& Model::session() const { return *impl_->session; }
int64_t Model::vocab_size() const { return impl_->vocab; }
DataType Model::kv_dtype() const { return impl_->kv_dtype; }
bool Model::last_position_logits() const { return !impl_->logits_positions.empty(); }

std::string Model::cache_layout() const {
  const Impl& m = *impl_;
  std::string s = m.has_combined ? "combined [2, batch, heads, seq, head_size] per layer" : "key/value per layer";
  if (m.has_state) s += " + fixed-size states (" + m.config.past_conv_names + ")";
  s += m.layout == KvLayout::kPerRow ? ", rows at their own lengths (seqlens from attention_mask)"
                                     : ", rows aligned on the sequence axis (pads masked)";
  if (!m.attention_ops.empty()) s += "; " + m.attention_ops;
  return s;
}

}  // namespace nxrt::genai
