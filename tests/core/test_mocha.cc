// label: core
// Tests of MoChA's chunkwise attention (mona/core/mocha.h) against the brute-force sums of
// 000 eq. 17 (tests/reference/mocha_reference.h), the hard test-time chunk softmax
// (000 eqs. 14-16), finite differences, and hand-computed values for extreme energies.
#include "mona/core/mocha.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "mona/core/monotonic.h"
#include "mona/core/softmax.h"
#include "reference/mocha_reference.h"
#include "util/test_util.h"

namespace mona::core {
namespace {

using mona::test::cast;
using mona::test::expect_error;
using mona::test::max_abs_diff;
using mona::test::Random;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A [B, U, T] problem with per-sequence lengths; null_* selects "all of T / U".
struct Case {
  int64_t B = 1, U = 1, T = 1;
  std::vector<int64_t> in_lens, out_lens;  // always filled (the effective lengths)
  bool null_in = false, null_out = false;

  Grid grid() const {
    Grid g;
    g.batch = B;
    g.out_len = U;
    g.in_len = T;
    g.in_lens = null_in ? nullptr : in_lens.data();
    g.out_lens = null_out ? nullptr : out_lens.data();
    return g;
  }
  size_t numel() const { return static_cast<size_t>(B * U * T); }
  bool valid(int64_t b, int64_t i, int64_t j) const { return i < out_lens[b] && j < in_lens[b]; }

  // Valid entries from gen(), padding entries = pad.
  template <class Gen>
  std::vector<double> fill(Gen gen, double pad) const {
    std::vector<double> v(numel());
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < U; ++i)
        for (int64_t j = 0; j < T; ++j) v[(b * U + i) * T + j] = valid(b, i, j) ? gen() : pad;
    return v;
  }
};

Case random_case(Random& rng, int64_t max_T = 8) {
  Case c;
  c.B = rng.integer(1, 3);
  c.U = rng.integer(1, 4);
  c.T = rng.integer(1, max_T);
  c.null_in = rng.integer(0, 3) == 0;
  c.null_out = rng.integer(0, 3) == 0;
  for (int64_t b = 0; b < c.B; ++b) {
    c.in_lens.push_back(c.null_in ? c.T : rng.integer(0, c.T));
    c.out_lens.push_back(c.null_out ? c.U : rng.integer(0, c.U));
  }
  return c;
}

// Chunk sizes exercised for a memory of T entries: small (2, 4 and 8 take the kernels'
// fused code, the others the general code), w > T, and absurdly large.
std::vector<int64_t> chunk_sizes(int64_t T) {
  return {1, 2, 3, 4, 5, 8, T + 3, std::numeric_limits<int64_t>::max()};
}

template <class T>
std::vector<T> run_forward(const std::vector<double>& alpha, const std::vector<double>& u,
                           const Case& c, int64_t w) {
  const std::vector<T> a = cast<T>(alpha), e = cast<T>(u);
  std::vector<T> beta(c.numel(), T(-7));  // sentinel: every entry must be written
  mocha_chunkwise(a.data(), e.data(), beta.data(), c.grid(), w);
  return beta;
}

template <class T>
void run_backward(const std::vector<double>& g, const std::vector<double>& alpha,
                  const std::vector<double>& u, const Case& c, int64_t w,
                  std::vector<T>& grad_alpha, std::vector<T>& grad_u) {
  const std::vector<T> gb = cast<T>(g), a = cast<T>(alpha), e = cast<T>(u);
  grad_alpha.assign(c.numel(), T(-7));
  grad_u.assign(c.numel(), T(-7));
  mocha_chunkwise_backward(gb.data(), a.data(), e.data(), grad_alpha.data(), grad_u.data(),
                           c.grid(), w);
}

// Every padding entry of x is exactly 0 (+0 or -0 compare equal; both count as zero).
template <class T>
void expect_padding_zero(const std::vector<T>& x, const Case& c, const char* what) {
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t i = 0; i < c.U; ++i)
      for (int64_t j = 0; j < c.T; ++j)
        if (!c.valid(b, i, j)) {
          EXPECT_EQ(x[(b * c.U + i) * c.T + j], T(0))
              << what << " padding at [" << b << ", " << i << ", " << j << "]";
        }
}

// ---------------------------------------------------------------------------------------
// Forward against brute force

TEST(MochaForward, MatchesBruteForceDouble) {
  Random rng(1);
  double max_err = 0, max_err_stop = 0;
  int cases = 0;
  for (int rep = 0; rep < 150; ++rep) {
    const Case c = random_case(rng);
    const auto alpha = c.fill([&] { return rng.uniform(0.0, 1.0); }, kNaN);
    const auto u = c.fill([&] { return rng.normal(0.0, 3.0); }, kNaN);
    for (int64_t w : chunk_sizes(c.T)) {
      const auto beta = run_forward<double>(alpha, u, c, w);
      const int64_t wr = std::min<int64_t>(w, c.T);  // the references loop up to w
      const auto ref = test::mocha_reference(alpha, u, c.B, c.U, c.T, c.in_lens, c.out_lens,
                                             wr, test::mocha_reference_row);
      const auto ref_stop = test::mocha_reference(alpha, u, c.B, c.U, c.T, c.in_lens,
                                                  c.out_lens, wr,
                                                  test::mocha_reference_row_by_stop);
      const double err = max_abs_diff(beta, ref);
      // double: eps 1.1e-16. beta_j <= sum_k alpha_k <= T <= 8, and the kernel and the
      // reference each round about 10 times per term of its sum (exps, a chunk's sum, the
      // quotient, the products): 2 x 10 x 8 x 1.1e-16 = 2e-14; measured 8.9e-16.
      EXPECT_LE(err, 2e-14) << "rep " << rep << " w " << w << " T " << c.T;
      max_err = std::max(max_err, err);
      max_err_stop = std::max(max_err_stop, max_abs_diff(beta, ref_stop));
      expect_padding_zero(beta, c, "beta");
      ++cases;
    }
  }
  EXPECT_LE(max_err_stop, 2e-14);  // as above, against the other reference; measured 8.9e-16
  std::printf("[   info   ] %d cases, max |beta - eq. 17| = %.3g, vs stop-wise sum = %.3g\n",
              cases, max_err, max_err_stop);
}

TEST(MochaForward, MatchesBruteForceFloat) {
  Random rng(2);
  double max_err = 0;
  for (int rep = 0; rep < 150; ++rep) {
    const Case c = random_case(rng);
    const auto alpha = c.fill([&] { return rng.uniform(0.0, 1.0); }, kNaN);
    const auto u = c.fill([&] { return rng.normal(0.0, 3.0); }, kNaN);
    for (int64_t w : chunk_sizes(c.T)) {
      const auto beta = run_forward<float>(alpha, u, c, w);
      // The reference sees the same float-rounded inputs, so only the kernel's float
      // arithmetic is measured.
      const auto ref = test::mocha_reference(cast<double>(cast<float>(alpha)),
                                             cast<double>(cast<float>(u)), c.B, c.U, c.T,
                                             c.in_lens, c.out_lens, std::min<int64_t>(w, c.T),
                                             test::mocha_reference_row);
      const double err = max_abs_diff(beta, ref);
      // float: eps 6e-8, about 10 roundings per term of values <= sum alpha <= 8 (T <= 8),
      // exp_nonpositive within 2 ulp: 10 x 8 x 6e-8 = 5e-6; measured 3.9e-7 on every
      // kernel target (26x).
      EXPECT_LE(err, 1e-5) << "rep " << rep << " w " << w;
      max_err = std::max(max_err, err);
      expect_padding_zero(beta, c, "beta");
    }
  }
  std::printf("[   info   ] float: max |beta - eq. 17| = %.3g\n", max_err);
}

// Mass is moved within chunks, never created or lost: sum_j beta = sum_k alpha per row.
TEST(MochaForward, ConservesRowMass) {
  Random rng(3);
  for (int rep = 0; rep < 50; ++rep) {
    const Case c = random_case(rng, 20);
    const auto alpha = c.fill([&] { return rng.uniform(0.0, 1.0); }, 0.0);
    const auto u = c.fill([&] { return rng.normal(0.0, 5.0); }, 0.0);
    for (int64_t w : chunk_sizes(c.T)) {
      const auto beta = run_forward<double>(alpha, u, c, w);
      for (size_t r = 0; r < static_cast<size_t>(c.B * c.U); ++r) {
        double sa = 0, sb = 0;
        for (int64_t j = 0; j < c.T; ++j) {
          sa += alpha[r * c.T + j];
          sb += beta[r * c.T + j];
          EXPECT_GE(beta[r * c.T + j], 0.0);
        }
        // double: eps 1.1e-16; T <= 20 entries, each a sum over up to T chunks of softmaxes
        // over up to T terms, and the two row sums: on the order of 100 roundings of values
        // <= the row's mass, 1e-14 relative; measured 7.6e-16.
        EXPECT_NEAR(sb, sa, 2e-14 * std::max(1.0, sa)) << "row " << r << " w " << w;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// w = 1 is hard monotonic attention; one-hot alpha is the test-time chunk softmax

template <class T>
void check_w1_identity(uint64_t seed) {
  Random rng(seed);
  for (int rep = 0; rep < 40; ++rep) {
    const Case c = random_case(rng, 12);
    // Awkward magnitudes on purpose: beta must equal alpha bit for bit.
    auto scaled = [&](double x, int64_t lo, int64_t hi) {
      return x * std::pow(10.0, static_cast<double>(rng.integer(lo, hi)));
    };
    const auto alpha = c.fill([&] { return scaled(rng.uniform(0.0, 1.0), -30, 3); }, kNaN);
    const auto u = c.fill([&] { return scaled(rng.normal(0.0, 1.0), -3, 4); }, kNaN);
    const auto beta = run_forward<T>(alpha, u, c, 1);
    const auto a = cast<T>(alpha);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.U; ++i)
        for (int64_t j = 0; j < c.T; ++j) {
          const size_t k = static_cast<size_t>((b * c.U + i) * c.T + j);
          EXPECT_EQ(beta[k], c.valid(b, i, j) ? a[k] : T(0)) << "flat index " << k;
        }
  }
}

TEST(MochaForward, W1ReproducesAlphaExactlyDouble) { check_w1_identity<double>(4); }
TEST(MochaForward, W1ReproducesAlphaExactlyFloat) { check_w1_identity<float>(5); }

template <class T>
void check_w1_monotonic(uint64_t seed) {
  Random rng(seed);
  for (int rep = 0; rep < 20; ++rep) {
    const Case c = random_case(rng, 15);
    const std::vector<T> p =
        cast<T>(c.fill([&] { return 1 / (1 + std::exp(-rng.normal(0, 2))); }, 0.0));
    std::vector<T> alpha(c.numel());
    monotonic_alignment<T>(p.data(), nullptr, alpha.data(), c.grid());
    const std::vector<T> u = cast<T>(c.fill([&] { return rng.normal(0.0, 4.0); }, 0.0));
    std::vector<T> beta(c.numel(), T(-7));
    mocha_chunkwise<T>(alpha.data(), u.data(), beta.data(), c.grid(), 1);
    for (size_t k = 0; k < c.numel(); ++k) EXPECT_EQ(beta[k], alpha[k]) << "flat index " << k;
  }
}

TEST(MochaForward, W1OfMonotonicAlignmentIsMonotonicAlignmentDouble) {
  check_w1_monotonic<double>(6);
}
TEST(MochaForward, W1OfMonotonicAlignmentIsMonotonicAlignmentFloat) {
  check_w1_monotonic<float>(7);
}

template <class T>
void check_hard_equals_expected(uint64_t seed, double tol) {
  Random rng(seed);
  for (int rep = 0; rep < 60; ++rep) {
    const Case c = random_case(rng, 10);
    const std::vector<T> u = cast<T>(c.fill([&] { return rng.normal(0.0, 3.0); }, kNaN));
    std::vector<T> alpha = cast<T>(c.fill([] { return 0.0; }, kNaN));
    std::vector<int64_t> stop(static_cast<size_t>(c.B * c.U), -1);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t i = 0; i < c.out_lens[b] && c.in_lens[b] > 0; ++i) {
        const int64_t t = rng.integer(0, c.in_lens[b] - 1);
        stop[b * c.U + i] = t;
        alpha[(b * c.U + i) * c.T + t] = T(1);
      }
    for (int64_t w : chunk_sizes(c.T)) {
      std::vector<T> beta(c.numel(), T(-7));
      mocha_chunkwise<T>(alpha.data(), u.data(), beta.data(), c.grid(), w);
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t i = 0; i < c.U; ++i) {
          const T* row_u = u.data() + (b * c.U + i) * c.T;
          const T* row_b = beta.data() + (b * c.U + i) * c.T;
          const int64_t t = stop[b * c.U + i];
          std::vector<T> weights(static_cast<size_t>(c.T), T(0));
          int64_t v = 0;
          if (t >= 0) {
            v = mocha_chunk_start(t, w);
            chunk_softmax<T>(row_u, v, t, weights.data());
          }
          for (int64_t j = 0; j < c.T; ++j) {
            const T expected = (t >= 0 && j >= v && j <= t) ? weights[j - v] : T(0);
            EXPECT_NEAR(row_b[j], expected, tol) << "b " << b << " i " << i << " j " << j
                                                 << " t " << t << " w " << w;
          }
        }
    }
  }
}

// Two computations of the same weights (<= 1): the kernel (vectorised exp within 2 ulp,
// chunk sums over up to w = 10 entries, alpha / S) and chunk_softmax (libm exp, its own sum
// and reciprocal). Each is within ~w + 4 roundings of exact, so they agree to ~16 eps, in
// both precisions and on both kernel targets (measured: 1 ulp, 2.2e-16 and 3e-8; the former
// tolerances 1e-15 and 1e-7 were 4.5 resp. 0.84 eps and passed by luck of the inputs).
TEST(MochaForward, HardAlignmentGivesChunkSoftmaxDouble) {
  check_hard_equals_expected<double>(8, 16 * std::numeric_limits<double>::epsilon());
}
TEST(MochaForward, HardAlignmentGivesChunkSoftmaxFloat) {
  check_hard_equals_expected<float>(9, 16 * std::numeric_limits<float>::epsilon());
}

TEST(MochaChunkStart, FirstIndexOfChunk) {
  EXPECT_EQ(mocha_chunk_start(0, 1), 0);
  EXPECT_EQ(mocha_chunk_start(5, 1), 5);
  EXPECT_EQ(mocha_chunk_start(5, 2), 4);
  EXPECT_EQ(mocha_chunk_start(5, 6), 0);
  EXPECT_EQ(mocha_chunk_start(5, 7), 0);
  EXPECT_EQ(mocha_chunk_start(3, std::numeric_limits<int64_t>::max()), 0);
}

// ---------------------------------------------------------------------------------------
// Backward

// L = sum over the whole tensor (padding included) of c * beta.
TEST(MochaBackward, MatchesFiniteDifferencesDouble) {
  Random rng(10);
  double max_rel_alpha = 0, max_rel_u = 0, max_ref = 0;
  for (int rep = 0; rep < 40; ++rep) {
    const Case c = random_case(rng, 7);
    // alpha stays >= 0.05 so that +-h never leaves the valid domain; padding = 0.5.
    const auto alpha = c.fill([&] { return rng.uniform(0.05, 1.0); }, 0.5);
    const auto u = c.fill([&] { return rng.normal(0.0, 2.0); }, 0.3);
    const auto g = c.fill([&] { return rng.normal(0.0, 1.0); }, 1.7);
    for (int64_t w : {int64_t(1), int64_t(2), int64_t(3), c.T + 2}) {
      std::vector<double> ga, gu;
      run_backward<double>(g, alpha, u, c, w, ga, gu);
      auto loss = [&](const std::vector<double>& a, const std::vector<double>& e) {
        const auto beta = run_forward<double>(a, e, c, w);
        double s = 0;
        for (size_t k = 0; k < beta.size(); ++k) s += g[k] * beta[k];
        return s;
      };
      const auto na = test::numeric_gradient(
          [&](const std::vector<double>& a) { return loss(a, u); }, alpha);
      const auto nu = test::numeric_gradient(
          [&](const std::vector<double>& e) { return loss(alpha, e); }, u);
      test::expect_gradients_close(ga, na, 1e-6, "grad_alpha");
      test::expect_gradients_close(gu, nu, 1e-6, "grad_u");
      expect_padding_zero(ga, c, "grad_alpha");
      expect_padding_zero(gu, c, "grad_u");
      auto scale = [](const std::vector<double>& n) {
        double s = 1;
        for (double x : n) s = std::max(s, std::abs(x));
        return s;
      };
      max_rel_alpha = std::max(max_rel_alpha, max_abs_diff(ga, na) / scale(na));
      max_rel_u = std::max(max_rel_u, max_abs_diff(gu, nu) / scale(nu));

      // The brute-force chain rule over every (stop, entry) pair agrees too, and the
      // energy gradient of each row sums to 0 (a common shift of a row's energies leaves
      // every chunk softmax unchanged).
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t i = 0; i < c.out_lens[b]; ++i) {
          const size_t off = static_cast<size_t>((b * c.U + i) * c.T);
          double row_sum = 0, row_abs = 0;
          for (int64_t j = 0; j < c.T; ++j) {
            row_sum += gu[off + j];
            row_abs += std::abs(gu[off + j]);
          }
          // double: eps 1.1e-16; the sum cancels, so its error is that of its T <= 7 terms,
          // a few roundings each, relative to their total size: about 100 eps = 1e-14;
          // measured 8.1e-16.
          EXPECT_LE(std::abs(row_sum), 1e-14 * std::max(1.0, row_abs));
          auto row = [&](const std::vector<double>& x) {
            return std::vector<double>(x.begin() + off, x.begin() + off + c.T);
          };
          std::vector<double> ra, ru;
          test::mocha_reference_row_backward(row(g), row(alpha), row(u), c.in_lens[b],
                                             std::min<int64_t>(w, c.T), ra, ru);
          const double e = std::max(max_abs_diff(row(ga), ra), max_abs_diff(row(gu), ru));
          // double: eps 1.1e-16. A gradient entry sums <= T <= 7 chunk terms of products of
          // |g| <~ 4 (N(0, 1)), alpha <= 1 and softmax weights <= 1, about 20 roundings of
          // values <~ 4 in the kernel and again in the reference: 2 x 20 x 4 x 1.1e-16 =
          // 1.8e-14; measured 8.9e-16.
          EXPECT_LE(e, 2e-14) << "rep " << rep << " b " << b << " i " << i << " w " << w;
          max_ref = std::max(max_ref, e);
        }
    }
  }
  std::printf("[   info   ] finite differences: max rel err grad_alpha %.3g, grad_u %.3g; "
              "vs brute-force chain rule %.3g\n", max_rel_alpha, max_rel_u, max_ref);
}

TEST(MochaBackward, FloatMatchesDouble) {
  Random rng(11);
  double max_err = 0;
  for (int rep = 0; rep < 60; ++rep) {
    const Case c = random_case(rng, 12);
    // Inputs rounded to float first, so both precisions see the same numbers.
    auto as_float = [](const std::vector<double>& x) { return cast<double>(cast<float>(x)); };
    const auto alpha = as_float(c.fill([&] { return rng.uniform(0.0, 1.0); }, kNaN));
    const auto u = as_float(c.fill([&] { return rng.normal(0.0, 3.0); }, kNaN));
    const auto g = as_float(c.fill([&] { return rng.normal(0.0, 1.0); }, kNaN));
    for (int64_t w : chunk_sizes(c.T)) {
      std::vector<double> ga_d, gu_d;
      std::vector<float> ga_f, gu_f;
      run_backward<double>(g, alpha, u, c, w, ga_d, gu_d);
      run_backward<float>(g, alpha, u, c, w, ga_f, gu_f);
      const double e = std::max(max_abs_diff(ga_f, ga_d), max_abs_diff(gu_f, gu_d));
      // float: eps 6e-8. A gradient entry sums <= T <= 12 chunk terms, about 20 roundings
      // of values <~ 4 (g ~ N(0, 1), alpha <= 1, softmax weights <= 1): 20 x 4 x 6e-8 =
      // 5e-6; measured 7.6e-7 on every kernel target (13x).
      EXPECT_LE(e, 1e-5) << "rep " << rep << " w " << w;
      max_err = std::max(max_err, e);
      expect_padding_zero(ga_f, c, "grad_alpha");
      expect_padding_zero(gu_f, c, "grad_u");
    }
  }
  std::printf("[   info   ] backward float vs double: max abs err %.3g\n", max_err);
}

// Energies spread as at the end of training (u ~ N(0, 30^2), the benchmark's hard case):
// many exp(u_l - u_j) fall below FLT_MIN, which the kernel flushes to zero
// (src/core/subnormals.h). Float against double as above (flushing moves a result by less
// than FLT_MIN per operation, far inside 1e-5), and the caller's MXCSR is as it was.
TEST(MochaBackward, SpreadEnergiesFlushedToZeroStillMatchDouble) {
#if defined(__x86_64__)
  const unsigned kControl = ~0x3Fu;  // MXCSR without its sticky exception flags
  const unsigned mxcsr = _mm_getcsr() & kControl;
  ASSERT_EQ(mxcsr & 0x8040u, 0u) << "the test runs without FTZ / DAZ";
#endif
  Random rng(12);
  double max_err = 0;
  for (int rep = 0; rep < 40; ++rep) {
    const Case c = random_case(rng, 12);
    auto as_float = [](const std::vector<double>& x) { return cast<double>(cast<float>(x)); };
    const auto alpha = as_float(c.fill([&] { return rng.uniform(0.0, 1.0); }, kNaN));
    const auto u = as_float(c.fill([&] { return rng.normal(0.0, 30.0); }, kNaN));
    const auto g = as_float(c.fill([&] { return rng.normal(0.0, 1.0); }, kNaN));
    for (int64_t w : chunk_sizes(c.T)) {
      const auto beta_f = run_forward<float>(alpha, u, c, w);
      const auto beta_d = run_forward<double>(alpha, u, c, w);
      std::vector<double> ga_d, gu_d;
      std::vector<float> ga_f, gu_f;
      run_backward<double>(g, alpha, u, c, w, ga_d, gu_d);
      run_backward<float>(g, alpha, u, c, w, ga_f, gu_f);
      const double e =
          std::max({max_abs_diff(beta_f, beta_d), max_abs_diff(ga_f, ga_d), max_abs_diff(gu_f, gu_d)});
      EXPECT_LE(e, 1e-5) << "rep " << rep << " w " << w;
      max_err = std::max(max_err, e);
    }
  }
#if defined(__x86_64__)
  EXPECT_EQ(_mm_getcsr() & kControl, mxcsr);
#endif
  std::printf("[   info   ] spread energies, float vs double: max abs err %.3g\n", max_err);
}

// ---------------------------------------------------------------------------------------
// Edge cases

template <class T>
void check_single_entry() {
  // T = 1: every chunk is the one entry, so beta = alpha, grad_alpha = g, grad_u = 0.
  Case c;
  c.B = 2;
  c.U = 3;
  c.T = 1;
  c.in_lens = {1, 1};
  c.out_lens = {3, 2};
  const std::vector<double> alpha = {0.25, 1.0, 0.0, 0.5, 0.125, 9.0};
  const std::vector<double> u = {1e4, -1e4, 0.0, 3.0, -2.5, 8.0};
  const std::vector<double> g = {1.5, -2.0, 0.75, 4.0, -1.0, 6.0};
  for (int64_t w : {int64_t(1), int64_t(2), int64_t(100)}) {
    const auto beta = run_forward<T>(alpha, u, c, w);
    std::vector<T> ga, gu;
    run_backward<T>(g, alpha, u, c, w, ga, gu);
    for (size_t k = 0; k < 6; ++k) {
      const bool valid = k != 5;  // batch 1, row 2 is padding
      EXPECT_EQ(beta[k], valid ? T(alpha[k]) : T(0)) << k;
      EXPECT_EQ(ga[k], valid ? T(g[k]) : T(0)) << k;
      EXPECT_EQ(gu[k], T(0)) << k;
    }
  }
}

TEST(MochaEdge, SingleMemoryEntryDouble) { check_single_entry<double>(); }
TEST(MochaEdge, SingleMemoryEntryFloat) { check_single_entry<float>(); }

TEST(MochaEdge, SingleOutputStep) {
  Random rng(12);
  Case c;
  c.B = 1;
  c.U = 1;
  c.T = 6;
  c.in_lens = {6};
  c.out_lens = {1};
  const auto alpha = c.fill([&] { return rng.uniform(0.0, 1.0); }, kNaN);
  const auto u = c.fill([&] { return rng.normal(0.0, 2.0); }, kNaN);
  const auto beta = run_forward<double>(alpha, u, c, 3);
  // double: eps 1.1e-16; beta_j <= the w = 3 alphas it sums, about 10 roundings per term in
  // the kernel and in the reference: 2 x 10 x 3 x 1.1e-16 = 7e-15; measured 1.1e-16.
  EXPECT_LE(max_abs_diff(beta, test::mocha_reference_row(alpha, u, 6, 3)), 1e-14);
}

template <class T>
void check_zero_lengths() {
  // Lengths 0 (and an empty batch element amid real ones): outputs all zero, no NaN,
  // even though every input entry of the empty elements is NaN.
  Case c;
  c.B = 3;
  c.U = 2;
  c.T = 4;
  c.in_lens = {0, 3, 4};
  c.out_lens = {2, 0, 1};
  const auto alpha = c.fill([] { return 0.5; }, kNaN);
  const auto u = c.fill([] { return 1.0; }, kNaN);
  const auto g = c.fill([] { return 2.0; }, kNaN);
  for (int64_t w : {int64_t(1), int64_t(3)}) {
    const auto beta = run_forward<T>(alpha, u, c, w);
    std::vector<T> ga, gu;
    run_backward<T>(g, alpha, u, c, w, ga, gu);
    for (size_t k = 0; k < c.numel(); ++k) {
      const bool valid = k >= 16 && k < 20;  // only b = 2, i = 0 is valid
      if (!valid) {
        EXPECT_EQ(beta[k], T(0)) << k;
        EXPECT_EQ(ga[k], T(0)) << k;
        EXPECT_EQ(gu[k], T(0)) << k;
      }
      EXPECT_TRUE(std::isfinite(beta[k]) && std::isfinite(ga[k]) && std::isfinite(gu[k])) << k;
    }
  }
  // Whole-grid emptiness: nothing to read, so null pointers are accepted.
  Grid empty;
  empty.batch = 0;
  empty.out_len = 5;
  empty.in_len = 7;
  mocha_chunkwise<T>(nullptr, nullptr, nullptr, empty, 2);
  mocha_chunkwise_backward<T>(nullptr, nullptr, nullptr, nullptr, nullptr, empty, 2);
  Grid no_memory;
  no_memory.batch = 2;
  no_memory.out_len = 3;
  no_memory.in_len = 0;
  mocha_chunkwise<T>(nullptr, nullptr, nullptr, no_memory, 4);
  SUCCEED();
}

TEST(MochaEdge, ZeroLengthsDouble) { check_zero_lengths<double>(); }
TEST(MochaEdge, ZeroLengthsFloat) { check_zero_lengths<float>(); }

// Energies of +-1e4 (exp overflows / underflows in both precisions). The expected values
// are worked out by hand below: with differences of 2e4 a chunk's softmax is one-hot, with
// equal energies uniform, with a difference of 1 it is (1, e^-1) / (1 + e^-1).
template <class T>
void check_extreme_energies(double tol) {
  Case c;
  c.B = 1;
  c.U = 2;
  c.T = 5;
  c.in_lens = {5};
  c.out_lens = {2};
  const double E = 1e4;
  const std::vector<double> alpha = {0.1, 0.2, 0.3, 0.15, 0.25,  // row 0
                                     0.0, 0.0, 0.0, 0.0, 1.0};   // row 1
  const std::vector<double> u = {E, -E, -E, E, E,                 //
                                 -E, -E, -E, E, E - 1};
  const std::vector<double> g = {1, 2, 3, 4, 5,  //
                                 1, 2, 3, 4, 5};
  const int64_t w = 2;
  // Row 0 chunks (w = 2): k=0 {0}: (1); k=1 {0,1}: (1, 0); k=2 {1,2}: (.5, .5);
  // k=3 {2,3}: (0, 1); k=4 {3,4}: (.5, .5).
  // Row 1: chunks k=1 and k=2 have equal energies (uniform), k=3 is one-hot on 3; only
  // k = 4 carries mass, and its chunk {3, 4} has energies (E, E - 1).
  const double q = 1 / (1 + std::exp(-1.0)), r = 1 - q;  // softmax of (E, E - 1)
  const std::vector<double> beta_expected = {
      0.1 + 0.2, 0.3 * 0.5, 0.3 * 0.5, 0.15 + 0.25 * 0.5, 0.25 * 0.5,  //
      0, 0, 0, q, r};
  // grad_alpha[k] = chunk-k softmax average of g.
  const std::vector<double> ga_expected = {1, 1, 2.5, 4, 4.5,  //
                                           1, 1.5, 2.5, 4, 4 * q + 5 * r};
  // grad_u[m] = sum_k alpha[k] s(k, m) (g[m] - ga[k]).
  const double ga14 = 4 * q + 5 * r;
  const std::vector<double> gu_expected = {
      0, 0.3 * 0.5 * (2 - 2.5), 0.3 * 0.5 * (3 - 2.5), 0.25 * 0.5 * (4 - 4.5),
      0.25 * 0.5 * (5 - 4.5),  //
      0, 0, 0, q * (4 - ga14), r * (5 - ga14)};
  const auto beta = run_forward<T>(alpha, u, c, w);
  std::vector<T> ga, gu;
  run_backward<T>(g, alpha, u, c, w, ga, gu);
  // `tol` is relative to the magnitudes in play: max(1, |beta|) for beta, and max |g| = 5 for
  // the gradients, which are made of g (grad_alpha reaches 4.6, where one float ulp is
  // 4.8e-7, and grad_u = s (g - grad_alpha) cancels terms of that size). A fixed 1e-6 allowed
  // 2 float ulp there, less than the kernel's few roundings (measured 4.6e-7).
  const double g_scale = 5;
  auto near = [&](double x, double expected, double scale, size_t k, const char* what) {
    EXPECT_NEAR(x, expected, tol * scale) << what << " " << k;
  };
  for (size_t k = 0; k < c.numel(); ++k) {
    near(beta[k], beta_expected[k], std::max(1.0, std::abs(beta_expected[k])), k, "beta");
    near(ga[k], ga_expected[k], g_scale, k, "grad_alpha");
    near(gu[k], gu_expected[k], g_scale, k, "grad_u");
  }
  // All +1e4 / all -1e4 with wide chunks: uniform chunk softmax, still no overflow.
  for (double sign : {1.0, -1.0}) {
    const std::vector<double> flat(10, sign * E);
    const auto b2 = run_forward<T>(alpha, flat, c, 3);
    std::vector<T> ga2, gu2;
    run_backward<T>(g, alpha, flat, c, 3, ga2, gu2);
    // Row 1: alpha = delta_4, chunk {2, 3, 4} uniform.
    near(b2[7], 1.0 / 3, 1, 7, "beta, flat energies");
    near(b2[8], 1.0 / 3, 1, 8, "beta, flat energies");
    near(b2[9], 1.0 / 3, 1, 9, "beta, flat energies");
    near(ga2[9], 4.0, g_scale, 9, "grad_alpha, flat energies");  // (3 + 4 + 5) / 3
    for (size_t k = 0; k < c.numel(); ++k) {
      EXPECT_TRUE(std::isfinite(b2[k]) && std::isfinite(ga2[k]) && std::isfinite(gu2[k]));
    }
  }
}

// Against hand-computed values: exp, sums of <= 3 terms, a division and a product, a handful
// of roundings; the tolerances are ~45 resp. ~17 eps relative to the magnitudes involved
// (measured: exact in double; in float 4.6e-7 of the 1e-5 allowed for the gradients).
TEST(MochaEdge, ExtremeEnergiesDouble) { check_extreme_energies<double>(1e-14); }
TEST(MochaEdge, ExtremeEnergiesFloat) { check_extreme_energies<float>(2e-6); }

// Padding is never read: NaN and Inf there change nothing and come back as exact zeros.
TEST(MochaEdge, PaddingIsNeverReadAndWrittenZero) {
  Random rng(13);
  for (int rep = 0; rep < 30; ++rep) {
    const Case c = random_case(rng, 9);
    const auto alpha = c.fill([&] { return rng.uniform(0.0, 1.0); }, 0.0);
    const auto u = c.fill([&] { return rng.normal(0.0, 2.0); }, 0.0);
    const auto g = c.fill([&] { return rng.normal(0.0, 1.0); }, 0.0);
    auto poison = [&](std::vector<double> x, double v) {
      for (int64_t b = 0; b < c.B; ++b)
        for (int64_t i = 0; i < c.U; ++i)
          for (int64_t j = 0; j < c.T; ++j)
            if (!c.valid(b, i, j)) x[(b * c.U + i) * c.T + j] = v;
      return x;
    };
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t w : {int64_t(1), int64_t(2), int64_t(4)}) {
      const auto clean = run_forward<double>(alpha, u, c, w);
      const auto dirty = run_forward<double>(poison(alpha, -inf), poison(u, kNaN), c, w);
      std::vector<double> ga, gu, ga_d, gu_d;
      run_backward<double>(g, alpha, u, c, w, ga, gu);
      run_backward<double>(poison(g, inf), poison(alpha, kNaN), poison(u, -inf), c, w, ga_d,
                           gu_d);
      for (size_t k = 0; k < c.numel(); ++k) {
        EXPECT_EQ(clean[k], dirty[k]) << k;
        EXPECT_EQ(ga[k], ga_d[k]) << k;
        EXPECT_EQ(gu[k], gu_d[k]) << k;
      }
      expect_padding_zero(dirty, c, "beta");
      expect_padding_zero(ga_d, c, "grad_alpha");
      expect_padding_zero(gu_d, c, "grad_u");
    }
  }
}

// w = T and any larger w give the same chunks: entry j's chunk starts at max(0, j - w + 1) =
// 0 either way. Cases with T >= 5 (a draw with T = 1 would make every w alike).
TEST(MochaEdge, ChunkLargerThanMemoryEqualsWholeMemory) {
  Random rng(14);
  for (int tested = 0; tested < 5;) {
    const Case c = random_case(rng, 9);
    if (c.T < 5) continue;
    ++tested;
    const auto alpha = c.fill([&] { return rng.uniform(0.0, 1.0); }, 0.0);
    const auto u = c.fill([&] { return rng.normal(0.0, 2.0); }, 0.0);
    const auto g = c.fill([&] { return rng.normal(0.0, 1.0); }, 0.0);
    const auto b1 = run_forward<double>(alpha, u, c, c.T);
    const auto b2 = run_forward<double>(alpha, u, c, std::numeric_limits<int64_t>::max());
    std::vector<double> ga1, gu1, ga2, gu2;
    run_backward<double>(g, alpha, u, c, c.T, ga1, gu1);
    run_backward<double>(g, alpha, u, c, std::numeric_limits<int64_t>::max(), ga2, gu2);
    EXPECT_EQ(b1, b2) << "T = " << c.T;
    EXPECT_EQ(ga1, ga2) << "T = " << c.T;
    EXPECT_EQ(gu1, gu2) << "T = " << c.T;
  }
}

TEST(MochaEdge, LongMemoryIsFiniteAndNormalised) {
  const int64_t B = 1, U = 10, Tn = 100000, w = 4;
  Random rng(15);
  std::vector<float> alpha(static_cast<size_t>(B * U * Tn)), u(alpha.size()), g(alpha.size());
  for (size_t k = 0; k < alpha.size(); ++k) {
    alpha[k] = static_cast<float>(rng.uniform(0.0, 2.0 / Tn));
    u[k] = static_cast<float>(rng.normal(0.0, 50.0));
    g[k] = static_cast<float>(rng.normal(0.0, 1.0));
  }
  Grid grid;
  grid.batch = B;
  grid.out_len = U;
  grid.in_len = Tn;
  std::vector<float> beta(alpha.size()), ga(alpha.size()), gu(alpha.size());
  const auto t0 = std::chrono::steady_clock::now();
  mocha_chunkwise(alpha.data(), u.data(), beta.data(), grid, w);
  const auto t1 = std::chrono::steady_clock::now();
  mocha_chunkwise_backward(g.data(), alpha.data(), u.data(), ga.data(), gu.data(), grid, w);
  const auto t2 = std::chrono::steady_clock::now();
  const double fwd = std::chrono::duration<double>(t1 - t0).count();
  const double bwd = std::chrono::duration<double>(t2 - t1).count();
  std::printf("[   info   ] T = %lld, U = %lld, w = %lld: forward %.3f s, backward %.3f s\n",
              static_cast<long long>(Tn), static_cast<long long>(U),
              static_cast<long long>(w), fwd, bwd);
  for (int64_t i = 0; i < U; ++i) {
    double sa = 0, sb = 0;
    for (int64_t j = 0; j < Tn; ++j) {
      const size_t k = static_cast<size_t>(i * Tn + j);
      ASSERT_TRUE(std::isfinite(beta[k]) && std::isfinite(ga[k]) && std::isfinite(gu[k]))
          << "row " << i << " j " << j;
      sa += alpha[k];
      sb += beta[k];
    }
    // Mass conserved. float: eps 6e-8; each beta has a relative error of a few eps (a
    // w = 4 chunk softmax and a sum of w), and over 1e5 entries they average out: measured
    // 1e-9 of the row's mass on every kernel target. 1e-7 (100x) still fails a bias of
    // 2 eps in every entry.
    EXPECT_NEAR(sb, sa, 1e-7 * sa) << "row " << i;
  }
  // Spot check a stretch in the middle against eq. 17. beta[j] depends only on
  // alpha[j .. j+w-1] and u[j-w+1 .. j+w-1], so on the window [lo - w, lo + n) the
  // reference (which truncates chunks at the window's start) is exact for local indices
  // w-1 .. n. Energies are shifted by their max for the naive exp sum (same softmax).
  const int64_t lo = 50000, n = 64;
  std::vector<double> a_win(n + w), u_win(n + w);
  for (int64_t k = 0; k < n + w; ++k) {
    a_win[k] = alpha[lo - w + k];
    u_win[k] = u[lo - w + k];
  }
  const double umax = *std::max_element(u_win.begin(), u_win.end());
  for (auto& x : u_win) x -= umax;
  const auto ref = test::mocha_reference_row(a_win, u_win, n + w, w);
  for (int64_t j = w - 1; j <= n; ++j) {
    // Absolute tolerance on the scale of alpha (~1 / T): float exp underflows for chunk
    // weights far below that, which is harmless.
    EXPECT_NEAR(beta[lo - w + j], ref[j], 1e-5 * 2.0 / Tn) << "j " << lo - w + j;
  }
}

// ---------------------------------------------------------------------------------------
// Errors

template <class T>
void check_errors() {
  Case c;
  c.B = 1;
  c.U = 2;
  c.T = 3;
  c.in_lens = {3};
  c.out_lens = {2};
  std::vector<T> alpha(6, T(0.25)), u(6, T(0.5)), beta(6), g(6, T(1)), ga(6), gu(6);
  const Grid grid = c.grid();
  auto fwd = [](const T* a, const T* e, T* out, const Grid& gr, int64_t w) {
    return [=] { mocha_chunkwise<T>(a, e, out, gr, w); };
  };
  auto bwd = [](const T* gb, const T* a, const T* e, T* o1, T* o2, const Grid& gr,
                 int64_t w) {
    return [=] { mocha_chunkwise_backward<T>(gb, a, e, o1, o2, gr, w); };
  };
  // Chunk size.
  expect_error(fwd(alpha.data(), u.data(), beta.data(), grid, 0),
               "mocha_chunkwise: w: chunk size must be >= 1, got 0");
  expect_error(fwd(alpha.data(), u.data(), beta.data(), grid, -3),
               "w: chunk size must be >= 1, got -3");
  expect_error(bwd(g.data(), alpha.data(), u.data(), ga.data(), gu.data(), grid, 0),
               "mocha_chunkwise_backward: w: chunk size must be >= 1, got 0");
  // Null pointers.
  expect_error(fwd(nullptr, u.data(), beta.data(), grid, 2), "alpha must not be null");
  expect_error(fwd(alpha.data(), nullptr, beta.data(), grid, 2), "u must not be null");
  expect_error(fwd(alpha.data(), u.data(), nullptr, grid, 2), "beta must not be null");
  expect_error(bwd(nullptr, alpha.data(), u.data(), ga.data(), gu.data(), grid, 2),
               "grad_beta must not be null");
  expect_error(bwd(g.data(), nullptr, u.data(), ga.data(), gu.data(), grid, 2),
               "alpha must not be null");
  expect_error(bwd(g.data(), alpha.data(), nullptr, ga.data(), gu.data(), grid, 2),
               "u must not be null");
  expect_error(bwd(g.data(), alpha.data(), u.data(), nullptr, gu.data(), grid, 2),
               "grad_alpha must not be null");
  expect_error(bwd(g.data(), alpha.data(), u.data(), ga.data(), nullptr, grid, 2),
               "grad_u must not be null");
  // Bad grids.
  Grid neg = grid;
  neg.batch = -1;
  expect_error(fwd(alpha.data(), u.data(), beta.data(), neg, 2),
               "mocha_chunkwise: batch size must be >= 0, got -1");
  Grid negT = grid;
  negT.in_len = -2;
  expect_error(bwd(g.data(), alpha.data(), u.data(), ga.data(), gu.data(), negT, 2),
               "mocha_chunkwise_backward: in_len T must be >= 0, got -2");
  const int64_t long_in[] = {4}, long_out[] = {3};
  Grid bad_in = grid;
  bad_in.in_lens = long_in;
  expect_error(fwd(alpha.data(), u.data(), beta.data(), bad_in, 2),
               "in_lens[0] must lie in [0, T=3], got 4");
  Grid bad_out = grid;
  bad_out.out_lens = long_out;
  expect_error(bwd(g.data(), alpha.data(), u.data(), ga.data(), gu.data(), bad_out, 2),
               "out_lens[0] must lie in [0, U=2], got 3");
  // Values: u non-finite, alpha negative or non-finite, grad_beta non-finite.
  auto with = [](std::vector<T> x, size_t k, T v) {
    x[k] = v;
    return x;
  };
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const auto u_nan = with(u, 4, nan), u_inf = with(u, 2, -inf);
  const auto a_neg = with(alpha, 5, T(-0.5)), a_inf = with(alpha, 0, inf),
             a_nan = with(alpha, 1, nan);
  const auto g_nan = with(g, 3, nan), g_inf = with(g, 0, inf);
  expect_error(fwd(alpha.data(), u_nan.data(), beta.data(), grid, 2),
               "mocha_chunkwise: u: expected finite values, got nan at [0, 1, 1]");
  expect_error(fwd(alpha.data(), u_inf.data(), beta.data(), grid, 2),
               "u: expected finite values, got -inf at [0, 0, 2]");
  expect_error(fwd(a_neg.data(), u.data(), beta.data(), grid, 2),
               "alpha: expected finite values >= 0, got -0.5 at [0, 1, 2]");
  expect_error(fwd(a_inf.data(), u.data(), beta.data(), grid, 2),
               "alpha: expected finite values >= 0, got inf at [0, 0, 0]");
  expect_error(fwd(a_nan.data(), u.data(), beta.data(), grid, 2),
               "alpha: expected finite values >= 0, got nan at [0, 0, 1]");
  expect_error(bwd(g.data(), alpha.data(), u_nan.data(), ga.data(), gu.data(), grid, 2),
               "mocha_chunkwise_backward: u: expected finite values, got nan");
  expect_error(bwd(g.data(), a_neg.data(), u.data(), ga.data(), gu.data(), grid, 2),
               "mocha_chunkwise_backward: alpha: expected finite values >= 0, got -0.5");
  expect_error(bwd(g_nan.data(), alpha.data(), u.data(), ga.data(), gu.data(), grid, 2),
               "mocha_chunkwise_backward: grad_beta: expected finite values, got nan at [0, 1, 0]");
  expect_error(bwd(g_inf.data(), alpha.data(), u.data(), ga.data(), gu.data(), grid, 2),
               "grad_beta: expected finite values, got inf at [0, 0, 0]");
}

// The kernels check alpha, u and grad_beta row by row as they read them: a bad value at
// any valid entry of a ragged batch is reported with its index, the first bad argument in
// the order grad_beta, alpha, u, for the fused (w = 4) and the general (w = 3) rows, and
// padding is never read.
TEST(MochaErrors, EveryValidEntryIsCheckedAndPaddingIsNot) {
  Case c;
  c.B = 3;
  c.U = 4;
  c.T = 6;
  c.in_lens = {6, 3, 0};
  c.out_lens = {4, 2, 3};
  const Grid grid = c.grid();
  const size_t n = c.numel();
  std::vector<double> alpha(n, 0.25), u(n, 0.5), g(n, 1.0), beta(n), ga(n), gu(n);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  int64_t valid = 0;
  for (int64_t w : {3, 4}) {
    auto fwd = [&] { mocha_chunkwise(alpha.data(), u.data(), beta.data(), grid, w); };
    auto bwd = [&] {
      mocha_chunkwise_backward(g.data(), alpha.data(), u.data(), ga.data(), gu.data(), grid, w);
    };
    for (int64_t b = 0; b < c.B; ++b) {
      for (int64_t i = 0; i < c.U; ++i) {
        for (int64_t j = 0; j < c.T; ++j) {
          const size_t k = static_cast<size_t>((b * c.U + i) * c.T + j);
          const bool inside = c.valid(b, i, j);
          const std::string at = " at [" + std::to_string(b) + ", " + std::to_string(i) + ", " +
                                 std::to_string(j) + "]";
          const std::string where = at + " (w " + std::to_string(w) + ")";
          u[k] = inf;
          if (inside) {
            expect_error(fwd, "mocha_chunkwise: u: expected finite values, got inf" + at);
            expect_error(bwd, "mocha_chunkwise_backward: u: expected finite values, got inf" + at);
          } else {
            EXPECT_NO_THROW(fwd()) << where;
            EXPECT_NO_THROW(bwd()) << where;
          }
          alpha[k] = -1;  // alpha is reported before u
          if (inside) {
            expect_error(fwd, "mocha_chunkwise: alpha: expected finite values >= 0, got -1" + at);
            expect_error(bwd, "alpha: expected finite values >= 0, got -1" + at);
          } else {
            EXPECT_NO_THROW(fwd()) << where;
            EXPECT_NO_THROW(bwd()) << where;
          }
          g[k] = nan;  // grad_beta before alpha and u
          if (inside) {
            expect_error(bwd, "mocha_chunkwise_backward: grad_beta: expected finite values, got nan" + at);
          } else {
            EXPECT_NO_THROW(bwd()) << where;
          }
          u[k] = 0.5;
          alpha[k] = 0.25;
          g[k] = 1.0;
          valid += inside;
        }
      }
    }
  }
  EXPECT_EQ(valid, 2 * (4 * 6 + 2 * 3));
}

// The kernels share the batch's rows among threads (src/core/parallel.h); a row's arithmetic
// does not depend on how many there are: 1, 2 and 3 threads give the same bits, forward and
// backward, float and double. Sizes above the parallel threshold, ragged lengths.
template <class T>
void check_thread_counts() {
  Random rng(31);
  Case c;
  c.B = 5;
  c.U = 20;
  c.T = 500;
  c.in_lens = {500, 377, 0, 499, 12};
  c.out_lens = {20, 13, 4, 1, 20};
  const auto alpha = c.fill([&] { return rng.uniform(0.0, 0.2); }, 0.0);
  const auto u = c.fill([&] { return rng.normal(0.0, 3.0); }, 0.0);
  const auto g = c.fill([&] { return rng.normal(0.0, 1.0); }, 0.0);
  const int threads_before = omp_get_max_threads();
  for (const int64_t w : {int64_t(2), int64_t(4), int64_t(5)}) {
    std::vector<std::vector<T>> beta(3), ga(3), gu(3);
    for (int n = 1; n <= 3; ++n) {
      omp_set_num_threads(n);
      beta[n - 1] = run_forward<T>(alpha, u, c, w);
      run_backward<T>(g, alpha, u, c, w, ga[n - 1], gu[n - 1]);
    }
    omp_set_num_threads(threads_before);
    for (int run = 1; run < 3; ++run) {
      EXPECT_EQ(beta[run], beta[0]) << "w " << w << ", " << run + 1 << " threads";
      EXPECT_EQ(ga[run], ga[0]) << "w " << w << ", " << run + 1 << " threads";
      EXPECT_EQ(gu[run], gu[0]) << "w " << w << ", " << run + 1 << " threads";
    }
  }
}
TEST(MochaThreads, ThreadCountsGiveTheSameBitsDouble) { check_thread_counts<double>(); }
TEST(MochaThreads, ThreadCountsGiveTheSameBitsFloat) { check_thread_counts<float>(); }

TEST(MochaErrors, EveryBadInputThrowsDouble) { check_errors<double>(); }
TEST(MochaErrors, EveryBadInputThrowsFloat) { check_errors<float>(); }

}  // namespace
}  // namespace mona::core
