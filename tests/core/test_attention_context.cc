// label: core
// The attention context (mona/core/attention_context.h), forward and backward, against the
// sums written out term by term in long double, and against central finite differences of
// the forward pass.
#include "mona/core/attention_context.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "util/test_util.h"

namespace mona::test {
namespace {

// The exact values, and beside each the sum of the absolute values of its terms (the scale
// that rounding errors are relative to).
struct Reference {
  std::vector<long double> c, c_scale, gw, gw_scale, gh, gh_scale;
};

template <class T>
Reference reference(const std::vector<T>& w, const std::vector<T>& h, const std::vector<T>& g, int64_t B,
                    int64_t U, int64_t Tn, int64_t d) {
  Reference r;
  r.c.assign(B * U * d, 0);
  r.c_scale.assign(B * U * d, 0);
  r.gw.assign(B * U * Tn, 0);
  r.gw_scale.assign(B * U * Tn, 0);
  r.gh.assign(B * Tn * d, 0);
  r.gh_scale.assign(B * Tn * d, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < U; ++i)
      for (int64_t j = 0; j < Tn; ++j)
        for (int64_t k = 0; k < d; ++k) {
          const long double W = w[(b * U + i) * Tn + j], H = h[(b * Tn + j) * d + k], G = g[(b * U + i) * d + k];
          r.c[(b * U + i) * d + k] += W * H;
          r.c_scale[(b * U + i) * d + k] += std::fabs(W * H);
          r.gw[(b * U + i) * Tn + j] += G * H;
          r.gw_scale[(b * U + i) * Tn + j] += std::fabs(G * H);
          r.gh[(b * Tn + j) * d + k] += W * G;
          r.gh_scale[(b * Tn + j) * d + k] += std::fabs(W * G);
        }
  return r;
}

// One rounding per term added (n terms) and one per product, relative to the sum of |terms|.
template <class T>
long double allowance(long double scale, int64_t n) {
  return (n + 1) * static_cast<long double>(std::numeric_limits<T>::epsilon()) * scale;
}

template <class T>
void check_against_reference(uint64_t seed, int64_t B, int64_t U, int64_t Tn, int64_t d, double zero_weights) {
  SCOPED_TRACE(::testing::Message() << (sizeof(T) == 4 ? "float" : "double") << " B=" << B << " U=" << U
                                    << " T=" << Tn << " d=" << d);
  Random rnd(seed);
  auto draw = [&](size_t n) {
    const auto x = rnd.normals(n, 0.0, 1.0);
    return std::vector<T>(x.begin(), x.end());
  };
  std::vector<T> w = draw(B * U * Tn), h = draw(B * Tn * d);
  const std::vector<T> g = draw(B * U * d);
  for (auto& x : w)
    if (rnd.uniform() < zero_weights) x = 0;  // padding, the far side of a monotonic alignment
  const Reference ref = reference(w, h, g, B, U, Tn, d);

  std::vector<T> c(B * U * d, T(-7));
  core::attention_context(w.data(), h.data(), c.data(), B, U, Tn, d);
  for (size_t n = 0; n < c.size(); ++n)
    ASSERT_LE(std::fabs(c[n] - ref.c[n]), allowance<T>(ref.c_scale[n], Tn)) << "c[" << n << "]";

  std::vector<T> gw(w.size(), T(-7)), gh(h.size(), T(-7));
  core::attention_context_backward(g.data(), w.data(), h.data(), gw.data(), gh.data(), B, U, Tn, d);
  for (size_t n = 0; n < gw.size(); ++n)
    ASSERT_LE(std::fabs(gw[n] - ref.gw[n]), allowance<T>(ref.gw_scale[n], d)) << "grad_w[" << n << "]";
  for (size_t n = 0; n < gh.size(); ++n)
    ASSERT_LE(std::fabs(gh[n] - ref.gh[n]), allowance<T>(ref.gh_scale[n], U)) << "grad_h[" << n << "]";

  // A gradient not asked for is not written, and the other does not depend on it.
  std::vector<T> gh2(h.size(), T(-7)), gw2(w.size(), T(-7));
  core::attention_context_backward<T>(g.data(), w.data(), h.data(), nullptr, gh2.data(), B, U, Tn, d);
  EXPECT_EQ(gh2, gh);
  core::attention_context_backward<T>(g.data(), w.data(), h.data(), gw2.data(), nullptr, B, U, Tn, d);
  EXPECT_EQ(gw2, gw);
}

TEST(AttentionContext, MatchesTermByTermSums) {
  // d below, at and between the vector widths (2-16 lanes); U = 1 is a decoder's step; the
  // last shape is large enough for the OpenMP loop.
  const int64_t shapes[][4] = {{1, 1, 1, 1}, {2, 1, 5, 7}, {3, 2, 9, 16}, {2, 3, 4, 67},
                               {4, 1, 11, 128}, {1, 5, 3, 130}, {64, 1, 40, 96}};
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    check_against_reference<float>(seed++, s[0], s[1], s[2], s[3], 0.3);
    check_against_reference<double>(seed++, s[0], s[1], s[2], s[3], 0.3);
  }
}

// An entry of weight exactly 0 is not read: a non-finite value there (padding) does not reach
// the context or grad_h, while grad_w, which is asked of every entry, reads it.
TEST(AttentionContext, EntriesOfWeightZeroAreNotRead) {
  const int64_t B = 2, U = 2, Tn = 3, d = 4;
  std::vector<double> w = {0.5, 0.5, 0, 1, 0, 0, 0.25, 0.75, 0, 0, 1, 0};  // [B, U, T]
  std::vector<double> h(B * Tn * d, 1.0);
  for (int64_t k = 0; k < d; ++k) h[(0 * Tn + 2) * d + k] = std::numeric_limits<double>::quiet_NaN();  // b 0, j 2
  for (int64_t k = 0; k < d; ++k) h[(1 * Tn + 2) * d + k] = std::numeric_limits<double>::infinity();   // b 1, j 2
  std::vector<double> c(B * U * d), g(B * U * d, 1.0), gw(B * U * Tn), gh(B * Tn * d);
  core::attention_context(w.data(), h.data(), c.data(), B, U, Tn, d);
  for (double x : c) EXPECT_EQ(x, 1.0);  // every row's weights sum to 1 over entries of ones
  core::attention_context_backward(g.data(), w.data(), h.data(), gw.data(), gh.data(), B, U, Tn, d);
  for (int64_t k = 0; k < d; ++k) {
    EXPECT_EQ(gh[(0 * Tn + 2) * d + k], 0.0);
    EXPECT_EQ(gh[(1 * Tn + 2) * d + k], 0.0);
    EXPECT_EQ(gh[(0 * Tn + 0) * d + k], 1.5);   // w[0, 0, 0] + w[0, 1, 0]
    EXPECT_EQ(gh[(1 * Tn + 1) * d + k], 1.75);  // w[1, 0, 1] + w[1, 1, 1]
  }
  EXPECT_TRUE(std::isnan(gw[0 * Tn + 2]));  // b 0, i 0, j 2
  EXPECT_TRUE(std::isinf(gw[(1 * U + 1) * Tn + 2]));
}

// The backward pass is the derivative of the forward pass: the context is linear in each
// argument, so central differences in double (step 1e-3) are exact up to rounding (~1e-13).
TEST(AttentionContext, BackwardIsTheDerivativeOfForward) {
  const int64_t B = 2, U = 3, Tn = 4, d = 5;
  Random rnd(77);
  auto w = rnd.normals(B * U * Tn), h = rnd.normals(B * Tn * d);
  const auto g = rnd.normals(B * U * d);
  auto loss = [&]() {
    std::vector<double> c(B * U * d);
    core::attention_context(w.data(), h.data(), c.data(), B, U, Tn, d);
    double s = 0;
    for (size_t n = 0; n < c.size(); ++n) s += g[n] * c[n];
    return s;
  };
  std::vector<double> gw(w.size()), gh(h.size());
  core::attention_context_backward(g.data(), w.data(), h.data(), gw.data(), gh.data(), B, U, Tn, d);
  const double step = 1e-3;
  auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
    for (size_t n = 0; n < x.size(); ++n) {
      const double x0 = x[n];
      x[n] = x0 + step;
      const double up = loss();
      x[n] = x0 - step;
      const double down = loss();
      x[n] = x0;
      EXPECT_NEAR(grad[n], (up - down) / (2 * step), 1e-9) << name << "[" << n << "]";
    }
  };
  check(w, gw, "w");
  check(h, gh, "h");
}

TEST(AttentionContext, EmptySizesAndErrors) {
  std::vector<double> c(6, -1.0);
  // T = 0: every context is the empty sum.
  core::attention_context<double>(nullptr, nullptr, c.data(), 2, 1, 0, 3);
  for (double x : c) EXPECT_EQ(x, 0.0);
  // No contexts: nothing is read or written.
  core::attention_context<double>(nullptr, nullptr, nullptr, 0, 1, 3, 4);
  // U = 0: no term, every gradient is 0.
  std::vector<double> gh(2 * 3 * 4, -1.0);
  core::attention_context_backward<double>(nullptr, nullptr, nullptr, nullptr, gh.data(), 2, 0, 3, 4);
  for (double x : gh) EXPECT_EQ(x, 0.0);
  expect_error([] { core::attention_context<float>(nullptr, nullptr, nullptr, 1, 1, -2, 4); },
               "attention_context: sizes must be >= 0, got batch = 1, out_len = 1, in_len = -2, dim = 4");
  std::vector<float> one(4, 0.5f), out(4);
  expect_error([&] { core::attention_context<float>(nullptr, one.data(), out.data(), 1, 1, 1, 4); },
               "attention_context: w must not be null");
  expect_error([&] { core::attention_context<float>(one.data(), nullptr, out.data(), 1, 1, 1, 4); },
               "attention_context: h must not be null");
  expect_error([&] { core::attention_context<float>(one.data(), one.data(), nullptr, 1, 1, 1, 4); },
               "attention_context: c must not be null");
  expect_error([&] { core::attention_context_backward<float>(nullptr, one.data(), one.data(), out.data(), nullptr,
                                                             1, 1, 1, 4); },
               "attention_context_backward: grad_c must not be null");
  expect_error([&] { core::attention_context_backward<float>(one.data(), one.data(), nullptr, out.data(), nullptr,
                                                             1, 1, 1, 4); },
               "attention_context_backward: h must not be null");
}

}  // namespace
}  // namespace mona::test
