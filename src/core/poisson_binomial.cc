// Poisson-binomial distribution in log space (004 eqs. 4, 7): see
// include/mona/core/poisson_binomial.h and docs/math/conditional_bernoulli.md.
#include "mona/core/poisson_binomial.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "cb_rows.h"
#include "parallel.h"
#include "validate.h"

namespace mona::core {
namespace {

template <class T>
void validate_logits(const char* kernel, const T* logits, const detail::ValueGrid& g) {
  g.validate(kernel);
  if (g.numel() > 0) detail::check_ptr(logits, kernel, "logits");
  detail::check_finite(kernel, "logits", logits, g);
}

void validate_k(const char* kernel, const int64_t* k, const Grid& g) {
  if (g.batch > 0) detail::check_ptr(k, kernel, "k");
  for (int64_t b = 0; b < g.batch; ++b) {
    mona::detail::check(k[b] >= 0, kernel, ": k[", b, "] must be >= 0, got ", k[b]);
    mona::detail::check(k[b] <= g.T_of(b), kernel, ": k[", b, "] must be <= in_lens[", b,
                        "]=", g.T_of(b), " (cannot have more highs than trials), got ", k[b]);
  }
}

// The prefix recursion of the header, F[t + 1, :] from F[t, :], over the counts 0 .. kk
// (kk <= n): returns F[n, 0 .. kk] = log P(B_0 + ... + B_{n-1} = k), in double. Adding
// trial t is the step of the suffix table (detail::suffix_step, cb_rows.h: the same
// recursion read from the other end), over counts up to min(kk, t + 1); the entry t + 1 it
// reads before the counts reach kk is still -inf, as the recursion wants.
template <class T>
std::vector<double> prefix_counts(const T* x, int64_t n, int64_t kk) {
  std::vector<double> F(static_cast<size_t>(kk + 1), -std::numeric_limits<double>::infinity());
  std::vector<double> next = F;
  F[0] = 0;
  for (int64_t t = 0; t < n; ++t) {
    detail::suffix_step(x[t], F.data(), next.data(), std::min(kk, t + 1));
    std::swap(F, next);
  }
  return F;
}

}  // namespace

template <class T>
void poisson_binomial_log_pmf(const T* logits, T* log_pmf, int64_t batch, int64_t in_len,
                              const int64_t* in_lens) {
  const char* kName = "poisson_binomial_log_pmf";
  const detail::ValueGrid g = detail::rows_grid(batch, in_len, in_lens);
  validate_logits(kName, logits, g);
  if (batch > 0) detail::check_ptr(log_pmf, kName, "log_pmf");
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(batch, double(batch) * in_len * in_len))
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = g.T_of(b);
    const T* x = logits + b * in_len;
    // F[k] = log P(K = k), k = 0 .. n, in double (src/core/cb_rows.h).
    const std::vector<double> F = prefix_counts(x, n, n);
    T* out = log_pmf + b * (in_len + 1);
    for (int64_t k = 0; k <= n; ++k) out[k] = static_cast<T>(F[static_cast<size_t>(k)]);
    std::fill(out + n + 1, out + in_len + 1, T(0));
  }
}

template <class T>
void poisson_binomial_moments(const T* logits, T* mean, T* variance, int64_t batch,
                              int64_t in_len, const int64_t* in_lens) {
  const char* kName = "poisson_binomial_moments";
  const detail::ValueGrid g = detail::rows_grid(batch, in_len, in_lens);
  validate_logits(kName, logits, g);
#pragma omp parallel for schedule(static) if (detail::worth_parallel(batch, double(batch) * in_len))
  for (int64_t b = 0; b < batch; ++b) {
    const T* x = logits + b * in_len;
    double m = 0, v = 0;
    for (int64_t t = 0; t < g.T_of(b); ++t) {
      const double xt = static_cast<double>(x[t]);
      const double p = std::exp(log_sigmoid(xt)), q = std::exp(log_sigmoid(-xt));
      m += p;
      v += p * q;
    }
    if (mean) mean[b] = static_cast<T>(m);
    if (variance) variance[b] = static_cast<T>(v);
  }
}

template <class T>
void poisson_binomial_log_prob(const T* logits, const int64_t* k, T* log_prob, int64_t batch,
                               int64_t in_len, const int64_t* in_lens) {
  const char* kName = "poisson_binomial_log_prob";
  const detail::ValueGrid g = detail::rows_grid(batch, in_len, in_lens);
  validate_logits(kName, logits, g);
  validate_k(kName, k, g);
  if (batch > 0) detail::check_ptr(log_prob, kName, "log_prob");
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(batch, double(batch) * in_len * in_len))
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = g.T_of(b), kk = k[b];
    const T* x = logits + b * in_len;
    // The prefix recursion of log_pmf truncated to counts <= k: O(T k) time, O(k) memory.
    log_prob[b] = static_cast<T>(prefix_counts(x, n, kk)[static_cast<size_t>(kk)]);
  }
}

template <class T>
void poisson_binomial_log_prob_backward(const T* grad_log_prob, const T* logits,
                                        const int64_t* k, T* grad_logits, int64_t batch,
                                        int64_t in_len, const int64_t* in_lens) {
  const char* kName = "poisson_binomial_log_prob_backward";
  const detail::ValueGrid g = detail::rows_grid(batch, in_len, in_lens);
  validate_logits(kName, logits, g);
  validate_k(kName, k, g);
  if (batch > 0) detail::check_ptr(grad_log_prob, kName, "grad_log_prob");
  detail::check_finite(kName, "grad_log_prob", grad_log_prob, detail::vector_grid(batch));
  if (g.numel() > 0) detail::check_ptr(grad_logits, kName, "grad_logits");
  // d log P(K = k) / dx = dQ[0, k] / dx: the suffix table's adjoint with one seed at (0, k),
  // the table in double, whole or checkpointed (src/core/cb_rows.h).
#pragma omp parallel for schedule(dynamic) if (detail::worth_parallel(batch, double(batch) * in_len * in_len))
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t n = g.T_of(b), kk = k[b];
    const T* x = logits + b * in_len;
    const double seed = static_cast<double>(grad_log_prob[b]);
    detail::SuffixRows<T> rows(x, n, kk);
    std::vector<double> gx(static_cast<size_t>(n), 0.0);
    detail::table_adjoint(
        x, n, kk, rows, [&](int64_t t, int64_t j) { return (t == 0 && j == kk) ? seed : 0.0; },
        gx.data(), nullptr);
    T* out = grad_logits + b * in_len;
    for (int64_t t = 0; t < n; ++t) out[t] = static_cast<T>(gx[static_cast<size_t>(t)]);
    std::fill(out + n, out + in_len, T(0));
  }
}

#define MONA_INSTANTIATE(T)                                                                  \
  template void poisson_binomial_log_pmf<T>(const T*, T*, int64_t, int64_t, const int64_t*); \
  template void poisson_binomial_moments<T>(const T*, T*, T*, int64_t, int64_t,              \
                                            const int64_t*);                                 \
  template void poisson_binomial_log_prob<T>(const T*, const int64_t*, T*, int64_t, int64_t, \
                                             const int64_t*);                                \
  template void poisson_binomial_log_prob_backward<T>(const T*, const T*, const int64_t*, T*, \
                                                      int64_t, int64_t, const int64_t*);
MONA_INSTANTIATE(float)
MONA_INSTANTIATE(double)
#undef MONA_INSTANTIATE

}  // namespace mona::core
