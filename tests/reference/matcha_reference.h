// Slow, obvious references for MAtChA (000 App. C), test-only:
//   * matcha_brute_row:      000 eq. 28 as written, a direct triple sum with exp(u) formed
//                            on its own (moderate energies only), O(n^4).
//   * matcha_logspace_row:   the same sum with each softmax weight exp(u[j] - logsumexp)
//                            in long double; exact for energies of any magnitude.
//   * matcha_brute:          matcha_brute_row over every valid row of a [B, U, T] grid.
//   * matcha_process_expectation: enumerates every hard monotonic path (t_{-1} = 0, t_0,
//                            t_1, ...) of one sequence and averages the test-time chunk
//                            softmax over [t_{i-1}, t_i] (000 eq. 27) weighted by the path
//                            probability; no recurrence, no expected alignment.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "mona/core/grid.h"

namespace mona::test {

/// 000 eq. 28 for one row of n = a.size() entries (0-based), by the direct triple sum.
inline std::vector<double> matcha_brute_row(const std::vector<double>& a,
                                            const std::vector<double>& p,
                                            const std::vector<double>& u) {
  const size_t n = a.size();
  std::vector<double> beta(n, 0.0);
  for (size_t j = 0; j < n; ++j) {
    for (size_t k = 0; k <= j; ++k) {
      for (size_t l = j; l < n; ++l) {
        double S = 0.0;
        for (size_t m = k; m <= l; ++m) S += std::exp(u[m]);
        double keep = 1.0;
        for (size_t o = k; o < l; ++o) keep *= 1.0 - p[o];
        beta[j] += std::exp(u[j]) / S * a[k] * p[l] * keep;
      }
    }
  }
  return beta;
}

/// 000 eq. 28 for one row with softmax weights exp(u[j] - logsumexp(u[k..l])) computed in
/// long double with the max shift: exact for energies such as +-1e4.
inline std::vector<long double> matcha_logspace_row(const std::vector<double>& a,
                                                    const std::vector<double>& p,
                                                    const std::vector<double>& u) {
  const size_t n = a.size();
  std::vector<long double> beta(n, 0.0L);
  for (size_t k = 0; k < n; ++k) {
    for (size_t l = k; l < n; ++l) {
      long double keep = 1.0L;
      for (size_t o = k; o < l; ++o) keep *= 1.0L - p[o];
      const long double w = static_cast<long double>(a[k]) * p[l] * keep;
      long double mx = u[k];
      for (size_t m = k; m <= l; ++m) mx = std::max<long double>(mx, u[m]);
      long double z = 0.0L;
      for (size_t m = k; m <= l; ++m) z += std::exp(static_cast<long double>(u[m]) - mx);
      const long double lse = mx + std::log(z);
      for (size_t j = k; j <= l; ++j) {
        beta[j] += w * std::exp(static_cast<long double>(u[j]) - lse);
      }
    }
  }
  return beta;
}

/// matcha_brute_row over every valid row of a [B, U, T] grid; padding is 0.
inline std::vector<double> matcha_brute(const std::vector<double>& alpha_prev,
                                        const std::vector<double>& p,
                                        const std::vector<double>& u,
                                        const core::Grid& g) {
  std::vector<double> beta(static_cast<size_t>(g.numel()), 0.0);
  for (int64_t b = 0; b < g.batch; ++b) {
    for (int64_t i = 0; i < g.U_of(b); ++i) {
      const size_t off = static_cast<size_t>((b * g.out_len + i) * g.in_len);
      const size_t n = static_cast<size_t>(g.T_of(b));
      auto row = [&](const std::vector<double>& v) {
        return std::vector<double>(v.begin() + off, v.begin() + off + n);
      };
      const std::vector<double> r = matcha_brute_row(row(alpha_prev), row(p), row(u));
      std::copy(r.begin(), r.end(), beta.begin() + off);
    }
  }
  return beta;
}

/// Expected MAtChA attention of one sequence by enumerating the hard monotonic process:
/// with t_{-1} = 0, step i scans j = t_{i-1}, t_{i-1} + 1, ... and stops at j with
/// probability p[i][j]; if it stops at t_i it attends with softmax(u[i][t_{i-1} .. t_i])
/// (000 eq. 27); if it runs off the end it attends to nothing and so do all later steps.
/// p and u are [U, T] row-major; returns beta [U, T].
inline std::vector<double> matcha_process_expectation(const std::vector<double>& p,
                                                      const std::vector<double>& u,
                                                      int64_t U, int64_t T) {
  std::vector<double> beta(static_cast<size_t>(U * T), 0.0);
  std::function<void(int64_t, int64_t, double)> walk = [&](int64_t i, int64_t prev,
                                                           double prob) {
    if (i == U) return;
    const double* pi = p.data() + i * T;
    const double* ui = u.data() + i * T;
    double scan = prob;  // probability of reaching entry t without having stopped
    for (int64_t t = prev; t < T; ++t) {
      const double stop = scan * pi[t];
      scan *= 1.0 - pi[t];
      if (stop == 0.0) continue;
      double z = 0.0;
      for (int64_t m = prev; m <= t; ++m) z += std::exp(ui[m]);
      for (int64_t j = prev; j <= t; ++j) beta[i * T + j] += stop * std::exp(ui[j]) / z;
      walk(i + 1, t, stop);
    }
  };
  walk(0, 0, 1.0);
  return beta;
}

}  // namespace mona::test
