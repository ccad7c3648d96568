// Brute-force references for hard monotonic attention (test-only, slow on purpose).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace mona::test {

/// alpha[i][j] = P(t_i = j) for one sequence, by enumerating every path of the hard
/// monotonic process of 002 sec. 2.2: t_{-1} ~ alpha0, and at step i the process stops at
/// entry j >= t_{i-1} with probability p[i][j] * prod_{t_{i-1} <= n < j} (1 - p[i][n]).
/// A path that stops nowhere contributes nothing to later steps. p is [U][T] flattened,
/// alpha0 is [T]; the result is [U][T] flattened.
inline std::vector<double> monotonic_alignment_by_paths(const std::vector<double>& p,
                                                        const std::vector<double>& alpha0,
                                                        int64_t U, int64_t T) {
  std::vector<double> alpha(static_cast<size_t>(U * T), 0.0);
  std::function<void(int64_t, int64_t, double)> walk = [&](int64_t i, int64_t start,
                                                          double weight) {
    if (i == U || weight == 0.0) return;
    double none_yet = 1.0;  // probability that entries start..j-1 were all rejected
    for (int64_t j = start; j < T; ++j) {
      const double stop = weight * none_yet * p[i * T + j];
      alpha[i * T + j] += stop;
      walk(i + 1, j, stop);
      none_yet *= 1.0 - p[i * T + j];
    }
  };
  for (int64_t t0 = 0; t0 < T; ++t0) walk(0, t0, alpha0[t0]);
  return alpha;
}

/// One row of 002 eq. 9 by its direct double sum, in long double:
///   alpha[j] = p[j] * sum_{k <= j} prev[k] * prod_{l=k}^{j-1} (1 - p[l]).
/// O(T^2); an independent formula for long inputs where path enumeration is impossible.
inline std::vector<long double> monotonic_row_by_eq9(const std::vector<double>& p,
                                                     const std::vector<double>& prev) {
  const size_t T = p.size();
  std::vector<long double> alpha(T, 0.0L);
  for (size_t j = 0; j < T; ++j) {
    long double sum = 0.0L;
    for (size_t k = 0; k <= j; ++k) {
      long double prod = prev[k];
      for (size_t l = k; l < j && prod != 0.0L; ++l) prod *= 1.0L - p[l];
      sum += prod;
    }
    alpha[j] = p[j] * sum;
  }
  return alpha;
}

}  // namespace mona::test
