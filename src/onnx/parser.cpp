#include "onnx/parser.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <unordered_set>

#include "onnx/graph_check.h"

namespace nxrt::onnx {

using wire::Field;

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 62;

// Product of dims; false on a negative dim or overflow.
bool checked_numel(const Dims& dims, int64_t* out) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return false;
    if (d != 0 && n > kMaxElements / d) return false;
    n *= d;
  }
  *out = n;
  return true;
}

std::string tensor_desc(const std::string& name, DataType dt, const Dims& dims) {
  std::string s = "tensor";
  if (!name.empty()) s += " '" + name + "'";
  s += std::string(" (") + dtype_name(dt) + shape_to_string(dims) + ")";
  return s;
}

// Alignment the element type needs for a borrowed (zero-copy) pointer.
size_t element_alignment(DataType dt) {
  switch (dt) {
    case DataType::kComplex64: return 4;
    case DataType::kComplex128: return 8;
    default: {
      int bits = dtype_bits(dt);
      return bits >= 8 ? static_cast<size_t>(bits / 8) : 1;
    }
  }
}

bool parse_decimal(const std::string& s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// Resolves `location` inside `base_dir`; rejects absolute paths and `..` that leave it.
Status resolve_location(const std::string& base_dir, const std::string& location, std::string* out) {
  if (location.empty()) return invalid_model("external data location is empty");
  if (location[0] == '/') return invalid_model("external data location '" + location + "' is an absolute path");
  if (location.find('\0') != std::string::npos) return invalid_model("external data location contains a NUL byte");
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= location.size()) {
    size_t slash = location.find('/', start);
    if (slash == std::string::npos) slash = location.size();
    std::string part = location.substr(start, slash - start);
    if (part == "..") {
      if (parts.empty()) {
        return invalid_model("external data location '" + location + "' escapes the model folder");
      }
      parts.pop_back();
    } else if (!part.empty() && part != ".") {
      parts.push_back(part);
    }
    start = slash + 1;
  }
  if (parts.empty()) return invalid_model("external data location '" + location + "' names no file");
  std::string rel;
  for (const auto& p : parts) rel += (rel.empty() ? "" : "/") + p;
  const std::string joined = base_dir + "/" + rel;
  char* real_base = ::realpath(base_dir.c_str(), nullptr);
  if (!real_base) return io_error("cannot resolve model folder '" + base_dir + "'");
  std::string rb(real_base);
  std::free(real_base);
  char* real_file = ::realpath(joined.c_str(), nullptr);
  if (!real_file) return io_error("external data file '" + joined + "' does not exist");
  std::string rf(real_file);
  std::free(real_file);
  const std::string prefix = rb == "/" ? rb : rb + "/";
  if (rf.compare(0, prefix.size(), prefix) != 0) {
    return invalid_model("external data location '" + location + "' resolves to '" + rf +
                         "', outside the model folder");
  }
  *out = rf;
  return Status::Ok();
}

// Reads element i of a packed sub-byte buffer / writes it.
inline uint8_t get_bits(const uint8_t* p, int64_t i, int bits) {
  const int per = 8 / bits;
  const int shift = static_cast<int>(i % per) * bits;
  return static_cast<uint8_t>((p[i / per] >> shift) & ((1 << bits) - 1));
}
inline void set_bits(uint8_t* p, int64_t i, int bits, uint8_t v) {
  const int per = 8 / bits;
  const int shift = static_cast<int>(i % per) * bits;
  const uint8_t mask = static_cast<uint8_t>(((1 << bits) - 1) << shift);
  p[i / per] = static_cast<uint8_t>((p[i / per] & ~mask) | ((v << shift) & mask));
}

}  // namespace

struct Parser::TensorFields {
  Dims dims;
  int32_t data_type = 0;
  std::string name;
  bool has_raw = false;
  const uint8_t* raw = nullptr;
  size_t raw_size = 0;
  size_t raw_offset = 0;
  std::vector<float> f32;
  std::vector<int32_t> i32;
  std::vector<int64_t> i64;
  std::vector<double> f64;
  std::vector<uint64_t> u64;
  std::vector<std::string> strs;
  std::vector<std::pair<std::string, std::string>> external;
  int32_t location = 0;
  bool has_segment = false;
  size_t offset = 0;      // the TensorProto's own field tag
  size_t dtype_offset = 0;
};

Parser::Parser(const uint8_t* data, size_t size, ParseOptions opts)
    : ctx_(data), data_(data), size_(size), opts_(std::move(opts)) {}

Status Parser::read_str(const Field& f, const char* field, std::string* out) {
  // Strings that hold data rather than name something.
  static constexpr const char* kText[] = {"doc_string", "s", "strings", "string_data", "key", "value", "string_keys"};
  bool text = false;
  for (const char* t : kText) text = text || std::strcmp(t, field) == 0;
  const size_t limit = text ? opts_.limits.max_string_bytes : opts_.limits.max_name_bytes;
  if (f.type == wire::kLen && f.size > limit) {
    return ctx_.error(f.offset, "string of " + std::to_string(f.size) + " bytes, more than the " +
                                    std::to_string(limit) + " allowed for " + (text ? "a string" : "a name"),
                      field);
  }
  return wire::read_string(ctx_, f, field, out);
}

Status Parser::count_entry(size_t* counter, size_t limit, const Field& f, const char* field, int64_t index,
                           const char* what) {
  if (++*counter <= limit) return Status::Ok();
  ctx_.push(field, index);
  Status s = ctx_.error(f.offset, std::string("more than ") + std::to_string(limit) + " " + what + " in the file");
  ctx_.pop();
  return s;
}

Status Parser::check_rank(size_t rank, size_t offset, const std::string& what) {
  if (rank > opts_.limits.max_rank) {
    return ctx_.error(offset, what + " has " + std::to_string(rank) + " dims, more than the " +
                                  std::to_string(opts_.limits.max_rank) + " allowed");
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// ModelProto

Status Parser::parse_model(ir::Model* m) {
  wire::Scope root(ctx_, "ModelProto");
  wire::Reader r(ctx_, data_, size_);
  Field f;
  int64_t n_opset = 0, n_meta = 0, n_fn = 0;
  bool has_graph = false;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(wire::read_int64(ctx_, f, "ir_version", &m->ir_version)); break;
      case 2: NXRT_RETURN_IF_ERROR(read_str(f, "producer_name", &m->producer_name)); break;
      case 3: NXRT_RETURN_IF_ERROR(read_str(f, "producer_version", &m->producer_version)); break;
      case 4: NXRT_RETURN_IF_ERROR(read_str(f, "domain", &m->domain)); break;
      case 5: NXRT_RETURN_IF_ERROR(wire::read_int64(ctx_, f, "model_version", &m->model_version)); break;
      case 6: NXRT_RETURN_IF_ERROR(read_str(f, "doc_string", &m->doc)); break;
      case 7:
        if (has_graph) return ctx_.error(f.offset, "a second graph", "graph");
        has_graph = true;
        NXRT_RETURN_IF_ERROR(sub(f, "graph", -1, [&] { return parse_graph(f, &m->graph, 0); }));
        break;
      case 8: {
        m->opset_imports.emplace_back();
        NXRT_RETURN_IF_ERROR(
            sub(f, "opset_import", n_opset++, [&] { return parse_opset(f, &m->opset_imports.back()); }));
        break;
      }
      case 14: {
        m->metadata_props.emplace_back();
        NXRT_RETURN_IF_ERROR(
            sub(f, "metadata_props", n_meta++, [&] { return parse_string_pair(f, &m->metadata_props.back()); }));
        break;
      }
      case 25: {
        m->functions.emplace_back();
        NXRT_RETURN_IF_ERROR(sub(f, "functions", n_fn++, [&] { return parse_function(f, &m->functions.back()); }));
        break;
      }
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  if (!has_graph) return ctx_.error(size_, "no graph");
  // Opset imports: one version per domain.
  std::map<std::string, int64_t> versions;
  for (const auto& o : m->opset_imports) {
    auto [it, inserted] = versions.emplace(ir::canonical_domain(o.domain), o.version);
    if (!inserted && it->second != o.version) {
      return ctx_.error_no_offset("domain '" + o.domain + "' imported at versions " + std::to_string(it->second) +
                                      " and " + std::to_string(o.version),
                                  "opset_import");
    }
  }
  return Status::Ok();
}

Status Parser::parse_opset(const Field& msg, ir::OpsetImport* o) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(read_str(f, "domain", &o->domain)); break;
      case 2: NXRT_RETURN_IF_ERROR(wire::read_int64(ctx_, f, "version", &o->version)); break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  return Status::Ok();
}

Status Parser::parse_string_pair(const Field& msg, std::pair<std::string, std::string>* kv) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(read_str(f, "key", &kv->first)); break;
      case 2: NXRT_RETURN_IF_ERROR(read_str(f, "value", &kv->second)); break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// GraphProto

Status Parser::parse_graph(const Field& msg, ir::Graph* g, int graph_depth) {
  if (graph_depth > opts_.limits.max_graph_depth) {
    return ctx_.error(msg.offset, "subgraphs nested deeper than " + std::to_string(opts_.limits.max_graph_depth));
  }
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  int64_t n_node = 0, n_init = 0, n_sparse = 0, n_in = 0, n_out = 0, n_vi = 0;
  std::vector<size_t> node_offsets;
  std::vector<std::string> defined;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: {
        NXRT_RETURN_IF_ERROR(count_entry(&nodes_, opts_.limits.max_nodes, f, "node", n_node, "nodes"));
        g->nodes.emplace_back();
        node_offsets.push_back(f.offset);
        NXRT_RETURN_IF_ERROR(
            sub(f, "node", n_node++, [&] { return parse_node(f, &g->nodes.back(), graph_depth); }));
        break;
      }
      case 2: NXRT_RETURN_IF_ERROR(read_str(f, "name", &g->name)); break;
      case 5:
      case 15: {
        const bool sparse = f.number == 15;
        const char* field = sparse ? "sparse_initializer" : "initializer";
        NXRT_RETURN_IF_ERROR(count_entry(&initializers_, opts_.limits.max_initializers, f, field,
                                         sparse ? n_sparse : n_init, "initializers"));
        Tensor t;
        std::string name;
        NXRT_RETURN_IF_ERROR(sub(f, field, sparse ? n_sparse++ : n_init++, [&]() -> Status {
          NXRT_RETURN_IF_ERROR(sparse ? parse_sparse_tensor(f, &t, &name) : parse_tensor(f, &t, &name));
          if (name.empty()) return ctx_.error(f.offset, "initializer has no name");
          if (g->initializers.count(name)) return ctx_.error(f.offset, "duplicate initializer '" + name + "'");
          return Status::Ok();
        }));
        defined.push_back(name);
        g->initializers.emplace(std::move(name), std::move(t));
        break;
      }
      case 10: NXRT_RETURN_IF_ERROR(read_str(f, "doc_string", &g->doc)); break;
      case 11:
      case 12:
      case 13: {
        std::vector<ir::ValueInfo>& list = f.number == 11 ? g->inputs : f.number == 12 ? g->outputs : g->value_info;
        const char* field = f.number == 11 ? "input" : f.number == 12 ? "output" : "value_info";
        int64_t& idx = f.number == 11 ? n_in : f.number == 12 ? n_out : n_vi;
        NXRT_RETURN_IF_ERROR(count_entry(&value_infos_, opts_.limits.max_value_infos, f, field, idx,
                                         "graph inputs, outputs and value_info entries"));
        list.emplace_back();
        NXRT_RETURN_IF_ERROR(sub(f, field, idx++, [&] { return parse_value_info(f, &list.back()); }));
        break;
      }
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  for (const auto& v : g->inputs) defined.push_back(v.name);
  return check_and_sort_nodes(g->nodes, defined, [&](size_t i, const std::string& what) {
    ctx_.push("node", static_cast<int64_t>(i));
    Status s = ctx_.error(node_offsets[i], what);
    ctx_.pop();
    return s;
  });
}

Status Parser::parse_node(const Field& msg, ir::Node* n, int graph_depth) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  int64_t n_attr = 0;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1:
        n->inputs.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "input", &n->inputs.back()));
        break;
      case 2:
        n->outputs.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "output", &n->outputs.back()));
        break;
      case 3: NXRT_RETURN_IF_ERROR(read_str(f, "name", &n->name)); break;
      case 4: NXRT_RETURN_IF_ERROR(read_str(f, "op_type", &n->op_type)); break;
      case 5: {
        NXRT_RETURN_IF_ERROR(
            count_entry(&attributes_, opts_.limits.max_attributes, f, "attribute", n_attr, "attributes"));
        n->attributes.emplace_back();
        NXRT_RETURN_IF_ERROR(
            sub(f, "attribute", n_attr++, [&] { return parse_attribute(f, &n->attributes.back(), graph_depth); }));
        break;
      }
      case 6: NXRT_RETURN_IF_ERROR(read_str(f, "doc_string", &n->doc)); break;
      case 7: NXRT_RETURN_IF_ERROR(read_str(f, "domain", &n->domain)); break;
      case 8: NXRT_RETURN_IF_ERROR(read_str(f, "overload", &n->overload)); break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  return Status::Ok();
}

Status Parser::parse_attribute(const Field& msg, ir::Attribute* a, int graph_depth) {
  using T = ir::Attribute::Type;
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  bool has_type = false;
  T first_set = T::kUndefined;  // the first value field seen (for old models without `type`)
  auto seen = [&](T t) {
    if (first_set == T::kUndefined) first_set = t;
  };
  int64_t n_t = 0, n_g = 0, n_st = 0, n_tp = 0;
  int32_t type_value = 0;
  size_t type_offset = 0;
  bool has_t = false;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(read_str(f, "name", &a->name)); break;
      case 2:
        NXRT_RETURN_IF_ERROR(wire::read_float(ctx_, f, "f", &a->f));
        seen(T::kFloat);
        break;
      case 3:
        NXRT_RETURN_IF_ERROR(wire::read_int64(ctx_, f, "i", &a->i));
        seen(T::kInt);
        break;
      case 4:
        NXRT_RETURN_IF_ERROR(read_str(f, "s", &a->s));
        seen(T::kString);
        break;
      case 5:
        NXRT_RETURN_IF_ERROR(sub(f, "t", -1, [&] { return parse_tensor(f, &a->t, nullptr); }));
        has_t = true;
        seen(T::kTensor);
        break;
      case 6:
        a->g = std::make_shared<ir::Graph>();
        NXRT_RETURN_IF_ERROR(sub(f, "g", -1, [&] { return parse_graph(f, a->g.get(), graph_depth + 1); }));
        seen(T::kGraph);
        break;
      case 7:
        NXRT_RETURN_IF_ERROR(wire::append_floats(ctx_, f, "floats", &a->floats));
        seen(T::kFloats);
        break;
      case 8:
        NXRT_RETURN_IF_ERROR(wire::append_varints(ctx_, f, "ints", &a->ints));
        seen(T::kInts);
        break;
      case 9:
        a->strings.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "strings", &a->strings.back()));
        seen(T::kStrings);
        break;
      case 10:
        a->tensors.emplace_back();
        NXRT_RETURN_IF_ERROR(sub(f, "tensors", n_t++, [&] { return parse_tensor(f, &a->tensors.back(), nullptr); }));
        seen(T::kTensors);
        break;
      case 11:
        a->graphs.push_back(std::make_shared<ir::Graph>());
        NXRT_RETURN_IF_ERROR(
            sub(f, "graphs", n_g++, [&] { return parse_graph(f, a->graphs.back().get(), graph_depth + 1); }));
        seen(T::kGraphs);
        break;
      case 14:
        NXRT_RETURN_IF_ERROR(sub(f, "tp", -1, [&] { return parse_type(f, &a->tp); }));
        seen(T::kTypeProto);
        break;
      case 15:
        a->type_protos.emplace_back();
        NXRT_RETURN_IF_ERROR(
            sub(f, "type_protos", n_tp++, [&] { return parse_type(f, &a->type_protos.back()); }));
        seen(T::kTypeProtos);
        break;
      case 20:
        NXRT_RETURN_IF_ERROR(wire::read_int32(ctx_, f, "type", &type_value));
        has_type = true;
        type_offset = f.offset;
        break;
      case 21: NXRT_RETURN_IF_ERROR(read_str(f, "ref_attr_name", &a->ref_attr_name)); break;
      case 22:
        NXRT_RETURN_IF_ERROR(sub(f, "sparse_tensor", -1, [&] { return parse_sparse_tensor(f, &a->t, nullptr); }));
        has_t = true;
        seen(T::kSparseTensor);
        break;
      case 23:
        a->tensors.emplace_back();
        NXRT_RETURN_IF_ERROR(sub(f, "sparse_tensors", n_st++,
                                 [&] { return parse_sparse_tensor(f, &a->tensors.back(), nullptr); }));
        seen(T::kSparseTensors);
        break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  if (has_type && type_value != 0) {
    const bool valid = (type_value >= 1 && type_value <= 14);
    if (!valid) return ctx_.error(type_offset, "unknown attribute type " + std::to_string(type_value), "type");
    a->type = static_cast<T>(type_value);
  } else {
    a->type = first_set;  // IR version 1: infer from the field that is set
  }
  // A tensor or graph attribute must carry its value (unless it refers to a function's attribute):
  // kernels and the writer take an attribute's type to mean its value is there.
  if (a->ref_attr_name.empty()) {
    const char* missing = (a->type == T::kTensor && !has_t)         ? "t"
                          : (a->type == T::kSparseTensor && !has_t) ? "sparse_tensor"
                          : (a->type == T::kGraph && !a->g)          ? "g"
                                                                     : nullptr;
    if (missing) {
      return ctx_.error(msg.offset, "attribute '" + a->name + "' has type " + attribute_type_name(a->type) +
                                        " but no " + missing + " field");
    }
  }
  return Status::Ok();
}

Status Parser::parse_value_info(const Field& msg, ir::ValueInfo* v) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(read_str(f, "name", &v->name)); break;
      case 2: NXRT_RETURN_IF_ERROR(sub(f, "type", -1, [&] { return parse_type(f, &v->type); })); break;
      case 3: NXRT_RETURN_IF_ERROR(read_str(f, "doc_string", &v->doc)); break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  return Status::Ok();
}

Status Parser::parse_dtype(const Field& f, const char* name, DataType* out, bool allow_undefined) {
  int64_t v = 0;
  NXRT_RETURN_IF_ERROR(wire::read_int64(ctx_, f, name, &v));
  if (v == 0 && allow_undefined) {
    *out = DataType::kUndefined;
    return Status::Ok();
  }
  if (v < 1 || v > kMaxDataType) {
    return ctx_.error(f.offset, "unknown data type " + std::to_string(v) + " (known: 1.." +
                                    std::to_string(kMaxDataType) + ")",
                      name);
  }
  *out = static_cast<DataType>(v);
  return Status::Ok();
}

Status Parser::parse_type(const Field& msg, ir::TypeInfo* t) {
  using K = ir::TypeInfo::Kind;
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1:
        t->kind = K::kTensor;
        NXRT_RETURN_IF_ERROR(sub(f, "tensor_type", -1, [&] { return parse_tensor_type(f, t); }));
        break;
      case 8:
        t->kind = K::kSparseTensor;
        NXRT_RETURN_IF_ERROR(sub(f, "sparse_tensor_type", -1, [&] { return parse_tensor_type(f, t); }));
        break;
      case 4:
      case 9: {
        const bool seq = f.number == 4;
        t->kind = seq ? K::kSequence : K::kOptional;
        t->inner = std::make_shared<ir::TypeInfo>();
        NXRT_RETURN_IF_ERROR(sub(f, seq ? "sequence_type" : "optional_type", -1, [&]() -> Status {
          wire::Reader r2(ctx_, f.data, f.size);
          Field g;
          while (!r2.done()) {
            NXRT_RETURN_IF_ERROR(r2.next(g));
            if (g.number == 1) {
              NXRT_RETURN_IF_ERROR(sub(g, "elem_type", -1, [&] { return parse_type(g, t->inner.get()); }));
            } else {
              NXRT_RETURN_IF_ERROR(r2.skip(g));
            }
          }
          return Status::Ok();
        }));
        break;
      }
      case 5: {
        t->kind = K::kMap;
        t->inner = std::make_shared<ir::TypeInfo>();
        NXRT_RETURN_IF_ERROR(sub(f, "map_type", -1, [&]() -> Status {
          wire::Reader r2(ctx_, f.data, f.size);
          Field g;
          while (!r2.done()) {
            NXRT_RETURN_IF_ERROR(r2.next(g));
            if (g.number == 1) {
              NXRT_RETURN_IF_ERROR(parse_dtype(g, "key_type", &t->elem_type, true));
            } else if (g.number == 2) {
              NXRT_RETURN_IF_ERROR(sub(g, "value_type", -1, [&] { return parse_type(g, t->inner.get()); }));
            } else {
              NXRT_RETURN_IF_ERROR(r2.skip(g));
            }
          }
          return Status::Ok();
        }));
        break;
      }
      default: NXRT_RETURN_IF_ERROR(r.skip(f));  // denotation, opaque_type, ...
    }
  }
  return Status::Ok();
}

Status Parser::parse_tensor_type(const Field& msg, ir::TypeInfo* t) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(parse_dtype(f, "elem_type", &t->elem_type, true)); break;
      case 2:
        t->has_shape = true;
        t->dims.clear();
        NXRT_RETURN_IF_ERROR(sub(f, "shape", -1, [&] { return parse_shape(f, t); }));
        break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  return Status::Ok();
}

Status Parser::parse_shape(const Field& msg, ir::TypeInfo* t) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  int64_t n_dim = 0;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    if (f.number != 1) {
      NXRT_RETURN_IF_ERROR(r.skip(f));
      continue;
    }
    NXRT_RETURN_IF_ERROR(check_rank(t->dims.size() + 1, f.offset, "shape"));
    t->dims.emplace_back();
    ir::Dim& d = t->dims.back();
    NXRT_RETURN_IF_ERROR(sub(f, "dim", n_dim++, [&]() -> Status {
      wire::Reader r2(ctx_, f.data, f.size);
      Field g;
      while (!r2.done()) {
        NXRT_RETURN_IF_ERROR(r2.next(g));
        if (g.number == 1) {
          int64_t v = 0;
          NXRT_RETURN_IF_ERROR(wire::read_int64(ctx_, g, "dim_value", &v));
          d.value = v >= 0 ? v : -1;  // a negative dim_value is treated as unknown
          d.symbol.clear();
        } else if (g.number == 2) {
          NXRT_RETURN_IF_ERROR(read_str(g, "dim_param", &d.symbol));
          d.value = -1;
        } else {
          NXRT_RETURN_IF_ERROR(r2.skip(g));
        }
      }
      return Status::Ok();
    }));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// FunctionProto

Status Parser::parse_function(const Field& msg, ir::Function* fn) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  int64_t n_node = 0, n_attr = 0, n_opset = 0;
  std::vector<size_t> node_offsets;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(read_str(f, "name", &fn->name)); break;
      case 4:
        fn->inputs.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "input", &fn->inputs.back()));
        break;
      case 5:
        fn->outputs.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "output", &fn->outputs.back()));
        break;
      case 6:
        fn->attribute_names.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "attribute", &fn->attribute_names.back()));
        break;
      case 11:
        NXRT_RETURN_IF_ERROR(
            count_entry(&attributes_, opts_.limits.max_attributes, f, "attribute_proto", n_attr, "attributes"));
        fn->attribute_defaults.emplace_back();
        NXRT_RETURN_IF_ERROR(sub(f, "attribute_proto", n_attr++,
                                 [&] { return parse_attribute(f, &fn->attribute_defaults.back(), 0); }));
        break;
      case 7:
        NXRT_RETURN_IF_ERROR(count_entry(&nodes_, opts_.limits.max_nodes, f, "node", n_node, "nodes"));
        fn->nodes.emplace_back();
        node_offsets.push_back(f.offset);
        NXRT_RETURN_IF_ERROR(sub(f, "node", n_node++, [&] { return parse_node(f, &fn->nodes.back(), 0); }));
        break;
      case 9:
        fn->opset_imports.emplace_back();
        NXRT_RETURN_IF_ERROR(
            sub(f, "opset_import", n_opset++, [&] { return parse_opset(f, &fn->opset_imports.back()); }));
        break;
      case 10: NXRT_RETURN_IF_ERROR(read_str(f, "domain", &fn->domain)); break;
      case 13: NXRT_RETURN_IF_ERROR(read_str(f, "overload", &fn->overload)); break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));  // doc_string, value_info, metadata_props
    }
  }
  return check_and_sort_nodes(fn->nodes, fn->inputs, [&](size_t i, const std::string& what) {
    ctx_.push("node", static_cast<int64_t>(i));
    Status s = ctx_.error(node_offsets[i], what);
    ctx_.pop();
    return s;
  });
}

// ---------------------------------------------------------------------------------------------
// TensorProto

Status Parser::parse_tensor(const Field& msg, Tensor* t, std::string* name) {
  TensorFields tf;
  tf.offset = msg.offset;
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  int64_t n_ext = 0;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1: NXRT_RETURN_IF_ERROR(wire::append_varints(ctx_, f, "dims", &tf.dims)); break;
      case 2:
        NXRT_RETURN_IF_ERROR(wire::read_int32(ctx_, f, "data_type", &tf.data_type));
        tf.dtype_offset = f.offset;
        break;
      case 3:
        NXRT_RETURN_IF_ERROR(wire::expect_type(ctx_, f, wire::kLen, "segment"));
        tf.has_segment = true;
        break;
      case 4: NXRT_RETURN_IF_ERROR(wire::append_floats(ctx_, f, "float_data", &tf.f32)); break;
      case 5: NXRT_RETURN_IF_ERROR(wire::append_varints32(ctx_, f, "int32_data", &tf.i32)); break;
      case 6:
        tf.strs.emplace_back();
        NXRT_RETURN_IF_ERROR(read_str(f, "string_data", &tf.strs.back()));
        break;
      case 7: NXRT_RETURN_IF_ERROR(wire::append_varints(ctx_, f, "int64_data", &tf.i64)); break;
      case 8: NXRT_RETURN_IF_ERROR(read_str(f, "name", &tf.name)); break;
      case 9:
        NXRT_RETURN_IF_ERROR(wire::expect_type(ctx_, f, wire::kLen, "raw_data"));
        tf.has_raw = true;
        tf.raw = f.data;
        tf.raw_size = f.size;
        tf.raw_offset = f.offset;
        break;
      case 10: NXRT_RETURN_IF_ERROR(wire::append_doubles(ctx_, f, "double_data", &tf.f64)); break;
      case 11: NXRT_RETURN_IF_ERROR(wire::append_varintsu64(ctx_, f, "uint64_data", &tf.u64)); break;
      case 13:
        tf.external.emplace_back();
        NXRT_RETURN_IF_ERROR(
            sub(f, "external_data", n_ext++, [&] { return parse_string_pair(f, &tf.external.back()); }));
        break;
      case 14: NXRT_RETURN_IF_ERROR(wire::read_int32(ctx_, f, "data_location", &tf.location)); break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));  // doc_string, metadata_props
    }
  }
  NXRT_RETURN_IF_ERROR(build_tensor(tf, t));
  if (name) *name = std::move(tf.name);
  return Status::Ok();
}

Status Parser::build_tensor(TensorFields& tf, Tensor* out) {
  if (!is_known_dtype(tf.data_type)) {
    std::string what = "tensor";
    if (!tf.name.empty()) what += " '" + tf.name + "'";
    if (tf.data_type == 0) return ctx_.error(tf.offset, what + " has no data_type (UNDEFINED)");
    return ctx_.error(tf.dtype_offset, what + ": unknown data_type " + std::to_string(tf.data_type) +
                                           " (known: 1.." + std::to_string(kMaxDataType) + ")");
  }
  const DataType dt = static_cast<DataType>(tf.data_type);
  NXRT_RETURN_IF_ERROR(check_rank(tf.dims.size(), tf.offset, tensor_desc(tf.name, dt, {})));
  int64_t n = 0;
  if (!checked_numel(tf.dims, &n)) {
    return ctx_.error(tf.offset, tensor_desc(tf.name, dt, tf.dims) + ": invalid dims (negative or overflowing)");
  }
  const std::string desc = tensor_desc(tf.name, dt, tf.dims);
  if (tf.has_segment) return ctx_.error(tf.offset, desc + ": segmented tensors are not supported");
  if (tf.location == 1) return load_external(tf, dt, tf.dims, n, out);
  if (tf.location != 0) {
    return ctx_.error(tf.offset, desc + ": unknown data_location " + std::to_string(tf.location));
  }

  if (tf.has_raw) {
    if (dt == DataType::kString) return ctx_.error(tf.raw_offset, desc + ": string tensors cannot use raw_data");
    const size_t want = dtype_storage_bytes(dt, n);
    if (tf.raw_size != want) {
      return ctx_.error(tf.raw_offset, desc + ": raw_data has " + std::to_string(tf.raw_size) + " bytes, expected " +
                                           std::to_string(want));
    }
    const uintptr_t addr = reinterpret_cast<uintptr_t>(tf.raw);
    if (opts_.borrow_raw && want > 0 && addr % element_alignment(dt) == 0) {
      *out = Tensor(dt, tf.dims, Storage::borrow(const_cast<uint8_t*>(tf.raw), want, opts_.keepalive));
    } else {
      Tensor t(dt, tf.dims);
      if (want) std::memcpy(t.raw_data(), tf.raw, want);
      *out = std::move(t);
    }
    return Status::Ok();
  }

  // Typed fields: which one this dtype uses and how many entries it needs.
  const char* field = nullptr;
  size_t have = 0;
  int64_t want = n;
  switch (dt) {
    case DataType::kFloat: field = "float_data"; have = tf.f32.size(); break;
    case DataType::kComplex64: field = "float_data"; have = tf.f32.size(); want = 2 * n; break;
    case DataType::kDouble: field = "double_data"; have = tf.f64.size(); break;
    case DataType::kComplex128: field = "double_data"; have = tf.f64.size(); want = 2 * n; break;
    case DataType::kInt64: field = "int64_data"; have = tf.i64.size(); break;
    case DataType::kUInt32:
    case DataType::kUInt64: field = "uint64_data"; have = tf.u64.size(); break;
    case DataType::kString: field = "string_data"; have = tf.strs.size(); break;
    case DataType::kUInt4:
    case DataType::kInt4:
    case DataType::kFloat4E2M1: field = "int32_data"; have = tf.i32.size(); want = (n + 1) / 2; break;
    case DataType::kUInt2:
    case DataType::kInt2: field = "int32_data"; have = tf.i32.size(); want = (n + 3) / 4; break;
    default: field = "int32_data"; have = tf.i32.size(); break;
  }
  // Data in a field this dtype does not use is an error.
  struct Other {
    const char* name;
    size_t count;
  } others[] = {{"float_data", tf.f32.size()}, {"double_data", tf.f64.size()}, {"int64_data", tf.i64.size()},
                {"uint64_data", tf.u64.size()}, {"string_data", tf.strs.size()}, {"int32_data", tf.i32.size()}};
  for (const auto& o : others) {
    if (o.count && std::strcmp(o.name, field) != 0) {
      return ctx_.error(tf.offset, desc + ": has " + o.name + ", but " + dtype_name(dt) + " data belongs in " + field);
    }
  }
  if (static_cast<int64_t>(have) != want) {
    if (have == 0) {
      return ctx_.error(tf.offset, desc + ": has no data (expected " + std::to_string(want) + " values in " + field +
                                       " or raw_data)");
    }
    return ctx_.error(tf.offset, desc + ": " + field + " has " + std::to_string(have) + " values, expected " +
                                     std::to_string(want));
  }
  Tensor t(dt, tf.dims);
  switch (dt) {
    case DataType::kFloat:
    case DataType::kComplex64:
      if (have) std::memcpy(t.raw_data(), tf.f32.data(), have * 4);
      break;
    case DataType::kDouble:
    case DataType::kComplex128:
      if (have) std::memcpy(t.raw_data(), tf.f64.data(), have * 8);
      break;
    case DataType::kInt64:
      if (have) std::memcpy(t.raw_data(), tf.i64.data(), have * 8);
      break;
    case DataType::kUInt64:
      if (have) std::memcpy(t.raw_data(), tf.u64.data(), have * 8);
      break;
    case DataType::kUInt32: {
      uint32_t* p = t.data<uint32_t>();
      for (size_t i = 0; i < have; ++i) p[i] = static_cast<uint32_t>(tf.u64[i]);
      break;
    }
    case DataType::kString: {
      std::string* p = t.string_data();
      for (size_t i = 0; i < have; ++i) p[i] = std::move(tf.strs[i]);
      break;
    }
    case DataType::kInt32:
      if (have) std::memcpy(t.raw_data(), tf.i32.data(), have * 4);
      break;
    case DataType::kInt16:
    case DataType::kUInt16:
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      uint16_t* p = t.data<uint16_t>();
      for (size_t i = 0; i < have; ++i) p[i] = static_cast<uint16_t>(tf.i32[i]);
      break;
    }
    case DataType::kBool: {
      uint8_t* p = t.data<uint8_t>();
      for (size_t i = 0; i < have; ++i) p[i] = tf.i32[i] != 0 ? 1 : 0;
      break;
    }
    default: {  // 8-bit ints and floats; packed 4-bit and 2-bit bytes (one byte per int32_data entry)
      uint8_t* p = t.data<uint8_t>();
      for (size_t i = 0; i < have; ++i) p[i] = static_cast<uint8_t>(tf.i32[i]);
      if (dtype_bits(dt) < 8 && have) {
        // Clear the unused high bits of the last byte so equal tensors compare equal bytewise.
        const int bits = dtype_bits(dt);
        const int64_t used = n % (8 / bits);
        if (used) p[have - 1] &= static_cast<uint8_t>((1 << (used * bits)) - 1);
      }
      break;
    }
  }
  *out = std::move(t);
  return Status::Ok();
}

Status Parser::load_external(TensorFields& tf, DataType dt, const Dims& dims, int64_t numel, Tensor* out) {
  const std::string desc = tensor_desc(tf.name, dt, dims);
  if (dt == DataType::kString) return ctx_.error(tf.offset, desc + ": string tensors cannot use external data");
  if (opts_.base_dir.empty()) {
    return ctx_.error(tf.offset, desc + ": external data needs a model file (loaded from bytes)");
  }
  std::string location;
  uint64_t offset = 0, length = 0;
  bool has_location = false, has_length = false;
  for (const auto& [k, v] : tf.external) {
    if (k == "location") {
      location = v;
      has_location = true;
    } else if (k == "offset") {
      if (!parse_decimal(v, &offset)) return ctx_.error(tf.offset, desc + ": bad external data offset '" + v + "'");
    } else if (k == "length") {
      if (!parse_decimal(v, &length)) return ctx_.error(tf.offset, desc + ": bad external data length '" + v + "'");
      has_length = true;
    }
  }
  if (!has_location) return ctx_.error(tf.offset, desc + ": external data without a location");
  std::string resolved;
  Status s = resolve_location(opts_.base_dir, location, &resolved);
  if (!s.ok()) return Status(s.code(), ctx_.error(tf.offset, desc + ": " + s.message()).message());
  std::shared_ptr<MappedFile> file;
  auto it = external_files_.find(resolved);
  if (it != external_files_.end()) {
    file = it->second;
  } else {
    auto opened = MappedFile::open(resolved);
    if (!opened.ok()) {
      return Status(StatusCode::kIoError, ctx_.error(tf.offset, desc + ": " + opened.status().message()).message());
    }
    file = opened.value();
    external_files_.emplace(resolved, file);
  }
  const uint64_t want = dtype_storage_bytes(dt, numel);
  if (has_length && length != want) {
    return ctx_.error(tf.offset, desc + ": external data length " + std::to_string(length) + " but the tensor needs " +
                                     std::to_string(want) + " bytes");
  }
  if (offset > file->size() || want > file->size() - offset) {
    return ctx_.error(tf.offset, desc + ": external data range [" + std::to_string(offset) + ", " +
                                     std::to_string(offset + want) + ") is past the end of '" + location + "' (" +
                                     std::to_string(file->size()) + " bytes)");
  }
  uint8_t* p = file->mutable_data() + offset;
  if (want > 0 && reinterpret_cast<uintptr_t>(p) % element_alignment(dt) == 0) {
    *out = Tensor(dt, dims, Storage::borrow(p, want, file));
  } else {
    Tensor t(dt, dims);
    if (want) std::memcpy(t.raw_data(), p, want);
    *out = std::move(t);
  }
  return Status::Ok();
}

Status Parser::parse_sparse_tensor(const Field& msg, Tensor* t, std::string* name) {
  wire::Reader r(ctx_, msg.data, msg.size);
  Field f;
  Tensor values, indices;
  std::string values_name;
  bool has_values = false, has_indices = false;
  Dims dims;
  while (!r.done()) {
    NXRT_RETURN_IF_ERROR(r.next(f));
    switch (f.number) {
      case 1:
        NXRT_RETURN_IF_ERROR(sub(f, "values", -1, [&] { return parse_tensor(f, &values, &values_name); }));
        has_values = true;
        break;
      case 2:
        NXRT_RETURN_IF_ERROR(sub(f, "indices", -1, [&] { return parse_tensor(f, &indices, nullptr); }));
        has_indices = true;
        break;
      case 3: NXRT_RETURN_IF_ERROR(wire::append_varints(ctx_, f, "dims", &dims)); break;
      default: NXRT_RETURN_IF_ERROR(r.skip(f));
    }
  }
  if (!has_values) return ctx_.error(msg.offset, "sparse tensor without values");
  if (!has_indices) {
    if (values.numel() != 0) return ctx_.error(msg.offset, "sparse tensor '" + values_name + "' without indices");
    indices = Tensor(DataType::kInt64, {0});
  }
  NXRT_RETURN_IF_ERROR(densify(values, indices, dims, msg.offset, values_name, t));
  if (name) *name = values_name;
  return Status::Ok();
}

Status Parser::densify(const Tensor& values, const Tensor& indices, const Dims& dims, size_t offset,
                       const std::string& name, Tensor* out) {
  const DataType dt = values.dtype();
  const std::string desc = "sparse tensor '" + name + "' (" + dtype_name(dt) + shape_to_string(dims) + ")";
  int64_t dense_n = 0;
  NXRT_RETURN_IF_ERROR(check_rank(dims.size(), offset, desc));
  if (!checked_numel(dims, &dense_n)) return ctx_.error(offset, desc + ": invalid dims");
  const size_t dense_bytes = dtype_storage_bytes(dt, dense_n);
  if (dense_bytes > opts_.max_densify_bytes - densified_bytes_) {
    return ctx_.error(offset, desc + ": too large to densify (" + std::to_string(dense_bytes) + " bytes), with " +
                                  std::to_string(densified_bytes_) + " of the " +
                                  std::to_string(opts_.max_densify_bytes) +
                                  " bytes allowed for all sparse tensors used");
  }
  densified_bytes_ += dense_bytes;
  const int64_t nnz = values.numel();
  if (values.rank() != 1) return ctx_.error(offset, desc + ": values must be 1-D, got " + values.describe());
  if (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32) {
    return ctx_.error(offset, desc + ": indices must be int64, got " + indices.describe());
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  bool linear = false;
  if (indices.rank() == 1 && indices.dim(0) == nnz) {
    linear = true;
  } else if (indices.rank() == 2 && indices.dim(0) == nnz && indices.dim(1) == rank) {
    linear = false;
  } else {
    return ctx_.error(offset, desc + ": indices " + indices.describe() + " do not match " + std::to_string(nnz) +
                                  " values");
  }
  auto index_at = [&](int64_t k) -> int64_t {
    return indices.dtype() == DataType::kInt64 ? indices.data<int64_t>()[k] : indices.data<int32_t>()[k];
  };
  // An empty dense shape has no position for any value (and its strides may be saturated: see
  // contiguous_strides), so the first value is out of range.
  if (dense_n == 0 && nnz > 0) return ctx_.error(offset, desc + ": index 0 is out of range (the dense shape is empty)");
  Tensor dense(dt, dims);
  const Dims strides = contiguous_strides(dims);
  const int bits = dtype_bits(dt);
  for (int64_t k = 0; k < nnz; ++k) {
    int64_t pos = 0;
    if (linear) {
      pos = index_at(k);
    } else {
      for (int64_t d = 0; d < rank; ++d) {
        int64_t v = index_at(k * rank + d);
        if (v < 0 || v >= dims[d]) {
          pos = -1;
          break;
        }
        pos += v * strides[d];
      }
    }
    if (pos < 0 || pos >= dense_n) {
      return ctx_.error(offset, desc + ": index " + std::to_string(k) + " is out of range");
    }
    if (dt == DataType::kString) {
      dense.string_data()[pos] = values.string_data()[k];
    } else if (bits < 8) {
      set_bits(static_cast<uint8_t*>(dense.raw_data()), pos, bits,
               get_bits(static_cast<const uint8_t*>(values.raw_data()), k, bits));
    } else {
      const size_t eb = static_cast<size_t>(bits / 8);
      std::memcpy(static_cast<uint8_t*>(dense.raw_data()) + pos * eb,
                  static_cast<const uint8_t*>(values.raw_data()) + k * eb, eb);
    }
  }
  *out = std::move(dense);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Test-data protos: TensorProto / SequenceProto / OptionalProto / MapProto

}  // namespace nxrt::onnx
