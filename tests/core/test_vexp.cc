// label: core
// exp_nonpositive (src/core/vexp.h), the vectorisable exp of MoChA's chunk weights, against
// expl in long double: relative error in ulps of the correctly rounded result over the whole
// range where the result is a normal number, exact values at 0, and 0 below that range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../src/core/vexp.h"

// The vector form, as the kernels include it (inside a namespace of their own).
namespace lanes {
#include "../src/core/vexp_lanes.inc"
}  // namespace lanes

namespace {

using mona::core::detail::exp_nonpositive;

// The copy the x86-64-v3 MoChA kernels run: exp_nonpositive inlined into code compiled for
// AVX2 and FMA (src/core/targets.h), where the compiler fuses its multiply-adds into FMAs,
// which round once instead of twice. Its accuracy is checked too (on CPUs that run it).
#if defined(__x86_64__) && defined(__GNUC__)
#define MONA_TEST_V3 1
template <class T>
__attribute__((target("avx2,fma"), flatten, noinline)) T exp_nonpositive_v3(T x) {
  return exp_nonpositive(x);
}
bool cpu_runs_v3() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }
#else
#define MONA_TEST_V3 0
#endif

// Largest error of exp (exp_nonpositive by default) in units of the last place of the
// rounded exact value, over `points` evenly spaced arguments in [lo, 0] (lo above the
// underflow threshold).
template <class T, T (*exp)(T) = exp_nonpositive>
double worst_ulps(double lo, int64_t points) {
  double worst = 0;
  for (int64_t k = 0; k <= points; ++k) {
    const T x = static_cast<T>(lo * static_cast<double>(k) / static_cast<double>(points));
    const long double exact = std::exp(static_cast<long double>(x));
    const T rounded = static_cast<T>(exact);
    const T ulp = std::nextafter(rounded, std::numeric_limits<T>::infinity()) - rounded;
    const long double err = std::fabs(static_cast<long double>(exp(x)) - exact);
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

#if MONA_TEST_V3
TEST(ExpNonpositive, V3CopyWithinTwoUlpsOverTheNormalRange) {
  if (!cpu_runs_v3()) GTEST_SKIP() << "this CPU does not run x86-64-v3 code";
  const double f = worst_ulps<float, exp_nonpositive_v3<float>>(-87.33, 2000000);
  const double d = worst_ulps<double, exp_nonpositive_v3<double>>(-708.39, 2000000);
  std::printf("x86-64-v3 copy: float worst error %.3f ulp, double %.3f ulp\n", f, d);
  EXPECT_LE(f, 2.0);
  EXPECT_LE(d, 2.0);
  EXPECT_EQ(exp_nonpositive_v3(0.0f), 1.0f);
  EXPECT_EQ(exp_nonpositive_v3(0.0), 1.0);
  EXPECT_EQ(exp_nonpositive_v3(-87.34f), 0.0f);
  EXPECT_EQ(exp_nonpositive_v3(-708.4), 0.0);
}
#endif

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

// exp_nonpositive_lanes (vexp_lanes.inc), the same arithmetic on GCC vectors (MAtChA's kernels),
// gives the scalar function's bits in every lane: arguments spread over [-800, 0] for float and
// [-1000, 0] for double, so that both sides of the underflow threshold are covered, plus
// 0, -0 and -inf. Compiled here for the baseline target, where neither side has FMAs to
// contract into.
template <class T, int Lanes>
void expect_lanes_equal_scalar(double lo) {
  typedef T Vec __attribute__((vector_size(Lanes * sizeof(T))));
  std::vector<T> xs = {T(0), -T(0), -std::numeric_limits<T>::infinity()};
  for (int64_t k = 0; k <= 200000; ++k) xs.push_back(static_cast<T>(lo * static_cast<double>(k) / 200000.0));
  while (xs.size() % Lanes != 0) xs.push_back(T(-1));
  for (size_t k = 0; k < xs.size(); k += Lanes) {
    Vec v;
    std::memcpy(&v, xs.data() + k, sizeof v);
    const Vec e = lanes::exp_nonpositive_lanes(v);
    for (int L = 0; L < Lanes; ++L) {
      const T scalar = exp_nonpositive(xs[k + static_cast<size_t>(L)]);
      ASSERT_EQ(std::memcmp(&e[L], &scalar, sizeof scalar), 0)
          << "x = " << xs[k + static_cast<size_t>(L)] << ": lanes " << e[L] << ", scalar " << scalar;
    }
  }
}

TEST(ExpNonpositive, LanesGiveTheScalarBits) {
  // 16-byte vectors, the baseline's (wider ones run the same code lane for lane).
  expect_lanes_equal_scalar<float, 4>(-800);
  expect_lanes_equal_scalar<double, 2>(-1000);
}

}  // namespace
