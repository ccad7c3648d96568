// label: core
// The LSTM cell's elementwise passes (mona/core/lstm.h) against the equations evaluated in
// long double with libm's exp and tanh, and the backward pass against central finite
// differences of the forward pass.
#include "mona/core/lstm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "util/test_util.h"

namespace mona::test {
namespace {

long double sigmoid_exact(long double x) { return 1 / (1 + std::exp(-x)); }

// Inputs of one step: pre-activations (without bias), bias, c_prev, and the gradients of
// the step's outputs.
template <class T>
struct Step {
  std::vector<T> a, bias, c_prev, grad_h, grad_c;
};

template <class T>
Step<T> draw_step(uint64_t seed, int64_t B, int64_t H, double spread) {
  Random rnd(seed);
  auto draw = [&](size_t n, double sd) { return cast<T>(rnd.normals(n, 0.0, sd)); };
  // Pre-activations from about -3 spread to 3 spread: the gates' linear parts and their
  // saturation.
  return {draw(B * 4 * H, spread), draw(4 * H, 1.0), draw(B * H, 2.0), draw(B * H, 1.0), draw(B * H, 1.0)};
}

// Rounding allowance: each sigmoid and tanh is within a few ulp of 1 (the header's bound;
// 8 leaves 2x), and an output is a sum of at most three products of such factors with the
// inputs, so 32 ulp of 1 times the inputs' magnitude.
template <class T>
long double allowance(long double scale) {
  return 32 * static_cast<long double>(std::numeric_limits<T>::epsilon()) * scale;
}

template <class T>
void check_against_equations(uint64_t seed, int64_t B, int64_t H, double spread) {
  SCOPED_TRACE(::testing::Message() << (sizeof(T) == 4 ? "float" : "double") << " B=" << B << " H=" << H
                                    << " spread=" << spread);
  const Step<T> s = draw_step<T>(seed, B, H, spread);
  std::vector<T> gates = s.a, c(B * H, T(-7)), h(B * H, T(-7));
  core::lstm_cell(gates.data(), s.bias.data(), s.c_prev.data(), c.data(), h.data(), B, H);
  std::vector<T> grad_gates(B * 4 * H, T(-7)), grad_c_prev(B * H, T(-7));
  core::lstm_cell_backward(gates.data(), s.c_prev.data(), c.data(), s.grad_h.data(), s.grad_c.data(),
                           grad_gates.data(), grad_c_prev.data(), B, H);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t k = 0; k < H; ++k) {
      const int64_t n = b * H + k;
      auto pre = [&](int gate) {
        return static_cast<long double>(s.a[b * 4 * H + gate * H + k]) + s.bias[gate * H + k];
      };
      const long double i = sigmoid_exact(pre(0)), f = sigmoid_exact(pre(1)), g = std::tanh(pre(2)),
                        o = sigmoid_exact(pre(3)), cp = s.c_prev[n];
      const long double cn = f * cp + i * g, tc = std::tanh(cn);
      const long double dh = s.grad_h[n], dc = s.grad_c[n] + dh * o * (1 - tc * tc);
      const long double scale = 1 + std::fabs(cp) + std::fabs(dh) + std::fabs(s.grad_c[n]) * (1 + std::fabs(cp));
      const long double activations[4] = {i, f, g, o};
      for (int gate = 0; gate < 4; ++gate) {
        ASSERT_LE(std::fabs(gates[b * 4 * H + gate * H + k] - activations[gate]), allowance<T>(1))
            << "activation of gate " << gate << " at [" << b << ", " << k << "]";
      }
      ASSERT_LE(std::fabs(c[n] - cn), allowance<T>(1 + std::fabs(cp))) << "c[" << b << ", " << k << "]";
      ASSERT_LE(std::fabs(h[n] - o * tc), allowance<T>(1 + std::fabs(cp))) << "h[" << b << ", " << k << "]";
      const long double grads[4] = {dc * g * i * (1 - i), dc * cp * f * (1 - f), dc * i * (1 - g * g),
                                    dh * tc * o * (1 - o)};
      for (int gate = 0; gate < 4; ++gate) {
        ASSERT_LE(std::fabs(grad_gates[b * 4 * H + gate * H + k] - grads[gate]), allowance<T>(scale))
            << "grad of gate " << gate << " at [" << b << ", " << k << "]";
      }
      ASSERT_LE(std::fabs(grad_c_prev[n] - dc * f), allowance<T>(scale)) << "grad_c_prev[" << b << ", " << k << "]";
    }
  }
  // grad_c_prev written over grad_c (the in-place form the layer's recurrence uses): the same
  // values.
  std::vector<T> dc_in_place = s.grad_c, grad_gates2(B * 4 * H);
  core::lstm_cell_backward(gates.data(), s.c_prev.data(), c.data(), s.grad_h.data(), dc_in_place.data(),
                           grad_gates2.data(), dc_in_place.data(), B, H);
  EXPECT_EQ(dc_in_place, grad_c_prev);
  EXPECT_EQ(grad_gates2, grad_gates);
}

TEST(LstmCell, MatchesTheEquations) {
  // H below, at and between the vector widths (2-16 lanes); the last shape is large enough
  // for the OpenMP loop.
  const int64_t shapes[][2] = {{1, 1}, {2, 3}, {3, 8}, {2, 17}, {5, 64}, {4, 130}, {80, 512}};
  uint64_t seed = 1;
  for (const auto& sh : shapes) {
    for (double spread : {1.0, 6.0}) {
      check_against_equations<float>(seed++, sh[0], sh[1], spread);
      check_against_equations<double>(seed++, sh[0], sh[1], spread);
    }
  }
}

// Saturated gates: the values are their limits to rounding, never NaN (exp(-|x|) cannot
// overflow).
TEST(LstmCell, SaturatedGatesStayFinite) {
  const int64_t H = 4;
  std::vector<double> gates = {100, -100, 800, -800,  -100, 100, -800, 800,
                               800, -800, 100, -100,  800, 800, -800, -800};
  const std::vector<double> bias(4 * H, 0.0), c_prev = {1, -1, 2, 0.5};
  std::vector<double> c(H), h(H);
  core::lstm_cell(gates.data(), bias.data(), c_prev.data(), c.data(), h.data(), 1, H);
  // i = (1, 0, 1, 0), f = (0, 1, 0, 1), g = (1, -1, 1, -1), o = (1, 1, 0, 0)
  EXPECT_EQ(c, (std::vector<double>{1, -1, 1, 0.5}));
  EXPECT_NEAR(h[0], std::tanh(1.0), 1e-15);
  EXPECT_NEAR(h[1], std::tanh(-1.0), 1e-15);
  EXPECT_EQ(h[2], 0.0);
  EXPECT_EQ(h[3], 0.0);
  std::vector<double> grad_gates(4 * H), grad_c_prev(H);
  const std::vector<double> ones(H, 1.0);
  core::lstm_cell_backward(gates.data(), c_prev.data(), c.data(), ones.data(), ones.data(), grad_gates.data(),
                           grad_c_prev.data(), 1, H);
  for (double x : grad_gates) EXPECT_TRUE(std::isfinite(x));
}

// The backward pass is the derivative of the forward pass: central differences in double
// (tests/util/test_util.h gives the tolerance).
TEST(LstmCell, BackwardIsTheDerivativeOfForward) {
  const int64_t B = 2, H = 5;
  const Step<double> s = draw_step<double>(9, B, H, 1.5);
  auto loss = [&](std::vector<double> gates, const std::vector<double>& c_prev) {
    std::vector<double> c(B * H), h(B * H);
    core::lstm_cell(gates.data(), s.bias.data(), c_prev.data(), c.data(), h.data(), B, H);
    double sum = 0;
    for (int64_t n = 0; n < B * H; ++n) sum += s.grad_h[n] * h[n] + s.grad_c[n] * c[n];
    return sum;
  };
  std::vector<double> gates = s.a, c(B * H), h(B * H), grad_gates(B * 4 * H), grad_c_prev(B * H);
  core::lstm_cell(gates.data(), s.bias.data(), s.c_prev.data(), c.data(), h.data(), B, H);
  core::lstm_cell_backward(gates.data(), s.c_prev.data(), c.data(), s.grad_h.data(), s.grad_c.data(),
                           grad_gates.data(), grad_c_prev.data(), B, H);
  expect_gradients_close(grad_gates,
                         numeric_gradient([&](const std::vector<double>& a) { return loss(a, s.c_prev); }, s.a), 1e-7,
                         "dL/dgates");
  expect_gradients_close(grad_c_prev,
                         numeric_gradient([&](const std::vector<double>& cp) { return loss(s.a, cp); }, s.c_prev), 1e-7,
                         "dL/dc_prev");
}

TEST(LstmCell, EmptySizesAndErrors) {
  // No entries: nothing is read or written.
  core::lstm_cell<float>(nullptr, nullptr, nullptr, nullptr, nullptr, 0, 8);
  core::lstm_cell_backward<double>(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, 3, 0);
  expect_error([] { core::lstm_cell<float>(nullptr, nullptr, nullptr, nullptr, nullptr, 1, -2); },
               "lstm_cell: sizes must be >= 0, got batch = 1, hidden = -2");
  std::vector<float> four(4, 0.5f), one(1);
  expect_error([&] { core::lstm_cell<float>(four.data(), four.data(), nullptr, one.data(), one.data(), 1, 1); },
               "lstm_cell: c_prev must not be null");
  expect_error(
      [&] {
        core::lstm_cell_backward<float>(four.data(), one.data(), one.data(), nullptr, one.data(), four.data(),
                                        one.data(), 1, 1);
      },
      "lstm_cell_backward: grad_h must not be null");
}

}  // namespace
}  // namespace mona::test
