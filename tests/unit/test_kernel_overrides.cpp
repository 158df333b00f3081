// Kernel overrides (ep/kernel_overrides.h): parsing and validation, the ISA cap, and that a session
// refuses an unknown key instead of silently running the default path.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ep/cpu_features.h"
#include "ep/kernel_overrides.h"
#include "nxrt/session.h"

namespace nxrt {
namespace {

TEST(KernelOverrides, ParsesKnownKeysAndRejectsUnknownOnes) {
  auto ok = ep::KernelOverrides::parse({{"reference", "1"}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_TRUE(ok->reference());
  EXPECT_EQ(ok->get("reference"), "1");
  EXPECT_EQ(ok->get("isa"), "");

  auto unknown = ep::KernelOverrides::parse({{"referense", "1"}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("unknown kernel override 'referense'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("known: reference"), std::string::npos);

  auto bad_value = ep::KernelOverrides::parse({{"isa", "sse9"}});
  ASSERT_FALSE(bad_value.ok());
  EXPECT_NE(bad_value.status().message().find("scalar|avx2|avx512|amx"), std::string::npos);
}

TEST(KernelOverrides, IsaCapNeverExceedsTheCpu) {
  const ep::IsaTier cpu = ep::cpu_isa_tier();
  EXPECT_EQ(ep::default_kernel_overrides().isa(), cpu);
  for (const char* t : {"scalar", "avx2", "avx512", "amx"}) {
    auto o = ep::KernelOverrides::parse({{"isa", t}});
    ASSERT_TRUE(o.ok());
    EXPECT_EQ(o->isa(), std::min(*ep::parse_isa_tier(t), cpu)) << t;
  }
  EXPECT_STREQ(ep::isa_tier_name(ep::IsaTier::kAvx512), "avx512");
  EXPECT_FALSE(ep::parse_isa_tier("avx").has_value());
  EXPECT_NE(ep::cpu_description().find(std::string("tier ") + ep::isa_tier_name(cpu)), std::string::npos);
}

TEST(KernelOverrides, EnvironmentAndOptionsMerge) {
  ::setenv("NXRT_KERNEL_OVERRIDES", "reference=1", 1);
  ::setenv("NXRT_ISA", "scalar", 1);
  auto o = ep::KernelOverrides::from_options_and_env({{"reference", "0"}});
  ::unsetenv("NXRT_KERNEL_OVERRIDES");
  ::unsetenv("NXRT_ISA");
  ASSERT_TRUE(o.ok()) << o.status().message();
  EXPECT_FALSE(o->reference());  // the options win
  EXPECT_EQ(o->isa(), ep::IsaTier::kScalar);

  ::setenv("NXRT_KERNEL_OVERRIDES", "reference", 1);
  auto broken = ep::KernelOverrides::from_options_and_env({});
  ::unsetenv("NXRT_KERNEL_OVERRIDES");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("is not key=value"), std::string::npos);
}

TEST(KernelOverrides, SessionRefusesAnUnknownKey) {
  // Creation fails on the overrides, before the (missing) model file is read.
  SessionOptions opts;
  opts.kernel_overrides = {{"no_such_key", "1"}};
  auto s = Session::create("does-not-matter.onnx", opts);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("unknown kernel override 'no_such_key'"), std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace nxrt
