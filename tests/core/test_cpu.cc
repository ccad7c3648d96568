// label: core
// mona::core::kernel_target(): names a compiled version of the core kernels that this CPU
// can run, and the baseline one in sanitizer builds (where the kernels are not cloned).
#include <gtest/gtest.h>

#include <string>

#include "mona/core/cpu.h"

TEST(KernelTarget, NamesAVersionThisCpuCanRun) {
  const std::string target = mona::core::kernel_target();
  ASSERT_TRUE(target == "baseline" || target == "x86-64-v3 (AVX2, FMA)") << target;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (target != "baseline") {
    EXPECT_TRUE(__builtin_cpu_supports("x86-64-v3")) << "kernels report " << target;
  }
#endif
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(target, "baseline") << "sanitizer builds run the baseline kernels";
#endif
}
