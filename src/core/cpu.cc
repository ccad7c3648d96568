// See include/mona/core/cpu.h and src/core/targets.h.
#include "mona/core/cpu.h"

#include <cstdlib>
#include <string>

#include "mona/core/error.h"
#include "targets.h"

namespace mona::core {
namespace detail {
namespace {

constexpr const char* kVariable = "MONA_KERNEL_TARGET";

bool cpu_runs_v3() {
#if defined(MONA_KERNEL_CLONES) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  return __builtin_cpu_supports("x86-64-v3");
#else
  return false;  // not compiled (or not x86-64)
#endif
}

KernelTarget choose() {
  const bool v3 = cpu_runs_v3();
  const char* env = std::getenv(kVariable);
  const std::string wanted = env ? env : "";
  if (wanted.empty()) return v3 ? KernelTarget::kV3 : KernelTarget::kBaseline;
  if (wanted == "baseline") return KernelTarget::kBaseline;
  if (wanted == "x86-64-v3") {
    mona::detail::check(v3, kVariable, "=x86-64-v3: this ",
#if defined(MONA_KERNEL_CLONES)
                        "CPU does not support x86-64-v3 (AVX2, FMA)",
#else
                        "build has no x86-64-v3 kernels (configured with MONA_KERNEL_CLONES=OFF)",
#endif
                        "; use baseline or unset it");
    return KernelTarget::kV3;
  }
  mona::detail::fail(kVariable, ": expected \"baseline\" or \"x86-64-v3\" (or unset), got \"",
                     wanted, "\"");
}

}  // namespace

KernelTarget active_kernel_target() {
  // Decided at the first call; an invalid MONA_KERNEL_TARGET throws at every call (a
  // function-local static whose initialiser throws is initialised again next time).
  static const KernelTarget target = choose();
  return target;
}

}  // namespace detail

const char* kernel_target() {
  return detail::active_kernel_target() == detail::KernelTarget::kV3 ? "x86-64-v3 (AVX2, FMA)"
                                                                     : "baseline";
}

}  // namespace mona::core
