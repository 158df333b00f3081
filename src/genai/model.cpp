#include "genai/model.h"

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

}  // namespace

Status resolve_io(Model::Impl* m) {
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
  m->kv.clear();
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    for (int kvi = 0; kvi < 2; ++kvi) {
      KvPair p{layer_name(kvi ? c.past_value_names : c.past_key_names, i),
               layer_name(kvi ? c.present_value_names : c.present_key_names, i)};
      const ValueMeta* pm = find_meta(ins, p.past);
      if (!pm) {
        return invalid_argument(where + "graph has no input '" + p.past +
                                "' (genai_config past_key_names / past_value_names, num_hidden_layers " +
                                std::to_string(c.num_hidden_layers) + ")");
      }
      if (!find_meta(outs, p.present)) {
        return invalid_argument(where + "graph has no output '" + p.present +
                                "' (genai_config present_key_names / present_value_names)");
      }
      if (pm->kind != ValueMeta::Kind::kTensor ||
          (pm->dtype != DataType::kFloat && pm->dtype != DataType::kFloat16)) {
        return not_implemented(where + "KV input '" + p.past + "' must be a float32 or float16 tensor");
      }
      if (m->kv.empty()) m->kv_dtype = pm->dtype;
      if (pm->dtype != m->kv_dtype) return invalid_argument(where + "KV inputs differ in element type");
      if (pm->has_shape) {
        if (pm->shape.size() != 4) {
          return invalid_argument(where + "'" + p.past + "' has rank " + std::to_string(pm->shape.size()) +
                                  ", expected [batch, kv_heads, seq, head_size]");
        }
        if (pm->shape[1] > 0 && pm->shape[1] != c.num_key_value_heads) {
          return invalid_argument(where + "genai_config num_key_value_heads " + std::to_string(c.num_key_value_heads) +
                                  " but '" + p.past + "' has " + std::to_string(pm->shape[1]) + " heads");
        }
        if (pm->shape[3] > 0 && pm->shape[3] != c.head_size) {
          return invalid_argument(where + "genai_config head_size " + std::to_string(c.head_size) + " but '" +
                                  p.past + "' has " + std::to_string(pm->shape[3]));
        }
      }
      known.insert(p.past);
      m->fetch_names.push_back(p.present);
      m->kv.push_back(std::move(p));
    }
  }
  for (const auto& v : ins) {
    if (!known.count(v.name) && !v.has_default) {
      return invalid_argument(where + "graph input '" + v.name +
                              "' is not one the generator feeds (input_ids, attention_mask, position_ids, past KV "
                              "as named in genai_config)");
    }
  }
  return Status::Ok();
}

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::~Model() = default;

Result<std::unique_ptr<Model>> Model::create(const std::string& path, const ModelOptions& opts) {
  auto impl = std::make_unique<Impl>();
  NXRT_ASSIGN_OR_RETURN(impl->config, read_config(path));
  NXRT_ASSIGN_OR_RETURN(impl->session, Session::create(impl->config.decoder_path, opts.session));
  NXRT_RETURN_IF_ERROR(resolve_io(impl.get()));
  return std::make_unique<Model>(std::move(impl));
}

const Config& Model::config() const { return impl_->config; }
Session& Model::session() const { return *impl_->session; }
int64_t Model::vocab_size() const { return impl_->vocab; }
DataType Model::kv_dtype() const { return impl_->kv_dtype; }

}  // namespace nxrt::genai
