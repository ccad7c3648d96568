// Exact marginal likelihood under the conditional Bernoulli emission model (004 eqs. 34,
// 36): see include/mona/core/cb_marginal.h and docs/math/conditional_bernoulli.md sec. 6.
#include "mona/core/cb_marginal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "cb_rows.h"
#include "mona/core/poisson_binomial.h"
#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

template <class T>
void validate(const char* kernel, const T* logits, const T* log_emit, const Grid& g) {
  g.validate(kernel);
  for (int64_t b = 0; b < g.batch; ++b) {
    mona::detail::check(g.U_of(b) <= g.T_of(b), kernel, ": out_lens[", b, "]=", g.U_of(b),
                        " (labels L) must be <= in_lens[", b, "]=", g.T_of(b),
                        " (frames T): P(c) = 0");
  }
  if (g.batch * g.in_len > 0) detail::check_ptr(logits, kernel, "logits");
  if (g.numel() > 0) detail::check_ptr(log_emit, kernel, "log_emit");
  detail::check_finite(kernel, "logits", logits, detail::rows_grid(g.batch, g.in_len, g.in_lens));
  detail::check_finite(kernel, "log_emit", log_emit, g);
}

// The eq. 36 forward lattice as a recursion over rows r = t + 1: A[t + 1, :] from A[t, :]
// (E: the row's log_emit [U, T], row stride Tn). The one copy of the step: the forward
// rolls it over two rows, the backward recomputes its rows with it (cb_rows.h).
template <class T>
struct CtcStep {
  const T* x;
  const T* E;
  int64_t Tn, L;
  void operator()(int64_t r, const double* a, double* o) const {
    const int64_t t = r - 1;
    const double xt = static_cast<double>(x[t]);
    const double lp = log_sigmoid(xt), lq = log_sigmoid(-xt);
    o[0] = a[0] + lq;
    for (int64_t l = 1; l <= L; ++l) {
      o[l] = log_add_exp(a[l] + lq, a[l - 1] + lp + static_cast<double>(E[(l - 1) * Tn + t]));
    }
  }
};

}  // namespace

template <class T>
void cb_marginal_log_likelihood(const T* logits, const T* log_emit, T* log_likelihood,
                                const Grid& grid) {
  const char* kName = "cb_marginal_log_likelihood";
  validate(kName, logits, log_emit, grid);
  if (grid.batch > 0) detail::check_ptr(log_likelihood, kName, "log_likelihood");
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * (U + 1) * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = grid.T_of(b), L = grid.U_of(b);
    const T* x = logits + b * Tn;
    const T* E = log_emit + b * U * Tn;
    // The suffix table with k = L (the conditional Bernoulli's), in double, asked for in
    // increasing t: Q[t + 1, :] at frame t.
    detail::SuffixRows<T> Q(x, n, L);
    const double logPL = Q.row(0)[L];
    if (L == 0) {
      log_likelihood[b] = static_cast<T>(logPL);
      continue;
    }
    // M[l] = M_l(t) for l = 1 .. L, advanced one frame at a time; alpha_L(t) kept for the sum.
    std::vector<double> M(static_cast<size_t>(L + 1), kNegInf);
    std::vector<double> alpha(static_cast<size_t>(n));
    M[1] = -logPL;
    for (int64_t t = 0; t < n; ++t) {
      const double* q1 = Q.row(t + 1);
      const double xt = static_cast<double>(x[t]);
      const double ls = log_sigmoid(xt), lq = log_sigmoid(-xt);
      // Descending l: M_{l+1}(t + 1) replaces M_{l+1}(t) after M_l(t) was read.
      for (int64_t l = L; l >= 1; --l) {
        const double q = q1[L - l];
        const double m = M[static_cast<size_t>(l)];
        double a = kNegInf;
        if (q != kNegInf && m != kNegInf) a = static_cast<double>(E[(l - 1) * Tn + t]) + ls + q + m;
        if (l == L) {
          alpha[static_cast<size_t>(t)] = a;
        } else {
          const double src = a == kNegInf ? kNegInf : a - q;  // source term of level l + 1
          M[static_cast<size_t>(l + 1)] = log_add_exp(M[static_cast<size_t>(l + 1)] + lq, src);
        }
      }
      M[1] = M[1] + lq;
    }
    double mx = kNegInf;
    for (int64_t t = 0; t < n; ++t) mx = std::max(mx, alpha[static_cast<size_t>(t)]);
    double s = 0;
    for (int64_t t = 0; t < n; ++t) s += std::exp(alpha[static_cast<size_t>(t)] - mx);
    log_likelihood[b] = static_cast<T>(logPL + mx + std::log(s));
  }
}

template <class T>
void cb_marginal_log_likelihood_ctc(const T* logits, const T* log_emit, T* log_likelihood,
                                    const Grid& grid) {
  const char* kName = "cb_marginal_log_likelihood_ctc";
  validate(kName, logits, log_emit, grid);
  if (grid.batch > 0) detail::check_ptr(log_likelihood, kName, "log_likelihood");
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * (U + 1) * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = grid.T_of(b), L = grid.U_of(b);
    const T* x = logits + b * Tn;
    const T* E = log_emit + b * U * Tn;
    // Two rolling rows of the lattice: A[t, :] in `a`, A[t + 1, :] into `next`.
    const CtcStep<T> step{x, E, Tn, L};
    std::vector<double> a(static_cast<size_t>(L + 1), kNegInf), next(a.size());
    a[0] = 0;
    for (int64_t t = 0; t < n; ++t) {
      step(t + 1, a.data(), next.data());
      std::swap(a, next);
    }
    log_likelihood[b] = static_cast<T>(a[static_cast<size_t>(L)]);
  }
}

template <class T>
void cb_marginal_log_likelihood_backward(const T* grad_log_likelihood, const T* logits,
                                         const T* log_emit, T* grad_logits, T* grad_log_emit,
                                         const Grid& grid) {
  const char* kName = "cb_marginal_log_likelihood_backward";
  validate(kName, logits, log_emit, grid);
  if (grid.batch > 0) detail::check_ptr(grad_log_likelihood, kName, "grad_log_likelihood");
  detail::check_finite(kName, "grad_log_likelihood", grad_log_likelihood,
                       detail::vector_grid(grid.batch));
  const int64_t B = grid.batch, U = grid.out_len, Tn = grid.in_len;
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(B, double(B) * (U + 1) * Tn))
  for (int64_t b = 0; b < B; ++b) {
    const int64_t n = grid.T_of(b), L = grid.U_of(b), W = L + 1;
    const T* x = logits + b * Tn;
    const T* E = log_emit + b * U * Tn;
    const double g = static_cast<double>(grad_log_likelihood[b]);
    // Forward lattice A [n + 1, L + 1] in double, whole or checkpointed (src/core/cb_rows.h),
    // asked for in decreasing t; the backward lattice Bk[t, l] = log P(frames [t, n) emit
    // labels l .. L-1) rolls from t = n down alongside.
    std::vector<double> a0(static_cast<size_t>(W), kNegInf);
    a0[0] = 0;
    detail::CheckpointedRows<CtcStep<T>> A(n, W, a0, CtcStep<T>{x, E, Tn, L});
    const double logP = A.row(n)[L];
    std::vector<double> next(static_cast<size_t>(W), kNegInf), cur(static_cast<size_t>(W));
    next[static_cast<size_t>(L)] = 0;  // Bk[n, :]
    T* gx = grad_logits ? grad_logits + b * Tn : nullptr;
    T* ge = grad_log_emit ? grad_log_emit + b * U * Tn : nullptr;
    if (ge) std::fill(ge, ge + U * Tn, T(0));
    for (int64_t t = n - 1; t >= 0; --t) {
      const double xt = static_cast<double>(x[t]);
      const double lp = log_sigmoid(xt), lq = log_sigmoid(-xt);
      const double* at = A.row(t);
      double emit = 0;
      for (int64_t l = 0; l < L; ++l) {
        const double a = at[l], c = next[static_cast<size_t>(l + 1)];
        if (a == kNegInf || c == kNegInf) continue;
        const double gamma = std::exp(a + lp + static_cast<double>(E[l * Tn + t]) + c - logP);
        emit += gamma;
        if (ge) ge[l * Tn + t] = static_cast<T>(g * gamma);
      }
      if (gx) gx[t] = static_cast<T>(g * (emit - std::exp(lp)));
      if (t == 0) break;
      cur[static_cast<size_t>(L)] = next[static_cast<size_t>(L)] + lq;  // Bk[t, :]
      for (int64_t l = 0; l < L; ++l) {
        cur[static_cast<size_t>(l)] =
            log_add_exp(next[static_cast<size_t>(l)] + lq,
                        next[static_cast<size_t>(l + 1)] + lp + static_cast<double>(E[l * Tn + t]));
      }
      std::swap(next, cur);
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
