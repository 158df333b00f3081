// Checks that a kernel whose variant holds per-shape state and per-thread scratch (slots of its
// workspace) computes the same with and without that variant, at 1 and 2 threads.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "kernel_test_util.h"

namespace nxrt::testing {

// Runs `base` at 1 and 2 threads, without a variant, with one (its per-thread rows a slot of the
// variant's workspace each), and with one specialized for fewer threads than the pool (the slots then
// come from step scratch): every output equals the 1-thread run without a variant, bit for bit.
inline void expect_variant_paths_equal(const KernelRun& base, bool expect_workspace) {
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
    size_t ws = 0;
    r.variant_workspace_bytes = &ws;
    auto got = run_kernel(r);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    if (c.specialize) {
      EXPECT_EQ(ws > 0, expect_workspace);
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


}  // namespace nxrt::testing
