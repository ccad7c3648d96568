// Exact marginal likelihood under the conditional Bernoulli emission model (004 eqs. 34,
// 36): see include/mona/core/cb_marginal.h and docs/math/conditional_bernoulli.md sec. 6.
#include "mona/core/cb_marginal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "mona/core/conditional_bernoulli.h"
#include "mona/core/poisson_binomial.h"
#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();

void check_ptr(const void* ptr, const char* kernel, const char* name) {
  mona::detail::check(ptr != nullptr, kernel, ": ", name, " must not be null");
}

template <class T>
void validate(const char* kernel, const T* logits, const T* log_emit, const Grid& g) {
  g.validate(kernel);
  for (int64_t b = 0; b < g.batch; ++b) {
    mona::detail::check(g.U_of(b) <= g.T_of(b), kernel, ": out_lens[", b, "]=", g.U_of(b),
                        " (labels L) must be <= in_lens[", b, "]=", g.T_of(b),
                        " (frames T): P(c) = 0");
  }
  if (g.batch * g.in_len > 0) check_ptr(logits, kernel, "logits");
  if (g.numel() > 0) check_ptr(log_emit, kernel, "log_emit");
  detail::check_finite(kernel, "logits", logits, detail::rows_grid(g.batch, g.in_len, g.in_lens));
  detail::check_finite(kernel, "log_emit", log_emit, g);
}

// Forward lattice of eq. 36 for one row; A has (n + 1) rows of stride W = L + 1.
template <class T>
void ctc_forward(const T* x, const T* E, int64_t Tn, int64_t n, int64_t L, T* A) {
  const int64_t W = L + 1;
  std::fill(A, A + W, kNegInf<T>);
  A[0] = T(0);
  for (int64_t t = 0; t < n; ++t) {
    const T lp = log_sigmoid(x[t]), lq = log_sigmoid(-x[t]);
    const T* a = A + t * W;
    T* o = A + (t + 1) * W;
    o[0] = a[0] + lq;
    for (int64_t l = 1; l <= L; ++l) o[l] = log_add_exp(a[l] + lq, a[l - 1] + lp + E[(l - 1) * Tn + t]);
  }
}

}  // namespace

template <class T>
void cb_marginal_log_likelihood(const T* logits, const T* log_emit, T* log_likelihood,
                                const Grid& grid) {
  const char* kName = "cb_marginal_log_likelihood";
  validate(kName, logits, log_emit, grid);
  if (grid.batch > 0) check_ptr(log_likelihood, kName, "log_likelihood");
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len, W = U + 1;
  const int64_t S = (Tn + 1) * W;
  // Suffix tables with k = L_b (the conditional Bernoulli's): [B, T + 1, U + 1].
  std::vector<T> table(static_cast<size_t>(B * S));
  cb_table(logits, table.data(), grid);
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * (U + 1) * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = grid.T_of(b), L = grid.U_of(b);
    const T* x = logits + b * Tn;
    const T* E = log_emit + b * U * Tn;
    const T* Q = table.data() + b * S;
    if (L == 0) {
      log_likelihood[b] = Q[0];
      continue;
    }
    std::vector<T> M(static_cast<size_t>(n + 1)), Mn(static_cast<size_t>(n + 1));
    std::vector<T> alpha(static_cast<size_t>(n));
    M[0] = -Q[L];
    for (int64_t t = 0; t < n; ++t) M[static_cast<size_t>(t + 1)] = M[static_cast<size_t>(t)] + log_sigmoid(-x[t]);
    for (int64_t l = 1; l <= L; ++l) {
      const T* El = E + (l - 1) * Tn;
      Mn[0] = kNegInf<T>;
      for (int64_t t = 0; t < n; ++t) {
        const T q = Q[(t + 1) * W + L - l];
        const T m = M[static_cast<size_t>(t)];
        T a = kNegInf<T>;
        if (q != kNegInf<T> && m != kNegInf<T>) a = El[t] + log_sigmoid(x[t]) + q + m;
        alpha[static_cast<size_t>(t)] = a;
        const T src = a == kNegInf<T> ? kNegInf<T> : a - q;  // source term of level l + 1
        Mn[static_cast<size_t>(t + 1)] =
            log_add_exp(Mn[static_cast<size_t>(t)] + log_sigmoid(-x[t]), src);
      }
      std::swap(M, Mn);
    }
    T mx = kNegInf<T>;
    for (int64_t t = 0; t < n; ++t) mx = std::max(mx, alpha[static_cast<size_t>(t)]);
    T s = 0;
    for (int64_t t = 0; t < n; ++t) s += std::exp(alpha[static_cast<size_t>(t)] - mx);
    log_likelihood[b] = Q[L] + mx + std::log(s);
  }
}

template <class T>
void cb_marginal_log_likelihood_ctc(const T* logits, const T* log_emit, T* log_likelihood,
                                    const Grid& grid) {
  const char* kName = "cb_marginal_log_likelihood_ctc";
  validate(kName, logits, log_emit, grid);
  if (grid.batch > 0) check_ptr(log_likelihood, kName, "log_likelihood");
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * (U + 1) * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = grid.T_of(b), L = grid.U_of(b);
    const T* x = logits + b * Tn;
    const T* E = log_emit + b * U * Tn;
    // Rolling row of the lattice (descending l so that A[l - 1] is still the old value).
    std::vector<T> A(static_cast<size_t>(L + 1), kNegInf<T>);
    A[0] = T(0);
    for (int64_t t = 0; t < n; ++t) {
      const T lp = log_sigmoid(x[t]), lq = log_sigmoid(-x[t]);
      for (int64_t l = L; l >= 1; --l) {
        A[static_cast<size_t>(l)] = log_add_exp(A[static_cast<size_t>(l)] + lq,
                                                A[static_cast<size_t>(l - 1)] + lp + E[(l - 1) * Tn + t]);
      }
      A[0] += lq;
    }
    log_likelihood[b] = A[static_cast<size_t>(L)];
  }
}

template <class T>
void cb_marginal_log_likelihood_backward(const T* grad_log_likelihood, const T* logits,
                                         const T* log_emit, T* grad_logits, T* grad_log_emit,
                                         const Grid& grid) {
  const char* kName = "cb_marginal_log_likelihood_backward";
  validate(kName, logits, log_emit, grid);
  if (grid.batch > 0) check_ptr(grad_log_likelihood, kName, "grad_log_likelihood");
  detail::check_finite(kName, "grad_log_likelihood", grad_log_likelihood,
                       detail::rows_grid(1, grid.batch, nullptr));
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * (U + 1) * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = grid.T_of(b), L = grid.U_of(b), W = L + 1;
    const T* x = logits + b * Tn;
    const T* E = log_emit + b * U * Tn;
    const T g = grad_log_likelihood[b];
    std::vector<T> A(static_cast<size_t>((n + 1) * W)), Bk(static_cast<size_t>((n + 1) * W));
    ctc_forward(x, E, Tn, n, L, A.data());
    // Backward lattice: Bk[t, l] = log P(frames [t, n) emit labels l .. L-1).
    T* last = Bk.data() + n * W;
    std::fill(last, last + W, kNegInf<T>);
    last[L] = T(0);
    for (int64_t t = n - 1; t >= 0; --t) {
      const T lp = log_sigmoid(x[t]), lq = log_sigmoid(-x[t]);
      const T* nb = Bk.data() + (t + 1) * W;
      T* o = Bk.data() + t * W;
      o[L] = nb[L] + lq;
      for (int64_t l = 0; l < L; ++l) o[l] = log_add_exp(nb[l] + lq, nb[l + 1] + lp + E[l * Tn + t]);
    }
    const T logP = A[static_cast<size_t>(n * W + L)];
    T* gx = grad_logits ? grad_logits + b * Tn : nullptr;
    T* ge = grad_log_emit ? grad_log_emit + b * U * Tn : nullptr;
    if (ge) std::fill(ge, ge + U * Tn, T(0));
    for (int64_t t = 0; t < n; ++t) {
      const T lp = log_sigmoid(x[t]);
      T emit = 0;
      for (int64_t l = 0; l < L; ++l) {
        const T a = A[static_cast<size_t>(t * W + l)], c = Bk[static_cast<size_t>((t + 1) * W + l + 1)];
        if (a == kNegInf<T> || c == kNegInf<T>) continue;
        const T gamma = std::exp(a + lp + E[l * Tn + t] + c - logP);
        emit += gamma;
        if (ge) ge[l * Tn + t] = g * gamma;
      }
      if (gx) gx[t] = g * (emit - std::exp(lp));
    }
    if (gx) std::fill(gx + n, gx + Tn, T(0));
  }
}

#define MONA_INSTANTIATE(T)                                                                  \
  template void cb_marginal_log_likelihood<T>(const T*, const T*, T*, const Grid&);          \
  template void cb_marginal_log_likelihood_ctc<T>(const T*, const T*, T*, const Grid&);      \
  template void cb_marginal_log_likelihood_backward<T>(const T*, const T*, const T*, T*, T*, \
                                                       const Grid&);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
#undef MONA_INSTANTIATE

}  // namespace mona::core
