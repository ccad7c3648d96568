// label: core
// Masked softmax and chunk softmax (mona/core/softmax.h) against direct evaluation and
// finite differences.
#include "mona/core/softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "util/test_util.h"

namespace mona::test {
namespace {

using core::Grid;

TEST(Softmax, MatchesDirectFormulaWithPadding) {
  Random rnd(21);
  for (int trial = 0; trial < 50; ++trial) {
    const int64_t B = rnd.integer(1, 3), U = rnd.integer(1, 4), T = rnd.integer(1, 7);
    std::vector<int64_t> in_lens(B), out_lens(B);
    for (int64_t b = 0; b < B; ++b) {
      in_lens[b] = rnd.integer(0, T);
      out_lens[b] = rnd.integer(0, U);
    }
    auto e = rnd.normals(B * U * T, 0.0, 3.0);
    Grid g{B, U, T, in_lens.data(), out_lens.data()};
    std::vector<double> w(e.size(), -1.0);
    core::softmax(e.data(), w.data(), g);
    std::vector<float> ef(e.begin(), e.end()), wf(e.size());
    core::softmax(ef.data(), wf.data(), g);
    // Weights (<= 1) against the direct formula in double: the kernel shifts by the max,
    // sums <= 7 exponentials and multiplies by the reciprocal, a few roundings each, so
    // 1e-14 is ~45 double eps (measured 2.2e-16). The float kernel is compared with the
    // formula on its own float-rounded inputs (rounding e ~ 9 to float alone moves a weight
    // by up to ~5e-7), so that only its float arithmetic is measured: 16 float eps
    // (measured 6e-8; the former 1e-6 against the double inputs' formula left 9x).
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < U; ++i) {
        double z = 0, zf = 0;
        const int64_t n = i < out_lens[b] ? in_lens[b] : 0;
        for (int64_t j = 0; j < n; ++j) {
          z += std::exp(e[(b * U + i) * T + j]);
          zf += std::exp(static_cast<double>(ef[(b * U + i) * T + j]));
        }
        for (int64_t j = 0; j < T; ++j) {
          const int64_t k = (b * U + i) * T + j;
          const double want = j < n ? std::exp(e[k]) / z : 0.0;
          const double want_f = j < n ? std::exp(static_cast<double>(ef[k])) / zf : 0.0;
          EXPECT_NEAR(w[k], want, 1e-14);
          EXPECT_NEAR(wf[k], want_f, 16 * std::numeric_limits<float>::epsilon());
        }
      }
  }
}

TEST(Softmax, ExtremeEnergiesStayFinite) {
  std::vector<double> e = {1e4, -1e4, 1e4, -1e4}, w(4);
  Grid g{1, 1, 4, nullptr, nullptr};
  core::softmax(e.data(), w.data(), g);
  EXPECT_DOUBLE_EQ(w[0], 0.5);
  EXPECT_EQ(w[1], 0.0);
  EXPECT_DOUBLE_EQ(w[2], 0.5);
  std::vector<float> all_low = {-1e4f, -1e4f}, wf(2);
  Grid g2{1, 1, 2, nullptr, nullptr};
  core::softmax(all_low.data(), wf.data(), g2);  // no 0/0
  EXPECT_FLOAT_EQ(wf[0], 0.5f);
  EXPECT_FLOAT_EQ(wf[1], 0.5f);
}

TEST(Softmax, BackwardMatchesFiniteDifferences) {
  Random rnd(22);
  const int64_t B = 2, U = 3, T = 5;
  std::vector<int64_t> in_lens = {5, 3}, out_lens = {3, 2};
  Grid g{B, U, T, in_lens.data(), out_lens.data()};
  auto e = rnd.normals(B * U * T);
  const auto W = rnd.normals(e.size());
  auto loss = [&](const std::vector<double>& x) {
    std::vector<double> w(x.size());
    core::softmax(x.data(), w.data(), g);
    return std::inner_product(w.begin(), w.end(), W.begin(), 0.0);
  };
  std::vector<double> w(e.size()), ge(e.size());
  core::softmax(e.data(), w.data(), g);
  core::softmax_backward(W.data(), w.data(), ge.data(), g);
  expect_gradients_close(ge, numeric_gradient(loss, e), 1e-8, "grad_e");
}

TEST(ChunkSoftmax, RangeAndErrors) {
  std::vector<double> u = {3.0, 1.0, 2.0, -1e4, 1e4};
  std::vector<double> w(3);
  core::chunk_softmax(u.data(), 1, 3, w.data());
  const double z = std::exp(1.0) + std::exp(2.0);
  // Other arithmetic (shifted by the max, reciprocal): a few roundings of values < 1,
  // <= ~5e-16 (measured 5.6e-17).
  EXPECT_NEAR(w[0], std::exp(1.0) / z, 1e-15);
  EXPECT_NEAR(w[1], std::exp(2.0) / z, 1e-15);
  EXPECT_EQ(w[2], 0.0);
  core::chunk_softmax(u.data(), 4, 4, w.data());
  EXPECT_EQ(w[0], 1.0);
  expect_error([&] { core::chunk_softmax(u.data(), 3, 2, w.data()); },
               "chunk_softmax: expected 0 <= begin <= end, got begin = 3, end = 2");
  u[1] = std::numeric_limits<double>::infinity();
  expect_error([&] { core::chunk_softmax(u.data(), 0, 2, w.data()); },
               "u: expected finite energies, got inf at index 1");
  std::vector<double> e = {0.0, NAN};
  Grid g{1, 1, 2, nullptr, nullptr};
  expect_error([&] { core::softmax(e.data(), w.data(), g); },
               "softmax: e: expected finite values, got nan at [0, 0, 1]");
  // The backward pass names its null pointers and refuses a saved output that no softmax
  // gives (a NaN or a negative weight would turn into NaN or wrong gradients).
  std::vector<double> gw = {1.0, 2.0}, ge(2), w2 = {0.25, 0.75};
  expect_error([&] { core::softmax_backward<double>(gw.data(), nullptr, ge.data(), g); },
               "softmax_backward: w must not be null");
  w2[1] = NAN;
  expect_error([&] { core::softmax_backward(gw.data(), w2.data(), ge.data(), g); },
               "softmax_backward: w: expected");
  w2[1] = -0.5;
  expect_error([&] { core::softmax_backward(gw.data(), w2.data(), ge.data(), g); },
               "softmax_backward: w: expected");
}

}  // namespace
}  // namespace mona::test
