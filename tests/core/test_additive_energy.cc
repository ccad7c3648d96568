// label: core
// The additive energy (mona/core/additive_energy.h), forward and backward, against the
// formulas evaluated term by term in long double with libm's tanh, and against central
// finite differences of the forward pass.
#include "mona/core/additive_energy.h"

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
  std::vector<long double> e, e_scale, gq, gq_scale, gk, gk_scale, gw, gw_scale;
};

template <class T>
Reference reference(const std::vector<T>& q, const std::vector<T>& keys, const std::vector<T>& w,
                    const std::vector<T>& g, int64_t B, int64_t U, int64_t Tn, int64_t d) {
  Reference r;
  r.e.assign(B * U * Tn, 0);
  r.e_scale.assign(B * U * Tn, 0);
  r.gq.assign(B * U * d, 0);
  r.gq_scale.assign(B * U * d, 0);
  r.gk.assign(B * Tn * d, 0);
  r.gk_scale.assign(B * Tn * d, 0);
  r.gw.assign(d, 0);
  r.gw_scale.assign(d, 0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < U; ++i)
      for (int64_t j = 0; j < Tn; ++j) {
        const int64_t ij = (b * U + i) * Tn + j;
        const long double G = g[ij];
        for (int64_t k = 0; k < d; ++k) {
          const long double h = std::tanh(static_cast<long double>(q[(b * U + i) * d + k]) +
                                          static_cast<long double>(keys[(b * Tn + j) * d + k]));
          r.e[ij] += w[k] * h;
          r.e_scale[ij] += std::fabs(w[k] * h) + std::fabs(static_cast<long double>(w[k]));
          const long double dh = G * w[k] * (1 - h * h);
          r.gq[(b * U + i) * d + k] += dh;
          r.gq_scale[(b * U + i) * d + k] += std::fabs(G * w[k]);
          r.gk[(b * Tn + j) * d + k] += dh;
          r.gk_scale[(b * Tn + j) * d + k] += std::fabs(G * w[k]);
          r.gw[k] += G * h;
          r.gw_scale[k] += std::fabs(G);
        }
      }
  return r;
}

// Rounding allowance: tanh's few ulp of absolute error (the header's bound; 8 leaves 2x),
// plus one rounding per term added (n terms), both relative to the sum of |terms| (with
// |w| added for the energy, the bound of tanh's error times w).
template <class T>
long double allowance(long double scale, int64_t n) {
  return (8 + n) * static_cast<long double>(std::numeric_limits<T>::epsilon()) * scale;
}

template <class T>
void check_against_reference(uint64_t seed, int64_t B, int64_t U, int64_t Tn, int64_t d, double zero_grads) {
  SCOPED_TRACE(::testing::Message() << (sizeof(T) == 4 ? "float" : "double") << " B=" << B << " U=" << U
                                    << " T=" << Tn << " d=" << d);
  Random rnd(seed);
  auto draw = [&](size_t n, double sd) {
    const auto x = rnd.normals(n, 0.0, sd);
    return std::vector<T>(x.begin(), x.end());
  };
  // Arguments of tanh from about -10 to 10: both its linear part and its saturation.
  const std::vector<T> q = draw(B * U * d, 2.0), keys = draw(B * Tn * d, 2.0), w = draw(d, 1.0);
  std::vector<T> g = draw(B * U * Tn, 1.0);
  for (auto& x : g)
    if (rnd.uniform() < zero_grads) x = 0;  // padding entries: skipped by the kernel
  const Reference ref = reference(q, keys, w, g, B, U, Tn, d);

  std::vector<T> e(B * U * Tn, T(-7));
  core::additive_energy(q.data(), keys.data(), w.data(), e.data(), B, U, Tn, d);
  for (size_t n = 0; n < e.size(); ++n)
    ASSERT_LE(std::fabs(e[n] - ref.e[n]), allowance<T>(ref.e_scale[n], d)) << "e[" << n << "]";

  std::vector<T> gq(q.size(), T(-7)), gk(keys.size(), T(-7)), gw(d, T(-7));
  core::additive_energy_backward(g.data(), q.data(), keys.data(), w.data(), gq.data(), gk.data(), gw.data(), B,
                                 U, Tn, d);
  for (size_t n = 0; n < gq.size(); ++n)
    ASSERT_LE(std::fabs(gq[n] - ref.gq[n]), allowance<T>(ref.gq_scale[n], Tn)) << "grad_query[" << n << "]";
  for (size_t n = 0; n < gk.size(); ++n)
    ASSERT_LE(std::fabs(gk[n] - ref.gk[n]), allowance<T>(ref.gk_scale[n], U)) << "grad_keys[" << n << "]";
  for (int64_t k = 0; k < d; ++k)
    ASSERT_LE(std::fabs(gw[k] - ref.gw[k]), allowance<T>(ref.gw_scale[k], B * U * Tn)) << "grad_w[" << k << "]";

  // Gradients not asked for are not written, and the others do not depend on them.
  std::vector<T> gk2(keys.size(), T(-7));
  core::additive_energy_backward<T>(g.data(), q.data(), keys.data(), w.data(), nullptr, gk2.data(), nullptr, B, U,
                                 Tn, d);
  EXPECT_EQ(gk2, gk);
}

TEST(AdditiveEnergy, MatchesTermByTermFormulas) {
  // d below, at and between the vector widths (4-16 lanes, 4 vectors of partial sums);
  // U = 1 is a decoder's step; the last shape is large enough for the OpenMP loop.
  const int64_t shapes[][4] = {{1, 1, 1, 1}, {2, 1, 5, 7}, {3, 2, 9, 16}, {2, 3, 4, 67},
                               {4, 1, 11, 64}, {1, 5, 3, 130}, {8, 4, 32, 40}};
  uint64_t seed = 1;
  for (const auto& s : shapes) {
    check_against_reference<float>(seed++, s[0], s[1], s[2], s[3], 0.3);
    check_against_reference<double>(seed++, s[0], s[1], s[2], s[3], 0.3);
  }
}

// The backward pass is the derivative of the forward pass: central differences in double,
// step 1e-6 (truncation error ~1e-12 times the third derivative, rounding ~1e-10 for
// energies of size ~10), so 1e-7 absolute.
TEST(AdditiveEnergy, BackwardIsTheDerivativeOfForward) {
  const int64_t B = 2, U = 2, Tn = 3, d = 5;
  Random rnd(77);
  auto q = rnd.normals(B * U * d, 0.0, 1.5), keys = rnd.normals(B * Tn * d, 0.0, 1.5), w = rnd.normals(d);
  const auto g = rnd.normals(B * U * Tn);
  auto loss = [&]() {
    std::vector<double> e(B * U * Tn);
    core::additive_energy(q.data(), keys.data(), w.data(), e.data(), B, U, Tn, d);
    double s = 0;
    for (size_t n = 0; n < e.size(); ++n) s += g[n] * e[n];
    return s;
  };
  std::vector<double> gq(q.size()), gk(keys.size()), gw(d);
  core::additive_energy_backward(g.data(), q.data(), keys.data(), w.data(), gq.data(), gk.data(), gw.data(), B, U,
                                 Tn, d);
  const double h = 1e-6;
  auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
    for (size_t n = 0; n < x.size(); ++n) {
      const double x0 = x[n];
      x[n] = x0 + h;
      const double up = loss();
      x[n] = x0 - h;
      const double down = loss();
      x[n] = x0;
      EXPECT_NEAR(grad[n], (up - down) / (2 * h), 1e-7) << name << "[" << n << "]";
    }
  };
  check(q, gq, "query");
  check(keys, gk, "keys");
  check(w, gw, "w");
}

TEST(AdditiveEnergy, EmptySizesAndErrors) {
  std::vector<double> e(6, -1.0);
  // d = 0: every energy is the empty sum.
  core::additive_energy<double>(nullptr, nullptr, nullptr, e.data(), 2, 1, 3, 0);
  for (double x : e) EXPECT_EQ(x, 0.0);
  // No entries: nothing is read or written.
  core::additive_energy<double>(nullptr, nullptr, nullptr, nullptr, 0, 1, 3, 4);
  std::vector<double> gw(4, -1.0);
  core::additive_energy_backward<double>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, gw.data(), 2, 1, 0,
                                         4);
  for (double x : gw) EXPECT_EQ(x, 0.0);
  expect_error([] { core::additive_energy<float>(nullptr, nullptr, nullptr, nullptr, 1, 1, -2, 4); },
               "additive_energy: sizes must be >= 0, got batch = 1, out_len = 1, in_len = -2, dim = 4");
  std::vector<float> one(4, 0.5f), out(1);
  // Each null pointer is named.
  expect_error([&] { core::additive_energy<float>(nullptr, one.data(), one.data(), out.data(), 1, 1, 1, 4); },
               "additive_energy: query must not be null");
  expect_error([&] { core::additive_energy<float>(one.data(), nullptr, one.data(), out.data(), 1, 1, 1, 4); },
               "additive_energy: keys must not be null");
  expect_error([&] { core::additive_energy<float>(one.data(), one.data(), nullptr, out.data(), 1, 1, 1, 4); },
               "additive_energy: w must not be null");
  expect_error([&] { core::additive_energy<float>(one.data(), one.data(), one.data(), nullptr, 1, 1, 1, 4); },
               "additive_energy: e must not be null");
  std::vector<float> g4(4);
  expect_error([&] { core::additive_energy_backward<float>(nullptr, one.data(), one.data(), one.data(), g4.data(),
                                                           nullptr, nullptr, 1, 1, 1, 4); },
               "additive_energy_backward: grad_e must not be null");
  expect_error([&] { core::additive_energy_backward<float>(one.data(), one.data(), nullptr, one.data(), g4.data(),
                                                           nullptr, nullptr, 1, 1, 1, 4); },
               "additive_energy_backward: keys must not be null");
}

}  // namespace
}  // namespace mona::test
