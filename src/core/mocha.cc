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

// Max and shifted normaliser of every chunk of one row of n entries, chunk(k) =
// [max(0, k-w+1), k]:  mx[k] = max u[chunk(k)],  S[k] = sum_{l in chunk(k)} exp(u[l] - mx[k]),
// 1 <= S[k] <= w. `w` is already clamped to [1, n]. Writes mx[k] and inv[k] = 1 / S[k].
template <class T>
inline void chunk_normalisers(int64_t n, int64_t w, const T* u, T* mx, T* inv) {
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = k >= w ? k - w + 1 : 0;
    T m = u[s];
    for (int64_t l = s + 1; l <= k; ++l) m = std::max(m, u[l]);
    T z = 0;
    for (int64_t l = s; l <= k; ++l) z += std::exp(u[l] - m);
    mx[k] = m;
    inv[k] = T(1) / z;  // z >= 1: the max entry contributes exp(0) = 1; one entry: exactly 1
  }
}

// Forward for one row of n valid entries. c is scratch: c[k] = alpha[k] / S[k].
template <class T>
inline void row_forward(int64_t n, int64_t w, const T* alpha, const T* u, T* beta, T* mx,
                        T* c) {
  chunk_normalisers(n, w, u, mx, c);
  for (int64_t k = 0; k < n; ++k) c[k] *= alpha[k];
  for (int64_t j = 0; j < n; ++j) {
    const int64_t kend = std::min(j + w - 1, n - 1);
    T acc = 0;
    for (int64_t k = j; k <= kend; ++k) acc += c[k] * std::exp(u[j] - mx[k]);
    beta[j] = acc;
  }
}

// Backward for one row of n valid entries. c is scratch: first 1 / S[k], then
// alpha[k] / S[k]; ga[k] = dL/dalpha[k] is computed first and read by the dL/du pass.
template <class T>
inline void row_backward(int64_t n, int64_t w, const T* g, const T* alpha, const T* u,
                         T* ga, T* gu, T* mx, T* c) {
  chunk_normalisers(n, w, u, mx, c);
  for (int64_t k = 0; k < n; ++k) {
    const int64_t s = k >= w ? k - w + 1 : 0;
    T acc = 0;
    for (int64_t j = s; j <= k; ++j) acc += g[j] * std::exp(u[j] - mx[k]);
    ga[k] = acc * c[k];
    c[k] *= alpha[k];
  }
  for (int64_t m = 0; m < n; ++m) {
    const int64_t kend = std::min(m + w - 1, n - 1);
    T acc = 0;
    for (int64_t k = m; k <= kend; ++k) acc += c[k] * std::exp(u[m] - mx[k]) * (g[m] - ga[k]);
    gu[m] = acc;
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
  std::vector<T> scratch(static_cast<size_t>(2 * Tn * nthreads));

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * std::min<int64_t>(w, std::max<int64_t>(grid.in_len, 1))))
  for (int64_t b = 0; b < B; ++b) {
    T* mx = scratch.data() + 2 * Tn * thread_id();
    T* c = mx + Tn;
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const int64_t wb = std::max<int64_t>(std::min(wc, Tb), 1);
    for (int64_t i = 0; i < Ub; ++i) {
      const int64_t off = (b * U + i) * Tn;
      row_forward(Tb, wb, alpha + off, u + off, beta + off, mx, c);
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
  std::vector<T> scratch(static_cast<size_t>(2 * Tn * nthreads));

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * std::min<int64_t>(w, std::max<int64_t>(grid.in_len, 1))))
  for (int64_t b = 0; b < B; ++b) {
    T* mx = scratch.data() + 2 * Tn * thread_id();
    T* c = mx + Tn;
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const int64_t wb = std::max<int64_t>(std::min(wc, Tb), 1);
    for (int64_t i = 0; i < Ub; ++i) {
      const int64_t off = (b * U + i) * Tn;
      row_backward(Tb, wb, grad_beta + off, alpha + off, u + off, grad_alpha + off,
                   grad_u + off, mx, c);
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
