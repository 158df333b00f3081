#include "genai/tokenizer/post_processor.h"

#include <string>
#include <utility>

#include "genai/json.h"
#include "genai/tokenizer/vocab.h"

namespace nxrt::genai::tok {
namespace {

// TemplateProcessing's "single" template: [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": ...}}, ...].
Status read_template(const Json& j, const TokenMap& vocab, PostProcessor& post) {
  const Json* single = j.find("single");
  if (!single || !single->is_array()) return invalid_model("tokenizer.json: TemplateProcessing without 'single'");
  const Json* specials = j.find("special_tokens");
  std::vector<PostItem> items;
  for (const Json& it : single->as_array()) {
    PostItem item;
    if (const Json* sq = it.find("Sequence")) {
      item.is_sequence = true;
      if (sq->get_string("id", "A") != "A") continue;
    } else if (const Json* st = it.find("SpecialToken")) {
      std::string name = st->get_string("id");
      const Json* def = specials ? specials->find(name) : nullptr;
      if (def && def->find("ids") && def->find("ids")->is_array()) {
        for (const Json& x : def->find("ids")->as_array()) item.ids.push_back(static_cast<int32_t>(x.as_int()));
      } else {
        int32_t id = vocab.find(name);
        if (id < 0) return invalid_model("tokenizer.json: TemplateProcessing special token '" + name + "' is unknown");
        item.ids.push_back(id);
      }
    } else {
      return invalid_model("tokenizer.json: TemplateProcessing item is neither Sequence nor SpecialToken");
    }
    items.push_back(std::move(item));
  }
  post.single = std::move(items);
  post.template_set = true;
  return Status::Ok();
}

// BertProcessing / RobertaProcessing: [cls] A [sep].
Status read_cls_sep(const Json& j, const std::string& type, PostProcessor& post) {
  std::vector<PostItem> items(3);
  const Json* cls = j.find("cls");
  const Json* sep = j.find("sep");
  if (!cls || !sep || cls->as_array().size() != 2 || sep->as_array().size() != 2) {
    return invalid_model("tokenizer.json: " + type + " needs 'cls' and 'sep' pairs");
  }
  items[0].ids.push_back(static_cast<int32_t>(cls->as_array()[1].as_int()));
  items[1].is_sequence = true;
  items[2].ids.push_back(static_cast<int32_t>(sep->as_array()[1].as_int()));
  post.single = std::move(items);
  post.template_set = true;
  return Status::Ok();
}

}  // namespace

Status read_post_processor(const Json& j, const TokenMap& vocab, PostProcessor& post) {
  std::string type = j.get_string("type");
  if (type == "ByteLevel") return Status::Ok();
  if (type == "Sequence") {
    for (const Json& e : j.find("processors") ? j.find("processors")->as_array() : Json::Array{}) {
      NXRT_RETURN_IF_ERROR(read_post_processor(e, vocab, post));
    }
    return Status::Ok();
  }
  if (type == "TemplateProcessing") return read_template(j, vocab, post);
  if (type == "BertProcessing" || type == "RobertaProcessing") return read_cls_sep(j, type, post);
  return not_implemented("tokenizer.json: post_processor type '" + type +
                         "' is not supported (supported: TemplateProcessing ByteLevel BertProcessing "
                         "RobertaProcessing Sequence)");
}

std::vector<int32_t> PostProcessor::apply(const std::vector<int32_t>& ids, bool add_special_tokens) const {
  std::vector<int32_t> out;
  out.reserve(ids.size() + 4);
  for (const PostItem& item : single) {
    if (item.is_sequence) {
      out.insert(out.end(), ids.begin(), ids.end());
    } else if (add_special_tokens) {
      out.insert(out.end(), item.ids.begin(), item.ids.end());
    }
  }
  return out;
}

}  // namespace nxrt::genai::tok
