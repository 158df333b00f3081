// ConvTranspose, DeformConv, ConvInteger and QLinearConv through the kernel lifecycle: each specializes
// a variant (checked geometry, loop bounds, the workspace its compute needs) and computes the same with
// and without it, at 1 and 2 threads; shape errors come from specialize and name the node; a float
// ConvTranspose run at fixed shapes allocates nothing after the first.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>

#include "alloc_counter.h"
#include "kernel_test_util.h"
#include "nxrt/float_types.h"
#include "nxrt/session.h"
#include "onnx/model_writer.h"
#include "variant_test_util.h"

using namespace nxrt;
using nxrt::testing::f64_tensor;
using nxrt::testing::f16_tensor;
using nxrt::testing::f32_tensor;
using nxrt::test::AllocCounter;
using nxrt::testing::attr_int;
using nxrt::testing::attr_ints;
using nxrt::testing::attr_string;
using nxrt::testing::expect_variant_paths_equal;
using nxrt::testing::graph_node;
using nxrt::testing::KernelRun;
using nxrt::testing::random_floats;
using nxrt::testing::run_kernel;
using nxrt::testing::tensor_info;

namespace {




std::vector<float> floats_of(const Tensor& t) {
  std::vector<float> out;
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (t.dtype() == DataType::kFloat16) {
      out.push_back(static_cast<float>(t.data<Float16>()[i]));
    } else {
      out.push_back(t.data<float>()[i]);
    }
  }
  return out;
}

// One random ConvTranspose: shapes, attributes, and the padding at the beginning and output size
// per axis that ONNX's rules give (what the reference scatters with).
struct TransposeCase {
  Dims xs, ws;
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, output_padding, pb, out;
  std::vector<ir::Attribute> attrs;
  std::string what;
};

TransposeCase random_transpose_case(std::mt19937& rng, int iter) {
  std::uniform_int_distribution<int> pick(0, 1000);
  TransposeCase c;
  const int nsp = 1 + iter % 3;
  c.group = 1 + pick(rng) % 3;
  const int64_t Cg = 1 + pick(rng) % 3, Mg = 1 + pick(rng) % 3;
  c.xs = {1 + pick(rng) % 2, Cg * c.group};
  c.ws = {Cg * c.group, Mg};
  const int mode = (iter / 3) % 4;  // explicit pads, output_shape, SAME_UPPER / SAME_LOWER, VALID
  std::vector<int64_t> pads_begin, pads_end, os;
  for (int a = 0; a < nsp; ++a) {
    const int64_t in = 1 + pick(rng) % 5, k = 1 + pick(rng) % 3;
    const int64_t s = 1 + pick(rng) % 3, d = 1 + pick(rng) % 2;
    const int64_t op = pick(rng) % s;
    c.xs.push_back(in);
    c.ws.push_back(k);
    c.strides.push_back(s);
    c.dilations.push_back(d);
    c.output_padding.push_back(op);
    const int64_t full = s * (in - 1) + op + (k - 1) * d + 1;
    int64_t out = 0, pb = 0;
    if (mode == 0) {
      const int64_t b = pick(rng) % 2, e = pick(rng) % 2;
      pb = b;
      out = full - b - e;
      if (out < 1) {  // keep the output non-empty
        pb = 0;
        out = full;
        pads_begin.push_back(0), pads_end.push_back(0);
      } else {
        pads_begin.push_back(b), pads_end.push_back(e);
      }
    } else if (mode == 3) {
      out = full;
    } else {
      out = mode == 1 ? std::max<int64_t>(1, in * s + pick(rng) % 3 - 1) : in * s;
      os.push_back(out);
      const int64_t total = full - out;
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      const bool upper = mode == 2 && iter % 2 == 0;
      pb = upper ? half : total - half;
    }
    c.pb.push_back(pb);
    c.out.push_back(out);
  }
  c.attrs = {attr_ints("strides", c.strides), attr_ints("dilations", c.dilations),
             attr_ints("output_padding", c.output_padding), attr_int("group", c.group)};
  if (mode == 0) {
    std::vector<int64_t> pads = pads_begin;
    pads.insert(pads.end(), pads_end.begin(), pads_end.end());
    c.attrs.push_back(attr_ints("pads", pads));
  } else if (mode == 1) {
    c.attrs.push_back(attr_ints("output_shape", os));
  } else if (mode == 2) {
    c.attrs.push_back(attr_string("auto_pad", iter % 2 == 0 ? "SAME_UPPER" : "SAME_LOWER"));
  } else {
    c.attrs.push_back(attr_string("auto_pad", "VALID"));
  }
  c.what = "iter " + std::to_string(iter) + " X " + shape_to_string(c.xs) + " W " + shape_to_string(c.ws) +
           " group " + std::to_string(c.group) + " mode " + std::to_string(mode);
  return c;
}

// ConvTranspose by its definition: x[n, c, i] * w[c, m, k] added at output i * s - pb + k * d, plus bias.
std::vector<float> transpose_reference(const TransposeCase& c, const std::vector<float>& x,
                                       const std::vector<float>& w, const std::vector<float>& b) {
  const size_t nsp = c.xs.size() - 2;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, s[3] = {1, 1, 1}, d[3] = {1, 1, 1}, pb[3] = {0, 0, 0},
          out[3] = {1, 1, 1};
  for (size_t a = 0; a < nsp; ++a) {
    const size_t j = 3 - nsp + a;
    in[j] = c.xs[2 + a], k[j] = c.ws[2 + a], s[j] = c.strides[a], d[j] = c.dilations[a], pb[j] = c.pb[a];
    out[j] = c.out[a];
  }
  const int64_t N = c.xs[0], C = c.xs[1], Cg = C / c.group, Mg = c.ws[1], M = Mg * c.group;
  const int64_t in_size = in[0] * in[1] * in[2], out_size = out[0] * out[1] * out[2], kvol = k[0] * k[1] * k[2];
  std::vector<double> y(static_cast<size_t>(N * M * out_size));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t o = 0; o < out_size; ++o) y[(n * M + m) * out_size + o] = b[m];
  for (int64_t n = 0; n < N; ++n)
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t mm = 0; mm < Mg; ++mm)
        for (int64_t i0 = 0; i0 < in[0]; ++i0)
          for (int64_t i1 = 0; i1 < in[1]; ++i1)
            for (int64_t i2 = 0; i2 < in[2]; ++i2)
              for (int64_t k0 = 0; k0 < k[0]; ++k0)
                for (int64_t k1 = 0; k1 < k[1]; ++k1)
                  for (int64_t k2 = 0; k2 < k[2]; ++k2) {
                    const int64_t o0 = i0 * s[0] - pb[0] + k0 * d[0], o1 = i1 * s[1] - pb[1] + k1 * d[1],
                                  o2 = i2 * s[2] - pb[2] + k2 * d[2];
                    if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1] || o2 < 0 || o2 >= out[2]) continue;
                    const int64_t m = ch / Cg * Mg + mm;
                    const double xv = x[(n * C + ch) * in_size + (i0 * in[1] + i1) * in[2] + i2];
                    const double wv = w[(ch * Mg + mm) * kvol + (k0 * k[1] + k1) * k[2] + k2];
                    y[(n * M + m) * out_size + (o0 * out[1] + o1) * out[2] + o2] += xv * wv;
                  }
  return std::vector<float>(y.begin(), y.end());
}

// A one-node model whose inputs are graph inputs with symbolic dims (so shape inference lets any shape
// through and the kernel's own checks decide), named `node`.
std::unique_ptr<Session> single_node_session(const std::string& op, int64_t opset, const std::string& node,
                                             const std::vector<std::pair<std::string, Value>>& feeds,
                                             std::vector<ir::Attribute> attrs, DataType out_dtype) {
  ir::Model m;
  m.ir_version = 8;
  m.opset_imports.push_back({"", opset});
  m.graph.name = "g";
  std::vector<std::string> names;
  for (const auto& [name, v] : feeds) {
    std::vector<ir::Dim> dims;
    for (size_t a = 0; a < v.tensor().shape().size(); ++a) dims.push_back(ir::Dim::named(name + std::to_string(a)));
    m.graph.inputs.push_back(tensor_info(name, v.tensor().dtype(), dims));
    names.push_back(name);
  }
  m.graph.outputs = {tensor_info("y", out_dtype, {ir::Dim::named("y0"), ir::Dim::named("y1"), ir::Dim::named("y2"),
                                                  ir::Dim::named("y3")})};
  ir::Node n = graph_node(op, names, {"y"}, std::move(attrs));
  n.name = node;
  m.graph.nodes = {n};
  std::string bytes = onnx::serialize_model(m);
  SessionOptions o;
  auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

// The kernel's error for a bad shape, three ways: from specialize (the message), from compute without a
// variant and from a session run (both naming the node).
void expect_shape_error(const KernelRun& run, DataType out_dtype, const std::string& message) {
  SCOPED_TRACE(run.op_type + ": " + message);
  KernelRun plain = run;
  plain.specialize = false;
  auto a = run_kernel(plain);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().to_string().find("node 'test_" + run.op_type + "'"), std::string::npos) << a.status().to_string();
  EXPECT_NE(a.status().message().find(message), std::string::npos) << a.status().to_string();
  KernelRun spec = run;
  spec.specialize = true;
  auto b = run_kernel(spec);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find(message), std::string::npos) << b.status().to_string();

  std::vector<std::pair<std::string, Value>> feeds;
  for (size_t i = 0; i < run.inputs.size(); ++i) feeds.push_back({"in" + std::to_string(i), run.inputs[i]});
  auto s = single_node_session(run.op_type, run.opset, "bad_" + run.op_type, feeds, run.attributes, out_dtype);
  ASSERT_TRUE(s);
  auto r = s->run(feeds);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().to_string().find("node 'bad_" + run.op_type + "'"), std::string::npos) << r.status().to_string();
  EXPECT_NE(r.status().message().find(message), std::string::npos) << r.status().to_string();
}

std::vector<uint8_t> random_bytes(std::mt19937& rng, int64_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(static_cast<size_t>(n));
  for (auto& b : v) b = static_cast<uint8_t>(d(rng));
  return v;
}

// The ConvTranspose run of case `c` on inputs x, w, b (of one dtype).
KernelRun transpose_run(const TransposeCase& c, Tensor x, Tensor w, Tensor b) {
  KernelRun run;
  run.op_type = "ConvTranspose";
  run.opset = 22;
  run.attributes = c.attrs;
  run.inputs = {std::move(x), std::move(w), std::move(b)};
  return run;
}

}  // namespace

TEST(ConvFamilyVariants, ConvTransposeMatchesDefinitionWithAndWithoutVariant) {
  std::mt19937 rng(101);
  for (int iter = 0; iter < 36; ++iter) {
    const TransposeCase c = random_transpose_case(rng, iter);
    SCOPED_TRACE(c.what);
    const int64_t M = c.ws[1] * c.group;
    auto x = random_floats(rng, shape_numel(c.xs)), w = random_floats(rng, shape_numel(c.ws)),
         b = random_floats(rng, M);
    KernelRun run = transpose_run(c, f32_tensor(c.xs, x), f32_tensor(c.ws, w), f32_tensor({M}, b));
    auto out = run_kernel(run);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const Tensor& y = (*out)[0].tensor();
    Dims want{c.xs[0], M};
    for (int64_t o : c.out) want.push_back(o);
    ASSERT_EQ(y.shape(), want);
    const std::vector<float> ref = transpose_reference(c, x, w, b);
    const std::vector<float> got = floats_of(y);
    for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-4f * (1.f + std::fabs(ref[i]))) << i;
    // Weights given at run time and packed at creation; with and without a variant; 1 and 2 threads.
    expect_variant_paths_equal(run, true);
    run.const_inputs = {1, 2};
    expect_variant_paths_equal(run, true);
  }
}

TEST(ConvFamilyVariants, ConvTransposeFloat16AndDoubleWithAndWithoutVariant) {
  std::mt19937 rng(102);
  for (int iter = 0; iter < 12; ++iter) {
    const TransposeCase c = random_transpose_case(rng, iter);
    SCOPED_TRACE(c.what);
    const int64_t M = c.ws[1] * c.group;
    auto x = random_floats(rng, shape_numel(c.xs)), w = random_floats(rng, shape_numel(c.ws)),
         b = random_floats(rng, M);
    KernelRun run = transpose_run(c, f16_tensor(c.xs, x), f16_tensor(c.ws, w), f16_tensor({M}, b));
    expect_variant_paths_equal(run, true);
    // float16 computes in float: its result is the float one rounded.
    auto half = run_kernel(run);
    ASSERT_TRUE(half.ok()) << half.status().to_string();
    KernelRun as_float = run;
    as_float.inputs = {f32_tensor(c.xs, floats_of(run.inputs[0].tensor())), f32_tensor(c.ws, floats_of(run.inputs[1].tensor())),
                       f32_tensor({M}, floats_of(run.inputs[2].tensor()))};
    auto full = run_kernel(as_float);
    ASSERT_TRUE(full.ok()) << full.status().to_string();
    const std::vector<float> h = floats_of((*half)[0].tensor()), f = floats_of((*full)[0].tensor());
    ASSERT_EQ(h.size(), f.size());
    for (size_t i = 0; i < h.size(); ++i) ASSERT_EQ(h[i], static_cast<float>(Float16(f[i]))) << i;
    run.const_inputs = {1};
    expect_variant_paths_equal(run, true);
    KernelRun dbl = run;
    dbl.inputs = {f64_tensor(c.xs, x), f64_tensor(c.ws, w), f64_tensor({M}, b)};
    expect_variant_paths_equal(dbl, true);
  }
}

TEST(ConvFamilyVariants, DeformConvWithAndWithoutVariant) {
  std::mt19937 rng(103);
  std::uniform_int_distribution<int> pick(0, 1000);
  for (int iter = 0; iter < 16; ++iter) {
    const int64_t group = 1 + pick(rng) % 2, offset_group = 1 + pick(rng) % 2;
    const int64_t C = group * offset_group * (1 + pick(rng) % 2), M = group * (1 + pick(rng) % 3);
    const int64_t N = 1 + pick(rng) % 2, H = 3 + pick(rng) % 4, W = 3 + pick(rng) % 4;
    const int64_t kh = 1 + pick(rng) % 3, kw = 1 + pick(rng) % 3, sh = 1 + pick(rng) % 2, sw = 1 + pick(rng) % 2;
    const int64_t dh = 1 + pick(rng) % 2, pad = pick(rng) % 2;
    const int64_t OH = (H + 2 * pad - ((kh - 1) * dh + 1)) / sh + 1, OW = (W + 2 * pad - kw) / sw + 1;
    if (OH < 1 || OW < 1) continue;
    const bool with_mask = iter % 2 == 0, with_bias = iter % 4 < 2;
    const Dims xs{N, C, H, W}, ws{M, C / group, kh, kw}, os{N, offset_group * kh * kw * 2, OH, OW},
        ms{N, offset_group * kh * kw, OH, OW};
    auto x = random_floats(rng, shape_numel(xs)), w = random_floats(rng, shape_numel(ws));
    auto off = random_floats(rng, shape_numel(os)), mask = random_floats(rng, shape_numel(ms));
    for (float& o : off) o *= 2.5f;  // some samples fall between pixels, some outside the image
    auto b = random_floats(rng, M);
    SCOPED_TRACE("iter " + std::to_string(iter) + " X " + shape_to_string(xs) + " W " + shape_to_string(ws));
    KernelRun run;
    run.op_type = "DeformConv";
    run.opset = 22;
    run.attributes = {attr_int("group", group), attr_int("offset_group", offset_group), attr_ints("strides", {sh, sw}),
                      attr_ints("dilations", {dh, 1}), attr_ints("pads", {pad, pad, pad, pad})};
    for (auto make : {&f32_tensor, &f16_tensor, &f64_tensor}) {
      run.inputs = {make(xs, x), make(ws, w), make(os, off), with_bias ? Value(make({M}, b)) : Value(),
                    with_mask ? Value(make(ms, mask)) : Value()};
      run.const_inputs = {};
      expect_variant_paths_equal(run, true);
      run.const_inputs = {1};
      expect_variant_paths_equal(run, true);
    }
  }
}

TEST(ConvFamilyVariants, IntegerConvsWithAndWithoutVariant) {
  std::mt19937 rng(104);
  std::uniform_int_distribution<int> pick(0, 1000);
  for (int iter = 0; iter < 12; ++iter) {
    const int64_t group = 1 + pick(rng) % 2, C = group * (1 + pick(rng) % 3), M = group * (1 + pick(rng) % 3);
    const int64_t N = 1 + pick(rng) % 2, H = 2 + pick(rng) % 5, W = 2 + pick(rng) % 5;
    const int64_t kh = 1 + pick(rng) % 2, kw = 1 + pick(rng) % 3;
    const Dims xs{N, C, H, W}, ws{M, C / group, kh, kw};
    const auto x = random_bytes(rng, shape_numel(xs)), w = random_bytes(rng, shape_numel(ws));
    const auto wzp = random_bytes(rng, M);
    std::vector<ir::Attribute> attrs = {attr_int("group", group), attr_ints("strides", {1 + iter % 2, 1})};
    if (iter % 3 == 1) {
      attrs.push_back(attr_string("auto_pad", "SAME_UPPER"));
    } else {
      attrs.push_back(attr_ints("pads", {iter % 2, 0, 0, iter % 3 == 0 ? 1 : 0}));
    }
    SCOPED_TRACE("iter " + std::to_string(iter) + " X " + shape_to_string(xs) + " W " + shape_to_string(ws));
    KernelRun ci;
    ci.op_type = "ConvInteger";
    ci.opset = 10;
    ci.attributes = attrs;
    ci.inputs = {Tensor::from_vector<uint8_t>(DataType::kUInt8, xs, x),
                 Tensor::from_vector<uint8_t>(DataType::kUInt8, ws, w),
                 Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {static_cast<uint8_t>(pick(rng) % 256)}),
                 iter % 2 ? Tensor::from_vector<uint8_t>(DataType::kUInt8, {M}, wzp)
                          : Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {wzp[0]})};
    expect_variant_paths_equal(ci, true);
    ci.const_inputs = {1, 3};
    expect_variant_paths_equal(ci, true);

    KernelRun q;
    q.op_type = "QLinearConv";
    q.opset = 10;
    q.attributes = attrs;
    std::vector<int8_t> ws8(w.begin(), w.end());
    std::vector<int32_t> bias;
    for (int64_t m = 0; m < M; ++m) bias.push_back(pick(rng) * 40 - 20000);
    std::vector<float> w_scales;
    for (int64_t m = 0; m < M; ++m) w_scales.push_back(0.001f * (1 + pick(rng) % 50));
    q.inputs = {Tensor::from_vector<uint8_t>(DataType::kUInt8, xs, x),
                Tensor::from_vector<float>(DataType::kFloat, {}, {0.02f}),
                Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {128}),
                Tensor::from_vector<int8_t>(DataType::kInt8, ws, ws8),
                iter % 2 ? Tensor::from_vector<float>(DataType::kFloat, {M}, w_scales)
                         : Tensor::from_vector<float>(DataType::kFloat, {}, {w_scales[0]}),
                Tensor::from_vector<int8_t>(DataType::kInt8, {}, {0}),
                Tensor::from_vector<float>(DataType::kFloat, {}, {0.5f}),
                Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {100}),
                Tensor::from_vector<int32_t>(DataType::kInt32, {M}, bias)};
    expect_variant_paths_equal(q, true);
    q.const_inputs = {3, 5};
    expect_variant_paths_equal(q, true);
  }
}

TEST(ConvFamilyVariants, BadShapesAreClearErrorsNamingTheNode) {
  {
    KernelRun run;
    run.op_type = "ConvTranspose";
    run.opset = 22;
    run.inputs = {f32_tensor({1, 3, 4, 4}, std::vector<float>(48, 1.f)), f32_tensor({4, 2, 3, 3}, std::vector<float>(72, 1.f))};
    expect_shape_error(run, DataType::kFloat, "W [4,2,3,3] must have X's 3 channels first, divisible by group 1");
  }
  {
    KernelRun run;
    run.op_type = "DeformConv";
    run.opset = 22;
    run.inputs = {f32_tensor({1, 2, 4, 4}, std::vector<float>(32, 1.f)), f32_tensor({3, 2, 3, 3}, std::vector<float>(54, 1.f)),
                  f32_tensor({1, 18, 3, 3}, std::vector<float>(162, 0.f))};
    expect_shape_error(run, DataType::kFloat, "offset float32[1,18,3,3] must have shape [1,18,2,2]");
  }
  {
    KernelRun run;
    run.op_type = "ConvInteger";
    run.opset = 10;
    run.inputs = {Tensor::from_vector<uint8_t>(DataType::kUInt8, {1, 3, 4, 4}, std::vector<uint8_t>(48, 1)),
                  Tensor::from_vector<uint8_t>(DataType::kUInt8, {2, 2, 3, 3}, std::vector<uint8_t>(36, 1))};
    expect_shape_error(run, DataType::kInt32, "X has 3 channels but W [2,2,3,3] with group 1 expects 2");
  }
  {
    KernelRun run;
    run.op_type = "QLinearConv";
    run.opset = 10;
    run.inputs = {Tensor::from_vector<uint8_t>(DataType::kUInt8, {1, 2, 4, 4}, std::vector<uint8_t>(32, 1)),
                  Tensor::from_vector<float>(DataType::kFloat, {}, {0.1f}),
                  Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {0}),
                  Tensor::from_vector<uint8_t>(DataType::kUInt8, {3, 2, 3, 3}, std::vector<uint8_t>(54, 1)),
                  Tensor::from_vector<float>(DataType::kFloat, {2}, {0.1f, 0.2f}),
                  Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {0}),
                  Tensor::from_vector<float>(DataType::kFloat, {}, {0.3f}),
                  Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {0})};
    expect_shape_error(run, DataType::kUInt8, "w_scale must be a scalar or have 3 values");
  }
}

// The float path reads X and the bias in place and takes its column matrix and GEMM scratch from the
// variant's workspace, so at unchanged shapes a run allocates nothing.
TEST(ConvFamilyVariants, FloatConvTransposeAllocatesNothingAfterTheFirstRun) {
  for (int threads : {1, 2, 3}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    ir::Model m;
    m.ir_version = 8;
    m.opset_imports.push_back({"", 17});
    m.graph.name = "up";
    const int64_t C = 8, M = 6;
    m.graph.inputs = {tensor_info("x", DataType::kFloat, {ir::Dim::fixed(2), ir::Dim::fixed(C), ir::Dim::fixed(7),
                                                         ir::Dim::fixed(9)})};
    m.graph.outputs = {tensor_info("y", DataType::kFloat, {ir::Dim::fixed(2), ir::Dim::fixed(M), ir::Dim::named("oh"),
                                                          ir::Dim::named("ow")})};
    m.graph.initializers["w"] = nxrt::testing::random_tensor({C, M / 2, 3, 3}, 5);
    m.graph.initializers["b"] = nxrt::testing::random_tensor({M}, 6);
    m.graph.nodes = {graph_node("ConvTranspose", {"x", "w", "b"}, {"y"},
                                {attr_int("group", 2), attr_ints("strides", {2, 2}), attr_ints("pads", {1, 0, 0, 1}),
                                 attr_ints("output_padding", {1, 1})})};
    std::string bytes = onnx::serialize_model(m);
    SessionOptions o;
    o.capture = 0;
    o.threads = threads;
    o.kernel_overrides = {{"pool", "exact"}};  // 3 threads even on a 2-CPU machine
    auto s = Session::create_from_bytes(bytes.data(), bytes.size(), o);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    Tensor x = nxrt::testing::random_tensor({2, C, 7, 9}, 7);
    IoBinding b;
    b.bind_input("x", Value(x));
    const size_t y_out = b.bind_output("y");
    ASSERT_TRUE((*s)->run(b).ok());
    const std::vector<float> first = floats_of(b.output(y_out).tensor());
    uint64_t allocs = 0;
    for (int i = 0; i < 5; ++i) {
      AllocCounter::arm();
      Status st = (*s)->run(b);
      AllocCounter::disarm();
      allocs += AllocCounter::count();
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_EQ(floats_of(b.output(y_out).tensor()), first);
    }
    EXPECT_EQ(allocs, 0u) << "heap allocations over 5 runs at unchanged shapes";
  }
}
