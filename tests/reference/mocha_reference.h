// Brute-force references for MoChA's chunkwise attention (000 eqs. 14-17). Test-only:
// slow, obvious loops in double, with the naive exp / sum normaliser of the paper (valid
// only for moderate energies). Shapes and padding as in mona/core/grid.h; padding entries
// of the results are 0.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace mona::test {

/// One row, 000 eq. 17 written out literally (0-based, n valid entries):
///   beta[j] = sum_{k=j}^{j+w-1, k<n} alpha[k] * exp(u[j]) / sum_{l=max(0,k-w+1)}^{k} exp(u[l])
inline std::vector<double> mocha_reference_row(const std::vector<double>& alpha,
                                               const std::vector<double>& u, int64_t n,
                                               int64_t w) {
  std::vector<double> beta(alpha.size(), 0.0);
  for (int64_t j = 0; j < n; ++j) {
    double sum = 0;
    for (int64_t k = j; k <= j + w - 1 && k < n; ++k) {
      double denom = 0;
      for (int64_t l = std::max<int64_t>(0, k - w + 1); l <= k; ++l) denom += std::exp(u[l]);
      sum += alpha[k] * std::exp(u[j]) / denom;
    }
    beta[j] = sum;
  }
  return beta;
}

/// The same distribution seen from the hard process: the stopping point t has probability
/// alpha[t], and given t the attention is the softmax over the chunk [max(0, t-w+1), t]
/// (000 eqs. 14-16). Accumulates alpha[t] * softmax(chunk(t)) into beta.
inline std::vector<double> mocha_reference_row_by_stop(const std::vector<double>& alpha,
                                                       const std::vector<double>& u,
                                                       int64_t n, int64_t w) {
  std::vector<double> beta(alpha.size(), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t v = std::max<int64_t>(0, t - w + 1);
    double denom = 0;
    for (int64_t l = v; l <= t; ++l) denom += std::exp(u[l]);
    for (int64_t j = v; j <= t; ++j) beta[j] += alpha[t] * std::exp(u[j]) / denom;
  }
  return beta;
}

/// Chunk softmax weight of entry j in the chunk ending at k (naive normaliser); 0 when j
/// is outside [max(0, k-w+1), k].
inline double mocha_reference_weight(const std::vector<double>& u, int64_t k, int64_t j,
                                     int64_t w) {
  const int64_t v = std::max<int64_t>(0, k - w + 1);
  if (j < v || j > k) return 0.0;
  double denom = 0;
  for (int64_t l = v; l <= k; ++l) denom += std::exp(u[l]);
  return std::exp(u[j]) / denom;
}

/// Gradients of L = sum_j g[j] beta[j] for one row, by the chain rule written out over
/// every (stop k, entry j) pair with the full softmax Jacobian
///   d s(k, j) / d u[m] = s(k, j) * ([j == m] - s(k, m)):
///   grad_alpha[k] = sum_j g[j] s(k, j)
///   grad_u[m]     = sum_k alpha[k] sum_j g[j] s(k, j) ([j == m] - s(k, m))
inline void mocha_reference_row_backward(const std::vector<double>& g,
                                         const std::vector<double>& alpha,
                                         const std::vector<double>& u, int64_t n, int64_t w,
                                         std::vector<double>& grad_alpha,
                                         std::vector<double>& grad_u) {
  grad_alpha.assign(alpha.size(), 0.0);
  grad_u.assign(alpha.size(), 0.0);
  for (int64_t k = 0; k < n; ++k) {
    for (int64_t j = 0; j < n; ++j) grad_alpha[k] += g[j] * mocha_reference_weight(u, k, j, w);
  }
  for (int64_t m = 0; m < n; ++m) {
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t j = 0; j < n; ++j) {
        // s(k, .) depends on u[m] only when m lies in the chunk [max(0, k-w+1), k].
        if (m < std::max<int64_t>(0, k - w + 1) || m > k) continue;
        const double skj = mocha_reference_weight(u, k, j, w);
        const double skm = mocha_reference_weight(u, k, m, w);
        grad_u[m] += alpha[k] * g[j] * skj * ((j == m ? 1.0 : 0.0) - skm);
      }
    }
  }
}

/// Applies a per-row reference to a whole [B, U, T] tensor; `lens_T[b]` / `lens_U[b]`
/// are the valid lengths (all rows and entries past them are 0).
template <class RowFn>
std::vector<double> mocha_reference(const std::vector<double>& alpha,
                                    const std::vector<double>& u, int64_t B, int64_t U,
                                    int64_t Tn, const std::vector<int64_t>& lens_T,
                                    const std::vector<int64_t>& lens_U, int64_t w,
                                    RowFn row_fn) {
  std::vector<double> beta(alpha.size(), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < lens_U[b]; ++i) {
      const size_t off = static_cast<size_t>((b * U + i) * Tn);
      const std::vector<double> a(alpha.data() + off, alpha.data() + off + Tn);
      const std::vector<double> e(u.data() + off, u.data() + off + Tn);
      const std::vector<double> r = row_fn(a, e, lens_T[b], w);
      for (int64_t j = 0; j < Tn; ++j) beta[off + j] = r[j];
    }
  }
  return beta;
}

}  // namespace mona::test
