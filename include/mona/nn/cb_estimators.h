// mona/nn/cb_estimators.h: gradient estimators for hard monotonic alignment models trained
// with latent emit/no-emit decisions (004 sections 2.2-2.4). Each function returns a scalar
// loss whose gradient with respect to `logits` and `log_emit` is the estimator; its value is
// minus the (Monte-Carlo) objective, so it can be logged as is.
//
// Model (pointwise emissions, as in 004's toy problem and eq. 34): frame t of row b emits
// with p_t = sigmoid(logits[b, t]), independently; the l-th emission, at frame t_l, scores
// label c_l with log_emit[b, l, t_l] = log P(c_l | t_l, c_<l) (the caller gathers it at the
// reference labels). in_lens [B] are the frames T_b (default T), out_lens [B] the labels
// L_b <= T_b (default U). Shapes: logits [B, T], log_emit [B, U, T].
//
// Objectives. The REINFORCE estimators target the bound of 004 eq. 19,
//   J = log P(L) + E_{b ~ CB(L)} [ sum_l log_emit[l, t_l(b)] ]          (<= log P(c)),
// whose log P(L) term (Poisson-binomial) is differentiated exactly. The exact marginal
// (004 eq. 34) targets log P(c) itself. The loss is the mean over rows (and over the M
// samples of a row) of -J resp. -log P(c).
//
//   estimator                 004      unbiased for grad J?  sampler / score function
//   reinforce_bernoulli_loss  eq. 1    no (see below)        independent Bernoullis, forced to L
//   cb_reinforce_loss         eq. 21   yes                   CB draw, d log P(b | L), total reward
//   db_reinforce_loss         eq. 22   yes                   DB draft, d log P(A_L | L)
//   idb_reinforce_loss        eq. 24   yes                   IDB, per frame, reward to go
//                             eq. 25   yes                   (backward order, or alternating)
//   bb_reinforce_loss         eq. 27   yes                   BB, per label, reward to go
//   cb_straight_through_loss  eqs. 28-31, 33   no (biased)   Concrete relaxation of the IDB
//                                                            (binary) or BB (categorical) steps
//   cb_marginal_loss          eq. 34   exact gradient of log P(c) (no sampling)
//
// Biases, stated: (a) reinforce_bernoulli_loss (Luo et al.'s objective, 004 sec. 1) draws
// b_t ~ Bernoulli(p_t) but forces b_t = 0 once L highs are drawn and b_t = 1 when the frames
// left equal the labels missing, while scoring every step with the unforced log P(b_t); the
// draws are then not from the distribution the score function assumes, and there is no
// log P(L) term, so its mean is not grad J (nor the gradient of any fixed objective).
// (b) the straight-through estimators replace d b / d theta by the derivative of the relaxed
// sample (004 sec. 2.3) and ignore that later steps depend on earlier hard decisions: biased,
// with a bias that depends on the temperature. Both are kept as the baselines 004 compares
// against; the tests measure and print their deviation from the exact gradient.
//
// Variance reduction. All REINFORCE estimators subtract a baseline from the reward (to go);
// any baseline that does not depend on the row's own sample keeps them unbiased:
//   kNone; kMovingAverage (a MovingAverageBaseline owned by the caller, one value per
//   position: frame for eq. 1 / IDB, label for BB, a single one for CB/DB; read before and
//   updated after the draw); kLeaveOneOut (mean of the other M - 1 samples of the same row,
//   or of the same group of rows, see CbEstimatorOptions::group; needs M * group >= 2).
//
// Randomness comes from the caller's mona::core::Rng; a seed gives the same draws.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mona/core/rng.h"

namespace mona::nn {

/// Exponential moving average of returns, one value per position (frame or label index),
/// 0 for positions never seen. Deterministic; not thread-safe.
class MovingAverageBaseline {
 public:
  /// Throws mona::ArgumentError for decay outside [0, 1).
  explicit MovingAverageBaseline(double decay = 0.9);
  /// Current baseline for positions 0 .. n-1 ([n], float64).
  at::Tensor values(int64_t n) const;
  /// Folds in the mean of returns [R, n] over the rows where mask [R, n] (bool) is true, per
  /// position: v = decay * v + (1 - decay) * mean (the first observation sets v = mean).
  /// returns is a CPU float32/float64 tensor, mask a CPU bool tensor of the same sizes;
  /// anything else throws mona::ArgumentError and leaves the baseline unchanged.
  void update(const at::Tensor& returns, const at::Tensor& mask);
  double decay() const { return decay_; }

 private:
  double decay_;
  std::vector<double> value_;
  std::vector<char> seen_;
};

enum class CbBaseline { kNone, kMovingAverage, kLeaveOneOut };
/// Order of the IDB / BB factorisation: forward (004 eq. 23/26), backward (eq. 25: reversed
/// frames and labels), or alternating (forward when `step` is even, backward when odd).
enum class CbDirection { kForward, kBackward, kAlternate };

struct CbEstimatorOptions {
  int64_t samples = 1;                    ///< M: samples per row (>= 1)
  /// Rows come in groups of `group` consecutive copies of one sequence (the batch size must
  /// be a multiple). Only kLeaveOneOut uses it: its baseline averages over the other
  /// samples of the group (M * group of them), so a caller may repeat rows itself to get
  /// one gradient row per sample (the toy experiment's variance).
  int64_t group = 1;
  CbBaseline baseline = CbBaseline::kNone;
  MovingAverageBaseline* moving_average = nullptr;  ///< required for kMovingAverage
  CbDirection direction = CbDirection::kForward;    ///< IDB and BB only
  int64_t step = 0;                       ///< update counter, for kAlternate
  double temperature = 1.0;               ///< Concrete temperature lambda > 0 (ST only)
};

/// Monitoring values of the last call (mean over rows and samples).
struct CbEstimatorStats {
  double reward = 0;           ///< sum_l log_emit[l, t_l] of the drawn alignments
  double log_prob_length = 0;  ///< log P(L) (0 for the independent-Bernoulli estimator)
};

/// 004 eq. 1: REINFORCE with independent Bernoullis (Luo et al.), forced to L highs. Biased.
at::Tensor reinforce_bernoulli_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                                    core::Rng& rng, const CbEstimatorOptions& opts = {},
                                    const at::Tensor& in_lens = {},
                                    const at::Tensor& out_lens = {},
                                    CbEstimatorStats* stats = nullptr);
/// 004 eq. 21: global CB REINFORCE.
at::Tensor cb_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts = {},
                             const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {},
                             CbEstimatorStats* stats = nullptr);
/// 004 eq. 22: global DB REINFORCE (same expectation as eq. 21; the score is that of the
/// ordered draft, whose gradient equals the CB's for the same set, 004 eq. 9).
at::Tensor db_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts = {},
                             const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {},
                             CbEstimatorStats* stats = nullptr);
/// 004 eqs. 24-25: frame-wise IDB REINFORCE (reward to go), forward/backward/alternating.
at::Tensor idb_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                              core::Rng& rng, const CbEstimatorOptions& opts = {},
                              const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {},
                              CbEstimatorStats* stats = nullptr);
/// 004 eq. 27: label-wise BB REINFORCE (reward to go), forward/backward/alternating.
at::Tensor bb_reinforce_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts = {},
                             const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {},
                             CbEstimatorStats* stats = nullptr);

/// Which steps the straight-through estimator relaxes: the IDB's binary decisions (004
/// eq. 31 per frame) or the BB's categorical drafts (eq. 28 per label). (The DB's drafts,
/// which the paper also mentions, would need the CB marginals of every draft's remaining set
/// differentiably: O(T k^2); not provided.)
enum class CbRelaxation { kIdb, kBb };

/// 004 sec. 2.3: straight-through with the Concrete relaxation. Forward: exact hard draws
/// (Gumbel-max / logistic threshold of each step's exact distribution, so b ~ CB(L)); the
/// objective log P(L) + sum_t b_t log_emit[l_t, t] (eq. 33); backward: d b / d theta taken as
/// that of the relaxed sample at temperature opts.temperature. Biased.
at::Tensor cb_straight_through_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                                    core::Rng& rng, CbRelaxation relaxation,
                                    const CbEstimatorOptions& opts = {},
                                    const at::Tensor& in_lens = {},
                                    const at::Tensor& out_lens = {},
                                    CbEstimatorStats* stats = nullptr);

/// 004 eq. 34: -mean_b log P(c) (exact, deterministic): the reference gradient.
at::Tensor cb_marginal_loss(const at::Tensor& logits, const at::Tensor& log_emit,
                            const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {});

/// All of the above behind one switch (the toy experiment's command line).
enum class CbEstimator {
  kReinforceBernoulli,  ///< "reinforce"
  kCb,                  ///< "cb"
  kDb,                  ///< "db"
  kIdb,                 ///< "idb"
  kBb,                  ///< "bb"
  kStraightThroughIdb,  ///< "st-idb"
  kStraightThroughBb,   ///< "st-bb"
  kExact,               ///< "exact"
};
std::string cb_estimator_name(CbEstimator e);
/// Inverse of cb_estimator_name; throws mona::ArgumentError listing the accepted names.
CbEstimator parse_cb_estimator(const std::string& name);
/// True for the estimators whose mean is the gradient of their objective (J, or log P(c)
/// for kExact).
bool cb_estimator_unbiased(CbEstimator e);
at::Tensor cb_estimator_loss(CbEstimator e, const at::Tensor& logits, const at::Tensor& log_emit,
                             core::Rng& rng, const CbEstimatorOptions& opts = {},
                             const at::Tensor& in_lens = {}, const at::Tensor& out_lens = {},
                             CbEstimatorStats* stats = nullptr);

}  // namespace mona::nn
