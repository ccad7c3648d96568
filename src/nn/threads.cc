// See include/mona/nn/threads.h.
#include "mona/nn/threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <omp.h>

#include "mona/core/error.h"

namespace mona::nn {
namespace {

// OpenBLAS's setter, looked up at run time: libtorch links libblas.so.3, which Debian's
// alternatives may point at OpenBLAS (this project's install) or at another BLAS.
void keep_blas_on_calling_thread() {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(1);
}

}  // namespace

void set_threads(int64_t threads) {
  MONA_CHECK(threads >= 1, "set_threads: threads must be >= 1, got ", threads);
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
