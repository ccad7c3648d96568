// mona/nn/lstm.h: the LSTM layer and cell of mona's encoders and decoders, each step one
// elementwise kernel (mona/core/lstm.h) beside LibTorch's matrix products.
//
// The same equations, gate order (input, forget, cell, output) and parameters as
// torch::nn::LSTM (one unidirectional layer) and torch::nn::LSTMCell:
//
//   [i f g o] = x W_ih^T + b_ih + h_prev W_hh^T + b_hh,  i, f, o sigmoid, g tanh
//   c = f * c_prev + i * g,   h = o * tanh(c)
//
// so a model keeps those modules as its parameters (and checkpoints their names) and calls
// these functions on their weights. What differs is the autograd graph. LibTorch records
// about ten elementwise operators per step forward and as many nodes backward, each an
// operator dispatch and an allocation on [B, 4H] or [B, H] tensors; at the sizes of the
// G2P recipe (B = 32-64, H = 128) those fixed costs, not the arithmetic, were most of a
// training step (bench/notes.md, "The LSTM steps"). Here:
//   * lstm_layer is one autograd node for the whole sequence. Forward: one GEMM for the
//     input's part of every step, then per step one GEMM (h_prev W_hh^T) and the kernel.
//     Backward: per step the kernel and one GEMM (dL/dh_prev); then the weight and input
//     gradients as one GEMM each over all steps.
//   * lstm_cell is one autograd node per step (two GEMMs and the kernel forward; the kernel
//     and five GEMMs backward), for decoders whose next input depends on the step's output.
// The sigmoid and tanh are mona's (mona/core/lstm.h gives their accuracy), so results agree
// with LibTorch's to rounding, not bit for bit (tests/nn/test_lstm.cc: values and gradients
// against torch::nn::LSTM and LSTMCell).
//
// Dtypes float32 and float64, CPU, all tensors of one dtype. Errors: mona::ArgumentError
// naming the argument and the sizes found. Backward passes are first order (as in
// mona/nn/functional.h). Threads: LibTorch's GEMMs and the kernel's OpenMP rows.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

namespace mona::nn {

/// One LSTM's parameters in PyTorch's layout (H hidden units, D inputs). The biases may be
/// undefined (none).
struct LstmWeights {
  at::Tensor w_ih;  ///< [4H, D]
  at::Tensor w_hh;  ///< [4H, H]
  at::Tensor b_ih;  ///< [4H]
  at::Tensor b_hh;  ///< [4H]
};

/// The outputs of lstm_layer.
struct LstmLayerOutput {
  at::Tensor y;  ///< [B, T, H]: h after every step
  at::Tensor h;  ///< [B, H]: h after the last step
  at::Tensor c;  ///< [B, H]: c after the last step
};

/// One unidirectional LSTM layer over a batch-first sequence x [B, T, D], from the state
/// (h0, c0) [B, H] (undefined: zeros). Every step of every row is computed, padding
/// included (as torch::nn::LSTM over a padded batch: a unidirectional layer's outputs at
/// valid steps never read padding). Differentiable in x, h0, c0 and the weights. With
/// T = 0, y is [B, 0, H] and (h, c) are the initial state.
LstmLayerOutput lstm_layer(const at::Tensor& x, const LstmWeights& weights, const at::Tensor& h0 = {},
                           const at::Tensor& c0 = {});

/// One LSTM step (torch::nn::LSTMCell): x [B, D], h and c [B, H] (undefined: zeros) ->
/// (h', c') [B, H] each.
/// Differentiable in x, h, c and the weights.
std::tuple<at::Tensor, at::Tensor> lstm_cell(const at::Tensor& x, const at::Tensor& h, const at::Tensor& c,
                                             const LstmWeights& weights);

}  // namespace mona::nn
