// label: core
// The optimizer step's passes (mona/core/adam.h) against the same equations evaluated in
// long double, element by element, with bounds from the number of roundings; the shards'
// gradient sum against the same additions in order (exact); errors naming the argument.
#include "mona/core/adam.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "util/temp_dir.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

using core::AdamCoefficients;

// Sizes around the vector widths (4 to 16 lanes), sum_gradients' block of 512 and its
// 8 partial sums: empty, shorter than a vector, tails of every kind, several blocks.
const std::vector<int64_t> kSizes = {0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 511, 512, 513, 4099};

template <class T>
struct AdamInputs {
  std::vector<T> p, g, m, v;
};

// A parameter mid-run: moments from earlier steps, some gradients exactly 0 (their update
// is the decay of the moments alone) and some tiny (where eps dominates the denominator).
template <class T>
AdamInputs<T> draw_adam(uint64_t seed, int64_t n) {
  Random rnd(seed);
  AdamInputs<T> x;
  for (int64_t k = 0; k < n; ++k) {
    x.p.push_back(static_cast<T>(rnd.normal(0, 1)));
    const int kind = static_cast<int>(rnd.integer(0, 9));
    x.g.push_back(static_cast<T>(kind == 0 ? 0.0 : kind == 1 ? rnd.normal(0, 1e-6) : rnd.normal(0, 0.5)));
    x.m.push_back(static_cast<T>(rnd.normal(0, 0.1)));
    x.v.push_back(static_cast<T>(std::abs(rnd.normal(0, 0.01))));
  }
  return x;
}

template <class T>
void expect_adam_update_exact_to_rounding(const AdamCoefficients& c, uint64_t seed) {
  const long double eps = std::numeric_limits<T>::epsilon();
  for (const int64_t n : kSizes) {
    const AdamInputs<T> in = draw_adam<T>(seed + static_cast<uint64_t>(n), n);
    AdamInputs<T> out = in;
    EXPECT_TRUE(core::adam_update(out.p.data(), out.g.data(), out.m.data(), out.v.data(), n, c)) << "n " << n;
    for (int64_t k = 0; k < n; ++k) {
      const long double p = in.p[k], grad = in.g[k], m = in.m[k], v = in.v[k];
      const long double b1 = c.beta1, b2 = c.beta2;
      const long double g = c.clip * grad + c.weight_decay * p;
      const long double m1 = b1 * m + (1 - b1) * g;
      const long double v1 = b2 * v + (1 - b2) * g * g;
      const long double denom = std::sqrt(v1) / c.bias2_sqrt + c.eps;
      const long double p1 = p - c.step_size * m1 / denom;
      // The kernel rounds the seven coefficients to T and each of about a dozen operations
      // once (eps / 2 each, FMA or not). m1 is a sum that may cancel, so its error is
      // bounded by its terms' magnitude M, not by |m1|: 8 eps M covers the 3 roundings of
      // g and the 4 of m1 with room. v1 has no cancellation: 8 eps v1. The update's
      // quotient adds the sqrt, the division by bias2_sqrt, + eps, the division by the
      // denominator and the product with step_size (16 eps of the update), and the last
      // subtraction one rounding of p1 (2 eps |p1|, twice the half-ulp).
      const long double M = b1 * std::abs(m) + (1 - b1) * (c.clip * std::abs(grad) + c.weight_decay * std::abs(p));
      const long double m_tol = 8 * eps * M;
      const long double p_tol = 2 * eps * std::abs(p1) + c.step_size * (m_tol + 16 * eps * std::abs(m1)) / denom;
      ASSERT_LE(std::abs(out.m[k] - m1), m_tol) << "exp_avg, n " << n << ", k " << k;
      ASSERT_LE(std::abs(out.v[k] - v1), 8 * eps * v1) << "exp_avg_sq, n " << n << ", k " << k;
      ASSERT_LE(std::abs(out.p[k] - p1), p_tol) << "param, n " << n << ", k " << k;
    }
    EXPECT_EQ(out.g, in.g) << "the gradient is only read, n " << n;
  }
}

TEST(AdamUpdate, IsTheEquationsToRoundingInFloatAndDouble) {
  // Mid-run (step 3, clipping acting, weight decay) and the first step (moments 0).
  const AdamCoefficients mid = AdamCoefficients::at(3, 1e-3, 0.9, 0.999, 1e-6, 1e-4, 0.37);
  const AdamCoefficients first = AdamCoefficients::at(1, 1e-2, 0.9, 0.98, 1e-8, 0.0, 1.0);
  expect_adam_update_exact_to_rounding<double>(mid, 11);
  expect_adam_update_exact_to_rounding<float>(mid, 12);
  expect_adam_update_exact_to_rounding<double>(first, 13);
  expect_adam_update_exact_to_rounding<float>(first, 14);
}

// The update says whether it left every parameter finite: one element made infinite (by a
// step size that overflows) or NaN (by a NaN gradient), anywhere among the n, is reported,
// in float and in double, at sizes on both sides of a vector's width.
template <class T>
void expect_non_finite_reported(uint64_t seed) {
  for (const int64_t n : kSizes) {
    if (n == 0) continue;
    for (const int64_t at : {int64_t{0}, n / 2, n - 1}) {
      for (const bool nan : {true, false}) {
        AdamInputs<T> x = draw_adam<T>(seed + static_cast<uint64_t>(n), n);
        AdamCoefficients c = AdamCoefficients::at(1, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1.0);
        if (nan) {
          x.g[at] = std::numeric_limits<T>::quiet_NaN();
        } else {
          // m' = -1 and v' = 1e-3, so the update is about +step_size: max + max overflows.
          x.p[at] = std::numeric_limits<T>::max();
          x.g[at] = -1;
          x.m[at] = -1;
          x.v[at] = 0;
          c.step_size = static_cast<double>(std::numeric_limits<T>::max());
        }
        EXPECT_FALSE(core::adam_update(x.p.data(), x.g.data(), x.m.data(), x.v.data(), n, c))
            << "n " << n << ", element " << at << (nan ? " NaN" : " inf");
      }
    }
  }
}

TEST(AdamUpdate, ReportsAStepThatMadeAParameterNonFinite) {
  expect_non_finite_reported<float>(21);
  expect_non_finite_reported<double>(22);
}

TEST(AdamCoefficients, AreLibTorchsBiasCorrections) {
  // torch::optim::Adam: step_size = lr / (1 - beta1^t), denominator sqrt(v) / sqrt(1 - beta2^t).
  const AdamCoefficients c = AdamCoefficients::at(4, 2e-3, 0.8, 0.99, 1e-7, 3e-5, 0.5);
  EXPECT_DOUBLE_EQ(c.step_size, 2e-3 / (1 - 0.8 * 0.8 * 0.8 * 0.8));
  EXPECT_DOUBLE_EQ(c.bias2_sqrt, std::sqrt(1 - 0.99 * 0.99 * 0.99 * 0.99));
  EXPECT_EQ(c.clip, 0.5);
  EXPECT_EQ(c.weight_decay, 3e-5);
  EXPECT_EQ(c.eps, 1e-7);
}

template <class T>
void expect_sum_gradients_in_order(uint64_t seed) {
  for (const int64_t n : kSizes) {
    for (const int64_t shards : {1, 2, 4}) {
      Random rnd(seed + static_cast<uint64_t>(n * 10 + shards));
      std::vector<std::vector<T>> g(static_cast<size_t>(shards));
      for (auto& s : g) s = cast<T>(rnd.normals(static_cast<size_t>(n), 0.0, 0.3));
      std::vector<T> sum = g[0];
      std::vector<const T*> others;
      for (int64_t s = 1; s < shards; ++s) others.push_back(g[static_cast<size_t>(s)].data());
      const double squares = core::sum_gradients(sum.data(), others.empty() ? nullptr : others.data(),
                                                 shards - 1, n);
      long double exact = 0;
      for (int64_t k = 0; k < n; ++k) {
        // The additions in the order of the shards, each rounded to T: what the kernel adds.
        T expected = g[0][k];
        for (int64_t s = 1; s < shards; ++s) expected += g[static_cast<size_t>(s)][k];
        ASSERT_EQ(sum[k], expected) << "n " << n << ", shards " << shards << ", k " << k;
        exact += static_cast<long double>(expected) * expected;
      }
      // n squares of T values, each exact in double for float and rounded once for double,
      // summed in double: at most n + 1 roundings of double's eps relative to the sum.
      EXPECT_LE(std::abs(squares - exact), (n + 2) * std::numeric_limits<double>::epsilon() * exact)
          << "n " << n << ", shards " << shards;
    }
  }
}

TEST(SumGradients, AddsTheShardsInOrderAndSumsTheSquares) {
  expect_sum_gradients_in_order<float>(21);
  expect_sum_gradients_in_order<double>(22);
}

TEST(AdamUpdate, NamesTheArgumentItRefuses) {
  std::vector<float> x(4, 1.0f);
  const AdamCoefficients c = AdamCoefficients::at(1, 1e-3, 0.9, 0.999, 1e-8, 0.0, 1.0);
  EXPECT_ERROR_CONTAINS(core::adam_update<float>(nullptr, x.data(), x.data(), x.data(), 4, c), "param", "null");
  EXPECT_ERROR_CONTAINS(core::adam_update<float>(x.data(), nullptr, x.data(), x.data(), 4, c), "grad", "null");
  EXPECT_ERROR_CONTAINS(core::adam_update<float>(x.data(), x.data(), nullptr, x.data(), 4, c), "exp_avg", "null");
  EXPECT_ERROR_CONTAINS(core::adam_update<float>(x.data(), x.data(), x.data(), nullptr, 4, c), "exp_avg_sq", "null");
  EXPECT_ERROR_CONTAINS(core::adam_update<float>(x.data(), x.data(), x.data(), x.data(), -1, c), "n", "got -1");
  EXPECT_NO_THROW(core::adam_update<float>(nullptr, nullptr, nullptr, nullptr, 0, c));  // nothing to update
  EXPECT_ERROR_CONTAINS(core::sum_gradients<float>(nullptr, nullptr, 0, 4), "grad", "null");
  EXPECT_ERROR_CONTAINS(core::sum_gradients<float>(x.data(), nullptr, 1, 4), "others", "null");
  const float* none[1] = {nullptr};
  EXPECT_ERROR_CONTAINS(core::sum_gradients<float>(x.data(), none, 1, 4), "others[0]", "null");
  EXPECT_ERROR_CONTAINS(core::sum_gradients<float>(x.data(), nullptr, -1, 4), "n_others", "-1");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(0, 1e-3, 0.9, 0.999, 1e-8, 0, 1), "t", "got 0");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(1, -1, 0.9, 0.999, 1e-8, 0, 1), "lr", "got -1");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(1, 1e-3, 1.0, 0.999, 1e-8, 0, 1), "beta1", "got 1");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(1, 1e-3, 0.9, -0.5, 1e-8, 0, 1), "beta2", "got -0.5");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(1, 1e-3, 0.9, 0.999, 0, 0, 1), "eps", "got 0");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(1, 1e-3, 0.9, 0.999, 1e-8, -1, 1), "weight_decay", "got -1");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(1, 1e-3, 0.9, 0.999, 1e-8, 0, 1.5), "clip", "got 1.5");
  EXPECT_ERROR_CONTAINS(AdamCoefficients::at(1, 1e-3, 0.9, 0.999, 1e-8, 0, std::nan("")), "clip", "nan");
}

}  // namespace
}  // namespace mona::test
