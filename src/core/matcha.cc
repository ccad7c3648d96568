// MAtChA expected attention (000 App. C, eq. 28) and its backward: see
// include/mona/core/matcha.h for the sweeps and docs/math/matcha.md for the derivation.
#include "mona/core/matcha.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "targets.h"
#include "validate.h"

// The kernels of this compilation's target (targets.h).
MONA_TARGET_BEGIN
namespace {

// Downward sweep step k < l for a fixed chunk end l: folds u[k] into the running max M and
// returns E = E(k, l) = exp(u[k] - M(k, l)) and c = exp(M(k+1, l) - M(k, l)), the factor
// that rescales the running sums (and, in the upward sweep, the prefix sums). Only
// non-positive arguments reach exp; c = 1 exactly when the max does not change.
template <class T>
inline void fold_down(T uk, T& M, T& E, T& c) {
  const T d = uk - M;
  if (d > T(0)) {
    c = std::exp(-d);
    E = T(1);
    M = uk;
  } else {
    c = T(1);
    E = std::exp(d);
  }
}

// One valid row of the forward pass over n >= 1 entries. Scratch: E, c, x, each [n].
template <class T>
void row_forward(int64_t n, const T* a, const T* p, const T* u, T* beta, T* E, T* c, T* x) {
  std::fill(beta, beta + n, T(0));
  for (int64_t l = 0; l < n; ++l) {
    const T pl = p[l];
    if (pl == T(0)) continue;  // every chunk ending at l has probability 0
    T M = u[l], s = T(1), Pi = T(1);
    E[l] = T(1);
    x[l] = a[l];
    for (int64_t k = l - 1; k >= 0; --k) {
      Pi *= T(1) - p[k];
      fold_down(u[k], M, E[k], c[k]);
      s = s * c[k] + E[k];
      x[k] = a[k] * Pi / s;
    }
    T Q = x[0];
    beta[0] += pl * E[0] * Q;
    for (int64_t j = 1; j <= l; ++j) {
      Q = Q * c[j - 1] + x[j];
      beta[j] += pl * E[j] * Q;
    }
  }
}

// One valid row of the backward pass over n >= 1 entries. Scratch: Pi, G, E, c, xg, each
// [n]. Writes ga = dL/da, gp = dL/dp, gu = dL/du over [0, n).
template <class T>
void row_backward(int64_t n, const T* g, const T* a, const T* p, const T* u, const T* beta,
                  T* ga, T* gp, T* gu, T* Pi, T* G, T* E, T* c, T* xg) {
  std::fill(ga, ga + n, T(0));
  std::fill(gp, gp + n, T(0));
  std::fill(gu, gu + n, T(0));
  for (int64_t l = 0; l < n; ++l) {
    const T pl = p[l];
    // Down: Pi(k, l), E(k, l), G(k, l) = nsum / s, and the contributions to dL/da.
    T M = u[l], s = T(1), nsum = g[l], pi = T(1);
    Pi[l] = T(1);
    E[l] = T(1);
    G[l] = g[l];
    xg[l] = a[l] * g[l];
    ga[l] += pl * g[l];
    for (int64_t k = l - 1; k >= 0; --k) {
      pi *= T(1) - p[k];
      fold_down(u[k], M, E[k], c[k]);
      s = s * c[k] + E[k];
      nsum = nsum * c[k] + g[k] * E[k];
      const T Gk = nsum / s;
      Pi[k] = pi;
      G[k] = Gk;
      xg[k] = a[k] * pi * Gk / s;
      ga[k] += pl * pi * Gk;
    }
    // Up: the prefix sum of the dL/du term and the recurrence for D_l(m).
    T Q = xg[0];
    T D = a[0] * G[0];
    gu[0] -= pl * E[0] * Q;
    if (l > 0) gp[0] -= pl * Pi[1] * D;
    for (int64_t j = 1; j <= l; ++j) {
      Q = Q * c[j - 1] + xg[j];
      gu[j] -= pl * E[j] * Q;
      D = (T(1) - p[j - 1]) * D + a[j] * G[j];
      if (j < l) gp[j] -= pl * Pi[j + 1] * D;
    }
    gp[l] += D;  // D_l(l): the chunks that end at l
  }
  for (int64_t m = 0; m < n; ++m) gu[m] += g[m] * beta[m];
}

// Threads only pay off when the O(rows * T^2) work dwarfs the cost of a parallel region
// (tens of microseconds, more when the cores are shared): about 1e5 (k, l) pairs.
inline bool parallel_worthwhile(int64_t rows, int64_t in_len) {
  return rows > 1 && static_cast<double>(rows) * in_len * in_len > 262144.0;  // no overflow
}

template <class T>
void fill_zero(T* x, int64_t n) {
  std::fill(x, x + n, T(0));
}

void check_ptr(const void* ptr, const char* kernel, const char* name) {
  mona::detail::check(ptr != nullptr, kernel, ": ", name, " must not be null");
}

}  // namespace

template <class T>
void matcha_chunkwise(const T* alpha_prev, const T* p, const T* u, T* beta, const Grid& grid) {
  const char* kName = "matcha_chunkwise";
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(alpha_prev, kName, "alpha_prev");
    check_ptr(p, kName, "p");
    check_ptr(u, kName, "u");
    check_ptr(beta, kName, "beta");
  }
  detail::check_nonnegative(kName, "alpha_prev", alpha_prev, grid);
  detail::check_probabilities(kName, "p", p, grid);
  detail::check_finite(kName, "u", u, grid);
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
  const int64_t rows = B * U;

#pragma omp parallel if (parallel_worthwhile(rows, Tn))
  {
    std::vector<T> scratch(static_cast<size_t>(3 * Tn));
    T* E = scratch.data();
    T* c = E + Tn;
    T* x = c + Tn;
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / U, i = r % U, off = r * Tn;
      const int64_t n = i < grid.U_of(b) ? grid.T_of(b) : 0;
      if (n > 0) row_forward(n, alpha_prev + off, p + off, u + off, beta + off, E, c, x);
      fill_zero(beta + off + n, Tn - n);
    }
  }
}

template <class T>
void matcha_chunkwise_backward(const T* grad_beta, const T* alpha_prev, const T* p,
                               const T* u, const T* beta, T* grad_alpha_prev, T* grad_p,
                               T* grad_u, const Grid& grid) {
  const char* kName = "matcha_chunkwise_backward";
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(grad_beta, kName, "grad_beta");
    check_ptr(alpha_prev, kName, "alpha_prev");
    check_ptr(p, kName, "p");
    check_ptr(u, kName, "u");
    check_ptr(beta, kName, "beta");
    check_ptr(grad_alpha_prev, kName, "grad_alpha_prev");
    check_ptr(grad_p, kName, "grad_p");
    check_ptr(grad_u, kName, "grad_u");
  }
  detail::check_finite(kName, "grad_beta", grad_beta, grid);
  detail::check_nonnegative(kName, "alpha_prev", alpha_prev, grid);
  detail::check_probabilities(kName, "p", p, grid);
  detail::check_finite(kName, "u", u, grid);
  detail::check_nonnegative(kName, "beta", beta, grid);
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
  const int64_t rows = B * U;

#pragma omp parallel if (parallel_worthwhile(rows, Tn))
  {
    std::vector<T> scratch(static_cast<size_t>(5 * Tn));
    T* Pi = scratch.data();
    T* G = Pi + Tn;
    T* E = G + Tn;
    T* c = E + Tn;
    T* xg = c + Tn;
#pragma omp for schedule(dynamic)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t b = r / U, i = r % U, off = r * Tn;
      const int64_t n = i < grid.U_of(b) ? grid.T_of(b) : 0;
      if (n > 0) {
        row_backward(n, grad_beta + off, alpha_prev + off, p + off, u + off, beta + off,
                     grad_alpha_prev + off, grad_p + off, grad_u + off, Pi, G, E, c, xg);
      }
      fill_zero(grad_alpha_prev + off + n, Tn - n);
      fill_zero(grad_p + off + n, Tn - n);
      fill_zero(grad_u + off + n, Tn - n);
    }
  }
}

#define MONA_INSTANTIATE(T)                                                               \
  template void matcha_chunkwise<T>(const T*, const T*, const T*, T*, const Grid&);       \
  template void matcha_chunkwise_backward<T>(const T*, const T*, const T*, const T*,      \
                                             const T*, T*, T*, T*, const Grid&);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
MONA_TARGET_END

#if MONA_TARGET_ENTRY_POINTS
// The public entry points, compiled once: each runs the selected target's kernel.
#define MONA_DECLARE_TARGET target_v3
#include "target_kernels.h"
#undef MONA_DECLARE_TARGET

namespace mona::core {

template <class T>
void matcha_chunkwise(const T* alpha_prev, const T* p, const T* u, T* beta, const Grid& grid) {
  MONA_TARGET_DISPATCH(matcha_chunkwise<T>, alpha_prev, p, u, beta, grid);
}

template <class T>
void matcha_chunkwise_backward(const T* grad_beta, const T* alpha_prev, const T* p,
                               const T* u, const T* beta, T* grad_alpha_prev, T* grad_p,
                               T* grad_u, const Grid& grid) {
  MONA_TARGET_DISPATCH(matcha_chunkwise_backward<T>, grad_beta, alpha_prev, p, u, beta,
                       grad_alpha_prev, grad_p, grad_u, grid);
}

MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)

}  // namespace mona::core
#endif  // MONA_TARGET_ENTRY_POINTS
