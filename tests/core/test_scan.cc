// label: core
// Hard monotonic scan (mona/core/scan.h): threshold and sampling decisions, online
// resumption, linear cost, the energy-domain threshold scan, the online step's dot product
// and its dot-product scan, errors.
#include "mona/core/scan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "util/test_util.h"

namespace mona::test {
namespace {

using core::monotonic_scan;
using core::ScanOptions;
using core::ScanStatus;

TEST(MonotonicScan, StopsAtFirstEntryAtOrAboveThreshold) {
  const std::vector<double> p = {0.1, 0.49, 0.5, 0.9, 0.2};
  auto at = [&](int64_t j) { return p[static_cast<size_t>(j)]; };
  auto r = monotonic_scan(0, 5, true, at);
  EXPECT_EQ(r.status, ScanStatus::kChose);
  EXPECT_EQ(r.index, 2);  // p >= 0.5 chooses (002 Algorithm 1)
  EXPECT_EQ(r.inspected, 3);
  r = monotonic_scan(3, 5, true, at);  // starts at t_{i-1}; may choose it again
  EXPECT_EQ(r.index, 3);
  EXPECT_EQ(r.inspected, 1);
  ScanOptions high;
  high.tau = 0.95;
  r = monotonic_scan(0, 5, true, at, high);
  EXPECT_EQ(r.status, ScanStatus::kExhausted);
  EXPECT_EQ(r.index, 5);
  EXPECT_EQ(r.inspected, 5);
}

TEST(MonotonicScan, OnlineResumptionEqualsOffline) {
  Random rnd(11);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t T = rnd.integer(1, 20), U = rnd.integer(1, 8);
    std::vector<double> p = rnd.probabilities(static_cast<size_t>(U * T), -1.0, 3.0);
    std::vector<int> evaluated(static_cast<size_t>(U * T), 0);
    for (bool sample : {false, true}) {
      ScanOptions opt;
      opt.sample = sample;
      // Offline: all entries available.
      core::Rng rng_off(trial);
      std::vector<int64_t> offline;
      int64_t t = 0;
      for (int64_t i = 0; i < U; ++i) {
        auto r = monotonic_scan(t, T, true, [&](int64_t j) { return p[i * T + j]; }, opt,
                                &rng_off);
        if (r.status != ScanStatus::kChose) break;
        offline.push_back(t = r.index);
      }
      // Online: entries arrive one at a time; each entry is evaluated at most once per step.
      core::Rng rng_on(trial);
      std::vector<int64_t> online;
      std::fill(evaluated.begin(), evaluated.end(), 0);
      int64_t available = 0, i = 0, resume = 0;
      bool done = false;
      t = 0;
      while (!done && i < U) {
        const bool finished = available == T;
        auto r = monotonic_scan(resume, available, finished,
                                [&](int64_t j) {
                                  ++evaluated[static_cast<size_t>(i * T + j)];
                                  return p[i * T + j];
                                },
                                opt, &rng_on);
        if (r.status == ScanStatus::kChose) {
          online.push_back(t = r.index);
          resume = t;
          ++i;
        } else if (r.status == ScanStatus::kNeedMoreInput) {
          resume = r.index;
          ++available;
        } else {
          done = true;
        }
      }
      EXPECT_EQ(online, offline) << "trial " << trial << " sample " << sample;
      int64_t total = 0;
      for (int e : evaluated) {
        EXPECT_LE(e, 1);
        total += e;
      }
      EXPECT_LE(total, T + U);  // linear: at most T + U energies per utterance
    }
  }
}

TEST(MonotonicScan, SamplingFrequenciesMatchStoppingDistribution) {
  // P(t = j) = p_j prod_{n<j} (1 - p_n); the rest is "no choice".
  const std::vector<double> p = {0.2, 0.5, 0.1, 0.7};
  std::vector<double> prob(5);
  double none = 1.0;
  for (size_t j = 0; j < p.size(); ++j) {
    prob[j] = none * p[j];
    none *= 1 - p[j];
  }
  prob[4] = none;
  core::Rng rng(42);
  ScanOptions opt;
  opt.sample = true;
  const int n = 200000;
  std::vector<double> count(5, 0.0);
  for (int s = 0; s < n; ++s) {
    auto r = monotonic_scan(0, 4, true, [&](int64_t j) { return p[static_cast<size_t>(j)]; },
                            opt, &rng);
    count[r.status == ScanStatus::kChose ? static_cast<size_t>(r.index) : 4] += 1;
  }
  double chi2 = 0;
  for (size_t k = 0; k < 5; ++k) chi2 += std::pow(count[k] - n * prob[k], 2) / (n * prob[k]);
  EXPECT_LT(chi2, 18.47);  // chi-square, 4 degrees of freedom, p = 0.001
}

TEST(MonotonicScan, SameSeedSameDraws) {
  core::Rng a(7), b(7), c(8);
  bool differs = false;
  for (int k = 0; k < 100; ++k) {
    const double x = a.uniform();
    EXPECT_EQ(x, b.uniform());
    EXPECT_GE(x, 0.0);
    EXPECT_LT(x, 1.0);
    differs |= x != c.uniform();
  }
  EXPECT_TRUE(differs);
}

TEST(MonotonicScan, Errors) {
  auto half = [](int64_t) { return 0.5; };
  ScanOptions bad;
  bad.tau = 1.0;
  expect_error([&] { monotonic_scan(0, 3, true, half, bad); },
               "ScanOptions.tau must lie in (0, 1), got 1");
  bad.tau = 0.0;
  expect_error([&] { monotonic_scan(0, 3, true, half, bad); }, "got 0");
  expect_error([&] { monotonic_scan(-1, 3, true, half); },
               "monotonic_scan: start must be >= 0, got -1");
  expect_error([&] { monotonic_scan(4, 3, true, half); },
               "monotonic_scan: start (4) must not exceed available (3)");
  ScanOptions sample;
  sample.sample = true;
  expect_error([&] { monotonic_scan(0, 3, true, half, sample, nullptr); },
               "rng must not be null in sampling mode");
  expect_error([&] { monotonic_scan(0, 3, true, [](int64_t j) { return j == 1 ? NAN : 0.1; }); },
               "monotonic_scan: p_choose(1) must lie in [0, 1], got nan");
}

// threshold_scan decides on energies; monotonic_scan on p = sigmoid(e). Brute force: both
// on the same energies, many of them within 1e-12 .. 1e-5 of logit(tau), where the
// comparison with logit(tau) alone could disagree with the sigmoid.
TEST(ThresholdScan, EqualsMonotonicScanOnTheSigmoid) {
  Random rnd(23);
  int64_t near = 0;
  for (double tau : {0.5, 0.1, 0.9, 0.3337}) {
    const core::EnergyThreshold rule(tau);
    ScanOptions opt;
    opt.tau = tau;
    const double logit = std::log(tau / (1 - tau));
    for (int trial = 0; trial < 2000; ++trial) {
      const int64_t T = rnd.integer(0, 12);
      std::vector<double> e(static_cast<size_t>(T));
      for (auto& x : e) {
        const int kind = static_cast<int>(rnd.integer(0, 2));
        x = kind == 0 ? rnd.normal(logit, 3.0)
                      : logit + (kind == 1 ? 1 : -1) * std::pow(10.0, rnd.uniform(-12, -5));
        near += kind != 0;
      }
      const int64_t start = rnd.integer(0, T);
      const bool finished = rnd.integer(0, 1) == 1;
      const auto a = core::threshold_scan(
          start, T, finished, [&](int64_t j) { return e[static_cast<size_t>(j)]; }, rule);
      const auto b = monotonic_scan(
          start, T, finished,
          [&](int64_t j) { return 1.0 / (1.0 + std::exp(-e[static_cast<size_t>(j)])); }, opt);
      ASSERT_EQ(a.status, b.status) << "tau " << tau << " trial " << trial;
      ASSERT_EQ(a.index, b.index) << "tau " << tau << " trial " << trial;
      ASSERT_EQ(a.inspected, b.inspected) << "tau " << tau << " trial " << trial;
    }
  }
  EXPECT_GT(near, 10000);
}

TEST(ThresholdScan, DecidesAtTheThresholdLikeTheSigmoid) {
  const core::EnergyThreshold half(0.5);
  EXPECT_TRUE(half.chooses(0.0));  // sigmoid(0) = 0.5 >= 0.5
  // The rule is the sigmoid's, rounding included: sigmoid(-1e-300) rounds to 0.5.
  for (double x : {-1e-300, 1e-300, -1e-17, 1e-17, -1e-7, 1e-7, -2e-6, 2e-6}) {
    EXPECT_EQ(half.chooses(x), 1.0 / (1.0 + std::exp(-x)) >= 0.5) << x;
  }
  EXPECT_FALSE(half.chooses(-1e-7));
  EXPECT_FALSE(half.chooses(NAN));
  EXPECT_TRUE(half.chooses(INFINITY));
  EXPECT_FALSE(half.chooses(-INFINITY));
  const auto r = core::threshold_scan(
      1, 4, false, [](int64_t j) { return j == 3 ? 0.0 : -1.0; }, half);
  EXPECT_EQ(r.status, ScanStatus::kChose);
  EXPECT_EQ(r.index, 3);
  EXPECT_EQ(r.inspected, 3);
  const auto w = core::threshold_scan(2, 4, false, [](int64_t) { return -1.0f; }, half);
  EXPECT_EQ(w.status, ScanStatus::kNeedMoreInput);
  EXPECT_EQ(w.index, 4);
  EXPECT_EQ(w.inspected, 2);
}

TEST(ThresholdScan, Errors) {
  expect_error([] { core::EnergyThreshold(1.0); },
               "EnergyThreshold: tau must lie in (0, 1), got 1");
  expect_error([] { core::EnergyThreshold(0.0); }, "got 0");
  const core::EnergyThreshold half(0.5);
  auto zero = [](int64_t) { return 0.0; };
  expect_error([&] { core::threshold_scan(-1, 3, true, zero, half); },
               "threshold_scan: start must be >= 0, got -1");
  expect_error([&] { core::threshold_scan(4, 3, true, zero, half); },
               "threshold_scan: start (4) must not exceed available (3)");
}

// The online step's dot product against a long-double sum, for every length from 1 to 300
// (every tail past the vector loop, on every kernel target the tests run under) and at
// offsets that leave the rows unaligned. Any order of summing n products of n-bit-rounded
// terms is within n * eps * sum |a_k b_k| of the exact sum (Higham, Accuracy and Stability
// of Numerical Algorithms, eq. 3.5), so that is the bound; a lost or doubled lane or tail
// element is off by about |a_k b_k| ~ 1/3, far beyond it.
template <class T>
void expect_dot_near_reference() {
  Random rnd(29);
  std::vector<T> a(305), b(305);
  for (auto& x : a) x = static_cast<T>(rnd.uniform(-1, 1));
  for (auto& x : b) x = static_cast<T>(rnd.uniform(-1, 1));
  for (int64_t n = 1; n <= 300; ++n) {
    for (int64_t offset : {0, 1, 3}) {
      const T* pa = a.data() + offset;
      const T* pb = b.data() + (offset + 2) % 5;
      long double exact = 0, magnitude = 0;
      for (int64_t k = 0; k < n; ++k) {
        exact += static_cast<long double>(pa[k]) * pb[k];
        magnitude += std::fabs(static_cast<long double>(pa[k]) * pb[k]);
      }
      const double bound = static_cast<double>(n) * std::numeric_limits<T>::epsilon() * static_cast<double>(magnitude);
      ASSERT_NEAR(static_cast<double>(core::dot(pa, pb, n)), static_cast<double>(exact), bound)
          << "n " << n << " offset " << offset;
    }
  }
}

TEST(Dot, EqualsLongDoubleSumWithinRounding) {
  expect_dot_near_reference<float>();
  expect_dot_near_reference<double>();
}

// dot_threshold_scan decides exactly as threshold_scan does over energies scale * dot +
// offset computed by core::dot (the same operations in the same order, so the energies are
// equal bit for bit).
TEST(DotThresholdScan, EqualsThresholdScanOverDotEnergies) {
  Random rnd(31);
  const core::EnergyThreshold rule(0.3);
  for (int trial = 0; trial < 500; ++trial) {
    const int64_t dim = rnd.integer(1, 70), T = rnd.integer(1, 12);
    std::vector<float> query(static_cast<size_t>(dim)), keys(static_cast<size_t>(dim * T));
    for (auto& x : query) x = static_cast<float>(rnd.uniform(-1, 1));
    for (auto& x : keys) x = static_cast<float>(rnd.uniform(-1, 1));
    const double scale = rnd.uniform(0.1, 2), offset = rnd.normal(0, 1);
    const int64_t start = rnd.integer(0, T);
    const bool finished = rnd.integer(0, 1) == 1;
    const auto a = core::dot_threshold_scan(query.data(), keys.data() + start * dim, dim, start, T, finished, scale,
                                            offset, rule);
    const auto b = core::threshold_scan(
        start, T, finished,
        [&](int64_t j) { return scale * static_cast<double>(core::dot(query.data(), keys.data() + j * dim, dim)) + offset; },
        rule);
    ASSERT_EQ(a.status, b.status) << "trial " << trial;
    ASSERT_EQ(a.index, b.index) << "trial " << trial;
    ASSERT_EQ(a.inspected, b.inspected) << "trial " << trial;
    // The unchecked kernel pointer runs the same code.
    const auto c = core::dot_threshold_scan_kernel<float>()(query.data(), keys.data() + start * dim, dim, start, T,
                                                            finished, scale, offset, rule);
    ASSERT_EQ(c.status, b.status) << "trial " << trial;
    ASSERT_EQ(c.index, b.index) << "trial " << trial;
    ASSERT_EQ(c.inspected, b.inspected) << "trial " << trial;
  }
  const float q = 1;
  expect_error([&] { core::dot_threshold_scan(&q, &q, 0, 0, 1, true, 1.0, 0.0, rule); },
               "dot_threshold_scan: dim must be >= 1, got 0");
  expect_error([&] { core::dot_threshold_scan<float>(nullptr, &q, 1, 0, 1, true, 1.0, 0.0, rule); },
               "dot_threshold_scan: query must not be null");
  expect_error([&] { core::dot_threshold_scan<float>(&q, nullptr, 1, 0, 1, true, 1.0, 0.0, rule); },
               "dot_threshold_scan: keys must not be null");
  // Nothing to score (start = available): no key is read, so none is needed.
  EXPECT_EQ(core::dot_threshold_scan<float>(&q, nullptr, 1, 1, 1, true, 1.0, 0.0, rule).status,
            core::ScanStatus::kExhausted);
}

// The scan's loops for the common key sizes (64, 128, 256, 512 entries: their dot product's
// length a constant) and its general loop compute each energy with core::dot's operations, so
// an energy is core::dot's to the bit. Random energies would hide a difference in the last
// bit, so each entry is put on the threshold (tau = 0.5, logit 0) with a power-of-two scale s
// (2^40 for float, 2^60 for double): with offset -s d, where d is core::dot's product, the
// energy s (d_scan - d) is exactly 0 when the scan's product equals d, and is chosen
// (sigmoid(0) = 0.5); with offset -s d', d' the next value of T above d, it is s (d_scan - d'),
// a large negative energy, rejected. A scan product one ulp of T off either way decides the
// other way in one of the two (s times an ulp is far outside the threshold's 1e-6 margin).
template <class T>
void expect_scan_energies_equal_dot() {
  Random rnd(37);
  const core::EnergyThreshold rule(0.5);
  const double scale = std::ldexp(1.0, std::is_same_v<T, float> ? 40 : 60);
  for (const int64_t dim : {64, 128, 256, 512, 1, 7, 63, 65, 200, 300}) {
    const int64_t rows = 6;
    std::vector<T> query(static_cast<size_t>(dim) + 1), keys(static_cast<size_t>(dim * rows) + 1);
    for (int trial = 0; trial < 4; ++trial) {
      for (auto& x : query) x = static_cast<T>(rnd.uniform(-1, 1));
      for (auto& x : keys) x = static_cast<T>(rnd.uniform(-1, 1));
      const T* q = query.data() + trial % 2;  // aligned and not
      const T* k = keys.data() + trial % 2;
      for (int64_t j = 0; j < rows; ++j) {
        const T d = core::dot(q, k + j * dim, dim);
        const T next = std::nextafter(d, std::numeric_limits<T>::infinity());
        const auto at = core::dot_threshold_scan(q, k + j * dim, dim, j, j + 1, true, scale,
                                                 -scale * static_cast<double>(d), rule);
        ASSERT_EQ(at.status, core::ScanStatus::kChose) << "dim " << dim << " row " << j << " product " << d;
        ASSERT_EQ(at.index, j);
        const auto below = core::dot_threshold_scan(q, k + j * dim, dim, j, j + 1, true, scale,
                                                    -scale * static_cast<double>(next), rule);
        ASSERT_EQ(below.status, core::ScanStatus::kExhausted) << "dim " << dim << " row " << j << " product " << d;
      }
    }
  }
}

TEST(DotThresholdScan, EveryKeySizeGivesCoreDotsEnergyToTheBit) {
  expect_scan_energies_equal_dot<float>();
  expect_scan_energies_equal_dot<double>();
}

}  // namespace
}  // namespace mona::test
