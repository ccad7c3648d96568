// label: cb
// Tests of mona/core/conditional_bernoulli.h: the suffix table, log P(b | k), marginals,
// the DB / IDB / BB step probabilities and samplers, and every backward, against
// enumeration of all 2^T sequences (tests/reference/cb_reference.h), central finite
// differences, chi-square tests of the samplers' frequencies, float against double, and
// T = 10000 with logits of +-50.
#include "mona/core/conditional_bernoulli.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include "core/float_ulp.h"
#include "reference/cb_reference.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using core::Grid;
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kNegInf = -std::numeric_limits<double>::infinity();

// Rows of logits padded with NaN, their lengths T_b and their k_b <= T_b.
struct Problem {
  int64_t B = 0, T = 0, K = 0;
  std::vector<int64_t> lens, k;
  std::vector<double> x;
  Grid grid() const {
    Grid g;
    g.batch = B;
    g.in_len = T;
    g.in_lens = lens.data();
    g.out_len = K;
    g.out_lens = k.data();
    return g;
  }
  std::vector<double> row(int64_t b) const {
    return std::vector<double>(x.begin() + b * T, x.begin() + b * T + lens[static_cast<size_t>(b)]);
  }
  size_t table_size() const { return static_cast<size_t>(B * (T + 1) * (K + 1)); }
  std::vector<double> table() const {
    std::vector<double> q(table_size(), kNaN);
    core::cb_table(x.data(), q.data(), grid());
    return q;
  }
  // A 0/1 [B, T] array from one mask per row.
  std::vector<double> b_of(const std::vector<uint32_t>& masks) const {
    std::vector<double> b(static_cast<size_t>(B * T), 0.0);
    for (int64_t r = 0; r < B; ++r) {
      for (int64_t t = 0; t < lens[static_cast<size_t>(r)]; ++t) b[static_cast<size_t>(r * T + t)] = cbref::bit(masks[static_cast<size_t>(r)], t);
    }
    return b;
  }
};

Problem make_problem(Random& rng, std::vector<int64_t> lens, std::vector<int64_t> k, int64_t T,
                     double stddev = 1.5) {
  Problem p;
  p.B = static_cast<int64_t>(lens.size());
  p.T = T;
  p.lens = lens;
  p.k = k;
  p.K = *std::max_element(k.begin(), k.end());
  p.x.assign(static_cast<size_t>(p.B * T), kNaN);
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t t = 0; t < lens[static_cast<size_t>(b)]; ++t) p.x[static_cast<size_t>(b * T + t)] = rng.normal(0, stddev);
  }
  return p;
}

// All masks of `T` bits with popcount k.
std::vector<uint32_t> subsets(int64_t T, int64_t k) {
  std::vector<uint32_t> out;
  for (uint32_t m = 0; m < cbref::all_masks(static_cast<size_t>(T)); ++m) {
    if (cbref::popcount(m) == k) out.push_back(m);
  }
  return out;
}

std::vector<double> finite_copy(std::vector<double> x) {
  for (auto& v : x) v = std::isnan(v) ? 0.0 : v;
  return x;
}

TEST(ConditionalBernoulli, TableMatchesEnumerationWithPadding) {
  Random rng(11);
  const Problem p = make_problem(rng, {10, 6, 4, 0}, {4, 6, 0, 0}, 10);
  const auto q = p.table();
  const int64_t W = p.K + 1;
  for (int64_t b = 0; b < p.B; ++b) {
    const auto x = p.row(b);
    const int64_t n = p.lens[static_cast<size_t>(b)], kk = p.k[static_cast<size_t>(b)];
    for (int64_t t = 0; t <= p.T; ++t) {
      for (int64_t j = 0; j <= p.K; ++j) {
        const double v = q[static_cast<size_t>(b * (p.T + 1) * W + t * W + j)];
        if (t > n || j > kk) {
          EXPECT_EQ(v, 0.0) << "padding b=" << b << " t=" << t << " j=" << j;
        } else if (j > n - t) {
          EXPECT_EQ(v, kNegInf) << "infeasible b=" << b << " t=" << t << " j=" << j;
        } else {
          const double want = cbref::suffix_log_pmf(x, static_cast<size_t>(t), static_cast<int>(j));
          EXPECT_NEAR(v, want, 1e-12 * std::max(1.0, std::abs(want))) << b << " " << t << " " << j;
        }
      }
    }
  }
}

TEST(ConditionalBernoulli, LogProbAndMarginalsMatchEnumeration) {
  Random rng(12);
  const Problem p = make_problem(rng, {12, 9}, {5, 3}, 12, 2.0);
  const auto q = p.table();
  double err = 0;
  // log_prob of every subset of row 0 (row 1 fixed to one subset).
  for (uint32_t m : subsets(12, 5)) {
    const uint32_t m1 = 0b000010101;
    const auto b = p.b_of({m, m1});
    std::vector<double> lp(2, kNaN);
    core::cb_log_prob(p.x.data(), b.data(), q.data(), lp.data(), p.grid());
    const double w0 = std::log(cbref::cb_prob(p.row(0), 5, m)), w1 = std::log(cbref::cb_prob(p.row(1), 3, m1));
    EXPECT_NEAR(lp[0], w0, 1e-12 * std::max(1.0, std::abs(w0)));
    EXPECT_NEAR(lp[1], w1, 1e-12 * std::max(1.0, std::abs(w1)));
    err = std::max(err, std::abs(lp[0] - w0));
  }
  std::vector<double> marg(static_cast<size_t>(p.B * p.T), kNaN);
  core::cb_marginals(p.x.data(), q.data(), marg.data(), p.grid());
  double merr = 0;
  for (int64_t b = 0; b < p.B; ++b) {
    const auto ref = cbref::marginals(p.row(b), static_cast<int>(p.k[static_cast<size_t>(b)]));
    double s = 0;
    for (int64_t t = 0; t < p.T; ++t) {
      const double v = marg[static_cast<size_t>(b * p.T + t)];
      if (t >= p.lens[static_cast<size_t>(b)]) {
        EXPECT_EQ(v, 0.0);
        continue;
      }
      EXPECT_NEAR(v, ref[static_cast<size_t>(t)], 1e-13);
      merr = std::max(merr, std::abs(v - ref[static_cast<size_t>(t)]));
      s += v;
    }
    EXPECT_NEAR(s, double(p.k[static_cast<size_t>(b)]), 1e-12);
  }
  std::cout << "[ figures  ] CB vs enumeration: log_prob max abs error " << err
            << ", marginals max abs error " << merr << "\n";
}

TEST(ConditionalBernoulli, StepProbabilitiesMatchEnumeration) {
  Random rng(13);
  const Problem p = make_problem(rng, {8}, {3}, 8, 1.5);
  const auto q = p.table();
  const auto x = p.row(0);
  double err_idb = 0, err_bb = 0, err_db = 0;
  for (uint32_t m : subsets(8, 3)) {
    const auto b = p.b_of({m});
    const double lp = std::log(cbref::cb_prob(x, 3, m));
    // IDB
    std::vector<double> idb(8, kNaN);
    core::cb_idb_step_log_probs(p.x.data(), b.data(), q.data(), idb.data(), p.grid());
    const auto ridb = cbref::idb_steps(x, 3, m);
    for (int t = 0; t < 8; ++t) {
      EXPECT_NEAR(std::exp(idb[static_cast<size_t>(t)]), ridb[static_cast<size_t>(t)], 1e-13);
      err_idb = std::max(err_idb, std::abs(std::exp(idb[static_cast<size_t>(t)]) - ridb[static_cast<size_t>(t)]));
    }
    EXPECT_NEAR(std::accumulate(idb.begin(), idb.end(), 0.0), lp, 1e-12);
    // BB
    std::vector<double> bb(3, kNaN);
    core::cb_bb_step_log_probs(p.x.data(), b.data(), q.data(), bb.data(), p.grid());
    const auto rbb = cbref::bb_steps(x, 3, m);
    for (int r = 0; r < 3; ++r) {
      EXPECT_NEAR(std::exp(bb[static_cast<size_t>(r)]), rbb[static_cast<size_t>(r)], 1e-13);
      err_bb = std::max(err_bb, std::abs(std::exp(bb[static_cast<size_t>(r)]) - rbb[static_cast<size_t>(r)]));
    }
    EXPECT_NEAR(std::accumulate(bb.begin(), bb.end(), 0.0), lp, 1e-12);
    // DB: every order of the set.
    auto order = cbref::highs(m, 8);
    std::sort(order.begin(), order.end());
    do {
      std::vector<double> db(3, kNaN);
      core::cb_db_step_log_probs(p.x.data(), order.data(), db.data(), p.grid());
      const auto rdb = cbref::db_steps(x, order);
      for (int j = 0; j < 3; ++j) {
        EXPECT_NEAR(std::exp(db[static_cast<size_t>(j)]), rdb[static_cast<size_t>(j)], 1e-13);
        err_db = std::max(err_db, std::abs(std::exp(db[static_cast<size_t>(j)]) - rdb[static_cast<size_t>(j)]));
      }
      EXPECT_NEAR(std::accumulate(db.begin(), db.end(), 0.0), lp - std::log(6.0), 1e-12);  // eq. 9
    } while (std::next_permutation(order.begin(), order.end()));
  }
  std::cout << "[ figures  ] step probabilities vs enumeration, max abs error: IDB " << err_idb
            << ", BB " << err_bb << ", DB " << err_db << "\n";
}

// Chi-square statistic of observed counts against expected probabilities.
double chi_square(const std::map<uint64_t, int64_t>& counts, const std::map<uint64_t, double>& probs,
                  int64_t n) {
  double chi = 0;
  for (const auto& [key, pr] : probs) {
    const auto it = counts.find(key);
    const double o = it == counts.end() ? 0.0 : double(it->second), e = pr * double(n);
    chi += (o - e) * (o - e) / e;
  }
  return chi;
}

// Generous fixed bound: df + 6 sqrt(2 df) + 10 (far beyond the 1e-6 quantile for these df).
double chi_bound(double df) { return df + 6 * std::sqrt(2 * df) + 10; }

TEST(ConditionalBernoulli, SamplersMatchTheDistribution) {
  Random rng(14);
  const int64_t T = 7, k = 3, N = 60000;
  const auto base = make_problem(rng, {T}, {k}, T, 1.0);
  // N identical rows: one batched call per sampler.
  Problem p;
  p.B = N;
  p.T = T;
  p.K = k;
  p.lens.assign(N, T);
  p.k.assign(N, k);
  p.x.resize(static_cast<size_t>(N * T));
  for (int64_t r = 0; r < N; ++r) std::copy(base.x.begin(), base.x.end(), p.x.begin() + r * T);
  const auto q = p.table();
  const auto x = base.row(0);
  std::map<uint64_t, double> set_probs, ordered_probs;
  for (uint32_t m : subsets(T, k)) set_probs[m] = cbref::cb_prob(x, k, m);
  std::vector<double> b(static_cast<size_t>(N * T)), steps(static_cast<size_t>(N * T));
  std::vector<double> dsteps(static_cast<size_t>(N * k));
  std::vector<int64_t> pos(static_cast<size_t>(N * k));
  auto mask_of = [&](int64_t r) {
    uint32_t m = 0;
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_TRUE(b[static_cast<size_t>(r * T + t)] == 0.0 || b[static_cast<size_t>(r * T + t)] == 1.0);
      if (b[static_cast<size_t>(r * T + t)] == 1.0) m |= 1u << t;
    }
    EXPECT_EQ(cbref::popcount(m), k);
    return m;
  };
  const double bound = chi_bound(double(set_probs.size() - 1));

  // IDB
  core::Rng gen(2024);
  core::cb_sample_idb(p.x.data(), q.data(), gen, b.data(), steps.data(), p.grid());
  std::map<uint64_t, int64_t> counts;
  for (int64_t r = 0; r < N; ++r) {
    const uint32_t m = mask_of(r);
    ++counts[m];
    if (r < 50) {
      const auto ref = cbref::idb_steps(x, k, m);
      for (int64_t t = 0; t < T; ++t) EXPECT_NEAR(std::exp(steps[static_cast<size_t>(r * T + t)]), ref[static_cast<size_t>(t)], 1e-13);
    }
  }
  const double chi_idb = chi_square(counts, set_probs, N);
  EXPECT_LT(chi_idb, bound);

  // BB
  counts.clear();
  core::cb_sample_bb(p.x.data(), q.data(), gen, b.data(), pos.data(), dsteps.data(), p.grid());
  for (int64_t r = 0; r < N; ++r) {
    const uint32_t m = mask_of(r);
    ++counts[m];
    const auto h = cbref::highs(m, T);
    for (int64_t j = 0; j < k; ++j) EXPECT_EQ(pos[static_cast<size_t>(r * k + j)], h[static_cast<size_t>(j)]);
    if (r < 50) {
      const auto ref = cbref::bb_steps(x, k, m);
      for (int64_t j = 0; j < k; ++j) EXPECT_NEAR(std::exp(dsteps[static_cast<size_t>(r * k + j)]), ref[static_cast<size_t>(j)], 1e-13);
    }
  }
  const double chi_bb = chi_square(counts, set_probs, N);
  EXPECT_LT(chi_bb, bound);

  // DB: the set frequencies and the ordered-tuple frequencies (each order P(A | k) / k!).
  counts.clear();
  std::map<uint64_t, int64_t> ordered;
  core::cb_sample_db(p.x.data(), q.data(), gen, b.data(), pos.data(), dsteps.data(), p.grid());
  for (uint32_t m : subsets(T, k)) {
    auto o = cbref::highs(m, T);
    do {
      ordered_probs[static_cast<uint64_t>(o[0] * 100 + o[1] * 10 + o[2])] = set_probs[m] / 6.0;
    } while (std::next_permutation(o.begin(), o.end()));
  }
  for (int64_t r = 0; r < N; ++r) {
    const uint32_t m = mask_of(r);
    ++counts[m];
    const int64_t* o = pos.data() + r * k;
    for (int64_t j = 0; j < k; ++j) EXPECT_TRUE(cbref::bit(m, o[j]));
    ++ordered[static_cast<uint64_t>(o[0] * 100 + o[1] * 10 + o[2])];
    if (r < 50) {
      const auto ref = cbref::db_steps(x, std::vector<int64_t>(o, o + k));
      for (int64_t j = 0; j < k; ++j) EXPECT_NEAR(std::exp(dsteps[static_cast<size_t>(r * k + j)]), ref[static_cast<size_t>(j)], 1e-13);
    }
  }
  const double chi_db = chi_square(counts, set_probs, N);
  const double chi_db_ordered = chi_square(ordered, ordered_probs, N);
  EXPECT_LT(chi_db, bound);
  EXPECT_LT(chi_db_ordered, chi_bound(double(ordered_probs.size() - 1)));
  std::cout << "[ figures  ] chi-square (N=" << N << ", " << set_probs.size() << " sets, bound "
            << bound << "): IDB " << chi_idb << ", BB " << chi_bb << ", DB sets " << chi_db
            << ", DB ordered (" << ordered_probs.size() << " cells, bound "
            << chi_bound(double(ordered_probs.size() - 1)) << ") " << chi_db_ordered << "\n";

  // Same seed, same draws, whatever the thread count (per-row seeds drawn up front).
  core::Rng g1(7), g2(7);
  std::vector<double> b1(b.size()), b2(b.size());
  core::cb_sample_bb(p.x.data(), q.data(), g1, b1.data(), static_cast<int64_t*>(nullptr), static_cast<double*>(nullptr), p.grid());
  core::cb_sample_bb(p.x.data(), q.data(), g2, b2.data(), static_cast<int64_t*>(nullptr), static_cast<double*>(nullptr), p.grid());
  EXPECT_EQ(b1, b2);
}

TEST(ConditionalBernoulli, GradientsMatchFiniteDifferences) {
  Random rng(15);
  const Problem p = make_problem(rng, {8, 5, 3}, {3, 2, 3}, 8, 1.2);
  const auto q = p.table();
  const auto x0 = finite_copy(p.x);
  const auto b = p.b_of({0b10010100, 0b01001, 0b111});
  const std::vector<int64_t> order = {7, 2, 4, 3, 0, 0, 1, 0, 2};  // rows: {7,2,4}, {3,0}, {1,0,2}
  auto table_of = [&](const std::vector<double>& x) {
    std::vector<double> t(p.table_size());
    core::cb_table(x.data(), t.data(), p.grid());
    return t;
  };
  std::vector<double> grad(p.x.size(), kNaN);

  // Table adjoint with random weights on every feasible entry.
  std::vector<double> gt(p.table_size(), 0.0);
  for (size_t i = 0; i < gt.size(); ++i) gt[i] = std::isfinite(q[i]) ? rng.normal() : 0.0;
  core::cb_table_backward(gt.data(), p.x.data(), q.data(), grad.data(), p.grid());
  auto ft = [&](const std::vector<double>& x) {
    const auto t = table_of(x);
    double s = 0;
    for (size_t i = 0; i < t.size(); ++i) s += std::isfinite(t[i]) ? gt[i] * t[i] : 0.0;
    return s;
  };
  expect_gradients_close(grad, numeric_gradient(ft, x0, 1e-5), 1e-7, "cb_table_backward");

  // log P(b | k)
  const std::vector<double> g3 = {0.8, -1.1, 1.7};
  core::cb_log_prob_backward(g3.data(), p.x.data(), b.data(), q.data(), grad.data(), p.grid());
  auto flp = [&](const std::vector<double>& x) {
    const auto t = table_of(x);
    std::vector<double> lp(3);
    core::cb_log_prob(x.data(), b.data(), t.data(), lp.data(), p.grid());
    return g3[0] * lp[0] + g3[1] * lp[1] + g3[2] * lp[2];
  };
  expect_gradients_close(grad, numeric_gradient(flp, x0, 1e-5), 1e-7, "cb_log_prob_backward");

  // IDB steps
  std::vector<double> gs(p.x.size());
  for (auto& v : gs) v = rng.normal();
  core::cb_idb_step_log_probs_backward(gs.data(), p.x.data(), b.data(), q.data(), grad.data(), p.grid());
  auto fidb = [&](const std::vector<double>& x) {
    const auto t = table_of(x);
    std::vector<double> s(p.x.size());
    core::cb_idb_step_log_probs(x.data(), b.data(), t.data(), s.data(), p.grid());
    double acc = 0;
    for (size_t i = 0; i < s.size(); ++i) acc += gs[i] * s[i];
    return acc;
  };
  expect_gradients_close(grad, numeric_gradient(fidb, x0, 1e-5), 1e-7, "IDB steps backward");

  // BB and DB steps
  std::vector<double> gk(static_cast<size_t>(p.B * p.K));
  for (auto& v : gk) v = rng.normal();
  core::cb_bb_step_log_probs_backward(gk.data(), p.x.data(), b.data(), q.data(), grad.data(), p.grid());
  auto fbb = [&](const std::vector<double>& x) {
    const auto t = table_of(x);
    std::vector<double> s(gk.size());
    core::cb_bb_step_log_probs(x.data(), b.data(), t.data(), s.data(), p.grid());
    double acc = 0;
    for (size_t i = 0; i < s.size(); ++i) acc += gk[i] * s[i];
    return acc;
  };
  expect_gradients_close(grad, numeric_gradient(fbb, x0, 1e-5), 1e-7, "BB steps backward");
  core::cb_db_step_log_probs_backward(gk.data(), p.x.data(), order.data(), grad.data(), p.grid());
  auto fdb = [&](const std::vector<double>& x) {
    std::vector<double> s(gk.size());
    core::cb_db_step_log_probs(x.data(), order.data(), s.data(), p.grid());
    double acc = 0;
    for (size_t i = 0; i < s.size(); ++i) acc += gk[i] * s[i];
    return acc;
  };
  expect_gradients_close(grad, numeric_gradient(fdb, x0, 1e-5), 1e-7, "DB steps backward");
  // Padding of the gradient is exactly 0 (row 1 has T_b = 5, row 2 T_b = 3).
  for (int64_t t = 5; t < 8; ++t) EXPECT_EQ(grad[static_cast<size_t>(8 + t)], 0.0);
  for (int64_t t = 3; t < 8; ++t) EXPECT_EQ(grad[static_cast<size_t>(16 + t)], 0.0);
}

// The header's promise: a float result within one float ulp of the double one (both compute
// in double and round once; core/float_ulp.h), for the table (cb_table<float> writes the
// double table rounded) and the marginals. The double kernels get the float logits, so that
// rounding them to float does not blur the comparison.
TEST(ConditionalBernoulli, FloatMatchesDouble) {
  Random rng(16);
  Problem p = make_problem(rng, {300, 120}, {40, 60}, 300, 3.0);
  const auto xf = cast<float>(p.x);
  p.x = cast<double>(xf);
  const auto qd = p.table();
  std::vector<float> qf(p.table_size());
  core::cb_table(xf.data(), qf.data(), p.grid());
  const double terr = max_float_ulps(qf, qd);  // -inf entries must match exactly
  EXPECT_LE(terr, 1.0);
  std::vector<double> md(p.x.size());
  std::vector<float> mf(p.x.size());
  core::cb_marginals(p.x.data(), qd.data(), md.data(), p.grid());
  core::cb_marginals(xf.data(), qf.data(), mf.data(), p.grid());
  const double merr = max_float_ulps(mf, md);
  EXPECT_LE(merr, 1.0);
  std::cout << "[ figures  ] CB float vs double: table max " << terr << ", marginals max " << merr
            << " float ulp\n";
}

TEST(ConditionalBernoulli, StableForLongSequencesAndLargeLogits) {
  Random rng(17);
  const int64_t T = 10000, k = 300;
  Problem p;
  p.B = 1;
  p.T = T;
  p.K = k;
  p.lens = {T};
  p.k = {k};
  p.x.resize(T);
  for (auto& v : p.x) v = rng.uniform() < 0.5 ? 50.0 : -50.0;  // K ~ 5000 >> k: deep tail
  const auto t0 = std::chrono::steady_clock::now();
  const auto q = p.table();
  std::vector<double> m(T), b(T), steps(T), ks(k), grad(T);
  std::vector<int64_t> pos(k);
  core::cb_marginals(p.x.data(), q.data(), m.data(), p.grid());
  core::Rng gen(5);
  core::cb_sample_idb(p.x.data(), q.data(), gen, b.data(), steps.data(), p.grid());
  double lp_idb = 0;
  for (double v : steps) {
    ASSERT_TRUE(std::isfinite(v));
    lp_idb += v;
  }
  core::cb_sample_bb(p.x.data(), q.data(), gen, b.data(), pos.data(), ks.data(), p.grid());
  for (double v : ks) ASSERT_TRUE(std::isfinite(v));
  core::cb_sample_db(p.x.data(), q.data(), gen, b.data(), pos.data(), ks.data(), p.grid());
  for (double v : ks) ASSERT_TRUE(std::isfinite(v));
  const double one = 1;
  core::cb_log_prob_backward(&one, p.x.data(), b.data(), q.data(), grad.data(), p.grid());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (double v : q) EXPECT_FALSE(std::isnan(v) || v == std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isfinite(q[static_cast<size_t>(k)]));
  double s = 0;
  for (double v : m) {
    ASSERT_TRUE(v >= 0.0 && v <= 1.0);
    s += v;
  }
  EXPECT_NEAR(s, double(k), 1e-6);
  // Only the high-logit trials can be high: the draws pick k of them.
  for (int64_t t = 0; t < T; ++t) {
    if (b[static_cast<size_t>(t)] == 1.0) {
      EXPECT_EQ(p.x[static_cast<size_t>(t)], 50.0);
    }
  }
  for (double v : grad) ASSERT_TRUE(std::isfinite(v));
  // The marginals of the high-logit trials are equal (exchangeable): k / #high.
  int64_t nhigh = 0;
  for (double v : p.x) nhigh += v > 0;
  for (int64_t t = 0; t < T; ++t) {
    if (p.x[static_cast<size_t>(t)] > 0) {
      EXPECT_NEAR(m[static_cast<size_t>(t)], double(k) / double(nhigh), 1e-9);
    }
  }
  std::cout << "[ figures  ] CB T=10000 k=300 logits +-50: table + marginals + 3 samplers + grad "
            << secs << " s; log P(K=k) = " << q[static_cast<size_t>(k)] << ", IDB sample log-prob "
            << lp_idb << "\n";
  // float: finite too.
  const auto xf = cast<float>(p.x);
  std::vector<float> qf(p.table_size()), mf(T);
  core::cb_table(xf.data(), qf.data(), p.grid());
  core::cb_marginals(xf.data(), qf.data(), mf.data(), p.grid());
  EXPECT_TRUE(std::isfinite(qf[static_cast<size_t>(k)]));
  for (float v : mf) ASSERT_TRUE(v >= 0.f && v <= 1.f);
}

TEST(ConditionalBernoulli, EdgeCases) {
  // k = 0 and k = T: a single possible sequence.
  const std::vector<double> x = {3.0, -2.0, 0.5};
  for (int64_t k : {0, 3}) {
    Grid g;
    g.batch = 1;
    g.in_len = 3;
    g.out_len = k;
    std::vector<double> q(static_cast<size_t>(4 * (k + 1))), b(3), steps(3), m(3);
    core::cb_table(x.data(), q.data(), g);
    core::Rng gen(1);
    core::cb_sample_idb(x.data(), q.data(), gen, b.data(), steps.data(), g);
    core::cb_marginals(x.data(), q.data(), m.data(), g);
    for (int t = 0; t < 3; ++t) {
      EXPECT_EQ(b[static_cast<size_t>(t)], k == 0 ? 0.0 : 1.0);
      EXPECT_NEAR(steps[static_cast<size_t>(t)], 0.0, 1e-15);
      EXPECT_NEAR(m[static_cast<size_t>(t)], k == 0 ? 0.0 : 1.0, 1e-15);
    }
    double lp = kNaN;
    core::cb_log_prob(x.data(), b.data(), q.data(), &lp, g);
    EXPECT_NEAR(lp, 0.0, 1e-15);
  }
  // Empty rows and an empty batch.
  Grid g;
  g.batch = 0;
  g.in_len = 4;
  g.out_len = 2;
  core::cb_table(static_cast<const double*>(nullptr), static_cast<double*>(nullptr), g);
}

TEST(ConditionalBernoulli, BadInputRaisesClearErrors) {
  const std::vector<double> x = {0.1, 0.2, 0.3};
  std::vector<double> q(16), out(3);
  const int64_t kbig = 4, kneg = -1, k2 = 2, len2 = 2;
  Grid g;
  g.batch = 1;
  g.in_len = 3;
  g.out_len = 3;
  g.out_lens = &kbig;
  expect_error([&] { core::cb_table(x.data(), q.data(), g); }, "k[0] must be <= K=3");
  g.out_len = 4;
  expect_error([&] { core::cb_table(x.data(), q.data(), g); },
               "k[0] must be <= in_lens[0]=3 (cannot have more highs than trials), got 4");
  g.out_lens = &kneg;
  expect_error([&] { core::cb_table(x.data(), q.data(), g); }, "k[0] must be >= 0, got -1");
  g.out_len = 2;
  g.out_lens = &k2;
  g.in_lens = &len2;
  g.out_len = 2;
  expect_error([&] { core::cb_table(static_cast<const double*>(nullptr), q.data(), g); }, "logits must not be null");
  expect_error([&] { core::cb_table(x.data(), static_cast<double*>(nullptr), g); }, "table must not be null");
  const int64_t len5 = 5;
  g.in_lens = &len5;
  expect_error([&] { core::cb_table(x.data(), q.data(), g); }, "in_lens[0] must lie in [0, T=3], got 5");
  g.in_lens = nullptr;
  core::cb_table(x.data(), q.data(), g);
  const std::vector<double> b_wrong_sum = {1, 0, 0}, b_not01 = {1, 0.5, 0};
  double lp = 0;
  expect_error([&] { core::cb_log_prob(x.data(), b_wrong_sum.data(), q.data(), &lp, g); },
               "b: expected sum of row 0 == k[0]=2, got 1");
  expect_error([&] { core::cb_log_prob(x.data(), b_not01.data(), q.data(), &lp, g); },
               "b: expected values in {0, 1}, got 0.5 at [0, 1]");
  const std::vector<int64_t> dup = {1, 1}, outside = {0, 3}, decreasing = {2, 0};
  std::vector<double> steps(2);
  expect_error([&] { core::cb_db_step_log_probs(x.data(), dup.data(), steps.data(), g); },
               "order: expected distinct entries, got 1 twice in row 0");
  expect_error([&] { core::cb_db_step_log_probs(x.data(), outside.data(), steps.data(), g); },
               "order: expected entries in [0, in_lens[0]=3), got 3 at [0, 1]");
  core::cb_db_step_log_probs(x.data(), decreasing.data(), steps.data(), g);  // any order is fine
  const std::vector<double> gnan = {kNaN, 0, 0};
  const std::vector<double> b_ok = {1, 0, 1};
  expect_error([&] { core::cb_idb_step_log_probs_backward(gnan.data(), x.data(), b_ok.data(), q.data(), out.data(), g); },
               "grad_step: expected finite values, got nan");
  const std::vector<double> xinf = {0.1, std::numeric_limits<double>::infinity(), 0.3};
  expect_error([&] { core::cb_table(xinf.data(), q.data(), g); }, "logits: expected finite values, got inf");
  core::Rng gen(0);
  expect_error([&] { core::cb_sample_idb(x.data(), static_cast<const double*>(nullptr), gen, out.data(), out.data(), g); },
               "cb_sample_idb: table must not be null");
}

}  // namespace
}  // namespace mona::test
