// Shared helpers for mona's tests: seeded random inputs, finite differences and
// assertions on whole arrays. Test-only; never linked into the library.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "mona/core/error.h"

namespace mona::test {

/// Seeded source of test inputs.
struct Random {
  explicit Random(uint64_t seed) : gen(seed) {}
  std::mt19937_64 gen;

  double uniform(double lo = 0.0, double hi = 1.0) {
    return std::uniform_real_distribution<double>(lo, hi)(gen);
  }
  double normal(double mean = 0.0, double stddev = 1.0) {
    return std::normal_distribution<double>(mean, stddev)(gen);
  }
  int64_t integer(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(gen);
  }
  /// n probabilities sigmoid(N(mean, stddev)).
  std::vector<double> probabilities(size_t n, double mean = 0.0, double stddev = 2.0) {
    std::vector<double> v(n);
    for (auto& x : v) x = 1.0 / (1.0 + std::exp(-normal(mean, stddev)));
    return v;
  }
  std::vector<double> normals(size_t n, double mean = 0.0, double stddev = 1.0) {
    std::vector<double> v(n);
    for (auto& x : v) x = normal(mean, stddev);
    return v;
  }
};

template <class To, class From>
std::vector<To> cast(const std::vector<From>& v) {
  return std::vector<To>(v.begin(), v.end());
}

/// Largest |a - b| over two equally long arrays.
template <class A, class B>
double max_abs_diff(const std::vector<A>& a, const std::vector<B>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t k = 0; k < std::min(a.size(), b.size()); ++k) {
    m = std::max(m, std::abs(static_cast<double>(a[k]) - static_cast<double>(b[k])));
  }
  return m;
}

/// Central finite difference of the scalar function f at x, coordinate by coordinate.
inline std::vector<double> numeric_gradient(const std::function<double(const std::vector<double>&)>& f,
                                            std::vector<double> x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t k = 0; k < x.size(); ++k) {
    const double x0 = x[k];
    x[k] = x0 + h;
    const double fp = f(x);
    x[k] = x0 - h;
    const double fm = f(x);
    x[k] = x0;
    g[k] = (fp - fm) / (2 * h);
  }
  return g;
}

/// Asserts analytic == numeric with |a - n| <= rtol * max(1, max|n|) for every entry
/// (relative to the gradient's scale, so that entries that should be 0 are checked too).
/// The numeric gradient is a central difference in float64 with h = 1e-6: truncation error
/// ~h^2 |f'''| ~ 1e-12 and rounding error ~1e-16 |f| / h ~ 1e-10 |f|, so rtol 1e-7 .. 1e-6
/// leaves a margin of ~100x for the small losses of the tests (measured: <= 5e-10 relative
/// on every OpenBLAS family and core kernel target tried).
inline void expect_gradients_close(const std::vector<double>& analytic,
                                   const std::vector<double>& numeric, double rtol,
                                   const std::string& what) {
  ASSERT_EQ(analytic.size(), numeric.size()) << what;
  double scale = 1.0;
  for (double v : numeric) scale = std::max(scale, std::abs(v));
  for (size_t k = 0; k < analytic.size(); ++k) {
    EXPECT_NEAR(analytic[k], numeric[k], rtol * scale) << what << " at flat index " << k;
  }
}

/// Runs f, expects a mona::Error whose message contains `fragment`.
template <class F>
void expect_error(F&& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "expected mona::Error containing \"" << fragment << "\"";
  } catch (const mona::Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
        << "message \"" << e.what() << "\" lacks \"" << fragment << "\"";
  }
}

}  // namespace mona::test
