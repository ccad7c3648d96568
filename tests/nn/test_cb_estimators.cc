// label: cb
// Tests of mona/nn/conditional_bernoulli.h (autograd wrappers) and mona/nn/cb_estimators.h
// (004 sec. 2.2-2.4): against the enumeration of all 2^T emission sequences for small T, the
// unbiased estimators' Monte-Carlo mean gradient must lie within 4 standard errors of the
// exact gradient of J = log P(L) + E_{b|L}[sum_l log_emit[l, t_l]] (004 eq. 19); the exact
// marginal's gradient must equal that of the enumerated log P(c); the biased estimators
// (eq. 1 with forcing, straight-through) have their deviation printed, not asserted.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <iostream>
#include <string>

#include "mona/nn/cb_estimators.h"
#include "mona/nn/conditional_bernoulli.h"
#include "util/nn_test_util.h"

namespace {

using mona::core::Rng;
using namespace mona::nn;
using torch::Tensor;

const auto kD = torch::TensorOptions().dtype(torch::kDouble);
const auto kL = torch::TensorOptions().dtype(torch::kLong);

// Tolerances. Deterministic comparisons are float64 against the enumeration of <= 2^8
// sequences, two different computations of sums of <= 8 terms of magnitude <= ~10: rounding
// ~1e-14 at most (measured <= 4.4e-16 on every OpenBLAS kernel family tried), so 1e-10 is
// loose but still sees any wrong term. The Monte-Carlo checks compare z-scores with 4: the
// samples come from mona's own generator and float64 probabilities, so another CPU's
// rounding could flip a draw only if a uniform fell within ~1e-16 of a probability.

// All 2^T binary vectors as [2^T, T] doubles.
Tensor all_binary(int64_t T) {
  const int64_t S = int64_t(1) << T;
  Tensor b = torch::zeros({S, T}, kD);
  auto a = b.accessor<double, 2>();
  for (int64_t s = 0; s < S; ++s)
    for (int64_t t = 0; t < T; ++t) a[s][t] = double((s >> t) & 1);
  return b;
}

struct Exact {
  Tensor J, logPc, logPL, mean_reward, var_reward;
};

// Enumeration for one row: x [T], E [L, T] (may require grad).
Exact enumerate(const Tensor& x, const Tensor& E, int64_t L) {
  const int64_t T = x.size(0);
  const Tensor B = all_binary(T);
  const Tensor keep = (B.sum(1) == double(L)).nonzero().squeeze(1);
  const Tensor Bk = B.index_select(0, keep);
  const Tensor logpb = (Bk * torch::log_sigmoid(x) + (1 - Bk) * torch::log_sigmoid(-x)).sum(1);
  Tensor rew = torch::zeros({Bk.size(0)}, kD);
  if (L > 0) {
    const Tensor li = (Bk.cumsum(1) - 1).clamp(0, L - 1).to(torch::kLong);
    rew = (Bk * E.gather(0, li)).sum(1);
  }
  Exact e;
  e.logPL = torch::logsumexp(logpb, 0);
  const Tensor w = torch::exp(logpb - e.logPL);
  e.mean_reward = (w * rew).sum();
  e.J = e.logPL + e.mean_reward;
  e.logPc = torch::logsumexp(logpb + rew, 0);
  e.var_reward = (w * (rew - e.mean_reward).pow(2)).sum();
  return e;
}

struct Problem {
  Tensor x0, E0;  // [T], [U, T]
  int64_t n, L;   // valid frames and labels (<= T, <= U)
};

Problem make_problem(int64_t T, int64_t U, int64_t n, int64_t L, uint64_t seed) {
  torch::manual_seed(seed);
  Problem p;
  p.x0 = torch::randn({T}, kD);
  p.E0 = -3 * torch::rand({U, T}, kD);
  p.n = n;
  p.L = L;
  return p;
}

// Exact gradient of J (or log P(c)) with respect to x [T] and E [U, T] (zero in padding).
std::pair<Tensor, Tensor> exact_grad(const Problem& p, bool marginal) {
  Tensor x = p.x0.narrow(0, 0, p.n).clone().requires_grad_();
  Tensor E = p.E0.narrow(0, 0, p.L).narrow(1, 0, p.n).clone().requires_grad_();
  const Exact e = enumerate(x, E, p.L);
  const auto g = torch::autograd::grad({marginal ? e.logPc : e.J}, {x, E}, {}, false, false,
                                       /*allow_unused=*/true);
  Tensor gx = torch::zeros_like(p.x0), gE = torch::zeros_like(p.E0);
  gx.narrow(0, 0, p.n).copy_(g[0]);
  if (p.L > 0) gE.narrow(0, 0, p.L).narrow(1, 0, p.n).copy_(g[1]);
  return {gx, gE};
}

struct Mc {
  Tensor mean_x, se_x, mean_E, se_E;  // per coordinate
  double reward = 0;
};

// R independent rows with the same problem: per-row gradients are independent estimates.
Mc run_estimator(CbEstimator est, const Problem& p, const CbEstimatorOptions& opts, int64_t R,
                 uint64_t seed) {
  const int64_t T = p.x0.size(0), U = p.E0.size(0);
  Tensor X = p.x0.unsqueeze(0).expand({R, T}).clone().requires_grad_();
  Tensor E = p.E0.unsqueeze(0).expand({R, U, T}).clone().requires_grad_();
  const Tensor il = torch::full({R}, p.n, kL), ol = torch::full({R}, p.L, kL);
  Rng rng(seed);
  CbEstimatorStats stats;
  Tensor loss = cb_estimator_loss(est, X, E, rng, opts, il, ol, &stats);
  loss.backward();
  // loss = -mean over rows: row gradient * R = minus the row's estimate.
  const Tensor gx = -X.grad() * double(R), gE = -E.grad() * double(R);
  Mc m;
  m.mean_x = gx.mean(0);
  m.se_x = gx.std(0) / std::sqrt(double(R));
  m.mean_E = gE.mean(0);
  m.se_E = gE.std(0) / std::sqrt(double(R));
  m.reward = stats.reward;
  return m;
}

// max over coordinates of |mean - exact| / (se + tiny): the z-score of the worst coordinate.
double worst_z(const Tensor& mean, const Tensor& se, const Tensor& exact) {
  return ((mean - exact).abs() / (se + 1e-9)).max().item<double>();
}

void expect_unbiased(CbEstimator est, const Problem& p, const CbEstimatorOptions& opts,
                     const std::string& what, int64_t R = 20000, uint64_t seed = 7) {
  SCOPED_TRACE(what);
  const auto [gx, gE] = exact_grad(p, false);
  const Mc m = run_estimator(est, p, opts, R, seed);
  const double zx = worst_z(m.mean_x, m.se_x, gx), zE = worst_z(m.mean_E, m.se_E, gE);
  std::cout << "[ " << what << " ] worst z: logits " << zx << ", log_emit " << zE
            << "; mean se(logits) " << m.se_x.mean().item<double>() << "\n";
  EXPECT_LE(zx, 4.0) << "mean " << m.mean_x << "\nexact " << gx << "\nse " << m.se_x;
  EXPECT_LE(zE, 4.0);
  // Padding gets exactly zero gradient.
  if (p.n < p.x0.size(0)) {
    EXPECT_EQ(m.mean_x.narrow(0, p.n, p.x0.size(0) - p.n).abs().max().item<double>(), 0.0);
  }
}

// ---- wrappers --------------------------------------------------------------------------

TEST(CbWrappers, PoissonBinomialAndCbLogProbMatchEnumerationWithGradients) {
  const int64_t T = 7;
  torch::manual_seed(1);
  Tensor x = torch::randn({2, T}, kD).requires_grad_();
  const Tensor k = torch::tensor({3, 0}, kL);
  const Tensor lp = poisson_binomial_log_prob(x, k);
  const Tensor B = all_binary(T);
  for (int64_t r = 0; r < 2; ++r) {
    const Tensor xr = x[r].detach();
    const Tensor logpb = (B * torch::log_sigmoid(xr) + (1 - B) * torch::log_sigmoid(-xr)).sum(1);
    const Tensor keep = (B.sum(1) == double(k[r].item<int64_t>()));
    const double ref = torch::logsumexp(logpb.masked_select(keep), 0).item<double>();
    EXPECT_NEAR(lp[r].item<double>(), ref, 1e-10);
  }
  const auto g = torch::autograd::grad({lp.sum()}, {x})[0];
  const Tensor num = mona::test::numeric_grad(
      [&] { return poisson_binomial_log_prob(x.detach(), k).sum().item<double>(); }, x.detach());
  mona::test::expect_grad_close(g, num, 1e-6, "poisson_binomial_log_prob");

  // CB log-prob of a fixed b, and its gradient b_t - P(b_t = 1 | k).
  Tensor b = torch::tensor({{1., 0., 1., 0., 0., 1., 0.}, {0., 0., 0., 0., 0., 0., 0.}}, kD);
  const Tensor clp = cb_log_prob(x, b);
  EXPECT_NEAR(clp[0].item<double>(),
              ((b[0] * torch::log_sigmoid(x[0]) + (1 - b[0]) * torch::log_sigmoid(-x[0])).sum() -
               lp[0]).item<double>(), 1e-10);
  const auto gc = torch::autograd::grad({clp.sum()}, {x})[0];
  const Tensor marg = cb_marginals(x, k);
  EXPECT_LT((gc - (b - marg)).abs().max().item<double>(), 1e-10);
  EXPECT_NEAR(marg[0].sum().item<double>(), 3.0, 1e-10);
}

TEST(CbWrappers, SamplerStepLogProbsSumToTheLogProbAndAreDifferentiable) {
  const int64_t T = 8;
  torch::manual_seed(2);
  Tensor x = torch::randn({3, T}, kD).requires_grad_();
  const Tensor k = torch::tensor({3, 1, 0}, kL);
  const Tensor il = torch::tensor({8, 6, 5}, kL);
  Rng rng(11);
  for (int kind = 0; kind < 3; ++kind) {
    const CbSample s = kind == 0   ? cb_sample_idb(x, k, rng, il)
                       : kind == 1 ? cb_sample_bb(x, k, rng, il)
                                   : cb_sample_db(x, k, rng, il);
    EXPECT_TRUE(torch::equal(s.b.sum(1).to(torch::kLong), k)) << kind;
    const Tensor lp = cb_log_prob(x, s.b, il);
    Tensor total = s.step_log_probs.sum(1);
    if (kind == 2) total = total + torch::lgamma(k.to(torch::kDouble) + 1);  // + log k!
    EXPECT_LT((total - lp).abs().max().item<double>(), 1e-10) << kind;
    // Gradients of the steps: by finite differences of the recomputed step log-probs.
    const Tensor w = torch::randn_like(s.step_log_probs);
    const auto g = torch::autograd::grad({(s.step_log_probs * w).sum()}, {x})[0];
    const Tensor num = mona::test::numeric_grad(
        [&] {
          const Tensor xd = x.detach();
          const Tensor st = kind == 0   ? cb_idb_step_log_probs(xd, s.b, il)
                            : kind == 1 ? cb_bb_step_log_probs(xd, s.b, il)
                                        : cb_db_step_log_probs(xd, s.positions, k, il);
          return (st * w).sum().item<double>();
        },
        x.detach());
    mona::test::expect_grad_close(g, num, 1e-6, "step log-probs " + std::to_string(kind));
  }
}

TEST(CbWrappers, TableGradientMatchesFiniteDifferences) {
  torch::manual_seed(3);
  Tensor x = torch::randn({2, 6}, kD).requires_grad_();
  const Tensor k = torch::tensor({2, 3}, kL), il = torch::tensor({6, 4}, kL);
  const Tensor Q = cb_log_table(x, k, il);
  const Tensor finite = torch::isfinite(Q);
  const Tensor w = torch::randn_like(Q) * finite.to(torch::kDouble);
  auto obj = [&](const Tensor& q) {
    return (torch::where(torch::isfinite(q), q, torch::zeros_like(q)) * w).sum();
  };
  const auto g = torch::autograd::grad({obj(Q)}, {x})[0];
  const Tensor num = mona::test::numeric_grad(
      [&] { return obj(cb_log_table(x.detach(), k, il)).item<double>(); }, x.detach());
  mona::test::expect_grad_close(g, num, 1e-6, "cb_log_table");
  EXPECT_EQ(g[1].narrow(0, 4, 2).abs().max().item<double>(), 0.0);
}

TEST(CbWrappers, MarginalLikelihoodMatchesEnumeration) {
  const Problem p = make_problem(7, 4, 6, 3, 4);
  Tensor x = p.x0.unsqueeze(0).clone().requires_grad_();
  Tensor E = p.E0.unsqueeze(0).clone().requires_grad_();
  const Tensor ll = cb_marginal_log_likelihood(x, E, torch::tensor({p.n}, kL),
                                               torch::tensor({p.L}, kL));
  const Exact e = enumerate(p.x0.narrow(0, 0, p.n), p.E0.narrow(0, 0, p.L).narrow(1, 0, p.n), p.L);
  EXPECT_NEAR(ll.item<double>(), e.logPc.item<double>(), 1e-10);
}

TEST(CbWrappers, ArgumentErrorsNameTheArgument) {
  const Tensor x = torch::zeros({2, 5}, kD);
  Rng rng(1);
  mona::test::expect_error([&] { poisson_binomial_log_prob(x, torch::tensor({1, -1}, kL)); },
                                 "k[1] must be >= 0");
  mona::test::expect_error([&] { poisson_binomial_log_prob(x, torch::tensor({6, 1}, kL)); },
                                 "k[0] must be <= T = 5");
  mona::test::expect_error(
      [&] { cb_sample_idb(x, torch::tensor({4, 1}, kL), rng, torch::tensor({3, 5}, kL)); },
      "k[0] must be <= in_lens[0] = 3");
  mona::test::expect_error([&] { poisson_binomial_log_prob(x, torch::tensor({1}, kL)); },
                                 "k: expected shape [B] = [2]");
  mona::test::expect_error([&] { cb_log_prob(x, torch::zeros({2, 4}, kD)); },
                                 "b: expected sizes");
  mona::test::expect_error([&] { cb_log_prob(x, torch::full({2, 5}, 0.5, kD)); },
                                 "b: expected values in {0, 1}, got 0.5 at [0, 0]");
  // The first bad entry of the valid region is named; padding is not read, a NaN there
  // included.
  auto b2 = torch::zeros({2, 5}, kD);
  b2[1][2] = 2;
  mona::test::expect_error([&] { cb_log_prob(x, b2); }, "b: expected values in {0, 1}, got 2 at [1, 2]");
  b2[1][2] = NAN;
  b2[1][4] = 2;
  EXPECT_TRUE(torch::isfinite(cb_log_prob(x, b2, torch::tensor({5, 2}, kL))).all().item<bool>());
  mona::test::expect_error(
      [&] { cb_marginal_log_likelihood(x, torch::zeros({2, 3, 4}, kD)); },
      "log_emit: expected sizes [B, U, T]");
  mona::test::expect_error(
      [&] {
        cb_marginal_log_likelihood(x, torch::zeros({2, 3, 5}, kD), torch::tensor({2, 5}, kL));
      },
      "out_lens[0] = 3 (labels L) must be <=");
  mona::test::expect_error(
      [&] { cb_log_table(torch::zeros({2, 5}, torch::kInt), torch::tensor({1, 1}, kL)); },
      "logits: expected dtype float32 or float64");
}

// ---- estimators ------------------------------------------------------------------------

TEST(CbEstimators, ExactMarginalGradientEqualsEnumeration) {
  const Problem p = make_problem(6, 3, 6, 3, 5);
  const auto [gx, gE] = exact_grad(p, true);
  Tensor x = p.x0.unsqueeze(0).clone().requires_grad_();
  Tensor E = p.E0.unsqueeze(0).clone().requires_grad_();
  cb_marginal_loss(x, E).backward();
  EXPECT_LT((-x.grad()[0] - gx).abs().max().item<double>(), 1e-10);
  EXPECT_LT((-E.grad()[0] - gE).abs().max().item<double>(), 1e-10);
}

TEST(CbEstimators, GlobalCbAndDbAreUnbiased) {
  const Problem p = make_problem(6, 2, 6, 2, 6);
  CbEstimatorOptions o;
  expect_unbiased(CbEstimator::kCb, p, o, "cb eq. 21, no baseline");
  expect_unbiased(CbEstimator::kDb, p, o, "db eq. 22, no baseline");
  o.samples = 4;
  o.baseline = CbBaseline::kLeaveOneOut;
  expect_unbiased(CbEstimator::kCb, p, o, "cb eq. 21, M = 4 leave-one-out", 8000);
  // The same baseline over groups of caller-repeated rows (one gradient row per sample).
  o.samples = 1;
  o.group = 4;
  expect_unbiased(CbEstimator::kDb, p, o, "db eq. 22, groups of 4 rows leave-one-out");
}

TEST(CbEstimators, IdbIsUnbiasedForwardBackwardAndAlternating) {
  const Problem p = make_problem(6, 3, 6, 3, 8);
  CbEstimatorOptions o;
  expect_unbiased(CbEstimator::kIdb, p, o, "idb eq. 24 forward");
  o.direction = CbDirection::kBackward;
  expect_unbiased(CbEstimator::kIdb, p, o, "idb eq. 25 backward");
  o.direction = CbDirection::kAlternate;
  o.step = 1;
  expect_unbiased(CbEstimator::kIdb, p, o, "idb alternating (odd step)");
  // A moving-average baseline (fixed during the call) keeps it unbiased.
  MovingAverageBaseline ma(0.5);
  ma.update(torch::full({1, 6}, -4.0, kD), torch::ones({1, 6}, torch::kBool));
  o.baseline = CbBaseline::kMovingAverage;
  o.moving_average = &ma;
  o.direction = CbDirection::kForward;
  expect_unbiased(CbEstimator::kIdb, p, o, "idb, moving-average baseline");
}

TEST(CbEstimators, BbIsUnbiasedAndHandlesPadding) {
  const Problem p = make_problem(7, 4, 6, 3, 9);  // T = 7, U = 4; valid 6 frames, 3 labels
  CbEstimatorOptions o;
  expect_unbiased(CbEstimator::kBb, p, o, "bb eq. 27 forward, padded");
  o.direction = CbDirection::kBackward;
  expect_unbiased(CbEstimator::kBb, p, o, "bb backward, padded");
  o.samples = 3;
  o.baseline = CbBaseline::kLeaveOneOut;
  o.direction = CbDirection::kForward;
  expect_unbiased(CbEstimator::kBb, p, o, "bb, M = 3 leave-one-out", 8000);
  expect_unbiased(CbEstimator::kIdb, p, o, "idb, M = 3 leave-one-out, padded", 8000);
}

// The biased estimators of 004 (REINFORCE on the Bernoulli model, eq. 1; the straight-
// through relaxations, eqs. 28-33): their mean over R = 20,000 draws differs from grad J by
// many standard errors (an unbiased estimator stays within 4, see above), and what is
// known of each holds: the straight-through ones draw exact CB samples in the forward pass,
// so their emission gradients are unbiased and only the logits' are not; REINFORCE and
// st-bb still point along grad J for the logits (cosine 0.86 and 0.92 measured).
TEST(CbEstimators, BiasedEstimatorsAreBiasedWhereExpectedAndFinite) {
  const Problem p = make_problem(6, 2, 6, 2, 10);
  const auto [gx, gE] = exact_grad(p, false);
  const Exact e = enumerate(p.x0, p.E0, p.L);
  const int64_t R = 20000;
  for (auto est : {CbEstimator::kReinforceBernoulli, CbEstimator::kStraightThroughIdb,
                   CbEstimator::kStraightThroughBb}) {
    SCOPED_TRACE(cb_estimator_name(est));
    EXPECT_FALSE(cb_estimator_unbiased(est));
    CbEstimatorOptions o;
    o.temperature = 0.5;
    const Mc m = run_estimator(est, p, o, R, 3);
    ASSERT_TRUE(torch::isfinite(m.mean_x).all().item<bool>());
    ASSERT_TRUE(torch::isfinite(m.mean_E).all().item<bool>());
    const double zx = worst_z(m.mean_x, m.se_x, gx), zE = worst_z(m.mean_E, m.se_E, gE);
    const double cos_x =
        torch::cosine_similarity(m.mean_x.flatten(), gx.flatten(), 0).item<double>();
    std::cout << "[ biased " << cb_estimator_name(est) << " ] worst z vs grad J: logits " << zx
              << ", log_emit " << zE << "; |mean - exact|_max(logits) "
              << (m.mean_x - gx).abs().max().item<double>() << "; cos(mean, grad J) logits "
              << cos_x << "\n";
    // Measured: 46, 334 and 98 standard errors; 8 leaves a margin over any seed or CPU.
    EXPECT_GT(zx, 8.0) << "the logits gradient is biased";
    if (est == CbEstimator::kReinforceBernoulli) {
      EXPECT_GT(zE, 8.0) << "so is the emission gradient (measured 72 standard errors)";
      EXPECT_GT(cos_x, 0.5);
    } else {
      EXPECT_LE(zE, 4.0) << "exact CB samples: unbiased emission gradient (measured 1.4, 1.6)";
      if (est == CbEstimator::kStraightThroughBb) {
        EXPECT_GT(cos_x, 0.5);
      }
      // The forward pass draws exact CB samples: the mean reward matches E_{b|L}[reward]
      // within 4 standard errors.
      const double se = std::sqrt(e.var_reward.item<double>() / double(R));
      EXPECT_NEAR(m.reward, e.mean_reward.item<double>(), 4 * se + 1e-12);
    }
  }
}

TEST(CbEstimators, LossValueIsMinusTheSampledObjective) {
  const Problem p = make_problem(5, 2, 5, 2, 12);
  Tensor x = p.x0.unsqueeze(0).expand({4, 5}).clone();
  Tensor E = p.E0.unsqueeze(0).expand({4, 2, 5}).clone();
  Rng rng(5);
  CbEstimatorStats st;
  const Tensor loss = bb_reinforce_loss(x, E, rng, {}, {}, {}, &st);
  EXPECT_NEAR(loss.item<double>(), -(st.log_prob_length + st.reward), 1e-10);
  const Exact e = enumerate(p.x0, p.E0, p.L);
  EXPECT_NEAR(st.log_prob_length, e.logPL.item<double>(), 1e-10);
}

TEST(CbEstimators, ArgumentErrors) {
  const Tensor x = torch::zeros({2, 5}, kD), E = torch::zeros({2, 3, 5}, kD);
  Rng rng(1);
  CbEstimatorOptions o;
  o.samples = 0;
  mona::test::expect_error([&] { cb_reinforce_loss(x, E, rng, o); },
                                 "opts.samples (M) must be >= 1, got 0");
  o.samples = 1;
  o.baseline = CbBaseline::kLeaveOneOut;
  mona::test::expect_error([&] { idb_reinforce_loss(x, E, rng, o); },
                                 "kLeaveOneOut needs opts.samples * opts.group >= 2");
  o.baseline = CbBaseline::kMovingAverage;
  mona::test::expect_error([&] { bb_reinforce_loss(x, E, rng, o); },
                                 "needs opts.moving_average");
  o.baseline = CbBaseline::kNone;
  o.temperature = 0;
  mona::test::expect_error(
      [&] { cb_straight_through_loss(x, E, rng, CbRelaxation::kIdb, o); },
      "opts.temperature must be finite and > 0");
  o.temperature = 1;
  mona::test::expect_error(
      [&] { db_reinforce_loss(x, torch::zeros({2, 3, 4}, kD), rng, o); },
      "log_emit: expected sizes [B, U, T]");
  mona::test::expect_error(
      [&] { reinforce_bernoulli_loss(x, E, rng, o, torch::tensor({2, 5}, kL)); },
      "out_lens[0] = 3 (labels L) must be <= the number of frames 2");
  mona::test::expect_error(
      [&] { cb_reinforce_loss(x, E.to(torch::kFloat), rng, o); }, "log_emit: expected dtype");
  mona::test::expect_error([&] { parse_cb_estimator("rebar"); },
                                 "unknown estimator 'rebar'");
  EXPECT_EQ(parse_cb_estimator("st-bb"), CbEstimator::kStraightThroughBb);
  mona::test::expect_error([&] { MovingAverageBaseline bad(1.0); }, "decay must lie in");
}

TEST(CbEstimators, MovingAverageBaselineChecksShapes) {
  // returns and mask are both [R, n]; a mask that would broadcast ([R, 1]) used to make the
  // per-position counts shorter than n and the update read past them.
  MovingAverageBaseline ma(0.5);
  const Tensor G = torch::full({2, 4}, -3.0, kD);
  const auto kB = torch::TensorOptions().dtype(torch::kBool);
  mona::test::expect_error([&] { ma.update(G, torch::ones({2, 1}, kB)); },
                           "MovingAverageBaseline::update: mask: expected sizes [R, n] = "
                           "[2, 4] (those of returns), got [2, 1]");
  mona::test::expect_error([&] { ma.update(torch::zeros({4}, kD), torch::ones({4}, kB)); },
                           "MovingAverageBaseline::update: returns: expected 2 dims [R, n], "
                           "got [4]");
  mona::test::expect_error([&] { ma.update(G, torch::ones({2, 4}, kD)); },
                           "MovingAverageBaseline::update: mask: expected dtype bool, got "
                           "Double");
  mona::test::expect_error([&] { ma.update(G, Tensor()); },
                           "MovingAverageBaseline::update: mask must be a defined tensor");
  // Nothing was folded in by the refused calls; a valid one still works.
  EXPECT_EQ(ma.values(4).abs().sum().item<double>(), 0.0);
  Tensor m = torch::ones({2, 4}, kB);
  m[1][3] = false;
  ma.update(G, m);
  EXPECT_TRUE(torch::equal(ma.values(4), torch::full({4}, -3.0, kD)));
}

TEST(CbEstimators, ParseErrorListsEveryEstimatorName) {
  std::string msg;
  try {
    parse_cb_estimator("rebar");
  } catch (const mona::Error& e) {
    msg = e.what();
  }
  const std::string head = "unknown estimator 'rebar'; expected one of ";
  const size_t at = msg.find(head);
  ASSERT_NE(at, std::string::npos) << msg;
  // The accepted list is exactly the names of the enumerators, in order.
  std::string expected;
  for (auto est : {CbEstimator::kReinforceBernoulli, CbEstimator::kCb, CbEstimator::kDb,
                   CbEstimator::kIdb, CbEstimator::kBb, CbEstimator::kStraightThroughIdb,
                   CbEstimator::kStraightThroughBb, CbEstimator::kExact}) {
    const std::string name = cb_estimator_name(est);
    EXPECT_EQ(parse_cb_estimator(name), est) << name;
    expected += (expected.empty() ? "" : ", ") + name;
  }
  EXPECT_EQ(msg.substr(at + head.size()), expected);
}

TEST(CbEstimators, FloatAndEmptyLabelRowsWork) {
  // float32, rows with L = 0 and L = T: every estimator gives a finite loss and gradient.
  Tensor x = torch::randn({3, 4}).requires_grad_();
  Tensor E = (-torch::rand({3, 4, 4})).requires_grad_();
  const Tensor ol = torch::tensor({0, 4, 2}, kL);
  Rng rng(9);
  for (auto est : {CbEstimator::kReinforceBernoulli, CbEstimator::kCb, CbEstimator::kDb,
                   CbEstimator::kIdb, CbEstimator::kBb, CbEstimator::kStraightThroughIdb,
                   CbEstimator::kStraightThroughBb, CbEstimator::kExact}) {
    x.mutable_grad() = torch::Tensor();
    Tensor loss = cb_estimator_loss(est, x, E, rng, {}, {}, ol);
    loss.backward();
    EXPECT_TRUE(std::isfinite(loss.item<float>())) << cb_estimator_name(est);
    EXPECT_TRUE(torch::isfinite(x.grad()).all().item<bool>()) << cb_estimator_name(est);
  }
}

}  // namespace
