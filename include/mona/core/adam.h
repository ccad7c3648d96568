// mona/core/adam.h: the end of a training step over every parameter, one pass each: the
// shards' gradients summed with the sum of their squares (the clipping norm's terms), then
// Adam's update with the clipping factor and weight decay applied on the way.
//
// No equation of the papers (../shared/papers): the update is Adam (amsgrad off) as
// LibTorch's torch::optim::Adam computes it, after torch::nn::utils::clip_grad_norm_ has
// scaled the gradient by `clip`. For each element, at the parameter's step t (1 at its first):
//
//   g = clip * grad + weight_decay * p
//   m = beta1 m + (1 - beta1) g                               (exp_avg)
//   v = beta2 v + (1 - beta2) g^2                             (exp_avg_sq)
//   p = p - step_size * m / (sqrt(v) / bias2_sqrt + eps)
//
// with step_size = lr / (1 - beta1^t) and bias2_sqrt = sqrt(1 - beta2^t) (AdamCoefficients::at).
// LibTorch takes that step as about ten operators per parameter, each a pass over it, and
// clip_grad_norm_ adds two more. On the G2P recipe's model (445,101 float parameters, one
// thread) the end of a training step took 2.3-2.9 ms that way and takes 0.7-0.8 ms with
// these two passes (bench/notes.md, "The optimizer step as two passes"). The arithmetic is
// the same; the results differ from LibTorch's by rounding only (the order of the operations
// within an element; tests/train/test_optimizer.cc compares the two).
//
// Shapes: every array holds n elements, contiguous; no two of a call's arrays may overlap.
//
// Errors (mona::ArgumentError): n < 0 or n_others < 0; a null pointer when n > 0 (an array,
// `others` when n_others > 0, or one of its n_others entries); coefficients outside Adam's
// domain (AdamCoefficients::at). The values are not checked: a non-finite gradient
// gives a non-finite parameter, which the loss reports.
//
// Threads: none inside (the caller runs parts of the parameters on threads of its own,
// mona/train/optimizer.h); compiled per kernel target (mona/core/cpu.h).
#pragma once

#include <cstdint>

namespace mona::core {

/// The scalars of one Adam update of one parameter.
struct AdamCoefficients {
  double clip = 1;           ///< the clipping factor min(1, max_norm / (||g|| + 1e-6)) (0 when ||g|| is
                             ///< infinite), or 1
  double weight_decay = 0;   ///< L2 coefficient added to the gradient (torch's weight_decay)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double step_size = 0;      ///< lr / (1 - beta1^t)
  double bias2_sqrt = 1;     ///< sqrt(1 - beta2^t)

  /// The coefficients at step t >= 1 with learning rate lr, as torch::optim::Adam derives
  /// them. Throws mona::ArgumentError naming the value when t < 1, lr < 0, a beta is outside
  /// [0, 1), eps <= 0, weight_decay < 0 or clip is not in [0, 1].
  static AdamCoefficients at(int64_t t, double lr, double beta1, double beta2, double eps, double weight_decay,
                             double clip);
};

/// Adds each of the `others` arrays (n_others of them, n elements each; null when
/// n_others = 0) into `grad`, in order (grad + others[0] + others[1] + ...), and returns the
/// sum of the squares of the result, accumulated in double in an order that depends only on
/// n (and the kernel target): the clipping norm's term of this parameter. With n_others = 0
/// `grad` is only read. T is float or double.
template <class T>
double sum_gradients(T* grad, const T* const* others, int64_t n_others, int64_t n);

/// One Adam update of a parameter of n elements (see the header comment): reads `grad`,
/// updates `param`, `exp_avg` and `exp_avg_sq` in place. T is float or double; the
/// coefficients are rounded to T once, as LibTorch's scalar arguments are. Returns whether
/// every updated parameter is finite: false when the step made one NaN or infinite (the
/// run diverged; read in the same pass, so it costs no second one).
template <class T>
bool adam_update(T* param, const T* grad, T* exp_avg, T* exp_avg_sq, int64_t n, const AdamCoefficients& c);

}  // namespace mona::core
