// label: core
// exp_nonpositive (src/core/vexp.h), the vectorisable exp of MoChA's chunk weights, against
// expl in long double: relative error in ulps of the correctly rounded result over the whole
// range where the result is a normal number, exact values at 0, and 0 below that range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "../src/core/vexp.h"

namespace {

using mona::core::detail::exp_nonpositive;

// Largest error of exp_nonpositive in units of the last place of the rounded exact value,
// over `points` evenly spaced arguments in [lo, 0] (lo above the underflow threshold).
template <class T>
double worst_ulps(double lo, int64_t points) {
  double worst = 0;
  for (int64_t k = 0; k <= points; ++k) {
    const T x = static_cast<T>(lo * static_cast<double>(k) / static_cast<double>(points));
    const long double exact = std::exp(static_cast<long double>(x));
    const T rounded = static_cast<T>(exact);
    const T ulp = std::nextafter(rounded, std::numeric_limits<T>::infinity()) - rounded;
    const long double err = std::fabs(static_cast<long double>(exp_nonpositive(x)) - exact);
    worst = std::max(worst, static_cast<double>(err / ulp));
  }
  return worst;
}

TEST(ExpNonpositive, FloatWithinTwoUlpsOverTheNormalRange) {
  // ln(FLT_MIN) = -87.3365...: below it the result is subnormal.
  const double ulps = worst_ulps<float>(-87.33, 2000000);
  std::printf("float: worst error %.3f ulp\n", ulps);
  EXPECT_LE(ulps, 2.0);
}

TEST(ExpNonpositive, DoubleWithinTwoUlpsOverTheNormalRange) {
  // ln(DBL_MIN) = -708.396...
  const double ulps = worst_ulps<double>(-708.39, 2000000);
  std::printf("double: worst error %.3f ulp\n", ulps);
  EXPECT_LE(ulps, 2.0);
}

TEST(ExpNonpositive, ExactlyOneAtZero) {
  EXPECT_EQ(exp_nonpositive(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive(0.0), 1.0);
  EXPECT_EQ(exp_nonpositive(-0.0), 1.0);
}

TEST(ExpNonpositive, ZeroBelowTheSmallestNormalResult) {
  EXPECT_EQ(exp_nonpositive(-87.34f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-1000.0f), 0.0f);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<float>::max()), 0.0f);
  EXPECT_EQ(exp_nonpositive(-708.4), 0.0);
  EXPECT_EQ(exp_nonpositive(-1e300), 0.0);
  EXPECT_EQ(exp_nonpositive(-std::numeric_limits<double>::infinity()), 0.0);
  // Just above the threshold the result is the normal number it should be.
  EXPECT_GT(exp_nonpositive(-87.33f), std::numeric_limits<float>::min());
  EXPECT_GT(exp_nonpositive(-708.39), std::numeric_limits<double>::min());
}

}  // namespace
