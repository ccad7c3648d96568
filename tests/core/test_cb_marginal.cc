// label: cb
// Tests of mona/core/cb_marginal.h: the exact marginal likelihood log P(c) of 004 eq. 34
// (forward algorithm over the BB transitions) and eq. 36 (CTC-like lattice) against
// enumeration of all 2^T sequences (tests/reference/cb_reference.h), gradients against
// central finite differences, float against double, T = 10000 with logits of +-50.
#include "mona/core/cb_marginal.h"

#include <gtest/gtest.h>

#include <algorithm>
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

using core::Grid;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Logits [B, T] and log emissions [B, U, T], padding NaN.
struct Problem {
  int64_t B = 0, U = 0, T = 0;
  std::vector<int64_t> in_lens, out_lens;
  std::vector<double> x, e;
  Grid grid() const {
    Grid g;
    g.batch = B;
    g.out_len = U;
    g.in_len = T;
    g.in_lens = in_lens.data();
    g.out_lens = out_lens.data();
    return g;
  }
  double reference(int64_t b) const {
    const int64_t n = in_lens[static_cast<size_t>(b)], L = out_lens[static_cast<size_t>(b)];
    const std::vector<double> xr(x.begin() + b * T, x.begin() + b * T + n);
    std::vector<std::vector<double>> er(static_cast<size_t>(L));
    for (int64_t l = 0; l < L; ++l) {
      const auto* row = e.data() + (b * U + l) * T;
      er[static_cast<size_t>(l)].assign(row, row + n);
    }
    return std::log(cbref::marginal_likelihood(xr, er));
  }
};

Problem make_problem(Random& rng, std::vector<int64_t> in_lens, std::vector<int64_t> out_lens,
                     int64_t T, int64_t U, double stddev = 1.5) {
  Problem p;
  p.B = static_cast<int64_t>(in_lens.size());
  p.T = T;
  p.U = U;
  p.in_lens = in_lens;
  p.out_lens = out_lens;
  p.x.assign(static_cast<size_t>(p.B * T), kNaN);
  p.e.assign(static_cast<size_t>(p.B * U * T), kNaN);
  for (int64_t b = 0; b < p.B; ++b) {
    for (int64_t t = 0; t < in_lens[static_cast<size_t>(b)]; ++t) {
      p.x[static_cast<size_t>(b * T + t)] = rng.normal(0, stddev);
      for (int64_t l = 0; l < out_lens[static_cast<size_t>(b)]; ++l) {
        p.e[static_cast<size_t>((b * U + l) * T + t)] = std::log(rng.uniform(0.05, 1.0));  // log P(c_l | t)
      }
    }
  }
  return p;
}

std::vector<double> finite_copy(std::vector<double> x) {
  for (auto& v : x) v = std::isnan(v) ? 0.0 : v;
  return x;
}

TEST(CbMarginal, BothFormsMatchEnumeration) {
  Random rng(21);
  const Problem p = make_problem(rng, {12, 9, 5, 4, 0}, {4, 9, 1, 0, 0}, 12, 9);
  std::vector<double> ll34(static_cast<size_t>(p.B), kNaN), ll36(static_cast<size_t>(p.B), kNaN);
  core::cb_marginal_log_likelihood(p.x.data(), p.e.data(), ll34.data(), p.grid());
  core::cb_marginal_log_likelihood_ctc(p.x.data(), p.e.data(), ll36.data(), p.grid());
  double e34 = 0, e36 = 0;
  for (int64_t b = 0; b < p.B; ++b) {
    const double want = p.reference(b);
    EXPECT_NEAR(ll34[static_cast<size_t>(b)], want, 1e-12 * std::max(1.0, std::abs(want))) << "eq. 34, b=" << b;
    EXPECT_NEAR(ll36[static_cast<size_t>(b)], want, 1e-12 * std::max(1.0, std::abs(want))) << "eq. 36, b=" << b;
    e34 = std::max(e34, std::abs(ll34[static_cast<size_t>(b)] - want));
    e36 = std::max(e36, std::abs(ll36[static_cast<size_t>(b)] - want));
  }
  EXPECT_EQ(ll34[4], 0.0);  // T = L = 0: log 1
  std::cout << "[ figures  ] log P(c) vs enumeration, max abs error: eq. 34 " << e34 << ", eq. 36 "
            << e36 << "\n";
}

TEST(CbMarginal, RandomShapesAgreeWithEnumeration) {
  Random rng(22);
  for (int rep = 0; rep < 20; ++rep) {
    const int64_t T = rng.integer(1, 10), L = rng.integer(0, T);
    const Problem p = make_problem(rng, {T}, {L}, T, std::max<int64_t>(L, 1), 2.5);
    double a = kNaN, c = kNaN;
    core::cb_marginal_log_likelihood(p.x.data(), p.e.data(), &a, p.grid());
    core::cb_marginal_log_likelihood_ctc(p.x.data(), p.e.data(), &c, p.grid());
    const double want = p.reference(0);
    EXPECT_NEAR(a, want, 1e-12 * std::max(1.0, std::abs(want))) << "T=" << T << " L=" << L;
    EXPECT_NEAR(c, want, 1e-12 * std::max(1.0, std::abs(want))) << "T=" << T << " L=" << L;
  }
}

TEST(CbMarginal, GradientsMatchFiniteDifferences) {
  Random rng(23);
  const Problem p = make_problem(rng, {8, 6, 3}, {3, 6, 0}, 8, 6);
  const std::vector<double> g = {0.9, -1.4, 0.6};
  std::vector<double> gx(p.x.size(), kNaN), ge(p.e.size(), kNaN);
  core::cb_marginal_log_likelihood_backward(g.data(), p.x.data(), p.e.data(), gx.data(), ge.data(),
                                            p.grid());
  const auto x0 = finite_copy(p.x), e0 = finite_copy(p.e);
  auto f = [&](const std::vector<double>& x, const std::vector<double>& e) {
    std::vector<double> ll(3);
    core::cb_marginal_log_likelihood(x.data(), e.data(), ll.data(), p.grid());
    return g[0] * ll[0] + g[1] * ll[1] + g[2] * ll[2];
  };
  expect_gradients_close(gx, numeric_gradient([&](const std::vector<double>& x) { return f(x, e0); }, x0, 1e-5),
                         1e-7, "d log P(c) / d logits");
  expect_gradients_close(ge, numeric_gradient([&](const std::vector<double>& e) { return f(x0, e); }, e0, 1e-5),
                         1e-7, "d log P(c) / d log_emit");
  // Padding exactly 0: row 1 frames >= 6, row 2 all labels, and label rows >= L.
  for (int64_t t = 6; t < 8; ++t) EXPECT_EQ(gx[static_cast<size_t>(8 + t)], 0.0);
  for (int64_t i = 0; i < 6 * 8; ++i) EXPECT_EQ(ge[static_cast<size_t>(2 * 6 * 8 + i)], 0.0);
  for (int64_t l = 3; l < 6; ++l) {
    for (int64_t t = 0; t < 8; ++t) EXPECT_EQ(ge[static_cast<size_t>(l * 8 + t)], 0.0);
  }
  // Posteriors: sum_t gamma[l, t] = 1 for each label, so sum of grad_log_emit over t = g.
  for (int64_t l = 0; l < 3; ++l) {
    double s = 0;
    for (int64_t t = 0; t < 8; ++t) s += ge[static_cast<size_t>(l * 8 + t)];
    EXPECT_NEAR(s, g[0], 1e-12);
  }
  // Either output may be null.
  core::cb_marginal_log_likelihood_backward(g.data(), p.x.data(), p.e.data(), gx.data(),
                                            static_cast<double*>(nullptr), p.grid());
}

// The header's promise: a float result within one float ulp of the double one (both compute
// in double and round once; core/float_ulp.h), each of eq. 34, eq. 36 and the gradient
// against its own double kernel. The double kernels get the float inputs, so that rounding
// the inputs to float does not blur the comparison.
TEST(CbMarginal, FloatMatchesDouble) {
  Random rng(24);
  const Problem p = make_problem(rng, {400, 150}, {50, 150}, 400, 150, 3.0);
  const auto xf = cast<float>(p.x), ef = cast<float>(p.e);
  const auto xd = cast<double>(xf), ed = cast<double>(ef);
  std::vector<double> lld(2), lld36(2), gxd(p.x.size()), one = {1.0, 1.0};
  std::vector<float> llf(2), llf36(2), gxf(p.x.size()), onef = {1.f, 1.f};
  core::cb_marginal_log_likelihood(xd.data(), ed.data(), lld.data(), p.grid());
  core::cb_marginal_log_likelihood(xf.data(), ef.data(), llf.data(), p.grid());
  core::cb_marginal_log_likelihood_ctc(xd.data(), ed.data(), lld36.data(), p.grid());
  core::cb_marginal_log_likelihood_ctc(xf.data(), ef.data(), llf36.data(), p.grid());
  core::cb_marginal_log_likelihood_backward(one.data(), xd.data(), ed.data(), gxd.data(),
                                            static_cast<double*>(nullptr), p.grid());
  core::cb_marginal_log_likelihood_backward(onef.data(), xf.data(), ef.data(), gxf.data(),
                                            static_cast<float*>(nullptr), p.grid());
  const double err = max_float_ulps(llf, lld), err36 = max_float_ulps(llf36, lld36);
  const double gerr = max_float_ulps(gxf, gxd);
  EXPECT_LE(err, 1.0);
  EXPECT_LE(err36, 1.0);
  EXPECT_LE(gerr, 1.0);
  std::cout << "[ figures  ] log P(c) float vs double: eq. 34 " << err << ", eq. 36 " << err36
            << ", grad " << gerr << " float ulp (of " << lld[0] << ")\n";
}

TEST(CbMarginal, StableForLongSequencesAndLargeLogits) {
  Random rng(25);
  const int64_t T = 10000, L = 200;
  Problem p;
  p.B = 1;
  p.T = T;
  p.U = L;
  p.in_lens = {T};
  p.out_lens = {L};
  p.x.resize(T);
  p.e.resize(static_cast<size_t>(L * T));
  for (auto& v : p.x) v = rng.uniform() < 0.5 ? 50.0 : -50.0;
  for (auto& v : p.e) v = std::log(rng.uniform(0.01, 1.0));
  double a = 0, c = 0;
  std::vector<double> gx(T), ge(p.e.size());
  const double one = 1;
  const auto t0 = std::chrono::steady_clock::now();
  core::cb_marginal_log_likelihood(p.x.data(), p.e.data(), &a, p.grid());
  const double s34 = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  core::cb_marginal_log_likelihood_ctc(p.x.data(), p.e.data(), &c, p.grid());
  core::cb_marginal_log_likelihood_backward(&one, p.x.data(), p.e.data(), gx.data(), ge.data(), p.grid());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(std::isfinite(a));
  ASSERT_TRUE(std::isfinite(c));
  EXPECT_NEAR(a, c, 1e-9 * std::abs(c));
  for (double v : gx) ASSERT_TRUE(std::isfinite(v));
  double ge_sum = 0, e_max = 0;
  for (double v : ge) {
    ASSERT_TRUE(std::isfinite(v) && v >= 0.0 && v <= 1.0 + 1e-12);
    ge_sum += v;
  }
  for (double v : p.e) e_max = std::max(e_max, std::abs(v));
  // Each label sits at exactly one frame, so d log P / d e_lt (the probability that label l
  // sits at frame t) sums to 1 over t for every label: L in all.
  EXPECT_NEAR(ge_sum, static_cast<double>(L), 1e-9 * L);
  std::cout << "[ figures  ] log P(c) T=10000 L=200 logits +-50: " << a << " (eq. 34) vs " << c
            << " (eq. 36); eq. 34 " << s34 << " s, all three calls " << secs << " s\n";
  const auto xf = cast<float>(p.x), ef = cast<float>(p.e);
  float af = 0;
  core::cb_marginal_log_likelihood(xf.data(), ef.data(), &af, p.grid());
  EXPECT_TRUE(std::isfinite(af));
  // float against double: rounding e to float moves each e_lt by at most |e_lt| 2^-24, and log
  // P by at most sum_lt (d log P / d e_lt) |e_lt| 2^-24 <= L max|e| 2^-24 (x = +-50 is exact in
  // float); the float result is then rounded once (half an ulp of it), and the recursion,
  // accumulated in double, adds less than that. Allowed: that bound plus one ulp of a.
  const double input_bound = static_cast<double>(L) * e_max * std::ldexp(1.0, -24);
  const double ulp_a = std::nextafter(static_cast<float>(std::abs(a)), INFINITY) - static_cast<float>(std::abs(a));
  EXPECT_NEAR(af, a, input_bound + ulp_a);
  std::cout << "[ figures  ] float against double: " << std::abs(af - a) << " (allowed " << input_bound + ulp_a
            << ": inputs " << input_bound << " + one ulp " << ulp_a << ")\n";
}

TEST(CbMarginal, BadInputRaisesClearErrors) {
  const std::vector<double> x = {0.1, 0.2, 0.3}, e(6, -1.0);
  double ll = 0;
  const int64_t T2 = 2, L3 = 3, L2 = 2;
  Grid g;
  g.batch = 1;
  g.out_len = 3;
  g.in_len = 3;
  g.in_lens = &T2;
  g.out_lens = &L3;
  std::vector<double> e9(9, -1.0);
  expect_error([&] { core::cb_marginal_log_likelihood(x.data(), e9.data(), &ll, g); },
               "out_lens[0]=3 (labels L) must be <= in_lens[0]=2 (frames T)");
  expect_error([&] { core::cb_marginal_log_likelihood_ctc(x.data(), e9.data(), &ll, g); },
               "must be <= in_lens[0]=2");
  g.out_lens = &L2;
  expect_error([&] { core::cb_marginal_log_likelihood(static_cast<const double*>(nullptr), e9.data(), &ll, g); },
               "logits must not be null");
  expect_error([&] { core::cb_marginal_log_likelihood(x.data(), static_cast<const double*>(nullptr), &ll, g); },
               "log_emit must not be null");
  expect_error([&] { core::cb_marginal_log_likelihood(x.data(), e9.data(), static_cast<double*>(nullptr), g); },
               "log_likelihood must not be null");
  e9[4] = kNaN;  // [0, 1, 1] is valid (L = 2, T = 2)
  expect_error([&] { core::cb_marginal_log_likelihood(x.data(), e9.data(), &ll, g); },
               "log_emit: expected finite values, got nan at [0, 1, 1]");
  e9[4] = -1.0;
  const int64_t L9 = 9;
  g.out_lens = &L9;
  expect_error([&] { core::cb_marginal_log_likelihood(x.data(), e9.data(), &ll, g); },
               "out_lens[0] must lie in [0, U=3], got 9");
  g.out_lens = &L2;
  const double ginf = std::numeric_limits<double>::infinity();
  std::vector<double> gx(3);
  expect_error([&] { core::cb_marginal_log_likelihood_backward(&ginf, x.data(), e9.data(), gx.data(),
                                                               static_cast<double*>(nullptr), g); },
               "grad_log_likelihood: expected finite values, got inf at [0]");  // [B]
  (void)e;
}

}  // namespace
}  // namespace mona::test
