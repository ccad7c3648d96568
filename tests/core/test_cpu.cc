// label: core
// mona::core::kernel_target(): names a compiled version of the hot core kernels that this
// CPU runs, and follows the MONA_KERNEL_TARGET environment variable. ctest runs this suite
// with the variable unset and set to "baseline" (tests/core/CMakeLists.txt); a bogus name is
// tested by kernel_target_env.cc. MONA_KERNEL_CLONES is defined here exactly when mona_core
// was compiled with the x86-64-v3 and -v4 kernels (tests/core/CMakeLists.txt).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "mona/core/cpu.h"
#include "mona/core/error.h"
#include "mona/core/monotonic.h"

namespace {

const char* kV3 = "x86-64-v3 (AVX2, FMA)";
const char* kV4 = "x86-64-v4 (AVX-512)";

enum class Level { kX86_64_V3, kX86_64_V4 };

// Whether this CPU runs x86-64-v3 or -v4 code (__builtin_cpu_supports takes a literal).
bool cpu_runs(Level level) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return level == Level::kX86_64_V4 ? __builtin_cpu_supports("x86-64-v4") : __builtin_cpu_supports("x86-64-v3");
#else
  (void)level;
  return false;
#endif
}

std::string env_target() {
  const char* v = std::getenv("MONA_KERNEL_TARGET");
  return v ? v : "";
}

// One step of the expected alignment, through the dispatching entry point.
void run_a_kernel() {
  const std::vector<double> p{0.5, 0.5}, prev{1.0, 0.0};
  std::vector<double> alpha(2);
  mona::core::monotonic_alignment_step(p.data(), prev.data(), alpha.data(), 1, 2, nullptr);
  EXPECT_DOUBLE_EQ(alpha[0], 0.5);  // p_0 * q_0 with q_0 = 1: exact in any target
  EXPECT_DOUBLE_EQ(alpha[1], 0.25);
}

}  // namespace

TEST(KernelTarget, NamesAVersionThisCpuRunsAndFollowsTheEnvironment) {
  const std::string wanted = env_target();
  ASSERT_TRUE(wanted.empty() || wanted == "baseline" || wanted == "x86-64-v3" || wanted == "x86-64-v4")
      << "MONA_KERNEL_TARGET=" << wanted << ": kernel_target_env.cc tests bogus names";
  if (wanted == "x86-64-v3" && !cpu_runs(Level::kX86_64_V3)) {
    GTEST_SKIP() << "this CPU cannot run x86-64-v3";
  }
  if (wanted == "x86-64-v4" && !cpu_runs(Level::kX86_64_V4)) {
    GTEST_SKIP() << "this CPU cannot run x86-64-v4";
  }
  const std::string target = mona::core::kernel_target();
  ASSERT_TRUE(target == "baseline" || target == kV3 || target == kV4) << target;
  if (target == kV3) {
    EXPECT_TRUE(cpu_runs(Level::kX86_64_V3)) << "kernels report " << target;
  }
  if (target == kV4) {
    EXPECT_TRUE(cpu_runs(Level::kX86_64_V4)) << "kernels report " << target;
  }
  if (wanted.empty()) {  // the best version this build has and this CPU runs
#if defined(MONA_KERNEL_CLONES)
    const std::string best = cpu_runs(Level::kX86_64_V4)   ? kV4
                             : cpu_runs(Level::kX86_64_V3) ? kV3
                                                           : "baseline";
#else
    const std::string best = "baseline";
#endif
    EXPECT_EQ(target, best);
  }
  if (wanted == "baseline") {
    EXPECT_EQ(target, "baseline");
  }
  if (wanted == "x86-64-v3") {
    EXPECT_EQ(target, kV3);
  }
  if (wanted == "x86-64-v4") {
    EXPECT_EQ(target, kV4);
  }
  run_a_kernel();
}
