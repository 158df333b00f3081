#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "ops/cpu_provider.h"
#include "ep/standalone_context.h"
#include "ep/thread_pool.h"
#include "kernel_test_util.h"
#include "ops/gemm/gemm.h"

using namespace nxrt;
using nxrt::testing::KernelRun;
using nxrt::testing::run_kernel;

namespace {

void check_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, float beta, ep::ThreadPool* pool,
                std::mt19937& rng) {
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  // Leading dimensions larger than needed, to exercise ld handling.
  int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
  std::vector<float> A((ta ? K : M) * lda + 1), B((tb ? N : K) * ldb + 1), C(M * ldc + 1), R;
  for (auto& x : A) x = d(rng);
  for (auto& x : B) x = d(rng);
  for (auto& x : C) x = d(rng);
  if (beta == 0.f) {
    for (auto& x : C) x = std::nanf("");  // must not be read
  }
  R = C;
  ops::gemm_f32(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, C.data(), ldc, pool);
  ops::gemm_reference<float>(ta, tb, M, N, K, alpha, A.data(), lda, B.data(), ldb, beta, R.data(), ldc);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      float want = R[i * ldc + j], got = C[i * ldc + j];
      ASSERT_NEAR(got, want, 1e-4f * (1 + std::sqrt(static_cast<float>(K))))
          << "ta=" << ta << " tb=" << tb << " M=" << M << " N=" << N << " K=" << K << " at " << i << "," << j;
    }
  }
}

}  // namespace

TEST(OpsLinalgGemm, BlockedMatchesReferenceOnRandomShapes) {
  std::mt19937 rng(42);
  ep::ThreadPool pool1(1), pool3(3, ep::ThreadPool::Sizing::kExact);
  const int64_t sizes[] = {1, 2, 3, 4, 5, 7, 15, 16, 17, 33, 65, 100, 257, 300};
  std::uniform_int_distribution<int> pick(0, sizeof(sizes) / sizeof(sizes[0]) - 1);
  for (int it = 0; it < 60; ++it) {
    int64_t M = sizes[pick(rng)], N = sizes[pick(rng)], K = sizes[pick(rng)];
    if (M * N * K > 4000000) continue;
    bool ta = it & 1, tb = (it >> 1) & 1;
    float alpha = (it % 3 == 0) ? 1.f : 0.75f;
    float beta = (it % 4 == 0) ? 0.f : (it % 4 == 1 ? 1.f : -0.5f);
    check_gemm(ta, tb, M, N, K, alpha, beta, (it & 4) ? &pool3 : &pool1, rng);
  }
}

TEST(OpsLinalgGemm, EdgeShapes) {
  std::mt19937 rng(7);
  ep::ThreadPool pool(2);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check_gemm(ta, tb, 1, 1, 1, 1.f, 0.f, &pool, rng);
      check_gemm(ta, tb, 1, 1000, 37, 1.f, 0.f, &pool, rng);   // GEMV (M=1)
      check_gemm(ta, tb, 1000, 1, 37, 2.f, 1.f, &pool, rng);   // N=1
      check_gemm(ta, tb, 19, 23, 1, 1.f, 0.5f, &pool, rng);    // K=1
      check_gemm(ta, tb, 70, 530, 260, 1.f, 0.f, &pool, rng);  // crosses every block boundary
    }
  // K=0: C = beta*C.
  std::vector<float> C = {1, 2, 3, 4};
  ops::gemm_f32(false, false, 2, 2, 0, 1.f, nullptr, 1, nullptr, 2, 2.f, C.data(), 2, nullptr);
  EXPECT_EQ(C, (std::vector<float>{2, 4, 6, 8}));
}

namespace {

using nxrt::testing::attr_float;
using nxrt::testing::attr_int;
using nxrt::testing::attr_string;

Tensor randf(Dims shape, std::mt19937& rng) {
  Tensor t(DataType::kFloat, shape);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}

Tensor run1(const KernelRun& r) {
  auto out = run_kernel(r);
  EXPECT_TRUE(out.ok()) << out.status().to_string();
  if (!out.ok()) return Tensor();
  return out.value()[0].tensor();
}

void expect_close(const Tensor& got, const Tensor& want, float tol = 1e-4f) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < got.numel(); ++i) ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], tol) << "at " << i;
}

}  // namespace

TEST(OpsLinalgMatMul, NumpySemantics) {
  std::mt19937 rng(1);
  // [2,1,3,4] x [5,4,2] -> [2,5,3,2]
  Tensor a = randf({2, 1, 3, 4}, rng), b = randf({5, 4, 2}, rng);
  Tensor y = run1({"MatMul", "", 13, {}, {a, b}});
  ASSERT_EQ(y.shape(), (Dims{2, 5, 3, 2}));
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 2; ++n) {
          float s = 0;
          for (int k = 0; k < 4; ++k) s += a.data<float>()[(i * 3 + m) * 4 + k] * b.data<float>()[(j * 4 + k) * 2 + n];
          ASSERT_NEAR(y.data<float>()[((i * 5 + j) * 3 + m) * 2 + n], s, 1e-5);
        }
  // 1-D promotion.
  Tensor v = randf({4}, rng);
  EXPECT_EQ(run1({"MatMul", "", 13, {}, {v, v}}).shape(), (Dims{}));
  EXPECT_EQ(run1({"MatMul", "", 13, {}, {a, v}}).shape(), (Dims{2, 1, 3}));
  EXPECT_EQ(run1({"MatMul", "", 13, {}, {v, b}}).shape(), (Dims{5, 2}));
  // int32 and mismatch error.
  Tensor ai = Tensor::from_vector<int32_t>(DataType::kInt32, {1, 2}, {3, -4});
  Tensor bi = Tensor::from_vector<int32_t>(DataType::kInt32, {2, 1}, {5, 6});
  EXPECT_EQ(run1({"MatMul", "", 13, {}, {ai, bi}}).data<int32_t>()[0], 15 - 24);
  EXPECT_FALSE(run_kernel({"MatMul", "", 13, {}, {a, a}}).ok());
}

TEST(OpsLinalgGemm, AttributesAndBias) {
  std::mt19937 rng(2);
  Tensor a = randf({4, 3}, rng), b = randf({5, 4}, rng), c = randf({5}, rng);
  // Y = 0.5 * A^T B^T + 2 * c
  Tensor y = run1({"Gemm", "", 13, {attr_int("transA", 1), attr_int("transB", 1), attr_float("alpha", 0.5f), attr_float("beta", 2.f)}, {a, b, c}});
  ASSERT_EQ(y.shape(), (Dims{3, 5}));
  for (int m = 0; m < 3; ++m)
    for (int n = 0; n < 5; ++n) {
      float s = 0;
      for (int k = 0; k < 4; ++k) s += a.data<float>()[k * 3 + m] * b.data<float>()[n * 4 + k];
      ASSERT_NEAR(y.data<float>()[m * 5 + n], 0.5f * s + 2.f * c.data<float>()[n], 1e-5);
    }
  // No C (opset 11+).
  Tensor y2 = run1({"Gemm", "", 11, {attr_int("transA", 1), attr_int("transB", 1)}, {a, b}});
  EXPECT_EQ(y2.shape(), (Dims{3, 5}));
}

TEST(OpsLinalgDet, BatchedLU) {
  Tensor x = Tensor::from_vector<float>(DataType::kFloat, {2, 3, 3},
                                        {2, 0, 1, 1, 3, 2, 1, 1, 1,  // det = 2*(3-2) - 0 + 1*(1-3) = 0
                                         0, 1, 0, 1, 0, 0, 0, 0, 4});  // permutation * 4: det = -4
  Tensor y = run1({"Det", "", 11, {}, {x}});
  ASSERT_EQ(y.shape(), (Dims{2}));
  EXPECT_NEAR(y.data<float>()[0], 0.f, 1e-5);
  EXPECT_NEAR(y.data<float>()[1], -4.f, 1e-5);
}

namespace {
// Brute-force einsum for checking: labels are single letters, no ellipsis.
Tensor einsum_ref(const std::string& eq, const std::vector<Tensor>& ins) {
  auto arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string lhs = eq.substr(0, arrow), out = eq.substr(arrow + 2);
  size_t s = 0;
  for (;;) {
    size_t c = lhs.find(',', s);
    terms.push_back(lhs.substr(s, c == std::string::npos ? c : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t a = 0; a < terms[i].size(); ++a) size[terms[i][a]] = ins[i].shape()[a];
  std::vector<char> all;
  for (auto& [c, n] : size) all.push_back(c);
  Dims oshape;
  for (char c : out) oshape.push_back(size[c]);
  Tensor y(DataType::kFloat, oshape);
  std::vector<int64_t> idx(all.size(), 0);
  auto val = [&](char c) { return idx[std::find(all.begin(), all.end(), c) - all.begin()]; };
  int64_t total = 1;
  for (char c : all) total *= size[c];
  for (int64_t t = 0; t < total; ++t) {
    int64_t r = t;
    for (size_t i = all.size(); i-- > 0;) {
      idx[i] = r % size[all[i]];
      r /= size[all[i]];
    }
    float p = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      int64_t off = 0;
      for (size_t a = 0; a < terms[i].size(); ++a) off = off * ins[i].shape()[a] + val(terms[i][a]);
      p *= ins[i].data<float>()[off];
    }
    int64_t off = 0;
    for (size_t a = 0; a < out.size(); ++a) off = off * oshape[a] + val(out[a]);
    y.data<float>()[off] += p;
  }
  return y;
}
}  // namespace

TEST(OpsLinalgEinsum, EquationsMatchBruteForce) {
  std::mt19937 rng(3);
  struct Case {
    std::string eq;
    std::vector<Dims> shapes;
  };
  std::vector<Case> cases = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"ij->ji", {{3, 4}}},
      {"ii->i", {{4, 4}}},
      {"ii->", {{4, 4}}},
      {"ij->", {{3, 4}}},
      {"i,i->", {{5}, {5}}},
      {"i,j->ij", {{3}, {4}}},
      {"bii->bi", {{2, 3, 3}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 2}}},
      {"abc,cd->abd", {{2, 3, 4}, {4, 5}}},
      {"aij,ajk->ik", {{2, 3, 4}, {2, 4, 5}}},
      {"ijk,ikj->i", {{2, 3, 4}, {2, 4, 3}}},
      {"iij,jk->ik", {{3, 3, 2}, {2, 4}}},
  };
  for (const auto& c : cases) {
    std::vector<Tensor> ins;
    std::vector<Value> vals;
    for (const auto& s : c.shapes) {
      ins.push_back(randf(s, rng));
      vals.push_back(ins.back());
    }
    Tensor y = run1({"Einsum", "", 12, {attr_string("equation", c.eq)}, vals});
    SCOPED_TRACE(c.eq);
    expect_close(y, einsum_ref(c.eq, ins));
  }
  // Implicit output (alphabetical, labels seen once) and ellipsis.
  Tensor a = randf({2, 3}, rng), b = randf({3, 4}, rng);
  expect_close(run1({"Einsum", "", 12, {attr_string("equation", "ij,jk")}, {a, b}}), einsum_ref("ij,jk->ik", {a, b}));
  expect_close(run1({"Einsum", "", 12, {attr_string("equation", "ba")}, {a}}), einsum_ref("ba->ab", {a}));
  Tensor x = randf({2, 5, 3, 4}, rng), w = randf({4, 6}, rng);
  Tensor y = run1({"Einsum", "", 12, {attr_string("equation", "...ij,jk->...ik")}, {x, w}});
  EXPECT_EQ(y.shape(), (Dims{2, 5, 3, 6}));
  Tensor xr = x.reshaped({10, 3, 4});
  Tensor yr = run1({"Einsum", "", 12, {attr_string("equation", "bij,jk->bik")}, {xr, w}});
  for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(y.data<float>()[i], yr.data<float>()[i], 1e-5);
  // Broadcasting ellipsis dims of size 1.
  Tensor p = randf({1, 3, 4}, rng), q = randf({2, 4, 5}, rng);
  EXPECT_EQ(run1({"Einsum", "", 12, {attr_string("equation", "...ij,...jk->...ik")}, {p, q}}).shape(), (Dims{2, 3, 5}));
  EXPECT_FALSE(run_kernel({"Einsum", "", 12, {attr_string("equation", "ij,jk->ik")}, {a, a}}).ok());
}

TEST(OpsLinalgQuant, MatMulIntegerZeroPoints) {
  Tensor a = Tensor::from_vector<uint8_t>(DataType::kUInt8, {2, 2}, {10, 20, 30, 40});
  Tensor b = Tensor::from_vector<int8_t>(DataType::kInt8, {2, 2}, {1, -1, 2, 3});
  Tensor za = Tensor::from_vector<uint8_t>(DataType::kUInt8, {2}, {10, 30});  // per row
  Tensor zb = Tensor::from_vector<int8_t>(DataType::kInt8, {}, {1});
  Tensor y = run1({"MatMulInteger", "", 10, {}, {a, b, za, zb}});
  ASSERT_EQ(y.dtype(), DataType::kInt32);
  // A-za = [[0,10],[0,10]], B-zb = [[0,-2],[1,2]]
  EXPECT_EQ(std::vector<int32_t>(y.data<int32_t>(), y.data<int32_t>() + 4), (std::vector<int32_t>{10, 20, 10, 20}));
}

TEST(OpsLinalgQuant, QLinearMatMulInt8AndFloat8) {
  // uint8: a=[[2,4]] zp 2, b=[[3],[5]] zp 1 -> (0*2 + 2*4) = 8; * 0.5*0.25/0.1 = 10 -> + zy 3 = 13.
  Tensor a = Tensor::from_vector<uint8_t>(DataType::kUInt8, {1, 2}, {2, 4});
  Tensor b = Tensor::from_vector<uint8_t>(DataType::kUInt8, {2, 1}, {3, 5});
  auto u8 = [](uint8_t v) { return Tensor::from_vector<uint8_t>(DataType::kUInt8, {}, {v}); };
  Tensor y = run1({"QLinearMatMul", "", 10, {}, {a, Tensor::scalar_float(0.5f), u8(2), b, Tensor::scalar_float(0.25f), u8(1), Tensor::scalar_float(0.1f), u8(3)}});
  ASSERT_EQ(y.dtype(), DataType::kUInt8);
  EXPECT_EQ(y.data<uint8_t>()[0], 13);
  // float8e4m3fn: codes 0x38 = 1.0, 0x40 = 2.0, 0x44 = 3.0, 0xB8 = -1.0.
  auto f8 = [](Dims s, std::vector<uint8_t> v) { return Tensor::from_vector<uint8_t>(DataType::kFloat8E4M3FN, s, v); };
  Tensor y8 = run1({"QLinearMatMul", "", 21, {},
                    {f8({1, 2}, {0x38, 0x40}), Tensor::scalar_float(1.f), f8({}, {0}), f8({2, 2}, {0x38, 0xB8, 0x38, 0xB8}),
                     Tensor::scalar_float(1.f), f8({}, {0}), Tensor::scalar_float(1.f), f8({}, {0})}});
  ASSERT_EQ(y8.dtype(), DataType::kFloat8E4M3FN);
  EXPECT_EQ(y8.data<uint8_t>()[0], 0x44);
  EXPECT_EQ(y8.data<uint8_t>()[1], 0xC4);
}

TEST(OpsLinalgGemm, PrepackedBMatchesReference) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  ep::ThreadPool pool(3, ep::ThreadPool::Sizing::kExact);
  const int64_t shapes[][3] = {{1, 1, 1}, {1, 37, 300}, {5, 17, 3}, {64, 33, 257}, {70, 530, 260}, {3, 1, 9}, {2, 1000, 40}};
  for (auto& sh : shapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const int64_t M = sh[0], N = sh[1], K = sh[2];
        std::vector<float> A(M * K), B(K * N), C(M * N), R(M * N);
        for (auto& x : A) x = d(rng);
        for (auto& x : B) x = d(rng);
        for (size_t i = 0; i < C.size(); ++i) C[i] = R[i] = d(rng);
        ops::PackedB pb = ops::pack_b_f32(tb, K, N, B.data(), tb ? K : N);
        ops::gemm_f32_packed(ta, M, 0.5f, A.data(), ta ? M : K, pb, 2.f, C.data(), N, &pool);
        ops::gemm_reference<float>(ta, tb, M, N, K, 0.5f, A.data(), ta ? M : K, B.data(), tb ? K : N, 2.f, R.data(), N);
        for (size_t i = 0; i < C.size(); ++i)
          ASSERT_NEAR(C[i], R[i], 1e-4f * (1 + std::sqrt(static_cast<float>(K)))) << M << "x" << N << "x" << K << " ta=" << ta << " tb=" << tb;
      }
}

namespace {
// Runs a kernel whose input 1 is a creation-time constant (an initializer), as the session does.
Tensor run_with_const_b(const std::string& op, int64_t opset, std::vector<ir::Attribute> attrs, std::vector<Value> in) {
  ir::Node node;
  node.name = "n";
  node.op_type = op;
  node.attributes = std::move(attrs);
  for (size_t i = 0; i < in.size(); ++i) node.inputs.push_back("in" + std::to_string(i));
  node.outputs = {"y"};
  ep::KernelInfo info(node, opset);
  info.const_inputs_.assign(in.size(), nullptr);
  info.const_inputs_[1] = &in[1].tensor();
  auto k = ops::cpu_provider_registry()->find("", op, opset)->factory(info);
  EXPECT_TRUE(k.ok());
  ep::ThreadPool pool(2);
  ep::StandaloneContext ctx(info, in, pool);
  Status st = k.value()->compute(ctx);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return ctx.output(0).tensor();
}
}  // namespace

TEST(OpsLinalgGemm, ConstantWeightsArePrepacked) {
  std::mt19937 rng(5);
  for (int64_t M : {1, 7, 70}) {
    Tensor a = randf({M, 40}, rng), w = randf({30, 40}, rng), c = randf({30}, rng);
    // Gemm with transB and bias: packed path vs the plain kernel.
    std::vector<ir::Attribute> attrs = {attr_int("transB", 1), attr_float("alpha", 0.5f), attr_float("beta", 2.f)};
    Tensor got = run_with_const_b("Gemm", 13, attrs, {a, w, c});
    Tensor want = run1({"Gemm", "", 13, attrs, {a, w, c}});
    expect_close(got, want);
    // MatMul with batched A against a constant [K, N].
    Tensor a3 = randf({2, M, 30}, rng), w2 = randf({30, 20}, rng);
    expect_close(run_with_const_b("MatMul", 13, {}, {a3, w2}), run1({"MatMul", "", 13, {}, {a3, w2}}));
  }
}

TEST(OpsLinalgErrors, BadShapesAndEquationsAreErrors) {
  std::mt19937 rng(9);
  Tensor a = randf({2, 3}, rng), b = randf({4, 5}, rng);
  EXPECT_FALSE(run_kernel({"Gemm", "", 13, {}, {a, b}}).ok());
  EXPECT_FALSE(run_kernel({"Gemm", "", 13, {}, {a, randf({3, 5}, rng), randf({3, 5}, rng)}}).ok());  // C mismatch
  EXPECT_FALSE(run_kernel({"Gemm", "", 9, {}, {a, randf({3, 5}, rng)}}).ok());  // C required before 11
  for (const char* eq : {"ij,jk->ik,", "ij->k", "ij->ii", "i.j->ij", "ij-jk", "ijk->i", "ij,jk->ik->x", "i$->i"}) {
    EXPECT_FALSE(run_kernel({"Einsum", "", 12, {attr_string("equation", eq)}, {a, randf({3, 4}, rng)}}).ok()) << eq;
  }
  EXPECT_FALSE(run_kernel({"Det", "", 11, {}, {a}}).ok());
  EXPECT_FALSE(run_kernel({"MatMulInteger", "", 10, {}, {a, a}}).ok());  // float operands
}

// MatMul and Gemm pick their GEMM kernels' tier at creation (KernelInfo::isa()): the portable tier
// forced with isa=scalar gives the same products as the CPU's best.
TEST(OpsLinalgMatMul, IsaOverrideKeepsResults) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1.f, 1.f);
  std::vector<float> a(37 * 130), b(130 * 45), c(45);
  for (float& v : a) v = d(rng);
  for (float& v : b) v = d(rng);
  for (float& v : c) v = d(rng);
  for (const char* op : {"MatMul", "Gemm"}) {
    KernelRun run;
    run.op_type = op;
    run.opset = 13;
    run.threads = 2;
    run.inputs = {Tensor::from_vector<float>(DataType::kFloat, {37, 130}, a),
                  Tensor::from_vector<float>(DataType::kFloat, {130, 45}, b)};
    if (std::string(op) == "Gemm") run.inputs.push_back(Tensor::from_vector<float>(DataType::kFloat, {45}, c));
    auto best = run_kernel(run);
    run.overrides = {{"isa", "scalar"}};
    auto scalar = run_kernel(run);
    ASSERT_TRUE(best.ok() && scalar.ok()) << op;
    const Tensor& x = best.value()[0].tensor();
    const Tensor& y = scalar.value()[0].tensor();
    ASSERT_EQ(x.shape(), y.shape());
    for (int64_t i = 0; i < x.numel(); ++i) ASSERT_NEAR(x.data<float>()[i], y.data<float>()[i], 1e-4f) << op << " " << i;
  }
}
