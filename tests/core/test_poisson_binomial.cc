// label: cb
// Tests of mona/core/poisson_binomial.h: the log pmf, moments and single-k log-probability
// with its gradient, against enumeration of all 2^T sequences (tests/reference/cb_reference.h),
// central finite differences, float against double, and T = 10000 with logits of +-50.
#include "mona/core/poisson_binomial.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <vector>

#include "core/float_ulp.h"
#include "reference/cb_reference.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A batch of rows of lengths `lens` padded to T with NaN (a kernel reading padding shows it).
struct Rows {
  int64_t B = 0, T = 0;
  std::vector<int64_t> lens;
  std::vector<double> x;
  std::vector<double> row(int64_t b) const {
    return std::vector<double>(x.begin() + b * T, x.begin() + b * T + lens[static_cast<size_t>(b)]);
  }
};

Rows make_rows(Random& rng, std::vector<int64_t> lens, int64_t T, double stddev = 2.0) {
  Rows r;
  r.B = static_cast<int64_t>(lens.size());
  r.T = T;
  r.lens = lens;
  r.x.assign(static_cast<size_t>(r.B * T), kNaN);
  for (int64_t b = 0; b < r.B; ++b) {
    for (int64_t t = 0; t < lens[static_cast<size_t>(b)]; ++t) r.x[static_cast<size_t>(b * T + t)] = rng.normal(0, stddev);
  }
  return r;
}

TEST(PoissonBinomial, LogPmfMatchesEnumeration) {
  Random rng(1);
  const Rows r = make_rows(rng, {12, 7, 1, 0, 10}, 12);
  std::vector<double> out(static_cast<size_t>(r.B * (r.T + 1)), kNaN);
  core::poisson_binomial_log_pmf(r.x.data(), out.data(), r.B, r.T, r.lens.data());
  double err = 0;
  for (int64_t b = 0; b < r.B; ++b) {
    const auto ref = cbref::pmf(r.row(b));
    for (int64_t k = 0; k <= r.T; ++k) {
      const double v = out[static_cast<size_t>(b * (r.T + 1) + k)];
      if (k <= r.lens[static_cast<size_t>(b)]) {
        const double want = std::log(ref[static_cast<size_t>(k)]);
        err = std::max(err, std::abs(v - want) / std::max(1.0, std::abs(want)));
        EXPECT_NEAR(v, want, 1e-12 * std::max(1.0, std::abs(want))) << "b=" << b << " k=" << k;
      } else {
        EXPECT_EQ(v, 0.0) << "padding b=" << b << " k=" << k;
      }
    }
  }
  std::cout << "[ figures  ] PB log pmf vs enumeration: max rel error " << err << "\n";
}

TEST(PoissonBinomial, MomentsMatchEnumeration) {
  Random rng(2);
  const Rows r = make_rows(rng, {12, 5, 0}, 12);
  std::vector<double> mean(3), var(3);
  core::poisson_binomial_moments(r.x.data(), mean.data(), var.data(), r.B, r.T, r.lens.data());
  for (int64_t b = 0; b < r.B; ++b) {
    const auto ref = cbref::pmf(r.row(b));
    double m = 0, m2 = 0;
    for (size_t k = 0; k < ref.size(); ++k) {
      m += k * ref[k];
      m2 += double(k * k) * ref[k];
    }
    EXPECT_NEAR(mean[static_cast<size_t>(b)], m, 1e-12);
    EXPECT_NEAR(var[static_cast<size_t>(b)], m2 - m * m, 1e-11);
  }
  // Either output may be null.
  core::poisson_binomial_moments(r.x.data(), mean.data(), static_cast<double*>(nullptr), r.B, r.T,
                                 r.lens.data());
  EXPECT_GT(mean[0], 0.0);
}

TEST(PoissonBinomial, LogProbMatchesEnumerationForEveryK) {
  Random rng(3);
  for (int64_t T : {1, 4, 9, 12}) {
    const Rows r = make_rows(rng, {T}, T);
    const auto ref = cbref::pmf(r.row(0));
    for (int64_t k = 0; k <= T; ++k) {
      double lp = kNaN;
      core::poisson_binomial_log_prob(r.x.data(), &k, &lp, 1, T, nullptr);
      EXPECT_NEAR(lp, std::log(ref[static_cast<size_t>(k)]), 1e-12 * std::max(1.0, std::abs(lp)))
          << "T=" << T << " k=" << k;
    }
  }
}

TEST(PoissonBinomial, LogProbGradientMatchesFiniteDifferencesAndMarginals) {
  Random rng(4);
  const Rows r = make_rows(rng, {9, 6, 3}, 9, 1.5);
  const std::vector<int64_t> k = {4, 0, 3};
  const std::vector<double> gout = {0.7, -1.3, 2.0};
  std::vector<double> grad(r.x.size(), kNaN);
  core::poisson_binomial_log_prob_backward(gout.data(), r.x.data(), k.data(), grad.data(), r.B,
                                           r.T, r.lens.data());
  auto x0 = r.x;
  for (auto& v : x0) v = std::isnan(v) ? 0.0 : v;  // finite padding for the perturbed copies
  auto f = [&](const std::vector<double>& x) {
    std::vector<double> lp(3);
    core::poisson_binomial_log_prob(x.data(), k.data(), lp.data(), r.B, r.T, r.lens.data());
    return gout[0] * lp[0] + gout[1] * lp[1] + gout[2] * lp[2];
  };
  const auto num = numeric_gradient(f, x0, 1e-5);
  expect_gradients_close(grad, num, 1e-7, "d log P(K=k)/dx");
  // Padding is exactly 0; and the gradient is g * (P(b_t = 1 | k) - p_t).
  for (int64_t b = 0; b < r.B; ++b) {
    const auto m = cbref::marginals(r.row(b), static_cast<int>(k[static_cast<size_t>(b)]));
    for (int64_t t = 0; t < r.T; ++t) {
      const double g = grad[static_cast<size_t>(b * r.T + t)];
      if (t >= r.lens[static_cast<size_t>(b)]) {
        EXPECT_EQ(g, 0.0);
        continue;
      }
      const double p = 1 / (1 + std::exp(-r.x[static_cast<size_t>(b * r.T + t)]));
      EXPECT_NEAR(g, gout[static_cast<size_t>(b)] * (m[static_cast<size_t>(t)] - p), 1e-12);
    }
  }
}

// The header's promise: a float result within one float ulp of the double one (both compute
// in double and round once; core/float_ulp.h). The double kernel gets the float inputs, so
// that rounding the logits to float (which moves log P by up to sum_t |x_t| 2^-24, 3e-5 for
// these 200 logits of s.d. 3) does not blur the comparison.
TEST(PoissonBinomial, FloatMatchesDouble) {
  Random rng(5);
  const Rows r = make_rows(rng, {200, 50}, 200, 3.0);
  const std::vector<float> xf = cast<float>(r.x);
  const std::vector<double> xd = cast<double>(xf);
  std::vector<double> outd(static_cast<size_t>(2 * 201));
  std::vector<float> outf(outd.size());
  core::poisson_binomial_log_pmf(xd.data(), outd.data(), 2, 200, r.lens.data());
  core::poisson_binomial_log_pmf(xf.data(), outf.data(), 2, 200, r.lens.data());
  const double err = max_float_ulps(outf, outd);
  EXPECT_LE(err, 1.0);
  const std::vector<int64_t> k = {80, 20};
  std::vector<double> gd(r.x.size()), one = {1.0, 1.0};
  std::vector<float> gf(r.x.size()), onef = {1.f, 1.f};
  core::poisson_binomial_log_prob_backward(one.data(), xd.data(), k.data(), gd.data(), 2, 200, r.lens.data());
  core::poisson_binomial_log_prob_backward(onef.data(), xf.data(), k.data(), gf.data(), 2, 200, r.lens.data());
  const double gerr = max_float_ulps(gf, gd);
  EXPECT_LE(gerr, 1.0);
  std::cout << "[ figures  ] PB float vs double: log pmf max " << err << " float ulp, grad max " << gerr
            << " float ulp\n";
}

TEST(PoissonBinomial, StableForLongSequencesAndLargeLogits) {
  const int64_t T = 10000;
  Random rng(6);
  std::vector<double> x(T);
  for (int64_t t = 0; t < T; ++t) x[static_cast<size_t>(t)] = (t % 2 == 0) ? 50.0 : -50.0;
  std::vector<double> lp(static_cast<size_t>(T + 1));
  auto t0 = std::chrono::steady_clock::now();
  core::poisson_binomial_log_pmf(x.data(), lp.data(), 1, T, nullptr);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double mx = -1e300;
  for (double v : lp) {
    ASSERT_TRUE(std::isfinite(v));
    EXPECT_LE(v, 1e-9);
    mx = std::max(mx, v);
  }
  double s = 0;
  for (double v : lp) s += std::exp(v - mx);
  EXPECT_NEAR(mx + std::log(s), 0.0, 1e-9);  // sums to 1
  // 5000 trials with p = 1 - e^-50 and 5000 with p = e^-50: K = 5000 almost surely, and
  // P(K = 5001) = 5000 e^-50 (1 + O(e^-50)), P(K = 4999) likewise.
  EXPECT_NEAR(lp[5000], 0.0, 1e-12);
  EXPECT_NEAR(lp[5001], std::log(5000.0) - 50.0, 1e-9);
  EXPECT_NEAR(lp[4999], std::log(5000.0) - 50.0, 1e-9);
  std::cout << "[ figures  ] PB log pmf T=10000: " << secs << " s; log P(K=0) = " << lp[0] << "\n";

  // Single k with gradient, random +-50 logits, float and double.
  for (auto& v : x) v = rng.uniform() < 0.3 ? 50.0 : -50.0;
  const int64_t k = 3000;
  double l1 = 0;
  t0 = std::chrono::steady_clock::now();
  core::poisson_binomial_log_prob(x.data(), &k, &l1, 1, T, nullptr);
  std::vector<double> g(T);
  const double one = 1;
  core::poisson_binomial_log_prob_backward(&one, x.data(), &k, g.data(), 1, T, nullptr);
  const double secs2 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  core::poisson_binomial_log_pmf(x.data(), lp.data(), 1, T, nullptr);
  EXPECT_TRUE(std::isfinite(l1));
  EXPECT_NEAR(l1, lp[static_cast<size_t>(k)], 1e-8 * std::abs(l1));
  double gs = 0;
  for (double v : g) {
    ASSERT_TRUE(std::isfinite(v));
    gs += v;
  }
  // sum_t (m_t - p_t) = k - E[K].
  double mean = 0;
  core::poisson_binomial_moments(x.data(), &mean, static_cast<double*>(nullptr), 1, T, nullptr);
  EXPECT_NEAR(gs, double(k) - mean, 1e-6);
  std::vector<float> xf = cast<float>(x), lpf(static_cast<size_t>(T + 1));
  core::poisson_binomial_log_pmf(xf.data(), lpf.data(), 1, T, nullptr);
  // +-50 is exact in float, so both dtypes see the same logits: the header's promise, one
  // float ulp (core/float_ulp.h), here with log P(K = k) down to about -3.5e5.
  for (size_t i = 0; i < lpf.size(); ++i) {
    ASSERT_TRUE(std::isfinite(lpf[i]));
    EXPECT_LE(float_ulps(lpf[i], lp[i]), 1.0) << "k=" << i;
  }
  std::cout << "[ figures  ] PB log pmf T=10000 float vs double: max " << max_float_ulps(lpf, lp)
            << " float ulp\n";
  std::cout << "[ figures  ] PB log_prob + backward T=10000 k=3000: " << secs2 << " s\n";
}

TEST(PoissonBinomial, EmptyAndSingleTrial) {
  const double x = 0.3;
  std::vector<double> lp(2, kNaN);
  core::poisson_binomial_log_pmf(&x, lp.data(), 1, 1, nullptr);
  EXPECT_NEAR(lp[0], std::log(1 / (1 + std::exp(x))), 1e-15);
  EXPECT_NEAR(lp[1], std::log(1 / (1 + std::exp(-x))), 1e-15);
  const int64_t zero_len = 0, k0 = 0;
  double v = kNaN;
  core::poisson_binomial_log_pmf(&x, lp.data(), 1, 1, &zero_len);
  EXPECT_EQ(lp[0], 0.0);
  EXPECT_EQ(lp[1], 0.0);
  core::poisson_binomial_log_prob(&x, &k0, &v, 1, 1, &zero_len);
  EXPECT_EQ(v, 0.0);
  core::poisson_binomial_log_pmf(static_cast<const double*>(nullptr), static_cast<double*>(nullptr), 0, 5, nullptr);
}

TEST(PoissonBinomial, BadInputRaisesClearErrors) {
  const std::vector<double> x = {0.1, 0.2, 0.3};
  std::vector<double> out(4), g(3);
  const int64_t len3 = 3, len4 = 4, kbig = 4, kneg = -1, k1 = 1;
  double lp = 0, one = 1;
  expect_error([&] { core::poisson_binomial_log_prob(x.data(), &kbig, &lp, 1, 3, nullptr); },
               "k[0] must be <= in_lens[0]=3");
  expect_error([&] { core::poisson_binomial_log_prob(x.data(), &kneg, &lp, 1, 3, nullptr); },
               "k[0] must be >= 0, got -1");
  expect_error([&] { core::poisson_binomial_log_prob_backward(&one, x.data(), &kbig, g.data(), 1, 3, nullptr); },
               "got 4");
  expect_error([&] { core::poisson_binomial_log_pmf(x.data(), out.data(), 1, 3, &len4); },
               "in_lens[0] must lie in [0, T=3], got 4");
  expect_error([&] { core::poisson_binomial_log_pmf(static_cast<const double*>(nullptr), out.data(), 1, 3, &len3); },
               "logits must not be null");
  expect_error([&] { core::poisson_binomial_log_pmf(x.data(), static_cast<double*>(nullptr), 1, 3, &len3); },
               "log_pmf must not be null");
  expect_error([&] { core::poisson_binomial_log_prob(x.data(), static_cast<const int64_t*>(nullptr), &lp, 1, 3, nullptr); },
               "k must not be null");
  expect_error([&] { core::poisson_binomial_log_pmf(x.data(), out.data(), -1, 3, nullptr); },
               "batch size must be >= 0");
  const std::vector<double> bad = {0.1, kNaN, 0.3};
  expect_error([&] { core::poisson_binomial_log_pmf(bad.data(), out.data(), 1, 3, nullptr); },
               "logits: expected finite values, got nan at [0, 1]");  // [B, T]: two indices
  const double inf_grad = std::numeric_limits<double>::infinity();
  expect_error([&] { core::poisson_binomial_log_prob_backward(&inf_grad, x.data(), &k1, g.data(), 1, 3, nullptr); },
               "grad_log_prob: expected finite values, got inf at [0]");  // [B]: one index
}

}  // namespace
}  // namespace mona::test
