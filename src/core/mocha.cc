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
#include "targets.h"
#include "validate.h"
#include "vexp.h"

// The kernels of this compilation's target (targets.h).
MONA_TARGET_BEGIN
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

// Both passes need, for every chunk k = 0 .. n-1 (chunk(k) = [s_k, k], s_k = max(0, k-w+1)),
// the softmax weights exp(u[l] - mx[k]) / S[k] of its entries:
//   mx[k] = max u[chunk(k)],  S[k] = sum_{l in chunk(k)} exp(u[l] - mx[k])  (1 <= S[k] <= w).
// Every exponent is <= 0 and S[k] >= 1 (the max entry contributes exp(0) = 1), so nothing
// overflows for energies of any size; a one-entry chunk gives exactly 1.
//
// They are laid out by offset o = k - l in [0, w): X[o][k] = exp(u[k-o] - mx[k]) (0 when
// k < o, where chunk(k) has fewer than w entries). Every loop below then runs over k with
// a fixed o, elementwise over shifted arrays, and vectorises, exponentials included
// (exp_nonpositive, vexp.h); a row costs w exponentials per entry, as many as the chunks
// an entry belongs to, all in SIMD. `w` is already clamped to [1, n].
template <class T>
struct RowScratch {
  T* mx;  // [n] chunk maxima
  T* c;   // [n] forward: alpha[k] / S[k]; backward: 1 / S[k]
  T* X;   // [w * n] X[o * n + k]
};

template <class T>
void chunk_weights(int64_t n, int64_t w, const T* u, const RowScratch<T>& s) {
  T* mx = s.mx;
  std::copy(u, u + n, mx);
  for (int64_t o = 1; o < w; ++o) {
    for (int64_t k = o; k < n; ++k) mx[k] = mx[k] > u[k - o] ? mx[k] : u[k - o];
  }
  for (int64_t o = 0; o < w; ++o) {
    T* Xo = s.X + o * n;
    std::fill(Xo, Xo + std::min(o, n), T(0));
    for (int64_t k = o; k < n; ++k) Xo[k] = detail::exp_nonpositive(u[k - o] - mx[k]);
  }
}

// S[k] = sum_o X[o][k], summed from the chunk's first entry (o = w-1) to its last (o = 0).
template <class T>
void chunk_sums(int64_t n, int64_t w, const RowScratch<T>& s, T* S) {
  std::copy(s.X + (w - 1) * n, s.X + w * n, S);
  for (int64_t o = w - 2; o >= 0; --o) {
    const T* Xo = s.X + o * n;
    for (int64_t k = 0; k < n; ++k) S[k] += Xo[k];
  }
}

// Forward for one row of n valid entries:
//   beta[j] = sum_{k=j}^{j+w-1} (alpha[k] / S[k]) X[k-j][k],  added in increasing k.
template <class T>
void row_forward(int64_t n, int64_t w, const T* alpha, const T* u, T* beta,
                 const RowScratch<T>& s) {
  chunk_weights(n, w, u, s);
  T* c = s.c;
  chunk_sums(n, w, s, c);
  for (int64_t k = 0; k < n; ++k) c[k] = alpha[k] / c[k];
  for (int64_t j = 0; j < n; ++j) beta[j] = c[j] * s.X[j];
  for (int64_t o = 1; o < w; ++o) {
    const T* Xo = s.X + o * n;
    for (int64_t j = 0; j + o < n; ++j) beta[j] += c[j + o] * Xo[j + o];
  }
}

// Backward for one row of n valid entries (docs/math/mocha.md), with the chunk weights
// w_k[j] = X[k-j][k] / S[k]:
//   ga[k] = sum_{j in chunk(k)} g[j] w_k[j]
//   gu[m] = sum_{k: m in chunk(k)} alpha[k] w_k[m] (g[m] - ga[k])
template <class T>
void row_backward(int64_t n, int64_t w, const T* g, const T* alpha, const T* u, T* ga,
                  T* gu, const RowScratch<T>& s) {
  chunk_weights(n, w, u, s);
  T* inv = s.c;
  chunk_sums(n, w, s, inv);
  for (int64_t k = 0; k < n; ++k) inv[k] = T(1) / inv[k];
  // ga: the chunk's entries from its first (o = w-1) to its last (o = 0).
  {
    const T* Xl = s.X + (w - 1) * n;
    for (int64_t k = 0; k < n; ++k) ga[k] = 0;
    for (int64_t k = w - 1; k < n; ++k) ga[k] = g[k - (w - 1)] * Xl[k];
    for (int64_t o = w - 2; o >= 0; --o) {
      const T* Xo = s.X + o * n;
      for (int64_t k = o; k < n; ++k) ga[k] += g[k - o] * Xo[k];
    }
    for (int64_t k = 0; k < n; ++k) ga[k] *= inv[k];
  }
  // gu: the chunks containing m in increasing k = m + o.
  for (int64_t k = 0; k < n; ++k) inv[k] *= alpha[k];  // now alpha[k] / S[k]
  for (int64_t m = 0; m < n; ++m) gu[m] = inv[m] * s.X[m] * (g[m] - ga[m]);
  for (int64_t o = 1; o < w; ++o) {
    const T* Xo = s.X + o * n;
    for (int64_t m = 0; m + o < n; ++m) gu[m] += inv[m + o] * Xo[m + o] * (g[m] - ga[m + o]);
  }
}

// The scratch of one row of n entries (w + 2 arrays of n), carved from `base`.
template <class T>
RowScratch<T> scratch_for(T* base, int64_t n) {
  return RowScratch<T>{base, base + n, base + 2 * n};
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
  const int64_t per_thread = (wc + 2) * Tn;  // RowScratch of a row of up to T entries
  std::vector<T> scratch(static_cast<size_t>(per_thread * nthreads));

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * wc))
  for (int64_t b = 0; b < B; ++b) {
    T* base = scratch.data() + per_thread * thread_id();
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const int64_t wb = std::max<int64_t>(std::min(wc, Tb), 1);
    for (int64_t i = 0; i < Ub; ++i) {
      const int64_t off = (b * U + i) * Tn;
      row_forward(Tb, wb, alpha + off, u + off, beta + off, scratch_for(base, Tb));
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
  const int64_t per_thread = (wc + 2) * Tn;  // RowScratch of a row of up to T entries
  std::vector<T> scratch(static_cast<size_t>(per_thread * nthreads));

#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(grid.numel()) * wc))
  for (int64_t b = 0; b < B; ++b) {
    T* base = scratch.data() + per_thread * thread_id();
    const int64_t Ub = grid.U_of(b), Tb = grid.T_of(b);
    const int64_t wb = std::max<int64_t>(std::min(wc, Tb), 1);
    for (int64_t i = 0; i < Ub; ++i) {
      const int64_t off = (b * U + i) * Tn;
      row_backward(Tb, wb, grad_beta + off, alpha + off, u + off, grad_alpha + off,
                   grad_u + off, scratch_for(base, Tb));
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
MONA_TARGET_END

#if MONA_TARGET_ENTRY_POINTS
// The public entry points, compiled once: each runs the selected target's kernel.
#define MONA_DECLARE_TARGET target_v3
#include "target_kernels.h"
#undef MONA_DECLARE_TARGET

namespace mona::core {

template <class T>
void mocha_chunkwise(const T* alpha, const T* u, T* beta, const Grid& grid, int64_t w) {
  MONA_TARGET_DISPATCH(mocha_chunkwise<T>, alpha, u, beta, grid, w);
}

template <class T>
void mocha_chunkwise_backward(const T* grad_beta, const T* alpha, const T* u, T* grad_alpha,
                              T* grad_u, const Grid& grid, int64_t w) {
  MONA_TARGET_DISPATCH(mocha_chunkwise_backward<T>, grad_beta, alpha, u, grad_alpha, grad_u,
                       grid, w);
}

MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)

}  // namespace mona::core
#endif  // MONA_TARGET_ENTRY_POINTS
