// The ONNX reader: wire format, ModelProto, TensorProto dtypes, external data, function expansion,
// test-data protos, malformed input, and the conformance suite's files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "onnx/model_reader.h"
#include "onnx/model_writer.h"
#include "onnx/wire.h"

namespace fs = std::filesystem;
using namespace nxrt;
using namespace nxrt::onnx;

namespace {

ir::TypeInfo tensor_type(DataType dt, std::vector<int64_t> dims) {
  ir::TypeInfo t;
  t.kind = ir::TypeInfo::Kind::kTensor;
  t.elem_type = dt;
  t.has_shape = true;
  for (int64_t d : dims) t.dims.push_back(d >= 0 ? ir::Dim::fixed(d) : ir::Dim::named("N"));
  return t;
}

ir::ValueInfo vi(const std::string& name, ir::TypeInfo t) {
  ir::ValueInfo v;
  v.name = name;
  v.type = std::move(t);
  return v;
}

ir::Node node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
              const std::string& name = "") {
  ir::Node n;
  n.op_type = op;
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  n.name = name.empty() ? op + "_" + (n.outputs.empty() ? std::string() : n.outputs[0]) : name;
  return n;
}

// X[2,3] + W -> Y ; Relu(Y) -> Z
ir::Model small_model() {
  ir::Model m;
  m.ir_version = 8;
  m.producer_name = "nxrt-test";
  m.opset_imports.push_back({"", 17});
  m.graph.name = "g";
  m.graph.inputs.push_back(vi("X", tensor_type(DataType::kFloat, {-1, 3})));
  m.graph.outputs.push_back(vi("Z", tensor_type(DataType::kFloat, {-1, 3})));
  m.graph.initializers["W"] = Tensor::from_vector<float>(DataType::kFloat, {2, 3}, {1, 2, 3, 4, 5, 6});
  m.graph.nodes.push_back(node("Add", {"X", "W"}, {"Y"}));
  m.graph.nodes.push_back(node("Relu", {"Y"}, {"Z"}));
  return m;
}

Result<std::unique_ptr<ir::Model>> load_bytes(const std::string& b, const LoadOptions& o = {}) {
  return load_model_bytes(b.data(), b.size(), nullptr, "", o);
}

std::string bytes_of(const Tensor& t) {
  return std::string(static_cast<const char*>(t.raw_data()), t.nbytes());
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() /
           ("nxrt_reader_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f.write(s.data(), static_cast<std::streamsize>(s.size()));
}

// A TensorProto built field by field.
std::string tensor_proto(DataType dt, const std::vector<int64_t>& dims,
                         const std::function<void(wire::Writer&)>& data) {
  wire::Writer w;
  w.packed_int64(1, dims);
  w.int64(2, static_cast<int64_t>(dt));
  data(w);
  return w.take();
}

Value parse_tensor_ok(const std::string& b) {
  auto r = parse_value_pb(b.data(), b.size(), nullptr);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value() : Value();
}

std::string parse_tensor_err(const std::string& b) {
  auto r = parse_value_pb(b.data(), b.size(), nullptr);
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string() : r.status().message();
}

}  // namespace

ir::Model reader_test_function_model();

// ---------------------------------------------------------------------------------------------
// Round trips through the writer

TEST(OnnxReader, RoundTripSmallModel) {
  ir::Model m = small_model();
  m.doc = "doc";
  m.domain = "ai.test";
  m.model_version = 3;
  m.producer_version = "1.0";
  m.metadata_props.push_back({"k", "v"});
  m.graph.value_info.push_back(vi("Y", tensor_type(DataType::kFloat, {2, 3})));
  auto r = load_bytes(serialize_model(m));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Model& g = **r;
  EXPECT_EQ(g.ir_version, 8);
  EXPECT_EQ(g.producer_name, "nxrt-test");
  EXPECT_EQ(g.producer_version, "1.0");
  EXPECT_EQ(g.domain, "ai.test");
  EXPECT_EQ(g.model_version, 3);
  EXPECT_EQ(g.doc, "doc");
  ASSERT_EQ(g.metadata_props.size(), 1u);
  EXPECT_EQ(g.metadata_props[0].second, "v");
  EXPECT_EQ(g.opset_for(""), 17);
  EXPECT_EQ(g.opset_for("ai.onnx"), 17);
  EXPECT_EQ(g.graph.name, "g");
  ASSERT_EQ(g.graph.nodes.size(), 2u);
  EXPECT_EQ(g.graph.nodes[0].op_type, "Add");
  EXPECT_EQ(g.graph.nodes[0].inputs, (std::vector<std::string>{"X", "W"}));
  EXPECT_EQ(g.graph.nodes[1].outputs, (std::vector<std::string>{"Z"}));
  ASSERT_EQ(g.graph.inputs.size(), 1u);
  EXPECT_EQ(g.graph.inputs[0].type.describe(), "tensor(float32)[N,3]");
  ASSERT_EQ(g.graph.value_info.size(), 1u);
  EXPECT_EQ(g.graph.value_info[0].type.describe(), "tensor(float32)[2,3]");
  const Tensor& w = g.graph.initializers.at("W");
  EXPECT_EQ(w.describe(), "float32[2,3]");
  EXPECT_EQ(std::vector<float>(w.data<float>(), w.data<float>() + 6), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  // Writing the loaded model again gives the same bytes.
  EXPECT_EQ(serialize_model(g), serialize_model(m));
}

TEST(OnnxReader, RoundTripEveryAttributeTypeAndTypeProto) {
  using T = ir::Attribute::Type;
  ir::Model m = small_model();
  ir::Node n = node("Custom", {"Z"}, {"Q"});
  n.domain = "test.domain";
  auto attr = [&](const std::string& name, T type) -> ir::Attribute& {
    n.attributes.emplace_back();
    n.attributes.back().name = name;
    n.attributes.back().type = type;
    return n.attributes.back();
  };
  attr("f", T::kFloat).f = 2.5f;
  attr("i", T::kInt).i = -7;
  attr("s", T::kString).s = std::string("a\0b", 3);
  attr("t", T::kTensor).t = Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {3, -4});
  auto sub = std::make_shared<ir::Graph>();
  sub->name = "body";
  sub->outputs.push_back(vi("W", tensor_type(DataType::kFloat, {2, 3})));  // reads the outer initializer
  attr("g", T::kGraph).g = sub;
  attr("st", T::kSparseTensor).t = Tensor::from_vector<float>(DataType::kFloat, {2, 2}, {0, 1, 0, 2});
  ir::TypeInfo seq;
  seq.kind = ir::TypeInfo::Kind::kSequence;
  seq.inner = std::make_shared<ir::TypeInfo>(tensor_type(DataType::kInt8, {4}));
  attr("tp", T::kTypeProto).tp = seq;
  attr("fs", T::kFloats).floats = {1.5f, -0.25f};
  attr("is", T::kInts).ints = {1, -2, int64_t{1} << 40};
  attr("ss", T::kStrings).strings = {"x", "", "yz"};
  attr("ts", T::kTensors).tensors = {Tensor::scalar_float(1.f), Tensor::scalar_int64(9)};
  attr("gs", T::kGraphs).graphs = {sub, sub};
  attr("sts", T::kSparseTensors).tensors = {Tensor::from_vector<int32_t>(DataType::kInt32, {3}, {0, 0, 5})};
  ir::TypeInfo map;
  map.kind = ir::TypeInfo::Kind::kMap;
  map.elem_type = DataType::kString;
  map.inner = std::make_shared<ir::TypeInfo>(tensor_type(DataType::kDouble, {}));
  ir::TypeInfo opt;
  opt.kind = ir::TypeInfo::Kind::kOptional;
  opt.inner = std::make_shared<ir::TypeInfo>(seq);
  attr("tps", T::kTypeProtos).type_protos = {map, opt};
  m.graph.nodes.push_back(n);
  m.graph.outputs.push_back(vi("Q", ir::TypeInfo{}));
  m.opset_imports.push_back({"test.domain", 1});

  const std::string bytes = serialize_model(m);
  // NXRT_WRITE_FUZZ_SEEDS=dir writes this model and the function model as fuzzing seeds.
  if (const char* seeds = std::getenv("NXRT_WRITE_FUZZ_SEEDS")) {
    write_bytes(fs::path(seeds) / "writer_all_attributes.onnx", bytes);
    write_bytes(fs::path(seeds) / "writer_functions.onnx", serialize_model(reader_test_function_model()));
  }
  auto r = load_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Node& got = (*r)->graph.nodes.back();
  ASSERT_EQ(got.attributes.size(), n.attributes.size());
  for (size_t i = 0; i < n.attributes.size(); ++i) {
    EXPECT_EQ(got.attributes[i].name, n.attributes[i].name);
    EXPECT_EQ(got.attributes[i].type, n.attributes[i].type) << n.attributes[i].name;
  }
  EXPECT_EQ(got.domain, "test.domain");
  EXPECT_EQ(got.find_attribute("f")->f, 2.5f);
  EXPECT_EQ(got.find_attribute("i")->i, -7);
  EXPECT_EQ(got.find_attribute("s")->s, std::string("a\0b", 3));
  EXPECT_EQ(got.find_attribute("t")->t.describe(), "int64[2]");
  EXPECT_EQ(got.find_attribute("t")->t.data<int64_t>()[1], -4);
  EXPECT_EQ(got.find_attribute("g")->g->name, "body");
  const Tensor& st = got.find_attribute("st")->t;
  EXPECT_EQ(st.describe(), "float32[2,2]");
  EXPECT_EQ(std::vector<float>(st.data<float>(), st.data<float>() + 4), (std::vector<float>{0, 1, 0, 2}));
  EXPECT_EQ(got.find_attribute("tp")->tp.describe(), "seq(tensor(int8)[4])");
  EXPECT_EQ(got.find_attribute("fs")->floats, (std::vector<float>{1.5f, -0.25f}));
  EXPECT_EQ(got.find_attribute("is")->ints, (std::vector<int64_t>{1, -2, int64_t{1} << 40}));
  EXPECT_EQ(got.find_attribute("ss")->strings, (std::vector<std::string>{"x", "", "yz"}));
  ASSERT_EQ(got.find_attribute("ts")->tensors.size(), 2u);
  EXPECT_EQ(got.find_attribute("ts")->tensors[1].data<int64_t>()[0], 9);
  EXPECT_EQ(got.find_attribute("gs")->graphs.size(), 2u);
  ASSERT_EQ(got.find_attribute("sts")->tensors.size(), 1u);
  EXPECT_EQ(got.find_attribute("sts")->tensors[0].data<int32_t>()[2], 5);
  const auto& tps = got.find_attribute("tps")->type_protos;
  ASSERT_EQ(tps.size(), 2u);
  EXPECT_EQ(tps[0].describe(), "map(string,tensor(float64)[])");
  EXPECT_EQ(tps[1].describe(), "optional(seq(tensor(int8)[4]))");
  EXPECT_EQ(serialize_model(**r), bytes);
}

TEST(OnnxReader, AttributeTypeInferredWhenMissing) {
  // IR version 1 attributes have no `type`: it comes from the field that is set.
  wire::Writer a;
  a.bytes(1, "axis");
  a.int64(3, 2);
  wire::Writer b;
  b.bytes(1, "perm");
  b.int64(8, 1);
  b.int64(8, 0);  // unpacked repeated ints
  wire::Writer c;
  c.bytes(1, "alpha");
  c.float32(2, 0.5f);
  wire::Writer n;
  n.bytes(1, "X");
  n.bytes(2, "Y");
  n.bytes(4, "Transpose");
  n.message(5, a);
  n.message(5, b);
  n.message(5, c);
  wire::Writer g;
  g.message(1, n);
  wire::Writer m;
  m.int64(1, 1);
  m.message(7, g);
  auto r = load_bytes(m.take());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Node& got = (*r)->graph.nodes[0];
  EXPECT_EQ(got.find_attribute("axis")->type, ir::Attribute::Type::kInt);
  EXPECT_EQ(got.find_attribute("perm")->type, ir::Attribute::Type::kInts);
  EXPECT_EQ(got.find_attribute("perm")->ints, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(got.find_attribute("alpha")->type, ir::Attribute::Type::kFloat);
}

// ---------------------------------------------------------------------------------------------
// Dtypes

TEST(OnnxReader, EveryDtypeFromRawData) {
  for (int v = 1; v <= kMaxDataType; ++v) {
    const DataType dt = static_cast<DataType>(v);
    Tensor t(dt, {5});
    if (dt == DataType::kString) {
      for (int i = 0; i < 5; ++i) t.string_data()[i] = "s" + std::to_string(i);
    } else {
      auto* p = static_cast<uint8_t*>(t.raw_data());
      for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(i * 37 + 11);
      if (dtype_bits(dt) < 8) p[t.nbytes() - 1] &= (dtype_bits(dt) == 4 ? 0x0f : 0x03);  // 5 elements
    }
    const std::string b = serialize_tensor_proto(t, "t");
    std::string name;
    auto r = parse_value_pb(b.data(), b.size(), nullptr, &name);
    ASSERT_TRUE(r.ok()) << dtype_name(dt) << ": " << r.status().to_string();
    const Tensor& got = r->tensor();
    EXPECT_EQ(name, "t");
    EXPECT_EQ(got.dtype(), dt);
    EXPECT_EQ(got.shape(), (Dims{5}));
    if (dt == DataType::kString) {
      EXPECT_EQ(got.string_data()[4], "s4");
    } else {
      EXPECT_EQ(bytes_of(got), bytes_of(t)) << dtype_name(dt);
    }
  }
}

TEST(OnnxReader, EveryDtypeFromTypedFields) {
  auto check = [](DataType dt, Dims dims, const std::function<void(wire::Writer&)>& data, const std::string& want) {
    Value v = parse_tensor_ok(tensor_proto(dt, dims, data));
    ASSERT_TRUE(v.is_tensor()) << dtype_name(dt);
    EXPECT_EQ(v.tensor().dtype(), dt);
    EXPECT_EQ(bytes_of(v.tensor()), want) << dtype_name(dt);
  };
  auto le = [](auto... xs) {
    std::string s;
    ((s.append(reinterpret_cast<const char*>(&xs), sizeof(xs))), ...);
    return s;
  };
  check(DataType::kFloat, {2}, [](wire::Writer& w) { w.packed_float(4, {1.5f, -2.f}); }, le(1.5f, -2.f));
  check(DataType::kFloat, {2}, [](wire::Writer& w) { w.float32(4, 1.5f); w.float32(4, -2.f); }, le(1.5f, -2.f));
  check(DataType::kComplex64, {1}, [](wire::Writer& w) { w.packed_float(4, {1.f, 2.f}); }, le(1.f, 2.f));
  check(DataType::kDouble, {2}, [](wire::Writer& w) { w.packed_double(10, {0.5, -3.0}); }, le(0.5, -3.0));
  check(DataType::kComplex128, {1}, [](wire::Writer& w) { w.packed_double(10, {1.0, -1.0}); }, le(1.0, -1.0));
  check(DataType::kInt64, {3}, [](wire::Writer& w) { w.packed_int64(7, {-1, 0, int64_t{1} << 50}); },
        le(int64_t{-1}, int64_t{0}, int64_t{1} << 50));
  check(DataType::kInt64, {2}, [](wire::Writer& w) { w.int64(7, 5); w.int64(7, -6); }, le(int64_t{5}, int64_t{-6}));
  check(DataType::kUInt32, {2}, [](wire::Writer& w) { w.packed_uint64(11, {4000000000u, 1}); },
        le(uint32_t{4000000000u}, uint32_t{1}));
  check(DataType::kUInt64, {1}, [](wire::Writer& w) { w.packed_uint64(11, {(uint64_t{1} << 63) + 1}); },
        le((uint64_t{1} << 63) + 1));
  check(DataType::kInt32, {2}, [](wire::Writer& w) { w.packed_int32(5, {-5, 70000}); }, le(int32_t{-5}, int32_t{70000}));
  check(DataType::kInt16, {2}, [](wire::Writer& w) { w.packed_int32(5, {-2, 300}); }, le(int16_t{-2}, int16_t{300}));
  check(DataType::kUInt16, {1}, [](wire::Writer& w) { w.packed_int32(5, {65535}); }, le(uint16_t{65535}));
  check(DataType::kInt8, {2}, [](wire::Writer& w) { w.packed_int32(5, {-1, 127}); }, le(int8_t{-1}, int8_t{127}));
  check(DataType::kUInt8, {2}, [](wire::Writer& w) { w.packed_int32(5, {255, 7}); }, le(uint8_t{255}, uint8_t{7}));
  check(DataType::kBool, {3}, [](wire::Writer& w) { w.packed_int32(5, {1, 0, 1}); }, le(uint8_t{1}, uint8_t{0}, uint8_t{1}));
  check(DataType::kFloat16, {2}, [](wire::Writer& w) { w.packed_int32(5, {0x3c00, 0xc000}); },
        le(uint16_t{0x3c00}, uint16_t{0xc000}));
  check(DataType::kBFloat16, {1}, [](wire::Writer& w) { w.packed_int32(5, {0x3f80}); }, le(uint16_t{0x3f80}));
  for (DataType f8 : {DataType::kFloat8E4M3FN, DataType::kFloat8E4M3FNUZ, DataType::kFloat8E5M2,
                      DataType::kFloat8E5M2FNUZ, DataType::kFloat8E8M0}) {
    check(f8, {2}, [](wire::Writer& w) { w.packed_int32(5, {0x38, 0x7f}); }, le(uint8_t{0x38}, uint8_t{0x7f}));
  }
  // 4-bit: two elements per int32_data entry, first in the low nibble; 3 elements -> 2 entries.
  for (DataType d4 : {DataType::kInt4, DataType::kUInt4, DataType::kFloat4E2M1}) {
    check(d4, {3}, [](wire::Writer& w) { w.packed_int32(5, {0x21, 0x03}); }, le(uint8_t{0x21}, uint8_t{0x03}));
  }
  // 2-bit: four elements per entry; 5 elements -> 2 entries (unused high bits cleared).
  for (DataType d2 : {DataType::kInt2, DataType::kUInt2}) {
    check(d2, {5}, [](wire::Writer& w) { w.packed_int32(5, {0xe4, 0xfd}); }, le(uint8_t{0xe4}, uint8_t{0x01}));
  }
  {
    Value v = parse_tensor_ok(tensor_proto(DataType::kString, {2}, [](wire::Writer& w) {
      w.bytes(6, "hello");
      w.bytes(6, std::string("\xff\x00", 2));
    }));
    EXPECT_EQ(v.tensor().string_data()[0], "hello");
    EXPECT_EQ(v.tensor().string_data()[1], std::string("\xff\x00", 2));
  }
  // Scalars and empty tensors.
  check(DataType::kFloat, {}, [](wire::Writer& w) { w.packed_float(4, {3.f}); }, le(3.f));
  check(DataType::kFloat, {0, 4}, [](wire::Writer&) {}, "");
}

TEST(OnnxReader, TensorSizeAndFieldErrors) {
  std::string e = parse_tensor_err(tensor_proto(DataType::kFloat, {2, 3}, [](wire::Writer& w) {
    w.packed_float(4, {1, 2, 3, 4, 5});
  }));
  EXPECT_NE(e.find("tensor (float32[2,3]): float_data has 5 values, expected 6"), std::string::npos) << e;
  e = parse_tensor_err(tensor_proto(DataType::kInt32, {2}, [](wire::Writer& w) {
    w.bytes(8, "w");
    w.bytes(9, std::string(7, 'x'));
  }));
  EXPECT_NE(e.find("tensor 'w' (int32[2]): raw_data has 7 bytes, expected 8"), std::string::npos) << e;
  e = parse_tensor_err(tensor_proto(DataType::kInt32, {1}, [](wire::Writer& w) { w.packed_int64(7, {1}); }));
  EXPECT_NE(e.find("has int64_data, but int32 data belongs in int32_data"), std::string::npos) << e;
  e = parse_tensor_err(tensor_proto(DataType::kFloat, {4}, [](wire::Writer&) {}));
  EXPECT_NE(e.find("has no data"), std::string::npos) << e;
  e = parse_tensor_err(tensor_proto(DataType::kFloat, {-1}, [](wire::Writer&) {}));
  EXPECT_NE(e.find("invalid dims"), std::string::npos) << e;
  e = parse_tensor_err(tensor_proto(DataType::kFloat, {int64_t{1} << 40, int64_t{1} << 40}, [](wire::Writer&) {}));
  EXPECT_NE(e.find("invalid dims"), std::string::npos) << e;
  e = parse_tensor_err(tensor_proto(static_cast<DataType>(99), {1}, [](wire::Writer&) {}));
  EXPECT_NE(e.find("TensorProto: tensor: unknown data_type 99"), std::string::npos) << e;
  e = parse_tensor_err(tensor_proto(DataType::kInt4, {3}, [](wire::Writer& w) { w.packed_int32(5, {1, 2, 3}); }));
  EXPECT_NE(e.find("int32_data has 3 values, expected 2"), std::string::npos) << e;
}

TEST(OnnxReader, RawDataIsZeroCopyWhenAligned) {
  TempDir dir;
  ir::Model m = small_model();
  // Many float initializers: whatever the alignment of each raw_data, aligned ones are borrowed and
  // misaligned ones copied; both must read the same values.
  for (int i = 0; i < 8; ++i) {
    std::string pad(static_cast<size_t>(i), 'p');
    m.graph.initializers["W" + pad] = Tensor::from_vector<float>(DataType::kFloat, {2}, {float(i), 1.f});
  }
  const fs::path p = dir.path / "m.onnx";
  ASSERT_TRUE(write_model_file(p.string(), m).ok());
  auto r = load_model_file(p.string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  int borrowed = 0, copied = 0;
  for (const auto& [name, t] : (*r)->graph.initializers) {
    if (name == "W") continue;
    const bool aligned_borrow = !t.storage()->owned();
    (aligned_borrow ? borrowed : copied)++;
    if (aligned_borrow) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 4, 0u);
    }
    EXPECT_EQ(t.data<float>()[0], float(name.size() - 1));
  }
  EXPECT_GT(borrowed, 0);
  EXPECT_GT(copied, 0);
  EXPECT_NE((*r)->backing, nullptr);
}

// ---------------------------------------------------------------------------------------------
// Sparse initializers

TEST(OnnxReader, SparseInitializerIsDensified) {
  auto make = [](const std::vector<int64_t>& idx, const std::vector<int64_t>& idx_dims) {
    wire::Writer values, indices, sp;
    write_tensor_proto(values, Tensor::from_vector<float>(DataType::kFloat, {2}, {7, 8}), "S");
    write_tensor_proto(indices, Tensor::from_vector<int64_t>(DataType::kInt64, idx_dims, idx), "");
    sp.message(1, values);
    sp.message(2, indices);
    sp.packed_int64(3, {2, 3});
    wire::Writer g;
    g.message(15, sp);
    wire::Writer m;
    m.int64(1, 8);
    m.message(7, g);
    return m.take();
  };
  {
    auto r = load_bytes(make({1, 5}, {2}));  // linear indices
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& t = (*r)->graph.initializers.at("S");
    EXPECT_EQ(std::vector<float>(t.data<float>(), t.data<float>() + 6), (std::vector<float>{0, 7, 0, 0, 0, 8}));
  }
  {
    auto r = load_bytes(make({0, 2, 1, 0}, {2, 2}));  // coordinate indices
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const Tensor& t = (*r)->graph.initializers.at("S");
    EXPECT_EQ(std::vector<float>(t.data<float>(), t.data<float>() + 6), (std::vector<float>{0, 0, 7, 8, 0, 0}));
  }
  LoadOptions small;
  small.max_densify_bytes = 16;
  auto big = load_bytes(make({1, 5}, {2}), small);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("too large to densify (24 bytes)"), std::string::npos)
      << big.status().message();
  auto r = load_bytes(make({1, 6}, {2}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ModelProto.graph.sparse_initializer[0]: sparse tensor 'S' (float32[2,3]): "
                                      "index 1 is out of range"),
            std::string::npos)
      << r.status().message();
}

// ---------------------------------------------------------------------------------------------
// External data

namespace {

// A model whose initializer W (float32[4]) lives in `location` at `offset`.
std::string external_model(const std::string& location, uint64_t offset, int64_t length = -1) {
  wire::Writer t;
  t.packed_int64(1, {4});
  t.int64(2, 1);
  t.bytes(8, "W");
  auto kv = [&](const std::string& k, const std::string& v) {
    wire::Writer e;
    e.bytes(1, k);
    e.bytes(2, v);
    t.message(13, e);
  };
  kv("location", location);
  kv("offset", std::to_string(offset));
  if (length >= 0) kv("length", std::to_string(length));
  t.int64(14, 1);
  wire::Writer g;
  g.message(5, t);
  wire::Writer m;
  m.int64(1, 8);
  m.message(7, g);
  return m.take();
}

}  // namespace

TEST(OnnxReader, ExternalData) {
  TempDir dir;
  std::string data(4096 + 16, '\0');
  const float vals[4] = {1.f, -2.f, 3.5f, 4.f};
  std::memcpy(&data[4096], vals, 16);
  fs::create_directories(dir.path / "sub");
  write_bytes(dir.path / "sub" / "weights.bin", data);
  write_bytes(dir.path / "ok.onnx", external_model("sub/./weights.bin", 4096, 16));
  auto r = load_model_file((dir.path / "ok.onnx").string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const Tensor& w = (*r)->graph.initializers.at("W");
  EXPECT_EQ(std::vector<float>(w.data<float>(), w.data<float>() + 4), (std::vector<float>{1.f, -2.f, 3.5f, 4.f}));
  EXPECT_FALSE(w.storage()->owned());  // page-aligned offset: borrowed from the mapping

  // Misaligned offset: copied, same values.
  std::string data2(3 + 16, '\0');
  std::memcpy(&data2[3], vals, 16);
  write_bytes(dir.path / "w2.bin", data2);
  write_bytes(dir.path / "misaligned.onnx", external_model("w2.bin", 3));
  r = load_model_file((dir.path / "misaligned.onnx").string());
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->graph.initializers.at("W").data<float>()[2], 3.5f);

  auto expect_error = [&](const std::string& file, const std::string& model, const std::string& what) {
    write_bytes(dir.path / file, model);
    auto e = load_model_file((dir.path / file).string());
    ASSERT_FALSE(e.ok()) << file;
    EXPECT_NE(e.status().message().find(what), std::string::npos) << e.status().message();
  };
  expect_error("escape.onnx", external_model("../weights.bin", 0), "escapes the model folder");
  expect_error("escape2.onnx", external_model("sub/../../x.bin", 0), "escapes the model folder");
  expect_error("abs.onnx", external_model("/etc/passwd", 0), "is an absolute path");
  expect_error("range.onnx", external_model("sub/weights.bin", 4096 + 8), "is past the end of 'sub/weights.bin'");
  expect_error("range2.onnx", external_model("sub/weights.bin", uint64_t{1} << 62), "is past the end");
  expect_error("len.onnx", external_model("sub/weights.bin", 4096, 12), "external data length 12 but the tensor needs 16");
  expect_error("missing.onnx", external_model("nope.bin", 0), "does not exist");
  // A symlink inside the folder that resolves outside it.
  TempDir outside;
  write_bytes(outside.path / "secret.bin", data);
  fs::create_symlink(outside.path / "secret.bin", dir.path / "link.bin");
  expect_error("link.onnx", external_model("link.bin", 4096), "outside the model folder");
  // Loading from bytes has no folder to resolve against.
  auto b = load_bytes(external_model("sub/weights.bin", 4096));
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("external data needs a model file"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Function expansion

ir::Model reader_test_function_model() {
  // local::AddScale(A, B) -> C : C = Mul(Add(A, B), Constant(value_float=@scale)), with scale default 2.
  using T = ir::Attribute::Type;
  ir::Function f;
  f.name = "AddScale";
  f.domain = "local";
  f.inputs = {"A", "B"};
  f.outputs = {"C"};
  f.attribute_names = {"unused"};
  ir::Attribute def;
  def.name = "scale";
  def.type = T::kFloat;
  def.f = 2.f;
  f.attribute_defaults.push_back(def);
  f.opset_imports.push_back({"", 17});
  f.nodes.push_back(node("Add", {"A", "B"}, {"S"}, "add"));
  ir::Node c = node("Constant", {}, {"k"}, "const");
  ir::Attribute ref;
  ref.name = "value_float";
  ref.type = T::kFloat;
  ref.ref_attr_name = "scale";
  c.attributes.push_back(ref);
  ir::Attribute ref2;
  ref2.name = "dropped";
  ref2.type = T::kInt;
  ref2.ref_attr_name = "unused";
  c.attributes.push_back(ref2);
  f.nodes.push_back(c);
  f.nodes.push_back(node("Mul", {"S", "k"}, {"C"}, "mul"));

  // local::Twice(X) -> Y : Y = AddScale(X, X)   (a function calling a function)
  ir::Function t;
  t.name = "Twice";
  t.domain = "local";
  t.inputs = {"X"};
  t.outputs = {"Y"};
  t.opset_imports.push_back({"local", 1});
  ir::Node call = node("AddScale", {"X", "X"}, {"Y"}, "inner");
  call.domain = "local";
  t.nodes.push_back(call);

  ir::Model m = small_model();
  m.opset_imports.push_back({"local", 1});
  m.functions = {f, t};
  ir::Node c1 = node("AddScale", {"Z", "W"}, {"P"}, "call1");
  c1.domain = "local";
  ir::Attribute s;
  s.name = "scale";
  s.type = T::kFloat;
  s.f = 3.f;
  c1.attributes.push_back(s);
  ir::Node c2 = node("Twice", {"P"}, {"R"}, "call2");
  c2.domain = "local";
  m.graph.nodes.push_back(c1);
  m.graph.nodes.push_back(c2);
  m.graph.outputs = {vi("R", tensor_type(DataType::kFloat, {2, 3}))};
  return m;
}

TEST(OnnxReader, FunctionExpansion) {
  ir::Model m = reader_test_function_model();
  const std::string bytes = serialize_model(m);
  auto r = load_bytes(bytes);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const auto& nodes = (*r)->graph.nodes;
  std::vector<std::string> ops;
  for (const auto& n : nodes) ops.push_back(n.op_type);
  EXPECT_EQ(ops, (std::vector<std::string>{"Add", "Relu", "Add", "Constant", "Mul", "Add", "Constant", "Mul"}));
  // call1: inputs bound, output bound, scale from the call site; the reference to "unused" dropped.
  EXPECT_EQ(nodes[2].inputs, (std::vector<std::string>{"Z", "W"}));
  EXPECT_EQ(nodes[4].outputs, (std::vector<std::string>{"P"}));
  ASSERT_EQ(nodes[3].attributes.size(), 1u);
  EXPECT_EQ(nodes[3].attributes[0].name, "value_float");
  EXPECT_EQ(nodes[3].attributes[0].f, 3.f);
  EXPECT_TRUE(nodes[3].attributes[0].ref_attr_name.empty());
  // call2 -> Twice -> AddScale: default scale, internal names unique across instances.
  EXPECT_EQ(nodes[5].inputs, (std::vector<std::string>{"P", "P"}));
  EXPECT_EQ(nodes[6].attributes[0].f, 2.f);
  EXPECT_EQ(nodes[7].outputs, (std::vector<std::string>{"R"}));
  EXPECT_NE(nodes[2].outputs[0], nodes[5].outputs[0]);
  EXPECT_EQ(nodes[7].inputs[0], nodes[5].outputs[0]);
  EXPECT_EQ(nodes[2].outputs[0].rfind("_nxrt_fn", 0), 0u) << nodes[2].outputs[0];

  // Without expansion the calls stay.
  LoadOptions no;
  no.expand_functions = false;
  auto r2 = load_bytes(bytes, no);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ((*r2)->graph.nodes.size(), 4u);
  EXPECT_EQ((*r2)->functions.size(), 2u);
  EXPECT_EQ((*r2)->functions[0].attribute_defaults.size(), 1u);

  // Conflicting opset versions between a used function and the model.
  ir::Model bad = reader_test_function_model();
  bad.functions[0].opset_imports[0].version = 13;
  auto r3 = load_bytes(serialize_model(bad));
  ASSERT_FALSE(r3.ok());
  EXPECT_NE(r3.status().message().find("function 'local::AddScale' imports domain '' version 13 but the model "
                                       "imports version 17"),
            std::string::npos)
      << r3.status().message();

  // A recursive function is cut off at the depth limit.
  ir::Model rec = reader_test_function_model();
  rec.functions[1].nodes[0].op_type = "Twice";
  auto r4 = load_bytes(serialize_model(rec));
  ASSERT_FALSE(r4.ok());
  EXPECT_NE(r4.status().message().find("function calls nested deeper than"), std::string::npos)
      << r4.status().message();
}

TEST(OnnxReader, FunctionExpansionInsideSubgraph) {
  ir::Model m = reader_test_function_model();
  m.graph.nodes.resize(2);
  auto body = std::make_shared<ir::Graph>();
  ir::Node c = node("Twice", {"Z"}, {"out"}, "sub_call");  // Z comes from the outer scope
  c.domain = "local";
  body->nodes.push_back(c);
  body->outputs.push_back(vi("out", tensor_type(DataType::kFloat, {2, 3})));
  ir::Node iff = node("If", {"cond"}, {"R"}, "if");
  ir::Attribute a;
  a.name = "then_branch";
  a.type = ir::Attribute::Type::kGraph;
  a.g = body;
  iff.attributes.push_back(a);
  m.graph.nodes.push_back(iff);
  m.graph.inputs.push_back(vi("cond", tensor_type(DataType::kBool, {})));
  auto r = load_bytes(serialize_model(m));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ir::Graph& g = *(*r)->graph.nodes[2].attributes[0].g;
  ASSERT_EQ(g.nodes.size(), 3u);
  EXPECT_EQ(g.nodes[0].inputs, (std::vector<std::string>{"Z", "Z"}));
  EXPECT_EQ(g.nodes[2].outputs, (std::vector<std::string>{"out"}));
}

// ---------------------------------------------------------------------------------------------
// Graph checks

TEST(OnnxReader, TopologicalOrderCycleAndDuplicates) {
  // Out of order but acyclic: reordered.
  ir::Model m = small_model();
  std::swap(m.graph.nodes[0], m.graph.nodes[1]);
  auto r = load_bytes(serialize_model(m));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ((*r)->graph.nodes[0].op_type, "Add");

  // A cycle: Add reads Z, produced by Relu which reads Y.
  ir::Model c = small_model();
  c.graph.nodes[0].inputs[1] = "Z";
  r = load_bytes(serialize_model(c));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel);
  EXPECT_NE(r.status().message().find("ModelProto.graph.node["), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("the graph has a cycle through node '"), std::string::npos)
      << r.status().message();

  // A cycle through a subgraph's outer-scope read.
  ir::Model s = small_model();
  auto body = std::make_shared<ir::Graph>();
  body->nodes.push_back(node("Identity", {"Z"}, {"o"}));
  body->outputs.push_back(vi("o", ir::TypeInfo{}));
  ir::Node loop = node("If", {"X"}, {"V"}, "if");
  ir::Attribute a;
  a.name = "then_branch";
  a.type = ir::Attribute::Type::kGraph;
  a.g = body;
  loop.attributes.push_back(a);
  s.graph.nodes.insert(s.graph.nodes.begin(), loop);
  s.graph.nodes[1].inputs[1] = "V";
  r = load_bytes(serialize_model(s));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cycle"), std::string::npos) << r.status().message();

  // Two producers of one name.
  ir::Model d = small_model();
  d.graph.nodes[1].outputs[0] = "Y";
  r = load_bytes(serialize_model(d));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ModelProto.graph.node[1]: output 'Y' is already produced by node 'Add_Y' (Add)"),
            std::string::npos)
      << r.status().message();
  // A node output that redefines a graph input.
  ir::Model e = small_model();
  e.graph.nodes[1].outputs[0] = "X";
  r = load_bytes(serialize_model(e));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("redefines a graph input"), std::string::npos);

  // Outer-scope and undefined names are left to the session.
  ir::Model u = small_model();
  u.graph.nodes[1].inputs[0] = "nowhere";
  EXPECT_TRUE(load_bytes(serialize_model(u)).ok());
}

// ---------------------------------------------------------------------------------------------
// Malformed input

TEST(OnnxReader, TruncationAtEveryByteNeverCrashes) {
  ir::Model m = reader_test_function_model();
  m.graph.nodes.back().attributes.push_back([] {
    ir::Attribute a;
    a.name = "ints";
    a.type = ir::Attribute::Type::kInts;
    a.ints = {1, 2, 3};
    return a;
  }());
  const std::string bytes = serialize_model(m);
  ASSERT_TRUE(load_bytes(bytes).ok());
  int errors = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::string cut = bytes.substr(0, n);
    auto r = load_model_bytes(cut.data(), cut.size(), nullptr);
    if (!r.ok()) {
      ++errors;
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << r.status().message();
      EXPECT_NE(r.status().message().find(" at byte "), std::string::npos) << r.status().message();
    }
    // Also through the value parser with a few expected types.
    ir::TypeInfo seq;
    seq.kind = ir::TypeInfo::Kind::kSequence;
    (void)parse_value_pb(cut.data(), cut.size(), nullptr);
    (void)parse_value_pb(cut.data(), cut.size(), &seq);
  }
  EXPECT_GT(errors, static_cast<int>(bytes.size()) / 2);
}

TEST(OnnxReader, MalformedWireData) {
  auto err = [](const std::string& b) {
    auto r = load_bytes(b);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  // Wrong wire type for a known field: ir_version as a string.
  {
    wire::Writer w;
    w.bytes(1, "8");
    EXPECT_EQ(err(w.take()), "ModelProto.ir_version: expected wire type varint, got length-delimited at byte 0");
  }
  // Wrong wire type deep inside: dims as fixed32.
  {
    ir::Model m = small_model();
    std::string b = serialize_model(m);
    // Build the same but with a bad tensor by hand.
    wire::Writer t;
    t.fixed32(1, 3);
    t.int64(2, 1);
    wire::Writer attr;
    attr.bytes(1, "value");
    attr.message(5, t);
    wire::Writer n;
    n.bytes(2, "c");
    n.bytes(4, "Constant");
    n.message(5, attr);
    wire::Writer g;
    g.message(1, n);
    g.message(1, n);
    wire::Writer mm;
    mm.message(7, g);
    std::string e = err(mm.take());
    EXPECT_NE(e.find("ModelProto.graph.node[0].attribute[0].t.dims: expected wire type varint or length-delimited "
                     "(packed), got fixed32 at byte "),
              std::string::npos)
        << e;
  }
  // Absurd length.
  {
    std::string b = "\x3a\xff\xff\xff\xff\x0f";  // graph, length 2^32-1
    EXPECT_EQ(err(b), "ModelProto: length 4294967295 of field 7 exceeds the 0 remaining bytes at byte 0");
  }
  // Varint overflow: 11 continuation bytes.
  {
    std::string b = "\x08" + std::string(10, '\xff') + "\x01";
    EXPECT_EQ(err(b), "ModelProto: varint longer than 10 bytes in field 1 at byte 0");
  }
  // Invalid wire type 7, field number 0, stray end-group.
  EXPECT_EQ(err("\x0f"), "ModelProto: invalid wire type 7 for field 1 at byte 0");
  EXPECT_EQ(err(std::string("\x00\x01", 2)), "ModelProto: invalid field number 0 at byte 0");
  EXPECT_EQ(err("\x0c"), "ModelProto: unexpected end-group for field 1 at byte 0");
  // Unknown fields of every wire type (a group included) are skipped.
  {
    wire::Writer w;
    w.int64(1, 8);
    w.int64(100, 5);
    w.fixed32(101, 1);
    w.fixed64(102, 1);
    w.bytes(103, "junk");
    w.tag(104, wire::kStartGroup);
    w.int64(1, 1);
    w.tag(105, wire::kStartGroup);
    w.tag(105, wire::kEndGroup);
    w.tag(104, wire::kEndGroup);
    wire::Writer g;
    w.message(7, g);
    auto r = load_bytes(w.take());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ((*r)->ir_version, 8);
  }
  // Unterminated group.
  {
    wire::Writer w;
    w.tag(104, wire::kStartGroup);
    w.int64(1, 1);
    EXPECT_NE(err(w.take()).find("unterminated group"), std::string::npos);
  }
  // Unknown elem_type in a value type.
  {
    ir::Model m = small_model();
    m.graph.inputs[0].type.elem_type = static_cast<DataType>(42);
    std::string e = err(serialize_model(m));
    EXPECT_NE(e.find("ModelProto.graph.input[0].type.tensor_type.elem_type: unknown data type 42 (known: 1..26)"),
              std::string::npos)
        << e;
  }
  // Unknown data_type in an initializer.
  {
    wire::Writer t;
    t.packed_int64(1, {1});
    t.int64(2, 27);
    t.bytes(8, "bad");
    wire::Writer g;
    g.message(5, t);
    wire::Writer mm;
    mm.message(7, g);
    std::string e = err(mm.take());
    EXPECT_NE(e.find("ModelProto.graph.initializer[0]: tensor 'bad': unknown data_type 27"), std::string::npos) << e;
  }
  // No graph.
  EXPECT_EQ(err(""), "ModelProto: no graph at byte 0");
}

TEST(OnnxReader, DeepNestingIsAnError) {
  // 100 nested If subgraphs.
  auto g = std::make_shared<ir::Graph>();
  for (int i = 0; i < 100; ++i) {
    auto outer = std::make_shared<ir::Graph>();
    ir::Node n = node("If", {"c"}, {"o" + std::to_string(i)});
    ir::Attribute a;
    a.name = "then_branch";
    a.type = ir::Attribute::Type::kGraph;
    a.g = g;
    n.attributes.push_back(a);
    outer->nodes.push_back(n);
    g = outer;
  }
  ir::Model m;
  m.graph = *g;
  auto r = load_bytes(serialize_model(m));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("subgraphs nested deeper than 64"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("ModelProto.graph.node[0].attribute[0].g.node[0].attribute[0].g"),
            std::string::npos);

  // Deeply nested type protos (sequence of sequence of ...).
  ir::TypeInfo t = tensor_type(DataType::kFloat, {1});
  for (int i = 0; i < 300; ++i) {
    ir::TypeInfo s;
    s.kind = ir::TypeInfo::Kind::kSequence;
    s.inner = std::make_shared<ir::TypeInfo>(t);
    t = s;
  }
  ir::Model m2 = small_model();
  m2.graph.inputs[0].type = t;
  r = load_bytes(serialize_model(m2));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("messages nested deeper than"), std::string::npos) << r.status().message();
}

// ---------------------------------------------------------------------------------------------
// Test-data protos

TEST(OnnxReader, ValuePbRoundTrips) {
  // Sequence of tensors.
  ir::TypeInfo seq;
  seq.kind = ir::TypeInfo::Kind::kSequence;
  seq.inner = std::make_shared<ir::TypeInfo>(tensor_type(DataType::kInt64, {-1}));
  Value s = Value::sequence({Tensor::from_vector<int64_t>(DataType::kInt64, {2}, {1, 2}),
                             Tensor::from_vector<int64_t>(DataType::kInt64, {1}, {3})},
                            DataType::kInt64);
  std::string b = serialize_value_pb(s, "seq");
  std::string name;
  auto r = parse_value_pb(b.data(), b.size(), &seq, &name);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(name, "seq");
  ASSERT_TRUE(r->is_sequence());
  ASSERT_EQ(r->items().size(), 2u);
  EXPECT_EQ(r->items()[1].tensor().data<int64_t>()[0], 3);
  EXPECT_EQ(r->sequence_elem_type(), DataType::kInt64);
  // Empty sequence keeps the element type from the expected type.
  b = serialize_value_pb(Value::sequence({}, DataType::kInt64), "");
  r = parse_value_pb(b.data(), b.size(), &seq);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->items().size(), 0u);
  EXPECT_EQ(r->sequence_elem_type(), DataType::kInt64);

  // Optional: empty, with a tensor, with a sequence.
  ir::TypeInfo opt;
  opt.kind = ir::TypeInfo::Kind::kOptional;
  opt.inner = std::make_shared<ir::TypeInfo>(seq);
  b = serialize_value_pb(Value::optional_empty(), "o");
  r = parse_value_pb(b.data(), b.size(), &opt);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->is_optional());
  EXPECT_FALSE(r->has_element());
  b = serialize_value_pb(Value::optional_of(s), "o");
  r = parse_value_pb(b.data(), b.size(), &opt);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->has_element());
  EXPECT_EQ(r->element().items().size(), 2u);

  // Map<string, float>.
  MapValue mv;
  mv.key_type = DataType::kString;
  mv.value_type = DataType::kFloat;
  mv.string_keys = {"a", "b"};
  mv.values = Tensor::from_vector<float>(DataType::kFloat, {2}, {0.25f, 0.75f});
  ir::TypeInfo map;
  map.kind = ir::TypeInfo::Kind::kMap;
  map.elem_type = DataType::kString;
  map.inner = std::make_shared<ir::TypeInfo>(tensor_type(DataType::kFloat, {}));
  b = serialize_value_pb(Value::map(mv), "m");
  r = parse_value_pb(b.data(), b.size(), &map);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_TRUE(r->is_map());
  EXPECT_EQ(r->map_value().string_keys, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r->map_value().values.data<float>()[1], 0.75f);

  // Files.
  TempDir dir;
  const std::string path = (dir.path / "x.pb").string();
  ASSERT_TRUE(write_value_pb(path, Value(Tensor::from_vector<float>(DataType::kFloat, {3}, {1, 2, 3})), "x").ok());
  auto f = read_value_pb(path, nullptr, &name);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(name, "x");
  EXPECT_EQ(f->tensor().data<float>()[2], 3.f);
  auto missing = read_value_pb((dir.path / "nope.pb").string(), nullptr);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kIoError);
}

// ---------------------------------------------------------------------------------------------
// The conformance suite and the light models

namespace {

const char* kNodeTests = NXRT_SOURCE_DIR "/../shared/onnx-tests/node";

}  // namespace

TEST(OnnxReader, LoadsEveryConformanceModelAndTestData) {
  if (!fs::exists(kNodeTests)) GTEST_SKIP() << kNodeTests << " not found";
  const auto start = std::chrono::steady_clock::now();
  int models = 0, pbs = 0;
  std::vector<std::string> failures;
  for (const auto& dir : fs::directory_iterator(kNodeTests)) {
    const fs::path model_path = dir.path() / "model.onnx";
    if (!fs::exists(model_path)) continue;
    ++models;
    auto r = load_model_file(model_path.string());
    if (!r.ok()) {
      failures.push_back(r.status().message());
      continue;
    }
    const ir::Graph& g = (*r)->graph;
    std::vector<const ir::ValueInfo*> real_inputs;
    for (const auto& in : g.inputs) {
      if (!g.initializers.count(in.name)) real_inputs.push_back(&in);
    }
    for (const auto& ds : fs::directory_iterator(dir.path())) {
      if (!ds.is_directory() || ds.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
      for (const auto& f : fs::directory_iterator(ds.path())) {
        const std::string fname = f.path().filename().string();
        if (f.path().extension() != ".pb") continue;
        const bool is_input = fname.rfind("input_", 0) == 0;
        const size_t k = static_cast<size_t>(std::atoi(fname.c_str() + (is_input ? 6 : 7)));
        const ir::TypeInfo* expected = nullptr;
        if (is_input && k < real_inputs.size()) expected = &real_inputs[k]->type;
        if (!is_input && k < g.outputs.size()) expected = &g.outputs[k].type;
        ++pbs;
        auto v = read_value_pb(f.path().string(), expected);
        if (!v.ok()) failures.push_back(v.status().message());
      }
    }
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("loaded %d models and %d test-data files in %.2f s\n", models, pbs, secs);
  EXPECT_GE(models, 1800);
  for (size_t i = 0; i < failures.size() && i < 20; ++i) ADD_FAILURE() << failures[i];
  EXPECT_EQ(failures.size(), 0u);
}

TEST(OnnxReader, LoadsLightModels) {
  const fs::path root = NXRT_SOURCE_DIR "/../shared/models/light";
  if (!fs::exists(root)) GTEST_SKIP() << root << " not found";
  int n = 0;
  for (const auto& dir : fs::directory_iterator(root)) {
    const fs::path p = dir.path() / "model.onnx";
    if (!fs::exists(p)) continue;
    auto r = load_model_file(p.string());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_FALSE((*r)->graph.nodes.empty());
    auto in = read_value_pb((dir.path() / "test_data_set_0" / "input_0.pb").string(), &(*r)->graph.inputs[0].type);
    EXPECT_TRUE(in.ok()) << in.status().to_string();
    auto out = read_value_pb((dir.path() / "test_data_set_0" / "output_0.pb").string(), &(*r)->graph.outputs[0].type);
    EXPECT_TRUE(out.ok()) << out.status().to_string();
    ++n;
  }
  EXPECT_GE(n, 9);
}

TEST(OnnxReader, TruncationsAndBitFlipsOfSeedModelsNeverCrash) {
  // Deterministic mini-fuzz over the fuzzing seeds (subgraphs, sequences, sub-byte types, functions).
  const fs::path corpus = fs::path(NXRT_SOURCE_DIR) / "tests" / "fuzz" / "corpus" / "model_reader";
  if (!fs::exists(corpus)) GTEST_SKIP() << corpus << " not found";
  int files = 0, loads = 0;
  for (const auto& e : fs::directory_iterator(corpus)) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (bytes.size() > 4096) continue;
    ++files;
    for (size_t n = 0; n < bytes.size(); ++n) {
      auto r = load_model_bytes(bytes.data(), n, nullptr);
      if (!r.ok()) {
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidModel) << r.status().message();
      }
      ++loads;
    }
    for (size_t i = 0; i < bytes.size(); ++i) {
      for (int bit : {0, 3, 7}) {
        std::string m = bytes;
        m[i] = static_cast<char>(m[i] ^ (1 << bit));
        auto r = load_model_bytes(m.data(), m.size(), nullptr);
        if (!r.ok()) {
          EXPECT_FALSE(r.status().message().empty());
        }
        ++loads;
      }
    }
  }
  EXPECT_GT(files, 10);
  std::printf("%d seed files, %d loads\n", files, loads);
}
