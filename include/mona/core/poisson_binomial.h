// mona/core/poisson_binomial.h: the Poisson-binomial distribution of K = sum_t B_t, the
// number of highs among T independent Bernoulli trials B_t ~ Bernoulli(sigmoid(x_t))
// (004 eq. 4), in log space, with its moments and the gradient of log P(K = k).
//
// Parameterisation: logits x_t = log w_t (004's odds w_t = p_t / (1 - p_t)), so
// p_t = sigmoid(x_t), log p_t = log_sigmoid(x_t), log(1 - p_t) = log_sigmoid(-x_t). Both are
// computed as min(x, 0) - log1p(exp(-|x|)): no exp of an unbounded quantity anywhere.
//
// log P(K = k) over a prefix of the trials, F[t, k] = log P(B_0 + ... + B_{t-1} = k):
//
//   F[0, 0] = 0,  F[0, k] = -inf (k > 0)
//   F[t+1, k] = logaddexp(log(1 - p_t) + F[t, k],  log p_t + F[t, k-1])       k = 0 .. t+1
//
// This is the recursion of 004 eq. 7's subset sum R (the paper defines R there; the
// recursion follows from splitting its subsets by whether they hold t),
// R(k, S u {t}) = R(k, S) + w_t R(k-1, S), divided by
// prod_{s in S u {t}} (1 + w_s): the normalised table log P(K_S = k) = log R(k, S) -
// sum_{s in S} log(1 + w_s) never grows with T (it is <= 0), whereas log R itself does. Both
// terms of every logaddexp are probabilities of disjoint events, so the recursion has no
// cancellation; each step adds one rounding error, O(T eps) in total in log space.
// log_pmf costs O(T^2) time and O(T) memory (all k = 0 .. T); poisson_binomial_log_prob,
// for one k, costs O(T k) by the same prefix recursion truncated to counts <= k, and its
// backward goes through the conditional Bernoulli table (mona/core/conditional_bernoulli.h).
//
// Precision: both dtypes run the recursions, tables and sums in double and round each output
// once, so a float result is the double one to within one float ulp. (Float tables fail for
// long inputs: an entry of -3e4, as at T = 20,000, carries an absolute error of 2e-3, which
// the gradient's split weights exp(Q[t+1, .] - Q[t, .]) turn into relative errors; the float
// gradients, which lie in [-1, 1], were off by up to 1.7 there.)
//
// Gradient (docs/math/conditional_bernoulli.md sec. 3):
//   d log P(K = k) / d x_t = P(B_t = 1 | K = k) - p_t,
// the conditional Bernoulli marginal minus the unconditional one; computed by the reverse
// scan of the suffix table (the adjoint of cb_table_backward), O(T k).
//
// Moments: E[K] = sum_t p_t, Var[K] = sum_t p_t (1 - p_t), p (1 - p) = sigmoid(x) sigmoid(-x).
//
// Memory per row in flight: log_pmf 2 (T + 1) doubles (two rows of F); log_prob 2 (k + 1);
// the backward the suffix table [T + 1, k + 1] in double, kept whole up to 2^22 entries
// (32 MiB) and above that recomputed from every ceil(sqrt(T))-th row: about 2 sqrt(T) (k + 1)
// doubles (5 MB at T = 100,000, k = 1,000; the whole table would be 800 MB) for one more
// O(T k) pass.
//
// Shapes ([B, T] notation, lengths and padding as in mona/core/grid.h):
//   logits, grad_logits: [B, T]; log_pmf: [B, T + 1] (entry k of row b valid for
//   k <= in_lens[b]); mean, variance, k, log_prob, grad_log_prob: [B].
// Padding (entries t >= in_lens[b], k > in_lens[b]) is written exactly 0. A row with
// in_lens[b] = 0 has log P(K = 0) = 0.
//
// Errors (mona::Error, the message names the argument, the expectation and the value):
//   null pointers for required arguments; negative sizes; in_lens outside [0, T];
//   k[b] < 0 or k[b] > in_lens[b]; non-finite logits in the valid region; non-finite
//   grad_log_prob.
//
// Threads: batch elements in parallel (OpenMP).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "mona/core/grid.h"

namespace mona::core {

/// log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)); finite for every finite x.
template <class T>
inline T log_sigmoid(T x) {
  return std::min(x, T(0)) - std::log1p(std::exp(-std::abs(x)));
}

/// log(exp(a) + exp(b)) without overflow; -inf if both are -inf.
template <class T>
inline T log_add_exp(T a, T b) {
  if (a < b) std::swap(a, b);
  if (b == -std::numeric_limits<T>::infinity()) return a;
  return a + std::log1p(std::exp(b - a));
}

/// log P(K = k) for k = 0 .. in_lens[b] (004 eq. 4): logits [B, T] -> log_pmf [B, T + 1].
/// O(T^2) time, O(T) memory per row.
template <class T>
void poisson_binomial_log_pmf(const T* logits, T* log_pmf, int64_t batch, int64_t in_len,
                              const int64_t* in_lens);

/// E[K] = sum_t p_t and Var[K] = sum_t p_t (1 - p_t): logits [B, T] -> mean, variance [B].
/// Either output may be null.
template <class T>
void poisson_binomial_moments(const T* logits, T* mean, T* variance, int64_t batch,
                              int64_t in_len, const int64_t* in_lens);

/// log P(K = k[b]) for one k per row: logits [B, T], k [B] -> log_prob [B]. O(T k) time,
/// O(k) memory (the prefix recursion of log_pmf truncated to counts <= k).
template <class T>
void poisson_binomial_log_prob(const T* logits, const int64_t* k, T* log_prob,
                               int64_t batch, int64_t in_len, const int64_t* in_lens);

/// Backward of poisson_binomial_log_prob: grad_logits[b, t] =
/// grad_log_prob[b] * (P(B_t = 1 | K = k[b]) - p_t). Padding of grad_logits is written 0.
/// O(T k) time (one pass more when the table is checkpointed); memory as above.
template <class T>
void poisson_binomial_log_prob_backward(const T* grad_log_prob, const T* logits,
                                        const int64_t* k, T* grad_logits, int64_t batch,
                                        int64_t in_len, const int64_t* in_lens);

}  // namespace mona::core
