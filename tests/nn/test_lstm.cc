// mona::nn::lstm_layer, lstm_cell and UnrolledLstmCell (mona/nn/lstm.h) against
// torch::nn::LSTM and torch::nn::LSTMCell, an independent implementation of the same equations: outputs,
// final states and the gradients of every input and parameter, in float64 and float32; and
// UnrolledLinear (mona/nn/unrolled_linear.h), whose weights enter the graph through the same
// node, against torch::nn::Linear; and the block copy that assembles their steps' operands
// (src/nn/unrolled.h), against at::Tensor::copy_.
#include "mona/nn/lstm.h"
#include "mona/nn/unrolled_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "../src/nn/unrolled.h"
#include "util/nn_test_util.h"
#include "util/test_util.h"

namespace mona::test {
namespace {

// Tolerances, relative to max(1, max |reference|): the two sides differ in the order of
// their sums (one GEMM over all steps against one per step; the biases added apart) and in
// sigmoid and tanh (a few ulp each, mona/core/lstm.h), and the errors pass through up to
// T = 7 steps of the recurrence. A few hundred ulp: 1e-13 for float64, 5e-5 for float32
// (2^-24 = 6e-8; the float32 GEMMs' sums run over up to 4H = 64 terms per step).
double tolerance(at::ScalarType dtype) { return dtype == at::kDouble ? 1e-13 : 5e-5; }

void expect_close(const at::Tensor& mona, const at::Tensor& ref, const std::string& what) {
  ASSERT_TRUE(mona.defined()) << what << ": undefined";
  ASSERT_EQ(mona.sizes(), ref.sizes()) << what;
  ASSERT_EQ(mona.scalar_type(), ref.scalar_type()) << what;
  const double scale = std::max(1.0, ref.abs().max().item<double>());
  const double err = (mona - ref).abs().max().item<double>();
  EXPECT_LE(err, tolerance(ref.scalar_type()) * scale) << what << ": max error " << err << " (scale " << scale
                                                       << ")";
}

// The gradients of a module's parameters after a backward pass, cloned, and cleared.
std::vector<at::Tensor> take_grads(torch::nn::Module& m) {
  std::vector<at::Tensor> g;
  for (auto& p : m.parameters()) {
    g.push_back(p.grad().clone());
    p.mutable_grad() = at::Tensor();
  }
  return g;
}

void check_layer(at::ScalarType dtype, int64_t B, int64_t T, int64_t D, int64_t H, bool initial_state) {
  SCOPED_TRACE(::testing::Message() << dtype << " B=" << B << " T=" << T << " D=" << D << " H=" << H
                                    << (initial_state ? " with (h0, c0)" : ""));
  torch::manual_seed(static_cast<uint64_t>(B * 1000 + T * 100 + D * 10 + H));
  torch::nn::LSTM ref(torch::nn::LSTMOptions(D, H).batch_first(true));
  ref->to(dtype);
  const auto opt = torch::TensorOptions().dtype(dtype);
  at::Tensor x = torch::randn({B, T, D}, opt).requires_grad_(), h0 = torch::randn({B, H}, opt).requires_grad_(),
             c0 = torch::randn({B, H}, opt).requires_grad_();
  // A loss that weighs every output: y, h_T and c_T.
  const at::Tensor wy = torch::randn({B, T, H}, opt), wh = torch::randn({B, H}, opt), wc = torch::randn({B, H}, opt);

  auto p = ref->named_parameters(false);
  const nn::LstmWeights w{p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"]};
  const nn::LstmLayerOutput out = initial_state ? nn::lstm_layer(x, w, h0, c0) : nn::lstm_layer(x, w);
  ((out.y * wy).sum() + (out.h * wh).sum() + (out.c * wc).sum()).backward();
  const std::vector<at::Tensor> mona_grads = take_grads(*ref);
  const at::Tensor gx = x.grad().clone(), gh0 = initial_state ? h0.grad().clone() : at::Tensor(),
                   gc0 = initial_state ? c0.grad().clone() : at::Tensor();
  for (at::Tensor* t : {&x, &h0, &c0}) t->mutable_grad() = at::Tensor();

  auto res = initial_state
                 ? ref->forward(x, std::make_tuple(h0.unsqueeze(0), c0.unsqueeze(0)))
                 : ref->forward(x);
  const at::Tensor y = std::get<0>(res), hT = std::get<0>(std::get<1>(res))[0], cT = std::get<1>(std::get<1>(res))[0];
  ((y * wy).sum() + (hT * wh).sum() + (cT * wc).sum()).backward();
  expect_close(out.y, y, "y");
  expect_close(out.h, hT, "h_T");
  expect_close(out.c, cT, "c_T");
  expect_close(gx, x.grad(), "dL/dx");
  if (initial_state) {
    expect_close(gh0, h0.grad(), "dL/dh0");
    expect_close(gc0, c0.grad(), "dL/dc0");
  }
  const std::vector<at::Tensor> ref_grads = take_grads(*ref);
  const auto names = ref->named_parameters(false).keys();
  for (size_t k = 0; k < ref_grads.size(); ++k) expect_close(mona_grads[k], ref_grads[k], "dL/d" + names[k]);
}

TEST(LstmLayer, MatchesTorchLstm) {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    check_layer(dtype, 3, 5, 4, 6, false);
    check_layer(dtype, 3, 5, 4, 6, true);
    check_layer(dtype, 1, 7, 3, 16, true);  // one row: time-major and batch-major coincide
    check_layer(dtype, 4, 1, 5, 3, true);   // one step
  }
}

// A layer continued from its final state equals the layer over the whole sequence: how
// the streaming encoder steps it (Encoder::stream_layers).
TEST(LstmLayer, ContinuesFromItsFinalState) {
  torch::manual_seed(5);
  torch::nn::LSTM m(torch::nn::LSTMOptions(3, 4).batch_first(true));
  m->to(at::kDouble);
  auto p = m->named_parameters(false);
  const nn::LstmWeights w{p["weight_ih_l0"], p["weight_hh_l0"], p["bias_ih_l0"], p["bias_hh_l0"]};
  torch::NoGradGuard no_grad;
  const at::Tensor x = torch::randn({2, 6, 3}, at::kDouble);
  const nn::LstmLayerOutput whole = nn::lstm_layer(x, w);
  const nn::LstmLayerOutput first = nn::lstm_layer(x.narrow(1, 0, 4), w);
  const nn::LstmLayerOutput rest = nn::lstm_layer(x.narrow(1, 4, 2), w, first.h, first.c);
  // The same equations; the input's GEMM over 4 + 2 steps instead of 6 may round apart.
  expect_close(torch::cat({first.y, rest.y}, 1), whole.y, "y");
  expect_close(rest.h, whole.h, "h_T");
  expect_close(rest.c, whole.c, "c_T");
  // No steps: the state passes through.
  const nn::LstmLayerOutput none = nn::lstm_layer(x.narrow(1, 0, 0), w, first.h, first.c);
  EXPECT_EQ(none.y.sizes(), (at::IntArrayRef{2, 0, 4}));
  EXPECT_TRUE(torch::equal(none.h, first.h));
  // No rows: empty outputs of the right sizes.
  const nn::LstmLayerOutput empty = nn::lstm_layer(torch::zeros({0, 3, 3}, at::kDouble), w);
  EXPECT_EQ(empty.y.sizes(), (at::IntArrayRef{0, 3, 4}));
  EXPECT_EQ(empty.h.sizes(), (at::IntArrayRef{0, 4}));
}

TEST(LstmCellFunction, MatchesTorchLstmCell) {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    SCOPED_TRACE(::testing::Message() << dtype);
    torch::manual_seed(11);
    const int64_t B = 3, D = 5, H = 4;
    torch::nn::LSTMCell ref(D, H);
    ref->to(dtype);
    const auto opt = torch::TensorOptions().dtype(dtype);
    const nn::LstmWeights w{ref->weight_ih, ref->weight_hh, ref->bias_ih, ref->bias_hh};
    const at::Tensor wh = torch::randn({3, B, H}, opt), wc = torch::randn({B, H}, opt);
    // Three steps, each cell's input and state the previous step's output, as in a decoder.
    auto run = [&](bool use_mona, at::Tensor x0, at::Tensor h, at::Tensor c) {
      at::Tensor loss = torch::zeros({}, opt);
      for (int step = 0; step < 3; ++step) {
        const at::Tensor x = step == 0 ? x0 : torch::cat({h, h.narrow(1, 0, 1)}, 1);
        auto hc = use_mona ? nn::lstm_cell(x, h, c, w) : ref->forward(x, std::make_tuple(h, c));
        h = std::get<0>(hc);
        c = std::get<1>(hc);
        loss = loss + (h * wh[step]).sum();
      }
      return loss + (c * wc).sum();
    };
    at::Tensor x = torch::randn({B, D}, opt).requires_grad_(), h = torch::randn({B, H}, opt).requires_grad_(),
               c = torch::randn({B, H}, opt).requires_grad_();
    const at::Tensor mona_loss = run(true, x, h, c);
    mona_loss.backward();
    const std::vector<at::Tensor> mona_grads = take_grads(*ref);
    const std::vector<at::Tensor> mona_input_grads = {x.grad().clone(), h.grad().clone(), c.grad().clone()};
    for (at::Tensor* t : {&x, &h, &c}) t->mutable_grad() = at::Tensor();
    const at::Tensor ref_loss = run(false, x, h, c);
    ref_loss.backward();
    expect_close(mona_loss, ref_loss, "loss");
    expect_close(mona_input_grads[0], x.grad(), "dL/dx");
    expect_close(mona_input_grads[1], h.grad(), "dL/dh");
    expect_close(mona_input_grads[2], c.grad(), "dL/dc");
    const std::vector<at::Tensor> ref_grads = take_grads(*ref);
    const auto names = ref->named_parameters(false).keys();
    for (size_t k = 0; k < ref_grads.size(); ++k) expect_close(mona_grads[k], ref_grads[k], "dL/d" + names[k]);
  }
}

// The analytic gradient against central differences, float64 (tests/util/nn_test_util.h
// gives the tolerance), of a loss over a whole layer; the biases left out (undefined) are
// zeros.
TEST(LstmLayer, GradientIsTheDerivative) {
  torch::manual_seed(21);
  const auto opt = torch::TensorOptions().dtype(at::kDouble);
  const int64_t B = 2, T = 3, D = 2, H = 3;
  at::Tensor x = torch::randn({B, T, D}, opt), h0 = torch::randn({B, H}, opt), c0 = torch::randn({B, H}, opt);
  at::Tensor w_ih = torch::randn({4 * H, D}, opt), w_hh = torch::randn({4 * H, H}, opt);
  const at::Tensor wy = torch::randn({B, T, H}, opt), wc = torch::randn({B, H}, opt);
  auto loss = [&]() {
    const nn::LstmLayerOutput o = nn::lstm_layer(x, {w_ih, w_hh, {}, {}}, h0, c0);
    return ((o.y * wy).sum() + (o.c * wc).sum());
  };
  for (at::Tensor* t : {&x, &h0, &c0, &w_ih, &w_hh}) t->requires_grad_();
  loss().backward();
  const std::vector<std::pair<at::Tensor*, const char*>> args = {
      {&x, "x"}, {&h0, "h0"}, {&c0, "c0"}, {&w_ih, "w_ih"}, {&w_hh, "w_hh"}};
  for (auto [t, name] : args) {
    const at::Tensor analytic = t->grad().clone();
    at::Tensor value = t->detach().clone();
    *t = value;
    const at::Tensor numeric = numeric_grad([&] { return loss().item<double>(); }, value);
    expect_grad_close(analytic, numeric, 1e-7, name);
  }
}

// Runs run(true) (mona) and run(false) (the reference), each followed by its backward pass,
// and compares the losses, the gradients of `inputs` (named by `names`) and, with
// weights_need_grad, those of `ref`'s parameters, which both runs read.
void expect_runs_agree(const std::function<at::Tensor(bool)>& run, torch::nn::Module& ref,
                       const std::vector<at::Tensor*>& inputs, const std::vector<std::string>& names,
                       bool weights_need_grad) {
  auto take_input_grads = [&] {
    std::vector<at::Tensor> g;
    for (at::Tensor* t : inputs) {
      g.push_back(t->grad().clone());
      t->mutable_grad() = at::Tensor();
    }
    return g;
  };
  const at::Tensor mona_loss = run(true);
  mona_loss.backward();
  const std::vector<at::Tensor> mona_grads = weights_need_grad ? take_grads(ref) : std::vector<at::Tensor>{};
  const std::vector<at::Tensor> mona_input_grads = take_input_grads();
  const at::Tensor ref_loss = run(false);
  ref_loss.backward();
  expect_close(mona_loss, ref_loss, "loss");
  const std::vector<at::Tensor> ref_input_grads = take_input_grads();
  for (size_t k = 0; k < inputs.size(); ++k) expect_close(mona_input_grads[k], ref_input_grads[k], names[k]);
  if (!weights_need_grad) return;
  const std::vector<at::Tensor> ref_grads = take_grads(ref);
  const auto params = ref.named_parameters(false).keys();
  ASSERT_EQ(mona_grads.size(), ref_grads.size());
  for (size_t k = 0; k < ref_grads.size(); ++k) expect_close(mona_grads[k], ref_grads[k], "dL/d" + params[k]);
}

// UnrolledLstmCell stepped as a decoder steps it: each step's input is two pieces, the
// second computed from the previous step's h (input feeding), against torch::nn::LSTMCell
// on the concatenated input: the loss, the gradients of every input piece, of (h0, c0) and
// of all four parameters. The cell is made for one step more than it takes (a decoder's
// batch whose longest output is shorter than the cell's steps leaves the last unused).
void check_unrolled(at::ScalarType dtype, int64_t B, int64_t U, bool weights_need_grad) {
  SCOPED_TRACE(::testing::Message() << dtype << " B=" << B << " U=" << U
                                    << (weights_need_grad ? "" : ", weights without gradient"));
  torch::manual_seed(static_cast<uint64_t>(31 + B * 10 + U));
  const int64_t E = 3, C = 2, H = 4;
  torch::nn::LSTMCell ref(E + C, H);
  ref->to(dtype);
  for (auto& p : ref->parameters()) p.requires_grad_(weights_need_grad);
  const auto opt = torch::TensorOptions().dtype(dtype);
  const nn::LstmWeights w{ref->weight_ih, ref->weight_hh, ref->bias_ih, ref->bias_hh};
  at::Tensor emb = torch::randn({B, U, E}, opt).requires_grad_(), h0 = torch::randn({B, H}, opt).requires_grad_(),
             c0 = torch::randn({B, H}, opt).requires_grad_(), feed = torch::randn({C, H}, opt).requires_grad_();
  const at::Tensor wh = torch::randn({U, B, H}, opt), wc = torch::randn({B, H}, opt);
  auto run = [&](bool use_mona) {
    nn::UnrolledLstmCell cell(w, B, U + 1);
    at::Tensor h = h0, c = c0, loss = torch::zeros({}, opt);
    for (int64_t i = 0; i < U; ++i) {
      const at::Tensor e = emb.select(1, i), fed = torch::tanh(torch::mm(h, feed.t()));  // [B, C]
      auto hc = use_mona ? cell.step({e, fed}, h, c) : ref->forward(torch::cat({e, fed}, 1), std::make_tuple(h, c));
      h = std::get<0>(hc);
      c = std::get<1>(hc);
      loss = loss + (h * wh[i]).sum();
    }
    if (use_mona) {
      EXPECT_EQ(cell.steps_taken(), U);
    }
    return loss + (c * wc).sum();
  };
  expect_runs_agree(run, *ref, {&emb, &h0, &c0, &feed},
                    {"dL/d(first piece)", "dL/dh0", "dL/dc0", "dL/d(second piece's weights)"}, weights_need_grad);
}

TEST(UnrolledLstmCell, MatchesTorchLstmCellSteps) {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    check_unrolled(dtype, 3, 5, true);
    check_unrolled(dtype, 1, 1, true);
    check_unrolled(dtype, 2, 3, false);
  }
}

// Without autograd (decoding), the steps' values are lstm_cell's; a batch of no rows gives
// empty states.
TEST(UnrolledLstmCell, WithoutGradientAndEmptyBatch) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(41);
  const int64_t B = 2, D = 3, H = 2;
  const nn::LstmWeights w{torch::randn({4 * H, D}, at::kDouble), torch::randn({4 * H, H}, at::kDouble),
                          torch::randn({4 * H}, at::kDouble), {}};
  nn::UnrolledLstmCell cell(w, B, 2);
  at::Tensor h = torch::randn({B, H}, at::kDouble), c = torch::randn({B, H}, at::kDouble);
  at::Tensor h_ref = h, c_ref = c;
  for (int i = 0; i < 2; ++i) {
    const at::Tensor x = torch::randn({B, D}, at::kDouble);
    std::tie(h, c) = cell.step({x}, h, c);
    std::tie(h_ref, c_ref) = nn::lstm_cell(x, h_ref, c_ref, w);
    expect_close(h, h_ref, "h");
    expect_close(c, c_ref, "c");
  }
  nn::UnrolledLstmCell empty(w, 0, 1);
  const auto [h0, c0] = empty.step({torch::zeros({0, D}, at::kDouble)}, {}, {});
  EXPECT_EQ(h0.sizes(), (std::vector<int64_t>{0, H}));
  EXPECT_EQ(c0.sizes(), (std::vector<int64_t>{0, H}));
}

// The weights' gradient, taken once over all steps, against central differences (float64;
// tests/util/nn_test_util.h gives the tolerance).
TEST(UnrolledLstmCell, WeightGradientIsTheDerivative) {
  torch::manual_seed(43);
  const auto opt = torch::TensorOptions().dtype(at::kDouble);
  const int64_t B = 2, U = 3, D = 2, H = 3;
  at::Tensor w_ih = torch::randn({4 * H, D}, opt), w_hh = torch::randn({4 * H, H}, opt),
             b_ih = torch::randn({4 * H}, opt);
  const at::Tensor x = torch::randn({U, B, D}, opt), wh = torch::randn({B, H}, opt);
  auto loss = [&]() {
    nn::UnrolledLstmCell cell({w_ih, w_hh, b_ih, {}}, B, U);
    at::Tensor h, c;
    for (int64_t i = 0; i < U; ++i) std::tie(h, c) = cell.step({x[i]}, h, c);
    return (h * wh).sum() + c.sum();
  };
  for (at::Tensor* t : {&w_ih, &w_hh, &b_ih}) t->requires_grad_();
  loss().backward();
  const std::vector<std::pair<at::Tensor*, const char*>> args = {{&w_ih, "w_ih"}, {&w_hh, "w_hh"}, {&b_ih, "b_ih"}};
  for (auto [t, name] : args) {
    const at::Tensor analytic = t->grad().clone();
    at::Tensor value = t->detach().clone();
    *t = value;
    const at::Tensor numeric = numeric_grad([&] { return loss().item<double>(); }, value);
    expect_grad_close(analytic, numeric, 1e-7, name);
  }
}

TEST(UnrolledLstmCell, BadArgumentsAreNamed) {
  const nn::LstmWeights w{torch::zeros({20, 4}), torch::zeros({20, 5}), torch::zeros({20}), torch::zeros({20})};
  expect_error([&] { nn::UnrolledLstmCell(w, 2, -1); }, "mona::nn::UnrolledLstmCell: steps: expected >= 0, got -1");
  expect_error([&] { nn::UnrolledLstmCell({w.w_ih, torch::zeros({20, 4}), w.b_ih, w.b_hh}, 2, 1); },
               "mona::nn::UnrolledLstmCell: w_hh: expected sizes [4H, H] = [16, 4], got [20, 4]");
  nn::UnrolledLstmCell cell(w, 2, 1);
  expect_error([&] { cell.step({torch::zeros({2, 3})}, {}, {}); },
               "mona::nn::UnrolledLstmCell::step: inputs: expected widths summing to D = 4 (w_ih's), got 3");
  expect_error([&] { cell.step({torch::zeros({3, 4})}, {}, {}); },
               "mona::nn::UnrolledLstmCell::step: inputs: expected [B = 2, D_k] of dtype Float, got [3, 4] of Float");
  expect_error([&] { cell.step({torch::zeros({2, 4})}, torch::zeros({2, 4}), {}); },
               "mona::nn::UnrolledLstmCell::step: h: expected sizes [B, H] = [2, 5], got [2, 4]");
  cell.step({torch::zeros({2, 1}), torch::zeros({2, 3})}, {}, {});
  expect_error([&] { cell.step({torch::zeros({2, 4})}, {}, {}); },
               "mona::nn::UnrolledLstmCell::step: all 1 steps the cell was made for are taken");
}

// UnrolledLinear stepped as the attention energies step their query projection: step i's
// input computed from step i-1's output (a decoder's feedback), against torch::nn::Linear:
// the loss and the gradients of the first input, the feedback weights and the parameters.
// Made for one step more than it takes.
void check_unrolled_linear(at::ScalarType dtype, int64_t B, int64_t U, bool bias, bool weights_need_grad) {
  SCOPED_TRACE(::testing::Message() << dtype << " B=" << B << " U=" << U << (bias ? "" : ", no bias")
                                    << (weights_need_grad ? "" : ", weights without gradient"));
  torch::manual_seed(static_cast<uint64_t>(53 + B * 10 + U));
  const int64_t K = 3, N = 5;
  torch::nn::Linear ref(torch::nn::LinearOptions(K, N).bias(bias));
  ref->to(dtype);
  for (auto& p : ref->parameters()) p.requires_grad_(weights_need_grad);
  const auto opt = torch::TensorOptions().dtype(dtype);
  at::Tensor x0 = torch::randn({B, K}, opt).requires_grad_(), feed = torch::randn({N, K}, opt).requires_grad_();
  const at::Tensor wy = torch::randn({U, B, N}, opt);
  auto run = [&](bool use_mona) {
    nn::UnrolledLinear layer(ref->weight, bias ? ref->bias : at::Tensor(), B, U + 1);
    at::Tensor x = x0, loss = torch::zeros({}, opt);
    for (int64_t i = 0; i < U; ++i) {
      const at::Tensor y = use_mona ? layer.step(x) : ref->forward(x);
      loss = loss + (y * wy[i]).sum();
      x = torch::tanh(torch::mm(y, feed));
    }
    if (use_mona) {
      EXPECT_EQ(layer.steps_taken(), U);
    }
    return loss + x.sum();
  };
  expect_runs_agree(run, *ref, {&x0, &feed}, {"dL/dx0", "dL/d(feedback weights)"}, weights_need_grad);
}

TEST(UnrolledLinear, MatchesTorchLinearSteps) {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    check_unrolled_linear(dtype, 3, 4, true, true);
    check_unrolled_linear(dtype, 1, 1, true, true);
    check_unrolled_linear(dtype, 2, 3, false, true);
    check_unrolled_linear(dtype, 2, 2, true, false);
  }
}

// Without autograd the steps' values are at::linear's; a batch of no rows gives [0, N].
TEST(UnrolledLinear, WithoutGradientAndEmptyBatch) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(59);
  const at::Tensor w = torch::randn({4, 3}, at::kDouble), b = torch::randn({4}, at::kDouble);
  nn::UnrolledLinear layer(w, b, 2, 2);
  for (int i = 0; i < 2; ++i) {
    const at::Tensor x = torch::randn({2, 3}, at::kDouble);
    expect_close(layer.step(x), at::linear(x, w, b), "y");
  }
  nn::UnrolledLinear empty(w, {}, 0, 1);
  EXPECT_EQ(empty.step(torch::zeros({0, 3}, at::kDouble)).sizes(), (std::vector<int64_t>{0, 4}));
}

// The weight and bias gradients, taken once over all steps, against central differences
// (float64; tests/util/nn_test_util.h gives the tolerance).
TEST(UnrolledLinear, WeightGradientIsTheDerivative) {
  torch::manual_seed(61);
  const auto opt = torch::TensorOptions().dtype(at::kDouble);
  const int64_t B = 2, U = 3, K = 3, N = 2;
  at::Tensor w = torch::randn({N, K}, opt), b = torch::randn({N}, opt);
  const at::Tensor x0 = torch::randn({B, K}, opt), feed = torch::randn({N, K}, opt), wy = torch::randn({B, N}, opt);
  auto loss = [&]() {
    nn::UnrolledLinear layer(w, b, B, U);
    at::Tensor x = x0, y;
    for (int64_t i = 0; i < U; ++i) {
      y = layer.step(x);
      x = torch::tanh(torch::mm(y, feed));
    }
    return (y * wy).sum() + x.sum();
  };
  for (at::Tensor* t : {&w, &b}) t->requires_grad_();
  loss().backward();
  const std::vector<std::pair<at::Tensor*, const char*>> args = {{&w, "weight"}, {&b, "bias"}};
  for (auto [t, name] : args) {
    const at::Tensor analytic = t->grad().clone();
    at::Tensor value = t->detach().clone();
    *t = value;
    const at::Tensor numeric = numeric_grad([&] { return loss().item<double>(); }, value);
    expect_grad_close(analytic, numeric, 1e-7, name);
  }
}

TEST(UnrolledLinear, BadArgumentsAreNamed) {
  const at::Tensor w = torch::zeros({4, 3}), b = torch::zeros({4});
  expect_error([&] { nn::UnrolledLinear(w, b, 2, -1); }, "mona::nn::UnrolledLinear: steps: expected >= 0, got -1");
  expect_error([&] { nn::UnrolledLinear(w, b, -2, 1); }, "mona::nn::UnrolledLinear: batch: expected >= 0, got -2");
  expect_error([&] { nn::UnrolledLinear(torch::zeros({4}), b, 2, 1); },
               "mona::nn::UnrolledLinear: weight: expected 2 dims [N, K], got [4]");
  expect_error([&] { nn::UnrolledLinear(w, torch::zeros({3}), 2, 1); },
               "mona::nn::UnrolledLinear: bias: expected [N = 4] of dtype Float (weight's), got [3] of Float");
  nn::UnrolledLinear layer(w, b, 2, 1);
  expect_error([&] { layer.step(torch::zeros({2, 4})); },
               "mona::nn::UnrolledLinear::step: x: expected [B = 2, K = 3] of dtype Float, got [2, 4] of Float");
  layer.step(torch::zeros({2, 3}));
  expect_error([&] { layer.step(torch::zeros({2, 3})); },
               "mona::nn::UnrolledLinear::step: all 1 steps the layer was made for are taken");
}

// detail::copy_block writes what copy_ into the narrowed columns writes, bit for bit, and
// leaves the other columns alone: on its memcpy path (rows of one dtype, contiguous along
// the row; src a whole matrix, a column slice with a longer row stride, or one row for
// every row) and on its copy_ path (a transposed src, another dtype).
TEST(UnrolledBlocks, CopyBlockWritesWhatCopyWrites) {
  torch::manual_seed(3);
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    const auto opts = at::TensorOptions().dtype(dtype);
    const at::Tensor wide = torch::randn({5, 9}, opts);
    const std::vector<std::pair<std::string, at::Tensor>> sources = {
        {"whole", torch::randn({5, 3}, opts)},
        {"column slice", wide.narrow(1, 4, 3)},
        {"one row for all", torch::randn({3}, opts)},
        {"transposed", torch::randn({3, 5}, opts).t()},
        {"other dtype", torch::randn({5, 3}, opts.dtype(dtype == at::kFloat ? at::kDouble : at::kFloat))},
    };
    for (const auto& [name, src] : sources) {
      for (const int64_t col : {0, 2, 4}) {
        const at::Tensor dst = torch::randn({5, 7}, opts), expected = dst.clone();
        expected.narrow(1, col, 3).copy_(src.dim() == 1 ? src.expand({5, 3}) : src);
        mona::nn::detail::copy_block(dst, col, src);
        EXPECT_TRUE(torch::equal(dst, expected)) << name << ", col " << col << ", " << dtype;
      }
    }
  }
}

TEST(LstmLayer, BadArgumentsAreNamed) {
  const at::Tensor x = torch::zeros({2, 3, 4});
  const nn::LstmWeights w{torch::zeros({20, 4}), torch::zeros({20, 5}), torch::zeros({20}), torch::zeros({20})};
  expect_error([&] { nn::lstm_layer(x.view({6, 4}), w); }, "mona::nn::lstm_layer: x: expected 3 dims [B, T, D]");
  expect_error([&] { nn::lstm_layer(x, {torch::zeros({20, 3}), w.w_hh, w.b_ih, w.b_hh}); },
               "mona::nn::lstm_layer: w_ih: expected sizes [4H, D] = [20, 4], got [20, 3]");
  expect_error([&] { nn::lstm_layer(x, {w.w_ih, torch::zeros({20, 4}), w.b_ih, w.b_hh}); },
               "mona::nn::lstm_layer: w_hh: expected sizes [4H, H] = [16, 4], got [20, 4]");
  expect_error([&] { nn::lstm_layer(x, {w.w_ih, w.w_hh, w.b_ih, torch::zeros({20}, at::kDouble)}); },
               "mona::nn::lstm_layer: b_hh: expected dtype Float (that of x), got Double");
  expect_error([&] { nn::lstm_layer(x, w, torch::zeros({3, 5})); },
               "mona::nn::lstm_layer: h0: expected sizes [B, H] = [2, 5], got [3, 5]");
  expect_error([&] { nn::lstm_cell(torch::zeros({2, 3}), torch::zeros({2, 5}), torch::zeros({2, 5}), w); },
               "mona::nn::lstm_cell: w_ih: expected sizes [4H, D] = [20, 3], got [20, 4]");
}

}  // namespace
}  // namespace mona::test
