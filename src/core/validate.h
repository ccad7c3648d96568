// Internal: the argument checks shared by the core kernels, each throwing mona::ArgumentError
// naming the kernel, the argument, and for values the offending value and its index in the
// tensor's own rank; and fill_zero, how the kernels clear outputs.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "mona/core/error.h"
#include "mona/core/grid.h"

namespace mona::core::detail {

/// Throws "<kernel>: <name> must not be null" for a null pointer.
inline void check_ptr(const void* ptr, const char* kernel, const char* name) {
  mona::detail::check(ptr != nullptr, kernel, ": ", name, " must not be null");
}

/// Throws "<kernel>: sizes must be >= 0, got batch = .., out_len = .., in_len = .., dim = .."
/// when a size of a [B, U, T] grid over d-dimensional vectors is negative.
inline void check_sizes(const char* kernel, int64_t batch, int64_t out_len, int64_t in_len,
                        int64_t dim) {
  mona::detail::check(batch >= 0 && out_len >= 0 && in_len >= 0 && dim >= 0, kernel,
                      ": sizes must be >= 0, got batch = ", batch, ", out_len = ", out_len,
                      ", in_len = ", in_len, ", dim = ", dim);
}

/// Sets x[0, n) to zero (nothing for n <= 0).
template <class T>
void fill_zero(T* x, int64_t n) {
  if (n > 0) std::fill(x, x + n, T(0));
}

/// A grid with the rank of the tensor it describes, so that an error names an entry with
/// as many indices as the tensor has: [b, i, j] for [B, U, T] (any Grid), [b, j] for
/// [B, T] (rows_grid), [j] for [B] (vector_grid).
struct ValueGrid : Grid {
  /// Implicit: a plain Grid describes a [B, U, T] tensor.
  ValueGrid(const Grid& g, int rank_ = 3) : Grid(g), rank(rank_) {}
  int rank;
};

/// Checks every valid entry of the tensor x that `g` describes (padding is not read) with
/// `ok`; the error gives the first entry that fails, as a value of its own type.
template <class T, class Ok>
void check_values(const char* kernel, const char* name, const T* x, const ValueGrid& g,
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
        if (ok(row[j])) continue;
        std::ostringstream at;
        if (g.rank == 3) at << "[" << b << ", " << i << ", " << j << "]";
        if (g.rank == 2) at << "[" << b << ", " << j << "]";
        if (g.rank == 1) at << "[" << j << "]";
        mona::detail::fail(kernel, ": ", name, ": expected ", expected, ", got ", row[j],
                           " at ", at.str());
      }
    }
  }
}

/// Every valid entry must be a probability: finite and in [0, 1] (NaN fails).
template <class T>
void check_probabilities(const char* kernel, const char* name, const T* x, const ValueGrid& g) {
  check_values(kernel, name, x, g, "values in [0, 1]",
               [](T v) { return (v >= T(0)) & (v <= T(1)); });
}

/// Every valid entry must be finite.
template <class T>
void check_finite(const char* kernel, const char* name, const T* x, const ValueGrid& g) {
  // v - v is 0 for finite v and NaN for an infinity or a NaN (and NaN == 0 is false).
  check_values(kernel, name, x, g, "finite values", [](T v) { return (v - v) == T(0); });
}

/// Every valid entry must be finite and >= 0 (an alignment: attention mass per entry).
template <class T>
void check_nonnegative(const char* kernel, const char* name, const T* x, const ValueGrid& g) {
  check_values(kernel, name, x, g, "finite values >= 0",
               [](T v) { return (v >= T(0)) & ((v - v) == T(0)); });
}

/// For kernels that check their values as they read them and, when a check fails, run the
/// full checks above to name the entry: reached only if those found nothing, which would
/// be a bug in mona. `what` says which check failed.
[[noreturn]] inline void internal_check_failed(
    const char* kernel,
    const char* what = "a value check failed while reading the inputs, but not when they were checked again") {
  mona::detail::fail(kernel, ": internal error: ", what);
}

/// A [B, T] tensor seen as a grid of one row per batch element ([B, 1, T]), rank 2.
/// Keep the result as a ValueGrid (auto), not a Grid, or errors name [b, 0, j].
inline ValueGrid rows_grid(int64_t batch, int64_t in_len, const int64_t* in_lens) {
  Grid g;
  g.batch = batch;
  g.out_len = 1;
  g.in_len = in_len;
  g.in_lens = in_lens;
  return ValueGrid(g, 2);
}

/// A [n] vector (one value per batch element, say) as a grid [1, 1, n], rank 1.
inline ValueGrid vector_grid(int64_t n) {
  Grid g;
  g.batch = 1;
  g.out_len = 1;
  g.in_len = n;
  return ValueGrid(g, 1);
}

}  // namespace mona::core::detail
