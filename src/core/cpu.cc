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

// Whether this build has the level's kernels and this CPU runs them ("x86-64-v3" or
// "x86-64-v4"; the string must be a literal for __builtin_cpu_supports).
#if defined(MONA_KERNEL_CLONES) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define MONA_CPU_RUNS(level) (__builtin_cpu_init(), __builtin_cpu_supports(level))
#else
#define MONA_CPU_RUNS(level) false  // not compiled (or not x86-64)
#endif

// MONA_KERNEL_TARGET=name for a target this CPU or build cannot run: the error.
[[noreturn]] void refuse(const std::string& wanted, const char* isa) {
  mona::detail::fail(kVariable, "=", wanted, ": this ",
#if defined(MONA_KERNEL_CLONES)
                     "CPU does not support ", wanted, " (", isa, ")",
#else
                     "build has no ", wanted, " kernels (configured with MONA_KERNEL_CLONES=OFF)",
#endif
                     "; use baseline or unset it");
}

KernelTarget choose() {
  const bool v3 = MONA_CPU_RUNS("x86-64-v3"), v4 = MONA_CPU_RUNS("x86-64-v4");
  const char* env = std::getenv(kVariable);
  const std::string wanted = env ? env : "";
  if (wanted.empty()) return v4 ? KernelTarget::kV4 : v3 ? KernelTarget::kV3 : KernelTarget::kBaseline;
  if (wanted == "baseline") return KernelTarget::kBaseline;
  if (wanted == "x86-64-v3") {
    if (!v3) refuse(wanted, "AVX2, FMA");
    return KernelTarget::kV3;
  }
  if (wanted == "x86-64-v4") {
    if (!v4) refuse(wanted, "AVX-512");
    return KernelTarget::kV4;
  }
  mona::detail::fail(kVariable, ": expected \"baseline\", \"x86-64-v3\" or \"x86-64-v4\" (or unset), got \"",
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
  switch (detail::active_kernel_target()) {
    case detail::KernelTarget::kV4: return "x86-64-v4 (AVX-512)";
    case detail::KernelTarget::kV3: return "x86-64-v3 (AVX2, FMA)";
    case detail::KernelTarget::kBaseline: break;
  }
  return "baseline";
}

}  // namespace mona::core
