// MoChA chunkwise attention in expectation (000 eq. 17): see include/mona/core/mocha.h
// for the formulas and docs/math/mocha.md for the derivation of the numerics and of the
// backward pass.
#include "mona/core/mocha.h"

#include <algorithm>
#include <cmath>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

int thread_id() {
#ifdef _OPENMP
  return omp_get_thread_num();
#else
  return 0;
#endif
}

// Both passes walk the chunks k = 0 .. n-1, chunk(k) = [s_k, k], s_k = max(0, k-w+1), and
// evaluate each softmax weight exp(u[l] - mx[k]) / S[k] once, into E[0 .. k - s_k]:
//   mx[k] = max u[chunk(k)],  S[k] = sum_{l in chunk(k)} exp(u[l] - mx[k])  (1 <= S[k] <= w).
// Every exponent is <= 0 and S[k] >= 1 (the max entry contributes exp(0) = 1), so nothing
// overflows for energies of any size; a one-entry chunk gives exactly 1. `w` is already
// clamped to [1, n]; E has room for w values. Contributions to an entry are added in
// increasing k, the order of 000 eq. 17's sum.
template <class T>
inline T chunk_weights(int64_t k, int64_t s, const T* u, T* E) {
  T m = u[s];
  for (int64_t l = s + 1; l <= k; ++l) m = std::max(m, u[l]);
  T z = 0;
  for (int64_t l = s; l <= k; ++l) {
    E[l - s] = std::exp(u[l] - m);
    z += E[l - s];
  }
  return T(1) / z;  // 1 / S[k]
}

// Forward for one row of n valid entries: beta[j] = sum_{k=j}^{j+w-1} alpha[k] E_k[j] / S[k].
template <class T>
inline void row_forward(int64_t n, int64_t w, const T* alpha, const T* u, T* beta, T* E) {
  std::fill(beta, beta + n, T(0));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = k >= w ? k - w + 1 : 0;
    const T c = chunk_weights(k, s, u, E) * alpha[k];
    for (int64_t l = s; l <= k; ++l) beta[l] += c * E[l - s];
  }
}

// Backward for one row of n valid entries (docs/math/mocha.md):
//   ga[k] = sum_{j in chunk(k)} g[j] w_k[j],   w_k[j] = E_k[j] / S[k]
//   gu[m] = sum_{k: m in chunk(k)} alpha[k] w_k[m] (g[m] - ga[k])
// Both only need chunk k's weights, so one pass over k computes them.
template <class T>
inline void row_backward(int64_t n, int64_t w, const T* g, const T* alpha, const T* u,
                         T* ga, T* gu, T* E) {
  std::fill(gu, gu + n, T(0));
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = k >= w ? k - w + 1 : 0;
    const T inv = chunk_weights(k, s, u, E);
    T acc = 0;
    for (int64_t j = s; j <= k; ++j) acc += g[j] * E[j - s];
    const T gak = acc * inv;
    ga[k] = gak;
    const T c = inv * alpha[k];
    for (int64_t m = s; m <= k; ++m) gu[m] += c * E[m - s] * (g[m] - gak);
  }
}

template <class T>
void fill_zero(T* x, int64_t n) {
  std::fill(x, x + n, T(0));
}

void check_ptr(const void* ptr, const char* kernel, const char* name) {
  mona::detail::check(ptr != nullptr, kernel, ": ", name, " must not be null");
}

void check_w(int64_t w, const char* kernel) {
  mona::detail::check(w >= 1, kernel, ": w: chunk size must be >= 1, got ", w);
}

}  // namespace

template <class T>
void mocha_chunkwise(const T* alpha, const T* u, T* beta, const Grid& grid, int64_t w) {
  const char* kName = "mocha_chunkwise";
  check_w(w, kName);
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(alpha, kName, "alpha");
    check_ptr(u, kName, "u");
    check_ptr(beta, kName, "beta");
  }
  detail::check_nonnegative(kName, "alpha", alpha, grid);
  detail::check_finite(kName, "u", u, grid);
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
  if (grid.numel() == 0) return;
  const int64_t wc = std::min(w, Tn);  // a chunk never holds more than T entries
  const int nthreads = B > 1 ? max_threads() : 1;
  std::vector<T> scratch(static_cast<size_t>(wc * nthreads));  // one chunk's weights per thread

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * wc))
  for (int64_t b = 0; b < B; ++b) {
    T* E = scratch.data() + wc * thread_id();
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const int64_t wb = std::max<int64_t>(std::min(wc, Tb), 1);
    for (int64_t i = 0; i < Ub; ++i) {
      const int64_t off = (b * U + i) * Tn;
      row_forward(Tb, wb, alpha + off, u + off, beta + off, E);
      fill_zero(beta + off + Tb, Tn - Tb);
    }
    fill_zero(beta + (b * U + Ub) * Tn, (U - Ub) * Tn);
  }
}

template <class T>
void mocha_chunkwise_backward(const T* grad_beta, const T* alpha, const T* u, T* grad_alpha,
                              T* grad_u, const Grid& grid, int64_t w) {
  const char* kName = "mocha_chunkwise_backward";
  check_w(w, kName);
  grid.validate(kName);
  if (grid.numel() > 0) {
    check_ptr(grad_beta, kName, "grad_beta");
    check_ptr(alpha, kName, "alpha");
    check_ptr(u, kName, "u");
    check_ptr(grad_alpha, kName, "grad_alpha");
    check_ptr(grad_u, kName, "grad_u");
  }
  detail::check_finite(kName, "grad_beta", grad_beta, grid);
  detail::check_nonnegative(kName, "alpha", alpha, grid);
  detail::check_finite(kName, "u", u, grid);
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
  if (grid.numel() == 0) return;
  const int64_t wc = std::min(w, Tn);
  const int nthreads = B > 1 ? max_threads() : 1;
  std::vector<T> scratch(static_cast<size_t>(wc * nthreads));  // one chunk's weights per thread

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * wc))
  for (int64_t b = 0; b < B; ++b) {
    T* E = scratch.data() + wc * thread_id();
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const int64_t wb = std::max<int64_t>(std::min(wc, Tb), 1);
    for (int64_t i = 0; i < Ub; ++i) {
      const int64_t off = (b * U + i) * Tn;
      row_backward(Tb, wb, grad_beta + off, alpha + off, u + off, grad_alpha + off,
                   grad_u + off, E);
      fill_zero(grad_alpha + off + Tb, Tn - Tb);
      fill_zero(grad_u + off + Tb, Tn - Tb);
    }
    fill_zero(grad_alpha + (b * U + Ub) * Tn, (U - Ub) * Tn);
    fill_zero(grad_u + (b * U + Ub) * Tn, (U - Ub) * Tn);
  }
}

#define MONA_INSTANTIATE(T)                                                              \
  template void mocha_chunkwise<T>(const T*, const T*, T*, const Grid&, int64_t);        \
  template void mocha_chunkwise_backward<T>(const T*, const T*, const T*, T*, T*,        \
                                            const Grid&, int64_t);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
#undef MONA_INSTANTIATE

}  // namespace mona::core
