// See include/mona/nn/threads.h.
#include "mona/nn/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <omp.h>

#include <cctype>
#include <cstdlib>
#include <mutex>

#include "mona/core/error.h"

namespace mona::nn {
namespace {

// OpenBLAS's setter, looked up at run time: libtorch links libblas.so.3, which Debian's
// alternatives may point at OpenBLAS (this project's install) or at another BLAS.
void keep_blas_on_calling_thread() {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
}

// OpenBLAS's entry points for its kernel family, looked up at run time for the same reason.
// gotoblas_dynamic_init picks a family (OPENBLAS_CORETYPE's when set, else by the CPU's model)
// only while none is set, and gotoblas_dynamic_quit unsets it; both are exported by Debian's
// DYNAMIC_ARCH build, whose load-time initialisation calls the first.
struct OpenBlasKernels {
  const char* (*corename)() = nullptr;
  void (*init)() = nullptr;
  void (*quit)() = nullptr;
  bool found() const { return corename && init && quit; }
};

OpenBlasKernels open_blas_kernels() {
  OpenBlasKernels k;
  k.corename = reinterpret_cast<const char* (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  k.init = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  k.quit = reinterpret_cast<void (*)()>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  return k;
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

}  // namespace

namespace detail {

CpuVectorUnits cpu_vector_units() {
  CpuVectorUnits u;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  u.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  u.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
#endif
  return u;
}

const char* better_blas_kernels(std::string_view picked, CpuVectorUnits cpu) {
  if (!same_name(picked, "Prescott")) return nullptr;
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return nullptr;
}

}  // namespace detail

std::string use_best_blas_kernels() {
  static std::once_flag once;
  const OpenBlasKernels k = open_blas_kernels();
  if (!k.corename) return "";
  std::call_once(once, [&] {
    const char* forced = std::getenv("OPENBLAS_CORETYPE");
    if (!k.found() || (forced != nullptr && *forced != '\0')) return;  // the user's choice stands
    const bool was_set = forced != nullptr;
    const char* better = detail::better_blas_kernels(k.corename(), detail::cpu_vector_units());
    if (better == nullptr) return;
    // OpenBLAS reads its override only while it picks; the environment is left as it was.
    setenv("OPENBLAS_CORETYPE", better, 1);
    k.quit();
    k.init();
    if (was_set) setenv("OPENBLAS_CORETYPE", "", 1);
    else unsetenv("OPENBLAS_CORETYPE");
  });
  return k.corename();
}

void set_threads(int64_t threads) {
  MONA_CHECK(threads >= 1, "set_threads: threads must be >= 1, got ", threads);
  use_best_blas_kernels();
  keep_blas_on_calling_thread();
  at::set_num_threads(static_cast<int>(threads));
}

void run_operators_on_this_thread() {
  // ATen sets a thread's team size to the process-wide count (at::set_num_threads) at the
  // thread's first parallel operator; done first, so that it cannot undo the 1 below.
  at::internal::lazy_init_num_threads();
  omp_set_num_threads(1);
}

}  // namespace mona::nn
