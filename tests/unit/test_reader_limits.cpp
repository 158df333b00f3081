// The reader's bounds (src/onnx/limits.h): every limit turns a model or .pb file that asks for too much
// into a load error with the message docs/RELIABILITY.md lists; plus the external-data refusals not
// covered by test_onnx_reader.cpp (a symlinked folder, malformed offsets) and MapProto key types.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "onnx/model_reader.h"
#include "onnx/model_writer.h"
#include "onnx/wire.h"

namespace fs = std::filesystem;
using namespace nxrt;
using namespace nxrt::onnx;

namespace {

ir::TypeInfo float_type(size_t rank) {
  ir::TypeInfo t;
  t.kind = ir::TypeInfo::Kind::kTensor;
  t.elem_type = DataType::kFloat;
  t.has_shape = true;
  for (size_t i = 0; i < rank; ++i) t.dims.push_back(ir::Dim::fixed(1));
  return t;
}

ir::ValueInfo value_info(const std::string& name, ir::TypeInfo t) {
  ir::ValueInfo v;
  v.name = name;
  v.type = std::move(t);
  return v;
}

ir::Node relu(const std::string& in, const std::string& out) {
  ir::Node n;
  n.op_type = "Relu";
  n.name = "relu_" + out;
  n.inputs = {in};
  n.outputs = {out};
  return n;
}

// X -> Relu x n -> Y
ir::Model chain(int n) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.graph.inputs.push_back(value_info("X", float_type(2)));
  std::string prev = "X";
  for (int i = 0; i < n; ++i) {
    const std::string out = i + 1 == n ? "Y" : "t" + std::to_string(i);
    m.graph.nodes.push_back(relu(prev, out));
    prev = out;
  }
  m.graph.outputs.push_back(value_info("Y", float_type(2)));
  return m;
}

// The message of loading `m` with `opts`, which must fail.
std::string load_error(const ir::Model& m, const LoadOptions& opts = {}) {
  const std::string b = serialize_model(m);
  auto r = load_model_bytes(b.data(), b.size(), nullptr, "", opts);
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << r.status().message();
  return r.status().message();
}

bool loads(const ir::Model& m, const LoadOptions& opts = {}) {
  const std::string b = serialize_model(m);
  auto r = load_model_bytes(b.data(), b.size(), nullptr, "", opts);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok();
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

ir::Attribute graph_attr(const std::string& name, std::shared_ptr<ir::Graph> g) {
  ir::Attribute a;
  a.name = name;
  a.type = ir::Attribute::Type::kGraph;
  a.g = std::move(g);
  return a;
}

}  // namespace

TEST(ReaderLimits, SubgraphNesting) {
  // If nodes nested 4 deep; with max_graph_depth 3 the innermost body is one level too deep.
  auto body = std::make_shared<ir::Graph>(chain(1).graph);
  for (int i = 0; i < 4; ++i) {
    auto outer = std::make_shared<ir::Graph>();
    ir::Node n;
    n.op_type = "If";
    n.name = "if" + std::to_string(i);
    n.inputs = {"c"};
    n.outputs = {"o" + std::to_string(i)};
    n.attributes.push_back(graph_attr("then_branch", body));
    outer->nodes.push_back(n);
    body = outer;
  }
  ir::Model m;
  m.graph = *body;
  LoadOptions opts;
  opts.limits.max_graph_depth = 4;
  EXPECT_TRUE(loads(m, opts));
  opts.limits.max_graph_depth = 3;
  const std::string e = load_error(m, opts);
  EXPECT_HAS(e, "subgraphs nested deeper than 3");
  EXPECT_HAS(e, "ModelProto.graph.node[0].attribute[0].g.node[0].attribute[0].g.node[0].attribute[0].g");
}

TEST(ReaderLimits, NodeAttributeInitializerAndValueInfoCounts) {
  LoadOptions opts;
  opts.limits.max_nodes = 10;
  EXPECT_TRUE(loads(chain(10), opts));
  std::string e = load_error(chain(11), opts);
  EXPECT_HAS(e, "ModelProto.graph.node[10]: more than 10 nodes in the file at byte");

  // Function bodies count too.
  ir::Model f = chain(6);
  ir::Function fn;
  fn.name = "F";
  fn.domain = "local";
  fn.inputs = {"a"};
  fn.outputs = {"b"};
  for (int i = 0; i < 5; ++i) fn.nodes.push_back(relu(i ? "x" + std::to_string(i - 1) : "a", i == 4 ? "b" : "x" + std::to_string(i)));
  f.functions.push_back(fn);
  e = load_error(f, opts);
  EXPECT_HAS(e, "ModelProto.functions[0].node[4]: more than 10 nodes in the file");

  ir::Model a = chain(3);
  for (auto& n : a.graph.nodes) {
    for (int k = 0; k < 2; ++k) {
      ir::Attribute at;
      at.name = "x" + std::to_string(k);
      at.type = ir::Attribute::Type::kInt;
      n.attributes.push_back(at);
    }
  }
  opts = {};
  opts.limits.max_attributes = 5;
  EXPECT_HAS(load_error(a, opts), "ModelProto.graph.node[2].attribute[1]: more than 5 attributes in the file");

  ir::Model i = chain(1);
  for (int k = 0; k < 4; ++k) i.graph.initializers["w" + std::to_string(k)] = Tensor(DataType::kFloat, {2});
  opts = {};
  opts.limits.max_initializers = 3;
  EXPECT_HAS(load_error(i, opts), "ModelProto.graph.initializer[3]: more than 3 initializers in the file");

  ir::Model v = chain(2);
  v.graph.value_info.push_back(value_info("t0", float_type(2)));
  opts = {};
  opts.limits.max_value_infos = 2;
  EXPECT_HAS(load_error(v, opts),
             "ModelProto.graph.value_info[0]: more than 2 graph inputs, outputs and value_info entries in the file");
}

TEST(ReaderLimits, ExponentialFunctionExpansion) {
  // F0's body is an If whose branch holds 50 nodes; F(k) calls F(k-1) twice. Calling F7 would copy
  // the branch 2^7 = 128 times (6400 nodes): subgraph nodes count against max_expanded_nodes.
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", 17});
  m.opset_imports.push_back({"local", 1});
  auto branch = std::make_shared<ir::Graph>(chain(50).graph);
  ir::Function f0;
  f0.name = "F0";
  f0.domain = "local";
  f0.inputs = {"c"};
  f0.outputs = {"o"};
  ir::Node cond;
  cond.op_type = "If";
  cond.inputs = {"c"};
  cond.outputs = {"o"};
  cond.attributes.push_back(graph_attr("then_branch", branch));
  cond.attributes.push_back(graph_attr("else_branch", branch));
  f0.nodes.push_back(cond);
  m.functions.push_back(f0);
  for (int k = 1; k <= 7; ++k) {
    ir::Function fk;
    fk.name = "F" + std::to_string(k);
    fk.domain = "local";
    fk.inputs = {"c"};
    fk.outputs = {"o"};
    ir::Node call1, call2;
    call1.op_type = call2.op_type = "F" + std::to_string(k - 1);
    call1.domain = call2.domain = "local";
    call1.inputs = {"c"};
    call1.outputs = {"h"};
    call2.inputs = {"c"};
    call2.outputs = {"o"};
    fk.nodes = {call1, call2};
    m.functions.push_back(fk);
  }
  ir::Node call;
  call.op_type = "F7";
  call.domain = "local";
  call.inputs = {"C"};
  call.outputs = {"O"};
  m.graph.nodes.push_back(call);
  LoadOptions opts;
  opts.limits.max_expanded_nodes = 100'000;
  EXPECT_TRUE(loads(m, opts));
  opts.limits.max_expanded_nodes = 10'000;
  EXPECT_HAS(load_error(m, opts), "function expansion produces more than 10000 nodes");
}

TEST(ReaderLimits, Rank) {
  ir::Model m = chain(1);
  m.graph.inputs[0].type = float_type(64);
  EXPECT_TRUE(loads(m));
  m.graph.inputs[0].type = float_type(65);
  EXPECT_HAS(load_error(m), "ModelProto.graph.input[0].type.tensor_type.shape: shape has 65 dims, more than the 64 allowed");

  // A tensor (initializer, .pb file) and a sparse tensor.
  ir::Model t = chain(1);
  t.graph.initializers["w"] = Tensor(DataType::kFloat, Dims(65, 1));
  EXPECT_HAS(load_error(t), "ModelProto.graph.initializer[0]: tensor 'w' (float32[]) has 65 dims, more than the 64 allowed");
  const std::string pb = serialize_tensor_proto(Tensor(DataType::kFloat, Dims(65, 1)), "deep");
  auto v = parse_value_pb(pb.data(), pb.size(), nullptr);
  ASSERT_FALSE(v.ok());
  EXPECT_HAS(v.status().message(), "TensorProto: tensor 'deep' (float32[]) has 65 dims, more than the 64 allowed");
  wire::Writer sparse, values, indices;
  values.packed_int64(1, {0});
  values.int64(2, static_cast<int64_t>(DataType::kFloat));
  indices.packed_int64(1, {0});
  indices.int64(2, static_cast<int64_t>(DataType::kInt64));
  sparse.message(1, values);
  sparse.message(2, indices);
  sparse.packed_int64(3, std::vector<int64_t>(65, 1));
  ir::TypeInfo st;
  st.kind = ir::TypeInfo::Kind::kSparseTensor;
  const std::string sb = sparse.take();
  v = parse_value_pb(sb.data(), sb.size(), &st);
  ASSERT_FALSE(v.ok());
  EXPECT_HAS(v.status().message(), "has 65 dims, more than the 64 allowed");
}

TEST(ReaderLimits, NameAndStringLengths) {
  ir::Model m = chain(1);
  m.graph.nodes[0].name = std::string(size_t{64} << 10, 'n');
  EXPECT_TRUE(loads(m));
  m.graph.nodes[0].name += "n";
  EXPECT_HAS(load_error(m),
             "ModelProto.graph.node[0].name: string of 65537 bytes, more than the 65536 allowed for a name at byte");

  // Strings that hold data get their own (larger) bound.
  ir::Model d = chain(1);
  d.graph.nodes[0].doc = std::string(101, 'd');
  LoadOptions opts;
  opts.limits.max_string_bytes = 100;
  EXPECT_HAS(load_error(d, opts),
             "ModelProto.graph.node[0].doc_string: string of 101 bytes, more than the 100 allowed for a string");
  opts.limits.max_string_bytes = 101;
  EXPECT_TRUE(loads(d, opts));

  // A string tensor element in a model (the .pb reader uses the default bounds: 256 MiB a string).
  ir::Model st = chain(1);
  Tensor s(DataType::kString, {2});
  s.string_data()[1] = std::string(1000, 's');
  st.graph.initializers["strings"] = s;
  opts.limits.max_string_bytes = 999;
  EXPECT_HAS(load_error(st, opts),
             "ModelProto.graph.initializer[0].string_data: string of 1000 bytes, more than the 999 allowed for a string");
}

TEST(ReaderLimits, DensifiedBytesAreBoundedForAllSparseTensorsTogether) {
  // Two sparse initializers of 12 dense bytes each: one fits a 16-byte budget, both do not.
  auto sparse_initializer = [](const std::string& name) {
    wire::Writer sparse, values, indices;
    values.packed_int64(1, {1});
    values.int64(2, static_cast<int64_t>(DataType::kFloat));
    values.bytes(8, name);
    const float one = 1.f;
    values.bytes(9, &one, 4);
    indices.packed_int64(1, {1});
    indices.int64(2, static_cast<int64_t>(DataType::kInt64));
    const int64_t zero = 0;
    indices.bytes(9, &zero, 8);
    sparse.message(1, values);
    sparse.message(2, indices);
    sparse.packed_int64(3, {3});
    return sparse;
  };
  wire::Writer g;
  g.message(15, sparse_initializer("a"));
  g.message(15, sparse_initializer("b"));
  wire::Writer m;
  m.int64(1, 8);
  m.message(7, g);
  const std::string b = m.take();
  LoadOptions opts;
  opts.max_densify_bytes = 24;
  EXPECT_TRUE(load_model_bytes(b.data(), b.size(), nullptr, "", opts).ok());
  opts.max_densify_bytes = 16;
  auto r = load_model_bytes(b.data(), b.size(), nullptr, "", opts);
  ASSERT_FALSE(r.ok());
  EXPECT_HAS(r.status().message(), "ModelProto.graph.sparse_initializer[1]: sparse tensor 'b' (float32[3]): too large "
                                   "to densify (12 bytes), with 12 of the 16 bytes allowed for all sparse tensors used");
}

TEST(ReaderLimits, MapKeyTypes) {
  // A MapProto without key_type takes the expected map type's; without either it is an error (a
  // fuzzing finding: such a map was read, then could not be written back).
  ir::TypeInfo f32 = float_type(0);
  ir::TypeInfo map;
  map.kind = ir::TypeInfo::Kind::kMap;
  map.elem_type = DataType::kInt64;
  map.inner = std::make_shared<ir::TypeInfo>(f32);
  auto v = parse_value_pb("", 0, &map);
  ASSERT_TRUE(v.ok()) << v.status().message();
  EXPECT_EQ(v->map_value().key_type, DataType::kInt64);
  const std::string again = serialize_value_pb(*v, "");
  EXPECT_TRUE(parse_value_pb(again.data(), again.size(), &map).ok());
  ir::TypeInfo untyped = map;
  untyped.elem_type = DataType::kUndefined;
  v = parse_value_pb("", 0, &untyped);
  ASSERT_FALSE(v.ok());
  EXPECT_HAS(v.status().message(), "MapProto: map has no key_type at byte 0");
  wire::Writer w;
  w.int64(2, static_cast<int64_t>(DataType::kFloat));
  const std::string fb = w.take();
  v = parse_value_pb(fb.data(), fb.size(), &map);
  ASSERT_FALSE(v.ok());
  EXPECT_HAS(v.status().message(), "map key_type float32 is not an integer or string type");
}

namespace {

struct TempFolder {
  fs::path path;
  explicit TempFolder(const std::string& tag) {
    path = fs::temp_directory_path() / ("nxrt_limits_" + tag + "_" + std::to_string(::getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write_file_bytes(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// A model whose initializer W (float32[4]) is external data described by `entries` (key, value).
std::string external_model(const std::vector<std::pair<std::string, std::string>>& entries) {
  wire::Writer t;
  t.packed_int64(1, {4});
  t.int64(2, 1);
  t.bytes(8, "W");
  for (const auto& [k, v] : entries) {
    wire::Writer e;
    e.bytes(1, k);
    e.bytes(2, v);
    t.message(13, e);
  }
  t.int64(14, 1);
  wire::Writer g;
  g.message(5, t);
  wire::Writer m;
  m.int64(1, 8);
  m.message(7, g);
  return m.take();
}

}  // namespace

TEST(ReaderLimits, ExternalDataRefusals) {
  TempFolder dir("model"), outside("outside");
  write_file_bytes(outside.path / "w.bin", std::string(64, '\1'));
  write_file_bytes(dir.path / "w.bin", std::string(16, '\2'));
  auto error_of = [&](const std::string& name, const std::vector<std::pair<std::string, std::string>>& entries) {
    write_file_bytes(dir.path / name, external_model(entries));
    auto r = load_model_file((dir.path / name).string());
    EXPECT_FALSE(r.ok()) << name;
    return r.ok() ? std::string() : r.status().message();
  };
  // A folder inside the model's folder that is a symlink to one outside it.
  fs::create_symlink(outside.path, dir.path / "linked");
  EXPECT_HAS(error_of("dirlink.onnx", {{"location", "linked/w.bin"}}), "outside the model folder");
  // `..` that comes back into the folder is fine; one that leaves it is not, even through a subfolder.
  fs::create_directories(dir.path / "sub");
  write_file_bytes(dir.path / "ok.onnx", external_model({{"location", "sub/../w.bin"}}));
  EXPECT_TRUE(load_model_file((dir.path / "ok.onnx").string()).ok());
  EXPECT_HAS(error_of("up.onnx", {{"location", "sub/../../w.bin"}}), "escapes the model folder");
  // Offsets and lengths that are not plain decimal numbers, and a range past the end.
  EXPECT_HAS(error_of("neg.onnx", {{"location", "w.bin"}, {"offset", "-4"}}), "bad external data offset '-4'");
  EXPECT_HAS(error_of("hex.onnx", {{"location", "w.bin"}, {"length", "0x10"}}), "bad external data length '0x10'");
  EXPECT_HAS(error_of("huge.onnx", {{"location", "w.bin"}, {"offset", "99999999999999999999"}}),
             "bad external data offset");
  EXPECT_HAS(error_of("past.onnx", {{"location", "w.bin"}, {"offset", "4"}}),
             "external data range [4, 20) is past the end of 'w.bin' (16 bytes)");
  // The folder itself, or a subfolder, is not a file.
  EXPECT_HAS(error_of("dot.onnx", {{"location", "."}}), "names no file");
  EXPECT_FALSE(error_of("dir.onnx", {{"location", "sub"}}).empty());
}
