// mona/nn/conditional_bernoulli.h: differentiable LibTorch functions over the Poisson-binomial
// and conditional Bernoulli (CB) kernels of mona/core (004 sec. 2.1, 2.4): log-probabilities,
// the suffix table, the exact samplers with differentiable step log-probabilities, and the
// exact marginal likelihood of 004 eq. 34. Math: docs/math/conditional_bernoulli.md.
//
// Conventions (as in mona/nn/functional.h): batch first, CPU float32/float64 tensors;
// `logits` [B, T] are x_t = log w_t (p_t = sigmoid(x_t)); `in_lens` [B] (int64, optional:
// undefined = T) are the valid trial counts T_b; `k` [B] (int64) the number of highs per row,
// 0 <= k[b] <= T_b. Entries past a length are exactly 0 in outputs and get zero gradient.
// Argument errors are mona::ArgumentError naming the function, the argument and the
// values found; value errors found by a kernel arrive as mona::Error.
//
// Gradients flow to `logits` (and to `log_emit` for the marginal likelihood); samples, k and
// lengths are not differentiable. The samplers take the caller's mona::core::Rng, so a seed
// gives the same draws whatever the thread count. Backward passes are first order:
// create_graph=True through one throws c10::NotImplementedError naming the function.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "mona/core/rng.h"

namespace mona::nn {

/// log P(K = k) of the Poisson-binomial (004 eq. 4): logits [B, T], k [B] -> [B].
/// d/dx_t = P(b_t = 1 | k) - p_t. O(T k) per row.
at::Tensor poisson_binomial_log_prob(const at::Tensor& logits, const at::Tensor& k,
                                     const at::Tensor& in_lens = {});

/// log P(b | k) of the CB (004 eq. 3) with k = sum_t b_t: logits, b [B, T] (0/1 values, same
/// dtype as logits) -> [B]. d/dx_t = b_t - P(b_t = 1 | k).
at::Tensor cb_log_prob(const at::Tensor& logits, const at::Tensor& b,
                       const at::Tensor& in_lens = {});

/// The CB suffix table Q[b, t, j] = log P(sum_{s >= t} B_s = j) (004 eq. 7 normalised):
/// logits [B, T], k [B] -> [B, T + 1, K + 1] with K = max k. Infeasible entries (j > T_b - t)
/// are -inf; padding is 0. Differentiable (the adjoint of the table recursion); gradient
/// entries arriving at -inf or padding entries are ignored. The building block of the
/// straight-through estimators (mona/nn/cb_estimators.h).
at::Tensor cb_log_table(const at::Tensor& logits, const at::Tensor& k,
                        const at::Tensor& in_lens = {});

/// Exact marginals P(b_t = 1 | k) [B, T] (not differentiable).
at::Tensor cb_marginals(const at::Tensor& logits, const at::Tensor& k,
                        const at::Tensor& in_lens = {});

/// Step log-probabilities of a given sample, differentiable in logits:
///  - IDB (004 eqs. 10-11): b [B, T] -> [B, T], log P(b_t | highs still to place);
///  - BB (004 eqs. 12-13): b [B, T] -> [B, K] (K = max_b sum_t b_t), log P(t_r | t_{r-1});
///  - DB (004 eq. 8): draft order [B, K] (int64) and k [B] -> [B, K], log P(t_j | A_{j-1}).
/// IDB and BB steps sum to log P(b | k); DB steps to log P(set | k) - log k!.
at::Tensor cb_idb_step_log_probs(const at::Tensor& logits, const at::Tensor& b,
                                 const at::Tensor& in_lens = {});
at::Tensor cb_bb_step_log_probs(const at::Tensor& logits, const at::Tensor& b,
                                const at::Tensor& in_lens = {});
at::Tensor cb_db_step_log_probs(const at::Tensor& logits, const at::Tensor& order,
                                const at::Tensor& k, const at::Tensor& in_lens = {});

/// An exact CB draw and its factorisation into steps.
struct CbSample {
  at::Tensor b;               ///< [B, T], 0/1 in the dtype of logits
  at::Tensor positions;       ///< [B, K] int64: BB the highs increasing, DB the draft order;
                              ///< undefined for IDB. Padding (r >= k[b]) is 0.
  at::Tensor step_log_probs;  ///< differentiable in logits: IDB [B, T], BB/DB [B, K]
};

/// Exact samplers of the CB given k [B] (004 eqs. 8, 10, 12). IDB scans the trials in order
/// t = 0 .. T_b - 1 (reverse the logits for the backward order of 004 eq. 25).
CbSample cb_sample_idb(const at::Tensor& logits, const at::Tensor& k, core::Rng& rng,
                       const at::Tensor& in_lens = {});
CbSample cb_sample_bb(const at::Tensor& logits, const at::Tensor& k, core::Rng& rng,
                      const at::Tensor& in_lens = {});
CbSample cb_sample_db(const at::Tensor& logits, const at::Tensor& k, core::Rng& rng,
                      const at::Tensor& in_lens = {});

/// Exact log P(c) under the CB emission model (004 eq. 34, forward algorithm, O(L T)):
/// logits [B, T] and log_emit [B, U, T] (log_emit[b, l, t] = log P(c_l | t_l = t, c_<l)) with
/// in_lens [B] (T_b, default T) and out_lens [B] (labels L_b <= T_b, default U) -> [B].
/// Differentiable in logits (E[b_t | c] - p_t) and log_emit (alignment posteriors).
at::Tensor cb_marginal_log_likelihood(const at::Tensor& logits, const at::Tensor& log_emit,
                                      const at::Tensor& in_lens = {},
                                      const at::Tensor& out_lens = {});

}  // namespace mona::nn
