// mona/core/cb_marginal.h: exact marginal likelihood of a label sequence under the
// conditional Bernoulli emission model, log P(c) = log sum_b P(b) P(c | b) (004 eqs. 34, 36),
// and its gradients. Derivations: docs/math/conditional_bernoulli.md, sec. 6.
//
// Model: trial t emits (b_t = 1) with p_t = sigmoid(x_t), independently; the l-th emission,
// at frame t_l, produces label c_l with probability e[l, t_l] = P(c_l | t_l, c_{<l}), given
// here as log_emit[b, l, t] (the caller gathers it, e.g. from a log-softmax over the
// vocabulary at the label c_l). With L labels exactly L trials must be high:
//   P(c) = sum_{t_1 < ... < t_L} prod_t p_t^{b_t} (1 - p_t)^{1 - b_t} prod_l e[l, t_l].
//
// Eq. 34 (cb_marginal_log_likelihood): P(c) = P(L) sum over BB paths, an HMM whose
// transition P(t_l | t_{l-1}, L - l) (004 eq. 12) factorises into a term of the target
// state and a term of the source state. With Q the suffix table of cb_table for k = L
// (Q[t, j] = log P(K_{S_t} = j)), ls_t = log p_t, lq_t = log(1 - p_t), 0-based l and t:
//
//   M_1(t)     = -Q[0, L] + sum_{s < t} lq_s                             (t_0 = -1, "before 0")
//   alpha_l(t) = log_emit[l-1, t] + ls_t + Q[t+1, L-l] + M_l(t)               (target term)
//   M_{l+1}(0) = -inf,  M_{l+1}(t+1) = logaddexp(M_{l+1}(t) + lq_t,
//                                               alpha_l(t) - Q[t+1, L-l])      (source term)
//   log P(c)   = Q[0, L] + logsumexp_t alpha_L(t)
//
// M is a running log prefix sum, so each level costs O(T) and the whole O(L T), not the
// O(L T^2) of a dense transition matrix. No quantity grows with T (the prefix sums of
// lq that would cancel between source and target are carried inside M).
//
// Eq. 36 (cb_marginal_log_likelihood_ctc): the same sum as a CTC-like lattice whose blank
// is "no emission" and which does not merge repeats:
//   A[0, 0] = 0,  A[t+1, l] = logaddexp(A[t, l] + lq_t,  A[t, l-1] + ls_t + log_emit[l-1, t])
//   log P(c) = A[T_b, L]
//
// Backward (both forms compute the same function; the gradient uses eq. 36's
// forward-backward), with gamma[l, t] = P(t_l = t | c) the alignment posterior:
//   d log P(c) / d log_emit[l, t] = gamma[l, t]
//   d log P(c) / d x_t            = sum_l gamma[l, t] - p_t       (= E[b_t | c] - p_t)
//
// Shapes (Grid: batch B, out_len U = largest L, in_len T, in_lens = T_b, out_lens = L_b):
//   logits, grad_logits: [B, T];  log_emit, grad_log_emit: [B, U, T];
//   log_likelihood, grad_log_likelihood: [B].
// Padding (t >= T_b, l >= L_b) of gradients is written exactly 0. L_b = 0 gives
// log P(c) = log P(K = 0) = sum_t lq_t; T_b = L_b = 0 gives 0.
//
// Errors (mona::Error naming the argument, the expectation and the value): null pointers;
// negative sizes; lengths outside [0, T] / [0, U]; out_lens[b] > in_lens[b] (more labels
// than frames: P(c) = 0); non-finite logits, log_emit or grad_log_likelihood in the valid
// region.
//
// Precision: both dtypes compute in double (tables, lattices, sums) and round each output
// once, so a float result is the double one to within one float ulp. (Float lattices fail
// for long inputs: entries of magnitude ~ T carry absolute errors of T 2^-24, which become
// relative errors of the posteriors exp(A + ... + Bk - log P(c)).)
//
// Threads: batch elements in parallel (OpenMP). Memory per row in flight: the forward reads
// the suffix table [T_b + 1, L_b + 1] row by row in increasing t, the backward the forward
// lattice A in decreasing t (rolling Bk alongside, 2 (L_b + 1) doubles); each is kept whole
// in double up to 2^22 entries (32 MiB) and above that recomputed from every
// ceil(sqrt(T_b))-th row: about 2 sqrt(T_b) (L_b + 1) doubles (5 MB at T = 100,000,
// L = 1,000) for one more O(L T) pass. The CTC form needs L_b + 1 doubles.
#pragma once

#include <cstdint>

#include "mona/core/grid.h"

namespace mona::core {

/// log P(c) by the forward algorithm over the BB transitions (004 eq. 34), O(L T).
template <class T>
void cb_marginal_log_likelihood(const T* logits, const T* log_emit, T* log_likelihood,
                                const Grid& grid);

/// log P(c) by the CTC-like lattice (004 eq. 36), O(L T): the cross-check of eq. 34.
template <class T>
void cb_marginal_log_likelihood_ctc(const T* logits, const T* log_emit, T* log_likelihood,
                                    const Grid& grid);

/// Backward: grad_logits [B, T] and grad_log_emit [B, U, T] (either may be null) from
/// grad_log_likelihood [B].
template <class T>
void cb_marginal_log_likelihood_backward(const T* grad_log_likelihood, const T* logits,
                                         const T* log_emit, T* grad_logits, T* grad_log_emit,
                                         const Grid& grid);

}  // namespace mona::core
