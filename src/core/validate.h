// Internal: value checks shared by the core kernels. Each throws mona::Error naming the
// kernel, the argument, the offending value and its [b, i, j] index.
#pragma once

#include <cmath>
#include <cstdint>

#include "mona/core/grid.h"

namespace mona::core::detail {

/// Checks every valid entry of a [B, U, T] tensor x (padding is not read) with `ok`.
template <class T, class Ok>
void check_values(const char* kernel, const char* name, const T* x, const Grid& g,
                  const char* expected, Ok ok) {
  for (int64_t b = 0; b < g.batch; ++b) {
    const int64_t U = g.U_of(b), Tb = g.T_of(b);
    for (int64_t i = 0; i < U; ++i) {
      const T* row = x + (b * g.out_len + i) * g.in_len;
      // Branch-free so that it vectorises: `ok` must combine its comparisons with & and |,
      // not && and || (a short circuit is control flow, which stops the vectoriser).
      int bad = 0;
#pragma omp simd reduction(| : bad)
      for (int64_t j = 0; j < Tb; ++j) bad |= !ok(row[j]);
      if (!bad) continue;
      for (int64_t j = 0; j < Tb; ++j) {
        if (!ok(row[j])) {
          mona::detail::fail(kernel, ": ", name, ": expected ", expected, ", got ",
                             static_cast<double>(row[j]), " at [", b, ", ", i, ", ", j, "]");
        }
      }
    }
  }
}

/// Every valid entry must be a probability: finite and in [0, 1] (NaN fails).
template <class T>
void check_probabilities(const char* kernel, const char* name, const T* x, const Grid& g) {
  check_values(kernel, name, x, g, "values in [0, 1]",
               [](T v) { return (v >= T(0)) & (v <= T(1)); });
}

/// Every valid entry must be finite.
template <class T>
void check_finite(const char* kernel, const char* name, const T* x, const Grid& g) {
  // v - v is 0 for finite v and NaN for an infinity or a NaN (and NaN == 0 is false).
  check_values(kernel, name, x, g, "finite values", [](T v) { return (v - v) == T(0); });
}

/// Every valid entry must be finite and >= 0 (an alignment: attention mass per entry).
template <class T>
void check_nonnegative(const char* kernel, const char* name, const T* x, const Grid& g) {
  check_values(kernel, name, x, g, "finite values >= 0",
               [](T v) { return (v >= T(0)) & ((v - v) == T(0)); });
}

/// The same grid seen as one row per batch element: [B, 1, T] for [B, T] tensors.
inline Grid rows_grid(int64_t batch, int64_t in_len, const int64_t* in_lens) {
  Grid g;
  g.batch = batch;
  g.out_len = 1;
  g.in_len = in_len;
  g.in_lens = in_lens;
  return g;
}

}  // namespace mona::core::detail
