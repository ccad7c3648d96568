// Distance of a float result from a double one in float ulps, for the kernels whose float
// versions compute in double and round each output once (mona/core/poisson_binomial.h,
// conditional_bernoulli.h, cb_marginal.h: "a float result is the double one to within one
// float ulp"). Their tests run the double kernel on the float inputs converted to double
// (exact), so the two results differ by that one rounding alone: at most 0.5 ulp when it
// rounds to nearest, and the promise allows 1.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

namespace mona::test {

/// |f - d| in units of the gap from |f| to the next float away from 0 (the spacing of
/// floats at f); equal infinities count 0, any other non-finite value +inf.
inline double float_ulps(float f, double d) {
  if (!std::isfinite(f) || !std::isfinite(d)) {
    return static_cast<double>(f) == d ? 0.0 : std::numeric_limits<double>::infinity();
  }
  const float a = std::abs(f);
  const double gap =
      static_cast<double>(std::nextafter(a, std::numeric_limits<float>::infinity())) - a;
  return std::abs(static_cast<double>(f) - d) / gap;
}

/// The largest float_ulps over two equally long arrays.
inline double max_float_ulps(const std::vector<float>& f, const std::vector<double>& d) {
  EXPECT_EQ(f.size(), d.size());
  double m = 0;
  for (size_t k = 0; k < std::min(f.size(), d.size()); ++k) m = std::max(m, float_ulps(f[k], d[k]));
  return m;
}

}  // namespace mona::test
