// Internal: when a kernel call is worth an OpenMP parallel region.
//
// Opening a region costs microseconds, and on a loaded machine threads that spin while
// waiting for a busy core can cost far more; a training step makes hundreds of small
// kernel calls. So kernels go parallel only when a call does enough work: more than one
// batch element and at least kParallelWork elementary operations (about 30 µs of work).
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

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

/// The number of threads of the innermost enclosing parallel region (1 outside one): a
/// region can get fewer threads than it asked for (nested inside another, or a limit).
inline int team_size() {
#ifdef _OPENMP
  return omp_get_num_threads();
#else
  return 1;
#endif
}

/// Rows of doubles that one thread of a parallel region hands to another, in order: the
/// sender fills `slot(n)` and calls `publish(n)`; `receive(n)` waits until row n is published
/// and returns it. Rows must be published in the order 0, 1, 2, ...; each is written once.
/// The receiver spins for a while and then yields its core, so that a sender that shares the
/// core (more threads than cores) still makes progress.
class RowChannel {
 public:
  RowChannel(int64_t rows, int64_t width)
      : width_(width), values_(static_cast<size_t>(rows * width)) {}
  double* slot(int64_t n) { return values_.data() + n * width_; }
  void publish(int64_t n) { published_.store(n + 1, std::memory_order_release); }
  const double* receive(int64_t n) const {
    for (int spins = 0; published_.load(std::memory_order_acquire) <= n; ++spins) {
      if (spins >= kSpins) {
        std::this_thread::yield();
      } else {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
      }
    }
    return values_.data() + n * width_;
  }

 private:
  static constexpr int kSpins = 1024;  // pause is 10-140 cycles by CPU: about 5-50 us
  int64_t width_;
  std::vector<double> values_;
  alignas(64) std::atomic<int64_t> published_{0};  // on its own cache line
};

}  // namespace mona::core::detail
