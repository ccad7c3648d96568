// See include/mona/core/cpu.h.
#include "mona/core/cpu.h"

#include "targets.h"

namespace mona::core {

const char* kernel_target() {
#if MONA_KERNEL_TARGETS_ENABLED
  // The same test the ifunc resolvers of the cloned kernels make.
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v3")) return "x86-64-v3 (AVX2, FMA)";
#endif
  return "baseline";
}

}  // namespace mona::core
