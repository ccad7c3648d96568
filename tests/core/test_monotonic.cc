// label: core
// Expected alignment of hard monotonic attention (mona/core/monotonic.h) against path
// enumeration, 002 eq. 9 evaluated directly, finite differences and the hard scan.
#include "mona/core/monotonic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <omp.h>
#include <tuple>

#include "mona/core/scan.h"
#include "reference/monotonic_reference.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using core::Grid;

struct Case {
  int64_t B, U, T;
  std::vector<int64_t> in_lens, out_lens;
  std::vector<double> p;       // [B, U, T]
  std::vector<double> alpha0;  // [B, T], empty = default delta
  Grid grid() const {
    Grid g;
    g.batch = B;
    g.out_len = U;
    g.in_len = T;
    g.in_lens = in_lens.data();
    g.out_lens = out_lens.data();
    return g;
  }
};

Case random_case(Random& rnd, int64_t maxB, int64_t maxU, int64_t maxT, bool with_alpha0,
                 double p_mean = 0.0) {
  Case c;
  c.B = rnd.integer(1, maxB);
  c.U = rnd.integer(1, maxU);
  c.T = rnd.integer(1, maxT);
  for (int64_t b = 0; b < c.B; ++b) {
    c.in_lens.push_back(rnd.integer(0, c.T));
    c.out_lens.push_back(rnd.integer(0, c.U));
  }
  c.in_lens[0] = c.T;  // at least one full-length sequence
  c.out_lens[0] = c.U;
  c.p = rnd.probabilities(static_cast<size_t>(c.B * c.U * c.T), p_mean);
  if (with_alpha0) {
    c.alpha0 = std::vector<double>(static_cast<size_t>(c.B * c.T));
    for (auto& a : c.alpha0) a = rnd.uniform();
    for (int64_t b = 0; b < c.B; ++b) {  // normalise over the valid entries
      double s = 0;
      for (int64_t j = 0; j < c.in_lens[b]; ++j) s += c.alpha0[b * c.T + j];
      for (int64_t j = 0; j < c.in_lens[b]; ++j) c.alpha0[b * c.T + j] /= s;
    }
  }
  return c;
}

// Reference alignment of a whole batch: path enumeration per sequence, zero padding.
std::vector<double> reference_alignment(const Case& c) {
  std::vector<double> out(c.p.size(), 0.0);
  for (int64_t b = 0; b < c.B; ++b) {
    const int64_t Ub = c.out_lens[b], Tb = c.in_lens[b];
    std::vector<double> p(static_cast<size_t>(Ub * Tb)), a0(static_cast<size_t>(Tb), 0.0);
    for (int64_t i = 0; i < Ub; ++i)
      for (int64_t j = 0; j < Tb; ++j) p[i * Tb + j] = c.p[(b * c.U + i) * c.T + j];
    for (int64_t j = 0; j < Tb; ++j) a0[j] = c.alpha0.empty() ? (j == 0) : c.alpha0[b * c.T + j];
    const auto ref = monotonic_alignment_by_paths(p, a0, Ub, Tb);
    for (int64_t i = 0; i < Ub; ++i)
      for (int64_t j = 0; j < Tb; ++j) out[(b * c.U + i) * c.T + j] = ref[i * Tb + j];
  }
  return out;
}

template <class T>
std::vector<T> forward(const Case& c) {
  const auto p = cast<T>(c.p);
  const auto a0 = cast<T>(c.alpha0);
  std::vector<T> alpha(c.p.size(), T(-7));  // poison: every entry must be written
  core::monotonic_alignment(p.data(), a0.empty() ? nullptr : a0.data(), alpha.data(),
                            c.grid());
  return alpha;
}

TEST(MonotonicAlignment, MatchesPathEnumeration) {
  Random rnd(1);
  for (int trial = 0; trial < 200; ++trial) {
    const Case c = random_case(rnd, 3, 4, 6, trial % 2 == 1, rnd.uniform(-2, 2));
    const auto ref = reference_alignment(c);
    // Against the path sums (other arithmetic): alpha <= 1 comes from <= U + T = 10
    // multiply-adds per path, so double agrees to ~1e-15 (measured 2.2e-16). The float
    // kernel also sees float-rounded p (6e-8 relative each, <= 10 factors): ~1e-6 at worst
    // (measured 7.7e-8), 1e-5 leaves >10x on either kernel target.
    EXPECT_LE(max_abs_diff(forward<double>(c), ref), 1e-12) << "trial " << trial;
    EXPECT_LE(max_abs_diff(forward<float>(c), ref), 1e-5) << "trial " << trial;
  }
}

TEST(MonotonicAlignment, LongRowMatchesEq9WhereCumprodFormFails) {
  // Many p near 0 make the exclusive cumprod of the closed form (002 eq. 30) underflow
  // its clamp; the recurrence must still agree with eq. 9 summed directly.
  Random rnd(2);
  const int64_t T = 300;
  std::vector<double> p(T), prev(T, 0.0);
  for (auto& x : p) x = 1.0 / (1.0 + std::exp(-rnd.normal(-2.0, 2.0)));
  for (int64_t j = 0; j < T; j += 37) prev[j] = 1.0 / 9.0;  // mass spread along the row
  const auto ref = monotonic_row_by_eq9(p, prev);
  std::vector<double> alpha(T);
  core::monotonic_alignment_step(p.data(), prev.data(), alpha.data(), 1, T, nullptr);
  // The recurrence against eq. 9 summed directly: alpha <= 1/9, and the (1 - p) factors damp
  // old rounding errors, so double agrees to ~1e-16 (measured 7e-18) and float, which also
  // rounds p, to ~1e-8 (measured 2e-9).
  for (int64_t j = 0; j < T; ++j) EXPECT_NEAR(alpha[j], static_cast<double>(ref[j]), 1e-14);
  std::vector<float> pf(p.begin(), p.end()), prevf(prev.begin(), prev.end()), alphaf(T);
  core::monotonic_alignment_step(pf.data(), prevf.data(), alphaf.data(), 1, T, nullptr);
  for (int64_t j = 0; j < T; ++j) EXPECT_NEAR(alphaf[j], static_cast<double>(ref[j]), 1e-6);
}

TEST(MonotonicAlignment, StepEqualsFullGridRowByRow) {
  Random rnd(3);
  for (int trial = 0; trial < 20; ++trial) {
    Case c = random_case(rnd, 4, 5, 9, true);
    std::fill(c.out_lens.begin(), c.out_lens.end(), c.U);
    const auto full = forward<double>(c);
    std::vector<double> prev = c.alpha0, cur(prev.size());
    for (int64_t i = 0; i < c.U; ++i) {
      std::vector<double> p_i(static_cast<size_t>(c.B * c.T));
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t j = 0; j < c.T; ++j) p_i[b * c.T + j] = c.p[(b * c.U + i) * c.T + j];
      core::monotonic_alignment_step(p_i.data(), prev.data(), cur.data(), c.B, c.T,
                                     c.in_lens.data());
      // Exact: in double the step API and the full grid run the same per-row recurrence
      // (the grid interleaves as many rows as the target's vectors hold lanes, each in the
      // same order) in one kernel target.
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t j = 0; j < c.T; ++j)
          EXPECT_EQ(cur[b * c.T + j], full[(b * c.U + i) * c.T + j]);
      prev = cur;
    }
  }
}

TEST(MonotonicAlignment, StepInPlace) {
  Random rnd(4);
  const int64_t B = 2, T = 7;
  auto p = rnd.probabilities(B * T);
  auto prev = rnd.probabilities(B * T);
  std::vector<double> out(B * T);
  core::monotonic_alignment_step(p.data(), prev.data(), out.data(), B, T, nullptr);
  core::monotonic_alignment_step(p.data(), prev.data(), prev.data(), B, T, nullptr);
  EXPECT_EQ(out, prev);
}

// L = sum(W * alpha) for fixed random weights W; gradients by central differences.
TEST(MonotonicAlignment, BackwardMatchesFiniteDifferences) {
  Random rnd(5);
  for (int trial = 0; trial < 30; ++trial) {
    const bool with_alpha0 = trial % 2 == 0;
    Case c = random_case(rnd, 3, 4, 7, with_alpha0);
    const auto W = rnd.normals(c.p.size());
    auto loss = [&](const Case& cc) {
      const auto a = forward<double>(cc);
      return std::inner_product(a.begin(), a.end(), W.begin(), 0.0);
    };
    std::vector<double> alpha = forward<double>(c);
    std::vector<double> grad_p(c.p.size(), -7.0), grad_a0(static_cast<size_t>(c.B * c.T), -7.0);
    core::monotonic_alignment_backward(W.data(), c.p.data(),
                                       with_alpha0 ? c.alpha0.data() : nullptr, alpha.data(),
                                       grad_p.data(), grad_a0.data(), c.grid());
    const auto num_p = numeric_gradient(
        [&](const std::vector<double>& x) {
          Case cc = c;
          cc.p = x;
          return loss(cc);
        },
        c.p);
    expect_gradients_close(grad_p, num_p, 1e-7, "grad_p");
    if (with_alpha0) {
      const auto num_a0 = numeric_gradient(
          [&](const std::vector<double>& x) {
            Case cc = c;
            cc.alpha0 = x;
            return loss(cc);
          },
          c.alpha0);
      expect_gradients_close(grad_a0, num_a0, 1e-7, "grad_alpha0");
    }
    // Padding of the gradients is exactly zero.
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.U; ++i)
        for (int64_t j = 0; j < c.T; ++j) {
          if (i >= c.out_lens[b] || j >= c.in_lens[b]) {
            EXPECT_EQ(grad_p[(b * c.U + i) * c.T + j], 0.0);
          }
        }
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = c.in_lens[b]; j < c.T; ++j) EXPECT_EQ(grad_a0[b * c.T + j], 0.0);
  }
}

TEST(MonotonicAlignment, StepBackwardMatchesFiniteDifferences) {
  Random rnd(6);
  for (int trial = 0; trial < 20; ++trial) {
    const int64_t B = rnd.integer(1, 3), T = rnd.integer(1, 8);
    std::vector<int64_t> lens(B);
    for (auto& l : lens) l = rnd.integer(0, T);
    auto p = rnd.probabilities(B * T);
    auto prev = rnd.probabilities(B * T);
    const auto W = rnd.normals(B * T);
    auto loss = [&](const std::vector<double>& pp, const std::vector<double>& aa) {
      std::vector<double> out(B * T);
      core::monotonic_alignment_step(pp.data(), aa.data(), out.data(), B, T, lens.data());
      return std::inner_product(out.begin(), out.end(), W.begin(), 0.0);
    };
    std::vector<double> gp(B * T), ga(W);  // ga aliases grad_alpha: in-place allowed
    core::monotonic_alignment_step_backward(ga.data(), p.data(), prev.data(), gp.data(),
                                            ga.data(), B, T, lens.data());
    expect_gradients_close(
        gp, numeric_gradient([&](const std::vector<double>& x) { return loss(x, prev); }, p),
        1e-7, "grad_p");
    expect_gradients_close(
        ga, numeric_gradient([&](const std::vector<double>& x) { return loss(p, x); }, prev),
        1e-7, "grad_alpha_prev");
  }
}

// The full-grid kernels run several batch elements at once, one per vector lane, grouped by
// input length (2, 4 or 8 lanes by kernel target). A batch of 19 ragged sequences (lengths
// 0 .. T, T = 45: groups of mixed lengths, whole and partial tiles, empty lanes) against the
// one-row step kernels (scalar code, one sequence at a time), forward and backward.
TEST(MonotonicAlignment, ManyRaggedSequencesMatchTheStepKernelsRowByRow) {
  Random rnd(11);
  const int64_t B = 19, U = 13, T = 45;
  Case c;
  c.B = B;
  c.U = U;
  c.T = T;
  for (int64_t b = 0; b < B; ++b) {
    c.in_lens.push_back(b % 5 == 4 ? 0 : rnd.integer(1, T));
    c.out_lens.push_back(b % 7 == 6 ? 0 : rnd.integer(1, U));
  }
  c.in_lens[3] = T;
  c.out_lens[3] = U;
  c.p = rnd.probabilities(static_cast<size_t>(B * U * T), -1.0);
  c.alpha0 = std::vector<double>(static_cast<size_t>(B * T));
  for (auto& a : c.alpha0) a = rnd.uniform() / 10;
  const auto W = rnd.normals(c.p.size());
  for (const bool with_alpha0 : {false, true}) {
    // Reference: row by row with the step kernels, per sequence.
    std::vector<double> ref_alpha(c.p.size(), 0.0), ref_gp(c.p.size(), 0.0), ref_ga0(B * T, 0.0);
    for (int64_t b = 0; b < B; ++b) {
      const int64_t Ub = c.out_lens[b], Tb = c.in_lens[b];
      std::vector<double> first(static_cast<size_t>(Tb), 0.0);
      for (int64_t j = 0; j < Tb; ++j) first[j] = with_alpha0 ? c.alpha0[b * T + j] : (j == 0);
      auto row = [&](std::vector<double>& v, int64_t i) { return v.data() + (b * U + i) * T; };
      auto crow = [&](const std::vector<double>& v, int64_t i) { return v.data() + (b * U + i) * T; };
      for (int64_t i = 0; i < Ub; ++i) {
        core::monotonic_alignment_step(crow(c.p, i), i == 0 ? first.data() : row(ref_alpha, i - 1),
                                       row(ref_alpha, i), 1, Tb, nullptr);
      }
      std::vector<double> carry(static_cast<size_t>(Tb), 0.0), G(static_cast<size_t>(Tb));
      for (int64_t i = Ub - 1; i >= 0; --i) {
        for (int64_t j = 0; j < Tb; ++j) G[j] = crow(W, i)[j] + carry[j];
        core::monotonic_alignment_step_backward(G.data(), crow(c.p, i),
                                                i == 0 ? first.data() : row(ref_alpha, i - 1),
                                                row(ref_gp, i), carry.data(), 1, Tb, nullptr);
      }
      for (int64_t j = 0; j < Tb; ++j) ref_ga0[b * T + j] = carry[j];
    }
    auto run = [&](auto zero) {
      using F = decltype(zero);
      const auto p = cast<F>(c.p), a0 = cast<F>(c.alpha0), w = cast<F>(W);
      std::vector<F> alpha(p.size(), F(-7)), gp(p.size(), F(-7)), ga0(a0.size(), F(-7));
      const F* a0p = with_alpha0 ? a0.data() : nullptr;
      core::monotonic_alignment(p.data(), a0p, alpha.data(), c.grid());
      core::monotonic_alignment_backward(w.data(), p.data(), a0p, alpha.data(), gp.data(),
                                         ga0.data(), c.grid());
      return std::make_tuple(cast<double>(alpha), cast<double>(gp), cast<double>(ga0));
    };
    const auto [da, dgp, dga0] = run(0.0);
    // Double: the same recurrences in another order of rows and batch elements; values
    // O(1) after <= U + T = 58 multiply-adds: measured below 1e-15.
    EXPECT_LE(max_abs_diff(da, ref_alpha), 1e-13);
    EXPECT_LE(max_abs_diff(dgp, ref_gp), 1e-13);
    EXPECT_LE(max_abs_diff(dga0, ref_ga0), 1e-13);
    // Float inputs and outputs, double recurrences: a few float ulps of O(1) values.
    const auto [fa, fgp, fga0] = run(0.0f);
    EXPECT_LE(max_abs_diff(fa, ref_alpha), 1e-5);
    EXPECT_LE(max_abs_diff(fgp, ref_gp), 1e-5);
    EXPECT_LE(max_abs_diff(fga0, ref_ga0), 1e-5);
  }
}

// The thread count changes how the work is shared (src/core/monotonic_kernels.inc, sharing):
// a batch with fewer lane groups than threads has its rows cut along the entries among
// threads that hand the recurrences' carries across the cuts, or, for rows too short to cut,
// runs in narrower lane groups. Never a lane's arithmetic: 1, 2 and 3 threads, and a call
// nested in another parallel region (which gets one thread and runs the groups whole), must
// give the same bits, and the step kernels' values. Sizes above the parallel threshold
// (src/core/parallel.h), ragged lengths and out_lens.
TEST(MonotonicAlignment, ThreadCountsGiveTheSameBits) {
  Random rnd(23);
  // Rows cut in 2 or 3 pieces (T = 700 >= 3 * 128; B = 2 rows are one lane group on every
  // target, the baseline's 2 lanes of double included, so that 2 and 3 threads cut them) and
  // rows too short to cut (T = 200; B = 3, with a row of no entries).
  for (const int64_t T : {700, 200}) {
    Case c;
    c.B = T == 700 ? 2 : 3;
    c.U = T == 700 ? 24 : 60;
    c.T = T;
    c.in_lens = {T, T * 3 / 4, 0};
    c.out_lens = {c.U, c.U * 2 / 3, 5};
    c.in_lens.resize(static_cast<size_t>(c.B));
    c.out_lens.resize(static_cast<size_t>(c.B));
    c.p = rnd.probabilities(static_cast<size_t>(c.B * c.U * c.T), -3.0);
    c.alpha0 = std::vector<double>(static_cast<size_t>(c.B * c.T));
    for (auto& a : c.alpha0) a = rnd.uniform() / 100;
    const auto W = rnd.normals(c.p.size());
    const int threads_before = omp_get_max_threads();
    for (const bool with_alpha0 : {false, true}) {
      const double* a0 = with_alpha0 ? c.alpha0.data() : nullptr;
      // Runs 0-2: 1, 2, 3 threads; run 3: 3 threads asked for inside a 2-thread region.
      std::vector<std::vector<double>> alpha(4), gp(4), ga0(4);
      const auto call = [&](int run) {
        alpha[run].assign(c.p.size(), -7.0);
        gp[run].assign(c.p.size(), -7.0);
        ga0[run].assign(c.alpha0.size(), -7.0);
        core::monotonic_alignment(c.p.data(), a0, alpha[run].data(), c.grid());
        core::monotonic_alignment_backward(W.data(), c.p.data(), a0, alpha[run].data(),
                                           gp[run].data(), ga0[run].data(), c.grid());
      };
      for (int n = 1; n <= 3; ++n) {
        omp_set_num_threads(n);
        call(n - 1);
      }
      omp_set_num_threads(2);
#pragma omp parallel
      {
#pragma omp single
        {
          omp_set_num_threads(3);
          call(3);
        }
      }
      omp_set_num_threads(threads_before);
      for (int run = 1; run < 4; ++run) {
        EXPECT_EQ(alpha[run], alpha[0]) << "T " << T << " run " << run << " alpha0 " << with_alpha0;
        EXPECT_EQ(gp[run], gp[0]) << "T " << T << " run " << run << " alpha0 " << with_alpha0;
        EXPECT_EQ(ga0[run], ga0[0]) << "T " << T << " run " << run << " alpha0 " << with_alpha0;
      }
      // Batch element 0 against the step kernels row by row (double: the same recurrences,
      // rounding of O(1) values over <= U + T multiply-adds, measured below 1e-15).
      const int64_t U = c.U;
      std::vector<double> first(static_cast<size_t>(T), 0.0), rows(static_cast<size_t>(U * T));
      for (int64_t j = 0; j < T; ++j) first[j] = with_alpha0 ? c.alpha0[j] : (j == 0);
      for (int64_t i = 0; i < U; ++i) {
        core::monotonic_alignment_step(c.p.data() + i * T,
                                       i == 0 ? first.data() : &rows[(i - 1) * T], &rows[i * T],
                                       1, T, nullptr);
      }
      std::vector<double> carry(static_cast<size_t>(T), 0.0), G(static_cast<size_t>(T)),
          ref_gp(static_cast<size_t>(U * T));
      for (int64_t i = U - 1; i >= 0; --i) {
        for (int64_t j = 0; j < T; ++j) G[j] = W[i * T + j] + carry[j];
        core::monotonic_alignment_step_backward(G.data(), c.p.data() + i * T,
                                                i == 0 ? first.data() : &rows[(i - 1) * T],
                                                &ref_gp[i * T], carry.data(), 1, T, nullptr);
      }
      double ea = 0, eg = 0, e0 = 0;
      for (int64_t k = 0; k < U * T; ++k) {
        ea = std::max(ea, std::abs(alpha[1][k] - rows[k]));
        eg = std::max(eg, std::abs(gp[1][k] - ref_gp[k]));
      }
      for (int64_t j = 0; j < T; ++j) e0 = std::max(e0, std::abs(ga0[1][j] - carry[j]));
      EXPECT_LE(ea, 1e-13);
      EXPECT_LE(eg, 1e-13);
      EXPECT_LE(e0, 1e-13);
    }
  }
}

TEST(MonotonicAlignment, FloatBackwardAgreesWithDouble) {
  Random rnd(7);
  Case c = random_case(rnd, 4, 8, 30, true);
  const auto W = rnd.normals(c.p.size());
  auto run = [&](auto zero) {
    using T = decltype(zero);
    const auto p = cast<T>(c.p), a0 = cast<T>(c.alpha0), w = cast<T>(W);
    std::vector<T> alpha(p.size()), gp(p.size()), ga(a0.size());
    core::monotonic_alignment(p.data(), a0.data(), alpha.data(), c.grid());
    core::monotonic_alignment_backward(w.data(), p.data(), a0.data(), alpha.data(), gp.data(),
                                       ga.data(), c.grid());
    return std::make_pair(cast<double>(gp), cast<double>(ga));
  };
  const auto d = run(0.0);
  const auto f = run(0.0f);
  // Float inputs and outputs (the recurrences are carried in double) against double, over
  // U + T <= 38 steps with gradients of O(1): measured 1e-7, 100x inside 1e-5.
  EXPECT_LE(max_abs_diff(f.first, d.first), 1e-5);
  EXPECT_LE(max_abs_diff(f.second, d.second), 1e-5);
}

// With every p in {0, 1} the expected alignment is the one-hot path of the hard scan
// (002 sec. 2.3): compare row by row with monotonic_scan.
TEST(MonotonicAlignment, HardScanEqualsExpectationWhenProbabilitiesAreBinary) {
  Random rnd(8);
  for (int trial = 0; trial < 100; ++trial) {
    const int64_t U = rnd.integer(1, 6), T = rnd.integer(1, 10);
    std::vector<double> p(static_cast<size_t>(U * T));
    for (auto& x : p) x = rnd.uniform() < 0.3 ? 1.0 : 0.0;
    std::vector<double> alpha(p.size());
    Grid g;
    g.batch = 1;
    g.out_len = U;
    g.in_len = T;
    core::monotonic_alignment(p.data(), nullptr, alpha.data(), g);
    int64_t t = 0;
    bool alive = true;
    for (int64_t i = 0; i < U; ++i) {
      std::vector<double> hard(static_cast<size_t>(T), 0.0);
      if (alive) {
        const auto r = core::monotonic_scan(t, T, true, [&](int64_t j) { return p[i * T + j]; });
        if (r.status == core::ScanStatus::kChose) {
          hard[static_cast<size_t>(r.index)] = 1.0;
          t = r.index;
        } else {
          EXPECT_EQ(r.status, core::ScanStatus::kExhausted);
          alive = false;  // context is zero from here on
        }
      }
      for (int64_t j = 0; j < T; ++j) EXPECT_EQ(alpha[i * T + j], hard[j]) << i << "," << j;
    }
  }
}

TEST(MonotonicAlignment, EdgeCases) {
  Grid g;
  // T = 1, U = 1
  g.batch = 1;
  g.out_len = 1;
  g.in_len = 1;
  double p1 = 0.3, a1 = -1;
  core::monotonic_alignment(&p1, nullptr, &a1, g);
  EXPECT_DOUBLE_EQ(a1, 0.3);
  // p exactly 1 everywhere: attention stays on entry 0; p exactly 0: nothing attended.
  g.out_len = 3;
  g.in_len = 4;
  std::vector<double> ones(12, 1.0), zeros(12, 0.0), out(12);
  core::monotonic_alignment(ones.data(), nullptr, out.data(), g);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(out[i * 4 + j], j == 0 ? 1.0 : 0.0);
  core::monotonic_alignment(zeros.data(), nullptr, out.data(), g);
  for (double v : out) EXPECT_EQ(v, 0.0);
  // Length 0 (in and out): all-zero output and gradients, never NaN, padding never read.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> pn(12, nan), gn(12, nan), gp(12, -1), ga0(4, -1);
  int64_t zero_len = 0, full_out = 3;
  g.in_lens = &zero_len;
  g.out_lens = &full_out;
  core::monotonic_alignment(pn.data(), nullptr, out.data(), g);
  for (double v : out) EXPECT_EQ(v, 0.0);
  core::monotonic_alignment_backward(gn.data(), pn.data(), nullptr, out.data(), gp.data(),
                                     ga0.data(), g);
  for (double v : gp) EXPECT_EQ(v, 0.0);
  for (double v : ga0) EXPECT_EQ(v, 0.0);
  // Empty batch is fine.
  Grid empty;
  core::monotonic_alignment<double>(nullptr, nullptr, nullptr, empty);
}

TEST(MonotonicAlignment, LongInputIsFiniteAndSubStochastic) {
  const int64_t U = 10, T = 100000;
  Random rnd(9);
  auto p = cast<float>(rnd.probabilities(U * T, -4.0, 2.0));
  std::vector<float> alpha(p.size()), gp(p.size()), ga0(T);
  const auto W = cast<float>(rnd.normals(p.size()));
  Grid g;
  g.batch = 1;
  g.out_len = U;
  g.in_len = T;
  core::monotonic_alignment(p.data(), nullptr, alpha.data(), g);
  core::monotonic_alignment_backward(W.data(), p.data(), nullptr, alpha.data(), gp.data(),
                                     ga0.data(), g);
  for (int64_t i = 0; i < U; ++i) {
    double row = 0;
    for (int64_t j = 0; j < T; ++j) {
      ASSERT_TRUE(std::isfinite(alpha[i * T + j]));
      ASSERT_TRUE(std::isfinite(gp[i * T + j]));
      row += alpha[i * T + j];
    }
    EXPECT_LE(row, 1.0 + 1e-4);  // a sub-probability distribution
  }
}

TEST(MonotonicAlignment, Errors) {
  std::vector<double> p(6, 0.5), a(6), out(6);
  Grid g;
  g.batch = 1;
  g.out_len = 2;
  g.in_len = 3;
  auto run = [&](const Grid& gg) {
    core::monotonic_alignment(p.data(), nullptr, out.data(), gg);
  };
  int64_t bad_len = 4, neg_len = -1;
  Grid g1 = g;
  g1.in_lens = &bad_len;
  expect_error([&] { run(g1); }, "in_lens[0] must lie in [0, T=3], got 4");
  Grid g2 = g;
  g2.out_lens = &neg_len;
  expect_error([&] { run(g2); }, "out_lens[0] must lie in [0, U=2], got -1");
  Grid g3 = g;
  g3.in_len = -2;
  expect_error([&] { run(g3); }, "in_len T must be >= 0, got -2");
  p[4] = 1.5;
  expect_error([&] { run(g); }, "p: expected values in [0, 1], got 1.5 at [0, 1, 1]");
  p[4] = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { run(g); }, "p: expected values in [0, 1], got nan");
  p[4] = 0.5;
  std::vector<double> a0 = {0.5, -0.1, 0.0};
  expect_error([&] { core::monotonic_alignment(p.data(), a0.data(), out.data(), g); },
               "alpha0: expected finite values >= 0, got -0.1 at [0, 1]");  // [B, T]: two indices
  expect_error([&] { core::monotonic_alignment<double>(nullptr, nullptr, out.data(), g); },
               "monotonic_alignment: p must not be null");
  std::vector<double> grad(6, 1.0), gp(6);
  grad[2] = std::numeric_limits<double>::infinity();
  expect_error(
      [&] {
        core::monotonic_alignment_backward(grad.data(), p.data(), nullptr, out.data(),
                                           gp.data(), nullptr, g);
      },
      "grad_alpha: expected finite values, got inf at [0, 0, 2]");
  expect_error(
      [&] {
        core::monotonic_alignment_step(p.data(), a0.data(), out.data(), 1, 3, &bad_len);
      },
      "monotonic_alignment_step: in_lens[0] must lie in [0, T=3], got 4");
}

// The full-grid kernels check p, grad_alpha and the saved alpha as they load them, in whole
// tiles and in the ragged tails (src/core/monotonic_kernels.inc, IsProbability, IsFinite,
// IsNonnegative). Every kind of bad value, at an entry inside a whole tile of a long row and
// at the last valid entry of a ragged row, must throw naming that entry, in float and double.
template <class F>
void every_check_fails_where_it_should() {
  const int64_t B = 9, U = 3, T = 70;
  std::vector<int64_t> in_lens = {70, 70, 61, 70, 70, 70, 70, 70, 70};
  Grid g;
  g.batch = B;
  g.out_len = U;
  g.in_len = T;
  g.in_lens = in_lens.data();
  const F inf = std::numeric_limits<F>::infinity(), nan = std::numeric_limits<F>::quiet_NaN();
  // (batch element, row, entry): inside a whole tile, and the last entry of the 61-entry row.
  for (const auto& [b, i, j] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{{4, 1, 33}, {2, 2, 60}}) {
    const size_t at = static_cast<size_t>((b * U + i) * T + j);
    const std::string where = "[" + std::to_string(b) + ", " + std::to_string(i) + ", " + std::to_string(j) + "]";
    std::vector<F> p(static_cast<size_t>(B * U * T), F(0.25)), alpha(p.size()), grad(p.size(), F(1)), gp(p.size());
    for (const F v : {F(-0.25), F(1.5), inf, -inf, nan}) {
      std::vector<F> bad_p = p;
      bad_p[at] = v;
      expect_error([&] { core::monotonic_alignment(bad_p.data(), nullptr, alpha.data(), g); },
                   "monotonic_alignment: p: expected values in [0, 1]");
      expect_error([&] { core::monotonic_alignment(bad_p.data(), nullptr, alpha.data(), g); }, where);
      core::monotonic_alignment(p.data(), nullptr, alpha.data(), g);
      expect_error(
          [&] {
            core::monotonic_alignment_backward(grad.data(), bad_p.data(), nullptr, alpha.data(), gp.data(), nullptr, g);
          },
          "monotonic_alignment_backward: p: expected values in [0, 1]");
    }
    for (const F v : {inf, -inf, nan}) {
      std::vector<F> bad_grad = grad;
      bad_grad[at] = v;
      expect_error(
          [&] {
            core::monotonic_alignment_backward(bad_grad.data(), p.data(), nullptr, alpha.data(), gp.data(), nullptr, g);
          },
          "grad_alpha: expected finite values, got " + std::string(v != v ? "nan" : v > 0 ? "inf" : "-inf") + " at " + where);
    }
    for (const F v : {F(-0.25), inf, nan}) {
      std::vector<F> bad_alpha = alpha;
      bad_alpha[at] = v;
      expect_error(
          [&] {
            core::monotonic_alignment_backward(grad.data(), p.data(), nullptr, bad_alpha.data(), gp.data(), nullptr, g);
          },
          "alpha: expected finite values >= 0");
      expect_error(
          [&] {
            core::monotonic_alignment_backward(grad.data(), p.data(), nullptr, bad_alpha.data(), gp.data(), nullptr, g);
          },
          where);
    }
  }
}

TEST(MonotonicAlignment, EveryCheckFailsWhereItShould) {
  every_check_fails_where_it_should<float>();
  every_check_fails_where_it_should<double>();
}

// Issue 17: the value that failed a check is printed so that it visibly fails it (not
// rounded to 6 digits), and its index has as many entries as its tensor has dims.
TEST(MonotonicAlignment, ErrorsPrintTheFailingValueExactlyWithTheTensorsRank) {
  Grid g;
  g.batch = 1;
  g.out_len = 2;
  g.in_len = 3;
  {
    std::vector<float> p(6, 0.5f), out(6);
    p[4] = std::nextafter(1.0f, 2.0f);  // 1 + 2^-23
    expect_error([&] { core::monotonic_alignment(p.data(), nullptr, out.data(), g); },
                 "p: expected values in [0, 1], got 1.0000001 at [0, 1, 1]");
  }
  {
    std::vector<double> p(6, 0.5), out(6);
    p[4] = 1 + 1e-15;
    expect_error([&] { core::monotonic_alignment(p.data(), nullptr, out.data(), g); },
                 "got 1.000000000000001 at [0, 1, 1]");
    p[4] = 0.5;
    // One step: p and alpha_prev are [B, T], so their entries have two indices.
    std::vector<double> prev = {1.0, 0.0, 0.0, 1.0, 0.0, 0.0};
    p[5] = -1e-300;
    expect_error(
        [&] { core::monotonic_alignment_step(p.data(), prev.data(), out.data(), 2, 3, nullptr); },
        "monotonic_alignment_step: p: expected values in [0, 1], got -1e-300 at [1, 2]");
  }
}

// The full-grid kernels check p, grad_alpha and the saved alpha as their recurrences read
// them: a bad value at any valid entry (whole and partial tiles of the lane groups, the
// last alpha row that the backward pass does not read) is reported with its index, and
// padding is never read. Float inputs leave NaNs and infinities to the recurrences' carries
// (monotonic_kernels.inc), so both dtypes are checked at every entry.
template <class F>
void every_valid_entry_is_checked_and_padding_is_not() {
  Grid g;
  g.batch = 2;
  g.out_len = 6;
  g.in_len = 19;  // whole tiles of 8 lanes and partial ones
  const std::vector<int64_t> in_lens = {19, 12}, out_lens = {6, 5};
  g.in_lens = in_lens.data();
  g.out_lens = out_lens.data();
  const size_t n = 2 * 6 * 19;
  std::vector<F> p(n, F(0.4)), alpha(n), grad(n, F(1)), gp(n);
  core::monotonic_alignment(p.data(), nullptr, alpha.data(), g);
  auto backward = [&] {
    core::monotonic_alignment_backward(grad.data(), p.data(), nullptr, alpha.data(), gp.data(), nullptr, g);
  };
  int64_t valid = 0;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 6; ++i) {
      for (int64_t j = 0; j < 19; ++j) {
        const size_t k = static_cast<size_t>((b * 6 + i) * 19 + j);
        const bool inside = i < out_lens[static_cast<size_t>(b)] && j < in_lens[static_cast<size_t>(b)];
        const std::string at = " at [" + std::to_string(b) + ", " + std::to_string(i) + ", " + std::to_string(j) + "]";
        std::vector<F> out(n);
        p[k] = std::numeric_limits<F>::quiet_NaN();
        if (inside) {
          expect_error([&] { core::monotonic_alignment(p.data(), nullptr, out.data(), g); }, "got nan" + at);
          expect_error(backward, "monotonic_alignment_backward: p: expected values in [0, 1], got nan" + at);
        } else {
          EXPECT_NO_THROW(core::monotonic_alignment(p.data(), nullptr, out.data(), g)) << at;
          EXPECT_NO_THROW(backward()) << at;
        }
        // -0.0 is a probability: the float kernels' check of p on its bits fails it, and the
        // exact check that follows passes it, so the results are those of +0.0.
        std::vector<F> out_pos(n), gp_pos(n);
        p[k] = F(0);
        core::monotonic_alignment(p.data(), nullptr, out_pos.data(), g);
        backward();
        gp_pos = gp;
        p[k] = -F(0);
        EXPECT_NO_THROW(core::monotonic_alignment(p.data(), nullptr, out.data(), g)) << at;
        EXPECT_NO_THROW(backward()) << at;
        for (size_t e = 0; e < n; ++e) {
          ASSERT_EQ(out[e], out_pos[e]) << at << ", entry " << e;
          ASSERT_EQ(gp[e], gp_pos[e]) << at << ", entry " << e;
        }
        p[k] = F(0.4);
        const F kept = alpha[k];
        alpha[k] = -1;
        if (inside) {
          expect_error(backward, "alpha: expected finite values >= 0, got -1" + at);
        } else {
          EXPECT_NO_THROW(backward()) << at;
        }
        alpha[k] = std::numeric_limits<F>::quiet_NaN();
        if (inside) {
          expect_error(backward, "alpha: expected finite values >= 0, got nan" + at);
        } else {
          EXPECT_NO_THROW(backward()) << at;
        }
        alpha[k] = kept;
        grad[k] = -std::numeric_limits<F>::infinity();
        if (inside) {
          expect_error(backward, "grad_alpha: expected finite values, got -inf" + at);
        } else {
          EXPECT_NO_THROW(backward()) << at;
        }
        grad[k] = F(1);
        valid += inside;
      }
    }
  }
  EXPECT_EQ(valid, 6 * 19 + 5 * 12);
}

TEST(MonotonicAlignment, EveryValidEntryIsCheckedAndPaddingIsNot) {
  every_valid_entry_is_checked_and_padding_is_not<float>();
  every_valid_entry_is_checked_and_padding_is_not<double>();
}

// Issue 17: the backward passes validate the saved forward values too; a NaN alpha used to
// give NaN gradients without a word.
TEST(MonotonicAlignment, BackwardValidatesTheSavedAlignment) {
  Grid g;
  g.batch = 1;
  g.out_len = 2;
  g.in_len = 3;
  std::vector<double> p(6, 0.5), alpha(6), grad(6, 1.0), gp(6);
  core::monotonic_alignment(p.data(), nullptr, alpha.data(), g);
  alpha[4] = std::numeric_limits<double>::quiet_NaN();
  expect_error(
      [&] {
        core::monotonic_alignment_backward(grad.data(), p.data(), nullptr, alpha.data(),
                                           gp.data(), nullptr, g);
      },
      "monotonic_alignment_backward: alpha: expected finite values >= 0, got nan at [0, 1, 1]");
  alpha[4] = 0.1;
  std::vector<double> a0 = {1.0, -0.5, 0.0};
  expect_error(
      [&] {
        core::monotonic_alignment_backward(grad.data(), p.data(), a0.data(), alpha.data(),
                                           gp.data(), nullptr, g);
      },
      "alpha0: expected finite values >= 0, got -0.5 at [0, 1]");
  std::vector<double> prev = {1.0, std::numeric_limits<double>::infinity(), 0.0};
  std::vector<double> gprev(3);
  expect_error(
      [&] {
        core::monotonic_alignment_step_backward(grad.data(), p.data(), prev.data(), gp.data(),
                                                gprev.data(), 1, 3, nullptr);
      },
      "monotonic_alignment_step_backward: alpha_prev: expected finite values >= 0, got inf at [0, 1]");
}

}  // namespace
}  // namespace mona::test
