// Internal: when a kernel call is worth an OpenMP parallel region.
//
// Opening a region costs microseconds, and on a loaded machine threads that spin while
// waiting for a busy core can cost far more; a training step makes hundreds of small
// kernel calls. So kernels go parallel only when a call does enough work: more than one
// batch element and at least kParallelWork elementary operations (about 30 µs of work).
#pragma once

#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace mona::core::detail {

constexpr double kParallelWork = 32768.0;

/// `work`: the number of inner-loop iterations of the whole call (a double, so that
/// products of sizes cannot overflow).
inline bool worth_parallel(int64_t batch, double work) { return batch > 1 && work >= kParallelWork; }

/// The threads a parallel region would get (1 without OpenMP), for per-thread scratch.
inline int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/// The calling thread's number inside a parallel region (0 outside one).
inline int thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

}  // namespace mona::core::detail
