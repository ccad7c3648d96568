// mona/core/lstm.h: the elementwise part of an LSTM step, forward and backward, one pass
// each.
//
// The encoders and decoders of the papers' speech models are LSTMs (000 A.1, 002 D.1.2: a
// stack of unidirectional LSTM layers encodes; the decoder is one LSTM whose input is the
// previous output's embedding and the attention context). One step, in PyTorch's gate
// order (input, forget, cell, output) and layout:
//
//   a = x W_ih^T + b_ih + h_prev W_hh^T + b_hh             (the caller: two GEMMs; b_hh here)
//   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o)
//   c = f * c_prev + i * g,   h = o * tanh(c)
//
// Backward, with tc = tanh(c) recomputed, dh = dL/dh and dc_in = dL/dc from outside the step:
//
//   dc = dc_in + dh o (1 - tc^2),   dL/dc_prev = dc f
//   dL/da_i = dc g i (1 - i),  dL/da_f = dc c_prev f (1 - f),
//   dL/da_g = dc i (1 - g^2),  dL/da_o = dh tc o (1 - o)
//
// The weight and input gradients are products of dL/da with x, h_prev and the weights: the
// caller's GEMMs (mona/nn/lstm.h). LibTorch's LSTM cell issues about ten elementwise
// operators forward and as many autograd nodes backward per step, each a pass over
// [B, 4H] or [B, H]; these kernels are one pass each.
//
// sigmoid and tanh are computed from e = exp(-|x|) (src/core/vexp.h, a polynomial that the
// loops vectorise): sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below; tanh(x) =
// sign(x) (1 - e2) / (1 + e2) with e2 = exp(-2 |x|). Both are within a few units in the
// last place of 1 (float 6e-8, double 1.1e-16) of the exact values for every finite x.
//
// Shapes (row-major, contiguous): gates and grad_gates [B, 4H]; bias [4H]; c_prev, c, h,
// grad_h, grad_c, grad_c_prev [B, H].
//
// Errors (mona::ArgumentError): negative sizes; a null pointer (every argument is required
// when B H > 0). The values are not checked (a non-finite pre-activation gives a non-finite
// state, which the loss reports).
//
// Threads: rows in parallel with OpenMP when the call is large enough (src/core/parallel.h).
#pragma once

#include <cstdint>

namespace mona::core {

/// Forward: `gates` [B, 4H] holds the pre-activations a without `bias` [4H] (b_hh) on entry
/// and the activations (i, f, g, o) on return (what the backward pass reads). c_prev [B, H]
/// is the previous cell state. Writes c and h [B, H].
template <class T>
void lstm_cell(T* gates, const T* bias, const T* c_prev, T* c, T* h, int64_t batch, int64_t hidden);

/// Backward: from the activations (`gates` as lstm_cell left them), c_prev, c, and the
/// gradients grad_h and grad_c of the step's outputs, writes grad_gates [B, 4H] (dL/da) and
/// grad_c_prev [B, H]. grad_c_prev may be grad_c (the recurrence's cell gradient updated in
/// place); no other two arguments may overlap.
template <class T>
void lstm_cell_backward(const T* gates, const T* c_prev, const T* c, const T* grad_h, const T* grad_c,
                        T* grad_gates, T* grad_c_prev, int64_t batch, int64_t hidden);

}  // namespace mona::core
