// mona/nn/unrolled_linear.h: a linear layer stepped through a training sequence whose step
// i's input is known only after step i-1, with its weight gradients taken once for all
// steps. The attention energies' query projections are such layers: step i's query is the
// decoder state s_{i-1} that the previous step produced (000 Algorithm 1; 002 eqs. 15-16,
// W_s s_{i-1}; mona/nn/energy.h, Energy::unroll).
//
// torch::nn::Linear called once per step records per step a product, a bias addition and,
// backward, their nodes and two accumulations into the parameters' gradients (for a [B, 1,
// Dq] query, also matmul's reshapes). UnrolledLinear's step is one autograd node: forward
// one GEMM with the bias, backward one GEMM (dL/dx_i); the weight and bias gradients are one
// GEMM and one sum over all steps, taken after the last step's backward by the node that
// UnrolledLstmCell's weights use as well (mona/nn/lstm.h).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

namespace mona::nn {

/// y_i = x_i W^T + b for the steps i = 0, 1, .. of one training sequence: what
/// torch::nn::Linear gives step by step, to rounding (the float32 products are oneDNN's,
/// as in mona/nn/lstm.h), differentiable in every x_i, W and b.
/// The weights are read when the layer is made: a change to them afterwards (an optimizer
/// step) reaches the next layer made, not this one.
///
/// Shapes: weight [N, K], bias [N] or undefined (none); x_i [B, K] -> y_i [B, N]. Dtypes
/// float32 and float64, CPU, all of one dtype.
/// Errors: mona::ArgumentError naming the argument and the sizes found; a step beyond
/// `steps`; first-order backward only.
class UnrolledLinear {
 public:
  /// The layer of `weight` and `bias` for at most `steps` steps of `batch` rows (>= 0 each).
  UnrolledLinear(const at::Tensor& weight, const at::Tensor& bias, int64_t batch, int64_t steps);
  /// The next step: x [B, K] -> x W^T + b [B, N].
  at::Tensor step(const at::Tensor& x);
  /// Steps taken so far.
  int64_t steps_taken() const;

  struct Shared;  ///< What the steps share (src/nn/unrolled_linear.cc).

 private:
  std::shared_ptr<Shared> shared_;
};

}  // namespace mona::nn
