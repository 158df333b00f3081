// The op schema table: every family's records, looked up by (domain, op, opset); see op_schema.h.
#include "shape/op_schema.h"

#include <unordered_map>

#include "ir/graph.h"
#include "shape/node_context.h"

namespace nxrt::shape {

namespace {

struct SchemaTable {
  std::vector<OpSchema> all;
  std::unordered_map<std::string, std::vector<size_t>> by_key;  // "domain::op" -> indices into all
};

std::string schema_key(const std::string& canonical_domain, const std::string& op_type) {
  return canonical_domain + "::" + op_type;
}

const SchemaTable& table() {
  static const SchemaTable* t = [] {
    auto* r = new SchemaTable();
    SchemaList s(&r->all);
    add_elementwise_schemas(s);
    add_tensor_schemas(s);
    add_indexing_schemas(s);
    add_generator_schemas(s);
    add_nn_schemas(s);
    add_reduction_schemas(s);
    add_linalg_schemas(s);
    add_attention_schemas(s);
    add_control_flow_schemas(s);
    for (size_t i = 0; i < r->all.size(); ++i) {
      r->by_key[schema_key(r->all[i].domain, r->all[i].op_type)].push_back(i);
    }
    return r;
  }();
  return *t;
}

}  // namespace

const OpSchema* find_schema(const std::string& domain, const std::string& op_type, int64_t opset) {
  const SchemaTable& t = table();
  auto it = t.by_key.find(schema_key(ir::canonical_domain(domain), op_type));
  if (it == t.by_key.end()) return nullptr;
  for (size_t i : it->second) {
    const OpSchema& s = t.all[i];
    if (opset >= s.since_version && opset <= s.end_version) return &s;
  }
  return nullptr;
}

const std::vector<OpSchema>& all_schemas() { return table().all; }

}  // namespace nxrt::shape
