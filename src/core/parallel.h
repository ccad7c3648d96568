// Internal: when a kernel call is worth an OpenMP parallel region.
//
// Opening a region costs microseconds, and on a loaded machine threads that spin while
// waiting for a busy core can cost far more; a training step makes hundreds of small
// kernel calls. So kernels go parallel only when a call does enough work: more than one
// batch element and at least kParallelWork elementary operations (about 30 µs of work).
#pragma once

#include <cstdint>

namespace mona::core::detail {

constexpr double kParallelWork = 32768.0;

/// `work`: the number of inner-loop iterations of the whole call (a double, so that
/// products of sizes cannot overflow).
inline bool worth_parallel(int64_t batch, double work) { return batch > 1 && work >= kParallelWork; }

}  // namespace mona::core::detail
