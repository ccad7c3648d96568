// mona/core/conditional_bernoulli.h: the conditional Bernoulli (CB) distribution of T
// independent trials B_t ~ Bernoulli(sigmoid(x_t)) given that exactly k are high
// (004 eqs. 3 and 6), its normaliser table over suffixes, exact marginals, and three exact
// samplers with their step probabilities and gradients: draft (DB, 004 eq. 8),
// ID-checking (IDB, eqs. 10-11) and bounded draft (BB, eqs. 12-13).
// Derivations: docs/math/conditional_bernoulli.md.
//
// ---- The table ---------------------------------------------------------------------------
// With S_t = {t, ..., T_b - 1} the suffix starting at trial t (0-based) and K_S the number of
// highs among the trials of S, the table holds, for t = 0 .. T_b and j = 0 .. k_b,
//
//   Q[t, j] = log P(K_{S_t} = j) = log R(j, S_t) - sum_{s >= t} log(1 + w_s)   (004 eq. 7)
//
//   Q[T_b, 0] = 0,  Q[T_b, j] = -inf (j > 0)
//   Q[t, j]   = logaddexp(log(1 - p_t) + Q[t+1, j],  log p_t + Q[t+1, j-1])   t = T_b-1 .. 0
//
// i.e. log R up to the additive offset sum_{s >= t} softplus(x_s), which cancels in every
// ratio the samplers use (w_t R(j-1, S_{t+1}) / R(j, S_t) = p_t exp(Q[t+1, j-1] - Q[t, j])).
// Q[t, j] = -inf exactly when j > T_b - t (infeasible); all other entries are finite and
// <= 0. Q[0, k] = log P(K = k), the Poisson-binomial log-probability. O(T k) time.
//
// Backward of the table (cb_table_backward), with G[t, j] = dL/dQ[t, j] accumulated from
// row 0 down (each row depends only on the next):
//   a = exp(log(1 - p_t) + Q[t+1, j] - Q[t, j]),  c = exp(log p_t + Q[t+1, j-1] - Q[t, j])
//   G[t+1, j] += G[t, j] a,   G[t+1, j-1] += G[t, j] c,   dL/dx_t += G[t, j] (c - p_t)
// (a + c = 1: a convex split, so the reverse scan is as stable as the forward one).
//
// ---- The distribution and its samplers (all O(T k) given the table) ----------------------
//   log P(b | k)          = sum_t [b_t log p_t + (1 - b_t) log(1 - p_t)] - Q[0, k]   (eq. 3)
//   P(b_t = 1 | k)        = marginal, computed as d Q[0, k] / d x_t + p_t
//   d log P(b | k) / dx_t = b_t - P(b_t = 1 | k)
// IDB (eq. 10), trial t with j = k - (highs before t) still to place:
//   P(b_t = 1 | j) = p_t exp(Q[t+1, j-1] - Q[t, j]); step log-prob stored for every t.
// BB (eq. 12), r-th high (r = 1 .. k) after the previous one at t_{r-1} (t_0 = -1):
//   P(t_r = t | t_{r-1}) = p_t exp(Q[t+1, k-r] + sum_{t_{r-1} < s < t} log(1 - p_s)
//                                  - Q[t_{r-1}+1, k-r+1]),        t_{r-1} < t <= T_b - 1 - (k-r)
// DB (eq. 8), j-th draft (j = 1 .. k) from the not yet drafted set U_{j-1}:
//   P(t_j = t | U_{j-1}) = P(b_t = 1 | CB on U_{j-1} with k-j+1 highs) / (k - j + 1).
//   Its step log-probs are read from a table over the permuted order (t_1, ..., t_k, the
//   other trials), in which U_j is a suffix, so evaluating them costs O(T k), not O(T k^2).
//   Drawing a DB sample = drawing the set from the CB and a uniform order (004 eq. 9: every
//   order of a set has probability P(A | k) / k!).
// The backward (reverse-time, 004 eq. 25) IDB/BB is the same call on reversed logits.
//
// ---- Precision and memory ----------------------------------------------------------------
// Both dtypes run the table recursion, its adjoint and every sum in double and round each
// output once: a float result is the double one to within one float ulp, and a seed draws
// the same sample in both (barring a uniform within double rounding of a step probability).
// cb_table<float> writes the double table rounded to float. That rounded table is too coarse
// to be read: an entry |Q| ~ sum_{s >= t} |x_s| (3e4 at T = 20,000, logits N(0, 3),
// k = 100) carries an absolute error of |Q| 2^-24, a relative error of every ratio
// exp(Q[t+1, .] - Q[t, .]); with float tables the marginals there summed to 195 instead of
// 100. So the functions below that take `table` read it only in double: the caller's table
// for T = double; for T = float they check it for null and recompute the rows they need
// from the logits, an O(T k) pass per call (cb_log_prob, the IDB/BB step log-probs and the
// IDB/BB samplers then cost O(T k), not O(T)). The DB step log-probs build their own table
// over the permuted order, in double for both dtypes. A table computed inside a call is kept
// whole up to 2^22 entries (32 MiB) and above that recomputed from every ceil(sqrt(T))-th
// row, block by block: about 2 sqrt(T) (k + 1) doubles per row in flight (5 MB at
// T = 100,000, k = 1,000, where the whole table would be 800 MB) for one more O(T k) pass.
// Recomputed rows are the same arithmetic, so results do not depend on the choice.
//
// Shapes ([B, T] notation; lengths and padding as in mona/core/grid.h). The CB uses a Grid
// with batch = B, in_len = T, in_lens = T_b per row, out_len = K (the largest k; tables are
// K + 1 wide) and out_lens = k [B] (null: k = K for every row):
//   logits, grad_logits, b, marginals, IDB step log-probs:     [B, T]
//   table, grad_table:                                          [B, T + 1, K + 1]
//   positions (BB, increasing) / order (DB, draft order), BB/DB step log-probs:  [B, K]
//   log_prob, grad_log_prob:                                    [B]
// b holds 0/1 values of type T. Padding (t >= T_b, t > T_b in the table, j or r >= k_b,
// j > k_b in the table) is written exactly 0 (positions/order padding: 0 as well).
//
// Errors (mona::Error naming the argument, the expectation and the value): null pointers;
// negative sizes; in_lens outside [0, T]; k[b] < 0, k[b] > K or k[b] > in_lens[b];
// non-finite logits; b not 0/1 or sum_t b[b, t] != k[b]; positions not increasing / order
// not distinct, or outside [0, T_b); non-finite incoming gradients.
//
// Threads: batch elements in parallel (OpenMP). Samplers draw one 64-bit seed per row from
// the caller's Rng first, so the draws do not depend on the number of threads.
#pragma once

#include <cstdint>

#include "mona/core/grid.h"
#include "mona/core/rng.h"

namespace mona::core {

/// Suffix table Q [B, T + 1, K + 1] (see the header comment) from logits [B, T].
template <class T>
void cb_table(const T* logits, T* table, const Grid& grid);

/// Backward of cb_table: grad_logits [B, T] from grad_table = dL/dQ [B, T + 1, K + 1] (entries
/// that are padding or -inf in the table are ignored). The general adjoint: any function of
/// table entries and logits (step log-probs, normalisers) differentiates through it.
template <class T>
void cb_table_backward(const T* grad_table, const T* logits, const T* table, T* grad_logits,
                       const Grid& grid);

/// log P(b | k) (004 eq. 3): logits, b [B, T], table -> log_prob [B].
template <class T>
void cb_log_prob(const T* logits, const T* b, const T* table, T* log_prob, const Grid& grid);

/// Backward of cb_log_prob: grad_logits[b, t] = grad_log_prob[b] * (b_t - P(b_t = 1 | k)).
template <class T>
void cb_log_prob_backward(const T* grad_log_prob, const T* logits, const T* b, const T* table,
                          T* grad_logits, const Grid& grid);

/// Exact marginals P(b_t = 1 | k) [B, T] (sum_t = k); O(T k).
template <class T>
void cb_marginals(const T* logits, const T* table, T* marginals, const Grid& grid);

/// IDB step log-probs log P(b_t | k - r_{t-1}) [B, T] of a given b (004 eq. 11's factors;
/// they sum to log P(b | k)).
template <class T>
void cb_idb_step_log_probs(const T* logits, const T* b, const T* table, T* step_log_probs,
                           const Grid& grid);
/// Backward: grad_logits from grad_step [B, T].
template <class T>
void cb_idb_step_log_probs_backward(const T* grad_step, const T* logits, const T* b,
                                    const T* table, T* grad_logits, const Grid& grid);

/// BB step log-probs log P(t_r | t_{r-1}, k - r) [B, K] of the highs of b in increasing
/// order (004 eq. 13's factors; they sum to log P(b | k)).
template <class T>
void cb_bb_step_log_probs(const T* logits, const T* b, const T* table, T* step_log_probs,
                          const Grid& grid);
/// Backward: grad_logits from grad_step [B, K].
template <class T>
void cb_bb_step_log_probs_backward(const T* grad_step, const T* logits, const T* b,
                                   const T* table, T* grad_logits, const Grid& grid);

/// DB step log-probs log P(t_j | A_{j-1}, k) [B, K] of the draft order `order` [B, K]
/// (004 eq. 8; they sum to log P(set | k) - log k!). Builds its own table over the permuted
/// order: O(T k) time and memory per row.
template <class T>
void cb_db_step_log_probs(const T* logits, const int64_t* order, T* step_log_probs,
                          const Grid& grid);
/// Backward: grad_logits from grad_step [B, K].
template <class T>
void cb_db_step_log_probs_backward(const T* grad_step, const T* logits, const int64_t* order,
                                   T* grad_logits, const Grid& grid);

/// IDB sampler (004 eq. 10, trials in the order t = 0 .. T_b - 1): b [B, T] and its step
/// log-probs [B, T] (either output may be null except b). O(T) per row given the table.
template <class T>
void cb_sample_idb(const T* logits, const T* table, Rng& rng, T* b, T* step_log_probs,
                   const Grid& grid);

/// BB sampler (004 eq. 12): b [B, T], positions [B, K] (the highs, increasing) and step
/// log-probs [B, K]. Inverse-CDF scans that together visit each trial once: O(T) per row
/// given the table. positions and step_log_probs may be null.
template <class T>
void cb_sample_bb(const T* logits, const T* table, Rng& rng, T* b, int64_t* positions,
                  T* step_log_probs, const Grid& grid);

/// DB sampler (004 eq. 8): b [B, T], draft order [B, K] and step log-probs [B, K] (may be
/// null). The set is drawn from the CB with the table, its order uniformly; O(T k) per row.
template <class T>
void cb_sample_db(const T* logits, const T* table, Rng& rng, T* b, int64_t* order,
                  T* step_log_probs, const Grid& grid);

}  // namespace mona::core
