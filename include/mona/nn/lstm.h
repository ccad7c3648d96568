// mona/nn/lstm.h: the LSTM layer and cell of mona's encoders and decoders, each step one
// elementwise kernel (mona/core/lstm.h) beside the matrix products: oneDNN's sgemm for
// float32 (at these sizes 0.55-0.7 of the time of OpenBLAS's, which LibTorch calls;
// bench/notes.md), LibTorch's for float64.
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
//     and four GEMMs backward: dL/dx, dL/dh_prev, dL/dW_ih, dL/dW_hh), for decoders whose
//     next input depends on the step's output.
//   * UnrolledLstmCell is such a decoder's cell over a whole training sequence: per step one
//     node with one GEMM each way, and the weight gradients taken once, as one GEMM over all
//     steps, after the last step's backward.
// The sigmoid and tanh are mona's (mona/core/lstm.h gives their accuracy) and the float32
// products oneDNN's, so results agree with LibTorch's to rounding, not bit for bit (tests/nn/test_lstm.cc: values and gradients
// against torch::nn::LSTM and LSTMCell).
//
// Dtypes float32 and float64, CPU, all tensors of one dtype. Errors: mona::ArgumentError
// naming the argument and the sizes found. Backward passes are first order (as in
// mona/nn/functional.h). Threads: the GEMMs' and the kernel's OpenMP threads (the calling
// thread's OpenMP count, which mona::nn::set_threads sets).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <tuple>
#include <vector>

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

/// One LSTM cell stepped through a training sequence whose step i reads what step i-1
/// produced (a decoder with input feeding: the attention context that h_{i-1} queries is
/// part of step i's input, as in 000 Algorithm 1; mona/nn/seq2seq.h), so that the steps
/// cannot be one lstm_layer. Each step computes
/// what lstm_cell(x_i, h_{i-1}, c_{i-1}, weights) computes, to rounding (the input's and
/// the state's products are one GEMM here, two there); what differs is the backward pass:
///   * a step is one autograd node: forward one GEMM ([x_i h_{i-1}] [W_ih W_hh]^T, the step's
///     input pieces and state written side by side into a buffer the cell keeps: no cat
///     node) and the kernel; backward the kernel and one GEMM (dL/d[x_i h_{i-1}]);
///   * the weight and bias gradients are one GEMM over all steps
///     (dL/d[W_ih W_hh] = sum_i dL/dgates_i^T [x_i h_{i-1}]), taken by one node that every
///     step's gates depend on, after the last step's backward: the parameters receive one
///     gradient per sequence instead of one per step. Per step this saves four of lstm_cell's
///     six GEMMs (two of them weight gradients with K = B), the bias sum, the four
///     accumulations into the parameters' gradients and the cat of the input's pieces.
/// The weights are read when the cell is made: a change to them afterwards (an optimizer
/// step) reaches the next cell, not this one.
///
/// Shapes: the weights as in LstmWeights (D inputs, H units); a step's input pieces [B, D_k]
/// with sum_k D_k = D, placed side by side in that order; h, c [B, H]. Dtypes float32 and
/// float64, CPU, all of one dtype.
/// Errors: mona::ArgumentError naming the argument and the sizes found; a step beyond
/// `steps`; first-order backward only (as lstm_cell).
class UnrolledLstmCell {
 public:
  /// The cell of `weights` for at most `steps` steps of `batch` rows (steps, batch >= 0).
  UnrolledLstmCell(const LstmWeights& weights, int64_t batch, int64_t steps);
  /// The next step: its input, the concatenation of `inputs` along dim 1, and the previous
  /// state (h, c) [B, H] (undefined: zeros) -> (h', c') [B, H]. Differentiable in every
  /// input piece, h, c and the weights.
  std::tuple<at::Tensor, at::Tensor> step(const std::vector<at::Tensor>& inputs, const at::Tensor& h,
                                          const at::Tensor& c);
  /// Steps taken so far.
  int64_t steps_taken() const;

  struct Shared;  ///< What the steps share (src/nn/lstm.cc).

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace mona::nn
