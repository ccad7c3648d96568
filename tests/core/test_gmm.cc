// label: gmm
// GMM / SAGMM / SAGMM-tr attention (mona/core/gmm.h) against the long-double reference of
// tests/reference/gmm_reference.h, central finite differences, the offline kernel (for the
// online step) and counted frame reads (for linear time).
#include "mona/core/gmm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <limits>
#include <numeric>

#include "reference/gmm_reference.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using core::GmmCursor;
using core::GmmOptions;
using core::ScanStatus;
using core::GmmWindow;
using core::Grid;

GmmWindow to_core(RefWindow w) {
  switch (w) {
    case RefWindow::kAdaptive: return GmmWindow::kAdaptive;
    case RefWindow::kFixed: return GmmWindow::kFixed;
    default: return GmmWindow::kNone;
  }
}

GmmOptions options_of(const GmmProblem& p) {
  GmmOptions o;
  o.window = to_core(p.window);
  o.radius = p.radius;
  o.width = p.width;
  return o;
}

Grid grid_of(const GmmProblem& p) {
  Grid g;
  g.batch = p.B;
  g.out_len = p.U;
  g.in_len = p.T;
  g.in_lens = p.in_lens.data();
  g.out_lens = p.out_lens.data();
  return g;
}

// mu advances like 003 eq. 5 (mu_i = mu_{i-1} + Delta_i, Delta in [0, 3]); nu is the
// cumsum of delta in (0, 1) (SAGMM) or j + 1 (plain GMM, sagmm = false).
GmmProblem random_problem(Random& rnd, RefWindow window, int64_t maxB, int64_t maxU,
                          int64_t maxT, int64_t H, bool sagmm) {
  GmmProblem p;
  p.window = window;
  p.B = rnd.integer(1, maxB);
  p.U = rnd.integer(1, maxU);
  p.T = rnd.integer(1, maxT);
  p.H = H;
  p.radius = rnd.uniform(1.0, 2.5);
  p.width = rnd.integer(1, 6);
  for (int64_t b = 0; b < p.B; ++b) {
    p.in_lens.push_back(b == 0 ? p.T : rnd.integer(0, p.T));
    p.out_lens.push_back(b == 0 ? p.U : rnd.integer(0, p.U));
  }
  const size_t nh = static_cast<size_t>(p.B * p.U * H);
  p.mu.resize(nh);
  p.variance.resize(nh);
  p.weights.resize(nh);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      double mu = rnd.uniform(-0.5, 1.0);
      for (int64_t i = 0; i < p.U; ++i) {
        const int64_t k = (b * p.U + i) * H + h;
        mu += rnd.uniform(0.0, 3.0 * static_cast<double>(p.T) / static_cast<double>(p.U + 1));
        p.mu[k] = mu;
        p.variance[k] = rnd.uniform(0.2, 4.0);
        p.weights[k] = rnd.uniform(0.05, 1.0);
      }
    }
  p.nu.resize(static_cast<size_t>(p.B * p.T));
  p.delta.resize(p.nu.size());
  for (int64_t b = 0; b < p.B; ++b) {
    double nu = 0;
    for (int64_t j = 0; j < p.T; ++j) {
      const double d = sagmm ? rnd.uniform(0.05, 1.0) : 1.0;
      nu += d;
      p.delta[b * p.T + j] = d;
      p.nu[b * p.T + j] = sagmm ? nu : static_cast<double>(j + 1);
    }
  }
  return p;
}

// A problem whose masks are at least `margin` away from any discontinuity.
GmmProblem robust_problem(Random& rnd, RefWindow window, int64_t maxB, int64_t maxU,
                          int64_t maxT, int64_t H, bool sagmm, double margin = 1e-3) {
  for (;;) {
    GmmProblem p = random_problem(rnd, window, maxB, maxU, maxT, H, sagmm);
    if (ref_mask_margin(p) >= margin) return p;
  }
}

template <class T>
std::vector<T> forward(const GmmProblem& p, bool explicit_nu = true) {
  const auto mu = cast<T>(p.mu), v = cast<T>(p.variance), w = cast<T>(p.weights);
  const auto nu = cast<T>(p.nu), delta = cast<T>(p.delta);
  std::vector<T> alpha(static_cast<size_t>(p.B * p.U * p.T), T(-7));  // poison
  core::gmm_attention(mu.data(), v.data(), w.data(), explicit_nu ? nu.data() : nullptr,
                      explicit_nu ? delta.data() : nullptr, alpha.data(), p.H, grid_of(p),
                      options_of(p));
  return alpha;
}

struct Grads {
  std::vector<double> mu, variance, weights, nu, delta;
};

template <class T>
Grads backward(const GmmProblem& p, const std::vector<double>& W) {
  const auto mu = cast<T>(p.mu), v = cast<T>(p.variance), w = cast<T>(p.weights);
  const auto nu = cast<T>(p.nu), delta = cast<T>(p.delta), g = cast<T>(W);
  std::vector<T> gmu(mu.size(), T(-7)), gv(mu.size(), T(-7)), gw(mu.size(), T(-7));
  std::vector<T> gnu(nu.size(), T(-7)), gd(nu.size(), T(-7));
  core::gmm_attention_backward(g.data(), mu.data(), v.data(), w.data(), nu.data(),
                               delta.data(), gmu.data(), gv.data(), gw.data(), gnu.data(),
                               gd.data(), p.H, grid_of(p), options_of(p));
  return {cast<double>(gmu), cast<double>(gv), cast<double>(gw), cast<double>(gnu),
          cast<double>(gd)};
}

// max |a - b| / max(1, max |b|)
template <class A>
double rel_err(const std::vector<A>& a, const std::vector<double>& b) {
  double scale = 1.0;
  for (double x : b) scale = std::max(scale, std::abs(x));
  return max_abs_diff(a, b) / scale;
}

const RefWindow kWindows[] = {RefWindow::kNone, RefWindow::kAdaptive, RefWindow::kFixed};

TEST(GmmAttention, ForwardMatchesBruteForce) {
  Random rnd(1);
  for (RefWindow win : kWindows) {
    for (int trial = 0; trial < 60; ++trial) {
      const int64_t H = trial % 3 + 1;
      const GmmProblem p = robust_problem(rnd, win, 3, 5, 12, H, trial % 2 == 0);
      const auto ref = ref_alpha(p);
      // Against the long double reference: exp of a quotient times <= 3 mixture terms, a
      // few roundings. 1e-13 is ~450 double eps (measured 2e-16); the float kernel also
      // rounds its inputs (positions up to ~12) to float: 2e-6 (~17 float eps) leaves 16x
      // over the largest error measured on either BLAS or kernel target (1.25e-7).
      EXPECT_LE(rel_err(forward<double>(p), ref), 1e-13) << "trial " << trial;
      EXPECT_LE(rel_err(forward<float>(p), ref), 2e-6) << "trial " << trial;
    }
  }
}

TEST(GmmAttention, DefaultPositionsAreOneBasedFrameIndices) {
  // nu = nullptr, delta = nullptr is plain GMM: nu_j = j + 1, delta_j = 1 (003 eqs. 6-7).
  Random rnd(2);
  for (RefWindow win : kWindows) {
    for (int trial = 0; trial < 20; ++trial) {
      const GmmProblem p = robust_problem(rnd, win, 3, 4, 10, 2, /*sagmm=*/false);
      const auto explicit_nu = forward<double>(p, true);
      const auto defaults = forward<double>(p, false);
      EXPECT_EQ(explicit_nu, defaults);
      EXPECT_LE(rel_err(defaults, ref_alpha(p)), 1e-13);
    }
  }
}

TEST(GmmAttention, VarianceConventionAndTruncatedMass) {
  // With nu_j = j + 1 and a wide Gaussian the row is a Riemann sum of the density: the full
  // row sums to 1, the kAdaptive row (radius 2) to P(|Z| < 2) = erf(sqrt 2) = 0.9545, which
  // is what 003 sec. 2.4 reports and only holds if `variance` is a variance.
  const int64_t T = 400;
  GmmProblem p;
  p.B = 1;
  p.U = 1;
  p.T = T;
  p.in_lens = {T};
  p.out_lens = {1};
  p.mu = {200.3};
  p.variance = {100.0};  // standard deviation 10
  p.weights = {1.0};
  for (int64_t j = 0; j < T; ++j) {
    p.nu.push_back(static_cast<double>(j + 1));
    p.delta.push_back(1.0);
  }
  auto full = forward<double>(p);
  EXPECT_NEAR(std::accumulate(full.begin(), full.end(), 0.0), 1.0, 1e-9);
  p.window = RefWindow::kAdaptive;
  auto tr = forward<double>(p);
  double in_window = 0;
  int64_t count = 0;
  for (int64_t j = 0; j < T; ++j) {
    in_window += tr[j];
    count += tr[j] > 0;
  }
  EXPECT_EQ(count, 40);  // frames 181 .. 220 lie within 200.3 +- 20
  // Exactly: the density N(nu_j; 200.3, 100) summed over those frames (long double), to
  // double rounding of 40 terms.
  long double window_sum = 0;
  for (int64_t j = 180; j < 220; ++j) {
    const long double d = static_cast<long double>(j + 1) - 200.3L;
    window_sum += std::exp(-d * d / 200.0L) / std::sqrt(2.0L * static_cast<long double>(M_PI) * 100.0L);
  }
  EXPECT_NEAR(in_window, static_cast<double>(window_sum), 1e-13);
  // And the continuous mass: the sum over frames differs from erf(sqrt 2) by 4.7e-5
  // (computed); the conventions a wrong reading would give are far off (radius 2 standard
  // deviations taken as 2 variances: mass 1.0; variance 100 as a standard deviation: 0.16).
  EXPECT_NEAR(in_window, std::erf(std::sqrt(2.0)), 1e-4);
}

TEST(GmmAttention, TruncatedEqualsFullRestrictedToWindow) {
  Random rnd(3);
  for (RefWindow win : {RefWindow::kAdaptive, RefWindow::kFixed}) {
    int64_t inside = 0;
    for (int trial = 0; trial < 40; ++trial) {
      GmmProblem p = robust_problem(rnd, win, 3, 6, 15, 1, trial % 2 == 0);
      const auto tr = forward<double>(p);
      const auto mask = ref_masks(p);
      p.window = RefWindow::kNone;
      const auto full = forward<double>(p);
      for (size_t k = 0; k < tr.size(); ++k) {
        if (mask[k]) {
          EXPECT_EQ(tr[k], full[k]) << "flat index " << k;  // same operations, bit for bit
          ++inside;
        } else {
          EXPECT_EQ(tr[k], 0.0) << "flat index " << k;
        }
      }
    }
    EXPECT_GT(inside, 100);
  }
}

// L = sum(W * alpha); every gradient against central differences (h = 1e-6, masks held
// fixed because every entry is >= 1e-3 away from a window edge).
TEST(GmmAttention, BackwardMatchesFiniteDifferences) {
  Random rnd(4);
  for (RefWindow win : kWindows) {
    for (int trial = 0; trial < 24; ++trial) {
      const int64_t H = trial % 3 + 1;
      const GmmProblem p = robust_problem(rnd, win, 3, 4, 8, H, trial % 2 == 0);
      const auto W = rnd.normals(static_cast<size_t>(p.B * p.U * p.T));
      auto loss = [&](const GmmProblem& q) {
        const auto a = forward<double>(q);
        return std::inner_product(a.begin(), a.end(), W.begin(), 0.0);
      };
      auto fd = [&](std::vector<double> GmmProblem::*field) {
        return numeric_gradient(
            [&](const std::vector<double>& x) {
              GmmProblem q = p;
              q.*field = x;
              return loss(q);
            },
            p.*field);
      };
      const Grads g = backward<double>(p, W);
      const std::string tag = " (window " + std::to_string(static_cast<int>(win)) +
                              ", trial " + std::to_string(trial) + ")";
      expect_gradients_close(g.mu, fd(&GmmProblem::mu), 1e-6, "grad_mu" + tag);
      expect_gradients_close(g.variance, fd(&GmmProblem::variance), 1e-6, "grad_variance" + tag);
      expect_gradients_close(g.weights, fd(&GmmProblem::weights), 1e-6, "grad_weights" + tag);
      expect_gradients_close(g.nu, fd(&GmmProblem::nu), 1e-6, "grad_nu" + tag);
      expect_gradients_close(g.delta, fd(&GmmProblem::delta), 1e-6, "grad_delta" + tag);
      // Padding: exactly zero.
      for (int64_t b = 0; b < p.B; ++b) {
        for (int64_t i = p.out_lens[b]; i < p.U; ++i)
          for (int64_t h = 0; h < p.H; ++h) {
            const size_t k = static_cast<size_t>((b * p.U + i) * p.H + h);
            EXPECT_EQ(g.mu[k], 0.0);
            EXPECT_EQ(g.variance[k], 0.0);
            EXPECT_EQ(g.weights[k], 0.0);
          }
        for (int64_t j = p.in_lens[b]; j < p.T; ++j) {
          EXPECT_EQ(g.nu[b * p.T + j], 0.0);
          EXPECT_EQ(g.delta[b * p.T + j], 0.0);
        }
      }
    }
  }
}

TEST(GmmAttention, SagmmChainThroughCumsum) {
  // SAGMM end to end: delta -> nu = cumsum(delta) -> alpha. The caller's chain rule
  // (dL/ddelta_k += sum_{j >= k} dL/dnu_j) must match differences taken through the cumsum.
  Random rnd(5);
  for (int trial = 0; trial < 10; ++trial) {
    GmmProblem p = robust_problem(rnd, RefWindow::kAdaptive, 2, 4, 9, 1, true);
    const auto W = rnd.normals(static_cast<size_t>(p.B * p.U * p.T));
    auto with_delta = [&](const std::vector<double>& delta) {
      GmmProblem q = p;
      q.delta = delta;
      for (int64_t b = 0; b < q.B; ++b) {
        double s = 0;
        for (int64_t j = 0; j < q.T; ++j) q.nu[b * q.T + j] = s += delta[b * q.T + j];
      }
      return q;
    };
    auto loss = [&](const std::vector<double>& delta) {
      const auto a = forward<double>(with_delta(delta));
      return std::inner_product(a.begin(), a.end(), W.begin(), 0.0);
    };
    const Grads g = backward<double>(p, W);
    std::vector<double> total = g.delta;
    for (int64_t b = 0; b < p.B; ++b) {
      double suffix = 0;
      for (int64_t j = p.T - 1; j >= 0; --j) {
        suffix += g.nu[b * p.T + j];
        total[b * p.T + j] += suffix;
      }
    }
    expect_gradients_close(total, numeric_gradient(loss, p.delta), 1e-6, "sagmm grad_delta");
  }
}

// The inputs are rounded to float first, so both precisions see the same numbers and only
// the float kernel's arithmetic is measured: rounding positions of up to ~100 to float moves
// an exponent (nu - mu)^2 / (2 v) by up to |nu - mu| / v x 1e-5, which dominated before
// (up to 2.7e-6 of a gradient's scale over 900 random problems, 0.3e-6 without it).
TEST(GmmAttention, FloatAgreesWithDouble) {
  Random rnd(6);
  const auto as_float = [](std::vector<double>& x) { x = cast<double>(cast<float>(x)); };
  for (RefWindow win : kWindows) {
    GmmProblem p = robust_problem(rnd, win, 4, 8, 40, 2, true);
    auto W = rnd.normals(static_cast<size_t>(p.B * p.U * p.T));
    for (auto* v : {&p.mu, &p.variance, &p.weights, &p.nu, &p.delta, &W}) as_float(*v);
    // Weights: the bound of ForwardMatchesBruteForce; measured at most 1e-7 over the 900.
    EXPECT_LE(rel_err(forward<float>(p), forward<double>(p)), 2e-6);
    // Gradients, relative to max(1, max |gradient|). float: eps 6e-8; each sums up to
    // T = 40 (mu, variance, weights) or U H = 16 (nu, delta) products of a Gaussian, an
    // offset and a weight, a few roundings each: measured at most 2.9e-7 over 900 random
    // problems and 6.8e-8 for these three: 3e-6 (10x the former).
    const Grads d = backward<double>(p, W), f = backward<float>(p, W);
    EXPECT_LE(rel_err(f.mu, d.mu), 3e-6);
    EXPECT_LE(rel_err(f.variance, d.variance), 3e-6);
    EXPECT_LE(rel_err(f.weights, d.weights), 3e-6);
    EXPECT_LE(rel_err(f.nu, d.nu), 3e-6);
    EXPECT_LE(rel_err(f.delta, d.delta), 3e-6);
  }
}

template <class T>
void far_frames_case(GmmWindow window) {
  // Frames 1e4 (and far more) standard deviations from mu: weight and gradients exactly 0.
  const int64_t Tn = 6;
  const std::vector<T> mu = {T(0)}, var = {T(1e-8)}, w = {T(1)};
  const std::vector<T> nu = {T(1), T(2), T(1e4), T(1e20), T(3e38), T(-1e30)};
  std::vector<T> alpha(Tn, T(-7));
  Grid g;
  g.batch = 1;
  g.out_len = 1;
  g.in_len = Tn;
  GmmOptions o;
  o.window = window;
  core::gmm_attention(mu.data(), var.data(), w.data(), nu.data(), nullptr, alpha.data(), 1,
                      g, o);
  for (T a : alpha) EXPECT_EQ(a, T(0));
  const std::vector<T> G(Tn, T(1));
  std::vector<T> gmu(1, T(-7)), gv(1, T(-7)), gw(1, T(-7)), gnu(Tn, T(-7)), gd(Tn, T(-7));
  core::gmm_attention_backward(G.data(), mu.data(), var.data(), w.data(), nu.data(), nullptr,
                               gmu.data(), gv.data(), gw.data(), gnu.data(), gd.data(), 1, g,
                               o);
  EXPECT_EQ(gmu[0], T(0));
  EXPECT_EQ(gv[0], T(0));
  EXPECT_EQ(gw[0], T(0));
  for (int64_t j = 0; j < Tn; ++j) {
    EXPECT_EQ(gnu[j], T(0));
    EXPECT_EQ(gd[j], T(0));
  }
}

TEST(GmmAttention, NoNanForFramesFarOutsideTheWindow) {
  for (GmmWindow w : {GmmWindow::kNone, GmmWindow::kAdaptive, GmmWindow::kFixed}) {
    far_frames_case<double>(w);
    far_frames_case<float>(w);
  }
  // The online step too: a frame 1e4 standard deviations ahead closes the window.
  const std::vector<double> nu = {0.5, 1.0, 1e4};
  std::vector<double> weights(3, -7.0);
  GmmCursor cursor;
  GmmOptions o;
  o.window = GmmWindow::kAdaptive;
  const auto r = core::gmm_online_step(1.0, 1e-8, nu.data(), nullptr, 3, false, o, cursor,
                                       weights.data());
  EXPECT_EQ(r.status, ScanStatus::kChose);
  EXPECT_EQ(r.begin, 1);
  EXPECT_EQ(r.end, 2);
  EXPECT_TRUE(std::isfinite(weights[0]));
  EXPECT_GT(weights[0], 0.0);
}

// Variances near the largest value: (x - mu)^2 and 2 v both overflow, but z = (x - mu) /
// sqrt(v) does not. Frames at 1 and 2 against mu = 2 sd: 003 eq. 11 in long double.
template <class T>
void huge_variance_case(T v) {
  const T mu = T(2) * std::sqrt(v);
  const int64_t Tn = 2;
  const std::vector<T> mus = {mu}, var = {v}, w = {T(1)};
  std::vector<T> alpha(Tn, T(-7));
  Grid g;
  g.batch = 1;
  g.out_len = 1;
  g.in_len = Tn;
  GmmOptions o;  // no window: every frame is evaluated
  core::gmm_attention(mus.data(), var.data(), w.data(), nullptr, nullptr, alpha.data(), 1, g, o);
  for (int64_t j = 0; j < Tn; ++j) {
    const long double d = (j + 1) - static_cast<long double>(mu);
    const long double ref =
        std::exp(-0.5L * std::log(2 * 3.14159265358979323846264338327950288L * static_cast<long double>(v)) -
                 d * d / (2 * static_cast<long double>(v)));
    // A few ulps of the exponent's rounding: log(2 pi v) ~ 710, so its ulp moves the result
    // by about 710 eps relative.
    EXPECT_NEAR(static_cast<long double>(alpha[j]), ref, 1000 * std::numeric_limits<T>::epsilon() * ref)
        << "v " << v << " frame " << j + 1;
  }
  const std::vector<T> G(Tn, T(1));
  std::vector<T> gmu(1), gv(1), gw(1);
  core::gmm_attention_backward(G.data(), mus.data(), var.data(), w.data(), nullptr, nullptr,
                               gmu.data(), gv.data(), gw.data(), nullptr, nullptr, 1, g, o);
  EXPECT_TRUE(std::isfinite(gmu[0]) && std::isfinite(gv[0]) && std::isfinite(gw[0]));
  EXPECT_GT(gw[0], T(0));
}

TEST(GmmAttention, HugeVariancesGiveTheDensityNotNan) {
  huge_variance_case<double>(1e308);
  huge_variance_case<double>(1e300);
  huge_variance_case<float>(3e38f);
  huge_variance_case<float>(1e38f);
}

TEST(GmmAttention, EmptyLengthsGiveZerosAndPaddingIsWritten) {
  GmmProblem p;
  p.B = 2;
  p.U = 3;
  p.T = 4;
  p.H = 2;
  p.in_lens = {0, 4};
  p.out_lens = {3, 0};
  p.mu.assign(12, 1.5);
  p.variance.assign(12, 1.0);
  p.weights.assign(12, 0.5);
  p.nu = {1, 2, 3, 4, 1, 2, 3, 4};
  p.delta.assign(8, 1.0);
  for (RefWindow win : kWindows) {
    p.window = win;
    for (double a : forward<double>(p)) EXPECT_EQ(a, 0.0);
    const Grads g = backward<double>(p, std::vector<double>(24, 1.0));
    for (const auto* v : {&g.mu, &g.variance, &g.weights, &g.nu, &g.delta})
      for (double x : *v) EXPECT_EQ(x, 0.0);
  }
  Grid empty;
  core::gmm_attention<double>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 1, empty);
}

// ---------------------------------------------------------------------------------------
// Online step

struct Stream {
  std::vector<double> nu, delta;  // the whole utterance; frames arrive in chunks
};

// Runs the online step over a whole utterance (one Gaussian per output step, H = 1),
// feeding frames in random chunks whenever a step needs more input, and checks each
// emitted window against the offline kernel and that no emission came late.
void check_online_equals_offline(GmmProblem p, Random& rnd, GmmCursor& cursor) {
  ASSERT_EQ(p.H, 1);
  std::fill(p.weights.begin(), p.weights.end(), 1.0);  // one head, weight 1
  ASSERT_EQ(p.B, 1);
  const auto offline = forward<double>(p);
  const GmmOptions o = options_of(p);
  const int64_t T = p.in_lens[0];
  int64_t available = std::min<int64_t>(T, rnd.integer(0, 3));
  std::vector<double> weights(static_cast<size_t>(std::max<int64_t>(T, 1)));
  for (int64_t i = 0; i < p.out_lens[0]; ++i) {
    const double mu = p.mu[i], v = p.variance[i];
    for (;;) {
      const bool finished = available == T;
      const auto r = core::gmm_online_step(mu, v, p.nu.data(), p.delta.data(), available,
                                           finished, o, cursor, weights.data());
      if (r.status == ScanStatus::kNeedMoreInput) {
        ASSERT_FALSE(finished);
        // Not late: no available frame could have decided the step.
        if (o.window == GmmWindow::kAdaptive) {
          double lo, hi;
          core::gmm_window_bounds(mu, v, o.radius, &lo, &hi);
          for (int64_t j = 0; j < available; ++j) EXPECT_LT(p.nu[j], hi);
        }
        available = std::min<int64_t>(T, available + rnd.integer(1, 3));
        continue;
      }
      ASSERT_LE(r.begin, r.end);
      ASSERT_LE(r.end, available);
      for (int64_t j = 0; j < T; ++j) {
        const double off = offline[i * p.T + j];
        if (j >= r.begin && j < r.end) {
          // Exact: one head of weight 1, and both evaluate the same normal_pdf of the same
          // frame (gmm.cc), so the online weights are the offline ones bit for bit.
          EXPECT_EQ(weights[j - r.begin], off) << "row " << i << " frame " << j;
        } else {
          EXPECT_EQ(off, 0.0) << "row " << i << " frame " << j << " outside the window";
        }
      }
      if (o.window == GmmWindow::kAdaptive && r.end < T) {
        double lo, hi;
        core::gmm_window_bounds(mu, v, o.radius, &lo, &hi);
        EXPECT_GE(p.nu[r.end], hi);  // emitted because of an available frame past the window
      }
      if (o.window == GmmWindow::kFixed && r.end < T) {
        EXPECT_EQ(r.end, r.gamma + core::gmm_fixed_half_width(o.width) + 1);
      }
      break;
    }
  }
}

TEST(GmmOnline, StepEqualsOffline) {
  Random rnd(7);
  for (RefWindow win : kWindows) {
    for (int trial = 0; trial < 200; ++trial) {
      GmmProblem p = random_problem(rnd, win, 1, 12, 40, 1, trial % 3 != 0);
      if (trial % 4 == 1) {  // a non-monotone mu is still exact
        for (auto& m : p.mu) m = rnd.uniform(-2.0, static_cast<double>(p.T) + 2.0);
      }
      GmmCursor cursor;
      check_online_equals_offline(p, rnd, cursor);
    }
  }
}

TEST(GmmOnline, CursorCarriesAcrossUtterancesOnlyAfterReset) {
  Random rnd(8);
  GmmProblem p = random_problem(rnd, RefWindow::kAdaptive, 1, 6, 30, 1, true);
  GmmCursor cursor;
  check_online_equals_offline(p, rnd, cursor);
  EXPECT_GT(cursor.touched, 0);
  cursor.reset();
  EXPECT_EQ(cursor.touched, 0);
  EXPECT_FALSE(cursor.pending);
  check_online_equals_offline(p, rnd, cursor);
}

// Frames arrive one at a time; count frame reads over a long utterance.
int64_t stream_touches(GmmWindow window, int64_t T, int64_t U, double variance,
                       int64_t* window_total, int64_t* rescan_total) {
  Random rnd(9);
  std::vector<double> nu(T), delta(T);
  double s = 0;
  for (int64_t j = 0; j < T; ++j) {
    delta[j] = rnd.uniform(0.3, 1.0);
    nu[j] = s += delta[j];
  }
  GmmOptions o;
  o.window = window;
  o.width = 5;
  GmmCursor cursor;
  std::vector<double> weights(T);
  int64_t available = 0;
  double mu = 0;
  *window_total = 0;
  *rescan_total = 0;
  for (int64_t i = 0; i < U; ++i) {
    mu += rnd.uniform(0.0, 2.0 * s / static_cast<double>(U));
    for (;;) {
      const auto r = core::gmm_online_step(mu, variance, nu.data(), delta.data(), available,
                                           available == T, o, cursor, weights.data());
      if (r.status == ScanStatus::kChose) {
        *window_total += r.end - r.begin;
        *rescan_total += std::min<int64_t>(r.end + 1, T);  // Algorithm 1: frames 1 .. end
        break;
      }
      ++available;
    }
  }
  return cursor.touched;
}

TEST(GmmOnline, LinearTimeCountedReads) {
  for (GmmWindow w : {GmmWindow::kAdaptive, GmmWindow::kFixed}) {
    for (int64_t T : {2000, 20000}) {
      const int64_t U = T / 4;
      int64_t windows = 0, rescan = 0;
      const int64_t touched = stream_touches(w, T, U, 2.0, &windows, &rescan);
      std::cout << "window kind " << static_cast<int>(w) << ", T = " << T << ", U = " << U
                << ": " << touched << " frame reads (" << static_cast<double>(touched) / T
                << " per frame); rescanning from frame 1 would read " << rescan << "\n";
      // Each frame is read a bounded number of times: O(T + sum |window| + U), and with a
      // constant variance the windows hold a bounded number of frames each.
      EXPECT_LE(touched, 2 * T + 4 * windows + 4 * U) << "T = " << T;
      EXPECT_LE(static_cast<double>(touched) / static_cast<double>(T), 40.0) << "T = " << T;
      // Algorithm 1 of 003 A.2 rescans from frame 1 at every step: ~U T / 2 reads.
      EXPECT_LT(touched * 20, rescan) << "T = " << T;
    }
  }
}

TEST(GmmOnline, FixedWindowWaitsForLookahead) {
  // nu_j = j + 1, mu = 3.2: gamma = 2 (nu = 3); width c = 5 needs frames up to gamma + 2.
  const std::vector<double> nu = {1, 2, 3, 4, 5, 6, 7};
  GmmOptions o;
  o.window = GmmWindow::kFixed;
  o.width = 5;
  GmmCursor cursor;
  std::vector<double> weights(7);
  for (int64_t available = 0; available <= 4; ++available) {
    const auto r = core::gmm_online_step(3.2, 1.0, nu.data(), nullptr, available, false, o,
                                         cursor, weights.data());
    EXPECT_EQ(r.status, ScanStatus::kNeedMoreInput) << available;
  }
  const auto r = core::gmm_online_step(3.2, 1.0, nu.data(), nullptr, 5, false, o, cursor,
                                       weights.data());
  ASSERT_EQ(r.status, ScanStatus::kChose);
  EXPECT_EQ(r.gamma, 2);
  EXPECT_EQ(r.begin, 0);
  EXPECT_EQ(r.end, 5);
  for (int64_t k = 0; k < 5; ++k) {
    EXPECT_NEAR(weights[k], static_cast<double>(ref_normal(nu[k], 3.2, 1.0)), 1e-15);
  }
  // A frame exactly at mu decides gamma at once: with c = 1 no lookahead is needed.
  o.width = 1;
  cursor.reset();
  const auto exact = core::gmm_online_step(3.0, 1.0, nu.data(), nullptr, 3, false, o, cursor,
                                           weights.data());
  ASSERT_EQ(exact.status, ScanStatus::kChose);
  EXPECT_EQ(exact.gamma, 2);
  EXPECT_EQ(exact.end, 3);
  // Plain GMM cannot stream: it waits for the finished input.
  o.window = GmmWindow::kNone;
  cursor.reset();
  EXPECT_EQ(core::gmm_online_step(3.2, 1.0, nu.data(), nullptr, 7, false, o, cursor,
                                  weights.data())
                .status,
            ScanStatus::kNeedMoreInput);
  const auto all = core::gmm_online_step(3.2, 1.0, nu.data(), nullptr, 7, true, o, cursor,
                                         weights.data());
  EXPECT_EQ(all.status, ScanStatus::kChose);
  EXPECT_EQ(all.end - all.begin, 7);
}

TEST(GmmOnline, FixedWindowTiesGoToTheEarliestFrame) {
  // 003 eq. 17 takes an argmax; mona breaks ties towards the earliest frame, offline and
  // online alike. nu = 1, 2, 3, 4 with mu = 2.5 (frames 1 and 2 equally near) and a plateau
  // nu = 1, 2, 2, 3 with mu = 2.4 (frames 1 and 2 equally near): gamma = 1 both times.
  for (const auto& nu : {std::vector<double>{1, 2, 3, 4}, std::vector<double>{1, 2, 2, 3}}) {
    const double mu = nu[2] == 3 ? 2.5 : 2.4;
    GmmProblem p;
    p.B = 1;
    p.U = 1;
    p.T = 4;
    p.in_lens = {4};
    p.out_lens = {1};
    p.mu = {mu};
    p.variance = {1.0};
    p.weights = {1.0};
    p.nu = nu;
    p.delta = {1, 1, 1, 1};
    p.window = RefWindow::kFixed;
    p.width = 1;  // the window is gamma alone
    const auto alpha = forward<double>(p);
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(alpha[j] > 0, j == 1) << j;
    GmmOptions o = options_of(p);
    GmmCursor cursor;
    std::vector<double> w(4);
    const auto r = core::gmm_online_step(mu, 1.0, nu.data(), nullptr, 4, false, o, cursor,
                                         w.data());
    ASSERT_EQ(r.status, ScanStatus::kChose);
    EXPECT_EQ(r.gamma, 1);
    EXPECT_EQ(r.begin, 1);
    EXPECT_EQ(r.end, 2);
    EXPECT_EQ(w[0], alpha[1]);
  }
}

// ---------------------------------------------------------------------------------------
// Length penalty (003 eq. 13)

TEST(GmmLengthPenalty, ValueAndGradient) {
  Random rnd(10);
  for (int trial = 0; trial < 30; ++trial) {
    const int64_t H = trial % 2 + 1;
    GmmProblem p = random_problem(rnd, RefWindow::kNone, 4, 6, 9, H, true);
    const double lambda = trial == 0 ? 0.0 : rnd.uniform(1e-4, 1.0);
    auto run = [&](const GmmProblem& q) {
      std::vector<double> loss(static_cast<size_t>(q.B), -7.0);
      core::gmm_length_penalty(q.mu.data(), q.nu.data(), loss.data(), q.H, grid_of(q), lambda);
      return loss;
    };
    const auto loss = run(p);
    const auto ref = ref_length_penalty(p, lambda);
    for (int64_t b = 0; b < p.B; ++b) EXPECT_NEAR(loss[b], ref[b], 1e-12 * (1 + ref[b]));
    const auto gl = rnd.normals(static_cast<size_t>(p.B));
    std::vector<double> gmu(p.mu.size(), -7.0), gnu(p.nu.size(), -7.0);
    core::gmm_length_penalty_backward(gl.data(), p.mu.data(), p.nu.data(), gmu.data(),
                                      gnu.data(), p.H, grid_of(p), lambda);
    auto total = [&](const GmmProblem& q) {
      const auto l = run(q);
      return std::inner_product(l.begin(), l.end(), gl.begin(), 0.0);
    };
    expect_gradients_close(gmu, numeric_gradient([&](const std::vector<double>& x) {
                             GmmProblem q = p;
                             q.mu = x;
                             return total(q);
                           }, p.mu), 1e-7, "length penalty grad_mu");
    expect_gradients_close(gnu, numeric_gradient([&](const std::vector<double>& x) {
                             GmmProblem q = p;
                             q.nu = x;
                             return total(q);
                           }, p.nu), 1e-7, "length penalty grad_nu");
  }
  // Hand-checked value: I = 2, J = 3, mu_I = 2.5, nu_J = 1: lambda ((0.5)^2 + (-1)^2).
  const std::vector<double> mu = {1.0, 2.5}, nu = {0.2, 0.6, 1.0};
  double loss = -1;
  Grid g;
  g.batch = 1;
  g.out_len = 2;
  g.in_len = 3;
  core::gmm_length_penalty(mu.data(), nu.data(), &loss, 1, g, 0.5);
  EXPECT_DOUBLE_EQ(loss, 0.5 * 1.25);
  // Default positions nu_j = j + 1: nu_J = J.
  core::gmm_length_penalty(mu.data(), nullptr, &loss, 1, g, 0.5);
  EXPECT_DOUBLE_EQ(loss, 0.5 * (0.25 + 1.0));
}

// ---------------------------------------------------------------------------------------
// Errors

TEST(GmmAttention, Errors) {
  std::vector<double> mu = {1.0, 2.0}, var = {1.0, 1.0}, w = {1.0, 1.0};
  std::vector<double> nu = {1.0, 2.0, 3.0}, delta = {1.0, 1.0, 1.0}, alpha(6);
  Grid g;
  g.batch = 1;
  g.out_len = 2;
  g.in_len = 3;
  GmmOptions o;
  auto run = [&](const Grid& gg, const GmmOptions& oo, int64_t H = 1) {
    core::gmm_attention(mu.data(), var.data(), w.data(), nu.data(), delta.data(),
                        alpha.data(), H, gg, oo);
  };
  var[1] = 0.0;
  expect_error([&] { run(g, o); },
               "gmm_attention: variance: expected finite values > 0, got 0 at [0, 1, 0]");
  var[1] = -1.0;
  expect_error([&] { run(g, o); }, "variance: expected finite values > 0, got -1");
  var[1] = std::numeric_limits<double>::infinity();
  expect_error([&] { run(g, o); }, "variance: expected finite values > 0, got inf");
  var[1] = 1.0;
  mu[0] = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { run(g, o); }, "mu: expected finite values, got nan at [0, 0, 0]");
  mu[0] = 1.0;
  w[1] = -0.5;
  expect_error([&] { run(g, o); }, "weights: expected finite values >= 0, got -0.5");
  w[1] = 1.0;
  delta[2] = -1.0;
  expect_error([&] { run(g, o); }, "delta: expected finite values >= 0, got -1 at [0, 2]");
  delta[2] = 1.0;
  nu[1] = std::numeric_limits<double>::infinity();
  expect_error([&] { run(g, o); }, "nu: expected finite values, got inf at [0, 1]");
  nu[1] = 2.0;
  int64_t bad = 4, neg = -1;
  Grid g1 = g;
  g1.in_lens = &bad;
  expect_error([&] { run(g1, o); }, "gmm_attention: in_lens[0] must lie in [0, T=3], got 4");
  Grid g2 = g;
  g2.out_lens = &neg;
  expect_error([&] { run(g2, o); }, "out_lens[0] must lie in [0, U=2], got -1");
  Grid g3 = g;
  g3.batch = -1;
  expect_error([&] { run(g3, o); }, "batch size must be >= 0, got -1");
  expect_error([&] { run(g, o, 0); }, "gmm_attention: num_heads (H, the last dimension of mu) must be >= 1, got 0");
  GmmOptions bad_radius;
  bad_radius.radius = 0.0;
  expect_error([&] { run(g, bad_radius); }, "GmmOptions.radius: expected a finite value > 0, got 0");
  GmmOptions bad_width;
  bad_width.width = 0;
  expect_error([&] { run(g, bad_width); }, "GmmOptions.width: expected a window width (c, 003 eq. 18) >= 1, got 0");
  expect_error(
      [&] {
        core::gmm_attention<double>(nullptr, var.data(), nullptr, nullptr, nullptr,
                                    alpha.data(), 1, g);
      },
      "gmm_attention: mu must not be null");
  expect_error(
      [&] {
        core::gmm_attention<double>(mu.data(), var.data(), nullptr, nullptr, nullptr, nullptr,
                                    1, g);
      },
      "gmm_attention: alpha must not be null");
  std::vector<double> G(6, 1.0), gmu(2);
  G[4] = std::numeric_limits<double>::quiet_NaN();
  expect_error(
      [&] {
        core::gmm_attention_backward(G.data(), mu.data(), var.data(), w.data(), nu.data(),
                                     delta.data(), gmu.data(), nullptr, nullptr, nullptr,
                                     nullptr, 1, g);
      },
      "gmm_attention_backward: grad_alpha: expected finite values, got nan at [0, 1, 1]");
  expect_error(
      [&] {
        core::gmm_attention_backward<double>(nullptr, mu.data(), var.data(), nullptr, nullptr,
                                             nullptr, gmu.data(), nullptr, nullptr, nullptr,
                                             nullptr, 1, g);
      },
      "gmm_attention_backward: grad_alpha must not be null");
  double loss = 0;
  expect_error([&] { core::gmm_length_penalty(mu.data(), nu.data(), &loss, 1, g, -1.0); },
               "gmm_length_penalty: lambda: expected a finite value >= 0, got -1");
}

TEST(GmmOnline, Errors) {
  const std::vector<double> nu = {1.0, 2.0, 1.5, 4.0};
  std::vector<double> weights(4);
  GmmOptions o;
  o.window = GmmWindow::kAdaptive;
  GmmCursor c;
  expect_error(
      [&] { core::gmm_online_step(1.0, 0.0, nu.data(), nullptr, 2, false, o, c, weights.data()); },
      "gmm_online_step: variance: expected a finite value > 0, got 0");
  expect_error(
      [&] { core::gmm_online_step(1.0, -2.0, nu.data(), nullptr, 2, false, o, c, weights.data()); },
      "variance: expected a finite value > 0, got -2");
  c.reset();
  expect_error(
      [&] { core::gmm_online_step(2.0, 1.0, nu.data(), nullptr, 4, false, o, c, weights.data()); },
      "gmm_online_step: nu: expected nondecreasing values, got 2 then 1.5 at [1], [2]");
  c.reset();
  const std::vector<double> ok = {1.0, 2.0, 3.0, 4.0};
  ASSERT_EQ(core::gmm_online_step(3.0, 1.0, ok.data(), nullptr, 2, false, o, c, weights.data())
                .status,
            ScanStatus::kNeedMoreInput);
  expect_error(
      [&] { core::gmm_online_step(3.5, 1.0, ok.data(), nullptr, 3, false, o, c, weights.data()); },
      "gmm_online_step: a step is pending for mu=3, variance=1; got mu=3.5, variance=1");
  expect_error(
      [&] { core::gmm_online_step(3.0, 1.0, ok.data(), nullptr, 1, false, o, c, weights.data()); },
      "gmm_online_step: available (1) is less than the frames already used (2)");
  expect_error(
      [&] { core::gmm_online_step(3.0, 1.0, static_cast<const double*>(nullptr), nullptr, 3, false, o, c, weights.data()); },
      "gmm_online_step: nu must not be null");
  GmmOptions bad;
  bad.radius = -1;
  expect_error(
      [&] { core::gmm_online_step(3.0, 1.0, ok.data(), nullptr, 3, false, bad, c, weights.data()); },
      "GmmOptions.radius: expected a finite value > 0, got -1");
  // A bad delta is found while the window is weighed, after the walk moved the cursor: the
  // error leaves the cursor as it was, and the same call with a good delta then gives what a
  // fresh cursor gives.
  for (const GmmWindow window : {GmmWindow::kAdaptive, GmmWindow::kFixed, GmmWindow::kNone}) {
    GmmOptions w;
    w.window = window;
    GmmCursor cur;
    const std::vector<double> bad_delta = {1.0, -1.0, 1.0, 1.0}, good_delta(4, 1.0);
    const GmmCursor before = cur;
    expect_error([&] { core::gmm_online_step(1.5, 1.0, ok.data(), bad_delta.data(), 4, true, w, cur, weights.data()); },
                 "gmm_online_step: delta: expected finite values >= 0, got -1 at [1]");
    EXPECT_EQ(cur.begin, before.begin);
    EXPECT_EQ(cur.gamma, before.gamma);
    EXPECT_EQ(cur.next, before.next);
    EXPECT_EQ(cur.best, before.best);
    EXPECT_EQ(cur.pending, before.pending);
    EXPECT_EQ(cur.located, before.located);
    EXPECT_EQ(cur.touched, before.touched);
    GmmCursor fresh;
    std::vector<double> wa(4), wb(4);
    const auto a = core::gmm_online_step(1.5, 1.0, ok.data(), good_delta.data(), 4, true, w, cur, wa.data());
    const auto b = core::gmm_online_step(1.5, 1.0, ok.data(), good_delta.data(), 4, true, w, fresh, wb.data());
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.begin, b.begin);
    EXPECT_EQ(a.end, b.end);
    EXPECT_EQ(wa, wb);
  }
}

TEST(GmmOptions, ToString) {
  GmmOptions o;
  EXPECT_EQ(o.ToString(), "GmmOptions(window=none)");
  o.window = GmmWindow::kAdaptive;
  EXPECT_EQ(o.ToString(), "GmmOptions(window=adaptive, radius=2)");
  o.window = GmmWindow::kFixed;
  o.width = 6;
  EXPECT_EQ(o.ToString(), "GmmOptions(window=fixed, width=6)");
}

}  // namespace
}  // namespace mona::test
