// Checks that a kernel whose variant holds per-shape state and per-thread scratch (slots of its
// workspace) computes the same with and without that variant, at 1 and 2 threads.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ir/tensor_util.h"
#include "nxrt/float_types.h"

#include "kernel_test_util.h"

namespace nxrt::testing {

// Runs `base` at 1 and 2 threads, without a variant, with one, and with one specialized for fewer
// threads than the pool: every output equals the 1-thread run without a variant, bit for bit.
// `expect_scratch`: whether compute uses scratch, a variant's workspace or thread slots (per-thread
// rows), in the runs with a variant.
inline void expect_variant_paths_equal(const KernelRun& base, bool expect_scratch) {
  KernelRun ref_run = base;
  ref_run.threads = 1;
  auto ref = run_kernel(ref_run);
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  struct Case { int threads; bool specialize; int specialize_threads; };
  for (const Case c : {Case{1, false, 0}, Case{2, false, 0}, Case{1, true, 0}, Case{2, true, 0}, Case{2, true, 1}}) {
    SCOPED_TRACE("threads " + std::to_string(c.threads) + " specialize " + std::to_string(c.specialize) + "/" +
                 std::to_string(c.specialize_threads));
    KernelRun r = base;
    r.threads = c.threads;
    r.specialize = c.specialize;
    r.specialize_threads = c.specialize_threads;
    size_t ws = 0, slot_bytes = 0;
    r.variant_workspace_bytes = &ws;
    r.thread_slot_bytes = &slot_bytes;
    auto got = run_kernel(r);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    if (c.specialize) {
      EXPECT_EQ(ws > 0 || slot_bytes > 0, expect_scratch);
    }
    ASSERT_EQ(got->size(), ref->size());
    for (size_t o = 0; o < ref->size(); ++o) {
      if (!(*ref)[o].is_tensor()) continue;
      const Tensor& a = (*ref)[o].tensor();
      const Tensor& b = (*got)[o].tensor();
      ASSERT_EQ(a.shape(), b.shape());
      ASSERT_EQ(a.dtype(), b.dtype());
      EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << "output " << o;
    }
  }
}


// What one compute produced, for kernels run on their own context (attention: bound outputs, counted
// workspace requests): the outputs (cloned), the ctx.workspace requests, the variant's workspace size.
struct VariantOutcome {
  std::vector<Tensor> outs;
  int workspace_calls = 0;
  size_t variant_bytes = 0;
};

inline void expect_outcome_bits_equal(const VariantOutcome& want, const VariantOutcome& got, const std::string& what) {
  ASSERT_EQ(want.outs.size(), got.outs.size()) << what;
  for (size_t o = 0; o < want.outs.size(); ++o) {
    const Tensor& a = want.outs[o];
    const Tensor& b = got.outs[o];
    ASSERT_EQ(a.dtype(), b.dtype()) << what << " output " << o;
    ASSERT_EQ(a.shape(), b.shape()) << what << " output " << o;
    if (!a.defined()) continue;
    EXPECT_EQ(std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()), 0) << what << " output " << o;
  }
}

// run(threads, specialize_threads) computes once on a pool of `threads`, without a variant
// (specialize_threads 0) or with one made for specialize_threads. The run without a variant at 1 thread
// (which must take its scratch from ctx.workspace) against: no variant at 2 threads, a variant at 1 and
// 2 threads, and a variant made for 1 thread run on 2 (a pool wider than the plan). Every output bit for
// bit; a variant declares a workspace, and with one made for at least the pool's threads compute asks
// ctx.workspace for nothing (a wider pool may take its own scratch).
template <typename Run>
void expect_variant_outcomes_match(const std::string& what, Run&& run) {
  const VariantOutcome ref = run(1, 0);
  ASSERT_FALSE(ref.outs.empty());
  EXPECT_GT(ref.workspace_calls, 0) << "a call without a variant takes its plan's scratch from ctx.workspace";
  struct Case { int threads, specialize_threads; };
  for (const Case r : {Case{2, 0}, Case{1, 1}, Case{2, 2}, Case{2, 1}}) {
    const std::string label = what + " threads " + std::to_string(r.threads) + " variant for " +
                              std::to_string(r.specialize_threads);
    const VariantOutcome got = run(r.threads, r.specialize_threads);
    expect_outcome_bits_equal(ref, got, label);
    if (r.specialize_threads > 0) {
      EXPECT_GT(got.variant_bytes, 0u) << label;
      if (r.specialize_threads >= r.threads) {
        EXPECT_EQ(got.workspace_calls, 0) << label << ": ctx.workspace asked";
      }
    }
  }
}

// Tensors of `shape` holding v as float32, float16 or float64.
// Random attention inputs: standard-normal floats, int32 values (lengths, positions), and a float
// tensor converted to another float dtype with ir::store_floats' rounding (itself when dt is float).
inline Tensor normal_tensor(std::mt19937& rng, Dims shape) {
  Tensor t(DataType::kFloat, shape);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = d(rng);
  return t;
}
inline Tensor i32_tensor(Dims shape, std::vector<int32_t> v) { return Tensor::from_vector(DataType::kInt32, shape, v); }
inline Tensor float_tensor_as(const Tensor& t, DataType dt) {
  if (dt == DataType::kFloat) return t;
  Tensor h(dt, t.shape());
  EXPECT_TRUE(ir::store_floats(t.data<float>(), t.numel(), dt, h.raw_data()).ok());
  return h;
}
inline Tensor f32_tensor(const Dims& shape, const std::vector<float>& v) {
  return Tensor::from_vector<float>(DataType::kFloat, shape, v);
}
inline Tensor f16_tensor(const Dims& shape, const std::vector<float>& v) {
  std::vector<Float16> h;
  for (float f : v) h.push_back(Float16(f));
  return Tensor::from_vector<Float16>(DataType::kFloat16, shape, h);
}
inline Tensor f64_tensor(const Dims& shape, const std::vector<float>& v) {
  return Tensor::from_vector<double>(DataType::kDouble, shape, std::vector<double>(v.begin(), v.end()));
}

}  // namespace nxrt::testing
