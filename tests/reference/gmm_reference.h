// Brute-force references for GMM / SAGMM / SAGMM-tr attention (test-only, slow on purpose):
// every weight is evaluated from the density formula in long double, the windows from their
// definitions (003 eqs. 14 and 17-18), with no log-space tricks and no shared code with
// src/core/gmm.cc.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace mona::test {

/// The window variants, mirroring core::GmmWindow without depending on it.
enum class RefWindow { kNone, kAdaptive, kFixed };

/// One batched GMM problem with explicit (never defaulted) positions and scales.
struct GmmProblem {
  int64_t B = 0, U = 0, T = 0, H = 1;
  std::vector<int64_t> in_lens, out_lens;  // [B]
  std::vector<double> mu, variance, weights;  // [B, U, H]
  std::vector<double> nu, delta;              // [B, T]
  RefWindow window = RefWindow::kNone;
  double radius = 2.0;
  int64_t width = 4;
};

/// N(x; mu, v) = exp(-(x - mu)^2 / (2 v)) / sqrt(2 pi v) with v a variance (003 eq. 11).
inline long double ref_normal(long double x, long double mu, long double v) {
  const long double pi = 3.141592653589793238462643383279502884L;
  return std::exp(-(x - mu) * (x - mu) / (2 * v)) / std::sqrt(2 * pi * v);
}

/// gamma of the fixed window (003 eq. 17): the first j in [start, n) maximising the
/// Gaussian density (compared through its exponent, which orders the same way).
inline int64_t ref_gamma(const double* nu, int64_t start, int64_t n, long double mu) {
  int64_t best = start;
  long double best_e = -(nu[start] - mu) * (nu[start] - mu);
  for (int64_t j = start + 1; j < n; ++j) {
    const long double e = -(nu[j] - mu) * (nu[j] - mu);
    if (e > best_e) {
      best_e = e;
      best = j;
    }
  }
  return best;
}

/// mask[b][i][h][j] in {0, 1}, flattened [B, U, H, T]: whether head h of row i attends j.
inline std::vector<int> ref_masks(const GmmProblem& p) {
  std::vector<int> mask(static_cast<size_t>(p.B * p.U * p.H * p.T), 0);
  for (int64_t b = 0; b < p.B; ++b) {
    const double* nu = p.nu.data() + b * p.T;
    for (int64_t h = 0; h < p.H; ++h) {
      int64_t gamma = 0;
      for (int64_t i = 0; i < p.out_lens[b]; ++i) {
        const int64_t k = (b * p.U + i) * p.H + h;
        const long double mu = p.mu[k], v = p.variance[k];
        if (p.window == RefWindow::kFixed && p.in_lens[b] > 0) {
          gamma = ref_gamma(nu, gamma, p.in_lens[b], mu);
        }
        for (int64_t j = 0; j < p.in_lens[b]; ++j) {
          bool in = true;
          if (p.window == RefWindow::kAdaptive) {
            in = std::fabs(nu[j] - mu) < p.radius * std::sqrt(v);
          } else if (p.window == RefWindow::kFixed) {
            in = 2 * std::llabs(j - gamma) < p.width;
          }
          mask[static_cast<size_t>(k * p.T + j)] = in ? 1 : 0;
        }
      }
    }
  }
  return mask;
}

/// alpha [B, U, T] = delta_j * sum_h w * mask * N(nu_j; mu, v), zero padding.
inline std::vector<double> ref_alpha(const GmmProblem& p) {
  const auto mask = ref_masks(p);
  std::vector<double> alpha(static_cast<size_t>(p.B * p.U * p.T), 0.0);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < p.out_lens[b]; ++i)
      for (int64_t j = 0; j < p.in_lens[b]; ++j) {
        long double s = 0;
        for (int64_t h = 0; h < p.H; ++h) {
          const int64_t k = (b * p.U + i) * p.H + h;
          if (!mask[static_cast<size_t>(k * p.T + j)]) continue;
          s += static_cast<long double>(p.weights[k]) *
               ref_normal(p.nu[b * p.T + j], p.mu[k], p.variance[k]);
        }
        alpha[(b * p.U + i) * p.T + j] = static_cast<double>(s * p.delta[b * p.T + j]);
      }
  return alpha;
}

/// How far the problem is from a discontinuity of its masks: the smallest distance of a
/// valid nu_j to a kAdaptive bound, or the smallest gap between the nearest and the second
/// nearest distance in a kFixed argmin. Finite differences with steps well below this
/// margin never cross a window edge.
inline double ref_mask_margin(const GmmProblem& p) {
  double margin = 1e300;
  for (int64_t b = 0; b < p.B; ++b) {
    const double* nu = p.nu.data() + b * p.T;
    const int64_t n = p.in_lens[b];
    for (int64_t h = 0; h < p.H; ++h) {
      int64_t gamma = 0;
      for (int64_t i = 0; i < p.out_lens[b]; ++i) {
        const int64_t k = (b * p.U + i) * p.H + h;
        const double mu = p.mu[k], half = p.radius * std::sqrt(p.variance[k]);
        if (p.window == RefWindow::kAdaptive) {
          for (int64_t j = 0; j < n; ++j) {
            margin = std::min(margin, std::fabs(std::fabs(nu[j] - mu) - half));
          }
        } else if (p.window == RefWindow::kFixed && n > 0) {
          gamma = ref_gamma(nu, gamma, n, mu);
          const double best = std::fabs(nu[gamma] - mu);
          for (int64_t j = 0; j < n; ++j) {
            if (j == gamma) continue;
            margin = std::min(margin, std::fabs(std::fabs(nu[j] - mu) - best));
          }
        }
      }
    }
  }
  return margin;
}

/// Length penalty of 003 eq. 13 per batch element, written out.
inline std::vector<double> ref_length_penalty(const GmmProblem& p, double lambda) {
  std::vector<double> loss(static_cast<size_t>(p.B));
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t I = p.out_lens[b], J = p.in_lens[b];
    const double m = static_cast<double>(I < J ? I : J);
    double s = 0;
    for (int64_t h = 0; h < p.H; ++h) {
      const double mu_I = I > 0 ? p.mu[(b * p.U + I - 1) * p.H + h] : 0.0;  // mu_0 = 0
      s += (mu_I - m) * (mu_I - m);
    }
    const double nu_J = J > 0 ? p.nu[b * p.T + J - 1] : 0.0;  // nu_0 = 0
    s += (nu_J - m) * (nu_J - m);
    loss[b] = lambda * s;
  }
  return loss;
}

}  // namespace mona::test
