// Fault injection (src/ir/alloc_faults.h): for every n, make the n-th Storage allocation of a
// session's creation, of its first run, or of a generator's prefill and decode step fail, and check
// that each ends in an error Status that says so, that nothing crashes or leaks (the ASan build runs
// these too, with leak detection), and that a run after a failed one gives the reference outputs.
//
// Models: the toy CNN (tools/make_toy_cnn.py, written into a temp folder), a light model from
// ../shared/models/light (skipped when absent), and the tiny genai decoders ctest writes
// (NXRT_TEST_GENAI_DIR). NXRT_FAULT_SWEEP_STRIDE=k tries every k-th n only (default 1: all of them).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ir/alloc_faults.h"
#include "ir/allocation.h"
#include "nxrt/genai.h"
#include "nxrt/session.h"

namespace fs = std::filesystem;
using namespace nxrt;

namespace {

#define EXPECT_HAS(haystack, needle) EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

constexpr const char* kInjected = "injected allocation failure";

uint64_t stride() {
  const char* s = std::getenv("NXRT_FAULT_SWEEP_STRIDE");
  const long v = s ? std::strtol(s, nullptr, 10) : 1;
  return v > 0 ? static_cast<uint64_t>(v) : 1;
}

// Disarms the hook however the test leaves the scope.
struct Disarm {
  ~Disarm() { fault_injection::inject_allocation_failure(0); }
};

// Runs `attempt` with the n-th allocation failing, for n = 1, 1 + stride, ... until an attempt
// finishes without reaching the n-th allocation. `attempt` returns the status of the work; each one
// that hit the fault must fail with a message naming it. Returns the allocations swept past (the
// work's allocation count, rounded up to the stride) and how many failures were checked.
struct Sweep {
  uint64_t allocations = 0;
  uint64_t faults = 0;
};

template <typename Attempt, typename AfterFault>
Sweep sweep(Attempt&& attempt, AfterFault&& after_fault) {
  Disarm disarm;
  Sweep out;
  for (uint64_t n = 1;; n += stride()) {
    fault_injection::inject_allocation_failure(n);
    Status st = attempt();
    const bool fired = fault_injection::injected_allocation_failure_fired();
    fault_injection::inject_allocation_failure(0);
    if (!fired) {
      EXPECT_TRUE(st.ok()) << "n=" << n << ": " << st.message();
      out.allocations = n - 1;
      return out;
    }
    ++out.faults;
    EXPECT_FALSE(st.ok()) << "allocation " << n << " failed but the call succeeded";
    EXPECT_HAS(st.message(), kInjected);
    after_fault();
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "stopping the sweep at n=" << n;
      return out;
    }
  }
}

struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("nxrt_faults_" + std::to_string(::getpid()));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The model's one data input: the first without a default (older models list their weights as
// inputs too).
const ValueMeta& data_input(const Session& s) {
  for (const ValueMeta& m : s.inputs()) {
    if (!m.has_default) return m;
  }
  return s.inputs()[0];
}

Result<Value> read_input(const std::string& dir, const Session& s) {
  return read_value_file(dir + "/test_data_set_0/input_0.pb", &data_input(s));
}

bool same_values(const std::vector<Value>& a, const std::vector<Value>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const Tensor &x = a[i].tensor(), &y = b[i].tensor();
    if (x.dtype() != y.dtype() || x.shape() != y.shape() || x.nbytes() != y.nbytes()) return false;
    if (std::memcmp(x.raw_data(), y.raw_data(), x.nbytes()) != 0) return false;
  }
  return true;
}

// Creation and first run of the model in `dir` (model.onnx + test_data_set_0/input_0.pb), with every
// allocation failing in turn.
void sweep_model(const std::string& dir) {
  SessionOptions opts;
  opts.threads = 1;  // one thread: the n-th allocation is the same one every time
  const std::string model = dir + "/model.onnx";
  auto ref_session = Session::create(model, opts);
  ASSERT_TRUE(ref_session.ok()) << ref_session.status().message();
  auto input = read_input(dir, **ref_session);
  ASSERT_TRUE(input.ok()) << input.status().message();
  const std::vector<std::pair<std::string, Value>> feeds = {{data_input(**ref_session).name, *input}};
  auto reference = (*ref_session)->run(feeds);
  ASSERT_TRUE(reference.ok()) << reference.status().message();

  const Sweep created = sweep([&]() -> Status { return Session::create(model, opts).status(); }, [] {});
  // The run: a fresh session each time (created before arming), the failure injected into its run.
  Sweep run_sweep;
  {
    Disarm disarm;
    for (uint64_t n = 1;; n += stride()) {
      auto s = Session::create(model, opts);
      ASSERT_TRUE(s.ok()) << s.status().message();
      fault_injection::inject_allocation_failure(n);
      auto out = (*s)->run(feeds);
      const bool fired = fault_injection::injected_allocation_failure_fired();
      fault_injection::inject_allocation_failure(0);
      if (!fired) {
        ASSERT_TRUE(out.ok()) << out.status().message();
        EXPECT_TRUE(same_values(*out, *reference));
        run_sweep.allocations = n - 1;
        break;
      }
      ++run_sweep.faults;
      ASSERT_FALSE(out.ok()) << "allocation " << n << " of the run failed but the run succeeded";
      EXPECT_HAS(out.status().message(), kInjected);
      // The session survives its failed run: the next run gives the reference outputs.
      auto again = (*s)->run(feeds);
      ASSERT_TRUE(again.ok()) << "after the fault at n=" << n << ": " << again.status().message();
      ASSERT_TRUE(same_values(*again, *reference)) << "after the fault at n=" << n;
    }
  }
  std::printf("%s: session creation %llu allocations (%llu faults checked), first run %llu allocations "
              "(%llu faults checked)\n",
              dir.c_str(), static_cast<unsigned long long>(created.allocations),
              static_cast<unsigned long long>(created.faults), static_cast<unsigned long long>(run_sweep.allocations),
              static_cast<unsigned long long>(run_sweep.faults));
  EXPECT_GT(created.faults, 0u);
  EXPECT_GT(run_sweep.faults, 0u);
}

}  // namespace

TEST(FaultInjection, HookFailsExactlyTheNthAllocation) {
  Disarm disarm;
  fault_injection::inject_allocation_failure(3);
  Tensor a(DataType::kFloat, {4}), b(DataType::kFloat, {4});
  EXPECT_FALSE(fault_injection::injected_allocation_failure_fired());
  try {
    Tensor c(DataType::kString, {2});
    ADD_FAILURE() << "the third allocation did not fail";
  } catch (const AllocationError& e) {
    EXPECT_HAS(std::string(e.what()), "injected allocation failure (a test) of ");
  }
  EXPECT_TRUE(fault_injection::injected_allocation_failure_fired());
  Tensor d(DataType::kFloat, {4});  // fires once only
  fault_injection::inject_allocation_failure(0);
  EXPECT_FALSE(fault_injection::injected_allocation_failure_fired());
}

TEST(FaultInjection, ToyCnnCreationAndRun) {
  TempDir dir;
  const std::string cmd = "/usr/bin/python3 " NXRT_SOURCE_DIR "/tools/make_toy_cnn.py " + (dir.path / "cnn").string() +
                          " >/dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "could not write the toy CNN (python3 with numpy and onnx)";
  sweep_model((dir.path / "cnn").string());
}

TEST(FaultInjection, LightSqueezenetCreationAndRun) {
  const std::string dir = NXRT_SOURCE_DIR "/../shared/models/light/light_squeezenet";
  if (!fs::exists(dir + "/model.onnx")) GTEST_SKIP() << dir << " not found";
  sweep_model(dir);
}

TEST(FaultInjection, GenaiPrefillAndDecodeStep) {
  const char* root = std::getenv("NXRT_TEST_GENAI_DIR");
  if (!root) GTEST_SKIP() << "NXRT_TEST_GENAI_DIR unset (ctest sets it after writing the tiny models)";
  for (const char* style : {"genai", "onnx"}) {
    SCOPED_TRACE(style);
    genai::ModelOptions mo;
    mo.session.threads = 1;
    auto model = genai::Model::create(std::string(root) + "/" + style, mo);
    ASSERT_TRUE(model.ok()) << model.status().message();
    genai::GeneratorParams params(**model);
    params.search.max_length = 32;
    const std::vector<int64_t> prompt = {5, 17, 3, 99, 42};
    // Reference: the prompt, then two tokens.
    std::vector<int64_t> reference;
    {
      auto g = genai::Generator::create(**model, params);
      ASSERT_TRUE(g.ok()) << g.status().message();
      ASSERT_TRUE((*g)->append_tokens(prompt).ok());
      for (int i = 0; i < 2; ++i) {
        ASSERT_TRUE((*g)->generate_next_token().ok());
        reference.push_back((*g)->next_token());
      }
    }
    // Generator creation, prefill and one decode step, each allocation failing in turn. The model's
    // session is shared by every generator: after each fault a new generator must still give the
    // reference tokens.
    const Sweep s = sweep(
        [&]() -> Status {
          auto g = genai::Generator::create(**model, params);
          if (!g.ok()) return g.status();
          NXRT_RETURN_IF_ERROR((*g)->append_tokens(prompt));
          NXRT_RETURN_IF_ERROR((*g)->generate_next_token());
          return (*g)->generate_next_token();
        },
        [&] {
          auto g = genai::Generator::create(**model, params);
          ASSERT_TRUE(g.ok()) << g.status().message();
          ASSERT_TRUE((*g)->append_tokens(prompt).ok());
          std::vector<int64_t> got;
          for (int i = 0; i < 2; ++i) {
            ASSERT_TRUE((*g)->generate_next_token().ok());
            got.push_back((*g)->next_token());
          }
          EXPECT_EQ(got, reference);
        });
    std::printf("genai %s: generator creation + prefill + decode step: %llu allocations (%llu faults checked)\n",
                style, static_cast<unsigned long long>(s.allocations), static_cast<unsigned long long>(s.faults));
    EXPECT_GT(s.faults, 0u);
  }
}
