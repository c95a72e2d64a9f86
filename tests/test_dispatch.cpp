// Runtime dispatch of the SIMD kernels: the best target this CPU supports is chosen by default,
// every target the CPU supports is listed and can be forced (the kernel tests run each one
// against the double path through isa_loop.hpp), and the measured peak runs on the chosen one.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "kernels/kernels.hpp"

namespace mk = marin::kernels;

namespace {
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

TEST(Dispatch, DefaultIsTheBestSupportedTarget) {
  const auto targets = mk::isa_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(mk::isa_name(), targets.front());
  // The portable baseline is always there, last.
  EXPECT_EQ(targets.back(), "scalar");
}

TEST(Dispatch, TargetsFollowTheCpu) {
  __builtin_cpu_init();
  const auto targets = mk::isa_targets();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  EXPECT_EQ(has(targets, "avx2"), avx2);
  EXPECT_EQ(has(targets, "avx512"), avx512);
  const std::string want = avx512 ? "avx512" : avx2 ? "avx2" : "scalar";
  EXPECT_EQ(mk::isa_name(), want);
}

TEST(Dispatch, ForcingSwitchesAndRestores) {
  const std::string best = mk::isa_name();
  for (const std::string& isa : mk::isa_targets()) {
    mk::force_isa(isa);
    EXPECT_EQ(mk::isa_name(), isa);
  }
  mk::force_isa("");
  EXPECT_EQ(mk::isa_name(), best);
  EXPECT_THROW(mk::force_isa("no-such-isa"), marin::Error);
  EXPECT_EQ(mk::isa_name(), best);
}

TEST(Dispatch, PeakLoopRunsOnTheDispatchedWidth) {
  for (const std::string& isa : mk::isa_targets()) {
    mk::force_isa(isa);
    const mk::PeakResult p = mk::measure_fma_peak(1, 0.01);
    const int want = isa == "avx512" ? 16 : isa == "avx2" ? 8 : isa == "scalar" ? 1 : 4;
    EXPECT_EQ(p.lanes, want) << isa;
    EXPECT_EQ(p.threads, 1);
    EXPECT_GT(p.gflops, 0) << isa;
  }
  mk::force_isa("");
}

TEST(Dispatch, Bf16PeakOnlyWhereTheCpuHasIt) {
  const mk::PeakResult p = mk::measure_bf16_peak(1, 0.01);
  EXPECT_EQ(p.gflops > 0, mk::cpu_has_avx512_bf16());
}

