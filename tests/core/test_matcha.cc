// label: core
// Tests of mona/core/matcha.h: MAtChA expected attention (000 App. C, eq. 28) and its
// analytic backward. References: the direct triple sum of eq. 28, a long-double log-space
// evaluation, enumeration of the hard monotonic process (tests/reference/matcha_reference.h),
// the test-time chunk softmax (000 eq. 27) and central finite differences.
#include "mona/core/matcha.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "mona/core/monotonic.h"
#include "mona/core/softmax.h"
#include "reference/matcha_reference.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using core::Grid;
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A [B, U, T] problem whose padding holds NaN in every input, so that a kernel reading
// padding would show it.
struct Problem {
  int64_t B = 0, U = 0, T = 0;
  std::vector<int64_t> in_lens, out_lens;
  std::vector<double> a, p, u, g;  // alpha_prev, p, u, grad_beta

  Grid grid() const {
    Grid gr;
    gr.batch = B;
    gr.out_len = U;
    gr.in_len = T;
    gr.in_lens = in_lens.data();
    gr.out_lens = out_lens.data();
    return gr;
  }
  size_t size() const { return static_cast<size_t>(B * U * T); }
  bool valid(size_t flat) const {
    const int64_t k = static_cast<int64_t>(flat);
    const int64_t b = k / (U * T), i = (k / T) % U, j = k % T;
    return i < out_lens[b] && j < in_lens[b];
  }
};

struct Options {
  bool lengths = true;        // random per-sequence lengths (else full)
  double edge_p = 0.1;        // probability of an exact 0 and of an exact 1 in p
  double p_lo = 0.0, p_hi = 1.0;  // clip p (finite differences need room on both sides)
  double energy_sd = 2.0;
  double zero_a = 0.1;            // probability of an exact 0 in alpha_prev
  double a_lo = 0.0;              // alpha_prev ~ U(a_lo, 1) otherwise
};

Problem make_problem(Random& rng, int64_t B, int64_t U, int64_t T, const Options& o = {}) {
  Problem pr;
  pr.B = B;
  pr.U = U;
  pr.T = T;
  for (int64_t b = 0; b < B; ++b) {
    pr.in_lens.push_back(o.lengths ? rng.integer(0, T) : T);
    pr.out_lens.push_back(o.lengths ? rng.integer(0, U) : U);
  }
  const size_t N = pr.size();
  pr.a.resize(N);
  pr.p.resize(N);
  pr.u.resize(N);
  pr.g.resize(N);
  for (size_t k = 0; k < N; ++k) {
    if (!pr.valid(k)) {
      pr.a[k] = pr.p[k] = pr.u[k] = pr.g[k] = kNaN;
      continue;
    }
    pr.a[k] = rng.uniform() < o.zero_a ? 0.0 : rng.uniform(o.a_lo, 1.0);
    const double r = rng.uniform();
    double pk = r < o.edge_p ? 0.0 : r < 2 * o.edge_p ? 1.0 : rng.probabilities(1)[0];
    pr.p[k] = std::min(o.p_hi, std::max(o.p_lo, pk));
    pr.u[k] = rng.normal(0.0, o.energy_sd);
    pr.g[k] = rng.normal();
  }
  return pr;
}

template <class F>
std::vector<double> forward(const Problem& pr, const std::vector<double>& a,
                            const std::vector<double>& p, const std::vector<double>& u) {
  const auto af = cast<F>(a), pf = cast<F>(p), uf = cast<F>(u);
  std::vector<F> beta(pr.size(), static_cast<F>(kNaN));
  core::matcha_chunkwise<F>(af.data(), pf.data(), uf.data(), beta.data(), pr.grid());
  return cast<double>(beta);
}

struct Grads {
  std::vector<double> beta, a, p, u;
};

template <class F>
Grads forward_backward(const Problem& pr, const std::vector<double>& a,
                       const std::vector<double>& p, const std::vector<double>& u) {
  const auto af = cast<F>(a), pf = cast<F>(p), uf = cast<F>(u), gf = cast<F>(pr.g);
  const F nan = static_cast<F>(kNaN);
  std::vector<F> beta(pr.size(), nan), ga(pr.size(), nan), gp(pr.size(), nan),
      gu(pr.size(), nan);
  core::matcha_chunkwise<F>(af.data(), pf.data(), uf.data(), beta.data(), pr.grid());
  core::matcha_chunkwise_backward<F>(gf.data(), af.data(), pf.data(), uf.data(), beta.data(),
                                     ga.data(), gp.data(), gu.data(), pr.grid());
  return {cast<double>(beta), cast<double>(ga), cast<double>(gp), cast<double>(gu)};
}

// L = sum over the valid region of grad_beta * beta (double kernel).
double loss(const Problem& pr, const std::vector<double>& a, const std::vector<double>& p,
            const std::vector<double>& u) {
  const std::vector<double> beta = forward<double>(pr, a, p, u);
  double L = 0;
  for (size_t k = 0; k < pr.size(); ++k) {
    if (pr.valid(k)) L += pr.g[k] * beta[k];
  }
  return L;
}

void expect_padding_zero(const Problem& pr, const std::vector<double>& x, const char* what) {
  for (size_t k = 0; k < pr.size(); ++k) {
    if (!pr.valid(k)) {
      EXPECT_EQ(x[k], 0.0) << what << " padding at flat index " << k;
    }
  }
}

void expect_all_finite(const std::vector<double>& x, const char* what) {
  for (size_t k = 0; k < x.size(); ++k) EXPECT_TRUE(std::isfinite(x[k])) << what << " at " << k;
}

// Valid-region max |x - y|.
double max_valid_diff(const Problem& pr, const std::vector<double>& x,
                      const std::vector<double>& y) {
  double m = 0;
  for (size_t k = 0; k < pr.size(); ++k) {
    if (pr.valid(k)) m = std::max(m, std::abs(x[k] - y[k]));
  }
  return m;
}

// max |x - y| / max(1, max |y|): the error relative to the scale of the reference y.
double relative_error(const std::vector<double>& x, const std::vector<double>& y) {
  double scale = 1;
  for (double v : y) scale = std::max(scale, std::abs(v));
  return max_abs_diff(x, y) / scale;
}

// ---------------------------------------------------------------------------------------
// Forward against the direct triple sum of 000 eq. 28.

template <class F>
double brute_force_sweep(double tol) {
  Random rng(std::is_same_v<F, float> ? 12 : 11);
  double worst = 0;
  for (int rep = 0; rep < 300; ++rep) {
    // T up to 40: rows of several blocks of chunk ends (a block is one vector's lanes, 2 to
    // 16 by target and dtype), so that both the blocks' first entries and the entries below
    // them, where every lane runs, are compared.
    const Problem pr = make_problem(rng, rng.integer(1, 3), rng.integer(1, 4), rng.integer(1, 40));
    const std::vector<double> beta = forward<F>(pr, pr.a, pr.p, pr.u);
    // The float kernel sees float inputs; the reference gets the same values.
    const std::vector<double> ref = matcha_brute(cast<double>(cast<F>(pr.a)),
                                                 cast<double>(cast<F>(pr.p)),
                                                 cast<double>(cast<F>(pr.u)), pr.grid());
    const double err = max_valid_diff(pr, beta, ref);
    worst = std::max(worst, err);
    EXPECT_LE(err, tol) << "rep " << rep << " B=" << pr.B << " U=" << pr.U << " T=" << pr.T;
    expect_padding_zero(pr, beta, "beta");
  }
  return worst;
}

// Tolerances: beta <= 1 is a sum over at most T = 40 chunk ends of terms that are each a
// product and quotient of O(T) rounded factors, so the error is at most about T^2 eps in the
// worst case and T eps for independent roundings: double (eps 1.1e-16) 1e-12, above both
// (measured 1.1e-15); float (eps 6e-8) 1e-5, 4x the independent-roundings bound (measured
// 2.8e-7), which the worst case (1e-4) is never near in these sweeps.
TEST(MatchaForward, MatchesTripleSumDouble) {
  const double worst = brute_force_sweep<double>(1e-12);
  std::cout << "[ matcha ] double forward vs eq. 28 triple sum: max abs error " << worst << "\n";
}

TEST(MatchaForward, MatchesTripleSumFloat) {
  const double worst = brute_force_sweep<float>(1e-5);
  std::cout << "[ matcha ] float forward vs eq. 28 triple sum: max abs error " << worst << "\n";
}

// Each chunk's softmax sums to 1, so a row of beta sums to the probability that step i
// stops somewhere: the row sum of monotonic attention's alpha_i given alpha_{i-1}.
TEST(MatchaForward, RowMassEqualsStoppingProbability) {
  Random rng(21);
  for (int rep = 0; rep < 100; ++rep) {
    const Problem pr = make_problem(rng, 2, 3, rng.integer(1, 40), {false});
    const std::vector<double> beta = forward<double>(pr, pr.a, pr.p, pr.u);
    for (int64_t r = 0; r < pr.B * pr.U; ++r) {
      const size_t off = static_cast<size_t>(r * pr.T);
      std::vector<double> alpha(static_cast<size_t>(pr.T));
      core::monotonic_alignment_step<double>(pr.p.data() + off, pr.a.data() + off,
                                             alpha.data(), 1, pr.T, nullptr);
      double sb = 0, sa = 0;
      for (int64_t j = 0; j < pr.T; ++j) {
        sb += beta[off + j];
        sa += alpha[j];
      }
      EXPECT_NEAR(sb, sa, 1e-12 * std::max(1.0, sa)) << "rep " << rep << " row " << r;
    }
  }
}

// The whole process: alpha_prev from monotonic_alignment, compared with enumerating every
// sequence of hard choices t_0 <= t_1 <= ... and the test-time chunk softmax (000 eq. 27).
TEST(MatchaForward, MatchesEnumerationOfHardProcess) {
  Random rng(31);
  double worst = 0;
  for (int rep = 0; rep < 150; ++rep) {
    const int64_t U = rng.integer(1, 4), T = rng.integer(1, 5);
    const Problem pr = make_problem(rng, 1, U, T, {false});
    Grid g = pr.grid();
    std::vector<double> alpha(pr.size());
    core::monotonic_alignment<double>(pr.p.data(), nullptr, alpha.data(), g);
    std::vector<double> alpha_prev(pr.size(), 0.0);
    alpha_prev[0] = 1.0;  // alpha_{-1}: delta at entry 0 (t_{-1} = 0)
    std::copy(alpha.begin(), alpha.end() - T, alpha_prev.begin() + T);
    const std::vector<double> beta = forward<double>(pr, alpha_prev, pr.p, pr.u);
    const std::vector<double> ref = matcha_process_expectation(pr.p, pr.u, U, T);
    const double err = max_abs_diff(beta, ref);
    worst = std::max(worst, err);
    EXPECT_LE(err, 1e-12) << "rep " << rep << " U=" << U << " T=" << T;
  }
  std::cout << "[ matcha ] vs enumeration of hard paths: max abs error " << worst << "\n";
}

// One-hot alpha_prev at t_{i-1} and 0/1 stopping probabilities whose first 1 at or after
// t_{i-1} is t_i: the expectation collapses to the test-time chunk softmax (000 eq. 27).
template <class F>
void hard_equals_expected(double tol) {
  Random rng(41);
  for (int64_t T = 1; T <= 8; ++T) {
    for (int64_t t0 = 0; t0 < T; ++t0) {
      for (int64_t t1 = t0; t1 < T; ++t1) {
        std::vector<F> a(T, F(0)), p(T), u(T), beta(T, F(kNaN)), want(T, F(0));
        a[t0] = F(1);
        for (int64_t j = 0; j < T; ++j) {
          u[j] = static_cast<F>(rng.normal(0, 3));
          // Entries before t0 and after t1 are irrelevant; give them arbitrary values.
          p[j] = j < t0 || j > t1 ? static_cast<F>(rng.uniform()) : F(j == t1 ? 1 : 0);
        }
        core::chunk_softmax<F>(u.data(), t0, t1, want.data() + t0);
        Grid g;
        g.batch = 1;
        g.out_len = 1;
        g.in_len = T;
        core::matcha_chunkwise<F>(a.data(), p.data(), u.data(), beta.data(), g);
        EXPECT_LE(max_abs_diff(beta, want), tol) << "T=" << T << " t0=" << t0 << " t1=" << t1;
      }
    }
  }
}

// The kernel against chunk_softmax: two computations of weights <= 1 over chunks of <= 8
// entries, each a few roundings from exact; 16 eps in float (measured 1 ulp, 1.2e-7, so the
// former 1e-6 left 8x), 45 eps in double (measured 3.3e-16).
TEST(MatchaForward, HardChoicesGiveChunkSoftmaxDouble) { hard_equals_expected<double>(1e-14); }
TEST(MatchaForward, HardChoicesGiveChunkSoftmaxFloat) {
  hard_equals_expected<float>(16 * std::numeric_limits<float>::epsilon());
}

// ---------------------------------------------------------------------------------------
// Gradients.

TEST(MatchaBackward, MatchesFiniteDifferences) {
  Random rng(51);
  Options o;  // keep every input off the boundary of its domain (h = 1e-6 both ways)
  o.p_lo = 0.02;
  o.p_hi = 0.98;
  o.zero_a = 0;
  o.a_lo = 0.01;
  double worst = 0;
  for (int rep = 0; rep < 12; ++rep) {
    const Problem pr = make_problem(rng, 2, 3, rng.integer(1, 40), o);  // several blocks, as above
    const Grads gr = forward_backward<double>(pr, pr.a, pr.p, pr.u);
    const auto fa = [&](const std::vector<double>& x) { return loss(pr, x, pr.p, pr.u); };
    const auto fp = [&](const std::vector<double>& x) { return loss(pr, pr.a, x, pr.u); };
    const auto fu = [&](const std::vector<double>& x) { return loss(pr, pr.a, pr.p, x); };
    const std::vector<double> na = numeric_gradient(fa, pr.a);
    const std::vector<double> np = numeric_gradient(fp, pr.p);
    const std::vector<double> nu = numeric_gradient(fu, pr.u);
    expect_gradients_close(gr.a, na, 1e-6, "grad_alpha_prev");
    expect_gradients_close(gr.p, np, 1e-6, "grad_p");
    expect_gradients_close(gr.u, nu, 1e-6, "grad_u");
    worst = std::max({worst, relative_error(gr.a, na), relative_error(gr.p, np),
                      relative_error(gr.u, nu)});
    expect_padding_zero(pr, gr.a, "grad_alpha_prev");
    expect_padding_zero(pr, gr.p, "grad_p");
    expect_padding_zero(pr, gr.u, "grad_u");
  }
  std::cout << "[ matcha ] backward vs central differences: max relative error " << worst
            << "\n";
}

TEST(MatchaBackward, FloatMatchesDouble) {
  Random rng(61);
  double worst = 0;
  for (int rep = 0; rep < 40; ++rep) {
    const Problem pr = make_problem(rng, 2, 3, rng.integer(1, 30));
    // The double run sees the float-rounded inputs, so that only the arithmetic differs.
    const Grads gf = forward_backward<float>(pr, pr.a, pr.p, pr.u);
    const Grads gd = forward_backward<double>(pr, cast<double>(cast<float>(pr.a)),
                                              cast<double>(cast<float>(pr.p)),
                                              cast<double>(cast<float>(pr.u)));
    const double ea = relative_error(gf.a, gd.a), ep = relative_error(gf.p, gd.p),
                 eu = relative_error(gf.u, gd.u);
    // Relative to the gradient's largest entry: float's rounding over the backward
    // recurrences (O(T) = 30 steps of a few operations each, eps 6e-8) stays near T eps =
    // 1.8e-6; 2e-5 is 10x that (measured 4.2e-7), below any error in a term (>= 1e-3).
    EXPECT_LE(ea, 2e-5) << "grad_alpha_prev rep " << rep;
    EXPECT_LE(ep, 2e-5) << "grad_p rep " << rep;
    EXPECT_LE(eu, 2e-5) << "grad_u rep " << rep;
    worst = std::max({worst, ea, ep, eu});
    expect_padding_zero(pr, gf.a, "grad_alpha_prev");
    expect_padding_zero(pr, gf.p, "grad_p");
    expect_padding_zero(pr, gf.u, "grad_u");
  }
  std::cout << "[ matcha ] float vs double backward: max relative error " << worst << "\n";
}

// Rows long enough that prod (1 - p) falls below FLT_MIN well inside them, where the float
// kernels stop their downward sweeps (src/core/matcha_kernels.inc) and the double kernels,
// whose products stay normal, do not; exact 0s and 1s in p included (dL/dp at p = 1 needs
// the product without that factor). Tolerance as FloatMatchesDouble: the left-out terms are
// below FLT_MIN, far under float rounding.
TEST(MatchaBackward, FloatStopsWhereProductsUnderflowAndStillMatchesDouble) {
  Random rng(63);
  Options o;
  o.lengths = false;
  o.edge_p = 0.02;
  const Problem pr = make_problem(rng, 2, 2, 400, o);
  int underflows = 0;  // runs between exact 1s of p whose float product of (1 - p) underflows
  for (size_t r = 0; r < pr.size() / 400; ++r) {
    float prod = 1;
    for (size_t k = 0; k < 400; ++k) {
      const float f = 1.0f - static_cast<float>(pr.p[r * 400 + k]);
      prod = f == 0.0f ? 1.0f : prod * f;
      underflows += prod < std::numeric_limits<float>::min();
      if (prod < std::numeric_limits<float>::min()) prod = 1;
    }
  }
  ASSERT_GT(underflows, 0);
  const Grads gf = forward_backward<float>(pr, pr.a, pr.p, pr.u);
  const Grads gd = forward_backward<double>(pr, cast<double>(cast<float>(pr.a)),
                                            cast<double>(cast<float>(pr.p)),
                                            cast<double>(cast<float>(pr.u)));
  // The same bound as FloatMatchesDouble (measured 9.6e-8 for grad_p).
  EXPECT_LE(relative_error(gf.beta, gd.beta), 2e-5);
  EXPECT_LE(relative_error(gf.a, gd.a), 2e-5);
  EXPECT_LE(relative_error(gf.p, gd.p), 2e-5);
  EXPECT_LE(relative_error(gf.u, gd.u), 2e-5);
  std::cout << "[ matcha ] T=400, float products underflowing, against double: grad_p "
            << relative_error(gf.p, gd.p) << "\n";
}

// p in {0, 1}: gradients are finite and agree with one-sided differences. beta is affine
// in each single p[m] (000 eq. 28: p[m] enters as p[l] or as one factor 1 - p[o]), so a
// one-sided difference is exact up to rounding.
TEST(MatchaBackward, FiniteAndCorrectAtPZeroAndOne) {
  Random rng(71);
  Options o;
  o.edge_p = 0.4;
  o.zero_a = 0;
  o.a_lo = 0.01;
  for (int rep = 0; rep < 10; ++rep) {
    const Problem pr = make_problem(rng, 2, 2, rng.integer(1, 7), o);
    const Grads gr = forward_backward<double>(pr, pr.a, pr.p, pr.u);
    for (const auto* v : {&gr.beta, &gr.a, &gr.p, &gr.u}) expect_all_finite(*v, "output");
    std::vector<double> np(pr.size(), 0.0), x = pr.p;
    const double h = 1e-3;
    for (size_t k = 0; k < pr.size(); ++k) {
      if (!pr.valid(k)) continue;
      const double x0 = x[k];
      const double lo = std::max(0.0, x0 - h), hi = std::min(1.0, x0 + h);
      x[k] = hi;
      const double fh = loss(pr, pr.a, x, pr.u);
      x[k] = lo;
      const double fl = loss(pr, pr.a, x, pr.u);
      x[k] = x0;
      np[k] = (fh - fl) / (hi - lo);
    }
    expect_gradients_close(gr.p, np, 1e-9, "grad_p at p in {0, 1}");
    const auto fu = [&](const std::vector<double>& y) { return loss(pr, pr.a, pr.p, y); };
    expect_gradients_close(gr.u, numeric_gradient(fu, pr.u), 1e-6, "grad_u at p in {0, 1}");
  }
}

// ---------------------------------------------------------------------------------------
// Edge cases.

TEST(MatchaEdge, SingleEntry) {
  // T = 1: the only chunk is [0, 0], so beta = a * p, and u has no influence.
  for (double pv : {0.0, 0.3, 1.0}) {
    const double a = 0.7, u = -2.5, g = 1.5;
    double beta = kNaN, ga = kNaN, gp = kNaN, gu = kNaN;
    Grid grid;
    grid.batch = grid.out_len = grid.in_len = 1;
    core::matcha_chunkwise<double>(&a, &pv, &u, &beta, grid);
    EXPECT_DOUBLE_EQ(beta, a * pv);
    core::matcha_chunkwise_backward<double>(&g, &a, &pv, &u, &beta, &ga, &gp, &gu, grid);
    EXPECT_DOUBLE_EQ(ga, g * pv);
    EXPECT_DOUBLE_EQ(gp, g * a);
    // g * beta minus the same product rounded differently (FMA on the v3 target): a couple
    // of roundings of a value <= 1.05, i.e. <= ~4.4e-16; 16 eps (measured 1.1e-16).
    EXPECT_NEAR(gu, 0.0, 16 * std::numeric_limits<double>::epsilon());
  }
}

TEST(MatchaEdge, OneStepCallsAreRowsOfTheFullGrid) {
  // U = 1 (an RNN decoder step) on each row alone equals the [B, U, T] call.
  Random rng(81);
  const Problem pr = make_problem(rng, 3, 4, 9);
  const Grads full = forward_backward<double>(pr, pr.a, pr.p, pr.u);
  for (int64_t b = 0; b < pr.B; ++b) {
    for (int64_t i = 0; i < pr.out_lens[b]; ++i) {
      Problem one;
      one.B = 1;
      one.U = 1;
      one.T = pr.T;
      one.in_lens = {pr.in_lens[b]};
      one.out_lens = {1};
      const size_t off = static_cast<size_t>((b * pr.U + i) * pr.T);
      auto row = [&](const std::vector<double>& v) {
        return std::vector<double>(v.begin() + off, v.begin() + off + pr.T);
      };
      one.g = row(pr.g);
      const Grads step = forward_backward<double>(one, row(pr.a), row(pr.p), row(pr.u));
      EXPECT_EQ(step.beta, row(full.beta));
      EXPECT_EQ(step.a, row(full.a));
      EXPECT_EQ(step.p, row(full.p));
      EXPECT_EQ(step.u, row(full.u));
      EXPECT_LE(max_valid_diff(one, step.beta, matcha_brute(row(pr.a), row(pr.p), row(pr.u),
                                                             one.grid())),
                1e-12);
    }
  }
}

TEST(MatchaEdge, LengthZeroGivesZeros) {
  Problem pr;
  pr.B = 3;
  pr.U = 2;
  pr.T = 4;
  pr.in_lens = {0, 4, 3};
  pr.out_lens = {2, 0, 0};
  const size_t N = pr.size();
  pr.a = pr.p = pr.u = pr.g = std::vector<double>(N, kNaN);  // nothing is valid
  const Grads gr = forward_backward<double>(pr, pr.a, pr.p, pr.u);
  for (const auto* v : {&gr.beta, &gr.a, &gr.p, &gr.u}) {
    EXPECT_EQ(*v, std::vector<double>(N, 0.0));
  }
  // Empty sizes: nothing to do, null pointers allowed.
  Grid empty;
  empty.batch = 0;
  empty.out_len = 3;
  empty.in_len = 5;
  core::matcha_chunkwise<float>(nullptr, nullptr, nullptr, nullptr, empty);
  core::matcha_chunkwise_backward<float>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                         nullptr, nullptr, empty);
}

// Energies of +-1e4 (exp overflows in both float and double): finite, and equal to the
// exact log-space evaluation; gradients finite and equal to differences of that reference.
template <class F>
void extreme_energies(double tol) {
  Random rng(91);
  const double big = 1e4;
  for (int rep = 0; rep < 30; ++rep) {
    Options o;
    o.lengths = false;
    Problem pr = make_problem(rng, 1, 2, rng.integer(1, 7), o);
    for (double& x : pr.u) {
      const double r = rng.uniform();
      x = r < 0.35 ? big - std::round(rng.uniform(0, 4)) / 4 : r < 0.7 ? -big : rng.normal();
    }
    if (rep == 0) {
      for (double& x : pr.u) x = big;  // all equal and huge
    }
    const Grads gr = forward_backward<F>(pr, pr.a, pr.p, pr.u);
    for (const auto* v : {&gr.beta, &gr.a, &gr.p, &gr.u}) expect_all_finite(*v, "output");
    for (int64_t i = 0; i < pr.U; ++i) {
      const size_t off = static_cast<size_t>(i * pr.T);
      auto row = [&](const std::vector<double>& v) {
        return std::vector<double>(v.begin() + off, v.begin() + off + pr.T);
      };
      const std::vector<long double> ref = matcha_logspace_row(row(pr.a), row(pr.p), row(pr.u));
      for (int64_t j = 0; j < pr.T; ++j) {
        EXPECT_NEAR(gr.beta[off + j], static_cast<double>(ref[j]), tol)
            << "rep " << rep << " i=" << i << " j=" << j;
      }
    }
  }
}

// The log-space reference is exact to long double; the kernels subtract the running maximum
// before exp, so huge energies cost no more rounding than small ones: the forward's bounds
// (1e-12 double, 1e-5 float, see MatchesTripleSumDouble) apply unchanged.
TEST(MatchaEdge, HugeEnergiesMatchLogSpaceDouble) { extreme_energies<double>(1e-12); }
TEST(MatchaEdge, HugeEnergiesMatchLogSpaceFloat) { extreme_energies<float>(1e-5); }

TEST(MatchaEdge, HugeEnergiesGradientsMatchLogSpaceDifferences) {
  Random rng(101);
  const double big = 1e4;
  for (int rep = 0; rep < 10; ++rep) {
    Options o;
    o.lengths = false;
    o.p_lo = 0.02;
    o.p_hi = 0.98;
    o.zero_a = 0;
    o.a_lo = 0.01;
    Problem pr = make_problem(rng, 1, 1, rng.integer(2, 6), o);
    for (double& x : pr.u) {
      const double r = rng.uniform();
      x = r < 0.5 ? big - std::round(rng.uniform(0, 4)) / 4 : r < 0.8 ? -big : rng.normal();
    }
    const Grads gr = forward_backward<double>(pr, pr.a, pr.p, pr.u);
    auto L = [&](const std::vector<double>& a, const std::vector<double>& p,
                 const std::vector<double>& u) {
      const std::vector<long double> beta = matcha_logspace_row(a, p, u);
      long double s = 0;
      for (size_t j = 0; j < beta.size(); ++j) s += pr.g[j] * beta[j];
      return static_cast<double>(s);
    };
    const auto fa = [&](const std::vector<double>& x) { return L(x, pr.p, pr.u); };
    const auto fp = [&](const std::vector<double>& x) { return L(pr.a, x, pr.u); };
    const auto fu = [&](const std::vector<double>& x) { return L(pr.a, pr.p, x); };
    expect_gradients_close(gr.a, numeric_gradient(fa, pr.a, 1e-4), 1e-9, "grad_alpha_prev");
    expect_gradients_close(gr.p, numeric_gradient(fp, pr.p, 1e-4), 1e-9, "grad_p");
    expect_gradients_close(gr.u, numeric_gradient(fu, pr.u, 1e-4), 1e-6, "grad_u");
  }
}

// A moderately long row with small stopping probabilities (long chunks) against the
// log-space reference, then T = 2000 for finiteness, mass and timing.
TEST(MatchaEdge, LongChunksMatchLogSpace) {
  Random rng(111);
  const int64_t T = 120;
  Options o;
  o.lengths = false;
  o.edge_p = 0;
  Problem pr = make_problem(rng, 1, 1, T, o);
  for (double& x : pr.p) x *= 0.05;
  const std::vector<double> beta = forward<double>(pr, pr.a, pr.p, pr.u);
  const std::vector<long double> ref = matcha_logspace_row(pr.a, pr.p, pr.u);
  double err = 0;
  for (int64_t j = 0; j < T; ++j) err = std::max(err, std::abs(beta[j] - double(ref[j])));
  EXPECT_LE(err, 1e-12);
}

TEST(MatchaEdge, LongSequence) {
  Random rng(121);
  const int64_t T = 2000, U = 2;
  Options o;
  o.lengths = false;
  o.edge_p = 0;
  o.energy_sd = 3;
  Problem pr = make_problem(rng, 1, U, T, o);
  for (double& x : pr.p) x = 1.0 / (1.0 + std::exp(-rng.normal(-6, 2)));  // long chunks
  for (int64_t j = 0; j < T; ++j) pr.a[j] = j == 0 ? 1.0 : 0.0;            // alpha_{-1}
  core::monotonic_alignment_step<double>(pr.p.data(), pr.a.data(), pr.a.data() + T, 1, T,
                                         nullptr);
  for (bool use_float : {false, true}) {
    const auto t0 = std::chrono::steady_clock::now();
    const Grads gr = use_float ? forward_backward<float>(pr, pr.a, pr.p, pr.u)
                               : forward_backward<double>(pr, pr.a, pr.p, pr.u);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << "[ matcha ] T=" << T << " U=" << U << (use_float ? " float" : " double")
              << " forward+backward: " << secs << " s\n";
    for (const auto* v : {&gr.beta, &gr.a, &gr.p, &gr.u}) expect_all_finite(*v, "output");
    for (int64_t i = 0; i < U; ++i) {
      std::vector<double> alpha(T);
      core::monotonic_alignment_step<double>(pr.p.data() + i * T, pr.a.data() + i * T,
                                             alpha.data(), 1, T, nullptr);
      double sb = 0, sa = 0;
      for (int64_t j = 0; j < T; ++j) {
        sb += gr.beta[i * T + j];
        sa += alpha[j];
      }
      EXPECT_GT(sa, 0.5);
      // Mass conserved over T = 2000 entries, sums of 2000 terms of a few roundings each:
      // independent roundings give about sqrt(2000) x a few eps (1e-5 in float, 2e-14 in
      // double); 1e-4 and 1e-10 leave room for correlated ones, and fail a lost chunk term.
      EXPECT_NEAR(sb, sa, use_float ? 1e-4 : 1e-10) << "row " << i;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Errors.

TEST(MatchaErrors, EveryBadArgumentIsReported) {
  // B = 1, U = 2, T = 3; in_lens = 3 so every entry is valid unless stated.
  std::vector<double> a = {1, 0, 0, 0.2, 0.3, 0.1}, p(6, 0.5), u(6, 0.0), g(6, 1.0),
                      beta(6), ga(6), gp(6), gu(6);
  std::vector<int64_t> in_lens = {3}, out_lens = {2};
  Grid grid;
  grid.batch = 1;
  grid.out_len = 2;
  grid.in_len = 3;
  grid.in_lens = in_lens.data();
  grid.out_lens = out_lens.data();
  auto fwd = [&](const double* A, const double* P, const double* Uu, double* Bt,
                 const Grid& G) { core::matcha_chunkwise<double>(A, P, Uu, Bt, G); };
  auto bwd = [&](const double* Gb, const double* A, const double* P, const double* Uu,
                 const double* Bt, double* GA, double* GP, double* GU, const Grid& G) {
    core::matcha_chunkwise_backward<double>(Gb, A, P, Uu, Bt, GA, GP, GU, G);
  };
  fwd(a.data(), p.data(), u.data(), beta.data(), grid);  // valid
  bwd(g.data(), a.data(), p.data(), u.data(), beta.data(), ga.data(), gp.data(), gu.data(),
      grid);

  // Null pointers.
  expect_error([&] { fwd(nullptr, p.data(), u.data(), beta.data(), grid); },
               "matcha_chunkwise: alpha_prev must not be null");
  expect_error([&] { fwd(a.data(), nullptr, u.data(), beta.data(), grid); },
               "matcha_chunkwise: p must not be null");
  expect_error([&] { fwd(a.data(), p.data(), nullptr, beta.data(), grid); },
               "matcha_chunkwise: u must not be null");
  expect_error([&] { fwd(a.data(), p.data(), u.data(), nullptr, grid); },
               "matcha_chunkwise: beta must not be null");
  const double* in[5] = {g.data(), a.data(), p.data(), u.data(), beta.data()};
  double* out[3] = {ga.data(), gp.data(), gu.data()};
  const char* names[8] = {"grad_beta", "alpha_prev", "p", "u", "beta",
                          "grad_alpha_prev", "grad_p", "grad_u"};
  for (int k = 0; k < 8; ++k) {
    const double* x[5] = {in[0], in[1], in[2], in[3], in[4]};
    double* y[3] = {out[0], out[1], out[2]};
    if (k < 5) x[k] = nullptr; else y[k - 5] = nullptr;
    expect_error([&] { bwd(x[0], x[1], x[2], x[3], x[4], y[0], y[1], y[2], grid); },
                 std::string("matcha_chunkwise_backward: ") + names[k] + " must not be null");
  }

  // Bad grids.
  Grid bad = grid;
  bad.batch = -1;
  expect_error([&] { fwd(a.data(), p.data(), u.data(), beta.data(), bad); },
               "matcha_chunkwise: batch size must be >= 0, got -1");
  bad = grid;
  bad.in_len = -2;
  expect_error([&] { fwd(a.data(), p.data(), u.data(), beta.data(), bad); },
               "in_len T must be >= 0, got -2");
  std::vector<int64_t> too_long = {4}, too_many = {3};
  bad = grid;
  bad.in_lens = too_long.data();
  expect_error([&] { bwd(g.data(), a.data(), p.data(), u.data(), beta.data(), ga.data(),
                         gp.data(), gu.data(), bad); },
               "matcha_chunkwise_backward: in_lens[0] must lie in [0, T=3], got 4");
  bad = grid;
  bad.out_lens = too_many.data();
  expect_error([&] { fwd(a.data(), p.data(), u.data(), beta.data(), bad); },
               "out_lens[0] must lie in [0, U=2], got 3");

  // Bad values, in the forward and in the backward.
  struct Case {
    std::vector<double>* x;
    size_t k;
    double v;
    const char* fragment;
  };
  const std::vector<Case> cases = {
      {&p, 5, 1.5, "p: expected values in [0, 1], got 1.5 at [0, 1, 2]"},
      {&p, 1, -0.25, "p: expected values in [0, 1], got -0.25 at [0, 0, 1]"},
      {&p, 3, kNaN, "p: expected values in [0, 1], got nan at [0, 1, 0]"},
      {&u, 2, std::numeric_limits<double>::infinity(),
       "u: expected finite values, got inf at [0, 0, 2]"},
      {&u, 4, kNaN, "u: expected finite values, got nan at [0, 1, 1]"},
      {&a, 1, -0.1, "alpha_prev: expected finite values >= 0, got -0.1 at [0, 0, 1]"},
      {&a, 4, std::numeric_limits<double>::infinity(),
       "alpha_prev: expected finite values >= 0, got inf at [0, 1, 1]"},
  };
  for (const Case& c : cases) {
    const double keep = (*c.x)[c.k];
    (*c.x)[c.k] = c.v;
    expect_error([&] { fwd(a.data(), p.data(), u.data(), beta.data(), grid); },
                 std::string("matcha_chunkwise: ") + c.fragment);
    expect_error([&] { bwd(g.data(), a.data(), p.data(), u.data(), beta.data(), ga.data(),
                           gp.data(), gu.data(), grid); },
                 std::string("matcha_chunkwise_backward: ") + c.fragment);
    (*c.x)[c.k] = keep;
  }
  g[3] = kNaN;
  expect_error([&] { bwd(g.data(), a.data(), p.data(), u.data(), beta.data(), ga.data(),
                         gp.data(), gu.data(), grid); },
               "matcha_chunkwise_backward: grad_beta: expected finite values, got nan at "
               "[0, 1, 0]");
  g[3] = 1.0;
  const double keep = beta[2];
  beta[2] = -1.0;
  expect_error([&] { bwd(g.data(), a.data(), p.data(), u.data(), beta.data(), ga.data(),
                         gp.data(), gu.data(), grid); },
               "matcha_chunkwise_backward: beta: expected finite values >= 0, got -1 at "
               "[0, 0, 2]");
  beta[2] = keep;

  // Float entry points report the same way.
  std::vector<float> af(a.begin(), a.end()), pf(p.begin(), p.end()), uf(u.begin(), u.end()),
      bf(6);
  pf[0] = 2.0f;
  expect_error([&] { core::matcha_chunkwise<float>(af.data(), pf.data(), uf.data(), bf.data(),
                                                   grid); },
               "matcha_chunkwise: p: expected values in [0, 1], got 2 at [0, 0, 0]");
}

TEST(MatchaErrors, PaddingIsNotValidated) {
  // Bad values outside the valid region are never read, so they are not errors.
  std::vector<double> a = {1, 0, kNaN}, p = {0.5, 1, 7}, u = {0, 1, kNaN}, beta(3, kNaN);
  std::vector<int64_t> in_lens = {2};
  Grid grid;
  grid.batch = 1;
  grid.out_len = 1;
  grid.in_len = 3;
  grid.in_lens = in_lens.data();
  core::matcha_chunkwise<double>(a.data(), p.data(), u.data(), beta.data(), grid);
  // Chunks [0, 0] with mass 0.5 and [0, 1] with mass 0.5 * 1.
  const double w1 = 1 / (1 + std::exp(1.0));
  EXPECT_NEAR(beta[0], 0.5 + 0.5 * w1, 1e-15);
  EXPECT_NEAR(beta[1], 0.5 * (1 - w1), 1e-15);
  EXPECT_EQ(beta[2], 0.0);
}

// The kernels share the batch's rows among threads (src/core/parallel.h); a row's arithmetic
// does not depend on how many there are: 1, 2 and 3 threads give the same bits, forward and
// backward, float and double. Sizes above the parallel threshold, random lengths.
template <class F>
void thread_counts_give_the_same_bits() {
  Random rng(77);
  const Problem pr = make_problem(rng, 5, 6, 150);
  const int threads_before = omp_get_max_threads();
  std::vector<Grads> runs;
  for (int n = 1; n <= 3; ++n) {
    omp_set_num_threads(n);
    runs.push_back(forward_backward<F>(pr, pr.a, pr.p, pr.u));
  }
  omp_set_num_threads(threads_before);
  for (size_t run = 1; run < runs.size(); ++run) {
    // Compared as bits: NaN is never written (each output entry is written), and equal
    // doubles converted from equal floats are equal.
    EXPECT_EQ(runs[run].beta, runs[0].beta) << run + 1 << " threads";
    EXPECT_EQ(runs[run].a, runs[0].a) << run + 1 << " threads";
    EXPECT_EQ(runs[run].p, runs[0].p) << run + 1 << " threads";
    EXPECT_EQ(runs[run].u, runs[0].u) << run + 1 << " threads";
  }
}
TEST(MatchaThreads, ThreadCountsGiveTheSameBitsDouble) { thread_counts_give_the_same_bits<double>(); }
TEST(MatchaThreads, ThreadCountsGiveTheSameBitsFloat) { thread_counts_give_the_same_bits<float>(); }

}  // namespace
}  // namespace mona::test
