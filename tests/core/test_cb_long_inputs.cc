// label: cb
// Float against double for long inputs (issue 17, item 1): the Poisson-binomial, conditional
// Bernoulli and exact-marginal kernels at T = 20,000 (k = 100), T = 100,000 (k = 50) and
// k = 1,000 (T = 5,000), with logits N(0, 3) and saturated logits of +-30. A float table
// entry log P(K_S = j) of magnitude |Q| ~ T carries an absolute error of |Q| 2^-24, which
// used to become a relative error of every split weight: at T = 20,000, k = 100 the float
// marginals summed to 195 instead of 100 and the gradients left [-1, 1]. The float kernels
// now run their recursions in double and round each output once (src/core/cb_rows.h).
//
// Tolerances: both dtypes get the same logits (float values), so a float output is the double
// one rounded once: within one float ulp of it, 2^-23 relative (half an ulp for the rounding,
// the other half for a double-level difference in evaluation), plus the smallest subnormal
// for marginals that underflow float. The target, 1e-4 absolute on marginals and
// gradients, is asserted as well.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "mona/core/cb_marginal.h"
#include "mona/core/conditional_bernoulli.h"
#include "mona/core/poisson_binomial.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using core::Grid;

// One row of T logits, N(0, 3) or +-30 with probability 1/2 each, as float values.
struct Logits {
  int64_t T = 0;
  std::vector<float> f;
  std::vector<double> d;
};

Logits make_logits(int64_t T, bool saturated, uint64_t seed) {
  Random rng(seed);
  Logits x;
  x.T = T;
  x.f.resize(static_cast<size_t>(T));
  for (auto& v : x.f) {
    v = static_cast<float>(saturated ? (rng.uniform() < 0.5 ? 30.0 : -30.0) : rng.normal(0, 3));
  }
  x.d = cast<double>(x.f);
  return x;
}

Grid row_grid(int64_t T, int64_t k) {
  Grid g;
  g.batch = 1;
  g.in_len = T;
  g.out_len = k;
  return g;
}

// |f - d| <= one float ulp of d (file comment).
double ulp_bound(double d) {
  return std::ldexp(std::abs(d), -23) +
         static_cast<double>(std::numeric_limits<float>::denorm_min());
}

// Every f[i] is d[i] rounded to float (-inf to -inf); returns the largest |f - d|.
double expect_rounded(const std::vector<float>& f, const std::vector<double>& d,
                      const std::string& what) {
  EXPECT_EQ(f.size(), d.size()) << what;
  double worst = 0;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < std::min(f.size(), d.size()); ++i) {
    if (std::isinf(d[i])) {
      bad += static_cast<double>(f[i]) != d[i];
      continue;
    }
    const double err = std::abs(static_cast<double>(f[i]) - d[i]);
    worst = std::max(worst, err);
    if (!(err <= ulp_bound(d[i]))) {
      if (bad == 0) first_bad = i;
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad
                     << " entries are not the double value rounded to float; first at "
                     << first_bad << ": float " << f[first_bad] << ", double " << d[first_bad];
  return worst;
}

struct Size {
  int64_t T, k;
  bool saturated;
  std::string name() const {
    return "T=" + std::to_string(T) + " k=" + std::to_string(k) +
           (saturated ? " logits +-30" : " logits N(0, 3)");
  }
};

// T = 20,000, k = 100 keeps the double table whole (2e6 entries); T = 100,000, k = 50 and
// T = 5,000, k = 1,000 (5e6 entries) are above the 2^22 entries up to which a table is kept
// whole, so they recompute its rows from checkpoints.
const std::vector<Size> kSizes = {
    {20000, 100, false}, {20000, 100, true}, {100000, 50, false}, {5000, 1000, true}};

TEST(CbLongInputs, PoissonBinomialFloatMatchesDouble) {
  for (const Size& s : kSizes) {
    SCOPED_TRACE(s.name());
    const Logits x = make_logits(s.T, s.saturated, 100 + static_cast<uint64_t>(s.T + s.k));
    const int64_t k = s.k;
    double lpd = 0, one = 1;
    float lpf = 0, onef = 1;
    core::poisson_binomial_log_prob(x.d.data(), &k, &lpd, 1, s.T, nullptr);
    core::poisson_binomial_log_prob(x.f.data(), &k, &lpf, 1, s.T, nullptr);
    EXPECT_LE(std::abs(lpf - lpd), ulp_bound(lpd))
        << "log P(K = k): float " << lpf << ", double " << lpd;

    std::vector<double> gd(static_cast<size_t>(s.T));
    std::vector<float> gf(gd.size());
    core::poisson_binomial_log_prob_backward(&one, x.d.data(), &k, gd.data(), 1, s.T, nullptr);
    core::poisson_binomial_log_prob_backward(&onef, x.f.data(), &k, gf.data(), 1, s.T, nullptr);
    const double err = expect_rounded(gf, gd, "d log P(K = k) / dx");
    EXPECT_LE(err, 1e-4);
    // d log P(K = k) / dx_t = P(b_t = 1 | k) - p_t lies in [-1, 1], and the rounding of a
    // value in [-1, 1] to float stays there.
    double sum_d = 0, sum_f = 0, sum_abs = 0;
    for (size_t t = 0; t < gd.size(); ++t) {
      ASSERT_LE(std::abs(gf[t]), 1.0f) << "t=" << t;
      sum_d += gd[t];
      sum_f += gf[t];
      sum_abs += std::abs(gd[t]);
    }
    // sum_t (P(b_t = 1 | k) - p_t) = k - E[K] (docs/math/conditional_bernoulli.md sec. 3), to
    // double rounding over T terms; the float gradients add one rounding of each term.
    double mean = 0;
    core::poisson_binomial_moments(x.d.data(), &mean, static_cast<double*>(nullptr), 1, s.T,
                                   nullptr);
    EXPECT_NEAR(sum_d, double(k) - mean, 1e-12 * double(s.T) * std::max(1.0, mean));
    EXPECT_NEAR(sum_f, sum_d, std::ldexp(sum_abs, -23));

    // The same adjoint from the caller's whole double table: bit for bit, whether
    // poisson_binomial_log_prob_backward kept its table whole or recomputed it from checkpoints.
    const Grid g = row_grid(s.T, k);
    std::vector<double> table(static_cast<size_t>((s.T + 1) * (k + 1))), seed(table.size(), 0.0);
    std::vector<double> gt(gd.size());
    core::cb_table(x.d.data(), table.data(), g);
    seed[static_cast<size_t>(k)] = 1;
    core::cb_table_backward(seed.data(), x.d.data(), table.data(), gt.data(), g);
    EXPECT_EQ(max_abs_diff(gt, gd), 0.0);
    std::cout << "[ figures  ] PB " << s.name() << ": grad float vs double max abs " << err
              << "; sum float " << sum_f << ", double " << sum_d << "\n";
  }
}

TEST(CbLongInputs, MarginalsFloatMatchDoubleAndSumToK) {
  for (const Size& s : kSizes) {
    SCOPED_TRACE(s.name());
    const Logits x = make_logits(s.T, s.saturated, 200 + static_cast<uint64_t>(s.T + s.k));
    const Grid g = row_grid(s.T, s.k);
    std::vector<double> qd(static_cast<size_t>((s.T + 1) * (s.k + 1)));
    std::vector<double> md(static_cast<size_t>(s.T));
    std::vector<float> qf(qd.size()), mf(md.size());
    core::cb_table(x.d.data(), qd.data(), g);
    core::cb_table(x.f.data(), qf.data(), g);
    expect_rounded(qf, qd, "table");
    core::cb_marginals(x.d.data(), qd.data(), md.data(), g);
    core::cb_marginals(x.f.data(), qf.data(), mf.data(), g);
    const double err = expect_rounded(mf, md, "marginals");
    EXPECT_LE(err, 1e-4);
    double sum_d = 0, sum_f = 0;
    for (size_t t = 0; t < md.size(); ++t) {
      ASSERT_TRUE(mf[t] >= 0.0f && mf[t] <= 1.0f) << "t=" << t << ": " << mf[t];
      sum_d += md[t];
      sum_f += mf[t];
    }
    // Sums to k. In double to 1e-6 relative: each step's split weights carry the rounding of
    // table entries of up to |Q| ~ 1.5e5 (2^-53 |Q| ~ 2e-11), accumulated over T steps
    // (4e-8 at T = 5,000, k = 1,000). In float each marginal is rounded once (relative
    // 2^-24), so the float sum is within 2^-24 k of the double one.
    EXPECT_NEAR(sum_d, double(s.k), 1e-6 * double(s.k));
    EXPECT_NEAR(sum_f, sum_d, std::ldexp(double(s.k), -23));
    std::cout << "[ figures  ] CB marginals " << s.name() << ": float vs double max abs " << err
              << "; sum float " << sum_f << "\n";
  }
}

TEST(CbLongInputs, LogProbStepsAndGradientsFloatMatchDouble) {
  const int64_t T = 20000, k = 100;
  const Logits x = make_logits(T, false, 300);
  const Grid g = row_grid(T, k);
  std::vector<double> qd(static_cast<size_t>((T + 1) * (k + 1)));
  std::vector<float> qf(qd.size());
  core::cb_table(x.d.data(), qd.data(), g);
  core::cb_table(x.f.data(), qf.data(), g);
  // A draw b of the CB (its IDB draw), its BB positions and a DB order, from the double kernels.
  std::vector<double> bd(static_cast<size_t>(T)), unused(static_cast<size_t>(T));
  std::vector<int64_t> order(static_cast<size_t>(k));
  core::Rng gen(11);
  core::cb_sample_idb(x.d.data(), qd.data(), gen, bd.data(), static_cast<double*>(nullptr), g);
  core::cb_sample_db(x.d.data(), qd.data(), gen, unused.data(), order.data(),
                     static_cast<double*>(nullptr), g);
  const std::vector<float> bf = cast<float>(bd);
  // Incoming gradients, float values.
  Random rng(12);
  std::vector<float> wf_t(static_cast<size_t>(T)), wf_k(static_cast<size_t>(k));
  for (auto& v : wf_t) v = static_cast<float>(rng.normal());
  for (auto& v : wf_k) v = static_cast<float>(rng.normal());
  const std::vector<double> wd_t = cast<double>(wf_t), wd_k = cast<double>(wf_k);
  const double gd1 = 0.75;
  const float gf1 = 0.75f;

  double lpd = 0;
  float lpf = 0;
  core::cb_log_prob(x.d.data(), bd.data(), qd.data(), &lpd, g);
  core::cb_log_prob(x.f.data(), bf.data(), qf.data(), &lpf, g);
  EXPECT_LE(std::abs(lpf - lpd), ulp_bound(lpd))
      << "log P(b | k): float " << lpf << ", double " << lpd;

  std::vector<double> gd(static_cast<size_t>(T));
  std::vector<float> gf(gd.size());
  core::cb_log_prob_backward(&gd1, x.d.data(), bd.data(), qd.data(), gd.data(), g);
  core::cb_log_prob_backward(&gf1, x.f.data(), bf.data(), qf.data(), gf.data(), g);
  double err = expect_rounded(gf, gd, "d log P(b | k) / dx");
  EXPECT_LE(err, 1e-4);
  for (float v : gf) ASSERT_LE(std::abs(v), 0.75f);  // 0.75 (b_t - P(b_t = 1 | k))
  std::cout << "[ figures  ] CB T=20000 k=100: log P(b | k) float " << lpf << ", double " << lpd
            << "; its gradient max abs " << err << "\n";

  std::vector<double> sd(static_cast<size_t>(T)), skd(static_cast<size_t>(k));
  std::vector<float> sf(sd.size()), skf(skd.size());
  core::cb_idb_step_log_probs(x.d.data(), bd.data(), qd.data(), sd.data(), g);
  core::cb_idb_step_log_probs(x.f.data(), bf.data(), qf.data(), sf.data(), g);
  expect_rounded(sf, sd, "IDB step log-probs");
  core::cb_idb_step_log_probs_backward(wd_t.data(), x.d.data(), bd.data(), qd.data(), gd.data(), g);
  core::cb_idb_step_log_probs_backward(wf_t.data(), x.f.data(), bf.data(), qf.data(), gf.data(), g);
  err = expect_rounded(gf, gd, "IDB steps backward");
  EXPECT_LE(err, 1e-4);

  core::cb_bb_step_log_probs(x.d.data(), bd.data(), qd.data(), skd.data(), g);
  core::cb_bb_step_log_probs(x.f.data(), bf.data(), qf.data(), skf.data(), g);
  expect_rounded(skf, skd, "BB step log-probs");
  core::cb_bb_step_log_probs_backward(wd_k.data(), x.d.data(), bd.data(), qd.data(), gd.data(), g);
  core::cb_bb_step_log_probs_backward(wf_k.data(), x.f.data(), bf.data(), qf.data(), gf.data(), g);
  err = expect_rounded(gf, gd, "BB steps backward");
  EXPECT_LE(err, 1e-4);

  core::cb_db_step_log_probs(x.d.data(), order.data(), skd.data(), g);
  core::cb_db_step_log_probs(x.f.data(), order.data(), skf.data(), g);
  expect_rounded(skf, skd, "DB step log-probs");
  core::cb_db_step_log_probs_backward(wd_k.data(), x.d.data(), order.data(), gd.data(), g);
  core::cb_db_step_log_probs_backward(wf_k.data(), x.f.data(), order.data(), gf.data(), g);
  err = expect_rounded(gf, gd, "DB steps backward");
  EXPECT_LE(err, 1e-4);
}

// The samplers compare a uniform with a step probability; float and double now compute the
// same double probability from the same logits, so a seed draws the same sample in both.
TEST(CbLongInputs, FloatSamplersDrawWhatDoubleDraws) {
  const int64_t T = 20000, k = 100;
  const Logits x = make_logits(T, false, 400);
  const Grid g = row_grid(T, k);
  std::vector<double> qd(static_cast<size_t>((T + 1) * (k + 1))), bd(static_cast<size_t>(T));
  std::vector<double> sd(static_cast<size_t>(T)), skd(static_cast<size_t>(k));
  std::vector<float> qf(qd.size()), bf(bd.size()), sf(sd.size()), skf(skd.size());
  std::vector<int64_t> pd(static_cast<size_t>(k)), pf(pd.size());
  core::cb_table(x.d.data(), qd.data(), g);
  core::cb_table(x.f.data(), qf.data(), g);
  core::Rng gen_d(21), gen_f(21);

  core::cb_sample_idb(x.d.data(), qd.data(), gen_d, bd.data(), sd.data(), g);
  core::cb_sample_idb(x.f.data(), qf.data(), gen_f, bf.data(), sf.data(), g);
  EXPECT_EQ(max_abs_diff(bf, bd), 0.0) << "IDB draws differ";
  expect_rounded(sf, sd, "IDB step log-probs of the draw");

  core::cb_sample_bb(x.d.data(), qd.data(), gen_d, bd.data(), pd.data(), skd.data(), g);
  core::cb_sample_bb(x.f.data(), qf.data(), gen_f, bf.data(), pf.data(), skf.data(), g);
  EXPECT_EQ(pf, pd) << "BB draws differ";
  expect_rounded(skf, skd, "BB step log-probs of the draw");

  core::cb_sample_db(x.d.data(), qd.data(), gen_d, bd.data(), pd.data(), skd.data(), g);
  core::cb_sample_db(x.f.data(), qf.data(), gen_f, bf.data(), pf.data(), skf.data(), g);
  EXPECT_EQ(pf, pd) << "DB draws differ";
  expect_rounded(skf, skd, "DB step log-probs of the draw");
}

TEST(CbLongInputs, MarginalLikelihoodFloatMatchesDouble) {
  // T = 20,000 keeps the tables whole; T = 42,000 (4.2e6 entries) checkpoints them.
  for (const int64_t T : {int64_t(20000), int64_t(42000)}) {
    const int64_t L = 100;
    SCOPED_TRACE("T=" + std::to_string(T) + " L=100");
    const Logits x = make_logits(T, false, 500 + static_cast<uint64_t>(T));
    Random rng(501);
    std::vector<float> ef(static_cast<size_t>(L * T));
    for (auto& v : ef) v = static_cast<float>(std::log(rng.uniform(0.05, 1.0)));
    const std::vector<double> ed = cast<double>(ef);
    const Grid g = row_grid(T, L);
    double lld = 0, ctcd = 0, one = 1;
    float llf = 0, ctcf = 0, onef = 1;
    core::cb_marginal_log_likelihood(x.d.data(), ed.data(), &lld, g);
    core::cb_marginal_log_likelihood(x.f.data(), ef.data(), &llf, g);
    core::cb_marginal_log_likelihood_ctc(x.d.data(), ed.data(), &ctcd, g);
    core::cb_marginal_log_likelihood_ctc(x.f.data(), ef.data(), &ctcf, g);
    EXPECT_LE(std::abs(llf - lld), ulp_bound(lld)) << "eq. 34: float " << llf << ", double " << lld;
    EXPECT_LE(std::abs(ctcf - ctcd), ulp_bound(ctcd))
        << "eq. 36: float " << ctcf << ", double " << ctcd;

    std::vector<double> gxd(static_cast<size_t>(T)), ged(ed.size());
    std::vector<float> gxf(gxd.size()), gef(ed.size());
    core::cb_marginal_log_likelihood_backward(&one, x.d.data(), ed.data(), gxd.data(),
                                              ged.data(), g);
    core::cb_marginal_log_likelihood_backward(&onef, x.f.data(), ef.data(), gxf.data(),
                                              gef.data(), g);
    const double ex = expect_rounded(gxf, gxd, "d log P(c) / dx");
    const double ee = expect_rounded(gef, ged, "d log P(c) / d log_emit");
    EXPECT_LE(ex, 1e-4);
    EXPECT_LE(ee, 1e-4);
    // d log P(c) / dx_t = E[b_t | c] - p_t in [-1, 1]; each label's posterior sums to 1 over t.
    for (float v : gxf) ASSERT_LE(std::abs(v), 1.0f);
    for (int64_t l = 0; l < L; ++l) {
      double s = 0;
      for (int64_t t = 0; t < T; ++t) s += gef[static_cast<size_t>(l * T + t)];
      EXPECT_NEAR(s, 1.0, std::ldexp(1.0, -23) + 1e-12 * double(T)) << "label " << l;
    }
    std::cout << "[ figures  ] CB marginal likelihood T=" << T << " L=100: log P(c) float " << llf
              << ", double " << lld << "; gradients max abs " << ex << " (logits), " << ee
              << " (log_emit)\n";
  }
}

}  // namespace
}  // namespace mona::test
